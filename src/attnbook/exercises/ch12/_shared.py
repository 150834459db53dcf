"""What chapter 12's checkers share: reading the learner's result as one Python number (12.1, 12.2), and running
the answer on every case before naming a mistake (all three)."""
from __future__ import annotations

import math
import numbers

from torch import Tensor

from ..hints import describe
from ..registry import Wrong
from ...i18n import _


def as_number(got, *, fn: str, on: str) -> float:
    """The learner's result as a float: a Python float (a NumPy float64 is one) or int; Wrong for anything else,
    saying what came back instead."""
    where = _(" on {on}", on=on) if on else ""
    if got is None:
        raise Wrong(_("{fn} returned None{where}, expected a float",
                      fn=fn, where=where), _("did you forget the `return` statement?"))
    if isinstance(got, bool):
        raise Wrong(_("{fn} returned the bool {got}{where}, expected a float", fn=fn, got=got, where=where),
                    _("return the number itself, not a comparison"))
    if isinstance(got, Tensor):
        raise Wrong(_("{fn} returned a tensor of shape {tuple_got_shape} and dtype {dtype}{where}, expected a "
                      "Python float", fn=fn, tuple_got_shape=tuple(got.shape),
                      dtype=got.dtype,
                      where=where), _("convert a one-element tensor with float(t) or t.item() before returning it"))
    if isinstance(got, (int, float)):
        return float(got)
    if isinstance(got, numbers.Real) or hasattr(got, "__array__"):
        raise Wrong(_("{fn} returned {describe_got}{where}, expected a Python float",
                      fn=fn, describe_got=describe(got), where=where),
                    _("convert it with float(...) before returning it"))
    raise Wrong(_("{fn} returned {describe_got}{where}, expected a float",
                  fn=fn, describe_got=describe(got), where=where), _("return one number"))


def close(got: float, want: float, rel: float = 1e-6, abs_: float = 1e-12) -> bool:
    """Whether two results agree (NaN never does)."""
    return math.isfinite(got) and math.isclose(got, want, rel_tol=rel, abs_tol=abs_)


def judge(answer_on, inputs: list[tuple], right, mistakes: dict, same=close):
    """Run the answer on every input (`answer_on(i)` returns its result on inputs[i]) and find the first wrong
    result: None when every result is right, else (its index, the result, the hint of the first mistake of
    `mistakes` (hint -> function of the input) that gives every result, or None). A Wrong (a result of the wrong
    type) ends the run: it is raised, unless a wrong result came before it, which is reported instead with the
    evidence of the inputs before."""
    got = []
    for i in range(len(inputs)):
        try:
            got.append(answer_on(i))
        except Wrong:
            if any(not same(g, right(*args)) for g, args in zip(got, inputs)):
                break
            raise
    wrong = next((i for i, (g, args) in enumerate(zip(got, inputs)) if not same(g, right(*args))), None)
    if wrong is None:
        return None
    hint = next((h for h, f in mistakes.items() if all(same(g, f(*args)) for g, args in zip(got, inputs))), None)
    return wrong, got[wrong], hint
