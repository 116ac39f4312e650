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
   preset (:func:`transformer_book._book.preset`) the cache was filled
   with. When the package changed, the cache and Sphinx's saved
   environment are removed and the new key is recorded at once: the cache
   is cleared once per package change, so a page that fails is executed
   again on the next run, but the pages that passed stay cached. When only
   the preset changed, the cache is kept aside, one per preset
   (``_build/.jupyter_caches/<preset>``), and the new preset's own cache
   comes back if it was filled with the same package. A page's sizes
   file (``gpt.sizes.py`` beside ``gpt.md``) is part of that page's key
   alone: when it changed, that page's cached outputs are dropped
   (:func:`drop_resized`), and no other page is executed again.
2. **One compute thread per core.** The tool starts one kernel per core
   (its pool has no size option), and each kernel would start one compute
   thread per core: the threads would outnumber the cores, and the small
   models the pages train slow down 20-50 times. ``OMP_NUM_THREADS`` is
   set to cores // kernels (1) before the kernels start, unless set already.
3. **The project follows ``_toc.yml``**: listed pages are added, pages no
   longer listed are dropped, and the traceback of a failing page is
   printed with a non-zero exit status.
4. **Data, offline and accounted for.** ``--seed-data DIR`` (``make book
   BOOK_DATA=DIR``) fills the data cache from a folder of reference copies
   first (:func:`transformer_book.data.seed_cache`: checked, copied, the
   folder only read). Each kernel knows its page (``BOOK_PAGE``) and the
   data functions record their calls (``BOOK_DATA_LOG``); the calls of the
   pages executed are kept in ``_build/data-use.json``.
5. **A report** (``--report``, the end of ``make book``): the data each
   page used and the five slowest pages with their execution times.
6. **Smoke runs** (``--smoke``, ``make smoke``): every page's ``gpu``
   branch on any machine, with ``BOOK_SMOKE=1`` so that pages cap their
   steps and data (the ``smoke`` entries of their sizes files), into a
   cache of its own (``_build/smoke``, emptied first) that no build reads.
   The numbers mean nothing, so a failed ``assert`` (a page's claim about
   its numbers) is counted, not fatal; any other error fails the run.
   ``BOOK_SMOKE`` set without ``--smoke`` is refused: smoke outputs never
   reach the book's cache.
7. **One trim, after the run.** jupyter-cache trims the cache to its size
   limit each time a worker caches a page, and two workers trimming at
   once can remove a page being cached (:class:`_Cache`); here the cache
   is trimmed once, when every page is cached.

Usage: python scripts/execute_pages.py [--hash-file PATH] [--timeout S]
       [--seed-data DIR] [--smoke] [--report]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import multiprocessing
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from jupyter_cache.cache.main import JupyterCacheBase
from jupyter_cache.executors.base import ExecutorRunResult
from jupyter_cache.executors.basic import (
    REPORT_LEVEL,
    ExecutionWorkerLocalMProc,
    JupyterExecutorLocalMproc,
    ProcessData,
)

READER = {"name": "myst_nb_md", "type": "plugin"}
#: The pages shown by the report, slowest first.
SLOWEST = 5
# transformer_book.recipes.MODELS_ENV_VAR, spelled out: importing recipes
# would import torch (tests/test_execution_cache.py checks they agree).
MODELS_ENV_VAR = "TRANSFORMER_BOOK_MODELS"


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


def sizes_file(page: Path) -> Path:
    """The sizes file of a page: ``gpt.sizes.py`` beside ``gpt.md``."""
    from transformer_book._book import SIZES_SUFFIX

    return page.with_name(page.stem + SIZES_SUFFIX)


def drop_resized(cache: Any, record: Path, pages: list[Path]) -> list[str]:
    """Drop the cached outputs of the pages whose sizes file changed.

    ``record`` (kept in the cache folder, so each preset's cache has its
    own) holds the sha256 of each page's sizes file ("" for none) as the
    cache last saw it; a page it does not know counts as changed.

    Returns:
        The pages (URIs) whose outputs were dropped.
    """
    seen = json.loads(record.read_text()) if record.exists() else {}
    now = {}
    for page in pages:
        path = sizes_file(page)
        now[str(page)] = (hashlib.sha256(path.read_bytes()).hexdigest()
                          if path.exists() else "")
    dropped = []
    for uri, digest in now.items():
        cached = cache.get_cached_project_nb(uri)
        if cached is not None and seen.get(uri) != digest:
            cache.remove_cache(cached.pk)
            dropped.append(uri)
    _write(record, json.dumps(now, indent=1) + "\n")
    return dropped


