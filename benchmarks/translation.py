"""Wall time to 99% exact match on Part I's number-list translation task.

The task is the book's (``book/implementation/translation.md``): English
number words to French, numbers 0..999 split by number (a tenth held out),
lists of 1 to 4 numbers built by ``data.number_lists``, and the same 2,000
test lists. Training stops at the first evaluation whose greedy exact
match on all test lists reaches ``--target`` (default 0.99); evaluation
runs every ``--eval-every`` steps and its time counts.

``--model transformer`` (the default) trains the page's
``Seq2SeqTransformer`` recipe: post-LN layers (two in the encoder, three
in the decoder), rotary positions in the self-attention, batches of 16,
fused AdamW, warmup-cosine schedule, label smoothing 0.1. ``--model rnn``
trains Part I's GRU encoder-decoder with additive attention and Part I's
optimizer (Adam 3e-3, cosine decay, fused as on the page) on the page's
batches of 16. The
cosine schedule ends at ``--max-steps``.

The last line printed is one JSON object: ``{"exact_match": ...,
"seconds": ..., "steps": ..., "params": ...}``: the exact match of the
evaluation that stopped training (or of the last one), the seconds from
the first step to it (training and evaluations; data preparation
excluded), the optimizer steps taken, and the model's parameters.
``"reached"`` says whether the target was met within ``--max-steps``.

Usage::

    .venv/bin/python benchmarks/translation.py
    .venv/bin/python benchmarks/translation.py --model rnn
    .venv/bin/python benchmarks/translation.py --threads 1 --eval-every 50
"""

from __future__ import annotations

import argparse
import json
import random
import time
from typing import Any

import numpy as np
import torch
from torch import nn

from transformer_book import data, rnn, training
from transformer_book.models.seq2seq import (
    Seq2SeqTransformer,
    Seq2SeqTransformerConfig,
)
from transformer_book.tokenization import WordTokenizer

#: The page's transformer recipe (cpu preset): post-LN, rotary
#: self-attention, small batches.
TRANSFORMER = dict(
    d_model=64, num_heads=2, enc_layers=2, dec_layers=3, d_ff=128,
    norm_first=False, rotary=True, batch_size=16, max_steps=2_000,
    lr=3e-3, warmup=60, label_smoothing=0.1,
)
#: Part I's RNN with the page's batches of 16 (Part I used 128).
RNN = dict(embed_size=32, hidden_size=64, batch_size=16, max_steps=1_200,
           lr=3e-3)


class _Reached(Exception):
    """Raised by the evaluation to stop training at the target."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", default="transformer", choices=["transformer", "rnn"]
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--target", type=float, default=0.99)
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    return parser.parse_args(argv)


def number_task() -> dict[str, Any]:
    """Part I's data: tokenizers and encoded training and test lists."""
    pairs = data.number_pairs(
        "en", "fr", start=0, stop=1_000, valid_fraction=0.0,
        test_fraction=0.1,
    )
    rng = random.Random(0)
    train_lists = data.number_lists(pairs.train, 400 * 128, rng=rng)
    test_lists = data.number_lists(pairs.test, 2_000, rng=rng)
    src_tok = WordTokenizer().train("\n".join(en for en, _ in train_lists))
    tgt_tok = WordTokenizer().train("\n".join(fr for _, fr in train_lists))
    task: dict[str, Any] = {"src_tok": src_tok, "tgt_tok": tgt_tok}
    for name, lists in (("train", train_lists), ("test", test_lists)):
        task[name + "_src"] = [src_tok.encode(en) for en, _ in lists]
        task[name + "_tgt"] = [
            tgt_tok.encode(fr, eos=True) for _, fr in lists
        ]
    return task


def length_batches(
    src: list[list[int]], batch: int, steps: int, seed: int
) -> list[list[int]]:
    """Batches of indices of similar source length, in shuffled order."""
    order = list(range(len(src)))
    chunk = 32 * batch
    out = []
    for start in range(0, len(order), chunk):
        part = sorted(order[start : start + chunk], key=lambda i: len(src[i]))
        out += [part[j : j + batch] for j in range(0, len(part), batch)]
    random.Random(seed).shuffle(out)
    while len(out) < steps:  # more steps than one pass: repeat it
        out += out[: steps - len(out)]
    return out[:steps]


