"""Training: one loop for every model of the book, and atomic checkpoints.

A model trains through :func:`train`, whatever its forward returns: the
caller writes a ``step(batch)`` function that returns the loss (or the loss
and a dictionary of metrics), and the loop does the rest: ``zero_grad``,
``backward``, optional gradient clipping, ``optimizer.step`` and
``scheduler.step``, a tqdm progress bar, evaluation, checkpoints, and a
:class:`History` of everything it measured, ready to plot.

Checkpoints (:func:`save_checkpoint`, :func:`load_checkpoint`) are written
atomically (a temporary file in the same directory, then a rename), carry
a sha256 checksum that loading checks, and hold the random number
generators' states (PyTorch's, NumPy's and Python's), so that a run stopped
after any step, even in the middle of an epoch of shuffled batches,
resumes exactly: the losses after resuming equal those of the run that
never stopped.

Example:
    >>> import torch
    >>> from torch import nn
    >>> _ = torch.manual_seed(0)
    >>> model = nn.Linear(3, 1)
    >>> count_parameters(model)
    4
    >>> x, y = torch.randn(8, 3), torch.randn(8, 1)
    >>> def step(batch):
    ...     inputs, targets = batch
    ...     return nn.functional.mse_loss(model(inputs), targets)
    >>> optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    >>> history = train(step, [(x, y)], optimizer, epochs=20, progress=False)
    >>> len(history.losses), history.steps[-1]
    (20, 20)
    >>> history.losses[-1] < history.losses[0]
    True
"""

from __future__ import annotations

import contextlib
import copy
import math
import os
import random
import time
from collections import OrderedDict
from collections.abc import (
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
    Sized,
)
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR
from tqdm import tqdm

from transformer_book._checks import (
    check_int,
    check_integer_tensor,
    check_number,
    check_tensor,
)
from transformer_book._io import load_verified, save_verified

__all__ = [
    "History",
    "WarmupCosine",
    "count_parameters",
    "cross_entropy",
    "load_checkpoint",
    "save_checkpoint",
    "tokenizer_path",
    "train",
    "warmup_cosine",
]

#: What a step function returns: the loss, or the loss and its metrics.
StepOutput = Tensor | tuple[Tensor, Mapping[str, Any]]

# Written into every checkpoint, so that a future layout can be told apart.
_FORMAT = "transformer_book.training/1"


def _check_optimizer(optimizer: Any) -> None:
    if not isinstance(optimizer, Optimizer):
        raise TypeError(
            f"optimizer must be a torch.optim.Optimizer, got "
            f"{type(optimizer).__name__}"
        )


def _check_module(name: str, module: Any) -> None:
    if not isinstance(module, nn.Module):
        raise TypeError(
            f"{name} must be an nn.Module, got {type(module).__name__}"
        )


def _check_scheduler(scheduler: Any) -> None:
    if scheduler is not None and not all(
        callable(getattr(scheduler, name, None))
        for name in ("step", "state_dict", "load_state_dict")
    ):
        raise TypeError(
            "scheduler must be a learning-rate scheduler (with step, "
            f"state_dict and load_state_dict), got {type(scheduler).__name__}"
        )


# --------------------------------------------------------------------------
# Counting parameters
# --------------------------------------------------------------------------


def count_parameters(module: nn.Module, *, trainable_only: bool = True) -> int:
    """Return the number of parameters of ``module``.

    A parameter shared by several submodules (tied embeddings) is counted
    once, as ``module.parameters()`` yields it once.

    Args:
        module: the model or layer.
        trainable_only: count only parameters with ``requires_grad``.

    Returns:
        The number of scalar parameters.

    Raises:
        TypeError: if ``module`` is not an ``nn.Module``.
    """
    _check_module("module", module)
    return sum(
        p.numel()
        for p in module.parameters()
        if p.requires_grad or not trainable_only
    )


# --------------------------------------------------------------------------
# The learning-rate schedule
# --------------------------------------------------------------------------


class WarmupCosine:
    """Learning-rate factor: linear warmup, then a cosine decay.

    A callable class rather than a lambda, so that ``LambdaLR.state_dict``
    saves it and a checkpoint restores it. For scheduler step ``s`` (the
    number of ``scheduler.step()`` calls so far), with ``W`` warmup steps,
    ``T`` total steps and ``r`` the final ratio:

    ::

        f(s) = (s + 1) / (W + 1)                     if s < W
        f(s) = r + (1 - r) (1 + cos(pi p)) / 2       otherwise,
               with p = min(1, (s - W) / (T - W))

    The first step already moves the weights (``f(0) > 0``), the factor is
    1 at the end of the warmup, reaches ``r`` at step ``T`` and stays there
    (Loshchilov and Hutter, 2017, without restarts; Goyal et al., 2017, for
    the warmup).

    Args:
        warmup_steps: steps of linear warmup ``W`` (0 for none).
        total_steps: the step ``T`` at which the factor reaches
            ``min_lr_ratio``; usually the number of optimizer steps.
        min_lr_ratio: the final factor ``r``, in ``[0, 1]``.

    Raises:
        TypeError: if an argument is not a number.
        ValueError: if ``warmup_steps >= total_steps`` or ``min_lr_ratio``
            is outside ``[0, 1]``.
    """

    def __init__(
        self, *, warmup_steps: int, total_steps: int, min_lr_ratio: float = 0.0
    ) -> None:
        self.warmup_steps = check_int("warmup_steps", warmup_steps, minimum=0)
        self.total_steps = check_int("total_steps", total_steps)
        if self.warmup_steps >= self.total_steps:
            raise ValueError(
                f"warmup_steps={self.warmup_steps} must be less than "
                f"total_steps={self.total_steps}"
            )
        self.min_lr_ratio = check_number(
            "min_lr_ratio", min_lr_ratio, minimum=0.0, maximum=1.0
        )

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return (step + 1) / (self.warmup_steps + 1)
        progress = (step - self.warmup_steps) / (
            self.total_steps - self.warmup_steps
        )
        cosine = 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
        return self.min_lr_ratio + (1.0 - self.min_lr_ratio) * cosine

    def __repr__(self) -> str:
        return (
            f"WarmupCosine(warmup_steps={self.warmup_steps}, "
            f"total_steps={self.total_steps}, "
            f"min_lr_ratio={self.min_lr_ratio})"
        )


