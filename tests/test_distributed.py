"""Data parallel training: 2 processes (gloo, CPU) equal 1 process.

`python -m transformer_book.train` under `torchrun --nproc_per_node=2`
with dropout 0, the same seed and the same global batch gives the same
losses and weights as one process, to floating-point tolerance, and a
checkpoint written by N processes resumes with M. The test spawns
processes, so it is slow: three launches, each capped by a timeout. How
the translation task splits its batches between ranks is tested in-process
(``tests/test_train_cli.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.slow

TIMEOUT = 300  # seconds per launch
TINY = ["--d-model", "16", "--num-heads", "2", "--num-layers", "1",
        "--d-ff", "32", "--threads", "1", "--device", "cpu", "--preset",
        "cpu", "--no-progress"]


@pytest.fixture(scope="module")
def text_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "text.txt"
    words = "the cat sat on the mat and the dog ate the hat. " * 60
    path.write_text(words, encoding="utf-8")
    return path


def launch(nproc: int, argv: list[str]) -> dict:
    """Run the command on ``nproc`` processes; return its JSON line."""
    command = [sys.executable, "-m", "transformer_book.train", *argv]
    if nproc > 1:
        command = [sys.executable, "-m", "torch.distributed.run",
                   "--standalone", f"--nproc_per_node={nproc}",
                   "-m", "transformer_book.train", *argv]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.run(command, capture_output=True, text=True,
                             timeout=TIMEOUT, env=env)
    assert process.returncode == 0, process.stderr[-3000:]
    lines = process.stdout.strip().splitlines()
    # Only rank 0 prints: one JSON line, whatever the number of processes.
    assert sum(line.startswith("{") for line in lines) == 1
    return json.loads(lines[-1])


def history(out: Path) -> dict:
    return json.loads((out / "history.json").read_text())


def assert_close_weights(a: Path, b: Path) -> None:
    wa = torch.load(a, weights_only=True)["model"]
    wb = torch.load(b, weights_only=True)["model"]
    assert wa.keys() == wb.keys()
    for name in wa:
        # A key bias's gradient is rounding noise (softmax ignores it),
        # which Adam scales up: it cannot agree between two reductions.
        if not name.endswith("k_proj.bias"):
            torch.testing.assert_close(wa[name], wb[name], atol=1e-5,
                                       rtol=1e-4, msg=name)


def gpt_args(text_file: Path, out: Path, *more: str) -> list[str]:
    return ["gpt", "--data", str(text_file), "--block-size", "16",
            "--batch-size", "8", "--out", str(out), *TINY, *more]


def test_two_processes_equal_one_and_resume_on_one(tmp_path, text_file):
    """One 2-process launch, its checkpoint resumed on 1 process, against
    a 1-process run: the three launches cover both claims.

    - 2 processes (each accumulating 2 micro-batches of 2 rows) take the
      same first steps as 1 process on the global batch of 8;
    - the checkpoint they write at step 2 resumes on 1 process and ends
      where the 1-process run ends: losses, validation loss and weights.
    """
    straight = launch(1, gpt_args(text_file, tmp_path / "a", "--steps", "4"))
    b = tmp_path / "b"
    two = launch(2, gpt_args(text_file, b, "--steps", "4", "--until", "2",
                             "--accumulate", "2"))
    assert (straight["world_size"], two["world_size"]) == (1, 2)
    assert history(b)["steps"] == [1, 2]
    assert history(b)["losses"] == pytest.approx(
        history(tmp_path / "a")["losses"][:2], rel=1e-5)

    resumed = launch(1, gpt_args(text_file, b, "--steps", "4", "--resume"))
    assert resumed["step"] == 4 and resumed["world_size"] == 1
    assert resumed["loss"] == pytest.approx(straight["loss"], rel=1e-5)
    assert resumed["val_loss"] == pytest.approx(straight["val_loss"],
                                                rel=1e-5)
    assert history(b)["losses"] == pytest.approx(
        history(tmp_path / "a")["losses"], rel=1e-5)
    assert_close_weights(tmp_path / "a" / "gpt.pt", b / "gpt.pt")
