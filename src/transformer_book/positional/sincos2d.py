"""Fixed 2-D sine-cosine positions of a patch grid (Beyer et al., 2022)."""

from __future__ import annotations

import torch
from torch import Tensor

from .._checks import check_int
from .absolute import sinusoidal_encoding

__all__ = ["sincos2d_encoding"]


def sincos2d_encoding(grid_size: int, d_model: int, *, base: float = 10000.0,
                      dtype: torch.dtype | None = None,
                      device: torch.device | str | None = None) -> Tensor:
    """The 1-D sinusoidal table of a patch's row, then that of its column.

    Patches in one row share the first ``d_model / 2`` values, patches in
    one column the last (as in MAE, He et al., 2022).

    Shape:
        returns ``(grid_size ** 2, d_model)``, patches in row-major order.
    """
    check_int("grid_size", grid_size)
    if check_int("d_model", d_model) % 4:
        raise ValueError(f"d_model={d_model} must be divisible by 4 for 2-D "
                         "sine-cosine positions (a sin and a cos per axis)")
    half = sinusoidal_encoding(grid_size, d_model // 2, base=base,
                               dtype=dtype, device=device)  # (grid, D / 2)
    shape = (grid_size, grid_size, d_model // 2)
    rows = half[:, None].expand(shape)  # (grid, grid, d_model / 2)
    cols = half[None, :].expand(shape)
    # (grid, grid, d_model) -> (grid * grid, d_model)
    return torch.cat((rows, cols), dim=-1).reshape(-1, d_model)