def build(
    name: str, task: dict[str, Any], device: torch.device
) -> tuple[nn.Module, dict[str, Any]]:
    src_tok, tgt_tok = task["src_tok"], task["tgt_tok"]
    if name == "transformer":
        r = TRANSFORMER
        config = Seq2SeqTransformerConfig(
            src_vocab_size=src_tok.vocab_size,
            tgt_vocab_size=tgt_tok.vocab_size,
            max_seq_len=64,
            d_model=r["d_model"],
            num_heads=r["num_heads"],
            num_encoder_layers=r["enc_layers"],
            num_decoder_layers=r["dec_layers"],
            d_ff=r["d_ff"],
            pad_id=tgt_tok.pad_id,
            norm_first=r["norm_first"],
            rotary=r["rotary"],
        )
        return Seq2SeqTransformer(config).to(device), dict(r)
    r = RNN
    config_rnn = rnn.RNNSeq2SeqConfig(
        src_vocab_size=src_tok.vocab_size,
        tgt_vocab_size=tgt_tok.vocab_size,
        embed_size=r["embed_size"],
        hidden_size=r["hidden_size"],
        attention=True,
        pad_id=tgt_tok.pad_id,
        bos_id=tgt_tok.bos_id,
        eos_id=tgt_tok.eos_id,
    )
    return rnn.RNNSeq2Seq(config_rnn).to(device), dict(r)


@torch.no_grad()
def exact_match(
    model: nn.Module, task: dict[str, Any], device: torch.device
) -> float:
    """Greedy exact match on all test lists."""
    tgt_tok = task["tgt_tok"]
    src, tgt = task["test_src"], task["test_tgt"]
    correct = []
    for start in range(0, len(src), 500):
        ids, lens = rnn.pad_batch(
            src[start : start + 500], tgt_tok.pad_id, device=device
        )
        if isinstance(model, Seq2SeqTransformer):
            out = model.generate(
                ids, 60, bos_id=tgt_tok.bos_id, eos_id=tgt_tok.eos_id
            )
        else:
            out = model.greedy_decode(ids, lens, max_len=60).tokens
        targets = tgt[start : start + 500]
        for row, target in zip(out.tolist(), targets, strict=True):
            correct.append(row[: len(target)] == target)
    return float(np.mean(correct))


def run(args: argparse.Namespace) -> dict[str, Any]:
    device = torch.device(args.device)
    task = number_task()
    torch.manual_seed(args.seed)
    model, recipe = build(args.model, task, device)
    steps = args.max_steps or recipe["max_steps"]
    batch = args.batch_size or recipe["batch_size"]
    pad_id = task["tgt_tok"].pad_id
    bos_id = task["tgt_tok"].bos_id
    train_src, train_tgt = task["train_src"], task["train_tgt"]
    smoothing = recipe.get("label_smoothing", 0.0)

    def step(idx: list[int]) -> torch.Tensor:
        src, src_len = rnn.pad_batch(
            [train_src[i] for i in idx], pad_id, device=device
        )
        tgt, _ = rnn.pad_batch(
            [[bos_id] + train_tgt[i] for i in idx], pad_id, device=device
        )
        if isinstance(model, Seq2SeqTransformer):
            logits = model(src, tgt[:, :-1])
        else:
            logits = model(src, src_len, tgt[:, :-1]).logits
        return training.cross_entropy(
            logits, tgt[:, 1:], label_smoothing=smoothing,
            ignore_index=pad_id,
        )

    if args.model == "transformer":
        optimizer: torch.optim.Optimizer = torch.optim.AdamW(
            model.parameters(), lr=recipe["lr"], betas=(0.9, 0.98),
            fused=True,
        )
        warmup = min(recipe["warmup"], steps - 1)  # short runs: less
    else:
        optimizer = torch.optim.Adam(
            model.parameters(), lr=recipe["lr"], fused=True
        )
        warmup = 0
    scheduler = training.warmup_cosine(
        optimizer, warmup_steps=warmup, total_steps=steps
    )
    order = length_batches(train_src, batch, steps, args.seed)
    evaluations: list[tuple[int, float, float]] = []
    start = time.perf_counter()

    def evaluate() -> float:
        accuracy = exact_match(model, task, device)
        if device.type == "cuda":
            torch.cuda.synchronize()
        done = len(evaluations) + 1
        evaluations.append(
            (done * args.eval_every, accuracy, time.perf_counter() - start)
        )
        if accuracy >= args.target:
            raise _Reached
        return accuracy

    try:
        training.train(
            step, order, optimizer, scheduler=scheduler, clip_grad_norm=1.0,
            eval_fn=evaluate, eval_every=args.eval_every, model=model,
            progress=False,
        )
        model.eval()
        final = exact_match(model, task, device)
        evaluations.append((steps, final, time.perf_counter() - start))
    except _Reached:
        pass
    done_steps, accuracy, seconds = evaluations[-1]
    return {
        "exact_match": round(accuracy, 4),
        "seconds": round(seconds, 2),
        "steps": min(done_steps, steps),
        "params": training.count_parameters(model),
        "reached": accuracy >= args.target,
        "model": args.model,
        "threads": args.threads,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    for name in ("threads", "eval_every", "max_steps", "batch_size"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise SystemExit(
                f"--{name.replace('_', '-')} must be at least 1, got {value}"
            )
    torch.set_num_threads(args.threads)
    result = run(args)
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
