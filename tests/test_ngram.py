"""N-gram language models: normalisation, smoothing, perplexity, errors."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch

from transformer_book.ngram import NGramLM

V = 6
_RNG = random.Random(0)
SEQ = [_RNG.randrange(V - 1) for _ in range(300)]  # id 5 unseen


@pytest.mark.parametrize("n", [1, 2, 3, 4])
@pytest.mark.parametrize("smoothing", ["witten_bell", "add_k"])
def test_distributions_sum_to_one(n, smoothing):
    lm = NGramLM(n, V, smoothing=smoothing, k=0.5).fit(SEQ)
    for context in ([], [0], [1, 2], [4, 4, 4], [5, 5, 5]):
        p = lm.distribution(context)
        assert p.shape == (V,)
        assert (p > 0).all()
        assert abs(p.sum() - 1) < 1e-12
        for w in range(V):
            assert math.isclose(lm.prob(w, context), p[w], rel_tol=1e-12)


def test_unseen_token_has_positive_probability_and_finite_perplexity():
    lm = NGramLM(3, V).fit(SEQ)
    assert lm.prob(5, [0, 1]) > 0
    assert math.isfinite(lm.perplexity([5, 5, 0, 5]))


def test_add_k_matches_formula():
    lm = NGramLM(2, 4, smoothing="add_k", k=1.0).fit([0, 1, 0, 1, 0, 2])
    # "0" is followed by 1, 1, 2: c(0) = 3, c(0, 1) = 2.
    assert math.isclose(lm.prob(1, [0]), (2 + 1) / (3 + 4))
    assert math.isclose(lm.prob(3, [0]), 1 / (3 + 4))


def test_witten_bell_matches_formula():
    tokens = [0, 1, 0, 1, 0, 2]
    lm = NGramLM(2, 4).fit(tokens)
    uni = (3 + 3 / 4) / (6 + 3)  # c(0) = 3, 3 distinct tokens, 6 tokens
    assert math.isclose(lm.prob(0, []), uni)
    p_1 = (2 + 3 / 4) / (6 + 3)
    # After "0": 1 twice, 2 once -> 2 distinct followers.
    assert math.isclose(lm.prob(1, [0]), (2 + 2 * p_1) / (3 + 2))


def test_uniform_model_has_perplexity_vocab_size():
    lm = NGramLM(1, V, smoothing="add_k", k=1e9).fit([0, 1])
    assert math.isclose(lm.perplexity([0, 3, 5]), V, rel_tol=1e-6)


def test_perplexity_of_a_hand_computed_case():
    lm = NGramLM(2, 4, smoothing="add_k", k=1.0).fit([0, 1, 0, 1, 0, 2])
    # p(0) = (3 + 1) / (6 + 4); p(1 | 0) = (2 + 1) / (3 + 4);
    # "1" is followed by 0 twice, never by 2: p(2 | 1) = (0 + 1) / (2 + 4).
    # The product is 0.4 * 3/7 * 1/6 = 1/35.
    assert math.isclose(lm.log_likelihood([0, 1, 2]), -math.log(35))
    assert math.isclose(lm.perplexity([0, 1, 2]), 35 ** (1 / 3))


@pytest.mark.parametrize("smoothing", ["witten_bell", "add_k"])
def test_short_context_is_kept_whole_for_n_at_least_4(smoothing):
    # Regression: _context sliced with a negative start, so with n=4 a
    # two-token context kept only its last token.
    four = NGramLM(4, V, smoothing=smoothing).fit(SEQ)
    three = four.with_options(n=3)
    two = four.with_options(n=2)
    a, b = 1, 2
    for w in range(V):
        assert four.prob(w, [a, b]) == three.prob(w, [a, b])
    assert not np.allclose(four.distribution([a, b]), two.distribution([b]))
    np.testing.assert_array_equal(
        four.distribution([a, b]), three.distribution([a, b])
    )
    held = SEQ[:30]
    expected = sum(
        math.log(four.prob(x, held[max(0, t - 3) : t]))
        for t, x in enumerate(held)
    )
    assert math.isclose(four.log_likelihood(held), expected)


def test_higher_order_helps_on_structured_text():
    seq = [0, 1, 2, 3] * 100
    ppl = [NGramLM(n, V).fit(seq).perplexity([0, 1, 2, 3] * 5) for n in (1, 2)]
    assert ppl[1] < ppl[0]
    assert ppl[1] < 1.2


def test_context_longer_than_needed_is_truncated():
    lm = NGramLM(2, V).fit(SEQ)
    assert lm.prob(1, [3, 4, 0]) == lm.prob(1, [0])


def test_with_options_shares_counts():
    big = NGramLM(3, V).fit(SEQ)
    for n in (1, 2, 3):
        for smoothing in ("witten_bell", "add_k"):
            small = NGramLM(n, V, smoothing=smoothing).fit(SEQ)
            same = big.with_options(n=n, smoothing=smoothing)
            assert same.perplexity(SEQ[:40]) == small.perplexity(SEQ[:40])
    with pytest.raises(ValueError, match="n=4 is larger"):
        big.with_options(n=4)


def test_num_ngrams():
    lm = NGramLM(2, V).fit([0, 1, 0, 1])
    assert lm.num_ngrams(1) == 2
    assert lm.num_ngrams() == 2  # (0, 1) and (1, 0)
    with pytest.raises(ValueError, match="order=3"):
        lm.num_ngrams(3)


def test_accepts_tensors_and_arrays():
    a = NGramLM(2, V).fit(torch.tensor(SEQ)).perplexity(np.array(SEQ[:9]))
    b = NGramLM(2, V).fit(SEQ).perplexity(SEQ[:9])
    assert a == b


# --------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(n=0, vocab_size=3), ValueError, "n=0"),
        (dict(n=1.5, vocab_size=3), TypeError, "n must be an int"),
        (dict(n=2, vocab_size=0), ValueError, "vocab_size=0"),
        (dict(n=2, vocab_size=3, smoothing="kn"), ValueError, "smoothing"),
        (dict(n=2, vocab_size=3, k=0.0), ValueError, "k=0 must be > 0"),
        (dict(n=2, vocab_size=3, k="1"), TypeError, "k must be"),
        (dict(n=2, vocab_size=3, k=math.inf), ValueError, "k=inf"),
        (dict(n=2, vocab_size=3, k=math.nan), ValueError, "k=nan"),
        (dict(n="2", vocab_size=3), TypeError, "n must be an int"),
        (dict(n=2, vocab_size="3"), TypeError, "vocab_size must be an int"),
    ],
)
def test_bad_constructor_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        NGramLM(**kwargs)


def test_bad_training_data():
    with pytest.raises(ValueError, match="tokens is empty"):
        NGramLM(2, 3).fit([])
    with pytest.raises(ValueError, match="token id 3 in tokens"):
        NGramLM(2, 3).fit([0, 3])
    with pytest.raises(TypeError, match="tokens must be a sequence"):
        NGramLM(2, 3).fit("abc")
    with pytest.raises(TypeError, match="tokens must hold int"):
        NGramLM(2, 3).fit([0.5])


def test_bad_queries():
    lm = NGramLM(2, 3)
    with pytest.raises(RuntimeError, match="not fitted"):
        lm.prob(0)
    lm.fit([0, 1, 2])
    with pytest.raises(ValueError, match="token id 7 in token"):
        lm.prob(7)
    with pytest.raises(ValueError, match="in context"):
        lm.distribution([-1])
    with pytest.raises(ValueError, match="tokens is empty"):
        lm.perplexity([])
