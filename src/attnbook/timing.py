"""Honest timing on CPU or GPU: medians of synchronised runs, measured peak memory, FLOP counts, device report.

Everything here runs unchanged on CPU and CUDA. Times come from `torch.utils.benchmark.Timer`, which warms
up, synchronises the accelerator around each timed block and repeats until `min_run_time` has passed; we
report the median and the interquartile range (IQR), which ignore the odd slow run. Throughput is compared
with `matmul_throughput`: the best FLOP rate of several matrix products (square ones and the operation's own
products) timed the same way, in the same dtype, with the same threads, in the same run. A result then reads as
"x % of the measured matmul throughput", and `MatmulThroughput.percent` refuses a rate above it, so no
percentage exceeds 100. (A datasheet peak is another reference: papers quote it; this module never measures it.)
FLOP counts: `attention_flops` (the attention core, QK^T and PV) and `layer_flops` (a whole Transformer layer:
the attention core, the Q, K, V and output projections, and the feed-forward network).
"""
from __future__ import annotations

import contextlib
import math
import os
import platform
import sys
import warnings
from dataclasses import dataclass

import torch

from ._validate import require_int

__all__ = [
    "Timing",
    "benchmark",
    "peak_memory",
    "matmul_peak",
    "MatmulThroughput",
    "matmul_throughput",
    "matmul_flops",
    "format_rate",
    "attention_matmul_shapes",
    "attention_flops",
    "LayerFlops",
    "layer_flops",
    "score_matrix_bytes",
    "kv_cache_bytes",
    "device_report",
    "format_device_report",
    "sdpa_backends",
]


@dataclass(frozen=True)
class Timing:
    """The result of `benchmark`: median and IQR of the time per call, in seconds."""

    median_s: float
    iqr_s: float
    n_runs: int  # timed blocks; each block makes `calls_per_run` calls and counts as one sample
    calls_per_run: int
    num_threads: int

    def __str__(self) -> str:
        """E.g. "1.23 ms ± 0.05 (IQR) over 40 runs", or "... over 3 runs of 100 calls" when runs are blocks."""
        scale, unit = _time_unit(self.median_s)
        median = self.median_s / scale
        rounded = float(f"{median:.3g}")  # 3 significant digits; 0.9997 rounds to 1.00
        decimals = max(0, 2 - math.floor(math.log10(rounded))) if rounded > 0 else 2
        runs = f"{self.n_runs} run" + ("" if self.n_runs == 1 else "s")
        calls = f" of {self.calls_per_run} calls" if self.calls_per_run > 1 else ""
        return f"{median:.{decimals}f} {unit} ± {self.iqr_s / scale:.{decimals}f} (IQR) over {runs}{calls}"


def _time_unit(seconds: float) -> tuple[float, str]:
    """The unit (its size in seconds and its symbol) that shows `seconds` with 1 to 3 digits before the point."""
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if seconds >= scale * 0.9995:  # 999.7 µs prints as 1.00 ms, not 1000 µs
            return scale, unit
    return 1e-9, "ns"


def benchmark(fn, *args, min_run_time: float = 0.2, **kwargs) -> Timing:
    """Time `fn(*args, **kwargs)`: one warm-up call, then `torch.utils.benchmark` blocks until `min_run_time` s.

    The Timer synchronises the accelerator before reading the clock, so asynchronous CUDA work is counted,
    and runs with all of torch's current threads (its own default is 1 thread, which would understate a CPU).
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    if isinstance(min_run_time, bool) or not isinstance(min_run_time, (int, float)) or not min_run_time > 0:
        raise ValueError(f"min_run_time must be a positive number of seconds, got {min_run_time!r}")
    from torch.utils.benchmark import Timer

    fn(*args, **kwargs)  # warm-up: lazy initialisation, caches, kernel selection
    threads = torch.get_num_threads()
    timer = Timer(
        stmt="fn(*args, **kwargs)",
        globals={"fn": fn, "args": args, "kwargs": kwargs},
        num_threads=threads,
    )
    m = timer.blocked_autorange(min_run_time=min_run_time)
    return Timing(
        median_s=float(m.median), iqr_s=float(m.iqr), n_runs=len(m.times), calls_per_run=int(m.number_per_run),
        num_threads=threads,
    )


def peak_memory(fn, *args, **kwargs) -> int:
    """Bytes of tensor memory `fn(*args, **kwargs)` holds at its peak, above what was allocated before the call.

    Measured, not computed, in both cases from PyTorch's own allocator:
    - CUDA: after one warm-up call (library workspaces stay allocated), `torch.cuda.reset_peak_memory_stats`,
      then `torch.cuda.max_memory_allocated()` minus `torch.cuda.memory_allocated()` before the call.
    - CPU: PyTorch keeps no peak statistic for its CPU allocator, but the profiler, with `profile_memory=True`,
      records every allocation and free that allocator makes (including those of worker threads and
      inside fused kernels), with timestamps. The peak is the maximum of their running sum. This measures the
      same quantity as the CUDA branch, exactly and in-process, while the peak resident memory of a process
      (ru_maxrss) also moves with the C library's caching of freed memory and with pages never touched.
    The device is that of the first tensor among the arguments (CPU when there is none), so pass the
    tensors as arguments rather than through a closure. The result includes the returned tensors
    (they are allocated during the call).
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    if _device_of(args, kwargs).type == "cuda":
        fn(*args, **kwargs)  # warm-up
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        fn(*args, **kwargs)
        torch.cuda.synchronize()
        return max(0, torch.cuda.max_memory_allocated() - base)
    return _cpu_peak_memory(fn, args, kwargs)


