"""An encoder-only (BERT-style) transformer with a task head.

Token and learned position embeddings, a LayerNorm over their sum, a stack
of post-LN encoder layers with GELU feed-forward networks and no causal
mask (every token sees every real token, in both directions), and one of
three heads from :mod:`transformer_book.heads` (Devlin et al., 2019):

- ``"classification"``: one label per sequence, from the first position
  (``[CLS]``) or the mean over real tokens;
- ``"token"``: one label per token;
- ``"mlm"``: masked language modelling, vocabulary scores at every
  position from a head tied to the token embeddings (train it on the
  output of :func:`~transformer_book.heads.mask_tokens`).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor, nn

from .._checks import check_bool, check_choice, check_int
from .._docs import shared_doc
from ..heads import ClassificationHead, LMHead, TokenClassificationHead
from ..layers import LayerNorm
from ..positional import LearnedPositionalEmbedding
from ._common import (
    VOCAB_ARGS,
    ModelSizes,
    check_config,
    check_pad_id,
    check_sequences,
    gelu_encoder,
    init_normal,
    key_padding_mask,
)

__all__ = ["EncoderConfig", "TransformerEncoderModel"]

_HEADS = ("classification", "token", "mlm")
_POOLS = ("cls", "mean")


@dataclass(frozen=True)
@shared_doc(vocab_args=VOCAB_ARGS)
class EncoderConfig(ModelSizes):
    """Sizes, padding id and head of a :class:`TransformerEncoderModel`.

    Args:
        {vocab_args}
        d_model: width of the model.
        num_heads: attention heads per layer; must divide ``d_model``.
        num_layers: number of encoder layers.
        d_ff: width of the feed-forward hidden layer; ``None`` means
            ``4 * d_model`` (BERT), and the config then holds that number.
        dropout: dropout on the embeddings, the attention weights, each
            residual branch and before the head (training mode only).
        pad_id: id of padding; those positions are hidden from attention
            and from mean pooling.
        head: ``"classification"``, ``"token"`` or ``"mlm"``.
        num_classes: number of labels of the classification and token
            heads (unused by ``"mlm"``).
        pool: ``"cls"`` or ``"mean"``, for the classification head.
        norm_first: pre-LN layers and a final LayerNorm instead of BERT's
            post-LN (``False``).

    Raises:
        TypeError: if a size or id is not an int or a flag not a bool.
        ValueError: if a size is below 1, ``dropout`` is outside
            ``[0, 1)``, ``num_heads`` does not divide ``d_model``,
            ``pad_id`` is outside the vocabulary, or ``head`` or ``pool``
            is unknown.
    """

    pad_id: int = 0
    head: str = "classification"
    num_classes: int = 2
    pool: str = "cls"
    norm_first: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        check_pad_id(self, "vocab_size")
        check_choice("head", self.head, _HEADS)
        check_int("num_classes", self.num_classes)
        check_choice("pool", self.pool, _POOLS)
        check_bool("norm_first", self.norm_first)


class TransformerEncoderModel(nn.Module):
    r"""BERT-style encoder with a classification, token or MLM head.

    .. math::

        h_0 &= \mathrm{LayerNorm}(E[x] + P) \\
        h_\ell &= \mathrm{EncoderLayer}_\ell(h_{\ell-1}),
            \quad \ell = 1, \dots, L \\
        \text{logits} &= \mathrm{head}(h_L)

    Padding (``pad_id``) is hidden from every attention and from mean
    pooling, so appending padding does not change a real token's output.
    Every linear and embedding weight starts ``~ N(0, 0.02^2)`` with zero
    biases (BERT's initialisation).

    Compared with BERT, the model has no segment (token-type) embeddings
    and no pooler (BERT's dense ``tanh`` layer on ``[CLS]``), and the MLM
    head is one tied linear map with a bias (BERT adds a dense layer,
    GELU and a LayerNorm before it).

    Args:
        config: the model's sizes, padding id and head.

    Shape:
        - ids: ``(B, T)`` token ids with ``T <= max_seq_len``.
        - returns ``(B, num_classes)`` (``"classification"``),
          ``(B, T, num_classes)`` (``"token"``) or
          ``(B, T, vocab_size)`` (``"mlm"``).

    Raises:
        TypeError: if ``config`` is not an :class:`EncoderConfig`.

    Example:
        >>> import torch
        >>> config = EncoderConfig(vocab_size=30, max_seq_len=8, d_model=16,
        ...                        num_heads=2, num_layers=1, num_classes=3)
        >>> ids = torch.tensor([[5, 6, 7, 0], [8, 9, 0, 0]])
        >>> TransformerEncoderModel(config)(ids).shape
        torch.Size([2, 3])
    """

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__()
        self.config = c = check_config(config, EncoderConfig)
        self.token_embedding = nn.Embedding(c.vocab_size, c.d_model)
        self.position_embedding = LearnedPositionalEmbedding(
            c.d_model, c.max_seq_len
        )
        self.embedding_norm = LayerNorm(c.d_model)
        self.dropout = nn.Dropout(c.dropout)
        self.encoder = gelu_encoder(c, norm_first=c.norm_first)
        self.head: nn.Module
        if c.head == "classification":
            self.head = ClassificationHead(
                c.d_model, c.num_classes, pool=c.pool, dropout=c.dropout
            )
        elif c.head == "token":
            self.head = TokenClassificationHead(
                c.d_model, c.num_classes, dropout=c.dropout
            )
        else:
            self.head = LMHead(
                c.d_model,
                c.vocab_size,
                tied_embedding=self.token_embedding,
                bias=True,
            )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """BERT's initialisation: ``N(0, 0.02^2)`` weights, zero biases."""
        init_normal(self)

    def encode(self, ids: Tensor) -> tuple[Tensor, Tensor]:
        """The final hidden states and the padding mask.

        Args:
            ids: token ids ``(B, T)``.

        Returns:
            ``(hidden, keep)``: hidden states ``(B, T, d_model)`` and the
            mask ``(B, 1, 1, T)``, ``True`` at real tokens.

        Raises:
            TypeError, ValueError: as :meth:`forward`.
        """
        c = self.config
        ids = check_sequences("ids", ids, c.vocab_size, c.max_seq_len)
        keep = key_padding_mask(ids, c.pad_id)  # (B, 1, 1, T)
        x = self.position_embedding(self.token_embedding(ids))  # (B, T, D)
        x = self.dropout(self.embedding_norm(x))
        return self.encoder(x, keep), keep

    def forward(self, ids: Tensor) -> Tensor:
        """Logits of the configured head.

        Args:
            ids: token ids, padded with ``pad_id``.

        Returns:
            ``(B, num_classes)``, ``(B, T, num_classes)`` or
            ``(B, T, vocab_size)``, by ``config.head``.

        Raises:
            TypeError: if ``ids`` is not an integer tensor.
            ValueError: if ``ids`` is not ``(B, T)``, an id is outside the
                vocabulary, or ``T > max_seq_len``; with ``pool="cls"``, if
                position 0 is padding; with ``pool="mean"``, if a row is all
                padding.
        """
        hidden, keep = self.encode(ids)
        if isinstance(self.head, ClassificationHead):
            return self.head(hidden, keep)
        return self.head(hidden)
