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

Bigger data (the ``gpu`` preset) goes through one function,
:func:`download`: a pinned URL and sha256, a cache directory
(:func:`cache_dir`), an atomic write and a clear error on a checksum
mismatch. :func:`tiny_shakespeare` and :func:`multi30k` are built on it.
"""

from __future__ import annotations

import copy
import functools
import gzip
import hashlib
import json
import os
import random
import re
import urllib.parse
import urllib.request
import zlib
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _package_version
from pathlib import Path
from typing import Any

from ._checks import check_choice, check_int, check_number
from ._io import atomic_open, atomic_write_bytes

__all__ = [
    "CACHE_ENV_VAR",
    "MULTI30K_BASE_URL",
    "MULTI30K_SHA256",
    "NUMBER_LANGUAGES",
    "TINY_SHAKESPEARE_SHA256",
    "TINY_SHAKESPEARE_URL",
    "NumberPairs",
    "cache_dir",
    "download",
    "multi30k",
    "number_pairs",
    "number_words",
    "python_docs_split",
    "python_docs_text",
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

    Raises:
        TypeError: if ``valid_fraction`` is not a real number.
        ValueError: if ``valid_fraction`` is not strictly between 0 and 1.
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
    cannot be read is regenerated.

    Args:
        lang: a code from :data:`NUMBER_LANGUAGES`.
        start: first number (at least 0).
        stop: one past the last number (greater than ``start``).
        cache: read and write the cache file.
        cache_dir: directory of the cache; :func:`cache_dir` when ``None``.

    Returns:
        The words for ``start, start + 1, ..., stop - 1``.

    Raises:
        TypeError: if an argument has the wrong type.
        ValueError: if ``lang`` is not supported or the range is empty or
            negative.
    """
    _check_language("lang", lang)
    start, stop = _check_range(start, stop)
    if lang == "digits":
        return [str(n) for n in range(start, stop)]
    directory = (
        Path(cache_dir) if cache_dir is not None else _default_cache_dir()
    )
    path = _number_cache_path(lang, start, stop, directory)
    if cache and path.exists():
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
            ):
                return words
        except (
            OSError, EOFError, zlib.error, ValueError, KeyError, TypeError
        ):
            pass  # damaged (bad gzip, bad JSON, wrong shape): regenerate
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
        atomic_write_bytes(path, data)
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

    Raises:
        TypeError: if an argument has the wrong type.
        ValueError: if ``src`` or ``tgt`` is not supported (the message
            lists the supported codes), the range is empty, or the
            fractions are not in [0, 1) with a sum below 1.
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


def download(
    url: str,
    sha256: str,
    *,
    filename: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    timeout: float = 60.0,
) -> Path:
    """Download ``url`` into the cache once, and check its sha256.

    A cached file whose checksum matches is returned without any request.
    Otherwise the body is streamed into a temporary file in the cache
    directory while it is hashed; only a matching file is renamed into
    place (an atomic ``os.replace``), so a crash or a bad download never
    leaves a half-written file under the final name. The file gets the
    permissions a plain ``open`` would give it (``0o666`` less the umask).

    Args:
        url: address of the file (``http``, ``https`` or ``file``).
        sha256: expected SHA-256 of the file, 64 hexadecimal digits.
        filename: name in the cache; the last part of the URL's path when
            ``None``.
        cache_dir: directory of the cache; :func:`cache_dir` when ``None``.
        timeout: seconds to wait for the server.

    Returns:
        Path of the verified file.

    Raises:
        TypeError: if ``url`` or ``sha256`` is not a string.
        ValueError: if ``sha256`` is not 64 hexadecimal digits, no file
            name can be derived, ``timeout`` is not positive, or the
            downloaded bytes do not match ``sha256`` (the partial file is
            removed).
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
    if filename is None:
        filename = Path(urllib.parse.urlparse(url).path).name
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
            for block in iter(lambda: response.read(1 << 16), b""):
                digest.update(block)
                out.write(block)
        actual = digest.hexdigest()
        if actual != expected:
            raise ValueError(
                f"checksum mismatch for {url}: expected sha256={expected}, "
                f"got {actual}; the downloaded file was removed"
            )
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

    Raises:
        ValueError: if ``split``, ``src`` or ``tgt`` is not one of the
            values above, or ``src == tgt``.
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
