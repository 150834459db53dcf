"""Graded exercises: `check("2.3", answer)` checks an answer, `summary(2)` shows a chapter's progress.

The machinery, one job per module: `registry` (what an exercise is, `Wrong`, the table of exercises), `results`
(`check`, `summary`, the session), `guard` (`call`: runs the learner's code and sees what it reaches),
`compare` (`expect_close` and the other comparisons), `hints` (common exceptions and message wording).
Each chapter's checkers live in their own module (`ch01`, `ch02`, ...) and register themselves on import; every
module named chNN in this package is imported here.
"""
import importlib
import pkgutil
import re

from .registry import REGISTRY
from .results import CheckResult, check, reset_session, summary

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__) if re.fullmatch(r"ch\d\d", m.name)):
    importlib.import_module(f"{__name__}.{_module}")  # importing registers the checkers

__all__ = ["check", "summary", "CheckResult", "REGISTRY", "reset_session"]
