"""Layers: equal to PyTorch's twins, masks, causality, errors, training."""

from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from transformer_book.layers import (
    Decoder,
    DecoderLayer,
    Encoder,
    EncoderLayer,
    FeedForward,
    LayerNorm,
    RMSNorm,
    Transformer,
    explicit_norm,
)
from transformer_book.masks import causal_mask, padding_mask
from transformer_book.positional import RotaryEmbedding

F64 = torch.float64
TOL = {"rtol": 1e-10, "atol": 1e-10}
MASK_KINDS = ("none", "padding", "causal", "causal+padding")

# The largest float64 difference seen by each twin check (reported).
LARGEST: dict[str, float] = {}


def _assert_twin(check: str, ours: torch.Tensor, theirs: torch.Tensor):
    diff = (ours - theirs).abs().max().item() if ours.numel() else 0.0
    LARGEST[check] = max(LARGEST.get(check, 0.0), diff)
    torch.testing.assert_close(ours, theirs, **TOL)


def _config(rng: random.Random) -> dict:
    num_heads = rng.choice([1, 2, 4])
    return dict(
        d_model=num_heads * rng.choice([2, 4, 6]),
        num_heads=num_heads,
        d_ff=rng.choice([4, 8, 12]),
        activation=rng.choice(["relu", "gelu"]),
        norm_first=rng.random() < 0.5,
        bias=rng.random() < 0.7,
        eps=rng.choice([1e-5, 1e-3]),
    )


def _torch_kwargs(cfg: dict, batch_first: bool) -> dict:
    """Our configuration in nn.Transformer*'s argument names."""
    return dict(
        dim_feedforward=cfg["d_ff"],
        dropout=0.0,  # train mode with no dropout: no inference fast path
        activation=cfg["activation"],
        layer_norm_eps=cfg["eps"],
        batch_first=batch_first,
        norm_first=cfg["norm_first"],
        bias=cfg["bias"],
        dtype=F64,
    )


def _randomize(module: nn.Module, gen: torch.Generator) -> None:
    """PyTorch zeroes biases and sets norms to 1: make every weight count."""
    with torch.no_grad():
        for p in module.parameters():
            p.normal_(generator=gen).mul_(0.5)


def _seq_first(batch_first: bool):
    return (lambda x: x) if batch_first else (lambda x: x.transpose(0, 1))


def _self_masks(kind: str, lengths: torch.Tensor, length: int) -> dict:
    """Our (mask, is_causal) and PyTorch's (mask, key_padding_mask)."""
    pad = padding_mask(lengths, max_len=length)  # (B, 1, 1, T)
    causal = "causal" in kind
    ours = pad if "padding" in kind else None
    # nn.Transformer* read a boolean True as "blocked": pass ~mask.
    theirs = ~causal_mask(length) if causal else None
    theirs_pad = ~pad[:, 0, 0] if "padding" in kind else None
    return dict(
        ours=ours, causal=causal, theirs=theirs, theirs_pad=theirs_pad
    )


def _memory_masks(kind: str, src_lengths, tgt_len, src_len, gen):
    """Cross-attention masks: ours (B, H, T, S)-broadcastable, PyTorch's."""
    if kind == "none":
        return None, None, None
    if kind == "padding":
        pad = padding_mask(src_lengths, max_len=src_len)  # (B, 1, 1, S)
        return pad, None, ~pad[:, 0, 0]
    allowed = torch.rand(tgt_len, src_len, generator=gen) < 0.6
    allowed[:, 0] = True  # keep a key per row: PyTorch gives NaN else
    return allowed, ~allowed, None


# --------------------------------------------------------------------------
# Norms and feed-forward
# --------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_layer_norm_matches_torch(seed):
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    d_model = rng.randint(1, 9)
    theirs = nn.LayerNorm(
        d_model, eps=rng.choice([1e-5, 0.1]), bias=seed % 2 == 0, dtype=F64
    )
    _randomize(theirs, gen)
    ours = LayerNorm.from_torch(theirs)
    assert ours.eps == theirs.eps
    assert (ours.bias is None) == (theirs.bias is None)
    x = torch.randn(2, 3, d_model, dtype=F64, generator=gen) * 3 + 1
    with explicit_norm():  # the written-out formula, not the fused kernel
        _assert_twin("LayerNorm", ours(x), theirs(x))


