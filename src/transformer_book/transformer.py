"""The transformer's layers and stacks, built from one :class:`Residual`;
``from_torch`` copies each twin of ``torch/nn/modules/transformer.py``."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any, ClassVar, Generic, TypeVar, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._checks import (
    check_bool,
    check_choice,
    check_int,
    check_twin,
    skip_inner_checks,
)
from .attention import KVCache, MultiHeadAttention, check_cache
from .feedforward import FeedForward
from .norm import LayerNorm
from .positional import RotaryEmbedding

__all__ = ["Decoder", "DecoderLayer", "Encoder", "EncoderLayer", "Residual",
           "Transformer"]

class Residual(nn.Module):
    r"""A sublayer with its skip connection and its norm (He et al., 2016).

    .. math::

        \text{pre-norm:}\; x + \mathrm{Dropout}(F(\mathrm{N}(x))), \qquad
        \text{post-norm:}\; \mathrm{N}(x + \mathrm{Dropout}(F(x)))

    Post-norm as in Vaswani et al. (2017), pre-norm as Xiong et al. (2020).

    Args:
        sublayer: :math:`F`; extra arguments of :meth:`forward` go to it.
        pre_norm: normalise the sublayer's input (``True``) or the sum.
    """

    def __init__(self, norm: nn.Module, sublayer: nn.Module, pre_norm: bool,
                 *, dropout: float = 0.0) -> None:
        super().__init__()
        self.norm, self.sublayer = norm, sublayer
        self.pre_norm = check_bool("pre_norm", pre_norm)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        if self.pre_norm:
            return x + self.dropout(self.sublayer(self.norm(x), *args,
                                                  **kwargs))
        return self.norm(x + self.dropout(self.sublayer(x, *args, **kwargs)))


_Self = TypeVar("_Self", bound="_Layer")
_S = TypeVar("_S", bound="_Stack[Any]")


class _Layer(nn.Module):
    """What both layers share: the constructor and the copy of a twin."""

    check_inputs = True  # False when the module around it checks them
    _cross: ClassVar[bool] = False  # reads an encoder's memory
    _twin: ClassVar[type[nn.Module]]

    def __init__(
        self, d_model: int, num_heads: int, d_ff: int, *,
        dropout: float = 0.0, activation: str = "relu",
        norm_first: bool = False, bias: bool = True, eps: float = 1e-5,
        rotary: RotaryEmbedding | None = None,
        num_kv_heads: int | None = None, qk_norm: bool = False,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.d_model, self.num_heads = d_model, num_heads
        self.norm_first = check_bool("norm_first", norm_first)
        factory: dict[str, Any] = {"device": device, "dtype": dtype}
        attention = partial(MultiHeadAttention, d_model, num_heads,
                            dropout=dropout, bias=bias, **factory)

        def residual(sublayer: nn.Module) -> Residual:
            norm = LayerNorm(d_model, eps=eps, bias=bias, **factory)
            return Residual(norm, sublayer, norm_first, dropout=dropout)

        # Built in this order: the order of the random initialisation.
        self.self_attn = residual(attention(
            num_kv_heads=num_kv_heads, rotary=rotary, qk_norm=qk_norm))
        if self._cross:  # rotary positions: in the self-attention only
            self.cross_attn = residual(attention())
        self.feed_forward = residual(FeedForward(
            d_model, d_ff, dropout=dropout, activation=activation, bias=bias,
            **factory))
        skip_inner_checks(self)

    def _attention(self, name: str) -> MultiHeadAttention:
        return cast(MultiHeadAttention, getattr(self, name).sublayer)

    @classmethod
    def from_torch(cls: type[_Self], module: Any) -> _Self:
        """Copy the ``nn.Transformer*Layer`` twin (ReLU or exact GELU)."""
        ours = cls(**_layer_kwargs(check_twin(module, cls._twin)))
        _copy_weights(ours, module)
        return ours.train(module.training)


class EncoderLayer(_Layer):
    r"""Self-attention then feed-forward, each a :class:`Residual`.

    .. math::

        \text{post-LN:}\; x \leftarrow \mathrm{LN}(x + \mathrm{SA}(x)),\;
        x \leftarrow \mathrm{LN}(x + \mathrm{FFN}(x)) \\
        \text{pre-LN:}\; x \leftarrow x + \mathrm{SA}(\mathrm{LN}(x)),\;
        x \leftarrow x + \mathrm{FFN}(\mathrm{LN}(x))

    The function of ``nn.TransformerEncoderLayer``. A GPT block is
    ``EncoderLayer(..., norm_first=True)`` called with ``is_causal=True``.

    Args:
        activation: ``"relu"``, ``"gelu"``, ``"relu2"`` or ``"swiglu"``.
        norm_first: pre-LN when ``True``, post-LN when ``False``.
        bias: whether the linear maps and the norms have biases.
        rotary: ``None`` or a rotary embedding for the self-attention.
        num_kv_heads, qk_norm: of the self-attention (see
            :class:`~transformer_book.attention.MultiHeadAttention`).

    Shape:
        x: ``(B, T, d_model)``; attn_mask broadcasts to
        ``(B, H, T, kv_len)``; returns ``(B, T, d_model)``.
    """

    _twin = nn.TransformerEncoderLayer

    def forward(
        self, x: Tensor, attn_mask: Tensor | None = None, *,
        is_causal: bool = False, cache: KVCache | None = None,
    ) -> Tensor:
        """Run the layer; ``cache`` as in ``MultiHeadAttention``."""
        if self.check_inputs:
            self.check(x, attn_mask, is_causal=is_causal, cache=cache)
        x = self.self_attn(x, attn_mask=attn_mask, is_causal=is_causal,
                           cache=cache)
        return self.feed_forward(x)

    def check(
        self, x: Tensor, attn_mask: Tensor | None = None, *,
        is_causal: bool = False, cache: KVCache | None = None,
        names: tuple[str, str] = ("x", "attn_mask"),
    ) -> None:
        """Raise unless :meth:`forward` takes these inputs."""
        self._attention("self_attn").check(
            x, x, x, attn_mask, is_causal=is_causal, cache=cache,
            names=(names[0], names[0], names[0], names[1]))



class DecoderLayer(_Layer):
    """Masked self-attention, cross-attention, feed-forward (Vaswani, 2017).

    The function of ``nn.TransformerDecoderLayer``, arguments as
    :class:`EncoderLayer`'s (``rotary`` in the self-attention only: source
    and target positions are not comparable).

    Shape:
        x: ``(B, T, d_model)``; memory: ``(B, S, d_model)``; tgt_mask
        broadcasts to ``(B, H, T, kv_len)``, memory_mask to
        ``(B, H, T, S)``; returns ``(B, T, d_model)``.
    """

    _cross = True
    _twin = nn.TransformerDecoderLayer

    def forward(
        self, x: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None, *, is_causal: bool = False,
        cache: KVCache | None = None,
    ) -> Tensor:
        """Run the layer; ``cache`` holds the self-attention's keys."""
        if self.check_inputs:
            self.check(x, memory, tgt_mask, memory_mask, is_causal=is_causal,
                       cache=cache)
        x = self.self_attn(x, attn_mask=tgt_mask, is_causal=is_causal,
                           cache=cache)
        x = self.cross_attn(x, memory, memory, memory_mask)
        return self.feed_forward(x)

    def check(
        self, x: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None, *, is_causal: bool = False,
        cache: KVCache | None = None, names: tuple[str, str] = ("x", "memory"),
    ) -> None:
        """Raise unless :meth:`forward` takes these inputs."""
        x_, m_ = names
        self._attention("self_attn").check(
            x, x, x, tgt_mask, is_causal=is_causal, cache=cache,
            names=(x_, x_, x_, "tgt_mask"))
        self._attention("cross_attn").check(
            x, memory, memory, memory_mask, names=(x_, m_, m_, "memory_mask"))