def _device_of(args, kwargs) -> torch.device:
    """The device of the first tensor among the arguments, else the CPU."""
    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.Tensor):
            return a.device
    return torch.device("cpu")


def _cpu_peak_memory(fn, args, kwargs) -> int:
    """Peak of the running sum of CPU allocations and frees that the profiler records during fn."""
    from torch.profiler import ProfilerActivity, profile

    prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
    with _quiet_stderr():  # the profiler prints a timestamped banner to stderr at start and stop
        prof.start()
    try:
        fn(*args, **kwargs)
    finally:
        with _quiet_stderr():
            prof.stop()
    events = [
        e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]" and e.device_type().name == "CPU"
    ]
    live = peak = 0
    for e in sorted(events, key=lambda e: e.start_ns()):
        live += e.nbytes()  # > 0 for an allocation, < 0 for a free
        peak = max(peak, live)
    return int(peak)


@contextlib.contextmanager
def _quiet_stderr():
    """Send file descriptor 2 to /dev/null for the duration (catches C++ prints that sys.stderr does not)."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (AttributeError, OSError, ValueError):  # no real stderr (pythonw, some embedders): nothing to silence
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def matmul_peak(device="cpu", dtype: torch.dtype = torch.float32, n: int | None = None) -> float:
    """FLOP/s of one (n, n) @ (n, n) product measured now: 2 n^3 / median time. n defaults per device.

    One shape, timed once: a quick figure, not a reference for percentages. `matmul_throughput` is that
    reference (several shapes, several rounds, the best kept).
    """
    device = torch.device(device)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point torch.dtype, got {dtype!r}")
    if n is None:
        n = 4096 if device.type == "cuda" else 1024  # CPU: ~10 ms per product on 2 cores, near the BLAS peak
    require_int(n, "n", minimum=1)
    g = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, generator=g, device=device, dtype=dtype)  # (n, n)
    b = torch.randn(n, n, generator=g, device=device, dtype=dtype)  # (n, n)
    t = benchmark(torch.matmul, a, b)
    return 2.0 * n**3 / t.median_s


Shape = tuple  # (batch, m, k, n): a batch of (m, k) @ (k, n) matrix products

# Square sizes that `matmul_throughput` times when given no shapes: large enough to run near the BLAS's best,
# small enough to take a fraction of a second each (CPU, one thread: about 10 ms for 1024).
DEFAULT_MATMUL_SIZES = {"cpu": (256, 512, 1024), "cuda": (2048, 4096, 8192)}


def _check_shape(shape, name: str) -> tuple[int, int, int, int]:
    """`shape` as a (batch, m, k, n) tuple of positive ints, else TypeError/ValueError naming `name`."""
    if not isinstance(shape, (tuple, list)) or len(shape) != 4:
        raise ValueError(f"{name} must be a (batch, m, k, n) tuple of 4 positive ints, got {shape!r}")
    for part, value in zip(("batch", "m", "k", "n"), shape):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must hold ints, got {part}={value!r} in {shape!r}")
        if value < 1:
            raise ValueError(f"{name} must hold positive ints, got {part}={value} in {shape!r}")
    return tuple(shape)


def matmul_flops(shape) -> int:
    """FLOPs of a batch of matrix products, `shape` = (batch, m, k, n): 2 * batch * m * k * n."""
    b, m, k, n = _check_shape(shape, "shape")
    return 2 * b * m * k * n


def attention_matmul_shapes(batch: int, heads: int, q_len: int, k_len: int, d_head: int) -> list[tuple]:
    """The two matrix products of attention, as (batch, m, k, n) shapes for `matmul_throughput`:
    QK^T, (q_len, d_head) @ (d_head, k_len), and PV, (q_len, k_len) @ (k_len, d_head), in each of batch * heads.

    Their FLOPs add up to `attention_flops(batch, heads, q_len, k_len, d_head)`. Attention does these products and
    more (scaling, softmax), so a matmul throughput that includes them bounds what attention can reach.
    """
    for name, value in (("batch", batch), ("heads", heads), ("q_len", q_len), ("k_len", k_len), ("d_head", d_head)):
        require_int(value, name, minimum=1)
    return [(batch * heads, q_len, d_head, k_len), (batch * heads, q_len, k_len, d_head)]


def _format_shape(shape) -> str:
    """(1, 512, 512, 512) -> "(512, 512) @ (512, 512)"; (4, 256, 64, 256) -> "4 × (256, 64) @ (64, 256)"."""
    b, m, k, n = shape
    product = f"({m}, {k}) @ ({k}, {n})"
    return product if b == 1 else f"{b} × {product}"


def format_rate(flops_per_s: float) -> str:
    """A FLOP rate with its unit: "38.2 GFLOP/s", or "412.0 TFLOP/s" from 1e12 FLOP/s up."""
    if isinstance(flops_per_s, bool) or not isinstance(flops_per_s, (int, float)) or not flops_per_s >= 0:
        raise ValueError(f"flops_per_s must be a non-negative number, got {flops_per_s!r}")
    if flops_per_s >= 1e12:
        return f"{flops_per_s / 1e12:,.1f} TFLOP/s"
    return f"{flops_per_s / 1e9:,.1f} GFLOP/s"


@dataclass(frozen=True)
class MatmulThroughput:
    """The measured matmul throughput: the best FLOP rate among matrix products timed on one device, in one
    dtype, with one thread count. `rates` maps each (batch, m, k, n) shape to its best rate; `flops_per_s` is
    the largest of them (checked on construction), so the reference is at least as fast as every product in it.
    """

    flops_per_s: float
    best_shape: tuple
    rates: dict
    device: str
    dtype: torch.dtype
    num_threads: int
    rounds: int

    def __post_init__(self):
        if not isinstance(self.rates, dict) or not self.rates:
            raise ValueError(f"rates must be a non-empty dict of shape -> FLOP/s, got {self.rates!r}")
        for shape, rate in self.rates.items():
            _check_shape(shape, "rates")
            if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 < rate < math.inf:
                raise ValueError(f"rates must hold positive finite FLOP/s, got {rate!r} for {shape!r}")
        if self.best_shape not in self.rates:
            raise ValueError(f"best_shape {self.best_shape!r} is not one of the measured shapes")
        best = max(self.rates.values())
        if self.flops_per_s != best or self.rates[self.best_shape] != best:
            raise ValueError(f"flops_per_s must be the best of rates ({best!r}) and best_shape its shape, "
                             f"got {self.flops_per_s!r} for {self.best_shape!r}")
        if not isinstance(self.dtype, torch.dtype):
            raise TypeError(f"dtype must be a torch.dtype, got {self.dtype!r}")
        require_int(self.num_threads, "num_threads", minimum=1)
        require_int(self.rounds, "rounds", minimum=1)

    def percent(self, flops_per_s: float) -> float:
        """`flops_per_s` as a percentage of the measured matmul throughput, between 0 and 100.

        A rate above the reference raises ValueError rather than printing more than 100%: it means the
        reference missed the machine's best (time more shapes or more rounds, or pass the rate as `at_least`).
        """
        if isinstance(flops_per_s, bool) or not isinstance(flops_per_s, (int, float)):
            raise TypeError(f"flops_per_s must be a number, got {type(flops_per_s).__name__}")
        if not 0 <= flops_per_s < math.inf:
            raise ValueError(f"flops_per_s must be a non-negative finite number, got {flops_per_s!r}")
        if flops_per_s > self.flops_per_s:
            raise ValueError(
                f"flops_per_s={flops_per_s:.4g} is above the measured matmul throughput ({self.flops_per_s:.4g} "
                "FLOP/s), so its percentage would exceed 100: measure the reference with more shapes or rounds, "
                "e.g. matmul_throughput(..., at_least=flops_per_s)")
        return 100.0 * flops_per_s / self.flops_per_s

    def merged(self, other: "MatmulThroughput") -> "MatmulThroughput":
        """Both measurements as one: every shape's best rate, and the best overall. Same device, dtype, threads."""
        if not isinstance(other, MatmulThroughput):
            raise TypeError(f"other must be a MatmulThroughput, got {type(other).__name__}")
        for field in ("device", "dtype", "num_threads"):
            if getattr(self, field) != getattr(other, field):
                raise ValueError(f"other was measured with {field}={getattr(other, field)!r}, this one with "
                                 f"{getattr(self, field)!r}: a reference holds one device, dtype and thread count")
        rates = dict(self.rates)
        for shape, rate in other.rates.items():
            rates[shape] = max(rate, rates.get(shape, 0.0))
        best_shape = max(rates, key=rates.get)
        return MatmulThroughput(rates[best_shape], best_shape, rates, self.device, self.dtype, self.num_threads,
                                self.rounds + other.rounds)

    def __str__(self) -> str:
        """E.g. "measured matmul throughput: 105.7 GFLOP/s, the best of 3 shapes ((512, 512) @ (512, 512)), ..."."""
        shapes = f"{len(self.rates)} shape" + ("" if len(self.rates) == 1 else "s")
        threads = f"{self.num_threads} thread" + ("" if self.num_threads == 1 else "s")
        return (f"measured matmul throughput: {format_rate(self.flops_per_s)}, the best of {shapes} "
                f"(fastest: {_format_shape(self.best_shape)}), {str(self.dtype).removeprefix('torch.')}, "
                f"{self.device}, {threads}")


