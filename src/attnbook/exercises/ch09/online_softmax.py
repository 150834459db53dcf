"""Checker for exercise 9.1, online softmax over blocks: the softmax of a row that arrives in blocks, with a
running maximum and a running sum, checked against the known mistakes of the streaming pass."""
from __future__ import annotations

import math
import re
import sys

import torch
from torch import Tensor

from ...attention import softmax
from ..forbid import op_aliases
from ..compare import expect_close, expect_dtype, expect_tensor, generator
from ..guard import call
from ..observe import ChangedItem
from ..hints import describe
from ..registry import exercise, Wrong
from ..runs import Run, known_mistake
from ...i18n import N_, _


_SOFTMAX_INSTEAD = (N_("stream over the blocks: keep a running maximum m and a running sum l of exp(x - m), "
                       "rescale l by exp(m_old - m_new) when m grows, then return exp(x - m) / l"))
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
        out += [a for a in op_aliases(path) if not op_aliases(a) and a not in out]
    return out


def online_softmax_forbidden() -> list[tuple[str, str]]:
    """What 9.1 forbids, as (path, instead) pairs; SciPy's functions by name only when SciPy is already loaded
    (so that a check does not import it), and by pattern always."""
    paths = list(_SOFTMAX_PATHS)
    if "scipy.special" in sys.modules:
        paths += _SCIPY_PATHS
    return [(p, _SOFTMAX_INSTEAD) for p in (*_with_shared_aliases(paths), *_SOFTMAX_PATTERNS)]


_NO_RESCALE_SUM = (N_("when a block raises the running maximum from m_old to m_new, the sum collected so far was "
                      "relative to m_old: multiply it by exp(m_old - m_new) before adding the new block's terms"))
_RESCALE_INVERTED = (N_("the rescaling factor is exp(m_old - m_new), at most 1: the terms collected so far shrink "
                        "relative to the new, larger maximum; you multiplied by exp(m_new - m_old)"))
_OWN_MAX = (N_("each block was shifted by its own maximum, so the blocks' terms are on different scales: shift "
               "every term by the one running maximum of everything seen (and rescale what came before)"))
_PER_BLOCK = (N_("you normalised each block on its own (each block sums to 1); the weights of the whole row must "
                 "sum to 1: divide by one sum over all the blocks"))
_NO_FINAL_RESCALE = (N_("the weights of the early blocks were computed with the maximum known at that time; at the "
                        "end, compute every weight with the final maximum m: exp(x - m) / l"))
_NO_DIVIDE = N_("these are exp(x - m) without the division: divide by the running sum l so that the weights sum to 1")
_NO_SHIFT = (N_("exp of a logit of 1000 overflows to inf (and exp(-1000) underflows to 0): subtract the running "
                "maximum before exp, as the chapter's online softmax does"))
_OVERFLOW = (N_("exp overflowed to inf (float32's exp overflows above about 88, float64's and math.exp above 709). "
               "With m the running maximum of everything seen so far, max(m, the block's maximum), and never the "
               "block's own maximum alone, every exponent is at most 0: exp(x - m) and the rescaling factor "
               "exp(m_old - m_new) are at most 1, and nothing overflows"))
_FIXED_SHIFT = (N_("an empty block has no maximum; treating it as 0 (or any fixed number) shifts by too much when "
                   "every logit is far below it, and exp underflows to 0: skip empty blocks"))
_START_ZERO = (N_("the running maximum starts at -inf, not 0: on logits far below 0 (about -150 here) a maximum of 0 "
                  "shifts by too much, exp(x - 0) underflows to 0 and the sum l stays 0"))
_FROZEN_MAX = (N_("the running maximum was not updated: a later block's logits exceed the first block's maximum by more "
                  "than exp can take (about 88 in float32, 709 in float64), so exp(x - m) overflows. Whenever a block "
                  "raises the maximum, rescale l by exp(m_old - m_new) and carry on with the new maximum"))
_OLD_MAX_ADD = (N_("a block's terms are added relative to the new maximum, after the old sum has been rescaled by "
                   "exp(m_old - m_new); you added them relative to the old maximum"))
_RUNNING_OUT = (N_("each block's weights were written with the m and l known when the block arrived; only the final m "
                   "and l are right for every logit: finish the pass over all the blocks first, then compute "
                   "exp(x - m) / l for every logit"))
