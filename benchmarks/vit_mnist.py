"""Train the book's ViT on MNIST 5k (or Fashion-MNIST) and report accuracy.

The book's recipe (the default): ``recipes.get("vit")``, the ViT of
``book/vision/training-vit.md`` (7 x 7 patches, width 64, 3 pre-LN
layers, 4 heads, MLP width 128; AdamW, a warmup-cosine learning rate,
label smoothing 0.1 and random shifts of up to 1 pixel) on the 4,000
training digits of ``data.mnist_5k()``; the test accuracy is measured on
its 1,000 held-out digits.

``--sweep CSV`` measures what the chapter plots and writes it to CSV:
the book's ViT and the chapter's CNN trained on 500 to 4,000 digits (the
first tenth of the size from every class) for the recipe's number of
epochs, and ViTs with 14 x 14 patches on all 4,000, for seeds 0, 1, 2
(``--seeds``), each trained as ``recipes.trained`` trains. The book's
``training-vit.csv`` joins three runs, one seed each, made in parallel.

``--reference`` runs the fixed reference workload instead: the same kind
of ViT with 4 layers, 30 epochs of AdamW (lr 1e-3) at batch 128, no
schedule, no augmentation, no label smoothing. Seconds differ between
machines; compare the two runs by their ratio (``--with-reference`` runs
both, the reference first, and adds the ratio to the JSON).

The last line printed is one JSON object: ``{"test_accuracy": ...,
"seconds": ..., "params": ...}`` (seconds of training and the final test
pass; data loading excluded).

Usage::

    .venv/bin/python benchmarks/vit_mnist.py
    .venv/bin/python benchmarks/vit_mnist.py --reference
    .venv/bin/python benchmarks/vit_mnist.py --with-reference
    .venv/bin/python benchmarks/vit_mnist.py --threads 1 \\
        --sweep book/vision/training-vit.csv
    .venv/bin/python benchmarks/vit_mnist.py --data fashion-mnist \\
        --device cuda --steps 4000 --batch-size 256
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_book import data, recipes
from transformer_book.models.vit import ViT, ViTConfig
from transformer_book.training import accuracy, count_parameters, fit

#: The fixed reference workload of issue 12.
REFERENCE: dict[str, Any] = dict(
    patch_size=7, d_model=64, num_layers=4, num_heads=4, d_ff=128,
    epochs=30, batch_size=128, lr=1e-3, weight_decay=0.01, warmup=0.0,
    label_smoothing=0.0, shift=0,
)
#: The flags that change the book's recipe (``recipes.get("vit")``).
BOOK = ("patch_size", "d_model", "num_layers", "d_ff", "steps",
        "batch_size", "lr")
#: The sweep's training-set sizes, patch sizes and CNN (as in the chapter).
TRAIN_SIZES = (500, 1000, 2000, 4000)
PATCH_SIZES = (7, 14)
CNN_CHANNELS, CNN_HIDDEN = (16, 32, 64), 128
#: The columns of the sweep's CSV file.
COLUMNS = ("model", "patch_size", "train_size", "seed", "epochs", "steps",
           "test_accuracy")


class SmallCNN(nn.Module):
    """The chapter's CNN: three conv-ReLU-pool blocks, then an MLP."""

    def __init__(self, channels: tuple[int, ...], hidden: int,
                 num_classes: int = 10) -> None:
        super().__init__()
        blocks: list[nn.Module] = []
        in_channels = 1
        for out_channels in channels:
            blocks += [nn.Conv2d(in_channels, out_channels, 3, padding=1),
                       nn.ReLU(), nn.MaxPool2d(2)]
            in_channels = out_channels
        self.features = nn.Sequential(*blocks)
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(9 * in_channels, hidden), nn.ReLU(),
            nn.Linear(hidden, num_classes))

    def forward(self, images: Tensor) -> Tensor:
        return self.classifier(self.features(images))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reference", action="store_true")
    parser.add_argument("--with-reference", action="store_true")
    parser.add_argument(
        "--data", default="mnist-5k", choices=["mnist-5k", "fashion-mnist"]
    )
    parser.add_argument(
        "--device",
        default="cpu",
        choices=["cpu", "cuda"],
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sweep", metavar="CSV",
                        help="run the chapter's sweep, write it here")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument(
        "--max-steps",
        type=int,
        default=None,
        help="stop after this many optimizer steps (a smoke test)",
    )
    for name in BOOK:
        flag = "--" + name.replace("_", "-")
        parser.add_argument(flag, type=float if name == "lr" else int)
    return parser.parse_args(argv)


def book(
    args: argparse.Namespace, device: torch.device
) -> dict[str, Any]:
    """Train the book's recipe, with the flags' sizes; the JSON fields."""
    sizes = {n: getattr(args, n) for n in BOOK if getattr(args, n)}
    if args.max_steps:
        sizes["steps"] = min(args.max_steps, sizes.get("steps", math.inf))
    recipe = recipes.get("vit", "cpu", data=args.data, **sizes)
    model = recipe.model(args.seed).to(device)
    start = time.perf_counter()
    test_accuracy = train(recipe, model, args.seed, device)
    return _result(model, test_accuracy, start, device)


