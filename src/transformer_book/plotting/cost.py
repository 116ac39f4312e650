"""Figures of the chapter on the cost of attention.

One helper draws any cost (FLOPs, seconds, bytes) against sequence length
on log-log axes, with dashed reference lines of chosen slopes so that a
reader can see at a glance which curves grow linearly and which
quadratically.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import cycle

import numpy as np
from matplotlib.axes import Axes
from matplotlib.ticker import ScalarFormatter

from ._style import PALETTE, as_array, check_curves, get_axes, styled

__all__ = ["plot_cost_vs_length"]

_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def _check_positive(values: np.ndarray, name: str) -> None:
    if values.size == 0 or not (values > 0).all():
        raise ValueError(f"{name} must be non-empty and positive (log axes)")


@styled
def plot_cost_vs_length(
    lengths: Sequence[int] | np.ndarray,
    costs: Mapping[str, Sequence[float] | np.ndarray],
    *,
    ylabel: str,
    reference_slopes: Sequence[float] = (1.0, 2.0),
    crossover: float | None = None,
    crossover_label: str = "crossover",
    xlabel: str = "sequence length $N$",
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Plot costs against sequence length on log-log axes.

    Each reference line ``y = c * N**p`` is drawn dashed in grey and passes
    through the geometric mean of the curves' first values, so its slope
    can be compared with the curves' slopes directly.

    Args:
        lengths: sequence lengths, shape ``(N,)``, positive.
        costs: maps a label to its cost at each length (any unit: FLOPs,
            seconds, bytes), positive.
        ylabel: label of the y axis, with the unit.
        reference_slopes: slopes ``p`` of the reference lines; empty for
            none.
        crossover: a length to mark with a vertical dotted line.
        crossover_label: legend entry of that line.
        xlabel: label of the x axis.
        ax: axes to draw on; a new figure when ``None``.
        title: optional axes title.

    Returns:
        The axes drawn on.

    Raises:
        ValueError: if ``costs`` is empty, a curve has the wrong length or
            a length or cost is not positive.
    """
    x = as_array(lengths, "lengths", 1)
    _check_positive(x, "lengths")
    curves = check_curves(x, costs, "costs")
    for label, y in curves.items():
        _check_positive(y, f"costs[{label!r}]")
    ax = get_axes(ax)
    # Explicit colours: axes made outside the house style (plt.subplots in
    # a page) would otherwise cycle matplotlib's default colours.
    for (label, y), color, marker in zip(
        curves.items(), cycle(PALETTE), cycle(_MARKERS)
    ):
        ax.plot(x, y, color=color, marker=marker, label=str(label))
    anchor = float(np.exp(np.mean([np.log(y[0]) for y in curves.values()])))
    grid = np.geomspace(x.min(), x.max(), 50)
    for slope, dash in zip(reference_slopes, cycle(("--", "-.", ":"))):
        ax.plot(
            grid,
            anchor * (grid / x.min()) ** slope,
            color="#888888",
            ls=dash,
            lw=1.0,
            label=f"slope {slope:g}",
        )
    if crossover is not None:
        ax.axvline(
            crossover, color="#444444", ls=":", lw=1.2, label=crossover_label
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title)
    return ax
