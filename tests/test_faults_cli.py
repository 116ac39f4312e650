"""The command line `python -m transformer_book.train` under bad input.

Issue 21: every bad flag, path, device or data file, and every mismatched
or damaged resume, is found before the first step and reported as
argparse's usage line plus one error line naming the flag (exit 2, no
traceback); a save that fails during a run keeps the last good checkpoint
and says where it is. In-process calls of ``main``, a step or two of a tiny
model at most.
"""

from __future__ import annotations

import errno
import json
import os
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import torch
from test_train_cli import TINY, gpt_args, usage_error

from transformer_book import checkpoint, data
from transformer_book import train as cli

WORDS = "the cat sat on the mat and the dog ate the hat. " * 60


def write_text(path: Path, text: str = WORDS) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def train_ok(capsys, argv: list[str]) -> dict:
    assert cli.main(argv) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


# -- defect 1: --out is checked before the first step -----------------------


def test_out_that_is_a_file_fails_before_training(capsys, tmp_path):
    text = write_text(tmp_path / "text.txt")
    out = write_text(tmp_path / "taken", "not a folder")
    line = usage_error(capsys, gpt_args(text, "--steps", "2",
                                        "--out", str(out)))
    assert "--out" in line and str(out) in line
    assert out.read_text() == "not a folder"


def test_out_that_cannot_be_created_fails_before_training(capsys, tmp_path):
    text = write_text(tmp_path / "text.txt")
    blocker = write_text(tmp_path / "blocker", "a file")
    line = usage_error(capsys, gpt_args(text, "--steps", "2", "--out",
                                        str(blocker / "run")))
    assert "--out" in line and "blocker" in line


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0,
    reason="root writes into any folder",
)
def test_unwritable_out_fails_before_training(capsys, tmp_path):
    text = write_text(tmp_path / "text.txt")
    out = tmp_path / "locked"
    out.mkdir()
    out.chmod(0o500)
    try:
        line = usage_error(capsys, gpt_args(text, "--steps", "2",
                                            "--out", str(out)))
    finally:
        out.chmod(0o700)
    assert "--out" in line and "not writable" in line


def test_missing_out_is_created(capsys, tmp_path):
    text = write_text(tmp_path / "text.txt")
    out = tmp_path / "a" / "b"
    assert train_ok(capsys, gpt_args(text, "--steps", "1",
                                     "--out", str(out)))["step"] == 1
    assert (out / "gpt.pt").is_file()


