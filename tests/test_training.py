"""Tests of the training loop, the schedule and atomic checkpoints."""

from __future__ import annotations

import math
import os
import random

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, RandomSampler, TensorDataset

from transformer_book import checkpoint
from transformer_book.checkpoint import load_checkpoint, save_checkpoint
from transformer_book.training import (
    History,
    WarmupCosine,
    count_parameters,
    fit,
    warmup_cosine,
)

NUM_SAMPLES, BATCH_SIZE, EPOCHS = 40, 6, 3
STEPS_PER_EPOCH = math.ceil(NUM_SAMPLES / BATCH_SIZE)  # 7, the last short
TOTAL_STEPS = EPOCHS * STEPS_PER_EPOCH


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny models run fastest, and steadiest on a busy machine, on one."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _mlp(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 4)
    )


def _dataset() -> TensorDataset:
    g = torch.Generator().manual_seed(123)
    x = torch.randn(NUM_SAMPLES, 8, generator=g)
    y = torch.randint(0, 4, (NUM_SAMPLES,), generator=g)
    return TensorDataset(x, y)


def _batches(kind: str, seed: int):
    """Shuffled batches of three kinds, each a fresh object."""
    dataset = _dataset()
    if kind == "loader_generator":
        g = torch.Generator().manual_seed(seed)
        return DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=True,
                          generator=g)
    if kind == "sampler_generator":
        g = torch.Generator().manual_seed(seed)
        sampler = RandomSampler(dataset, generator=g)
        return DataLoader(dataset, batch_size=BATCH_SIZE, sampler=sampler)
    if kind == "global_rng":  # shuffled by PyTorch's global generator
        return DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=True)
    assert kind == "callable"  # a function of the epoch, global generator

    def epoch_batches(epoch):
        order = torch.randperm(NUM_SAMPLES)
        x, y = dataset.tensors
        return [
            (x[order[i : i + BATCH_SIZE]], y[order[i : i + BATCH_SIZE]])
            for i in range(0, NUM_SAMPLES, BATCH_SIZE)
        ]

    return epoch_batches


def _setup(kind: str, seed: int):
    """A model with dropout, AdamW, warmup-cosine and shuffled batches."""
    model = _mlp(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scheduler = warmup_cosine(
        optimizer, warmup_steps=4, total_steps=TOTAL_STEPS, min_lr_ratio=0.1
    )

    def step(batch):
        x, y = batch
        logits = model(x)
        # Random draws in Python and NumPy too, which resuming must restore.
        noise = random.random() + float(np.random.rand())
        acc = (logits.argmax(-1) == y).float().mean()
        return F.cross_entropy(logits, y), {"acc": acc, "noise": noise}

    x_val, y_val = _dataset().tensors

    def eval_fn():
        return {"val_loss": F.cross_entropy(model(x_val), y_val)}

    return model, optimizer, scheduler, step, eval_fn, _batches(kind, seed)


def _seed_all(seed: int) -> None:
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)


RUN = dict(epochs=EPOCHS, clip_grad_norm=1.0, eval_every=4, progress=False)