@pytest.mark.parametrize("seed", range(4))
def test_layer_norm_fused_and_explicit_paths_agree(seed):
    """The fused kernel and the written-out formula: values and gradients."""
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    d_model = rng.randint(1, 40)
    shape = [rng.randint(1, 4) for _ in range(rng.randint(0, 3))]
    norm = LayerNorm(d_model, eps=rng.choice([1e-5, 0.1]),
                     bias=seed % 2 == 0, dtype=F64)
    _randomize(norm, gen)
    x = torch.randn(*shape, d_model, dtype=F64, generator=gen) * 3 + 1
    outs, grads = [], []
    for explicit in (False, True):
        x_ = x.clone().requires_grad_()
        norm.zero_grad()
        with explicit_norm(explicit):
            out = norm(x_)
        out.pow(3).sum().backward()
        outs.append(out)
        grads.append([x_.grad] + [p.grad for p in norm.parameters()])
    torch.testing.assert_close(outs[0], outs[1])
    for fused, written in zip(*grads, strict=True):
        torch.testing.assert_close(fused, written)


def test_explicit_norm_nests_and_restores():
    norm = LayerNorm(4, dtype=F64)
    x = torch.randn(3, 4, dtype=F64, requires_grad=True)
    assert "NativeLayerNorm" in type(norm(x).grad_fn).__name__
    with explicit_norm():
        assert "NativeLayerNorm" not in type(norm(x).grad_fn).__name__
        with explicit_norm(False):
            assert "NativeLayerNorm" in type(norm(x).grad_fn).__name__
        assert "NativeLayerNorm" not in type(norm(x).grad_fn).__name__
    assert "NativeLayerNorm" in type(norm(x).grad_fn).__name__
    with pytest.raises(TypeError, match="enabled"):
        with explicit_norm("yes"):
            pass


def test_layer_norm_worked_example():
    norm = LayerNorm(3, eps=1e-12, dtype=F64)
    out = norm(torch.tensor([2.0, 0.5, 1.5], dtype=F64))
    expected = torch.tensor([1.0690, -1.3363, 0.2673], dtype=F64)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-4)


@pytest.mark.parametrize("eps", [None, 1e-6, 0.5])
@pytest.mark.parametrize("dtype", [F64, torch.float32])
def test_rms_norm_matches_torch_and_keeps_eps(eps, dtype):
    gen = torch.Generator().manual_seed(1)
    theirs = nn.RMSNorm(5, eps=eps, dtype=dtype)
    _randomize(theirs, gen)
    ours = RMSNorm.from_torch(theirs)
    assert ours.eps == eps  # None stays None: the input dtype's epsilon
    # Small inputs make eps matter, so a wrong eps would show.
    x = torch.randn(3, 4, 5, dtype=dtype, generator=gen) * 1e-4
    if dtype == F64:
        _assert_twin("RMSNorm", ours(x), theirs(x))
    else:
        torch.testing.assert_close(ours(x), theirs(x))


def test_rms_norm_default_eps_is_input_dtypes_epsilon():
    norm = RMSNorm(2, eps=None, dtype=F64)
    x = torch.tensor([[1e-9, -1e-9]], dtype=F64)
    eps = torch.finfo(F64).eps
    expected = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    torch.testing.assert_close(norm(x), expected)


@pytest.mark.parametrize("activation", ["relu", "gelu", "swiglu"])
def test_feed_forward_is_position_wise(activation):
    ff = FeedForward(8, 16, activation=activation, dtype=F64)
    x = torch.randn(2, 7, 8, dtype=F64)
    perm = torch.randperm(7)
    torch.testing.assert_close(ff(x[:, perm]), ff(x)[:, perm])


