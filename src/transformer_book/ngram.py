r"""Count-based n-gram language models (Shannon, 1948), the baselines.

:math:`p(x_t \mid x_{<t}) \approx p(x_t \mid x_{t-n+1}, \ldots, x_{t-1})`,
with counts smoothed so that no token gets probability zero:

* ``"add_k"``: :math:`p(w \mid h) = (c(h, w) + k) / (c(h) + k V)`;
* ``"witten_bell"`` (Witten and Bell, 1991; Chen and Goodman, 1999):
  :math:`p(w \mid h) = (c(h, w) + N_{1+}(h)\, p(w \mid h')) /
  (c(h) + N_{1+}(h))`, with :math:`h'` the context without its oldest
  token and :math:`N_{1+}(h)` the number of distinct tokens after ``h``.
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
_NONE: Counter[int] = Counter()  # the followers of an unseen context


class NGramLM:
    """An n-gram language model over integer token ids; a context shorter
    than ``n - 1`` tokens uses the order that fits it.

    Args:
        n: the order (1 the unigram, 2 the bigram, ...).
        smoothing: ``"witten_bell"`` or ``"add_k"``.
        k: the pseudo-count of ``"add_k"``, positive.
    """

    def __init__(self, n: int, vocab_size: int, *,
                 smoothing: Literal["witten_bell", "add_k"] = "witten_bell",
                 k: float = 1.0) -> None:
        self.n = check_int("n", n)
        self.vocab_size = check_int("vocab_size", vocab_size)
        self.smoothing: Smoothing = check_choice(
            "smoothing", smoothing, get_args(Smoothing))
        self.k = check_number("k", k, minimum=0.0, min_inclusive=False)
        # _followers[m][h]: the counts of the tokens after context h of
        # length m (m = 0: the unigram counts, under the key ()).
        self._followers: list[dict[tuple[int, ...], Counter[int]]] = []
        self._totals: list[dict[tuple[int, ...], int]] = []

    def _tokens(self, tokens: Sequence[int]) -> list[int]:
        ids = check_token_ids(tokens, self.vocab_size, "tokens")
        if not ids:
            raise ValueError("tokens is empty; the model needs tokens")
        return ids

    def _fitted_order(self, name: str = "n", value: int | None = None) -> int:
        """``value`` (``n`` when ``None``), checked against a fitted model."""
        if not self._followers:
            raise RuntimeError("the model is not fitted; call fit(tokens)")
        value = self.n if value is None else check_int(name, value)
        if value > self.n:
            raise ValueError(
                f"{name}={value} is larger than the fitted order {self.n}")
        return value

    def fit(self, tokens: Sequence[int]) -> NGramLM:
        """Count the n-grams of one sequence of ids, replacing old counts."""
        ids = self._tokens(tokens)
        self._followers = []
        for m in range(self.n):
            table: dict[tuple[int, ...], Counter[int]] = defaultdict(Counter)
            # Shifted copies zipped together: every (m + 1)-gram.
            grams = zip(*(ids[j:] for j in range(m + 1)), strict=False)
            for gram, c in Counter(grams).items():
                table[gram[:-1]][gram[-1]] = c
            self._followers.append(dict(table))
        self._totals = [{h: c.total() for h, c in table.items()}
                        for table in self._followers]
        return self

    def with_options(self, *, n: int | None = None,
                     smoothing: Literal["witten_bell", "add_k"] | None = None
                    ) -> NGramLM:
        """A model of order ``n <= self.n`` or another smoothing that shares
        these counts (refitting one changes the other)."""
        n = self._fitted_order("n", n)
        other = NGramLM(n, self.vocab_size, k=self.k,
                        smoothing=smoothing or self.smoothing)
        other._followers = self._followers[:n]
        other._totals = self._totals[:n]
        return other

    def num_ngrams(self, order: int | None = None) -> int:
        """Number of distinct n-grams of ``order`` (``n`` by default)."""
        order = self._fitted_order("order", order)
        return sum(len(c) for c in self._followers[order - 1].values())

    def _context(self, context: Sequence[int]) -> tuple[int, ...]:
        """The last ``n - 1`` ids of ``context`` (all of a shorter one)."""
        self._fitted_order()
        ids = check_token_ids(context, self.vocab_size, "context")
        return tuple(ids[max(0, len(ids) - self.n + 1) :])

    def _prob(self, token: int, h: tuple[int, ...]) -> float:
        V = self.vocab_size
        if self.smoothing == "add_k":
            after = self._followers[len(h)].get(h, _NONE)
            total = self._totals[len(h)].get(h, 0)
            return (after.get(token, 0) + self.k) / (total + self.k * V)
        p = 1.0 / V  # Witten-Bell: from uniform to ever longer contexts
        for m in range(len(h) + 1):
            ctx = h[len(h) - m :]
            counts = self._followers[m].get(ctx)
            if counts is None:
                break  # an unseen context: the longer ones are unseen too
            seen = len(counts)
            p = (counts.get(token, 0) + seen * p) / (
                self._totals[m][ctx] + seen)
        return p

    def prob(self, token: int, context: Sequence[int] = ()) -> float:
        """:math:`p(\\text{token} \\mid \\text{context})`; the context is
        oldest first, and only its last ``n - 1`` ids count."""
        h = self._context(context)
        (token,) = check_token_ids([token], self.vocab_size, "token")
        return self._prob(token, h)

    def distribution(self, context: Sequence[int] = ()) -> np.ndarray:
        """The next-token probabilities after ``context``, shape ``(V,)``."""
        h = self._context(context)
        return np.array([self._prob(w, h) for w in range(self.vocab_size)])

    def log_likelihood(self, tokens: Sequence[int]) -> float:
        """The log-probability of a sequence, each token given the up to
        ``n - 1`` tokens before it in the sequence."""
        self._fitted_order()
        ids, w = self._tokens(tokens), self.n - 1
        return sum(math.log(self._prob(x, tuple(ids[max(0, t - w) : t])))
                   for t, x in enumerate(ids))

    def perplexity(self, tokens: Sequence[int]) -> float:
        """:math:`\\exp(-\\frac{1}{N} \\sum_t \\log p(x_t \\mid \\ldots))`."""
        ids = self._tokens(tokens)
        return math.exp(-self.log_likelihood(ids) / len(ids))

    def __repr__(self) -> str:
        return (f"NGramLM(n={self.n}, vocab_size={self.vocab_size}, "
                f"smoothing={self.smoothing!r})")
