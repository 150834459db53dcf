"""The mutant catalogue: learner-style answers to every exercise, as data.

Each `tests/mutants/chNN.py` registers answers to chapter NN's exercises, one table per exercise (`table`, below):
most rows are the exercise's learner template with one mistake switched on; an answer of several statements that
no template covers is a function of its own:

    @wrong("6.3", hint="EOS")          # a plausible mistake: must fail, and its message must contain "EOS"
    def greedy_decode(model, src, ...): ...

    @right("6.3")                      # a right answer in another style: must pass
    def greedy_decode(model, src, ...): ...

    value("2.1", tensor, right=False, hint="transposed")   # by-hand (value) answers

`hint` is a piece of the failure message (case-insensitive) that the wrong answer must produce: the name of the
mistake for a hinted mistake, or the rule it breaks ("without attnbook", "dtype", ...). Leave it out only when
no specific message is promised. `tests/test_remote.py` runs every entry (graded, and in Chinese) and records
its verdict; `tools/mutant_report.py --recorded` prints `K/N wrong answers rejected, R/R right answers accepted`
per exercise and in total from those records (CI fails below 100%), and `tools/mutant_report.py` alone runs the
catalogue afresh.
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


class _Right:
    def __repr__(self) -> str:
        return "RIGHT"


RIGHT = _Right()  # a table row's verdict: the answer must pass
WRONG = None  # a table row's verdict: the answer must fail, with no particular message promised


def table(exercise_id: str, rows) -> None:
    """Register one exercise's answers, a row each: (name, verdict, answer). `verdict` is RIGHT (the answer must
    pass), WRONG (it must fail), or a piece of the message it must fail with (its hint, case-insensitive):

        table("4.1", [
            ("torch.var's default correction (divides by d - 1)", "unbiased variance", ln(var="unbiased")),
            ("LayerNorm written out in float64, cast back", RIGHT, ln(detour=torch.float64)),
        ])

    An answer is a function (usually made by the exercise's learner template, one keyword per mistake), a lambda
    or a value (a by-hand matrix or number). Answers of several statements stay `@wrong`/`@right` functions."""
    for row in rows:
        if not (isinstance(row, tuple) and len(row) == 3 and isinstance(row[0], str)):
            raise TypeError(f"{exercise_id}: a table row is (name, verdict, answer), got {row!r:.80}")
        name, verdict, answer = row
        if verdict is RIGHT:
            _register(exercise_id, answer, True, None, name)
        elif verdict is None or isinstance(verdict, str):
            _register(exercise_id, answer, False, verdict, name)
        else:
            raise TypeError(f"{exercise_id} {name!r}: the verdict is RIGHT, WRONG or a hint (str), got {verdict!r}")


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
    """Import every chNN module of the catalogue (or only chapter `chapter`'s) and return their entries, with the
    entries `generated` makes for every exercise of those chapters."""
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("ch") and (chapter is None or info.name == f"ch{int(chapter):02d}"):
            importlib.import_module(f"{__name__}.{info.name}")  # a test may have imported it first (its template)
            if int(info.name[2:]) not in _GENERATED_FOR:
                _GENERATED_FOR.add(int(info.name[2:]))
                generated(int(info.name[2:]))
    return CATALOGUE


_GENERATED_FOR: set[int] = set()  # the chapters whose generated entries are in CATALOGUE


# ---------------------------------------------------------------------------------------------------------------
# Entries made for every exercise: the package's own solution held where no name reaches it, and answers that
# remember results instead of computing them (issue 23, classes 1 and 2)
# ---------------------------------------------------------------------------------------------------------------

# Exercises whose inputs are plain numbers or lists: a cache keyed by the values of all the arguments is a right
# answer (the same arguments always have the same answer), so `memoised` must pass them.
PLAIN_INPUTS = {"3.3", "4.4", "5.1", "5.4", "6.1", "9.2", "10.1", "12.1", "12.3"}
# What the package's own solution gets as a message, in every exercise
OWN_SOLUTION = "package's own"


class Holder:
    """A callable object around a function: `Holder(f)(*args)` is `f(*args)`, with `f` kept only in the object."""

    def __init__(self, f):
        self.f = f

    def __call__(self, *args, **kwargs):
        return self.f(*args, **kwargs)


_HELD: dict[str, object] = {}  # path -> the package's object, read by name from a module-level dict


def held_in_list(f):
    """An answer that calls `f` kept in a list in its closure: box[0](...)."""
    box = [f]

    def answer(*args, **kwargs):
        return box[0](*args, **kwargs)
    return answer


def held_in_dict(path: str):
    """An answer that calls the object at `path` through a module-level dict: _HELD[path](...)."""
    def answer(*args, **kwargs):
        return _HELD[path](*args, **kwargs)
    return answer


def shape_key(x):
    """What a cache keyed on the look of the inputs sees: shapes and dtypes of tensors, not their values; the
    values of plain numbers and strings; the names of functions and classes; the type of anything else."""
    import torch

    if isinstance(x, torch.Tensor):
        return ("tensor", tuple(x.shape), str(x.dtype))
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, tuple(shape_key(v) for v in x))
    if isinstance(x, dict):
        return ("dict", tuple(sorted((repr(k), shape_key(v)) for k, v in x.items())))
    if x is None or isinstance(x, (bool, int, float, str, complex)):
        return repr(x)
    return getattr(x, "__qualname__", type(x).__qualname__)


def memoised(answer):
    """A right answer behind a cache keyed by `shape_key` of its arguments: it computes the first input of each
    shape and returns that result again for every later input of the same shapes (and plain values)."""
    import inspect

    cache: dict = {}

    def remembering(*args, **kwargs):
        key = shape_key((args, kwargs))
        if key not in cache:
            cache[key] = answer(*args, **kwargs)
        return cache[key]

    try:
        remembering.__signature__ = inspect.signature(answer)
    except (TypeError, ValueError):
        pass
    remembering.__name__ = getattr(answer, "__name__", "answer")
    remembering.cache = cache  # emptied by `fresh` before each check, as a new kernel would start
    return remembering


def fresh(answer):
    """`answer` as a new kernel would hold it: a `memoised` answer's cache emptied (a learner's check or a
    graded submission starts with nothing remembered)."""
    cache = getattr(answer, "cache", None)
    if isinstance(cache, dict):
        cache.clear()
    return answer


def generated(chapter: int) -> None:
    """Add, for every function exercise of `chapter`: each of its references held in a callable object, in a
    closure's list and in a module-level dict (each must be refused as the package's own solution), and its first
    right answer behind `memoised` (refused, unless its inputs are plain values: PLAIN_INPUTS)."""
    from attnbook.exercises import REGISTRY
    from attnbook.exercises.reach import resolve_or_none

    for exercise_id, ex in sorted(REGISTRY.items()):
        if ex.chapter != str(chapter) or ex.answer_kind != "function":
            continue
        for path in ex.references:
            obj = resolve_or_none(path)
            if obj is None:
                continue
            _HELD[path] = obj
            _register(exercise_id, Holder(obj), False, OWN_SOLUTION, f"{path} in a callable object (generated)")
            _register(exercise_id, held_in_list(obj), False, OWN_SOLUTION, f"{path} kept in a list (generated)")
            _register(exercise_id, held_in_dict(path), False, OWN_SOLUTION, f"{path} kept in a dict (generated)")
        first_right = next((m for m in CATALOGUE if m.exercise_id == exercise_id and m.right), None)
        if first_right is not None:
            plain = exercise_id in PLAIN_INPUTS
            _register(exercise_id, memoised(first_right.answer), plain, None,
                      f"{first_right.name}, remembering results by input shape (generated)")


def run_in(mutant: Mutant, language: str):
    """The CheckResult of one entry with feedback in `language` (fresh session)."""
    from attnbook import get_language, set_language
    from attnbook.exercises import check, reset_session

    before = get_language()
    set_language(language)
    try:
        reset_session()
        return check(mutant.exercise_id, fresh(mutant.answer))
    finally:
        reset_session()
        set_language(before)


def run(mutant: Mutant):
    """Check one entry as a new learner would (fresh session); returns (ok, CheckResult)."""
    from attnbook.exercises import check, reset_session

    reset_session()
    result = check(mutant.exercise_id, fresh(mutant.answer))
    reset_session()
    if mutant.right:
        return result.passed, result
    rejected = result.status == "failed"
    if mutant.hint is not None:
        rejected = rejected and mutant.hint.lower() in result.message.lower()
    return rejected, result
