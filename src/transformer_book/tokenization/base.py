"""Character, word and byte-pair-encoding tokenizers with one interface.

Every tokenizer turns text into a list of integer ids and back:

* ``encode(text) -> list[int]`` and ``decode(ids) -> str``;
* ``vocab_size``, ``id_to_token(i)`` and ``token_to_id(token)``;
* ``train(text, ...)``, which learns the vocabulary in place and returns
  the tokenizer, so ``tok = BPETokenizer().train(text, 512)`` works;
* ``save(path)`` to a JSON file (written atomically: a temporary file, then
  a rename) and ``load(path)`` (a classmethod; :func:`load_tokenizer` reads
  any of the three).

**Special tokens.** Ids 0, 1 and 2 are always ``<pad>``, ``<bos>`` and
``<eos>`` (the word tokenizer adds ``<unk>`` as id 3). ``encode`` adds
``<bos>``/``<eos>`` only when asked (``bos=True``, ``eos=True``). Text that
happens to contain the string ``"<pad>"`` is encoded as ordinary text, never
as the special id, so user text cannot inject control tokens. ``decode``
writes special tokens out as their names unless ``skip_special=True``.

**Unknown symbols.**

* :class:`CharTokenizer` keeps one id per character seen in training and
  reserves 256 byte ids: a character it never saw is written as its UTF-8
  bytes (*byte fallback*), so ``decode(encode(s)) == s`` for every string.
  With ``byte_fallback=False`` an unseen character raises a ``ValueError``
  that names it.
* :class:`WordTokenizer` splits text into words and punctuation marks and
  keeps the words seen at least ``min_freq`` times (at most ``max_size``
  of them, most frequent first); every other word maps to ``<unk>``. It is
  lossy by design: ``decode`` joins tokens with single spaces.
* :class:`BPETokenizer` is a byte-level BPE (Sennrich et al., 2016, as in
  GPT-2, Radford et al., 2019): its base alphabet is the 256
  byte values, so it is lossless on any string, including characters it
  never saw in training.
"""

from __future__ import annotations

import heapq
import json
import operator
import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from .data import _atomic_write_bytes

__all__ = [
    "check_token_ids",
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
    "load_tokenizer",
    "pretokenize",
]

PAD = "<pad>"
BOS = "<bos>"
EOS = "<eos>"
UNK = "<unk>"
#: Special tokens shared by all tokenizers, at ids 0, 1, 2.
SPECIAL_TOKENS: tuple[str, ...] = (PAD, BOS, EOS)

#: GPT-2's pre-tokenization pattern written for the standard ``re`` module
#: (which lacks ``\p{L}``): English contractions, an optional space followed
#: by letters, by digits or by other symbols (``_`` counts as a symbol), and
#: runs of whitespace. Every character of any string falls into a chunk.
PRETOKENIZE_PATTERN = (
    r"'s|'t|'re|'ve|'m|'ll|'d"
    r"| ?[^\W\d_]+"
    r"| ?\d+"
    r"| ?(?:[^\s\w]|_)+"
    r"|\s+(?!\S)"
    r"|\s+"
)
_PRETOKENIZE_RE = re.compile(PRETOKENIZE_PATTERN)

#: The word tokenizer's notion of a token. A run of letters, digits and
#: underscores (a Python identifier is one word), or one other symbol.
WORD_PATTERN = r"\w+|[^\w\s]"
_WORD_RE = re.compile(WORD_PATTERN)

_FORMAT_VERSION = 1
T = TypeVar("T", bound="Tokenizer")


def pretokenize(text: str) -> list[str]:
    """Split text into the chunks BPE merges never cross.

    The chunks are the matches of :data:`PRETOKENIZE_PATTERN`: a word with
    its leading space (``" return"``), a number, a run of punctuation, or
    whitespace. Joined, they give ``text`` back.

    Args:
        text: any string.

    Returns:
        The chunks, in order.
    """
    return _PRETOKENIZE_RE.findall(text)


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


