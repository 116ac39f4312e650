"""The house style every figure of the book is drawn in.

Plot helpers never touch matplotlib's global state: they run inside
:func:`styled`, which applies :data:`HOUSE_RC` for the duration of one call,
and they draw on the axes they are given (or on new ones) and return them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes

__all__ = ["HOUSE_RC", "PALETTE", "get_axes", "styled"]

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

#: Matplotlib settings applied while a plot helper runs.
HOUSE_RC: dict[str, Any] = {
    "figure.figsize": (6.0, 3.6),
    "figure.dpi": 110,
    "savefig.dpi": 110,
    "savefig.bbox": "tight",
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.prop_cycle": mpl.cycler(color=list(PALETTE)),
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
            with mpl.rc_context(HOUSE_RC):
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
    return ax


def as_array(values: object, name: str, ndim: int | None = None) -> np.ndarray:
    """Return a tensor, array or sequence as a float NumPy array.

    Args:
        values: what to convert (a tensor is detached and moved to the CPU).
        name: the argument's name, for the error message.
        ndim: the number of dimensions required, or ``None`` for any.

    Raises:
        ValueError: if ``ndim`` is given and the array has another.
    """
    if isinstance(values, torch.Tensor):
        values = values.detach().cpu().numpy()
    array = np.asarray(values, dtype=float)
    if ndim is not None and array.ndim != ndim:
        raise ValueError(
            f"{name} must be {ndim}-D, got shape {tuple(array.shape)}"
        )
    return array


def check_curves(
    x: np.ndarray, curves: Mapping[Any, object], name: str
) -> dict[Any, np.ndarray]:
    """Return each curve of ``curves`` as a 1-D array, one value per ``x``.

    Args:
        x: the 1-D x values shared by the curves.
        curves: maps a label to its values.
        name: the argument's name, for error messages.

    Raises:
        ValueError: if ``curves`` is empty, or a curve is not 1-D or has
            another length than ``x``.
    """
    if not curves:
        raise ValueError(f"{name} must hold at least one curve")
    out = {}
    for label, values in curves.items():
        y = as_array(values, f"{name}[{label!r}]", 1)
        if y.shape != x.shape:
            raise ValueError(
                f"{name}[{label!r}] has {y.size} values, expected {x.size} "
                f"(one per x value)"
            )
        out[label] = y
    return out
