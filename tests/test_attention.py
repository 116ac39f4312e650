"""Attention: equal to PyTorch, both paths agree, masks, errors."""

from __future__ import annotations

import random

import pytest
import torch
from torch import nn

from transformer_book.analysis import capture_attention
from transformer_book.attention import (
    MultiHeadAttention,
    _fused_attention,
    scaled_dot_product_attention,
    set_fused,
)
from transformer_book.masks import causal_mask, mask_to_bias, padding_mask
from transformer_book.positional import RotaryEmbedding, alibi_bias

F64 = torch.float64
MASK_KINDS = ("none", "bool", "float", "padding", "causal", "causal+padding")


def _fused(q, k, v, mask=None, *, is_causal=False):
    """PyTorch's kernel behind the written-out path's masking rules."""
    return _fused_attention(q, k, v, mask, is_causal, 0.0)


# The two paths of attention: each test below runs on both.
PATHS = {"fused": _fused, "written-out": scaled_dot_product_attention}


def _with_weights(mha, *args, **kwargs):
    """The output of one call and the weights capture_attention records."""
    with capture_attention(mha) as maps:
        out = mha(*args, **kwargs)
    (weights,) = maps
    return out, weights


def _random_config(rng: random.Random) -> dict:
    num_heads = rng.choice([1, 2, 3, 4])
    return dict(
        num_heads=num_heads,
        d_model=num_heads * rng.choice([2, 4, 5, 8]),
        batch=rng.randint(1, 3),
        q_len=rng.randint(1, 6),
        kv_len=rng.randint(1, 7),
        batch_first=rng.random() < 0.5,
        bias=rng.random() < 0.5,
        self_attention=rng.random() < 0.4,
    )


def _masks(
    kind: str, batch: int, q_len: int, kv_len: int, gen: torch.Generator
):
    """Our mask, and (attn_mask, key_padding_mask) for nn.MHA."""
    lengths = torch.randint(1, kv_len + 1, (batch,), generator=gen)
    pad = padding_mask(lengths, max_len=kv_len)  # (B, 1, 1, kv_len)
    causal = causal_mask(q_len, kv_len=kv_len)
    if kind == "none":
        return None, False, None, None
    if kind == "bool":
        allowed = torch.rand(q_len, kv_len, generator=gen) < 0.7
        allowed[:, 0] = True  # keep a key per row: PyTorch gives NaN else
        # nn.MultiheadAttention reads True as "blocked": pass ~mask.
        return allowed, False, ~allowed, None
    if kind == "float":
        bias = torch.randn(q_len, kv_len, generator=gen, dtype=F64)
        return bias, False, bias, None
    if kind == "padding":
        # PyTorch's key_padding_mask is (B, kv_len) with True = padding.
        return pad, False, None, ~pad[:, 0, 0]
    if kind == "causal":
        return None, True, ~causal, None
    if kind == "causal+padding":
        return pad, True, ~causal, ~pad[:, 0, 0]
    raise AssertionError(kind)


