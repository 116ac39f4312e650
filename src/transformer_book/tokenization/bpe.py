"""Byte-level byte-pair encoding (Sennrich et al., 2016), as in GPT-2."""

from __future__ import annotations

import heapq
import operator
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import pairwise
from typing import Any, ClassVar

from .._checks import check_int
from .base import (
    SPECIAL_TOKENS,
    Tokenizer,
    _check_training_text,
    _from_bytes,
    _to_bytes,
)

__all__ = ["PRETOKENIZE_PATTERN", "BPETokenizer", "pretokenize"]

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

#: How :meth:`BPETokenizer.id_to_token` writes one byte that it cannot
#: show as text.
_BYTE_ESCAPE_RE = re.compile(r"<0x([0-9A-F]{2})>")


def pretokenize(text: str) -> list[str]:
    """Split text into the chunks BPE merges never cross.

    The chunks are the matches of ``PRETOKENIZE_PATTERN``: a word with
    its leading space (``" return"``), a number, a run of punctuation, or
    whitespace. Joined, they give ``text`` back.

    Args:
        text: any string.

    Returns:
        The chunks, in order.

    Example:
        >>> pretokenize("x = f(10)")
        ['x', ' =', ' f', '(', '10', ')']
    """
    return _PRETOKENIZE_RE.findall(text)


def _display(data: bytes, special_tokens: Sequence[str]) -> str:
    """Show a token's bytes as text that :func:`_parse_display` inverts.

    Valid UTF-8 is shown as its text. A token that is not valid UTF-8 on
    its own (a piece of a multi-byte character) shows each byte that is
    not part of a whole character as ``<0xHH>``; so that the display stays
    unambiguous, its ``<`` characters are written ``<0x3C>`` too. The same
    escaping applies to the rare valid token whose text already looks like
    an escape or like a special token's name.
    """
    # (text, is_escape) pieces: valid runs of text and escaped bytes.
    parts: list[tuple[str, bool]] = []
    rest = data
    while rest:
        try:
            parts.append((rest.decode("utf-8"), False))
            break
        except UnicodeDecodeError as error:
            parts.append((rest[: error.start].decode("utf-8"), False))
            bad = rest[error.start : error.end]
            parts.extend((f"<0x{b:02X}>", True) for b in bad)
            rest = rest[error.end :]
    text = "".join(p for p, _ in parts)
    if len(parts) <= 1 and not (
        text in special_tokens or _BYTE_ESCAPE_RE.search(text)
    ):
        return text
    return "".join(
        p if is_escape else p.replace("<", "<0x3C>") for p, is_escape in parts
    )


def _parse_display(token: str) -> bytes:
    """The bytes behind a token as :func:`_display` shows it."""
    out = bytearray()
    start = 0
    for match in _BYTE_ESCAPE_RE.finditer(token):
        out += _to_bytes(token[start : match.start()])
        out.append(int(match.group(1), 16))
        start = match.end()
    out += _to_bytes(token[start:])
    return bytes(out)


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

    :meth:`id_to_token` shows a token as its text. Half of the byte
    tokens (``0x80``-``0xFF``), and merged tokens that end inside a
    multi-byte character, are not text on their own: each such byte is
    shown as ``<0xHH>``, the spelling :class:`CharTokenizer` uses for its
    byte tokens, and :meth:`token_to_id` reads it back, so
    ``token_to_id(id_to_token(i)) == i`` for every id.

    Args:
        merges: learned merges as pairs of ids, in order, or ``None`` for
            none (a plain byte tokenizer; call :meth:`train`).

    Example:
        >>> tok = BPETokenizer().train("low lower lowest " * 20, 266)
        >>> tok.tokens(" lowest"), tok.tokens("slower")
        ([' lowest'], ['s', 'low', 'e', 'r'])
        >>> tok.tokens("é")
        ['<0xC3>', '<0xA9>']
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
        # A token can end inside a multi-byte character: see _display.
        return _display(self._pieces[token_id], self.special_tokens)

    def token_to_id(self, token: str | bytes) -> int:
        """Return the id of a token given as text or as its bytes.

        Text is read as :meth:`id_to_token` writes it: ``<0xHH>`` stands
        for the byte ``HH`` (so ``token_to_id(id_to_token(i)) == i`` holds
        for the byte tokens that are not text on their own too).

        Raises:
            KeyError: if ``token`` is not in the vocabulary.
        """
        if token in self.special_tokens:
            return self.special_tokens.index(token)
        data = token if isinstance(token, bytes) else _parse_display(token)
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
        vocab_size = check_int("vocab_size", vocab_size)
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
            # Apply the earliest-learned merge present (the lowest rank),
            # as training did.
            rank, best = min(
                ((ranks[p], p) for p in pairwise(ids) if p in ranks),
                default=(None, None),
            )
            if rank is None or best is None:
                break
            ids = _merge_ids(ids, best, rank)
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

    _saved = {"merges": list}

    def _state(self) -> dict[str, Any]:
        return {"merges": [list(p) for p in self._merges]}


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


