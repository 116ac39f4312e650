"""The key/value cache: masks, KVCache, attention, layers, GPT decoding."""

from __future__ import annotations

import pytest
import torch

from transformer_book.analysis import capture_attention
from transformer_book.attention import KVCache, MultiHeadAttention
from transformer_book.checkpoint import save_checkpoint
from transformer_book.masks import bottom_right_causal_mask, causal_mask
from transformer_book.models.gpt import GPT, GPTConfig
from transformer_book.positional import RotaryEmbedding
from transformer_book.transformer import Decoder, DecoderLayer, EncoderLayer


@pytest.fixture(autouse=True)
def _one_thread():
    """One thread: the models are tiny, and threads on shared cores wait."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _gpt(positional: str = "learned", **kwargs) -> GPT:
    fields = {
        "vocab_size": 23,
        "max_seq_len": 10,
        "d_model": 16,
        "num_heads": 4,
        "num_layers": 2,
        "positional": positional,
        **kwargs,
    }
    return GPT(GPTConfig(**fields)).double().eval()


# --------------------------------------------------------------------------
# Masks
# --------------------------------------------------------------------------


def test_causal_mask_offset_shifts_the_diagonal():
    mask = causal_mask(2, 5, offset=3)
    expected = torch.tensor(
        [[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], dtype=torch.bool
    )
    assert torch.equal(mask, expected)
    assert torch.equal(causal_mask(4, offset=0), causal_mask(4))


def test_bottom_right_one_query_sees_every_key():
    # The top-left mask would let a single query see key 0 only.
    assert causal_mask(1, 4).sum() == 1
    assert bottom_right_causal_mask(1, 4).all()


def test_bottom_right_is_the_tail_of_the_full_mask():
    for q_len, kv_len in [(1, 1), (2, 5), (3, 3), (4, 9)]:
        full = causal_mask(kv_len)
        tail = full[kv_len - q_len :]
        assert torch.equal(bottom_right_causal_mask(q_len, kv_len), tail)


def test_causal_mask_bad_offset_and_lengths():
    with pytest.raises(ValueError, match="offset=-1"):
        causal_mask(2, 3, offset=-1)
    with pytest.raises(TypeError, match="offset"):
        causal_mask(2, 3, offset=1.5)
    with pytest.raises(ValueError, match="kv_len=2 must be at least 3"):
        bottom_right_causal_mask(3, 2)


# --------------------------------------------------------------------------
# KVCache
# --------------------------------------------------------------------------


def test_cache_appends_and_grows_in_place():
    cache = KVCache()
    assert len(cache) == 0 and cache.offset == 0 and cache.capacity == 0
    chunks = [torch.randn(2, 3, n, 4) for n in (3, 1, 1, 1, 2)]
    values = [c + 1 for c in chunks]
    pointers = []
    for k, v in zip(chunks, values, strict=True):
        keys, vals = cache.append(k, v)
        pointers.append(keys.data_ptr())
    assert torch.equal(cache.keys, torch.cat(chunks, dim=2))
    assert torch.equal(cache.values, torch.cat(values, dim=2))
    assert len(cache) == cache.offset == 8
    # Capacity doubles (3 -> 6 -> 12): one buffer served several appends.
    assert cache.capacity == 12
    assert len(set(pointers)) == 3


def test_cache_keep_last_keeps_offset():
    cache = KVCache()
    k = torch.arange(2 * 6, dtype=torch.float64).view(1, 2, 6, 1)
    cache.append(k, -k)
    cache.keep_last(4)
    assert len(cache) == 4 and cache.offset == 6
    assert torch.equal(cache.keys, k[:, :, 2:])
    assert torch.equal(cache.values, -k[:, :, 2:])
    cache.keep_last(10)  # nothing to drop
    assert len(cache) == 4
    cache.reset()
    assert len(cache) == 0 and cache.offset == 0 and cache.capacity == 0


def test_cache_bad_inputs():
    cache = KVCache()
    with pytest.raises(ValueError, match="4-D"):
        cache.append(torch.randn(2, 3, 4), torch.randn(2, 3, 4))
    with pytest.raises(TypeError, match="floating"):
        cache.append(torch.ones(1, 1, 1, 2, dtype=torch.long),
                      torch.ones(1, 1, 1, 2, dtype=torch.long))
    with pytest.raises(ValueError, match=r"v has shape \(1, 2, 2, 4\)"):
        cache.append(torch.randn(1, 2, 3, 4), torch.randn(1, 2, 2, 4))
    cache.append(torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4))
    with pytest.raises(ValueError, match=r"k has shape \(1, 3, 1, 4\)"):
        cache.append(torch.randn(1, 3, 1, 4), torch.randn(1, 3, 1, 4))
    with pytest.raises(TypeError, match="dtype"):
        cache.append(torch.randn(1, 2, 1, 4).double(),
                     torch.randn(1, 2, 1, 4).double())
    assert len(cache) == 3  # failed appends change nothing
    with pytest.raises(ValueError, match="n=-1"):
        cache.keep_last(-1)
    with pytest.raises(ValueError, match="empty"):
        KVCache().keys  # noqa: B018


# --------------------------------------------------------------------------
# Attention and layers
# --------------------------------------------------------------------------


def _chunks(length: int) -> list[slice]:
    """A prompt of 3 positions, then one at a time, then two at once."""
    cuts = [0, 3, *range(4, length - 1), length]
    return [slice(a, b) for a, b in zip(cuts, cuts[1:], strict=False)]


@pytest.mark.parametrize("explicit", [False, True])
@pytest.mark.parametrize("rotary", [False, True])
def test_attention_with_cache_equals_full_causal(explicit, rotary):
    rope = RotaryEmbedding(4) if rotary else None
    mha = MultiHeadAttention(16, 4, rotary=rope).double()
    x = torch.randn(2, 9, 16, dtype=torch.float64)
    mha.fused = not explicit
    full = mha(x, x, x, is_causal=True)
    cache = KVCache()
    parts = [
        mha(x[:, s], x[:, s], x[:, s], is_causal=True, cache=cache)
        for s in _chunks(9)
    ]
    torch.testing.assert_close(torch.cat(parts, dim=1), full)
    assert len(cache) == cache.offset == 9


def test_attention_cache_merges_a_padding_mask():
    mha = MultiHeadAttention(8, 2).double()
    x = torch.randn(2, 6, 8, dtype=torch.float64)
    keep = torch.tensor([[1, 1, 1, 1, 1, 1], [0, 1, 1, 1, 1, 1]]).bool()
    pad = keep[:, None, None, :]  # (B, 1, 1, kv_len)
    full = mha(x, x, x, pad, is_causal=True)
    cache = KVCache()
    first = mha(x[:, :4], x[:, :4], x[:, :4], pad[..., :4], is_causal=True,
                cache=cache)
    rest = [
        mha(x[:, t : t + 1], x[:, t : t + 1], x[:, t : t + 1],
            pad[..., : t + 1], is_causal=True, cache=cache)
        for t in (4, 5)
    ]
    torch.testing.assert_close(torch.cat([first, *rest], dim=1), full)


def test_attention_cache_weights_span_the_cache():
    mha = MultiHeadAttention(8, 2).double()
    x = torch.randn(1, 5, 8, dtype=torch.float64)
    cache = KVCache()
    with capture_attention(mha) as maps:
        mha(x[:, :4], x[:, :4], x[:, :4], is_causal=True, cache=cache)
        mha(x[:, 4:], x[:, 4:], x[:, 4:], is_causal=True, cache=cache)
        mha(x, x, x, is_causal=True)
    _, weights, full = maps
    assert weights.shape == (1, 2, 1, 5)
    torch.testing.assert_close(weights, full[:, :, 4:])


def test_attention_cache_bad_inputs():
    mha = MultiHeadAttention(8, 2)
    x, memory = torch.randn(1, 3, 8), torch.randn(1, 5, 8)
    with pytest.raises(TypeError, match="cache must be a KVCache"):
        mha(x, x, x, cache=[KVCache()])
    with pytest.raises(ValueError, match="self-attention"):
        mha(x, memory, memory, cache=KVCache())


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_with_cache_equals_full(norm_first):
    layer = EncoderLayer(16, 4, 32, norm_first=norm_first).double().eval()
    x = torch.randn(2, 7, 16, dtype=torch.float64)
    full = layer(x, is_causal=True)
    cache = KVCache()
    parts = [layer(x[:, s], is_causal=True, cache=cache) for s in _chunks(7)]
    torch.testing.assert_close(torch.cat(parts, dim=1), full)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_with_cache_equals_full(norm_first):
    layer = DecoderLayer(16, 4, 32, norm_first=norm_first).double().eval()
    x = torch.randn(2, 7, 16, dtype=torch.float64)
    memory = torch.randn(2, 5, 16, dtype=torch.float64)
    src = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]).bool()
    memory_mask = src[:, None, None, :]  # (B, 1, 1, S)
    full = layer(x, memory, memory_mask=memory_mask, is_causal=True)
    cache = KVCache()
    parts = [
        layer(x[:, s], memory, memory_mask=memory_mask, is_causal=True,
              cache=cache)
        for s in _chunks(7)
    ]
    torch.testing.assert_close(torch.cat(parts, dim=1), full)


def test_decoder_stack_with_cache_equals_full():
    decoder = Decoder(2, 16, 4, 32, norm_first=True).double().eval()
    x = torch.randn(2, 6, 16, dtype=torch.float64)
    memory = torch.randn(2, 4, 16, dtype=torch.float64)
    full = decoder(x, memory, is_causal=True)
    cache = [KVCache(), KVCache()]
    parts = [decoder(x[:, s], memory, is_causal=True, cache=cache)
             for s in _chunks(6)]
    torch.testing.assert_close(torch.cat(parts, dim=1), full)
    with pytest.raises(ValueError, match="one per layer"):
        decoder(x, memory, is_causal=True, cache=[KVCache()])


def test_layer_mask_is_checked_against_the_cached_length():
    layer = EncoderLayer(8, 2, 16).eval()
    cache = KVCache()
    x = torch.randn(1, 3, 8)
    layer(x, is_causal=True, cache=cache)
    with pytest.raises(ValueError, match=r"\(1, 2, 1, 4\)"):
        layer(x[:, :1], torch.ones(1, 1, 1, 3, dtype=torch.bool),
              cache=cache)


# --------------------------------------------------------------------------
# GPT
# --------------------------------------------------------------------------


@pytest.mark.parametrize("positional", ["learned", "rope"])
def test_gpt_incremental_logits_equal_full_pass(positional):
    model = _gpt(positional)
    idx = torch.randint(0, 23, (3, 10))
    full, _ = model(idx)
    cache = model.make_cache()
    for t in range(10):  # token by token from the start
        logits, _ = model(idx[:, t : t + 1], cache=cache)
        torch.testing.assert_close(logits[:, 0], full[:, t])
    assert [len(c) for c in cache] == [10, 10]


@pytest.mark.parametrize("positional", ["learned", "rope"])
def test_gpt_prompt_at_once_equals_token_by_token(positional):
    model = _gpt(positional)
    idx = torch.randint(0, 23, (2, 9))
    at_once = model.make_cache()
    first, _ = model(idx[:, :5], cache=at_once)
    steps = [first] + [
        model(idx[:, t : t + 1], cache=at_once)[0] for t in range(5, 9)
    ]
    one_by_one = model.make_cache()
    singles = [model(idx[:, t : t + 1], cache=one_by_one)[0]
               for t in range(9)]
    torch.testing.assert_close(torch.cat(steps, 1), torch.cat(singles, 1))
    for a, b in zip(at_once, one_by_one, strict=True):
        torch.testing.assert_close(a.keys, b.keys)
        torch.testing.assert_close(a.values, b.values)


@pytest.mark.parametrize("positional", ["learned", "rope"])
def test_greedy_generation_same_with_and_without_cache(positional):
    model = _gpt(positional)
    prompt = torch.randint(0, 23, (2, 3))
    cached = model.generate(prompt, 7, temperature=0)
    plain = model.generate(prompt, 7, temperature=0, use_cache=False)
    assert cached.shape == (2, 10)
    assert torch.equal(cached[:, :3], prompt)
    assert torch.equal(cached, plain)


def test_greedy_generation_is_the_argmax_of_the_full_pass():
    model = _gpt()
    out = model.generate(torch.randint(0, 23, (2, 2)), 6, temperature=0)
    logits, _ = model(out[:, :-1])
    assert torch.equal(out[:, 2:], logits[:, 1:].argmax(-1))


def test_cached_step_costs_one_token_of_the_full_pass_in_flops():
    """FLOPs of the token after position p (written-out attention, as
    book/implementation/gpt.md counts them): p + 1 times fewer with the
    cache, L (24 D^2 + 4 D (p + 1)) + 2 D V with it."""
    from torch.utils.flop_counter import FlopCounterMode

    from transformer_book.attention import set_fused

    model = set_fused(_gpt(max_seq_len=40, bias=False), False)
    D, L, V = 16, 2, 23
    ids = torch.randint(V, (1, 40), generator=torch.Generator().manual_seed(0))
    for p in (1, 7, 39):
        with torch.no_grad():
            cache = model.make_cache()
            model(ids[:, :p], cache=cache)
            with FlopCounterMode(display=False) as counter:
                model(ids[:, p : p + 1], cache=cache)
            cached = counter.get_total_flops()
            with FlopCounterMode(display=False) as counter:
                model(ids[:, : p + 1])
            full = counter.get_total_flops()
        assert cached == L * (24 * D**2 + 4 * D * (p + 1)) + 2 * D * V
        assert full == (p + 1) * cached


def test_learned_positions_slide_like_the_uncached_model():
    model = _gpt("learned")  # max_seq_len = 10
    prompt = torch.randint(0, 23, (2, 4))
    cached = model.generate(prompt, 15, temperature=0)
    plain = model.generate(prompt, 15, temperature=0, use_cache=False)
    assert cached.shape == (2, 19)
    assert torch.equal(cached, plain)
    # The last token is the argmax over the last max_seq_len tokens only.
    window = cached[:, -11:-1]
    logits, _ = model(window)
    assert torch.equal(cached[:, -1], logits[:, -1].argmax(-1))


def test_rope_cache_keeps_sliding_within_max_seq_len():
    model = _gpt("rope")
    cache = model.make_cache()
    out = torch.randint(0, 23, (1, 4))
    logits = model._cached_step(out, cache)
    for _ in range(12):
        out = torch.cat((out, logits.argmax(-1, keepdim=True)), dim=1)
        logits = model._cached_step(out, cache)
        assert len(cache[0]) <= model.config.max_seq_len
    assert cache[0].offset == out.shape[1] == 16
    assert len(cache[0]) == 10
    # A prompt longer than max_seq_len is read through its last window.
    long_prompt = torch.randint(0, 23, (1, 25))
    assert model.generate(long_prompt, 3, temperature=0).shape == (1, 28)


def test_generate_samples_reproducibly_and_restores_training_mode():
    model = _gpt().train()
    prompt = torch.zeros(2, 1, dtype=torch.long)
    runs = [
        model.generate(prompt, 8, top_k=5, top_p=0.9,
                       generator=torch.Generator().manual_seed(3))
        for _ in range(2)
    ]
    assert torch.equal(runs[0], runs[1])
    assert model.training
    assert torch.equal(model.generate(prompt, 0), prompt)


def test_generate_bad_inputs():
    model = _gpt()
    prompt = torch.zeros(1, 2, dtype=torch.long)
    with pytest.raises(ValueError, match="token id 23"):
        model.generate(torch.tensor([[1, 23]]), 2)
    with pytest.raises(ValueError, match="max_new_tokens=-1"):
        model.generate(prompt, -1)
    for top_p in (0, 1.5, float("nan")):
        with pytest.raises(ValueError, match="top_p"):
            model.generate(prompt, 2, top_p=top_p)
    with pytest.raises(ValueError, match="top_k=0"):
        model.generate(prompt, 2, top_k=0)
    with pytest.raises(ValueError, match="temperature"):
        model.generate(prompt, 2, temperature=-1.0)
    with pytest.raises(ValueError, match="no tokens"):
        model.generate(torch.zeros(1, 0, dtype=torch.long), 2)
    with pytest.raises(TypeError, match="integer"):
        model.generate(prompt.float(), 2)


def test_gpt_cache_bad_inputs():
    model = _gpt()
    idx = torch.zeros(1, 6, dtype=torch.long)
    with pytest.raises(ValueError, match="one per layer"):
        model(idx, cache=[KVCache()])
    with pytest.raises(TypeError, match="sequence of KVCache"):
        model(idx, cache=KVCache())
    cache = model.make_cache()
    model(idx, cache=cache)
    with pytest.raises(ValueError, match="11 is more than max_seq_len=10"):
        model(idx[:, :5], cache=cache)


def test_from_checkpoint_round_trip_and_mismatch(tmp_path):
    model = _gpt().float()
    path = tmp_path / "gpt.pt"
    save_checkpoint(path, model=model,
                    extra={"config": model.config.to_dict()})
    restored = GPT.from_checkpoint(path)
    assert restored.config == model.config and not restored.training
    idx = torch.randint(0, 23, (2, 5))
    torch.testing.assert_close(restored(idx)[0], model(idx)[0])
    other = GPTConfig(vocab_size=23, max_seq_len=10, d_model=32,
                      num_heads=4, num_layers=2)
    with pytest.raises(ValueError, match="was saved with"):
        GPT.from_checkpoint(path, config=other)
    bare = tmp_path / "bare.pt"
    save_checkpoint(bare, model=model)
    with pytest.raises(ValueError, match="holds no GPT config"):
        GPT.from_checkpoint(bare)
    with pytest.raises(ValueError, match="do not fit"):
        GPT.from_checkpoint(bare, config=other)
    assert GPT.from_checkpoint(bare, config=model.config).config == (
        model.config
    )
