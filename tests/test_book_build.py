"""The build machinery: a raising cell fails the build; no stale pages.

One test builds a throwaway book in a temporary folder with the project's
own ``_config.yml`` and ``scripts/execute_pages.py``, exactly as
``make book`` does (pre-execute into the cache, then ``jupyter-book build``),
and takes it through every case in turn: one book, not one per case, since
each build costs seconds.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
HEADER = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
    format_version: 0.13
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---

# A throwaway page

"""


def make_book(root: Path, code: str, *others: str) -> Path:
    """Lay out a book whose root page has the single code cell ``code``.

    Each of ``others`` is the code cell of one more page, ``page1.md``,
    ``page2.md``, ... listed in the table of contents.
    """
    (root / "book").mkdir(parents=True, exist_ok=True)
    (root / "scripts").mkdir(exist_ok=True)
    shutil.copy(ROOT / "_config.yml", root)
    shutil.copy(ROOT / "references.bib", root)
    for script in ("execute_pages.py", "author_year_bib.py",
                   "reader_notebooks.py"):
        shutil.copy(ROOT / "scripts" / script, root / "scripts")
    toc = "format: jb-book\nroot: book/page\n"
    if others:
        toc += "chapters:\n"
        toc += "".join(
            f"  - file: book/page{i}\n" for i in range(1, len(others) + 1)
        )
    (root / "_toc.yml").write_text(toc)
    write_page(root, code)
    for i, other in enumerate(others, start=1):
        write_page(root, other, f"page{i}")
    return root


def write_page(root: Path, code: str, name: str = "page") -> None:
    page = HEADER + "```{code-cell} ipython3\n" + code + "\n```\n"
    (root / "book" / f"{name}.md").write_text(page)


# The preset named, so that the script need not import torch to look for
# a GPU (seconds a call; the detection has unit tests of its own).
ENV = {**os.environ, "BOOK_PRESET": "cpu"}


def execute(root: Path) -> subprocess.CompletedProcess:
    """Pre-execute the pages as `make book` does."""
    return subprocess.run(
        [sys.executable, "scripts/execute_pages.py"],
        cwd=root,
        capture_output=True,
        text=True,
        env=ENV,
    )


def build(root: Path) -> subprocess.CompletedProcess:
    """`jupyter-book build .` with the project's configuration."""
    return subprocess.run(
        [str(BIN / "jupyter-book"), "build", ".", "--path-output", "."],
        cwd=root,
        capture_output=True,
        text=True,
    )


def make_book_command(root: Path) -> int:
    """Both steps of `make book`; the exit status of the first failure."""
    first = execute(root)
    if first.returncode != 0:
        return first.returncode
    return build(root).returncode


def page_html(root: Path) -> str:
    return (root / "_build" / "html" / "book" / "page.html").read_text()


RAISES = 'raise RuntimeError("this cell is broken")'
IMPORT_PKG = 'import sys\nsys.path.insert(0, "../src")\nimport pkgx\n'


def test_the_build_machinery_on_one_throwaway_book(tmp_path):
    """One throwaway book goes through every case, in order.

    1. a page that raises fails a clean build, with or without the
       pre-execution step;
    2. a package change re-executes the pages (jupyter-book's own cache
       would serve the stale output);
    3. a page that fails after it does not make the next run re-execute
       the pages that passed, and a raising cell keeps failing rebuilds;
    4. once fixed, only that page runs, and then nothing does;
    5. a page's sizes file: its table is shown, and a change to it
       executes that page again.
    """
    root = make_book(
        tmp_path,
        IMPORT_PKG + 'print(f"value={pkgx.VALUE}")',
        RAISES,
    )
    pkg = root / "src" / "pkgx"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("VALUE = 'first'\n")

    # 1. jupyter-book alone, without the pre-execution step, fails ...
    result = build(root)
    assert result.returncode != 0, result.stdout[-2000:]
    assert "this cell is broken" in result.stdout + result.stderr
    # ... and so does the pre-execution step of `make book`.
    shutil.rmtree(root / "_build")
    result = execute(root)
    assert result.returncode != 0
    assert "this cell is broken" in result.stderr

    # The page is fixed; it checks the package's value.
    write_page(root, IMPORT_PKG + "assert pkgx.VALUE == 'first', "
               "'page1 fails'", "page1")
    first = execute(root)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "1 page(s) to execute" in first.stdout  # page passed before
    assert build(root).returncode == 0
    assert "value=first" in page_html(root)

    # 2. The package changes. The pages' code cells did not, so
    # jupyter-book's own cache serves the old output: the stale page this
    # project guards against.
    (pkg / "__init__.py").write_text("VALUE = 'second'\n")
    assert build(root).returncode == 0
    assert "value=first" in page_html(root)
    # `make book` notices, and every page runs once; page1 now fails.
    second = execute(root)
    assert second.returncode != 0
    assert "2 page(s) to execute" in second.stdout
    assert "page1 fails" in second.stderr

    # 3. The next run executes only the failing page, which still fails,
    # while the page that passed keeps its new output.
    third = execute(root)
    assert third.returncode != 0
    assert "1 page(s) to execute" in third.stdout
    assert "page1 fails" in third.stderr
    # A raising cell fails `make book`, then jupyter-book on its own with
    # the earlier cache in place, then a second rebuild: never hidden.
    write_page(root, RAISES, "page1")
    assert make_book_command(root) != 0
    assert build(root).returncode != 0
    assert make_book_command(root) != 0

    # 4. Once the page is fixed, only it runs, and the book builds with
    # the output of the new package.
    write_page(root, IMPORT_PKG + "print(pkgx.VALUE)", "page1")
    fourth = execute(root)
    assert fourth.returncode == 0, fourth.stderr[-2000:]
    assert "1 page(s) to execute" in fourth.stdout
    assert build(root).returncode == 0
    assert "value=second" in page_html(root)
    # Nothing changed since: the next run executes nothing.
    result = execute(root)
    assert result.returncode == 0
    assert "0 page(s) to execute" in result.stdout

    # 5. A page sized by a file beside it shows the sizes it used in a
    # table; tuning the file executes that page again, and only it.
    sizes = root / "book" / "page1.sizes.py"
    sizes.write_text('cpu = {"steps": 12}\ngpu = {"steps": 3456}\n')
    write_page(root, "from transformer_book import _book as book\n\n"
               'SIZES = book.sizes("page1")\nSIZES', "page1")
    fifth = execute(root)
    assert fifth.returncode == 0, fifth.stderr[-2000:]
    assert "1 page(s) to execute" in fifth.stdout
    sizes.write_text('cpu = {"steps": 78}\ngpu = {"steps": 3456}\n')
    sixth = execute(root)
    assert sixth.returncode == 0, sixth.stderr[-2000:]
    assert "sizes changed, executed again: book/page1.md" in sixth.stdout
    assert "1 page(s) to execute" in sixth.stdout
    assert build(root).returncode == 0
    html = (root / "_build" / "html" / "book" / "page1.html").read_text()
    assert "Sizes of this build: the cpu preset" in html
    assert "<code>steps</code></td><td><code>78</code>" in html
