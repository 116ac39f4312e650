"""The notebook a reader downloads: executed, hidden cells gone, values in.

The unit tests build one from a small executed notebook. The slow tests
read what the strict build wrote into ``_build/html/_sources`` (after
``make book`` or ``make test``'s build) and run two of them top to
bottom, on their own, at smoke sizes.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "_build" / "html" / "_sources" / "book"
_spec = importlib.util.spec_from_file_location(
    "reader_notebooks", ROOT / "scripts" / "reader_notebooks.py")
reader_notebooks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reader_notebooks)

PNG = "iVBORw0KGgo="
MARKDOWN = """(my-label)=
# A page

The loss is {glue:text}`loss:.2f` after {glue:text}`steps` steps, see
{numref}`fig-loss` and {cite:p}`vaswani2017attention,he2016deep`.

```{glue:figure} figure
:name: fig-loss
:alt: A falling curve.

The loss after {glue:text}`steps` steps.
```
"""


def glue_output(name: str, data: dict[str, str]) -> dict:
    prefix = "application/papermill.record/"
    return nbformat.v4.new_output(
        "display_data", data={prefix + k: v for k, v in data.items()},
        metadata={"scrapbook": {"name": name, "mime_prefix": prefix}})


def executed() -> nbformat.NotebookNode:
    first = nbformat.v4.new_code_cell(
        'SIZES = book.sizes("page")\nSIZES',
        outputs=[nbformat.v4.new_output(
            "execute_result", data={"text/plain": "{'steps': 3}"},
            execution_count=1)])
    hidden = nbformat.v4.new_code_cell(
        'glue("loss", 0.12345)', metadata={"tags": ["remove-cell"]},
        outputs=[glue_output("loss", {"text/plain": "0.12345"}),
                 glue_output("steps", {"text/plain": "'1,200'"}),
                 glue_output("figure", {"text/plain": "<Figure>",
                                        "image/png": PNG})])
    drawn = nbformat.v4.new_code_cell(
        "plot()", metadata={"tags": ["hide-input"]},
        outputs=[nbformat.v4.new_output("stream", text="drawn\n")])
    quiet = nbformat.v4.new_code_cell(
        "train()", metadata={"tags": ["remove-output"]},
        outputs=[nbformat.v4.new_output("stream", text="noise\n")])
    return nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell(MARKDOWN), first, hidden, drawn,
        quiet])


def test_a_reader_notebook_has_outputs_values_and_no_hidden_cells():
    nb = reader_notebooks.reader_notebook(executed(), "page", "cpu = {}\n")
    nbformat.validate(nb)
    text = nb.cells[0].source
    assert "The loss is 0.12 after 1,200 steps" in text
    assert "`fig-loss`" in text
    assert "[vaswani2017attention; he2016deep]" in text
    assert "![A falling curve.](attachment:figure.png)" in text
    assert "*The loss after 1,200 steps.*" in text
    assert "{glue" not in text and "(my-label)=" not in text
    assert nb.cells[0].attachments == {"figure.png": {"image/png": PNG}}
    sources = [c.source for c in nb.cells]
    assert sources[2] == "%%writefile page.sizes.py\ncpu = {}\n"
    assert sources[3].startswith("SIZES = book.sizes")
    assert not any("glue(" in s for s in sources)
    drawn, quiet = nb.cells[4], nb.cells[5]
    assert drawn.outputs[0].text == "drawn\n"
    assert drawn.metadata.jupyter == {"source_hidden": True}
    assert quiet.outputs == []
    assert nb.cells[3].outputs[0].data["text/plain"] == "{'steps': 3}"


def test_a_page_without_sizes_gets_no_sizes_cell():
    nb = reader_notebooks.reader_notebook(executed(), "page", None)
    assert not any("%%writefile" in c.source for c in nb.cells)


@pytest.mark.parametrize(("spec", "text", "expected"), [
    (None, "'a b'", "a b"), (".1%", "0.256", "25.6%"),
    (",", "12345", "12,345"),
    (None, "np.float64(0.5)", "np.float64(0.5)"), (".2f", "0.5", "0.50"),
])
def test_glued_text_is_formatted_as_the_page_shows_it(spec, text, expected):
    assert reader_notebooks.glue_text({"text/plain": text}, spec) == expected


def _built() -> list[Path]:
    found = sorted(SOURCES.rglob("*.ipynb"))
    if not found:
        pytest.fail(f"no built notebooks under {SOURCES}: run 'make book'")
    return found


@pytest.mark.slow
def test_every_download_is_executed_and_clean():
    for path in _built():
        nb = nbformat.read(path, as_version=4)
        text = "\n".join(c.source for c in nb.cells)
        assert "{glue" not in text, path
        assert not any("remove-cell" in c.metadata.get("tags", [])
                       for c in nb.cells), path
        code = [c for c in nb.cells if c.cell_type == "code"]
        if code:  # a page that runs code shows what it printed
            assert any(c.outputs for c in code), path


@pytest.mark.slow
@pytest.mark.parametrize("page", ["architecture/counting",
                                  "implementation/training-well"])
def test_a_download_runs_on_its_own_at_smoke_sizes(page, tmp_path,
                                                   monkeypatch):
    from nbclient import NotebookClient

    source = SOURCES / f"{page}.ipynb"
    if not source.exists():
        _built()
        pytest.fail(f"{source} was not built")
    shutil.copy(source, tmp_path)  # alone: no sizes file, no book beside
    nb = nbformat.read(tmp_path / source.name, as_version=4)
    monkeypatch.setenv("BOOK_SMOKE", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("TRANSFORMER_BOOK_MODELS", str(tmp_path / "models"))
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in nb.cells for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    assert os.path.exists(tmp_path / f"{source.stem}.sizes.py")
