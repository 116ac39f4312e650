"""Task heads: pooling, token classification, the tied LM head, masking."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from transformer_book.heads import (
    IGNORE_INDEX,
    ClassificationHead,
    LMHead,
    TokenClassificationHead,
    mask_tokens,
)
from transformer_book.masks import padding_mask
from transformer_book.training import count_parameters

VOCAB = 1000
PAD, CLS, SEP, MASK = 0, 1, 2, 3
SPECIALS = (PAD, CLS, SEP)


# --------------------------------------------------------------------------
# mask_tokens
# --------------------------------------------------------------------------


def _corpus(shape=(400, 500)) -> torch.Tensor:
    """Ids over the whole vocabulary, with some specials at known places."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(4, VOCAB, shape, generator=g)
    ids[:, 0] = CLS
    ids[:, -shape[1] // 8 :] = PAD  # padding at the end of every row
    ids[:, shape[1] // 3] = SEP
    ids[::7, 10] = MASK  # a [MASK] already in the data is special too
    return ids


def _within(observed: int, n: int, p: float, sigmas: float = 5.0) -> None:
    """``observed / n`` is within ``sigmas`` binomial std devs of ``p``."""
    sd = math.sqrt(p * (1 - p) / n)
    assert abs(observed / n - p) < sigmas * sd, (observed / n, p, sd)


def test_mask_tokens_proportions_follow_berts_recipe():
    ids = _corpus()
    g = torch.Generator().manual_seed(0)
    inputs, labels = mask_tokens(
        ids, mask_id=MASK, vocab_size=VOCAB, special_ids=SPECIALS, generator=g
    )
    special = torch.isin(ids, torch.tensor([*SPECIALS, MASK]))
    chosen = labels != IGNORE_INDEX
    n_real, n_chosen = int((~special).sum()), int(chosen.sum())
    _within(n_chosen, n_real, 0.15)

    masked = chosen & (inputs == MASK)
    kept = chosen & (inputs == ids)
    replaced = chosen & (inputs != MASK) & (inputs != ids)
    # A random draw hits the original token with probability 1/n.
    n_allowed = VOCAB - 4
    _within(int(masked.sum()), n_chosen, 0.8)
    _within(int(replaced.sum()), n_chosen, 0.1 * (1 - 1 / n_allowed))
    _within(int(kept.sum()), n_chosen, 0.1 + 0.1 / n_allowed)
    assert int(masked.sum() + kept.sum() + replaced.sum()) == n_chosen


def test_mask_tokens_never_chooses_or_draws_specials():
    ids = _corpus()
    g = torch.Generator().manual_seed(0)
    inputs, labels = mask_tokens(
        ids,
        mask_id=MASK,
        vocab_size=VOCAB,
        prob=0.5,
        special_ids=SPECIALS,
        generator=g,
    )
    special = torch.isin(ids, torch.tensor([*SPECIALS, MASK]))
    chosen = labels != IGNORE_INDEX
    assert not bool((chosen & special).any())
    # Specials and unchosen positions pass through untouched.
    assert torch.equal(inputs[~chosen], ids[~chosen])
    # Labels hold the original id exactly where chosen.
    assert torch.equal(labels[chosen], ids[chosen])
    # Random replacements are never special (nor [MASK]).
    drawn = inputs[chosen & (inputs != MASK)]
    assert not bool(torch.isin(drawn, torch.tensor(SPECIALS)).any())
    assert inputs.dtype == labels.dtype == torch.long


def test_mask_tokens_generator_makes_it_reproducible_and_prob_bounds():
    ids = _corpus((20, 100))
    kwargs = {"mask_id": MASK, "vocab_size": VOCAB, "special_ids": SPECIALS}
    a = mask_tokens(ids, generator=torch.Generator().manual_seed(5), **kwargs)
    b = mask_tokens(ids, generator=torch.Generator().manual_seed(5), **kwargs)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])

    inputs, labels = mask_tokens(ids, prob=0.0, **kwargs)
    assert torch.equal(inputs, ids)
    assert bool((labels == IGNORE_INDEX).all())
    _, labels = mask_tokens(ids, prob=1.0, **kwargs)
    special = torch.isin(ids, torch.tensor([*SPECIALS, MASK]))
    assert torch.equal(labels != IGNORE_INDEX, ~special)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"mask_id": 1000}, ValueError, r"mask_id=1000 .*vocab_size=1000"),
        ({"prob": 1.5}, ValueError, "prob=1.5"),
        ({"special_ids": (-1,)}, ValueError, r"special_ids\[0\]=-1"),
        ({"vocab_size": 4, "special_ids": (0, 1, 2)}, ValueError, "special"),
        ({"mask_id": True}, TypeError, "mask_id"),
    ],
)
def test_mask_tokens_bad_arguments(kwargs, error, match):
    ids = torch.tensor([[0, 1, 2, 3]])
    args = {"mask_id": MASK, "vocab_size": VOCAB, **kwargs}
    with pytest.raises(error, match=match):
        mask_tokens(ids, **args)


def test_mask_tokens_bad_ids():
    with pytest.raises(ValueError, match=r"token id 1000 .*vocab_size=1000"):
        mask_tokens(torch.tensor([[5, 1000]]), mask_id=MASK, vocab_size=VOCAB)
    with pytest.raises(TypeError, match="integer"):
        mask_tokens(torch.ones(2, 3), mask_id=MASK, vocab_size=VOCAB)


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


def test_classification_head_bad_inputs():
    with pytest.raises(ValueError, match="pool='max'"):
        ClassificationHead(8, 2, pool="max")
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
