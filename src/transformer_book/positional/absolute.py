"""Absolute positions added to the input: sinusoidal and learned.

The fixed sinusoidal table of Vaswani et al. (2017, section 3.5),
:func:`sinusoidal_encoding` and :class:`SinusoidalPositionalEncoding`, with
the linear map that shifts it (:func:`sinusoidal_shift_matrix`), and a
learned table, :class:`LearnedPositionalEmbedding` (GPT-2, BERT).
"""

from __future__ import annotations

from typing import Any

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
from .._docs import shared_doc

__all__ = [
    "LearnedPositionalEmbedding",
    "SinusoidalPositionalEncoding",
    "sinusoidal_encoding",
    "sinusoidal_frequencies",
    "sinusoidal_shift_matrix",
]

# The dimensions of the sinusoidal table and of RoPE come in pairs.
_PAIRS = "the dimensions come in (sin, cos) pairs"


def _check_base(base: Any) -> float:
    return check_number("base", base, minimum=1.0, min_inclusive=False)


def sinusoidal_frequencies(
    d_model: int,
    *,
    base: float = 10000.0,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> Tensor:
    r"""Angular frequencies of the sinusoidal encoding, one per pair.

    .. math:: \omega_i = \mathrm{base}^{-2i / d_\text{model}},
        \qquad i = 0, \dots, d_\text{model}/2 - 1.

    Pair ``i`` (dimensions ``2i`` and ``2i+1``) repeats every
    :math:`2\pi / \omega_i` positions: from :math:`2\pi` for ``i = 0`` up to
    nearly :math:`2\pi \cdot \mathrm{base}` for the last pair.

    Args:
        d_model: the encoding width, even.
        base: the wavelength scale, 10000 in the paper.
        dtype: floating dtype of the result (default dtype when ``None``).
        device: device of the result.

    Shape:
        returns ``(d_model // 2,)``.

    Returns:
        The frequencies :math:`\omega_i`, largest first.

    Raises:
        TypeError: if ``d_model`` is not an int or ``base`` not a number.
        ValueError: if ``d_model`` is not positive and even, or
            ``base <= 1``.
    """
    check_even("d_model", d_model, why=_PAIRS)
    base = _check_base(base)
    dtype = check_float_dtype("dtype", dtype)
    # Computed in float64 and rounded once, so every dtype gets the
    # correctly rounded frequencies.
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    freqs = base ** (-two_i / d_model)
    return freqs.to(dtype=dtype, device=device)


def sinusoidal_encoding(
    max_seq_len: int,
    d_model: int,
    *,
    base: float = 10000.0,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> Tensor:
    r"""The fixed sinusoidal position table (Vaswani et al., 2017, 3.5).

    .. math::

        PE_{pos, 2i} = \sin\!\left(\frac{pos}{\mathrm{base}^{2i/d}}\right),
        \qquad
        PE_{pos, 2i+1} = \cos\!\left(\frac{pos}{\mathrm{base}^{2i/d}}\right)

    with :math:`d = d_\text{model}` and ``base = 10000``.

    Args:
        max_seq_len: number of positions ``0 .. max_seq_len - 1``.
        d_model: the encoding width; must be even (sin/cos pairs).
        base: the wavelength scale.
        dtype: floating dtype of the table (default dtype when ``None``).
        device: device of the table.

    Shape:
        returns ``(max_seq_len, d_model)``.

    Returns:
        Row ``pos`` is the encoding of position ``pos``.

    Raises:
        TypeError: if a size is not an int or ``dtype`` is not floating.
        ValueError: if ``max_seq_len`` or ``d_model`` is not positive, or
            ``d_model`` is odd.

    Example:
        >>> sinusoidal_encoding(2, 4)
        tensor([[0.0000, 1.0000, 0.0000, 1.0000],
                [0.8415, 0.5403, 0.0100, 0.9999]])
    """
    check_int("max_seq_len", max_seq_len)
    check_even("d_model", d_model, why=_PAIRS)
    dtype = check_float_dtype("dtype", dtype)
    freqs = sinusoidal_frequencies(d_model, base=base, dtype=torch.float64)
    positions = torch.arange(max_seq_len, dtype=torch.float64)
    angles = positions[:, None] * freqs[None, :]  # (max_seq_len, d_model/2)
    table = torch.stack((angles.sin(), angles.cos()), dim=-1)
    # (max_seq_len, d_model/2, 2) -> (max_seq_len, d_model): sin, cos
    # interleaved
    table = table.reshape(max_seq_len, d_model)
    return table.to(dtype=dtype, device=device)


def sinusoidal_shift_matrix(
    offset: int | float,
    d_model: int,
    *,
    base: float = 10000.0,
    dtype: torch.dtype | None = None,
) -> Tensor:
    r"""The linear map that moves the sinusoidal encoding ``offset`` ahead.

    For every position, :math:`PE_{pos + k} = M_k \, PE_{pos}` with

    .. math::

        M_k = \operatorname{diag}\!\left(
        \begin{pmatrix} \cos k\omega_i & \sin k\omega_i \\
        -\sin k\omega_i & \cos k\omega_i \end{pmatrix}
        \right)_{i = 0}^{d/2 - 1},

    a block-diagonal rotation that depends on ``k`` but not on ``pos``
    (the angle-addition formulas, applied to each (sin, cos) pair).

    Args:
        offset: the shift ``k`` (any real number; negative goes back).
        d_model: the encoding width, even.
        base: the wavelength scale.
        dtype: floating dtype of the matrix (default dtype when ``None``).

    Shape:
        returns ``(d_model, d_model)``.

    Returns:
        :math:`M_k`, so that ``table[pos + k] == M_k @ table[pos]``, or
        ``table[k:] == table[:-k] @ M_k.T`` for a whole table.

    Raises:
        TypeError: if ``offset`` is not a number.
        ValueError: if ``d_model`` is not positive and even.
    """
    offset = check_number("offset", offset)
    dtype = check_float_dtype("dtype", dtype)
    angles = offset * sinusoidal_frequencies(
        d_model, base=base, dtype=torch.float64
    )
    cos, sin = angles.cos(), angles.sin()
    blocks = torch.stack(
        (torch.stack((cos, sin), -1), torch.stack((-sin, cos), -1)), -2
    )  # (d_model // 2, 2, 2)
    matrix = torch.block_diag(*blocks)
    return matrix.to(dtype)


# What both forwards raise, from _AddedPositions._check_input (see _docs).
_FORWARD_RAISES = """\
Raises:
    TypeError: if ``x`` is not a tensor or ``offset`` not an int.
    ValueError: if ``x`` is not ``(B, T, d_model)``, ``offset`` is
        negative, or the positions run past ``max_seq_len``."""


class _AddedPositions(nn.Module):
    """Shared checks of the modules that add a table to their input."""

    d_model: int
    max_seq_len: int

    def _check_input(self, x: Any, offset: Any) -> int:
        check_tensor("x", x, ndim=3, floating=True)
        check_int("offset", offset, minimum=0)
        if x.shape[-1] != self.d_model:
            raise ValueError(
                f"x has feature size {x.shape[-1]}, expected "
                f"d_model={self.d_model}"
            )
        end = offset + x.shape[1]
        if end > self.max_seq_len:
            raise ValueError(
                f"sequence of length {x.shape[1]} starting at offset "
                f"{offset} needs {end} positions, more than "
                f"max_seq_len={self.max_seq_len}"
            )
        return end


class SinusoidalPositionalEncoding(_AddedPositions):
    r"""Add the fixed sinusoidal table to a batch of embeddings.

    ``x + PE[offset : offset + T]`` followed by dropout, as in Vaswani et al.
    (2017, section 3.5). The table (:func:`sinusoidal_encoding`) is a
    non-persistent buffer: it moves with ``.to(device)``, has no gradient
    and is not written to checkpoints (it is recomputed on construction).

    Args:
        d_model: the embedding width, even.
        max_seq_len: the number of positions the table holds.
        base: the wavelength scale, 10000 in the paper.
        dropout: dropout probability on the sum (training mode only).

    Shape:
        - x: ``(B, T, d_model)`` with ``offset + T <= max_seq_len``.
        - returns ``(B, T, d_model)``.

    Example:
        >>> pe = SinusoidalPositionalEncoding(4, max_seq_len=8)
        >>> pe(torch.zeros(1, 2, 4))
        tensor([[[0.0000, 1.0000, 0.0000, 1.0000],
                 [0.8415, 0.5403, 0.0100, 0.9999]]])
    """

    pe: Tensor

    def __init__(
        self,
        d_model: int,
        max_seq_len: int = 5000,
        *,
        base: float = 10000.0,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        table = sinusoidal_encoding(max_seq_len, d_model, base=base)
        self.d_model = d_model
        self.max_seq_len = max_seq_len
        self.base = float(base)
        self.dropout = nn.Dropout(check_probability("dropout", dropout))
        self.register_buffer("pe", table, persistent=False)

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, max_seq_len={self.max_seq_len}, "
            f"base={self.base:g}"
        )

    @shared_doc(forward_raises=_FORWARD_RAISES)
    def forward(self, x: Tensor, *, offset: int = 0) -> Tensor:
        """Add the encodings of positions ``offset .. offset + T - 1``.

        Args:
            x: the token embeddings.
            offset: the position of the first token (for decoding with a
                cache, the number of tokens already seen).

        Returns:
            ``dropout(x + PE[offset : offset + T])``.

        {forward_raises}
        """
        end = self._check_input(x, offset)
        table = self.pe[offset:end].to(x.dtype)  # (T, d_model)
        return self.dropout(x + table)


class LearnedPositionalEmbedding(_AddedPositions):
    """Add a learned vector per position (GPT-2, BERT).

    An ``nn.Embedding(max_seq_len, d_model)`` looked up at positions
    ``offset .. offset + T - 1`` and added to the input, then dropout.
    Each row is trained only by sequences long enough to reach it: a
    position at or past ``max_seq_len`` has no vector, and one that
    training never reached keeps its initial value.

    Args:
        d_model: the embedding width.
        max_seq_len: the number of positions the table holds.
        dropout: dropout probability on the sum (training mode only).
        init_std: standard deviation of the normal initialisation (0.02,
            as in GPT-2).

    Shape:
        - x: ``(B, T, d_model)`` with ``offset + T <= max_seq_len``.
        - returns ``(B, T, d_model)``.

    Example:
        >>> pe = LearnedPositionalEmbedding(8, max_seq_len=16)
        >>> pe(torch.zeros(2, 5, 8)).shape
        torch.Size([2, 5, 8])
    """

    def __init__(
        self,
        d_model: int,
        max_seq_len: int,
        *,
        dropout: float = 0.0,
        init_std: float = 0.02,
    ) -> None:
        super().__init__()
        self.d_model = check_int("d_model", d_model)
        self.max_seq_len = check_int("max_seq_len", max_seq_len)
        self.init_std = check_number(
            "init_std", init_std, minimum=0.0, min_inclusive=False
        )
        self.embedding = nn.Embedding(max_seq_len, d_model)
        self.dropout = nn.Dropout(check_probability("dropout", dropout))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw the table from ``N(0, init_std^2)``."""
        nn.init.normal_(self.embedding.weight, std=self.init_std)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, max_seq_len={self.max_seq_len}"

    @shared_doc(forward_raises=_FORWARD_RAISES)
    def forward(self, x: Tensor, *, offset: int = 0) -> Tensor:
        """Add the embeddings of positions ``offset .. offset + T - 1``.

        Args:
            x: the token embeddings.
            offset: the position of the first token.

        Returns:
            ``dropout(x + E[offset : offset + T])``.

        {forward_raises}
        """
        end = self._check_input(x, offset)
        positions = torch.arange(offset, end, device=x.device)
        return self.dropout(x + self.embedding(positions).to(x.dtype))


