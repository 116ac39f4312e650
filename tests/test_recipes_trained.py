"""recipes.trained: a recipe trained once per package version, then read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from transformer_book import recipes

pytestmark = pytest.mark.usefixtures("one_thread")

SMALL = dict(steps=4, batch_size=4)


@pytest.fixture
def models(tmp_path, monkeypatch):
    monkeypatch.setenv(recipes.MODELS_ENV_VAR, str(tmp_path))
    return tmp_path


def test_trains_once_then_loads_the_same_model(models, monkeypatch):
    first = recipes.trained("vit", "cpu", snapshots=(2, 4), eval_every=2,
                            **SMALL)
    assert recipes.models_dir() == models
    assert len(list(models.glob("vit-cpu-*.pt"))) == 1
    assert not first.model.training
    assert first.history.steps == [1, 2, 3, 4]
    assert first.history.eval_steps == [2, 4]
    assert set(first.snapshots) == {2, 4}
    final = first.model.state_dict()
    assert all(torch.equal(final[k], v) for k, v in first.snapshots[4].items())
    assert not all(torch.equal(final[k], v)
                   for k, v in first.snapshots[2].items())

    def no_training(*args):
        raise AssertionError("trained again instead of loading")

    monkeypatch.setattr(recipes, "_train", no_training)
    again = recipes.trained("vit", "cpu", snapshots=(2, 4), eval_every=2,
                            **SMALL)
    assert again.metrics == first.metrics
    assert again.seconds == first.seconds
    assert all(torch.equal(final[k], v)
               for k, v in again.model.state_dict().items())


def test_the_key_holds_sizes_seed_and_snapshots(models):
    recipes.trained("vit", "cpu", **SMALL)
    recipes.trained("vit", "cpu", seed=1, **SMALL)
    recipes.trained("vit", "cpu", snapshots=(1,), **SMALL)
    recipes.trained("vit", "cpu", steps=3, batch_size=4)
    assert len(list(models.glob("*.pt"))) == 4


def test_a_damaged_cache_file_is_trained_again(models):
    recipes.trained("vit", "cpu", **SMALL)
    (path,) = models.glob("*.pt")
    path.write_bytes(path.read_bytes()[:-100])
    result = recipes.trained("vit", "cpu", **SMALL)
    assert result.history.steps == [1, 2, 3, 4]
    recipes.trained("vit", "cpu", **SMALL)  # now it reads


@pytest.mark.slow  # two interpreters importing torch
def test_two_processes_asking_at_once_train_once(models):
    log = models / "trainings.jsonl"
    script = textwrap.dedent(f"""
        import json, torch
        from transformer_book import recipes
        torch.set_num_threads(1)
        real = recipes._train
        def logged(*args):
            with open({str(log)!r}, "a") as f:
                f.write(json.dumps("trained") + "\\n")
            return real(*args)
        recipes._train = logged
        r = recipes.trained("vit", "cpu", steps=4, batch_size=4)
        print(json.dumps(r.metrics))
    """)
    env = {**os.environ, recipes.MODELS_ENV_VAR: str(models)}
    procs = [subprocess.Popen([sys.executable, "-c", script], env=env,
                              stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert len(log.read_text().splitlines()) == 1
    assert json.loads(outputs[0]) == json.loads(outputs[1])


@pytest.mark.parametrize(("kwargs", "match"), [
    (dict(seed=-1), "seed"),
    (dict(snapshots=(0,)), "snapshots"),
    (dict(snapshots=(5,)), "after the recipe's last step"),
    (dict(eval_every=0), "eval_every"),
    (dict(depth=3), "size"),
])
def test_bad_arguments_are_named(models, kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        recipes.trained("vit", "cpu", **{**SMALL, **kwargs})
    assert not list(models.glob("*.pt"))


def test_fit_trains_like_trained_without_the_cache(models):
    """An ablation's variant trains as trained() would, and saves nothing."""
    cached = recipes.trained("gpt", "cpu", seed=1, valid_windows=4, **SMALL)
    files = sorted(models.iterdir())
    fitted = recipes.fit(recipes.get("gpt", "cpu", valid_windows=4, **SMALL),
                         seed=1)
    assert sorted(models.iterdir()) == files
    assert fitted.metrics == cached.metrics
    assert fitted.history.losses == cached.history.losses
    assert not fitted.model.training
    with pytest.raises(ValueError, match="seed"):
        recipes.fit(fitted.recipe, seed=-1)
