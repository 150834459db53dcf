"""What 12.1 and 12.2 share: reading the learner's result as one Python number."""
from __future__ import annotations

import math
import numbers

from torch import Tensor

from ..hints import describe
from ..registry import Wrong


def as_number(got, *, fn: str, on: str) -> float:
    """The learner's result as a float: a Python float (a NumPy float64 is one) or int; Wrong for anything else,
    saying what came back instead."""
    where = f" on {on}" if on else ""
    if got is None:
        raise Wrong(f"{fn} returned None{where}, expected a float", "did you forget the `return` statement?")
    if isinstance(got, bool):
        raise Wrong(f"{fn} returned the bool {got}{where}, expected a float",
                    "return the number itself, not a comparison")
    if isinstance(got, Tensor):
        raise Wrong(f"{fn} returned a tensor of shape {tuple(got.shape)} and dtype {got.dtype}{where}, expected a "
                    "Python float", "convert a one-element tensor with float(t) or t.item() before returning it")
    if isinstance(got, (int, float)):
        return float(got)
    if isinstance(got, numbers.Real) or hasattr(got, "__array__"):
        raise Wrong(f"{fn} returned {describe(got)}{where}, expected a Python float",
                    "convert it with float(...) before returning it")
    raise Wrong(f"{fn} returned {describe(got)}{where}, expected a float", "return one number")


def close(got: float, want: float, rel: float = 1e-6, abs_: float = 1e-12) -> bool:
    """Whether two results agree (NaN never does)."""
    return math.isfinite(got) and math.isclose(got, want, rel_tol=rel, abs_tol=abs_)
