"""What one generated token costs in bytes moved, and the sweeps that measure it (chapter 10).

A cached decoding step multiplies one vector per sequence by every weight matrix and lets one query per head
read every cached key and value. Both do about 2 FLOPs per number read, so on most hardware a step waits for
memory, not for arithmetic. This module holds the arithmetic of that claim and two measurements of it:

- `kv_cache_bytes_per_token`, `decode_step_read_bytes`, `memory_bound_batch`: the bytes a step must read at
  least, and the batch below which reading the weights, not computing with them, sets the time of a step.
- `weight_stack`, `weight_step`, `batch_sweep`: a stack of square float32 matrices large enough that reading
  them matters, timed for one step at a growing batch (time per step and per token).
- `grouped_decode_attention`, `attention_step_sweep`, `gqa_crossover`: one decoding step's attention over a
  cache of `S` positions for `B` sequences, with grouped key/value heads read once per group (no copy), timed
  for multi-head, grouped-query and multi-query attention over a grid of (B, S); and the smallest B * S from
  which grouping wins by a clear margin.
- `last_level_cache_bytes`: the size of the processor's largest cache, which explains where CPU timings jump.

Timings use `timing.benchmark` (synchronised medians) and keep the fastest of several interleaved rounds:
other programs on a busy machine can add time to a measurement, never take it away.
"""
from __future__ import annotations

import math
from pathlib import Path

import torch
from torch import Tensor

from ._validate import require_int, require_tensor
from .timing import benchmark

__all__ = [
    "kv_cache_bytes_per_token",
    "decode_step_read_bytes",
    "memory_bound_batch",
    "weight_stack",
    "weight_step",
    "batch_sweep",
    "grouped_decode_attention",
    "attention_step_sweep",
    "gqa_crossover",
    "last_level_cache_bytes",
]


# ----------------------------------------------------------------------------------------------------------
# Arithmetic: bytes per token, bytes per step, the batch where compute catches up with memory
# ----------------------------------------------------------------------------------------------------------


def _element_size(dtype, name: str = "dtype") -> int:
    """Bytes per element of a torch dtype."""
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"{name} must be a torch.dtype, got {dtype!r}")
    return torch.empty((), dtype=dtype).element_size()


