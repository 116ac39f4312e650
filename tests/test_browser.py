"""The built site in a real browser: Chromium driven by Playwright.

The site in ``_build/html`` (or ``$BOOK_HTML``) is served on 127.0.0.1 and
every request to any other host is blocked, so a page that needs a CDN
(MathJax, fonts, scripts) fails here. Run after ``make book``;
``make test`` runs it after the strict build. It never skips: a missing
Chromium or a missing site is a failure that says what to do.

Each page of the table of contents is loaded once (:func:`visited`, a few
tabs at a time): that one visit records what the tests then check (console
errors, off-site requests, images, math, raw role syntax, figures, buttons)
and takes the page's screenshot. Citations, downloads and search, which
click or fetch, visit on their own.
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
    # Off-site hosts do not resolve: nothing leaves the machine.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
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
    """A browser tab that records console errors and off-site requests.

    Chromium resolves no host but 127.0.0.1 (``--host-resolver-rules``),
    so an off-site request fails; the tab records each one.
    """

    def __init__(self, context, base_url: str) -> None:
        self.base_url = base_url
        self.errors: list[str] = []
        self.blocked: list[str] = []
        self.response = None
        self.page = context.new_page()
        self.page.on("request", self._request)
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))

    def _request(self, request) -> None:
        if urlparse(request.url).hostname not in ("127.0.0.1", None):
            self.blocked.append(request.url)

    def _console(self, message) -> None:
        if message.type == "error":
            self.errors.append(message.text)

    def start(self, path: str) -> None:
        """Begin loading ``path``; wait for the load event later."""
        self.response = self.page.goto(f"{self.base_url}/{path}",
                                       wait_until="commit")

    def goto(self, path: str) -> None:
        response = self.page.goto(f"{self.base_url}/{path}", wait_until="load")
        assert response is not None and response.ok, (
            f"{path}: HTTP {response.status if response else 'no response'}"
        )

    def real_errors(self) -> list[str]:
        return [
            e for e in self.errors if not any(p.search(e) for p in HARMLESS)
        ]


def new_context(browser):
    return browser.new_context(viewport={"width": 1280, "height": 900})


@pytest.fixture
def visit(browser, site_url):
    context = new_context(browser)
    yield Visit(context, site_url)
    context.close()


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


def toc_pages() -> list[str]:
    """The root page and every page under it in ``_toc.yml``."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    return [f"{toc['root']}.html", *chapter_pages()]


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

BUTTONS = (
    ".btn-source-repository-button",
    ".btn-source-issues-button",
    ".btn-source-edit-button",
    ".btn-download-source-button",
    ".btn-download-notebook-button",
    ".search-button-field",
)

# Everything a test checks about a loaded page, in one call.
FACTS_JS = """
(buttons) => {
  const count = (selector) => document.querySelectorAll(selector).length;
  return {
    title: document.title,
    widths: [...document.querySelectorAll("article img")]
      .map((img) => img.naturalWidth),
    math: count(".math"),
    typeset: count("mjx-container"),
    merrors: count("mjx-merror"),
    mathjax: [...document.scripts].map((s) => s.src)
      .filter((s) => /mathjax/i.test(s)),
    figureImages: count("figure img"),
    captions: count("figure figcaption"),
    pasted: count("span.pasted-text"),
    // A pasted number's weight, and the weight of the sentence around it.
    weights: [...document.querySelectorAll("p .pasted-text")].map((e) =>
      [getComputedStyle(e).fontWeight,
       getComputedStyle(e.parentElement).fontWeight]),
    buttons: Object.fromEntries(buttons.map((b) => [b, count(b)])),
    cells: count(".cell"),
    launch: [...document.querySelectorAll(
      "a[href*='mybinder.org'], a[href*='colab.research.google.com']")]
      .map((a) => a.href),
  };
}
"""

# MathJax typesets after the load event: wait for its promise.
TYPESET_JS = """
() => (window.MathJax && MathJax.startup && MathJax.startup.promise)
  ? MathJax.startup.promise.then(() => true) : false
"""

#: Pages loading at once (Chromium renders each in its own process).
TABS = 3


