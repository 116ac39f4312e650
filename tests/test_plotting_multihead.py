import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from transformer_book import plotting


def test_head_split_draws_one_block_per_head_on_given_axes():
    before = dict(mpl.rcParams)
    _, ax = plt.subplots()
    out = plotting.plot_head_split(4, 12, 3, ax=ax, title="split")
    assert out is ax
    assert len(ax.patches) == 3
    widths = [p.get_width() for p in ax.patches]
    assert widths == [4, 4, 4]
    assert [p.get_x() for p in ax.patches] == [-0.5, 3.5, 7.5]
    assert "head 2" in ax.texts[2].get_text()
    assert ax.get_title() == "split"
    assert dict(mpl.rcParams) == before


def test_head_split_bad_input():
    with pytest.raises(ValueError, match="not divisible by num_heads=3"):
        plotting.plot_head_split(4, 10, 3)
    with pytest.raises(ValueError, match="seq_len=0 must be a positive"):
        plotting.plot_head_split(0, 12, 3)
    with pytest.raises(TypeError, match="ax must be matplotlib Axes"):
        plotting.plot_head_split(2, 4, 2, ax="nope")


def test_attention_offsets_finds_previous_and_next_token_heads():
    size = 5
    eye = torch.eye(size)
    previous = eye.roll(-1, dims=1)  # row i puts its weight on i - 1
    following = eye.roll(1, dims=1)  # row i puts its weight on i + 1
    weights = torch.stack([previous, following])[None].repeat(3, 1, 1, 1)
    ax = plotting.plot_attention_offsets(weights, circular=True)
    bars = ax.patches
    assert len(bars) == 2 * size
    heights = np.array([b.get_height() for b in bars]).reshape(2, size)
    # Offsets -2..2 (mod T): "previous" is -1, "next" is +1, and the
    # wrap-around entries (row 0 -> key T-1) count as -1 too.
    np.testing.assert_allclose(heights[0], [0, 1, 0, 0, 0])
    np.testing.assert_allclose(heights[1], [0, 0, 0, 1, 0])
    ticks = [int(t) for t in ax.get_xticks()]
    assert ticks == [-2, -1, 0, 1, 2]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["head 0", "head 1"]


def test_attention_offsets_linear_offsets_average_each_diagonal():
    w = np.zeros((1, 3, 3))
    w[0, 1, 0] = 1.0  # offset -1, one of its two entries
    w[0, 2, 1] = 0.5  # offset -1, the other
    ax = plotting.plot_attention_offsets(w, titles=["only"])
    heights = [b.get_height() for b in ax.patches]
    # Offsets -2..2; offset -1 averages 1.0 and 0.5.
    np.testing.assert_allclose(heights, [0, 0.75, 0, 0, 0])
    assert ax.get_legend().get_texts()[0].get_text() == "only"


def test_attention_offsets_bad_input():
    with pytest.raises(ValueError, match=r"must be \(H, T, T\)"):
        plotting.plot_attention_offsets(torch.ones(2, 3, 4))
    with pytest.raises(ValueError, match=r"must be \(H, T, T\)"):
        plotting.plot_attention_offsets(torch.ones(3, 3))
    with pytest.raises(ValueError, match="titles has 1 entries, expected 2"):
        plotting.plot_attention_offsets(torch.ones(2, 3, 3), titles=["a"])
