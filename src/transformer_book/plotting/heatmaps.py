"""Heatmaps: one helper for a matrix, one for panels, thin wrappers."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.colors import Colormap, ListedColormap
from matplotlib.image import AxesImage
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import MaxNLocator

from .._checks import check_int
from . import _style
from ._style import PALETTE, as_array, check_labels, get_axes, styled

__all__ = ["plot_attention", "plot_attention_heads", "plot_head_split",
           "plot_heatmap", "plot_heatmaps", "plot_mask", "plot_masks"]

Labels = Sequence[object] | None  # one label per row or column
_BLOCKED = "#DDDDDD"
# How plot_mask and plot_masks draw a 0/1 "may attend" matrix.
_MASK_STYLE: dict[str, Any] = {
    "xlabel": "key", "ylabel": "query",
    "cmap": ListedColormap([_BLOCKED, PALETTE[0]]), "vmin": 0.0, "vmax": 1.0,
    "colorbar": False, "cell_lines": True, "aspect": "equal"}
# Up to this many cells, an unlabelled axis gets a tick on every cell.
_TICK_EVERY_CELL = 12


def _set_ticks(ax: Axes, x_labels: list[str] | None,
               y_labels: list[str] | None, shape: tuple[int, int],
               ticks_top: bool) -> None:
    """One tick per cell with labels; integer ticks without them."""
    rows, cols = shape
    sides = ((ax.xaxis, x_labels, cols), (ax.yaxis, y_labels, rows))
    for axis, labels, size in sides:
        if labels is not None:
            axis.set_ticks(range(size), labels=labels)
        elif size <= _TICK_EVERY_CELL:
            axis.set_ticks(range(size))
        else:
            axis.set_major_locator(MaxNLocator(nbins=6, integer=True))
    # Rotate column labels only when side by side they would not fit.
    if x_labels and max(len(s) for s in x_labels) * cols > 40:
        ax.tick_params(axis="x", labelrotation=90)
    if ticks_top:
        ax.xaxis.tick_top()
        ax.xaxis.set_label_position("top")
    ax.tick_params(length=0)
    ax.grid(False)


def _cell_lines(ax: Axes, shape: tuple[int, int]) -> None:
    """Thin white lines between cells make single entries countable."""
    rows, cols = shape
    ax.set_xticks(np.arange(-0.5, cols, 1), minor=True)
    ax.set_yticks(np.arange(-0.5, rows, 1), minor=True)
    ax.grid(which="minor", color="white", linewidth=1)
    ax.tick_params(which="minor", length=0)


def _write_cells(ax: Axes, image: AxesImage,
                 texts: Sequence[Sequence[str]]) -> None:
    """Write a text in every cell, dark on light colours and vice versa."""
    for (i, j), value in np.ndenumerate(np.asarray(image.get_array())):
        r, g, b, _ = image.cmap(image.norm(value))
        light = 0.299 * r + 0.587 * g + 0.114 * b > 0.5
        ax.text(j, i, texts[i][j], ha="center", va="center", fontsize=8,
                color="black" if light else "white")


def _limits(values: np.ndarray, vmin: float | None, vmax: float | None,
            center: float | None = None) -> tuple[float, float]:
    """Colour limits: given, or the data's, or symmetric about ``center``."""
    if center is not None:
        top = float(np.abs(values - center).max()) or 1.0
        low, high = center - top, center + top
    else:
        low, high = float(values.min()), float(values.max())
    low = low if vmin is None else vmin
    high = high if vmax is None else vmax
    if low == high:  # a constant matrix still gets a colour scale
        low, high = low - 0.5, high + 0.5
    return low, high


@styled
def plot_heatmap(
    values: torch.Tensor | np.ndarray | Sequence[Sequence[float]], *,
    x_labels: Labels = None, y_labels: Labels = None,
    xlabel: str = "", ylabel: str = "", title: str | None = None,
    cmap: str | Colormap = "viridis", vmin: float | None = None,
    vmax: float | None = None, center: float | None = None,
    colorbar: bool = True, colorbar_label: str = "",
    annotate: bool | str = False, cell_lines: bool = False,
    cell_text: Sequence[Sequence[str]] | None = None, ticks_top: bool = False,
    aspect: Literal["auto", "equal"] = "auto", ax: Axes | None = None,
) -> Axes:
    """Draw a matrix as a heatmap: row ``i`` at the top, column ``j``.

    Args:
        vmin, vmax: the colour scale's ends; the data's when ``None``.
        center: the middle of a symmetric colour scale (diverging maps).
        annotate: write each value in its cell: ``True`` or a format.
        cell_text: a text for each cell, written instead of the values.
        ticks_top: column ticks and label above the matrix.
        aspect: ``"auto"`` (fill the axes) or ``"equal"`` (square cells).
        ax: axes to draw on; a new figure sized to the matrix if ``None``.

    Shape:
        values: ``(rows, cols)``; ``cell_text`` the same.
    """
    matrix = as_array(values, "values", 2)
    rows, cols = matrix.shape
    if cell_text is not None:
        _style.check_len("cell_text", cell_text, rows)
        for i, row in enumerate(cell_text):
            _style.check_len(f"cell_text[{i}]", row, cols)
    elif annotate:
        spec = "{:.2f}" if annotate is True else str(annotate)
        cell_text = [[spec.format(v) for v in row] for row in matrix]
    size = (min(0.5 * cols + 2.2, 6.8) if cols <= _TICK_EVERY_CELL else 6.4,
            min(0.4 * rows + 1.4, 4.2) if rows <= _TICK_EVERY_CELL else 3.8)
    ax = get_axes(ax, size)
    low, high = _limits(matrix, vmin, vmax, center)
    image = ax.imshow(matrix, cmap=cmap, vmin=low, vmax=high, aspect=aspect,
                      interpolation="nearest")
    _set_ticks(ax, check_labels(x_labels, cols, "x_labels"),
               check_labels(y_labels, rows, "y_labels"), (rows, cols),
               ticks_top)
    if cell_lines:
        _cell_lines(ax, (rows, cols))
    if cell_text is not None:
        _write_cells(ax, image, cell_text)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, shrink=0.9, label=colorbar_label)
    return _style.finish_chart(ax, xlabel, ylabel, title)


