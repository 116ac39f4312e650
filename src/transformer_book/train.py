"""Train the book's models from the command line, on one process or many.

::

    python -m transformer_book.train gpt --steps 500 --out runs/gpt
    python -m transformer_book.train gpt --data my_text.txt --out runs/mine
    torchrun --nproc_per_node=2 -m transformer_book.train gpt --out runs/ddp

Three tasks, each with the book's defaults for the ``cpu`` and ``gpu``
presets: ``gpt`` (a character-level :class:`~transformer_book.models.GPT`
on the embedded Python documentation, Tiny Shakespeare or any text file),
``translate`` (a :class:`~transformer_book.models.Seq2SeqTransformer` on
the number-list task, English words to French) and ``vit`` (a
:class:`~transformer_book.models.ViT` on MNIST 5k).

Data parallel: under ``torchrun`` (or any launcher that sets ``RANK``,
``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``) each process joins the
process group (``nccl`` on CUDA, ``gloo`` on the CPU), wraps the model in
``DistributedDataParallel`` and trains on its own share of every global
batch: ``--batch-size`` is the global batch, the same whatever the number
of processes. Each process draws the whole global batch from a generator
seeded by ``--seed`` and the step, and keeps rows ``rank * B / N`` to
``(rank + 1) * B / N``; the loss is normalised by the global batch, so the
averaged gradients are those of one process on the whole batch. Only rank
0 shows progress, writes ``--out`` and prints the result.

The last line printed is JSON: ``{"step", "loss", "val_loss",
"world_size", "seconds", "tokens_per_s"}``, where ``loss`` is the last
step's training loss over the global batch and ``seconds`` the wall time of
the training loop.

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
import dataclasses
import hashlib
import json
import math
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_book import data, runtime, training
from transformer_book._io import atomic_write_bytes

__all__ = ["TASKS", "build_parser", "main"]

#: The tasks, and the data each reads by default.
TASKS = ("gpt", "translate", "vit")

# The book's sizes (book/implementation/gpt.md, translation.md and
# book/vision/training-vit.md), per task and preset.
_DEFAULTS: dict[str, dict[str, dict[str, Any]]] = {
    "gpt": {
        "cpu": dict(data="python-docs", steps=500, batch_size=32, lr=3e-3,
                    d_model=64, num_heads=4, num_layers=2, block_size=64),
        "gpu": dict(data="tiny-shakespeare", steps=2000, batch_size=64,
                    lr=1e-3, d_model=384, num_heads=6, num_layers=6,
                    block_size=256),
    },
    "translate": {
        "cpu": dict(data="numbers", steps=800, batch_size=64, lr=3e-3,
                    d_model=64, num_heads=4, num_layers=2, d_ff=128,
                    stop=1_000),
        "gpu": dict(data="numbers", steps=3000, batch_size=256, lr=2e-3,
                    d_model=128, num_heads=4, num_layers=3, d_ff=512,
                    stop=10_000),
    },
    "vit": {
        "cpu": dict(data="mnist-5k", steps=960, batch_size=64, lr=2e-3,
                    d_model=64, num_heads=4, num_layers=3, d_ff=128,
                    patch_size=7),
        "gpu": dict(data="mnist-5k", steps=4000, batch_size=256, lr=2e-3,
                    d_model=128, num_heads=4, num_layers=6, d_ff=256,
                    patch_size=7),
    },
}

_GPT_DATA = ("python-docs", "tiny-shakespeare")
_LABEL_SMOOTHING = 0.1  # the translation page's
_TRANSLATE_LISTS = 20_000  # training lists drawn once
_VAL_ROWS = 256  # held-out lists for the translation val_loss


class UsageError(Exception):
    """A bad option found while the run is set up (a usage error, exit 2)."""


# --------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
    return value


def _probability(text: str) -> float:
    value = float(text)
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got {text}")
    return value


def _seed(text: str) -> int:
    value = int(text)
    if not 0 <= value <= runtime.MAX_SEED:
        raise argparse.ArgumentTypeError(
            f"seed={value} is out of range: expected 0 <= seed < 2**32"
        )
    return value


def _device(text: str) -> torch.device:
    """A device this machine has: ``cpu``, ``cuda[:N]`` or ``mps``."""
    usable = {
        "cpu": lambda index: True,
        "cuda": lambda index: torch.cuda.is_available()
        and (index or 0) < torch.cuda.device_count(),
        "mps": lambda index: torch.backends.mps.is_available(),
    }
    try:
        device = torch.device(text)
    except RuntimeError:
        device = torch.device("meta")  # not a device: refused below
    if device.type not in usable:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a device: expected cpu, cuda, cuda:N or mps"
        )
    if not usable[device.type](device.index):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not available on this machine"
        )
    return device


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser (``python -m transformer_book.train``)."""
    parser = argparse.ArgumentParser(
        prog="python -m transformer_book.train",
        description=(
            "Train one of the book's models, on one process or, under "
            "torchrun, data parallel on several."
        ),
    )
    parser.add_argument("task", choices=TASKS, help="the model to train")
    add = parser.add_argument
    add("--data", help=(
        "gpt: 'python-docs' (embedded), 'tiny-shakespeare' or a text file; "
        "translate: 'numbers'; vit: 'mnist-5k' (default: the preset's)"))
    add("--steps", type=_positive_int, help="optimizer steps in all")
    add("--batch-size", type=_positive_int,
        help="the global batch, split across processes")
    add("--accumulate", type=_positive_int, default=1,
        help="micro-batches per step (gradient accumulation)")
    add("--lr", type=_positive_float, help="peak learning rate")
    add("--warmup", type=int, help="warmup steps (default: steps // 10)")
    add("--dropout", type=_probability, default=0.0)
    add("--seed", type=_seed, default=0, help="0 <= seed < 2**32")
    add("--preset", choices=runtime.PRESETS,
        help="the book's sizes to start from (default: runtime.preset())")
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
    sizes.add_argument("--d-model", type=_positive_int)
    sizes.add_argument("--num-heads", type=_positive_int)
    sizes.add_argument("--num-layers", type=_positive_int)
    sizes.add_argument("--d-ff", type=_positive_int)
    sizes.add_argument("--block-size", type=_positive_int,
                       help="gpt: the context in characters")
    sizes.add_argument("--patch-size", type=_positive_int, help="vit")
    return parser


