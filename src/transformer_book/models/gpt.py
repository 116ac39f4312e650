"""GPT-2 (Radford et al., 2019): a decoder-only transformer language model."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._checks import (
    check_bool,
    check_choice,
    check_divisible,
    check_id_tensor,
    check_ids,
    check_int,
    check_integer_tensor,
    skip_inner_checks,
)
from .._io import load_verified
from ..attention import KVCache, MultiHeadAttention, check_cache
from ..decoding import _eval_mode, generate
from ..feedforward import ACTIVATIONS, FeedForward
from ..heads import IGNORE_INDEX, LMHead
from ..norm import LayerNorm
from ..positional import LearnedPositionalEmbedding, RotaryEmbedding
from ..transformer import EncoderLayer
from ._common import check_config, check_sizes, init_normal

__all__ = ["GPT", "GPTConfig"]

# GPT-2's released sizes (Radford et al., 2019): d_model, layers, heads.
_GPT2_SIZES = {"small": (768, 12, 12), "medium": (1024, 24, 16),
               "large": (1280, 36, 20), "xl": (1600, 48, 25)}


@dataclass(frozen=True)
class GPTConfig:
    """Sizes of a :class:`GPT`.

    Args:
        d_ff: the feed-forward width; ``None`` means ``4 * d_model``.
        dropout: on the embeddings, attention weights and residual branches.
        bias: biases in the linear layers and norms (GPT-2 has them).
        positional: ``"learned"`` (a table added to the embeddings, GPT-2)
            or ``"rope"`` (rotary queries and keys, Su et al., 2021).
        tie_weights: the LM head reuses the token-embedding matrix.
        num_kv_heads: key/value heads, dividing ``num_heads``: 1 is
            multi-query attention (Shazeer, 2019), fewer grouped-query
            (Ainslie et al., 2023); ``None`` means ``num_heads``.
        activation: the feed-forward's, ``"gelu"`` (GPT-2), ``"relu"``,
            ``"relu2"`` or ``"swiglu"``.
        qk_norm: RMS-normalise queries and keys per head (QK-norm).
    """

    vocab_size: int
    max_seq_len: int
    d_model: int
    num_heads: int
    num_layers: int
    d_ff: int | None = None
    dropout: float = 0.0
    bias: bool = True
    positional: str = "learned"
    tie_weights: bool = True
    num_kv_heads: int | None = None  # None: one per query head (GPT-2)
    activation: str = "gelu"
    qk_norm: bool = False

    def __post_init__(self) -> None:
        check_choice("positional", self.positional, ("learned", "rope"))
        rope = "positional='rope'" if self.positional == "rope" else ""
        check_sizes(self, "vocab_size", "max_seq_len", "num_layers",
                    rotary=rope)
        for flag in ("bias", "tie_weights", "qk_norm"):
            check_bool(flag, getattr(self, flag))
        check_choice("activation", self.activation, ACTIVATIONS)
        if self.num_kv_heads is not None:
            check_int("num_kv_heads", self.num_kv_heads)
            check_divisible("num_heads", self.num_heads, "num_kv_heads",
                            self.num_kv_heads)

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads

    def to_dict(self) -> dict[str, Any]:
        """The fields, for a checkpoint's ``extra``."""
        return dataclasses.asdict(self)

    @classmethod
    def gpt2(cls, size: str = "small", **overrides: Any) -> GPTConfig:
        """A released GPT-2: ``"small"`` (124,439,808 parameters),
        ``"medium"``, ``"large"`` or ``"xl"``; vocabulary 50,257, context
        1,024."""
        check_choice("size", size, tuple(_GPT2_SIZES))
        d_model, num_layers, num_heads = _GPT2_SIZES[size]
        return cls(vocab_size=50257, max_seq_len=1024, d_model=d_model,
                   num_heads=num_heads, num_layers=num_layers, **overrides)


