"""Positional encodings: values, the relative-offset properties, errors."""

from __future__ import annotations

import math
import random

import pytest
import torch

from transformer_book import positional
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
    sincos2d_encoding,
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
    module = SinusoidalPositionalEncoding(8, max_seq_len=20)
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
    module = SinusoidalPositionalEncoding(4, max_seq_len=6).to(F64)
    assert module(torch.zeros(1, 6, 4, dtype=F64)).dtype == F64


def test_sinusoidal_module_error_past_max_len():
    module = SinusoidalPositionalEncoding(8, max_seq_len=10)
    module(torch.zeros(1, 10, 8))
    with pytest.raises(ValueError, match="max_seq_len=10"):
        module(torch.zeros(1, 11, 8))
    with pytest.raises(ValueError, match="max_seq_len=10"):
        module(torch.zeros(1, 4, 8), offset=7)


def test_sinusoidal_module_checks_width_and_rank():
    module = SinusoidalPositionalEncoding(8, max_seq_len=10)
    with pytest.raises(ValueError, match="d_model=8"):
        module(torch.zeros(1, 3, 6))
    with pytest.raises(ValueError, match="x must be 3-D"):
        module(torch.zeros(3, 8))
    with pytest.raises(ValueError, match="offset=-1"):
        module(torch.zeros(1, 3, 8), offset=-1)


def test_sincos2d_rows_and_columns_share_halves():
    table = sincos2d_encoding(4, 8)
    assert table.shape == (16, 8)
    grid = table.view(4, 4, 8)  # (row, column, d_model)
    # Same row -> same first half; same column -> same second half.
    assert torch.equal(grid[2, 0, :4], grid[2, 3, :4])
    assert torch.equal(grid[0, 1, 4:], grid[3, 1, 4:])
    assert not torch.equal(grid[0, 0, :4], grid[1, 0, :4])
    torch.testing.assert_close(grid[3, 1, :4], sinusoidal_encoding(4, 4)[3])
    with pytest.raises(ValueError, match="d_model=6 must be divisible by 4"):
        sincos2d_encoding(4, 6)


# ------------------------------------------------------------------- learned


def test_learned_embedding_adds_its_rows():
    module = LearnedPositionalEmbedding(6, max_seq_len=12)
    assert sum(p.numel() for p in module.parameters()) == 12 * 6
    x = torch.randn(2, 5, 6)
    out = module(x, offset=3)
    rows = module.embedding.weight[3:8].expand_as(x)
    assert torch.allclose(out - x, rows, atol=1e-6)


def test_learned_embedding_trains_only_the_rows_it_sees():
    module = LearnedPositionalEmbedding(4, max_seq_len=10)
    module(torch.randn(2, 6, 4)).sum().backward()
    grad = module.embedding.weight.grad
    assert grad[:6].abs().min().item() > 0
    assert grad[6:].abs().max().item() == 0.0


def test_learned_embedding_error_past_max_len():
    module = LearnedPositionalEmbedding(4, max_seq_len=8)
    with pytest.raises(ValueError, match="max_seq_len=8"):
        module(torch.zeros(1, 9, 4))


def test_learned_embedding_reset_parameters():
    module = LearnedPositionalEmbedding(64, max_seq_len=256, init_std=0.02)
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


def test_rope_takes_strided_and_half_precision_input():
    # Queries arrive as a transposed view (B, T, H, D) -> (B, H, T, D);
    # a slice can start at an odd element or step through the features.
    base = torch.randn(2, 7, 3, 17, dtype=F64)
    views = [
        base[..., :16].transpose(1, 2),  # transposed, contiguous rows
        base[..., 1:17],  # starts at an odd element
        base[..., :16].transpose(-1, -2).contiguous().transpose(-1, -2),
        base[..., ::2][..., :8],  # every other feature
    ]
    for x in views:
        positions = torch.arange(x.shape[-2], dtype=F64) + 5
        expected = _complex_rope(x.contiguous(), positions)
        torch.testing.assert_close(apply_rotary(x, offset=5), expected)
    for dtype, tol in [(torch.float16, 2e-3), (torch.bfloat16, 2e-2),
                       (torch.float32, 1e-6)]:
        x = base[..., :16].transpose(1, 2).to(dtype)
        out = apply_rotary(x, offset=5)
        assert out.dtype == dtype and out.shape == x.shape
        ref = _complex_rope(x.to(F64), torch.arange(7, dtype=F64) + 5)
        assert (out.to(F64) - ref).abs().max().item() < tol * 8


def test_rope_gradients_pass_the_gradient_check():
    x = torch.randn(2, 9, 3, 8, dtype=F64).transpose(1, 2)
    x.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: apply_rotary(t, offset=3), x)


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


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_rope_module_keeps_float64_angles_after_half(dtype):
    # model.half() used to round the frequency buffer: at position 4096 the
    # angles were off by more than a radian (an error of 1.7 in bfloat16).
    rope = RotaryEmbedding(64).to(dtype)
    x = torch.randn(1, 2, 3, 64).to(dtype)
    out = rope(x, offset=4096)
    assert out.dtype == dtype
    assert torch.equal(out, apply_rotary(x, offset=4096))
    ref = _complex_rope(x, torch.arange(4096, 4099, dtype=F64))
    error = (out.to(F64) - ref).abs().max().item()
    assert error < 0.05 * x.abs().max().item()
    assert rope.freqs.dtype == F64


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


