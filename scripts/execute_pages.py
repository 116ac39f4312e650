"""Execute the book's pages in parallel into the cache the build reads.

The execution itself is jupyter-cache's own ``local-parallel`` executor,
run on the cache that ``jupyter-book build`` reads (``_build/.jupyter_cache``),
with the reader myst-nb uses, so the build finds every executed page there.
This script only adds what the tool cannot do:

1. **The cache belongs to one package and one preset.** jupyter-cache
   keys a page on its code cells, so a change under ``src/`` (or to
   ``pyproject.toml``) would leave stale outputs, and so would a switch of
   ``BOOK_PRESET``: ``BOOK_PRESET=gpu make book`` after a CPU build would
   serve the CPU outputs. ``--hash-file`` records the package hash and the
   preset (:func:`transformer_book.runtime.preset`) the cache was filled
   with. When the package changed, the cache and Sphinx's saved
   environment are removed and the new key is recorded at once: the cache
   is cleared once per package change, so a page that fails is executed
   again on the next run, but the pages that passed stay cached. When only
   the preset changed, the cache is kept aside, one per preset
   (``_build/.jupyter_caches/<preset>``), and the new preset's own cache
   comes back if it was filled with the same package.
2. **One compute thread per core.** The tool starts one kernel per core
   (its pool has no size option), and each kernel would start one compute
   thread per core: the threads would outnumber the cores, and the small
   models the pages train slow down 20-50 times. ``OMP_NUM_THREADS`` is
   set to cores // kernels (1) before the kernels start, unless set already.
3. **The project follows ``_toc.yml``**: listed pages are added, pages no
   longer listed are dropped, and the traceback of a failing page is
   printed with a non-zero exit status.

Usage: python scripts/execute_pages.py [--hash-file PATH] [--timeout S]
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import shutil
import sys
import time
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


def cache_key(root: Path, preset: str) -> str:
    """The key of an execution cache: the package hash and the preset."""
    return f"package {package_hash(root)}\npreset {preset}\n"


def _preset_of(key: str) -> str:
    """The preset a key names ("" for a key without one)."""
    for line in key.splitlines():
        name, _, value = line.partition(" ")
        if name == "preset":
            return value
    return ""


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def select_cache(root: Path, hash_file: Path, preset: str) -> bool:
    """Make the cache the build reads the one of this package and preset.

    The cache in use is ``_build/.jupyter_cache``, whose key ``hash_file``
    holds. On a preset switch it is moved to ``_build/.jupyter_caches/
    <its preset>`` with its key, and the new preset's cache is moved back
    when its key matches; any other cache of a different key is removed.
    The new key is recorded at once, not after a successful run, so a
    failing page never makes later runs re-execute the pages that passed.

    Returns:
        True when the cache in use changed (the key did not match).
    """
    current = cache_key(root, preset)
    recorded = hash_file.read_text() if hash_file.exists() else ""
    if recorded == current:
        return False
    build = root / "_build"
    active, kept = build / ".jupyter_cache", build / ".jupyter_caches"
    old_preset = _preset_of(recorded)
    if active.exists() and old_preset and old_preset != preset:
        stash = kept / old_preset
        if stash.exists():
            shutil.rmtree(stash)
        stash.mkdir(parents=True)
        active.replace(stash / "cache")
        _write(stash / "key", recorded)
        print(f"preset {old_preset} -> {preset}: the {old_preset} cache "
              f"is kept in {stash.relative_to(root)}")
    elif active.exists():
        print(f"package changed: removing {active.relative_to(root)}")
        shutil.rmtree(active)
    stash = kept / preset
    if stash.exists():
        key = stash / "key"
        if key.exists() and key.read_text() == current:
            (stash / "cache").replace(active)
            print(f"the {preset} cache comes back from "
                  f"{stash.relative_to(root)}")
        shutil.rmtree(stash)
    # Sphinx would not re-read pages whose source is unchanged, so its
    # saved environment goes with the execution cache.
    doctrees = build / ".doctrees"
    if doctrees.exists():
        shutil.rmtree(doctrees)
    _write(hash_file, current)
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--root",
        type=Path,
        default=Path(__file__).resolve().parents[1],
        help="the book's root folder (holding _toc.yml)",
    )
    parser.add_argument(
        "--hash-file",
        type=Path,
        default=None,
        help="where the package hash is kept (_build/.package-hash)",
    )
    parser.add_argument("--timeout", type=int, default=600)
    args = parser.parse_args()

    from jupyter_cache import get_cache
    from jupyter_cache.executors import load_executor

    root = args.root.resolve()
    hash_file = args.hash_file or root / "_build" / ".package-hash"
    from transformer_book.runtime import preset as book_preset

    try:
        preset = book_preset()
    except ValueError as error:  # a BOOK_PRESET that names no preset
        print(error, file=sys.stderr)
        return 2
    print(f"preset: {preset}")
    select_cache(root, hash_file, preset)

    # The executor's pool holds one kernel per core: one thread each.
    kernels = os.cpu_count() or 1
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    threads = int(os.environ['OMP_NUM_THREADS'])
    print(f"{threads} compute thread{'s' if threads != 1 else ''} per page")

    cache = get_cache(str(root / "_build" / ".jupyter_cache"))
    pages = {str(page): page for page in toc_pages(root)}
    for record in cache.list_project_records():
        if record.uri not in pages:
            cache.remove_nb_from_project(record.uri)
    for uri in pages:
        cache.add_nb_to_project(uri, read_data=READER)
    todo = cache.list_unexecuted()
    print(f"{len(todo)} page(s) to execute, up to {kernels} at a time")
    if not todo:
        return 0

    logger = logging.getLogger("execute_pages")
    logger.setLevel(logging.INFO)
    executor = load_executor("local-parallel", cache=cache, logger=logger)
    start = time.perf_counter()
    result = executor.run_and_cache(timeout=args.timeout, allow_errors=False)
    print(f"executed in {time.perf_counter() - start:.1f} s")
    for uri in result.succeeded:
        print(f"  ok      {Path(uri).relative_to(root)}")
    failed = result.excepted + result.errored
    for uri in failed:
        trace = cache.get_project_record(uri).traceback or "(no traceback)"
        name = Path(uri).relative_to(root)
        print(f"\nFAILED: {name}\n{trace}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
