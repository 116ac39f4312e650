"""The three model families: configs, parameter counts, masks, training."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from transformer_book.models import (
    GPT,
    EncoderConfig,
    GPTConfig,
    Seq2SeqTransformer,
    Seq2SeqTransformerConfig,
    TransformerEncoderModel,
    ViT,
    ViTConfig,
)
from transformer_book.training import count_parameters


@pytest.fixture(autouse=True)
def _one_thread():
    """One thread: the models are tiny, and threads on shared cores wait."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _gpt(**kwargs) -> GPT:
    fields = {
        "vocab_size": 40,
        "max_seq_len": 12,
        "d_model": 16,
        "num_heads": 4,
        "num_layers": 2,
        **kwargs,
    }
    return GPT(GPTConfig(**fields)).double()


def _seq2seq(**kwargs) -> Seq2SeqTransformer:
    fields = {
        "src_vocab_size": 30,
        "tgt_vocab_size": 25,
        "max_seq_len": 12,
        "d_model": 16,
        "num_heads": 2,
        "num_encoder_layers": 2,
        "num_decoder_layers": 2,
        **kwargs,
    }
    return Seq2SeqTransformer(Seq2SeqTransformerConfig(**fields)).double()


def _encoder(**kwargs) -> TransformerEncoderModel:
    fields = {
        "vocab_size": 30,
        "max_seq_len": 12,
        "d_model": 16,
        "num_heads": 2,
        "num_layers": 2,
        "num_classes": 3,
        **kwargs,
    }
    return TransformerEncoderModel(EncoderConfig(**fields)).double()


# --------------------------------------------------------------------------
# Parameter counts: closed forms
# --------------------------------------------------------------------------


def _layer_count(D: int, d_ff: int, bias: bool, cross: bool = False) -> int:
    """One encoder (or, with ``cross``, decoder) layer."""
    attentions = 2 if cross else 1
    norms = 3 if cross else 2
    b = int(bias)
    attention = 4 * D * D + 4 * D * b
    feed_forward = 2 * D * d_ff + (d_ff + D) * b
    return attentions * attention + feed_forward + norms * D * (1 + b)


def _gpt_formula(c: GPTConfig) -> int:
    D, V = c.d_model, c.vocab_size
    b = int(c.bias)
    count = V * D + c.num_layers * _layer_count(D, c.d_ff, c.bias)
    count += D * (1 + b)  # final LayerNorm
    if c.positional == "learned":
        count += c.max_seq_len * D
    if not c.tie_weights:
        count += V * D
    return count


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"bias": False},
        {"positional": "rope"},
        {"tie_weights": False, "d_ff": 24},
    ],
)
def test_gpt_parameter_count_matches_formula(kwargs):
    model = _gpt(**kwargs)
    assert count_parameters(model) == _gpt_formula(model.config)
    if model.config.tie_weights:
        assert model.lm_head.weight is model.token_embedding.weight


def test_gpt_layer_is_12d2_plus_13d():
    """With d_ff = 4D and biases, one block has 12 D^2 + 13 D parameters."""
    for D in (8, 64, 768):
        assert _layer_count(D, 4 * D, True) == 12 * D * D + 13 * D


@pytest.mark.parametrize(
    ("size", "published"),
    [("small", 124_439_808), ("medium", 354_823_168), ("large", 774_030_080)],
)
def test_gpt2_published_parameter_counts_on_meta(size, published):
    """Vocabulary 50,257 (not padded), context 1,024, biases everywhere,
    learned positions counted, tied head without bias, final LayerNorm."""
    config = GPTConfig.gpt2(size)
    with torch.device("meta"):
        model = GPT(config)
    assert next(model.parameters()).device.type == "meta"
    assert count_parameters(model) == published == _gpt_formula(config)
    explicit = GPTConfig(
        vocab_size=50257,
        max_seq_len=1024,
        d_model=config.d_model,
        num_heads=config.num_heads,
        num_layers=config.num_layers,
        d_ff=None,
        bias=True,
        positional="learned",
        tie_weights=True,
    )
    assert explicit == config


def _seq2seq_formula(c: Seq2SeqTransformerConfig) -> int:
    D = c.d_model
    count = (c.src_vocab_size + c.tgt_vocab_size) * D
    count += c.num_encoder_layers * _layer_count(D, c.d_ff, True)
    count += c.num_decoder_layers * _layer_count(D, c.d_ff, True, True)
    count += 2 * 2 * D  # nn.Transformer's final norms
    count += c.tgt_vocab_size  # generator bias
    if not c.tie_weights:
        count += c.tgt_vocab_size * D
    return count


