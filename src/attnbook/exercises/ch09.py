"""Checkers for chapter 9, GPU timing I: attention kernels."""
from __future__ import annotations

import itertools
import math
import numbers
import re
import statistics
import sys

import torch
from torch import Tensor

from ..attention import softmax
from ..timing import attention_flops, score_matrix_bytes
from . import guard
from .compare import expect_close, expect_dtype, expect_tensor, expect_tuple
from .clock import CheckClock
from .guard import call, recorded
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
    "torch.logcumsumexp", "torch.Tensor.logcumsumexp",
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
_START_ZERO = ("the running maximum starts at -inf, not 0: on logits far below 0 (about -150 here) a maximum of 0 "
               "shifts by too much, exp(x - 0) underflows to 0 and the sum l stays 0")
_FROZEN_MAX = ("the running maximum was not updated: a later block's logits exceed the first block's maximum by more "
               "than exp can take (about 88 in float32, 709 in float64), so exp(x - m) overflows. Whenever a block "
               "raises the maximum, rescale l by exp(m_old - m_new) and carry on with the new maximum")
_OLD_MAX_ADD = ("a block's terms are added relative to the new maximum, after the old sum has been rescaled by "
                "exp(m_old - m_new); you added them relative to the old maximum")
_RUNNING_OUT = ("each block's weights were written with the m and l known when the block arrived; only the final m "
                "and l are right for every logit: finish the pass over all the blocks first, then compute "
                "exp(x - m) / l for every logit")
_LAST_OUT = ("the last block did not update m and l: every non-empty block, the last one included, must go into "
             "the running maximum and sum")
_ALL_INF_BLOCK = ("a block whose entries are all -inf has maximum -inf, and exp(-inf - (-inf)) is NaN: while the "
                  "running maximum is still -inf, skip the block (it adds nothing to the sum) or shift by 0")
