"""Faults around checkpoints: damage, permissions, leftovers, resumes.

Regression tests of issue 21 (defects 2, 3, 6, 7, 9, 10 and 14).
"""

from __future__ import annotations

import os
import random
import stat
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from transformer_book.checkpoint import load_checkpoint, save_checkpoint
from transformer_book.models.gpt import GPT, GPTConfig
from transformer_book.tokenization import CharTokenizer
from transformer_book.training import History, fit

posix_only = pytest.mark.skipif(os.name != "posix", reason="POSIX modes")


pytestmark = pytest.mark.usefixtures("one_thread")


def _seed_all(seed: int) -> None:
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)


def _small_checkpoint(path: Path) -> nn.Module:
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    save_checkpoint(path, model=model, step=3, extra={"note": "x"})
    return model


# --------------------------------------------------------------------------
# Defect 2: exact resume whichever global generator shuffles the batches
# --------------------------------------------------------------------------

N, BATCH = 12, 3


def _shuffled(source: str):
    g = torch.Generator().manual_seed(5)
    x, y = torch.randn(N, 4, generator=g), torch.randn(N, 1, generator=g)

    def batches(epoch: int):
        if source == "torch":
            order = torch.randperm(N).tolist()
        elif source == "numpy":
            order = np.random.permutation(N).tolist()
        else:
            order = list(range(N))
            random.shuffle(order)
        for i in range(0, N, BATCH):
            rows = order[i : i + BATCH]
            yield x[rows], y[rows]

    return batches


def _regression(seed: int):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.2), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)

    def step(batch):
        x, y = batch
        return F.mse_loss(model(x), y)

    return model, opt, step


@pytest.mark.parametrize("source", ["torch", "numpy", "python"])
def test_resume_is_exact_for_batches_shuffled_by_any_global_rng(
    tmp_path, source
):
    _seed_all(0)
    model, opt, step = _regression(0)
    full = fit(step, _shuffled(source), opt, model=model, epochs=3,
                 progress=False)
    final = {k: v.clone() for k, v in model.state_dict().items()}

    _seed_all(0)
    model, opt, step = _regression(0)
    path = tmp_path / "ckpt.pt"
    fit(step, _shuffled(source), opt, model=model, epochs=3,
          max_steps=5, checkpoint=path, progress=False)

    _seed_all(42)  # a different state: everything must come from disk
    model, opt, step = _regression(1)
    state = load_checkpoint(path, model=model, optimizer=opt)
    resumed = fit(step, _shuffled(source), opt, model=model, epochs=3,
                    resume=state, progress=False)
    assert resumed.losses == full.losses
    for name, value in model.state_dict().items():
        assert torch.equal(value, final[name]), name


# --------------------------------------------------------------------------
# Defect 3: a damaged checkpoint raises one clear ValueError
# --------------------------------------------------------------------------


def _load_error(path: Path) -> str:
    with pytest.raises(ValueError) as info:
        load_checkpoint(path, model=nn.Linear(4, 2))
    message = str(info.value)
    assert str(path) in message
    assert "weights_only=False" not in message
    return message