def _panels(count: int, ncols: int | None) -> tuple[list[Axes], int]:
    """A new figure of ``count`` panels, at most 7 inches wide."""
    if ncols is None:
        ncols = count if count <= 3 else (2 if count == 4 else 4)
    ncols = min(check_int("ncols", ncols), count)
    nrows = math.ceil(count / ncols)
    size = (6.8, min(2.8 * nrows * min(3, ncols) / ncols + 0.6, 8.0))
    _, grid = _style.subplots(nrows, ncols, figsize=size)
    for spare in grid[count:]:
        spare.set_visible(False)
    return list(grid[:count]), ncols


@styled
def plot_heatmaps(
    values: torch.Tensor | np.ndarray | Sequence[Any], *,
    titles: Sequence[str] | None = None, xlabel: str = "", ylabel: str = "",
    x_labels: Labels = None, y_labels: Labels = None,
    cmap: str | Colormap = "viridis", vmin: float | None = None,
    vmax: float | None = None, colorbar: bool = True,
    colorbar_label: str = "", cell_lines: bool = False,
    aspect: Literal["auto", "equal"] = "auto", ncols: int | None = None,
    axes: Sequence[Axes] | None = None,
) -> np.ndarray:
    """Draw several matrices on one colour scale; return their axes.

    Row labels and the y axis name go on the first panel of each row.

    Args:
        values: a 3-D tensor or array, or a sequence of 2-D matrices.
        x_labels, y_labels: one label per column (row), for every panel.
        vmin, vmax: the shared scale's ends; the data's when ``None``.
        colorbar: add one colour bar for all panels.
        ncols: panels per row; up to three in a row, 2 x 2 for four.
        axes: one axes per matrix; a new figure when ``None``.

    Shape:
        values: ``(N, rows, cols)``.
    """
    if isinstance(values, (torch.Tensor, np.ndarray)):
        mats = list(as_array(values, "values", 3))
    else:
        _style.check_nonempty("values", values)
        mats = [as_array(m, f"values[{i}]", 2) for i, m in enumerate(values)]
    names = check_labels(titles, len(mats), "titles")
    if axes is None:
        panels, ncols = _panels(len(mats), ncols)
    else:
        _style.check_len("axes", axes, len(mats))
        panels, ncols = [get_axes(ax) for ax in axes], ncols or len(mats)
    low, high = _limits(np.concatenate([m.ravel() for m in mats]), vmin, vmax)
    for k, (ax, matrix) in enumerate(zip(panels, mats, strict=True)):
        first = k % ncols == 0
        ys = check_labels(y_labels, matrix.shape[0], "y_labels")
        plot_heatmap(matrix, x_labels=x_labels,
                     y_labels=ys if first or ys is None else [""] * len(ys),
                     xlabel=xlabel, ylabel=ylabel if first else "",
                     title=names[k] if names else None, cmap=cmap, vmin=low,
                     vmax=high, colorbar=False, cell_lines=cell_lines,
                     aspect=aspect, ax=ax)
    if colorbar:
        panels[0].figure.colorbar(panels[-1].images[0], ax=panels,
                                  shrink=0.9, label=colorbar_label)
    return np.asarray(panels, dtype=object)


def plot_attention(weights: torch.Tensor | np.ndarray, *,
                   x_labels: Labels = None, y_labels: Labels = None,
                   xlabel: str = "key", ylabel: str = "query",
                   vmax: float | None = 1.0, **options: Any) -> Axes:
    """Draw an attention matrix, one row per query, on a 0..1 scale.

    Args:
        vmax: top of the colour scale; the largest weight when ``None``.
        **options: other options of :func:`plot_heatmap`.

    Shape:
        weights: ``(q_len, kv_len)``.
    """
    options.setdefault("colorbar_label", "attention weight")
    return plot_heatmap(weights, x_labels=x_labels, y_labels=y_labels,
                        xlabel=xlabel, ylabel=ylabel, vmin=0.0, vmax=vmax,
                        **options)


