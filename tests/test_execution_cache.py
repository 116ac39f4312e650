"""The execution cache knows the preset, and a forced preset sizes a page.

``scripts/execute_pages.py`` keys the cache the build reads on the package
hash and the preset: a switch of ``BOOK_PRESET`` keeps the old preset's
cache aside and executes the pages again (or brings back the new preset's
own cache), so ``BOOK_PRESET=gpu make book`` after a CPU build never
serves CPU outputs. The key logic is tested on its own (fast, no kernel);
one slow test executes a tiny page, sized the way the book's pages are,
under both presets (``BOOK_PRESET`` forced), on the CPU.

A page's sizes file (``page.sizes.py`` beside ``page.md``) is part of that
page's key alone: changing it executes that page again, and no other.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "execute_pages.py"

_spec = importlib.util.spec_from_file_location("execute_pages", SCRIPT)
assert _spec is not None and _spec.loader is not None
execute_pages = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(execute_pages)


def fake_project(root: Path) -> Path:
    """A root with a package to hash; returns its key file."""
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    (root / "pyproject.toml").write_text("[project]\nname = 'pkg'\n")
    return root / "_build" / ".package-hash"


def fill_cache(root: Path, label: str) -> None:
    """Stand-in for an executed cache, and Sphinx's saved environment."""
    cache = root / "_build" / ".jupyter_cache"
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "outputs").write_text(label)
    (root / "_build" / ".doctrees").mkdir(exist_ok=True)


def cache_in_use(root: Path) -> str | None:
    outputs = root / "_build" / ".jupyter_cache" / "outputs"
    return outputs.read_text() if outputs.exists() else None


def test_the_key_holds_the_package_and_the_preset(tmp_path):
    fake_project(tmp_path)
    cpu = execute_pages.cache_key(tmp_path, "cpu")
    gpu = execute_pages.cache_key(tmp_path, "gpu")
    assert cpu != gpu and "preset cpu" in cpu and "preset gpu" in gpu
    (tmp_path / "src" / "pkg" / "__init__.py").write_text("VALUE = 2\n")
    assert execute_pages.cache_key(tmp_path, "cpu") != cpu


def test_switching_the_preset_keeps_one_cache_per_preset(tmp_path):
    key_file = fake_project(tmp_path)
    select = execute_pages.select_cache
    assert select(tmp_path, key_file, "cpu")  # first run: a new key
    fill_cache(tmp_path, "cpu outputs")
    assert not select(tmp_path, key_file, "cpu")  # nothing changed
    assert cache_in_use(tmp_path) == "cpu outputs"

    # To gpu: the cpu cache is set aside, the build starts afresh.
    assert select(tmp_path, key_file, "gpu")
    assert cache_in_use(tmp_path) is None
    assert not (tmp_path / "_build" / ".doctrees").exists()
    assert "preset gpu" in key_file.read_text()
    fill_cache(tmp_path, "gpu outputs")

    # Back to cpu: its cache returns, and the gpu one is set aside.
    assert select(tmp_path, key_file, "cpu")
    assert cache_in_use(tmp_path) == "cpu outputs"
    assert not (tmp_path / "_build" / ".doctrees").exists()
    assert select(tmp_path, key_file, "gpu")
    assert cache_in_use(tmp_path) == "gpu outputs"


def test_a_package_change_clears_every_presets_cache(tmp_path):
    key_file = fake_project(tmp_path)
    select = execute_pages.select_cache
    select(tmp_path, key_file, "cpu")
    fill_cache(tmp_path, "cpu outputs")
    select(tmp_path, key_file, "gpu")
    fill_cache(tmp_path, "gpu outputs")

    (tmp_path / "src" / "pkg" / "__init__.py").write_text("VALUE = 2\n")
    assert select(tmp_path, key_file, "gpu")  # same preset, new package
    assert cache_in_use(tmp_path) is None
    # The cpu cache set aside earlier belongs to the old package.
    assert select(tmp_path, key_file, "cpu")
    assert cache_in_use(tmp_path) is None
    assert not (tmp_path / "_build" / ".jupyter_caches" / "cpu").exists()


def test_an_old_key_without_a_preset_clears_the_cache(tmp_path):
    key_file = fake_project(tmp_path)
    fill_cache(tmp_path, "outputs of unknown preset")
    key_file.write_text(execute_pages.package_hash(tmp_path) + "\n")
    assert execute_pages.select_cache(tmp_path, key_file, "cpu")
    assert cache_in_use(tmp_path) is None


