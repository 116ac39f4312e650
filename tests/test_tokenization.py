"""Character, word and BPE tokenizers: round trips, merges, errors."""

from __future__ import annotations

import json
import os
import stat
from collections import Counter
from itertools import pairwise

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_book import data
from transformer_book.tokenization import (
    BPETokenizer,
    CharTokenizer,
    Tokenizer,
    WordTokenizer,
    load_tokenizer,
    pretokenize,
)

SAMPLE = (
    "The quick brown fox jumps over the lazy dog. The dog sleeps; "
    "the fox doesn't.\n    def f(x_1):\n        return x_1 ** 2  # 42\n"
) * 5
UNICODE = "naïve café — 東京 🙂 \u0301e\tfin\r\n"


@pytest.fixture(scope="module")
def docs_train():
    train, _ = data.python_docs_split()
    return train[:60_000]


@pytest.fixture(scope="module")
def bpe(docs_train):
    return BPETokenizer().train(docs_train, 400)


# --------------------------------------------------------------------------
# Pre-tokenization
# --------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.text())
def test_pretokenize_covers_the_text(text):
    assert "".join(pretokenize(text)) == text


def test_pretokenize_keeps_leading_space_with_words():
    assert pretokenize("it's  a_b 12x") == [
        "it", "'s", " ", " a", "_", "b", " 12", "x",
    ]


# --------------------------------------------------------------------------
# BPE
# --------------------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(st.text(alphabet=st.characters(), max_size=200))
def test_bpe_round_trip_on_arbitrary_unicode(bpe, text):
    ids = bpe.encode(text)
    assert all(0 <= i < bpe.vocab_size for i in ids)
    assert bpe.decode(ids) == text


@settings(max_examples=30, deadline=None)
@given(st.text(min_size=1, max_size=300))
def test_bpe_trained_on_arbitrary_text_round_trips(text):
    tok = BPETokenizer().train(text, 300)
    assert tok.decode(tok.encode(text)) == text
    assert tok.decode(tok.encode(UNICODE)) == UNICODE


def test_bpe_round_trip_lone_surrogate(bpe):
    text = "a\ud800b"
    assert bpe.decode(bpe.encode(text)) == text


def test_bpe_merges_are_deterministic(docs_train):
    a = BPETokenizer().train(docs_train, 350)
    b = BPETokenizer().train(docs_train, 350)
    assert a.merges == b.merges
    assert len(a.merges) == 350 - BPETokenizer.base_vocab_size
    assert a.vocab_size == 350


def _naive_merges(text, num_merges):
    """Reference BPE: recount every pair of every chunk before each merge."""
    chunks = pretokenize(text)
    words = Counter(tuple(3 + b for b in c.encode()) for c in chunks)
    merges = []
    for step in range(num_merges):
        counts = Counter()
        for w, f in words.items():
            for p in pairwise(w):
                counts[p] += f
        if not counts:
            break
        best = min(counts, key=lambda p: (-counts[p], p))
        if counts[best] < 2:
            break
        new_id = BPETokenizer.base_vocab_size + step
        merges.append(best)
        merged = Counter()
        for w, f in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(new_id)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            merged[tuple(out)] += f
        words = merged
    return merges


@pytest.mark.parametrize(
    "text",
    [
        SAMPLE,
        "aaaaaaa bbbb aaaa abab abab ab",  # overlapping repeats
        "low lower lowest newer wider " * 4,
    ],
)
def test_bpe_incremental_counts_match_full_recount(text):
    tok = BPETokenizer().train(text, 300)
    assert tok.merges == _naive_merges(text, 300 - 259)


def test_bpe_merges_do_not_cross_chunks():
    tok = BPETokenizer().train("ab ab ab ab ab ab", 270)
    pieces = tok.merge_pieces()
    assert (b" a", b"b") in pieces or (b"a", b"b") in pieces
    assert all(not (a + b).endswith(b" ") for a, b in pieces)
    assert all(b" " not in (a + b)[1:] for a, b in pieces)


