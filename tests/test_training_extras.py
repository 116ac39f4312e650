"""fit()'s mixed precision, throughput, label smoothing and tokenizer."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from transformer_book import checkpoint, training
from transformer_book.models import GPT, GPTConfig
from transformer_book.tokenization import CharTokenizer, load_tokenizer


def _setup(seed: int = 0):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    x = torch.randn(32, 4)
    y = torch.randint(0, 3, (32,))
    batches = [(x[i : i + 8], y[i : i + 8]) for i in range(0, 32, 8)]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    return model, batches, optimizer


def _step_for(model, seen):
    def step(batch):
        inputs, targets = batch
        logits = model(inputs)
        seen.append(logits.dtype)
        return training.cross_entropy(logits, targets)

    return step


@pytest.mark.parametrize(
    ("autocast", "dtype"),
    [(None, torch.float32), (False, torch.float32), (True, torch.bfloat16)],
)
def test_autocast_default_is_off_on_cpu(autocast, dtype):
    model, batches, optimizer = _setup()
    seen: list[torch.dtype] = []
    history = training.fit(
        _step_for(model, seen), batches, optimizer, autocast=autocast
    )
    assert set(seen) == {dtype}
    # The weights stay float32 whatever the autocast.
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert all(math.isfinite(loss) for loss in history.losses)


def test_autocast_rejects_non_bool():
    model, batches, optimizer = _setup()
    with pytest.raises(TypeError, match="autocast"):
        training.fit(
            _step_for(model, []), batches, optimizer, autocast="bf16"
        )


@pytest.mark.parametrize("tokens", [8, lambda batch: len(batch[0])])
def test_tokens_per_s_recorded_per_step(tokens):
    model, batches, optimizer = _setup()
    history = training.fit(
        _step_for(model, []), batches, optimizer, tokens_per_batch=tokens
    )
    rates = history.metrics["tokens_per_s"]
    assert len(rates) == len(history.steps) == 4
    assert all(rate > 0 for rate in rates)


def test_tokens_per_batch_is_checked():
    model, batches, optimizer = _setup()
    with pytest.raises(ValueError, match="tokens_per_batch"):
        training.fit(
            _step_for(model, []), batches, optimizer, tokens_per_batch=0
        )
    with pytest.raises(ValueError, match=r"tokens_per_batch\(batch\)"):
        training.fit(
            _step_for(model, []),
            batches,
            optimizer,
            tokens_per_batch=lambda batch: -1,
        )


def test_cross_entropy_matches_torch_with_smoothing_and_padding():
    torch.manual_seed(1)
    logits = torch.randn(3, 5, 7, dtype=torch.float64)
    targets = torch.randint(0, 7, (3, 5))
    targets[0, :2] = -100
    got = training.cross_entropy(logits, targets, label_smoothing=0.1)
    want = nn.functional.cross_entropy(
        logits.transpose(1, 2), targets, label_smoothing=0.1
    )
    torch.testing.assert_close(got, want)
    # Smoothing raises the loss of a confident, correct prediction.
    sharp = torch.tensor([[10.0, 0.0, 0.0]])
    target = torch.tensor([0])
    assert training.cross_entropy(
        sharp, target, label_smoothing=0.1
    ) > training.cross_entropy(sharp, target)


def test_cross_entropy_bad_input():
    logits = torch.randn(2, 4, 5)
    with pytest.raises(ValueError, match="targets.shape"):
        training.cross_entropy(logits, torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="label_smoothing"):
        training.cross_entropy(
            logits, torch.zeros(2, 4, dtype=torch.long), label_smoothing=1.0
        )


def test_checkpoint_saves_config_and_tokenizer(tmp_path):
    text = "hello world, hello transformer"
    tokenizer = CharTokenizer().train(text)
    ids = torch.tensor([tokenizer.encode(text)])
    torch.manual_seed(0)
    config = GPTConfig(
        vocab_size=tokenizer.vocab_size,
        max_seq_len=16,
        d_model=16,
        num_heads=2,
        num_layers=1,
    )
    model = GPT(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    batches = [(ids[:, :16], ids[:, 1:17])]

    def step(batch):
        idx, targets = batch
        _, loss = model(idx, targets)
        return loss

    path = tmp_path / "run" / "gpt.pt"
    training.fit(
        step,
        batches,
        optimizer,
        epochs=3,
        model=model,
        checkpoint=path,
        tokenizer=tokenizer,
    )
    # Three lines: the model, its tokenizer, generation.
    restored = GPT.from_checkpoint(path)
    loaded = load_tokenizer(checkpoint.tokenizer_path(path))
    out = restored.generate(ids[:, :4], 5, temperature=0)
    assert loaded.encode(text) == tokenizer.encode(text)
    assert out.shape == (1, 9)
    model.eval()
    expected = model.generate(ids[:, :4], 5, temperature=0)
    torch.testing.assert_close(out, expected)


def test_tokenizer_needs_checkpoint():
    model, batches, optimizer = _setup()
    with pytest.raises(ValueError, match="tokenizer needs a checkpoint"):
        training.fit(
            _step_for(model, []), batches, optimizer, tokenizer=object()
        )


def test_load_checkpoint_of_other_config_is_a_clear_error(tmp_path):
    model, _, _ = _setup()
    path = checkpoint.save_checkpoint(tmp_path / "m.pt", model=model)
    other = nn.Sequential(nn.Linear(4, 9), nn.Tanh(), nn.Linear(9, 3))
    with pytest.raises(ValueError, match="do not fit Sequential"):
        checkpoint.load_checkpoint(path, model=other)


def test_tokenizer_path():
    assert checkpoint.tokenizer_path("a/b.pt").name == "b.tokenizer.json"
    with pytest.raises(TypeError, match="checkpoint"):
        checkpoint.tokenizer_path(3)
