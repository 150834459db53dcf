"""The exercise system: a registry of checkers, `check`, `summary`, and helpers that checkers share.

A checker is a function `checker(answer) -> str` registered with `@exercise("2.2", "title")`. It returns a
short success message, or raises `Wrong(message, hint)` when the answer is wrong, or `NotAttempted` when
the answer is still the stub. `check` turns every outcome, including bugs and crashes inside the learner's
code, into a `CheckResult`; it never raises into the notebook.
"""
from __future__ import annotations

import html
import math
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass

import torch
from torch import Tensor

METADATA_KEY = "attnbook"  # output metadata key under which grading tools find {"check": {...}} or {"summary": {...}}
DEFAULT_TIME_LIMIT_S = 10.0

PASSED, FAILED, NOT_ATTEMPTED = "passed", "failed", "not attempted"
_ICONS = {PASSED: "✓", FAILED: "✗", NOT_ATTEMPTED: "○"}
_LABELS = {PASSED: "passed", FAILED: "failed", NOT_ATTEMPTED: "not attempted yet"}
_COLOURS = {PASSED: "#1a7f37", FAILED: "#cf222e", NOT_ATTEMPTED: "#6e7781"}


class Wrong(Exception):
    """Raised by a checker: the answer is wrong. `message` says what, `hint` the likely mistake."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message, self.hint = message, hint


class NotAttempted(Exception):
    """Raised by a checker: the answer is still the stub (None, or code that raises NotImplementedError)."""


class _TimeUp(BaseException):
    """Raised inside the learner's code by the alarm in `call`; a BaseException so `except Exception` misses it."""


@dataclass(frozen=True)
class CheckResult:
    """What `check` returns: shown as one line in a notebook, with a JSON form for grading tools."""

    exercise_id: str
    status: str  # "passed", "failed" or "not attempted"
    points: float
    max_points: float
    message: str

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    def to_dict(self) -> dict:
        """The machine-readable form, also carried in the notebook output's metadata under METADATA_KEY."""
        return {**asdict(self), "passed": self.passed}

    def __str__(self) -> str:
        score = f"{_fmt(self.points)}/{_fmt(self.max_points)}"
        return f"{_ICONS[self.status]} Exercise {self.exercise_id} {_LABELS[self.status]} [{score}]: {self.message}"

    __repr__ = __str__

    def _repr_html_(self) -> str:
        colour = _COLOURS[self.status]
        return (
            f'<div class="attnbook-check attnbook-{self.status.replace(" ", "-")}" '
            f'style="border-left:4px solid {colour};padding:2px 8px;">'
            f'<b style="color:{colour}">{_ICONS[self.status]} Exercise {html.escape(self.exercise_id)} '
            f"{_LABELS[self.status]}</b> [{_fmt(self.points)}/{_fmt(self.max_points)}]: {html.escape(self.message)}</div>"
        )

    def _repr_mimebundle_(self, include=None, exclude=None) -> tuple[dict, dict]:
        data = {"text/plain": str(self), "text/html": self._repr_html_()}
        return data, {METADATA_KEY: {"check": self.to_dict()}}


@dataclass(frozen=True)
class Exercise:
    """A registered exercise: id like "2.3", a title, its points, its checker, and whether the answer is a
    function or a value (a matrix, a number)."""

    exercise_id: str
    title: str
    points: float
    checker: Callable[[object], str]
    answer_kind: str = "function"

    @property
    def chapter(self) -> str:
        return self.exercise_id.split(".")[0]


REGISTRY: dict[str, Exercise] = {}
_SESSION: dict[str, CheckResult] = {}


def exercise(exercise_id: str, title: str, points: float = 1.0, answer_kind: str = "function"):
    """Decorator that registers `checker` for `exercise_id` (e.g. "2.3"); answer_kind is "function" or "value"."""
    if answer_kind not in ("function", "value"):
        raise ValueError(f"answer_kind must be 'function' or 'value', got {answer_kind!r}")

    def register(checker: Callable[[object], str]) -> Callable[[object], str]:
        if exercise_id in REGISTRY:
            raise ValueError(f"exercise {exercise_id} is registered twice")
        REGISTRY[exercise_id] = Exercise(exercise_id, title, float(points), checker, answer_kind)
        return checker

    return register


