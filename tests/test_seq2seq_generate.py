"""Seq2SeqTransformer decoding: the KV cache, greedy decoding, beam search."""

from __future__ import annotations

import pytest
import torch

from transformer_book.analysis import capture_attention
from transformer_book.decoding import beam_search
from transformer_book.models.seq2seq import (
    Seq2SeqTransformer,
    Seq2SeqTransformerConfig,
)

PAD, BOS, EOS = 0, 1, 2


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny models: one thread is faster than several sharing busy cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _model(**kwargs) -> Seq2SeqTransformer:
    torch.manual_seed(0)
    config = Seq2SeqTransformerConfig(
        src_vocab_size=kwargs.pop("src_vocab_size", 11),
        tgt_vocab_size=kwargs.pop("tgt_vocab_size", 9),
        max_seq_len=kwargs.pop("max_seq_len", 16),
        d_model=16,
        num_heads=2,
        num_encoder_layers=2,
        num_decoder_layers=2,
        d_ff=32,
        **kwargs,
    )
    return Seq2SeqTransformer(config).double().eval()


def _sources() -> torch.Tensor:
    """Three sources of lengths 6, 4 and 2, padded with PAD."""
    g = torch.Generator().manual_seed(1)
    src = torch.randint(3, 11, (3, 6), generator=g)
    src[1, 4:] = PAD
    src[2, 2:] = PAD
    return src


def _trim(row: list[int]) -> list[int]:
    """A generated row up to and including its first EOS."""
    return row[: row.index(EOS) + 1] if EOS in row else row


# --------------------------------------------------------------------------
# The decoder's cache
# --------------------------------------------------------------------------


@pytest.mark.parametrize("rotary", [False, True])
def test_cached_decoding_gives_the_logits_of_the_full_pass(rotary):
    model = _model(rotary=rotary)
    src = _sources()
    g = torch.Generator().manual_seed(2)
    tgt = torch.randint(3, 9, (3, 7), generator=g)
    tgt[:, 0] = BOS
    with torch.no_grad():
        memory, src_keep = model.encode(src)
        full = model.decode(tgt, memory, src_keep)
        cache = model.make_cache()
        # Three tokens at once, then one at a time.
        parts = [model.decode(tgt[:, :3], memory, src_keep, cache=cache)]
        for t in range(3, 7):
            parts.append(
                model.decode(tgt[:, t : t + 1], memory, src_keep, cache=cache)
            )
    assert len(cache[0]) == 7 and cache[1].offset == 7
    torch.testing.assert_close(torch.cat(parts, 1), full)


def test_decode_returns_cross_attention_over_the_source():
    model = _model()
    src = _sources()
    tgt = torch.tensor([[BOS, 3, 4]] * 3)
    with torch.no_grad():
        memory, src_keep = model.encode(src)
        with capture_attention(model) as weights:
            logits = model.decode(tgt, memory, src_keep)
        plain = model.decode(tgt, memory, src_keep)
    torch.testing.assert_close(logits, plain)  # explicit vs fused path
    assert len(weights) == 2 * 2  # per decoder layer: self, then cross
    self_w, cross_w = weights[-2:]
    assert self_w.shape == (3, 2, 3, 3) and cross_w.shape == (3, 2, 3, 6)
    torch.testing.assert_close(cross_w.sum(-1), torch.ones(3, 2, 3,
                                                           dtype=cross_w.dtype))
    assert (cross_w[2, :, :, 2:] == 0).all()  # source padding is never read
    assert (self_w.triu(1) == 0).all()  # causal


def test_decode_rejects_a_bad_cache():
    model = _model()
    src = _sources()
    tgt = torch.tensor([[BOS]] * 3)
    memory, src_keep = model.encode(src)
    with pytest.raises(ValueError, match="cache has 1 entries"):
        model.decode(tgt, memory, src_keep, cache=model.make_cache()[:1])
    with pytest.raises(TypeError, match="cache must be a sequence"):
        model.decode(tgt, memory, src_keep, cache=model.make_cache()[0])
    cache = model.make_cache()
    long = torch.full((3, 16), 3)
    with torch.no_grad():
        model.decode(long, memory, src_keep, cache=cache)
        with pytest.raises(ValueError, match="max_seq_len=16"):
            model.decode(tgt, memory, src_keep, cache=cache)


