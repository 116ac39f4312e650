"""Tests of benchmarks/gpt_char.py's pure parts, on a tiny text.

The full runs (minutes on a CPU) are reported in the README, not tested:
these check the split, the deterministic validation windows and loss, the
batches, the optimizer groups, the recipes, and that a run stops at its
first evaluation at or below the target. No timing is asserted.
"""

import dataclasses
import json

import pytest
import torch
import torch.nn.functional as F

from transformer_book import recipes
from transformer_book.models import GPT, GPTConfig

TEXT = "First Citizen:\nBefore we proceed any further, hear me speak.\n" * 40


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("gpt_char")


def _tiny(bench, **fields):
    base = dict(
        d_model=16, num_heads=2, num_layers=1, block_size=8, batch_size=4,
        lr=1e-2, min_lr=1e-3, warmup_steps=1, decay_steps=20, max_steps=20,
        eval_every=5, eval_batch_size=7,
    )
    base.update(fields)
    return bench.Recipe(**base)


def _ids(text=TEXT):
    alphabet = sorted(set(text))
    return torch.tensor([alphabet.index(c) for c in text]), len(alphabet)


def test_split_is_nanogpt_s_first_90_percent(bench):
    ids = torch.arange(11)
    train, val = bench.split_ids(ids)
    assert train.tolist() == list(range(9))  # int(0.9 * 11) = 9
    assert val.tolist() == [9, 10]
    train, val = bench.split_ids(torch.arange(1000))
    assert (len(train), len(val)) == (900, 100)
    assert torch.equal(torch.cat([train, val]), torch.arange(1000))


def test_val_windows_do_not_overlap_and_predict_the_next_id(bench):
    val = torch.arange(100, 123)  # 23 ids
    x, y = bench.val_windows(val, 5)
    assert x.shape == y.shape == (4, 5)  # (23 - 1) // 5 windows
    assert torch.equal(y, x + 1)
    assert x.flatten().tolist() == list(range(100, 120))
    # Every target is a distinct position: each id predicted once at most.
    assert len(set(y.flatten().tolist())) == y.numel()
    # An exact fit uses every id after the first as a target.
    x, y = bench.val_windows(torch.arange(11), 5)
    assert y.flatten().tolist() == list(range(1, 11))


def test_mean_loss_is_the_mean_over_every_position(bench):
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=10, max_seq_len=6, d_model=8,
                          num_heads=2, num_layers=1))
    x = torch.randint(10, (7, 6))
    y = torch.randint(10, (7, 6))
    model.eval()
    with torch.no_grad():
        logits, _ = model(x)
        expected = float(F.cross_entropy(logits.flatten(0, 1), y.flatten()))
    model.train()
    for batch_size in (1, 3, 7, 100):
        loss = bench.mean_loss(model, x, y, batch_size)
        assert loss == pytest.approx(expected, rel=1e-5)
    assert model.training  # put back in its mode


def test_mean_loss_runs_in_eval_mode(bench):
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=10, max_seq_len=6, d_model=8,
                          num_heads=2, num_layers=1, dropout=0.5))
    x = torch.randint(10, (4, 6))
    y = torch.randint(10, (4, 6))
    # Dropout off: the same number twice.
    assert bench.mean_loss(model, x, y) == bench.mean_loss(model, x, y)


def test_optimizer_groups_decay_only_matrices(bench):
    model = GPT(GPTConfig(vocab_size=10, max_seq_len=6, d_model=8,
                          num_heads=2, num_layers=2, bias=False))
    sizes = bench._sizes(bench.RECIPES["nanogpt"])
    decay, no_decay = recipes.optimizer(model, sizes).param_groups
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert all(p.dim() >= 2 for p in decay["params"])
    assert all(p.dim() == 1 for p in no_decay["params"])
    # Every parameter once (the tied embedding is one parameter).
    ids = [id(p) for p in decay["params"] + no_decay["params"]]
    assert sorted(ids) == sorted(id(p) for p in model.parameters())
    assert len(set(ids)) == len(ids)
    # No biases: the 1-D parameters are the 5 LayerNorm gains.
    assert len(no_decay["params"]) == 2 * 2 + 1


def test_nanogpt_recipe_is_the_issue_s(bench):
    r = bench.RECIPES["nanogpt"]
    assert (r.num_layers, r.num_heads, r.d_model) == (4, 4, 128)
    assert (r.block_size, r.batch_size) == (64, 12)
    assert (r.bias, r.dropout) == (False, 0.0)
    assert (r.betas, r.weight_decay, r.clip_grad_norm) == ((0.9, 0.99),
                                                           0.1, 1.0)
    assert (r.lr, r.min_lr, r.warmup_steps) == (1e-3, 1e-4, 100)
    assert (r.decay_steps, r.max_steps, r.eval_every) == (2000, 2000, 250)


def test_book_recipe_is_the_cpu_preset_s_gpt(bench):
    r, s = bench.RECIPES["book"], recipes.defaults("gpt", "cpu")
    assert r == bench.book_recipe()
    assert (r.num_layers, r.num_heads, r.d_model) == (3, 4, 128)
    assert (r.block_size, r.batch_size) == (64, 12)
    assert (r.bias, r.dropout) == (False, 0.0)
    assert (r.lr, r.min_lr, r.warmup_steps) == (s["lr"], s["min_lr"],
                                                s["warmup"]) == (4e-3,
                                                                 4e-4, 50)
    assert (r.decay_steps, r.max_steps) == (s["steps"], 2000) == (1250,
                                                                  2000)
    assert (r.betas, r.weight_decay, r.clip_grad_norm) == (
        s["betas"], s["weight_decay"], s["clip_grad_norm"])