def test_feed_forward_activations():
    x = torch.randn(3, 4, dtype=F64)
    relu = FeedForward(4, 6, activation="relu", dtype=F64)
    gelu = FeedForward(4, 6, activation="gelu", dtype=F64)
    gelu.load_state_dict(relu.state_dict())
    hidden = relu.up_proj(x)
    exact = 0.5 * hidden * (1 + torch.erf(hidden / 2**0.5))  # no tanh
    torch.testing.assert_close(gelu(x), gelu.down_proj(exact))
    torch.testing.assert_close(relu(x), relu.down_proj(hidden.clamp_min(0)))
    swiglu = FeedForward(4, 6, activation="swiglu", bias=False, dtype=F64)
    assert swiglu.gate_proj.out_features == swiglu.up_proj.out_features == 6
    assert sum(p.numel() for p in swiglu.parameters()) == 3 * 4 * 6
    gated = F.silu(swiglu.gate_proj(x)) * swiglu.up_proj(x)
    torch.testing.assert_close(swiglu(x), swiglu.down_proj(gated))


# --------------------------------------------------------------------------
# Layers and stacks against nn.Transformer*
# --------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(8))
def test_encoder_layer_matches_torch(seed):
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    cfg = _config(rng)
    batch_first = rng.random() < 0.5
    theirs = nn.TransformerEncoderLayer(
        cfg["d_model"], cfg["num_heads"], **_torch_kwargs(cfg, batch_first)
    )
    _randomize(theirs, gen)
    ours = EncoderLayer.from_torch(theirs)
    assert ours.norm_first == cfg["norm_first"]
    batch, length = rng.randint(1, 3), rng.randint(1, 6)
    x = torch.randn(batch, length, cfg["d_model"], dtype=F64, generator=gen)
    lengths = torch.randint(1, length + 1, (batch,), generator=gen)
    sf = _seq_first(batch_first)
    for kind in MASK_KINDS:
        m = _self_masks(kind, lengths, length)
        expected = sf(
            theirs(
                sf(x),
                src_mask=m["theirs"],
                src_key_padding_mask=m["theirs_pad"],
                is_causal=m["causal"],
            )
        )
        out, weights = ours(
            x, m["ours"], is_causal=m["causal"], need_weights=True
        )
        assert weights.shape == (batch, cfg["num_heads"], length, length)
        _assert_twin("EncoderLayer", out, expected)
        fused = ours(x, m["ours"], is_causal=m["causal"])
        _assert_twin("EncoderLayer", fused, expected)


@pytest.mark.parametrize("seed", range(8))
def test_decoder_layer_matches_torch(seed):
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(100 + seed)
    cfg = _config(rng)
    batch_first = rng.random() < 0.5
    theirs = nn.TransformerDecoderLayer(
        cfg["d_model"], cfg["num_heads"], **_torch_kwargs(cfg, batch_first)
    )
    _randomize(theirs, gen)
    ours = DecoderLayer.from_torch(theirs)
    batch = rng.randint(1, 3)
    tgt_len, src_len = rng.randint(1, 6), rng.randint(1, 7)
    d = cfg["d_model"]
    x = torch.randn(batch, tgt_len, d, dtype=F64, generator=gen)
    memory = torch.randn(batch, src_len, d, dtype=F64, generator=gen)
    tgt_lengths = torch.randint(1, tgt_len + 1, (batch,), generator=gen)
    src_lengths = torch.randint(1, src_len + 1, (batch,), generator=gen)
    sf = _seq_first(batch_first)
    for i, kind in enumerate(MASK_KINDS):
        m = _self_masks(kind, tgt_lengths, tgt_len)
        memory_kind = ("none", "padding", "bool")[(i + seed) % 3]
        mem, mem_theirs, mem_pad = _memory_masks(
            memory_kind, src_lengths, tgt_len, src_len, gen
        )
        expected = sf(
            theirs(
                sf(x),
                sf(memory),
                tgt_mask=m["theirs"],
                memory_mask=mem_theirs,
                tgt_key_padding_mask=m["theirs_pad"],
                memory_key_padding_mask=mem_pad,
                tgt_is_causal=m["causal"],
            )
        )
        out, (self_w, cross_w) = ours(
            x, memory, m["ours"], mem, is_causal=m["causal"],
            need_weights=True,
        )
        h = cfg["num_heads"]
        assert self_w.shape == (batch, h, tgt_len, tgt_len)
        assert cross_w.shape == (batch, h, tgt_len, src_len)
        _assert_twin("DecoderLayer", out, expected)
        fused = ours(x, memory, m["ours"], mem, is_causal=m["causal"])
        _assert_twin("DecoderLayer", fused, expected)


