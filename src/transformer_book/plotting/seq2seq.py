"""Figures of the encoder-decoder chapter.

An alignment heatmap (the attention weights of a translation, with the
source and target tokens as tick labels, as in Bahdanau et al., 2014) and
exact-match accuracy against source length, one curve per model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import cycle

import numpy as np
import torch
from matplotlib.axes import Axes

from ._style import get_axes, styled

__all__ = ["plot_alignment", "plot_exact_match_vs_length"]

_MARKERS = ("o", "s", "^", "D", "v", "P")
_DASHES = ("-", "--", ":", "-.", "-", "--")


@styled
def plot_alignment(
    weights: torch.Tensor | np.ndarray,
    src_tokens: Sequence[str],
    tgt_tokens: Sequence[str],
    *,
    ax: Axes | None = None,
    title: str | None = None,
    colorbar: bool = False,
) -> Axes:
    """Draw the attention weights of one translation as a heatmap.

    Row ``i`` is the ``i``-th generated target token and column ``j`` the
    ``j``-th source token; a bright cell means the decoder read source
    token ``j`` while writing target token ``i``. The source is written
    along the top, as in the alignment figures of Bahdanau et al. (2014).

    Args:
        weights: attention weights of one example, rows summing to 1.
        src_tokens: the source tokens (column labels).
        tgt_tokens: the generated tokens (row labels).
        ax: axes to draw on; a new figure sized to the tokens when
            ``None``.
        title: optional axes title.
        colorbar: add a colour bar.

    Shape:
        weights: ``(len(tgt_tokens), len(src_tokens))``.

    Returns:
        The axes drawn on.

    Raises:
        ValueError: if ``weights`` is not 2-D or a token list does not
            match its side of ``weights``.
    """
    w = np.asarray(torch.as_tensor(weights).detach().cpu(), dtype=float)
    if w.ndim != 2:
        raise ValueError(
            f"weights must be 2-D (target, source), got shape {w.shape}"
        )
    rows, cols = w.shape
    if len(src_tokens) != cols:
        raise ValueError(
            f"src_tokens has {len(src_tokens)} tokens, weights has {cols} "
            "columns"
        )
    if len(tgt_tokens) != rows:
        raise ValueError(
            f"tgt_tokens has {len(tgt_tokens)} tokens, weights has {rows} rows"
        )
    ax = get_axes(ax, (0.42 * cols + 1.8, 0.36 * rows + 1.4))
    image = ax.imshow(w, vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(cols))
    ax.set_yticks(range(rows))
    ax.set_xticklabels(list(src_tokens), rotation=90)
    ax.set_yticklabels(list(tgt_tokens))
    ax.xaxis.tick_top()
    ax.xaxis.set_label_position("top")
    ax.tick_params(length=0)
    ax.grid(False)
    ax.set_xlabel("source")
    ax.set_ylabel("generated")
    if colorbar:
        ax.figure.colorbar(
            image, ax=ax, fraction=0.046, pad=0.04, label="attention weight"
        )
    if title:
        ax.set_title(title, pad=10)
    return ax


@styled
def plot_exact_match_vs_length(
    lengths: Sequence[float] | np.ndarray,
    accuracies: Mapping[str, Sequence[float] | np.ndarray],
    *,
    target: float | None = None,
    ax: Axes | None = None,
    title: str | None = None,
    xlabel: str = "source length (tokens)",
) -> Axes:
    """Plot exact-match accuracy against source length, one line per model.

    Args:
        lengths: source lengths (or the centres of length bins), ``(N,)``.
        accuracies: maps a model name to its accuracy at each length, in
            [0, 1].
        target: an accuracy to mark with a dashed line (e.g. a goal).
        ax: axes to draw on; a new figure when ``None``.
        title: optional axes title.
        xlabel: label of the x axis.

    Returns:
        The axes drawn on.

    Raises:
        ValueError: if ``lengths`` is not 1-D, ``accuracies`` is empty, or
            a curve does not have one value per length.
    """
    x = np.asarray(lengths, dtype=float)
    if x.ndim != 1:
        raise ValueError(f"lengths must be 1-D, got shape {x.shape}")
    if not accuracies:
        raise ValueError("accuracies is empty; expected at least one curve")
    ax = get_axes(ax)
    styles = cycle(zip(_MARKERS, _DASHES, strict=True))
    for (label, y), (marker, dash) in zip(
        accuracies.items(), styles, strict=False
    ):
        y = np.asarray(y, dtype=float)
        if y.shape != x.shape:
            raise ValueError(
                f"accuracies[{label!r}] has shape {y.shape}, expected "
                f"{x.shape} (one value per length)"
            )
        ax.plot(x, y, marker=marker, ls=dash, label=str(label))
    if target is not None:
        ax.axhline(target, color="#777777", ls="--", lw=1, label="target")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("exact match")
    ax.set_ylim(-0.03, 1.05)
    ax.legend()
    if title:
        ax.set_title(title)
    return ax
