"""Train the book's models from the command line, on one process or many.

::

    python -m transformer_book.train gpt --steps 500 --out runs/gpt
    python -m transformer_book.train gpt --data my_text.txt --out runs/mine
    torchrun --nproc_per_node=2 -m transformer_book.train gpt --out runs/ddp

Three tasks, each one of :mod:`~transformer_book.recipes` (the pages'
models and hyperparameters, for the ``cpu`` and ``gpu`` presets; the
flags change its sizes): ``gpt`` (a character-level GPT on the embedded
Python documentation, Tiny Shakespeare or any text file), ``translate``
(the number-list task, English words to French; the source tokenizer is
saved beside the target's) and ``vit`` (MNIST 5k or Fashion-MNIST).

Data parallel: under ``torchrun`` (or any launcher that sets ``RANK``,
``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``) each process joins the
process group (``nccl`` on CUDA, ``gloo`` on the CPU), wraps the model in
``DistributedDataParallel`` and trains on its share of every global
batch (``--batch-size``, whatever the number of processes), weighted so
that the averaged gradients are those of one process on the whole batch.
Only rank 0 shows progress, writes ``--out`` and prints the result.

The last line printed is JSON: ``{"step", "loss", "val_loss",
"world_size", "seconds", "tokens_per_s"}``: the last step's training loss
over the global batch, the recipe's evaluation loss, the wall time of the
training loop and the mean throughput of its steps.

Everything that can be checked is checked before the first step: every
flag, the device, the data and its encoding, the ``--out`` folder (created
when missing, and written to once) and, with ``--resume``, that the
checkpoint is sound and was trained on the same data and config. A failure
is argparse's usage line and one error line naming the flag (exit 2). A
save that fails during the run keeps the last good checkpoint and says
where it is (one line, exit 1).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from transformer_book import _book, recipes, runtime, training
from transformer_book._io import atomic_write_bytes
from transformer_book.checkpoint import load_checkpoint

__all__ = ["TASKS", "build_parser", "main"]

#: The tasks: the recipes the command line trains.
TASKS = ("gpt", "translate", "vit")

# Which recipe each task trains, and the recipe's size behind each flag.
_RECIPES = {"gpt": "gpt", "translate": "translation", "vit": "vit"}
_FLAGS = ("steps", "batch_size", "lr", "warmup", "dropout", "d_model",
          "num_heads", "num_layers", "d_ff", "block_size", "patch_size")
_DATA = {"gpt": ("python-docs", "tiny-shakespeare"), "translate": ("numbers",),
         "vit": ("mnist-5k", "fashion-mnist")}


class UsageError(Exception):
    """A bad option found while the run is set up (a usage error, exit 2)."""


# --------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------


def _number(kind: type, ok: Callable[[Any], bool],
            expected: str) -> Callable[[str], Any]:
    """An argparse type: ``kind(text)``, refused unless ``ok``."""
    def parse(text: str) -> Any:
        value = kind(text)
        if not ok(value):
            raise argparse.ArgumentTypeError(f"must be {expected}, got {text}")
        return value

    parse.__name__ = kind.__name__  # argparse names it in "invalid int"
    return parse


_positive_int = _number(int, lambda v: v >= 1, "at least 1")
_positive_float = _number(float, lambda v: math.isfinite(v) and v > 0,
                          "above 0")
_probability = _number(float, lambda v: 0.0 <= v < 1.0, "in [0, 1)")
_seed = _number(int, lambda v: 0 <= v <= runtime.MAX_SEED, "0 <= seed < 2**32")


def _device(text: str) -> torch.device:
    """A device this machine has: ``cpu``, ``cuda[:N]`` or ``mps``."""
    try:
        device = torch.device(text)
    except RuntimeError:
        device = torch.device("meta")  # not a device: refused below
    usable = {"cpu": True, "mps": torch.backends.mps.is_available(),
              "cuda": torch.cuda.is_available()
              and (device.index or 0) < torch.cuda.device_count()}
    if device.type not in usable:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a device: expected cpu, cuda, cuda:N or mps")
    if not usable[device.type]:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not available on this machine")
    return device


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser (``python -m transformer_book.train``)."""
    parser = argparse.ArgumentParser(
        prog="python -m transformer_book.train",
        description="Train one of the book's models, on one process or, "
        "under torchrun, data parallel on several.")
    add = parser.add_argument
    add("task", choices=TASKS, help="the model to train")
    add("--data", help=(
        "gpt: 'python-docs' (embedded), 'tiny-shakespeare' or a text file; "
        "translate: 'numbers'; vit: 'mnist-5k' or 'fashion-mnist' "
        "(default: the preset's)"))
    add("--steps", type=_positive_int, help="optimizer steps in all")
    add("--batch-size", type=_positive_int,
        help="the global batch, split across processes")
    add("--accumulate", type=_positive_int, default=1,
        help="micro-batches per step (gradient accumulation)")
    add("--lr", type=_positive_float, help="peak learning rate")
    add("--warmup", type=int, help="warmup steps (default: the recipe's)")
    add("--dropout", type=_probability)
    add("--seed", type=_seed, default=0, help="0 <= seed < 2**32")
    add("--preset", choices=recipes.PRESETS,
        help="the recipe's sizes to start from (default: gpu with CUDA)")
    add("--out", type=Path,
        help="folder for the checkpoint, tokenizer and history")
    add("--resume", action="store_true",
        help="continue from the checkpoint in --out")
    add("--until", type=_positive_int, help=(
        "stop after this step, as if interrupted (the schedule still spans "
        "--steps); continue with --resume"))
    add("--checkpoint-every", type=_positive_int)
    add("--eval-every", type=_positive_int,
        help="also record val_loss every this many steps")
    add("--threads", type=_positive_int,
        help="compute threads per process (torch.set_num_threads)")
    add("--device", type=_device,
        help="cpu, cuda, cuda:N or mps (default: the best available)")
    add("--progress", action=argparse.BooleanOptionalAction, default=None,
        help="tqdm progress on rank 0 (default: when stderr is a terminal)")
    sizes = parser.add_argument_group("model sizes (default: the preset's)")
    for flag in ("--d-model", "--num-heads", "--num-layers", "--d-ff"):
        sizes.add_argument(flag, type=_positive_int)
    sizes.add_argument("--block-size", type=_positive_int,
                       help="gpt: the context in characters")
    sizes.add_argument("--patch-size", type=_positive_int, help="vit")
    return parser