def check_token_ids(
    ids: Iterable[int], vocab_size: int, name: str = "ids"
) -> list[int]:
    """Return ``ids`` as a list of ints, each in ``range(vocab_size)``.

    Tensors and arrays are accepted (through ``tolist``).

    Args:
        ids: a sequence of token ids.
        vocab_size: the number of ids of the vocabulary.
        name: the argument's name, for error messages.

    Returns:
        The ids as a list of Python ints.

    Raises:
        TypeError: if ``ids`` is a string or a single int, or holds
            something that is not an int (bools included).
        ValueError: if an id is outside ``range(vocab_size)``.
    """
    if isinstance(ids, (str, bytes, int)):
        raise TypeError(
            f"{name} must be a sequence of int token ids, got "
            f"{type(ids).__name__}"
        )
    if hasattr(ids, "tolist"):  # tensors and arrays
        ids = ids.tolist()
    out = []
    for i in ids:
        if isinstance(i, bool):
            raise TypeError(f"{name} must hold int token ids, got bool")
        try:
            i = operator.index(i)
        except TypeError:
            raise TypeError(
                f"{name} must hold int token ids, got {type(i).__name__}"
            ) from None
        if not 0 <= i < vocab_size:
            raise ValueError(
                f"token id {i} in {name} is outside the vocabulary "
                f"(vocab_size={vocab_size})"
            )
        out.append(i)
    return out


class Tokenizer:
    """Interface and shared machinery of the three tokenizers.

    Subclasses define ``_encode_text``, ``_decode_ids`` (with special ids
    already removed or written out), ``_state`` / ``_from_state`` for
    saving, and the vocabulary (``vocab_size``, ``id_to_token``).
    """

    #: Tokens at ids ``0 .. len(special_tokens) - 1``.
    special_tokens: ClassVar[tuple[str, ...]] = SPECIAL_TOKENS
    pad_id: ClassVar[int] = 0
    bos_id: ClassVar[int] = 1
    eos_id: ClassVar[int] = 2

    # -- vocabulary -------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        """Number of ids, special tokens included."""
        raise NotImplementedError

    def id_to_token(self, token_id: int) -> str:
        """Return the text of one token (special tokens by name).

        Raises:
            ValueError: if ``token_id`` is outside the vocabulary.
        """
        raise NotImplementedError

    def token_to_id(self, token: str) -> int:
        """Return the id of a token (its text as ``id_to_token`` shows it).

        Raises:
            KeyError: if ``token`` is not in the vocabulary.
        """
        raise NotImplementedError

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
        return self._decode_ids(self._check_ids(ids), skip_special)

    def tokens(self, text: str) -> list[str]:
        """Return the tokens of ``text`` as strings, for display."""
        return [self.id_to_token(i) for i in self.encode(text)]

    def _check_ids(self, ids: Iterable[int]) -> list[int]:
        return check_token_ids(ids, self.vocab_size)

    def _check_id(self, token_id: int) -> int:
        if isinstance(token_id, bool):
            raise TypeError("token_id must be an int, got bool")
        try:
            token_id = operator.index(token_id)
        except TypeError:
            raise TypeError(
                f"token_id must be an int, got {type(token_id).__name__}"
            ) from None
        if not 0 <= token_id < self.vocab_size:
            raise ValueError(
                f"token_id={token_id} is outside the vocabulary "
                f"(vocab_size={self.vocab_size})"
            )
        return token_id

    def _encode_text(self, text: str) -> list[int]:
        raise NotImplementedError

    def _decode_ids(self, ids: list[int], skip_special: bool) -> str:
        raise NotImplementedError

    # -- persistence ------------------------------------------------------

    def _state(self) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def _from_state(cls: type[T], state: dict[str, Any]) -> T:
        raise NotImplementedError

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the tokenizer to a JSON file, atomically.

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
        _atomic_write_bytes(path, _to_bytes(text))
        return path

    @classmethod
    def load(cls: type[T], path: str | os.PathLike[str]) -> T:
        """Read a tokenizer written by :meth:`save`.

        Args:
            path: the JSON file.

        Returns:
            The tokenizer.

        Raises:
            ValueError: if the file holds another kind of tokenizer or an
                unknown format version.
        """
        payload = json.loads(_from_bytes(Path(path).read_bytes()))
        kind = payload.get("type")
        if payload.get("version") != _FORMAT_VERSION:
            raise ValueError(
                f"path={str(path)!r} has format version "
                f"{payload.get('version')!r}; expected {_FORMAT_VERSION}"
            )
        if cls is Tokenizer:
            classes = {c.__name__: c for c in _TOKENIZER_CLASSES}
            if kind not in classes:
                raise ValueError(
                    f"path={str(path)!r} holds type={kind!r}; expected one "
                    f"of {', '.join(classes)}"
                )
            return classes[kind]._from_state(payload)
        if kind != cls.__name__:
            raise ValueError(
                f"path={str(path)!r} holds a {kind}, not a {cls.__name__}"
            )
        return cls._from_state(payload)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(vocab_size={self.vocab_size})"


