"""RNN encoder-decoder, with and without additive (Bahdanau) attention.

The encoder reads the source into one *annotation* per token; the decoder
writes the target one token at a time. Without attention the decoder sees
the source only through one fixed vector, the encoder's final state, at
every step (Cho et al., 2014; Sutskever et al., 2014). With attention it
recomputes a context vector at every step, a weighted average of the
annotations whose weights it chooses (Bahdanau et al., 2014), and
returns those weights for plotting.

Both recurrences are the package's own :class:`~transformer_book.rnn.GRU`
(encoder) and :class:`~transformer_book.rnn.GRUCell` (decoder): on the
small models of the book they are as fast as ``torch.nn.GRU`` on a CPU,
because the decoder's loop over time steps cannot be fused anyway.

Source batches are right-padded; ``src_mask`` is ``True`` at real tokens
(the package's mask convention), or the source lengths can be passed
instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor, nn

from .._checks import (
    check_bool,
    check_id_tensor,
    check_int,
    check_probability,
    check_tensor,
    check_tensor_like,
)
from ..masks import padding_mask
from .cells import GRUCell, _check_dtype, _check_shape
from .recurrent import GRU

__all__ = [
    "BahdanauAttention",
    "GreedyOutput",
    "RNNSeq2Seq",
    "RNNSeq2SeqConfig",
    "Seq2SeqOutput",
    "pad_batch",
]


def pad_batch(
    sequences: Sequence[Sequence[int]],
    pad_id: int = 0,
    *,
    device: torch.device | str | None = None,
) -> tuple[Tensor, Tensor]:
    """Right-pad token-id sequences into one batch.

    Args:
        sequences: ``B`` non-empty lists of token ids.
        pad_id: id written after the end of each shorter sequence.
        device: device of the returned tensors.

    Shape:
        - returns ``ids`` ``(B, T)`` with ``T`` the longest length, and
          ``lengths`` ``(B,)``.

    Returns:
        ``(ids, lengths)``, both ``torch.long``.

    Raises:
        TypeError: if a sequence holds something other than int ids
            (floats would otherwise be truncated silently).
        ValueError: if ``sequences`` or one of its sequences is empty, or
            an id is negative.
    """
    pad_id = check_int("pad_id", pad_id, minimum=0)
    if len(sequences) == 0:
        raise ValueError("sequences is empty; expected at least one sequence")
    rows = [_id_row(f"sequences[{i}]", s) for i, s in enumerate(sequences)]
    lengths = [len(row) for row in rows]
    ids = torch.full((len(rows), max(lengths)), pad_id, dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = row
    return ids.to(device), torch.tensor(lengths, device=device)


def _id_row(name: str, ids: Sequence[int]) -> Tensor:
    """One non-empty sequence of non-negative int ids as a long tensor."""
    row = check_tensor_like(name, ids, "a sequence of int token ids")
    if row.ndim != 1 or len(row) == 0:
        raise ValueError(
            f"{name} must be a non-empty 1-D sequence of ids, got shape "
            f"{tuple(row.shape)}"
        )
    if row.is_floating_point() or row.is_complex() or row.dtype == torch.bool:
        raise TypeError(
            f"{name} must be a sequence of int token ids, got {row.dtype}"
        )
    if int(row.min()) < 0:
        raise ValueError(f"{name} holds a negative id {int(row.min())}")
    return row.long()


@dataclass(frozen=True)
class RNNSeq2SeqConfig:
    """Sizes and special ids of a :class:`RNNSeq2Seq` model.

    Args:
        src_vocab_size: source token ids are in ``range(src_vocab_size)``.
        tgt_vocab_size: target token ids are in ``range(tgt_vocab_size)``.
        embed_size: width of the token embeddings.
        hidden_size: width ``H`` of the encoder (per direction) and of the
            decoder state.
        attention: use Bahdanau attention; ``False`` gives the fixed-vector
            model of Cho et al. (2014).
        attention_size: width of the attention's hidden layer;
            ``hidden_size`` when ``None``.
        bidirectional: read the source in both directions, so that each
            annotation summarises the tokens on both sides (as Bahdanau et
            al. do).
        dropout: dropout on embeddings and on the decoder's output layer
            input (training mode only).
        pad_id: id of padding in both vocabularies.
        bos_id: id of the start token the decoder is first fed.
        eos_id: id of the end token that stops greedy decoding.

    Raises:
        TypeError: if a size or id is not an int, or a flag not a bool.
        ValueError: if a size is below 1, ``dropout`` is outside [0, 1),
            or a special id is outside the target vocabulary.
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
        for name in ("src_vocab_size", "tgt_vocab_size", "embed_size"):
            check_int(name, getattr(self, name))
        check_int("hidden_size", self.hidden_size)
        if self.attention_size is not None:
            check_int("attention_size", self.attention_size)
        check_bool("attention", self.attention)
        check_bool("bidirectional", self.bidirectional)
        check_probability("dropout", self.dropout)
        for name in ("pad_id", "bos_id", "eos_id"):
            value = check_int(name, getattr(self, name), minimum=0)
            if value >= self.tgt_vocab_size:
                raise ValueError(
                    f"{name}={value} is outside the target vocabulary "
                    f"(tgt_vocab_size={self.tgt_vocab_size})"
                )
        if self.pad_id >= self.src_vocab_size:
            raise ValueError(
                f"pad_id={self.pad_id} is outside the source vocabulary "
                f"(src_vocab_size={self.src_vocab_size})"
            )

    @property
    def num_directions(self) -> int:
        """2 for a bidirectional encoder, else 1."""
        return 2 if self.bidirectional else 1

    @property
    def annotation_size(self) -> int:
        """Width of one encoder annotation, ``num_directions * H``."""
        return self.num_directions * self.hidden_size


