"""Serving many requests (chapter 10): a paged KV cache, what caches waste, and batching schedules.

- `gather_pages`, `PagedKVCache`: keys and values kept in a pool of fixed-size blocks,
  `(num_blocks, block_size, n_heads, d_head)`, with a block table per sequence (vLLM's PagedAttention, Kwon et
  al. 2023, arXiv:2309.06180); `gather_pages` reads one sequence back into contiguous `(length, n_heads,
  d_head)` form.
- `paged_waste_bytes`, `preallocated_waste_bytes`, `cat_copied_bytes`: the bytes a paged cache leaves unused
  (at most `block_size - 1` slots per sequence), those of a cache preallocated to `max_len` per sequence, and the
  bytes that growing a cache with `torch.cat` one token at a time copies.
- `window_cache_bytes`, `mla_cache_bytes`: the cache of a sliding window (Mistral, arXiv:2310.06825) with
  optional attention sinks (StreamingLLM, arXiv:2309.17453), and of multi-head latent attention (DeepSeek-V2,
  arXiv:2405.04434), which caches one compressed latent and one shared RoPE key per token and layer.
- `Request`, `seeded_trace`, `StepCost`, `simulate_static`, `simulate_continuous`, `summarize`: a simulator of
  a server on a trace of requests, with static batching (a batch runs until its longest request ends) against
  continuous batching (iteration-level scheduling: Orca, Yu et al., OSDI 2022), under a stated step-cost model.
- `prefill_decode_times`: time to first token and time per output token of greedy cached decoding with the
  chapter's GPT (`models.GPT`).
"""
from __future__ import annotations

import math
import random
import statistics
import time
from typing import NamedTuple

import torch
from torch import Tensor

from ._validate import require_int, require_tensor

__all__ = [
    "gather_pages", "PagedKVCache", "paged_waste_bytes", "preallocated_waste_bytes", "cat_copied_bytes",
    "window_cache_bytes", "mla_cache_bytes", "Request", "seeded_trace", "StepCost", "Finished", "simulate_static",
    "simulate_continuous", "summarize", "prefill_decode_times",
]


def _require_nonnegative(x, name: str) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {x!r}")
    return float(x)


# ----------------------------------------------------------------------------------------------------------------
# the paged cache
# ----------------------------------------------------------------------------------------------------------------

