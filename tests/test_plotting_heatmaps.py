"""plot_heatmap(s) and its thin wrappers: attention, heads, masks, heads split.

Each test checks the image array drawn, the ticks and labels, that the
helper returns the axes, and the error for bad input.
"""

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from transformer_book import plotting
from transformer_book.masks import causal_mask


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _image(ax):
    (image,) = ax.images
    return np.asarray(image.get_array())


def test_plot_heatmap_draws_the_matrix_with_labels():
    before = dict(mpl.rcParams)
    values = torch.arange(6.0).reshape(2, 3)
    _, ax = plt.subplots()
    out = plotting.plot_heatmap(
        values,
        x_labels=["a", "b", "c"],
        y_labels=["x", "y"],
        xlabel="key",
        ylabel="query",
        title="t",
        colorbar_label="weight",
        ax=ax,
    )
    assert out is ax
    assert dict(mpl.rcParams) == before
    np.testing.assert_array_equal(_image(ax), values.numpy())
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["x", "y"]
    assert ax.get_xlabel() == "key" and ax.get_title() == "t"
    colorbar = ax.images[0].colorbar
    assert colorbar is not None and colorbar.ax.get_ylabel() == "weight"
    assert ax.images[0].get_clim() == (0.0, 5.0)


def test_plot_heatmap_integer_ticks_and_diverging_scale():
    """ALiBi's panels showed fractional ticks for integer positions."""
    table = torch.randn(40, 16, generator=torch.Generator().manual_seed(0))
    ax = plotting.plot_heatmap(table, cmap="RdBu_r", center=0.0)
    ax.figure.canvas.draw()
    for ticks in (ax.get_xticks(), ax.get_yticks()):
        np.testing.assert_allclose(ticks, np.round(ticks))
    low, high = ax.images[0].get_clim()
    assert low == pytest.approx(-high)
    assert high == pytest.approx(table.abs().max().item())
    # A short axis gets one tick per cell.
    ax = plotting.plot_heatmap(torch.zeros(3, 5), colorbar=False)
    assert list(ax.get_xticks()) == [0, 1, 2, 3, 4]
    assert ax.images[0].colorbar is None


def test_plot_heatmap_rotates_column_labels_only_when_crowded():
    ax = plotting.plot_heatmap(np.eye(3), x_labels=["le", "chat", "noir"])
    assert ax.get_xticklabels()[0].get_rotation() == 0
    words = [f"word{i}" for i in range(12)]
    ax = plotting.plot_heatmap(np.eye(12), x_labels=words)
    assert ax.get_xticklabels()[0].get_rotation() == 90


def test_plot_heatmap_annotates_cells_in_readable_colours():
    values = np.array([[0.0, 1.0]])
    ax = plotting.plot_heatmap(values, annotate=True, vmin=0, vmax=1)
    texts = ax.texts
    assert [t.get_text() for t in texts] == ["0.00", "1.00"]
    # viridis is dark at 0 and light at 1.
    assert texts[0].get_color() == "white" and texts[1].get_color() == "black"
    ax = plotting.plot_heatmap(values, annotate="{:.0f}")
    assert [t.get_text() for t in ax.texts] == ["0", "1"]
    ax = plotting.plot_heatmap(values, cell_text=[["A1", "B2"]])
    assert [t.get_text() for t in ax.texts] == ["A1", "B2"]