def check(exercise_id: str, answer) -> CheckResult:
    """Check `answer` for exercise `exercise_id` and return a CheckResult. Never raises."""
    exercise_id = str(exercise_id)
    ex = REGISTRY.get(exercise_id)
    if ex is None:
        known = ", ".join(sorted(REGISTRY, key=_id_key)) or "none"
        return CheckResult(exercise_id, FAILED, 0.0, 0.0, f"there is no exercise {exercise_id!r}; known: {known}")
    if answer is None:
        result = _result(ex, NOT_ATTEMPTED, "nothing to check yet: fill in your answer above, run it, then this cell")
    else:
        try:
            message = ex.checker(answer)
            result = _result(ex, PASSED, message or "all tests passed")
        except NotAttempted as e:
            result = _result(ex, NOT_ATTEMPTED, str(e) or "your code still raises NotImplementedError: replace the stub")
        except Wrong as e:
            result = _result(ex, FAILED, e.message + (f" Hint: {e.hint}" if e.hint else ""))
        except (Exception, _TimeUp) as e:  # a checker must never crash the notebook
            result = _result(ex, FAILED, f"could not check your answer ({type(e).__name__}: {e})")
    _SESSION[exercise_id] = result
    return result


def _result(ex: Exercise, status: str, message: str) -> CheckResult:
    return CheckResult(ex.exercise_id, status, ex.points if status == PASSED else 0.0, ex.points, message)


class Summary:
    """A chapter's exercises and the latest result of each in this session; renders as a table."""

    def __init__(self, chapter: str, rows: list[tuple[Exercise, CheckResult | None]]):
        self.chapter, self.rows = chapter, rows
        self.points = sum(r.points for _, r in rows if r is not None)
        self.max_points = sum(ex.points for ex, _ in rows)

    def _status(self, result: CheckResult | None) -> str:
        return result.status if result is not None else "not checked yet"

    def __str__(self) -> str:
        lines = [f"Chapter {self.chapter}: {_fmt(self.points)}/{_fmt(self.max_points)} points"]
        for ex, r in self.rows:
            icon = _ICONS.get(self._status(r), "·")
            lines.append(f"  {icon} {ex.exercise_id} {ex.title}: {self._status(r)}")
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        body = "".join(
            f"<tr><td>{ex.exercise_id}</td><td>{html.escape(ex.title)}</td>"
            f'<td style="color:{_COLOURS.get(self._status(r), "#6e7781")}">'
            f"{_ICONS.get(self._status(r), '·')} {self._status(r)}</td>"
            f"<td>{_fmt(r.points if r else 0)}/{_fmt(ex.points)}</td></tr>"
            for ex, r in self.rows
        )
        return (
            f"<table class='attnbook-summary'><caption>Chapter {self.chapter}: "
            f"{_fmt(self.points)}/{_fmt(self.max_points)} points</caption>"
            f"<tr><th>exercise</th><th>title</th><th>status</th><th>points</th></tr>{body}</table>"
        )

    def to_dict(self) -> dict:
        return {
            "chapter": self.chapter,
            "points": self.points,
            "max_points": self.max_points,
            "exercises": [
                {"exercise_id": ex.exercise_id, "title": ex.title, "status": self._status(r),
                 "points": r.points if r else 0.0, "max_points": ex.points}
                for ex, r in self.rows
            ],
        }

    def _repr_mimebundle_(self, include=None, exclude=None) -> tuple[dict, dict]:
        data = {"text/plain": str(self), "text/html": self._repr_html_()}
        return data, {METADATA_KEY: {"summary": self.to_dict()}}


def summary(chapter) -> Summary:
    """Progress through chapter `chapter`'s exercises (e.g. summary(2)) in this session."""
    chapter = str(chapter)
    exercises = sorted((ex for ex in REGISTRY.values() if ex.chapter == chapter), key=lambda e: _id_key(e.exercise_id))
    if not exercises:
        chapters = sorted({ex.chapter for ex in REGISTRY.values()}, key=int)
        raise ValueError(f"chapter={chapter!r} has no exercises; chapters with exercises: {', '.join(chapters)}")
    return Summary(chapter, [(ex, _SESSION.get(ex.exercise_id)) for ex in exercises])


