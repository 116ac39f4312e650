"""Teaching diagrams, drawn with matplotlib patches.

Recurrent cells and tokenization (Part I); attention's data flow, one
query's row, heads, cross-attention and an RNN encoder-decoder (Part II);
the transformer layer and the kinds of attention (Part III); an image cut
into patches (Part V); data-parallel training.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any, cast

import numpy as np
import torch
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.colors import to_hex, to_rgb
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch

from .._checks import check_bool, check_choice, check_int
from ._style import PALETTE, as_array, check_divisible, get_axes, styled

__all__ = [
    "draw_attention_kinds", "draw_cross_attention", "draw_data_parallel",
    "draw_gru_cell", "draw_heads_split_merge", "draw_lstm_cell",
    "draw_patches", "draw_qkv_flow", "draw_query_row",
    "draw_seq2seq_attention", "draw_transformer_block", "draw_unrolled_rnn",
    "plot_tokenization"]

Point = tuple[float, float]
Limits = tuple[float, float]
Layout = tuple[int, float, bool]  # first text, inches per unit, new figure


def _tint(color: str, amount: float) -> str:
    """``color`` mixed with white: ``amount`` 1 is the colour, 0 white."""
    r, g, b = (1.0 - amount * (1.0 - c) for c in to_rgb(color))
    return to_hex((r, g, b))


_LINE, _MUTED = "#333333", "#555555"  # lines and edges; notes
_GATE, _OP, _STATE = PALETTE[1], PALETTE[5], PALETTE[0]  # recurrent cells
_TENSOR = _tint(PALETTE[0], 0.28)  # activations: X, Q, K, V, A, Y
_PARAM = _tint(PALETTE[1], 0.45)  # learned: matrices, attention, decoder
_FUNC = _tint(PALETTE[2], 0.3)  # fixed operations: scores, softmax, +
_MASK = _tint(PALETTE[3], 0.22)  # the optional mask
_FFN = _tint(PALETTE[5], 0.45)  # the feed-forward sublayer
_NORM = _tint(PALETTE[6], 0.45)  # LayerNorm
_ENC = _tint(PALETTE[0], 0.3)  # encoder tokens
# One colour per head, apart from the tensor blue and the parameter orange.
_HEADS = tuple(_tint(PALETTE[i], 0.4) for i in (5, 2, 4, 3, 6, 0))
_MAX_TOKENS = 10  # keys, values or source tokens that fit the text column


# -- primitives ---------------------------------------------------------------


def _text(ax: Axes, x: float, y: float, text: str, *, ha: str = "center",
          va: str = "center", size: float | None = None, **kw: Any) -> None:
    """``text`` at ``(x, y)``, centred there unless ``ha`` or ``va`` say."""
    ax.text(x, y, text, ha=ha, va=va, fontsize=size, **kw)


# A small explanatory text outside the boxes; a row or column label.
_note = functools.partial(_text, size=8.5, color=_MUTED)
_label = functools.partial(_text, size=9, color=_LINE)


def _patch(ax: Axes, x0: float, y0: float, w: float, h: float, *,
           color: Any = "none", edge: str = _LINE, lw: float = 1.0,
           rounding: float | None = None, pad: float = 0.0,
           zorder: float = 3, gid: str | None = None, **kwargs: Any) -> None:
    """A box with its lower left corner at ``(x0, y0)``, tagged ``gid``."""
    style = ("square,pad=0" if rounding is None
             else f"round,pad={pad},rounding_size={rounding}")
    ax.add_patch(FancyBboxPatch((x0, y0), w, h, boxstyle=style, gid=gid,
                                facecolor=color, edgecolor=edge, linewidth=lw,
                                zorder=zorder, **kwargs))


def _rect(ax: Axes, x: float, y: float, text: str = "", *, w: float = 0.8,
          h: float = 0.56, color: str = _TENSOR, size: float = 10,
          rounding: float = 0.08, dashed: bool = False,
          after: float | None = None, **kwargs: Any) -> float:
    """A rounded box centred at ``(x, y)``; returns its right side.

    With ``after``, an arrow leads into it from ``(after, y)``.
    """
    if after is not None:
        _path(ax, [(after, y), (x - w / 2, y)])
    _patch(ax, x - w / 2, y - h / 2, w, h, color=color, rounding=rounding,
           linestyle="--" if dashed else "-", **kwargs)
    if text:
        _text(ax, x, y, text, size=size, zorder=4)
    return x + w / 2


# A learned layer of a recurrent cell.
_box = functools.partial(_rect, w=0.9, h=0.6, color=_GATE, rounding=0.12,
                         pad=0.02, lw=1.2)


def _circle(ax: Axes, x: float, y: float, text: str, *, r: float,
            color: str = _FUNC, lw: float = 1.0, size: float = 10,
            gid: str | None = None) -> None:
    """A labelled circle at ``(x, y)``: an operation or a token."""
    ax.add_patch(Circle((x, y), r, facecolor=color, edgecolor=_LINE, lw=lw,
                        zorder=3, gid=gid))
    _text(ax, x, y, text, size=size, zorder=4)


# A pointwise operation of a recurrent cell; a token as a small circle.
_op = functools.partial(_circle, r=0.25, color=_OP, lw=1.2)
_token = functools.partial(_circle, r=0.2, lw=0.8, size=7.5)


def _path(ax: Axes, *paths: Sequence[Point], arrow: bool = True,
          color: str = _LINE, lw: float = 1.4) -> None:
    """Polylines through points, each with an arrow head on its last leg."""
    line: dict[str, Any] = {"color": color, "lw": lw, "zorder": 2}
    for points in paths:
        xs, ys = zip(*points, strict=True)
        if len(points) > 2:
            ax.plot(xs[:-1], ys[:-1], solid_capstyle="round", **line)
        if not arrow:
            ax.plot(xs[-2:], ys[-2:], **line)
            continue
        ax.add_patch(FancyArrowPatch(points[-2], points[-1], shrinkA=0,
                                     shrinkB=0, arrowstyle="-|>",
                                     mutation_scale=11, **line))


def _branch(ax: Axes, points: Sequence[Point], **kwargs: Any) -> None:
    """A :func:`_path` that branches off a line at a junction dot."""
    ax.plot(*points[0], "o", color=_LINE, ms=4, zorder=3)
    _path(ax, points, **kwargs)


def _canvas(ax: Axes, xlim: Limits, ylim: Limits, title: str | None = None,
            aspect: str = "equal") -> Axes:
    """Set the limits and ``aspect``, hide the axes, add the title."""
    ax.set(xlim=xlim, ylim=ylim, aspect=aspect)
    ax.axis("off")
    if title:
        ax.set_title(title)
    return ax


def _new_axes(ax: Axes | None, xlim: Limits, ylim: Limits,
              scale: float) -> tuple[Axes, Layout]:
    """``ax``, or new axes of ``scale`` inches per unit (at most 7 wide)."""
    width = min(7.0, scale * (xlim[1] - xlim[0]))
    aspect = (ylim[1] - ylim[0]) / (xlim[1] - xlim[0])
    axes = get_axes(ax, figsize=(width, width * aspect))
    return axes, (len(axes.texts), scale, ax is None)


def _finish(ax: Axes, layout: Layout, xlim: Limits, ylim: Limits,
            title: str | None) -> Axes:
    """Set the limits; shrink the drawing's text if it got fewer inches."""
    first, scale, new = layout
    width, height = cast(Figure, ax.get_figure(root=True)).get_size_inches()
    if not new:
        box = ax.get_position()
        width, height = width * box.width, height * box.height
    actual = min(width / (xlim[1] - xlim[0]), height / (ylim[1] - ylim[0]))
    factor = min(1.0, max(0.5, actual / scale))
    for text in ax.texts[first:] if factor < 1.0 else []:
        text.set_fontsize(text.get_fontsize() * factor)
    return _canvas(ax, xlim, ylim, title)


