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

import math
import warnings
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .cells import (
    _check_nonlinearity,
    _check_positive,
    gru_cell_step,
    lstm_cell_step,
    rnn_cell_step,
)

__all__ = ["GRU", "LSTM", "RNN", "RNNBase"]


class RNNBase(nn.Module):
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
        bias: whether to learn the biases.
        dropout: dropout probability on the outputs of every layer but the
            last (training mode only).
        bidirectional: also run each layer backwards in time.
        device: device of the parameters.
        dtype: dtype of the parameters.

    Raises:
        TypeError: if a size is not an int or ``dropout`` not a float.
        ValueError: if a size is not positive or ``dropout`` is outside
            [0, 1].
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
        super().__init__()
        _check_positive("input_size", input_size)
        _check_positive("hidden_size", hidden_size)
        _check_positive("num_layers", num_layers)
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)):
            raise TypeError(
                f"dropout must be a float, got {type(dropout).__name__}"
            )
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"dropout={dropout} must be in [0, 1]")
        if dropout > 0 and num_layers == 1:
            warnings.warn(
                f"dropout={dropout} acts between layers, so it does nothing "
                "with num_layers=1",
                stacklevel=2,
            )
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bool(bias)
        self.dropout = float(dropout)
        self.bidirectional = bool(bidirectional)
        self.num_directions = 2 if bidirectional else 1

        rows = self.num_chunks * hidden_size
        factory = {"device": device, "dtype": dtype}
        for layer in range(num_layers):
            # Layers above the first read both directions of the one below.
            in_features = (
                input_size if layer == 0 else hidden_size * self.num_directions
            )
            for direction in range(self.num_directions):
                sfx = self._suffix(layer, direction)
                self.register_parameter(
                    f"weight_ih{sfx}",
                    nn.Parameter(torch.empty(rows, in_features, **factory)),
                )
                self.register_parameter(
                    f"weight_hh{sfx}",
                    nn.Parameter(torch.empty(rows, hidden_size, **factory)),
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

    def reset_parameters(self) -> None:
        """Draw every parameter from U(-1/sqrt(H), 1/sqrt(H)), as PyTorch."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            nn.init.uniform_(weight, -bound, bound)

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

    def layer_parameters(
        self, layer: int, direction: int = 0
    ) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
        """Return ``(weight_ih, weight_hh, bias_ih, bias_hh)`` of one layer.

        Args:
            layer: layer index, ``0 <= layer < num_layers``.
            direction: 0 forward, 1 backward (bidirectional only).
        """
        sfx = self._suffix(layer, direction)
        return (
            getattr(self, f"weight_ih{sfx}"),
            getattr(self, f"weight_hh{sfx}"),
            getattr(self, f"bias_ih{sfx}"),
            getattr(self, f"bias_hh{sfx}"),
        )

    def _step(
        self,
        x: Tensor,
        state: tuple[Tensor, ...],
        params: tuple[Tensor, Tensor, Tensor | None, Tensor | None],
    ) -> tuple[Tensor, ...]:
        """Advance one layer's state by one time step."""
        raise NotImplementedError

    # -- input checks ---------------------------------------------------

    def _check_input(self, x: Any) -> bool:
        """Validate ``x``; return True when it is unbatched (2-D)."""
        if not isinstance(x, Tensor):
            raise TypeError(
                f"input must be a torch.Tensor, got {type(x).__name__}"
            )
        if x.dim() not in (2, 3):
            raise ValueError(
                "input must be 3-D (B, T, input_size) or 2-D "
                f"(T, input_size), got {x.dim()}-D with shape "
                f"{tuple(x.shape)}"
            )
        if x.size(-1) != self.input_size:
            raise ValueError(
                f"input.size(-1)={x.size(-1)} does not match "
                f"input_size={self.input_size}"
            )
        if x.size(-2) == 0:
            raise ValueError("input has no time steps (T=0)")
        return x.dim() == 2

    def _initial(
        self, x: Tensor, h: Any, name: str, unbatched: bool
    ) -> Tensor:
        """Zeros when ``h`` is None, else ``h`` (batched) after checks."""
        stacked = self.num_layers * self.num_directions
        batch = x.size(0)
        if h is None:
            return x.new_zeros(stacked, batch, self.hidden_size)
        if not isinstance(h, Tensor):
            raise TypeError(
                f"{name} must be a torch.Tensor or None, got "
                f"{type(h).__name__}"
            )
        if unbatched:
            expected: tuple[int, ...] = (stacked, self.hidden_size)
            legend = "(num_layers * num_directions, hidden_size)"
        else:
            expected = (stacked, batch, self.hidden_size)
            legend = "(num_layers * num_directions, B, hidden_size)"
        if tuple(h.shape) != expected:
            raise ValueError(
                f"{name} must have shape {legend} = {expected}, "
                f"got {tuple(h.shape)}"
            )
        return h.unsqueeze(1) if unbatched else h  # (L*D, B, H)

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
                params = self.layer_parameters(layer, direction)
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
        if not isinstance(module, cls._torch_twin):
            raise TypeError(
                f"module must be a torch.nn.{cls._torch_twin.__name__}, "
                f"got {type(module).__name__}"
            )
        if getattr(module, "proj_size", 0) > 0:
            raise ValueError(
                f"proj_size={module.proj_size} is not supported; only "
                "LSTMs without projections (proj_size=0) can be copied"
            )

    @classmethod
    def _twin_kwargs(cls, module: nn.RNNBase) -> dict[str, Any]:
        weight = module.weight_ih_l0
        return {
            "input_size": module.input_size,
            "hidden_size": module.hidden_size,
            "num_layers": module.num_layers,
            "bias": module.bias,
            "dropout": float(module.dropout),
            "bidirectional": module.bidirectional,
            "device": weight.device,
            "dtype": weight.dtype,
        }

    def _copy_from(self, module: nn.Module) -> None:
        with torch.no_grad():
            for name, param in self.named_parameters():
                param.copy_(getattr(module, name))
        self.train(module.training)


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
        bias: whether to learn the biases.
        dropout: dropout probability on the outputs of every layer but the
            last (training mode only).
        bidirectional: also run each layer backwards in time.
        device: device of the parameters.
        dtype: dtype of the parameters.
    Shape:
        - input: ``(B, T, input_size)``, or ``(T, input_size)`` unbatched.
        - initial and final states: ``(num_layers * D, B, H)``, or
          ``(num_layers * D, H)`` unbatched, with ``D = 2`` if
          bidirectional else 1; layer ``k``'s forward state at index
          ``k * D`` and its backward state at ``k * D + 1``.
        - output: ``(B, T, D * H)``: the top layer's hidden state at every
          step (both directions concatenated).
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
        _check_nonlinearity(nonlinearity)
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

    def _step(self, x, state, params):
        return (rnn_cell_step(x, state[0], *params, self.nonlinearity),)

    def forward(
        self, input: Tensor, h0: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Run the network over a sequence.

        Args:
            input: the sequence, batch-first.
            h0: initial hidden states; zeros when ``None``.

        Returns:
            ``(output, h_n)``: the top layer's hidden states at every step
            and every layer's final hidden state.
        """
        unbatched = self._check_input(input)
        if unbatched:
            input = input.unsqueeze(0)  # (1, T, input_size)
        h0 = self._initial(input, h0, "h0", unbatched)
        output, (h_n,) = self._unroll(input, [h0])
        if unbatched:
            return output.squeeze(0), h_n.squeeze(1)
        return output, h_n

    @classmethod
    def from_torch(cls, module: nn.RNN) -> RNN:
        """Build an RNN holding a copy of ``module``'s weights.

        ``module`` may be batch-first or not: the copy is always
        batch-first, so its output equals ``module``'s on batch-first
        input, or ``module``'s transposed otherwise.

        Args:
            module: a ``torch.nn.RNN``.

        Returns:
            An RNN whose outputs equal ``module``'s (in the same train or
            eval mode).

        Raises:
            TypeError: if ``module`` is not an ``nn.RNN``.
        """
        cls._check_twin(module)
        net = cls(**cls._twin_kwargs(module), nonlinearity=module.nonlinearity)
        net._copy_from(module)
        return net


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
        bias: whether to learn the biases.
        dropout: dropout probability on the outputs of every layer but the
            last (training mode only).
        bidirectional: also run each layer backwards in time.
        device: device of the parameters.
        dtype: dtype of the parameters.
    Shape:
        - input: ``(B, T, input_size)``, or ``(T, input_size)`` unbatched.
        - initial and final states: ``(num_layers * D, B, H)``, or
          ``(num_layers * D, H)`` unbatched, with ``D = 2`` if
          bidirectional else 1; layer ``k``'s forward state at index
          ``k * D`` and its backward state at ``k * D + 1``.
        - output: ``(B, T, D * H)``: the top layer's hidden state at every
          step (both directions concatenated).
    """

    num_chunks = 4
    num_states = 2
    _torch_twin = nn.LSTM

    def _step(self, x, state, params):
        return lstm_cell_step(x, state, *params)

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
        unbatched = self._check_input(input)
        if unbatched:
            input = input.unsqueeze(0)  # (1, T, input_size)
        if state is None:
            h0 = c0 = None
        elif isinstance(state, (tuple, list)) and len(state) == 2:
            h0, c0 = state
        else:
            raise TypeError(
                "state must be a pair (h0, c0) of tensors or None, got "
                f"{type(state).__name__}"
            )
        h0 = self._initial(input, h0, "state[0] (h0)", unbatched)
        c0 = self._initial(input, c0, "state[1] (c0)", unbatched)
        output, (h_n, c_n) = self._unroll(input, [h0, c0])
        if unbatched:
            return output.squeeze(0), (h_n.squeeze(1), c_n.squeeze(1))
        return output, (h_n, c_n)

    @classmethod
    def from_torch(cls, module: nn.LSTM) -> LSTM:
        """Build an LSTM holding a copy of ``module``'s weights.

        ``module`` may be batch-first or not: the copy is always
        batch-first.

        Args:
            module: a ``torch.nn.LSTM`` with ``proj_size=0``.

        Returns:
            An LSTM whose outputs equal ``module``'s (in the same train or
            eval mode).

        Raises:
            TypeError: if ``module`` is not an ``nn.LSTM``.
            ValueError: if ``module.proj_size > 0``.
        """
        cls._check_twin(module)
        net = cls(**cls._twin_kwargs(module))
        net._copy_from(module)
        return net


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
        bias: whether to learn the biases.
        dropout: dropout probability on the outputs of every layer but the
            last (training mode only).
        bidirectional: also run each layer backwards in time.
        device: device of the parameters.
        dtype: dtype of the parameters.
    Shape:
        - input: ``(B, T, input_size)``, or ``(T, input_size)`` unbatched.
        - initial and final states: ``(num_layers * D, B, H)``, or
          ``(num_layers * D, H)`` unbatched, with ``D = 2`` if
          bidirectional else 1; layer ``k``'s forward state at index
          ``k * D`` and its backward state at ``k * D + 1``.
        - output: ``(B, T, D * H)``: the top layer's hidden state at every
          step (both directions concatenated).
    """

    num_chunks = 3
    _torch_twin = nn.GRU

    def _step(self, x, state, params):
        return (gru_cell_step(x, state[0], *params),)

    def forward(
        self, input: Tensor, h0: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Run the network over a sequence.

        Args:
            input: the sequence, batch-first.
            h0: initial hidden states; zeros when ``None``.

        Returns:
            ``(output, h_n)``: the top layer's hidden states at every step
            and every layer's final hidden state.
        """
        unbatched = self._check_input(input)
        if unbatched:
            input = input.unsqueeze(0)  # (1, T, input_size)
        h0 = self._initial(input, h0, "h0", unbatched)
        output, (h_n,) = self._unroll(input, [h0])
        if unbatched:
            return output.squeeze(0), h_n.squeeze(1)
        return output, h_n

    @classmethod
    def from_torch(cls, module: nn.GRU) -> GRU:
        """Build a GRU holding a copy of ``module``'s weights.

        ``module`` may be batch-first or not: the copy is always
        batch-first.

        Args:
            module: a ``torch.nn.GRU``.

        Returns:
            A GRU whose outputs equal ``module``'s (in the same train or
            eval mode).

        Raises:
            TypeError: if ``module`` is not an ``nn.GRU``.
        """
        cls._check_twin(module)
        net = cls(**cls._twin_kwargs(module))
        net._copy_from(module)
        return net
