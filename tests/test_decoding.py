"""Decoding: top-k and top-p filters, sampling, the generate loop, beams."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from transformer_book.decoding import (
    beam_search,
    generate,
    sample,
    top_k_filter,
    top_p_filter,
)
from transformer_book.models.gpt import GPT, GPTConfig
from transformer_book.models.seq2seq import (
    Seq2SeqTransformer,
    Seq2SeqTransformerConfig,
)

# --------------------------------------------------------------------------
# Filters
# --------------------------------------------------------------------------


def test_top_k_keeps_the_k_largest():
    logits = torch.randn(4, 11)
    kept = top_k_filter(logits, 3)
    finite = kept.isfinite()
    assert finite.sum(-1).tolist() == [3, 3, 3, 3]
    top3 = logits.topk(3).indices
    assert finite.gather(-1, top3).all()
    assert torch.equal(kept[finite], logits[finite])
    assert torch.equal(top_k_filter(logits, 50), logits)


def _smallest_nucleus(probs: list[float], p: float) -> set[int]:
    """The naive definition: add tokens, most likely first, until >= p."""
    order = sorted(range(len(probs)), key=lambda i: -probs[i])
    kept, mass = set(), 0.0
    for i in order:
        kept.add(i)
        mass += probs[i]
        if mass >= p:
            break
    return kept


def test_top_p_keeps_the_smallest_set_reaching_p():
    torch.manual_seed(1)
    for p in (0.1, 0.5, 0.75, 0.9, 0.99):
        logits = torch.randn(20, 9, dtype=torch.float64) * 2
        kept = top_p_filter(logits, p).isfinite()
        for row, mask in zip(logits, kept, strict=True):
            probs = row.softmax(-1).tolist()
            expected = _smallest_nucleus(probs, p)
            assert set(mask.nonzero().flatten().tolist()) == expected
            assert sum(probs[i] for i in expected) >= p


def test_top_p_exact_boundary_and_most_likely_token():
    probs = torch.tensor([0.5, 0.3, 0.15, 0.05], dtype=torch.float64)
    kept = top_p_filter(probs.log(), 0.79).isfinite()
    assert kept.tolist() == [True, True, False, False]  # 0.5 + 0.3 >= p
    kept = top_p_filter(probs.log(), 0.81).isfinite()
    assert kept.tolist() == [True, True, True, False]
    # A tiny p still keeps the most likely token, wherever it is.
    logits = torch.tensor([[0.0, 5.0, 1.0], [3.0, 0.0, 0.0]])
    kept = top_p_filter(logits, 1e-9).isfinite()
    assert kept.tolist() == [[False, True, False], [True, False, False]]
    assert torch.equal(top_p_filter(logits, 1.0), logits)


def test_filter_bad_inputs():
    logits = torch.randn(2, 5)
    for bad in (0, -0.1, 1.5, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="p="):
            top_p_filter(logits, bad)
    with pytest.raises(TypeError, match="p must be a number"):
        top_p_filter(logits, "0.5")
    with pytest.raises(ValueError, match="k=0"):
        top_k_filter(logits, 0)
    with pytest.raises(TypeError, match="k must be an int"):
        top_k_filter(logits, 2.0)
    with pytest.raises(TypeError, match="floating"):
        top_k_filter(torch.ones(2, 5, dtype=torch.long), 2)


# --------------------------------------------------------------------------
# Sampling
# --------------------------------------------------------------------------


def test_temperature_zero_is_argmax():
    logits = torch.randn(6, 10)
    assert torch.equal(sample(logits, temperature=0), logits.argmax(-1))
    assert torch.equal(
        sample(logits, temperature=0, top_k=3, top_p=0.2), logits.argmax(-1)
    )
    assert torch.equal(sample(logits, top_k=1), logits.argmax(-1))


def test_sample_draws_only_kept_tokens_and_is_reproducible():
    logits = torch.randn(1, 8).expand(2000, 8)
    gen = torch.Generator().manual_seed(0)
    draws = sample(logits, top_k=3, generator=gen)
    assert set(draws.tolist()) == set(logits[0].topk(3).indices.tolist())
    again = sample(logits, top_k=3,
                   generator=torch.Generator().manual_seed(0))
    assert torch.equal(draws, sample(
        logits, top_k=3, generator=torch.Generator().manual_seed(0)))
    assert torch.equal(draws, again)
    assert draws.shape == (2000,) and draws.dtype == torch.int64


def test_sample_frequencies_follow_the_tempered_distribution():
    logits = torch.tensor([2.0, 1.0, 0.0]).expand(20000, 3)
    gen = torch.Generator().manual_seed(1)
    for temperature in (0.5, 1.0, 2.0):
        draws = sample(logits, temperature=temperature, generator=gen)
        freq = torch.bincount(draws, minlength=3).double() / 20000
        expected = (logits[0].double() / temperature).softmax(-1)
        torch.testing.assert_close(freq, expected, atol=0.02, rtol=0)


def test_temperature_is_applied_before_top_p():
    # At temperature 1 the first token holds 0.88 > 0.8 of the mass and
    # top-p keeps it alone; at temperature 4 it holds about 0.62, and the
    # nucleus needs the second token too.
    logits = torch.tensor([[2.0, 0.0, -9.0]]).expand(500, 3)
    gen = torch.Generator().manual_seed(2)
    cold = sample(logits, top_p=0.8, generator=gen)
    hot = sample(logits, temperature=4.0, top_p=0.8, generator=gen)
    assert set(cold.tolist()) == {0}
    assert set(hot.tolist()) == {0, 1}


def test_sample_bad_inputs():
    logits = torch.randn(2, 5)
    with pytest.raises(ValueError, match="top_p"):
        sample(logits, top_p=0)
    with pytest.raises(ValueError, match="top_p"):
        sample(logits, top_p=1.01)
    with pytest.raises(ValueError, match="top_k=0"):
        sample(logits, top_k=0)
    with pytest.raises(ValueError, match="temperature"):
        sample(logits, temperature=-0.5)
    with pytest.raises(ValueError, match="2-D"):
        sample(torch.randn(5))
    with pytest.raises(TypeError, match="floating"):
        sample(torch.ones(2, 5, dtype=torch.long))


# --------------------------------------------------------------------------
# Beam search
# --------------------------------------------------------------------------

EOS = 0


def _random_model(vocab_size: int, seed: int):
    """A deterministic model over (previous two tokens) -> next token."""
    gen = torch.Generator().manual_seed(seed)
    table = (torch.randn(vocab_size, vocab_size, vocab_size,
                         generator=gen, dtype=torch.float64) * 2)
    table = table.log_softmax(-1)

    def log_probs_fn(tokens: torch.Tensor, parents=None) -> torch.Tensor:
        prev2 = tokens[:, -2] if tokens.shape[1] > 1 else tokens[:, -1]
        return table[prev2, tokens[:, -1]]

    return log_probs_fn


def _brute_force(log_probs_fn, prefix, max_new_tokens, eos_id, alpha):
    """Every continuation (stopping at eos), scored; the best one."""
    vocab = log_probs_fn(prefix[None]).shape[1]
    best = None
    for n in range(1, max_new_tokens + 1):
        for seq in itertools.product(range(vocab), repeat=n):
            if eos_id in seq[:-1]:
                continue  # it ended earlier
            if n < max_new_tokens and seq[-1] != eos_id:
                continue  # it would go on
            tokens = torch.cat((prefix, torch.tensor(seq)))
            total = sum(
                float(log_probs_fn(tokens[None, : len(prefix) + i])[0, t])
                for i, t in enumerate(seq)
            )
            score = total / n**alpha
            if best is None or score > best[1]:
                best = (list(seq), score)
    return best


def _greedy(log_probs_fn, prefix, max_new_tokens, eos_id):
    tokens, total = prefix.clone(), 0.0
    for _ in range(max_new_tokens):
        lp = log_probs_fn(tokens[None])[0]
        t = int(lp.argmax())
        total += float(lp[t])
        tokens = torch.cat((tokens, torch.tensor([t])))
        if t == eos_id:
            break
    return tokens[len(prefix):].tolist(), total


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("eos_id", [None, EOS])
def test_beam_width_one_is_greedy(seed, eos_id):
    fn = _random_model(5, seed)
    prefix = torch.tensor([1, 2])
    (tokens, score), = beam_search(
        fn, prefix, beam_width=1, max_new_tokens=8, eos_id=eos_id
    )
    expected, total = _greedy(fn, prefix, 8, eos_id)
    assert tokens.tolist() == expected
    assert score == pytest.approx(total)
    # The generate loop at temperature 0 picks the same tokens.
    out = generate(fn, prefix[None], 8, temperature=0, eos_id=eos_id)
    assert out[0, 2:].tolist() == expected


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
@pytest.mark.parametrize("seed", range(4))
def test_wide_beam_finds_the_most_likely_sequence(alpha, seed):
    fn = _random_model(3, seed)
    prefix = torch.tensor([2])
    expected, best = _brute_force(fn, prefix, 4, EOS, alpha)
    width = 3**4  # at least every possible continuation
    found = beam_search(fn, prefix, beam_width=width, max_new_tokens=4,
                        eos_id=EOS, length_penalty=alpha)
    assert found[0][0].tolist() == expected
    assert found[0][1] == pytest.approx(best)
    scores = [s for _, s in found]
    assert scores == sorted(scores, reverse=True)


def test_beam_beats_greedy_on_a_hand_made_distribution():
    # From token 2: "1" is likelier (0.6) than "0" (0.4), but after "1"
    # every next token has 0.5, while after "0" token 1 has 0.95.
    table = torch.tensor(
        [[0.025, 0.95, 0.025], [0.5, 0.25, 0.25], [0.4, 0.6, 0.0]],
        dtype=torch.float64,
    ).log()

    def fn(tokens, parents=None):
        return table[tokens[:, -1]]

    prefix = torch.tensor([2])
    greedy = generate(fn, prefix[None], 2, temperature=0)[0, 1:]
    assert greedy.tolist() == [1, 0]  # 0.6 * 0.5 = 0.30
    hyps = beam_search(fn, prefix, beam_width=2, max_new_tokens=2)
    assert hyps[0][0].tolist() == [0, 1]  # 0.4 * 0.95 = 0.38
    assert hyps[0][1] == pytest.approx(math.log(0.38))
    assert len(hyps) == 2


def test_length_penalty_formula_and_eos_handling():
    # Token 0 is eos. From the start: eos 0.5, token 1 0.5; after 1, token
    # 1 again with 0.9 (eos 0.1).
    table = torch.tensor(
        [[1.0, 0.0], [0.1, 0.9]], dtype=torch.float64
    ).log()
    start = torch.tensor([[0.5, 0.5]], dtype=torch.float64).log()

    def fn(tokens, parents):
        if tokens.shape[1] == 1:
            return start.expand(tokens.shape[0], 2)
        return table[tokens[:, -1]]

    prefix = torch.tensor([1])
    plain = beam_search(fn, prefix, beam_width=4, max_new_tokens=3,
                        eos_id=0)
    results = {tuple(t.tolist()): s for t, s in plain}
    # Ended at eos (kept as last token), and open at max_new_tokens.
    assert results[(0,)] == pytest.approx(math.log(0.5))
    assert results[(1, 0)] == pytest.approx(math.log(0.05))
    assert results[(1, 1, 1)] == pytest.approx(math.log(0.5 * 0.81))
    assert plain[0][0].tolist() == [0]  # alpha = 0 favours the short one
    mean = beam_search(fn, prefix, beam_width=4, max_new_tokens=3,
                       eos_id=0, length_penalty=1.0)
    results = {tuple(t.tolist()): s for t, s in mean}
    assert results[(1, 1, 1)] == pytest.approx(math.log(0.405) / 3)
    assert results[(1, 0)] == pytest.approx(math.log(0.05) / 2)
    assert mean[0][0].tolist() == [1, 1, 1]  # per token it is likelier
    # Nothing follows eos in a hypothesis.
    for tokens, _ in plain + mean:
        assert EOS not in tokens[:-1].tolist()


def test_beam_search_edge_cases_and_bad_inputs():
    fn = _random_model(4, 0)
    prefix = torch.tensor([1])
    (empty, score), = beam_search(fn, prefix, beam_width=3, max_new_tokens=0)
    assert empty.shape == (0,) and score == 0.0
    hyps = beam_search(fn, prefix, beam_width=50, max_new_tokens=1)
    assert len(hyps) == 4  # only four continuations exist
    with pytest.raises(ValueError, match="beam_width=0"):
        beam_search(fn, prefix, beam_width=0, max_new_tokens=2)
    with pytest.raises(ValueError, match="max_new_tokens=-1"):
        beam_search(fn, prefix, beam_width=2, max_new_tokens=-1)
    with pytest.raises(ValueError, match="length_penalty"):
        beam_search(fn, prefix, beam_width=2, max_new_tokens=2,
                    length_penalty=-1.0)
    with pytest.raises(ValueError, match="eos_id=9 is outside"):
        beam_search(fn, prefix, beam_width=2, max_new_tokens=2, eos_id=9)
    with pytest.raises(ValueError, match="1-D"):
        beam_search(fn, prefix[None], beam_width=2, max_new_tokens=2)
    with pytest.raises(TypeError, match="integer"):
        beam_search(fn, prefix.float(), beam_width=2, max_new_tokens=2)
    with pytest.raises(ValueError, match=r"\(beams, V\)"):
        beam_search(lambda t, p: torch.zeros(5, 4), prefix, beam_width=2,
                    max_new_tokens=2)


def test_gpt_greedy_generate_equals_width_one_beam():
    config = GPTConfig(vocab_size=11, max_seq_len=16, d_model=16,
                       num_heads=2, num_layers=2)
    model = GPT(config).double().eval()
    prompt = torch.tensor([3, 1, 4])

    def fn(tokens, parents):
        return model(tokens)[0][:, -1].log_softmax(-1)

    with torch.no_grad():
        (tokens, _), = beam_search(fn, prompt, beam_width=1,
                                   max_new_tokens=6)
    generated = model.generate(prompt[None], 6, temperature=0)
    assert torch.equal(generated[0, 3:], tokens)


def test_encoder_decoder_decodes_through_the_same_search():
    config = Seq2SeqTransformerConfig(
        src_vocab_size=9, tgt_vocab_size=7, max_seq_len=12, d_model=16,
        num_heads=2, num_encoder_layers=1, num_decoder_layers=1,
    )
    model = Seq2SeqTransformer(config).double().eval()
    bos, eos = 1, 2
    src = torch.tensor([[3, 4, 5, 6]])
    with torch.no_grad():
        memory, src_keep = model.encode(src)

        def fn(tgt, parents=None):
            beams = tgt.shape[0]
            logits = model.decode(
                tgt,
                memory.expand(beams, -1, -1),
                src_keep.expand(beams, -1, -1, -1),
            )
            return logits[:, -1].log_softmax(-1)

        tokens = generate(fn, torch.tensor([[bos]]), 8, temperature=0,
                          eos_id=eos)[0, 1:]
        # Teacher forcing on the greedy output picks the same tokens.
        tgt = torch.cat((torch.tensor([bos]), tokens))[None, :-1]
        assert torch.equal(model(src, tgt)[0].argmax(-1), tokens)
        hyps = beam_search(fn, torch.tensor([bos]), beam_width=3,
                           max_new_tokens=8, eos_id=eos)
        # Each score is the teacher-forced log-probability of its tokens.
        for new, score in hyps:
            tgt = torch.cat((torch.tensor([bos]), new))[None]
            log_probs = model(src, tgt[:, :-1]).log_softmax(-1)
            total = log_probs[0].gather(-1, new[:, None]).sum()
            assert score == pytest.approx(float(total))
            assert new[-1] == eos or len(new) == 8
    assert len(hyps) == 3


def test_beam_search_gives_each_hypothesis_its_parent_row():
    fn = _random_model(4, 3)
    calls = []

    def step(tokens, parents):
        calls.append((tokens, parents))
        return fn(tokens)

    beam_search(step, torch.tensor([1, 2]), beam_width=3, max_new_tokens=5,
                eos_id=EOS)
    assert calls[0][1].tolist() == [0]  # the prefix, one row
    for (before, _), (after, parents) in zip(calls, calls[1:], strict=False):
        assert parents.shape == (after.shape[0],)
        assert torch.equal(after[:, :-1], before[parents])


def test_generate_pads_after_eos_and_stops_when_every_row_ended():
    # Row 0 writes eos at once; row 1 counts up, reaching eos (5) later.
    def step(tokens):
        logits = torch.full((2, 6), -5.0)
        logits[0, 5] = 0.0
        logits[1, (tokens[1, -1] + 1).clamp(max=5)] = 0.0
        return logits

    prompt = torch.tensor([[0], [2]], dtype=torch.int32)
    out = generate(step, prompt, 10, temperature=0, eos_id=5, pad_id=4)
    assert out.tolist() == [[0, 5, 4, 4], [2, 3, 4, 5]]
    assert out.dtype == torch.int64
    out = generate(step, prompt, 2, temperature=0)  # no eos: every step
    assert out.tolist() == [[0, 5, 5], [2, 3, 4]]
    prompt = prompt.long()
    same = generate(step, prompt, 0)  # a new tensor, even with no step
    assert torch.equal(same, prompt) and same.data_ptr() != prompt.data_ptr()


def test_generate_samples_with_the_options_of_sample():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]])

    def step(tokens):
        return logits.expand(tokens.shape[0], -1)

    prompt = torch.zeros(500, 1, dtype=torch.long)
    out = generate(step, prompt, 2, top_k=2,
                   generator=torch.Generator().manual_seed(0))
    assert set(out[:, 1:].flatten().tolist()) == {0, 1}
    again = generate(step, prompt, 2, top_k=2,
                     generator=torch.Generator().manual_seed(0))
    assert torch.equal(out, again)
    for kwargs, error in [({"temperature": -1.0}, ValueError),
                          ({"top_k": 0}, ValueError),
                          ({"top_p": 1.5}, ValueError),
                          ({"max_new_tokens": -1}, ValueError),
                          ({"tokens": prompt.float()}, TypeError),
                          ({"tokens": prompt[:, 0]}, ValueError)]:
        name = next(iter(kwargs))
        args = {"tokens": prompt, "max_new_tokens": 2, **kwargs}
        with pytest.raises(error, match=name):
            generate(step, args.pop("tokens"), args.pop("max_new_tokens"),
                     **args)
