"""Checkers for chapter 9, GPU timing I: attention kernels."""
from __future__ import annotations

import math
import numbers
import re
import statistics
import time

import torch
from torch import Tensor

from ..attention import softmax
from ..timing import attention_flops, score_matrix_bytes
from ._core import Wrong, call, describe, exercise, expect_close, expect_tensor, expect_tuple

# ---------------------------------------------------------------------------------------------------------
# 9.1 online softmax over blocks
# ---------------------------------------------------------------------------------------------------------

_SOFTMAX_INSTEAD = ("stream over the blocks: keep a running maximum m and a running sum l of exp(x - m), "
                    "rescale l by exp(m_old - m_new) when m grows, then return exp(x - m) / l")
ONLINE_SOFTMAX_FORBIDDEN = [(name, _SOFTMAX_INSTEAD) for name in (
    "torch.softmax", "torch.Tensor.softmax", "torch.nn.functional.softmax", "torch.special.softmax",
    "torch.log_softmax", "torch.Tensor.log_softmax", "torch.nn.functional.log_softmax", "torch.special.log_softmax",
    "torch.logsumexp", "torch.Tensor.logsumexp", "torch.special.logsumexp",
    "attnbook.attention.softmax", "attnbook.attention.scaled_dot_product_attention",
    "attnbook.attention.tiled_attention", "torch.nn.functional.scaled_dot_product_attention",
)]

_NO_RESCALE_SUM = ("when a block raises the running maximum from m_old to m_new, the sum collected so far was "
                   "relative to m_old: multiply it by exp(m_old - m_new) before adding the new block's terms")
_OWN_MAX = ("each block was shifted by its own maximum, so the blocks' terms are on different scales: shift "
            "every term by the one running maximum of everything seen (and rescale what came before)")
_PER_BLOCK = ("you normalised each block on its own (each block sums to 1); the weights of the whole row must "
              "sum to 1: divide by one sum over all the blocks")
_NO_FINAL_RESCALE = ("the weights of the early blocks were computed with the maximum known at that time; at the "
                     "end, compute every weight with the final maximum m: exp(x - m) / l")
_NO_SHIFT = ("exp of a logit of 1000 overflows to inf (and exp(-1000) underflows to 0): subtract the running "
             "maximum before exp, as the chapter's online softmax does")
_FIXED_SHIFT = ("an empty block has no maximum; treating it as 0 (or any fixed number) shifts by too much when "
                "every logit is far below it, and exp underflows to 0: skip empty blocks")
_ALL_INF_BLOCK = ("a block whose entries are all -inf has maximum -inf, and exp(-inf - (-inf)) is NaN: while the "
                  "running maximum is still -inf, skip the block (it adds nothing to the sum) or shift by 0")


def _logits(*sizes: int, seed: int, scale: float = 3.0, dtype=torch.float64, offset: float = 0.0) -> list[Tensor]:
    """Random blocks of the given sizes; block j is shifted by offset * j so that the maximum tends to grow."""
    g = torch.Generator().manual_seed(seed)
    return [scale * torch.randn(n, generator=g, dtype=dtype) + offset * j for j, n in enumerate(sizes)]


def _online_cases() -> list[tuple[str, list[Tensor]]]:
    """(description, blocks) for 9.1, ordered so that each mistake shows up first where it is unambiguous."""
    rising = _logits(3, 4, 2, seed=1, offset=4.0)  # the maximum grows from block to block
    huge = [torch.tensor([1000.0, -1000.0, 998.0]), torch.tensor([999.0, 1001.0]),
            torch.tensor([-1000.0]), torch.tensor([1000.5, 0.0])]  # float32
    deep = [torch.tensor([-201.0, -203.5]), torch.tensor([]), torch.tensor([-200.0, -204.0, -202.0])]  # float32
    masked = _logits(3, 4, 3, seed=4)
    masked[1][torch.tensor([0, 2])] = float("-inf")  # two masked entries, as a causal or padding mask leaves
    first_masked = [torch.full((3,), float("-inf"), dtype=torch.float64)] + _logits(2, 3, seed=5)
    g = torch.Generator().manual_seed(6)
    sizes = torch.randint(0, 6, (200,), generator=g).tolist()
    long = [2.0 * torch.randn(n, generator=g, dtype=torch.float64) + 0.05 * j for j, n in enumerate(sizes)]
    return [
        ("one block of 5 logits", _logits(5, seed=0)),
        ("3 blocks of sizes 3, 4 and 2 whose maximum grows from block to block", rising),
        ("4 blocks of float32 logits of about +-1000", huge),
        ("8 blocks of size 1", _logits(*[1] * 8, seed=2, offset=1.0)),
        ("3 blocks with the largest logit in the first block", _logits(4, 3, 5, seed=3, offset=-5.0)),
        ("float32 logits of about -200 in 3 blocks, the middle one empty", deep),
        ("3 blocks, the second with two entries equal to -inf (masked)", masked),
        ("3 blocks, the first with every entry equal to -inf", first_masked),
        ("an empty block first, then 2 blocks", [torch.tensor([], dtype=torch.float64)] + _logits(3, 2, seed=7)),
        (f"a long row in {len(long)} blocks of 0 to 5 logits", long),
    ]


