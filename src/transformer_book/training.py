"""Training: the loop every page calls, its schedule and its record.

:func:`fit` runs ``zero_grad``, ``step(batch)``, ``backward``, clipping,
``optimizer.step`` and ``scheduler.step`` for every batch, evaluates,
checkpoints (see :mod:`~transformer_book.checkpoint`) and returns a
:class:`History` ready to plot. A run stopped after any step resumes
exactly: its losses equal those of the run that never stopped.

Example:
    >>> import torch
    >>> from torch import nn
    >>> _ = torch.manual_seed(0)
    >>> model = nn.Linear(3, 1)
    >>> x, y = torch.randn(8, 3), torch.randn(8, 1)
    >>> def step(batch):
    ...     inputs, targets = batch
    ...     return nn.functional.mse_loss(model(inputs), targets)
    >>> optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    >>> history = fit(step, [(x, y)], optimizer, epochs=20, progress=False)
    >>> len(history.losses), history.losses[-1] < history.losses[0]
    (20, True)
"""

from __future__ import annotations

import contextlib
import copy
import math
import os
import time
from collections.abc import (
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
    Sized,
)
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import Tensor, nn
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR
from tqdm import tqdm

from ._checks import (
    check_int,
    check_integer_tensor,
    check_number,
    check_probability,
    check_tensor,
)
from .checkpoint import (
    check_extra,
    check_generators,
    check_objects,
    expect,
    random_state,
    save_checkpoint,
    set_random_state,
    tokenizer_path,
)

__all__ = ["History", "Optimizers", "WarmupCosine", "accuracy",
           "count_parameters", "cross_entropy", "fit", "warmup_cosine"]

#: What a step function returns: the loss, or the loss and its metrics.
StepOutput = Tensor | tuple[Tensor, Mapping[str, Any]]


def count_parameters(module: nn.Module, *, trainable_only: bool = True) -> int:
    """The number of parameters of ``module`` (a tied one counted once)."""
    expect("module", module, isinstance(module, nn.Module), "an nn.Module")
    return sum(p.numel() for p in module.parameters()
               if p.requires_grad or not trainable_only)


def cross_entropy(logits: Tensor, targets: Tensor, *,
                  label_smoothing: float = 0.0,
                  ignore_index: int = -100) -> Tensor:
    """Mean cross-entropy over every position, any batch shape.

    With label smoothing :math:`\\varepsilon` the target puts
    :math:`1 - \\varepsilon` on the true class and spreads
    :math:`\\varepsilon` over all :math:`V` (Szegedy et al., 2016).
    Positions whose target is ``ignore_index`` (padding) do not count.

    Shape:
        - logits: ``(..., V)``; targets: ``(...)``; returns a scalar.

    Example:
        >>> logits = torch.tensor([[[2.0, 0.0], [0.0, 2.0]]])
        >>> round(cross_entropy(logits, torch.tensor([[0, 1]])).item(), 4)
        0.1269
    """
    check_tensor("logits", logits, floating=True)
    check_integer_tensor("targets", targets, "class indices (integers)")
    if logits.ndim < 2 or logits.shape[:-1] != targets.shape:
        raise ValueError("logits must have shape targets.shape + (V,), got "
                         f"logits {tuple(logits.shape)} and targets "
                         f"{tuple(targets.shape)}")
    label_smoothing = check_probability("label_smoothing", label_smoothing)
    return nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]),  # (..., V) -> (N, V)
        targets.reshape(-1).long(),  # (...) -> (N,)
        ignore_index=ignore_index, label_smoothing=label_smoothing)


@torch.no_grad()
def accuracy(model: nn.Module, inputs: Tensor, targets: Tensor, *,
             batch_size: int = 1000) -> float:
    """The fraction of ``inputs`` whose highest-scoring class is the target.

    ``model`` runs in eval mode, without gradients, on chunks of
    ``batch_size``; its mode is put back afterwards.

    Shape:
        - inputs: ``(N, ...)``; targets: ``(N,)``.
    """
    was_training = model.training
    model.eval()
    predicted = torch.cat([model(inputs[i : i + batch_size]).argmax(-1)
                           for i in range(0, len(inputs), batch_size)])
    model.train(was_training)
    return int((predicted == targets).sum()) / len(targets)


