"""Normalisation of each token's features: LayerNorm and RMSNorm."""

from __future__ import annotations

from typing import Any, TypeVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._checks import (
    check_bool,
    check_features,
    check_float_dtype,
    check_int,
    check_number,
    check_twin,
)

__all__ = ["LayerNorm", "RMSNorm"]

_Norm = TypeVar("_Norm", "LayerNorm", "RMSNorm")


class LayerNorm(nn.Module):
    r"""Layer normalisation (Ba et al., 2016).

    .. math::

        \mathrm{LayerNorm}(x) = \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}}
        \odot \gamma + \beta

    over one token's features (biased variance), with a learned ``weight``
    :math:`\gamma` and ``bias`` :math:`\beta`: ``nn.LayerNorm(d_model)``,
    through PyTorch's kernel; ``fused = False`` on an instance computes the
    formula step by step.

    Shape:
        x: ``(..., d_model)``; returns the same shape.
    """

    fused = True  # F.layer_norm; False: the formula written out
    check_inputs = True  # False when the module around it checks them

    def __init__(
        self, d_model: int, *, eps: float = 1e-5, bias: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.d_model = check_int("d_model", d_model)
        self.eps = check_number("eps", eps, minimum=0.0, min_inclusive=False)
        self.weight = nn.Parameter(torch.ones(
            d_model, device=device, dtype=check_float_dtype("dtype", dtype)))
        if check_bool("bias", bias):
            self.bias = nn.Parameter(torch.zeros_like(self.weight))
        else:
            self.register_parameter("bias", None)

    def extra_repr(self) -> str:
        return f"{self.d_model}, eps={self.eps}, bias={self.bias is not None}"

    def forward(self, x: Tensor) -> Tensor:
        """Normalise each token of ``x`` over its last dimension."""
        if self.check_inputs:
            check_features("x", x, self.d_model, like=self.weight)
        if self.fused:
            return F.layer_norm(x, (self.d_model,), self.weight, self.bias,
                                self.eps)
        centred = x - x.mean(dim=-1, keepdim=True)  # (..., d_model)
        # The biased variance as the mean square of the centred values
        # (three times faster on a CPU than x.var over a short last dim).
        var = (centred * centred).mean(dim=-1, keepdim=True)  # (..., 1)
        x = centred * torch.rsqrt(var + self.eps) * self.weight
        return x if self.bias is None else x + self.bias

    @classmethod
    def from_torch(cls, module: nn.LayerNorm) -> LayerNorm:
        """Copy an ``nn.LayerNorm`` over one dimension, ``eps`` included."""
        return _copy_norm(cls, module, nn.LayerNorm)


class RMSNorm(nn.Module):
    r"""Root-mean-square normalisation (Zhang and Sennrich, 2019).

    .. math::

        \mathrm{RMSNorm}(x) = \frac{x}{\sqrt{\tfrac{1}{d}\sum_i x_i^2
        + \epsilon}} \odot \gamma

    LayerNorm without the mean and :math:`\beta`: ``nn.RMSNorm``.

    Args:
        eps: added to the mean square; ``None`` takes the input dtype's
            machine epsilon, as PyTorch does.

    Shape:
        x: ``(..., d_model)``; returns the same shape.
    """

    check_inputs = True  # False when the module around it checks them

    def __init__(
        self, d_model: int, *, eps: float | None = 1e-6,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.d_model = check_int("d_model", d_model)
        self.eps = None if eps is None else check_number(
            "eps", eps, minimum=0.0, min_inclusive=False)
        self.weight = nn.Parameter(torch.ones(
            d_model, device=device, dtype=check_float_dtype("dtype", dtype)))

    def extra_repr(self) -> str:
        return f"{self.d_model}, eps={self.eps}"

    def forward(self, x: Tensor) -> Tensor:
        """Divide each token of ``x`` by its root mean square."""
        if self.check_inputs:
            check_features("x", x, self.d_model)
        eps = torch.finfo(x.dtype).eps if self.eps is None else self.eps
        mean_square = x.pow(2).mean(dim=-1, keepdim=True)  # (..., 1)
        return x * torch.rsqrt(mean_square + eps) * self.weight

    @classmethod
    def from_torch(cls, module: nn.RMSNorm) -> RMSNorm:
        """Copy an ``nn.RMSNorm`` over one dimension, ``eps`` included."""
        return _copy_norm(cls, module, nn.RMSNorm)


def _copy_norm(cls: type[_Norm], module: Any, twin: type) -> _Norm:
    """``cls`` with the ``eps``, weight (and bias) of ``module``."""
    check_twin(module, twin, lambda m: {
        f"normalized_shape={tuple(m.normalized_shape)} (one dim only)":
            len(m.normalized_shape) != 1,
        "elementwise_affine=False": not m.elementwise_affine,
    })
    # nn.LayerNorm may lack its bias; nn.RMSNorm has none.
    options = {"bias": module.bias is not None} if twin is nn.LayerNorm else {}
    weight = module.weight
    ours = cls(module.normalized_shape[0], eps=module.eps,
               device=weight.device, dtype=weight.dtype, **options)
    ours.load_state_dict(module.state_dict())
    return ours.train(module.training)
