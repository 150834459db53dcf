"""Checkers for chapter 9, GPU timing I: attention kernels."""
from __future__ import annotations

import itertools
import math
import numbers
import re
import statistics
import sys
import threading
import time
import types

import torch
from torch import Tensor

from ..attention import softmax
from ..timing import attention_flops, score_matrix_bytes
from . import guard
from .compare import expect_close, expect_tensor, expect_tuple
from .guard import call, Patches
from .hints import describe
from .registry import exercise, Wrong

# ---------------------------------------------------------------------------------------------------------
# 9.1 online softmax over blocks
# ---------------------------------------------------------------------------------------------------------

_SOFTMAX_INSTEAD = ("stream over the blocks: keep a running maximum m and a running sum l of exp(x - m), "
                    "rescale l by exp(m_old - m_new) when m grows, then return exp(x - m) / l")
# Every library softmax, log-softmax and log-sum-exp the task forbids. The core also forbids each torch.X's
# private torch._X and its torch.ops.aten routes; a NumPy ufunc is caught through its module attribute
# (np.logaddexp.reduce reaches the stand-in's attribute and raises).
_SOFTMAX_PATHS = (
    "torch.softmax", "torch.Tensor.softmax", "torch.nn.functional.softmax", "torch.special.softmax",
    "torch.log_softmax", "torch.Tensor.log_softmax", "torch.nn.functional.log_softmax", "torch.special.log_softmax",
    "torch.nn.functional.softmin", "torch.nn.functional.gumbel_softmax", "torch.nn.functional.cross_entropy",
    "torch.sparse.softmax", "torch.sparse.log_softmax",
    "torch.logsumexp", "torch.Tensor.logsumexp", "torch.special.logsumexp",
    "torch.logaddexp", "torch.Tensor.logaddexp", "torch.logaddexp2", "torch.Tensor.logaddexp2",
    "torch.distributions.Categorical", "torch.distributions.categorical.Categorical",
    "numpy.logaddexp", "numpy.logaddexp2",
    "attnbook.attention.softmax", "attnbook.attention.scaled_dot_product_attention",
    "attnbook.attention.tiled_attention", "torch.nn.functional.scaled_dot_product_attention",
)
# Python functions reached however they were imported (a profile hook matches their dotted names). No
# "torch.*" pattern: the core would add its torch._* alias, which matches torch's own internals.
# The star stands for SciPy's private module (scipy.special._logsumexp) and not for the end of the name, so that
# merely importing that module (its "<module>" frame) is not a call of softmax.
_SOFTMAX_PATTERNS = ("scipy.special.*.softmax", "scipy.special.*.log_softmax", "scipy.special.*.logsumexp")
_SCIPY_PATHS = ("scipy.special.softmax", "scipy.special.log_softmax", "scipy.special.logsumexp")


def _with_shared_aliases(paths) -> list[str]:
    """`paths` and, once each, the torch.ops.aten / torch._C._nn routes that the core would otherwise add for
    every path of a family again (torch.softmax, F.softmax, x.softmax, ... all reach torch.ops.aten.softmax):
    each forbidden entry costs time on every call, and 9.1 calls the learner's function ten times."""
    out = list(dict.fromkeys(paths))
    for path in paths:
        out += [a for a in guard.op_aliases(path) if not guard.op_aliases(a) and a not in out]
    return out


def online_softmax_forbidden() -> list[tuple[str, str]]:
    """What 9.1 forbids, as (path, instead) pairs; SciPy's functions by name only when SciPy is already loaded
    (so that a check does not import it), and by pattern always."""
    paths = list(_SOFTMAX_PATHS)
    if "scipy.special" in sys.modules:
        paths += _SCIPY_PATHS
    return [(p, _SOFTMAX_INSTEAD) for p in (*_with_shared_aliases(paths), *_SOFTMAX_PATTERNS)]


ONLINE_SOFTMAX_FORBIDDEN = [(p, _SOFTMAX_INSTEAD) for p in (*_SOFTMAX_PATHS, *_SOFTMAX_PATTERNS)]

_NO_RESCALE_SUM = ("when a block raises the running maximum from m_old to m_new, the sum collected so far was "
                   "relative to m_old: multiply it by exp(m_old - m_new) before adding the new block's terms")
_RESCALE_INVERTED = ("the rescaling factor is exp(m_old - m_new), at most 1: the terms collected so far shrink "
                     "relative to the new, larger maximum; you multiplied by exp(m_new - m_old)")
_OWN_MAX = ("each block was shifted by its own maximum, so the blocks' terms are on different scales: shift "
            "every term by the one running maximum of everything seen (and rescale what came before)")
_PER_BLOCK = ("you normalised each block on its own (each block sums to 1); the weights of the whole row must "
              "sum to 1: divide by one sum over all the blocks")
_NO_FINAL_RESCALE = ("the weights of the early blocks were computed with the maximum known at that time; at the "
                     "end, compute every weight with the final maximum m: exp(x - m) / l")
_NO_DIVIDE = "these are exp(x - m) without the division: divide by the running sum l so that the weights sum to 1"
_NO_SHIFT = ("exp of a logit of 1000 overflows to inf (and exp(-1000) underflows to 0): subtract the running "
             "maximum before exp, as the chapter's online softmax does")
_FIXED_SHIFT = ("an empty block has no maximum; treating it as 0 (or any fixed number) shifts by too much when "
                "every logit is far below it, and exp underflows to 0: skip empty blocks")
