"""What communication costs: the ring all-reduce step by step, its bytes, and a latency-bandwidth model fitted to it.

The ring all-reduce (Patarasuk and Yuan 2009; the algorithm of NCCL's rings and Baidu's ring all-reduce) sums a
tensor over n ranks in 2(n - 1) steps. Each rank cuts its tensor into n chunks. Reduce-scatter: at step k
(k = 0 .. n-2) rank r sends chunk (r - k) mod n to rank r + 1, which adds it to its own; after n - 1 steps rank r
holds the complete sum of chunk (r + 1) mod n. All-gather: n - 1 more steps pass the complete chunks around the
ring, each rank overwriting its copy. Every step, every rank sends one chunk, 1/n of the data: 2(n - 1)/n of the
tensor's bytes in all, whatever n (`ring_bytes_per_rank`), which is why the ring is bandwidth-optimal.

The alpha-beta model (Hockney 1994): sending b bytes takes alpha + b·beta seconds (alpha, the latency of a
message; 1/beta, the bandwidth). A ring all-reduce of b bytes on n ranks then takes
2(n - 1)·alpha + 2(n - 1)/n·b·beta. `fit_alpha_beta` fits alpha and beta to measured times by least squares;
`measure_alpha_beta` measures `dist.all_reduce` with gloo over loopback for several n and sizes and fits them.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch import Tensor

from .._validate import require_int, require_tensor
from .launcher import launch

__all__ = ["RingAllReduce", "ring_all_reduce", "ring_bytes_per_rank", "time_all_reduce", "AlphaBeta",
           "fit_alpha_beta", "measure_alpha_beta"]


@dataclass
class RingAllReduce:
    """What `ring_all_reduce` did: `results[r]` is rank r's tensor at the end (the sum), `steps[k]` the messages of
    step k as (sender, receiver, chunk index), `bytes_sent[r]` what rank r sent in all."""

    results: list[Tensor]
    steps: list[list[tuple[int, int, int]]]
    bytes_sent: list[int]
    phases: list[str] = field(default_factory=list)  # "reduce-scatter" or "all-gather", one per step


def ring_all_reduce(tensors: list[Tensor]) -> RingAllReduce:
    """Simulate the ring all-reduce of `tensors` (one per rank, all of one shape and dtype) in this process.

    Every message of a step is taken from the ranks' state before the step, as if all were sent at once. The
    chunks are `torch.tensor_split(flat, n)`: equal when n divides the number of elements. The inputs are not
    changed."""
    if not isinstance(tensors, (list, tuple)) or len(tensors) < 1:
        raise TypeError(f"tensors must be a non-empty list of tensors (one per rank), got {type(tensors).__name__}")
    for r, t in enumerate(tensors):
        require_tensor(t, f"tensors[{r}]")
        if t.shape != tensors[0].shape or t.dtype != tensors[0].dtype:
            raise ValueError(f"tensors[{r}] is {t.dtype} {tuple(t.shape)}, but tensors[0] is "
                             f"{tensors[0].dtype} {tuple(tensors[0].shape)}: every rank needs the same")
    n = len(tensors)
    flats = [t.detach().reshape(-1).clone() for t in tensors]  # (numel,) per rank
    chunks = [list(flat.tensor_split(n)) for flat in flats]  # views: chunks[r][c] is rank r's chunk c
    steps, phases, sent = [], [], [0] * n
    for phase in ("reduce-scatter", "all-gather"):
        for k in range(n - 1):
            if phase == "reduce-scatter":
                messages = [(r, (r + 1) % n, (r - k) % n) for r in range(n)]
            else:
                messages = [(r, (r + 1) % n, (r + 1 - k) % n) for r in range(n)]
            payloads = [chunks[src][c].clone() for src, _, c in messages]  # sent at once
            for (src, dst, c), data in zip(messages, payloads):
                if phase == "reduce-scatter":
                    chunks[dst][c] += data  # add the partial sum that arrives
                else:
                    chunks[dst][c].copy_(data)  # replace by the complete sum
                sent[src] += data.numel() * data.element_size()
            steps.append(messages)
            phases.append(phase)
    results = [flat.view_as(t) for flat, t in zip(flats, tensors)]
    return RingAllReduce(results, steps, sent, phases)


def ring_bytes_per_rank(nbytes: float, n_ranks: int) -> float:
    """Bytes each rank sends in a ring all-reduce of `nbytes` bytes: 2(n - 1)/n · nbytes."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, float)) or nbytes < 0:
        raise ValueError(f"nbytes must be a number >= 0, got {nbytes!r}")
    n = require_int(n_ranks, "n_ranks", minimum=1)
    return 2 * (n - 1) / n * nbytes