def _require_positive(x, name: str) -> float:
    """Return `x` as a float if it is a finite positive real number (not a bool)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise TypeError(f"{name} must be a number, got {type(x).__name__}")
    if not (math.isfinite(x) and x > 0):
        raise ValueError(f"{name} must be a finite positive number, got {x!r}")
    return float(x)


def kv_cache_bytes_per_token(n_layers: int, n_kv_heads: int, d_head: int, dtype: torch.dtype = torch.float16) -> int:
    """Bytes one position of one sequence adds to a KV cache: 2 (K and V) * layers * kv_heads * d_head * bytes.

    It is also what a decoding step reads per cached position and sequence: the new query of every head meets
    every cached key and value once. Grouped-query attention divides it by n_heads / n_kv_heads.
    """
    for name, value in (("n_layers", n_layers), ("n_kv_heads", n_kv_heads), ("d_head", d_head)):
        require_int(value, name, minimum=1)
    return 2 * n_layers * n_kv_heads * d_head * _element_size(dtype)


def decode_step_read_bytes(weight_bytes: int, cache_bytes_per_token: int, batch: int, context: int) -> int:
    """The bytes one decoding step must read at least: every weight once, plus every sequence's whole cache.

    `weight_bytes` is read once per step whatever the batch (one weight matrix serves every sequence);
    the cache is read once per sequence: batch * context * `cache_bytes_per_token` bytes.
    """
    require_int(weight_bytes, "weight_bytes", minimum=0)
    require_int(cache_bytes_per_token, "cache_bytes_per_token", minimum=0)
    require_int(batch, "batch", minimum=1)
    require_int(context, "context", minimum=0)
    return weight_bytes + batch * context * cache_bytes_per_token


def memory_bound_batch(peak_flops: float, bandwidth: float, bytes_per_weight: float) -> float:
    """The batch at which a step's arithmetic takes as long as reading its weights: peak * bytes / (2 * bandwidth).

    A step at batch B does 2 * B FLOPs per weight and reads each weight once, so it takes at least
    max(weights * bytes_per_weight / bandwidth, 2 * B * weights / peak_flops). Below the returned batch the
    first term is larger: the step is memory-bound and its time hardly grows with the batch.
    `peak_flops` in FLOP/s, `bandwidth` in bytes/s.
    """
    peak_flops = _require_positive(peak_flops, "peak_flops")
    bandwidth = _require_positive(bandwidth, "bandwidth")
    bytes_per_weight = _require_positive(bytes_per_weight, "bytes_per_weight")
    return peak_flops * bytes_per_weight / (2.0 * bandwidth)


# ----------------------------------------------------------------------------------------------------------
# Measurement 1: a batch sweep over a stack of weight matrices
# ----------------------------------------------------------------------------------------------------------


def weight_stack(width: int, n_layers: int, *, dtype: torch.dtype = torch.float32, device="cpu",
                 seed: int = 0) -> list[Tensor]:
    """`n_layers` random (width, width) matrices, scaled by 1/sqrt(width) so that products keep their size.

    They stand for the weight matrices a decoding step multiplies each token's vector by; their total size
    (n_layers * width^2 * bytes) decides whether they fit in the processor's caches.
    """
    require_int(width, "width", minimum=1)
    require_int(n_layers, "n_layers", minimum=1)
    require_int(seed, "seed", minimum=0)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point torch.dtype, got {dtype!r}")
    g = torch.Generator().manual_seed(seed)
    scale = 1.0 / math.sqrt(width)
    return [(torch.randn(width, width, generator=g) * scale).to(device, dtype) for _ in range(n_layers)]


def weight_step(x: Tensor, weights) -> Tensor:
    """One step through the stack: x (B, width) @ W for each W in turn -> (B, width)."""
    require_tensor(x, "x", floating=True)
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D (batch, width), got shape {tuple(x.shape)}")
    for W in weights:
        x = x @ W  # (B, width): every weight read once, 2 * B FLOPs per weight
    return x


def _check_weights(weights) -> list[Tensor]:
    """The stack as a non-empty list of square 2-D floating-point tensors of one size, dtype and device."""
    if isinstance(weights, Tensor) or not isinstance(weights, (list, tuple)) or not weights:
        raise TypeError(
            f"weights must be a non-empty list of tensors (from weight_stack), got {type(weights).__name__}"
        )
    for i, W in enumerate(weights):
        require_tensor(W, f"weights[{i}]", floating=True)
        if W.dim() != 2 or W.shape != weights[0].shape or W.size(0) != W.size(1):
            raise ValueError(f"weights[{i}] must be a square matrix of the shape of weights[0], got {tuple(W.shape)}")
        if W.dtype != weights[0].dtype or W.device != weights[0].device:
            raise ValueError(f"weights[{i}] must have the dtype and device of weights[0]")
    return list(weights)


def _check_sizes(values, name: str) -> list[int]:
    """A non-empty, strictly increasing list of positive ints."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{name} must be a list of ints, got {type(values).__name__}")
    values = list(values)
    if not values:
        raise ValueError(f"{name} must not be empty")
    for v in values:
        require_int(v, name, minimum=1)
    if any(a >= b for a, b in zip(values, values[1:])):
        raise ValueError(f"{name} must be strictly increasing, got {values}")
    return values


def _check_timing_args(rounds, min_run_time) -> None:
    require_int(rounds, "rounds", minimum=1)
    _require_positive(min_run_time, "min_run_time")


@torch.no_grad()
def batch_sweep(weights, batches, *, rounds: int = 3, min_run_time: float = 0.05, seed: int = 0) -> list[dict]:
    """Time one `weight_step` at every batch size; the fastest median of `rounds` interleaved rounds.

    Returns one dict per batch: `batch`, `step_s` (seconds per step), `step_iqr_s` (the IQR of the timing whose
    median was kept), `token_s` (seconds per token, step_s / batch), `flops` (2 * batch * weights),
    `weight_bytes` (read once per step), and the achieved rates `flop_rate` (FLOP/s) and `weight_read_rate`
    (bytes of weights per second).
    """
    weights = _check_weights(weights)
    batches = _check_sizes(batches, "batches")
    _check_timing_args(rounds, min_run_time)
    require_int(seed, "seed", minimum=0)
    width, dtype, device = weights[0].size(0), weights[0].dtype, weights[0].device
    n_weights = sum(W.numel() for W in weights)
    weight_bytes = sum(W.numel() * W.element_size() for W in weights)
    g = torch.Generator().manual_seed(seed)
    inputs = {b: torch.randn(b, width, generator=g).to(device, dtype) for b in batches}  # (B, width) each
    best = {b: (math.inf, 0.0) for b in batches}  # (median, IQR) of the fastest round
    for _ in range(rounds):
        for b in batches:  # in turn, so that a busy moment of the machine cannot favour one batch
            t = benchmark(weight_step, inputs[b], weights, min_run_time=min_run_time)
            best[b] = min(best[b], (t.median_s, t.iqr_s))
    rows = []
    for b in batches:
        flops, (step, iqr) = 2 * b * n_weights, best[b]
        rows.append({"batch": b, "step_s": step, "step_iqr_s": iqr, "token_s": step / b, "flops": flops,
                     "weight_bytes": weight_bytes, "flop_rate": flops / step, "weight_read_rate": weight_bytes / step})
    return rows