def warmup_cosine(
    optimizer: Optimizer,
    *,
    warmup_steps: int,
    total_steps: int,
    min_lr_ratio: float = 0.0,
) -> LambdaLR:
    """Return a ``LambdaLR`` with linear warmup and cosine decay.

    Each parameter group's learning rate is its initial ``lr`` times
    :class:`WarmupCosine`'s factor. :func:`train` calls ``scheduler.step()``
    after every optimizer step, so ``total_steps`` counts optimizer steps.

    Args:
        optimizer: the optimizer whose learning rates the schedule sets.
        warmup_steps: steps of linear warmup (0 for none).
        total_steps: the step at which the rate reaches its minimum.
        min_lr_ratio: the final rate as a fraction of the initial one.

    Returns:
        The scheduler; its ``state_dict`` round-trips through checkpoints.

    Raises:
        TypeError: if ``optimizer`` is not an optimizer, or a number is not
            one.
        ValueError: as for :class:`WarmupCosine`.

    Example:
        >>> import torch
        >>> p = torch.nn.Parameter(torch.zeros(1))
        >>> opt = torch.optim.SGD([p], lr=1.0)
        >>> sched = warmup_cosine(opt, warmup_steps=3, total_steps=10)
        >>> [round(sched.lr_lambdas[0](s), 3) for s in (0, 3, 10)]
        [0.25, 1.0, 0.0]
    """
    _check_optimizer(optimizer)
    factor = WarmupCosine(
        warmup_steps=warmup_steps,
        total_steps=total_steps,
        min_lr_ratio=min_lr_ratio,
    )
    return LambdaLR(optimizer, factor)


# --------------------------------------------------------------------------
# History
# --------------------------------------------------------------------------


