"""Tests of benchmarks/translation.py: its batches, its recipe, its stopping.

The full runs (half a minute or more on a CPU) are reported in the README,
not tested; these run a few steps. No timing is asserted.
"""

import ast
import json
import random
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "book" / "implementation" / "translation.md"


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("translation")


def _page_cpu_sizes() -> dict:
    """The page's cpu ``SIZES`` entry, read from its source."""
    text = PAGE.read_text()
    match = re.search(r'"cpu": dict\((.*?)\),\n\s*"gpu"', text, re.S)
    assert match, "the page's cpu SIZES entry was not found"
    call = ast.parse(f"dict({match.group(1)})", mode="eval").body
    return {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords}


def test_recipe_is_the_page_s(bench):
    sizes = _page_cpu_sizes()
    recipe = bench.TRANSFORMER
    for ours, theirs in [("d_model", "d_model"), ("num_heads", "num_heads"),
                         ("enc_layers", "enc_layers"),
                         ("dec_layers", "dec_layers"), ("d_ff", "d_ff"),
                         ("batch_size", "batch"), ("lr", "lr"),
                         ("warmup", "warmup")]:
        assert recipe[ours] == sizes[theirs], ours
    assert "norm_first=False" in PAGE.read_text()
    assert recipe["norm_first"] is False
    assert "rotary=True" in PAGE.read_text() and recipe["rotary"] is True
    # Both optimizers of the page's code run fused, as the benchmark's do.
    assert PAGE.read_text().count("fused=True)") == 2
    assert bench.RNN["batch_size"] == sizes["batch"]
    assert bench.RNN["embed_size"] == sizes["rnn_embed"]
    assert bench.RNN["hidden_size"] == sizes["rnn_hidden"]


def test_length_batches_cover_each_pass_and_group_lengths(bench):
    rng = random.Random(0)
    src = [[0] * rng.randint(1, 30) for _ in range(200)]
    one_pass = bench.length_batches(src, 4, 50, seed=0)
    assert len(one_pass) == 50
    assert sorted(i for b in one_pass for i in b) == list(range(200))
    # Sorted by length inside chunks of 32 batches: a batch spans little.
    spans = [max(len(src[i]) for i in b) - min(len(src[i]) for i in b)
             for b in one_pass]
    assert max(spans) <= 3
    longer = bench.length_batches(src, 4, 120, seed=0)
    assert len(longer) == 120
    assert longer[:50] == one_pass and longer[50:100] == one_pass
    assert bench.length_batches(src, 4, 50, seed=0) == one_pass
    assert bench.length_batches(src, 4, 50, seed=1) != one_pass


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