def _stream_max(blocks: list[Tensor]) -> list[float]:
    """The running maximum after each block (-inf until a finite logit is seen; empty blocks change nothing)."""
    m, out = float("-inf"), []
    for b in blocks:
        if b.numel():
            m = max(m, b.max().item())
        out.append(m)
    return out


def _shift(m: float) -> float:
    return m if math.isfinite(m) else 0.0


def _no_rescale_sum(blocks: list[Tensor]) -> Tensor:
    """The running sum is never rescaled when the maximum grows."""
    l = 0.0
    for b, m in zip(blocks, _stream_max(blocks)):
        l += torch.exp(b.double() - _shift(m)).sum().item()
    m = _stream_max(blocks)[-1]
    return torch.cat([torch.exp(b.double() - m) for b in blocks]) / l


def _own_max(blocks: list[Tensor]) -> Tensor:
    """Each block shifted by its own maximum, then one common normaliser."""
    e = torch.cat([torch.exp(b.double() - _shift(b.max().item())) if b.numel() else b.double() for b in blocks])
    return e / e.sum()


def _per_block(blocks: list[Tensor]) -> Tensor:
    """Each block normalised on its own."""
    return torch.cat([softmax(b.double(), dim=-1) for b in blocks])


def _no_final_rescale(blocks: list[Tensor]) -> Tensor:
    """The right running sum, but each block's weights keep the maximum known when the block arrived."""
    maxes = _stream_max(blocks)
    l = 0.0
    for i, b in enumerate(blocks):
        old = maxes[i - 1] if i else float("-inf")
        l = l * math.exp(old - maxes[i]) if math.isfinite(old) else 0.0
        l += torch.exp(b.double() - _shift(maxes[i])).sum().item()
    return torch.cat([torch.exp(b.double() - _shift(m)) for b, m in zip(blocks, maxes)]) / l


def _no_shift(blocks: list[Tensor]) -> Tensor:
    """exp without subtracting anything, in the blocks' own dtype (overflows for large logits)."""
    e = torch.cat([torch.exp(b) for b in blocks])
    return e / e.sum()


def _fixed_shift(blocks: list[Tensor]) -> Tensor:
    """An empty block counted as maximum 0: every exp(x - 0) underflows in the blocks' dtype, giving all zeros
    (or NaN from 0 / 0, which the checker reports through its nan_hint)."""
    m = max(_stream_max(blocks)[-1], 0.0)
    e = torch.cat([torch.exp(b - m) for b in blocks])
    return torch.nan_to_num(e / e.sum(), nan=0.0)


def _online_mistakes(blocks: list[Tensor], has_empty: bool, first_all_inf: bool) -> dict[str, Tensor]:
    """The output of each known mistake on `blocks`, keyed by its hint."""
    out = {}
    if first_all_inf:
        out[_ALL_INF_BLOCK] = torch.full((sum(b.numel() for b in blocks),), float("nan"), dtype=torch.float64)
    if has_empty:  # an answer without a shift has failed on the logits of +-1000 before it gets here
        out[_FIXED_SHIFT] = _fixed_shift(blocks)
    else:
        out[_NO_SHIFT] = _no_shift(blocks)
        out[_PER_BLOCK] = _per_block(blocks)
        out[_OWN_MAX] = _own_max(blocks)
    out[_NO_RESCALE_SUM] = _no_rescale_sum(blocks)
    out[_NO_FINAL_RESCALE] = _no_final_rescale(blocks)
    return out


