"""Multi-layer recurrent networks unrolled over time: RNN, LSTM, GRU.

Each module loops over the time steps explicitly and calls the step
function of its cell (``transformer_book.rnn.cells``), layer by layer,
so that the recurrence is visible in the code. Inputs are batch-first
``(B, T, input_size)``. Parameter names (``weight_ih_l{k}``,
``weight_hh_l{k}``, ``bias_ih_l{k}``, ``bias_hh_l{k}``, with a ``_reverse``
suffix for the backward direction), gate order, initialisation and the
return values follow ``torch.nn.RNN``, ``nn.LSTM`` and ``nn.GRU``;
``from_torch`` copies one of those and gives the same outputs.

The explicit loop is for reading, not for speed: PyTorch's fused kernels
are much faster, and the book uses them for its training experiments once
it has shown that the two agree.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._checks import (
    check_bool,
    check_choice,
    check_int,
    check_probability,
)
from .._docs import shared_doc
from .cells import (
    _NONLINEARITIES,
    _check_input,
    _initial,
    _split_pair,
    _TorchTwin,
    gru_cell_step,
    lstm_cell_step,
    rnn_cell_step,
)

_Params = tuple[Tensor, Tensor, Tensor | None, Tensor | None]

__all__ = ["GRU", "LSTM", "RNN", "RNNBase"]

# The arguments and shapes that RNN, LSTM and GRU share (see _docs).
_LAYER_ARGS = """\
bias: whether to learn the biases.
dropout: dropout probability on the outputs of every layer but the
    last (training mode only).