def test_rotary_rotates_every_self_attention_and_no_cross_attention():
    model = _model(rotary=True)
    layers = [*model.transformer.encoder.layers,
              *model.transformer.decoder.layers]
    rotaries = {id(layer.self_attn.sublayer.rotary) for layer in layers}
    assert None not in {layer.self_attn.sublayer.rotary for layer in layers}
    assert len(rotaries) == 1  # one module, shared
    assert all(layer.cross_attn.sublayer.rotary is None
               for layer in model.transformer.decoder.layers)
    plain = _model()
    assert sum(p.numel() for p in model.parameters()) == sum(
        p.numel() for p in plain.parameters())
    # Same seed, same weights: only the rotation changes the logits.
    src = _sources()
    tgt = torch.tensor([[BOS, 3, 4, 5]] * 3)
    with torch.no_grad():
        assert not torch.allclose(model(src, tgt), plain(src, tgt))
        # Without the shared module the two models are the same function.
        for layer in layers:
            layer.self_attn.sublayer.rotary = None
        torch.testing.assert_close(model(src, tgt), plain(src, tgt))


# --------------------------------------------------------------------------
# generate and beam_search
# --------------------------------------------------------------------------


@pytest.mark.parametrize("rotary", [False, True])
def test_cached_greedy_equals_uncached_greedy(rotary):
    model = _model(rotary=rotary)
    src = _sources()
    cached = model.generate(src, 12, bos_id=BOS, eos_id=EOS)
    uncached = model.generate(src, 12, bos_id=BOS, eos_id=EOS,
                              use_cache=False)
    assert torch.equal(cached, uncached)
    assert cached.shape[0] == 3 and cached.shape[1] <= 12


def test_greedy_feeds_back_the_argmax_and_pads_after_eos():
    model = _model()
    src = _sources()
    out = model.generate(src, 12, bos_id=BOS, eos_id=EOS)
    with torch.no_grad():
        for i, row in enumerate(out.tolist()):
            tokens = _trim(row)
            assert all(t == PAD for t in row[len(tokens):])
            # Teacher forcing on the output picks the same tokens.
            tgt = torch.tensor([[BOS] + tokens[:-1]])
            forced = model(src[i : i + 1], tgt)[0].argmax(-1).tolist()
            assert forced == tokens


def test_beam_width_one_equals_greedy():
    model = _model()
    src = _sources()
    greedy = model.generate(src, 12, bos_id=BOS, eos_id=EOS)
    width_one = model.generate(src, 12, bos_id=BOS, eos_id=EOS,
                               beam_width=1)
    assert torch.equal(greedy, width_one)
    for i in range(3):
        row = src[i][src[i] != PAD]
        for use_cache in (True, False):
            (tokens, _), = model.beam_search(
                row, 12, bos_id=BOS, eos_id=EOS, beam_width=1,
                use_cache=use_cache,
            )
            assert tokens.tolist() == _trim(greedy[i].tolist())


@pytest.mark.parametrize("rotary", [False, True])
def test_cached_beam_search_equals_uncached_and_the_search_itself(rotary):
    model = _model(rotary=rotary)
    src = _sources()
    for i in range(3):
        row = src[i][src[i] != PAD]
        cached = model.beam_search(row, 10, bos_id=BOS, eos_id=EOS,
                                   beam_width=4, length_penalty=0.5)
        uncached = model.beam_search(row, 10, bos_id=BOS, eos_id=EOS,
                                     beam_width=4, length_penalty=0.5,
                                     use_cache=False)
        assert len(cached) == 4
        for (a, score_a), (b, score_b) in zip(cached, uncached, strict=True):
            assert torch.equal(a, b)
            assert score_a == pytest.approx(score_b, abs=1e-9)

        # The same as decoding.beam_search over the full forward pass.
        def log_probs_fn(tokens, parents, row=row):
            src_rows = row[None].expand(tokens.shape[0], -1)
            return model(src_rows, tokens)[:, -1].log_softmax(-1)

        with torch.no_grad():
            direct = beam_search(log_probs_fn, torch.tensor([BOS]),
                                 beam_width=4, max_new_tokens=10,
                                 eos_id=EOS, length_penalty=0.5)
        assert [t.tolist() for t, _ in direct] == [
            t.tolist() for t, _ in cached
        ]