_LAST_OUT = (N_("the last block did not update m and l: every non-empty block, the last one included, must go into "
                "the running maximum and sum"))
_ALL_INF_BLOCK = (N_("a block whose entries are all -inf has maximum -inf, and exp(-inf - (-inf)) is NaN: while the "
                     "running maximum is still -inf, skip the block (it adds nothing to the sum) or shift by 0"))
_SKIPPED = (N_("an inf or NaN that no known mistake explains: the running maximum m stayed -inf (or the sum l stayed 0) "
               "for some logits; was a block skipped (blocks[1:], or a size test such as len(b) > 1)? Every non-empty "
               "block must update m and l"))
_NEGINF_TO_ZERO = (N_("a masked logit (-inf) must get weight exactly 0; replacing -inf by 0 (nan_to_num, masked_fill) "
                      "gives it the weight of a logit 0. exp(-inf - m) is already 0: guard only the shift while m is "
                      "still -inf"))
_SKIP_INF_BLOCK = (N_("a block with some -inf entries still has finite logits that count: skip only blocks whose "
                      "entries are all -inf (exp(-inf - m) is 0 anyway), not every block that holds a -inf"))
_FLOAT32_ON_FLOAT64 = (N_("float64 blocks keep about 16 significant digits, float32 only about 7: somewhere your "
                          "computation ran in float32 (.float(), np.float32, or a tensor made without dtype=, such as "
                          "torch.zeros(n) or torch.tensor([...]), which is float32). Keep the blocks' dtype throughout"))
_LOW_PRECISION = (N_("if you used float16 or bfloat16 (.half()) anywhere, keep the blocks' own dtype instead: half "
                     "precision keeps only about 3 significant digits"))


def _logits(*sizes: int, seed: int, scale: float = 3.0, dtype=torch.float64, offset: float = 0.0) -> list[Tensor]:
    """Random blocks of the given sizes (new values on every pass of the check); block j is shifted by offset * j
    so that the maximum tends to grow."""
    g = generator(seed)
    return [scale * torch.randn(n, generator=g, dtype=dtype) + offset * j for j, n in enumerate(sizes)]


def _jitter(values: list[list[float]], seed: int, dtype=torch.float32, width: float = 0.25) -> list[Tensor]:
    """Blocks of the given values, each moved by a random amount in [-width, width] (new on every pass): the
    properties a case is built for (which block holds the maximum, how far it jumps) hold for every draw."""
    g = generator(seed)
    return [torch.tensor(v, dtype=torch.float64).add(width * (2 * torch.rand(len(v), generator=g,
                                                                              dtype=torch.float64) - 1)).to(dtype)
            for v in values]


# The accuracy the check holds (the task text states it): float64 rows to 1e-12 relative (float32 arithmetic, about
# 7 significant digits, fails there), float32 rows to 1e-4 relative and 1e-5 absolute. Mistakes are recognised
# with the looser float32 tolerance on every row.
TOLERANCE = {torch.float64: (1e-15, 1e-12), torch.float32: (1e-5, 1e-4)}  # dtype -> (atol, rtol)
MATCH_TOLERANCE = (1e-6, 1e-4)  # (atol, rtol) of "the same output" when a mistake is recognised