def _options(parser: argparse.ArgumentParser,
             argv: Sequence[str] | None) -> argparse.Namespace:
    """Parsed and checked options; the recipe's sizes fill the rest.

    Every check that needs no data and no process group is here.
    """
    args = parser.parse_args(argv)
    args.preset = args.preset or _book.preset()
    sizes = recipes.defaults(_RECIPES[args.task], args.preset)
    sizes.setdefault("num_layers", sizes.get("enc_layers"))
    sizes.setdefault("data", "numbers")
    # The flags left out take the recipe's sizes (shown, not passed on).
    args.defaulted = {n for n in (*_FLAGS, "data") if getattr(args, n, None)
                      is None}
    for name in args.defaulted:
        setattr(args, name, sizes.get(name))
    problems = [
        ("warmup" not in args.defaulted
         and not 0 <= args.warmup < args.steps,
         f"--warmup must be in [0, --steps), got {args.warmup}"),
        (args.until is not None and args.until > args.steps,
         f"--until={args.until} is past --steps={args.steps}"),
        (args.resume and args.out is None,
         "--resume needs --out, the run's folder"),
        (args.checkpoint_every and args.out is None,
         "--checkpoint-every needs --out"),
        (args.d_model % args.num_heads,
         f"--num-heads={args.num_heads} must divide --d-model={args.d_model}"),
        (args.task == "vit" and 28 % args.patch_size,
         f"--patch-size={args.patch_size} must divide the image size 28"),
        (args.task != "gpt" and args.data not in _DATA[args.task],
         f"--data for {args.task} must be {_DATA[args.task][0]!r}, got "
         f"{args.data!r}")]
    for bad, message in problems:
        if bad:
            parser.error(message)
    args.text = None  # the text of a --data file
    if args.task == "gpt" and args.data not in _DATA["gpt"]:
        args.text = _read_text(parser, args.data)
    args.checkpoint = None
    if args.out is not None:
        args.checkpoint = args.out / f"{args.task}.pt"
        _check_out(parser, args)
    return args


def _read_text(parser: argparse.ArgumentParser, path: str) -> str:
    """The UTF-8 text of a ``--data`` file."""
    if not Path(path).is_file():
        parser.error(f"--data {path}: no such file (or use one of "
                     f"{', '.join(_DATA['gpt'])})")
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeError) as error:
        parser.error(f"--data {path} cannot be read as UTF-8 text: {error}")


def _check_out(parser: argparse.ArgumentParser,
               args: argparse.Namespace) -> None:
    """``--out`` is a folder, created when missing, that takes a file."""
    out = args.out
    if out.exists() and not out.is_dir():
        parser.error(f"--out {out} is a file, not a folder")
    if args.resume and not args.checkpoint.is_file():
        parser.error(f"--resume: no checkpoint at {args.checkpoint}")
    try:
        out.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=out).close()
    except OSError as error:
        parser.error(f"--out {out} is not writable: {error.strerror}")


