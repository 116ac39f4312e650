"""The tokenizer interface: an abstract base class and shared machinery.

Every tokenizer turns text into a list of integer ids and back:

* ``encode(text) -> list[int]`` and ``decode(ids) -> str``;
* ``vocab_size``, ``id_to_token(i)`` and ``token_to_id(token)``, with
  ``token_to_id(id_to_token(i)) == i`` for every id;
* ``train(text, ...)``, which learns the vocabulary in place and returns
  the tokenizer, so ``tok = BPETokenizer().train(text, 512)`` works;
* ``save(path)`` to a JSON file (written atomically: a temporary file, then
  a rename) and ``load(path)`` (a classmethod; :func:`load_tokenizer` reads
  any kind).

**Special tokens.** Ids 0, 1 and 2 are always ``<pad>``, ``<bos>`` and
``<eos>`` (the word tokenizer adds ``<unk>`` as id 3). ``encode`` adds
``<bos>``/``<eos>`` only when asked (``bos=True``, ``eos=True``). Text that
happens to contain the string ``"<pad>"`` is encoded as ordinary text, never
as the special id, so user text cannot inject control tokens. ``decode``
writes special tokens out as their names unless ``skip_special=True``.
"""

from __future__ import annotations

import abc
import inspect
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from .._checks import check_int, check_token_ids
from .._io import atomic_write_bytes

__all__ = [
    "BOS",
    "EOS",
    "PAD",
    "SPECIAL_TOKENS",
    "UNK",
    "Tokenizer",
    "load_tokenizer",
]

PAD = "<pad>"
BOS = "<bos>"
EOS = "<eos>"
UNK = "<unk>"
#: Special tokens shared by all tokenizers, at ids 0, 1, 2.
SPECIAL_TOKENS: tuple[str, ...] = (PAD, BOS, EOS)

_FORMAT_VERSION = 1
T = TypeVar("T", bound="Tokenizer")
# Lone surrogates: legal in a Python str, with no UTF-8 form.
_SURROGATE_RE = re.compile("[\ud800-\udfff]")
# A high one then a low one: JSON reads their escapes back as one character.
_SURROGATE_PAIR_RE = re.compile("[\ud800-\udbff][\udc00-\udfff]")


def _check_text(text: object, name: str = "text") -> str:
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a str, got {type(text).__name__}")
    return text


def _check_training_text(text: object) -> str:
    _check_text(text)
    if not text:
        raise ValueError("text is empty; a tokenizer needs text to train on")
    return text  # type: ignore[return-value]


def _to_bytes(text: str) -> bytes:
    # surrogatepass keeps lone surrogates (legal in a Python str) lossless.
    return text.encode("utf-8", "surrogatepass")


def _from_bytes(data: bytes) -> str:
    try:
        return data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        # Arbitrary ids can spell invalid UTF-8; show it, don't fail.
        return data.decode("utf-8", "replace")


def _state_value(
    state: dict[str, Any], key: str, kind: type | tuple[type, ...]
) -> Any:
    """Return ``state[key]`` if present and of ``kind``, else ValueError."""
    if key not in state:
        raise ValueError(f"the tokenizer file has no {key!r} entry")
    value = state[key]
    if not isinstance(value, kind):
        raise ValueError(
            f"the tokenizer file's {key!r} entry is a "
            f"{type(value).__name__}, not the expected kind"
        )
    return value


