"""Teaching diagrams, drawn with matplotlib patches.

The recurrent cells of Part I (the unrolled RNN, the LSTM and GRU cells),
how tokenizers cut a text, and the attention diagrams of Part II and the
encoder-decoder chapter: the flow from :math:`X` through :math:`Q, K, V` to
the output, one query's row of weights, heads split and merged,
cross-attention, and an RNN encoder-decoder with additive attention; and
for Part III the transformer block (post-LN and pre-LN, encoder and
decoder) and the three kinds of attention in an encoder-decoder.

Every helper draws on the axes it is given (or on a new figure about 7
inches wide, the text column), keeps its text clear of boxes and arrows,
and returns the axes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from matplotlib import colormaps as mpl_colormaps
from matplotlib.axes import Axes
from matplotlib.colors import to_hex, to_rgb
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch

from .._checks import check_bool, check_int, check_tensor
from .._docs import shared_doc
from ._style import PALETTE, as_array, get_axes, styled

__all__ = [
    "draw_attention_kinds",
    "draw_cross_attention",
    "draw_data_parallel",
    "draw_gru_cell",
    "draw_heads_split_merge",
    "draw_lstm_cell",
    "draw_patches",
    "draw_qkv_flow",
    "draw_query_row",
    "draw_seq2seq_attention",
    "draw_transformer_block",
    "draw_unrolled_rnn",
    "plot_tokenization",
]

_GATE = PALETTE[1]  # sigmoid and tanh layers
_OP = PALETTE[5]  # pointwise operations
_STATE = PALETTE[0]  # state highways
_LINE = "#333333"


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


def _gates(
    ax: Axes,
    gates: Sequence[tuple[float, str, str]],
    bus: float,
    gate_y: float,
) -> None:
    """Gate layers ``(x, function, name)`` fed from the input bus."""
    for x, fn, name in gates:
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


# The arguments of the two cell diagrams (see transformer_book._docs).
_CELL_ARGS = """\
Args:
    ax: axes to draw on; a new figure when ``None``.
    title: optional axes title.