@pytest.mark.parametrize(
    "kwargs", [{}, {"tie_weights": False, "norm_first": False, "d_ff": 20}]
)
def test_seq2seq_parameter_count_matches_formula(kwargs):
    model = _seq2seq(**kwargs)
    assert count_parameters(model) == _seq2seq_formula(model.config)


def _encoder_formula(c: EncoderConfig) -> int:
    D = c.d_model
    count = (c.vocab_size + c.max_seq_len) * D + 2 * D  # + embedding LN
    count += c.num_layers * _layer_count(D, c.d_ff, True)
    if c.norm_first:
        count += 2 * D
    if c.head == "mlm":
        return count + c.vocab_size  # tied weight, own bias
    return count + D * c.num_classes + c.num_classes


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"head": "token", "norm_first": True},
        {"head": "mlm", "d_ff": 20},
    ],
)
def test_encoder_parameter_count_matches_formula(kwargs):
    model = _encoder(**kwargs)
    assert count_parameters(model) == _encoder_formula(model.config)


def test_bert_base_sized_encoder_on_meta():
    """BERT-base's 109,482,240 = ours + segment embeddings + pooler."""
    config = EncoderConfig(30522, 512, 768, 12, 12)
    with torch.device("meta"):
        model = TransformerEncoderModel(config)
    ours = count_parameters(model) - (768 * 2 + 2)  # without the head
    segments, pooler = 2 * 768, 768 * 768 + 768
    assert ours + segments + pooler == 109_482_240


# --------------------------------------------------------------------------
# Configs
# --------------------------------------------------------------------------


def test_configs_resolve_d_ff_and_are_frozen():
    c = GPTConfig(10, 8, 16, 4, 1)
    assert c.d_ff == 64 and c.head_dim == 4
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.d_model = 32  # type: ignore[misc]
    assert Seq2SeqTransformerConfig(5, 5, 8, 8, 2, 1, 1, d_ff=10).d_ff == 10
    assert EncoderConfig(5, 8, 8, 2, 1).d_ff == 32


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda: GPTConfig(10, 8, 18, 4, 1), ValueError,
         "d_model=18 is not divisible by num_heads=4"),
        (lambda: GPTConfig(10, 8, 16, 4, 1, positional="alibi"), ValueError,
         "positional='alibi'"),
        (lambda: GPTConfig(10, 8, 12, 4, 1, positional="rope"), ValueError,
         "head_dim=3 must be even: positional='rope'"),
        (lambda: GPTConfig(10, 8, 16, 4, 1, dropout=1.0), ValueError,
         "dropout=1"),
        (lambda: GPTConfig(10, 0, 16, 4, 1), ValueError, "max_seq_len=0"),
        (lambda: GPTConfig(10, 8, 16, 4, 1, bias=1), TypeError, "bias"),
        (lambda: GPTConfig.gpt2("huge"), ValueError, "size='huge'"),
        (lambda: Seq2SeqTransformerConfig(5, 9, 8, 8, 2, 1, 1, pad_id=7),
         ValueError, r"pad_id=7 .*src_vocab_size=5"),
        (lambda: Seq2SeqTransformerConfig(5, 5, 8, 8, 2, 0, 1), ValueError,
         "num_encoder_layers=0"),
        (lambda: Seq2SeqTransformerConfig(5, 5, 8, 6, 2, 1, 1, rotary=True),
         ValueError, "head_dim=3 must be even: rotary=True"),
        (lambda: Seq2SeqTransformerConfig(5, 5, 8, 8, 2, 1, 1, rotary=1),
         TypeError, "rotary"),
        (lambda: EncoderConfig(5, 8, 8, 2, 1, head="qa"), ValueError,
         "head='qa'"),
        (lambda: EncoderConfig(5, 8, 8, 2, 1, pool="max"), ValueError,
         "pool='max'"),
        (lambda: EncoderConfig(5, 8, 8, 2, 1, num_classes=0), ValueError,
         "num_classes=0"),
    ],
)
def test_bad_configs(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_models_want_their_config():
    with pytest.raises(TypeError, match="GPTConfig"):
        GPT(EncoderConfig(5, 8, 8, 2, 1))  # type: ignore[arg-type]


# --------------------------------------------------------------------------
# Bad inputs name the value and the limit
# --------------------------------------------------------------------------


def test_out_of_vocabulary_and_too_long_inputs():
    gpt, s2s, enc = _gpt(), _seq2seq(), _encoder()
    ok = torch.ones(2, 5, dtype=torch.long)
    with pytest.raises(ValueError, match=r"token id 40 .*vocab_size=40"):
        gpt(torch.tensor([[1, 40]]))
    with pytest.raises(ValueError, match=r"length 13.*max_seq_len=12"):
        gpt(torch.ones(1, 13, dtype=torch.long))
    with pytest.raises(ValueError, match=r"token id 30 .*vocab_size=30"):
        s2s(torch.tensor([[1, 30]]), ok[:1])
    with pytest.raises(ValueError, match=r"token id 25 .*vocab_size=25"):
        s2s(ok[:1], torch.tensor([[1, 25]]))
    with pytest.raises(ValueError, match=r"length 13.*max_seq_len=12"):
        s2s(ok, torch.ones(2, 13, dtype=torch.long))
    with pytest.raises(ValueError, match="same batch size"):
        s2s(ok, ok[:1])
    with pytest.raises(ValueError, match=r"token id -1 .*vocab_size=30"):
        enc(torch.tensor([[1, -1]]))
    with pytest.raises(ValueError, match=r"length 13.*max_seq_len=12"):
        enc(torch.ones(1, 13, dtype=torch.long))
    with pytest.raises(TypeError, match="integer"):
        gpt(torch.ones(1, 3))
    with pytest.raises(ValueError, match="2-D"):
        gpt(torch.ones(3, dtype=torch.long))
    with pytest.raises(ValueError, match="idx has no tokens"):
        gpt(torch.ones(2, 0, dtype=torch.long))
    with pytest.raises(TypeError, match="config must be a GPTConfig"):
        GPT(gpt.config.to_dict())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"token id 40 in targets .*-100"):
        gpt(ok, torch.full((2, 5), 40))
    with pytest.raises(ValueError, match=r"targets has shape \(2, 4\)"):
        gpt(ok, ok[:, :4])


