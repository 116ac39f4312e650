"""From next-token logits to tokens: filters, sampling, one loop, beams."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from ._checks import (
    check_int,
    check_integer_tensor,
    check_number,
    check_shape,
    check_tensor,
)

__all__ = ["beam_search", "generate", "sample", "top_k_filter", "top_p_filter"]

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
            "top_p", top_p, minimum=0.0, maximum=1.0, min_inclusive=False
        ),
    )


def sample(
    logits: Tensor, *, temperature: float = 1.0, top_k: int | None = None,
    top_p: float | None = None, generator: torch.Generator | None = None,
) -> Tensor:
    r"""Draw one int64 id per row from :math:`\mathrm{softmax}(z / T)`.

    Temperature first, then :func:`top_k_filter`, then :func:`top_p_filter`.

    Args:
        logits: next-token logits ``(B, V)``.
        temperature: :math:`T \ge 0`; ``0`` is the argmax (greedy).
        top_k: keep the ``top_k`` likeliest tokens (``None``: all).
        top_p: keep the nucleus of mass ``top_p`` (``None``: all).
        generator: the random generator of the draw.
    """
    check_tensor("logits", logits, ndim=2, floating=True)
    return _draw(logits, _options(temperature, top_k, top_p), generator)


def _draw(
    logits: Tensor, options: _Options, generator: torch.Generator | None
) -> Tensor:
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
                f"next token: every logit is -inf or one is NaN"
            )
    if temperature == 0.0:  # the argmax survives every filter
        return logits.argmax(dim=-1)
    draws = torch.multinomial(logits.softmax(-1), 1, generator=generator)
    return draws.squeeze(-1)  # (B, 1) -> (B,)


def generate(
    step: Callable[[Tensor], Tensor], tokens: Tensor, max_new_tokens: int, *,
    temperature: float = 1.0, top_k: int | None = None,
    top_p: float | None = None, eos_id: int | None = None, pad_id: int = 0,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Append one :func:`sample` of ``step(tokens)`` at a time.

    After a row's ``eos_id`` comes ``pad_id``; the loop ends when all ended.

    Args:
        step: the next-token logits ``(B, V)`` of the tokens so far (it may
            keep a cache between calls).
        tokens: the prompts, or start tokens, ``(B, T)``.
        max_new_tokens: the most tokens to add, ``>= 0``.
        temperature, top_k, top_p: as :func:`sample`.
        eos_id: the token that ends a row, or ``None``.
        pad_id: the token after a row's end.
        generator: the random generator of the draws.

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


def beam_search(
    step: Callable[[Tensor, Tensor], Tensor], prefix: Tensor, *,
    beam_width: int, max_new_tokens: int, eos_id: int | None = None,
    length_penalty: float = 0.0,
) -> list[tuple[Tensor, float]]:
    r"""Keep the ``beam_width`` likeliest hypotheses at each step.

    Sutskever et al. (2014); ranked by :math:`\frac{1}{n^{\alpha}}
    \sum_{t=1}^{n} \log p(y_t \mid y_{<t})` (Wu et al., 2016).

    Args:
        step: ``step(tokens, parents)``: the next-token log-probabilities
            ``(n, V)`` of the open hypotheses ``tokens`` ``(n, t)``; row ``i``
            extends row ``parents[i]`` of the previous call's ``tokens``, so
            a cache follows with ``index_select(0, parents)``.
        prefix: the tokens to continue ``(t0,)``.
        beam_width: hypotheses kept per step, ``>= 1``.
        max_new_tokens: the most tokens added, ``>= 0``.
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
                f"eos_id={eos} is outside the vocabulary (V={vocab_size})"
            )
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
            "or NaN), and no hypothesis had ended"
        )
    scored = [(seq, total / max(len(seq), 1) ** alpha) for seq, total in ended]
    return sorted(scored, key=lambda pair: pair[1], reverse=True)[:beam_width]
