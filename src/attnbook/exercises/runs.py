"""Running an answer on every case before judging it: `collect` runs each case (`Run`: the learner's tensor, the
right one, what each known mistake gives; `Items`: a Run per tensor of an answer that returns several), `verdict`
names a mistake only when it fits every case run and otherwise shows the first wrong entry and the rule, and
`expect_gradients` backpropagates through an answer to check that a trained layer stays differentiable. Used by
chapters 1 to 6 and 11."""
from __future__ import annotations

import math
from typing import Callable, NamedTuple

import torch
from torch import Tensor

from .compare import DTYPE_HINT, NAN_HINT, expect_tensor, randn
from .guard import call
from .hints import show_pair
from .observe import Gradients
from .registry import Wrong
from ..i18n import N_, _


ATOL, RTOL = 1e-5, 1e-4  # the default tolerance of a case


class Run(NamedTuple):
    """One case run: the learner's tensor, the right one, {hint: what that mistake gives here (a tensor, a
    (tensor, atol, rtol) pair for a looser match, a list of these for a mistake made in several forms, any of which
    fits, [] where the mistake raises (an answer that returned a result here is not making it), or None where the
    mistake cannot be told)}, the tolerance; optionally a band: how much further each entry may be off when the
    cause is a known imprecision (float16 rounding), for `verdict`'s band_hint, and `detail(index) -> str`, where
    the case says in its own words what is wrong at a wrong entry (chapter 6's masks) instead of printing the two
    values. A key (hint, tag) gives a second mistake the same hint."""
    on: str
    got: Tensor
    ref: Tensor
    mistakes: dict
    atol: float = ATOL
    rtol: float = RTOL
    band: Tensor | float | None = None
    detail: Callable[[tuple], str] | None = None

    @property
    def right(self) -> bool:
        return _close(self.got, self.ref, self.atol, self.rtol)


def _close(got: Tensor, want: Tensor, atol: float, rtol: float) -> bool:
    g, w = got.detach().to(torch.float64).cpu(), want.detach().to(torch.float64).cpu()
    return g.shape == w.shape and torch.allclose(g, w, atol=atol, rtol=rtol, equal_nan=True)


class Items(tuple):
    """One case run of an answer that returns several tensors (output, weights): a Run per tensor, in the order
    they are judged (the weights before the output they make wrong)."""

    @property
    def right(self) -> bool:
        return all(r.right for r in self)


def _forms(wrong, atol: float = ATOL, rtol: float = RTOL):
    """(tensor, atol, rtol) of each form of a mistake's output (see Run), `atol` and `rtol` where it gives none."""
    for w in wrong if isinstance(wrong, list) else [wrong]:
        yield w if isinstance(w, tuple) else (w, atol, rtol)


def _fits(run: Run, hint: str) -> bool:
    """Whether the mistake `hint` gives the learner's result on this run (a mistake not told here fits)."""
    wrong = run.mistakes.get(hint)
    return wrong is None or any(_close(run.got, w, a, r) for w, a, r in _forms(wrong, run.atol, run.rtol))


def try_mistake(fn):
    """fn() if it works, else [] (no result fits it): the output of a mistake that only some shapes allow."""
    try:
        return fn()
    except (RuntimeError, ValueError, IndexError):
        return []


def loose(mistakes: dict, atol: float = ATOL, rtol: float = RTOL) -> dict:
    """`mistakes` matched to (atol, rtol) where they give no tolerance, whatever the run's (a float64 run's is
    tighter): a mistake is still named where the answer also computed in float32."""
    return {h: None if w is None else list(_forms(w, atol, rtol)) for h, w in mistakes.items()}


