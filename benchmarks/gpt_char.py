"""Train a character-level GPT on Tiny Shakespeare until a target val loss.

The data is nanoGPT's split of Tiny Shakespeare: the first 90% of the
characters for training, the last 10% for validation. The validation loss
is deterministic: the mean cross-entropy over every non-overlapping window
of ``block_size`` characters of the validation split (each validation
character after the first is predicted once). It is evaluated every
``eval_every`` optimizer steps from step ``eval_from`` (default
``eval_every``), and the evaluation time counts: "seconds"
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
- ``book``: the cpu preset's GPT of the book,
  ``recipes.get("gpt", "cpu")`` (3 layers, lr 4e-3, a cosine to 4e-4 at
  step 1,250, then held) -- see :func:`book_recipe` and the README's
  benchmark table for what changed and why.
- ``speedrun`` (the default, the book's fastest):
  ``recipes.gpt_speedrun("cpu")``, the book's model with Muon for the
  blocks' matrices, QK-norm, ReLU², an untied head, batch 32 and a cosine
  to zero at step 300, evaluated every 20 steps from step 200
  (:func:`speedrun_recipe`; ``book/beyond/speedrun.md``).

``--compare`` runs both recipes for each seed of ``--seeds``, alternating
which goes first, and adds the median ratio of their seconds; the machine's
load changes during a run, so only ratios measured in the same run mean
anything. Every evaluation is logged to standard error; the last line on
standard output is one JSON object: ``{"val_loss", "seconds", "steps",
"tokens_per_s", "params", "recipe", "seed", ...}`` (with ``--compare``:
the ratio, and every run under ``"runs"``).

``--ablation [CSV]`` runs the speedrun with each of its techniques taken
out in turn (:data:`ABLATIONS`, each to its last step), then the book's
and nanoGPT's recipes, for each seed, into ``CSV`` (by default
``book/beyond/data/speedrun.csv``, which the speedrun chapter reads).

Usage::

    .venv/bin/python benchmarks/gpt_char.py
    .venv/bin/python benchmarks/gpt_char.py --recipe nanogpt
    .venv/bin/python benchmarks/gpt_char.py --recipe book --compare
    .venv/bin/python benchmarks/gpt_char.py --compare --seeds 3
    .venv/bin/python benchmarks/gpt_char.py --ablation --seeds 3
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
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_book import data, recipes
from transformer_book._io import write_csv
from transformer_book.models import GPT, GPTConfig
from transformer_book.tokenization import CharTokenizer
from transformer_book.training import count_parameters, fit


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
    eval_from: int = 0  # first evaluation, then every eval_every steps
    activation: str = "gelu"
    qk_norm: bool = False
    tie_weights: bool = True
    optimizer: str = "adamw"
    muon_lr: float = 0.0


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
    return _from_sizes(s, max_steps=max(s["steps"], 2000), eval_every=250)


def speedrun_recipe() -> Recipe:
    """``recipes.gpt_speedrun("cpu")``: the book's model with Muon, QK-norm,
    ReLU², an untied head, batch 32 and a cosine to zero at step 300.

    It evaluates every 20 steps from step 200 (a full evaluation costs
    about 13 steps' time, and the target falls between steps 200 and 300
    in the sweeps of the README).
    """
    s = recipes.gpt_speedrun("cpu").sizes
    return _from_sizes(s, max_steps=s["steps"], eval_every=20, eval_from=200)


def _from_sizes(s: dict[str, Any], **fields: Any) -> Recipe:
    names = ("d_model", "num_heads", "num_layers", "block_size", "batch_size",
             "lr", "min_lr", "betas", "weight_decay", "clip_grad_norm",
             "d_ff", "bias", "dropout", "activation", "qk_norm",
             "tie_weights", "optimizer")
    return Recipe(**{n: s[n] for n in names}, warmup_steps=s["warmup"],
                  decay_steps=s["steps"], muon_lr=s["muon_lr"] or 0.0,
                  **fields)


def _sizes(recipe: Recipe) -> dict[str, Any]:
    """The recipe as ``recipes`` sizes (for its optimizer and schedule)."""
    s = dataclasses.asdict(recipe)
    return {**s, "warmup": recipe.warmup_steps, "steps": recipe.decay_steps,
            "decay_vectors": False}


RECIPES["book"] = book_recipe()
RECIPES["speedrun"] = speedrun_recipe()


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
    stop: bool = True,
) -> dict[str, Any]:
    """Train with ``recipe`` until the val loss reaches ``target_loss``
    (with ``stop`` False: to the last step, timing the first reach).

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
        activation=recipe.activation,
        qk_norm=recipe.qk_norm,
        tie_weights=recipe.tie_weights,
    )
    model = GPT(config)
    optimizer = recipes.optimizer(model, _sizes(recipe))
    scheduler = recipes.scheduler(optimizer, _sizes(recipe))
    cap = recipe.max_steps if max_steps is None else max_steps
    generator = torch.Generator().manual_seed(seed)
    state: dict[str, Any] = {"evals": [], "eval_seconds": 0.0}

    def until_target() -> Iterator[tuple[Tensor, Tensor]]:
        for step in range(1, cap + 1):
            yield data.random_windows(
                train_ids, recipe.block_size, recipe.batch_size, generator
            )
            # Resumed once step `step` is done: evaluate on the schedule.
            after = step - recipe.eval_from
            if after >= 0 and after % recipe.eval_every == 0:
                if evaluate(step) <= target_loss and stop:
                    return

    def step(batch: tuple[Tensor, Tensor]) -> Tensor:
        x, y = batch
        _, loss = model(x, y)
        assert loss is not None
        return loss

    def evaluate(steps: int) -> float:
        started = time.perf_counter()
        loss = mean_loss(model, val_x, val_y, recipe.eval_batch_size)
        now = time.perf_counter()
        state["eval_seconds"] += now - started
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
        return loss

    start, cpu_start = time.perf_counter(), time.process_time()
    history = fit(
        step,
        until_target(),
        optimizer,
        epochs=1,
        scheduler=scheduler,
        clip_grad_norm=recipe.clip_grad_norm,
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
        "final_val_loss": round(evals[-1]["val_loss"], 4) if evals else None,
        "ms_per_step": round(1000 * train_seconds / max(steps, 1), 1),
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
# The speedrun's ablation
# --------------------------------------------------------------------------

#: The speedrun with one technique taken out at a time (same steps, batch
#: and schedule otherwise). Without Muon, AdamW trains every matrix at the
#: book's tuned rate; the constant rate has no warmup and no decay.
ABLATIONS: dict[str, dict[str, Any]] = {
    "speedrun": {},
    "AdamW, not Muon": {"optimizer": "adamw",
                        "lr": recipes.defaults("gpt", "cpu")["lr"]},
    "no QK-norm": {"qk_norm": False},
    "GELU, not ReLU²": {"activation": "gelu"},
    "tied head": {"tie_weights": True},
    "constant rate": {"warmup_steps": 0, "min_lr": RECIPES["speedrun"].lr},
}
ABLATION_CSV = (
    Path(__file__).resolve().parents[1] / "book/beyond/data/speedrun.csv"
)
_ABLATION_FIELDS = ("variant", "seed", "seconds", "steps", "reached",
                    "val_loss", "final_val_loss", "ms_per_step",
                    "eval_seconds", "total_seconds", "threads")


def ablation(ids: Tensor, vocab_size: int, seeds: range, *, threads: int,
             target_loss: float, out: Path) -> list[dict[str, Any]]:
    """Each variant of :data:`ABLATIONS` for each seed, run to its last
    step, then the book's and nanoGPT's recipes to the target; the rows
    are written to ``out``."""
    rows = []
    variants = [(k, dataclasses.replace(RECIPES["speedrun"], **v), False)
                for k, v in ABLATIONS.items()]
    variants += [(k, RECIPES[k], True) for k in ("book", "nanogpt")]
    for seed in seeds:
        for variant, recipe, stop in variants:
            result = run(recipe, ids, vocab_size, seed=seed, name=variant,
                         target_loss=target_loss, stop=stop)
            result.update(variant=variant, threads=threads)
            print(json.dumps(result), file=sys.stderr, flush=True)
            rows.append({k: result[k] for k in _ABLATION_FIELDS})
    write_csv(out, rows, _ABLATION_FIELDS)
    return rows


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------


# Recipe fields without a flag of their own (--max-steps caps every run).
_NOT_FLAGS = ("betas", "max_steps")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--recipe", default="speedrun", choices=sorted(RECIPES)
    )
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
        "--ablation",
        nargs="?",
        const=str(ABLATION_CSV),
        default=None,
        metavar="CSV",
        help="run the speedrun's ablation for each seed into CSV",
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
        kind = {"float": float, "str": str}.get(str(field.type), int)
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
    for flag in ("bias", "qk_norm", "tie_weights"):  # 0 or 1
        if flag in overrides:
            overrides[flag] = bool(overrides[flag])
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
    if args.ablation:
        rows = ablation(ids, tokenizer.vocab_size,
                        range(args.seed, args.seed + args.seeds),
                        threads=args.threads, target_loss=args.target_loss,
                        out=Path(args.ablation))
        summary = {"ablation": args.ablation, "rows": rows}
        print(json.dumps(summary))
        return summary
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
