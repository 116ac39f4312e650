"""Character, word and byte-pair-encoding tokenizers with one interface.

Every tokenizer derives from the abstract base class :class:`Tokenizer`
(in ``base``): ``encode``/``decode``, ``vocab_size``, ``id_to_token`` and
``token_to_id``, ``train`` and JSON ``save``/``load``. Ids 0, 1 and 2 are
always ``<pad>``, ``<bos>`` and ``<eos>``.

**Unknown symbols.**

* :class:`CharTokenizer` (``char``) keeps one id per character seen in
  training and reserves 256 byte ids: a character it never saw is written
  as its UTF-8 bytes (*byte fallback*), so ``decode(encode(s)) == s`` for
  every string.
* :class:`WordTokenizer` (``word``) splits text into words and punctuation
  marks and maps every word outside its vocabulary to ``<unk>``. It is
  lossy by design: ``decode`` joins tokens with single spaces.
* :class:`BPETokenizer` (``bpe``) is a byte-level BPE (Sennrich et al.,
  2016, as in GPT-2, Radford et al., 2019): its base alphabet is the 256
  byte values, so it is lossless on any string, including characters it
  never saw in training.
"""

from .._checks import check_token_ids
from .base import (
    BOS,
    EOS,
    PAD,
    SPECIAL_TOKENS,
    UNK,
    Tokenizer,
    load_tokenizer,
)
from .bpe import PRETOKENIZE_PATTERN, BPETokenizer, pretokenize
from .char import CharTokenizer
from .word import WORD_PATTERN, WordTokenizer

__all__ = [
    "BOS",
    "EOS",
    "PAD",
    "PRETOKENIZE_PATTERN",
    "SPECIAL_TOKENS",
    "UNK",
    "WORD_PATTERN",
    "BPETokenizer",
    "CharTokenizer",
    "Tokenizer",
    "WordTokenizer",
    "check_token_ids",
    "load_tokenizer",
    "pretokenize",
]
