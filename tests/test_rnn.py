"""The from-scratch recurrent cells and layers equal their PyTorch twins."""

from __future__ import annotations

import math
import random

import pytest
import torch
from torch import nn

from transformer_book import rnn

DT = torch.float64
TOL = {"atol": 1e-12, "rtol": 1e-10}

CELLS = [
    (rnn.RNNCell, nn.RNNCell),
    (rnn.LSTMCell, nn.LSTMCell),
    (rnn.GRUCell, nn.GRUCell),
]
LAYERS = [(rnn.RNN, nn.RNN), (rnn.LSTM, nn.LSTM), (rnn.GRU, nn.GRU)]


def _configs(seed: int, count: int) -> list[random.Random]:
    """Seeded random generators, one per configuration."""
    return [random.Random(seed * 1000 + k) for k in range(count)]


def _assert_same_grads(ours: nn.Module, theirs: nn.Module) -> None:
    ours_grads = dict(ours.named_parameters())
    for name, param in theirs.named_parameters():
        torch.testing.assert_close(ours_grads[name].grad, param.grad, **TOL)


def _cell_kwargs(ours_cls, rng: random.Random) -> dict:
    kwargs = {"bias": rng.random() < 0.7, "dtype": DT}
    if ours_cls is rnn.RNNCell:
        kwargs["nonlinearity"] = rng.choice(["tanh", "relu"])
    return kwargs


def _random_state(cls, shape):
    if cls in (rnn.LSTMCell, rnn.LSTM):
        return (torch.randn(shape, dtype=DT), torch.randn(shape, dtype=DT))
    return torch.randn(shape, dtype=DT)


def _total(out) -> torch.Tensor:
    """A scalar that depends on every output tensor."""
    if isinstance(out, torch.Tensor):
        return (
            out * torch.linspace(-1, 1, out.numel(), dtype=DT).view_as(out)
        ).sum()
    return sum(_total(o) for o in out)


@pytest.mark.parametrize(("ours_cls", "torch_cls"), CELLS)
def test_cells_equal_torch_outputs_and_grads(ours_cls, torch_cls):
    for rng in _configs(1, 6):
        input_size, hidden = rng.randint(1, 7), rng.randint(1, 9)
        batch = rng.randint(1, 4)
        twin = torch_cls(input_size, hidden, **_cell_kwargs(ours_cls, rng))
        ours = ours_cls.from_torch(twin)
        x = torch.randn(batch, input_size, dtype=DT, requires_grad=True)
        state = (
            _random_state(ours_cls, (batch, hidden))
            if rng.random() < 0.5
            else None
        )
        expected, got = twin(x, state), ours(x, state)
        torch.testing.assert_close(got, expected, **TOL)

        _total(expected).backward()
        x_grad, x.grad = x.grad, None
        _total(got).backward()
        torch.testing.assert_close(x.grad, x_grad, **TOL)
        _assert_same_grads(ours, twin)


@pytest.mark.parametrize(("ours_cls", "torch_cls"), CELLS)
def test_cells_accept_unbatched_input(ours_cls, torch_cls):
    twin = torch_cls(3, 4, dtype=DT)
    ours = ours_cls.from_torch(twin)
    x = torch.randn(3, dtype=DT)
    state = _random_state(ours_cls, (4,))
    torch.testing.assert_close(ours(x, state), twin(x, state), **TOL)
    torch.testing.assert_close(ours(x), twin(x), **TOL)