_ALL_INF_BLOCK = ("a block whose entries are all -inf has maximum -inf, and exp(-inf - (-inf)) is NaN: while the "
                  "running maximum is still -inf, skip the block (it adds nothing to the sum) or shift by 0")
_SKIPPED = ("on this input exp cannot overflow, so an inf or NaN means the running maximum m stayed -inf (or the sum "
            "l stayed 0) for some logits: was a block skipped (blocks[1:], or a size test such as len(b) > 1)? "
            "Every non-empty block must update m and l")
_NEGINF_TO_ZERO = ("a masked logit (-inf) must get weight exactly 0; replacing -inf by 0 (nan_to_num, masked_fill) "
                   "gives it the weight of a logit 0. exp(-inf - m) is already 0: guard only the shift while m is "
                   "still -inf")
_SKIP_INF_BLOCK = ("a block with some -inf entries still has finite logits that count: skip only blocks whose "
                   "entries are all -inf (exp(-inf - m) is 0 anyway), not every block that holds a -inf")
_LOW_PRECISION = ("if you used float16 or bfloat16 (.half()) anywhere, keep the blocks' own dtype instead: half "
                  "precision keeps only about 3 significant digits")


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


def _streamed_sum(blocks: list[Tensor], factor) -> float:
    """The running sum l when the old sum is multiplied by factor(m_old, m_new) as the maximum grows."""
    l, old = 0.0, float("-inf")
    for b, m in zip(blocks, _stream_max(blocks)):
        l = l * factor(old, m) if math.isfinite(old) else 0.0
        l += torch.exp(b.double() - _shift(m)).sum().item()
        old = m
    return l


def _no_rescale_sum(blocks: list[Tensor]) -> Tensor:
    """The running sum is never rescaled when the maximum grows."""
    m = _stream_max(blocks)[-1]
    return torch.cat([torch.exp(b.double() - m) for b in blocks]) / _streamed_sum(blocks, lambda old, new: 1.0)


def _rescale_inverted(blocks: list[Tensor]) -> Tensor:
    """The running sum multiplied by exp(m_new - m_old) instead of exp(m_old - m_new)."""
    m = _stream_max(blocks)[-1]
    l = _streamed_sum(blocks, lambda old, new: math.exp(new - old))
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
    l = _streamed_sum(blocks, lambda old, new: math.exp(old - new))
    return torch.cat([torch.exp(b.double() - _shift(m)) for b, m in zip(blocks, maxes)]) / l


def _no_divide(blocks: list[Tensor]) -> Tensor:
    """exp(x - m) with the final maximum, never divided by l."""
    return torch.cat([torch.exp(b.double() - _stream_max(blocks)[-1]) for b in blocks])


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


def _neginf_to_zero(blocks: list[Tensor]) -> Tensor:
    """-inf logits replaced by 0 before the softmax."""
    return softmax(torch.nan_to_num(torch.cat([b.double() for b in blocks]), neginf=0.0), dim=-1)


def _skip_inf_blocks(blocks: list[Tensor]) -> Tensor:
    """Blocks that hold any -inf left out of m and l (but their finite logits still get exp(x - m) / l)."""
    kept = [b.double() for b in blocks if b.numel() and not torch.isinf(b).any()]
    m = max(b.max().item() for b in kept)
    l = sum(torch.exp(b - m).sum().item() for b in kept)
    return torch.cat([torch.exp(b.double() - m) for b in blocks]) / l


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
    out[_RESCALE_INVERTED] = _rescale_inverted(blocks)
    out[_NO_FINAL_RESCALE] = _no_final_rescale(blocks)
    out[_NO_DIVIDE] = _no_divide(blocks)
    some_inf = [bool(torch.isneginf(b).any()) for b in blocks]
    if any(some_inf):
        out[_NEGINF_TO_ZERO] = _neginf_to_zero(blocks)
        if not first_all_inf:
            out[_SKIP_INF_BLOCK] = _skip_inf_blocks(blocks)
    return out


def _nan_hint(blocks: list[Tensor], has_empty: bool, first_all_inf: bool) -> str:
    """The likely cause of an inf or NaN that no known mistake explains, on this input."""
    if first_all_inf:
        return _ALL_INF_BLOCK
    finite = [b[torch.isfinite(b)] for b in blocks if b.numel()]
    large = any(f.numel() and f.abs().max().item() > 80 for f in finite)  # exp overflows float32 above 88.7
    if large:
        return _FIXED_SHIFT if has_empty else _NO_SHIFT
    return _SKIPPED


def _online_error_hint(message: str) -> str | None:
    if re.search(r"numel\(\) == 0|non-zero size|zero-size|empty", message):
        return "an empty block has no maximum: skip blocks with b.numel() == 0 (they add nothing to the sum)"
    if "expected a non-empty list of Tensors" in message:
        return "torch.cat needs at least one tensor: build the list of weights from the blocks you were given"
    return None


@exercise("9.1", "Online softmax over blocks", section="How online softmax works",
          references=("attnbook.attention.tiled_attention",))