@pytest.mark.parametrize("seed", range(12))
def test_matches_torch_multihead_attention(seed):
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    cfg = _random_config(rng)
    b, q_len, kv_len = cfg["batch"], cfg["q_len"], cfg["kv_len"]
    if cfg["self_attention"]:
        kv_len = q_len
    torch.manual_seed(seed)
    theirs = nn.MultiheadAttention(
        cfg["d_model"],
        cfg["num_heads"],
        bias=cfg["bias"],
        batch_first=cfg["batch_first"],
        dtype=F64,
    )
    if cfg["bias"]:  # PyTorch zeroes biases at init: make them matter
        with torch.no_grad():
            theirs.in_proj_bias.normal_(generator=gen)
            theirs.out_proj.bias.normal_(generator=gen)
    ours = MultiHeadAttention.from_torch(theirs)
    query = torch.randn(b, q_len, cfg["d_model"], dtype=F64, generator=gen)
    if cfg["self_attention"]:
        key = value = query
    else:
        shape = (b, kv_len, cfg["d_model"])
        key = torch.randn(shape, dtype=F64, generator=gen)
        value = torch.randn(shape, dtype=F64, generator=gen)

    def seq_first(x):
        return x if cfg["batch_first"] else x.transpose(0, 1)

    for kind in MASK_KINDS:
        mask, is_causal, t_mask, t_pad = _masks(kind, b, q_len, kv_len, gen)
        expected, expected_w = theirs(
            seq_first(query),
            seq_first(key),
            seq_first(value),
            attn_mask=t_mask,
            key_padding_mask=t_pad,
            need_weights=True,
            average_attn_weights=False,
        )
        expected = seq_first(expected)
        out, weights = _with_weights(
            ours, query, key, value, mask, is_causal=is_causal
        )
        fused = ours(query, key, value, mask, is_causal=is_causal)
        assert out.shape == (b, q_len, cfg["d_model"])
        assert weights.shape == (b, cfg["num_heads"], q_len, kv_len)
        torch.testing.assert_close(out, expected, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(fused, expected, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(weights, expected_w, rtol=1e-10, atol=1e-12)
        _, averaged = theirs(
            seq_first(query),
            seq_first(key),
            seq_first(value),
            attn_mask=t_mask,
            key_padding_mask=t_pad,
        )
        torch.testing.assert_close(
            weights.mean(1), averaged, rtol=1e-10, atol=1e-12
        )


def test_gradients_match_torch():
    torch.manual_seed(0)
    theirs = nn.MultiheadAttention(12, 3, batch_first=True, dtype=F64)
    ours = MultiHeadAttention.from_torch(theirs)
    x = torch.randn(2, 5, 12, dtype=F64, requires_grad=True)
    y = x.detach().clone().requires_grad_(True)
    theirs(x, x, x, need_weights=False)[0].pow(2).sum().backward()
    ours(y, y, y).pow(2).sum().backward()
    torch.testing.assert_close(y.grad, x.grad, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(
        ours.q_proj.weight.grad,
        theirs.in_proj_weight.grad[:12],
        rtol=1e-10,
        atol=1e-12,
    )


def test_matches_torch_in_eval_mode_with_dropout():
    torch.manual_seed(1)
    theirs = nn.MultiheadAttention(8, 2, dropout=0.3, batch_first=True)
    theirs = theirs.double().eval()
    ours = MultiHeadAttention.from_torch(theirs)
    assert ours.dropout == 0.3 and not ours.training
    x = torch.randn(3, 4, 8, dtype=F64)
    torch.testing.assert_close(ours(x, x, x), theirs(x, x, x)[0])


def test_dropout_is_active_only_in_training():
    mha = MultiHeadAttention(8, 2, dropout=0.5).double()
    x = torch.randn(2, 6, 8, dtype=F64)
    mha.train()
    assert not torch.equal(mha(x, x, x), mha(x, x, x))
    mha.eval()
    assert torch.equal(mha(x, x, x), mha(x, x, x))


def test_from_torch_keeps_device_dtype_and_bias_flag():
    theirs = nn.MultiheadAttention(8, 2, bias=False, dtype=F64)
    ours = MultiHeadAttention.from_torch(theirs)
    assert ours.q_proj.weight.dtype == F64
    assert not ours.bias
    assert all(
        p.bias is None
        for p in (ours.q_proj, ours.k_proj, ours.v_proj, ours.out_proj)
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(kdim=6), "kdim=6"),
        (dict(vdim=5), "vdim=5"),
        (dict(add_bias_kv=True), "add_bias_kv"),
        (dict(add_zero_attn=True), "add_zero_attn"),
    ],
)
def test_from_torch_rejects_unsupported_configs(kwargs, match):
    theirs = nn.MultiheadAttention(8, 2, **kwargs)
    with pytest.raises(ValueError, match=match):
        MultiHeadAttention.from_torch(theirs)


def test_from_torch_rejects_other_modules():
    with pytest.raises(TypeError, match="module must be a torch.nn.Multi"):
        MultiHeadAttention.from_torch(nn.Linear(4, 4))


def _qkv(b=2, h=3, q_len=4, kv_len=6, d=5, dv=7, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, q_len, d, dtype=F64, generator=gen)
    k = torch.randn(b, h, kv_len, d, dtype=F64, generator=gen)
    v = torch.randn(b, h, kv_len, dv, dtype=F64, generator=gen)
    return q, k, v


def _path_masks():
    gen = torch.Generator().manual_seed(3)
    allowed = torch.rand(2, 1, 4, 6, generator=gen) < 0.6
    return {
        "none": None,
        "bool": allowed,
        "float": torch.randn(4, 6, dtype=F64, generator=gen),
        "padding": padding_mask([6, 2], max_len=6),
        "per-head": torch.rand(2, 3, 4, 6, generator=gen) < 0.5,
    }


@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize(
    "kind", ["none", "bool", "float", "padding", "per-head"]
)
def test_explicit_path_equals_fused_path(kind, is_causal):
    q, k, v = _qkv()
    mask = _path_masks()[kind]
    fused = _fused(q, k, v, mask, is_causal=is_causal)
    explicit = scaled_dot_product_attention(q, k, v, mask, is_causal=is_causal)
    out, _ = scaled_dot_product_attention(
        q, k, v, mask, is_causal=is_causal, return_weights=True
    )
    assert torch.isfinite(fused).all()
    torch.testing.assert_close(explicit, fused, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out, fused, rtol=1e-12, atol=1e-12)


def test_paths_agree_in_float32_and_for_mha():
    mha = MultiHeadAttention(16, 4)
    x = torch.randn(2, 9, 16)
    fused = mha(x, x, x, is_causal=True)
    mha.fused = False
    explicit = mha(x, x, x, is_causal=True)
    torch.testing.assert_close(explicit, fused, rtol=1e-5, atol=1e-6)


def test_the_path_is_chosen_per_instance():
    torch.manual_seed(0)
    first, second = MultiHeadAttention(8, 2), MultiHeadAttention(8, 2)
    x = torch.randn(1, 3, 8, requires_grad=True)
    first.fused = False
    grad_fn = type(first(x, x, x).grad_fn).__name__
    assert "Scaled" not in grad_fn and second.fused
    layers = torch.nn.Sequential(first, second)
    assert set_fused(layers, False) is layers
    assert not first.fused and not second.fused
    set_fused(layers, True)
    assert first.fused and second.fused
    with pytest.raises(TypeError, match="fused must be a bool"):
        set_fused(layers, 0)


def test_capture_attention_restores_and_nests():
    mha = MultiHeadAttention(8, 2).double()
    x = torch.randn(2, 3, 8, dtype=F64)
    with capture_attention(mha) as outer:
        mha(x, x, x)
        with capture_attention(mha) as inner:
            mha(x, x, x, is_causal=True)
        mha(x, x, x)
    assert len(outer) == 2 and len(inner) == 1
    assert mha.captured is None
    mha(x, x, x)
    assert len(outer) == 2


def test_weights_are_distributions_and_masked_keys_get_zero():
    q, k, v = _qkv()
    allowed = _path_masks()["bool"] & causal_mask(4, kv_len=6)
    allowed[..., 0] = True
    _, weights = scaled_dot_product_attention(
        q, k, v, allowed, return_weights=True
    )
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 4, dtype=F64))
    blocked = ~allowed.expand_as(weights)
    assert (weights[blocked] == 0).all()
    assert (weights[~blocked] > 0).all()