# Pages sized as the book's pages are: a sizes file beside each.
PAGE = """---
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---

# A tiny page

```{code-cell} ipython3
from transformer_book import _book as book

SIZES = book.sizes("NAME")
print(f"preset={book.preset()} sizes={dict(SIZES)}")
```
"""
SIZES_FILE = (
    'cpu = {"d_model": 8, "steps": 2}\ngpu = {"d_model": 512, "steps": 4000}\n'
)


def write_page(root: Path, name: str, sizes: str = SIZES_FILE) -> Path:
    (root / "book").mkdir(exist_ok=True)
    (root / "book" / f"{name}.sizes.py").write_text(sizes)
    page = root / "book" / f"{name}.md"
    page.write_text(PAGE.replace("NAME", name))
    return page


def run_execute(root: Path, preset: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "BOOK_PRESET": preset}
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--root", str(root)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )


def page_output(root: Path, name: str = "page") -> str:
    """The cached stdout of a tiny page."""
    from jupyter_cache import get_cache

    cache = get_cache(str(root / "_build" / ".jupyter_cache"))
    uri = str(root / "book" / f"{name}.md")
    record = cache.get_cached_project_nb(uri)
    assert record is not None, "the page has no cached outputs"
    notebook = cache.get_cache_bundle(record.pk).nb
    return "".join(
        output.get("text", "")
        for cell in notebook.cells
        for output in cell.get("outputs", [])
    )


@pytest.mark.slow
def test_forced_gpu_preset_resizes_a_page_and_reexecutes_it(tmp_path):
    """Kernels start six times: with the build tests, in `make slow`."""
    write_page(tmp_path, "page")
    write_page(tmp_path, "other")
    (tmp_path / "_toc.yml").write_text(
        "format: jb-book\nroot: book/page\nchapters:\n  - file: book/other\n")

    cpu = run_execute(tmp_path, "cpu")
    assert cpu.returncode == 0, cpu.stderr[-2000:]
    assert "preset: cpu" in cpu.stdout
    assert "2 page(s) to execute" in cpu.stdout
    assert "preset=cpu sizes={'d_model': 8, 'steps': 2}" in page_output(
        tmp_path)

    # A page's sizes changed: that page alone is executed again.
    (tmp_path / "book" / "page.sizes.py").write_text(
        SIZES_FILE.replace('"steps": 2', '"steps": 3'))
    resized = run_execute(tmp_path, "cpu")
    assert resized.returncode == 0, resized.stderr[-2000:]
    assert "sizes changed, executed again: book/page.md\n" in resized.stdout
    assert "1 page(s) to execute" in resized.stdout
    assert "sizes={'d_model': 8, 'steps': 3}" in page_output(tmp_path)
    assert "sizes={'d_model': 8, 'steps': 2}" in page_output(
        tmp_path, "other")

    # Same code cells, other preset: executed again, with the gpu sizes.
    gpu = run_execute(tmp_path, "gpu")
    assert gpu.returncode == 0, gpu.stderr[-2000:]
    assert "2 page(s) to execute" in gpu.stdout
    assert "preset=gpu sizes={'d_model': 512, 'steps': 4000}" in (
        page_output(tmp_path))

    # Back to cpu: its cache returns, nothing runs.
    back = run_execute(tmp_path, "cpu")
    assert back.returncode == 0, back.stderr[-2000:]
    assert "0 page(s) to execute" in back.stdout
    assert "preset=cpu sizes={'d_model': 8, 'steps': 3}" in page_output(
        tmp_path)


