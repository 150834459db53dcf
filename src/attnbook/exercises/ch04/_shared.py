"""Helpers that several of chapter 4's checkers use (4.1 to 4.3): float64 random inputs and the tolerances for a
result in the input's dtype (`compare.expect_input_dtype` checks that a result keeps it)."""
from __future__ import annotations

import functools

import torch
from torch import Tensor

from ..compare import randn

_ATOL64, _RTOL64 = 1e-8, 1e-7  # float64 inputs: tight enough to tell eps inside the sqrt from eps outside it


randn64 = functools.partial(randn, dtype=torch.float64)


def tolerance(x: Tensor) -> tuple[float, float]:
    """(atol, rtol) for a result in x's dtype."""
    return (_ATOL64, _RTOL64) if x.dtype == torch.float64 else (1e-5, 1e-4)

