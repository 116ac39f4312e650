r"""Word2vec: skip-gram and CBOW (Mikolov et al., 2013a) with negative
sampling (Mikolov et al., 2013b). For an input vector :math:`h`, the true
output vector :math:`u_o` and noise vectors :math:`u_1, \ldots, u_K`,

.. math::

    \ell = -\log \sigma(u_o^\top h) - \sum_{k=1}^{K} \log \sigma(-u_k^\top h).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._checks import (
    check_id_tensor,
    check_instance,
    check_int,
    check_integer_tensor,
    check_number,
    check_tensor,
    check_tensor_like,
    check_token_ids,
)

__all__ = [
    "CBOW", "SkipGram", "analogy", "cbow_windows", "cosine_similarities",
    "nearest_neighbours", "negative_sampling_loss", "noise_distribution",
    "skipgram_pairs", "subsample", "train_word2vec"]


def _as_ids(ids: Sequence[int] | Tensor) -> Tensor:
    t = check_tensor_like("ids", ids, "a sequence of int token ids")
    t = t.long() if t.numel() == 0 else t  # [] reads as float32
    return check_integer_tensor("ids", t, "integer token ids", ndim=1).long()


def skipgram_pairs(ids: Sequence[int] | Tensor, window: int) -> Tensor:
    """Every (centre, context) pair of ``ids`` ``(N,)`` at most ``window``
    tokens apart, as rows of a ``(P, 2)`` tensor grouped by offset."""
    t, window = _as_ids(ids), check_int("window", window)
    n = t.numel()
    pairs = [torch.stack([t[max(0, -j) : n - max(0, j)],
                          t[max(0, j) : n - max(0, -j)]], dim=1)
             for j in [*range(-window, 0), *range(1, window + 1)]
             if abs(j) < n]
    return torch.cat(pairs) if pairs else torch.empty(0, 2, dtype=torch.long)


def cbow_windows(ids: Sequence[int] | Tensor,
                 window: int) -> tuple[Tensor, Tensor]:
    """Every full context window and the word at its centre.

    Shape:
        ids ``(N,)``, ``N >= 2 window + 1``; centres ``(N - 2 window,)``,
        contexts ``(N - 2 window, 2 window)``.
    """
    t, window = _as_ids(ids), check_int("window", window)
    if t.numel() < 2 * window + 1:
        raise ValueError(f"ids has {t.numel()} tokens, fewer than 2 * "
                         f"window + 1 = {2 * window + 1}")
    frames = t.unfold(0, 2 * window + 1, 1)  # (N - 2w, 2w + 1)
    contexts = torch.cat([frames[:, :window], frames[:, window + 1 :]], 1)
    return frames[:, window].contiguous(), contexts


def noise_distribution(ids: Sequence[int] | Tensor, vocab_size: int,
                       power: float = 0.75) -> Tensor:
    """The unigram distribution of ``ids`` ``(N,)`` (not empty) to the
    ``power`` 3/4, where negatives come from; shape ``(vocab_size,)``."""
    vocab_size = check_int("vocab_size", vocab_size)
    power = check_number("power", power)
    t = check_id_tensor("ids", _as_ids(ids), vocab_size)
    if t.numel() == 0:
        raise ValueError("ids is empty; no counts to build noise from")
    weights = torch.bincount(t, minlength=vocab_size).double() ** power
    return (weights / weights.sum()).float()


def subsample(ids: Sequence[int] | Tensor, threshold: float = 1e-3, *,
              generator: torch.Generator | None = None) -> Tensor:
    r"""Keep each token with probability :math:`\min(1, \sqrt{t / f})`,
    ``f`` its word's relative frequency in ``ids`` ``(N,)`` and :math:`t`
    the positive ``threshold`` (Mikolov et al., 2013b).
    """
    threshold = check_number(
        "threshold", threshold, minimum=0.0, min_inclusive=False)
    t = _as_ids(ids)
    freq = torch.bincount(t).double()[t] / t.numel()  # (N,); empty for N=0
    draw = torch.rand(t.numel(), generator=generator, dtype=torch.float64)
    return t[draw < (threshold / freq).sqrt()]


def negative_sampling_loss(inputs: Tensor, positives: Tensor,
                           negatives: Tensor) -> Tensor:
    """The negative-sampling loss, averaged over the batch.

    Args:
        inputs: input vectors :math:`h`, shape ``(B, D)``.
        positives: output vectors of the true words, ``(B, D)``.
        negatives: output vectors of the noise words, ``(B, K, D)``.
    """
    pos = (inputs * positives).sum(-1)  # (B,)
    neg = torch.bmm(negatives, inputs.unsqueeze(-1)).squeeze(-1)  # (B, K)
    return (-F.logsigmoid(pos) - F.logsigmoid(-neg).sum(-1)).mean()


class _Word2Vec(nn.Module):
    """Input and output embedding tables, initialised as word2vec does."""

    def __init__(self, vocab_size: int, embedding_dim: int) -> None:
        super().__init__()
        self.vocab_size = check_int("vocab_size", vocab_size)
        self.embedding_dim = check_int("embedding_dim", embedding_dim)
        self.in_embed = nn.Embedding(vocab_size, embedding_dim)
        self.out_embed = nn.Embedding(vocab_size, embedding_dim)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Input vectors uniform in ``±0.5 / D``, output vectors zero."""
        bound = 0.5 / self.embedding_dim
        nn.init.uniform_(self.in_embed.weight, -bound, bound)
        nn.init.zeros_(self.out_embed.weight)

    @property
    def embeddings(self) -> Tensor:
        """The word vectors (the input table), shape ``(V, D)``, detached."""
        return self.in_embed.weight.detach()

    def _check(self, **named: tuple[Tensor, int]) -> None:
        # Each name=(ids, ndim); batch sizes that differ would broadcast.
        for name, (ids, ndim) in named.items():
            check_id_tensor(name, ids, self.vocab_size, ndim=ndim)
        sizes = {name: ids.shape[0] for name, (ids, _) in named.items()}
        if len(set(sizes.values())) > 1:
            shown = ", ".join(f"{k} has {v}" for k, v in sizes.items())
            raise ValueError(f"batch sizes differ: {shown}")


