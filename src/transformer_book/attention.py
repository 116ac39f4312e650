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

__all__ = ["KVCache", "MultiHeadAttention", "flash_attention",
           "scaled_dot_product_attention", "set_fused"]


def scaled_dot_product_attention(
    q: Tensor, k: Tensor, v: Tensor, attn_mask: Tensor | None = None, *,
    is_causal: bool = False, dropout_p: float = 0.0,
    return_weights: bool = False, scale: float | None = None,
) -> Tensor | tuple[Tensor, Tensor]:
    r"""Scaled dot-product attention (Vaswani et al., 2017, eq. 1).

    .. math::

        \mathrm{Attention}(Q, K, V)
        = \mathrm{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}} + M\right) V

    (``scale`` replaces :math:`1 / \sqrt{d_k}`).
    :math:`M` is 0 where attention is allowed, the dtype's minimum where
    not (or the float bias given). A query row with no allowed key gets
    zeros; a key no query may see is zeroed, so a NaN there does not spread.

    Args:
        attn_mask: ``None``, a boolean mask (``True`` = may attend) or a
            float bias, broadcasting to ``(..., q_len, kv_len)``.
        is_causal: also apply the causal mask, aligned at the top left.
        dropout_p: dropout on the weights, applied whenever positive.
        return_weights: also return the weights (before dropout).

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
        if unseen.ndim > 2 and unseen.shape[-3] > k.shape[-3]:
            # Grouped heads: a key is unseen if its whole group skips it.
            unseen = unseen.unflatten(-3, (k.shape[-3], -1)).all(-3)
        k, v = k.masked_fill(unseen, 0.0), v.masked_fill(unseen, 0.0)
    return mask, empty, k, v


def _fused_attention(
    q: Tensor, k: Tensor, v: Tensor, attn_mask: Tensor | None,
    is_causal: bool, dropout_p: float,
) -> Tensor:
    """PyTorch's kernel under the written-out path's masking rules; k
    and v may have fewer heads than q (grouped-query attention)."""
    mask, empty, k, v = _prepare(q, k, v, attn_mask, is_causal)
    out = F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, dropout_p=dropout_p,
        is_causal=is_causal and mask is None,
        enable_gqa=q.shape[:-2] != k.shape[:-2],
    )
    return out if empty is None else out.masked_fill(empty, 0.0)


class KVCache:
    """One attention layer's keys and values, kept between decoding steps.

    Each call of :class:`MultiHeadAttention` with ``cache=`` appends its
    keys and values, its query ``i`` at position ``offset + i``; the buffer
    doubles when full, and :meth:`keep_last` slides a window. ``H`` here
    is the layer's ``num_kv_heads``: grouped heads keep a smaller cache.
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
        raise TypeError("cache must be a sequence of KVCache, one per layer "
                        "(from make_cache())")
    if len(cache) != num_layers:
        raise ValueError(f"cache has {len(cache)} entries, expected one per "
                         f"layer (num_layers={num_layers})")
    return cache[0].offset, len(cache[0])


