"""Grouped-query attention: num_kv_heads against PyTorch's enable_gqa."""

from __future__ import annotations

import dataclasses
import math
import random

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from transformer_book.analysis import capture_attention
from transformer_book.attention import KVCache, MultiHeadAttention
from transformer_book.cost import kv_cache_bytes
from transformer_book.masks import causal_mask, padding_mask
from transformer_book.models.gpt import GPT, GPTConfig
from transformer_book.positional import RotaryEmbedding
from transformer_book.training import count_parameters

F64 = torch.float64
MASK_KINDS = ("none", "causal", "padding", "causal+padding", "per-head",
              "bias")


def _reference(mha, query, key, value, mask=None, is_causal=False):
    """Our projections around F.scaled_dot_product_attention(enable_gqa)."""
    d = mha.head_dim

    def heads(x, proj):  # (B, T, n * d) -> (B, n, T, d)
        x = F.linear(x, proj.weight, proj.bias)
        return x.view(*x.shape[:2], -1, d).transpose(1, 2)

    q, k, v = (heads(x, p) for x, p in ((query, mha.q_proj),
                                        (key, mha.k_proj),
                                        (value, mha.v_proj)))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                         is_causal=is_causal, enable_gqa=True)
    return mha.out_proj(out.transpose(1, 2).flatten(2))  # (B, T, d_model)


def _masks(kind, b, h, q_len, kv_len, gen):
    """Our (mask, is_causal) and the reference's (mask, is_causal)."""
    lengths = torch.randint(1, kv_len + 1, (b,), generator=gen)
    pad = padding_mask(lengths, max_len=kv_len)  # (B, 1, 1, kv_len)
    causal = causal_mask(q_len, kv_len)  # key 0 stays visible to every row
    if kind == "none":
        return (None, False), (None, False)
    if kind == "causal":
        return (None, True), (None, True)
    if kind == "padding":
        return (pad, False), (pad, False)
    if kind == "causal+padding":  # PyTorch takes one or the other
        return (pad, True), (pad & causal, False)
    if kind == "per-head":  # heads of one group see different keys
        allowed = torch.rand(b, h, q_len, kv_len, generator=gen) < 0.5
        allowed[..., 0] = True
        return (allowed, False), (allowed, False)
    bias = torch.randn(h, q_len, kv_len, generator=gen, dtype=F64)
    return (bias, False), (bias, False)


@pytest.mark.parametrize("seed", range(8))
def test_matches_sdpa_with_enable_gqa(seed):
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    h, head_dim = rng.choice([2, 4, 6]), rng.choice([2, 4, 8])
    b, q_len = rng.randint(1, 3), rng.randint(1, 6)
    kv_len = q_len if rng.random() < 0.5 else rng.randint(1, 7)
    d_model = h * head_dim
    query = torch.randn(b, q_len, d_model, dtype=F64, generator=gen)
    key = torch.randn(b, kv_len, d_model, dtype=F64, generator=gen)
    value = torch.randn(b, kv_len, d_model, dtype=F64, generator=gen)
    for g in (1, 2, h):
        mha = MultiHeadAttention(d_model, h, num_kv_heads=g,
                                 bias=rng.random() < 0.5, dtype=F64)
        assert mha.k_proj.out_features == g * head_dim
        if mha.bias:  # biases start at zero: make them matter
            with torch.no_grad():
                for p in (mha.q_proj, mha.k_proj, mha.v_proj, mha.out_proj):
                    p.bias.normal_(generator=gen)
        for kind in MASK_KINDS:
            ours, theirs = _masks(kind, b, h, q_len, kv_len, gen)
            expected = _reference(mha, query, key, value, *theirs)
            mha.fused = True
            fused = mha(query, key, value, ours[0], is_causal=ours[1])
            mha.fused = False
            written = mha(query, key, value, ours[0], is_causal=ours[1])
            torch.testing.assert_close(fused, expected, rtol=1e-10,
                                       atol=1e-10)
            torch.testing.assert_close(written, expected, rtol=1e-10,
                                       atol=1e-10)


