"""Layers and stacks: PyTorch's twins, masks, causality, errors, training."""

from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from transformer_book.analysis import capture_attention
from transformer_book.feedforward import FeedForward
from transformer_book.masks import causal_mask, padding_mask
from transformer_book.norm import LayerNorm
from transformer_book.positional import RotaryEmbedding
from transformer_book.transformer import (
    Decoder,
    DecoderLayer,
    Encoder,
    EncoderLayer,
    Residual,
    Transformer,
)

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
        with capture_attention(ours) as maps:
            out = ours(x, m["ours"], is_causal=m["causal"])
        assert maps[0].shape == (batch, cfg["num_heads"], length, length)
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
        with capture_attention(ours) as maps:
            out = ours(x, memory, m["ours"], mem, is_causal=m["causal"])
        self_w, cross_w = maps
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
        with capture_attention(ours) as maps:
            out = ours(x, m["ours"], is_causal=m["causal"])
        assert len(maps) == num_layers
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
        with capture_attention(ours) as maps:
            out = ours(x, memory, m["ours"], mem, is_causal=m["causal"])
        assert len(maps) == 2 * num_layers  # self, then cross, per layer
        assert maps[1].shape[-2:] == (tgt_len, src_len)
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
        ".sublayer.up_proj.weight",
        "decoder.layers.0.multihead_attn.out_proj.weight": "decoder.layers"
        ".0.cross_attn.sublayer.out_proj.weight",
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
    assert ours.feed_forward.sublayer.activation == "gelu"
    assert ours.self_attn.norm.eps == 1e-3
    assert ours.self_attn.norm.bias is None
    assert ours.self_attn.sublayer.bias is False
    ours64 = EncoderLayer.from_torch(theirs.to(F64))
    assert ours64.feed_forward.norm.weight.dtype == F64
    # An nn.GELU module counts as exact GELU; the tanh one has no twin.
    exact = nn.TransformerEncoderLayer(8, 2, 16, activation=nn.GELU())
    copy = EncoderLayer.from_torch(exact)
    assert copy.feed_forward.sublayer.activation == "gelu"
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


def test_captured_weights_are_distributions():
    layer = EncoderLayer(8, 2, 16, norm_first=True, dtype=F64)
    x = torch.randn(3, 5, 8, dtype=F64)
    pad = padding_mask([5, 3, 1], max_len=5)
    with capture_attention(layer) as maps:
        out = layer(x, pad)
    (weights,) = maps
    torch.testing.assert_close(out, layer(x, pad))
    assert weights.shape == (3, 2, 5, 5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 2, 5, dtype=F64))
    assert weights[1, :, :, 3:].abs().max() == 0  # padding gets no weight
    decoder = Decoder(2, 8, 2, 16, dtype=F64)
    tgt = torch.randn(3, 4, 8, dtype=F64)
    with capture_attention(decoder) as maps:
        decoder(tgt, x, None, pad, is_causal=True)
    assert len(maps) == 4
    self_w, cross_w = maps[2:]
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
    assert all(
        layer.self_attn.sublayer.rotary is rotary for layer in encoder.layers
    )
    layer = DecoderLayer(8, 2, 16, rotary=rotary)
    assert layer.self_attn.sublayer.rotary is rotary
    assert layer.cross_attn.sublayer.rotary is None
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
        (lambda: EncoderLayer(8, 2, 16, activation="silu"), ValueError,
         "activation"),
        (lambda: EncoderLayer(8, 2, 16, dropout=1.0), ValueError, "dropout"),
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
    with pytest.raises(ValueError, match=r"memory has shape \(2, 3, 6\)"):
        decoder(x, torch.randn(2, 3, 6))
    with pytest.raises(ValueError, match=r"memory has shape \(3, 3, 8\)"):
        decoder(x, torch.randn(3, 3, 8))
    with pytest.raises(ValueError, match=r"x has shape \(2, 5, 4\)"):
        EncoderLayer(8, 2, 16)(torch.randn(2, 5, 4))
    with pytest.raises(ValueError, match="x must be 3-D"):
        EncoderLayer(8, 2, 16)(torch.randn(5, 8))
    model = Transformer(8, 2, 1, 1, 16)
    with pytest.raises(ValueError, match=r"src has shape \(2, 3, 6\)"):
        model(torch.randn(2, 3, 6), x)
    with pytest.raises(ValueError, match=r"tgt has shape \(2, 3, 6\)"):
        model(x, torch.randn(2, 3, 6))
    with pytest.raises(ValueError, match=r"memory has shape \(1, 3, 8\)"):
        model(torch.randn(1, 3, 8), x)


@pytest.mark.parametrize(
    "cls, module",
    [
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


@pytest.mark.parametrize("pre_norm", [False, True])
def test_residual_is_the_pages_arrangement(pre_norm):
    torch.manual_seed(0)
    norm, ff = LayerNorm(8, dtype=F64), FeedForward(8, 16, dtype=F64)
    _randomize(norm, torch.Generator().manual_seed(1))
    x = torch.randn(2, 3, 8, dtype=F64)
    out = Residual(norm, ff, pre_norm)(x)
    expected = x + ff(norm(x)) if pre_norm else norm(x + ff(x))
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    layer = EncoderLayer(8, 2, 16, norm_first=pre_norm, dtype=F64)
    attn = layer.self_attn
    assert isinstance(attn, Residual) and attn.pre_norm == pre_norm
    with pytest.raises(TypeError, match="pre_norm must be a bool"):
        Residual(norm, ff, 1)


def test_layers_inside_a_stack_leave_the_checks_to_it():
    encoder = Encoder(2, 8, 2, 16)
    assert encoder.check_inputs
    inner = [m for m in encoder.modules() if hasattr(m, "check_inputs")]
    assert len(inner) == 1 + 2 * 5  # the stack; per layer 1 + 2 + 2
    assert not any(m.check_inputs for m in inner[1:])
    layer = EncoderLayer(8, 2, 16)
    assert layer.check_inputs and not layer.self_attn.sublayer.check_inputs
    # The stack's own check still names the bad input.
    with pytest.raises(ValueError, match=r"x has shape \(2, 5, 4\)"):
        encoder(torch.randn(2, 5, 4))