class _PageWorker(ExecutionWorkerLocalMProc):
    """jupyter-cache's worker; the kernel it starts knows its page.

    A worker process executes one page at a time and the kernel inherits
    its environment, so ``BOOK_PAGE`` names the page to the data log.
    """

    @staticmethod
    def execute(project_nb: Any, data: Any) -> Any:
        from transformer_book._book import PAGE_ENV_VAR

        os.environ[PAGE_ENV_VAR] = project_nb.uri
        return ExecutionWorkerLocalMProc.execute(project_nb, data)


class _Cache(JupyterCacheBase):
    """jupyter-cache's cache, which trims itself only when asked.

    The stock cache trims itself to its size limit each time a worker
    caches a page (``truncate_caches``), reading the records to keep and
    the records to drop in two queries. Two workers caching at once race
    there: a record the other worker commits between the two queries is
    taken for an old one and removed, and a page fails with "Notebook file
    does not exist for cache record" (seen in ``make slow``'s smoke test).
    Here caching never trims; :func:`main` trims once, after every page is
    cached.
    """

    def truncate_caches(self) -> None:
        """Nothing while pages execute: see :meth:`trim`."""

    def trim(self) -> None:
        """Drop the oldest cached pages beyond the cache's size limit."""
        JupyterCacheBase.truncate_caches(self)


#: Seconds each page took in a measured build (``make book``, then
#: ``scripts/execute_pages.py --report``): only their order is used, to
#: start the longest pages first. A page missing here starts first.
PAGE_SECONDS = Path(__file__).with_name("page_seconds.json")


class _Executor(JupyterExecutorLocalMproc):
    """The ``local-parallel`` executor, with :class:`_PageWorker`, that
    hands out one page at a time, the longest first.

    The stock executor's ``Pool.map`` gives each worker a chunk of three
    pages in the table of contents' order, so the slowest pages, at the
    end, often ran one after the other while the other core idled.
    """

    _EXECUTION_WORKER = _PageWorker
    root = Path(".")

    def run_and_cache(self, *, filter_uris: Any = None,
                      filter_pks: Any = None, timeout: int = 30,
                      allow_errors: bool = False,
                      force: bool = False) -> ExecutorRunResult:
        """Execute the pages not in the cache (see the class)."""
        expected = (json.loads(PAGE_SECONDS.read_text())
                    if PAGE_SECONDS.exists() else {})
        records = sorted(
            self.get_records(filter_uris, filter_pks, force=force),
            key=lambda r: -expected.get(_relative(r.uri, self.root),
                                        float("inf")))
        multiprocessing.log_to_stderr(REPORT_LEVEL)  # one line a page
        with multiprocessing.Pool() as pool:
            results = list(pool.imap_unordered(self._EXECUTION_WORKER(), [
                ProcessData(r.pk, r.uri, self.cache, timeout, allow_errors)
                for r in records], chunksize=1))
        return ExecutorRunResult(
            succeeded=[p for i, p in results if i == 0],
            excepted=[p for i, p in results if i == 1],
            errored=[p for i, p in results if i == 2])


def read_data_log(log: Path, root: Path) -> dict[str, list[str]]:
    """The calls a data log records, by page relative to ``root``."""
    calls: dict[str, set[str]] = {}
    if log.exists():
        for line in log.read_text().splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:  # a line cut by a killed kernel
                continue
            page = _relative(record.get("page") or "(unknown page)", root)
            calls.setdefault(page, set()).add(record.get("call", "?"))
    return {page: sorted(found) for page, found in calls.items()}


