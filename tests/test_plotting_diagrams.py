"""Tests of the teaching diagrams in ``transformer_book.plotting.diagrams``."""

import itertools

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from matplotlib.axes import Axes

from transformer_book import plotting
from transformer_book.plotting import diagrams

NEW_DIAGRAMS = [
    diagrams.draw_qkv_flow,
    diagrams.draw_query_row,
    diagrams.draw_heads_split_merge,
    diagrams.draw_cross_attention,
    diagrams.draw_seq2seq_attention,
]
ALL_DIAGRAMS = [
    diagrams.draw_unrolled_rnn,
    diagrams.draw_lstm_cell,
    diagrams.draw_gru_cell,
    *NEW_DIAGRAMS,
]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _texts(ax: Axes) -> list[str]:
    return [t.get_text() for t in ax.texts]


def _tagged(ax: Axes, gid: str) -> list:
    return [p for p in ax.patches if p.get_gid() == gid]


def _overlapping_texts(ax: Axes) -> list[tuple[str, str]]:
    """Pairs of texts whose drawn extents overlap (1 px tolerance)."""
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = [
        (t.get_text(), t.get_window_extent(renderer).expanded(1.0, 1.0))
        for t in ax.texts
        if t.get_text().strip()
    ]
    clashes = []
    for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2):
        box_a, box_b = box_a.padded(-1.0), box_b.padded(-1.0)
        if box_a.overlaps(box_b):
            clashes.append((a, b))
    return clashes


# -- every diagram ---------------------------------------------------------


def test_plotting_exports_every_diagram():
    for name in diagrams.__all__:
        assert getattr(plotting, name) is getattr(diagrams, name)


@pytest.mark.parametrize("draw", ALL_DIAGRAMS)
def test_diagrams_draw_on_given_axes_without_touching_rc(draw):
    before = dict(mpl.rcParams)
    _, ax = plt.subplots()
    assert draw(ax=ax, title="t") is ax
    assert ax.get_title() == "t"
    assert len(ax.patches) >= 5  # boxes and arrows were drawn
    assert not ax.axison  # a diagram, not a chart
    assert dict(mpl.rcParams) == before


@pytest.mark.parametrize("draw", NEW_DIAGRAMS)
def test_new_diagrams_fit_the_text_column(draw):
    ax = draw()
    width, height = ax.figure.get_size_inches()
    assert width <= 7.0 + 1e-9
    assert 1.0 < height < 6.0


@pytest.mark.parametrize(
    "draw",
    [
        *ALL_DIAGRAMS,
        lambda: diagrams.draw_qkv_flow(masked=False),
        lambda: diagrams.draw_heads_split_merge(1),
        lambda: diagrams.draw_heads_split_merge(8, d_model=512),
        lambda: diagrams.draw_cross_attention(8, 10),
        lambda: diagrams.draw_cross_attention(1, 1),
        lambda: diagrams.draw_seq2seq_attention(1),
        lambda: diagrams.draw_seq2seq_attention(10),
    ],
)
def test_diagram_texts_do_not_overlap(draw):
    ax = draw()
    assert _overlapping_texts(ax) == []


def test_text_shrinks_when_a_long_row_is_squeezed_into_the_column():
    def first_size(src_len):
        ax = diagrams.draw_seq2seq_attention(src_len)
        state = next(t for t in ax.texts if t.get_text() == "$h_{1}$")
        return state.get_size()

    assert first_size(10) < first_size(4)


# -- the recurrent cells -----------------------------------------------------


def test_unrolled_rnn_labels_every_step():
    ax = diagrams.draw_unrolled_rnn(3)
    assert {"$x_1$", "$x_3$", "$h_0$", "$h_3$"} <= set(_texts(ax))
    assert "$x_4$" not in _texts(ax)
    with pytest.raises(ValueError, match="num_steps=9"):
        diagrams.draw_unrolled_rnn(9)
    with pytest.raises(TypeError, match="num_steps must be an int"):
        diagrams.draw_unrolled_rnn("3")


