"""Tests of benchmarks/scaling.py at tiny budgets.

The grid itself (minutes on one core) is the CSV of
book/beyond/scaling-laws.md, not tested here: these check the parameter
count, the plan of tokens and steps, that a run repeats exactly, and
the command line's CSV. No timing is asserted.
"""

import csv

import pytest
import torch

from transformer_book import recipes
from transformer_book.training import count_parameters

TEXT = "First Citizen:\nBefore we proceed any further, hear me speak.\n" * 40


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("scaling")


@pytest.mark.parametrize("size", ["d16-L1", "d24-L1", "d64-L2"])
def test_non_embedding_params_leave_out_the_tables(bench, size):
    d, layers, heads = bench.SIZES[size]
    model = bench.size_recipe(size, 1, text=TEXT).model(0)
    # Per layer: 4 d^2 of attention, 8 d^2 of feed-forward, two norm
    # gains (no biases); the final norm's gain.
    expected = layers * (12 * d * d + 2 * d) + d
    assert bench.non_embedding_params(model) == expected
    vocab, block = model.config.vocab_size, model.config.max_seq_len
    assert count_parameters(model) == expected + (vocab + block) * d


def test_plan_spends_the_budget(bench):
    for size in bench.SIZES:
        p = bench.plan(1e11, size)
        assert p["tokens"] == p["steps"] * bench.BATCH_SIZE * 64
        # Rounding the steps misses the budget by half a step at most.
        assert 6 * p["params"] * p["tokens"] == pytest.approx(
            1e11, rel=0.6 / p["steps"])
    small, large = bench.plan(1e11, "d16-L1"), bench.plan(1e11, "d64-L2")
    assert small["steps"] > large["steps"]
    assert bench.plan(1.0, "d32-L1")["steps"] == 1  # at least one step


def test_schedule_warms_up_then_decays_to_its_last_step(bench):
    recipe = bench.size_recipe("d32-L1", 40, text=TEXT)
    assert recipe.warmup_steps == 4  # a tenth of the steps
    optimizer = recipe.optimizer(recipe.model(0))
    factor = recipe.scheduler(optimizer).lr_lambdas[0]
    assert factor(4) == pytest.approx(1.0)
    assert factor(40) == pytest.approx(recipe.sizes["min_lr"]
                                       / recipe.sizes["lr"])


def test_a_run_repeats_exactly(bench):
    torch.set_num_threads(1)
    step = 6 * bench.plan(1.0, "d32-L1")["params"] * bench.BATCH_SIZE * 64
    budget = 3 * step  # FLOPs of 3 steps
    first = bench.run(budget, "d32-L1", text=TEXT)
    second = bench.run(budget, "d32-L1", text=TEXT)
    assert first["steps"] == 3
    assert first["val_loss"] == second["val_loss"]
    other = bench.run(budget, "d32-L1", seed=1, text=TEXT)
    assert other["val_loss"] != first["val_loss"]


def test_the_default_grid_runs_the_smallest_size_at_one_budget(bench):
    runs = bench.grid([3e11, 1e11, 9e11])
    assert len(runs) == 7 + 6 + 6
    assert [b for b, _ in runs] == sorted(b for b, _ in runs)
    assert [s for b, s in runs if s == "d8-L1"] == ["d8-L1"]
    assert runs[0] == (1e11, "d8-L1")
    assert bench.grid([1.0, 2.0], ["d16-L1"]) == [(1.0, "d16-L1"),
                                                  (2.0, "d16-L1")]


def test_main_writes_the_csv(bench, tmp_path):
    out = tmp_path / "grid.csv"
    rows = bench.main(["--budgets", "6.8e8", "3.4e8", "--sizes", "d48-L1",
                       "--valid-windows", "2", "--out", str(out)])
    with open(out) as file:
        read = list(csv.DictReader(file))
    assert len(rows) == len(read) == 2
    assert tuple(read[0]) == bench.FIELDS
    assert [r["budget"] for r in read] == ["3.4e+08", "6.8e+08"]  # sorted
    assert [r["steps"] for r in read] == ["1", "2"]  # 3.4e8 FLOPs a step
    assert all(float(r["val_loss"]) > 0 for r in read)
    with pytest.raises(SystemExit):
        bench.main(["--sizes", "d999", "--out", str(out)])


def test_sizes_are_the_gpt_recipe_s_other_settings(bench):
    recipe = bench.size_recipe("d48-L2", 100, text=TEXT)
    cpu = recipes.defaults("gpt", "cpu")
    for key in ("lr", "min_lr", "block_size", "betas", "weight_decay"):
        assert recipe.sizes[key] == cpu[key]
    assert recipe.sizes["batch_size"] == bench.BATCH_SIZE
    assert (recipe.config.d_model, recipe.config.num_layers,
            recipe.config.num_heads) == bench.SIZES["d48-L2"]