def test_models_check_at_entry_and_their_modules_do_not_check_again():
    vit = ViT(ViTConfig(8, 4, d_model=8, num_heads=2, num_layers=1))
    for model in (_gpt(), _seq2seq(), _encoder(), vit):
        inner = [m for m in model.modules() if hasattr(m, "check_inputs")]
        assert len(inner) > 3 and not any(m.check_inputs for m in inner)
    with pytest.raises(ValueError, match="images must be 4-D"):
        vit(torch.zeros(1, 8, 8))  # the model itself still checks


def test_token_ids_are_compared_with_the_vocabulary_on_a_cpu_only():
    """Elsewhere the comparison would wait for the device at every call;
    shapes and lengths are still checked (here on the meta device)."""
    with torch.device("meta"):
        model = GPT(GPTConfig(10, 8, 16, 4, 1))
        logits, loss = model(torch.full((2, 3), 99), torch.full((2, 3), 50))
    assert logits.shape == (2, 3, 10) and logits.is_meta and loss.is_meta
    with pytest.raises(ValueError, match="9 is more than max_seq_len=8"):
        model(torch.zeros(1, 9, dtype=torch.long, device="meta"))
    with pytest.raises(ValueError, match="token id 99 in idx"):
        GPT(GPTConfig(10, 8, 16, 4, 1))(torch.full((2, 3), 99))


# --------------------------------------------------------------------------
# GPT: causal, a loss that skips -100, learns
# --------------------------------------------------------------------------


@pytest.mark.parametrize("positional", ["learned", "rope"])
def test_gpt_is_causal(positional):
    model = _gpt(positional=positional).eval()
    idx = torch.randint(40, (3, 10))
    later = idx.clone()
    later[:, 6:] = (later[:, 6:] + 1) % 40  # change the future
    logits, _ = model(idx)
    changed, _ = model(later)
    torch.testing.assert_close(
        changed[:, :6], logits[:, :6], rtol=0, atol=1e-12
    )
    assert (changed[:, 6:] - logits[:, 6:]).abs().amax() > 1e-3