def reset_session() -> None:
    """Forget every result recorded by `check` in this session."""
    _SESSION.clear()


# ---------------------------------------------------------------------------------------------------------
# Helpers for checkers
# ---------------------------------------------------------------------------------------------------------


def call(fn, *args, what: str = "your function", on: str = "", time_limit_s: float = DEFAULT_TIME_LIMIT_S, **kwargs):
    """Call the learner's `fn(*args, **kwargs)` and turn every way it can go wrong into Wrong/NotAttempted.

    `on` describes the input in the learner's terms ("q of shape (2, 3, 4)"). Tensor arguments are checked
    for in-place changes; code slower than `time_limit_s` is stopped (where the OS allows) and reported.
    """
    if not callable(fn):
        raise Wrong(f"expected a function, got {describe(fn)}", "pass the function itself, without calling it")
    where = f" on {on}" if on else ""
    before = {i: a.detach().clone() for i, a in enumerate(args) if isinstance(a, Tensor)}
    before.update({k: v.detach().clone() for k, v in kwargs.items() if isinstance(v, Tensor)})
    start = time.perf_counter()
    try:
        with _time_limit(time_limit_s):
            out = fn(*args, **kwargs)
    except NotImplementedError:
        raise NotAttempted("your code still raises NotImplementedError: replace the stub with your solution") from None
    except _TimeUp:
        raise Wrong(f"{what} took longer than {time_limit_s:g} s{where} and was stopped",
                    "look for a Python loop over every element; use tensor operations instead") from None
    except Exception as e:
        raise Wrong(f"{what} raised {type(e).__name__}{where}: {e}") from None
    elapsed = time.perf_counter() - start
    if elapsed > time_limit_s:
        raise Wrong(f"{what} took {elapsed:.1f} s{where} (limit {time_limit_s:g} s)",
                    "look for a Python loop over every element; use tensor operations instead")
    for k, old in before.items():
        new = args[k] if isinstance(k, int) else kwargs[k]
        if new.shape != old.shape or not torch.equal(new.detach(), old):
            name = f"argument {k + 1}" if isinstance(k, int) else f"`{k}`"
            raise Wrong(f"{what} changed its input ({name}) in place{where}",
                        "use out-of-place operations (x = x - m, not x -= m or x.sub_(m))")
    return out


def expect_tensor(got, *, what: str = "your result", on: str = "", shape=None, dtype=None,
                  allow_sequences: bool = False, finite: bool = True) -> Tensor:
    """Return `got` as a tensor after checking its type, shape, dtype and (if `finite`) for NaN/inf; else Wrong."""
    where = f" on {on}" if on else ""
    if got is None:
        raise Wrong(f"{what} is None{where}", "did you forget a `return` statement?")
    if not isinstance(got, Tensor):
        if allow_sequences and isinstance(got, (list, tuple)):
            try:
                got = torch.tensor(got, dtype=torch.float64)
            except (TypeError, ValueError, RuntimeError) as e:
                raise Wrong(f"{what} could not be read as a matrix of numbers ({e})") from None
        else:
            raise Wrong(f"{what} is {describe(got)}{where}, expected a torch.Tensor")
    if shape is not None and tuple(got.shape) != tuple(shape):
        raise Wrong(f"{what} has shape {tuple(got.shape)}{where}, expected {tuple(shape)}")
    if dtype is not None and got.dtype != dtype:
        raise Wrong(f"{what} has dtype {got.dtype}{where}, expected {dtype}")
    if finite and got.is_floating_point() and not torch.isfinite(got).all():
        bad = "NaN" if torch.isnan(got).any() else "inf"
        idx = tuple(int(i) for i in (~torch.isfinite(got)).nonzero()[0])
        raise Wrong(f"{what} contains {bad} (first at index {list(idx)}){where}",
                    "exp of a large number overflows, and a row with nothing allowed divides 0 by 0")
    return got


