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
from typing import Any, TypeVar

import torch
from torch import Tensor, nn

from .._checks import check_bool, check_choice, check_int, check_tensor
from .._docs import shared_doc

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


def _check_input(
    x: Any, input_size: int, dtype: torch.dtype, ndim: int
) -> bool:
    """Check a (batched ``ndim``-D or unbatched) input; True if unbatched.

    The input must be floating, of the parameters' dtype (a matmul of
    float32 and float64 fails deep inside, far from the mistake) and end in
    ``input_size`` features.
    """
    check_tensor("input", x, ndim=(ndim, ndim - 1), floating=True)
    if x.size(-1) != input_size:
        raise ValueError(
            f"input.size(-1)={x.size(-1)} does not match "
            f"input_size={input_size}"
        )
    _check_dtype("input", x, dtype)
    return x.ndim == ndim - 1


def _check_dtype(name: str, x: Tensor, dtype: torch.dtype) -> None:
    if x.dtype != dtype:
        raise TypeError(
            f"{name} has dtype {x.dtype}, but the parameters are {dtype}; "
            f"convert one of them with .to()"
        )


def _check_shape(
    name: str, x: Tensor, shape: tuple[int, ...], legend: str
) -> None:
    if tuple(x.shape) != shape:
        raise ValueError(
            f"{name} must have shape {legend} = {shape}, got {tuple(x.shape)}"
        )


def _initial(
    name: str, h: Any, x: Tensor, shape: tuple[int, ...], legend: str
) -> Tensor:
    """Zeros like ``x`` when ``h`` is None, else ``h`` after checks."""
    if h is None:
        return x.new_zeros(shape)
    check_tensor(name, h)
    _check_shape(name, h, shape, legend)
    _check_dtype(name, h, x.dtype)
    return h


def _split_pair(state: Any, names: str) -> tuple[Any, Any]:
    """``(h, c)`` from an LSTM state, or ``(None, None)``."""
    if state is None:
        return None, None
    if isinstance(state, (tuple, list)) and len(state) == 2:
        return state[0], state[1]
    raise TypeError(
        f"state must be a pair {names} of tensors or None, got "
        f"{type(state).__name__}"
    )


def _unsqueeze(h: Any) -> Any:
    """Add a batch dimension to a tensor; leave anything else to checks."""
    return h.unsqueeze(0) if isinstance(h, Tensor) else h


_Twin = TypeVar("_Twin", bound="_TorchTwin")


class _TorchTwin(nn.Module):
    """Initialisation and weight copying shared by cells and layers."""

    _torch_twin: type[nn.Module] = nn.Module

    def __init__(self, input_size: int, hidden_size: int, bias: bool) -> None:
        super().__init__()
        self.input_size = check_int("input_size", input_size)
        self.hidden_size = check_int("hidden_size", hidden_size)
        self.bias = check_bool("bias", bias)

    def reset_parameters(self) -> None:
        """Draw every parameter from U(-1/sqrt(H), 1/sqrt(H)), as PyTorch."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            nn.init.uniform_(weight, -bound, bound)

    @classmethod
    def _check_twin(cls, module: Any) -> None:
        if not isinstance(module, cls._torch_twin):
            raise TypeError(
                f"module must be a torch.nn.{cls._torch_twin.__name__}, "
                f"got {type(module).__name__}"
            )

    @classmethod
    def _twin_kwargs(cls, module: Any) -> dict[str, Any]:
        """Constructor arguments that rebuild ``module``'s configuration."""
        weight = next(module.parameters())
        kwargs = {
            "input_size": module.input_size,
            "hidden_size": module.hidden_size,
            "bias": module.bias,
            "device": weight.device,
            "dtype": weight.dtype,
        }
        if hasattr(module, "nonlinearity"):  # nn.RNNCell and nn.RNN
            kwargs["nonlinearity"] = module.nonlinearity
        return kwargs

    @classmethod
    def from_torch(cls: type[_Twin], module: nn.Module) -> _Twin:
        """Build a copy of the PyTorch twin ``module``, weights included.

        A twin that is not batch-first still gives a batch-first copy: its
        output equals the twin's on batch-first input (transposed
        otherwise). The copy takes the twin's train or eval mode.

        Args:
            module: the twin (``nn.RNNCell`` for :class:`RNNCell`,
                ``nn.LSTM`` without projections for :class:`LSTM`, ...).

        Returns:
            A module whose outputs equal ``module``'s.

        Raises:
            TypeError: if ``module`` is not the twin's class.
            ValueError: for an ``nn.LSTM`` with ``proj_size > 0``.
        """
        cls._check_twin(module)
        ours = cls(**cls._twin_kwargs(module))
        with torch.no_grad():
            for name, param in ours.named_parameters():
                param.copy_(getattr(module, name))
        return ours.train(module.training)


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


# The GRU step's equations, in the step function and the cell (see _docs).
_GRU_EQUATIONS = r"""
.. math::

    r &= \sigma(W_{ir} x + b_{ir} + W_{hr} h + b_{hr}) \\
    z &= \sigma(W_{iz} x + b_{iz} + W_{hz} h + b_{hz}) \\
    n &= \tanh(W_{in} x + b_{in} + r \odot (W_{hn} h + b_{hn})) \\
    h' &= (1 - z) \odot n + z \odot h"""


