"""Figures of the recurrent-network chapters.

Three diagrams drawn with matplotlib patches (the unrolled RNN, the LSTM
cell and the GRU cell) and the curves those chapters measure: gradient norm
against time distance, accuracy against sequence length, and time against
sequence length.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import cycle

import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch
from matplotlib.ticker import ScalarFormatter

from ._style import PALETTE, as_array, check_curves, get_axes, styled

__all__ = [
    "draw_gru_cell",
    "draw_lstm_cell",
    "draw_unrolled_rnn",
    "plot_accuracy_vs_length",
    "plot_gradient_decay",
    "plot_time_vs_length",
]

_GATE = PALETTE[1]  # sigmoid and tanh layers
_OP = PALETTE[5]  # pointwise operations
_STATE = PALETTE[0]  # state highways
_LINE = "#333333"
# Marker and dash styles, cycled when there are more curves.
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
_DASHES = ("-", "--", ":", "-.", "-", "--", ":", "-.")


# -- drawing primitives ---------------------------------------------------


def _box(
    ax: Axes,
    x: float,
    y: float,
    text: str,
    *,
    w: float = 0.9,
    h: float = 0.6,
    color: str = _GATE,
    size: float = 10,
) -> None:
    """A rounded box centred at ``(x, y)`` with ``text`` inside."""
    ax.add_patch(
        FancyBboxPatch(
            (x - w / 2, y - h / 2),
            w,
            h,
            boxstyle="round,pad=0.02,rounding_size=0.12",
            facecolor=color,
            edgecolor=_LINE,
            linewidth=1.2,
            zorder=3,
        )
    )
    ax.text(x, y, text, ha="center", va="center", fontsize=size, zorder=4)


def _op(ax: Axes, x: float, y: float, text: str, r: float = 0.25) -> None:
    """A pointwise operation: a circle centred at ``(x, y)``."""
    ax.add_patch(
        Circle((x, y), r, facecolor=_OP, edgecolor=_LINE, lw=1.2, zorder=3)
    )
    ax.text(x, y, text, ha="center", va="center", fontsize=10, zorder=4)


def _path(
    ax: Axes,
    points: Sequence[tuple[float, float]],
    *,
    arrow: bool = True,
    color: str = _LINE,
    lw: float = 1.4,
) -> None:
    """A polyline through ``points``, with an arrow head on the last leg."""
    xs, ys = zip(*points, strict=True)
    if len(points) > 2:
        ax.plot(
            xs[:-1],
            ys[:-1],
            color=color,
            lw=lw,
            zorder=2,
            solid_capstyle="round",
        )
    if arrow:
        ax.add_patch(
            FancyArrowPatch(
                points[-2],
                points[-1],
                arrowstyle="-|>",
                mutation_scale=11,
                color=color,
                lw=lw,
                shrinkA=0,
                shrinkB=0,
                zorder=2,
            )
        )
    else:
        ax.plot(xs[-2:], ys[-2:], color=color, lw=lw, zorder=2)


def _dot(ax: Axes, x: float, y: float, color: str = _LINE) -> None:
    """A junction where a line branches."""
    ax.plot([x], [y], "o", color=color, ms=4, zorder=3)


def _canvas(
    ax: Axes, xlim: tuple[float, float], ylim: tuple[float, float]
) -> None:
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_aspect("equal")
    ax.axis("off")


# -- diagrams -------------------------------------------------------------


@styled
def draw_unrolled_rnn(
    num_steps: int = 4, *, ax: Axes | None = None, title: str | None = None
) -> Axes:
    """Draw an RNN folded (a cell with a loop) and unrolled over time.

    The unrolled part shows ``num_steps`` copies of the same cell: input
    :math:`x_t` from below, hidden state :math:`h_t` out of the top and to
    the next copy, starting from :math:`h_0`.

    Args:
        num_steps: time steps to unroll, 1 to 8.
        ax: axes to draw on; a new figure when ``None``.
        title: optional axes title.

    Returns:
        The axes drawn on.

    Raises:
        ValueError: if ``num_steps`` is outside 1..8.
    """
    if isinstance(num_steps, bool) or not isinstance(num_steps, int):
        raise TypeError(
            f"num_steps must be an int, got {type(num_steps).__name__}"
        )
    if not 1 <= num_steps <= 8:
        raise ValueError(f"num_steps={num_steps} must be between 1 and 8")
    ax = get_axes(ax, figsize=(1.6 + 1.45 * num_steps + 1.6, 3.0))
    cell = {"w": 1.0, "h": 0.8, "color": _GATE, "size": 10}

    # Folded: one cell whose output loops back into it.
    _box(ax, 0.0, 0.0, "cell", **cell)
    _path(ax, [(0.0, -1.3), (0.0, -0.4)])
    _path(ax, [(0.0, 0.4), (0.0, 1.3)])
    # The state leaves the cell and comes back at the next step.
    loop = [(0.5, 0.2), (0.9, 0.2), (0.9, -0.2), (0.5, -0.2)]
    _path(ax, loop, color=_STATE)
    ax.text(0.0, -1.55, "$x_t$", ha="center", va="center")
    ax.text(0.0, 1.55, "$h_t$", ha="center", va="center")
    ax.text(1.55, 0.0, "=", ha="center", va="center", fontsize=18)

    # Unrolled: the same cell at every step.
    x0, step = 3.2, 1.45
    _path(ax, [(x0 - 1.1, 0.0), (x0 - 0.5, 0.0)], color=_STATE)
    ax.text(
        x0 - 0.8,
        0.2,
        "$h_0$",
        ha="center",
        va="bottom",
        fontsize=8,
        color=_STATE,
    )
    for k in range(num_steps):
        x = x0 + k * step
        _box(ax, x, 0.0, "cell", **cell)
        _path(ax, [(x, -1.3), (x, -0.4)])
        _path(ax, [(x, 0.4), (x, 1.3)])
        ax.text(x, -1.55, f"$x_{k + 1}$", ha="center", va="center")
        ax.text(x, 1.55, f"$h_{k + 1}$", ha="center", va="center")
        if k < num_steps - 1:
            _path(ax, [(x + 0.5, 0.0), (x + step - 0.5, 0.0)], color=_STATE)
            ax.text(
                x + step / 2,
                0.2,
                f"$h_{k + 1}$",
                ha="center",
                va="bottom",
                fontsize=8,
                color=_STATE,
            )
    x_end = x0 + (num_steps - 1) * step
    _path(ax, [(x_end + 0.5, 0.0), (x_end + 1.0, 0.0)], color=_STATE)
    ax.text(x_end + 1.15, 0.0, "$\\cdots$", ha="left", va="center")
    ax.text(
        (x0 + x_end) / 2,
        -2.05,
        "same weights $W_{ih}, W_{hh}, b$ at every step",
        ha="center",
        va="center",
        fontsize=9,
        style="italic",
    )
    _canvas(ax, (-1.3, x_end + 1.7), (-2.3, 1.9))
    if title:
        ax.set_title(title)
    return ax


@styled
def draw_lstm_cell(
    *, ax: Axes | None = None, title: str | None = None
) -> Axes:
    r"""Draw an LSTM cell: gates, the cell-state line and pointwise ops.

    Boxes are learned layers (an affine map of :math:`[h_{t-1}, x_t]`
    followed by :math:`\sigma` or :math:`\tanh`); circles are pointwise
    operations. The top line carries the cell state :math:`c`, changed only
    by the forget gate's product and the input gate's sum.

    Args:
        ax: axes to draw on; a new figure when ``None``.
        title: optional axes title.

    Returns:
        The axes drawn on.
    """
    ax = get_axes(ax, figsize=(7.0, 4.4))
    ax.add_patch(
        FancyBboxPatch(
            (0.3, 0.5),
            9.4,
            5.0,
            boxstyle="round,pad=0,rounding_size=0.3",
            facecolor="#f4f4f4",
            edgecolor="#999999",
            zorder=0,
        )
    )
    top, bus, gate_y = 4.8, 1.2, 2.4
    fx, ix, gx, ox, hx = 2.3, 4.0, 5.4, 7.0, 8.4

    # Cell state: c_{t-1} -> x f -> + i*g -> c_t.
    _path(ax, [(-0.6, top), (fx - 0.25, top)], color=_STATE, lw=2.2)
    _path(ax, [(fx + 0.25, top), (gx - 0.25, top)], color=_STATE, lw=2.2)
    _path(ax, [(gx + 0.25, top), (10.6, top)], color=_STATE, lw=2.2)
    _op(ax, fx, top, r"$\times$")
    _op(ax, gx, top, "+")
    ax.text(-0.7, top + 0.35, "$c_{t-1}$", ha="left", va="bottom")
    ax.text(10.6, top + 0.35, "$c_t$", ha="right", va="bottom")

    # Input bus: h_{t-1} from the left, x_t from below.
    _path(ax, [(-0.6, bus), (ox, bus)], arrow=False)
    ax.text(-0.7, bus - 0.35, "$h_{t-1}$", ha="left", va="top")
    _path(ax, [(1.2, -0.5), (1.2, bus)], arrow=False)
    _dot(ax, 1.2, bus)
    ax.text(1.35, -0.45, "$x_t$", ha="left", va="bottom")

    for x, fn, name in (
        (fx, r"$\sigma$", "f"),
        (ix, r"$\sigma$", "i"),
        (gx, "tanh", "g"),
        (ox, r"$\sigma$", "o"),
    ):
        _dot(ax, x, bus)
        _path(ax, [(x, bus), (x, gate_y - 0.3)])
        _box(ax, x, gate_y, fn, size=9)
        ax.text(
            x - 0.55,
            gate_y,
            f"${name}$",
            ha="right",
            va="center",
            fontsize=10,
            color="#444444",
        )

    # f multiplies the old cell state.
    _path(ax, [(fx, gate_y + 0.3), (fx, top - 0.25)])
    # i * g is added to it.
    mid = 3.6
    _op(ax, gx, mid, r"$\times$")
    _path(ax, [(ix, gate_y + 0.3), (ix, mid), (gx - 0.25, mid)])
    _path(ax, [(gx, gate_y + 0.3), (gx, mid - 0.25)])
    _path(ax, [(gx, mid + 0.25), (gx, top - 0.25)])
    # h_t = o * tanh(c_t).
    _dot(ax, hx, top)
    _path(ax, [(hx, top), (hx, 3.85)], color=_STATE)
    ax.add_patch(
        FancyBboxPatch(
            (hx - 0.42, 3.38),
            0.84,
            0.44,
            boxstyle="round,pad=0,rounding_size=0.2",
            facecolor=_OP,
            edgecolor=_LINE,
            lw=1.2,
            zorder=3,
        )
    )
    ax.text(hx, 3.6, "tanh", ha="center", va="center", fontsize=9, zorder=4)
    _op(ax, hx, gate_y, r"$\times$")
    _path(ax, [(hx, 3.38), (hx, gate_y + 0.25)])
    _path(ax, [(ox + 0.45, gate_y), (hx - 0.25, gate_y)])
    _path(ax, [(hx, gate_y - 0.25), (hx, bus), (10.6, bus)])
    _dot(ax, 9.2, bus)
    _path(ax, [(9.2, bus), (9.2, 6.2)])
    ax.text(9.35, 6.2, "$h_t$", ha="left", va="top")
    ax.text(10.6, bus - 0.35, "$h_t$", ha="right", va="top")
    _canvas(ax, (-0.8, 10.8), (-0.7, 6.4))
    if title:
        ax.set_title(title)
    return ax


@styled
def draw_gru_cell(*, ax: Axes | None = None, title: str | None = None) -> Axes:
    r"""Draw a GRU cell in PyTorch's form: reset and update gates.

    The top line carries the hidden state; the update gate :math:`z` mixes
    the old state with the candidate :math:`n`, as
    :math:`h_t = (1 - z) \odot n + z \odot h_{t-1}`, and the reset gate
    :math:`r` scales the recurrent term inside the candidate.

    Args:
        ax: axes to draw on; a new figure when ``None``.
        title: optional axes title.

    Returns:
        The axes drawn on.
    """
    ax = get_axes(ax, figsize=(7.0, 4.4))
    ax.add_patch(
        FancyBboxPatch(
            (0.3, 0.5),
            9.4,
            5.0,
            boxstyle="round,pad=0,rounding_size=0.3",
            facecolor="#f4f4f4",
            edgecolor="#999999",
            zorder=0,
        )
    )
    top, bus, gate_y = 4.8, 1.0, 2.3
    zx, rx, wx, nx, mx, px = 2.0, 3.4, 4.8, 6.2, 7.4, 8.6

    # Hidden-state line: h_{t-1} -> (x z) -> (+ (1 - z) n) -> h_t.
    _path(ax, [(-0.6, top), (zx - 0.25, top)], color=_STATE, lw=2.2)
    _op(ax, zx, top, r"$\times$")
    _path(ax, [(zx + 0.25, top), (px - 0.25, top)], color=_STATE, lw=2.2)
    _op(ax, px, top, "+")
    _path(ax, [(px + 0.25, top), (10.6, top)], color=_STATE, lw=2.2)
    ax.text(-0.7, top + 0.35, "$h_{t-1}$", ha="left", va="bottom")
    ax.text(10.6, top + 0.35, "$h_t$", ha="right", va="bottom")

    # Input bus: h_{t-1} branches down, x_t enters from below.
    _dot(ax, 0.8, top)
    _path(ax, [(0.8, top), (0.8, bus), (nx, bus)], arrow=False)
    _path(ax, [(1.3, -0.5), (1.3, bus)], arrow=False)
    _dot(ax, 1.3, bus)
    ax.text(1.45, -0.45, "$x_t$", ha="left", va="bottom")
    for x, fn, name in (
        (zx, r"$\sigma$", "z"),
        (rx, r"$\sigma$", "r"),
        (nx, "tanh", "n"),
    ):
        _dot(ax, x, bus)
        _path(ax, [(x, bus), (x, gate_y - 0.3)])
        _box(ax, x, gate_y, fn, size=9)
        ax.text(
            x - 0.55,
            gate_y,
            f"${name}$",
            ha="right",
            va="center",
            fontsize=10,
            color="#444444",
        )

    # z keeps part of the old state ...
    _path(ax, [(zx, gate_y + 0.3), (zx, top - 0.25)])
    # ... and 1 - z lets the candidate n in.
    _dot(ax, zx, 3.9)
    _path(ax, [(zx, 3.9), (mx - 0.27, 3.9)])
    _op(ax, mx, 3.9, "1-", r=0.27)
    _op(ax, mx, gate_y, r"$\times$")
    _path(ax, [(mx, 3.63), (mx, gate_y + 0.25)])
    _path(ax, [(nx + 0.45, gate_y), (mx - 0.25, gate_y)])
    _path(ax, [(mx + 0.25, gate_y), (px, gate_y), (px, top - 0.25)])
    # r scales the recurrent term W_hn h + b_hn inside n.
    _dot(ax, wx, bus)
    _path(ax, [(wx, bus), (wx, gate_y - 0.21)])
    _box(ax, wx, gate_y, "$W_{hn}h$", w=0.95, h=0.42, color=_OP, size=8)
    _op(ax, wx, 3.1, r"$\times$")
    _path(ax, [(wx, gate_y + 0.21), (wx, 2.85)])
    _path(ax, [(rx, gate_y + 0.3), (rx, 3.1), (wx - 0.25, 3.1)])
    _path(ax, [(wx + 0.25, 3.1), (nx, 3.1), (nx, gate_y + 0.3)])
    _canvas(ax, (-0.8, 10.8), (-0.7, 6.0))
    if title:
        ax.set_title(title)
    return ax


# -- curves ---------------------------------------------------------------


@styled
def plot_gradient_decay(
    distances: Sequence[int] | np.ndarray | torch.Tensor,
    norms: Mapping[object, Sequence[float] | np.ndarray | torch.Tensor],
    *,
    ax: Axes | None = None,
    legend_title: str | None = None,
    title: str | None = None,
) -> Axes:
    """Plot gradient norms against time distance on a log scale.

    Args:
        distances: time distances ``T - t``, shape ``(N,)``.
        norms: maps a label (e.g. the spectral radius) to the gradient norm
            at each distance, shape ``(N,)``; values must be positive.
        ax: axes to draw on; a new figure when ``None``.
        legend_title: optional legend title.
        title: optional axes title.

    Returns:
        The axes drawn on.

    Raises:
        ValueError: if ``norms`` is empty, a curve has the wrong length or
            holds a non-positive value.
    """
    x = as_array(distances, "distances", 1)
    curves = check_curves(x, norms, "norms")
    ax = get_axes(ax)
    for label, y in curves.items():
        if (y <= 0).any():
            raise ValueError(f"norms[{label!r}] must be positive (log scale)")
        ax.semilogy(x, y, label=str(label))
    ax.set_xlabel("time distance $T - t$")
    ax.set_ylabel(r"gradient norm $\|\partial L / \partial x_t\|$")
    ax.legend(title=legend_title, ncol=2)
    if title:
        ax.set_title(title)
    return ax


@styled
def plot_accuracy_vs_length(
    lengths: Sequence[int] | np.ndarray,
    accuracies: Mapping[str, Sequence[float] | np.ndarray],
    *,
    chance: float | None = None,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Plot test accuracy against sequence length, one line per model.

    Args:
        lengths: sequence lengths ``T``, shape ``(N,)``.
        accuracies: maps a model name to its accuracy at each length.
        chance: accuracy of guessing, drawn as a dashed line.
        ax: axes to draw on; a new figure when ``None``.
        title: optional axes title.

    Returns:
        The axes drawn on.

    Raises:
        ValueError: if ``accuracies`` is empty or a curve has the wrong
            length.
    """
    x = as_array(lengths, "lengths", 1)
    curves = check_curves(x, accuracies, "accuracies")
    ax = get_axes(ax)
    # Distinct markers and dashes keep curves that coincide visible.
    styles = cycle(zip(_MARKERS, _DASHES, strict=True))
    for (label, y), (marker, dash) in zip(
        curves.items(), styles, strict=False
    ):
        ax.plot(x, y, marker=marker, ls=dash, label=str(label))
    if chance is not None:
        ax.axhline(chance, color="#777777", ls="--", lw=1, label="chance")
    ax.set_xlabel("sequence length $T$")
    ax.set_ylabel("test accuracy")
    ax.set_ylim(0, 1.05)
    ax.legend()
    if title:
        ax.set_title(title)
    return ax


