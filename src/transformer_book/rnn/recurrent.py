"""Multi-layer RNN, LSTM and GRU, unrolled over time in an explicit loop.

Batch-first; parameter names, gate order and outputs are PyTorch's, so
``from_torch`` copies ``nn.RNN``, ``nn.LSTM`` and ``nn.GRU``. The loop is
for reading: PyTorch's fused kernels are much faster.
"""

from __future__ import annotations

import abc
import warnings
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._checks import check_bool, check_choice, check_int, check_probability
from .cells import (
    _NONLINEARITIES,
    _Pair,
    _pair,
    _Recurrent,
    gru_cell_step,
    lstm_cell_step,
    rnn_cell_step,
)

__all__ = ["GRU", "LSTM", "RNN", "RNNBase"]

_Params = tuple[Tensor, Tensor, Tensor | None, Tensor | None]


class RNNBase(_Recurrent, abc.ABC):
    """The parameters (``weight_ih_l{k}``, ..., ``_reverse`` backwards, as
    in PyTorch) and the time loop of RNN, LSTM and GRU.

    Args:
        input_size, hidden_size: features ``I`` and ``H``.
        num_layers: stacked layers ``L``.
        bias: whether to learn the biases.
        dropout: dropout on the outputs of every layer but the last.
        bidirectional: also run each layer backwards in time (``D = 2``).
        device, dtype: of the parameters.

    Shape:
        input ``(B, T, I)`` or ``(T, I)``; each state ``(L D, B, H)`` or
        ``(L D, H)``, layer ``k``'s directions at ``k D`` and ``k D + 1``,
        zeros when ``None``; output ``(B, T, D H)``, the top layer.
    """

    #: Tensors in the recurrent state (2 for the LSTM).
    num_states: int = 1
    _torch_twin: type = nn.RNNBase

    def __init__(
        self, input_size: int, hidden_size: int, num_layers: int = 1, *,
        bias: bool = True, dropout: float = 0.0, bidirectional: bool = False,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(input_size, hidden_size, bias)
        self.num_layers = check_int("num_layers", num_layers)
        self.dropout = check_probability("dropout", dropout)
        if self.dropout > 0 and num_layers == 1:
            warnings.warn(f"dropout={dropout} acts between layers, so it "
                          "does nothing with num_layers=1", stacklevel=2)
        self.bidirectional = check_bool("bidirectional", bidirectional)
        self.num_directions = 2 if bidirectional else 1
        H, rows = hidden_size, self.num_chunks * hidden_size
        like: dict[str, Any] = {"device": device, "dtype": dtype}
        for layer in range(self.num_layers):
            # Layers above the first read both directions of the one below.
            width = input_size if layer == 0 else self.num_directions * H
            for direction in range(self.num_directions):
                shapes = {"weight_ih": (rows, width), "weight_hh": (rows, H),
                          "bias_ih": (rows,), "bias_hh": (rows,)}
                for name, shape in shapes.items():
                    keep = bias or "weight" in name  # a bias may be absent
                    param = torch.empty(shape, **like) if keep else None
                    self.register_parameter(
                        name + self._suffix(layer, direction),
                        None if param is None else nn.Parameter(param))
        self.reset_parameters()

    @staticmethod
    def _suffix(layer: int, direction: int) -> str:
        return f"_l{layer}" + ("_reverse" if direction else "")

    def extra_repr(self) -> str:
        defaults = {"num_layers": 1, "nonlinearity": "tanh", "bias": True,
                    "dropout": 0.0, "bidirectional": False}
        return f"{self.input_size}, {self.hidden_size}" + "".join(
            f", {k}={getattr(self, k, d)!r}" for k, d in defaults.items()
            if getattr(self, k, d) != d)

    def layer_parameters(self, layer: int, direction: int = 0) -> _Params:
        """``(weight_ih, weight_hh, bias_ih, bias_hh)`` of one layer in one
        direction (0 forward, 1 backward)."""
        layer = check_int("layer", layer, minimum=0)
        direction = check_int("direction", direction, minimum=0)
        check_choice("layer", layer, range(self.num_layers))
        check_choice("direction", direction, range(self.num_directions))
        return self._params(layer, direction)

    def _params(self, layer: int, direction: int) -> _Params:
        sfx = self._suffix(layer, direction)
        return (getattr(self, f"weight_ih{sfx}"),
                getattr(self, f"weight_hh{sfx}"),
                getattr(self, f"bias_ih{sfx}"), getattr(self, f"bias_hh{sfx}"))

    @abc.abstractmethod
    def _step(
        self, x: Tensor, state: tuple[Tensor, ...], params: _Params
    ) -> tuple[Tensor, ...]: ...

    def _run(
        self, input: Tensor, states: list[Any], names: list[str]
    ) -> tuple[Tensor, list[Tensor]]:
        lead = (self.num_layers * self.num_directions,)
        x, states, unbatched = self._prepare(input, states, names, lead)
        if x.size(1) == 0:
            raise ValueError("input has no time steps (T=0)")
        output, finals = self._unroll(x, states)
        if unbatched:  # output (T, D H), each state (L D, H)
            return output.squeeze(0), [s.squeeze(1) for s in finals]
        return output, finals

    def _unroll(
        self, x: Tensor, states: list[Tensor]
    ) -> tuple[Tensor, list[Tensor]]:
        """Every layer over every step: the top layer's outputs
        ``(B, T, D H)`` and the final states, each ``(L D, B, H)``."""
        T, finals = x.size(1), []
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(self.num_directions):
                params = self._params(layer, direction)
                index = layer * self.num_directions + direction
                state = tuple(s[index] for s in states)  # each (B, H)
                hs: list[Tensor] = []
                for t in reversed(range(T)) if direction else range(T):
                    state = self._step(x[:, t], state, params)
                    hs.append(state[0])
                hs = hs[::-1] if direction else hs  # in time order
                outputs.append(torch.stack(hs, dim=1))  # (B, T, H)
                finals.append(state)
            x = torch.cat(outputs, dim=-1)  # (B, T, D H)
            if self.dropout > 0 and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, self.training)
        return x, [torch.stack([f[k] for f in finals])
                   for k in range(self.num_states)]


