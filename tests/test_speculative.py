"""Speculative decoding: greedy equals the target's, samples follow it."""

from __future__ import annotations

import itertools

import pytest
import torch
from scipy import stats as scipy_stats
from torch import nn

from transformer_book.decoding import speculative_generate
from transformer_book.models.gpt import GPT, GPTConfig


def _gpt(seed: int, vocab_size: int = 11, **sizes: int | str) -> GPT:
    torch.manual_seed(seed)
    config = dict(vocab_size=vocab_size, max_seq_len=16, d_model=16,
                  num_heads=2, num_layers=2)
    return GPT(GPTConfig(**{**config, **sizes})).eval()


class Bigram(nn.Module):
    """A toy model without a config: logits ``table[last token]``."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.table = table  # (V, V)

    def forward(self, idx: torch.Tensor) -> tuple[torch.Tensor, None]:
        return self.table[idx], None  # (B, T) -> (B, T, V)


# --------------------------------------------------------------------------
# Greedy: the target's own greedy decoding, token for token
# --------------------------------------------------------------------------


@pytest.mark.parametrize("positional", ["learned", "rope"])
def test_greedy_equals_target_generate(positional, one_thread):
    target = _gpt(0, positional=positional)
    drafts = {  # itself (every token accepted), a small one, a shorter one
        "same": target,
        "small": _gpt(1, d_model=8, num_layers=1),
        "short": _gpt(2, max_seq_len=5, num_layers=1),
    }
    gen = torch.Generator().manual_seed(0)
    # Prompts short, at and past the window (16): the crops must agree.
    for length, (name, draft), k in itertools.product(
        (1, 14, 16, 19), drafts.items(), (1, 3, 8)
    ):
        idx = torch.randint(0, 11, (1, length), generator=gen)
        expected = target.generate(idx, 12, temperature=0.0)
        counts: list[int] = []
        out = speculative_generate(target, draft, idx, 12, k=k, stats=counts)
        assert out.dtype == torch.long and out.shape == (1, length + 12)
        assert torch.equal(out, expected), (length, name, k)
        assert len(counts) >= 12 / (k + 1) and max(counts) <= k
        if name == "same":  # every proposal kept: k + 1 tokens a call
            assert len(counts) == -(-12 // (k + 1)) or length < 16


def test_length_copy_and_training_mode_restored(one_thread):
    target, draft = _gpt(0), _gpt(1, num_layers=1)
    target.train()
    idx = torch.tensor([[3, 1, 4]])
    out = speculative_generate(target, draft, idx, 0)
    assert torch.equal(out, idx) and out.data_ptr() != idx.data_ptr()
    for n in (1, 2, 5, 9):
        out = speculative_generate(target, draft, idx, n, k=4,
                                   temperature=1.0)
        assert out.shape == (1, 3 + n) and torch.equal(out[:, :3], idx)
    assert target.training and not draft.training


# --------------------------------------------------------------------------
# Sampling: the tokens follow the target's distribution
# --------------------------------------------------------------------------


def test_samples_follow_the_target_distribution(one_thread):
    gen = torch.Generator().manual_seed(0)
    V, draws = 4, 3000
    target = Bigram(torch.randn(V, V, generator=gen) * 1.5)
    # A draft that is often wrong: it favours what the target does not.
    draft = Bigram(-target.table + torch.randn(V, V, generator=gen))
    temperature = 0.8
    p = (target.table.double() / temperature).softmax(-1)  # p(b | a)
    idx = torch.tensor([[2]])
    pairs = torch.zeros(V, V, dtype=torch.float64)
    counts: list[int] = []
    for _ in range(draws):
        out = speculative_generate(target, draft, idx, 2, k=2, stats=counts,
                                   temperature=temperature, generator=gen)
        pairs[out[0, 1], out[0, 2]] += 1
    expected = p[2][:, None] * p  # p(a | 2) p(b | a), (V, V)
    for observed, probs in ((pairs.sum(1), p[2]), (pairs.flatten(),
                                                   expected.flatten())):
        result = scipy_stats.chisquare(observed.double().numpy(),
                                       (probs * draws).numpy())
        assert result.pvalue > 1e-3, result
    assert 0 < sum(counts) < 2 * len(counts)  # some kept, some refused


def test_identical_draft_keeps_every_token():
    gen = torch.Generator().manual_seed(1)
    model = Bigram(torch.randn(5, 5, generator=gen))
    counts: list[int] = []
    speculative_generate(model, model, torch.tensor([[0]]), 20, k=4,
                         temperature=1.0, generator=gen, stats=counts)
    assert counts == [4, 4, 4, 4]  # 5 tokens a call, the last call cut


# --------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------


def test_bad_inputs():
    target, draft = _gpt(0), _gpt(1, num_layers=1)
    idx = torch.tensor([[1, 2]])
    with pytest.raises(ValueError, match="idx must be one prompt"):
        speculative_generate(target, draft, idx.repeat(2, 1), 3)
    with pytest.raises(ValueError, match="idx must be one prompt"):
        speculative_generate(target, draft, idx[:, :0], 3)
    with pytest.raises(TypeError, match="idx"):
        speculative_generate(target, draft, idx.float(), 3)
    with pytest.raises(ValueError, match="share the vocabulary"):
        speculative_generate(target, _gpt(1, vocab_size=12), idx, 3)
    with pytest.raises(ValueError, match="share the vocabulary"):
        speculative_generate(Bigram(torch.zeros(11, 11)),
                             Bigram(torch.zeros(11, 7)), idx, 3)
    for kwargs, match in (({"k": 0}, "k=0"), ({"k": 1.5}, "k must be"),
                          ({"temperature": -0.5}, "temperature"),
                          ({"temperature": float("nan")}, "temperature")):
        with pytest.raises((ValueError, TypeError), match=match):
            speculative_generate(target, draft, idx, 3, **kwargs)
    with pytest.raises(ValueError, match="max_new_tokens"):
        speculative_generate(target, draft, idx, -1)
