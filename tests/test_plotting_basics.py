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
