"""Execute one or more book pages and report how long each cell took.

For authors: ``python scripts/run_page.py book/attention/self-attention.md``
runs the page as the book build would (same reader, same working
directory), prints the time of every cell that took over a second and the
total, lists the glued names, and exits non-zero if a cell raised. The
executed notebook is written next to ``_build/pages/`` for inspection.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import nbformat
from myst_nb.core.read import myst_nb_reader_plugin
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from transformer_book.recipes import MODELS_ENV_VAR

ROOT = Path(__file__).resolve().parents[1]


def run(page: Path, timeout: int) -> bool:
    notebook = myst_nb_reader_plugin(str(page))
    client = NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(page.parent)}},
    )
    start = time.perf_counter()
    ok = True
    with client.setup_kernel():
        for index, cell in enumerate(notebook.cells):
            if cell.cell_type != "code":
                continue
            t0 = time.perf_counter()
            try:
                client.execute_cell(cell, index)
            except CellExecutionError as err:
                print(f"{page}: cell {index} raised\n{err}", file=sys.stderr)
                ok = False
                break
            dt = time.perf_counter() - t0
            if dt > 1.0:
                first = cell.source.strip().splitlines()[0][:60]
                print(f"  cell {index:3d} {dt:6.1f} s  {first}")
    total = time.perf_counter() - start
    glued = sorted(
        out["metadata"]["scrapbook"]["name"]
        for cell in notebook.cells
        for out in cell.get("outputs", [])
        if "scrapbook" in out.get("metadata", {})
    )
    # {glue:text}`name:.2f` formats float(text/plain): a numpy scalar's
    # repr, np.float64(...), fails the strict build; glue float(x).
    numpy = sorted(
        out["metadata"]["scrapbook"]["name"]
        for cell in notebook.cells
        for out in cell.get("outputs", [])
        if "scrapbook" in out.get("metadata", {})
        and str(out.get("data", {}).get(
            "application/papermill.record/text/plain", "")).startswith("np.")
    )
    if numpy:
        print(f"{page}: glued numpy scalars (glue float(x) or int(x)): "
              f"{', '.join(numpy)}", file=sys.stderr)
        ok = False
    print(f"{page}: {'ok' if ok else 'FAILED'} in {total:.1f} s")
    print(f"  glued: {', '.join(glued) or '(none)'}")
    out_dir = ROOT / "_build" / "pages"
    out_dir.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, out_dir / f"{page.stem}.ipynb")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("pages", nargs="+", type=Path)
    parser.add_argument("--timeout", type=int, default=600)
    args = parser.parse_args()
    # Where recipes.trained keeps models, as in the book's build.
    os.environ.setdefault(MODELS_ENV_VAR, str(ROOT / "_build" / "models"))
    results = [run(page.resolve(), args.timeout) for page in args.pages]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
