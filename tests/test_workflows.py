"""The GitHub workflows: valid against GitHub's schema, and doing their job.

``make workflows`` (part of ``make test``) validates both files with
``check-jsonschema --builtin-schema vendor.github-workflows``; these tests
run the same check, show that it rejects a broken workflow, and hold the
workflows to what they are for: ``test.yml`` runs ``.ci/run`` in a Debian
container with torch's CPU build, ``book.yml`` executes the book on a GPU
runner with the ``gpu`` preset and publishes it only when every page ran.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
CHECK = Path(sys.executable).parent / "check-jsonschema"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def check(*args: Path | str) -> subprocess.CompletedProcess:
    """Validate the workflows in ``args`` as `make workflows` does."""
    if not CHECK.exists():
        pytest.fail(f"{CHECK} is missing: run 'make workflows' to install it")
    return subprocess.run(
        [str(CHECK), "--builtin-schema", "vendor.github-workflows"]
        + [str(arg) for arg in args],
        capture_output=True,
        text=True,
    )


def load(name: str) -> dict:
    workflow = yaml.safe_load((WORKFLOWS / name).read_text())
    # YAML 1.1 reads the key `on` as True.
    workflow["on"] = workflow.pop(True, workflow.get("on"))
    return workflow


def steps_run(job: dict) -> str:
    return "\n".join(step.get("run", "") for step in job["steps"])


def uses(job: dict) -> list[str]:
    return [step["uses"] for step in job["steps"] if "uses" in step]


# Each breaks book.yml in one way the schema must catch.
BREAKAGES = {
    # A job without runs-on (a misspelt key).
    "no-runs-on": ("    runs-on: [self-hosted", "    runs-onn: [self-hosted"),
    # An event that does not exist.
    "bad-event": ("  workflow_dispatch:", "  workflow_dispatched:"),
    # A number that is not one.
    "bad-number": ("timeout-minutes: 60", "timeout-minutes: an hour"),
    # A step with neither `uses` nor `run`.
    "bad-step": ("      - uses: actions/checkout@v4", "      - use: x"),
}


def test_a_broken_workflow_fails_the_check(tmp_path):
    text = (WORKFLOWS / "book.yml").read_text()
    broken = []
    for name, (old, new) in BREAKAGES.items():
        assert old in text, name
        broken.append(tmp_path / f"{name}.yml")
        broken[-1].write_text(text.replace(old, new, 1))
    intact = tmp_path / "intact.yml"
    intact.write_text(text)
    # One run for all files; its JSON report names each file that failed.
    result = check(*broken, intact, "--output-format", "json")
    assert result.returncode != 0
    report = json.loads(result.stdout)
    failed = {Path(e["filename"]).name for e in report["errors"]}
    assert failed == {path.name for path in broken}


def test_test_workflow_runs_ci_in_debian_as_root_with_cpu_torch():
    workflow = load("test.yml")
    assert {"push", "pull_request"} <= set(workflow["on"])
    (job,) = workflow["jobs"].values()
    assert job["container"]["image"].startswith("debian:")
    assert "--user root" in job["container"].get("options", "")
    assert job["env"]["TORCH_INDEX_URL"] == CPU_INDEX
    assert "bash .ci/run" in steps_run(job)
    # .ci/run ends with the README's test command.
    assert (ROOT / ".ci" / "run").read_text().rstrip().endswith("make test")


def test_torch_index_defaults_to_pips_own():
    """Without TORCH_INDEX_URL, `make install` runs the same pip command."""
    result = subprocess.run(
        ["make", "-n", "-W", "pyproject.toml", ".venv/.installed"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "TORCH_INDEX_URL"},
    )
    torch_line = " ".join(
        line for line in result.stdout.replace("\\\n", " ").splitlines()
        if "torch==" in line and "pip install" in line
    )
    assert torch_line.split()[-1] == "torch==2.13.0", result.stdout
    with_index = subprocess.run(
        ["make", "-n", "-W", "pyproject.toml", ".venv/.installed",
         f"TORCH_INDEX_URL={CPU_INDEX}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert f"--index-url {CPU_INDEX}" in with_index.stdout


def test_book_workflow_executes_on_a_gpu_and_deploys_only_after():
    workflow = load("book.yml")
    assert workflow["on"]["push"]["branches"] == ["main"]
    assert "workflow_dispatch" in workflow["on"]
    execute, deploy = workflow["jobs"]["execute"], workflow["jobs"]["deploy"]
    assert "self-hosted" in execute["runs-on"] and "gpu" in execute["runs-on"]
    assert "BOOK_PRESET=gpu make book" in steps_run(execute)
    # No step may swallow a failure, so a failed page stops the job
    # before the upload, and `deploy` never runs.
    assert not any(step.get("continue-on-error") for step in
                   execute["steps"])
    assert "|| true" not in steps_run(execute)
    names = uses(execute)
    assert names[-1].startswith("actions/upload-pages-artifact@")
    assert execute["steps"][-1]["with"]["path"] == "_build/html"
    assert deploy["needs"] == "execute"
    assert uses(deploy) == ["actions/deploy-pages@v4"]
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}


def test_book_workflow_keeps_the_execution_and_data_caches():
    execute = load("book.yml")["jobs"]["execute"]
    caches = [s for s in execute["steps"]
              if s.get("uses", "").startswith("actions/cache@")]
    jupyter, data = caches
    # The cache and the key file that tells execute_pages.py which
    # package and preset the outputs belong to travel together.
    assert set(jupyter["with"]["path"].split()) == {
        "_build/.jupyter_cache", "_build/.package-hash"}
    key = jupyter["with"]["key"]
    assert "hashFiles('book/**', 'src/**', 'pyproject.toml')" in key
    restore = jupyter["with"]["restore-keys"].split()
    assert restore and key.startswith(restore[0])
    # The data cache's key is computed from the pinned checksums.
    assert data["with"]["path"] == "${{ env.TRANSFORMER_BOOK_DATA }}"
    assert data["with"]["key"] == "${{ steps.data.outputs.key }}"
    assert "[0-9a-f]{64}" in steps_run(execute)
