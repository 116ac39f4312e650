"""What attention costs: analytic FLOP counts, memory and measurement.

The formulas count the floating-point operations of the matrix products
only, as :class:`torch.utils.flop_counter.FlopCounterMode` does: a product
of an ``(m, k)`` and a ``(k, n)`` matrix is ``m n k`` multiply-adds, which
is ``2 m n k`` FLOPs. Bias additions, the scale, masking and the softmax
are left out; they are linear in the number of scores or activations and
small next to the products.

:func:`peak_memory` measures the bytes a block allocates on top of what was
already in use, on CUDA from the caching allocator's statistics and on the
CPU from the allocation events of ``torch.profiler``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ._checks import check_choice, check_int

__all__ = [
    "PARALLEL_STRATEGIES",
    "AttentionFlops",
    "TrainingMemory",
    "attention_flops",
    "loglog_slope",
    "lstm_flops",
    "peak_memory",
    "score_matrix_bytes",
    "training_memory",
]

_KINETO_LOG_LEVEL = "KINETO_LOG_LEVEL"


def _check_sizes(**sizes: Any) -> None:
    for name, value in sizes.items():
        check_int(name, value)


@dataclass(frozen=True)
class AttentionFlops:
    """FLOPs of one multi-head attention layer, term by term.

    Attributes:
        projections: the four ``d_model x d_model`` projections
            (queries, keys, values and output), linear in the lengths.
        scores: the score matrix :math:`Q K^\\top`, all heads together.
        weighted_sum: the product of the weights with the values.
    """

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


def attention_flops(
    q_len: int,
    d_model: int,
    *,
    kv_len: int | None = None,
    batch: int = 1,
) -> AttentionFlops:
    r"""FLOPs of a multi-head attention forward pass (matrix products only).

    With :math:`N = L_q = L_k` (self-attention) and width :math:`D`, per
    sequence:

    .. math::

        \underbrace{8 N D^2}_{\text{projections}}
        + \underbrace{2 N^2 D}_{Q K^\top}
        + \underbrace{2 N^2 D}_{A V}

    The number of heads does not appear: :math:`H` heads of width
    :math:`D / H` cost what one head of width :math:`D` costs.

    Args:
        q_len: query length :math:`L_q`.
        d_model: model width :math:`D`.
        kv_len: key/value length :math:`L_k`; ``q_len`` when ``None``.
        batch: batch size :math:`B`.

    Returns:
        The FLOPs split into projections, scores and weighted sum.

    Raises:
        TypeError: if a size is not an int.
        ValueError: if a size is not positive.

    Example:
        >>> f = attention_flops(q_len=4, d_model=8)
        >>> f.projections, f.scores, f.weighted_sum
        (2048, 256, 256)
    """
    kv_len = q_len if kv_len is None else kv_len
    _check_sizes(q_len=q_len, d_model=d_model, kv_len=kv_len, batch=batch)
    # Queries and output: L_q rows; keys and values: L_k rows.
    projections = 2 * batch * (2 * q_len + 2 * kv_len) * d_model**2
    pairwise = 2 * batch * q_len * kv_len * d_model
    return AttentionFlops(projections, pairwise, pairwise)


def lstm_flops(
    seq_len: int, input_size: int, hidden_size: int, *, batch: int = 1
) -> int:
    r"""FLOPs of a one-layer LSTM forward pass (matrix products only).

    Each step maps :math:`x_t` and :math:`h_{t-1}` to four gates:
    :math:`2 \cdot 4 H (I + H)` FLOPs, so :math:`8 N H (I + H)` per
    sequence, linear in the length :math:`N` (Hochreiter and Schmidhuber,
    1997).

    Args:
        seq_len: sequence length :math:`N`.
        input_size: input width :math:`I`.
        hidden_size: hidden width :math:`H`.
        batch: batch size :math:`B`.

    Returns:
        The FLOPs of the gates' matrix products.

    Raises:
        TypeError: if a size is not an int.
        ValueError: if a size is not positive.

    Example:
        >>> lstm_flops(seq_len=10, input_size=3, hidden_size=5)
        3200
    """
    _check_sizes(
        seq_len=seq_len,
        input_size=input_size,
        hidden_size=hidden_size,
        batch=batch,
    )
    return 8 * batch * seq_len * hidden_size * (input_size + hidden_size)


def score_matrix_bytes(
    batch: int,
    num_heads: int,
    q_len: int,
    kv_len: int | None = None,
    *,
    dtype: torch.dtype = torch.float32,
) -> int:
    """Bytes of one ``(B, H, q_len, kv_len)`` score (or weight) tensor.

    The explicit attention path materialises tensors of this size; the
    fused path can avoid it (Dao et al., 2022).

    Args:
        batch: batch size ``B``.
        num_heads: number of heads ``H``.
        q_len: query length.
        kv_len: key length; ``q_len`` when ``None``.
        dtype: element type of the scores.

    Returns:
        ``B * H * q_len * kv_len`` times the size of one element.

    Raises:
        TypeError: if a size is not an int or ``dtype`` is not a dtype.
        ValueError: if a size is not positive.

    Example:
        >>> score_matrix_bytes(1, 2, 3, 4, dtype=torch.float16)  # 24 * 2
        48
    """
    kv_len = q_len if kv_len is None else kv_len
    _check_sizes(batch=batch, num_heads=num_heads, q_len=q_len, kv_len=kv_len)
    if not isinstance(dtype, torch.dtype):
        raise TypeError(
            f"dtype must be a torch.dtype, got {type(dtype).__name__}"
        )
    return batch * num_heads * q_len * kv_len * dtype.itemsize


def peak_memory(
    fn: Callable[[], object], *, device: torch.device | str | None = None
) -> int:
    """Peak bytes allocated while ``fn()`` runs, above those in use before.

    On CUDA this reads ``torch.cuda.max_memory_allocated`` (after resetting
    the peak). On the CPU it replays the allocation and free events that
    ``torch.profiler`` records with ``profile_memory=True`` and returns
    the highest running total; allocations made inside kernels through
    PyTorch's allocator are included. What ``fn`` returns is dropped
    before the CPU total is read, which does not change the peak.

    Args:
        fn: a callable with no arguments.
        device: ``"cpu"`` or a CUDA device; the CPU when ``None``.

    Returns:
        The peak extra memory in bytes (0 if nothing was allocated).

    Raises:
        TypeError: if ``fn`` is not callable.
        ValueError: for a device other than the CPU or CUDA.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    device = _cpu_or_cuda(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        fn()
        torch.cuda.synchronize(device)
        return int(torch.cuda.max_memory_allocated(device) - before)
    from torch.profiler import ProfilerActivity, profile

    # Kineto logs every profiler start and stop to the process's stderr,
    # which a notebook shows as cell output; its log level is read when
    # the first profiler starts. A level the caller set is left alone.
    quiet = _KINETO_LOG_LEVEL not in os.environ
    if quiet:
        os.environ[_KINETO_LOG_LEVEL] = "9"
    try:
        with profile(
            activities=[ProfilerActivity.CPU], profile_memory=True
        ) as p:
            fn()
    finally:
        if quiet:
            os.environ.pop(_KINETO_LOG_LEVEL, None)
    events = [
        (e.start_ns(), e.nbytes())
        for e in p.profiler.kineto_results.events()
        if e.name() == "[memory]" and e.device_type().name == "CPU"
    ]
    events.sort(key=lambda item: item[0])
    running = peak = 0
    for _, nbytes in events:
        running += nbytes
        peak = max(peak, running)
    return int(peak)


def _cpu_or_cuda(device: Any) -> torch.device:
    try:
        parsed = torch.device("cpu" if device is None else device)
    except (RuntimeError, TypeError):
        parsed = None
    if parsed is None or parsed.type not in ("cpu", "cuda"):
        raise ValueError(
            f"device={str(device)!r}: peak memory is measured on 'cpu' or "
            "'cuda' only"
        )
    return parsed


def loglog_slope(
    x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray
) -> float:
    """Least-squares slope of ``log y`` against ``log x``.

    A cost that grows like ``x**p`` has slope ``p``.

    Args:
        x: positive abscissae, at least two distinct values.
        y: positive values, one per ``x``.

    Returns:
        The fitted exponent ``p``.

    Raises:
        TypeError: if ``x`` or ``y`` does not hold numbers.
        ValueError: if the lengths differ, fewer than two distinct ``x``
            are given, or a value is not positive and finite (NaN
            included).

    Example:
        >>> round(loglog_slope([10, 20, 40], [3, 12, 48]), 6)
        2.0
    """
    xs, ys = _positive_vector("x", x), _positive_vector("y", y)
    if xs.shape != ys.shape:
        raise ValueError(
            f"x and y must have the same length, got {xs.size} and {ys.size}"
        )
    if np.unique(xs).size < 2:
        raise ValueError("x must hold at least two distinct values")
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


def _positive_vector(name: str, values: Any) -> np.ndarray:
    """``values`` as a 1-D float array of positive, finite numbers."""
    try:
        array = np.asarray(values)
        if array.dtype.kind in "USb":  # numpy would parse "2" as 2.0
            raise TypeError
        array = array.astype(float)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must hold numbers") from None
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {array.shape}")
    bad = array[~(np.isfinite(array) & (array > 0))]
    if bad.size:
        raise ValueError(
            f"{name} must be positive and finite (log scale), got {bad[0]}"
        )
    return array


# --------------------------------------------------------------------------
# Training memory per device under data, sharded, tensor and pipeline
# parallelism
# --------------------------------------------------------------------------

#: The ways to spread training over devices that :func:`training_memory`
#: knows, and which of the model states each one shards (``P`` parameters,
#: ``G`` gradients, ``O`` optimizer states; the others are replicated).
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
    """Bytes of model state that one device holds during training.

    Attributes:
        parameters: the weights.
        gradients: one gradient per weight.
        optimizer: the optimizer's states (AdamW: two moments per weight).
    """

    parameters: int
    gradients: int
    optimizer: int

    @property
    def total(self) -> int:
        """All three together (activations not included)."""
        return self.parameters + self.gradients + self.optimizer


def training_memory(
    num_parameters: int,
    num_devices: int = 1,
    *,
    strategy: str = "ddp",
    param_bytes: int = 4,
    grad_bytes: int = 4,
    optimizer_bytes: int = 8,
) -> TrainingMemory:
    """Model-state bytes per device for ``num_parameters`` on ``num_devices``.

    Each parameter costs ``param_bytes`` for its value, ``grad_bytes`` for
    its gradient and ``optimizer_bytes`` of optimizer state: 4 + 4 + 8 = 16
    bytes for float32 training with AdamW, and also 16 for mixed precision
    with bfloat16 weights and gradients (2 + 2) and float32 master weights
    and moments (12) (Rajbhandari et al., 2020). Data parallelism
    (``"ddp"``) keeps all of it on every device; ZeRO's stages shard the
    optimizer states (``"zero1"``), then the gradients (``"zero2"``), then
    the parameters too (``"fsdp"``, stage 3) across the devices, which
    gather what they need just in time. Tensor and pipeline parallelism
    split the model itself (each weight matrix, or the stack of layers),
    so each device also holds ``1 / D`` of every state; the arithmetic
    here is that ideal split (small replicated pieces such as LayerNorms
    and rounding to whole layers are ignored). Activations depend on the
    batch and the sequence length and are not counted.

    Args:
        num_parameters: the model's parameter count ``N``.
        num_devices: the number of devices ``D``.
        strategy: one of :data:`PARALLEL_STRATEGIES`.
        param_bytes: bytes per parameter value.
        grad_bytes: bytes per gradient value.
        optimizer_bytes: bytes of optimizer state per parameter.

    Returns:
        The bytes each device holds; a sharded state is divided by ``D``
        and rounded up.

    Raises:
        TypeError: if a count is not an int.
        ValueError: if a count is below 1 (bytes below 0) or ``strategy``
            is unknown.

    Example:
        >>> memory = training_memory(1_000_000_000, 8, strategy="fsdp")
        >>> memory.total / 1e9
        2.0
        >>> training_memory(1_000_000_000, 8).total / 1e9
        16.0
    """
    num_parameters = check_int("num_parameters", num_parameters)
    num_devices = check_int("num_devices", num_devices)
    sharded = PARALLEL_STRATEGIES[
        check_choice("strategy", strategy, tuple(PARALLEL_STRATEGIES))
    ]
    sizes = {
        "P": check_int("param_bytes", param_bytes, minimum=0),
        "G": check_int("grad_bytes", grad_bytes, minimum=0),
        "O": check_int("optimizer_bytes", optimizer_bytes, minimum=0),
    }

    def per_device(state: str) -> int:
        full = num_parameters * sizes[state]
        return -(-full // num_devices) if state in sharded else full

    return TrainingMemory(
        parameters=per_device("P"),
        gradients=per_device("G"),
        optimizer=per_device("O"),
    )
