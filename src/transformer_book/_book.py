"""Book plumbing: presets, page sizes, smoke runs and the data-use log.

Pages and ``scripts/`` need this; a library user never does. A page's
sizes live beside it, in ``<page>.sizes.py`` (see :func:`read_sizes`), so
that tuning one page re-executes that page alone.
"""

from __future__ import annotations

import ast
import functools
import html
import json
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["DATA_LOG_ENV_VAR", "PAGE_ENV_VAR", "PRESETS", "PRESET_ENV_VAR",
           "SIZES_SUFFIX", "SMOKE_ENV_VAR", "Sizes", "logs_use", "preset",
           "read_sizes", "sizes", "smoke", "trained_gpt"]

PRESETS = ("cpu", "gpu")
PRESET_ENV_VAR = "BOOK_PRESET"
SMOKE_ENV_VAR = "BOOK_SMOKE"
#: A file where data functions append one JSON line per call (page, call).
DATA_LOG_ENV_VAR = "BOOK_DATA_LOG"
#: The page a kernel executes, for the data log.
PAGE_ENV_VAR = "BOOK_PAGE"
SIZES_SUFFIX = ".sizes.py"
_ON, _OFF = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")
_NAMES = ("cpu", "gpu", "smoke", "threads")
_PACKAGE = str(Path(__file__).parent)
_warned: set[str] = set()
_depth = 0


def smoke() -> bool:
    """Whether ``BOOK_SMOKE`` asks for a smoke run (1, true, yes, on)."""
    value = os.environ.get(SMOKE_ENV_VAR, "").strip().lower()
    if value not in _ON + _OFF:
        raise ValueError(
            f"{SMOKE_ENV_VAR}={os.environ[SMOKE_ENV_VAR]!r} is neither on "
            "(1, true, yes, on) nor off (0, false, no, off, empty)")
    return value in _ON


def preset() -> str:
    """The preset in force: ``BOOK_PRESET``, else ``"gpu"`` if CUDA is there.

    A smoke run is always ``"gpu"``: it runs that branch where no GPU is.
    """
    raw = os.environ.get(PRESET_ENV_VAR, "")
    value = raw.strip().lower() or ("gpu" if smoke() or _cuda() else "cpu")
    allowed = ("gpu",) if smoke() else PRESETS
    if value not in allowed:
        why = f" ({SMOKE_ENV_VAR} runs it; unset one)" if smoke() else ""
        raise ValueError(f"{PRESET_ENV_VAR}={raw!r} is not a preset: expected "
                         f"one of {', '.join(map(repr, allowed))}{why}")
    return value


def _cuda() -> bool:
    # torch only here: the build scripts import this module, and a named
    # preset spares them the seconds its import takes.
    import torch

    return torch.cuda.is_available()


class Sizes(dict[str, Any]):
    """A page's sizes; a notebook shows them as a small table."""

    preset = ""
    capped = False

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td><code>{html.escape(k)}</code></td>"
            f"<td><code>{html.escape(repr(v))}</code></td></tr>"
            for k, v in self.items())
        capped = ", capped for a smoke run" if self.capped else ""
        return (f"<table><caption>Sizes of this build: the {self.preset} "
                f"preset{capped}</caption>{rows}</table>")