def gather_pages(pool: Tensor, block_table: Tensor, length: int) -> Tensor:
    """The `length` cached entries of one sequence, in order, as a contiguous `(length, n_heads, d_head)` tensor.

    `pool` is `(num_blocks, block_size, n_heads, d_head)`; `block_table` a 1-D integer tensor of the sequence's
    block ids, exactly `ceil(length / block_size)` of them: position t sits in block `block_table[t //
    block_size]`, at slot `t % block_size`."""
    require_tensor(pool, "pool")
    if pool.dim() != 4:
        raise ValueError(f"pool must be (num_blocks, block_size, n_heads, d_head), got shape {tuple(pool.shape)}")
    require_tensor(block_table, "block_table")
    if block_table.dim() != 1 or block_table.is_floating_point() or block_table.dtype == torch.bool:
        raise TypeError(f"block_table must be a 1-D integer tensor, got {block_table.dtype} of shape "
                        f"{tuple(block_table.shape)}")
    require_int(length, "length", minimum=0)
    num_blocks, block_size = pool.shape[:2]
    needed = -(-length // block_size)
    if block_table.numel() != needed:
        raise ValueError(f"block_table must hold ceil(length / block_size) = {needed} block ids for length "
                         f"{length}, got {block_table.numel()}")
    if needed and not bool(((block_table >= 0) & (block_table < num_blocks)).all()):
        raise ValueError(f"block_table holds ids outside 0..{num_blocks - 1}: {block_table.tolist()}")
    blocks = pool[block_table.long()]  # (n, block_size, n_heads, d_head)
    return blocks.reshape(-1, *pool.shape[2:])[:length]  # (length, n_heads, d_head)


class PagedKVCache:
    """The keys and values of many sequences (one layer) in two pools of fixed-size blocks, and a block table
    per sequence. A sequence takes a new block from the free list only when its last block is full, and gives
    its blocks back when it ends, so no sequence ever holds more than `block_size - 1` unused slots."""

    def __init__(self, num_blocks: int, block_size: int, n_heads: int, d_head: int,
                 dtype: torch.dtype = torch.float32, device="cpu"):
        for name, value in (("num_blocks", num_blocks), ("block_size", block_size), ("n_heads", n_heads),
                            ("d_head", d_head)):
            require_int(value, name, minimum=1)
        self.block_size = block_size
        self.k_pool = torch.zeros(num_blocks, block_size, n_heads, d_head, dtype=dtype, device=device)
        self.v_pool = torch.zeros_like(self.k_pool)
        self.free_blocks = list(range(num_blocks - 1, -1, -1))  # popped from the end: block 0 first
        self.tables: dict[object, list[int]] = {}
        self.lengths: dict[object, int] = {}

    def append(self, seq, k: Tensor, v: Tensor) -> None:
        """Store one token's key and value, each `(n_heads, d_head)`, at the end of sequence `seq`."""
        for name, x in (("k", k), ("v", v)):
            require_tensor(x, name)
            if tuple(x.shape) != tuple(self.k_pool.shape[2:]):
                raise ValueError(f"{name} must have shape {tuple(self.k_pool.shape[2:])} (n_heads, d_head), "
                                 f"got {tuple(x.shape)}")
        table, length = self.tables.setdefault(seq, []), self.lengths.get(seq, 0)
        if length % self.block_size == 0:  # the last block is full (or there is none): take a new one
            if not self.free_blocks:
                raise RuntimeError(f"the pool's {self.k_pool.size(0)} blocks are all in use")
            table.append(self.free_blocks.pop())
        block, slot = table[length // self.block_size], length % self.block_size
        self.k_pool[block, slot] = k
        self.v_pool[block, slot] = v
        self.lengths[seq] = length + 1

    def gather(self, seq) -> tuple[Tensor, Tensor]:
        """Sequence `seq`'s keys and values, each `(length, n_heads, d_head)`, contiguous."""
        if seq not in self.tables:
            raise KeyError(f"no sequence {seq!r} in the cache")
        table = torch.tensor(self.tables[seq], dtype=torch.long, device=self.k_pool.device)
        length = self.lengths[seq]
        return gather_pages(self.k_pool, table, length), gather_pages(self.v_pool, table, length)

    def release(self, seq) -> None:
        """End sequence `seq`: its blocks go back to the free list."""
        if seq not in self.tables:
            raise KeyError(f"no sequence {seq!r} in the cache")
        self.free_blocks.extend(reversed(self.tables.pop(seq)))
        del self.lengths[seq]

    def wasted_slots(self) -> int:
        """Slots held by the sequences but not yet written (the unused tail of each last block)."""
        return sum(len(self.tables[s]) * self.block_size - n for s, n in self.lengths.items())


# ----------------------------------------------------------------------------------------------------------------
# bytes: waste and copies
# ----------------------------------------------------------------------------------------------------------------

def _lengths(lengths) -> list[int]:
    if isinstance(lengths, (str, bytes)) or not hasattr(lengths, "__iter__"):
        raise TypeError(f"lengths must be a sequence of ints, got {type(lengths).__name__}")
    return [require_int(n, "each length", minimum=0) for n in lengths]


def paged_waste_bytes(lengths, block_size: int, bytes_per_token: int) -> int:
    """Bytes a paged cache holds but does not use: each sequence's last block is filled only up to its length,
    so a sequence of n tokens wastes `(-n) % block_size` slots (0 to block_size - 1)."""
    require_int(block_size, "block_size", minimum=1)
    require_int(bytes_per_token, "bytes_per_token", minimum=0)
    return sum((-n) % block_size for n in _lengths(lengths)) * bytes_per_token


def preallocated_waste_bytes(lengths, max_len: int, bytes_per_token: int) -> int:
    """Bytes unused by a cache that reserves `max_len` tokens per sequence up front (as a static cache does)."""
    lengths = _lengths(lengths)
    require_int(max_len, "max_len", minimum=0)
    require_int(bytes_per_token, "bytes_per_token", minimum=0)
    if any(n > max_len for n in lengths):
        raise ValueError(f"every length must be <= max_len = {max_len}, got {max(lengths)}")
    return sum(max_len - n for n in lengths) * bytes_per_token


def cat_copied_bytes(length: int, bytes_per_token: int) -> int:
    """Bytes that growing one cache from empty to `length` tokens with `torch.cat`, one token per step, copies:
    step s copies the s tokens already cached into a new tensor, 0 + 1 + ... + (length - 1) tokens in all."""
    require_int(length, "length", minimum=0)
    require_int(bytes_per_token, "bytes_per_token", minimum=0)
    return length * (length - 1) // 2 * bytes_per_token


def _element_bytes(dtype) -> int:
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a torch.dtype, got {type(dtype).__name__}")
    return dtype.itemsize


def window_cache_bytes(n_layers: int, n_kv_heads: int, d_head: int, seq_len: int, window: int, *,
                       n_sink: int = 0, batch: int = 1, dtype: torch.dtype = torch.float16) -> int:
    """Bytes of a KV cache that keeps only the last `window` positions (a rolling buffer, as Mistral 7B's
    sliding window of 4096) plus the first `n_sink` positions (attention sinks, StreamingLLM): it stops growing
    at `window + n_sink` positions."""
    for name, value in (("n_layers", n_layers), ("n_kv_heads", n_kv_heads), ("d_head", d_head),
                        ("window", window), ("batch", batch)):
        require_int(value, name, minimum=1)
    require_int(seq_len, "seq_len", minimum=0)
    require_int(n_sink, "n_sink", minimum=0)
    kept = min(seq_len, window + n_sink)
    return 2 * n_layers * n_kv_heads * d_head * kept * batch * _element_bytes(dtype)


def mla_cache_bytes(n_layers: int, latent_dim: int, rope_dim: int, seq_len: int, *, batch: int = 1,
                    dtype: torch.dtype = torch.float16) -> int:
    """Bytes of a multi-head latent attention cache (DeepSeek-V2): per token and layer, one compressed latent
    of `latent_dim` numbers, from which every head's key and value are rebuilt, and one RoPE key of `rope_dim`
    numbers shared by the heads (DeepSeek-V2: 512 and 64)."""
    for name, value in (("n_layers", n_layers), ("latent_dim", latent_dim), ("batch", batch)):
        require_int(value, name, minimum=1)
    require_int(rope_dim, "rope_dim", minimum=0)
    require_int(seq_len, "seq_len", minimum=0)
    return n_layers * (latent_dim + rope_dim) * seq_len * batch * _element_bytes(dtype)


# ----------------------------------------------------------------------------------------------------------------
# a server, simulated
# ----------------------------------------------------------------------------------------------------------------

class Request(NamedTuple):
    """A request: when it arrives (seconds), its prompt length and how many tokens it generates (>= 1)."""
    arrival: float
    prompt: int
    output: int


class Finished(NamedTuple):
    """What the simulator reports per request: the request, when its first token and its last came out."""
    request: Request
    first_token: float
    done: float


class StepCost(NamedTuple):
    """The cost model of one model step (one iteration): `fixed + per_token * tokens`, where tokens counts
    every position the step runs (a prompt's every token in its prefill step, one per decoding sequence). The
    fixed part stands for reading the weights, which a step does once whatever the batch."""
    fixed: float
    per_token: float

    def __call__(self, tokens: int) -> float:
        return self.fixed + self.per_token * tokens


def seeded_trace(n: int, seed: int = 0, *, rate: float = 1.0, prompt=(16, 512), output=(1, 256)) -> list[Request]:
    """`n` requests arriving as a Poisson process of `rate` per second, prompt and output lengths drawn
    uniformly from the inclusive ranges `prompt` and `output`; the same seed gives the same trace."""
    require_int(n, "n", minimum=0)
    require_int(seed, "seed")
    if _require_nonnegative(rate, "rate") == 0:
        raise ValueError("rate must be > 0")
    for name, (lo, hi) in (("prompt", prompt), ("output", output)):
        if require_int(lo, f"{name}[0]", minimum=1) > require_int(hi, f"{name}[1]", minimum=1):
            raise ValueError(f"{name} must be a range (low, high) with low <= high, got {(lo, hi)}")
    rng, t, trace = random.Random(seed), 0.0, []
    for _ in range(n):
        t += rng.expovariate(rate)
        trace.append(Request(t, rng.randint(*prompt), rng.randint(*output)))
    return trace


def _check_sim(trace, cost, max_batch) -> list[Request]:
    if not isinstance(cost, StepCost):
        raise TypeError(f"cost must be a StepCost, got {type(cost).__name__}")
    _require_nonnegative(cost.fixed, "cost.fixed")
    _require_nonnegative(cost.per_token, "cost.per_token")
    require_int(max_batch, "max_batch", minimum=1)
    trace = list(trace)
    for r in trace:
        if not isinstance(r, Request) or r.prompt < 1 or r.output < 1:
            raise ValueError(f"trace must hold Requests with prompt >= 1 and output >= 1, got {r!r}")
    return sorted(trace, key=lambda r: r.arrival)


def _split_arrived(queue: list[Request], t: float, room: int) -> tuple[list[Request], list[Request]]:
    """(the first `room` requests of the queue, sorted by arrival, that have arrived by time t; the rest)."""
    n = 0
    while n < min(room, len(queue)) and queue[n].arrival <= t:
        n += 1
    return queue[:n], queue[n:]


def simulate_static(trace, cost: StepCost, max_batch: int) -> list[Finished]:
    """Static batching: when the server is idle it takes up to `max_batch` waiting requests and runs them as one
    batch until the longest output is done, every row padded (prefill: batch x longest prompt tokens; each
    decoding step: batch tokens). The batch returns together: every request is done when the batch is."""
    queue, t, out = _check_sim(trace, cost, max_batch), 0.0, []
    while queue:
        t = max(t, queue[0].arrival)
        batch, queue = _split_arrived(queue, t, max_batch)
        t += cost(len(batch) * max(r.prompt for r in batch))  # the prefill step gives every first token
        first = t
        t += sum(cost(len(batch)) for _ in range(max(r.output for r in batch) - 1))
        out += [Finished(r, first, t) for r in batch]
    return out


def simulate_continuous(trace, cost: StepCost, max_batch: int) -> list[Finished]:
    """Continuous batching (iteration-level scheduling): before every step, waiting requests that have arrived
    join the running ones up to `max_batch`; a joining request runs its whole prompt in that step (which gives
    its first token), the others one token each; a request leaves as soon as its last token is out."""
    queue, t, out = _check_sim(trace, cost, max_batch), 0.0, []
    running: list[list] = []  # [request, tokens still to generate, time of the first token]
    while queue or running:
        if not running:
            t = max(t, queue[0].arrival)
        joining, queue = _split_arrived(queue, t, max_batch - len(running))
        t += cost(sum(r.prompt for r in joining) + len(running))
        for entry in running:
            entry[1] -= 1
        running += [[r, r.output - 1, t] for r in joining]
        out += [Finished(r, first, t) for r, left, first in running if left == 0]
        running = [e for e in running if e[1] > 0]
    return out


def summarize(finished) -> dict:
    """Throughput (generated tokens per second from the first arrival to the last token) and latency (time from
    arrival to the last token: mean, and p50 and p99 by nearest rank; time to the first token: mean) of a
    simulation's result."""
    finished = list(finished)
    if not finished:
        raise ValueError("finished must hold at least one request")
    latency = sorted(f.done - f.request.arrival for f in finished)
    span = max(f.done for f in finished) - min(f.request.arrival for f in finished)
    quantile = lambda q: latency[min(len(latency) - 1, math.ceil(q * len(latency)) - 1)]  # noqa: E731 nearest rank
    return {"throughput": sum(f.request.output for f in finished) / span, "mean": statistics.fmean(latency),
            "p50": quantile(0.5), "p99": quantile(0.99),
            "ttft": statistics.fmean(f.first_token - f.request.arrival for f in finished)}


# ----------------------------------------------------------------------------------------------------------------
# prefill and decode, timed
# ----------------------------------------------------------------------------------------------------------------

@torch.no_grad()
def prefill_decode_times(model, prompt: Tensor, n_new: int, *, repeats: int = 3) -> tuple[float, float]:
    """(time to first token, time per output token) of greedy cached generation of `n_new` tokens, in
    seconds, the fastest of `repeats` runs each: the first is the prefill pass over the prompt (which chooses
    the first token), the second the mean time of each later decoding step."""
    require_tensor(prompt, "prompt", min_dim=2)
    require_int(n_new, "n_new", minimum=2)
    require_int(repeats, "repeats", minimum=1)
    sync = torch.cuda.synchronize if prompt.is_cuda else (lambda: None)
    ttft, tpot = math.inf, math.inf
    for _ in range(repeats):
        cache = model.new_cache()
        sync()
        start = time.perf_counter()
        token = model(prompt, cache)[:, -1:].argmax(-1)  # (B, 1): the prefill's token
        sync()
        first = time.perf_counter()
        for _step in range(n_new - 1):
            token = model(token, cache)[:, -1:].argmax(-1)  # (B, 1)
        sync()
        ttft, tpot = min(ttft, first - start), min(tpot, (time.perf_counter() - first) / (n_new - 1))
    return ttft, tpot