def test_load_text_is_the_embedded_copy(bench):
    text = bench.load_text()
    assert len(text) == 1_115_394 and text.startswith("First Citizen:")


def test_run_stops_at_the_first_evaluation_at_the_target(bench):
    ids, vocab_size = _ids()
    result = bench.run(_tiny(bench), ids, vocab_size, seed=0,
                       target_loss=100.0, name="tiny")
    assert result["reached"] and result["steps"] == 5
    assert len(result["evals"]) == 1
    assert result["seconds"] is not None and result["seconds"] >= 0
    assert result["params"] > 0 and result["tokens_per_s"] > 0


def test_run_without_reaching_the_target_stops_at_the_cap(bench):
    ids, vocab_size = _ids()
    recipe = _tiny(bench)
    first = bench.run(recipe, ids, vocab_size, seed=0, target_loss=0.0,
                      max_steps=10, name="tiny")
    assert not first["reached"] and first["seconds"] is None
    assert first["steps"] == 10
    assert [e["step"] for e in first["evals"]] == [5, 10]
    # The same seed gives the same losses (deterministic evaluation).
    again = bench.run(recipe, ids, vocab_size, seed=0, target_loss=0.0,
                      max_steps=10, name="tiny")
    assert [e["val_loss"] for e in again["evals"]] == [
        e["val_loss"] for e in first["evals"]]
    # Training lowers the loss on this repetitive text.
    assert first["evals"][-1]["val_loss"] < first["evals"][0]["val_loss"]


def test_main_compares_and_prints_one_json_line(bench, capsys, monkeypatch):
    monkeypatch.setattr(bench, "load_text", lambda: TEXT)
    recipe = dataclasses.replace(bench.RECIPES["speedrun"], d_model=16,
                                 num_heads=2, num_layers=1, block_size=8,
                                 batch_size=2, eval_every=1, eval_from=0)
    monkeypatch.setitem(bench.RECIPES, "speedrun", recipe)
    result = bench.main(["--compare", "--seeds", "2", "--max-steps", "2",
                         "--threads", "1", "--target-loss", "100"])
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed == result
    assert {"val_loss", "seconds", "steps", "tokens_per_s",
            "params"} <= set(printed)
    # The default recipe is the speedrun, the book's fastest.
    assert printed["recipe"] == "speedrun" and printed["steps"] == 1
    # nanoGPT's recipe evaluates every 250 steps: capped at 2, it never
    # evaluates, so its full (capped) run is the time to beat.
    assert printed["nanogpt"]["reached"] is False
    assert len(printed["ratios"]) == 2 and printed["ratio"] is not None
    assert [r["recipe"] for r in printed["runs"]] == [
        "speedrun", "nanogpt", "nanogpt", "speedrun"]


def test_command_line_overrides_a_field(bench):
    args = bench.parse_args(["--recipe", "nanogpt", "--lr", "0.002",
                             "--bias", "1"])
    recipe = bench.recipe_from_args(args)
    assert recipe.lr == 0.002 and recipe.bias is True
    assert recipe.block_size == 64


def test_speedrun_recipe_is_recipes_gpt_speedrun(bench):
    r, s = bench.RECIPES["speedrun"], recipes.gpt_speedrun("cpu").sizes
    assert r == bench.speedrun_recipe()
    assert (r.optimizer, r.muon_lr, r.activation) == ("muon", s["muon_lr"],
                                                      "relu2")
    assert r.qk_norm and not r.tie_weights
    assert (r.batch_size, r.lr, r.decay_steps) == (s["batch_size"], s["lr"],
                                                   s["steps"])
    # Evaluations on the recipe's schedule, never past its last step.
    assert r.eval_from + r.eval_every <= r.max_steps == s["steps"]


def test_run_evaluates_from_eval_from(bench):
    ids, vocab_size = _ids()
    recipe = _tiny(bench, eval_from=3, eval_every=4, max_steps=12,
                   optimizer="muon", muon_lr=0.02, qk_norm=True,
                   activation="relu2", tie_weights=False)
    result = bench.run(recipe, ids, vocab_size, seed=0, target_loss=0.0,
                       name="tiny")
    assert [e["step"] for e in result["evals"]] == [3, 7, 11]
    assert result["steps"] == 12 and not result["reached"]


def test_ablation_writes_one_row_per_variant_and_seed(bench, monkeypatch,
                                                      tmp_path):
    import csv

    ids, vocab_size = _ids()
    tiny = _tiny(bench, max_steps=6, eval_every=3, warmup_steps=1,
                 decay_steps=6)
    for name in ("speedrun", "book", "nanogpt"):
        monkeypatch.setitem(bench.RECIPES, name, tiny)
    out = tmp_path / "ablation.csv"
    bench.ablation(ids, vocab_size, range(2), threads=1, target_loss=100.0,
                   out=out)
    rows = list(csv.DictReader(out.open()))
    variants = [*bench.ABLATIONS, "book", "nanogpt"]
    assert [(r["variant"], r["seed"]) for r in rows] == [
        (v, str(s)) for s in range(2) for v in variants]
    for row in rows:  # reached at the first evaluation, step 3
        assert row["reached"] == "True" and row["steps"] == "3"
        # The speedrun's variants run on to step 6, the others stop.
        ran_on = row["variant"] in bench.ABLATIONS
        assert (row["final_val_loss"] != row["val_loss"]) == ran_on
