"""A measured roofline: how fast this machine moves bytes and does FLOPs, and where a kernel sits between the two.

A kernel that does F FLOPs while moving Q bytes to and from main memory has the *arithmetic intensity* I = F / Q
(FLOPs per byte). It can run no faster than its FLOPs allow, P (the measured matmul throughput), nor faster than
its bytes allow, I * W (W the measured memory bandwidth): its rate is at most min(P, I * W), the *roofline*
(Williams, Waterman and Patterson, 2009, "Roofline: an insightful visual performance model for multicore
architectures"). The two roofs meet at the *ridge point* I = P / W: a kernel to its left is memory-bound, one to
its right compute-bound.

`memory_bandwidth` measures W with STREAM's copy and triad (McCalpin, 1995) on arrays several times the largest
cache, so that they come from main memory. `bytes_written` counts what a call writes, from the allocations PyTorch's
profiler records: every tensor a call allocates is written once and read at least once after, so a call's traffic
is at least its inputs plus twice what it allocates (`traffic_lower_bound`), a count that needs no model of the
kernel. `flash_attention_bytes` is FlashAttention's IO count (Dao et al., 2022, arXiv:2205.14135, Theorem 2).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ._validate import require_int
from .decoding import last_level_cache_bytes
from .timing import benchmark, cpu_allocations

__all__ = ["Bandwidth", "memory_bandwidth", "ridge_point", "attainable", "bytes_written", "traffic_lower_bound",
           "flash_attention_bytes", "standard_attention_bytes"]


@dataclass(frozen=True)
class Bandwidth:
    """Main-memory bandwidth measured with STREAM's copy (b = a: 2 arrays moved) and triad (a = b + s c: 3)."""

    copy: float  # bytes/s
    triad: float  # bytes/s
    array_bytes: int  # the size of each array
    device: str
    num_threads: int
    copy_timing: object = None  # the `timing.Timing` (median and IQR) of one copy, when measured here
    triad_timing: object = None  # the same for one triad

    @property
    def best(self) -> float:
        return max(self.copy, self.triad)

    def __str__(self) -> str:
        return (f"memory bandwidth: copy {self.copy / 1e9:.1f} GB/s, triad {self.triad / 1e9:.1f} GB/s "
                f"(arrays of {self.array_bytes / 2**20:.0f} MiB, {self.device}, {self.num_threads} "
                f"thread{'' if self.num_threads == 1 else 's'})")


