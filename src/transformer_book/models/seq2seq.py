"""The encoder-decoder transformer of Vaswani et al. (2017), with its masks.

:class:`~transformer_book.layers.Transformer` is the bare stack (the twin of
``nn.Transformer``): it takes embedded sequences and the masks its caller
built. :class:`Seq2SeqTransformer` is the whole model: token embeddings
scaled by :math:`\\sqrt{d_{\\text{model}}}`, sinusoidal positions, the stack,
and a generator that scores the target vocabulary, and it builds every mask
from the token ids itself:

- the encoder's self-attention hides source padding;
- the decoder's self-attention is causal and hides target padding;
- the cross-attention hides source padding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from torch import Tensor, nn

from .._checks import check_bool, check_probability
from ..heads import LMHead
from ..layers import Transformer
from ..positional import SinusoidalPositionalEncoding
from ._common import (
    check_config,
    check_model_sizes,
    check_pad_id,
    check_sequences,
    key_padding_mask,
    resolve_d_ff,
    resolved_d_ff,
)

__all__ = ["Seq2SeqTransformer", "Seq2SeqTransformerConfig"]


@dataclass(frozen=True)
class Seq2SeqTransformerConfig:
    """Sizes and padding id of a :class:`Seq2SeqTransformer`.

    Args:
        src_vocab_size: source ids are in ``range(src_vocab_size)``.
        tgt_vocab_size: target ids are in ``range(tgt_vocab_size)``.
        max_seq_len: the longest source or target the model accepts.
        d_model: width of the model.
        num_heads: attention heads per layer; must divide ``d_model``.
        num_encoder_layers: layers of the encoder.
        num_decoder_layers: layers of the decoder.
        d_ff: width of the feed-forward hidden layer; ``None`` means
            ``4 * d_model``, and the config then holds that number (the
            paper's base model has 512 and 2048).
        dropout: dropout on the embeddings, the attention weights and each
            residual branch (training mode only).
        pad_id: id of padding in both vocabularies; those positions are
            hidden from every attention.
        norm_first: pre-LN layers (``True``, easier to train, Xiong et al.,
            2020) or the paper's post-LN (``False``).
        tie_weights: the generator reuses the target-embedding matrix
            (Vaswani et al., 2017, section 3.4).

    Raises:
        TypeError: if a size or id is not an int or a flag not a bool.
        ValueError: if a size is below 1, ``dropout`` is outside
            ``[0, 1)``, ``num_heads`` does not divide ``d_model``, or
            ``pad_id`` is outside a vocabulary.
    """

    src_vocab_size: int
    tgt_vocab_size: int
    max_seq_len: int
    d_model: int
    num_heads: int
    num_encoder_layers: int
    num_decoder_layers: int
    d_ff: int | None = None
    dropout: float = 0.0
    pad_id: int = 0
    norm_first: bool = True
    tie_weights: bool = True

    def __post_init__(self) -> None:
        check_model_sizes(
            self,
            "src_vocab_size",
            "tgt_vocab_size",
            "num_encoder_layers",
            "num_decoder_layers",
        )
        resolve_d_ff(self)
        check_probability("dropout", self.dropout)
        check_pad_id(self, "src_vocab_size", "tgt_vocab_size")
        check_bool("norm_first", self.norm_first)
        check_bool("tie_weights", self.tie_weights)


class Seq2SeqTransformer(nn.Module):
    r"""Encoder-decoder transformer for sequence-to-sequence tasks.

    .. math::

        m &= \mathrm{Encoder}(\sqrt{D}\, E_s[x] + \mathrm{PE}) \\
        \text{logits} &= \mathrm{Decoder}(\sqrt{D}\, E_t[y] + \mathrm{PE},
            m)\, W_g^\top + b_g

    with :math:`W_g = E_t` when ``tie_weights``. The embeddings start
    ``~ N(0, 1/D)``, so that after the :math:`\sqrt{D}` scale a token
    vector has about the size of a sinusoidal position vector. ReLU
    feed-forward networks, as in the paper.

    Training uses teacher forcing: ``tgt`` is the target shifted right
    (``<bos>`` first), and the logits at position ``t`` score the target's
    token ``t``. :meth:`encode` and :meth:`decode` split the forward pass
    for step-by-step generation.

    Args:
        config: the model's sizes and padding id.

    Shape:
        - src: ``(B, S)``, tgt: ``(B, T)`` token ids, padded with
          ``pad_id``, with ``S, T <= max_seq_len``.
        - returns ``(B, T, tgt_vocab_size)``.

    Raises:
        TypeError: if ``config`` is not a
            :class:`Seq2SeqTransformerConfig`.
    """

    def __init__(self, config: Seq2SeqTransformerConfig) -> None:
        super().__init__()
        self.config = c = check_config(config, Seq2SeqTransformerConfig)
        self.src_embedding = nn.Embedding(c.src_vocab_size, c.d_model)
        self.tgt_embedding = nn.Embedding(c.tgt_vocab_size, c.d_model)
        self.positional = SinusoidalPositionalEncoding(
            c.d_model, c.max_seq_len, dropout=c.dropout
        )
        self.transformer = Transformer(
            c.d_model,
            c.num_heads,
            c.num_encoder_layers,
            c.num_decoder_layers,
            resolved_d_ff(c),
            dropout=c.dropout,
            norm_first=c.norm_first,
        )
        self.generator = LMHead(
            c.d_model,
            c.tgt_vocab_size,
            tied_embedding=self.tgt_embedding if c.tie_weights else None,
            bias=True,
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Embeddings ``~ N(0, 1/d_model)``; the stack keeps its own init."""
        std = self.config.d_model**-0.5
        nn.init.normal_(self.src_embedding.weight, std=std)
        nn.init.normal_(self.tgt_embedding.weight, std=std)
        self.generator.reset_parameters()

    def _embed(self, embedding: nn.Embedding, ids: Tensor) -> Tensor:
        x = embedding(ids) * math.sqrt(self.config.d_model)  # (B, L, D)
        return self.positional(x)

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """Read the source.

        Args:
            src: source ids ``(B, S)``.

        Returns:
            ``(memory, src_keep)``: the encoder's output ``(B, S, d_model)``
            and the source padding mask ``(B, 1, 1, S)`` (``True`` at real
            tokens) that :meth:`decode` needs.

        Raises:
            TypeError, ValueError: as :meth:`forward`, for ``src``.
        """
        c = self.config
        check_sequences("src", src, c.src_vocab_size, c.max_seq_len)
        src_keep = key_padding_mask(src, c.pad_id)  # (B, 1, 1, S)
        memory = self.transformer.encode(
            self._embed(self.src_embedding, src), src_keep
        )
        return memory, src_keep

    def decode(self, tgt: Tensor, memory: Tensor, src_keep: Tensor) -> Tensor:
        """Score the next target token at every target position.

        Args:
            tgt: target ids so far ``(B, T)``, ``<bos>`` first.
            memory: :meth:`encode`'s output ``(B, S, d_model)``.
            src_keep: :meth:`encode`'s mask ``(B, 1, 1, S)``.

        Returns:
            Logits ``(B, T, tgt_vocab_size)``.

        Raises:
            TypeError, ValueError: as :meth:`forward`, for ``tgt``.
        """
        c = self.config
        check_sequences("tgt", tgt, c.tgt_vocab_size, c.max_seq_len)
        x = self.transformer.decode(
            self._embed(self.tgt_embedding, tgt),
            memory,
            key_padding_mask(tgt, c.pad_id),  # merged with the causal mask
            src_keep,  # the cross-attention hides source padding too
            tgt_is_causal=True,
        )
        return self.generator(x)

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        """Teacher-forced logits of the target given the source.

        Args:
            src: source ids, padded with ``pad_id``.
            tgt: target ids shifted right (``<bos>`` first), padded with
                ``pad_id``.

        Returns:
            Logits ``(B, T, tgt_vocab_size)``.

        Raises:
            TypeError: if ``src`` or ``tgt`` is not an integer tensor.
            ValueError: if either is not 2-D, an id is outside its
                vocabulary, a length exceeds ``max_seq_len``, or the batch
                sizes differ.
        """
        if isinstance(src, Tensor) and isinstance(tgt, Tensor) and (
            src.ndim == tgt.ndim == 2 and src.shape[0] != tgt.shape[0]
        ):
            raise ValueError(
                f"src and tgt must have the same batch size, got "
                f"{src.shape[0]} and {tgt.shape[0]}"
            )
        memory, src_keep = self.encode(src)
        return self.decode(tgt, memory, src_keep)
