"""FeedForward: position-wise, its activations, errors."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from transformer_book.feedforward import FeedForward

F64 = torch.float64


@pytest.mark.parametrize("activation", ["relu", "gelu", "swiglu"])
def test_feed_forward_is_position_wise(activation):
    ff = FeedForward(8, 16, activation=activation, dtype=F64)
    x = torch.randn(2, 7, 8, dtype=F64)
    perm = torch.randperm(7)
    torch.testing.assert_close(ff(x[:, perm]), ff(x)[:, perm])


def test_feed_forward_activations():
    x = torch.randn(3, 4, dtype=F64)
    relu = FeedForward(4, 6, activation="relu", dtype=F64)
    gelu = FeedForward(4, 6, activation="gelu", dtype=F64)
    gelu.load_state_dict(relu.state_dict())
    hidden = relu.up_proj(x)
    exact = 0.5 * hidden * (1 + torch.erf(hidden / 2**0.5))  # no tanh
    torch.testing.assert_close(gelu(x), gelu.down_proj(exact))
    torch.testing.assert_close(relu(x), relu.down_proj(hidden.clamp_min(0)))
    swiglu = FeedForward(4, 6, activation="swiglu", bias=False, dtype=F64)
    assert swiglu.gate_proj.out_features == swiglu.up_proj.out_features == 6
    assert sum(p.numel() for p in swiglu.parameters()) == 3 * 4 * 6
    gated = F.silu(swiglu.gate_proj(x)) * swiglu.up_proj(x)
    torch.testing.assert_close(swiglu(x), swiglu.down_proj(gated))


@pytest.mark.parametrize(
    "build, exc, match",
    [
        (lambda: FeedForward(8, 16, activation="tanh"), ValueError,
         "activation='tanh'"),
        (lambda: FeedForward(8, 0), ValueError, "d_ff=0"),
        (lambda: FeedForward(8, 4, dropout=1.0), ValueError, "dropout"),
    ],
)
def test_bad_arguments(build, exc, match):
    with pytest.raises(exc, match=match):
        build()
