"""Shared fixtures: tests run on the CPU, seeded, with a headless backend."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

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
def one_thread():
    """One compute thread: tiny models run fastest on one, and steadiest
    on cores that other tests share."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def no_preset_env(monkeypatch):
    """Remove BOOK_PRESET so the default preset logic applies."""
    monkeypatch.delenv("BOOK_PRESET", raising=False)
    return os.environ


@pytest.fixture(scope="session")
def load_benchmark():
    """Import a script of ``benchmarks/`` by name, as a module.

    The module is registered in ``sys.modules`` while the session runs
    (dataclasses read their annotations through it) and removed after.
    """
    folder = Path(__file__).resolve().parents[1] / "benchmarks"
    names = []

    def load(name: str):
        module_name = f"benchmarks_{name}"
        if module_name in sys.modules:
            return sys.modules[module_name]
        spec = importlib.util.spec_from_file_location(
            module_name, folder / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        names.append(module_name)
        spec.loader.exec_module(module)
        return module

    yield load
    for module_name in names:
        sys.modules.pop(module_name, None)