def _online_error_hint(message: str) -> str | None:
    if re.search(r"numel\(\) == 0|non-zero size|zero-size|empty", message):
        return "an empty block has no maximum: skip blocks with b.numel() == 0 (they add nothing to the sum)"
    if "expected a non-empty list of Tensors" in message:
        return "torch.cat needs at least one tensor: build the list of weights from the blocks you were given"
    return None


@exercise("9.1", "Online softmax over blocks", section="How online softmax works")
def check_online_softmax(online_softmax) -> str:
    """online_softmax(blocks) -> the softmax of torch.cat(blocks), one 1-D tensor."""
    cases = _online_cases()
    for desc, blocks in cases:
        given = [b.clone() for b in blocks]
        got = call(online_softmax, given, what="online_softmax", on=desc, forbid=ONLINE_SOFTMAX_FORBIDDEN,
                   explain=_online_error_hint)
        for i, (b, original) in enumerate(zip(given, blocks)):
            if b.shape != original.shape or not torch.equal(b, original):
                raise Wrong(f"online_softmax changed block {i} of its input in place on {desc}",
                            "use out-of-place operations (b - m, not b -= m or b.sub_(m))")
        total = sum(b.numel() for b in blocks)
        expected = softmax(torch.cat([b.double() for b in blocks]), dim=-1)  # (total,)
        if isinstance(got, (list, tuple)):
            hint = ("you returned one tensor per block: join them into one 1-D tensor with torch.cat"
                    if got and all(isinstance(x, Tensor) for x in got) else
                    "return one 1-D tensor holding the weights of every logit, in order")
            raise Wrong(f"online_softmax returned {describe(got)} on {desc}, expected one 1-D tensor of "
                        f"{total} weights", hint)
        got = expect_tensor(got, what="the result", on=desc, finite=False)
        if got.dim() != 1:
            raise Wrong(f"the result has shape {tuple(got.shape)} on {desc}, expected ({total},)",
                        "return one 1-D tensor: the weights of all the blocks, one after the other")
        has_empty = any(b.numel() == 0 for b in blocks)
        first_all_inf = bool(blocks[0].numel()) and bool(torch.isneginf(blocks[0]).all())
        atol = 1e-6 if all(b.dtype == torch.float64 for b in blocks) else 1e-5
        nan_hint = _ALL_INF_BLOCK if first_all_inf else _FIXED_SHIFT if has_empty else _NO_SHIFT
        expect_close(got, expected, what="the result", on=desc, atol=atol, rtol=1e-4,
                     mistakes=_online_mistakes(blocks, has_empty, first_all_inf), nan_hint=nan_hint)
    return (f"right on {len(cases)} rows, including logits of +-1000, empty blocks, -inf entries and a row "
            f"of {len(cases[-1][1])} blocks")


# ---------------------------------------------------------------------------------------------------------
# 9.2 FLOPs and bytes of attention
# ---------------------------------------------------------------------------------------------------------

_DTYPES = {1: torch.int8, 2: torch.float16, 4: torch.float32, 8: torch.float64}

COST_FORBIDDEN = [
    (name, "write the two formulas yourself: count the multiply-adds of Q K^T and of P V, and the entries of "
           "the score matrix")
    for name in ("attnbook.timing.attention_flops", "attnbook.timing.score_matrix_bytes",
                 "attnbook.timing.kv_cache_bytes")
]


def _flop_mistakes(B: int, H: int, N: int, d: int, nbytes: int) -> list[tuple[str, int]]:
    """(hint, value) for the FLOP counts that common mistakes give."""
    return [
        ("that is 2·B·H·N²·d: you counted one of the two matrix products, or both products as multiply-adds; "
         "count Q Kᵀ and P V, each at 2 FLOPs (a multiply and an add) per multiply-add", 2 * B * H * N * N * d),
        ("that is B·H·N²·d, the multiply-adds of one matrix product: attention has two products (Q Kᵀ and P V), "
         "and each multiply-add is 2 FLOPs", B * H * N * N * d),
        ("that counts only the causal pairs (N(N+1)/2 per head); this task asks for attention without a mask, "
         "where every query meets every key", 2 * B * H * N * (N + 1) * d),
        ("d_head appears once: each of the N² scores is a dot product of length d_head (and each of the N·d "
         "outputs a sum of N terms), so the count is 4·B·H·N²·d, not 4·B·H·N·d²", 4 * B * H * N * d * d),
        ("every query meets every key: N queries times N keys is N² pairs, not N", 4 * B * H * N * d),
        ("multiply by the number of heads: every head computes its own scores", 4 * B * N * N * d),
        ("multiply by the batch size: every sequence in the batch computes its own scores", 4 * H * N * N * d),
        ("multiply by both the batch size and the number of heads", 4 * N * N * d),
        ("FLOPs do not depend on the bytes per element: leave bytes_per_el out of the FLOP count",
         4 * B * H * N * N * d * nbytes),
    ]


