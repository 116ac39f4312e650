"""The launch buttons open each page as a notebook.

The pages are MyST Markdown (``.md``) notebooks. Binder opens them as
notebooks through jupytext, given the environment in ``binder/``; Colab
(and Deepnote, JupyterLite) open only ``.ipynb`` files from a repository,
so the configuration must not offer them. The fast tests read
``_config.yml``, ``binder/`` and ``_toc.yml``; the browser check
(``tests/test_browser.py``) compares every built page's launch link with
:func:`binder_url`.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
LAUNCH = CONFIG["launch_buttons"]
REPO = CONFIG["repository"]
# Providers sphinx-book-theme knows; only Binder can open a .md notebook.
NOT_FOR_MD = ("colab_url", "deepnote_url", "jupyterlite_url")


def binder_url(page: str) -> str:
    """The Binder button's target for a page, as sphinx-book-theme builds
    it (header_buttons/launch.py) for a GitHub repository."""
    org, repo = urlparse(REPO["url"]).path.strip("/").split("/")
    prefix = {"classic": "tree", "jupyterlab": "lab/tree"}[
        LAUNCH["notebook_interface"]
    ]
    book = REPO.get("path_to_book", "").strip("/")
    path = f"{book}/{page}" if book else page
    return (
        f"{LAUNCH['binderhub_url'].rstrip('/')}/v2/gh/{org}/{repo}/"
        f"{REPO['branch']}?urlpath={prefix}/{path}"
    )


def check_target(url: str) -> Path:
    """Binder URL -> the repository file it opens, checked."""
    parsed = urlparse(url)
    assert parsed.scheme == "https" and parsed.netloc == "mybinder.org", url
    org_repo = urlparse(REPO["url"]).path.strip("/")
    assert parsed.path == f"/v2/gh/{org_repo}/{REPO['branch']}", url
    (urlpath,) = parse_qs(parsed.query)["urlpath"]
    assert urlpath.startswith("lab/tree/"), url
    target = ROOT / urlpath.removeprefix("lab/tree/")
    assert target.is_file(), f"{url} opens {target}, which does not exist"
    assert target.suffix == ".md"
    front = target.read_text().split("\n---", 1)[0]
    # A MyST notebook jupytext reads, with the kernel it runs on.
    assert "format_name: myst" in front and "kernelspec:" in front, target
    return target


def toc_notebooks() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    names = [toc["root"]] + re.findall(
        r"file: (\S+)", (ROOT / "_toc.yml").read_text()
    )
    pages = []
    for name in names:
        path = ROOT / f"{name}.md"
        if "kernelspec:" in path.read_text().split("\n---", 1)[0]:
            pages.append(f"{name}.md")
    return pages


def test_only_launchers_that_open_a_md_notebook():
    assert not [key for key in NOT_FOR_MD if LAUNCH.get(key)]
    assert LAUNCH["binderhub_url"] == "https://mybinder.org"
    assert LAUNCH["notebook_interface"] == "jupyterlab"
    # Thebe would run the page's cells against the same Binder: off.
    assert LAUNCH.get("thebe") is False


def test_every_pages_binder_button_opens_that_page():
    pages = toc_notebooks()
    assert len(pages) > 10
    for page in pages:
        assert check_target(binder_url(page)) == ROOT / page


def test_binder_environment_installs_the_book_extra_and_cpu_torch():
    lines = [
        line.strip()
        for line in (ROOT / "binder" / "requirements.txt").read_text()
        .splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert ".[book]" in lines
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in lines
    makefile = (ROOT / "Makefile").read_text()
    (pin,) = set(re.findall(r"torch==[\d.]+", makefile))
    assert pin in lines  # the torch the Makefile installs
    assert (ROOT / "binder" / "runtime.txt").read_text().startswith(
        "python-3.1")
    # jupytext, in the book extra, opens a .md as a notebook by default.
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'"jupytext==[\d.]+"', pyproject)
    post = ROOT / "binder" / "postBuild"
    assert post.stat().st_mode & 0o111, "postBuild must be executable"
    assert re.search(
        r"^jupytext-config set-default-viewer markdown myst$",
        post.read_text(), re.MULTILINE,
    )


def test_readme_says_what_a_downloaded_page_needs():
    assert "pip install 'transformer-book[book]'" in (
        ROOT / "README.md").read_text()
