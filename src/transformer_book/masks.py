"""Attention masks: one convention for the whole package.

A **boolean** mask is ``True`` where a query may attend to a key, as in
:func:`torch.nn.functional.scaled_dot_product_attention`. A **float** mask
is an additive bias on the attention scores (how ALiBi and relative
position biases enter); a key is *disallowed* by a float mask when its bias
is the dtype's minimum (or ``-inf``). Masks broadcast against scores of
shape ``(B, H, q_len, kv_len)``: a causal mask is ``(q_len, kv_len)``, a
padding mask is ``(B, 1, 1, kv_len)``.

PyTorch's ``nn.MultiheadAttention`` and ``nn.Transformer*`` read boolean
masks the other way round (``True`` = blocked); code that calls them passes
``~mask``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import overload

import torch
from torch import Tensor

from ._checks import check_float_dtype, check_int, check_tensor_like

__all__ = [
    "bottom_right_causal_mask",
    "broadcast_mask",
    "causal_mask",
    "check_mask_dtype",
    "disallowed_keys",
    "disallowed_rows",
    "mask_to_bias",
    "merge_masks",
    "padding_mask",
]


def causal_mask(
    q_len: int,
    kv_len: int | None = None,
    *,
    offset: int = 0,
    device: torch.device | str | None = None,
) -> Tensor:
    """Boolean mask that lets query ``i`` attend to keys ``<= i + offset``.

    Two alignments matter when ``q_len != kv_len``:

    - **top left** (``offset=0``, the default, as ``is_causal=True`` in
      PyTorch's SDPA): query ``i`` sees keys ``0..i``;
    - **bottom right** (``offset=kv_len - q_len``, see
      :func:`bottom_right_causal_mask`): the queries are the *last*
      ``q_len`` positions of the keys, so query ``i`` sits at position
      ``p + i`` with ``p = kv_len - q_len`` and sees keys ``0..p+i``.
      This is what decoding with a key/value cache needs: one new query
      and ``p`` cached keys must see all ``p + 1`` keys, where the top-left
      mask would allow only key 0.

    Args:
        q_len: number of queries.
        kv_len: number of keys; ``q_len`` when ``None``.
        offset: the shift of the diagonal: query ``i`` sees keys ``j``
            with ``j <= i + offset``.
        device: device of the mask.

    Shape:
        returns ``(q_len, kv_len)``.

    Returns:
        ``True`` on and below the (shifted) diagonal.

    Raises:
        TypeError: if ``q_len``, ``kv_len`` or ``offset`` is not an int.
        ValueError: if ``q_len``, ``kv_len`` or ``offset`` is negative.

    Example:
        >>> causal_mask(3).int()
        tensor([[1, 0, 0],
                [1, 1, 0],
                [1, 1, 1]], dtype=torch.int32)
        >>> causal_mask(2, 4, offset=2).int()
        tensor([[1, 1, 1, 0],
                [1, 1, 1, 1]], dtype=torch.int32)
    """
    q_len = check_int("q_len", q_len, minimum=0)
    kv_len = q_len if kv_len is None else check_int(
        "kv_len", kv_len, minimum=0
    )
    offset = check_int("offset", offset, minimum=0)
    ones = torch.ones(q_len, kv_len, dtype=torch.bool, device=device)
    return torch.tril(ones, diagonal=offset)


def bottom_right_causal_mask(
    q_len: int,
    kv_len: int,
    *,
    device: torch.device | str | None = None,
) -> Tensor:
    """Causal mask for queries that are the last ``q_len`` of the keys.

    ``causal_mask(q_len, kv_len, offset=kv_len - q_len)``: query ``i`` sits
    at position ``p + i``, with ``p = kv_len - q_len`` earlier (cached)
    positions, and sees keys ``0..p+i``. With ``q_len == kv_len`` it is the
    usual causal mask.

    Args:
        q_len: number of queries (the new tokens).
        kv_len: number of keys (cached and new), at least ``q_len``.
        device: device of the mask.

    Shape:
        returns ``(q_len, kv_len)``.

    Returns:
        ``True`` where query ``i`` may attend to key ``j <= kv_len -
        q_len + i``.

    Raises:
        TypeError: if ``q_len`` or ``kv_len`` is not an int.
        ValueError: if a length is negative or ``kv_len < q_len``.

    Example:
        >>> bottom_right_causal_mask(1, 3).int()
        tensor([[1, 1, 1]], dtype=torch.int32)
    """
    q_len = check_int("q_len", q_len, minimum=0)
    kv_len = check_int("kv_len", kv_len, minimum=0)
    if kv_len < q_len:
        raise ValueError(
            f"kv_len={kv_len} is shorter than q_len={q_len}: with the "
            f"bottom-right alignment the queries are the last q_len keys"
        )
    return causal_mask(q_len, kv_len, offset=kv_len - q_len, device=device)


def padding_mask(
    lengths: Tensor | Sequence[int], max_len: int | None = None
) -> Tensor:
    """Boolean mask that hides the padding at the end of each sequence.

    Args:
        lengths: the true length of each sequence in the batch.
        max_len: the padded length ``kv_len``; ``max(lengths)`` when
            ``None``.

    Shape:
        - lengths: ``(B,)``.
        - returns ``(B, 1, 1, max_len)``, which broadcasts over heads and
          queries.

    Returns:
        ``True`` for real tokens, ``False`` for padding.

    Raises:
        TypeError: if ``lengths`` does not hold integers.
        ValueError: if ``lengths`` is empty or not 1-D, holds a negative
            value or a value above ``max_len``.

    Example:
        >>> padding_mask([2, 3])[:, 0, 0]
        tensor([[ True,  True, False],
                [ True,  True,  True]])
    """
    lengths = _lengths_tensor(lengths)
    longest = int(lengths.max())
    if max_len is None:
        max_len = longest
    max_len = check_int("max_len", max_len, minimum=0)
    if longest > max_len:
        raise ValueError(
            f"max_len={max_len} is shorter than the longest length "
            f"{longest} in lengths"
        )
    positions = torch.arange(max_len, device=lengths.device)
    mask = positions < lengths[:, None]  # (B, max_len)
    return mask[:, None, None, :]  # (B, max_len) -> (B, 1, 1, max_len)


def _lengths_tensor(lengths: Tensor | Sequence[int]) -> Tensor:
    """``lengths`` as a non-empty 1-D integer tensor of values >= 0."""
    lengths = check_tensor_like("lengths", lengths, "a sequence of ints")
    if lengths.ndim != 1:
        raise ValueError(
            f"lengths must be 1-D (B,), got shape {tuple(lengths.shape)}"
        )
    if not lengths.numel():
        raise ValueError("lengths is empty: a batch needs at least one length")
    if lengths.dtype.is_floating_point or lengths.dtype.is_complex or (
        lengths.dtype == torch.bool
    ):
        raise TypeError(
            f"lengths must hold integers, got dtype {lengths.dtype}"
        )
    if int(lengths.min()) < 0:
        raise ValueError(
            f"lengths must be non-negative, got min {int(lengths.min())}"
        )
    return lengths


def check_mask_dtype(mask: Tensor, name: str = "attn_mask") -> None:
    """Raise unless ``mask`` is a boolean or floating-point tensor.

    Args:
        mask: the mask to check.
        name: the argument name used in the error message.

    Raises:
        TypeError: if ``mask`` is not a tensor, or is neither bool nor float.
    """
    if not isinstance(mask, Tensor):
        raise TypeError(
            f"{name} must be a Tensor or None, got {type(mask).__name__}"
        )
    if mask.dtype != torch.bool and not mask.dtype.is_floating_point:
        raise TypeError(
            f"{name} must be a bool mask (True = may attend) or a float "
            f"bias, got dtype {mask.dtype}"
        )


def broadcast_mask(
    mask: Tensor, shape: Sequence[int], *, name: str = "attn_mask"
) -> Tensor:
    """Check that ``mask`` broadcasts to ``shape`` and expand it there.

    Args:
        mask: a boolean or float mask.
        shape: the shape of the attention scores, usually
            ``(B, H, q_len, kv_len)``.
        name: the argument name used in error messages.

    Shape:
        - mask: any shape that broadcasts to ``shape``:
          ``(q_len, kv_len)``, ``(B, 1, 1, kv_len)``,
          ``(B, 1, q_len, kv_len)``, ``(B, H, q_len, kv_len)``, ...
        - returns ``shape`` (an expanded view, no copy).

    Returns:
        The mask expanded to ``shape``.

    Raises:
        TypeError: if ``mask`` is neither bool nor float.
        ValueError: if ``mask`` does not broadcast to ``shape``.
    """
    check_mask_dtype(mask, name)
    shape = tuple(int(s) for s in shape)
    trailing = shape[len(shape) - mask.ndim :]
    fits = mask.ndim <= len(shape) and all(
        m in (1, s) for m, s in zip(mask.shape, trailing, strict=True)
    )
    if not fits:
        raise ValueError(
            f"{name} of shape {tuple(mask.shape)} does not broadcast to the "
            f"attention scores of shape {shape} (B, H, q_len, kv_len); use "
            f"(q_len, kv_len), (B, 1, 1, kv_len), (B, 1, q_len, kv_len) "
            f"or (B, H, q_len, kv_len)"
        )
    return mask.expand(shape)


def mask_to_bias(mask: Tensor, dtype: torch.dtype | None = None) -> Tensor:
    """Turn a mask into an additive float bias.

    A boolean mask becomes 0 where attention is allowed and the dtype's
    minimum where it is not (never ``-1e9``, which is not small enough in
    float64 and overflows in float16). A float mask is cast to ``dtype``,
    with ``-inf`` raised to the minimum so that sums stay finite.

    Args:
        mask: a boolean or float mask.
        dtype: a floating dtype; the mask's own (or the default) when
            ``None``.

    Returns:
        A float tensor of the mask's shape.

    Raises:
        TypeError: if ``mask`` is neither bool nor float, or ``dtype`` is not
            floating.
    """
    check_mask_dtype(mask, "mask")
    if dtype is None and mask.dtype.is_floating_point:
        dtype = mask.dtype
    dtype = check_float_dtype("dtype", dtype)
    low = torch.finfo(dtype).min
    if mask.dtype == torch.bool:
        bias = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
        return bias.masked_fill(~mask, low)
    return mask.to(dtype).clamp_min(low)


@overload
def merge_masks(mask: Tensor, /, *masks: Tensor | None) -> Tensor: ...


@overload
def merge_masks(*masks: Tensor | None) -> Tensor | None: ...


def merge_masks(*masks: Tensor | None) -> Tensor | None:
    """Combine several masks into one.

    Boolean masks combine by AND (a key is allowed only if every mask
    allows it). Float biases add. A mix of the two gives a float bias in
    which every key that a boolean mask blocks holds the dtype's minimum;
    sums are clamped at the minimum, so two blocked entries never overflow
    to ``-inf``.

    Args:
        *masks: boolean or float masks, or ``None`` (ignored). Shapes must
            broadcast together.

    Returns:
        The merged mask of the broadcast shape, or ``None`` when every
        argument is ``None``.

    Raises:
        TypeError: if a mask is neither bool nor float.
        ValueError: if the shapes do not broadcast together.
    """
    present = [m for m in masks if m is not None]
    for index, m in enumerate(present):
        check_mask_dtype(m, f"masks[{index}]")
    if not present:
        return None
    try:
        torch.broadcast_shapes(*(m.shape for m in present))
    except RuntimeError as err:
        shapes = ", ".join(str(tuple(m.shape)) for m in present)
        raise ValueError(
            f"masks of shapes {shapes} do not broadcast together"
        ) from err
    floats = [m for m in present if m.dtype.is_floating_point]
    if not floats:
        merged = present[0]
        for m in present[1:]:
            merged = merged & m
        return merged
    dtype = floats[0].dtype
    for m in floats[1:]:
        dtype = torch.promote_types(dtype, m.dtype)
    low = torch.finfo(dtype).min
    merged = mask_to_bias(present[0], dtype)
    for m in present[1:]:
        merged = (merged + mask_to_bias(m, dtype)).clamp_min(low)
    return merged


def _allowed(mask: Tensor) -> Tensor:
    """``True`` where ``mask`` lets a query see a key."""
    check_mask_dtype(mask, "mask")
    if mask.dtype == torch.bool:
        return mask
    return mask > torch.finfo(mask.dtype).min


def disallowed_keys(mask: Tensor) -> Tensor:
    """Find the keys of a mask that no query may attend to (padding).

    Attention zeroes their keys and values, so that what they hold, NaN
    included, cannot reach any output.

    Args:
        mask: a boolean mask or a float bias, as :func:`disallowed_rows`.

    Shape:
        - mask: ``(..., q_len, kv_len)``.
        - returns ``(..., 1, kv_len)``.

    Returns:
        ``True`` for the keys that every query row blocks.
    """
    return ~_allowed(mask).any(dim=-2, keepdim=True)


def disallowed_rows(mask: Tensor) -> Tensor:
    """Find the query rows of a mask that allow no key at all.

    Attention over such a row has nothing to average; the package returns
    zeros for it instead of the NaN that ``softmax`` of ``-inf`` gives.

    Args:
        mask: a boolean mask (``False`` = blocked) or a float bias (the
            dtype's minimum or ``-inf`` = blocked).

    Shape:
        - mask: ``(..., q_len, kv_len)``.
        - returns ``(..., q_len, 1)``.

    Returns:
        ``True`` for rows in which every key is blocked.
    """
    return ~_allowed(mask).any(dim=-1, keepdim=True)

