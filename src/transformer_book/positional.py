"""Position information for attention: absolute, rotary and relative.

Self-attention treats its input as a set: permuting the tokens permutes the
outputs the same way. This module holds the ways transformers tell it where
each token is:

- **absolute encodings added to the input**: the fixed sinusoidal table of
  Vaswani et al. (2017), :func:`sinusoidal_encoding` and
  :class:`SinusoidalPositionalEncoding`, and a learned table,
  :class:`LearnedPositionalEmbedding` (GPT-2, BERT);
- **rotary embeddings** (RoPE, Su et al., 2021), which rotate queries and
  keys by an angle proportional to their position so that their dot product
  depends only on the offset: :func:`apply_rotary`,
  :class:`RotaryEmbedding`;
- **biases on the attention scores**: ALiBi (Press et al., 2022),
  :func:`alibi_slopes` and :func:`alibi_bias`, and T5's learned bucketed
  relative bias (Raffel et al., 2020), :func:`relative_position_bucket`
  and :class:`RelativePositionBias`. Both return float biases of shape
  ``(num_heads, Lq, Lk)`` that :mod:`transformer_book.attention` accepts as
  ``attn_mask``.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

__all__ = [
    "LearnedPositionalEmbedding",
    "RelativePositionBias",
    "RotaryEmbedding",
    "SinusoidalPositionalEncoding",
    "alibi_bias",
    "alibi_slopes",
    "apply_rotary",
    "relative_position_bucket",
    "rotary_frequencies",
    "rotary_matrix",
    "sinusoidal_encoding",
    "sinusoidal_frequencies",
    "sinusoidal_shift_matrix",
]


# --------------------------------------------------------------------------
# Validation helpers


def _check_int(name: str, value: Any, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        word = "positive" if minimum == 1 else f"at least {minimum}"
        raise ValueError(f"{name}={value} must be {word}")


def _check_even(name: str, value: Any) -> None:
    _check_int(name, value, minimum=1)
    if value % 2:
        raise ValueError(
            f"{name}={value} must be even: the dimensions come in "
            f"(sin, cos) pairs"
        )


def _check_base(base: Any) -> None:
    if isinstance(base, bool) or not isinstance(base, (int, float)):
        raise TypeError(f"base must be a number, got {type(base).__name__}")
    if not base > 1:
        raise ValueError(f"base={base} must be greater than 1")


def _check_tensor(name: str, x: Any, ndims: tuple[int, ...]) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a Tensor, got {type(x).__name__}")
    if x.ndim not in ndims:
        dims = " or ".join(f"{n}-D" for n in ndims)
        raise ValueError(f"{name} must be {dims}, got shape {tuple(x.shape)}")


# --------------------------------------------------------------------------
# Sinusoidal encoding (Vaswani et al., 2017, section 3.5)


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
    _check_even("d_model", d_model)
    _check_base(base)
    # Computed in float64 and rounded once, so every dtype gets the
    # correctly rounded frequencies.
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    freqs = float(base) ** (-two_i / d_model)
    return freqs.to(dtype=dtype or torch.get_default_dtype(), device=device)


def sinusoidal_encoding(
    max_len: int,
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
        max_len: number of positions ``0 .. max_len - 1``.
        d_model: the encoding width; must be even (sin/cos pairs).
        base: the wavelength scale.
        dtype: floating dtype of the table (default dtype when ``None``).
        device: device of the table.

    Shape:
        returns ``(max_len, d_model)``.

    Returns:
        Row ``pos`` is the encoding of position ``pos``.

    Raises:
        TypeError: if a size is not an int.
        ValueError: if ``max_len`` or ``d_model`` is not positive, or
            ``d_model`` is odd.

    Example:
        >>> sinusoidal_encoding(2, 4)
        tensor([[0.0000, 1.0000, 0.0000, 1.0000],
                [0.8415, 0.5403, 0.0100, 0.9999]])
    """
    _check_int("max_len", max_len, minimum=1)
    _check_even("d_model", d_model)
    freqs = sinusoidal_frequencies(d_model, base=base, dtype=torch.float64)
    positions = torch.arange(max_len, dtype=torch.float64)
    angles = positions[:, None] * freqs[None, :]  # (max_len, d_model // 2)
    table = torch.stack((angles.sin(), angles.cos()), dim=-1)
    # (max_len, d_model // 2, 2) -> (max_len, d_model): sin, cos interleaved
    table = table.reshape(max_len, d_model)
    return table.to(dtype=dtype or torch.get_default_dtype(), device=device)


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
    if isinstance(offset, bool) or not isinstance(offset, (int, float)):
        raise TypeError(
            f"offset must be a number, got {type(offset).__name__}"
        )
    angles = offset * sinusoidal_frequencies(
        d_model, base=base, dtype=torch.float64
    )
    cos, sin = angles.cos(), angles.sin()
    blocks = torch.stack(
        (torch.stack((cos, sin), -1), torch.stack((-sin, cos), -1)), -2
    )  # (d_model // 2, 2, 2)
    matrix = torch.block_diag(*blocks)
    return matrix.to(dtype or torch.get_default_dtype())