@pytest.mark.parametrize("seed", range(6))
def test_encoder_matches_torch_with_and_without_norm(seed):
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(200 + seed)
    cfg = _config(rng)
    batch_first = rng.random() < 0.5
    layer = nn.TransformerEncoderLayer(
        cfg["d_model"], cfg["num_heads"], **_torch_kwargs(cfg, batch_first)
    )
    with_norm = seed % 2 == 0
    norm = nn.LayerNorm(cfg["d_model"], dtype=F64) if with_norm else None
    num_layers = rng.randint(1, 3)
    theirs = nn.TransformerEncoder(
        layer, num_layers, norm=norm, enable_nested_tensor=False
    )
    _randomize(theirs, gen)
    ours = Encoder.from_torch(theirs)
    assert len(ours.layers) == num_layers
    assert (ours.norm is None) == (not with_norm)
    batch, length = rng.randint(1, 3), rng.randint(1, 6)
    x = torch.randn(batch, length, cfg["d_model"], dtype=F64, generator=gen)
    lengths = torch.randint(1, length + 1, (batch,), generator=gen)
    sf = _seq_first(batch_first)
    for kind in MASK_KINDS:
        m = _self_masks(kind, lengths, length)
        expected = sf(
            theirs(
                sf(x),
                mask=m["theirs"],
                src_key_padding_mask=m["theirs_pad"],
                is_causal=m["causal"],
            )
        )
        out, weights = ours(
            x, m["ours"], is_causal=m["causal"], need_weights=True
        )
        assert len(weights) == num_layers
        _assert_twin("Encoder", out, expected)


@pytest.mark.parametrize("seed", range(6))
def test_decoder_matches_torch(seed):
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(300 + seed)
    cfg = _config(rng)
    batch_first = rng.random() < 0.5
    layer = nn.TransformerDecoderLayer(
        cfg["d_model"], cfg["num_heads"], **_torch_kwargs(cfg, batch_first)
    )
    norm = nn.LayerNorm(cfg["d_model"], dtype=F64) if seed % 2 else None
    num_layers = rng.randint(1, 3)
    theirs = nn.TransformerDecoder(layer, num_layers, norm=norm)
    _randomize(theirs, gen)
    ours = Decoder.from_torch(theirs)
    batch = rng.randint(1, 3)
    tgt_len, src_len = rng.randint(1, 6), rng.randint(1, 7)
    d = cfg["d_model"]
    x = torch.randn(batch, tgt_len, d, dtype=F64, generator=gen)
    memory = torch.randn(batch, src_len, d, dtype=F64, generator=gen)
    tgt_lengths = torch.randint(1, tgt_len + 1, (batch,), generator=gen)
    src_lengths = torch.randint(1, src_len + 1, (batch,), generator=gen)
    sf = _seq_first(batch_first)
    for kind in MASK_KINDS:
        m = _self_masks(kind, tgt_lengths, tgt_len)
        mem, _, mem_pad = _memory_masks(
            "padding", src_lengths, tgt_len, src_len, gen
        )
        expected = sf(
            theirs(
                sf(x),
                sf(memory),
                tgt_mask=m["theirs"],
                tgt_key_padding_mask=m["theirs_pad"],
                memory_key_padding_mask=mem_pad,
                tgt_is_causal=m["causal"],
            )
        )
        out, weights = ours(
            x, memory, m["ours"], mem, is_causal=m["causal"],
            need_weights=True,
        )
        assert len(weights) == num_layers
        assert weights[0][1].shape[-2:] == (tgt_len, src_len)
        _assert_twin("Decoder", out, expected)