Returns:
    The axes drawn on."""


def _input_from_below(ax: Axes, x: float, bus: float) -> None:
    """The input :math:`x_t` entering the cell at ``x`` and joining the bus."""
    _path(ax, [(x, -0.5), (x, bus)], arrow=False)
    _dot(ax, x, bus)
    ax.text(x + 0.15, -0.45, "$x_t$", ha="left", va="bottom")


def _cell_frame(ax: Axes | None) -> Axes:
    """``ax`` (or a new 7 x 4.4 in figure) with the grey box of a cell."""
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
    return ax


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
    cell: dict[str, Any] = {"w": 1.0, "h": 0.8, "color": _GATE, "size": 10}

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
@shared_doc(cell_args=_CELL_ARGS)
def draw_lstm_cell(
    *, ax: Axes | None = None, title: str | None = None
) -> Axes:
    r"""Draw an LSTM cell: gates, the cell-state line and pointwise ops.

    Boxes are learned layers (an affine map of :math:`[h_{t-1}, x_t]`
    followed by :math:`\sigma` or :math:`\tanh`); circles are pointwise
    operations. The top line carries the cell state :math:`c`, changed only
    by the forget gate's product and the input gate's sum.

    {cell_args}
    """
    ax = _cell_frame(ax)
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
    _input_from_below(ax, 1.2, bus)

    gates = [
        (fx, r"$\sigma$", "f"),
        (ix, r"$\sigma$", "i"),
        (gx, "tanh", "g"),
        (ox, r"$\sigma$", "o"),
    ]
    _gates(ax, gates, bus, gate_y)

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
@shared_doc(cell_args=_CELL_ARGS)
def draw_gru_cell(*, ax: Axes | None = None, title: str | None = None) -> Axes:
    r"""Draw a GRU cell in PyTorch's form: reset and update gates.

    The top line carries the hidden state; the update gate :math:`z` mixes
    the old state with the candidate :math:`n`, as
    :math:`h_t = (1 - z) \odot n + z \odot h_{t-1}`, and the reset gate
    :math:`r` scales the recurrent term inside the candidate.

    {cell_args}
    """
    ax = _cell_frame(ax)
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
    _input_from_below(ax, 1.3, bus)
    gates = [
        (zx, r"$\sigma$", "z"),
        (rx, r"$\sigma$", "r"),
        (nx, "tanh", "n"),
    ]
    _gates(ax, gates, bus, gate_y)

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


def _visible(token: str) -> str:
    """Make spaces and line breaks visible inside a token box."""
    return (
        token.replace(" ", "\u2423")
        .replace("\n", "\u21b5")
        .replace("\t", "\u21e5")
    )


@styled
def plot_tokenization(
    rows: Mapping[str, Sequence[str]],
    *,
    ax: Axes | None = None,
    max_chars: int = 60,
    title: str | None = None,
) -> Axes:
    """Draw how several tokenizers cut the same text, one row each.

    Each token is a box of alternating colour; a space shows as ``␣`` and
    a line break as ``↵``. Rows are cut after ``max_chars`` characters.

    Args:
        rows: maps a tokenizer's name to the tokens (as strings) it made.
        ax: axes to draw on; a new figure when ``None``.
        max_chars: characters drawn per row at most.
        title: optional axes title.

    Returns:
        The axes drawn on.

    Raises:
        ValueError: if ``rows`` is empty.
    """
    if not rows:
        raise ValueError("rows is empty")
    ax = get_axes(ax, figsize=(9.0, 0.7 * len(rows) + 0.6))
    char_w = 1.0
    for r, (name, tokens) in enumerate(rows.items()):
        y = -r
        x = 0.0
        ax.text(-1.0, y, name, ha="right", va="center", fontsize=9)
        for i, token in enumerate(tokens):
            shown = _visible(token)
            width = max(len(shown), 1) * char_w
            if x + width > max_chars * char_w:
                ax.text(x + 0.3, y, "\u2026", va="center", fontsize=10)
                break
            ax.add_patch(
                FancyBboxPatch(
                    (x + 0.06, y - 0.3),
                    width - 0.12,
                    0.6,
                    boxstyle="round,pad=0,rounding_size=0.15",
                    facecolor=PALETTE[(i % 2) * 5],
                    alpha=0.35,
                    edgecolor="#333333",
                    linewidth=0.6,
                )
            )
            ax.text(
                x + width / 2,
                y,
                shown,
                ha="center",
                va="center",
                family="monospace",
                fontsize=8,
            )
            x += width
    ax.set_xlim(-0.5, max_chars * char_w + 1.5)
    ax.set_ylim(-len(rows) + 0.4, 0.6)
    ax.axis("off")
    if title:
        ax.set_title(title)
    return ax


# -- attention diagrams ---------------------------------------------------

_MUTED = "#555555"  # notes beside the boxes
_MAX_TOKENS = 10  # keys, values or source tokens that fit the text column


def _tint(color: str, amount: float) -> str:
    """``color`` mixed with white: ``amount`` 1 is the colour, 0 white."""
    r, g, b = (1.0 - amount * (1.0 - c) for c in to_rgb(color))
    return to_hex((r, g, b))


_TENSOR = _tint(PALETTE[0], 0.28)  # activations: X, Q, K, V, A, Y
_PARAM = _tint(PALETTE[1], 0.45)  # learned matrices
_FUNC = _tint(PALETTE[2], 0.3)  # fixed operations: scores, softmax
_MASK = _tint(PALETTE[3], 0.22)  # the optional mask
# One colour per head, apart from the tensor blue and the parameter orange.
_HEADS = tuple(_tint(PALETTE[i], 0.4) for i in (5, 2, 4, 3, 6, 0))


def _rect(
    ax: Axes,
    x: float,
    y: float,
    text: str = "",
    *,
    w: float = 0.8,
    h: float = 0.56,
    color: str = _TENSOR,
    size: float = 10,
    dashed: bool = False,
    gid: str | None = None,
) -> None:
    """A box centred at ``(x, y)`` with ``text`` inside, tagged ``gid``."""
    patch = FancyBboxPatch(
        (x - w / 2, y - h / 2),
        w,
        h,
        boxstyle="round,pad=0,rounding_size=0.08",
        facecolor=color,
        edgecolor=_LINE,
        linewidth=1.0,
        linestyle="--" if dashed else "-",
        zorder=3,
    )
    patch.set_gid(gid)
    ax.add_patch(patch)
    if text:
        ax.text(x, y, text, ha="center", va="center", fontsize=size, zorder=4)


def _note(
    ax: Axes,
    x: float,
    y: float,
    text: str,
    *,
    ha: str = "center",
    va: str = "center",
    size: float = 8.5,
    color: str = _MUTED,
    rotation: float = 0.0,
) -> None:
    """A small explanatory label outside the boxes."""
    ax.text(
        x,
        y,
        text,
        ha=ha,
        va=va,
        fontsize=size,
        color=color,
        rotation=rotation,
    )


def _new_axes(
    ax: Axes | None,
    xlim: tuple[float, float],
    ylim: tuple[float, float],
    scale: float,
) -> tuple[Axes, tuple[int, float, bool]]:
    """``ax``, or new axes in the drawing's aspect, and a layout record.

    A new figure gets ``scale`` inches per data unit, but is never wider
    than the text column (7 inches); :func:`_finish` then shrinks the text
    to match.
    """
    new = ax is None
    width = min(7.0, scale * (xlim[1] - xlim[0]))
    aspect = (ylim[1] - ylim[0]) / (xlim[1] - xlim[0])
    ax = get_axes(ax, figsize=(width, width * aspect))
    return ax, (len(ax.texts), scale, new)


def _finish(
    ax: Axes,
    layout: tuple[int, float, bool],
    xlim: tuple[float, float],
    ylim: tuple[float, float],
    title: str | None,
) -> Axes:
    """Set the limits and title; shrink the text if the drawing is small.

    Text sizes are in points and the layout in data units: when fewer
    inches than planned hold a unit (a long row of tokens in the text
    column, or small axes given by the caller), the text added by this
    drawing shrinks in proportion, so that it stays clear of the boxes.
    """
    first, scale, new = layout
    _canvas(ax, xlim, ylim)
    figure = ax.get_figure(root=True)
    if not isinstance(figure, Figure):  # never: axes have a root figure
        raise TypeError("ax must belong to a figure")
    width, height = figure.get_size_inches()
    if not new:
        box = ax.get_position()
        width, height = width * box.width, height * box.height
    actual = min(width / (xlim[1] - xlim[0]), height / (ylim[1] - ylim[0]))
    factor = min(1.0, max(0.5, actual / scale))
    if factor < 1.0:
        for text in ax.texts[first:]:
            text.set_fontsize(text.get_fontsize() * factor)
    if title:
        ax.set_title(title)
    return ax


def _sum_node(ax: Axes, x: float, y: float) -> None:
    """The circle of a weighted sum, centred at ``(x, y)``."""
    circle = Circle((x, y), 0.27, facecolor=_FUNC, edgecolor=_LINE, lw=1.0)
    circle.set_zorder(3)
    ax.add_patch(circle)
    ax.text(x, y, r"$\Sigma$", ha="center", va="center", zorder=4)


def _weight_line(
    ax: Axes,
    start: tuple[float, float],
    end: tuple[float, float],
    weight: float,
) -> None:
    """A line from ``start`` to ``end``, as thick as its ``weight``."""
    _path(
        ax, [start, end], arrow=False, lw=0.4 + 5.0 * weight, color=PALETTE[0]
    )


def _weight_bar(
    ax: Axes, x: float, y: float, width: float, height: float
) -> None:
    """A softmax weight as a bar centred on ``x``, tagged ``"weight"``."""
    bar = FancyBboxPatch(
        (x - width / 2, y),
        width,
        height,
        boxstyle="square,pad=0",
        facecolor=PALETTE[0],
        edgecolor="none",
        zorder=3,
    )
    bar.set_gid("weight")
    ax.add_patch(bar)


def _short(token: str, limit: int = 8) -> str:
    """A token cut to ``limit`` characters, dollar signs escaped."""
    if len(token) > limit:
        token = token[: limit - 1] + "\u2026"
    return _plain(token)


def _plain(text: str) -> str:
    """Escape dollar signs, so that a token is never read as mathtext."""
    return text.replace("$", r"\$")


def _check_count(name: str, value: object, high: int) -> int:
    """An int in ``1..high``: more would not fit the figure."""
    value = check_int(name, value)
    if value > high:
        raise ValueError(
            f"{name}={value} must be between 1 and {high} (more do not "
            f"fit the figure)"
        )
    return value


def _check_weights(
    name: str, weights: object, shape: tuple[int, ...]
) -> np.ndarray:
    """Attention weights as a float array of ``shape``, rows summing to 1.

    Raises:
        TypeError: if ``weights`` are not numbers.
        ValueError: if the shape differs, a value is negative or not
            finite, or a row does not sum to 1.
    """
    array = as_array(weights, name)  # float64; NaN and inf rejected
    if array.shape != shape:
        raise ValueError(
            f"{name} must have shape {shape}, got {tuple(array.shape)}"
        )
    if (array < 0).any():
        raise ValueError(f"{name} must be non-negative (softmax weights)")
    sums = array.sum(axis=-1)
    if not np.allclose(sums, 1.0, atol=1e-3):
        bad = float(np.ravel(sums)[np.argmax(np.abs(np.ravel(sums) - 1))])
        raise ValueError(
            f"each row of {name} must sum to 1 (softmax weights), got a "
            f"sum of {bad:.4g}"
        )
    return array


def _check_tokens(
    name: str, tokens: Sequence[str] | None, size: int
) -> list[str] | None:
    """``tokens`` as a list of ``size`` strings (``None`` passes)."""
    if tokens is None:
        return None
    if isinstance(tokens, (str, bytes)) or not isinstance(tokens, Sequence):
        raise TypeError(
            f"{name} must be a sequence of strings, got "
            f"{type(tokens).__name__}"
        )
    if len(tokens) != size:
        raise ValueError(
            f"{name} has {len(tokens)} tokens, expected {size} (one per "
            f"weight)"
        )
    for token in tokens:
        if not isinstance(token, str):
            raise TypeError(
                f"{name} must hold strings, got {type(token).__name__}"
            )
    return list(tokens)


def _weighted_sum(weight: str, vector: str, size: int) -> str:
    """Mathtext of ``a_{n1} v_1 + ... + a_{nM} v_M`` (all terms up to 3)."""
    terms = [f"{weight}{m}}} {vector}_{{{m}}}" for m in range(1, size + 1)]
    if size > 3:
        terms = [terms[0], r"\cdots", terms[-1]]
    return " + ".join(terms)


def _peaked(rows: int, cols: int) -> np.ndarray:
    """Illustrative weights: each row peaks at its own place, sums to 1."""
    i = np.arange(rows)[:, None]
    j = np.arange(cols)[None, :]
    centre = (i + 0.5) * cols / rows - 0.5
    logits = -0.9 * (j - centre) ** 2
    weights = np.exp(logits - logits.max(axis=1, keepdims=True))
    return weights / weights.sum(axis=1, keepdims=True)


@styled
def draw_qkv_flow(
    *, masked: bool = True, ax: Axes | None = None, title: str | None = None
) -> Axes:
    r"""Draw scaled dot-product attention as a flow of matrices.

    The inputs :math:`X` are projected by :math:`W^{(q)}, W^{(k)}, W^{(v)}`
    into queries, keys and values; the scores
    :math:`Q K^\top / \sqrt{d_k}` are (optionally) masked, turned into the
    weights :math:`A` by a softmax over each row, and the output is
    :math:`Y = A V`. Blue boxes are activations (with their shapes for
    :math:`N` tokens), orange ones learned matrices, green ones fixed
    operations (Vaswani et al., 2017).

    Args:
        masked: draw the mask step (dashed: causal or padding masks are
            optional).
        ax: axes to draw on; a new 7-inch-wide figure when ``None``.
        title: optional axes title.

    Returns:
        The axes drawn on.

    Raises:
        TypeError: if ``masked`` is not a bool.
    """
    masked = check_bool("masked", masked)
    xlim, ylim = (-0.75, 12.45), (-0.95, 3.05)
    ax, layout = _new_axes(ax, xlim, ylim, 0.53)
    y_q, y_k, y_v = 2.4, 1.2, 0.0
    y_s = (y_q + y_k) / 2  # the scores row, between Q and K

    # X, projected three ways.
    _rect(ax, 0.0, y_k, "$X$", w=0.7, h=3.0, size=11)
    _note(ax, 0.0, -0.62, r"$(N, d_\mathrm{model})$")
    for y, w_name, out in (
        (y_q, "q", "Q"),
        (y_k, "k", "K"),
        (y_v, "v", "V"),
    ):
        _path(ax, [(0.35, y), (1.15, y)])
        _rect(ax, 1.6, y, f"$W^{{({w_name})}}$", w=0.9, color=_PARAM)
        _path(ax, [(2.05, y), (2.8, y)])
        _rect(ax, 3.15, y, f"${out}$", w=0.7, size=11)
    _note(ax, 3.15, y_q + 0.45, "$(N, d_k)$")
    _note(ax, 3.15, y_v - 0.45, "$(N, d_v)$")

    # Scores: Q K^T / sqrt(d_k), shape (N, N).
    x_s = 5.05
    x_in = x_s - 0.9
    for y, y_in in ((y_q, y_s + 0.18), (y_k, y_s - 0.18)):
        # Q enters the scores box high, K low: two arrow heads apart.
        _path(ax, [(3.5, y), (3.75, y), (3.75, y_in), (x_in, y_in)])
    _rect(ax, x_s, y_s, r"$QK^\top\!/\sqrt{d_k}$", w=1.8, h=0.72, color=_FUNC)
    _note(ax, x_s, y_s - 0.46, "scores $(N, N)$", va="top")
    x_next = x_s + 0.9
    if masked:
        x_m = 7.0
        _path(ax, [(x_next, y_s), (x_m - 0.55, y_s)])
        _rect(ax, x_m, y_s, "mask", w=1.1, color=_MASK, dashed=True)
        _note(
            ax, x_m, y_s - 0.4, r"$-\infty$ where" + "\nnot allowed", va="top"
        )
        x_next = x_m + 0.55
    x_sm = 8.75
    _path(ax, [(x_next, y_s), (x_sm - 0.65, y_s)])
    _rect(ax, x_sm, y_s, "Softmax", w=1.3, color=_FUNC)
    _note(ax, x_sm, y_s - 0.4, "over each row", va="top")
    x_a = 10.3
    _path(ax, [(x_sm + 0.65, y_s), (x_a - 0.35, y_s)])
    _rect(ax, x_a, y_s, "$A$", w=0.7, size=11)
    _note(ax, x_a, y_s + 0.5, "weights $(N, N)$")

    # Y = A V.
    _path(ax, [(3.5, y_v), (x_a - 0.55, y_v)])
    _path(ax, [(x_a, y_s - 0.28), (x_a, y_v + 0.28)])
    _rect(ax, x_a, y_v, "$AV$", w=1.1, color=_FUNC)
    _path(ax, [(x_a + 0.55, y_v), (11.45, y_v)])
    _rect(ax, 11.8, y_v, "$Y$", w=0.7, size=11)
    _note(ax, 11.8, y_v - 0.62, "$(N, d_v)$")
    return _finish(ax, layout, xlim, ylim, title)


_QUERY_ROW_TOKENS = ("the", "cat", "sat", "on", "the", "mat")
_QUERY_ROW_WEIGHTS = (0.06, 0.38, 0.12, 0.05, 0.07, 0.32)


@styled
def draw_query_row(
    weights: Sequence[float] | np.ndarray | torch.Tensor | None = None,
    tokens: Sequence[str] | None = None,
    *,
    query: int | None = None,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    r"""Draw one query's row of attention weights.

    The query :math:`q_n` is scored against every key :math:`k_m` (line
    widths show the weights); the softmax turns the row of scores into
    weights :math:`a_{nm}` (bar heights, printed above the bars), and the
    output :math:`y_n = \sum_m a_{nm} v_m` is the weighted sum of the
    values (line widths again).

    Without arguments an illustrative row is drawn for the query "sat" of
    "the cat sat on the mat"; pass the weights a model computed (and its
    tokens) to show real numbers.

    Args:
        weights: the query's weights over the keys, non-negative and
            summing to 1 (one softmax row); an illustrative row when
            ``None`` (then ``tokens`` must be ``None`` too).
        tokens: the key tokens, one per weight; ``k_1, k_2, ...`` when
            ``None``.
        query: index of the token that asks (self-attention): it names
            the query and its own key is outlined. ``None`` draws a
            generic query (or "sat" for the illustrative row).
        ax: axes to draw on; a new figure when ``None``.
        title: optional axes title.

    Shape:
        weights: ``(M,)`` for ``M`` keys, 1 to 10.

    Returns:
        The axes drawn on.

    Raises:
        TypeError: if an argument has the wrong type.
        ValueError: if the weights are not one softmax row, the tokens do
            not match them, or ``query`` is not a key's index.
    """
    if weights is None:
        if tokens is not None:
            raise ValueError(
                "tokens were given without weights: pass the weights of "
                "the query's row too"
            )
        weights, tokens = _QUERY_ROW_WEIGHTS, _QUERY_ROW_TOKENS
        query = 2 if query is None else query
    if isinstance(weights, torch.Tensor):
        check_tensor("weights", weights, ndim=1)
    size = len(weights) if hasattr(weights, "__len__") else -1
    if not 1 <= size <= _MAX_TOKENS:
        raise ValueError(
            f"weights must hold 1 to {_MAX_TOKENS} weights (one per key), "
            f"got {size if size >= 0 else type(weights).__name__}"
        )
    row = _check_weights("weights", weights, (size,))
    names = _check_tokens("tokens", tokens, size)
    if query is not None:
        query = check_int("query", query, minimum=0)
        if query >= size:
            raise ValueError(
                f"query={query} must index one of the {size} keys"
            )

    step = 1.25
    xs = np.arange(size) * step
    centre = float(xs.mean())
    label_x = -0.8  # row labels end here, right-aligned
    xlim = (-2.65, max(xs[-1] + 0.7, centre + 3.75))
    ylim = (-0.6, 5.55)
    # 0.68 inches per unit, at most the text column.
    ax, layout = _new_axes(ax, xlim, ylim, 0.68)
    y_q, y_k, y_bar, y_v, y_sum = 5.15, 3.7, 1.95, 1.2, -0.2
    bar_h = 1.0 / float(row.max())  # the largest weight is 1 unit tall

    # The query, scored against every key.
    if query is None:
        q_text = "$q_n$"
    elif names is None:
        q_text = f"$q_{{{query + 1}}}$"
    else:
        q_text = f"$q$: {_short(names[query])}"
    _rect(ax, centre, y_q, q_text, w=1.5, color=_tint(PALETTE[1], 0.35))
    for x, a in zip(xs, row, strict=True):
        _weight_line(ax, (centre, y_q - 0.28), (x, y_k + 0.28), a)
    for m, x in enumerate(xs):
        text = f"$k_{{{m + 1}}}$" if names is None else _short(names[m])
        size_m = 10 if names is None or len(text) <= 6 else 8.5
        _rect(ax, x, y_k, text, w=1.05, size=size_m, gid="key")
        if m == query:
            ax.add_patch(
                FancyBboxPatch(
                    (x - 0.6, y_k - 0.35),
                    1.2,
                    0.7,
                    boxstyle="round,pad=0,rounding_size=0.1",
                    facecolor="none",
                    edgecolor=PALETTE[1],
                    linewidth=2.0,
                    zorder=4,
                )
            )

    # The softmax weights as bars, with their values.
    ax.plot([xs[0] - 0.55, xs[-1] + 0.55], [y_bar, y_bar], color=_LINE, lw=0.8)
    for x, a in zip(xs, row, strict=True):
        _weight_bar(ax, x, y_bar, 0.6, bar_h * a)
        _note(
            ax,
            x,
            y_bar + bar_h * a + 0.08,
            f"{a:.2f}",
            va="bottom",
            color=_LINE,
        )

    # The values, summed with those weights.
    for m, x in enumerate(xs):
        _rect(ax, x, y_v, f"$v_{{{m + 1}}}$", w=0.8, size=10, gid="value")
    for x, a in zip(xs, row, strict=True):
        _weight_line(ax, (x, y_v - 0.28), (centre, y_sum + 0.27), a)
    _sum_node(ax, centre, y_sum)
    _path(ax, [(centre + 0.27, y_sum), (centre + 0.9, y_sum)])
    ax.text(
        centre + 1.0,
        y_sum,
        f"$y_n = {_weighted_sum('a_{n', 'v', size)}$",
        ha="left",
        va="center",
    )

    # Row labels, right-aligned in the left margin.
    for y, text in (
        (y_q, "query"),
        ((y_q + y_k) / 2, "scores\n" + r"$q_n^\top k_m / \sqrt{d_k}$"),
        (y_k, "keys"),
        (y_bar + 0.5, "Softmax\n" + "weights $a_{nm}$"),
        (y_v, "values"),
        (y_sum, "weighted sum"),
    ):
        _note(ax, label_x, y, text, ha="right", size=9, color=_LINE)
    return _finish(ax, layout, xlim, ylim, title)


def _split_bar(
    ax: Axes,
    x: float,
    ys: Sequence[float],
    gap: float,
    *,
    w: float = 0.55,
    gid: str | None = None,
    text: str = "",
) -> None:
    """A vertical vector cut into one coloured block per head."""
    for h, y in enumerate(ys):
        _rect(
            ax,
            x,
            y,
            text,
            w=w,
            h=gap,
            color=_HEADS[h % len(_HEADS)],
            size=8,
            gid=gid,
        )


@styled
def draw_heads_split_merge(
    num_heads: int = 4,
    *,
    d_model: int | None = None,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    r"""Draw multi-head attention: split into heads, attend, merge.

    Each token's :math:`d_\mathrm{model}` features are projected to
    queries, keys and values and cut into ``num_heads`` blocks of
    :math:`d_k = d_\mathrm{model} / H` (``head_dim``), one colour per head.
    Every head attends on its own block, independently of the others; the
    heads' outputs are concatenated back to :math:`d_\mathrm{model}`
    features and mixed by :math:`W^{(o)}` (Vaswani et al., 2017).

    Args:
        num_heads: the number of heads :math:`H`, 1 to 8.
        d_model: the model width, to print the sizes
            (``d_model = num_heads * head_dim``); symbols when ``None``.
        ax: axes to draw on; a new figure when ``None``.
        title: optional axes title.

    Returns:
        The axes drawn on.

    Raises:
        TypeError: if ``num_heads`` or ``d_model`` is not an int.
        ValueError: if ``num_heads`` is outside 1..8 or ``d_model`` is not
            divisible by it.
    """
    num_heads = _check_count("num_heads", num_heads, 8)
    if d_model is not None:
        d_model = check_int("d_model", d_model)
        if d_model % num_heads:
            raise ValueError(
                f"d_model={d_model} is not divisible by num_heads={num_heads}"
            )
    gap = 0.62  # the height of one head's block, and the head spacing
    ys = [(num_heads - 1 - h) * gap for h in range(num_heads)]
    top, bottom = ys[0] + gap / 2, ys[-1] - gap / 2
    mid = (top + bottom) / 2
    height = top - bottom
    xlim = (-0.8, 11.6)
    ylim = (bottom - 0.6, top + 0.95)
    ax, layout = _new_axes(ax, xlim, ylim, 0.565)
    x_x, x_w, x_split, x_head, x_cat, x_o, x_y = (
        0.0,
        1.7,
        3.4,
        5.5,
        7.6,
        9.2,
        10.8,
    )
    if d_model is None:
        width, head = r"$d_\mathrm{model}$", "$d_k$"
    else:
        width = rf"$d_\mathrm{{model}} = {d_model}$"
        head = rf"$d_k = {d_model // num_heads}$"

    # X -> W^(q), W^(k), W^(v) -> split into heads.
    _rect(ax, x_x, mid, "$X$", w=0.55, h=height, size=11)
    _path(ax, [(x_x + 0.28, mid), (x_w - 0.6, mid)])
    stacked = "\n".join(f"$W^{{({n})}}$" for n in "qkv")
    _rect(
        ax,
        x_w,
        mid,
        stacked if num_heads > 1 else "$W^{(q,k,v)}$",
        w=1.2,
        h=height,
        color=_PARAM,
        size=10 if num_heads > 2 else 9,
    )
    _path(ax, [(x_w + 0.6, mid), (x_split - 0.28, mid)])
    _split_bar(ax, x_split, ys, gap, gid="split")

    # Each head attends on its own block.
    for h, y in enumerate(ys):
        _path(ax, [(x_split + 0.28, y), (x_head - 0.8, y)])
        _rect(
            ax,
            x_head,
            y,
            f"head {h + 1}",
            w=1.6,
            h=gap - 0.14,
            color=_HEADS[h % len(_HEADS)],
            size=9,
            gid="head",
        )
        _path(ax, [(x_head + 0.8, y), (x_cat - 0.28, y)])

    # Concatenate, mix with W^(o).
    _split_bar(ax, x_cat, ys, gap, gid="concat")
    _path(ax, [(x_cat + 0.28, mid), (x_o - 0.4, mid)])
    _rect(ax, x_o, mid, "$W^{(o)}$", w=0.8, h=height, color=_PARAM)
    _path(ax, [(x_o + 0.4, mid), (x_y - 0.28, mid)])
    _rect(ax, x_y, mid, "$Y$", w=0.55, h=height, size=11)

    # Column headers above, sizes below.
    plural = "s" if num_heads > 1 else ""
    above = top + 0.18
    for x, text in (
        (x_x, "input"),
        (x_w, "project"),
        (x_split, f"split into\n$H = {num_heads}$ head{plural}"),
        (x_head, "attend\nindependently"),
        (x_cat, "concatenate"),
        (x_o, "mix"),
        (x_y, "output"),
    ):
        _note(ax, x, above, text, va="bottom", size=9, color=_LINE)
    below = bottom - 0.15
    _note(ax, x_x, below, width, va="top")
    _note(ax, x_split, below, f"{head} each", va="top")
    _note(ax, x_cat, below, f"{head} each", va="top")
    _note(ax, x_y, below, width, va="top")
    return _finish(ax, layout, xlim, ylim, title)


@styled
def draw_cross_attention(
    q_len: int = 3,
    kv_len: int = 5,
    *,
    weights: np.ndarray | torch.Tensor | None = None,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    r"""Draw cross-attention from a decoder to an encoder's output.

    The decoder's ``q_len`` tokens :math:`x_i` ask (queries
    :math:`Q = X W^{(q)}`); the encoder's ``kv_len`` outputs :math:`z_j`
    answer (keys :math:`K = Z W^{(k)}` and values :math:`V = Z W^{(v)}`).
    The weights form a ``q_len`` x ``kv_len`` grid, one row per query,
    each row a softmax over the encoder's tokens; row :math:`i` of the
    output is :math:`y_i = \sum_j a_{ij} v_j` (Vaswani et al., 2017). The
    two lengths need not be equal.

    Args:
        q_len: decoder tokens :math:`L_q` (rows), 1 to 8.
        kv_len: encoder tokens :math:`L_k` (columns), 1 to 10.
        weights: the weights to colour the grid with; an illustrative
            pattern when ``None``.
        ax: axes to draw on; a new figure when ``None``.
        title: optional axes title.

    Shape:
        weights: ``(q_len, kv_len)``, rows summing to 1.

    Returns:
        The axes drawn on.

    Raises:
        TypeError: if a length is not an int or ``weights`` not numbers.
        ValueError: if a length is out of range or ``weights`` has another
            shape or rows that do not sum to 1.
    """
    q_len = _check_count("q_len", q_len, 8)
    kv_len = _check_count("kv_len", kv_len, _MAX_TOKENS)
    if weights is None:
        grid = _peaked(q_len, kv_len)
    else:
        grid = _check_weights("weights", weights, (q_len, kv_len))
    cell = 0.62
    gx = np.arange(kv_len) * cell  # column centres
    gy = -np.arange(q_len) * cell  # row centres
    g_left, g_right = gx[0] - cell / 2, gx[-1] + cell / 2
    g_top, g_bottom = gy[0] + cell / 2, gy[-1] - cell / 2
    y_enc = g_top + 1.45  # encoder tokens, above the columns
    x_dec = g_left - 1.75  # decoder tokens, left of the rows
    x_out = g_right + 1.75  # outputs, right of the rows
    xlim = (x_dec - 1.55, max(x_out + 1.5, g_right + 3.2))
    ylim = (g_bottom - 1.1, y_enc + 0.4)
    ax, layout = _new_axes(ax, xlim, ylim, 0.62)

    # Encoder output Z along the top: keys and values, one per column.
    for j, x in enumerate(gx):
        _rect(ax, x, y_enc, f"$z_{{{j + 1}}}$", w=0.52, h=0.5, size=9)
        _path(ax, [(x, y_enc - 0.25), (x, g_top + 0.06)])
    _note(
        ax,
        g_left - 0.2,
        y_enc,
        f"encoder output $Z$\n($L_k = {kv_len}$)",
        ha="right",
        size=9,
        color=_LINE,
    )
    _note(
        ax,
        g_right + 0.2,
        (y_enc + g_top) / 2,
        r"$K = ZW^{(k)}$" + "\n" + r"$V = ZW^{(v)}$",
        ha="left",
    )

    # Decoder tokens X down the left: queries, one per row.
    for i, y in enumerate(gy):
        _rect(ax, x_dec, y, f"$x_{{{i + 1}}}$", w=0.52, h=0.5, size=9)
        _path(ax, [(x_dec + 0.26, y), (g_left - 0.06, y)])
    _note(
        ax,
        x_dec,
        g_bottom - 0.15,
        f"decoder $X$\n($L_q = {q_len}$)",
        va="top",
        size=9,
        color=_LINE,
    )
    _note(
        ax,
        (x_dec + g_left) / 2 + 0.13,
        g_top + 0.1,
        r"$Q = XW^{(q)}$",
        va="bottom",
    )

    # The weight grid, one softmax row per query.
    cmap = mpl_colormaps["Blues"]
    for i, y in enumerate(gy):
        for j, x in enumerate(gx):
            a = float(grid[i, j])
            patch = FancyBboxPatch(
                (x - cell / 2, y - cell / 2),
                cell,
                cell,
                boxstyle="square,pad=0",
                facecolor=cmap(0.08 + 0.85 * a / float(grid.max())),
                edgecolor="white",
                linewidth=1.0,
                zorder=3,
            )
            patch.set_gid("weight")
            ax.add_patch(patch)
    ax.add_patch(
        FancyBboxPatch(
            (g_left, g_bottom),
            g_right - g_left,
            g_top - g_bottom,
            boxstyle="square,pad=0",
            facecolor="none",
            edgecolor=_LINE,
            linewidth=1.0,
            zorder=4,
        )
    )
    _note(
        ax,
        (g_left + g_right) / 2,
        g_bottom - 0.15,
        f"weights $A$: ${q_len} \\times {kv_len}$\nSoftmax over each row",
        va="top",
    )

    # Outputs: one row per decoder token.
    for i, y in enumerate(gy):
        _path(ax, [(g_right + 0.06, y), (x_out - 0.3, y)])
        _rect(ax, x_out, y, f"$y_{{{i + 1}}}$", w=0.52, h=0.5, size=9)
    _note(
        ax,
        x_out,
        g_bottom - 0.15,
        r"$y_i = \sum_j a_{ij} v_j$",
        va="top",
    )
    return _finish(ax, layout, xlim, ylim, title)


@styled
def draw_seq2seq_attention(
    src_len: int = 4,
    *,
    weights: Sequence[float] | np.ndarray | torch.Tensor | None = None,
    src_tokens: Sequence[str] | None = None,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    r"""Draw one decoder step of an RNN encoder-decoder with attention.

    The encoder reads the source into states :math:`h_1, \dots, h_S`. At
    step :math:`i` the decoder's previous state :math:`s_{i-1}` scores
    every encoder state with the additive score
    :math:`e_{ij} = v^\top \tanh(W_q s_{i-1} + W_k h_j + b)`; a softmax
    over :math:`j` gives the weights :math:`\alpha_{ij}` (bars), and the
    context :math:`c_i = \sum_j \alpha_{ij} h_j` feeds the decoder's next
    state :math:`s_i` together with the previous output :math:`y_{i-1}`
    (Bahdanau et al., 2014).

    Args:
        src_len: source tokens :math:`S`, 1 to 10.
        weights: the weights :math:`\alpha_{i1}, \dots, \alpha_{iS}` to
            draw, summing to 1; an illustrative row when ``None``.
        src_tokens: the source tokens, written under the encoder;
            :math:`x_1, \dots, x_S` when ``None``.
        ax: axes to draw on; a new figure when ``None``.
        title: optional axes title.

    Shape:
        weights: ``(src_len,)``.

    Returns:
        The axes drawn on.

    Raises:
        TypeError: if an argument has the wrong type.
        ValueError: if ``src_len`` is out of range, or ``weights`` or
            ``src_tokens`` do not match it.
    """
    src_len = _check_count("src_len", src_len, _MAX_TOKENS)
    if weights is None:
        # Illustrative: the decoder reads mostly the second source token.
        alpha = _peaked(src_len, src_len)[min(1, src_len - 1)]
    else:
        alpha = _check_weights("weights", weights, (src_len,))
    names = _check_tokens("src_tokens", src_tokens, src_len)

    step = 1.2
    xs = np.arange(src_len) * step
    span_left, span_right = xs[0] - 0.5, xs[-1] + 0.5
    box_w = max(span_right - span_left, 4.6)
    box_x = (span_left + span_right) / 2
    box_right = box_x + box_w / 2
    x_dec = max(box_right, span_right) + 1.35
    y_in, y_h, y_e, y_sm, y_bar, y_c = -1.0, 0.0, 1.2, 2.15, 2.85, 4.5
    bar_h = 0.8 / float(alpha.max())
    xlim = (min(span_left, box_x - box_w / 2) - 1.6, x_dec + 1.75)
    ylim = (y_in - 0.3, y_c + 1.05)
    ax, layout = _new_axes(ax, xlim, ylim, 0.72)

    # Encoder: inputs x_j, states h_j, the recurrence between them.
    for j, x in enumerate(xs):
        label = f"$x_{{{j + 1}}}$" if names is None else _short(names[j])
        ax.text(x, y_in, label, ha="center", va="center", fontsize=9)
        _path(ax, [(x, y_in + 0.2), (x, y_h - 0.27)])
        _rect(ax, x, y_h, f"$h_{{{j + 1}}}$", w=0.7, h=0.54, gid="encoder")
        if j:
            _path(ax, [(xs[j - 1] + 0.35, y_h), (x - 0.35, y_h)])
        _path(ax, [(x, y_h + 0.27), (x, y_e - 0.3)])
    label_x = xlim[0] + 0.05
    _note(ax, label_x, y_h, "encoder", ha="left", size=9, color=_LINE)

    # Scores from s_{i-1} and each h_j, then a softmax over j.
    _rect(
        ax,
        box_x,
        y_e,
        r"$e_{ij} = v^\top \tanh(W_q s_{i-1} + W_k h_j + b)$",
        w=box_w,
        h=0.6,
        color=_FUNC,
        size=9,
    )
    _rect(
        ax,
        box_x,
        y_sm,
        "Softmax over $j$",
        w=box_w,
        h=0.5,
        color=_FUNC,
        size=9,
    )
    for x in xs:
        _path(ax, [(x, y_e + 0.3), (x, y_sm - 0.25)])
    _note(ax, label_x, y_e, "scores", ha="left", size=9, color=_LINE)

    # The weights as bars, summed with the states into the context.
    x_c = box_x
    for x, a in zip(xs, alpha, strict=True):
        _weight_bar(ax, x, y_bar, 0.5, bar_h * a)
        _note(
            ax,
            x,
            (y_bar + y_sm + 0.25) / 2,
            f"{a:.2f}",
            size=7.5,
            color=_LINE,
        )
        _path(
            ax,
            [(x, y_bar + bar_h * a), (x_c, y_c - 0.27)],
            arrow=False,
            lw=0.4 + 4.0 * a,
            color=PALETTE[0],
        )
    _note(
        ax,
        label_x,
        y_bar + 0.45,
        r"weights $\alpha_{ij}$",
        ha="left",
        size=9,
        color=_LINE,
    )
    _sum_node(ax, x_c, y_c)
    _note(
        ax,
        x_c - 0.4,
        y_c,
        r"$c_i = \sum_j \alpha_{ij} h_j$",
        ha="right",
        size=9,
    )

    # Decoder: s_{i-1} asks, s_i takes the context and y_{i-1}.
    _rect(ax, x_dec, y_e, "$s_{i-1}$", w=0.8, gid="decoder")
    _path(ax, [(x_dec - 0.4, y_e), (box_right, y_e)])
    _rect(ax, x_dec, y_c, "$s_i$", w=0.8, gid="decoder")
    _path(ax, [(x_dec, y_e + 0.28), (x_dec, y_c - 0.28)])
    _path(ax, [(x_c + 0.27, y_c), (x_dec - 0.4, y_c)])
    _note(ax, (x_c + x_dec) / 2, y_c + 0.1, "context $c_i$", va="bottom")
    _path(ax, [(x_dec + 1.15, y_c), (x_dec + 0.4, y_c)])
    ax.text(x_dec + 1.2, y_c, "$y_{i-1}$", ha="left", va="center", fontsize=9)
    _path(ax, [(x_dec, y_c + 0.28), (x_dec, y_c + 0.7)])
    ax.text(x_dec, y_c + 0.75, "$y_i$", ha="center", va="bottom", fontsize=9)
    _note(
        ax,
        x_dec + 0.12,
        (y_e + y_c) / 2,
        "decoder",
        ha="left",
        size=9,
        color=_LINE,
    )
    return _finish(ax, layout, xlim, ylim, title)


# -- Part III: the transformer block and the kinds of attention ------------

_ATTN = _tint(PALETTE[1], 0.45)  # attention sublayers (learned)
_FFN = _tint(PALETTE[5], 0.45)  # the feed-forward sublayer (learned)
_NORM = _tint(PALETTE[6], 0.45)  # LayerNorm
_ENC = _tint(PALETTE[0], 0.3)  # encoder tokens
_DEC = _tint(PALETTE[1], 0.45)  # decoder tokens


def _add_node(ax: Axes, x: float, y: float) -> None:
    """The residual addition: a circle with a plus, tagged ``"add"``."""
    circle = Circle((x, y), 0.22, facecolor=_FUNC, edgecolor=_LINE, lw=1.0)
    circle.set_zorder(3)
    circle.set_gid("add")
    ax.add_patch(circle)
    ax.text(x, y, "+", ha="center", va="center", fontsize=11, zorder=4)


@styled
def draw_transformer_block(
    *,
    norm_first: bool = False,
    decoder: bool = False,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    r"""Draw one transformer layer: sublayers, residual paths and norms.

    The input :math:`X` flows upwards. An encoder layer has two sublayers,
    multi-head self-attention and the position-wise feed-forward network;
    a decoder layer has three: masked (causal) self-attention,
    cross-attention whose keys and values come from the encoder's output
    (the *memory*), and the feed-forward network. Each sublayer sits on a
    residual branch: its output is added (:math:`+`) to its input, which
    skips past it on the right.

    Post-LN (``norm_first=False``, the original transformer of Vaswani et
    al., 2017) normalises after each addition,
    :math:`x \leftarrow \mathrm{LayerNorm}(x + \mathrm{Sublayer}(x))`;
    pre-LN (``norm_first=True``, Xiong et al., 2020) normalises inside the
    branch, :math:`x \leftarrow x + \mathrm{Sublayer}(\mathrm{LayerNorm}(x))`,
    so the skip path carries :math:`x` through the layer untouched. A
    dashed frame marks what is repeated :math:`L` times.

    Args:
        norm_first: draw the pre-LN variant.
        decoder: draw a decoder layer (three sublayers) instead of an
            encoder layer.
        ax: axes to draw on; a new figure when ``None``.
        title: optional axes title.

    Returns:
        The axes drawn on. Sublayer boxes are tagged ``"sublayer"``,
        LayerNorm boxes ``"norm"`` and the additions ``"add"`` (patch
        ``gid``), in order from the input upwards.

    Raises:
        TypeError: if ``norm_first`` or ``decoder`` is not a bool.
    """
    norm_first = check_bool("norm_first", norm_first)
    decoder = check_bool("decoder", decoder)
    if decoder:
        sublayers = [
            ("Masked multi-head\nself-attention", _ATTN),
            ("Multi-head\ncross-attention", _ATTN),
            ("Feed-forward", _FFN),
        ]
    else:
        sublayers = [
            ("Multi-head\nself-attention", _ATTN),
            ("Feed-forward", _FFN),
        ]
    box_w, sub_h, norm_h = 2.6, 0.7, 0.42
    skip_x = box_w / 2 + 0.55  # the residual path, right of the boxes
    unit = 2.55  # height of one sublayer with its norm and addition
    y_in = 0.0
    y0 = 0.75  # the first branch point
    top = y0 + unit * len(sublayers)
    y_out = top + 0.55
    xlim = (-4.1 if decoder else -2.45, 2.75)
    ylim = (y_in - 0.3, y_out + 0.3)
    ax, layout = _new_axes(ax, xlim, ylim, 0.6)

    _note(ax, 0.0, y_in, "input $X$", size=9.5, color=_LINE)
    _path(ax, [(0.0, y_in + 0.2), (0.0, y0)], arrow=False)
    for k, (name, color) in enumerate(sublayers):
        base = y0 + k * unit
        # The skip path: branch at base, rejoin at the addition.
        if norm_first:
            y_norm, y_sub, y_add = base + 0.55, base + 1.4, base + 2.2
        else:
            y_sub, y_add, y_norm = base + 0.7, base + 1.55, base + 2.2
        _dot(ax, 0.0, base)
        _path(
            ax,
            [(0.0, base), (skip_x, base), (skip_x, y_add), (0.22, y_add)],
            color=_STATE,
        )
        _rect(
            ax,
            0.0,
            y_sub,
            name,
            w=box_w,
            h=sub_h,
            color=color,
            size=9,
            gid="sublayer",
        )
        _rect(
            ax,
            0.0,
            y_norm,
            "LayerNorm",
            w=box_w * 0.75,
            h=norm_h,
            color=_NORM,
            size=9,
            gid="norm",
        )
        _add_node(ax, 0.0, y_add)
        # The main path through this unit, bottom to top.
        stops = sorted(
            [
                (y_sub, sub_h / 2),
                (y_norm, norm_h / 2),
                (y_add, 0.22),
            ]
        )
        previous = base
        for y, half in stops:
            _path(ax, [(0.0, previous), (0.0, y - half)])
            previous = y + half
        end = base + unit
        _path(ax, [(0.0, previous), (0.0, end)], arrow=False)
        if decoder and k == 1:
            # Keys and values from the encoder's output.
            y_mem = y_sub
            x_mem = -box_w / 2 - 0.95
            _path(ax, [(x_mem, y_mem), (-box_w / 2, y_mem)])
            _note(
                ax,
                x_mem - 0.1,
                y_mem,
                "memory\n(encoder\noutput)",
                ha="right",
                size=8.5,
                color=_LINE,
            )
            _note(
                ax,
                (x_mem - box_w / 2) / 2,
                y_mem + 0.1,
                "$K, V$",
                va="bottom",
                size=8,
            )
    _path(ax, [(0.0, top), (0.0, y_out - 0.2)])
    _note(ax, 0.0, y_out, "output", size=9.5, color=_LINE)

    # The repeated layer.
    frame_left = -box_w / 2 - 0.3
    frame = FancyBboxPatch(
        (frame_left, y0 - 0.3),
        skip_x + 0.3 - frame_left,
        top - y0 + 0.28,
        boxstyle="round,pad=0,rounding_size=0.15",
        facecolor="none",
        edgecolor="#999999",
        linestyle="--",
        linewidth=1.0,
        zorder=1,
    )
    frame.set_gid("frame")
    ax.add_patch(frame)
    _note(
        ax,
        frame_left - 0.12,
        y0 - 0.15,
        r"$\times L$",
        ha="right",
        va="bottom",
        size=10,
        color=_LINE,
    )
    _note(
        ax,
        skip_x + 0.12,
        y0 + 0.45,
        "residual",
        ha="left",
        va="bottom",
        size=8,
        color=_STATE,
        rotation=90,
    )
    return _finish(ax, layout, xlim, ylim, title)


def _token_dot(
    ax: Axes, x: float, y: float, text: str, color: str, gid: str
) -> None:
    """A token as a small labelled circle, tagged ``gid``."""
    circle = Circle((x, y), 0.2, facecolor=color, edgecolor=_LINE, lw=0.8)
    circle.set_zorder(3)
    circle.set_gid(gid)
    ax.add_patch(circle)
    ax.text(x, y, text, ha="center", va="center", fontsize=7.5, zorder=4)


def _allowed_grid(
    ax: Axes,
    x0: float,
    y0: float,
    allowed: np.ndarray,
    cell: float,
    color: str,
) -> None:
    """Cells (query rows, key columns), filled where attention may look.

    Filled cells are tagged ``"allowed"`` and empty ones ``"blocked"``.
    """
    for i in range(allowed.shape[0]):
        for j in range(allowed.shape[1]):
            ok = bool(allowed[i, j])
            patch = FancyBboxPatch(
                (x0 + j * cell, y0 - (i + 1) * cell),
                cell,
                cell,
                boxstyle="square,pad=0",
                facecolor=color if ok else "white",
                edgecolor="#bbbbbb",
                linewidth=0.8,
                zorder=2,
            )
            patch.set_gid("allowed" if ok else "blocked")
            ax.add_patch(patch)


@styled
def draw_attention_kinds(
    *,
    src_len: int = 5,
    tgt_len: int = 4,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Draw the three kinds of attention in a transformer, side by side.

    Each panel is a grid with one row per query and one column per key;
    a filled cell means the query may attend to that key (the package's
    boolean-mask convention, ``True`` = may attend). Encoder tokens are
    blue, decoder tokens orange.

    - Encoder self-attention: the ``src_len`` source tokens attend to each
      other, all to all.
    - Decoder masked self-attention: each of the ``tgt_len`` target tokens
      attends to itself and the tokens before it (the causal mask).
    - Cross-attention: decoder queries attend to every encoder output; the
      grid is ``tgt_len`` by ``src_len`` (Vaswani et al., 2017).

    Args:
        src_len: encoder (source) tokens :math:`S`, 1 to 8.
        tgt_len: decoder (target) tokens :math:`T`, 1 to 8.
        ax: axes to draw on; a new figure when ``None``.
        title: optional axes title.

    Returns:
        The axes drawn on; grid cells are tagged ``"allowed"`` or
        ``"blocked"``, panel by panel.

    Raises:
        TypeError: if a length is not an int.
        ValueError: if a length is outside 1..8.
    """
    src_len = _check_count("src_len", src_len, 8)
    tgt_len = _check_count("tgt_len", tgt_len, 8)
    cell = 0.42
    gap = 1.25  # between panels
    panels = [
        (
            "encoder self-attention",
            "all to all",
            np.ones((src_len, src_len), dtype=bool),
            _ENC,
            _ENC,
            ("e", "e"),
        ),
        (
            "decoder masked self-attention",
            "causal: no looking ahead",
            np.tril(np.ones((tgt_len, tgt_len), dtype=bool)),
            _DEC,
            _DEC,
            ("d", "d"),
        ),
        (
            "cross-attention",
            "decoder queries, encoder keys",
            np.ones((tgt_len, src_len), dtype=bool),
            _DEC,
            _ENC,
            ("d", "e"),
        ),
    ]
    widths = [p[2].shape[1] * cell for p in panels]
    width_min = 2.45  # the caption under a panel needs this much room
    slots = [max(w, width_min) for w in widths]
    rows = max(src_len, tgt_len)
    y_top = 0.0
    x_label = 0.55  # query dots sit this far left of a grid
    lefts = []
    x = x_label + 0.25
    for slot in slots:
        lefts.append(x)
        x += slot + gap
    xlim = (0.0, x - gap + 0.1)
    ylim = (y_top - rows * cell - 1.45, y_top + 0.65)
    ax, layout = _new_axes(ax, xlim, ylim, 0.75)
    fill = {_ENC: _tint(PALETTE[0], 0.75), _DEC: _tint(PALETTE[1], 0.8)}
    for (name, rule, allowed, q_color, k_color, (qs, ks)), left, slot in zip(
        panels, lefts, slots, strict=True
    ):
        q_count, k_count = allowed.shape
        x0 = left + (slot - k_count * cell) / 2
        _allowed_grid(ax, x0, y_top, allowed, cell, fill[q_color])
        for j in range(k_count):
            _token_dot(
                ax,
                x0 + (j + 0.5) * cell,
                y_top + 0.35,
                f"{ks}{j + 1}",
                k_color,
                "key",
            )
        for i in range(q_count):
            _token_dot(
                ax,
                x0 - 0.35,
                y_top - (i + 0.5) * cell,
                f"{qs}{i + 1}",
                q_color,
                "query",
            )
        y_text = y_top - rows * cell - 0.2
        _note(
            ax,
            x0 + k_count * cell / 2,
            y_text,
            name,
            va="top",
            size=9,
            color=_LINE,
        )
        _note(
            ax, x0 + k_count * cell / 2, y_text - 0.38, rule, va="top", size=8
        )
    _note(
        ax,
        (xlim[0] + xlim[1]) / 2,
        ylim[0] + 0.05,
        "rows: queries    columns: keys    filled: may attend",
        va="bottom",
        size=8,
        color=_LINE,
    )
    return _finish(ax, layout, xlim, ylim, title)


