"""Mixture of experts: the routing, the gates, the balancing loss, errors."""

from __future__ import annotations

import pytest
import torch

from transformer_book.feedforward import FeedForward
from transformer_book.models.gpt import GPT, GPTConfig
from transformer_book.moe import (
    MoEFeedForward,
    load_balancing_loss,
    replace_feed_forward,
)

F64 = torch.float64


def _moe(num_experts=4, top_k=2, d_model=8, d_ff=16, **kwargs):
    torch.manual_seed(0)
    return MoEFeedForward(d_model, d_ff, num_experts, top_k, **kwargs)


@pytest.mark.parametrize("shape", [(5, 8), (2, 3, 8), (2, 1, 3, 8), (8,)])
def test_output_has_the_input_shape(shape):
    layer = _moe()
    x = torch.randn(shape)
    assert layer(x).shape == x.shape
    assert layer.expert_index.shape == (*shape[:-1], 2)
    assert layer.aux_loss.shape == ()


def test_parts_are_a_router_and_feed_forward_experts():
    layer = _moe(num_experts=3, top_k=1)
    assert isinstance(layer.router, torch.nn.Linear)
    assert (layer.router.in_features, layer.router.out_features) == (8, 3)
    assert len(layer.experts) == 3
    for expert in layer.experts:
        assert isinstance(expert, FeedForward)
        assert (expert.d_model, expert.d_ff) == (8, 16)
        assert expert.activation == "relu"