def plot_attention_heads(weights: torch.Tensor | np.ndarray, *,
                         titles: Sequence[str] | None = None,
                         x_labels: Labels = None, y_labels: Labels = None,
                         **options: Any) -> np.ndarray:
    """Draw the attention weights of several heads on one 0..1 scale.

    Args:
        titles: one title per head; ``"head h"`` when ``None``.
        **options: other options of :func:`plot_heatmaps`.

    Shape:
        weights: ``(num_heads, q_len, kv_len)``.
    """
    w = as_array(weights, "weights", 3)
    options = {"colorbar_label": "attention weight", "xlabel": "key",
               "ylabel": "query", **options}
    titles = titles or [f"head {h}" for h in range(w.shape[0])]
    return plot_heatmaps(w, titles=titles, x_labels=x_labels,
                         y_labels=y_labels, vmin=0.0, vmax=1.0, **options)


def _allowed(mask: object, name: str) -> np.ndarray:
    """1 where a mask lets a query attend, 0 where it blocks."""
    m = torch.as_tensor(np.asarray(mask) if isinstance(mask, list) else mask)
    if m.is_floating_point():
        # A float mask is an additive bias: blocked = -inf or the minimum.
        m = m > torch.finfo(m.dtype).min
    elif m.dtype != torch.bool:
        m = m != 0
    return as_array(m, name, 2)


def _mask_legend(ax: Axes) -> None:
    handles = [Patch(color=PALETTE[0], label="may attend"),
               Patch(color=_BLOCKED, label="blocked")]
    _style.place_legend(ax, "outside", handles=handles)


@styled
def plot_mask(mask: torch.Tensor | np.ndarray, *, x_labels: Labels = None,
              y_labels: Labels = None, legend: bool = True,
              ax: Axes | None = None, title: str | None = None) -> Axes:
    """Draw an attention mask: coloured where a query may attend.

    Args:
        mask: boolean (``True`` = may attend), integer (non-zero = may
            attend) or a float bias (``-inf`` or the minimum = blocked).
        legend: add a legend for the two colours, right of the axes.

    Shape:
        mask: ``(q_len, kv_len)``.
    """
    allowed = _allowed(mask, "mask")
    rows, cols = allowed.shape
    ax = get_axes(ax, (min(0.4 * cols + 2.6, 6.8), 0.4 * rows + 1.2))
    plot_heatmap(allowed, x_labels=x_labels, y_labels=y_labels, title=title,
                 ax=ax, **_MASK_STYLE)
    if legend:
        _mask_legend(ax)
    return ax


@styled
def plot_masks(masks: Mapping[str, torch.Tensor | np.ndarray], *,
               axes: Sequence[Axes] | None = None) -> np.ndarray:
    """Draw several masks side by side, titled by their keys.

    Args:
        masks: maps a title to a 2-D mask (see :func:`plot_mask`).
        axes: one axes per mask; a new row of panels when ``None``.
    """
    _style.check_nonempty("masks", masks)
    allowed = [_allowed(m, f"masks[{k!r}]") for k, m in masks.items()]
    out = plot_heatmaps(allowed, titles=list(masks), ncols=len(allowed),
                        axes=axes, **_MASK_STYLE)
    _mask_legend(out[-1])
    return out


@styled
def plot_head_split(seq_len: int, d_model: int, num_heads: int, *,
                    ax: Axes | None = None, title: str | None = None) -> Axes:
    """Draw a ``(seq_len, d_model)`` matrix coloured by each feature's head.

    Args:
        d_model: the number of columns, divisible by ``num_heads``.
    """
    seq_len = check_int("seq_len", seq_len)
    head_dim = _style.check_divisible("d_model", d_model, "num_heads",
                                      num_heads)
    ax = get_axes(ax, (min(0.32 * d_model + 1.5, 6.8), 0.32 * seq_len + 1.6))
    for h in range(num_heads):
        left = h * head_dim - 0.5
        color = PALETTE[h % len(PALETTE)]
        ax.add_patch(Rectangle((left, -0.5), head_dim, seq_len, alpha=0.55,
                               facecolor=color, edgecolor="black", lw=1.5))
        ax.text(left + head_dim / 2, -0.7, f"head {h}\nfeatures "
                f"{h * head_dim}-{(h + 1) * head_dim - 1}", ha="center",
                va="bottom", fontsize=8)
    ax.grid(False)
    _cell_lines(ax, (seq_len, d_model))
    ax.set(xlim=(-0.5, d_model - 0.5), ylim=(seq_len - 0.5, -0.5),
           aspect="equal", xticks=range(0, d_model, head_dim),
           yticks=range(seq_len), ylabel="position",
           xlabel=f"feature (d_model = {d_model}, head_dim = {head_dim})")
    ax.tick_params(length=0)
    if title:
        ax.set_title(title, pad=34)
    return ax