def test_bpe_stops_when_nothing_repeats():
    tok = BPETokenizer().train("abcdef", 1000)
    assert tok.vocab_size == BPETokenizer.base_vocab_size
    assert tok.merges == []


def test_bpe_learns_whole_words():
    tok = BPETokenizer().train("low lower lowest " * 20, 266)
    assert tok.tokens(" lowest") == [" lowest"]
    assert tok.tokens("slower") == ["s", "low", "e", "r"]
    assert tok.token_to_id("low") == tok.encode("low")[0]
    assert tok.token_bytes(tok.token_to_id(" lower")) == b" lower"


def test_bpe_compresses_text(bpe, docs_train):
    assert len(bpe.encode(docs_train)) < 0.6 * len(docs_train.encode())


def test_untrained_bpe_is_a_byte_tokenizer():
    tok = BPETokenizer()
    assert tok.vocab_size == 259
    assert tok.encode("é") == [3 + 0xC3, 3 + 0xA9]


# --------------------------------------------------------------------------
# Characters
# --------------------------------------------------------------------------


def test_char_tokenizer_round_trip_with_byte_fallback():
    tok = CharTokenizer().train("hello world")
    assert tok.alphabet == sorted(set("hello world"))
    assert tok.vocab_size == 3 + 256 + len(tok.alphabet)
    text = "hello " + UNICODE
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    # Seen characters take one id; an unseen one its UTF-8 bytes.
    assert len(tok.encode("hello")) == 5
    assert len(tok.encode("東")) == 3


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.characters(), max_size=100))
def test_char_tokenizer_lossless_on_arbitrary_text(text):
    tok = CharTokenizer().train(SAMPLE)
    assert tok.decode(tok.encode(text)) == text


def test_char_tokenizer_without_fallback_names_the_character():
    tok = CharTokenizer(byte_fallback=False).train("abc")
    assert tok.vocab_size == 6
    assert tok.decode(tok.encode("cab")) == "cab"
    with pytest.raises(ValueError, match="'z'.*U\\+007A"):
        tok.encode("abz")


def test_char_tokenizer_id_to_token():
    tok = CharTokenizer().train("ab")
    assert tok.id_to_token(0) == "<pad>"
    assert tok.id_to_token(3 + 0x41) == "<0x41>"
    assert tok.id_to_token(tok.token_to_id("b")) == "b"
    assert tok.token_to_id("<0x41>") == 3 + 0x41


# --------------------------------------------------------------------------
# Words
# --------------------------------------------------------------------------


def test_word_tokenizer_unknown_words_map_to_unk():
    tok = WordTokenizer().train("the cat sat on the mat")
    assert tok.unk_id == 3 and tok.id_to_token(3) == "<unk>"
    ids = tok.encode("the dog sat")
    assert ids[1] == tok.unk_id
    assert tok.decode(ids) == "the <unk> sat"
    assert tok.words[0] == "the"  # most frequent first


def test_word_tokenizer_min_freq_and_max_size():
    text = "a a a b b c d d d d"
    assert WordTokenizer().train(text, min_freq=2).words == ["d", "a", "b"]
    assert WordTokenizer().train(text, max_size=2).words == ["d", "a"]
    tok = WordTokenizer().train(text, min_freq=3)
    assert tok.encode("b c a") == [3, 3, tok.token_to_id("a")]


def test_word_tokenizer_splits_punctuation_and_lowercases():
    tok = WordTokenizer(lowercase=True).train("Hello, World! hello")
    assert tok.split("Hello, x_y.") == ["hello", ",", "x_y", "."]
    assert tok.words[0] == "hello"
    assert tok.decode(tok.encode("HELLO world!")) == "hello world !"


# --------------------------------------------------------------------------
# Shared interface
# --------------------------------------------------------------------------