def collect(visit: Visit, path: str) -> dict:
    """What the tests check about the page ``visit`` has loaded."""
    page = visit.page
    response = visit.response
    facts: dict = {"status": response.status if response else None}
    if page.locator(".math").count():
        facts["mathjax_ready"] = page.evaluate(TYPESET_JS)
    facts.update(page.evaluate(FACTS_JS, list(BUTTONS)))
    facts["prose"] = page.evaluate(PROSE_TEXT_JS)
    facts["figure_problems"] = page.evaluate(FIGURE_PROBLEMS_JS)
    name = path.replace("/", "-").removesuffix(".html")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"),
                    full_page=path == toc_pages()[0])
    facts["errors"] = visit.real_errors()
    facts["blocked"] = list(visit.blocked)
    return facts


@pytest.fixture(scope="module")
def visited(browser, site_url) -> dict[str, dict]:
    """Every page of the table of contents, loaded once: its facts.

    The tabs share one context (and its HTTP cache, as a reader's tabs
    do); each records its own console errors and requests.
    """
    context = new_context(browser)
    facts: dict[str, dict] = {}
    pending: list[tuple[str, Visit]] = []

    def finish(path: str, visit: Visit) -> None:
        try:
            visit.page.wait_for_load_state("load")
            facts[path] = collect(visit, path)
        finally:
            visit.page.close()

    try:
        for path in toc_pages():
            visit = Visit(context, site_url)
            visit.start(path)
            pending.append((path, visit))
            if len(pending) == TABS:
                finish(*pending.pop(0))
        for path, visit in pending:
            finish(path, visit)
    finally:
        context.close()
    return facts


def test_intro_loads_cleanly_with_figure_and_math(visited, site_url):
    facts = visited[toc_pages()[0]]
    assert facts["status"] == 200
    assert "Transformers" in facts["title"]
    # MathJax is served by the site itself and typesets the page.
    assert facts.get("mathjax_ready") is True
    assert facts["typeset"] >= 3
    assert facts["mathjax"] and all(
        src.startswith(site_url) for src in facts["mathjax"])
    # The figure drawn by the page's code has loaded, numbered and captioned.
    assert facts["figureImages"] >= 1
    assert facts["captions"] >= facts["figureImages"]
    assert all(w > 0 for w in facts["widths"]), facts["widths"]
    # Glued numbers made it into the prose ...
    assert facts["pasted"] >= 5
    # ... in the weight of the sentence around them, not bold.
    weights = facts["weights"]
    assert weights and all(own == around for own, around in weights), weights
    assert facts["errors"] == []
    assert facts["blocked"] == [], "the page asked for off-site resources"


@pytest.mark.parametrize("path", chapter_pages())
def test_every_chapter_loads_with_its_figures_and_math(visited, path):
    """No console error, every image decoded, math typeset offline."""
    facts = visited[path]
    assert facts["status"] == 200, path
    assert all(w > 0 for w in facts["widths"]), (path, facts["widths"])
    if facts["math"]:
        # Typeset, including math in closed dropdowns, with no TeX left
        # unrendered (MathJax marks what it could not parse).
        assert facts["mathjax_ready"] is True, path
        assert facts["typeset"] > 0, path
        assert facts["merrors"] == 0, path
    assert facts["errors"] == [], path
    assert facts["blocked"] == [], path
    # No role left as raw text ({glue:text}`x`, {cite}`y`, `{...`).
    raw = sorted({m.group(0) for m in RAW_ROLE.finditer(facts["prose"])})
    assert not raw, (path, raw)
    # Every image is a numbered, captioned figure with alt text in words.
    assert facts["figure_problems"] == [], path


@pytest.mark.parametrize("path", toc_pages())
def test_every_page_has_its_buttons(visited, path):
    """Repository, issue, edit, download (.ipynb, .md) and launch buttons."""
    from test_launch import binder_url

    facts = visited[path]
    buttons = facts["buttons"]
    for selector in BUTTONS[:4]:
        assert buttons[selector] == 1, (path, selector)
    # One search box: the sidebar's, none in the header.
    assert buttons[".search-button-field"] == 1, path
    if facts["cells"]:
        # A notebook page: its .ipynb download and one launch button,
        # Binder's, opening this very page (Colab opens no .md page).
        assert buttons[".btn-download-notebook-button"] == 1, path
        page = path.removesuffix(".html") + ".md"
        assert facts["launch"] == [binder_url(page)], facts["launch"]


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
    # Results arrive one by one: wait for the page that holds the word
    # (on a loaded machine the first result can come well before it).
    intro = visit.page.locator("#search-results a[href*='book/intro.html']")
    intro.first.wait_for(timeout=30_000)
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
