"""Atomic file writes: the one way the package writes a file.

Downloads, the number-words cache, tokenizer JSON and training checkpoints
all go through :func:`atomic_open`, so a crash or an error mid-write never
leaves a half-written file under the final name, and every file gets the
permissions a plain ``open`` would give it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

__all__ = ["atomic_open", "atomic_write_bytes"]


@contextlib.contextmanager
def atomic_open(path: Path, suffix: str = ".tmp") -> Iterator[BinaryIO]:
    """Open a temporary file beside ``path``; rename it there on success.

    The temporary file is created with ``os.open(..., 0o666)``, so the
    kernel applies the umask and the final file has the mode a plain
    ``open(path, "wb")`` would give it (``tempfile.mkstemp`` would make it
    0600 whatever the umask, unreadable to the other users of a shared
    cache). Its content is flushed to disk before the rename. If the block
    raises (``KeyboardInterrupt`` included), the temporary file is removed
    and ``path`` is untouched.

    Args:
        path: the final file; its parent folders are created.
        suffix: ending of the temporary file's name.

    Yields:
        The temporary file, open for binary writing.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    while True:
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}{suffix}")
        try:
            fd = os.open(tmp, flags, 0o666)
            break
        except FileExistsError:  # pragma: no cover - 48 random bits
            continue
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename."""
    with atomic_open(path) as f:
        f.write(data)
