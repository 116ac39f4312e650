"""Issue 21: attention, layers, models and decoding under hostile input.

Each test is the regression test of one defect of the issue (its number in
the test's docstring): NaN behind padding, token ids of any integer dtype,
``pad_id`` fed to the decoder, flags that are not bools, mixed dtypes,
impossible tokens while decoding, and a few smaller cases.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from transformer_book import attention, feedforward, norm, rnn, transformer
from transformer_book.analysis import attention_rollout
from transformer_book.attention import (
    MultiHeadAttention,
    _fused_attention,
    scaled_dot_product_attention,
)
from transformer_book.decoding import beam_search, generate, sample
from transformer_book.models.encoder import (
    EncoderConfig,
    TransformerEncoderModel,
)
from transformer_book.models.gpt import GPT, GPTConfig
from transformer_book.models.seq2seq import (
    Seq2SeqTransformer,
    Seq2SeqTransformerConfig,
)
from transformer_book.models.vit import ViT, ViTConfig

NAN = float("nan")


pytestmark = pytest.mark.usefixtures("one_thread")


def _gpt() -> GPT:
    torch.manual_seed(0)
    config = GPTConfig(
        vocab_size=20, max_seq_len=8, d_model=8, num_heads=2, num_layers=1
    )
    return GPT(config).eval()


def _seq2seq(pad_id: int = 0) -> Seq2SeqTransformer:
    torch.manual_seed(0)
    config = Seq2SeqTransformerConfig(
        src_vocab_size=11, tgt_vocab_size=9, max_seq_len=12, d_model=16,
        num_heads=2, num_encoder_layers=1, num_decoder_layers=2, d_ff=32,
        pad_id=pad_id,
    )
    return Seq2SeqTransformer(config).double().eval()


# --------------------------------------------------------------------------
# 4: pad_id fed to the decoder
# --------------------------------------------------------------------------


def test_bos_equal_to_pad_decodes_the_same_with_and_without_cache():
    """4: the uncached decoder does not read pad_id in the target as padding.

    T5 starts the decoder with its padding id; the cached and uncached
    paths must then agree, for greedy decoding and for beam search.
    """
    model = _seq2seq(pad_id=0)
    src = torch.tensor([[3, 4, 5, 6], [7, 8, 0, 0]])
    options = {"bos_id": 0, "eos_id": 2}
    cached = model.generate(src, 6, **options)
    uncached = model.generate(src, 6, **options, use_cache=False)
    assert cached.tolist() == uncached.tolist()
    for use_cache in (True, False):
        beams = model.beam_search(
            src[0], 5, **options, beam_width=3, use_cache=use_cache
        )
        if use_cache:
            expected = beams
        else:
            assert [b[0].tolist() for b in beams] == [
                b[0].tolist() for b in expected
            ]
            assert [b[1] for b in beams] == pytest.approx(
                [b[1] for b in expected], abs=1e-9
            )
    # The decoder's logits do not depend on whether position 0 is pad_id:
    # a full pass equals a step-by-step pass through the cache.
    memory, keep = model.encode(src)
    tgt = torch.tensor([[0, 5, 0, 3], [0, 0, 4, 1]])
    full = model.decode(tgt, memory, keep)
    cache = model.make_cache()
    steps = torch.cat(
        [model.decode(tgt[:, t : t + 1], memory, keep, cache=cache)
         for t in range(tgt.shape[1])],
        dim=1,
    )
    torch.testing.assert_close(full, steps, rtol=0, atol=1e-10)


# --------------------------------------------------------------------------
# 8: token ids of any integer dtype
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype", [torch.uint8, torch.int8, torch.int16, torch.int32]
)
def test_models_accept_any_integer_dtype_of_token_ids(dtype):
    """8: uint8/int16/... ids become long before nn.Embedding sees them."""
    gpt = _gpt()
    idx = torch.tensor([[1, 2, 3], [4, 5, 6]])
    expected = gpt(idx, idx)
    logits, loss = gpt(idx.to(dtype), idx.to(dtype))
    torch.testing.assert_close(logits, expected[0], rtol=0, atol=0)
    torch.testing.assert_close(loss, expected[1], rtol=0, atol=0)
    cache = gpt.make_cache()
    torch.testing.assert_close(
        gpt(idx.to(dtype), cache=cache)[0], expected[0], rtol=0, atol=0
    )
    out = gpt.generate(idx.to(dtype), 3, temperature=0)
    assert out.dtype == torch.long
    assert out.tolist() == gpt.generate(idx, 3, temperature=0).tolist()

    model = _seq2seq()
    src = torch.tensor([[3, 4, 5], [6, 7, 0]])
    tgt = torch.tensor([[1, 5, 6], [1, 7, 0]])
    torch.testing.assert_close(
        model(src.to(dtype), tgt.to(dtype)), model(src, tgt), rtol=0, atol=0
    )
    assert model.generate(src.to(dtype), 4, bos_id=1).tolist() == (
        model.generate(src, 4, bos_id=1).tolist()
    )
    beams = model.beam_search(src[0].to(dtype), 3, bos_id=1, beam_width=2)
    assert beams[0][0].dtype == torch.long

    torch.manual_seed(0)
    encoder = TransformerEncoderModel(
        EncoderConfig(vocab_size=11, max_seq_len=8, d_model=8, num_heads=2,
                      num_layers=1)
    ).eval()
    torch.testing.assert_close(
        encoder(src.to(dtype)), encoder(src), rtol=0, atol=0
    )

    torch.manual_seed(0)
    recurrent = rnn.RNNSeq2Seq(
        rnn.RNNSeq2SeqConfig(11, 9, embed_size=4, hidden_size=6)
    ).eval()
    lengths = torch.tensor([3, 2])
    expected = recurrent(src, lengths, tgt)
    got = recurrent(src.to(dtype), lengths, tgt.to(dtype))
    torch.testing.assert_close(got.logits, expected.logits, rtol=0, atol=0)
    assert recurrent.greedy_decode(src.to(dtype), lengths, 3).tokens.tolist(
    ) == recurrent.greedy_decode(src, lengths, 3).tokens.tolist()


# --------------------------------------------------------------------------
# 11: NaN behind a mask
# --------------------------------------------------------------------------


@pytest.mark.parametrize("explicit", [False, True], ids=["fused", "explicit"])
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_nan_in_masked_keys_and_values_does_not_spread(explicit, kind):
    """11: a key masked for every query does not contribute, NaN or not."""
    torch.manual_seed(0)
    q = torch.randn(2, 2, 3, 4)
    k = torch.randn(2, 2, 5, 4)
    v = torch.randn(2, 2, 5, 4)
    keep = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    mask = keep[:, None, None, :]  # (B, 1, 1, kv_len): padding
    if kind == "float":
        mask = torch.zeros(mask.shape).masked_fill(~mask, float("-inf"))
    bad_k, bad_v = k.clone(), v.clone()
    bad_k[0, :, 3:] = NAN
    bad_v[0, :, 3:] = NAN
    def attend(q, k, v, mask, is_causal=False):
        if explicit:
            return scaled_dot_product_attention(q, k, v, mask,
                                                is_causal=is_causal)
        return _fused_attention(q, k, v, mask, is_causal, 0.0)

    clean = attend(q, k, v, mask)
    dirty = attend(q, bad_k, bad_v, mask)
    causal = attend(q, bad_k, bad_v, mask, is_causal=True)
    assert not dirty.isnan().any()
    assert not causal.isnan().any()
    torch.testing.assert_close(dirty, clean)


@pytest.mark.parametrize("explicit", [False, True], ids=["fused", "explicit"])
def test_nan_in_padding_does_not_reach_an_encoders_real_tokens(explicit):
    """11: through a whole padded encoder layer, on both attention paths."""
    torch.manual_seed(0)
    layer = transformer.EncoderLayer(8, 2, 16).eval()
    attention.set_fused(layer, not explicit)
    x = torch.randn(2, 5, 8)
    keep = torch.tensor([[1, 1, 1, 0, 0], [1] * 5], dtype=torch.bool)
    mask = keep[:, None, None, :]
    dirty = x.clone()
    dirty[0, 3:] = NAN
    with torch.no_grad():
        out = layer(dirty, mask)
        expected = layer(x, mask)
    torch.testing.assert_close(out[0, :3], expected[0, :3])
    torch.testing.assert_close(out[1], expected[1])


# --------------------------------------------------------------------------
# 15: flags must be bools
# --------------------------------------------------------------------------


def test_flags_refuse_what_is_not_a_bool():
    """15: 'False', 'yes', 'no' or 1 are mistakes, not true or false."""
    q = k = v = torch.randn(1, 2, 3, 4)
    with pytest.raises(TypeError, match="is_causal must be a bool"):
        scaled_dot_product_attention(q, k, v, is_causal="False")
    with pytest.raises(TypeError, match="return_weights must be a bool"):
        scaled_dot_product_attention(q, k, v, return_weights="no")
    with pytest.raises(TypeError, match="bias must be a bool"):
        MultiHeadAttention(8, 2, bias="yes")
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(1, 3, 8)
    with pytest.raises(TypeError, match="is_causal must be a bool"):
        mha(x, x, x, is_causal="False")
    with pytest.raises(TypeError, match="is_causal must be a bool"):
        mha(x, x, x, is_causal="False", cache=attention.KVCache())
    with pytest.raises(TypeError, match="is_causal must be a bool"):
        transformer.EncoderLayer(8, 2, 16)(x, is_causal="False")
    with pytest.raises(TypeError, match="tgt_is_causal must be a bool"):
        transformer.Transformer(8, 2, 1, 1, 16)(x, x, tgt_is_causal="True")
    with pytest.raises(TypeError, match="fused must be a bool"):
        attention.set_fused(mha, "no")
    with pytest.raises(TypeError, match="bias must be a bool"):
        rnn.RNN(3, 4, bias="no")
    with pytest.raises(TypeError, match="bias must be a bool"):
        rnn.LSTMCell(3, 4, bias="no")
    with pytest.raises(TypeError, match="bidirectional must be a bool"):
        rnn.GRU(3, 4, bidirectional="no")


# --------------------------------------------------------------------------
# 16: unchecked inputs
# --------------------------------------------------------------------------


def test_feed_forward_checks_its_input():
    """16: a wrong feature size is named, not a matmul error."""
    ff = feedforward.FeedForward(8, 4)
    with pytest.raises(ValueError, match="d_model=8"):
        ff(torch.ones(2, 3))
    with pytest.raises(TypeError, match="float64.*float32"):
        ff(torch.ones(2, 8, dtype=torch.float64))


def test_rotary_that_takes_no_offset_is_refused_at_construction():
    """16: nn.Identity() cannot rotate by position: refused when built."""
    with pytest.raises(TypeError, match="rotary.*offset.*Identity"):
        MultiHeadAttention(8, 2, rotary=nn.Identity())


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool, "float32"])
def test_modules_refuse_a_dtype_that_is_not_floating(dtype):
    """16: MultiHeadAttention(..., dtype=torch.int64) and its neighbours."""
    error = "dtype must be a (floating dtype|torch.dtype)"
    for build in (
        lambda: MultiHeadAttention(8, 2, dtype=dtype),
        lambda: norm.LayerNorm(8, dtype=dtype),
        lambda: norm.RMSNorm(8, dtype=dtype),
        lambda: feedforward.FeedForward(8, 4, dtype=dtype),
        lambda: transformer.EncoderLayer(8, 2, 16, dtype=dtype),
    ):
        with pytest.raises(TypeError, match=error):
            build()


def test_mixed_input_and_parameter_dtypes_are_named():
    """16: float64 input, float32 weights: a TypeError like the RNNs'."""
    x = torch.randn(1, 3, 8, dtype=torch.float64)
    message = r"has dtype torch.float64, but the parameters are torch.float32"
    for module, args in (
        (MultiHeadAttention(8, 2), (x, x, x)),
        (norm.LayerNorm(8), (x,)),
        (transformer.EncoderLayer(8, 2, 16), (x,)),
        (transformer.DecoderLayer(8, 2, 16), (x, x)),
        (transformer.Encoder(1, 8, 2, 16), (x,)),
        (transformer.Transformer(8, 2, 1, 1, 16), (x, x)),
    ):
        with pytest.raises(TypeError, match=message):
            module(*args)
    memory = torch.randn(1, 4, 8, dtype=torch.float64)
    with pytest.raises(TypeError, match="memory has dtype torch.float64"):
        transformer.DecoderLayer(8, 2, 16)(x.float(), memory)
    vit = ViT(ViTConfig(image_size=8, patch_size=4, d_model=8, num_heads=2,
                        num_layers=1))
    with pytest.raises(TypeError, match="images has dtype torch.float64"):
        vit(torch.zeros(1, 1, 8, 8, dtype=torch.float64))