def _check_count(name: str, value: object, high: int) -> int:
    """An int in ``1..high``: more would not fit the figure."""
    value = check_int(name, value)
    if value > high:
        raise ValueError(f"{name}={value} must be between 1 and {high} "
                         "(more do not fit the figure)")
    return value


# -- Part I: recurrent cells and tokenization ---------------------------------


@styled
def draw_unrolled_rnn(num_steps: int = 4, *, ax: Axes | None = None,
                      title: str | None = None) -> Axes:
    """Draw an RNN folded (a cell with a loop) and unrolled over time.

    Args:
        num_steps: time steps to unroll, 1 to 8.
    """
    num_steps = _check_count("num_steps", num_steps, 8)
    ax = get_axes(ax, figsize=(1.6 + 1.45 * num_steps + 1.6, 3.0))
    xs = [0.0, *(3.2 + k * 1.45 for k in range(num_steps))]
    for k, x in enumerate(xs):  # the folded cell, then each step's copy
        _box(ax, x, 0.0, "cell", w=1.0, h=0.8)
        _path(ax, [(x, -1.3), (x, -0.4)], [(x, 0.4), (x, 1.3)])
        _text(ax, x, -1.55, f"$x_{k or 't'}$")
        _text(ax, x, 1.55, f"$h_{k or 't'}$")
    # The folded cell's state leaves it and comes back at the next step.
    _path(ax, [(0.5, 0.2), (0.9, 0.2), (0.9, -0.2), (0.5, -0.2)], color=_STATE)
    _text(ax, 1.55, 0.0, "=", size=18)
    for k, x in enumerate(xs[1:]):  # h_k into the copy of step k + 1
        start, mid = (x - 1.1, x - 0.8) if k == 0 else (x - 0.95, x - 0.725)
        _path(ax, [(start, 0.0), (x - 0.5, 0.0)], color=_STATE)
        _note(ax, mid, 0.2, f"$h_{k}$", va="bottom", size=8, color=_STATE)
    end = xs[-1]
    _path(ax, [(end + 0.5, 0.0), (end + 1.0, 0.0)], color=_STATE)
    _text(ax, end + 1.15, 0.0, "$\\cdots$", ha="left")
    _text(ax, (3.2 + end) / 2, -2.05, "same weights $W_{ih}, W_{hh}, b$ at "
          "every step", size=9, style="italic")
    return _canvas(ax, (-1.3, end + 1.7), (-2.3, 1.9), title)


_TOP = 4.8  # the state line along the top of a recurrent cell


def _cell(ax: Axes | None, ops: Sequence[tuple[float, str]],
          ends: tuple[str, str]) -> Axes:
    """A recurrent cell's frame, its state line along the top from
    ``ends[0]`` to ``ends[1]`` through the operations ``(x, symbol)``."""
    ax = get_axes(ax, figsize=(7.0, 4.4))
    _patch(ax, 0.3, 0.5, 9.4, 5.0, color="#f4f4f4", edge="#999999",
           rounding=0.3, zorder=0)
    stops = [-0.85, *(x for x, _ in ops), 10.85]  # ends and operations
    legs = [[(a + 0.25, _TOP), (b - 0.25, _TOP)] for a, b in pairwise(stops)]
    _path(ax, *legs, color=_STATE, lw=2.2)
    for x, text in ops:  # the pointwise operations on the state
        _op(ax, x, _TOP, text)
    _text(ax, -0.7, _TOP + 0.35, f"${ends[0]}$", ha="left", va="bottom")
    _text(ax, 10.6, _TOP + 0.35, f"${ends[1]}$", ha="right", va="bottom")
    return ax


def _gates(ax: Axes, gates: Sequence[tuple[float, str, str]], bus: float,
           y: float, x_in: float) -> None:
    """Gate layers ``(x, function, name)`` on the input bus; :math:`x_t`
    enters it from below at ``x_in``."""
    _branch(ax, [(x_in, bus), (x_in, -0.5)], arrow=False)
    _text(ax, x_in + 0.15, -0.45, "$x_t$", ha="left", va="bottom")
    for x, fn, name in gates:
        _branch(ax, [(x, bus), (x, y - 0.3)])
        _box(ax, x, y, fn, size=9)
        _note(ax, x - 0.55, y, f"${name}$", ha="right", size=10,
              color="#444444")


@styled
def draw_lstm_cell(*, ax: Axes | None = None,
                   title: str | None = None) -> Axes:
    """Draw an LSTM cell: gates, the cell-state line and pointwise ops."""
    top, bus, gate_y, mid = _TOP, 1.2, 2.4, 3.6
    fx, ix, gx, ox, hx = 2.3, 4.0, 5.4, 7.0, 8.4
    ax = _cell(ax, [(fx, r"$\times$"), (gx, "+")], ("c_{t-1}", "c_t"))
    # The input bus: h_{t-1} from the left, x_t from below.
    _path(ax, [(-0.6, bus), (ox, bus)], arrow=False)
    _text(ax, -0.7, bus - 0.35, "$h_{t-1}$", ha="left", va="top")
    sigma = r"$\sigma$"
    _gates(ax, [(fx, sigma, "f"), (ix, sigma, "i"), (gx, "tanh", "g"),
                (ox, sigma, "o")], bus, gate_y, 1.2)
    # f scales c_{t-1}; i * g is added to it.
    _op(ax, gx, mid, r"$\times$")
    _path(ax, [(fx, gate_y + 0.3), (fx, top - 0.25)],
          [(ix, gate_y + 0.3), (ix, mid), (gx - 0.25, mid)],
          [(gx, gate_y + 0.3), (gx, mid - 0.25)],
          [(gx, mid + 0.25), (gx, top - 0.25)])
    # h_t = o * tanh(c_t).
    _branch(ax, [(hx, top), (hx, 3.85)], color=_STATE)
    _rect(ax, hx, 3.6, "tanh", w=0.84, h=0.44, color=_OP, size=9,
          rounding=0.2, lw=1.2)
    _op(ax, hx, gate_y, r"$\times$")
    _path(ax, [(hx, 3.38), (hx, gate_y + 0.25)],
          [(ox + 0.45, gate_y), (hx - 0.25, gate_y)],
          [(hx, gate_y - 0.25), (hx, bus), (10.6, bus)])
    _branch(ax, [(9.2, bus), (9.2, 6.2)])
    _text(ax, 9.35, 6.2, "$h_t$", ha="left", va="top")
    _text(ax, 10.6, bus - 0.35, "$h_t$", ha="right", va="top")
    return _canvas(ax, (-0.8, 10.8), (-0.7, 6.4), title)