@pytest.mark.parametrize(
    ("call", "exc", "match"),
    [
        # absolute
        (lambda: sinusoidal_encoding(4, 5), ValueError, "d_model=5 must be"),
        (lambda: SinusoidalPositionalEncoding(7), ValueError, "d_model=7"),
        (lambda: sinusoidal_encoding(0, 4), ValueError, "max_seq_len=0"),
        (lambda: LearnedPositionalEmbedding(4, -3), ValueError, "max_seq"),
        (lambda: sinusoidal_encoding(3, 4, base=1), ValueError, "base=1"),
        (
            lambda: SinusoidalPositionalEncoding(4, dropout=1.5),
            ValueError,
            "dropout=1.5",
        ),
        (
            lambda: LearnedPositionalEmbedding(4, 4, init_std=0),
            ValueError,
            "init_std=0",
        ),
        # rotary
        (lambda: RotaryEmbedding(3), ValueError, "head_dim=3"),
        (lambda: rotary_matrix(1, 9), ValueError, "head_dim=9"),
        (lambda: apply_rotary(torch.randn(1, 3, 5)), ValueError, "head_dim"),
        # biases
        (lambda: alibi_slopes(0), ValueError, "num_heads=0"),
        (lambda: alibi_bias(2, 0), ValueError, "q_len=0"),
        (lambda: alibi_bias(2, 3, -1), ValueError, "kv_len=-1"),
        (lambda: alibi_bias(2, 3, q_offset=-1), ValueError, "q_offset=-1"),
        (lambda: RelativePositionBias(-1), ValueError, "num_heads=-1"),
        (lambda: RelativePositionBias(2)(0), ValueError, "q_len=0"),
    ],
)
def test_bad_arguments_raise(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: sinusoidal_encoding("4", 8), "max_seq_len"),
        (lambda: sinusoidal_encoding(4, 8, base="100"), "base"),
        (lambda: sinusoidal_shift_matrix("1", 4), "offset"),
        (lambda: SinusoidalPositionalEncoding(4, dropout="0.1"), "dropout"),
        (lambda: LearnedPositionalEmbedding(4, 4, init_std="0.1"), "init_std"),
        (lambda: rotary_matrix("2", 4), "position"),
        (lambda: RotaryEmbedding(8, base="100"), "base"),
        (lambda: apply_rotary(torch.randn(1, 3, 4), offset="1"), "offset"),
        (lambda: alibi_bias(2, "3"), "q_len"),
        (lambda: RelativePositionBias(2)(3, "4"), "kv_len"),
    ],
)
def test_string_arguments_raise_type_error(call, name):
    # LearnedPositionalEmbedding(init_std="0.1") used to fail inside a
    # comparison ("'>' not supported between 'str' and 'int'").
    with pytest.raises(TypeError, match=name):
        call()


@pytest.mark.parametrize(
    "call",
    [
        lambda dtype: sinusoidal_encoding(4, 8, dtype=dtype),
        lambda dtype: sinusoidal_frequencies(8, dtype=dtype),
        lambda dtype: sinusoidal_shift_matrix(1, 4, dtype=dtype),
        lambda dtype: rotary_matrix(1, 4, dtype=dtype),
        lambda dtype: alibi_bias(2, 3, dtype=dtype),
    ],
)
def test_integer_dtype_raises_type_error(call):
    # sinusoidal_encoding(dtype=torch.long) used to return a table of 0, 1
    # and -1: every sin and cos truncated to an integer.
    with pytest.raises(TypeError, match="dtype must be a floating dtype"):
        call(torch.long)
    with pytest.raises(TypeError, match="dtype must be a floating dtype"):
        call("float32")


def test_rope_input_errors():
    with pytest.raises(ValueError, match="x must be 3-D or 4-D"):
        apply_rotary(torch.randn(4, 8))
    with pytest.raises(TypeError, match="x must be a floating tensor"):
        apply_rotary(torch.ones(1, 2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="positions must have shape"):
        apply_rotary(torch.randn(1, 3, 4), positions=torch.arange(4))
    with pytest.raises(ValueError, match="offset=-2"):
        apply_rotary(torch.randn(1, 3, 4), offset=-2)
    with pytest.raises(ValueError, match="head_dim=8"):
        RotaryEmbedding(8)(torch.randn(1, 3, 4))


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


# ------------------------------------------------------------------ package


def test_every_name_is_exported_by_the_package_and_its_modules():
    from transformer_book.positional import absolute, biases, rotary, sincos2d

    names = set(positional.__all__)
    modules = (absolute, rotary, biases, sincos2d)
    assert names == set().union(*(m.__all__ for m in modules))
    for module in modules:
        for name in module.__all__:
            assert getattr(positional, name) is getattr(module, name)
