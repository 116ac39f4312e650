"""Execute the book's pages in parallel into the cache the build reads.

Jupyter Book keys its execution cache on a page's code cells only, so a
change to the package under ``src/`` would leave stale outputs. This script
hashes the package; when the hash differs from the one recorded after the
last successful run, the cache and Sphinx's saved environment are cleared
first, so every page is executed and read again. The pages listed in
``_toc.yml`` are then executed (those whose code cells are already cached
are skipped), ``--jobs`` at a time, with the same reader myst-nb uses, so
``jupyter-book build`` finds every page in the cache.

Usage: python scripts/execute_pages.py [--jobs N] [--hash-file PATH]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

READER = {"name": "myst_nb_md", "type": "plugin"}


def toc_pages(root: Path) -> list[Path]:
    """Return the pages of ``_toc.yml`` that are notebooks, in order."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    files: list[str] = [toc["root"]]

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if "file" in node:
                files.append(node["file"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk({k: v for k, v in toc.items() if k != "root"})
    pages = []
    for name in files:
        path = root / (name if name.endswith(".md") else f"{name}.md")
        if "kernelspec:" in path.read_text().split("\n---", 1)[0]:
            pages.append(path)
    return pages


def package_hash(root: Path) -> str:
    """Hash the package sources and the project's dependencies."""
    digest = hashlib.sha256()
    paths = sorted((root / "src").rglob("*.py"))
    paths += [p for p in [root / "pyproject.toml"] if p.exists()]
    for path in paths:
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--root",
        type=Path,
        default=Path(__file__).resolve().parents[1],
        help="the book's root folder (holding _toc.yml)",
    )
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--hash-file",
        type=Path,
        default=None,
        help="where the package hash is kept (_build/.package-hash)",
    )
    parser.add_argument("--timeout", type=int, default=600)
    args = parser.parse_args()
    if args.jobs < 1:
        parser.error(f"--jobs={args.jobs} must be at least 1")

    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn
    from jupyter_cache.executors.utils import single_nb_execution
    from myst_nb.core.read import myst_nb_reader_plugin

    root = args.root.resolve()
    cache_dir = root / "_build" / ".jupyter_cache"
    hash_file = args.hash_file or root / "_build" / ".package-hash"
    current = package_hash(root)
    recorded = (
        hash_file.read_text().strip() if hash_file.exists() else ""
    )
    if recorded != current:
        # Sphinx would not re-read pages whose source is unchanged, so its
        # saved environment goes with the execution cache.
        for stale in (cache_dir, root / "_build" / ".doctrees"):
            if stale.exists():
                print(f"package changed: removing {stale.relative_to(root)}")
                shutil.rmtree(stale)

    # Each kernel would start one compute thread per core: with several
    # pages at once the threads outnumber the cores, and the small models
    # the pages train slow down many times over. Share the cores instead.
    threads = max(1, (os.cpu_count() or 1) // args.jobs)
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    print(f"{os.environ['OMP_NUM_THREADS']} compute thread(s) per page")

    cache = get_cache(str(cache_dir))
    todo = []
    for page in toc_pages(root):
        # The reader myst-nb uses, so the build matches these cache entries.
        notebook = myst_nb_reader_plugin(str(page))
        try:
            cache.match_cache_notebook(notebook)
        except KeyError:
            todo.append((page, notebook))
    print(f"{len(todo)} page(s) to execute, {args.jobs} at a time")

    def run(item):
        page, notebook = item
        result = single_nb_execution(
            notebook,
            cwd=str(page.parent),
            timeout=args.timeout,
            allow_errors=False,
            meta_override=True,
        )
        name = page.relative_to(root)
        status = "FAILED" if result.err else "ok"
        print(f"  {status:6s} {result.time:6.1f} s  {name}", flush=True)
        return page, notebook, result

    start = time.perf_counter()
    failed = []
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for page, notebook, result in pool.map(run, todo):
            if result.err is not None:
                failed.append((page, result.exc_string))
                continue
            cache.cache_notebook_bundle(
                CacheBundleIn(
                    notebook,
                    str(page),
                    data={"execution_seconds": result.time},
                ),
                check_validity=False,
                overwrite=True,
            )
    print(f"executed in {time.perf_counter() - start:.1f} s")
    if failed:
        for page, trace in failed:
            print(f"\nFAILED: {page}\n{trace}", file=sys.stderr)
        return 1
    hash_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = hash_file.with_suffix(".tmp")
    tmp.write_text(current + "\n")
    tmp.replace(hash_file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
