"""Biases on the attention scores, ALiBi and T5's relative buckets: float
``(num_heads, q_len, kv_len)``, to pass as ``attn_mask``."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .._checks import (
    check_even,
    check_float_dtype,
    check_int,
    check_integer_tensor,
)

__all__ = ["RelativePositionBias", "alibi_bias", "alibi_slopes",
           "relative_position_bucket"]


def alibi_slopes(num_heads: int) -> Tensor:
    r"""ALiBi's per-head slopes (Press et al., 2022, section 3).

    :math:`2^{-8/n}, 2^{-16/n}, \dots, 2^{-8}` for ``n`` a power of two;
    otherwise those of the largest power of two below ``n``, then every
    other slope of twice as many heads, as in the paper's code.

    Shape:
        returns ``(num_heads,)``, float64, largest first.
    """
    check_int("num_heads", num_heads)

    def geometric(n: int) -> list[float]:
        return [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]

    n0 = 2 ** math.floor(math.log2(num_heads))
    slopes = geometric(n0) + geometric(2 * n0)[0::2][: num_heads - n0]
    return torch.tensor(slopes, dtype=torch.float64)


def _relative_positions(q_len: int, kv_len: int | None, q_offset: int,
                        device: torch.device | str | None = None) -> Tensor:
    """Key position minus query position, ``(q_len, kv_len)``."""
    q_len = check_int("q_len", q_len)
    kv_len = q_len if kv_len is None else check_int("kv_len", kv_len)
    q_offset = check_int("q_offset", q_offset, minimum=0)
    q_pos = torch.arange(q_offset, q_offset + q_len, device=device)
    return torch.arange(kv_len, device=device) - q_pos[:, None]


def alibi_bias(num_heads: int, q_len: int, kv_len: int | None = None, *,
               q_offset: int = 0, dtype: torch.dtype | None = None,
               device: torch.device | str | None = None) -> Tensor:
    r"""ALiBi's distance penalty :math:`b_{h,i,j} = -m_h |i + o - j|`.

    Args:
        kv_len: ``q_len`` when ``None``.
        q_offset: ``o``, the position of the first query (the number of
            cached keys when decoding).

    Shape:
        returns ``(num_heads, q_len, kv_len)``.
    """
    slopes = alibi_slopes(num_heads)[:, None, None]  # (H, 1, 1)
    distance = _relative_positions(q_len, kv_len, q_offset).abs()
    # 0 - x rather than -x: the diagonal is +0.0, not -0.0.
    bias = 0.0 - slopes * distance.double()  # (H, q_len, kv_len)
    return bias.to(dtype=check_float_dtype("dtype", dtype), device=device)


def relative_position_bucket(relative_position: Tensor, *,
                             bidirectional: bool = True, num_buckets: int = 32,
                             max_distance: int = 128) -> Tensor:
    """T5's bucket of each key-minus-query offset (Raffel et al., 2020).

    Half the buckets hold exact small distances, the rest grow
    logarithmically up to ``max_distance``; ``bidirectional`` gives keys
    after the query their own half.

    Shape:
        returns the shape of ``relative_position``, int64.
    """
    check_integer_tensor("relative_position", relative_position, "integers")
    check_int("num_buckets", num_buckets, minimum=4 if bidirectional else 2)
    if bidirectional:
        check_even("num_buckets", num_buckets)
    half = num_buckets // 2 if bidirectional else num_buckets
    max_exact = half // 2
    check_int("max_distance", max_distance, minimum=max_exact + 1)
    rel = relative_position.long()
    bucket = (rel > 0).long() * half if bidirectional else 0 * rel
    distance = rel.abs() if bidirectional else (-rel).clamp_min(0)
    # float32, as in T5's code, so that edges fall where its weights expect.
    ratio = distance.clamp_min(max_exact).float() / max_exact
    log_ratio = torch.log(ratio) / math.log(max_distance / max_exact)
    large = max_exact + (log_ratio * (half - max_exact)).long()
    large = large.clamp_max(half - 1)
    return bucket + torch.where(distance < max_exact, distance, large)


class RelativePositionBias(nn.Module):
    """T5's learned bias: one scalar per (bucket, head), Raffel et al. 2020.

    Shape:
        returns ``(num_heads, q_len, kv_len)`` from ``forward(q_len,
        kv_len=None, *, q_offset=0)``.
    """

    def __init__(self, num_heads: int, *, num_buckets: int = 32,
                 max_distance: int = 128, bidirectional: bool = True) -> None:
        super().__init__()
        self.bidirectional = bidirectional
        self.num_buckets, self.max_distance = num_buckets, max_distance
        self._buckets(torch.zeros(1, dtype=torch.long))  # checks them
        self.embedding = nn.Embedding(num_buckets,
                                      check_int("num_heads", num_heads))

    def _buckets(self, relative: Tensor) -> Tensor:
        return relative_position_bucket(
            relative, bidirectional=self.bidirectional,
            num_buckets=self.num_buckets, max_distance=self.max_distance)

    def forward(self, q_len: int, kv_len: int | None = None, *,
                q_offset: int = 0) -> Tensor:
        relative = _relative_positions(q_len, kv_len, q_offset,
                                       self.embedding.weight.device)
        # (q_len, kv_len, H) -> (H, q_len, kv_len)
        return self.embedding(self._buckets(relative)).permute(2, 0, 1)
