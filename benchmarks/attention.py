"""Time MultiHeadAttention against nn.MultiheadAttention (forward+backward).

Both modules hold the same weights (copied with ``from_torch``), run
self-attention on the same batch without returning weights, and are timed
in the same process with their repeats interleaved, so that a busy machine
slows both alike. The script prints the median time of each and the ratio
ours / PyTorch.

Usage::

    .venv/bin/python benchmarks/attention.py --repeats 30
    .venv/bin/python benchmarks/attention.py --device cuda --seq-len 1024
"""

from __future__ import annotations

import argparse

import torch
from torch import nn

from transformer_book import runtime
from transformer_book.attention import MultiHeadAttention


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument(
        "--device",
        default="cuda" if torch.cuda.is_available() else "cpu",
        choices=["cpu", "cuda"],
    )
    parser.add_argument("--causal", action="store_true")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> float:
    args = parse_args(argv)
    device = torch.device(args.device)
    torch.manual_seed(0)
    theirs = nn.MultiheadAttention(
        args.d_model, args.heads, batch_first=True, device=device
    )
    ours = MultiHeadAttention.from_torch(theirs)
    x = torch.randn(
        args.batch,
        args.seq_len,
        args.d_model,
        device=device,
        requires_grad=True,
    )
    mask = None
    if args.causal:
        # nn.MultiheadAttention blocks where its bool mask is True: invert.
        mask = ~torch.ones(
            args.seq_len, args.seq_len, dtype=torch.bool, device=device
        ).tril()

    def step_ours() -> None:
        x.grad = None
        out = ours(x, x, x, is_causal=args.causal)
        out.sum().backward()

    def step_theirs() -> None:
        x.grad = None
        out, _ = theirs(
            x,
            x,
            x,
            need_weights=False,
            attn_mask=mask,
            is_causal=args.causal,
        )
        out.sum().backward()

    # Interleaved, the order alternating: neither always runs on a cache
    # the other warmed.
    median = runtime.compare(
        {"ours": step_ours, "torch": step_theirs},
        repeats=args.repeats, warmup=args.warmup, device=device,
    )
    ratio = median["ours"] / median["torch"]
    print(
        f"B={args.batch} T={args.seq_len} d_model={args.d_model} "
        f"H={args.heads} device={device} causal={args.causal} "
        f"repeats={args.repeats} threads={torch.get_num_threads()}"
    )
    print(f"MultiHeadAttention     {median['ours'] * 1e3:8.2f} ms")
    print(f"nn.MultiheadAttention  {median['torch'] * 1e3:8.2f} ms")
    print(f"ratio ours / torch     {ratio:8.3f}")
    return ratio


if __name__ == "__main__":
    main()
