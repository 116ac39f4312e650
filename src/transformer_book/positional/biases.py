"""Biases on the attention scores: ALiBi and T5's relative buckets.

ALiBi (Press et al., 2022), :func:`alibi_slopes` and :func:`alibi_bias`,
and T5's learned bucketed relative bias (Raffel et al., 2020),
:func:`relative_position_bucket` and :class:`RelativePositionBias`. Both
give float biases of shape ``(num_heads, q_len, kv_len)`` that
:mod:`transformer_book.attention` accepts as ``attn_mask``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .._checks import check_float_dtype, check_int, check_tensor

__all__ = [
    "RelativePositionBias",
    "alibi_bias",
    "alibi_slopes",
    "relative_position_bucket",
]
# --------------------------------------------------------------------------
# ALiBi (Press et al., 2022)


def alibi_slopes(num_heads: int) -> Tensor:
    r"""ALiBi's fixed per-head slopes (Press et al., 2022, section 3).

    For ``n`` heads, a power of two, the slopes are the geometric sequence
    :math:`2^{-8/n}, 2^{-16/n}, \dots, 2^{-8}`; for 8 heads,
    :math:`2^{-1}, \dots, 2^{-8}`. For other head counts the paper (and its
    code) takes the slopes of the largest power of two
    :math:`n_0 < n`, then every other slope of :math:`2 n_0` heads,
    :math:`2^{-4/n_0}, 2^{-12/n_0}, \dots`, until there are ``n``.

    Args:
        num_heads: the number of heads, at least 1.

    Shape:
        returns ``(num_heads,)`` in float64.

    Returns:
        The slope :math:`m_h` of each head, largest first.

    Raises:
        TypeError: if ``num_heads`` is not an int.
        ValueError: if ``num_heads < 1``.
    """
    check_int("num_heads", num_heads)

    def power_of_two(n: int) -> list[float]:
        return [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]

    n0 = 2 ** math.floor(math.log2(num_heads))
    slopes = power_of_two(n0)
    if n0 < num_heads:
        slopes += power_of_two(2 * n0)[0::2][: num_heads - n0]
    return torch.tensor(slopes, dtype=torch.float64)


def alibi_bias(
    num_heads: int,
    q_len: int,
    kv_len: int | None = None,
    *,
    q_offset: int = 0,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> Tensor:
    r"""ALiBi's linear distance penalty on attention scores.

    .. math:: b_{h, i, j} = -m_h \, |(i + \text{q\_offset}) - j|

    with :math:`m_h` from :func:`alibi_slopes`: query ``i`` stands at
    position ``i + q_offset`` and key ``j`` at position ``j``. The bias is 0
    where query and key coincide and falls linearly with their distance.
    Pass it as ``attn_mask`` (a float mask is added to the scores); with a
    causal mask only the keys before the query remain, which is the
    paper's language-model setting, and the absolute value makes the same
    bias usable without one.

    Args:
        num_heads: the number of heads, at least 1.
        q_len: the number of queries.
        kv_len: the number of keys; ``q_len`` when ``None``.
        q_offset: the position of the first query; when decoding with
            ``kv_len`` cached keys and ``q_len`` new queries,
            ``kv_len - q_len``.
        dtype: floating dtype (default dtype when ``None``).
        device: device of the bias.

    Shape:
        returns ``(num_heads, q_len, kv_len)``, which broadcasts against
        scores of shape ``(B, num_heads, q_len, kv_len)``.

    Raises:
        TypeError: if a size is not an int or ``dtype`` is not floating.
        ValueError: if ``num_heads``, ``q_len`` or ``kv_len`` is not
            positive, or ``q_offset`` is negative.

    Example:
        >>> alibi_bias(2, 3)[0]
        tensor([[ 0.0000, -0.0625, -0.1250],
                [-0.0625,  0.0000, -0.0625],
                [-0.1250, -0.0625,  0.0000]])
    """
    slopes = alibi_slopes(num_heads)[:, None, None]  # (H, 1, 1)
    dtype = check_float_dtype("dtype", dtype)
    relative = _relative_positions(q_len, kv_len, q_offset)
    distance = relative.abs().to(torch.float64)  # (q_len, kv_len)
    # 0 - x rather than -x: the diagonal is +0.0, not -0.0.
    bias = 0.0 - slopes * distance  # (H, q_len, kv_len)
    return bias.to(dtype=dtype, device=device)


# --------------------------------------------------------------------------
# T5 relative position bias (Raffel et al., 2020)


def relative_position_bucket(
    relative_position: Tensor,
    *,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
) -> Tensor:
    r"""Map key-minus-query offsets to T5's logarithmic buckets.

    Small distances each get their own bucket; larger ones share buckets
    whose width grows logarithmically up to ``max_distance``, and every
    distance beyond falls into the last bucket (Raffel et al., 2020,
    section 2.1). With ``bidirectional=True`` half of the buckets are for
    keys after the query (offset > 0) and half for keys at or before it;
    a causal (decoder) model uses all buckets for keys before the query
    and maps keys after it to bucket 0.

    Args:
        relative_position: ``key_position - query_position``, integers.
        bidirectional: whether keys after the query are distinguished.
        num_buckets: the number of buckets (even when bidirectional).
        max_distance: distances at or beyond it share the last bucket.

    Shape:
        returns the shape of ``relative_position``.

    Returns:
        The bucket of each offset, ``int64`` in ``[0, num_buckets)``.

    Raises:
        TypeError: if ``relative_position`` is not an integer tensor.
        ValueError: if the bucket counts do not leave at least one exact
            bucket, or ``max_distance`` does not exceed the exact range.
    """
    check_tensor("relative_position", relative_position)
    if relative_position.dtype.is_floating_point or (
        relative_position.dtype == torch.bool
    ):
        raise TypeError(
            f"relative_position must hold integers, got "
            f"{relative_position.dtype}"
        )
    check_int("num_buckets", num_buckets, minimum=2)
    check_int("max_distance", max_distance)
    if bidirectional and num_buckets % 2:
        raise ValueError(
            f"num_buckets={num_buckets} must be even with bidirectional=True"
        )
    half = num_buckets // 2 if bidirectional else num_buckets
    max_exact = half // 2
    if max_exact < 1:
        raise ValueError(
            f"num_buckets={num_buckets} is too small: at least "
            f"{4 if bidirectional else 2} are needed"
        )
    if max_distance <= max_exact:
        raise ValueError(
            f"max_distance={max_distance} must exceed the {max_exact} "
            f"distances that get exact buckets"
        )
    rel = relative_position.long()
    if bidirectional:
        bucket = (rel > 0).long() * half
        distance = rel.abs()
    else:
        bucket = torch.zeros_like(rel)
        distance = (-rel).clamp_min(0)
    # Distances >= max_exact: logarithmic buckets from max_exact to
    # max_distance, then the last bucket. float32, as in T5's own code, so
    # that distances on a bucket edge land where pretrained weights expect.
    log_ratio = torch.log(
        distance.clamp_min(max_exact).float() / max_exact
    ) / math.log(max_distance / max_exact)
    large = max_exact + (log_ratio * (half - max_exact)).long()
    large = large.clamp_max(half - 1)
    return bucket + torch.where(distance < max_exact, distance, large)


class RelativePositionBias(nn.Module):
    r"""T5's learned, bucketed relative position bias (Raffel et al., 2020).

    One learned scalar per (bucket, head): the bias added to the score of
    query ``i`` and key ``j`` is ``weight[bucket(j - i), h]``, with
    :func:`relative_position_bucket`. T5 computes it in the first layer and
    shares it across layers; it replaces absolute position encodings and,
    unlike the relative representations of Shaw et al. (2018), touches only
    the scores, not the values.

    Args:
        num_heads: the number of heads.
        num_buckets: the number of buckets (32 in T5).
        max_distance: distances at or beyond it share a bucket (128 in T5).
        bidirectional: ``True`` for an encoder, ``False`` for a causal
            decoder.

    Shape:
        returns ``(num_heads, q_len, kv_len)``: pass it as ``attn_mask``.

    Example:
        >>> bias = RelativePositionBias(4)
        >>> bias(3, 5).shape
        torch.Size([4, 3, 5])
    """

    def __init__(
        self,
        num_heads: int,
        *,
        num_buckets: int = 32,
        max_distance: int = 128,
        bidirectional: bool = True,
    ) -> None:
        super().__init__()
        check_int("num_heads", num_heads)
        # Validates the bucket settings once, at construction.
        relative_position_bucket(
            torch.zeros(1, dtype=torch.long),
            bidirectional=bidirectional,
            num_buckets=num_buckets,
            max_distance=max_distance,
        )
        self.num_heads = num_heads
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.bidirectional = bidirectional
        self.embedding = nn.Embedding(num_buckets, num_heads)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw the biases from ``N(0, 1)`` (``nn.Embedding``'s default)."""
        nn.init.normal_(self.embedding.weight)

    def extra_repr(self) -> str:
        return (
            f"num_heads={self.num_heads}, num_buckets={self.num_buckets}, "
            f"max_distance={self.max_distance}, "
            f"bidirectional={self.bidirectional}"
        )

    def forward(
        self, q_len: int, kv_len: int | None = None, *, q_offset: int = 0
    ) -> Tensor:
        """The bias for ``q_len`` queries and ``kv_len`` keys.

        Args:
            q_len: the number of queries.
            kv_len: the number of keys; ``q_len`` when ``None``.
            q_offset: the position of the first query.

        Returns:
            The bias, ``(num_heads, q_len, kv_len)``.

        Raises:
            ValueError: if a size is not positive or ``q_offset`` is
                negative.
        """
        device = self.embedding.weight.device
        relative = _relative_positions(q_len, kv_len, q_offset, device)
        buckets = relative_position_bucket(
            relative,
            bidirectional=self.bidirectional,
            num_buckets=self.num_buckets,
            max_distance=self.max_distance,
        )
        values = self.embedding(buckets)  # (q_len, kv_len, H)
        # (q_len, kv_len, H) -> (H, q_len, kv_len)
        return values.permute(2, 0, 1)


def _relative_positions(
    q_len: int,
    kv_len: int | None,
    q_offset: int,
    device: torch.device | str | None = None,
) -> Tensor:
    """Key position minus query position, ``(q_len, kv_len)`` int64.

    Query ``i`` stands at ``q_offset + i``, key ``j`` at ``j``.
    """
    q_len = check_int("q_len", q_len)
    kv_len = q_len if kv_len is None else check_int("kv_len", kv_len)
    q_offset = check_int("q_offset", q_offset, minimum=0)
    q_pos = torch.arange(q_offset, q_offset + q_len, device=device)
    k_pos = torch.arange(kv_len, device=device)
    return k_pos[None, :] - q_pos[:, None]  # (q_len, kv_len)
