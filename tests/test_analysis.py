"""capture_attention: what it records, in which order, and what it leaves."""

from __future__ import annotations

import pytest
import torch

from transformer_book.analysis import (
    attention_rollout,
    capture_attention,
    mean_attention_distance,
)
from transformer_book.attention import MultiHeadAttention
from transformer_book.masks import padding_mask
from transformer_book.transformer import Transformer

F64 = torch.float64


def test_records_every_call_in_order_with_the_same_outputs():
    torch.manual_seed(0)
    model = Transformer(8, 2, 2, 1, 16, dtype=F64).eval()
    src, tgt = torch.randn(3, 5, 8, dtype=F64), torch.randn(3, 4, 8, dtype=F64)
    pad = padding_mask([5, 3, 2], max_len=5)
    expected = model(src, tgt, pad, None, pad, tgt_is_causal=True)
    with capture_attention(model) as maps:
        out = model(src, tgt, pad, None, pad, tgt_is_causal=True)
    torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)
    # Two encoder layers, then the decoder's self- and cross-attention.
    assert [tuple(w.shape) for w in maps] == [
        (3, 2, 5, 5), (3, 2, 5, 5), (3, 2, 4, 4), (3, 2, 4, 5)
    ]
    encoder_1, _, self_w, cross_w = maps
    assert (encoder_1[2, :, :, 2:] == 0).all()  # padding gets no weight
    assert (self_w.triu(1) == 0).all()  # nor does the future
    assert (cross_w[1, :, :, 3:] == 0).all()
    torch.testing.assert_close(cross_w.sum(-1), torch.ones(3, 2, 4, dtype=F64))
    # After the block nothing is recorded and the fused path is back.
    assert all(m.captured is None and m.fused for m in model.modules()
               if isinstance(m, MultiHeadAttention))
    model(src, tgt)
    assert len(maps) == 4


def test_an_attention_module_itself_is_captured():
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(2, 3, 8)
    with capture_attention(mha) as maps:
        mha(x, x, x)
        mha(x, x[:, :2], x[:, :2])
    assert [tuple(w.shape) for w in maps] == [(2, 2, 3, 3), (2, 2, 3, 2)]


def test_the_list_is_restored_when_the_block_raises():
    mha = MultiHeadAttention(8, 2)
    with pytest.raises(ValueError), capture_attention(mha):
        mha(torch.randn(2, 3, 7))
    assert mha.captured is None


def test_rollout_and_distance_check_their_weights():
    w = torch.softmax(torch.randn(2, 3, 5, 5), dim=-1)  # [CLS] + 2 x 2
    assert attention_rollout([w, w]).shape == (2, 4)
    assert mean_attention_distance([w], patch_size=7).shape == (1, 3)
    with pytest.raises(ValueError, match=r"len\(weights\)=0"):
        attention_rollout([])
    with pytest.raises(ValueError, match=r"weights\[1\] has shape"):
        attention_rollout([w, w[:, :2]])
    with pytest.raises(ValueError, match="not a square grid"):
        attention_rollout([w], pool="mean")
    with pytest.raises(ValueError, match="pool='max'"):
        mean_attention_distance([w], pool="max")
