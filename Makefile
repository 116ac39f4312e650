# The README's two commands: `make book` and `make test`.
# Everything they need is installed here, into .venv, from pinned versions.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
BUILD := _build
# The execution cache is keyed on the pages' code cells only; this file
# records a hash of the package and the preset (BOOK_PRESET) the cache was
# filled with, so that a change under src/ re-executes the pages and each
# preset has a cache of its own (scripts/execute_pages.py).
SRC_HASH := $(BUILD)/.package-hash
PORT ?= 8000
# Test processes for `make unit`: one per core.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
# Where pip finds torch. Empty: pip's configured index (today's behaviour).
# CI sets PyTorch's CPU wheel index, https://download.pytorch.org/whl/cpu:
# the registry's plain torch==2.13.0 is the multi-GB CUDA build.
TORCH_INDEX_URL ?=
# The workflow schema check (GitHub's schema ships with the tool).
CHECK_JSONSCHEMA_VERSION := 0.39.0
CHECK_JSONSCHEMA := $(VENV)/.check-jsonschema-$(CHECK_JSONSCHEMA_VERSION)
WORKFLOWS := .github/workflows/test.yml .github/workflows/book.yml
# A folder of reference copies of the gpu preset's data: `make book
# BOOK_DATA=DIR` fills the data cache from it first, each file checked
# (transformer_book.data.seed_cache). By default ../shared/data when that
# folder exists (the development machines, which have no network); empty
# (elsewhere, CI): the pages download what they need.
BOOK_DATA ?= $(wildcard ../shared/data)
EXECUTE := $(PY) scripts/execute_pages.py \
	$(if $(BOOK_DATA),--seed-data $(BOOK_DATA))
# The release check: sdist and wheel built and checked, tools pinned here.
BUILD_VERSION := 1.6.1
TWINE_VERSION := 7.0.0
DIST_TOOLS := $(VENV)/.dist-tools-$(BUILD_VERSION)-$(TWINE_VERSION)
# Stands for the checked sdist and wheel in _build/dist.
WHEEL := $(BUILD)/dist/.checked

.PHONY: help install book book-strict html-strict execute test check unit \
	lint typecheck slow serve clean benchmark workflows smoke dist

help:
	@echo "make book       create .venv, install, execute and build the HTML"
	@echo "make test       lint, typecheck, unit tests and doctests, strict"
	@echo "                clean build, build and browser checks"
	@echo "make check      the inner loop: lint, types, unit tests and doctests"
	@echo "make lint       ruff on src/, tests/, scripts/ and the pages' code"
	@echo "make workflows  check .github/workflows against GitHub's schema"
	@echo "make smoke      every page's gpu branch on this machine, capped"
	@echo "make dist       build the sdist and wheel and check them"
	@echo "make serve      serve $(BUILD)/html on http://127.0.0.1:$(PORT)"
	@echo "make benchmark  time the package against PyTorch built-ins"
	@echo "make clean      remove the build, caches and .venv"

install: $(STAMP)

# Reinstalls only when the project's dependencies change.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch first and pinned: a looser spec pulls a multi-GB CUDA build.
	# pip compiles bytecode on one core; compileall does it on every core
	# (where PYTHONDONTWRITEBYTECODE is set, uncompiled modules would be
	# compiled again by every kernel and test process).
	$(PY) -m pip install --quiet --no-compile torch==2.13.0 \
		$(if $(TORCH_INDEX_URL),--index-url $(TORCH_INDEX_URL))
	$(PY) -m pip install --quiet --no-compile -e '.[book,test]'
	$(PY) -m compileall -q -j 0 "$$($(PY) -c \
		'import sysconfig; print(sysconfig.get_path("purelib"))')" \
		> /dev/null || true  # a file that does not compile stays uncached
	touch $@

# Pre-execute the pages in parallel (jupyter-cache's local-parallel
# executor, one kernel per core) into the cache the build reads.
execute: $(STAMP)
	$(EXECUTE) --hash-file $(SRC_HASH)

# Ends with the data each page used and the five slowest pages.
book: execute
	$(VENV)/bin/jupyter-book build . --path-output .
	$(PY) scripts/execute_pages.py --report

