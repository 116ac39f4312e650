"""Curves and other x-y charts: one line-plot helper, bars and a scatter."""

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
from . import _style
from ._style import DASHES, MARKERS, PALETTE, as_array, get_axes, styled

__all__ = ["plot_attention_offsets", "plot_curves", "plot_word_vectors"]

ArrayLike = torch.Tensor | np.ndarray | Sequence[float]
Curve = tuple[str, np.ndarray, np.ndarray]  # label, x, y
_REFERENCE = "#666666"


def _curve_data(x: ArrayLike | None, curves: Mapping[Any, Any],
                smooth: int) -> list[Curve]:
    """Check the curves and return ``(label, x, y)`` for each."""
    _style.check_nonempty("curves", curves)
    shared = None if x is None else as_array(x, "x", 1)
    out = []
    for label, values in curves.items():
        name = f"curves[{label!r}]"
        pair = isinstance(values, tuple) and len(values) == 2
        if pair and all(np.ndim(v) == 1 for v in values):
            cx = as_array(values[0], f"{name}[0]", 1)
            y = as_array(values[1], f"{name}[1]", 1)
        else:
            y = as_array(values, name, 1)
            cx = np.arange(y.size, dtype=float) if shared is None else shared
        _style.check_len(name, y, cx.size)
        if smooth > 1:
            # Moving average; each value sits at the last x it averages.
            width = min(smooth, y.size)
            y = np.convolve(y, np.ones(width) / width, mode="valid")
            cx = cx[width - 1 :]
        out.append((str(label), cx, y))
    return out


def _check_log(named: Mapping[str, np.ndarray], axis: str) -> None:
    """Refuse values that a logarithmic axis cannot show."""
    for name, values in named.items():
        if (values <= 0).any():
            raise ValueError(f"{name} must be positive for the logarithmic "
                             f"{axis} axis")


def _plain_log_labels(axis: Axis, values: np.ndarray) -> None:
    """Label a log axis of up to two decades with plain numbers (30)."""
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


