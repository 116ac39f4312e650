"""An IsoFLOP grid of character GPTs on Tiny Shakespeare.

For each compute budget ``C`` (in floating-point operations) and each
model size, train the GPT chapter's model (``recipes.get("gpt", "cpu")``:
its data, batches, optimizer and evaluation) with that width, depth and
head count for ``D = C / (6 N)`` tokens, where ``N`` is the model's
non-embedding parameters (Kaplan et al., 2020: the token and position
tables left out). The steps are ``D / (batch_size * block_size)``,
rounded; the learning rate warms up for a tenth of them, then follows a
cosine to a tenth of its peak at the last step, so every run ends its own
schedule. The batches hold 32 windows of 64 characters (the recipe's
12 would spend the small models' time on per-step overhead). One seed
draws the weights and the batches, on one thread, so
a run repeats exactly on the same machine.

Writes one row per run to ``book/beyond/data/scaling.csv``: the budget,
the size's name, ``d_model``, layers, heads, non-embedding parameters,
tokens, steps, the final validation loss (every validation window) and
the seconds. The smallest model, ``d8-L1``, runs at the smallest budget
only: there the loss rises from ``d16-L1`` on, and the minimum needs a
point on its other side.

Usage::

    .venv/bin/python benchmarks/scaling.py          # 19 runs, ~15-30 min
    .venv/bin/python benchmarks/scaling.py --budgets 1e10 --sizes d16-L1
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import torch

from transformer_book import recipes
from transformer_book.models import GPT, GPTConfig
from transformer_book.training import count_parameters, fit

OUT = Path(__file__).resolve().parents[1] / "book/beyond/data/scaling.csv"
FIELDS = ("budget", "size", "d_model", "num_layers", "num_heads",
          "params", "tokens", "steps", "val_loss", "seconds")
#: Model sizes by name: (d_model, num_layers, num_heads). The first runs
#: only at the smallest budget, where the others' losses rise from the
#: second on: the optimum needs a point below it.
SIZES: dict[str, tuple[int, int, int]] = {
    "d8-L1": (8, 1, 1),
    "d16-L1": (16, 1, 1),
    "d24-L1": (24, 1, 2),
    "d32-L1": (32, 1, 2),
    "d48-L1": (48, 1, 3),
    "d48-L2": (48, 2, 3),
    "d64-L2": (64, 2, 4),
}
#: Compute budgets, in FLOPs (6 N D).
BUDGETS = (1e11, 3e11, 9e11)
#: Windows of 64 characters a batch: more than the recipe's 12, since a
#: step of these small models costs mostly its fixed overhead.
BATCH_SIZE = 32


def non_embedding_params(model: torch.nn.Module) -> int:
    """Parameters less the token and position tables (Kaplan's ``N``)."""
    tables = [model.token_embedding, model.position_embedding]
    return count_parameters(model) - sum(
        count_parameters(t) for t in tables if t is not None)


def size_recipe(size: str, steps: int, **overrides) -> recipes.Recipe:
    """The GPT recipe with ``size``'s shape, ``steps`` and its schedule."""
    d_model, num_layers, num_heads = SIZES[size]
    overrides = {"batch_size": BATCH_SIZE, **overrides}
    return recipes.get("gpt", "cpu", d_model=d_model, num_layers=num_layers,
                       num_heads=num_heads, steps=steps, warmup=None,
                       **overrides)


def plan(budget: float, size: str, batch_size: int = BATCH_SIZE,
         block_size: int = 64) -> dict:
    """The parameters, tokens and steps of ``size`` at ``budget`` FLOPs."""
    d_model, num_layers, num_heads = SIZES[size]
    cpu = recipes.defaults("gpt", "cpu")
    model = GPT(GPTConfig(vocab_size=1, max_seq_len=block_size,
                          d_model=d_model, num_layers=num_layers,
                          num_heads=num_heads, d_ff=cpu["d_ff"],
                          bias=cpu["bias"]))  # N depends on neither table
    params = non_embedding_params(model)
    steps = max(1, round(budget / (6 * params) / (batch_size * block_size)))
    return {"params": params, "steps": steps,
            "tokens": steps * batch_size * block_size}


def run(budget: float, size: str, seed: int = 0, **overrides) -> dict:
    """Train ``size`` at ``budget`` FLOPs; its row of the CSV."""
    sizes = recipes.defaults("gpt", "cpu") | {"batch_size": BATCH_SIZE,
                                              **overrides}
    planned = plan(budget, size, sizes["batch_size"], sizes["block_size"])
    recipe = size_recipe(size, planned["steps"], **overrides)
    model = recipe.model(seed)
    optimizer = recipe.optimizer(model)
    start = time.perf_counter()
    fit(lambda batch: recipe.loss(model, batch),
        recipe.batches(torch.Generator().manual_seed(seed), "cpu"),
        optimizer, scheduler=recipe.scheduler(optimizer),
        clip_grad_norm=recipe.sizes["clip_grad_norm"], model=model,
        progress=False)
    model.eval()
    with torch.no_grad():
        loss = recipe.evaluate(model)["loss"]
    d_model, num_layers, num_heads = SIZES[size]
    return {"budget": f"{budget:.3g}", "size": size, "d_model": d_model,
            "num_layers": num_layers, "num_heads": num_heads, **planned,
            "val_loss": round(loss, 5),
            "seconds": round(time.perf_counter() - start, 1)}


def grid(budgets: list[float],
         sizes: list[str] | None = None) -> list[tuple[float, str]]:
    """The runs, budget by budget: ``sizes`` at every budget, or by default
    every size of :data:`SIZES` but the first, which runs only at the
    smallest budget."""
    low = min(budgets)
    return [(budget, size) for budget in sorted(budgets)
            for size in sizes or list(SIZES)[budget != low:]]


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", type=float, nargs="+",
                        default=list(BUDGETS))
    parser.add_argument("--sizes", nargs="+", default=None,
                        choices=list(SIZES),
                        help="these sizes at every budget (default: "
                        "the first only at the smallest budget)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--valid-windows", type=int, default=None,
                        help="score fewer validation windows (quick checks)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    overrides = {} if args.valid_windows is None else {
        "valid_windows": args.valid_windows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    with open(args.out, "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=FIELDS)
        writer.writeheader()
        for budget, size in grid(args.budgets, args.sizes):
            rows.append(run(budget, size, args.seed, **overrides))
            writer.writerow(rows[-1])
            file.flush()  # a partial grid is still a usable file
            print(rows[-1], flush=True)
    return rows


if __name__ == "__main__":
    main()
