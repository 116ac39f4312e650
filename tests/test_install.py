"""The built wheel installs into a clean environment and works there.

``make dist`` builds the wheel (``_build/dist``); this test installs that
wheel into a fresh virtual environment that holds only the package's
runtime dependencies: the ones ``pyproject.toml`` declares, and theirs,
taken from this environment (linked, not downloaded again: torch alone is
a large wheel). ``pip check`` then proves the declared dependencies are
met, every module imports, and the book toolchain is absent. The book
toolchain comes with the ``book`` extra. Slow (a fresh venv), so
`make test` runs it with the other slow checks, after ``make dist``.
"""

from __future__ import annotations

import importlib.metadata as metadata
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
DIST = ROOT / "_build" / "dist"

CHECK = """
import importlib, importlib.util, pkgutil
import transformer_book
names = [m.name for m in pkgutil.walk_packages(
    transformer_book.__path__, "transformer_book.")]
for name in names:
    importlib.import_module(name)
from transformer_book import _book
assert _book.preset() in ("cpu", "gpu")
for tool in ("jupyter_book", "myst_nb", "sphinx", "pytest", "mlxtend"):
    assert importlib.util.find_spec(tool) is None, tool
from transformer_book.tokenization import BPETokenizer, Tokenizer
assert issubclass(BPETokenizer, Tokenizer)
from transformer_book import data
text = data.tiny_shakespeare()  # the wheel's embedded copy, checked
assert len(text) == 1_115_394 and text.startswith("First Citizen:")
print("modules:", len(names))
print("file:", transformer_book.__file__)
"""


def runtime_closure(name: str) -> list[metadata.Distribution]:
    """The distributions ``name`` needs at run time, with no extras."""
    seen: dict[str, metadata.Distribution] = {}
    todo = [Requirement(r) for r in metadata.requires(name) or []]
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        key = canonicalize_name(req.name)
        if key in seen:
            continue
        dist = metadata.distribution(req.name)
        seen[key] = dist
        todo += [Requirement(r) for r in dist.requires or []]
    return list(seen.values())


def link_distributions(dists: list[metadata.Distribution], to: Path) -> None:
    """Link each distribution's top-level files and folders into ``to``."""
    to.mkdir()
    for dist in dists:
        site = Path(str(dist.locate_file("")))
        tops = {Path(str(f)).parts[0] for f in dist.files or []}
        for top in tops - {".."}:
            if (site / top).exists() and not (to / top).exists():
                (to / top).symlink_to(site / top)


def built_wheel() -> Path:
    """The wheel of ``make dist``, checked to hold today's sources."""
    wheels = sorted(DIST.glob("transformer_book-*.whl"))
    assert len(wheels) == 1, f"no single wheel in {DIST}: run 'make dist'"
    with zipfile.ZipFile(wheels[0]) as wheel:
        shipped = {
            name: wheel.read(name) for name in wheel.namelist()
            if name.startswith("transformer_book/") and name.endswith(".py")
        }
    src = ROOT / "src"
    sources = {
        str(p.relative_to(src)): p.read_bytes()
        for p in (src / "transformer_book").rglob("*.py")
    }
    stale = sorted(set(shipped) ^ set(sources)) + sorted(
        n for n in set(shipped) & set(sources) if shipped[n] != sources[n]
    )
    assert not stale, f"the wheel is stale ({stale[:3]}): run 'make dist'"
    return wheels[0]


def test_the_wheel_installs_and_imports_with_runtime_dependencies_only(
    tmp_path,
):
    wheel = built_wheel()
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    deps = tmp_path / "deps"
    link_distributions(runtime_closure("transformer-book"), deps)
    (site,) = (env_dir / "lib").glob("python3*/site-packages")
    (site / "runtime-deps.pth").write_text(f"{deps}\n")

    def run(*args: str) -> str:
        result = subprocess.run([str(python), *args], capture_output=True,
                                text=True, cwd=tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr[-3000:]
        return result.stdout

    # This environment's pip, installing into the new one: no download.
    def pip(*args: str) -> None:
        result = subprocess.run(
            [sys.executable, "-m", "pip", "--python", str(python),
             "--quiet", *args],
            capture_output=True, text=True,
        )
        assert result.returncode == 0, result.stdout + result.stderr[-3000:]

    pip("install", "--no-deps", "--no-index", str(wheel))
    pip("check")  # every declared dependency is met by the linked ones
    output = run("-c", CHECK)
    assert "modules:" in output
    # The package came from the new venv's site-packages (the wheel's
    # copy), not from this checkout's src/ (an editable install).
    (line,) = [s for s in output.splitlines() if s.startswith("file:")]
    location = Path(line.removeprefix("file:").strip()).resolve()
    assert location.is_relative_to(env_dir.resolve()), location
    assert not location.is_relative_to(ROOT), location
