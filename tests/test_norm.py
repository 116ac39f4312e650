"""LayerNorm and RMSNorm: equal to PyTorch's, both paths, errors."""

from __future__ import annotations

import random

import pytest
import torch
from torch import nn

from transformer_book.attention import set_fused
from transformer_book.norm import LayerNorm, RMSNorm

F64 = torch.float64
TOL = {"rtol": 1e-10, "atol": 1e-10}


def _assert_twin(check: str, ours: torch.Tensor, theirs: torch.Tensor):
    torch.testing.assert_close(ours, theirs, **TOL)


def _randomize(module: nn.Module, gen: torch.Generator) -> None:
    """PyTorch sets norms to 1 and 0: make every weight count."""
    with torch.no_grad():
        for p in module.parameters():
            p.normal_(generator=gen).mul_(0.5)


@pytest.mark.parametrize("seed", range(4))
def test_layer_norm_matches_torch(seed):
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    d_model = rng.randint(1, 9)
    theirs = nn.LayerNorm(
        d_model, eps=rng.choice([1e-5, 0.1]), bias=seed % 2 == 0, dtype=F64
    )
    _randomize(theirs, gen)
    ours = LayerNorm.from_torch(theirs)
    assert ours.eps == theirs.eps
    assert (ours.bias is None) == (theirs.bias is None)
    x = torch.randn(2, 3, d_model, dtype=F64, generator=gen) * 3 + 1
    ours.fused = False  # the written-out formula, not the fused kernel
    _assert_twin("LayerNorm", ours(x), theirs(x))


@pytest.mark.parametrize("seed", range(4))
def test_layer_norm_fused_and_explicit_paths_agree(seed):
    """The fused kernel and the written-out formula: values and gradients."""
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    d_model = rng.randint(1, 40)
    shape = [rng.randint(1, 4) for _ in range(rng.randint(0, 3))]
    norm = LayerNorm(d_model, eps=rng.choice([1e-5, 0.1]),
                     bias=seed % 2 == 0, dtype=F64)
    _randomize(norm, gen)
    x = torch.randn(*shape, d_model, dtype=F64, generator=gen) * 3 + 1
    outs, grads = [], []
    for explicit in (False, True):
        x_ = x.clone().requires_grad_()
        norm.zero_grad()
        norm.fused = not explicit
        out = norm(x_)
        out.pow(3).sum().backward()
        outs.append(out)
        grads.append([x_.grad] + [p.grad for p in norm.parameters()])
    torch.testing.assert_close(outs[0], outs[1])
    for fused, written in zip(*grads, strict=True):
        torch.testing.assert_close(fused, written)


def test_layer_norm_path_is_chosen_per_instance():
    norm, other = LayerNorm(4, dtype=F64), LayerNorm(4, dtype=F64)
    x = torch.randn(3, 4, dtype=F64, requires_grad=True)
    assert "NativeLayerNorm" in type(norm(x).grad_fn).__name__
    norm.fused = False
    assert "NativeLayerNorm" not in type(norm(x).grad_fn).__name__
    assert "NativeLayerNorm" in type(other(x).grad_fn).__name__
    set_fused(torch.nn.Sequential(norm, other), False)  # attention only
    assert other.fused


def test_layer_norm_worked_example():
    norm = LayerNorm(3, eps=1e-12, dtype=F64)
    out = norm(torch.tensor([2.0, 0.5, 1.5], dtype=F64))
    expected = torch.tensor([1.0690, -1.3363, 0.2673], dtype=F64)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-4)


@pytest.mark.parametrize("eps", [None, 1e-6, 0.5])
@pytest.mark.parametrize("dtype", [F64, torch.float32])
def test_rms_norm_matches_torch_and_keeps_eps(eps, dtype):
    gen = torch.Generator().manual_seed(1)
    theirs = nn.RMSNorm(5, eps=eps, dtype=dtype)
    _randomize(theirs, gen)
    ours = RMSNorm.from_torch(theirs)
    assert ours.eps == eps  # None stays None: the input dtype's epsilon
    # Small inputs make eps matter, so a wrong eps would show.
    x = torch.randn(3, 4, 5, dtype=dtype, generator=gen) * 1e-4
    if dtype == F64:
        _assert_twin("RMSNorm", ours(x), theirs(x))
    else:
        torch.testing.assert_close(ours(x), theirs(x))


def test_rms_norm_default_eps_is_input_dtypes_epsilon():
    norm = RMSNorm(2, eps=None, dtype=F64)
    x = torch.tensor([[1e-9, -1e-9]], dtype=F64)
    eps = torch.finfo(F64).eps
    expected = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    torch.testing.assert_close(norm(x), expected)


@pytest.mark.parametrize(
    "build, exc, match",
    [
        (lambda: LayerNorm(8, eps=0.0), ValueError, "eps"),
        (lambda: RMSNorm(8, eps=-1.0), ValueError, "eps"),
        (lambda: LayerNorm(0), ValueError, "d_model=0"),
        (lambda: LayerNorm(8, bias="no"), TypeError, "bias must be a bool"),
    ],
)
def test_bad_arguments(build, exc, match):
    with pytest.raises(exc, match=match):
        build()


def test_bad_inputs_are_named():
    with pytest.raises(TypeError, match="x must be a floating"):
        LayerNorm(8)(torch.ones(2, 8, dtype=torch.long))
    with pytest.raises(ValueError, match="d_model=8"):
        RMSNorm(8)(torch.randn(2, 7))
    with pytest.raises(ValueError, match="d_model=8"):
        LayerNorm(8)(torch.randn(8, 3))


@pytest.mark.parametrize(
    "cls, module", [(LayerNorm, nn.RMSNorm(4)), (RMSNorm, nn.LayerNorm(4))]
)
def test_from_torch_rejects_other_modules(cls, module):
    with pytest.raises(TypeError, match="module must be a torch.nn"):
        cls.from_torch(module)


def test_from_torch_rejects_unsupported_norms():
    with pytest.raises(ValueError, match="elementwise_affine"):
        LayerNorm.from_torch(nn.LayerNorm(4, elementwise_affine=False))
    with pytest.raises(ValueError, match="normalized_shape=.2, 4."):
        RMSNorm.from_torch(nn.RMSNorm((2, 4)))
