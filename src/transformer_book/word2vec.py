"""Word2vec: learning word vectors by predicting neighbours.

Mikolov et al. (2013a) proposed two shallow models that learn an embedding
per word from raw text, and Mikolov et al. (2013b) made them fast with
*negative sampling*:

* :class:`SkipGram` predicts each context word from the centre word;
* :class:`CBOW` (continuous bag of words) predicts the centre word from
  the average of its context words.

Both keep two tables of vectors, one for words in the role of input
(``in_embed``, the word vectors one keeps) and one for words in the role
of output (``out_embed``). Instead of a softmax over the whole vocabulary,
negative sampling turns each prediction into binary classifications: the
true (input, output) pair should score high, ``K`` random "noise" words
drawn from the unigram distribution raised to the power 3/4 should score
low. For an input vector :math:`h`, the true output vector :math:`u_o` and
noise vectors :math:`u_1, \\ldots, u_K` the loss is

.. math::

    \\ell = -\\log \\sigma(u_o^\\top h)
            - \\sum_{k=1}^{K} \\log \\sigma(-u_k^\\top h).

The module also builds the training examples from a sequence of token ids
(:func:`skipgram_pairs`, :func:`cbow_windows`), trains either model
(:func:`train_word2vec`) and queries the learned vectors by cosine
similarity (:func:`nearest_neighbours`, :func:`analogy`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._checks import (
    check_id_tensor,
    check_int,
    check_number,
    check_tensor,
    check_token_ids,
)
from ._docs import shared_doc

__all__ = [
    "CBOW",
    "SkipGram",
    "analogy",
    "cbow_windows",
    "cosine_similarities",
    "nearest_neighbours",
    "negative_sampling_loss",
    "noise_distribution",
    "skipgram_pairs",
    "subsample",
    "train_word2vec",
]


# --------------------------------------------------------------------------
# Training examples
# --------------------------------------------------------------------------


def _as_id_tensor(
    ids: Sequence[int] | Tensor, vocab_size: int | None = None
) -> Tensor:
    """``ids`` as a 1-D int64 tensor of ids in the vocabulary.

    Without a ``vocab_size`` (the vocabulary is not known yet) the ids only
    need to be non-negative.
    """
    if isinstance(ids, (str, bytes)):
        raise TypeError(
            "ids must be a sequence of int token ids, got "
            f"{type(ids).__name__}"
        )
    t = torch.as_tensor(ids)
    if t.numel() == 0:
        t = t.long()  # [] reads as float32
    check_tensor("ids", t, ndim=1)
    if vocab_size is not None:
        return check_id_tensor("ids", t, vocab_size).long()
    if t.dtype == torch.bool or t.is_floating_point() or t.is_complex():
        raise TypeError(f"ids must hold integer token ids, got {t.dtype}")
    if t.numel() and int(t.min()) < 0:
        raise ValueError(f"ids holds a negative token id {int(t.min())}")
    return t.long()


def skipgram_pairs(ids: Sequence[int] | Tensor, window: int) -> Tensor:
    """All (centre, context) pairs within ``window`` tokens of each other.

    For every position ``t`` and every offset ``1 <= |j| <= window`` with
    ``t + j`` inside the sequence, the pair ``(ids[t], ids[t + j])`` is
    one skip-gram training example.

    Args:
        ids: token ids, shape ``(N,)``.
        window: how many tokens on each side count as context (>= 1).

    Returns:
        The pairs, shape ``(P, 2)``: column 0 the centre, column 1 the
        context word. Pairs are grouped by offset (all ``j = -window``
        pairs first); shuffle them for training.

    Raises:
        TypeError: if ``ids`` does not hold integers or ``window`` is not
            an int.
        ValueError: if ``ids`` is not 1-D or ``window`` is below 1.

    Example:
        >>> skipgram_pairs([5, 6, 7], window=1).tolist()
        [[6, 5], [7, 6], [5, 6], [6, 7]]
    """
    t = _as_id_tensor(ids)
    window = check_int("window", window)
    n = t.numel()
    parts = []
    for j in [*range(-window, 0), *range(1, window + 1)]:
        if abs(j) >= n:
            continue
        centre = t[max(0, -j) : n - max(0, j)]
        context = t[max(0, j) : n - max(0, -j)]
        parts.append(torch.stack([centre, context], dim=1))
    if not parts:
        return torch.empty(0, 2, dtype=torch.long)
    return torch.cat(parts)


def cbow_windows(
    ids: Sequence[int] | Tensor, window: int
) -> tuple[Tensor, Tensor]:
    """Every full context window and the word at its centre.

    Position ``t`` is used when it has ``window`` tokens on both sides, so
    the first and last ``window`` tokens are centres of no example (they
    still appear as context).

    Args:
        ids: token ids, shape ``(N,)``.
        window: how many tokens on each side form the context (>= 1).

    Returns:
        ``(centres, contexts)`` with shapes ``(N - 2 window,)`` and
        ``(N - 2 window, 2 window)``; each context row holds the tokens
        before the centre, then those after it, in order.

    Raises:
        TypeError: if ``ids`` does not hold integers or ``window`` is not
            an int.
        ValueError: if ``ids`` is not 1-D, ``window`` is below 1, or the
            sequence is shorter than ``2 window + 1``.

    Example:
        >>> centres, contexts = cbow_windows([1, 2, 3, 4], window=1)
        >>> centres.tolist(), contexts.tolist()
        ([2, 3], [[1, 3], [2, 4]])
    """
    t = _as_id_tensor(ids)
    window = check_int("window", window)
    n = t.numel()
    if n < 2 * window + 1:
        raise ValueError(
            f"ids has {n} tokens, fewer than 2 * window + 1 = "
            f"{2 * window + 1} needed for one window"
        )
    frames = t.unfold(0, 2 * window + 1, 1)  # (N - 2w, 2w + 1)
    centres = frames[:, window]
    contexts = torch.cat([frames[:, :window], frames[:, window + 1 :]], 1)
    return centres.contiguous(), contexts.contiguous()


def noise_distribution(
    ids: Sequence[int] | Tensor, vocab_size: int, power: float = 0.75
) -> Tensor:
    """The distribution negative samples are drawn from.

    Mikolov et al. (2013b) found the unigram distribution raised to the
    power 3/4 (then renormalised) to work best: it samples frequent words
    less often than their frequency and rare words more often.

    Args:
        ids: the training token ids, shape ``(N,)``.
        vocab_size: number of token ids.
        power: exponent applied to the counts.

    Returns:
        Probabilities, shape ``(vocab_size,)``, summing to 1; ids that never
        occur get probability 0.

    Raises:
        TypeError: if ``ids`` does not hold integers or a number has the
            wrong type.
        ValueError: if ``ids`` is empty or holds an id outside
            ``range(vocab_size)``.
    """
    vocab_size = check_int("vocab_size", vocab_size)
    power = check_number("power", power)
    t = _as_id_tensor(ids, vocab_size)
    if t.numel() == 0:
        raise ValueError("ids is empty; no counts to build noise from")
    counts = torch.bincount(t, minlength=vocab_size).double()
    weights = counts**power
    return (weights / weights.sum()).float()


def subsample(
    ids: Sequence[int] | Tensor,
    threshold: float = 1e-3,
    *,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Drop occurrences of frequent words at random (Mikolov et al., 2013b).

    A token whose word has relative frequency :math:`f` is kept with
    probability :math:`\\min(1, \\sqrt{t / f})` for the threshold
    :math:`t`: words rarer than :math:`t` are always kept, and "the" or
    "of" lose most of their occurrences. The pairs that remain carry more
    information per step, and training is faster. Words are removed before
    windows are formed, so the surviving words come closer together.

    Args:
        ids: token ids, shape ``(N,)``.
        threshold: the frequency :math:`t` above which words are thinned.
        generator: random source, for reproducibility.

    Returns:
        The kept ids, in their original order, shape ``(M,)`` with
        ``M <= N``.

    Raises:
        TypeError: if ``threshold`` is not a number.
        ValueError: if ``threshold`` is not positive.
    """
    threshold = check_number(
        "threshold", threshold, minimum=0.0, min_inclusive=False
    )
    t = _as_id_tensor(ids)
    if t.numel() == 0:
        return t
    counts = torch.bincount(t).double()
    freq = counts[t] / t.numel()
    keep = (threshold / freq).sqrt().clamp(max=1.0)
    draw = torch.rand(t.numel(), generator=generator, dtype=torch.float64)
    return t[draw < keep]


