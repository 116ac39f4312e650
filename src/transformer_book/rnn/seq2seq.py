"""RNN encoder-decoder: a fixed summary vector (Cho et al., 2014;
Sutskever et al., 2014) or additive attention (Bahdanau et al., 2014).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from .._checks import (
    check_bool,
    check_ids,
    check_instance,
    check_int,
    check_integer_tensor,
    check_probability,
    check_shape,
    check_tensor,
    check_vocab_id,
    skip_inner_checks,
)
from ..decoding import generate
from .cells import GRUCell
from .recurrent import GRU

__all__ = ["BahdanauAttention", "GreedyOutput", "RNNSeq2Seq",
           "RNNSeq2SeqConfig", "Seq2SeqOutput"]


@dataclass(frozen=True)
class RNNSeq2SeqConfig:
    """Sizes and special ids of a :class:`RNNSeq2Seq`.

    Args:
        hidden_size: width ``H`` of the decoder and each encoder direction.
        attention: Bahdanau attention; ``False`` is Cho et al.'s model.
        attention_size: the attention's hidden width (``None``: ``H``).
        bidirectional: read the source both ways, as Bahdanau et al. do.
        dropout: on the embeddings and the output layer's input.
        pad_id: padding, in both vocabularies.
    """

    src_vocab_size: int
    tgt_vocab_size: int
    embed_size: int = 64
    hidden_size: int = 128
    attention: bool = True
    attention_size: int | None = None
    bidirectional: bool = True
    dropout: float = 0.0
    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2

    def __post_init__(self) -> None:
        for name in ("src_vocab_size", "tgt_vocab_size", "embed_size",
                     "hidden_size", "attention_size"):
            if name != "attention_size" or self.attention_size is not None:
                check_int(name, getattr(self, name))
        check_bool("attention", self.attention)
        check_bool("bidirectional", self.bidirectional)
        check_probability("dropout", self.dropout)
        check_vocab_id(self, "pad_id", "src_vocab_size", "tgt_vocab_size")
        check_vocab_id(self, "bos_id", "tgt_vocab_size")
        check_vocab_id(self, "eos_id", "tgt_vocab_size")

    @property
    def annotation_size(self) -> int:
        """``H``, or ``2 H`` when bidirectional."""
        return (2 if self.bidirectional else 1) * self.hidden_size


class BahdanauAttention(nn.Module):
    r"""Additive attention (Bahdanau et al., 2014).

    .. math::

        e_j = v^\top \tanh(W_q s + W_k h_j + b), \quad
        \alpha = \mathrm{softmax}(e), \quad c = \textstyle\sum_j \alpha_j h_j

    ``attention_size`` is the length of :math:`v`.

    Shape:
        - query ``(B, query_size)``, keys ``(B, S, key_size)``, mask ``(B, S)``
          (``True`` at real keys); returns ``(B, key_size)`` and ``(B, S)``.
    """

    def __init__(self, query_size: int, key_size: int,
                 attention_size: int) -> None:
        super().__init__()
        self.query_size = check_int("query_size", query_size)
        self.key_size = check_int("key_size", key_size)
        self.attention_size = check_int("attention_size", attention_size)
        self.q_proj = nn.Linear(query_size, attention_size, bias=False)
        self.k_proj = nn.Linear(key_size, attention_size)
        self.score_proj = nn.Linear(attention_size, 1, bias=False)  # v
        self.check_inputs = True

    def project_keys(self, keys: Tensor) -> Tensor:
        """:math:`W_k h_j + b`, which every decoder step reuses."""
        return self.k_proj(keys)

    def forward(self, query: Tensor, keys: Tensor, mask: Tensor | None = None,
                projected_keys: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Attend from ``query`` over ``keys``: ``(context, weights)``."""
        if self.check_inputs:
            self._check(query, keys, mask, projected_keys)
        if projected_keys is None:
            projected_keys = self.k_proj(keys)
        hidden = torch.tanh(self.q_proj(query)[:, None] + projected_keys)
        scores = self.score_proj(hidden).squeeze(-1)  # (B, S, 1) -> (B, S)
        if mask is not None:
            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        weights = scores.softmax(dim=-1)
        if mask is not None:  # an all-padding row is uniform: zero it
            weights = weights.masked_fill(~mask, 0.0)
        context = torch.bmm(weights[:, None], keys)  # (B, 1, key_size)
        return context.squeeze(1), weights

    def _check(self, query: Any, keys: Any, mask: Any, projected: Any) -> None:
        keys = check_shape("keys", keys, (None, None, self.key_size),
                           "(B, S, key_size)", like=self.k_proj.weight)
        B, S, _ = keys.shape
        check_shape("query", query, (B, self.query_size), "(B, query_size)",
                    like=self.q_proj.weight)
        if mask is not None:
            if check_tensor("mask", mask, ndim=2).dtype != torch.bool:
                raise TypeError(f"mask must be bool, got {mask.dtype}")
            if mask.shape != (B, S):
                raise ValueError(f"mask has shape {tuple(mask.shape)}, "
                                 f"expected (B, S) = ({B}, {S})")
        if projected is not None:
            check_shape("projected_keys", projected,
                        (B, S, self.attention_size), "(B, S, attention_size)")