# --------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------


@dataclass
class _Dist:
    rank: int = 0
    world_size: int = 1
    device: torch.device = torch.device("cpu")
    initialized: bool = False


def _setup_distributed(args: argparse.Namespace) -> _Dist:
    """Join the process group when a launcher set ``RANK``/``WORLD_SIZE``."""
    launched = "RANK" in os.environ and "WORLD_SIZE" in os.environ
    device = runtime.device() if args.device is None else args.device
    if device.type == "cuda" and device.index is None:  # a GPU per process
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if not launched:
        return _Dist(device=device)
    torch.distributed.init_process_group(
        "nccl" if device.type == "cuda" else "gloo")
    return _Dist(torch.distributed.get_rank(),
                 torch.distributed.get_world_size(), device, initialized=True)


def _shard(rows: int, dist: _Dist, accumulate: int) -> list[slice]:
    """This rank's micro-batches of a global batch of ``rows`` rows."""
    parts = dist.world_size * accumulate
    if rows % parts:
        raise UsageError(f"--batch-size={rows} must be divisible by the "
                         "number of processes times --accumulate "
                         f"({dist.world_size} x {accumulate} = {parts})")
    size, first = rows // parts, dist.rank * accumulate
    return [slice((first + i) * size, (first + i + 1) * size)
            for i in range(accumulate)]


def _recipe(args: argparse.Namespace) -> recipes.Recipe:
    """The task's recipe with the flags' sizes; bad data is a usage error."""
    sizes = {name: getattr(args, name) for name in _FLAGS
             if name not in args.defaulted}
    if "num_layers" in sizes and args.task == "translate":
        sizes["enc_layers"] = sizes["dec_layers"] = sizes.pop("num_layers")
    if args.task != "translate" and "data" not in args.defaulted:
        sizes["data"] = args.data
    if args.text is not None:
        sizes.update(data="file", text=args.text)
        least = 10 * (args.block_size + 2)
        if len(args.text) < least:
            raise UsageError(f"--data has {len(args.text)} characters; "
                             f"--block-size {args.block_size} needs {least}")
    try:
        return recipes.get(_RECIPES[args.task], args.preset, **sizes)
    except (OSError, ValueError, ImportError) as error:
        default = (f" (the {args.preset} preset's)"
                   if "data" in args.defaulted else "")
        raise UsageError(f"--data {args.data}{default} cannot be loaded: "
                         f"{error}") from error


def _resume(args: argparse.Namespace, model: nn.Module,
            optimizer: torch.optim.Optimizer, scheduler: Any,
            device: torch.device, extra: dict[str, Any]) -> dict[str, Any]:
    """Load the checkpoint and check that it continues this run (same
    config and data, no more steps than this one); its schedule spans
    this --steps."""
    checkpoint = args.checkpoint
    # Loading overwrites the schedule with the saved run's: keep this
    # run's, as a longer run may continue a shorter one.
    schedule = copy.copy(scheduler.lr_lambdas[0])
    try:
        state = load_checkpoint(checkpoint, model=model, optimizer=optimizer,
                                scheduler=scheduler, map_location=device)
    except (ValueError, OSError) as error:
        where = "" if str(checkpoint) in str(error) else f" {checkpoint}"
        raise UsageError(f"--resume{where}: {error}") from error
    saved = state.get("extra")
    saved = saved if isinstance(saved, dict) else {}
    old = saved.get("config")
    old = old if isinstance(old, dict) else {}
    changed = ", ".join(
        f"{key}={old.get(key)!r} there, {value!r} here"
        for key, value in extra["config"].items() if old.get(key) != value)
    stop, flag = ((args.until, "--until") if args.until
                  else (args.steps, "--steps"))
    problems = [
        (changed, f"{checkpoint} holds a different config ({changed})"),
        (saved.get("data", extra["data"]) != extra["data"],
         f"--data {args.data} is not the data {checkpoint} was trained on; "
         "resume with the run's own --data"),
        (stop < state["step"], f"{flag}={stop} is below the checkpoint's "
         f"step {state['step']} ({checkpoint})")]
    for bad, problem in problems:
        if bad:
            raise UsageError(f"--resume: {problem}")
    scheduler.lr_lambdas = [schedule] * len(optimizer.param_groups)
    for group, base in zip(optimizer.param_groups, scheduler.base_lrs,
                           strict=True):
        group["lr"] = base * schedule(scheduler.last_epoch)
    return state