@dataclass
class History:
    """What a training run measured, in lists that plot directly.

    Per-step lists line up with :attr:`steps` and per-evaluation lists with
    :attr:`eval_steps`; a metric that a step or an evaluation did not return
    is recorded as NaN there, so the lists stay aligned (matplotlib leaves a
    gap). ``plt.plot(history.steps, history.losses)`` draws the curve.

    Attributes:
        steps: the global step number of each optimizer step, from 1.
        losses: the training loss of each step.
        lrs: the learning rate of the first parameter group at each step.
        metrics: the step function's metrics, by name, one value per step
            (``"grad_norm"``, the norm before clipping, when clipping).
        epoch_losses: the mean training loss of each completed epoch.
        eval_steps: the global step after which each evaluation ran.
        eval_metrics: the evaluation results, by name (a single number is
            recorded as ``"loss"``).
    """

    steps: list[int] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    lrs: list[float] = field(default_factory=list)
    metrics: dict[str, list[float]] = field(default_factory=dict)
    epoch_losses: list[float] = field(default_factory=list)
    eval_steps: list[int] = field(default_factory=list)
    eval_metrics: dict[str, list[float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Return the history as plain lists and dicts (for checkpoints)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> History:
        """Rebuild a history from :meth:`to_dict`'s output.

        Raises:
            TypeError: if ``data`` is not a mapping.
            ValueError: if it has keys that a history does not.
        """
        if not isinstance(data, Mapping):
            raise TypeError(
                f"history must be a mapping, got {type(data).__name__}"
            )
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"history has unknown keys {sorted(unknown)}")
        return cls(**copy.deepcopy(dict(data)))

    def _record(
        self, step: int, loss: float, lr: float, metrics: Mapping[str, float]
    ) -> None:
        self.steps.append(step)
        self.losses.append(loss)
        self.lrs.append(lr)
        _append_aligned(self.metrics, metrics, len(self.steps))

    def _record_eval(self, step: int, results: Mapping[str, float]) -> None:
        self.eval_steps.append(step)
        _append_aligned(self.eval_metrics, results, len(self.eval_steps))


def _append_aligned(
    table: dict[str, list[float]], values: Mapping[str, float], length: int
) -> None:
    """Append ``values`` to ``table``'s lists, padding gaps with NaN."""
    for name, value in values.items():
        table.setdefault(name, [math.nan] * (length - 1)).append(value)
    for column in table.values():
        if len(column) < length:
            column.append(math.nan)


def _as_metrics(name: str, values: Any) -> dict[str, float]:
    """Return ``values`` (a mapping of numbers) as ``{str: float}``."""
    if not isinstance(values, Mapping):
        raise TypeError(
            f"{name} must be a dict of numbers, got {type(values).__name__}"
        )
    out = {}
    for key, value in values.items():
        if not isinstance(key, str):
            raise TypeError(f"{name} keys must be str, got {key!r}")
        if isinstance(value, Tensor):
            if value.numel() != 1:
                raise ValueError(
                    f"{name}[{key!r}] must be a single number, got a "
                    f"tensor of shape {tuple(value.shape)}"
                )
            value = value.item()
        if isinstance(value, (bool, str, bytes)) or not hasattr(
            value, "__float__"
        ):
            raise TypeError(
                f"{name}[{key!r}] must be a number, got "
                f"{type(value).__name__}"
            )
        out[key] = float(value)
    return out


# --------------------------------------------------------------------------
# Random number generators
# --------------------------------------------------------------------------


def _rng_state(generators: Sequence[torch.Generator]) -> dict[str, Any]:
    """Return the states of every generator a training step may draw from.

    NumPy's state is stored as a tensor and plain numbers, so that the
    checkpoint loads with ``torch.load(weights_only=True)``.
    """
    np_state = np.random.get_state(legacy=False)
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
        "numpy": {
            "key": torch.from_numpy(
                np_state["state"]["key"].astype(np.int64)
            ),
            "pos": int(np_state["state"]["pos"]),
            "has_gauss": int(np_state["has_gauss"]),
            "gauss": float(np_state["gauss"]),
        },
        "generators": [g.get_state() for g in generators],
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(
    state: Mapping[str, Any],
    generators: Sequence[torch.Generator],
    *,
    strict: bool = True,
) -> None:
    """Restore what :func:`_rng_state` (or an epoch snapshot) saved.

    The saved generator states are restored into ``generators`` in order;
    with no ``generators`` and ``strict=False`` they are ignored.
    """
    saved = state.get("generators", [])
    if (strict or generators) and len(saved) != len(generators):
        raise ValueError(
            f"the checkpoint holds {len(saved)} generator state(s) but "
            f"{len(generators)} generator(s) were given to restore"
        )
    for generator, generator_state in zip(generators, saved, strict=False):
        generator.set_state(generator_state)
    torch.set_rng_state(state["torch"])
    if "python" in state:
        random.setstate(state["python"])
    if "numpy" in state:
        np_state = state["numpy"]
        np.random.set_state(
            (
                "MT19937",
                np_state["key"].numpy().astype(np.uint32),
                np_state["pos"],
                np_state["has_gauss"],
                np_state["gauss"],
            )
        )
    cuda = state.get("cuda")
    if cuda is not None and torch.cuda.is_available():
        if len(cuda) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(cuda)


def _find_generators(
    batches: Any, extra: Sequence[torch.Generator]
) -> list[torch.Generator]:
    """Return the generators that shuffle ``batches``, each once.

    A ``DataLoader`` keeps one as ``generator``, and its sampler (or its
    batch sampler's sampler) may hold another.
    """
    found: list[Any] = [getattr(batches, "generator", None)]
    for owner in (batches, getattr(batches, "batch_sampler", None)):
        sampler = getattr(owner, "sampler", None)
        found.append(getattr(sampler, "generator", None))
    for i, generator in enumerate(extra):
        if not isinstance(generator, torch.Generator):
            raise TypeError(
                f"generators[{i}] must be a torch.Generator, got "
                f"{type(generator).__name__}"
            )
    found.extend(extra)
    unique: list[torch.Generator] = []
    for generator in found:
        if isinstance(generator, torch.Generator) and not any(
            generator is g for g in unique
        ):
            unique.append(generator)
    return unique


# --------------------------------------------------------------------------
# Checkpoints
# --------------------------------------------------------------------------


def _atomic_save(payload: Any, path: Path) -> None:
    """``torch.save`` with a checksum, atomically (see ``_io``)."""
    save_verified(path, payload)


# What torch.load(weights_only=True) reads back, by exact type.
_PLAIN = (
    type(None), bool, int, float, complex, str, bytes, bytearray,
    torch.dtype, torch.device, torch.Size, Tensor, nn.Parameter,
)
_CONTAINERS = (list, tuple, set, dict, OrderedDict)


def _check_extra(value: Any, where: str = "extra") -> None:
    """Raise ``TypeError`` if a checkpoint could not load ``value`` back."""
    kind = type(value)
    if kind in _PLAIN:
        return
    if kind not in _CONTAINERS:
        raise TypeError(
            f"{where} is a {kind.__name__}, which a checkpoint cannot load "
            "back: expected None, a bool, number, str, bytes, tensor, "
            "dtype or device, or a list, tuple, set or dict of them"
        )
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in items:
        if isinstance(value, dict):
            _check_extra(key, f"a key of {where}")
        _check_extra(item, f"{where}[{key!r}]")


def _payload(
    *,
    model: nn.Module,
    optimizer: Optimizer | None,
    scheduler: Any,
    step: int,
    epoch: int,
    history: History | None,
    extra: Any,
    generators: Sequence[torch.Generator],
    loop: Mapping[str, Any] | None,
) -> dict[str, Any]:
    _check_module("model", model)
    if optimizer is not None:
        _check_optimizer(optimizer)
    _check_scheduler(scheduler)
    if history is not None and not isinstance(history, History):
        raise TypeError(
            f"history must be a History, got {type(history).__name__}"
        )
    return {
        "format": _FORMAT,
        "model": model.state_dict(),
        "optimizer": None if optimizer is None else optimizer.state_dict(),
        "scheduler": None if scheduler is None else scheduler.state_dict(),
        "step": check_int("step", step, minimum=0),
        "epoch": check_int("epoch", epoch, minimum=0),
        "history": (history or History()).to_dict(),
        "rng": _rng_state(_find_generators(None, generators)),
        "loop": None if loop is None else dict(loop),
        "extra": extra,
    }


def save_checkpoint(
    path: str | os.PathLike[str],
    *,
    model: nn.Module,
    optimizer: Optimizer | None = None,
    scheduler: Any = None,
    step: int = 0,
    epoch: int = 0,
    history: History | None = None,
    extra: Any = None,
    generators: Sequence[torch.Generator] = (),
) -> Path:
    """Save a training state to ``path``, atomically.

    The file is written beside ``path`` under a temporary name and renamed
    over it, so ``path`` holds either the previous checkpoint or the new
    one, never half of one. Parent directories are created. Besides the
    given objects' ``state_dict``s, the checkpoint holds the states of
    PyTorch's (CPU and CUDA), Python's and NumPy's global generators and of
    ``generators``.

    Args:
        path: where to write (conventionally ``*.pt``).
        model: the model.
        optimizer: its optimizer, if training is to resume.
        scheduler: its learning-rate scheduler.
        step: the number of optimizer steps done.
        epoch: the number of completed epochs.
        history: the run's history so far.
        extra: anything else to keep: plain data (``None``, bools,
            numbers, strings, bytes, tensors, dtypes, devices, and lists,
            tuples, sets and dicts of them), which loads back with
            ``weights_only=True``.
        generators: generators to save, such as the one that shuffles a
            ``DataLoader``; :func:`load_checkpoint` restores them in order.

    Returns:
        ``path`` as a ``Path``.

    Raises:
        TypeError: if an argument has the wrong type, or ``extra`` holds
            something else than plain data (the message names its key).
        ValueError: if ``step`` or ``epoch`` is negative.
    """
    path = Path(path)
    _check_extra(extra)
    payload = _payload(
        model=model,
        optimizer=optimizer,
        scheduler=scheduler,
        step=step,
        epoch=epoch,
        history=history,
        extra=extra,
        generators=generators,
        loop=None,
    )
    _atomic_save(payload, path)
    return path


def load_checkpoint(
    path: str | os.PathLike[str],
    *,
    model: nn.Module,
    optimizer: Optimizer | None = None,
    scheduler: Any = None,
    generators: Sequence[torch.Generator] = (),
    restore_rng: bool = True,
    map_location: str | torch.device | None = "cpu",
) -> dict[str, Any]:
    """Load a checkpoint into ``model`` (and optimizer, scheduler).

    The file is read with ``torch.load(weights_only=True)``: a checkpoint
    cannot run code. Its sha256 checksum is checked first, so a damaged
    file raises the one ``ValueError`` below and never loads silently.
    Pass the returned state to ``train(resume=...)`` to continue the run
    exactly where it stopped.

    Args:
        path: the checkpoint written by :func:`save_checkpoint` or
            :func:`train`.
        model: the model to load the weights into.
        optimizer: the optimizer to restore, if any.
        scheduler: the scheduler to restore, if any.
        generators: generators to restore, in the order they were saved
            (none: saved generator states are not restored).
        restore_rng: whether to restore the global generators' states
            (and ``generators``) as they were when the checkpoint was saved.
        map_location: where tensors are loaded first; ``load_state_dict``
            then copies them to the model's and optimizer's devices.

    Returns:
        The saved state, a dict with the keys ``"step"``, ``"epoch"``,
        ``"history"`` (a :class:`History`), ``"extra"``, and ``"rng"`` and
        ``"loop"``, which :func:`train` reads to resume.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        TypeError: if an argument has the wrong type.
        ValueError: if the file is damaged (empty, truncated, altered: its
            checksum does not match) or is not a checkpoint of this module
            (the message names the file and what is wrong), its weights do
            not fit ``model``, or it lacks an optimizer or scheduler state
            that was asked for.
    """
    _check_module("model", model)
    if optimizer is not None:
        _check_optimizer(optimizer)
    _check_scheduler(scheduler)
    generators = _find_generators(None, generators)
    state = load_verified(Path(path), map_location=map_location)
    if not isinstance(state, dict) or state.get("format") != _FORMAT:
        raise ValueError(f"{path} is not a {_FORMAT} checkpoint")
    for name, obj in (("optimizer", optimizer), ("scheduler", scheduler)):
        if obj is not None and state[name] is None:
            raise ValueError(f"{path} holds no {name} state to load")
    try:
        model.load_state_dict(state["model"])
    except RuntimeError as error:
        raise ValueError(
            f"{path} holds weights that do not fit {type(model).__name__} "
            f"(a checkpoint of a different config?): {error}"
        ) from error
    if optimizer is not None:
        optimizer.load_state_dict(state["optimizer"])
    if scheduler is not None:
        scheduler.load_state_dict(state["scheduler"])
    if restore_rng:
        _set_rng_state(state["rng"], generators, strict=False)
    state["history"] = History.from_dict(state["history"])
    return state


def tokenizer_path(checkpoint: str | os.PathLike[str]) -> Path:
    """Return where :func:`train` saves the tokenizer beside ``checkpoint``.

    The checkpoint's path with the suffix ``.tokenizer.json``: ``run/gpt.pt``
    gives ``run/gpt.tokenizer.json``. Load it with
    :func:`transformer_book.tokenization.load_tokenizer`.

    Example:
        >>> tokenizer_path("run/gpt.pt").as_posix()
        'run/gpt.tokenizer.json'
    """
    if not isinstance(checkpoint, (str, os.PathLike)):
        raise TypeError(
            f"checkpoint must be a path, got {type(checkpoint).__name__}"
        )
    return Path(checkpoint).with_suffix(".tokenizer.json")


def cross_entropy(
    logits: Tensor,
    targets: Tensor,
    *,
    label_smoothing: float = 0.0,
    ignore_index: int = -100,
) -> Tensor:
    """Mean cross-entropy of ``logits`` against ``targets``, any batch shape.

    The classes are the last dimension of ``logits``; every other dimension
    is flattened, so a language model's ``(B, T, V)`` logits and ``(B, T)``
    targets need no reshaping. With ``label_smoothing`` :math:`\\varepsilon`,
    the target distribution puts :math:`1 - \\varepsilon` on the true class
    and spreads :math:`\\varepsilon` evenly over all :math:`V` classes
    (Szegedy et al., 2016), as in :func:`torch.nn.functional.cross_entropy`,
    which computes it. Positions whose target is ``ignore_index`` (padding)
    count neither in the sum nor in the mean.

    Args:
        logits: unnormalised scores.
        targets: class indices.
        label_smoothing: the probability mass spread over all classes, in
            ``[0, 1)``.
        ignore_index: the target value to skip.

    Shape:
        - logits: ``(..., V)``
        - targets: ``(...)``, any integer dtype

    Returns:
        The scalar mean loss.

    Raises:
        ValueError: if the shapes do not match or ``label_smoothing`` is
            outside ``[0, 1)``.

    Example:
        >>> logits = torch.tensor([[[2.0, 0.0], [0.0, 2.0]]])
        >>> targets = torch.tensor([[0, 1]])
        >>> round(cross_entropy(logits, targets).item(), 4)
        0.1269
        >>> smooth = cross_entropy(logits, targets, label_smoothing=0.2)
        >>> round(smooth.item(), 4)
        0.3269
    """
    logits = check_tensor("logits", logits, floating=True)
    targets = check_integer_tensor(
        "targets", targets, "class indices (an integer dtype)"
    )
    if logits.ndim < 2 or logits.shape[:-1] != targets.shape:
        raise ValueError(
            "logits must have shape targets.shape + (V,), got logits "
            f"{tuple(logits.shape)} and targets {tuple(targets.shape)}"
        )
    label_smoothing = check_number(
        "label_smoothing", label_smoothing, minimum=0.0, maximum=1.0,
        max_inclusive=False,
    )
    # (..., V) -> (N, V) and (...) -> (N,)
    return nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]),
        targets.reshape(-1).long(),
        ignore_index=ignore_index,
        label_smoothing=label_smoothing,
    )