def test_mixed_dtypes_are_allowed_under_autocast():
    """16: autocast runs float32 weights on bfloat16 activations."""
    layer = transformer.EncoderLayer(8, 2, 16)
    x = torch.randn(1, 3, 8, dtype=torch.bfloat16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert layer(x).shape == (1, 3, 8)


# --------------------------------------------------------------------------
# 17: a stack of no layers
# --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["encoder", "decoder"])
def test_from_torch_of_a_stack_without_layers_says_so(kind):
    """17: a 0-layer nn.TransformerEncoder is refused with a ValueError."""
    if kind == "encoder":
        twin = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(8, 2, 16), 0,
            enable_nested_tensor=False,
        )
        copy = transformer.Encoder.from_torch
    else:
        twin = nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, 16), 0)
        copy = transformer.Decoder.from_torch
    with pytest.raises(ValueError, match="num_layers=0 must be positive"):
        copy(twin)


# --------------------------------------------------------------------------
# 18: every token impossible
# --------------------------------------------------------------------------


def _impossible(tokens: torch.Tensor, parents=None) -> torch.Tensor:
    return torch.full((tokens.shape[0], 3), float("-inf"))


def test_searches_say_when_every_token_is_impossible():
    """18: all log-probs -inf (or NaN) is a ValueError, not an IndexError."""
    prefix = torch.tensor([0])
    with pytest.raises(ValueError, match="no possible next token"):
        generate(_impossible, prefix[None], 2, temperature=0)
    with pytest.raises(ValueError, match="no possible next token"):
        beam_search(_impossible, prefix, beam_width=2, max_new_tokens=2)

    def nan(tokens, parents=None):
        return torch.full((tokens.shape[0], 3), NAN)

    for temperature in (0.0, 1.0):
        with pytest.raises(ValueError, match="no possible next token"):
            generate(nan, prefix[None], 2, temperature=temperature)
    with pytest.raises(ValueError, match="no possible next token"):
        beam_search(nan, prefix, beam_width=1, max_new_tokens=2)


