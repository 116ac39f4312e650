"""LoRA: unchanged at first, merged equals unmerged, what trains, errors."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from transformer_book.lora import LoRALinear, apply_lora, merge
from transformer_book.models.gpt import GPT, GPTConfig
from transformer_book.training import count_parameters

F64 = torch.float64
ALL = ("q_proj", "k_proj", "v_proj", "out_proj", "up_proj", "down_proj")


def _gpt(seed: int = 0, dtype: torch.dtype = F64, **overrides) -> GPT:
    torch.manual_seed(seed)
    config = GPTConfig(**{"vocab_size": 20, "max_seq_len": 12, "d_model": 16,
                          "num_heads": 4, "num_layers": 2, **overrides})
    return GPT(config).to(dtype).eval()


def _ids(seed: int = 0) -> torch.Tensor:
    return torch.randint(20, (3, 12), generator=torch.Generator()
                         .manual_seed(seed))


def _randomise_b(model: nn.Module) -> None:
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, LoRALinear):
                module.lora_B.normal_()


def _wrapped(model: nn.Module) -> dict[str, LoRALinear]:
    return {name: m for name, m in model.named_modules()
            if isinstance(m, LoRALinear)}


@pytest.mark.parametrize("bias", [True, False])
def test_linear_computes_w_plus_scaled_ba(bias):
    linear = nn.Linear(5, 7, bias=bias, dtype=F64)
    layer = LoRALinear(linear, rank=3, alpha=6.0)
    assert layer.weight is linear.weight and layer.bias is linear.bias
    assert layer.lora_A.shape == (3, 5) and layer.lora_B.shape == (7, 3)
    assert layer.lora_A.abs().sum() > 0 and not layer.lora_B.any()
    bound = 1 / 5**0.5  # kaiming-uniform with a = sqrt(5), as nn.Linear
    assert layer.lora_A.abs().max() <= bound
    x = torch.randn(2, 4, 5, dtype=F64)
    torch.testing.assert_close(layer(x), linear(x), rtol=0, atol=0)
    _randomise_b(layer)
    expected = linear(x) + 2.0 * x @ (layer.lora_B @ layer.lora_A).T
    torch.testing.assert_close(layer(x), expected)
    torch.testing.assert_close(layer.delta_weight(),
                               2.0 * layer.lora_B @ layer.lora_A)
    merged = merge(layer)
    assert type(merged) is nn.Linear and not merged.weight.requires_grad
    torch.testing.assert_close(merged(x), layer(x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("positional", ["learned", "rope"])
@pytest.mark.parametrize("seed", range(3))
def test_initial_lora_leaves_the_output_unchanged(seed, positional):
    model = _gpt(seed, positional=positional)
    ids = _ids(seed)
    before = model(ids)[0]
    assert apply_lora(model, rank=2, alpha=4) is model
    torch.testing.assert_close(model(ids)[0], before, rtol=0, atol=0)


@pytest.mark.parametrize("overrides", [{}, {"num_kv_heads": 2},
                                       {"bias": False}])
@pytest.mark.parametrize("seed", range(3))
def test_merged_equals_unmerged(seed, overrides):
    model = apply_lora(_gpt(seed, **overrides), rank=3, alpha=5)
    _randomise_b(model)
    ids = _ids(seed)
    adapted = model(ids)[0]
    assert not torch.allclose(adapted, _gpt(seed, **overrides)(ids)[0])
    assert merge(model) is model and not _wrapped(model)
    assert sum(isinstance(m, nn.Linear) for m in model.modules()) == 12
    torch.testing.assert_close(model(ids)[0], adapted, rtol=1e-10,
                               atol=1e-10)
    with pytest.raises(ValueError, match="no LoRALinear"):
        merge(model)


@pytest.mark.parametrize("rank", [1, 4, 8])
def test_only_a_and_b_train_and_their_count(rank):
    model = apply_lora(_gpt(), rank=rank, alpha=rank)
    wrapped = _wrapped(model)
    assert sorted({name.rsplit(".", 1)[1] for name in wrapped}) == sorted(ALL)
    assert len(wrapped) == 2 * len(ALL)  # two blocks
    expected = sum(rank * (m.in_features + m.out_features)
                   for m in wrapped.values())
    assert count_parameters(model) == expected
    trainable = {name for name, p in model.named_parameters()
                 if p.requires_grad}
    assert trainable == {f"{name}.lora_{ab}" for name in wrapped
                         for ab in "AB"}
    model(_ids(), _ids(1))[1].backward()
    assert all(p.grad is None for name, p in model.named_parameters()
               if name not in trainable)


def test_swiglu_gate_is_wrapped():
    model = _gpt()
    model.blocks[0].feed_forward.sublayer = type(
        model.blocks[0].feed_forward.sublayer)(16, 32, activation="swiglu")
    names = _wrapped(apply_lora(model, rank=1, alpha=1))
    assert "blocks.0.feed_forward.sublayer.gate_proj" in names


def test_targets_by_name_and_by_path():
    model = apply_lora(_gpt(), rank=2, alpha=2, targets={"q_proj", "v_proj"})
    names = _wrapped(model)
    assert sorted(n.rsplit(".", 1)[1] for n in names) == [
        "q_proj", "q_proj", "v_proj", "v_proj"]
    assert count_parameters(model) == 4 * 2 * (16 + 16)
    path = "blocks.1.feed_forward.sublayer.down_proj"
    model = apply_lora(_gpt(), rank=2, alpha=2, targets=[path])
    assert list(_wrapped(model)) == [path]
    assert count_parameters(model) == 2 * (64 + 16)


def test_bad_input():
    with pytest.raises(ValueError, match="rank=0"):
        apply_lora(_gpt(), rank=0, alpha=1)
    with pytest.raises(TypeError, match="rank"):
        apply_lora(_gpt(), rank=2.0, alpha=1)
    with pytest.raises(ValueError, match="alpha=0"):
        apply_lora(_gpt(), rank=1, alpha=0)
    with pytest.raises(ValueError, match="alpha=-1"):
        LoRALinear(nn.Linear(2, 2), rank=1, alpha=-1)
    with pytest.raises(TypeError, match="linear"):
        LoRALinear(nn.Conv1d(2, 2, 1), rank=1, alpha=1)
    with pytest.raises(TypeError, match="model"):
        apply_lora("gpt", rank=1, alpha=1)
    with pytest.raises(ValueError, match="targets='qproj'"):
        apply_lora(_gpt(), rank=1, alpha=1, targets={"qproj"})
    with pytest.raises(TypeError, match="targets"):
        apply_lora(_gpt(), rank=1, alpha=1, targets="q_proj")
    with pytest.raises(ValueError, match="targets is empty"):
        apply_lora(_gpt(), rank=1, alpha=1, targets=[])
    with pytest.raises(ValueError, match="MultiHeadAttention"):
        apply_lora(nn.Sequential(nn.Linear(2, 2)), rank=1, alpha=1)
    with pytest.raises(ValueError, match="no LoRALinear"):
        merge(_gpt())


def test_targets_are_wrapped_in_the_model_s_order_whatever_their_order():
    """A set of names wraps (and so initialises) layers in one order."""
    def wrapped(targets):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
        model[0].q_proj, model[1].v_proj = nn.Linear(4, 4), nn.Linear(4, 4)
        apply_lora(model, rank=2, alpha=2.0, targets=targets)
        return model.state_dict()

    one, two = wrapped(["q_proj", "v_proj"]), wrapped(["v_proj", "q_proj"])
    assert list(one) == list(two)
    assert all(torch.equal(one[k], two[k]) for k in one)