@styled
def draw_gru_cell(*, ax: Axes | None = None, title: str | None = None) -> Axes:
    r"""Draw a GRU cell in PyTorch's form: reset and update gates.

    :math:`h_t = (1 - z) \odot n + z \odot h_{t-1}`.
    """
    top, bus, gate_y = _TOP, 1.0, 2.3
    zx, rx, wx, nx, mx, px = 2.0, 3.4, 4.8, 6.2, 7.4, 8.6
    ax = _cell(ax, [(zx, r"$\times$"), (px, "+")], ("h_{t-1}", "h_t"))
    # The input bus: h_{t-1} branches down, x_t enters from below.
    _branch(ax, [(0.8, top), (0.8, bus), (nx, bus)], arrow=False)
    _gates(ax, [(zx, r"$\sigma$", "z"), (rx, r"$\sigma$", "r"),
                (nx, "tanh", "n")], bus, gate_y, 1.3)
    # z keeps part of the old state, 1 - z lets the candidate n in.
    _branch(ax, [(zx, 3.9), (mx - 0.27, 3.9)])
    _op(ax, mx, 3.9, "1-", r=0.27)
    _op(ax, mx, gate_y, r"$\times$")
    _path(ax, [(zx, gate_y + 0.3), (zx, top - 0.25)],
          [(mx, 3.63), (mx, gate_y + 0.25)],
          [(nx + 0.45, gate_y), (mx - 0.25, gate_y)],
          [(mx + 0.25, gate_y), (px, gate_y), (px, top - 0.25)])
    # r scales the recurrent term W_hn h + b_hn inside n.
    _branch(ax, [(wx, bus), (wx, gate_y - 0.21)])
    _box(ax, wx, gate_y, "$W_{hn}h$", w=0.95, h=0.42, color=_OP, size=8)
    _op(ax, wx, 3.1, r"$\times$")
    _path(ax, [(wx, gate_y + 0.21), (wx, 2.85)],
          [(rx, gate_y + 0.3), (rx, 3.1), (wx - 0.25, 3.1)],
          [(wx + 0.25, 3.1), (nx, 3.1), (nx, gate_y + 0.3)])
    return _canvas(ax, (-0.8, 10.8), (-0.7, 6.0), title)


@styled
def plot_tokenization(rows: Mapping[str, Sequence[str]], *,
                      ax: Axes | None = None, max_chars: int = 60,
                      title: str | None = None) -> Axes:
    """Draw how several tokenizers cut the same text, one row each.

    Spaces show as ``␣``, line breaks as ``↵``, tabs as ``⇥``.

    Args:
        rows: maps a tokenizer's name to the tokens (strings) it made.
        max_chars: characters drawn per row at most.
    """
    if not rows:
        raise ValueError("rows is empty")
    ax = get_axes(ax, figsize=(9.0, 0.7 * len(rows) + 0.6))
    visible = str.maketrans({" ": "\u2423", "\n": "\u21b5", "\t": "\u21e5"})
    for r, (name, tokens) in enumerate(rows.items()):
        _text(ax, -1.0, -r, name, ha="right", size=9)
        x = 0.0
        for i, token in enumerate(tokens):
            shown = token.translate(visible)
            width = max(len(shown), 1)
            if x + width > max_chars:
                _text(ax, x + 0.3, -r, "\u2026", ha="left", size=10)
                break
            _patch(ax, x + 0.06, -r - 0.3, width - 0.12, 0.6, lw=0.6,
                   color=PALETTE[(i % 2) * 5], alpha=0.35, rounding=0.15,
                   zorder=1)
            _text(ax, x + width / 2, -r, shown, family="monospace", size=8)
            x += width
    return _canvas(ax, (-0.5, max_chars + 1.5), (-len(rows) + 0.4, 0.6),
                   title, aspect="auto")


# -- Part II: attention -------------------------------------------------------


def _weight_line(ax: Axes, start: Point, end: Point, weight: float,
                 scale: float = 5.0) -> None:
    """A line from ``start`` to ``end``, as thick as its ``weight``."""
    _path(ax, [start, end], arrow=False, lw=0.4 + scale * weight,
          color=PALETTE[0])


def _weight_bar(ax: Axes, x: float, y: float, width: float, height: float,
                weight: float, y_text: float, **text: Any) -> None:
    """A weight's bar centred on ``x``, tagged ``"weight"``, with its value
    at ``y_text``."""
    _patch(ax, x - width / 2, y, width, height, color=PALETTE[0],
           edge="none", gid="weight")
    _note(ax, x, y_text, f"{weight:.2f}", color=_LINE, **text)


def _peaked(rows: int, cols: int) -> np.ndarray:
    """Illustrative weights: each row peaks at its own place, sums to 1."""
    i, j = np.ogrid[:rows, :cols]
    logits = -0.9 * (j - ((i + 0.5) * cols / rows - 0.5)) ** 2
    weights = np.exp(logits - logits.max(axis=1, keepdims=True))
    return weights / weights.sum(axis=1, keepdims=True)