def _byte_mistakes(B: int, H: int, N: int, d: int, nbytes: int) -> list[tuple[str, int]]:
    """(hint, value) for the score-matrix sizes that common mistakes give."""
    return [
        ("that is the size in bits: an element of bytes_per_el bytes is 8·bytes_per_el bits; return bytes",
         8 * B * H * N * N * nbytes),
        ("the score matrix has one entry per (query, key) pair: N² entries per head, not N", B * H * N * nbytes),
        ("the score matrix has N × N entries per head, not N × N × d_head: each score is one number",
         B * H * N * N * d * nbytes),
        ("count one (B, H, N, N) matrix, the scores; the weights reuse the same size but the task asks for one "
         "matrix", 2 * B * H * N * N * nbytes),
        ("multiply the number of entries by bytes_per_el", B * H * N * N),
        ("multiply by the number of heads: every head has its own N × N scores", B * N * N * nbytes),
        ("multiply by the batch size: every sequence has its own N × N scores", H * N * N * nbytes),
    ]


def _as_int(x, name: str, on: str) -> int:
    """A Python int from an int or a one-element integer tensor; else Wrong naming `name`."""
    if isinstance(x, Tensor) and x.numel() == 1 and x.dtype != torch.bool:
        x = x.item()  # a Python int or float
    if isinstance(x, numbers.Integral) and not isinstance(x, bool):
        return int(x)
    if isinstance(x, numbers.Real) and not isinstance(x, bool):
        raise Wrong(f"{name} is {describe(x)} ({float(x):g}) on {on}, expected an int",
                    "FLOPs and bytes are whole numbers: compute them with integer arithmetic (*, **), not / or "
                    "math.pow, which give floats")
    raise Wrong(f"{name} is {describe(x)} on {on}, expected an int",
                "return two Python ints: `return flops, score_bytes`")


@exercise("9.2", "FLOPs and bytes of attention", section="What attention costs: FLOPs and bytes")
def check_attention_cost(attention_cost) -> str:
    """attention_cost(batch, heads, n, d_head, bytes_per_el) -> (flops, score_bytes), exact ints."""
    cases = [(3, 5, 7, 5, 4), (1, 1, 4, 2, 4), (4, 12, 1024, 64, 2), (1, 32, 4096, 128, 2), (3, 16, 100, 64, 8),
             (1, 1, 1, 1, 1), (8, 32, 32768, 128, 2)]
    for B, H, N, d, nbytes in cases:
        on = f"batch={B}, heads={H}, n={N}, d_head={d}, bytes_per_el={nbytes}"
        got = call(attention_cost, B, H, N, d, nbytes, what="attention_cost", on=on, forbid=COST_FORBIDDEN)
        flops_got, bytes_got = expect_tuple(got, ("flops", "score_bytes"), "attention_cost", on)
        flops_got, bytes_got = _as_int(flops_got, "flops", on), _as_int(bytes_got, "score_bytes", on)
        flops = attention_flops(B, H, N, N, d)
        score_bytes = score_matrix_bytes(B, H, N, N, _DTYPES[nbytes])
        if (flops_got, bytes_got) == (flops, score_bytes):
            continue
        if (flops_got, bytes_got) == (score_bytes, flops) and flops != score_bytes:
            raise Wrong(f"attention_cost returned (score_bytes, flops) on {on}",
                        "return them in the order the task gives: `return flops, score_bytes`")
        if flops_got != flops:
            raise Wrong(f"flops is {flops_got:,} on {on}, expected {flops:,}",
                        _first_match(flops_got, _flop_mistakes(B, H, N, d, nbytes), flops, scores=B * H * N * N))
        raise Wrong(f"score_bytes is {bytes_got:,} on {on}, expected {score_bytes:,}",
                    _first_match(bytes_got, _byte_mistakes(B, H, N, d, nbytes), score_bytes))
    return f"exact FLOPs and bytes on {len(cases)} sizes, from 1 token to 32,768"


