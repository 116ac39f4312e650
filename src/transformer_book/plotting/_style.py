"""The house style every figure is drawn in, and what the helpers share.

Helpers run inside :func:`styled` (which applies :data:`HOUSE_RC` for one
call only), draw on the axes they are given or on new ones, and return them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence, Sized
from typing import Any, TypeVar, cast

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import torch
from cycler import cycler
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from .._checks import check_choice, check_int
from .._checks import check_divisible as _divisible

#: Colours in the order plots use them (colour-blind safe, Okabe-Ito).
PALETTE: tuple[str, ...] = (
    "#0072B2", "#E69F00", "#009E73", "#D55E00",
    "#CC79A7", "#56B4E9", "#F0E442", "#000000")

#: Markers, cycled with :data:`DASHES` so coinciding curves stay apart.
MARKERS: tuple[str, ...] = ("o", "s", "^", "D", "v", "P", "X", "*")

#: Line styles, cycled with :data:`MARKERS`.
DASHES: tuple[str | tuple[int, tuple[int, ...]], ...] = (
    "-", "--", "-.", ":", (0, (6, 2, 1, 2, 1, 2)), (0, (1, 1)))

#: Where :func:`place_legend` can put a legend.
LEGEND_PLACES: tuple[str, ...] = ("best", "outside", "below", "above", "none")

#: Matplotlib settings while a helper runs: 150 dpi, about 7 inches wide,
#: constrained layout so colour bars and outside legends never overlap.
HOUSE_RC: dict[str, Any] = {
    "figure.figsize": (6.4, 3.6), "figure.constrained_layout.use": True,
    "figure.dpi": 150, "savefig.dpi": 150, "savefig.bbox": "tight",
    "font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10,
    "legend.fontsize": 9, "xtick.labelsize": 9, "ytick.labelsize": 9,
    "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True,
    "grid.alpha": 0.3, "legend.frameon": False, "image.cmap": "viridis",
    "axes.prop_cycle": cycler(color=list(PALETTE)), "lines.linewidth": 1.8}

F = TypeVar("F", bound=Callable[..., Any])


def styled(fn: F) -> F:
    """Decorate a plot helper so that it draws in the house style."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        interactive = mpl.is_interactive()
        try:
            with mpl.rc_context(cast(Any, HOUSE_RC)):
                try:
                    return fn(*args, **kwargs)
                finally:
                    # A notebook's first figure starts the inline backend,
                    # which turns interactive mode on: keep it on, or no
                    # later figure of the notebook would be shown.
                    interactive = mpl.is_interactive()
        finally:
            mpl.interactive(interactive)

    return wrapper  # type: ignore[return-value]


def get_axes(ax: Axes | None,
             figsize: tuple[float, float] | None = None) -> Axes:
    """Return ``ax`` (its figure raised to 150 dpi), or new axes of
    ``figsize`` inches."""
    if ax is None:
        return plt.subplots(figsize=figsize)[1]
    if not isinstance(ax, Axes):
        raise TypeError("ax must be matplotlib Axes or None, got "
                        f"{type(ax).__name__}")
    figure = getattr(ax.figure, "figure", ax.figure)  # the root figure
    if isinstance(figure, Figure) and figure.dpi < HOUSE_RC["figure.dpi"]:
        figure.set_dpi(HOUSE_RC["figure.dpi"])
    return ax


@styled
def subplots(nrows: int = 1, ncols: int = 1, *,
             figsize: tuple[float, float] | None = None,
             **kwargs: Any) -> tuple[Figure, np.ndarray]:
    """Make a figure and a 1-D array of its panels (row by row).

    Args:
        figsize: size in inches; by default 6.8 wide and 2.6 per row.
        **kwargs: passed to ``matplotlib.pyplot.subplots``.
    """
    nrows = check_int("nrows", nrows)
    ncols = check_int("ncols", ncols)
    if figsize is None:
        figsize = (6.8, 2.6 * nrows + (0.4 if nrows == 1 else 0.0))
    fig, axes = plt.subplots(nrows, ncols, figsize=figsize, squeeze=False,
                             **kwargs)
    return fig, axes.ravel()


def check_nonempty(name: str, values: Sized) -> None:
    """Refuse an empty collection, naming it."""
    if len(values) == 0:
        raise ValueError(f"{name} is empty")


def check_len(name: str, values: Sized, size: int) -> None:
    """Refuse a collection that does not have ``size`` entries."""
    count = 1 if isinstance(values, str) else len(values)
    if isinstance(values, str) or count != size:
        raise ValueError(f"{name} has {count} entries, expected {size}")


def check_divisible(name: str, value: Any, by_name: str, by: Any) -> int:
    """Return ``value // by`` for positive ints, refusing a remainder."""
    value, by = check_int(name, value), check_int(by_name, by)
    _divisible(name, value, by_name, by)
    return value // by


def as_array(values: object, name: str,
             ndim: int | tuple[int, ...] | None = None) -> np.ndarray:
    """Return a tensor (any dtype), array or sequence as a float64 array.

    ``ndim`` is the number (or numbers) of dimensions allowed; NaN and
    infinite values are refused; errors name the argument ``name``.
    """
    if isinstance(values, torch.Tensor):
        array = values.detach().cpu().to(torch.float64).numpy()
    else:
        try:
            array = np.asarray(values, dtype=float)
        except (TypeError, ValueError):
            raise TypeError(f"{name} must be numbers of one rectangular "
                            f"shape, got {type(values).__name__}") from None
    allowed = (ndim,) if isinstance(ndim, int) else ndim
    if allowed and array.ndim not in allowed:
        wanted = " or ".join(f"{d}-D" for d in allowed)
        raise ValueError(f"{name} must be {wanted}, got shape "
                         f"{tuple(array.shape)}")
    check_nonempty(name, array.ravel())
    if not np.isfinite(array).all():
        raise ValueError(f"{name} holds NaN or infinite values")
    return array


def check_labels(labels: Sequence[object] | None, size: int,
                 name: str) -> list[str] | None:
    """Return ``labels`` as strings, one per entry (``None`` passes)."""
    if labels is None:
        return None
    check_len(name, labels, size)
    return [str(label) for label in labels]


def finish_chart(ax: Axes, xlabel: str, ylabel: str, title: str | None,
                 legend: str | None = None,
                 legend_title: str | None = None) -> Axes:
    """Place the legend, name the axes, add the title; return the axes."""
    place_legend(ax, legend, title=legend_title)
    ax.set(xlabel=xlabel, ylabel=ylabel)
    if title:
        ax.set_title(title)
    return ax


def place_legend(ax: Axes, where: str | None, *, title: str | None = None,
                 **kwargs: Any) -> None:
    """Add a legend to ``ax`` at one of :data:`LEGEND_PLACES`."""
    where = check_choice("legend", where or "none", LEGEND_PLACES)
    if where == "none":
        return
    places: dict[str, dict[str, Any]] = {
        "best": {"loc": "best"},
        "outside": {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0)},
        "below": {"loc": "upper center", "bbox_to_anchor": (0.5, -0.2)},
        "above": {"loc": "lower center", "bbox_to_anchor": (0.5, 1.02)}}
    place = places[where]
    if where in ("below", "above"):  # as many columns as fit the width
        labels = ax.get_legend_handles_labels()[1]
        longest = max((len(label) for label in labels), default=1)
        place["ncol"] = max(1, min(len(labels), 4, 64 // (longest + 8)))
    ax.legend(title=title, **place, **kwargs)