def update_data_use(
    store: Path, log: Path, root: Path, executed: list[str], pages: list[str]
) -> dict[str, list[str]]:
    """Record the data the executed pages used, beside the older records.

    Args:
        store: the JSON file of page -> calls, kept between runs (a page
            served from the cache keeps its calls from the run that
            executed it).
        log: this run's data log.
        root: the book's root (pages are named relative to it).
        executed: the pages this run executed (relative paths): their old
            records are replaced, by nothing when they loaded no data.
        pages: the pages of the book: records of other pages are dropped.

    Returns:
        The updated records.
    """
    use: dict[str, list[str]] = {}
    if store.exists():
        try:
            use = json.loads(store.read_text())
        except json.JSONDecodeError:
            use = {}
    for page in executed:
        use.pop(page, None)
    use.update(read_data_log(log, root))
    use = {page: use[page] for page in pages if use.get(page)}
    _write(store, json.dumps(use, indent=1) + "\n")
    return use


def execution_times(cache: Any, root: Path) -> dict[str, float]:
    """Seconds each page's cached execution took, by relative path."""
    times = {}
    for record in cache.list_project_records():
        try:
            cached = cache.get_cached_project_nb(record.uri)
        except Exception:  # an unreadable page: no time to report
            cached = None
        if cached is not None and cached.data:
            seconds = cached.data.get("execution_seconds")
            if seconds is not None:
                times[_relative(record.uri, root)] = float(seconds)
    return times


def _relative(uri: str, root: Path) -> str:
    path = Path(uri)
    return str(path.relative_to(root)) if path.is_relative_to(root) else uri


def report(
    times: dict[str, float], data_use: dict[str, list[str]], pages: list[str]
) -> str:
    """The data each page used and the slowest pages, as text."""
    lines = ["data used by each page:"]
    for page in pages:
        calls = data_use.get(page)
        if calls:
            lines.append(f"  {page}: {', '.join(calls)}")
    if len(lines) == 1:
        lines.append("  (none recorded)")
    slowest = sorted(times.items(), key=lambda item: -item[1])[:SLOWEST]
    lines.append(f"the {len(slowest)} slowest pages (execution time):")
    for page, seconds in slowest:
        lines.append(f"  {seconds:7.1f} s  {page}")
    return "\n".join(lines)


