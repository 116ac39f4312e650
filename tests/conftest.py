"""Shared fixtures: tests run on the CPU, seeded, with a headless backend."""

from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402


@pytest.fixture(autouse=True)
def _seed_and_close_figures():
    """Seed PyTorch for every test and close figures a test left open."""
    torch.manual_seed(0)
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


@pytest.fixture
def no_preset_env(monkeypatch):
    """Remove BOOK_PRESET so the default preset logic applies."""
    monkeypatch.delenv("BOOK_PRESET", raising=False)
    return os.environ