class SkipGram(_Word2Vec):
    """Skip-gram: the centre word's vector predicts each context word.

    Args:
        vocab_size, embedding_dim: ``V`` ids, vectors of size ``D``.

    Shape:
        centre ``(B,)``, context ``(B,)``, negatives ``(B, K)``; the loss.
    """

    def forward(self, centre: Tensor, context: Tensor,
                negatives: Tensor) -> Tensor:
        self._check(centre=(centre, 1), context=(context, 1),
                    negatives=(negatives, 2))
        return negative_sampling_loss(
            self.in_embed(centre), self.out_embed(context),
            self.out_embed(negatives))


class CBOW(_Word2Vec):
    """Continuous bag of words: the mean context vector predicts the centre.

    Args:
        vocab_size, embedding_dim: ``V`` ids, vectors of size ``D``.

    Shape:
        context ``(B, C)``, centre ``(B,)``, negatives ``(B, K)``; the loss.
    """

    def forward(self, context: Tensor, centre: Tensor,
                negatives: Tensor) -> Tensor:
        self._check(context=(context, 2), centre=(centre, 1),
                    negatives=(negatives, 2))
        h = self.in_embed(context).mean(dim=1)  # (B, C, D) -> (B, D)
        return negative_sampling_loss(
            h, self.out_embed(centre), self.out_embed(negatives))