def collect(cases, one, *, all_cases: bool = True) -> list[Run]:
    """[one(case, runs) for each case]; a Wrong on a later case ends the list when an earlier run already has
    wrong values (that one is reported, with the evidence of the runs before), else it is raised. Without
    `all_cases` (for costly calls) the list ends at the first run with wrong values."""
    runs: list[Run] = []
    for case in cases:
        if not all_cases and runs and not runs[-1].right:
            break
        try:
            runs.append(one(case, runs))
        except Wrong:
            if any(not r.right for r in runs):
                break
            raise
    return runs


def _hint(key):
    """The hint of a mistake table's key: the key itself, or a (hint, tag) pair's hint."""
    return key[0] if isinstance(key, tuple) else key


def shape_hint(got: Tensor, mistakes: dict, runs: list[Run]) -> str | None:
    """The first mistake whose output here has got's shape and that fits every earlier run."""
    return _hint(next((h for h, w in mistakes.items() if w is not None and any(tuple(f.shape) == tuple(got.shape)
                       for f, _a, _r in _forms(w)) and all(_fits(r, h) for r in runs)), None))


def expect_shape(got, ref: Tensor, mistakes: dict, runs: list[Run], *, what: str, on: str) -> Tensor:
    """`got` as a tensor of ref's shape, else Wrong, naming a mistake of that shape only if it fits every earlier
    run too."""
    got = expect_tensor(got, what=what, on=on, finite=False)
    if tuple(got.shape) != tuple(ref.shape):
        raise Wrong(_("{what} has shape {tuple_got_shape} on {on}, expected {tuple_ref_shape}",
                      what=what, tuple_got_shape=tuple(got.shape), on=on, tuple_ref_shape=tuple(ref.shape)),
                    shape_hint(got, mistakes, runs))
    if got.is_complex() or got.dtype == torch.bool:
        raise Wrong(_("{what} has dtype {dtype} on {on}, expected real numbers like {dtype2}",
                      what=what, dtype=got.dtype, on=on, dtype2=ref.dtype))
    return got


def expect_like(got, ref: Tensor, mistakes: dict, runs: list[Run], *, what: str, on: str, dtype: torch.dtype,
                input_name: str, dtype_hint: str = DTYPE_HINT) -> Tensor:
    """Like expect_shape, and of `dtype`, the dtype of the input `input_name` (an integer or half-precision result
    told so)."""
    got = expect_tensor(got, what=what, on=on, finite=False)
    if tuple(got.shape) == tuple(ref.shape) and (got.is_complex() or got.dtype == torch.bool):
        raise Wrong(_("{what} has dtype {dtype} on {on}, expected real numbers of dtype {dtype2}",
                      what=what, dtype=got.dtype, on=on, dtype2=dtype))
    got = expect_shape(got, ref, mistakes, runs, what=what, on=on)
    if not got.is_floating_point():
        raise Wrong(_("{what} has the integer dtype {dtype} on {on}, expected floating point ({dtype2})",
                      what=what, dtype=got.dtype, on=on, dtype2=dtype),
                    _("integer tensors drop the fractional part: keep the computation in floating point "
                      "(no .int() or .long())"))
    if got.dtype != dtype:
        hint = dtype_hint
        if got.dtype in (torch.float16, torch.bfloat16):
            hint = _("half precision keeps only about 3 significant digits: ") + _(dtype_hint)
        raise Wrong(_("{what} has dtype {dtype} on {on}, expected {dtype2}, the dtype of {input_name}",
                      what=what, dtype=got.dtype, on=on, dtype2=dtype, input_name=input_name), hint)
    return got


def expect_items(got, refs, mistakes, runs: list[Items], *, what, on: str, dtype: torch.dtype, input_name: str,
                 tolerance: tuple[float, float] = (ATOL, RTOL)) -> Items:
    """A case's Items: each tensor of `got`, in the order they are judged (refs, mistakes and what likewise), through
    expect_like against that item's earlier runs."""
    return Items(Run(on, expect_like(g, ref, m, [r[k] for r in runs], what=what[k], on=on, dtype=dtype,
                                     input_name=input_name), ref, m, *tolerance)
                 for k, (g, ref, m) in enumerate(zip(got, refs, mistakes)))