class Seq2SeqOutput(NamedTuple):
    """Logits ``(B, T, V)``; weights ``(B, T, S)`` or ``None``."""

    logits: Tensor
    attention: Tensor | None


class GreedyOutput(NamedTuple):
    """Tokens ``(B, T)``; weights ``(B, T, S)`` or ``None``."""

    tokens: Tensor
    attention: Tensor | None


class RNNSeq2Seq(nn.Module):
    r"""GRU encoder-decoder, with or without Bahdanau attention.

    .. math::

        c_i &= m \ \text{(Cho et al., 2014)} \ \text{or} \
            \operatorname{attention}(s_{i-1}, h) \
            \text{(Bahdanau et al., 2014)} \\
        s_i &= \operatorname{GRU}([E y_{i-1}; c_i], s_{i-1}), \quad
            s_0 = \tanh(W_s m) \\
        p(y_i \mid y_{<i}, x) &= \operatorname{softmax}(
            W_o [s_i; c_i; E y_{i-1}] + b_o)

    with :math:`h` the encoder's annotations and :math:`m` its final states.

    Shape:
        - src: ``(B, S)`` ids, right-padded; src_mask: ``(B, S)``, ``True`` at
          real tokens, or the lengths ``(B,)``.
        - tgt_in: ``(B, T)``, ``<bos>`` then the target but its last token.
    """

    def __init__(self, config: RNNSeq2SeqConfig) -> None:
        super().__init__()
        self.config = c = check_instance("config", config, RNNSeq2SeqConfig)
        E, H, A = c.embed_size, c.hidden_size, c.annotation_size
        pad = c.pad_id
        self.src_embed = nn.Embedding(c.src_vocab_size, E, padding_idx=pad)
        self.tgt_embed = nn.Embedding(c.tgt_vocab_size, E, padding_idx=pad)
        self.encoder_fwd = GRU(E, H)
        self.encoder_bwd = GRU(E, H) if c.bidirectional else None
        self.bridge = nn.Linear(A, H)
        self.attention = (BahdanauAttention(H, A, c.attention_size or H)
                          if c.attention else None)
        self.decoder_cell = GRUCell(E + A, H)
        self.out_proj = nn.Linear(H + A + E, c.tgt_vocab_size)
        self.dropout = nn.Dropout(c.dropout)
        skip_inner_checks(self)  # the model checks its inputs itself

    def _source_mask(self, src: Tensor, src_mask: Any) -> Tensor:
        B, S = src.shape
        is_mask = check_tensor("src_mask", src_mask).dtype == torch.bool
        if not is_mask:
            check_integer_tensor("src_mask", src_mask, "bools or lengths")
        if src_mask.shape != ((B, S) if is_mask else (B,)):
            raise ValueError(f"src_mask has shape {tuple(src_mask.shape)}, "
                             f"expected a mask (B, S) = ({B}, {S}) or "
                             f"lengths (B,) = ({B},)")
        lengths = src_mask.sum(-1) if is_mask else src_mask
        mask = torch.arange(S, device=src.device) < lengths[:, None]
        right_padded = not is_mask or torch.equal(mask, src_mask)
        if not (right_padded and 1 <= lengths.min() and lengths.max() <= S):
            raise ValueError(f"src_mask must be right-padded with 1 to S={S} "
                             f"real tokens per row, got lengths "
                             f"{lengths.tolist()}")
        return mask

    def encode(self, src: Tensor,
               src_mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Read the source: ``(annotations, summary, mask)``.

        Shape:
            - returns ``(B, S, annotation_size)`` (zero at padding),
              ``(B, annotation_size)`` and the bool mask ``(B, S)``.
        """
        c = self.config
        src = check_ids("src", src, c.src_vocab_size)
        mask = self._source_mask(src, src_mask)
        S = src.shape[1]
        lengths = mask.sum(-1)  # (B,)
        x = self.dropout(self.src_embed(src))  # (B, S, E)
        fwd, _ = self.encoder_fwd(x)  # (B, S, H)
        last = (lengths - 1)[:, None, None].expand(-1, 1, c.hidden_size)
        parts = [fwd]
        finals = [fwd.gather(1, last).squeeze(1)]  # (B, H)
        if self.encoder_bwd is not None:
            # Reverse each row within its length, so that the backward
            # GRU starts at the last real token and padding comes last.
            pos = torch.arange(S, device=src.device)
            rev = (lengths[:, None] - 1 - pos).where(mask, pos)  # (B, S)
            x_rev = x.gather(1, rev[:, :, None].expand_as(x))
            bwd_rev, _ = self.encoder_bwd(x_rev)  # (B, S, H)
            index = rev[:, :, None].expand(-1, -1, c.hidden_size)
            bwd = bwd_rev.gather(1, index)  # (B, S, H), original order
            parts.append(bwd)
            finals.append(bwd[:, 0])  # read the whole row backwards
        annotations = torch.cat(parts, dim=-1)  # (B, S, A)
        annotations = annotations * mask[:, :, None]
        return annotations, torch.cat(finals, dim=-1), mask

    def _steps(
        self, src: Tensor, src_mask: Tensor
    ) -> tuple[Callable[[Tensor], Tensor], list[Tensor]]:
        """A step ``(B, t)`` tokens -> next logits, and its attention log."""
        annotations, summary, mask = self.encode(src, src_mask)
        projected = None
        if self.attention is not None:  # W_k h_j + b: once per source
            projected = self.attention.project_keys(annotations)
        state = torch.tanh(self.bridge(summary))  # s_0, (B, H)
        weights: list[Tensor] = []

        def step(tokens: Tensor) -> Tensor:
            nonlocal state
            emb = self.dropout(self.tgt_embed(tokens[:, -1]))  # (B, E)
            context = summary
            if self.attention is not None:
                context, w = self.attention(state, annotations, mask,
                                            projected)
                weights.append(w)
            state = self.decoder_cell(torch.cat([emb, context], -1), state)
            features = self.dropout(torch.cat([state, context, emb], -1))
            return self.out_proj(features)

        return step, weights

    def forward(self, src: Tensor, src_mask: Tensor,
                tgt_in: Tensor) -> Seq2SeqOutput:
        """Teacher-forced logits (and attention weights) of ``tgt_in``."""
        tgt_in = check_ids("tgt_in", tgt_in, self.config.tgt_vocab_size)
        step, weights = self._steps(src, src_mask)
        if tgt_in.shape[0] != src.shape[0]:
            raise ValueError(f"tgt_in has batch size {tgt_in.shape[0]}, src "
                             f"has {src.shape[0]}")
        T = tgt_in.shape[1]
        logits = torch.stack([step(tgt_in[:, : t + 1]) for t in range(T)], 1)
        attention = torch.stack(weights, 1) if weights else None  # (B, T, S)
        return Seq2SeqOutput(logits, attention)

    @torch.no_grad()
    def greedy_decode(self, src: Tensor, src_mask: Tensor,
                      max_len: int = 32) -> GreedyOutput:
        """Translate by :func:`~transformer_book.decoding.generate` (greedy).

        ``max_len`` is the most tokens per row, ``<eos>`` included.
        """
        c = self.config
        check_int("max_len", max_len)
        step, weights = self._steps(src, src_mask)
        start = torch.full((src.shape[0], 1), c.bos_id, device=src.device)
        tokens = generate(step, start, max_len, temperature=0.0,
                          eos_id=c.eos_id, pad_id=c.pad_id)[:, 1:]
        if not weights:
            return GreedyOutput(tokens, None)
        is_eos = (tokens == c.eos_id).long()
        ended = (is_eos.cumsum(1) - is_eos).bool()  # (B, T_out): after eos
        attention = torch.stack(weights, 1)  # (B, T_out, S)
        return GreedyOutput(tokens, attention.masked_fill(ended[..., None], 0))