@shared_doc(gru_equations=_GRU_EQUATIONS)
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

    {gru_equations}

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


class RNNCellBase(_TorchTwin):
    """What the three cells share: parameters, initialisation, checks.

    Holds ``weight_ih`` ``(G * H, input_size)``, ``weight_hh``
    ``(G * H, H)`` and, with ``bias``, ``bias_ih`` and ``bias_hh``
    ``(G * H,)``, where ``G`` is :attr:`num_chunks`, the number of gate
    blocks stacked in each weight (1 for the RNN, 4 for the LSTM, 3 for the
    GRU), as in ``torch.nn.RNNCellBase``. Subclasses add ``_step`` and
    ``forward``.

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
        super().__init__(input_size, hidden_size, bias)
        rows = self.num_chunks * self.hidden_size
        factory: dict[str, Any] = {"device": device, "dtype": dtype}
        self.weight_ih = nn.Parameter(
            torch.empty(rows, self.input_size, **factory)
        )
        self.weight_hh = nn.Parameter(
            torch.empty(rows, self.hidden_size, **factory)
        )
        if self.bias:
            self.bias_ih = nn.Parameter(torch.empty(rows, **factory))
            self.bias_hh = nn.Parameter(torch.empty(rows, **factory))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        return text if self.bias else f"{text}, bias=False"

    def _weights(self) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
        return (self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)

    def _step(self, x: Tensor, state: list[Tensor]) -> tuple[Tensor, ...]:
        """Advance the batched state by one step."""
        raise NotImplementedError

    def _advance(
        self, input: Tensor, state: list[Any], names: list[str]
    ) -> list[Tensor]:
        """Check, add and remove the batch dimension around ``_step``."""
        unbatched = _check_input(
            input, self.input_size, self.weight_ih.dtype, 2
        )
        if unbatched:
            input = input.unsqueeze(0)  # (1, input_size)
            state = [_unsqueeze(s) for s in state]  # each (1, H)
        shape = (input.size(0), self.hidden_size)
        state = [
            _initial(name, s, input, shape, "(B, hidden_size)")
            for name, s in zip(names, state, strict=True)
        ]
        new = self._step(input, state)
        if unbatched:
            return [s.squeeze(0) for s in new]  # each (H,)
        return list(new)


# The shapes of the cells whose state is one tensor (see _docs).
_CELL_SHAPE = """\
Shape:
    - input: ``(B, input_size)`` or ``(input_size,)``.
    - h: ``(B, H)`` or ``(H,)``; zeros when ``None``.
    - output: the new ``h``, same shape as ``h``."""


@shared_doc(cell_shape=_CELL_SHAPE)
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

    {cell_shape}

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
        check_choice("nonlinearity", nonlinearity, _NONLINEARITIES)
        super().__init__(
            input_size, hidden_size, bias, device=device, dtype=dtype
        )
        self.nonlinearity = nonlinearity

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, nonlinearity={self.nonlinearity!r}"

    def _step(self, x: Tensor, state: list[Tensor]) -> tuple[Tensor]:
        return (
            rnn_cell_step(x, state[0], *self._weights(), self.nonlinearity),
        )

    def forward(self, input: Tensor, h: Tensor | None = None) -> Tensor:
        """Advance the hidden state by one step (see the class equation)."""
        return self._advance(input, [h], ["h"])[0]


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

    def _step(self, x: Tensor, state: list[Tensor]) -> tuple[Tensor, Tensor]:
        return lstm_cell_step(x, (state[0], state[1]), *self._weights())

    def forward(
        self, input: Tensor, state: tuple[Tensor, Tensor] | None = None
    ) -> tuple[Tensor, Tensor]:
        """Advance ``(h, c)`` by one step (see ``lstm_cell_step``)."""
        h, c = _split_pair(state, "(h, c)")
        h, c = self._advance(input, [h, c], ["state[0] (h)", "state[1] (c)"])
        return h, c


@shared_doc(cell_shape=_CELL_SHAPE, gru_equations=_GRU_EQUATIONS)
class GRUCell(RNNCellBase):
    r"""Gated recurrent unit (Cho et al., 2014), equal to ``nn.GRUCell``.

    Gate order ``r, z, n`` and the reset gate applied to
    :math:`W_{hn} h + b_{hn}`, as in PyTorch:

    {gru_equations}

    Args:
        input_size: features of the input :math:`x`.
        hidden_size: features :math:`H` of the hidden state.
        bias: whether to learn the biases.
        device: device of the parameters.
        dtype: dtype of the parameters.

    {cell_shape}

    Example:
        >>> GRUCell(3, 5)(torch.randn(2, 3)).shape
        torch.Size([2, 5])
    """

    num_chunks = 3
    _torch_twin = nn.GRUCell

    def _step(self, x: Tensor, state: list[Tensor]) -> tuple[Tensor]:
        return (gru_cell_step(x, state[0], *self._weights()),)

    def forward(self, input: Tensor, h: Tensor | None = None) -> Tensor:
        """Advance the hidden state by one step (see the class equations)."""
        return self._advance(input, [h], ["h"])[0]
