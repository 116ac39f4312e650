"""Time GPT generation with and without the key/value cache.

For learned and rotary positions, a GPT (random weights: the speed of a
forward pass does not depend on them) continues the same prompt greedily
by each of ``--lengths`` new tokens, once with ``use_cache=True`` and once
with ``use_cache=False``. Every generation stays within ``max_seq_len``
(the prompt plus the longest length), where the cache is meant to help;
past it, a model with learned positions rebuilds its cache at every step
(see ``GPT.generate``). The repeats of the two variants are interleaved so
that a busy machine slows both alike, and the median time of each is
reported as tokens per second (new tokens / seconds). The cached and
uncached runs must produce the same tokens; the script exits with an
error if they do not.

The last line printed is one JSON object: the settings, every measurement
and ``speedup[positional][length]`` = cached tokens/s / uncached tokens/s.

Usage::

    .venv/bin/python benchmarks/kv_cache.py
    .venv/bin/python benchmarks/kv_cache.py --threads 1 --lengths 64 256
    .venv/bin/python benchmarks/kv_cache.py --device cuda --d-model 768 \\
        --num-layers 12 --num-heads 12
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch

from transformer_book.models.gpt import GPT, GPTConfig
from transformer_book.runtime import Timer


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[256, 1024])
    parser.add_argument(
        "--positional",
        nargs="+",
        default=["learned", "rope"],
        choices=["learned", "rope"],
    )
    parser.add_argument("--prompt-len", type=int, default=16)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--vocab-size", type=int, default=256)
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--num-heads", type=int, default=4)
    parser.add_argument("--num-layers", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--device",
        default="cuda" if torch.cuda.is_available() else "cpu",
        choices=["cpu", "cuda"],
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if min(args.lengths) < 1 or args.prompt_len < 1 or args.repeats < 1:
        parser.error("--lengths, --prompt-len and --repeats must be >= 1")
    return args


def time_generation(
    model: GPT, prompt: torch.Tensor, new_tokens: int, repeats: int
) -> dict[str, object]:
    """Median seconds of cached and uncached greedy generation."""
    device = prompt.device
    seconds: dict[bool, list[float]] = {True: [], False: []}
    outputs: dict[bool, torch.Tensor] = {}
    for use_cache in (True, False):  # warm-up (allocations, lazy init)
        model.generate(prompt, min(new_tokens, 8), temperature=0,
                       use_cache=use_cache)
    for _ in range(repeats):
        for use_cache in (True, False):
            with Timer(device) as timer:
                out = model.generate(
                    prompt, new_tokens, temperature=0, use_cache=use_cache
                )
            seconds[use_cache].append(timer.seconds)
            outputs[use_cache] = out
    same = torch.equal(outputs[True], outputs[False])
    cached = statistics.median(seconds[True])
    uncached = statistics.median(seconds[False])
    return {
        "new_tokens": new_tokens,
        "cached_s": cached,
        "uncached_s": uncached,
        "cached_tokens_per_s": new_tokens / cached,
        "uncached_tokens_per_s": new_tokens / uncached,
        "speedup": uncached / cached,
        "same_tokens": same,
    }


def main(argv: list[str] | None = None) -> dict[str, object]:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    generator = torch.Generator().manual_seed(args.seed)
    prompt = torch.randint(
        0, args.vocab_size, (args.batch, args.prompt_len), generator=generator
    ).to(device)
    results = []
    speedup: dict[str, dict[str, float]] = {}
    print(
        f"{'positional':>10} {'new tokens':>10} {'cached tok/s':>13} "
        f"{'uncached tok/s':>15} {'speed-up':>9}"
    )
    for positional in args.positional:
        torch.manual_seed(args.seed)
        config = GPTConfig(
            vocab_size=args.vocab_size,
            max_seq_len=args.prompt_len + max(args.lengths),
            d_model=args.d_model,
            num_heads=args.num_heads,
            num_layers=args.num_layers,
            positional=positional,
        )
        model = GPT(config).to(device).eval()
        for length in args.lengths:
            row = time_generation(model, prompt, length, args.repeats)
            row["positional"] = positional
            results.append(row)
            speedup.setdefault(positional, {})[str(length)] = round(
                float(row["speedup"]), 2  # type: ignore[arg-type]
            )
            print(
                f"{positional:>10} {length:>10} "
                f"{row['cached_tokens_per_s']:>13.0f} "
                f"{row['uncached_tokens_per_s']:>15.0f} "
                f"{row['speedup']:>8.1f}x",
                flush=True,
            )
    summary = {
        "device": str(device),
        "threads": args.threads,
        "batch": args.batch,
        "prompt_len": args.prompt_len,
        "d_model": args.d_model,
        "num_layers": args.num_layers,
        "num_heads": args.num_heads,
        "vocab_size": args.vocab_size,
        "repeats": args.repeats,
        "results": results,
        "speedup": speedup,
    }
    print(json.dumps(summary))
    if not all(row["same_tokens"] for row in results):
        sys.exit("cached and uncached greedy generation gave other tokens")
    return summary


if __name__ == "__main__":
    main()
