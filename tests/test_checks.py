"""The argument checks of ``transformer_book._checks``, one table.

Each case calls one helper on one value: a good value comes back
normalised (a Python ``int``, a ``float``, a list of ids, the same tensor),
a bad value raises the right exception with a message that names the
argument (every case below calls it ``arg``, or ``ids`` for the id checks)
and says what was expected. A helper added to ``_checks`` needs cases
here: ``test_every_helper_has_cases`` fails until it has.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch

from transformer_book import _checks
from transformer_book._checks import (
    check_bool,
    check_choice,
    check_even,
    check_float_dtype,
    check_id_tensor,
    check_instance,
    check_int,
    check_number,
    check_probability,
    check_shape,
    check_tensor,
    check_tensor_like,
    check_token_ids,
    check_twin,
)

T = torch.tensor([1.0, 2.0])
IDS = torch.tensor([[0, 4], [2, 1]])
RELU = torch.nn.ReLU()


@dataclass(frozen=True)
class Case:
    """``helper(*args, **kwargs)`` returns ``result`` or raises ``error``."""

    helper: Any
    args: tuple
    kwargs: dict | None = None
    result: Any = None
    error: type[Exception] | None = None
    match: str = ""

    def __repr__(self) -> str:  # the test id
        shown = ", ".join(repr(a)[:24] for a in self.args[1:])
        outcome = self.error.__name__ if self.error else "ok"
        return f"{self.helper.__name__}({shown})-{outcome}"


def ok(helper, *args, result, **kwargs):
    return Case(helper, args, kwargs, result=result)


def bad(helper, *args, error, match, **kwargs):
    return Case(helper, args, kwargs, error=error, match=match)


CASES = [
    # check_int: ints and integer-likes normalised to int; bools, floats
    # and strings rejected; the minimum (default 1) enforced.
    ok(check_int, "arg", 3, result=3),
    ok(check_int, "arg", np.int64(7), result=7),
    ok(check_int, "arg", torch.tensor(5), result=5),
    ok(check_int, "arg", 0, minimum=0, result=0),
    ok(check_int, "arg", -9, minimum=None, result=-9),
    bad(check_int, "arg", True, error=TypeError, match="arg must be an int"),
    bad(check_int, "arg", 2.0, error=TypeError, match="arg must be an int"),
    bad(check_int, "arg", "3", error=TypeError, match="arg must be an int"),
    bad(check_int, "arg", None, error=TypeError, match="arg must be an int"),
    bad(check_int, "arg", 0, error=ValueError, match="arg=0 must be positive"),
    bad(check_int, "arg", -1, minimum=0, error=ValueError,
        match="arg=-1 must be non-negative"),
    bad(check_int, "arg", 2, minimum=3, error=ValueError,
        match="arg=2 must be at least 3"),
    # check_even
    ok(check_even, "arg", 8, result=8),
    bad(check_even, "arg", 7, why="sin and cos pairs", error=ValueError,
        match="arg=7 must be even: sin and cos pairs"),
    bad(check_even, "arg", 0, error=ValueError, match="arg=0"),
    bad(check_even, "arg", 4.0, error=TypeError, match="arg must be an int"),
    # check_number: finite reals as float; bounds open or closed.
    ok(check_number, "arg", 3, result=3.0),
    ok(check_number, "arg", np.float32(0.5), result=0.5),
    ok(check_number, "arg", 0.0, minimum=0.0, result=0.0),
    ok(check_number, "arg", 1.0, maximum=1.0, result=1.0),
    bad(check_number, "arg", "0.5", error=TypeError,
        match="arg must be a number, got str"),
    bad(check_number, "arg", False, error=TypeError,
        match="arg must be a number, got bool"),
    bad(check_number, "arg", None, error=TypeError, match="arg must be"),
    bad(check_number, "arg", math.nan, error=ValueError,
        match="arg=nan must be finite"),
    bad(check_number, "arg", -math.inf, error=ValueError,
        match="arg=-inf must be finite"),
    bad(check_number, "arg", 0.0, minimum=0.0, min_inclusive=False,
        error=ValueError, match=r"arg=0 must be > 0"),
    bad(check_number, "arg", 2.0, minimum=0.0, maximum=1.0,
        error=ValueError, match=r"arg=2 must be in \[0, 1\]"),
    bad(check_number, "arg", 1.0, maximum=1.0, max_inclusive=False,
        error=ValueError, match="arg=1 must be < 1"),
    # check_probability: the one dropout rule, [0, 1).
    ok(check_probability, "arg", 0, result=0.0),
    ok(check_probability, "arg", 0.999, result=0.999),
    bad(check_probability, "arg", 1.0, error=ValueError,
        match=r"arg=1 must be in \[0, 1\)"),
    bad(check_probability, "arg", -0.1, error=ValueError, match="arg=-0.1"),
    bad(check_probability, "arg", "0.1", error=TypeError,
        match="arg must be a number"),
    # check_choice
    ok(check_choice, "arg", "b", ("a", "b"), result="b"),
    bad(check_choice, "arg", "c", ("a", "b"), error=ValueError,
        match="arg='c' must be one of 'a', 'b'"),
    # check_tensor: the same tensor back; rank and floating checked.
    ok(check_tensor, "arg", T, ndim=1, floating=True, result=T),
    ok(check_tensor, "arg", IDS, ndim=(1, 2), result=IDS),
    bad(check_tensor, "arg", [1.0, 2.0], error=TypeError,
        match="arg must be a Tensor, got list"),
    bad(check_tensor, "arg", T, ndim=2, error=ValueError,
        match=r"arg must be 2-D, got shape \(2,\)"),
    bad(check_tensor, "arg", IDS, ndim=(1, 3), error=ValueError,
        match="arg must be 1-D or 3-D"),
    bad(check_tensor, "arg", IDS, floating=True, error=TypeError,
        match="arg must be a floating tensor, got torch.int64"),
    # check_token_ids: any sequence of ints (tensors, arrays) as a list.
    ok(check_token_ids, [0, 4, 2], 5, result=[0, 4, 2]),
    ok(check_token_ids, torch.tensor([1, 2]), 5, result=[1, 2]),
    ok(check_token_ids, np.array([3], dtype=np.int16), 5, result=[3]),
    ok(check_token_ids, (), 5, result=[]),
    bad(check_token_ids, "abc", 5, error=TypeError,
        match="ids must be a sequence of int token ids, got str"),
    bad(check_token_ids, 3, 5, error=TypeError, match="ids must be a seq"),
    bad(check_token_ids, [1, True], 5, error=TypeError,
        match="ids must hold int token ids, got bool"),
    bad(check_token_ids, [1.0], 5, error=TypeError,
        match="ids must hold int token ids, got float"),
    bad(check_token_ids, [0, 5], 5, error=ValueError,
        match=r"token id 5 in ids is outside the vocabulary \(vocab_size=5"),
    bad(check_token_ids, [-1], 5, error=ValueError, match="token id -1 in"),
    # check_id_tensor: an integer tensor of ids in the vocabulary.
    ok(check_id_tensor, "ids", IDS, 5, ndim=2, result=IDS),
    ok(check_id_tensor, "ids", torch.empty(0, dtype=torch.long), 5,
       result=None),  # empty: nothing to check
    bad(check_id_tensor, "ids", IDS.float(), 5, error=TypeError,
        match="ids must hold integer token ids, got torch.float32"),
    bad(check_id_tensor, "ids", IDS.bool(), 5, error=TypeError,
        match="ids must hold integer token ids, got torch.bool"),
    bad(check_id_tensor, "ids", IDS, 4, error=ValueError,
        match=r"token id 4 in ids is outside the vocabulary \(vocab_size=4"),
    bad(check_id_tensor, "ids", IDS, 5, ndim=1, error=ValueError,
        match="ids must be 1-D"),
    bad(check_id_tensor, "ids", [0, 1], 5, error=TypeError,
        match="ids must be a Tensor"),
    # check_float_dtype: a floating dtype; None means the default one.
    ok(check_float_dtype, "arg", torch.float64, result=torch.float64),
    ok(check_float_dtype, "arg", None, result=torch.get_default_dtype()),
    bad(check_float_dtype, "arg", torch.long, error=TypeError,
        match="arg must be a floating dtype, got torch.int64"),
    bad(check_float_dtype, "arg", "float32", error=TypeError,
        match="arg must be a floating dtype, got 'float32'"),
    ok(check_float_dtype, "arg", torch.float16, result=torch.float16),
    bad(check_float_dtype, "arg", torch.bool, error=TypeError,
        match="arg must be a floating dtype, got torch.bool"),
    # check_bool: bools (numpy's too) as a Python bool; 0, 1 and strings
    # are refused, not read as flags.
    ok(check_bool, "arg", False, result=False),
    ok(check_bool, "arg", np.bool_(True), result=True),
    bad(check_bool, "arg", 1, error=TypeError,
        match="arg must be a bool, got int"),
    bad(check_bool, "arg", "False", error=TypeError,
        match="arg must be a bool, got str"),
    bad(check_bool, "arg", None, error=TypeError,
        match="arg must be a bool, got NoneType"),
    # check_instance: the value back, or a TypeError saying what it is.
    ok(check_instance, "arg", T, torch.Tensor, result=T),
    bad(check_instance, "arg", 3, str, error=TypeError,
        match="arg must be a str, got int"),
    bad(check_instance, "arg", None, (int, float), "a number",
        error=TypeError, match="arg must be a number, got NoneType"),
    # check_shape: a floating tensor of a shape (None: any size).
    ok(check_shape, "arg", T, (None,), "(N,)", result=T),
    ok(check_shape, "arg", T, (2,), "(N,)", like=T, result=T),
    bad(check_shape, "arg", T, (3,), "(N,)", error=ValueError,
        match=r"arg has shape \(2,\), expected \(N,\) = \(3\)"),
    bad(check_shape, "arg", T, (2, None), "(N, M)", error=ValueError,
        match="arg must be 2-D"),
    bad(check_shape, "arg", T, (2,), "(N,)", like=T.double(),
        error=TypeError, match="arg has dtype torch.float32, but the param"),
    bad(check_shape, "arg", IDS, (2, 2), "(N, N)", error=TypeError,
        match="arg must be a floating tensor"),
    # check_twin: a PyTorch module that from_torch copies exactly.
    ok(check_twin, RELU, torch.nn.ReLU,
       lambda m: {"inplace=True": m.inplace}, result=RELU),
    bad(check_twin, torch.nn.ReLU(), torch.nn.GELU, error=TypeError,
        match="module must be a torch.nn.GELU, got ReLU"),
    bad(check_twin, torch.nn.ReLU(inplace=True), torch.nn.ReLU,
        lambda m: {"inplace=True": m.inplace}, error=ValueError,
        match="module has inplace=True, which this class does not"),
    # check_tensor_like: what torch.as_tensor converts; never a string.
    ok(check_tensor_like, "arg", T, "numbers", result=T),
    bad(check_tensor_like, "arg", "12", "numbers", error=TypeError,
        match="arg must be numbers, got str"),
    bad(check_tensor_like, "arg", [[1], [2, 3]], "numbers", error=TypeError,
        match=r"arg must be numbers, got \[\[1\], \[2, 3\]\]"),
]


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_check(case):
    kwargs = case.kwargs or {}
    if case.error is not None:
        with pytest.raises(case.error, match=case.match):
            case.helper(*case.args, **kwargs)
        return
    value = case.helper(*case.args, **kwargs)
    if isinstance(case.result, torch.Tensor):
        assert value is case.result  # checked, not copied
    elif case.result is None:
        assert value is case.args[1]
    else:
        assert value == case.result
        # Normalised to the plain Python type (not numpy, not a tensor).
        assert type(value) is type(case.result)


def test_every_helper_has_cases():
    tested = {case.helper.__name__ for case in CASES}
    for kind in ("ok", "bad"):
        cases = {
            case.helper.__name__
            for case in CASES
            if (case.error is None) == (kind == "ok")
        }
        assert set(_checks.__all__) <= cases, (kind, tested)
