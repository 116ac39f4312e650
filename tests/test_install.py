"""`pip install .` in a clean virtual environment gives a working package.

The package needs only its runtime dependencies; the book toolchain comes
with the ``book`` extra. Slow (a fresh venv), so `make test` runs it with
the other slow checks.
"""

from __future__ import annotations

import os
import subprocess
import venv
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]

CHECK = """
import importlib, importlib.util, pkgutil
import transformer_book
names = [m.name for m in pkgutil.walk_packages(
    transformer_book.__path__, "transformer_book.")]
for name in names:
    importlib.import_module(name)
from transformer_book import runtime
assert runtime.preset() in ("cpu", "gpu")
for tool in ("jupyter_book", "myst_nb", "sphinx", "pytest"):
    assert importlib.util.find_spec(tool) is None, tool
from transformer_book.tokenization import BPETokenizer, Tokenizer
assert issubclass(BPETokenizer, Tokenizer)
print("modules:", len(names))
print("file:", transformer_book.__file__)
"""


def test_pip_install_in_clean_venv(tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"

    def pip(*args: str) -> None:
        result = subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", *args],
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, result.stderr[-3000:]

    # torch first and pinned, as the Makefile does (a range would fetch a
    # CUDA build from the index), from TORCH_INDEX_URL when it is set, as
    # there: CI sets PyTorch's CPU index, where pip's default index holds
    # the multi-GB CUDA build.
    index = os.environ.get("TORCH_INDEX_URL", "").strip()
    pip("torch==2.13.0", *(["--index-url", index] if index else []))
    pip(str(ROOT))
    result = subprocess.run(
        [str(python), "-c", CHECK],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "modules:" in result.stdout
    # The package came from the new venv's site-packages (a wheel's copy),
    # not from this checkout's src/ (an editable install or a stray path).
    (line,) = [s for s in result.stdout.splitlines() if s.startswith("file:")]
    location = Path(line.removeprefix("file:").strip()).resolve()
    assert location.is_relative_to(env_dir.resolve()), location
    assert "site-packages" in location.parts, location
    assert not location.is_relative_to(ROOT), location
