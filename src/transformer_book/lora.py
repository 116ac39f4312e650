"""Low-rank adaptation (LoRA) of a trained model's linear layers.

Hu et al. (2022): freeze the trained weight :math:`W` and learn a
low-rank update :math:`\\Delta W = (\\alpha / r) B A` beside it; after
training, :func:`merge` folds the update into :math:`W`.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any

import torch
from torch import Tensor, nn

from ._checks import check_instance, check_int, check_number
from .attention import MultiHeadAttention
from .feedforward import FeedForward

__all__ = ["LoRALinear", "apply_lora", "merge"]


class LoRALinear(nn.Module):
    r"""A frozen ``nn.Linear`` plus a trainable low-rank update.

    .. math::

        y = x W^\top + b + \frac{\alpha}{r}\, x A^\top B^\top, \qquad
        A \in \mathbb{R}^{r \times d_\text{in}}, \quad
        B \in \mathbb{R}^{d_\text{out} \times r}

    (:math:`r` is ``rank``). :math:`W` and :math:`b` are the wrapped
    layer's own parameters, frozen. :math:`A` starts Kaiming-uniform and
    :math:`B` at zero, so the layer first computes what the wrapped one did.

    Shape:
        x: ``(..., in_features)``; returns ``(..., out_features)``.
    """

    weight: Tensor
    bias: Tensor | None

    def __init__(self, linear: nn.Linear, rank: int, alpha: float) -> None:
        super().__init__()
        check_instance("linear", linear, nn.Linear, "an nn.Linear")
        self.rank = check_int("rank", rank)
        self.alpha = check_number("alpha", alpha, minimum=0.0,
                                  min_inclusive=False)
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self.weight, self.bias = linear.weight, linear.bias
        linear.requires_grad_(False)
        like = _like(self.weight)
        self.lora_A = nn.Parameter(torch.empty(rank, self.in_features, **like))
        self.lora_B = nn.Parameter(torch.empty(self.out_features, rank,
                                               **like))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """:math:`A` Kaiming-uniform (as ``nn.Linear``), :math:`B = 0`."""
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        nn.init.zeros_(self.lora_B)

    @property
    def scaling(self) -> float:
        """The factor :math:`\\alpha / r` on :math:`B A`."""
        return self.alpha / self.rank

    def delta_weight(self) -> Tensor:
        """The update :math:`(\\alpha / r) B A`, ``(out_features,
        in_features)``."""
        return self.scaling * (self.lora_B @ self.lora_A)

    def forward(self, x: Tensor) -> Tensor:
        # Through the rank-r bottleneck: r (d_in + d_out) multiplications
        # per token, never the full (d_out, d_in) update.
        update = (x @ self.lora_A.T) @ self.lora_B.T  # (..., out_features)
        return nn.functional.linear(x, self.weight, self.bias) + (
            self.scaling * update)

    @torch.no_grad()
    def merged(self) -> nn.Linear:
        """A plain ``nn.Linear`` computing the same function, with weight
        :math:`W + (\\alpha / r) B A` and the bias; its parameters are
        frozen as :math:`W` is."""
        linear = nn.Linear(self.in_features, self.out_features,
                           bias=self.bias is not None, **_like(self.weight))
        linear.weight.copy_(self.weight + self.delta_weight())
        if self.bias is not None:
            linear.bias.copy_(self.bias)
        return linear.requires_grad_(False).train(self.training)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features="
                f"{self.out_features}, rank={self.rank}, "
                f"alpha={self.alpha:g}")


def _like(tensor: Tensor) -> dict[str, Any]:
    return {"device": tensor.device, "dtype": tensor.dtype}


def _chosen(model: nn.Module,
            targets: Collection[str] | None) -> dict[str, nn.Linear]:
    """The linear layers of ``model`` to wrap, by module path."""
    linears = {name: m for name, m in model.named_modules()
               if isinstance(m, nn.Linear)}
    if targets is None:  # the direct children of the blocks
        blocks = {name for name, m in model.named_modules()
                  if isinstance(m, (MultiHeadAttention, FeedForward))}
        found = {path: m for path, m in linears.items()
                 if path.rpartition(".")[0] in blocks}
        if not found:
            raise ValueError("model has no nn.Linear inside a "
                             "MultiHeadAttention or FeedForward module")
        return found
    if isinstance(targets, (str, bytes)) or not isinstance(
            targets, Collection):
        raise TypeError(f"targets must be a collection of names such as "
                        f"{{'q_proj', 'v_proj'}}, got "
                        f"{type(targets).__name__}")
    names = [check_instance("targets", t, str, "names (str)")
             for t in targets]
    if not names:
        raise ValueError("targets is empty; None wraps every attention and "
                         "feed-forward linear layer")
    def named(path: str, target: str) -> bool:
        return path == target or path.endswith(f".{target}")

    for target in names:
        if not any(named(path, target) for path in linears):
            raise ValueError(f"targets={target!r} names no nn.Linear of "
                             f"model (e.g. {', '.join(list(linears)[:3])})")
    # In the model's order, whatever the order of targets (a set's order
    # changes from run to run, and so would the layers' random init).
    return {path: m for path, m in linears.items()
            if any(named(path, t) for t in names)}


def apply_lora(model: nn.Module, rank: int, alpha: float,
               targets: Collection[str] | None = None) -> nn.Module:
    """Wrap linear layers of ``model`` in :class:`LoRALinear`, in place,
    and freeze everything else: only the :math:`A` and :math:`B` matrices
    require gradients afterwards.

    Args:
        rank, alpha: as :class:`LoRALinear`'s, for every update.
        targets: ``None`` wraps every ``nn.Linear`` that is a direct child
            of a :class:`~transformer_book.attention.MultiHeadAttention`
            or :class:`~transformer_book.feedforward.FeedForward`
            (``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``,
            ``up_proj``, ``gate_proj``, ``down_proj``). Otherwise a
            collection of module paths, each matching every
            ``nn.Linear`` whose path is it or ends with ``"." + it``:
            ``{"q_proj", "v_proj"}`` (Hu et al.'s choice) or
            ``{"blocks.0.self_attn.q_proj"}``. Each must match a layer.
    """
    check_instance("model", model, nn.Module, "an nn.Module")
    rank = check_int("rank", rank)
    alpha = check_number("alpha", alpha, minimum=0.0, min_inclusive=False)
    chosen = _chosen(model, targets)
    model.requires_grad_(False)
    for path, linear in chosen.items():
        parent_path, _, name = path.rpartition(".")
        parent = model.get_submodule(parent_path)
        setattr(parent, name, LoRALinear(linear, rank, alpha))
    return model


def merge(model: nn.Module) -> nn.Module:
    """Replace every :class:`LoRALinear` of ``model`` by the plain
    ``nn.Linear`` it computes (:meth:`LoRALinear.merged`), in place; a
    :class:`LoRALinear` itself gives its new ``nn.Linear``."""
    check_instance("model", model, nn.Module, "an nn.Module")
    if isinstance(model, LoRALinear):
        return model.merged()
    found = [(parent, name, child) for parent in model.modules()
             for name, child in parent.named_children()
             if isinstance(child, LoRALinear)]
    if not found:
        raise ValueError("model has no LoRALinear to merge (call "
                         "apply_lora first)")
    for parent, name, child in found:
        setattr(parent, name, child.merged())
    return model
