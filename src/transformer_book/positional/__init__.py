"""Position information: absolute tables, rotary embeddings, score biases.

One module per kind (``absolute``, ``rotary``, ``biases``, ``sincos2d``);
every name is importable from ``transformer_book.positional``.
"""

from . import absolute, biases, rotary, sincos2d
from .absolute import *  # noqa: F403
from .biases import *  # noqa: F403
from .rotary import *  # noqa: F403
from .sincos2d import *  # noqa: F403

__all__ = absolute.__all__ + rotary.__all__
__all__ += biases.__all__ + sincos2d.__all__
