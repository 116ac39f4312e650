"""The from-scratch recurrent cells and layers equal their PyTorch twins."""

from __future__ import annotations

import math
import random

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from torch import nn

from transformer_book import plotting, rnn

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


@pytest.mark.parametrize("cls", [rnn.RNNCell, rnn.LSTMCell, rnn.RNN])
def test_non_positive_sizes_raise(cls):
    with pytest.raises(ValueError, match="hidden_size=0 must be positive"):
        cls(3, 0)
    with pytest.raises(ValueError, match="input_size=-1 must be positive"):
        cls(-1, 3)
    with pytest.raises(TypeError, match="hidden_size must be an int"):
        cls(3, 2.5)


def test_non_positive_num_layers_raises():
    with pytest.raises(ValueError, match="num_layers=0 must be positive"):
        rnn.GRU(3, 4, 0)


@pytest.mark.parametrize("cls", [rnn.RNNCell, rnn.RNN])
def test_bad_nonlinearity_raises(cls):
    with pytest.raises(ValueError, match="nonlinearity='sigmoid'"):
        cls(3, 4, nonlinearity="sigmoid")


def test_bad_dropout_raises():
    with pytest.raises(ValueError, match=r"dropout=1.5 must be in \[0, 1\]"):
        rnn.LSTM(3, 4, 2, dropout=1.5)
    with pytest.warns(UserWarning, match="num_layers=1"):
        rnn.LSTM(3, 4, 1, dropout=0.2)


@pytest.mark.parametrize(
    "module", [rnn.GRUCell(3, 4), rnn.LSTM(3, 4)], ids=["cell", "layer"]
)
def test_wrong_input_size_raises(module):
    x = torch.randn(2, 5) if isinstance(module, rnn.GRUCell) else None
    x = torch.randn(2, 6, 5) if x is None else x
    with pytest.raises(ValueError, match=r"input.size\(-1\)=5 .*input_size=3"):
        module(x)


def test_wrong_input_rank_raises():
    with pytest.raises(ValueError, match="input must be 2-D"):
        rnn.RNNCell(3, 4)(torch.randn(2, 2, 3))
    with pytest.raises(ValueError, match="input must be 3-D"):
        rnn.GRU(3, 4)(torch.randn(3))
    with pytest.raises(TypeError, match="input must be a torch.Tensor"):
        rnn.RNN(3, 4)([[1.0, 2.0, 3.0]])


def test_empty_sequence_raises():
    with pytest.raises(ValueError, match="T=0"):
        rnn.RNN(3, 4)(torch.randn(2, 0, 3))


def test_mismatched_h0_raises():
    with pytest.raises(ValueError, match=r"h0 must have shape .*\(2, 3, 4\)"):
        rnn.RNN(3, 4, 2)(torch.randn(3, 5, 3), torch.zeros(1, 3, 4))
    with pytest.raises(ValueError, match=r"h must have shape"):
        rnn.GRUCell(3, 4)(torch.randn(2, 3), torch.zeros(2, 5))


def test_mismatched_lstm_state_raises():
    x = torch.randn(2, 5, 3)
    h0, c0 = torch.zeros(1, 2, 4), torch.zeros(1, 2, 4)
    with pytest.raises(ValueError, match=r"state\[1\] \(c0\) must have"):
        rnn.LSTM(3, 4)(x, (h0, torch.zeros(1, 3, 4)))
    with pytest.raises(TypeError, match=r"state must be a pair \(h0, c0\)"):
        rnn.LSTM(3, 4)(x, h0)
    with pytest.raises(ValueError, match=r"state\[0\] \(h\) must have"):
        rnn.LSTMCell(3, 4)(x[:, 0], (torch.zeros(2, 3), c0[0]))
    with pytest.raises(TypeError, match="state must be a pair"):
        rnn.LSTMCell(3, 4)(x[:, 0], c0[0])


def test_from_torch_rejects_wrong_modules():
    with pytest.raises(TypeError, match="module must be a torch.nn.GRU"):
        rnn.GRU.from_torch(nn.LSTM(3, 4))
    with pytest.raises(TypeError, match="module must be a torch.nn.RNNCell"):
        rnn.RNNCell.from_torch(nn.GRUCell(3, 4))
    with pytest.raises(ValueError, match="proj_size=2 is not supported"):
        rnn.LSTM.from_torch(nn.LSTM(3, 4, proj_size=2))


# -- figures ------------------------------------------------------------


@pytest.mark.parametrize(
    "draw",
    [
        plotting.draw_unrolled_rnn,
        plotting.draw_lstm_cell,
        plotting.draw_gru_cell,
    ],
)
def test_diagrams_draw_on_given_axes_without_touching_rc(draw):
    before = dict(mpl.rcParams)
    _, ax = plt.subplots()
    assert draw(ax=ax, title="t") is ax
    assert ax.get_title() == "t"
    assert len(ax.patches) >= 5  # boxes, circles and arrows were drawn
    assert dict(mpl.rcParams) == before


def test_unrolled_rnn_labels_every_step():
    ax = plotting.draw_unrolled_rnn(3)
    texts = {t.get_text() for t in ax.texts}
    assert {"$x_1$", "$x_3$", "$h_0$", "$h_3$"} <= texts
    with pytest.raises(ValueError, match="num_steps=9"):
        plotting.draw_unrolled_rnn(9)


def test_curve_plots_draw_one_line_per_curve():
    ax = plotting.plot_gradient_decay(
        [0, 1, 2], {0.5: [1.0, 0.5, 0.25], 1.5: np.array([1.0, 1.5, 2.25])}
    )
    assert ax.get_yscale() == "log"
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), [1, 0.5, 0.25])
    ax = plotting.plot_accuracy_vs_length(
        [10, 20], {"RNN": [1.0, 0.3], "LSTM": [1.0, 1.0]}, chance=0.25
    )
    assert len(ax.get_lines()) == 3  # two models and the chance line
    ax = plotting.plot_time_vs_length(
        [8, 16], {"LSTM": [1e-3, 2e-3]}, unit="ms"
    )
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), [1.0, 2.0])


def test_curve_plots_reject_bad_input():
    with pytest.raises(ValueError, match=r"norms\[0.5\] has 2 values"):
        plotting.plot_gradient_decay([0, 1, 2], {0.5: [1.0, 0.5]})
    with pytest.raises(ValueError, match="must be positive"):
        plotting.plot_gradient_decay([0, 1], {0.5: [1.0, 0.0]})
    with pytest.raises(ValueError, match="accuracies must hold"):
        plotting.plot_accuracy_vs_length([10], {})
    with pytest.raises(ValueError, match="unit='h'"):
        plotting.plot_time_vs_length([8], {"a": [1.0]}, unit="h")
