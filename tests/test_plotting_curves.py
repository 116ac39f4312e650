"""plot_curves, the bar chart of attention by offset, the word-vector scatter.

Each test checks what was drawn (the lines' data, the bars' heights, the
points' positions), that the helper returns the axes, and the error for
bad input.
"""

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from transformer_book import plotting


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _slope(xs, ys):
    return np.polyfit(np.log(xs), np.log(ys), 1)[0]


def test_plot_curves_draws_each_curve_on_given_axes():
    before = dict(mpl.rcParams)
    _, ax = plt.subplots()
    out = plotting.plot_curves(
        [1, 2, 3],
        {"a": [1.0, 0.5, 0.25], 0.9: torch.tensor([3.0, 2.0, 1.0])},
        xlabel="distance",
        ylabel="norm",
        title="t",
        ax=ax,
    )
    assert out is ax
    assert dict(mpl.rcParams) == before
    a, b = ax.get_lines()
    np.testing.assert_allclose(a.get_xdata(), [1, 2, 3])
    np.testing.assert_allclose(a.get_ydata(), [1.0, 0.5, 0.25])
    np.testing.assert_allclose(b.get_ydata(), [3.0, 2.0, 1.0])
    assert [a.get_label(), b.get_label()] == ["a", "0.9"]
    assert ax.get_xlabel() == "distance" and ax.get_ylabel() == "norm"
    assert ax.get_title() == "t"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["a", "0.9"]
    # House colours even on axes made outside the house style.
    assert [a.get_color(), b.get_color()] == list(plotting.PALETTE[:2])
    # Crisp: a figure the helper draws on is raised to the house dpi.
    assert ax.figure.dpi >= 150


def test_plot_curves_keeps_coinciding_curves_distinguishable():
    """The intro's d_k=64 curve sat hidden under the d_k=512 one."""
    same = [0.9, 0.05, 0.05]
    ax = plotting.plot_curves([1, 2, 3], {"64": same, "512": same})
    first, second = ax.get_lines()
    assert first.get_marker() != second.get_marker()
    assert first.get_linestyle() != second.get_linestyle()
    # The later marker is smaller, so it sits inside the earlier one.
    assert second.get_markersize() < first.get_markersize()


def test_plot_curves_log_axes_and_reference_slopes():
    lengths = [64, 128, 256, 512]
    ax = plotting.plot_curves(
        lengths,
        {"linear": [1.0, 2.0, 4.0, 8.0], "quadratic": [1.0, 4.0, 16, 64]},
        logx=True,
        logy=True,
        reference_slopes=(1, 2),
        vlines={"$N = 2D$": 128},
    )
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    lines = {line.get_label(): line for line in ax.get_lines()}
    for slope in (1, 2):
        ref = lines[f"slope {slope}"]
        assert _slope(ref.get_xdata(), ref.get_ydata()) == pytest.approx(
            slope
        )
        # Starts at the geometric mean of the curves' first values (1, 1).
        assert ref.get_ydata()[0] == pytest.approx(1.0)
    np.testing.assert_allclose(lines["$N = 2D$"].get_xdata(), [128, 128])
    # Plain numbers on the base-2 length axis, not 2^k.
    assert isinstance(
        ax.xaxis.get_major_formatter(), mpl.ticker.ScalarFormatter
    )


def test_plot_curves_short_log_axis_reads_plain_numbers():
    ax = plotting.plot_curves([1, 2, 3], {"a": [30.0, 12.0, 5.0]}, logy=True)
    major = ax.yaxis.get_major_formatter()
    minor = ax.yaxis.get_minor_formatter()
    assert major(10.0, 0) == "10" and minor(20.0, 0) == "20"
    assert minor(40.0, 0) == ""  # only 1, 2 and 5 over more than a decade
    # Many decades keep the powers of ten.
    ax = plotting.plot_curves([1, 2], {"a": [1.0, 1e9]}, logy=True)
    assert isinstance(
        ax.yaxis.get_major_formatter(), mpl.ticker.LogFormatterSciNotation
    )


