"""Whole transformer models, each a frozen config and an ``nn.Module``.

The three families of Part III, built from :mod:`transformer_book.layers`
and :mod:`transformer_book.heads`:

- ``gpt``: :class:`.GPTConfig` and :class:`.GPT`, a decoder-only language
  model (GPT-2 style: learned or rotary positions, tied LM head);
- ``seq2seq``: :class:`.Seq2SeqTransformerConfig` and
  :class:`.Seq2SeqTransformer`, the encoder-decoder transformer of Vaswani
  et al. (2017) with its embeddings, positions, masks and generator;
- ``encoder``: :class:`.EncoderConfig` and :class:`.TransformerEncoderModel`,
  a BERT-style encoder with a classification, token or MLM head;
- ``vit``: :class:`.ViTConfig` and :class:`.ViT`, the Vision Transformer.

Every name is importable from ``transformer_book.models`` itself. A token
id outside the vocabulary, or a sequence longer than ``max_seq_len``, is a
``ValueError`` that names the value and the limit.
"""

from . import encoder, gpt, seq2seq, vit
from .encoder import EncoderConfig, TransformerEncoderModel
from .gpt import GPT, GPTConfig
from .seq2seq import Seq2SeqTransformer, Seq2SeqTransformerConfig
from .vit import ViT, ViTConfig

__all__ = [
    "GPT",
    "EncoderConfig",
    "GPTConfig",
    "Seq2SeqTransformer",
    "Seq2SeqTransformerConfig",
    "TransformerEncoderModel",
    "ViT",
    "ViTConfig",
    "encoder",
    "gpt",
    "seq2seq",
    "vit",
]
