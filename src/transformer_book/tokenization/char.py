"""A character tokenizer with a byte fallback for unseen characters."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._checks import check_bool
from .base import _BYTE_RE, Tokenizer, _check_text, _join, _to_bytes

__all__ = ["CharTokenizer"]


class CharTokenizer(Tokenizer):
    """One token per character; an unseen one as its UTF-8 bytes. Ids:
    0-2 special, 3-258 bytes (``<0x41>``), then the sorted alphabet.

    Args:
        chars: the alphabet; ``None`` for an empty one (call ``train``).
        byte_fallback: encode unseen characters as bytes; when ``False``
            they raise ``ValueError``.
    """

    _saved = {"chars": list, "byte_fallback": bool}

    def __init__(self, chars: Iterable[str] | None = None, *,
                 byte_fallback: bool = True) -> None:
        self.byte_fallback = check_bool("byte_fallback", byte_fallback)
        self._set_chars(() if chars is None else chars)

    def _set_chars(self, chars: Iterable[str]) -> None:
        self._chars = sorted(set(chars))
        if not all(isinstance(c, str) and len(c) == 1 for c in self._chars):
            raise ValueError(f"chars must hold single characters: {chars!r}")
        fallback = 256 if self.byte_fallback else 0  # the byte ids
        self._offset = len(self.special_tokens) + fallback
        self._char_to_id = {c: self._offset + i
                            for i, c in enumerate(self._chars)}

    @property
    def alphabet(self) -> list[str]:
        """The characters with their own id, sorted."""
        return list(self._chars)

    def train(self, text: str) -> CharTokenizer:
        """Learn the alphabet: every character of ``text`` (not empty)."""
        self._set_chars(_check_text(text, train=True))
        return self

    @property
    def vocab_size(self) -> int:
        return self._offset + len(self._chars)

    def is_known(self, char: str) -> bool:
        """Whether ``char`` has its own id (no byte fallback)."""
        return char in self._char_to_id

    def _id_to_token(self, token_id: int) -> str:
        if token_id < self._offset:
            return f"<0x{token_id - len(self.special_tokens):02X}>"
        return self._chars[token_id - self._offset]

    def token_to_id(self, token: str) -> int:
        if token in self.special_tokens:
            return self.special_tokens.index(token)
        match = _BYTE_RE.fullmatch(token)
        if match and self.byte_fallback:
            return len(self.special_tokens) + int(match[1], 16)
        return self._char_to_id[token]

    def _encode_text(self, text: str) -> list[int]:
        ids: list[int] = []
        n = len(self.special_tokens)
        for c in text:
            if c in self._char_to_id:
                ids.append(self._char_to_id[c])
            elif self.byte_fallback:
                ids += [n + b for b in _to_bytes(c)]
            else:
                raise ValueError(
                    f"character {c!r} (U+{ord(c):04X}) in text is not in "
                    "the alphabet and byte_fallback is off")
        return ids

    def _decode_ids(self, ids: list[int], skip_special: bool) -> str:
        n = len(self.special_tokens)
        return _join(
            ("" if skip_special else self.special_tokens[i]) if i < n
            else bytes([i - n]) if i < self._offset
            else self._chars[i - self._offset]
            for i in ids)

    def _state(self) -> dict[str, Any]:
        return {"chars": self._chars, "byte_fallback": self.byte_fallback}
