"""The tokenizer interface, its special tokens and its JSON files."""

from __future__ import annotations

import abc
import inspect
import itertools
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar, TypeVar, cast

from .._checks import check_token_ids
from .._io import atomic_write_bytes

__all__ = ["BOS", "EOS", "PAD", "SPECIAL_TOKENS", "UNK", "Tokenizer",
           "load_tokenizer"]

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
#: Special tokens shared by all tokenizers, at ids 0, 1, 2.
SPECIAL_TOKENS: tuple[str, ...] = (PAD, BOS, EOS)

_FORMAT_VERSION = 1
T = TypeVar("T", bound="Tokenizer")
# How a byte that is not text on its own is shown: <0xC3>.
_BYTE_RE = re.compile(r"<0x([0-9A-F]{2})>")
# Lone surrogates: legal in a Python str, with no UTF-8 form.
_SURROGATE_RE = re.compile("[\ud800-\udfff]")
# A high one then a low one: JSON reads their escapes back as one character.
_SURROGATE_PAIR_RE = re.compile("[\ud800-\udbff][\udc00-\udfff]")


def _check_text(text: object, *, train: bool = False) -> str:
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if train and not text:
        raise ValueError("text is empty; a tokenizer needs text to train on")
    return text


def _to_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # lone surrogates survive


def _from_bytes(data: bytes) -> str:
    try:
        return data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:  # arbitrary ids can spell invalid UTF-8
        return data.decode("utf-8", "replace")


def _join(pieces: Iterable[str | bytes]) -> str:
    """Join text pieces, decoding each run of byte pieces as UTF-8."""
    runs = itertools.groupby(pieces, key=lambda p: isinstance(p, bytes))
    return "".join(
        _from_bytes(b"".join(cast(Iterable[bytes], run))) if is_bytes
        else "".join(cast(Iterable[str], run))
        for is_bytes, run in runs)


def _subclasses(cls: type[Any]) -> list[type[Any]]:
    return [s for c in cls.__subclasses__() for s in [c, *_subclasses(c)]]


class Tokenizer(abc.ABC):
    """Text to integer ids and back, with ``save`` and ``load``.

    Subclasses define the vocabulary, ``_id_to_token`` (ids past the
    special tokens), ``_encode_text``, ``_decode_ids`` and ``_saved``: the
    constructor arguments a file holds, with their types.
    """

    special_tokens: ClassVar[tuple[str, ...]] = SPECIAL_TOKENS
    pad_id: ClassVar[int] = 0
    bos_id: ClassVar[int] = 1
    eos_id: ClassVar[int] = 2
    _saved: ClassVar[dict[str, type]]

    @property
    @abc.abstractmethod
    def vocab_size(self) -> int:
        """Number of ids, special tokens included."""

    def id_to_token(self, token_id: int) -> str:
        """The text of one token; ``token_to_id`` inverts it."""
        token_id = self._check_id(token_id)
        if token_id < len(self.special_tokens):
            return self.special_tokens[token_id]
        return self._id_to_token(token_id)

    @abc.abstractmethod
    def token_to_id(self, token: str) -> int:
        """The id of a token as ``id_to_token`` shows it (or ``KeyError``)."""

    @abc.abstractmethod
    def _id_to_token(self, token_id: int) -> str: ...

    @abc.abstractmethod
    def _encode_text(self, text: str) -> list[int]: ...

    @abc.abstractmethod
    def _decode_ids(self, ids: list[int], skip_special: bool) -> str: ...

    def _state(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self._saved}

    def _check_id(self, token_id: int) -> int:
        return check_token_ids([token_id], self.vocab_size, "token_id")[0]

    def encode(self, text: str, *, bos: bool = False,
               eos: bool = False) -> list[int]:
        """Token ids of ``text``, with ``<bos>`` and ``<eos>`` if asked."""
        ids = self._encode_text(_check_text(text))
        return ([self.bos_id] if bos else []) + ids + (
            [self.eos_id] if eos else [])

    def decode(self, ids: Iterable[int], *, skip_special: bool = False) -> str:
        """Text of ``ids`` (a list, array or tensor); special tokens by
        name, or left out with ``skip_special``."""
        ids = check_token_ids(ids, self.vocab_size)
        return self._decode_ids(ids, skip_special)

    def tokens(self, text: str) -> list[str]:
        """The tokens of ``text`` as strings, for display."""
        return [self.id_to_token(i) for i in self.encode(text)]

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the tokenizer to a JSON file, atomically; return its path.

        Raises:
            ValueError: if a token holds two lone surrogates that JSON
                would read back as one character.
        """
        payload = {"type": type(self).__name__, "version": _FORMAT_VERSION,
                   "special_tokens": list(self.special_tokens),
                   **self._state()}
        text = json.dumps(payload, ensure_ascii=False, indent=1)
        if pair := _SURROGATE_PAIR_RE.search(text):
            raise ValueError(f"cannot save to path={str(path)!r}: a token "
                             f"holds {pair[0]!r}, two lone surrogates that "
                             "JSON would read back as one character")
        # Each literal surrogate lies inside a JSON string: escape it there.
        text = _SURROGATE_RE.sub(lambda m: f"\\u{ord(m[0]):04x}", text)
        atomic_write_bytes(Path(path), text.encode("utf-8"))
        return Path(path)

    @classmethod
    def load(cls: type[T], path: str | os.PathLike[str]) -> T:
        """Read a file written by ``save``; ``Tokenizer.load`` reads any kind.

        Raises:
            ValueError: naming the file and its first malformed entry.
        """
        try:
            payload = json.loads(_from_bytes(Path(path).read_bytes()))
            return cls._from_payload(payload)
        except (TypeError, ValueError) as error:  # a bad entry: a bad file
            bad_json = isinstance(error, json.JSONDecodeError)
            why = "not JSON: " if bad_json else ""
            raise ValueError(f"path={str(path)!r}: {why}{error}") from None

    @classmethod
    def _from_payload(cls: type[T], payload: Any) -> T:
        kinds = {k.__name__: k for k in _subclasses(Tokenizer)
                 if not inspect.isabstract(k)}
        kind = str(payload.get("type")) if isinstance(payload, dict) else ""
        if not isinstance(payload, dict):
            problem = f"holds {json.dumps(payload)[:20]}, not a JSON object"
        elif payload.get("version") != _FORMAT_VERSION:
            problem = (f"has format version {payload.get('version')!r}; "
                       f"expected {_FORMAT_VERSION}")
        elif kind not in kinds:
            problem = (f"holds type={payload.get('type')!r}; expected one "
                       f"of {sorted(kinds)}")
        elif not issubclass(kinds[kind], cls):
            problem = f"holds a {kind}, not a {cls.__name__}"
        else:
            bad = [name for name, type_ in kinds[kind]._saved.items()
                   if not isinstance(payload.get(name), type_)]
            problem = f"has no valid {bad[0]!r} entry" if bad else ""
        if problem:
            raise ValueError(problem)
        target = kinds[kind]
        return cast(T, target(**{k: payload[k] for k in target._saved}))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(vocab_size={self.vocab_size})"


def load_tokenizer(path: str | os.PathLike[str]) -> Tokenizer:
    """Read any tokenizer written by ``save``, whatever its class."""
    return Tokenizer.load(path)