class _AddedPositions(nn.Module):
    """Shared checks of the modules that add a table to their input."""

    d_model: int
    max_len: int

    def _check_input(self, x: Any, offset: Any) -> int:
        _check_tensor("x", x, (3,))
        _check_int("offset", offset, minimum=0)
        if x.shape[-1] != self.d_model:
            raise ValueError(
                f"x has feature size {x.shape[-1]}, expected "
                f"d_model={self.d_model}"
            )
        end = offset + x.shape[1]
        if end > self.max_len:
            raise ValueError(
                f"sequence of length {x.shape[1]} starting at offset "
                f"{offset} needs {end} positions, more than "
                f"max_len={self.max_len}"
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
        max_len: the number of positions the table holds.
        base: the wavelength scale, 10000 in the paper.
        dropout: dropout probability on the sum (training mode only).

    Shape:
        - x: ``(B, T, d_model)`` with ``offset + T <= max_len``.
        - returns ``(B, T, d_model)``.

    Example:
        >>> pe = SinusoidalPositionalEncoding(4, max_len=8)
        >>> pe(torch.zeros(1, 2, 4))
        tensor([[[0.0000, 1.0000, 0.0000, 1.0000],
                 [0.8415, 0.5403, 0.0100, 0.9999]]])
    """

    pe: Tensor

    def __init__(
        self,
        d_model: int,
        max_len: int = 5000,
        *,
        base: float = 10000.0,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        _check_dropout(dropout)
        table = sinusoidal_encoding(max_len, d_model, base=base)
        self.d_model = d_model
        self.max_len = max_len
        self.base = float(base)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pe", table, persistent=False)

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, max_len={self.max_len}, "
            f"base={self.base:g}"
        )

    def forward(self, x: Tensor, *, offset: int = 0) -> Tensor:
        """Add the encodings of positions ``offset .. offset + T - 1``.

        Args:
            x: the token embeddings.
            offset: the position of the first token (for decoding with a
                cache, the number of tokens already seen).

        Returns:
            ``dropout(x + PE[offset : offset + T])``.

        Raises:
            TypeError: if ``x`` is not a tensor or ``offset`` not an int.
            ValueError: if ``x`` is not ``(B, T, d_model)``, ``offset`` is
                negative, or the positions run past ``max_len``.
        """
        end = self._check_input(x, offset)
        table = self.pe[offset:end].to(x.dtype)  # (T, d_model)
        return self.dropout(x + table)


class LearnedPositionalEmbedding(_AddedPositions):
    """Add a learned vector per position (GPT-2, BERT).

    An ``nn.Embedding(max_len, d_model)`` looked up at positions
    ``offset .. offset + T - 1`` and added to the input, then dropout.
    Each row is trained only by sequences long enough to reach it: a
    position at or past ``max_len`` has no vector, and one that training
    never reached keeps its initial value.

    Args:
        d_model: the embedding width.
        max_len: the number of positions the table holds.
        dropout: dropout probability on the sum (training mode only).
        init_std: standard deviation of the normal initialisation (0.02,
            as in GPT-2).

    Shape:
        - x: ``(B, T, d_model)`` with ``offset + T <= max_len``.
        - returns ``(B, T, d_model)``.

    Example:
        >>> pe = LearnedPositionalEmbedding(8, max_len=16)
        >>> pe(torch.zeros(2, 5, 8)).shape
        torch.Size([2, 5, 8])
    """

    def __init__(
        self,
        d_model: int,
        max_len: int,
        *,
        dropout: float = 0.0,
        init_std: float = 0.02,
    ) -> None:
        super().__init__()
        _check_int("d_model", d_model, minimum=1)
        _check_int("max_len", max_len, minimum=1)
        _check_dropout(dropout)
        if not init_std > 0:
            raise ValueError(f"init_std={init_std} must be positive")
        self.d_model = d_model
        self.max_len = max_len
        self.init_std = float(init_std)
        self.embedding = nn.Embedding(max_len, d_model)
        self.dropout = nn.Dropout(dropout)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw the table from ``N(0, init_std^2)``."""
        nn.init.normal_(self.embedding.weight, std=self.init_std)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, max_len={self.max_len}"

    def forward(self, x: Tensor, *, offset: int = 0) -> Tensor:
        """Add the embeddings of positions ``offset .. offset + T - 1``.

        Args:
            x: the token embeddings.
            offset: the position of the first token.

        Returns:
            ``dropout(x + E[offset : offset + T])``.

        Raises:
            TypeError: if ``x`` is not a tensor or ``offset`` not an int.
            ValueError: if ``x`` is not ``(B, T, d_model)``, ``offset`` is
                negative, or the positions run past ``max_len``.
        """
        end = self._check_input(x, offset)
        positions = torch.arange(offset, end, device=x.device)
        return self.dropout(x + self.embedding(positions).to(x.dtype))


def _check_dropout(dropout: Any) -> None:
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)):
        raise TypeError(
            f"dropout must be a number, got {type(dropout).__name__}"
        )
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout={dropout} must be in [0, 1)")