def _autocast_context(
    autocast: bool | None, params: Sequence[Tensor]
) -> Any:
    """Return the context that ``step`` runs in: bf16 autocast, or none.

    ``None`` turns autocast on only for parameters on CUDA: there bfloat16
    is fast on every recent GPU, while on a CPU it is fast only on
    processors with bfloat16 instructions (AMX, AVX-512 BF16).
    """
    device_type = params[0].device.type if params else "cpu"
    enabled = device_type == "cuda" if autocast is None else autocast
    if not enabled:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device_type, dtype=torch.bfloat16)


# --------------------------------------------------------------------------
# The loop
# --------------------------------------------------------------------------


def _split_output(output: Any) -> tuple[Tensor, dict[str, float]]:
    """Return ``(loss, metrics)`` from what a step function returned."""
    metrics: Any = {}
    if isinstance(output, tuple):
        if len(output) != 2:
            raise ValueError(
                "step must return a loss or (loss, metrics), got a tuple "
                f"of {len(output)}"
            )
        output, metrics = output
    loss = check_tensor("the loss returned by step", output, floating=True)
    if loss.ndim != 0:
        raise ValueError(
            "the loss returned by step must be a scalar, got shape "
            f"{tuple(loss.shape)}"
        )
    return loss, _as_metrics("the metrics returned by step", metrics)


