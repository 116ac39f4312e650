"""The house style every figure of the book is drawn in.

Plot helpers never touch matplotlib's global state: they run inside
:func:`styled`, which applies :data:`HOUSE_RC` for the duration of one call,
and they draw on the axes they are given (or on new ones) and return them.
This module also holds what every helper shares: :func:`as_array` (tensors
of any dtype, arrays and lists to a checked float array), the marker and
dash cycles, and the legend placements.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import torch
from cycler import cycler
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from .._checks import check_choice, check_int

__all__ = [
    "DASHES",
    "HOUSE_RC",
    "LEGEND_PLACES",
    "MARKERS",
    "PALETTE",
    "as_array",
    "get_axes",
    "styled",
    "subplots",
]

#: Colours in the order plots use them (colour-blind safe, Okabe-Ito).
PALETTE: tuple[str, ...] = (
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#D55E00",
    "#CC79A7",
    "#56B4E9",
    "#F0E442",
    "#000000",
)

#: Markers, cycled with :data:`DASHES`, so curves that coincide stay
#: distinguishable without colour.
MARKERS: tuple[str, ...] = ("o", "s", "^", "D", "v", "P", "X", "*")

#: Line styles, cycled with :data:`MARKERS`.
DASHES: tuple[str | tuple[int, tuple[int, ...]], ...] = (
    "-",
    "--",
    "-.",
    ":",
    (0, (6, 2, 1, 2, 1, 2)),
    (0, (1, 1)),
)

#: Where :func:`place_legend` can put a legend: matplotlib's ``"best"``
#: spot inside the axes (it avoids the lines drawn), outside on the right,
#: below or above the axes, or ``"none"``.
LEGEND_PLACES: tuple[str, ...] = ("best", "outside", "below", "above", "none")

#: Matplotlib settings applied while a plot helper runs. Figures are made
#: at 150 dpi (crisp when the page scales them to the text column) and at
#: most about 7 inches wide, with constrained layout so that colour bars,
#: outside legends and titles never overlap the axes.
HOUSE_RC: dict[str, Any] = {
    "figure.figsize": (6.4, 3.6),
    "figure.dpi": 150,
    "savefig.dpi": 150,
    "savefig.bbox": "tight",
    "figure.constrained_layout.use": True,
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "legend.fontsize": 9,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.prop_cycle": cycler(color=list(PALETTE)),
    "legend.frameon": False,
    "image.cmap": "viridis",
    "lines.linewidth": 1.8,
}

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
                    # The first figure of a notebook starts IPython's inline
                    # backend, which switches interactive mode on. Leaving
                    # the context would switch it off again, and no later
                    # figure of the notebook would be shown: keep it.
                    interactive = mpl.is_interactive()
        finally:
            mpl.interactive(interactive)

    return wrapper  # type: ignore[return-value]


def get_axes(
    ax: Axes | None, figsize: tuple[float, float] | None = None
) -> Axes:
    """Return ``ax``, or the axes of a new figure when ``ax`` is ``None``.

    Axes of a figure made outside the house style (``plt.subplots`` in a
    page) get their figure raised to the house resolution, so that every
    figure a helper draws is crisp.

    Args:
        ax: axes to draw on, or ``None``.
        figsize: size of the new figure in inches (ignored with ``ax``).

    Raises:
        TypeError: if ``ax`` is neither ``None`` nor matplotlib axes.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
        return ax
    if not isinstance(ax, Axes):
        raise TypeError(
            f"ax must be matplotlib Axes or None, got {type(ax).__name__}"
        )
    figure = getattr(ax.figure, "figure", ax.figure)  # the root figure
    if isinstance(figure, Figure) and figure.dpi < HOUSE_RC["figure.dpi"]:
        figure.set_dpi(HOUSE_RC["figure.dpi"])
    return ax


