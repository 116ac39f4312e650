"""Train the book's character GPT with fewer key/value heads.

The cpu recipe of ``recipes.get("gpt", "cpu")`` (4 query heads of width
32, 3 layers, 1,250 steps on Tiny Shakespeare), trained as
``recipes.trained`` trains it, once for each number of key/value heads
(4: multi-head, 2: grouped-query, 1: multi-query attention) and each
seed, on one thread. The seed draws the weights and the batches, so the
4-head run of seed 0 is the GPT chapter's model. Writes one row per run
to ``book/efficient/kv-heads.csv``: the key/value heads, the seed, the
parameters, the validation loss (every validation window) and the
seconds.

Usage::

    .venv/bin/python benchmarks/kv_heads.py            # 9 runs, ~15 min
    .venv/bin/python benchmarks/kv_heads.py --steps 20 --out /tmp/kv.csv
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import torch

from transformer_book import recipes
from transformer_book._io import write_csv
from transformer_book.models import GPT
from transformer_book.training import count_parameters, fit

OUT = Path(__file__).resolve().parents[1] / "book/efficient/kv-heads.csv"
FIELDS = ("num_heads", "num_kv_heads", "seed", "steps", "params",
          "val_loss", "seconds")


def run(recipe: recipes.Recipe, num_kv_heads: int, seed: int) -> dict:
    """One training, as ``recipes.trained`` runs it, with ``num_kv_heads``."""
    config = dataclasses.replace(recipe.config, num_kv_heads=num_kv_heads)
    torch.manual_seed(seed)  # the weights, as recipe.model(seed) draws them
    model = GPT(config)
    optimizer = recipe.optimizer(model)
    batches = recipe.batches(torch.Generator().manual_seed(seed), "cpu")
    start = time.perf_counter()
    fit(lambda batch: recipe.loss(model, batch), batches, optimizer,
        scheduler=recipe.scheduler(optimizer),
        clip_grad_norm=recipe.sizes["clip_grad_norm"], model=model,
        progress=False)
    model.eval()
    with torch.no_grad():
        loss = recipe.evaluate(model)["loss"]
    return {"num_heads": config.num_heads, "num_kv_heads": num_kv_heads,
            "seed": seed, "steps": recipe.sizes["steps"],
            "params": count_parameters(model), "val_loss": round(loss, 5),
            "seconds": round(time.perf_counter() - start, 1)}


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kv-heads", type=int, nargs="+", default=[4, 2, 1])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=None,
                        help="fewer steps, for a quick check")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    overrides = {} if args.steps is None else {"steps": args.steps}
    recipe = recipes.get("gpt", "cpu", **overrides)
    rows = []
    for seed in range(args.seeds):
        for num_kv_heads in args.kv_heads:
            rows.append(run(recipe, num_kv_heads, seed))
            print(rows[-1], flush=True)
    write_csv(args.out, rows, FIELDS)
    return rows


if __name__ == "__main__":
    main()
