"""Scaled dot-product attention, multi-head attention and its cache."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import masks
from ._checks import (
    check_bool,
    check_divisible,
    check_float_dtype,
    check_instance,
    check_int,
    check_number,
    check_param_dtype,
    check_probability,
    check_shape,
    check_tensor,
    check_twin,
)
from .positional import RotaryEmbedding

__all__ = ["KVCache", "MultiHeadAttention", "scaled_dot_product_attention",
           "set_fused"]


def scaled_dot_product_attention(
    q: Tensor, k: Tensor, v: Tensor, attn_mask: Tensor | None = None, *,
    is_causal: bool = False, dropout_p: float = 0.0,
    return_weights: bool = False, scale: float | None = None,
) -> Tensor | tuple[Tensor, Tensor]:
    r"""Scaled dot-product attention (Vaswani et al., 2017, eq. 1).

    .. math::

        \mathrm{Attention}(Q, K, V)
        = \mathrm{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}} + M\right) V

    :math:`M` is 0 where attention is allowed, the dtype's minimum where
    not (or the float bias given). A query row with no allowed key gets
    zeros; a key no query may see is zeroed, so a NaN there does not spread.

    Args:
        q, k, v: queries, keys and values.
        attn_mask: ``None``, a boolean mask (``True`` = may attend) or a
            float bias, broadcasting to ``(..., q_len, kv_len)``.
        is_causal: also apply the causal mask, aligned at the top left.
        dropout_p: dropout on the weights, applied whenever positive.
        return_weights: also return the weights (before dropout).
        scale: the factor on :math:`Q K^\top`; ``1 / sqrt(D)`` if ``None``.

    Shape:
        q: ``(..., q_len, D)``; k: ``(..., kv_len, D)``; v:
        ``(..., kv_len, Dv)``; returns ``(..., q_len, Dv)`` and weights
        ``(..., q_len, kv_len)``. ``...`` is usually ``(B, H)``.
    """
    _check_qkv(q, k, v, attn_mask)
    dropout_p = check_probability("dropout_p", dropout_p)
    is_causal = check_bool("is_causal", is_causal)
    return_weights = check_bool("return_weights", return_weights)
    default = 1.0 / math.sqrt(q.shape[-1])
    scale = check_number("scale", default if scale is None else scale)
    mask, empty, k, v = _prepare(q, k, v, attn_mask, is_causal)
    if is_causal and mask is None:
        mask = masks.causal_mask(q.shape[-2], k.shape[-2], device=q.device)
    # Scale q first: in float16, q @ k^T can overflow where
    # (q * scale) @ k^T does not (the fused kernels scale first too).
    scores = (q * scale) @ k.transpose(-2, -1)  # (..., q_len, kv_len)
    low = torch.finfo(scores.dtype).min
    if mask is not None and mask.dtype == torch.bool:
        scores = scores.masked_fill(~mask, low)
    elif mask is not None:
        scores = (scores + mask).clamp_min(low)
    weights = scores.softmax(dim=-1)
    if empty is not None:  # nothing to attend to: zeros, not an average
        weights = weights.masked_fill(empty, 0.0)
    attended = F.dropout(weights, dropout_p) if dropout_p > 0 else weights
    out = attended @ v  # (..., q_len, Dv)
    return (out, weights) if return_weights else out


def _check_qkv(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> None:
    check_tensor("q", q, ndim=(2, 3, 4), floating=True)
    lead, d = tuple(q.shape[:-2]), q.shape[-1]
    check_shape("k", k, (*lead, None, d), "(..., kv_len, D) as q")
    check_shape("v", v, (*lead, k.shape[-2], None), "(..., kv_len, Dv) as k")
    check_param_dtype("k", k, q, "q is")
    check_param_dtype("v", v, q, "q is")
    if mask is not None:
        masks.broadcast_mask(mask, (*lead, q.shape[-2], k.shape[-2]))


def _prepare(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool
) -> tuple[Tensor | None, Tensor | None, Tensor, Tensor]:
    """The mask both paths use, its empty rows, and the keys and values
    with those no query sees zeroed (0 * NaN is NaN)."""
    mask, empty, unseen = masks.prepare_mask(
        mask, q.shape[-2], k.shape[-2], is_causal=is_causal, dtype=q.dtype,
        device=q.device,
    )
    if unseen is not None:
        k, v = k.masked_fill(unseen, 0.0), v.masked_fill(unseen, 0.0)
    return mask, empty, k, v


def _fused_attention(
    q: Tensor, k: Tensor, v: Tensor, attn_mask: Tensor | None,
    is_causal: bool, dropout_p: float,
) -> Tensor:
    """PyTorch's kernel under the written-out path's masking rules."""
    mask, empty, k, v = _prepare(q, k, v, attn_mask, is_causal)
    out = F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, dropout_p=dropout_p,
        is_causal=is_causal and mask is None,
    )
    return out if empty is None else out.masked_fill(empty, 0.0)


class KVCache:
    """One attention layer's keys and values, kept between decoding steps.

    Each call of :class:`MultiHeadAttention` with ``cache=`` appends its
    keys and values, its query ``i`` at position ``offset + i``; the buffer
    doubles when full, and :meth:`keep_last` slides a window.
    """

    def __init__(self) -> None:
        self._keys: Tensor | None = None  # (B, H, capacity, head_dim)
        self._values: Tensor | None = None  # (B, H, capacity, head_dim)
        self._length = 0
        self.offset = 0  # the absolute position of the next token

    def __len__(self) -> int:
        return self._length

    @property
    def capacity(self) -> int:
        """Positions the buffer holds before it must grow."""
        return 0 if self._keys is None else self._keys.shape[2]

    @property
    def keys(self) -> Tensor:
        """The cached keys, a view ``(B, H, len, head_dim)``."""
        return self._view(self._keys)

    @property
    def values(self) -> Tensor:
        """The cached values, a view ``(B, H, len, head_dim)``."""
        return self._view(self._values)

    def _view(self, buffer: Tensor | None) -> Tensor:
        if buffer is None:
            raise ValueError("the cache is empty: append keys first")
        return buffer[:, :, : self._length]

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Add keys and values ``(B, H, T, head_dim)``; return all cached,
        two views ``(B, H, len + T, head_dim)``."""
        held = self._keys
        b, h, _, d = (None,) * 4 if held is None else held.shape
        check_shape("k", k, (b, h, None, d), "(B, H, T, head_dim) as held")
        check_shape("v", v, k.shape, "the shape of k")
        if held is not None:
            check_param_dtype("k", k, held, "the cache holds")
        end = self._length + k.shape[2]
        if end > self.capacity:  # double the buffer
            shape = (*k.shape[:2], max(end, 2 * self.capacity), k.shape[3])
            new_keys, new_values = k.new_empty(shape), v.new_empty(shape)
            if self._keys is not None and self._values is not None:
                new_keys[:, :, : self._length] = self.keys
                new_values[:, :, : self._length] = self.values
            self._keys, self._values = new_keys, new_values
        assert self._keys is not None and self._values is not None
        self._keys[:, :, self._length : end] = k
        self._values[:, :, self._length : end] = v
        self._length = end
        self.offset += k.shape[2]
        return self.keys, self.values

    def keep_last(self, n: int) -> None:
        """Drop all but the last ``n`` positions (``offset`` stays)."""
        n = check_int("n", n, minimum=0)
        if n >= self._length:
            return
        assert self._keys is not None and self._values is not None
        start = self._length - n
        for buffer in (self._keys, self._values):
            # Overlapping source and target: copy the kept part first.
            buffer[:, :, :n] = buffer[:, :, start : self._length].clone()
        self._length = n

    def reset(self) -> None:
        """Empty the cache (and free its buffer); ``offset`` is 0."""
        self._keys = self._values = None
        self._length = self.offset = 0