def read_sizes(path: str | Path) -> dict[str, Any]:
    """Read a sizes file: Python literals assigned to four names.

    ``cpu`` and ``gpu`` are dicts with the same keys; ``smoke`` (optional)
    replaces some of ``gpu``'s in a smoke run; ``threads`` (optional) sets
    the CPU compute threads of the page. Nothing in the file is executed.
    """
    tree = ast.parse(Path(path).read_text(encoding="utf-8"), str(path))
    table: dict[str, Any] = {}
    for node in tree.body:
        target = getattr(node, "targets", [None])[0]
        if not isinstance(node, ast.Assign) or (
                getattr(target, "id", None) not in _NAMES):
            raise ValueError(f"{path}:{node.lineno}: a sizes file assigns "
                             f"literals to {', '.join(_NAMES)} only")
        table[target.id] = ast.literal_eval(node.value)
    given = [table.get(name, {}) for name in ("cpu", "gpu", "smoke")]
    cpu, gpu, capped = (set(d) if isinstance(d, dict) else set()
                        for d in given)
    if (not all(isinstance(d, dict) for d in given) or not cpu
            or cpu != gpu or not capped <= gpu):
        raise ValueError(
            f"{path}: cpu and gpu must be dicts of the same sizes, smoke a "
            f"dict of some of them; only in cpu: {sorted(cpu - gpu)}, only "
            f"in gpu: {sorted(gpu - cpu)}, unknown in smoke: "
            f"{sorted(capped - gpu)}")
    return table


def sizes(page: str, folder: str | Path = ".") -> Sizes:
    """The sizes of ``page`` for the preset in force, smoke caps applied.

    Reads ``<folder>/<page>.sizes.py`` (a page executes in its own folder)
    and sets the page's compute threads when the file names them.
    """
    table = read_sizes(Path(folder) / f"{page}{SIZES_SUFFIX}")
    if "threads" in table:
        import torch

        torch.set_num_threads(table["threads"])
    capped = table.get("smoke", {}) if smoke() else {}
    result = Sizes(table[preset()], **capped)
    result.preset, result.capped = preset(), smoke()
    return result


def trained_gpt() -> Any:
    """The GPT chapter's trained model, as ``recipes.trained`` caches it.

    Later chapters start from it: the same call as the chapter's (its
    sizes, snapshots and evaluations), so the cached run is shared, not
    trained again. Reads ``../implementation/gpt.sizes.py``: a page runs
    in its part's folder.
    """
    from . import recipes

    gpt = sizes("gpt", Path("..") / "implementation")
    chosen = {k: gpt[k] for k in ("steps", "batch_size", "valid_windows")}
    return recipes.trained("gpt", preset(), snapshots=gpt["snapshots"],
                           eval_every=gpt["eval_every"], **chosen)


def _warn_once(key: str, message: str) -> None:
    """Warn once per process, at the first caller outside the package."""
    if key in _warned:
        return
    _warned.add(key)
    level, frame = 1, sys._getframe(0)
    while frame.f_back and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, UserWarning, stacklevel=level)


_F = TypeVar("_F", bound=Callable[..., Any])


def _call_text(name: str, args: tuple, kwargs: dict) -> str:
    shown = [repr(a) for a in args]
    shown += [f"{k}={v!r}" for k, v in kwargs.items() if k != "cache_dir"]
    cut = [text if len(text) <= 40 else text[:37] + "..." for text in shown]
    return f"{name}({', '.join(cut)})"


def logs_use(fn: _F) -> _F:
    """Record the outermost calls of data function ``fn`` in the data log.

    The log (``$BOOK_DATA_LOG``) gets one JSON line per call: the page
    (``$BOOK_PAGE``) and the call. A log that cannot be written costs no
    data: it is skipped, with one warning per path.
    """

    @functools.wraps(fn)
    def logged(*args: Any, **kwargs: Any) -> Any:
        global _depth
        log = os.environ.get(DATA_LOG_ENV_VAR, "").strip()
        if log and _depth == 0:
            line = json.dumps({"page": os.environ.get(PAGE_ENV_VAR, ""),
                               "call": _call_text(fn.__name__, args, kwargs)})
            try:
                with open(log, "a", encoding="utf-8") as f:
                    f.write(line + "\n")
            except OSError as error:
                _warn_once(log, f"cannot write the data log "
                           f"${DATA_LOG_ENV_VAR}={log!r} ({error}); data "
                           "calls are not recorded while it cannot be")
        _depth += 1
        try:
            return fn(*args, **kwargs)
        finally:
            _depth -= 1

    return logged  # type: ignore[return-value]
