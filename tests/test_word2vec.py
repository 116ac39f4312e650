"""Word2vec: training examples, shapes, learning, queries, errors."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from transformer_book.word2vec import (
    CBOW,
    SkipGram,
    analogy,
    cbow_windows,
    cosine_similarities,
    nearest_neighbours,
    negative_sampling_loss,
    noise_distribution,
    skipgram_pairs,
    subsample,
    train_word2vec,
)


def test_skipgram_pairs_match_a_loop():
    ids = [4, 7, 1, 9, 3]
    pairs = skipgram_pairs(ids, window=2)
    expected = sorted(
        (ids[t], ids[t + j])
        for t in range(len(ids))
        for j in (-2, -1, 1, 2)
        if 0 <= t + j < len(ids)
    )
    assert pairs.shape == (len(expected), 2)
    assert sorted(map(tuple, pairs.tolist())) == expected


def test_skipgram_pairs_short_sequence():
    assert skipgram_pairs([1], window=3).shape == (0, 2)


def test_cbow_windows():
    centres, contexts = cbow_windows(torch.arange(10, 17), window=2)
    assert centres.tolist() == [12, 13, 14]
    assert contexts.shape == (3, 4)
    assert contexts[0].tolist() == [10, 11, 13, 14]


def test_noise_distribution():
    noise = noise_distribution([0, 0, 0, 0, 1], vocab_size=3)
    assert noise.shape == (3,)
    assert abs(noise.sum().item() - 1) < 1e-6
    assert noise[2] == 0
    assert math.isclose(noise[0] / noise[1], 4**0.75, rel_tol=1e-5)


def test_subsample_thins_frequent_words_only():
    g = torch.Generator().manual_seed(0)
    ids = torch.tensor([0] * 900 + list(range(1, 101)))
    kept = subsample(ids, 1e-2, generator=g)
    assert (kept[kept != 0] == torch.arange(1, 101)).all()  # rare: all kept
    assert (kept == 0).sum() < 300  # keep prob sqrt(0.01 / 0.9) ~ 0.1


@pytest.mark.parametrize("cls", [SkipGram, CBOW])
def test_initial_loss_is_k_plus_one_log_two(cls):
    model = cls(20, 8)
    B, K = 5, 3
    negatives = torch.randint(0, 20, (B, K))
    if cls is SkipGram:
        loss = model(torch.arange(B), torch.arange(B), negatives)
    else:
        loss = model(torch.randint(0, 20, (B, 4)), torch.arange(B), negatives)
    assert loss.shape == ()
    assert math.isclose(loss.item(), (K + 1) * math.log(2), rel_tol=1e-6)
    assert model.embeddings.shape == (20, 8)


def test_negative_sampling_loss_matches_formula():
    torch.manual_seed(0)
    h, pos, neg = torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 2, 4)
    expected = torch.stack([
        -F.logsigmoid(h[b] @ pos[b])
        - sum(F.logsigmoid(-(h[b] @ neg[b, k])) for k in range(2))
        for b in range(3)
    ]).mean()
    torch.testing.assert_close(negative_sampling_loss(h, pos, neg), expected)


def _toy_corpus():
    # Two "topics": words 0-3 co-occur, words 4-7 co-occur, never mixed.
    g = torch.Generator().manual_seed(0)
    blocks = []
    for i in range(400):
        base = 0 if i % 2 == 0 else 4
        blocks.append(base + torch.randint(0, 4, (6,), generator=g))
    return torch.cat(blocks), g


@pytest.mark.parametrize("cls", [SkipGram, CBOW])
def test_training_pulls_co_occurring_words_together(cls):
    ids, g = _toy_corpus()
    torch.manual_seed(0)
    model = cls(8, 16)
    losses = train_word2vec(
        model, ids, window=2, num_negatives=3, batch_size=512, epochs=6,
        lr=0.05, generator=g,
    )
    assert sum(losses[-5:]) / 5 < 0.8 * losses[0]
    sims = cosine_similarities(model.embeddings, 0)
    assert sims[1:4].min() > sims[4:].max()
    near = [i for i, _ in nearest_neighbours(model.embeddings, 4, k=3)]
    assert sorted(near) == [5, 6, 7]


def test_nearest_neighbours_and_analogy_on_known_vectors():
    E = torch.tensor([
        [1.0, 0.0, 0.0],   # 0 "man"
        [1.0, 1.0, 0.0],   # 1 "king"
        [0.0, 0.0, 1.0],   # 2 "woman"
        [0.0, 1.0, 1.0],   # 3 "queen"
        [1.0, 0.1, 0.0],   # 4 near "man"
    ])
    near = nearest_neighbours(E, 0, k=2)
    assert [i for i, _ in near] == [4, 1]
    assert near[0][1] == pytest.approx(1 / math.sqrt(1.01))
    assert nearest_neighbours(E, 0, k=1, exclude=[4])[0][0] == 1
    # man : king :: woman : ?
    assert analogy(E, 0, 1, 2)[0][0] == 3
    query = nearest_neighbours(E, torch.tensor([0.0, 1.0, 1.0]), k=1)
    assert query[0][0] == 3  # a vector query is not excluded


# --------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------


def test_bad_inputs():
    with pytest.raises(ValueError, match="window=0"):
        skipgram_pairs([1, 2], window=0)
    with pytest.raises(TypeError, match="window must be an int"):
        cbow_windows([1, 2, 3], window=1.0)
    with pytest.raises(ValueError, match="fewer than 2 \\* window \\+ 1"):
        cbow_windows([1, 2], window=1)
    with pytest.raises(TypeError, match="ids must hold integer"):
        skipgram_pairs([0.5, 1.0], window=1)
    with pytest.raises(ValueError, match="ids must be 1-D"):
        skipgram_pairs([[1, 2]], window=1)
    with pytest.raises(ValueError, match="ids is empty"):
        noise_distribution([], vocab_size=3)
    with pytest.raises(ValueError, match="vocab_size=3"):
        noise_distribution([3], vocab_size=3)
    with pytest.raises(ValueError, match="embedding_dim=0"):
        SkipGram(10, 0)
    with pytest.raises(TypeError, match="vocab_size must be an int"):
        CBOW(10.0, 4)
    with pytest.raises(ValueError, match="threshold"):
        subsample([1, 2], 0.0)
    model = SkipGram(5, 2)
    with pytest.raises(ValueError, match="token id 5 in centre"):
        model(torch.tensor([5]), torch.tensor([0]), torch.zeros(1, 2).long())
    with pytest.raises(ValueError, match="context must be 2-D"):
        CBOW(5, 2)(torch.tensor([1]), torch.tensor([0]),
                   torch.zeros(1, 2).long())
    with pytest.raises(TypeError, match="model must be"):
        train_word2vec(torch.nn.Linear(2, 2), [1, 2, 3])
    with pytest.raises(ValueError, match="batch_size=0"):
        train_word2vec(model, [1, 2, 3], batch_size=0)
    with pytest.raises(ValueError, match="k=0"):
        nearest_neighbours(torch.eye(3), 0, k=0)
    with pytest.raises(ValueError, match="query=3"):
        nearest_neighbours(torch.eye(3), 3)
    with pytest.raises(ValueError, match="embeddings must be"):
        cosine_similarities(torch.ones(3), 0)


# --------------------------------------------------------------------------
# Regressions (issue 9)
# --------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [SkipGram, CBOW])
def test_mismatched_batch_sizes_are_rejected(cls):
    # They used to broadcast silently: a (1,) target against (3,) inputs.
    model = cls(10, 4)
    negatives = torch.zeros(3, 2, dtype=torch.long)
    if cls is SkipGram:
        args = (torch.arange(3), torch.tensor([1]), negatives)
        match = "centre has 3, context has 1, negatives has 3"
    else:
        args = (torch.zeros(3, 4, dtype=torch.long), torch.tensor([1]),
                negatives)
        match = "context has 3, centre has 1, negatives has 3"
    with pytest.raises(ValueError, match=f"batch sizes differ: {match}"):
        model(*args)
    with pytest.raises(ValueError, match="batch sizes differ"):
        model(args[0], torch.arange(3), negatives[:2])


def test_nearest_neighbours_rejects_a_negative_exclude():
    # exclude=[-1] used to drop the last row silently.
    E = torch.eye(3)
    with pytest.raises(ValueError, match="token id -1 in exclude"):
        nearest_neighbours(E, 0, exclude=[-1])
    with pytest.raises(ValueError, match="token id 3 in exclude"):
        nearest_neighbours(E, 0, exclude=[3])


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: nearest_neighbours(torch.eye(3), 0, k="2"), "k must be"),
        (lambda: nearest_neighbours(torch.eye(3), "0"), "query must be"),
        (lambda: subsample([1, 2], "1e-3"), "threshold must be"),
        (lambda: noise_distribution([1], 3, power="1"), "power must be"),
        (lambda: SkipGram("10", 4), "vocab_size must be"),
        (lambda: train_word2vec(SkipGram(5, 2), [1, 2, 3], lr="0.1"),
         "lr must be"),
        (lambda: train_word2vec(SkipGram(5, 2), [1, 2, 3], epochs="2"),
         "epochs must be"),
    ],
)
def test_strings_where_numbers_are_expected(call, match):
    with pytest.raises(TypeError, match=match):
        call()


def test_train_word2vec_checks_ids_against_the_model():
    with pytest.raises(ValueError, match="token id 7 in ids"):
        train_word2vec(SkipGram(5, 2), [1, 2, 7])