# --------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------


def negative_sampling_loss(
    inputs: Tensor, positives: Tensor, negatives: Tensor
) -> Tensor:
    """The negative-sampling loss of word2vec, averaged over the batch.

    Args:
        inputs: input vectors :math:`h`, shape ``(B, D)``.
        positives: output vectors of the true words, shape ``(B, D)``.
        negatives: output vectors of the noise words, shape ``(B, K, D)``.

    Returns:
        A scalar, the batch mean of the loss
        :math:`-\\log\\sigma(u_o^\\top h)
        - \\sum_k \\log\\sigma(-u_k^\\top h)`.

    Shape:
        ``B`` examples, ``K`` noise words each, vectors of size ``D``.
    """
    pos = (inputs * positives).sum(-1)  # (B,)
    neg = torch.bmm(negatives, inputs.unsqueeze(-1)).squeeze(-1)  # (B, K)
    loss = -F.logsigmoid(pos) - F.logsigmoid(-neg).sum(-1)
    return loss.mean()


# The arguments both models take, from _Word2Vec (see _docs).
_MODEL_ARGS = """\
Args:
    vocab_size: number of token ids ``V``.
    embedding_dim: size ``D`` of each word vector.

Raises:
    TypeError: if a size is not an int.
    ValueError: if a size is below 1."""


