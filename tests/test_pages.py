"""Rules every page follows, read from the MyST sources (fast, no build).

The reader sees teaching code:

- outside exercise solutions, ``glue(...)`` calls and ``assert``
  statements are at most 5% of a page's visible code lines;
- no visible cell holds nothing but such lines;
- no ``{glue...}`` role is wrapped in backticks (it would show raw);
- the book stands alone: no page says "the notes".

Visible code: a code cell is hidden when tagged ``remove-cell`` or
``remove-input``; ``hide-input`` and ``hide-cell`` only fold the code
behind a toggle, so those cells count as visible. Exercise solutions are
the cells between ``{solution-start}`` and ``{solution-end}`` fences
(sphinx-exercise's gated solutions); they may assert their answer.

Figure convention (checked here in the source, and in the built site by
``tests/test_browser.py``): every figure is a numbered figure with a
caption and alt text. A cell tagged ``remove-output`` (or ``remove-cell``)
draws it, a hidden cell glues it, and the page places it with

    ```{glue:figure} key
    :name: part-fig-what
    :alt: What the figure shows, in words (not a file name).

    The caption: one or more sentences.
    ```

(``{figure}`` with ``:name:``, ``:alt:`` and a caption is accepted too, for
an image file). No image may appear as a bare cell output.

Run ``python tests/test_pages.py`` for the per-page share of visible
glue/assert lines.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
LIMIT = 0.05
HIDDEN_TAGS = {"remove-cell", "remove-input"}
BACKTICKED_GLUE = re.compile(r"(?<!`)`{1,2}\{glue")
THE_NOTES = re.compile(r"\bthe\s+notes\b", re.IGNORECASE)
FIGURE_FENCE = re.compile(
    r"^(?P<fence>`{3,}|:{3,})\{(?P<kind>glue:figure|figure)\}[^\n]*\n"
    r"(?P<body>.*?)^(?P=fence)\s*$",
    re.MULTILINE | re.DOTALL,
)


def pages() -> list[Path]:
    """Every MyST notebook page (a ``.md`` with a kernelspec) of the book."""
    return sorted(
        page
        for page in BOOK.rglob("*.md")
        if "kernelspec:" in page.read_text().split("\n---", 1)[0]
    )


def _strip_magics(source: str) -> str:
    """Blank IPython magics and shell lines so ``ast`` can parse a cell."""
    return "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line
        for line in source.splitlines()
    )


def _is_glue_call(node: ast.AST) -> bool:
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
        return False
    func = node.value.func
    name = func.attr if isinstance(func, ast.Attribute) else None
    if isinstance(func, ast.Name):
        name = func.id
    return name == "glue"


def _is_glue_import(node: ast.AST) -> bool:
    return isinstance(node, ast.ImportFrom) and {
        alias.name for alias in node.names
    } == {"glue"}


def bookkeeping_lines(source: str) -> tuple[set[int], set[int]]:
    """Line numbers (1-based) of glue/assert lines and of glue imports.

    A statement spanning several lines counts with all of them.
    """
    tree = ast.parse(_strip_magics(source))
    counted: set[int] = set()
    imports: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert) or _is_glue_call(node):
            counted.update(range(node.lineno, node.end_lineno + 1))
        elif _is_glue_import(node):
            imports.update(range(node.lineno, node.end_lineno + 1))
    return counted, imports


def code_lines(source: str) -> set[int]:
    """Line numbers of non-blank lines that are not only a comment."""
    return {
        number
        for number, line in enumerate(source.splitlines(), start=1)
        if line.strip() and not line.strip().startswith("#")
    }


@dataclass
class PageReport:
    """What a reader sees of a page's code, outside exercise solutions."""

    page: str
    visible: int = 0
    bookkeeping: int = 0
    only_bookkeeping: list[str] = field(default_factory=list)

    @property
    def share(self) -> float:
        return self.bookkeeping / self.visible if self.visible else 0.0


