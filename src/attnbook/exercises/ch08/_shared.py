"""Helpers that several of chapter 8's checkers use (8.1 and 8.3, which are random): the statistical window
`within_window` and the integer-dtype test.

Statistical bounds. A count of successes in n independent trials of probability p is accepted when it lies within
t = L/3 + sqrt(L^2/9 + 2 L n p (1 - p)) of n p, with L = ln(2 / 2e-9). By Bernstein's inequality a right answer
falls outside one window with probability below 2e-9, also for small p where the normal approximation fails
(for large n p the window is about 6.4 standard deviations wide). A check tests at most 60 windows, so a right
answer, drawing its random numbers in any order, fails with probability below 1.2e-7. A mistake is recognised
when its own expected proportions fit the same windows and the right ones do not.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from ..observe import Drawn

FALSE_FAILURE = 2e-9  # the probability that a right count falls outside its window (see the module docstring)
_L = math.log(2 / FALSE_FAILURE)


def within_window(count: float, n: int, p: float) -> bool:
    """Whether `count` successes in `n` trials fit a binomial(n, p), by Bernstein's inequality."""
    if p <= 0 or p >= 1:  # an impossible (or certain) outcome: exactly
        return count == (n if p >= 1 else 0)
    variance = n * p * (1 - p)
    return abs(count - n * p) <= _L / 3 + math.sqrt(_L * _L / 9 + 2 * _L * variance) + 1e-9


def is_integer_tensor(t: Tensor) -> bool:
    return not (t.is_floating_point() or t.is_complex() or t.dtype == torch.bool)


def drawn_from(position: int, gen_seed: int) -> Drawn:
    """An observer for `call`: whether the generator at `position` (seeded with `gen_seed`) has been drawn from."""
    return Drawn(position, gen_seed)
