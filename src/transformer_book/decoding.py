"""Turning next-token distributions into text: sampling and beam search.

A language model gives, at each step, logits over the vocabulary for the
next token. This module chooses that token:

- :func:`sample` draws it, after the usual reshaping of the distribution:
  a temperature (``0`` is the argmax, greedy decoding),
  :func:`top_k_filter` (Fan et al., 2018) and
  :func:`top_p_filter`, nucleus sampling (Holtzman et al., 2020);
- :func:`beam_search` keeps the ``beam_width`` most likely prefixes at each
  step (Sutskever et al., 2014), with the length penalty of Wu et al.
  (2016) in its simplest form; :func:`greedy_search` is its width-1 case.

Both searches only need a function from token sequences to next-token
log-probabilities, so a GPT, the encoder-decoder transformer (with its
encoder output bound in) and the RNN decoder all decode through them.
:meth:`~transformer_book.models.gpt.GPT.generate` samples with
:func:`sample`; the key/value cache lives in
:class:`~transformer_book.attention.KVCache`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from ._checks import check_int, check_number, check_tensor
from ._docs import shared_doc

__all__ = [
    "beam_search",
    "greedy_search",
    "sample",
    "top_k_filter",
    "top_p_filter",
]


def _check_logits(logits: Any) -> Tensor:
    check_tensor("logits", logits, floating=True)
    if logits.ndim == 0 or logits.shape[-1] == 0:
        raise ValueError(
            f"logits must have a vocabulary dimension last (..., V) with "
            f"V >= 1, got shape {tuple(logits.shape)}"
        )
    return logits


def _check_top_k(top_k: Any) -> int:
    """``top_k`` must be an int of at least 1."""
    return check_int("top_k", top_k, minimum=1)


def _check_top_p(top_p: Any) -> float:
    """``top_p`` must be a number in ``(0, 1]``."""
    return check_number(
        "top_p", top_p, minimum=0.0, maximum=1.0, min_inclusive=False
    )


def _check_temperature(temperature: Any) -> float:
    """``temperature`` must be a finite number ``>= 0``."""
    return check_number("temperature", temperature, minimum=0.0)


# The Shape and Returns sections of both filters.
_FILTER_SHAPE = """
Shape:
    - logits: ``(..., V)``.
    - returns ``(..., V)``.

Returns:
    A new tensor, ``logits`` where kept and ``-inf`` elsewhere.