def train_word2vec(model: SkipGram | CBOW, ids: Sequence[int] | Tensor, *,
                   window: int = 2, num_negatives: int = 5,
                   batch_size: int = 1024, epochs: int = 1, lr: float = 0.01,
                   generator: torch.Generator | None = None) -> list[float]:
    """Train a skip-gram or CBOW model with Adam; return each step's loss.

    Args:
        model, ids: the model, trained in place, and ids ``(N,)``.
        num_negatives: noise words per example, drawn from
            :func:`noise_distribution` (a true word may be drawn too).
        batch_size, epochs, lr: examples per step, passes, Adam's rate.
    """
    check_instance("model", model, (SkipGram, CBOW), "a SkipGram or CBOW")
    K = check_int("num_negatives", num_negatives)
    batch_size = check_int("batch_size", batch_size)
    epochs = check_int("epochs", epochs)
    lr = check_number("lr", lr, minimum=0.0, min_inclusive=False)
    noise = noise_distribution(ids, model.vocab_size)
    if isinstance(model, SkipGram):
        inputs, targets = skipgram_pairs(ids, window).unbind(1)
    else:
        targets, inputs = cbow_windows(ids, window)
    device = model.in_embed.weight.device
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    losses: list[float] = []
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(targets), generator=generator)
        for idx in order.split(batch_size):
            negatives = torch.multinomial(
                noise, len(idx) * K, True, generator=generator
            ).view(len(idx), K)  # (B * K,) -> (B, K)
            # SkipGram(centre, context, ...), CBOW(context, centre, ...)
            loss = model(inputs[idx].to(device), targets[idx].to(device),
                         negatives.to(device))
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
            losses.append(loss.item())
    return losses


def _row(embeddings: Tensor, query: int | Tensor, name: str) -> Tensor:
    if isinstance(query, Tensor) and query.dim() == 1:
        return query.detach().float()
    i = check_int(name, query, minimum=0)
    if i >= len(embeddings):
        raise ValueError(f"{name}={i} is outside range({len(embeddings)})")
    return embeddings[i]


def cosine_similarities(embeddings: Tensor, query: int | Tensor) -> Tensor:
    """Cosine similarity of every row of ``embeddings`` to a query.

    Args:
        embeddings: the vectors, shape ``(V, D)``; the result is ``(V,)``.
        query: a row index, or a vector of shape ``(D,)``.
    """
    emb = check_tensor("embeddings", embeddings, ndim=2).detach().float()
    q = _row(emb, query, "query")
    return F.cosine_similarity(emb, q.unsqueeze(0), dim=1, eps=1e-12)


def nearest_neighbours(embeddings: Tensor, query: int | Tensor, k: int = 5, *,
                       exclude: Iterable[int] = ()) -> list[tuple[int, float]]:
    """The ``k`` rows most similar to a query, as ``(index, cosine)``.

    Args:
        embeddings: the vectors, shape ``(V, D)``.
        query: a row index (left out of the answer) or a vector ``(D,)``.
        exclude: more row indices to leave out.
    """
    k = check_int("k", k)
    sims = cosine_similarities(embeddings, query).clone()
    skip = check_token_ids(exclude, len(sims), "exclude")
    if not isinstance(query, Tensor) or query.dim() == 0:
        skip.append(int(query))
    sims[skip] = -float("inf")
    values, indices = sims.topk(min(k, int(torch.isfinite(sims).sum())))
    return list(zip(indices.tolist(), values.tolist(), strict=True))


def analogy(embeddings: Tensor, a: int, b: int, c: int, k: int = 1, *,
            exclude: Iterable[int] = ()) -> list[tuple[int, float]]:
    r"""Solve "a is to b as c is to ?" by vector offsets (Mikolov et al.,
    2013a): the rows nearest :math:`\hat v_b - \hat v_a + \hat v_c`.

    Args:
        embeddings: the vectors, shape ``(V, D)``.
        exclude: more row indices to leave out (``a``, ``b``, ``c`` are).
    """
    emb = F.normalize(check_tensor("embeddings", embeddings, ndim=2)
                      .detach().float(), dim=1)
    target = _row(emb, b, "b") - _row(emb, a, "a") + _row(emb, c, "c")
    return nearest_neighbours(emb, target, k, exclude=[a, b, c, *exclude])
