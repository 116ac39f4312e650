"""Task heads: what sits on top of a transformer's final hidden states.

A transformer turns ``B`` sequences of ``T`` tokens into hidden states of
shape ``(B, T, d_model)``. A head maps them to what a task asks for:

- :class:`ClassificationHead`: one label per sequence, from the first
  position (the ``[CLS]`` token of BERT, Devlin et al., 2019) or from the
  mean over the real tokens;
- :class:`TokenClassificationHead`: one label per token (tagging);
- :class:`LMHead`: a score for every vocabulary entry at every position,
  optionally sharing its weight with the input embedding (weight tying,
  Press and Wolf, 2017);
- :func:`mask_tokens`: BERT's masked-language-modelling corruption, which
  makes the inputs and labels an :class:`LMHead` learns from.

Padding masks follow :mod:`transformer_book.masks`: ``True`` marks a real
token, and both ``(B, T)`` and the package's ``(B, 1, 1, T)`` are accepted.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._checks import (
    check_choice,
    check_id_tensor,
    check_int,
    check_number,
    check_probability,
    check_tensor,
)
from ._docs import shared_doc

__all__ = [
    "IGNORE_INDEX",
    "ClassificationHead",
    "LMHead",
    "TokenClassificationHead",
    "mask_tokens",
]

#: The label of positions a loss skips (``F.cross_entropy``'s default).
IGNORE_INDEX = -100

_POOLS = ("cls", "mean")

# The Args of ClassificationHead.pooled and .forward.
_POOL_ARGS = """
Args:
    x: hidden states.
    padding_mask: ``True`` at real tokens; ``None`` when every
        position is real.
