"""The RNN encoder-decoder and its additive attention."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from transformer_book import data, rnn

SRC_V, TGT_V = 11, 13
PAD, BOS, EOS = 0, 1, 2


@pytest.fixture(autouse=True)
def _one_thread():
    """Run on one thread: these models are tiny, and threads sharing busy
    cores spend more time waiting for each other than computing."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _model(attention: bool = True, **kwargs) -> rnn.RNNSeq2Seq:
    torch.manual_seed(0)
    config = rnn.RNNSeq2SeqConfig(
        SRC_V,
        TGT_V,
        embed_size=kwargs.pop("embed_size", 8),
        hidden_size=kwargs.pop("hidden_size", 12),
        attention=attention,
        **kwargs,
    )
    return rnn.RNNSeq2Seq(config).double().eval()


def _batch(
    lengths=(5, 3, 1), tgt_len: int = 4
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    seqs = [
        torch.randint(3, SRC_V, (n,), generator=g).tolist() for n in lengths
    ]
    src, lens = data.pad_batch(seqs, PAD)
    tgt_in = torch.randint(3, TGT_V, (len(lengths), tgt_len), generator=g)
    tgt_in[:, 0] = BOS
    return src, lens, tgt_in


# -- attention --------------------------------------------------------------


def test_attention_weights_sum_to_one_and_skip_padding():
    torch.manual_seed(0)
    attn = rnn.BahdanauAttention(4, 6, 5).double()
    keys = torch.randn(3, 7, 6, dtype=torch.float64)
    mask = torch.arange(7) < torch.tensor([7, 2, 1])[:, None]
    context, weights = attn(torch.randn(3, 4, dtype=torch.float64), keys, mask)
    assert weights.shape == (3, 7) and context.shape == (3, 6)
    torch.testing.assert_close(
        weights.sum(-1), torch.ones(3, dtype=weights.dtype)
    )
    assert (weights[~mask] == 0).all()
    assert (weights[mask] > 0).all()
    torch.testing.assert_close(
        context, torch.einsum("bs,bsk->bk", weights, keys)
    )


def test_attention_matches_the_equation():
    torch.manual_seed(0)
    attn = rnn.BahdanauAttention(4, 6, 5).double()
    q = torch.randn(2, 4, dtype=torch.float64)
    keys = torch.randn(2, 3, 6, dtype=torch.float64)
    W_q, W_k, b = attn.q_proj.weight, attn.k_proj.weight, attn.k_proj.bias
    v = attn.score_proj.weight[0]
    e = torch.tanh((q @ W_q.T)[:, None, :] + keys @ W_k.T + b) @ v  # (B, S)
    _, weights = attn(q, keys)
    torch.testing.assert_close(weights, e.softmax(-1))
    # Reusing projected keys gives the same result.
    _, again = attn(q, keys, projected_keys=attn.project_keys(keys))
    torch.testing.assert_close(again, weights)


def test_attention_row_without_keys_is_zero():
    attn = rnn.BahdanauAttention(4, 6, 5)
    mask = torch.tensor([[True, False], [False, False]])
    context, weights = attn(torch.randn(2, 4), torch.randn(2, 2, 6), mask)
    assert torch.isfinite(weights).all() and (weights[1] == 0).all()
    assert (context[1] == 0).all()


def _attention_inputs():
    torch.manual_seed(0)
    query, keys = torch.randn(2, 4), torch.randn(2, 3, 6)
    mask = torch.tensor([[True, True, True], [True, False, False]])
    return query, keys, mask


@pytest.mark.parametrize(
    ("change", "exc", "match"),
    [
        # Each of these used to broadcast silently or fail inside a matmul.
        (
            {"query": torch.randn(3, 4)},
            ValueError,
            r"query has shape \(3, 4\), expected .* = \(2, 4\)",
        ),
        ({"query": torch.randn(2, 5)}, ValueError, "query has shape"),
        ({"query": torch.randn(4)}, ValueError, "query must be 2-D"),
        ({"keys": torch.randn(2, 3, 7)}, ValueError, "keys has shape"),
        ({"keys": torch.randn(3, 6)}, ValueError, "keys must be 3-D"),
        ({"mask": torch.ones(2, 3)}, TypeError, "mask must be bool"),
        (
            {"mask": torch.ones(2, 4, dtype=torch.bool)},
            ValueError,
            r"mask has shape \(2, 4\), expected \(B, S\) = \(2, 3\)",
        ),
        (
            {"mask": torch.ones(3, dtype=torch.bool)},
            ValueError,
            "mask must be 2-D",
        ),
        (
            {"projected_keys": torch.randn(2, 3, 4)},
            ValueError,
            "projected_keys has shape",
        ),
        (
            {"query": torch.randn(2, 4, dtype=torch.float64)},
            TypeError,
            "query has dtype torch.float64",
        ),
        (
            {"keys": torch.ones(2, 3, 6, dtype=torch.long)},
            TypeError,
            "keys must be a floating tensor",
        ),
        (
            {"query": [[0.0] * 4] * 2},
            TypeError,
            "query must be a floating tensor",
        ),
    ],
)
def test_attention_wrong_inputs_raise(change, exc, match):
    attn = rnn.BahdanauAttention(4, 6, 5)
    query, keys, mask = _attention_inputs()
    kwargs = {"query": query, "keys": keys, "mask": mask, **change}
    with pytest.raises(exc, match=match):
        attn(**kwargs)


def test_attention_bad_size_raises():
    with pytest.raises(ValueError, match="attention_size=0"):
        rnn.BahdanauAttention(4, 6, 0)
    with pytest.raises(TypeError, match="key_size must be an int"):
        rnn.BahdanauAttention(4, "6", 5)


# -- model ------------------------------------------------------------------


@pytest.mark.parametrize("attention", [True, False])
@pytest.mark.parametrize("bidirectional", [True, False])
def test_shapes(attention, bidirectional):
    model = _model(attention, bidirectional=bidirectional)
    src, lens, tgt_in = _batch()
    out = model(src, lens, tgt_in)
    assert out.logits.shape == (3, 4, TGT_V)
    if attention:
        assert out.attention.shape == (3, 4, src.size(1))
    else:
        assert out.attention is None
    annotations, summary, mask = model.encode(src, lens)
    D = 2 if bidirectional else 1
    assert annotations.shape == (3, src.size(1), D * 12)
    assert summary.shape == (3, D * 12)
    assert (annotations[~mask] == 0).all()


def test_lengths_and_mask_are_equivalent():
    model = _model()
    src, lens, tgt_in = _batch()
    mask = torch.arange(src.size(1)) < lens[:, None]
    a, b = model(src, lens, tgt_in), model(src, mask, tgt_in)
    torch.testing.assert_close(a.logits, b.logits)
    torch.testing.assert_close(a.attention, b.attention)


def test_model_attention_sums_to_one_over_real_tokens():
    model = _model()
    src, lens, tgt_in = _batch()
    weights = model(src, lens, tgt_in).attention  # (B, T, S)
    mask = torch.arange(src.size(1)) < lens[:, None]
    torch.testing.assert_close(
        weights.sum(-1), torch.ones(3, 4, dtype=weights.dtype)
    )
    assert (weights.masked_select(~mask[:, None, :]) == 0).all()


@pytest.mark.parametrize("attention", [True, False])
@pytest.mark.parametrize("bidirectional", [True, False])
def test_padding_does_not_change_outputs(attention, bidirectional):
    model = _model(attention, bidirectional=bidirectional)
    src, lens, tgt_in = _batch()
    extra = torch.full((3, 4), PAD)
    padded = torch.cat([src, extra], 1)
    # What sits in the padding must not matter either.
    noisy = torch.cat([src, torch.randint(3, SRC_V, (3, 4))], 1)
    noisy[:, : src.size(1)] = torch.where(
        torch.arange(src.size(1)) < lens[:, None], src, 7
    )
    ref = model(src, lens, tgt_in)
    for other in (padded, noisy):
        out = model(other, lens, tgt_in)
        torch.testing.assert_close(out.logits, ref.logits)
        if attention:
            torch.testing.assert_close(
                out.attention[..., : src.size(1)], ref.attention
            )
            assert (out.attention[..., src.size(1) :] == 0).all()
    # Each row alone gives the same logits as inside the batch.
    for i, n in enumerate(lens.tolist()):
        alone = model(src[i : i + 1, :n], lens[i : i + 1], tgt_in[i : i + 1])
        torch.testing.assert_close(alone.logits[0], ref.logits[i])


def test_bidirectional_encoder_reads_backwards_from_the_last_token():
    model = _model(bidirectional=True)
    src, lens, _ = _batch()
    annotations, summary, _ = model.encode(src, lens)
    H = model.config.hidden_size
    for i, n in enumerate(lens.tolist()):
        x = model.src_embed(src[i : i + 1, :n].flip(1))
        bwd, _ = model.encoder_bwd(x)
        torch.testing.assert_close(annotations[i, :n, H:], bwd[0].flip(0))
        torch.testing.assert_close(summary[i, H:], bwd[0, -1])


@pytest.mark.parametrize("attention", [True, False])
def test_greedy_decode_matches_teacher_forced_argmax(attention):
    model = _model(attention)
    src, lens, _ = _batch()
    out = model.greedy_decode(src, lens, max_len=6)
    assert out.tokens.shape[0] == 3 and out.tokens.shape[1] <= 6
    bos = torch.full_like(out.tokens[:, :1], BOS)
    forced = model(src, lens, torch.cat([bos, out.tokens[:, :-1]], 1))
    live = torch.ones_like(out.tokens, dtype=torch.bool)
    live[:, 1:] = (out.tokens[:, :-1] != EOS).long().cumprod(1).bool()
    assert torch.equal(forced.logits.argmax(-1)[live], out.tokens[live])
    assert (out.tokens[~live] == PAD).all()
    if attention:
        assert out.attention.shape == (*out.tokens.shape, src.size(1))
        torch.testing.assert_close(forced.attention[live], out.attention[live])
        assert (out.attention[~live] == 0).all()
    else:
        assert out.attention is None


def test_greedy_decode_stops_at_eos():
    model = _model()
    with torch.no_grad():
        model.out_proj.bias.fill_(-100.0)
        model.out_proj.bias[EOS] = 100.0
    src, lens, _ = _batch()
    out = model.greedy_decode(src, lens, max_len=10)
    assert out.tokens.tolist() == [[EOS]] * 3


@pytest.mark.parametrize("attention", [True, False])
def test_tiny_model_overfits_one_batch(attention):
    torch.manual_seed(0)
    config = rnn.RNNSeq2SeqConfig(
        SRC_V, TGT_V, embed_size=16, hidden_size=32, attention=attention
    )
    model = rnn.RNNSeq2Seq(config)
    g = torch.Generator().manual_seed(0)
    seqs = [
        torch.randint(3, SRC_V, (n,), generator=g).tolist()
        for n in (4, 3, 5, 2, 4, 3)
    ]
    src, lens = data.pad_batch(seqs)
    # Target: the source reversed, mapped to other ids, then <eos>.
    tgt, _ = data.pad_batch(
        [[BOS] + [t + 2 for t in s[::-1]] + [EOS] for s in seqs]
    )
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(150):
        logits = model(src, lens, tgt[:, :-1]).logits
        loss = F.cross_entropy(
            logits.transpose(1, 2), tgt[:, 1:], ignore_index=PAD
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.05
    out = model.eval().greedy_decode(src, lens, max_len=8)
    for row, want in zip(
        out.tokens.tolist(), tgt[:, 1:].tolist(), strict=True
    ):
        want = want[: want.index(EOS) + 1]
        assert row[: len(want)] == want


# -- bad input --------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"src_vocab_size": 0}, "src_vocab_size"),
        ({"hidden_size": 0}, "hidden_size"),
        ({"embed_size": 2.5}, "embed_size"),
        ({"attention": 1}, "attention"),
        ({"dropout": 1.0}, "dropout"),
        ({"dropout": "0.1"}, "dropout must be a number"),
        ({"eos_id": 13}, "eos_id"),
        ({"pad_id": 11}, "pad_id"),
        ({"attention_size": -1}, "attention_size"),
    ],
)
def test_config_validation(kwargs, match):
    base = {"src_vocab_size": SRC_V, "tgt_vocab_size": TGT_V}
    with pytest.raises((ValueError, TypeError), match=match):
        rnn.RNNSeq2SeqConfig(**{**base, **kwargs})