def matmul_throughput(device="cpu", dtype: torch.dtype = torch.float32, shapes=None, rounds: int = 2,
                      min_run_time: float = 0.05, at_least: float | None = None,
                      max_rounds: int = 10) -> MatmulThroughput:
    """Measure the matmul throughput: time every shape in `rounds` rounds, keep each shape's best rate.

    `shapes` are (batch, m, k, n) tuples (`attention_matmul_shapes` gives attention's own); by default, the
    squares of `DEFAULT_MATMUL_SIZES` for the device. The rounds go over all shapes in turn, so a busy moment
    of a shared machine slows one measurement of each shape, not every measurement of one. Each rate is
    FLOPs / median time of `benchmark`, with torch's current threads.

    `at_least`: a rate that some operation built from these products reached (attention's FLOP/s, say). A
    product cannot really be slower than an operation that does it and more, so while the best rate is below
    `at_least`, the machine was busy during the products: more rounds run, up to `max_rounds`. The result
    can still fall short, and then `percent(at_least)` raises ValueError instead of exceeding 100.
    """
    device = torch.device(device)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point torch.dtype, got {dtype!r}")
    if shapes is None:
        shapes = [(1, n, n, n) for n in DEFAULT_MATMUL_SIZES.get(device.type, DEFAULT_MATMUL_SIZES["cuda"])]
    if isinstance(shapes, (str, bytes)) or not hasattr(shapes, "__iter__"):
        raise TypeError(f"shapes must be a list of (batch, m, k, n) tuples, got {type(shapes).__name__}")
    shapes = list(dict.fromkeys(_check_shape(s, "shapes") for s in shapes))  # in order, without repeats
    if not shapes:
        raise ValueError("shapes must hold at least one (batch, m, k, n) shape")
    require_int(rounds, "rounds", minimum=1)
    require_int(max_rounds, "max_rounds", minimum=rounds)
    if isinstance(min_run_time, bool) or not isinstance(min_run_time, (int, float)) or not min_run_time > 0:
        raise ValueError(f"min_run_time must be a positive number of seconds, got {min_run_time!r}")
    if at_least is not None and (isinstance(at_least, bool) or not isinstance(at_least, (int, float))
                                 or not 0 <= at_least < math.inf):
        raise ValueError(f"at_least must be None or a non-negative finite FLOP/s, got {at_least!r}")
    g = torch.Generator(device=device).manual_seed(0)
    operands = {s: (torch.rand(s[0], s[1], s[2], generator=g, device=device, dtype=dtype),  # (batch, m, k)
                    torch.rand(s[0], s[2], s[3], generator=g, device=device, dtype=dtype))  # (batch, k, n)
                for s in shapes}
    rates: dict = {}
    done = 0
    while done < rounds or (at_least is not None and max(rates.values()) < at_least and done < max_rounds):
        for shape, (a, b) in operands.items():
            seconds = benchmark(torch.matmul, a, b, min_run_time=min_run_time).median_s
            rates[shape] = max(rates.get(shape, 0.0), matmul_flops(shape) / seconds)
        done += 1
    best_shape = max(rates, key=rates.get)
    return MatmulThroughput(rates[best_shape], best_shape, rates, str(device), dtype, torch.get_num_threads(), done)


