"""The encoder-decoder transformer of Vaswani et al. (2017), with its masks.

:class:`~transformer_book.layers.Transformer` is the bare stack (the twin of
``nn.Transformer``): it takes embedded sequences and the masks its caller
built. :class:`Seq2SeqTransformer` is the whole model: token embeddings
scaled by :math:`\\sqrt{d_{\\text{model}}}`, sinusoidal positions (and, with
``rotary=True``, rotary ones inside every self-attention), the stack,
and a generator that scores the target vocabulary, and it builds every mask
from the token ids itself:

- the encoder's self-attention hides source padding;
- the decoder's self-attention is causal: a target token never sees the
  padding after it, so target padding needs no mask, and a ``pad_id``
  inside the target (T5 starts the decoder with it) is read as a token;
- the cross-attention hides source padding.

:meth:`Seq2SeqTransformer.generate` translates: greedy decoding, or beam
search through :func:`transformer_book.decoding.beam_search`, with the
decoder's keys and values cached between steps
(:class:`~transformer_book.attention.KVCache`) so that each step runs the
decoder on one new token.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, overload

import torch
from torch import Tensor, nn

from .._checks import (
    check_bool,
    check_int,
    check_number,
    check_probability,
    check_tensor,
)
from ..attention import KVCache
from ..decoding import beam_search
from ..heads import LMHead
from ..layers import Transformer
from ..positional import RotaryEmbedding, SinusoidalPositionalEncoding
from ._common import (
    check_config,
    check_model_sizes,
    check_pad_id,
    check_rotary_head_dim,
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
        pad_id: id of padding in both vocabularies; source positions
            that hold it are hidden from every attention (target padding
            comes last, which the causal decoder never reads early).
        norm_first: pre-LN layers (``True``, easier to train, Xiong et al.,
            2020) or the paper's post-LN (``False``).
        tie_weights: the generator reuses the target-embedding matrix
            (Vaswani et al., 2017, section 3.4).
        rotary: also rotate the queries and keys of every self-attention
            by their positions (RoPE, Su et al., 2021), on top of the
            sinusoidal encoding, so that self-attention scores see the
            offset between two tokens directly. The cross-attention is
            unchanged. It adds no parameters; ``head_dim`` must be even.

    Raises:
        TypeError: if a size or id is not an int or a flag not a bool.
        ValueError: if a size is below 1, ``dropout`` is outside
            ``[0, 1)``, ``num_heads`` does not divide ``d_model``,
            ``pad_id`` is outside a vocabulary, or ``rotary`` gets an odd
            ``head_dim``.
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
    rotary: bool = False

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
        check_bool("rotary", self.rotary)
        if self.rotary:
            check_rotary_head_dim(self, "rotary=True")


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
            rotary=(
                RotaryEmbedding(c.d_model // c.num_heads) if c.rotary else None
            ),
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

    def _embed(
        self, embedding: nn.Embedding, ids: Tensor, offset: int = 0
    ) -> Tensor:
        x = embedding(ids) * math.sqrt(self.config.d_model)  # (B, L, D)
        return self.positional(x, offset=offset)

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
        src = check_sequences("src", src, c.src_vocab_size, c.max_seq_len)
        src_keep = key_padding_mask(src, c.pad_id)  # (B, 1, 1, S)
        memory = self.transformer.encode(
            self._embed(self.src_embedding, src), src_keep
        )
        return memory, src_keep

    def make_cache(self) -> list[KVCache]:
        """An empty key/value cache, one per decoder layer.

        Returns:
            The list to pass as ``cache=`` to :meth:`decode`.
        """
        return [KVCache() for _ in range(self.config.num_decoder_layers)]

    @overload
    def decode(
        self,
        tgt: Tensor,
        memory: Tensor,
        src_keep: Tensor,
        *,
        cache: Sequence[KVCache] | None = ...,
        need_weights: Literal[False] = ...,
    ) -> Tensor: ...

    @overload
    def decode(
        self,
        tgt: Tensor,
        memory: Tensor,
        src_keep: Tensor,
        *,
        cache: Sequence[KVCache] | None = ...,
        need_weights: Literal[True],
    ) -> tuple[Tensor, list[tuple[Tensor, Tensor]]]: ...

    def decode(
        self,
        tgt: Tensor,
        memory: Tensor,
        src_keep: Tensor,
        *,
        cache: Sequence[KVCache] | None = None,
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, list[tuple[Tensor, Tensor]]]:
        """Score the next target token at every target position.

        With ``cache`` (from :meth:`make_cache`), ``tgt`` holds the target
        tokens that follow those already cached: token ``i`` of ``tgt``
        sits at position ``p + i``, where ``p`` is the number of tokens
        cached, its keys and values are appended to each layer's cache,
        and it attends to every cached token and to those before it in
        ``tgt``. The logits are those of the full, uncached call at the
        same positions. Neither call masks ``pad_id`` in ``tgt``: the
        decoder is causal, so padding at the end of a target is never
        seen by the real tokens before it (and the loss skips it).

        Args:
            tgt: target ids so far ``(B, T)``, ``<bos>`` first (after the
                cached tokens when ``cache`` is given).
            memory: :meth:`encode`'s output ``(B, S, d_model)``.
            src_keep: :meth:`encode`'s mask ``(B, 1, 1, S)``.
            cache: one :class:`~transformer_book.attention.KVCache` per
                decoder layer, or ``None``.
            need_weights: also return each decoder layer's attention
                weights.

        Returns:
            Logits ``(B, T, tgt_vocab_size)``; with ``need_weights``,
            ``(logits, weights)``, where ``weights`` holds one pair per
            decoder layer: the self-attention ``(B, H, T, p + T)`` and
            the cross-attention ``(B, H, T, S)``, which says which source
            tokens each target position reads.

        Raises:
            TypeError: as :meth:`forward`, for ``tgt``; or if ``cache`` is
                not a sequence of ``KVCache``.
            ValueError: as :meth:`forward`, for ``tgt``; if ``cache`` has
                not one entry per decoder layer, or the cached and new
                tokens together exceed ``max_seq_len``.
        """
        c = self.config
        tgt = check_sequences("tgt", tgt, c.tgt_vocab_size, c.max_seq_len)
        offset = self._check_cache(cache)
        check_bool("need_weights", need_weights)
        if offset + tgt.shape[1] > c.max_seq_len:
            raise ValueError(
                f"tgt has length {tgt.shape[1]} after {offset} cached "
                f"positions: {offset + tgt.shape[1]} positions, more than "
                f"max_seq_len={c.max_seq_len}"
            )
        # No target padding mask: the causal mask keeps a real token from
        # the padding after it, and a pad_id among the tokens fed (T5's
        # start token) must be read, with or without a cache.
        out = self.transformer.decoder(
            self._embed(self.tgt_embedding, tgt, offset),
            memory,
            None,
            src_keep,  # the cross-attention hides source padding too
            is_causal=True,
            need_weights=need_weights,
            cache=cache,
        )
        if need_weights:
            x, weights = out
            return self.generator(x), weights
        return self.generator(out)

    def _check_cache(self, cache: Any) -> int:
        """Check ``cache``; return the number of positions cached."""
        if cache is None:
            return 0
        if isinstance(cache, KVCache) or not all(
            isinstance(layer, KVCache) for layer in cache
        ):
            raise TypeError(
                "cache must be a sequence of KVCache, one per decoder "
                "layer (Seq2SeqTransformer.make_cache())"
            )
        if len(cache) != self.config.num_decoder_layers:
            raise ValueError(
                f"cache has {len(cache)} entries, expected one per decoder "
                f"layer (num_decoder_layers="
                f"{self.config.num_decoder_layers})"
            )
        return int(cache[0].offset)

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

    # ------------------------------------------------------------------
    # Decoding
    # ------------------------------------------------------------------

    @torch.no_grad()
    def generate(
        self,
        src: Tensor,
        max_new_tokens: int,
        *,
        bos_id: int,
        eos_id: int | None = None,
        beam_width: int = 1,
        length_penalty: float = 0.0,
        use_cache: bool = True,
    ) -> Tensor:
        """Translate each source: greedy decoding or beam search.

        The source is encoded once; the decoder starts from ``bos_id``
        and adds one token per step until ``eos_id`` or
        ``max_new_tokens`` tokens. With ``beam_width=1`` this is greedy
        decoding, run on all rows at once: each row appends its most
        likely token, which is what
        :func:`~transformer_book.decoding.beam_search` with
        ``beam_width=1`` (:meth:`beam_search` below) picks for that row
        alone. With a wider beam, each row is searched by
        :func:`~transformer_book.decoding.beam_search` and its best
        hypothesis kept (ranked with ``length_penalty``).

        With ``use_cache`` each step feeds the decoder only the newest
        token and reuses the keys and values of the earlier ones
        (:meth:`make_cache`); without it, each step reruns the decoder on
        the whole prefix. Both give the same tokens. The model runs in
        evaluation mode and is put back in its mode afterwards.

        Args:
            src: source ids, padded with ``pad_id``.
            max_new_tokens: the most tokens to write per row, ``eos_id``
                included; at most ``max_seq_len``.
            bos_id: the start token fed to the decoder first.
            eos_id: the token that ends a translation (kept); ``None``
                writes ``max_new_tokens`` tokens.
            beam_width: hypotheses kept per step; 1 is greedy decoding.
            length_penalty: the exponent of the length normalisation of
                :func:`~transformer_book.decoding.beam_search`, ``>= 0``.
            use_cache: reuse the decoder's keys and values between steps.

        Shape:
            - src: ``(B, S)``.
            - returns ``(B, n)`` with ``n <= max_new_tokens``.

        Returns:
            The new tokens of each row (``bos_id`` excluded, ``eos_id``
            included when written), padded with ``pad_id`` after it.

        Raises:
            TypeError: if ``src`` is not an integer tensor or an option
                has the wrong type.
            ValueError: if ``src`` is not ``(B, S)`` in the source
                vocabulary, ``max_new_tokens`` is outside
                ``[0, max_seq_len]``, ``bos_id`` or ``eos_id`` is outside
                the target vocabulary, ``beam_width < 1`` or
                ``length_penalty < 0``.
        """
        options = self._check_generate(
            max_new_tokens, bos_id, eos_id, beam_width, length_penalty,
            use_cache,
        )
        c = self.config
        src = check_sequences("src", src, c.src_vocab_size, c.max_seq_len)
        was_training = self.training
        self.eval()
        try:
            if options["beam_width"] == 1:
                return self._greedy(src, **options)
            rows = [
                self._search_row(row, **options)[0][0] for row in src
            ]
        finally:
            self.train(was_training)
        width = max(len(row) for row in rows)
        out = src.new_full((len(rows), width), c.pad_id)  # (B, n)
        for i, row in enumerate(rows):
            out[i, : len(row)] = row
        return out

    @torch.no_grad()
    def beam_search(
        self,
        src: Tensor,
        max_new_tokens: int,
        *,
        bos_id: int,
        eos_id: int | None = None,
        beam_width: int = 1,
        length_penalty: float = 0.0,
        use_cache: bool = True,
    ) -> list[tuple[Tensor, float]]:
        """The hypotheses of a beam search for one source, best first.

        :func:`~transformer_book.decoding.beam_search` with the decoder's
        log-probabilities as ``log_probs_fn``, started from ``bos_id``.
        With ``use_cache``, the cached keys and values follow the beams:
        when the search keeps some hypotheses and drops others, each
        layer's cache is reordered so that row ``i`` holds the keys of
        hypothesis ``i``, and each step feeds only the newest tokens.

        Args:
            src: the source ids of one sentence (no padding needed).
            max_new_tokens: as :meth:`generate`.
            bos_id: as :meth:`generate`.
            eos_id: as :meth:`generate`.
            beam_width: as :meth:`generate`.
            length_penalty: as :meth:`generate`.
            use_cache: as :meth:`generate`.

        Shape:
            - src: ``(S,)``.

        Returns:
            Up to ``beam_width`` pairs ``(new_tokens, score)``, as
            :func:`~transformer_book.decoding.beam_search` returns them.

        Raises:
            TypeError, ValueError: as :meth:`generate`; ``src`` must be
                1-D.
        """
        options = self._check_generate(
            max_new_tokens, bos_id, eos_id, beam_width, length_penalty,
            use_cache,
        )
        check_tensor("src", src, ndim=1)
        c = self.config
        src = check_sequences(
            "src", src[None], c.src_vocab_size, c.max_seq_len
        )[0]
        was_training = self.training
        self.eval()
        try:
            return self._search_row(src, **options)
        finally:
            self.train(was_training)

    def _check_generate(
        self,
        max_new_tokens: Any,
        bos_id: Any,
        eos_id: Any,
        beam_width: Any,
        length_penalty: Any,
        use_cache: Any,
    ) -> dict[str, Any]:
        c = self.config
        max_new_tokens = check_int("max_new_tokens", max_new_tokens, minimum=0)
        if max_new_tokens > c.max_seq_len:
            raise ValueError(
                f"max_new_tokens={max_new_tokens} needs that many decoder "
                f"positions, more than max_seq_len={c.max_seq_len}"
            )
        ids = {"bos_id": bos_id, "eos_id": eos_id}
        for name, value in ids.items():
            if value is None and name == "eos_id":
                continue
            value = check_int(name, value, minimum=0)
            if value >= c.tgt_vocab_size:
                raise ValueError(
                    f"{name}={value} is outside the target vocabulary "
                    f"(tgt_vocab_size={c.tgt_vocab_size})"
                )
            ids[name] = value
        return {
            "max_new_tokens": max_new_tokens,
            **ids,
            "beam_width": check_int("beam_width", beam_width),
            "length_penalty": check_number(
                "length_penalty", length_penalty, minimum=0.0
            ),
            "use_cache": check_bool("use_cache", use_cache),
        }

    def _greedy(
        self,
        src: Tensor,
        *,
        max_new_tokens: int,
        bos_id: int,
        eos_id: int | None,
        use_cache: bool,
        **unused: Any,
    ) -> Tensor:
        """Greedy decoding of every row at once; ``(B, n)`` new tokens."""
        pad_id = self.config.pad_id
        memory, src_keep = self.encode(src)
        out = src.new_full((src.shape[0], 1), bos_id)  # (B, 1): <bos>
        done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
        cache = self.make_cache() if use_cache else None
        for _ in range(max_new_tokens):
            if cache is not None:
                logits = self.decode(out[:, -1:], memory, src_keep,
                                     cache=cache)
            else:  # the whole prefix again
                logits = self.decode(out, memory, src_keep)
            next_id = logits[:, -1].argmax(-1).masked_fill(done, pad_id)
            out = torch.cat((out, next_id[:, None]), dim=1)  # (B, t + 1)
            if eos_id is not None:
                done |= next_id == eos_id
                if bool(done.all()):
                    break
        return out[:, 1:]

    def _search_row(
        self,
        src: Tensor,
        *,
        max_new_tokens: int,
        bos_id: int,
        eos_id: int | None,
        beam_width: int,
        length_penalty: float,
        use_cache: bool,
    ) -> list[tuple[Tensor, float]]:
        """:func:`decoding.beam_search` on one source ``(S,)``."""
        memory, src_keep = self.encode(src[None])  # (1, S, D), (1,1,1,S)
        return beam_search(
            self._log_probs_fn(memory, src_keep, use_cache),
            src.new_tensor([bos_id]),
            beam_width=beam_width,
            max_new_tokens=max_new_tokens,
            eos_id=eos_id,
            length_penalty=length_penalty,
        )

    def _log_probs_fn(
        self, memory: Tensor, src_keep: Tensor, use_cache: bool
    ) -> Callable[[Tensor], Tensor]:
        """Next-token log-probabilities of the hypotheses of one source.

        ``memory`` ``(1, S, D)`` is shared by every hypothesis. With the
        cache, each call finds, for every hypothesis, the row of the
        previous call that it extends (its tokens but the last), and
        gathers the cached keys and values of those rows before feeding
        the last tokens.
        """
        cache: list[KVCache] | None = None
        seen: Tensor | None = None  # the hypotheses of the previous call

        def log_probs(tokens: Tensor) -> Tensor:
            nonlocal cache, seen
            beams = tokens.shape[0]
            mem = memory.expand(beams, -1, -1)  # (beams, S, D)
            keep = src_keep.expand(beams, -1, -1, -1)  # (beams, 1, 1, S)
            if not use_cache:
                logits = self.decode(tokens, mem, keep)
            else:
                if seen is None or cache is None:
                    cache, new = self.make_cache(), tokens
                else:
                    # (beams, 1, t-1) == (1, prev, t-1) -> (beams, prev)
                    match = (tokens[:, None, :-1] == seen[None]).all(-1)
                    rows = match.int().argmax(-1)  # (beams,)
                    same = beams == seen.shape[0] and bool(
                        (rows == torch.arange(beams, device=rows.device))
                        .all()
                    )
                    if not same:
                        cache = [_gather(layer, rows) for layer in cache]
                    new = tokens[:, -1:]
                logits = self.decode(new, mem, keep, cache=cache)
                seen = tokens
            return logits[:, -1].log_softmax(-1)  # (beams, V)

        return log_probs


def _gather(cache: KVCache, rows: Tensor) -> KVCache:
    """A new cache whose row ``i`` is row ``rows[i]`` of ``cache``."""
    out = KVCache()
    out.append(cache.keys[rows], cache.values[rows])  # (beams, H, t, hd)
    return out
