"""The encoder-decoder transformer of Vaswani et al. (2017): it embeds,
builds every mask from the token ids and scores the target vocabulary."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pad_sequence

from .._checks import (
    check_bool,
    check_ids,
    check_int,
    check_number,
    check_tensor,
    check_vocab_id,
    skip_inner_checks,
)
from ..attention import KVCache, check_cache
from ..decoding import _eval_mode, beam_search, generate
from ..heads import LMHead
from ..positional import RotaryEmbedding, SinusoidalPositionalEncoding
from ..transformer import Transformer
from ._common import check_config, check_sizes

__all__ = ["Seq2SeqTransformer", "Seq2SeqTransformerConfig"]


@dataclass(frozen=True)
class Seq2SeqTransformerConfig:
    """Sizes and padding id of a :class:`Seq2SeqTransformer`.

    Args:
        d_ff: the feed-forward width; ``None`` means ``4 * d_model``.
        pad_id: padding in both vocabularies.
        norm_first: pre-LN (Xiong et al., 2020) or the paper's post-LN.
        tie_weights: the generator reuses the target embeddings.
        rotary: also rotate the self-attentions' queries and keys (RoPE,
            Su et al., 2021), on top of the sinusoidal table.
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
        check_bool("rotary", self.rotary)
        check_sizes(self, "src_vocab_size", "tgt_vocab_size", "max_seq_len",
                    "num_encoder_layers", "num_decoder_layers",
                    rotary="rotary=True" if self.rotary else "")
        check_vocab_id(self, "pad_id", "src_vocab_size", "tgt_vocab_size")
        check_bool("norm_first", self.norm_first)
        check_bool("tie_weights", self.tie_weights)