class GPT(nn.Module):
    r"""Decoder-only transformer language model (GPT-2).

    .. math::

        h_0 = E[x] + P, \qquad h_\ell = \mathrm{Block}_\ell(h_{\ell-1}),
        \qquad \text{logits} = \mathrm{LN}(h_L)\, E^\top

    Weights start ``~ N(0, 0.02^2)``, the two residual projections of each
    block ``~ N(0, 0.02^2 / 2L)`` (Radford et al., 2019, section 2.3).

    Shape:
        - idx: ``(B, T)`` token ids; targets: ``(B, T)``, ``-100`` skipped.
        - returns ``(logits, loss)``: ``(B, T, vocab_size)`` and a scalar,
          or ``None`` without targets.
    """

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = c = check_config(config, GPTConfig)
        self.token_embedding = nn.Embedding(c.vocab_size, c.d_model)
        learned = c.positional == "learned"
        self.position_embedding = LearnedPositionalEmbedding(
            c.d_model, c.max_seq_len) if learned else None
        # RoPE: one parameter-free module, shared by every block.
        rotary = None if learned else RotaryEmbedding(c.head_dim)
        self.dropout = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(
            EncoderLayer(c.d_model, c.num_heads, c.d_ff or 4 * c.d_model,
                         dropout=c.dropout, activation=c.activation,
                         norm_first=True, bias=c.bias, rotary=rotary,
                         num_kv_heads=c.num_kv_heads, qk_norm=c.qk_norm)
            for _ in range(c.num_layers)
        )
        self.final_norm = LayerNorm(c.d_model, bias=c.bias)
        tied = self.token_embedding if c.tie_weights else None
        self.lm_head = LMHead(c.d_model, c.vocab_size, tied_embedding=tied)
        self.reset_parameters()
        skip_inner_checks(self)

    def reset_parameters(self) -> None:
        init_normal(self)
        std = 0.02 / math.sqrt(2 * self.config.num_layers)
        for module in self.blocks.modules():  # the residual projections
            if isinstance(module, MultiHeadAttention):
                nn.init.normal_(module.out_proj.weight, std=std)
            elif isinstance(module, FeedForward):
                nn.init.normal_(module.down_proj.weight, std=std)

    def forward(
        self, idx: Tensor, targets: Tensor | None = None, *,
        cache: Sequence[KVCache] | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """With ``cache`` (:meth:`make_cache`), ``idx`` follows the cached
        tokens, and the logits equal those of the whole sequence."""
        c = self.config
        offset, cached = check_cache(cache, c.num_layers)
        # Learned positions end at the table; RoPE only bounds the keys held.
        used = cached if self.position_embedding is None else offset
        idx = check_ids("idx", idx, c.vocab_size, c.max_seq_len, used)
        x = self.token_embedding(idx)  # (B, T, d_model)
        if self.position_embedding is not None:
            x = self.position_embedding(x, offset=offset)
        x = self.dropout(x)
        caches = [None] * c.num_layers if cache is None else cache
        for block, layer_cache in zip(self.blocks, caches, strict=True):
            x = block(x, is_causal=True, cache=layer_cache)
        logits = self.lm_head(self.final_norm(x))  # (B, T, vocab_size)
        if targets is None:
            return logits, None
        targets = _check_targets(targets, idx, c.vocab_size)
        # (B, T, V) -> (B * T, V) and (B, T) -> (B * T,)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(),
                               ignore_index=IGNORE_INDEX)
        return logits, loss

    def make_cache(self) -> list[KVCache]:
        """An empty :class:`~transformer_book.attention.KVCache` per block."""
        return [KVCache() for _ in range(self.config.num_layers)]

    @torch.no_grad()
    def generate(
        self, idx: Tensor, max_new_tokens: int, *, temperature: float = 1.0,
        top_k: int | None = None, top_p: float | None = None,
        use_cache: bool = True, generator: torch.Generator | None = None,
    ) -> Tensor:
        """Continue ``idx`` by :func:`~transformer_book.decoding.generate`.

        The model runs in evaluation mode. Past ``max_seq_len`` it sees the
        last ``max_seq_len`` tokens: a learned-position cache is rebuilt
        from them at every step, a rotary one drops its oldest position
        (so there cached and uncached rotary generations may differ).

        Args:
            temperature, top_k, top_p: as
                :func:`~transformer_book.decoding.sample`.
            use_cache: reuse keys and values between steps
                (:class:`~transformer_book.attention.KVCache`).

        Shape:
            - idx: ``(B, T)``, ``T >= 1``; returns a new int64 tensor
              ``(B, T + max_new_tokens)``.
        """
        c = self.config
        check_ids("idx", idx, c.vocab_size)
        use_cache = check_bool("use_cache", use_cache)
        cache = self.make_cache() if use_cache else None

        def step(tokens: Tensor) -> Tensor:
            if cache is None:  # the whole window again
                return self(tokens[:, -c.max_seq_len :])[0][:, -1]
            return self._cached_step(tokens, cache)

        with _eval_mode(self):
            return generate(step, idx, max_new_tokens, temperature=temperature,
                            top_k=top_k, top_p=top_p, generator=generator)

    def _cached_step(self, tokens: Tensor, cache: list[KVCache]) -> Tensor:
        """Last-position logits ``(B, V)``, feeding what the cache lacks."""
        window = self.config.max_seq_len
        if len(cache[0]) >= window:  # slide
            for layer in cache:
                if self.position_embedding is not None:
                    layer.reset()  # every position moved: rebuild
                else:  # RoPE scores depend on offsets only
                    layer.keep_last(window - 1)
        new = tokens[:, -1:] if len(cache[0]) else tokens[:, -window:]
        return self(new, cache=cache)[0][:, -1]

    @classmethod
    def from_checkpoint(
        cls, path: str | os.PathLike[str], *, config: GPTConfig | None = None,
        map_location: str | torch.device | None = "cpu",
    ) -> GPT:
        """A trained model, in evaluation mode, from a checkpoint saved with
        ``extra={"config": config.to_dict()}`` (or from ``config``)."""
        state = load_verified(Path(path), map_location=map_location)
        extra = state.get("extra") if isinstance(state, dict) else None
        saved = extra.get("config") if isinstance(extra, dict) else None
        if saved is not None:
            saved = GPTConfig(**saved)
            if config not in (None, saved):
                raise ValueError(f"{path} was saved with {saved}, "
                                 f"not {config}")
        config = saved or config
        if config is None:
            raise ValueError(f"{path} holds no GPT config "
                             "(extra['config']); pass config=")
        model = cls(config)
        try:
            model.load_state_dict(state["model"])
        except (RuntimeError, KeyError, TypeError) as err:
            raise ValueError(f"the weights in {path} do not fit {config}: "
                             f"{err!r}") from err
        return model.eval()


def _check_targets(targets: Any, idx: Tensor, vocab_size: int) -> Tensor:
    """``targets`` like ``idx``: ids, or ``-100`` where no loss is wanted."""
    check_integer_tensor("targets", targets, "integer ids", ndim=2)
    if targets.shape != idx.shape:
        raise ValueError(f"targets has shape {tuple(targets.shape)}, "
                         f"expected {tuple(idx.shape)} like idx")
    # -100 marks "no loss"; the other ids must be in the vocabulary.
    kept = targets.masked_fill(targets == IGNORE_INDEX, 0)
    check_id_tensor("targets (where not -100)", kept, vocab_size)
    return targets.long()
