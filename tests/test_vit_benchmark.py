"""Smoke tests of benchmarks/vit_mnist.py: both data sets, a few steps.

The full runs (minutes on a CPU) are reported, not tested; these check that
the script's code paths, the ``gpu`` preset's Fashion-MNIST included, run
end to end and print the JSON line the issue asks for.
"""

import csv
import json
import shutil
from pathlib import Path

import pytest
import torch

from transformer_book import data, recipes

ROOT = Path(__file__).resolve().parents[1]
FASHION = ROOT.parent / "shared" / "data" / "fashion-mnist"
TINY = ["--d-model", "16", "--num-layers", "1", "--d-ff", "32",
        "--threads", "1"]


@pytest.fixture(scope="module")
def benchmark(load_benchmark):
    return load_benchmark("vit_mnist")


def _last_json(capsys):
    lines = capsys.readouterr().out.strip().splitlines()
    return json.loads(lines[-1])


def test_mnist_5k_prints_the_json_line(benchmark, capsys):
    result = benchmark.main([*TINY, "--max-steps", "3", "--with-reference"])
    printed = _last_json(capsys)
    assert printed == result
    assert set(printed) >= {"test_accuracy", "seconds", "params",
                            "time_ratio", "reference_seconds"}
    assert printed["data"] == "mnist-5k"
    assert 0.0 <= printed["test_accuracy"] <= 1.0
    assert printed["params"] > 0 and printed["seconds"] > 0


def test_recipes_are_the_issue_s_reference_and_a_vit(benchmark):
    reference = benchmark.REFERENCE
    assert (reference["patch_size"], reference["d_model"],
            reference["num_layers"], reference["num_heads"],
            reference["d_ff"]) == (7, 64, 4, 4, 128)
    assert (reference["epochs"], reference["batch_size"]) == (30, 128)
    # The book's recipe is recipes.get("vit"); flags change its sizes.
    assert set(benchmark.BOOK) <= set(recipes.defaults("vit"))


def test_fashion_mnist_path_runs_on_cpu(benchmark, capsys, tmp_path,
                                         monkeypatch):
    """The ``--data fashion-mnist`` run (60,000 images), a few steps."""
    if not FASHION.is_dir():
        pytest.skip("no reference copy of Fashion-MNIST here")
    cache = tmp_path / "cache"
    (cache / "fashion-mnist").mkdir(parents=True)
    for gz in FASHION.glob("*.gz"):  # the ".gz copied by hand" source
        shutil.copy(gz, cache / "fashion-mnist" / gz.name)
    monkeypatch.setenv(data.CACHE_ENV_VAR, str(cache))
    monkeypatch.setattr(data, "FASHION_MNIST_DEBIAN_DIR",
                        tmp_path / "no-debian")
    result = benchmark.main([*TINY, "--data", "fashion-mnist",
                             "--max-steps", "2"])
    assert _last_json(capsys) == result
    assert result["data"] == "fashion-mnist"
    assert 0.0 <= result["test_accuracy"] <= 1.0


def test_sweep_writes_one_row_per_model(benchmark, tmp_path, capsys):
    """Both models at two sizes, a patch size, one seed: one epoch each."""
    path = tmp_path / "sweep.csv"
    rows = benchmark.sweep(str(path), [0], torch.device("cpu"),
                           train_sizes=(500, 4000), patch_sizes=(7, 14),
                           steps=2, batch_size=2000, d_model=16,
                           num_layers=1, d_ff=32)
    with open(path) as file:
        read = list(csv.DictReader(file))
    assert [tuple(r) for r in read] == [benchmark.COLUMNS] * len(read)
    assert [(r["model"], r["patch_size"], r["train_size"]) for r in read] == [
        ("ViT", "7", "500"), ("ViT", "7", "4000"), ("CNN", "7", "500"),
        ("CNN", "7", "4000"), ("ViT", "14", "4000")]
    # The same number of epochs, so fewer steps for fewer images.
    assert [r["steps"] for r in rows] == [1, 2, 1, 2, 2]
    assert all(r["epochs"] == 1 for r in rows)
    assert all(0.0 <= float(r["test_accuracy"]) <= 1.0 for r in read)


def test_epochs_of_counts_whole_passes(benchmark):
    sizes = {"steps": 640, "batch_size": 128}
    assert benchmark.epochs_of(sizes, 4000) == 20  # 32 batches a pass
    assert benchmark.epochs_of(sizes, 500) == 160
