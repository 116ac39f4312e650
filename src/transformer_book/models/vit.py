"""The Vision Transformer (ViT): an image as a sequence of patches.

Dosovitskiy et al. (2021) cut an image into ``P x P`` patches, project each
patch linearly to ``d_model`` values, prepend a learned ``[CLS]`` token,
add position embeddings and run the pre-LN transformer encoder of Part III
on the result; a linear head reads the final ``[CLS]`` state:

- :func:`patchify` cuts images into flattened patches, in row-major order;
- :class:`PatchEmbedding` projects them with one strided convolution, and
  :meth:`PatchEmbedding.as_linear` gives the ``nn.Linear`` on
  :func:`patchify`'s output that computes the same thing;
- :class:`ViTConfig` and :class:`ViT`, the model, with ``[CLS]`` or mean
  pooling and learned or fixed 2-D sine-cosine positions
  (:func:`sincos2d_encoding`, Beyer et al., 2022);
- :func:`attention_rollout` (Abnar and Zuidema, 2020) and
  :func:`mean_attention_distance` (Dosovitskiy et al., 2021, appendix
  D.7) read the attention weights that ``ViT(..., need_weights=True)``
  returns.

Images are ``(B, C, H, W)`` float tensors with ``H = W = image_size``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from .._checks import (
    check_choice,
    check_int,
    check_param_dtype,
    check_probability,
    check_tensor,
)
from ..heads import ClassificationHead
from ..positional import sinusoidal_encoding
from ._common import check_config, gelu_encoder, init_normal, resolve_d_ff

__all__ = [
    "PatchEmbedding",
    "ViT",
    "ViTConfig",
    "attention_rollout",
    "mean_attention_distance",
    "patchify",
    "sincos2d_encoding",
]

_POOLS = ("cls", "mean")
_POSITIONALS = ("learned", "sincos2d")


def _check_divisible(image_size: int, patch_size: int) -> None:
    if image_size % patch_size:
        raise ValueError(
            f"image size {image_size} is not divisible by "
            f"patch_size={patch_size}"
        )


def _check_images(
    images: Any,
    image_size: int | None = None,
    in_channels: int | None = None,
    *,
    floating: bool = True,
) -> Tensor:
    """A ``(B, C, H, W)`` tensor, of the expected size and channels."""
    check_tensor("images", images, ndim=4, floating=floating)
    _, channels, height, width = images.shape
    if in_channels is not None and channels != in_channels:
        raise ValueError(
            f"images have {channels} channels (shape "
            f"{tuple(images.shape)}), expected in_channels={in_channels}"
        )
    if image_size is not None and (height, width) != (image_size,) * 2:
        raise ValueError(
            f"images are {height}x{width} (shape {tuple(images.shape)}), "
            f"expected image_size={image_size} ({image_size}x{image_size})"
        )
    return images


def patchify(images: Tensor, patch_size: int) -> Tensor:
    """Cut images into non-overlapping patches and flatten each one.

    Patch ``i`` is the block at row ``i // (W / P)`` and column
    ``i % (W / P)`` of the grid of patches (row-major order, the order in
    which one reads). Its ``P * P * C`` values are flattened in
    ``(row, column, channel)`` order: the ``C`` channels of the patch's
    top-left pixel first, then those of the pixel to its right.

    Args:
        images: a batch of images.
        patch_size: side ``P`` of the square patches; it must divide both
            ``H`` and ``W``.

    Shape:
        - images: ``(B, C, H, W)``.
        - returns ``(B, N, P * P * C)`` with ``N = (H / P) * (W / P)``.

    Returns:
        The flattened patches, one row per patch.

    Raises:
        TypeError: if ``images`` is not a tensor or ``patch_size`` not an
            int.
        ValueError: if ``images`` is not 4-D, or ``H`` or ``W`` is not
            divisible by ``patch_size``.

    Example:
        >>> patchify(torch.zeros(2, 3, 28, 28), 7).shape
        torch.Size([2, 16, 147])
    """
    _check_images(images, floating=False)
    P = check_int("patch_size", patch_size)
    B, C, H, W = images.shape
    _check_divisible(H, P)
    _check_divisible(W, P)
    x = images.reshape(B, C, H // P, P, W // P, P)  # (B, C, H/P, P, W/P, P)
    x = x.permute(0, 2, 4, 3, 5, 1)  # (B, H/P, W/P, P, P, C)
    return x.reshape(B, (H // P) * (W // P), P * P * C)  # (B, N, P*P*C)


class PatchEmbedding(nn.Module):
    r"""Project each ``P x P`` patch to ``d_model`` values.

    .. math:: z_i = W \, \mathrm{vec}(x_i) + b, \qquad i = 1, \dots, N

    The same weights applied to every patch, with a stride equal to their
    size, is a convolution with kernel ``P`` and stride ``P``: this module
    is one ``nn.Conv2d`` (as in timm and the original JAX code), and
    :meth:`as_linear` gives the ``nn.Linear`` on :func:`patchify`'s output
    that computes the same function (Dosovitskiy et al., 2021, eq. 1).

    Args:
        image_size: side of the square input images.
        patch_size: side ``P`` of the square patches; divides
            ``image_size``.
        in_channels: number of channels ``C`` (1 for grey, 3 for RGB).
        d_model: width of the patch embeddings.

    Shape:
        - images: ``(B, C, image_size, image_size)``.
        - returns ``(B, N, d_model)`` with ``N = (image_size / P) ** 2``,
          patches in row-major order.

    Raises:
        TypeError: if a size is not an int.
        ValueError: if a size is below 1 or ``image_size`` is not divisible
            by ``patch_size``.

    Example:
        >>> embed = PatchEmbedding(28, 7, 1, 64)
        >>> embed(torch.zeros(2, 1, 28, 28)).shape
        torch.Size([2, 16, 64])
    """

    def __init__(
        self, image_size: int, patch_size: int, in_channels: int, d_model: int
    ) -> None:
        super().__init__()
        self.image_size = check_int("image_size", image_size)
        self.patch_size = check_int("patch_size", patch_size)
        self.in_channels = check_int("in_channels", in_channels)
        self.d_model = check_int("d_model", d_model)
        _check_divisible(image_size, patch_size)
        #: Patches per side of the image.
        self.grid_size = image_size // patch_size
        #: Patches per image, ``N``.
        self.num_patches = self.grid_size**2
        self.proj = nn.Conv2d(
            in_channels, d_model, kernel_size=patch_size, stride=patch_size
        )

    def extra_repr(self) -> str:
        return f"image_size={self.image_size}, num_patches={self.num_patches}"

    def forward(self, images: Tensor) -> Tensor:
        """Embed every patch of every image.

        Args:
            images: the batch of images.

        Returns:
            The patch embeddings, ``(B, N, d_model)``.

        Raises:
            TypeError: if ``images`` is not a float tensor.
            ValueError: if ``images`` is not 4-D, or has the wrong size or
                number of channels.
        """
        _check_images(images, self.image_size, self.in_channels)
        check_param_dtype("images", images, self.proj.weight)
        x = self.proj(images)  # (B, d_model, H/P, W/P)
        return x.flatten(2).transpose(1, 2)  # (B, N, d_model)

    def as_linear(self) -> nn.Linear:
        """The ``nn.Linear`` on :func:`patchify`'s output equal to this.

        The convolution's weight ``(d_model, C, P, P)`` is permuted to
        ``(d_model, P, P, C)``, :func:`patchify`'s ``(row, column,
        channel)`` order, and flattened. The result is a copy: training it
        leaves this module unchanged.

        Returns:
            ``nn.Linear(P * P * C, d_model)`` on the same device and dtype,
            with ``linear(patchify(x, P)) == self(x)`` up to rounding.
        """
        weight = self.proj.weight.detach()  # (d_model, C, P, P)
        linear = nn.Linear(
            weight[0].numel(),
            self.d_model,
            device=weight.device,
            dtype=weight.dtype,
        )
        with torch.no_grad():
            # (d_model, C, P, P) -> (d_model, P, P, C) -> (d_model, P*P*C)
            linear.weight.copy_(
                weight.permute(0, 2, 3, 1).reshape(self.d_model, -1)
            )
            assert self.proj.bias is not None  # built with a bias
            linear.bias.copy_(self.proj.bias.detach())
        return linear


def sincos2d_encoding(
    grid_size: int,
    d_model: int,
    *,
    base: float = 10000.0,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> Tensor:
    """Fixed 2-D sine-cosine positions of a square grid of patches.

    The first ``d_model / 2`` values of patch ``(r, c)`` are the 1-D
    sinusoidal encoding of its row ``r`` and the last ``d_model / 2`` that
    of its column ``c`` (Vaswani et al., 2017;
    :func:`~transformer_book.positional.sinusoidal_encoding`), as in MAE
    (He et al., 2022) and the plain ViT baselines of Beyer et al. (2022).
    Patches in the same row share the first half, patches in the same
    column the second.

    Args:
        grid_size: patches per side.
        d_model: the encoding width; divisible by 4 (a sine and a cosine
            for each of two axes).
        base: the wavelength scale.
        dtype: floating dtype of the table (default dtype when ``None``).
        device: device of the table.

    Shape:
        returns ``(grid_size ** 2, d_model)``, patches in row-major order.

    Raises:
        TypeError: if a size is not an int.
        ValueError: if ``grid_size`` is below 1 or ``d_model`` is not a
            positive multiple of 4.
    """
    check_int("grid_size", grid_size)
    check_int("d_model", d_model)
    if d_model % 4:
        raise ValueError(
            f"d_model={d_model} must be divisible by 4 for 2-D sine-cosine "
            "positions (a sin and a cos per axis)"
        )
    half = sinusoidal_encoding(
        grid_size, d_model // 2, base=base, dtype=dtype, device=device
    )  # (grid_size, d_model/2)
    rows = half[:, None, :].expand(grid_size, grid_size, d_model // 2)
    cols = half[None, :, :].expand(grid_size, grid_size, d_model // 2)
    table = torch.cat((rows, cols), dim=-1)  # (grid, grid, d_model)
    return table.reshape(grid_size * grid_size, d_model)  # (N, d_model)


@dataclass(frozen=True)
class ViTConfig:
    """Sizes, pooling and positions of a :class:`ViT`.

    The defaults make a small model for 28 x 28 digits; ViT-Base/16
    (Dosovitskiy et al., 2021) is ``ViTConfig(224, 16, in_channels=3,
    num_classes=1000, d_model=768, num_heads=12, num_layers=12)``.

    Args:
        image_size: side of the square input images.
        patch_size: side of the square patches; divides ``image_size``.
        in_channels: channels of the images (1 grey, 3 RGB).
        num_classes: number of labels.
        d_model: width of the model.
        num_heads: attention heads per layer; divides ``d_model``.
        num_layers: number of encoder layers.
        d_ff: hidden width of the feed-forward networks; ``None`` means
            ``4 * d_model`` (the paper's MLP ratio), and the config then
            holds that number.
        dropout: dropout on the embeddings, attention weights, residual
            branches and before the head (training mode only).
        pool: ``"cls"`` (a learned ``[CLS]`` token read by the head) or
            ``"mean"`` (the mean of the patch states; no ``[CLS]`` token).
        positional: ``"learned"`` (a trained vector per position, the
            paper's choice) or ``"sincos2d"`` (fixed, see
            :func:`sincos2d_encoding`; ``d_model`` divisible by 4).

    Raises:
        TypeError: if a size is not an int.
        ValueError: if a size is below 1, ``image_size`` is not divisible
            by ``patch_size``, ``num_heads`` does not divide ``d_model``,
            ``dropout`` is outside ``[0, 1)``, ``pool`` or ``positional``
            is unknown, or ``"sincos2d"`` gets a ``d_model`` that is not a
            multiple of 4.
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
        for name in (
            "image_size", "patch_size", "in_channels", "num_classes",
            "d_model", "num_heads", "num_layers",
        ):
            check_int(name, getattr(self, name))
        _check_divisible(self.image_size, self.patch_size)
        if self.d_model % self.num_heads:
            raise ValueError(
                f"d_model={self.d_model} is not divisible by "
                f"num_heads={self.num_heads}"
            )
        resolve_d_ff(self)
        check_probability("dropout", self.dropout)
        check_choice("pool", self.pool, _POOLS)
        check_choice("positional", self.positional, _POSITIONALS)
        if self.positional == "sincos2d" and self.d_model % 4:
            raise ValueError(
                f"d_model={self.d_model} must be divisible by 4 for "
                "positional='sincos2d'"
            )

    @property
    def grid_size(self) -> int:
        """Patches per side, ``image_size / patch_size``."""
        return self.image_size // self.patch_size

    @property
    def num_patches(self) -> int:
        """Patches per image, ``N``."""
        return self.grid_size**2

    @property
    def num_tokens(self) -> int:
        """Tokens the encoder sees, ``N + 1`` with ``[CLS]``, else ``N``."""
        return self.num_patches + (self.pool == "cls")


class ViT(nn.Module):
    r"""Vision Transformer: patches, positions, a pre-LN encoder, a head.

    .. math::

        z_0 &= [x_\text{cls};\, x_1 E;\, \dots;\, x_N E] + E_\text{pos} \\
        z_\ell &= \mathrm{EncoderLayer}_\ell(z_{\ell - 1}),
            \quad \ell = 1, \dots, L \quad \text{(pre-LN, GELU)} \\
        y &= \mathrm{head}(\mathrm{LN}(z_L))

    (Dosovitskiy et al., 2021, eqs. 1-4.) The head is a
    :class:`~transformer_book.heads.ClassificationHead` that reads the
    ``[CLS]`` state, or the mean of the patch states when
    ``pool="mean"`` (then there is no ``[CLS]`` token). Linear weights
    start ``~ N(0, 0.02^2)`` with zero biases, the learned positions too;
    the ``[CLS]`` token starts at zero.

    Attributes:
        patch_embedding: the :class:`PatchEmbedding`.
        cls_token: ``(1, 1, d_model)`` parameter, or ``None`` with
            ``pool="mean"``.
        position_embedding: ``(num_tokens, d_model)``: a parameter
            (``"learned"``) or a fixed buffer (``"sincos2d"``, whose
            ``[CLS]`` row is zero). Row 0 belongs to ``[CLS]`` when there
            is one.
        encoder: the pre-LN :class:`~transformer_book.layers.Encoder`
            with its final LayerNorm.
        head: the classification head.

    Args:
        config: the model's sizes.

    Shape:
        - images: ``(B, in_channels, image_size, image_size)``, float.
        - returns logits ``(B, num_classes)``; with ``need_weights`` also
          a list of ``num_layers`` tensors ``(B, num_heads, T, T)``, with
          ``T = N + 1`` tokens (``N`` with ``pool="mean"``).

    Raises:
        TypeError: if ``config`` is not a :class:`ViTConfig`.

    Example:
        >>> model = ViT(ViTConfig(image_size=28, patch_size=7))
        >>> model(torch.zeros(2, 1, 28, 28)).shape
        torch.Size([2, 10])
    """

    position_embedding: Tensor

    def __init__(self, config: ViTConfig) -> None:
        super().__init__()
        self.config = c = check_config(config, ViTConfig)
        self.patch_embedding = PatchEmbedding(
            c.image_size, c.patch_size, c.in_channels, c.d_model
        )
        self.cls_token: nn.Parameter | None = None
        if c.pool == "cls":
            self.cls_token = nn.Parameter(torch.zeros(1, 1, c.d_model))
        if c.positional == "learned":
            self.position_embedding = nn.Parameter(
                torch.zeros(c.num_tokens, c.d_model)
            )
        else:
            table = sincos2d_encoding(c.grid_size, c.d_model)  # (N, D)
            if c.pool == "cls":  # [CLS] has no place in the grid
                table = torch.cat((table.new_zeros(1, c.d_model), table))
            self.register_buffer("position_embedding", table, persistent=False)
        self.dropout = nn.Dropout(c.dropout)
        self.encoder = gelu_encoder(c, norm_first=True, final_norm=True)
        self.head = ClassificationHead(
            c.d_model, c.num_classes, pool=c.pool, dropout=c.dropout
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """``N(0, 0.02^2)`` linear weights and learned positions.

        Biases start at zero, the ``[CLS]`` token at zero, the patch
        convolution at PyTorch's default and the norms at ones and zeros.
        """
        init_normal(self)
        if isinstance(self.position_embedding, nn.Parameter) and not (
            self.position_embedding.is_meta
        ):
            nn.init.normal_(self.position_embedding, std=0.02)
        if self.cls_token is not None:
            nn.init.zeros_(self.cls_token)

    def embed(self, images: Tensor) -> Tensor:
        """The encoder's input: patch embeddings, ``[CLS]``, positions.

        Args:
            images: ``(B, C, image_size, image_size)``.

        Returns:
            ``(B, T, d_model)`` with ``T = num_tokens``; ``[CLS]`` first.

        Raises:
            TypeError, ValueError: as :meth:`forward`.
        """
        x = self.patch_embedding(images)  # (B, N, d_model)
        if self.cls_token is not None:
            cls = self.cls_token.expand(x.shape[0], -1, -1)  # (B, 1, D)
            x = torch.cat((cls, x), dim=1)  # (B, N + 1, d_model)
        return self.dropout(x + self.position_embedding.to(x.dtype))

    def encode(
        self, images: Tensor, *, need_weights: bool = False
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """The final hidden states, after the final LayerNorm.

        Args:
            images: ``(B, C, image_size, image_size)``.
            need_weights: also return every layer's attention weights.

        Returns:
            ``(B, T, d_model)``, or ``(hidden, weights)``.

        Raises:
            TypeError, ValueError: as :meth:`forward`.
        """
        return self.encoder(self.embed(images), need_weights=need_weights)

    def forward(
        self, images: Tensor, *, need_weights: bool = False
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """Classify a batch of images.

        Args:
            images: ``(B, C, image_size, image_size)``, float.
            need_weights: also return the attention weights of every layer
                (computed on the explicit attention path).

        Returns:
            Logits ``(B, num_classes)``, or ``(logits, weights)`` where
            ``weights`` holds one ``(B, num_heads, T, T)`` tensor per layer.

        Raises:
            TypeError: if ``images`` is not a float tensor.
            ValueError: if ``images`` is not 4-D, not ``image_size`` square
                or has not ``in_channels`` channels.
        """
        out = self.encode(images, need_weights=need_weights)
        if isinstance(out, tuple):  # need_weights
            hidden, weights = out
            return self.head(hidden), weights
        return self.head(out)


def _check_weights(weights: Any) -> list[Tensor]:
    """A non-empty list of equal ``(B, H, T, T)`` float tensors."""
    if isinstance(weights, Tensor):
        weights = [weights]
    weights = list(weights)
    if not weights:
        raise ValueError("weights is empty; pass one tensor per layer")
    for i, w in enumerate(weights):
        check_tensor(f"weights[{i}]", w, ndim=4, floating=True)
        if w.shape[-1] != w.shape[-2] or w.shape != weights[0].shape:
            raise ValueError(
                f"weights[{i}] has shape {tuple(w.shape)}; expected "
                f"(B, H, T, T) like weights[0] {tuple(weights[0].shape)}"
            )
    return weights


def _resolve_pool(pool: str | None, num_tokens: int) -> str:
    """``pool``, or read from the token count of a square grid."""
    if pool is not None:
        return check_choice("pool", pool, _POOLS)
    if math.isqrt(num_tokens - 1) ** 2 == num_tokens - 1 and num_tokens > 1:
        return "cls"
    if math.isqrt(num_tokens) ** 2 == num_tokens:
        return "mean"
    raise ValueError(
        f"weights have {num_tokens} tokens, neither a square grid of "
        "patches nor one plus a square; pass pool='cls' or pool='mean'"
    )


def attention_rollout(
    weights: list[Tensor] | Tensor,
    *,
    residual: bool = True,
    pool: str | None = None,
) -> Tensor:
    r"""How much each patch flows into the pooled representation.

    Attention rollout (Abnar and Zuidema, 2020) follows attention through
    the layers. Each layer's weights are averaged over the heads; with
    ``residual`` the identity is mixed in for the skip connection,
    :math:`\tilde A_\ell = \tfrac12 (\bar A_\ell + I)`, and the layers are
    multiplied, :math:`R = \tilde A_L \cdots \tilde A_1`. Row ``t`` of
    :math:`R` says how much of each input token reaches token ``t`` at the
    top. The result reads the rows the head reads: the ``[CLS]`` row with
    ``pool="cls"`` (its ``[CLS]`` column dropped), the mean of all rows
    with ``pool="mean"``; it is then normalised to sum to 1 over the
    patches. When nothing flows from the patches (a ``[CLS]`` that only
    ever attends to itself), the weights are uniform.

    Args:
        weights: one ``(B, H, T, T)`` tensor per layer, first layer first
            (``ViT(...)(images, need_weights=True)[1]``).
        residual: account for the residual connections (the paper's
            rollout); ``False`` multiplies the raw head-averaged weights.
        pool: ``"cls"`` (token 0 is ``[CLS]``) or ``"mean"``; ``None``
            reads it from ``T``: ``N + 1`` or ``N`` for a square grid of
            ``N`` patches.

    Shape:
        returns ``(B, N)``: one weight per patch, in row-major order
        (``.view(B, grid, grid)`` gives a map of the image).

    Returns:
        Non-negative weights that sum to 1 over each image's patches.

    Raises:
        TypeError: if a weight tensor is not a float tensor.
        ValueError: if ``weights`` is empty, a tensor is not
            ``(B, H, T, T)`` like the first, or ``pool`` is unknown or
            cannot be read from ``T``.
    """
    weights = _check_weights(weights)
    T = weights[0].shape[-1]
    pool = _resolve_pool(pool, T)
    eye = torch.eye(T, dtype=weights[0].dtype, device=weights[0].device)
    rollout = eye
    for w in weights:
        a = w.mean(dim=1)  # (B, T, T)
        if residual:
            a = 0.5 * (a + eye)
        rollout = a @ rollout  # (B, T, T)
    if pool == "cls":
        flow = rollout[:, 0, 1:]  # (B, N)
    else:
        flow = rollout.mean(dim=1)  # (B, N)
    total = flow.sum(dim=-1, keepdim=True)  # (B, 1)
    uniform = torch.full_like(flow, 1.0 / max(flow.shape[-1], 1))
    return torch.where(total > 0, flow / total.clamp_min(1e-12), uniform)


def mean_attention_distance(
    weights: list[Tensor] | Tensor,
    *,
    patch_size: int = 1,
    pool: str | None = None,
) -> Tensor:
    """Mean distance between a query patch and the patches it attends to.

    For each layer and head: the distance from every query patch to every
    key patch (Euclidean, between patch centres, in pixels), weighted by
    the attention weights and averaged over query patches and images. The
    ``[CLS]`` token has no place in the image: its row and column are
    dropped and each remaining row renormalised over the patches. This is
    the "attention distance" of Dosovitskiy et al. (2021, figure 7), the
    analogue of a CNN's receptive field.

    Args:
        weights: one ``(B, H, T, T)`` tensor per layer.
        patch_size: pixels per patch side (1 measures in patches).
        pool: ``"cls"``, ``"mean"`` or ``None`` (read from ``T``, as in
            :func:`attention_rollout`).

    Shape:
        returns ``(num_layers, num_heads)``.

    Returns:
        The mean attention distance of each head, in pixels.

    Raises:
        TypeError, ValueError: as :func:`attention_rollout`, or if
            ``patch_size`` is not a positive int.
    """
    weights = _check_weights(weights)
    patch_size = check_int("patch_size", patch_size)
    T = weights[0].shape[-1]
    pool = _resolve_pool(pool, T)
    N = T - 1 if pool == "cls" else T
    grid = math.isqrt(N)
    if grid * grid != N:
        raise ValueError(f"{N} patches do not form a square grid")
    w = torch.stack(weights)  # (L, B, H, T, T)
    if pool == "cls":
        w = w[..., 1:, 1:]  # (L, B, H, N, N)
    w = w / w.sum(dim=-1, keepdim=True).clamp_min(1e-12)
    index = torch.arange(N, device=w.device)
    coords = torch.stack((index // grid, index % grid), dim=-1)  # (N, 2)
    distance = torch.cdist(coords.to(w.dtype), coords.to(w.dtype))  # (N, N)
    per_query = (w * distance * patch_size).sum(dim=-1)  # (L, B, H, N)
    return per_query.mean(dim=(1, 3))  # (L, H)
