"""A word tokenizer: the lossy baseline, with ``<unk>`` for unseen words."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Any, ClassVar

from .._checks import check_bool, check_int
from .base import (
    SPECIAL_TOKENS,
    UNK,
    Tokenizer,
    _check_text,
    _check_training_text,
)

__all__ = ["WORD_PATTERN", "WordTokenizer"]

#: The word tokenizer's notion of a token. A run of letters, digits and
#: underscores (a Python identifier is one word), or one other symbol.
WORD_PATTERN = r"\w+|[^\w\s]"
_WORD_RE = re.compile(WORD_PATTERN)


class WordTokenizer(Tokenizer):
    """One token per word or punctuation mark, ``<unk>`` for the rest.

    Text is split by ``WORD_PATTERN``: runs of letters, digits and
    underscores, and single other symbols; whitespace is dropped. The
    vocabulary keeps the words seen at least ``min_freq`` times in the
    training text, the ``max_size`` most frequent if given (ties broken
    alphabetically); every other word is encoded as ``<unk>``. ``decode``
    joins the tokens with single spaces, so the word tokenizer loses
    spacing and unknown words: it is the lossy baseline.

    Ids: 0-2 ``<pad>``, ``<bos>``, ``<eos>``; 3 ``<unk>``; then the
    vocabulary, most frequent first.

    Args:
        words: the vocabulary, most frequent first, or ``None`` for an
            empty one (call :meth:`train`).
        lowercase: lower-case text before splitting it.

    Raises:
        TypeError: if ``lowercase`` is not a bool or ``words`` is a str.
        ValueError: if ``words`` holds something other than non-empty
            strings.

    Example:
        >>> tok = WordTokenizer().train("the cat sat on the mat")
        >>> tok.decode(tok.encode("the dog sat"))
        'the <unk> sat'
    """

    special_tokens: ClassVar[tuple[str, ...]] = (*SPECIAL_TOKENS, UNK)
    unk_id: ClassVar[int] = 3

    def __init__(
        self, words: Iterable[str] | None = None, *, lowercase: bool = False
    ) -> None:
        self.lowercase = check_bool("lowercase", lowercase)
        self._set_words(words if words is not None else ())

    def _set_words(self, words: Iterable[str]) -> None:
        if isinstance(words, str):
            raise TypeError("words must be a sequence of str, not a str")
        vocab: list[str] = []
        seen = set(self.special_tokens)
        for w in words:
            if not isinstance(w, str) or not w:
                raise ValueError(f"words must hold non-empty str, got {w!r}")
            if w not in seen:
                seen.add(w)
                vocab.append(w)
        self._words = vocab
        offset = len(self.special_tokens)
        self._word_to_id = {w: offset + i for i, w in enumerate(vocab)}

    def split(self, text: str) -> list[str]:
        """Split text into the words this tokenizer sees (no lookup)."""
        _check_text(text)
        if self.lowercase:
            text = text.lower()
        return _WORD_RE.findall(text)

    def train(
        self, text: str, *, min_freq: int = 1, max_size: int | None = None
    ) -> WordTokenizer:
        """Learn the vocabulary from ``text``.

        Args:
            text: training text (not empty).
            min_freq: keep words seen at least this often (>= 1).
            max_size: keep at most this many words (special tokens not
                counted), most frequent first; ``None`` for no limit.

        Returns:
            ``self``, trained.

        Raises:
            TypeError: if an argument has the wrong type.
            ValueError: if ``text`` is empty or has no word, or
                ``min_freq``/``max_size`` is below 1.
        """
        _check_training_text(text)
        min_freq = check_int("min_freq", min_freq)
        if max_size is not None:
            max_size = check_int("max_size", max_size)
        counts = Counter(self.split(text))
        if not counts:
            raise ValueError("text has no word to learn (only whitespace)")
        ranked = sorted(
            (w for w, c in counts.items() if c >= min_freq),
            key=lambda w: (-counts[w], w),
        )
        self._set_words(ranked[:max_size])
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

    def id_to_token(self, token_id: int) -> str:
        token_id = self._check_id(token_id)
        n_special = len(self.special_tokens)
        if token_id < n_special:
            return self.special_tokens[token_id]
        return self._words[token_id - n_special]

    def token_to_id(self, token: str) -> int:
        if token in self.special_tokens:
            return self.special_tokens.index(token)
        return self._word_to_id[token]

    def _encode_text(self, text: str) -> list[int]:
        lookup = self._word_to_id
        unk = self.unk_id
        return [lookup.get(w, unk) for w in self.split(text)]

    def _decode_ids(self, ids: list[int], skip_special: bool) -> str:
        n_special = len(self.special_tokens)
        parts = []
        for i in ids:
            if i < n_special:
                if skip_special and i != self.unk_id:
                    continue
                parts.append(self.special_tokens[i])
            else:
                parts.append(self._words[i - n_special])
        return " ".join(parts)

    _saved = {"words": list, "lowercase": bool}

    def _state(self) -> dict[str, Any]:
        return {"lowercase": self.lowercase, "words": self._words}
