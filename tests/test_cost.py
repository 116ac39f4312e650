import math
import random

import numpy as np
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from transformer_book.attention import MultiHeadAttention
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
    mha.fused = False  # the written-out path
    x = torch.randn(batch, lq, d_model)
    memory = torch.randn(batch, lk, d_model)
    self_count = _counted(lambda: mha(x, x, x))
    cross_count = _counted(lambda: mha(x, memory, memory))
    expected = attention_flops(lq, d_model, batch=batch)
    assert self_count == expected.total
    cross = attention_flops(lq, d_model, kv_len=lk, batch=batch)
    assert cross_count == cross.total


def test_attention_flops_terms_by_hand():
    # B=3, N=10, D=8. Projections: 4 matrices of 8 x 8 applied to 30 rows,
    # 2 * 30 * 8 * 8 = 3840 FLOPs each. Scores: 3 products of (10, 8) by
    # (8, 10), 2 * 10 * 10 * 8 = 1600 each; the weighted sum costs the same.
    f = attention_flops(10, 8, batch=3)
    assert isinstance(f, AttentionFlops)
    assert (f.projections, f.scores, f.weighted_sum) == (15360, 4800, 4800)
    assert (f.quadratic, f.total) == (9600, 24960)
    # The quadratic terms equal the projections at N = 2 D.
    g = attention_flops(16, 8)
    assert g.quadratic == g.projections == 8192


@pytest.mark.parametrize("num_heads", [1, 3, 12])
def test_attention_flops_terms_equal_flop_counter(num_heads):
    # The two quadratic products alone, head by head as attention does them:
    # H heads of width D / H cost what one head of width D costs.
    B, q_len, kv_len, d_model = 2, 5, 7, 12
    head_dim = d_model // num_heads
    q = torch.randn(B, num_heads, q_len, head_dim)
    k = torch.randn(B, num_heads, kv_len, head_dim)
    v = torch.randn(B, num_heads, kv_len, head_dim)
    weights = torch.randn(B, num_heads, q_len, kv_len)
    f = attention_flops(q_len, d_model, kv_len=kv_len, batch=B)
    assert _counted(lambda: q @ k.transpose(-2, -1)) == f.scores
    assert _counted(lambda: weights @ v) == f.weighted_sum
    x = torch.randn(B, q_len, d_model)
    memory = torch.randn(B, kv_len, d_model)
    proj = torch.nn.Linear(d_model, d_model)
    counted = _counted(lambda: (proj(x), proj(memory), proj(memory), proj(x)))
    assert counted == f.projections


def test_lstm_flops_equal_flop_counter():
    lstm = LSTM(5, 7)
    x = torch.randn(2, 9, 5)
    assert _counted(lambda: lstm(x)) == lstm_flops(9, 5, 7, batch=2)


@pytest.mark.parametrize(
    ("dtype", "shape"),
    [
        (torch.float32, (2, 4, 8, 8)),
        (torch.float16, (1, 1, 3, 5)),
        (torch.float64, (1, 2, 3, 4)),
        (torch.bfloat16, (3, 2, 1, 7)),
    ],
)
def test_score_matrix_bytes_equal_a_computed_score_tensor(dtype, shape):
    B, H, q_len, kv_len = shape
    q = torch.ones(B, H, q_len, 4, dtype=dtype)
    k = torch.ones(B, H, kv_len, 4, dtype=dtype)
    scores = q @ k.transpose(-2, -1)  # (B, H, q_len, kv_len)
    got = score_matrix_bytes(B, H, q_len, kv_len, dtype=dtype)
    assert got == scores.nbytes
    # By hand: (1, 1, 3, 5) in float16 is 15 elements of 2 bytes.
    assert score_matrix_bytes(1, 1, 3, 5, dtype=torch.float16) == 30