@pytest.mark.parametrize(
    ("kind", "stop_at"),
    [
        ("loader_generator", 10),  # mid-epoch
        ("loader_generator", STEPS_PER_EPOCH),  # after an epoch's last batch
        ("sampler_generator", 10),
        ("global_rng", 12),
        ("global_rng", STEPS_PER_EPOCH),
        ("callable", 9),
    ],
)
def test_resume_mid_epoch_equals_uninterrupted_run(tmp_path, kind, stop_at):
    _seed_all(0)
    model, opt, sched, step, eval_fn, batches = _setup(kind, seed=0)
    full = fit(step, batches, opt, scheduler=sched, eval_fn=eval_fn,
                 model=model, **RUN)
    assert full.steps == list(range(1, TOTAL_STEPS + 1))
    final = {k: v.clone() for k, v in model.state_dict().items()}

    _seed_all(0)
    model, opt, sched, step, eval_fn, batches = _setup(kind, seed=0)
    path = tmp_path / "run" / "ckpt.pt"
    first = fit(step, batches, opt, scheduler=sched, eval_fn=eval_fn,
                  model=model, checkpoint=path, max_steps=stop_at, **RUN)
    assert first.steps[-1] == stop_at

    # Fresh objects in a different state: everything must come from disk.
    _seed_all(99)
    model, opt, sched, step, eval_fn, batches = _setup(kind, seed=7)
    torch.rand(5), random.random(), np.random.rand()
    state = load_checkpoint(path, model=model, optimizer=opt,
                            scheduler=sched)
    assert state["step"] == stop_at
    resumed = fit(step, batches, opt, scheduler=sched, eval_fn=eval_fn,
                    model=model, resume=state, **RUN)

    # Exact equality: the same batches, dropout masks and learning rates.
    assert resumed.losses == full.losses
    assert resumed.lrs == full.lrs
    assert resumed.metrics == full.metrics
    assert resumed.eval_steps == full.eval_steps
    assert resumed.eval_metrics == full.eval_metrics
    assert resumed.epoch_losses == full.epoch_losses
    assert len(full.epoch_losses) == EPOCHS
    for name, value in model.state_dict().items():
        assert torch.equal(value, final[name]), name


def test_checkpoint_every_and_resume_from_a_periodic_checkpoint(
    tmp_path, monkeypatch
):
    _seed_all(0)
    model, opt, sched, step, eval_fn, batches = _setup("loader_generator", 0)
    full = fit(step, batches, opt, scheduler=sched, model=model,
                 epochs=2, progress=False)

    _seed_all(0)
    model, opt, sched, step, eval_fn, batches = _setup("loader_generator", 0)
    path = tmp_path / "ckpt.pt"
    saved = []
    original = checkpoint.save_verified

    def spy(target, payload):
        saved.append((payload["step"], payload["loop"]["batch_in_epoch"]))
        original(target, payload)
        if payload["step"] == 9:  # keep a copy of a mid-epoch checkpoint
            original(tmp_path / "step9.pt", payload)

    monkeypatch.setattr(checkpoint, "save_verified", spy)
    fit(step, batches, opt, scheduler=sched, model=model, epochs=2,
          progress=False, checkpoint=path, checkpoint_every=3)
    monkeypatch.undo()
    # Every 3 steps, then once more at the end (step 14, epoch 2 done).
    assert saved == [(3, 3), (6, 6), (9, 2), (12, 5), (14, 0)]
    assert load_checkpoint(path, model=model)["epoch"] == 2

    model, opt, sched, step, eval_fn, batches = _setup("loader_generator", 5)
    state = load_checkpoint(tmp_path / "step9.pt", model=model,
                            optimizer=opt, scheduler=sched)
    resumed = fit(step, batches, opt, scheduler=sched, model=model,
                    epochs=2, progress=False, resume=state)
    assert resumed.losses == full.losses


def test_warmup_cosine_values():
    p = nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=2.0)
    sched = warmup_cosine(opt, warmup_steps=4, total_steps=12,
                          min_lr_ratio=0.25)
    lrs = []
    for _ in range(15):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs[0] == pytest.approx(2.0 / 5)  # first step already moves
    assert lrs[:5] == pytest.approx([2.0 * (s + 1) / 5 for s in range(4)]
                                    + [2.0])
    assert lrs[4] == pytest.approx(2.0)  # end of the warmup: the peak
    # Halfway through the decay: the mean of the peak and the floor.
    assert lrs[8] == pytest.approx(2.0 * (0.25 + 0.75 * 0.5))
    assert lrs[12:] == pytest.approx([0.5] * 3)  # the floor, and it stays
    assert all(a >= b for a, b in zip(lrs[4:], lrs[5:], strict=False))