@pytest.mark.parametrize(("ours_cls", "torch_cls"), LAYERS)
def test_layers_equal_torch_outputs_and_grads(ours_cls, torch_cls):
    for rng in _configs(2, 8):
        input_size, hidden = rng.randint(1, 6), rng.randint(1, 7)
        num_layers = rng.randint(1, 3)
        batch, steps = rng.randint(1, 3), rng.randint(1, 6)
        batch_first = rng.random() < 0.5
        bidirectional = rng.random() < 0.4
        kwargs = {"bias": rng.random() < 0.7, "dtype": DT}
        if ours_cls is rnn.RNN:
            kwargs["nonlinearity"] = rng.choice(["tanh", "relu"])
        twin = torch_cls(
            input_size,
            hidden,
            num_layers,
            batch_first=batch_first,
            bidirectional=bidirectional,
            **kwargs,
        )
        ours = ours_cls.from_torch(twin)
        assert ours.bidirectional == bidirectional

        x = torch.randn(batch, steps, input_size, dtype=DT)
        x.requires_grad_(True)
        stacked = num_layers * (2 if bidirectional else 1)
        state = (
            _random_state(ours_cls, (stacked, batch, hidden))
            if rng.random() < 0.5
            else None
        )
        # The twin reads (T, B, C) unless it is batch-first.
        x_twin = x if batch_first else x.transpose(0, 1)
        expected_out, expected_state = twin(x_twin, state)
        if not batch_first:
            expected_out = expected_out.transpose(0, 1)  # (B, T, D * H)
        got_out, got_state = ours(x, state)
        torch.testing.assert_close(got_out, expected_out, **TOL)
        torch.testing.assert_close(got_state, expected_state, **TOL)

        loss_twin = _total(expected_out) + _total(expected_state)
        loss_ours = _total(got_out) + _total(got_state)
        grad_twin = torch.autograd.grad(loss_twin, x, retain_graph=True)[0]
        grad_ours = torch.autograd.grad(loss_ours, x, retain_graph=True)[0]
        torch.testing.assert_close(grad_ours, grad_twin, **TOL)
        loss_twin.backward()
        loss_ours.backward()
        _assert_same_grads(ours, twin)


@pytest.mark.parametrize(("ours_cls", "torch_cls"), LAYERS)
def test_layers_accept_unbatched_input(ours_cls, torch_cls):
    twin = torch_cls(3, 4, 2, dtype=DT)
    ours = ours_cls.from_torch(twin)
    x = torch.randn(5, 3, dtype=DT)
    state = _random_state(ours_cls, (2, 4))
    torch.testing.assert_close(ours(x, state), twin(x, state), **TOL)


@pytest.mark.parametrize(("ours_cls", "torch_cls"), LAYERS)
def test_parameter_names_and_shapes_match_torch(ours_cls, torch_cls):
    ours = ours_cls(5, 4, 3, bidirectional=True)
    twin = torch_cls(5, 4, 3, bidirectional=True)
    assert {k: v.shape for k, v in ours.state_dict().items()} == {
        k: v.shape for k, v in twin.state_dict().items()
    }
    no_bias = ours_cls(5, 4, 2, bias=False)
    assert not any("bias" in name for name, _ in no_bias.named_parameters())


@pytest.mark.parametrize(("ours_cls", "torch_cls"), CELLS)
def test_cell_parameter_names_match_torch(ours_cls, torch_cls):
    ours, twin = ours_cls(5, 4), torch_cls(5, 4)
    assert {k: v.shape for k, v in ours.state_dict().items()} == {
        k: v.shape for k, v in twin.state_dict().items()
    }


@pytest.mark.parametrize(
    "module",
    [rnn.RNNCell(3, 16), rnn.GRUCell(3, 16), rnn.LSTM(3, 16, 2)],
    ids=["rnn-cell", "gru-cell", "lstm"],
)
def test_reset_parameters_uses_torch_uniform_bound(module):
    bound = 1 / math.sqrt(16)
    with torch.no_grad():
        for p in module.parameters():
            p.fill_(10.0)
    module.reset_parameters()
    values = torch.cat([p.flatten() for p in module.parameters()])
    assert values.abs().max() <= bound
    # Spread over the interval, not a constant.
    assert values.max() > 0.8 * bound and values.min() < -0.8 * bound


def test_dropout_acts_between_layers_in_training_only():
    twin = nn.LSTM(3, 4, 2, dropout=0.5, dtype=DT)
    ours = rnn.LSTM.from_torch(twin)
    x = torch.randn(2, 5, 3, dtype=DT)
    assert ours.training
    first, second = ours(x)[0], ours(x)[0]
    assert not torch.allclose(first, second)
    twin.eval()
    ours.eval()
    expected = twin(x.transpose(0, 1))[0].transpose(0, 1)  # (B, T, H)
    torch.testing.assert_close(ours(x)[0], expected, **TOL)


