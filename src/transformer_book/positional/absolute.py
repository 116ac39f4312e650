"""Positions added to the input: the sinusoidal table and a learned one."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .._checks import (
    check_even,
    check_float_dtype,
    check_int,
    check_number,
    check_probability,
    check_tensor,
)

__all__ = ["LearnedPositionalEmbedding", "SinusoidalPositionalEncoding",
           "sinusoidal_encoding", "sinusoidal_frequencies",
           "sinusoidal_shift_matrix"]


def sinusoidal_frequencies(d_model: int, *, base: float = 10000.0,
                           dtype: torch.dtype | None = None,
                           device: torch.device | str | None = None) -> Tensor:
    r"""The frequency of each (sin, cos) pair, :math:`\omega_i = b^{-2i/d}`.

    Shape:
        returns ``(d_model // 2,)``, largest first.
    """
    check_even("d_model", d_model, why="the dimensions come in pairs")
    base = check_number("base", base, minimum=1.0, min_inclusive=False)
    dtype = check_float_dtype("dtype", dtype)
    # In float64, rounded once: every dtype gets correctly rounded values.
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    return (base ** (-two_i / d_model)).to(dtype=dtype, device=device)


def sinusoidal_encoding(
    max_seq_len: int, d_model: int, *, base: float = 10000.0,
    dtype: torch.dtype | None = None, device: torch.device | str | None = None,
) -> Tensor:
    r"""The fixed position table of Vaswani et al. (2017, section 3.5).

    .. math:: PE_{p, 2i} = \sin(p\, \omega_i), \quad
        PE_{p, 2i+1} = \cos(p\, \omega_i)

    Shape:
        returns ``(max_seq_len, d_model)``; row ``p`` encodes position ``p``.
    """
    check_int("max_seq_len", max_seq_len)
    freqs = sinusoidal_frequencies(d_model, base=base, dtype=torch.float64)
    positions = torch.arange(max_seq_len, dtype=torch.float64)
    angles = positions[:, None] * freqs  # (max_seq_len, d_model / 2)
    # (max_seq_len, d_model / 2, 2) -> (max_seq_len, d_model): interleaved
    table = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(1)
    return table.to(dtype=check_float_dtype("dtype", dtype), device=device)


def sinusoidal_shift_matrix(offset: float, d_model: int, *,
                            base: float = 10000.0,
                            dtype: torch.dtype | None = None) -> Tensor:
    r"""The rotation :math:`M_k` with :math:`PE_{p + k} = M_k PE_p` for all p.

    Block diagonal, one 2x2 rotation by :math:`k \omega_i` per pair.

    Shape:
        returns ``(d_model, d_model)``.
    """
    offset = check_number("offset", offset)
    freqs = sinusoidal_frequencies(d_model, base=base, dtype=torch.float64)
    cos, sin = (offset * freqs).cos(), (offset * freqs).sin()
    rows = torch.stack((cos, sin), -1), torch.stack((-sin, cos), -1)
    blocks = torch.stack(rows, -2)  # (d_model / 2, 2, 2)
    return torch.block_diag(*blocks).to(check_float_dtype("dtype", dtype))


class _AddedPositions(nn.Module):
    """What the two tables share: the entry check of ``x`` and ``offset``."""

    d_model: int
    max_seq_len: int
    check_inputs = True

    def _positions(self, x: Tensor, offset: int) -> tuple[int, int]:
        if not self.check_inputs:
            return offset, offset + x.shape[1]
        check_tensor("x", x, ndim=3, floating=True)
        end = check_int("offset", offset, minimum=0) + x.shape[1]
        if x.shape[-1] != self.d_model or end > self.max_seq_len:
            raise ValueError(
                f"x has shape {tuple(x.shape)} at offset {offset}: expected "
                f"d_model={self.d_model} features and at most "
                f"max_seq_len={self.max_seq_len} positions")
        return offset, end


class SinusoidalPositionalEncoding(_AddedPositions):
    """``dropout(x + PE[offset : offset + T])``, Vaswani et al. (2017).

    The table is a non-persistent buffer (recomputed, never saved).

    Shape:
        - x: ``(B, T, d_model)`` with ``offset + T <= max_seq_len``.
        - returns ``(B, T, d_model)``.
    """

    pe: Tensor

    def __init__(self, d_model: int, max_seq_len: int = 5000, *,
                 base: float = 10000.0, dropout: float = 0.0) -> None:
        super().__init__()
        table = sinusoidal_encoding(max_seq_len, d_model, base=base)
        self.d_model, self.max_seq_len = d_model, max_seq_len
        self.dropout = nn.Dropout(check_probability("dropout", dropout))
        self.register_buffer("pe", table, persistent=False)

    def forward(self, x: Tensor, *, offset: int = 0) -> Tensor:
        start, end = self._positions(x, offset)
        return self.dropout(x + self.pe[start:end].to(x.dtype))


class LearnedPositionalEmbedding(_AddedPositions):
    """``dropout(x + E[offset : offset + T])`` with a trained table E (GPT-2).

    Shapes as :class:`SinusoidalPositionalEncoding`'s.

    Args:
        init_std: the table starts ``~ N(0, init_std^2)``.
    """

    def __init__(self, d_model: int, max_seq_len: int, *, dropout: float = 0.0,
                 init_std: float = 0.02) -> None:
        super().__init__()
        self.d_model = check_int("d_model", d_model)
        self.max_seq_len = check_int("max_seq_len", max_seq_len)
        self.init_std = check_number("init_std", init_std, minimum=0.0,
                                     min_inclusive=False)
        self.embedding = nn.Embedding(max_seq_len, d_model)
        self.dropout = nn.Dropout(check_probability("dropout", dropout))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.normal_(self.embedding.weight, std=self.init_std)

    def forward(self, x: Tensor, *, offset: int = 0) -> Tensor:
        start, end = self._positions(x, offset)
        positions = torch.arange(start, end, device=x.device)
        return self.dropout(x + self.embedding(positions).to(x.dtype))
