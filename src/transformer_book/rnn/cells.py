"""Recurrent cells written out gate by gate: Elman RNN, LSTM and GRU.

A cell advances the state of a recurrent network by one time step. Each
cell here is a thin module around a pure step function
(``rnn_cell_step``, ``lstm_cell_step``, ``gru_cell_step``) that
spells out the equations; the multi-layer modules in
``transformer_book.rnn.recurrent`` call the same functions once per time
step. Gate order, parameter names and initialisation follow PyTorch, so that
``from_torch`` can copy ``nn.RNNCell``, ``nn.LSTMCell`` and ``nn.GRUCell``
and give the same outputs.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

__all__ = [
    "GRUCell",
    "LSTMCell",
    "RNNCell",
    "RNNCellBase",
    "gru_cell_step",
    "lstm_cell_step",
    "rnn_cell_step",
]

_NONLINEARITIES = ("tanh", "relu")


def _check_positive(name: str, value: Any) -> None:
    """Raise unless ``value`` is a positive ``int`` (bools excluded)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"{name}={value} must be positive")


def _check_nonlinearity(nonlinearity: Any) -> None:
    if nonlinearity not in _NONLINEARITIES:
        raise ValueError(
            f"nonlinearity={nonlinearity!r} is not supported; expected "
            f"'tanh' or 'relu'"
        )


def _unsqueeze(h: Any) -> Any:
    """Add a batch dimension to a tensor; leave anything else to checks."""
    return h.unsqueeze(0) if isinstance(h, Tensor) else h


