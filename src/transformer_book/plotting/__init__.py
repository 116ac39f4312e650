"""Every figure and diagram the book shows, drawn by code.

Helpers take an optional ``ax`` (a new figure when ``None``), draw in the
house style without touching matplotlib's global state, and return the axes.
"""

from ._style import HOUSE_RC, PALETTE, get_axes, styled
from .attention import *  # noqa: F403
from .attention import __all__ as _attention_all
from .basics import *  # noqa: F403
from .basics import __all__ as _basics_all
from .cost import *  # noqa: F403
from .cost import __all__ as _cost_all
from .positional import *  # noqa: F403
from .positional import __all__ as _positional_all
from .rnn import *  # noqa: F403
from .rnn import __all__ as _rnn_all
from .seq2seq import *  # noqa: F403
from .seq2seq import __all__ as _seq2seq_all
from .sequences import *  # noqa: F403
from .sequences import __all__ as _sequences_all

__all__ = [
    "HOUSE_RC",
    "PALETTE",
    "get_axes",
    "styled",
    *_attention_all,
    *_basics_all,
    *_cost_all,
    *_positional_all,
    *_rnn_all,
    *_seq2seq_all,
    *_sequences_all,
]
