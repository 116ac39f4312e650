"""Recurrent cells written out gate by gate: Elman RNN, LSTM and GRU.

Gate order, parameter names and initialisation are PyTorch's, so that
``from_torch`` copies ``nn.RNNCell``, ``nn.LSTMCell`` and ``nn.GRUCell``.
"""

from __future__ import annotations

import math
from typing import Any, TypeVar, cast

import torch
from torch import Tensor, nn

from .._checks import (
    check_bool,
    check_choice,
    check_instance,
    check_int,
    check_shape,
    check_tensor,
    check_twin,
)

__all__ = ["GRUCell", "LSTMCell", "RNNCell", "RNNCellBase", "gru_cell_step",
           "lstm_cell_step", "rnn_cell_step"]

_NONLINEARITIES = ("tanh", "relu")
_Module = TypeVar("_Module", bound="_Recurrent")
_Pair = tuple[Tensor, Tensor]
_Params = tuple[Tensor, Tensor, Tensor | None, Tensor | None]


class _Recurrent(nn.Module):
    """What cells and layers share: sizes, init, checks, ``from_torch``."""

    _torch_twin: type = nn.Module
    #: Gate blocks stacked in each weight (1 RNN, 4 LSTM, 3 GRU).
    num_chunks: int = 1
    #: Tensors in the recurrent state (2 for the LSTM's ``(h, c)``).
    num_states: int = 1
    #: Whether ``forward`` checks its inputs (off inside a checked model).
    check_inputs: bool = True

    def __init__(self, input_size: int, hidden_size: int, bias: bool) -> None:
        super().__init__()
        self.input_size = check_int("input_size", input_size)
        self.hidden_size = check_int("hidden_size", hidden_size)
        self.bias = check_bool("bias", bias)

    def _add_weights(self, suffix: str, width: int,
                     like: dict[str, Any]) -> None:
        """``weight_ih{suffix}`` ``(G H, width)``, ``weight_hh{suffix}``
        ``(G H, H)`` and the biases ``(G H,)``, ``None`` without ``bias``."""
        rows, H = self.num_chunks * self.hidden_size, self.hidden_size
        shapes = {"weight_ih": (rows, width), "weight_hh": (rows, H),
                  "bias_ih": (rows,), "bias_hh": (rows,)}
        for name, shape in shapes.items():
            keep = self.bias or "weight" in name
            param = nn.Parameter(torch.empty(shape, **like)) if keep else None
            self.register_parameter(name + suffix, param)

    def _weights(self, suffix: str = "") -> _Params:
        """``(weight_ih, weight_hh, bias_ih, bias_hh)``, each + ``suffix``."""
        names = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
        return cast(_Params, tuple(getattr(self, n + suffix) for n in names))

    def extra_repr(self) -> str:
        defaults = {"num_layers": 1, "nonlinearity": "tanh", "bias": True,
                    "dropout": 0.0, "bidirectional": False}
        return f"{self.input_size}, {self.hidden_size}" + "".join(
            f", {k}={getattr(self, k, d)!r}" for k, d in defaults.items()
            if getattr(self, k, d) != d)

    def reset_parameters(self) -> None:
        """Every parameter from U(-1/sqrt(H), 1/sqrt(H)), as in PyTorch."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            nn.init.uniform_(weight, -bound, bound)

    @classmethod
    def from_torch(cls: type[_Module], module: nn.Module) -> _Module:
        """A copy of the PyTorch twin ``module`` (``nn.GRUCell`` for
        ``GRUCell``, ...), weights and mode included, always batch-first."""
        check_twin(module, cls._torch_twin, lambda m: {
            f"proj_size={getattr(m, 'proj_size', 0)}":
                getattr(m, "proj_size", 0) > 0})
        weight = next(module.parameters())
        names = ("input_size", "hidden_size", "bias", "nonlinearity",
                 "num_layers", "dropout", "bidirectional")
        kwargs = {k: getattr(module, k) for k in names if hasattr(module, k)}
        kwargs.update(device=weight.device, dtype=weight.dtype)
        ours = cls(**kwargs)
        with torch.no_grad():
            for name, param in ours.named_parameters():
                param.copy_(getattr(module, name))
        return ours.train(module.training)

    def _prepare(self, input: Any, state: Any, t: str = "",
                 lead: tuple[int, ...] = ()
                ) -> tuple[Tensor, list[Tensor], bool]:
        """Checked, batched ``input`` and state tensors (``h{t}``, or an
        LSTM's ``(h{t}, c{t})``; ``(*lead, B, H)``, zeros for ``None``),
        and whether the input was unbatched."""
        states, names = [state], [f"h{t}"]
        if self.num_states == 2:  # a pair (h, c), or None for zeros
            names = [f"state[0] (h{t})", f"state[1] (c{t})"]
            states = [None, None] if state is None else [*check_instance(
                "state", state, (tuple, list),
                f"a pair (h{t}, c{t}) of tensors or None")]
        ndim = 2 + len(lead)  # a layer's input has a time axis
        if self.check_inputs:
            weight = next(self.parameters())
            check_tensor("input", input, ndim=(ndim, ndim - 1), floating=True)
            size = (*input.shape[:-1], self.input_size)
            check_shape("input", input, size, "(..., input_size)", like=weight)
        unbatched = input.ndim == ndim - 1
        B = 1 if unbatched else input.size(0)
        shape = (*lead, B, self.hidden_size)
        for i, (name, s) in enumerate(zip(names, states, strict=True)):
            if s is None:
                states[i] = input.new_zeros(shape)
                continue
            if self.check_inputs:
                want = (*lead, self.hidden_size) if unbatched else shape
                legend = ("(L * D, " if lead else "(") + (
                    "H)" if unbatched else "B, H)")
                check_shape(name, s, want, legend, like=weight)
            states[i] = s.unsqueeze(len(lead)) if unbatched else s
        return (input.unsqueeze(0) if unbatched else input), states, unbatched


def _affine(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    return x @ weight.T if bias is None else x @ weight.T + bias


def rnn_cell_step(x: Tensor, h: Tensor, weight_ih: Tensor, weight_hh: Tensor,
                  bias_ih: Tensor | None = None, bias_hh: Tensor | None = None,
                  nonlinearity: str = "tanh") -> Tensor:
    r"""One step of an Elman RNN (Elman, 1990).

    .. math:: h' = \phi(W_{ih} x + b_{ih} + W_{hh} h + b_{hh})

    Args:
        nonlinearity: :math:`\phi`, ``"tanh"`` or ``"relu"``.

    Shape:
        x ``(B, I)``, h ``(B, H)``, weight_ih ``(H, I)``, weight_hh
        ``(H, H)``, biases ``(H,)`` or ``None``; returns ``(B, H)``.
    """
    pre = _affine(x, weight_ih, bias_ih) + _affine(h, weight_hh, bias_hh)
    return torch.tanh(pre) if nonlinearity == "tanh" else torch.relu(pre)


def lstm_cell_step(x: Tensor, state: _Pair, weight_ih: Tensor,
                   weight_hh: Tensor, bias_ih: Tensor | None = None,
                   bias_hh: Tensor | None = None) -> _Pair:
    r"""One step of an LSTM (Hochreiter and Schmidhuber, 1997) with the
    forget gate of Gers et al. (2000); gates in the order ``i, f, g, o``.

    .. math::

        i, f, o &= \sigma(W_{i\ast} x + b_{i\ast} + W_{h\ast} h
            + b_{h\ast}), \quad g = \tanh(W_{ig} x + b_{ig} + W_{hg} h
            + b_{hg}) \\
        c' &= f \odot c + i \odot g, \qquad h' = o \odot \tanh(c')

    Shape:
        x ``(B, I)``; the state ``(h, c)``, each ``(B, H)``; weight_ih
        ``(4H, I)``, weight_hh ``(4H, H)``, biases ``(4H,)`` or ``None``.
    """
    h, c = state
    gates = _affine(x, weight_ih, bias_ih) + _affine(h, weight_hh, bias_hh)
    i, f, g, o = gates.chunk(4, dim=-1)  # each (B, H)
    c_next = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return o.sigmoid() * torch.tanh(c_next), c_next


def gru_cell_step(x: Tensor, h: Tensor, weight_ih: Tensor, weight_hh: Tensor,
                  bias_ih: Tensor | None = None,
                  bias_hh: Tensor | None = None) -> Tensor:
    r"""One step of a GRU (Cho et al., 2014) as PyTorch writes it: gates
    ``r, z, n``, the reset gate applied after :math:`b_{hn}`.

    .. math::

        r, z &= \sigma(W_{i\ast} x + b_{i\ast} + W_{h\ast} h + b_{h\ast})
        \\
        n &= \tanh(W_{in} x + b_{in} + r \odot (W_{hn} h + b_{hn})),
        \qquad h' = (1 - z) \odot n + z \odot h

    Shape:
        x ``(B, I)``, h ``(B, H)``, weight_ih ``(3H, I)``, weight_hh
        ``(3H, H)``, biases ``(3H,)`` or ``None``; returns ``(B, H)``.
    """
    x_r, x_z, x_n = _affine(x, weight_ih, bias_ih).chunk(3, dim=-1)
    h_r, h_z, h_n = _affine(h, weight_hh, bias_hh).chunk(3, dim=-1)
    r, z = torch.sigmoid(x_r + h_r), torch.sigmoid(x_z + h_z)
    return (1 - z) * torch.tanh(x_n + r * h_n) + z * h


class RNNCellBase(_Recurrent):
    """A cell's parameters: ``weight_ih`` ``(G H, I)``, ``weight_hh``
    ``(G H, H)``, ``bias_ih`` and ``bias_hh``, ``G`` gate blocks.

    ``input_size`` and ``hidden_size`` are ``I`` and ``H``.

    Shape:
        input ``(B, I)`` or ``(I,)``; each state ``(B, H)`` or ``(H,)``,
        zeros when ``None``; the output: the new state.
    """

    _torch_twin: type = nn.RNNCellBase

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, *,
                 device: torch.device | str | None = None,
                 dtype: torch.dtype | None = None) -> None:
        super().__init__(input_size, hidden_size, bias)
        self._add_weights("", input_size, {"device": device, "dtype": dtype})
        self.reset_parameters()


class RNNCell(RNNCellBase):
    """Elman RNN cell (Elman, 1990), equal to ``nn.RNNCell``; see
    :func:`rnn_cell_step` (``nonlinearity``: ``"tanh"`` or ``"relu"``)."""

    _torch_twin = nn.RNNCell

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", **kwargs: Any) -> None:
        check_choice("nonlinearity", nonlinearity, _NONLINEARITIES)
        super().__init__(input_size, hidden_size, bias, **kwargs)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, h: Tensor | None = None) -> Tensor:
        x, (h,), unbatched = self._prepare(input, h)
        h = rnn_cell_step(x, h, *self._weights(), self.nonlinearity)
        return h.squeeze(0) if unbatched else h  # (H,) unbatched


class LSTMCell(RNNCellBase):
    """LSTM cell with a forget gate, equal to ``nn.LSTMCell``; the state
    is ``(h, c)``. See :func:`lstm_cell_step`."""

    num_chunks, num_states = 4, 2
    _torch_twin = nn.LSTMCell

    def forward(self, input: Tensor, state: _Pair | None = None) -> _Pair:
        x, (h, c), unbatched = self._prepare(input, state)
        h, c = lstm_cell_step(x, (h, c), *self._weights())
        return (h.squeeze(0), c.squeeze(0)) if unbatched else (h, c)


class GRUCell(RNNCellBase):
    """Gated recurrent unit (Cho et al., 2014), equal to ``nn.GRUCell``.
    See :func:`gru_cell_step`."""

    num_chunks = 3
    _torch_twin = nn.GRUCell

    def forward(self, input: Tensor, h: Tensor | None = None) -> Tensor:
        x, (h,), unbatched = self._prepare(input, h)
        h = gru_cell_step(x, h, *self._weights())
        return h.squeeze(0) if unbatched else h  # (H,) unbatched