def attention_flops(batch: int, heads: int, q_len: int, k_len: int, d_head: int, causal: bool = False) -> int:
    """Floating-point operations of attention's two matrix products: 2 flops per multiply-add, QK^T and PV.

    Without a mask that is 4 * batch * heads * q_len * k_len * d_head. With `causal=True` only the (query, key)
    pairs the mask allows are counted, top-left aligned like SDPA's `is_causal`: query i sees keys
    0..min(i, k_len - 1). This is the useful work; a kernel that does not skip masked blocks does more.
    Softmax, scaling and masking (O(L * S), not O(L * S * d)) are not counted, as is customary.
    """
    for name, value in (("batch", batch), ("heads", heads), ("q_len", q_len), ("k_len", k_len), ("d_head", d_head)):
        require_int(value, name, minimum=1)
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, got {type(causal).__name__}")
    if not causal:
        pairs = q_len * k_len
    elif q_len <= k_len:
        pairs = q_len * (q_len + 1) // 2  # row i sees i + 1 keys
    else:
        pairs = k_len * (k_len + 1) // 2 + (q_len - k_len) * k_len  # rows k_len.. see every key
    return 4 * batch * heads * pairs * d_head


@dataclass(frozen=True)
class LayerFlops:
    """FLOPs of one Transformer layer's forward pass, by part (2 FLOPs per multiply-add, matrix products only)."""

    attention_core: int  # QK^T and PV: what `attention_flops` counts
    projections: int  # the Q, K, V and output projections
    ffn: int  # the feed-forward network

    @property
    def total(self) -> int:
        return self.attention_core + self.projections + self.ffn

    @property
    def attention_share(self) -> float:
        """The attention core's fraction of the layer's FLOPs, between 0 and 1."""
        return self.attention_core / self.total


