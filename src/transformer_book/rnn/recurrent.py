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
    _Params,
    _Recurrent,
    gru_cell_step,
    lstm_cell_step,
    rnn_cell_step,
)

__all__ = ["GRU", "LSTM", "RNN", "RNNBase"]


class RNNBase(_Recurrent, abc.ABC):
    """The parameters (``weight_ih_l{k}``, ..., ``_reverse`` backwards, as
    in PyTorch) and the time loop of RNN, LSTM and GRU.

    Args:
        input_size, hidden_size: features ``I`` and ``H``.
        num_layers: stacked layers ``L``.
        dropout: dropout on the outputs of every layer but the last.
        bidirectional: also run each layer backwards in time (``D = 2``).

    Shape:
        input ``(B, T, I)`` or ``(T, I)``; each state ``(L D, B, H)`` or
        ``(L D, H)``, layer ``k``'s directions at ``k D`` and ``k D + 1``,
        zeros when ``None``; output ``(B, T, D H)``, the top layer.
    """

    _torch_twin: type = nn.RNNBase

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 *, bias: bool = True, dropout: float = 0.0,
                 bidirectional: bool = False,
                 device: torch.device | str | None = None,
                 dtype: torch.dtype | None = None) -> None:
        super().__init__(input_size, hidden_size, bias)
        self.num_layers = check_int("num_layers", num_layers)
        self.dropout = check_probability("dropout", dropout)
        if self.dropout > 0 and num_layers == 1:
            warnings.warn(f"dropout={dropout} acts between layers, so it "
                          "does nothing with num_layers=1", stacklevel=2)
        self.bidirectional = check_bool("bidirectional", bidirectional)
        self.num_directions = D = 2 if bidirectional else 1
        like: dict[str, Any] = {"device": device, "dtype": dtype}
        for layer in range(self.num_layers):
            # Layers above the first read both directions of the one below.
            width = input_size if layer == 0 else D * hidden_size
            for direction in range(D):
                self._add_weights(self._suffix(layer, direction), width, like)
        self.reset_parameters()

    @staticmethod
    def _suffix(layer: int, direction: int) -> str:
        return f"_l{layer}" + ("_reverse" if direction else "")

    def layer_parameters(self, layer: int, direction: int = 0) -> _Params:
        """``(weight_ih, weight_hh, bias_ih, bias_hh)`` of one layer in one
        direction (0 forward, 1 backward)."""
        layer = check_int("layer", layer, minimum=0)
        direction = check_int("direction", direction, minimum=0)
        check_choice("layer", layer, range(self.num_layers))
        check_choice("direction", direction, range(self.num_directions))
        return self._weights(self._suffix(layer, direction))

    def forward(
        self, input: Tensor, state: Tensor | _Pair | None = None
    ) -> tuple[Tensor, Tensor | _Pair]:
        """Run over a sequence: ``(output, h_n)``; an LSTM's state is the
        pair ``(h, c)``, so it returns ``(output, (h_n, c_n))``."""
        output, states = self._run(input, state)
        if self.num_states == 1:
            return output, states[0]
        return output, (states[0], states[1])

    @abc.abstractmethod
    def _step(
        self, x: Tensor, state: tuple[Tensor, ...], params: _Params
    ) -> tuple[Tensor, ...]: ...

    def _run(self, input: Tensor, state: Any) -> tuple[Tensor, list[Tensor]]:
        """Every layer over every step: the top layer's outputs
        ``(B, T, D H)`` and the final states, each ``(L D, B, H)``."""
        lead = (self.num_layers * self.num_directions,)
        x, states, unbatched = self._prepare(input, state, "0", lead)
        if x.size(1) == 0:
            raise ValueError("input has no time steps (T=0)")
        T, finals = x.size(1), []
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(self.num_directions):
                params = self.layer_parameters(layer, direction)
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
        states = [torch.stack([f[k] for f in finals])
                  for k in range(self.num_states)]  # each (L D, B, H)
        if unbatched:  # output (T, D H), each state (L D, H)
            return x.squeeze(0), [s.squeeze(1) for s in states]
        return x, states


class RNN(RNNBase):
    r"""Multi-layer Elman RNN (Elman, 1990), equal to ``nn.RNN``.

    .. math:: h_t^{(k)} = \phi(W_{ih}^{(k)} h_t^{(k-1)} + b_{ih}^{(k)}
        + W_{hh}^{(k)} h_{t-1}^{(k)} + b_{hh}^{(k)}), \quad h_t^{(0)} = x_t

    Args:
        nonlinearity: :math:`\phi`, ``"tanh"`` or ``"relu"``; the other
            arguments as in :class:`RNNBase`.
    """

    _torch_twin = nn.RNN

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 *, nonlinearity: str = "tanh", **kwargs: Any) -> None:
        check_choice("nonlinearity", nonlinearity, _NONLINEARITIES)
        super().__init__(input_size, hidden_size, num_layers, **kwargs)
        self.nonlinearity = nonlinearity

    def _step(self, x: Tensor, state: tuple[Tensor, ...],
              params: _Params) -> tuple[Tensor]:
        return (rnn_cell_step(x, state[0], *params, self.nonlinearity),)


class LSTM(RNNBase):
    """Multi-layer LSTM (Hochreiter and Schmidhuber, 1997; Gers et al.,
    2000), equal to ``nn.LSTM`` without projections; the state is
    ``(h, c)``. Each layer runs :func:`lstm_cell_step`."""

    num_chunks, num_states = 4, 2
    _torch_twin = nn.LSTM

    def _step(self, x: Tensor, state: tuple[Tensor, ...],
              params: _Params) -> tuple[Tensor, Tensor]:
        return lstm_cell_step(x, (state[0], state[1]), *params)


class GRU(RNNBase):
    """Multi-layer GRU (Cho et al., 2014), equal to ``nn.GRU``. Each layer
    runs :func:`gru_cell_step`."""

    num_chunks = 3
    _torch_twin = nn.GRU

    def _step(self, x: Tensor, state: tuple[Tensor, ...],
              params: _Params) -> tuple[Tensor]:
        return (gru_cell_step(x, state[0], *params),)