"""


@shared_doc(filter_shape=_FILTER_SHAPE)
def top_k_filter(logits: Tensor, k: int) -> Tensor:
    """Keep the ``k`` largest logits of each row, ``-inf`` elsewhere.

    Sampling from the result draws only among the ``k`` most likely
    tokens (Fan et al., 2018). Tokens tied with the ``k``-th largest
    logit are kept too, so a row may keep more than ``k``; a ``k`` above
    the vocabulary size keeps everything.

    Args:
        logits: unnormalised scores.
        k: the number of tokens to keep, at least 1.

    {filter_shape}

    Raises:
        TypeError: if ``logits`` is not a floating tensor or ``k`` not an
            int.
        ValueError: if ``k < 1`` or ``logits`` has no vocabulary
            dimension.

    Example:
        >>> top_k_filter(torch.tensor([1.0, 3.0, 2.0]), 2)
        tensor([-inf, 3., 2.])
    """
    _check_logits(logits)
    k = check_int("k", k, minimum=1)
    if k >= logits.shape[-1]:
        return logits.clone()
    kth = logits.topk(k, dim=-1).values[..., -1:]  # (..., 1)
    return logits.masked_fill(logits < kth, float("-inf"))


@shared_doc(filter_shape=_FILTER_SHAPE)
def top_p_filter(logits: Tensor, p: float) -> Tensor:
    """Keep the smallest set of most likely tokens whose probability >= p.

    Nucleus sampling (Holtzman et al., 2020): sort the tokens by
    probability, and keep them, most likely first, until their total
    reaches ``p``. A token is kept when the tokens before it hold less
    than ``p``, so the most likely token is always kept and ``p = 1``
    keeps every token.

    Args:
        logits: unnormalised scores.
        p: the probability mass to cover, in ``(0, 1]``.

    {filter_shape}

    Raises:
        TypeError: if ``logits`` is not a floating tensor or ``p`` not a
            number.
        ValueError: if ``p`` is outside ``(0, 1]`` or ``logits`` has no
            vocabulary dimension.

    Example:
        >>> probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
        >>> top_p_filter(probs.log(), 0.75).exp()
        tensor([0.5000, 0.3000, 0.0000, 0.0000])
    """
    _check_logits(logits)
    p = check_number("p", p, minimum=0.0, maximum=1.0, min_inclusive=False)
    if p == 1.0:
        return logits.clone()
    order = logits.argsort(dim=-1, descending=True)
    # float64: the running sum decides membership, rounding should not.
    probs = logits.double().softmax(dim=-1).gather(-1, order)
    before = probs.cumsum(dim=-1) - probs  # mass of the more likely tokens
    drop_sorted = before >= p
    drop_sorted[..., 0] = False  # the most likely token, whatever p is
    drop = drop_sorted.scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


def sample(
    logits: Tensor,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    r"""Draw one token per row from reshaped next-token logits.

    The logits are divided by ``temperature`` first, then filtered by
    :func:`top_k_filter`, then by :func:`top_p_filter` (on the tempered
    distribution), then a token is drawn from
    :math:`\mathrm{softmax}`. A temperature below 1 sharpens the
    distribution, above 1 flattens it; ``temperature=0`` is its limit, the
    argmax (greedy decoding), and draws nothing from ``generator``.

    Args:
        logits: next-token logits, one row per sequence.
        temperature: ``>= 0``; ``0`` means argmax.
        top_k: keep only the ``top_k`` most likely tokens; ``None`` keeps
            all.
        top_p: keep the smallest set of most likely tokens whose
            probability reaches ``top_p``, in ``(0, 1]``; ``None`` keeps
            all.
        generator: the random generator for the draw (the global one when
            ``None``).

    Shape:
        - logits: ``(B, V)``.
        - returns ``(B,)``.

    Returns:
        The chosen token ids (``int64``).

    Raises:
        TypeError: if ``logits`` is not a floating tensor or an option has
            the wrong type.
        ValueError: if ``logits`` is not 2-D, ``temperature < 0``,
            ``top_k < 1`` or ``top_p`` is outside ``(0, 1]``; or, when
            sampling (``temperature > 0``), if a row has nothing to draw
            (every logit ``-inf``, or a NaN).

    Example:
        >>> sample(torch.tensor([[0.0, 2.0, 1.0]]), temperature=0)
        tensor([1])
    """
    check_tensor("logits", logits, ndim=2, floating=True)
    _check_logits(logits)
    temperature = _check_temperature(temperature)
    if top_k is not None:
        top_k = _check_top_k(top_k)
    if top_p is not None:
        top_p = _check_top_p(top_p)
    if temperature == 0.0:
        # The argmax survives every filter, so they change nothing here.
        return logits.argmax(dim=-1)
    # At least float32: half-precision logits lose small probabilities.
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
    logits = logits / temperature
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    probs = logits.softmax(dim=-1)
    try:  # multinomial checks the rows (and syncs) anyway: no extra cost
        draws = torch.multinomial(probs, 1, generator=generator)  # (B, 1)
    except RuntimeError:
        bad = ~(probs.isfinite().all(-1) & (probs.sum(-1) > 0))  # (B,)
        if not bool(bad.any()):
            raise
        row = int(bad.nonzero()[0, 0])
        raise ValueError(
            f"logits row {row} has nothing to draw: every logit is -inf "
            f"or one is NaN"
        ) from None
    return draws.squeeze(-1)  # (B, 1) -> (B,)


def _score(total: float, length: int, length_penalty: float) -> float:
    """``total / length ** length_penalty``; an empty hypothesis scores 0."""
    if length == 0:
        return 0.0
    return total / length**length_penalty


def beam_search(
    log_probs_fn: Callable[[Tensor], Tensor],
    prefix: Tensor,
    *,
    beam_width: int,
    max_new_tokens: int,
    eos_id: int | None = None,
    length_penalty: float = 0.0,
) -> list[tuple[Tensor, float]]:
    r"""The ``beam_width`` most likely continuations of ``prefix``, roughly.

    At each step every open hypothesis is extended by every token, and the
    ``beam_width`` extensions with the highest total log-probability are
    kept (Sutskever et al., 2014). An extension that ends with ``eos_id``
    is finished and leaves the beam, so the beam narrows as hypotheses
    finish; the search stops when none is open or after
    ``max_new_tokens`` steps. With ``beam_width=1`` this is greedy
    decoding; a beam at least as wide as the number of possible
    continuations tries them all and finds the most likely one.

    Hypotheses are ranked by the length-normalised score

    .. math::

        s(y) = \frac{\sum_{t=1}^{n} \log p(y_t \mid x, y_{<t})}
                    {n^{\alpha}}

    with :math:`n` the number of new tokens (``eos_id`` included) and
    :math:`\alpha` = ``length_penalty``: ``0`` is the plain sum, which
    favours short hypotheses; ``1`` is the mean log-probability per token
    (a simple form of Wu et al., 2016's penalty). Within one step all
    extensions have the same length, so the penalty only changes the
    final ranking.

    Args:
        log_probs_fn: ``log_probs_fn(tokens)`` takes the hypotheses so far,
            ``prefix`` included, as a ``LongTensor`` ``(beams, t)`` and
            returns the next token's log-probabilities ``(beams, V)``.
        prefix: the tokens to continue (a prompt, or a start token).
        beam_width: the number of hypotheses kept per step, at least 1.
        max_new_tokens: the most tokens added after ``prefix``.
        eos_id: the token that ends a hypothesis (kept as its last
            token); ``None`` when hypotheses never end early.
        length_penalty: the exponent :math:`\alpha` above, ``>= 0``.

    Shape:
        - prefix: ``(t0,)``.
        - each returned token tensor: ``(n,)`` with ``n <= max_new_tokens``.

    Returns:
        Up to ``beam_width`` pairs ``(new_tokens, score)``, best first:
        the tokens after ``prefix`` (``eos_id`` included when reached) and
        :math:`s(y)`. Hypotheses still open after ``max_new_tokens`` steps
        are among them. With ``max_new_tokens=0``, one empty hypothesis
        of score 0.

    Raises:
        TypeError: if ``prefix`` is not an integer tensor or an option has
            the wrong type.
        ValueError: if ``prefix`` is not 1-D, ``beam_width < 1``,
            ``max_new_tokens < 0``, ``length_penalty < 0``, ``eos_id`` is
            outside the vocabulary, ``log_probs_fn`` returns a tensor
            that is not ``(beams, V)``, or no hypothesis is left: every
            token of every open one is impossible (``-inf`` or NaN) and
            none has ended (a hypothesis with no possible token is
            dropped).

    Example:
        >>> table = torch.tensor([[0.6, 0.4], [0.05, 0.95]]).log()
        >>> def log_probs_fn(tokens):  # a bigram model over 2 tokens
        ...     return table[tokens[:, -1]]
        >>> best, score = beam_search(log_probs_fn, torch.tensor([0]),
        ...                           beam_width=2, max_new_tokens=2)[0]
        >>> best.tolist(), round(score, 4)
        ([1, 1], -0.9676)
    """
    prefix = _check_prefix(prefix)
    beam_width = check_int("beam_width", beam_width)
    max_new_tokens = check_int("max_new_tokens", max_new_tokens, minimum=0)
    if eos_id is not None:
        eos_id = check_int("eos_id", eos_id, minimum=0)
    length_penalty = check_number("length_penalty", length_penalty, minimum=0)
    start = prefix.shape[0]
    if max_new_tokens == 0:
        return [(prefix.new_empty(0), 0.0)]
    beams = prefix[None, :]  # (1, t0): one open hypothesis
    totals = torch.zeros(1, dtype=torch.float64, device=prefix.device)
    finished: list[tuple[Tensor, float]] = []
    for _ in range(max_new_tokens):
        log_probs = _call(log_probs_fn, beams, eos_id)  # (beams, V)
        vocab_size = log_probs.shape[1]
        candidates = totals[:, None] + log_probs.double()  # (beams, V)
        # topk ranks NaN first: it must not take a possible token's place.
        candidates = candidates.masked_fill(
            candidates.isnan(), float("-inf")
        )
        flat = candidates.flatten()  # (beams, V) -> (beams * V,)
        width = min(beam_width, flat.numel())
        best, index = flat.topk(width)
        keep = best > float("-inf")  # an impossible token is no hypothesis
        best, index = best[keep], index[keep]
        rows, tokens = index // vocab_size, index % vocab_size
        beams = torch.cat((beams[rows], tokens[:, None]), dim=1)
        totals = best
        if eos_id is not None:
            done = tokens == eos_id
            ended = zip(beams[done], totals[done].tolist(), strict=True)
            finished.extend((seq[start:], total) for seq, total in ended)
            beams, totals = beams[~done], totals[~done]
        if not beams.shape[0]:
            break
    still_open = zip(beams, totals.tolist(), strict=True)
    finished.extend((seq[start:], total) for seq, total in still_open)
    if not finished:
        raise ValueError(
            f"log_probs_fn gave no possible next token (every "
            f"log-probability -inf or NaN) for new token "
            f"{beams.shape[1] - start}, and no hypothesis had ended"
        )
    scored = [
        (seq, _score(total, seq.shape[0], length_penalty))
        for seq, total in finished
    ]
    scored.sort(key=lambda pair: pair[1], reverse=True)
    return scored[:beam_width]


def greedy_search(
    log_probs_fn: Callable[[Tensor], Tensor],
    prefix: Tensor,
    *,
    max_new_tokens: int,
    eos_id: int | None = None,
) -> tuple[Tensor, float]:
    """Greedy decoding: :func:`beam_search` with ``beam_width=1``.

    At each step the most likely next token is appended, until
    ``eos_id`` (kept) or ``max_new_tokens`` tokens.

    Args:
        log_probs_fn: as in :func:`beam_search`.
        prefix: the tokens to continue.
        max_new_tokens: the most tokens added after ``prefix``.
        eos_id: the token that stops decoding, or ``None``.

    Shape:
        - prefix: ``(t0,)``.
        - returns tokens ``(n,)`` with ``n <= max_new_tokens``.

    Returns:
        ``(new_tokens, total_log_prob)``.

    Raises:
        TypeError, ValueError: as :func:`beam_search`.
    """
    return beam_search(
        log_probs_fn,
        prefix,
        beam_width=1,
        max_new_tokens=max_new_tokens,
        eos_id=eos_id,
    )[0]


def _check_prefix(prefix: Any) -> Tensor:
    check_tensor("prefix", prefix, ndim=1)
    if prefix.dtype.is_floating_point or prefix.dtype.is_complex or (
        prefix.dtype == torch.bool
    ):
        raise TypeError(
            f"prefix must hold integer token ids, got {prefix.dtype}"
        )
    return prefix.long()


def _call(
    fn: Callable[[Tensor], Tensor], beams: Tensor, eos_id: int | None
) -> Tensor:
    """``fn(beams)``, checked to be ``(beams, V)`` floats."""
    out = fn(beams)
    check_tensor("log_probs_fn(tokens)", out, ndim=2, floating=True)
    if out.shape[0] != beams.shape[0] or out.shape[1] == 0:
        raise ValueError(
            f"log_probs_fn must return (beams, V) = ({beams.shape[0]}, V) "
            f"log-probabilities, got shape {tuple(out.shape)}"
        )
    if eos_id is not None and eos_id >= out.shape[1]:
        raise ValueError(
            f"eos_id={eos_id} is outside the vocabulary "
            f"(V={out.shape[1]} from log_probs_fn)"
        )
    return out