# -- Part V: images as patches ---------------------------------------------

_MAX_PATCHES = 64  # patches whose tiles still fit the text column
_TILES_PER_ROW = 16


@styled
def draw_patches(
    image: torch.Tensor | np.ndarray,
    patch_size: int,
    *,
    cmap: str = "gray_r",
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Draw an image cut into patches, then the patches as a sequence.

    On top, the image with the patch grid and each patch's index; below,
    the patches as tokens in the order a Vision Transformer reads them:
    row by row, left to right (Dosovitskiy et al., 2021). Each token is
    ``patch_size * patch_size * C`` numbers once flattened.

    Args:
        image: one image, ``(C, H, W)`` with 1 or 3 channels, or
            ``(H, W)``; values are shown as they are (no rescaling across
            tiles, so a tile looks like its part of the image).
        patch_size: side :math:`P` of a square patch; it must divide both
            sides of the image.
        cmap: colour map of a one-channel image.
        ax: axes to draw on; a new figure when ``None``.
        title: optional axes title.

    Shape:
        image: ``(C, H, W)`` or ``(H, W)``.

    Returns:
        The axes drawn on; the whole image is tagged ``"image"`` and tile
        ``i`` (an image of patch ``i``) is tagged ``"patch-i"``.

    Raises:
        TypeError: if ``patch_size`` is not an int.
        ValueError: if the image is not 2-D or 3-D with 1 or 3 channels,
            ``patch_size`` does not divide its sides, or it makes more than
            64 patches.
    """
    array = as_array(image, "image", (2, 3))
    if array.ndim == 2:
        array = array[None]
    channels, height, width = array.shape
    if channels not in (1, 3):
        raise ValueError(
            f"image must have 1 or 3 channels, got {channels} "
            f"(shape {tuple(array.shape)})"
        )
    patch_size = check_int("patch_size", patch_size)
    if height % patch_size or width % patch_size:
        raise ValueError(
            f"image size {height}x{width} is not divisible by "
            f"patch_size={patch_size}"
        )
    rows, cols = height // patch_size, width // patch_size
    count = rows * cols
    if count > _MAX_PATCHES:
        raise ValueError(
            f"patch_size={patch_size} cuts the {height}x{width} image into "
            f"{count} patches; at most {_MAX_PATCHES} fit the drawing"
        )
    pixels = array[0] if channels == 1 else array.transpose(1, 2, 0)
    low, high = float(array.min()), float(array.max())
    shown: dict[str, Any] = {"cmap": cmap, "vmin": low, "vmax": high}
    if channels == 3:
        shown = {}
    per_row = min(count, _TILES_PER_ROW)
    tile_rows = -(-count // per_row)
    tile, gap = 0.62, 0.14  # a token's side and the space between tokens
    strip = per_row * tile + (per_row - 1) * gap
    side = 2.6  # the image's longer side
    img_w = side * width / max(height, width)
    img_h = side * height / max(height, width)
    total_w = max(strip, img_w + 3.2)
    y_img = 0.0  # bottom of the image
    y_tiles = y_img - 1.15  # top of the first row of tiles
    xlim = (-0.1, total_w + 0.1)
    ylim = (y_tiles - tile_rows * (tile + 0.42) - 0.45, img_h + 0.45)
    ax, layout = _new_axes(ax, xlim, ylim, 0.62)
    x0 = (total_w - img_w) / 2
    whole = ax.imshow(
        pixels,
        extent=(x0, x0 + img_w, y_img, y_img + img_h),
        interpolation="nearest",
        zorder=2,
        **shown,
    )
    whole.set_gid("image")
    cell_w, cell_h = img_w / cols, img_h / rows
    for c in range(cols + 1):
        x = x0 + c * cell_w
        ax.plot([x, x], [y_img, y_img + img_h], color=PALETTE[3], lw=1.0,
                zorder=3)
    for r in range(rows + 1):
        y = y_img + r * cell_h
        ax.plot([x0, x0 + img_w], [y, y], color=PALETTE[3], lw=1.0,
                zorder=3)
    label_size = 8.0 if count <= 16 else 6.0
    for index in range(count):
        r, c = divmod(index, cols)
        ax.text(
            x0 + c * cell_w + 0.05,
            y_img + img_h - r * cell_h - 0.05,
            str(index),
            ha="left",
            va="top",
            fontsize=label_size,
            color=PALETTE[3],
            zorder=4,
            bbox={"boxstyle": "square,pad=0.1", "facecolor": "white",
                  "edgecolor": "none", "alpha": 0.8},
        )
    _note(
        ax,
        x0 + img_w + 0.25,
        y_img + img_h / 2,
        f"{height} × {width} image\n{rows} × {cols} patches\n"
        f"of {patch_size} × {patch_size}",
        ha="left",
    )
    left = (total_w - strip) / 2
    for index in range(count):
        r, c = divmod(index, cols)
        block = pixels[
            r * patch_size : (r + 1) * patch_size,
            c * patch_size : (c + 1) * patch_size,
        ]
        row, slot = divmod(index, per_row)
        x = left + slot * (tile + gap)
        top = y_tiles - row * (tile + 0.42)
        piece = ax.imshow(
            block,
            extent=(x, x + tile, top - tile, top),
            interpolation="nearest",
            zorder=2,
            **shown,
        )
        piece.set_gid(f"patch-{index}")
        ax.add_patch(
            FancyBboxPatch(
                (x, top - tile),
                tile,
                tile,
                boxstyle="square,pad=0",
                facecolor="none",
                edgecolor=_LINE,
                linewidth=0.8,
                zorder=3,
            )
        )
        ax.text(x + tile / 2, top - tile - 0.08, str(index), ha="center",
                va="top", fontsize=label_size, color=_MUTED)
    _path(
        ax,
        [(x0 + img_w / 2, y_img - 0.08), (x0 + img_w / 2, y_tiles + 0.1)],
    )
    values = patch_size * patch_size * channels
    _note(
        ax,
        x0 + img_w / 2 + 0.15,
        (y_img + y_tiles) / 2,
        "read row by row",
        ha="left",
    )
    bottom = y_tiles - tile_rows * (tile + 0.42)
    _note(
        ax,
        total_w / 2,
        bottom - 0.12,
        f"a sequence of {count} tokens, each {patch_size} × {patch_size}"
        f" × {channels} = {values} values",
    )
    return _finish(ax, layout, xlim, ylim, title)


@styled
def draw_data_parallel(
    num_devices: int = 2,
    *,
    batch_size: int | None = None,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    r"""Draw one step of data-parallel training on ``num_devices`` devices.

    The global batch of :math:`B` rows is cut into :math:`D` disjoint
    shards, one per device. Every device holds a replica of the model
    with the same weights, computes the loss and its gradients
    :math:`g_d` on its own :math:`B / D` rows, and an all-reduce replaces
    every :math:`g_d` by the mean :math:`\bar g = \frac{1}{D} \sum_d g_d`,
    the gradient of the mean loss over the whole batch. Each device then
    takes the same optimizer step, so the replicas stay identical (what
    ``DistributedDataParallel`` does, Li et al., 2020).

    Args:
        num_devices: the number of devices :math:`D`, 1 to 4.
        batch_size: the global batch :math:`B` to print in the labels (a
            multiple of ``num_devices``); the symbol :math:`B` when
            ``None``.
        ax: axes to draw on; a new figure when ``None``.
        title: optional axes title.

    Returns:
        The axes drawn on; the shards are patches with the ``gid``
        ``"shard-<d>"``, the replicas ``"replica-<d>"``.

    Raises:
        TypeError: if a count is not an int.
        ValueError: if ``num_devices`` is out of range or ``batch_size``
            is not a positive multiple of it.
    """
    devices = _check_count("num_devices", num_devices, 4)
    if batch_size is None:
        rows, share = "$B$", "$B/D$" if devices > 1 else "$B$"
    else:
        batch_size = check_int("batch_size", batch_size)
        if batch_size % devices:
            raise ValueError(
                f"batch_size={batch_size} must be a multiple of "
                f"num_devices={devices}"
            )
        rows, share = f"{batch_size}", f"{batch_size // devices}"
    col = 2.3  # width of one device's column
    width = max(devices, 2) * col  # one device: room for the labels
    xs = [width / 2 + (d - (devices - 1) / 2) * col for d in range(devices)]
    y_batch, y_model, y_grad, y_reduce, y_step = 5.2, 3.85, 2.75, 1.65, 0.55
    xlim = (-0.25, width + 0.25)
    ylim = (-0.05, y_batch + 0.75)
    ax, layout = _new_axes(ax, xlim, ylim, 0.95)

    # The global batch, one coloured shard per device.
    shard_w = (width - 0.5) / devices
    for d in range(devices):
        left = 0.25 + d * shard_w
        colour = _HEADS[d % len(_HEADS)]
        _rect(ax, left + shard_w / 2, y_batch, f"{share} rows", w=shard_w,
              h=0.5, color=colour, size=9, gid=f"shard-{d}")
        _path(ax, [(left + shard_w / 2, y_batch - 0.25),
                   (xs[d], y_model + 0.42)])
    _note(ax, width / 2, y_batch + 0.48,
          f"global batch of {rows} rows, cut into {devices} disjoint "
          f"shard{'s' if devices > 1 else ''}", color=_LINE, size=9)

    for d, x in enumerate(xs):
        colour = _HEADS[d % len(_HEADS)]
        _rect(ax, x, y_model, f"device {d}\nmodel replica", w=1.8, h=0.8,
              color=_PARAM, size=9, gid=f"replica-{d}")
        _path(ax, [(x, y_model - 0.4), (x, y_grad + 0.27)])
        _rect(ax, x, y_grad, f"loss, backward: $g_{{{d}}}$", w=1.8,
              h=0.5, color=colour, size=9)
        _path(ax, [(x, y_grad - 0.25), (x, y_reduce + 0.3)])
        _path(ax, [(x, y_reduce - 0.3), (x, y_step + 0.27)])
        _rect(ax, x, y_step, "optimizer step", w=1.8, h=0.5,
              color=_FUNC, size=9)

    # One all-reduce across every device.
    terms = " + ".join(f"g_{{{d}}}" for d in range(devices))
    label = (
        f"all-reduce: every device gets $\\bar g = ({terms}) / {devices}$"
        if devices > 1
        else r"one device: $\bar g = g_0$"
    )
    _rect(ax, width / 2, y_reduce, label, w=width - 0.3, h=0.6,
          color=_TENSOR, size=9, gid="all-reduce")
    _note(ax, width / 2, y_step - 0.45,
          "the same update everywhere: the replicas stay identical",
          size=8.5)
    return _finish(ax, layout, xlim, ylim, title)
