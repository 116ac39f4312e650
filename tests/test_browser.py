"""The built site in a real browser: Chromium driven by Playwright.

The site in ``_build/html`` (or ``$BOOK_HTML``) is served on 127.0.0.1 and
every request to any other host is blocked, so a page that needs a CDN
(MathJax, fonts, scripts) fails here. Run after ``make book``;
``make test`` runs it after the strict build. It never skips: a missing
Chromium or a missing site is a failure that says what to do.
"""

from __future__ import annotations

import functools
import os
import re
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlparse

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(os.environ.get("BOOK_HTML", ROOT / "_build" / "html"))
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
SCREENSHOTS = ROOT / "_build" / "screenshots"
# sphinx-thebe declares the same identifier twice on every page; the error
# is harmless (thebe only starts when a reader asks for a live kernel).
HARMLESS = [re.compile(r"Identifier '\w+' has already been declared")]
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def site_url():
    if not (SITE / "book" / "intro.html").exists():
        pytest.fail(f"no built site in {SITE}: run 'make book' first")
    handler = functools.partial(QuietHandler, directory=str(SITE))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.fail(
            f"Chromium is missing at {CHROMIUM}: install Debian's package "
            "('apt-get update && apt-get install -y chromium'), or set "
            "CHROMIUM to its path. The browser check does not skip."
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # pragma: no cover - installed by the test extra
        pytest.fail("playwright is missing: pip install -e '.[test]'")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=LAUNCH_ARGS
        )
        yield browser
        browser.close()


class Visit:
    """A browser page that records console errors and blocked requests."""

    def __init__(self, browser, base_url: str) -> None:
        self.base_url = base_url
        self.context = browser.new_context(
            viewport={"width": 1280, "height": 900}
        )
        self.errors: list[str] = []
        self.blocked: list[str] = []
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))

    def _route(self, route) -> None:
        host = urlparse(route.request.url).hostname
        if host in ("127.0.0.1", None):
            route.continue_()
        else:
            self.blocked.append(route.request.url)
            route.abort()

    def _console(self, message) -> None:
        if message.type == "error":
            self.errors.append(message.text)

    def goto(self, path: str) -> None:
        response = self.page.goto(f"{self.base_url}/{path}", wait_until="load")
        assert response is not None and response.ok, (
            f"{path}: HTTP {response.status if response else 'no response'}"
        )

    def real_errors(self) -> list[str]:
        return [
            e for e in self.errors if not any(p.search(e) for p in HARMLESS)
        ]


@pytest.fixture
def visit(browser, site_url):
    v = Visit(browser, site_url)
    yield v
    v.context.close()


def test_intro_loads_cleanly_with_figure_and_math(visit):
    visit.goto("book/intro.html")
    page = visit.page
    assert "Transformers" in page.title()
    # MathJax is served by the site itself and typesets the page.
    page.wait_for_selector("mjx-container", timeout=20_000)
    assert page.locator("mjx-container").count() >= 3
    mathjax = page.evaluate(
        "[...document.scripts].map(s => s.src).filter(s => /mathjax/i.test(s))"
    )
    assert mathjax and all(src.startswith(visit.base_url) for src in mathjax)
    # The figure drawn by the page's code has loaded, numbered and captioned.
    figures = page.locator("figure img")
    assert figures.count() >= 1
    assert page.locator("figure figcaption").count() >= figures.count()
    widths = figures.evaluate_all("imgs => imgs.map(i => i.naturalWidth)")
    assert all(w > 0 for w in widths), widths
    # Glued numbers made it into the prose.
    assert page.locator("span.pasted-text").count() >= 5
    # ... in the weight of the sentence around them, not bold.
    weights = page.evaluate(
        "[...document.querySelectorAll('p .pasted-text')].map(e =>"
        " [getComputedStyle(e).fontWeight,"
        " getComputedStyle(e.parentElement).fontWeight])"
    )
    assert weights and all(own == around for own, around in weights), weights
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "intro.png"), full_page=True)
    assert visit.real_errors() == []
    assert visit.blocked == [], "the page asked for off-site resources"