class Seq2SeqTransformer(nn.Module):
    r"""Encoder-decoder transformer for sequence-to-sequence tasks.

    .. math::

        m = \mathrm{Encoder}(\sqrt{D}\, E_s[x] + \mathrm{PE}), \qquad
        \text{logits} = \mathrm{Decoder}(\sqrt{D}\, E_t[y] + \mathrm{PE},
        m)\, E_t^\top + b

    Embeddings start ``~ N(0, 1/D)``; ReLU feed-forward networks.

    Shape:
        - src: ``(B, S)``; tgt: ``(B, T)``, the target shifted right.
        - returns ``(B, T, tgt_vocab_size)``.
    """

    def __init__(self, config: Seq2SeqTransformerConfig) -> None:
        super().__init__()
        self.config = c = check_config(config, Seq2SeqTransformerConfig)
        self.src_embedding = nn.Embedding(c.src_vocab_size, c.d_model)
        self.tgt_embedding = nn.Embedding(c.tgt_vocab_size, c.d_model)
        self.positional = SinusoidalPositionalEncoding(
            c.d_model, c.max_seq_len, dropout=c.dropout)
        head_dim = c.d_model // c.num_heads
        rotary = RotaryEmbedding(head_dim) if c.rotary else None
        self.transformer = Transformer(
            c.d_model, c.num_heads, c.num_encoder_layers,
            c.num_decoder_layers, c.d_ff or 4 * c.d_model,
            dropout=c.dropout, norm_first=c.norm_first, rotary=rotary)
        tied = self.tgt_embedding if c.tie_weights else None
        self.generator = LMHead(c.d_model, c.tgt_vocab_size,
                                tied_embedding=tied, bias=True)
        self.reset_parameters()
        skip_inner_checks(self)

    def reset_parameters(self) -> None:
        """Embeddings ``~ N(0, 1/d_model)``; the stack keeps its own."""
        std = self.config.d_model**-0.5
        nn.init.normal_(self.src_embedding.weight, std=std)
        nn.init.normal_(self.tgt_embedding.weight, std=std)
        self.generator.reset_parameters()

    def _embed(self, embedding: nn.Embedding, ids: Tensor, at: int) -> Tensor:
        x = embedding(ids) * math.sqrt(self.config.d_model)  # (B, L, D)
        return self.positional(x, offset=at)

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """The memory ``(B, S, d_model)`` and the source mask
        ``(B, 1, 1, S)``, ``True`` at real tokens."""
        c = self.config
        src = check_ids("src", src, c.src_vocab_size, c.max_seq_len)
        src_keep = (src != c.pad_id)[:, None, None, :]  # (B, 1, 1, S)
        x = self._embed(self.src_embedding, src, 0)
        return self.transformer.encode(x, src_keep), src_keep

    def make_cache(self) -> list[KVCache]:
        """An empty :class:`~transformer_book.attention.KVCache` per
        decoder layer."""
        return [KVCache() for _ in range(self.config.num_decoder_layers)]

    def decode(self, tgt: Tensor, memory: Tensor, src_keep: Tensor, *,
               cache: Sequence[KVCache] | None = None) -> Tensor:
        """Logits ``(B, T, tgt_vocab_size)`` of the target so far.

        With ``cache`` (:meth:`make_cache`), ``tgt`` follows the cached
        tokens. ``pad_id`` in ``tgt`` is read as a token: the causal mask
        already keeps real tokens from the padding after them.
        """
        c = self.config
        offset, _ = check_cache(cache, c.num_decoder_layers)
        tgt = check_ids("tgt", tgt, c.tgt_vocab_size, c.max_seq_len, offset)
        x = self._embed(self.tgt_embedding, tgt, offset)
        decoder = self.transformer.decoder
        decoder.check(x, memory, None, src_keep, is_causal=True, cache=cache,
                      names=("tgt", "memory"))
        x = decoder(x, memory, None, src_keep, is_causal=True, cache=cache)
        return self.generator(x)

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        """Teacher-forced logits ``(B, T, tgt_vocab_size)``."""
        memory, src_keep = self.encode(src)
        if isinstance(tgt, Tensor) and tgt.ndim == 2 and len(tgt) != len(src):
            raise ValueError(f"src and tgt must have the same batch size, "
                             f"got {src.shape[0]} and {tgt.shape[0]}")
        return self.decode(tgt, memory, src_keep)

    @torch.no_grad()
    def generate(self, src: Tensor, max_new_tokens: int, *, bos_id: int,
                 eos_id: int | None = None, beam_width: int = 1,
                 length_penalty: float = 0.0,
                 use_cache: bool = True) -> Tensor:
        """Translate each source: greedy, or the best of :meth:`beam_search`.

        Greedy decoding is :func:`~transformer_book.decoding.generate` at
        temperature 0 on all rows at once. The model runs in evaluation
        mode; cached and uncached decoding give the same tokens.

        Args:
            src: source ids, padded with ``pad_id``.
            max_new_tokens: the most tokens per row (``eos_id`` included),
                at most ``max_seq_len``.
            eos_id: the token that ends a translation (kept), or ``None``.
            beam_width: hypotheses kept per step; 1 is greedy decoding.
            length_penalty: the :math:`\\alpha` of
                :func:`~transformer_book.decoding.beam_search`, ``>= 0``.
            use_cache: feed the decoder only the tokens it has not seen.

        Shape:
            - src: ``(B, S)``; returns the new tokens ``(B, n)``,
              ``n <= max_new_tokens``, ``pad_id`` after ``eos_id``.
        """
        self._check_search(max_new_tokens, bos_id, eos_id, beam_width,
                           length_penalty, use_cache)
        if beam_width > 1:  # each source alone, its padding hidden
            rows = [self.beam_search(
                row, max_new_tokens, bos_id=bos_id, eos_id=eos_id,
                beam_width=beam_width, length_penalty=length_penalty,
                use_cache=use_cache)[0][0]
                for row in check_tensor("src", src, ndim=2)]
            return pad_sequence(rows, batch_first=True,
                                padding_value=self.config.pad_id)
        with _eval_mode(self):
            memory, keep = self.encode(src)
            start = torch.full((memory.shape[0], 1), bos_id,
                               device=memory.device)  # (B, 1): <bos>
            out = generate(self._step(memory, keep, use_cache), start,
                           max_new_tokens, temperature=0.0, eos_id=eos_id,
                           pad_id=self.config.pad_id)
        return out[:, 1:]

    @torch.no_grad()
    def beam_search(self, src: Tensor, max_new_tokens: int, *, bos_id: int,
                    eos_id: int | None = None, beam_width: int = 1,
                    length_penalty: float = 0.0,
                    use_cache: bool = True) -> list[tuple[Tensor, float]]:
        """:func:`~transformer_book.decoding.beam_search` over one source.

        The arguments after ``src`` are those of :meth:`generate`. With
        ``use_cache``, each layer's cache follows the beams through the
        parent indices (``index_select``). ``src`` needs no padding.

        Shape:
            - src: ``(S,)``; returns up to ``beam_width`` pairs
              ``(new_tokens, score)``, best first.
        """
        self._check_search(max_new_tokens, bos_id, eos_id, beam_width,
                           length_penalty, use_cache)
        check_tensor("src", src, ndim=1)
        with _eval_mode(self):
            memory, keep = self.encode(src[None])
            step = self._step(memory, keep, use_cache)
            return beam_search(
                lambda tokens, parents: step(tokens, parents).log_softmax(-1),
                torch.tensor([bos_id], device=memory.device),
                beam_width=beam_width, max_new_tokens=max_new_tokens,
                eos_id=eos_id, length_penalty=length_penalty)

    def _check_search(self, max_new_tokens: Any, bos_id: Any, eos_id: Any,
                      beam_width: Any, length_penalty: Any,
                      use_cache: Any) -> None:
        c = self.config
        max_new_tokens = check_int("max_new_tokens", max_new_tokens, minimum=0)
        if max_new_tokens > c.max_seq_len:
            raise ValueError(f"max_new_tokens={max_new_tokens} needs that "
                             f"many decoder positions, more than "
                             f"max_seq_len={c.max_seq_len}")
        for name, value in (("bos_id", bos_id), ("eos_id", eos_id)):
            if (value is not None or name == "bos_id") and check_int(
                    name, value, minimum=0) >= c.tgt_vocab_size:
                raise ValueError(f"{name}={value} is outside the target "
                                 f"vocabulary (tgt_vocab_size="
                                 f"{c.tgt_vocab_size})")
        check_int("beam_width", beam_width)
        check_number("length_penalty", length_penalty, minimum=0.0)
        check_bool("use_cache", use_cache)

    def _step(self, memory: Tensor, src_keep: Tensor,
              use_cache: bool) -> Callable[..., Tensor]:
        """``step(tokens (n, t), parents=None)``: next-token logits ``(n, V)``;
        with a cache, reordered to ``parents``, fed only unseen tokens."""
        cache = self.make_cache() if use_cache else None

        def step(tokens: Tensor, parents: Tensor | None = None) -> Tensor:
            n = tokens.shape[0]
            mem = memory.expand(n, -1, -1)  # (n, S, D)
            keep = src_keep.expand(n, -1, -1, -1)  # (n, 1, 1, S)
            seen = cache[0].offset if cache else 0  # uncached: all again
            if cache and parents is not None and seen:  # follow the beams
                cache[:] = [_select(layer, parents) for layer in cache]
            return self.decode(tokens[:, seen:], mem, keep, cache=cache)[:, -1]

        return step


def _select(cache: KVCache, rows: Tensor) -> KVCache:
    """A new cache whose row ``i`` is row ``rows[i]`` of ``cache``."""
    out = KVCache()  # (n, H, t, head_dim) each
    out.append(cache.keys.index_select(0, rows),
               cache.values.index_select(0, rows))
    return out
