"""Checker for exercise 8.4, nucleus (top-p) filtering. The reference is written out here from the definition: rank
the tokens of a row by probability, the most probable first, and keep a token exactly when the tokens ranked above
it hold less than p of the probability; every other logit becomes -inf.

The cases are drawn from the run (new values on the check's second pass) and accepted only when no threshold that the
right rule or a known mistake compares with lies near a cumulative probability (`_clear`): then float32 and float64,
and any order of summation, give the same tokens, and the logits of a row differ, so that ties never matter (the task
says so). The one exception is decided by the task's text: at p = 1, rows where one token holds all the probability
(the others about 1,000 lower, probability exactly 0 in any dtype) tell >= p from > p.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from ..compare import expect_input_dtype, expect_tensor, generator
from ..guard import call
from ..hints import show_pair
from ..registry import exercise, Wrong
from ..runs import Run, collect, known_mistake
from ._shared import library_paths
from ...i18n import N_, _

_TOP_P_INSTEAD = N_("rank the tokens, add up their probabilities and cut the logits yourself")
# transformers' nucleus step (its logits warper), by its public names, where the answer can reach it (see library_paths)
_WARPERS = [(f"{where}.TopPLogitsWarper", "transformers.generation.logits_process", "TopPLogitsWarper")
            for where in ("transformers", "transformers.generation", "transformers.generation.logits_process")]


def top_p_forbidden(fn) -> list[tuple[str, str]]:
    """What 8.4 forbids, for the learner's function `fn`: transformers' TopPLogitsWarper (the package's own
    top_p_filter is the exercise's reference, refused anyway)."""
    return [(path, _TOP_P_INSTEAD) for path in library_paths(fn, _WARPERS)]


MARGIN = 0.005  # the least distance between a cumulative probability and any threshold compared with it
GAP = 0.05  # the least distance between two logits of a row
# (description, shape, dtype, p, kind): "plain" rows of standard normal logits, "peaked" ones where the most probable
# token alone holds more than p, "all in one" (two tokens, one with all the probability: at p = 1 it tells >= p from
# > p; one token of probability 0 per row, so that no mistake depends on how equal probabilities are ranked), "p=1"
# (every token with some probability), "large" logits about 1,000 (exp overflows in float64 above 709.8), "mixed"
# (a large row and a plain one: a softmax shifted by the whole tensor's maximum leaves the plain row 0 / 0)
CASES = [
    (N_("logits of shape (6,), a single row, p = 0.8"), (6,), torch.float64, 0.8, "plain"),
    (N_("logits of shape (2, 6), p = 0.9"), (2, 6), torch.float64, 0.9, "plain"),
    (N_("float32 logits of shape (3, 8), p = 0.5"), (3, 8), torch.float32, 0.5, "plain"),
    (N_("logits of shape (2, 3, 10), two batch dimensions, p = 0.75"), (2, 3, 10), torch.float64, 0.75, "plain"),
    (N_("logits of shape (4, 7) in which the most probable token alone holds more than p = 0.3"), (4, 7),
     torch.float64, 0.3, "peaked"),
    (N_("float32 logits of shape (3, 2), p = 1: in each row one token holds all the probability and the other lies "
        "about 1,000 lower, so that its probability is 0"), (3, 2), torch.float32, 1.0, "all in one"),
    (N_("logits of shape (2, 6), p = 1, every token holding some probability"), (2, 6), torch.float64, 1.0, "p=1"),
    (N_("large logits, about 1,000, of shape (2, 8), p = 0.6"), (2, 8), torch.float64, 0.6, "large"),
    (N_("logits of shape (2, 8) whose two rows lie about 1,000 apart, p = 0.7"), (2, 8), torch.float64, 0.7, "mixed"),
]


def _ranked(row: Tensor) -> tuple[Tensor, Tensor]:
    """(probabilities in rank order, the most probable first; their inclusive cumulative sums), float64."""
    s = torch.softmax(row.double(), dim=-1).sort(descending=True).values
    return s, s.cumsum(-1)


def _clear(row: Tensor, p: float) -> bool:
    """Whether no cumulative probability of `row` (in rank order, reversed, or in the vocabulary's order), no single
    probability and no cumulative sum of the sorted logits lies within MARGIN of p or 1 - p, and its logits lie GAP
    apart: the right rule and every known mistake then give the same tokens in any dtype."""
    s, c = _ranked(row)
    z = row.double().sort(descending=True).values
    values = torch.cat([c[:-1], s, torch.softmax(row.double(), -1).cumsum(-1)[:-1], z.cumsum(-1), z.exp().cumsum(-1)])
    return (bool((z[:-1] - z[1:]).min() >= GAP)
            and all(bool(((values - t).abs() >= MARGIN).all()) for t in (p, 1 - p)))


def _draw(g: torch.Generator, V: int, p: float, kind: str) -> Tensor:
    """One row of `kind` (see CASES), float64, drawn from `g` until it is clear of every threshold."""
    while True:
        row = torch.randn(V, generator=g, dtype=torch.float64)
        if kind == "all in one":  # one token at the top, the other 800 to 1,200 lower: probability 0
            top = int(torch.randint(V, (1,), generator=g))
            low = row[top] - 800.0 - 400.0 * torch.rand(V, generator=g, dtype=torch.float64)
            return torch.where(torch.arange(V) == top, row, low)
        if kind == "peaked":
            row[int(torch.randint(V, (1,), generator=g))] += 3.0
        if kind == "large":
            row = 1000.0 + 2.0 * row
        s, _c = _ranked(row)
        if kind == "p=1":  # every token above 1e-3: no cumulative probability before the last comes near 1
            if float(s[-1]) >= 1e-3 and bool((row.sort().values.diff() >= GAP).all()):
                return row
            continue
        if kind == "peaked" and float(s[0]) < p + MARGIN:
            continue
        if _clear(row - (1000.0 if kind == "large" else 0.0), p):
            return row


def case_logits(index: int) -> Tensor:
    """The logits of CASES[index], drawn from the run (a softmax does not change when a row moves by a constant, so
    the large rows are tested for clearance 1,000 lower)."""
    _desc, shape, dtype, p, kind = CASES[index]
    g = generator(840 + index)
    kinds = ["large", "plain"] if kind == "mixed" else [kind] * math.prod(shape[:-1])
    rows = [_draw(g, shape[-1], p, row_kind) for row_kind in kinds]
    return torch.stack(rows).reshape(shape).to(dtype)


def _keep_ranked(logits: Tensor, keep, dtype: torch.dtype = torch.float64) -> Tensor:
    """The logits with the tokens that `keep(s, c, b, rank)` (in rank order: probabilities, inclusive and exclusive
    cumulative sums, ranks; computed in `dtype`) does not keep set to -inf, back in the vocabulary's order."""
    s, order = torch.softmax(logits.to(dtype), dim=-1).sort(dim=-1, descending=True)
    c = s.cumsum(-1)
    rank = torch.arange(s.size(-1)).expand_as(s)
    kept = keep(s, c, c - s, rank)
    return logits.masked_fill(~kept.scatter(-1, order, kept), float("-inf"))


def reference(logits: Tensor, p: float) -> Tensor:
    """The right answer: a token is kept when the tokens ranked above it hold less than p."""
    return _keep_ranked(logits, lambda s, c, b, r: b < p)


def _shifted(t: Tensor) -> Tensor:
    """t moved one place along the last dimension, 0 in front: the sum of what comes before each entry."""
    return torch.cat([torch.zeros_like(t[..., :1]), t[..., :-1]], dim=-1)


def _by_rank(logits: Tensor, score_of, keep) -> tuple:
    """The forms of a mistake that ranks `score_of(logits)` instead of the probabilities: the logits with the tokens
    kept where keep(the scores sorted in descending order, excl) holds, back in the vocabulary's order, where
    excl(v) is the sum of the entries before each one along the last dimension. One form for each dtype (float64
    and the logits') and each way of taking that sum (the cumulative sum shifted, or minus the entry itself), as they
    differ in the last bit where a sum meets p exactly; None where a row's scores tie, since what the mistake keeps
    then depends on how the answer ranks equal values."""
    forms = []
    for dtype in {torch.float64, logits.dtype}:
        ranked, order = score_of(logits.to(dtype)).sort(dim=-1, descending=True)
        if bool((ranked[..., :-1] == ranked[..., 1:]).any()):
            forms.append(None)
            continue
        for excl in (lambda v: _shifted(v.cumsum(-1)), lambda v: v.cumsum(-1) - v):
            kept = keep(ranked, excl)
            forms.append(logits.masked_fill(~kept.scatter(-1, order, kept), float("-inf")))
    return tuple(forms)


def _told(forms: tuple) -> tuple | None:
    """The forms of a mistake that can be told here (None: none can)."""
    forms = tuple(form for form in forms if form is not None)
    return forms or None


def _mistakes(logits: Tensor, p: float) -> dict:
    """{hint: what the mistake returns here (a tuple of the forms it takes: its rule in float64 and in the logits'
    dtype, its variants)}, in the order in which they are tried."""
    x, inf, V = logits.double(), float("-inf"), logits.size(-1)
    probs = torch.softmax(x, dim=-1)
    right_kept = torch.isfinite(reference(logits, p))

    def ranked(*keeps):
        return tuple(_keep_ranked(logits, keep, dtype) for keep in keeps for dtype in {torch.float64, logits.dtype})

    sorted_x, order = x.sort(dim=-1, descending=True)
    s = probs.gather(-1, order)
    keep_sorted = (s.cumsum(-1) - s) < p  # (..., V) in rank order
    no_softmax_hint = _("rank and add up probabilities, softmax(logits) over the last dimension: you added up the "
                        "logits (or their exp) themselves")
    out = {
        _(STRICT_HINT): ranked(lambda s, c, b, r: b <= p),
        _("you removed the token that makes the sum reach p: the nucleus is the smallest set whose cumulative "
          "probability is at least p, so it includes the token that crosses p (keep a token while the probability "
          "ranked ABOVE it is below p, or shift your mask one place to the right)"):
            ranked(lambda s, c, b, r: (c < p) | (r == 0), lambda s, c, b, r: (c <= p) | (r == 0)),
        _(TOP_HINT): ranked(lambda s, c, b, r: c < p, lambda s, c, b, r: c <= p,  # no shift, the first not kept
                            lambda s, c, b, r: torch.where(r == 0, c <= p, b <= p),  # shifted, the first not reset
                            lambda s, c, b, r: torch.where(r == 0, c < p, b < p),
                            lambda s, c, b, r: torch.where(r == 0, c[..., -1:] <= p, b <= p),  # rolled: the first
                            lambda s, c, b, r: torch.where(r == 0, c[..., -1:] < p, b < p)),  # gets the last's verdict
        _("keep exactly the nucleus: you kept one token more, the one after the token that makes the sum reach p"):
            ranked(lambda s, c, b, r: _shifted(b) < p),
        _("the cumulative probability must run over the tokens sorted by probability, the most probable first: you "
          "added them up in the vocabulary's order"):
            (logits.masked_fill(~(_shifted(probs.cumsum(-1)) < p), inf),
             logits.masked_fill(~((probs.cumsum(-1) - probs) < p), inf)),
        _("sort in DESCENDING order (descending=True): you added up the least probable tokens first, so you kept the "
          "least probable ones"):
            _told(_by_rank(logits, lambda t: -torch.softmax(t, dim=-1), lambda a, excl: excl(-a) < p)),
        _("you kept the smallest set that holds 1 - p instead of p: with tokens sorted from the least probable up (as "
          "transformers does), remove those whose cumulative probability is at most 1 - p"):
            ranked(lambda s, c, b, r: (b < 1 - p) | (r == 0)),
        _("p bounds the cumulative probability of the kept tokens, not the probability of each: you kept the tokens "
          "whose own probability is at least p"):
            ranked(lambda s, c, b, r: s >= p, lambda s, c, b, r: (s >= p) | (r == 0)),
        _("p is a share of the probability, not of the vocabulary: you kept a fixed number of tokens (p times the "
          "vocabulary size), as top-k does"):
            ranked(*(lambda s, c, b, r, k=k: r < max(k, 1)
                     for k in sorted({int(p * V), math.ceil(p * V), round(p * V)}))),
        no_softmax_hint: _told(_by_rank(logits, lambda t: t, lambda z, excl: excl(z) < p)
                               + _by_rank(logits, lambda t: t, lambda z, excl: excl(z.exp()) < p)),
        _("return the logits, with -inf outside the nucleus: you returned probabilities"):
            (probs.masked_fill(~right_kept, 0.0), probs.masked_fill(~right_kept, inf),
             (probs * right_kept) / (probs * right_kept).sum(-1, keepdim=True)),
        _("return the logits themselves where a token is kept, not log-probabilities (log_softmax): the next step "
          "(a temperature, a softmax) expects logits"):
            (torch.log_softmax(x, dim=-1).masked_fill(~right_kept, inf),),
        _(UNSORT_HINT): (sorted_x.masked_fill(~keep_sorted, inf),  # left in rank order
                         x.masked_fill(~keep_sorted, inf),  # the rank-order mask on the vocabulary's order
                         x.masked_fill(~keep_sorted.gather(-1, order), inf)),  # gather instead of scatter
    }
    dim_hint = _("take the softmax over the vocabulary, the last dimension (dim=-1): yours ran over another dimension")
    union_hint = _("each row has its own nucleus: you removed, in every row, the tokens removed in any row (index the "
                   "sorted indices per row, for example with scatter, rather than with one flat list of token ids)")
    if logits.dim() == 1:  # a single row: these mistakes give the right answer
        out[dim_hint] = out[union_hint] = (reference(logits, p),)
    else:
        out[dim_hint] = _told(sum((_by_rank(logits, lambda t, dim=dim: torch.softmax(t, dim=dim),
                                            lambda w, excl: excl(w) < p) for dim in sorted({0, logits.dim() - 2})), ()))
        removed_anywhere = (~right_kept).reshape(-1, V).any(dim=0)  # (V,)
        out[union_hint] = (logits.masked_fill(removed_anywhere, inf),)
    out[_("softmax each row on its own: shift it by its own maximum (over the last dimension, keepdim=True), not by "
          "the maximum of the whole tensor, which leaves a row far below it 0 / 0")] = _global_max(logits, p)
    out[_("set the logits outside the nucleus to float('-inf'): you set them to 0 (or multiplied the logits by the "
          "mask), and 0 is a logit like any other, as likely as a kept token whose logit is 0")] = (
        reference(logits, p).masked_fill(~right_kept, 0.0),)
    if bool(torch.isinf(x.exp()).any()):  # exp overflows: what an answer without the softmax keeps is not told
        out[no_softmax_hint] = None
    return out


def _global_max(logits: Tensor, p: float) -> tuple | None:
    """The forms of a softmax shifted by the whole tensor's maximum: a row whose exp then underflows everywhere is
    0 / 0, NaN, so every comparison with p is False and the row is kept whole or removed whole (by how the answer
    writes its test); the other rows are right. None where no row underflows, in float64 or the logits' dtype."""
    forms, right = [], reference(logits, p)
    for dtype in {torch.float64, logits.dtype}:
        x = logits.to(dtype)
        e = torch.exp(x - x.max())
        lost = torch.isnan(e / e.sum(-1, keepdim=True)).any(-1, keepdim=True)  # (..., 1): the rows left 0 / 0
        if bool(lost.any()):
            forms += [torch.where(lost, logits, right), torch.where(lost, float("-inf"), right)]
    return tuple(forms) or None


STRICT_HINT = (N_("the nucleus stops as soon as its cumulative probability reaches p (>= p): you kept a token whose "
                  "higher-ranked tokens already hold exactly p (at p = 1, the tokens of probability 0 after one that "
                  "holds it all); remove a token when the probability ranked above it is >= p, not > p"))
TOP_HINT = (N_("the most probable token must always be kept: your result removes it where it alone holds more than p "
               "(or always); keep a token when the probability ranked ABOVE it is below p, which is 0 for the first"))
UNSORT_HINT = (N_("put the result back in the vocabulary's order: the mask you made is in rank order, so scatter it "
                  "back with the indices of the sort (mask.scatter(-1, indices, mask)) before filling the logits"))
FILL_HINT = (N_("set the logits outside the nucleus to float('-inf'), not to a large negative number: a finite fill "
                "leaves those tokens a little probability, and at logits far below 0 all of it"))
MASK_HINT = (N_("return the filtered logits (a float tensor like logits, -inf outside the nucleus), not the mask of "
                "the kept tokens"))
OVERFLOW_HINT = (N_("your result is right everywhere but on the large logits, where exp overflows (above 88.7 in "
                    "float32 and 709.8 in float64) and inf / inf is NaN: use torch.softmax, or subtract each row's "
                    "maximum before exp"))
RULE = (N_("in each row the nucleus is the smallest set of the most probable tokens whose cumulative probability "
           "reaches p: a token is kept when the tokens ranked above it hold less than p, and every other logit "
           "becomes -inf"))


def _first_difference(got: Tensor, ref: Tensor, logits: Tensor, p: float, on: str) -> Wrong:
    """The Wrong naming the first entry where `got` differs from `ref`, and the rule it breaks."""
    g, r = got.detach().double(), ref.double()
    bad = ~((g == r) | torch.isclose(g, r, atol=1e-5, rtol=1e-4))
    idx = tuple(int(i) for i in bad.nonzero()[0])
    probs = torch.softmax(logits.double(), dim=-1)
    row = probs[idx[:-1]]
    above = float(row[row > row[idx[-1]]].sum())  # the probability of the tokens ranked above it (no ties)
    have = float(g[idx])
    if math.isnan(have):
        return Wrong(_("your result holds NaN at index {idx} on {on}", idx=list(idx), on=on), _(OVERFLOW_HINT))
    if math.isinf(float(r[idx])):
        return Wrong(_("your result keeps the token at index {idx} on {on}, which lies outside the nucleus: the tokens "
                       "ranked above it already hold {above:.3f} of the probability, at least p = {p}",
                       idx=list(idx), on=on, above=above, p=p), _(RULE))
    if math.isinf(have) and have < 0:
        return Wrong(_("your result removes the token at index {idx} on {on}, which lies inside the nucleus: the "
                       "tokens ranked above it hold only {above:.3f} of the probability, less than p = {p}",
                       idx=list(idx), on=on, above=above, p=p), _(RULE))
    return Wrong(_("your result has the wrong value at index {idx} on {on}: expected the logit itself, {pair}",
                   idx=list(idx), on=on, pair=show_pair(float(r[idx]), have)),
                 _("return the kept logits unchanged (no softmax, no shift, no scaling), and -inf for the others"))


@exercise("8.4", "Nucleus (top-p) filtering", answer_name="top_p_filter", section="Nucleus (top-p) sampling",
          references=("attnbook.models.gpt.top_p_filter",))
def check_top_p_filter(top_p_filter) -> str:
    """top_p_filter(logits, p): the logits of each row's nucleus unchanged, every other one -inf."""

    def one(index: int, runs: list[Run]) -> Run:
        desc, _shape, _dtype, p, _kind = CASES[index]
        logits, on = case_logits(index), _(desc)
        got = call(top_p_filter, logits, p, what="top_p_filter", on=on, forbid=top_p_forbidden)
        expect_input_dtype(got, logits, what=_("your result"), on=on, input_name="logits", same_shape=True,
                           hint=_("return the dtype of logits (here {name}): no .float() or .double() casts on "
                                  "the result", name=str(logits.dtype).removeprefix("torch.")))
        got = expect_tensor(got, what=_("your result"), on=on, finite=False)
        if got.dtype == torch.bool:
            raise Wrong(_("your result has dtype torch.bool on {on}, expected {dtype}, the dtype of logits",
                          on=on, dtype=logits.dtype), _(MASK_HINT))
        if tuple(got.shape) != tuple(logits.shape):
            raise Wrong(_("your result has shape {got_shape} on {on}, expected {shape}, the shape of logits",
                          got_shape=tuple(got.shape), on=on, shape=tuple(logits.shape)),
                        _("return one value per logit: the same shape as logits, with -inf outside the nucleus"))
        if not got.is_floating_point():
            raise Wrong(_("your result has dtype {dtype} on {on}, expected {want}, the dtype of logits",
                          dtype=got.dtype, on=on, want=logits.dtype),
                        _("keep the logits' floating-point dtype: -inf exists only in floating point"))
        return Run(on, got, reference(logits, p), {hint: None if forms is None else list(forms)
                                                   for hint, forms in _mistakes(logits, p).items()}, 1e-5, 1e-4)

    runs = collect(range(len(CASES)), one)  # Run.right: -inf exactly where the reference has it, close elsewhere
    wrong = [i for i, run in enumerate(runs) if not run.right]
    if not wrong:
        return _("keeps the nucleus on {n} inputs, including a single row, two batch dimensions, float32, a most "
                 "probable token above p, p = 1, logits around 1,000 and rows 1,000 apart", n=len(CASES))
    on = runs[wrong[0]].on
    kinds = {CASES[i][4] for i in wrong}
    if "large" in kinds and kinds <= {"large", "mixed"}:  # right but where exp overflows (the mixed case's top row)
        raise Wrong(_("your result has the wrong values on {on}", on=on), _(OVERFLOW_HINT))
    hint = known_mistake(runs)
    if hint is not None:
        raise Wrong(_("your result has the wrong values on {on}", on=on), hint)
    if all(_finite_fill(runs[i].got, runs[i].ref) for i in wrong):
        raise Wrong(_("your result is finite where it should be -inf on {on}", on=on), _(FILL_HINT))
    raise _first_difference(runs[wrong[0]].got, runs[wrong[0]].ref, case_logits(wrong[0]), CASES[wrong[0]][3], on)


def _same(got: Tensor, ref: Tensor) -> bool:
    """Whether got holds -inf exactly where ref does and ref's finite values elsewhere."""
    g, r = got.detach().double(), ref.double()
    out = torch.isneginf(r)
    return bool(torch.equal(torch.isneginf(g), out)) and torch.allclose(
        g.masked_fill(out, 0.0), r.masked_fill(out, 0.0), atol=1e-5, rtol=1e-4)


def _finite_fill(got: Tensor, ref: Tensor) -> bool:
    """Whether got is ref with a finite value in place of each -inf (a fill such as -1e9 or the row's minimum)."""
    g, r = got.detach().double(), ref.double()
    out = torch.isinf(r)
    return (bool(out.any()) and bool(torch.isfinite(g[out]).all()) and bool(torch.isfinite(g).all())
            and _same(g.masked_fill(out, float("-inf")), r))