def test_warmup_cosine_without_warmup_and_state_dict_round_trip():
    factor = WarmupCosine(warmup_steps=0, total_steps=10)
    assert factor(0) == 1.0 and factor(10) == 0.0
    p = nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=1.0)
    sched = warmup_cosine(opt, warmup_steps=2, total_steps=10)
    for _ in range(3):
        opt.step()
        sched.step()
    state = sched.state_dict()
    assert state["lr_lambdas"][0] == {
        "warmup_steps": 2, "total_steps": 10, "min_lr_ratio": 0.0
    }
    opt2 = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    sched2 = warmup_cosine(opt2, warmup_steps=5, total_steps=50)
    sched2.load_state_dict(state)
    assert sched2.lr_lambdas[0].total_steps == 10
    assert sched2.get_last_lr() == sched.get_last_lr()


def test_clipping_bounds_the_update_of_plain_sgd():
    # With SGD, lr=1 and no momentum the update is minus the gradient, so
    # its norm is the norm of the gradient that the optimizer saw.
    def run(clip):
        model = _mlp(0).eval()
        opt = torch.optim.SGD(model.parameters(), lr=1.0)
        before = torch.cat([p.detach().flatten() for p in model.parameters()])
        x, y = _dataset().tensors

        def step(batch):
            return F.cross_entropy(model(batch[0]), batch[1]) * 100.0

        history = fit(step, [(x, y)], opt, clip_grad_norm=clip,
                        progress=False)
        after = torch.cat([p.detach().flatten() for p in model.parameters()])
        return (after - before).norm().item(), history

    unclipped, _ = run(None)
    clipped, history = run(0.5)
    assert unclipped > 5.0
    assert clipped == pytest.approx(0.5, rel=1e-4)
    assert history.metrics["grad_norm"][0] == pytest.approx(unclipped,
                                                             rel=1e-4)


def test_a_tiny_model_overfits_one_batch():
    model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 4))
    x, y = _dataset().tensors
    x, y = x[:8], y[:8]
    opt = torch.optim.Adam(model.parameters(), lr=3e-2)

    def step(batch):
        logits = model(batch[0])
        acc = (logits.argmax(-1) == batch[1]).float().mean()
        return F.cross_entropy(logits, batch[1]), {"acc": acc}

    history = fit(step, [(x, y)], opt, max_steps=150, progress=False)
    assert len(history.losses) == 150
    assert history.losses[-1] < 0.02 < history.losses[0]
    assert history.metrics["acc"][-1] == 1.0


def test_history_records_metrics_lrs_epochs_and_evaluations():
    model = nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = [(torch.randn(4, 2), torch.randn(4, 1)) for _ in range(3)]
    calls = []

    def step(batch):
        loss = F.mse_loss(model(batch[0]), batch[1])
        extra = {"late": 1.0} if len(calls) >= 4 else {}
        calls.append(model.training)
        return loss, {"double": 2 * loss, **extra}

    evals = []

    def eval_fn():
        evals.append((model.training, torch.is_grad_enabled()))
        return torch.tensor(0.5)

    history = fit(step, batches, opt, epochs=2, eval_fn=eval_fn,
                    model=model, progress=False)
    assert history.steps == [1, 2, 3, 4, 5, 6]
    assert history.metrics["double"] == pytest.approx(
        [2 * v for v in history.losses]
    )
    late = history.metrics["late"]  # absent at first: NaN keeps alignment
    assert all(math.isnan(v) for v in late[:4]) and late[4:] == [1.0, 1.0]
    assert history.lrs == [0.1] * 6
    assert history.epoch_losses == pytest.approx(
        [sum(history.losses[:3]) / 3, sum(history.losses[3:]) / 3]
    )
    assert history.eval_steps == [3, 6]  # once per epoch by default
    assert history.eval_metrics == {"loss": [0.5, 0.5]}
    assert evals == [(False, False)] * 2  # eval mode, no gradients
    assert all(calls)  # training mode again after each evaluation
    assert History.from_dict(history.to_dict()) == history


