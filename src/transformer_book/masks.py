"""Attention masks, built here only: boolean ``True`` = may attend (as
PyTorch's SDPA; its ``nn.MultiheadAttention`` takes ``~mask``), or a float
bias that blocks with the dtype's minimum; shapes broadcast to
``(B, H, q_len, kv_len)``."""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from typing import cast

import torch
from torch import Tensor

from ._checks import (
    check_float_dtype,
    check_int,
    check_integer_tensor,
    check_tensor,
    check_tensor_like,
)

__all__ = ["bottom_right_causal_mask", "broadcast_mask", "causal_mask",
           "check_mask_dtype", "disallowed_rows", "mask_to_bias",
           "merge_masks", "padding_mask", "prepare_mask",
           "sliding_window_mask"]


def causal_mask(q_len: int, kv_len: int | None = None, *, offset: int = 0,
                device: torch.device | str | None = None) -> Tensor:
    """Boolean ``(q_len, kv_len)`` mask: query ``i`` sees keys
    ``j <= i + offset`` (``offset=0``: top left, as PyTorch's
    ``is_causal=True``); ``kv_len`` is ``q_len`` when ``None``."""
    q_len = check_int("q_len", q_len, minimum=0)
    kv_len = check_int("kv_len", q_len if kv_len is None else kv_len,
                       minimum=0)
    offset = check_int("offset", offset, minimum=0)
    ones = torch.ones(q_len, kv_len, dtype=torch.bool, device=device)
    return torch.tril(ones, diagonal=offset)


def bottom_right_causal_mask(
    q_len: int, kv_len: int, *, device: torch.device | str | None = None
) -> Tensor:
    """Causal ``(q_len, kv_len)`` mask for queries that are the last
    ``q_len`` keys, after ``p = kv_len - q_len`` cached ones: query ``i``
    sees keys ``0..p+i``."""
    q_len = check_int("q_len", q_len, minimum=0)
    kv_len = check_int("kv_len", kv_len, minimum=q_len)
    return causal_mask(q_len, kv_len, offset=kv_len - q_len, device=device)


def sliding_window_mask(q_len: int, kv_len: int | None = None, *, window: int,
                        device: torch.device | str | None = None) -> Tensor:
    """Boolean ``(q_len, kv_len)`` causal mask of a sliding window (as in
    Mistral, Jiang et al., 2023): query ``i`` sees the ``window`` keys
    ``i - window < j <= i`` (top left); ``kv_len`` is ``q_len`` when
    ``None``."""
    window = check_int("window", window)
    causal = causal_mask(q_len, kv_len, device=device)
    return torch.triu(causal, diagonal=1 - window)


def padding_mask(lengths: Tensor | Sequence[int],
                 max_len: int | None = None) -> Tensor:
    """Boolean mask, ``False`` on the padding after each length.

    Args:
        max_len: the padded length; ``max(lengths)`` when ``None``.

    Shape:
        lengths: ``(B,)``; returns ``(B, 1, 1, max_len)``.
    """
    lengths = check_tensor_like("lengths", lengths, "a sequence of ints")
    check_int("len(lengths)", lengths.numel())  # a batch needs a length
    check_integer_tensor("lengths", lengths, "integers", ndim=1)
    longest = int(lengths.max())
    check_int("min(lengths)", int(lengths.min()), minimum=0)
    max_len = check_int("max_len", longest if max_len is None else max_len,
                        minimum=longest)
    positions = torch.arange(max_len, device=lengths.device)
    mask = positions < lengths[:, None]  # (B, max_len)
    return mask[:, None, None, :]  # (B, max_len) -> (B, 1, 1, max_len)


def check_mask_dtype(mask: Tensor, name: str = "attn_mask") -> Tensor:
    """Return ``mask`` if it is a boolean or floating tensor."""
    check_tensor(name, mask)
    if mask.dtype != torch.bool and not mask.dtype.is_floating_point:
        raise TypeError(f"{name} must be a bool mask (True = may attend) or a "
                        f"float bias, got dtype {mask.dtype}")
    return mask