def test_lstm_and_gru_cells_draw_their_gates():
    lstm = _texts(diagrams.draw_lstm_cell())
    assert {"$f$", "$i$", "$g$", "$o$", "$c_{t-1}$", "$c_t$"} <= set(lstm)
    gru = _texts(diagrams.draw_gru_cell())
    assert {"$z$", "$r$", "$n$", "$h_{t-1}$", "$h_t$"} <= set(gru)
    assert "$c_t$" not in gru


def test_plot_tokenization_draws_one_box_per_token():
    ax = diagrams.plot_tokenization({"word": ["the", " ", "cat"]})
    assert {"the", "\u2423", "cat", "word"} <= set(_texts(ax))
    assert len(ax.patches) == 3
    with pytest.raises(ValueError, match="rows is empty"):
        diagrams.plot_tokenization({})


# -- Q, K, V flow ------------------------------------------------------------


def test_qkv_flow_draws_each_step():
    texts = _texts(diagrams.draw_qkv_flow())
    for label in ("$X$", "$Q$", "$K$", "$V$", "$A$", "$Y$", "Softmax"):
        assert label in texts
    assert "$W^{(q)}$" in texts and "$W^{(v)}$" in texts
    assert any(r"QK^\top" in t and "sqrt{d_k}" in t for t in texts)
    assert "mask" in texts
    assert "mask" not in _texts(diagrams.draw_qkv_flow(masked=False))


def test_qkv_flow_rejects_a_non_bool_mask_flag():
    with pytest.raises(TypeError, match="masked must be a bool, got str"):
        diagrams.draw_qkv_flow(masked="yes")


# -- one query's row ---------------------------------------------------------


def test_query_row_draws_the_illustrative_sentence():
    ax = diagrams.draw_query_row()
    weights = np.array([0.06, 0.38, 0.12, 0.05, 0.07, 0.32])
    bars = _tagged(ax, "weight")
    heights = np.array([b.get_height() for b in bars])
    np.testing.assert_allclose(heights / heights.max(), weights / 0.38)
    texts = _texts(ax)
    assert {"the", "cat", "sat", "mat", "$q$: sat", "0.38", "0.32"} <= set(
        texts
    )
    assert any("Softmax" in t for t in texts)
    assert len(_tagged(ax, "key")) == len(_tagged(ax, "value")) == 6
    assert any("a_{n6} v_{6}" in t for t in texts)  # the weighted sum


# -- heads split and merged --------------------------------------------------


@pytest.mark.parametrize("num_heads", [3, 5])
def test_heads_split_merge_draws_one_box_per_head(num_heads):
    ax = diagrams.draw_heads_split_merge(num_heads)
    assert len(_tagged(ax, "head")) == num_heads
    assert len(_tagged(ax, "split")) == num_heads
    assert len(_tagged(ax, "concat")) == num_heads
    texts = _texts(ax)
    assert f"head {num_heads}" in texts
    assert f"head {num_heads + 1}" not in texts
    assert "$W^{(o)}$" in texts
    assert any(f"$H = {num_heads}$ heads" in t for t in texts)