def test_captured_weights_have_one_map_per_query_head():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4, num_kv_heads=2, dtype=F64)
    x = torch.randn(2, 5, 16, dtype=F64)
    with capture_attention(mha) as maps:
        out = mha(x, is_causal=True)
    (weights,) = maps
    assert weights.shape == (2, 4, 5, 5)
    torch.testing.assert_close(out, mha(x, is_causal=True))  # fused


@pytest.mark.parametrize("rotary", [False, True])
@pytest.mark.parametrize("num_kv_heads", [1, 2])
@pytest.mark.parametrize("fused", [True, False])
def test_cached_decoding_equals_full_forward(rotary, num_kv_heads, fused):
    torch.manual_seed(0)
    mha = MultiHeadAttention(
        24, 4, num_kv_heads=num_kv_heads, dtype=F64,
        rotary=RotaryEmbedding(6) if rotary else None)
    mha.fused = fused
    x = torch.randn(2, 9, 24, dtype=F64)
    full = mha(x, is_causal=True)
    cache = KVCache()
    steps = [mha(x[:, :4], is_causal=True, cache=cache)]  # the prompt
    steps += [mha(x[:, t:t + 1], is_causal=True, cache=cache)
              for t in range(4, 9)]  # one token at a time
    torch.testing.assert_close(torch.cat(steps, 1), full, rtol=1e-10,
                               atol=1e-10)
    assert cache.keys.shape == (2, num_kv_heads, 9, 6)  # G heads, not H


def _original_init(d_model, seed):
    """The parameters MultiHeadAttention(d_model, H) drew before GQA."""
    torch.manual_seed(seed)
    q, k, v, out = (nn.Linear(d_model, d_model) for _ in range(4))
    bound = math.sqrt(6.0 / (d_model + 3 * d_model))
    for proj in (q, k, v):
        nn.init.uniform_(proj.weight, -bound, bound)
    out.reset_parameters()
    for proj in (q, k, v, out):
        nn.init.zeros_(proj.bias)
    return [p for m in (q, k, v, out) for p in m.parameters()]


@pytest.mark.parametrize("num_kv_heads", [None, 4])
def test_num_kv_heads_equal_to_num_heads_is_the_old_module(num_kv_heads):
    torch.manual_seed(3)
    mha = MultiHeadAttention(32, 4, num_kv_heads=num_kv_heads)
    for ours, old in zip(mha.parameters(), _original_init(32, 3),
                         strict=True):
        assert torch.equal(ours, old)
    assert mha.num_kv_heads == 4


def test_grouped_init_is_xavier_over_the_packed_matrix():
    mha = MultiHeadAttention(64, 8, num_kv_heads=2)  # kv_dim = 16
    bound = math.sqrt(6.0 / (64 + 64 + 2 * 16))
    for proj in (mha.q_proj, mha.k_proj, mha.v_proj):
        assert proj.weight.abs().max() <= bound
        assert proj.weight.std() > bound / 3
    assert mha.k_proj.weight.shape == (16, 64)


@pytest.mark.parametrize("num_kv_heads", [3, 0, 8])
def test_rejects_num_kv_heads_that_does_not_divide(num_kv_heads):
    with pytest.raises(ValueError, match="num_kv_heads"):
        MultiHeadAttention(24, 4, num_kv_heads=num_kv_heads)
    with pytest.raises(ValueError, match="num_kv_heads"):
        GPTConfig(vocab_size=10, max_seq_len=8, d_model=24, num_heads=4,
                  num_layers=1, num_kv_heads=num_kv_heads)