def memory_bandwidth(device="cpu", dtype: torch.dtype = torch.float32, array_bytes: int | None = None,
                     min_run_time: float = 0.2) -> Bandwidth:
    """STREAM's copy and triad in PyTorch, timed with `benchmark` (medians): bytes moved per second.

    `array_bytes` defaults to four times the largest processor cache (at least 64 MiB) on a CPU, 1 GiB on a GPU,
    so that the arrays come from main memory and not from a cache.
    """
    device = torch.device(device)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point torch.dtype, got {dtype!r}")
    if array_bytes is None:
        cache = last_level_cache_bytes() if device.type == "cpu" else None
        array_bytes = 2**30 if device.type == "cuda" else max(64 * 2**20, 4 * (cache or 0))
    require_int(array_bytes, "array_bytes", minimum=1)
    n = max(1, array_bytes // torch.empty((), dtype=dtype).element_size())
    a, b, c = (torch.ones(n, device=device, dtype=dtype) for _ in range(3))  # each (n,)
    moved = n * a.element_size()
    copy = benchmark(b.copy_, a, min_run_time=min_run_time)  # reads a, writes b
    triad = benchmark(torch.add, b, c, alpha=3.0, out=a, min_run_time=min_run_time)  # reads b, c; writes a
    return Bandwidth(copy=2 * moved / copy.median_s, triad=3 * moved / triad.median_s, array_bytes=moved,
                     device=str(device), num_threads=torch.get_num_threads(), copy_timing=copy, triad_timing=triad)


def ridge_point(flops_per_s: float, bytes_per_s: float) -> float:
    """The arithmetic intensity (FLOPs per byte) where the two roofs meet: P / W."""
    for name, value in (("flops_per_s", flops_per_s), ("bytes_per_s", bytes_per_s)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ValueError(f"{name} must be a positive number, got {value!r}")
    return flops_per_s / bytes_per_s


def attainable(intensity: float, flops_per_s: float, bytes_per_s: float) -> float:
    """The roofline at `intensity`: min(P, I * W) FLOP/s."""
    if isinstance(intensity, bool) or not isinstance(intensity, (int, float)) or not intensity > 0:
        raise ValueError(f"intensity must be a positive number, got {intensity!r}")
    ridge_point(flops_per_s, bytes_per_s)  # checks both
    return min(flops_per_s, intensity * bytes_per_s)


def bytes_written(fn, *args, **kwargs) -> int:
    """The bytes of every tensor fn(*args, **kwargs) allocates on the CPU, as PyTorch's profiler records them (each
    allocation is written at least once). The call runs once, untimed."""
    return sum(nbytes for nbytes in cpu_allocations(fn, *args, **kwargs) if nbytes > 0)


def traffic_lower_bound(fn, *args, **kwargs) -> int:
    """At least the bytes fn(*args, **kwargs) moves: its tensor arguments read once, and every tensor it allocates
    written once and read once (`bytes_written`, twice)."""
    inputs = sum(t.numel() * t.element_size() for t in list(args) + list(kwargs.values()) if torch.is_tensor(t))
    return inputs + 2 * bytes_written(fn, *args, **kwargs)


def standard_attention_bytes(batch: int, heads: int, n: int, d_head: int, dtype: torch.dtype) -> int:
    """Dao et al.'s count for standard attention, Θ(Nd + N²) per head: Q, K, V read and O written (4Nd), the (N, N)
    scores written and read back for the softmax, the weights written and read back for PV (4N²)."""
    for name, value in (("batch", batch), ("heads", heads), ("n", n), ("d_head", d_head)):
        require_int(value, name, minimum=1)
    size = torch.empty((), dtype=dtype).element_size()
    return batch * heads * size * (4 * n * d_head + 4 * n * n)


def flash_attention_bytes(batch: int, heads: int, n: int, d_head: int, dtype: torch.dtype, sram_bytes: int) -> int:
    """FlashAttention's count, Θ(N²d²/M) per head for an on-chip memory of M bytes: blocks of B_r = M / (4 d) query
    rows (Q, O and the running statistics share the memory with a block of K and V), each reading all of K and V
    once (2Nd per block), plus Q read and O written once: 2Nd + ceil(N / B_r) · 2Nd elements."""
    for name, value in (("batch", batch), ("heads", heads), ("n", n), ("d_head", d_head), ("sram_bytes", sram_bytes)):
        require_int(value, name, minimum=1)
    size = torch.empty((), dtype=dtype).element_size()
    rows = max(1, min(n, sram_bytes // (4 * d_head * size)))  # B_r
    return batch * heads * size * (2 * n * d_head + math.ceil(n / rows) * 2 * n * d_head)


def counted_flash_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, sram_bytes: int,
                            scale: float | None = None) -> tuple[torch.Tensor, int]:
    """(SDPA's output, the bytes a fused FlashAttention kernel with `sram_bytes` of on-chip memory moves to and from
    main memory), by running its loops and counting every block that crosses: blocks of B_r = B_c = M / (4 d)
    rows (a block of Q, O, K and V fits together), each block of queries read once and its output written once,
    every block of keys and values read once per block of queries (FlashAttention-2's order, and the Triton
    kernel's). Scores, running maxima and sums stay on chip and are not counted. Shapes (B, H, N, d), no mask."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not torch.is_tensor(t) or t.dim() != 4 or not t.is_floating_point():
            raise ValueError(f"{name} must be a floating-point tensor of shape (B, H, N, d), got {t!r:.60}")
    if not query.shape == key.shape == value.shape:
        raise ValueError(f"query, key and value must have one shape, got {tuple(query.shape)}, {tuple(key.shape)} "
                         f"and {tuple(value.shape)}")
    require_int(sram_bytes, "sram_bytes", minimum=1)
    n, d, size = query.size(-2), query.size(-1), query.element_size()
    rows = max(1, min(n, sram_bytes // (4 * d * size)))  # B_r = B_c
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    moved = 0
    out = torch.empty_like(query)
    for i in range(0, n, rows):
        q = query[..., i:i + rows, :]  # (B, H, Br, d): read once
        moved += q.numel() * size
        m = torch.full((*q.shape[:-1], 1), float("-inf"), dtype=q.dtype)  # on chip from here on
        l = torch.zeros((*q.shape[:-1], 1), dtype=q.dtype)
        acc = torch.zeros_like(q)
        for j in range(0, n, rows):
            k, v = key[..., j:j + rows, :], value[..., j:j + rows, :]  # (B, H, Bc, d) each: read for every Q block
            moved += (k.numel() + v.numel()) * size
            s = q @ k.transpose(-2, -1) * scale  # (B, H, Br, Bc)
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            p = torch.exp(s - m_new)
            alpha = torch.exp(m - m_new)
            l = l * alpha + p.sum(-1, keepdim=True)
            acc = acc * alpha + p @ v
            m = m_new
        out[..., i:i + rows, :] = acc / l  # written once
        moved += acc.numel() * size
    return out, moved
