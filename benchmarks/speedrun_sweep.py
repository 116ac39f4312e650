"""Steps to validation loss 1.886 for variants of the speedrun recipe.

The sweep that chose ``recipes.gpt_speedrun("cpu")``'s batch, steps and
Muon rate. Steps to the line do not depend on the machine, so it ran on a
lent GPU, many runs at once; each run evaluates the whole validation split
every ``--eval-every`` steps (10) and records the first step at or below
the line. Time per step was measured apart, on two CPU threads
(``benchmarks/gpt_char.py``), and the recipe is the grid point with the
fewest steps times the time of a step. Writes one JSON line per run.

The grid: batch 24, 32 and 40, two schedule lengths each, Muon's rate
0.01, 0.015 and 0.02, three seeds; then the chosen recipe with each
technique taken out (the ablation of ``benchmarks/gpt_char.py``, in
steps).

Usage::

    .venv/bin/python benchmarks/speedrun_sweep.py --workers 13 \\
        --out /tmp/sweep.jsonl
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
from pathlib import Path
from typing import Any

TARGET = 1.886
GRID = {24: (350, 400), 32: (250, 300), 40: (220, 260)}  # batch: steps
MUON_LRS = (0.01, 0.015, 0.02)
ABLATIONS = {
    "speedrun": {},
    "AdamW, not Muon": {"optimizer": "adamw", "lr": 4e-3},
    "no QK-norm": {"qk_norm": False},
    "GELU, not ReLU²": {"activation": "gelu"},
    "tied head": {"tie_weights": True},
    "constant rate": {"warmup": 0, "min_lr": 1e-2},
}


def jobs(seeds: int) -> list[tuple[str, dict[str, Any], int]]:
    """``(name, recipe overrides, seed)`` for every run of the sweep."""
    out = []
    for batch, steps_list in GRID.items():
        for steps, muon_lr in itertools.product(steps_list, MUON_LRS):
            over = {"batch_size": batch, "steps": steps, "muon_lr": muon_lr,
                    "lr": 1e-2, "min_lr": 0.0}
            out += [(f"b{batch} s{steps} m{muon_lr}", over, seed)
                    for seed in range(seeds)]
    for name, change in ABLATIONS.items():
        out += [(name, change, seed) for seed in range(seeds)]
    return out


def run(job: tuple[str, dict[str, Any], int], every: int) -> dict[str, Any]:
    """Train one variant; its evaluations and first step at the line."""
    import torch
    import torch.nn.functional as F

    from transformer_book import data, recipes

    torch.set_num_threads(1)
    name, over, seed = job
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    r = recipes.gpt_speedrun("cpu", **over)
    model = r.model(seed).to(device)
    optimizer = r.optimizer(model)
    scheduler = r.scheduler(optimizer)
    x_val, y_val = (t.to(device) for t in data.every_window(
        r.extras["valid_ids"], r.sizes["block_size"]))
    evals = []
    batches = r.batches(torch.Generator().manual_seed(seed), device)
    for step, batch in enumerate(batches, 1):
        loss = r.loss(model, batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(),
                                       r.sizes["clip_grad_norm"])
        optimizer.step()
        scheduler.step()
        if step % every == 0:
            with torch.no_grad():
                total = sum(float(F.cross_entropy(
                    model(x_val[i : i + 512])[0].flatten(0, 1),
                    y_val[i : i + 512].flatten(), reduction="sum"))
                    for i in range(0, len(x_val), 512))
            evals.append((step, round(total / y_val.numel(), 4)))
    hit = next((s for s, loss in evals if loss <= TARGET), None)
    return {"name": name, "over": over, "seed": seed, "hit": hit,
            "final": evals[-1][1] if evals else None, "evals": evals}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path("sweep.jsonl"))
    args = parser.parse_args(argv)
    multiprocessing.set_start_method("spawn", force=True)
    todo = jobs(args.seeds)
    with multiprocessing.Pool(args.workers) as pool, args.out.open("w") as f:
        for result in pool.starmap(run, [(j, args.eval_every) for j in todo]):
            f.write(json.dumps(result) + "\n")
            print(result["name"], result["seed"], result["hit"], flush=True)


if __name__ == "__main__":
    main()
