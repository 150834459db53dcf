"""Checker for exercise 9.2, FLOPs and bytes of attention: the exact FLOP count of Q K^T and P V and the size of
one score matrix, with hints for the common counting mistakes."""
from __future__ import annotations

import itertools
import math
import numbers

import torch
from torch import Tensor

from ...timing import attention_flops, score_matrix_bytes
from ..compare import expect_tuple, generator
from ..guard import call
from ..hints import describe
from ..registry import exercise, NotAttempted, Wrong
from ...i18n import N_, _


_DTYPES = {1: torch.int8, 2: torch.float16, 4: torch.float32, 8: torch.float64}

COST_FORBIDDEN = [
    (name, N_("write the two formulas yourself: count the multiply-adds of Q K^T and of P V, and the entries of "
              "the score matrix"))
    for name in ("attnbook.timing.attention_flops", "attnbook.timing.score_matrix_bytes",
                 "attnbook.timing.kv_cache_bytes", "attnbook.timing.attention_matmul_shapes",
                 "attnbook.timing.matmul_flops", "attnbook.timing.layer_flops",
                 "torch.utils.flop_counter.FlopCounterMode")  # PyTorch's FLOP counter, run on a small attention
]

def _int32(n: int) -> int:
    """What a 32-bit integer keeps of n (np.int32 and torch.int32 arithmetic wrap around)."""
    return (n + 2**31) % 2**32 - 2**31


def readings(target: int, inputs: tuple[int, ...], constants=(1, 2, 4, 8), max_power: int = 2) -> int:
    """How many products c * x1^a1 * x2^a2 * ... of the inputs other than 1 (c among `constants`, each power 0 to
    `max_power`) equal `target`: 1 means that the number can be read as one formula of the inputs."""
    inputs = tuple(x for x in inputs if x != 1)  # a 1 is in every product and tells nothing
    count = 0
    for powers in itertools.product(range(max_power + 1), repeat=len(inputs)):
        product = math.prod(x ** a for x, a in zip(inputs, powers))
        count += sum(c * product == target for c in constants)
    return count


def own_primes(inputs: tuple[int, ...]) -> set[int]:
    """The odd primes that divide exactly one of the inputs. In a product of the inputs such a prime shows that
    input's power (with 3, 5, 7 and 11 as inputs, 18480 = 2^4 * 3 * 5 * 7 * 11 spells "2 * everything"); with none,
    the factors of a number do not tell which inputs it multiplies."""
    def primes(x: int) -> set[int]:
        out, p = set(), 2
        while p * p <= x:
            while x % p == 0:
                out.add(p)
                x //= p
            p += 1
        return out | ({x} if x > 1 else set())

    counts: dict[int, int] = {}
    for x in inputs:
        for p in primes(x):
            counts[p] = counts.get(p, 0) + 1
    return {p for p, n in counts.items() if n == 1 and p != 2}


def unreadable(target: int, inputs: tuple[int, ...]) -> bool:
    """Whether the number `target` does not spell its formula in the `inputs`: no input has an odd prime of its own,
    and at least two products of the inputs give it (see `readings`)."""
    return not own_primes(inputs) and readings(target, inputs) >= 2


def separates(B: int, H: int, N: int, d: int, nbytes: int) -> bool:
    """Whether every known mistake gives its own FLOP count and its own size on this case (different from the right
    ones and from one another), so that a hint names one mistake only. The FLOPs times bytes_per_el need only differ
    from the right count: that mistake is told from the others by the second case, whose bytes_per_el differs (with
    bytes_per_el=2 it is 8·B·H·N²·d, the count of the 2 FLOPs per multiply-add counted twice)."""
    *flops, in_flops = [v for _, v in _flop_mistakes(B, H, N, d, nbytes)]  # the last: FLOPs times bytes_per_el
    flops += [4 * B * H * N * N * d]
    sizes = [v for _, v in _byte_mistakes(B, H, N, d, nbytes)] + [B * H * N * N * nbytes]
    sizes = sizes[:2] + sizes[3:]  # the two "divided by 8" entries (/ and //) are one mistake
    return (len(set(flops)) == len(flops) and len(set(map(float, sizes))) == len(sizes)
            and in_flops != flops[-1])