def test_truncated_checkpoint_is_a_clear_error(tmp_path):
    path = tmp_path / "ckpt.pt"
    _small_checkpoint(path)
    data = path.read_bytes()
    for size in (1, 100, len(data) // 2, len(data) - 1):
        path.write_bytes(data[:size])
        _load_error(path)


def test_empty_checkpoint_is_a_clear_error(tmp_path):
    path = tmp_path / "ckpt.pt"
    path.write_bytes(b"")
    assert "empty" in _load_error(path)


def test_random_bytes_are_a_clear_error(tmp_path):
    path = tmp_path / "ckpt.pt"
    rng = np.random.default_rng(0)
    for size in (10, 1000, 5000):
        path.write_bytes(rng.integers(0, 256, size, np.uint8).tobytes())
        _load_error(path)
    # A zip header followed by noise, as a damaged torch file starts.
    path.write_bytes(b"PK\x03\x04" + rng.bytes(3000))
    _load_error(path)


def test_files_that_are_not_checkpoints_are_a_clear_error(tmp_path):
    path = tmp_path / "other.pt"
    torch.save({"model": nn.Linear(4, 2).state_dict()}, path)
    _load_error(path)
    path.write_text('{"kind": "char"}', encoding="utf-8")
    _load_error(path)


def test_every_single_bit_flip_is_detected(tmp_path):
    path = tmp_path / "ckpt.pt"
    _small_checkpoint(path)
    data = path.read_bytes()
    flipped = tmp_path / "flipped.pt"
    # About 200 positions spread over the whole file, header to trailer,
    # plus the last 100 bytes (the checksum) one by one.
    positions = sorted(
        set(range(0, len(data), max(1, len(data) // 200)))
        | set(range(len(data) - 100, len(data)))
    )
    for pos in positions:
        damaged = bytearray(data)
        damaged[pos] ^= 1 << (pos % 8)
        flipped.write_bytes(bytes(damaged))
        _load_error(flipped)


def test_a_checkpoint_still_loads_with_plain_torch_load(tmp_path):
    path = tmp_path / "ckpt.pt"
    model = _small_checkpoint(path)
    state = torch.load(path, weights_only=True)
    assert state["step"] == 3 and state["extra"] == {"note": "x"}
    for name, value in model.state_dict().items():
        assert torch.equal(state["model"][name], value)
    # The verified loader reads it too.
    assert load_checkpoint(path, model=nn.Linear(4, 2))["step"] == 3


def test_missing_checkpoint_is_still_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_checkpoint(tmp_path / "missing.pt", model=nn.Linear(4, 2))
    with pytest.raises(FileNotFoundError):
        GPT.from_checkpoint(tmp_path / "missing.pt")


def test_gpt_from_checkpoint_gives_the_same_error(tmp_path):
    config = GPTConfig(10, 8, 16, 4, 1)
    torch.manual_seed(0)
    model = GPT(config)
    path = tmp_path / "gpt.pt"
    save_checkpoint(path, model=model, extra={"config": config.to_dict()})
    restored = GPT.from_checkpoint(path)
    for name, value in model.state_dict().items():
        assert torch.equal(restored.state_dict()[name], value)

    data = path.read_bytes()
    cases = {
        "truncated": data[: len(data) // 2],
        "empty": b"",
        "noise": np.random.default_rng(1).bytes(2000),
        "flip": data[:500] + bytes([data[500] ^ 4]) + data[501:],
    }
    for name, content in cases.items():
        path.write_bytes(content)
        with pytest.raises(ValueError) as info:
            GPT.from_checkpoint(path)
        assert str(info.value) == _load_error(path), name


# --------------------------------------------------------------------------
# Defect 6: saving over a file keeps its mode
# --------------------------------------------------------------------------


@posix_only
def test_save_checkpoint_keeps_the_mode_of_the_file_it_replaces(tmp_path):
    path = tmp_path / "ckpt.pt"
    _small_checkpoint(path)
    path.chmod(0o600)
    _small_checkpoint(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    path.chmod(0o640)
    _small_checkpoint(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


@posix_only
def test_tokenizer_save_keeps_the_mode_of_the_file_it_replaces(tmp_path):
    path = tmp_path / "tok.json"
    tokenizer = CharTokenizer().train("hello")
    tokenizer.save(path)
    path.chmod(0o600)
    tokenizer.save(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


# --------------------------------------------------------------------------
# Defect 7: a run that stops at an epoch's end records that epoch
# --------------------------------------------------------------------------


def _stepper():
    torch.manual_seed(0)
    model = nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(batch):
        return F.mse_loss(model(batch), batch.sum(-1, keepdim=True))

    return model, opt, step


@pytest.mark.parametrize("kind", ["list", "generator"])
def test_max_steps_at_an_epoch_boundary_records_the_epoch(kind):
    data = [torch.full((2, 2), float(i)) for i in range(3)]
    batches = data if kind == "list" else (lambda epoch: iter(data))
    model, opt, step = _stepper()
    history = fit(step, batches, opt, max_steps=6, eval_fn=lambda: 1.0,
                    progress=False)
    assert history.steps == [1, 2, 3, 4, 5, 6]
    assert len(history.epoch_losses) == 2
    assert history.epoch_losses[1] == pytest.approx(
        sum(history.losses[3:]) / 3
    )
    assert history.eval_steps == [3, 6]
    # Mid-epoch, nothing more is recorded.
    model, opt, step = _stepper()
    history = fit(step, batches, opt, max_steps=5, eval_fn=lambda: 1.0,
                    progress=False)
    assert len(history.epoch_losses) == 1 and history.eval_steps == [3]


def test_resume_after_a_stop_at_an_epoch_boundary(tmp_path):
    data = [torch.full((2, 2), float(i)) for i in range(3)]
    model, opt, step = _stepper()
    full = fit(step, data, opt, epochs=3, eval_fn=lambda: 1.0,
                 progress=False)
    model, opt, step = _stepper()
    path = tmp_path / "ckpt.pt"
    fit(step, data, opt, max_steps=3, eval_fn=lambda: 1.0,
          model=model, checkpoint=path, progress=False)
    state = load_checkpoint(path, model=model, optimizer=opt)
    assert (state["step"], state["epoch"]) == (3, 1)
    resumed = fit(step, data, opt, epochs=3, eval_fn=lambda: 1.0,
                    model=model, resume=state, progress=False)
    assert resumed.losses == full.losses
    assert resumed.epoch_losses == full.epoch_losses
    assert resumed.eval_steps == full.eval_steps == [3, 6, 9]


# --------------------------------------------------------------------------
# Defect 9: extra holds only what loads back
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ({"array": np.zeros(3)}, "array"),
        ({"path": Path("x")}, "path"),
        ({"obj": object()}, "obj"),
        ({"number": np.float64(1.0)}, "number"),
        ({"nested": {"deep": [1, Path("y")]}}, "deep"),
        ([1, {"fn": len}], "fn"),
    ],
)
def test_save_checkpoint_refuses_extra_that_cannot_load(tmp_path, extra, key):
    path = tmp_path / "ckpt.pt"
    with pytest.raises(TypeError, match=key):
        save_checkpoint(path, model=nn.Linear(2, 1), extra=extra)
    assert not path.exists()


def test_train_refuses_bad_extra_before_the_first_step(tmp_path):
    calls = []

    def step(batch):
        calls.append(batch)
        raise AssertionError("no step may run")

    model = nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(TypeError, match="where"):
        fit(step, [torch.ones(1, 2)], opt, model=model,
              checkpoint=tmp_path / "c.pt", extra={"where": Path("x")},
              progress=False)
    assert calls == []


def test_plain_extra_round_trips(tmp_path):
    extra = {
        "config": {"d_model": 8, "name": "gpt", "ratio": 0.5, "bias": True},
        "none": None,
        "tuple": (1, 2.5, "three"),
        "list": [[1, 2], {"a": b"bytes"}],
        "tensor": torch.arange(3),
        "dtype": torch.float16,
        "complex": 1 + 2j,
        3: "an int key",
    }
    path = save_checkpoint(tmp_path / "c.pt", model=nn.Linear(2, 1),
                           extra=extra)
    loaded = load_checkpoint(path, model=nn.Linear(2, 1))["extra"]
    assert torch.equal(loaded.pop("tensor"), extra.pop("tensor"))
    assert loaded == extra


# --------------------------------------------------------------------------
# Defect 10: float64 losses are kept in float64
# --------------------------------------------------------------------------


@pytest.mark.parametrize("accumulate", [1, 2])
def test_history_keeps_float64_losses(accumulate):
    p = nn.Parameter(torch.zeros((), dtype=torch.float64))
    opt = torch.optim.SGD([p], lr=0.0)

    def step(batch):
        return p * 0 + torch.tensor(1 / 3, dtype=torch.float64)

    batch = [0] * accumulate if accumulate > 1 else 0
    history = fit(step, [batch], opt, accumulate=accumulate,
                    progress=False)
    assert history.losses == [1 / 3]
    assert isinstance(History().losses, list)


# --------------------------------------------------------------------------
# Defect 14: stale temporary files of a killed save are removed
# --------------------------------------------------------------------------


def test_a_save_removes_stale_temporary_files_of_its_target(tmp_path):
    path = tmp_path / "ckpt.pt"
    stale = tmp_path / ".ckpt.pt.0123456789ab.tmp"
    stale.write_bytes(b"half a checkpoint")
    others = [
        tmp_path / ".other.pt.0123456789ab.tmp",  # another target's
        tmp_path / ".ckpt.pt.backup.tmp",  # not a name a save makes
        tmp_path / "ckpt.pt.0123456789ab.tmp",
    ]
    for other in others:
        other.write_bytes(b"keep")
    _small_checkpoint(path)
    assert not stale.exists()
    assert all(other.read_bytes() == b"keep" for other in others)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [path.name] + [o.name for o in others]
    )
    # Tokenizers (and every other atomic write) clean up the same way.
    tok = tmp_path / "tok.json"
    stale = tmp_path / ".tok.json.abcdefabcdef.tmp"
    stale.write_bytes(b"{")
    CharTokenizer().train("ab").save(tok)
    assert not stale.exists()


@pytest.mark.skipif(os.name != "posix", reason="uses flock")
def test_a_save_leaves_a_temporary_file_being_written(tmp_path):
    import fcntl

    path = tmp_path / "ckpt.pt"
    busy = tmp_path / ".ckpt.pt.0123456789ab.tmp"
    with open(busy, "wb") as f:  # another process's save, in progress
        fcntl.flock(f, fcntl.LOCK_EX)
        _small_checkpoint(path)
        assert busy.exists()
    _small_checkpoint(path)
    assert not busy.exists()

