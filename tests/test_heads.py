"""Task heads: pooling, token classification, the tied LM head, masking."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from transformer_book.heads import (
    ClassificationHead,
    LMHead,
    TokenClassificationHead,
)
from transformer_book.masks import padding_mask
from transformer_book.training import count_parameters

VOCAB = 1000
PAD, CLS, SEP, MASK = 0, 1, 2, 3
SPECIALS = (PAD, CLS, SEP)


# --------------------------------------------------------------------------
# Classification heads
# --------------------------------------------------------------------------


def test_cls_pooling_reads_position_zero():
    head = ClassificationHead(8, 3, pool="cls")
    x = torch.randn(2, 5, 8)
    assert torch.equal(head.pooled(x), x[:, 0])
    y = x.clone()
    y[:, 1:] = torch.randn(2, 4, 8)  # other positions do not matter
    assert torch.equal(head(x), head(y))


def test_mean_pooling_ignores_padding():
    head = ClassificationHead(8, 3, pool="mean")
    x = torch.randn(3, 6, 8, dtype=torch.float64)
    head = head.double()
    lengths = [6, 4, 1]
    mask = padding_mask(lengths, 6)  # (B, 1, 1, T)
    pooled = head.pooled(x, mask)
    for b, n in enumerate(lengths):
        torch.testing.assert_close(pooled[b], x[b, :n].mean(0))
    # Whatever the padded positions hold (even inf), the output is the same.
    y = x.clone()
    y[1, 4:] = float("inf")
    y[2, 1:] = torch.randn(5, 8, dtype=torch.float64) * 100
    assert torch.equal(head(x, mask), head(y, mask))
    # (B, T) and (B, 1, 1, T) masks agree; no mask averages everything.
    assert torch.equal(head(x, mask), head(x, mask[:, 0, 0]))
    torch.testing.assert_close(head.pooled(x), x.mean(1))
    # Without the mask, padding does change the mean.
    assert not torch.allclose(head.pooled(x), pooled)


def test_max_pooling_ignores_padding():
    head = ClassificationHead(8, 3, pool="max").double()
    x = -torch.rand(3, 6, 8, dtype=torch.float64)  # all negative
    lengths = [6, 4, 1]
    mask = padding_mask(lengths, 6)  # (B, 1, 1, T)
    pooled = head.pooled(x, mask)
    for b, n in enumerate(lengths):
        torch.testing.assert_close(pooled[b], x[b, :n].amax(0))
    # Padding that holds zeros, larger than every real value, is not read.
    y = x.clone()
    y[1, 4:] = 0.0
    y[2, 1:] = 100.0
    assert torch.equal(head(x, mask), head(y, mask))
    assert torch.equal(head(x, mask), head(x, mask[:, 0, 0]))
    assert torch.equal(head.pooled(y), y.amax(1))  # no mask: every position
    with pytest.raises(ValueError, match="no real token"):
        head(x, torch.zeros(3, 6, dtype=torch.bool))


def test_classification_head_bad_inputs():
    with pytest.raises(ValueError, match="pool='sum'"):
        ClassificationHead(8, 2, pool="sum")
    head = ClassificationHead(8, 2, pool="mean")
    with pytest.raises(ValueError, match="d_model=8"):
        head(torch.randn(2, 3, 7))
    with pytest.raises(ValueError, match="no real token"):
        head(torch.randn(2, 3, 8), torch.tensor([[1, 1, 0], [0, 0, 0]]) > 0)
    with pytest.raises(ValueError, match=r"\(B, T\) = \(2, 3\)"):
        head(torch.randn(2, 3, 8), torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match="bool"):
        head(torch.randn(2, 3, 8), torch.ones(2, 3))
    cls = ClassificationHead(8, 2)
    with pytest.raises(ValueError, match="position 0"):
        cls(torch.randn(1, 3, 8), torch.tensor([[False, True, True]]))


def test_token_classification_head_is_position_wise():
    head = TokenClassificationHead(8, 5)
    x = torch.randn(2, 6, 8)
    out = head(x)
    assert out.shape == (2, 6, 5)
    perm = torch.randperm(6)
    torch.testing.assert_close(head(x[:, perm]), out[:, perm])
    with pytest.raises(ValueError, match="d_model=8"):
        head(torch.randn(2, 6, 4))


# --------------------------------------------------------------------------
# LM head
# --------------------------------------------------------------------------


def test_lm_head_tying_shares_the_tensor():
    embed = nn.Embedding(50, 16)
    head = LMHead(16, 50, tied_embedding=embed)
    assert head.weight is embed.weight
    both = nn.ModuleDict({"embed": embed, "head": head})
    assert count_parameters(both) == 50 * 16  # counted once
    # One gradient reaches the shared table through both uses.
    ids = torch.tensor([[1, 2, 3]])
    head(embed(ids)).sum().backward()
    assert embed.weight.grad is not None
    assert int((embed.weight.grad.abs().sum(1) > 0).sum()) == 50
    # Logits are dot products with the embedding rows.
    h = torch.randn(4, 16)
    torch.testing.assert_close(head(h), h @ embed.weight.T)

    untied = LMHead(16, 50, bias=True)
    assert count_parameters(untied) == 50 * 16 + 50
    assert untied.weight is not embed.weight


def test_lm_head_bad_arguments():
    with pytest.raises(ValueError, match=r"\(50, 16\)"):
        LMHead(16, 50, tied_embedding=nn.Embedding(40, 16))
    with pytest.raises(TypeError, match="nn.Embedding"):
        LMHead(16, 50, tied_embedding=nn.Linear(16, 50))
    with pytest.raises(ValueError, match="d_model=16"):
        LMHead(16, 50)(torch.randn(2, 8))