def _first_match(got: int, mistakes: list[tuple[str, int]], right: int, scores: int | None = None) -> str | None:
    """The hint of the first mistake whose value is `got` (and differs from the right answer); with `scores`
    (the number of entries of the score matrix), also recognise a few extra FLOPs per score."""
    for hint, value in mistakes:
        if value == got and value != right:
            return hint
    if scores and got > right and (got - right) % scores == 0 and (got - right) // scores <= 10:
        return "count only the two matrix products, as is customary; the softmax and the scaling are not counted"
    return None


# ---------------------------------------------------------------------------------------------------------
# 9.3 a timing function
# ---------------------------------------------------------------------------------------------------------

TIMING_FORBIDDEN = [
    (name, "write the loop yourself with time.perf_counter(): warm-up calls, then timed calls, then the median")
    for name in ("attnbook.timing.benchmark", "torch.utils.benchmark.Timer", "torch.utils.benchmark.utils.timer.Timer")
]


class _Workload:
    """A function of no arguments that sleeps for scheduled durations and records when each call ran.

    Call i sleeps schedule[i] seconds (the last entry repeats). `durations` holds what each call really took,
    measured inside the call, so the checker knows the median, mean, min and total of the calls it timed.
    """

    def __init__(self, schedule_ms: list[float]):
        self.schedule = [ms / 1e3 for ms in schedule_ms]
        self.durations: list[float] = []

    def __call__(self):
        start = time.perf_counter()
        time.sleep(self.schedule[min(len(self.durations), len(self.schedule) - 1)])
        self.durations.append(time.perf_counter() - start)

    @property
    def calls(self) -> int:
        return len(self.durations)


def _timing_error_hint(message: str) -> str | None:
    if re.search(r"CUDA|cuda", message):
        return ("torch.cuda.synchronize() fails on a machine without a GPU: call it only when "
                "torch.cuda.is_available() is True")
    if "statistics" in message or "median" in message:
        return "collect one time per timed call in a list, then take statistics.median of that list"
    return None


def _as_seconds(got, on: str) -> float:
    """A Python float from the learner's result; else Wrong."""
    if isinstance(got, Tensor):
        if got.numel() != 1:
            raise Wrong(f"time_it returned a tensor of shape {tuple(got.shape)} {on}, expected one number",
                        "return the median of the timed calls, one number in seconds")
        got = got.item()
    elif not isinstance(got, (numbers.Real, Tensor)) and hasattr(got, "__array__") and getattr(got, "size", 0) == 1:
        got = float(got)
    if got is None:
        raise Wrong(f"time_it returned None {on}", "did you forget the `return` statement?")
    if isinstance(got, (list, tuple)):
        raise Wrong(f"time_it returned {describe(got)} {on}, expected one number",
                    "return the median of the list of times (statistics.median(times)), not the list")
    if isinstance(got, bool) or not isinstance(got, numbers.Real):
        raise Wrong(f"time_it returned {describe(got)} {on}, expected a float (seconds)",
                    "return the median time of one call, in seconds")
    value = float(got)
    if not math.isfinite(value) or value <= 0:
        raise Wrong(f"time_it returned {value} {on}, expected a positive number of seconds",
                    "time each call as time.perf_counter() after minus time.perf_counter() before")
    return value


def _close(got: float, target: float) -> bool:
    """Within 10 % + 0.5 ms of `target`: a few microseconds of the learner's own overhead are allowed."""
    return abs(got - target) <= 0.10 * target + 5e-4


