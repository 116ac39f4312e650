"""Whole models, each a frozen config and an ``nn.Module``: ``gpt``,
``seq2seq``, ``encoder`` and ``vit``; every name is importable from here."""

from . import encoder, gpt, seq2seq, vit
from .encoder import EncoderConfig, TransformerEncoderModel
from .gpt import GPT, GPTConfig
from .seq2seq import Seq2SeqTransformer, Seq2SeqTransformerConfig
from .vit import ViT, ViTConfig

__all__ = ["GPT", "EncoderConfig", "GPTConfig", "Seq2SeqTransformer",
           "Seq2SeqTransformerConfig", "TransformerEncoderModel", "ViT",
           "ViTConfig", "encoder", "gpt", "seq2seq", "vit"]