def test_heads_split_merge_prints_the_sizes():
    texts = _texts(diagrams.draw_heads_split_merge(4, d_model=512))
    assert "$d_k = 128$ each" in texts
    assert r"$d_\mathrm{model} = 512$" in texts


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        ((0,), {}, ValueError, "num_heads=0 must be positive"),
        ((9,), {}, ValueError, "num_heads=9 must be between 1 and 8"),
        ((2.0,), {}, TypeError, "num_heads must be an int"),
        ((True,), {}, TypeError, "num_heads must be an int, got bool"),
        ((4,), {"d_model": 510}, ValueError, "d_model=510 is not divisible"),
        ((4,), {"d_model": -8}, ValueError, "d_model=-8 must be positive"),
    ],
)
def test_heads_split_merge_rejects_bad_input(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        diagrams.draw_heads_split_merge(*args, **kwargs)


# -- cross-attention ---------------------------------------------------------


@pytest.mark.parametrize(("q_len", "kv_len"), [(3, 5), (2, 7)])
def test_cross_attention_grid_is_q_len_by_kv_len(q_len, kv_len):
    ax = diagrams.draw_cross_attention(q_len, kv_len)
    cells = _tagged(ax, "weight")
    assert len(cells) == q_len * kv_len
    xs = {round(c.get_x(), 6) for c in cells}
    ys = {round(c.get_y(), 6) for c in cells}
    assert (len(ys), len(xs)) == (q_len, kv_len)
    texts = _texts(ax)
    assert f"$x_{{{q_len}}}$" in texts and f"$y_{{{q_len}}}$" in texts
    assert f"$z_{{{kv_len}}}$" in texts
    assert f"$x_{{{q_len + 1}}}$" not in texts
    assert any(f"{q_len} \\times {kv_len}" in t for t in texts)
    assert any("K = ZW^{(k)}" in t for t in texts)
    assert any("Softmax" in t for t in texts)


def test_cross_attention_rows_peak_left_to_right():
    ax = diagrams.draw_cross_attention(2, 6)
    cells = _tagged(ax, "weight")  # row by row
    darkness = [-sum(c.get_facecolor()[:3]) for c in cells]
    assert np.argmax(darkness[:6]) == 1
    assert np.argmax(darkness[6:]) == 4


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        ((0, 5), {}, ValueError, "q_len=0 must be positive"),
        ((3, 11), {}, ValueError, "kv_len=11 must be between 1 and 10"),
        (("3", 5), {}, TypeError, "q_len must be an int"),
    ],
)
def test_cross_attention_rejects_bad_input(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        diagrams.draw_cross_attention(*args, **kwargs)


# -- RNN encoder-decoder with additive attention ------------------------------


def test_seq2seq_attention_draws_encoder_scores_and_context():
    ax = diagrams.draw_seq2seq_attention(3)
    assert len(_tagged(ax, "encoder")) == 3
    assert len(_tagged(ax, "decoder")) == 2  # s_{i-1} and s_i
    bars = _tagged(ax, "weight")
    heights = np.array([b.get_height() for b in bars])
    assert np.argmax(heights) == 1  # the decoder reads mostly x_2
    texts = _texts(ax)
    for label in ("$h_{3}$", "$s_{i-1}$", "$s_i$", "$x_{1}$", "$x_{3}$"):
        assert label in texts
    assert any("tanh" in t and "s_{i-1}" in t for t in texts)  # the score
    assert any("Softmax" in t for t in texts)
    assert any(r"c_i = \sum_j \alpha_{ij} h_j" in t for t in texts)


def test_seq2seq_attention_default_weights_sum_to_one():
    for src_len in (1, 4, 10):
        ax = diagrams.draw_seq2seq_attention(src_len)
        shown = [float(t) for t in _texts(ax) if t.startswith(("0.", "1."))]
        assert len(shown) == src_len
        assert sum(shown) == pytest.approx(1.0, abs=0.01 * src_len)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        ((0,), {}, ValueError, "src_len=0 must be positive"),
        ((11,), {}, ValueError, "src_len=11 must be between 1 and 10"),
        ((4.0,), {}, TypeError, "src_len must be an int"),
    ],
)
def test_seq2seq_attention_rejects_bad_input(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        diagrams.draw_seq2seq_attention(*args, **kwargs)


def test_diagrams_reject_axes_that_are_not_axes():
    with pytest.raises(TypeError, match="ax must be matplotlib Axes"):
        diagrams.draw_cross_attention(ax="nope")


# -- Part III: the transformer block and the kinds of attention --------------

PART3_DIAGRAMS = [
    diagrams.draw_transformer_block,
    lambda **kw: diagrams.draw_transformer_block(
        norm_first=True, decoder=True, **kw
    ),
    diagrams.draw_attention_kinds,
    lambda **kw: diagrams.draw_attention_kinds(src_len=8, tgt_len=1, **kw),
]


@pytest.mark.parametrize("draw", PART3_DIAGRAMS)
def test_part3_diagrams_are_diagrams_in_the_text_column(draw):
    before = dict(mpl.rcParams)
    ax = draw()
    width, height = ax.figure.get_size_inches()
    assert width <= 7.0 + 1e-9 and 1.0 < height < 6.0
    assert not ax.axison
    assert _overlapping_texts(ax) == []
    _, given = plt.subplots()
    assert draw(ax=given, title="t") is given and given.get_title() == "t"
    assert dict(mpl.rcParams) == before


@pytest.mark.parametrize(
    ("kwargs", "count"),
    [
        ({}, 2),
        ({"norm_first": True}, 2),
        ({"decoder": True}, 3),
        ({"decoder": True, "norm_first": True}, 3),
    ],
)
def test_transformer_block_has_a_norm_and_an_addition_per_sublayer(
    kwargs, count
):
    ax = diagrams.draw_transformer_block(**kwargs)
    sublayers = _tagged(ax, "sublayer")
    norms = _tagged(ax, "norm")
    adds = _tagged(ax, "add")
    assert len(sublayers) == len(norms) == len(adds) == count
    texts = _texts(ax)
    assert any("Feed-forward" in t for t in texts)
    assert (
        any("Masked" in t for t in texts)
        == any("memory" in t for t in texts)
        == any("cross-attention" in t for t in texts)
        == kwargs.get("decoder", False)
    )
    assert r"$\times L$" in texts


def _centre_y(patch) -> float:
    if hasattr(patch, "center"):  # a Circle
        return float(patch.center[1])
    return float(patch.get_y() + patch.get_height() / 2)


@pytest.mark.parametrize("decoder", [False, True])
def test_transformer_block_puts_the_norm_where_the_variant_does(decoder):
    post = diagrams.draw_transformer_block(decoder=decoder)
    pre = diagrams.draw_transformer_block(norm_first=True, decoder=decoder)
    for ax, norm_first in ((post, False), (pre, True)):
        sublayers = _tagged(ax, "sublayer")
        norms = _tagged(ax, "norm")
        adds = _tagged(ax, "add")
        for sub, norm, add in zip(sublayers, norms, adds, strict=True):
            y_sub, y_norm, y_add = map(_centre_y, (sub, norm, add))
            if norm_first:  # LayerNorm -> sublayer -> add
                assert y_norm < y_sub < y_add
            else:  # sublayer -> add -> LayerNorm
                assert y_sub < y_add < y_norm


@pytest.mark.parametrize("name", ["norm_first", "decoder"])
def test_transformer_block_rejects_flags_that_are_not_bools(name):
    with pytest.raises(TypeError, match=f"{name} must be a bool, got int"):
        diagrams.draw_transformer_block(**{name: 1})


@pytest.mark.parametrize(("src_len", "tgt_len"), [(5, 4), (3, 6), (1, 1)])
def test_attention_kinds_fill_the_allowed_cells(src_len, tgt_len):
    ax = diagrams.draw_attention_kinds(src_len=src_len, tgt_len=tgt_len)
    allowed = len(_tagged(ax, "allowed"))
    blocked = len(_tagged(ax, "blocked"))
    causal = tgt_len * (tgt_len + 1) // 2
    assert allowed == src_len**2 + causal + tgt_len * src_len
    assert blocked == tgt_len * (tgt_len - 1) // 2
    # One key dot per column and one query dot per row, in every panel.
    assert len(_tagged(ax, "key")) == src_len + tgt_len + src_len
    assert len(_tagged(ax, "query")) == src_len + tgt_len + tgt_len
    texts = _texts(ax)
    for name in ("encoder self-attention", "cross-attention"):
        assert name in texts
    assert f"e{src_len}" in texts and f"d{tgt_len}" in texts


def test_attention_kinds_blocks_exactly_the_future():
    ax = diagrams.draw_attention_kinds(src_len=2, tgt_len=3)
    cells = [p for p in ax.patches if p.get_gid() in ("allowed", "blocked")]
    causal = cells[4:13]  # after the 2 x 2 encoder grid, row by row
    pattern = [c.get_gid() == "allowed" for c in causal]
    expected = np.tril(np.ones((3, 3), dtype=bool)).ravel().tolist()
    assert pattern == expected


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"src_len": 0}, ValueError, "src_len=0 must be positive"),
        ({"tgt_len": 9}, ValueError, "tgt_len=9 must be between 1 and 8"),
        ({"src_len": 2.0}, TypeError, "src_len must be an int"),
    ],
)
def test_attention_kinds_rejects_bad_lengths(kwargs, error, match):
    with pytest.raises(error, match=match):
        diagrams.draw_attention_kinds(**kwargs)


