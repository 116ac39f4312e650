"""The command line `python -m transformer_book.train`, on one process.

Tiny models on a tiny text file (or the number lists), a few steps each.
The multi-process checks are in test_distributed.py (slow).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from transformer_book import checkpoint, training
from transformer_book import train as cli

TINY = ["--d-model", "16", "--num-heads", "2", "--num-layers", "1",
        "--threads", "1", "--device", "cpu", "--preset", "cpu",
        "--no-progress"]


@pytest.fixture(scope="module")
def text_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "text.txt"
    words = "the cat sat on the mat and the dog ate the hat. " * 60
    path.write_text(words, encoding="utf-8")
    return path


def gpt_args(text_file: Path, *more: str) -> list[str]:
    return ["gpt", "--data", str(text_file), "--block-size", "16",
            "--batch-size", "8", *TINY, *more]


def run(capsys, argv: list[str]) -> dict:
    """Run main in this process; return its JSON line (the last one)."""
    assert cli.main(argv) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    return json.loads(lines[-1])


def usage_error(capsys, argv: list[str]) -> str:
    """Run ``main(argv)``; check it exits as argparse does (the usage
    line, one error line, the last; no traceback, no result); return the
    error line."""
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2
    captured = capsys.readouterr()
    err = captured.err
    assert err.startswith("usage: python -m transformer_book.train")
    assert "Traceback" not in err
    lines = err.rstrip("\n").splitlines()
    errors = [line for line in lines if ": error: " in line]
    assert errors == [lines[-1]], err  # one error line, the last
    assert captured.out == ""  # no step trained, no result
    return errors[0]


def weights(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, weights_only=True)["model"]


def assert_same_weights(a: Path, b: Path, atol: float = 0.0) -> None:
    """Equal weights; to ``atol`` when the runs round differently.

    A key bias shifts every score of a query by the same amount, which
    softmax ignores: its gradient is zero but for rounding, and Adam
    scales that noise up to a step of about the learning rate. So only an
    exact comparison (``atol=0``) includes the key biases.
    """
    wa, wb = weights(a), weights(b)
    assert wa.keys() == wb.keys()
    for name in wa:
        if atol and name.endswith("k_proj.bias"):
            continue
        torch.testing.assert_close(wa[name], wb[name], atol=atol, rtol=0.0,
                                   msg=name)


# -- bad input --------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["bert"], "invalid choice"),
        (["gpt", "--steps", "0"], "--steps"),
        (["gpt", "--batch-size", "many"], "--batch-size"),
        (["gpt", "--dropout", "1.5"], "--dropout"),
        (["gpt", "--lr", "-1"], "--lr"),
        (["gpt", "--preset", "tpu"], "--preset"),
    ],
)
def test_bad_options_get_argparse_errors(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["gpt", "--data", "no/such/file.txt"], "no such file"),
        (["translate", "--data", "python-docs"], "must be 'numbers'"),
        (["gpt", "--resume"], "--resume needs --out"),
        (["gpt", "--steps", "5", "--until", "6"], "past --steps"),
        (["gpt", "--d-model", "10", "--num-heads", "4"], "must divide"),
    ],
)
def test_usage_errors_are_one_line(capsys, argv, message):
    assert message in usage_error(capsys, argv)


def test_indivisible_batch_is_one_line(capsys, text_file):
    argv = gpt_args(text_file, "--steps", "1", "--batch-size", "6",
                    "--accumulate", "4")
    assert "divisible" in usage_error(capsys, argv)


def test_resume_without_checkpoint_is_one_line(capsys, text_file, tmp_path):
    argv = gpt_args(text_file, "--steps", "1", "--out", str(tmp_path),
                    "--resume")
    assert "no checkpoint" in usage_error(capsys, argv)


def test_missing_data_path_from_the_shell():
    process = subprocess.run(
        [sys.executable, "-m", "transformer_book.train", "gpt", "--data",
         "no/such/file.txt"],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "BOOK_PRESET": "cpu"},
    )
    assert process.returncode == 2
    lines = process.stderr.strip().splitlines()
    assert lines[0].startswith("usage: python -m transformer_book.train")
    assert lines[-1] == (
        "python -m transformer_book.train: error: --data no/such/file.txt: "
        "no such file (or use one of python-docs, tiny-shakespeare)"
    )
    assert process.stderr.count(": error: ") == 1


# -- a run ------------------------------------------------------------------


def test_three_steps_print_the_json_line_last(tmp_path, text_file):
    process = subprocess.run(
        [sys.executable, "-m", "transformer_book.train",
         *gpt_args(text_file, "--steps", "3", "--out", str(tmp_path))],
        capture_output=True, text=True, timeout=300,
    )
    assert process.returncode == 0, process.stderr
    result = json.loads(process.stdout.strip().splitlines()[-1])
    assert set(result) == {"step", "loss", "val_loss", "world_size",
                           "seconds", "tokens_per_s"}
    assert result["step"] == 3 and result["world_size"] == 1
    assert result["loss"] > 0 and result["val_loss"] > 0
    assert result["tokens_per_s"] > 0
    # The checkpoint, its tokenizer and the history are in --out.
    history = json.loads((tmp_path / "history.json").read_text())
    assert history["steps"] == [1, 2, 3]
    assert history["losses"][-1] == result["loss"]
    assert checkpoint.tokenizer_path(tmp_path / "gpt.pt").is_file()
    from transformer_book.models import GPT

    model = GPT.from_checkpoint(tmp_path / "gpt.pt")
    assert model.config.d_model == 16


@pytest.mark.parametrize("task", ["translate", "vit"])
def test_other_tasks_run(capsys, task):
    result = run(capsys, [task, "--steps", "2", "--batch-size", "4", *TINY,
                          "--d-ff", "32"])
    assert result["step"] == 2
    assert result["loss"] > 0 and result["val_loss"] > 0


# -- accumulation and resume --------------------------------------------------


@pytest.mark.parametrize("task", ["gpt", "translate"])
def test_accumulation_equals_one_step_on_the_whole_batch(
    capsys, tmp_path, text_file, task
):
    """K micro-batches of B / K rows give the step of one batch of B."""
    if task == "gpt":
        base = gpt_args(text_file, "--steps", "3")
    else:  # lists of different lengths: the token-weighted loss matters
        base = ["translate", "--steps", "3", "--batch-size", "8", *TINY,
                "--d-ff", "32"]
    one = run(capsys, [*base, "--out", str(tmp_path / "one")])
    four = run(capsys, [*base, "--accumulate", "4",
                        "--out", str(tmp_path / "four")])
    assert four["loss"] == pytest.approx(one["loss"], rel=1e-5)
    assert four["val_loss"] == pytest.approx(one["val_loss"], rel=1e-5)
    ckpt = f"{task}.pt"
    assert_same_weights(tmp_path / "one" / ckpt, tmp_path / "four" / ckpt,
                        atol=1e-5)


def test_accumulation_differs_from_a_smaller_batch(capsys, text_file):
    """The control: the first micro-batch alone gives another step."""
    whole = run(capsys, gpt_args(text_file, "--steps", "2", "--warmup", "0"))
    part = run(capsys, gpt_args(text_file, "--steps", "2", "--warmup", "0",
                                "--batch-size", "2"))
    assert whole["loss"] != pytest.approx(part["loss"], rel=1e-3)


def test_an_interrupted_run_resumes_exactly(capsys, tmp_path, text_file):
    straight = run(capsys, gpt_args(text_file, "--steps", "4", "--dropout",
                                    "0.1", "--warmup", "1",
                                    "--out", str(tmp_path / "a")))
    first = run(capsys, gpt_args(text_file, "--steps", "4", "--until", "2",
                                 "--dropout", "0.1", "--warmup", "1",
                                 "--out", str(tmp_path / "b")))
    assert first["step"] == 2
    resumed = run(capsys, gpt_args(text_file, "--steps", "4", "--dropout",
                                   "0.1", "--warmup", "1",
                                   "--out", str(tmp_path / "b"), "--resume"))
    assert resumed["step"] == 4
    assert resumed["loss"] == straight["loss"]
    history_a = json.loads((tmp_path / "a" / "history.json").read_text())
    history_b = json.loads((tmp_path / "b" / "history.json").read_text())
    assert history_a["losses"] == history_b["losses"]
    assert history_a["lrs"] == history_b["lrs"]
    assert_same_weights(tmp_path / "a" / "gpt.pt", tmp_path / "b" / "gpt.pt")


def test_resume_of_another_config_is_one_line(capsys, tmp_path, text_file):
    run(capsys, gpt_args(text_file, "--steps", "1", "--out", str(tmp_path)))
    argv = gpt_args(text_file, "--steps", "2", "--out", str(tmp_path),
                    "--resume", "--d-model", "32")
    assert "different config" in usage_error(capsys, argv)


# -- training.fit: accumulation as an API --------------------------------


def test_train_accumulate_checks_micro_batches():
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(batch):
        return model(batch).pow(2).mean()

    with pytest.raises(ValueError, match="sequence of 2 micro-batches"):
        training.fit(step, [[torch.ones(1, 2)]], optimizer, accumulate=2,
                       progress=False)
    with pytest.raises(ValueError, match="accumulate"):
        training.fit(step, [torch.ones(1, 2)], optimizer, accumulate=0)


def test_train_accumulate_equals_the_whole_batch():
    torch.manual_seed(0)
    x, y = torch.randn(8, 3), torch.randn(8, 1)
    results = []
    for accumulate in (1, 4):
        torch.manual_seed(1)
        model = torch.nn.Linear(3, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

        def step(batch, model=model):
            inputs, targets = batch
            return torch.nn.functional.mse_loss(model(inputs), targets)

        if accumulate == 1:
            batches = [(x, y)] * 3
        else:
            micro = list(zip(x.chunk(4), y.chunk(4), strict=True))
            batches = [micro] * 3
        history = training.fit(step, batches, optimizer,
                                 accumulate=accumulate, progress=False)
        results.append((history.losses, model.weight.detach().clone()))
    (losses_1, w_1), (losses_4, w_4) = results
    assert losses_4 == pytest.approx(losses_1, rel=1e-6)
    torch.testing.assert_close(w_4, w_1)


@pytest.mark.parametrize("world_size,accumulate", [(2, 1), (2, 2), (4, 2)])
def test_ranks_share_out_the_global_batch_as_micro_batches_do(
    world_size, accumulate
):
    """N processes of K micro-batches each take the rows that one process
    of N*K micro-batches takes, in order: what makes a torchrun launch
    (tests/test_distributed.py) compute the one-process step, for every
    task (translation's token-weighted loss is the accumulation test's)."""
    rows = 48
    ranks = [
        part
        for rank in range(world_size)
        for part in cli._shard(
            rows, cli._Dist(rank=rank, world_size=world_size), accumulate)
    ]
    alone = cli._shard(rows, cli._Dist(), world_size * accumulate)
    assert ranks == alone
    assert [i for s in alone for i in range(rows)[s]] == list(range(rows))
