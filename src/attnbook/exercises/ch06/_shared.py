"""Helpers that several of chapter 6's checkers use: a case with the learner's result and the known mistakes
(`Case`), the type and shape check of a mask, the run over the cases and the judge that names a mistake only
when it explains every case of its kind (6.1, 6.2 and 6.4), the comparison of two results (6.3 too), and the
hints shared by 6.1 and 6.2."""
from __future__ import annotations

import torch
from torch import Tensor

from ..hints import describe
from ..registry import Wrong
from ...i18n import N_, _

ADDITIVE_HINT = (
    N_("that is the additive form (0 where allowed, -inf where blocked) that nn.Transformer's "
       "generate_square_subsequent_mask returns; this book's masks are boolean with True = may attend")
)
ADDITIVE_OTHER = (N_("a float mask of 0 and -inf is an additive mask (0 where allowed, -inf where blocked); this "
                     "book's masks are boolean, True where attention is allowed"))
STRICT = (N_("a position may attend to itself: keep the diagonal (query i may see key j = i; tril's default "
             "diagonal=0, not diagonal=-1)"))
ONE_AHEAD = N_("off by one: query i may see the keys j <= i, not also key i + 1 (tril's diagonal is 0, not 1)")
UPPER = (N_("you kept the upper triangle: row i is query i, and it may attend to the keys j <= i, which lie on and "
            "below the diagonal; use tril, not triu"))


class Case:
    """One case a checker ran: its description, the learner's result, the right one, and {key: (hint, wrong
    result)} for the known mistakes; `kind` groups the cases a mistake is about (6.4: boolean or additive)."""

    def __init__(self, on: str, got, ref: Tensor, mistakes: dict[str, tuple[str, Tensor]], kind: str = ""):
        self.on, self.got, self.ref, self.mistakes, self.kind = on, got, ref, mistakes, kind

    def right(self) -> bool:
        return same_mask(self.got, self.ref)


def same_mask(got, want: Tensor) -> bool:
    return (isinstance(got, Tensor) and tuple(got.shape) == tuple(want.shape)
            and torch.equal(got.detach().cpu().to(want.dtype), want))


def _explained(cases: list[Case], first: Case) -> str | None:
    """The hint of the first known mistake (in `first`'s order) that gives the learner's result on EVERY case of
    `first`'s kind, or None: a mistake that explains only some of them is not named."""
    for key, (hint, _) in first.mistakes.items():
        if all(key in c.mistakes and same_mask(c.got, c.mistakes[key][1]) for c in cases if c.kind == first.kind):
            return hint
    return None


def mask_type(got, expected: Tensor, *, what: str, on: str, shape_hints: dict[tuple, str] | None = None,
               shape_mistakes: dict[str, tuple[str, Tensor]] | None = None, shape_hint: str | None = None) -> None:
    """Wrong unless `got` is a boolean tensor of expected's shape (a shape that only a known mistake gives gets
    its hint; any other wrong shape the general `shape_hint`)."""
    if got is None:
        raise Wrong(_("{what} is None on {on}", what=what, on=on), _("did you forget a `return` statement?"))
    if not isinstance(got, Tensor):
        raise Wrong(_("{what} is {describe_got} on {on}, expected a boolean torch.Tensor",
                      what=what, describe_got=describe(got), on=on))
    shape, want = tuple(got.shape), tuple(expected.shape)
    if shape != want:
        hint = (shape_hints or {}).get(shape)
        if hint is None:
            for mistake_hint, wrong in (shape_mistakes or {}).values():
                if tuple(wrong.shape) == shape:
                    hint = mistake_hint
                    break
            else:
                hint = shape_hint
        raise Wrong(_("{what} has shape {shape} on {on}, expected {want}",
                      what=what, shape=shape, on=on, want=want), hint)
    if got.dtype != torch.bool:
        if got.is_floating_point() and bool(torch.isinf(got).any()) and bool((got[~torch.isinf(got)] == 0).all()):
            raise Wrong(_("{what} has dtype {dtype} on {on}, expected torch.bool",
                          what=what, dtype=got.dtype, on=on),
                        ADDITIVE_HINT if torch.equal(got == 0, expected) else ADDITIVE_OTHER)
        zero_one = not got.is_complex() and bool(((got == 0) | (got == 1)).all())
        hint = (_("a mask holds True/False, not numbers: build it with a comparison, or call .bool() on a 0/1 tensor "
                  "(torch.ones(n, n, dtype=torch.bool) starts you off boolean)") if zero_one else
                _("a mask holds True/False: build it with comparisons and &, |, ~"))
        raise Wrong(_("{what} has dtype {dtype} on {on}, expected torch.bool (True = may attend)",
                      what=what, dtype=got.dtype, on=on), hint)


def _judge(cases: list[Case], *, what: str, detail) -> None:
    """Wrong for the first case whose result is not right: a known mistake's hint when that mistake explains
    every case of its kind, else the first wrong entry and the rule it breaks (`detail(case, index)`)."""
    for case in cases:
        if case.right():
            continue
        hint = _explained(cases, case)
        if hint is not None:
            raise Wrong(_("{what} has the wrong values on {on}", what=what, on=case.on), hint)
        got = case.got.detach().cpu()
        index = tuple(int(i) for i in (got != case.ref).nonzero()[0])
        raise Wrong(_("{what} has the wrong values on {on}: {detail_case_index}",
                      what=what, on=case.on, detail_case_index=detail(case, index)))


def run_masks(inputs, run, *, what: str, detail) -> None:
    """Run `run(input) -> Case` for every input; a result of the wrong type or shape is reported at once,
    unless an earlier case already had wrong values (then that one is reported, with what the cases so far
    show). Then `_judge` the values."""
    cases: list[Case] = []
    for item in inputs:
        try:
            case = run(item)
        except Wrong:
            if any(not c.right() for c in cases):
                break
            raise
        cases.append(case)
    _judge(cases, what=what, detail=detail)


def tf(v: bool) -> str:
    return "True" if v else "False"