@pytest.mark.parametrize(
    ("shape", "patch_size"), [((1, 28, 28), 7), ((28, 28), 4), ((3, 8, 12), 4)]
)
def test_patches_tiles_are_the_patches_in_row_major_order(shape, patch_size):
    image = torch.rand(shape, generator=torch.Generator().manual_seed(0))
    ax = diagrams.draw_patches(image, patch_size)
    pixels = image if image.ndim == 2 else image.permute(1, 2, 0).squeeze(-1)
    rows = pixels.shape[0] // patch_size
    cols = pixels.shape[1] // patch_size
    tiles = {im.get_gid(): im for im in ax.images}
    assert len(tiles) == rows * cols + 1 and "image" in tiles
    for index in range(rows * cols):
        r, c = divmod(index, cols)
        block = pixels[
            r * patch_size : (r + 1) * patch_size,
            c * patch_size : (c + 1) * patch_size,
        ]
        shown = np.asarray(tiles[f"patch-{index}"].get_array())
        np.testing.assert_allclose(shown, block.numpy(), rtol=0, atol=1e-7)
    channels = 1 if image.ndim == 2 else shape[0]
    values = patch_size * patch_size * channels
    assert any(f"= {values} values" in t for t in _texts(ax))


@pytest.mark.parametrize(
    ("image", "patch_size", "error", "match"),
    [
        (
            torch.zeros(1, 28, 28),
            5,
            ValueError,
            "image height=28 is not divisible by patch_size=5",
        ),
        (torch.zeros(2, 8, 8), 4, ValueError, "image channels=2 must be one"),
        (torch.zeros(1, 36, 36), 4, ValueError, "81 patches; at most 64"),
        (torch.zeros(1, 28, 28), 7.0, TypeError, "patch_size must be an int"),
        (torch.zeros(28), 7, ValueError, "image"),
    ],
)
def test_patches_rejects_bad_input(image, patch_size, error, match):
    with pytest.raises(error, match=match):
        diagrams.draw_patches(image, patch_size)