def test_cached_beam_search_feeds_each_hypothesis_one_token_per_step():
    model = _model()
    widths, cached = [], []
    decode = model.decode

    def recording(tgt, memory, src_keep, *, cache=None):
        widths.append(tgt.shape[1])
        cached.append(len(cache[0]))
        return decode(tgt, memory, src_keep, cache=cache)

    model.decode = recording  # the instance attribute shadows the method
    hyps = model.beam_search(torch.tensor([3, 4, 5]), 6, bos_id=BOS,
                             beam_width=3)
    # No eos: six steps, each reading the cache of the step before (its
    # rows reordered to the surviving beams) and feeding one new token.
    assert widths == [1] * 6 and cached == list(range(6))
    assert len(hyps) == 3 and all(len(tokens) == 6 for tokens, _ in hyps)


def test_generate_with_beams_keeps_each_rows_best_hypothesis():
    model = _model()
    src = _sources()
    out = model.generate(src, 10, bos_id=BOS, eos_id=EOS, beam_width=3)
    for i in range(3):
        best, _ = model.beam_search(src[i][src[i] != PAD], 10, bos_id=BOS,
                                    eos_id=EOS, beam_width=3)[0]
        assert _trim(out[i].tolist()) == best.tolist()


def test_a_wide_beam_scores_at_least_as_well_as_greedy():
    model = _model(tgt_vocab_size=5)
    row = torch.tensor([3, 4, 5, 6])
    greedy, greedy_score = model.beam_search(row, 6, bos_id=BOS,
                                             eos_id=EOS, beam_width=1)[0]
    _, wide_score = model.beam_search(row, 6, bos_id=BOS, eos_id=EOS,
                                      beam_width=8)[0]
    assert wide_score >= greedy_score - 1e-12


def test_generate_restores_training_mode():
    model = _model(dropout=0.1).train()
    model.generate(_sources(), 4, bos_id=BOS, eos_id=EOS)
    assert model.training


def test_zero_new_tokens_gives_an_empty_translation():
    out = _model().generate(_sources(), 0, bos_id=BOS, eos_id=EOS)
    assert out.shape == (3, 0)


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        ({"max_new_tokens": -1}, ValueError, "max_new_tokens"),
        ({"max_new_tokens": 17}, ValueError, "max_new_tokens"),
        ({"max_new_tokens": 2.0}, TypeError, "max_new_tokens"),
        ({"bos_id": 9}, ValueError, "bos_id"),
        ({"bos_id": -1}, ValueError, "bos_id"),
        ({"eos_id": 9}, ValueError, "eos_id"),
        ({"beam_width": 0}, ValueError, "beam_width"),
        ({"length_penalty": -0.5}, ValueError, "length_penalty"),
        ({"use_cache": 1}, TypeError, "use_cache"),
        ({"src": torch.tensor([[3, 11]])}, ValueError, "src"),
        ({"src": torch.tensor([3, 4])}, ValueError, "src"),
        ({"src": torch.tensor([[3.0, 4.0]])}, TypeError, "src"),
    ],
)
def test_generate_rejects_bad_input_naming_the_argument(kwargs, error, name):
    args = {"src": _sources(), "max_new_tokens": 4, "bos_id": BOS,
            "eos_id": EOS, **kwargs}
    model = _model()
    with pytest.raises(error, match=name):
        model.generate(args.pop("src"), args.pop("max_new_tokens"), **args)


def test_beam_search_takes_one_source():
    model = _model()
    with pytest.raises(ValueError, match="src"):
        model.beam_search(_sources(), 4, bos_id=BOS, beam_width=2)
    with pytest.raises(ValueError, match="beam_width"):
        model.beam_search(torch.tensor([3, 4]), 4, bos_id=BOS, beam_width=0)