class _Word2Vec(nn.Module):
    """Two embedding tables and the initialisation of the word2vec code."""

    def __init__(self, vocab_size: int, embedding_dim: int) -> None:
        super().__init__()
        self.vocab_size = check_int("vocab_size", vocab_size)
        self.embedding_dim = check_int("embedding_dim", embedding_dim)
        self.in_embed = nn.Embedding(vocab_size, embedding_dim)
        self.out_embed = nn.Embedding(vocab_size, embedding_dim)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Input vectors uniform in ``±0.5 / D``, output vectors zero.

        This is the initialisation of the original word2vec program: with
        zero output vectors every score starts at 0, so every prediction
        starts at probability 1/2.
        """
        bound = 0.5 / self.embedding_dim
        nn.init.uniform_(self.in_embed.weight, -bound, bound)
        nn.init.zeros_(self.out_embed.weight)

    @property
    def embeddings(self) -> Tensor:
        """The word vectors (the input table), shape ``(V, D)``, detached."""
        return self.in_embed.weight.detach()

    def _check_batch(self, **named: tuple[Tensor, int]) -> None:
        """Check each ``name=(ids, ndim)`` and that batch sizes agree.

        A mismatch of batch sizes would broadcast silently in the loss.
        """
        for name, (ids, ndim) in named.items():
            check_id_tensor(name, ids, self.vocab_size, ndim=ndim)
        sizes = {name: ids.shape[0] for name, (ids, _) in named.items()}
        if len(set(sizes.values())) > 1:
            shown = ", ".join(f"{k} has {v}" for k, v in sizes.items())
            raise ValueError(
                f"batch sizes differ: {shown}; every example needs one "
                "input, one target and one row of negatives"
            )


@shared_doc(model_args=_MODEL_ARGS)
class SkipGram(_Word2Vec):
    """Skip-gram with negative sampling (Mikolov et al., 2013a, 2013b).

    The centre word's input vector :math:`v_c` scores each candidate
    context word :math:`o` by :math:`u_o^\\top v_c`; the loss is
    :func:`negative_sampling_loss` with :math:`h = v_c`.

    {model_args}

    Shape:
        ``centre``: ``(B,)``; ``context``: ``(B,)``; ``negatives``:
        ``(B, K)``; output: a scalar loss.
    """

    def forward(
        self, centre: Tensor, context: Tensor, negatives: Tensor
    ) -> Tensor:
        """Return the mean negative-sampling loss of a batch of pairs.

        Args:
            centre: centre word ids, shape ``(B,)``.
            context: one true context word id per centre, shape ``(B,)``.
            negatives: noise word ids, shape ``(B, K)``.

        Returns:
            The loss, a scalar.

        Raises:
            TypeError: if ids are not integer tensors.
            ValueError: if an id is outside the vocabulary, a rank is
                wrong, or the batch sizes differ.
        """
        self._check_batch(
            centre=(centre, 1), context=(context, 1), negatives=(negatives, 2)
        )
        h = self.in_embed(centre)  # (B, D)
        return negative_sampling_loss(
            h, self.out_embed(context), self.out_embed(negatives)
        )


@shared_doc(model_args=_MODEL_ARGS)
class CBOW(_Word2Vec):
    """Continuous bag of words with negative sampling (Mikolov et al.).

    The context words' input vectors are averaged,
    :math:`h = \\frac{1}{C} \\sum_j v_{c_j}`, the order of the context words
    is lost (hence "bag of words"), and :math:`h` scores the centre word
    against noise words with :func:`negative_sampling_loss`.

    {model_args}

    Shape:
        ``context``: ``(B, C)``; ``centre``: ``(B,)``; ``negatives``:
        ``(B, K)``; output: a scalar loss.
    """

    def forward(
        self, context: Tensor, centre: Tensor, negatives: Tensor
    ) -> Tensor:
        """Return the mean negative-sampling loss of a batch of windows.

        Args:
            context: context word ids, shape ``(B, C)``.
            centre: the word each context surrounds, shape ``(B,)``.
            negatives: noise word ids, shape ``(B, K)``.

        Returns:
            The loss, a scalar.

        Raises:
            TypeError: if ids are not integer tensors.
            ValueError: if an id is outside the vocabulary, ``context`` is
                not 2-D, or the batch sizes differ.
        """
        self._check_batch(
            context=(context, 2), centre=(centre, 1), negatives=(negatives, 2)
        )
        h = self.in_embed(context).mean(dim=1)  # (B, C, D) -> (B, D)
        return negative_sampling_loss(
            h, self.out_embed(centre), self.out_embed(negatives)
        )


def train_word2vec(
    model: SkipGram | CBOW,
    ids: Sequence[int] | Tensor,
    *,
    window: int = 2,
    num_negatives: int = 5,
    batch_size: int = 1024,
    epochs: int = 1,
    lr: float = 0.01,
    generator: torch.Generator | None = None,
) -> list[float]:
    """Train a skip-gram or CBOW model on one token sequence with Adam.

    Each epoch shuffles all examples (:func:`skipgram_pairs` or
    :func:`cbow_windows`) and draws ``num_negatives`` noise words per
    example from :func:`noise_distribution`. Noise words are not checked
    against the true word: with a vocabulary of thousands a collision is
    rare, and the original implementation does the same.

    Args:
        model: the model to train, in place.
        ids: training token ids, shape ``(N,)``.
        window: context words on each side of the centre.
        num_negatives: noise words ``K`` per example.
        batch_size: examples per optimiser step.
        epochs: passes over the examples.
        lr: Adam's learning rate.
        generator: random source for shuffling and noise, for
            reproducibility.

    Returns:
        The loss of every optimiser step, in order.

    Raises:
        TypeError: if ``model`` is neither :class:`SkipGram` nor
            :class:`CBOW`, or a count or ``lr`` has the wrong type.
        ValueError: if a count is below 1, ``lr`` is not positive, an id
            is outside the model's vocabulary, or ``ids`` yields no
            example.
    """
    if not isinstance(model, (SkipGram, CBOW)):
        raise TypeError(
            f"model must be a SkipGram or CBOW, got {type(model).__name__}"
        )
    num_negatives = check_int("num_negatives", num_negatives)
    batch_size = check_int("batch_size", batch_size)
    epochs = check_int("epochs", epochs)
    lr = check_number("lr", lr, minimum=0.0, min_inclusive=False)
    t = _as_id_tensor(ids, model.vocab_size)
    noise = noise_distribution(t, model.vocab_size)
    if isinstance(model, SkipGram):
        pairs = skipgram_pairs(t, window)
        inputs, targets = pairs[:, 0], pairs[:, 1]
    else:
        targets, inputs = cbow_windows(t, window)
    n = targets.shape[0]
    if n == 0:
        raise ValueError("ids is too short to give one training example")
    device = model.in_embed.weight.device
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    losses: list[float] = []
    model.train()
    for _ in range(epochs):
        order = torch.randperm(n, generator=generator)
        for start in range(0, n, batch_size):
            idx = order[start : start + batch_size]
            negatives = torch.multinomial(
                noise, idx.numel() * num_negatives, True, generator=generator
            ).view(idx.numel(), num_negatives)  # (B * K,) -> (B, K)
            x, y = inputs[idx].to(device), targets[idx].to(device)
            negatives = negatives.to(device)
            # SkipGram(centre, context, ...) and CBOW(context, centre, ...)
            loss = model(x, y, negatives)
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
            losses.append(loss.item())
    return losses


# --------------------------------------------------------------------------
# Queries
# --------------------------------------------------------------------------


def _check_embeddings(embeddings: Tensor) -> Tensor:
    check_tensor("embeddings", embeddings, ndim=2)
    return embeddings.detach().float()


def _vector(embeddings: Tensor, query: int | Tensor, name: str) -> Tensor:
    if isinstance(query, Tensor) and query.dim() == 1:
        if query.shape[0] != embeddings.shape[1]:
            raise ValueError(
                f"{name} has size {query.shape[0]}, expected "
                f"{embeddings.shape[1]}"
            )
        return query.detach().float()
    i = check_int(name, query, minimum=None)
    if not 0 <= i < embeddings.shape[0]:
        raise ValueError(
            f"{name}={i} is outside range({embeddings.shape[0]})"
        )
    return embeddings[i]


def cosine_similarities(
    embeddings: Tensor, query: int | Tensor
) -> Tensor:
    """Cosine similarity of every row of ``embeddings`` to a query.

    Args:
        embeddings: the vectors, shape ``(V, D)``.
        query: a row index, or a vector of shape ``(D,)``.

    Returns:
        Similarities in ``[-1, 1]``, shape ``(V,)`` (0 for a zero row).

    Raises:
        ValueError: if ``embeddings`` is not 2-D or ``query`` is out of
            range or of the wrong size.
    """
    emb = _check_embeddings(embeddings)
    q = _vector(emb, query, "query")
    return F.cosine_similarity(emb, q.unsqueeze(0), dim=1, eps=1e-12)


def nearest_neighbours(
    embeddings: Tensor,
    query: int | Tensor,
    k: int = 5,
    *,
    exclude: Iterable[int] = (),
) -> list[tuple[int, float]]:
    """The ``k`` rows most similar to a query by cosine similarity.

    Args:
        embeddings: the vectors, shape ``(V, D)``.
        query: a row index (which is then left out of the answer) or a
            vector of shape ``(D,)``.
        k: how many neighbours to return.
        exclude: more row indices to leave out (e.g. special tokens).

    Returns:
        ``(index, similarity)`` pairs, most similar first.

    Raises:
        TypeError: if ``k``, ``query`` or an index of ``exclude`` is not
            an int.
        ValueError: if ``k`` is below 1, an index of ``exclude`` is not a
            row (negative indices are not allowed), or
            ``embeddings``/``query`` is invalid.
    """
    k = check_int("k", k)
    sims = cosine_similarities(embeddings, query).clone()
    skip = check_token_ids(exclude, sims.shape[0], "exclude")
    if not isinstance(query, Tensor) or query.dim() == 0:
        skip.append(int(query))
    if skip:
        sims[torch.tensor(skip, dtype=torch.long)] = -float("inf")
    k = min(k, int(torch.isfinite(sims).sum()))
    values, indices = sims.topk(k)
    return [(int(i), float(v)) for i, v in zip(indices, values, strict=True)]


def analogy(
    embeddings: Tensor,
    a: int,
    b: int,
    c: int,
    k: int = 1,
    *,
    exclude: Iterable[int] = (),
) -> list[tuple[int, float]]:
    """Solve "``a`` is to ``b`` as ``c`` is to ?" by vector offsets.

    The answer is the row nearest (by cosine) to
    :math:`\\hat v_b - \\hat v_a + \\hat v_c`, where :math:`\\hat v` is a
    vector scaled to unit length, leaving out ``a``, ``b`` and ``c``
    themselves, as in Mikolov et al. (2013a).

    Args:
        embeddings: the vectors, shape ``(V, D)``.
        a: index of the first word of the known pair.
        b: index of the second word of the known pair.
        c: index of the first word of the queried pair.
        k: how many candidates to return.
        exclude: more row indices to leave out.

    Returns:
        ``(index, similarity)`` pairs, best first.

    Raises:
        ValueError: if an index is out of range or ``k`` is below 1.
    """
    emb = F.normalize(_check_embeddings(embeddings), dim=1)
    target = (
        _vector(emb, b, "b") - _vector(emb, a, "a") + _vector(emb, c, "c")
    )
    return nearest_neighbours(
        emb, target, k, exclude=[a, b, c, *exclude]
    )
