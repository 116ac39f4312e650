"""Curves and other x-y charts: one line-plot helper, bars and a scatter.

:func:`plot_curves` draws every line plot of the book (cost against
length, gradient norm against distance, accuracy against length, losses
against epochs, encoding values against position, ...): the page passes
the data, the labels and the title, and chooses options (logarithmic axes,
reference slopes, labelled reference lines, steps, smoothing, where the
legend goes). Each curve gets its own colour, marker and dash pattern, and
later curves get smaller markers, so curves that coincide stay visible.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.ticker import FuncFormatter, MaxNLocator, ScalarFormatter

from .._checks import check_int
from ._style import (
    DASHES,
    MARKERS,
    PALETTE,
    as_array,
    check_labels,
    get_axes,
    place_legend,
    styled,
)

__all__ = ["plot_attention_offsets", "plot_curves", "plot_word_vectors"]

ArrayLike = torch.Tensor | np.ndarray | Sequence[float]
_REFERENCE = "#666666"


def _is_pair(values: object) -> bool:
    """Whether a curve is given as an ``(x, y)`` pair of 1-D sequences."""
    return (
        isinstance(values, tuple)
        and len(values) == 2
        and all(np.ndim(v) == 1 for v in values)
    )


def _curve_data(
    x: ArrayLike | None, curves: Mapping[Any, Any], smooth: int
) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Check the curves and return ``(label, x, y)`` for each."""
    if not curves:
        raise ValueError("curves must hold at least one curve")
    shared = None if x is None else as_array(x, "x", 1)
    out = []
    for label, values in curves.items():
        name = f"curves[{label!r}]"
        if _is_pair(values):
            cx = as_array(values[0], f"{name}[0]", 1)
            y = as_array(values[1], f"{name}[1]", 1)
        else:
            y = as_array(values, name, 1)
            cx = np.arange(y.size, dtype=float) if shared is None else shared
        if cx.shape != y.shape:
            raise ValueError(
                f"{name} has {y.size} values, expected {cx.size} "
                "(one per x value)"
            )
        if smooth > 1:
            # Moving average; each value sits at the last x it averages.
            width = min(smooth, y.size)
            y = np.convolve(y, np.ones(width) / width, mode="valid")
            cx = cx[width - 1 :]
        out.append((str(label), cx, y))
    return out


def _plain_log_labels(axis: Axis, values: np.ndarray) -> None:
    """Label a short logarithmic axis with plain numbers (30, not 3x10^1).

    Over a few decades matplotlib labels minor ticks in scientific
    notation; plain numbers at 1, 2 and 5 (and 3 within one decade) read
    better. Longer axes keep the powers of ten.
    """
    low, high = float(values.min()), float(values.max())
    decades = np.log10(high / low)
    if decades > 2 or low < 1e-3 or high > 1e5:
        return
    shown = {1, 2, 5} if decades > 1 else {1, 2, 3, 5}

    def label(value: float, _: int) -> str:
        mantissa = round(value / 10 ** np.floor(np.log10(value)), 6)
        return f"{value:g}" if mantissa in shown else ""

    axis.set_major_formatter(FuncFormatter(label))
    axis.set_minor_formatter(FuncFormatter(label))


def _check_positive(values: np.ndarray, name: str, axis: str) -> None:
    if (values <= 0).any():
        raise ValueError(
            f"{name} must be positive for the logarithmic {axis} axis"
        )