# ----------------------------------------------------------------------------------------------------------
# Measurement 2: one decoding step's attention, MHA against GQA against MQA
# ----------------------------------------------------------------------------------------------------------


def grouped_decode_attention(q: Tensor, k_cache: Tensor, v_cache: Tensor) -> Tensor:
    """Attention of one new token per sequence over a cache with grouped key/value heads, without copying them.

    q (B, H, 1, d), k_cache and v_cache (B, G, S, d) with G dividing H -> (B, H, 1, d). Query head j uses
    key/value head j // (H / G), as `multihead.repeat_kv` arranges; the new token sees every cached position.
    The H / G query heads of a group become H / G rows of one matrix product with their shared keys, so each
    cached key and value is read once per group, not once per query head: the reads shrink by H / G, the FLOPs
    do not. (A GQA kernel such as FlashAttention's does the same; `repeat_kv` + ordinary attention copies the
    cache up to H heads first and reads all of them.)
    """
    for name, t in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)):
        require_tensor(t, name, floating=True)
        if t.dim() != 4:
            raise ValueError(f"{name} must be 4-D (batch, heads, seq, d_head), got shape {tuple(t.shape)}")
    B, H, L, d = q.shape
    if L != 1:
        raise ValueError(f"q must hold one new token per sequence, shape (B, H, 1, d), got {tuple(q.shape)}")
    if k_cache.shape != v_cache.shape:
        raise ValueError(f"k_cache and v_cache must have the same shape, got {tuple(k_cache.shape)} and "
                         f"{tuple(v_cache.shape)}")
    G, S = k_cache.size(1), k_cache.size(2)
    if k_cache.size(0) != B or k_cache.size(3) != d:
        raise ValueError(f"k_cache of shape {tuple(k_cache.shape)} does not fit q of shape {tuple(q.shape)} "
                         "(batch and d_head must agree)")
    if H % G:
        raise ValueError(f"the {H} query heads of q are not divisible by the {G} key/value heads of k_cache")
    if S == 0:
        raise ValueError("k_cache must hold at least one position")
    if not (q.dtype == k_cache.dtype == v_cache.dtype):
        raise TypeError(f"q, k_cache and v_cache must share a dtype, got {q.dtype}, {k_cache.dtype}, {v_cache.dtype}")
    q = (q * (1.0 / math.sqrt(d))).reshape(B, G, H // G, d)   # (B, G, H/G, d): a group's queries as rows
    weights = torch.softmax(q @ k_cache.transpose(-2, -1), dim=-1)  # (B, G, H/G, S): each key read once per group
    return (weights @ v_cache).reshape(B, H, 1, d)              # (B, G, H/G, d) -> (B, H, 1, d)


def _check_kv_heads(kv_heads, n_heads: int) -> dict[str, int]:
    if not isinstance(kv_heads, dict) or not kv_heads:
        raise TypeError(f"kv_heads must be a non-empty dict {{name: n_kv_heads}}, got {type(kv_heads).__name__}")
    for name, g in kv_heads.items():
        if not isinstance(name, str):
            raise TypeError(f"kv_heads keys must be names (str), got {name!r}")
        require_int(g, f"kv_heads[{name!r}]", minimum=1)
        if n_heads % g:
            raise ValueError(f"kv_heads[{name!r}]={g} does not divide n_heads={n_heads}")
    return dict(kv_heads)


@torch.no_grad()
def attention_step_sweep(batches, seq_lens, n_heads: int, kv_heads: dict, d_head: int, *,
                         dtype: torch.dtype = torch.float32, device="cpu", rounds: int = 3,
                         min_run_time: float = 0.05, seed: int = 0) -> list[dict]:
    """Time one decoding step's attention (`grouped_decode_attention`) at every (batch, seq_len) of the grid.

    `kv_heads` names the variants, e.g. {"MHA": 8, "GQA": 2, "MQA": 1} with n_heads = 8. The caches of the
    whole grid are allocated first (mind the memory: the largest cell dominates); then, `rounds` times, every
    cell and variant is timed in turn, and the fastest median of each counts, so that a busy spell of the
    machine spoils one round of a cell rather than all of them. Returns one dict per cell, in
    order of batch * seq_len (then batch): `batch`, `seq_len`, `tokens` (= batch * seq_len),
    `cache_bytes` {name: bytes of K and V}, `time_s` {name: seconds per step}, `iqr_s` {name: the IQR of the
    timing whose median was kept}.
    """
    batches = _check_sizes(batches, "batches")
    seq_lens = _check_sizes(seq_lens, "seq_lens")
    require_int(n_heads, "n_heads", minimum=1)
    require_int(d_head, "d_head", minimum=1)
    kv_heads = _check_kv_heads(kv_heads, n_heads)
    _check_timing_args(rounds, min_run_time)
    require_int(seed, "seed", minimum=0)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point torch.dtype, got {dtype!r}")
    g = torch.Generator().manual_seed(seed)
    cells = sorted(((b, s) for b in batches for s in seq_lens), key=lambda c: (c[0] * c[1], c[0]))
    tensors = {}  # (B, S) -> q, {name: (k, v)}; all allocated first, so that rounds can go over the whole grid
    for B, S in cells:
        q = torch.randn(B, n_heads, 1, d_head, generator=g).to(device, dtype)  # (B, H, 1, d)
        caches = {}
        for name, G in kv_heads.items():
            kv = torch.randn(2, B, G, S, d_head, generator=g).to(device, dtype)  # K and V, (B, G, S, d) each
            caches[name] = (kv[0], kv[1])
        tensors[B, S] = q, caches
    best = {(cell, name): (math.inf, 0.0) for cell in cells for name in kv_heads}  # (median, IQR), fastest round
    for _ in range(rounds):  # round by round over the whole grid: a busy spell of the machine hits one round
        for cell in cells:
            q, caches = tensors[cell]
            for name, (k, v) in caches.items():
                t = benchmark(grouped_decode_attention, q, k, v, min_run_time=min_run_time)
                best[cell, name] = min(best[cell, name], (t.median_s, t.iqr_s))
    rows = []
    for B, S in cells:
        caches = tensors[B, S][1]
        rows.append({"batch": B, "seq_len": S, "tokens": B * S,
                     "cache_bytes": {n: 2 * k.numel() * k.element_size() for n, (k, _) in caches.items()},
                     "time_s": {name: best[(B, S), name][0] for name in kv_heads},
                     "iqr_s": {name: best[(B, S), name][1] for name in kv_heads}})
    return rows


def gqa_crossover(rows, base: str = "MHA", other: str = "GQA", margin: float = 1.25) -> int | None:
    """The smallest batch * seq_len from which `other` is at least `margin` times as fast as `base` in every cell.

    `rows` as from `attention_step_sweep`. Cells are compared from the largest batch * seq_len down; the
    crossover is the smallest number of cached tokens such that every cell with at least that many wins by the
    margin (one noisy cell below it cannot move it down). None when even the largest cell does not win.
    """
    if isinstance(rows, dict) or not isinstance(rows, (list, tuple)) or not rows:
        raise TypeError(
            f"rows must be a non-empty list of dicts from attention_step_sweep, got {type(rows).__name__}"
        )
    margin = _require_positive(margin, "margin")
    for name, value in (("base", base), ("other", other)):
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a variant name (str), got {type(value).__name__}")
        if any(value not in r.get("time_s", {}) for r in rows):
            raise ValueError(f"{name}={value!r} is not a variant timed in every row")
    crossover = None
    for tokens in sorted({r["tokens"] for r in rows}, reverse=True):  # cells of equal B * S must all win
        if any(r["time_s"][base] / r["time_s"][other] < margin for r in rows if r["tokens"] == tokens):
            break
        crossover = tokens
    return crossover


def last_level_cache_bytes(cache_dir="/sys/devices/system/cpu/cpu0/cache") -> int | None:
    """Size in bytes of the processor's largest data cache (L3 on most machines), from Linux's sysfs.

    Reads `cache_dir/index*/{level,type,size}` (size as "32768K"); returns None where that is missing or
    unreadable (macOS, Windows, some containers).
    """
    if not isinstance(cache_dir, (str, Path)):
        raise TypeError(f"cache_dir must be a path, got {type(cache_dir).__name__}")
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    best = None  # (level, bytes)
    try:
        for index in sorted(Path(cache_dir).glob("index*")):
            level = int((index / "level").read_text().strip())
            kind = (index / "type").read_text().strip()
            size = (index / "size").read_text().strip()
            if kind == "Instruction" or not size:
                continue
            n = int(size[:-1]) * units[size[-1].upper()] if size[-1].upper() in units else int(size)
            if best is None or (level, n) > best:
                best = (level, n)
    except (OSError, ValueError):
        return None
    return None if best is None else best[1]