def test_float_bias_shifts_scores():
    q, k, v = _qkv()
    bias = torch.zeros(4, 6, dtype=F64)
    bias[:, 2] = 50.0  # a large bias makes key 2 win every row
    _, weights = scaled_dot_product_attention(
        q, k, v, bias, return_weights=True
    )
    assert (weights[..., 2] > 0.99).all()


@pytest.mark.parametrize("mask_type", ["bool", "min", "-inf"])
def test_fully_masked_row_gives_zeros_and_finite_gradients(mask_type):
    q, k, v = _qkv()
    allowed = torch.ones(4, 6, dtype=torch.bool)
    allowed[1] = False  # query 1 may attend to nothing
    mask = {
        "bool": allowed,
        "min": mask_to_bias(allowed, F64),
        "-inf": torch.zeros(4, 6, dtype=F64).masked_fill(
            ~allowed, float("-inf")
        ),
    }[mask_type]
    for attend in PATHS.values():
        q_ = q.clone().requires_grad_(True)
        out = attend(q_, k, v, mask)
        assert torch.isfinite(out).all()
        assert (out[:, :, 1] == 0).all()
        assert (out[:, :, 0] != 0).any()
        out.sum().backward()
        assert torch.isfinite(q_.grad).all()
    _, weights = scaled_dot_product_attention(
        q, k, v, mask, return_weights=True
    )
    assert (weights[:, :, 1] == 0).all()