def _online_cases() -> list[tuple[str, list[Tensor]]]:
    """(description, blocks) for 9.1, ordered so that each mistake shows up first where it is unambiguous. Every
    value comes from the run's seed (new on the check's second pass); each case keeps the property it is built for
    on every draw (tests/test_exercises_ch09.py checks 200 offsets)."""
    rising = _logits(3, 4, 2, seed=1)  # the maximum grows from block to block, by 2 to 5 each time
    g = generator(11)
    for j in range(1, len(rising)):
        target = max(b.max().item() for b in rising[:j]) + 2.0 + 3.0 * torch.rand((), generator=g).item()
        rising[j] = rising[j] + (target - rising[j].max().item())
    huge = _jitter([[1000.0, -1000.0, 998.0], [999.0, 1001.0], [-1000.0], [1000.5, 0.0]], seed=2)  # float32
    deep = _jitter([[-201.0, -203.5], [], [-200.0, -204.0, -202.0]], seed=8)  # float32
    masked = _logits(3, 4, 3, seed=4)
    masked[1][torch.tensor([0, 2])] = float("-inf")  # two masked entries, as a causal or padding mask leaves
    top = max(masked[0].max().item(), masked[2].max().item())  # the block's finite logits hold the row's maximum
    masked[1] = masked[1] + max(0.0, top + 0.5 - masked[1].max().item())
    first_masked = [torch.full((3,), float("-inf"), dtype=torch.float64)] + _logits(2, 3, seed=5)
    g = generator(6)
    sizes = torch.randint(0, 6, (200,), generator=g).tolist()
    # From block 150 on the logits are about 760 higher: more than float64's exp can take (709.8) above the first
    # blocks' maximum, so a running maximum that is never updated overflows even in float64.
    long = [2.0 * torch.randn(n, generator=g, dtype=torch.float64) + 0.05 * j + (760.0 if j >= 150 else 0.0)
            for j, n in enumerate(sizes)]
    # float32, and the fifth block raises the maximum by about 94, more than float32's exp can take (88.7).
    singles = _jitter([[v] for v in (0.5, -1.0, 2.0, 1.0, 96.0, 95.5, 3.0, 97.0)], seed=9)
    # float32 logits of about -150, the largest in the first block: a maximum that starts at 0 underflows.
    falling = _logits(4, 3, 5, seed=3, offset=-5.0)
    top = max(b.max().item() for b in falling[1:])
    falling[0] = falling[0] + max(0.0, top + 0.5 - falling[0].max().item())
    falling = [b.float() - 150.0 for b in falling]
    return [
        (_("one block of 5 logits"), _logits(5, seed=0)),
        (_("3 blocks of sizes 3, 4 and 2 whose maximum grows from block to block"), rising),
        (_("4 blocks of float32 logits of about +-1000"), huge),
        (_("8 blocks of size 1 (float32), the fifth raising the maximum from 2 to 96"), singles),
        (_("3 blocks of float32 logits of about -150 with the largest logit in the first block"), falling),
        (_("float32 logits of about -200 in 3 blocks, the middle one empty"), deep),
        (_("3 blocks, the second with two entries equal to -inf (masked)"), masked),
        (_("3 blocks, the first with every entry equal to -inf"), first_masked),
        (_("an empty block first, then 2 blocks"), [torch.tensor([], dtype=torch.float64)] + _logits(3, 2, seed=7)),
        (_("a long row in {len_long} blocks of 0 to 5 logits, from block 150 on about 760 higher",
           len_long=len(long)), long),
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


def _normalised(e: Tensor) -> Tensor:
    return e / e.sum()


def _frozen_max(blocks: list[Tensor], dtype) -> Tensor:
    """The maximum of the first block with a finite logit kept for the whole row, computed in `dtype`."""
    m = next(b[torch.isfinite(b)].max().item() for b in blocks if torch.isfinite(b).any())
    return _normalised(torch.cat([torch.exp(b.to(dtype) - m) for b in blocks]))


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


def _online_mistakes(blocks: list[Tensor], expected: Tensor) -> dict[tuple[str, str], Tensor]:
    """{(hint, mistake): its output on `blocks`} (runs.Run's table), most likely first, each worked out on its own in
    float64 (in the blocks' dtype where its overflow or underflow is the point). The keys are the same on every case,
    so that a mistake can be confirmed on every case checked before its hint is given."""
    has_empty = any(b.numel() == 0 for b in blocks)
    first_all_inf = bool(blocks[0].numel()) and bool(torch.isneginf(blocks[0]).all())
    wide, maxes = [b.double() for b in blocks], _stream_max(blocks)
    final = torch.cat([torch.exp(b - maxes[-1]) for b in wide])  # exp(x - m) with the final maximum, undivided
    # shifted by max(0, the maximum) in the blocks' dtype: on logits far below 0 every exp underflows (0 / 0 is NaN,
    # or 0 where the sum kept something from before an empty block counted as 0)
    by_zero = _normalised(torch.cat([torch.exp(b - max(maxes[-1], 0.0)) for b in blocks]))
    kept = [b for b in wide if b.numel() and not torch.isinf(b).any()]  # the blocks with no -inf
    m_kept = max(b.max().item() for b in kept)
    return {
        (_FROZEN_MAX, "frozen"): _frozen_max(blocks, blocks[0].dtype),
        (_FROZEN_MAX, "frozen64"): _frozen_max(blocks, torch.float64),
        (_ALL_INF_BLOCK, "all_inf"): torch.full_like(expected, float("nan")) if first_all_inf else expected,
        (_START_ZERO, "start_zero"): by_zero,
        (_FIXED_SHIFT, "empty_zero"): torch.nan_to_num(by_zero, nan=0.0) if has_empty else expected,
        (_FIXED_SHIFT, "empty_zero_nan"): by_zero if has_empty else expected,
        (_NO_SHIFT, "no_shift"): _normalised(torch.cat([torch.exp(b) for b in blocks])),  # in the blocks' dtype
        (_PER_BLOCK, "per_block"): torch.cat([softmax(b, dim=-1) for b in wide]),
        (_OWN_MAX, "own_max"): _normalised(torch.cat([torch.exp(b - _shift(b.max().item())) if b.numel() else b
                                                     for b in wide])),
        (_NO_RESCALE_SUM, "no_rescale"): final / _streamed_sum(blocks, lambda old, new: 1.0),
        (_RESCALE_INVERTED, "inverted"): final / _streamed_sum(
            blocks, lambda old, new: math.exp(new - old) if new - old < 709 else math.inf),
        # the right running sum, but each block's weights keep the maximum known when the block arrived
        (_NO_FINAL_RESCALE, "no_final_rescale"): torch.cat([torch.exp(b - _shift(m)) for b, m in zip(wide, maxes)])
        / _streamed_sum(blocks, lambda old, new: math.exp(old - new)),
        (_RUNNING_OUT, "running_out"): _stream(blocks, running_out=True),
        (_OLD_MAX_ADD, "add_old"): _stream(blocks, add_old=True),
        (_LAST_OUT, "last_out"): _stream(blocks, last=False),
        (_NO_DIVIDE, "no_divide"): final,
        (_NEGINF_TO_ZERO, "neginf_to_zero"): softmax(torch.nan_to_num(torch.cat(wide), neginf=0.0), dim=-1),
        # blocks holding a -inf left out of m and l, their finite logits still given exp(x - m) / l
        (_SKIP_INF_BLOCK, "skip_inf"): torch.cat([torch.exp(b - m_kept) for b in wide])
        / sum(torch.exp(b - m_kept).sum().item() for b in kept),
    }


def _finite_max(blocks: list[Tensor]) -> float:
    """The largest finite logit of the row."""
    return max(b[torch.isfinite(b)].max().item() for b in blocks if torch.isfinite(b).any())


def _nan_hint(blocks: list[Tensor], overflow_ruled_out: bool) -> str:
    """The likely cause of an inf or NaN that no known mistake explains, on this input (`overflow_ruled_out`: the
    answer was right on logits of +-1000 before)."""
    if blocks[0].numel() and torch.isneginf(blocks[0]).all():
        return _ALL_INF_BLOCK
    has_empty = any(b.numel() == 0 for b in blocks)
    if _finite_max(blocks) > 80 and not overflow_ruled_out:  # exp overflows float32 above 88.7
        return _FIXED_SHIFT if has_empty else _OVERFLOW  # no shift at all, or a shift by the block's own maximum
    if _finite_max(blocks) < -80:  # exp(x) underflows float32 below -103
        return _FIXED_SHIFT if has_empty else _START_ZERO
    return _SKIPPED


def _online_error_hint(message: str) -> str | None:
    if "math range error" in message:  # math.exp of a number above 709: a shift that is not the running maximum
        return _(_OVERFLOW)
    if re.search(r"numel\(\) == 0|non-zero size|zero-size|empty", message):
        return _("an empty block has no maximum: skip blocks with b.numel() == 0 (they add nothing to the sum)")
    if "expected a non-empty list of Tensors" in message:
        return _("torch.cat needs at least one tensor: build the list of weights from the blocks you were given")
    return None


@exercise("9.1", "Online softmax over blocks", answer_name="online_softmax", section="How online softmax works",
          references=("attnbook.attention.tiled_attention", "attnbook.attention.softmax"))
def check_online_softmax(online_softmax) -> str:
    """online_softmax(blocks) -> the softmax of torch.cat(blocks), one 1-D tensor."""
    cases = _online_cases()
    forbid = online_softmax_forbidden()
    history: list[tuple[str, Tensor, list, Tensor, float]] = []  # (desc, output, blocks, expected, atol): passed
    overflow_ruled_out = False
    for desc, blocks in cases:
        given = [b.clone() for b in blocks]
        got, changed = call(online_softmax, given, what="online_softmax", on=desc, forbid=forbid,
                            explain=_online_error_hint, observe=ChangedItem(0, blocks))
        if changed is not None:
            raise Wrong(_("online_softmax changed block {changed} of its input in place on {desc}",
                          changed=changed, desc=desc),
                        _("use out-of-place operations (b - m, not b -= m or b.sub_(m))"))
        total = sum(b.numel() for b in blocks)
        expected = softmax(torch.cat([b.double() for b in blocks]), dim=-1)
        if isinstance(got, (list, tuple)):
            hint = (_("you returned one tensor per block: join them into one 1-D tensor with torch.cat")
                    if got and all(isinstance(x, Tensor) for x in got) else
                    _("return one 1-D tensor holding the weights of every logit, in order"))
            raise Wrong(_("online_softmax returned {describe_got} on {desc}, expected one 1-D tensor of {total} "
                          "weights", describe_got=describe(got), desc=desc, total=total), hint)
        if hasattr(got, "__array__") and not isinstance(got, Tensor):
            raise Wrong(_("online_softmax returned {describe_got} on {desc}, expected a torch.Tensor",
                          describe_got=describe(got), desc=desc),
                        _("return a torch tensor: torch.from_numpy(a) converts a NumPy array (then keep the blocks' "
                          "dtype)"))
        got = expect_tensor(got, what=_("the result"), on=desc, finite=False)
        if got.dim() != 1:
            raise Wrong(_("the result has shape {tuple_got_shape} on {desc}, expected ({total},)",
                          tuple_got_shape=tuple(got.shape), desc=desc, total=total),
                        _("return one 1-D tensor: the weights of all the blocks, one after the other"))
        dtype = blocks[0].dtype
        atol, rtol = TOLERANCE[dtype]
        match_atol = max(atol, MATCH_TOLERANCE[0])
        g = got.detach().to(torch.float64).cpu() if got.is_floating_point() else None
        if g is not None and g.shape == expected.shape and torch.allclose(
                g, expected, atol=match_atol, rtol=max(rtol, MATCH_TOLERANCE[1])):
            expect_dtype(got, dtype, what=_("the result"), on=desc, input_name=_("the blocks"),
                         hint=_("return the weights in the dtype of the blocks (float32 blocks give float32 weights); "
                                "if you computed in float64, convert the result back with .to(blocks[0].dtype)"))
            if not torch.allclose(g, expected, atol=atol, rtol=rtol):
                err = ((g - expected).abs() / expected.abs().clamp_min(1e-300)).max().item()
                raise Wrong(_("the result is right to only about {digits} significant digits on {desc} (checked to "
                              "{rtol:g} relative on float64 blocks)",
                              digits=max(1, round(-math.log10(max(err, 1e-17)))), desc=desc, rtol=rtol),
                            _FLOAT32_ON_FLOAT64)
            history.append((desc, g, blocks, expected, match_atol))
            overflow_ruled_out = overflow_ruled_out or _finite_max(blocks) > 80
            continue
        # A mistake's hint only when it gives this answer's output on this case and on every case before it.
        # (The mistakes are worked out only now, for this case and the ones before: a right answer never waits.)
        hint = g is not None and known_mistake(
            [Run(d_j, g_j, e_j, _online_mistakes(b_j, e_j), a_j) for d_j, g_j, b_j, e_j, a_j in history]
            + [Run(desc, g, expected, _online_mistakes(blocks, expected), match_atol)])
        if hint:
            raise Wrong(_("the result has the wrong values on {desc}", desc=desc), hint)
        try:
            expect_close(got, expected, what=_("the result"), on=desc, atol=match_atol, rtol=MATCH_TOLERANCE[1],
                         nan_hint=_nan_hint(blocks, overflow_ruled_out))
        except Wrong as e:
            if e.hint is None and g is not None and g.shape == expected.shape and torch.allclose(
                    g, expected, atol=3e-3, rtol=1e-2):
                raise Wrong(_("the result is right to only about 3 significant digits on {desc} (checked to "
                              "{atol:g})", desc=desc, atol=match_atol), _LOW_PRECISION) from None
            raise
    return (_("right on {len_cases} rows, including logits of +-1000, empty blocks, -inf entries and a row of "
              "{len_cases_1_1} blocks", len_cases=len(cases), len_cases_1_1=len(cases[-1][1])))
