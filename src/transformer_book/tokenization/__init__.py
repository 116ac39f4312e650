"""Character, word and byte-level BPE tokenizers behind one interface.

Ids 0, 1 and 2 are always ``<pad>``, ``<bos>`` and ``<eos>``.
"""

from .base import BOS, EOS, PAD, SPECIAL_TOKENS, UNK, Tokenizer, load_tokenizer
from .bpe import PRETOKENIZE_PATTERN, BPETokenizer, pretokenize
from .char import CharTokenizer
from .word import WORD_PATTERN, WordTokenizer

__all__ = ["BOS", "EOS", "PAD", "PRETOKENIZE_PATTERN", "SPECIAL_TOKENS", "UNK",
           "WORD_PATTERN", "BPETokenizer", "CharTokenizer", "Tokenizer",
           "WordTokenizer", "load_tokenizer", "pretokenize"]
