"""Position information for attention: absolute, rotary and relative.

Self-attention treats its input as a set: permuting the tokens permutes the
outputs the same way. This package holds the ways transformers tell it where
each token is:

- **absolute encodings added to the input**: the fixed sinusoidal table of
  Vaswani et al. (2017), :func:`sinusoidal_encoding` and
  :class:`SinusoidalPositionalEncoding`, and a learned table,
  :class:`LearnedPositionalEmbedding` (GPT-2, BERT);
- **rotary embeddings** (RoPE, Su et al., 2021), which rotate queries and
  keys by an angle proportional to their position so that their dot product
  depends only on the offset: :func:`apply_rotary`,
  :class:`RotaryEmbedding`;
- **biases on the attention scores**: ALiBi (Press et al., 2022),
  :func:`alibi_slopes` and :func:`alibi_bias`, and T5's learned bucketed
  relative bias (Raffel et al., 2020), :func:`relative_position_bucket`
  and :class:`RelativePositionBias`. Both return float biases of shape
  ``(num_heads, q_len, kv_len)`` that :mod:`transformer_book.attention`
  accepts as ``attn_mask``.

One module per kind: ``absolute``, ``rotary`` and ``biases``; every name is
importable from ``transformer_book.positional``.
"""

from .absolute import (
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
    sinusoidal_encoding,
    sinusoidal_frequencies,
    sinusoidal_shift_matrix,
)
from .biases import (
    RelativePositionBias,
    alibi_bias,
    alibi_slopes,
    relative_position_bucket,
)
from .rotary import (
    RotaryEmbedding,
    apply_rotary,
    rotary_frequencies,
    rotary_matrix,
)

__all__ = [
    "LearnedPositionalEmbedding",
    "RelativePositionBias",
    "RotaryEmbedding",
    "SinusoidalPositionalEncoding",
    "alibi_bias",
    "alibi_slopes",
    "apply_rotary",
    "relative_position_bucket",
    "rotary_frequencies",
    "rotary_matrix",
    "sinusoidal_encoding",
    "sinusoidal_frequencies",
    "sinusoidal_shift_matrix",
]
