"""The transformer's building blocks, from normalisation to the full model.

Small classes in dependency order, each built on the one before:

- :class:`LayerNorm` (Ba et al., 2016) and :class:`RMSNorm` (Zhang and
  Sennrich, 2019) normalise each token's features;
- :class:`FeedForward` transforms each token alone (ReLU, exact GELU, or
  SwiGLU, Shazeer 2020);
- :class:`EncoderLayer` is self-attention then feed-forward, each in a
  residual branch, normalised after the sum (post-LN, Vaswani et al., 2017)
  or before the branch (pre-LN, Xiong et al., 2020);
- :class:`DecoderLayer` adds cross-attention to an encoder's ``memory``;
- :class:`Encoder` and :class:`Decoder` stack layers, with an optional
  final norm; :class:`Transformer` joins them, like ``nn.Transformer``
  without embeddings.

Every class has a ``from_torch`` classmethod that copies the weights of its
PyTorch twin (``nn.LayerNorm``, ``nn.RMSNorm``,
``nn.TransformerEncoderLayer``, ... ``nn.Transformer``), built with or
without ``batch_first``; the copy is batch-first and computes the same
function. A GPT block is an ``EncoderLayer(norm_first=True)`` called with
``is_causal=True``.

Boolean masks are ``True`` where attention is allowed
(:mod:`transformer_book.masks`); PyTorch's ``nn.Transformer*`` read them
the other way round, so code that calls those passes ``~mask``.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar, TypeVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._checks import (
    check_bool,
    check_choice,
    check_float_dtype,
    check_int,
    check_number,
    check_param_dtype,
    check_probability,
    check_tensor,
)
from ._docs import shared_doc
from .attention import KVCache, MultiHeadAttention, _check_heads
from .masks import broadcast_mask

__all__ = [
    "Decoder",
    "DecoderLayer",
    "Encoder",
    "EncoderLayer",
    "FeedForward",
    "LayerNorm",
    "RMSNorm",
    "Transformer",
    "explicit_norm",
]

_fused_norm = True


@contextmanager
def explicit_norm(enabled: bool = True) -> Iterator[None]:
    """Compute :class:`LayerNorm` with its written-out formula in a block.

    Outside such a block :class:`LayerNorm` calls PyTorch's fused kernel
    (:func:`torch.nn.functional.layer_norm`), which computes the same
    function about three times faster on a CPU; inside it, the mean, the
    variance and the scaling are spelled out, as
    :func:`~transformer_book.attention.explicit_attention` does for
    attention. Tests use it to check the two paths agree and that the
    written-out one equals ``nn.LayerNorm``. Nested blocks restore the
    previous setting.

    Args:
        enabled: ``True`` forces the written-out path; ``False`` allows the
            fused kernel again inside an enclosing block.

    Example:
        >>> norm = LayerNorm(3)
        >>> with explicit_norm():
        ...     out = norm(torch.tensor([1.0, 2.0, 3.0]))
        >>> out
        tensor([-1.2247,  0.0000,  1.2247], grad_fn=<AddBackward0>)
    """
    global _fused_norm
    previous = _fused_norm
    _fused_norm = not check_bool("enabled", enabled)
    try:
        yield
    finally:
        _fused_norm = previous

ACTIVATIONS = ("relu", "gelu", "swiglu")


# --------------------------------------------------------------------------
# Checks shared by the classes below
# --------------------------------------------------------------------------


def _check_sequence(
    name: str, x: Any, d_model: int, weight: Tensor | None = None
) -> Tensor:
    """``x`` must be a float ``(B, T, d_model)`` tensor (of weight's dtype)."""
    check_tensor(name, x, ndim=3, floating=True)
    if x.shape[-1] != d_model:
        raise ValueError(
            f"{name} has feature size {x.shape[-1]}, expected "
            f"d_model={d_model}"
        )
    if weight is not None:
        check_param_dtype(name, x, weight)
    return x


def _check_mask(name: str, mask: Tensor | None, shape: tuple) -> None:
    """``mask`` must be ``None`` or broadcast to ``shape``."""
    if mask is not None:
        broadcast_mask(mask, shape, name=name)


def _kv_len(length: int, cache: KVCache | None) -> int:
    """Keys a self-attention sees: the call's, plus those cached."""
    return length if cache is None else len(cache) + length


def _check_twin(module: Any, twin: type[nn.Module]) -> None:
    if not isinstance(module, twin):
        raise TypeError(
            f"module must be a torch.nn.{twin.__name__}, got "
            f"{type(module).__name__}"
        )


def _copy_linear(ours: nn.Linear, theirs: nn.Linear) -> None:
    with torch.no_grad():
        ours.weight.copy_(theirs.weight)
        if ours.bias is not None:
            ours.bias.copy_(theirs.bias)


def _torch_activation(activation: Any) -> str:
    """The name of a ``nn.Transformer*`` layer's activation."""
    if activation is F.relu or isinstance(activation, nn.ReLU):
        return "relu"
    exact_gelu = isinstance(activation, nn.GELU) and (
        activation.approximate == "none"
    )
    if activation is F.gelu or exact_gelu:
        return "gelu"
    raise ValueError(
        f"module has activation={activation!r}; only relu and exact gelu "
        f"have a twin here"
    )


# --------------------------------------------------------------------------
# Normalisation
# --------------------------------------------------------------------------

_NORM_COPY = """\
Returns:
    A copy that computes the same function, in the twin's train
    or eval mode.

Raises:
    TypeError: if ``module`` is not the twin's class.
    ValueError: for a shape or affine setting this class lacks."""

_Norm = TypeVar("_Norm", bound=nn.Module)


def _copy_norm(cls: type[_Norm], module: Any, twin: type[nn.Module]) -> _Norm:
    """``cls`` with the ``eps``, weight (and bias) of ``module``."""
    _check_twin(module, twin)
    _check_norm_twin(module)
    weight = module.weight
    # nn.LayerNorm may lack its bias; nn.RMSNorm has none.
    options = {"bias": module.bias is not None} if twin is nn.LayerNorm else {}
    ours = cls(
        module.normalized_shape[0],
        eps=module.eps,
        device=weight.device,
        dtype=weight.dtype,
        **options,
    )
    with torch.no_grad():
        for name, param in ours.named_parameters():  # weight (, bias)
            param.copy_(getattr(module, name))
    return ours.train(module.training)


class LayerNorm(nn.Module):
    r"""Layer normalisation over the features of each token (Ba et al., 2016).

    .. math::

        \mathrm{LayerNorm}(x) = \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}}
        \odot \gamma + \beta

    where :math:`\mu` and :math:`\sigma^2` are the mean and the biased
    variance of the ``d_model`` features of one token (``dim=-1``), and
    :math:`\gamma` (``weight``, ones at init) and :math:`\beta` (``bias``,
    zeros) are learned. The same function as ``nn.LayerNorm(d_model)``.
    The forward pass calls PyTorch's fused kernel; inside
    :func:`explicit_norm` it computes the formula above step by step.

    Args:
        d_model: number of features normalised.
        eps: added to the variance inside the square root.
        bias: whether to learn :math:`\beta`.
        device: device of the parameters.
        dtype: dtype of the parameters.

    Shape:
        - x: ``(..., d_model)``.
        - returns the same shape.

    Example:
        >>> norm = LayerNorm(3)
        >>> norm(torch.tensor([1.0, 2.0, 3.0]))
        tensor([-1.2247,  0.0000,  1.2247], grad_fn=<NativeLayerNormBackward0>)
    """

    def __init__(
        self,
        d_model: int,
        *,
        eps: float = 1e-5,
        bias: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.d_model = check_int("d_model", d_model)
        self.eps = check_number("eps", eps, minimum=0.0, min_inclusive=False)
        dtype = check_float_dtype("dtype", dtype)
        factory: dict[str, Any] = {"device": device, "dtype": dtype}
        self.weight = nn.Parameter(torch.empty(d_model, **factory))
        if check_bool("bias", bias):
            self.bias = nn.Parameter(torch.empty(d_model, **factory))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Ones for the scale, zeros for the shift, as ``nn.LayerNorm``."""
        nn.init.ones_(self.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def extra_repr(self) -> str:
        return f"{self.d_model}, eps={self.eps}, bias={self.bias is not None}"

    def forward(self, x: Tensor) -> Tensor:
        """Normalise each token of ``x`` over its last dimension."""
        _check_features(x, self.d_model, self.weight)
        if _fused_norm:  # the same function in one kernel (explicit_norm)
            return F.layer_norm(
                x, (self.d_model,), self.weight, self.bias, self.eps
            )
        centred = x - x.mean(dim=-1, keepdim=True)  # (..., D)
        # The biased variance, as the mean square of the centred values
        # (three times faster on CPU than ``x.var`` over a short last dim).
        var = (centred * centred).mean(dim=-1, keepdim=True)  # (..., 1)
        x = centred * torch.rsqrt(var + self.eps) * self.weight
        return x if self.bias is None else x + self.bias

    @classmethod
    @shared_doc(norm_copy=_NORM_COPY)
    def from_torch(cls, module: nn.LayerNorm) -> LayerNorm:
        """Copy an ``nn.LayerNorm`` over one dimension, ``eps`` included.

        Args:
            module: an ``nn.LayerNorm`` with a one-dimensional
                ``normalized_shape`` and ``elementwise_affine=True``.

        {norm_copy}
        """
        return _copy_norm(cls, module, nn.LayerNorm)


class RMSNorm(nn.Module):
    r"""Root-mean-square normalisation (Zhang and Sennrich, 2019).

    .. math::

        \mathrm{RMSNorm}(x) = \frac{x}{\sqrt{\tfrac{1}{d}\sum_i x_i^2
        + \epsilon}} \odot \gamma

    LayerNorm without the mean subtraction and without :math:`\beta`: one
    statistic fewer per token, and the scale alone does the work. The same
    function as ``nn.RMSNorm(d_model, eps=eps)``.

    Args:
        d_model: number of features normalised.
        eps: added to the mean square; ``None`` uses the input dtype's
            machine epsilon (``torch.finfo(x.dtype).eps``), as PyTorch.
        device: device of the parameters.
        dtype: dtype of the parameters.

    Shape:
        - x: ``(..., d_model)``.
        - returns the same shape.
    """

    def __init__(
        self,
        d_model: int,
        *,
        eps: float | None = 1e-6,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.d_model = check_int("d_model", d_model)
        if eps is not None:
            eps = check_number("eps", eps, minimum=0.0, min_inclusive=False)
        self.eps = eps
        dtype = check_float_dtype("dtype", dtype)
        self.weight = nn.Parameter(
            torch.empty(d_model, device=device, dtype=dtype)
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Ones for the scale, as ``nn.RMSNorm``."""
        nn.init.ones_(self.weight)

    def extra_repr(self) -> str:
        return f"{self.d_model}, eps={self.eps}"

    def forward(self, x: Tensor) -> Tensor:
        """Divide each token of ``x`` by its root mean square."""
        _check_features(x, self.d_model)
        eps = torch.finfo(x.dtype).eps if self.eps is None else self.eps
        mean_square = x.pow(2).mean(dim=-1, keepdim=True)  # (..., 1)
        return x * torch.rsqrt(mean_square + eps) * self.weight

    @classmethod
    @shared_doc(norm_copy=_NORM_COPY)
    def from_torch(cls, module: nn.RMSNorm) -> RMSNorm:
        """Copy an ``nn.RMSNorm`` over one dimension, keeping its ``eps``.

        Args:
            module: an ``nn.RMSNorm`` with a one-dimensional
                ``normalized_shape`` and ``elementwise_affine=True``; its
                ``eps`` may be ``None``.

        {norm_copy}
        """
        return _copy_norm(cls, module, nn.RMSNorm)


def _check_features(
    x: Any, d_model: int, weight: Tensor | None = None
) -> None:
    check_tensor("x", x, floating=True)
    if x.ndim == 0 or x.shape[-1] != d_model:
        raise ValueError(
            f"x has shape {tuple(x.shape)}, expected a last dimension of "
            f"d_model={d_model}"
        )
    if weight is not None:
        check_param_dtype("x", x, weight)


def _check_norm_twin(module: nn.LayerNorm | nn.RMSNorm) -> None:
    if len(module.normalized_shape) != 1:
        raise ValueError(
            f"module normalises over {tuple(module.normalized_shape)}; only "
            f"one dimension (d_model,) is supported"
        )
    if not module.elementwise_affine:
        raise ValueError(
            "module has elementwise_affine=False, which is not supported"
        )


# --------------------------------------------------------------------------
# Feed-forward
# --------------------------------------------------------------------------


class FeedForward(nn.Module):
    r"""The position-wise feed-forward network (Vaswani et al., 2017, 3.3).

    .. math::

        \mathrm{FFN}(x) &= \phi(x W_1 + b_1) W_2 + b_2,
        \qquad \phi \in \{\mathrm{ReLU}, \mathrm{GELU}\} \\
        \mathrm{FFN}_{\mathrm{SwiGLU}}(x)
        &= (\mathrm{Swish}(x W) \odot x V) W_2

    Each token is transformed alone, by the same weights: permuting the
    tokens permutes the output. ``up_proj`` is :math:`W_1` (or :math:`V`),
    ``gate_proj`` is SwiGLU's :math:`W` (Shazeer, 2020), ``down_proj`` is
    :math:`W_2`; dropout sits after the activation, as in
    ``nn.TransformerEncoderLayer``.

    Args:
        d_model: width of the tokens in and out.
        d_ff: hidden width; for ``"swiglu"`` the width of each of the two
            branches (no 2/3 rescaling: pass it yourself to keep the
            parameter count of a ReLU block).
        dropout: dropout probability on the hidden activations.
        activation: ``"relu"``, ``"gelu"`` (exact, erf-based, as
            PyTorch's default) or ``"swiglu"``.
        bias: whether the linear maps have biases.
        device: device of the parameters.
        dtype: dtype of the parameters.

    Shape:
        - x: ``(..., d_model)``.
        - returns the same shape.

    Raises:
        ValueError: for an unknown ``activation``, or a size below 1.
    """

    def __init__(
        self,
        d_model: int,
        d_ff: int,
        *,
        dropout: float = 0.0,
        activation: str = "relu",
        bias: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.d_model = check_int("d_model", d_model)
        self.d_ff = check_int("d_ff", d_ff)
        self.activation = check_choice("activation", activation, ACTIVATIONS)
        bias = check_bool("bias", bias)
        factory: dict[str, Any] = {
            "bias": bias,
            "device": device,
            "dtype": check_float_dtype("dtype", dtype),
        }
        self.up_proj = nn.Linear(d_model, d_ff, **factory)
        self.gate_proj = (
            nn.Linear(d_model, d_ff, **factory)
            if activation == "swiglu"
            else None
        )
        self.down_proj = nn.Linear(d_ff, d_model, **factory)
        self.dropout = nn.Dropout(check_probability("dropout", dropout))

    def extra_repr(self) -> str:
        return f"activation={self.activation!r}"

    def forward(self, x: Tensor) -> Tensor:
        """Transform each token of ``x`` alone."""
        _check_features(x, self.d_model, self.up_proj.weight)
        h = self.up_proj(x)  # (..., d_ff)
        if self.gate_proj is not None:
            h = F.silu(self.gate_proj(x)) * h
        elif self.activation == "gelu":
            h = F.gelu(h)
        else:
            h = F.relu(h)
        return self.down_proj(self.dropout(h))


# --------------------------------------------------------------------------
# One layer
# --------------------------------------------------------------------------


def _layer_kwargs(module: Any) -> dict[str, Any]:
    """Constructor arguments that rebuild an ``nn.Transformer*Layer``."""
    weight = module.linear1.weight
    return {
        "d_model": module.linear1.in_features,
        "num_heads": module.self_attn.num_heads,
        "d_ff": module.linear1.out_features,
        "dropout": module.dropout.p,
        "activation": _torch_activation(module.activation),
        "norm_first": module.norm_first,
        "bias": module.linear1.bias is not None,
        "eps": module.norm1.eps,
        "device": weight.device,
        "dtype": weight.dtype,
    }


_HEADS_ARGS = """\
d_model: model width, divisible by ``num_heads``.
num_heads: number of attention heads."""

# The options every layer, stack and Transformer takes, in this order.
_BLOCK_ARGS = """\
dropout: dropout probability (training mode only).
activation: ``"relu"``, ``"gelu"`` or ``"swiglu"``.
norm_first: pre-LN when ``True``, post-LN when ``False``.
bias: whether the linear maps and the norms have biases.
eps: the norms' epsilon."""

_FACTORY_ARGS = """\
device: device of the parameters.
dtype: dtype of the parameters."""

_BLOCK_RAISES = """\
Raises:
    ValueError: if ``d_model`` is not divisible by ``num_heads``, or
        ``activation`` is unknown."""


def _args(*lines: str) -> str:
    """An ``Args:`` section of the given argument lines."""
    return "Args:\n" + textwrap.indent("\n".join(lines), "    ")


_LAYER_ARGS = _args(
    _HEADS_ARGS,
    "d_ff: hidden width of the feed-forward network.",
    _BLOCK_ARGS,
    "rotary: ``None``, or a rotary embedding of ``head_dim`` for the\n"
    "    self-attention (see\n"
    "    :class:`~transformer_book.attention.MultiHeadAttention`).",
    _FACTORY_ARGS,
)

_LAYER_COPY = """\
Args:
    module: the twin, ``batch_first`` or not, with a ReLU or exact
        GELU activation.

Returns:
    A batch-first copy that computes the same function, in the twin's
    train or eval mode.

Raises:
    TypeError: if ``module`` is not the twin's class.
    ValueError: for an activation or attention setting this class
        lacks."""

# The first four arguments of DecoderLayer.forward and Decoder.forward.
_DECODER_INPUTS = """\
Args:
    x: the target tokens.
    memory: the encoder's output.
    tgt_mask: mask of the self-attention (``True`` = may attend),
        broadcasting to ``(B, H, T, kv_len)``.
    memory_mask: mask of the cross-attention, broadcasting to
        ``(B, H, T, S)``; ``None`` reads every source position."""

_Layer = TypeVar("_Layer", bound="_TransformerLayer")


class _TransformerLayer(nn.Module):
    """What :class:`EncoderLayer` and :class:`DecoderLayer` share.

    The constructor (self-attention, cross-attention when ``_cross``, the
    feed-forward network, one norm per branch), the dropout-wrapped
    branches and the copy of a PyTorch twin.
    """

    #: Whether the layer reads an encoder's memory (cross-attention).
    _cross: ClassVar[bool] = False
    _twin: ClassVar[type[nn.Module]]

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        *,
        dropout: float = 0.0,
        activation: str = "relu",
        norm_first: bool = False,
        bias: bool = True,
        eps: float = 1e-5,
        rotary: nn.Module | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.d_model, self.num_heads = _check_heads(d_model, num_heads)
        self.norm_first = check_bool("norm_first", norm_first)
        factory: dict[str, Any] = {"device": device, "dtype": dtype}
        attn: dict[str, Any] = {"dropout": dropout, "bias": bias, **factory}
        norm: dict[str, Any] = {"eps": eps, "bias": bias, **factory}
        # Built in this order (the order of the random initialisation).
        self.self_attn = MultiHeadAttention(
            d_model, num_heads, rotary=rotary, **attn
        )
        if self._cross:
            self.cross_attn = MultiHeadAttention(d_model, num_heads, **attn)
        self.feed_forward = FeedForward(
            d_model,
            d_ff,
            dropout=dropout,
            activation=activation,
            bias=bias,
            **factory,
        )
        self.norm1 = LayerNorm(d_model, **norm)
        self.norm2 = LayerNorm(d_model, **norm)
        if self._cross:
            self.norm3 = LayerNorm(d_model, **norm)
        self.dropout = nn.Dropout(dropout)  # on each branch's output

    def _sa(
        self,
        x: Tensor,
        attn_mask: Tensor | None,
        is_causal: bool,
        need_weights: bool,
        cache: KVCache | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        out = self.self_attn(
            x,
            x,
            x,
            attn_mask,
            is_causal=is_causal,
            need_weights=need_weights,
            cache=cache,
        )
        h, weights = out if need_weights else (out, None)
        return self.dropout(h), weights

    def _ff(self, x: Tensor) -> Tensor:
        return self.dropout(self.feed_forward(x))

    @classmethod
    def _copy(cls: type[_Layer], module: Any) -> _Layer:
        """The body of ``from_torch``: ``module`` is a ``cls._twin``."""
        _check_twin(module, cls._twin)
        ours = cls(**_layer_kwargs(module))
        ours.self_attn = MultiHeadAttention.from_torch(module.self_attn)
        norms = ["norm1", "norm2"]
        if cls._cross:
            ours.cross_attn = MultiHeadAttention.from_torch(
                module.multihead_attn
            )
            norms.append("norm3")
        # linear1/linear2 of a PyTorch layer are up_proj/down_proj here.
        _copy_linear(ours.feed_forward.up_proj, module.linear1)
        _copy_linear(ours.feed_forward.down_proj, module.linear2)
        for name in norms:
            setattr(ours, name, LayerNorm.from_torch(getattr(module, name)))
        return ours.train(module.training)


@shared_doc(layer_args=_LAYER_ARGS, block_raises=_BLOCK_RAISES)
class EncoderLayer(_TransformerLayer):
    r"""Self-attention then feed-forward, each in a residual branch.

    Post-LN (``norm_first=False``, Vaswani et al., 2017) normalises after
    each residual sum; pre-LN (``norm_first=True``, Xiong et al., 2020)
    normalises the input of each branch and leaves the residual stream
    alone, which trains deep stacks without warm-up:

    .. math::

        \text{post-LN:}\quad x &\leftarrow \mathrm{LN}(x + \mathrm{SA}(x)),
        \quad x \leftarrow \mathrm{LN}(x + \mathrm{FFN}(x)) \\
        \text{pre-LN:}\quad x &\leftarrow x + \mathrm{SA}(\mathrm{LN}(x)),
        \quad x \leftarrow x + \mathrm{FFN}(\mathrm{LN}(x))

    Dropout is applied to the attention weights, inside the feed-forward
    network and to each branch's output before the sum, as in
    ``nn.TransformerEncoderLayer``. A GPT block is
    ``EncoderLayer(..., norm_first=True)`` called with ``is_causal=True``.

    {layer_args}

    Shape:
        - x: ``(B, T, d_model)``.
        - attn_mask: broadcasts to ``(B, H, T, T)``: ``(T, T)``, a padding
          mask ``(B, 1, 1, T)``, ...
        - returns ``(B, T, d_model)``; weights ``(B, H, T, T)``.

    {block_raises}
    """

    _twin = nn.TransformerEncoderLayer

    def forward(
        self,
        x: Tensor,
        attn_mask: Tensor | None = None,
        *,
        is_causal: bool = False,
        need_weights: bool = False,
        cache: KVCache | None = None,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Run the layer.

        Args:
            x: the tokens.
            attn_mask: ``None``, a boolean mask (``True`` = may attend) or
                a float bias, broadcasting to ``(B, H, T, kv_len)``.
            is_causal: also apply a causal mask (merged with
                ``attn_mask``; bottom-right aligned with a cache).
            need_weights: also return the attention weights.
            cache: the self-attention's
                :class:`~transformer_book.attention.KVCache` when
                decoding: ``x`` holds the tokens after those cached.

        Returns:
            The new tokens, or ``(tokens, weights)`` with ``need_weights``.

        Raises:
            TypeError: if ``x`` is not a float tensor.
            ValueError: if ``x`` is not ``(B, T, d_model)`` or
                ``attn_mask`` does not broadcast to ``(B, H, T, kv_len)``
                (``kv_len = T`` plus the cached positions).
        """
        weight = self.feed_forward.up_proj.weight
        batch, length, _ = _check_sequence("x", x, self.d_model, weight).shape
        shape = (batch, self.num_heads, length, _kv_len(length, cache))
        _check_mask("attn_mask", attn_mask, shape)
        w = need_weights
        if self.norm_first:
            h, weights = self._sa(
                self.norm1(x), attn_mask, is_causal, w, cache
            )
            x = x + h
            x = x + self._ff(self.norm2(x))
        else:
            h, weights = self._sa(x, attn_mask, is_causal, w, cache)
            x = self.norm1(x + h)
            x = self.norm2(x + self._ff(x))
        return x if weights is None else (x, weights)

    @classmethod
    @shared_doc(layer_copy=_LAYER_COPY)
    def from_torch(cls, module: nn.TransformerEncoderLayer) -> EncoderLayer:
        """Copy an ``nn.TransformerEncoderLayer``, weights included.

        {layer_copy}
        """
        return cls._copy(module)


@shared_doc(layer_args=_LAYER_ARGS, block_raises=_BLOCK_RAISES)
class DecoderLayer(_TransformerLayer):
    r"""Masked self-attention, cross-attention, feed-forward (Vaswani, 2017).

    The second branch lets each target token read the encoder's output
    ``memory`` (queries from the target, keys and values from the source,
    which may have another length):

    .. math::

        \text{post-LN:}\quad x &\leftarrow \mathrm{LN}(x + \mathrm{SA}(x)),
        \; x \leftarrow \mathrm{LN}(x + \mathrm{CA}(x, m)),
        \; x \leftarrow \mathrm{LN}(x + \mathrm{FFN}(x)) \\
        \text{pre-LN:}\quad x &\leftarrow x + \mathrm{SA}(\mathrm{LN}(x)),
        \; x \leftarrow x + \mathrm{CA}(\mathrm{LN}(x), m),
        \; x \leftarrow x + \mathrm{FFN}(\mathrm{LN}(x))

    The same function as ``nn.TransformerDecoderLayer``; ``rotary`` goes to
    the self-attention only (source and target positions are not
    comparable).

    {layer_args}

    Shape:
        - x: ``(B, T, d_model)``; memory: ``(B, S, d_model)``.
        - tgt_mask: broadcasts to ``(B, H, T, T)``; memory_mask:
          broadcasts to ``(B, H, T, S)`` (a source padding mask is
          ``(B, 1, 1, S)``).
        - returns ``(B, T, d_model)``; weights ``(B, H, T, T)`` and
          ``(B, H, T, S)``.

    {block_raises}
    """

    _cross = True
    _twin = nn.TransformerDecoderLayer

    @shared_doc(decoder_inputs=_DECODER_INPUTS)
    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        *,
        is_causal: bool = False,
        need_weights: bool = False,
        cache: KVCache | None = None,
    ) -> Tensor | tuple[Tensor, tuple[Tensor, Tensor]]:
        """Run the layer.

        {decoder_inputs}
            is_causal: apply a causal mask to the self-attention (merged
                with ``tgt_mask``; bottom-right aligned with a cache).
            need_weights: also return the attention weights.
            cache: the self-attention's
                :class:`~transformer_book.attention.KVCache` when
                decoding: ``x`` holds the target tokens after those
                cached. The cross-attention reads ``memory`` whole on
                every call.

        Returns:
            The new tokens, or ``(tokens, (self_weights, cross_weights))``
            with ``need_weights``.

        Raises:
            TypeError: if ``x`` or ``memory`` is not a float tensor.
            ValueError: if ``x`` or ``memory`` is not ``(B, ., d_model)``
                with the same ``B``, or a mask does not broadcast
                (``kv_len = T`` plus the cached positions).
        """
        weight = self.feed_forward.up_proj.weight
        batch, length, _ = _check_sequence("x", x, self.d_model, weight).shape
        src_len = _check_memory(memory, batch, self.d_model, weight)
        shape = (batch, self.num_heads, length, _kv_len(length, cache))
        _check_mask("tgt_mask", tgt_mask, shape)
        _check_mask("memory_mask", memory_mask, (*shape[:3], src_len))
        w = need_weights
        if self.norm_first:
            h, self_w = self._sa(self.norm1(x), tgt_mask, is_causal, w, cache)
            x = x + h
            h, cross_w = self._ca(self.norm2(x), memory, memory_mask, w)
            x = x + h
            x = x + self._ff(self.norm3(x))
        else:
            h, self_w = self._sa(x, tgt_mask, is_causal, w, cache)
            x = self.norm1(x + h)
            h, cross_w = self._ca(x, memory, memory_mask, w)
            x = self.norm2(x + h)
            x = self.norm3(x + self._ff(x))
        if self_w is None or cross_w is None:  # need_weights is False
            return x
        return x, (self_w, cross_w)

    def _ca(
        self,
        x: Tensor,
        memory: Tensor,
        memory_mask: Tensor | None,
        need_weights: bool,
    ) -> tuple[Tensor, Tensor | None]:
        out = self.cross_attn(
            x, memory, memory, memory_mask, need_weights=need_weights
        )
        h, weights = out if need_weights else (out, None)
        return self.dropout(h), weights

    @classmethod
    @shared_doc(layer_copy=_LAYER_COPY)
    def from_torch(cls, module: nn.TransformerDecoderLayer) -> DecoderLayer:
        """Copy an ``nn.TransformerDecoderLayer``, weights included.

        {layer_copy}
        """
        return cls._copy(module)


def _check_memory(
    memory: Any, batch: int, d_model: int, weight: Tensor
) -> int:
    """``memory`` must be ``(batch, S, d_model)``; return ``S``."""
    _check_sequence("memory", memory, d_model, weight)
    if memory.shape[0] != batch:
        raise ValueError(
            f"memory has batch size {memory.shape[0]}, expected {batch} "
            f"(the batch size of the target)"
        )
    return memory.shape[1]


# --------------------------------------------------------------------------
# Stacks
# --------------------------------------------------------------------------

_STACK_ARGS = _args(
    "num_layers: number of layers.",
    _HEADS_ARGS,
    "d_ff: hidden width of the feed-forward networks.",
    _BLOCK_ARGS,
    "final_norm: a :class:`LayerNorm` after the last layer; ``None`` means\n"
    "    exactly when ``norm_first`` (a pre-LN stack leaves its residual\n"
    "    stream unnormalised, a post-LN stack has just normalised it).",
    "rotary: ``None``, or one rotary embedding of ``head_dim`` shared by\n"
    "    every layer's self-attention.",
    _FACTORY_ARGS,
)

_STACK_COPY = """\
Args:
    module: the twin, whose ``norm`` is ``None`` or an
        ``nn.LayerNorm``.

Returns:
    A batch-first copy that computes the same function.

Raises:
    TypeError: if ``module`` (or its ``norm``) is not the twin's
        class.
    ValueError: for a layer setting this class lacks."""


def _final_norm(
    final_norm: bool | None, norm_first: bool, **norm: Any
) -> LayerNorm | None:
    if final_norm is None:
        final_norm = norm_first
    return LayerNorm(**norm) if check_bool("final_norm", final_norm) else None


_Stack = TypeVar("_Stack", bound="_LayerStack")


class _LayerStack(nn.Module):
    """What :class:`Encoder` and :class:`Decoder` share: the constructor.

    ``num_layers`` copies of ``_layer`` (same arguments) and the optional
    final norm; subclasses set ``_layer`` and write ``forward`` through
    :meth:`_run`.
    """

    _layer: ClassVar[type[EncoderLayer] | type[DecoderLayer]]
    _twin: ClassVar[type[nn.Module]]

    def __init__(
        self,
        num_layers: int,
        d_model: int,
        num_heads: int,
        d_ff: int,
        *,
        dropout: float = 0.0,
        activation: str = "relu",
        norm_first: bool = False,
        bias: bool = True,
        eps: float = 1e-5,
        final_norm: bool | None = None,
        rotary: nn.Module | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.num_layers = check_int("num_layers", num_layers)
        factory: dict[str, Any] = {"device": device, "dtype": dtype}
        self.layers = nn.ModuleList(
            self._layer(
                d_model, num_heads, d_ff, dropout=dropout,
                activation=activation, norm_first=norm_first, bias=bias,
                eps=eps, rotary=rotary, **factory,
            )
            for _ in range(num_layers)
        )
        self.d_model, self.num_heads = d_model, num_heads
        self.norm = _final_norm(
            final_norm, norm_first, d_model=d_model, eps=eps, bias=bias,
            **factory,
        )

    def _run(
        self,
        x: Tensor,
        step: Callable[[int, nn.Module, Tensor], Any],
        need_weights: bool,
    ) -> Tensor | tuple[Tensor, list[Any]]:
        """``x`` through every layer (``step(index, layer, x)``), then norm."""
        weights: list[Any] = []
        for index, layer in enumerate(self.layers):
            out = step(index, layer, x)
            if isinstance(out, tuple):  # need_weights
                x, w = out
                weights.append(w)
            else:
                x = out
        if self.norm is not None:
            x = self.norm(x)
        return (x, weights) if need_weights else x

    @classmethod
    def _copy(cls: type[_Stack], module: Any) -> _Stack:
        """The body of ``from_torch``: ``module`` is a ``cls._twin``."""
        _check_twin(module, cls._twin)
        if not len(module.layers):
            raise ValueError(
                f"module has no layers; {cls.__name__} needs num_layers >= 1"
            )
        layers = [cls._layer.from_torch(m) for m in module.layers]
        kwargs = _layer_kwargs(module.layers[0])
        ours = cls(len(layers), **kwargs, final_norm=module.norm is not None)
        ours.layers = nn.ModuleList(layers)
        if module.norm is not None:
            ours.norm = LayerNorm.from_torch(module.norm)
        return ours.train(module.training)


@shared_doc(stack_args=_STACK_ARGS, block_raises=_BLOCK_RAISES)
class Encoder(_LayerStack):
    """A stack of :class:`EncoderLayer` and an optional final LayerNorm.

    The same function as ``nn.TransformerEncoder`` (with or without its
    ``norm``). A pre-LN stack needs the final norm: without it the output
    is the raw residual stream, whose scale grows with depth.

    {stack_args}

    Shape:
        - x: ``(B, T, d_model)``.
        - attn_mask: broadcasts to ``(B, H, T, T)``.
        - returns ``(B, T, d_model)``; weights: a list of ``num_layers``
          tensors ``(B, H, T, T)``.

    {block_raises}
    """

    _layer = EncoderLayer
    _twin = nn.TransformerEncoder

    def forward(
        self,
        x: Tensor,
        attn_mask: Tensor | None = None,
        *,
        is_causal: bool = False,
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """Run every layer, then the final norm.

        Args:
            x: the tokens.
            attn_mask: ``None``, a boolean mask (``True`` = may attend) or
                a float bias, broadcasting to ``(B, H, T, T)``; the same
                for every layer.
            is_causal: apply a causal mask in every layer.
            need_weights: also return each layer's attention weights.

        Returns:
            The encoded tokens, or ``(tokens, weights)`` with
            ``need_weights``.

        Raises:
            TypeError: if ``x`` is not a float tensor.
            ValueError: if ``x`` is not ``(B, T, d_model)`` or
                ``attn_mask`` does not broadcast to ``(B, H, T, T)``.
        """
        return self._run(
            x,
            lambda _, layer, x: layer(
                x, attn_mask, is_causal=is_causal, need_weights=need_weights
            ),
            need_weights,
        )

    @classmethod
    @shared_doc(stack_copy=_STACK_COPY)
    def from_torch(cls, module: nn.TransformerEncoder) -> Encoder:
        """Copy an ``nn.TransformerEncoder``, with or without its ``norm``.

        {stack_copy}
        """
        return cls._copy(module)


@shared_doc(stack_args=_STACK_ARGS, block_raises=_BLOCK_RAISES)
class Decoder(_LayerStack):
    """A stack of :class:`DecoderLayer` and an optional final LayerNorm.

    The same function as ``nn.TransformerDecoder``. Every layer reads the
    same ``memory``.

    {stack_args}

    Shape:
        - x: ``(B, T, d_model)``; memory: ``(B, S, d_model)``.
        - tgt_mask: broadcasts to ``(B, H, T, T)``; memory_mask to
          ``(B, H, T, S)``.
        - returns ``(B, T, d_model)``; weights: a list of ``num_layers``
          pairs ``((B, H, T, T), (B, H, T, S))``.

    {block_raises}
    """

    _layer = DecoderLayer
    _twin = nn.TransformerDecoder

    @shared_doc(decoder_inputs=_DECODER_INPUTS)
    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        *,
        is_causal: bool = False,
        need_weights: bool = False,
        cache: Sequence[KVCache] | None = None,
    ) -> Tensor | tuple[Tensor, list[tuple[Tensor, Tensor]]]:
        """Run every layer on ``x`` and ``memory``, then the final norm.

        {decoder_inputs}
            is_causal: apply a causal mask to every self-attention
                (bottom-right aligned with a cache).
            need_weights: also return each layer's attention weights.
            cache: one :class:`~transformer_book.attention.KVCache` per
                layer when decoding step by step: ``x`` holds the target
                tokens after those cached (``kv_len`` counts both).

        Returns:
            The decoded tokens, or ``(tokens, weights)`` with
            ``need_weights``.

        Raises:
            TypeError: if ``x`` or ``memory`` is not a float tensor.
            ValueError: if ``x`` or ``memory`` is not ``(B, ., d_model)``
                with the same ``B``, a mask does not broadcast, or
                ``cache`` has not one entry per layer.
        """
        if cache is not None and len(cache) != len(self.layers):
            raise ValueError(
                f"cache has {len(cache)} entries, expected one per layer "
                f"(num_layers={len(self.layers)})"
            )
        return self._run(
            x,
            lambda index, layer, x: layer(
                x,
                memory,
                tgt_mask,
                memory_mask,
                is_causal=is_causal,
                need_weights=need_weights,
                cache=None if cache is None else cache[index],
            ),
            need_weights,
        )

    @classmethod
    @shared_doc(stack_copy=_STACK_COPY)
    def from_torch(cls, module: nn.TransformerDecoder) -> Decoder:
        """Copy an ``nn.TransformerDecoder``, with or without its ``norm``.

        {stack_copy}
        """
        return cls._copy(module)


# --------------------------------------------------------------------------
# The whole model
# --------------------------------------------------------------------------


_TRANSFORMER_ARGS = _args(
    _HEADS_ARGS,
    "num_encoder_layers: number of encoder layers.",
    "num_decoder_layers: number of decoder layers.",
    "d_ff: hidden width of the feed-forward networks.",
    _BLOCK_ARGS,
    "rotary: ``None``, or one rotary embedding of ``head_dim`` shared by\n"
    "    the self-attention of every encoder and decoder layer (the\n"
    "    cross-attention never rotates: source and target positions are\n"
    "    not comparable). ``nn.Transformer`` has no such option.",
    _FACTORY_ARGS,
)


@shared_doc(transformer_args=_TRANSFORMER_ARGS, block_raises=_BLOCK_RAISES)
class Transformer(nn.Module):
    """The encoder-decoder transformer (Vaswani et al., 2017), no embeddings.

    The twin of ``nn.Transformer``: an :class:`Encoder` and a
    :class:`Decoder`, each with a final LayerNorm whatever ``norm_first``
    (as PyTorch builds them). Embeddings, positions and the output layer
    belong to the model around it
    (``models.seq2seq.Seq2SeqTransformer``).

    As in ``nn.Transformer``, ``memory_mask=None`` lets the decoder read
    every source position, padding included: to hide source padding from
    the decoder, pass the padding mask ``(B, 1, 1, S)`` as ``memory_mask``
    too.

    {transformer_args}

    Shape:
        - src: ``(B, S, d_model)``; tgt: ``(B, T, d_model)``.
        - src_mask: broadcasts to ``(B, H, S, S)``; tgt_mask to
          ``(B, H, T, T)``; memory_mask to ``(B, H, T, S)``.
        - returns ``(B, T, d_model)``.

    {block_raises}
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        num_encoder_layers: int,
        num_decoder_layers: int,
        d_ff: int,
        *,
        dropout: float = 0.0,
        activation: str = "relu",
        norm_first: bool = False,
        bias: bool = True,
        eps: float = 1e-5,
        rotary: nn.Module | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        stack: dict[str, Any] = {
            "d_model": d_model,
            "num_heads": num_heads,
            "d_ff": d_ff,
            "dropout": dropout,
            "activation": activation,
            "norm_first": norm_first,
            "bias": bias,
            "eps": eps,
            "final_norm": True,
            "rotary": rotary,
            "device": device,
            "dtype": dtype,
        }
        check_int("num_encoder_layers", num_encoder_layers)
        check_int("num_decoder_layers", num_decoder_layers)
        self.encoder = Encoder(num_encoder_layers, **stack)
        self.decoder = Decoder(num_decoder_layers, **stack)
        self.d_model, self.num_heads = d_model, num_heads

    def forward(
        self,
        src: Tensor,
        tgt: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        *,
        tgt_is_causal: bool = False,
    ) -> Tensor:
        """Encode ``src``, then decode ``tgt`` reading the encoding.

        Args:
            src: the source tokens (embedded).
            tgt: the target tokens (embedded, shifted right).
            src_mask: mask of the encoder's self-attention (``True`` = may
                attend), broadcasting to ``(B, H, S, S)``.
            tgt_mask: mask of the decoder's self-attention.
            memory_mask: mask of the cross-attention; ``None`` reads every
                source position.
            tgt_is_causal: apply a causal mask to the decoder's
                self-attention (merged with ``tgt_mask``).

        Returns:
            The decoded target tokens.

        Raises:
            TypeError: if ``src`` or ``tgt`` is not a float tensor.
            ValueError: if a sequence is not ``(B, ., d_model)`` with one
                ``B``, or a mask does not broadcast.
        """
        memory = self.encode(src, src_mask)
        return self.decode(
            tgt, memory, tgt_mask, memory_mask, tgt_is_causal=tgt_is_causal
        )

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:
        """Run the encoder: the ``memory`` the decoder reads.

        Args:
            src: the source tokens.
            src_mask: mask of the encoder's self-attention.

        Shape:
            - src: ``(B, S, d_model)``; returns ``(B, S, d_model)``.

        Returns:
            The encoded source.
        """
        weight = next(self.encoder.parameters())
        batch, src_len, _ = _check_sequence(
            "src", src, self.d_model, weight
        ).shape
        shape = (batch, self.num_heads, src_len, src_len)
        _check_mask("src_mask", src_mask, shape)
        return self.encoder(src, src_mask)

    def decode(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        *,
        tgt_is_causal: bool = False,
    ) -> Tensor:
        """Run the decoder on ``tgt``, reading ``memory``.

        Args:
            tgt: the target tokens.
            memory: the output of :meth:`encode`.
            tgt_mask: mask of the decoder's self-attention.
            memory_mask: mask of the cross-attention; ``None`` reads every
                source position.
            tgt_is_causal: apply a causal mask to the self-attention.

        Shape:
            - tgt: ``(B, T, d_model)``; memory: ``(B, S, d_model)``;
              returns ``(B, T, d_model)``.

        Returns:
            The decoded target tokens.
        """
        weight = next(self.decoder.parameters())
        _check_sequence("tgt", tgt, self.d_model, weight)
        check_bool("tgt_is_causal", tgt_is_causal)
        return self.decoder(
            tgt, memory, tgt_mask, memory_mask, is_causal=tgt_is_causal
        )

    @classmethod
    def from_torch(cls, module: nn.Transformer) -> Transformer:
        """Copy an ``nn.Transformer``, final norms included.

        Args:
            module: the twin, ``batch_first`` or not, with its own
                ``nn.TransformerEncoder`` and ``nn.TransformerDecoder``.

        Returns:
            A batch-first ``Transformer`` that computes the same function,
            in the twin's train or eval mode.

        Raises:
            TypeError: if ``module`` (or its encoder or decoder) is not the
                twin's class.
            ValueError: for a layer setting this class lacks.
        """
        _check_twin(module, nn.Transformer)
        encoder = Encoder.from_torch(module.encoder)
        decoder = Decoder.from_torch(module.decoder)
        kwargs = _layer_kwargs(module.encoder.layers[0])
        ours = cls(
            kwargs.pop("d_model"),
            kwargs.pop("num_heads"),
            len(encoder.layers),
            len(decoder.layers),
            kwargs.pop("d_ff"),
            **kwargs,
        )
        ours.encoder, ours.decoder = encoder, decoder
        return ours.train(module.training)