# --------------------------------------------------------------------------
# Rotary position embedding (Su et al., 2021)


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
        ValueError: if ``head_dim`` is not positive and even.
    """
    _check_even("head_dim", head_dim)
    return sinusoidal_frequencies(
        head_dim, base=base, dtype=dtype, device=device
    )


def _positions(x: Tensor, positions: Tensor | None, offset: int) -> Tensor:
    length = x.shape[-2]
    if positions is None:
        _check_int("offset", offset, minimum=0)
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
    _check_tensor("x", x, (3, 4))
    if not x.dtype.is_floating_point:
        raise TypeError(f"x must be floating, got {x.dtype}")
    head_dim = x.shape[-1]
    if head_dim % 2:
        raise ValueError(
            f"head_dim={head_dim} (the last dimension of x) must be even: "
            f"RoPE rotates pairs of features"
        )
    freqs = rotary_frequencies(
        head_dim, base=base, dtype=torch.float64, device=x.device
    )
    angles = _positions(x, positions, offset)[:, None] * freqs  # (T, D/2)
    return _rotate(x, angles.cos().to(x.dtype), angles.sin().to(x.dtype))


def _rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate interleaved pairs of ``x`` (..., T, D) by (T, D/2) angles."""
    # (..., T, D) -> (..., T, D/2, 2): the (even, odd) feature pairs
    pairs = x.reshape(*x.shape[:-1], x.shape[-1] // 2, 2)
    even, odd = pairs[..., 0], pairs[..., 1]
    rotated = torch.stack(
        (even * cos - odd * sin, even * sin + odd * cos), dim=-1
    )
    return rotated.flatten(-2)  # (..., T, D/2, 2) -> (..., T, D)


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
        TypeError: if ``position`` is not a number.
        ValueError: if ``head_dim`` is not positive and even.
    """
    _check_even("head_dim", head_dim)
    if isinstance(position, bool) or not isinstance(position, (int, float)):
        raise TypeError(
            f"position must be a number, got {type(position).__name__}"
        )
    # R_m is the transpose of the sinusoidal shift by m: both rotate each
    # pair by m * theta_i, in opposite senses.
    shift = sinusoidal_shift_matrix(
        position, head_dim, base=base, dtype=torch.float64
    )
    return shift.T.to(dtype or torch.get_default_dtype()).contiguous()


class RotaryEmbedding(nn.Module):
    r"""Rotary position embedding (RoPE, Su et al., 2021) for one head size.

    Holds the frequencies :math:`\theta_i` as a non-persistent buffer and
    applies :func:`apply_rotary` to queries and keys after their
    projections and before the dot product. Nothing is added to the
    values, and RoPE has no parameters and no maximum length.

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

    freqs: Tensor

    def __init__(self, head_dim: int, *, base: float = 10000.0) -> None:
        super().__init__()
        freqs = rotary_frequencies(head_dim, base=base, dtype=torch.float64)
        self.head_dim = head_dim
        self.base = float(base)
        self.register_buffer("freqs", freqs, persistent=False)

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
            The rotated tensor.

        Raises:
            ValueError: if the last dimension of ``x`` is not
                ``head_dim``, or as :func:`apply_rotary`.
        """
        _check_tensor("x", x, (3, 4))
        if not x.dtype.is_floating_point:
            raise TypeError(f"x must be floating, got {x.dtype}")
        if x.shape[-1] != self.head_dim:
            raise ValueError(
                f"x has last dimension {x.shape[-1]}, expected "
                f"head_dim={self.head_dim}"
            )
        freqs = self.freqs.to(device=x.device, dtype=torch.float64)
        angles = _positions(x, positions, offset)[:, None] * freqs
        return _rotate(x, angles.cos().to(x.dtype), angles.sin().to(x.dtype))


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
    _check_int("num_heads", num_heads, minimum=1)

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
    k_len: int | None = None,
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
        q_len: the number of queries ``Lq``.
        k_len: the number of keys ``Lk``; ``q_len`` when ``None``.
        q_offset: the position of the first query; when decoding with
            ``Lk`` cached keys and ``Lq`` new queries, ``Lk - Lq``.
        dtype: floating dtype (default dtype when ``None``).
        device: device of the bias.

    Shape:
        returns ``(num_heads, Lq, Lk)``, which broadcasts against scores of
        shape ``(B, num_heads, Lq, Lk)``.

    Raises:
        TypeError: if a size is not an int.
        ValueError: if ``num_heads``, ``q_len`` or ``k_len`` is not
            positive, or ``q_offset`` is negative.

    Example:
        >>> alibi_bias(2, 3)[0]
        tensor([[ 0.0000, -0.0625, -0.1250],
                [-0.0625,  0.0000, -0.0625],
                [-0.1250, -0.0625,  0.0000]])
    """
    _check_int("num_heads", num_heads, minimum=1)
    _check_int("q_len", q_len, minimum=1)
    if k_len is None:
        k_len = q_len
    _check_int("k_len", k_len, minimum=1)
    _check_int("q_offset", q_offset, minimum=0)
    q_pos = torch.arange(q_offset, q_offset + q_len, dtype=torch.float64)
    k_pos = torch.arange(k_len, dtype=torch.float64)
    distance = (q_pos[:, None] - k_pos[None, :]).abs()  # (Lq, Lk)
    slopes = alibi_slopes(num_heads)[:, None, None]  # (H, 1, 1)
    # 0 - x rather than -x: the diagonal is +0.0, not -0.0.
    bias = 0.0 - slopes * distance  # (H, Lq, Lk)
    return bias.to(dtype=dtype or torch.get_default_dtype(), device=device)


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
    if not isinstance(relative_position, Tensor):
        raise TypeError(
            f"relative_position must be a Tensor, got "
            f"{type(relative_position).__name__}"
        )
    if relative_position.dtype.is_floating_point or (
        relative_position.dtype == torch.bool
    ):
        raise TypeError(
            f"relative_position must hold integers, got "
            f"{relative_position.dtype}"
        )
    _check_int("num_buckets", num_buckets, minimum=2)
    _check_int("max_distance", max_distance, minimum=1)
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
        returns ``(num_heads, Lq, Lk)``: pass it as ``attn_mask``.

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
        _check_int("num_heads", num_heads, minimum=1)
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
        self, q_len: int, k_len: int | None = None, *, q_offset: int = 0
    ) -> Tensor:
        """The bias for ``q_len`` queries and ``k_len`` keys.

        Args:
            q_len: the number of queries.
            k_len: the number of keys; ``q_len`` when ``None``.
            q_offset: the position of the first query.

        Returns:
            The bias, ``(num_heads, Lq, Lk)``.

        Raises:
            ValueError: if a size is not positive or ``q_offset`` is
                negative.
        """
        _check_int("q_len", q_len, minimum=1)
        if k_len is None:
            k_len = q_len
        _check_int("k_len", k_len, minimum=1)
        _check_int("q_offset", q_offset, minimum=0)
        dev = self.embedding.weight.device
        q_pos = torch.arange(q_offset, q_offset + q_len, device=dev)
        k_pos = torch.arange(k_len, device=dev)
        relative = k_pos[None, :] - q_pos[:, None]  # (Lq, Lk)
        buckets = relative_position_bucket(
            relative,
            bidirectional=self.bidirectional,
            num_buckets=self.num_buckets,
            max_distance=self.max_distance,
        )
        values = self.embedding(buckets)  # (Lq, Lk, H)
        return values.permute(2, 0, 1)  # (Lq, Lk, H) -> (H, Lq, Lk)
