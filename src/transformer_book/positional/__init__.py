"""Position information: absolute tables, rotary embeddings, score biases
and 2-D sine-cosine positions, one module each, every name imported here."""

from . import absolute, biases, rotary, sincos2d
from .absolute import *  # noqa: F403
from .biases import *  # noqa: F403
from .rotary import *  # noqa: F403
from .sincos2d import *  # noqa: F403

__all__ = absolute.__all__ + biases.__all__ + rotary.__all__ + sincos2d.__all__
