"""What the models share: config checks, the entry check of token ids."""

from __future__ import annotations

from typing import Any, TypeVar, cast

from torch import Tensor, nn

from .._checks import (
    check_even,
    check_id_tensor,
    check_instance,
    check_int,
    check_probability,
)
from ..attention import KVCache
from ..heads import LMHead

_C = TypeVar("_C")


def check_config(config: Any, cls: type[_C]) -> _C:
    """``config`` itself, if it is a ``cls``."""
    return cast(_C, check_instance("config", config, cls))


def check_divisible(name: str, value: int, by_name: str, by: int) -> None:
    if value % by:
        raise ValueError(f"{name}={value} is not divisible by {by_name}={by}")


def check_sizes(config: Any, *names: str, rotary: str = "") -> None:
    """Check a config's sizes; ``d_ff=None`` becomes ``4 * d_model``.

    ``names`` are the other ints (>= 1); ``rotary`` names the field that
    asked for RoPE, which needs an even ``head_dim``.
    """
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


def check_pad_id(config: Any, *vocab_sizes: str) -> None:
    """``pad_id`` must be an id of every vocabulary in ``vocab_sizes``."""
    pad_id = check_int("pad_id", config.pad_id, minimum=0)
    for name in vocab_sizes:
        if pad_id >= getattr(config, name):
            raise ValueError(
                f"pad_id={pad_id} is outside the vocabulary "
                f"({name}={getattr(config, name)})"
            )


def check_ids(
    name: str, ids: Any, vocab_size: int, max_seq_len: int, cached: int = 0
) -> Tensor:
    """``(B, T)`` token ids as int64, with ``cached + T <= max_seq_len``.

    The ids are compared with the vocabulary on a CPU only: on a GPU the
    comparison would make the host wait for the device.
    """
    check_id_tensor(name, ids, vocab_size, ndim=2)
    length = ids.shape[1]
    if not 0 < length <= max_seq_len - cached:
        raise ValueError(f"{name} has no tokens" if not length else (
            f"{name} has length {length} after {cached} cached positions: "
            f"{cached + length} is more than max_seq_len={max_seq_len}"
        ))
    return ids.long()


def check_cache(cache: Any, num_layers: int) -> tuple[int, int]:
    """The position of the next token and the number of keys held."""
    if cache is None:
        return 0, 0
    if isinstance(cache, KVCache) or not all(
        isinstance(layer, KVCache) for layer in cache
    ):
        raise TypeError(
            "cache must be a sequence of KVCache, one per layer (from "
            "make_cache())"
        )
    if len(cache) != num_layers:
        raise ValueError(
            f"cache has {len(cache)} entries, expected one per layer "
            f"({num_layers})"
        )
    return cache[0].offset, len(cache[0])


def init_normal(model: nn.Module, std: float = 0.02) -> None:
    """GPT-2's and BERT's init: linear, embedding and untied LM-head
    weights ``~ N(0, std^2)``, biases zero, chosen by module type."""
    for module in model.modules():
        if isinstance(module, (nn.Linear, nn.Embedding, LMHead)):
            if not (isinstance(module, LMHead) and module.tied):
                nn.init.normal_(module.weight, std=std)
            if isinstance(bias := getattr(module, "bias", None), Tensor):
                nn.init.zeros_(bias)
