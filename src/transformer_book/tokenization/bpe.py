"""Byte-level byte-pair encoding (Sennrich et al., 2016), as in GPT-2."""

from __future__ import annotations

import heapq
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import pairwise
from typing import ClassVar

from .._checks import check_int
from .base import _BYTE_RE, Tokenizer, _check_text, _join, _to_bytes

__all__ = ["PRETOKENIZE_PATTERN", "BPETokenizer", "pretokenize"]

#: GPT-2's pre-tokenization pattern for the standard ``re`` module (which
#: lacks ``\p{L}``): contractions, an optional space and letters, digits or
#: other symbols (``_`` is a symbol), and whitespace.
PRETOKENIZE_PATTERN = (
    r"'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+"
    r"|\s+(?!\S)|\s+")
_PRETOKENIZE_RE = re.compile(PRETOKENIZE_PATTERN)
_FIRST_BYTE = len(Tokenizer.special_tokens)  # the id of byte 0


def pretokenize(text: str) -> list[str]:
    """Split text into the chunks BPE merges never cross; they join to it."""
    return _PRETOKENIZE_RE.findall(text)


def _display(data: bytes, special_tokens: Sequence[str]) -> str:
    """A token's text, each byte outside a whole character as ``<0xHH>``.

    Where that would be ambiguous, ``<`` is written ``<0x3C>`` too.
    """
    text = data.decode("utf-8", "surrogateescape")  # bad byte b: U+DC00 + b
    bad = [0xDC80 <= ord(c) <= 0xDCFF for c in text]
    if not (any(bad) or text in special_tokens or _BYTE_RE.search(text)):
        return text
    return "".join(
        f"<0x{ord(c) - 0xDC00:02X}>" if escape else c.replace("<", "<0x3C>")
        for c, escape in zip(text, bad, strict=True))


def _parse_display(token: str) -> bytes:
    """The bytes of a token as :func:`_display` shows it."""
    pieces = _BYTE_RE.split(token)  # text, hex, text, ..., hex, text
    return b"".join(bytes([int(p, 16)]) if i % 2 else _to_bytes(p)
                    for i, p in enumerate(pieces))