# nn.Transformer warns that it cannot use nested tensors; not our concern.
@pytest.mark.filterwarnings("ignore:enable_nested_tensor")
@pytest.mark.parametrize("seed", range(6))
def test_transformer_matches_torch(seed):
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(400 + seed)
    cfg = _config(rng)
    batch_first = rng.random() < 0.5
    theirs = nn.Transformer(
        cfg["d_model"],
        cfg["num_heads"],
        num_encoder_layers=rng.randint(1, 2),
        num_decoder_layers=rng.randint(1, 2),
        **_torch_kwargs(cfg, batch_first),
    )
    _randomize(theirs, gen)
    ours = Transformer.from_torch(theirs)
    assert ours.encoder.norm is not None and ours.decoder.norm is not None
    batch = rng.randint(1, 3)
    src_len, tgt_len = rng.randint(1, 7), rng.randint(1, 6)
    d = cfg["d_model"]
    src = torch.randn(batch, src_len, d, dtype=F64, generator=gen)
    tgt = torch.randn(batch, tgt_len, d, dtype=F64, generator=gen)
    src_lengths = torch.randint(1, src_len + 1, (batch,), generator=gen)
    tgt_lengths = torch.randint(1, tgt_len + 1, (batch,), generator=gen)
    src_pad = padding_mask(src_lengths, max_len=src_len)  # (B, 1, 1, S)
    sf = _seq_first(batch_first)
    for kind in MASK_KINDS:
        m = _self_masks(kind, tgt_lengths, tgt_len)
        # Source padding hidden from the encoder and (as memory_mask) from
        # the decoder; PyTorch takes it as two key-padding masks.
        expected = sf(
            theirs(
                sf(src),
                sf(tgt),
                tgt_mask=m["theirs"],
                src_key_padding_mask=~src_pad[:, 0, 0],
                tgt_key_padding_mask=m["theirs_pad"],
                memory_key_padding_mask=~src_pad[:, 0, 0],
                tgt_is_causal=m["causal"],
            )
        )
        out = ours(
            src, tgt, src_pad, m["ours"], src_pad, tgt_is_causal=m["causal"]
        )
        _assert_twin("Transformer", out, expected)
    # memory_mask=None: the decoder reads every source position.
    expected = sf(theirs(sf(src), sf(tgt)))
    _assert_twin("Transformer", ours(src, tgt), expected)


def test_transformer_gradients_match_torch():
    gen = torch.Generator().manual_seed(7)
    theirs = nn.Transformer(
        8, 2, 1, 1, 16, dropout=0.0, batch_first=True, dtype=F64
    )
    _randomize(theirs, gen)
    ours = Transformer.from_torch(theirs)
    src = torch.randn(2, 5, 8, dtype=F64, generator=gen)
    tgt = torch.randn(2, 4, 8, dtype=F64, generator=gen)
    ours(src, tgt, tgt_is_causal=True).square().sum().backward()
    theirs(
        src, tgt, tgt_mask=~causal_mask(4), tgt_is_causal=True
    ).square().sum().backward()
    grads = {
        "encoder.layers.0.linear1.weight": "encoder.layers.0.feed_forward"
        ".up_proj.weight",
        "decoder.layers.0.multihead_attn.out_proj.weight": "decoder.layers"
        ".0.cross_attn.out_proj.weight",
        "decoder.norm.weight": "decoder.norm.weight",
    }
    ours_params = dict(ours.named_parameters())
    for theirs_name, ours_name in grads.items():
        theirs_grad = theirs.get_parameter(theirs_name).grad
        _assert_twin("Transformer grad", ours_params[ours_name].grad,
                     theirs_grad)


def test_from_torch_keeps_mode_dtype_and_flags():
    theirs = nn.TransformerEncoderLayer(
        8, 2, 16, activation="gelu", norm_first=True, bias=False,
        layer_norm_eps=1e-3,
    ).eval()
    ours = EncoderLayer.from_torch(theirs)
    assert not ours.training
    assert ours.feed_forward.activation == "gelu"
    assert ours.norm1.eps == 1e-3 and ours.norm1.bias is None
    assert ours.self_attn.bias is False
    ours64 = EncoderLayer.from_torch(theirs.to(F64))
    assert ours64.norm2.weight.dtype == F64
    # An nn.GELU module counts as exact GELU; the tanh one has no twin.
    exact = nn.TransformerEncoderLayer(8, 2, 16, activation=nn.GELU())
    assert EncoderLayer.from_torch(exact).feed_forward.activation == "gelu"
    tanh = nn.TransformerEncoderLayer(
        8, 2, 16, activation=nn.GELU(approximate="tanh")
    )
    with pytest.raises(ValueError, match="activation"):
        EncoderLayer.from_torch(tanh)


