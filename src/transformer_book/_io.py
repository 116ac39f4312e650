"""Atomic file writes, the one way the package writes a file: a crash
mid-write never leaves a half-written file under the final name.
Checkpoints are also *verified*: a sha256 checksum of the whole file
travels in it, so any damage is found before it is read.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import os
import pickle
import re
import secrets
import stat
import struct
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import torch

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["atomic_open", "atomic_write_bytes", "load_verified",
           "save_verified"]


def _lock(fd: int, *, wait: bool) -> bool:
    """Lock ``fd`` for writing; ``False`` if another holder has it."""
    if fcntl is None:  # pragma: no cover - Windows refuses to delete
        return True  # an open file, which protects it instead
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except OSError:
        return False
    return True


def _remove_stale(path: Path, suffix: str) -> None:
    """Remove temporary files of ``path`` that no running write holds.

    A write holds a lock on its temporary file until the rename, and the
    system drops the lock when the process dies: a temporary file without
    a holder was left by a killed write.
    """
    pattern = re.compile(
        re.escape(f".{path.name}.") + "[0-9a-f]{12}" + re.escape(suffix))
    with contextlib.suppress(OSError), os.scandir(path.parent) as entries:
        for entry in (e for e in entries if pattern.fullmatch(e.name)):
            with contextlib.suppress(OSError):
                fd = os.open(entry.path, os.O_RDWR)
                try:
                    if _lock(fd, wait=False):
                        os.unlink(entry.path)
                finally:
                    os.close(fd)


@contextlib.contextmanager
def atomic_open(path: Path, suffix: str = ".tmp") -> Iterator[BinaryIO]:
    """Open ``.<name>.<12 hex digits><suffix>`` beside ``path`` for binary
    writing; flush it to disk and rename it to ``path`` on success.

    A new file gets the mode a plain ``open(path, "wb")`` would give it
    (``tempfile.mkstemp`` would make it 0600, unreadable to the other users
    of a shared cache); a replaced file keeps its mode. If the block raises
    (``KeyboardInterrupt`` included), ``path`` is untouched; temporary
    files left by a killed process are removed by the next write.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale(path, suffix)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    while True:
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}{suffix}")
        try:
            fd = os.open(tmp, flags, 0o666)
        except FileExistsError:  # pragma: no cover - 48 random bits
            continue
        # Another write's cleanup may remove the file before it is locked.
        with contextlib.suppress(FileNotFoundError):
            locked = _lock(fd, wait=True)
            if locked and os.path.samestat(os.fstat(fd), os.stat(tmp)):
                break
        os.close(fd)  # pragma: no cover - a race of microseconds
    try:
        with contextlib.suppress(FileNotFoundError):  # a new file
            os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
            if fcntl is not None:  # rename while the lock is held
                os.replace(tmp, path)
        if fcntl is None:  # pragma: no cover - Windows renames closed files
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename."""
    with atomic_open(path) as f:
        f.write(data)


def write_csv(path: Path, rows: list[dict[str, Any]],
              fieldnames: Sequence[str]) -> None:
    """Write ``rows`` to ``path`` as CSV with a header, atomically."""
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=fieldnames)
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_bytes(path, text.getvalue().encode())


# --------------------------------------------------------------------------
# Verified torch files
# --------------------------------------------------------------------------

# ``torch.save`` writes a zip archive, which may end with a comment of up to
# 65535 bytes; zip readers, ``torch.load`` among them, skip it. A verified
# file's comment is this tag and the sha256 of every byte before it.
_TAG = b"transformer_book sha256 "
_TRAILER = len(_TAG) + 64
_END_OF_ZIP = b"PK\x05\x06"  # the end-of-central-directory record's start
_END_OF_ZIP_SIZE = 22  # its size with no comment; the last 2: comment size


def save_verified(path: Path, obj: Any) -> None:
    """``torch.save(obj)`` to ``path`` atomically, with a sha256 checksum.

    The file stays a plain ``torch.save`` archive (``torch.load`` reads
    it); the checksum is its zip comment.
    """
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    data = buffer.getbuffer()
    end = len(data) - _END_OF_ZIP_SIZE
    if data[end : end + 4] != _END_OF_ZIP or data[-2:] != b"\0\0":
        raise RuntimeError(  # pragma: no cover - a new torch.save layout
            "torch.save wrote an archive that does not end with an empty "
            "zip comment: cannot add the checksum")
    head = bytes(data[:-2]) + struct.pack("<H", _TRAILER)
    digest = hashlib.sha256(head).hexdigest().encode("ascii")
    atomic_write_bytes(path, head + _TAG + digest)


def load_verified(path: Path, *,
                  map_location: str | torch.device | None = "cpu") -> Any:
    """Check the checksum of a :func:`save_verified` file, then load it.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        ValueError: if the file is damaged (truncated, altered) or is not
            a verified file.
    """
    data = Path(path).read_bytes()
    if not data:
        raise ValueError(f"{path} is empty: not a checkpoint")
    tag = data[-_TRAILER : -_TRAILER + len(_TAG)]
    if len(data) < _TRAILER + _END_OF_ZIP_SIZE or tag != _TAG:
        raise ValueError(f"{path} is truncated or not a transformer_book "
                         "checkpoint: it does not end with the sha256 "
                         "checksum that a checkpoint ends with")
    head, digest = memoryview(data)[:-_TRAILER], data[-64:]
    if hashlib.sha256(head).hexdigest().encode("ascii") != digest:
        raise ValueError(f"{path} is damaged: its content does not match its "
                         "sha256 checksum")
    try:
        return torch.load(
            io.BytesIO(data), map_location=map_location, weights_only=True)
    except pickle.UnpicklingError:  # its text advises weights_only=False
        raise ValueError(
            f"{path} passes its checksum but holds objects that "
            "weights_only=True refuses: not a checkpoint") from None
