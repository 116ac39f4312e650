"""Masks: shapes, values, merging, broadcasting and the errors raised."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from transformer_book.masks import (
    broadcast_mask,
    causal_mask,
    disallowed_rows,
    mask_to_bias,
    merge_masks,
    padding_mask,
)

MIN64 = torch.finfo(torch.float64).min


@pytest.mark.parametrize("n", [1, 2, 5, 9])
def test_causal_mask_equals_torch_is_causal(n):
    # PyTorch's own causal attention is the oracle: the same outputs with
    # our mask as with is_causal=True, for square masks.
    gen = torch.Generator().manual_seed(n)
    q, k, v = (
        torch.randn(2, 3, n, 4, dtype=torch.float64, generator=gen)
        for _ in range(3)
    )
    mask = causal_mask(n)
    assert mask.dtype == torch.bool and mask.shape == (n, n)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    got = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)
    # And every query sees itself and the past, never the future.
    changed = v.clone()
    changed[..., n - 1, :] += 1.0
    moved = F.scaled_dot_product_attention(q, k, changed, attn_mask=mask)
    torch.testing.assert_close(moved[..., : n - 1, :], got[..., : n - 1, :])


def test_causal_mask_rectangular_is_top_left_aligned():
    mask = causal_mask(2, 4)
    assert torch.equal(
        mask,
        torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0]], dtype=torch.bool),
    )
    assert torch.equal(causal_mask(2, kv_len=4), mask)


def test_causal_mask_device_and_empty():
    assert causal_mask(3, device="cpu").device.type == "cpu"
    assert causal_mask(0).shape == (0, 0)


@pytest.mark.parametrize(
    ("call", "exc", "match"),
    [
        (lambda: causal_mask("3"), TypeError, "q_len must be an int"),
        (lambda: causal_mask(2, kv_len=-2), ValueError, "kv_len=-2"),
        (lambda: padding_mask([2], max_len=1.5), TypeError, "max_len"),
        (
            lambda: mask_to_bias(torch.tensor([True]), torch.int64),
            TypeError,
            "dtype must be a floating dtype",
        ),
    ],
)
def test_bad_arguments_raise(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_padding_mask_shape_and_values():
    mask = padding_mask(torch.tensor([3, 1, 0]), max_len=4)
    assert mask.dtype == torch.bool
    assert mask.shape == (3, 1, 1, 4)
    expected = torch.tensor(
        [[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]], dtype=torch.bool
    )
    assert torch.equal(mask[:, 0, 0], expected)


def test_padding_mask_default_max_len_and_list_input():
    mask = padding_mask([2, 5])
    assert mask.shape == (2, 1, 1, 5)
    assert mask.sum().item() == 7


def test_padding_mask_broadcasts_over_heads_and_queries():
    mask = padding_mask([2, 3], max_len=3)
    scores = torch.zeros(2, 4, 5, 3)  # (B, H, q_len, kv_len)
    expanded = broadcast_mask(mask, scores.shape)
    assert expanded.shape == scores.shape
    assert torch.equal(expanded[1, 3, 4], torch.tensor([True, True, True]))
    assert torch.equal(expanded[0, 2, 0], torch.tensor([True, True, False]))


def test_padding_mask_rejects_2d_lengths():
    with pytest.raises(ValueError, match="lengths must be 1-D"):
        padding_mask(torch.ones(2, 2, dtype=torch.long))


def test_padding_mask_rejects_negative_lengths():
    with pytest.raises(ValueError, match=r"min\(lengths\)=-1 must be non-neg"):
        padding_mask([2, -1])


def test_padding_mask_rejects_empty_lengths():
    # Used to fail inside torch with "max(): Expected reduction dim".
    with pytest.raises(ValueError, match=r"len\(lengths\)=0 must be positive"):
        padding_mask([])
    with pytest.raises(ValueError, match=r"len\(lengths\)=0 must be positive"):
        padding_mask(torch.zeros(0, dtype=torch.long), max_len=3)


@pytest.mark.parametrize("lengths", ["23", [[1], [2, 3]], [1, "a"]])
def test_padding_mask_rejects_non_integer_sequences(lengths):
    with pytest.raises(TypeError, match="lengths must"):
        padding_mask(lengths)


def test_padding_mask_rejects_float_lengths():
    with pytest.raises(TypeError, match="lengths must hold integers"):
        padding_mask([2.0, 1.5])


def test_padding_mask_rejects_short_max_len():
    with pytest.raises(ValueError, match="max_len=3"):
        padding_mask([2, 5], max_len=3)


def test_merge_bool_masks_is_and():
    causal = causal_mask(3)
    pad = padding_mask([2], max_len=3)  # (1, 1, 1, 3)
    merged = merge_masks(causal, pad)
    assert merged.dtype == torch.bool
    assert merged.shape == (1, 1, 3, 3)
    assert torch.equal(merged[0, 0], causal & torch.tensor([1, 1, 0]).bool())


def test_merge_float_masks_add():
    a = torch.randn(3, 3, dtype=torch.float64)
    b = torch.randn(1, 3, dtype=torch.float64)
    assert torch.equal(merge_masks(a, b), a + b)


def test_merge_bool_and_float_gives_min_where_blocked():
    bias = torch.randn(3, 3, dtype=torch.float64)
    causal = causal_mask(3)
    merged = merge_masks(bias, causal)
    assert merged.dtype == torch.float64
    assert torch.equal(merged[causal], bias[causal])
    assert (merged[~causal] == MIN64).all()
    # Two blocking masks never overflow to -inf.
    twice = merge_masks(merged, causal, mask_to_bias(causal, torch.float64))
    assert torch.isfinite(twice).all()
    assert (twice[~causal] == MIN64).all()


def test_merge_masks_ignores_none():
    causal = causal_mask(2)
    assert merge_masks(None, causal, None) is causal
    assert merge_masks() is None
    assert merge_masks(None, None) is None


def test_merge_masks_rejects_shapes_that_do_not_broadcast():
    with pytest.raises(ValueError, match="do not broadcast together"):
        merge_masks(causal_mask(3), causal_mask(4))


def test_merge_masks_rejects_integer_masks():
    with pytest.raises(TypeError, match=r"masks\[1\] must be a bool mask"):
        merge_masks(causal_mask(2), torch.ones(2, 2, dtype=torch.long))


def test_mask_to_bias_values():
    mask = torch.tensor([True, False])
    bias = mask_to_bias(mask, torch.float32)
    assert bias.dtype == torch.float32
    assert bias.tolist() == [0.0, torch.finfo(torch.float32).min]
    inf_bias = torch.tensor([0.5, float("-inf")], dtype=torch.float64)
    assert mask_to_bias(inf_bias).tolist() == [0.5, MIN64]


@pytest.mark.parametrize(
    "shape",
    [(4, 5), (2, 1, 1, 5), (2, 1, 4, 5), (2, 3, 4, 5), (5,), (1, 3, 1, 1)],
)
def test_broadcast_mask_accepts_broadcastable_shapes(shape):
    mask = torch.ones(shape, dtype=torch.bool)
    assert broadcast_mask(mask, (2, 3, 4, 5)).shape == (2, 3, 4, 5)


@pytest.mark.parametrize("shape", [(5, 4), (3, 1, 1, 5), (2, 3, 4, 5, 1)])
def test_broadcast_mask_names_attn_mask(shape):
    mask = torch.ones(shape, dtype=torch.bool)
    with pytest.raises(ValueError, match="attn_mask of shape"):
        broadcast_mask(mask, (2, 3, 4, 5))


def test_broadcast_mask_rejects_integer_mask():
    with pytest.raises(TypeError, match="attn_mask must be a bool mask"):
        broadcast_mask(torch.ones(4, 5, dtype=torch.uint8), (2, 3, 4, 5))


def test_broadcast_mask_rejects_non_tensor():
    with pytest.raises(TypeError, match="attn_mask must be a Tensor"):
        broadcast_mask([[True]], (1, 1))


def test_disallowed_rows_bool_and_float():
    mask = torch.tensor([[True, False], [False, False]])
    assert disallowed_rows(mask).tolist() == [[False], [True]]
    bias = mask_to_bias(mask, torch.float64)
    assert disallowed_rows(bias).tolist() == [[False], [True]]
    inf_bias = torch.tensor([[0.0, float("-inf")], [float("-inf")] * 2])
    assert disallowed_rows(inf_bias).tolist() == [[False], [True]]