# --------------------------------------------------------------------------
# Behaviour
# --------------------------------------------------------------------------


def test_final_norm_rule():
    args = (2, 8, 2, 16)
    assert Encoder(*args).norm is None
    assert isinstance(Encoder(*args, norm_first=True).norm, LayerNorm)
    assert isinstance(Decoder(*args, norm_first=True).norm, LayerNorm)
    assert Decoder(*args, norm_first=True, final_norm=False).norm is None
    assert isinstance(Encoder(*args, final_norm=True).norm, LayerNorm)
    model = Transformer(8, 2, 1, 1, 16)  # post-LN, yet final norms
    assert isinstance(model.encoder.norm, LayerNorm)
    assert isinstance(model.decoder.norm, LayerNorm)


def test_pre_ln_stack_needs_the_final_norm():
    torch.manual_seed(0)
    x = torch.randn(4, 10, 32, dtype=F64)

    def output_scale(encoder, inputs):
        return encoder(inputs).std(-1).mean().item()

    shallow = Encoder(1, 32, 4, 64, norm_first=True, final_norm=False,
                      dtype=F64)
    deep = Encoder(16, 32, 4, 64, norm_first=True, final_norm=False,
                   dtype=F64)
    normed = Encoder(16, 32, 4, 64, norm_first=True, dtype=F64)
    normed.layers.load_state_dict(deep.layers.state_dict())
    # Without it the residual stream comes out as it is: every layer adds
    # to it, so its scale grows with depth, and the input's scale passes
    # straight through.
    assert output_scale(deep, x) > 1.4 * output_scale(shallow, x)
    assert output_scale(deep, 10 * x) > 5
    # With it every token is normalised, whatever the depth or input.
    for inputs in (x, 10 * x):
        torch.testing.assert_close(
            normed(inputs).std(-1, correction=0),
            torch.ones(4, 10, dtype=F64), rtol=0, atol=1e-3,
        )
    assert (deep(x) - normed(x)).abs().max() > 0.5


def test_need_weights_returns_distributions():
    layer = EncoderLayer(8, 2, 16, norm_first=True, dtype=F64)
    x = torch.randn(3, 5, 8, dtype=F64)
    pad = padding_mask([5, 3, 1], max_len=5)
    out, weights = layer(x, pad, need_weights=True)
    torch.testing.assert_close(out, layer(x, pad))
    assert weights.shape == (3, 2, 5, 5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 2, 5, dtype=F64))
    assert weights[1, :, :, 3:].abs().max() == 0  # padding gets no weight
    decoder = Decoder(2, 8, 2, 16, dtype=F64)
    tgt = torch.randn(3, 4, 8, dtype=F64)
    out, weights = decoder(tgt, x, None, pad, is_causal=True,
                           need_weights=True)
    assert len(weights) == 2
    self_w, cross_w = weights[1]
    assert self_w.shape == (3, 2, 4, 4) and cross_w.shape == (3, 2, 4, 5)
    assert self_w.triu(1).abs().max() == 0  # no weight on the future
    assert cross_w[2, :, :, 1:].abs().max() == 0


def test_encoder_layer_is_causal():
    layer = EncoderLayer(8, 2, 16, norm_first=True, dtype=F64)  # GPT block
    x = torch.randn(2, 6, 8, dtype=F64)
    changed = x.clone()
    changed[:, 4:] = torch.randn(2, 2, 8, dtype=F64)
    before, after = layer(x, is_causal=True), layer(changed, is_causal=True)
    torch.testing.assert_close(before[:, :4], after[:, :4])
    assert (before[:, 4:] - after[:, 4:]).abs().max() > 1e-3
    # Without the flag the change reaches every position.
    assert (layer(x)[:, :4] - layer(changed)[:, :4]).abs().max() > 1e-3