@styled
def plot_time_vs_length(
    lengths: Sequence[int] | np.ndarray,
    seconds: Mapping[str, Sequence[float] | np.ndarray],
    *,
    ax: Axes | None = None,
    unit: str = "ms",
    loglog: bool = True,
    title: str | None = None,
) -> Axes:
    """Plot run time against sequence length, one line per method.

    Args:
        lengths: sequence lengths, shape ``(N,)``.
        seconds: maps a method name to its time in seconds at each length.
        ax: axes to draw on; a new figure when ``None``.
        unit: ``"s"``, ``"ms"`` or ``"us"``, the unit of the y axis.
        loglog: use logarithmic axes.
        title: optional axes title.

    Returns:
        The axes drawn on.

    Raises:
        ValueError: if ``seconds`` is empty, a curve has the wrong length
            or ``unit`` is unknown.
    """
    scale = {"s": 1.0, "ms": 1e3, "us": 1e6}
    if unit not in scale:
        raise ValueError(f"unit={unit!r} must be one of 's', 'ms', 'us'")
    x = as_array(lengths, "lengths", 1)
    curves = check_curves(x, seconds, "seconds")
    ax = get_axes(ax)
    for (label, y), marker in zip(curves.items(), cycle(_MARKERS)):
        ax.plot(x, y * scale[unit], marker=marker, label=str(label))
    if loglog:
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.set_xlabel("sequence length $T$")
    ax.set_ylabel(f"time per sequence ({'µs' if unit == 'us' else unit})")
    ax.legend()
    if title:
        ax.set_title(title)
    return ax
