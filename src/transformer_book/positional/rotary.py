"""Rotary position embedding (RoPE, Su et al., 2021)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .._checks import (
    check_even,
    check_features,
    check_float_dtype,
    check_int,
    check_number,
    check_tensor,
)
from .absolute import sinusoidal_frequencies, sinusoidal_shift_matrix

__all__ = ["RotaryEmbedding", "apply_rotary", "rotary_frequencies",
           "rotary_matrix"]

_PAIRS = "RoPE rotates pairs of features"


def rotary_frequencies(head_dim: int, *, base: float = 10000.0,
                       dtype: torch.dtype | None = None,
                       device: torch.device | str | None = None) -> Tensor:
    r"""RoPE's frequencies :math:`\theta_i = b^{-2i/d}` over a head's width.

    Shape:
        returns ``(head_dim // 2,)``.
    """
    check_even("head_dim", head_dim, why=_PAIRS)
    return sinusoidal_frequencies(head_dim, base=base, dtype=dtype,
                                  device=device)


def apply_rotary(x: Tensor, *, positions: Tensor | None = None,
                 offset: int = 0, base: float = 10000.0) -> Tensor:
    r"""Rotate each feature pair of the vector at position m by m theta_i.

    .. math:: x'_{2i} + \mathrm{i}\, x'_{2i+1}
        = e^{\mathrm{i} m \theta_i} (x_{2i} + \mathrm{i}\, x_{2i+1})

    The paper's interleaved pairs; angles in float64.

    Args:
        positions: the position of each vector; ``offset + arange(T)``
            when ``None``.

    Shape:
        - x: ``(B, H, T, head_dim)`` or ``(B, T, head_dim)``.
        - positions: ``(T,)``.
        - returns the shape and dtype of ``x``.
    """
    check_tensor("x", x, ndim=(3, 4), floating=True)
    freqs = rotary_frequencies(x.shape[-1], base=base, dtype=torch.float64,
                               device=x.device)
    length = x.shape[-2]
    if positions is None:
        offset = check_int("offset", offset, minimum=0)
        positions = torch.arange(offset, offset + length, device=x.device)
    positions = torch.as_tensor(positions)
    if positions.shape != (length,):
        raise ValueError(f"positions must have shape ({length},) like x's "
                         f"length, got {tuple(positions.shape)}")
    angles = positions.to(x.device, torch.float64)[:, None] * freqs
    return _rotate(x, angles)  # angles: (T, head_dim / 2)


def _rotate(x: Tensor, angles: Tensor) -> Tensor:
    """Multiply each pair, read as a complex number, by ``exp(i angle)``."""
    # One complex product: about twice as fast as four real ones on a CPU.
    work = x.to(torch.float64 if x.dtype == torch.float64 else torch.float32)
    if work.stride(-1) != 1 or work.storage_offset() % 2 or any(
        stride % 2 for stride in work.stride()[:-1]
    ):  # a complex view needs whole (real, imaginary) pairs in memory
        work = work.contiguous()
    # (..., T, D) -> (..., T, D / 2, 2) -> complex (..., T, D / 2)
    pairs = torch.view_as_complex(work.reshape(*x.shape[:-1], -1, 2))
    turns = torch.polar(torch.ones_like(angles), angles).to(pairs.dtype)
    # (..., T, D / 2, 2) -> (..., T, D)
    return torch.view_as_real(pairs * turns).flatten(-2).to(x.dtype)


def rotary_matrix(position: float, head_dim: int, *, base: float = 10000.0,
                  dtype: torch.dtype | None = None) -> Tensor:
    r"""RoPE's rotation :math:`R_m` as a matrix: ``R_m @ x`` rotates ``x``.

    Shape:
        returns ``(head_dim, head_dim)``.
    """
    check_even("head_dim", head_dim, why=_PAIRS)
    position = check_number("position", position)
    # The sinusoidal shift rotates each pair by the same angles the other
    # way round.
    shift = sinusoidal_shift_matrix(position, head_dim, base=base,
                                    dtype=torch.float64)
    return shift.T.to(check_float_dtype("dtype", dtype)).contiguous()


class RotaryEmbedding(nn.Module):
    """:func:`apply_rotary` as a module, for ``MultiHeadAttention(rotary=)``.

    No parameters and no buffer: a buffer would be rounded by
    ``model.half()``, and long positions would lose their angles. Shapes
    as :func:`apply_rotary`'s.
    """

    check_inputs = True  # off inside a model, which checks at entry

    def __init__(self, head_dim: int, *, base: float = 10000.0) -> None:
        super().__init__()
        rotary_frequencies(head_dim, base=base)  # checks both
        self.head_dim, self.base = head_dim, float(base)

    @property
    def freqs(self) -> Tensor:
        """The frequencies, float64."""
        return rotary_frequencies(self.head_dim, base=self.base,
                                  dtype=torch.float64)

    def forward(self, x: Tensor, *, positions: Tensor | None = None,
                offset: int = 0) -> Tensor:
        if self.check_inputs:
            check_features("x", x, self.head_dim, "head_dim")
        return apply_rotary(x, positions=positions, offset=offset,
                            base=self.base)
