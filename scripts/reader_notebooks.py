"""The notebook a reader downloads from a page (a local Sphinx extension).

The theme's download button offers ``_sources/<page>.ipynb``, which is
otherwise the page's source converted to a notebook: no outputs, and the
hidden cells (``remove-cell``: glue calls and the asserts behind the
prose's claims) still in it. After the HTML build, this extension writes
in its place the page as a reader saw it:

- the outputs of the build's execution (from the execution cache);
- no ``remove-cell`` cells; ``remove-output`` cells without outputs;
  ``hide-input`` and ``remove-input`` cells collapsed;
- glued values written into the text (``{glue:text}`name:.2f```), glued
  figures embedded as images with their captions, and cross-references
  and citations as plain text;
- a first cell that writes the page's sizes file (``<page>.sizes.py``),
  which the page reads, so the notebook runs top to bottom on its own
  (``tests/test_reader_notebooks.py`` runs some at smoke sizes).

``_config.yml`` loads it (``sphinx.local_extensions``).
"""

from __future__ import annotations

import ast
import copy
import re
from pathlib import Path
from typing import Any

import nbformat

from transformer_book._book import SIZES_SUFFIX

_GLUE = re.compile(r"\{glue(?::text)?\}`([^`:]+)(?::([^`]*))?`")
_FIGURE = re.compile(r"^```\{glue:figure\}\s*(\S+)\n(.*?)^```\s*$",
                     re.M | re.S)
_XREF = re.compile(r"\{(cite:[pt]|ref|doc|numref|eq|term)\}`([^`]+)`")
_TARGET = re.compile(r"^\([\w-]+\)=\n", re.M)
_IMAGES = ("image/png", "image/jpeg", "image/svg+xml")


def glued(nb: Any) -> dict[str, dict[str, Any]]:
    """Every glued value of an executed notebook: name -> its mime data."""
    values = {}
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            record = output.get("metadata", {}).get("scrapbook", {})
            if record.get("name"):
                prefix = record.get("mime_prefix", "")
                values[record["name"]] = {
                    key.removeprefix(prefix): value
                    for key, value in output.get("data", {}).items()}
    return values


def glue_text(data: dict[str, Any], spec: str | None) -> str:
    """A glued value as ``{glue:text}`` shows it, with its format spec."""
    text = str(data.get("text/plain", ""))
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        try:
            value = float(text)
        except ValueError:
            return text
    return format(value, spec) if spec else str(value)


def _xref(match: re.Match[str]) -> str:
    role, target = match.groups()
    if role.startswith("cite"):
        return "[" + "; ".join(k.strip() for k in target.split(",")) + "]"
    explicit = re.fullmatch(r"(.*?)\s*<([^>]+)>", target, re.S)
    if explicit:
        return explicit.group(1).replace("%s", "").strip() or explicit[2]
    return f"`{target}`" if role in ("ref", "numref") else target


def reader_markdown(source: str, values: dict[str, dict[str, Any]],
                    attachments: dict[str, Any]) -> str:
    """A markdown cell's text with glued values written in."""

    def figure(match: re.Match[str]) -> str:
        name, body = match.groups()
        lines = body.splitlines()
        caption = " ".join(line.strip() for line in lines
                           if line.strip() and not line.startswith(":"))
        alt = next((line.split(":", 2)[2].strip() for line in lines
                    if line.startswith(":alt:")), name)
        data = values.get(name, {})
        mime = next((m for m in _IMAGES if m in data), None)
        if mime is None:
            return f"*{caption}*\n"
        file = f"{name}.{mime.split('/')[1].split('+')[0]}"
        attachments[file] = {mime: data[mime]}
        return f"![{alt}](attachment:{file})\n\n*{caption}*\n"

    text = _TARGET.sub("", _FIGURE.sub(figure, source))
    text = _GLUE.sub(lambda m: glue_text(values.get(m[1], {}), m[2]), text)
    return _XREF.sub(_xref, text)


def reader_notebook(nb: Any, page: str, sizes: str | None) -> Any:
    """The downloadable notebook of an executed page.

    Args:
        nb: the executed notebook (outputs, glue outputs).
        page: the page's name (``gpt`` for ``gpt.md``).
        sizes: the text of the page's sizes file, or None if it has none.
    """
    values = glued(nb)
    out = nbformat.v4.new_notebook(metadata=copy.deepcopy(nb.metadata))
    out.metadata.pop("jupytext", None)
    for cell in nb.cells:
        tags = set(cell.get("metadata", {}).get("tags", []))
        if "remove-cell" in tags:
            continue
        if cell.cell_type == "markdown":
            attachments: dict[str, Any] = {}
            text = reader_markdown(cell.source, values, attachments)
            new = nbformat.v4.new_markdown_cell(text)
            if attachments:
                new.attachments = attachments
        elif cell.cell_type == "code":
            new = nbformat.v4.new_code_cell(cell.source)
            new.metadata.tags = sorted(tags)
            if not tags & {"remove-output"}:
                new.outputs = [o for o in cell.get("outputs", [])
                               if "scrapbook" not in o.get("metadata", {})]
            if tags & {"hide-input", "remove-input"}:
                new.metadata.jupyter = {"source_hidden": True}
        else:
            continue
        out.cells.append(new)
    if sizes is not None:
        first = next((i for i, c in enumerate(out.cells)
                      if c.cell_type == "code"), len(out.cells))
        out.cells.insert(first, nbformat.v4.new_code_cell(
            f"%%writefile {page}{SIZES_SUFFIX}\n{sizes.rstrip()}\n",
            metadata={"jupyter": {"source_hidden": True}}))
        out.cells.insert(first, nbformat.v4.new_markdown_cell(
            f"The next cell writes this page's sizes, `{page}"
            f"{SIZES_SUFFIX}`, which the cell after it reads: the `cpu` and "
            "`gpu` presets' sizes of every experiment."))
    for index, cell in enumerate(out.cells):
        cell.id = f"cell-{index}"
    return out


def _write_notebooks(app: Any, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    from jupyter_cache import get_cache
    from myst_nb.core.read import myst_nb_reader_plugin

    sources = Path(app.outdir) / "_sources"
    cache_path = app.config.nb_execution_cache_path or (
        Path(app.outdir).parent / ".jupyter_cache")
    cache = get_cache(str(cache_path))
    for docname in sorted(app.env.found_docs):
        target = sources / f"{docname}.ipynb"
        path = Path(app.env.doc2path(docname))
        if not target.exists() or path.suffix != ".md":
            continue
        try:
            _, executed = cache.merge_match_into_notebook(
                myst_nb_reader_plugin(str(path)))
        except KeyError:  # not executed in this cache
            continue
        sizes_file = path.with_name(path.stem + SIZES_SUFFIX)
        sizes = sizes_file.read_text() if sizes_file.exists() else None
        nbformat.write(reader_notebook(executed, path.stem, sizes),
                       str(target))


def setup(app: Any) -> dict[str, Any]:
    app.connect("build-finished", _write_notebooks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