# --------------------------------------------------------------------------
# Characters
# --------------------------------------------------------------------------


class CharTokenizer(Tokenizer):
    """One token per character, with a byte fallback for unseen ones.

    Ids: 0-2 special tokens, 3-258 the 256 byte values (used only for
    characters outside the learned alphabet, when ``byte_fallback`` is on),
    then one id per character of the alphabet in sorted order.

    Args:
        chars: the alphabet, or ``None`` for an empty one (call
            :meth:`train`).
        byte_fallback: encode unseen characters as their UTF-8 bytes;
            when ``False`` they raise a ``ValueError`` instead and no byte
            ids are reserved.

    Example:
        >>> tok = CharTokenizer().train("hello")
        >>> tok.decode(tok.encode("hello, world"))
        'hello, world'
    """

    def __init__(
        self, chars: Iterable[str] | None = None, *, byte_fallback: bool = True
    ) -> None:
        if not isinstance(byte_fallback, bool):
            raise TypeError(
                "byte_fallback must be a bool, got "
                f"{type(byte_fallback).__name__}"
            )
        self.byte_fallback = byte_fallback
        self._set_chars(chars if chars is not None else ())

    def _set_chars(self, chars: Iterable[str]) -> None:
        if isinstance(chars, str):
            chars = list(chars)
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
        match = re.fullmatch(r"<0x([0-9A-F]{2})>", token)
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

    def _state(self) -> dict[str, Any]:
        return {"byte_fallback": self.byte_fallback, "chars": self._chars}

    @classmethod
    def _from_state(cls, state: dict[str, Any]) -> CharTokenizer:
        return cls(state["chars"], byte_fallback=state["byte_fallback"])


# --------------------------------------------------------------------------
# Words
# --------------------------------------------------------------------------