# Marks an exhausted iterator in next(iterator, _END).
_END = object()


@dataclass
class _Position:
    """Where a run is: what a checkpoint needs to continue it exactly."""

    step: int = 0  # optimizer steps done
    epoch: int = 0  # epochs completed
    batch_in_epoch: int = 0  # batches of the current epoch done
    # Generator states when the current epoch's iterator was created.
    epoch_rng: dict[str, Any] | None = None
    saved: tuple[int, int] = (-1, -1)  # (step, epoch) last checkpointed

    def loop_state(self) -> dict[str, Any]:
        return {
            "batch_in_epoch": self.batch_in_epoch,
            "epoch_rng": self.epoch_rng,
        }


def _resume(
    state: Mapping[str, Any], generators: Sequence[torch.Generator]
) -> tuple[History, _Position]:
    """Return the history and position saved in ``state``; restore rng."""
    if not isinstance(state, Mapping):
        raise TypeError(
            "resume must be the state returned by load_checkpoint, got "
            f"{type(state).__name__}"
        )
    history = state["history"]
    if not isinstance(history, History):
        history = History.from_dict(history)
    loop = state.get("loop") or {}
    at = _Position(
        step=state["step"],
        epoch=state["epoch"],
        batch_in_epoch=loop.get("batch_in_epoch", 0),
        epoch_rng=loop.get("epoch_rng"),
    )
    if at.batch_in_epoch and at.epoch_rng is None:
        raise ValueError("resume state lacks the interrupted epoch's rng")
    _set_rng_state(state["rng"], generators)
    return copy.deepcopy(history), at


def _start_epoch(
    batches: Any, at: _Position, generators: Sequence[torch.Generator]
) -> tuple[Any, Iterator[Any]]:
    """Return epoch ``at.epoch``'s batches and the iterator over the rest.

    A new epoch records the generators' states before its iterator draws
    a shuffle order. After a mid-epoch resume, those recorded states are
    restored to draw the same order again, the batches already done are
    skipped, and the current states are put back.
    """
    skip = at.batch_in_epoch
    if skip:
        assert at.epoch_rng is not None
        current = _rng_state(generators)
        _set_rng_state(at.epoch_rng, generators)
    else:  # every generator that batches(epoch) may draw from
        at.epoch_rng = _rng_state(generators)
    source = batches(at.epoch) if callable(batches) else batches
    iterator = iter(source)
    for done in range(skip):
        if next(iterator, _END) is _END:
            raise ValueError(
                f"resume expects {skip} batches done in epoch {at.epoch}, "
                f"but the epoch has {done}"
            )
    if skip:
        _set_rng_state(current, generators)
    return source, iterator


def _epoch_over(
    source: Any,
    iterator: Iterator[Any],
    done: int,
    generators: Sequence[torch.Generator],
) -> bool:
    """Whether ``done`` batches are all of ``source``'s (when stopping).

    A sized ``source`` tells by its length; otherwise ``iterator`` is
    asked for one more batch, and the generators' states are put back.
    """
    with contextlib.suppress(TypeError):  # len() of an IterableDataset's
        if isinstance(source, Sized):
            return done >= len(source)
    state = _rng_state(generators)
    over = next(iterator, _END) is _END
    _set_rng_state(state, generators)
    return over


