"""Task heads on a transformer's hidden states ``(B, T, d_model)``."""

from __future__ import annotations

from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._checks import (
    check_choice,
    check_features,
    check_instance,
    check_int,
    check_probability,
    check_shape,
)

__all__ = ["IGNORE_INDEX", "ClassificationHead", "LMHead",
           "TokenClassificationHead"]

#: The label of positions a loss skips (``F.cross_entropy``'s default).
IGNORE_INDEX = -100


class _Head(nn.Module):
    """The entry check of ``x``; ``check_inputs`` is off inside a model."""

    d_model: int
    check_inputs = True

    def _check(self, x: Any, ndim: int | None = None) -> Tensor:
        if self.check_inputs:
            check_features("x", x, self.d_model, ndim=ndim)
        return x


def _token_mask(mask: Any, x: Tensor, pool: str) -> Tensor:
    """A ``(B, T)`` or ``(B, 1, 1, T)`` padding mask as ``(B, T)``."""
    B, T = x.shape[:2]
    if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
        raise TypeError(
            f"padding_mask must be a bool tensor (True = real token), got "
            f"{getattr(mask, 'dtype', type(mask).__name__)}")
    if mask.shape not in ((B, T), (B, 1, 1, T)):
        raise ValueError(f"padding_mask has shape {tuple(mask.shape)}, "
                         f"expected (B, T) = ({B}, {T}) or (B, 1, 1, T)")
    mask = mask.reshape(B, T).to(x.device)
    # A value check, on a CPU only: on a GPU it would wait for the device.
    needed = mask[:, 0] if pool == "cls" else mask.any(dim=1)
    if mask.device.type == "cpu" and not bool(needed.all()):
        what = ("marks position 0 as padding" if pool == "cls"
                else "has a row with no real token")
        raise ValueError(f"padding_mask {what}, which pool={pool!r} reads")
    return mask


class ClassificationHead(_Head):
    r"""One label per sequence: :math:`W\, \mathrm{pool}(h) + b`.

    ``pool="cls"`` reads position 0 (BERT's ``[CLS]``, Devlin et al., 2019);
    ``"mean"`` averages the real tokens and ``"max"`` takes each feature's
    largest value over them. There is no ``tanh`` pooler.

    Shape:
        - x: ``(B, T, d_model)``.
        - padding_mask: ``(B, T)`` or ``(B, 1, 1, T)``, ``True`` at real
          tokens, or ``None``.
        - returns ``(B, num_classes)``.
    """

    def __init__(self, d_model: int, num_classes: int, *, pool: str = "cls",
                 dropout: float = 0.0) -> None:
        super().__init__()
        self.d_model = check_int("d_model", d_model)
        self.pool = check_choice("pool", pool, ("cls", "mean", "max"))
        self.dropout = nn.Dropout(check_probability("dropout", dropout))
        self.proj = nn.Linear(d_model, check_int("num_classes", num_classes))

    def pooled(self, x: Tensor, padding_mask: Tensor | None = None) -> Tensor:
        """The pooled vector ``(B, d_model)`` that ``proj`` reads."""
        self._check(x, ndim=3)
        mask = None if padding_mask is None else _token_mask(
            padding_mask, x, self.pool)
        if self.pool == "cls":
            return x[:, 0]
        if self.pool == "max":  # padding becomes -inf, never the largest
            kept = x if mask is None else x.masked_fill(
                ~mask[..., None], float("-inf"))
            return kept.amax(dim=1)  # (B, d_model)
        if mask is None:
            return x.mean(dim=1)
        # where, not multiply: padding may hold inf or NaN.
        summed = x.where(mask[..., None], 0.0).sum(dim=1)  # (B, d_model)
        return summed / mask.sum(dim=1, keepdim=True).to(x.dtype)

    def forward(self, x: Tensor, padding_mask: Tensor | None = None) -> Tensor:
        return self.proj(self.dropout(self.pooled(x, padding_mask)))


class TokenClassificationHead(_Head):
    """One label per token: dropout, then one ``nn.Linear`` at each position.

    Shape:
        - x: ``(B, T, d_model)``; returns ``(B, T, num_classes)``.
    """

    def __init__(self, d_model: int, num_classes: int, *,
                 dropout: float = 0.0) -> None:
        super().__init__()
        self.d_model = check_int("d_model", d_model)
        self.dropout = nn.Dropout(check_probability("dropout", dropout))
        self.proj = nn.Linear(d_model, check_int("num_classes", num_classes))

    def forward(self, x: Tensor) -> Tensor:
        return self.proj(self.dropout(self._check(x, ndim=3)))


class LMHead(_Head):
    r"""Vocabulary scores :math:`W h_t (+ b)` at every position.

    With ``tied_embedding``, :math:`W` is that embedding's weight, the same
    parameter (Press and Wolf, 2017; GPT-2, BERT).

    Shape:
        - x: ``(..., d_model)``; returns ``(..., vocab_size)``.
    """

    def __init__(self, d_model: int, vocab_size: int, *,
                 tied_embedding: nn.Embedding | None = None,
                 bias: bool = False) -> None:
        super().__init__()
        self.d_model = check_int("d_model", d_model)
        self.vocab_size = check_int("vocab_size", vocab_size)
        self.tied = tied_embedding is not None
        if tied_embedding is None:
            self.weight = nn.Parameter(torch.empty(vocab_size, d_model))
        else:  # the same Parameter, shared, not copied
            check_instance("tied_embedding", tied_embedding, nn.Embedding,
                           "an nn.Embedding")
            self.weight = cast(nn.Parameter, check_shape(
                "tied_embedding.weight", tied_embedding.weight,
                (vocab_size, d_model), "(vocab_size, d_model)"))
        self.bias = nn.Parameter(torch.empty(vocab_size)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """As ``nn.Linear``; a tied weight is left alone."""
        if not self.tied:
            bound = self.d_model**-0.5
            nn.init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(self._check(x), self.weight, self.bias)
