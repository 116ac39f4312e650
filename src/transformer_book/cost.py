"""What attention costs: FLOP counts, memory, and their measurement.

FLOPs count the matrix products only, as ``FlopCounterMode`` does: an
``(m, k)`` by ``(k, n)`` product is ``2 m n k`` FLOPs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ._checks import (
    check_choice,
    check_float_dtype,
    check_int,
    check_tensor,
    check_tensor_like,
)

__all__ = ["PARALLEL_STRATEGIES", "AttentionFlops", "TrainingMemory",
           "attention_flops", "kv_cache_bytes", "loglog_slope", "lstm_flops",
           "peak_memory", "score_matrix_bytes", "training_memory"]


def _sizes(**sizes: int) -> list[int]:
    return [check_int(name, value) for name, value in sizes.items()]


@dataclass(frozen=True)
class AttentionFlops:
    """FLOPs of one multi-head attention layer, term by term: the four
    ``d_model x d_model`` projections, the score matrix :math:`Q K^\\top`
    (all heads together) and the weights times the values."""

    projections: int
    scores: int
    weighted_sum: int

    @property
    def quadratic(self) -> int:
        """The terms that grow with ``q_len * kv_len``."""
        return self.scores + self.weighted_sum

    @property
    def total(self) -> int:
        """All matrix-product FLOPs of the layer."""
        return self.projections + self.quadratic


def attention_flops(q_len: int, d_model: int, *, kv_len: int | None = None,
                    batch: int = 1) -> AttentionFlops:
    r"""FLOPs of a multi-head attention forward pass; the heads do not count.

    .. math:: 8 N D^2 + 2 N^2 D + 2 N^2 D \quad (N = L_q = L_k)

    Args:
        q_len, d_model: query length :math:`L_q` and width :math:`D`.
        kv_len: key/value length :math:`L_k`; ``q_len`` when ``None``.
    """
    kv_len = q_len if kv_len is None else kv_len
    q_len, d_model, kv_len, batch = _sizes(
        q_len=q_len, d_model=d_model, kv_len=kv_len, batch=batch)
    # Queries and output: L_q rows; keys and values: L_k rows.
    projections = 2 * batch * (2 * q_len + 2 * kv_len) * d_model**2
    pairwise = 2 * batch * q_len * kv_len * d_model
    return AttentionFlops(projections, pairwise, pairwise)


def lstm_flops(seq_len: int, input_size: int, hidden_size: int, *,
               batch: int = 1) -> int:
    r"""FLOPs of a one-layer LSTM forward pass: :math:`8 N H (I + H)` per
    sequence, linear in the length :math:`N`.

    Args:
        seq_len, input_size, hidden_size: :math:`N`, :math:`I`, :math:`H`.
        batch: batch size.
    """
    seq_len, input_size, hidden_size, batch = _sizes(
        seq_len=seq_len, input_size=input_size, hidden_size=hidden_size,
        batch=batch)
    return 8 * batch * seq_len * hidden_size * (input_size + hidden_size)


def score_matrix_bytes(batch: int, num_heads: int, q_len: int,
                       kv_len: int | None = None, *,
                       dtype: torch.dtype = torch.float32) -> int:
    """Bytes of one ``(B, H, q_len, kv_len)`` score tensor, the one the
    written-out path holds and the fused one avoids (Dao et al., 2022).

    Args:
        batch, num_heads, q_len: ``B``, ``H`` and the query length.
        kv_len: the key length; ``q_len`` when ``None``.
        dtype: the scores' floating dtype.
    """
    kv_len = q_len if kv_len is None else kv_len
    sizes = _sizes(batch=batch, num_heads=num_heads, q_len=q_len,
                   kv_len=kv_len)
    return int(np.prod(sizes)) * check_float_dtype("dtype", dtype).itemsize


def kv_cache_bytes(*, num_layers: int, num_kv_heads: int, head_dim: int,
                   seq_len: int, batch_size: int = 1, bytes_per_value: int = 2,
                   window: int | None = None) -> int:
    r"""Bytes of a decoder's key/value cache after ``seq_len`` tokens:
    :math:`2 \cdot L \cdot G \cdot d_h \cdot \min(N, W) \cdot B \cdot b`
    (keys and values). Grouped-query attention (Ainslie et al., 2023)
    shrinks :math:`G`.

    Args:
        num_layers, num_kv_heads, head_dim: :math:`L`, :math:`G`,
            :math:`d_h`.
        seq_len, batch_size: tokens per sequence :math:`N`, sequences
            :math:`B`.
        bytes_per_value: :math:`b`.
        window: a sliding window :math:`W` that caps the positions kept
            (Mistral's); ``None``: every position.
    """
    sizes = _sizes(num_layers=num_layers, num_kv_heads=num_kv_heads,
                   head_dim=head_dim, seq_len=seq_len, batch_size=batch_size,
                   bytes_per_value=bytes_per_value)
    if window is not None:
        sizes[3] = min(sizes[3], check_int("window", window))
    return 2 * int(np.prod(sizes, dtype=object))


def peak_memory(fn: Callable[[], object], *,
                device: torch.device | str | None = None) -> int:
    """Peak bytes allocated while ``fn()`` runs, above those in use before
    (read from CUDA's allocator or the CPU profiler's allocation events).

    Args:
        device: ``"cpu"`` (when ``None``) or a CUDA device.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    try:
        kind = torch.device("cpu" if device is None else device).type
    except (RuntimeError, TypeError):  # "gpu": named in the error below
        kind = str(device)
    if check_choice("device", kind, ("cpu", "cuda")) == "cuda":
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        fn()
        torch.cuda.synchronize(device)
        return int(torch.cuda.max_memory_allocated(device) - before)
    from torch.profiler import ProfilerActivity, profile

    # Kineto logs every profiler start to stderr, which a notebook shows;
    # it reads the level once. A level the caller set is left alone.
    quiet = "KINETO_LOG_LEVEL" not in os.environ
    os.environ.setdefault("KINETO_LOG_LEVEL", "9")
    try:
        with profile(activities=[ProfilerActivity.CPU],
                     profile_memory=True) as p:
            fn()
    finally:
        if quiet:
            os.environ.pop("KINETO_LOG_LEVEL", None)
    events = sorted((e.start_ns(), e.nbytes())
                    for e in p.profiler.kineto_results.events()
                    if e.name() == "[memory]"
                    and e.device_type().name == "CPU")
    running = np.cumsum([nbytes for _, nbytes in events])
    return int(max(0, running.max(initial=0)))


def loglog_slope(x: Sequence[float] | np.ndarray,
                 y: Sequence[float] | np.ndarray) -> float:
    """The least-squares slope of ``log y`` against ``log x``: ``p`` for a
    cost that grows like ``x**p``.

    Args:
        x: positive values, at least two distinct.
        y: positive values, one per ``x``.
    """
    xs, ys = _positive("x", x), _positive("y", y)
    if xs.shape != ys.shape or np.unique(xs).size < 2:
        raise ValueError(
            f"x and y must have the same length, with two distinct x; got "
            f"{xs.size} x ({np.unique(xs).size} distinct) and {ys.size} y")
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


def _positive(name: str, values: Any) -> np.ndarray:
    """``values`` as a 1-D float array, positive and finite."""
    t = check_tensor_like(name, values, "a sequence of numbers")
    array = check_tensor(name, t, ndim=1).double().numpy()
    bad = array[~(np.isfinite(array) & (array > 0))]
    if bad.size:
        raise ValueError(f"{name} must be positive and finite (log "
                         f"scale), got {bad[0]}")
    return array


#: Ways to spread training over devices, and which model states each
#: shards (``P`` parameters, ``G`` gradients, ``O`` optimizer states).
PARALLEL_STRATEGIES: dict[str, str] = {
    "ddp": "",  # data parallel: a full replica on every device
    "zero1": "O",  # ZeRO stage 1: optimizer states sharded
    "zero2": "GO",  # ZeRO stage 2: and gradients
    "fsdp": "PGO",  # ZeRO stage 3 / FSDP: everything sharded
    "tensor": "PGO",  # each weight matrix split across the devices
    "pipeline": "PGO",  # the layers split into consecutive stages
}


@dataclass(frozen=True)
class TrainingMemory:
    """Bytes of model state one device holds during training: the
    weights, their gradients and the optimizer's states (AdamW: two
    moments per weight)."""

    parameters: int
    gradients: int
    optimizer: int

    @property
    def total(self) -> int:
        """All three together (activations not included)."""
        return self.parameters + self.gradients + self.optimizer


def training_memory(
    num_parameters: int, num_devices: int = 1, *, strategy: str = "ddp",
    param_bytes: int = 4, grad_bytes: int = 4, optimizer_bytes: int = 8,
) -> TrainingMemory:
    """Model-state bytes per device (Rajbhandari et al., 2020): a sharded
    state is split over the devices, rounded up; activations not counted.

    Args:
        num_parameters, num_devices: the parameters and the devices.
        strategy: one of :data:`PARALLEL_STRATEGIES`.
        param_bytes, grad_bytes, optimizer_bytes: bytes per parameter.
    """
    num_parameters, num_devices = _sizes(
        num_parameters=num_parameters, num_devices=num_devices)
    sharded = PARALLEL_STRATEGIES[
        check_choice("strategy", strategy, tuple(PARALLEL_STRATEGIES))]
    sizes = {"P": check_int("param_bytes", param_bytes, minimum=0),
             "G": check_int("grad_bytes", grad_bytes, minimum=0),
             "O": check_int("optimizer_bytes", optimizer_bytes, minimum=0)}

    def per_device(state: str) -> int:
        full = num_parameters * sizes[state]
        return -(-full // num_devices) if state in sharded else full

    return TrainingMemory(per_device("P"), per_device("G"), per_device("O"))
