"""Where code runs and how big the book's experiments are.

The book executes everywhere: on a two-core laptop with the ``cpu`` preset
and on a CUDA machine with the ``gpu`` preset, which sizes experiments up.
Pages ask :func:`preset` which one is in force and read their sizes from it.

A *smoke run* (``BOOK_SMOKE=1``, ``make smoke``) executes the ``gpu``
branch of every page on any machine, with steps and data capped to a few
batches by :func:`smoke_sizes` and :func:`cap`: it proves that the code
paths run (full-size data loading, device placement, sizes); its numbers
mean nothing and are never published.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import torch

from ._checks import check_int

__all__ = [
    "MAX_SEED",
    "PRESETS",
    "PRESET_ENV_VAR",
    "SMOKE_ENV_VAR",
    "Timer",
    "benchmark",
    "cap",
    "compare",
    "device",
    "preset",
    "seed_everything",
    "smoke",
    "smoke_sizes",
    "synchronize",
    "timed",
]

#: The execution presets, smallest first.
PRESETS: tuple[str, ...] = ("cpu", "gpu")

#: Environment variable that forces a preset.
PRESET_ENV_VAR = "BOOK_PRESET"

#: Environment variable that asks for a smoke run (see :func:`smoke`).
SMOKE_ENV_VAR = "BOOK_SMOKE"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")

#: The largest seed :func:`seed_everything` accepts: NumPy's legacy
#: generator takes seeds below 2**32 (PyTorch's go up to 2**64 - 1).
MAX_SEED = 2**32 - 1


def device() -> torch.device:
    """Return the best available device: CUDA, then Apple MPS, then CPU.

    Returns:
        The device that pages and examples put their tensors on.
    """
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def preset() -> str:
    """Return the execution preset, ``"cpu"`` or ``"gpu"``.

    ``BOOK_PRESET`` chooses the preset when it is set (case and surrounding
    blanks are ignored); otherwise the preset is ``"gpu"`` when CUDA is
    available and ``"cpu"`` when it is not. A smoke run (:func:`smoke`)
    is always ``"gpu"``: it exists to run that branch where no GPU is.

    Returns:
        One of :data:`PRESETS`.

    Raises:
        ValueError: if ``BOOK_PRESET`` holds anything but an allowed value,
            or names ``"cpu"`` in a smoke run.
    """
    raw = os.environ.get(PRESET_ENV_VAR)
    if smoke():
        if raw is not None and raw.strip().lower() not in ("", "gpu"):
            raise ValueError(
                f"{SMOKE_ENV_VAR} runs the 'gpu' preset, but "
                f"{PRESET_ENV_VAR}={raw!r}; unset one of them"
            )
        return "gpu"
    if raw is None or raw.strip() == "":
        return "gpu" if torch.cuda.is_available() else "cpu"
    value = raw.strip().lower()
    if value not in PRESETS:
        allowed = ", ".join(repr(p) for p in PRESETS)
        raise ValueError(
            f"{PRESET_ENV_VAR}={raw!r} is not a preset; "
            f"expected one of {allowed}"
        )
    return value


def smoke() -> bool:
    """Return whether this is a smoke run (``BOOK_SMOKE`` is set).

    ``BOOK_SMOKE`` set to ``1``, ``true``, ``yes`` or ``on`` (any case)
    asks for one; unset, empty, ``0``, ``false``, ``no`` or ``off`` does
    not.

    Returns:
        True in a smoke run.

    Raises:
        ValueError: if ``BOOK_SMOKE`` holds any other value.
    """
    raw = os.environ.get(SMOKE_ENV_VAR, "")
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(
        f"{SMOKE_ENV_VAR}={raw!r} is neither on (1, true, yes, on) nor "
        "off (0, false, no, off, empty)"
    )


_T = TypeVar("_T")


def cap(value: _T, smoke_value: _T) -> _T:
    """``value``, or ``smoke_value`` in a smoke run.

    For the few sizes a page sets outside its ``SIZES`` (a dataset slice,
    a number of seeds): ``n = runtime.cap(60_000, 512)``.

    Args:
        value: what the page uses.
        smoke_value: what a smoke run uses instead (a few batches' worth).

    Returns:
        ``smoke_value`` when :func:`smoke` is true, else ``value``.
    """
    return smoke_value if smoke() else value


def smoke_sizes(sizes: Mapping[str, Any], **smoke_values: Any) -> dict:
    """A page's sizes, with some replaced in a smoke run.

    Pages pick their sizes by preset and then cap them for smoke runs in
    one line, naming the entries that set how much work is done::

        SIZES = {"cpu": dict(...), "gpu": dict(...)}[runtime.preset()]
        SIZES = runtime.smoke_sizes(SIZES, steps=3, batch_size=8)

    Args:
        sizes: the sizes of the preset in force.
        **smoke_values: the entries a smoke run replaces; each must be a
            key of ``sizes``, so that a misspelt name fails everywhere,
            not only in smoke runs.

    Returns:
        A new dict, ``sizes`` updated with ``smoke_values`` when
        :func:`smoke` is true, else a copy of ``sizes``.

    Raises:
        TypeError: if ``sizes`` is not a mapping.
        ValueError: if a name in ``smoke_values`` is not a key of
            ``sizes``.
    """
    if not isinstance(sizes, Mapping):
        raise TypeError(
            f"sizes must be a mapping, got {type(sizes).__name__}"
        )
    unknown = sorted(set(smoke_values) - set(sizes))
    if unknown:
        raise ValueError(
            f"smoke_sizes got {unknown}, which sizes does not have "
            f"(its keys: {sorted(sizes)})"
        )
    result = dict(sizes)
    if smoke():
        result.update(smoke_values)
    return result


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python's, NumPy's and PyTorch's random number generators.

    The seed is checked before any generator is touched, so a bad seed
    seeds nothing.

    Args:
        seed: an integer in ``0 .. MAX_SEED`` (``2**32 - 1``, the range
            every one of the three generators accepts).

    Returns:
        A fresh CPU ``torch.Generator`` seeded with ``seed``, for code that
        prefers an explicit generator to the global one.

    Raises:
        TypeError: if ``seed`` is not an integer.
        ValueError: if ``seed`` is outside ``0 .. MAX_SEED``.
    """
    seed = check_int("seed", seed, minimum=0)
    if seed > MAX_SEED:
        raise ValueError(
            f"seed={seed} must be at most MAX_SEED = 2**32 - 1, the largest "
            "seed NumPy accepts"
        )
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def synchronize(device: torch.device | str | None = None) -> None:
    """Wait for queued work on ``device`` (CUDA or MPS) to finish.

    Args:
        device: the device to wait for; ``None`` waits for every CUDA
            device when CUDA is available. The CPU never needs waiting for.
    """
    kind = torch.device(device).type if device is not None else None
    if kind in (None, "cuda") and torch.cuda.is_available():
        torch.cuda.synchronize()
    elif kind == "mps":
        torch.mps.synchronize()


@dataclass
class Timer:
    """Wall-clock time of a block, correct on asynchronous devices.

    The device is synchronised before the clock starts and before it is
    read, so queued GPU kernels are counted in the block that launched them.

    Args:
        device: the device to synchronise (see :func:`synchronize`).

    Attributes:
        seconds: the elapsed time, NaN until the block has ended.

    Example:
        >>> with Timer("cpu") as t:
        ...     total = sum(range(1000))
        >>> t.seconds >= 0.0
        True
    """

    device: torch.device | str | None = None
    seconds: float = field(default=float("nan"), init=False)
    _start: float = field(default=0.0, init=False, repr=False)

    def __enter__(self) -> Timer:
        synchronize(self.device)
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        synchronize(self.device)
        self.seconds = time.perf_counter() - self._start


@contextmanager
def timed(device: torch.device | str | None = None) -> Iterator[Timer]:
    """Time a ``with`` block; a functional spelling of :class:`Timer`.

    Args:
        device: the device to synchronise (see :func:`synchronize`).

    Yields:
        The :class:`Timer`; its ``seconds`` are set when the block ends.
    """
    with Timer(device) as t:
        yield t


def benchmark(
    fn: Callable[[], object],
    *,
    repeats: int = 5,
    warmup: int = 1,
    device: torch.device | str | None = None,
) -> float:
    """Median wall-clock seconds of ``fn()`` over ``repeats`` calls.

    Args:
        fn: a callable with no arguments.
        repeats: timed calls, at least 1.
        warmup: untimed calls made first (allocations, lazy init).
        device: the device to synchronise.

    Returns:
        The median time of one call in seconds.

    Raises:
        TypeError: if ``fn`` is not callable or a count is not an int.
        ValueError: if ``repeats < 1`` or ``warmup < 0``.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    return compare({"fn": fn}, repeats=repeats, warmup=warmup,
                   device=device)["fn"]


def compare(
    fns: Mapping[str, Callable[[], object]],
    *,
    repeats: int = 5,
    warmup: int = 1,
    device: torch.device | str | None = None,
) -> dict[str, float]:
    """Median wall-clock seconds of each callable, their calls interleaved.

    Each round calls every function once, in the mapping's order on even
    rounds and in reverse on odd ones, so that a machine that slows down,
    or a cache one function leaves warm for the next, favours none of them.

    Args:
        fns: names and callables with no arguments.
        repeats: timed rounds, at least 1.
        warmup: untimed rounds made first (allocations, lazy init).
        device: the device to synchronise.

    Returns:
        The median time of one call of each function, in seconds, by name.

    Raises:
        TypeError: if a value of ``fns`` is not callable or a count is not
            an int.
        ValueError: if ``fns`` is empty, ``repeats < 1`` or ``warmup < 0``.

    Example:
        >>> times = compare({"sum": lambda: sum(range(100)),
        ...                  "len": lambda: len(range(100))}, repeats=3)
        >>> sorted(times)
        ['len', 'sum']
    """
    if not fns:
        raise ValueError("fns must name at least one callable, got none")
    for name, fn in fns.items():
        if not callable(fn):
            raise TypeError(
                f"fns[{name!r}] must be callable, got {type(fn).__name__}"
            )
    repeats = check_int("repeats", repeats)
    warmup = check_int("warmup", warmup, minimum=0)
    names = list(fns)
    for _ in range(warmup):
        for name in names:
            fns[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for i in range(repeats):
        for name in names if i % 2 == 0 else reversed(names):
            with Timer(device) as t:
                fns[name]()
            times[name].append(t.seconds)
    return {name: float(np.median(ts)) for name, ts in times.items()}

