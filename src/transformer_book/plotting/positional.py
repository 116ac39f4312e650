"""Figures of the positional-encoding and attention-cost chapters."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import cycle

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.ticker import ScalarFormatter

from ._style import as_array, check_curves, get_axes, styled

__all__ = [
    "plot_alibi_bias",
    "plot_encoding_waves",
    "plot_length_generalization",
    "plot_positional_encoding",
    "plot_relative_buckets",
]

_MARKERS = ("o", "s", "^", "D", "v", "P", "X")
_DASHES = ("-", "--", "-.", ":")


@styled
def plot_positional_encoding(
    encoding: torch.Tensor | np.ndarray,
    *,
    ax: Axes | None = None,
    title: str | None = None,
    colorbar: bool = True,
) -> Axes:
    """Draw a position table as a heatmap: one row per position.

    Args:
        encoding: the encodings, one row per position.
        ax: axes to draw on; a new figure when ``None``.
        title: optional axes title.
        colorbar: add a colour bar.

    Shape:
        encoding: ``(max_len, d_model)``.

    Returns:
        The axes drawn on.

    Raises:
        ValueError: if ``encoding`` is not 2-D.
    """
    table = as_array(encoding, "encoding", 2)
    ax = get_axes(ax, (6.4, 3.8))
    top = max(float(np.abs(table).max()), 1e-12)
    image = ax.imshow(
        table,
        cmap="RdBu_r",
        vmin=-top,
        vmax=top,
        aspect="auto",
        interpolation="nearest",
    )
    ax.set_xlabel("dimension")
    ax.set_ylabel("position")
    ax.grid(False)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.03)
    if title:
        ax.set_title(title)
    return ax


@styled
def plot_encoding_waves(
    encoding: torch.Tensor | np.ndarray,
    dims: Sequence[int],
    *,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Draw chosen dimensions of a position table against position.

    Args:
        encoding: the encodings, one row per position.
        dims: the dimensions (columns) to draw, one line each.
        ax: axes to draw on; a new figure when ``None``.
        title: optional axes title.

    Shape:
        encoding: ``(max_len, d_model)``.

    Returns:
        The axes drawn on.

    Raises:
        ValueError: if ``encoding`` is not 2-D, ``dims`` is empty or names
            a dimension outside the table.
    """
    table = as_array(encoding, "encoding", 2)
    if not dims:
        raise ValueError("dims must name at least one dimension")
    bad = [d for d in dims if not 0 <= d < table.shape[1]]
    if bad:
        raise ValueError(
            f"dims {bad} are outside the {table.shape[1]} dimensions"
        )
    ax = get_axes(ax, (6.4, 3.2))
    positions = np.arange(table.shape[0])
    for dim, dash in zip(dims, cycle(_DASHES)):
        kind = "sin" if dim % 2 == 0 else "cos"
        ax.plot(
            positions,
            table[:, dim],
            ls=dash,
            label=f"dim {dim} ({kind}, pair {dim // 2})",
        )
    ax.set_xlabel("position")
    ax.set_ylabel("encoding value")
    ax.legend(loc="lower left", fontsize=8, ncol=2)
    if title:
        ax.set_title(title)
    return ax


