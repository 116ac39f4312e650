"""An encoder-only (BERT-style) transformer with a task head."""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor, nn

from .._checks import (
    check_bool,
    check_choice,
    check_ids,
    check_int,
    check_vocab_id,
    skip_inner_checks,
)
from ..heads import ClassificationHead, LMHead, TokenClassificationHead
from ..norm import LayerNorm
from ..positional import LearnedPositionalEmbedding
from ..transformer import Encoder
from ._common import check_config, check_sizes, init_normal

__all__ = ["EncoderConfig", "TransformerEncoderModel"]


@dataclass(frozen=True)
class EncoderConfig:
    """Sizes, padding id and head of a :class:`TransformerEncoderModel`.

    Args:
        d_ff: the feed-forward width; ``None`` means ``4 * d_model``.
        pad_id: hidden from attention and from mean pooling.
        head: ``"classification"``, ``"token"`` or ``"mlm"`` (tied to the
            token embeddings).
        pool: ``"cls"`` or ``"mean"``, for the classification head.
        norm_first: pre-LN with a final norm, instead of BERT's post-LN.
    """

    vocab_size: int
    max_seq_len: int
    d_model: int
    num_heads: int
    num_layers: int
    d_ff: int | None = None
    dropout: float = 0.0
    pad_id: int = 0
    head: str = "classification"
    num_classes: int = 2
    pool: str = "cls"
    norm_first: bool = False

    def __post_init__(self) -> None:
        check_sizes(self, "vocab_size", "max_seq_len", "num_layers")
        check_vocab_id(self, "pad_id", "vocab_size")
        check_choice("head", self.head, ("classification", "token", "mlm"))
        check_int("num_classes", self.num_classes)
        check_choice("pool", self.pool, ("cls", "mean"))
        check_bool("norm_first", self.norm_first)


class TransformerEncoderModel(nn.Module):
    r"""BERT-style encoder (Devlin et al., 2019) with one task head.

    .. math::

        h_0 = \mathrm{LN}(E[x] + P), \qquad
        h_\ell = \mathrm{EncoderLayer}_\ell(h_{\ell-1}), \qquad
        y = \mathrm{head}(h_L)

    GELU layers, padding hidden everywhere, weights ``~ N(0, 0.02^2)``; no
    segment embeddings and no pooler.

    Shape:
        - ids: ``(B, T)``.
        - returns ``(B, num_classes)``, ``(B, T, num_classes)`` or
          ``(B, T, vocab_size)``, by ``config.head``.
    """

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__()
        self.config = c = check_config(config, EncoderConfig)
        self.token_embedding = nn.Embedding(c.vocab_size, c.d_model)
        self.position_embedding = LearnedPositionalEmbedding(c.d_model,
                                                             c.max_seq_len)
        self.embedding_norm = LayerNorm(c.d_model)
        self.dropout = nn.Dropout(c.dropout)
        self.encoder = Encoder(
            c.num_layers, c.d_model, c.num_heads, c.d_ff or 4 * c.d_model,
            dropout=c.dropout, activation="gelu", norm_first=c.norm_first)
        self.head: nn.Module
        if c.head == "classification":
            self.head = ClassificationHead(c.d_model, c.num_classes,
                                           pool=c.pool, dropout=c.dropout)
        elif c.head == "token":
            self.head = TokenClassificationHead(c.d_model, c.num_classes,
                                                dropout=c.dropout)
        else:  # masked language modelling, tied to the input embeddings
            self.head = LMHead(c.d_model, c.vocab_size, bias=True,
                               tied_embedding=self.token_embedding)
        self.reset_parameters()
        skip_inner_checks(self)

    def reset_parameters(self) -> None:
        init_normal(self)

    def encode(self, ids: Tensor) -> tuple[Tensor, Tensor]:
        """The hidden states ``(B, T, d_model)`` and the padding mask
        ``(B, 1, 1, T)``, ``True`` at real tokens."""
        c = self.config
        ids = check_ids("ids", ids, c.vocab_size, c.max_seq_len)
        keep = (ids != c.pad_id)[:, None, None, :]  # (B, T) -> (B, 1, 1, T)
        x = self.position_embedding(self.token_embedding(ids))
        x = self.dropout(self.embedding_norm(x))  # (B, T, d_model)
        return self.encoder(x, keep), keep

    def forward(self, ids: Tensor) -> Tensor:
        hidden, keep = self.encode(ids)
        if isinstance(self.head, ClassificationHead):
            return self.head(hidden, keep)
        return self.head(hidden)