def chapter_pages() -> list[str]:
    """Every page listed in ``_toc.yml`` (chapters and their sections)."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files: list[str] = []

    def walk(entries: list[dict]) -> None:
        for entry in entries:
            files.append(f"{entry['file']}.html")
            walk(entry.get("sections", []))

    for part in toc["parts"]:
        walk(part["chapters"])
    return files


# Role syntax that reached the page as text: a role that did not render.
RAW_ROLE = re.compile(r"\{(glue|cite|numref|ref|doc|eq|term)[:}]|`\{")

# The article's text without code (cells, blocks): what the prose shows.
PROSE_TEXT_JS = """
() => {
  const article = document.querySelector("article").cloneNode(true);
  article.querySelectorAll("pre, .cell_input, .highlight")
    .forEach((node) => node.remove());
  return article.innerText;
}
"""

# What each image in a page's article must be: inside a numbered figure
# with a caption, with alt text in words (not a file name).
FIGURE_PROBLEMS_JS = """
() => [...document.querySelectorAll("article img")].map((img) => {
  const figure = img.closest("figure");
  const problems = [];
  if (!figure) problems.push("not in a figure");
  else {
    const caption = figure.querySelector("figcaption");
    if (!caption || !caption.innerText.trim()) problems.push("no caption");
    if (!figure.querySelector(".caption-number")) problems.push("no number");
  }
  const alt = (img.getAttribute("alt") || "").trim();
  if (!alt || /[\\/]|\\.(png|svg|jpe?g|gif)$/i.test(alt))
    problems.push(`alt text ${JSON.stringify(alt)}`);
  return problems.length
    ? `${img.getAttribute("src")}: ${problems.join(", ")}` : null;
}).filter((p) => p)
"""


@pytest.mark.parametrize("path", chapter_pages())
def test_every_chapter_loads_with_its_figures_and_math(visit, path):
    """No console error, every image decoded, math typeset offline."""
    visit.goto(path)
    page = visit.page
    images = page.locator("article img")
    widths = images.evaluate_all("imgs => imgs.map(i => i.naturalWidth)")
    assert all(w > 0 for w in widths), (path, widths)
    if page.locator(".math").count():
        # Attached, not visible: some math sits in closed dropdowns.
        page.wait_for_selector(
            "mjx-container", state="attached", timeout=20_000
        )
        # No TeX left unrendered: MathJax marks what it could not parse.
        assert page.locator("mjx-merror").count() == 0, path
    name = path.replace("/", "-").removesuffix(".html")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))
    assert visit.real_errors() == [], path
    assert visit.blocked == [], path
    # No role left as raw text ({glue:text}`x`, {cite}`y`, `{...`).
    text = page.evaluate(PROSE_TEXT_JS)
    raw = sorted({m.group(0) for m in RAW_ROLE.finditer(text)})
    assert not raw, (path, raw)
    # Every image is a numbered, captioned figure with alt text in words.
    assert page.evaluate(FIGURE_PROBLEMS_JS) == [], path


def toc_pages() -> list[str]:
    """The root page and every page under it in ``_toc.yml``."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    return [f"{toc['root']}.html", *chapter_pages()]


@pytest.mark.parametrize("path", toc_pages())
def test_every_page_has_its_buttons(visit, path):
    """Repository, issue, edit, download (.ipynb, .md) and launch buttons."""
    visit.goto(path)
    page = visit.page
    for selector in (
        ".btn-source-repository-button",
        ".btn-source-issues-button",
        ".btn-source-edit-button",
        ".btn-download-source-button",
    ):
        assert page.locator(selector).count() == 1, (path, selector)
    # One search box: the sidebar's, none in the header.
    assert page.locator(".search-button-field").count() == 1, path
    if page.locator(".cell").count():
        # A notebook page: its .ipynb download and its launch buttons.
        assert page.locator(".btn-download-notebook-button").count() == 1
        launch = page.locator(
            "a[href*='mybinder.org'], a[href*='colab.research.google.com']"
        ).evaluate_all("links => links.map(a => a.href)")
        assert len(launch) == 1, launch  # Binder; Colab opens no .md page
        assert all(
            "transformer-book/transformer-book" in href for href in launch
        ), launch


