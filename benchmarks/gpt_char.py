"""Train a character-level GPT on Tiny Shakespeare until a target val loss.

The data is nanoGPT's split of Tiny Shakespeare: the first 90% of the
characters for training, the last 10% for validation. The validation loss
is deterministic: the mean cross-entropy over every non-overlapping window
of ``block_size`` characters of the validation split (each validation
character after the first is predicted once). It is evaluated every
``eval_every`` optimizer steps, and the evaluation time counts: "seconds"
is the wall time from the first training step to the end of the first
evaluation at or below ``--target-loss`` (default 1.886). Loading the text
and building the model are not timed.

Recipes:

- ``nanogpt``: nanoGPT's CPU configuration (Karpathy's
  ``train_shakespeare_char`` with the README's CPU overrides): 4 layers, 4
  heads, width 128, block 64, batch 12, no biases, dropout 0; AdamW with
  betas (0.9, 0.99), weight decay 0.1 on matrices and embeddings only,
  clipping at 1.0; lr 1e-3 with 100 warmup steps and a cosine decay to 1e-4
  at step 2,000; evaluation every 250 steps; at most 2,000 steps.
- ``book`` (the default): the cpu preset's GPT of the book,
  ``recipes.get("gpt", "cpu")`` (3 layers, lr 4e-3, a cosine to 4e-4 at
  step 1,250, then held) -- see :func:`book_recipe` and the README's
  benchmark table for what changed and why.

``--compare`` runs both recipes for each seed of ``--seeds``, alternating
which goes first, and adds the median ratio of their seconds; the machine's
load changes during a run, so only ratios measured in the same run mean
anything. Every evaluation is logged to standard error; the last line on
standard output is one JSON object: ``{"val_loss", "seconds", "steps",
"tokens_per_s", "params", "recipe", "seed", ...}`` (with ``--compare``:
the ratio, and every run under ``"runs"``).

Usage::

    .venv/bin/python benchmarks/gpt_char.py
    .venv/bin/python benchmarks/gpt_char.py --recipe nanogpt
    .venv/bin/python benchmarks/gpt_char.py --compare --seeds 3
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_book import data, recipes
from transformer_book.models import GPT, GPTConfig
from transformer_book.tokenization import CharTokenizer
from transformer_book.training import count_parameters, fit, warmup_cosine


@dataclass(frozen=True)
class Recipe:
    """A model size and a training recipe."""

    d_model: int
    num_heads: int
    num_layers: int
    block_size: int
    batch_size: int
    lr: float
    min_lr: float
    warmup_steps: int
    decay_steps: int
    max_steps: int
    eval_every: int
    betas: tuple[float, float] = (0.9, 0.99)
    weight_decay: float = 0.1
    clip_grad_norm: float = 1.0
    d_ff: int | None = None
    bias: bool = False
    dropout: float = 0.0
    eval_batch_size: int = 256


RECIPES: dict[str, Recipe] = {
    # nanoGPT's config/train_shakespeare_char.py with the README's CPU
    # overrides (--device=cpu --compile=False --eval_iters=20
    # --log_interval=1 --block_size=64 --batch_size=12 --n_layer=4
    # --n_head=4 --n_embd=128 --max_iters=2000 --lr_decay_iters=2000
    # --dropout=0.0); its eval_interval is 250.
    "nanogpt": Recipe(
        d_model=128,
        num_heads=4,
        num_layers=4,
        block_size=64,
        batch_size=12,
        lr=1e-3,
        min_lr=1e-4,
        warmup_steps=100,
        decay_steps=2000,
        max_steps=2000,
        eval_every=250,
    ),
    # The book's recipe, the cpu preset's GPT (recipes.get("gpt", "cpu")):
    # see book_recipe.
}


def book_recipe() -> Recipe:
    """The cpu preset's GPT recipe (``recipes.get("gpt", "cpu")``).

    nanoGPT's block and batch, one layer fewer (a quarter less arithmetic
    per step and per evaluation), four times the learning rate (a small
    model with clipping and warmup tolerates it) with half the warmup,
    and a cosine that ends at step 1,250 instead of 2,000; here it then
    holds the minimum rate up to nanoGPT's 2,000 steps. Measured on one
    seed: lr 2e-3 with a cosine to 1,500 gave 1.887 at step 1,500, 3e-3
    gave 1.874 at 1,250, 4e-3 to 1,250 gave 1.862 at 1,250.
    """
    s = recipes.defaults("gpt", "cpu")
    return Recipe(
        d_model=s["d_model"],
        num_heads=s["num_heads"],
        num_layers=s["num_layers"],
        block_size=s["block_size"],
        batch_size=s["batch_size"],
        lr=s["lr"],
        min_lr=s["min_lr"],
        warmup_steps=s["warmup"],
        decay_steps=s["steps"],
        max_steps=max(s["steps"], 2000),
        eval_every=250,
        betas=s["betas"],
        weight_decay=s["weight_decay"],
        clip_grad_norm=s["clip_grad_norm"],
        d_ff=s["d_ff"],
        bias=s["bias"],
        dropout=s["dropout"],
    )


RECIPES["book"] = book_recipe()


# --------------------------------------------------------------------------
# Data: pure functions (tested in tests/test_benchmark_gpt_char.py)
# --------------------------------------------------------------------------


def load_text() -> str:
    """Tiny Shakespeare, the copy that ships with the package."""
    return data.tiny_shakespeare()


def split_ids(
    ids: Tensor, train_fraction: float = 0.9
) -> tuple[Tensor, Tensor]:
    """nanoGPT's split: the first ``int(0.9 n)`` ids train, the rest validate.

    Shape:
        - ids: ``(n,)``.
        - returns ``(n_train,)`` and ``(n - n_train,)``.
    """
    n_train = int(train_fraction * len(ids))
    return ids[:n_train], ids[n_train:]


def val_windows(val: Tensor, block_size: int) -> tuple[Tensor, Tensor]:
    """Every non-overlapping window of ``val``: inputs and next-id targets.

    Window ``i`` reads ``val[i*T : (i+1)*T]`` and predicts
    ``val[i*T+1 : (i+1)*T+1]`` (``T = block_size``), so each id after the
    first is a target at most once; the tail that fills no window is left
    out.

    Shape:
        - val: ``(n,)``.
        - returns two ``(N, T)`` tensors, ``N = (n - 1) // T``.
    """
    return data.every_window(val, block_size)


@torch.no_grad()
def mean_loss(
    model: nn.Module, x: Tensor, y: Tensor, batch_size: int = 256
) -> float:
    """Mean cross-entropy over every position of the windows ``(x, y)``.

    The model runs in evaluation mode on batches of ``batch_size`` windows
    and is put back in its mode afterwards.
    """
    was_training = model.training
    model.eval()
    total = 0.0
    try:
        for start in range(0, len(x), batch_size):
            logits, _ = model(x[start : start + batch_size])
            total += float(
                F.cross_entropy(
                    logits.flatten(0, 1),  # (b, T, V) -> (b*T, V)
                    y[start : start + batch_size].flatten(),  # (b*T,)
                    reduction="sum",
                )
            )
    finally:
        model.train(was_training)
    return total / y.numel()


def optimizer_groups(
    model: nn.Module, weight_decay: float
) -> list[dict[str, Any]]:
    """nanoGPT's groups: decay matrices and embeddings, not gains/biases."""
    params = [p for p in model.parameters() if p.requires_grad]
    return [
        {
            "params": [p for p in params if p.dim() >= 2],
            "weight_decay": weight_decay,
        },
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]