# What CI checks: every page read afresh by Sphinx, warnings as errors,
# nitpicky references. Sphinx's saved environment and the HTML go (an
# incremental build would not warn again about an unchanged page); the
# execution cache stays, so no page executes twice in one `make test`.
book-strict: execute
	$(MAKE) --no-print-directory html-strict

# The strict build of the pages executed already (book-strict's second
# half; `make test` runs it beside the smoke run).
html-strict: $(STAMP)
	rm -rf $(BUILD)/html $(BUILD)/.doctrees $(BUILD)/jupyter_execute
	$(VENV)/bin/jupyter-book build . --path-output . -n -W --keep-going
	$(PY) scripts/execute_pages.py --report

# Every page's gpu branch on this machine (BOOK_SMOKE=1), steps and data
# capped by the pages, into _build/smoke, which no build reads: proves the
# code paths run; its numbers are not published.
smoke: $(STAMP)
	$(EXECUTE) --smoke

# ruff does not read MyST pages: lint_pages.py hands it their code cells.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(PY) scripts/lint_pages.py

# The tool is pinned here, not in pyproject.toml: only `make test` uses it.
$(CHECK_JSONSCHEMA): $(STAMP)
	$(PY) -m pip install --quiet check-jsonschema==$(CHECK_JSONSCHEMA_VERSION)
	touch $@

# Both workflows against GitHub's workflow schema.
workflows: $(CHECK_JSONSCHEMA)
	$(VENV)/bin/check-jsonschema --builtin-schema vendor.github-workflows \
		$(WORKFLOWS)

typecheck: $(STAMP)
	$(VENV)/bin/mypy

# The unit tests and the >>> examples in the package's docstrings, on
# every core (pytest-xdist).
unit: $(STAMP) $(CHECK_JSONSCHEMA)
	$(PY) -m pytest -q -n $(JOBS) -m "not slow" --doctest-modules \
		tests src/transformer_book

# The inner loop, in two minutes: everything but the book and the slow
# checks, two at a time.
check: $(STAMP)
	$(MAKE) --no-print-directory -j2 --output-sync=target lint typecheck unit

# The build machinery, the built wheel in a clean venv (after `make
# dist`), and the browser check of the site built by book-strict; one test
# file per process, three at a time: these tests spend much of their time
# waiting on a browser, kernels or subprocesses (on 2 cores, idle: 145 s
# with two processes, 130 s with three, 168 s with four).
slow: $(STAMP) $(WHEEL)
	$(PY) -m pytest -q -n 3 --dist loadfile -m slow

# Two at a time where the work allows (2 cores), the output grouped by
# target: the checks that execute no page, then the pages, then the strict
# HTML (one core) beside the smoke run, then the slow checks.
PARALLEL := $(MAKE) --no-print-directory -j2 --output-sync=target
test: $(STAMP)
	+$(PARALLEL) lint workflows typecheck unit dist
	$(MAKE) --no-print-directory execute
	+$(PARALLEL) html-strict smoke
	$(MAKE) --no-print-directory slow

serve:
	@test -f $(BUILD)/html/index.html || { echo "run 'make book' first"; exit 1; }
	$(PYTHON) -m http.server --bind 127.0.0.1 --directory $(BUILD)/html $(PORT)

# After check-jsonschema's install: two pips must not write one venv at once.
$(DIST_TOOLS): $(STAMP) $(CHECK_JSONSCHEMA)
	$(PY) -m pip install --quiet build==$(BUILD_VERSION) \
		twine==$(TWINE_VERSION)
	touch $@

# The sdist and the wheel, as a release would upload them; rebuilt when
# a file they hold changed.
dist: $(WHEEL)
$(WHEEL): $(DIST_TOOLS) pyproject.toml README.md \
		$(shell find src -type f -not -path '*/__pycache__/*' 2>/dev/null)
	rm -rf $(BUILD)/dist
	$(PY) -m build --outdir $(BUILD)/dist .
	rm -rf build  # setuptools' scratch folder
	$(VENV)/bin/twine check --strict $(BUILD)/dist/*
	touch $@

benchmark: $(STAMP)
	$(PY) benchmarks/attention.py

clean:
	rm -rf $(BUILD) $(VENV) .pytest_cache .ruff_cache .hypothesis
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
