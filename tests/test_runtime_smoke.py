"""Smoke runs (BOOK_SMOKE): the gpu preset, with sizes capped."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import torch

from transformer_book import runtime

SIZES = {"steps": 1000, "batch_size": 256, "d_model": 128}


@pytest.fixture
def clean_env(monkeypatch):
    monkeypatch.delenv("BOOK_PRESET", raising=False)
    monkeypatch.delenv("BOOK_SMOKE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    return monkeypatch


@pytest.mark.parametrize("value", ["1", "true", " YES ", "On"])
def test_smoke_on_forces_the_gpu_preset_without_cuda(clean_env, value):
    assert runtime.preset() == "cpu"
    clean_env.setenv("BOOK_SMOKE", value)
    assert runtime.smoke() is True
    assert runtime.preset() == "gpu"


@pytest.mark.parametrize("value", ["", "0", "false", "No", "off"])
def test_smoke_off_values(clean_env, value):
    clean_env.setenv("BOOK_SMOKE", value)
    assert runtime.smoke() is False
    assert runtime.preset() == "cpu"


def test_smoke_unset_is_off(clean_env):
    assert runtime.smoke() is False


def test_bad_smoke_value_names_the_variable(clean_env):
    clean_env.setenv("BOOK_SMOKE", "maybe")
    with pytest.raises(ValueError, match=r"BOOK_SMOKE='maybe'"):
        runtime.smoke()
    with pytest.raises(ValueError, match="BOOK_SMOKE"):
        runtime.preset()


def test_smoke_with_the_cpu_preset_is_a_contradiction(clean_env):
    clean_env.setenv("BOOK_SMOKE", "1")
    clean_env.setenv("BOOK_PRESET", "cpu")
    with pytest.raises(ValueError, match=r"BOOK_SMOKE.*BOOK_PRESET='cpu'"):
        runtime.preset()
    clean_env.setenv("BOOK_PRESET", "GPU")
    assert runtime.preset() == "gpu"


def test_smoke_sizes_replaces_entries_only_in_a_smoke_run(clean_env):
    normal = runtime.smoke_sizes(SIZES, steps=3, batch_size=8)
    assert normal == SIZES and normal is not SIZES
    clean_env.setenv("BOOK_SMOKE", "1")
    capped = runtime.smoke_sizes(SIZES, steps=3, batch_size=8)
    assert capped == {"steps": 3, "batch_size": 8, "d_model": 128}
    assert SIZES["steps"] == 1000  # the page's dict is not modified


@pytest.mark.parametrize("smoke", ["0", "1"])
def test_smoke_sizes_rejects_names_the_sizes_lack(clean_env, smoke):
    # A misspelt name fails in every run, not only in smoke runs.
    clean_env.setenv("BOOK_SMOKE", smoke)
    with pytest.raises(ValueError, match=r"\['step'\].*batch_size"):
        runtime.smoke_sizes(SIZES, step=3)


def test_smoke_sizes_rejects_a_non_mapping(clean_env):
    with pytest.raises(TypeError, match="sizes must be a mapping, got list"):
        runtime.smoke_sizes([("steps", 1)], steps=3)


def test_cap_returns_the_smoke_value_only_in_a_smoke_run(clean_env):
    assert runtime.cap(60_000, 512) == 60_000
    assert runtime.cap((0, 1, 2, 3, 4), (0,)) == (0, 1, 2, 3, 4)
    clean_env.setenv("BOOK_SMOKE", "yes")
    assert runtime.cap(60_000, 512) == 512
    assert runtime.cap((0, 1, 2, 3, 4), (0,)) == (0,)


# ---- scripts/execute_pages.py: smoke runs, data use and the report

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "execute_pages.py"
_spec = importlib.util.spec_from_file_location("execute_pages", SCRIPT)
assert _spec is not None and _spec.loader is not None
execute_pages = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(execute_pages)


def test_report_lists_data_by_page_and_the_five_slowest_pages():
    pages = [f"book/p{i}.md" for i in range(7)]
    times = {page: float(i) for i, page in enumerate(pages)}
    text = execute_pages.report(
        times, {"book/p2.md": ["fashion_mnist('train')", "mnist_5k()"]},
        pages,
    )
    lines = text.splitlines()
    assert lines[:2] == [
        "data used by each page:",
        "  book/p2.md: fashion_mnist('train'), mnist_5k()",
    ]
    assert lines[2] == "the 5 slowest pages (execution time):"
    assert [line.split()[-1] for line in lines[3:]] == [
        "book/p6.md", "book/p5.md", "book/p4.md", "book/p3.md", "book/p2.md"
    ]
    assert "6.0 s" in lines[3]
    assert "(none recorded)" in execute_pages.report({}, {}, pages)


def test_data_use_replaces_the_executed_pages_and_keeps_the_others(tmp_path):
    store, log = tmp_path / "data-use.json", tmp_path / "log.jsonl"
    store.write_text(json.dumps({
        "book/a.md": ["tiny_shakespeare()"],  # served from the cache
        "book/b.md": ["multi30k('train')"],  # executed again: replaced
        "book/gone.md": ["mnist_5k()"],  # no longer in the book
    }))
    log.write_text(
        json.dumps({"page": str(tmp_path / "book/b.md"),
                    "call": "number_pairs()"}) + "\n"
        + json.dumps({"page": str(tmp_path / "book/b.md"),
                      "call": "number_pairs()"}) + "\n"
        + '{"page": "cut'  # a line cut short
    )
    use = execute_pages.update_data_use(
        store, log, tmp_path, ["book/b.md", "book/c.md"],
        ["book/a.md", "book/b.md", "book/c.md"],
    )
    assert use == {
        "book/a.md": ["tiny_shakespeare()"],
        "book/b.md": ["number_pairs()"],
    }
    assert json.loads(store.read_text()) == use


def test_smoke_errors_count_asserts_and_report_other_errors():
    nb = nbformat.v4.new_notebook()

    def cell(ename, tags=()):
        c = nbformat.v4.new_code_cell("x", metadata={"tags": list(tags)})
        c.outputs = [nbformat.v4.new_output(
            "error", ename=ename, evalue="boom", traceback=[])]
        return c

    nb.cells = [
        cell("AssertionError"),
        cell("ValueError", tags=["raises-exception"]),  # expected
        nbformat.v4.new_markdown_cell("text"),
        cell("RuntimeError"),
    ]
    errors, claims = execute_pages.smoke_errors(nb)
    assert claims == 1
    assert errors == ["cell 3: RuntimeError: boom"]


HEADER = """---
jupytext:
  text_representation:
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---

