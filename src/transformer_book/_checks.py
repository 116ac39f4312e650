"""Argument checks, each rule written once: a helper names the argument,
what it got and what was expected, and returns the checked value."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any, TypeVar, cast

import numpy as np
import torch
from torch import Tensor, nn

__all__ = ["check_bool", "check_choice", "check_even", "check_float_dtype",
           "check_id_tensor", "check_instance", "check_int", "check_number",
           "check_probability", "check_shape", "check_tensor",
           "check_tensor_like", "check_token_ids", "check_twin"]

_T = TypeVar("_T")


def _type_name(value: object) -> str:
    return type(value).__name__


def _index(value: Any, message: str) -> int:
    """``operator.index(value)``, bools refused: ``TypeError(message)``."""
    try:
        index = None if isinstance(value, bool) else operator.index(value)
    except TypeError:
        index = None
    if index is None:
        raise TypeError(f"{message}, got {_type_name(value)}")
    return index


def check_int(name: str, value: Any, *, minimum: int | None = 1) -> int:
    """Return ``value`` as an ``int`` of at least ``minimum`` (no bools)."""
    value = _index(value, f"{name} must be an int")
    if minimum is not None and value < minimum:
        expected = {0: "non-negative", 1: "positive"}.get(minimum)
        raise ValueError(
            f"{name}={value} must be {expected or f'at least {minimum}'}")
    return int(value)


def check_even(name: str, value: Any, *, why: str = "") -> int:
    """Return ``value`` as a positive, even ``int``; ``why`` says why."""
    value = check_int(name, value)
    if value % 2:
        raise ValueError(f"{name}={value} must be even{': ' * bool(why)}{why}")
    return value


def check_number(name: str, value: Any, *, minimum: float | None = None,
                 maximum: float | None = None, min_inclusive: bool = True,
                 max_inclusive: bool = True) -> float:
    """Return ``value`` as a finite ``float`` within the bounds (strings
    and bools refused; numpy scalars and 0-d tensors convert)."""
    if isinstance(value, (bool, str, bytes)) or not hasattr(value,
                                                            "__float__"):
        raise TypeError(f"{name} must be a number, got {_type_name(value)}")
    value = float(value)
    low = minimum is not None and (
        value < minimum or (value == minimum and not min_inclusive))
    high = maximum is not None and (
        value > maximum or (value == maximum and not max_inclusive))
    if low or high or not math.isfinite(value):
        left, right = "[(" [not min_inclusive], "])"[not max_inclusive]
        if not math.isfinite(value):
            expected = "finite"
        elif minimum is not None and maximum is not None:
            expected = f"in {left}{minimum:g}, {maximum:g}{right}"
        elif minimum is not None:
            expected = f"{'>=' if min_inclusive else '>'} {minimum:g}"
        else:
            expected = f"{'<=' if max_inclusive else '<'} {maximum:g}"
        raise ValueError(f"{name}={value:g} must be {expected}")
    return value


def check_probability(name: str, value: Any) -> float:
    """Return a dropout probability in ``[0, 1)`` (1 would drop all)."""
    return check_number(name, value, minimum=0.0, maximum=1.0,
                        max_inclusive=False)


def check_divisible(name: str, value: int, by_name: str, by: int) -> None:
    """``value`` (the argument ``name``) must be a multiple of ``by``."""
    if value % by:
        raise ValueError(f"{name}={value} is not divisible by {by_name}={by}")


def check_choice(name: str, value: _T, choices: Collection[_T]) -> _T:
    """Return ``value`` if it is one of ``choices``."""
    if value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name}={value!r} must be one of {allowed}")
    return value


def check_bool(name: str, value: Any) -> bool:
    """Return ``value`` as a ``bool``; ints and strings are refused."""
    return bool(check_instance(name, value, (bool, np.bool_), "a bool"))


def check_instance(name: str, value: Any, cls: type | tuple[type, ...],
                   what: str = "") -> Any:
    """Return ``value`` if it is an instance of ``cls`` (``what`` it is)."""
    if not isinstance(value, cls):
        what = what or f"a {getattr(cls, '__name__', cls)}"
        raise TypeError(f"{name} must be {what}, got {_type_name(value)}")
    return value


def check_tensor(name: str, x: Any, *,
                 ndim: int | tuple[int, ...] | None = None,
                 floating: bool = False) -> Tensor:
    """Return ``x`` if it is a tensor of the given rank (and floating)."""
    if not isinstance(x, Tensor) or (floating
                                     and not x.dtype.is_floating_point):
        got = x.dtype if isinstance(x, Tensor) else _type_name(x)
        kind = "a floating tensor" if floating else "a Tensor"
        raise TypeError(f"{name} must be {kind}, got {got}")
    allowed = (ndim,) if isinstance(ndim, int) else ndim
    if allowed is not None and x.ndim not in allowed:
        dims = " or ".join(f"{n}-D" for n in allowed)
        raise ValueError(f"{name} must be {dims}, got shape {tuple(x.shape)}")
    return x


def check_shape(name: str, x: Any, shape: Sequence[int | None], what: str, *,
                like: Tensor | None = None) -> Tensor:
    """Return ``x`` if it is a floating tensor of ``shape`` (``None``: any
    size; ``what`` describes it), with ``like``'s dtype."""
    check_tensor(name, x, ndim=len(shape), floating=True)
    if like is not None:
        check_param_dtype(name, x, like)
    pairs = zip(shape, x.shape, strict=True)
    if any(s is not None and s != n for s, n in pairs):
        expected = ", ".join("*" if s is None else str(s) for s in shape)
        raise ValueError(f"{name} has shape {tuple(x.shape)}, expected {what} "
                         f"= ({expected})")
    return x