# --------------------------------------------------------------------------
# One run
# --------------------------------------------------------------------------


def run(
    recipe: Recipe,
    ids: Tensor,
    vocab_size: int,
    *,
    seed: int,
    target_loss: float,
    max_steps: int | None = None,
    name: str = "",
) -> dict[str, Any]:
    """Train with ``recipe`` until the val loss reaches ``target_loss``.

    Returns:
        The run's record: ``val_loss`` (at the first evaluation at or
        below the target, else the last), ``seconds`` (to that evaluation;
        ``None`` if the target was never reached), ``steps``,
        ``tokens_per_s`` (training tokens per second of training steps,
        evaluation excluded), ``params`` and the evaluations.
    """
    torch.manual_seed(seed)
    train_ids, val_ids = split_ids(ids)
    val_x, val_y = val_windows(val_ids, recipe.block_size)
    config = GPTConfig(
        vocab_size=vocab_size,
        max_seq_len=recipe.block_size,
        d_model=recipe.d_model,
        num_heads=recipe.num_heads,
        num_layers=recipe.num_layers,
        d_ff=recipe.d_ff,
        dropout=recipe.dropout,
        bias=recipe.bias,
    )
    model = GPT(config)
    optimizer = torch.optim.AdamW(
        optimizer_groups(model, recipe.weight_decay),
        lr=recipe.lr,
        betas=recipe.betas,
        foreach=True,
    )
    scheduler = warmup_cosine(
        optimizer,
        warmup_steps=recipe.warmup_steps,
        total_steps=recipe.decay_steps,
        min_lr_ratio=recipe.min_lr / recipe.lr,
    )
    cap = recipe.max_steps if max_steps is None else max_steps
    generator = torch.Generator().manual_seed(seed)
    state: dict[str, Any] = {"evals": [], "eval_seconds": 0.0, "done": False}

    def until_target() -> Iterator[tuple[Tensor, Tensor]]:
        for _ in range(cap):
            if state["done"]:
                return
            yield data.random_windows(
                train_ids, recipe.block_size, recipe.batch_size, generator
            )

    def step(batch: tuple[Tensor, Tensor]) -> Tensor:
        x, y = batch
        _, loss = model(x, y)
        assert loss is not None
        return loss

    def evaluate() -> float:
        started = time.perf_counter()
        loss = mean_loss(model, val_x, val_y, recipe.eval_batch_size)
        now = time.perf_counter()
        state["eval_seconds"] += now - started
        steps = len(state["evals"]) + 1
        steps *= recipe.eval_every
        state["evals"].append(
            {
                "step": steps,
                "val_loss": loss,
                "seconds": now - start,
                "cpu_seconds": time.process_time() - cpu_start,
            }
        )
        print(
            f"[{name} seed {seed}] step {steps}: val loss {loss:.4f} "
            f"at {now - start:.1f} s",
            file=sys.stderr,
            flush=True,
        )
        if loss <= target_loss:
            state["done"] = True
        return loss

    start, cpu_start = time.perf_counter(), time.process_time()
    history = fit(
        step,
        until_target(),
        optimizer,
        epochs=1,
        scheduler=scheduler,
        clip_grad_norm=recipe.clip_grad_norm,
        eval_fn=evaluate,
        eval_every=recipe.eval_every,
        model=model,
        progress=False,
    )
    elapsed = time.perf_counter() - start
    evals = state["evals"]
    reached = [e for e in evals if e["val_loss"] <= target_loss]
    final = reached[0] if reached else (evals[-1] if evals else None)
    steps = len(history.steps)
    train_seconds = elapsed - state["eval_seconds"]
    return {
        "val_loss": None if final is None else round(final["val_loss"], 4),
        "seconds": round(reached[0]["seconds"], 2) if reached else None,
        "steps": reached[0]["step"] if reached else steps,
        "tokens_per_s": round(
            steps * recipe.batch_size * recipe.block_size / train_seconds
        ),
        "params": count_parameters(model),
        "recipe": name,
        "seed": seed,
        "reached": bool(reached),
        # CPU time of this process to the same evaluation: less sensitive
        # than wall time to other processes sharing the cores.
        "cpu_seconds": (
            round(reached[0]["cpu_seconds"], 2) if reached else None
        ),
        "total_seconds": round(elapsed, 2),
        "eval_seconds": round(state["eval_seconds"], 2),
        "evals": [
            {
                k: round(v, 4) if isinstance(v, float) else v
                for k, v in e.items()
            }
            for e in evals
        ],
    }


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------