def test_fully_masked_padding_row_in_mha():
    mha = MultiHeadAttention(8, 2, bias=False).double()
    x = torch.randn(2, 3, 8, dtype=F64, requires_grad=True)
    pad = padding_mask([3, 0], max_len=3)  # the second sequence is empty
    for fused in (True, False):
        mha.fused = fused
        out = mha(x, x, x, pad)
        assert torch.isfinite(out).all()
        # Without biases, an empty attention row gives exactly zero.
        assert (out[1] == 0).all()
        out.sum().backward()
        assert torch.isfinite(x.grad).all()
        x.grad = None


def test_causal_attention_ignores_the_future():
    mha = MultiHeadAttention(12, 3).double()
    x = torch.randn(2, 7, 12, dtype=F64)
    changed = x.clone()
    changed[:, 4:] = torch.randn(2, 3, 12, dtype=F64)
    for fused in (True, False):
        mha.fused = fused
        before = mha(x, x, x, is_causal=True)
        after = mha(changed, changed, changed, is_causal=True)
        torch.testing.assert_close(before[:, :4], after[:, :4])
        assert not torch.allclose(before[:, 4:], after[:, 4:])


def test_causal_flag_equals_causal_mask():
    mha = MultiHeadAttention(12, 3).double()
    x = torch.randn(2, 5, 12, dtype=F64)
    torch.testing.assert_close(
        mha(x, x, x, is_causal=True), mha(x, x, x, causal_mask(5))
    )


def test_self_attention_is_permutation_equivariant():
    mha = MultiHeadAttention(12, 3).double()
    x = torch.randn(2, 6, 12, dtype=F64)
    perm = torch.randperm(6)
    out = mha(x, x, x)
    xp = x[:, perm]
    torch.testing.assert_close(mha(xp, xp, xp), out[:, perm])


def test_cross_attention_with_different_lengths():
    mha = MultiHeadAttention(8, 4).double()
    query = torch.randn(2, 3, 8, dtype=F64)
    memory = torch.randn(2, 11, 8, dtype=F64)
    pad = padding_mask([11, 5], max_len=11)
    out, weights = _with_weights(mha, query, memory, memory, pad)
    assert out.shape == (2, 3, 8)
    assert weights.shape == (2, 4, 3, 11)
    assert (weights[1, ..., 5:] == 0).all()
    torch.testing.assert_close(mha(query, memory, memory, pad), out)


@pytest.mark.parametrize(
    "shape",
    [(4, 6), (2, 1, 1, 6), (2, 1, 4, 6), (2, 3, 4, 6), (1, 6), (6,)],
)
def test_mha_accepts_mask_shapes(shape):
    mha = MultiHeadAttention(12, 3).double()
    query = torch.randn(2, 4, 12, dtype=F64)
    memory = torch.randn(2, 6, 12, dtype=F64)
    mask = torch.rand(shape) < 0.7
    out = mha(query, memory, memory, mask)
    expected = mha(query, memory, memory, mask.expand(2, 3, 4, 6))
    torch.testing.assert_close(out, expected)


def test_reset_parameters_matches_torch_init():
    ours = MultiHeadAttention(64, 4)
    theirs = nn.MultiheadAttention(64, 4)
    bound = (6 / (64 + 3 * 64)) ** 0.5
    assert ours.q_proj.weight.abs().max() <= bound
    assert theirs.in_proj_weight.abs().max() <= bound
    assert (ours.q_proj.bias == 0).all() and (ours.out_proj.bias == 0).all()
    assert ours.q_proj.weight.std() > bound / 3


