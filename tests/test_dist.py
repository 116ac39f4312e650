"""The release: the version in one place, a changelog entry for it, and
`make test` building and checking the sdist and the wheel (`make dist`)."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib
from packaging.version import Version

import transformer_book

ROOT = Path(__file__).resolve().parents[1]


def test_the_version_lives_in_the_package_only():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"]
    assert project["project"]["dynamic"] == ["version"]
    dynamic = project["tool"]["setuptools"]["dynamic"]["version"]
    assert dynamic == {"attr": "transformer_book.__version__"}
    # A version pip and the build tools accept, written as they write it.
    assert str(Version(transformer_book.__version__)) == (
        transformer_book.__version__)


def test_the_changelog_has_an_entry_for_the_version():
    text = (ROOT / "CHANGELOG.md").read_text()
    releases = re.findall(
        r"^## \[(\d[^\]]*)\] - (\d{4}-\d{2}-\d{2})$", text, re.MULTILINE
    )
    assert releases, "no '## [X.Y.Z] - YYYY-MM-DD' heading"
    # The newest release (first) is the package's version.
    assert releases[0][0] == transformer_book.__version__
    versions = [Version(v) for v, _ in releases]
    assert versions == sorted(versions, reverse=True)
    # Each release heading has its link at the bottom.
    for version, _ in releases:
        assert re.search(rf"^\[{re.escape(version)}\]: https://", text,
                         re.MULTILINE), version