@pytest.mark.parametrize(
    ("fn", "exc", "match"),
    [
        (lambda: attention_flops(0, 8), ValueError, "q_len=0"),
        (lambda: attention_flops(4, "8"), TypeError, "d_model must be an int"),
        (lambda: lstm_flops(4, 0, 8), ValueError, "input_size=0"),
        (lambda: lstm_flops(4, 2, "8"), TypeError, "hidden_size must be"),
        (lambda: score_matrix_bytes(1, 0, 4), ValueError, "num_heads=0"),
        (
            lambda: score_matrix_bytes(1, 1, 4, dtype="float32"),
            TypeError,
            "dtype must be",
        ),
        (
            lambda: peak_memory(lambda: None, device="meta"),
            ValueError,
            "device='meta'",
        ),
        (
            lambda: peak_memory(lambda: None, device="gpu"),
            ValueError,
            "device='gpu'",
        ),
        (lambda: peak_memory(None), TypeError, "fn must be callable"),
        (lambda: loglog_slope([1, 2], [1]), ValueError, "same length"),
        (lambda: loglog_slope([2, 2], [1, 3]), ValueError, "two distinct"),
        (
            lambda: loglog_slope([1, 2], [0, 3]),
            ValueError,
            "y must be positive",
        ),
        # NaN used to pass every check and give a NaN slope (or a LinAlgError).
        (
            lambda: loglog_slope([1, 2, 4], [1, math.nan, 4]),
            ValueError,
            "y must be positive and finite.*nan",
        ),
        (
            lambda: loglog_slope([1, math.inf], [1, 2]),
            ValueError,
            "x must be positive and finite",
        ),
        (
            lambda: loglog_slope(["1", "2"], [1, 2]),
            TypeError,
            "x must be a sequence of numbers",
        ),
        (
            lambda: loglog_slope([1, 2], "12"),
            TypeError,
            "y must be a sequence of numbers",
        ),
        (
            lambda: loglog_slope([[1, 2]], [[1, 2]]),
            ValueError,
            "x must be 1-D",
        ),
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


def test_peak_memory_written_out_attention_holds_score_matrix():
    mha = MultiHeadAttention(16, 2)
    mha.fused = False  # the written-out path
    x = torch.randn(1, 256, 16)
    scores = score_matrix_bytes(1, 2, 256)
    with torch.no_grad():
        peak = peak_memory(lambda: mha(x, x, x))
    assert peak >= scores


def test_loglog_slope_recovers_exponent():
    x = np.array([16, 32, 64, 128])
    assert loglog_slope(x, 3 * x**2.0) == pytest.approx(2.0)
    assert loglog_slope(list(x), list(0.5 * x)) == pytest.approx(1.0)


# -- training memory per device ---------------------------------------------


def test_training_memory_shards_what_each_strategy_shards():
    from transformer_book.cost import training_memory

    n, d = 1_000_000, 4
    ddp = training_memory(n, d)
    assert (ddp.parameters, ddp.gradients, ddp.optimizer) == (
        4 * n, 4 * n, 8 * n)
    assert ddp.total == 16 * n == training_memory(n).total
    zero1 = training_memory(n, d, strategy="zero1")
    assert (zero1.parameters, zero1.gradients, zero1.optimizer) == (
        4 * n, 4 * n, 2 * n)
    zero2 = training_memory(n, d, strategy="zero2")
    assert (zero2.gradients, zero2.optimizer) == (n, 2 * n)
    for strategy in ("fsdp", "tensor", "pipeline"):
        assert training_memory(n, d, strategy=strategy).total == 4 * n
    # Rounded up: no device holds less than its share.
    assert training_memory(10, 3, strategy="fsdp").parameters == 14
    mixed = training_memory(n, param_bytes=2, grad_bytes=2,
                            optimizer_bytes=12)
    assert mixed.total == 16 * n


def test_training_memory_rejects_bad_arguments():
    from transformer_book.cost import training_memory

    with pytest.raises(ValueError, match="strategy"):
        training_memory(10, 2, strategy="zero4")
    with pytest.raises(ValueError, match="num_devices"):
        training_memory(10, 0)
    with pytest.raises(TypeError, match="num_parameters"):
        training_memory(10.5)