def test_parameter_count():
    def count(m):
        return sum(p.numel() for p in m.parameters())

    assert count(MultiHeadAttention(512, 8, bias=False)) == 4 * 512 * 512
    assert count(MultiHeadAttention(512, 8)) == 4 * 512 * 512 + 4 * 512
    assert count(MultiHeadAttention(512, 8)) == count(
        nn.MultiheadAttention(512, 8)
    )


# Bad input: every error names the argument.


def test_rejects_d_model_not_divisible():
    with pytest.raises(
        ValueError, match="d_model=100 is not divisible by num_heads=8"
    ):
        MultiHeadAttention(100, 8)


@pytest.mark.parametrize(
    ("call", "exc", "match"),
    [
        (lambda: MultiHeadAttention(0, 2), ValueError, "d_model=0"),
        (lambda: MultiHeadAttention(8, "2"), TypeError, "num_heads"),
        (lambda: MultiHeadAttention(8, 2, dropout=1.0), ValueError, "dropout"),
        (
            lambda: MultiHeadAttention(8, 2, dropout="0.1"),
            TypeError,
            "dropout",
        ),
        (
            lambda: scaled_dot_product_attention(*_qkv(), dropout_p=1.5),
            ValueError,
            "dropout_p=1.5",
        ),
        (
            lambda: scaled_dot_product_attention(*_qkv(), scale="0.5"),
            TypeError,
            "scale",
        ),
    ],
)
def test_bad_arguments_raise(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_rejects_mask_that_does_not_broadcast():
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(2, 4, 8)
    with pytest.raises(ValueError, match=r"attn_mask of shape \(4, 5\)"):
        mha(x, x, x, torch.ones(4, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="attn_mask of shape"):
        mha(x, x, x, torch.ones(3, 1, 1, 4, dtype=torch.bool))


def test_rejects_integer_mask():
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(2, 4, 8)
    with pytest.raises(TypeError, match="attn_mask must be a bool mask"):
        mha(x, x, x, torch.ones(4, 4, dtype=torch.long))


def test_rejects_wrong_rank():
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(2, 4, 8)
    with pytest.raises(ValueError, match="query must be 3-D"):
        mha(x[0], x, x)
    with pytest.raises(ValueError, match="key must be 3-D"):
        mha(x, x[None], x)


def test_rejects_wrong_feature_size():
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(2, 4, 8)
    with pytest.raises(ValueError, match=r"query has shape \(2, 4, 6\)"):
        mha(torch.randn(2, 4, 6), x, x)
    with pytest.raises(ValueError, match=r"value has shape \(2, 4, 4\)"):
        mha(x, x, torch.randn(2, 4, 4))


def test_rejects_mismatched_key_value_and_batch():
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(2, 4, 8)
    with pytest.raises(ValueError, match=r"value has shape \(2, 5, 8\)"):
        mha(x, x, torch.randn(2, 5, 8))
    with pytest.raises(ValueError, match=r"key has shape \(3, 4, 8\)"):
        mha(x, torch.randn(3, 4, 8), torch.randn(3, 4, 8))


def test_rejects_non_tensor_input():
    mha = MultiHeadAttention(8, 2)
    with pytest.raises(TypeError, match="query must be a floating tensor"):
        mha([[0.0] * 8], torch.randn(1, 1, 8), torch.randn(1, 1, 8))


def test_sdpa_rejects_mismatched_q_k_features():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=r"k has shape \(2, 3, 6, 3\)"):
        scaled_dot_product_attention(q, k[..., :3], v)


def test_sdpa_rejects_mismatched_k_v_lengths():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=r"v has shape \(2, 3, 2, 7\)"):
        scaled_dot_product_attention(q, k, v[..., :2, :])


def test_sdpa_rejects_low_rank_and_integer_inputs():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="q must be 2-D or 3-D or 4-D"):
        scaled_dot_product_attention(q[0, 0, 0], k, v)
    with pytest.raises(TypeError, match="v must be a floating tensor"):
        scaled_dot_product_attention(q, k, v.long())


def test_sdpa_rejects_mismatched_batch_dims():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=r"k has shape \(2, 3, 6, 5\), exp"):
        scaled_dot_product_attention(q[:1], k, v)


def test_sdpa_rejects_bad_mask():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="attn_mask of shape"):
        scaled_dot_product_attention(q, k, v, torch.ones(6, 4).bool())