def known_mistake(runs: list[Run]) -> str | None:
    """The hint of the first mistake (in the first wrong run's table) that gives the learner's result on every run
    where it is told; None when every run is right or no mistake fits."""
    first = next((r for r in runs if not r.right), None)
    return None if first is None else _hint(next((h for h in first.mistakes if any(
        r.mistakes.get(h) is not None for r in runs) and all(_fits(r, h) for r in runs)), None))


def _in_band(run: Run) -> bool:
    g, e = run.got.detach().to(torch.float64).cpu(), run.ref.detach().to(torch.float64).cpu()
    return run.band is not None and bool(((g - e).abs() <= run.band + run.atol + run.rtol * e.abs()).all())


def verdict(runs: list, *, what, rule, nan_hint=NAN_HINT, explain=None, band_hint: str | None = None) -> None:
    """Wrong for the first run with wrong values: the hint of the first mistake that gives the learner's result on
    every run, else `explain(first, runs)`'s (a hint from a property of the results, such as weights that do not
    sum to 1), else the first wrong entry (in the run's own words when it has a `detail`) and the rule it breaks
    (never the whole expected tensor), or band_hint instead of the rule when every run lies within its band. For
    `Items`, `what`, `rule`, `nan_hint` and `explain` hold one per item, and the verdict is on the first wrong item
    of the first wrong case."""
    first = next((r for r in runs if not r.right), None)
    if first is None:
        return
    if isinstance(first, Items):
        k = next(k for k, r in enumerate(first) if not r.right)
        return verdict([r[k] for r in runs], what=what[k], rule=rule[k], nan_hint=nan_hint[k],
                       explain=explain and explain[k])
    hint = known_mistake(runs) or (explain and explain(first, runs))
    if hint is not None:
        raise Wrong(_("{what} has the wrong values on {on}", what=what, on=first.on), hint)
    g, e = first.got.detach().to(torch.float64).cpu(), first.ref.detach().to(torch.float64).cpu()
    stray = ~torch.isfinite(g) & (g != e)  # NaN, or an inf where the right result has none (a masked -inf is fine)
    if stray.any():
        idx = [int(i) for i in stray.nonzero()[0]]
        raise Wrong(_("{what} contains {nan_if_torch_isnan_g_any} (first at index {idx}) on {on}",
                      what=what, nan_if_torch_isnan_g_any='NaN' if torch.isnan(g).any() else 'inf', idx=idx,
                      on=first.on), nan_hint)
    idx = tuple(int(i) for i in (~torch.isclose(g, e, atol=first.atol, rtol=first.rtol)).nonzero()[0])
    hint = band_hint if band_hint is not None and all(map(_in_band, runs)) else rule
    if first.detail is not None:
        raise Wrong(_("{what} has the wrong values on {on}: {detail_case_index}", what=what, on=first.on,
                      detail_case_index=first.detail(idx)), hint)
    want, have = e[idx].item(), g[idx].item()
    finite = math.isfinite(want) and math.isfinite(have)  # one may be a masked -inf the other lacks
    digits = math.floor(-math.log10(abs(have - want) / abs(want))) if want and finite else 0
    dtype = str(first.got.dtype).removeprefix("torch.")
    if digits < 3:
        close = ""
    elif first.rtol == 0 and first.atol == 0:  # an exact check: a result that moves numbers computes none
        close = _(" (the two agree to {digits} significant digits; the check is exact)", digits=digits)
    else:
        close = _(" (the two agree to {digits} significant digits; a {dtype} result is checked to about "
                  "{round_math_log10_first_r})", digits=digits, dtype=dtype,
                  round_math_log10_first_r=round(-math.log10(first.rtol or first.atol / abs(want))))
    if not idx:  # a single number
        raise Wrong(_("{what} has the wrong value on {on}: expected {show_pair_want_have}{close}", what=what,
                      on=first.on, show_pair_want_have=show_pair(want, have), close=close), hint)
    raise Wrong(_("{what} has the wrong values on {on}: at index {list_idx} expected {show_pair_want_have}{close}",
                  what=what, on=first.on, list_idx=list(idx), show_pair_want_have=show_pair(want, have),
                  close=close), hint)


