"""data.seed_cache: the data cache filled offline from reference copies,
and the data log that tells which data a page used."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from pathlib import Path

import pytest

from transformer_book import _book as book
from transformer_book import data

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("BOOK_DATA") or ROOT.parent / "shared" / "data")

TEXT = b"First Citizen:\nBefore we proceed any further, hear me speak.\n"
CAPTIONS = gzip.compress(b"Two dogs play.\nA man rides a bike.\n")
IDX = b"\x00\x00\x08\x01\x00\x00\x00\x03\x07\x02\x01"  # labels 7, 2, 1


def sha(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def reference(tmp_path, monkeypatch):
    """A small reference folder with the shared layout, and pins for it."""
    folder = tmp_path / "reference"
    (folder / "multi30k").mkdir(parents=True)
    (folder / "fashion-mnist").mkdir()
    (folder / "tinyshakespeare.txt").write_bytes(TEXT)
    (folder / "multi30k" / "train.en.gz").write_bytes(CAPTIONS)
    (folder / "fashion-mnist" / "t10k-labels-idx1-ubyte.gz").write_bytes(
        gzip.compress(IDX)
    )
    monkeypatch.setattr(data, "TINY_SHAKESPEARE_SHA256", sha(TEXT))
    monkeypatch.setattr(
        data,
        "MULTI30K_SHA256",
        {"train.en.gz": sha(CAPTIONS), "train.de.gz": sha(b"not here")},
    )
    # Fashion-MNIST is pinned (and cached) decompressed.
    monkeypatch.setattr(
        data, "FASHION_MNIST_SHA256", {"t10k-labels-idx1-ubyte": sha(IDX)}
    )
    return folder


@pytest.fixture
def offline(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("no download may happen")

    monkeypatch.setattr(data.urllib.request, "urlopen", refuse)


def test_seed_copies_verified_files_under_the_cache_names(
    reference, tmp_path, offline
):
    cache = tmp_path / "cache"
    before = snapshot(reference)
    report = data.seed_cache(reference, cache_dir=cache)
    assert report == {
        "tinyshakespeare.txt": "copied",
        "multi30k-train.en.gz": "copied",
        "multi30k-train.de.gz": "absent",
        "fashion-mnist/t10k-labels-idx1-ubyte": "copied",
    }
    assert (cache / "tinyshakespeare.txt").read_bytes() == TEXT
    assert (cache / "multi30k-train.en.gz").read_bytes() == CAPTIONS
    # Decompressed, as a download leaves it.
    assert (cache / "fashion-mnist" / "t10k-labels-idx1-ubyte").read_bytes() \
        == IDX
    assert not (cache / "multi30k-train.de.gz").exists()
    # The reference folder is only read.
    assert snapshot(reference) == before
    # The data functions find the copies and download nothing.
    assert data.tiny_shakespeare(cache_dir=cache) == TEXT.decode()
    assert data._fashion_mnist_file("t10k-labels-idx1-ubyte", cache) == IDX


def test_seed_again_verifies_and_keeps_the_cached_files(reference, tmp_path):
    cache = tmp_path / "cache"
    data.seed_cache(reference, cache_dir=cache)
    copied = snapshot(cache)
    report = data.seed_cache(reference, cache_dir=cache)
    assert report["tinyshakespeare.txt"] == "cached"
    assert report["fashion-mnist/t10k-labels-idx1-ubyte"] == "cached"
    assert snapshot(cache) == copied  # not rewritten


def test_a_bad_cached_file_is_replaced(reference, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "tinyshakespeare.txt").write_bytes(b"truncated")
    report = data.seed_cache(reference, cache_dir=cache)
    assert report["tinyshakespeare.txt"] == "copied"
    assert (cache / "tinyshakespeare.txt").read_bytes() == TEXT


def test_a_copy_that_fails_its_checksum_is_not_written(reference, tmp_path):
    cache = tmp_path / "cache"
    (reference / "tinyshakespeare.txt").write_bytes(TEXT + b"extra")
    with pytest.raises(ValueError, match=r"checksum mismatch for .*"
                       r"tinyshakespeare\.txt.*nothing was written"):
        data.seed_cache(reference, cache_dir=cache)
    # No file and no temporary file is left behind.
    assert not cache.exists() or list(cache.rglob("*")) == []


def test_a_gz_copy_is_checked_on_its_decompressed_bytes(reference, tmp_path):
    cache = tmp_path / "cache"
    target = reference / "fashion-mnist" / "t10k-labels-idx1-ubyte.gz"
    target.write_bytes(gzip.compress(IDX[:-1] + b"\x09"))
    with pytest.raises(ValueError, match="sha256=.* of the decompressed"):
        data.seed_cache(reference, cache_dir=cache)
    target.write_bytes(b"not gzip")
    with pytest.raises(ValueError, match="not a complete gzip file"):
        data.seed_cache(reference, cache_dir=cache)
    assert not (cache / "fashion-mnist" / "t10k-labels-idx1-ubyte").exists()


def test_seed_rejects_a_missing_folder(tmp_path):
    with pytest.raises(NotADirectoryError, match="not a folder"):
        data.seed_cache(tmp_path / "nowhere", cache_dir=tmp_path / "cache")


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"no copies at {SHARED}")
def test_seed_from_the_shared_reference_copies(tmp_path, offline):
    cache = tmp_path / "cache"
    report = data.seed_cache(SHARED, cache_dir=cache)
    assert set(report.values()) == {"copied"}, report
    assert len(report) == 1 + len(data.MULTI30K_SHA256) + len(
        data.FASHION_MNIST_SHA256
    )
    assert len(data.tiny_shakespeare(cache_dir=cache)) == 1_115_394
    assert len(data.multi30k("valid", cache_dir=cache)) == 1_014
    assert set(data.seed_cache(SHARED, cache_dir=cache).values()) == {
        "cached"
    }


def test_data_log_records_the_outermost_call_and_the_page(
    tmp_path, monkeypatch
):
    log = tmp_path / "data-use.jsonl"
    monkeypatch.delenv(book.DATA_LOG_ENV_VAR, raising=False)
    data.python_docs_split(0.1)
    assert not log.exists()  # no log unless asked for
    monkeypatch.setenv(book.DATA_LOG_ENV_VAR, str(log))
    monkeypatch.setenv(book.PAGE_ENV_VAR, "book/sequences/x.md")
    data.python_docs_split(0.1)  # calls python_docs_text: one record
    data.number_pairs(stop=30, cache=False)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert records == [
        {"page": "book/sequences/x.md", "call": "python_docs_split(0.1)"},
        {"page": "book/sequences/x.md",
         "call": "number_pairs(stop=30, cache=False)"},
    ]


def test_logged_functions_keep_their_name_and_docstring():
    assert data.fashion_mnist.__name__ == "fashion_mnist"
    assert "Fashion-MNIST" in data.fashion_mnist.__doc__
    assert data.fashion_mnist.__wrapped__.__module__ == data.__name__


def load_execute_pages():
    import importlib.util

    script = ROOT / "scripts" / "execute_pages.py"
    spec = importlib.util.spec_from_file_location("execute_pages", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def text_book(tmp_path, monkeypatch):
    """A book of one page without code: nothing to execute."""
    root = tmp_path / "book-root"
    (root / "book").mkdir(parents=True)
    (root / "book" / "page.md").write_text("# A page\n")
    (root / "_toc.yml").write_text("format: jb-book\nroot: book/page\n")
    monkeypatch.delenv("BOOK_PRESET", raising=False)
    monkeypatch.delenv("BOOK_SMOKE", raising=False)
    return root


def test_make_book_seeds_the_cache_before_executing(
    reference, text_book, tmp_path, monkeypatch, capsys
):
    """`make book BOOK_DATA=DIR`: execute_pages.py --seed-data DIR."""
    cache = tmp_path / "cache"
    monkeypatch.setenv(data.CACHE_ENV_VAR, str(cache))
    monkeypatch.setattr("sys.argv", [
        "execute_pages.py", "--root", str(text_book),
        "--seed-data", str(reference),
    ])
    assert load_execute_pages().main() == 0
    out = capsys.readouterr().out
    assert f"seeded from {reference}: 3 copied, 0 cached, 1 absent" in out
    assert (cache / "tinyshakespeare.txt").read_bytes() == TEXT


def test_a_bad_reference_folder_stops_before_any_page(
    reference, text_book, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv(data.CACHE_ENV_VAR, str(tmp_path / "cache"))
    (reference / "tinyshakespeare.txt").write_bytes(b"corrupt")
    monkeypatch.setattr("sys.argv", [
        "execute_pages.py", "--root", str(text_book),
        "--seed-data", str(reference),
    ])
    assert load_execute_pages().main() == 2
    assert "cannot seed the data cache: checksum mismatch" in (
        capsys.readouterr().err)
    assert not (text_book / "_build" / ".jupyter_cache").exists()