def _options(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None
) -> argparse.Namespace:
    """Parsed and checked options, with the preset's defaults filled in.

    Every check that needs no data and no process group is here; each
    failure is ``parser.error`` (the usage line, one error line, exit 2).
    """
    args = parser.parse_args(argv)
    preset = args.preset or runtime.preset()
    args.preset = preset
    args.defaulted = set()  # the options the preset filled in
    for name, value in _DEFAULTS[args.task][preset].items():
        if getattr(args, name, None) is None:
            setattr(args, name, value)
            args.defaulted.add(name)
    if args.warmup is None:
        args.warmup = args.steps // 10
    if not 0 <= args.warmup < args.steps:
        parser.error(f"--warmup must be in [0, --steps), got {args.warmup}")
    if args.until is not None and args.until > args.steps:
        parser.error(f"--until={args.until} is past --steps={args.steps}")
    if args.resume and args.out is None:
        parser.error("--resume needs --out, the run's folder")
    if args.checkpoint_every and args.out is None:
        parser.error("--checkpoint-every needs --out")
    if args.d_model % args.num_heads:
        parser.error(
            f"--num-heads={args.num_heads} must divide "
            f"--d-model={args.d_model}"
        )
    if args.task == "vit" and 28 % args.patch_size:
        parser.error(
            f"--patch-size={args.patch_size} must divide the image size 28"
        )
    expected = {"translate": ("numbers",), "vit": ("mnist-5k",)}
    if args.task in expected and args.data not in expected[args.task]:
        parser.error(
            f"--data for {args.task} must be {expected[args.task][0]!r}, "
            f"got {args.data!r}"
        )
    args.text = None  # the text of a --data file
    if args.task == "gpt" and args.data not in _GPT_DATA:
        if not Path(args.data).is_file():
            parser.error(
                f"--data {args.data}: no such file (or use one of "
                f"{', '.join(_GPT_DATA)})"
            )
        try:
            args.text = Path(args.data).read_text(encoding="utf-8")
        except (OSError, UnicodeError) as error:
            parser.error(
                f"--data {args.data} cannot be read as UTF-8 text: {error}"
            )
    if args.out is not None:
        _check_out(parser, args)
    return args


