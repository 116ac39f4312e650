"""What the models share: config checks and the GPT-2 and BERT init."""

from __future__ import annotations

from typing import Any, TypeVar, cast

from torch import Tensor, nn

from .._checks import (
    check_divisible,
    check_even,
    check_instance,
    check_int,
    check_probability,
)
from ..heads import LMHead

_C = TypeVar("_C")


def check_config(config: Any, cls: type[_C]) -> _C:
    """``config`` itself, if it is a ``cls``."""
    return cast(_C, check_instance("config", config, cls))


def check_sizes(config: Any, *names: str, rotary: str = "") -> None:
    """Check a config's sizes, ``names`` the other ints; ``rotary`` names
    the field that asked for RoPE; ``d_ff=None`` becomes ``4 * d_model``."""
    for name in (*names, "d_model", "num_heads"):
        check_int(name, getattr(config, name))
    d_model, num_heads = config.d_model, config.num_heads
    check_divisible("d_model", d_model, "num_heads", num_heads)
    if rotary:
        why = f"{rotary} rotates pairs of features"
        check_even("head_dim", d_model // num_heads, why=why)
    if config.d_ff is None:  # a frozen dataclass: set once, here
        object.__setattr__(config, "d_ff", 4 * d_model)
    check_int("d_ff", config.d_ff)
    check_probability("dropout", config.dropout)


def init_normal(model: nn.Module, std: float = 0.02) -> None:
    """GPT-2's and BERT's init: linear, embedding and untied LM-head
    weights ``~ N(0, std^2)``, biases zero, chosen by module type."""
    for module in model.modules():
        if isinstance(module, (nn.Linear, nn.Embedding, LMHead)):
            if not (isinstance(module, LMHead) and module.tied):
                nn.init.normal_(module.weight, std=std)
            if isinstance(bias := getattr(module, "bias", None), Tensor):
                nn.init.zeros_(bias)
