"""A character tokenizer with a byte fallback for unseen characters."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from .._checks import check_bool
from .base import (
    Tokenizer,
    _check_training_text,
    _from_bytes,
    _to_bytes,
)

__all__ = ["CharTokenizer"]

_BYTE_TOKEN_RE = re.compile(r"<0x([0-9A-F]{2})>")


class CharTokenizer(Tokenizer):
    """One token per character, with a byte fallback for unseen ones.

    The tokenizer keeps one id per character seen in training and
    reserves 256 byte ids: a character it never saw is written as its
    UTF-8 bytes (*byte fallback*), so ``decode(encode(s)) == s`` for every
    string. With ``byte_fallback=False`` an unseen character raises a
    ``ValueError`` that names it.

    Ids: 0-2 special tokens, 3-258 the 256 byte values (shown as
    ``<0x41>``; used only for characters outside the learned alphabet,
    when ``byte_fallback`` is on), then one id per character of the
    alphabet in sorted order.

    Args:
        chars: the alphabet, or ``None`` for an empty one (call
            :meth:`train`).
        byte_fallback: encode unseen characters as their UTF-8 bytes;
            when ``False`` they raise a ``ValueError`` instead and no byte
            ids are reserved.

    Raises:
        TypeError: if ``byte_fallback`` is not a bool.
        ValueError: if ``chars`` holds something other than single
            characters.

    Example:
        >>> tok = CharTokenizer().train("hello")
        >>> tok.decode(tok.encode("hello, world"))
        'hello, world'
    """

    def __init__(
        self, chars: Iterable[str] | None = None, *, byte_fallback: bool = True
    ) -> None:
        self.byte_fallback = check_bool("byte_fallback", byte_fallback)
        self._set_chars(chars if chars is not None else ())

    def _set_chars(self, chars: Iterable[str]) -> None:
        alphabet = set()
        for c in chars:
            if not isinstance(c, str) or len(c) != 1:
                raise ValueError(
                    f"chars must hold single characters, got {c!r}"
                )
            alphabet.add(c)
        self._chars = sorted(alphabet)
        offset = self._char_offset
        self._char_to_id = {c: offset + i for i, c in enumerate(self._chars)}

    @property
    def _char_offset(self) -> int:
        return len(self.special_tokens) + (256 if self.byte_fallback else 0)

    @property
    def alphabet(self) -> list[str]:
        """The characters with their own id, sorted."""
        return list(self._chars)

    def train(self, text: str) -> CharTokenizer:
        """Learn the alphabet: every character of ``text``.

        Args:
            text: training text (not empty).

        Returns:
            ``self``, trained.

        Raises:
            TypeError: if ``text`` is not a string.
            ValueError: if ``text`` is empty.
        """
        self._set_chars(_check_training_text(text))
        return self

    @property
    def vocab_size(self) -> int:
        return self._char_offset + len(self._chars)

    def is_known(self, char: str) -> bool:
        """Whether ``char`` has its own id (no byte fallback needed)."""
        return char in self._char_to_id

    def id_to_token(self, token_id: int) -> str:
        token_id = self._check_id(token_id)
        n_special = len(self.special_tokens)
        if token_id < n_special:
            return self.special_tokens[token_id]
        if token_id < self._char_offset:
            return f"<0x{token_id - n_special:02X}>"
        return self._chars[token_id - self._char_offset]

    def token_to_id(self, token: str) -> int:
        if token in self.special_tokens:
            return self.special_tokens.index(token)
        if token in self._char_to_id:
            return self._char_to_id[token]
        match = _BYTE_TOKEN_RE.fullmatch(token)
        if match and self.byte_fallback:
            return len(self.special_tokens) + int(match.group(1), 16)
        raise KeyError(token)

    def _encode_text(self, text: str) -> list[int]:
        lookup = self._char_to_id
        ids = []
        n_special = len(self.special_tokens)
        for c in text:
            i = lookup.get(c)
            if i is not None:
                ids.append(i)
            elif self.byte_fallback:
                ids.extend(n_special + b for b in _to_bytes(c))
            else:
                raise ValueError(
                    f"character {c!r} (U+{ord(c):04X}) in text is not in "
                    "the alphabet and byte_fallback is off"
                )
        return ids

    def _decode_ids(self, ids: list[int], skip_special: bool) -> str:
        n_special = len(self.special_tokens)
        offset = self._char_offset
        parts: list[str] = []
        pending = bytearray()
        for i in ids:
            if n_special <= i < offset:
                pending.append(i - n_special)
                continue
            if pending:
                parts.append(_from_bytes(bytes(pending)))
                pending.clear()
            if i < n_special:
                if not skip_special:
                    parts.append(self.special_tokens[i])
            else:
                parts.append(self._chars[i - offset])
        if pending:
            parts.append(_from_bytes(bytes(pending)))
        return "".join(parts)

    _saved = {"chars": list, "byte_fallback": bool}

    def _state(self) -> dict[str, Any]:
        return {"byte_fallback": self.byte_fallback, "chars": self._chars}
