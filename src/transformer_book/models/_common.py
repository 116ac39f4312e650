"""What the three models share: input checks, masks and initialisation."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import torch
from torch import Tensor, nn

from .._checks import check_id_tensor, check_int, check_probability
from ..heads import LMHead
from ..layers import Encoder

_C = TypeVar("_C")


# The first lines of the GPT and encoder configs' Args (shared_doc).
VOCAB_ARGS = """
vocab_size: token ids are in ``range(vocab_size)``.
max_seq_len: the longest sequence the model accepts (and the size
    of the learned position table).
"""


@dataclass(frozen=True)
class ModelSizes:
    """The first fields of the GPT and encoder configs, in their order.

    A base class so that both write them once, and check them in
    :meth:`__post_init__`; each config documents them, adds its own fields
    after them and checks those after calling ``super().__post_init__()``.
    """

    vocab_size: int
    max_seq_len: int
    d_model: int
    num_heads: int
    num_layers: int
    d_ff: int | None = None
    dropout: float = 0.0

    def __post_init__(self) -> None:
        """Check the sizes and ``dropout``; resolve ``d_ff=None``."""
        check_model_sizes(self, "vocab_size", "num_layers")
        resolve_d_ff(self)
        check_probability("dropout", self.dropout)


def check_config(config: Any, cls: type[_C]) -> _C:
    """``config`` must be a ``cls``: a ``TypeError`` naming both if not."""
    if not isinstance(config, cls):
        name = cls.__name__
        article = "an" if name[0] in "AEIOU" else "a"
        raise TypeError(
            f"config must be {article} {name}, got {type(config).__name__}"
        )
    return config


def gelu_encoder(config: Any, *, norm_first: bool, **options: Any) -> Encoder:
    """The GELU :class:`~transformer_book.layers.Encoder` a config sizes.

    Reads ``num_layers``, ``d_model``, ``num_heads``, ``d_ff`` (resolved)
    and ``dropout`` from ``config``; ``options`` (``final_norm``, ``bias``,
    ``rotary``) go to the ``Encoder``. The BERT-style encoder and the ViT
    use the stack, GPT its ``layers`` (its blocks).
    """
    return Encoder(
        config.num_layers,
        config.d_model,
        config.num_heads,
        resolved_d_ff(config),
        dropout=config.dropout,
        activation="gelu",
        norm_first=norm_first,
        **options,
    )


def check_model_sizes(config: Any, *names: str) -> None:
    """Check the sizes every config has, plus ``names`` (all ints >= 1).

    Also checks that ``num_heads`` divides ``d_model``.
    """
    for name in ("max_seq_len", "d_model", "num_heads", *names):
        check_int(name, getattr(config, name))
    if config.d_model % config.num_heads:
        raise ValueError(
            f"d_model={config.d_model} is not divisible by "
            f"num_heads={config.num_heads}"
        )


def check_rotary_head_dim(config: Any, setting: str) -> None:
    """RoPE rotates pairs of features: the head width must be even.

    ``setting`` names the config field that asked for RoPE, as the user
    wrote it (``"positional='rope'"``, ``"rotary=True"``).
    """
    head_dim = config.d_model // config.num_heads
    if head_dim % 2:
        raise ValueError(
            f"{setting} needs an even head_dim, got d_model="
            f"{config.d_model} // num_heads={config.num_heads} = {head_dim}"
        )


def resolve_d_ff(config: Any) -> None:
    """Replace ``d_ff=None`` by ``4 * d_model`` on a frozen config."""
    if config.d_ff is None:
        # Frozen dataclass: __post_init__ is the one place that may set it.
        object.__setattr__(config, "d_ff", 4 * config.d_model)
    check_int("d_ff", config.d_ff)


def resolved_d_ff(config: Any) -> int:
    """``config.d_ff``, an int once ``__post_init__`` has run."""
    return cast(int, config.d_ff)


def check_pad_id(config: Any, *vocab_sizes: str) -> None:
    """``pad_id`` must be an id of every vocabulary in ``vocab_sizes``."""
    pad_id = check_int("pad_id", config.pad_id, minimum=0)
    for name in vocab_sizes:
        limit = getattr(config, name)
        if pad_id >= limit:
            raise ValueError(
                f"pad_id={pad_id} is outside the vocabulary ({name}={limit})"
            )


def check_sequences(
    name: str, ids: Any, vocab_size: int, max_seq_len: int
) -> Tensor:
    """A ``(B, T)`` integer tensor of ids in the vocabulary, ``T`` in range.

    Any integer dtype is accepted; the ids are returned as ``int64``, which
    ``nn.Embedding`` needs (no copy when they already are).

    Raises:
        TypeError: if ``ids`` is not an integer tensor.
        ValueError: if it is not 2-D or empty in time, an id is outside the
            vocabulary, or ``T > max_seq_len`` (both numbers named).
    """
    check_id_tensor(name, ids, vocab_size, ndim=2)
    length = ids.shape[1]
    if length == 0:
        raise ValueError(f"{name} has no tokens (shape {tuple(ids.shape)})")
    if length > max_seq_len:
        raise ValueError(
            f"{name} has length {length}, longer than "
            f"max_seq_len={max_seq_len}"
        )
    return ids.long()


def key_padding_mask(ids: Tensor, pad_id: int) -> Tensor:
    """``(B, 1, 1, T)`` bool mask, ``True`` where ``ids`` is a real token."""
    return (ids != pad_id)[:, None, None, :]  # (B, T) -> (B, 1, 1, T)


def init_normal(model: nn.Module, std: float = 0.02) -> None:
    """GPT-2 and BERT's initialisation, chosen by module type.

    Every ``nn.Linear`` and ``nn.Embedding`` weight, and an untied
    :class:`~transformer_book.heads.LMHead` weight, is drawn from
    ``N(0, std^2)``; their biases start at zero. Norms keep their ones and
    zeros. Parameters on the ``meta`` device hold no values and are
    skipped (counting a model there then costs no initialisation time).
    """
    for module in model.modules():
        weight = getattr(module, "weight", None)
        if isinstance(weight, Tensor) and weight.is_meta:
            continue
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=std)
        elif isinstance(module, LMHead) and not module.tied:
            nn.init.normal_(module.weight, std=std)
        if isinstance(module, (nn.Linear, LMHead)) and (
            module.bias is not None
        ):
            nn.init.zeros_(module.bias)


def scale_residual_projections(
    projections: list[nn.Linear], num_layers: int, std: float = 0.02
) -> None:
    """GPT-2's scaled init: residual output weights ``~ N(0, std^2/(2L))``.

    Each of the ``2 L`` sublayers adds its output to the residual stream;
    scaling their last projection by ``1/sqrt(2L)`` keeps the stream's
    variance at initialisation independent of depth (Radford et al., 2019,
    section 2.3).
    """
    for proj in projections:
        if proj.weight.is_meta:  # no values to draw
            continue
        with torch.no_grad():
            nn.init.normal_(proj.weight, std=std / math.sqrt(2 * num_layers))
