"""Figures of the tokens-and-embeddings chapter.

Which rows of an embedding table one optimiser step changed, how three
tokenizers cut the same text, held-out perplexity of n-gram models against
their order, word2vec training losses and a 2-D projection of word vectors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.patches import FancyBboxPatch

from ._style import PALETTE, get_axes, styled

__all__ = [
    "plot_embedding_update",
    "plot_perplexity_vs_order",
    "plot_tokenization",
    "plot_word2vec_losses",
    "plot_word_vectors",
]


def _as_array(
    values: Sequence[float] | np.ndarray | torch.Tensor, name: str
) -> np.ndarray:
    if isinstance(values, torch.Tensor):
        values = values.detach().cpu().numpy()
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    return arr


@styled
def plot_embedding_update(
    before: torch.Tensor | np.ndarray,
    after: torch.Tensor | np.ndarray,
    *,
    looked_up: Sequence[int] = (),
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Show how much each entry of an embedding table moved in one step.

    Draws :math:`|W_\\text{after} - W_\\text{before}|` as a heatmap, one row
    per token id, and marks the rows that were looked up.

    Args:
        before: the weight matrix before the step, shape ``(V, D)``.
        after: the weight matrix after the step, shape ``(V, D)``.
        looked_up: token ids used in the forward pass, marked with an
            arrow.
        ax: axes to draw on; a new figure when ``None``.
        title: optional axes title.

    Returns:
        The axes drawn on.

    Raises:
        ValueError: if the two matrices are not 2-D of the same shape.
    """
    b = _as_array(before, "before")
    a = _as_array(after, "after")
    if b.ndim != 2 or b.shape != a.shape:
        raise ValueError(
            "before and after must be 2-D of the same shape, got "
            f"{b.shape} and {a.shape}"
        )
    delta = np.abs(a - b)
    V, D = delta.shape
    ax = get_axes(ax, figsize=(3.6, 0.45 * V + 1.0))
    image = ax.imshow(delta, cmap="viridis", aspect="auto", vmin=0.0)
    ax.figure.colorbar(image, ax=ax, label="|change|", shrink=0.8)
    ax.set_xticks(range(D))
    ax.set_yticks(range(V))
    ax.set_xlabel("embedding dimension")
    ax.set_ylabel("token id (row)")
    ax.grid(False)
    for row in sorted(set(looked_up)):
        ax.annotate(
            "looked up",
            xy=(D - 0.5, row),
            xytext=(D + 0.1, row),
            va="center",
            fontsize=8,
            annotation_clip=False,
        )
    if title:
        ax.set_title(title)
    return ax