def test_transformer_decoder_is_causal_over_the_target():
    model = Transformer(8, 2, 2, 2, 16, dtype=F64)
    src = torch.randn(2, 5, 8, dtype=F64)
    tgt = torch.randn(2, 6, 8, dtype=F64)
    changed = tgt.clone()
    changed[:, 3] += 1.0
    before = model(src, tgt, tgt_is_causal=True)
    after = model(src, changed, tgt_is_causal=True)
    torch.testing.assert_close(before[:, :3], after[:, :3])
    assert (before[:, 3:] - after[:, 3:]).abs().max() > 1e-3


def test_memory_mask_none_reads_every_source_position():
    model = Transformer(8, 2, 1, 1, 16, dtype=F64)
    src = torch.randn(1, 5, 8, dtype=F64)
    tgt = torch.randn(1, 3, 8, dtype=F64)
    pad = padding_mask([3], max_len=5)  # positions 3 and 4 are padding
    changed = src.clone()
    changed[:, 3:] = torch.randn(1, 2, 8, dtype=F64)
    # Hiding padding from the encoder alone is not enough: the decoder
    # still reads the padded positions of memory.
    leak = model(src, tgt, pad) - model(changed, tgt, pad)
    assert leak.abs().max() > 1e-3
    # Passed as memory_mask too, the padding no longer matters.
    torch.testing.assert_close(
        model(src, tgt, pad, None, pad), model(changed, tgt, pad, None, pad)
    )


def test_rotary_goes_to_self_attention_only():
    rotary = RotaryEmbedding(4)
    encoder = Encoder(2, 8, 2, 16, rotary=rotary)
    assert all(layer.self_attn.rotary is rotary for layer in encoder.layers)
    layer = DecoderLayer(8, 2, 16, rotary=rotary)
    assert layer.self_attn.rotary is rotary and layer.cross_attn.rotary is None
    # Rotary positions break permutation equivariance of the layer.
    enc_layer = EncoderLayer(8, 2, 16, rotary=rotary, dtype=F64)
    x = torch.randn(1, 5, 8, dtype=F64)
    perm = torch.tensor([4, 3, 2, 1, 0])
    assert (enc_layer(x[:, perm]) - enc_layer(x)[:, perm]).abs().max() > 1e-6
    with pytest.raises(ValueError, match="head_dim"):
        EncoderLayer(8, 2, 16, rotary=RotaryEmbedding(8))


def test_dropout_only_in_training():
    layer = EncoderLayer(8, 2, 16, dropout=0.5)
    x = torch.randn(2, 5, 8)
    assert not torch.equal(layer(x), layer(x))
    layer.eval()
    torch.testing.assert_close(layer(x), layer(x))


def test_tiny_encoder_overfits_one_batch():
    torch.manual_seed(0)
    encoder = Encoder(2, 16, 2, 32, norm_first=True)
    head = nn.Linear(16, 5)
    x = torch.randn(4, 6, 16)
    labels = torch.randint(0, 5, (4, 6))
    params = [*encoder.parameters(), *head.parameters()]
    optimizer = torch.optim.Adam(params, lr=1e-2)
    for _ in range(150):
        optimizer.zero_grad()
        loss = F.cross_entropy(head(encoder(x)).flatten(0, 1), labels.view(-1))
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.05
    assert (head(encoder(x)).argmax(-1) == labels).all()