@styled
def draw_qkv_flow(*, masked: bool = True, ax: Axes | None = None,
                  title: str | None = None) -> Axes:
    r"""Draw scaled dot-product attention as a flow of matrices.

    :math:`Y = \mathrm{softmax}(QK^\top / \sqrt{d_k}) V` with
    :math:`Q, K, V = XW^{(q)}, XW^{(k)}, XW^{(v)}` (Vaswani et al., 2017).

    Args:
        masked: draw the (dashed, optional) mask step.
    """
    masked = check_bool("masked", masked)
    xlim, ylim = (-0.75, 12.45), (-0.95, 3.05)
    ax, layout = _new_axes(ax, xlim, ylim, 0.53)
    y_q, y_k, y_v, x_a = 2.4, 1.2, 0.0, 10.3
    y_s = (y_q + y_k) / 2  # the scores row, between Q and K
    _rect(ax, 0.0, y_k, "$X$", w=0.7, h=3.0, size=11)
    for y, name in ((y_q, "q"), (y_k, "k"), (y_v, "v")):
        right = _rect(ax, 1.6, y, f"$W^{{({name})}}$", w=0.9, color=_PARAM,
                      after=0.35)
        _rect(ax, 3.15, y, f"${name.upper()}$", w=0.7, size=11, after=right)
    # Q enters the scores box high, K low: two arrow heads apart.
    for y, y_in in ((y_q, y_s + 0.18), (y_k, y_s - 0.18)):
        _path(ax, [(3.5, y), (3.75, y), (3.75, y_in), (4.15, y_in)])
    right = _rect(ax, 5.05, y_s, r"$QK^\top\!/\sqrt{d_k}$", w=1.8, h=0.72,
                  color=_FUNC)
    _note(ax, 5.05, y_s - 0.46, "scores $(N, N)$", va="top")
    steps = [("mask", 7.0, 1.1, _MASK, r"$-\infty$ where" + "\nnot allowed"),
             ("Softmax", 8.75, 1.3, _FUNC, "over each row")]
    for text, x, w, color, note in steps[0 if masked else 1:]:
        right = _rect(ax, x, y_s, text, w=w, color=color, after=right,
                      dashed=text == "mask")
        _note(ax, x, y_s - 0.4, note, va="top")
    _rect(ax, x_a, y_s, "$A$", w=0.7, size=11, after=right)
    # Y = A V.
    _path(ax, [(x_a, y_s - 0.28), (x_a, y_v + 0.28)])
    right = _rect(ax, x_a, y_v, "$AV$", w=1.1, color=_FUNC, after=3.5)
    _rect(ax, 11.8, y_v, "$Y$", w=0.7, size=11, after=right)
    _note(ax, 0.0, -0.62, r"$(N, d_\mathrm{model})$")
    _note(ax, 3.15, y_q + 0.45, "$(N, d_k)$")
    _note(ax, 3.15, y_v - 0.45, "$(N, d_v)$")
    _note(ax, x_a, y_s + 0.5, "weights $(N, N)$")
    _note(ax, 11.8, y_v - 0.62, "$(N, d_v)$")
    return _finish(ax, layout, xlim, ylim, title)


# The illustrative row: the query "sat" of "the cat sat on the mat".
_QUERY_ROW_TOKENS = ("the", "cat", "sat", "on", "the", "mat")
_QUERY_ROW_WEIGHTS = (0.06, 0.38, 0.12, 0.05, 0.07, 0.32)


@styled
def draw_query_row(*, ax: Axes | None = None,
                   title: str | None = None) -> Axes:
    r"""Draw one query's row of attention weights: "sat" in a sentence.

    :math:`y_n = \sum_m a_{nm} v_m`, with line widths and bar heights
    showing illustrative weights :math:`a_{nm}` of the query "sat" over
    the keys of "the cat sat on the mat".
    """
    xs = np.arange(len(_QUERY_ROW_WEIGHTS)) * 1.25
    centre = float(xs.mean())
    xlim, ylim = (-2.65, xs[-1] + 0.7), (-0.6, 5.55)
    ax, layout = _new_axes(ax, xlim, ylim, 0.68)
    y_q, y_k, y_bar, y_v, y_sum = 5.15, 3.7, 1.95, 1.2, -0.2
    bar_h = 1.0 / max(_QUERY_ROW_WEIGHTS)  # the largest weight: 1 unit tall
    _rect(ax, centre, y_q, "$q$: sat", w=1.5, color=_tint(PALETTE[1], 0.35))
    # Each key: scored by the query, weighted, its value summed.
    keys = zip(xs, _QUERY_ROW_WEIGHTS, _QUERY_ROW_TOKENS, strict=True)
    for m, (x, a, token) in enumerate(keys):
        _weight_line(ax, (centre, y_q - 0.28), (x, y_k + 0.28), a)
        _rect(ax, x, y_k, token, w=1.05, gid="key")
        if token == "sat":  # the query's own key
            _patch(ax, x - 0.6, y_k - 0.35, 1.2, 0.7, edge=PALETTE[1],
                   lw=2.0, rounding=0.1, zorder=4)
        _weight_bar(ax, x, y_bar, 0.6, bar_h * a, a,
                    y_bar + bar_h * a + 0.08, va="bottom")
        _rect(ax, x, y_v, f"$v_{{{m + 1}}}$", gid="value")
        _weight_line(ax, (x, y_v - 0.28), (centre, y_sum + 0.27), a)
    ax.plot([xs[0] - 0.55, xs[-1] + 0.55], [y_bar, y_bar], color=_LINE, lw=0.8)
    _circle(ax, centre, y_sum, r"$\Sigma$", r=0.27)
    _path(ax, [(centre + 0.27, y_sum), (centre + 0.9, y_sum)])
    _text(ax, centre + 1.0, y_sum,
          r"$y_n = a_{n1} v_{1} + \cdots + a_{n6} v_{6}$", ha="left")
    rows = ((y_q, "query"),
            ((y_q + y_k) / 2, "scores\n" + r"$q_n^\top k_m / \sqrt{d_k}$"),
            (y_k, "keys"), (y_bar + 0.5, "Softmax\n" + "weights $a_{nm}$"),
            (y_v, "values"), (y_sum, "weighted sum"))
    for y, text in rows:
        _label(ax, -0.8, y, text, ha="right")
    return _finish(ax, layout, xlim, ylim, title)


