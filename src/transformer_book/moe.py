"""Mixture of experts: a routed feed-forward layer and its balancing loss.

A router scores every token against ``num_experts`` feed-forward networks;
each token goes to its ``top_k`` best, and their outputs are summed with
softmax gates (Shazeer et al., 2017; GShard, Lepikhin et al., 2021;
Switch Transformers, Fedus et al., 2022).
"""

from __future__ import annotations

from typing import Any, TypeVar, cast

import torch
from torch import Tensor, nn

from ._checks import (
    check_features,
    check_instance,
    check_int,
    skip_inner_checks,
)
from .feedforward import FeedForward
from .transformer import Residual

__all__ = ["MoEFeedForward", "load_balancing_loss", "replace_feed_forward"]

_M = TypeVar("_M", bound=nn.Module)


class MoEFeedForward(nn.Module):
    r"""A feed-forward layer of ``num_experts`` experts, ``top_k`` per token.

    .. math::

        s = x W_r + b_r, \qquad
        y = \sum_{i \in \mathrm{TopK}(s)}
        \frac{e^{s_i}}{\sum_{j \in \mathrm{TopK}(s)} e^{s_j}}\,
        \mathrm{FFN}_i(x)

    After each forward, ``aux_loss`` holds the load-balancing loss of
    Switch Transformers (Fedus et al., 2022, eq. 4),
    :math:`E \sum_i f_i P_i`: :math:`f_i` is the fraction of assignments
    to expert :math:`i`, :math:`P_i` the router's mean softmax for it
    (which alone carries gradients); ``expert_index`` the experts each
    token went to.

    Args:
        d_ff: hidden width of each expert (a ``FeedForward``).
        num_experts: number of experts :math:`E`.
        bias: whether the experts' linear maps have biases (the router
            always has one).

    Shape:
        x: ``(..., d_model)``; returns the same shape; ``expert_index``
        ``(..., top_k)``.
    """

    check_inputs = True  # False when the module around it checks them

    def __init__(self, d_model: int, d_ff: int, num_experts: int,
                 top_k: int, *, activation: str = "relu", bias: bool = True,
                 device: torch.device | str | None = None,
                 dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.d_model = check_int("d_model", d_model)
        self.num_experts = check_int("num_experts", num_experts)
        self.top_k = check_int("top_k", top_k)
        if self.top_k > self.num_experts:
            raise ValueError(f"top_k={top_k} must be at most "
                             f"num_experts={num_experts}")
        factory: dict[str, Any] = {"device": device, "dtype": dtype}
        self.router = nn.Linear(d_model, num_experts, **factory)
        self.experts = nn.ModuleList(
            FeedForward(d_model, d_ff, activation=activation, bias=bias,
                        **factory)
            for _ in range(num_experts))
        self.aux_loss: Tensor | None = None  # set by forward
        self.expert_index: Tensor | None = None
        skip_inner_checks(self)

    def extra_repr(self) -> str:
        return f"num_experts={self.num_experts}, top_k={self.top_k}"

    def forward(self, x: Tensor) -> Tensor:
        """Send each token of ``x`` to its ``top_k`` experts."""
        if self.check_inputs:
            check_features("x", x, self.d_model, like=self.router.weight)
        tokens = x.reshape(-1, self.d_model)  # (..., d_model) -> (N, d_model)
        scores = self.router(tokens)  # (N, E)
        top_scores, chosen = scores.topk(self.top_k, dim=-1)  # (N, k) each
        gates = top_scores.softmax(dim=-1)  # over the chosen experts only
        out = torch.zeros_like(tokens)
        for i, expert in enumerate(self.experts):
            rows, slot = torch.where(chosen == i)  # the tokens sent to i
            y = expert(tokens.index_select(0, rows))  # (N_i, d_model)
            out.index_add_(0, rows, y * gates[rows, slot].unsqueeze(-1))
        load = torch.bincount(chosen.flatten(), minlength=self.num_experts)
        f = load.to(scores.dtype) / chosen.numel()  # (E,), sums to 1
        p = scores.softmax(dim=-1).mean(dim=0)  # (E,), sums to 1
        self.aux_loss = self.num_experts * (f * p).sum()
        self.expert_index = chosen.detach().view(*x.shape[:-1], self.top_k)
        return out.view_as(x)


def replace_feed_forward(model: _M, num_experts: int, top_k: int, *,
                         d_ff: int | None = None) -> _M:
    """Put a :class:`MoEFeedForward` in place of every ``FeedForward``
    sublayer of ``model``'s :class:`~transformer_book.transformer.Residual`
    blocks, with its activation, biases, device and dtype.

    The new layers have PyTorch's default init (the model's
    ``reset_parameters`` applies its own).

    Args:
        d_ff: each expert's hidden width; ``None`` keeps the replaced
            network's.
    """
    check_instance("model", model, nn.Module)
    found = [m for m in model.modules() if isinstance(m, Residual)
             and isinstance(m.sublayer, FeedForward)]
    if not found:
        raise ValueError("model has no Residual block with a FeedForward "
                         "sublayer to replace")
    for residual in found:
        old = cast(FeedForward, residual.sublayer)
        weight = old.up_proj.weight
        residual.sublayer = MoEFeedForward(
            old.d_model, old.d_ff if d_ff is None else d_ff, num_experts,
            top_k, activation=old.activation,
            bias=old.up_proj.bias is not None, device=weight.device,
            dtype=weight.dtype)
        residual.sublayer.check_inputs = False  # the model checks its input
    return model


def load_balancing_loss(model: nn.Module) -> Tensor:
    """The sum of the ``aux_loss`` of every :class:`MoEFeedForward` in
    ``model``, after a forward (add it, times a small coefficient such as
    0.01, to the training loss)."""
    losses = [m.aux_loss for m in model.modules()
              if isinstance(m, MoEFeedForward) and m.aux_loss is not None]
    if not losses:
        raise ValueError("model has no MoEFeedForward layer that has run a "
                         "forward")
    return torch.stack(losses).sum()
