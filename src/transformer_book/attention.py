"""Scaled dot-product attention and multi-head attention.

Two paths compute the same attention (Vaswani et al., 2017, eq. 1):

- the **explicit** path spells out ``softmax(Q K^T / sqrt(d_k) + M) V``
  with matmuls and can return the attention weights for plotting;
- the **fused** path calls
  :func:`torch.nn.functional.scaled_dot_product_attention`, which picks a
  fast kernel (FlashAttention, memory-efficient, or C++ math) and never
  materialises the weights.

:func:`scaled_dot_product_attention` takes the fused path unless the weights
are asked for or the explicit path is forced with :func:`explicit_attention`
(as timm's ``use_fused_attn`` switch does); tests show both agree.

Masks follow :mod:`transformer_book.masks`: a boolean mask is ``True`` where
attention is allowed, a float mask is an additive bias, and a query row with
no allowed key gives zeros rather than NaN.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._checks import (
    check_bool,
    check_float_dtype,
    check_int,
    check_number,
    check_param_dtype,
    check_probability,
    check_tensor,
)
from .masks import (
    bottom_right_causal_mask,
    broadcast_mask,
    causal_mask,
    disallowed_keys,
    disallowed_rows,
    mask_to_bias,
    merge_masks,
)

__all__ = [
    "KVCache",
    "MultiHeadAttention",
    "explicit_attention",
    "fused_attention_enabled",
    "scaled_dot_product_attention",
]

_fused_enabled = True


def fused_attention_enabled() -> bool:
    """Whether :func:`scaled_dot_product_attention` may use the fused path.

    Returns:
        ``False`` inside an :func:`explicit_attention` block, else ``True``.
    """
    return _fused_enabled


@contextmanager
def explicit_attention(enabled: bool = True) -> Iterator[None]:
    """Force the explicit (matmul-softmax-matmul) path inside a block.

    Tests use it to check the two paths agree; pages use it to show the
    explicit computation. Nested blocks restore the previous setting.

    Args:
        enabled: ``True`` forces the explicit path; ``False`` allows the
            fused path again inside an enclosing block.

    Example:
        >>> import torch
        >>> q = k = v = torch.randn(1, 3, 4)
        >>> with explicit_attention():
        ...     out = scaled_dot_product_attention(q, k, v)
        >>> out.shape
        torch.Size([1, 3, 4])
    """
    global _fused_enabled
    previous = _fused_enabled
    _fused_enabled = not check_bool("enabled", enabled)
    try:
        yield
    finally:
        _fused_enabled = previous


def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    attn_mask: Tensor | None = None,
    *,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    return_weights: bool = False,
    scale: float | None = None,
) -> Tensor | tuple[Tensor, Tensor]:
    r"""Scaled dot-product attention (Vaswani et al., 2017, eq. 1).

    .. math::

        \mathrm{Attention}(Q, K, V)
        = \mathrm{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}} + M\right) V

    where :math:`M` is 0 where attention is allowed and the dtype's minimum
    where it is not (or the float bias given). Rows of the weights sum to 1;
    a query row with no allowed key gets all-zero weights and a zero output.
    A key that no query may attend to (padding) is ignored completely: its
    key and value are zeroed first, so a NaN there does not spread.

    Args:
        q: queries.
        k: keys.
        v: values.
        attn_mask: ``None``, a boolean mask (``True`` = may attend) or a
            float additive bias; it must broadcast to
            ``(..., q_len, kv_len)``. A float key is blocked where it holds
            its own dtype's minimum (or ``-inf``), whatever ``q``'s dtype.
        dropout_p: dropout probability on the attention weights (applied
            whenever it is positive: pass 0 in evaluation).
        is_causal: also apply a causal mask (query ``i`` sees keys
            ``0..i``, aligned at the top left); merged with ``attn_mask``
            when both are given. For queries that follow cached keys,
            pass :func:`~transformer_book.masks.bottom_right_causal_mask`
            as ``attn_mask`` instead (as :class:`KVCache` users do).
        return_weights: also return the attention weights (explicit path).
        scale: the factor applied to ``Q K^T``; ``1 / sqrt(D)`` when
            ``None``.

    Shape:
        - q: ``(..., q_len, D)``; k: ``(..., kv_len, D)``;
          v: ``(..., kv_len, Dv)``, with the same leading dims (usually
          ``(B, H)``).
        - returns ``(..., q_len, Dv)``, and weights ``(..., q_len, kv_len)``.

    Returns:
        The attended values, or ``(values, weights)`` with
        ``return_weights=True``. The weights are those before dropout.

    Raises:
        TypeError: if an input is not a float tensor, or ``attn_mask`` is
            neither bool nor float.
        ValueError: if shapes do not fit together, ``attn_mask`` does not
            broadcast, or ``dropout_p`` is outside ``[0, 1)``.
    """
    _check_qkv(q, k, v)
    dropout_p = check_probability("dropout_p", dropout_p)
    is_causal = check_bool("is_causal", is_causal)
    return_weights = check_bool("return_weights", return_weights)
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    scale = check_number("scale", scale)
    attn_mask, empty, unseen = _prepare_mask(attn_mask, q, k, is_causal)
    is_causal = is_causal and attn_mask is None  # else merged into it
    if unseen is not None:
        # 0 * NaN is NaN: a masked key must hold numbers to weigh nothing.
        k, v = k.masked_fill(unseen, 0.0), v.masked_fill(unseen, 0.0)

    weights = None
    if return_weights or not _fused_enabled:
        out, weights = _explicit(
            q, k, v, attn_mask, is_causal, dropout_p, scale
        )
    else:  # PyTorch's SDPA picks a fast kernel; it returns no weights.
        out = F.scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=attn_mask,
            dropout_p=dropout_p,
            is_causal=is_causal,
            scale=scale,
        )
    out = _zero_rows(out, empty)
    if weights is None or not return_weights:
        return out
    return out, _zero_rows(weights, empty)


def _check_qkv(q: Any, k: Any, v: Any) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor(name, t, floating=True)
        if t.ndim < 2:
            raise ValueError(
                f"{name} must have at least 2 dims (..., L, D), got shape "
                f"{tuple(t.shape)}"
            )
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(
            f"q, k and v must have the same dtype, got {q.dtype}, "
            f"{k.dtype} and {v.dtype}"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same feature size D, got "
            f"q {tuple(q.shape)} and k {tuple(k.shape)}"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same length kv_len, got "
            f"k {tuple(k.shape)} and v {tuple(v.shape)}"
        )
    if not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2]):
        raise ValueError(
            f"q, k and v must have the same leading (batch, head) dims, "
            f"got q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )


def _prepare_mask(
    attn_mask: Tensor | None, q: Tensor, k: Tensor, is_causal: bool
) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
    """Check ``attn_mask``, merge the causal mask into it, find empty rows.

    Returns the mask (bool, or a float bias in ``q``'s dtype), the rows
    ``(..., q_len, 1)`` that allow no key and the keys ``(..., kv_len, 1)``
    that no query may see (both ``None`` without a mask: a causal mask
    alone never empties a row or hides a key from every query). The empty
    rows are opened up in the returned mask: their softmax would be NaN
    (or overflow in float16) in some kernels, forward or backward, and
    their output is replaced by zeros afterwards, so what they attend to
    does not matter and their gradient is zero.
    """
    if attn_mask is None:
        return None, None, None
    q_len, kv_len = q.shape[-2], k.shape[-2]
    broadcast_mask(attn_mask, (*q.shape[:-2], q_len, kv_len))
    attn_mask = attn_mask.to(q.device)
    if attn_mask.ndim < 2:
        # A (kv_len,) mask: the fused kernel wants (..., q_len, kv_len).
        attn_mask = attn_mask.expand(q_len, kv_len)
    if is_causal:
        causal = causal_mask(q_len, kv_len, device=q.device)
        attn_mask = merge_masks(causal, attn_mask)
    # On the mask's own dtype: a float32 minimum cast to float64 is no
    # longer float64's minimum, and the row would look allowed.
    empty = disallowed_rows(attn_mask)
    unseen = disallowed_keys(attn_mask).transpose(-2, -1)  # (..., kv_len, 1)
    if attn_mask.dtype == torch.bool:
        return attn_mask | empty, empty, unseen
    bias = mask_to_bias(attn_mask, q.dtype).masked_fill(empty, 0.0)
    return bias, empty, unseen


def _zero_rows(x: Tensor, empty: Tensor | None) -> Tensor:
    """Zeros for the rows that allow no key: never NaN or an average."""
    return x if empty is None else x.masked_fill(empty, 0.0)


def _explicit(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    attn_mask: Tensor | None,
    is_causal: bool,
    dropout_p: float,
    scale: float,
) -> tuple[Tensor, Tensor]:
    """matmul, scale, mask, softmax, (dropout), matmul."""
    # Scale q before the product: in float16, q @ k^T can overflow where
    # (q * scale) @ k^T does not (the fused kernels scale first too).
    scores = (q * scale) @ k.transpose(-2, -1)  # (..., q_len, kv_len)
    if is_causal:
        attn_mask = causal_mask(q.shape[-2], k.shape[-2], device=q.device)
    low = torch.finfo(scores.dtype).min
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        scores = scores.masked_fill(~attn_mask, low)
    elif attn_mask is not None:
        scores = (scores + attn_mask).clamp_min(low)
    weights = scores.softmax(dim=-1)
    attended = weights
    if dropout_p > 0.0:
        attended = F.dropout(weights, p=dropout_p, training=True)
    return attended @ v, weights


class KVCache:
    r"""One attention layer's keys and values, kept between decoding steps.

    Generating token :math:`t` with a decoder needs the keys and values of
    tokens :math:`0..t-1` at every layer; they do not change once computed
    (causal attention: an earlier token never sees a later one), so the
    cache keeps them and each step projects only the new token. A step
    then costs :math:`O(t)` attention work instead of recomputing all
    :math:`t` tokens' projections and feed-forward networks.

    Pass one cache per layer as ``cache=`` to
    :meth:`MultiHeadAttention.forward` (self-attention only): the call's
    keys and values are appended, attention runs over everything cached,
    and query ``i`` of the call sits at absolute position ``p + i``, where
    ``p`` is :attr:`offset`, the number of positions seen before the call.
    Rotary embeddings rotate by those absolute positions, and
    ``is_causal=True`` uses the bottom-right causal mask
    (:func:`~transformer_book.masks.bottom_right_causal_mask`).

    The storage grows in place: a buffer of some capacity, doubled when a
    call does not fit, so appending ``T`` tokens one at a time copies
    :math:`O(T)` elements in all. :meth:`keep_last` drops the oldest
    positions (a sliding window) without changing :attr:`offset`.

    The cache is meant for inference (under ``torch.no_grad()``); it
    writes into its buffer in place, which autograd cannot differentiate
    through across steps.

    Attributes:
        offset: the absolute position of the next token (positions seen).

    Example:
        >>> cache = KVCache()
        >>> k = v = torch.randn(2, 4, 3, 8)  # (B, H, T, head_dim)
        >>> keys, values = cache.append(k, v)
        >>> keys.shape, len(cache), cache.offset
        (torch.Size([2, 4, 3, 8]), 3, 3)
    """

    def __init__(self) -> None:
        self._keys: Tensor | None = None  # (B, H, capacity, head_dim)
        self._values: Tensor | None = None  # (B, H, capacity, head_dim)
        self._length = 0
        self.offset = 0

    def __len__(self) -> int:
        """The number of positions held (at most :attr:`offset`)."""
        return self._length

    def __repr__(self) -> str:
        shape = None if self._keys is None else tuple(self.keys.shape)
        return f"KVCache(len={self._length}, offset={self.offset}, {shape})"

    @property
    def capacity(self) -> int:
        """Positions the buffer holds before it must grow."""
        return 0 if self._keys is None else self._keys.shape[2]

    @property
    def keys(self) -> Tensor:
        """The cached keys, a view ``(B, H, len, head_dim)``."""
        if self._keys is None:
            raise ValueError("the cache is empty: append keys first")
        return self._keys[:, :, : self._length]

    @property
    def values(self) -> Tensor:
        """The cached values, a view ``(B, H, len, head_dim)``."""
        if self._values is None:
            raise ValueError("the cache is empty: append values first")
        return self._values[:, :, : self._length]

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Add one call's keys and values; return everything cached.

        Args:
            k: the new keys.
            v: the new values.

        Shape:
            - k, v: ``(B, H, T, head_dim)``.
            - returns two views ``(B, H, len + T, head_dim)``.

        Returns:
            ``(keys, values)``: the cached positions followed by the new
            ones.

        Raises:
            TypeError: if ``k`` or ``v`` is not a floating tensor, or their
                dtype differs from the cache's.
            ValueError: if ``k`` or ``v`` is not 4-D, they differ in shape,
                or ``B``, ``H`` or ``head_dim`` differ from the cache's.
        """
        self._check(k, v)
        end = self._length + k.shape[2]
        if end > self.capacity:
            self._grow(k, v, end)
        assert self._keys is not None and self._values is not None
        self._keys[:, :, self._length : end] = k
        self._values[:, :, self._length : end] = v
        self._length = end
        self.offset += k.shape[2]
        return self.keys, self.values

    def keep_last(self, n: int) -> None:
        """Drop all but the last ``n`` positions (:attr:`offset` stays).

        Args:
            n: the number of positions to keep; nothing changes when the
                cache holds ``n`` or fewer.

        Raises:
            TypeError: if ``n`` is not an int.
            ValueError: if ``n`` is negative.
        """
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
        """Empty the cache (and free its buffer); :attr:`offset` is 0."""
        self._keys = self._values = None
        self._length = self.offset = 0

    def _grow(self, k: Tensor, v: Tensor, needed: int) -> None:
        capacity = max(needed, 2 * self.capacity)
        batch, heads, _, head_dim = k.shape
        new_keys = k.new_empty(batch, heads, capacity, head_dim)
        new_values = v.new_empty(batch, heads, capacity, v.shape[-1])
        if self._keys is not None and self._values is not None:
            new_keys[:, :, : self._length] = self.keys
            new_values[:, :, : self._length] = self.values
        self._keys, self._values = new_keys, new_values

    def _check(self, k: Any, v: Any) -> None:
        check_tensor("k", k, ndim=4, floating=True)
        check_tensor("v", v, ndim=4, floating=True)
        if k.shape != v.shape:
            raise ValueError(
                f"k and v must have the same shape (B, H, T, head_dim), got "
                f"{tuple(k.shape)} and {tuple(v.shape)}"
            )
        if self._keys is None:
            return
        expected = self._keys.shape
        if (k.shape[0], k.shape[1], k.shape[3]) != (
            expected[0],
            expected[1],
            expected[3],
        ):
            raise ValueError(
                f"k of shape {tuple(k.shape)} does not fit the cache of "
                f"(B, H, head_dim) = ({expected[0]}, {expected[1]}, "
                f"{expected[3]})"
            )
        if k.dtype != self._keys.dtype or k.device != self._keys.device:
            raise TypeError(
                f"k has dtype {k.dtype} on {k.device}, the cache holds "
                f"{self._keys.dtype} on {self._keys.device}"
            )


class MultiHeadAttention(nn.Module):
    r"""Multi-head attention (Vaswani et al., 2017, section 3.2.2).

    .. math::

        \mathrm{head}_h &= \mathrm{Attention}(Q W^Q_h, K W^K_h, V W^V_h) \\
        \mathrm{MultiHead}(Q, K, V)
        &= \mathrm{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_H) W^O

    The projections ``q_proj``, ``k_proj`` and ``v_proj`` map ``d_model``
    features to ``num_heads`` heads of ``head_dim = d_model // num_heads``
    features each (all heads in one ``nn.Linear``); ``out_proj`` mixes the
    concatenated heads. Self-attention passes the same tensor as query, key
    and value; cross-attention takes keys and values from another sequence,
    which may have a different length.

    With ``rotary``, queries and keys are rotated by their positions after
    the split into heads (RoPE, Su et al., 2021): query ``i`` and key ``j``
    sit at positions ``i`` and ``j``.

    The initialisation matches ``nn.MultiheadAttention``: Xavier-uniform
    projections (with the fan of the packed ``(3 d_model, d_model)`` input
    matrix), zero biases, and PyTorch's default ``nn.Linear`` weight for
    ``out_proj``.

    Args:
        d_model: model width, divisible by ``num_heads``.
        num_heads: number of attention heads.
        dropout: dropout probability on the attention weights (training
            mode only).
        bias: whether the four projections have biases.
        rotary: ``None``, or a module applied to the queries and to the
            keys of shape ``(B, H, T, head_dim)``, such as
            :class:`~transformer_book.positional.RotaryEmbedding` with
            ``head_dim``.
        device: device of the parameters.
        dtype: dtype of the parameters.

    Shape:
        - query: ``(B, q_len, d_model)``; key, value:
          ``(B, kv_len, d_model)``.
        - attn_mask: anything that broadcasts to ``(B, H, q_len, kv_len)``:
          ``(q_len, kv_len)``, ``(B, 1, 1, kv_len)`` (a padding mask),
          ``(B, 1, q_len, kv_len)``, ``(B, H, q_len, kv_len)``.
        - returns ``(B, q_len, d_model)`` and weights
          ``(B, H, q_len, kv_len)``.

    Example:
        >>> mha = MultiHeadAttention(16, 4)
        >>> x = torch.randn(2, 5, 16)
        >>> mha(x, x, x).shape
        torch.Size([2, 5, 16])
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        *,
        dropout: float = 0.0,
        bias: bool = True,
        rotary: nn.Module | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.d_model, self.num_heads = _check_heads(d_model, num_heads)
        self.head_dim = d_model // num_heads
        self.dropout = check_probability("dropout", dropout)
        bias = check_bool("bias", bias)
        dtype = check_float_dtype("dtype", dtype)
        factory = {"device": device, "dtype": dtype}
        self.q_proj = nn.Linear(d_model, d_model, bias=bias, **factory)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias, **factory)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias, **factory)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias, **factory)
        self.rotary = _check_rotary(rotary, self.head_dim)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Initialise the weights as ``nn.MultiheadAttention`` does."""
        # Xavier-uniform over the packed (3 d_model, d_model) matrix that
        # PyTorch uses, applied to each third.
        bound = math.sqrt(6.0 / (self.d_model + 3 * self.d_model))
        for proj in (self.q_proj, self.k_proj, self.v_proj):
            nn.init.uniform_(proj.weight, -bound, bound)
            if proj.bias is not None:
                nn.init.zeros_(proj.bias)
        self.out_proj.reset_parameters()
        if self.out_proj.bias is not None:
            nn.init.zeros_(self.out_proj.bias)

    @property
    def bias(self) -> bool:
        """Whether the projections have biases."""
        return self.q_proj.bias is not None

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, num_heads={self.num_heads}, "
            f"dropout={self.dropout}, bias={self.bias}"
        )

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        attn_mask: Tensor | None = None,
        *,
        is_causal: bool = False,
        need_weights: bool = False,
        cache: KVCache | None = None,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Attend from ``query`` to ``key``/``value``.

        Args:
            query: the sequence that asks.
            key: the sequence that is looked up.
            value: what is averaged; same length as ``key``.
            attn_mask: ``None``, a boolean mask (``True`` = may attend) or
                a float bias, broadcasting to ``(B, H, q_len, kv_len)``.
            is_causal: apply a causal mask (merged with ``attn_mask``);
                aligned at the top left without a cache, at the bottom
                right with one.
            need_weights: also return the per-head attention weights
                (forces the explicit path).
            cache: a :class:`KVCache` for self-attention while decoding:
                this call's keys and values are appended to it and the
                queries attend to everything cached. Query ``i`` sits at
                absolute position ``p + i``, ``p = cache.offset`` before
                the call (rotary embeddings use it), and with
                ``is_causal`` it sees the keys at positions ``<= p + i``.

        Shape:
            - query: ``(B, q_len, d_model)``; key, value:
              ``(B, T, d_model)`` (``T = q_len`` with a cache).
            - returns ``(B, q_len, d_model)``; weights
              ``(B, H, q_len, kv_len)``, where ``kv_len = T`` without a
              cache and the number of cached positions (these ``T``
              included) with one.

        Returns:
            The output, or ``(output, weights)`` with ``need_weights``.

        Raises:
            TypeError: if an input is not a float tensor, ``attn_mask``
                is neither bool nor float, or ``cache`` is not a
                :class:`KVCache`.
            ValueError: if an input is not 3-D, a feature size is not
                ``d_model``, batch sizes or key/value lengths differ,
                ``attn_mask`` does not broadcast to ``(B, H, q_len, kv_len)``,
                or, with a cache, query and key differ in length.
        """
        self._check_inputs(query, key, value)
        is_causal = check_bool("is_causal", is_causal)
        need_weights = check_bool("need_weights", need_weights)
        if cache is not None and not isinstance(cache, KVCache):
            raise TypeError(
                f"cache must be a KVCache or None, got {type(cache).__name__}"
            )
        if cache is not None and key.shape[1] != query.shape[1]:
            raise ValueError(
                f"a cache is for self-attention: key has length "
                f"{key.shape[1]}, query {query.shape[1]}"
            )
        offset = 0 if cache is None else cache.offset
        q = self._split_heads(self.q_proj(query))  # (B, H, q_len, head_dim)
        k = self._split_heads(self.k_proj(key))  # (B, H, T, head_dim)
        v = self._split_heads(self.v_proj(value))  # (B, H, T, head_dim)
        if self.rotary is not None:
            q = self.rotary(q, offset=offset)
            k = self.rotary(k, offset=offset)
        if cache is not None:
            k, v = cache.append(k, v)  # (B, H, kv_len, head_dim)
            if is_causal:
                # Bottom right: the queries are the last q_len positions.
                # One query may see every cached key: no mask at all.
                if q.shape[2] > 1:
                    causal = bottom_right_causal_mask(
                        q.shape[2], k.shape[2], device=q.device
                    )
                    attn_mask = merge_masks(causal, attn_mask)
                is_causal = False
        out = scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask,
            dropout_p=self.dropout if self.training else 0.0,
            is_causal=is_causal,
            return_weights=need_weights,
        )
        weights: Tensor | None = None
        if isinstance(out, tuple):  # need_weights
            out, weights = out
        out = self.out_proj(self._merge_heads(out))
        return out if weights is None else (out, weights)

    def _split_heads(self, x: Tensor) -> Tensor:
        batch, length, _ = x.shape
        # (B, T, d_model) -> (B, T, H, head_dim) -> (B, H, T, head_dim)
        x = x.view(batch, length, self.num_heads, self.head_dim)
        return x.transpose(1, 2)

    def _merge_heads(self, x: Tensor) -> Tensor:
        batch, _, length, _ = x.shape
        # (B, H, T, head_dim) -> (B, T, H, head_dim) -> (B, T, d_model)
        return x.transpose(1, 2).reshape(batch, length, self.d_model)

    def _check_inputs(self, query: Any, key: Any, value: Any) -> None:
        for name, t in (("query", query), ("key", key), ("value", value)):
            check_tensor(name, t, ndim=3, floating=True)
            if t.shape[-1] != self.d_model:
                raise ValueError(
                    f"{name} has feature size {t.shape[-1]}, expected "
                    f"d_model={self.d_model}"
                )
            check_param_dtype(name, t, self.q_proj.weight)
        if not query.shape[0] == key.shape[0] == value.shape[0]:
            raise ValueError(
                f"query, key and value must have the same batch size, got "
                f"{query.shape[0]}, {key.shape[0]} and {value.shape[0]}"
            )
        if value.shape[1] != key.shape[1]:
            raise ValueError(
                f"key and value must have the same length, got key "
                f"{tuple(key.shape)} and value {tuple(value.shape)}"
            )

    @classmethod
    def from_torch(cls, module: nn.MultiheadAttention) -> MultiHeadAttention:
        """Copy the weights of an ``nn.MultiheadAttention``.

        Either ``batch_first`` works (the weights do not depend on it), but
        this module is always batch-first: transpose sequence-first inputs.
        The copy lives on the source's device and dtype and has its dropout.

        Args:
            module: the PyTorch module, with ``kdim == vdim == embed_dim``,
                no ``add_bias_kv`` and no ``add_zero_attn``.

        Returns:
            A ``MultiHeadAttention`` that computes the same function.

        Raises:
            TypeError: if ``module`` is not an ``nn.MultiheadAttention``.
            ValueError: for a configuration this module does not have.
        """
        _check_twin(module)
        weight = module.in_proj_weight
        has_bias = module.in_proj_bias is not None
        ours = cls(
            module.embed_dim,
            module.num_heads,
            dropout=module.dropout,
            bias=has_bias,
            device=weight.device,
            dtype=weight.dtype,
        )
        projs = (ours.q_proj, ours.k_proj, ours.v_proj)
        with torch.no_grad():
            # PyTorch packs W_q, W_k, W_v as rows of one (3 d, d) matrix.
            for proj, w in zip(projs, weight.chunk(3), strict=True):
                proj.weight.copy_(w)
            ours.out_proj.weight.copy_(module.out_proj.weight)
            if has_bias:
                biases = module.in_proj_bias.chunk(3)
                for proj, b in zip(projs, biases, strict=True):
                    proj.bias.copy_(b)
                ours.out_proj.bias.copy_(module.out_proj.bias)
        ours.train(module.training)
        return ours


def _check_heads(d_model: Any, num_heads: Any) -> tuple[int, int]:
    """Sizes of a multi-head block: ``d_model`` splits into the heads."""
    d_model = check_int("d_model", d_model)
    num_heads = check_int("num_heads", num_heads)
    if d_model % num_heads:
        raise ValueError(
            f"d_model={d_model} is not divisible by num_heads={num_heads}"
        )
    return d_model, num_heads


def _check_rotary(rotary: Any, head_dim: int) -> nn.Module | None:
    if rotary is None:
        return None
    if not isinstance(rotary, nn.Module):
        raise TypeError(
            f"rotary must be an nn.Module (such as RotaryEmbedding) or "
            f"None, got {type(rotary).__name__}"
        )
    forward = inspect.signature(rotary.forward).parameters.values()
    if not any(
        p.name == "offset" or p.kind is p.VAR_KEYWORD for p in forward
    ):
        raise TypeError(
            f"rotary must take the queries' position as forward(x, *, "
            f"offset), as RotaryEmbedding does; {type(rotary).__name__} "
            f"takes no offset"
        )
    size = getattr(rotary, "head_dim", head_dim)
    if size != head_dim:
        raise ValueError(
            f"rotary has head_dim={size}, expected head_dim={head_dim} "
            f"(d_model // num_heads)"
        )
    return rotary


def _check_twin(module: Any) -> None:
    """Raise unless ``from_torch`` can copy ``module`` exactly."""
    if not isinstance(module, nn.MultiheadAttention):
        raise TypeError(
            f"module must be nn.MultiheadAttention, got "
            f"{type(module).__name__}"
        )
    if not module._qkv_same_embed_dim:
        raise ValueError(
            f"module has kdim={module.kdim}, vdim={module.vdim} != "
            f"embed_dim={module.embed_dim}; only kdim == vdim == "
            f"embed_dim is supported"
        )
    if module.bias_k is not None or module.bias_v is not None:
        raise ValueError(
            "module was built with add_bias_kv=True, which is not supported"
        )
    if module.add_zero_attn:
        raise ValueError(
            "module was built with add_zero_attn=True, which is not supported"
        )