def _affine(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """``x W^T + b`` for ``x`` of shape ``(B, in)`` and ``W`` ``(out, in)``."""
    out = x @ weight.T
    return out if bias is None else out + bias


def rnn_cell_step(
    x: Tensor,
    h: Tensor,
    weight_ih: Tensor,
    weight_hh: Tensor,
    bias_ih: Tensor | None = None,
    bias_hh: Tensor | None = None,
    nonlinearity: str = "tanh",
) -> Tensor:
    r"""One step of an Elman RNN (Elman, 1990).

    .. math::

        h' = \phi(W_{ih} x + b_{ih} + W_{hh} h + b_{hh}),
        \qquad \phi \in \{\tanh, \mathrm{relu}\}

    Args:
        x: input at this step.
        h: hidden state from the previous step.
        weight_ih: :math:`W_{ih}`, shape ``(H, input_size)``.
        weight_hh: :math:`W_{hh}`, shape ``(H, H)``.
        bias_ih: :math:`b_{ih}`, shape ``(H,)``, or ``None``.
        bias_hh: :math:`b_{hh}`, shape ``(H,)``, or ``None``.
        nonlinearity: ``"tanh"`` or ``"relu"``.

    Shape:
        - x: ``(B, input_size)``; h: ``(B, H)``.
        - returns ``(B, H)``.

    Returns:
        The new hidden state :math:`h'`.
    """
    pre = _affine(x, weight_ih, bias_ih) + _affine(h, weight_hh, bias_hh)
    return torch.tanh(pre) if nonlinearity == "tanh" else torch.relu(pre)


def lstm_cell_step(
    x: Tensor,
    state: tuple[Tensor, Tensor],
    weight_ih: Tensor,
    weight_hh: Tensor,
    bias_ih: Tensor | None = None,
    bias_hh: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    r"""One step of an LSTM with a forget gate.

    The memory cell and the input and output gates are from Hochreiter and
    Schmidhuber (1997); the forget gate is from Gers, Schmidhuber and
    Cummins (2000). The rows of the weights hold the four blocks in
    PyTorch's order ``i, f, g, o``:

    .. math::

        i &= \sigma(W_{ii} x + b_{ii} + W_{hi} h + b_{hi}) \\
        f &= \sigma(W_{if} x + b_{if} + W_{hf} h + b_{hf}) \\
        g &= \tanh(W_{ig} x + b_{ig} + W_{hg} h + b_{hg}) \\
        o &= \sigma(W_{io} x + b_{io} + W_{ho} h + b_{ho}) \\
        c' &= f \odot c + i \odot g \\
        h' &= o \odot \tanh(c')

    Args:
        x: input at this step.
        state: ``(h, c)``, hidden and cell state from the previous step.
        weight_ih: ``[W_ii; W_if; W_ig; W_io]``, shape ``(4H, input_size)``.
        weight_hh: ``[W_hi; W_hf; W_hg; W_ho]``, shape ``(4H, H)``.
        bias_ih: shape ``(4H,)``, or ``None``.
        bias_hh: shape ``(4H,)``, or ``None``.

    Shape:
        - x: ``(B, input_size)``; h and c: ``(B, H)``.
        - returns two tensors of shape ``(B, H)``.

    Returns:
        The new state ``(h', c')``.
    """
    h, c = state
    gates = _affine(x, weight_ih, bias_ih) + _affine(h, weight_hh, bias_hh)
    i, f, g, o = gates.chunk(4, dim=-1)  # each (B, H)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    c_next = f * c + i * g
    h_next = o * torch.tanh(c_next)
    return h_next, c_next


def gru_cell_step(
    x: Tensor,
    h: Tensor,
    weight_ih: Tensor,
    weight_hh: Tensor,
    bias_ih: Tensor | None = None,
    bias_hh: Tensor | None = None,
) -> Tensor:
    r"""One step of a gated recurrent unit (Cho et al., 2014).

    PyTorch's variant: the reset gate multiplies the recurrent term *after*
    its bias, :math:`r \odot (W_{hn} h + b_{hn})`. The rows of the weights
    hold the blocks in the order ``r, z, n``:

    .. math::

        r &= \sigma(W_{ir} x + b_{ir} + W_{hr} h + b_{hr}) \\
        z &= \sigma(W_{iz} x + b_{iz} + W_{hz} h + b_{hz}) \\
        n &= \tanh(W_{in} x + b_{in} + r \odot (W_{hn} h + b_{hn})) \\
        h' &= (1 - z) \odot n + z \odot h

    Args:
        x: input at this step.
        h: hidden state from the previous step.
        weight_ih: ``[W_ir; W_iz; W_in]``, shape ``(3H, input_size)``.
        weight_hh: ``[W_hr; W_hz; W_hn]``, shape ``(3H, H)``.
        bias_ih: shape ``(3H,)``, or ``None``.
        bias_hh: shape ``(3H,)``, or ``None``.

    Shape:
        - x: ``(B, input_size)``; h: ``(B, H)``.
        - returns ``(B, H)``.

    Returns:
        The new hidden state :math:`h'`.
    """
    x_r, x_z, x_n = _affine(x, weight_ih, bias_ih).chunk(3, dim=-1)
    h_r, h_z, h_n = _affine(h, weight_hh, bias_hh).chunk(3, dim=-1)
    r = torch.sigmoid(x_r + h_r)
    z = torch.sigmoid(x_z + h_z)
    n = torch.tanh(x_n + r * h_n)
    return (1 - z) * n + z * h


class RNNCellBase(nn.Module):
    """What the three cells share: parameters, initialisation, checks.

    Holds ``weight_ih`` ``(G * H, input_size)``, ``weight_hh``
    ``(G * H, H)`` and, with ``bias``, ``bias_ih`` and ``bias_hh``
    ``(G * H,)``, where ``G`` is :attr:`num_chunks`, the number of gate
    blocks stacked in each weight (1 for the RNN, 4 for the LSTM, 3 for the
    GRU), as in ``torch.nn.RNNCellBase``. Subclasses add ``forward`` and
    ``from_torch``.

    Args:
        input_size: features of the input.
        hidden_size: features ``H`` of the hidden state.
        bias: whether to learn ``bias_ih`` and ``bias_hh``.
        device: device of the parameters.
        dtype: dtype of the parameters.

    Raises:
        TypeError: if a size is not an int.
        ValueError: if a size is not positive.
    """

    #: Number of gate blocks stacked in the weights (1, 4 or 3).
    num_chunks: int = 1
    _torch_twin: type[nn.Module] = nn.RNNCellBase

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        _check_positive("input_size", input_size)
        _check_positive("hidden_size", hidden_size)
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bool(bias)
        rows = self.num_chunks * hidden_size
        factory = {"device": device, "dtype": dtype}
        self.weight_ih = nn.Parameter(torch.empty(rows, input_size, **factory))
        self.weight_hh = nn.Parameter(
            torch.empty(rows, hidden_size, **factory)
        )
        if self.bias:
            self.bias_ih = nn.Parameter(torch.empty(rows, **factory))
            self.bias_hh = nn.Parameter(torch.empty(rows, **factory))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw every parameter from U(-1/sqrt(H), 1/sqrt(H)), as PyTorch."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            nn.init.uniform_(weight, -bound, bound)

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        return text if self.bias else f"{text}, bias=False"

    def _check_input(self, x: Tensor) -> bool:
        """Validate ``x``; return True when it is unbatched (1-D)."""
        if not isinstance(x, Tensor):
            raise TypeError(
                f"input must be a torch.Tensor, got {type(x).__name__}"
            )
        if x.dim() not in (1, 2):
            raise ValueError(
                f"input must be 2-D (B, input_size) or 1-D (input_size,), "
                f"got {x.dim()}-D with shape {tuple(x.shape)}"
            )
        if x.size(-1) != self.input_size:
            raise ValueError(
                f"input.size(-1)={x.size(-1)} does not match "
                f"input_size={self.input_size}"
            )
        return x.dim() == 1

    def _initial(self, x: Tensor, h: Tensor | None, name: str) -> Tensor:
        """Zeros when ``h`` is None, else ``h`` after a shape check."""
        expected = (x.size(0), self.hidden_size)
        if h is None:
            return x.new_zeros(expected)
        if not isinstance(h, Tensor):
            raise TypeError(
                f"{name} must be a torch.Tensor or None, got "
                f"{type(h).__name__}"
            )
        if tuple(h.shape) != expected:
            raise ValueError(
                f"{name} must have shape (B, hidden_size) = {expected}, "
                f"got {tuple(h.shape)}"
            )
        return h

    @classmethod
    def _check_twin(cls, module: nn.Module) -> None:
        if not isinstance(module, cls._torch_twin):
            raise TypeError(
                f"module must be a torch.nn.{cls._torch_twin.__name__}, "
                f"got {type(module).__name__}"
            )

    def _copy_from(self, module: nn.Module) -> None:
        with torch.no_grad():
            for name, param in self.named_parameters():
                param.copy_(getattr(module, name))


class RNNCell(RNNCellBase):
    r"""Elman RNN cell (Elman, 1990), equal to ``torch.nn.RNNCell``.

    .. math::

        h' = \phi(W_{ih} x + b_{ih} + W_{hh} h + b_{hh})

    Args:
        input_size: features of the input :math:`x`.
        hidden_size: features :math:`H` of the hidden state.
        bias: whether to learn :math:`b_{ih}` and :math:`b_{hh}`.
        nonlinearity: :math:`\phi`, ``"tanh"`` (default) or ``"relu"``.
        device: device of the parameters.
        dtype: dtype of the parameters.

    Shape:
        - input: ``(B, input_size)`` or ``(input_size,)``.
        - h: ``(B, H)`` or ``(H,)``; zeros when ``None``.
        - output: the new ``h``, same shape as ``h``.

    Example:
        >>> cell = RNNCell(3, 5)
        >>> cell(torch.randn(2, 3)).shape
        torch.Size([2, 5])
    """

    _torch_twin = nn.RNNCell

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        nonlinearity: str = "tanh",
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        _check_nonlinearity(nonlinearity)
        super().__init__(
            input_size, hidden_size, bias, device=device, dtype=dtype
        )
        self.nonlinearity = nonlinearity

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, nonlinearity={self.nonlinearity!r}"

    def forward(self, input: Tensor, h: Tensor | None = None) -> Tensor:
        """Advance the hidden state by one step (see the class equation)."""
        unbatched = self._check_input(input)
        if unbatched:
            input = input.unsqueeze(0)  # (1, input_size)
            h = _unsqueeze(h)  # (1, H)
        h = self._initial(input, h, "h")
        h = rnn_cell_step(
            input,
            h,
            self.weight_ih,
            self.weight_hh,
            self.bias_ih,
            self.bias_hh,
            self.nonlinearity,
        )
        return h.squeeze(0) if unbatched else h

    @classmethod
    def from_torch(cls, module: nn.RNNCell) -> RNNCell:
        """Build a cell holding a copy of ``module``'s weights.

        Args:
            module: a ``torch.nn.RNNCell``.

        Returns:
            A cell whose outputs equal ``module``'s.

        Raises:
            TypeError: if ``module`` is not an ``nn.RNNCell``.
        """
        cls._check_twin(module)
        cell = cls(
            module.input_size,
            module.hidden_size,
            module.bias,
            module.nonlinearity,
            device=module.weight_ih.device,
            dtype=module.weight_ih.dtype,
        )
        cell._copy_from(module)
        return cell


class LSTMCell(RNNCellBase):
    r"""LSTM cell with a forget gate, equal to ``torch.nn.LSTMCell``.

    Hochreiter and Schmidhuber (1997) introduced the memory cell :math:`c`
    with input and output gates; Gers, Schmidhuber and Cummins (2000) added
    the forget gate. Gate order ``i, f, g, o`` as in PyTorch:

    .. math::

        i, f, o &= \sigma(\cdot),\ g = \tanh(\cdot)
            \text{ of } W_{i\ast} x + b_{i\ast} + W_{h\ast} h + b_{h\ast} \\
        c' &= f \odot c + i \odot g, \qquad h' = o \odot \tanh(c')

    Args:
        input_size: features of the input :math:`x`.
        hidden_size: features :math:`H` of the hidden and cell states.
        bias: whether to learn the biases.
        device: device of the parameters.
        dtype: dtype of the parameters.

    Shape:
        - input: ``(B, input_size)`` or ``(input_size,)``.
        - state: ``(h, c)``, each ``(B, H)`` or ``(H,)``; zeros when
          ``None``.
        - output: the new ``(h, c)``.

    Example:
        >>> h, c = LSTMCell(3, 5)(torch.randn(2, 3))
        >>> h.shape, c.shape
        (torch.Size([2, 5]), torch.Size([2, 5]))
    """

    num_chunks = 4
    _torch_twin = nn.LSTMCell

    def forward(
        self, input: Tensor, state: tuple[Tensor, Tensor] | None = None
    ) -> tuple[Tensor, Tensor]:
        """Advance ``(h, c)`` by one step (see ``lstm_cell_step``)."""
        unbatched = self._check_input(input)
        if state is None:
            h = c = None
        elif isinstance(state, (tuple, list)) and len(state) == 2:
            h, c = state
        else:
            raise TypeError(
                "state must be a pair (h, c) of tensors or None, got "
                f"{type(state).__name__}"
            )
        if unbatched:
            input = input.unsqueeze(0)  # (1, input_size)
            h = _unsqueeze(h)  # (1, H)
            c = _unsqueeze(c)  # (1, H)
        h = self._initial(input, h, "state[0] (h)")
        c = self._initial(input, c, "state[1] (c)")
        h, c = lstm_cell_step(
            input,
            (h, c),
            self.weight_ih,
            self.weight_hh,
            self.bias_ih,
            self.bias_hh,
        )
        if unbatched:
            return h.squeeze(0), c.squeeze(0)
        return h, c

    @classmethod
    def from_torch(cls, module: nn.LSTMCell) -> LSTMCell:
        """Build a cell holding a copy of ``module``'s weights.

        Args:
            module: a ``torch.nn.LSTMCell``.

        Returns:
            A cell whose outputs equal ``module``'s.

        Raises:
            TypeError: if ``module`` is not an ``nn.LSTMCell``.
        """
        cls._check_twin(module)
        cell = cls(
            module.input_size,
            module.hidden_size,
            module.bias,
            device=module.weight_ih.device,
            dtype=module.weight_ih.dtype,
        )
        cell._copy_from(module)
        return cell


class GRUCell(RNNCellBase):
    r"""Gated recurrent unit (Cho et al., 2014), equal to ``nn.GRUCell``.

    Gate order ``r, z, n`` and the reset gate applied to
    :math:`W_{hn} h + b_{hn}`, as in PyTorch:

    .. math::

        r &= \sigma(W_{ir} x + b_{ir} + W_{hr} h + b_{hr}) \\
        z &= \sigma(W_{iz} x + b_{iz} + W_{hz} h + b_{hz}) \\
        n &= \tanh(W_{in} x + b_{in} + r \odot (W_{hn} h + b_{hn})) \\
        h' &= (1 - z) \odot n + z \odot h

    Args:
        input_size: features of the input :math:`x`.
        hidden_size: features :math:`H` of the hidden state.
        bias: whether to learn the biases.
        device: device of the parameters.
        dtype: dtype of the parameters.

    Shape:
        - input: ``(B, input_size)`` or ``(input_size,)``.
        - h: ``(B, H)`` or ``(H,)``; zeros when ``None``.
        - output: the new ``h``, same shape as ``h``.

    Example:
        >>> GRUCell(3, 5)(torch.randn(2, 3)).shape
        torch.Size([2, 5])
    """

    num_chunks = 3
    _torch_twin = nn.GRUCell

    def forward(self, input: Tensor, h: Tensor | None = None) -> Tensor:
        """Advance the hidden state by one step (see the class equations)."""
        unbatched = self._check_input(input)
        if unbatched:
            input = input.unsqueeze(0)  # (1, input_size)
            h = _unsqueeze(h)  # (1, H)
        h = self._initial(input, h, "h")
        h = gru_cell_step(
            input,
            h,
            self.weight_ih,
            self.weight_hh,
            self.bias_ih,
            self.bias_hh,
        )
        return h.squeeze(0) if unbatched else h

    @classmethod
    def from_torch(cls, module: nn.GRUCell) -> GRUCell:
        """Build a cell holding a copy of ``module``'s weights.

        Args:
            module: a ``torch.nn.GRUCell``.

        Returns:
            A cell whose outputs equal ``module``'s.

        Raises:
            TypeError: if ``module`` is not an ``nn.GRUCell``.
        """
        cls._check_twin(module)
        cell = cls(
            module.input_size,
            module.hidden_size,
            module.bias,
            device=module.weight_ih.device,
            dtype=module.weight_ih.dtype,
        )
        cell._copy_from(module)
        return cell
