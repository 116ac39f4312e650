"""A decoder-only language model in the style of GPT-2.

Token embeddings (plus learned positions, or rotary positions inside the
attention), a stack of pre-LN transformer blocks with causal
self-attention, a final LayerNorm and an LM head tied to the token
embeddings (Radford et al., 2019). A GPT block is the package's
:class:`~transformer_book.layers.EncoderLayer` with ``norm_first=True``,
called with ``is_causal=True``: "decoder-only" names what the model does
(it predicts the next token), not a third kind of block.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._checks import (
    check_bool,
    check_choice,
    check_id_tensor,
    check_int,
    check_integer_tensor,
)
from .._docs import shared_doc
from .._io import load_verified
from ..attention import KVCache
from ..decoding import (
    _check_temperature,
    _check_top_k,
    _check_top_p,
    sample,
)
from ..heads import IGNORE_INDEX, LMHead
from ..layers import EncoderLayer, LayerNorm
from ..positional import LearnedPositionalEmbedding, RotaryEmbedding
from ._common import (
    VOCAB_ARGS,
    ModelSizes,
    check_config,
    check_rotary_head_dim,
    check_sequences,
    gelu_encoder,
    init_normal,
    scale_residual_projections,
)

__all__ = ["GPT", "GPTConfig"]

_POSITIONAL = ("learned", "rope")

# GPT-2's published sizes (Radford et al., 2019, table 2; the released
# checkpoints): d_model, num_layers, num_heads.
_GPT2_SIZES = {
    "small": (768, 12, 12),
    "medium": (1024, 24, 16),
    "large": (1280, 36, 20),
    "xl": (1600, 48, 25),
}


@dataclass(frozen=True)
@shared_doc(vocab_args=VOCAB_ARGS)
class GPTConfig(ModelSizes):
    """Sizes of a :class:`GPT` model.

    Args:
        {vocab_args}
        d_model: width of the residual stream.
        num_heads: attention heads per layer; must divide ``d_model``.
        num_layers: number of transformer blocks.
        d_ff: width of the feed-forward hidden layer; ``None`` means
            ``4 * d_model`` (GPT-2), and the config then holds that number.
        dropout: dropout on the embeddings, the attention weights and each
            residual branch (training mode only).
        bias: biases in the linear layers and LayerNorms (GPT-2 has them;
            many later models drop them).
        positional: ``"learned"`` (a table of ``max_seq_len`` vectors added
            to the embeddings, GPT-2) or ``"rope"`` (rotary embeddings of
            queries and keys, Su et al., 2021; no parameters).
        tie_weights: the LM head reuses the token-embedding matrix.

    Raises:
        TypeError: if a size is not an int or a flag not a bool.
        ValueError: if a size is below 1, ``dropout`` is outside
            ``[0, 1)``, ``num_heads`` does not divide ``d_model``,
            ``positional`` is unknown, or RoPE gets an odd head size.

    Example:
        >>> config = GPTConfig(vocab_size=100, max_seq_len=16, d_model=32,
        ...                    num_heads=4, num_layers=2)
        >>> config.d_ff
        128
    """

    bias: bool = True
    positional: str = "learned"
    tie_weights: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        check_bool("bias", self.bias)
        check_bool("tie_weights", self.tie_weights)
        check_choice("positional", self.positional, _POSITIONAL)
        if self.positional == "rope":
            check_rotary_head_dim(self, "positional='rope'")

    @property
    def head_dim(self) -> int:
        """Width of one attention head, ``d_model // num_heads``."""
        return self.d_model // self.num_heads

    def to_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (for a checkpoint's ``extra``)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, fields: dict[str, Any]) -> GPTConfig:
        """The config saved by :meth:`to_dict`.

        Raises:
            TypeError: if ``fields`` is not a dict.
            ValueError: if a field is unknown or its value is invalid.
        """
        if not isinstance(fields, dict):
            raise TypeError(
                f"fields must be a dict, got {type(fields).__name__}"
            )
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(fields) - known)
        if unknown:
            raise ValueError(f"unknown GPTConfig fields: {unknown}")
        return cls(**fields)

    @classmethod
    def gpt2(cls, size: str = "small", **overrides: object) -> GPTConfig:
        """The configuration of a released GPT-2 model.

        Vocabulary 50,257, context 1,024, ``d_ff = 4 d_model``, biases,
        learned positions and a tied LM head without bias. Built from
        these configs, :class:`GPT` has exactly the released parameter
        counts: 124,439,808 (small), 354,823,168 (medium), 774,030,080
        (large) and 1,557,611,200 (xl).

        Args:
            size: ``"small"``, ``"medium"``, ``"large"`` or ``"xl"``.
            **overrides: fields to change (``dropout=0.1``, ...).

        Returns:
            The config.

        Raises:
            ValueError: if ``size`` is unknown.
        """
        check_choice("size", size, tuple(_GPT2_SIZES))
        d_model, num_layers, num_heads = _GPT2_SIZES[size]
        fields: dict[str, object] = {
            "vocab_size": 50257,
            "max_seq_len": 1024,
            "d_model": d_model,
            "num_heads": num_heads,
            "num_layers": num_layers,
        }
        fields.update(overrides)
        return cls(**fields)  # type: ignore[arg-type]