def _layer_kwargs(module: Any) -> dict[str, Any]:
    """Constructor arguments that rebuild an ``nn.Transformer*Layer``."""
    act, activation = module.activation, repr(module.activation)
    if act is F.relu or isinstance(act, nn.ReLU):
        activation = "relu"
    elif act is F.gelu or getattr(act, "approximate", "") == "none":
        activation = "gelu"  # exact GELU: nn.GELU() or F.gelu
    linear = module.linear1
    return {
        "d_model": linear.in_features, "num_heads": module.self_attn.num_heads,
        "d_ff": linear.out_features, "dropout": module.dropout.p,
        "activation": check_choice("module.activation", activation,
                                   ("relu", "gelu")),
        "norm_first": module.norm_first, "bias": linear.bias is not None,
        "eps": module.norm1.eps, "device": linear.weight.device,
        "dtype": linear.weight.dtype,
    }


def _copy_weights(ours: nn.Module, theirs: Any) -> None:
    """``theirs``' weights into ``ours``, module by module."""
    sources = {
        "self_attn.sublayer": MultiHeadAttention.from_torch(theirs.self_attn),
        "self_attn.norm": theirs.norm1,
        # linear1 and linear2 of a PyTorch layer are up_proj and down_proj
        "feed_forward.sublayer.up_proj": theirs.linear1,
        "feed_forward.sublayer.down_proj": theirs.linear2,
        "feed_forward.norm": theirs.norm2,
    }
    if isinstance(ours, DecoderLayer):
        cross = MultiHeadAttention.from_torch(theirs.multihead_attn)
        sources["cross_attn.sublayer"] = cross
        sources["cross_attn.norm"] = theirs.norm2
        sources["feed_forward.norm"] = theirs.norm3
    for name, source in sources.items():
        ours.get_submodule(name).load_state_dict(source.state_dict())