@styled
def plot_alibi_bias(
    bias: torch.Tensor | np.ndarray,
    *,
    heads: Sequence[int] | None = None,
    slopes: Sequence[float] | torch.Tensor | None = None,
    axes: Sequence[Axes] | None = None,
    suptitle: str | None = None,
) -> np.ndarray:
    """Draw per-head attention biases side by side on one colour scale.

    Args:
        bias: the bias of each head (queries are rows, keys columns).
        heads: the heads to draw; all of them when ``None``.
        slopes: the ALiBi slope of every head, written in the titles.
        axes: one axes per drawn head; a new row of panels when ``None``.
        suptitle: optional title over the figure.

    Shape:
        bias: ``(H, Lq, Lk)``.

    Returns:
        The array of axes drawn on.

    Raises:
        ValueError: if ``bias`` is not 3-D, a head is out of range, or
            ``axes`` does not have one entry per head.
    """
    b = as_array(bias, "bias", 3)
    heads = list(range(b.shape[0])) if heads is None else list(heads)
    bad = [h for h in heads if not 0 <= h < b.shape[0]]
    if bad or not heads:
        raise ValueError(f"heads {heads} must index the {b.shape[0]} heads")
    if axes is None:
        size = (2.3 * len(heads) + 1.2, 2.7)
        _, grid = plt.subplots(1, len(heads), figsize=size, squeeze=False)
        axes = grid[0]
    elif len(axes) != len(heads):
        raise ValueError(
            f"axes has {len(axes)} entries, expected {len(heads)}"
        )
    axes = np.asarray(axes, dtype=object)
    low = float(b[heads].min())
    image = None
    for h, ax in zip(heads, axes, strict=True):
        image = ax.imshow(
            b[h],
            cmap="magma",
            vmin=min(low, -1e-12),
            vmax=0.0,
            interpolation="nearest",
        )
        ax.grid(False)
        name = f"head {h}"
        if slopes is not None:
            name += f", m = {float(slopes[h]):.3g}"
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("key")
    axes[0].set_ylabel("query")
    axes[0].figure.colorbar(
        image, ax=list(axes), fraction=0.03, pad=0.02, label="bias"
    )
    if suptitle:
        axes[0].figure.suptitle(suptitle)
    return axes


@styled
def plot_relative_buckets(
    relative: torch.Tensor | np.ndarray | Sequence[int],
    buckets: Mapping[str, torch.Tensor | np.ndarray],
    *,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Draw T5 bucket indices against the key-minus-query offset.

    Args:
        relative: the offsets ``j - i``.
        buckets: maps a setting's name to the bucket of each offset.
        ax: axes to draw on; a new figure when ``None``.
        title: optional axes title.

    Returns:
        The axes drawn on.

    Raises:
        ValueError: if ``buckets`` is empty or a curve has the wrong size.
    """
    x = as_array(relative, "relative", 1)
    curves = check_curves(x, buckets, "buckets")
    ax = get_axes(ax, (6.4, 3.2))
    for (label, y), dash in zip(curves.items(), cycle(_DASHES)):
        ax.step(x, y, where="mid", ls=dash, label=label)
    ax.set_xlabel("key position minus query position")
    ax.set_ylabel("bucket")
    ax.legend()
    if title:
        ax.set_title(title)
    return ax


@styled
def plot_length_generalization(
    lengths: Sequence[float] | np.ndarray,
    values: Mapping[str, Sequence[float] | np.ndarray],
    *,
    train_len: float | None = None,
    chance: float | None = None,
    ax: Axes | None = None,
    xlabel: str = "evaluation length",
    ylabel: str = "accuracy",
    title: str | None = None,
    logx: bool = True,
) -> Axes:
    """Draw a metric against length, one line per scheme.

    Args:
        lengths: the lengths evaluated.
        values: maps a scheme to its metric at each length.
        train_len: the training length, marked by a vertical line.
        chance: the chance level, marked by a horizontal line.
        ax: axes to draw on; a new figure when ``None``.
        xlabel: label of the x axis.
        ylabel: label of the y axis.
        title: optional axes title.
        logx: logarithmic (base 2) x axis.

    Returns:
        The axes drawn on.

    Raises:
        ValueError: if ``values`` is empty or a curve has the wrong size.
    """
    x = as_array(lengths, "lengths", 1)
    curves = check_curves(x, values, "values")
    ax = get_axes(ax)
    for index, (label, y) in enumerate(curves.items()):
        marker = _MARKERS[index % len(_MARKERS)]
        dash = _DASHES[index % len(_DASHES)]
        ax.plot(x, y, marker=marker, ls=dash, label=label)
    if train_len is not None:
        ax.axvline(train_len, color="#777777", lw=1, ls=":")
        ax.annotate(
            "training length",
            (train_len, 0.5),
            xycoords=("data", "axes fraction"),
            rotation=90,
            ha="right",
            va="center",
            fontsize=8,
            color="#555555",
        )
    if chance is not None:
        ax.axhline(chance, color="#777777", lw=1, ls="--", label="chance")
    if logx:
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title)
    return ax