def check_features(name: str, x: Any, size: int, what: str = "d_model", *,
                   ndim: int | None = None,
                   like: Tensor | None = None) -> Tensor:
    """Return ``x`` if it is a floating tensor ``(..., size)`` (``what``
    names ``size``), with ``like``'s dtype."""
    check_tensor(name, x, ndim=ndim, floating=True)
    shape = (*x.shape[:-1], size)
    return check_shape(name, x, shape, f"(..., {what}={size})", like=like)


def check_param_dtype(name: str, x: Tensor, weight: Tensor,
                      what: str = "the parameters are") -> None:
    """``x`` must have the dtype of ``weight`` (unless under autocast)."""
    if (x.dtype != weight.dtype
            and not torch.is_autocast_enabled(x.device.type)):
        raise TypeError(f"{name} has dtype {x.dtype}, but {what} "
                        f"{weight.dtype}; convert one of them with .to()")


def check_float_dtype(name: str, dtype: Any) -> torch.dtype:
    """Return a floating ``torch.dtype``; ``None`` is the default dtype."""
    if dtype is None:
        return torch.get_default_dtype()
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"{name} must be a floating dtype, got {dtype!r}")
    return dtype


def check_integer_tensor(name: str, x: Any, what: str, *,
                         ndim: int | tuple[int, ...] | None = None) -> Tensor:
    """Return ``x`` if it is a tensor of an integer dtype (not bool)."""
    check_tensor(name, x, ndim=ndim)
    if x.dtype.is_floating_point or x.dtype.is_complex or (
            x.dtype == torch.bool):
        raise TypeError(f"{name} must hold {what}, got {x.dtype}")
    return x


def check_id_tensor(name: str, ids: Any, vocab_size: int, *,
                    ndim: int | tuple[int, ...] | None = None) -> Tensor:
    """Return ``ids`` if it is an integer tensor of ids in the vocabulary;
    the values are checked on a CPU only (elsewhere it would wait for the
    device at every call)."""
    check_integer_tensor(name, ids, "integer token ids", ndim=ndim)
    if ids.numel() and ids.device.type == "cpu":
        bad = (ids < 0) | (ids >= vocab_size)
        if bad.any():
            raise ValueError(
                f"token id {int(ids[bad][0])} in {name} is outside the "
                f"vocabulary (vocab_size={vocab_size})")
    return ids


def check_ids(name: str, ids: Any, vocab_size: int,
              max_seq_len: int | None = None, cached: int = 0) -> Tensor:
    """``(B, T)`` token ids, ``T >= 1``, as int64 (with ``max_seq_len``:
    ``cached + T <= max_seq_len``); the values as :func:`check_id_tensor`."""
    check_id_tensor(name, ids, vocab_size, ndim=2)
    length = ids.shape[1]
    too_long = max_seq_len is not None and cached + length > max_seq_len
    if not length or too_long:
        raise ValueError(
            f"{name} has no tokens (shape {tuple(ids.shape)})" if not length
            else f"{name} has length {length} after {cached} cached positions:"
            f" {cached + length} is more than max_seq_len={max_seq_len}")
    return ids.long()


def check_vocab_id(config: Any, name: str, *vocab_sizes: str) -> None:
    """``config.<name>`` must be an id of each vocabulary ``vocab_sizes``."""
    value = check_int(name, getattr(config, name), minimum=0)
    for vocab in vocab_sizes:
        if value >= getattr(config, vocab):
            raise ValueError(f"{name}={value} is outside the vocabulary "
                             f"({vocab}={getattr(config, vocab)})")


def check_token_ids(ids: Iterable[int], vocab_size: int,
                    name: str = "ids") -> list[int]:
    """Return ``ids`` (a sequence, tensor or array) as a list of ints, each
    in ``range(vocab_size)``."""
    if isinstance(ids, (str, bytes, int)):
        raise TypeError(f"{name} must be a sequence of int token ids, got "
                        f"{_type_name(ids)}")
    ids = ids.tolist() if hasattr(ids, "tolist") else ids
    out = [_index(i, f"{name} must hold int token ids") for i in ids]
    for i in out:
        if not 0 <= i < vocab_size:
            raise ValueError(f"token id {i} in {name} is outside the "
                             f"vocabulary (vocab_size={vocab_size})")
    return out


def check_tensor_like(name: str, value: Any, expected: str) -> Tensor:
    """Return ``torch.as_tensor(value)``; strings and ragged lists fail."""
    try:
        text = isinstance(value, (str, bytes))
        tensor = None if text else torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError):
        tensor = None
    if tensor is None:
        got = _type_name(value) if text else repr(value)
        raise TypeError(f"{name} must be {expected}, got {got}")
    return tensor


def check_twin(module: Any, twin: type,
               unsupported: Callable[[Any], dict[str, bool]] = lambda _: {}
              ) -> Any:
    """Return ``module`` if it is a ``twin`` that ``from_torch`` copies
    exactly: ``unsupported(module)`` maps each setting this package lacks
    (as the reader would write it) to whether ``module`` has it."""
    check_instance("module", module, twin, f"a torch.nn.{twin.__name__}")
    found = [what for what, present in unsupported(module).items() if present]
    if found:
        raise ValueError(f"module has {', '.join(found)}, which this class "
                         "does not support")
    return module


def skip_inner_checks(parent: nn.Module) -> None:
    """Turn off the input checks (``check_inputs``) of the modules inside
    ``parent``, which checks their inputs at its entry."""
    for module in parent.modules():
        if module is not parent and hasattr(module, "check_inputs"):
            cast(Any, module).check_inputs = False
