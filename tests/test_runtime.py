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


def test_preset_defaults_follow_cuda(monkeypatch, no_preset_env):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert runtime.preset() == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert runtime.preset() == "gpu"


@pytest.mark.parametrize("value", ["cpu", "gpu", " GPU ", "Cpu"])
def test_preset_env_overrides(monkeypatch, value):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("BOOK_PRESET", value)
    assert runtime.preset() == value.strip().lower()


def test_empty_preset_env_means_default(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("BOOK_PRESET", "")
    assert runtime.preset() == "cpu"


def test_bad_preset_names_allowed_values(monkeypatch):
    monkeypatch.setenv("BOOK_PRESET", "foo")
    with pytest.raises(ValueError, match=r"BOOK_PRESET='foo'.*'cpu', 'gpu'"):
        runtime.preset()


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
    ],
)
def test_seed_everything_rejects_bad_seeds(seed, error, match):
    with pytest.raises(error, match=match):
        runtime.seed_everything(seed)


def test_timer_measures_elapsed_time():
    with runtime.Timer() as t:
        sum(range(10_000))
    assert 0 <= t.seconds < 5
    with runtime.timed("cpu") as t2:
        pass
    assert t2.seconds >= 0


def test_timer_synchronises_cuda(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: calls.append(1))
    with runtime.Timer("cuda"):
        pass
    assert len(calls) == 2  # before starting and before reading the clock


def test_benchmark_returns_median_and_validates():
    counter = []
    seconds = runtime.benchmark(lambda: counter.append(1), repeats=3, warmup=2)
    assert seconds >= 0
    assert len(counter) == 5
    with pytest.raises(ValueError, match="repeats=0"):
        runtime.benchmark(lambda: None, repeats=0)
    with pytest.raises(ValueError, match="warmup=-1"):
        runtime.benchmark(lambda: None, warmup=-1)
