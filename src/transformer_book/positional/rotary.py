"""Rotary position embedding (RoPE, Su et al., 2021).

Queries and keys are rotated by an angle proportional to their position,
so that their dot product depends only on the offset: :func:`apply_rotary`
and the module :class:`RotaryEmbedding` (which
:class:`~transformer_book.attention.MultiHeadAttention` takes as
``rotary``); :func:`rotary_matrix` is the same rotation as a matrix, for
the pages.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .._checks import (
    check_even,
    check_float_dtype,
    check_int,
    check_number,
    check_tensor,
)
from .absolute import sinusoidal_frequencies, sinusoidal_shift_matrix

__all__ = [
    "RotaryEmbedding",
    "apply_rotary",
    "rotary_frequencies",
    "rotary_matrix",
]

_PAIRS = "RoPE rotates pairs of features"


def rotary_frequencies(
    head_dim: int,
    *,
    base: float = 10000.0,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> Tensor:
    r"""RoPE's rotation frequencies :math:`\theta_i = \mathrm{base}^{-2i/d}`.

    The same geometric ladder as the sinusoidal encoding, over the head
    dimension instead of the model width.

    Args:
        head_dim: the query/key width per head, even.
        base: the wavelength scale, 10000 in the paper.
        dtype: floating dtype (default dtype when ``None``).
        device: device of the result.

    Shape:
        returns ``(head_dim // 2,)``.

    Raises:
        TypeError: if ``head_dim`` is not an int or ``dtype`` not floating.
        ValueError: if ``head_dim`` is not positive and even.
    """
    check_even("head_dim", head_dim, why=_PAIRS)
    return sinusoidal_frequencies(
        head_dim, base=base, dtype=dtype, device=device
    )


def _positions(x: Tensor, positions: Tensor | None, offset: int) -> Tensor:
    length = x.shape[-2]
    if positions is None:
        check_int("offset", offset, minimum=0)
        return torch.arange(
            offset, offset + length, device=x.device, dtype=torch.float64
        )
    if not isinstance(positions, Tensor):
        positions = torch.as_tensor(positions)
    if positions.ndim != 1 or positions.shape[0] != length:
        raise ValueError(
            f"positions must have shape ({length},) to match the sequence "
            f"length of x, got {tuple(positions.shape)}"
        )
    return positions.to(device=x.device, dtype=torch.float64)


def apply_rotary(
    x: Tensor,
    *,
    positions: Tensor | None = None,
    offset: int = 0,
    base: float = 10000.0,
) -> Tensor:
    r"""Rotate queries or keys by their position (RoPE, Su et al., 2021).

    Each pair of features :math:`(x_{2i}, x_{2i+1})` of the vector at
    position :math:`m` is rotated by the angle :math:`m\,\theta_i`:

    .. math::

        \begin{pmatrix} x'_{2i} \\ x'_{2i+1} \end{pmatrix}
        = \begin{pmatrix} \cos m\theta_i & -\sin m\theta_i \\
        \sin m\theta_i & \cos m\theta_i \end{pmatrix}
        \begin{pmatrix} x_{2i} \\ x_{2i+1} \end{pmatrix},
        \qquad \theta_i = \mathrm{base}^{-2i/d}.

    Equivalently, :math:`x_{2i} + \mathrm{i}\,x_{2i+1}` is multiplied by
    :math:`e^{\mathrm{i} m \theta_i}`. Rotations keep norms, and since
    :math:`R_m^\top R_n = R_{n-m}`, the score :math:`q_m^\top k_n` of a
    rotated query and key depends on the positions only through
    :math:`n - m`. This is the paper's interleaved pairing (GPT-NeoX and
    LLaMA code pair feature ``j`` with ``j + d/2`` instead: the same
    rotation up to a fixed permutation of the features).

    Args:
        x: queries or keys; the last dimension is the head dimension.
        positions: the position of each of the ``T`` vectors (integers or
            real numbers); ``offset, offset + 1, ...`` when ``None``.
        offset: the position of the first vector when ``positions`` is
            ``None`` (the number of cached tokens when decoding).
        base: the wavelength scale.

    Shape:
        - x: ``(B, H, T, head_dim)`` or ``(B, T, head_dim)``.
        - positions: ``(T,)``.
        - returns the shape of ``x``.

    Returns:
        The rotated tensor, in ``x``'s dtype. The angles are computed in
        float64, so long positions do not lose precision.

    Raises:
        TypeError: if ``x`` is not a floating tensor.
        ValueError: if ``x`` is not 3-D or 4-D, ``head_dim`` is odd,
            ``positions`` does not match ``T`` or ``offset`` is negative.
    """
    check_tensor("x", x, ndim=(3, 4), floating=True)
    head_dim = x.shape[-1]
    if head_dim % 2:
        raise ValueError(
            f"head_dim={head_dim} (the last dimension of x) must be even: "
            f"{_PAIRS}"
        )
    freqs = rotary_frequencies(
        head_dim, base=base, dtype=torch.float64, device=x.device
    )
    angles = _positions(x, positions, offset)[:, None] * freqs  # (T, D/2)
    return _rotate(x, angles)


def _rotate(x: Tensor, angles: Tensor) -> Tensor:
    """Rotate interleaved pairs of ``x`` (..., T, D) by (T, D/2) angles.

    Each pair is read as the complex number ``x_2i + i x_2i+1`` and
    multiplied by ``exp(i * angle)``: one complex product instead of four
    real ones and a stack (about twice as fast, forward and backward, on
    a CPU). The product is in float64 for float64 input and in float32
    otherwise (half-precision input gains precision); the result is cast
    back to ``x``'s dtype.
    """
    x_work = x.to(torch.float64 if x.dtype == torch.float64 else torch.float32)
    if x_work.stride(-1) != 1 or x_work.storage_offset() % 2 or any(
        stride % 2 for stride in x_work.stride()[:-1]
    ):  # complex views need whole (real, imaginary) pairs in memory
        x_work = x_work.contiguous()
    # (..., T, D) -> (..., T, D/2, 2) -> complex (..., T, D/2)
    pairs = torch.view_as_complex(
        x_work.reshape(*x.shape[:-1], x.shape[-1] // 2, 2)
    )
    turns = torch.polar(torch.ones_like(angles), angles).to(pairs.dtype)
    rotated = torch.view_as_real(pairs * turns)  # (..., T, D/2, 2)
    return rotated.flatten(-2).to(x.dtype)  # (..., T, D)


def rotary_matrix(
    position: int | float,
    head_dim: int,
    *,
    base: float = 10000.0,
    dtype: torch.dtype | None = None,
) -> Tensor:
    r"""RoPE's rotation :math:`R_m` as a block-diagonal matrix.

    ``apply_rotary(x)`` at position ``m`` equals ``x @ rotary_matrix(m).T``
    (for a single vector, :math:`R_m x`). Pages use it to show
    :math:`R_m^\top R_n = R_{n-m}`; the package never builds it in
    :func:`apply_rotary`, which costs :math:`O(d)` per vector instead of
    :math:`O(d^2)`.

    Args:
        position: the position ``m``.
        head_dim: the head dimension, even.
        base: the wavelength scale.
        dtype: floating dtype (default dtype when ``None``).

    Shape:
        returns ``(head_dim, head_dim)``.

    Raises:
        TypeError: if ``position`` is not a number or ``dtype`` not
            floating.
        ValueError: if ``head_dim`` is not positive and even.
    """
    check_even("head_dim", head_dim, why=_PAIRS)
    position = check_number("position", position)
    dtype = check_float_dtype("dtype", dtype)
    # R_m is the transpose of the sinusoidal shift by m: both rotate each
    # pair by m * theta_i, in opposite senses.
    shift = sinusoidal_shift_matrix(
        position, head_dim, base=base, dtype=torch.float64
    )
    return shift.T.to(dtype).contiguous()


class RotaryEmbedding(nn.Module):
    r"""Rotary position embedding (RoPE, Su et al., 2021) for one head size.

    Applies :func:`apply_rotary` to queries and keys after their
    projections and before the dot product; pass it to
    :class:`~transformer_book.attention.MultiHeadAttention` as ``rotary``.
    Nothing is added to the values, and RoPE has no parameters and no
    maximum length.

    The frequencies are recomputed in float64 on every call rather than
    kept in a buffer: ``model.half()`` or ``model.to(torch.bfloat16)``
    would round a buffer, and the angles ``m * theta_i`` at position 4096
    would then be off by more than a radian.

    Args:
        head_dim: the query/key width per head, even.
        base: the wavelength scale, 10000 in the paper.

    Shape:
        - x: ``(B, H, T, head_dim)`` or ``(B, T, head_dim)``.
        - returns the shape of ``x``.

    Example:
        >>> rope = RotaryEmbedding(8)
        >>> q = torch.randn(2, 4, 5, 8)
        >>> rope(q).shape
        torch.Size([2, 4, 5, 8])
    """

    def __init__(self, head_dim: int, *, base: float = 10000.0) -> None:
        super().__init__()
        rotary_frequencies(head_dim, base=base)  # checks both arguments
        self.head_dim = head_dim
        self.base = float(base)

    @property
    def freqs(self) -> Tensor:
        r"""The frequencies :math:`\theta_i`, float64, ``(head_dim // 2,)``."""
        return rotary_frequencies(
            self.head_dim, base=self.base, dtype=torch.float64
        )

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, base={self.base:g}"

    def forward(
        self,
        x: Tensor,
        *,
        positions: Tensor | None = None,
        offset: int = 0,
    ) -> Tensor:
        """Rotate ``x`` by its positions.

        Args:
            x: queries or keys.
            positions: the position of each of the ``T`` vectors;
                ``offset, offset + 1, ...`` when ``None``.
            offset: the position of the first vector.

        Returns:
            The rotated tensor, in ``x``'s dtype (angles in float64).

        Raises:
            ValueError: if the last dimension of ``x`` is not
                ``head_dim``, or as :func:`apply_rotary`.
        """
        check_tensor("x", x, ndim=(3, 4), floating=True)
        if x.shape[-1] != self.head_dim:
            raise ValueError(
                f"x has last dimension {x.shape[-1]}, expected "
                f"head_dim={self.head_dim}"
            )
        return apply_rotary(
            x, positions=positions, offset=offset, base=self.base
        )