def test_count_parameters():
    model = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 10))
    model[1].weight = model[0].weight  # tied: counted once
    assert count_parameters(model) == 10 * 4 + 10
    model[1].bias.requires_grad_(False)
    assert count_parameters(model) == 10 * 4
    assert count_parameters(model, trainable_only=False) == 10 * 4 + 10


def test_checkpoint_round_trip_and_file_mode(tmp_path):
    model = _mlp(0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = warmup_cosine(opt, warmup_steps=2, total_steps=20)
    g = torch.Generator().manual_seed(5)
    x, y = _dataset().tensors
    history = fit(lambda b: F.cross_entropy(model(b[0]), b[1]), [(x, y)],
                    opt, scheduler=sched, epochs=3, progress=False)
    old_umask = os.umask(0o027)
    try:
        path = save_checkpoint(
            tmp_path / "sub" / "ckpt.pt", model=model, optimizer=opt,
            scheduler=sched, step=3, epoch=3, history=history,
            extra={"note": "hi", "ids": torch.arange(3)}, generators=[g],
        )
    finally:
        os.umask(old_umask)
    assert (path.stat().st_mode & 0o777) == 0o640  # 0o666 & ~umask
    assert os.listdir(path.parent) == ["ckpt.pt"]  # no temporary file
    expected_draw = torch.rand(3, generator=g)
    expected_global = torch.rand(3)

    model2 = _mlp(1)
    opt2 = torch.optim.AdamW(model2.parameters(), lr=1.0)
    sched2 = warmup_cosine(opt2, warmup_steps=1, total_steps=5)
    g2 = torch.Generator().manual_seed(0)
    state = load_checkpoint(path, model=model2, optimizer=opt2,
                            scheduler=sched2, generators=[g2])
    for a, b in zip(model.parameters(), model2.parameters(), strict=True):
        assert torch.equal(a, b)
    assert opt2.state_dict()["param_groups"] == opt.state_dict()[
        "param_groups"
    ]
    assert sched2.state_dict() == sched.state_dict()
    assert History.from_dict(state["history"]) == history
    assert (state["step"], state["epoch"]) == (3, 3)
    assert state["extra"]["note"] == "hi"
    assert torch.equal(state["extra"]["ids"], torch.arange(3))
    assert torch.equal(torch.rand(3, generator=g2), expected_draw)
    assert torch.equal(torch.rand(3), expected_global)


def test_a_failed_save_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    model = nn.Linear(2, 2)
    path = save_checkpoint(tmp_path / "ckpt.pt", model=model, step=1)
    before = path.read_bytes()

    def broken_save(obj, f):
        f.write(b"half a checkpoint")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(path, model=model, step=2)
    monkeypatch.undo()
    # Something that cannot be pickled fails inside the real torch.save.
    with pytest.raises(Exception):  # noqa: B017
        save_checkpoint(path, model=model, step=3, extra=lambda: None)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["ckpt.pt"]
    assert load_checkpoint(path, model=model)["step"] == 1


def test_load_rejects_other_files_and_missing_states(tmp_path):
    model = nn.Linear(2, 2)
    other = tmp_path / "weights.pt"
    torch.save(model.state_dict(), other)
    with pytest.raises(ValueError, match="not a .* checkpoint"):
        load_checkpoint(other, model=model)
    path = save_checkpoint(tmp_path / "c.pt", model=model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="no optimizer state"):
        load_checkpoint(path, model=model, optimizer=opt)
    with pytest.raises(ValueError, match="generator"):
        load_checkpoint(path, model=model,
                        generators=[torch.Generator()])


def test_progress_bar_shown_only_when_asked_or_on_a_terminal(capsys):
    model = nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = [(torch.randn(4, 2), torch.randn(4, 1))] * 2

    def step(batch):
        return F.mse_loss(model(batch[0]), batch[1])

    fit(step, batches, opt, description="fit")  # stderr is not a TTY
    assert capsys.readouterr().err == ""
    fit(step, batches, opt, description="fit", progress=True)
    err = capsys.readouterr().err
    assert "fit" in err and "2/2" in err


def _ok_step(batch):
    return batch.sum() * 0.0 + torch.tensor(1.0, requires_grad=True)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(step=3), TypeError, "step must be callable"),
        (dict(batches=5), TypeError, "batches must be"),
        (dict(optimizer="sgd"), TypeError, "optimizer must be"),
        (dict(epochs=0), ValueError, "epochs=0"),
        (dict(epochs=1.5), TypeError, "epochs must be an int"),
        (dict(max_steps=-1), ValueError, "max_steps=-1"),
        (dict(clip_grad_norm=0.0), ValueError, "clip_grad_norm=0"),
        (dict(clip_grad_norm="1"), TypeError, "clip_grad_norm must be"),
        (dict(eval_every=0), ValueError, "eval_every=0"),
        (dict(eval_fn=1), TypeError, "eval_fn must be callable"),
        (dict(checkpoint="c.pt"), ValueError, "checkpoint needs model"),
        (dict(checkpoint_every=2), ValueError, "checkpoint_every needs"),
        (dict(progress="yes"), TypeError, "progress must be"),
        (dict(scheduler=object()), TypeError, "scheduler must be"),
        (dict(model=3), TypeError, "model must be an nn.Module"),
        (dict(generators=[3]), TypeError, r"generators\[0\]"),
        (dict(batches=[]), ValueError, "no batch in epoch 0"),
        (dict(step=lambda b: torch.ones(2)), ValueError, "must be a scalar"),
        (dict(step=lambda b: 1.0), TypeError, "loss returned by step"),
        (dict(step=lambda b: (_ok_step(b), 3)), TypeError, "metrics"),
        (
            dict(step=lambda b: (_ok_step(b), {"m": torch.ones(2)})),
            ValueError,
            r"metrics returned by step\['m'\]",
        ),
    ],
)
def test_train_rejects_bad_arguments(kwargs, error, match):
    model = nn.Linear(2, 1)
    args = dict(
        step=_ok_step,
        batches=[torch.ones(2)],
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        progress=False,
    )
    args.update(kwargs)
    with pytest.raises(error, match=match):
        fit(args.pop("step"), args.pop("batches"), args.pop("optimizer"),
              **args)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(warmup_steps=-1), ValueError, "warmup_steps=-1"),
        (dict(total_steps=0), ValueError, "total_steps=0"),
        (dict(warmup_steps=10), ValueError, "less than total_steps=10"),
        (dict(min_lr_ratio=1.5), ValueError, "min_lr_ratio=1.5"),
        (dict(min_lr_ratio="0"), TypeError, "min_lr_ratio must be"),
        (dict(total_steps=2.0), TypeError, "total_steps must be an int"),
    ],
)
def test_warmup_cosine_rejects_bad_arguments(kwargs, error, match):
    opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    args = dict(warmup_steps=2, total_steps=10) | kwargs
    with pytest.raises(error, match=match):
        warmup_cosine(opt, **args)


def test_checkpoint_functions_reject_bad_arguments(tmp_path):
    model = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="model must be an nn.Module"):
        save_checkpoint(tmp_path / "c.pt", model="m")
    with pytest.raises(ValueError, match="step=-1"):
        save_checkpoint(tmp_path / "c.pt", model=model, step=-1)
    with pytest.raises(TypeError, match="history must be a History"):
        save_checkpoint(tmp_path / "c.pt", model=model, history={})
    with pytest.raises(TypeError, match="module must be an nn.Module"):
        count_parameters([nn.Parameter(torch.zeros(1))])
    with pytest.raises(FileNotFoundError):
        load_checkpoint(tmp_path / "missing.pt", model=model)
    assert not list(tmp_path.iterdir())
