"""Batch helpers of ``data``: windows, shifts, padding and MLM masking."""

from __future__ import annotations

import math
import random

import pytest
import torch

from transformer_book import data
from transformer_book.data import mask_tokens
from transformer_book.heads import IGNORE_INDEX

VOCAB = 1000
PAD, CLS, SEP, MASK = 0, 1, 2, 3
SPECIALS = (PAD, CLS, SEP)


def test_random_windows_are_slices_and_their_next_ids():
    ids = torch.arange(100) * 3
    g = torch.Generator().manual_seed(0)
    x, y = data.random_windows(ids, 8, 5, g)
    assert x.shape == y.shape == (5, 8)
    assert torch.equal(y[:, :-1], x[:, 1:])
    assert torch.equal(x[:, 1:] - x[:, :-1], torch.full((5, 7), 3))
    again = data.random_windows(ids, 8, 5, torch.Generator().manual_seed(0))
    assert torch.equal(again[0], x)


def test_random_shift_moves_each_image_and_keeps_its_pixels():
    images = torch.zeros(64, 2, 6, 6)
    images[:, :, 2:4, 2:4] = torch.rand(64, 2, 2, 2) + 0.5
    g = torch.Generator().manual_seed(1)
    shifted = data.random_shift(images, 1, g)
    assert shifted.shape == images.shape
    # A shift of at most 1 px keeps the blob inside: nothing is lost.
    torch.testing.assert_close(shifted.sum((1, 2, 3)), images.sum((1, 2, 3)))
    moved = (shifted != images).flatten(1).any(1)
    assert 0 < int(moved.sum()) < 64  # 1 in 9 offsets is no shift
    assert torch.equal(data.random_shift(images, 0, g), images)


def test_pad_batch():
    ids, lens = data.pad_batch([[4, 5, 6], [7]], pad_id=0)
    assert ids.tolist() == [[4, 5, 6], [7, 0, 0]]
    assert lens.tolist() == [3, 1]
    with pytest.raises(ValueError, match="sequences"):
        data.pad_batch([])
    with pytest.raises(
        ValueError, match=r"sequences\[1\] must be a non-empty"
    ):
        data.pad_batch([[1], []])


@pytest.mark.parametrize(
    ("sequences", "exc", "match"),
    [
        # Floats were truncated silently: [2.7] became id 2.
        (
            [[1, 2], [2.7]],
            TypeError,
            r"sequences\[1\] must hold int token ids",
        ),
        ([[True, False]], TypeError, r"sequences\[0\] must hold int"),
        (["abc"], TypeError, r"sequences\[0\] must be"),
        ([[1, -3]], ValueError, r"ids >= 0, got \[1, -3\]"),
        ([[1, 2]], TypeError, "pad_id must be an int"),
    ],
)
def test_pad_batch_rejects_what_is_not_token_ids(sequences, exc, match):
    pad_id = "0" if "pad_id" in match else 0
    with pytest.raises(exc, match=match):
        data.pad_batch(sequences, pad_id)


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


def test_length_batches_cover_each_pass_and_group_lengths():
    rng = random.Random(0)
    src = [[0] * rng.randint(1, 30) for _ in range(200)]
    one_pass = data.length_batches(src, 4, 50, seed=0)
    assert len(one_pass) == 50
    assert sorted(i for b in one_pass for i in b) == list(range(200))
    # Sorted by length inside chunks of 32 batches: a batch spans little.
    spans = [max(len(src[i]) for i in b) - min(len(src[i]) for i in b)
             for b in one_pass]
    assert max(spans) <= 3
    longer = data.length_batches(src, 4, 120, seed=0)
    assert len(longer) == 120
    assert longer[:50] == one_pass and longer[50:100] == one_pass
    assert data.length_batches(src, 4, 50, seed=0) == one_pass
    assert data.length_batches(src, 4, 50, seed=1) != one_pass


def test_every_window_reads_each_id_once_and_predicts_the_next():
    ids = torch.arange(23)
    x, y = data.every_window(ids, 5)
    assert x.shape == y.shape == (4, 5)  # (23 - 1) // 5 windows
    assert torch.equal(x.flatten(), ids[:20])
    assert torch.equal(y, x + 1)
    x2, _ = data.every_window(ids, 5, count=2)
    assert torch.equal(x2, x[:2])