def test_from_torch_copies_training_mode_and_dtype():
    twin = nn.GRU(2, 3, dtype=DT).eval()
    ours = rnn.GRU.from_torch(twin)
    assert not ours.training
    assert ours.weight_ih_l0.dtype == DT


def test_rnn_layer_steps_equal_the_cell():
    layer = rnn.RNN(3, 5, dtype=DT)
    cell = rnn.RNNCell(3, 5, dtype=DT)
    cell.load_state_dict(
        {k.removesuffix("_l0"): v for k, v in layer.state_dict().items()}
    )
    x = torch.randn(2, 4, 3, dtype=DT)
    h = None
    for t in range(4):
        h = cell(x[:, t], h)
    torch.testing.assert_close(layer(x)[1][0], h, **TOL)


# -- bad input ----------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "exc", "match"),
    [
        (lambda: rnn.RNNCell(3, 0), ValueError, "hidden_size=0"),
        (lambda: rnn.LSTMCell(-1, 3), ValueError, "input_size=-1"),
        (lambda: rnn.GRUCell("3", 4), TypeError, "input_size must be"),
        (lambda: rnn.RNN(3, 2.5), TypeError, "hidden_size must be"),
        (lambda: rnn.GRU(3, 4, 0), ValueError, "num_layers=0"),
        (lambda: rnn.LSTM(3, 4, 2, dropout="0.1"), TypeError, "dropout"),
        (
            lambda: rnn.RNNCell(3, 4, nonlinearity="sigmoid"),
            ValueError,
            "nonlinearity='sigmoid'",
        ),
        (
            lambda: rnn.RNN(3, 4, nonlinearity="gelu"),
            ValueError,
            "nonlinearity='gelu'",
        ),
    ],
)
def test_bad_constructor_arguments_raise(build, exc, match):
    with pytest.raises(exc, match=match):
        build()


def test_dropout_has_the_package_rule():
    # One rule for every dropout of the package: [0, 1).
    with pytest.raises(ValueError, match=r"dropout=1 must be in \[0, 1\)"):
        rnn.LSTM(3, 4, 2, dropout=1.0)
    assert rnn.LSTM(3, 4, 2, dropout=0.0).dropout == 0.0
    with pytest.warns(UserWarning, match="num_layers=1"):
        rnn.LSTM(3, 4, 1, dropout=0.2)


@pytest.mark.parametrize(
    "module", [rnn.GRUCell(3, 4), rnn.LSTM(3, 4)], ids=["cell", "layer"]
)
def test_wrong_input_size_raises(module):
    x = torch.randn(2, 5) if isinstance(module, rnn.GRUCell) else None
    x = torch.randn(2, 6, 5) if x is None else x
    with pytest.raises(ValueError, match=r"input has shape \(2, (6, )?5\), "
                       r"expected \(\.\.\., input_size\) = \(2, (6, )?3\)"):
        module(x)


def test_wrong_input_rank_raises():
    with pytest.raises(ValueError, match="input must be 2-D or 1-D"):
        rnn.RNNCell(3, 4)(torch.randn(2, 2, 3))
    with pytest.raises(ValueError, match="input must be 3-D or 2-D"):
        rnn.GRU(3, 4)(torch.randn(3))
    with pytest.raises(TypeError, match="input must be a floating tensor"):
        rnn.RNN(3, 4)([[1.0, 2.0, 3.0]])


MODULES = [
    *(cls(3, 4, dtype=DT) for cls, _ in CELLS),
    *(cls(3, 4, 2, dtype=DT) for cls, _ in LAYERS),
]
MODULE_IDS = [cls.__name__ for cls, _ in CELLS + LAYERS]


def _input(module: nn.Module, dtype: torch.dtype) -> torch.Tensor:
    shape = (2, 3) if isinstance(module, rnn.RNNCellBase) else (2, 5, 3)
    return torch.ones(shape, dtype=dtype)