def _concrete_subclasses(base: type[T]) -> dict[str, type[T]]:
    """Every non-abstract subclass of ``base``, by class name."""
    found: dict[str, type[T]] = {}
    stack = list(base.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if not inspect.isabstract(cls):
            found[cls.__name__] = cls
    return found


class Tokenizer(abc.ABC):
    """Interface and shared machinery of every tokenizer.

    Subclasses define the vocabulary (``vocab_size``, ``id_to_token``,
    ``token_to_id``), ``_encode_text``, ``_decode_ids`` (ids already
    checked) and ``_state`` / ``_from_state`` for saving; ``encode``,
    ``decode``, ``tokens``, ``save`` and ``load`` come from here.
    """

    #: Tokens at ids ``0 .. len(special_tokens) - 1``.
    special_tokens: ClassVar[tuple[str, ...]] = SPECIAL_TOKENS
    pad_id: ClassVar[int] = 0
    bos_id: ClassVar[int] = 1
    eos_id: ClassVar[int] = 2
    #: The constructor's arguments that ``_state`` saves, by name, with
    #: the JSON type :meth:`load` expects of each.
    _saved: ClassVar[dict[str, type]]

    # -- vocabulary -------------------------------------------------------

    @property
    @abc.abstractmethod
    def vocab_size(self) -> int:
        """Number of ids, special tokens included."""

    @abc.abstractmethod
    def id_to_token(self, token_id: int) -> str:
        """Return the text of one token (special tokens by name).

        ``token_to_id(id_to_token(i)) == i`` for every id ``i``.

        Raises:
            TypeError: if ``token_id`` is not an int.
            ValueError: if ``token_id`` is outside the vocabulary.
        """

    @abc.abstractmethod
    def token_to_id(self, token: str) -> int:
        """Return the id of a token (its text as ``id_to_token`` shows it).

        Raises:
            KeyError: if ``token`` is not in the vocabulary.
        """

    @abc.abstractmethod
    def _encode_text(self, text: str) -> list[int]:
        """Ids of ``text`` (a checked string), without bos/eos."""

    @abc.abstractmethod
    def _decode_ids(self, ids: list[int], skip_special: bool) -> str:
        """Text of ``ids`` (checked to lie in the vocabulary)."""

    @abc.abstractmethod
    def _state(self) -> dict[str, Any]:
        """What :meth:`save` writes besides the type and version: the
        values of the constructor's arguments named in ``_saved``."""

    @classmethod
    def _from_state(cls: type[T], state: dict[str, Any]) -> T:
        """Rebuild a tokenizer from what :meth:`_state` returned."""
        saved = cls._saved.items()
        return cls(**{k: _state_value(state, k, t) for k, t in saved})

    # -- encoding ---------------------------------------------------------

    def encode(
        self, text: str, *, bos: bool = False, eos: bool = False
    ) -> list[int]:
        """Turn text into token ids.

        Args:
            text: the string to encode.
            bos: put ``<bos>`` first.
            eos: put ``<eos>`` last.

        Returns:
            The ids, each in ``range(vocab_size)``.

        Raises:
            TypeError: if ``text`` is not a string.
        """
        _check_text(text)
        ids = self._encode_text(text)
        if bos:
            ids.insert(0, self.bos_id)
        if eos:
            ids.append(self.eos_id)
        return ids

    def decode(
        self, ids: Iterable[int], *, skip_special: bool = False
    ) -> str:
        """Turn token ids back into text.

        Args:
            ids: token ids (a list, tuple, 1-D array or tensor of ints).
            skip_special: leave special tokens out instead of writing
                their names.

        Returns:
            The text.

        Raises:
            TypeError: if ``ids`` is a string or holds non-integers.
            ValueError: if an id is outside ``range(vocab_size)``.
        """
        ids = check_token_ids(ids, self.vocab_size)
        return self._decode_ids(ids, skip_special)

    def tokens(self, text: str) -> list[str]:
        """Return the tokens of ``text`` as strings, for display."""
        return [self.id_to_token(i) for i in self.encode(text)]

    def _check_id(self, token_id: int) -> int:
        token_id = check_int("token_id", token_id, minimum=None)
        if not 0 <= token_id < self.vocab_size:
            raise ValueError(
                f"token_id={token_id} is outside the vocabulary "
                f"(vocab_size={self.vocab_size})"
            )
        return token_id

    # -- persistence ------------------------------------------------------

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the tokenizer to a JSON file, atomically.

        The file gets the permissions a plain ``open`` would give it
        (``0o666`` less the umask). It is valid UTF-8: a lone surrogate
        (legal in a Python str, with no UTF-8 form) is written as a JSON
        escape such as ``\\ud800``, which :meth:`load` reads back as it was.
        A token holding a high surrogate followed by a low one cannot be
        saved: JSON reads the two escapes back as one character.

        Args:
            path: where to write; parent folders are created.

        Returns:
            The path written.
        """
        path = Path(path)
        payload = {
            "type": type(self).__name__,
            "version": _FORMAT_VERSION,
            "special_tokens": list(self.special_tokens),
            **self._state(),
        }
        text = json.dumps(payload, ensure_ascii=False, indent=1)
        pair = _SURROGATE_PAIR_RE.search(text)
        if pair:
            raise ValueError(
                f"cannot save to path={str(path)!r}: a token holds "
                f"{pair[0]!r}, two lone surrogates that JSON would read "
                "back as one character"
            )
        # Each literal surrogate lies inside a JSON string: escape it there.
        text = _SURROGATE_RE.sub(lambda m: f"\\u{ord(m[0]):04x}", text)
        atomic_write_bytes(path, text.encode("utf-8"))
        return path

    @classmethod
    def load(cls: type[T], path: str | os.PathLike[str]) -> T:
        """Read a tokenizer written by :meth:`save`.

        ``Tokenizer.load`` (and :func:`load_tokenizer`) reads any kind;
        ``BPETokenizer.load`` only a BPE tokenizer, and so on.

        Args:
            path: the JSON file.

        Returns:
            The tokenizer.

        Raises:
            ValueError: if the file is not a JSON object with the entries
                :meth:`save` writes (the message names the missing or
                malformed one), holds another kind of tokenizer, or has an
                unknown format version.
        """
        where = f"path={str(path)!r}"
        try:
            payload = json.loads(_from_bytes(Path(path).read_bytes()))
        except json.JSONDecodeError as error:
            raise ValueError(f"{where} is not JSON: {error}") from None
        if not isinstance(payload, dict):
            raise ValueError(
                f"{where} holds {json.dumps(payload)[:20]}, not a JSON "
                "object with the entries save() writes"
            )
        version = payload.get("version")
        if version != _FORMAT_VERSION:
            raise ValueError(
                f"{where} has format version {version!r}; expected "
                f"{_FORMAT_VERSION}"
            )
        kind = payload.get("type")
        if cls is Tokenizer:
            classes = _concrete_subclasses(cls)
            if kind not in classes:
                raise ValueError(
                    f"{where} holds type={kind!r}; expected one of "
                    f"{', '.join(sorted(classes))}"
                )
            target = classes[kind]
        elif kind != cls.__name__:
            raise ValueError(f"{where} holds a {kind}, not a {cls.__name__}")
        else:
            target = cls
        try:
            return target._from_state(payload)
        except (TypeError, ValueError) as error:
            # A malformed entry is a bad file, whatever the inner error.
            raise ValueError(f"{where}: {error}") from None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(vocab_size={self.vocab_size})"


def load_tokenizer(path: str | os.PathLike[str]) -> Tokenizer:
    """Read any tokenizer written by ``save``, whatever its class.

    Args:
        path: the JSON file.

    Returns:
        A :class:`CharTokenizer`, :class:`WordTokenizer` or
        :class:`BPETokenizer`.

    Raises:
        ValueError: if the file is not a tokenizer written by ``save``.
    """
    return Tokenizer.load(path)