"""


def _check_features(x: Any, d_model: int) -> Tensor:
    """``x`` must be a float ``(B, T, d_model)`` tensor."""
    check_tensor("x", x, ndim=3, floating=True)
    if x.shape[-1] != d_model:
        raise ValueError(
            f"x has feature size {x.shape[-1]}, expected d_model={d_model}"
        )
    return x


def _token_mask(padding_mask: Any, batch: int, length: int) -> Tensor:
    """A checked ``(B, T)`` bool mask from ``(B, T)`` or ``(B, 1, 1, T)``."""
    check_tensor("padding_mask", padding_mask, ndim=(2, 4))
    if padding_mask.dtype != torch.bool:
        raise TypeError(
            "padding_mask must be a bool tensor (True = real token), got "
            f"{padding_mask.dtype}"
        )
    if padding_mask.ndim == 4:
        if padding_mask.shape[1:3] != (1, 1):
            raise ValueError(
                "padding_mask must be (B, T) or (B, 1, 1, T), got shape "
                f"{tuple(padding_mask.shape)}"
            )
        padding_mask = padding_mask[:, 0, 0]  # (B, 1, 1, T) -> (B, T)
    if padding_mask.shape != (batch, length):
        raise ValueError(
            f"padding_mask has shape {tuple(padding_mask.shape)}, expected "
            f"(B, T) = ({batch}, {length}) like x"
        )
    return padding_mask


class ClassificationHead(nn.Module):
    r"""One label per sequence: pool the hidden states, then a linear map.

    .. math::

        \text{logits} = W\, \mathrm{pool}(h_1, \dots, h_T) + b

    where ``pool="cls"`` takes :math:`h_1`, the state at position 0 (BERT
    puts a ``[CLS]`` token there and trains it to summarise the sequence,
    Devlin et al., 2019), and ``pool="mean"`` averages the states of the
    real tokens, so padding never changes the result. BERT also passes the
    ``[CLS]`` state through a dense layer with ``tanh`` (its *pooler*)
    before the classifier; this head does not.

    Args:
        d_model: width of the hidden states.
        num_classes: number of labels.
        pool: ``"cls"`` (position 0) or ``"mean"`` (over the positions the
            padding mask allows).
        dropout: dropout on the pooled vector (training mode only).

    Shape:
        - x: ``(B, T, d_model)``.
        - padding_mask: ``(B, T)`` or ``(B, 1, 1, T)``, bool, ``True`` at
          real tokens.
        - returns ``(B, num_classes)``.

    Example:
        >>> head = ClassificationHead(8, 3, pool="mean")
        >>> head(torch.randn(2, 5, 8)).shape
        torch.Size([2, 3])
    """

    def __init__(
        self,
        d_model: int,
        num_classes: int,
        *,
        pool: str = "cls",
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.d_model = check_int("d_model", d_model)
        self.num_classes = check_int("num_classes", num_classes)
        self.pool = check_choice("pool", pool, _POOLS)
        self.dropout = nn.Dropout(check_probability("dropout", dropout))
        self.proj = nn.Linear(d_model, num_classes)

    def extra_repr(self) -> str:
        return f"pool={self.pool!r}"

    @shared_doc(pool_args=_POOL_ARGS)
    def pooled(self, x: Tensor, padding_mask: Tensor | None = None) -> Tensor:
        """The pooled vector of each sequence, before the linear map.

        {pool_args}

        Shape:
            - x: ``(B, T, d_model)``; returns ``(B, d_model)``.

        Raises:
            TypeError: if ``x`` is not a float tensor or ``padding_mask``
                not a bool tensor.
            ValueError: if ``x`` is not ``(B, T, d_model)``, the mask's
                shape does not match, or (for ``"cls"``) position 0 is
                padding or (for ``"mean"``) a row has no real token.
        """
        _check_features(x, self.d_model)
        B, T, _ = x.shape
        mask = None
        if padding_mask is not None:
            mask = _token_mask(padding_mask, B, T).to(x.device)
        if self.pool == "cls":
            if mask is not None and not bool(mask[:, 0].all()):
                raise ValueError(
                    "padding_mask marks position 0 as padding; pool='cls' "
                    "reads position 0, which must be a real token"
                )
            return x[:, 0]
        if mask is None:
            return x.mean(dim=1)
        counts = mask.sum(dim=1, keepdim=True)  # (B, 1)
        if not bool((counts > 0).all()):
            raise ValueError(
                "padding_mask has a row with no real token; pool='mean' "
                "needs at least one per row"
            )
        # where, not multiply: padding may hold inf or NaN.
        summed = x.where(mask[:, :, None], 0.0).sum(dim=1)  # (B, d_model)
        return summed / counts.to(x.dtype)

    @shared_doc(pool_args=_POOL_ARGS)
    def forward(self, x: Tensor, padding_mask: Tensor | None = None) -> Tensor:
        """Pool each sequence and score the classes.

        {pool_args}

        Returns:
            Logits ``(B, num_classes)``.

        Raises:
            TypeError, ValueError: as :meth:`pooled`.
        """
        return self.proj(self.dropout(self.pooled(x, padding_mask)))


class TokenClassificationHead(nn.Module):
    """One label per token: the same linear map at every position.

    Used for tagging (named entities, parts of speech): BERT's hidden
    state of each token goes through dropout and one ``nn.Linear``.

    Args:
        d_model: width of the hidden states.
        num_classes: number of labels.
        dropout: dropout on the hidden states (training mode only).

    Shape:
        - x: ``(B, T, d_model)``.
        - returns ``(B, T, num_classes)``.

    Example:
        >>> head = TokenClassificationHead(8, 5)
        >>> head(torch.randn(2, 4, 8)).shape
        torch.Size([2, 4, 5])
    """

    def __init__(
        self, d_model: int, num_classes: int, *, dropout: float = 0.0
    ) -> None:
        super().__init__()
        self.d_model = check_int("d_model", d_model)
        self.num_classes = check_int("num_classes", num_classes)
        self.dropout = nn.Dropout(check_probability("dropout", dropout))
        self.proj = nn.Linear(d_model, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        """Score every label at every position.

        Args:
            x: hidden states.

        Returns:
            Logits ``(B, T, num_classes)``.

        Raises:
            TypeError: if ``x`` is not a float tensor.
            ValueError: if ``x`` is not ``(B, T, d_model)``.
        """
        _check_features(x, self.d_model)
        return self.proj(self.dropout(x))


class LMHead(nn.Module):
    r"""Vocabulary scores at every position, optionally tied to the input.

    .. math::

        \text{logits}_t = W h_t \;(+\, b), \qquad W \in
        \mathbb{R}^{V \times d_{\text{model}}}

    With ``tied_embedding``, :math:`W` *is* the embedding table
    :math:`E` of that ``nn.Embedding`` (the same ``nn.Parameter``, so one
    gradient updates both uses and the model stores
    :math:`V d_{\text{model}}` fewer numbers): a token's output score is
    the dot product of the hidden state with that token's input vector
    (Press and Wolf, 2017; GPT-2 and BERT both do this).

    Args:
        d_model: width of the hidden states.
        vocab_size: number of tokens ``V``.
        tied_embedding: an ``nn.Embedding(vocab_size, d_model)`` whose
            weight this head reuses; ``None`` for a weight of its own.
        bias: add a learned bias per token (BERT's MLM head has one,
            GPT-2's LM head does not).

    Shape:
        - x: ``(..., d_model)``.
        - returns ``(..., vocab_size)``.

    Example:
        >>> embed = nn.Embedding(10, 4)
        >>> head = LMHead(4, 10, tied_embedding=embed)
        >>> head.weight is embed.weight
        True
    """

    def __init__(
        self,
        d_model: int,
        vocab_size: int,
        *,
        tied_embedding: nn.Embedding | None = None,
        bias: bool = False,
    ) -> None:
        super().__init__()
        self.d_model = check_int("d_model", d_model)
        self.vocab_size = check_int("vocab_size", vocab_size)
        if tied_embedding is None:
            self.weight = nn.Parameter(torch.empty(vocab_size, d_model))
        else:
            if not isinstance(tied_embedding, nn.Embedding):
                raise TypeError(
                    "tied_embedding must be an nn.Embedding, got "
                    f"{type(tied_embedding).__name__}"
                )
            shape = tuple(tied_embedding.weight.shape)
            if shape != (vocab_size, d_model):
                raise ValueError(
                    f"tied_embedding has weight shape {shape}, expected "
                    f"(vocab_size, d_model) = ({vocab_size}, {d_model})"
                )
            # The same Parameter, shared, not copied.
            self.weight = cast(nn.Parameter, tied_embedding.weight)
        self.tied = tied_embedding is not None
        self.bias = nn.Parameter(torch.empty(vocab_size)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Initialise as ``nn.Linear`` does; a tied weight is left alone."""
        if not self.tied:
            # nn.Linear's default: kaiming-uniform with a = sqrt(5).
            bound = self.d_model**-0.5
            nn.init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, vocab_size={self.vocab_size}, "
            f"tied={self.tied}, bias={self.bias is not None}"
        )

    def forward(self, x: Tensor) -> Tensor:
        """Score every token of the vocabulary.

        Args:
            x: hidden states.

        Returns:
            Logits ``(..., vocab_size)``.

        Raises:
            TypeError: if ``x`` is not a float tensor.
            ValueError: if its last dimension is not ``d_model``.
        """
        check_tensor("x", x, floating=True)
        if x.ndim < 1 or x.shape[-1] != self.d_model:
            raise ValueError(
                f"x has shape {tuple(x.shape)}, expected last dimension "
                f"d_model={self.d_model}"
            )
        return F.linear(x, self.weight, self.bias)