def check_cache(cache: Any, num_layers: int) -> tuple[int, int]:
    """``cache``: ``None`` or one :class:`KVCache` per layer; returns the
    position of the next token and the number of keys held."""
    if cache is None:
        return 0, 0
    if isinstance(cache, KVCache) or not all(
        isinstance(layer, KVCache) for layer in cache
    ):
        raise TypeError(
            "cache must be a sequence of KVCache, one per layer (from "
            "make_cache())"
        )
    if len(cache) != num_layers:
        raise ValueError(
            f"cache has {len(cache)} entries, expected one per layer "
            f"(num_layers={num_layers})"
        )
    return cache[0].offset, len(cache[0])


class MultiHeadAttention(nn.Module):
    r"""Multi-head attention (Vaswani et al., 2017, section 3.2.2).

    .. math::

        \mathrm{head}_h = \mathrm{Attention}(Q W^Q_h, K W^K_h, V W^V_h),
        \quad \mathrm{MultiHead}(Q, K, V)
        = \mathrm{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_H) W^O

    Initialised as ``nn.MultiheadAttention``. ``rotary`` rotates queries
    and keys by their positions (RoPE, Su et al., 2021). Set ``fused =
    False`` on an instance for the written-out path.

    Args:
        d_model: model width, divisible by ``num_heads``.
        num_heads: number of heads of ``head_dim = d_model // num_heads``.
        dropout: dropout on the attention weights (training mode only).
        bias: whether the four projections have biases.
        rotary: ``None`` or a ``RotaryEmbedding`` of ``head_dim``.

    Shape:
        query: ``(B, q_len, d_model)``; key, value: ``(B, kv_len,
        d_model)``; attn_mask broadcasts to ``(B, H, q_len, kv_len)``;
        returns ``(B, q_len, d_model)``.
    """

    fused = True  # PyTorch's kernel; False: scaled_dot_product_attention
    check_inputs = True  # False when the module around it checks them
    captured: list[Tensor] | None = None  # set by capture_attention

    def __init__(
        self, d_model: int, num_heads: int, *, dropout: float = 0.0,
        bias: bool = True, rotary: RotaryEmbedding | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.d_model = check_int("d_model", d_model)
        self.num_heads = check_int("num_heads", num_heads)
        check_divisible("d_model", d_model, "num_heads", num_heads)
        self.head_dim = d_model // num_heads
        self.dropout = check_probability("dropout", dropout)
        factory: dict[str, Any] = {"bias": check_bool("bias", bias),
                                   "device": device,
                                   "dtype": check_float_dtype("dtype", dtype)}
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (
            nn.Linear(d_model, d_model, **factory) for _ in range(4)
        )
        if rotary is not None:
            check_instance("rotary", rotary, RotaryEmbedding,
                           "a RotaryEmbedding (forward(x, *, offset))")
            if rotary.head_dim != self.head_dim:
                raise ValueError(
                    f"rotary has head_dim={rotary.head_dim}, expected "
                    f"head_dim={self.head_dim} (d_model // num_heads)"
                )
        self.rotary = rotary
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Initialise the weights as ``nn.MultiheadAttention`` does."""
        # Xavier-uniform over the packed (3 d_model, d_model) matrix that
        # PyTorch uses, applied to each third.
        bound = math.sqrt(6.0 / (self.d_model + 3 * self.d_model))
        for proj in (self.q_proj, self.k_proj, self.v_proj):
            nn.init.uniform_(proj.weight, -bound, bound)
        self.out_proj.reset_parameters()
        for proj in (self.q_proj, self.k_proj, self.v_proj, self.out_proj):
            if proj.bias is not None:
                nn.init.zeros_(proj.bias)

    @property
    def bias(self) -> bool:
        """Whether the projections have biases."""
        return self.q_proj.bias is not None

    def extra_repr(self) -> str:
        return (f"d_model={self.d_model}, num_heads={self.num_heads}, "
                f"dropout={self.dropout}, bias={self.bias}, "
                f"fused={self.fused}")

    def forward(
        self, query: Tensor, key: Tensor | None = None,
        value: Tensor | None = None, attn_mask: Tensor | None = None, *,
        is_causal: bool = False, cache: KVCache | None = None,
    ) -> Tensor:
        """Attend from ``query`` to ``key`` and ``value``.

        Args:
            query: the sequence that asks.
            key, value: the sequence looked up and the one averaged;
                ``query`` and ``key`` when ``None`` (self-attention).
            attn_mask: ``None``, a boolean mask (``True`` = may attend) or
                a float bias, broadcasting to ``(B, H, q_len, kv_len)``.
            is_causal: apply a causal mask, merged with ``attn_mask``; with
                a cache, aligned so that the queries are the last keys.
            cache: a :class:`KVCache` for self-attention while decoding;
                ``kv_len`` then counts the cached positions too.
        """
        key = query if key is None else key
        value = key if value is None else value
        if self.check_inputs:
            self.check(query, key, value, attn_mask, is_causal=is_causal,
                       cache=cache)
        offset = 0 if cache is None else cache.offset
        q = self._split_heads(self.q_proj(query))  # (B, H, q_len, head_dim)
        k = self._split_heads(self.k_proj(key))  # (B, H, T, head_dim)
        v = self._split_heads(self.v_proj(value))  # (B, H, T, head_dim)
        if self.rotary is not None:
            q, k = self.rotary(q, offset=offset), self.rotary(k, offset=offset)
        if cache is not None:  # the queries are the last q_len keys
            k, v = cache.append(k, v)  # (B, H, kv_len, head_dim)
            attn_mask = _after_cache(q, k, attn_mask, is_causal)
            is_causal = False
        p = self.dropout if self.training else 0.0
        if self.fused and self.captured is None:
            out = _fused_attention(q, k, v, attn_mask, is_causal, p)
        else:
            out, weights = scaled_dot_product_attention(
                q, k, v, attn_mask, is_causal=is_causal, dropout_p=p,
                return_weights=True)
            if self.captured is not None:
                self.captured.append(weights)
        return self.out_proj(self._merge_heads(out))

    def check(
        self, query: Tensor, key: Tensor, value: Tensor,
        attn_mask: Tensor | None = None, *, is_causal: bool = False,
        cache: KVCache | None = None,
        names: tuple[str, ...] = ("query", "key", "value", "attn_mask"),
    ) -> None:
        """Raise unless :meth:`forward` takes these inputs; ``names`` are
        the arguments' names in the caller's words."""
        q_name, k_name, v_name, mask_name = names
        check_bool("is_causal", is_causal)
        check_instance("cache", cache, (KVCache, type(None)),
                       "a KVCache or None")
        w, d = self.q_proj.weight, self.d_model
        batch, q_len, _ = check_shape(
            q_name, query, (None, None, d), "(B, q_len, d_model)", like=w
        ).shape
        kv = "(B, kv_len, d_model)"
        if cache is not None:
            kv = "(B, q_len, d_model): a cache is for self-attention"
        length = None if cache is None else q_len
        check_shape(k_name, key, (batch, length, d), kv, like=w)
        check_shape(v_name, value, key.shape, "the shape of key", like=w)
        if attn_mask is not None:
            kv_len = key.shape[1] + (0 if cache is None else len(cache))
            shape = (batch, self.num_heads, q_len, kv_len)
            masks.broadcast_mask(attn_mask, shape, name=mask_name)

    def _split_heads(self, x: Tensor) -> Tensor:
        batch, length, _ = x.shape
        # (B, T, d_model) -> (B, T, H, head_dim) -> (B, H, T, head_dim)
        x = x.view(batch, length, self.num_heads, self.head_dim)
        return x.transpose(1, 2)

    def _merge_heads(self, x: Tensor) -> Tensor:
        batch, _, length, _ = x.shape
        # (B, H, T, head_dim) -> (B, T, H, head_dim) -> (B, T, d_model)
        return x.transpose(1, 2).reshape(batch, length, self.d_model)

    @classmethod
    def from_torch(cls, module: nn.MultiheadAttention) -> MultiHeadAttention:
        """Copy an ``nn.MultiheadAttention`` (batch-first or not: the copy
        is batch-first), on its device and dtype, with its dropout."""
        check_twin(module, nn.MultiheadAttention, lambda m: {
            f"kdim={m.kdim}, vdim={m.vdim} != embed_dim": (
                not m._qkv_same_embed_dim
            ),
            "add_bias_kv=True": m.bias_k is not None,
            "add_zero_attn=True": m.add_zero_attn,
        })
        weight, bias = module.in_proj_weight, module.in_proj_bias
        ours = cls(module.embed_dim, module.num_heads, dropout=module.dropout,
                   bias=bias is not None, device=weight.device,
                   dtype=weight.dtype)
        with torch.no_grad():
            # PyTorch packs W_q, W_k, W_v as rows of one (3 d, d) matrix.
            for i, proj in enumerate((ours.q_proj, ours.k_proj, ours.v_proj)):
                proj.weight.copy_(weight.chunk(3)[i])
                if bias is not None:
                    proj.bias.copy_(bias.chunk(3)[i])
        ours.out_proj.load_state_dict(module.out_proj.state_dict())
        return ours.train(module.training)


def _after_cache(
    q: Tensor, k: Tensor, attn_mask: Tensor | None, is_causal: bool
) -> Tensor | None:
    """``attn_mask`` with the bottom-right causal mask, when there is more
    than one query (one query sees every cached key)."""
    if not is_causal or q.shape[2] == 1:
        return attn_mask
    causal = masks.bottom_right_causal_mask(q.shape[2], k.shape[2],
                                            device=q.device)
    return masks.merge_masks(causal, attn_mask)


def set_fused(model: nn.Module, fused: bool) -> nn.Module:
    """Choose the fused or the written-out path of every
    :class:`MultiHeadAttention` in ``model`` (itself included)."""
    fused = check_bool("fused", fused)
    for module in model.modules():
        if isinstance(module, MultiHeadAttention):
            module.fused = fused
    return model