@styled
def subplots(
    nrows: int = 1,
    ncols: int = 1,
    *,
    figsize: tuple[float, float] | None = None,
    **kwargs: Any,
) -> tuple[Figure, np.ndarray]:
    """Make a figure of several panels in the house style.

    Use it instead of ``plt.subplots`` for a multi-panel figure whose
    panels the helpers fill in: the figure gets the house resolution and
    constrained layout, and panels are sized for the text column (stacked
    panels stay readable; side-by-side panels share about 7 inches).

    Args:
        nrows: rows of panels.
        ncols: columns of panels.
        figsize: size in inches; by default 6.8 wide and 2.6 per row.
        **kwargs: passed to ``matplotlib.pyplot.subplots`` (for
            example ``sharex=True``).

    Returns:
        The figure and a 1-D array of its axes, row by row.

    Raises:
        ValueError: if ``nrows`` or ``ncols`` is not positive.
    """
    nrows = check_int("nrows", nrows)
    ncols = check_int("ncols", ncols)
    if figsize is None:
        figsize = (6.8, 2.6 * nrows + (0.4 if nrows == 1 else 0.0))
    fig, axes = plt.subplots(
        nrows, ncols, figsize=figsize, squeeze=False, **kwargs
    )
    return fig, axes.ravel()


def as_array(
    values: object,
    name: str,
    ndim: int | tuple[int, ...] | None = None,
    *,
    finite: bool = True,
) -> np.ndarray:
    """Return a tensor, array or sequence as a float64 NumPy array.

    Tensors of any dtype (``bfloat16`` weights, integer or boolean masks)
    are detached, moved to the CPU and converted.

    Args:
        values: what to convert.
        name: the argument's name, for error messages.
        ndim: the number (or numbers) of dimensions allowed; ``None`` for
            any.
        finite: reject NaN and infinite values.

    Returns:
        The values as a float64 array.

    Raises:
        TypeError: if ``values`` are not numbers.
        ValueError: if ``values`` is empty, has another number of
            dimensions, or holds NaN or infinite values.
    """
    if isinstance(values, torch.Tensor):
        array = values.detach().cpu().to(torch.float64).numpy()
    else:
        try:
            array = np.asarray(values, dtype=float)
        except (TypeError, ValueError):
            raise TypeError(
                f"{name} must be numbers of one rectangular shape, got "
                f"{type(values).__name__}"
            ) from None
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if array.ndim not in allowed:
            wanted = " or ".join(f"{d}-D" for d in allowed)
            raise ValueError(
                f"{name} must be {wanted}, got shape {tuple(array.shape)}"
            )
    if array.size == 0:
        raise ValueError(f"{name} is empty")
    if finite and not np.isfinite(array).all():
        raise ValueError(f"{name} holds NaN or infinite values")
    return array


def check_labels(
    labels: Sequence[object] | None, size: int, name: str
) -> list[str] | None:
    """Return ``labels`` as strings, checking there is one per entry.

    Raises:
        ValueError: if ``labels`` does not have ``size`` entries.
    """
    if labels is None:
        return None
    if isinstance(labels, str) or len(labels) != size:
        count = 1 if isinstance(labels, str) else len(labels)
        raise ValueError(f"{name} has {count} labels, expected {size}")
    return [str(label) for label in labels]


def place_legend(
    ax: Axes, where: str | None, *, title: str | None = None, **kwargs: Any
) -> None:
    """Add a legend to ``ax`` at one of :data:`LEGEND_PLACES`.

    ``"best"`` lets matplotlib pick the spot inside the axes that covers
    the fewest drawn points; ``"outside"``, ``"below"`` and ``"above"``
    keep the legend off the data altogether (constrained layout makes room
    for it).

    Raises:
        ValueError: if ``where`` is not one of :data:`LEGEND_PLACES`.
    """
    where = check_choice("legend", where or "none", LEGEND_PLACES)
    if where == "none":
        return
    handles, labels = ax.get_legend_handles_labels()
    if "handles" in kwargs:
        labels = [h.get_label() for h in kwargs["handles"]]
    # Legends above or below: as many columns as fit the axes' width.
    longest = max((len(label) for label in labels), default=1)
    ncol = max(1, min(len(labels), 4, 64 // (longest + 8)))
    if where == "best":
        ax.legend(loc="best", title=title, **kwargs)
    elif where == "outside":
        ax.legend(
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            title=title,
            **kwargs,
        )
    else:
        ax.legend(
            loc="upper center" if where == "below" else "lower center",
            bbox_to_anchor=(0.5, -0.2) if where == "below" else (0.5, 1.02),
            ncol=ncol,
            title=title,
            **kwargs,
        )