def test_a_failing_save_keeps_the_last_good_checkpoint(
    capsys, tmp_path, monkeypatch
):
    text = write_text(tmp_path / "text.txt")
    out = tmp_path / "run"
    save = torch.save
    calls = []

    def full_disk(obj, f, *args, **kwargs):
        calls.append(1)
        if len(calls) > 1:  # the step-1 checkpoint is written, then none
            raise OSError(errno.ENOSPC, "No space left on device")
        return save(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", full_disk)
    argv = gpt_args(text, "--steps", "3", "--checkpoint-every", "1",
                    "--out", str(out))
    assert cli.main(argv) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1
    assert "No space left on device" in lines[0]
    assert f"last good checkpoint is {out / 'gpt.pt'}" in lines[0]
    monkeypatch.undo()
    state = torch.load(out / "gpt.pt", weights_only=True)
    assert state["step"] == 1


# -- defect 12: bad flags are usage errors naming the flag ------------------


@pytest.mark.parametrize(
    ("more", "flag"),
    [
        (["--seed", "-1"], "--seed"),
        (["--seed", str(2**32)], "--seed"),
        (["--seed", "many"], "--seed"),
        (["--device", "foo"], "--device"),
        (["--device", "meta"], "--device"),
    ],
)
def test_bad_flags_are_usage_errors(capsys, tmp_path, more, flag):
    text = write_text(tmp_path / "text.txt")
    line = usage_error(capsys, gpt_args(text, "--steps", "1", *more))
    assert flag in line


def test_seed_at_the_top_of_its_range_trains(capsys, tmp_path):
    text = write_text(tmp_path / "text.txt")
    argv = gpt_args(text, "--steps", "1", "--seed", str(2**32 - 1))
    assert train_ok(capsys, argv)["step"] == 1


def test_cuda_without_cuda_is_a_usage_error(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    text = write_text(tmp_path / "text.txt")
    line = usage_error(capsys, [*gpt_args(text, "--steps", "1"),
                                "--device", "cuda"])
    assert "--device" in line and "not available" in line


def test_data_that_is_not_utf8_is_a_usage_error(capsys, tmp_path):
    latin = tmp_path / "latin1.txt"
    latin.write_bytes(WORDS.replace("cat", "caf\xe9").encode("latin-1"))
    line = usage_error(capsys, gpt_args(latin, "--steps", "1"))
    assert "--data" in line and "UTF-8" in line


def test_gpu_preset_without_cache_or_network_is_a_usage_error(
    capsys, tmp_path, monkeypatch
):
    monkeypatch.setenv(data.CACHE_ENV_VAR, str(tmp_path / "empty"))

    def offline(*args, **kwargs):
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    line = usage_error(capsys, ["vit", "--preset", "gpu", "--device",
                                "cpu", "--steps", "1", "--no-progress"])
    assert "--data fashion-mnist" in line and "no network" in line


def test_patch_size_that_does_not_divide_the_image(capsys):
    line = usage_error(capsys, ["vit", "--patch-size", "5", *TINY])
    assert "--patch-size" in line


# -- defect 13: --resume checks the data, config, steps and file ------------


@pytest.fixture
def run_at_step_2(capsys, tmp_path) -> tuple[Path, Path]:
    """A 2-step run in tmp_path/run on tmp_path/text.txt."""
    text = write_text(tmp_path / "text.txt")
    out = tmp_path / "run"
    train_ok(capsys, gpt_args(text, "--steps", "2", "--out", str(out)))
    return text, out


def test_resume_with_other_data_is_a_usage_error(
    capsys, tmp_path, run_at_step_2
):
    _, out = run_at_step_2
    # The same characters in another order: the same alphabet.
    other = write_text(tmp_path / "other.txt", WORDS[::-1])
    tokenizer = checkpoint.tokenizer_path(out / "gpt.pt")
    before = tokenizer.read_bytes(), (out / "gpt.pt").read_bytes()
    line = usage_error(capsys, gpt_args(other, "--steps", "4", "--out",
                                        str(out), "--resume"))
    assert "--data" in line and "--resume" in line
    assert (tokenizer.read_bytes(), (out / "gpt.pt").read_bytes()) == before


def test_resume_with_another_dropout_is_a_usage_error(
    capsys, run_at_step_2
):
    text, out = run_at_step_2
    line = usage_error(capsys, gpt_args(text, "--steps", "4", "--out",
                                        str(out), "--resume",
                                        "--dropout", "0.1"))
    assert "different config" in line and "dropout" in line


@pytest.mark.parametrize("flag", ["--steps", "--until"])
def test_resume_below_the_checkpoints_step(capsys, run_at_step_2, flag):
    text, out = run_at_step_2
    more = ["--steps", "1"] if flag == "--steps" else ["--steps", "4",
                                                        "--until", "1"]
    line = usage_error(capsys, gpt_args(text, *more, "--out", str(out),
                                        "--resume"))
    assert f"{flag}=1" in line and "step 2" in line


def test_resume_at_the_checkpoints_step_still_works(capsys, run_at_step_2):
    text, out = run_at_step_2
    argv = gpt_args(text, "--steps", "2", "--out", str(out), "--resume")
    assert train_ok(capsys, argv)["step"] == 2


@pytest.mark.parametrize("damage", ["truncated", "random bytes", "empty"])
def test_resume_from_a_damaged_checkpoint(capsys, run_at_step_2, damage):
    text, out = run_at_step_2
    checkpoint = out / "gpt.pt"
    body = checkpoint.read_bytes()
    checkpoint.write_bytes({
        "truncated": body[: len(body) // 2],
        "random bytes": bytes(range(256)) * 8,
        "empty": b"",
    }[damage])
    line = usage_error(capsys, gpt_args(text, "--steps", "4", "--out",
                                        str(out), "--resume"))
    assert "--resume" in line and str(checkpoint) in line