class MultiHeadAttention(nn.Module):
    r"""Multi-head attention (Vaswani et al., 2017, section 3.2.2).

    .. math::

        \mathrm{head}_h = \mathrm{Attention}(Q W^Q_h, K W^K_h, V W^V_h),
        \quad \mathrm{MultiHead}(Q, K, V)
        = \mathrm{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_H) W^O

    Initialised as ``nn.MultiheadAttention``. ``rotary`` rotates queries
    and keys by their positions (RoPE, Su et al., 2021). Set ``fused =
    False`` on an instance for the written-out path. With ``G =
    num_kv_heads < H``, query head ``h`` reads key/value head ``h // (H //
    G)``: multi-query attention for ``G = 1`` (Shazeer, 2019), else
    grouped-query attention (Ainslie et al., 2023).

    Args:
        num_heads: number of heads of ``head_dim = d_model // num_heads``.
        num_kv_heads: heads of keys and values, dividing ``num_heads``;
            ``None`` means ``num_heads``.
        dropout: dropout on the attention weights (training mode only).
        rotary: ``None`` or a ``RotaryEmbedding`` of ``head_dim``.
        qk_norm: RMS-normalise each head's queries and keys (no gain;
            QK-norm, Henry et al., 2020): logits ``<= sqrt(head_dim)``.

    Shape:
        query: ``(B, q_len, d_model)``; key, value: ``(B, kv_len,
        d_model)``; attn_mask broadcasts to ``(B, H, q_len, kv_len)``;
        returns ``(B, q_len, d_model)``.
    """

    fused = True  # PyTorch's kernel; False: scaled_dot_product_attention
    check_inputs = True  # False when the module around it checks them
    captured: list[Tensor] | None = None  # set by capture_attention

    def __init__(
        self, d_model: int, num_heads: int, *,
        num_kv_heads: int | None = None, dropout: float = 0.0,
        bias: bool = True, rotary: RotaryEmbedding | None = None,
        qk_norm: bool = False, device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.qk_norm = check_bool("qk_norm", qk_norm)
        self.d_model = check_int("d_model", d_model)
        self.num_heads = check_int("num_heads", num_heads)
        check_divisible("d_model", d_model, "num_heads", num_heads)
        self.head_dim = d_model // num_heads
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        self.num_kv_heads = check_int("num_kv_heads", num_kv_heads)
        check_divisible("num_heads", num_heads, "num_kv_heads",
                        self.num_kv_heads)
        kv_dim = self.num_kv_heads * self.head_dim
        self.group_size = num_heads // self.num_kv_heads  # queries per kv head
        self.dropout = check_probability("dropout", dropout)
        factory: dict[str, Any] = {"bias": check_bool("bias", bias),
                                   "device": device,
                                   "dtype": check_float_dtype("dtype", dtype)}
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (
            nn.Linear(d_model, width, **factory)
            for width in (d_model, kv_dim, kv_dim, d_model)
        )
        if rotary is not None:
            check_instance("rotary", rotary, RotaryEmbedding,
                           "a RotaryEmbedding (forward(x, *, offset))")
            if rotary.head_dim != self.head_dim:
                raise ValueError(f"rotary has head_dim={rotary.head_dim}, "
                                 f"expected head_dim={self.head_dim} "
                                 "(d_model // num_heads)")
        self.rotary = rotary
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Initialise the weights as ``nn.MultiheadAttention`` does."""
        # Xavier-uniform over the packed (3 d_model, d_model) matrix that
        # PyTorch uses, applied to each third; with fewer key/value heads,
        # over the packed (d_model + 2 kv_dim, d_model) one.
        kv_dim = self.num_kv_heads * self.head_dim
        bound = math.sqrt(6.0 / (2 * self.d_model + 2 * kv_dim))
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
                f"num_kv_heads={self.num_kv_heads}, dropout={self.dropout}, "
                f"bias={self.bias}, qk_norm={self.qk_norm}, "
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
            attn_mask: as :func:`scaled_dot_product_attention`'s.
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
        # (B, H, q_len, head_dim) and (B, G, T, head_dim) twice
        q = self._split_heads(self.q_proj(query), self.qk_norm)
        k = self._split_heads(self.k_proj(key), self.qk_norm)
        v = self._split_heads(self.v_proj(value))
        if self.rotary is not None:
            q, k = self.rotary(q, offset=offset), self.rotary(k, offset=offset)
        if cache is not None:  # the queries are the last q_len keys
            k, v = cache.append(k, v)  # (B, G, kv_len, head_dim)
            attn_mask, is_causal = _after_cache(q, k, attn_mask, is_causal)
        p = self.dropout if self.training else 0.0
        if self.fused and self.captured is None:  # G heads: enable_gqa
            out = _fused_attention(q, k, v, attn_mask, is_causal, p)
        else:  # query head h reads key/value head h // group_size
            k, v = (x.repeat_interleave(self.group_size, 1) for x in (k, v))
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

    def _split_heads(self, x: Tensor, rms_norm: bool = False) -> Tensor:
        batch, length, _ = x.shape
        # (B, T, heads * head_dim) -> (B, T, heads, head_dim)
        # -> (B, heads, T, head_dim); heads is H, or G for keys and values
        x = x.view(batch, length, -1, self.head_dim)
        if rms_norm:  # QK-norm: each head's vector to RMS 1
            x = F.rms_norm(x, (self.head_dim,))
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
            f"kdim={m.kdim}, vdim={m.vdim} != embed_dim":
                not m._qkv_same_embed_dim,
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
) -> tuple[Tensor | None, bool]:
    """``attn_mask`` with the bottom-right causal mask, when there is more
    than one query (one query sees every cached key), and ``is_causal``
    then: ``False``, the mask holds it."""
    if not is_causal or q.shape[2] == 1:
        return attn_mask, False
    causal = masks.bottom_right_causal_mask(q.shape[2], k.shape[2],
                                            device=q.device)
    return masks.merge_masks(causal, attn_mask), False


def set_fused(model: nn.Module, fused: bool) -> nn.Module:
    """Choose the fused or the written-out path of every
    :class:`MultiHeadAttention` in ``model`` (itself included)."""
    fused = check_bool("fused", fused)
    for module in model.modules():
        if isinstance(module, MultiHeadAttention):
            module.fused = fused
    return model


def flash_attention(
    q: Tensor, k: Tensor, v: Tensor, *, is_causal: bool = False,
    block_size: int = 64,
) -> Tensor:
    r"""Exact attention, block by block, without the ``N x N`` scores
    (FlashAttention, Dao et al., 2022).

    Each block of queries walks the blocks of keys with an online softmax
    (Milakov and Gimelshein, 2018): a running maximum :math:`m`, a running
    sum :math:`\ell` and an accumulator :math:`o`, rescaled whenever the
    maximum grows,

    .. math::

        m' = \max(m, \max_j s_j), \quad
        \ell' = e^{m - m'} \ell + \sum_j e^{s_j - m'}, \quad
        o' = e^{m - m'} o + \sum_j e^{s_j - m'} v_j,

    and returns :math:`o / \ell`. Only ``q, k, v``, the output and each
    row's logsumexp :math:`m + \log \ell` are saved; the backward pass
    recomputes the probabilities block by block from them.

    The result equals ``F.scaled_dot_product_attention``'s (zeros where
    there are no keys).

    Args:
        is_causal: query ``i`` sees keys ``j <= i`` (top left, as
            PyTorch's ``is_causal=True``); key blocks wholly above the
            diagonal are skipped.
        block_size: queries and keys per block.

    Shape:
        As :func:`scaled_dot_product_attention`.
    """
    _check_qkv(q, k, v, None)
    is_causal = check_bool("is_causal", is_causal)
    block_size = check_int("block_size", block_size)
    return _FlashAttention.apply(q, k, v, is_causal, block_size)


def _key_blocks(i: int, kv_len: int, is_causal: bool, block: int) -> range:
    """Starts of the key blocks that the query block at ``i`` sees."""
    return range(0, min(i + 1, kv_len) if is_causal else kv_len, block)


def _block_scores(
    q_block: Tensor, k_block: Tensor, i: int, j: int, is_causal: bool
) -> Tensor:
    """Scores of queries ``i...`` against keys ``j...`` (``q`` scaled)."""
    s = q_block @ k_block.transpose(-2, -1)  # (..., q_block, k_block)
    if is_causal:  # query i + r sees key j + c when c <= r + (i - j)
        allowed = masks.causal_mask(*s.shape[-2:], offset=i - j,
                                    device=s.device)
        s = s.masked_fill(~allowed, -math.inf)
    return s


def _flash_forward(
    q: Tensor, k: Tensor, v: Tensor, is_causal: bool, block: int
) -> tuple[Tensor, Tensor]:
    """The output and each row's logsumexp, one block of queries at a
    time; nothing larger than ``(..., block, block)`` is made."""
    q = q * q.shape[-1] ** -0.5
    out = q.new_empty(*q.shape[:-1], v.shape[-1])  # (..., q_len, Dv)
    lse = q.new_empty(q.shape[:-1])  # (..., q_len)
    for i in range(0, q.shape[-2], block):
        q_i = q[..., i : i + block, :]  # (..., b, D)
        row_max = q_i.new_full(q_i.shape[:-1], -math.inf)  # m
        row_sum = torch.zeros_like(row_max)  # l
        acc = q_i.new_zeros(*q_i.shape[:-1], v.shape[-1])  # o
        for j in _key_blocks(i, k.shape[-2], is_causal, block):
            s = _block_scores(q_i, k[..., j : j + block, :], i, j, is_causal)
            new_max = torch.maximum(row_max, s.amax(dim=-1))
            p = torch.exp(s - new_max[..., None])  # (..., b, b)
            rescale = torch.exp(row_max - new_max)  # e^(m - m')
            row_sum = rescale * row_sum + p.sum(dim=-1)
            acc = rescale[..., None] * acc + p @ v[..., j : j + block, :]
            row_max = new_max
        # A row that saw a key has l >= 1 (its maximum adds e^0); a row
        # with none (kv_len = 0) gets zeros, as PyTorch's kernel does.
        out[..., i : i + block, :] = acc / row_sum.clamp_min(1.0)[..., None]
        lse[..., i : i + block] = row_max + row_sum.log()
    return out, lse


def _flash_backward(
    grad: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor,
    lse: Tensor, is_causal: bool, block: int,
) -> tuple[Tensor, Tensor, Tensor]:
    """Gradients of ``q, k, v``, recomputing ``P = exp(S - lse)`` block
    by block: ``dV = P^T dO``, ``dS = P * (dO V^T - rowsum(dO * O))``,
    ``dQ = dS K / sqrt(D)``, ``dK = dS^T Q / sqrt(D)``."""
    scale = q.shape[-1] ** -0.5
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    delta = (grad * out).sum(dim=-1)  # (..., q_len): rowsum(P * dP)
    for i in range(0, q.shape[-2], block):
        rows = slice(i, i + block)
        q_i, grad_i = q[..., rows, :] * scale, grad[..., rows, :]
        for j in _key_blocks(i, k.shape[-2], is_causal, block):
            cols = slice(j, j + block)
            s = _block_scores(q_i, k[..., cols, :], i, j, is_causal)
            p = torch.exp(s - lse[..., rows, None])  # recomputed weights
            dv[..., cols, :] += p.transpose(-2, -1) @ grad_i
            dp = grad_i @ v[..., cols, :].transpose(-2, -1)  # (..., b, b)
            ds = p * (dp - delta[..., rows, None])
            dq[..., rows, :] += ds @ k[..., cols, :] * scale
            dk[..., cols, :] += ds.transpose(-2, -1) @ q_i
    return dq, dk, dv


class _FlashAttention(torch.autograd.Function):
    """:func:`flash_attention`'s forward and recomputing backward."""

    @staticmethod
    def forward(
        ctx: Any, q: Tensor, k: Tensor, v: Tensor, is_causal: bool,
        block: int,
    ) -> Tensor:
        out, lse = _flash_forward(q, k, v, is_causal, block)
        ctx.save_for_backward(q, k, v, out, lse)  # no (N, N) tensor
        ctx.is_causal, ctx.block = is_causal, block
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        q, k, v, out, lse = ctx.saved_tensors
        grads = _flash_backward(grad, q, k, v, out, lse, ctx.is_causal,
                                ctx.block)
        return (*grads, None, None)
