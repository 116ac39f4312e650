"""Tests of benchmarks/translation.py: its batches, its recipe, its stopping.

The full runs (half a minute or more on a CPU) are reported in the README,
not tested; these run a few steps. No timing is asserted.
"""

import json

import pytest

from transformer_book import recipes


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("translation")


def test_recipe_is_the_book_s(bench):
    """The transformer is ``recipes``' translation model, on Part I's task;
    the RNN trains on the recipe's batches of 16."""
    recipe = recipes.get("translation", "cpu", steps=2, **bench.TASK)
    assert recipe.config.norm_first is False and recipe.config.rotary
    assert (recipe.sizes["stop"], recipe.sizes["max_numbers"]) == (1_000, 4)
    assert len(recipe.extras["test_lists"]) == 2_000
    assert recipe.sizes["batch_size"] == bench.RNN["batch_size"] == 16
    assert recipe.sizes["label_smoothing"] == 0.1
    optimizer = recipe.optimizer(recipe.model())
    assert optimizer.defaults["fused"] is True


def test_run_stops_at_the_first_evaluation_at_the_target(bench, capsys):
    result = bench.main(["--max-steps", "3", "--eval-every", "2",
                         "--target", "0", "--threads", "1"])
    assert result["reached"] and result["steps"] == 2
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed == result
    assert set(printed) >= {"exact_match", "seconds", "steps", "params"}


def test_run_without_reaching_the_target_stops_at_the_cap(bench, capsys):
    result = bench.main(["--model", "rnn", "--max-steps", "3",
                         "--eval-every", "2", "--target", "1.01",
                         "--threads", "1"])
    assert not result["reached"] and result["steps"] == 3
    assert 0.0 <= result["exact_match"] <= 1.0
    assert result["model"] == "rnn"


@pytest.mark.parametrize("flag", ["--max-steps", "--eval-every",
                                  "--threads", "--batch-size"])
def test_numbers_below_one_are_refused_by_name(bench, flag):
    with pytest.raises(SystemExit, match=f"{flag} must be at least 1"):
        bench.main([flag, "0"])