def _trained():
    return [
        CharTokenizer().train(SAMPLE),
        CharTokenizer(byte_fallback=False).train(SAMPLE),
        WordTokenizer(lowercase=True).train(SAMPLE, min_freq=2),
        BPETokenizer().train(SAMPLE, 300),
    ]


@pytest.mark.parametrize("tok", _trained(), ids=repr)
def test_save_load_round_trip(tok, tmp_path):
    path = tok.save(tmp_path / "sub" / "tok.json")
    assert path.exists()
    assert not [p for p in path.parent.iterdir() if p.name != "tok.json"]
    again = type(tok).load(path)
    assert type(again) is type(tok)
    assert again.vocab_size == tok.vocab_size
    assert again.encode(SAMPLE) == tok.encode(SAMPLE)
    assert load_tokenizer(path).encode(SAMPLE) == tok.encode(SAMPLE)
    payload = json.loads(path.read_text(encoding="utf-8"))
    assert payload["type"] == type(tok).__name__
    assert payload["special_tokens"][:3] == ["<pad>", "<bos>", "<eos>"]


def test_load_rejects_another_kind(tmp_path):
    path = CharTokenizer().train("ab").save(tmp_path / "c.json")
    with pytest.raises(ValueError, match="not a BPETokenizer"):
        BPETokenizer.load(path)


@pytest.mark.parametrize("tok", _trained(), ids=repr)
def test_special_tokens(tok):
    assert (tok.pad_id, tok.bos_id, tok.eos_id) == (0, 1, 2)
    ids = tok.encode("the fox", bos=True, eos=True)
    assert ids[0] == 1 and ids[-1] == 2
    assert tok.decode(ids).startswith("<bos>")
    assert "<bos>" not in tok.decode(ids, skip_special=True)
    # A special token's name inside text stays ordinary text (a character
    # tokenizer without byte fallback cannot spell "<" and says so).
    if isinstance(tok, CharTokenizer) and not tok.byte_fallback:
        with pytest.raises(ValueError, match="'<'"):
            tok.encode("<pad>")
    else:
        assert 0 not in tok.encode("<pad>")


@pytest.mark.parametrize("tok", _trained(), ids=repr)
def test_decode_accepts_tensors_and_arrays(tok):
    ids = tok.encode("the fox")
    expected = tok.decode(ids)
    assert tok.decode(torch.tensor(ids)) == expected
    assert tok.decode(np.array(ids)) == expected
    assert tok.decode(tuple(ids)) == expected


# --------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "train",
    [
        lambda: CharTokenizer().train(""),
        lambda: WordTokenizer().train(""),
        lambda: BPETokenizer().train("", 300),
    ],
)
def test_empty_training_text(train):
    with pytest.raises(ValueError, match="text is empty"):
        train()


def test_word_tokenizer_whitespace_only_text():
    with pytest.raises(ValueError, match="text has no word"):
        WordTokenizer().train("  \n ")


def test_bpe_vocab_size_smaller_than_alphabet():
    too_small = "vocab_size=100 must be at least 259"
    with pytest.raises(ValueError, match=too_small):
        BPETokenizer().train("some text", 100)


def test_bpe_vocab_size_type():
    with pytest.raises(TypeError, match="vocab_size"):
        BPETokenizer().train("some text", 300.0)


@pytest.mark.parametrize("tok", _trained(), ids=repr)
def test_decode_out_of_vocabulary_id(tok):
    with pytest.raises(ValueError, match=f"token id {tok.vocab_size} in ids"):
        tok.decode([0, tok.vocab_size])
    with pytest.raises(ValueError, match="token id -1 in ids"):
        tok.decode([-1])


@pytest.mark.parametrize("tok", _trained(), ids=repr)
def test_wrong_types(tok):
    with pytest.raises(TypeError, match="text must be a str"):
        tok.encode(b"bytes")
    with pytest.raises(TypeError, match="ids must"):
        tok.decode("abc")
    with pytest.raises(TypeError, match="ids must hold int token ids"):
        tok.decode([1.5])
    with pytest.raises(ValueError, match="token id 99999 in token_id"):
        tok.id_to_token(99999)