def _count_hint(calls: int, n_warmup: int, n_runs: int) -> str:
    if calls == 0:
        return "call fn() inside time_it: n_warmup times to warm up, then n_runs times with the clock running"
    if calls == n_runs:
        return ("warm up first: call fn() n_warmup times without timing it, so that one-time costs (lazy "
                "imports, caches, CUDA initialisation) stay out of the measurement")
    if calls == n_warmup:
        return "after the warm-up, time n_runs calls of fn()"
    if n_warmup != 3 and calls == 3 + n_runs:
        return "use the n_warmup argument for the number of warm-up calls instead of a fixed number"
    if n_runs != 10 and calls == n_warmup + 10:
        return "use the n_runs argument for the number of timed calls instead of a fixed number"
    if calls == n_warmup + n_runs + 1:
        return "call fn() exactly n_warmup + n_runs times: the check counts the calls"
    if calls == 1 + n_runs and n_warmup != 1:
        return "warm up with n_warmup calls, not one"
    return "call fn() n_warmup times untimed, then n_runs times timed, and nothing more"


@exercise("9.3", "A timing function", section="How to time honestly")
def check_time_it(time_it) -> str:
    """time_it(fn, n_warmup=3, n_runs=10) -> median seconds of n_runs calls after n_warmup untimed calls."""
    cases = [  # (description, schedule in ms, n_warmup, n_runs; None = leave the default)
        ("a function whose first 2 calls take 50 ms and the others 2 ms, with the default n_warmup and n_runs",
         [50, 50, 2], None, None),
        ("a function whose timed calls take 4, 2, 6, 150, 2, 4 and 6 ms (one rare slow call), "
         "with n_warmup=2, n_runs=7", [1, 1, 4, 2, 6, 150, 2, 4, 6], 2, 7),
        ("a function whose first 3 calls take 40 ms and the others 3 ms, with n_warmup=3, n_runs=3",
         [40, 40, 40, 3], 3, 3),
        ("a function whose first call takes 30 ms and the others 2 ms, with n_warmup=1, n_runs=5",
         [30, 2], 1, 5),
        ("a function that takes 2 ms, with n_warmup=0, n_runs=3", [2], 0, 3),
    ]
    for desc, schedule, n_warmup, n_runs in cases:
        fn = _Workload(schedule)
        kwargs = {} if n_warmup is None else {"n_warmup": n_warmup, "n_runs": n_runs}
        on = f"on {desc}"
        got = call(time_it, fn, what="time_it", on=desc, forbid=TIMING_FORBIDDEN, seed=None,
                   explain=_timing_error_hint, **kwargs)
        n_warmup, n_runs = (3, 10) if n_warmup is None else (n_warmup, n_runs)
        seconds = _as_seconds(got, on)
        if fn.calls != n_warmup + n_runs:
            raise Wrong(f"time_it called fn {fn.calls} times {on}; expected {n_warmup + n_runs}: {n_warmup} "
                        f"warm-up calls, then {n_runs} timed calls", _count_hint(fn.calls, n_warmup, n_runs))
        timed, every = fn.durations[n_warmup:], fn.durations
        median = statistics.median(timed)
        if _close(seconds, median):
            continue
        known = [
            ("you returned milliseconds; return seconds (the difference of two time.perf_counter() readings)",
             1e3 * median),
            ("you returned the total time of the timed calls; return the median time of one call",
             sum(timed)),
            ("you returned the mean; a single slow call (another program, a page fault, a garbage collection) "
             "pulls the mean up, while the median is the typical call: return statistics.median(times)",
             statistics.mean(timed)),
            ("you returned the fastest call (the minimum); the minimum is what Python's timeit reports and a "
             "fine estimate of the best case, but this task asks for the typical call, the median, as this "
             "book's tables report", min(timed)),
            ("the warm-up calls were timed too: start collecting times only after the n_warmup warm-up calls",
             statistics.median(every)),
            ("the warm-up calls were timed too, and averaged: time only the n_runs calls after the warm-up, and "
             "return their median", statistics.mean(every)),
            ("you returned the slowest call; return the median", max(timed)),
            ("you returned the total divided by n_runs, which is the mean: collect one time per call and "
             "return their median", sum(timed) / n_runs),
        ]
        for hint, value in known:
            if _close(seconds, value) and not _close(median, value):
                raise Wrong(f"time_it returned {seconds:.4g} s {on}, but the calls it timed took a median of "
                            f"{median:.4g} s", hint)
        raise Wrong(f"time_it returned {seconds:.4g} s {on}, but the calls it timed took a median of {median:.4g} s",
                    "time each of the n_runs calls separately with time.perf_counter() and return the median of "
                    "those times, in seconds")
    return (f"warm-up, call count and median right on {len(cases)} functions, including slow first calls and a "
            "rare outlier")