# Recipe fields without a flag of their own (--max-steps caps every run).
_NOT_FLAGS = ("betas", "max_steps")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="book", choices=sorted(RECIPES))
    parser.add_argument("--target-loss", type=float, default=1.886)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--seeds", type=int, default=1, help="run seeds seed..seed+n-1"
    )
    parser.add_argument(
        "--max-steps", type=int, default=None, help="safety cap on steps"
    )
    parser.add_argument(
        "--compare",
        action="store_true",
        help="run the recipe and nanogpt for each seed, interleaved",
    )
    for field in dataclasses.fields(Recipe):
        if field.name in _NOT_FLAGS:
            continue
        flag = "--" + field.name.replace("_", "-")
        kind = float if field.type == "float" else int
        parser.add_argument(flag, type=kind, default=None)
    return parser.parse_args(argv)


def recipe_from_args(args: argparse.Namespace) -> Recipe:
    """The chosen recipe with the fields given on the command line."""
    recipe = RECIPES[args.recipe]
    overrides = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(Recipe)
        if f.name not in _NOT_FLAGS and getattr(args, f.name) is not None
    }
    if "bias" in overrides:
        overrides["bias"] = bool(overrides["bias"])
    return dataclasses.replace(recipe, **overrides)


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    text = load_text()
    tokenizer = CharTokenizer(byte_fallback=False).train(text)
    ids = torch.tensor(tokenizer.encode(text), dtype=torch.long)
    recipe = recipe_from_args(args)
    options = {"target_loss": args.target_loss, "max_steps": args.max_steps}
    seeds = range(args.seed, args.seed + args.seeds)
    runs: list[dict[str, Any]] = []
    ratios: list[float] = []
    for i, seed in enumerate(seeds):
        pair = [(args.recipe, recipe)]
        if args.compare:
            pair.append(("nanogpt", RECIPES["nanogpt"]))
            if i % 2:  # alternate which recipe runs first
                pair.reverse()
        results = {}
        for name, chosen in pair:
            results[name] = run(
                chosen,
                ids,
                tokenizer.vocab_size,
                seed=seed,
                name=name,
                **options,
            )
            print(json.dumps(results[name]), file=sys.stderr, flush=True)
            runs.append(results[name])
        if args.compare:
            ours, base = results[args.recipe], results["nanogpt"]
            if ours["seconds"] is not None:
                # nanoGPT's recipe runs 2,000 steps; if it misses the
                # target there, its full run is the time to beat.
                base_seconds = base["seconds"] or base["total_seconds"]
                ratios.append(ours["seconds"] / base_seconds)
    mine = [r for r in runs if r["recipe"] == args.recipe]
    summary = _summary(mine)
    summary["threads"] = args.threads
    summary["target_loss"] = args.target_loss
    if args.compare:
        summary["nanogpt"] = _summary(
            [r for r in runs if r["recipe"] == "nanogpt"]
        )
        summary["ratios"] = [round(r, 3) for r in ratios]
        summary["ratio"] = (
            round(statistics.median(ratios), 3)
            if len(ratios) == len(seeds)
            else None
        )
    if len(runs) > 1:
        summary["runs"] = [
            {k: v for k, v in r.items() if k != "evals"} for r in runs
        ]
    print(json.dumps(summary))
    return summary


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One recipe's record; medians over seeds when there are several."""
    if len(runs) == 1:
        return {k: v for k, v in runs[0].items() if k != "evals"}
    out: dict[str, Any] = {}
    for key in ("val_loss", "seconds", "steps", "tokens_per_s"):
        values = [r[key] for r in runs if r[key] is not None]
        out[key] = _median(values) if len(values) == len(runs) else None
    out["params"] = runs[0]["params"]
    out["recipe"] = runs[0]["recipe"]
    out["seeds"] = [r["seed"] for r in runs]
    out["reached"] = all(r["reached"] for r in runs)
    return out


if __name__ == "__main__":
    main()