def test_plot_curves_reference_lines_are_labelled():
    ax = plotting.plot_curves(
        [10, 20],
        {"RNN": [1.0, 0.3], "LSTM": [1.0, 1.0]},
        hlines={"chance (1/8)": 0.125},
        vlines={"training length": 15},
        ylim=(0, 1.05),
        legend="outside",
    )
    lines = {line.get_label(): line for line in ax.get_lines()}
    np.testing.assert_allclose(lines["chance (1/8)"].get_ydata(), [0.125] * 2)
    np.testing.assert_allclose(lines["training length"].get_xdata(), [15] * 2)
    legend = ax.get_legend()
    labels = [t.get_text() for t in legend.get_texts()]
    assert labels == ["RNN", "LSTM", "chance (1/8)", "training length"]
    # "outside" anchors the legend right of the axes, off the data.
    assert legend.get_bbox_to_anchor().x0 > ax.get_window_extent().x1 - 1
    assert ax.get_ylim() == (0, 1.05)


def test_plot_curves_per_curve_x_and_smoothing():
    losses = {
        "skip-gram": (np.arange(1, 7) / 3, [6.0, 4.0, 2.0, 2.0, 2.0, 2.0]),
        "CBOW": (np.arange(1, 4) / 1, np.array([3.0, 1.0, 2.0])),
    }
    ax = plotting.plot_curves(None, losses, smooth=2, markers=False)
    sg, cbow = ax.get_lines()
    np.testing.assert_allclose(sg.get_ydata(), [5.0, 3.0, 2.0, 2.0, 2.0])
    np.testing.assert_allclose(sg.get_xdata(), np.arange(2, 7) / 3)
    np.testing.assert_allclose(cbow.get_ydata(), [2.0, 1.5])
    assert sg.get_marker() in ("None", None, "")
    # Without x, a plain curve runs over its indices.
    ax = plotting.plot_curves(None, {"a": [5.0, 6.0, 7.0]})
    np.testing.assert_allclose(ax.get_lines()[0].get_xdata(), [0, 1, 2])


def test_plot_curves_steps_and_integer_ticks():
    offsets = torch.arange(-3, 4)
    buckets = torch.tensor([5, 4, 3, 0, 1, 2, 3])
    ax = plotting.plot_curves(offsets, {"encoder": buckets}, steps=True)
    line = ax.get_lines()[0]
    assert line.get_drawstyle() == "steps-mid"
    np.testing.assert_allclose(line.get_ydata(), buckets.numpy())
    ax.figure.canvas.draw()
    ticks = ax.get_xticks()
    np.testing.assert_allclose(ticks, np.round(ticks))
    ax = plotting.plot_curves([1, 2, 3], {"a": [3, 2, 1]}, xticks=[1, 2, 3])
    np.testing.assert_allclose(ax.get_xticks(), [1, 2, 3])


