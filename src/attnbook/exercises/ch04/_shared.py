"""Helpers that several of chapter 4's checkers use (4.1 to 4.3): float64 random inputs, the tolerances for a
result in the input's dtype, and the check that a result keeps the input's dtype."""
from __future__ import annotations

import functools

import torch
from torch import Tensor

from ..compare import randn
from ..registry import Wrong
from ...i18n import _

_ATOL64, _RTOL64 = 1e-8, 1e-7  # float64 inputs: tight enough to tell eps inside the sqrt from eps outside it


randn64 = functools.partial(randn, dtype=torch.float64)


def tolerance(x: Tensor) -> tuple[float, float]:
    """(atol, rtol) for a result in x's dtype."""
    return (_ATOL64, _RTOL64) if x.dtype == torch.float64 else (1e-5, 1e-4)


def expect_dtype(got, x: Tensor, what: str, on: str) -> None:
    """Wrong if `got` is a floating-point tensor of the right shape but another dtype than the input `x`."""
    if (isinstance(got, Tensor) and got.is_floating_point() and tuple(got.shape) == tuple(x.shape)
            and got.dtype != x.dtype):
        name = str(x.dtype).removeprefix("torch.")
        raise Wrong(_("{what} has dtype {dtype} on {on}, expected {dtype2} like the input",
                      what=what, dtype=got.dtype, on=on, dtype2=x.dtype),
                    _("return the dtype of x (here {name}): no .float(), .double() or .half() casts, and no "
                      "constants of another dtype", name=name))
