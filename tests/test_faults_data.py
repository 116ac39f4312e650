"""Issue 21: data functions and tokenizers under faults and odd input.

An unwritable cache or data log costs the cache, never the result; a
damaged cache is regenerated; a tokenizer file is valid UTF-8 whatever
its alphabet.
"""

from __future__ import annotations

import gzip
import json
import warnings

import pytest

from transformer_book import _book as book
from transformer_book import data
from transformer_book.tokenization import (
    CharTokenizer,
    WordTokenizer,
    load_tokenizer,
)

STOP = 30  # a short range: num2words writes it in milliseconds


def _blocked(tmp_path):
    """A cache path that even root cannot create: it lies under a file."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    return blocker


def _no_warnings(fn, *args, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn(*args, **kwargs)
    assert not caught, [str(w.message) for w in caught]
    return result


def test_number_words_under_an_unwritable_cache_warns_once(tmp_path):
    expected = data.number_words("en", 0, STOP, cache=False)
    cache = _blocked(tmp_path) / "cache"
    with pytest.warns(UserWarning, match="cache") as caught:
        words = data.number_words("en", 0, STOP, cache_dir=cache)
    assert words == expected
    assert len(caught) == 1 and str(cache) in str(caught[0].message)
    assert caught[0].filename == __file__  # points at the caller
    # The same location again: the result, and no second warning.
    assert _no_warnings(
        data.number_words, "en", 0, STOP, cache_dir=cache
    ) == expected


def test_number_pairs_with_a_file_as_cache_dir_warns_once(tmp_path):
    expected = data.number_pairs(stop=STOP, cache=False)
    cache = _blocked(tmp_path)  # the cache folder is a regular file
    with pytest.warns(UserWarning, match="cache") as caught:
        pairs = data.number_pairs(stop=STOP, cache_dir=cache)
    assert pairs == expected
    assert len(caught) == 1  # one location: one warning for en and fr
    assert caught[0].filename == __file__
    assert _no_warnings(
        data.number_pairs, stop=STOP, cache_dir=cache
    ) == expected


@pytest.mark.parametrize("where", ["a folder", "under a file"])
def test_an_unwritable_data_log_warns_once(tmp_path, monkeypatch, where):
    log = tmp_path if where == "a folder" else _blocked(tmp_path) / "log"
    monkeypatch.delenv(book.DATA_LOG_ENV_VAR, raising=False)
    expected = data.python_docs_split(0.1)
    monkeypatch.setenv(book.DATA_LOG_ENV_VAR, str(log))
    with pytest.warns(UserWarning, match=book.DATA_LOG_ENV_VAR) as caught:
        assert data.python_docs_split(0.1) == expected
    assert len(caught) == 1 and str(log) in str(caught[0].message)
    assert caught[0].filename == __file__
    assert _no_warnings(data.number_pairs, stop=STOP, cache=False)


@pytest.mark.parametrize("damage", [0, None, "mixed"])
def test_a_damaged_number_words_cache_is_regenerated(tmp_path, damage):
    expected = data.number_words("fr", 0, STOP, cache_dir=tmp_path)
    (path,) = tmp_path.glob("number_words-*.json.gz")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        payload = json.load(f)
    if damage == "mixed":
        payload["words"][5] = 5  # one int among the strings
    else:
        payload["words"] = [damage] * STOP  # right length, wrong content
    path.write_bytes(gzip.compress(json.dumps(payload).encode()))
    assert data.number_words("fr", 0, STOP, cache_dir=tmp_path) == expected
    with gzip.open(path, "rt", encoding="utf-8") as f:  # rewritten
        assert json.load(f)["words"] == expected


@pytest.mark.parametrize(
    ("tok", "sample"),
    [
        (CharTokenizer().train("ab\ud800c\udfff"), "ba\ud800c\udfff?"),
        (CharTokenizer(byte_fallback=False).train("\udc80x"), "\udc80xx"),
        (WordTokenizer().train("a \ud800 b \ud800"), "a \ud800 b c"),
    ],
    ids=["char", "char-no-fallback", "word"],
)
def test_a_lone_surrogate_saves_as_valid_utf8_and_round_trips(
    tok, sample, tmp_path
):
    path = tok.save(tmp_path / "tok.json")
    json.loads(path.read_bytes().decode("utf-8"))  # strict: valid UTF-8
    again = load_tokenizer(path)
    assert type(again) is type(tok)
    assert again.vocab_size == tok.vocab_size
    ids = tok.encode(sample)
    assert again.encode(sample) == ids
    assert again.decode(ids) == tok.decode(ids)
    if isinstance(tok, CharTokenizer):
        assert again.alphabet == tok.alphabet
        assert again.decode(ids) == sample


def test_other_text_is_saved_unescaped(tmp_path):
    path = CharTokenizer().train("héllo €").save(tmp_path / "t.json")
    assert "€" in path.read_text(encoding="utf-8")


def test_a_word_that_json_cannot_keep_is_refused_by_save(tmp_path):
    # Two lone surrogates that form a pair: JSON reads them back as one
    # character, so the file would not give this tokenizer back.
    tok = WordTokenizer(["\ud83d\ude00"])
    with pytest.raises(ValueError, match="surrogate"):
        tok.save(tmp_path / "t.json")
    assert not (tmp_path / "t.json").exists()
