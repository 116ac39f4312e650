"""flash_attention: equal to PyTorch's SDPA forward and backward, keeps no
(N, N) tensor for the backward pass; the sliding-window mask."""

from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from transformer_book.attention import flash_attention
from transformer_book.masks import causal_mask, sliding_window_mask

F64 = torch.float64


def _qkv(shape, kv_len, dv=None, *, seed=0, dtype=F64, grad=False):
    *lead, _, d = shape
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(*shape, generator=gen, dtype=dtype)
    k = torch.randn(*lead, kv_len, d, generator=gen, dtype=dtype)
    v = torch.randn(*lead, kv_len, dv or d, generator=gen, dtype=dtype)
    return tuple(t.requires_grad_(grad) for t in (q, k, v))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("is_causal", [False, True])
def test_equals_sdpa_on_random_shapes(seed, is_causal):
    rng = random.Random(seed)
    q_len, kv_len = rng.randint(1, 70), rng.randint(1, 70)
    shape = (rng.randint(1, 2), rng.randint(1, 3), q_len, rng.randint(1, 9))
    q, k, v = _qkv(shape, kv_len, rng.randint(1, 9), seed=seed)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    for block_size in (1, 3, 64, max(q_len, kv_len) + 5):
        out = flash_attention(q, k, v, is_causal=is_causal,
                              block_size=block_size)
        torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("q_len, kv_len", [(5, 13), (13, 5), (9, 9)])
def test_causal_is_top_left_as_sdpa(q_len, kv_len):
    q, k, v = _qkv((1, 2, q_len, 4), kv_len)
    out = flash_attention(q, k, v, is_causal=True, block_size=4)
    mask = causal_mask(q_len, kv_len)  # query i sees keys j <= i
    # With q_len > kv_len no row is empty: every query sees key 0.
    assert bool(mask.any(dim=-1).all())
    torch.testing.assert_close(
        out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


def test_empty_lengths_match_sdpa():
    q, k, v = _qkv((1, 1, 4, 3), 0)  # no keys: zeros, as SDPA gives
    out = flash_attention(q, k, v, block_size=2)
    assert torch.equal(out, F.scaled_dot_product_attention(q, k, v))
    assert torch.equal(out, torch.zeros_like(out))
    q, k, v = _qkv((1, 1, 0, 3), 5)
    assert flash_attention(q, k, v).shape == (1, 1, 0, 3)


def test_float32_and_three_dimensional_inputs():
    q, k, v = _qkv((3, 37, 8), 29, dtype=torch.float32)
    torch.testing.assert_close(
        flash_attention(q, k, v, is_causal=True, block_size=8),
        F.scaled_dot_product_attention(q, k, v, is_causal=True))


@pytest.mark.parametrize("is_causal", [False, True])
def test_gradcheck(is_causal):
    q, k, v = _qkv((1, 2, 7, 3), 5, 4, grad=True)
    assert torch.autograd.gradcheck(
        lambda q, k, v: flash_attention(q, k, v, is_causal=is_causal,
                                        block_size=3), (q, k, v))


@pytest.mark.parametrize("is_causal", [False, True])
def test_gradients_equal_sdpa(is_causal):
    q, k, v = _qkv((2, 2, 21, 5), 17, 6, grad=True, seed=3)
    grad = torch.randn(2, 2, 21, 6, dtype=F64)
    ours = torch.autograd.grad(
        flash_attention(q, k, v, is_causal=is_causal, block_size=4),
        (q, k, v), grad)
    theirs = torch.autograd.grad(
        F.scaled_dot_product_attention(q, k, v, is_causal=is_causal),
        (q, k, v), grad)
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_saves_only_inputs_output_and_logsumexp():
    q, k, v = _qkv((1, 2, 100, 4), 90, grad=True)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(
        lambda t: saved.append(t.shape) or t, lambda t: t
    ):
        flash_attention(q, k, v, block_size=16)
    assert saved == [q.shape, k.shape, v.shape, (1, 2, 100, 4), (1, 2, 100)]


def test_causal_skips_the_blocks_above_the_diagonal():
    def flops(is_causal):
        q, k, v = _qkv((1, 1, 64, 4), 64)
        counter = FlopCounterMode(display=False)
        with counter:
            flash_attention(q, k, v, is_causal=is_causal, block_size=16)
        return counter.get_total_flops()

    n = 64 // 16  # blocks per side: n * n visited, or n (n + 1) / 2
    assert flops(False) == n * n * 4 * 16 * 16 * 4
    assert flops(True) == n * (n + 1) // 2 * 4 * 16 * 16 * 4


def test_sliding_window_mask():
    mask = sliding_window_mask(6, 8, window=3)
    i, j = torch.arange(6)[:, None], torch.arange(8)
    assert torch.equal(mask, (j <= i) & (j > i - 3))
    assert torch.equal(sliding_window_mask(5, window=9), causal_mask(5))
    assert sliding_window_mask(4, window=1).sum() == 4  # itself only


@pytest.mark.parametrize("call, exc, match", [
    (lambda q: flash_attention(q, q, q, block_size=0), ValueError,
     "block_size=0 must be positive"),
    (lambda q: flash_attention(q, q, q, block_size=2.0), TypeError,
     "block_size must be an int"),
    (lambda q: flash_attention(q, q, q, is_causal=1), TypeError,
     "is_causal must be a bool"),
    (lambda q: flash_attention(q.long(), q, q), TypeError,
     "q must be a floating tensor"),
    (lambda q: flash_attention(q, q[..., :2], q), ValueError, "k"),
    (lambda q: flash_attention(q, q, q[..., :3, :]), ValueError, "v"),
    (lambda q: flash_attention(q[0, 0, 0], q, q), ValueError, "q must be"),
    (lambda q: flash_attention(q, q.float(), q), TypeError, "k"),
    (lambda q: sliding_window_mask(3, window=0), ValueError,
     "window=0 must be positive"),
])
def test_bad_arguments_raise(call, exc, match):
    q = torch.randn(1, 2, 5, 4, dtype=F64)
    with pytest.raises(exc, match=match):
        call(q)