def train(recipe: recipes.Recipe, model: nn.Module, seed: int,
          device: torch.device) -> float:
    """Train ``model`` with ``recipe``'s batches, optimizer and schedule,
    as ``recipes.trained`` does; the test accuracy."""
    optimizer = recipe.optimizer(model)
    fit(lambda batch: recipe.loss(model, batch),
        recipe.batches(torch.Generator().manual_seed(seed), device),
        optimizer, scheduler=recipe.scheduler(optimizer),
        clip_grad_norm=recipe.sizes["clip_grad_norm"], model=model,
        progress=False)
    model.eval()
    with torch.no_grad():
        return recipe.evaluate(model)["accuracy"]


def epochs_of(sizes: dict[str, Any], train_size: int) -> int:
    """The whole passes over ``train_size`` images in ``sizes["steps"]``
    batches of ``sizes["batch_size"]`` (the last batch of a pass short)."""
    return sizes["steps"] // math.ceil(train_size / sizes["batch_size"])


def sweep(path: str, seeds: list[int], device: torch.device,
          train_sizes: tuple[int, ...] = TRAIN_SIZES,
          patch_sizes: tuple[int, ...] = PATCH_SIZES,
          **overrides: Any) -> list[dict[str, Any]]:
    """Train the chapter's ViTs and CNNs on each training-set size for the
    recipe's number of epochs, and ViTs with each patch size on all
    images; write one CSV row per model (:data:`COLUMNS`)."""
    full = recipes.get("vit", "cpu", **overrides)
    epochs = epochs_of(full.sizes, len(full.extras["train"][1]))
    runs = [("ViT", 7, n) for n in train_sizes]
    runs += [("CNN", 7, n) for n in train_sizes]
    runs += [("ViT", p, train_sizes[-1]) for p in patch_sizes if p != 7]
    rows = []
    for seed in seeds:
        for name, patch_size, n in runs:
            steps = epochs * math.ceil(n / full.sizes["batch_size"])
            recipe = recipes.get("vit", "cpu", **{
                **overrides, "train_size": n, "steps": steps,
                "patch_size": patch_size})
            if name == "ViT":
                model = recipe.model(seed)
            else:
                torch.manual_seed(seed)
                model = SmallCNN(CNN_CHANNELS, CNN_HIDDEN)
            score = train(recipe, model.to(device), seed, device)
            rows.append(dict(model=name, patch_size=patch_size,
                             train_size=n, seed=seed, epochs=epochs,
                             steps=steps, test_accuracy=round(score, 4)))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    with open(path, "w", newline="") as file:
        writer = csv.DictWriter(file, COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return rows


def reference(
    splits: Any, device: torch.device, seed: int, max_steps: int | None
) -> dict[str, Any]:
    """Train the fixed reference workload; the JSON fields."""
    (train_x, train_y), (test_x, test_y) = splits
    train_x, train_y = train_x.to(device), train_y.to(device)
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    r = REFERENCE
    config = ViTConfig(
        image_size=28, patch_size=r["patch_size"], d_model=r["d_model"],
        num_heads=r["num_heads"], num_layers=r["num_layers"],
        d_ff=r["d_ff"],
    )
    model = ViT(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=r["lr"],
                                  weight_decay=r["weight_decay"])
    size = r["batch_size"]

    def batches(epoch: int) -> list[tuple[Tensor, Tensor]]:
        order = torch.randperm(len(train_x), generator=generator)
        return [(train_x[order[i : i + size]], train_y[order[i : i + size]])
                for i in range(0, len(train_x), size)]

    start = time.perf_counter()
    fit(lambda b: F.cross_entropy(model(b[0]), b[1]), batches, optimizer,
        epochs=r["epochs"], max_steps=max_steps, model=model,
        progress=False)
    test_accuracy = accuracy(model, test_x.to(device), test_y.to(device))
    return _result(model, test_accuracy, start, device)


def _result(
    model: torch.nn.Module, test_accuracy: float, start: float,
    device: torch.device,
) -> dict[str, Any]:
    if device.type == "cuda":
        torch.cuda.synchronize()
    return {
        "test_accuracy": round(test_accuracy, 4),
        "seconds": round(time.perf_counter() - start, 2),
        "params": count_parameters(model),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if args.sweep:
        rows = sweep(args.sweep, args.seeds, device)
        print(json.dumps({"rows": len(rows), "csv": args.sweep}))
        return {"rows": rows}
    ref = None
    if args.reference or args.with_reference:
        splits = (data.mnist_5k() if args.data == "mnist-5k" else
                  (data.fashion_mnist("train"), data.fashion_mnist("test")))
        ref = reference(splits, device, args.seed, args.max_steps)
    if args.reference:
        result = dict(ref or {})
    else:
        if ref is not None:
            print(json.dumps({"reference": ref}), file=sys.stderr)
        result = book(args, device)
    if ref is not None and not args.reference:
        result["reference_seconds"] = ref["seconds"]
        result["reference_test_accuracy"] = ref["test_accuracy"]
        result["time_ratio"] = round(result["seconds"] / ref["seconds"], 2)
    result["data"] = args.data
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