def layer_flops(seq_len: int, d_model: int, n_heads: int, d_ff: int, batch: int = 1, causal: bool = False,
                gated: bool = False, n_kv_heads: int | None = None) -> LayerFlops:
    """FLOPs of one Transformer layer over `batch` sequences of `seq_len` tokens, split into its three parts.

    - attention core: `attention_flops(batch, n_heads, seq_len, seq_len, d_model // n_heads, causal)`,
      4 * N^2 * d_model per sequence without a mask;
    - projections: Q and the output take 2 * N * d_model^2 each, K and V 2 * N * d_model * d_kv each, where
      d_kv = n_kv_heads * d_head (d_model unless grouped-query attention has fewer key/value heads);
    - FFN: 2 * N * d_model * d_ff per matrix, 2 matrices (up, down), or 3 with `gated=True` (SwiGLU's gate,
      as in Llama).
    Softmax, biases, activations and norms (O(N * d), not O(N * d^2)) are not counted, as is customary.
    The projections and the FFN grow like N, the attention core like N^2 (like N^2 / 2 with `causal=True`).
    """
    for name, value in (("seq_len", seq_len), ("d_model", d_model), ("n_heads", n_heads), ("d_ff", d_ff),
                        ("batch", batch)):
        require_int(value, name, minimum=1)
    if d_model % n_heads:
        raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
    n_kv_heads = n_heads if n_kv_heads is None else require_int(n_kv_heads, "n_kv_heads", minimum=1)
    if n_heads % n_kv_heads:
        raise ValueError(f"n_heads={n_heads} is not divisible by n_kv_heads={n_kv_heads}")
    for name, value in (("causal", causal), ("gated", gated)):
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
    d_head = d_model // n_heads
    tokens = batch * seq_len
    d_kv = n_kv_heads * d_head
    projections = 2 * tokens * d_model * (2 * d_model + 2 * d_kv)  # Q and O: d_model -> d_model; K and V: -> d_kv
    ffn = (3 if gated else 2) * 2 * tokens * d_model * d_ff
    core = attention_flops(batch, n_heads, seq_len, seq_len, d_head, causal=causal)
    return LayerFlops(attention_core=core, projections=projections, ffn=ffn)