def _forward_one_state(
    self: RNNBase, input: Tensor, h0: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """Run over a sequence: ``(output, h_n)``."""
    output, (h_n,) = self._run(input, [h0], ["h0"])
    return output, h_n


class RNN(RNNBase):
    r"""Multi-layer Elman RNN (Elman, 1990), equal to ``nn.RNN``.

    .. math:: h_t^{(k)} = \phi(W_{ih}^{(k)} h_t^{(k-1)} + b_{ih}^{(k)}
        + W_{hh}^{(k)} h_{t-1}^{(k)} + b_{hh}^{(k)}), \quad h_t^{(0)} = x_t

    Args:
        nonlinearity: :math:`\phi`, ``"tanh"`` or ``"relu"``; the other
            arguments as in :class:`RNNBase`.
    """

    _torch_twin = nn.RNN

    def __init__(
        self, input_size: int, hidden_size: int, num_layers: int = 1, *,
        nonlinearity: str = "tanh", bias: bool = True, dropout: float = 0.0,
        bidirectional: bool = False, device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        check_choice("nonlinearity", nonlinearity, _NONLINEARITIES)
        super().__init__(input_size, hidden_size, num_layers, bias=bias,
                         dropout=dropout, bidirectional=bidirectional,
                         device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def _step(
        self, x: Tensor, state: tuple[Tensor, ...], params: _Params
    ) -> tuple[Tensor]:
        return (rnn_cell_step(x, state[0], *params, self.nonlinearity),)

    forward = _forward_one_state


class LSTM(RNNBase):
    """Multi-layer LSTM (Hochreiter and Schmidhuber, 1997; Gers et al.,
    2000), equal to ``nn.LSTM`` without projections; the state is
    ``(h, c)``. Each layer runs :func:`lstm_cell_step`."""

    num_chunks = 4
    num_states = 2
    _torch_twin = nn.LSTM

    def _step(
        self, x: Tensor, state: tuple[Tensor, ...], params: _Params
    ) -> tuple[Tensor, Tensor]:
        return lstm_cell_step(x, (state[0], state[1]), *params)

    def forward(
        self, input: Tensor, state: _Pair | None = None
    ) -> tuple[Tensor, _Pair]:
        """Run over a sequence: ``(output, (h_n, c_n))``."""
        names = ["state[0] (h0)", "state[1] (c0)"]
        output, (h_n, c_n) = self._run(
            input, [*_pair(state, "(h0, c0)")], names)
        return output, (h_n, c_n)


class GRU(RNNBase):
    """Multi-layer GRU (Cho et al., 2014), equal to ``nn.GRU``. Each layer
    runs :func:`gru_cell_step`."""

    num_chunks = 3
    _torch_twin = nn.GRU

    def _step(
        self, x: Tensor, state: tuple[Tensor, ...], params: _Params
    ) -> tuple[Tensor]:
        return (gru_cell_step(x, state[0], *params),)

    forward = _forward_one_state