def test_patches_draws_on_given_axes_without_touching_rc():
    before = dict(mpl.rcParams)
    _, ax = plt.subplots()
    drawn = diagrams.draw_patches(torch.rand(1, 8, 8), 4, ax=ax, title="t")
    assert drawn is ax
    assert ax.get_title() == "t" and not ax.axison
    assert dict(mpl.rcParams) == before


# -- draw_data_parallel ------------------------------------------------------


@pytest.mark.parametrize("num_devices", [1, 2, 4])
def test_data_parallel_has_a_shard_and_replica_per_device(num_devices):
    ax = diagrams.draw_data_parallel(num_devices, batch_size=8)
    for d in range(num_devices):
        assert len(_tagged(ax, f"shard-{d}")) == 1
        assert len(_tagged(ax, f"replica-{d}")) == 1
    assert not _tagged(ax, f"shard-{num_devices}")
    assert len(_tagged(ax, "all-reduce")) == 1
    texts = _texts(ax)
    assert texts.count(f"{8 // num_devices} rows") == num_devices
    assert ax.get_figure().get_size_inches()[0] <= 7.0
    assert not _overlapping_texts(ax)
    # The shards tile the batch: disjoint, side by side, equal widths.
    shards = [_tagged(ax, f"shard-{d}")[0] for d in range(num_devices)]
    widths = {round(s.get_width(), 9) for s in shards}
    assert len(widths) == 1
    for left, right in itertools.pairwise(shards):
        assert right.get_x() == pytest.approx(left.get_x() + left.get_width())


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ((0,), ValueError, "num_devices"),
        ((5,), ValueError, "num_devices"),
        ((2.0,), TypeError, "num_devices"),
        ((3,), ValueError, "batch_size=8 is not divisible by num_devices=3"),
    ],
)
def test_data_parallel_rejects_bad_counts(args, error, match):
    with pytest.raises(error, match=match):
        diagrams.draw_data_parallel(*args, batch_size=8)


def test_data_parallel_draws_on_given_axes_without_touching_rc():
    before = dict(mpl.rcParams)
    _, ax = plt.subplots()
    assert diagrams.draw_data_parallel(ax=ax, title="t") is ax
    assert ax.get_title() == "t" and not ax.axison
    assert dict(mpl.rcParams) == before
    assert plotting.draw_data_parallel is diagrams.draw_data_parallel