def _element_size(dtype, name: str = "dtype") -> int:
    """Bytes per element of a torch dtype."""
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"{name} must be a torch.dtype, got {dtype!r}")
    return torch.empty((), dtype=dtype).element_size()


def score_matrix_bytes(batch: int, heads: int, q_len: int, k_len: int, dtype: torch.dtype = torch.float32) -> int:
    """Bytes of the materialised (batch, heads, q_len, k_len) score matrix that naive attention allocates."""
    for name, value in (("batch", batch), ("heads", heads), ("q_len", q_len), ("k_len", k_len)):
        require_int(value, name, minimum=1)
    return batch * heads * q_len * k_len * _element_size(dtype)


def kv_cache_bytes(
    n_layers: int, n_kv_heads: int, d_head: int, seq_len: int, batch: int = 1, dtype: torch.dtype = torch.float16
) -> int:
    """Bytes of a KV cache: 2 (K and V) * layers * kv_heads * d_head * seq_len * batch * bytes per element."""
    for name, value in (("n_layers", n_layers), ("n_kv_heads", n_kv_heads), ("d_head", d_head), ("batch", batch)):
        require_int(value, name, minimum=1)
    require_int(seq_len, "seq_len", minimum=0)
    return 2 * n_layers * n_kv_heads * d_head * seq_len * batch * _element_size(dtype)


def _default_device() -> torch.device:
    """CUDA when there is a GPU, else CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _cpu_name() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else what `platform` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def device_report(device=None, dtype: torch.dtype | None = None) -> dict:
    """What a timing depends on: device and its name, capability, dtype, TF32 setting, torch version, threads."""
    device = _default_device() if device is None else torch.device(device)
    dtype = torch.get_default_dtype() if dtype is None else dtype
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a torch.dtype, got {dtype!r}")
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        name = torch.cuda.get_device_name(index)
        capability = "{}.{}".format(*torch.cuda.get_device_capability(index))
        device = torch.device("cuda", index)
    else:
        name, capability = (_cpu_name(), None) if device.type == "cpu" else (device.type, None)
    return {
        "device": str(device),
        "device_name": name,
        "capability": capability,
        "dtype": str(dtype).removeprefix("torch."),
        "tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
    }


def format_device_report(report: dict | None = None) -> str:
    """One line for the caption of a timing table, from `device_report()` (called when `report` is None)."""
    r = device_report() if report is None else report
    if not isinstance(r, dict):
        raise TypeError(f"report must be a dict from device_report(), got {type(r).__name__}")
    where = f"{r['device']} ({r['device_name']}" + (f", sm {r['capability']})" if r["capability"] else ")")
    tf32 = "TF32 on" if r["tf32_matmul"] else "TF32 off"
    return f"{where}, {r['dtype']}, {tf32}, torch {r['torch']}, {r['threads']} thread{'s' if r['threads'] != 1 else ''}"


def sdpa_backends(device=None, dtype: torch.dtype = torch.float32, d_head: int = 64) -> list:
    """The `torch.nn.attention.SDPBackend`s that can run SDPA here, found by trying each on a tiny input.

    Use each with `torch.nn.attention.sdpa_kernel(backend)`. Which backends run depends on the device and
    also on dtype and head size (FlashAttention on CUDA needs float16/bfloat16), so probe with the ones you
    will time. On CPU this torch has MATH and a CPU FLASH_ATTENTION kernel.
    """
    from torch.nn.attention import SDPBackend, sdpa_kernel

    device = _default_device() if device is None else torch.device(device)
    require_int(d_head, "d_head", minimum=1)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point torch.dtype, got {dtype!r}")
    q = torch.zeros(1, 2, 16, d_head, device=device, dtype=dtype)  # (B, h, n, d_head)
    names = ("MATH", "FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION")
    found = []
    for backend in (getattr(SDPBackend, n) for n in names if hasattr(SDPBackend, n)):
        try:
            with warnings.catch_warnings(), sdpa_kernel(backend):
                warnings.simplefilter("ignore")  # each refusal also warns why; the list is the answer
                torch.nn.functional.scaled_dot_product_attention(q, q, q)
        except RuntimeError:
            continue
        found.append(backend)
    return found