@pytest.mark.parametrize("num_experts", [1, 2, 5])
def test_equal_gates_over_all_experts_average_them(num_experts):
    layer = _moe(num_experts=num_experts, top_k=num_experts, dtype=F64)
    with torch.no_grad():
        layer.router.weight.zero_()
        layer.router.bias.zero_()
    x = torch.randn(2, 7, 8, dtype=F64)
    mean = torch.stack([expert(x) for expert in layer.experts]).mean(0)
    torch.testing.assert_close(layer(x), mean, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("top_k", [1, 2, 3, 4])
def test_each_token_goes_to_top_k_distinct_experts(top_k):
    layer = _moe(num_experts=4, top_k=top_k, dtype=F64)
    x = torch.randn(3, 6, 8, dtype=F64)
    out = layer(x)
    chosen = layer.expert_index.reshape(-1, top_k)
    assert all(len(set(row.tolist())) == top_k for row in chosen)
    # The chosen experts are those with the highest router scores.
    scores = layer.router(x).reshape(-1, 4)
    best = scores.topk(top_k).indices
    assert torch.equal(chosen.sort(-1).values, best.sort(-1).values)
    # The output is the gated sum of exactly those experts.
    tokens = x.reshape(-1, 8)
    gates = scores.gather(1, chosen).softmax(-1)
    expected = torch.stack([
        sum(g * layer.experts[int(e)](t) for g, e in zip(gs, es, strict=True))
        for t, gs, es in zip(tokens, gates, chosen, strict=True)
    ])
    torch.testing.assert_close(out.reshape(-1, 8), expected)


def test_an_expert_sees_only_its_tokens():
    layer = _moe(num_experts=4, top_k=1)
    seen = [0] * 4
    for i, expert in enumerate(layer.experts):
        expert.register_forward_hook(
            lambda m, args, out, i=i: seen.__setitem__(i, len(args[0])))
    layer(torch.randn(40, 8))
    counts = torch.bincount(layer.expert_index.flatten(), minlength=4)
    assert seen == counts.tolist() and sum(seen) == 40


def _loss_for(scores, top_k):
    """The aux_loss when the router outputs ``scores`` (N, E) exactly."""
    num_experts = scores.shape[1]
    layer = _moe(num_experts=num_experts, top_k=top_k, d_model=num_experts,
                 dtype=F64)
    with torch.no_grad():  # the identity: router(x) = x
        layer.router.weight.copy_(torch.eye(num_experts, dtype=F64))
        layer.router.bias.zero_()
    layer(scores)
    return layer.aux_loss


@pytest.mark.parametrize("top_k", [1, 2])
def test_balancing_loss_is_one_when_routing_is_uniform(top_k):
    # Token n prefers experts n, n+1 (mod 4): every expert equally loaded,
    # and the mean router probability is uniform by symmetry.
    base = torch.tensor([3.0, 2.0, 0.0, 0.0], dtype=F64)
    scores = torch.stack([base.roll(n) for n in range(8)])
    assert _loss_for(scores, top_k).item() == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("top_k", [1, 2])
def test_balancing_loss_grows_as_routing_concentrates(top_k):
    scores = torch.randn(64, 4, dtype=F64)
    losses = []
    for skew in (0.0, 2.0, 5.0, 50.0):
        skewed = scores.clone()
        skewed[:, :top_k] += skew  # the first top_k experts take over
        losses.append(_loss_for(skewed, top_k).item())
    assert losses == sorted(losses) and losses[0] > 1.0 - 0.2
    # Every token surely to the same experts: E * sum_i f_i P_i -> E / k.
    assert losses[-1] == pytest.approx(4 / top_k, rel=1e-6)


def test_balancing_loss_matches_its_definition():
    layer = _moe(num_experts=5, top_k=2, dtype=F64)
    x = torch.randn(30, 8, dtype=F64)
    layer(x)
    probs = layer.router(x).softmax(-1)
    f = torch.bincount(layer.expert_index.flatten(), minlength=5) / 60
    expected = 5 * (f * probs.mean(0)).sum()
    torch.testing.assert_close(layer.aux_loss, expected)


def test_gradients_reach_the_router_and_the_experts():
    layer = _moe(num_experts=4, top_k=2)
    x = torch.randn(4, 10, 8)
    (layer(x).square().sum() + layer.aux_loss).backward()
    assert layer.router.weight.grad.abs().sum() > 0
    for i, expert in enumerate(layer.experts):
        used = bool((layer.expert_index == i).any())
        grad = expert.up_proj.weight.grad
        assert (grad is not None and grad.abs().sum() > 0) == used
    # The balancing loss alone reaches the router (through P, not f).
    layer.zero_grad()
    layer(x)
    layer.aux_loss.backward()
    assert layer.router.weight.grad.abs().sum() > 0


def test_replace_feed_forward_in_a_gpt():
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=11, max_seq_len=8, d_model=16, num_heads=2,
                       num_layers=2, d_ff=32, bias=False)
    model = replace_feed_forward(GPT(config), 4, 1)
    layers = [b.feed_forward.sublayer for b in model.blocks]
    assert all(isinstance(m, MoEFeedForward) for m in layers)
    assert all(m.experts[0].activation == "gelu" for m in layers)
    assert all(m.experts[0].up_proj.bias is None for m in layers)
    idx = torch.randint(0, 11, (3, 8))
    logits, loss = model(idx, idx)
    assert logits.shape == (3, 8, 11)
    aux = load_balancing_loss(model)
    torch.testing.assert_close(aux, layers[0].aux_loss + layers[1].aux_loss)
    (loss + 0.01 * aux).backward()
    assert all(m.router.weight.grad is not None for m in layers)
    wide = replace_feed_forward(GPT(config), 2, 2, d_ff=8)
    assert wide.blocks[0].feed_forward.sublayer.experts[1].d_ff == 8


@pytest.mark.parametrize("args, message", [
    ((8, 16, 4, 0), "top_k=0 must be positive"),
    ((8, 16, 4, 5), "top_k=5 must be at most num_experts=4"),
    ((8, 16, 0, 1), "num_experts=0 must be positive"),
    ((0, 16, 4, 1), "d_model=0 must be positive"),
    ((8, -1, 4, 1), "d_ff=-1 must be positive"),
])
def test_bad_arguments_are_named(args, message):
    with pytest.raises(ValueError, match=message):
        MoEFeedForward(*args)


def test_bad_input_is_named():
    layer = _moe()
    with pytest.raises(ValueError, match="x"):
        layer(torch.randn(3, 7))
    with pytest.raises(TypeError, match="top_k must be an int"):
        MoEFeedForward(8, 16, 4, 1.5)
    with pytest.raises(TypeError, match="model must be"):
        replace_feed_forward("gpt", 4, 1)
    with pytest.raises(ValueError, match="no Residual block"):
        replace_feed_forward(torch.nn.Linear(2, 2), 4, 1)
    with pytest.raises(ValueError, match="no MoEFeedForward"):
        load_balancing_loss(_moe(num_experts=2, top_k=1).experts[0])
