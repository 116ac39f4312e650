"""Every figure and diagram the book shows, drawn by code, by kind.

:mod:`~transformer_book.plotting.curves` (line plots, bars, a scatter),
:mod:`~transformer_book.plotting.heatmaps` (matrices, attention, masks) and
:mod:`~transformer_book.plotting.diagrams` (teaching diagrams). Helpers take
an optional ``ax`` (a new figure when ``None``), draw in the house style
without touching matplotlib's global state, and return the axes.
"""

from . import curves, diagrams, heatmaps
from ._style import HOUSE_RC, PALETTE, get_axes, styled, subplots
from .curves import *  # noqa: F403
from .diagrams import *  # noqa: F403
from .heatmaps import *  # noqa: F403

__all__ = ["HOUSE_RC", "PALETTE", "get_axes", "styled", "subplots",
           *curves.__all__, *diagrams.__all__, *heatmaps.__all__]
