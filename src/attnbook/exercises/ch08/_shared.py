"""Helpers that several checkers use: for 8.1 and 8.3, which are random, the statistical window `within_window` and
the integer-dtype test; for 8.1, 8.3, 8.4 and 10.3, `library_paths`, the public names of a library's ready-made
functions that an answer can reach (chapter 10 imports it from here).

Statistical bounds. A count of successes in n independent trials of probability p is accepted when it lies within
t = L/3 + sqrt(L^2/9 + 2 L n p (1 - p)) of n p, with L = ln(2 / 2e-9). By Bernstein's inequality a right answer
falls outside one window with probability below 2e-9, also for small p where the normal approximation fails
(for large n p the window is about 6.4 standard deviations wide). A check runs twice (the second time on new values,
results.check) and tests 48 windows per run in 8.1 and 109 in 8.3 (9 settings of 2 rows and 6 tokens, and the share of
two equal largest logits at a tiny temperature), so a right answer, drawing its random numbers in any order, fails
with probability below 2 * 109 * 2e-9 = 4.4e-7 by this bound (8.3's other new case, logits far below 0, cannot fail
a right answer: a token outside the top k has probability exactly 0);
the exact rates, far smaller, and the power against each wrong class of the catalogue are computed from the same
windows with scipy.stats in tests/test_exercises_ch08.py. A mistake is recognised when its own expected proportions
fit the same windows and the right ones do not.
"""
from __future__ import annotations

import importlib
import math
import sys

import torch
from torch import Tensor

from ..registry import Wrong
from ...i18n import _

FALSE_FAILURE = 2e-9  # the probability that a right count falls outside its window (see the module docstring)
_L = math.log(2 / FALSE_FAILURE)


def window(n: int, p: float) -> tuple[float, float]:
    """The counts of successes in `n` trials of probability `p` that `within_window` accepts: [low, high]."""
    if p <= 0 or p >= 1:  # an impossible (or certain) outcome: exactly
        return (float(n), float(n)) if p >= 1 else (0.0, 0.0)
    t = _L / 3 + math.sqrt(_L * _L / 9 + 2 * _L * n * p * (1 - p)) + 1e-9
    return n * p - t, n * p + t


def within_window(count: float, n: int, p: float) -> bool:
    """Whether `count` successes in `n` trials fit a binomial(n, p), by Bernstein's inequality."""
    low, high = window(n, p)
    return low <= count <= high


def is_integer_tensor(t: Tensor) -> bool:
    return not (t.is_floating_point() or t.is_complex() or t.dtype == torch.bool)


def expect_same_draws(again, is_first, seed: int, global_state: tuple[str, str], kept: tuple[str, str]) -> None:
    """Wrong unless the same generator seed gives the first result again whatever the global generators: `again(s)`
    calls the answer as the first time with the global generators seeded `s` (the first call's: 0), `is_first`
    tells its result. When a call with them seeded 1 differs, a third call as the first tells the cause: the first
    result back only if the global generators' state explains it (`global_state`: the message, with `seed`, and
    the hint), else the answer keeps draws or results from one call to the next (`kept`)."""
    if not is_first(again(1)):
        said, hint = global_state if is_first(again(0)) else kept
        raise Wrong(_(said, seed=seed), _(hint))


def code_names(fn) -> set[str]:
    """Every global and attribute name the learner's function (and functions nested in it) refers to."""
    names: set[str] = set()
    todo = [getattr(fn, "__code__", None)]
    while todo:
        code = todo.pop()
        if code is None:
            continue
        names.update(code.co_names)
        todo += [c for c in code.co_consts if hasattr(c, "co_names")]
    return names


def library_paths(fn, table) -> list[str]:
    """The public dotted paths of `table` ((path, module that defines the object, its name) triples) that the
    learner's function `fn` can reach: the module is loaded already, or `fn`'s code names the object (its module is
    imported here first, as the answer would). A path resolved by name is refused under that name, so the message
    names the function the learner called; importing a library that nothing loaded (transformers takes seconds)
    is left out."""
    names, out = code_names(fn), []
    for path, module, name in table:
        if module not in sys.modules:
            if name not in names:
                continue
            try:
                importlib.import_module(module)
            except Exception:  # noqa: BLE001 - not importable here, so not callable by the learner either
                continue
        out.append(path)
    return out