class WordTokenizer(Tokenizer):
    """One token per word or punctuation mark, ``<unk>`` for the rest.

    Text is split by :data:`WORD_PATTERN`: runs of letters, digits and
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
        if not isinstance(lowercase, bool):
            raise TypeError(
                f"lowercase must be a bool, got {type(lowercase).__name__}"
            )
        self.lowercase = lowercase
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
        for name, value in (("min_freq", min_freq), ("max_size", max_size)):
            if value is None and name == "max_size":
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(
                    f"{name} must be an int, got {type(value).__name__}"
                )
            if value < 1:
                raise ValueError(f"{name}={value} must be >= 1")
        counts = Counter(self.split(text))
        if not counts:
            raise ValueError("text has no word to learn (only whitespace)")
        ranked = sorted(
            (w for w, c in counts.items() if c >= min_freq),
            key=lambda w: (-counts[w], w),
        )
        if max_size is not None:
            ranked = ranked[:max_size]
        self._set_words(ranked)
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

    def _state(self) -> dict[str, Any]:
        return {"lowercase": self.lowercase, "words": self._words}

    @classmethod
    def _from_state(cls, state: dict[str, Any]) -> WordTokenizer:
        return cls(state["words"], lowercase=state["lowercase"])


# --------------------------------------------------------------------------
# Byte-pair encoding
# --------------------------------------------------------------------------


class BPETokenizer(Tokenizer):
    """Byte-level byte-pair encoding (Sennrich et al., 2016).

    BPE starts from an alphabet and repeatedly merges the most frequent
    adjacent pair of tokens into a new token, the algorithm of Gage's
    compression scheme (Gage, 1994) applied to vocabulary building. Here
    the alphabet is the 256 byte values of UTF-8, as in GPT-2 (Radford et
    al., 2019), so every string can be encoded.

    Training is fast: text is first cut into chunks by
    :func:`pretokenize` (merges never cross a chunk, so ``" the"`` can
    become a token but ``"e t"`` cannot), identical chunks are counted
    once, and after each merge only the pair counts of chunks holding the
    merged pair are updated, with a heap to find the next best pair.
    Among pairs of equal count the one with the smaller ids wins, so the
    merges depend only on the text.

    Ids: 0-2 special tokens, 3-258 the bytes ``0x00``-``0xFF``, then one
    id per merge in learning order.

    Args:
        merges: learned merges as pairs of ids, in order, or ``None`` for
            none (a plain byte tokenizer; call :meth:`train`).

    Example:
        >>> tok = BPETokenizer().train("low lower lowest " * 20, 266)
        >>> tok.tokens(" lowest"), tok.tokens("slower")
        ([' lowest'], ['s', 'low', 'e', 'r'])
    """

    #: Number of ids before the first merge (special tokens and bytes).
    base_vocab_size: ClassVar[int] = len(SPECIAL_TOKENS) + 256

    def __init__(
        self, merges: Iterable[tuple[int, int]] | None = None
    ) -> None:
        self._set_merges(merges if merges is not None else ())

    def _set_merges(self, merges: Iterable[tuple[int, int]]) -> None:
        n_special = len(self.special_tokens)
        pieces = [b""] * n_special + [bytes([b]) for b in range(256)]
        checked: list[tuple[int, int]] = []
        for pair in merges:
            try:
                a, b = (operator.index(x) for x in pair)
            except (TypeError, ValueError):
                raise TypeError(
                    f"merges must hold pairs of ints, got {pair!r}"
                ) from None
            size = len(pieces)
            if not (n_special <= a < size and n_special <= b < size):
                raise ValueError(
                    f"merge {pair!r} in merges refers to an id outside "
                    f"{n_special}..{size - 1}"
                )
            checked.append((a, b))
            pieces.append(pieces[a] + pieces[b])
        self._merges = checked
        self._pieces = pieces
        self._ranks = {
            pair: self.base_vocab_size + r for r, pair in enumerate(checked)
        }
        self._piece_to_id = {
            p: i for i, p in enumerate(pieces) if i >= n_special
        }
        self._cache: dict[str, list[int]] = {}

    @property
    def merges(self) -> list[tuple[int, int]]:
        """The learned merges as pairs of ids, in learning order.

        Merge ``r`` creates id ``base_vocab_size + r``.
        """
        return list(self._merges)

    def merge_pieces(self) -> list[tuple[bytes, bytes]]:
        """The learned merges as pairs of byte strings, in learning order."""
        return [(self._pieces[a], self._pieces[b]) for a, b in self._merges]

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes a token stands for (``b""`` for a special token)."""
        return self._pieces[self._check_id(token_id)]

    @property
    def vocab_size(self) -> int:
        return len(self._pieces)

    def id_to_token(self, token_id: int) -> str:
        token_id = self._check_id(token_id)
        if token_id < len(self.special_tokens):
            return self.special_tokens[token_id]
        # A token can end inside a multi-byte character: show raw bytes.
        return self._pieces[token_id].decode("utf-8", "backslashreplace")

    def token_to_id(self, token: str | bytes) -> int:
        """Return the id of a token given as text or as its bytes.

        Raises:
            KeyError: if ``token`` is not in the vocabulary.
        """
        if token in self.special_tokens:
            return self.special_tokens.index(token)  # type: ignore[arg-type]
        data = token if isinstance(token, bytes) else _to_bytes(token)
        if data in self._piece_to_id:
            return self._piece_to_id[data]
        raise KeyError(token)

    def train(self, text: str, vocab_size: int) -> BPETokenizer:
        """Learn ``vocab_size - base_vocab_size`` merges from ``text``.

        Training stops early when no pair occurs twice any more (the text
        is too small for the requested vocabulary); ``vocab_size`` then
        reports what was learned.

        Args:
            text: training text (not empty).
            vocab_size: size of the final vocabulary, at least
                :attr:`base_vocab_size` (3 special tokens + 256 bytes).

        Returns:
            ``self``, trained (earlier merges are discarded).

        Raises:
            TypeError: if ``text`` is not a string or ``vocab_size`` not
                an int.
            ValueError: if ``text`` is empty or ``vocab_size`` is smaller
                than the base vocabulary.
        """
        _check_training_text(text)
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
            raise TypeError(
                f"vocab_size must be an int, got {type(vocab_size).__name__}"
            )
        if vocab_size < self.base_vocab_size:
            raise ValueError(
                f"vocab_size={vocab_size} is smaller than the base "
                f"vocabulary ({self.base_vocab_size} = "
                f"{len(self.special_tokens)} special tokens + 256 bytes)"
            )
        self._set_merges(
            _learn_merges(
                text,
                vocab_size - self.base_vocab_size,
                offset=len(self.special_tokens),
                first_id=self.base_vocab_size,
            )
        )
        return self

    def _encode_chunk(self, chunk: str) -> list[int]:
        n_special = len(self.special_tokens)
        ids = [n_special + b for b in _to_bytes(chunk)]
        ranks = self._ranks
        while len(ids) > 1:
            # Apply the earliest-learned merge present, as training did.
            best = None
            best_rank = None
            for pair in pairwise(ids):
                rank = ranks.get(pair)
                if rank is not None and (
                    best_rank is None or rank < best_rank
                ):
                    best, best_rank = pair, rank
            if best is None:
                break
            ids = _merge_ids(ids, best, best_rank)
        return ids

    def _encode_text(self, text: str) -> list[int]:
        cache = self._cache
        out: list[int] = []
        for chunk in pretokenize(text):
            ids = cache.get(chunk)
            if ids is None:
                ids = self._encode_chunk(chunk)
                if len(cache) < 100_000:
                    cache[chunk] = ids
            out.extend(ids)
        return out

    def _decode_ids(self, ids: list[int], skip_special: bool) -> str:
        n_special = len(self.special_tokens)
        parts: list[str] = []
        pending = bytearray()
        for i in ids:
            if i >= n_special:
                pending += self._pieces[i]
                continue
            if pending:
                parts.append(_from_bytes(bytes(pending)))
                pending = bytearray()
            if not skip_special:
                parts.append(self.special_tokens[i])
        if pending:
            parts.append(_from_bytes(bytes(pending)))
        return "".join(parts)

    def _state(self) -> dict[str, Any]:
        return {"merges": [list(p) for p in self._merges]}

    @classmethod
    def _from_state(cls, state: dict[str, Any]) -> BPETokenizer:
        return cls([tuple(p) for p in state["merges"]])