def test_config_is_frozen():
    config = rnn.RNNSeq2SeqConfig(SRC_V, TGT_V)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.hidden_size = 3  # type: ignore[misc]
    with pytest.raises(TypeError, match="config"):
        rnn.RNNSeq2Seq({"src_vocab_size": SRC_V})  # type: ignore[arg-type]


def test_bad_inputs_raise():
    model = _model()
    src, lens, tgt_in = _batch()
    with pytest.raises(ValueError, match="token id 11 in src"):
        model(src.masked_fill(src == src[0, 0], SRC_V), lens, tgt_in)
    with pytest.raises(ValueError, match="tgt_in"):
        model(src, lens, tgt_in.fill_(TGT_V))
    _, _, tgt_in = _batch()
    with pytest.raises(TypeError, match="src"):
        model(src.double(), lens, tgt_in)
    with pytest.raises(ValueError, match="src must be 2-D"):
        model(src[0], lens, tgt_in)
    with pytest.raises(ValueError, match="tgt_in has no tokens"):
        model(src, lens, tgt_in[:, :0])
    with pytest.raises(ValueError, match="batch size"):
        model(src, lens, tgt_in[:2])
    with pytest.raises(ValueError, match="src_mask"):
        model(src, lens[:2], tgt_in)
    with pytest.raises(ValueError, match=r"1 to S=5 .* lengths \[15,"):
        model(src, lens + 10, tgt_in)  # longer than the source
    with pytest.raises(ValueError, match=r"1 to S=5 .* lengths \[5, 0, 1\]"):
        model(src, torch.tensor([5, 0, 1]), tgt_in)  # a row of no token
    holes = torch.tensor([[True, False, True, False, False]] * 3)
    with pytest.raises(ValueError, match="right-padded"):
        model(src, holes, tgt_in)
    with pytest.raises(TypeError, match="src_mask must be a Tensor"):
        model(src, [5, 3, 1], tgt_in)
    with pytest.raises(TypeError, match="src_mask must hold bools or lengths"):
        model(src, lens.float(), tgt_in)
    with pytest.raises(ValueError, match="max_len=0"):
        model.greedy_decode(src, lens, max_len=0)
    with pytest.raises(TypeError, match="max_len must be an int"):
        model.greedy_decode(src, lens, max_len="5")
