"""Where code runs, seeding and timing that synchronises the device."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import torch

from ._checks import check_int

__all__ = ["MAX_SEED", "Timer", "benchmark", "compare", "device",
           "seed_everything", "synchronize", "timed"]

#: The largest seed :func:`seed_everything` accepts: NumPy's legacy
#: generator takes seeds below 2**32 (PyTorch's go up to 2**64 - 1).
MAX_SEED = 2**32 - 1


def device() -> torch.device:
    """Return the best available device: CUDA, then Apple MPS, then CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python's, NumPy's and PyTorch's generators with ``seed`` (in
    ``0 .. MAX_SEED``, checked first); return a fresh CPU generator seeded
    with it too."""
    seed = check_int("seed", seed, minimum=0)
    if seed > MAX_SEED:
        raise ValueError(f"seed={seed} must be at most MAX_SEED = 2**32 - 1, "
                         "the largest seed NumPy accepts")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def synchronize(device: torch.device | str | None = None) -> None:
    """Wait for queued work on ``device`` (CUDA or MPS) to finish;
    ``None`` waits for CUDA."""
    kind = torch.device(device).type if device is not None else None
    if kind in (None, "cuda") and torch.cuda.is_available():
        torch.cuda.synchronize()
    elif kind == "mps":
        torch.mps.synchronize()


@dataclass
class Timer:
    """Wall-clock seconds of a ``with`` block, the device synchronised.

    The device is synchronised before the clock starts and before it is
    read, so queued GPU kernels count in the block that launched them.
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


#: Time a ``with`` block: ``with timed(device) as t: ...; t.seconds``.
timed = Timer


def benchmark(fn: Callable[[], object], *, repeats: int = 5, warmup: int = 1,
              device: torch.device | str | None = None) -> float:
    """Median wall-clock seconds of ``fn()`` over ``repeats`` calls; the
    arguments as :func:`compare`'s."""
    return compare({"fn": fn}, repeats=repeats, warmup=warmup,
                   device=device)["fn"]


def compare(fns: Mapping[str, Callable[[], object]], *, repeats: int = 5,
            warmup: int = 1,
            device: torch.device | str | None = None) -> dict[str, float]:
    """Median wall-clock seconds of each callable, their calls interleaved.

    Each round calls every function once, in order on even rounds and in
    reverse on odd ones, so that neither a machine that slows down nor a
    cache left warm favours one of them.

    Args:
        fns: names and callables with no arguments.
        repeats, warmup: timed rounds (at least 1), untimed rounds first.
        device: the device to synchronise.

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
                f"fns[{name!r}] must be callable, got {type(fn).__name__}")
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
