"""Lint the code cells of the book's pages with ruff.

ruff does not read MyST markdown, so each page is read with jupytext and
handed to ``ruff check`` as a notebook on standard input, named after the
page (``book/part/page.ipynb``). The name puts the page under the
``book/**`` per-file rules in ``pyproject.toml`` (imports may follow code:
E402), and ruff reports cell numbers, which jupytext keeps in page order.

Usage: python scripts/lint_pages.py [PAGE ...] [--root DIR] [--fix]
Without pages, every ``.md`` page with a kernel under ``ROOT/book`` is
checked. The exit status is non-zero when any page has a finding.
"""

from __future__ import annotations

import argparse
import json
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
        if result.returncode != 0:
            failed += 1
            report = result.stdout.strip() or result.stderr.strip()
            print(f"{page.relative_to(root)}:\n{report}\n")
    print(f"{len(pages) - failed} of {len(pages)} page(s) clean")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