def _merge_ids(
    ids: Sequence[int], pair: tuple[int, int], new_id: int
) -> list[int]:
    """Replace every non-overlapping ``pair`` in ``ids``, left to right."""
    a, b = pair
    out = []
    i = 0
    n = len(ids)
    while i < n:
        if i + 1 < n and ids[i] == a and ids[i + 1] == b:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def _learn_merges(
    text: str, num_merges: int, *, offset: int, first_id: int
) -> list[tuple[int, int]]:
    """Learn up to ``num_merges`` BPE merges with incremental pair counts.

    Args:
        text: training text.
        num_merges: how many merges to learn at most.
        offset: id of byte 0.
        first_id: id of the first merged token.

    Returns:
        The merges, in order.
    """
    chunk_counts = Counter(pretokenize(text))
    words: list[list[int]] = []
    freqs: list[int] = []
    for chunk, count in chunk_counts.items():
        words.append([offset + b for b in _to_bytes(chunk)])
        freqs.append(count)

    pair_counts: Counter[tuple[int, int]] = Counter()
    where: dict[tuple[int, int], set[int]] = {}
    for w, (ids, freq) in enumerate(zip(words, freqs, strict=True)):
        for pair in pairwise(ids):
            pair_counts[pair] += freq
            where.setdefault(pair, set()).add(w)
    # Max-heap by count, then smallest pair: entries are (-count, pair);
    # stale entries (count changed since the push) are skipped on pop.
    heap = [(-c, p) for p, c in pair_counts.items()]
    heapq.heapify(heap)

    merges: list[tuple[int, int]] = []
    while len(merges) < num_merges and heap:
        neg, pair = heapq.heappop(heap)
        count = pair_counts.get(pair, 0)
        if count != -neg:
            continue  # stale
        if count < 2:
            break  # nothing repeats: further merges would memorise text
        new_id = first_id + len(merges)
        merges.append(pair)
        changed: set[tuple[int, int]] = set()
        for w in where.pop(pair, ()):
            ids = words[w]
            if len(ids) < 2:
                continue
            new_ids = _merge_ids(ids, pair, new_id)
            if len(new_ids) == len(ids):
                continue  # this chunk no longer holds the pair
            freq = freqs[w]
            for p in pairwise(ids):
                pair_counts[p] -= freq
                changed.add(p)
            for p in pairwise(new_ids):
                pair_counts[p] += freq
                changed.add(p)
                where.setdefault(p, set()).add(w)
            words[w] = new_ids
        pair_counts.pop(pair, None)
        changed.discard(pair)
        for p in changed:
            c = pair_counts.get(p, 0)
            if c > 0:
                heapq.heappush(heap, (-c, p))
            else:
                pair_counts.pop(p, None)
    return merges


_TOKENIZER_CLASSES: tuple[type[Tokenizer], ...] = (
    CharTokenizer,
    WordTokenizer,
    BPETokenizer,
)


def load_tokenizer(path: str | os.PathLike[str]) -> Tokenizer:
    """Read any tokenizer written by ``save``, whatever its class.

    Args:
        path: the JSON file.

    Returns:
        A :class:`CharTokenizer`, :class:`WordTokenizer` or
        :class:`BPETokenizer`.
    """
    return Tokenizer.load(path)