def test_nan_log_probs_do_not_crowd_out_possible_tokens():
    """18: a NaN row takes no place in the beam from a finite candidate."""
    table = torch.tensor([[NAN, NAN, NAN], [-1.0, -2.0, -3.0]])

    def fn(tokens, parents):  # hypotheses ending in 0 go on with NaN
        return table[(tokens[:, -1] > 0).long()]

    out = beam_search(fn, torch.tensor([1]), beam_width=2, max_new_tokens=2)
    assert [seq.tolist() for seq, _ in out] == [[1, 0], [1, 1]]
    assert [score for _, score in out] == [-3.0, -4.0]


def test_beam_search_keeps_the_hypotheses_that_ended_before():
    """18: a dead end after some hypotheses finished returns those."""
    def fn(tokens, parents):
        if tokens.shape[1] == 1:
            return torch.tensor([[-1.0, -0.5, -3.0]]).expand(
                tokens.shape[0], -1
            )
        return _impossible(tokens)

    out = beam_search(
        fn, torch.tensor([0]), beam_width=2, max_new_tokens=3, eos_id=0
    )
    assert [seq.tolist() for seq, _ in out] == [[0]]


@pytest.mark.parametrize("value", [float("-inf"), NAN])
def test_sample_says_when_a_row_has_nothing_to_draw(value):
    """18: all -inf or NaN logits: a ValueError naming the row."""
    logits = torch.zeros(3, 4)
    logits[1] = value
    with pytest.raises(ValueError, match="logits row 1"):
        sample(logits)
    with pytest.raises(ValueError, match="logits row 1"):
        sample(logits, top_k=2, top_p=0.5)


