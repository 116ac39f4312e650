"""Time LayerNorm's two paths against nn.LayerNorm (forward+backward).

``LayerNorm`` calls PyTorch's fused kernel unless its ``fused`` attribute
is ``False``, which asks for the written-out formula; that formula takes
the variance as the mean square of the centred values, because ``x.var``
over a short last dimension is slow on a CPU. This script times, on the
same tokens:

- ``fused``: ``LayerNorm`` (``F.layer_norm``);
- ``explicit``: ``LayerNorm`` with ``fused = False``;
- ``var``: the same formula with ``x.var(dim=-1, correction=0)``;
- ``torch``: ``nn.LayerNorm``.

Repeats are interleaved (``runtime.compare``), so a busy machine slows
all alike. The last line printed is one JSON object of median
microseconds per forward+backward.

Usage::

    .venv/bin/python benchmarks/layer_norm.py
    .venv/bin/python benchmarks/layer_norm.py --tokens 4096 --d-model 512
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from functools import partial

import torch
from torch import Tensor, nn

from transformer_book import runtime
from transformer_book.norm import LayerNorm


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=1216,
                        help="tokens per call (a batch of 64 lists of 19)")
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1)
    return parser.parse_args(argv)


def _var_formula(norm: LayerNorm, x: Tensor) -> Tensor:
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, correction=0, keepdim=True)
    return (x - mean) / torch.sqrt(var + norm.eps) * norm.weight + norm.bias


def _forward_backward(path: Callable[[Tensor], Tensor], x: Tensor) -> None:
    path(x).sum().backward()


def main(argv: list[str] | None = None) -> dict[str, float]:
    args = parse_args(argv)
    for name in ("tokens", "d_model", "repeats", "threads"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name.replace('_', '-')} must be at least 1")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    x = torch.randn(args.tokens, args.d_model, requires_grad=True)
    ours, theirs = LayerNorm(args.d_model), nn.LayerNorm(args.d_model)
    written_out = LayerNorm(args.d_model)
    written_out.fused = False  # the formula step by step

    paths: dict[str, Callable[[Tensor], Tensor]] = {
        "fused": ours,
        "explicit": written_out,
        "var": lambda x: _var_formula(ours, x),
        "torch": theirs,
    }
    seconds = runtime.compare(
        {name: partial(_forward_backward, path, x)
         for name, path in paths.items()},
        repeats=args.repeats, warmup=5,
    )
    result = {name: round(s * 1e6, 1) for name, s in seconds.items()}
    for name, us in result.items():
        print(f"{name:>9}: {us:8.1f} us")
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