class BPETokenizer(Tokenizer):
    """Byte-level BPE (Sennrich et al., 2016; Radford et al., 2019). Ids:
    0-2 special, 3-258 bytes (``<0xHH>``), then one per merge.

    Args:
        merges: learned merges as pairs of ids, in order; ``None`` for
            none (a byte tokenizer).
    """

    #: Number of ids before the first merge (special tokens and bytes).
    base_vocab_size: ClassVar[int] = _FIRST_BYTE + 256
    _saved = {"merges": list}

    def __init__(self,
                 merges: Iterable[tuple[int, int]] | None = None) -> None:
        self._set_merges(() if merges is None else merges)

    def _set_merges(self, merges: Iterable[tuple[int, int]]) -> None:
        pieces = [b""] * _FIRST_BYTE + [bytes([b]) for b in range(256)]
        self._merges: list[tuple[int, int]] = []
        for pair in merges:
            if len(pair) != 2 or not all(
                    type(i) is int and _FIRST_BYTE <= i < len(pieces)
                    for i in pair):
                raise ValueError(
                    f"merges must hold pairs of ids in {_FIRST_BYTE}.."
                    f"{len(pieces) - 1}, got {pair!r}")
            a, b = pair
            self._merges.append((a, b))
            pieces.append(pieces[a] + pieces[b])
        self._pieces = pieces
        self._ranks = {pair: self.base_vocab_size + r
                       for r, pair in enumerate(self._merges)}
        self._piece_to_id = {p: i for i, p in enumerate(pieces)
                             if i >= _FIRST_BYTE}
        self._cache: dict[str, list[int]] = {}

    @property
    def merges(self) -> list[tuple[int, int]]:
        """The merges as pairs of ids; merge ``r`` makes id ``259 + r``."""
        return list(self._merges)

    def merge_pieces(self) -> list[tuple[bytes, bytes]]:
        """The merges as pairs of byte strings, in learning order."""
        return [(self._pieces[a], self._pieces[b]) for a, b in self._merges]

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes of a token (``b""`` for a special token)."""
        return self._pieces[self._check_id(token_id)]

    @property
    def vocab_size(self) -> int:
        return len(self._pieces)

    def _id_to_token(self, token_id: int) -> str:
        return _display(self._pieces[token_id], self.special_tokens)

    def token_to_id(self, token: str | bytes) -> int:
        """The id of a token given as its bytes or as ``id_to_token`` does."""
        if token in self.special_tokens:
            return self.special_tokens.index(token)
        data = token if isinstance(token, bytes) else _parse_display(token)
        return self._piece_to_id[data]

    def train(self, text: str, vocab_size: int) -> BPETokenizer:
        """Learn ``vocab_size - 259`` merges from ``text``, in place.

        Training stops early once no pair occurs twice.

        Args:
            text: training text, not empty.
            vocab_size: the final vocabulary size, at least 259.
        """
        _check_text(text, train=True)
        vocab_size = check_int(
            "vocab_size", vocab_size, minimum=self.base_vocab_size)
        num_merges = vocab_size - self.base_vocab_size
        self._set_merges(_learn_merges(text, num_merges))
        return self

    def _encode_chunk(self, chunk: str) -> list[int]:
        ids = [_FIRST_BYTE + b for b in _to_bytes(chunk)]
        while len(ids) > 1:
            # The earliest-learned merge present goes first, as in training.
            pair = min(pairwise(ids),
                       key=lambda p: self._ranks.get(p, math.inf))
            if pair not in self._ranks:
                break
            ids = _merge_ids(ids, pair, self._ranks[pair])
        return ids

    def _encode_text(self, text: str) -> list[int]:
        out: list[int] = []
        for chunk in pretokenize(text):
            ids = self._cache.get(chunk)
            if ids is None:
                ids = self._encode_chunk(chunk)
                if len(self._cache) < 100_000:  # bounded memory
                    self._cache[chunk] = ids
            out += ids
        return out

    def _decode_ids(self, ids: list[int], skip_special: bool) -> str:
        return _join(
            self._pieces[i] if i >= _FIRST_BYTE
            else "" if skip_special else self.special_tokens[i]
            for i in ids)


def _merge_ids(ids: Sequence[int], pair: tuple[int, int],
               new: int) -> list[int]:
    """Replace every non-overlapping ``pair`` in ``ids``, left to right."""
    (a, b), i = pair, 0
    out: list[int] = []
    while i < len(ids):
        if ids[i] == a and i + 1 < len(ids) and ids[i + 1] == b:
            out.append(new)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def _learn_merges(text: str, num_merges: int) -> list[tuple[int, int]]:
    """Up to ``num_merges`` merges, with pair counts updated incrementally.

    Identical chunks are counted once; after a merge only the chunks that
    held the pair are recounted; ties go to the smaller pair.
    """
    chunks = Counter(pretokenize(text))
    words = [[_FIRST_BYTE + b for b in _to_bytes(c)] for c in chunks]
    freqs = list(chunks.values())
    counts: Counter[tuple[int, int]] = Counter()
    where: dict[tuple[int, int], set[int]] = {}  # pair -> chunks with it
    for w, ids in enumerate(words):
        for pair in pairwise(ids):
            counts[pair] += freqs[w]
            where.setdefault(pair, set()).add(w)
    # A max-heap by count, then the smallest pair; stale entries skipped.
    heap = [(-c, p) for p, c in counts.items()]
    heapq.heapify(heap)
    merges: list[tuple[int, int]] = []
    while len(merges) < num_merges and heap:
        neg, pair = heapq.heappop(heap)
        if counts.get(pair, 0) != -neg:
            continue  # stale
        if -neg < 2:
            break  # nothing repeats: more merges would memorise the text
        new = BPETokenizer.base_vocab_size + len(merges)
        merges.append(pair)
        changed: set[tuple[int, int]] = set()
        for w in where.pop(pair, ()):
            old, words[w] = words[w], _merge_ids(words[w], pair, new)
            if len(old) == len(words[w]):
                continue  # the chunk no longer holds the pair
            for sign, ids in ((-1, old), (1, words[w])):
                for p in pairwise(ids):
                    counts[p] += sign * freqs[w]
                    changed.add(p)
                    if sign > 0:
                        where.setdefault(p, set()).add(w)
        changed.discard(pair)
        counts.pop(pair, None)
        for p in changed:
            if counts[p] > 0:
                heapq.heappush(heap, (-counts[p], p))
            else:
                del counts[p]
    return merges