def test_download_links_resolve_on_the_built_site(visit):
    """The .ipynb and .md downloads are served (HTTP 200)."""
    visit.goto("book/intro.html")
    page = visit.page
    repo = page.locator(".btn-source-repository-button")
    assert repo.get_attribute("href") == (
        "https://github.com/transformer-book/transformer-book"
    )
    for selector in (
        ".btn-download-notebook-button",
        ".btn-download-source-button",
    ):
        href = page.locator(selector).get_attribute("href")
        url = page.evaluate("(h) => new URL(h, location.href).href", href)
        response = page.request.get(url)
        assert response.status == 200, (selector, url, response.status)
        body = response.text()
        if selector.endswith("notebook-button"):
            assert url.endswith(".ipynb")
            assert '"cells"' in body and "nbformat" in body
        else:
            assert url.endswith(".md") and "kernelspec" in body


def test_bibliography_is_author_year_with_links(visit):
    visit.goto("book/reference/bibliography.html")
    entries = visit.page.locator("[role='doc-biblioentry']")
    assert entries.count() >= 10
    labels = visit.page.locator(".citation .label").all_inner_texts()
    # "[Vaswani et al., 2017]", never alphabetic labels like "[VSP+17]".
    assert labels and all(
        re.fullmatch(r"\[?[^\[\],]+, \d{4}[a-z]?\]?", label.strip())
        for label in labels
    ), labels
    hrefs = entries.evaluate_all(
        "items => items.map(e => [...e.querySelectorAll('a')]"
        ".map(a => a.href).join(' '))"
    )
    texts = entries.all_inner_texts()
    # A link off the site: DOI, arXiv or the publisher's page.
    linked = re.compile(r"https?://(?!127\.0\.0\.1)")
    unlinked = [
        t[:60]
        for t, h in zip(texts, hrefs, strict=True)
        if not linked.search(h)
    ]
    # Gage (1994) appeared in print only: no DOI, arXiv id or stable URL.
    assert [t for t in unlinked if "Philip Gage" not in t] == []


def test_citation_resolves_to_bibliography(visit):
    visit.goto("book/intro.html")
    link = visit.page.locator("a[href*='bibliography.html#']").first
    author = link.inner_text().split()[0]  # "Vaswani et al., 2017"
    href = link.get_attribute("href")
    link.click()
    visit.page.wait_for_load_state("load")
    assert "bibliography.html" in visit.page.url
    entry = visit.page.locator(f"[id='{href.split('#', 1)[1]}']")
    assert entry.count() == 1
    assert entry.get_attribute("role") == "doc-biblioentry"
    assert author in entry.inner_text()
    assert visit.real_errors() == []


def test_search_finds_intro(visit):
    visit.goto("search.html?q=peaked")
    results = visit.page.locator("#search-results a")
    results.first.wait_for(timeout=20_000)
    hrefs = results.evaluate_all("links => links.map(a => a.href)")
    assert any("book/intro.html" in h for h in hrefs), hrefs
    assert visit.real_errors() == []


def test_missing_chromium_fails_and_says_what_to_install(tmp_path):
    import subprocess
    import sys

    env = dict(os.environ, CHROMIUM=str(tmp_path / "no-chromium"))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"{__file__}::test_search_finds_intro",
        ],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode != 0
    assert "apt-get install -y chromium" in result.stdout
    assert "skipped" not in result.stdout.splitlines()[-1]
