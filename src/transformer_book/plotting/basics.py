"""Figures of the introduction."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from matplotlib.axes import Axes

from ._style import get_axes, styled

__all__ = ["plot_softmax_sharpness"]


@styled
def plot_softmax_sharpness(
    weights: Mapping[int, torch.Tensor | np.ndarray],
    *,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Draw attention weights sorted from largest to smallest, one line each.

    Args:
        weights: maps a key dimension ``d_k`` to the softmax weights of one
            query over its keys, shape ``(num_keys,)``.
        ax: axes to draw on; a new figure when ``None``.
        title: optional axes title.

    Returns:
        The axes drawn on.

    Raises:
        ValueError: if ``weights`` is empty or an entry is not 1-D.
    """
    if not weights:
        raise ValueError("weights must map at least one d_k to weights")
    ax = get_axes(ax)
    for d_k, w in weights.items():
        w = np.asarray(torch.as_tensor(w).detach().cpu(), dtype=float)
        if w.ndim != 1:
            raise ValueError(
                f"weights[{d_k}] must be 1-D, got shape {tuple(w.shape)}"
            )
        ranks = np.arange(1, w.size + 1)
        ax.plot(
            ranks, np.sort(w)[::-1], marker="o", ms=3, label=f"$d_k$={d_k}"
        )
    ax.set_xlabel("key, sorted by weight")
    ax.set_ylabel("attention weight")
    ax.set_ylim(0, 1)
    ax.legend(title="unscaled scores")
    if title:
        ax.set_title(title)
    return ax
