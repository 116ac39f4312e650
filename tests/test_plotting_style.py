"""The house style: resolution, size, rc isolation, input conversion.

Also the notebook regression: two figures in one page both show.
"""

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from transformer_book import plotting
from transformer_book.plotting._style import as_array, place_legend


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_new_figures_are_crisp_and_fit_the_text_column():
    ax = plotting.plot_curves([1, 2], {"a": [1.0, 2.0]})
    figure = ax.figure
    assert figure.dpi >= 150
    assert figure.get_figwidth() <= 7.0
    ax = plotting.plot_heatmap(torch.zeros(100, 64))
    assert ax.figure.get_figwidth() <= 7.0


def test_subplots_stacks_panels_in_house_style():
    before = dict(mpl.rcParams)
    fig, axes = plotting.subplots(3, 1, sharex=True)
    assert axes.shape == (3,)
    assert fig.dpi >= 150 and fig.get_figwidth() <= 7.0
    assert fig.get_figheight() == pytest.approx(7.8)
    assert dict(mpl.rcParams) == before
    with pytest.raises(ValueError, match="nrows=0 must be positive"):
        plotting.subplots(0)


def test_as_array_converts_any_dtype_and_names_the_argument():
    np.testing.assert_array_equal(
        as_array(torch.tensor([1.5], dtype=torch.bfloat16), "w"), [1.5]
    )
    np.testing.assert_array_equal(
        as_array(torch.tensor([True, False]), "m"), [1.0, 0.0]
    )
    x = torch.ones(2, requires_grad=True) * 2
    assert as_array(x, "x").dtype == np.float64
    with pytest.raises(ValueError, match=r"w must be 2-D, got shape \(3,\)"):
        as_array([1, 2, 3], "w", 2)
    with pytest.raises(ValueError, match="w must be 1-D or 2-D"):
        as_array(np.zeros((1, 1, 1)), "w", (1, 2))
    with pytest.raises(ValueError, match="w holds NaN"):
        as_array([1.0, float("nan")], "w")
    with pytest.raises(ValueError, match="w holds NaN or infinite"):
        as_array([float("-inf")], "w")
    with pytest.raises(ValueError, match="w is empty"):
        as_array([], "w")
    with pytest.raises(TypeError, match="w must be numbers"):
        as_array([[1, 2], [3]], "w")


def test_place_legend_checks_the_place():
    _, ax = plt.subplots()
    ax.plot([0, 1], label="a")
    place_legend(ax, None)
    assert ax.get_legend() is None
    place_legend(ax, "below")
    assert ax.get_legend() is not None
    with pytest.raises(ValueError, match="legend"):
        place_legend(ax, "middle")


def test_styled_keeps_interactive_mode_switched_on_inside():
    """A backend that turns interactive mode on keeps it on afterwards."""
    was = mpl.is_interactive()

    @plotting.styled
    def starts_backend():
        mpl.interactive(True)

    try:
        mpl.interactive(False)
        starts_backend()
        assert mpl.is_interactive()
    finally:
        mpl.interactive(was)


def test_every_figure_of_a_notebook_is_displayed():
    """Two helper calls in two cells give two images, as a page needs."""
    import nbformat
    from nbclient import NotebookClient

    cell = (
        "from transformer_book import plotting\n"
        "plotting.plot_curves([1, 2], {'a': [0.2, 0.8]})"
    )
    notebook = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(cell) for _ in range(2)]
    )
    NotebookClient(notebook, timeout=60, kernel_name="python3").execute()
    images = [
        output
        for c in notebook.cells
        for output in c.outputs
        if "image/png" in output.get("data", {})
    ]
    assert len(images) == 2
