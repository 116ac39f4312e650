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

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .masks import (
    broadcast_mask,
    causal_mask,
    disallowed_rows,
    merge_masks,
)

__all__ = [
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
    _fused_enabled = not enabled
    try:
        yield
    finally:
        _fused_enabled = previous


def _check_qkv(q: Any, k: Any, v: Any) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name} must be a Tensor, got {type(t).__name__}")
        if t.ndim < 2:
            raise ValueError(
                f"{name} must have at least 2 dims (..., L, D), got shape "
                f"{tuple(t.shape)}"
            )
        if not t.dtype.is_floating_point:
            raise TypeError(f"{name} must be floating, got {t.dtype}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same feature size D, got "
            f"q {tuple(q.shape)} and k {tuple(k.shape)}"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same length Lk, got k {tuple(k.shape)} "
            f"and v {tuple(v.shape)}"
        )
    if not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2]):
        raise ValueError(
            f"q, k and v must have the same leading (batch, head) dims, "
            f"got q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )


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

    Args:
        q: queries.
        k: keys.
        v: values.
        attn_mask: ``None``, a boolean mask (``True`` = may attend) or a
            float additive bias; it must broadcast to ``(..., Lq, Lk)``.
        dropout_p: dropout probability on the attention weights (applied
            whenever it is positive: pass 0 in evaluation).
        is_causal: also apply a causal mask (query ``i`` sees keys
            ``0..i``, aligned at the top left); merged with ``attn_mask``
            when both are given.
        return_weights: also return the attention weights (explicit path).
        scale: the factor applied to ``Q K^T``; ``1 / sqrt(D)`` when
            ``None``.

    Shape:
        - q: ``(..., Lq, D)``; k: ``(..., Lk, D)``; v: ``(..., Lk, Dv)``,
          with the same leading dims (usually ``(B, H)``).
        - returns ``(..., Lq, Dv)``, and weights ``(..., Lq, Lk)``.

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
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p={dropout_p} must be in [0, 1)")
    lq, lk = q.shape[-2], k.shape[-2]
    if attn_mask is not None:
        broadcast_mask(attn_mask, (*q.shape[:-2], lq, lk))
        if attn_mask.device != q.device:
            attn_mask = attn_mask.to(q.device)
        if attn_mask.dtype.is_floating_point:
            attn_mask = attn_mask.to(q.dtype)
    if is_causal and attn_mask is not None:
        attn_mask = merge_masks(
            causal_mask(lq, key_size=lk, device=q.device), attn_mask
        )
        is_causal = False
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    # Rows that allow no key at all are zeroed at the end; a causal mask
    # alone never empties a row (key 0 is always visible).
    empty = None if attn_mask is None else disallowed_rows(attn_mask)

    if return_weights or not _fused_enabled:
        out, weights = _explicit(
            q, k, v, attn_mask, empty, dropout_p, is_causal, scale
        )
        return (out, weights) if return_weights else out

    if attn_mask is not None:
        # Open up the rows that block every key: their softmax would be
        # NaN (or overflow in float16) in some kernels, forward or
        # backward. Their output is replaced by zeros just below, so what
        # they attend to does not matter and their gradient is zero.
        if attn_mask.dtype == torch.bool:
            attn_mask = attn_mask | empty
        else:
            attn_mask = attn_mask.masked_fill(empty, 0.0)
    out = F.scaled_dot_product_attention(
        q,
        k,
        v,
        attn_mask=attn_mask,
        dropout_p=dropout_p,
        is_causal=is_causal,
        scale=scale,
    )
    if empty is not None:
        out = out.masked_fill(empty, 0.0)
    return out


def _explicit(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    attn_mask: Tensor | None,
    empty: Tensor | None,
    dropout_p: float,
    is_causal: bool,
    scale: float,
) -> tuple[Tensor, Tensor]:
    """matmul, scale, mask, softmax, (dropout), matmul."""
    scores = (q @ k.transpose(-2, -1)) * scale  # (..., Lq, Lk)
    low = torch.finfo(scores.dtype).min
    if is_causal:
        allowed = causal_mask(
            q.shape[-2], key_size=k.shape[-2], device=q.device
        )
        scores = scores.masked_fill(~allowed, low)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, low)
        else:
            scores = (scores + attn_mask).clamp_min(low)
    weights = scores.softmax(dim=-1)
    if empty is not None:
        weights = weights.masked_fill(empty, 0.0)
    attended = weights
    if dropout_p > 0.0:
        attended = F.dropout(weights, p=dropout_p, training=True)
    return attended @ v, weights


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
        device: device of the parameters.
        dtype: dtype of the parameters.

    Shape:
        - query: ``(B, Lq, d_model)``; key, value: ``(B, Lk, d_model)``.
        - attn_mask: anything that broadcasts to ``(B, H, Lq, Lk)``:
          ``(Lq, Lk)``, ``(B, 1, 1, Lk)`` (a padding mask),
          ``(B, 1, Lq, Lk)``, ``(B, H, Lq, Lk)``.
        - returns ``(B, Lq, d_model)`` and weights ``(B, H, Lq, Lk)``.

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
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        _check_positive("d_model", d_model)
        _check_positive("num_heads", num_heads)
        if d_model % num_heads:
            raise ValueError(
                f"d_model={d_model} is not divisible by num_heads={num_heads}"
            )
        if isinstance(dropout, bool) or not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout={dropout} must be in [0, 1)")
        self.d_model = d_model
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.dropout = float(dropout)
        factory = {"device": device, "dtype": dtype}
        self.q_proj = nn.Linear(d_model, d_model, bias=bias, **factory)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias, **factory)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias, **factory)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias, **factory)
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

    def _project(
        self, query: Tensor, key: Tensor, value: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """The three input projections, fused into one matmul when the
        inputs are the same tensor (self-attention)."""
        projs = (self.q_proj, self.k_proj, self.v_proj)
        if query is key and key is value:
            return _packed_linear(query, projs).chunk(3, dim=-1)
        q = self.q_proj(query)
        if key is value:
            k, v = _packed_linear(key, projs[1:]).chunk(2, dim=-1)
            return q, k, v
        return q, self.k_proj(key), self.v_proj(value)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        attn_mask: Tensor | None = None,
        *,
        is_causal: bool = False,
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Attend from ``query`` to ``key``/``value``.

        Args:
            query: the sequence that asks.
            key: the sequence that is looked up.
            value: what is averaged; same length as ``key``.
            attn_mask: ``None``, a boolean mask (``True`` = may attend) or
                a float bias, broadcasting to ``(B, H, Lq, Lk)``.
            is_causal: apply a causal mask (merged with ``attn_mask``).
            need_weights: also return the per-head attention weights
                (forces the explicit path).

        Shape:
            - query: ``(B, Lq, d_model)``; key, value: ``(B, Lk, d_model)``.
            - returns ``(B, Lq, d_model)``; weights ``(B, H, Lq, Lk)``.

        Returns:
            The output, or ``(output, weights)`` with ``need_weights``.

        Raises:
            TypeError: if an input is not a tensor or ``attn_mask`` is
                neither bool nor float.
            ValueError: if an input is not 3-D, a feature size is not
                ``d_model``, batch sizes or key/value lengths differ, or
                ``attn_mask`` does not broadcast to ``(B, H, Lq, Lk)``.
        """
        for name, t in (("query", query), ("key", key), ("value", value)):
            if not isinstance(t, Tensor):
                raise TypeError(
                    f"{name} must be a Tensor, got {type(t).__name__}"
                )
            if t.ndim != 3:
                raise ValueError(
                    f"{name} must be 3-D (B, L, d_model), got shape "
                    f"{tuple(t.shape)}"
                )
            if t.shape[-1] != self.d_model:
                raise ValueError(
                    f"{name} has feature size {t.shape[-1]}, expected "
                    f"d_model={self.d_model}"
                )
        batch, lq, _ = query.shape
        lk = key.shape[1]
        if key.shape[0] != batch or value.shape[0] != batch:
            raise ValueError(
                f"query, key and value must have the same batch size, got "
                f"{batch}, {key.shape[0]} and {value.shape[0]}"
            )
        if value.shape[1] != lk:
            raise ValueError(
                f"key and value must have the same length, got key "
                f"{tuple(key.shape)} and value {tuple(value.shape)}"
            )

        q, k, v = self._project(query, key, value)
        # (B, L, d_model) -> (B, L, H, head_dim) -> (B, H, L, head_dim)
        q = q.view(batch, lq, self.num_heads, self.head_dim).transpose(1, 2)
        k = k.view(batch, lk, self.num_heads, self.head_dim).transpose(1, 2)
        v = v.view(batch, lk, self.num_heads, self.head_dim).transpose(1, 2)
        dropout_p = self.dropout if self.training else 0.0
        result = scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask,
            dropout_p=dropout_p,
            is_causal=is_causal,
            return_weights=need_weights,
        )
        out, weights = result if need_weights else (result, None)
        # (B, H, Lq, head_dim) -> (B, Lq, H, head_dim) -> (B, Lq, d_model)
        out = out.transpose(1, 2).reshape(batch, lq, self.d_model)
        out = self.out_proj(out)
        return (out, weights) if need_weights else out

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
                "module was built with add_bias_kv=True, which is not "
                "supported"
            )
        if module.add_zero_attn:
            raise ValueError(
                "module was built with add_zero_attn=True, which is not "
                "supported"
            )
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
        with torch.no_grad():
            w_q, w_k, w_v = weight.chunk(3, dim=0)
            ours.q_proj.weight.copy_(w_q)
            ours.k_proj.weight.copy_(w_k)
            ours.v_proj.weight.copy_(w_v)
            ours.out_proj.weight.copy_(module.out_proj.weight)
            if has_bias:
                b_q, b_k, b_v = module.in_proj_bias.chunk(3)
                ours.q_proj.bias.copy_(b_q)
                ours.k_proj.bias.copy_(b_k)
                ours.v_proj.bias.copy_(b_v)
                ours.out_proj.bias.copy_(module.out_proj.bias)
        ours.train(module.training)
        return ours


def _packed_linear(x: Tensor, projs: tuple[nn.Linear, ...]) -> Tensor:
    """Apply several ``nn.Linear`` to ``x`` with one matmul."""
    weight = torch.cat([p.weight for p in projs])
    bias = None
    if projs[0].bias is not None:
        bias = torch.cat([p.bias for p in projs])
    return F.linear(x, weight, bias)


def _check_positive(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"{name}={value} must be positive")
