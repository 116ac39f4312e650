"""Verified checkpoints: everything a run needs to resume exactly.

A checkpoint holds the model's, optimizer's and scheduler's state, the
step, the config (under ``extra``) and the states of every random number
generator a step may draw from (PyTorch's, NumPy's, Python's and the given
``torch.Generator`` s). It is written atomically with a sha256 checksum
(``_io.save_verified``) and read with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import os
import random
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from torch.optim import Optimizer

from ._checks import check_instance, check_int
from ._io import load_verified, save_verified

__all__ = ["load_checkpoint", "random_state", "save_checkpoint",
           "set_random_state", "tokenizer_path"]

# Written into every checkpoint, so that a future layout can be told apart.
FORMAT = "transformer_book.training/1"

# What torch.load(weights_only=True) reads back, by exact type.
_PLAIN = (type(None), bool, int, float, complex, str, bytes, bytearray,
          torch.dtype, torch.device, torch.Size, Tensor, nn.Parameter)
_CONTAINERS = (list, tuple, set, dict, OrderedDict)


def expect(name: str, value: Any, ok: bool, expected: str) -> None:
    """Raise ``TypeError("{name} must be {expected}, got ...")`` unless ok."""
    if not ok:
        raise TypeError(f"{name} must be {expected}, got "
                        f"{type(value).__name__}")


def check_objects(model: Any, optimizer: Any, scheduler: Any) -> None:
    """Type checks shared by the checkpoint functions and ``fit``."""
    check_instance("model", model, (nn.Module, type(None)), "an nn.Module")
    check_instance("optimizer", optimizer, (Optimizer, type(None)),
                   "a torch.optim.Optimizer")
    expect("scheduler", scheduler, scheduler is None or all(
        callable(getattr(scheduler, name, None))
        for name in ("step", "state_dict", "load_state_dict")
    ), "a learning-rate scheduler (with step, state_dict, load_state_dict)")


def check_extra(value: Any, where: str = "extra") -> None:
    """Raise ``TypeError`` naming the key if a checkpoint cannot load it."""
    kind = type(value)
    if kind in _PLAIN:
        return
    expect(where, value, kind in _CONTAINERS, (
        "plain data that a checkpoint loads back: None, a bool, number, "
        "str, bytes, tensor, dtype or device, or a list, tuple, set or "
        "dict of them"))
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in items:
        if isinstance(value, dict):
            check_extra(key, f"a key of {where}")
        check_extra(item, f"{where}[{key!r}]")


def random_state(generators: Sequence[torch.Generator] = ()) -> dict:
    """The states of the global generators and of ``generators`` (NumPy's
    as a tensor and numbers, which ``weights_only=True`` loads)."""
    np_state = np.random.get_state(legacy=False)
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
        "numpy": {
            "key": torch.from_numpy(np_state["state"]["key"].astype(np.int64)),
            "pos": int(np_state["state"]["pos"]),
            "has_gauss": int(np_state["has_gauss"]),
            "gauss": float(np_state["gauss"])},
        "generators": [g.get_state() for g in generators]}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_random_state(state: Mapping[str, Any],
                     generators: Sequence[torch.Generator] = (), *,
                     strict: bool = True) -> None:
    """Restore what :func:`random_state` saved.

    With ``strict=False`` and no ``generators``, saved generator states are
    ignored.
    """
    saved = state.get("generators", [])
    if (strict or generators) and len(saved) != len(generators):
        raise ValueError(f"the checkpoint holds {len(saved)} generator "
                         f"state(s) but {len(generators)} generator(s) "
                         "were given to restore")
    for generator, generator_state in zip(generators, saved, strict=False):
        generator.set_state(generator_state)
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    np_state = state["numpy"]
    np.random.set_state(("MT19937", np_state["key"].numpy().astype(np.uint32),
                         np_state["pos"], np_state["has_gauss"],
                         np_state["gauss"]))
    cuda = state.get("cuda")
    if (cuda is not None and torch.cuda.is_available()
            and len(cuda) == torch.cuda.device_count()):
        torch.cuda.set_rng_state_all(cuda)


def check_generators(generators: Sequence[Any]) -> list[torch.Generator]:
    """``generators`` as a list, each checked to be a ``torch.Generator``."""
    return [check_instance(f"generators[{i}]", g, torch.Generator,
                           "a torch.Generator")
            for i, g in enumerate(generators)]


def save_checkpoint(path: str | os.PathLike[str], *, model: nn.Module,
                    optimizer: Optimizer | None = None, scheduler: Any = None,
                    step: int = 0, epoch: int = 0, history: Any = None,
                    extra: Any = None,
                    generators: Sequence[torch.Generator] = (),
                    loop: Mapping[str, Any] | None = None) -> Path:
    """Save a training state to ``path``, atomically and with a checksum.

    Args:
        path: where to write (conventionally ``*.pt``); parents are created.
        step: the number of optimizer steps done.
        epoch: the number of completed epochs.
        history: the run's :class:`~transformer_book.training.History`.
        extra: plain data to keep (the config): ``None``, bools, numbers,
            str, bytes, tensors, dtypes, devices, and containers of them.
        generators: generators to save, restored in order on loading.
        loop: where ``fit`` stands inside an epoch (set by ``fit``).
    """
    check_objects(model, optimizer, scheduler)
    expect("history", history, history is None
           or callable(getattr(history, "to_dict", None)), "a History")
    check_extra(extra)
    payload = {
        "format": FORMAT,
        "model": model.state_dict(),
        "optimizer": None if optimizer is None else optimizer.state_dict(),
        "scheduler": None if scheduler is None else scheduler.state_dict(),
        "step": check_int("step", step, minimum=0),
        "epoch": check_int("epoch", epoch, minimum=0),
        "history": None if history is None else history.to_dict(),
        "rng": random_state(check_generators(generators)),
        "loop": None if loop is None else dict(loop),
        "extra": extra}
    save_verified(Path(path), payload)
    return Path(path)


def load_checkpoint(
    path: str | os.PathLike[str], *, model: nn.Module,
    optimizer: Optimizer | None = None, scheduler: Any = None,
    generators: Sequence[torch.Generator] = (), restore_rng: bool = True,
    map_location: str | torch.device | None = "cpu",
) -> dict[str, Any]:
    """Load a checkpoint into ``model`` (and optimizer, scheduler).

    The sha256 checksum is checked before anything is read, so a damaged
    file raises one ``ValueError`` that names it. Pass the returned state
    to ``fit(resume=...)`` to continue the run exactly.

    Args:
        path: a file written by :func:`save_checkpoint` or ``fit``.
        generators: generators to restore, in the order they were saved.
        restore_rng: restore the global generators (and ``generators``).
        map_location: where tensors are loaded first.

    Returns:
        A dict of the saved state, with ``"step"``, ``"epoch"``,
        ``"history"`` (a dict, for ``History.from_dict``), ``"extra"``,
        ``"rng"``, ``"loop"``.
    """
    check_objects(model, optimizer, scheduler)
    generators = check_generators(generators)
    state = load_verified(Path(path), map_location=map_location)
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise ValueError(f"{path} is not a {FORMAT} checkpoint")
    for name, obj in (("optimizer", optimizer), ("scheduler", scheduler)):
        if obj is not None and state[name] is None:
            raise ValueError(f"{path} holds no {name} state to load")
    try:
        model.load_state_dict(state["model"])
    except RuntimeError as error:
        raise ValueError(f"{path} holds weights that do not fit "
                         f"{type(model).__name__} (a checkpoint of a "
                         f"different config?): {error}") from error
    for name, obj in (("optimizer", optimizer), ("scheduler", scheduler)):
        if obj is not None:
            obj.load_state_dict(state[name])
    if restore_rng:
        set_random_state(state["rng"], generators, strict=False)
    return state


def tokenizer_path(checkpoint: str | os.PathLike[str]) -> Path:
    """Where ``fit`` saves the tokenizer beside ``checkpoint``.

    Example:
        >>> tokenizer_path("run/gpt.pt").as_posix()
        'run/gpt.tokenizer.json'
    """
    expect("checkpoint", checkpoint,
           isinstance(checkpoint, (str, os.PathLike)), "a path")
    return Path(checkpoint).with_suffix(".tokenizer.json")