@pytest.mark.parametrize("module", MODULES, ids=MODULE_IDS)
def test_input_of_another_dtype_than_the_weights_raises(module):
    # float32 input into float64 weights used to fail inside a matmul
    # ("expected m1 and m2 to have the same dtype"), far from the mistake.
    with pytest.raises(
        TypeError,
        match=r"input has dtype torch.float32.*"
        r"parameters are torch.float64",
    ):
        module(_input(module, torch.float32))
    assert module(_input(module, DT))[0].dtype == DT


@pytest.mark.parametrize("module", MODULES, ids=MODULE_IDS)
def test_integer_input_raises(module):
    with pytest.raises(TypeError, match="input must be a floating tensor"):
        module(_input(module, torch.long))


def test_initial_state_of_another_dtype_raises():
    x = torch.randn(2, 5, 3, dtype=DT)
    with pytest.raises(TypeError, match="h0 has dtype torch.float32"):
        rnn.GRU(3, 4, dtype=DT)(x, torch.zeros(1, 2, 4))
    with pytest.raises(TypeError, match=r"state\[1\] \(c\) has dtype"):
        rnn.LSTMCell(3, 4, dtype=DT)(
            x[:, 0], (torch.zeros(2, 4, dtype=DT), torch.zeros(2, 4))
        )


def test_empty_sequence_raises():
    with pytest.raises(ValueError, match="T=0"):
        rnn.RNN(3, 4)(torch.randn(2, 0, 3))


def test_mismatched_h0_raises():
    with pytest.raises(ValueError, match=r"h0 has shape .* = \(2, 3, 4\)"):
        rnn.RNN(3, 4, 2)(torch.randn(3, 5, 3), torch.zeros(1, 3, 4))
    with pytest.raises(ValueError, match=r"h0 must be 2-D, got shape"):
        rnn.RNN(3, 4, 2)(torch.randn(5, 3), torch.zeros(2, 1, 4))
    with pytest.raises(ValueError, match=r"h has shape \(2, 5\)"):
        rnn.GRUCell(3, 4)(torch.randn(2, 3), torch.zeros(2, 5))


def test_mismatched_lstm_state_raises():
    x = torch.randn(2, 5, 3)
    h0, c0 = torch.zeros(1, 2, 4), torch.zeros(1, 2, 4)
    with pytest.raises(ValueError, match=r"state\[1\] \(c0\) has shape"):
        rnn.LSTM(3, 4)(x, (h0, torch.zeros(1, 3, 4)))
    with pytest.raises(TypeError, match=r"state must be a pair \(h0, c0\)"):
        rnn.LSTM(3, 4)(x, h0)
    with pytest.raises(ValueError, match=r"state\[0\] \(h\) has shape"):
        rnn.LSTMCell(3, 4)(x[:, 0], (torch.zeros(2, 3), c0[0]))
    with pytest.raises(TypeError, match="state must be a pair"):
        rnn.LSTMCell(3, 4)(x[:, 0], c0[0])


def test_layer_parameters_of_a_missing_layer_raises():
    net = rnn.LSTM(3, 4, 2)
    assert net.layer_parameters(1)[0] is net.weight_ih_l1
    # Used to raise AttributeError: no attribute 'weight_ih_l2'.
    with pytest.raises(ValueError, match="layer=2 must be one of 0, 1"):
        net.layer_parameters(2)
    with pytest.raises(ValueError, match="layer=-1 must be non-negative"):
        net.layer_parameters(-1)
    with pytest.raises(TypeError, match="layer must be an int"):
        net.layer_parameters("0")
    with pytest.raises(ValueError, match="direction=1 must be one of 0"):
        net.layer_parameters(0, 1)
    both = rnn.GRU(3, 4, bidirectional=True)
    assert both.layer_parameters(0, 1)[1] is both.weight_hh_l0_reverse


def test_from_torch_rejects_wrong_modules():
    with pytest.raises(TypeError, match="module must be a torch.nn.GRU"):
        rnn.GRU.from_torch(nn.LSTM(3, 4))
    with pytest.raises(TypeError, match="module must be a torch.nn.RNNCell"):
        rnn.RNNCell.from_torch(nn.GRUCell(3, 4))
    with pytest.raises(ValueError, match="module has proj_size=2, which"):
        rnn.LSTM.from_torch(nn.LSTM(3, 4, proj_size=2))