def cells_with_context(page: Path):
    """Yield ``(cell, in_solution)`` for the page's cells, in order."""
    import jupytext

    notebook = jupytext.read(page)
    in_solution = False
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            for match in re.finditer(r"\{solution-(start|end)\}", cell.source):
                in_solution = match.group(1) == "start"
        yield cell, in_solution


def report(page: Path) -> PageReport:
    """Count a page's visible code lines and its visible glue/assert lines."""
    name = page.relative_to(BOOK) if page.is_relative_to(BOOK) else page
    result = PageReport(str(name))
    for cell, in_solution in cells_with_context(page):
        if cell.cell_type != "code" or in_solution:
            continue
        if HIDDEN_TAGS & set(cell.metadata.get("tags", [])):
            continue
        lines = code_lines(cell.source)
        counted, imports = bookkeeping_lines(cell.source)
        counted &= lines
        result.visible += len(lines)
        result.bookkeeping += len(counted)
        if counted and lines <= counted | imports:
            first = cell.source.strip().splitlines()[0]
            result.only_bookkeeping.append(first[:60])
    return result


def share_table(reports: list[PageReport]) -> str:
    """The per-page table of visible glue/assert lines."""
    rows = [f"{'page':48s} {'glue+assert':>11s} {'visible':>8s} {'share':>6s}"]
    total = PageReport("all pages")
    for r in [*reports, None]:
        if r is None:
            r = total
        else:
            total.visible += r.visible
            total.bookkeeping += r.bookkeeping
        rows.append(
            f"{r.page:48s} {r.bookkeeping:11d} {r.visible:8d} {r.share:6.1%}"
        )
    return "\n".join(rows)


# -- the counting itself ----------------------------------------------------


def test_bookkeeping_lines_count_multiline_glue_and_asserts():
    source = (
        "x = 1\n"
        "glue('a', x,\n"
        "     display=False)\n"
        "# a comment\n"
        "assert x == 1, 'one'\n"
        "%timeit x + 1\n"
        "from myst_nb import glue\n"
        "y = [x for _ in range(2)]\n"
    )
    counted, imports = bookkeeping_lines(source)
    assert counted == {2, 3, 5}
    assert imports == {7}
    assert code_lines(source) == {1, 2, 3, 5, 6, 7, 8}


def write_page(path: Path, body: str) -> Path:
    header = (
        "---\njupytext:\n  text_representation:\n    extension: .md\n"
        "    format_name: myst\nkernelspec:\n  display_name: Python 3\n"
        "  language: python\n  name: python3\n---\n\n# Page\n\n"
    )
    path.write_text(header + body)
    return path


def cell(code: str, tags: str = "") -> str:
    meta = f":tags: [{tags}]\n" if tags else ""
    return f"```{{code-cell}} ipython3\n{meta}{code}\n```\n\n"


def test_report_skips_hidden_cells_and_solutions_counts_hide_input(tmp_path):
    body = (
        cell("a = 1\nb = 2\nc = 3")
        + cell("glue('a', a, display=False)", "remove-cell")
        + cell("assert a == 1\nprint(a)", "hide-input")
        + cell("glue('b', b)", "remove-input")
        + "```{solution-start} ex-1\n:class: dropdown\n```\n\n"
        + cell("assert b == 2\nglue('c', c)")
        + "```{solution-end}\n```\n\n"
        + cell("assert c == 3")
    )
    page = write_page(tmp_path / "page.md", body)
    r = report(page)
    # Visible: 3 + 2 (hide-input folds, it still shows) + 1 outside the
    # solution; counted: the assert in the hide-input cell and the last one.
    assert (r.visible, r.bookkeeping) == (6, 2)
    assert r.only_bookkeeping == ["assert c == 3"]


# -- the rules, on every page -----------------------------------------------