class GPT(nn.Module):
    r"""Decoder-only transformer language model (GPT-2 style).

    .. math::

        h_0 &= E[x] + P \quad (\text{learned positions; RoPE adds none})\\
        h_\ell &= \mathrm{Block}_\ell(h_{\ell-1}),
            \quad \ell = 1, \dots, L \\
        \text{logits} &= \mathrm{LayerNorm}(h_L)\, E^\top

    where each block is ``x + Attn(LN(x))`` then ``x + FFN(LN(x))`` with a
    causal mask (token ``t`` sees tokens ``0..t``), GELU in the
    feed-forward network, and :math:`E^\top` the tied LM head (a separate
    matrix when ``tie_weights=False``).

    Parameters: with ``d_ff = 4 d_model``, learned positions, biases and a
    tied head, the model has
    :math:`V D + T_{\max} D + L (12 D^2 + 13 D) + 2 D` parameters, which
    gives GPT-2's published counts (:meth:`GPTConfig.gpt2`).

    Initialisation follows GPT-2: every linear and embedding weight
    ``~ N(0, 0.02^2)``, zero biases, and the two residual output
    projections of each block (attention ``out_proj``, the feed-forward
    network's second layer) scaled by :math:`1/\sqrt{2L}`.

    Args:
        config: the model's sizes.

    Shape:
        - idx: ``(B, T)`` token ids with ``T <= max_seq_len``.
        - targets: ``(B, T)`` ids, ``-100`` where no loss is wanted.
        - returns logits ``(B, T, vocab_size)`` and a scalar loss or
          ``None``.

    Raises:
        TypeError: if ``config`` is not a :class:`GPTConfig`.

    Example:
        >>> import torch
        >>> config = GPTConfig(vocab_size=50, max_seq_len=8, d_model=16,
        ...                    num_heads=2, num_layers=1)
        >>> logits, loss = GPT(config)(torch.zeros(2, 8, dtype=torch.long))
        >>> logits.shape, loss
        (torch.Size([2, 8, 50]), None)
    """

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = c = check_config(config, GPTConfig)
        self.token_embedding = nn.Embedding(c.vocab_size, c.d_model)
        self.position_embedding = None
        rotary = None
        if c.positional == "learned":
            self.position_embedding = LearnedPositionalEmbedding(
                c.d_model, c.max_seq_len
            )
        else:  # one parameter-free module, shared by every block
            rotary = RotaryEmbedding(c.head_dim)
        self.dropout = nn.Dropout(c.dropout)
        # The pre-LN GELU blocks, without the stack's norm: final_norm below.
        self.blocks = gelu_encoder(
            c, norm_first=True, final_norm=False, bias=c.bias, rotary=rotary
        ).layers
        self.final_norm = LayerNorm(c.d_model, bias=c.bias)
        self.lm_head = LMHead(
            c.d_model,
            c.vocab_size,
            tied_embedding=self.token_embedding if c.tie_weights else None,
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """GPT-2's initialisation (see the class docstring)."""
        init_normal(self)
        scale_residual_projections(
            [
                proj
                for block in self.blocks
                for proj in _residual(cast(EncoderLayer, block))
            ],
            self.config.num_layers,
        )

    def forward(
        self,
        idx: Tensor,
        targets: Tensor | None = None,
        *,
        cache: Sequence[KVCache] | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """Next-token logits at every position, and the loss on targets.

        With ``cache`` (from :meth:`make_cache`), ``idx`` holds the tokens
        that follow those already cached: their keys and values are
        appended to each layer's cache, token ``i`` of ``idx`` sits at
        position ``p + i`` (``p`` the number of tokens seen before the
        call) and sees every earlier token. The logits then equal those of
        a forward pass over the whole sequence at the same positions.

        Args:
            idx: the input token ids.
            targets: the ids to predict at each position (usually ``idx``
                shifted left by one), ``-100`` where no loss is wanted;
                ``None`` for no loss.
            cache: one :class:`~transformer_book.attention.KVCache` per
                layer, or ``None``.

        Returns:
            ``(logits, loss)``: logits ``(B, T, vocab_size)``, and the mean
            cross-entropy over the targets that are not ``-100`` (``None``
            without targets).

        Raises:
            TypeError: if ``idx`` or ``targets`` is not an integer tensor,
                or ``cache`` is not a sequence of ``KVCache``.
            ValueError: if ``idx`` is not ``(B, T)``, an id is outside the
                vocabulary, ``T > max_seq_len`` (with a cache: the cached
                and new positions together; with learned positions, the
                positions seen), ``cache`` has not one entry per layer, or
                ``targets`` has another shape or an id that is neither
                ``-100`` nor in the vocabulary.
        """
        c = self.config
        idx, offset = self._check_cache(idx, cache)
        x = self.token_embedding(idx)  # (B, T, d_model)
        if self.position_embedding is not None:
            x = self.position_embedding(x, offset=offset)
        x = self.dropout(x)
        for layer, block in enumerate(self.blocks):
            layer_cache = None if cache is None else cache[layer]
            x = block(x, is_causal=True, cache=layer_cache)
        logits = self.lm_head(self.final_norm(x))  # (B, T, vocab_size)
        if targets is None:
            return logits, None
        targets = _check_targets(targets, idx, c.vocab_size)
        loss = F.cross_entropy(
            logits.flatten(0, 1),  # (B, T, V) -> (B*T, V)
            targets.flatten(),  # (B, T) -> (B*T,)
            ignore_index=IGNORE_INDEX,
        )
        return logits, loss

    def make_cache(self) -> list[KVCache]:
        """An empty key/value cache, one per layer.

        Each entry is a :class:`~transformer_book.attention.KVCache`.

        Returns:
            The list to pass as ``cache=`` to :meth:`forward`.
        """
        return [KVCache() for _ in range(self.config.num_layers)]

    def _check_cache(
        self, idx: Tensor, cache: Sequence[KVCache] | None
    ) -> tuple[Tensor, int]:
        """Check ``idx`` (and ``cache``); the ids as int64, first position."""
        c = self.config
        if cache is None:
            return check_sequences("idx", idx, c.vocab_size, c.max_seq_len), 0
        if isinstance(cache, KVCache) or not all(
            isinstance(layer, KVCache) for layer in cache
        ):
            raise TypeError(
                "cache must be a sequence of KVCache, one per layer "
                "(GPT.make_cache())"
            )
        if len(cache) != c.num_layers:
            raise ValueError(
                f"cache has {len(cache)} entries, expected one per layer "
                f"(num_layers={c.num_layers})"
            )
        idx = check_id_tensor("idx", idx, c.vocab_size, ndim=2).long()
        length = idx.shape[1]
        if length == 0:
            raise ValueError(f"idx has no tokens (shape {tuple(idx.shape)})")
        offset = cache[0].offset
        # Learned positions end at the table; rotary ones only bound the
        # keys attended to, which a sliding cache keeps below max_seq_len.
        learned = self.position_embedding is not None
        used = offset if learned else len(cache[0])
        if used + length > c.max_seq_len:
            raise ValueError(
                f"idx has length {length} after {used} cached positions: "
                f"{used + length} is more than max_seq_len={c.max_seq_len}"
            )
        return idx, offset

    @torch.no_grad()
    def generate(
        self,
        idx: Tensor,
        max_new_tokens: int,
        *,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        use_cache: bool = True,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        """Continue ``idx`` by ``max_new_tokens`` tokens, one at a time.

        Each step feeds the context to the model, takes the last
        position's logits and draws the next token with
        :func:`~transformer_book.decoding.sample` (temperature, then
        top-k, then top-p; ``temperature=0`` is greedy decoding). The
        model runs in evaluation mode (no dropout) and is put back in its
        mode afterwards.

        With ``use_cache`` the prompt is processed once and every later
        step feeds only the newest token, reusing the keys and values
        cached at each layer (:class:`~transformer_book.attention.KVCache`);
        greedy decoding gives the same tokens either way.

        Past ``max_seq_len`` the context slides: the model sees only the
        last ``max_seq_len`` tokens. Without a cache, each step recomputes
        that window. With learned positions the cache is rebuilt from the
        window at every step once it slides, since every token's position
        changes, so it saves nothing there. With rotary positions the
        cache keeps sliding: the oldest position is dropped and the keys
        kept stay valid, because RoPE scores depend only on offsets. Those
        keys were computed when earlier tokens were still in view, so past
        ``max_seq_len`` a rotary model's cached and uncached generations
        may differ.

        Args:
            idx: the prompt, one row per sequence.
            max_new_tokens: the number of tokens to add, ``>= 0``.
            temperature: ``>= 0``; ``0`` means argmax.
            top_k: sample among the ``top_k`` most likely tokens only.
            top_p: sample among the smallest set of most likely tokens
                whose probability reaches ``top_p`` (in ``(0, 1]``).
            use_cache: reuse keys and values between steps.
            generator: the random generator for the draws.

        Shape:
            - idx: ``(B, T)``, any ``T >= 1`` (a prompt longer than
              ``max_seq_len`` is read through its last ``max_seq_len``
              tokens).
            - returns ``(B, T + max_new_tokens)``.

        Returns:
            A new ``int64`` tensor: the prompt followed by the new tokens.

        Raises:
            TypeError: if ``idx`` is not an integer tensor or an option
                has the wrong type.
            ValueError: if ``idx`` is not ``(B, T)`` with ``T >= 1``, an
                id is outside the vocabulary, ``max_new_tokens < 0``,
                ``temperature < 0``, ``top_k < 1`` or ``top_p`` is outside
                ``(0, 1]``.
        """
        c = self.config
        check_id_tensor("idx", idx, c.vocab_size, ndim=2)
        idx = idx.to(torch.long, copy=True)  # never the caller's tensor
        if idx.shape[1] == 0:
            raise ValueError(f"idx has no tokens (shape {tuple(idx.shape)})")
        max_new_tokens = check_int("max_new_tokens", max_new_tokens, minimum=0)
        options: dict[str, Any] = {
            "temperature": _check_temperature(temperature),
            "top_k": None if top_k is None else _check_top_k(top_k),
            "top_p": None if top_p is None else _check_top_p(top_p),
            "generator": generator,
        }
        use_cache = check_bool("use_cache", use_cache)
        was_training = self.training
        self.eval()
        try:
            out = idx
            cache: list[KVCache] | None = None
            for _ in range(max_new_tokens):
                if use_cache:
                    logits, cache = self._cached_step(out, cache)
                else:
                    logits = self(out[:, -c.max_seq_len :])[0][:, -1]
                next_id = sample(logits, **options)  # (B,)
                out = torch.cat((out, next_id[:, None]), dim=1)
        finally:
            self.train(was_training)
        return out

    def _cached_step(
        self, out: Tensor, cache: list[KVCache] | None
    ) -> tuple[Tensor, list[KVCache]]:
        """Last-position logits ``(B, V)`` of ``out``, through the cache."""
        window = self.config.max_seq_len
        if cache is not None and len(cache[0]) >= window:
            if self.position_embedding is not None:
                cache = None  # every position moved: rebuild from the window
            else:
                for layer in cache:
                    layer.keep_last(window - 1)
        if cache is None:
            cache = self.make_cache()
            logits = self(out[:, -window:], cache=cache)[0]
        else:
            logits = self(out[:, -1:], cache=cache)[0]
        return logits[:, -1], cache

    @classmethod
    def from_checkpoint(
        cls,
        path: str | os.PathLike[str],
        *,
        config: GPTConfig | None = None,
        map_location: str | torch.device | None = "cpu",
    ) -> GPT:
        """Restore a trained model (config and weights) from a checkpoint.

        The checkpoint is one written by
        :func:`~transformer_book.training.save_checkpoint` (or by
        :func:`~transformer_book.training.train`).
        The config is read from the checkpoint's ``extra["config"]`` (save
        it with ``extra={"config": config.to_dict()}``), or given. The
        model is returned in evaluation mode.

        Args:
            path: the checkpoint file.
            config: the model's config, when the checkpoint holds none; if
                both are there, they must agree.
            map_location: where the weights are loaded.

        Returns:
            The model with the saved weights.

        Raises:
            FileNotFoundError: if ``path`` does not exist.
            ValueError: if the file is damaged or not a checkpoint (the
                error of :func:`~transformer_book.training.load_checkpoint`),
                holds no config and none is given, its config differs from
                ``config``, or its weights do not fit the config.
        """
        state = load_verified(Path(path), map_location=map_location)
        if not isinstance(state, dict) or "model" not in state:
            raise ValueError(f"{path} is not a training checkpoint")
        extra = state.get("extra")
        saved = extra.get("config") if isinstance(extra, dict) else None
        if saved is not None:
            saved = GPTConfig.from_dict(saved)
            if config is not None and config != saved:
                raise ValueError(
                    f"{path} was saved with {saved}, not {config}"
                )
            config = saved
        if config is None:
            raise ValueError(
                f"{path} holds no GPT config (extra['config']); pass "
                f"config="
            )
        model = cls(config)
        try:
            model.load_state_dict(state["model"])
        except RuntimeError as err:
            raise ValueError(
                f"the weights in {path} do not fit {config}: {err}"
            ) from err
        return model.eval()


def _residual(block: EncoderLayer) -> list[nn.Linear]:
    """The two projections of a block that write into the residual stream."""
    return [block.self_attn.out_proj, block.feed_forward.down_proj]


def _check_targets(
    targets: object, idx: Tensor, vocab_size: int
) -> Tensor:
    """``targets`` checked against ``idx``, as int64 ids."""
    targets = check_integer_tensor("targets", targets, "integer ids", ndim=2)
    if targets.shape != idx.shape:
        raise ValueError(
            f"targets has shape {tuple(targets.shape)}, expected "
            f"{tuple(idx.shape)} like idx"
        )
    bad = (targets != IGNORE_INDEX) & ((targets < 0) | (targets >= vocab_size))
    if bool(bad.any()):
        value = int(targets[bad][0])
        raise ValueError(
            f"target id {value} is outside the vocabulary "
            f"(vocab_size={vocab_size}) and is not {IGNORE_INDEX}"
        )
    return targets.long()
