"""The book's trained models, one definition each.

A :class:`Recipe` holds what training one model needs for one preset
(``"cpu"`` or ``"gpu"``): the sizes and hyperparameters, the model's
config, the prepared data (and its tokenizer), the batches, the loss and
the evaluation. The pages, the command line (``python -m
transformer_book.train``) and ``benchmarks/`` all build from here.

Example:
    >>> import torch
    >>> from transformer_book import recipes, training
    >>> r = recipes.get("gpt", "cpu", steps=2, batch_size=2)
    >>> model = r.model()
    >>> optimizer = r.optimizer(model)
    >>> batches = r.batches(torch.Generator().manual_seed(0), "cpu")
    >>> history = training.fit(lambda batch: r.loss(model, batch), batches,
    ...                        optimizer, progress=False)
    >>> len(history.losses)
    2
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import os
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torch.optim import AdamW, Muon, Optimizer
from torch.optim.lr_scheduler import LambdaLR

from . import data, models, runtime, training
from ._checks import check_choice, check_int, check_number
from ._io import _lock, load_verified, save_verified
from .tokenization import CharTokenizer, WordTokenizer

__all__ = ["MODELS_ENV_VAR", "NAMES", "PRESETS", "Recipe", "Trained",
           "defaults", "fit", "get", "gpt_speedrun", "models_dir",
           "optimizer", "scheduler", "trained"]

#: The presets, ``cpu`` (a laptop, minutes) and ``gpu`` (bigger models).
PRESETS = ("cpu", "gpu")
#: The book's trained models.
NAMES = ("gpt", "translation", "mlm", "vit")
#: The folder where :func:`trained` keeps its models, if set.
MODELS_ENV_VAR = "TRANSFORMER_BOOK_MODELS"

# Sizes and hyperparameters, by model and preset: the pages' values.
# warmup=None means a tenth of the steps.
_SIZES: dict[str, dict[str, dict[str, Any]]] = {
    "gpt": {  # book/implementation/gpt.md
        # cpu: benchmarks/gpt_char.py's "book" recipe (nanoGPT's CPU
        # model, one layer fewer, 4x the lr; the cosine ends at `steps`).
        "cpu": dict(data="tiny-shakespeare", d_model=128, num_heads=4,
                    num_layers=3, block_size=64, batch_size=12,
                    steps=1250, lr=4e-3, min_lr=4e-4, warmup=50,
                    dropout=0.0, bias=False, decay_vectors=False),
        "gpu": dict(data="tiny-shakespeare", d_model=384, num_heads=6,
                    num_layers=6, block_size=256, batch_size=64,
                    steps=2000, lr=1e-3, min_lr=0.0, warmup=None,
                    dropout=0.2, bias=True, decay_vectors=True),
        "all": dict(betas=(0.9, 0.99), weight_decay=0.1, d_ff=None,
                    text=None, clip_grad_norm=1.0, valid_windows=None,
                    activation="gelu", qk_norm=False, tie_weights=True,
                    optimizer="adamw", muon_lr=None),
    },
    "translation": {  # book/implementation/translation.md
        "cpu": dict(stop=10_000, max_numbers=6, lists=4_800,
                    test_lists=1_000, steps=300, batch_size=16, d_model=64,
                    num_heads=2, enc_layers=2, dec_layers=3, d_ff=128,
                    lr=3e-3, warmup=60),
        "gpu": dict(stop=10_000, max_numbers=6, lists=1_500 * 256,
                    test_lists=5_000, steps=1_125, batch_size=256,
                    d_model=128, num_heads=4, enc_layers=3, dec_layers=3,
                    d_ff=512, lr=2e-3, warmup=200),
        "all": dict(betas=(0.9, 0.98), weight_decay=0.01,
                    label_smoothing=0.1, dropout=0.0, clip_grad_norm=1.0,
                    fused=True),
    },
    "mlm": {  # book/implementation/encoder.md
        # cpu: no dropout and 30% masked, so that 1,000 short steps
        # learn more than word frequencies.
        "cpu": dict(d_model=64, num_heads=4, num_layers=2, window=32,
                    batch_size=32, steps=1000, lr=5e-3, dropout=0.0),
        "gpu": dict(d_model=256, num_heads=8, num_layers=4, window=64,
                    batch_size=128, steps=3000, lr=1e-3, dropout=0.1),
        "all": dict(max_len=32, betas=(0.9, 0.999), weight_decay=0.01,
                    warmup=None, prob=0.3, clip_grad_norm=None),
    },
    "vit": {  # book/vision/training-vit.md, what-vit-sees.md
        # cpu: 35 epochs of the 4,000 digits (63 batches each).
        "cpu": dict(data="mnist-5k", steps=2205, batch_size=64, lr=3e-3,
                    d_model=64, num_layers=3, d_ff=128, weight_decay=0.1),
        "gpu": dict(data="fashion-mnist", steps=4000, batch_size=256,
                    lr=2e-3, d_model=128, num_layers=6, d_ff=256,
                    weight_decay=0.05),
        "all": dict(num_heads=4, patch_size=7, dropout=0.0, max_shift=1,
                    train_size=None, label_smoothing=0.1, betas=(0.9, 0.999),
                    warmup=None, clip_grad_norm=None),
    },
}


@dataclass
class Recipe:
    """One trained model of the book for one preset.

    Attributes:
        name: one of :data:`NAMES`.
        preset: one of :data:`PRESETS`.
        sizes: the sizes and hyperparameters (``steps``, ``batch_size``,
            ``lr``, ``betas``, ``weight_decay``, ``warmup``, ...).
        config: the model's config.
        tokenizer: the tokenizer (the target's for translation), or None.
        draw: ``draw(generator)`` yields training batches as drawn (on
            the CPU); :meth:`batches` takes ``sizes["steps"]`` of them.
        loss: ``loss(model, batch)``, the mean loss of a batch.
        weight: what the mean loss of a batch from ``take`` averages over
            (the targets counted), to combine micro-batches' losses.
        take: ``take(batch, rows, device)``, some rows of a batch.
        tokens: the tokens a batch from ``take`` holds (for throughput).
        evaluate: ``evaluate(model)``, held-out metrics (``"loss"`` first).
        fingerprint: sha256 of the training data, to match resumes.
        extras: more prepared data (the source tokenizer, test sets).
    """

    name: str
    preset: str
    sizes: dict[str, Any]
    config: Any
    tokenizer: Any
    draw: Callable[[torch.Generator], Iterator[Any]]
    loss: Callable[[nn.Module, Any], Tensor]
    weight: Callable[[Any], float]
    take: Callable[[Any, slice, torch.device], Any]
    tokens: Callable[[Any], int]
    evaluate: Callable[[nn.Module], dict[str, float]]
    fingerprint: str
    extras: dict[str, Any] = field(default_factory=dict)

    def model(self, seed: int | None = 0) -> nn.Module:
        """A fresh model (its weights drawn after ``manual_seed(seed)``)."""
        if seed is not None:
            torch.manual_seed(seed)
        build = {models.GPTConfig: models.GPT,
                 models.Seq2SeqTransformerConfig: models.Seq2SeqTransformer,
                 models.EncoderConfig: models.TransformerEncoderModel,
                 models.ViTConfig: models.ViT}
        return build[type(self.config)](self.config)

    def optimizer(self, model: nn.Module) -> Optimizer:
        """:func:`optimizer` for ``model`` with these sizes."""
        return optimizer(model, self.sizes)

    def batches(self, generator: torch.Generator,
                device: torch.device | None = None) -> Iterator[Any]:
        """``sizes["steps"]`` training batches; with a ``device``, ready
        for :attr:`loss`."""
        steps = self.sizes["steps"]
        for batch in itertools.islice(self.draw(generator), steps):
            yield batch if device is None else self.take(
                batch, slice(None), device)

    @property
    def warmup_steps(self) -> int:
        """Warmup steps, ``sizes["warmup"]`` or a tenth of the steps."""
        return _warmup_steps(self.sizes)

    def scheduler(self, optimizer: Optimizer) -> LambdaLR:
        """:func:`scheduler` for ``optimizer`` with these sizes."""
        return scheduler(optimizer, self.sizes)


def optimizer(model: nn.Module, sizes: dict[str, Any]) -> Optimizer:
    """AdamW with the recipe's learning rate, betas and weight decay.

    With ``sizes["decay_vectors"]`` False, only matrices and embeddings
    decay; gains and biases (1-D) do not (nanoGPT's groups). With
    ``sizes["optimizer"] == "muon"``, the matrices of ``model.blocks``
    take ``torch.optim.Muon`` at ``sizes["muon_lr"]`` instead, without
    weight decay (Jordan et al., 2024), and AdamW the rest.
    """
    s = sizes
    params = [p for p in model.parameters() if p.requires_grad]
    muon = check_choice("optimizer", s.get("optimizer", "adamw"),
                        ("adamw", "muon")) == "muon"
    hidden: list[nn.Parameter] = []
    if muon:
        check_number("muon_lr", s["muon_lr"], minimum=0.0)
        blocks = getattr(model, "blocks", nn.Module())
        ids = {id(p) for p in blocks.parameters() if p.dim() == 2}
        hidden = [p for p in params if id(p) in ids]
        params = [p for p in params if id(p) not in ids]
    groups: Any = params
    if not s.get("decay_vectors", True):
        groups = [{"params": [p for p in params if p.dim() >= 2]},
                  {"params": [p for p in params if p.dim() < 2],
                   "weight_decay": 0.0}]
    fused = s.get("fused")
    adamw = AdamW(groups, lr=s["lr"], betas=s["betas"],
                  weight_decay=s["weight_decay"], fused=fused,
                  foreach=None if fused else True)
    if not muon:
        return adamw
    return training.Optimizers(
        Muon(hidden, lr=s["muon_lr"], weight_decay=0.0), adamw)


def scheduler(optimizer: Optimizer, sizes: dict[str, Any]) -> LambdaLR:
    """Linear warmup over ``sizes["warmup"]`` steps (``None``: a tenth of
    ``sizes["steps"]``), then a cosine decay to ``sizes["min_lr"]`` (0 if
    absent) at ``sizes["steps"]``."""
    return training.warmup_cosine(
        optimizer, warmup_steps=_warmup_steps(sizes),
        total_steps=sizes["steps"],
        min_lr_ratio=sizes.get("min_lr", 0.0) / sizes["lr"])


def _warmup_steps(sizes: dict[str, Any]) -> int:
    steps, warmup = sizes["steps"], sizes["warmup"]
    return steps // 10 if warmup is None else min(warmup, steps - 1)


def defaults(name: str, preset: str = "cpu") -> dict[str, Any]:
    """The sizes and hyperparameters of model ``name`` for ``preset``."""
    check_choice("name", name, NAMES)
    check_choice("preset", preset, PRESETS)
    return {**_SIZES[name]["all"], **_SIZES[name][preset]}


def get(name: str, preset: str = "cpu", **overrides: Any) -> Recipe:
    """The recipe of model ``name`` for ``preset``, with some sizes changed.

    Args:
        name: one of :data:`NAMES`.
        preset: one of :data:`PRESETS`.
        overrides: sizes to change (``steps=2, batch_size=4`` for a smoke
            run); unknown names are refused.
    """
    sizes = defaults(name, preset)
    for key in overrides:
        check_choice(f"{name} recipe's size", key, sorted(sizes))
    sizes.update(overrides)
    builders = {"gpt": _gpt, "translation": _translation, "mlm": _mlm,
                "vit": _vit}
    return builders[name](name, preset, sizes)


# What the speedrun changes in the GPT's sizes (book/beyond/speedrun.md,
# benchmarks/gpt_char.py --recipe speedrun).
_SPEEDRUN: dict[str, dict[str, Any]] = {
    "cpu": dict(optimizer="muon", muon_lr=0.015, qk_norm=True,
                activation="relu2", tie_weights=False, batch_size=32,
                steps=300, lr=1e-2, min_lr=0.0),
    "gpu": dict(optimizer="muon", muon_lr=0.02, qk_norm=True,
                activation="relu2", tie_weights=False),
}


def gpt_speedrun(preset: str = "cpu", **overrides: Any) -> Recipe:
    """The GPT recipe of ``get("gpt", preset)`` with the speedrun's changes.

    Muon for the blocks' matrices, QK-norm, ReLU² feed-forwards and an
    untied head (``book/beyond/speedrun.md``).

    Args:
        preset: one of :data:`PRESETS`.
        overrides: sizes to change, as in :func:`get` (``optimizer=
            "adamw"`` takes one technique out).
    """
    check_choice("preset", preset, PRESETS)
    return get("gpt", preset, **{**_SPEEDRUN[preset], **overrides})


@dataclass
class Trained:
    """A recipe's model, trained once by :func:`trained`.

    Attributes:
        model: the trained model, on the CPU, in ``eval()`` mode.
        recipe: the recipe it was trained with.
        history: the run's :class:`~transformer_book.training.History`.
        metrics: the recipe's evaluation after the last step.
        seconds: the wall time of the training, when it ran.
        snapshots: the model's state dict after each step asked for.
    """

    model: nn.Module
    recipe: Recipe
    history: training.History
    metrics: dict[str, float]
    seconds: float
    snapshots: dict[int, dict[str, Tensor]]


def models_dir() -> Path:
    """Where :func:`trained` keeps models: ``$TRANSFORMER_BOOK_MODELS``,
    else ``models`` in the data cache
    (:func:`~transformer_book.data.cache_dir`)."""
    explicit = os.environ.get(MODELS_ENV_VAR, "").strip()
    return Path(explicit).expanduser() if explicit else (
        data.cache_dir() / "models")


@functools.cache
def _package_hash() -> str:
    """The package's source, less the figures (drawing trains nothing)."""
    root = Path(__file__).parent
    skip = {"__pycache__", "plotting"}
    files = sorted(p for p in root.rglob("*") if p.is_file()
                   and not skip & set(p.relative_to(root).parts))
    return _fingerprint(*(part for p in files for part in (
        str(p.relative_to(root)).encode(), p.read_bytes())))


def trained(name: str, preset: str = "cpu", *, seed: int = 0,
            snapshots: tuple[int, ...] = (), eval_every: int | None = None,
            progress: bool = False, **overrides: Any) -> Trained:
    """Recipe ``name`` trained once, then read back from a cache.

    The first call trains ``get(name, preset, **overrides)`` on
    :func:`~transformer_book.runtime.device` and saves the result in
    :func:`models_dir`, keyed by the recipe's sizes and data, the seed,
    the snapshots, the evaluations and the package's source; later calls,
    in any process, load it (a second concurrent call waits).

    Args:
        name: one of :data:`NAMES`.
        preset: one of :data:`PRESETS`.
        seed: seeds the model's weights and the batches' order.
        snapshots: steps after which to keep the model's state dict.
        eval_every: run the recipe's evaluation every this many steps
            (into the history); ``None``: only at the end.
        progress: show a progress bar while training.
        overrides: sizes to change, as in :func:`get`.
    """
    recipe = get(name, preset, **overrides)
    seed = check_int("seed", seed, minimum=0)
    steps = recipe.sizes["steps"]
    kept = sorted({check_int("snapshots", s) for s in snapshots})
    if kept and kept[-1] > steps:
        raise ValueError(f"snapshots asks for step {kept[-1]}, after the "
                         f"recipe's last step ({steps})")
    if eval_every is not None:
        eval_every = check_int("eval_every", eval_every)
    key = _fingerprint(json.dumps([name, preset, seed, kept, eval_every,
                                   repr(sorted(recipe.sizes.items()))]
                                  ).encode(),
                       recipe.fingerprint.encode(), _package_hash().encode())
    path = models_dir() / f"{name}-{preset}-{key[:20]}.pt"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a") as lock:
        _lock(lock.fileno(), wait=True)  # released when the file closes
        try:
            state = load_verified(path)
        except (FileNotFoundError, ValueError):  # absent or damaged
            state = _train(recipe, seed, kept, eval_every, progress)
            save_verified(path, state)
    return _trained(recipe, state)


def fit(recipe: Recipe, seed: int = 0, *, eval_every: int | None = None,
        progress: bool = False) -> Trained:
    """Train ``recipe``'s model from ``seed`` once, with no cache: what
    :func:`trained` does on a miss, for a recipe built by :func:`get` or
    :func:`gpt_speedrun` (an ablation's variants, say)."""
    seed = check_int("seed", seed, minimum=0)
    return _trained(recipe, _train(recipe, seed, [], eval_every, progress))


def _trained(recipe: Recipe, state: dict[str, Any]) -> Trained:
    model = recipe.model(seed=None)
    model.load_state_dict(state["model"])
    history = training.History.from_dict(state["history"])
    return Trained(model.eval(), recipe, history, state["metrics"],
                   state["seconds"], state["snapshots"])


def _train(recipe: Recipe, seed: int, kept: list[int],
           eval_every: int | None, progress: bool) -> dict[str, Any]:
    device = runtime.device()
    model = recipe.model(seed).to(device)
    optimizer = recipe.optimizer(model)
    snapshots: dict[int, dict[str, Tensor]] = {}

    def keep(done: int) -> None:
        if done in kept:
            snapshots[done] = {k: v.detach().to("cpu", copy=True)
                               for k, v in model.state_dict().items()}

    def batches() -> Iterator[Any]:  # asked for batch k after k steps
        generator = torch.Generator().manual_seed(seed)
        for done, batch in enumerate(recipe.batches(generator, device)):
            keep(done)
            yield batch

    start = time.perf_counter()
    history = training.fit(
        lambda batch: recipe.loss(model, batch), batches(), optimizer,
        scheduler=recipe.scheduler(optimizer),
        clip_grad_norm=recipe.sizes["clip_grad_norm"],
        eval_fn=(lambda: recipe.evaluate(model)) if eval_every else None,
        eval_every=eval_every, model=model, progress=progress,
        description=recipe.name)
    keep(recipe.sizes["steps"])
    model.eval()
    with torch.no_grad():
        metrics = recipe.evaluate(model)
    return {"model": {k: v.to("cpu") for k, v in model.state_dict().items()},
            "history": history.to_dict(), "metrics": metrics,
            "seconds": time.perf_counter() - start, "snapshots": snapshots}


def _fingerprint(*parts: bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(len(part).to_bytes(8, "little") + part)
    return digest.hexdigest()


# The sizes that GPT's, the encoder's and ViT's configs share.
_LAYERS = ("d_model", "num_heads", "num_layers", "dropout")


def _pick(sizes: dict[str, Any], *names: str) -> dict[str, Any]:
    return {name: sizes[name] for name in names}


def _rows(batch: tuple[Tensor, ...], rows: slice,
          device: torch.device) -> tuple[Tensor, ...]:
    return tuple(t[rows].to(device) for t in batch)


def _gpt_text(sizes: dict[str, Any]) -> tuple[str, str]:
    """Training and validation text: the last tenth is held out."""
    if sizes["text"] is None and sizes["data"] == "python-docs":
        return data.python_docs_split()
    text = sizes["text"]
    if text is None:
        check_choice("data", sizes["data"],
                     ("python-docs", "tiny-shakespeare"))
        text = data.tiny_shakespeare()
    cut = int(0.9 * len(text))
    return text[:cut], text[cut:]


def _gpt(name: str, preset: str, sizes: dict[str, Any]) -> Recipe:
    train_text, valid_text = _gpt_text(sizes)
    tokenizer = CharTokenizer(byte_fallback=False).train(
        train_text + valid_text if sizes["text"] else train_text)
    train_ids = torch.tensor(tokenizer.encode(train_text))
    valid_ids = torch.tensor(tokenizer.encode(valid_text))
    T, B = sizes["block_size"], sizes["batch_size"]
    config = models.GPTConfig(
        vocab_size=tokenizer.vocab_size, max_seq_len=T,
        **_pick(sizes, *_LAYERS, "d_ff", "bias", "activation", "qk_norm",
                "tie_weights"))
    valid_x, valid_y = data.every_window(  # (N, T) each; None: all
        valid_ids, T, sizes["valid_windows"])
    count = len(valid_x)

    def batches(generator: torch.Generator) -> Iterator[Any]:
        while True:
            yield data.random_windows(train_ids, T, B, generator)

    def loss(model: nn.Module, batch: Any) -> Tensor:
        return model(*batch)[1]

    def evaluate(model: nn.Module) -> dict[str, float]:
        device = next(model.parameters()).device
        total = 0.0
        for i in range(0, count, 64):
            x, y = valid_x[i : i + 64], valid_y[i : i + 64]
            total += float(model(x.to(device), y.to(device))[1]) * len(x)
        return {"loss": total / count}

    return Recipe(
        name, preset, sizes, config, tokenizer, batches, loss,
        weight=lambda batch: float(batch[1].numel()), take=_rows,
        tokens=lambda batch: batch[0].numel(), evaluate=evaluate,
        fingerprint=_fingerprint(train_text.encode(), valid_text.encode()),
        extras={"train_ids": train_ids, "valid_ids": valid_ids,
                "train_text": train_text, "valid_text": valid_text},
    )


def _translation(name: str, preset: str, sizes: dict[str, Any]) -> Recipe:
    pairs = data.number_pairs("en", "fr", start=0, stop=sizes["stop"],
                              valid_fraction=0.0, test_fraction=0.1)
    rng = random.Random(0)
    train_lists = data.number_lists(pairs.train, sizes["lists"],
                                    max_numbers=sizes["max_numbers"], rng=rng)
    test_lists = data.number_lists(pairs.test, sizes["test_lists"],
                                   max_numbers=sizes["max_numbers"], rng=rng)
    src_tok = WordTokenizer().train("\n".join(en for en, _ in train_lists))
    tgt_tok = WordTokenizer().train("\n".join(fr for _, fr in train_lists))
    pad = tgt_tok.pad_id
    src = [src_tok.encode(en) for en, _ in train_lists]
    tgt = [[tgt_tok.bos_id] + tgt_tok.encode(fr, eos=True)
           for _, fr in train_lists]
    test_src = [src_tok.encode(en) for en, _ in test_lists]
    test_tgt = [tgt_tok.encode(fr, eos=True) for _, fr in test_lists]
    config = models.Seq2SeqTransformerConfig(
        src_vocab_size=src_tok.vocab_size, tgt_vocab_size=tgt_tok.vocab_size,
        max_seq_len=128, num_encoder_layers=sizes["enc_layers"],
        num_decoder_layers=sizes["dec_layers"], pad_id=pad, norm_first=False,
        rotary=True, **_pick(sizes, "d_model", "num_heads", "d_ff", "dropout"))

    def batches(generator: torch.Generator) -> Iterator[Any]:
        for idx in data.length_batches(src, sizes["batch_size"],
                                      sizes["steps"]):
            yield [(src[i], tgt[i]) for i in idx]

    def take(batch: Any, rows: slice, device: torch.device) -> Any:
        part = batch[rows]
        return (data.pad_batch([s for s, _ in part], pad, device=device)[0],
                data.pad_batch([t for _, t in part], pad, device=device)[0])

    def loss(model: nn.Module, batch: Any) -> Tensor:
        source, target = batch
        logits = model(source, target[:, :-1])  # teacher forcing (B, T, V)
        return training.cross_entropy(
            logits, target[:, 1:], ignore_index=pad,
            label_smoothing=sizes["label_smoothing"])

    def evaluate(model: Any) -> dict[str, float]:
        device = next(model.parameters()).device
        correct, total = 0, 0.0
        for i in range(0, len(test_src), 500):
            ids = data.pad_batch(test_src[i : i + 500], pad, device=device)[0]
            rows = test_tgt[i : i + 500]  # generated: the longest and 2
            out = model.generate(ids, max(map(len, rows)) + 2,
                                 bos_id=tgt_tok.bos_id,
                                 eos_id=tgt_tok.eos_id).tolist()
            correct += sum(o[: len(t)] == t for o, t in zip(out, rows,
                                                            strict=True))
            targets = data.pad_batch([[tgt_tok.bos_id] + t for t in rows],
                                     pad, device=device)[0]
            total += float(loss(model, (ids, targets))) * sum(map(len, rows))
        return {"loss": total / sum(map(len, test_tgt)),
                "exact_match": correct / len(test_src)}

    return Recipe(
        name, preset, sizes, config, tgt_tok, batches, loss,
        weight=lambda batch: float((batch[1][:, 1:] != pad).sum()), take=take,
        tokens=lambda batch: int(sum((t != pad).sum() for t in batch)),
        evaluate=evaluate,
        fingerprint=_fingerprint(*(f"{en}\t{fr}".encode()
                                   for en, fr in train_lists + test_lists)),
        extras={"src_tokenizer": src_tok, "pairs": pairs,
                "train_lists": train_lists, "test_lists": test_lists},
    )


def _mlm(name: str, preset: str, sizes: dict[str, Any]) -> Recipe:
    sentences, _, _ = data.python_docs_sentences()
    order = torch.randperm(len(sentences),
                           generator=torch.Generator().manual_seed(0))
    test_idx = order[: 3 * len(sentences) // 10].tolist()
    corpus = " ".join(data.python_docs_text().split())
    for i in test_idx:  # pre-training never reads a test sentence
        corpus = corpus.replace(sentences[i], " ")
    tokenizer = WordTokenizer(lowercase=True).train(corpus, min_freq=3)
    mask_id, vocab_size = tokenizer.vocab_size, tokenizer.vocab_size + 1
    W = sizes["window"]
    stream = torch.tensor(tokenizer.encode(corpus))
    windows = stream[: len(stream) // W * W].view(-1, W)  # (N, W)
    config = models.EncoderConfig(
        vocab_size=vocab_size, max_seq_len=max(W, sizes["max_len"]),
        pad_id=tokenizer.pad_id, head="mlm", pool="mean",
        **_pick(sizes, *_LAYERS))
    mask_generator = torch.Generator().manual_seed(1)

    def masked_loss(model: Any, ids: Tensor,
                    generator: torch.Generator) -> Tensor:
        inputs, targets = data.mask_tokens(
            ids, mask_id=mask_id, vocab_size=vocab_size, prob=sizes["prob"],
            special_ids=range(4), generator=generator)
        device = next(model.parameters()).device
        hidden, _ = model.encode(inputs.to(device))  # (B, W, d_model)
        chosen = targets.to(device) != -100  # only they carry a loss
        return training.cross_entropy(model.head(hidden[chosen]),
                                      targets.to(device)[chosen])

    def batches(generator: torch.Generator) -> Iterator[Tensor]:
        size = sizes["batch_size"]
        while True:  # epochs of shuffled windows
            order = torch.randperm(len(windows), generator=generator)
            for i in range(0, len(order) - size + 1, size):
                yield windows[order[i : i + size]]

    def evaluate(model: nn.Module) -> dict[str, float]:
        fixed = torch.Generator().manual_seed(0)
        return {"loss": float(masked_loss(model, windows[-256:], fixed))}

    return Recipe(
        name, preset, sizes, config, tokenizer, batches,
        loss=lambda model, ids: masked_loss(model, ids, mask_generator),
        weight=lambda batch: float(len(batch)),
        take=lambda batch, rows, device: batch[rows],
        tokens=lambda batch: batch.numel(), evaluate=evaluate,
        fingerprint=_fingerprint(corpus.encode()),
        extras={"corpus": corpus, "stream": stream, "windows": windows,
                "mask_generator": mask_generator, "mask_id": mask_id,
                "test_idx": test_idx},
    )


def _vit(name: str, preset: str, sizes: dict[str, Any]) -> Recipe:
    if sizes["data"] == "mnist-5k":
        (train_x, train_y), (test_x, test_y) = data.mnist_5k()
    else:
        check_choice("data", sizes["data"], ("mnist-5k", "fashion-mnist"))
        train_x, train_y = data.fashion_mnist("train")
        test_x, test_y = data.fashion_mnist("test")
    if sizes["train_size"] is not None:  # the first n / 10 of every class
        per_class = check_int("train_size", sizes["train_size"],
                              minimum=10) // 10
        keep = torch.zeros(len(train_y), dtype=torch.bool)
        for digit in range(10):
            keep[(train_y == digit).nonzero()[:per_class, 0]] = True
        train_x, train_y = train_x[keep], train_y[keep]
    config = models.ViTConfig(
        image_size=28, **_pick(sizes, *_LAYERS, "d_ff", "patch_size"))
    B = sizes["batch_size"]

    def batches(generator: torch.Generator) -> Iterator[Any]:
        while True:  # epochs of shuffled images
            order = torch.randperm(len(train_x), generator=generator)
            for start in range(0, len(train_x), B):
                index = order[start : start + B]
                yield (data.random_shift(train_x[index], sizes["max_shift"],
                                         generator), train_y[index])

    def loss(model: nn.Module, batch: Any) -> Tensor:
        images, labels = batch
        return training.cross_entropy(
            model(images), labels, label_smoothing=sizes["label_smoothing"])

    def evaluate(model: nn.Module) -> dict[str, float]:
        device = next(model.parameters()).device
        x, y = test_x.to(device), test_y.to(device)
        chunks = [slice(i, i + 1000) for i in range(0, len(x), 1000)]
        loss = sum(float(training.cross_entropy(model(x[c]), y[c])) * len(y[c])
                   for c in chunks)
        return {"loss": loss / len(y),
                "accuracy": training.accuracy(model, x, y)}

    return Recipe(
        name, preset, sizes, config, None, batches, loss,
        weight=lambda batch: float(len(batch[1])), take=_rows,
        tokens=lambda batch: len(batch[1]) * config.num_tokens,
        evaluate=evaluate,
        fingerprint=_fingerprint(train_x.numpy().tobytes(),
                                 train_y.numpy().tobytes()),
        extras={"train": (train_x, train_y), "test": (test_x, test_y)},
    )

