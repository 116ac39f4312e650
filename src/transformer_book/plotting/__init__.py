"""Every figure and diagram the book shows, drawn by code, by kind.

- :mod:`~transformer_book.plotting.curves`: :func:`plot_curves`, the one
  line-plot helper, and two other x-y charts (a bar chart of attention by
  offset, a scatter of word vectors);
- :mod:`~transformer_book.plotting.heatmaps`: :func:`plot_heatmap` and
  :func:`plot_heatmaps`, with attention and mask plots as thin wrappers;
- :mod:`~transformer_book.plotting.diagrams`: teaching diagrams (recurrent
  cells, attention's data flow, heads, cross-attention, tokenization).

Helpers take an optional ``ax`` (a new figure when ``None``), draw in the
house style without touching matplotlib's global state, and return the
axes. Titles and labels that belong to one page are passed by the page.
"""

from ._style import HOUSE_RC, PALETTE, get_axes, styled, subplots
from .curves import *  # noqa: F403
from .curves import __all__ as _curves_all
from .diagrams import *  # noqa: F403
from .diagrams import __all__ as _diagrams_all
from .heatmaps import *  # noqa: F403
from .heatmaps import __all__ as _heatmaps_all

__all__ = [
    "HOUSE_RC",
    "PALETTE",
    "get_axes",
    "styled",
    "subplots",
    *_curves_all,
    *_diagrams_all,
    *_heatmaps_all,
]
