"""Train a small character GPT with mixture-of-experts layers, and dense
twins with the same active and the same total parameters.

A GPT of width 64, 2 layers and 4 heads on Tiny Shakespeare (the book's
cpu recipe otherwise: context 64, batch 12, AdamW at 4e-3 with a cosine
to 4e-4), ``--steps`` steps, on one thread, for each seed and model:

- ``dense-active``: feed-forward width 256, as wide as the two experts
  a token of the MoE model uses;
- ``moe``: 8 experts of width 128, top-2, the balancing loss times 0.01
  added to the training loss;
- ``dense-total``: feed-forward width 1,024 (the MoE model's parameters,
  routers aside);
- ``moe-unbalanced``: the MoE model without the balancing loss.

The seed draws the weights and the batches. Every ``--eval-every`` steps
the validation loss on the first 256 validation windows is written, and
for MoE models the load of the busiest expert, ``E max_i f_i`` (1 when
balanced, E when one expert takes every token), the larger of the two
layers'. Writes ``book/beyond/data/moe.csv``; ``book/beyond/moe.md``
reruns one of its runs.

Usage::

    .venv/bin/python benchmarks/moe.py                 # 12 runs, ~8 min
    .venv/bin/python benchmarks/moe.py --steps 20 --out /tmp/moe.csv
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from transformer_book import data, moe, recipes
from transformer_book._io import write_csv
from transformer_book.models import GPT
from transformer_book.training import count_parameters, fit

OUT = Path(__file__).resolve().parents[1] / "book/beyond/data/moe.csv"
FIELDS = ("model", "seed", "step", "val_loss", "max_load", "params",
          "active_params", "seconds")
MODELS = ("dense-active", "moe", "dense-total", "moe-unbalanced")
NUM_EXPERTS, TOP_K, AUX_WEIGHT, D_FF = 8, 2, 0.01, 128
SIZES = dict(d_model=64, num_heads=4, num_layers=2, warmup=30)


def build(recipe: recipes.Recipe, name: str, seed: int) -> GPT:
    """The model ``name``, its weights drawn after ``manual_seed(seed)``."""
    torch.manual_seed(seed)
    if name == "dense-total":
        recipe = recipes.get("gpt", "cpu", **{**recipe.sizes,
                                              "d_ff": NUM_EXPERTS * D_FF})
    model = GPT(recipe.config)
    if name.startswith("moe"):
        moe.replace_feed_forward(model, NUM_EXPERTS, TOP_K, d_ff=D_FF)
        model.reset_parameters()  # the experts start as GPT's FFNs do
    return model


@torch.no_grad()
def evaluate(model: GPT, valid: tuple[torch.Tensor, torch.Tensor]
             ) -> tuple[float, float]:
    """Validation loss, and the busiest expert's load (NaN if dense)."""
    loss = float(model(*valid)[1])
    layers = [m for m in model.modules() if isinstance(m, moe.MoEFeedForward)]
    loads = [torch.bincount(m.expert_index.flatten(), minlength=NUM_EXPERTS)
             for m in layers]
    max_load = max((float(n.max() / n.sum() * NUM_EXPERTS) for n in loads),
                   default=float("nan"))
    return loss, max_load


def run(recipe: recipes.Recipe, name: str, seed: int,
        eval_every: int) -> list[dict]:
    """One training; a row per evaluation."""
    model = build(recipe, name, seed)
    valid = data.every_window(recipe.extras["valid_ids"],
                              recipe.sizes["block_size"], 256)
    aux = AUX_WEIGHT if name == "moe" else 0.0
    params = count_parameters(model)
    # A token meets one expert of each layer, and its router.
    inactive = sum(count_parameters(e) for m in model.modules()
                   if isinstance(m, moe.MoEFeedForward)
                   for e in m.experts[TOP_K:])
    rows: list[dict] = []
    done = [0]  # steps taken

    def step(batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        done[0] += 1
        loss = recipe.loss(model, batch)
        return loss + aux * moe.load_balancing_loss(model) if aux else loss

    def record() -> float:
        loss, max_load = evaluate(model, valid)
        rows.append({"model": name, "seed": seed, "step": done[0],
                     "val_loss": round(loss, 5),
                     "max_load": round(max_load, 4), "params": params,
                     "active_params": params - inactive,
                     "seconds": round(time.perf_counter() - start, 1)})
        return loss

    optimizer = recipe.optimizer(model)
    start = time.perf_counter()
    fit(step, recipe.batches(torch.Generator().manual_seed(seed)),
        optimizer, scheduler=recipe.scheduler(optimizer),
        clip_grad_norm=recipe.sizes["clip_grad_norm"], model=model,
        eval_fn=record, eval_every=eval_every, progress=False)
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS),
                        choices=MODELS)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--eval-every", type=int, default=50)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    recipe = recipes.get("gpt", "cpu", steps=args.steps, d_ff=TOP_K * D_FF,
                         **SIZES)
    rows = []
    for seed in range(args.seeds):
        for name in args.models:
            rows += run(recipe, name, seed, args.eval_every)
            print(rows[-1], flush=True)
    write_csv(args.out, rows, FIELDS)
    return rows


if __name__ == "__main__":
    main()
