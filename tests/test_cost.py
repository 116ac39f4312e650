import random

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from transformer_book import plotting
from transformer_book.attention import MultiHeadAttention, explicit_attention
from transformer_book.cost import (
    AttentionFlops,
    attention_flops,
    loglog_slope,
    lstm_flops,
    peak_memory,
    score_matrix_bytes,
)
from transformer_book.rnn import LSTM


def _counted(fn):
    counter = FlopCounterMode(display=False)
    with counter:
        fn()
    return counter.get_total_flops()


@pytest.mark.parametrize("seed", range(4))
def test_attention_flops_equal_flop_counter_on_explicit_path(seed):
    rng = random.Random(seed)
    heads = rng.randint(1, 4)
    d_model = heads * rng.randint(1, 8)
    batch, lq, lk = rng.randint(1, 3), rng.randint(1, 20), rng.randint(1, 20)
    mha = MultiHeadAttention(d_model, heads)
    x = torch.randn(batch, lq, d_model)
    memory = torch.randn(batch, lk, d_model)
    with explicit_attention():
        self_count = _counted(lambda: mha(x, x, x))
        cross_count = _counted(lambda: mha(x, memory, memory))
    expected = attention_flops(lq, d_model, batch=batch)
    assert self_count == expected.total
    cross = attention_flops(lq, d_model, kv_len=lk, batch=batch)
    assert cross_count == cross.total


def test_attention_flops_terms():
    f = attention_flops(10, 8, batch=3)
    assert isinstance(f, AttentionFlops)
    assert f.projections == 3 * 8 * 10 * 8**2
    assert f.scores == f.weighted_sum == 3 * 2 * 10 * 10 * 8
    assert f.quadratic == f.scores + f.weighted_sum
    assert f.total == f.projections + f.quadratic
    # The quadratic terms equal the projections at N = 2 D.
    g = attention_flops(16, 8)
    assert g.quadratic == g.projections
    # Heads do not change the count.
    with explicit_attention():
        x = torch.randn(1, 6, 12)
        counts = {
            h: _counted(lambda h=h: MultiHeadAttention(12, h)(x, x, x))
            for h in (1, 3, 12)
        }
    assert len(set(counts.values())) == 1


def test_lstm_flops_equal_flop_counter():
    lstm = LSTM(5, 7)
    x = torch.randn(2, 9, 5)
    assert _counted(lambda: lstm(x)) == lstm_flops(9, 5, 7, batch=2)


def test_score_matrix_bytes():
    assert score_matrix_bytes(2, 4, 8) == 2 * 4 * 8 * 8 * 4
    assert score_matrix_bytes(1, 1, 3, 5, dtype=torch.float16) == 30
    assert score_matrix_bytes(1, 2, 3, 4, dtype=torch.float64) == 192


@pytest.mark.parametrize(
    ("fn", "exc", "match"),
    [
        (lambda: attention_flops(0, 8), ValueError, "q_len=0"),
        (lambda: attention_flops(4, 8, kv_len=-1), ValueError, "kv_len=-1"),
        (lambda: attention_flops(4, 8.0), TypeError, "d_model must be"),
        (lambda: attention_flops(4, 8, batch=True), TypeError, "batch"),
        (lambda: lstm_flops(4, 0, 8), ValueError, "input_size=0"),
        (lambda: score_matrix_bytes(1, 0, 4), ValueError, "num_heads=0"),
        (
            lambda: score_matrix_bytes(1, 1, 4, dtype="float32"),
            TypeError,
            "dtype must be",
        ),
        (lambda: loglog_slope([1, 2], [1]), ValueError, "same length"),
        (lambda: loglog_slope([2, 2], [1, 3]), ValueError, "two distinct"),
        (lambda: loglog_slope([1, 2], [0, 3]), ValueError, "positive"),
        (lambda: peak_memory(lambda: None, dev="meta"), ValueError, "dev="),
    ],
)
def test_bad_input_raises(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()


def test_peak_memory_on_cpu_sees_a_known_allocation():
    n = 1 << 20  # 4 MiB of float32

    def two_buffers():
        a = torch.empty(n)
        b = torch.empty(n)
        del a
        c = torch.empty(n // 2)
        return b, c

    peak = peak_memory(two_buffers)
    assert 2 * 4 * n <= peak < 2 * 4 * n + 4096
    assert peak_memory(lambda: None) == 0


def test_peak_memory_explicit_attention_holds_score_matrix():
    mha = MultiHeadAttention(16, 2)
    x = torch.randn(1, 256, 16)
    scores = score_matrix_bytes(1, 2, 256)
    with torch.no_grad(), explicit_attention():
        peak = peak_memory(lambda: mha(x, x, x))
    assert peak >= scores


def test_loglog_slope_recovers_exponent():
    x = np.array([16, 32, 64, 128])
    assert loglog_slope(x, 3 * x**2.0) == pytest.approx(2.0)
    assert loglog_slope(list(x), list(0.5 * x)) == pytest.approx(1.0)


def test_plot_cost_vs_length_draws_curves_and_references():
    before = dict(mpl.rcParams)
    _, ax = plt.subplots()
    lengths = [64, 128, 256]
    out = plotting.plot_cost_vs_length(
        lengths,
        {"a": [1.0, 2.0, 4.0], "b": torch.tensor([1.0, 4.0, 16.0])},
        ylabel="FLOPs",
        crossover=100,
        ax=ax,
        title="t",
    )
    assert out is ax
    assert dict(mpl.rcParams) == before
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels[:4] == ["a", "b", "slope 1", "slope 2"]
    colors = [line.get_color() for line in ax.get_lines()[:2]]
    assert colors == list(plotting.PALETTE[:2])
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    ref2 = ax.get_lines()[3]
    xs, ys = ref2.get_xdata(), ref2.get_ydata()
    assert loglog_slope(xs, ys) == pytest.approx(2.0)
    assert ax.get_title() == "t"


def test_plot_cost_vs_length_bad_input():
    with pytest.raises(ValueError, match="at least one curve"):
        plotting.plot_cost_vs_length([1, 2], {}, ylabel="y")
    with pytest.raises(ValueError, match=r"costs\['a'\] has 1 values"):
        plotting.plot_cost_vs_length([1, 2], {"a": [1.0]}, ylabel="y")
    with pytest.raises(ValueError, match="positive"):
        plotting.plot_cost_vs_length([1, 2], {"a": [1.0, 0.0]}, ylabel="y")
    with pytest.raises(TypeError, match="ax must be matplotlib Axes"):
        plotting.plot_cost_vs_length(
            [1, 2], {"a": [1.0, 2.0]}, ylabel="y", ax="nope"
        )
