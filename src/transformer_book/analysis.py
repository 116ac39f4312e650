"""Reading a model's attention: capture, rollout and distance."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import Tensor, nn

from ._checks import check_choice, check_int, check_shape
from .attention import MultiHeadAttention

__all__ = ["attention_rollout", "capture_attention", "mean_attention_distance"]


@contextmanager
def capture_attention(model: nn.Module) -> Iterator[list[Tensor]]:
    """Record the attention weights of every call inside ``model``.

    ``with capture_attention(model) as maps: logits = model(x)``: in the
    block, every ``MultiHeadAttention`` in ``model`` (itself included)
    takes the written-out path and appends its weights, before dropout, to
    ``maps``; the outputs are the fused path's, up to rounding.

    Shape:
        each weight tensor: ``(B, H, q_len, kv_len)``, in call order.
    """
    maps: list[Tensor] = []
    modules = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    previous = [m.captured for m in modules]
    for module in modules:
        module.captured = maps
    try:
        yield maps
    finally:
        for module, before in zip(modules, previous, strict=True):
            module.captured = before


def _layers(weights: Sequence[Tensor] | Tensor) -> list[Tensor]:
    """A non-empty list of equal ``(B, H, T, T)`` float tensors."""
    weights = [weights] if isinstance(weights, Tensor) else list(weights)
    check_int("len(weights)", len(weights))
    for i, w in enumerate(weights):
        shape = tuple(weights[0].shape) if i else (None,) * 4
        check_shape(f"weights[{i}]", w, shape, "(B, H, T, T) as weights[0]")
        check_shape(f"weights[{i}]", w, (*w.shape[:3], w.shape[2]),
                    "(B, H, T, T)")
    return weights


def _grid(pool: str | None, num_tokens: int) -> tuple[str, int]:
    """``pool`` (read from the token count when ``None``) and the side of
    the square grid of patches."""
    if pool is None:  # N + 1 tokens: [CLS] and a square grid
        rest = max(num_tokens - 1, 0)
        pool = "cls" if rest and math.isqrt(rest) ** 2 == rest else "mean"
    check_choice("pool", pool, ("cls", "mean"))
    patches = num_tokens - 1 if pool == "cls" else num_tokens
    grid = math.isqrt(max(patches, 0))
    if grid * grid != patches or patches == 0:
        raise ValueError(f"{num_tokens} tokens with pool={pool!r} are not a "
                         "square grid of patches (plus [CLS] with pool='cls')")
    return pool, grid


def attention_rollout(weights: Sequence[Tensor] | Tensor, *,
                      residual: bool = True,
                      pool: str | None = None) -> Tensor:
    r"""How much each patch flows into the pooled representation.

    Attention rollout (Abnar and Zuidema, 2020): :math:`R = \tilde A_L
    \cdots \tilde A_1`, :math:`\tilde A_\ell = \tfrac12 (\bar A_\ell + I)`
    with :math:`\bar A_\ell` the head mean; the ``[CLS]`` or the mean row,
    normalised over the patches (uniform when nothing flows from them).

    Args:
        weights: one ``(B, H, T, T)`` tensor per layer, first layer first.
        residual: add the identity for the skip connections (the paper's).
        pool: ``"cls"``, ``"mean"`` or ``None``: read from ``T`` (``N + 1``
            or ``N`` tokens for a square grid of ``N`` patches).

    Shape:
        returns ``(B, N)``, patches in row-major order.
    """
    weights = _layers(weights)
    T = weights[0].shape[-1]
    pool, _ = _grid(pool, T)
    eye = torch.eye(T, dtype=weights[0].dtype, device=weights[0].device)
    rollout = eye
    for w in weights:
        a = w.mean(dim=1)  # (B, T, T)
        if residual:
            a = 0.5 * (a + eye)
        rollout = a @ rollout  # (B, T, T)
    flow = rollout[:, 0, 1:] if pool == "cls" else rollout.mean(dim=1)
    total = flow.sum(dim=-1, keepdim=True)  # (B, 1)
    uniform = torch.full_like(flow, 1.0 / flow.shape[-1])
    return torch.where(total > 0, flow / total.clamp_min(1e-12), uniform)


def mean_attention_distance(weights: Sequence[Tensor] | Tensor, *,
                            patch_size: int = 1,
                            pool: str | None = None) -> Tensor:
    """Mean distance between a query patch and the patches it attends to,
    per layer and head (Dosovitskiy et al., 2021, figure 7), ``[CLS]``
    dropped.

    Args:
        weights: one ``(B, H, T, T)`` tensor per layer.
        patch_size: pixels per patch side (1 measures in patches).
        pool: as in :func:`attention_rollout`.

    Shape:
        returns ``(num_layers, num_heads)``.
    """
    weights = _layers(weights)
    patch_size = check_int("patch_size", patch_size)
    pool, grid = _grid(pool, weights[0].shape[-1])
    w = torch.stack(weights)  # (L, B, H, T, T)
    if pool == "cls":
        w = w[..., 1:, 1:]  # (L, B, H, N, N)
    w = w / w.sum(dim=-1, keepdim=True).clamp_min(1e-12)
    index = torch.arange(grid * grid, device=w.device)
    coords = torch.stack((index // grid, index % grid), dim=-1)  # (N, 2)
    distance = torch.cdist(coords.to(w.dtype), coords.to(w.dtype))  # (N, N)
    per_query = (w * distance * patch_size).sum(dim=-1)  # (L, B, H, N)
    return per_query.mean(dim=(1, 3))  # (L, H)