def time_all_reduce(rank: int, world_size: int, sizes_bytes: list, repeats: int = 10, warmup: int = 2) -> list:
    """Launched worker: for each size, the times in seconds of `repeats` calls of `dist.all_reduce` on a float32
    tensor of that many bytes (rounded down to whole elements), each call after a `dist.barrier()`, after
    `warmup` calls not timed. Returns [(bytes, [seconds of each call])] as this rank saw them."""
    out = []
    for size in sizes_bytes:
        t = torch.ones(max(1, int(size) // 4), dtype=torch.float32)
        times = []
        for i in range(warmup + repeats):
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(t)
            if i >= warmup:
                times.append(time.perf_counter() - start)
        out.append((t.numel() * 4, times))
    return out


@dataclass
class AlphaBeta:
    """A fitted alpha-beta model of the ring all-reduce: alpha (seconds per message), beta (seconds per byte)."""

    alpha: float
    beta: float
    rms_error: float  # root mean square of (measured - predicted), seconds
    measurements: list[dict] = field(default_factory=list)  # world_size, bytes, seconds

    @property
    def bandwidth(self) -> float:
        """1 / beta, in bytes per second."""
        return 1.0 / self.beta

    def predict(self, n_ranks: int, nbytes: float) -> float:
        """2(n - 1)·alpha + 2(n - 1)/n·nbytes·beta: the model's time for one all-reduce, in seconds."""
        require_int(n_ranks, "n_ranks", minimum=1)
        return 2 * (n_ranks - 1) * self.alpha + ring_bytes_per_rank(nbytes, n_ranks) * self.beta


def fit_alpha_beta(measurements: list[dict]) -> AlphaBeta:
    """Alpha and beta of t = 2(n - 1)·alpha + 2(n - 1)/n·bytes·beta fitted to `measurements`, dicts with
    world_size (n >= 2), bytes and seconds: least squares on the relative errors (pred - t)/t, so that the
    small messages, which decide alpha, count as much as the large ones (float64; at least two points whose
    sizes differ)."""
    if not isinstance(measurements, (list, tuple)) or len(measurements) < 2:
        raise ValueError("measurements must be a list of at least two dicts with world_size, bytes and seconds")
    rows, times = [], []
    for i, m in enumerate(measurements):
        if not isinstance(m, dict) or not {"world_size", "bytes", "seconds"} <= set(m):
            raise ValueError(f"measurements[{i}] must be a dict with world_size, bytes and seconds, got {m!r}")
        n = require_int(m["world_size"], f"measurements[{i}]['world_size']", minimum=2)
        rows.append([2.0 * (n - 1), ring_bytes_per_rank(m["bytes"], n)])
        times.append(float(m["seconds"]))
    a, t = torch.tensor(rows, dtype=torch.float64), torch.tensor(times, dtype=torch.float64)
    if not bool((t > 0).all()):
        raise ValueError("every measurement's seconds must be positive")
    if torch.linalg.matrix_rank(a) < 2:
        raise ValueError("measurements cannot separate alpha from beta: vary the sizes")
    weighted = a / t[:, None]  # each row divided by its time: relative errors
    scale = weighted.abs().max(dim=0).values  # columns of similar size, for a well-conditioned solve
    solution = torch.linalg.lstsq(weighted / scale, torch.ones_like(t)[:, None]).solution[:, 0] / scale
    rms = ((a @ solution - t).pow(2).mean().sqrt()).item()
    return AlphaBeta(solution[0].item(), solution[1].item(), rms, [dict(m) for m in measurements])


def measure_alpha_beta(world_sizes=(2, 3, 4), sizes_bytes=(4_096, 65_536, 524_288, 2_097_152, 8_388_608),
                       repeats: int = 10, timeout: float = 120.0) -> AlphaBeta:
    """Time `dist.all_reduce` (gloo, loopback) on each number of processes and each size, and fit alpha and beta.

    Each launch runs `time_all_reduce`; a call's time is the slowest rank's, and a measurement is the median
    over the calls. Returns the `AlphaBeta` fit, whose `measurements` list every point (world_size, bytes,
    seconds)."""
    sizes = list(sizes_bytes)
    if not sizes or any(isinstance(s, bool) or not isinstance(s, (int, float)) or s < 4 for s in sizes):
        raise ValueError(f"sizes_bytes must be numbers of bytes >= 4, got {sizes_bytes!r}")
    require_int(repeats, "repeats", minimum=1)
    measurements = []
    for n in world_sizes:
        require_int(n, "world_size", minimum=2)
        per_rank = launch(time_all_reduce, n, sizes, repeats, timeout=timeout)
        for i, (nbytes, _) in enumerate(per_rank[0]):
            slowest = [max(calls) for calls in zip(*(rank_times[i][1] for rank_times in per_rank))]
            measurements.append({"world_size": n, "bytes": nbytes, "seconds": statistics.median(slowest)})
    return fit_alpha_beta(measurements)
