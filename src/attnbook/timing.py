"""Honest timing on CPU or GPU: medians of synchronised runs, measured peak memory, the measured matmul throughput.

Everything here runs unchanged on CPU and CUDA. Times come from `torch.utils.benchmark.Timer`, which warms
up, synchronises the accelerator around each timed block and repeats until `min_run_time` has passed; we
report the median and the interquartile range (IQR), which ignore the odd slow run. Throughput is compared
with `matmul_throughput`: the best FLOP rate of several matrix products (square ones and the operation's own
products) timed the same way, in the same dtype, with the same threads, in the same run. A result then reads as
"x % of the measured matmul throughput", and `MatmulThroughput.percent` refuses a rate above it, so no
percentage exceeds 100. (A datasheet peak is another reference: papers quote it; this module never measures it.)

Moved out, and re-exported here (`attnbook.timing.<name>` keeps working): the FLOP and byte counts computed from
shapes (`attention_flops`, `layer_flops`, `kv_cache_bytes`, ...) to `cost`, and what a timing depends on
(`device_report`, `format_device_report`, `sdpa_backends`) to `device`.
"""
from __future__ import annotations

import contextlib
import math
import os
import sys
from dataclasses import dataclass

import torch

from ._validate import require_int
from .cost import check_matmul_shape  # the (batch, m, k, n) check, shared with the cost model
from .cost import (  # re-exported: the cost model, computed from shapes (matmul_throughput uses matmul_flops)
    LayerFlops, attention_backward_flops, attention_flops, attention_matmul_shapes, kv_cache_bytes, layer_flops,
    matmul_flops, score_matrix_bytes,
)
from .device import device_report, format_device_report, sdpa_backends  # re-exported: what a timing depends on

__all__ = [
    "Timing",
    "benchmark",
    "peak_memory",
    "cpu_allocations",
    "matmul_peak",
    "MatmulThroughput",
    "matmul_throughput",
    "matmul_flops",
    "format_rate",
    "attention_matmul_shapes",
    "attention_flops",
    "attention_backward_flops",
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
    live = peak = 0
    for nbytes in cpu_allocations(fn, *args, **kwargs):
        live += nbytes
        peak = max(peak, live)
    return int(peak)


def cpu_allocations(fn, *args, **kwargs) -> list[int]:
    """The CPU allocations (bytes > 0) and frees (< 0) that PyTorch's profiler records while fn(*args, **kwargs)
    runs once, in the order they happened."""
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
    return [int(e.nbytes()) for e in sorted(events, key=lambda e: e.start_ns())]


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
            check_matmul_shape(shape, "rates")
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
    shapes = list(dict.fromkeys(check_matmul_shape(s, "shapes") for s in shapes))  # in order, without repeats
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