# --------------------------------------------------------------------------
# 19: smaller defects
# --------------------------------------------------------------------------


def test_rollout_of_a_cls_that_attends_only_to_itself_sums_to_one():
    """19: no flow from the patches is spread evenly, never all zeros."""
    w = torch.zeros(2, 1, 5, 5)
    w[..., 0, 0] = 1.0
    w[..., 1:, 1:] = 0.25
    for residual in (False, True):
        flow = attention_rollout([w], residual=residual)
        torch.testing.assert_close(flow.sum(-1), torch.ones(2))
    torch.testing.assert_close(
        attention_rollout([w], residual=False), torch.full((2, 4), 0.25)
    )


def test_generate_zero_tokens_returns_a_new_tensor():
    """19: the result never aliases the prompt."""
    gpt = _gpt()
    idx = torch.tensor([[1, 2, 3]])
    out = gpt.generate(idx, 0)
    assert out is not idx
    out[0, 0] = 7
    assert idx[0, 0] == 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.bool])
def test_cross_entropy_refuses_targets_that_are_not_indices(dtype):
    """16: float (or bool) targets are named, not a deep torch error."""
    from transformer_book.training import cross_entropy

    logits = torch.randn(2, 3, 5)
    with pytest.raises(TypeError, match=r"targets must hold class indices"):
        cross_entropy(logits, torch.zeros(2, 3, dtype=dtype))


def test_cross_entropy_takes_any_integer_dtype_of_targets():
    from transformer_book.training import cross_entropy

    logits = torch.randn(2, 3, 5)
    targets = torch.randint(0, 5, (2, 3))
    expected = cross_entropy(logits, targets)
    torch.testing.assert_close(
        cross_entropy(logits, targets.to(torch.uint8)), expected)