_SKIPPED = ("an inf or NaN that no known mistake explains: the running maximum m stayed -inf (or the sum l stayed 0) "
            "for some logits; was a block skipped (blocks[1:], or a size test such as len(b) > 1)? Every non-empty "
            "block must update m and l")
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
    # From block 150 on the logits are about 760 higher: more than float64's exp can take (709.8) above the first
    # blocks' maximum, so a running maximum that is never updated overflows even in float64.
    long = [2.0 * torch.randn(n, generator=g, dtype=torch.float64) + 0.05 * j + (760.0 if j >= 150 else 0.0)
            for j, n in enumerate(sizes)]
    # float32, and the fifth block raises the maximum by 94, more than float32's exp can take (88.7).
    singles = [torch.tensor([v]) for v in (0.5, -1.0, 2.0, 1.0, 96.0, 95.5, 3.0, 97.0)]
    # float32 logits of about -150, the largest in the first block: a maximum that starts at 0 underflows.
    falling = [b.float() - 150.0 for b in _logits(4, 3, 5, seed=3, offset=-5.0)]
    return [
        ("one block of 5 logits", _logits(5, seed=0)),
        ("3 blocks of sizes 3, 4 and 2 whose maximum grows from block to block", rising),
        ("4 blocks of float32 logits of about +-1000", huge),
        ("8 blocks of size 1 (float32), the fifth raising the maximum from 2 to 96", singles),
        ("3 blocks of float32 logits of about -150 with the largest logit in the first block", falling),
        ("float32 logits of about -200 in 3 blocks, the middle one empty", deep),
        ("3 blocks, the second with two entries equal to -inf (masked)", masked),
        ("3 blocks, the first with every entry equal to -inf", first_masked),
        ("an empty block first, then 2 blocks", [torch.tensor([], dtype=torch.float64)] + _logits(3, 2, seed=7)),
        (f"a long row in {len(long)} blocks of 0 to 5 logits, from block 150 on about 760 higher", long),
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
    l = _streamed_sum(blocks, lambda old, new: math.exp(new - old) if new - old < 709 else math.inf)
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


def _shifted_by_zero(blocks: list[Tensor], nan_to_zero: bool) -> Tensor:
    """Every logit shifted by max(0, the maximum), in the blocks' dtype: on logits far below 0 every exp underflows,
    giving NaN from 0 / 0, or zeros where the sum kept something from before (an empty block counted as 0)."""
    m = max(_stream_max(blocks)[-1], 0.0)
    e = torch.cat([torch.exp(b - m) for b in blocks])
    out = e / e.sum()
    return torch.nan_to_num(out, nan=0.0) if nan_to_zero else out


def _frozen_max(blocks: list[Tensor], dtype) -> Tensor:
    """The maximum of the first block with a finite logit kept for the whole row, computed in `dtype`."""
    m = next(b[torch.isfinite(b)].max().item() for b in blocks if torch.isfinite(b).any())
    e = torch.cat([torch.exp(b.to(dtype) - m) for b in blocks])
    return e / e.sum()


def _neginf_to_zero(blocks: list[Tensor]) -> Tensor:
    """-inf logits replaced by 0 before the softmax."""
    return softmax(torch.nan_to_num(torch.cat([b.double() for b in blocks]), neginf=0.0), dim=-1)


def _skip_inf_blocks(blocks: list[Tensor]) -> Tensor:
    """Blocks that hold any -inf left out of m and l (but their finite logits still get exp(x - m) / l)."""
    kept = [b.double() for b in blocks if b.numel() and not torch.isinf(b).any()]
    m = max(b.max().item() for b in kept)
    l = sum(torch.exp(b - m).sum().item() for b in kept)
    return torch.cat([torch.exp(b.double() - m) for b in blocks]) / l


def _stream(blocks: list[Tensor], *, add_old: bool = False, running_out: bool = False, last: bool = True) -> Tensor:
    """The streaming pass in float64 with one mistake: each block's terms added relative to the old maximum
    (`add_old`), each block's weights written with the m and l of its time (`running_out`), or the last block left
    out of m and l (`last=False`; where nothing is left, the right weights, as such an answer would fall back)."""
    m, l, outs = float("-inf"), 0.0, []
    for b in (blocks if last else blocks[:-1]):
        b = b.double()
        m_new = max(m, b.max().item()) if b.numel() else m
        if m_new == float("-inf"):
            outs.append(torch.zeros_like(b))
            continue
        ref = m if add_old and math.isfinite(m) else m_new
        l = (l * math.exp(m - m_new) if math.isfinite(m) else 0.0) + torch.exp(b - ref).sum().item()
        m = m_new
        outs.append(torch.exp(b - m) / l)
    if running_out:
        return torch.cat(outs)
    if l == 0.0:
        return softmax(torch.cat([b.double() for b in blocks]), dim=-1)
    return torch.cat([torch.exp(b.double() - m) for b in blocks]) / l


def _online_mistakes(blocks: list[Tensor], expected: Tensor) -> dict[str, tuple[str, Tensor]]:
    """{mistake: (hint, its output on `blocks`)}, most likely first. The keys are the same on every case, so that a
    mistake can be confirmed on every case checked before its hint is given."""
    has_empty = any(b.numel() == 0 for b in blocks)
    first_all_inf = bool(blocks[0].numel()) and bool(torch.isneginf(blocks[0]).all())
    nan_row = torch.full_like(expected, float("nan"))
    out = {
        "frozen": (_FROZEN_MAX, _frozen_max(blocks, blocks[0].dtype)),
        "frozen64": (_FROZEN_MAX, _frozen_max(blocks, torch.float64)),
        "all_inf": (_ALL_INF_BLOCK, nan_row if first_all_inf else expected),
        "start_zero": (_START_ZERO, _shifted_by_zero(blocks, nan_to_zero=False)),
        "empty_zero": (_FIXED_SHIFT, _shifted_by_zero(blocks, nan_to_zero=True) if has_empty else expected),
        "empty_zero_nan": (_FIXED_SHIFT, _shifted_by_zero(blocks, nan_to_zero=False) if has_empty else expected),
        "no_shift": (_NO_SHIFT, _no_shift(blocks)),
        "per_block": (_PER_BLOCK, _per_block(blocks)),
        "own_max": (_OWN_MAX, _own_max(blocks)),
        "no_rescale": (_NO_RESCALE_SUM, _no_rescale_sum(blocks)),
        "inverted": (_RESCALE_INVERTED, _rescale_inverted(blocks)),
        "no_final_rescale": (_NO_FINAL_RESCALE, _no_final_rescale(blocks)),
        "running_out": (_RUNNING_OUT, _stream(blocks, running_out=True)),
        "add_old": (_OLD_MAX_ADD, _stream(blocks, add_old=True)),
        "last_out": (_LAST_OUT, _stream(blocks, last=False)),
        "no_divide": (_NO_DIVIDE, _no_divide(blocks)),
        "neginf_to_zero": (_NEGINF_TO_ZERO, _neginf_to_zero(blocks)),
        "skip_inf": (_SKIP_INF_BLOCK, _skip_inf_blocks(blocks)),
    }
    return out


def _matches(got: Tensor, wrong: Tensor, atol: float) -> bool:
    w = wrong.detach().to(torch.float64)
    return w.shape == got.shape and torch.allclose(got, w, atol=atol, rtol=1e-4, equal_nan=True)


def _nan_hint(blocks: list[Tensor], has_empty: bool, first_all_inf: bool, overflow_ruled_out: bool) -> str:
    """The likely cause of an inf or NaN that no known mistake explains, on this input (`overflow_ruled_out`: the
    answer was right on logits of +-1000 before)."""
    if first_all_inf:
        return _ALL_INF_BLOCK
    finite = torch.cat([b[torch.isfinite(b)].double() for b in blocks])
    if finite.max().item() > 80 and not overflow_ruled_out:  # exp overflows float32 above 88.7
        return _FIXED_SHIFT if has_empty else _NO_SHIFT
    if finite.max().item() < -80:  # exp(x) underflows float32 below -103
        return _FIXED_SHIFT if has_empty else _START_ZERO
    return _SKIPPED


def finite_max(blocks: list[Tensor]) -> float:
    """The largest finite logit of the row."""
    return max(b[torch.isfinite(b)].max().item() for b in blocks if torch.isfinite(b).any())


def _online_error_hint(message: str) -> str | None:
    if re.search(r"numel\(\) == 0|non-zero size|zero-size|empty", message):
        return "an empty block has no maximum: skip blocks with b.numel() == 0 (they add nothing to the sum)"
    if "expected a non-empty list of Tensors" in message:
        return "torch.cat needs at least one tensor: build the list of weights from the blocks you were given"
    return None


def _changed_block(given: list[Tensor], blocks: list[Tensor]):
    """An `observe` for `call`: the index of the first block of `given` changed in place (None if none)."""
    def observe(got):
        for i, (b, original) in enumerate(zip(given, blocks)):
            if b.shape != original.shape or not torch.equal(b, original):
                return i
        return None
    return observe


@exercise("9.1", "Online softmax over blocks", section="How online softmax works",
          references=("attnbook.attention.tiled_attention", "attnbook.attention.softmax"))
def check_online_softmax(online_softmax) -> str:
    """online_softmax(blocks) -> the softmax of torch.cat(blocks), one 1-D tensor."""
    cases = _online_cases()
    forbid = online_softmax_forbidden()
    history: list[tuple[Tensor, list, Tensor, float]] = []  # (output, blocks, expected, atol) of each case passed
    overflow_ruled_out = False
    for desc, blocks in cases:
        given = [b.clone() for b in blocks]
        got, changed = call(online_softmax, given, what="online_softmax", on=desc, forbid=forbid,
                            explain=_online_error_hint, observe=_changed_block(given, blocks))
        if changed is not None:
            raise Wrong(f"online_softmax changed block {changed} of its input in place on {desc}",
                        "use out-of-place operations (b - m, not b -= m or b.sub_(m))")
        total = sum(b.numel() for b in blocks)
        expected = softmax(torch.cat([b.double() for b in blocks]), dim=-1)  # (total,)
        if isinstance(got, (list, tuple)):
            hint = ("you returned one tensor per block: join them into one 1-D tensor with torch.cat"
                    if got and all(isinstance(x, Tensor) for x in got) else
                    "return one 1-D tensor holding the weights of every logit, in order")
            raise Wrong(f"online_softmax returned {describe(got)} on {desc}, expected one 1-D tensor of "
                        f"{total} weights", hint)
        if hasattr(got, "__array__") and not isinstance(got, Tensor):
            raise Wrong(f"online_softmax returned {describe(got)} on {desc}, expected a torch.Tensor",
                        "return a torch tensor: torch.from_numpy(a) converts a NumPy array (then keep the blocks' "
                        "dtype)")
        got = expect_tensor(got, what="the result", on=desc, finite=False)
        if got.dim() != 1:
            raise Wrong(f"the result has shape {tuple(got.shape)} on {desc}, expected ({total},)",
                        "return one 1-D tensor: the weights of all the blocks, one after the other")
        has_empty = any(b.numel() == 0 for b in blocks)
        first_all_inf = bool(blocks[0].numel()) and bool(torch.isneginf(blocks[0]).all())
        atol = 1e-6 if all(b.dtype == torch.float64 for b in blocks) else 1e-5
        g = got.detach().to(torch.float64).cpu() if got.is_floating_point() else None
        if g is not None and g.shape == expected.shape and torch.allclose(g, expected, atol=atol, rtol=1e-4):
            expect_dtype(got, blocks[0].dtype, what="the result", on=desc, input_name="the blocks",
                         hint="return the weights in the dtype of the blocks (float32 blocks give float32 weights); "
                              "if you computed in float64, convert the result back with .to(blocks[0].dtype)")
            history.append((g, blocks, expected, atol))
            if finite_max(blocks) > 80:
                overflow_ruled_out = True
            continue
        # A mistake's hint only when it gives this answer's output on this case and on every case before it.
        # (The mistakes are worked out only now, for this case and the ones before: a right answer never waits.)
        earlier = [(g_j, _online_mistakes(b_j, e_j), atol_j) for g_j, b_j, e_j, atol_j in history]
        for key, (hint, wrong) in _online_mistakes(blocks, expected).items():
            if g is not None and _matches(g, wrong, atol) and all(
                    _matches(g_j, m_j[key][1], atol_j) for g_j, m_j, atol_j in earlier):
                raise Wrong(f"the result has the wrong values on {desc}", hint)
        try:
            expect_close(got, expected, what="the result", on=desc, atol=atol, rtol=1e-4,
                         nan_hint=_nan_hint(blocks, has_empty, first_all_inf, overflow_ruled_out))
        except Wrong as e:
            if e.hint is None and g is not None and g.shape == expected.shape and torch.allclose(
                    g, expected, atol=3e-3, rtol=1e-2):
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
# The third has more FLOPs than a 32-bit integer holds, and not a multiple of 2**32, so that counting in int32
# shows as a wrong non-zero count before the power-of-two sizes, where it wraps to exactly 0.
COST_CASES = [(3, 5, 7, 6, 4), (1, 1, 4, 2, 2), (3, 16, 1000, 72, 8), (4, 12, 1024, 64, 2), (1, 32, 4096, 128, 2),
              (1, 1, 1, 1, 1), (8, 32, 32768, 128, 2)]

_OVERFLOW_HINT = ("the count overflowed: a 32-bit integer (torch.int32, np.int32) holds at most 2,147,483,647 and "
                  "wraps around past it; compute with the Python ints you are given, which never overflow")


def _int32(n: int) -> int:
    """What a 32-bit integer keeps of n (np.int32 and torch.int32 arithmetic wrap around)."""
    return (n + 2**31) % 2**32 - 2**31


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
    if got != right and got == _int32(right):
        return _OVERFLOW_HINT
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
    if got != right and got == _int32(right):
        return _OVERFLOW_HINT
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
        if isinstance(got, list) and len(got) == 2:
            got = tuple(got)  # the task text accepts a list too
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
# for the defaults 3 and 10). The first case alone tells every known mistake apart: its median (3 ms, between the
# two middle times 2 and 4 ms) differs from the lower and the upper middle time (sorted(times)[n // 2],
# statistics.median_low, torch.median, the median after dropping the slowest call), the mean, minimum, maximum,
# total, trimmed, geometric and harmonic means, from the median with the warm-up calls timed, from the median of
# the first n_runs calls, and each of those from the others. The second has n_warmup=9, n_runs=7, where fixed
# counts 3 and 10, a fixed n_warmup=3, a fixed n_runs=10, one call too many or too few, a single warm-up call,
# no warm-up and no timed calls all give different call counts.
TIMING_CASES = [
    ([60, 40, 20, 1, 40, 2, 4, 1, 10, 1, 12, 9, 2], None, None),
    ([20, 10, 8, 6, 5, 5, 4, 4, 3, 2, 150, 11, 2, 5, 8], 9, 7),
    ([40, 40, 40, 3, 7, 3], 3, 3),
    ([30, 2, 6, 2, 9, 2], 1, 5),
    ([2, 6, 2], 0, 3),
]
# The GPU case: run once more as if a GPU were present (see clock.CheckClock), to see where time_it synchronises.
GPU_CASE = ([30, 20, 5, 3, 4, 3], 2, 3)

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


def _count_hint(clock: CheckClock, w: int, r: int, defaults: bool) -> str:
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
        ((w, r) != (3, 10) and calls == 3 + 10, "you called fn 3 + 10 times, the default counts, although the check "
                                                "passed other values: use the n_warmup and n_runs arguments instead "
                                                "of fixed numbers"),
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


_MIDDLE = ("with an even number of times ({r} here) there are two middle ones, {low:g} and {high:g} ms: the median "
           "is their mean, as statistics.median computes it; you returned the {which}")


def _timing_mistakes(d: list[float], w: int, r: int) -> list[tuple[str, float]]:
    """(hint, value) for what common mistakes return, from the times `d` of the w + r calls (in seconds)."""
    timed, first = d[w:w + r], d[:r]
    ordered = sorted(timed)
    median = statistics.median(timed)
    low, high = statistics.median_low(timed), statistics.median_high(timed)
    even = r % 2 == 0 and low != high
    out = [
        (_MIDDLE.format(r=r, low=1e3 * low, high=1e3 * high, which="lower one, which statistics.median_low, "
                        "torch.median and sorted(times)[(n - 1) // 2] give, as does dropping the slowest time first"),
         low if even else None),
        (_MIDDLE.format(r=r, low=1e3 * low, high=1e3 * high, which="upper one, which sorted(times)[n // 2] gives"),
         high if even else None),
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


def _gpu_error_hint(message: str) -> str | None:
    if re.search(r"CUDA|cuda|[Ss]tream|[Ee]vent", message):
        return ("on this run the check pretends that a GPU is present: torch.cuda.is_available() returns True and "
                "torch.cuda.synchronize() works, but nothing else of torch.cuda does; synchronise with "
                "torch.cuda.synchronize() (no CUDA events or streams) and time with time.perf_counter()")
    return _timing_error_hint(message)


@recorded  # the clock reaches into the answer's globals and closures: it runs where the answer does
def _timed(time_it, schedule: list[float], gpu: bool, desc: str, kwargs: dict) -> tuple[object, dict]:
    """(what time_it returned, the clock's log as plain data) for one run of time_it on the check's clock."""
    clock = CheckClock(schedule, time_it, gpu=gpu)
    with clock:
        got = call(time_it, clock.fn, what="time_it", on=desc, forbid=TIMING_FORBIDDEN, seed=None,
                   explain=_gpu_error_hint if gpu else _timing_error_hint, **kwargs)
    return got, clock.state()


def _run_case(time_it, schedule: list[float], n_warmup: int | None, n_runs: int | None, gpu: bool = False) -> CheckClock:
    """Run time_it on one case of the check's clock; Wrong unless it made the right calls and returned the median."""
    defaults = n_warmup is None
    w, r = (3, 10) if defaults else (n_warmup, n_runs)
    desc = _describe_case(schedule, w, r, defaults)
    if gpu:
        desc += ", as if on a machine with a GPU (torch.cuda.is_available() returns True)"
    on = f"on {desc}"
    kwargs = {} if defaults else {"n_warmup": w, "n_runs": r}
    got, state = _timed(time_it, schedule, gpu, desc, kwargs)
    clock = CheckClock.from_state(state, schedule, time_it, gpu=gpu)
    value, was_int = _timing_value(got, r, on)
    if clock.calls != w + r:
        raise Wrong(f"time_it called fn {clock.calls} times {on}; expected {w + r}: {w} warm-up calls, then "
                    f"{r} timed calls", _count_hint(clock, w, r, defaults))
    d = clock.seconds()
    median = statistics.median(d[w:])
    if _close(value, median):
        return clock
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


def _check_synchronisation(time_it) -> None:
    """Wrong unless time_it, on a (pretended) GPU machine, synchronises before every clock reading of the timed
    part that follows a call of fn: the start of each timed call and the stop after it."""
    schedule, w, r = GPU_CASE
    clock = _run_case(time_it, schedule, w, r, gpu=True)
    on = f"on {_describe_case(schedule, w, r, False)}, as if on a machine with a GPU"
    why = ("GPU work runs asynchronously: fn() returns as soon as its kernels are queued, so a clock read without "
           "torch.cuda.synchronize() measures the launch, or includes work still running from before. ")
    if not clock.synced():
        raise Wrong(f"time_it never called torch.cuda.synchronize() {on} (torch.cuda.is_available() returned True)",
                    why + "When torch.cuda.is_available() is True, synchronise right before you start the clock and "
                    "right before you stop it; ask torch.cuda.is_available() inside time_it, when it runs"
                    + ("" if clock.cuda_queries else " (time_it never asked it)"))
    calls = clock.unsynchronised(w, r)
    if calls is None:
        return
    if calls == w:
        raise Wrong(f"time_it started the clock for the first timed call without torch.cuda.synchronize() after "
                    f"the {w} warm-up calls {on}",
                    why + "Synchronise right before you start the clock too, so that the warm-up's GPU work is not "
                    "counted in the first timed call")
    raise Wrong(f"time_it read the clock after timed call {calls - w} of {r} without torch.cuda.synchronize() "
                f"between that call of fn and the reading {on}",
                why + "Synchronise right before you stop the clock, after fn() returns")


@exercise("9.3", "A timing function", section="How to time honestly",
          references=("attnbook.timing.benchmark",))
def check_time_it(time_it) -> str:
    """time_it(fn, n_warmup=3, n_runs=10) -> median seconds of n_runs calls after n_warmup untimed calls, with
    torch.cuda.synchronize() before each start and stop of the clock when torch.cuda.is_available()."""
    for schedule, n_warmup, n_runs in TIMING_CASES:
        _run_case(time_it, schedule, n_warmup, n_runs)
    _check_synchronisation(time_it)
    return (f"warm-up, call count and median right on {len(TIMING_CASES)} functions, including slow first calls "
            "and a rare outlier")