def _batches(recipe: recipes.Recipe, dist: _Dist, accumulate: int,
             generator: torch.Generator) -> Callable[[int], Iterator[Any]]:
    """Each step's global batch, cut into this rank's micro-batches.

    Every rank draws the whole global batch from the same generator. A
    micro-batch's mean loss is weighted by its share of the global batch
    (tokens, images), times the ranks and micro-batches that DDP and
    ``fit`` average over, so the gradients are the whole batch's.
    """
    shards = _shard(recipe.sizes["batch_size"], dist, accumulate)
    factor = dist.world_size * accumulate
    cpu = torch.device("cpu")

    def batches(epoch: int) -> Iterator[Any]:
        for batch in recipe.batches(generator):
            total = recipe.weight(recipe.take(batch, slice(None), cpu))
            parts = [recipe.take(batch, rows, dist.device) for rows in shards]
            micro = [(p, factor * recipe.weight(p) / total) for p in parts]
            yield micro if accumulate > 1 else micro[0]

    return batches


def _run(args: argparse.Namespace, dist: _Dist) -> dict[str, Any]:
    if args.threads:
        torch.set_num_threads(args.threads)
    recipe = _recipe(args)
    # The same initial weights on every rank (DDP also broadcasts rank 0's).
    runtime.seed_everything(args.seed)
    model = recipe.model(seed=None).to(dist.device)
    torch.manual_seed(args.seed + dist.rank)  # dropout differs by rank
    optimizer = recipe.optimizer(model)
    scheduler = recipe.scheduler(optimizer)
    # What the checkpoint keeps to check a resume: config and data.
    extra = {"config": dataclasses.asdict(recipe.config),
             "data": recipe.fingerprint}
    resume = (_resume(args, model, optimizer, scheduler, dist.device, extra)
              if args.resume else None)
    wrapped: nn.Module = model
    if dist.initialized:  # buffers are constants here: no need to sync
        wrapped = nn.parallel.DistributedDataParallel(
            model, device_ids=[dist.device.index]
            if dist.device.type == "cuda" else None,
            forward_sync_buffers=False)
    generator = torch.Generator().manual_seed(args.seed)

    def tokens(micro: Any) -> int:  # of the global batch
        parts = micro if args.accumulate > 1 else [micro]
        return dist.world_size * sum(recipe.tokens(p) for p, _ in parts)

    started = time.perf_counter()
    history = training.fit(
        lambda micro: recipe.loss(wrapped, micro[0]) * micro[1],
        _batches(recipe, dist, args.accumulate, generator), optimizer,
        max_steps=args.until or args.steps, scheduler=scheduler,
        clip_grad_norm=recipe.sizes["clip_grad_norm"], model=wrapped,
        checkpoint=args.checkpoint, checkpoint_every=args.checkpoint_every,
        resume=resume, generators=[generator], progress=args.progress,
        description=args.task, tokens_per_batch=tokens, extra=extra,
        accumulate=args.accumulate,
        tokenizer=None if args.out is None else recipe.tokenizer,
        eval_fn=(lambda: recipe.evaluate(model)) if args.eval_every
        else None, eval_every=args.eval_every)
    seconds = time.perf_counter() - started
    model.eval()
    with torch.no_grad():
        val = recipe.evaluate(model)["loss"]
    if dist.rank == 0 and args.out is not None:
        atomic_write_bytes(args.out / "history.json",
                           json.dumps(history.to_dict()).encode("utf-8"))
        source = recipe.extras.get("src_tokenizer")  # a translation's
        if source is not None:
            source.save(args.out / f"{args.task}.src.tokenizer.json")
    rates = history.metrics.get("tokens_per_s", [])
    return {"step": history.steps[-1], "loss": history.losses[-1],
            "val_loss": val, "world_size": dist.world_size,
            "seconds": seconds,
            "tokens_per_s": sum(rates) / len(rates) if rates else 0.0}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status.

    A usage error exits through ``parser.error`` (``SystemExit(2)``)
    before the first step.

    Args:
        argv: the arguments (default: ``sys.argv[1:]``).

    Returns:
        0 on success; 1 when writing ``--out`` failed during the run.
    """
    parser = build_parser()
    args = _options(parser, argv)
    dist = _setup_distributed(args)
    try:
        result = _run(args, dist)
    except UsageError as error:
        if dist.rank != 0:
            return 2
        parser.error(" ".join(str(error).split()))
    except OSError as error:  # a save during the run
        if args.out is None:
            raise
        if dist.rank == 0:
            kept = (f"the last good checkpoint is {args.checkpoint}"
                    if args.checkpoint.is_file()
                    else "no checkpoint was saved")
            print(f"{parser.prog}: error: writing to --out {args.out} failed"
                  f" ({' '.join(str(error).split())}); {kept}",
                  file=sys.stderr)
        return 1
    finally:
        if dist.initialized:
            with contextlib.suppress(Exception):
                torch.distributed.destroy_process_group()
    if dist.rank == 0:
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