def test_training_text_type():
    with pytest.raises(TypeError, match="text must be a str"):
        BPETokenizer().train(["a list"], 300)


def test_word_tokenizer_bad_min_freq():
    with pytest.raises(ValueError, match="min_freq=0"):
        WordTokenizer().train("a b", min_freq=0)
    with pytest.raises(TypeError, match="max_size"):
        WordTokenizer().train("a b", max_size="3")


def test_bad_merges():
    with pytest.raises(ValueError, match="merges"):
        BPETokenizer([(3, 9999)])


def test_base_class_is_abstract():
    with pytest.raises(TypeError, match="abstract"):
        Tokenizer()


# --------------------------------------------------------------------------
# Regressions (issue 9)
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tok",
    [*_trained(), BPETokenizer(), BPETokenizer().train(UNICODE * 5, 300)],
    ids=repr,
)
def test_token_to_id_inverts_id_to_token_for_every_id(tok):
    # BPE used to show the 128 bytes 0x80-0xFF as "\\xNN", which
    # token_to_id read as four ASCII bytes: the identity failed for them.
    for i in range(tok.vocab_size):
        assert tok.token_to_id(tok.id_to_token(i)) == i, i


def test_bpe_shows_bytes_that_are_not_text_as_hex():
    tok = BPETokenizer().train("é é é é", 262)
    assert tok.id_to_token(3 + 0xC3) == "<0xC3>"
    assert tok.id_to_token(3 + ord("<")) == "<"
    assert tok.tokens("é") == ["é"]
    # A merged piece that ends inside a character keeps its text part.
    half = BPETokenizer([(3 + ord(" "), 3 + 0xC3)])
    assert half.id_to_token(259) == " <0xC3>"
    assert half.token_to_id(" <0xC3>") == 259


def test_bpe_display_cannot_be_confused_with_an_escape():
    # Hand-made merges spelling "<0xC3>" and "<pad>" as plain text: their
    # displays must differ from the byte token's and the special token's.
    ids = [3 + b for b in b"<0xC3>"]
    merges = [(ids[0], ids[1])]
    for b in ids[2:]:
        merges.append((259 + len(merges) - 1, b))
    pad = [3 + b for b in b"<pad>"]
    merges.append((pad[0], pad[1]))
    for b in pad[2:]:
        merges.append((259 + len(merges) - 1, b))
    tok = BPETokenizer(merges)
    shown = {tok.id_to_token(i) for i in range(tok.vocab_size)}
    assert len(shown) == tok.vocab_size
    for i in range(tok.vocab_size):
        assert tok.token_to_id(tok.id_to_token(i)) == i


@pytest.mark.parametrize(
    "content, match",
    [
        ("[1, 2]", r"holds \[1, 2\], not a JSON object"),
        ("null", "holds null, not a JSON object"),
        ("{", "not JSON"),
        ('{"version": 1, "type": "BPETokenizer"}', "'merges'"),
        ('{"version": 1, "type": "CharTokenizer", "chars": []}',
         "'byte_fallback'"),
        ('{"version": 1, "type": "WordTokenizer", "words": "ab",'
         ' "lowercase": false}', "'words'"),
        ('{"version": 1, "type": "BPETokenizer", "merges": [[3]]}',
         "merges"),
        ('{"version": 2, "type": "BPETokenizer", "merges": []}',
         "format version 2"),
        ('{"version": 1, "type": "Nope"}', "type='Nope'"),
    ],
)
def test_load_rejects_malformed_files(tmp_path, content, match):
    path = tmp_path / "tok.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=match) as info:
        load_tokenizer(path)
    assert "tok.json" in str(info.value)


def test_saved_file_has_the_mode_of_a_plain_open(tmp_path):
    old = os.umask(0o022)
    try:
        path = CharTokenizer().train("ab").save(tmp_path / "t.json")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