class WarmupCosine:
    """Learning-rate factor: linear warmup, then a cosine decay.

    For scheduler step ``s`` with ``W`` warmup and ``T`` total steps::

        f(s) = (s + 1) / (W + 1)                      if s < W
        f(s) = r + (1 - r) (1 + cos(pi p)) / 2,  p = min(1, (s-W)/(T-W))

    (Loshchilov and Hutter, 2017; Goyal et al., 2017). A class, not a
    lambda, so that ``LambdaLR.state_dict`` saves it.

    Args:
        warmup_steps: steps of linear warmup ``W``.
        total_steps: the step ``T`` where the factor reaches ``r``.
        min_lr_ratio: the final factor ``r``, in ``[0, 1]``.
    """

    def __init__(self, *, warmup_steps: int, total_steps: int,
                 min_lr_ratio: float = 0.0) -> None:
        self.warmup_steps = check_int("warmup_steps", warmup_steps, minimum=0)
        self.total_steps = check_int("total_steps", total_steps)
        if self.warmup_steps >= self.total_steps:
            raise ValueError(f"warmup_steps={self.warmup_steps} must be "
                             f"less than total_steps={self.total_steps}")
        self.min_lr_ratio = check_number("min_lr_ratio", min_lr_ratio,
                                         minimum=0.0, maximum=1.0)

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return (step + 1) / (self.warmup_steps + 1)
        W, T = self.warmup_steps, self.total_steps
        progress = (step - W) / (T - W)
        cosine = 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
        return self.min_lr_ratio + (1.0 - self.min_lr_ratio) * cosine


def warmup_cosine(optimizer: Optimizer, *, warmup_steps: int,
                  total_steps: int, min_lr_ratio: float = 0.0) -> LambdaLR:
    """A ``LambdaLR`` whose factor is :class:`WarmupCosine`'s.

    Example:
        >>> p = torch.nn.Parameter(torch.zeros(1))
        >>> opt = torch.optim.SGD([p], lr=1.0)
        >>> sched = warmup_cosine(opt, warmup_steps=3, total_steps=10)
        >>> [round(sched.lr_lambdas[0](s), 3) for s in (0, 3, 10)]
        [0.25, 1.0, 0.0]
    """
    expect("optimizer", optimizer, isinstance(optimizer, Optimizer),
           "a torch.optim.Optimizer")
    return LambdaLR(optimizer, WarmupCosine(
        warmup_steps=warmup_steps, total_steps=total_steps,
        min_lr_ratio=min_lr_ratio))


class Optimizers(Optimizer):
    """Several optimizers that step as one, e.g. Muon for the hidden
    matrices and AdamW for the rest (Jordan et al., 2024).

    ``param_groups`` lists every optimizer's groups (the same dicts),
    so one learning-rate scheduler scales them all, each group from its
    own initial rate; ``state_dict`` holds each optimizer's.

    Example:
        >>> a, b = (torch.nn.Parameter(torch.ones(2, 2)) for _ in "ab")
        >>> opt = Optimizers(torch.optim.SGD([a], lr=1.0),
        ...                  torch.optim.SGD([b], lr=0.5))
        >>> (a.sum() + b.sum()).backward(); opt.step()
        >>> a[0, 0].item(), b[0, 0].item()
        (0.0, 0.5)
    """

    def __init__(self, *optimizers: Optimizer) -> None:
        for i, optimizer in enumerate(optimizers):
            expect(f"optimizers[{i}]", optimizer,
                   isinstance(optimizer, Optimizer), "a torch.optim.Optimizer")
        self.optimizers = optimizers
        self.defaults: dict[str, Any] = {}
        self.param_groups = [g for o in optimizers for g in o.param_groups]

    @torch.no_grad()
    def step(self, closure: Any = None) -> None:  # type: ignore[override]
        for optimizer in self.optimizers:
            optimizer.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        for optimizer in self.optimizers:
            optimizer.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict[str, Any]:
        return {"optimizers": [o.state_dict() for o in self.optimizers]}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        for optimizer, state in zip(self.optimizers,
                                    state_dict["optimizers"], strict=True):
            optimizer.load_state_dict(state)  # new group dicts
        self.param_groups = [g for o in self.optimizers
                             for g in o.param_groups]