PAGES = pages()
IDS = [str(p.relative_to(BOOK)) for p in PAGES]


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_glue_and_asserts_stay_out_of_sight(page):
    r = report(page)
    assert not r.only_bookkeeping, (
        f"{r.page}: visible cells that hold only glue/assert lines (tag "
        f"them remove-cell): {r.only_bookkeeping}"
    )
    assert r.share <= LIMIT, (
        f"{r.page}: {r.bookkeeping} of {r.visible} visible code lines "
        f"({r.share:.1%}) are glue(...) or assert; at most {LIMIT:.0%}. "
        "Move them into cells tagged remove-cell."
    )


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_no_backticked_glue_role(page):
    bad = [
        f"line {n}: {line.strip()}"
        for n, line in enumerate(page.read_text().splitlines(), start=1)
        if BACKTICKED_GLUE.search(line)
    ]
    assert not bad, (
        f"{page.name}: a {{glue}} role in backticks shows raw: {bad}"
    )


@pytest.mark.parametrize(
    "page", sorted(BOOK.rglob("*.md")), ids=lambda p: str(p.relative_to(BOOK))
)
def test_book_stands_alone(page):
    bad = [
        f"line {n}: {line.strip()}"
        for n, line in enumerate(page.read_text().splitlines(), start=1)
        if THE_NOTES.search(line)
    ]
    assert not bad, f"{page.name} refers to 'the notes': {bad}"


def figure_problems(text: str) -> list[str]:
    """What each figure directive in ``text`` lacks (name, alt, caption)."""
    problems = []
    for match in FIGURE_FENCE.finditer(text):
        line = text[: match.start()].count("\n") + 1
        body = match.group("body")
        options = dict(
            re.findall(r"^:([\w-]+):[ \t]*(.*)$", body, re.MULTILINE)
        )
        caption = "\n".join(
            row for row in body.splitlines() if not row.startswith(":")
        ).strip()
        alt = options.get("alt", "").strip()
        missing = [key for key in ("name",) if not options.get(key)]
        if not alt or re.search(r"[/\\]|\.(png|svg|jpe?g|gif)$", alt):
            missing.append("alt text in words")
        if not caption:
            missing.append("caption")
        if missing:
            problems.append(f"line {line}: {', '.join(missing)}")
    return problems


def test_figure_problems_finds_missing_parts():
    good = (
        "```{glue:figure} key\n:name: fig-a\n:alt: Two curves.\n\n"
        "A caption.\n```\n"
    )
    bad = (
        "```{glue:figure} key\n:alt: _images/abc.png\n```\n"
        ":::{figure} x.svg\n:name: fig-b\n:::\n"
    )
    assert figure_problems(good) == []
    assert figure_problems(bad) == [
        "line 1: name, alt text in words, caption",
        "line 4: alt text in words, caption",
    ]


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_figure_has_name_alt_text_and_caption(page):
    problems = figure_problems(page.read_text())
    assert not problems, f"{page.name}: figures lacking parts: {problems}"


# -- page code is linted -----------------------------------------------------


def lint(root: Path, page: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "lint_pages.py"),
            "--root",
            str(root),
            str(page),
        ],
        capture_output=True,
        text=True,
    )


def test_lint_fails_a_page_with_an_unused_import(tmp_path):
    (tmp_path / "book").mkdir()
    page = write_page(
        tmp_path / "book" / "page.md",
        cell("import os\nimport math\n\nprint(math.pi)"),
    )
    result = lint(tmp_path, page)
    assert result.returncode != 0
    assert "F401" in result.stdout and "`os` imported but unused" in (
        result.stdout
    )


