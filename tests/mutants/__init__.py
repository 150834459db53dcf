"""The mutant catalogue: learner-style answers to every exercise, as data.

Each `tests/mutants/chNN.py` registers answers to chapter NN's exercises:

    @wrong("6.3", hint="EOS")          # a plausible mistake: must fail, and its message must contain "EOS"
    def greedy_decode(model, src, ...): ...

    @right("6.3")                      # a right answer in another style: must pass
    def greedy_decode(model, src, ...): ...

    value("2.1", tensor, right=False, hint="transposed")   # by-hand (value) answers

`hint` is a piece of the failure message (case-insensitive) that the wrong answer must produce: the name of the
mistake for a hinted mistake, or the rule it breaks ("without attnbook", "dtype", ...). Leave it out only when
no specific message is promised. `tests/test_mutants.py` runs every entry and `tools/mutant_report.py` prints
`K/N wrong answers rejected, R/R right answers accepted` per exercise and in total (CI fails below 100%).
"""
from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys
import types
from pathlib import Path
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Mutant:
    exercise_id: str
    name: str
    answer: object = field(repr=False)
    right: bool
    hint: str | None = None  # a piece of the expected failure message (wrong answers only)


CATALOGUE: list[Mutant] = []


def _register(exercise_id: str, answer, right: bool, hint: str | None, name: str | None) -> None:
    name = name or getattr(answer, "__name__", None) or f"{'right' if right else 'wrong'} value"
    if right and hint:
        raise ValueError("a right answer has no hint")
    CATALOGUE.append(Mutant(exercise_id, name, answer, right, hint))


def wrong(exercise_id: str, hint: str | None = None, name: str | None = None):
    """Register the decorated function as a wrong answer to `exercise_id` (its message must contain `hint`)."""
    def register(fn):
        _register(exercise_id, fn, False, hint, name or (fn.__doc__ or fn.__name__).strip().splitlines()[0])
        return fn
    return register


def right(exercise_id: str, name: str | None = None):
    """Register the decorated function as a right answer to `exercise_id` (it must pass)."""
    def register(fn):
        _register(exercise_id, fn, True, None, name or (fn.__doc__ or fn.__name__).strip().splitlines()[0])
        return fn
    return register


def value(exercise_id: str, answer, *, right: bool, hint: str | None = None, name: str | None = None) -> None:
    """Register a value answer (a by-hand matrix or number, or anything passed to check as it is)."""
    _register(exercise_id, answer, right, hint, name)


def fresh_import(module, name: str):
    """A second, separate import of the package module's .py file (not the module in sys.modules): the shape of
    an answer that copies the package's code into a module of its own."""
    spec = importlib.util.spec_from_file_location(f"{module.__package__}._copy_{name}", Path(module.__file__))
    copy = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = copy  # dataclasses look their module up in sys.modules while it executes
    spec.loader.exec_module(copy)
    return copy


def function_copy(f, name: str):
    """A new function object with `f`'s code under another name: the package's solution passed in disguise."""
    return types.FunctionType(f.__code__, f.__globals__, name, f.__defaults__, f.__closure__)


def load(chapter: str | None = None) -> list[Mutant]:
    """Import every chNN module of the catalogue (or only chapter `chapter`'s) and return their entries."""
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("ch") and (chapter is None or info.name == f"ch{int(chapter):02d}"):
            importlib.import_module(f"{__name__}.{info.name}")
    return CATALOGUE


def run_in(mutant: Mutant, language: str):
    """The CheckResult of one entry with feedback in `language` (fresh session)."""
    from attnbook import get_language, set_language
    from attnbook.exercises import check, reset_session

    before = get_language()
    set_language(language)
    try:
        reset_session()
        return check(mutant.exercise_id, mutant.answer)
    finally:
        reset_session()
        set_language(before)


def run(mutant: Mutant):
    """Check one entry as a new learner would (fresh session); returns (ok, CheckResult)."""
    from attnbook.exercises import check, reset_session

    reset_session()
    result = check(mutant.exercise_id, mutant.answer)
    reset_session()
    if mutant.right:
        return result.passed, result
    rejected = result.status == "failed"
    if mutant.hint is not None:
        rejected = rejected and mutant.hint.lower() in result.message.lower()
    return rejected, result
