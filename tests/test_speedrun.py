"""The speedrun's package pieces: QK-norm, ReLU², Muon through
``recipes``, ``training.Optimizers`` and ``recipes.gpt_speedrun``."""

import math

import pytest
import torch
import torch.nn.functional as F

from transformer_book import recipes, training
from transformer_book.attention import MultiHeadAttention
from transformer_book.feedforward import FeedForward
from transformer_book.models import GPT, GPTConfig


def test_qk_norm_is_the_written_out_formula():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4, qk_norm=True, bias=False).double()
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    heads = [p(x).view(2, 5, 4, 4).transpose(1, 2)
             for p in (mha.q_proj, mha.k_proj, mha.v_proj)]
    q, k, v = heads
    q, k = (t / t.pow(2).mean(-1, keepdim=True).add(1e-12).sqrt()
            for t in (q, k))
    logits = q @ k.transpose(-2, -1) / 2  # sqrt(head_dim = 4)
    logits = logits.masked_fill(torch.ones(5, 5).triu(1).bool(), -math.inf)
    out = (logits.softmax(-1) @ v).transpose(1, 2).reshape(2, 5, 16)
    expected = mha.out_proj(out)
    for fused in (True, False):
        mha.fused = fused
        torch.testing.assert_close(mha(x, is_causal=True), expected,
                                   rtol=1e-6, atol=1e-6)


def test_qk_norm_bounds_the_logits_however_large_the_weights():
    mha = MultiHeadAttention(32, 2, qk_norm=True)
    with torch.no_grad():
        mha.q_proj.weight.mul_(1e3)
        mha.k_proj.weight.mul_(1e3)
    mha.fused = False
    weights = []
    mha.captured = weights
    mha(torch.randn(1, 8, 32))
    # Logits at most sqrt(16) = 4 apart from 0: no weight below e^-8 / 8.
    assert float(weights[0].detach().min()) > math.exp(-8) / 8
    assert "qk_norm=True" in repr(mha)


def test_qk_norm_must_be_a_bool():
    with pytest.raises(TypeError, match="qk_norm"):
        MultiHeadAttention(8, 2, qk_norm="yes")


def test_relu2_squares_the_relu():
    torch.manual_seed(0)
    ff = FeedForward(6, 10, activation="relu2").double()
    x = torch.randn(3, 6, dtype=torch.float64)
    expected = ff.down_proj(F.relu(ff.up_proj(x)) ** 2)
    torch.testing.assert_close(ff(x), expected)


def test_gpt_config_passes_activation_and_qk_norm_to_every_block():
    config = GPTConfig(vocab_size=11, max_seq_len=8, d_model=16, num_heads=2,
                       num_layers=2, activation="relu2", qk_norm=True)
    model = GPT(config)
    for block in model.blocks:
        assert block.feed_forward.sublayer.activation == "relu2"
        assert block.self_attn.sublayer.qk_norm
    with pytest.raises(ValueError, match="activation"):
        GPTConfig(vocab_size=11, max_seq_len=8, d_model=16, num_heads=2,
                  num_layers=1, activation="tanh")


def test_optimizers_step_zero_and_round_trip_their_state():
    a, b = (torch.nn.Parameter(torch.ones(3, 3)) for _ in "ab")
    both = training.Optimizers(torch.optim.Muon([a], lr=0.1),
                               torch.optim.AdamW([b], lr=0.1))
    scheduler = training.warmup_cosine(both, warmup_steps=1, total_steps=4)
    (a.sum() + 2 * b.sum()).backward()
    both.step()
    scheduler.step()
    assert not torch.equal(a, torch.ones(3, 3))
    assert not torch.equal(b, torch.ones(3, 3))
    both.zero_grad()
    assert a.grad is None and b.grad is None
    # One schedule scales both, each from its own rate.
    assert [g["initial_lr"] for g in both.param_groups] == [0.1, 0.1]
    state = both.state_dict()
    copy = training.Optimizers(torch.optim.Muon([a], lr=0.5),
                               torch.optim.AdamW([b], lr=0.5))
    copy.load_state_dict(state)
    assert [g["lr"] for g in copy.param_groups] == [
        g["lr"] for g in both.param_groups]
    assert copy.param_groups[1] is copy.optimizers[1].param_groups[0]
    with pytest.raises(TypeError, match=r"optimizers\[1\]"):
        training.Optimizers(torch.optim.SGD([a], lr=1.0), "adam")


def test_speedrun_recipe_gives_muon_the_blocks_matrices_only():
    r = recipes.gpt_speedrun("cpu", steps=3)
    assert r.sizes["steps"] == 3 and r.sizes["optimizer"] == "muon"
    model = r.model(0)
    assert model.lm_head.weight is not model.token_embedding.weight
    optimizer = r.optimizer(model)
    muon, adamw = optimizer.optimizers
    matrices = {id(p) for p in model.blocks.parameters() if p.dim() == 2}
    assert {id(p) for g in muon.param_groups for p in g["params"]} == matrices
    rest = {id(p) for g in adamw.param_groups for p in g["params"]}
    assert rest | matrices == {id(p) for p in model.parameters()}
    assert not rest & matrices
    assert muon.param_groups[0]["lr"] == r.sizes["muon_lr"]
    # The schedule ends at zero for both.
    scheduler = r.scheduler(optimizer)
    for _ in range(3):
        optimizer.step()
        scheduler.step()
    assert all(g["lr"] == 0.0 for g in optimizer.param_groups)


def test_speedrun_and_optimizer_refuse_bad_input():
    with pytest.raises(ValueError, match="preset"):
        recipes.gpt_speedrun("tpu")
    r = recipes.gpt_speedrun("cpu")
    with pytest.raises(ValueError, match="optimizer"):
        recipes.optimizer(r.model(0), {**r.sizes, "optimizer": "sgd"})
    with pytest.raises((TypeError, ValueError), match="muon_lr"):
        recipes.optimizer(r.model(0), {**r.sizes, "muon_lr": None})