def _throughput(
    tokens_per_batch: int | Callable[[Any], int], batch: Any, started: float
) -> float:
    """Tokens per second of the step that began at ``started``."""
    seconds = time.perf_counter() - started
    if callable(tokens_per_batch):
        tokens = check_int(
            "tokens_per_batch(batch)", tokens_per_batch(batch), minimum=0
        )
    else:
        tokens = tokens_per_batch
    return tokens / seconds if seconds > 0 else math.inf


def _distributed() -> tuple[int, int]:
    """``(rank, world_size)`` of this process; ``(0, 1)`` when alone.

    Read from ``torch.distributed`` when a process group is initialized
    (as under ``torchrun``), so that the loop needs no argument for it.
    """
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _unwrap(model: nn.Module) -> nn.Module:
    """The module inside a ``DistributedDataParallel`` (or ``model``)."""
    inner = getattr(model, "module", None)
    if isinstance(model, nn.parallel.DistributedDataParallel) and isinstance(
        inner, nn.Module
    ):
        return inner
    return model


def _micro_batches(batch: Any, accumulate: int) -> Sequence[Any]:
    """The micro-batches of one optimizer step."""
    if accumulate == 1:
        return [batch]
    if not isinstance(batch, Sequence) or len(batch) != accumulate:
        raise ValueError(
            f"with accumulate={accumulate}, every batch must be a sequence "
            f"of {accumulate} micro-batches, got "
            + (
                f"{len(batch)}"
                if isinstance(batch, Sequence)
                else type(batch).__name__
            )
        )
    return batch


def _update(
    step: Callable[[Any], StepOutput],
    batch: Any,
    optimizer: Optimizer,
    scheduler: Any,
    params: list[Tensor],
    clip_grad_norm: float | None,
    autocast: Any,
    accumulate: int = 1,
    model: nn.Module | None = None,
) -> tuple[float, float, dict[str, float]]:
    """One optimizer step on ``batch``; return its loss, lr and metrics.

    With ``accumulate > 1``, ``batch`` holds that many micro-batches: each
    loss, divided by ``accumulate``, is back-propagated in turn, so the
    gradients add up to those of the micro-batches' mean loss. A DDP
    ``model`` synchronizes its gradients only on the last one. In a
    distributed run the returned loss and metrics are averaged over the
    processes.
    """
    optimizer.zero_grad(set_to_none=True)
    micro = _micro_batches(batch, accumulate)
    no_sync = getattr(model, "no_sync", None)
    losses, metrics_list = [], []
    for i, micro_batch in enumerate(micro):
        last = i == len(micro) - 1
        sync = (
            contextlib.nullcontext()
            if last or not callable(no_sync)
            else no_sync()
        )
        with sync:
            with autocast:
                loss, metrics = _split_output(step(micro_batch))
            (loss if accumulate == 1 else loss / accumulate).backward()
        # float32 at least (bfloat16 losses average badly), float64 kept
        losses.append(
            loss.detach().to(torch.promote_types(loss.dtype, torch.float32))
        )
        metrics_list.append(metrics)
    mean_loss = losses[0] if accumulate == 1 else torch.stack(losses).mean()
    metrics = {
        name: sum(m.get(name, math.nan) for m in metrics_list) / len(micro)
        for name in metrics_list[0]
    }
    _, world_size = _distributed()
    if world_size > 1:
        names = sorted(metrics)
        values = torch.tensor(
            [float(mean_loss)] + [metrics[n] for n in names],
            dtype=torch.float64,
            device=mean_loss.device,
        )
        torch.distributed.all_reduce(values)
        values /= world_size
        mean_loss = values[0]
        rest = values[1:].tolist()
        metrics = {n: float(v) for n, v in zip(names, rest, strict=True)}
    if clip_grad_norm is not None:
        norm = nn.utils.clip_grad_norm_(params, clip_grad_norm)
        metrics["grad_norm"] = float(norm)
    lr = float(optimizer.param_groups[0]["lr"])
    optimizer.step()
    if scheduler is not None:
        scheduler.step()
    return float(mean_loss), lr, metrics