class BahdanauAttention(nn.Module):
    r"""Additive attention (Bahdanau et al., 2014).

    A small feed-forward network scores each key :math:`h_j` against the
    query :math:`s` (the decoder's previous state), a softmax over the
    source turns the scores into weights, and the context is the weighted
    average of the keys:

    .. math::

        e_j = v^\top \tanh(W_q s + W_k h_j + b), \qquad
        \alpha_j = \frac{\exp e_j}{\sum_{k} \exp e_k}, \qquad
        c = \sum_j \alpha_j h_j

    The sums run over real source tokens only: padded positions get weight
    exactly 0, and a row with no real token returns zeros, never NaN.
    :math:`W_k h_j + b` does not depend on the decoder step, so
    :meth:`project_keys` computes it once per source sentence.

    Args:
        query_size: features of the query :math:`s`.
        key_size: features of each key :math:`h_j`.
        attention_size: width of the hidden layer (rows of :math:`W_q`,
            :math:`W_k`, length of :math:`v`).

    Shape:
        - query: ``(B, query_size)``.
        - keys: ``(B, S, key_size)``, ``S`` source positions.
        - mask: ``(B, S)``, ``True`` at real tokens.
        - returns ``context`` ``(B, key_size)`` and ``weights``
          ``(B, S)``.

    Raises:
        TypeError: if a size is not an int.
        ValueError: if a size is below 1.

    Example:
        >>> attn = BahdanauAttention(query_size=4, key_size=6,
        ...                          attention_size=5)
        >>> keys = torch.randn(2, 3, 6)  # (B, S, key_size)
        >>> mask = torch.tensor([[True, True, True], [True, False, False]])
        >>> context, weights = attn(torch.randn(2, 4), keys, mask)
        >>> context.shape, weights[1, 1:].tolist()
        (torch.Size([2, 6]), [0.0, 0.0])
    """

    def __init__(
        self, query_size: int, key_size: int, attention_size: int
    ) -> None:
        super().__init__()
        self.query_size = check_int("query_size", query_size)
        self.key_size = check_int("key_size", key_size)
        self.attention_size = check_int("attention_size", attention_size)
        self.q_proj = nn.Linear(query_size, attention_size, bias=False)
        self.k_proj = nn.Linear(key_size, attention_size)
        # The paper's vector v: one score per hidden unit pattern.
        self.score_proj = nn.Linear(attention_size, 1, bias=False)

    def project_keys(self, keys: Tensor) -> Tensor:
        """Return :math:`W_k h_j + b` for every key, ``(B, S, A)``."""
        self._check_keys(keys)
        return self.k_proj(keys)

    def _check_keys(self, keys: Tensor) -> None:
        check_tensor("keys", keys, ndim=3, floating=True)
        B, S, _ = keys.shape
        _check_shape("keys", keys, (B, S, self.key_size), "(B, S, key_size)")
        _check_dtype("keys", keys, self.k_proj.weight.dtype)

    def _check_inputs(
        self,
        query: Tensor,
        keys: Tensor,
        mask: Tensor | None,
        projected_keys: Tensor | None,
    ) -> None:
        """Shapes and dtypes that would otherwise broadcast or fail late."""
        self._check_keys(keys)
        B, S, _ = keys.shape
        check_tensor("query", query, ndim=2, floating=True)
        _check_shape("query", query, (B, self.query_size), "(B, query_size)")
        _check_dtype("query", query, self.q_proj.weight.dtype)
        if mask is not None:
            check_tensor("mask", mask)
            if mask.dtype != torch.bool:
                raise TypeError(
                    f"mask must be a bool tensor, got {mask.dtype}"
                )
            _check_shape("mask", mask, (B, S), "(B, S)")
        if projected_keys is not None:
            check_tensor("projected_keys", projected_keys)
            shape = (B, S, self.attention_size)
            legend = "(B, S, attention_size)"
            _check_shape("projected_keys", projected_keys, shape, legend)

    def forward(
        self,
        query: Tensor,
        keys: Tensor,
        mask: Tensor | None = None,
        projected_keys: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Attend from one query over the keys.

        Args:
            query: the decoder state :math:`s`.
            keys: the encoder annotations :math:`h_j`.
            mask: ``True`` where a key is a real token; all real when
                ``None``.
            projected_keys: :meth:`project_keys` of ``keys``, to reuse
                across decoder steps; computed when ``None``.

        Returns:
            ``(context, weights)``.

        Raises:
            TypeError: if an input is not a floating tensor of the
                module's dtype, or ``mask`` is not boolean.
            ValueError: if a shape disagrees with ``Shape`` above.
        """
        self._check_inputs(query, keys, mask, projected_keys)
        if projected_keys is None:
            projected_keys = self.k_proj(keys)
        hidden = torch.tanh(
            self.q_proj(query)[:, None, :] + projected_keys
        )  # (B, S, A)
        scores = self.score_proj(hidden).squeeze(-1)  # (B, S)
        if mask is None:
            weights = torch.softmax(scores, dim=-1)
        else:
            low = torch.finfo(scores.dtype).min
            weights = torch.softmax(scores.masked_fill(~mask, low), dim=-1)
            # An all-padding row softmaxes to uniform: zero it instead.
            weights = weights.masked_fill(~mask, 0.0)
        context = torch.bmm(weights[:, None, :], keys).squeeze(1)
        return context, weights


def _check_ids(name: str, ids: Tensor, vocab_size: int) -> Tensor:
    """Integer ids ``(B, T)``, ``T >= 1``, in the vocabulary; as int64."""
    check_id_tensor(name, ids, vocab_size, ndim=2)
    if ids.size(1) == 0:
        raise ValueError(f"{name} has no tokens (shape {tuple(ids.shape)})")
    return ids.long()


class Seq2SeqOutput(NamedTuple):
    """What :meth:`RNNSeq2Seq.forward` returns.

    ``logits`` are the next-token scores ``(B, T, tgt_vocab_size)``;
    ``attention`` holds the attention weights ``(B, T, S)``, or ``None``
    for a model without attention.
    """

    logits: Tensor
    attention: Tensor | None


class GreedyOutput(NamedTuple):
    """What :meth:`RNNSeq2Seq.greedy_decode` returns.

    ``tokens`` are the generated ids ``(B, T_out)``, each row ending with
    ``eos_id`` (unless ``max_len`` cut it) and padded with ``pad_id``
    after it; ``attention`` holds the weights ``(B, T_out, S)``, zero
    after a row's end, or ``None`` for a model without attention.
    """

    tokens: Tensor
    attention: Tensor | None


class RNNSeq2Seq(nn.Module):
    r"""GRU encoder-decoder, with or without Bahdanau attention.

    **Encoder.** Token embeddings go through a GRU, and with
    ``bidirectional`` through a second GRU that reads each sequence
    backwards from its last real token; the annotation of token :math:`j`
    is :math:`h_j = [\overrightarrow{h}_j; \overleftarrow{h}_j]`. The
    summary :math:`m = [\overrightarrow{h}_{S}; \overleftarrow{h}_1]` (each
    direction's final state) starts the decoder,
    :math:`s_0 = \tanh(W_s m)`.

    **Decoder.** At step :math:`i`, with :math:`y_{i-1}` the previous
    target token (``<bos>`` first):

    .. math::

        c_i &= \begin{cases}
            m & \text{without attention (Cho et al., 2014)} \\
            \operatorname{attention}(s_{i-1}, h_1, \dots, h_S)
              & \text{with attention (Bahdanau et al., 2014)}
        \end{cases} \\
        s_i &= \operatorname{GRU}([E y_{i-1}; c_i], s_{i-1}) \\
        p(y_i \mid y_{<i}, x) &= \operatorname{softmax}(
            W_o [s_i; c_i; E y_{i-1}] + b_o)

    so the two models differ only in where :math:`c_i` comes from: a fixed
    vector for the whole sentence, or a new average of the annotations at
    every step.

    Args:
        config: the model's sizes and special ids.

    Shape:
        - src: ``(B, S)`` token ids, right-padded.
        - src_mask: ``(B, S)`` bool, ``True`` at real tokens; or lengths
          ``(B,)``.
        - tgt_in: ``(B, T)``: ``<bos>`` then the target without its last
          token (teacher forcing).

    Raises:
        TypeError: if ``config`` is not a :class:`RNNSeq2SeqConfig`.
    """

    def __init__(self, config: RNNSeq2SeqConfig) -> None:
        super().__init__()
        if not isinstance(config, RNNSeq2SeqConfig):
            raise TypeError(
                "config must be an RNNSeq2SeqConfig, got "
                f"{type(config).__name__}"
            )
        self.config = config
        c = config
        E, H, A = c.embed_size, c.hidden_size, c.annotation_size
        self.src_embed = nn.Embedding(
            c.src_vocab_size, E, padding_idx=c.pad_id
        )
        self.tgt_embed = nn.Embedding(
            c.tgt_vocab_size, E, padding_idx=c.pad_id
        )
        self.encoder_fwd = GRU(E, H)
        self.encoder_bwd = GRU(E, H) if c.bidirectional else None
        self.bridge = nn.Linear(A, H)
        self.attention = (
            BahdanauAttention(H, A, c.attention_size or H)
            if c.attention
            else None
        )
        self.decoder_cell = GRUCell(E + A, H)
        self.out_proj = nn.Linear(H + A + E, c.tgt_vocab_size)
        self.dropout = nn.Dropout(c.dropout)

    # -- checks -----------------------------------------------------------

    def _source_mask(self, src: Tensor, src_mask: object) -> Tensor:
        """Turn lengths or a mask into a checked ``(B, S)`` bool mask."""
        B, S = src.shape
        src_mask = check_tensor("src_mask", src_mask, ndim=(1, 2))
        if src_mask.dtype != torch.bool:  # lengths (B,)
            if src_mask.is_floating_point():
                raise TypeError(
                    "src_mask must be a bool mask or integer lengths, got "
                    f"{src_mask.dtype}"
                )
            _check_shape("src_mask", src_mask, (B,), "(B,) as lengths")
            if int(src_mask.max()) > S:
                raise ValueError(
                    f"src_mask holds a length {int(src_mask.max())} above "
                    f"the source length S={S}"
                )
            src_mask = padding_mask(src_mask.clamp(min=0), S)[:, 0, 0]
        _check_shape("src_mask", src_mask, (B, S), "(B, S) like src")
        lengths = src_mask.sum(-1)
        if int(lengths.min()) < 1:
            raise ValueError(
                "src_mask has a row with no real token; every source "
                "needs at least one"
            )
        if not torch.equal(src_mask, padding_mask(lengths, S)[:, 0, 0]):
            raise ValueError(
                "src_mask must be right-padded: True for the first tokens "
                "of each row, then False"
            )
        return src_mask

    # -- the two halves ---------------------------------------------------

    def encode(
        self, src: Tensor, src_mask: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Read the source.

        Args:
            src: source ids ``(B, S)``.
            src_mask: ``(B, S)`` bool (``True`` = real token) or lengths
                ``(B,)``.

        Returns:
            ``(annotations, summary, mask)``: annotations
            ``(B, S, num_directions * H)`` (zero at padding), the summary
            vector :math:`m` ``(B, num_directions * H)`` and the checked
            bool mask ``(B, S)``.
        """
        c = self.config
        src = _check_ids("src", src, c.src_vocab_size)
        mask = self._source_mask(src, src_mask)
        B, S = src.shape
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

    def _decode_step(
        self,
        y_prev: Tensor,
        state: Tensor,
        memory: tuple[Tensor, Tensor, Tensor, Tensor | None],
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """One decoder step: ``(logits, new state, attention weights)``."""
        annotations, summary, mask, projected = memory
        emb = self.dropout(self.tgt_embed(y_prev))  # (B, E)
        if self.attention is None:
            context, weights = summary, None
        else:
            context, weights = self.attention(
                state, annotations, mask, projected
            )
        state = self.decoder_cell(torch.cat([emb, context], -1), state)
        features = self.dropout(torch.cat([state, context, emb], -1))
        return self.out_proj(features), state, weights

    def _start(
        self, src: Tensor, src_mask: Tensor
    ) -> tuple[Tensor, tuple[Tensor, Tensor, Tensor, Tensor | None]]:
        annotations, summary, mask = self.encode(src, src_mask)
        projected = (
            self.attention.project_keys(annotations)
            if self.attention is not None
            else None
        )
        state = torch.tanh(self.bridge(summary))  # s_0, (B, H)
        return state, (annotations, summary, mask, projected)

    def forward(
        self, src: Tensor, src_mask: Tensor, tgt_in: Tensor
    ) -> Seq2SeqOutput:
        """Score every target position with teacher forcing.

        Args:
            src: source ids ``(B, S)``, right-padded.
            src_mask: ``(B, S)`` bool (``True`` = real token) or source
                lengths ``(B,)``.
            tgt_in: decoder inputs ``(B, T)``: ``<bos>`` and the target
                shifted right. Positions after a row's end may hold
                anything (padding): they do not affect earlier logits.

        Returns:
            A :class:`Seq2SeqOutput`: logits ``(B, T, tgt_vocab_size)`` and
            attention weights ``(B, T, S)`` (``None`` without attention).

        Raises:
            TypeError: if an input is not an integer tensor.
            ValueError: if a shape disagrees, an id is outside its
                vocabulary, or ``src_mask`` is not right-padded.
        """
        src = _check_ids("src", src, self.config.src_vocab_size)
        tgt_in = _check_ids("tgt_in", tgt_in, self.config.tgt_vocab_size)
        if tgt_in.size(0) != src.size(0):
            raise ValueError(
                f"tgt_in has batch size {tgt_in.size(0)}, src has "
                f"{src.size(0)}"
            )
        state, memory = self._start(src, src_mask)
        logits, weights = [], []
        for t in range(tgt_in.size(1)):
            step_logits, state, w = self._decode_step(
                tgt_in[:, t], state, memory
            )
            logits.append(step_logits)
            if w is not None:
                weights.append(w)
        attention = torch.stack(weights, 1) if weights else None  # (B, T, S)
        return Seq2SeqOutput(torch.stack(logits, 1), attention)

    @torch.no_grad()
    def greedy_decode(
        self, src: Tensor, src_mask: Tensor, max_len: int = 32
    ) -> GreedyOutput:
        """Translate by feeding back the most likely token at each step.

        Decoding stops when every row has produced ``eos_id`` or after
        ``max_len`` steps.

        Args:
            src: source ids ``(B, S)``, right-padded.
            src_mask: ``(B, S)`` bool (``True`` = real token) or source
                lengths ``(B,)``.
            max_len: most tokens to generate per row, ``<eos>`` included.

        Returns:
            A :class:`GreedyOutput`: tokens ``(B, T_out)`` and attention
            weights ``(B, T_out, S)`` (``None`` without attention).

        Raises:
            ValueError: if ``max_len`` is below 1, or as :meth:`forward`.
        """
        check_int("max_len", max_len)
        c = self.config
        state, memory = self._start(src, src_mask)
        B = src.size(0)
        y = torch.full((B,), c.bos_id, dtype=torch.long, device=src.device)
        done = torch.zeros(B, dtype=torch.bool, device=src.device)
        tokens, weights = [], []
        for _ in range(max_len):
            step_logits, state, w = self._decode_step(y, state, memory)
            y = step_logits.argmax(-1).masked_fill(done, c.pad_id)  # (B,)
            tokens.append(y)
            if w is not None:
                weights.append(w.masked_fill(done[:, None], 0.0))
            done = done | (y == c.eos_id)
            if bool(done.all()):
                break
        attention = torch.stack(weights, 1) if weights else None
        return GreedyOutput(torch.stack(tokens, 1), attention)
