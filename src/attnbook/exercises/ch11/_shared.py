"""Helpers that chapter 11's checkers share: float64 random inputs, the tolerance for a result in the input's
dtype, and the check that a result keeps the input's dtype."""
from __future__ import annotations

import functools

import torch
from torch import Tensor

from ..compare import randn
from ..registry import Wrong
from ...i18n import _

F64 = torch.float64
# A float64 result is checked to 1e-10: float64 arithmetic lands within about 1e-15, while any step taken in float32
# (a .float() detour, a float32 constant) leaves errors near 1e-7, so the two never meet at the boundary.
ATOL64, RTOL64 = 1e-10, 1e-10
ATOL32, RTOL32 = 1e-5, 1e-4

randn64 = functools.partial(randn, dtype=F64)


def tolerance(x: Tensor) -> tuple[float, float]:
    """(atol, rtol) for a result in x's dtype."""
    return (ATOL64, RTOL64) if x.dtype == F64 else (ATOL32, RTOL32)


def expect_dtype(got, x: Tensor, what: str, on: str) -> None:
    """Wrong if `got` is a floating-point tensor whose dtype is not the input x's (its shape is checked later)."""
    if isinstance(got, Tensor) and got.is_floating_point() and got.dtype != x.dtype:
        name = str(x.dtype).removeprefix("torch.")
        raise Wrong(_("{what} has dtype {dtype} on {on}, expected {dtype2} like the input",
                      what=what, dtype=got.dtype, on=on, dtype2=x.dtype),
                    _("return the dtype of x (here {name}): no .float(), .double() or .half() casts, and no "
                      "constants of another dtype", name=name))
