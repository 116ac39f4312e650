"""The Vision Transformer (Dosovitskiy et al., 2021): an image, a float
tensor ``(B, C, H, W)``, as a sequence of patches."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .._checks import (
    check_choice,
    check_divisible,
    check_int,
    check_shape,
    check_tensor,
    skip_inner_checks,
)
from ..heads import ClassificationHead
from ..positional import sincos2d_encoding
from ..transformer import Encoder
from ._common import check_config, check_sizes, init_normal

__all__ = ["PatchEmbedding", "ViT", "ViTConfig", "patchify"]


def patchify(images: Tensor, patch_size: int) -> Tensor:
    """Cut images into ``P x P`` patches, each flattened.

    Patches in row-major order; a patch's values in ``(row, column,
    channel)`` order.

    Shape:
        - images: ``(B, C, H, W)``, ``H`` and ``W`` divisible by ``P``.
        - returns ``(B, N, P * P * C)`` with ``N = (H / P) (W / P)``.
    """
    B, C, H, W = check_tensor("images", images, ndim=4).shape
    P = check_int("patch_size", patch_size)
    check_divisible("images height", H, "patch_size", P)
    check_divisible("images width", W, "patch_size", P)
    x = images.reshape(B, C, H // P, P, W // P, P)  # (B, C, H/P, P, W/P, P)
    x = x.permute(0, 2, 4, 3, 5, 1)  # (B, H/P, W/P, P, P, C)
    return x.reshape(B, (H // P) * (W // P), P * P * C)  # (B, N, P*P*C)


class PatchEmbedding(nn.Module):
    r"""Project each patch to ``d_model`` values: :math:`z_i = W x_i + b`.

    One ``nn.Conv2d`` with kernel and stride ``P`` (Dosovitskiy et al.,
    2021, eq. 1); :meth:`as_linear` is the same map on :func:`patchify`'s
    output.

    Shape:
        - images: ``(B, in_channels, image_size, image_size)``, float.
        - returns ``(B, N, d_model)``, patches in row-major order.
    """

    check_inputs = True  # off inside a ViT, which checks at entry

    def __init__(self, image_size: int, patch_size: int, in_channels: int,
                 d_model: int) -> None:
        super().__init__()
        self.image_size = check_int("image_size", image_size)
        self.in_channels = check_int("in_channels", in_channels)
        check_divisible("image_size", image_size, "patch_size",
                        check_int("patch_size", patch_size))
        self.num_patches = (image_size // patch_size) ** 2
        self.proj = nn.Conv2d(in_channels, check_int("d_model", d_model),
                              kernel_size=patch_size, stride=patch_size)

    def check(self, images: Tensor) -> Tensor:
        """``images`` if they fit (size, channels, dtype)."""
        C, S = self.in_channels, self.image_size
        return check_shape(
            "images", images, (None, C, S, S),
            f"(B, in_channels={C}, image_size={S}, image_size={S})",
            like=self.proj.weight)

    def forward(self, images: Tensor) -> Tensor:
        if self.check_inputs:
            self.check(images)
        x = self.proj(images)  # (B, d_model, H/P, W/P)
        return x.flatten(2).transpose(1, 2)  # (B, N, d_model)

    def as_linear(self) -> nn.Linear:
        """A copy as the ``nn.Linear`` with ``linear(patchify(x, P))``
        equal to ``self(x)``."""
        weight = self.proj.weight.detach()  # (d_model, C, P, P)
        linear = nn.Linear(weight[0].numel(), weight.shape[0],
                           device=weight.device, dtype=weight.dtype)
        with torch.no_grad():
            # (d_model, C, P, P) -> (d_model, P, P, C) -> (d_model, P*P*C)
            linear.weight.copy_(weight.permute(0, 2, 3, 1).flatten(1))
            assert self.proj.bias is not None  # built with a bias
            linear.bias.copy_(self.proj.bias.detach())
        return linear


@dataclass(frozen=True)
class ViTConfig:
    """Sizes, pooling and positions of a :class:`ViT`.

    The defaults suit 28 x 28 digits. ViT-B/16 is ``ViTConfig(224, 16,
    in_channels=3, num_classes=1000, d_model=768, num_heads=12,
    num_layers=12)``.

    Args:
        d_ff: the feed-forward width; ``None`` means ``4 * d_model``.
        pool: ``"cls"`` (a learned ``[CLS]`` token) or ``"mean"``.
        positional: ``"learned"`` or ``"sincos2d"`` (fixed, see
            :func:`~transformer_book.positional.sincos2d_encoding`).
    """

    image_size: int
    patch_size: int
    in_channels: int = 1
    num_classes: int = 10
    d_model: int = 64  # 16 patches of 49 pixels need little width
    num_heads: int = 4  # head_dim 16
    num_layers: int = 4
    d_ff: int | None = None
    dropout: float = 0.0  # 4,000 digits overfit less with augmentation
    pool: str = "cls"
    positional: str = "learned"

    def __post_init__(self) -> None:
        check_sizes(self, "image_size", "patch_size", "in_channels",
                    "num_classes", "num_layers")
        check_divisible("image_size", self.image_size, "patch_size",
                        self.patch_size)
        check_choice("pool", self.pool, ("cls", "mean"))
        check_choice("positional", self.positional, ("learned", "sincos2d"))
        if self.positional == "sincos2d":
            sincos2d_encoding(1, self.d_model)  # checks d_model % 4

    @property
    def grid_size(self) -> int:
        return self.image_size // self.patch_size

    @property
    def num_patches(self) -> int:
        return self.grid_size**2

    @property
    def num_tokens(self) -> int:
        """``num_patches``, plus one with ``[CLS]``."""
        return self.num_patches + (self.pool == "cls")


class ViT(nn.Module):
    r"""Vision Transformer: patches, positions, a pre-LN encoder, a head.

    .. math::

        z_0 = [x_\text{cls};\, x_1 E;\, \dots;\, x_N E] + E_\text{pos},
        \qquad y = \mathrm{head}(\mathrm{LN}(\mathrm{Encoder}(z_0)))

    (Dosovitskiy et al., 2021, eqs. 1-4.) Weights and learned positions
    start ``~ N(0, 0.02^2)``, ``[CLS]`` at zero.

    Shape:
        - images: ``(B, in_channels, image_size, image_size)``, float.
        - returns logits ``(B, num_classes)``.
    """

    position_embedding: Tensor

    def __init__(self, config: ViTConfig) -> None:
        super().__init__()
        self.config = c = check_config(config, ViTConfig)
        self.patch_embedding = PatchEmbedding(c.image_size, c.patch_size,
                                              c.in_channels, c.d_model)
        self.cls_token = nn.Parameter(
            torch.zeros(1, 1, c.d_model)) if c.pool == "cls" else None
        table = torch.zeros(c.num_tokens, c.d_model)  # [CLS] first
        if c.positional == "learned":
            self.position_embedding = nn.Parameter(table)
        else:  # fixed; [CLS] has no place in the grid and keeps zeros
            table[-c.num_patches :] = sincos2d_encoding(c.grid_size, c.d_model)
            self.register_buffer("position_embedding", table, persistent=False)
        self.dropout = nn.Dropout(c.dropout)
        self.encoder = Encoder(  # pre-LN, so with a final LayerNorm
            c.num_layers, c.d_model, c.num_heads, c.d_ff or 4 * c.d_model,
            dropout=c.dropout, activation="gelu", norm_first=True)
        self.head = ClassificationHead(c.d_model, c.num_classes, pool=c.pool,
                                       dropout=c.dropout)
        self.reset_parameters()
        skip_inner_checks(self)

    def reset_parameters(self) -> None:
        init_normal(self)
        if isinstance(self.position_embedding, nn.Parameter):
            nn.init.normal_(self.position_embedding, std=0.02)
        if self.cls_token is not None:
            nn.init.zeros_(self.cls_token)

    def embed(self, images: Tensor) -> Tensor:
        """The encoder's input ``(B, num_tokens, d_model)``, ``[CLS]``
        first."""
        self.patch_embedding.check(images)
        x = self.patch_embedding(images)  # (B, N, d_model)
        if self.cls_token is not None:
            cls = self.cls_token.expand(x.shape[0], -1, -1)  # (B, 1, D)
            x = torch.cat((cls, x), dim=1)  # (B, N + 1, d_model)
        return self.dropout(x + self.position_embedding.to(x.dtype))

    def forward(self, images: Tensor) -> Tensor:
        return self.head(self.encoder(self.embed(images)))
