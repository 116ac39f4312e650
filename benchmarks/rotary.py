"""Time RoPE's complex product against the real formula (forward+backward).

``positional.apply_rotary`` rotates each pair of features as one complex
product. This script times it, on the same queries, against the formula
it replaced: four real products and a stack,

    (x_2i cos - x_2i+1 sin, x_2i sin + x_2i+1 cos).

The default shape is the translation page's: a batch of 16 lists, 2 heads
of width 32, 40 positions, the queries a transposed view as
``MultiHeadAttention`` makes them. Repeats are interleaved
(``runtime.compare``), so a busy machine slows both alike. The last line
printed is one JSON object of median microseconds per forward+backward.

Usage::

    .venv/bin/python benchmarks/rotary.py
    .venv/bin/python benchmarks/rotary.py --batch 64 --length 256
"""

from __future__ import annotations

import argparse
import json

import torch
from torch import Tensor

from transformer_book import runtime
from transformer_book.positional import apply_rotary, rotary_frequencies


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--length", type=int, default=40)
    parser.add_argument("--head-dim", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=500)
    parser.add_argument("--threads", type=int, default=1)
    return parser.parse_args(argv)


def real_formula(x: Tensor, offset: int = 0) -> Tensor:
    """RoPE as four real products and a stack (the replaced code)."""
    freqs = rotary_frequencies(x.shape[-1], dtype=torch.float64,
                               device=x.device)
    positions = torch.arange(offset, offset + x.shape[-2],
                             dtype=torch.float64, device=x.device)
    angles = positions[:, None] * freqs  # (T, D/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    pairs = x.reshape(*x.shape[:-1], x.shape[-1] // 2, 2)
    even, odd = pairs[..., 0], pairs[..., 1]
    rotated = torch.stack(
        (even * cos - odd * sin, even * sin + odd * cos), dim=-1
    )
    return rotated.flatten(-2)


def main(argv: list[str] | None = None) -> dict[str, float]:
    args = parse_args(argv)
    for name in ("batch", "heads", "length", "head_dim", "repeats",
                 "threads"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name.replace('_', '-')} must be at least 1")
    if args.head_dim % 2:
        raise SystemExit("--head-dim must be even: RoPE rotates pairs")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    # (B, T, H, D) -> (B, H, T, D): a view, as the attention makes it.
    x = torch.randn(args.batch, args.length, args.heads, args.head_dim)
    x = x.transpose(1, 2).requires_grad_(True)
    seconds = runtime.compare(
        {"complex": lambda: apply_rotary(x).sum().backward(),
         "real": lambda: real_formula(x).sum().backward()},
        repeats=args.repeats, warmup=5,
    )
    result = {name: round(s * 1e6, 1) for name, s in seconds.items()}
    for name, us in result.items():
        print(f"{name:>8}: {us:8.1f} us")
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
