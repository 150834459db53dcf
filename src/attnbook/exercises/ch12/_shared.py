"""What 12.1 and 12.2 share: reading the learner's result as one Python number."""
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