def _unreadable(case: tuple[int, ...]) -> bool:
    B, H, N, d, nbytes = case
    return unreadable(4 * B * H * N * N * d, case) and unreadable(B * H * N * N * nbytes, case)


def cost_cases() -> list[tuple[int, int, int, int, int]]:
    """(batch, heads, n, d_head, bytes_per_el) of 9.2's cases, every size drawn from the run's seed (new on the
    check's second pass), so that an answer cannot know them in advance. The first two are small enough to count by
    hand; each is drawn again until every known mistake gives its own numbers there (`separates`) and the right
    numbers cannot be read as a formula of the inputs (`unreadable`: no distinct primes), and the second has another
    bytes_per_el, so that a byte size written into the code, or FLOPs that scale with bytes_per_el, show at once. The
    third has more FLOPs than a 32-bit integer holds, and not a multiple of 2**32, so that counting in int32 shows
    as a wrong non-zero count before the power-of-two sizes, where it wraps to exactly 0. Then model sizes, one
    token, and 32,768 tokens; no two cases are the same."""
    g = generator(920)

    def pick(options) -> int:
        return options[int(torch.randint(len(options), (), generator=g))]

    cases: list[tuple[int, int, int, int, int]] = []

    def draw(batches, heads, ns, ds, sizes, keep=lambda case: True) -> None:
        while True:
            case = (pick(batches), pick(heads), pick(ns), pick(ds), pick(sizes))
            if case not in cases and keep(case):
                cases.append(case)
                return

    # bytes_per_el 2 or 4 in the first case: with 8, a size divided by 8 is the count of entries, another mistake's
    draw((2, 3, 4, 6), (2, 3, 4, 6, 8, 12), (4, 6, 8, 9, 12), (4, 6, 8, 12, 16), (2, 4),
         lambda c: separates(*c) and _unreadable(c))
    draw((1,), (1,), (4, 6, 8, 9), (2, 4, 6, 8), tuple(b for b in (1, 2, 4, 8) if b != cases[0][4]), _unreadable)
    draw((2, 3, 4, 6), (12, 16, 20, 24), tuple(range(900, 1201, 4)), (48, 64, 72, 80, 96), (1, 2, 4, 8),
         lambda c: _int32(4 * c[0] * c[1] * c[2] ** 2 * c[3]) not in (0, 4 * c[0] * c[1] * c[2] ** 2 * c[3]))
    draw((2, 4, 8), (8, 12, 16), (512, 1024, 2048), (64, 128), (1, 2, 4, 8))
    draw((1,), (16, 32), (2048, 4096, 8192), (64, 128), (1, 2, 4, 8))
    draw((1, 2, 4), (1, 2, 4, 8), (1,), (1, 2, 4, 8, 16), (1, 2, 4, 8))
    draw((4, 8), (16, 32), (32768,), (64, 128), (1, 2, 4))
    return cases


_OVERFLOW_HINT = (N_("the count overflowed: a 32-bit integer (torch.int32, np.int32) holds at most 2,147,483,647 and "
                     "wraps around past it; compute with the Python ints you are given, which never overflow"))


_INT_HINT = (N_("FLOPs and bytes are whole numbers: compute them with integer arithmetic (*, **, //) on the int "
                "arguments, not with / or math.pow, which give floats"))


_BYTES_IN_FLOPS = N_("FLOPs do not depend on the bytes per element: leave bytes_per_el out of the FLOP count")