def test_a_changed_sizes_file_drops_only_its_pages_outputs(tmp_path):
    """No kernel: outputs are cached by hand, as an executor would."""
    from jupyter_cache import get_cache
    from jupyter_cache.cache.main import CacheBundleIn

    cache = get_cache(str(tmp_path / "cache"))
    pages = [write_page(tmp_path, name) for name in ("a", "b")]
    (tmp_path / "book" / "b.sizes.py").unlink()  # b has no sizes file
    for page in pages:
        cache.add_nb_to_project(str(page), read_data=execute_pages.READER)

    def execute_all() -> None:
        for record in cache.list_unexecuted():
            nb = cache.get_project_notebook(record.uri).nb
            cache.cache_notebook_bundle(CacheBundleIn(nb, record.uri),
                                        check_validity=False)

    def unexecuted() -> list[str]:
        return sorted(Path(r.uri).name for r in cache.list_unexecuted())

    record = tmp_path / "cache" / "sizes.json"
    drop = execute_pages.drop_resized
    execute_all()
    # Outputs cached before any record of their sizes: not trusted.
    assert len(drop(cache, record, pages)) == 2
    assert unexecuted() == ["a.md", "b.md"]
    execute_all()
    assert drop(cache, record, pages) == []
    assert unexecuted() == []
    # Only a's sizes change: only a runs again, with the same code cells.
    (tmp_path / "book" / "a.sizes.py").write_text(SIZES_FILE + "\n# tuned\n")
    assert drop(cache, record, pages) == [str(pages[0])]
    assert unexecuted() == ["a.md"]
    execute_all()
    # b gains a sizes file: b runs again.
    (tmp_path / "book" / "b.sizes.py").write_text(SIZES_FILE)
    assert drop(cache, record, pages) == [str(pages[1])]
    assert unexecuted() == ["b.md"]
    # The package hash does not read book/: tuning a page leaves it alone.
    fake_project(tmp_path)
    key = execute_pages.cache_key(tmp_path, "cpu")
    (tmp_path / "book" / "a.sizes.py").write_text(SIZES_FILE)
    assert execute_pages.cache_key(tmp_path, "cpu") == key


def test_a_preset_that_does_not_exist_stops_before_any_page(
    tmp_path, monkeypatch, capsys
):
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/page\n")
    monkeypatch.setenv("BOOK_PRESET", "tpu")
    monkeypatch.setattr(sys, "argv", [str(SCRIPT), "--root", str(tmp_path)])
    assert execute_pages.main() == 2
    assert "BOOK_PRESET='tpu'" in capsys.readouterr().err
    assert not (tmp_path / "_build").exists()


# Every page of the book that sizes itself: a sizes file beside it.
SIZES_FILES = sorted((ROOT / "book").rglob("*.sizes.py"))


def test_the_pages_size_themselves_by_preset():
    assert len(SIZES_FILES) >= 15


@pytest.mark.parametrize(
    "path", SIZES_FILES, ids=lambda p: str(p.relative_to(ROOT / "book"))
)
def test_forced_gpu_preset_picks_every_pages_gpu_sizes(path, monkeypatch):
    """A forced preset switches the sizes, and both presets size alike.

    A key that only the ``cpu`` entry has would fail on a GPU alone, where
    nothing else runs the ``gpu`` branch (read_sizes refuses it).
    """
    from transformer_book import _book as book

    table = book.read_sizes(path)
    assert table["cpu"] != table["gpu"]
    monkeypatch.delenv("BOOK_SMOKE", raising=False)
    threads = torch.get_num_threads()
    try:
        for preset in book.PRESETS:
            monkeypatch.setenv("BOOK_PRESET", preset)
            name = path.name.removesuffix(book.SIZES_SUFFIX)
            assert book.sizes(name, path.parent) == table[preset]
    finally:
        torch.set_num_threads(threads)


def test_the_cache_trims_only_when_asked(tmp_path):
    """Workers cache pages without trimming (a race between two of them
    trimming at once removed a page being cached); one trim comes after."""
    import nbformat
    from jupyter_cache.cache.main import CacheBundleIn

    cache = execute_pages._Cache(str(tmp_path / "cache"))
    cache.change_cache_limit(1)
    for i in range(3):
        nb = nbformat.v4.new_notebook(
            cells=[nbformat.v4.new_code_cell(f"x = {i}")])
        nb.metadata["kernelspec"] = {"name": "python3",
                                     "display_name": "Python 3"}
        cache.cache_notebook_bundle(
            CacheBundleIn(nb, f"page{i}.md"), check_validity=False)
    assert len(cache.list_cache_records()) == 3  # over the limit, kept
    cache.trim()
    assert [r.uri for r in cache.list_cache_records()] == ["page2.md"]


def test_models_folder_variable_is_the_recipes_one():
    """The script names recipes' variable without importing torch."""
    from transformer_book import recipes

    assert execute_pages.MODELS_ENV_VAR == recipes.MODELS_ENV_VAR
