"""Where code runs and how big the book's experiments are.

The book executes everywhere: on a two-core laptop with the ``cpu`` preset
and on a CUDA machine with the ``gpu`` preset, which sizes experiments up.
Pages ask :func:`preset` which one is in force and read their sizes from it.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import torch

from ._checks import check_int

__all__ = [
    "MAX_SEED",
    "PRESETS",
    "PRESET_ENV_VAR",
    "Timer",
    "benchmark",
    "device",
    "preset",
    "seed_everything",
    "synchronize",
    "timed",
]

#: The execution presets, smallest first.
PRESETS: tuple[str, ...] = ("cpu", "gpu")

#: Environment variable that forces a preset.
PRESET_ENV_VAR = "BOOK_PRESET"

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
    available and ``"cpu"`` when it is not.

    Returns:
        One of :data:`PRESETS`.

    Raises:
        ValueError: if ``BOOK_PRESET`` holds anything but an allowed value.
    """
    raw = os.environ.get(PRESET_ENV_VAR)
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
    repeats = check_int("repeats", repeats)
    warmup = check_int("warmup", warmup, minimum=0)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        with Timer(device) as t:
            fn()
        times.append(t.seconds)
    return float(np.median(times))