def broadcast_mask(mask: Tensor, shape: Sequence[int], *,
                   name: str = "attn_mask") -> Tensor:
    """``mask`` expanded to the scores' ``shape`` (``(B, H, q_len,
    kv_len)``), which it must broadcast to; ``name`` is the argument's."""
    check_mask_dtype(mask, name)
    shape = tuple(int(s) for s in shape)
    trailing = shape[max(len(shape) - mask.ndim, 0) :]
    if mask.ndim > len(shape) or not all(
            m in (1, s) for m, s in zip(mask.shape, trailing, strict=True)):
        raise ValueError(
            f"{name} of shape {tuple(mask.shape)} does not broadcast to the "
            f"attention scores {shape} (B, H, q_len, kv_len); use "
            f"(q_len, kv_len), (B, 1, 1, kv_len) or (B, H, q_len, kv_len)")
    return mask.expand(shape)


def mask_to_bias(mask: Tensor, dtype: torch.dtype | None = None) -> Tensor:
    """A mask as a bias: 0 where allowed, the dtype's minimum (never
    ``-1e9``, too small in float16) where not; ``-inf`` is raised to it."""
    check_mask_dtype(mask, "mask")
    if dtype is None and mask.dtype.is_floating_point:
        dtype = mask.dtype
    low = torch.finfo(check_float_dtype("dtype", dtype)).min
    if mask.dtype == torch.bool:
        zeros = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
        return zeros.masked_fill(~mask, low)
    return mask.to(dtype).clamp_min(low)


def merge_masks(*masks: Tensor | None) -> Tensor | None:
    """Combine masks, ignoring ``None``: booleans by AND, biases by sum
    (clamped at the dtype's minimum, which a boolean block becomes)."""
    present = [check_mask_dtype(m, f"masks[{i}]")
               for i, m in enumerate(masks) if m is not None]
    try:
        torch.broadcast_shapes(*(m.shape for m in present))
    except RuntimeError as err:
        shapes = ", ".join(str(tuple(m.shape)) for m in present)
        raise ValueError(f"masks of shapes {shapes} do not broadcast "
                         f"together") from err
    if len(present) < 2:
        return present[0] if present else None
    if all(m.dtype == torch.bool for m in present):
        return reduce(torch.logical_and, present)
    floats = (m.dtype for m in present if m.dtype.is_floating_point)
    dtype = reduce(torch.promote_types, floats)
    low = torch.finfo(dtype).min
    biases = (mask_to_bias(m, dtype) for m in present)
    return reduce(lambda a, b: (a + b).clamp_min(low), biases)


def _allowed(mask: Tensor) -> Tensor:
    """``True`` where ``mask`` lets a query see a key (on its own dtype)."""
    if mask.dtype == torch.bool:
        return mask
    return mask > torch.finfo(mask.dtype).min


def disallowed_rows(mask: Tensor) -> Tensor:
    """The rows ``(..., q_len, 1)`` of a mask that allow no key."""
    return ~_allowed(mask).any(dim=-1, keepdim=True)


def prepare_mask(
    attn_mask: Tensor | None, q_len: int, kv_len: int, *, is_causal: bool,
    dtype: torch.dtype, device: torch.device,
) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
    """The mask both attention paths use, and where it allows nothing.

    Returns ``attn_mask`` merged with the top-left causal mask (bool, or a
    bias in ``dtype``), its rows ``(..., q_len, 1)`` that allow no key
    (opened: their softmax can be NaN; attention zeroes them) and the keys
    ``(..., kv_len, 1)`` no query sees; three ``None`` without a mask.
    """
    if attn_mask is None:
        return None, None, None
    attn_mask = attn_mask.to(device)
    if attn_mask.ndim < 2:  # (kv_len,): the kernels want two dims
        attn_mask = attn_mask.expand(q_len, kv_len)
    if is_causal:
        causal = causal_mask(q_len, kv_len, device=device)
        attn_mask = cast(Tensor, merge_masks(causal, attn_mask))
    # On the mask's own dtype: float32's minimum cast to float64 is no
    # longer float64's minimum, and the row would look allowed.
    allowed = _allowed(attn_mask)
    empty = ~allowed.any(dim=-1, keepdim=True)  # (..., q_len, 1)
    unseen = ~allowed.any(dim=-2, keepdim=True).transpose(-2, -1)
    if attn_mask.dtype == torch.bool:
        return attn_mask | empty, empty, unseen
    bias = mask_to_bias(attn_mask, dtype).masked_fill(empty, 0.0)
    return bias, empty, unseen
