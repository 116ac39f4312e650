import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from transformer_book import plotting


def test_softmax_sharpness_draws_one_sorted_line_per_dim():
    weights = {4: torch.tensor([0.1, 0.6, 0.3]), 64: np.array([1.0, 0, 0])}
    ax = plotting.plot_softmax_sharpness(weights, title="t")
    lines = ax.get_lines()
    assert len(lines) == 2
    np.testing.assert_allclose(lines[0].get_ydata(), [0.6, 0.3, 0.1])
    assert ax.get_title() == "t"


def test_plot_helpers_draw_on_given_axes_and_leave_rc_alone():
    before = dict(mpl.rcParams)
    _, ax = plt.subplots()
    out = plotting.plot_softmax_sharpness({4: torch.ones(4) / 4}, ax=ax)
    assert out is ax
    assert dict(mpl.rcParams) == before


def test_plot_softmax_sharpness_bad_input():
    with pytest.raises(ValueError, match="weights must map"):
        plotting.plot_softmax_sharpness({})
    with pytest.raises(ValueError, match=r"weights\[4\] must be 1-D"):
        plotting.plot_softmax_sharpness({4: torch.ones(2, 2)})
    with pytest.raises(TypeError, match="ax must be matplotlib Axes"):
        plotting.plot_softmax_sharpness({4: torch.ones(2)}, ax="nope")


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
        "plotting.plot_softmax_sharpness({4: [0.2, 0.8]})"
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
