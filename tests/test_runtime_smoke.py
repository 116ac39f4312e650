"""Smoke runs (BOOK_SMOKE): the gpu preset, with sizes capped."""

from __future__ import annotations

import pytest
import torch

from transformer_book import runtime

SIZES = {"steps": 1000, "batch_size": 256, "d_model": 128}


@pytest.fixture
def clean_env(monkeypatch):
    monkeypatch.delenv("BOOK_PRESET", raising=False)
    monkeypatch.delenv("BOOK_SMOKE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    return monkeypatch


@pytest.mark.parametrize("value", ["1", "true", " YES ", "On"])
def test_smoke_on_forces_the_gpu_preset_without_cuda(clean_env, value):
    assert runtime.preset() == "cpu"
    clean_env.setenv("BOOK_SMOKE", value)
    assert runtime.smoke() is True
    assert runtime.preset() == "gpu"


@pytest.mark.parametrize("value", ["", "0", "false", "No", "off"])
def test_smoke_off_values(clean_env, value):
    clean_env.setenv("BOOK_SMOKE", value)
    assert runtime.smoke() is False
    assert runtime.preset() == "cpu"


def test_smoke_unset_is_off(clean_env):
    assert runtime.smoke() is False


def test_bad_smoke_value_names_the_variable(clean_env):
    clean_env.setenv("BOOK_SMOKE", "maybe")
    with pytest.raises(ValueError, match=r"BOOK_SMOKE='maybe'"):
        runtime.smoke()
    with pytest.raises(ValueError, match="BOOK_SMOKE"):
        runtime.preset()


def test_smoke_with_the_cpu_preset_is_a_contradiction(clean_env):
    clean_env.setenv("BOOK_SMOKE", "1")
    clean_env.setenv("BOOK_PRESET", "cpu")
    with pytest.raises(ValueError, match=r"BOOK_SMOKE.*BOOK_PRESET='cpu'"):
        runtime.preset()
    clean_env.setenv("BOOK_PRESET", "GPU")
    assert runtime.preset() == "gpu"


def test_smoke_sizes_replaces_entries_only_in_a_smoke_run(clean_env):
    normal = runtime.smoke_sizes(SIZES, steps=3, batch_size=8)
    assert normal == SIZES and normal is not SIZES
    clean_env.setenv("BOOK_SMOKE", "1")
    capped = runtime.smoke_sizes(SIZES, steps=3, batch_size=8)
    assert capped == {"steps": 3, "batch_size": 8, "d_model": 128}
    assert SIZES["steps"] == 1000  # the page's dict is not modified


@pytest.mark.parametrize("smoke", ["0", "1"])
def test_smoke_sizes_rejects_names_the_sizes_lack(clean_env, smoke):
    # A misspelt name fails in every run, not only in smoke runs.
    clean_env.setenv("BOOK_SMOKE", smoke)
    with pytest.raises(ValueError, match=r"\['step'\].*batch_size"):
        runtime.smoke_sizes(SIZES, step=3)


def test_smoke_sizes_rejects_a_non_mapping(clean_env):
    with pytest.raises(TypeError, match="sizes must be a mapping, got list"):
        runtime.smoke_sizes([("steps", 1)], steps=3)


def test_cap_returns_the_smoke_value_only_in_a_smoke_run(clean_env):
    assert runtime.cap(60_000, 512) == 60_000
    assert runtime.cap((0, 1, 2, 3, 4), (0,)) == (0, 1, 2, 3, 4)
    clean_env.setenv("BOOK_SMOKE", "yes")
    assert runtime.cap(60_000, 512) == 512
    assert runtime.cap((0, 1, 2, 3, 4), (0,)) == (0,)
