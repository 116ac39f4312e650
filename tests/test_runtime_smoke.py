"""Book plumbing (``_book``): presets, smoke runs and page sizes."""

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

from transformer_book import _book as book

SIZES_FILE = """# A page's sizes.
threads = 1  # small models

cpu = {"steps": 2, "lengths": (8, 16), "cap": None}
gpu = {
    "steps": 4000,  # a comment inside
    "lengths": (64, 128),
    "cap": None,
}
smoke = {"steps": 3, "cap": 1}
"""


@pytest.fixture
def clean_env(monkeypatch):
    monkeypatch.delenv("BOOK_PRESET", raising=False)
    monkeypatch.delenv("BOOK_SMOKE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    return monkeypatch


def test_preset_defaults_follow_cuda(clean_env):
    assert book.preset() == "cpu"
    clean_env.setattr(torch.cuda, "is_available", lambda: True)
    assert book.preset() == "gpu"


@pytest.mark.parametrize("value", ["cpu", "gpu", " GPU ", "Cpu", ""])
def test_preset_env_overrides(clean_env, value):
    clean_env.setenv("BOOK_PRESET", value)
    assert book.preset() == (value.strip().lower() or "cpu")


def test_bad_preset_names_allowed_values(clean_env):
    clean_env.setenv("BOOK_PRESET", "foo")
    with pytest.raises(ValueError, match=r"BOOK_PRESET='foo'.*'cpu', 'gpu'"):
        book.preset()


@pytest.mark.parametrize("value", ["1", "true", " YES ", "On"])
def test_smoke_on_forces_the_gpu_preset_without_cuda(clean_env, value):
    assert book.preset() == "cpu"
    clean_env.setenv("BOOK_SMOKE", value)
    assert book.smoke() is True
    assert book.preset() == "gpu"


@pytest.mark.parametrize("value", ["", "0", "false", "No", "off"])
def test_smoke_off_values(clean_env, value):
    clean_env.setenv("BOOK_SMOKE", value)
    assert book.smoke() is False
    assert book.preset() == "cpu"


def test_bad_smoke_value_names_the_variable(clean_env):
    assert book.smoke() is False  # unset
    clean_env.setenv("BOOK_SMOKE", "maybe")
    with pytest.raises(ValueError, match=r"BOOK_SMOKE='maybe'"):
        book.smoke()
    with pytest.raises(ValueError, match="BOOK_SMOKE"):
        book.preset()


def test_smoke_with_the_cpu_preset_is_a_contradiction(clean_env):
    clean_env.setenv("BOOK_SMOKE", "1")
    clean_env.setenv("BOOK_PRESET", "cpu")
    with pytest.raises(ValueError, match=r"BOOK_PRESET='cpu'.*BOOK_SMOKE"):
        book.preset()
    clean_env.setenv("BOOK_PRESET", "GPU")
    assert book.preset() == "gpu"


@pytest.fixture
def page_folder(tmp_path, clean_env):
    (tmp_path / "page.sizes.py").write_text(SIZES_FILE)
    threads = torch.get_num_threads()
    yield tmp_path
    torch.set_num_threads(threads)


@pytest.mark.parametrize(
    ("preset", "smoke", "expected"),
    [
        ("cpu", "0", {"steps": 2, "lengths": (8, 16), "cap": None}),
        ("gpu", "0", {"steps": 4000, "lengths": (64, 128), "cap": None}),
        ("", "1", {"steps": 3, "lengths": (64, 128), "cap": 1}),
    ],
)
def test_sizes_picks_the_preset_and_caps_a_smoke_run(
    page_folder, monkeypatch, preset, smoke, expected
):
    monkeypatch.setenv("BOOK_PRESET", preset)
    monkeypatch.setenv("BOOK_SMOKE", smoke)
    torch.set_num_threads(2)
    sizes = book.sizes("page", page_folder)
    assert sizes == expected and isinstance(sizes, book.Sizes)
    assert torch.get_num_threads() == 1  # the file's threads
    table = sizes._repr_html_()
    for name, value in expected.items():
        assert f"<code>{name}</code></td><td><code>{value!r}</code>" in table
    assert f"the {preset or 'gpu'} preset" in table
    assert ("smoke run" in table) == (smoke == "1")


def test_sizes_reads_the_page_folder_by_default(page_folder, monkeypatch):
    monkeypatch.chdir(page_folder)  # a page executes in its own folder
    assert book.sizes("page")["steps"] == 2
    with pytest.raises(FileNotFoundError, match=r"other\.sizes\.py"):
        book.sizes("other")


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('cpu = {"a": 1}\ngpu = {"b": 1}\n',
         r"only in cpu: \['a'\], only in gpu: \['b'\]"),
        ('cpu = {"a": 1}\ngpu = {"a": 2}\nsmoke = {"c": 1}\n',
         r"unknown in smoke: \['c'\]"),
        ('cpu = {"a": 1}\ngpu = {"a": 2}\nspeed = 3\n',
         r":3: a sizes file assigns literals to cpu, gpu, smoke, threads"),
        ('threads = 1\n', "cpu and gpu must be dicts of the same sizes"),
        ('cpu = ["a"]\ngpu = ["a"]\n', "must be dicts"),
        ('import os\n', r":1: a sizes file assigns"),
        ('cpu = {"a": os.cpu_count()}\n', "malformed node"),
    ],
)
def test_read_sizes_rejects_what_is_not_a_sizes_file(tmp_path, text, match):
    path = tmp_path / "page.sizes.py"
    path.write_text(text)
    with pytest.raises(ValueError, match=match):
        book.read_sizes(path)


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
from transformer_book import _book as book
from transformer_book import data

SIZES = book.sizes("capped")
train, valid = data.python_docs_split()
print(book.preset(), SIZES)
```

```{code-cell} ipython3
assert SIZES["steps"] > 100  # a claim only the real run meets
```
'''
BROKEN = HEADER + '''# Broken

```{code-cell} ipython3
from transformer_book import _book as book

if book.preset() == "gpu":
    raise RuntimeError("the gpu branch is broken")
```
'''


@pytest.mark.slow
def test_smoke_run_executes_the_gpu_branch_capped(tmp_path):
    """Two kernels: with the build tests, in `make slow`."""
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "capped.md").write_text(CAPPED)
    (tmp_path / "book" / "capped.sizes.py").write_text(
        'cpu = {"steps": 2}\ngpu = {"steps": 4000}\nsmoke = {"steps": 3}\n')
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