def _draw_curves(ax: Axes, data: list[Curve], markers: bool,
                 steps: bool) -> None:
    """One colour, dash and marker per curve; later markers are smaller."""
    for i, (label, cx, y) in enumerate(data):
        style: dict[str, Any] = {
            "color": PALETTE[i % len(PALETTE)], "ls": DASHES[i % len(DASHES)],
            "label": label, "drawstyle": "steps-mid" if steps else "default"}
        if markers:
            # Every point up to 25, else about a dozen, staggered.
            every = 1 if cx.size <= 25 else math.ceil(cx.size / 12)
            style.update(marker=MARKERS[i % len(MARKERS)],
                         ms=max(3.0, 7.0 - 1.2 * i),
                         markevery=(i * every // len(data), every))
        ax.plot(cx, y, zorder=3, **style)


def _draw_references(ax: Axes, data: list[Curve], slopes: Sequence[float],
                     hlines: Mapping[str, float],
                     vlines: Mapping[str, float]) -> None:
    """Grey lines ``y = c x^p`` through the curves' start, and levels."""
    if slopes:
        x_min = min(float(cx.min()) for _, cx, _ in data)
        x_max = max(float(cx.max()) for _, cx, _ in data)
        firsts = np.array([abs(y[0]) for _, _, y in data])
        anchor = float(np.exp(np.mean(np.log(np.maximum(firsts, 1e-300)))))
        grid = np.geomspace(x_min, x_max, 50)
        for k, slope in enumerate(slopes):
            ax.plot(grid, anchor * (grid / x_min) ** slope, lw=1.0,
                    color=_REFERENCE, ls=DASHES[(k + 1) % len(DASHES)],
                    zorder=2, label=f"slope {slope:g}")
    marks = ((ax.axhline, hlines, 1, 1.0), (ax.axvline, vlines, 3, 1.2))
    for draw, lines, shift, lw in marks:
        for k, (label, value) in enumerate(lines.items()):
            dash = DASHES[(k + shift) % len(DASHES)]
            draw(value, color=_REFERENCE, ls=dash, lw=lw, label=label)


@styled
def plot_curves(x: ArrayLike | None,
                curves: Mapping[Any, ArrayLike | tuple[ArrayLike, ArrayLike]],
                *, xlabel: str = "", ylabel: str = "",
                title: str | None = None, logx: bool = False,
                logy: bool = False, reference_slopes: Sequence[float] = (),
                hlines: Mapping[str, float] | None = None,
                vlines: Mapping[str, float] | None = None,
                markers: bool = True, steps: bool = False, smooth: int = 1,
                xticks: ArrayLike | None = None,
                ylim: tuple[float | None, float | None] | None = None,
                legend: str | None = "best", legend_title: str | None = None,
                ax: Axes | None = None) -> Axes:
    """Draw one or more curves against a shared (or per-curve) x axis.

    Args:
        x: the x values of every curve; ``None`` when curves are pairs.
        curves: maps a legend label to y values or to an ``(x, y)`` pair.
        logx, logy: logarithmic axes, x base 2 (plain numbers), y base 10.
        reference_slopes: slopes ``p`` of grey lines ``y = c x^p``.
        hlines, vlines: map a label to a y (x) value marked by a line.
        steps: draw steps centred on the x values.
        smooth: width of a moving average (1 for none).
        ylim: limits of the y axis (``None`` keeps a side automatic).
        legend: ``"best"``, ``"outside"``, ``"below"``, ``"above"`` or
            ``None``.

    Shape:
        x: ``(N,)``; each curve ``(N,)``, or a pair of ``(N_i,)`` arrays.
    """
    data = _curve_data(x, curves, check_int("smooth", smooth))
    hlines, vlines = dict(hlines or {}), dict(vlines or {})
    if logx:
        named = {f"x of curves[{k!r}]": cx for k, cx, _ in data}
        _check_log({**named, "vlines": np.array([*vlines.values()])}, "x")
    if logy:
        named = {f"curves[{k!r}]": y for k, _, y in data}
        _check_log({**named, "hlines": np.array([*hlines.values()])}, "y")
    ax = get_axes(ax)
    _draw_curves(ax, data, markers, steps)
    _draw_references(ax, data, reference_slopes, hlines, vlines)
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
    return _style.finish_chart(ax, xlabel, ylabel, title, legend, legend_title)


def _offset_profile(weights: np.ndarray,
                    circular: bool) -> tuple[np.ndarray, np.ndarray]:
    """Mean weight per key offset ``j - i``, one row per head."""
    size = weights.shape[-1]
    offset = np.arange(size) - np.arange(size)[:, None]  # j - i
    if circular:
        # Wrap into -T//2 .. T - T//2 - 1, so "one back" stays at -1.
        half = size // 2
        offset = (offset + half) % size - half
        offsets = np.arange(-half, size - half)
    else:
        offsets = np.arange(-(size - 1), size)
    profile = [[w[offset == d].mean() for d in offsets] for w in weights]
    return offsets, np.array(profile)


@styled
def plot_attention_offsets(
    weights: torch.Tensor | np.ndarray, *, circular: bool = False,
    titles: Sequence[str] | None = None, legend: str | None = "outside",
    ax: Axes | None = None, title: str | None = None,
) -> Axes:
    """Bar chart of each head's mean attention weight by key offset.

    Args:
        weights: self-attention weights, per head (averaged over a batch).
        circular: offsets modulo ``T``, as ``-T // 2 .. T - T // 2 - 1``.
        titles: one legend label per head; ``"head h"`` when ``None``.
        legend: where the legend goes (see :func:`plot_curves`).

    Shape:
        weights: ``(H, T, T)`` or ``(B, H, T, T)``.
    """
    w = as_array(weights, "weights", (3, 4))
    w = w.mean(axis=0) if w.ndim == 4 else w
    if w.shape[1] != w.shape[2]:
        raise ValueError("weights must be (H, T, T) or (B, H, T, T), got "
                         f"shape {tuple(np.shape(weights))}")
    heads = w.shape[0]
    names = _style.check_labels(titles, heads, "titles")
    names = names or [f"head {h}" for h in range(heads)]
    offsets, profile = _offset_profile(w, circular)
    ax = get_axes(ax, (6.4, 3.2))
    width = 0.8 / heads
    for h in range(heads):
        ax.bar(offsets + (h - (heads - 1) / 2) * width, profile[h],
               width=width, color=PALETTE[h % len(PALETTE)], label=names[h])
    ax.set(xticks=offsets, ylim=(0.0, 1.0))
    what = "(j - i) mod T" if circular else "j - i"
    return _style.finish_chart(ax, f"key offset {what}",
                               "mean attention weight", title, legend)


@styled
def plot_word_vectors(
    vectors: torch.Tensor | np.ndarray, labels: Sequence[str], *,
    groups: Sequence[object] | None = None, legend: str | None = "outside",
    ax: Axes | None = None, title: str | None = None,
) -> Axes:
    """Scatter unit-length word vectors on their first two principal axes.

    Args:
        labels: the words, written next to their points.
        groups: each word's group: one colour and legend entry per group.
        legend: where the legend goes (see :func:`plot_curves`).

    Shape:
        vectors: ``(N, D)`` with ``N >= 2``.
    """
    v = as_array(vectors, "vectors", 2)
    check_int("len(vectors)", v.shape[0], minimum=2)
    words = _style.check_labels(labels, v.shape[0], "labels") or []
    kinds = _style.check_labels(groups, v.shape[0], "groups")
    v = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    v = v - v.mean(axis=0)
    _, _, vt = np.linalg.svd(v, full_matrices=False)
    xy = v @ vt[:2].T  # (N, D) @ (D, 2) -> (N, 2)
    ax = get_axes(ax, (6.4, 4.5))
    for g, name in enumerate(dict.fromkeys(kinds) if kinds else [""]):
        rows = [i for i in range(len(xy)) if not kinds or kinds[i] == name]
        ax.scatter(xy[rows, 0], xy[rows, 1], color=PALETTE[g % len(PALETTE)],
                   marker=MARKERS[g % len(MARKERS)], s=22, zorder=3,
                   label=name or None)
    for (x, y), word in zip(xy, words, strict=True):
        ax.annotate(word, (x, y), xytext=(3, 3), textcoords="offset points",
                    fontsize=8)
    return _style.finish_chart(ax, "principal axis 1", "principal axis 2",
                               title, legend if kinds else None)