bidirectional: also run each layer backwards in time.
device: device of the parameters.
dtype: dtype of the parameters."""
_LAYER_SHAPE = """\
Shape:
    - input: ``(B, T, input_size)``, or ``(T, input_size)`` unbatched.
    - initial and final states: ``(num_layers * D, B, H)``, or
      ``(num_layers * D, H)`` unbatched, with ``D = 2`` if
      bidirectional else 1; layer ``k``'s forward state at index
      ``k * D`` and its backward state at ``k * D + 1``.
    - output: ``(B, T, D * H)``: the top layer's hidden state at every
      step (both directions concatenated)."""


@shared_doc(layer_args=_LAYER_ARGS)
class RNNBase(_TorchTwin):
    """What RNN, LSTM and GRU share: parameters, checks, the time loop.

    For every layer ``k`` (and direction), holds ``weight_ih_l{k}``
    ``(G * H, in_k)``, ``weight_hh_l{k}`` ``(G * H, H)`` and, with
    ``bias``, ``bias_ih_l{k}`` and ``bias_hh_l{k}`` ``(G * H,)``; the
    backward direction's names end in ``_reverse``. ``G`` is
    :attr:`num_chunks` (1 for the RNN, 4 for the LSTM, 3 for the GRU),
    ``in_0 = input_size`` and ``in_k = D * H`` above, with ``D = 2`` if
    bidirectional else 1, as in ``torch.nn.RNNBase``. Subclasses add the
    step (which cell) and ``forward``.

    Args:
        input_size: features of the input.
        hidden_size: features ``H`` of the hidden state.
        num_layers: stacked recurrent layers.
        {layer_args}

    Raises:
        TypeError: if a size is not an int or ``dropout`` not a number.
        ValueError: if a size is not positive or ``dropout`` is outside
            [0, 1).
    """

    #: Gate blocks stacked in each weight (1 for RNN, 4 LSTM, 3 GRU).
    num_chunks: int = 1
    #: Tensors in the recurrent state (1 for RNN/GRU, 2 for LSTM).
    num_states: int = 1
    _torch_twin: type[nn.Module] = nn.RNNBase

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        *,
        bias: bool = True,
        dropout: float = 0.0,
        bidirectional: bool = False,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(input_size, hidden_size, bias)
        self.num_layers = check_int("num_layers", num_layers)
        self.dropout = check_probability("dropout", dropout)
        if self.dropout > 0 and num_layers == 1:
            warnings.warn(
                f"dropout={dropout} acts between layers, so it does nothing "
                "with num_layers=1",
                stacklevel=2,
            )
        self.bidirectional = check_bool("bidirectional", bidirectional)
        self.num_directions = 2 if bidirectional else 1

        H = self.hidden_size
        rows = self.num_chunks * H
        factory: dict[str, Any] = {"device": device, "dtype": dtype}
        for layer in range(self.num_layers):
            # Layers above the first read both directions of the one below.
            in_features = (
                self.input_size if layer == 0 else H * self.num_directions
            )
            for direction in range(self.num_directions):
                sfx = self._suffix(layer, direction)
                self.register_parameter(
                    f"weight_ih{sfx}",
                    nn.Parameter(torch.empty(rows, in_features, **factory)),
                )
                self.register_parameter(
                    f"weight_hh{sfx}",
                    nn.Parameter(torch.empty(rows, H, **factory)),
                )
                for name in (f"bias_ih{sfx}", f"bias_hh{sfx}"):
                    param = (
                        nn.Parameter(torch.empty(rows, **factory))
                        if self.bias
                        else None
                    )
                    self.register_parameter(name, param)
        self.reset_parameters()

    @staticmethod
    def _suffix(layer: int, direction: int) -> str:
        return f"_l{layer}" + ("_reverse" if direction == 1 else "")

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            text += f", num_layers={self.num_layers}"
        if not self.bias:
            text += ", bias=False"
        if self.dropout:
            text += f", dropout={self.dropout}"
        if self.bidirectional:
            text += ", bidirectional=True"
        return text

    def layer_parameters(self, layer: int, direction: int = 0) -> _Params:
        """Return ``(weight_ih, weight_hh, bias_ih, bias_hh)`` of one layer.

        Args:
            layer: layer index, ``0 <= layer < num_layers``.
            direction: 0 forward, 1 backward (bidirectional only).

        Raises:
            TypeError: if ``layer`` or ``direction`` is not an int.
            ValueError: if the layer or direction does not exist.
        """
        layer = check_int("layer", layer, minimum=0)
        if layer >= self.num_layers:
            raise ValueError(
                f"layer={layer} does not exist: the network has "
                f"num_layers={self.num_layers}"
            )
        direction = check_int("direction", direction, minimum=0)
        if direction >= self.num_directions:
            raise ValueError(
                f"direction={direction} does not exist: 0 (forward) or, "
                "for a bidirectional network, 1 (backward)"
            )
        return self._params(layer, direction)

    def _params(self, layer: int, direction: int) -> _Params:
        sfx = self._suffix(layer, direction)
        return (
            getattr(self, f"weight_ih{sfx}"),
            getattr(self, f"weight_hh{sfx}"),
            getattr(self, f"bias_ih{sfx}"),
            getattr(self, f"bias_hh{sfx}"),
        )

    def _step(
        self, x: Tensor, state: tuple[Tensor, ...], params: _Params
    ) -> tuple[Tensor, ...]:
        """Advance one layer's state by one time step."""
        raise NotImplementedError

    def _run(
        self, input: Tensor, state: list[Any], names: list[str]
    ) -> tuple[Tensor, list[Tensor]]:
        """Check the input and initial states, unroll, return the outputs.

        Adds the batch dimension to unbatched input and removes it again.
        """
        dtype = self._params(0, 0)[0].dtype
        unbatched = _check_input(input, self.input_size, dtype, 3)
        if input.size(-2) == 0:
            raise ValueError("input has no time steps (T=0)")
        stacked = self.num_layers * self.num_directions
        lead = "num_layers * num_directions"
        if unbatched:
            input = input.unsqueeze(0)  # (1, T, input_size)
            shape: tuple[int, ...] = (stacked, self.hidden_size)
            legend = f"({lead}, hidden_size)"
        else:
            shape = (stacked, input.size(0), self.hidden_size)
            legend = f"({lead}, B, hidden_size)"
        state = [
            _initial(name, s, input, shape, legend)
            for name, s in zip(names, state, strict=True)
        ]
        if unbatched:
            state = [s.unsqueeze(1) for s in state]  # each (L * D, 1, H)
        output, finals = self._unroll(input, state)
        if unbatched:
            finals = [f.squeeze(1) for f in finals]  # each (L * D, H)
            return output.squeeze(0), finals  # output (T, D * H)
        return output, finals

    # -- the time loop --------------------------------------------------

    def _unroll(
        self, x: Tensor, states: Sequence[Tensor]
    ) -> tuple[Tensor, list[Tensor]]:
        """Run every layer over every time step.

        Args:
            x: input, ``(B, T, input_size)``.
            states: initial states, each ``(L * D, B, H)``.

        Returns:
            The top layer's outputs ``(B, T, D * H)`` and the final states,
            each ``(L * D, B, H)``.
        """
        T = x.size(1)
        layer_input = x  # (B, T, C)
        finals: list[tuple[Tensor, ...]] = []
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(self.num_directions):
                index = layer * self.num_directions + direction
                params = self._params(layer, direction)
                state = tuple(s[index] for s in states)  # each (B, H)
                steps = range(T) if direction == 0 else range(T - 1, -1, -1)
                hs: list[Any] = [None] * T
                for t in steps:
                    state = self._step(layer_input[:, t], state, params)
                    hs[t] = state[0]
                outputs.append(torch.stack(hs, dim=1))  # (B, T, H)
                finals.append(state)
            layer_input = torch.cat(outputs, dim=-1)  # (B, T, D * H)
            if self.dropout > 0 and layer < self.num_layers - 1:
                layer_input = F.dropout(
                    layer_input, self.dropout, self.training
                )
        final_states = [
            torch.stack([f[k] for f in finals])  # (L * D, B, H)
            for k in range(self.num_states)
        ]
        return layer_input, final_states

    # -- copying a PyTorch twin -----------------------------------------

    @classmethod
    def _check_twin(cls, module: Any) -> None:
        super()._check_twin(module)
        if getattr(module, "proj_size", 0) > 0:
            raise ValueError(
                f"proj_size={module.proj_size} is not supported; only "
                "LSTMs without projections (proj_size=0) can be copied"
            )

    @classmethod
    def _twin_kwargs(cls, module: Any) -> dict[str, Any]:
        return {
            **super()._twin_kwargs(module),
            "num_layers": module.num_layers,
            "dropout": float(module.dropout),
            "bidirectional": module.bidirectional,
        }


