"""The book's recipes: one definition of each trained model."""

from __future__ import annotations

import pytest
import torch

from transformer_book import recipes, training

CPU = torch.device("cpu")


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("name", recipes.NAMES)
def test_each_recipe_trains_a_few_steps_and_evaluates(name):
    recipe = recipes.get(name, "cpu", steps=3, batch_size=4)
    model = recipe.model()
    optimizer = recipe.optimizer(model)
    batches = list(recipe.batches(torch.Generator().manual_seed(0), CPU))
    assert len(batches) == 3
    history = training.fit(
        lambda batch: recipe.loss(model, batch), batches, optimizer,
        scheduler=recipe.scheduler(optimizer), model=model, progress=False)
    assert len(history.losses) == 3
    model.eval()
    with torch.no_grad():
        results = recipe.evaluate(model)
    assert results["loss"] > 0
    assert recipe.weight(batches[0]) > 0 and recipe.tokens(batches[0]) > 0


def test_batches_are_seeded_and_the_presets_differ():
    a = recipes.get("gpt", "cpu", steps=2, batch_size=3)
    one = list(a.batches(torch.Generator().manual_seed(0)))
    two = list(a.batches(torch.Generator().manual_seed(0)))
    assert all(torch.equal(x[0], y[0]) for x, y in zip(one, two, strict=True))
    assert one[0][0].shape == (3, a.sizes["block_size"])
    assert recipes.defaults("gpt", "gpu")["d_model"] == 384
    assert a.config.d_model == recipes.defaults("gpt", "cpu")["d_model"]


def test_overrides_and_names_are_checked():
    with pytest.raises(ValueError, match="name='bert'"):
        recipes.get("bert")
    with pytest.raises(ValueError, match="preset='tpu'"):
        recipes.get("gpt", "tpu")
    with pytest.raises(ValueError, match="stepz"):
        recipes.get("gpt", stepz=3)


def test_warmup_is_a_tenth_unless_set_and_below_the_steps():
    assert recipes.get("gpt", steps=50).warmup_steps == 5
    assert recipes.get("translation", steps=10).warmup_steps == 9
    assert recipes.get("translation").warmup_steps == 60
