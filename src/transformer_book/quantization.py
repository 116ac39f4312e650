"""Weight-only int8 quantisation of linear layers, one scale per row.

The first step of LLM.int8() (Dettmers et al., 2022): each output row of
a weight matrix is stored as 8-bit integers and one float scale, and the
layer computes with the dequantized weight.
"""

from __future__ import annotations

from collections import Counter
from itertools import chain

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._checks import check_instance, check_int

__all__ = ["Int8Linear", "nbytes", "quantize_int8"]

#: The largest integer used: symmetric levels ``-127 ... 127`` (-128 unused).
QMAX = 127


class Int8Linear(nn.Module):
    r"""A linear layer with int8 weights, one float scale per output row.

    .. math::

        s_i = \frac{\max_j |W_{ij}|}{127}, \qquad
        Q_{ij} = \mathrm{round}(W_{ij} / s_i) \in [-127, 127], \qquad
        y = x\, (s \odot Q)^\top + b

    (:math:`s_i = 1` for a zero row), so that
    :math:`|W_{ij} - s_i Q_{ij}| \le s_i / 2`. Only the weight is
    quantized; ``dtype`` is that of the scales, bias and arithmetic.

    Shape:
        - x: ``(..., in_features)``; returns ``(..., out_features)``.
    """

    qweight: Tensor
    scale: Tensor
    bias: nn.Parameter | None

    def __init__(self, in_features: int, out_features: int, *,
                 bias: bool = True, device: torch.device | str | None = None,
                 dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.in_features = check_int("in_features", in_features)
        self.out_features = check_int("out_features", out_features)
        self.register_buffer("qweight", torch.zeros(
            out_features, in_features, dtype=torch.int8, device=device))
        self.register_buffer("scale", torch.ones(
            out_features, device=device, dtype=dtype))
        self.bias = nn.Parameter(torch.zeros(
            out_features, device=device, dtype=dtype)) if bias else None

    @classmethod
    @torch.no_grad()
    def from_linear(cls, linear: nn.Linear) -> Int8Linear:
        """Quantize ``linear``'s weight; its bias is copied as it is."""
        check_instance("linear", linear, nn.Linear, "an nn.Linear")
        w = linear.weight.detach()
        module = cls(linear.in_features, linear.out_features,
                     bias=linear.bias is not None, device=w.device,
                     dtype=w.dtype)
        amax = w.abs().amax(dim=1)  # (out_features,)
        scale = torch.where(amax > 0, amax / QMAX, torch.ones_like(amax))
        q = (w / scale[:, None]).round().clamp(-QMAX, QMAX)
        module.qweight.copy_(q)
        module.scale.copy_(scale)
        if linear.bias is not None:
            module.bias.copy_(linear.bias)  # type: ignore[union-attr]
        return module.train(linear.training)

    def dequantize(self) -> Tensor:
        """The float weight ``s_i Q_ij``, ``(out_features, in_features)``."""
        return self.qweight.to(self.scale.dtype) * self.scale[:, None]

    @property
    def weight(self) -> Tensor:
        """The dequantized weight, for code that reads ``linear.weight``."""
        return self.dequantize()

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.dequantize(), self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features="
                f"{self.out_features}, bias={self.bias is not None}")


def quantize_int8(model: nn.Module) -> nn.Module:
    """Replace every ``nn.Linear`` in ``model`` by an :class:`Int8Linear`.

    The replacement is in place (an ``nn.Linear`` itself gives its new
    :class:`Int8Linear`). A linear layer whose weight is shared (an output
    layer tied to the embedding) stays float, as does everything that is
    not an ``nn.Linear``, :class:`~transformer_book.heads.LMHead` included.
    """
    check_instance("model", model, nn.Module, "an nn.Module")
    if isinstance(model, nn.Linear):
        return Int8Linear.from_linear(model)
    uses = Counter(id(p) for _, p in
                   model.named_parameters(remove_duplicate=False))
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.Linear) and uses[id(child.weight)] == 1:
                setattr(parent, name, Int8Linear.from_linear(child))
    return model


def nbytes(module: nn.Module) -> int:
    """The bytes of ``module``'s parameters and buffers, each counted once
    (a tied weight is one tensor)."""
    check_instance("module", module, nn.Module, "an nn.Module")
    tensors = {id(t): t for t in chain(module.parameters(), module.buffers())}
    return sum(t.numel() * t.element_size() for t in tensors.values())
