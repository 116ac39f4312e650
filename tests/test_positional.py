"""Positional encodings: values, the relative-offset properties, errors."""

from __future__ import annotations

import math
import random

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from transformer_book import plotting
from transformer_book.attention import scaled_dot_product_attention
from transformer_book.masks import causal_mask
from transformer_book.positional import (
    LearnedPositionalEmbedding,
    RelativePositionBias,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    alibi_bias,
    alibi_slopes,
    apply_rotary,
    relative_position_bucket,
    rotary_frequencies,
    rotary_matrix,
    sinusoidal_encoding,
    sinusoidal_frequencies,
    sinusoidal_shift_matrix,
)

F64 = torch.float64


# ---------------------------------------------------------------- sinusoidal


def test_sinusoidal_matches_closed_form():
    rng = random.Random(0)
    for _ in range(5):
        max_len = rng.randint(1, 40)
        d_model = 2 * rng.randint(1, 16)
        table = sinusoidal_encoding(max_len, d_model, dtype=F64)
        assert table.shape == (max_len, d_model)
        for pos in range(max_len):
            for i in range(d_model // 2):
                angle = pos / 10000 ** (2 * i / d_model)
                assert table[pos, 2 * i].item() == pytest.approx(
                    math.sin(angle), abs=1e-12
                )
                assert table[pos, 2 * i + 1].item() == pytest.approx(
                    math.cos(angle), abs=1e-12
                )


def test_sinusoidal_matches_the_notes_table():
    # The table for seq_len=5, d_model=4 printed in the reference notes,
    # with the digits they print.
    notes = torch.tensor(
        [
            [0.0, 1.0, 0.0, 1.0],
            [0.8415, 0.5403, 0.0099998, 0.99995],
            [0.9093, -0.4161, 0.0199987, 0.9998],
            [0.1411, -0.9900, 0.029995, 0.99955],
            [-0.7568, -0.6536, 0.039989, 0.9992],
        ],
        dtype=F64,
    )
    table = sinusoidal_encoding(5, 4, dtype=F64)
    # Every printed entry is the exact value rounded to 4 or more digits.
    assert (table - notes).abs().max().item() < 5e-5


def test_sinusoidal_default_dtype_and_base():
    table = sinusoidal_encoding(3, 6)
    assert table.dtype == torch.get_default_dtype()
    short = sinusoidal_encoding(3, 6, base=100.0, dtype=F64)
    assert short[2, 2].item() == pytest.approx(math.sin(2 / 100 ** (2 / 6)))


def test_sinusoidal_frequencies_and_wavelengths():
    freqs = sinusoidal_frequencies(512, dtype=F64)
    assert freqs.shape == (256,)
    assert freqs[0].item() == 1.0
    wavelengths = 2 * math.pi / freqs
    assert wavelengths[-1].item() == pytest.approx(
        2 * math.pi * 10000 ** (510 / 512)
    )
    assert torch.all(wavelengths[1:] > wavelengths[:-1])


@pytest.mark.parametrize("offset", [1, 2, 5, -3, 0.5])
def test_shift_matrix_moves_every_position(offset):
    d_model, max_len = 16, 60
    table = sinusoidal_encoding(max_len, d_model, dtype=F64)
    matrix = sinusoidal_shift_matrix(offset, d_model, dtype=F64)
    positions = torch.arange(10, 50, dtype=F64)
    # PE at the shifted positions, from the closed form (any real offset).
    freqs = sinusoidal_frequencies(d_model, dtype=F64)
    angles = (positions + offset)[:, None] * freqs
    shifted = torch.stack((angles.sin(), angles.cos()), -1).flatten(-2)
    moved = table[10:50] @ matrix.T
    assert torch.allclose(moved, shifted, atol=1e-12)


def test_shift_matrix_is_a_rotation_group():
    m2 = sinusoidal_shift_matrix(2, 8, dtype=F64)
    m3 = sinusoidal_shift_matrix(3, 8, dtype=F64)
    m5 = sinusoidal_shift_matrix(5, 8, dtype=F64)
    assert torch.allclose(m2 @ m3, m5, atol=1e-12)
    assert torch.allclose(m2.T @ m2, torch.eye(8, dtype=F64), atol=1e-12)
    # Block diagonal: nothing mixes different frequency pairs.
    assert m5[0, 2:].abs().max().item() == 0.0


def test_sinusoidal_module_adds_a_buffer_not_a_parameter():
    module = SinusoidalPositionalEncoding(8, max_len=20)
    assert list(module.parameters()) == []
    assert "pe" in dict(module.named_buffers())
    assert "pe" not in module.state_dict()
    x = torch.randn(3, 7, 8)
    out = module(x)
    table = sinusoidal_encoding(12, 8)
    # (x + pe) - x in float32: exact up to rounding at x's scale.
    assert torch.allclose(out - x, table[:7].expand(3, 7, 8), atol=1e-6)
    shifted = module(x, offset=5)
    assert torch.allclose(shifted - x, table[5:12], atol=1e-6)


def test_sinusoidal_module_follows_dtype():
    module = SinusoidalPositionalEncoding(4, max_len=6).to(F64)
    assert module(torch.zeros(1, 6, 4, dtype=F64)).dtype == F64


def test_sinusoidal_module_error_past_max_len():
    module = SinusoidalPositionalEncoding(8, max_len=10)
    module(torch.zeros(1, 10, 8))
    with pytest.raises(ValueError, match="max_len=10"):
        module(torch.zeros(1, 11, 8))
    with pytest.raises(ValueError, match="max_len=10"):
        module(torch.zeros(1, 4, 8), offset=7)


def test_sinusoidal_module_checks_width_and_rank():
    module = SinusoidalPositionalEncoding(8, max_len=10)
    with pytest.raises(ValueError, match="d_model=8"):
        module(torch.zeros(1, 3, 6))
    with pytest.raises(ValueError, match="x must be 3-D"):
        module(torch.zeros(3, 8))
    with pytest.raises(ValueError, match="offset=-1"):
        module(torch.zeros(1, 3, 8), offset=-1)


# ------------------------------------------------------------------- learned


def test_learned_embedding_adds_its_rows():
    module = LearnedPositionalEmbedding(6, max_len=12)
    assert sum(p.numel() for p in module.parameters()) == 12 * 6
    x = torch.randn(2, 5, 6)
    out = module(x, offset=3)
    rows = module.embedding.weight[3:8].expand_as(x)
    assert torch.allclose(out - x, rows, atol=1e-6)


def test_learned_embedding_trains_only_the_rows_it_sees():
    module = LearnedPositionalEmbedding(4, max_len=10)
    module(torch.randn(2, 6, 4)).sum().backward()
    grad = module.embedding.weight.grad
    assert grad[:6].abs().min().item() > 0
    assert grad[6:].abs().max().item() == 0.0


def test_learned_embedding_error_past_max_len():
    module = LearnedPositionalEmbedding(4, max_len=8)
    with pytest.raises(ValueError, match="max_len=8"):
        module(torch.zeros(1, 9, 4))


def test_learned_embedding_reset_parameters():
    module = LearnedPositionalEmbedding(64, max_len=256, init_std=0.02)
    std = module.embedding.weight.std().item()
    assert 0.018 < std < 0.022


# -------------------------------------------------------------------- rotary


def _complex_rope(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Reference: pairs as complex numbers times e^{i m theta}."""
    d = x.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=F64) / d)
    z = torch.view_as_complex(x.to(F64).reshape(*x.shape[:-1], d // 2, 2))
    rot = torch.polar(torch.ones_like(theta), positions[:, None] * theta)
    return torch.view_as_real(z * rot).flatten(-2)


@pytest.mark.parametrize("shape", [(2, 3, 7, 8), (3, 5, 16), (1, 1, 4, 2)])
def test_rope_agrees_with_complex_reference(shape):
    x = torch.randn(*shape, dtype=F64)
    positions = torch.arange(shape[-2], dtype=F64)
    assert torch.allclose(
        apply_rotary(x), _complex_rope(x, positions), atol=1e-12
    )
    assert torch.allclose(
        apply_rotary(x, offset=11),
        _complex_rope(x, positions + 11),
        atol=1e-12,
    )


def test_rope_scores_depend_only_on_the_offset():
    q = torch.randn(2, 4, 9, 16, dtype=F64)
    k = torch.randn(2, 4, 9, 16, dtype=F64)
    scores = apply_rotary(q) @ apply_rotary(k).transpose(-2, -1)
    for shift in (1, 13, 1000):
        moved = apply_rotary(q, offset=shift) @ apply_rotary(
            k, offset=shift
        ).transpose(-2, -1)
        assert torch.allclose(scores, moved, atol=1e-9)
    # Same query and key vectors at every position: the score matrix is
    # Toeplitz (constant along each diagonal m - n).
    q1 = q[:, :, :1].expand_as(q)
    k1 = k[:, :, :1].expand_as(k)
    toeplitz = apply_rotary(q1) @ apply_rotary(k1).transpose(-2, -1)
    assert torch.allclose(
        toeplitz[..., 1:, 1:], toeplitz[..., :-1, :-1], atol=1e-12
    )


def test_rope_preserves_norms():
    x = torch.randn(3, 2, 50, 32, dtype=F64)
    rotated = apply_rotary(x, offset=123)
    assert torch.allclose(rotated.norm(dim=-1), x.norm(dim=-1), atol=1e-12)


def test_rope_is_not_the_identity_but_position_zero_is():
    x = torch.randn(1, 4, 8, dtype=F64)
    rotated = apply_rotary(x)
    assert torch.equal(rotated[:, 0], x[:, 0])
    assert (rotated[:, 1:] - x[:, 1:]).abs().max().item() > 1e-3


def test_rope_matrix_form_and_relative_rotation():
    d = 8
    x = torch.randn(5, d, dtype=F64)
    for m in range(5):
        r_m = rotary_matrix(m, d, dtype=F64)
        expected = apply_rotary(x[None, m : m + 1], offset=m)[0, 0]
        assert torch.allclose(r_m @ x[m], expected, atol=1e-12)
    r3, r7 = rotary_matrix(3, d, dtype=F64), rotary_matrix(7, d, dtype=F64)
    assert torch.allclose(r3.T @ r7, rotary_matrix(4, d, dtype=F64))


def test_rope_positions_argument_equals_offset():
    x = torch.randn(2, 6, 4)
    a = apply_rotary(x, offset=3)
    b = apply_rotary(x, positions=torch.arange(3, 9))
    assert torch.allclose(a, b)


def test_rope_module_equals_function_and_has_no_parameters():
    rope = RotaryEmbedding(16, base=500.0)
    assert list(rope.parameters()) == []
    x = torch.randn(2, 3, 5, 16)
    assert torch.allclose(
        rope(x, offset=2), apply_rotary(x, offset=2, base=500.0)
    )
    assert torch.allclose(
        rope.freqs, rotary_frequencies(16, base=500.0, dtype=F64)
    )


def test_rope_keeps_dtype_and_precision_at_long_positions():
    x = torch.randn(1, 4, 8, dtype=torch.float32)
    out = apply_rotary(x, offset=100_000)
    assert out.dtype == torch.float32
    ref = _complex_rope(x, torch.arange(100_000, 100_004, dtype=F64))
    assert torch.allclose(out.to(F64), ref, atol=1e-5)


# --------------------------------------------------------------------- ALiBi


def test_alibi_slopes_for_eight_heads():
    slopes = alibi_slopes(8)
    expected = torch.tensor([2.0**-h for h in range(1, 9)], dtype=F64)
    assert torch.equal(slopes, expected)


@pytest.mark.parametrize("n", [1, 2, 4, 16])
def test_alibi_slopes_powers_of_two(n):
    slopes = alibi_slopes(n)
    ratio = 2.0 ** (-8.0 / n)
    expected = torch.tensor([ratio ** (h + 1) for h in range(n)], dtype=F64)
    assert torch.allclose(slopes, expected, rtol=0, atol=1e-15)


def test_alibi_slopes_non_power_of_two_follow_the_paper():
    # 12 heads: the 8 slopes of 8 heads, then slopes 1, 3, 5, 7 (0-based
    # 0, 2, 4, 6) of 16 heads: 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5.
    slopes = alibi_slopes(12)
    head8 = [2.0**-h for h in range(1, 9)]
    extra = [2.0 ** (-(h + 0.5)) for h in range(4)]
    assert torch.allclose(slopes, torch.tensor(head8 + extra, dtype=F64))
    six = alibi_slopes(6)
    assert torch.allclose(
        six,
        torch.tensor([2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3], dtype=F64),
    )
    assert len(set(alibi_slopes(24).tolist())) == 24


def test_alibi_bias_values():
    bias = alibi_bias(8, 6, dtype=F64)
    assert bias.shape == (8, 6, 6)
    slopes = alibi_slopes(8)
    assert torch.equal(
        torch.diagonal(bias, dim1=-2, dim2=-1), torch.zeros(8, 6, dtype=F64)
    )
    assert not torch.signbit(torch.diagonal(bias, dim1=-2, dim2=-1)).any()
    for h in range(8):
        for i in range(6):
            for j in range(6):
                assert bias[h, i, j].item() == -slopes[h].item() * abs(i - j)


def test_alibi_bias_with_offset_for_decoding():
    full = alibi_bias(4, 7, dtype=F64)
    last = alibi_bias(4, 2, 7, q_offset=5, dtype=F64)
    assert torch.equal(last, full[:, 5:])


def test_alibi_bias_as_attention_mask():
    q = torch.randn(2, 4, 5, 8, dtype=F64)
    k = torch.randn(2, 4, 5, 8, dtype=F64)
    v = torch.randn(2, 4, 5, 8, dtype=F64)
    bias = alibi_bias(4, 5, dtype=F64)
    out = scaled_dot_product_attention(q, k, v, bias, is_causal=True)
    scores = q @ k.transpose(-2, -1) / math.sqrt(8) + bias
    scores = scores.masked_fill(~causal_mask(5), float("-inf"))
    expected = scores.softmax(-1) @ v
    assert torch.allclose(out, expected, atol=1e-12)


# ------------------------------------------------------------------ T5 bias


def test_relative_buckets_exact_then_logarithmic():
    rel = torch.arange(-300, 301)
    buckets = relative_position_bucket(rel, num_buckets=32, max_distance=128)
    b = dict(zip(rel.tolist(), buckets.tolist(), strict=True))
    # Offsets -7..7 each have their own bucket; keys after the query are
    # shifted by 16.
    for d in range(8):
        assert b[-d] == d
    for d in range(1, 8):
        assert b[d] == 16 + d
    # Logarithmic: 8 + floor(log(d / 8) / log(16) * 8).
    for d in (8, 12, 16, 31, 32, 64, 100):
        expected = 8 + int(math.log(d / 8) / math.log(16) * 8)
        assert b[-d] == expected
    assert b[-128] == b[-300] == 15
    assert b[128] == b[300] == 31
    distances = torch.arange(0, 300)
    left = relative_position_bucket(-distances)
    assert torch.all(left[1:] >= left[:-1])


def test_relative_buckets_causal():
    rel = torch.arange(-200, 10)
    buckets = relative_position_bucket(
        rel, bidirectional=False, num_buckets=32, max_distance=128
    )
    b = dict(zip(rel.tolist(), buckets.tolist(), strict=True))
    assert all(b[d] == 0 for d in range(0, 10))
    assert [b[-d] for d in range(16)] == list(range(16))
    assert b[-128] == b[-200] == 31
    assert buckets.max().item() == 31


def test_relative_position_bias_is_toeplitz():
    module = RelativePositionBias(3, num_buckets=8, max_distance=16)
    bias = module(6, 9)
    assert bias.shape == (3, 6, 9)
    assert torch.equal(bias[:, 1:, 1:], bias[:, :-1, :-1])
    assert torch.equal(module(2, 9, q_offset=4), module(9)[:, 4:6])
    bias.sum().backward()
    assert module.embedding.weight.grad.abs().sum().item() > 0


# --------------------------------------------------------------- bad inputs


def test_odd_d_model_raises():
    with pytest.raises(ValueError, match="d_model=5 must be even"):
        sinusoidal_encoding(4, 5)
    with pytest.raises(ValueError, match="d_model=7 must be even"):
        SinusoidalPositionalEncoding(7)
    with pytest.raises(ValueError, match="d_model=3 must be even"):
        sinusoidal_shift_matrix(1, 3)


@pytest.mark.parametrize("max_len", [0, -3])
def test_non_positive_max_len_raises(max_len):
    with pytest.raises(ValueError, match=f"max_len={max_len}"):
        sinusoidal_encoding(max_len, 4)
    with pytest.raises(ValueError, match=f"max_len={max_len}"):
        LearnedPositionalEmbedding(4, max_len)


def test_non_positive_d_model_raises():
    with pytest.raises(ValueError, match="d_model=0"):
        sinusoidal_encoding(3, 0)
    with pytest.raises(ValueError, match="d_model=-2"):
        LearnedPositionalEmbedding(-2, 4)


def test_non_int_sizes_raise_type_error():
    with pytest.raises(TypeError, match="max_len must be an int"):
        sinusoidal_encoding(3.0, 4)
    with pytest.raises(TypeError, match="d_model must be an int"):
        LearnedPositionalEmbedding(True, 4)
    with pytest.raises(TypeError, match="num_heads must be an int"):
        alibi_slopes(2.0)


def test_bad_base_and_dropout_raise():
    with pytest.raises(ValueError, match="base=1"):
        sinusoidal_encoding(3, 4, base=1)
    with pytest.raises(ValueError, match="dropout=1.5"):
        SinusoidalPositionalEncoding(4, dropout=1.5)
    with pytest.raises(ValueError, match="init_std=0"):
        LearnedPositionalEmbedding(4, 4, init_std=0)


def test_odd_head_dim_raises():
    with pytest.raises(ValueError, match="head_dim=5"):
        apply_rotary(torch.randn(1, 3, 5))
    with pytest.raises(ValueError, match="head_dim=3"):
        RotaryEmbedding(3)
    with pytest.raises(ValueError, match="head_dim=9"):
        rotary_matrix(1, 9)


def test_rope_input_errors():
    with pytest.raises(ValueError, match="x must be 3-D or 4-D"):
        apply_rotary(torch.randn(4, 8))
    with pytest.raises(TypeError, match="x must be floating"):
        apply_rotary(torch.ones(1, 2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="positions must have shape"):
        apply_rotary(torch.randn(1, 3, 4), positions=torch.arange(4))
    with pytest.raises(ValueError, match="offset=-2"):
        apply_rotary(torch.randn(1, 3, 4), offset=-2)
    with pytest.raises(ValueError, match="head_dim=8"):
        RotaryEmbedding(8)(torch.randn(1, 3, 4))


@pytest.mark.parametrize("num_heads", [0, -1])
def test_num_heads_below_one_raises(num_heads):
    with pytest.raises(ValueError, match=f"num_heads={num_heads}"):
        alibi_slopes(num_heads)
    with pytest.raises(ValueError, match=f"num_heads={num_heads}"):
        alibi_bias(num_heads, 3)
    with pytest.raises(ValueError, match=f"num_heads={num_heads}"):
        RelativePositionBias(num_heads)


def test_alibi_bias_bad_lengths_raise():
    with pytest.raises(ValueError, match="q_len=0"):
        alibi_bias(2, 0)
    with pytest.raises(ValueError, match="k_len=-1"):
        alibi_bias(2, 3, -1)
    with pytest.raises(ValueError, match="q_offset=-1"):
        alibi_bias(2, 3, q_offset=-1)


def test_relative_bucket_errors():
    with pytest.raises(TypeError, match="relative_position must hold int"):
        relative_position_bucket(torch.zeros(3))
    with pytest.raises(ValueError, match="num_buckets=7"):
        relative_position_bucket(
            torch.zeros(3, dtype=torch.long), num_buckets=7
        )
    with pytest.raises(ValueError, match="max_distance=4"):
        relative_position_bucket(
            torch.zeros(3, dtype=torch.long), num_buckets=32, max_distance=4
        )
    with pytest.raises(ValueError, match="q_len=0"):
        RelativePositionBias(2)(0)


# ------------------------------------------------------------------ figures


def test_positional_figures_draw_and_return_axes():
    table = sinusoidal_encoding(40, 16)
    ax = plotting.plot_positional_encoding(table)
    assert ax.images
    ax = plotting.plot_encoding_waves(table, dims=[0, 2, 6])
    assert len(ax.lines) == 3
    axes = plotting.plot_alibi_bias(alibi_bias(4, 8), heads=[0, 3])
    assert len(axes) == 2
    ax = plotting.plot_relative_buckets(
        torch.arange(-40, 41),
        {"bidirectional": relative_position_bucket(torch.arange(-40, 41))},
    )
    assert ax.lines
    ax = plotting.plot_length_generalization(
        [8, 16, 32],
        {"a": [1.0, 0.9, 0.5], "b": [1.0, 1.0, 1.0]},
        train_len=8,
    )
    assert len(ax.lines) >= 2
    plt.close("all")


def test_positional_figures_reject_bad_input():
    with pytest.raises(ValueError, match="encoding must be 2-D"):
        plotting.plot_positional_encoding(np.zeros(3))
    with pytest.raises(ValueError, match="dims"):
        plotting.plot_encoding_waves(np.zeros((5, 4)), dims=[4])
    with pytest.raises(ValueError, match="bias must be 3-D"):
        plotting.plot_alibi_bias(np.zeros((3, 3)))
