"""Recurrent networks: cells, multi-layer RNNs and the encoder-decoder.

Batch-first throughout, with PyTorch's gate order and parameter names, so
that every module can copy its PyTorch twin with ``from_torch``.
"""

from .cells import *  # noqa: F403
from .cells import __all__ as _cells_all
from .recurrent import *  # noqa: F403
from .recurrent import __all__ as _recurrent_all
from .seq2seq import *  # noqa: F403
from .seq2seq import __all__ as _seq2seq_all

__all__ = [*_cells_all, *_recurrent_all, *_seq2seq_all]
