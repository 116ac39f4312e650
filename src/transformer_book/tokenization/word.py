"""A word tokenizer: the lossy baseline, with ``<unk>`` for unseen words."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import ClassVar

from .._checks import check_bool, check_int
from .base import SPECIAL_TOKENS, UNK, Tokenizer, _check_text

__all__ = ["WORD_PATTERN", "WordTokenizer"]

#: A run of letters, digits and underscores, or one other symbol.
WORD_PATTERN = r"\w+|[^\w\s]"
_WORD_RE = re.compile(WORD_PATTERN)


class WordTokenizer(Tokenizer):
    """One token per word or punctuation mark, ``<unk>`` (id 3) for the
    rest; ``decode`` joins tokens with single spaces.

    Args:
        words: the vocabulary; ``None`` for an empty one (call ``train``).
        lowercase: lower-case text before splitting it.
    """

    special_tokens: ClassVar[tuple[str, ...]] = (*SPECIAL_TOKENS, UNK)
    unk_id: ClassVar[int] = 3
    _saved = {"words": list, "lowercase": bool}

    def __init__(self, words: Iterable[str] | None = None, *,
                 lowercase: bool = False) -> None:
        self.lowercase = check_bool("lowercase", lowercase)
        self._set_words(() if words is None else words)

    def _set_words(self, words: Iterable[str]) -> None:
        unique = list(dict.fromkeys(words))
        if isinstance(words, str) or not all(
                isinstance(w, str) and w for w in unique):
            raise TypeError(f"words must be a sequence of non-empty str, "
                            f"got {words!r:.60}")
        self._words = [w for w in unique if w not in self.special_tokens]
        n = len(self.special_tokens)
        self._word_to_id = {w: n + i for i, w in enumerate(self._words)}

    def split(self, text: str) -> list[str]:
        """The words of ``text`` as this tokenizer sees them."""
        text = _check_text(text)
        return _WORD_RE.findall(text.lower() if self.lowercase else text)

    def train(self, text: str, *, min_freq: int = 1,
              max_size: int | None = None) -> WordTokenizer:
        """Learn the vocabulary from ``text``, in place.

        Args:
            text: training text, not empty.
            min_freq: keep words seen at least this often.
            max_size: keep at most this many words, most frequent first
                (ties alphabetically); ``None`` for no limit.
        """
        counts = Counter(self.split(_check_text(text, train=True)))
        min_freq = check_int("min_freq", min_freq)
        if max_size is not None:
            max_size = check_int("max_size", max_size)
        if not counts:
            raise ValueError("text has no word to learn (only whitespace)")
        kept = [w for w, c in counts.items() if c >= min_freq]
        self._set_words(sorted(kept, key=lambda w: (-counts[w], w))[:max_size])
        return self

    @property
    def vocab_size(self) -> int:
        return len(self.special_tokens) + len(self._words)

    @property
    def words(self) -> list[str]:
        """The vocabulary (special tokens excluded), in id order."""
        return list(self._words)

    def is_known(self, word: str) -> bool:
        """Whether ``word`` is in the vocabulary."""
        return word in self._word_to_id

    def _id_to_token(self, token_id: int) -> str:
        return self._words[token_id - len(self.special_tokens)]

    def token_to_id(self, token: str) -> int:
        if token in self.special_tokens:
            return self.special_tokens.index(token)
        return self._word_to_id[token]

    def _encode_text(self, text: str) -> list[int]:
        return [self._word_to_id.get(w, self.unk_id) for w in self.split(text)]

    def _decode_ids(self, ids: list[int], skip_special: bool) -> str:
        n = len(self.special_tokens)
        return " ".join(
            self._words[i - n] if i >= n else self.special_tokens[i]
            for i in ids if not (skip_special and i < self.unk_id))