def _check_out(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> None:
    """``--out`` is a folder, created when missing, that takes a file."""
    out = args.out
    if out.exists() and not out.is_dir():
        parser.error(f"--out {out} is a file, not a folder")
    if args.resume and not (out / f"{args.task}.pt").is_file():
        parser.error(f"--resume: no checkpoint at {out / args.task}.pt")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
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
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if args.device is not None:
        device = args.device
    elif launched and torch.cuda.is_available():
        device = torch.device("cuda")
    else:
        device = runtime.device()
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", local_rank)  # one GPU per process
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if not launched:
        return _Dist(device=device)
    backend = "nccl" if device.type == "cuda" else "gloo"
    torch.distributed.init_process_group(backend)
    return _Dist(
        rank=torch.distributed.get_rank(),
        world_size=torch.distributed.get_world_size(),
        device=device,
        initialized=True,
    )


def _shard(
    rows: int, dist: _Dist, accumulate: int
) -> list[slice]:
    """This rank's micro-batches of a global batch of ``rows`` rows."""
    parts = dist.world_size * accumulate
    if rows % parts:
        raise UsageError(
            f"--batch-size={rows} must be divisible by the number of "
            f"processes times --accumulate ({dist.world_size} x "
            f"{accumulate} = {parts})"
        )
    size = rows // parts
    first = dist.rank * accumulate
    return [
        slice((first + i) * size, (first + i + 1) * size)
        for i in range(accumulate)
    ]


def _step_generator(seed: int, step: int) -> torch.Generator:
    """The generator that draws global batch ``step``: the same on every
    rank and for any number of processes."""
    return torch.Generator().manual_seed(seed * 1_000_003 + step)


# --------------------------------------------------------------------------
# Tasks: a model, a global batch per step, a loss and a validation loss
# --------------------------------------------------------------------------


@dataclass
class _Task:
    model: nn.Module
    # step -> the global batch's rows (on the CPU)
    draw: Callable[[int], Any]
    # (global batch, rows of one micro-batch) -> micro-batch on the device
    take: Callable[[Any, slice], Any]
    # (model, micro-batch, scale) -> loss; scale turns this rank's share
    # into its part of the global batch's mean
    loss: Callable[[nn.Module, Any, Any], Tensor]
    # global batch -> normaliser shared by every rank
    norm: Callable[[Any], float]
    tokens: Callable[[Any], int]  # tokens of one global batch
    val_loss: Callable[[nn.Module], float]
    tokenizer: Any
    extra: dict[str, Any]


def _load(
    args: argparse.Namespace, load: Callable[..., Any], **kw: Any
) -> Any:
    """``load(**kw)``; failing to read or fetch the data is a usage error
    that names ``--data``."""
    try:
        return load(**kw)
    except (OSError, ValueError, ImportError) as error:
        default = (
            f" (the {args.preset} preset's)" if "data" in args.defaulted
            else ""
        )
        raise UsageError(
            f"--data {args.data}{default} cannot be loaded: {error}"
        ) from error


def _fingerprint(*parts: bytes) -> str:
    """The SHA-256 of the training data, kept in the checkpoint's extra."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(len(part).to_bytes(8, "little") + part)
    return digest.hexdigest()


def _gpt_text(args: argparse.Namespace) -> tuple[str, str]:
    if args.data == "python-docs":
        return data.python_docs_split()
    text = args.text
    if args.data == "tiny-shakespeare":
        text = _load(args, data.tiny_shakespeare)
    cut = int(0.9 * len(text))
    return text[:cut], text[cut:]


def _gpt_task(args: argparse.Namespace, device: torch.device) -> _Task:
    from transformer_book.models import GPT, GPTConfig
    from transformer_book.tokenization import CharTokenizer

    train_text, valid_text = _gpt_text(args)
    T = args.block_size
    size = len(train_text) + len(valid_text)
    if size < 10 * (T + 2):
        raise UsageError(
            f"--data has {size} characters; --block-size {T} needs at "
            f"least {10 * (T + 2)}"
        )
    tokenizer = CharTokenizer(byte_fallback=False).train(
        train_text + valid_text
    )
    train_ids = torch.tensor(tokenizer.encode(train_text))
    valid_ids = torch.tensor(tokenizer.encode(valid_text))
    config = GPTConfig(
        vocab_size=tokenizer.vocab_size, max_seq_len=T,
        d_model=args.d_model, num_heads=args.num_heads,
        num_layers=args.num_layers, d_ff=args.d_ff, dropout=args.dropout,
    )
    model = GPT(config)
    offsets = torch.arange(T + 1)

    def draw(step: int) -> Tensor:
        starts = torch.randint(
            len(train_ids) - T, (args.batch_size,),
            generator=_step_generator(args.seed, step),
        )
        return train_ids[starts[:, None] + offsets]  # (B, T + 1)

    def take(batch: Tensor, rows: slice) -> Tensor:
        return batch[rows].to(device)

    def loss(model: nn.Module, windows: Tensor, scale: Any) -> Tensor:
        _, mean = model(windows[:, :-1], windows[:, 1:])
        return mean

    count = (len(valid_ids) - 1) // T
    valid_x = valid_ids[: count * T].view(count, T)  # (N, T)
    valid_y = valid_ids[1 : count * T + 1].view(count, T)  # (N, T)

    def val_loss(model: nn.Module) -> float:
        total = 0.0
        for i in range(0, count, 64):
            x, y = valid_x[i : i + 64], valid_y[i : i + 64]
            _, mean = model(x.to(device), y.to(device))
            total += float(mean) * len(x)
        return total / count

    return _Task(
        model=model, draw=draw, take=take, loss=loss,
        norm=lambda batch: 1.0,
        tokens=lambda batch: batch.shape[0] * T,
        val_loss=val_loss, tokenizer=tokenizer,
        extra={
            "config": config.to_dict(),
            "data": _fingerprint(train_text.encode(), valid_text.encode()),
        },
    )


def _translate_task(
    args: argparse.Namespace, device: torch.device
) -> _Task:
    from transformer_book.models import (
        Seq2SeqTransformer,
        Seq2SeqTransformerConfig,
    )
    from transformer_book.tokenization import WordTokenizer

    pairs = _load(
        args, data.number_pairs, src="en", tgt="fr", start=0,
        stop=args.stop, valid_fraction=0.0, test_fraction=0.1,
    )
    rng = random.Random(0)
    train_lists = data.number_lists(pairs.train, _TRANSLATE_LISTS, rng=rng)
    valid_lists = data.number_lists(pairs.test, _VAL_ROWS, rng=rng)
    # One vocabulary for both languages: one tokenizer to save.
    tokenizer = WordTokenizer().train(
        "\n".join(en + "\n" + fr for en, fr in train_lists)
    )
    pad = tokenizer.pad_id

    def encode(lists: list[tuple[str, str]]) -> list[tuple[Tensor, Tensor]]:
        return [
            (
                torch.tensor(tokenizer.encode(en)),
                torch.tensor(tokenizer.encode(fr, bos=True, eos=True)),
            )
            for en, fr in lists
        ]

    train_rows, valid_rows = encode(train_lists), encode(valid_lists)
    longest = max(len(t) for rows in (train_rows, valid_rows)
                  for pair in rows for t in pair)
    config = Seq2SeqTransformerConfig(
        src_vocab_size=tokenizer.vocab_size,
        tgt_vocab_size=tokenizer.vocab_size, max_seq_len=longest,
        d_model=args.d_model, num_heads=args.num_heads,
        num_encoder_layers=args.num_layers,
        num_decoder_layers=args.num_layers, d_ff=args.d_ff,
        dropout=args.dropout, pad_id=pad,
    )
    model = Seq2SeqTransformer(config)

    def draw(step: int) -> list[tuple[Tensor, Tensor]]:
        index = torch.randint(
            len(train_rows), (args.batch_size,),
            generator=_step_generator(args.seed, step),
        )
        return [train_rows[i] for i in index.tolist()]

    def collate(rows: list[tuple[Tensor, Tensor]]) -> tuple[Tensor, Tensor]:
        src = nn.utils.rnn.pad_sequence(
            [s for s, _ in rows], batch_first=True, padding_value=pad
        )  # (B, S)
        tgt = nn.utils.rnn.pad_sequence(
            [t for _, t in rows], batch_first=True, padding_value=pad
        )  # (B, T + 1)
        return src.to(device), tgt.to(device)

    def take(batch: list, rows: slice) -> tuple[Tensor, Tensor]:
        return collate(batch[rows])

    def loss(model: nn.Module, micro: Any, scale: Any) -> Tensor:
        src, tgt = micro
        logits = model(src, tgt[:, :-1])  # (B, T, V)
        targets = tgt[:, 1:]  # (B, T)
        mean = training.cross_entropy(
            logits, targets, label_smoothing=_LABEL_SMOOTHING,
            ignore_index=pad,
        )
        # The micro-batch's sum over its tokens, as a share of the global
        # batch's mean: micro-batches and ranks hold different numbers of
        # tokens, so their means must not be averaged with equal weights.
        return mean * (targets != pad).sum() * scale

    def val_loss(model: nn.Module) -> float:
        total, tokens = 0.0, 0
        for i in range(0, len(valid_rows), 64):
            src, tgt = collate(valid_rows[i : i + 64])
            targets = tgt[:, 1:]  # (B, T)
            logits = model(src, tgt[:, :-1])  # (B, T, V)
            n = int((targets != pad).sum())
            total += float(training.cross_entropy(
                logits, targets, label_smoothing=_LABEL_SMOOTHING,
                ignore_index=pad)) * n
            tokens += n
        return total / tokens

    def target_tokens(batch: list) -> int:
        return sum(len(t) - 1 for _, t in batch)

    return _Task(
        model=model, draw=draw, take=take, loss=loss, norm=target_tokens,
        tokens=lambda batch: sum(len(s) + len(t) for s, t in batch),
        val_loss=val_loss, tokenizer=tokenizer,
        extra={
            "config": dataclasses.asdict(config),
            "data": _fingerprint(*(
                f"{en}\t{fr}".encode()
                for en, fr in train_lists + valid_lists
            )),
        },
    )


def _vit_task(args: argparse.Namespace, device: torch.device) -> _Task:
    from transformer_book.models import ViT, ViTConfig

    (train_x, train_y), (test_x, test_y) = _load(args, data.mnist_5k)
    config = ViTConfig(
        image_size=28, patch_size=args.patch_size, d_model=args.d_model,
        num_heads=args.num_heads, num_layers=args.num_layers,
        d_ff=args.d_ff, dropout=args.dropout,
    )
    model = ViT(config)

    def draw(step: int) -> tuple[Tensor, Tensor]:
        index = torch.randint(
            len(train_x), (args.batch_size,),
            generator=_step_generator(args.seed, step),
        )
        return train_x[index], train_y[index]

    def take(batch: Any, rows: slice) -> tuple[Tensor, Tensor]:
        return batch[0][rows].to(device), batch[1][rows].to(device)

    def loss(model: nn.Module, micro: Any, scale: Any) -> Tensor:
        images, labels = micro
        return F.cross_entropy(model(images), labels)

    def val_loss(model: nn.Module) -> float:
        total = 0.0
        for i in range(0, len(test_x), 250):
            logits = model(test_x[i : i + 250].to(device))
            total += float(F.cross_entropy(
                logits, test_y[i : i + 250].to(device), reduction="sum"))
        return total / len(test_x)

    return _Task(
        model=model, draw=draw, take=take, loss=loss,
        norm=lambda batch: 1.0,
        tokens=lambda batch: len(batch[0]) * config.num_tokens,
        val_loss=val_loss, tokenizer=None,
        extra={
            "config": dataclasses.asdict(config),
            "data": _fingerprint(
                train_x.numpy().tobytes(), train_y.numpy().tobytes()
            ),
        },
    )


_BUILDERS = {"gpt": _gpt_task, "translate": _translate_task, "vit": _vit_task}


# --------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------


def _check_resume(
    args: argparse.Namespace,
    resume: dict[str, Any],
    extra: dict[str, Any],
    checkpoint: Path,
) -> None:
    """The checkpoint continues this run: same config, data, fewer steps."""
    saved = resume.get("extra")
    saved = saved if isinstance(saved, dict) else {}
    old = saved.get("config")
    old = old if isinstance(old, dict) else {}
    changed = ", ".join(
        f"{key}={old.get(key)!r} there, {value!r} here"
        for key, value in extra["config"].items() if old.get(key) != value
    )
    stop, flag = (args.until, "--until") if args.until else (
        args.steps, "--steps"
    )
    if changed:
        problem = f"{checkpoint} holds a different config ({changed})"
    elif saved.get("data", extra["data"]) != extra["data"]:
        # (a checkpoint of an older version holds no fingerprint)
        problem = (
            f"--data {args.data} is not the data {checkpoint} was trained "
            "on; resume with the run's own --data"
        )
    elif stop < resume["step"]:
        problem = (
            f"{flag}={stop} is below the checkpoint's step "
            f"{resume['step']} ({checkpoint})"
        )
    else:
        return
    raise UsageError(f"--resume: {problem}")


def _run(args: argparse.Namespace, dist: _Dist) -> dict[str, Any]:
    if args.threads:
        torch.set_num_threads(args.threads)
    # The same initial weights on every rank (DDP also broadcasts rank 0's).
    runtime.seed_everything(args.seed)
    task = _BUILDERS[args.task](args, dist.device)
    model = task.model.to(dist.device)
    # Dropout draws differ between ranks; with one process this is `seed`.
    torch.manual_seed(args.seed + dist.rank)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=args.lr, betas=(0.9, 0.99), weight_decay=0.1
    )
    scheduler = training.warmup_cosine(
        optimizer, warmup_steps=args.warmup, total_steps=args.steps
    )
    checkpoint = None if args.out is None else args.out / f"{args.task}.pt"
    resume = None
    if args.resume:
        assert checkpoint is not None
        try:
            resume = training.load_checkpoint(
                checkpoint, model=model, optimizer=optimizer,
                scheduler=scheduler, map_location=dist.device,
            )
        except (ValueError, OSError) as error:
            where = "" if str(checkpoint) in str(error) else f" {checkpoint}"
            raise UsageError(f"--resume{where}: {error}") from error
        _check_resume(args, resume, task.extra, checkpoint)
        # The schedule spans this run's --steps, which may differ from the
        # interrupted run's (a longer run continues a shorter one).
        schedule = training.WarmupCosine(
            warmup_steps=args.warmup, total_steps=args.steps
        )
        scheduler.lr_lambdas = [schedule] * len(optimizer.param_groups)
        for group, base in zip(
            optimizer.param_groups, scheduler.base_lrs, strict=True
        ):
            group["lr"] = base * schedule(scheduler.last_epoch)
    wrapped: nn.Module = model
    if dist.initialized:
        wrapped = nn.parallel.DistributedDataParallel(
            model,
            device_ids=[dist.device.index] if dist.device.type == "cuda"
            else None,
            forward_sync_buffers=False,  # buffers are constants here
        )
    accumulate = args.accumulate
    shards = _shard(args.batch_size, dist, accumulate)
    # DDP averages the gradients of the N ranks; each rank's loss counts N
    # times, each micro-batch's K times (train divides by K).
    factor = dist.world_size * accumulate

    def batches(epoch: int) -> Iterator[Any]:
        step = 0
        while True:
            batch = task.draw(step)
            scale = factor / task.norm(batch)
            micro = [(task.take(batch, rows), scale) for rows in shards]
            yield micro if accumulate > 1 else micro[0]
            step += 1

    def step(micro: Any) -> Tensor:
        inputs, scale = micro
        return task.loss(wrapped, inputs, scale)

    tokens = task.tokens(task.draw(0))  # for tqdm's and the history's rate

    def evaluate() -> float:
        return task.val_loss(model)

    started = time.perf_counter()
    history = training.train(
        step, batches, optimizer, max_steps=args.until or args.steps,
        scheduler=scheduler,
        clip_grad_norm=1.0, model=wrapped, checkpoint=checkpoint,
        checkpoint_every=args.checkpoint_every, resume=resume,
        progress=args.progress, description=args.task,
        tokens_per_batch=tokens, extra=task.extra,
        tokenizer=None if checkpoint is None else task.tokenizer,
        accumulate=accumulate,
        eval_fn=evaluate if args.eval_every else None,
        eval_every=args.eval_every,
    )
    seconds = time.perf_counter() - started
    first = 0 if resume is None else resume["step"]
    done = sum(
        task.tokens(task.draw(s)) for s in range(first, history.steps[-1])
    )
    model.eval()
    with torch.no_grad():
        val = task.val_loss(model)
    if dist.rank == 0 and args.out is not None:
        atomic_write_bytes(
            args.out / "history.json",
            json.dumps(history.to_dict()).encode("utf-8"),
        )
    return {
        "step": history.steps[-1],
        "loss": history.losses[-1],
        "val_loss": val,
        "world_size": dist.world_size,
        "seconds": seconds,
        "tokens_per_s": done / seconds if done else 0.0,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status.

    A usage error (a bad flag, path, device, data file or resume) exits
    through ``parser.error``: the usage line and one error line naming the
    flag on standard error, ``SystemExit(2)``, before the first step.

    Args:
        argv: the arguments (default: ``sys.argv[1:]``).

    Returns:
        0 on success; 1 when writing ``--out`` failed during the run (one
        line on standard error that says where the last good checkpoint
        is).
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
            checkpoint = args.out / f"{args.task}.pt"
            kept = (
                f"the last good checkpoint is {checkpoint}"
                if checkpoint.is_file() else "no checkpoint was saved"
            )
            print(
                f"{parser.prog}: error: writing to --out {args.out} failed "
                f"({' '.join(str(error).split())}); {kept}",
                file=sys.stderr,
            )
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