_L = TypeVar("_L", EncoderLayer, DecoderLayer)


class _Stack(nn.Module, Generic[_L]):
    """What both stacks share: ``num_layers`` layers and the final norm."""

    check_inputs = True  # False when the module around it checks them
    _layer: ClassVar[type[_Layer]]
    _twin: ClassVar[type[nn.Module]]

    def __init__(
        self, num_layers: int, d_model: int, num_heads: int, d_ff: int, *,
        final_norm: bool | None = None, norm_first: bool = False,
        eps: float = 1e-5, bias: bool = True, **options: Any,
    ) -> None:
        super().__init__()
        self.num_layers = check_int("num_layers", num_layers)
        self.d_model, self.num_heads = d_model, num_heads
        self.layers = nn.ModuleList(
            self._layer(d_model, num_heads, d_ff, norm_first=norm_first,
                        eps=eps, bias=bias, **options)
            for _ in range(num_layers)
        )
        # Pre-LN leaves the residual stream as is: a final norm by default.
        final_norm = norm_first if final_norm is None else final_norm
        self.norm = LayerNorm(
            d_model, eps=eps, bias=bias, device=options.get("device"),
            dtype=options.get("dtype"),
        ) if check_bool("final_norm", final_norm) else None
        skip_inner_checks(self)

    @property
    def first(self) -> _L:  # the layer that checks the stack's inputs
        return cast(_L, self.layers[0])

    @classmethod
    def from_torch(cls: type[_S], module: Any) -> _S:
        """Copy the ``nn.Transformer*`` twin, with or without its norm."""
        check_twin(module, cls._twin)
        num_layers = check_int("num_layers", len(module.layers))
        kwargs = _layer_kwargs(module.layers[0])
        ours = cls(num_layers, **kwargs, final_norm=module.norm is not None)
        for layer, theirs in zip(ours.layers, module.layers, strict=True):
            _copy_weights(layer, check_twin(theirs, cls._layer._twin))
        if module.norm is not None:  # its bias may differ from the layers'
            ours.norm = LayerNorm.from_torch(module.norm)
        skip_inner_checks(ours)
        return ours.train(module.training)


class Encoder(_Stack[EncoderLayer]):
    """``num_layers`` :class:`EncoderLayer`, then an optional LayerNorm:
    the function of ``nn.TransformerEncoder``.

    Args:
        num_layers: number of layers; the others as :class:`EncoderLayer`'s.
        final_norm: a LayerNorm after the last layer (``None``: if pre-LN).

    Shape:
        x: ``(B, T, d_model)``; attn_mask broadcasts to ``(B, H, T, T)``;
        returns ``(B, T, d_model)``.
    """

    _layer = EncoderLayer
    _twin = nn.TransformerEncoder

    def forward(
        self, x: Tensor, attn_mask: Tensor | None = None, *,
        is_causal: bool = False,
    ) -> Tensor:
        """Run every layer, then the final norm."""
        if self.check_inputs:
            self.first.check(x, attn_mask, is_causal=is_causal)
        for layer in self.layers:
            x = layer(x, attn_mask, is_causal=is_causal)
        return x if self.norm is None else self.norm(x)