# --------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "build, exc, match",
    [
        (lambda: EncoderLayer(10, 3, 16), ValueError, "num_heads=3"),
        (lambda: DecoderLayer(10, 4, 16), ValueError, "d_model=10"),
        (lambda: Transformer(10, 4, 1, 1, 8), ValueError, "divisible"),
        (lambda: FeedForward(8, 16, activation="tanh"), ValueError,
         "activation='tanh'"),
        (lambda: EncoderLayer(8, 2, 16, activation="silu"), ValueError,
         "activation"),
        (lambda: FeedForward(8, 0), ValueError, "d_ff=0"),
        (lambda: EncoderLayer(8, 2, 16, dropout=1.0), ValueError, "dropout"),
        (lambda: LayerNorm(8, eps=0.0), ValueError, "eps"),
        (lambda: RMSNorm(8, eps=-1.0), ValueError, "eps"),
        (lambda: Encoder(0, 8, 2, 16), ValueError, "num_layers=0"),
        (lambda: Encoder(1, 8, 2, 16, final_norm=1), TypeError,
         "final_norm"),
        (lambda: EncoderLayer(8, 2, 16, norm_first="yes"), TypeError,
         "norm_first"),
    ],
)
def test_bad_arguments(build, exc, match):
    with pytest.raises(exc, match=match):
        build()


def test_masks_that_do_not_broadcast_are_named():
    layer = EncoderLayer(8, 2, 16)
    x = torch.randn(2, 5, 8)
    with pytest.raises(ValueError, match="attn_mask of shape"):
        layer(x, torch.ones(4, 4, dtype=torch.bool))
    decoder = DecoderLayer(8, 2, 16)
    memory = torch.randn(2, 3, 8)
    with pytest.raises(ValueError, match="tgt_mask of shape"):
        decoder(x, memory, torch.ones(5, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="memory_mask of shape"):
        decoder(x, memory, None, torch.ones(5, 5, dtype=torch.bool))
    model = Transformer(8, 2, 1, 1, 16)
    with pytest.raises(ValueError, match="src_mask of shape"):
        model(memory, x, padding_mask([2, 2, 2], max_len=3))
    with pytest.raises(TypeError, match="attn_mask"):
        layer(x, torch.ones(5, 5, dtype=torch.long))


def test_bad_sequences_are_named():
    decoder = DecoderLayer(8, 2, 16)
    x = torch.randn(2, 5, 8)
    with pytest.raises(ValueError, match="memory has feature size 6"):
        decoder(x, torch.randn(2, 3, 6))
    with pytest.raises(ValueError, match="memory has batch size 3"):
        decoder(x, torch.randn(3, 3, 8))
    with pytest.raises(ValueError, match="x has feature size 4"):
        EncoderLayer(8, 2, 16)(torch.randn(2, 5, 4))
    with pytest.raises(ValueError, match="x must be 3-D"):
        EncoderLayer(8, 2, 16)(torch.randn(5, 8))
    with pytest.raises(TypeError, match="x must be a floating"):
        LayerNorm(8)(torch.ones(2, 8, dtype=torch.long))
    with pytest.raises(ValueError, match="d_model=8"):
        RMSNorm(8)(torch.randn(2, 7))
    model = Transformer(8, 2, 1, 1, 16)
    with pytest.raises(ValueError, match="src has feature size 6"):
        model(torch.randn(2, 3, 6), x)
    with pytest.raises(ValueError, match="tgt has feature size 6"):
        model(x, torch.randn(2, 3, 6))
    with pytest.raises(ValueError, match="memory has batch size 1"):
        model(torch.randn(1, 3, 8), x)


@pytest.mark.parametrize(
    "cls, module",
    [
        (LayerNorm, nn.RMSNorm(4)),
        (RMSNorm, nn.LayerNorm(4)),
        (EncoderLayer, nn.TransformerDecoderLayer(4, 2)),
        (DecoderLayer, nn.TransformerEncoderLayer(4, 2)),
        (Encoder, nn.Linear(4, 4)),
        (Decoder, nn.Linear(4, 4)),
        (Transformer, nn.Linear(4, 4)),
    ],
)
def test_from_torch_rejects_other_modules(cls, module):
    with pytest.raises(TypeError, match="module must be a torch.nn"):
        cls.from_torch(module)


def test_from_torch_rejects_unsupported_norms():
    with pytest.raises(ValueError, match="elementwise_affine"):
        LayerNorm.from_torch(nn.LayerNorm(4, elementwise_affine=False))
    with pytest.raises(ValueError, match="one dimension"):
        RMSNorm.from_torch(nn.RMSNorm((2, 4)))