def smoke_errors(nb: Any) -> tuple[list[str], int]:
    """The errors of an executed notebook that fail a smoke run.

    Returns:
        ``(errors, claims)``: a line for each error that is not an
        ``AssertionError`` (cells tagged ``raises-exception`` are expected
        to raise), and the number of failed asserts, which a smoke run
        only counts: its numbers are not meant to satisfy the page.
    """
    errors, claims = [], 0
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if "raises-exception" in cell.metadata.get("tags", []):
            continue
        for output in cell.get("outputs", []):
            if output.get("output_type") != "error":
                continue
            if output.get("ename") == "AssertionError":
                claims += 1
            else:
                errors.append(
                    f"cell {index}: {output.get('ename')}: "
                    f"{output.get('evalue')}"
                )
    return errors, claims


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
    parser.add_argument(
        "--seed-data",
        type=Path,
        default=None,
        help="a folder of reference copies to fill the data cache from",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="execute every page's gpu branch, capped (BOOK_SMOKE=1)",
    )
    parser.add_argument(
        "--report",
        action="store_true",
        help="only print the data each page used and the slowest pages",
    )
    args = parser.parse_args()

    from jupyter_cache import get_cache

    root = args.root.resolve()
    build = root / "_build" / "smoke" if args.smoke else root / "_build"
    hash_file = args.hash_file or root / "_build" / ".package-hash"
    cache_path = build / ".jupyter_cache"
    use_file = build / "data-use.json"

    def page_names() -> list[str]:
        return [_relative(str(page), root) for page in toc_pages(root)]

    if args.report:
        cache = get_cache(str(cache_path))
        print(report(execution_times(cache, root),
                     json.loads(use_file.read_text())
                     if use_file.exists() else {}, page_names()))
        return 0

    # After the report. torch is imported only where it is needed: to look
    # for a GPU when BOOK_PRESET is unset, and to seed the data cache.
    from transformer_book._book import DATA_LOG_ENV_VAR, SMOKE_ENV_VAR
    from transformer_book._book import preset as book_preset
    from transformer_book._book import smoke as book_smoke

    if args.smoke:
        os.environ[SMOKE_ENV_VAR] = "1"
    try:
        preset = book_preset()
        smoke = book_smoke()
    except ValueError as error:  # a BOOK_PRESET that names no preset
        print(error, file=sys.stderr)
        return 2
    if smoke and not args.smoke:
        print(f"{SMOKE_ENV_VAR} is set: smoke outputs never go into the "
              "book's cache; run `make smoke` (--smoke)", file=sys.stderr)
        return 2
    print(f"preset: {preset}{' (smoke run: steps and data capped)' * smoke}")

    toc = toc_pages(root)
    names = page_names()
    if args.seed_data is not None:
        from transformer_book import data

        try:
            seeded = data.seed_cache(args.seed_data)
        except (OSError, ValueError) as error:
            print(f"cannot seed the data cache: {error}", file=sys.stderr)
            return 2
        counts = {state: sum(1 for s in seeded.values() if s == state)
                  for state in ("copied", "cached", "absent")}
        print(f"data cache {data.cache_dir()} seeded from {args.seed_data}: "
              + ", ".join(f"{n} {state}" for state, n in counts.items()))

    if args.smoke:
        if build.exists():  # every page, every time
            shutil.rmtree(build)
    else:
        select_cache(root, hash_file, preset)

    # The executor's pool holds one kernel per core: one thread each.
    kernels = os.cpu_count() or 1
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    # Models that several pages train (recipes.trained), once per build.
    os.environ.setdefault(MODELS_ENV_VAR, str(build / "models"))
    threads = int(os.environ['OMP_NUM_THREADS'])
    print(f"{threads} compute thread{'s' if threads != 1 else ''} per page")

    cache = get_cache(str(cache_path), cache_cls=_Cache)
    pages = {str(page): page for page in toc}
    for record in cache.list_project_records():
        if record.uri not in pages:
            cache.remove_nb_from_project(record.uri)
    for uri in pages:
        cache.add_nb_to_project(uri, read_data=READER)
    resized = drop_resized(cache, cache_path / "sizes.json", toc)
    if resized:
        names = ", ".join(_relative(uri, root) for uri in resized)
        print(f"sizes changed, executed again: {names}")
    todo = cache.list_unexecuted()
    print(f"{len(todo)} page(s) to execute, up to {kernels} at a time")
    if not todo:
        return 0

    log = build / ".data-log.jsonl"
    log.unlink(missing_ok=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    os.environ[DATA_LOG_ENV_VAR] = str(log)
    logger = logging.getLogger("execute_pages")
    logger.setLevel(logging.INFO)
    executor = _Executor(cache=cache, logger=logger)
    executor.root = root
    start = time.perf_counter()
    # A smoke run goes on after an error, to tell asserts from failures.
    result = executor.run_and_cache(timeout=args.timeout,
                                    allow_errors=args.smoke)
    cache.trim()  # once, with no worker caching any more
    print(f"executed in {time.perf_counter() - start:.1f} s")
    failed = result.excepted + result.errored
    claims = 0
    for uri in result.succeeded:
        name = _relative(uri, root)
        if args.smoke:
            record = cache.get_cached_project_nb(uri)
            errors, asserts = (
                smoke_errors(cache.get_cache_bundle(record.pk).nb)
                if record is not None else (["not in the cache"], 0)
            )
            claims += asserts
            if errors:
                failed.append(uri)
                print(f"\nFAILED (smoke): {name}\n" + "\n".join(errors),
                      file=sys.stderr)
                continue
            note = f" ({asserts} assert(s) not met)" if asserts else ""
            print(f"  ok      {name}{note}")
        else:
            print(f"  ok      {name}")
    for uri in result.excepted + result.errored:
        trace = cache.get_project_record(uri).traceback or "(no traceback)"
        print(f"\nFAILED: {_relative(uri, root)}\n{trace}", file=sys.stderr)
    executed = [_relative(uri, root) for uri in result.succeeded + failed]
    use = update_data_use(use_file, log, root, executed, names)
    if args.smoke:
        print(f"smoke run: {claims} assert(s) about numbers not met "
              "(expected: steps and data are capped)")
        print(report(execution_times(cache, root), use, names))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
