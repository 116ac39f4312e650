"""What `make test` runs: every check, each once, with pinned tools.

``make -n -B test`` prints the commands `make test` would run (all of
them, as on a fresh clone) without running any: the tests read what make
itself resolved, not the Makefile's text.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def commands() -> str:
    assert shutil.which("make"), "make is missing"
    result = subprocess.run(["make", "-n", "-B", "test"], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    # One command a line: continuation lines joined, spaces folded.
    return re.sub(r"[ \t]*\\\n[ \t]*", " ", result.stdout)


@pytest.mark.parametrize("pattern", [
    r"ruff check \.",
    r"scripts/lint_pages\.py",
    r"check-jsonschema --builtin-schema vendor\.github-workflows"
    r" \.github/workflows/test\.yml \.github/workflows/book\.yml",
    r"bin/mypy",
    r"pytest -q -n \d+ -m \"not slow\" --doctest-modules",
    r"-m build --outdir _build/dist \.",
    r"twine check --strict _build/dist/\*",
    r"execute_pages\.py .*--hash-file _build/\.package-hash",
    r"jupyter-book build \. --path-output \. -n -W --keep-going",
    r"execute_pages\.py .*--smoke",
    r"pytest -q -n \d+ --dist loadfile -m slow",
])
def test_make_test_runs_each_check(commands, pattern):
    assert re.search(pattern, commands), pattern


@pytest.mark.parametrize("pattern", [
    r"execute_pages\.py [^\n]*--hash-file",
    r"execute_pages\.py [^\n]*--smoke",
    r"jupyter-book build",
    r"pytest -q -n \d+ -m \"not slow\"",
    r"pytest -q -n \d+ --dist loadfile -m slow",
])
def test_make_test_executes_the_pages_and_the_tests_once(commands, pattern):
    """(The wheel shows twice: ``-B`` also remakes it for ``make slow``,
    where it is up to date in a real run.)"""
    assert len(re.findall(pattern, commands)) == 1, pattern


@pytest.mark.parametrize("tool", [
    "torch", "build", "twine", "check-jsonschema",
])
def test_make_test_installs_its_tools_pinned(commands, tool):
    assert re.search(rf"pip install [^\n]*\b{tool}==\d+\.\d+", commands), tool


def test_the_strict_build_keeps_the_execution_cache(commands):
    """Sphinx reads every page afresh; pages do not execute twice."""
    (line,) = [c for c in commands.splitlines()
               if c.startswith("rm -rf _build/html")]
    assert ".doctrees" in line and ".jupyter_cache" not in line
    assert "rm -rf _build\n" not in commands
