# The README's two commands: `make book` and `make test`.
# Everything they need is installed here, into .venv, from pinned versions.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
BUILD := _build
# The execution cache is keyed on the pages' code cells only; this file
# records a hash of the package so that a change under src/ re-executes them.
SRC_HASH := $(BUILD)/.package-hash
PORT ?= 8000

.PHONY: help install book book-strict execute test unit lint typecheck \
	slow serve clean benchmark

help:
	@echo "make book       create .venv, install, execute and build the HTML"
	@echo "make test       lint, typecheck, unit tests and doctests, strict"
	@echo "                clean build, build and browser checks"
	@echo "make lint       ruff on src/, tests/, scripts/ and the pages' code"
	@echo "make serve      serve $(BUILD)/html on http://127.0.0.1:$(PORT)"
	@echo "make benchmark  time the package against PyTorch built-ins"
	@echo "make clean      remove the build, caches and .venv"

install: $(STAMP)

# Reinstalls only when the project's dependencies change.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch first and pinned: a looser spec pulls a multi-GB CUDA build.
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[book,test]'
	touch $@

# Pre-execute the pages in parallel (jupyter-cache's local-parallel
# executor, one kernel per core) into the cache the build reads.
execute: $(STAMP)
	$(PY) scripts/execute_pages.py --hash-file $(SRC_HASH)

book: execute
	$(VENV)/bin/jupyter-book build . --path-output .

# What CI checks: a clean build, warnings as errors, nitpicky references.
book-strict: $(STAMP)
	rm -rf $(BUILD)
	$(PY) scripts/execute_pages.py --hash-file $(SRC_HASH)
	$(VENV)/bin/jupyter-book build . --path-output . -n -W --keep-going

# ruff does not read MyST pages: lint_pages.py hands it their code cells.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(PY) scripts/lint_pages.py

typecheck: $(STAMP)
	$(VENV)/bin/mypy

# The unit tests and the >>> examples in the package's docstrings.
unit: $(STAMP)
	$(PY) -m pytest -q -m "not slow" --doctest-modules tests src/transformer_book

# The build machinery, a clean `pip install .`, and the browser check of
# the site built by book-strict.
slow: $(STAMP)
	$(PY) -m pytest -q -m slow

test: lint typecheck unit book-strict slow

serve:
	@test -f $(BUILD)/html/index.html || { echo "run 'make book' first"; exit 1; }
	$(PYTHON) -m http.server --bind 127.0.0.1 --directory $(BUILD)/html $(PORT)

benchmark: $(STAMP)
	$(PY) benchmarks/attention.py

clean:
	rm -rf $(BUILD) $(VENV) .pytest_cache .ruff_cache .hypothesis
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