@styled
def draw_heads_split_merge(num_heads: int = 4, *, d_model: int | None = None,
                           ax: Axes | None = None,
                           title: str | None = None) -> Axes:
    r"""Draw multi-head attention: split into heads, attend, merge.

    :math:`\mathrm{MultiHead}(X) = \mathrm{Concat}(\mathrm{head}_1, \dots,
    \mathrm{head}_H) W^{(o)}` (Vaswani et al., 2017).

    Args:
        num_heads: the number of heads :math:`H`, 1 to 8.
        d_model: the model width, to print the sizes; symbols when ``None``.
    """
    num_heads = _check_count("num_heads", num_heads, 8)
    width, head = r"$d_\mathrm{model}$", "$d_k$"
    if d_model is not None:
        head_dim = check_divisible("d_model", d_model, "num_heads", num_heads)
        width = rf"$d_\mathrm{{model}} = {d_model}$"
        head = rf"$d_k = {head_dim}$"
    gap = 0.62  # the height of one head's block, and the head spacing
    ys = [(num_heads - 1 - h) * gap for h in range(num_heads)]
    top, bottom = ys[0] + gap / 2, ys[-1] - gap / 2
    mid, height = (top + bottom) / 2, top - bottom
    xlim, ylim = (-0.8, 11.6), (bottom - 0.6, top + 0.95)
    ax, layout = _new_axes(ax, xlim, ylim, 0.565)
    x_x, x_w, x_split, x_head, x_cat, x_o, x_y = (0.0, 1.7, 3.4, 5.5, 7.6,
                                                  9.2, 10.8)
    # X -> W^(q), W^(k), W^(v) -> split into heads.
    right = _rect(ax, x_x, mid, "$X$", w=0.55, h=height, size=11)
    stacked = "\n".join(f"$W^{{({n})}}$" for n in "qkv")
    right = _rect(ax, x_w, mid, stacked if num_heads > 1 else "$W^{(q,k,v)}$",
                  w=1.2, h=height, color=_PARAM,
                  size=10 if num_heads > 2 else 9, after=right)
    _path(ax, [(right, mid), (x_split - 0.275, mid)])
    # Each head attends on its own block; the blocks are concatenated.
    for h, y in enumerate(ys):
        color = _HEADS[h % len(_HEADS)]
        right = _rect(ax, x_split, y, w=0.55, h=gap, color=color, gid="split")
        right = _rect(ax, x_head, y, f"head {h + 1}", w=1.6, h=gap - 0.14,
                      color=color, size=9, gid="head", after=right)
        right = _rect(ax, x_cat, y, w=0.55, h=gap, color=color, gid="concat",
                      after=right)
    # Mix with W^(o).
    right = _rect(ax, x_o, mid, "$W^{(o)}$", w=0.8, h=height, color=_PARAM,
                  after=right)
    _rect(ax, x_y, mid, "$Y$", w=0.55, h=height, size=11, after=right)
    plural = "s" if num_heads > 1 else ""
    steps = ((x_x, "input", width), (x_w, "project", ""),
             (x_split, f"split into\n$H = {num_heads}$ head{plural}",
              f"{head} each"), (x_head, "attend\nindependently", ""),
             (x_cat, "concatenate", f"{head} each"), (x_o, "mix", ""),
             (x_y, "output", width))
    for x, step, dims in steps:
        _label(ax, x, top + 0.18, step, va="bottom")
        if dims:
            _note(ax, x, bottom - 0.15, dims, va="top")
    return _finish(ax, layout, xlim, ylim, title)


@styled
def draw_cross_attention(q_len: int = 3, kv_len: int = 5, *,
                         ax: Axes | None = None,
                         title: str | None = None) -> Axes:
    r"""Draw cross-attention from a decoder to an encoder's output.

    Queries :math:`Q = XW^{(q)}` from the decoder, keys and values
    :math:`K, V = ZW^{(k)}, ZW^{(v)}` from the encoder's output :math:`Z`
    (Vaswani et al., 2017).

    Args:
        q_len: decoder tokens :math:`L_q` (rows), 1 to 8.
        kv_len: encoder tokens :math:`L_k` (columns), 1 to 10.
    """
    q_len = _check_count("q_len", q_len, 8)
    kv_len = _check_count("kv_len", kv_len, _MAX_TOKENS)
    grid = _peaked(q_len, kv_len)  # illustrative weights
    cell = 0.62
    gx, gy = np.arange(kv_len) * cell, -np.arange(q_len) * cell  # centres
    g_left, g_right = gx[0] - cell / 2, gx[-1] + cell / 2
    g_top, g_bottom = gy[0] + cell / 2, gy[-1] - cell / 2
    y_enc, x_dec, x_out = g_top + 1.45, g_left - 1.75, g_right + 1.75
    xlim = (x_dec - 1.55, max(x_out + 1.5, g_right + 3.2))
    ylim = (g_bottom - 1.1, y_enc + 0.4)
    ax, layout = _new_axes(ax, xlim, ylim, 0.62)
    token = functools.partial(_rect, ax, w=0.52, h=0.5, size=9)
    # The encoder's output Z along the top: keys and values, by column.
    for j, x in enumerate(gx):
        token(x, y_enc, f"$z_{{{j + 1}}}$")
        _path(ax, [(x, y_enc - 0.25), (x, g_top + 0.06)])
    # Decoder tokens X down the left, a softmax row each, outputs right.
    for i, y in enumerate(gy):
        token(x_dec, y, f"$x_{{{i + 1}}}$")
        token(x_out, y, f"$y_{{{i + 1}}}$")
        _path(ax, [(x_dec + 0.26, y), (g_left - 0.06, y)],
              [(g_right + 0.06, y), (x_out - 0.3, y)])
    for (i, j), a in np.ndenumerate(grid):
        shade = colormaps["Blues"](0.08 + 0.85 * float(a / grid.max()))
        _patch(ax, gx[j] - cell / 2, gy[i] - cell / 2, cell, cell,
               color=shade, edge="white", gid="weight")
    _patch(ax, g_left, g_bottom, g_right - g_left, g_top - g_bottom, zorder=4)
    _label(ax, g_left - 0.2, y_enc, f"encoder output $Z$\n($L_k = {kv_len}$)",
           ha="right")
    _label(ax, x_dec, g_bottom - 0.15, f"decoder $X$\n($L_q = {q_len}$)",
           va="top")
    _note(ax, g_right + 0.2, (y_enc + g_top) / 2,
          r"$K = ZW^{(k)}$" + "\n" + r"$V = ZW^{(v)}$", ha="left")
    _note(ax, (x_dec + g_left) / 2 + 0.13, g_top + 0.1, r"$Q = XW^{(q)}$",
          va="bottom")
    _note(ax, (g_left + g_right) / 2, g_bottom - 0.15,
          f"weights $A$: ${q_len} \\times {kv_len}$\nSoftmax over each row",
          va="top")
    _note(ax, x_out, g_bottom - 0.15, r"$y_i = \sum_j a_{ij} v_j$", va="top")
    return _finish(ax, layout, xlim, ylim, title)