GRAD_TAIL = N_("no .detach(), torch.no_grad(), .item(), float() or NumPy round trips")
GRAD_HINT = (N_("the layer is trained by backpropagation, so the result must depend on the inputs through tensor "
                "operations all the way: no .detach(), torch.no_grad(), .item(), float() or NumPy round trips"))


def grad_inputs(args: tuple, names: dict[int, str]) -> tuple[list, list]:
    """(leaves, inputs): fresh leaf copies of the arguments in `names` ({position: name}) that require grad, and
    the arguments to call with, in which those are non-leaf copies (so that an in-place change is reported as one)."""
    leaves = [a.detach().clone().requires_grad_(True) if i in names else a for i, a in enumerate(args)]
    return leaves, [t * 1 if i in names else t for i, t in enumerate(leaves)]


def observe_gradients(leaves: list, names: dict[int, str], reference) -> Gradients:
    """An observer for `call` (computed where the answer ran): the gradients of the answer's result, against the
    random weighting `compare_gradients` uses, with respect to the arguments named in `names` (the non-leaf
    copies of `leaves` that `grad_inputs` made; their gradients are the leaves'); None when the result carries
    no gradient, the error's text when backpropagating raises."""
    ref = reference(*grad_inputs(tuple(leaves), names)[1])
    return Gradients(list(names), randn(*ref.shape, seed=77, dtype=ref.dtype))


def compare_gradients(got, grads, leaves: list, names: dict[int, str], reference, *, what: str, on: str,
                      atol: float = 1e-8, rtol: float = 1e-6, hint: str = GRAD_HINT) -> None:
    """Wrong unless `grads` (what `observe_gradients` saw of `got`) equal the gradients of reference(*args) on
    fresh copies of the same arguments, against the same weighting, with respect to the leaves in `names`."""
    listed = ", ".join(names.values())
    if grads is None:
        raise Wrong(_("{what}'s result carries no gradient back to {listed} on {on} (the check backpropagates "
                      "through it)", what=what, listed=listed, on=on), hint)
    if isinstance(grads, str):
        raise Wrong(_("backpropagating through {what}'s result raised RuntimeError: {grads} on {on}",
                      what=what, grads=grads, on=on), hint)
    ref_leaves, ref_inputs = grad_inputs(tuple(leaves), names)
    ref = reference(*ref_inputs)
    weights = randn(*ref.shape, seed=77, dtype=ref.dtype)
    theirs = torch.autograd.grad(ref, [ref_leaves[i] for i in names], weights, allow_unused=True)
    for name, g, t in zip(names.values(), grads, theirs):
        if g is None or not torch.allclose(g.to(t.dtype), t, atol=atol, rtol=rtol):
            state = _("missing") if g is None else _("wrong")
            raise Wrong(_("the gradient of {what}'s result with respect to {name} is {state} on {on} (the check "
                          "backpropagates through it; the values themselves are right)",
                          what=what, name=name, state=state, on=on), hint)


def expect_gradients(fn, args: tuple, names: dict[int, str], reference, *, what: str, on: str, forbid=(),
                     explain=None, hint: str = GRAD_HINT) -> None:
    """Call fn(*args) with the arguments in `names` requiring grad, and compare its gradients (compare_gradients)."""
    leaves, inputs = grad_inputs(args, names)
    got, grads = call(fn, *inputs, what=what, on=on, forbid=forbid, explain=explain,
                      observe=observe_gradients(leaves, names, reference))
    compare_gradients(got, grads, leaves, names, reference, what=what, on=on, hint=hint)
