"""The book's recipes: one definition of each trained model."""

from __future__ import annotations

import pytest
import torch

from transformer_book import recipes, training

CPU = torch.device("cpu")


pytestmark = pytest.mark.usefixtures("one_thread")


# The evaluations read every test list or validation window: a few do here.
SMALL = {"translation": {"lists": 200, "test_lists": 20},
         "gpt": {"valid_windows": 16}}


@pytest.mark.parametrize("name", recipes.NAMES)
def test_each_recipe_trains_a_few_steps_and_evaluates(name):
    recipe = recipes.get(name, "cpu", steps=3, batch_size=4,
                         **SMALL.get(name, {}))
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


def test_gpt_cpu_is_the_benchmark_s_book_recipe_on_tiny_shakespeare():
    recipe = recipes.get("gpt", "cpu")
    s = recipe.sizes
    assert s["data"] == "tiny-shakespeare"
    assert recipe.extras["train_text"].startswith("First Citizen:")
    c = recipe.config
    assert (c.d_model, c.num_heads, c.num_layers, c.max_seq_len) == (
        128, 4, 3, 64)
    assert (c.bias, c.dropout, s["batch_size"]) == (False, 0.0, 12)
    assert (s["betas"], s["weight_decay"], s["clip_grad_norm"]) == (
        (0.9, 0.99), 0.1, 1.0)
    model = recipe.model()
    optimizer = recipe.optimizer(model)
    decay, keep = optimizer.param_groups
    assert decay["weight_decay"] == 0.1 and keep["weight_decay"] == 0.0
    assert all(p.dim() == 2 for p in decay["params"])  # matrices, embeddings
    assert all(p.dim() == 1 for p in keep["params"])  # LayerNorm gains
    assert len(decay["params"]) + len(keep["params"]) == len(
        list(model.parameters()))
    scheduler = recipe.scheduler(optimizer)
    lrs = {}
    for step in range(1400):
        lrs[step] = optimizer.param_groups[0]["lr"]
        optimizer.step()
        scheduler.step()
    assert lrs[0] == pytest.approx(4e-3 / 51)  # warmup over 50 steps
    assert lrs[50] == pytest.approx(4e-3)
    assert lrs[1250] == pytest.approx(4e-4) == lrs[1399]  # then the floor
    # The gpu preset decays every parameter, down to 0.
    gpu = recipes.get("gpt", "gpu", steps=20)
    assert len(gpu.optimizer(gpu.model()).param_groups) == 1
    assert gpu.config.bias and gpu.sizes["min_lr"] == 0.0


def test_warmup_is_a_tenth_unless_set_and_below_the_steps():
    assert recipes.get("gpt", "gpu", steps=50).warmup_steps == 5
    assert recipes.get("gpt").warmup_steps == 50
    assert recipes.get("translation", steps=10).warmup_steps == 9
    assert recipes.get("translation").warmup_steps == 60


def test_vit_train_size_keeps_the_first_of_every_class_in_order():
    full = recipes.get("vit", "cpu")
    images, labels = full.extras["train"]
    small = recipes.get("vit", "cpu", train_size=500)
    sub_images, sub_labels = small.extras["train"]
    assert sub_labels.bincount().tolist() == [50] * 10
    for digit in (0, 7):  # the first 50 of each class, in the same order
        first = images[labels == digit][:50]
        assert torch.equal(sub_images[sub_labels == digit], first)
    # All of them: the same data in the same order, so the same batches.
    same = recipes.get("vit", "cpu", train_size=len(labels))
    assert torch.equal(same.extras["train"][0], images)
    assert same.fingerprint == full.fingerprint != small.fingerprint
    with pytest.raises(ValueError, match="train_size=5 must be at least 10"):
        recipes.get("vit", "cpu", train_size=5)


def test_mlm_scores_the_chosen_positions_and_never_reads_a_test_sentence():
    from transformer_book import data

    recipe = recipes.get("mlm", "cpu", steps=2, batch_size=4)
    s, mask_id = recipe.sizes, recipe.extras["mask_id"]
    assert (s["prob"], s["dropout"]) == (0.3, 0.0)
    assert recipes.defaults("mlm", "cpu")["steps"] == 1000
    # The loss on the chosen rows is the full head's loss, others ignored.
    model = recipe.model().eval()
    windows = recipe.extras["windows"][:4]
    generator = recipe.extras["mask_generator"]
    state = generator.get_state()
    with torch.no_grad():
        fast = recipe.loss(model, windows)
        generator.set_state(state)
        inputs, targets = data.mask_tokens(
            windows, mask_id=mask_id, vocab_size=mask_id + 1, prob=0.3,
            special_ids=range(4), generator=generator)
        full = training.cross_entropy(model(inputs), targets)
    assert torch.allclose(fast, full, atol=1e-5)
    sentences, _, _ = data.python_docs_sentences()
    corpus = recipe.extras["corpus"]
    assert not any(sentences[i] in corpus
                   for i in recipe.extras["test_idx"][:200])
