"""Argument checks: the one place each rule of the package is written.

Every public function and module validates its arguments through these
helpers, so a rule (what counts as an integer, which dropout values are
allowed, what a token id is) is stated once and every error message has the
same shape: it names the argument, the value it got and what was expected.

Each helper returns the checked value (normalised where useful: a Python
``int``, a ``float``, a list of ids), so a caller can write
``self.d_model = check_int("d_model", d_model)``.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Collection, Iterable
from typing import Any, TypeVar

import numpy as np
import torch
from torch import Tensor

__all__ = [
    "check_bool",
    "check_choice",
    "check_even",
    "check_float_dtype",
    "check_id_tensor",
    "check_int",
    "check_number",
    "check_probability",
    "check_tensor",
    "check_tensor_like",
    "check_token_ids",
]

_T = TypeVar("_T")


def _type_name(value: object) -> str:
    return type(value).__name__


def _index(value: Any, message: str) -> int:
    """``operator.index(value)``, bools refused: ``TypeError(message)``."""
    if isinstance(value, bool):
        raise TypeError(f"{message}, got bool")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{message}, got {_type_name(value)}") from None


def check_int(name: str, value: Any, *, minimum: int | None = 1) -> int:
    """Return ``value`` as an ``int`` that is at least ``minimum``.

    Bools are rejected (``True`` is an ``int`` to Python, never a size).
    Integer-like objects (``numpy.int64``, 0-d integer tensors) pass through
    ``operator.index``.

    Args:
        name: the argument's name, for the error message.
        value: the value to check.
        minimum: the smallest allowed value; ``None`` for no bound.

    Raises:
        TypeError: if ``value`` is not an integer.
        ValueError: if ``value < minimum``.
    """
    value = _index(value, f"{name} must be an int")
    if minimum is not None and value < minimum:
        expected = {0: "non-negative", 1: "positive"}.get(
            minimum, f"at least {minimum}"
        )
        raise ValueError(f"{name}={value} must be {expected}")
    return int(value)


def check_even(name: str, value: Any, *, why: str = "") -> int:
    """Return ``value`` as a positive, even ``int``.

    Args:
        name: the argument's name.
        value: the value to check.
        why: the reason, appended to the error message.

    Raises:
        TypeError: if ``value`` is not an integer.
        ValueError: if it is below 1 or odd.
    """
    value = check_int(name, value)
    if value % 2:
        reason = f": {why}" if why else ""
        raise ValueError(f"{name}={value} must be even{reason}")
    return value


def check_number(
    name: str,
    value: Any,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    min_inclusive: bool = True,
    max_inclusive: bool = True,
) -> float:
    """Return ``value`` as a finite ``float`` inside the given bounds.

    Strings, bools, NaN and infinities are rejected.

    Args:
        name: the argument's name.
        value: the value to check.
        minimum: the lower bound, or ``None``.
        maximum: the upper bound, or ``None``.
        min_inclusive: whether ``value == minimum`` is allowed.
        max_inclusive: whether ``value == maximum`` is allowed.

    Raises:
        TypeError: if ``value`` is not a real number.
        ValueError: if it is not finite or lies outside the bounds.
    """
    if isinstance(value, (bool, str, bytes)) or not isinstance(
        value, (int, float)
    ):
        # numpy scalars and 0-d tensors convert; strings never do.
        if isinstance(value, (bool, str, bytes)) or not hasattr(
            value, "__float__"
        ):
            raise TypeError(
                f"{name} must be a number, got {_type_name(value)}"
            )
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name}={value} must be finite")
    low = minimum is not None and (
        value < minimum or (value == minimum and not min_inclusive)
    )
    high = maximum is not None and (
        value > maximum or (value == maximum and not max_inclusive)
    )
    if low or high:
        left = "" if minimum is None else ("[" if min_inclusive else "(")
        right = "" if maximum is None else ("]" if max_inclusive else ")")
        if minimum is not None and maximum is not None:
            expected = f"in {left}{minimum:g}, {maximum:g}{right}"
        elif minimum is not None:
            op = ">=" if min_inclusive else ">"
            expected = f"{op} {minimum:g}"
        else:
            op = "<=" if max_inclusive else "<"
            expected = f"{op} {maximum:g}"
        raise ValueError(f"{name}={value:g} must be {expected}")
    return value


def check_probability(name: str, value: Any) -> float:
    """Return a dropout-style probability in ``[0, 1)``.

    One rule for every dropout in the package: 1 would zero every
    activation, so it is rejected.

    Raises:
        TypeError: if ``value`` is not a number.
        ValueError: if it lies outside ``[0, 1)``.
    """
    return check_number(
        name, value, minimum=0.0, maximum=1.0, max_inclusive=False
    )


def check_choice(name: str, value: _T, choices: Collection[_T]) -> _T:
    """Return ``value`` if it is one of ``choices``.

    Raises:
        ValueError: naming the allowed values.
    """
    if value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name}={value!r} must be one of {allowed}")
    return value


def check_tensor(
    name: str,
    x: Any,
    *,
    ndim: int | tuple[int, ...] | None = None,
    floating: bool = False,
) -> Tensor:
    """Return ``x`` if it is a tensor of the given rank and kind.

    Args:
        name: the argument's name.
        x: the value to check.
        ndim: the allowed number of dimensions (one or several).
        floating: require a floating dtype.

    Raises:
        TypeError: if ``x`` is not a tensor, or not floating when required.
        ValueError: if its rank is not allowed.
    """
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a Tensor, got {_type_name(x)}")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else ndim
        if x.ndim not in allowed:
            dims = " or ".join(f"{n}-D" for n in allowed)
            raise ValueError(
                f"{name} must be {dims}, got shape {tuple(x.shape)}"
            )
    if floating and not x.dtype.is_floating_point:
        raise TypeError(f"{name} must be a floating tensor, got {x.dtype}")
    return x


def check_token_ids(
    ids: Iterable[int], vocab_size: int, name: str = "ids"
) -> list[int]:
    """Return ``ids`` as a list of ints, each in ``range(vocab_size)``.

    Tensors and arrays are accepted (through ``tolist``).

    Args:
        ids: a sequence of token ids.
        vocab_size: the number of ids of the vocabulary.
        name: the argument's name, for error messages.

    Returns:
        The ids as a list of Python ints.

    Raises:
        TypeError: if ``ids`` is a string or a single int, or holds
            something that is not an int (bools included).
        ValueError: if an id is outside ``range(vocab_size)``.
    """
    if isinstance(ids, (str, bytes, int)):
        raise TypeError(
            f"{name} must be a sequence of int token ids, got "
            f"{_type_name(ids)}"
        )
    if hasattr(ids, "tolist"):  # tensors and arrays
        ids = ids.tolist()
    out = []
    for i in ids:
        i = _index(i, f"{name} must hold int token ids")
        if not 0 <= i < vocab_size:
            raise ValueError(
                f"token id {i} in {name} is outside the vocabulary "
                f"(vocab_size={vocab_size})"
            )
        out.append(i)
    return out


def check_integer_tensor(
    name: str,
    x: Any,
    what: str,
    *,
    ndim: int | tuple[int, ...] | None = None,
) -> Tensor:
    """Return ``x`` if it is a tensor of an integer dtype (not bool).

    The error reads "``name`` must hold ``what``, got ``dtype``".
    """
    check_tensor(name, x, ndim=ndim)
    if x.dtype.is_floating_point or x.dtype.is_complex or (
        x.dtype == torch.bool
    ):
        raise TypeError(f"{name} must hold {what}, got {x.dtype}")
    return x


def check_param_dtype(name: str, x: Tensor, weight: Tensor) -> None:
    """``x`` must have the dtype of ``weight``, the module's parameters.

    A float64 input and float32 weights fail deep inside a matmul, far
    from the mistake. Under ``torch.autocast`` the dtypes differ on
    purpose, and nothing is checked.
    """
    if x.dtype != weight.dtype and not torch.is_autocast_enabled(
        x.device.type
    ):
        raise TypeError(
            f"{name} has dtype {x.dtype}, but the parameters are "
            f"{weight.dtype}; convert one of them with .to()"
        )


def check_id_tensor(
    name: str,
    ids: Any,
    vocab_size: int,
    *,
    ndim: int | tuple[int, ...] | None = None,
) -> Tensor:
    """Return ``ids`` if it is an integer tensor of ids in the vocabulary.

    Args:
        name: the argument's name.
        ids: the tensor to check.
        vocab_size: the number of ids of the vocabulary.
        ndim: the allowed number of dimensions, or ``None``.

    Raises:
        TypeError: if ``ids`` is not a tensor of an integer dtype.
        ValueError: if its rank is not allowed or an id is out of range.
    """
    check_integer_tensor(name, ids, "integer token ids", ndim=ndim)
    if ids.numel():
        bad = (ids < 0) | (ids >= vocab_size)
        if bool(bad.any()):
            value = int(ids[bad][0])
            raise ValueError(
                f"token id {value} in {name} is outside the vocabulary "
                f"(vocab_size={vocab_size})"
            )
    return ids


def check_float_dtype(name: str, dtype: Any) -> torch.dtype:
    """Return a floating ``torch.dtype``; ``None`` means the default dtype.

    Args:
        name: the argument's name.
        dtype: a ``torch.dtype`` or ``None``.

    Raises:
        TypeError: if ``dtype`` is not a ``torch.dtype``, or not floating.
    """
    if dtype is None:
        return torch.get_default_dtype()
    if not isinstance(dtype, torch.dtype):
        raise TypeError(
            f"{name} must be a torch.dtype, got {_type_name(dtype)}"
        )
    if not dtype.is_floating_point:
        raise TypeError(f"{name} must be a floating dtype, got {dtype}")
    return dtype


def check_bool(name: str, value: Any) -> bool:
    """Return ``value`` as a ``bool``: only ``bool`` and ``numpy.bool_``.

    An int or a string is refused rather than read as true or false (``0``
    and ``"False"`` are a mistake here, not a flag).

    Args:
        name: the argument's name.
        value: the value to check.

    Raises:
        TypeError: if ``value`` is not a bool.
    """
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {_type_name(value)}")
    return bool(value)


def check_tensor_like(name: str, value: Any, expected: str) -> Tensor:
    """Return ``torch.as_tensor(value)``: a tensor, array or nested list.

    Strings are refused (they are sequences, but never of numbers), and so
    is anything PyTorch cannot convert (ragged lists, mixed types). The
    caller checks the rank, dtype and values it needs.

    Args:
        name: the argument's name.
        value: the value to convert.
        expected: what the caller wants, for the message (``"a sequence
            of ints"``).

    Raises:
        TypeError: ``"{name} must be {expected}, got ..."`` if ``value``
            is a string or does not convert.
    """
    if isinstance(value, (str, bytes)):
        raise TypeError(f"{name} must be {expected}, got {_type_name(value)}")
    try:
        return torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError):
        raise TypeError(f"{name} must be {expected}, got {value!r}") from None
