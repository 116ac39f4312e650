"""The Vision Transformer: patches, the model, rollout and bad input."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from transformer_book import models
from transformer_book.analysis import (
    attention_rollout,
    capture_attention,
    mean_attention_distance,
)
from transformer_book.models.vit import (
    PatchEmbedding,
    ViT,
    ViTConfig,
    patchify,
)

# --------------------------------------------------------------------------
# Patches
# --------------------------------------------------------------------------


def test_patchify_order_on_a_hand_made_image():
    # A 4x6 image with 2 channels: channel c holds 100 * c + 10 * row + col.
    rows = torch.arange(4)[:, None] * 10
    cols = torch.arange(6)[None, :]
    image = torch.stack([rows + cols, 100 + rows + cols]).float()  # (2, 4, 6)
    patches = patchify(image[None], 2)
    assert patches.shape == (1, 6, 2 * 2 * 2)
    # Patch 4 is at grid row 4 // 3 = 1, column 4 % 3 = 1: pixels rows 2-3,
    # columns 2-3; values in (row, column, channel) order.
    expected = [22, 122, 23, 123, 32, 132, 33, 133]
    assert patches[0, 4].tolist() == expected
    # Row-major: patch i starts at pixel (2 * (i // 3), 2 * (i % 3)).
    firsts = patches[0, :, 0].tolist()
    assert firsts == [0, 2, 4, 20, 22, 24]


def test_patchify_rejects_indivisible_and_non_4d():
    with pytest.raises(ValueError, match="28 is not divisible by patch_size"):
        patchify(torch.zeros(1, 1, 28, 28), 5)
    with pytest.raises(ValueError, match="images must be 4-D"):
        patchify(torch.zeros(28, 28), 7)


def test_patch_embedding_equals_its_linear_form_in_float64():
    torch.manual_seed(0)
    embed = PatchEmbedding(12, 4, 3, 8).double()
    images = torch.randn(5, 3, 12, 12, dtype=torch.float64)
    linear = embed.as_linear()
    assert isinstance(linear, nn.Linear)
    assert linear.weight.shape == (8, 4 * 4 * 3)
    torch.testing.assert_close(
        linear(patchify(images, 4)), embed(images), rtol=1e-12, atol=1e-12
    )
    assert embed(images).shape == (5, embed.num_patches, 8)
    # A copy: training the linear map leaves the convolution alone.
    with torch.no_grad():
        linear.weight.zero_()
    assert embed.proj.weight.abs().sum() > 0


def test_patch_embedding_rejects_wrong_images():
    embed = PatchEmbedding(28, 7, 1, 16)
    with pytest.raises(ValueError, match=r"\(2, 3, 28, 28\).*in_channels=1"):
        embed(torch.zeros(2, 3, 28, 28))
    with pytest.raises(ValueError, match=r"\(2, 1, 32, 32\).*image_size=28"):
        embed(torch.zeros(2, 1, 32, 32))
    with pytest.raises(ValueError, match="4-D"):
        embed(torch.zeros(1, 28, 28))
    with pytest.raises(TypeError, match="floating"):
        embed(torch.zeros(2, 1, 28, 28, dtype=torch.uint8))
    with pytest.raises(ValueError, match="30 is not divisible by patch_s"):
        PatchEmbedding(30, 7, 1, 16)


# --------------------------------------------------------------------------
# Config and model
# --------------------------------------------------------------------------


def _tiny(**kwargs):
    base = dict(image_size=8, patch_size=2, d_model=16, num_heads=2,
                num_layers=2)
    return ViTConfig(**{**base, **kwargs})


def test_config_defaults_and_frozen():
    config = ViTConfig(28, 7)
    assert config.d_ff == 4 * config.d_model == 256
    assert (config.num_patches, config.num_tokens) == (16, 17)
    assert ViTConfig(28, 7, pool="mean").num_tokens == 16
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.d_model = 32  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(patch_size=3), ValueError, "8 is not divisible by patch_size=3"),
        (dict(num_heads=3), ValueError, "d_model=16 is not divisible"),
        (dict(pool="max"), ValueError, "pool='max'"),
        (dict(positional="rope"), ValueError, "positional='rope'"),
        (dict(d_model=18, num_heads=2, positional="sincos2d"), ValueError,
         "d_model=18 must be divisible by 4"),
        (dict(dropout=1.0), ValueError, "dropout"),
        (dict(num_layers=0), ValueError, "num_layers=0"),
        (dict(in_channels=1.0), TypeError, "in_channels"),
    ],
)
def test_config_rejects_bad_values(kwargs, error, match):
    with pytest.raises(error, match=match):
        _tiny(**kwargs)


@pytest.mark.parametrize("pool", ["cls", "mean"])
@pytest.mark.parametrize("positional", ["learned", "sincos2d"])
def test_vit_shapes_and_weights(pool, positional):
    torch.manual_seed(0)
    config = _tiny(pool=pool, positional=positional, num_classes=5)
    model = ViT(config).eval()
    images = torch.rand(3, 1, 8, 8)
    logits = model(images)
    assert logits.shape == (3, 5)
    with capture_attention(model) as weights:
        again = model(images)
    torch.testing.assert_close(again, logits, rtol=1e-5, atol=1e-5)
    tokens = 16 + (pool == "cls")
    assert len(weights) == config.num_layers
    assert all(w.shape == (3, 2, tokens, tokens) for w in weights)
    torch.testing.assert_close(
        weights[0].sum(-1), torch.ones(3, 2, tokens)
    )
    assert model.position_embedding.shape == (tokens, 16)
    assert (model.cls_token is None) == (pool == "mean")
    learned = isinstance(model.position_embedding, nn.Parameter)
    assert learned == (positional == "learned")


def test_vit_is_pre_ln_gelu_with_a_final_norm():
    model = ViT(_tiny())
    assert all(layer.norm_first for layer in model.encoder.layers)
    assert model.encoder.norm is not None
    assert model.encoder.layers[0].feed_forward.sublayer.activation == "gelu"
    assert model.head.pool == "cls"


def test_vit_images_are_independent_in_a_batch():
    # Attention runs over the patches of one image, never across images.
    torch.manual_seed(0)
    model = ViT(_tiny()).eval()
    images = torch.rand(4, 1, 8, 8)
    alone = model(images[:1])
    changed = images.clone()
    changed[1:] = torch.rand(3, 1, 8, 8)
    torch.testing.assert_close(model(changed)[:1], alone)


def test_vit_rejects_wrong_images():
    model = ViT(_tiny())
    with pytest.raises(ValueError, match=r"\(1, 2, 8, 8\).*in_channels=1"):
        model(torch.zeros(1, 2, 8, 8))
    with pytest.raises(ValueError, match=r"\(1, 1, 12, 12\).*image_size=8"):
        model(torch.zeros(1, 1, 12, 12))
    with pytest.raises(ValueError, match="4-D"):
        model(torch.zeros(1, 64))
    with pytest.raises(TypeError, match="ViTConfig"):
        ViT(dict(image_size=8, patch_size=2))  # type: ignore[arg-type]


def test_tiny_vit_overfits_a_small_batch():
    torch.manual_seed(0)
    model = ViT(_tiny(patch_size=4, num_layers=1, num_classes=4))
    images = torch.rand(8, 1, 8, 8)
    labels = torch.arange(8) % 4
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(40):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.05
    assert (model(images).argmax(-1) == labels).all()


def _vit_params(c: ViTConfig) -> int:
    """Closed form: patch conv, [CLS], positions, L layers, norm, head."""
    D, F_, P, C = c.d_model, c.d_ff, c.patch_size, c.in_channels
    N = c.num_patches
    attention = 4 * D * D + 4 * D
    feed_forward = 2 * D * F_ + F_ + D
    norms = 2 * 2 * D
    return (
        P * P * C * D + D  # patch embedding (a linear map of each patch)
        + D  # [CLS]
        + (N + 1) * D  # learned positions
        + c.num_layers * (attention + feed_forward + norms)
        + 2 * D  # final LayerNorm
        + D * c.num_classes + c.num_classes  # head
    )


def test_vit_base_parameter_count_on_meta():
    config = ViTConfig(
        224, 16, in_channels=3, num_classes=1000, d_model=768, num_heads=12,
        num_layers=12,
    )
    with torch.device("meta"):
        model = ViT(config)
    count = sum(p.numel() for p in model.parameters())
    assert count == _vit_params(config) == 86_567_656
    assert config.num_patches == 196 and config.d_ff == 3072


def test_models_package_exports_vit():
    assert models.ViT is ViT and models.ViTConfig is ViTConfig


# --------------------------------------------------------------------------
# Rollout and attention distance
# --------------------------------------------------------------------------


def _random_weights(layers, batch, heads, tokens, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [
        torch.rand(batch, heads, tokens, tokens, generator=g).softmax(-1)
        for _ in range(layers)
    ]


def test_rollout_shape_and_sums():
    cls = attention_rollout(_random_weights(3, 2, 4, 17))
    mean = attention_rollout(_random_weights(3, 2, 4, 16))
    assert cls.shape == mean.shape == (2, 16)
    for flow in (cls, mean):
        assert (flow >= 0).all()
        torch.testing.assert_close(flow.sum(-1), torch.ones(2))


def test_rollout_matches_the_definition():
    weights = _random_weights(2, 1, 3, 5, seed=1)
    eye = torch.eye(5)
    a1, a2 = (0.5 * (w.mean(1)[0] + eye) for w in weights)
    rollout = a2 @ a1
    expected = rollout[0, 1:] / rollout[0, 1:].sum()
    got = attention_rollout(weights, pool="cls")[0]
    torch.testing.assert_close(got, expected)
    weights = _random_weights(2, 1, 3, 4, seed=2)  # a 2 x 2 grid, no [CLS]
    raw = weights[1].mean(1)[0] @ weights[0].mean(1)[0]
    got = attention_rollout(weights, residual=False, pool="mean")[0]
    torch.testing.assert_close(got, raw.mean(0))


def test_rollout_follows_a_hard_attention_chain():
    # [CLS] attends only to patch 3: the rollout puts all weight there.
    w = torch.zeros(1, 1, 5, 5)
    w[0, 0, torch.arange(5), torch.arange(5)] = 1.0
    w[0, 0, 0] = torch.tensor([0.0, 0.0, 0.0, 1.0, 0.0])
    flow = attention_rollout([w], residual=False)
    assert flow[0].tolist() == [0.0, 0.0, 1.0, 0.0]


def test_rollout_of_a_trained_vit():
    model = ViT(_tiny()).eval()
    with capture_attention(model) as weights:
        model(torch.rand(2, 1, 8, 8))
    assert attention_rollout(weights).shape == (2, 16)


def test_rollout_rejects_bad_weights():
    with pytest.raises(ValueError, match=r"len\(weights\)=0"):
        attention_rollout([])
    with pytest.raises(ValueError, match="4-D"):
        attention_rollout([torch.rand(2, 5, 5)])
    with pytest.raises(ValueError, match="weights\\[1\\]"):
        attention_rollout([torch.rand(1, 1, 5, 5), torch.rand(1, 1, 6, 6)])
    with pytest.raises(ValueError, match="7 tokens"):
        attention_rollout([torch.rand(1, 1, 7, 7)])
    with pytest.raises(ValueError, match="pool='max'"):
        attention_rollout([torch.rand(1, 1, 5, 5)], pool="max")


def test_mean_attention_distance():
    # Each patch of a 2x2 grid attends only to itself: distance 0; only to
    # the diagonal opposite patch: sqrt(2) patches.
    eye = torch.eye(4)[None, None]  # (1, 1, 4, 4)
    opposite = eye.flip(-1)
    distance = mean_attention_distance([eye, opposite], patch_size=7)
    assert distance.shape == (2, 1)
    assert distance[0, 0] == 0.0
    torch.testing.assert_close(distance[1, 0], torch.tensor(7 * 2**0.5))
    model = ViT(_tiny()).eval()
    with capture_attention(model) as weights:
        model(torch.rand(2, 1, 8, 8))
    assert mean_attention_distance(weights).shape == (2, 2)


def test_the_two_vit_chapters_ask_for_the_same_trained_model():
    # training-vit.md trains recipes.trained("vit"), what-vit-sees.md reads
    # it back: only the same arguments make the same cache entry.
    from pathlib import Path

    from transformer_book import _book, recipes

    folder = Path(__file__).resolve().parents[1] / "book" / "vision"
    trains, reads = (_book.read_sizes(folder / f"{page}.sizes.py")
                     for page in ("training-vit", "what-vit-sees"))
    for preset in ("cpu", "gpu", "smoke"):
        for key in ("vit", "eval_every"):
            assert trains[preset][key] == reads[preset][key], (preset, key)
    for preset in ("cpu", "gpu", "smoke"):  # overrides: the recipe's sizes
        assert recipes.defaults("vit").keys() >= trains[preset]["vit"].keys()