"""
CAPPED = HEADER + '''# Capped

```{code-cell} ipython3
from transformer_book import data, runtime

SIZES = {"cpu": dict(steps=2), "gpu": dict(steps=4000)}[runtime.preset()]
SIZES = runtime.smoke_sizes(SIZES, steps=3)
train, valid = data.python_docs_split()
print(runtime.preset(), SIZES)
```

```{code-cell} ipython3
assert SIZES["steps"] > 100  # a claim only the real run meets
```
'''
BROKEN = HEADER + '''# Broken

```{code-cell} ipython3
from transformer_book import runtime

if runtime.preset() == "gpu":
    raise RuntimeError("the gpu branch is broken")
```
'''


@pytest.mark.slow
def test_smoke_run_executes_the_gpu_branch_capped(tmp_path):
    """Two kernels: with the build tests, in `make slow`."""
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "capped.md").write_text(CAPPED)
    (tmp_path / "book" / "broken.md").write_text(BROKEN)
    (tmp_path / "_toc.yml").write_text(
        "format: jb-book\nroot: book/capped\nchapters:\n"
        "  - file: book/broken\n"
    )
    env = {k: v for k, v in os.environ.items()
           if k not in ("BOOK_SMOKE", "BOOK_PRESET")}
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--root", str(tmp_path), "--smoke"],
        cwd=tmp_path, env=env, capture_output=True, text=True,
    )
    # The broken gpu branch fails the run; the unmet assert does not.
    assert run.returncode == 1, run.stderr[-2000:]
    assert "preset: gpu (smoke run" in run.stdout
    assert "ok      book/capped.md (1 assert(s) not met)" in run.stdout
    assert "FAILED (smoke): book/broken.md" in run.stderr
    assert "RuntimeError: the gpu branch is broken" in run.stderr
    assert "book/capped.md: python_docs_split()" in run.stdout
    assert "the 2 slowest pages" in run.stdout
    # Its own cache, which no build reads.
    assert (tmp_path / "_build" / "smoke" / ".jupyter_cache").is_dir()
    assert not (tmp_path / "_build" / ".jupyter_cache").exists()
    from jupyter_cache import get_cache

    cache = get_cache(str(tmp_path / "_build" / "smoke" / ".jupyter_cache"))
    record = cache.get_cached_project_nb(str(tmp_path / "book/capped.md"))
    notebook = cache.get_cache_bundle(record.pk).nb
    assert "gpu {'steps': 3}" in notebook.cells[0].outputs[0]["text"]