def mask_tokens(
    ids: Tensor,
    *,
    mask_id: int,
    vocab_size: int,
    prob: float = 0.15,
    special_ids: Iterable[int] = (),
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """Corrupt token ids for masked language modelling (BERT's recipe).

    Each position whose id is not special is *chosen* independently with
    probability ``prob``. Of the chosen positions, 80% become ``mask_id``,
    10% a random non-special token and 10% keep their token (Devlin et
    al., 2019, section 3.1): the model must predict every chosen token,
    and since it cannot tell which unmasked tokens were chosen, it keeps a
    good representation of every token, not only of ``[MASK]``.

    ``mask_id`` counts as special whether or not it is in ``special_ids``:
    it is never chosen and never drawn as a random replacement. A random
    replacement may draw the original token again, so slightly more than
    10% of the chosen positions keep their token (``1/n`` of the random
    10%, with ``n`` the number of non-special ids).

    Args:
        ids: token ids, any shape (usually ``(B, T)``).
        mask_id: the id of the ``[MASK]`` token.
        vocab_size: the number of ids; every id is in
            ``range(vocab_size)``.
        prob: the probability of choosing a non-special position.
        special_ids: ids never chosen nor drawn (padding, ``[CLS]``,
            ``[SEP]``...).
        generator: the random generator (on ``ids``'s device), for
            reproducible masks.

    Shape:
        - ids: any shape; returns two tensors of that shape.

    Returns:
        ``(inputs, labels)``: the corrupted ids, and the original id at the
        chosen positions with ``-100`` (:data:`IGNORE_INDEX`, skipped by
        ``F.cross_entropy``) everywhere else. Both ``torch.long``.

    Raises:
        TypeError: if ``ids`` is not an integer tensor, or an id argument
            not an int.
        ValueError: if an id is outside the vocabulary, ``prob`` is outside
            ``[0, 1]``, or every id is special.

    Example:
        >>> g = torch.Generator().manual_seed(0)
        >>> ids = torch.randint(5, 100, (2, 50), generator=g)
        >>> inputs, labels = mask_tokens(
        ...     ids, mask_id=4, vocab_size=100, special_ids=(0, 1, 2, 3),
        ...     generator=g)
        >>> bool(((labels == -100) | (labels == ids)).all())
        True
    """
    vocab_size = check_int("vocab_size", vocab_size)
    check_id_tensor("ids", ids, vocab_size)
    mask_id = _check_id("mask_id", mask_id, vocab_size)
    prob = check_number("prob", prob, minimum=0.0, maximum=1.0)
    special = {mask_id}
    for i, value in enumerate(special_ids):
        special.add(_check_id(f"special_ids[{i}]", value, vocab_size))
    if len(special) >= vocab_size:
        raise ValueError(
            f"every id of the vocabulary (vocab_size={vocab_size}) is "
            "special; no token can be chosen or drawn"
        )
    device = ids.device
    is_special = torch.zeros(vocab_size, dtype=torch.bool, device=device)
    is_special[sorted(special)] = True
    ids = ids.long()

    chosen = (
        torch.rand(ids.shape, generator=generator, device=device) < prob
    ) & ~is_special[ids]
    # One more draw splits the chosen: [0, 0.8) mask, [0.8, 0.9) random.
    split = torch.rand(ids.shape, generator=generator, device=device)
    to_mask = chosen & (split < 0.8)
    to_random = chosen & (split >= 0.8) & (split < 0.9)
    allowed = (~is_special).nonzero().squeeze(1)  # the non-special ids
    draws = torch.randint(
        len(allowed), ids.shape, generator=generator, device=device
    )
    inputs = ids.masked_fill(to_mask, mask_id)
    inputs = inputs.where(~to_random, allowed[draws])
    labels = ids.masked_fill(~chosen, IGNORE_INDEX)
    return inputs, labels


def _check_id(name: str, value: Any, vocab_size: int) -> int:
    value = check_int(name, value, minimum=0)
    if value >= vocab_size:
        raise ValueError(
            f"{name}={value} is outside the vocabulary "
            f"(vocab_size={vocab_size})"
        )
    return value