def test_gpt_positions_matter():
    """Both position kinds tell the model where a token is."""
    for positional in ("learned", "rope"):
        model = _gpt(positional=positional).eval()
        idx = torch.tensor([[3, 5, 7, 9]])
        swapped = torch.tensor([[5, 3, 7, 9]])
        a, _ = model(idx)
        b, _ = model(swapped)
        assert (a[0, 2:] - b[0, 2:]).abs().amax() > 1e-6


def test_gpt_loss_skips_ignored_targets():
    model = _gpt()
    idx = torch.randint(40, (2, 8))
    targets = torch.randint(40, (2, 8))
    targets[0, :3] = -100
    logits, loss = model(idx, targets)
    keep = targets != -100
    expected = F.cross_entropy(logits[keep], targets[keep])
    torch.testing.assert_close(loss, expected)


def test_tiny_gpt_overfits_one_batch():
    torch.manual_seed(0)
    model = GPT(GPTConfig(16, 12, 32, 4, 2))
    data = torch.randint(16, (4, 13))
    idx, targets = data[:, :-1], data[:, 1:]
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    first = None
    for _ in range(60):
        _, loss = model(idx, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        first = first or loss.item()
    assert first > 2.0  # about ln 16 at the start
    assert loss.item() < 0.05


# --------------------------------------------------------------------------
# Seq2Seq: padding hidden in every attention
# --------------------------------------------------------------------------


def _pad(ids: torch.Tensor, extra: int, pad_id: int = 0) -> torch.Tensor:
    return F.pad(ids, (0, extra), value=pad_id)


def test_seq2seq_source_padding_does_not_change_real_positions():
    model = _seq2seq().eval()
    src = torch.randint(1, 30, (3, 6))
    src[1, 4:] = 0  # a shorter source, already padded
    tgt = torch.randint(1, 25, (3, 5))
    logits = model(src, tgt)
    torch.testing.assert_close(
        model(_pad(src, 5), tgt), logits, rtol=0, atol=1e-12
    )
    # The padding is masked, not ignored by chance: a real token matters.
    other = src.clone()
    other[1, 3] = (other[1, 3] % 29) + 1
    assert (model(other, tgt)[1] - logits[1]).abs().amax() > 1e-6
    # Padding the target does not change the real target positions.
    torch.testing.assert_close(
        model(src, _pad(tgt, 4))[:, :5], logits, rtol=0, atol=1e-12
    )


def test_seq2seq_decoder_is_causal_and_tied():
    model = _seq2seq().eval()
    src = torch.randint(1, 30, (2, 7))
    tgt = torch.randint(1, 25, (2, 6))
    later = tgt.clone()
    later[:, 4:] = (later[:, 4:] % 24) + 1
    torch.testing.assert_close(
        model(src, later)[:, :4], model(src, tgt)[:, :4], rtol=0, atol=1e-12
    )
    assert model.generator.weight is model.tgt_embedding.weight
    # encode + decode is the forward pass (what step-by-step decoding uses).
    memory, src_keep = model.encode(src)
    torch.testing.assert_close(
        model.decode(tgt, memory, src_keep), model(src, tgt)
    )


# --------------------------------------------------------------------------
# Encoder: heads and padding
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("head", "pool", "shape"),
    [
        ("classification", "cls", (3, 3)),
        ("classification", "mean", (3, 3)),
        ("token", "cls", (3, 7, 3)),
        ("mlm", "cls", (3, 7, 30)),
    ],
)
def test_encoder_heads_ignore_padding(head, pool, shape):
    model = _encoder(head=head, pool=pool).eval()
    ids = torch.randint(1, 30, (3, 7))
    ids[2, 5:] = 0
    out = model(ids)
    assert out.shape == shape
    padded = model(_pad(ids, 4))
    if head != "classification":
        padded = padded[:, :7]
    torch.testing.assert_close(padded, out, rtol=0, atol=1e-12)


def test_encoder_sees_both_directions_and_mlm_is_tied():
    model = _encoder(head="mlm").eval()
    ids = torch.randint(1, 30, (1, 6))
    later = ids.clone()
    later[0, 5] = (later[0, 5] % 29) + 1
    assert (model(later)[0, 0] - model(ids)[0, 0]).abs().amax() > 1e-6
    assert model.head.weight is model.token_embedding.weight


def test_encoder_cls_pool_needs_a_real_first_token():
    model = _encoder()
    with pytest.raises(ValueError, match="position 0"):
        model(torch.tensor([[0, 4, 5]]))
