"""From next-token logits to tokens: filters, sampling, one loop, beams."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import Tensor, nn

from ._checks import (
    check_int,
    check_integer_tensor,
    check_number,
    check_shape,
    check_tensor,
)

__all__ = ["beam_search", "generate", "sample", "speculative_generate",
           "top_k_filter", "top_p_filter"]

NEG_INF = float("-inf")


def top_k_filter(logits: Tensor, k: int) -> Tensor:
    """Keep each row's ``k`` largest logits and ties (Fan et al., 2018).

    Args:
        logits: unnormalised scores ``(..., V)``; the rest become ``-inf``.
        k: the number of tokens to keep, ``>= 1``.
    """
    check_tensor("logits", logits, floating=True)
    k = min(check_int("k", k), logits.shape[-1])
    kth = logits.topk(k, dim=-1).values[..., -1:]  # (..., 1)
    return logits.masked_fill(logits < kth, NEG_INF)


def top_p_filter(logits: Tensor, p: float) -> Tensor:
    """Keep the likeliest tokens until their mass reaches ``p``.

    Nucleus sampling (Holtzman et al., 2020).

    Args:
        logits: unnormalised scores ``(..., V)``; the rest become ``-inf``.
        p: the probability mass to cover, in ``(0, 1]``.
    """
    check_tensor("logits", logits, floating=True)
    p = check_number("p", p, minimum=0.0, maximum=1.0, min_inclusive=False)
    if p == 1.0:
        return logits.clone()
    order = logits.argsort(dim=-1, descending=True)
    # float64: the running sum decides membership, rounding should not.
    probs = logits.double().softmax(dim=-1).gather(-1, order)
    drop = probs.cumsum(dim=-1) - probs >= p  # mass of the likelier ones
    drop[..., 0] = False  # the likeliest token stays, whatever p is
    drop = drop.scatter(-1, order, drop)  # back to vocabulary order
    return logits.masked_fill(drop, NEG_INF)


_Options = tuple[float, int | None, float | None]  # temperature, top_k, top_p


def _options(temperature: Any, top_k: Any, top_p: Any) -> _Options:
    return (
        check_number("temperature", temperature, minimum=0.0),
        None if top_k is None else check_int("top_k", top_k),
        None if top_p is None else check_number(
            "top_p", top_p, minimum=0.0, maximum=1.0, min_inclusive=False),
    )


def sample(logits: Tensor, *, temperature: float = 1.0,
           top_k: int | None = None, top_p: float | None = None,
           generator: torch.Generator | None = None) -> Tensor:
    r"""Draw one int64 id per row from :math:`\mathrm{softmax}(z / T)`.

    Temperature first, then :func:`top_k_filter`, then :func:`top_p_filter`.

    Args:
        logits: next-token logits ``(B, V)``.
        temperature: :math:`T \ge 0`; ``0`` is the argmax (greedy).
        top_k: keep the ``top_k`` likeliest tokens (``None``: all).
        top_p: keep the nucleus of mass ``top_p`` (``None``: all).
    """
    check_tensor("logits", logits, ndim=2, floating=True)
    return _draw(logits, _options(temperature, top_k, top_p), generator)


def _draw(logits: Tensor, options: _Options,
          generator: torch.Generator | None) -> Tensor:
    temperature, top_k, top_p = options
    if temperature > 0.0:
        # At least float32: half-precision logits lose small probabilities.
        logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
        logits = logits / temperature
        if top_k is not None:
            logits = top_k_filter(logits, top_k)
        if top_p is not None:
            logits = top_p_filter(logits, top_p)
    if logits.device.type == "cpu":  # elsewhere a check waits for the device
        bad = logits.isnan().any(-1) | (logits == NEG_INF).all(-1)  # (B,)
        if bad.any():
            raise ValueError(
                f"logits row {int(bad.nonzero()[0, 0])} has no possible "
                f"next token: every logit is -inf or one is NaN")
    if temperature == 0.0:  # the argmax survives every filter
        return logits.argmax(dim=-1)
    draws = torch.multinomial(logits.softmax(-1), 1, generator=generator)
    return draws.squeeze(-1)  # (B, 1) -> (B,)


def generate(step: Callable[[Tensor], Tensor], tokens: Tensor,
             max_new_tokens: int, *, temperature: float = 1.0,
             top_k: int | None = None, top_p: float | None = None,
             eos_id: int | None = None, pad_id: int = 0,
             generator: torch.Generator | None = None) -> Tensor:
    """Append one :func:`sample` of ``step(tokens)`` at a time.

    After a row's ``eos_id`` comes ``pad_id``; the loop ends when all ended.

    Args:
        step: the next-token logits ``(B, V)`` of the tokens so far (it may
            keep a cache between calls).
        tokens: the prompts, or start tokens, ``(B, T)``.
        temperature, top_k, top_p: as :func:`sample`.

    Shape:
        - returns a new int64 tensor ``(B, T + n)``, ``n <= max_new_tokens``.
    """
    options = _options(temperature, top_k, top_p)
    max_new_tokens = check_int("max_new_tokens", max_new_tokens, minimum=0)
    check_integer_tensor("tokens", tokens, "token ids", ndim=2)
    out = tokens.to(torch.long, copy=True)  # never the caller's tensor
    done = torch.zeros(out.shape[0], dtype=torch.bool, device=out.device)
    for _ in range(max_new_tokens):
        next_id = _draw(step(out), options, generator)  # (B,)
        if eos_id is not None:
            next_id = next_id.masked_fill(done, pad_id)
            done |= next_id == eos_id
        out = torch.cat((out, next_id[:, None]), dim=1)  # (B, t + 1)
        if eos_id is not None and bool(done.all()):
            break
    return out


def beam_search(step: Callable[[Tensor, Tensor], Tensor], prefix: Tensor, *,
                beam_width: int, max_new_tokens: int,
                eos_id: int | None = None,
                length_penalty: float = 0.0) -> list[tuple[Tensor, float]]:
    r"""Keep the ``beam_width`` likeliest hypotheses at each step.

    Sutskever et al. (2014); ranked by :math:`\frac{1}{n^{\alpha}}
    \sum_{t=1}^{n} \log p(y_t \mid y_{<t})` (Wu et al., 2016).

    Args:
        step: ``step(tokens, parents)``: the next-token log-probabilities
            ``(n, V)`` of the open hypotheses ``tokens`` ``(n, t)``; row ``i``
            extends row ``parents[i]`` of the previous call's ``tokens``, so
            a cache follows with ``index_select(0, parents)``.
        prefix: the tokens to continue ``(t0,)``.
        eos_id: the token that ends a hypothesis (kept), or ``None``.
        length_penalty: :math:`\alpha \ge 0`.

    Shape:
        - returns up to ``beam_width`` pairs ``(tokens (n,), score)``, best
          first.
    """
    check_integer_tensor("prefix", prefix, "integer token ids", ndim=1)
    beam_width = check_int("beam_width", beam_width)
    max_new_tokens = check_int("max_new_tokens", max_new_tokens, minimum=0)
    eos = -1 if eos_id is None else check_int("eos_id", eos_id, minimum=0)
    alpha = check_number("length_penalty", length_penalty, minimum=0.0)
    start = prefix.shape[0]
    beams = prefix.long()[None]  # (1, t0): one open hypothesis
    parents = beams.new_zeros(1)
    totals = torch.zeros(1, dtype=torch.float64, device=prefix.device)
    ended: list[tuple[Tensor, float]] = []
    for _ in range(max_new_tokens):
        log_probs = check_shape("step(tokens, parents)", step(beams, parents),
                                (beams.shape[0], None), "(beams, V)")
        vocab_size = log_probs.shape[1]
        if eos >= vocab_size:
            raise ValueError(
                f"eos_id={eos} is outside the vocabulary (V={vocab_size})")
        scores = totals[:, None] + log_probs.double()  # (beams, V)
        # topk ranks NaN first: it must not take a possible token's place.
        scores = scores.masked_fill(scores.isnan(), NEG_INF)
        flat = scores.flatten()  # (beams, V) -> (beams * V,)
        totals, index = flat.topk(min(beam_width, flat.numel()))
        parents, token = index // vocab_size, index % vocab_size
        beams = torch.cat((beams[parents], token[:, None]), dim=1)
        keep = totals > NEG_INF  # an impossible token is no hypothesis
        ends = keep & (token == eos)  # eos is -1 without eos_id
        ended += zip(beams[ends, start:], totals[ends].tolist(), strict=True)
        keep &= ~ends
        beams, totals, parents = beams[keep], totals[keep], parents[keep]
        if not beams.shape[0]:
            break
    ended += zip(beams[:, start:], totals.tolist(), strict=True)
    if not ended:
        raise ValueError(
            "step gave no possible next token (every log-probability -inf "
            "or NaN), and no hypothesis had ended")
    scored = [(seq, total / max(len(seq), 1) ** alpha) for seq, total in ended]
    return sorted(scored, key=lambda pair: pair[1], reverse=True)[:beam_width]


@contextlib.contextmanager
def _eval_mode(model: nn.Module) -> Iterator[nn.Module]:
    """``model`` in evaluation mode inside the block, its own mode after."""
    was_training = model.training
    try:
        yield model.eval()
    finally:
        model.train(was_training)


def _config(model: nn.Module, name: str) -> Any:
    """``model.config.<name>``, or ``None`` if there is none."""
    return getattr(getattr(model, "config", None), name, None)


def _next_logits(model: nn.Module, seq: Tensor, count: int) -> Tensor:
    """Next-token logits ``(count, V)`` after each of the last ``count``
    prefixes of ``seq`` ``(1, t)``, each cropped to the model's last
    ``config.max_seq_len`` tokens as :meth:`GPT.generate
    <transformer_book.models.gpt.GPT.generate>` crops them."""
    window = _config(model, "max_seq_len")
    if window is None or seq.shape[1] <= window:  # one causal pass
        return model(seq)[0][0, -count:]
    # Longer: the prefixes' windows, as one batch (count, window).
    windows = seq[0, seq.shape[1] - count + 1 - window :].unfold(0, window, 1)
    return model(windows)[0][:, -1]


def _probs(logits: Tensor, temperature: float) -> Tensor:
    r"""float64 :math:`\mathrm{softmax}(z / T)`; the argmax one-hot at 0."""
    if temperature == 0.0:
        return nn.functional.one_hot(
            logits.argmax(-1), logits.shape[-1]).double()
    return (logits.double() / temperature).softmax(-1)


@torch.no_grad()
def speculative_generate(
    target: nn.Module, draft: nn.Module, idx: Tensor, max_new_tokens: int,
    *, k: int = 4, temperature: float = 0.0,
    generator: torch.Generator | None = None, stats: list[int] | None = None,
) -> Tensor:
    r"""Sample ``target`` with ``k`` tokens proposed by ``draft`` per call.

    Speculative sampling (Leviathan et al., 2023; Chen et al., 2023): the
    draft samples :math:`x_1, \dots, x_k` from its distributions
    :math:`q_i`; one target call gives :math:`p_1, \dots, p_{k+1}`. Each
    :math:`x_i` in turn is kept with probability
    :math:`\min(1, p_i(x_i) / q_i(x_i))`; the first one refused is replaced
    by a draw from :math:`\max(0, p_i - q_i)` (normalised), and if all
    :math:`k` are kept, a bonus token comes from :math:`p_{k+1}`. Every
    token then follows the target's distribution exactly; at ``T = 0``
    (one-hot :math:`p`, :math:`q`) the output is the target's greedy one.
    Each model sees at most its last ``config.max_seq_len`` tokens, as
    :meth:`GPT.generate <transformer_book.models.gpt.GPT.generate>` does.

    Args:
        target: the model sampled from, returning ``(logits, loss)`` from
            ``target(idx)`` as :class:`~transformer_book.models.gpt.GPT`.
        draft: a cheaper model of the same kind, on the same vocabulary.
        k: the draft tokens proposed per target call, ``>= 1``.
        temperature: :math:`T \ge 0`, of both models; ``0`` is greedy.
        stats: a list that gets each target call's count of accepted tokens.

    Shape:
        - idx: ``(1, T)``, ``T >= 1``; returns a new int64 tensor
          ``(1, T + max_new_tokens)``.
    """
    check_integer_tensor("idx", idx, "integer token ids", ndim=2)
    if idx.shape[0] != 1 or idx.shape[1] == 0:
        raise ValueError(f"idx must be one prompt (1, T), T >= 1, got shape "
                         f"{tuple(idx.shape)}")
    max_new_tokens = check_int("max_new_tokens", max_new_tokens, minimum=0)
    k = check_int("k", k)
    temperature = check_number("temperature", temperature, minimum=0.0)
    vocab = [_config(m, "vocab_size") or _next_logits(m, idx, 1).shape[-1]
             for m in (target, draft)]
    if vocab[0] != vocab[1]:
        raise ValueError(f"target and draft must share the vocabulary, "
                         f"got sizes {vocab[0]} and {vocab[1]}")
    window = _config(target, "max_seq_len")

    def draw(weights: Tensor) -> Tensor:  # (V,) -> (1, 1)
        if temperature == 0.0:
            return weights.argmax().view(1, 1)
        return torch.multinomial(weights, 1, generator=generator)[None]

    out = idx.to(torch.long, copy=True)  # never the caller's tensor
    end = idx.shape[1] + max_new_tokens
    with _eval_mode(target), _eval_mode(draft):
        while out.shape[1] < end:
            n = out.shape[1]
            k_now = min(k, end - n)
            if window is not None and n < window:  # all k + 1 prefixes
                k_now = min(k_now, window - n)  # fit one window, uncropped
            qs, seq = [], out
            for _ in range(k_now):  # the draft proposes, one token a call
                qs.append(_probs(_next_logits(draft, seq, 1)[0], temperature))
                seq = torch.cat((seq, draw(qs[-1])), dim=1)
            p = _probs(_next_logits(target, seq, k_now + 1), temperature)
            accepted = 0  # the target checks, all positions in one call
            for i, q in enumerate(qs):
                x = seq[0, n + i]
                # T = 0: p and q are one-hot, x is kept iff p(x) = 1.
                u = torch.rand((), generator=generator, dtype=torch.float64,
                               device=p.device) if temperature else 0.0
                if u >= p[i, x] / q[x]:  # kept with prob. min(1, p/q)
                    break
                accepted += 1
            last = p[accepted]  # the bonus token's distribution...
            if accepted < k_now:  # ...or the rejected token's residual
                last = (p[accepted] - qs[accepted]).clamp(min=0.0)
            out = torch.cat((seq[:, : n + accepted], draw(last)), dim=1)
            if stats is not None:
                stats.append(accepted)
    return out[:, :end]