def test_plot_curves_bfloat16_and_long_curves():
    y = torch.linspace(0, 1, 200, dtype=torch.bfloat16)
    ax = plotting.plot_curves(torch.arange(200), {"bf16": y}, legend=None)
    line = ax.get_lines()[0]
    np.testing.assert_allclose(line.get_ydata(), y.float().numpy())
    assert ax.get_legend() is None
    # A long curve gets about a dozen markers, not 200.
    assert line.get_markevery()[1] == 17


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        (([1, 2], {}), {}, ValueError, "curves is empty"),
        (([1, 2], {"a": [1.0]}), {}, ValueError, r"curves\['a'\] has 1"),
        (([1, 2], {"a": [1.0, np.nan]}), {}, ValueError, "NaN"),
        (([1, 2], {"a": [[1.0, 2.0]]}), {}, ValueError, "must be 1-D"),
        (
            ([1, 2], {"a": [1.0, 0.0]}),
            {"logy": True},
            ValueError,
            r"curves\['a'\] must be positive",
        ),
        (
            ([0, 2], {"a": [1.0, 2.0]}),
            {"logx": True},
            ValueError,
            "must be positive for the logarithmic x axis",
        ),
        (([1, 2], {"a": [1, 2]}), {"smooth": 0}, ValueError, "smooth=0"),
        (([1, 2], {"a": [1, 2]}), {"legend": "left"}, ValueError, "legend"),
        (([1, 2], {"a": ["x", "y"]}), {}, TypeError, r"curves\['a'\]"),
        (([1, 2], {"a": [1, 2]}), {"ax": "nope"}, TypeError, "ax must be"),
    ],
)
def test_plot_curves_bad_input(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        plotting.plot_curves(*args, **kwargs)


# -- attention by offset ------------------------------------------------------


def test_attention_offsets_finds_previous_and_next_token_heads():
    size = 5
    eye = torch.eye(size)
    previous = eye.roll(-1, dims=1)  # row i puts its weight on i - 1
    following = eye.roll(1, dims=1)  # row i puts its weight on i + 1
    weights = torch.stack([previous, following])[None].repeat(3, 1, 1, 1)
    _, ax = plt.subplots()
    out = plotting.plot_attention_offsets(weights, circular=True, ax=ax)
    assert out is ax
    heights = np.array([b.get_height() for b in ax.patches]).reshape(2, size)
    # Offsets -2..2 (mod T): "previous" is -1, "next" is +1, and the
    # wrap-around entries (row 0 -> key T-1) count as -1 too.
    np.testing.assert_allclose(heights[0], [0, 1, 0, 0, 0])
    np.testing.assert_allclose(heights[1], [0, 0, 0, 1, 0])
    assert [int(t) for t in ax.get_xticks()] == [-2, -1, 0, 1, 2]
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["head 0", "head 1"]
    # The legend sits outside the axes, where it covers no bar.
    ax.figure.canvas.draw()
    box = legend.get_window_extent()
    assert box.x0 >= ax.get_window_extent().x1


def test_attention_offsets_linear_offsets_average_each_diagonal():
    w = np.zeros((1, 3, 3))
    w[0, 1, 0] = 1.0  # offset -1, one of its two entries
    w[0, 2, 1] = 0.5  # offset -1, the other
    ax = plotting.plot_attention_offsets(
        torch.tensor(w, dtype=torch.bfloat16), titles=["only"], title="t"
    )
    heights = [b.get_height() for b in ax.patches]
    np.testing.assert_allclose(heights, [0, 0.75, 0, 0, 0])
    assert ax.get_legend().get_texts()[0].get_text() == "only"
    assert ax.get_title() == "t"


def test_attention_offsets_bad_input():
    with pytest.raises(ValueError, match=r"must be \(H, T, T\)"):
        plotting.plot_attention_offsets(torch.ones(2, 3, 4))
    with pytest.raises(ValueError, match="weights must be 3-D or 4-D"):
        plotting.plot_attention_offsets(torch.ones(3, 3))
    with pytest.raises(ValueError, match="titles has 1 entries, expected 2"):
        plotting.plot_attention_offsets(torch.ones(2, 3, 3), titles=["a"])
    with pytest.raises(ValueError, match="weights holds NaN"):
        plotting.plot_attention_offsets(torch.full((1, 2, 2), float("nan")))


# -- word vectors -------------------------------------------------------------


def test_word_vectors_projects_on_principal_axes_with_group_legend():
    # Two clear clusters along the first axis, spread along the second.
    vectors = torch.tensor(
        [[1.0, 0.1, 0.0], [1.0, -0.1, 0.0], [-1.0, 0.1, 0.0], [-1.0, -0.1, 0]]
    )
    _, ax = plt.subplots()
    out = plotting.plot_word_vectors(
        vectors,
        ["int", "str", "if", "for"],
        groups=["types", "types", "statements", "statements"],
        ax=ax,
    )
    assert out is ax
    types, statements = ax.collections
    xy_types, xy_statements = types.get_offsets(), statements.get_offsets()
    assert len(xy_types) == len(xy_statements) == 2
    # The groups separate along principal axis 1.
    assert np.sign(xy_types[:, 0]).tolist() == [np.sign(xy_types[0, 0])] * 2
    assert np.sign(xy_types[0, 0]) == -np.sign(xy_statements[0, 0])
    assert [t.get_text() for t in ax.texts] == ["int", "str", "if", "for"]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["types", "statements"]


def test_word_vectors_bad_input():
    with pytest.raises(ValueError, match="labels has 1 entries, expected 2"):
        plotting.plot_word_vectors(torch.ones(2, 3), ["a"])
    with pytest.raises(ValueError, match="groups has 3 entries"):
        plotting.plot_word_vectors(
            torch.eye(2), ["a", "b"], groups=["x", "y", "z"]
        )
    with pytest.raises(ValueError, match=r"len\(vectors\)=1 must be at"):
        plotting.plot_word_vectors(torch.ones(1, 3), ["a"])
