"""Figures of the attention chapters: weights, heads, masks, scaling."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch

from ._style import PALETTE, get_axes, styled

__all__ = [
    "plot_attention",
    "plot_attention_heads",
    "plot_mask",
    "plot_masks",
    "plot_scaling_study",
]

_BLOCKED = "#DDDDDD"


def _as_array(
    x: torch.Tensor | np.ndarray, name: str, ndim: int
) -> np.ndarray:
    array = np.asarray(torch.as_tensor(x).detach().cpu())
    if array.ndim != ndim:
        raise ValueError(
            f"{name} must be {ndim}-D, got shape {tuple(array.shape)}"
        )
    return array


def _check_labels(labels: Sequence[str] | None, size: int, name: str) -> None:
    if labels is not None and len(labels) != size:
        raise ValueError(f"{name} has {len(labels)} labels, expected {size}")


def _set_ticks(
    ax: Axes,
    x_labels: Sequence[str] | None,
    y_labels: Sequence[str] | None,
    shape: tuple[int, int],
) -> None:
    rows, cols = shape
    ax.set_xticks(range(cols))
    ax.set_yticks(range(rows))
    ax.set_xticklabels(x_labels if x_labels is not None else range(cols))
    ax.set_yticklabels(y_labels if y_labels is not None else range(rows))
    if x_labels is not None and max((len(s) for s in x_labels), default=0) > 2:
        ax.tick_params(axis="x", labelrotation=90)
    ax.grid(False)


@styled
def plot_attention(
    weights: torch.Tensor | np.ndarray,
    *,
    x_labels: Sequence[str] | None = None,
    y_labels: Sequence[str] | None = None,
    cell_text: Sequence[Sequence[str]] | None = None,
    annotate: bool = False,
    ax: Axes | None = None,
    title: str | None = None,
    colorbar: bool = True,
    vmax: float | None = 1.0,
) -> Axes:
    """Draw an attention matrix as a heatmap: one row per query.

    Args:
        weights: the attention weights (rows are queries, columns keys).
        x_labels: names of the keys.
        y_labels: names of the queries.
        cell_text: a text for each cell (e.g. the token at that key),
            written over the heatmap; overrides ``annotate``.
        annotate: write each weight in its cell.
        ax: axes to draw on; a new figure when ``None``.
        title: optional axes title.
        colorbar: add a colour bar.
        vmax: top of the colour scale; the largest weight when ``None``.

    Shape:
        weights: ``(Lq, Lk)``.

    Returns:
        The axes drawn on.

    Raises:
        ValueError: if ``weights`` is not 2-D or a label list has the wrong
            length.
    """
    w = _as_array(weights, "weights", 2).astype(float)
    _check_labels(x_labels, w.shape[1], "x_labels")
    _check_labels(y_labels, w.shape[0], "y_labels")
    if cell_text is not None and np.shape(cell_text) != w.shape:
        raise ValueError(
            f"cell_text must have shape {w.shape}, got {np.shape(cell_text)}"
        )
    rows, cols = w.shape
    ax = get_axes(ax, (0.5 * cols + 2.0, 0.45 * rows + 1.2))
    image = ax.imshow(w, vmin=0.0, vmax=vmax, cmap="viridis", aspect="auto")
    _set_ticks(ax, x_labels, y_labels, w.shape)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    top = w.max() if vmax is None else vmax
    if cell_text is not None or annotate:
        for i in range(rows):
            for j in range(cols):
                text = (
                    cell_text[i][j]
                    if cell_text is not None
                    else f"{w[i, j]:.2f}"
                )
                colour = "black" if w[i, j] > 0.6 * top else "white"
                ax.text(
                    j,
                    i,
                    text,
                    ha="center",
                    va="center",
                    color=colour,
                    fontsize=8,
                )
    if colorbar:
        ax.figure.colorbar(
            image, ax=ax, fraction=0.046, pad=0.04, label="attention weight"
        )
    if title:
        ax.set_title(title)
    return ax


@styled
def plot_attention_heads(
    weights: torch.Tensor | np.ndarray,
    *,
    x_labels: Sequence[str] | None = None,
    y_labels: Sequence[str] | None = None,
    titles: Sequence[str] | None = None,
    axes: Sequence[Axes] | None = None,
    suptitle: str | None = None,
) -> np.ndarray:
    """Draw the attention weights of several heads side by side.

    Args:
        weights: one attention matrix per head, on a shared colour scale
            from 0 to 1.
        x_labels: names of the keys.
        y_labels: names of the queries.
        titles: one title per head; ``"head h"`` when ``None``.
        axes: one axes per head; a new row of panels when ``None``.
        suptitle: optional title over the whole figure.

    Shape:
        weights: ``(H, Lq, Lk)``.

    Returns:
        The array of axes drawn on.

    Raises:
        ValueError: if ``weights`` is not 3-D or ``titles``/``axes`` do not
            have one entry per head.
    """
    w = _as_array(weights, "weights", 3).astype(float)
    heads, rows, cols = w.shape
    if titles is not None and len(titles) != heads:
        raise ValueError(f"titles has {len(titles)} entries, expected {heads}")
    if axes is None:
        size = (heads * (0.42 * cols + 0.9) + 1.0, 0.42 * rows + 1.3)
        fig, axes = plt.subplots(1, heads, figsize=size, squeeze=False)
        axes = axes[0]
    elif len(axes) != heads:
        raise ValueError(f"axes has {len(axes)} entries, expected {heads}")
    axes = np.asarray(axes, dtype=object)
    for h, ax in enumerate(axes):
        plot_attention(
            w[h],
            x_labels=x_labels,
            y_labels=y_labels if h == 0 else [""] * rows,
            ax=ax,
            colorbar=False,
            title=titles[h] if titles is not None else f"head {h}",
        )
        if h:
            ax.set_ylabel("")
    image = axes[-1].images[-1]
    axes[0].figure.colorbar(
        image, ax=list(axes), fraction=0.03, pad=0.02, label="attention weight"
    )
    if suptitle:
        axes[0].figure.suptitle(suptitle)
    return axes


def _allowed(mask: torch.Tensor | np.ndarray) -> np.ndarray:
    m = torch.as_tensor(mask).detach().cpu()
    if m.dtype != torch.bool:
        m = m > torch.finfo(m.dtype).min
    return np.asarray(m)


@styled
def plot_mask(
    mask: torch.Tensor | np.ndarray,
    *,
    x_labels: Sequence[str] | None = None,
    y_labels: Sequence[str] | None = None,
    ax: Axes | None = None,
    title: str | None = None,
    legend: bool = True,
) -> Axes:
    """Draw an attention mask: coloured where a query may attend.

    Args:
        mask: a boolean mask (``True`` = may attend) or a float bias (the
            dtype's minimum or ``-inf`` = blocked).
        x_labels: names of the keys.
        y_labels: names of the queries.
        ax: axes to draw on; a new figure when ``None``.
        title: optional axes title.
        legend: add a legend for the two colours.

    Shape:
        mask: ``(Lq, Lk)``.

    Returns:
        The axes drawn on.

    Raises:
        ValueError: if ``mask`` is not 2-D.
    """
    if torch.as_tensor(mask).ndim != 2:
        raise ValueError(
            f"mask must be 2-D, got shape {tuple(np.shape(mask))}"
        )
    allowed = _allowed(mask).astype(float)
    rows, cols = allowed.shape
    ax = get_axes(ax, (0.4 * cols + 1.5, 0.4 * rows + 1.0))
    cmap = ListedColormap([_BLOCKED, PALETTE[0]])
    ax.imshow(allowed, cmap=cmap, vmin=0, vmax=1, aspect="equal")
    _set_ticks(ax, x_labels, y_labels, allowed.shape)
    # Thin white lines between cells make single entries countable.
    ax.set_xticks(np.arange(-0.5, cols, 1), minor=True)
    ax.set_yticks(np.arange(-0.5, rows, 1), minor=True)
    ax.grid(which="minor", color="white", linewidth=1)
    ax.tick_params(which="minor", length=0)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    if legend:
        handles = [
            Patch(color=PALETTE[0], label="may attend"),
            Patch(color=_BLOCKED, label="blocked"),
        ]
        ax.legend(
            handles=handles,
            loc="upper left",
            bbox_to_anchor=(1.02, 1.0),
            fontsize=8,
        )
    if title:
        ax.set_title(title)
    return ax


@styled
def plot_masks(
    masks: Mapping[str, torch.Tensor | np.ndarray],
    *,
    axes: Sequence[Axes] | None = None,
) -> np.ndarray:
    """Draw several masks side by side, titled by their keys.

    Args:
        masks: maps a title to a 2-D mask (see :func:`plot_mask`).
        axes: one axes per mask; a new row of panels when ``None``.

    Returns:
        The array of axes drawn on.

    Raises:
        ValueError: if ``masks`` is empty or ``axes`` has the wrong length.
    """
    if not masks:
        raise ValueError("masks must hold at least one mask")
    if axes is None:
        cols = max(np.shape(m)[-1] for m in masks.values())
        size = (len(masks) * (0.35 * cols + 0.8) + 1.6, 0.35 * cols + 1.2)
        _, axes = plt.subplots(1, len(masks), figsize=size, squeeze=False)
        axes = axes[0]
    elif len(axes) != len(masks):
        raise ValueError(
            f"axes has {len(axes)} entries, expected {len(masks)}"
        )
    axes = np.asarray(axes, dtype=object)
    last = len(masks) - 1
    for i, (ax, (name, mask)) in enumerate(
        zip(axes, masks.items(), strict=True)
    ):
        plot_mask(mask, ax=ax, title=name, legend=i == last)
        if i:
            ax.set_ylabel("")
    return axes


@styled
def plot_scaling_study(
    d_k: Sequence[int],
    score_std: Mapping[str, Sequence[float]],
    top_weight: Mapping[str, Sequence[float]],
    grad_norm: Mapping[str, Sequence[float]],
    *,
    axes: Sequence[Axes] | None = None,
) -> np.ndarray:
    """Three panels on why attention scores are divided by ``sqrt(d_k)``.

    Each mapping takes a series name (e.g. ``"unscaled"``, ``"scaled"``) to
    one value per ``d_k``: the standard deviation of the scores, the mean
    largest softmax weight, and the mean norm of the softmax Jacobian (how
    much gradient flows back to the scores).

    Args:
        d_k: the key dimensions measured.
        score_std: standard deviation of ``q . k`` per series.
        top_weight: mean of the largest attention weight per series.
        grad_norm: mean Frobenius norm of the softmax Jacobian per series.
        axes: three axes; a new row of panels when ``None``.

    Returns:
        The array of three axes drawn on.

    Raises:
        ValueError: if a series does not have one value per ``d_k``.
    """
    d_k = list(d_k)
    panels = (
        (score_std, "std of scores", True, "spread of the scores"),
        (top_weight, "largest softmax weight", False, "saturation"),
        (grad_norm, "norm of softmax Jacobian", True, "gradient size"),
    )
    for series, label, _, _ in panels:
        for name, values in series.items():
            if len(values) != len(d_k):
                raise ValueError(
                    f"series {name!r} of {label!r} has {len(values)} "
                    f"values, expected one per d_k ({len(d_k)})"
                )
    if axes is None:
        _, axes = plt.subplots(1, 3, figsize=(11.0, 3.4), squeeze=False)
        axes = axes[0]
    elif len(axes) != 3:
        raise ValueError(f"axes has {len(axes)} entries, expected 3")
    axes = np.asarray(axes, dtype=object)
    for ax, (series, label, log_y, title) in zip(axes, panels, strict=True):
        for i, (name, values) in enumerate(series.items()):
            ax.plot(
                d_k,
                values,
                marker="o",
                ms=3,
                label=name,
                color=PALETTE[i % len(PALETTE)],
            )
        ax.set_xscale("log", base=2)
        if log_y:
            ax.set_yscale("log", base=2)
        ax.set_xlabel("$d_k$")
        ax.set_ylabel(label)
        ax.set_title(title)
    axes[0].legend()
    axes[0].figure.tight_layout()
    return axes


__all__ += ["plot_attention_offsets", "plot_head_split"]


@styled
def plot_head_split(
    seq_len: int,
    d_model: int,
    num_heads: int,
    *,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Diagram of how multi-head attention splits the features into heads.

    Draws a projected ``(T, d_model)`` matrix (queries, keys or values) as
    a grid, one cell per position and feature, coloured by the head that
    the feature belongs to: head ``h`` owns the ``head_dim`` consecutive
    features ``h * head_dim .. (h + 1) * head_dim - 1``.

    Args:
        seq_len: number of positions ``T`` (rows).
        d_model: number of features (columns), divisible by ``num_heads``.
        num_heads: number of heads ``H``.
        ax: axes to draw on; a new figure when ``None``.
        title: optional axes title.

    Returns:
        The axes drawn on.

    Raises:
        ValueError: if a size is not a positive integer or ``d_model`` is
            not divisible by ``num_heads``.
    """
    for name, value in (
        ("seq_len", seq_len),
        ("d_model", d_model),
        ("num_heads", num_heads),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}={value!r} must be a positive int")
    if d_model % num_heads:
        raise ValueError(
            f"d_model={d_model} is not divisible by num_heads={num_heads}"
        )
    head_dim = d_model // num_heads
    ax = get_axes(ax, (0.32 * d_model + 1.5, 0.32 * seq_len + 1.4))
    for h in range(num_heads):
        colour = PALETTE[h % len(PALETTE)]
        left = h * head_dim - 0.5
        ax.add_patch(
            plt.Rectangle(
                (left, -0.5),
                head_dim,
                seq_len,
                facecolor=colour,
                alpha=0.55,
                edgecolor="black",
                linewidth=1.5,
            )
        )
        ax.text(
            left + head_dim / 2,
            -0.7,
            f"head {h}\nfeatures {h * head_dim}-{(h + 1) * head_dim - 1}",
            ha="center",
            va="bottom",
            fontsize=8,
        )
    # Thin lines between cells: one cell is one number.
    for c in range(1, d_model):
        ax.axvline(c - 0.5, color="white", linewidth=0.6)
    for r in range(1, seq_len):
        ax.axhline(r - 0.5, color="white", linewidth=0.6)
    ax.set_xlim(-0.5, d_model - 0.5)
    ax.set_ylim(seq_len - 0.5, -0.5)
    ax.set_aspect("equal")
    ax.set_xticks(range(0, d_model, head_dim))
    ax.set_yticks(range(seq_len))
    ax.grid(False)
    ax.set_xlabel(f"feature (d_model = {d_model}, head_dim = {head_dim})")
    ax.set_ylabel("position")
    if title:
        ax.set_title(title, pad=34)
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
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Mean attention weight of each head as a function of the key offset.

    For every head, averages the weight that query ``i`` gives key ``j``
    over all pairs with the same offset ``j - i`` (and over the batch):
    a head that always looks one position back shows a single peak at -1.

    Args:
        weights: self-attention weights, per head.
        circular: measure offsets modulo ``T`` (for sequences that wrap
            around), as the offsets ``-T // 2 .. T - T // 2 - 1``.
        titles: one legend label per head; ``"head h"`` when ``None``.
        ax: axes to draw on; a new figure when ``None``.
        title: optional axes title.

    Shape:
        weights: ``(H, T, T)`` or ``(B, H, T, T)``.

    Returns:
        The axes drawn on.

    Raises:
        ValueError: if ``weights`` is not 3-D or 4-D with square matrices,
            or ``titles`` does not have one entry per head.
    """
    w = np.asarray(torch.as_tensor(weights).detach().cpu(), dtype=float)
    if w.ndim == 4:
        w = w.mean(axis=0)
    if w.ndim != 3 or w.shape[1] != w.shape[2]:
        raise ValueError(
            f"weights must be (H, T, T) or (B, H, T, T), got shape "
            f"{tuple(np.shape(weights))}"
        )
    heads = w.shape[0]
    if titles is not None and len(titles) != heads:
        raise ValueError(f"titles has {len(titles)} entries, expected {heads}")
    offsets, profile = _offset_profile(w, circular)
    ax = get_axes(ax, (6.0, 3.2))
    width = 0.8 / heads
    for h in range(heads):
        ax.bar(
            offsets + (h - (heads - 1) / 2) * width,
            profile[h],
            width=width,
            color=PALETTE[h % len(PALETTE)],
            label=titles[h] if titles is not None else f"head {h}",
        )
    ax.set_xticks(offsets)
    what = "(j - i) mod T" if circular else "j - i"
    ax.set_xlabel(f"key offset {what}")
    ax.set_ylabel("mean attention weight")
    ax.set_ylim(0.0, 1.0)
    ax.legend()
    if title:
        ax.set_title(title)
    return ax