@styled
def draw_seq2seq_attention(src_len: int = 4, *, ax: Axes | None = None,
                           title: str | None = None) -> Axes:
    r"""Draw one decoder step of an RNN encoder-decoder with attention.

    :math:`e_{ij} = v^\top \tanh(W_q s_{i-1} + W_k h_j + b)`,
    :math:`c_i = \sum_j \alpha_{ij} h_j` (Bahdanau et al., 2014).

    Args:
        src_len: source tokens :math:`S`, 1 to 10.
    """
    src_len = _check_count("src_len", src_len, _MAX_TOKENS)
    # Illustrative: the decoder reads mostly the second source token.
    alpha = _peaked(src_len, src_len)[min(1, src_len - 1)]
    xs = np.arange(src_len) * 1.2
    # The scores and softmax boxes span the encoder states (and their text).
    box_x, box_w = xs[-1] / 2, max(xs[-1] + 1.0, 4.6)
    box_right = box_x + box_w / 2
    x_dec = box_right + 1.35
    y_in, y_h, y_e, y_sm, y_bar, y_c = -1.0, 0.0, 1.2, 2.15, 2.85, 4.5
    bar_h = 0.8 / float(alpha.max())
    xlim, ylim = (box_x - box_w / 2 - 1.6, x_dec + 1.75), (-1.3, y_c + 1.05)
    ax, layout = _new_axes(ax, xlim, ylim, 0.72)
    # Encoder states h_j, scored, weighted and summed into the context.
    for j, (x, a) in enumerate(zip(xs, alpha, strict=True)):
        _text(ax, x, y_in, f"$x_{{{j + 1}}}$", size=9)
        _rect(ax, x, y_h, f"$h_{{{j + 1}}}$", w=0.7, h=0.54, gid="encoder",
              after=xs[j - 1] + 0.35 if j else None)
        _path(ax, [(x, y_in + 0.2), (x, y_h - 0.27)],
              [(x, y_h + 0.27), (x, y_e - 0.3)],
              [(x, y_e + 0.3), (x, y_sm - 0.25)])
        _weight_bar(ax, x, y_bar, 0.5, bar_h * a, a, (y_bar + y_sm + 0.25) / 2,
                    size=7.5)
        _weight_line(ax, (x, y_bar + bar_h * a), (box_x, y_c - 0.27), a, 4.0)
    wide = functools.partial(_rect, ax, box_x, w=box_w, color=_FUNC, size=9)
    wide(y_e, r"$e_{ij} = v^\top \tanh(W_q s_{i-1} + W_k h_j + b)$", h=0.6)
    wide(y_sm, "Softmax over $j$", h=0.5)
    for y, text in ((y_h, "encoder"), (y_e, "scores"),
                    (y_bar + 0.45, r"weights $\alpha_{ij}$")):
        _label(ax, xlim[0] + 0.05, y, text, ha="left")
    _circle(ax, box_x, y_c, r"$\Sigma$", r=0.27)
    _note(ax, box_x - 0.4, y_c, r"$c_i = \sum_j \alpha_{ij} h_j$", ha="right",
          size=9)
    # Decoder: s_{i-1} asks, s_i takes the context and y_{i-1}.
    _rect(ax, x_dec, y_e, "$s_{i-1}$", gid="decoder")
    _rect(ax, x_dec, y_c, "$s_i$", gid="decoder", after=box_x + 0.27)
    _path(ax, [(x_dec - 0.4, y_e), (box_right, y_e)],
          [(x_dec, y_e + 0.28), (x_dec, y_c - 0.28)],
          [(x_dec + 1.15, y_c), (x_dec + 0.4, y_c)],
          [(x_dec, y_c + 0.28), (x_dec, y_c + 0.7)])
    _note(ax, (box_x + x_dec) / 2, y_c + 0.1, "context $c_i$", va="bottom")
    _text(ax, x_dec + 1.2, y_c, "$y_{i-1}$", ha="left", size=9)
    _text(ax, x_dec, y_c + 0.75, "$y_i$", va="bottom", size=9)
    _label(ax, x_dec + 0.12, (y_e + y_c) / 2, "decoder", ha="left")
    return _finish(ax, layout, xlim, ylim, title)


# -- Part III: the transformer layer and the kinds of attention ---------------

_BLOCK_W = 2.6  # width of a sublayer box
_SKIP_X = _BLOCK_W / 2 + 0.55  # the residual path, right of the boxes
_UNIT = 2.55  # height of one sublayer with its norm and addition


def _sublayer(ax: Axes, base: float, name: str, color: str,
              norm_first: bool) -> float:
    """One sublayer on a residual branch from ``base``; returns its y."""
    if norm_first:  # x + Sublayer(LayerNorm(x))
        y_norm, y_sub, y_add = base + 0.55, base + 1.4, base + 2.2
    else:  # LayerNorm(x + Sublayer(x))
        y_sub, y_add, y_norm = base + 0.7, base + 1.55, base + 2.2
    skip = [(0.0, base), (_SKIP_X, base), (_SKIP_X, y_add), (0.22, y_add)]
    _branch(ax, skip, color=_STATE)
    _rect(ax, 0.0, y_sub, name, w=_BLOCK_W, h=0.7, color=color, size=9,
          gid="sublayer")
    _rect(ax, 0.0, y_norm, "LayerNorm", w=_BLOCK_W * 0.75, h=0.42,
          color=_NORM, size=9, gid="norm")
    _circle(ax, 0.0, y_add, "+", r=0.22, size=11, gid="add")
    # The main path through the three boxes, bottom to top.
    previous = base
    for y, half in sorted([(y_sub, 0.35), (y_norm, 0.21), (y_add, 0.22)]):
        _path(ax, [(0.0, previous), (0.0, y - half)])
        previous = y + half
    _path(ax, [(0.0, previous), (0.0, base + _UNIT)], arrow=False)
    return y_sub