def test_lint_applies_the_page_rules(tmp_path):
    # A late import is fine in a page (E402 is ignored under book/**) ...
    (tmp_path / "book").mkdir()
    page = write_page(
        tmp_path / "book" / "page.md",
        cell("x = 1") + cell("import math\n\nprint(math.pi * x)"),
    )
    result = lint(tmp_path, page)
    assert result.returncode == 0, result.stdout
    # ... but a line too long for the page's text column is not.
    page.write_text(page.read_text().replace("x = 1", f"x = {'1' * 80}"))
    result = lint(tmp_path, page)
    assert result.returncode != 0
    assert "E501" in result.stdout


# -- page plumbing: sizes, threads, smoke runs, figure cells -----------------


def _lint_pages_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "lint_pages", ROOT / "scripts" / "lint_pages.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


lint_pages = _lint_pages_module()
SIZES_FILE = 'cpu = {"steps": 2}\ngpu = {"steps": 200}\nsmoke = {"steps": 1}\n'
HEAD = ("from transformer_book import _book as book\n\n"
        'SIZES = book.sizes("page")\nSIZES')


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_page_plumbing_rules_hold(page):
    assert lint_pages.page_problems(page) == []


def test_every_sizes_file_has_its_page():
    assert lint_pages.orphan_sizes(ROOT) == []
    assert len(list(BOOK.rglob("*.sizes.py"))) >= 15


@pytest.mark.parametrize(
    ("body", "sizes", "expected"),
    [
        (cell(HEAD), SIZES_FILE, []),
        (cell(HEAD) + cell("torch.set_num_threads(1)"), SIZES_FILE,
         ["thread settings"]),
        (cell(HEAD) + cell("n = 9  # BOOK_SMOKE: 2"), SIZES_FILE,
         ["thread settings"]),
        (cell(HEAD) + cell("if book.smoke():\n    n = 2", "remove-cell"),
         SIZES_FILE, []),
        (cell(HEAD) + cell("ax = plotting.plot_curves(x)", "remove-output"),
         SIZES_FILE, ["draws a figure"]),
        (cell(HEAD) + cell("ax = plt.plot(x)", "remove-output, hide-input"),
         SIZES_FILE, []),
        (cell(HEAD.removesuffix("\nSIZES")), SIZES_FILE, ["ends with SIZES"]),
        (cell(HEAD.replace('"page"', '"gpt"')), SIZES_FILE,
         ["book.sizes(\"gpt\")", "ends with SIZES"]),
        (cell(HEAD), None, ["book.sizes(\"page\")"]),
        (cell(HEAD) + cell('SIZES = {"cpu": dict(n=1)}'), SIZES_FILE,
         ["sizes live in page.sizes.py"]),
        (cell(HEAD), 'cpu = {"steps": 2}\ngpu = {"step": 200}\n',
         ["only in gpu: ['step']"]),
        (cell(HEAD) + cell("import math\nn = 3", "remove-cell")
         + cell("print(math.pi, [n for n in range(2)])"), SIZES_FILE,
         ["reads math, which only a remove-cell cell defines"]),
        (cell(HEAD) + cell("n = 3", "remove-cell") + cell("n = 4")
         + cell("def f(n):\n    return n\nprint(n)"), SIZES_FILE, []),
    ],
)
def test_page_problems_finds_each_breach(tmp_path, body, sizes, expected):
    page = write_page(tmp_path / "page.md", body)
    if sizes is not None:
        (tmp_path / "page.sizes.py").write_text(sizes)
    problems = lint_pages.page_problems(page)
    assert len(problems) == len(expected), problems
    for problem, part in zip(problems, expected, strict=True):
        assert part in problem, problems


def test_a_sizes_file_without_its_page_is_an_orphan(tmp_path):
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "gone.sizes.py").write_text(SIZES_FILE)
    write_page(tmp_path / "book" / "here.md", "")
    (tmp_path / "book" / "here.sizes.py").write_text(SIZES_FILE)
    assert lint_pages.orphan_sizes(tmp_path) == [
        tmp_path / "book" / "gone.sizes.py"]


if __name__ == "__main__":
    print(share_table([report(page) for page in PAGES]))