def _forward_one_state(
    self: RNNBase, input: Tensor, h0: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """Run the network over a sequence.

    Args:
        input: the sequence, batch-first.
        h0: initial hidden states; zeros when ``None``.

    Returns:
        ``(output, h_n)``: the top layer's hidden states at every step
        and every layer's final hidden state.
    """
    output, (h_n,) = self._run(input, [h0], ["h0"])
    return output, h_n


@shared_doc(layer_args=_LAYER_ARGS, layer_shape=_LAYER_SHAPE)
class RNN(RNNBase):
    r"""Multi-layer Elman RNN (Elman, 1990), equal to ``torch.nn.RNN``.

    Layer :math:`k` runs ``rnn_cell_step`` over
    the sequence, reading the outputs of layer :math:`k - 1`:

    .. math::

        h_t^{(k)} = \phi\big(W_{ih}^{(k)} h_t^{(k-1)} + b_{ih}^{(k)}
            + W_{hh}^{(k)} h_{t-1}^{(k)} + b_{hh}^{(k)}\big),
        \qquad h_t^{(0)} = x_t

    Args:
        input_size: features of the input :math:`x_t`.
        hidden_size: features :math:`H` of the hidden state.
        num_layers: stacked recurrent layers.
        nonlinearity: :math:`\phi`, ``"tanh"`` (default) or ``"relu"``.
        {layer_args}

    {layer_shape}
    """

    _torch_twin = nn.RNN

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        *,
        nonlinearity: str = "tanh",
        bias: bool = True,
        dropout: float = 0.0,
        bidirectional: bool = False,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        check_choice("nonlinearity", nonlinearity, _NONLINEARITIES)
        super().__init__(
            input_size,
            hidden_size,
            num_layers,
            bias=bias,
            dropout=dropout,
            bidirectional=bidirectional,
            device=device,
            dtype=dtype,
        )
        self.nonlinearity = nonlinearity

    def extra_repr(self) -> str:
        text = super().extra_repr()
        if self.nonlinearity != "tanh":
            text += f", nonlinearity={self.nonlinearity!r}"
        return text

    def _step(
        self, x: Tensor, state: tuple[Tensor, ...], params: _Params
    ) -> tuple[Tensor]:
        return (rnn_cell_step(x, state[0], *params, self.nonlinearity),)

    # One state tensor, like the GRU's (the LSTM's has two).
    forward = _forward_one_state


@shared_doc(layer_args=_LAYER_ARGS, layer_shape=_LAYER_SHAPE)
class LSTM(RNNBase):
    r"""Multi-layer LSTM, equal to ``torch.nn.LSTM`` (without projections).

    The memory cell of Hochreiter and Schmidhuber (1997) with the forget
    gate of Gers, Schmidhuber and Cummins (2000); each layer runs
    ``lstm_cell_step`` (gate order ``i, f, g, o``)
    over the sequence, reading the hidden states of the layer below:

    .. math::

        c_t = f_t \odot c_{t-1} + i_t \odot g_t, \qquad
        h_t = o_t \odot \tanh(c_t)

    Args:
        input_size: features of the input :math:`x_t`.
        hidden_size: features :math:`H` of the hidden and cell states.
        num_layers: stacked recurrent layers.
        {layer_args}

    {layer_shape}
    """

    num_chunks = 4
    num_states = 2
    _torch_twin = nn.LSTM

    def _step(
        self, x: Tensor, state: tuple[Tensor, ...], params: _Params
    ) -> tuple[Tensor, Tensor]:
        return lstm_cell_step(x, (state[0], state[1]), *params)

    def forward(
        self,
        input: Tensor,
        state: tuple[Tensor, Tensor] | None = None,
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """Run the network over a sequence.

        Args:
            input: the sequence, batch-first.
            state: ``(h0, c0)``, initial hidden and cell states; zeros when
                ``None``.

        Returns:
            ``(output, (h_n, c_n))``: the top layer's hidden states at
            every step and every layer's final hidden and cell states.
        """
        h0, c0 = _split_pair(state, "(h0, c0)")
        names = ["state[0] (h0)", "state[1] (c0)"]
        output, (h_n, c_n) = self._run(input, [h0, c0], names)
        return output, (h_n, c_n)


@shared_doc(layer_args=_LAYER_ARGS, layer_shape=_LAYER_SHAPE)
class GRU(RNNBase):
    r"""Multi-layer GRU (Cho et al., 2014), equal to ``torch.nn.GRU``.

    Each layer runs ``gru_cell_step`` (gate order
    ``r, z, n``, reset gate applied to :math:`W_{hn} h + b_{hn}`) over the
    sequence, reading the hidden states of the layer below:

    .. math::

        h_t = (1 - z_t) \odot n_t + z_t \odot h_{t-1}

    Args:
        input_size: features of the input :math:`x_t`.
        hidden_size: features :math:`H` of the hidden state.
        num_layers: stacked recurrent layers.
        {layer_args}

    {layer_shape}
    """

    num_chunks = 3
    _torch_twin = nn.GRU

    def _step(
        self, x: Tensor, state: tuple[Tensor, ...], params: _Params
    ) -> tuple[Tensor]:
        return (gru_cell_step(x, state[0], *params),)

    forward = _forward_one_state  # as RNN's: one state tensor
