"""int8 weights: round trip within half a step, models converted, errors."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from transformer_book.models.gpt import GPT, GPTConfig
from transformer_book.quantization import Int8Linear, nbytes, quantize_int8

DTYPES = (torch.float64, torch.float32)


def _linear(seed: int, dtype: torch.dtype, bias: bool = True) -> nn.Linear:
    """A random layer with a zero row and a row holding one outlier."""
    gen = torch.Generator().manual_seed(seed)
    out_f, in_f = 3 + seed % 5, 2 + seed % 7
    linear = nn.Linear(in_f, out_f, bias=bias, dtype=dtype)
    with torch.no_grad():
        linear.weight.copy_(torch.randn(out_f, in_f, generator=gen))
        linear.weight[0] = 0.0
        linear.weight[1, -1] = 100.0
    return linear


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("seed", range(4))
def test_round_trip_within_half_a_step(seed, dtype):
    linear = _linear(seed, dtype)
    q = Int8Linear.from_linear(linear)
    w = linear.weight.detach()
    assert q.qweight.dtype == torch.int8 and q.scale.dtype == dtype
    assert int(q.qweight.abs().max()) == 127
    assert q.scale[0] == 1 and not q.qweight[0].any()  # the zero row
    # Each row's largest weight maps to +-127 exactly.
    assert torch.equal(q.qweight.abs().amax(1)[1:],
                       torch.full((w.shape[0] - 1,), 127, dtype=torch.int8))
    slack = torch.finfo(dtype).eps * w.abs().amax(1, keepdim=True)
    error = (q.dequantize() - w).abs()
    assert (error <= q.scale[:, None] / 2 + 4 * slack).all()
    assert torch.equal(q.weight, q.dequantize())
    assert torch.equal(q.bias, linear.bias)
    assert q.bias is not linear.bias


@pytest.mark.parametrize("dtype", DTYPES)
def test_forward_uses_the_dequantized_weight(dtype):
    linear = _linear(3, dtype)
    q = Int8Linear.from_linear(linear)
    x = torch.randn(2, 5, linear.in_features, dtype=dtype)
    expected = x @ q.dequantize().T + linear.bias
    torch.testing.assert_close(q(x), expected)
    # |x (W - W_hat)^T| <= (s / 2) ||x||_1 in each output.
    bound = q.scale / 2 * x.abs().sum(-1, keepdim=True)
    assert ((q(x) - linear(x)).abs() <= bound * (1 + 1e-5)).all()
    no_bias = Int8Linear.from_linear(_linear(3, dtype, bias=False))
    assert no_bias.bias is None
    torch.testing.assert_close(no_bias(x), x @ no_bias.dequantize().T)


def test_state_dict_and_to():
    q = Int8Linear.from_linear(_linear(1, torch.float32))
    assert set(q.state_dict()) == {"qweight", "scale", "bias"}
    other = Int8Linear(q.in_features, q.out_features)
    other.load_state_dict(q.state_dict())
    assert torch.equal(other.dequantize(), q.dequantize())
    q64 = copy.deepcopy(q).to(torch.float64)
    assert q64.qweight.dtype == torch.int8  # integers are not cast
    assert q64.scale.dtype == q64.bias.dtype == torch.float64
    assert q64(torch.randn(2, q.in_features, dtype=torch.float64)).dtype \
        == torch.float64
    assert "in_features=" in repr(q)


def test_sequential_every_linear_and_the_error_bound():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 4))
    x = torch.randn(10, 6)
    with torch.no_grad():
        h, y = model[1](model[0](x)), model(x)
        float_model = copy.deepcopy(model)
        assert quantize_int8(model) is model
        assert all(isinstance(model[i], Int8Linear) for i in (0, 2))
        first, second = model[0], model[2]
        h_q = model[1](first(x))
        # Layer 1: (s1 / 2) ||x||_1; ReLU does not stretch it; layer 2:
        # |W2_hat| |h_q - h| + (s2 / 2) ||h||_1.
        e1 = first.scale / 2 * x.abs().sum(-1, keepdim=True)
        e2 = (e1 @ second.dequantize().abs().T
              + second.scale / 2 * h.abs().sum(-1, keepdim=True))
        assert ((h_q - h).abs() <= e1 * (1 + 1e-5)).all()
        assert ((model(x) - y).abs() <= e2 * (1 + 1e-5)).all()
        assert not torch.equal(model(x), float_model(x))


def _gpt(tie: bool) -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=11, max_seq_len=8, d_model=16,
                         num_heads=2, num_layers=2, tie_weights=tie)).eval()


@pytest.mark.parametrize("tie", [True, False])
def test_gpt_linears_quantized_head_and_embedding_float(tie):
    model = _gpt(tie)
    linears = [n for n, m in model.named_modules()
               if isinstance(m, nn.Linear)]
    idx = torch.randint(0, 11, (3, 8), generator=torch.Generator()
                        .manual_seed(1))
    with torch.no_grad():
        before = model(idx, idx)
        embedding = model.token_embedding.weight.clone()
        quantize_int8(model)
        after = model(idx, idx)
    assert len(linears) == 2 * 6
    modules = dict(model.named_modules())
    assert all(isinstance(modules[n], Int8Linear) for n in linears)
    assert not any(isinstance(m, nn.Linear) for m in model.modules())
    assert model.token_embedding.weight.dtype == torch.float32
    assert torch.equal(model.token_embedding.weight, embedding)
    assert (model.lm_head.weight is model.token_embedding.weight) == tie
    torch.testing.assert_close(after[0], before[0], atol=0.02, rtol=0.0)
    assert abs(float(after[1]) - float(before[1])) < 1e-3


def test_tied_linear_head_stays_float_and_shared():
    embedding = nn.Embedding(10, 6)
    head = nn.Linear(6, 10, bias=False)
    head.weight = embedding.weight  # a nanoGPT-style tie
    model = nn.ModuleDict({"embed": embedding, "proj": nn.Linear(6, 6),
                           "head": head})
    quantize_int8(model)
    assert isinstance(model["proj"], Int8Linear)
    assert type(model["head"]) is nn.Linear
    assert model["head"].weight is model["embed"].weight


def test_a_bare_linear_becomes_an_int8_linear():
    linear = _linear(0, torch.float32)
    q = quantize_int8(linear)
    assert isinstance(q, Int8Linear)
    assert torch.equal(q.dequantize(), Int8Linear.from_linear(linear)
                       .dequantize())


def test_linear_weights_take_a_quarter_of_the_bytes():
    model = _gpt(tie=True)
    weights = sum(m.weight.numel() for m in model.modules()
                  if isinstance(m, nn.Linear))
    scales = sum(m.out_features for m in model.modules()
                 if isinstance(m, nn.Linear))
    before = nbytes(model)
    quantize_int8(model)
    # Each weight: 4 bytes -> 1; each row gains a 4-byte scale.
    assert before - nbytes(model) == 3 * weights - 4 * scales
    linear = nn.Linear(256, 256, bias=False)
    ratio = nbytes(linear) / nbytes(quantize_int8(linear))
    assert 3.9 < ratio <= 4.0


def test_bad_input_names_the_argument():
    with pytest.raises(TypeError, match="model must be an nn.Module"):
        quantize_int8(torch.zeros(3, 3))
    with pytest.raises(TypeError, match="linear must be an nn.Linear"):
        Int8Linear.from_linear(nn.Conv1d(2, 2, 1))
    with pytest.raises(TypeError, match="module must be an nn.Module"):
        nbytes("model")
    with pytest.raises(ValueError, match="in_features=0"):
        Int8Linear(0, 3)