def _visible(token: str) -> str:
    """Make spaces and line breaks visible inside a token box."""
    return (
        token.replace(" ", "\u2423").replace("\n", "\u21b5").replace(
            "\t", "\u21e5"
        )
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


@styled
def plot_perplexity_vs_order(
    orders: Sequence[int],
    perplexities: Mapping[str, Sequence[float] | np.ndarray],
    *,
    ax: Axes | None = None,
    ylabel: str = "held-out perplexity",
    title: str | None = None,
) -> Axes:
    """Plot held-out perplexity against the n-gram order, one line each.

    Args:
        orders: the orders ``n``, shape ``(N,)``.
        perplexities: maps a label (e.g. a smoothing method) to the
            perplexity at each order, shape ``(N,)``, positive.
        ax: axes to draw on; a new figure when ``None``.
        ylabel: label of the (logarithmic) y axis.
        title: optional axes title.

    Returns:
        The axes drawn on.

    Raises:
        ValueError: if ``perplexities`` is empty or a curve has the wrong
            length or a non-positive value.
    """
    x = _as_array(orders, "orders")
    if not perplexities:
        raise ValueError("perplexities is empty")
    ax = get_axes(ax)
    markers = ("o", "s", "^", "D", "v")
    for i, (label, values) in enumerate(perplexities.items()):
        y = _as_array(values, f"perplexities[{label!r}]")
        if y.shape != x.shape:
            raise ValueError(
                f"perplexities[{label!r}] has {y.size} values for "
                f"{x.size} orders"
            )
        if (y <= 0).any():
            raise ValueError(f"perplexities[{label!r}] must be positive")
        ax.semilogy(x, y, marker=markers[i % len(markers)], label=str(label))
    ax.set_xticks(x)
    ax.set_xlabel("order $n$ (context of $n - 1$ tokens)")
    ax.set_ylabel(ylabel)
    ax.legend()
    if title:
        ax.set_title(title)
    return ax


@styled
def plot_word2vec_losses(
    losses: Mapping[str, Sequence[float] | np.ndarray],
    *,
    steps_per_epoch: Mapping[str, int] | None = None,
    smooth: int = 10,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Plot the training loss of word2vec models against epochs.

    Args:
        losses: maps a model name to its loss at every optimiser step.
        steps_per_epoch: maps a model name to its steps per epoch, so that
            models with different batch counts share an epoch axis; steps
            are plotted when ``None``.
        smooth: width of the moving average drawn (1 for none).
        ax: axes to draw on; a new figure when ``None``.
        title: optional axes title.

    Returns:
        The axes drawn on.

    Raises:
        ValueError: if ``losses`` is empty or ``smooth`` is below 1.
    """
    if not losses:
        raise ValueError("losses is empty")
    if smooth < 1:
        raise ValueError(f"smooth={smooth} must be >= 1")
    ax = get_axes(ax)
    for label, values in losses.items():
        y = _as_array(values, f"losses[{label!r}]")
        width = min(smooth, y.size)
        y = np.convolve(y, np.ones(width) / width, mode="valid")
        x = np.arange(y.size) + width
        if steps_per_epoch is not None:
            x = x / steps_per_epoch[label]
        ax.plot(x, y, label=str(label))
    ax.set_xlabel("epoch" if steps_per_epoch is not None else "step")
    ax.set_ylabel("negative-sampling loss")
    ax.legend()
    if title:
        ax.set_title(title)
    return ax


@styled
def plot_word_vectors(
    vectors: torch.Tensor | np.ndarray,
    labels: Sequence[str],
    *,
    groups: Sequence[int] | None = None,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Scatter word vectors projected on their first two principal axes.

    The vectors are scaled to unit length (cosine similarity is what
    word2vec's neighbours use), centred, and projected on the two
    directions of largest variance.

    Args:
        vectors: one vector per word, shape ``(N, D)`` with ``N >= 2``.
        labels: the words, length ``N``.
        groups: an optional group index per word, used for the colour.
        ax: axes to draw on; a new figure when ``None``.
        title: optional axes title.

    Returns:
        The axes drawn on.

    Raises:
        ValueError: if shapes and lengths disagree.
    """
    v = _as_array(vectors, "vectors")
    if v.ndim != 2 or v.shape[0] < 2:
        raise ValueError(f"vectors must have shape (N >= 2, D), got {v.shape}")
    if len(labels) != v.shape[0]:
        raise ValueError(
            f"labels has {len(labels)} entries for {v.shape[0]} vectors"
        )
    if groups is not None and len(groups) != v.shape[0]:
        raise ValueError(
            f"groups has {len(groups)} entries for {v.shape[0]} vectors"
        )
    v = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    v = v - v.mean(axis=0)
    _, _, vt = np.linalg.svd(v, full_matrices=False)
    xy = v @ vt[:2].T  # (N, D) @ (D, 2) -> (N, 2)
    ax = get_axes(ax, figsize=(6.0, 4.5))
    colours = [
        PALETTE[(g if groups is not None else 0) % len(PALETTE)]
        for g in (groups if groups is not None else [0] * len(labels))
    ]
    ax.scatter(xy[:, 0], xy[:, 1], c=colours, s=18, zorder=3)
    for (x, y), label in zip(xy, labels, strict=True):
        ax.annotate(
            label, (x, y), xytext=(3, 3), textcoords="offset points",
            fontsize=8,
        )
    ax.set_xlabel("principal axis 1")
    ax.set_ylabel("principal axis 2")
    if title:
        ax.set_title(title)
    return ax