def _flop_mistakes(B: int, H: int, N: int, d: int, nbytes: int) -> list[tuple[str, int]]:
    """(hint, value) for the FLOP counts that common mistakes give. A hint is named only when its mistake gives the
    answer's count on every case of the check (`_flops_hint`); none prints the right formula."""
    D = H * d  # d_model
    return [
        (_("you counted only one of the two matrix products, or both products as multiply-adds at 1 FLOP each: "
           "count Q Kᵀ and P V, each at 2 FLOPs (a multiply and an add) per multiply-add"), 2 * B * H * N * N * d),
        (_("you counted the multiply-adds of one matrix product, at 1 FLOP each: attention has two products (Q Kᵀ "
           "and P V), and each multiply-add is 2 FLOPs"), B * H * N * N * d),
        (_("you counted three matrix products: attention has two, Q Kᵀ and P V (the softmax between them is not a "
           "matrix product)"), 6 * B * H * N * N * d),
        (_("you counted the 2 FLOPs per multiply-add twice: a multiply-add is one multiply and one add, so that "
           "factor 2 enters the count once, not once per product and again for the total"), 8 * B * H * N * N * d),
        (_("you counted a dot product of length d_head as d_head multiplies and d_head - 1 adds; the convention "
           "(and the task) counts 2 FLOPs per multiply-add, 2·d_head per dot product"),
         2 * B * H * N * N * (2 * d - 1)),
        (_("you counted d_head multiplies and d_head - 1 adds per score, and N multiplies and N - 1 adds per "
           "output entry; the convention (and the task) counts 2 FLOPs per multiply-add"),
         B * H * N * N * (2 * d - 1) + B * H * N * d * (2 * N - 1)),
        (_("that counts only the causal pairs (N(N+1)/2 per head); this task asks for attention without a mask, "
           "where every query meets every key"), 2 * B * H * N * (N + 1) * d),
        (_("your count grows with d_head² and only linearly with N: the score matrix Q Kᵀ has N × N entries per "
           "head, each a dot product of length d_head (and P V sums N terms for each of its N × d_head entries)"),
         4 * B * H * N * d * d),
        (_("every query meets every key: N queries times N keys is N² pairs, not N"), 4 * B * H * N * d),
        (_("each head works on vectors of length d_head, not d_model = heads·d_head: you multiplied by the number "
           "of heads twice"), 4 * B * H * N * N * D),
        (_("count only the attention products Q Kᵀ and P V: the projections W_q, W_k, W_v and W_o are not part of "
           "this count"), 4 * B * H * N * N * d + 8 * B * N * D * D),
        (_("count only the attention products Q Kᵀ and P V: the projections W_q, W_k and W_v are not part of "
           "this count"), 4 * B * H * N * N * d + 6 * B * N * D * D),
        (_("multiply by the number of heads: every head computes its own scores"), 4 * B * N * N * d),
        (_("multiply by the batch size: every sequence in the batch computes its own scores"), 4 * H * N * N * d),
        (_("multiply by both the batch size and the number of heads"), 4 * N * N * d),
        (_(_BYTES_IN_FLOPS), 4 * B * H * N * N * d * nbytes),  # last, as `separates` expects
    ]