def test_sdpa_rejects_mixed_dtypes():
    q, k, v = _qkv()
    with pytest.raises(TypeError, match="k has dtype torch.float32, but q is"):
        scaled_dot_product_attention(q, k.float(), v)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fully_masked_row_low_precision(dtype):
    q, k, v = (t.to(dtype) for t in _qkv())
    allowed = torch.rand(4, 6) < 0.5
    allowed[2] = False
    for mask in (allowed, mask_to_bias(allowed, dtype)):
        for attend in PATHS.values():
            q_ = q.clone().requires_grad_(True)
            out = attend(q_, k, v, mask)
            out.float().sum().backward()
            assert (out[:, :, 2] == 0).all()
            assert torch.isfinite(out).all()
            assert torch.isfinite(q_.grad).all()


# Regression tests: each failed before the fix it names.


@pytest.mark.parametrize("dtype", [torch.bool, F64])
def test_one_dimensional_mask_of_kv_len(dtype):
    # A (kv_len,) mask passed the shape check, then crashed the fused path
    # with an IndexError.
    q, k, v = _qkv()
    allowed = torch.tensor([True, False, True, True, False, True])
    mask = allowed if dtype == torch.bool else mask_to_bias(allowed, F64)
    expected = scaled_dot_product_attention(q, k, v, mask.expand(4, 6))
    for attend in PATHS.values():
        out = attend(q, k, v, mask)
        torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)
    out, weights = scaled_dot_product_attention(
        q, k, v, mask, is_causal=True, return_weights=True
    )
    assert (weights[..., ~allowed] == 0).all()


@pytest.mark.parametrize(
    ("mask_dtype", "q_dtype"),
    [(torch.float32, F64), (torch.float16, torch.float32)],
)
def test_narrow_float_mask_blocks_rows(mask_dtype, q_dtype):
    # The bias was cast to the queries' dtype before the search for fully
    # blocked rows: float32's minimum is not float64's, so the blocked row
    # got uniform weights and a non-zero output.
    q, k, v = (t.to(q_dtype) for t in _qkv())
    allowed = torch.ones(4, 6, dtype=torch.bool)
    allowed[1] = False
    allowed[2, 3:] = False
    bias = mask_to_bias(allowed, mask_dtype)
    for attend in PATHS.values():
        out = attend(q, k, v, bias)
        assert (out[:, :, 1] == 0).all()
        torch.testing.assert_close(
            out, scaled_dot_product_attention(q, k, v, allowed)
        )
    _, weights = scaled_dot_product_attention(
        q, k, v, bias, return_weights=True
    )
    assert (weights[:, :, 1] == 0).all()
    assert (weights[:, :, 2, 3:] == 0).all()


def test_explicit_path_does_not_overflow_in_float16():
    # q @ k^T = 64 * 40 * 40 = 102400 overflows float16 (max 65504) when
    # the scale comes after the product: NaN, against 40 from the fused
    # path. Scaling q first keeps the scores at 12800.
    q = torch.full((1, 2, 3, 64), 40.0, dtype=torch.float16)
    v = torch.randn(1, 2, 3, 64).to(torch.float16)
    fused = scaled_dot_product_attention(q, q, v)
    out, weights = scaled_dot_product_attention(q, q, v, return_weights=True)
    assert torch.isfinite(out).all() and torch.isfinite(weights).all()
    torch.testing.assert_close(out, fused, rtol=1e-3, atol=1e-3)
    expected = v.float().mean(-2, keepdim=True).expand(1, 2, 3, 64)
    torch.testing.assert_close(out.float(), expected, rtol=1e-3, atol=1e-3)


# Rotary embeddings inside MultiHeadAttention.