def train(
    step: Callable[[Any], StepOutput],
    batches: Iterable[Any] | Callable[[int], Iterable[Any]],
    optimizer: Optimizer,
    *,
    epochs: int | None = None,
    max_steps: int | None = None,
    scheduler: Any = None,
    clip_grad_norm: float | None = None,
    parameters: Iterable[Tensor] | None = None,
    eval_fn: Callable[[], Any] | None = None,
    eval_every: int | None = None,
    model: nn.Module | None = None,
    checkpoint: str | os.PathLike[str] | None = None,
    checkpoint_every: int | None = None,
    resume: Mapping[str, Any] | None = None,
    generators: Sequence[torch.Generator] = (),
    progress: bool | None = None,
    description: str = "train",
    autocast: bool | None = None,
    tokens_per_batch: int | Callable[[Any], int] | None = None,
    extra: Any = None,
    tokenizer: Any = None,
    accumulate: int = 1,
) -> History:
    """Train with ``step`` over ``batches``; return the :class:`History`.

    For every batch: ``optimizer.zero_grad()``, ``loss = step(batch)``,
    ``loss.backward()``, gradient clipping (if asked), ``optimizer.step()``
    and ``scheduler.step()``. Training runs for ``epochs`` passes over
    ``batches`` or until ``max_steps`` optimizer steps are done, whichever
    comes first.

    Evaluation runs every ``eval_every`` steps, or after every epoch when
    ``eval_every`` is not given, under ``torch.no_grad()`` and, when
    ``model`` is given, in ``model.eval()`` mode (the loop puts the model
    back in training mode after it).

    Resuming: with ``checkpoint``, the state is saved every
    ``checkpoint_every`` steps and when training stops. Load it with
    :func:`load_checkpoint` into freshly built objects and call ``train``
    again with the same arguments and ``resume=state``: the run continues
    at the next batch, in the middle of an epoch if it stopped there, with
    the same shuffle order and the same random draws (dropout), so its
    losses equal those of a run that never stopped. The generators that
    shuffle a ``DataLoader`` (its ``generator``, its sampler's) are found
    and saved automatically. For this, ``batches`` must give the same
    batches in each epoch given the generators' states (a ``DataLoader``,
    a list, or a function of the epoch). A mid-epoch resume iterates over
    the batches already done once more (loading them, not training on
    them) to reach the next one.

    Mixed precision: with ``autocast``, ``step`` runs under
    ``torch.autocast(dtype=torch.bfloat16)``, so matrix products run in
    bfloat16 while the weights, their gradients and the optimizer stay in
    float32. bfloat16 keeps float32's exponent range, so no loss scaling is
    needed (unlike float16).

    Gradient accumulation: with ``accumulate=K``, every batch is a
    sequence of ``K`` micro-batches; ``step`` runs on each and the
    gradients of their losses, each divided by ``K``, add up before one
    optimizer step. When ``step`` returns a mean over equally sized
    micro-batches, that step equals one step on the whole batch, with the
    memory of one micro-batch. The recorded loss and metrics are the means
    over the micro-batches.

    Several processes (data parallel): when ``torch.distributed`` has an
    initialized process group (``torchrun``) and ``model`` is wrapped in
    ``DistributedDataParallel``, every process runs this loop on its own
    share of each batch and DDP averages the gradients. The recorded loss
    and metrics are averaged over the processes (so they describe the
    whole global batch), only rank 0 shows progress and writes the
    checkpoint and tokenizer, and the checkpoint holds the unwrapped
    model's weights, so it loads into a plain model and resumes with any
    number of processes. With ``accumulate``, DDP synchronizes the
    gradients only on the last micro-batch (``no_sync``). ``eval_fn`` runs
    on every process. A resumed run on several processes reseeds each
    rank's global generator from the restored state and its rank (the
    checkpoint holds rank 0's states only), so that ranks keep drawing
    different dropout masks; with one process a resume is exact.

    Args:
        step: ``step(batch)`` returns the scalar loss, or ``(loss,
            metrics)`` with ``metrics`` a dict of numbers to record.
        batches: an iterable, iterated once per epoch (a ``DataLoader``, a
            list), or a function ``epoch -> iterable`` (epochs from 0).
        optimizer: the optimizer that updates the parameters.
        epochs: the number of passes over ``batches``; by default 1, or
            unlimited when ``max_steps`` is given.
        max_steps: stop once this many optimizer steps are done in total
            (counting those before a resume).
        scheduler: a learning-rate scheduler stepped after every optimizer
            step, such as :func:`warmup_cosine`'s.
        clip_grad_norm: clip the gradients' global L2 norm to this value
            (Pascanu et al., 2013); their norm before clipping is recorded
            as the metric ``"grad_norm"``.
        parameters: the parameters to clip; by default the optimizer's.
        eval_fn: ``eval_fn()`` returns a number or a dict of numbers.
        eval_every: evaluate every this many steps (default: every epoch).
        model: the model; needed for checkpoints and for switching between
            training and evaluation mode.
        checkpoint: the checkpoint file to write.
        checkpoint_every: also save every this many steps.
        resume: the state returned by :func:`load_checkpoint`.
        generators: more generators to save and restore, beyond those of a
            ``DataLoader`` (for example one that ``batches(epoch)`` uses).
        progress: show a tqdm progress bar; ``None`` shows it only when
            standard error is a terminal (hidden when a book page runs).
        description: the progress bar's label.
        autocast: run ``step`` under bfloat16 autocast on the parameters'
            device; ``None`` (default) turns it on on CUDA and off on CPU.
        tokens_per_batch: the number of tokens in a batch, or a function
            ``batch -> int``; when given, each step's throughput is
            recorded as the metric ``"tokens_per_s"`` (tokens over the wall
            time of that step, including ``step``'s forward pass).
        extra: plain data saved in the checkpoints under ``"extra"``; by
            default ``{"config": model.config.to_dict()}`` when the model
            has such a config (as :class:`~transformer_book.models.gpt.GPT`
            does), so that ``GPT.from_checkpoint(path)`` rebuilds it.
        tokenizer: a tokenizer to save beside the checkpoint, at
            :func:`tokenizer_path` ``(checkpoint)``, when the first
            checkpoint is written.
        accumulate: micro-batches per optimizer step (see above); each
            batch is then a sequence of that many micro-batches, and
            ``tokens_per_batch`` counts the tokens of all of them.

    Returns:
        The history; after a resume it also holds the steps before it.

    Raises:
        TypeError: if an argument has the wrong type, or ``step`` returns
            something other than a floating scalar and metrics.
        ValueError: if a count is not positive, ``checkpoint`` is given
            without ``model``, an epoch yields no batch, ``resume`` does
            not match the batches, or with ``accumulate`` a batch is not a
            sequence of that many micro-batches.
    """
    if not callable(step):
        raise TypeError(f"step must be callable, got {type(step).__name__}")
    if not (callable(batches) or isinstance(batches, Iterable)):
        raise TypeError(
            "batches must be an iterable or a function of the epoch, got "
            f"{type(batches).__name__}"
        )
    _check_optimizer(optimizer)
    _check_scheduler(scheduler)
    if epochs is not None:
        epochs = check_int("epochs", epochs)
    if max_steps is not None:
        max_steps = check_int("max_steps", max_steps)
    if epochs is None and max_steps is None:
        epochs = 1
    if clip_grad_norm is not None:
        clip_grad_norm = check_number(
            "clip_grad_norm", clip_grad_norm, minimum=0.0, min_inclusive=False
        )
    if eval_fn is not None and not callable(eval_fn):
        raise TypeError(
            f"eval_fn must be callable, got {type(eval_fn).__name__}"
        )
    if eval_every is not None:
        eval_every = check_int("eval_every", eval_every)
    if checkpoint_every is not None:
        checkpoint_every = check_int("checkpoint_every", checkpoint_every)
    if model is not None:
        _check_module("model", model)
    if checkpoint is not None and model is None:
        raise ValueError("checkpoint needs model, to save its weights")
    if checkpoint_every is not None and checkpoint is None:
        raise ValueError("checkpoint_every needs a checkpoint path")
    if progress is not None and not isinstance(progress, bool):
        raise TypeError(
            f"progress must be True, False or None, got {progress!r}"
        )
    if autocast is not None and not isinstance(autocast, bool):
        raise TypeError(
            f"autocast must be True, False or None, got {autocast!r}"
        )
    if tokens_per_batch is not None and not callable(tokens_per_batch):
        tokens_per_batch = check_int("tokens_per_batch", tokens_per_batch)
    accumulate = check_int("accumulate", accumulate)
    rank, world_size = _distributed()
    if tokenizer is not None:
        if checkpoint is None:
            raise ValueError(
                "tokenizer needs a checkpoint path to save beside"
            )
        if not callable(getattr(tokenizer, "save", None)):
            raise TypeError(
                "tokenizer must have a save(path) method, got "
                f"{type(tokenizer).__name__}"
            )
    saved_model = None if model is None else _unwrap(model)
    if extra is None and saved_model is not None:
        to_dict = getattr(
            getattr(saved_model, "config", None), "to_dict", None
        )
        if callable(to_dict):
            extra = {"config": to_dict()}
    _check_extra(extra)
    if parameters is None:
        params = [p for g in optimizer.param_groups for p in g["params"]]
    else:
        params = list(parameters)
    generators = _find_generators(batches, generators)
    history, at = History(), _Position()
    if resume is not None:
        history, at = _resume(resume, generators)
        if world_size > 1:
            # The checkpoint holds one set of generator states (rank 0's):
            # give every rank its own dropout stream again.
            draw = int(torch.randint(0, 2**62, (1,)).item())
            torch.manual_seed(draw + rank)
    total = None
    if not callable(batches) and isinstance(batches, Sized):
        total = (epochs or 0) * len(batches) or None
    if max_steps is not None:
        total = max_steps if total is None else min(total, max_steps)

    def save() -> None:
        assert checkpoint is not None and saved_model is not None
        if rank != 0:  # one writer: the other ranks hold the same state
            at.saved = (at.step, at.epoch)
            return
        payload = _payload(
            model=saved_model,
            optimizer=optimizer,
            scheduler=scheduler,
            step=at.step,
            epoch=at.epoch,
            history=history,
            extra=extra,
            generators=generators,
            loop=at.loop_state(),
        )
        if tokenizer is not None and at.saved == (-1, -1):
            tokenizer.save(tokenizer_path(checkpoint))
        _atomic_save(payload, Path(checkpoint))
        at.saved = (at.step, at.epoch)

    def evaluate() -> None:
        assert eval_fn is not None
        if model is not None:
            model.eval()
        with torch.no_grad():
            results = eval_fn()
        if model is not None:
            model.train()
        if not isinstance(results, Mapping):
            results = {"loss": results}
        history._record_eval(at.step, _as_metrics("eval_fn()", results))

    autocast_context = _autocast_context(autocast, params)
    if model is not None:
        model.train()
    stopped = max_steps is not None and at.step >= max_steps
    disable = None if progress is None else not progress
    if rank != 0:
        disable = True
    with tqdm(
        total=total, initial=at.step, desc=description, disable=disable
    ) as bar:
        while not stopped and (epochs is None or at.epoch < epochs):
            source, iterator = _start_epoch(batches, at, generators)
            for batch in iterator:
                started = time.perf_counter()
                loss, lr, metrics = _update(
                    step,
                    batch,
                    optimizer,
                    scheduler,
                    params,
                    clip_grad_norm,
                    autocast_context,
                    accumulate,
                    model,
                )
                if tokens_per_batch is not None:
                    metrics["tokens_per_s"] = _throughput(
                        tokens_per_batch, batch, started
                    )
                at.step += 1
                at.batch_in_epoch += 1
                history._record(at.step, loss, lr, metrics)
                bar.update(1)
                if not bar.disable:
                    bar.set_postfix(loss=f"{loss:.4g}", refresh=False)
                if eval_fn and eval_every and at.step % eval_every == 0:
                    evaluate()
                stopped = max_steps is not None and at.step >= max_steps
                if stopped:
                    break
                if checkpoint_every and at.step % checkpoint_every == 0:
                    save()
            if stopped and not _epoch_over(
                source, iterator, at.batch_in_epoch, generators
            ):
                break
            if at.batch_in_epoch == 0:
                raise ValueError(
                    f"batches yielded no batch in epoch {at.epoch}"
                )
            losses = history.losses[len(history.losses) - at.batch_in_epoch :]
            history.epoch_losses.append(sum(losses) / len(losses))
            if eval_fn is not None and eval_every is None:
                evaluate()
            at.epoch, at.batch_in_epoch = at.epoch + 1, 0
        if checkpoint is not None and at.saved != (at.step, at.epoch):
            save()
    return history