@dataclass
class History:
    """What a run measured, in lists that plot directly.

    Per-step lists line up with ``steps``, per-evaluation lists with
    ``eval_steps``; a metric missing at a step is NaN there.

    Attributes:
        steps: the global step of each optimizer step, from 1.
        losses: the training loss of each step.
        lrs: the first parameter group's learning rate at each step.
        metrics: the step function's metrics by name (and ``"grad_norm"``
            with clipping, ``"tokens_per_s"`` with ``tokens_per_batch``).
        epoch_losses: the mean loss of each completed epoch.
        eval_steps: the step after which each evaluation ran.
        eval_metrics: the evaluations by name (a number is ``"loss"``).
    """

    steps: list[int] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    lrs: list[float] = field(default_factory=list)
    metrics: dict[str, list[float]] = field(default_factory=dict)
    epoch_losses: list[float] = field(default_factory=list)
    eval_steps: list[int] = field(default_factory=list)
    eval_metrics: dict[str, list[float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The history as plain lists and dicts (for checkpoints)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> History:
        """Rebuild a history from :meth:`to_dict`'s output."""
        return cls(**copy.deepcopy(dict(data)))

    def _record(self, step: int, loss: float, lr: float,
                metrics: Mapping[str, float]) -> None:
        self.steps.append(step)
        self.losses.append(loss)
        self.lrs.append(lr)
        _append_aligned(self.metrics, metrics, len(self.steps))

    def _record_eval(self, step: int, results: Mapping[str, float]) -> None:
        self.eval_steps.append(step)
        _append_aligned(self.eval_metrics, results, len(self.eval_steps))


def _append_aligned(table: dict[str, list[float]],
                    values: Mapping[str, float], length: int) -> None:
    """Append ``values`` to ``table``'s lists, padding gaps with NaN."""
    for name, value in values.items():
        table.setdefault(name, [math.nan] * (length - 1)).append(value)
    for column in table.values():
        if len(column) < length:
            column.append(math.nan)


def _as_metrics(name: str, values: Any) -> dict[str, float]:
    """``values`` (a mapping of numbers or 1-element tensors) as floats."""
    expect(name, values, isinstance(values, Mapping), "a dict of numbers")
    out = {}
    for key, value in values.items():
        where = f"{name}[{key!r}]"
        if isinstance(value, Tensor):
            if value.numel() != 1:
                raise ValueError(f"{where} must be a single number, got "
                                 f"a tensor of shape {tuple(value.shape)}")
            value = value.item()
        expect(where, value, isinstance(key, str) and hasattr(
            value, "__float__") and not isinstance(value, (bool, str)),
            "a number under a str key")
        out[key] = float(value)
    return out


def _split_output(output: Any) -> tuple[Tensor, dict[str, float]]:
    """``(loss, metrics)`` from what a step function returned."""
    metrics: Any = {}
    if isinstance(output, tuple) and len(output) == 2:
        output, metrics = output
    loss = check_tensor("the loss returned by step", output, floating=True)
    if loss.ndim != 0:
        raise ValueError("the loss returned by step must be a scalar, got "
                         f"shape {tuple(loss.shape)}")
    return loss, _as_metrics("the metrics returned by step", metrics)


def _autocast(autocast: bool | None, optimizer: Optimizer) -> Any:
    """bf16 autocast on the parameters' device (``None``: on CUDA only),
    or no context; bfloat16 keeps float32's range: no loss scaling."""
    params = [p for g in optimizer.param_groups for p in g["params"]]
    device_type = params[0].device.type if params else "cpu"
    enabled = device_type == "cuda" if autocast is None else autocast
    if not enabled:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device_type, dtype=torch.bfloat16)


def _distributed() -> tuple[int, int]:
    """``(rank, world_size)``; ``(0, 1)`` without a process group."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _find_generators(batches: Any, extra: Iterable[Any]) -> list[Any]:
    """The generators that shuffle a ``DataLoader``, then ``extra``."""
    found: list[Any] = [getattr(batches, "generator", None)]
    for owner in (batches, getattr(batches, "batch_sampler", None)):
        found.append(getattr(getattr(owner, "sampler", None), "generator",
                             None))
    found += check_generators(list(extra))
    # Each generator once, in the order found.
    unique = {id(g): g for g in found if isinstance(g, torch.Generator)}
    return list(unique.values())


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


@dataclass
class _Loop:
    """The options of one :func:`fit` call, checked, and its state."""

    step: Callable[[Any], StepOutput]
    batches: Any
    optimizer: Optimizer
    epochs: int | None = None
    max_steps: int | None = None
    scheduler: Any = None
    clip_grad_norm: float | None = None
    eval_fn: Callable[[], Any] | None = None
    eval_every: int | None = None
    model: nn.Module | None = None
    checkpoint: str | os.PathLike[str] | None = None
    checkpoint_every: int | None = None
    generators: Any = ()
    autocast: bool | None = None
    tokens_per_batch: int | Callable[[Any], int] | None = None
    extra: Any = None
    tokenizer: Any = None
    accumulate: int = 1
    history: History = field(default_factory=History)
    at: _Position = field(default_factory=_Position)

    def __post_init__(self) -> None:
        expect("step", self.step, callable(self.step), "callable")
        expect("batches", self.batches, callable(self.batches) or isinstance(
            self.batches, Iterable), "an iterable or a function of the epoch")
        expect("eval_fn", self.eval_fn, self.eval_fn is None
               or callable(self.eval_fn), "callable")
        check_objects(self.model, self.optimizer, self.scheduler)
        for name in ("epochs", "max_steps", "eval_every", "checkpoint_every",
                     "accumulate"):
            if getattr(self, name) is not None:
                setattr(self, name, check_int(name, getattr(self, name)))
        if self.epochs is None and self.max_steps is None:
            self.epochs = 1
        if self.clip_grad_norm is not None:
            self.clip_grad_norm = check_number(
                "clip_grad_norm", self.clip_grad_norm, minimum=0.0,
                min_inclusive=False)
        expect("autocast", self.autocast, self.autocast in (None, True, False),
               "True, False or None")
        tokens = self.tokens_per_batch
        if tokens is not None and not callable(tokens):
            check_int("tokens_per_batch", tokens)
        no_file = self.checkpoint is None
        for missing, message in (
            (self.model is None and not no_file,
             "checkpoint needs model, to save its weights"),
            (self.checkpoint_every is not None and no_file,
             "checkpoint_every needs a checkpoint path"),
            (self.tokenizer is not None and no_file,
             "tokenizer needs a checkpoint path to save beside"),
        ):
            if missing:
                raise ValueError(message)
        self.generators = _find_generators(self.batches, self.generators)
        # The config saved in checkpoints, by default the model's.
        to_dict = getattr(getattr(self.saved_model, "config", None),
                          "to_dict", None)
        if self.extra is None and callable(to_dict):
            self.extra = {"config": to_dict()}
        check_extra(self.extra)
        expect("tokenizer", self.tokenizer, self.tokenizer is None
               or callable(getattr(self.tokenizer, "save", None)),
               "an object with a save(path) method")

    @property
    def saved_model(self) -> nn.Module | None:
        """The model to save: the one inside a DDP wrapper, if any."""
        if isinstance(self.model, nn.parallel.DistributedDataParallel):
            return self.model.module
        return self.model

    def stopped(self) -> bool:
        return self.max_steps is not None and self.at.step >= self.max_steps

    def resume(self, state: Mapping[str, Any]) -> None:
        """Continue from the state that ``load_checkpoint`` returned."""
        expect("resume", state, isinstance(state, Mapping),
               "the state returned by load_checkpoint")
        if state.get("history") is not None:
            self.history = History.from_dict(state["history"])
        loop = state.get("loop") or {}
        self.at = _Position(state["step"], state["epoch"],
                            loop.get("batch_in_epoch", 0),
                            loop.get("epoch_rng"))
        set_random_state(state["rng"], self.generators)
        rank, world_size = _distributed()
        if world_size > 1:
            # The checkpoint holds rank 0's generator states: give every
            # rank its own dropout stream again.
            draw = int(torch.randint(0, 2**62, (1,)).item())
            torch.manual_seed(draw + rank)

    def save(self) -> None:
        """Write the checkpoint (rank 0 only; the others hold the same)."""
        at = self.at
        if _distributed()[0] == 0:
            model = self.saved_model
            assert self.checkpoint is not None and model is not None
            if self.tokenizer is not None and at.saved == (-1, -1):
                self.tokenizer.save(tokenizer_path(self.checkpoint))
            save_checkpoint(
                self.checkpoint, model=model, optimizer=self.optimizer,
                scheduler=self.scheduler, step=at.step, epoch=at.epoch,
                history=self.history, extra=self.extra,
                generators=self.generators, loop={
                    "batch_in_epoch": at.batch_in_epoch,
                    "epoch_rng": at.epoch_rng})
        at.saved = (at.step, at.epoch)

    def evaluate(self) -> None:
        """Run ``eval_fn`` without gradients, in eval mode, and record it."""
        assert self.eval_fn is not None
        if self.model is not None:
            self.model.eval()
        with torch.no_grad():
            results = self.eval_fn()
        if self.model is not None:
            self.model.train()
        if not isinstance(results, Mapping):
            results = {"loss": results}
        self.history._record_eval(
            self.at.step, _as_metrics("eval_fn()", results))

    def start_epoch(self) -> tuple[Any, Iterator[Any]]:
        """This epoch's batches and an iterator over those not yet done.

        After a mid-epoch resume, the epoch's saved generator states redraw
        the same order, the done batches are skipped, and the current
        states are put back.
        """
        at, skip = self.at, self.at.batch_in_epoch
        if skip:
            assert at.epoch_rng is not None, "resume lacks the epoch's rng"
            current = random_state(self.generators)
            set_random_state(at.epoch_rng, self.generators)
        else:
            at.epoch_rng = random_state(self.generators)
        batches = self.batches
        source = batches(at.epoch) if callable(batches) else batches
        iterator = iter(source)
        for done in range(skip):
            if next(iterator, _END) is _END:
                raise ValueError(f"resume expects {skip} batches done in "
                                 f"epoch {at.epoch}, but it has {done}")
        if skip:
            set_random_state(current, self.generators)
        return source, iterator

    def epoch_over(self, source: Any, iterator: Iterator[Any]) -> bool:
        """Whether the batches done are all of ``source`` (when stopping)."""
        with contextlib.suppress(TypeError):  # an IterableDataset's len()
            if isinstance(source, Sized):
                return self.at.batch_in_epoch >= len(source)
        state = random_state(self.generators)
        over = next(iterator, _END) is _END
        set_random_state(state, self.generators)
        return over

    def run_epoch(self, bar: tqdm) -> None:
        """Train on the rest of one epoch; close it unless stopped early."""
        at = self.at
        source, iterator = self.start_epoch()
        for batch in iterator:
            started = time.perf_counter()
            loss, lr, metrics = self.update(batch)
            if self.tokens_per_batch is not None:
                metrics["tokens_per_s"] = self.throughput(batch, started)
            at.step, at.batch_in_epoch = at.step + 1, at.batch_in_epoch + 1
            self.history._record(at.step, loss, lr, metrics)
            bar.update(1)
            if not bar.disable:
                bar.set_postfix(loss=f"{loss:.4g}", refresh=False)
            if self.eval_fn and self.eval_every and (
                    at.step % self.eval_every == 0):
                self.evaluate()
            if self.stopped():
                break
            if self.checkpoint_every and at.step % self.checkpoint_every == 0:
                self.save()
        if self.stopped() and not self.epoch_over(source, iterator):
            return
        if at.batch_in_epoch == 0:
            raise ValueError(f"batches yielded no batch in epoch {at.epoch}")
        losses = self.history.losses[-at.batch_in_epoch:]
        self.history.epoch_losses.append(sum(losses) / len(losses))
        if self.eval_fn is not None and self.eval_every is None:
            self.evaluate()
        at.epoch, at.batch_in_epoch = at.epoch + 1, 0

    def throughput(self, batch: Any, started: float) -> float:
        """Tokens per second of the step that began at ``started``."""
        seconds = time.perf_counter() - started
        tokens = self.tokens_per_batch
        if callable(tokens):
            tokens = check_int("tokens_per_batch(batch)", tokens(batch),
                               minimum=0)
        assert tokens is not None
        return tokens / seconds if seconds > 0 else math.inf

    def update(self, batch: Any) -> tuple[float, float, dict[str, float]]:
        """One optimizer step; the loss, the learning rate and metrics.

        With ``accumulate=K`` the batch holds K micro-batches: each loss,
        divided by K, is back-propagated, so the gradients add up to those
        of their mean; DDP synchronizes only on the last one.
        """
        micro = [batch] if self.accumulate == 1 else batch
        if self.accumulate > 1 and not (isinstance(micro, Sequence)
                                        and len(micro) == self.accumulate):
            raise ValueError(f"with accumulate={self.accumulate}, every "
                             f"batch must be a sequence of {self.accumulate}"
                             " micro-batches")
        self.optimizer.zero_grad(set_to_none=True)
        no_sync = getattr(self.model, "no_sync", None)
        losses, metrics = [], []
        for i, micro_batch in enumerate(micro):
            last = i == len(micro) - 1
            with (no_sync() if callable(no_sync) and not last
                  else contextlib.nullcontext()):
                with _autocast(self.autocast, self.optimizer):
                    loss, values = _split_output(self.step(micro_batch))
                (loss / len(micro) if len(micro) > 1 else loss).backward()
            # float32 at least (bfloat16 losses average badly)
            losses.append(loss.detach().to(
                torch.promote_types(loss.dtype, torch.float32)))
            metrics.append(values)
        mean_loss, mean = _mean_over_ranks(losses, metrics)
        if self.clip_grad_norm is not None:
            params = [p for g in self.optimizer.param_groups
                      for p in g["params"]]
            mean["grad_norm"] = float(
                nn.utils.clip_grad_norm_(params, self.clip_grad_norm))
        lr = float(self.optimizer.param_groups[0]["lr"])
        self.optimizer.step()
        if self.scheduler is not None:
            self.scheduler.step()
        return mean_loss, lr, mean


def _mean_over_ranks(
    losses: list[Tensor], metrics: list[dict[str, float]]
) -> tuple[float, dict[str, float]]:
    """The mean loss and metrics over micro-batches and processes."""
    loss = torch.stack(losses).mean()
    mean = {name: sum(m.get(name, math.nan) for m in metrics) / len(metrics)
            for name in metrics[0]}
    _, world_size = _distributed()
    if world_size == 1:
        return float(loss), mean
    names = sorted(mean)
    summed = torch.tensor([float(loss)] + [mean[n] for n in names],
                          dtype=torch.float64, device=loss.device)
    torch.distributed.all_reduce(summed)
    values = (summed / world_size).tolist()
    return values[0], dict(zip(names, values[1:], strict=True))


def fit(
    step: Callable[[Any], StepOutput],
    batches: Iterable[Any] | Callable[[int], Iterable[Any]],
    optimizer: Optimizer, *, epochs: int | None = None,
    max_steps: int | None = None, scheduler: Any = None,
    clip_grad_norm: float | None = None,
    eval_fn: Callable[[], Any] | None = None, eval_every: int | None = None,
    model: nn.Module | None = None,
    checkpoint: str | os.PathLike[str] | None = None,
    checkpoint_every: int | None = None,
    resume: Mapping[str, Any] | None = None,
    generators: Iterable[torch.Generator] = (),
    progress: bool | None = None, description: str = "train",
    autocast: bool | None = None,
    tokens_per_batch: int | Callable[[Any], int] | None = None,
    extra: Any = None, tokenizer: Any = None, accumulate: int = 1,
) -> History:
    """Train with ``step`` over ``batches``; return the :class:`History`.

    Args:
        step: ``step(batch)`` returns the scalar loss, or ``(loss,
            metrics)`` with a dict of numbers to record.
        batches: an iterable, iterated once per epoch, or a function
            ``epoch -> iterable``.
        epochs: passes over ``batches`` (default 1, or unlimited with
            ``max_steps``).
        max_steps: stop after this many steps in all (resumes included).
        scheduler: stepped after every optimizer step.
        clip_grad_norm: clip the gradients' global norm to this value
            (Pascanu et al., 2013); the norm before is ``"grad_norm"``.
        eval_fn: returns a number or a dict of numbers; run under
            ``no_grad`` and ``model.eval()``.
        eval_every: evaluate every this many steps (default: each epoch).
        model: needed for checkpoints and train/eval modes.
        checkpoint: the file saved every ``checkpoint_every`` steps and at
            the end.
        resume: the state from ``load_checkpoint``; the run continues at
            the next batch with the same shuffles and random draws.
        generators: generators to save besides a ``DataLoader``'s.
        progress: a tqdm bar (labelled ``description``); ``None``: only
            when stderr is a terminal.
        autocast: bfloat16 autocast; ``None``: on CUDA only.
        tokens_per_batch: tokens of a batch (or ``batch -> int``), to
            record ``"tokens_per_s"``.
        extra: plain data saved in checkpoints (default: the model's
            ``config.to_dict()``).
        tokenizer: saved beside the first checkpoint, at
            ``checkpoint.tokenizer_path(checkpoint)``.
        accumulate: micro-batches per optimizer step; each batch is then a
            sequence of that many.

    Under ``torchrun`` with a DDP ``model``, losses and metrics are
    averaged over processes and only rank 0 shows progress and saves.
    """
    expect("progress", progress, progress in (None, True, False),
           "True, False or None")
    loop = _Loop(step, batches, optimizer, epochs, max_steps, scheduler,
                 clip_grad_norm, eval_fn, eval_every, model, checkpoint,
                 checkpoint_every, generators, autocast, tokens_per_batch,
                 extra, tokenizer, accumulate)
    if resume is not None:
        loop.resume(resume)
    total: float | None = max_steps
    if not callable(batches) and isinstance(batches, Sized) and loop.epochs:
        total = min(loop.epochs * len(batches), max_steps or math.inf)
    if model is not None:
        model.train()
    disable = None if progress is None else not progress
    with tqdm(total=total, initial=loop.at.step, desc=description,
              disable=True if _distributed()[0] else disable) as bar:
        while not loop.stopped() and (
                loop.epochs is None or loop.at.epoch < loop.epochs):
            loop.run_epoch(bar)
    at = loop.at
    if checkpoint is not None and at.saved != (at.step, at.epoch):
        loop.save()
    return loop.history