@styled
def plot_curves(
    x: ArrayLike | None,
    curves: Mapping[Any, ArrayLike | tuple[ArrayLike, ArrayLike]],
    *,
    xlabel: str = "",
    ylabel: str = "",
    title: str | None = None,
    logx: bool = False,
    logy: bool = False,
    reference_slopes: Sequence[float] = (),
    hlines: Mapping[str, float] | None = None,
    vlines: Mapping[str, float] | None = None,
    markers: bool = True,
    steps: bool = False,
    smooth: int = 1,
    xticks: ArrayLike | None = None,
    ylim: tuple[float | None, float | None] | None = None,
    legend: str | None = "best",
    legend_title: str | None = None,
    ax: Axes | None = None,
) -> Axes:
    r"""Draw one or more curves against a shared (or per-curve) x axis.

    Reference lines are grey and labelled in the legend: a reference slope
    ``p`` is the line ``y = c x^p`` through the geometric mean of the
    curves' first values (on log-log axes its slope compares directly with
    the curves'); ``hlines`` and ``vlines`` mark levels such as a chance
    accuracy or a training length.

    Args:
        x: the x values shared by every curve, or ``None`` when each curve
            is an ``(x, y)`` pair (a plain curve then runs over
            ``0 .. len(y) - 1``).
        curves: maps a legend label to the y values, one per ``x``, or to
            an ``(x, y)`` pair.
        xlabel: label of the x axis.
        ylabel: label of the y axis.
        title: axes title.
        logx: logarithmic x axis, base 2, labelled with plain numbers.
        logy: logarithmic y axis, base 10.
        reference_slopes: slopes of grey reference lines ``y = c x^p``.
        hlines: maps a label to a y value marked by a horizontal line.
        vlines: maps a label to an x value marked by a vertical line.
        markers: mark the points (every point up to 25, else about a
            dozen per curve, staggered between curves).
        steps: draw each curve as steps centred on its x values (for
            integer-valued functions such as buckets).
        smooth: width of a moving average applied to every curve (1 for
            none); each average is drawn at the last x it covers.
        xticks: explicit x tick positions; integer x values get integer
            ticks by default.
        ylim: limits of the y axis (``None`` on a side keeps it automatic).
        legend: where the legend goes: ``"best"`` (inside, where it covers
            the fewest points), ``"outside"`` (right), ``"below"``,
            ``"above"`` or ``None``.
        legend_title: title of the legend.
        ax: axes to draw on; a new figure when ``None``.

    Shape:
        x: ``(N,)``; each curve ``(N,)``, or a pair of ``(N_i,)`` arrays.

    Returns:
        The axes drawn on.

    Raises:
        ValueError: if ``curves`` is empty, a curve is not 1-D, has another
            length than its x values, holds NaN, or holds a non-positive
            value on a logarithmic axis; if ``smooth`` is not positive or
            ``legend`` is unknown.
        TypeError: if ``ax`` is not matplotlib axes.
    """
    smooth = check_int("smooth", smooth)
    data = _curve_data(x, curves, smooth)
    hlines = dict(hlines or {})
    vlines = dict(vlines or {})
    if logx:
        for label, cx, _ in data:
            _check_positive(cx, f"x of curves[{label!r}]", "x")
        _check_positive(np.array(list(vlines.values())), "vlines", "x")
    if logy:
        for label, _, y in data:
            _check_positive(y, f"curves[{label!r}]", "y")
        _check_positive(np.array(list(hlines.values())), "hlines", "y")
    ax = get_axes(ax)
    count = len(data)
    for i, (label, cx, y) in enumerate(data):
        style: dict[str, Any] = {
            "color": PALETTE[i % len(PALETTE)],
            "ls": DASHES[i % len(DASHES)],
            "label": label,
            "zorder": 3,
        }
        if steps:
            style["drawstyle"] = "steps-mid"
        if markers:
            # Shrinking markers: a later curve's marker sits inside an
            # earlier one's where the curves coincide.
            every = 1 if cx.size <= 25 else math.ceil(cx.size / 12)
            style.update(
                marker=MARKERS[i % len(MARKERS)],
                ms=max(3.0, 7.0 - 1.2 * i),
                markevery=(i * every // count, every),
            )
        ax.plot(cx, y, **style)
    if reference_slopes:
        x_min = min(float(cx.min()) for _, cx, _ in data)
        x_max = max(float(cx.max()) for _, cx, _ in data)
        firsts = np.array([abs(y[0]) for _, _, y in data])
        anchor = float(np.exp(np.mean(np.log(np.maximum(firsts, 1e-300)))))
        grid = np.geomspace(x_min, x_max, 50)
        for k, slope in enumerate(reference_slopes):
            ax.plot(
                grid,
                anchor * (grid / x_min) ** slope,
                color=_REFERENCE,
                ls=DASHES[(k + 1) % len(DASHES)],
                lw=1.0,
                zorder=2,
                label=f"slope {slope:g}",
            )
    for k, (label, value) in enumerate(hlines.items()):
        dash = DASHES[(k + 1) % len(DASHES)]
        ax.axhline(value, color=_REFERENCE, ls=dash, lw=1.0, label=label)
    for k, (label, value) in enumerate(vlines.items()):
        dash = DASHES[(k + 3) % len(DASHES)]
        ax.axvline(value, color=_REFERENCE, ls=dash, lw=1.2, label=label)
    if logx:
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(ScalarFormatter())
    elif all(np.equal(np.round(cx), cx).all() for _, cx, _ in data):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if logy:
        ax.set_yscale("log")
        _plain_log_labels(ax.yaxis, np.concatenate([y for *_, y in data]))
    if xticks is not None:
        ax.set_xticks(as_array(xticks, "xticks", 1))
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    place_legend(ax, legend, title=legend_title)
    if title:
        ax.set_title(title)
    return ax


def _offset_profile(
    weights: np.ndarray, circular: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Mean weight per key offset ``j - i``, one row per head."""
    heads, size, _ = weights.shape
    rows, cols = np.indices((size, size))
    offset = cols - rows
    if circular:
        # Wrap into -T//2 .. T - T//2 - 1, so "one back" stays at -1.
        half = size // 2
        offset = (offset + half) % size - half
        offsets = np.arange(-half, size - half)
    else:
        offsets = np.arange(-(size - 1), size)
    profile = np.stack(
        [
            [weights[h][offset == d].mean() for d in offsets]
            for h in range(heads)
        ]
    )
    return offsets, profile


@styled
def plot_attention_offsets(
    weights: torch.Tensor | np.ndarray,
    *,
    circular: bool = False,
    titles: Sequence[str] | None = None,
    legend: str | None = "outside",
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Bar chart of each head's mean attention weight by key offset.

    For every head, averages the weight that query ``i`` gives key ``j``
    over all pairs with the same offset ``j - i`` (and over the batch):
    a head that always looks one position back shows a single bar at -1.

    Args:
        weights: self-attention weights, per head.
        circular: measure offsets modulo ``T`` (for sequences that wrap
            around), as the offsets ``-T // 2 .. T - T // 2 - 1``.
        titles: one legend label per head; ``"head h"`` when ``None``.
        legend: where the legend goes (see :func:`plot_curves`); outside
            the axes by default, so that it covers no bar.
        ax: axes to draw on; a new figure when ``None``.
        title: axes title.

    Shape:
        weights: ``(H, T, T)`` or ``(B, H, T, T)``.

    Returns:
        The axes drawn on.

    Raises:
        ValueError: if ``weights`` is not 3-D or 4-D with square matrices,
            or ``titles`` does not have one entry per head.
    """
    w = as_array(weights, "weights", (3, 4))
    if w.ndim == 4:
        w = w.mean(axis=0)
    if w.shape[1] != w.shape[2]:
        raise ValueError(
            f"weights must be (H, T, T) or (B, H, T, T), got shape "
            f"{tuple(np.shape(weights))}"
        )
    heads = w.shape[0]
    names = check_labels(titles, heads, "titles") or [
        f"head {h}" for h in range(heads)
    ]
    offsets, profile = _offset_profile(w, circular)
    ax = get_axes(ax, (6.4, 3.2))
    width = 0.8 / heads
    for h in range(heads):
        ax.bar(
            offsets + (h - (heads - 1) / 2) * width,
            profile[h],
            width=width,
            color=PALETTE[h % len(PALETTE)],
            label=names[h],
        )
    ax.set_xticks(offsets)
    what = "(j - i) mod T" if circular else "j - i"
    ax.set_xlabel(f"key offset {what}")
    ax.set_ylabel("mean attention weight")
    ax.set_ylim(0.0, 1.0)
    place_legend(ax, legend)
    if title:
        ax.set_title(title)
    return ax


@styled
def plot_word_vectors(
    vectors: torch.Tensor | np.ndarray,
    labels: Sequence[str],
    *,
    groups: Sequence[object] | None = None,
    legend: str | None = "outside",
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Scatter word vectors projected on their first two principal axes.

    The vectors are scaled to unit length (cosine similarity is what
    word2vec's neighbours use), centred, and projected on the two
    directions of largest variance.

    Args:
        vectors: one vector per word.
        labels: the words, written next to their points.
        groups: the group of each word (a name, such as ``"types"``): one
            colour and one legend entry per group.
        legend: where the legend of the groups goes (see
            :func:`plot_curves`).
        ax: axes to draw on; a new figure when ``None``.
        title: axes title.

    Shape:
        vectors: ``(N, D)`` with ``N >= 2``.

    Returns:
        The axes drawn on.

    Raises:
        ValueError: if ``vectors`` is not 2-D with at least two rows, or
            ``labels`` or ``groups`` does not have one entry per vector.
    """
    v = as_array(vectors, "vectors", 2)
    if v.shape[0] < 2:
        raise ValueError(f"vectors must have at least 2 rows, got {v.shape}")
    words = check_labels(labels, v.shape[0], "labels")
    kinds = check_labels(groups, v.shape[0], "groups")
    v = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    v = v - v.mean(axis=0)
    _, _, vt = np.linalg.svd(v, full_matrices=False)
    xy = v @ vt[:2].T  # (N, D) @ (D, 2) -> (N, 2)
    ax = get_axes(ax, (6.4, 4.5))
    names = list(dict.fromkeys(kinds)) if kinds else [""]
    for g, name in enumerate(names):
        rows = [i for i in range(len(xy)) if not kinds or kinds[i] == name]
        ax.scatter(
            xy[rows, 0],
            xy[rows, 1],
            color=PALETTE[g % len(PALETTE)],
            marker=MARKERS[g % len(MARKERS)],
            s=22,
            zorder=3,
            label=name or None,
        )
    for (x, y), word in zip(xy, words or [], strict=True):
        ax.annotate(
            word, (x, y), xytext=(3, 3), textcoords="offset points",
            fontsize=8,
        )
    ax.set_xlabel("principal axis 1")
    ax.set_ylabel("principal axis 2")
    if kinds:
        place_legend(ax, legend)
    if title:
        ax.set_title(title)
    return ax