def check_online_softmax(online_softmax) -> str:
    """online_softmax(blocks) -> the softmax of torch.cat(blocks), one 1-D tensor."""
    cases = _online_cases()
    forbid = online_softmax_forbidden()
    for desc, blocks in cases:
        given = [b.clone() for b in blocks]
        got = call(online_softmax, given, what="online_softmax", on=desc, forbid=forbid,
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
        try:
            expect_close(got, expected, what="the result", on=desc, atol=atol, rtol=1e-4,
                         mistakes=_online_mistakes(blocks, has_empty, first_all_inf),
                         nan_hint=_nan_hint(blocks, has_empty, first_all_inf))
        except Wrong as e:
            if e.hint is None and got.is_floating_point() and got.shape == expected.shape and torch.allclose(
                    got.detach().double().cpu(), expected, atol=3e-3, rtol=1e-2):
                raise Wrong(f"the result is right to only about 3 significant digits on {desc} (checked to "
                            f"{atol:g})", _LOW_PRECISION) from None
            raise
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

# (batch, heads, n, d_head, bytes_per_el). The first is small enough to count by hand and keeps the known
# mistakes apart (d_head=6 is neither a small per-score count like the softmax's nor the 8 bits of a byte);
# the second has a different bytes_per_el, so a byte size written into the code shows up at once.
COST_CASES = [(3, 5, 7, 6, 4), (1, 1, 4, 2, 2), (4, 12, 1024, 64, 2), (1, 32, 4096, 128, 2), (3, 16, 100, 64, 8),
              (1, 1, 1, 1, 1), (8, 32, 32768, 128, 2)]

_INT_HINT = ("FLOPs and bytes are whole numbers: compute them with integer arithmetic (*, **, //) on the int "
             "arguments, not with / or math.pow, which give floats")


def _flop_mistakes(B: int, H: int, N: int, d: int, nbytes: int) -> list[tuple[str, int]]:
    """(hint, value) for the FLOP counts that common mistakes give."""
    D = H * d  # d_model
    return [
        ("that is 2·B·H·N²·d: you counted one of the two matrix products, or both products as multiply-adds; "
         "count Q Kᵀ and P V, each at 2 FLOPs (a multiply and an add) per multiply-add", 2 * B * H * N * N * d),
        ("that is B·H·N²·d, the multiply-adds of one matrix product: attention has two products (Q Kᵀ and P V), "
         "and each multiply-add is 2 FLOPs", B * H * N * N * d),
        ("that is 6·B·H·N²·d, three matrix products' worth: attention has two, Q Kᵀ and P V, each "
         "2·B·H·N²·d", 6 * B * H * N * N * d),
        ("you counted a dot product of length d_head as d_head multiplies and d_head - 1 adds; the convention "
         "(and the task) counts 2 FLOPs per multiply-add, 2·d_head per dot product",
         2 * B * H * N * N * (2 * d - 1)),
        ("you counted d_head multiplies and d_head - 1 adds per score, and N multiplies and N - 1 adds per "
         "output entry; the convention (and the task) counts 2 FLOPs per multiply-add",
         B * H * N * N * (2 * d - 1) + B * H * N * d * (2 * N - 1)),
        ("that counts only the causal pairs (N(N+1)/2 per head); this task asks for attention without a mask, "
         "where every query meets every key", 2 * B * H * N * (N + 1) * d),
        ("d_head appears once: each of the N² scores is a dot product of length d_head (and each of the N·d "
         "outputs a sum of N terms), so the count is 4·B·H·N²·d, not 4·B·H·N·d²", 4 * B * H * N * d * d),
        ("every query meets every key: N queries times N keys is N² pairs, not N", 4 * B * H * N * d),
        ("each head works on vectors of length d_head, not d_model = heads·d_head: you multiplied by the number "
         "of heads twice", 4 * B * H * N * N * D),
        ("count only the attention products Q Kᵀ and P V: the projections W_q, W_k, W_v and W_o are not part of "
         "this count", 4 * B * H * N * N * d + 8 * B * N * D * D),
        ("count only the attention products Q Kᵀ and P V: the projections W_q, W_k and W_v are not part of "
         "this count", 4 * B * H * N * N * d + 6 * B * N * D * D),
        ("multiply by the number of heads: every head computes its own scores", 4 * B * N * N * d),
        ("multiply by the batch size: every sequence in the batch computes its own scores", 4 * H * N * N * d),
        ("multiply by both the batch size and the number of heads", 4 * N * N * d),
        ("FLOPs do not depend on the bytes per element: leave bytes_per_el out of the FLOP count",
         4 * B * H * N * N * d * nbytes),
    ]


def _byte_mistakes(B: int, H: int, N: int, d: int, nbytes: int) -> list[tuple[str, int | float]]:
    """(hint, value) for the score-matrix sizes that common mistakes give."""
    return [
        ("that is the size in bits: an element of bytes_per_el bytes is 8·bytes_per_el bits; return bytes",
         8 * B * H * N * N * nbytes),
        ("bytes_per_el is already a number of bytes: multiply by it, without dividing by 8",
         B * H * N * N * nbytes / 8),
        ("bytes_per_el is already a number of bytes: multiply by it, without dividing by 8",
         B * H * N * N * nbytes // 8),
        ("the score matrix has one entry per (query, key) pair: N² entries per head, not N", B * H * N * nbytes),
        ("the score matrix has N × N entries per head, not N × N × d_head: each score is one number",
         B * H * N * N * d * nbytes),
        ("count one (B, H, N, N) matrix, the scores; the weights reuse the same size but the task asks for one "
         "matrix", 2 * B * H * N * N * nbytes),
        ("multiply the number of entries by bytes_per_el", B * H * N * N),
        ("multiply by the number of heads: every head has its own N × N scores", B * N * N * nbytes),
        ("multiply by the batch size: every sequence has its own N × N scores", H * N * N * nbytes),
    ]


_FLOP_UNITS = [(1e3, "kFLOPs (thousands)"), (1e6, "MFLOPs (millions)"), (1e9, "GFLOPs (billions)"),
               (1e12, "TFLOPs (trillions)")]
_BYTE_UNITS = [(2 ** 10, "KiB"), (1e3, "kB"), (2 ** 20, "MiB"), (1e6, "MB"), (2 ** 30, "GiB"), (1e9, "GB")]


def _same(got: int | float, value: int | float) -> bool:
    """Equal as numbers: exactly for ints, to 1e-9 relative for floats."""
    if isinstance(got, int) and isinstance(value, int):
        return got == value
    return math.isclose(got, value, rel_tol=1e-9, abs_tol=1e-12)


def _unit_hint(got: int | float, right: int, units: list[tuple[float, str]], what: str) -> str | None:
    """A hint when `got` is `right` in a bigger unit (GFLOPs, MiB), exactly or cut to an int."""
    for size, name in units:
        cut = isinstance(got, int) and right / size >= 10 and got == int(right // size)
        if got != right and (_same(got, right / size) or cut):
            return f"that is {what} in {name}; return the count itself, not divided by {size:,.0f}"
    return None


def _cost_number(x, name: str, on: str) -> int | float:
    """A Python int (from a Python or NumPy integer) or float from the learner's value; else Wrong naming `name`."""
    if isinstance(x, Tensor):
        raise Wrong(f"{name} is a tensor (dtype {x.dtype}) on {on}, expected an int",
                    "the arguments are Python ints: compute with them directly (no torch.tensor), and return "
                    "Python ints (call .item() on a one-element tensor)")
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise Wrong(f"{name} is {describe(x)} on {on}, expected an int",
                    "return two ints: `return flops, score_bytes`")
    if isinstance(x, numbers.Integral):
        return int(x)
    value = float(x)
    if not math.isfinite(value):
        raise Wrong(f"{name} is {value} on {on}, expected an int", _INT_HINT)
    return value


def _show(x: int | float) -> str:
    return f"{x:,}" if isinstance(x, int) else f"{x:.6g}"


def _flops_hint(got: int | float, B: int, H: int, N: int, d: int, nbytes: int) -> str | None:
    right = attention_flops(B, H, N, N, d)
    if isinstance(got, float) and _same(got, right):
        return _INT_HINT
    if got == 0:
        return ("the FLOP count of this input is not 0; if you converted to GFLOPs (or divided with //), return the "
                "number of FLOPs itself: the conversion rounds a small count down to 0")
    unit = _unit_hint(got, right, _FLOP_UNITS, "the FLOP count")
    if unit:
        return unit
    for hint, value in _flop_mistakes(B, H, N, d, nbytes):
        if value != right and _same(got, value):
            return hint
    scores = B * H * N * N
    extra = (got - right) / scores
    if isinstance(got, int) and got > right and (got - right) % scores == 0 and 1 <= extra <= 5:
        return "count only the two matrix products, as is customary; the softmax and the scaling are not counted"
    return None


def _bytes_hint(attention_cost, got: int | float, B: int, H: int, N: int, d: int, nbytes: int, on: str) -> str | None:
    right = score_matrix_bytes(B, H, N, N, _DTYPES[nbytes])
    if isinstance(got, float) and _same(got, right):
        return _INT_HINT
    if got == 0:
        return ("the score matrix of this input is not empty; if you converted to MiB or GB (or divided with //), "
                "return the number of bytes itself: the conversion rounds a small size down to 0")
    # A byte size written into the code: ask again with another bytes_per_el and see whether the answer moves.
    other = 8 if nbytes != 8 else 2
    again = call(attention_cost, B, H, N, d, other, what="attention_cost",
                 on=on.replace(f"bytes_per_el={nbytes}", f"bytes_per_el={other}"), forbid=COST_FORBIDDEN)
    try:
        unchanged = isinstance(again, (tuple, list)) and len(again) == 2 and bool(again[1] == got)
    except (TypeError, ValueError, RuntimeError):
        unchanged = False
    if unchanged:
        per_entry = got / (B * H * N * N)
        fixed = (f" of {per_entry:g} byte{'' if per_entry == 1 else 's'}" if per_entry == int(per_entry) else "")
        return (f"score_bytes stays {_show(got)} when bytes_per_el changes to {other}: your code uses a fixed size"
                f"{fixed} per element; multiply the number of entries by the bytes_per_el argument")
    unit = _unit_hint(got, right, _BYTE_UNITS, "the size")
    if unit:
        return unit.replace("return the count itself", "return bytes")
    for hint, value in _byte_mistakes(B, H, N, d, nbytes):
        if value != right and _same(got, value):
            return hint
    if isinstance(got, float):
        return _INT_HINT
    return None


@exercise("9.2", "FLOPs and bytes of attention", section="What attention costs: FLOPs and bytes",
          references=("attnbook.timing.attention_flops", "attnbook.timing.score_matrix_bytes"))
def check_attention_cost(attention_cost) -> str:
    """attention_cost(batch, heads, n, d_head, bytes_per_el) -> (flops, score_bytes), two ints."""
    for B, H, N, d, nbytes in COST_CASES:
        on = f"batch={B}, heads={H}, n={N}, d_head={d}, bytes_per_el={nbytes}"
        got = call(attention_cost, B, H, N, d, nbytes, what="attention_cost", on=on, forbid=COST_FORBIDDEN)
        flops_got, bytes_got = expect_tuple(got, ("flops", "score_bytes"), "attention_cost", on)
        flops_got, bytes_got = _cost_number(flops_got, "flops", on), _cost_number(bytes_got, "score_bytes", on)
        flops = attention_flops(B, H, N, N, d)
        score_bytes = score_matrix_bytes(B, H, N, N, _DTYPES[nbytes])
        if (flops_got, bytes_got) == (score_bytes, flops) and flops != score_bytes:
            raise Wrong(f"attention_cost returned (score_bytes, flops) on {on}",
                        "return them in the order the task gives: `return flops, score_bytes`")
        # The expected numbers are not shown: the learner works them out (the hints name the mistake).
        if not (isinstance(flops_got, int) and flops_got == flops):
            kind = "the float " if isinstance(flops_got, float) else ""
            raise Wrong(f"flops is {kind}{_show(flops_got)} on {on}, which is not the FLOP count of Q Kᵀ and P V",
                        _flops_hint(flops_got, B, H, N, d, nbytes)
                        or "count the multiply-adds of Q Kᵀ and of P V for one head of one sequence, at 2 FLOPs "
                           "each, then multiply by batch and heads; try your formula on a case small enough to "
                           "count by hand")
        if not (isinstance(bytes_got, int) and bytes_got == score_bytes):
            kind = "the float " if isinstance(bytes_got, float) else ""
            raise Wrong(f"score_bytes is {kind}{_show(bytes_got)} on {on}, which is not the size of one "
                        f"({B}, {H}, {N}, {N}) score matrix",
                        _bytes_hint(attention_cost, bytes_got, B, H, N, d, nbytes, on)
                        or "count the entries of one (batch, heads, n, n) matrix and multiply by bytes_per_el")
    return f"exact FLOPs and bytes on {len(COST_CASES)} sizes, from 1 token to 32,768"


# ---------------------------------------------------------------------------------------------------------
# 9.3 a timing function
# ---------------------------------------------------------------------------------------------------------

TIMING_FORBIDDEN = [
    (name, "write the loop yourself with time.perf_counter(): warm-up calls, then timed calls, then the median")
    for name in ("attnbook.timing.benchmark", "torch.utils.benchmark.Timer", "torch.utils.benchmark.utils.timer.Timer")
]

# (the time of each call of the check's function in ms, in turn: the last one repeats; n_warmup, n_runs, or None
# for the defaults 3 and 10). The first case alone tells every known mistake apart: its median (3 ms) differs
# from the mean, minimum, maximum, total, trimmed, geometric and harmonic means, from the median with the
# warm-up calls timed, from the median of the first n_runs calls, and each of those from the others. The
# second has n_warmup=5, n_runs=7, where a fixed n_warmup=3, a fixed n_runs=10, one call too many or too few
# and a single warm-up call all give different call counts.
TIMING_CASES = [
    ([60, 40, 20, 1, 40, 3, 3, 3, 12, 8, 6, 1, 1], None, None),
    ([20, 10, 8, 6, 5, 5, 2, 150, 11, 2, 5, 8], 5, 7),
    ([40, 40, 40, 3, 7, 3], 3, 3),
    ([30, 2, 6, 2, 9, 2], 1, 5),
    ([2, 6, 2], 0, 3),
]
_CORE = guard.__name__


class _CheckClock:
    """The clock that time.perf_counter() reads while the check runs the learner's time_it.

    The check's function `fn` does not sleep: each call moves this clock on by a set number of milliseconds, so
    what time_it measures is exact, however busy the machine is. time.perf_counter, time.monotonic, time.time,
    their _ns forms, time.clock_gettime on those clocks and timeit's default timer all read it, on the thread
    that runs the check (other threads, and the CPU-time clocks such as time.process_time, see the real ones).
    It also notes after how many calls of fn each reading happened, so that a hint can say what was timed.
    """

    _WALL = ("perf_counter", "monotonic", "time")
    _CPU = ("process_time", "process_time_ns", "thread_time", "thread_time_ns")
    _WALL_IDS = ("CLOCK_REALTIME", "CLOCK_MONOTONIC", "CLOCK_MONOTONIC_RAW", "CLOCK_BOOTTIME", "CLOCK_TAI")

    def __init__(self, schedule_ms: list[float], answer):
        self.schedule_ns = [round(ms * 1_000_000) for ms in schedule_ms]
        self.answer = answer
        self.elapsed_ns = 0
        self.durations_ns: list[int] = []  # one per call of fn
        self.wall_reads: set[int] = set()  # k: a reading after k calls of fn (before call k)
        self.cpu_reads = 0
        self.thread = threading.get_ident()
        self.patches = Patches()

        def fn():
            """The function that the check times: each call takes a set time on the check's clock."""
            i = len(self.durations_ns)
            step = self.schedule_ns[min(i, len(self.schedule_ns) - 1)]
            self.elapsed_ns += step
            self.durations_ns.append(step)

        fn.__qualname__ = "fn"
        self.fn = fn

    @property
    def calls(self) -> int:
        return len(self.durations_ns)

    def seconds(self) -> list[float]:
        """The time of each call made so far, in seconds."""
        return [ns / 1e9 for ns in self.durations_ns]

    def structure(self) -> tuple[int, int, int, list[int]] | None:
        """(calls before the first clock reading, calls between the first and the last reading, calls after the
        last, the number of calls between each two consecutive readings), or None if time_it never read it."""
        gaps = sorted(self.wall_reads)
        if not gaps:
            return None
        return gaps[0], gaps[-1] - gaps[0], self.calls - gaps[-1], [b - a for a, b in zip(gaps, gaps[1:])]

    # -- the stand-ins for the clocks ---------------------------------------------------------------------

    def _mine(self) -> bool:
        return threading.get_ident() == self.thread

    def _note(self, frame) -> None:
        if frame.f_globals.get("__name__") != _CORE:  # the core's own time limit is not the learner's reading
            self.wall_reads.add(self.calls)

    def _wall(self, real, base_ns: int, as_float: bool):
        def clock():
            if not self._mine():
                return real()
            self._note(sys._getframe(1))
            ns = base_ns + self.elapsed_ns
            return ns / 1e9 if as_float else ns

        clock.__name__ = clock.__qualname__ = real.__name__
        return clock

    def _cpu(self, real):
        def clock(*args):
            if self._mine():
                self.cpu_reads += 1
            return real(*args)

        clock.__name__ = clock.__qualname__ = real.__name__
        return clock

    def _clock_gettime(self, real, real_ns, as_float: bool):
        bases = {getattr(time, name): real_ns(getattr(time, name)) for name in self._WALL_IDS if hasattr(time, name)}

        def clock_gettime(clk_id):
            if not self._mine():
                return real(clk_id)
            if clk_id not in bases:
                self.cpu_reads += 1
                return real(clk_id)
            self._note(sys._getframe(1))
            ns = bases[clk_id] + self.elapsed_ns
            return ns / 1e9 if as_float else ns

        clock_gettime.__name__ = clock_gettime.__qualname__ = real.__name__
        return clock_gettime

    # -- putting them in place ------------------------------------------------------------------------------

    def _set(self, owner, name: str, value) -> None:
        self.patches.set(owner, name, value)

    def __enter__(self):
        import timeit

        stand_ins = {}
        for name in self._WALL:
            real, real_ns = getattr(time, name), getattr(time, name + "_ns")
            base = real_ns()
            stand_ins[real] = self._wall(real, base, as_float=True)
            stand_ins[real_ns] = self._wall(real_ns, base, as_float=False)
        for name in self._CPU:
            if hasattr(time, name):
                stand_ins[getattr(time, name)] = self._cpu(getattr(time, name))
        if hasattr(time, "clock_gettime_ns"):
            stand_ins[time.clock_gettime] = self._clock_gettime(time.clock_gettime, time.clock_gettime_ns, True)
            stand_ins[time.clock_gettime_ns] = self._clock_gettime(time.clock_gettime_ns, time.clock_gettime_ns,
                                                                   False)
        by_id = {id(real): (real, fake) for real, fake in stand_ins.items()}

        def fake_for(value):
            """The stand-in for `value` if it is one of the real clocks (by identity: values may be unhashable)."""
            hit = by_id.get(id(value))
            return hit[1] if hit is not None and hit[0] is value else None

        def swap(values: tuple) -> tuple:
            return tuple(fake_for(v) or v for v in values)

        try:
            for real, fake in stand_ins.items():
                self._set(time, real.__name__, fake)
            if fake_for(timeit.default_timer):
                self._set(timeit, "default_timer", fake_for(timeit.default_timer))
            for func in (timeit.timeit, timeit.repeat, timeit.Timer.__init__):  # timer=default_timer, bound early
                defaults = func.__defaults__ or ()
                if any(fake_for(d) for d in defaults):
                    self._set(func, "__defaults__", swap(defaults))
            # The same clocks reached another way: `from time import perf_counter` in the notebook, a closure,
            # a default argument (def time_it(fn, n_warmup=3, n_runs=10, clock=time.perf_counter)).
            answer = self.answer
            namespace = getattr(answer, "__globals__", None)
            if isinstance(namespace, dict):
                for key, value in list(namespace.items()):
                    if fake_for(value):
                        self._set(namespace, key, fake_for(value))
            # Closures and default arguments of the answer, of the helpers defined next to it
            # (def timed(fn, clock=time.perf_counter)) and of the functions these hold, a few levels down.
            todo = [answer] + [v for v in (namespace or {}).values() if isinstance(v, types.FunctionType)]
            seen: set[int] = set()
            for _ in range(4):
                found = []
                for func in todo:
                    if id(func) in seen or not isinstance(func, types.FunctionType):
                        continue
                    seen.add(id(func))
                    for cell in func.__closure__ or ():
                        try:
                            contents = cell.cell_contents
                        except ValueError:  # an empty cell
                            continue
                        if fake_for(contents):
                            self._set(cell, "cell_contents", fake_for(contents))
                        elif isinstance(contents, types.FunctionType):
                            found.append(contents)
                    for attr in ("__defaults__", "__kwdefaults__"):
                        defaults = getattr(func, attr, None)
                        if isinstance(defaults, tuple) and any(fake_for(d) for d in defaults):
                            self._set(func, attr, swap(defaults))
                        elif isinstance(defaults, dict) and any(fake_for(d) for d in defaults.values()):
                            self._set(func, attr, {k: fake_for(v) or v for k, v in defaults.items()})
                todo = found
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        self.patches.restore()
        return False


def _timing_error_hint(message: str) -> str | None:
    if re.search(r"CUDA|cuda", message):
        return ("torch.cuda.synchronize() fails on a machine without a GPU: call it only when "
                "torch.cuda.is_available() is True")
    if re.search(r"'function' object is not (iterable|subscriptable)|'function' object has no attribute", message):
        return ("time_it's first argument is the function to time, fn, which takes no arguments: call it as fn(). "
                "Is this the function for exercise 9.3, time_it(fn, n_warmup=3, n_runs=10)?")
    if re.search(r"\bfn\(\) takes 0 positional arguments", message):
        return "fn takes no arguments: call it as fn()"
    if "statistics" in message or "median" in message:
        return "collect one time per timed call in a list, then take statistics.median of that list"
    return None


def _timing_value(got, r: int, on: str) -> tuple[float, bool]:
    """(the learner's result as a float, whether it was an int); Wrong for anything that is not one number."""
    if isinstance(got, Tensor):
        if got.numel() != 1 or got.dtype == torch.bool or got.is_complex():
            raise Wrong(f"time_it returned a tensor of shape {tuple(got.shape)} {on}, expected one number",
                        "return the median of the timed calls, one number in seconds")
        got = got.item()
    elif not isinstance(got, numbers.Real) and hasattr(got, "__array__") and getattr(got, "size", 0) == 1:
        got = got.item() if hasattr(got, "item") else float(got)  # a NumPy scalar or one-element array
    if got is None:
        raise Wrong(f"time_it returned None {on}", "did you forget the `return` statement?")
    if isinstance(got, (list, tuple)):
        hint = ("return the median of the list of times (statistics.median(times)), not the list"
                if len(got) == r else "return one number: the median time of one call, in seconds")
        raise Wrong(f"time_it returned {describe(got)} {on}, expected one number", hint)
    if isinstance(got, str):
        raise Wrong(f"time_it returned the string {got!r} {on}, expected a float (seconds)",
                    "return the number itself, not a formatted string")
    if isinstance(got, bool) or not isinstance(got, numbers.Real):
        raise Wrong(f"time_it returned {describe(got)} {on}, expected a float (seconds)",
                    "return the median time of one call, in seconds")
    return float(got), isinstance(got, numbers.Integral)


def _default_counts(time_it) -> tuple[object, object] | None:
    """The defaults of time_it's n_warmup and n_runs, or None when its signature cannot be read."""
    import inspect

    try:
        params = inspect.signature(time_it).parameters
    except (TypeError, ValueError):
        return None
    return tuple(params[name].default if name in params else None for name in ("n_warmup", "n_runs"))


def _count_hint(clock: _CheckClock, w: int, r: int, defaults: bool) -> str:
    """Why time_it called fn the wrong number of times, from the calls and when it read the clock."""
    calls = clock.calls
    if defaults:
        given = _default_counts(clock.answer)
        if given is not None and given != (3, 10) and all(isinstance(g, int) for g in given):
            return (f"keep the defaults of the task, n_warmup=3 and n_runs=10 (yours are {given[0]} and {given[1]}): "
                    "the check calls time_it(fn) without them")
    if calls == 0:
        return ("call fn() inside time_it: n_warmup times to warm up, then n_runs times with the clock running "
                "(fn without parentheses does not call it)")
    shape = clock.structure()
    if shape is not None:
        groups = shape[3]
        if shape[1] == 0:
            return ("no call of fn happened between your clock readings: call fn() (with parentheses) between the "
                    "reading before and the reading after")
        if groups.count(2) >= 2 and max(groups) == 2:
            return "each of your measurements covered 2 calls of fn: time one call per measurement, n_runs in all"
    # The cases are chosen so that these call counts differ from one another (and from n_warmup + n_runs) on
    # the first case where each mistake shows; where two still coincide, no specific hint is given.
    candidates = [
        (calls == r, "warm up first: call fn() n_warmup times without timing it (fn without parentheses does not "
                     "call it), so that one-time costs (lazy imports, caches, CUDA initialisation) stay out of the "
                     "measurement"),
        (calls == w, "after the warm-up, time n_runs calls of fn()"),
        (w != 3 and calls == 3 + r, "use the n_warmup argument for the number of warm-up calls instead of a fixed "
                                    "number"),
        (r != 10 and calls == w + 10, "use the n_runs argument for the number of timed calls instead of a fixed "
                                      "number"),
        (w != 1 and calls == 1 + r, "warm up with n_warmup calls, not one"),
        (calls == w + r + 1, "one call too many: call fn() exactly n_warmup + n_runs times (the check counts the "
                             "calls)"),
        (calls == w + r - 1, "one call too few: range(n) runs n times, so the warm-up loop is range(n_warmup) and "
                             "the timed loop range(n_runs)"),
    ]
    matches = [hint for applies, hint in candidates if applies]
    if len(matches) == 1:
        return matches[0]
    return "call fn() n_warmup times untimed, then n_runs times timed, and nothing more"


_MEAN_HINT = ("you returned the mean; a single slow call (another program, a page fault, a garbage collection) "
              "pulls the mean up, while the median is the typical call: return statistics.median(times)")


def _timing_mistakes(d: list[float], w: int, r: int) -> list[tuple[str, float]]:
    """(hint, value) for what common mistakes return, from the times `d` of the w + r calls (in seconds)."""
    timed, first = d[w:w + r], d[:r]
    ordered = sorted(timed)
    median = statistics.median(timed)
    out = [
        ("you returned milliseconds; return seconds (the difference of two time.perf_counter() readings)",
         1e3 * median),
        ("you returned microseconds; return seconds (the difference of two time.perf_counter() readings)",
         1e6 * median),
        ("you returned nanoseconds (time.perf_counter_ns() counts nanoseconds): return seconds, from "
         "time.perf_counter()", 1e9 * median),
        ("you divided by 1000: time.perf_counter() already counts seconds", median / 1e3),
        ("you returned the total time of the timed calls; return the median time of one call", sum(timed)),
        (_MEAN_HINT, statistics.mean(timed)),
        ("you returned the fastest call (the minimum); the minimum is what Python's timeit reports and a fine "
         "estimate of the best case, but this task asks for the typical call, the median, as this book's tables "
         "report", min(timed)),
        ("you returned the slowest call; return the median", max(timed)),
        ("the warm-up calls were timed too: start collecting times only after the n_warmup warm-up calls",
         statistics.median(d)),
        ("the warm-up calls were timed too, and averaged: time only the n_runs calls after the warm-up, and return "
         "their median", statistics.mean(d)),
        ("you timed the first n_runs calls, slow first calls included: make the n_warmup untimed calls first, then "
         "time the next n_runs", statistics.median(first)),
        ("you timed the first n_runs calls, slow first calls included, and averaged them: make the n_warmup untimed "
         "calls first, then return the median of the next n_runs", statistics.mean(first)),
        ("you left out the slowest call and averaged the rest; the median needs no outlier removal: return "
         "statistics.median(times)", statistics.mean(ordered[:-1]) if r > 1 else None),
        ("you left out the fastest and the slowest call and averaged the rest (a trimmed mean): return the median, "
         "statistics.median(times)", statistics.mean(ordered[1:-1]) if r > 2 else None),
        ("you returned the geometric mean: return the median, statistics.median(times)",
         statistics.geometric_mean(timed)),
        ("you returned the harmonic mean: return the median, statistics.median(times)",
         statistics.harmonic_mean(timed)),
        ("times[len(times) // 2] is the middle entry in the order the calls ran, not the median: sort the times "
         "first, or use statistics.median", timed[r // 2]),
        ("you returned the median of the times since the start of the timed loop (time stamps): read the clock "
         "right before each fn() and subtract that reading right after it",
         statistics.median(itertools.accumulate(timed))),
        ("each of your times covered two calls of fn: time one call per measurement",
         statistics.median([(a + b) / 2 for a, b in zip(timed[::2], timed[1::2])]) if r > 1 else None),
    ]
    return [(hint, value) for hint, value in out if value is not None]


def _close(got: float, target: float) -> bool:
    """Equal up to float rounding: the check's clock makes every time exact (time.time() has ~0.2 µs steps)."""
    return abs(got - target) <= 1e-6 + 1e-6 * abs(target)


def _describe_case(schedule: list[float], w: int, r: int, defaults: bool) -> str:
    n = w + r
    times = [schedule[min(i, len(schedule) - 1)] for i in range(n)]
    listed = ", ".join(f"{t:g}" for t in times[:-1]) + f" and {times[-1]:g}" if n > 1 else f"{times[0]:g}"
    rare = " (one rare slow call)" if max(times[w:]) >= 10 * statistics.median(times[w:]) else ""
    args = "the default n_warmup and n_runs" if defaults else f"n_warmup={w}, n_runs={r}"
    return f"a function whose calls take {listed} ms in turn{rare}, with {args}"


@exercise("9.3", "A timing function", section="How to time honestly",
          references=("attnbook.timing.benchmark",))
def check_time_it(time_it) -> str:
    """time_it(fn, n_warmup=3, n_runs=10) -> median seconds of n_runs calls after n_warmup untimed calls."""
    for schedule, n_warmup, n_runs in TIMING_CASES:
        defaults = n_warmup is None
        w, r = (3, 10) if defaults else (n_warmup, n_runs)
        desc = _describe_case(schedule, w, r, defaults)
        on = f"on {desc}"
        clock = _CheckClock(schedule, time_it)
        kwargs = {} if defaults else {"n_warmup": w, "n_runs": r}
        with clock:
            got = call(time_it, clock.fn, what="time_it", on=desc, forbid=TIMING_FORBIDDEN, seed=None,
                       explain=_timing_error_hint, **kwargs)
        value, was_int = _timing_value(got, r, on)
        if clock.calls != w + r:
            raise Wrong(f"time_it called fn {clock.calls} times {on}; expected {w + r}: {w} warm-up calls, then "
                        f"{r} timed calls", _count_hint(clock, w, r, defaults))
        d = clock.seconds()
        timed = d[w:]
        median = statistics.median(timed)
        low, high = statistics.median_low(timed), statistics.median_high(timed)  # both are medians too
        if low - 1e-6 <= value <= high + 1e-6 or _close(value, median):
            continue
        after = f" after the {w} warm-up call{'s' if w != 1 else ''}" if w else ""
        said = f"time_it returned {value:.6g} s {on}, but the median of the {r} timed calls{after} is {median:.6g} s"
        if value == 0:
            raise Wrong(said, "int() (or //) cut a time of a few milliseconds down to 0: return the float" if was_int
                        else "a time of a few milliseconds rounds to 0.0 (round(t, 2)): return the full float")
        if not math.isfinite(value) or value < 0:
            raise Wrong(said, "a time is time.perf_counter() after the call minus time.perf_counter() before it "
                              "(in that order), a positive number of seconds")
        shape = clock.structure()
        if shape is None:
            raise Wrong(said, "time.process_time() counts only the CPU time of this process, not time spent "
                              "waiting (for a GPU, a disk, a sleep): time with time.perf_counter()"
                        if clock.cpu_reads else
                        "time_it never read time.perf_counter() (nor time.time() or time.monotonic()), the clock "
                        "that the check's function takes its time on: time each call with time.perf_counter()")
        hints = {hint for hint, v in _timing_mistakes(d, w, r) if _close(value, v) and not _close(v, median)}
        hint = hints.pop() if len(hints) == 1 else None
        before, between, after_calls, groups = shape
        if hint == _MEAN_HINT and groups == [r] and before == w:
            hint = ("you timed the n_runs calls as one block and divided by n_runs: that is the mean, which a single "
                    "slow call pulls up; time each call on its own and return the median of those times")
        raise Wrong(said, hint or "time each of the n_runs calls separately with time.perf_counter() and return "
                                  "the median of those times, in seconds")
    return (f"warm-up, call count and median right on {len(TIMING_CASES)} functions, including slow first calls "
            "and a rare outlier")
