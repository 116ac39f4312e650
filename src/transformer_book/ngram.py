"""Count-based n-gram language models, the baselines neural models beat.

An autoregressive model factorises the probability of a sequence into one
prediction per token,

.. math::

    p(x_1, \\ldots, x_T) = \\prod_{t=1}^{T} p(x_t \\mid x_1, \\ldots, x_{t-1}),

and an n-gram model keeps only the last ``n - 1`` tokens of the history
(Shannon, 1948; Bishop and Bishop, 2024). With ``n = 1``
the model ignores order altogether: it is the *bag of words*, every token
drawn independently from one distribution.

Probabilities come from counts in the training sequence. A raw relative
frequency gives probability zero to every continuation the training data
never showed, and one zero makes the held-out perplexity infinite, so
:class:`NGramLM` smooths its counts in one of two ways:

* ``"add_k"`` (Laplace smoothing for ``k = 1``) adds ``k`` to every count:
  :math:`p(w \\mid h) = (c(h, w) + k) / (c(h) + k V)`.
* ``"witten_bell"`` interpolates each order with the next shorter one, and
  the unigram with the uniform distribution, trusting a context in
  proportion to how often it was seen compared to how many different
  tokens followed it (Witten and Bell, 1991; Chen and Goodman, 1999):
  :math:`p(w \\mid h) = (c(h, w) + N_{1+}(h)\\, p(w \\mid h')) /
  (c(h) + N_{1+}(h))`, where :math:`h'` drops the oldest token of
  :math:`h` and :math:`N_{1+}(h)` counts the distinct tokens seen after
  :math:`h`. It has no parameter to tune.

Both give every token of the vocabulary a positive probability, so the
perplexity of any held-out sequence is finite.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Literal, get_args

import numpy as np

from ._checks import check_choice, check_int, check_number, check_token_ids

__all__ = ["SMOOTHING", "NGramLM"]

Smoothing = Literal["witten_bell", "add_k"]
#: The smoothing methods :class:`NGramLM` accepts.
SMOOTHING: tuple[str, ...] = get_args(Smoothing)


class NGramLM:
    """An n-gram language model over integer token ids.

    The model predicts token :math:`x_t` from the ``n - 1`` tokens before
    it. It stores the counts of every order from 1 to ``n``; contexts
    shorter than ``n - 1`` (the first tokens of a sequence) use the counts
    of the order that fits them.

    Args:
        n: the order; ``n = 1`` is the unigram (bag-of-words) model,
            ``n = 2`` the bigram, ``n = 3`` the trigram.
        vocab_size: number of token ids; every id is in
            ``range(vocab_size)`` and gets a positive probability.
        smoothing: ``"witten_bell"`` (interpolation with shorter contexts,
            the default) or ``"add_k"``; see the module documentation.
        k: the pseudo-count of ``"add_k"`` smoothing (ignored otherwise).

    Raises:
        TypeError: if ``n`` or ``vocab_size`` is not an int or ``k`` not a
            number.
        ValueError: if ``n`` or ``vocab_size`` is below 1, ``k`` is not
            positive and finite, or ``smoothing`` is unknown.

    Example:
        >>> lm = NGramLM(2, vocab_size=3).fit([0, 1, 0, 1, 0, 2])
        >>> round(float(lm.distribution([0]).sum()), 12)
        1.0
    """

    def __init__(
        self,
        n: int,
        vocab_size: int,
        *,
        smoothing: Literal["witten_bell", "add_k"] = "witten_bell",
        k: float = 1.0,
    ) -> None:
        self.n = check_int("n", n)
        self.vocab_size = check_int("vocab_size", vocab_size)
        self.smoothing: Smoothing = check_choice(
            "smoothing", smoothing, get_args(Smoothing)
        )
        self.k = check_number("k", k, minimum=0.0, min_inclusive=False)
        # _followers[m][h] counts the tokens seen after context h of length
        # m (so m = 0 holds the unigram counts under the key ()).
        self._followers: list[dict[tuple[int, ...], Counter[int]]] = []
        self._totals: list[dict[tuple[int, ...], int]] = []

    # -- training ---------------------------------------------------------

    def fit(self, tokens: Sequence[int]) -> NGramLM:
        """Count the n-grams of one training sequence (earlier counts go).

        Args:
            tokens: token ids, shape ``(N,)``, each in
                ``range(vocab_size)``; a list, tuple, array or tensor.

        Returns:
            ``self``, fitted.

        Raises:
            TypeError: if ``tokens`` is a string or holds non-integers.
            ValueError: if ``tokens`` is empty or holds an id outside the
                vocabulary.
        """
        ids = check_token_ids(tokens, self.vocab_size, "tokens")
        if not ids:
            raise ValueError("tokens is empty; an n-gram model needs data")
        followers: list[dict[tuple[int, ...], Counter[int]]] = []
        for m in range(self.n):
            table: dict[tuple[int, ...], Counter[int]] = defaultdict(Counter)
            # zip of shifted copies yields every (m + 1)-gram as a tuple.
            grams = Counter(
                zip(*(ids[j:] for j in range(m + 1)), strict=False)
            )
            for gram, count in grams.items():
                table[gram[:-1]][gram[-1]] = count
            followers.append(dict(table))
        self._followers = followers
        self._totals = [
            {h: sum(c.values()) for h, c in table.items()}
            for table in followers
        ]
        return self

    def with_options(
        self,
        *,
        n: int | None = None,
        smoothing: Literal["witten_bell", "add_k"] | None = None,
        k: float | None = None,
    ) -> NGramLM:
        """A model that shares these counts with another order or smoothing.

        Counting is the slow part of :meth:`fit`, and a fitted model of
        order ``n`` holds the counts of every order up to ``n``: this
        returns models of any lower order or another smoothing without
        counting again. The counts are shared, not copied; do not refit
        one model while using the other.

        Args:
            n: the new order, ``1 <= n <= self.n``; unchanged when ``None``.
            smoothing: the new smoothing; unchanged when ``None``.
            k: the new add-k pseudo-count; unchanged when ``None``.

        Returns:
            A fitted :class:`NGramLM`.

        Raises:
            ValueError: if ``n`` is larger than this model's order, or an
                option is invalid.
            RuntimeError: if the model is not fitted.
        """
        self._check_fitted()
        n = self.n if n is None else check_int("n", n)
        if n > self.n:
            raise ValueError(
                f"n={n} is larger than the fitted order {self.n}"
            )
        other = NGramLM(
            n,
            self.vocab_size,
            smoothing=self.smoothing if smoothing is None else smoothing,
            k=self.k if k is None else k,
        )
        other._followers = self._followers[:n]
        other._totals = self._totals[:n]
        return other

    @property
    def is_fitted(self) -> bool:
        """Whether :meth:`fit` has run."""
        return bool(self._followers)

    def _check_fitted(self) -> None:
        if not self.is_fitted:
            raise RuntimeError("the model is not fitted; call fit(tokens)")

    def num_ngrams(self, order: int | None = None) -> int:
        """Number of distinct n-grams seen in training.

        Args:
            order: which order to count (``1 <= order <= n``); ``n`` when
                ``None``.

        Returns:
            How many distinct sequences of ``order`` tokens occurred.

        Raises:
            ValueError: if ``order`` is outside ``1..n``.
            RuntimeError: if the model is not fitted.
        """
        self._check_fitted()
        order = self.n if order is None else check_int("order", order)
        if order > self.n:
            raise ValueError(f"order={order} must be in 1..{self.n}")
        return sum(len(c) for c in self._followers[order - 1].values())

    # -- probabilities ----------------------------------------------------

    def _context(self, context: Sequence[int]) -> tuple[int, ...]:
        """The last ``n - 1`` ids of ``context`` (all of a shorter one)."""
        ids = check_token_ids(context, self.vocab_size, "context")
        return tuple(ids[max(0, len(ids) - (self.n - 1)) :])

    def _prob(self, token: int, context: tuple[int, ...]) -> float:
        """Smoothed probability of ``token`` after ``context`` (checked)."""
        V = self.vocab_size
        if self.smoothing == "add_k":
            m = len(context)
            counts = self._followers[m].get(context)
            total = self._totals[m].get(context, 0)
            c = counts.get(token, 0) if counts is not None else 0
            return (c + self.k) / (total + self.k * V)
        p = 1.0 / V  # Witten-Bell: start from uniform, then longer contexts
        for m in range(len(context) + 1):
            h = context[len(context) - m :]
            counts = self._followers[m].get(h)
            if counts is None:
                break  # unseen context: longer ones are unseen too
            types = len(counts)
            total = self._totals[m][h]
            p = (counts.get(token, 0) + types * p) / (total + types)
        return p

    def prob(self, token: int, context: Sequence[int] = ()) -> float:
        """Probability of ``token`` given the tokens before it.

        Args:
            token: the next token id.
            context: the preceding token ids, oldest first; only the last
                ``n - 1`` are used, and fewer are fine.

        Returns:
            :math:`p(\\text{token} \\mid \\text{context})`, in ``(0, 1]``.

        Raises:
            ValueError: if an id is outside the vocabulary.
            RuntimeError: if the model is not fitted.
        """
        self._check_fitted()
        (token,) = check_token_ids([token], self.vocab_size, "token")
        return self._prob(token, self._context(context))

    def distribution(self, context: Sequence[int] = ()) -> np.ndarray:
        """The next-token distribution after ``context``.

        Args:
            context: the preceding token ids, oldest first.

        Returns:
            Probabilities of every token id, shape ``(vocab_size,)``,
            positive and summing to 1.

        Raises:
            ValueError: if an id is outside the vocabulary.
            RuntimeError: if the model is not fitted.
        """
        self._check_fitted()
        context = self._context(context)
        V = self.vocab_size
        if self.smoothing == "add_k":
            m = len(context)
            p = np.full(V, self.k)
            for w, c in self._followers[m].get(context, Counter()).items():
                p[w] += c
            return p / p.sum()
        p = np.full(V, 1.0 / V)
        for m in range(len(context) + 1):
            h = context[len(context) - m :]
            counts = self._followers[m].get(h)
            if counts is None:
                break
            types = len(counts)
            p = p * types
            for w, c in counts.items():
                p[w] += c
            p /= self._totals[m][h] + types
        return p

    def log_likelihood(self, tokens: Sequence[int]) -> float:
        """Natural-log probability of a whole sequence.

        Each token is scored given the tokens before it *in this sequence*
        (at most ``n - 1`` of them), so the first tokens use shorter
        contexts.

        Args:
            tokens: token ids, shape ``(N,)``.

        Returns:
            :math:`\\sum_t \\log p(x_t \\mid x_{t-n+1}, \\ldots, x_{t-1})`.

        Raises:
            TypeError: if ``tokens`` is a string or holds non-integers.
            ValueError: if ``tokens`` is empty or holds an id outside the
                vocabulary.
            RuntimeError: if the model is not fitted.
        """
        self._check_fitted()
        ids = check_token_ids(tokens, self.vocab_size, "tokens")
        if not ids:
            raise ValueError("tokens is empty; nothing to score")
        width = self.n - 1
        total = 0.0
        for t, token in enumerate(ids):
            context = tuple(ids[max(0, t - width) : t]) if width else ()
            total += math.log(self._prob(token, context))
        return total

    def perplexity(self, tokens: Sequence[int]) -> float:
        """Perplexity of held-out tokens: ``exp`` of the mean negative log.

        A model that spreads its probability uniformly over ``V`` tokens
        has perplexity ``V``; lower is better.

        Args:
            tokens: token ids, shape ``(N,)``.

        Returns:
            :math:`\\exp(-\\frac{1}{N} \\sum_t \\log p(x_t \\mid \\ldots))`.

        Raises:
            TypeError: if ``tokens`` is a string or holds non-integers.
            ValueError: if ``tokens`` is empty or holds an id outside the
                vocabulary.
            RuntimeError: if the model is not fitted.
        """
        ids = check_token_ids(tokens, self.vocab_size, "tokens")
        if not ids:
            raise ValueError("tokens is empty; nothing to score")
        return math.exp(-self.log_likelihood(ids) / len(ids))

    def __repr__(self) -> str:
        return (
            f"NGramLM(n={self.n}, vocab_size={self.vocab_size}, "
            f"smoothing={self.smoothing!r})"
        )
