"""Fine-tune a Shakespeare character GPT on the Python docs, with LoRA.

The experiment of ``book/beyond/lora.md``, at the page's ``cpu`` sizes
(``book/beyond/lora.sizes.py``), on one thread: one character tokenizer
of both texts; a GPT pre-trained on Tiny Shakespeare (seed 0); then, for
each seed, fine-tuning on the Python documentation with LoRA at each rank
(every attention and feed-forward linear layer) and with every weight
trained. The seed draws LoRA's ``A`` matrices and the batches. Writes
one row per run to ``book/beyond/data/lora.csv``: the method, the rank,
the seed, the trainable parameters, and the validation loss on the
Python docs and on Shakespeare; the rows of method ``none`` are the
pre-trained model as it is. The page repeats the rank-4 run of seed 0
and checks it against the file.

Usage::

    .venv/bin/python benchmarks/lora.py               # 18 runs, ~5 min
    .venv/bin/python benchmarks/lora.py --seeds 1 --ranks 4 --out /tmp/l.csv
"""

from __future__ import annotations

import argparse
import copy
import time
from pathlib import Path
from typing import Any

import torch

from transformer_book import _book, data, lora, training
from transformer_book._io import write_csv
from transformer_book.models.gpt import GPT, GPTConfig
from transformer_book.tokenization import CharTokenizer

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "book/beyond/data/lora.csv"
RANKS = (1, 2, 4, 8, 16)
FIELDS = ("method", "rank", "seed", "trainable", "docs_loss",
          "shakespeare_loss", "seconds")


def texts() -> tuple[CharTokenizer, dict[str, torch.Tensor]]:
    """One tokenizer of both corpora, and the four texts' token ids."""
    shakespeare = data.tiny_shakespeare()
    docs_train, docs_valid = data.python_docs_split()
    tokenizer = CharTokenizer(byte_fallback=False).train(
        shakespeare + docs_train + docs_valid)
    cut = int(0.9 * len(shakespeare))
    parts = {"shakespeare_train": shakespeare[:cut],
             "shakespeare_valid": shakespeare[cut:],
             "docs_train": docs_train, "docs_valid": docs_valid}
    return tokenizer, {k: torch.tensor(tokenizer.encode(v))
                       for k, v in parts.items()}


def train(model: GPT, ids: torch.Tensor, sizes: dict[str, Any], steps: int,
          lr: float, seed: int) -> None:
    """AdamW on the trainable parameters, warmup then cosine decay."""
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    generator = torch.Generator().manual_seed(seed)
    batches = (data.random_windows(ids, sizes["block_size"],
                                   sizes["batch_size"], generator)
               for _ in range(steps))
    training.fit(lambda batch: model(*batch)[1], batches, optimizer,
                 scheduler=training.warmup_cosine(
                     optimizer, warmup_steps=steps // 10,
                     total_steps=steps),
                 clip_grad_norm=1.0, model=model, progress=False)
    model.eval()


@torch.no_grad()
def loss(model: GPT, ids: torch.Tensor, sizes: dict[str, Any]) -> float:
    """Mean loss over the first ``eval_windows`` windows of ``ids``."""
    x, y = data.every_window(ids, sizes["block_size"], sizes["eval_windows"])
    total = sum(float(model(x[i:i + 64], y[i:i + 64])[1]) * len(x[i:i + 64])
                for i in range(0, len(x), 64))
    return total / len(x)


def pretrain(ids: dict[str, torch.Tensor], sizes: dict[str, Any],
             vocab_size: int) -> GPT:
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=vocab_size,
                          max_seq_len=sizes["block_size"],
                          d_model=sizes["d_model"],
                          num_heads=sizes["num_heads"],
                          num_layers=sizes["num_layers"], bias=False))
    train(model, ids["shakespeare_train"], sizes, sizes["pretrain_steps"],
          sizes["pretrain_lr"], seed=0)
    return model


def finetune(pretrained: GPT, ids: dict[str, torch.Tensor],
             sizes: dict[str, Any], rank: int | None, seed: int) -> GPT:
    """A copy of ``pretrained`` fine-tuned on the docs: LoRA of ``rank``,
    or every weight when ``rank`` is None."""
    model = copy.deepcopy(pretrained)
    torch.manual_seed(seed)  # LoRA's A matrices
    if rank is not None:
        lora.apply_lora(model, rank=rank, alpha=sizes["alpha"])
    lr = sizes["full_lr"] if rank is None else sizes["lora_lr"]
    train(model, ids["docs_train"], sizes, sizes["finetune_steps"], lr,
          seed=seed)
    return model


def row(model: GPT, ids: dict[str, torch.Tensor], sizes: dict[str, Any],
        method: str, rank: int, seed: int, start: float) -> dict[str, Any]:
    return {"method": method, "rank": rank, "seed": seed,
            "trainable": training.count_parameters(model)
            if method != "none" else 0,
            "docs_loss": round(loss(model, ids["docs_valid"], sizes), 5),
            "shakespeare_loss": round(
                loss(model, ids["shakespeare_valid"], sizes), 5),
            "seconds": round(time.perf_counter() - start, 1)}


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=RANKS)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--no-full", action="store_true",
                        help="skip full fine-tuning")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    sizes = _book.read_sizes(ROOT / "book/beyond/lora.sizes.py")["cpu"]
    torch.set_num_threads(1)
    tokenizer, ids = texts()
    start = time.perf_counter()
    pretrained = pretrain(ids, sizes, tokenizer.vocab_size)
    rows = [row(pretrained, ids, sizes, "none", 0, 0, start)]
    print(rows[-1], flush=True)
    methods = [*args.ranks, *([] if args.no_full else [None])]
    for seed in range(args.seeds):
        for rank in methods:
            start = time.perf_counter()
            model = finetune(pretrained, ids, sizes, rank, seed)
            rows.append(row(model, ids, sizes, "full" if rank is None
                            else "lora", rank or 0, seed, start))
            print(rows[-1], flush=True)
    write_csv(args.out, rows, FIELDS)
    return rows


if __name__ == "__main__":
    main()
