"""Graded exercises: `check("2.3", answer)` checks an answer, `summary(2)` shows a chapter's progress.

Each chapter's checkers live in their own module (`ch01`, `ch02`, ...) and register themselves on import.
"""
from . import ch01, ch02  # noqa: F401  (importing registers the checkers)
from ._core import REGISTRY, CheckResult, check, reset_session, summary

__all__ = ["check", "summary", "CheckResult", "REGISTRY", "reset_session"]