def test_plot_heatmap_converts_bfloat16_integer_and_bool():
    weights = torch.softmax(torch.randn(3, 4), -1).to(torch.bfloat16)
    ax = plotting.plot_heatmap(weights)
    np.testing.assert_array_equal(_image(ax), weights.double().numpy())
    ax = plotting.plot_heatmap(torch.tensor([[1, 0], [2, 3]]))
    np.testing.assert_array_equal(_image(ax), [[1, 0], [2, 3]])
    ax = plotting.plot_heatmap(torch.tensor([[True, False]]))
    np.testing.assert_array_equal(_image(ax), [[1, 0]])


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        ((torch.zeros(3),), {}, ValueError, "values must be 2-D"),
        ((torch.full((2, 2), float("nan")),), {}, ValueError, "NaN"),
        ((torch.zeros(2, 3),), {"x_labels": ["a"]}, ValueError, "x_labels"),
        ((torch.zeros(2, 3),), {"y_labels": ["a"]}, ValueError, "y_labels"),
        (
            (torch.zeros(2, 3),),
            {"cell_text": [["a"]]},
            ValueError,
            "cell_text has 1 entries, expected 2",
        ),
        ((torch.zeros(2, 2),), {"ax": "nope"}, TypeError, "ax must be"),
    ],
)
def test_plot_heatmap_bad_input(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        plotting.plot_heatmap(*args, **kwargs)


def test_plot_heatmaps_share_one_scale_and_one_colorbar():
    bias = -torch.arange(3.0)[:, None, None] * torch.ones(3, 4, 4)
    axes = plotting.plot_heatmaps(
        bias,
        titles=["m = 0", "m = 1", "m = 2"],
        cmap="magma",
        colorbar_label="bias",
        xlabel="key",
        ylabel="query",
    )
    assert len(axes) == 3
    for h, ax in enumerate(axes):
        np.testing.assert_array_equal(_image(ax), bias[h].numpy())
        assert ax.images[0].get_clim() == (-2.0, 0.0)
        assert ax.get_title() == f"m = {h}"
    assert axes[0].get_ylabel() == "query" and axes[1].get_ylabel() == ""
    # One colour bar for the three panels.
    assert len(axes[0].figure.axes) == 4
    assert axes[0].figure.axes[-1].get_ylabel() == "bias"
    # Four panels: two rows of two, within the text column.
    axes = plotting.plot_heatmaps([np.eye(2)] * 4)
    assert axes[0].figure.get_figwidth() <= 7.0
    assert axes[2].get_subplotspec().rowspan.start == 1


def test_plot_heatmaps_bad_input():
    with pytest.raises(ValueError, match="values must be 3-D"):
        plotting.plot_heatmaps(torch.zeros(2, 2))
    with pytest.raises(ValueError, match="values is empty"):
        plotting.plot_heatmaps([])
    with pytest.raises(ValueError, match=r"values\[1\] must be 2-D"):
        plotting.plot_heatmaps([np.eye(2), np.ones(3)])
    with pytest.raises(ValueError, match="titles has 1 entries, expected 2"):
        plotting.plot_heatmaps(torch.zeros(2, 2, 2), titles=["a"])
    _, ax = plt.subplots()
    with pytest.raises(ValueError, match="axes has 1 entries, expected 2"):
        plotting.plot_heatmaps(torch.zeros(2, 2, 2), axes=[ax])


# -- attention ----------------------------------------------------------------


def test_plot_attention_is_a_heatmap_from_zero_to_one():
    weights = torch.softmax(torch.randn(4, 3), -1)
    ax = plotting.plot_attention(
        weights,
        x_labels=["le", "chat", "noir"],
        y_labels=list("wxyz"),
        xlabel="source",
        ylabel="generated",
        ticks_top=True,
        colorbar=False,
    )
    np.testing.assert_allclose(_image(ax), weights.numpy())
    assert ax.images[0].get_clim() == (0.0, 1.0)
    assert [t.get_text() for t in ax.get_xticklabels()] == [
        "le",
        "chat",
        "noir",
    ]
    assert ax.xaxis.get_label_position() == "top"
    assert ax.get_xlabel() == "source"
    ax = plotting.plot_attention(weights.to(torch.bfloat16))
    assert ax.get_xlabel() == "key" and ax.get_ylabel() == "query"
    assert ax.images[0].colorbar.ax.get_ylabel() == "attention weight"
    with pytest.raises(ValueError, match="x_labels has 1 entries"):
        plotting.plot_attention(weights, x_labels=["a"])


def test_plot_attention_heads_one_panel_per_head():
    weights = torch.softmax(torch.randn(2, 3, 3), -1)
    axes = plotting.plot_attention_heads(
        weights, x_labels=list("abc"), y_labels=list("abc")
    )
    assert [ax.get_title() for ax in axes] == ["head 0", "head 1"]
    for h, ax in enumerate(axes):
        np.testing.assert_allclose(_image(ax), weights[h].numpy())
        assert ax.images[0].get_clim() == (0.0, 1.0)
    # Query labels on the first panel only.
    assert [t.get_text() for t in axes[1].get_yticklabels()] == [""] * 3
    _, given = plt.subplots(1, 2)
    out = plotting.plot_attention_heads(
        weights, titles=["back", "ahead"], axes=given
    )
    assert list(out) == list(given)
    assert given[1].get_title() == "ahead"
    with pytest.raises(ValueError, match="weights must be 3-D"):
        plotting.plot_attention_heads(weights[0])


# -- masks --------------------------------------------------------------------


def test_plot_mask_colours_allowed_cells_for_every_mask_dtype():
    causal = causal_mask(4)
    expected = causal.double().numpy()
    _, ax = plt.subplots()
    assert plotting.plot_mask(causal, ax=ax, title="causal") is ax
    np.testing.assert_array_equal(_image(ax), expected)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["may attend", "blocked"]
    assert ax.get_title() == "causal"
    # An integer mask and additive float biases (-inf or the dtype's
    # minimum, here in bfloat16) draw the same picture.
    blocked = torch.finfo(torch.bfloat16).min
    for mask in (
        causal.int(),
        torch.zeros(4, 4).masked_fill(~causal, float("-inf")),
        torch.zeros(4, 4, dtype=torch.bfloat16).masked_fill(~causal, blocked),
        causal.numpy(),
    ):
        ax = plotting.plot_mask(mask, legend=False)
        np.testing.assert_array_equal(_image(ax), expected)
        assert ax.get_legend() is None
    with pytest.raises(ValueError, match="mask must be 2-D"):
        plotting.plot_mask(causal[0])


def test_plot_masks_one_panel_per_mask_titled_by_key():
    masks = {"causal": causal_mask(3), "padding": torch.tensor([[1, 1, 0]])}
    axes = plotting.plot_masks(masks)
    assert [ax.get_title() for ax in axes] == ["causal", "padding"]
    np.testing.assert_array_equal(_image(axes[1]), [[1, 1, 0]])
    assert axes[-1].get_legend() is not None
    assert axes[0].get_legend() is None
    with pytest.raises(ValueError, match="masks is empty"):
        plotting.plot_masks({})
    with pytest.raises(ValueError, match=r"masks\['a'\] must be 2-D"):
        plotting.plot_masks({"a": torch.ones(3, dtype=torch.bool)})


# -- heads split --------------------------------------------------------------


def test_head_split_draws_one_block_per_head_on_given_axes():
    before = dict(mpl.rcParams)
    _, ax = plt.subplots()
    out = plotting.plot_head_split(4, 12, 3, ax=ax, title="split")
    assert out is ax
    assert [p.get_width() for p in ax.patches] == [4, 4, 4]
    assert [p.get_x() for p in ax.patches] == [-0.5, 3.5, 7.5]
    assert [p.get_height() for p in ax.patches] == [4, 4, 4]
    assert ax.texts[2].get_text() == "head 2\nfeatures 8-11"
    assert ax.get_title() == "split"
    assert dict(mpl.rcParams) == before


def test_head_split_bad_input():
    with pytest.raises(ValueError, match="not divisible by num_heads=3"):
        plotting.plot_head_split(4, 10, 3)
    with pytest.raises(ValueError, match="seq_len=0 must be positive"):
        plotting.plot_head_split(0, 12, 3)
    with pytest.raises(TypeError, match="num_heads must be an int"):
        plotting.plot_head_split(2, 4, 2.0)