class Decoder(_Stack[DecoderLayer]):
    """``num_layers`` :class:`DecoderLayer`, then an optional LayerNorm:
    ``nn.TransformerDecoder``; arguments as :class:`Encoder`'s.

    Shape:
        x: ``(B, T, d_model)``; memory: ``(B, S, d_model)``; masks as
        :class:`DecoderLayer`'s; returns ``(B, T, d_model)``.
    """

    _layer = DecoderLayer
    _twin = nn.TransformerDecoder

    def forward(
        self, x: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None, *, is_causal: bool = False,
        cache: Sequence[KVCache] | None = None,
    ) -> Tensor:
        """Run every layer, then the final norm; ``cache``: one
        :class:`~transformer_book.attention.KVCache` per layer."""
        if self.check_inputs:
            self.check(x, memory, tgt_mask, memory_mask, is_causal=is_causal,
                       cache=cache)
        caches = [None] * len(self.layers) if cache is None else cache
        for layer, layer_cache in zip(self.layers, caches, strict=True):
            x = layer(x, memory, tgt_mask, memory_mask, is_causal=is_causal,
                      cache=layer_cache)
        return x if self.norm is None else self.norm(x)

    def check(
        self, x: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None, *, is_causal: bool = False,
        cache: Sequence[KVCache] | None = None,
        names: tuple[str, str] = ("x", "memory"),
    ) -> None:
        """Raise unless :meth:`forward` takes these inputs."""
        check_cache(cache, len(self.layers))
        self.first.check(x, memory, tgt_mask, memory_mask, is_causal=is_causal,
                         cache=cache[0] if cache else None, names=names)


class Transformer(nn.Module):
    """The encoder-decoder transformer (Vaswani et al., 2017), no embeddings.

    The twin of ``nn.Transformer``: an :class:`Encoder` and a
    :class:`Decoder`, each with a final LayerNorm. ``memory_mask=None``
    reads every source position, padding included, as in PyTorch.

    Arguments as :class:`EncoderLayer`'s, with ``num_encoder_layers`` and
    ``num_decoder_layers`` layers.

    Shape:
        src: ``(B, S, d_model)``; tgt: ``(B, T, d_model)``; src_mask
        broadcasts to ``(B, H, S, S)``, tgt_mask to ``(B, H, T, T)``,
        memory_mask to ``(B, H, T, S)``; returns ``(B, T, d_model)``.
    """

    check_inputs = True  # False when the module around it checks them

    def __init__(
        self, d_model: int, num_heads: int, num_encoder_layers: int,
        num_decoder_layers: int, d_ff: int, **options: Any,
    ) -> None:
        super().__init__()
        sizes = (d_model, num_heads, d_ff)
        encoder_layers = check_int("num_encoder_layers", num_encoder_layers)
        decoder_layers = check_int("num_decoder_layers", num_decoder_layers)
        self.encoder = Encoder(encoder_layers, *sizes, final_norm=True,
                               **options)
        self.decoder = Decoder(decoder_layers, *sizes, final_norm=True,
                               **options)
        self.d_model, self.num_heads = d_model, num_heads
        skip_inner_checks(self)

    def forward(
        self, src: Tensor, tgt: Tensor, src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None, memory_mask: Tensor | None = None,
        *, tgt_is_causal: bool = False,
    ) -> Tensor:
        """Encode ``src``, then decode ``tgt`` reading the encoding."""
        memory = self.encode(src, src_mask)
        return self.decode(tgt, memory, tgt_mask, memory_mask,
                           tgt_is_causal=tgt_is_causal)

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:
        """Run the encoder: the ``memory`` the decoder reads."""
        if self.check_inputs:
            self.encoder.first.check(src, src_mask, names=("src", "src_mask"))
        return self.encoder(src, src_mask)

    def decode(
        self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None, *, tgt_is_causal: bool = False,
        cache: Sequence[KVCache] | None = None,
    ) -> Tensor:
        """Run the decoder on ``tgt``, reading ``memory``; ``cache``: one
        :class:`~transformer_book.attention.KVCache` per decoder layer."""
        if self.check_inputs:
            tgt_is_causal = check_bool("tgt_is_causal", tgt_is_causal)
            self.decoder.check(tgt, memory, tgt_mask, memory_mask,
                               is_causal=tgt_is_causal, cache=cache,
                               names=("tgt", "memory"))
        return self.decoder(tgt, memory, tgt_mask, memory_mask,
                            is_causal=tgt_is_causal, cache=cache)

    @classmethod
    def from_torch(cls, module: nn.Transformer) -> Transformer:
        """Copy an ``nn.Transformer``, final norms included."""
        check_twin(module, nn.Transformer)
        kwargs = _layer_kwargs(module.encoder.layers[0])
        ours = cls(kwargs.pop("d_model"), kwargs.pop("num_heads"),
                   len(module.encoder.layers), len(module.decoder.layers),
                   kwargs.pop("d_ff"), **kwargs)
        ours.encoder = Encoder.from_torch(module.encoder)
        ours.decoder = Decoder.from_torch(module.decoder)
        skip_inner_checks(ours)
        return ours.train(module.training)
