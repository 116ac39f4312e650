"""Lint the code cells of the book's pages with ruff.

ruff does not read MyST markdown, so each page is read with jupytext and
handed to ``ruff check`` as a notebook on standard input, named after the
page (``book/part/page.ipynb``). The name puts the page under the
``book/**`` per-file rules in ``pyproject.toml`` (imports may follow code:
E402), and ruff reports cell numbers, which jupytext keeps in page order.

It then checks the rules of a page's plumbing (:func:`page_problems`):

- a page with a sizes file (``gpt.sizes.py`` beside ``gpt.md``) fetches it
  in its first cell, ``SIZES = book.sizes("gpt")``, and ends that cell
  with ``SIZES`` (the table of the sizes used); a page without one never
  calls ``book.sizes``; no page writes a ``SIZES`` dict of its own;
- thread settings and smoke runs are never visible: no ``set_num_threads``,
  ``BOOK_SMOKE`` or ``book.smoke()`` outside hidden cells;
- a cell whose output is removed and that draws (``plotting.``, ``plt.``)
  is a figure cell: it is tagged ``hide-input``;
- every sizes file under ``book/`` belongs to a page and reads cleanly;
- no visible cell reads a name that only a ``remove-cell`` cell defines:
  the notebook readers download has no such cells
  (``scripts/reader_notebooks.py``) and must still run top to bottom.

Usage: python scripts/lint_pages.py [PAGE ...] [--root DIR] [--fix]
Without pages, every ``.md`` page with a kernel under ``ROOT/book`` is
checked. The exit status is non-zero when any page has a finding.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def notebook_pages(root: Path) -> list[Path]:
    """The MyST notebook pages (``.md`` with a kernelspec) under book/."""
    return sorted(
        page
        for page in (root / "book").rglob("*.md")
        if "kernelspec:" in page.read_text().split("\n---", 1)[0]
    )


def ruff_executable() -> str:
    """The ruff next to this Python (the venv's), else the one on PATH."""
    here = Path(sys.executable).parent / "ruff"
    found = str(here) if here.exists() else shutil.which("ruff")
    if found is None:
        raise SystemExit("ruff is missing: pip install -e '.[test]'")
    return found


def lint_page(page: Path, name: str) -> subprocess.CompletedProcess:
    """Run ruff on the code cells of ``page``, reported as ``name``.

    ``name`` is the page's path relative to the project root with an
    ``.ipynb`` suffix; ruff picks its per-file rules from it.
    """
    import jupytext

    notebook = jupytext.read(page)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.setdefault("outputs", [])
            cell.setdefault("execution_count", None)
    notebook.metadata.setdefault("language_info", {"name": "python"})
    return subprocess.run(
        [
            ruff_executable(),
            "check",
            "--no-cache",
            "--output-format",
            "concise",
            "--stdin-filename",
            name,
            "-",
        ],
        input=json.dumps(notebook),
        capture_output=True,
        text=True,
        cwd=ROOT,
    )


HIDDEN = {"remove-cell", "remove-input"}
DRAWS = re.compile(r"\b(plotting|plt)\.")
NEVER_VISIBLE = re.compile(r"set_num_threads|BOOK_SMOKE|book\.smoke\(")
SIZES_CALL = re.compile(r"book\.sizes\(([^)]*)\)")


def _names(source: str) -> tuple[set[str], set[str]]:
    """The names a cell binds, and the names it reads."""
    import ast

    tree = ast.parse("\n".join(line for line in source.splitlines()
                               if not line.lstrip().startswith(("%", "!"))))
    bound, read = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return bound, read


def hidden_dependencies(cells: list) -> list[str]:
    """Visible cells that read a name only ``remove-cell`` cells bind."""
    problems, visible, hidden = [], set(), set()
    for index, cell in enumerate(cells):
        bound, read = _names(cell.source)
        if "remove-cell" in cell.metadata.get("tags", []):
            hidden |= bound - visible
            continue
        for name in sorted(read & hidden - visible - bound):
            problems.append(f"code cell {index + 1} reads {name}, which "
                            "only a remove-cell cell defines")
        visible |= bound
    return problems


def page_problems(page: Path) -> list[str]:
    """The page's breaches of the plumbing rules (see the module doc)."""
    import jupytext

    from transformer_book._book import SIZES_SUFFIX, read_sizes

    cells = [c for c in jupytext.read(page).cells if c.cell_type == "code"]
    sizes = page.with_name(page.stem + SIZES_SUFFIX)
    problems = []
    fetch = f'SIZES = book.sizes("{page.stem}")'
    for index, cell in enumerate(cells):
        tags = set(cell.metadata.get("tags", []))
        source = cell.source
        where = f"code cell {index + 1}"
        if not tags & HIDDEN and NEVER_VISIBLE.search(source):
            problems.append(f"{where}: thread settings and smoke runs "
                            "belong in the sizes file or a hidden cell")
        if ("remove-output" in tags and "hide-input" not in tags
                and DRAWS.search(source)):
            problems.append(f"{where} draws a figure: tag it hide-input")
        if re.search(r"^SIZES = (\{|dict\()", source, re.MULTILINE):
            problems.append(f"{where}: sizes live in {sizes.name}")
        for call in SIZES_CALL.findall(source):
            if index > 0 or call != f'"{page.stem}"' or not sizes.exists():
                problems.append(f"{where}: book.sizes({call}); expected "
                                f"{fetch} in the first cell, {sizes.name}")
    problems += hidden_dependencies(cells)
    if sizes.exists():
        lines = cells[0].source.strip().splitlines() if cells else []
        if fetch not in lines or lines[-1] != "SIZES":
            problems.append(f"the first cell fetches the sizes ({fetch}) "
                            "and ends with SIZES, which shows them")
        try:
            read_sizes(sizes)
        except (SyntaxError, ValueError) as error:
            problems.append(f"{sizes.name}: {error}")
    return problems


def orphan_sizes(root: Path) -> list[Path]:
    """Sizes files under ``root/book`` with no page beside them."""
    from transformer_book._book import SIZES_SUFFIX

    return sorted(
        path for path in (root / "book").rglob(f"*{SIZES_SUFFIX}")
        if not path.with_name(
            path.name.removesuffix(SIZES_SUFFIX) + ".md").exists()
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("pages", nargs="*", type=Path)
    parser.add_argument(
        "--root",
        type=Path,
        default=ROOT,
        help="the folder the page names are relative to",
    )
    args = parser.parse_args(argv)
    root = args.root.resolve()
    pages = [p.resolve() for p in args.pages] or notebook_pages(root)
    failed = 0
    for page in pages:
        name = page.relative_to(root).with_suffix(".ipynb").as_posix()
        result = lint_page(page, name)
        problems = page_problems(page)
        if result.returncode != 0 or problems:
            failed += 1
            report = result.stdout.strip() or result.stderr.strip()
            report = "\n".join([report] * (result.returncode != 0)
                               + [f"{name}: {p}" for p in problems])
            print(f"{page.relative_to(root)}:\n{report}\n")
    orphans = orphan_sizes(root)
    for path in orphans:
        print(f"{path.relative_to(root)}: no page beside it")
    print(f"{len(pages) - failed} of {len(pages)} page(s) clean")
    return 1 if failed or orphans else 0


if __name__ == "__main__":
    sys.exit(main())