@styled
def draw_transformer_block(*, norm_first: bool = False, decoder: bool = False,
                           ax: Axes | None = None,
                           title: str | None = None) -> Axes:
    r"""Draw one transformer layer: sublayers, residual paths and norms.

    Post-LN (Vaswani et al., 2017):
    :math:`x \leftarrow \mathrm{LayerNorm}(x + \mathrm{Sublayer}(x))`;
    pre-LN (Xiong et al., 2020):
    :math:`x \leftarrow x + \mathrm{Sublayer}(\mathrm{LayerNorm}(x))`.

    Args:
        norm_first: draw the pre-LN variant.
        decoder: draw a decoder layer (masked self-attention,
            cross-attention, feed-forward).

    Returns:
        The axes; patches tagged ``"sublayer"``, ``"norm"`` and ``"add"``
        from the input upwards.
    """
    norm_first = check_bool("norm_first", norm_first)
    decoder = check_bool("decoder", decoder)
    sublayers = [("Multi-head\nself-attention", _PARAM),
                 ("Feed-forward", _FFN)]
    if decoder:
        sublayers[:1] = [("Masked multi-head\nself-attention", _PARAM),
                         ("Multi-head\ncross-attention", _PARAM)]
    y0 = 0.75  # the first branch point
    top = y0 + _UNIT * len(sublayers)
    y_out = top + 0.55
    xlim, ylim = (-4.1 if decoder else -2.45, 2.75), (-0.3, y_out + 0.3)
    ax, layout = _new_axes(ax, xlim, ylim, 0.6)
    _label(ax, 0.0, 0.0, "input $X$", size=9.5)
    _path(ax, [(0.0, 0.2), (0.0, y0)], arrow=False)
    for k, (name, color) in enumerate(sublayers):
        y_sub = _sublayer(ax, y0 + k * _UNIT, name, color, norm_first)
        if decoder and k == 1:  # keys and values from the encoder
            x_mem = -_BLOCK_W / 2 - 0.95
            _path(ax, [(x_mem, y_sub), (-_BLOCK_W / 2, y_sub)])
            _note(ax, x_mem - 0.1, y_sub, "memory\n(encoder\noutput)",
                  ha="right", color=_LINE)
            _note(ax, (x_mem - _BLOCK_W / 2) / 2, y_sub + 0.1, "$K, V$",
                  va="bottom", size=8)
    _path(ax, [(0.0, top), (0.0, y_out - 0.2)])
    _label(ax, 0.0, y_out, "output", size=9.5)
    # The frame of what is repeated L times.
    left = -_BLOCK_W / 2 - 0.3
    _patch(ax, left, y0 - 0.3, _SKIP_X + 0.3 - left, top - y0 + 0.28,
           edge="#999999", rounding=0.15, zorder=1, gid="frame",
           linestyle="--")
    _label(ax, left - 0.12, y0 - 0.15, r"$\times L$", ha="right",
           va="bottom", size=10)
    _note(ax, _SKIP_X + 0.12, y0 + 0.45, "residual", ha="left", va="bottom",
          size=8, color=_STATE, rotation=90)
    return _finish(ax, layout, xlim, ylim, title)


_CELL = 0.42  # a cell of the attention-kinds grids
# Encoder and decoder tokens: dot colour, filled-cell colour, letter.
_SIDES = {"e": (_ENC, _tint(PALETTE[0], 0.75)),
          "d": (_PARAM, _tint(PALETTE[1], 0.8))}


def _kind_panel(ax: Axes, x0: float, allowed: np.ndarray, sides: str) -> None:
    """A grid of may-attend cells, query tokens left, key tokens above."""
    (q_dot, fill), (k_dot, _) = _SIDES[sides[0]], _SIDES[sides[1]]
    for (i, j), ok in np.ndenumerate(allowed):
        _patch(ax, x0 + j * _CELL, -(i + 1) * _CELL, _CELL, _CELL,
               color=fill if ok else "white", edge="#bbbbbb", lw=0.8,
               zorder=2, gid="allowed" if ok else "blocked")
    for j in range(allowed.shape[1]):
        _token(ax, x0 + (j + 0.5) * _CELL, 0.35, f"{sides[1]}{j + 1}",
               color=k_dot, gid="key")
    for i in range(allowed.shape[0]):
        _token(ax, x0 - 0.35, -(i + 0.5) * _CELL, f"{sides[0]}{i + 1}",
               color=q_dot, gid="query")


@styled
def draw_attention_kinds(*, src_len: int = 5, tgt_len: int = 4,
                         ax: Axes | None = None,
                         title: str | None = None) -> Axes:
    """Draw the three kinds of attention in a transformer, side by side.

    Encoder self-attention (all to all), decoder masked self-attention
    (causal) and cross-attention (decoder queries, encoder keys); a filled
    cell means the query may attend to the key (Vaswani et al., 2017).

    Args:
        src_len: encoder (source) tokens :math:`S`, 1 to 8.
        tgt_len: decoder (target) tokens :math:`T`, 1 to 8.

    Returns:
        The axes; grid cells tagged ``"allowed"`` or ``"blocked"``.
    """
    src_len = _check_count("src_len", src_len, 8)
    tgt_len = _check_count("tgt_len", tgt_len, 8)
    panels = [
        ("encoder self-attention", "all to all",
         np.ones((src_len, src_len), dtype=bool), "ee"),
        ("decoder masked self-attention", "causal: no looking ahead",
         np.tril(np.ones((tgt_len, tgt_len), dtype=bool)), "dd"),
        ("cross-attention", "decoder queries, encoder keys",
         np.ones((tgt_len, src_len), dtype=bool), "de")]
    # A panel's slot is wide enough for its grid and its caption.
    slots = [max(p[2].shape[1] * _CELL, 2.45) for p in panels]
    mids = [0.8 + sum(slots[:k]) + 1.25 * k + slots[k] / 2 for k in range(3)]
    y_text = -max(src_len, tgt_len) * _CELL - 0.2  # under the tallest grid
    xlim, ylim = (0.0, mids[2] + slots[2] / 2 + 0.1), (y_text - 1.25, 0.65)
    ax, layout = _new_axes(ax, xlim, ylim, 0.75)
    for (name, rule, allowed, sides), x_mid in zip(panels, mids, strict=True):
        _kind_panel(ax, x_mid - allowed.shape[1] * _CELL / 2, allowed, sides)
        _label(ax, x_mid, y_text, name, va="top")
        _note(ax, x_mid, y_text - 0.38, rule, va="top", size=8)
    key = "rows: queries    columns: keys    filled: may attend"
    _label(ax, xlim[1] / 2, ylim[0] + 0.05, key, va="bottom", size=8)
    return _finish(ax, layout, xlim, ylim, title)


# -- Part V: images as patches; data-parallel training -----------------------

_MAX_PATCHES = 64  # patches whose tiles still fit the text column
_TILES_PER_ROW = 16
_TILE, _TILE_GAP = 0.62, 0.14  # a token's side and the space between tokens
# A patch's number on the image, on a half-transparent white box.
_ON_IMAGE: dict[str, Any] = {
    "ha": "left", "va": "top", "color": PALETTE[3], "zorder": 4,
    "bbox": {"boxstyle": "square,pad=0.1", "facecolor": "white",
             "edgecolor": "none", "alpha": 0.8}}


