import math
import random

import numpy as np
import pytest
import torch

from transformer_book import runtime


def test_device_is_cpu_without_accelerators(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert runtime.device() == torch.device("cpu")


def test_device_prefers_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert runtime.device() == torch.device("cuda")


def test_device_uses_mps_without_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert runtime.device() == torch.device("mps")


def test_seed_everything_reproduces_all_generators():
    def draw():
        return (
            random.random(),
            np.random.rand(),
            torch.rand(3).tolist(),
        )

    gen = runtime.seed_everything(123)
    first = draw(), torch.rand(2, generator=gen).tolist()
    gen = runtime.seed_everything(123)
    second = draw(), torch.rand(2, generator=gen).tolist()
    assert first == second
    runtime.seed_everything(124)
    assert draw() != first[0]


@pytest.mark.parametrize(
    ("seed", "error", "match"),
    [
        (-1, ValueError, "seed=-1"),
        (1.5, TypeError, "seed must be an int"),
        (True, TypeError, "seed must be an int"),
        ("0", TypeError, "seed must be an int"),
        (2**32, ValueError, "seed=4294967296 must be at most"),
        (2**64, ValueError, "seed=18446744073709551616 must be at most"),
    ],
)
def test_seed_everything_rejects_bad_seeds_and_seeds_nothing(
    seed, error, match
):
    # 2**64 used to seed Python and NumPy, then fail in torch.manual_seed.
    random.seed(7)
    np.random.seed(7)
    torch.manual_seed(7)
    before = (random.getstate(), np.random.get_state()[1].copy(),
              torch.get_rng_state())
    with pytest.raises(error, match=match):
        runtime.seed_everything(seed)
    assert random.getstate() == before[0]
    assert (np.random.get_state()[1] == before[1]).all()
    assert torch.equal(torch.get_rng_state(), before[2])


def test_seed_everything_accepts_the_largest_seed():
    gen = runtime.seed_everything(runtime.MAX_SEED)
    assert gen.initial_seed() == 2**32 - 1
    first = np.random.rand()
    runtime.seed_everything(runtime.MAX_SEED)
    assert np.random.rand() == first


class FakeClock:
    """Stands in for time.perf_counter; records every read."""

    def __init__(self, readings, events):
        self.readings = list(readings)
        self.events = events

    def __call__(self):
        self.events.append("clock")
        return self.readings.pop(0)


@pytest.fixture
def clock(monkeypatch):
    """A fake clock and a log of clock reads and device synchronisations."""
    events = []

    def install(*readings):
        fake = FakeClock(readings, events)
        monkeypatch.setattr(runtime.time, "perf_counter", fake)
        monkeypatch.setattr(
            runtime, "synchronize",
            lambda device=None: events.append(("sync", device)),
        )
        return events

    return install


def test_timer_reports_the_clock_difference_after_synchronising(clock):
    events = clock(10.0, 12.5)
    with runtime.Timer("cuda") as t:
        assert math.isnan(t.seconds)  # not set until the block ends
        events.append("body")
    assert t.seconds == 2.5
    # Wait for queued work before starting and before reading the clock.
    assert events == [
        ("sync", "cuda"), "clock", "body", ("sync", "cuda"), "clock",
    ]


def test_timed_is_a_timer_on_the_given_device(clock):
    events = clock(1.0, 1.25)
    with runtime.timed(device="mps") as t:
        pass
    assert t.seconds == 0.25
    assert ("sync", "mps") in events


def test_timer_synchronises_cuda(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: calls.append(1))
    with runtime.Timer("cuda"):
        pass
    assert len(calls) == 2  # before starting and before reading the clock


def test_synchronize_skips_the_cpu(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: calls.append(1))
    runtime.synchronize(device="cpu")
    assert calls == []
    runtime.synchronize(device=torch.device("cuda"))
    assert calls == [1]


def test_benchmark_returns_the_median_of_the_timed_calls(clock):
    # Three timed calls of 3, 1 and 2 seconds; the warm-up is not timed.
    events = clock(0.0, 3.0, 10.0, 11.0, 20.0, 22.0)
    calls = []
    seconds = runtime.benchmark(
        lambda: calls.append(1), repeats=3, warmup=2, device="cuda"
    )
    assert seconds == 2.0
    assert len(calls) == 5
    assert events.count("clock") == 6
    assert ("sync", "cuda") in events


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(repeats=0), ValueError, "repeats=0"),
        (dict(warmup=-1), ValueError, "warmup=-1"),
        (dict(repeats="3"), TypeError, "repeats must be an int"),
        (dict(warmup=1.0), TypeError, "warmup must be an int"),
    ],
)
def test_benchmark_rejects_bad_counts(kwargs, error, match):
    with pytest.raises(error, match=match):
        runtime.benchmark(lambda: None, **kwargs)


def test_compare_interleaves_the_calls_and_alternates_their_order(clock):
    # Two rounds after one warm-up round: a, b, then b, a.
    clock(0.0, 1.0, 10.0, 13.0, 20.0, 24.0, 30.0, 32.0)
    calls = []
    seconds = runtime.compare(
        {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")},
        repeats=2, warmup=1,
    )
    assert calls == ["a", "b", "a", "b", "b", "a"]
    # a: 1 s then 2 s; b: 3 s then 4 s.
    assert seconds == {"a": 1.5, "b": 3.5}


@pytest.mark.parametrize(
    ("fns", "error", "match"),
    [
        ({}, ValueError, "at least one"),
        ({"x": 42}, TypeError, r"fns\['x'\] must be callable"),
    ],
)
def test_compare_rejects_bad_functions(fns, error, match):
    with pytest.raises(error, match=match):
        runtime.compare(fns)


def test_benchmark_rejects_a_non_callable():
    with pytest.raises(TypeError, match="must be callable, got int"):
        runtime.benchmark(42)