def expect_tuple(got, names: tuple[str, ...], fn_name: str, on: str) -> tuple:
    """Check that `got` is a tuple/list of len(names) items; else say what came back instead."""
    wanted = f"a tuple ({', '.join(names)})"
    hint = f"end your function with `return {', '.join(names)}`"
    if isinstance(got, Tensor):
        raise Wrong(f"{fn_name} returned a single tensor of shape {tuple(got.shape)} on {on}, expected {wanted}", hint)
    if got is None:
        raise Wrong(f"{fn_name} returned None on {on}, expected {wanted}", "did you forget the `return` statement?")
    if not isinstance(got, (tuple, list)):
        raise Wrong(f"{fn_name} returned {describe(got)} on {on}, expected {wanted}", hint)
    if len(got) != len(names):
        raise Wrong(f"{fn_name} returned {len(got)} values on {on}, expected {len(names)}: {wanted}", hint)
    return tuple(got)


def expect_close(got: Tensor, expected: Tensor, *, what: str = "your result", on: str = "",
                 atol: float = 1e-5, rtol: float = 1e-4,
                 mistakes: Mapping[str, Tensor] | None = None) -> None:
    """Raise Wrong unless `got` matches `expected`; if it matches a known mistake, give that mistake's hint.

    `mistakes` maps a hint ("softmax over queries (dim=-2) instead of keys (dim=-1)") to the output that
    mistake produces on the same input.
    """
    where = f" on {on}" if on else ""
    got = expect_tensor(got, what=what, on=on, finite=False)
    if tuple(got.shape) != tuple(expected.shape):
        for hint, wrong in (mistakes or {}).items():
            if tuple(wrong.shape) == tuple(got.shape):
                raise Wrong(f"{what} has shape {tuple(got.shape)}{where}, expected {tuple(expected.shape)}", hint)
        raise Wrong(f"{what} has shape {tuple(got.shape)}{where}, expected {tuple(expected.shape)}")
    if got.is_complex() or got.dtype == torch.bool:
        raise Wrong(f"{what} has dtype {got.dtype}{where}, expected real numbers like {expected.dtype}")
    got_d = got.detach().to(torch.float64).cpu()
    exp_d = expected.detach().to(torch.float64).cpu()
    if torch.allclose(got_d, exp_d, atol=atol, rtol=rtol):
        return
    for hint, wrong in (mistakes or {}).items():
        w = wrong.detach().to(torch.float64).cpu()
        if w.shape == got_d.shape and torch.allclose(got_d, w, atol=atol, rtol=rtol, equal_nan=True):
            raise Wrong(f"{what} has the wrong values{where}", hint)
    expect_tensor(got, what=what, on=on)  # NaN or inf that no known mistake explains
    err = (got_d - exp_d).abs()
    idx = tuple(int(i) for i in (err == err.max()).nonzero()[0])
    raise Wrong(
        f"{what} has the wrong values{where}: at index {list(idx)} expected {exp_d[idx].item():.4g}, "
        f"got {got_d[idx].item():.4g} (max abs error {err.max().item():.2g})"
    )


def describe(x) -> str:
    """'a list of length 3', 'an int', ... for messages about unexpected types."""
    name = type(x).__name__
    article = "an" if name[:1].lower() in "aeiou" else "a"
    if isinstance(x, (list, tuple)):
        return f"{article} {name} of length {len(x)}"
    return f"{article} {name}"


class _time_limit:
    """Context manager: raise _TimeUp in the main thread after `seconds` (no-op where SIGALRM is missing)."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.active = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()

    def __enter__(self):
        if self.active:
            self.previous = signal.signal(signal.SIGALRM, self._fire)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def __exit__(self, *exc):
        if self.active:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.previous)
        return False

    @staticmethod
    def _fire(signum, frame):
        raise _TimeUp()


def _fmt(x: float) -> str:
    return f"{x:g}" if math.isfinite(x) else str(x)


def _id_key(exercise_id: str):
    return tuple(int(p) if p.isdigit() else p for p in exercise_id.split("."))