@styled
def draw_patches(image: torch.Tensor | np.ndarray, patch_size: int, *,
                 ax: Axes | None = None, title: str | None = None) -> Axes:
    """Draw an image cut into patches, then the patches as a sequence.

    The patches are read row by row, left to right, as a Vision Transformer
    reads them (Dosovitskiy et al., 2021).

    Args:
        image: one image with 1 or 3 channels, shown as it is (one
            channel in grey, dark for large values).
        patch_size: side :math:`P` of a square patch; it must divide both
            sides of the image (at most 64 patches).

    Shape:
        image: ``(C, H, W)`` or ``(H, W)``.

    Returns:
        The axes; the image is tagged ``"image"``, tile ``i`` ``"patch-i"``.
    """
    array = as_array(image, "image", (2, 3))
    array = array[None] if array.ndim == 2 else array
    channels, height, width = array.shape
    check_choice("image channels", channels, (1, 3))
    rows = check_divisible("image height", height, "patch_size", patch_size)
    cols = check_divisible("image width", width, "patch_size", patch_size)
    count, p = rows * cols, patch_size
    if count > _MAX_PATCHES:
        raise ValueError(f"patch_size={p} cuts the {height}x{width} image "
                         f"into {count} patches; at most {_MAX_PATCHES} fit "
                         "the drawing")
    pixels = array[0] if channels == 1 else array.transpose(1, 2, 0)
    shown: dict[str, Any] = {"interpolation": "nearest", "zorder": 2}
    if channels == 1:
        shown.update(cmap="gray_r", vmin=array.min(), vmax=array.max())
    per_row = min(count, _TILES_PER_ROW)
    strip = per_row * _TILE + (per_row - 1) * _TILE_GAP
    longest = max(height, width)  # drawn 2.6 units long
    img_w, img_h = 2.6 * width / longest, 2.6 * height / longest
    total_w = max(strip, img_w + 3.2)
    y_tiles = -1.15  # top of the tiles; the image's bottom is at 0
    bottom = y_tiles - -(-count // per_row) * (_TILE + 0.42)
    xlim, ylim = (-0.1, total_w + 0.1), (bottom - 0.45, img_h + 0.45)
    ax, layout = _new_axes(ax, xlim, ylim, 0.62)
    x0, cell_w, cell_h = (total_w - img_w) / 2, img_w / cols, img_h / rows
    size = 8.0 if count <= 16 else 6.0
    ax.imshow(pixels, extent=(x0, x0 + img_w, 0.0, img_h), gid="image",
              **shown)
    line: dict[str, Any] = {"color": PALETTE[3], "lw": 1.0, "zorder": 3}
    for c in range(cols + 1):
        ax.plot([x0 + c * cell_w] * 2, [0.0, img_h], **line)
    for r in range(rows + 1):
        ax.plot([x0, x0 + img_w], [r * cell_h] * 2, **line)
    for index in range(count):  # its number on the image, then its tile
        r, c = divmod(index, cols)
        _text(ax, x0 + c * cell_w + 0.05, img_h - r * cell_h - 0.05,
              str(index), size=size, **_ON_IMAGE)
        row, slot = divmod(index, per_row)
        x = (total_w - strip) / 2 + slot * (_TILE + _TILE_GAP)
        top = y_tiles - row * (_TILE + 0.42)
        ax.imshow(pixels[r * p : (r + 1) * p, c * p : (c + 1) * p],
                  extent=(x, x + _TILE, top - _TILE, top),
                  gid=f"patch-{index}", **shown)
        _patch(ax, x, top - _TILE, _TILE, _TILE, lw=0.8)
        _note(ax, x + _TILE / 2, top - _TILE - 0.08, str(index), va="top",
              size=size)
    _note(ax, x0 + img_w + 0.25, img_h / 2, f"{height} × {width} image\n"
          f"{rows} × {cols} patches\nof {p} × {p}", ha="left")
    _path(ax, [(x0 + img_w / 2, -0.08), (x0 + img_w / 2, y_tiles + 0.1)])
    _note(ax, x0 + img_w / 2 + 0.15, y_tiles / 2, "read row by row", ha="left")
    _note(ax, total_w / 2, bottom - 0.12, f"a sequence of {count} tokens, "
          f"each {p} × {p} × {channels} = {p * p * channels} values")
    return _finish(ax, layout, xlim, ylim, title)


@styled
def draw_data_parallel(num_devices: int = 2, *,
                       batch_size: int | None = None, ax: Axes | None = None,
                       title: str | None = None) -> Axes:
    r"""Draw one step of data-parallel training on ``num_devices`` devices.

    Each device computes :math:`g_d` on its shard of the batch; an
    all-reduce gives every device :math:`\bar g = \frac{1}{D} \sum_d g_d`
    (``DistributedDataParallel``, Li et al., 2020).

    Args:
        num_devices: the number of devices :math:`D`, 1 to 4.
        batch_size: the global batch :math:`B` to print (a multiple of
            ``num_devices``); the symbol :math:`B` when ``None``.

    Returns:
        The axes; patches tagged ``"shard-<d>"`` and ``"replica-<d>"``.
    """
    devices = _check_count("num_devices", num_devices, 4)
    rows, share = "$B$", "$B/D$" if devices > 1 else "$B$"
    if batch_size is not None:
        each = check_divisible("batch_size", batch_size, "num_devices",
                               devices)
        rows, share = f"{batch_size}", f"{each}"
    col = 2.3  # width of one device's column
    width = max(devices, 2) * col  # one device: room for the labels
    y_batch, y_model, y_grad, y_reduce, y_step = 5.2, 3.85, 2.75, 1.65, 0.55
    xlim, ylim = (-0.25, width + 0.25), (-0.05, y_batch + 0.75)
    ax, layout = _new_axes(ax, xlim, ylim, 0.95)
    shard_w = (width - 0.5) / devices
    box = functools.partial(_rect, ax, w=1.8, h=0.5, size=9)
    for d in range(devices):  # a shard of the batch, a replica each
        x = width / 2 + (d - (devices - 1) / 2) * col
        colour, centre = _HEADS[d % len(_HEADS)], 0.25 + (d + 0.5) * shard_w
        box(centre, y_batch, f"{share} rows", w=shard_w, color=colour,
            gid=f"shard-{d}")
        box(x, y_model, f"device {d}\nmodel replica", h=0.8, color=_PARAM,
            gid=f"replica-{d}")
        box(x, y_grad, f"loss, backward: $g_{{{d}}}$", color=colour)
        box(x, y_step, "optimizer step", color=_FUNC)
        _path(ax, [(centre, y_batch - 0.25), (x, y_model + 0.42)],
              [(x, y_model - 0.4), (x, y_grad + 0.27)],
              [(x, y_grad - 0.25), (x, y_reduce + 0.3)],
              [(x, y_reduce - 0.3), (x, y_step + 0.27)])
    _label(ax, width / 2, y_batch + 0.48, f"global batch of {rows} rows, cut "
           f"into {devices} disjoint shard{'s' if devices > 1 else ''}")
    terms = " + ".join(f"g_{{{d}}}" for d in range(devices))
    label = f"all-reduce: every device gets $\\bar g = ({terms}) / {devices}$"
    if devices == 1:
        label = r"one device: $\bar g = g_0$"
    _rect(ax, width / 2, y_reduce, label, w=width - 0.3, h=0.6,
          color=_TENSOR, size=9, gid="all-reduce")
    _note(ax, width / 2, y_step - 0.45,
          "the same update everywhere: the replicas stay identical")
    return _finish(ax, layout, xlim, ylim, title)