@pytest.mark.parametrize("num_kv_heads", [None, 1, 2, 4])
def test_gpt_parameter_count(num_kv_heads):
    V, T, D, H, L = 50, 16, 32, 4, 2
    config = GPTConfig(vocab_size=V, max_seq_len=T, d_model=D, num_heads=H,
                       num_layers=L, num_kv_heads=num_kv_heads)
    kv_dim = (num_kv_heads or H) * (D // H)
    # k_proj and v_proj: D x kv_dim weights and kv_dim biases, not D x D.
    block = 12 * D**2 + 13 * D - 2 * (D - kv_dim) * (D + 1)
    assert count_parameters(GPT(config)) == V * D + T * D + L * block + 2 * D


def test_gpt_with_grouped_heads_caches_fewer_heads_and_round_trips():
    config = GPTConfig(vocab_size=20, max_seq_len=16, d_model=32,
                       num_heads=4, num_layers=2, num_kv_heads=1,
                       positional="rope")
    torch.manual_seed(0)
    model = GPT(config).eval()
    idx = torch.randint(20, (2, 10))
    full = model(idx)[0]
    cache = model.make_cache()
    model(idx[:, :6], cache=cache)
    step = torch.cat([model(idx[:, t:t + 1], cache=cache)[0]
                      for t in range(6, 10)], 1)
    torch.testing.assert_close(step, full[:, 6:], rtol=1e-5, atol=1e-5)
    assert cache[0].keys.shape == (2, 1, 10, 8)
    assert GPTConfig(**config.to_dict()) == config
    old = {k: v for k, v in config.to_dict().items() if k != "num_kv_heads"}
    assert GPTConfig(**old) == dataclasses.replace(config, num_kv_heads=None)


# Published configurations, 16-bit values, one sequence at full context.
@pytest.mark.parametrize(("sizes", "expected"), [
    (dict(num_layers=12, num_kv_heads=12, head_dim=64, seq_len=1024),
     36 * 2**20),  # GPT-2 small
    (dict(num_layers=32, num_kv_heads=32, head_dim=128, seq_len=4096),
     2 * 2**30),  # Llama-2-7B
    (dict(num_layers=80, num_kv_heads=8, head_dim=128, seq_len=4096),
     1.25 * 2**30),  # Llama-2-70B
    (dict(num_layers=32, num_kv_heads=8, head_dim=128, seq_len=32768,
          window=4096), 2**29),  # Mistral-7B: the window caps the cache
])
def test_kv_cache_bytes_of_published_models(sizes, expected):
    assert kv_cache_bytes(**sizes) == expected
    assert kv_cache_bytes(**sizes, batch_size=3, bytes_per_value=4) == (
        6 * expected)


@pytest.mark.parametrize(("kwargs", "match"), [
    (dict(num_kv_heads=0), "num_kv_heads=0"),
    (dict(seq_len=2.5), "seq_len"),
    (dict(window=0), "window=0"),
    (dict(bytes_per_value=0), "bytes_per_value=0"),
])
def test_kv_cache_bytes_rejects_bad_sizes(kwargs, match):
    sizes = dict(num_layers=2, num_kv_heads=2, head_dim=4, seq_len=8)
    with pytest.raises((ValueError, TypeError), match=match):
        kv_cache_bytes(**{**sizes, **kwargs})


# benchmarks/kv_heads.py: the sweep behind book/efficient/kv-heads.csv.


def test_benchmark_run_is_the_recipe_training(load_benchmark, one_thread,
                                               tmp_path, monkeypatch):
    from transformer_book import recipes

    bench = load_benchmark("kv_heads")
    monkeypatch.setenv(recipes.MODELS_ENV_VAR, str(tmp_path))
    small = dict(steps=3, batch_size=2, valid_windows=2)
    row = bench.run(recipes.get("gpt", "cpu", **small), 4, seed=1)
    trained = recipes.trained("gpt", "cpu", seed=1, **small)
    assert row["val_loss"] == round(trained.metrics["loss"], 5)
    assert row["params"] == count_parameters(trained.model)


def test_benchmark_writes_one_row_per_run(load_benchmark, one_thread,
                                          tmp_path):
    bench = load_benchmark("kv_heads")
    out = tmp_path / "kv.csv"
    rows = bench.main(["--steps", "1", "--seeds", "1", "--kv-heads", "1",
                       "--out", str(out)])
    assert [(r["num_kv_heads"], r["seed"]) for r in rows] == [(1, 0)]
    lines = out.read_text().splitlines()
    assert lines[0].split(",") == list(bench.FIELDS) and len(lines) == 2