def _byte_mistakes(B: int, H: int, N: int, d: int, nbytes: int) -> list[tuple[str, int | float]]:
    """(hint, value) for the score-matrix sizes that common mistakes give."""
    return [
        (_("that is the size in bits: an element of bytes_per_el bytes is 8·bytes_per_el bits; return bytes"),
         8 * B * H * N * N * nbytes),
        (_("bytes_per_el is already a number of bytes: multiply by it, without dividing by 8"),
         B * H * N * N * nbytes / 8),
        (_("bytes_per_el is already a number of bytes: multiply by it, without dividing by 8"),
         B * H * N * N * nbytes // 8),
        (_("the score matrix has one entry per (query, key) pair: N² entries per head, not N"), B * H * N * nbytes),
        (_("the score matrix has N × N entries per head, not N × N × d_head: each score is one number"),
         B * H * N * N * d * nbytes),
        (_("that is twice the size of one (B, H, N, N) matrix: count one matrix, the scores (not the weights too), "
           "at bytes_per_el bytes per element"), 2 * B * H * N * N * nbytes),
        (_("multiply the number of entries by bytes_per_el"), B * H * N * N),
        (_("multiply by the number of heads: every head has its own N × N scores"), B * N * N * nbytes),
        (_("multiply by the batch size: every sequence has its own N × N scores"), H * N * N * nbytes),
    ]


_FLOP_UNITS = [(1e3, N_("kFLOPs (thousands)")), (1e6, N_("MFLOPs (millions)")), (1e9, N_("GFLOPs (billions)")),
               (1e12, N_("TFLOPs (trillions)"))]
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
            return _("that is {what} in {name}; return the count itself, not divided by {size:,.0f}",
                     what=what, name=name, size=size)
    return None


def _cost_number(x, name: str, on: str) -> int | float:
    """A Python int (from a Python or NumPy integer) or float from the learner's value; else Wrong naming `name`."""
    if isinstance(x, Tensor):
        raise Wrong(_("{name} is a tensor (dtype {dtype}) on {on}, expected an int",
                      name=name, dtype=x.dtype, on=on),
                    _("the arguments are Python ints: compute with them directly (no torch.tensor), and return "
                      "Python ints (call .item() on a one-element tensor)"))
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise Wrong(_("{name} is {describe_x} on {on}, expected an int", name=name, describe_x=describe(x), on=on),
                    _("return two ints: `return flops, score_bytes`"))
    if isinstance(x, numbers.Integral):
        return int(x)
    value = float(x)
    if not math.isfinite(value):
        raise Wrong(_("{name} is {value} on {on}, expected an int", name=name, value=value, on=on), _INT_HINT)
    return value


def _show(x: int | float) -> str:
    return f"{x:,}" if isinstance(x, int) else f"{x:.6g}"


def _case_text(B: int, H: int, N: int, d: int, nbytes: int) -> str:
    return _("batch={B}, heads={H}, n={N}, d_head={d}, bytes_per_el={nbytes}", B=B, H=H, N=N, d=d, nbytes=nbytes)


def _flops_on(attention_cost, case: tuple[int, int, int, int, int]) -> int | float | None:
    """The answer's FLOP count on `case`, or None where it gives none (it raises, or returns no pair of numbers)."""
    try:
        got = call(attention_cost, *case, what="attention_cost", on=_case_text(*case), forbid=COST_FORBIDDEN)
        if isinstance(got, (tuple, list)) and len(got) == 2:
            return _cost_number(got[0], "flops", _case_text(*case))
    except (Wrong, NotAttempted):
        pass
    return None


def _named_mistake(attention_cost, got: int | float, case: tuple[int, int, int, int, int],
                   cases: list[tuple[int, int, int, int, int]]) -> str | None:
    """The hint of the first known mistake that gives the answer's FLOP count on every case of the check (counted in
    int32 where the answer's count wrapped around there), or None. The answer is asked again on the other cases only
    when a mistake fits the case at hand."""
    right = attention_flops(case[0], case[1], case[2], case[2], case[3])
    here = _flop_mistakes(*case)
    fits = [i for i, (_hint, value) in enumerate(here) if value != right and _same(got, value)]
    if not fits:
        return None
    answers = {c: (got if c == case else _flops_on(attention_cost, c)) for c in cases}
    values = {c: [value for _hint, value in _flop_mistakes(*c)] for c in cases}

    def gives(i: int) -> bool:
        return all(g is not None and (_same(g, values[c][i]) or g == _int32(values[c][i])) for c, g in answers.items())

    return next((here[i][0] for i in fits if gives(i)), None)


def _common_hint(got: int | float, right: int, zero_hint: str) -> str | None:
    """The hint for the right count returned as a float, a count that wrapped around in int32, or 0."""
    if isinstance(got, float) and _same(got, right):
        return _INT_HINT
    if got != right and got == _int32(right):
        return _OVERFLOW_HINT
    return zero_hint if got == 0 else None


def _flops_hint(attention_cost, got: int | float, cases: list[tuple[int, int, int, int, int]],
                B: int, H: int, N: int, d: int, nbytes: int) -> str | None:
    right = attention_flops(B, H, N, N, d)
    named = (_common_hint(got, right, _("the FLOP count of this input is not 0; if you converted to GFLOPs (or "
                                        "divided with //), return the number of FLOPs itself: the conversion rounds "
                                        "a small count down to 0"))
             or _unit_hint(got, right, _FLOP_UNITS, _("the FLOP count"))
             or _named_mistake(attention_cost, got, (B, H, N, d, nbytes), cases))
    if named:
        return named
    scores = B * H * N * N
    extra = (got - right) / scores
    if isinstance(got, int) and got > right and (got - right) % scores == 0 and 1 <= extra <= 5:
        return _("count only the two matrix products, as is customary; the softmax and the scaling are not counted")
    return None


def _bytes_hint(attention_cost, got: int | float, B: int, H: int, N: int, d: int, nbytes: int, on: str) -> str | None:
    right = score_matrix_bytes(B, H, N, N, _DTYPES[nbytes])
    common = _common_hint(got, right, _("the score matrix of this input is not empty; if you converted to MiB or GB "
                                        "(or divided with //), return the number of bytes itself: the conversion "
                                        "rounds a small size down to 0"))
    if common:
        return common
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
        fixed = ("" if per_entry != int(per_entry) else _(" of 1 byte") if per_entry == 1
                 else _(" of {per_entry:g} bytes", per_entry=per_entry))
        return (_("score_bytes stays {show_got} when bytes_per_el changes to {other}: your code uses a fixed "
                  "size{fixed} per element; multiply the number of entries by the bytes_per_el argument",
                  show_got=_show(got), other=other, fixed=fixed))
    unit = _unit_hint(got, right, _BYTE_UNITS, _("the size"))
    if unit:
        return unit.replace("return the count itself", "return bytes")
    for hint, value in _byte_mistakes(B, H, N, d, nbytes):
        if value != right and _same(got, value):
            return hint
    if isinstance(got, float):
        return _INT_HINT
    return None


@exercise("9.2", "FLOPs and bytes of attention", answer_name="attention_cost",
          section="What attention costs: FLOPs and bytes",
          references=("attnbook.timing.attention_flops", "attnbook.timing.score_matrix_bytes"))
def check_attention_cost(attention_cost) -> str:
    """attention_cost(batch, heads, n, d_head, bytes_per_el) -> (flops, score_bytes), two ints."""
    cases = cost_cases()
    for B, H, N, d, nbytes in cases:
        on = _case_text(B, H, N, d, nbytes)
        got = call(attention_cost, B, H, N, d, nbytes, what="attention_cost", on=on, forbid=COST_FORBIDDEN)
        if isinstance(got, list) and len(got) == 2:
            got = tuple(got)  # the task text accepts a list too
        flops_got, bytes_got = expect_tuple(got, ("flops", "score_bytes"), "attention_cost", on)
        flops_got, bytes_got = _cost_number(flops_got, "flops", on), _cost_number(bytes_got, "score_bytes", on)
        flops = attention_flops(B, H, N, N, d)
        score_bytes = score_matrix_bytes(B, H, N, N, _DTYPES[nbytes])
        if (flops_got, bytes_got) == (score_bytes, flops) and flops != score_bytes:
            raise Wrong(_("attention_cost returned (score_bytes, flops) on {on}", on=on),
                        _("return them in the order the task gives: `return flops, score_bytes`"))
        # The expected numbers are not shown: the learner works them out (the hints name the mistake).
        if not (isinstance(flops_got, int) and flops_got == flops):
            kind = _("the float ") if isinstance(flops_got, float) else ""
            raise Wrong(_("flops is {kind}{show_flops_got} on {on}, which is not the FLOP count of Q Kᵀ and P V",
                          kind=kind, show_flops_got=_show(flops_got), on=on),
                        _flops_hint(attention_cost, flops_got, cases, B, H, N, d, nbytes)
                        or _("count the multiply-adds of Q Kᵀ and of P V for one head of one sequence, at 2 FLOPs "
                             "each, then multiply by batch and heads; try your formula on a case small enough to "
                             "count by hand"))
        if not (isinstance(bytes_got, int) and bytes_got == score_bytes):
            kind = _("the float ") if isinstance(bytes_got, float) else ""
            raise Wrong(_("score_bytes is {kind}{show_bytes_got} on {on}, which is not the size of one ({B}, "
                          "{H}, {N}, {N}) score matrix",
                          kind=kind, show_bytes_got=_show(bytes_got), on=on, B=B, H=H, N=N),
                        _bytes_hint(attention_cost, bytes_got, B, H, N, d, nbytes, on)
                        or _("count the entries of one (batch, heads, n, n) matrix and multiply by bytes_per_el"))
    return _("exact FLOPs and bytes on {len_cost_cases} sizes, from 1 token to 32,768",
             len_cost_cases=len(cases))
