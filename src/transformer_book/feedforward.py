"""The position-wise feed-forward network: ReLU, GELU or SwiGLU."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._checks import (
    check_bool,
    check_choice,
    check_features,
    check_float_dtype,
    check_int,
    check_probability,
)

__all__ = ["ACTIVATIONS", "FeedForward"]

ACTIVATIONS = ("relu", "gelu", "relu2", "swiglu")


class FeedForward(nn.Module):
    r"""The position-wise feed-forward network (Vaswani et al., 2017, 3.3).

    .. math::

        \mathrm{FFN}(x) = \phi(x W_1 + b_1) W_2 + b_2, \qquad
        \mathrm{FFN}_{\mathrm{SwiGLU}}(x) = (\mathrm{Swish}(x W) \odot x V)
        W_2

    ``up_proj`` is :math:`W_1` (or :math:`V`), ``gate_proj`` SwiGLU's
    :math:`W` (Shazeer, 2020), ``down_proj`` :math:`W_2`; dropout follows
    the activation, as in ``nn.TransformerEncoderLayer``.

    Args:
        d_ff: hidden width (of each SwiGLU branch: no 2/3 rescaling).
        activation: ``"relu"``, ``"gelu"`` (exact, erf-based),
            ``"relu2"`` (ReLU squared, So et al., 2021) or ``"swiglu"``.

    Shape:
        x: ``(..., d_model)``; returns the same shape.
    """

    check_inputs = True  # False when the module around it checks them

    def __init__(
        self, d_model: int, d_ff: int, *, dropout: float = 0.0,
        activation: str = "relu", bias: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.d_model = check_int("d_model", d_model)
        self.d_ff = check_int("d_ff", d_ff)
        self.activation = check_choice("activation", activation, ACTIVATIONS)
        factory: dict[str, Any] = {"bias": check_bool("bias", bias),
                                   "device": device,
                                   "dtype": check_float_dtype("dtype", dtype)}
        self.up_proj = nn.Linear(d_model, d_ff, **factory)
        gated = activation == "swiglu"  # a gate of the same width
        self.gate_proj = nn.Linear(d_model, d_ff, **factory) if gated else None
        self.down_proj = nn.Linear(d_ff, d_model, **factory)
        self.dropout = nn.Dropout(check_probability("dropout", dropout))

    def extra_repr(self) -> str:
        return f"activation={self.activation!r}"

    def forward(self, x: Tensor) -> Tensor:
        """Transform each token of ``x`` alone."""
        if self.check_inputs:
            check_features("x", x, self.d_model, like=self.up_proj.weight)
        h = self.up_proj(x)  # (..., d_ff)
        if self.gate_proj is not None:
            h = F.silu(self.gate_proj(x)) * h
        elif self.activation == "gelu":
            h = F.gelu(h)
        else:
            h = F.relu(h)
            h = h * h if self.activation == "relu2" else h
        return self.down_proj(self.dropout(h))