class _PageRoPEAttention(nn.Module):
    """The attention of book/attention/positional-encoding.md, as written
    there before MultiHeadAttention took ``rotary`` (PreviousTokenModel,
    without its embedding, positions and readout)."""

    def __init__(self, d_model, heads, scheme):
        super().__init__()
        self.scheme, self.heads, self.d = scheme, heads, d_model
        self.rope = RotaryEmbedding(d_model // heads)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x):
        B, T = x.shape[:2]
        D, HEADS = self.d, self.heads
        # (B, T, 3D) -> 3 x (B, T, H, D/H) -> 3 x (B, H, T, D/H)
        q, k, v = (
            t.view(B, T, HEADS, D // HEADS).transpose(1, 2)
            for t in self.qkv(x).chunk(3, dim=-1)
        )
        if self.scheme == "RoPE":
            q, k = self.rope(q), self.rope(k)
        bias = (
            alibi_bias(HEADS, T, device=x.device)
            if self.scheme == "ALiBi"
            else None
        )
        y, w = scaled_dot_product_attention(
            q, k, v, bias, is_causal=True, return_weights=True
        )
        y = y.transpose(1, 2).reshape(B, T, D)  # (B, H, T, D/H) -> (B, T, D)
        return self.out(y), w


def _from_page(page: _PageRoPEAttention, rotary) -> MultiHeadAttention:
    """The page's weights in a MultiHeadAttention."""
    d = page.d
    ours = MultiHeadAttention(d, page.heads, rotary=rotary).double()
    with torch.no_grad():
        for proj, w, b in zip(
            (ours.q_proj, ours.k_proj, ours.v_proj),
            page.qkv.weight.chunk(3),
            page.qkv.bias.chunk(3),
            strict=True,
        ):
            proj.weight.copy_(w)
            proj.bias.copy_(b)
        ours.out_proj.load_state_dict(page.out.state_dict())
    return ours


@pytest.mark.parametrize("scheme", ["RoPE", "ALiBi", "none"])
def test_rotary_mha_equals_the_page_attention(scheme):
    torch.manual_seed(0)
    d_model, heads = 32, 4
    page = _PageRoPEAttention(d_model, heads, scheme).double()
    rotary = RotaryEmbedding(d_model // heads) if scheme == "RoPE" else None
    ours = _from_page(page, rotary)
    x = torch.randn(3, 11, d_model, dtype=F64)
    bias = alibi_bias(heads, 11, dtype=F64) if scheme == "ALiBi" else None
    expected, expected_w = page(x)
    out, weights = _with_weights(ours, x, x, x, bias, is_causal=True)
    torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(weights, expected_w, rtol=1e-12, atol=1e-12)
    fused = ours(x, x, x, bias, is_causal=True)
    torch.testing.assert_close(fused, expected, rtol=1e-10, atol=1e-12)


def test_rotary_is_applied_to_queries_and_keys_only():
    torch.manual_seed(1)
    mha = MultiHeadAttention(8, 2, rotary=RotaryEmbedding(4)).double()
    plain = MultiHeadAttention(8, 2).double()
    plain.load_state_dict(mha.state_dict())  # RoPE has no parameters
    x = torch.randn(2, 6, 8, dtype=F64)
    # Position 0 is not rotated: a single token sees no difference.
    one = x[:, :1]
    torch.testing.assert_close(mha(one, one, one), plain(one, one, one))
    assert not torch.allclose(mha(x, x, x), plain(x, x, x))
    # With zero query and key projections every score is 0 whatever the
    # rotation: if the values were rotated too, the outputs would differ.
    for module in (mha, plain):
        with torch.no_grad():
            for proj in (module.q_proj, module.k_proj):
                proj.weight.zero_()
                proj.bias.zero_()
    torch.testing.assert_close(
        mha(x, x, x, is_causal=True), plain(x, x, x, is_causal=True)
    )


def test_rotary_must_fit_the_head_size():
    with pytest.raises(ValueError, match="rotary has head_dim=8"):
        MultiHeadAttention(16, 4, rotary=RotaryEmbedding(8))
    with pytest.raises(TypeError, match="rotary must be a RotaryEmbedding"):
        MultiHeadAttention(16, 4, rotary=lambda t: t)


def test_self_attention_does_not_depend_on_tensor_identity():
    # One projection path: the same tensor passed three times and three
    # equal copies give the same output and the same gradients.
    torch.manual_seed(2)
    mha = MultiHeadAttention(8, 2).double()
    x = torch.randn(2, 5, 8, dtype=F64)
    same = mha(x, x, x)
    copies = mha(x.clone(), x.clone(), x.clone())
    assert torch.equal(same, copies)
