"""Results and the session: `check` runs an exercise's checker on an answer and records a `CheckResult`;
`summary` shows a chapter's progress in this session. Neither ever raises into the notebook."""
from __future__ import annotations

import contextlib
import html
import os
from dataclasses import asdict, dataclass

from . import guard
from .forbid import Forbidden
from .limits import TimeUp
from ..i18n import N_, _
from .hints import describe, fmt
from .registry import REGISTRY, Exercise, NotAttempted, Wrong, id_key

METADATA_KEY = "attnbook"  # output metadata key under which grading tools find {"check": {...}} or {"summary": {...}}

PASSED, FAILED, NOT_ATTEMPTED = "passed", "failed", "not attempted"
_ICONS = {PASSED: "✓", FAILED: "✗", NOT_ATTEMPTED: "○"}
_LABELS = {PASSED: N_("passed"), FAILED: N_("failed"), NOT_ATTEMPTED: N_("not attempted yet")}
_HEADERS = (N_("exercise"), N_("title"), N_("status"), N_("points"))  # the columns of summary()'s table
SEPARATOR = N_(": ")  # between a label and what follows it (a full-width colon in Chinese)
_STATES = {PASSED: N_("passed"), FAILED: N_("failed"), NOT_ATTEMPTED: N_("not attempted")}  # in summary()
_COLOURS = {PASSED: "#1a7f37", FAILED: "#cf222e", NOT_ATTEMPTED: "#6e7781"}


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
        score = f"{fmt(self.points)}/{fmt(self.max_points)}"
        return f"{_ICONS[self.status]} {self._headline()} [{score}]{_(SEPARATOR)}{self.message}"

    def _headline(self) -> str:
        return _("Exercise {exercise_id} {status}", exercise_id=self.exercise_id, status=_(_LABELS[self.status]))

    __repr__ = __str__

    def _repr_html_(self) -> str:
        colour = _COLOURS[self.status]
        return (
            f'<div class="attnbook-check attnbook-{self.status.replace(" ", "-")}" '
            f'style="border-left:4px solid {colour};padding:2px 8px;">'
            f'<b style="color:{colour}">{_ICONS[self.status]} {html.escape(self._headline())}</b> '
            f"[{fmt(self.points)}/{fmt(self.max_points)}]{_(SEPARATOR)}{html.escape(self.message)}</div>"
        )

    def _repr_mimebundle_(self, include=None, exclude=None) -> tuple[dict, dict]:
        data = {"text/plain": str(self), "text/html": self._repr_html_()}
        return data, {METADATA_KEY: {"check": self.to_dict()}}


_SESSION: dict[str, CheckResult] = {}
_PASSED_BEFORE: set[str] = set()  # exercises that passed at least once in this session
_MISSING = object()
def _usage(known: str, exercise_id: str = "2.3") -> str:
    return _('call it as check("{exercise_id}", your_answer): the exercise id as a string, then your answer; '
             "known ids: {known}", exercise_id=exercise_id, known=known)


# Set by the grader's runner (grading/runner.py) while it runs a submission's cells: the grader judges every
# exercise itself, over the link, so the learner's own check cells would only cost time (half of a chapter 2
# submission's). A learner who unsets it gains nothing: what check() says in the sandbox is never read.
GRADER_RUN = "ATTNBOOK_GRADER_RUN"

_FAILED_ATTEMPTS: dict[str, int] = {}  # failed checks per exercise in this session
_current_attempts = 0  # failed attempts so far of the exercise being checked (read by expect_value)


@contextlib.contextmanager
def fresh_session():
    """A check as a new learner's first attempt (the grader's), leaving the notebook's session as it was."""
    global _current_attempts
    saved = dict(_SESSION), set(_PASSED_BEFORE), dict(_FAILED_ATTEMPTS), _current_attempts
    _SESSION.clear(), _PASSED_BEFORE.clear(), _FAILED_ATTEMPTS.clear()
    try:
        yield
    finally:
        _SESSION.clear(), _PASSED_BEFORE.clear(), _FAILED_ATTEMPTS.clear()
        _SESSION.update(saved[0]), _PASSED_BEFORE.update(saved[1]), _FAILED_ATTEMPTS.update(saved[2])
        _current_attempts = saved[3]


def failed_attempts() -> int:
    """How many times the exercise being checked has failed before in this session."""
    return _current_attempts


def check(exercise_id=_MISSING, answer=_MISSING, *extra) -> CheckResult:
    """Check `answer` for exercise `exercise_id` (e.g. check("2.3", padding_mask)) and return a CheckResult.

    Never raises: a missing answer, swapped arguments or an unknown id all become a one-line message (and do
    not count as an attempt).
    """
    global _current_attempts
    known = ", ".join(sorted(REGISTRY, key=id_key)) or "none"
    if exercise_id is _MISSING:
        return CheckResult("?", FAILED, 0.0, 0.0, _("check needs the exercise id and your answer; ") + _usage(known))
    if not isinstance(exercise_id, (str, int, float)) or isinstance(exercise_id, bool):
        if isinstance(answer, (str, int, float)) and not isinstance(answer, bool) and str(answer) in REGISTRY:
            return CheckResult(str(answer), FAILED, 0.0, REGISTRY[str(answer)].points,
                               _("the arguments are swapped: ") + _usage(known, str(answer)))
        return CheckResult("?", FAILED, 0.0, 0.0, _("the first argument is {what}; ",
                                                    what=describe(exercise_id)) + _usage(known))
    exercise_id = str(exercise_id).strip().removeprefix("Exercise ").strip()
    ex = REGISTRY.get(exercise_id)
    if ex is None:
        return CheckResult(exercise_id, FAILED, 0.0, 0.0, _("there is no exercise {exercise_id!r}; known: {known}",
                                                                 exercise_id=exercise_id, known=known))
    if answer is _MISSING:
        needed = _("check needs your function as its second argument: ") if ex.answer_kind == "function" \
            else _("check needs your answer as its second argument: ")
        return _result(ex, FAILED, needed + _usage(known, exercise_id))
    if extra:
        return _result(ex, FAILED, _("check takes two arguments, got {count}; ", count=2 + len(extra))
                       + _usage(known, exercise_id))
    if os.environ.get(GRADER_RUN):
        return _result(ex, NOT_ATTEMPTED, "not checked here: attnbook-grade checks every exercise itself")
    if answer is None:
        result = _result(ex, NOT_ATTEMPTED, _("nothing to check yet: fill in your answer above, run it, then this cell"))
    else:
        _current_attempts = _FAILED_ATTEMPTS.get(exercise_id, 0)
        try:
            with guard.checking(ex.references):
                message = ex.checker(answer)
                if ex.answer_kind == "function":
                    _second_pass(ex, answer)
            result = _result(ex, PASSED, _(message) if message else _("all tests passed"))
        except NotAttempted as e:
            result = _result(ex, NOT_ATTEMPTED, _(str(e)) if str(e) else
                             _("your code still raises NotImplementedError: replace the stub"))
        except Wrong as e:
            message, hint = _(e.message), _(e.hint) if e.hint else ""
            text = message + (("" if message.endswith((".", ":", "?", "!", "。", "：", "？", "！")) else _("."))
                              + _(" Hint: {hint}", hint=hint) if hint else "")
            if ex.section:
                text += _(' (Re-read "{section}".)', section=_(ex.section))
            result = _result(ex, FAILED, text)
        except (Exception, TimeUp, Forbidden) as e:  # a checker must never crash the notebook
            result = _result(ex, FAILED, _("could not check your answer ({error})",
                                                  error=f"{type(e).__name__}: {e}"))
        if result.status == FAILED:
            _FAILED_ATTEMPTS[exercise_id] = _FAILED_ATTEMPTS.get(exercise_id, 0) + 1
    _SESSION[exercise_id] = result
    if result.passed:
        _PASSED_BEFORE.add(exercise_id)
    return result


def _second_pass(ex: Exercise, answer) -> None:
    """Run the checker again on the same shapes with new values (`compare.fresh_values`): a function is right on
    every input, not only on the ones it has seen."""
    from .compare import fresh_values  # compare builds on this module (failed_attempts)

    try:
        with fresh_values():
            ex.checker(answer)
    except Wrong as e:
        raise Wrong(_("on a second run of the same cases with new values: {message}", message=_(e.message)),
                    e.hint) from None


def _result(ex: Exercise, status: str, message: str) -> CheckResult:
    return CheckResult(ex.exercise_id, status, ex.points if status == PASSED else 0.0, ex.points, message)


class Summary:
    """A chapter's exercises and the latest result of each in this session; renders as a table."""

    def __init__(self, chapter: str, rows: list[tuple[Exercise, CheckResult | None]],
                 passed_before: set[str] | None = None):
        self.chapter, self.rows = chapter, rows
        self.passed_before = set(passed_before or ())
        self.points = sum(r.points for _, r in rows if r is not None)
        self.max_points = sum(ex.points for ex, _ in rows)

    def _status(self, ex: Exercise, result: CheckResult | None) -> str:
        """The latest status, and a note when an earlier attempt passed but the latest did not."""
        status = _(_STATES[result.status]) if result is not None else _("not checked yet")
        if (result is None or result.status != PASSED) and ex.exercise_id in self.passed_before:
            status += _(" (passed earlier; the latest attempt counts)")
        return status

    def _icon(self, result: CheckResult | None) -> str:
        return _ICONS.get(result.status, "·") if result is not None else "·"

    def _colour(self, result: CheckResult | None) -> str:
        return _COLOURS.get(result.status, "#6e7781") if result is not None else "#6e7781"

    def __str__(self) -> str:
        lines = [self._caption()]
        for ex, r in self.rows:
            lines.append(f"  {self._icon(r)} {ex.exercise_id} {_(ex.title)}{_(SEPARATOR)}{self._status(ex, r)}")
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        body = "".join(
            f"<tr><td>{ex.exercise_id}</td><td>{html.escape(_(ex.title))}</td>"
            f'<td style="color:{self._colour(r)}">{self._icon(r)} {html.escape(self._status(ex, r))}</td>'
            f"<td>{fmt(r.points if r else 0)}/{fmt(ex.points)}</td></tr>"
            for ex, r in self.rows
        )
        headers = "".join(f"<th>{html.escape(_(header))}</th>" for header in _HEADERS)
        return (
            f"<table class='attnbook-summary'><caption>{html.escape(self._caption())}</caption>"
            f"<tr>{headers}</tr>{body}</table>"
        )

    def _caption(self) -> str:
        return _("Chapter {chapter}: {points}/{max_points} points", chapter=self.chapter, points=fmt(self.points),
                 max_points=fmt(self.max_points))

    def to_dict(self) -> dict:
        return {
            "chapter": self.chapter,
            "points": self.points,
            "max_points": self.max_points,
            "exercises": [
                {"exercise_id": ex.exercise_id, "title": ex.title,
                 "status": r.status if r is not None else "not checked yet",
                 "passed_earlier": ex.exercise_id in self.passed_before,
                 "points": r.points if r else 0.0, "max_points": ex.points}
                for ex, r in self.rows
            ],
        }

    def _repr_mimebundle_(self, include=None, exclude=None) -> tuple[dict, dict]:
        data = {"text/plain": str(self), "text/html": self._repr_html_()}
        return data, {METADATA_KEY: {"summary": self.to_dict()}}


def summary(chapter=None) -> Summary:
    """Progress through chapter `chapter`'s exercises (e.g. summary(2)) in this session; without a chapter,
    the chapter of the latest check."""
    if chapter is None:
        if not _SESSION:
            raise ValueError(_("summary needs a chapter number, e.g. summary(2), until you have checked an exercise"))
        chapter = next(reversed(_SESSION.values())).exercise_id.split(".")[0]
    chapter = str(chapter)
    exercises = sorted((ex for ex in REGISTRY.values() if ex.chapter == chapter), key=lambda e: id_key(e.exercise_id))
    if not exercises:
        chapters = sorted({ex.chapter for ex in REGISTRY.values()}, key=int)
        raise ValueError(_("chapter={chapter!r} has no exercises; chapters with exercises: {chapters}",
                           chapter=chapter, chapters=", ".join(chapters)))
    return Summary(chapter, [(ex, _SESSION.get(ex.exercise_id)) for ex in exercises], _PASSED_BEFORE)


def reset_session() -> None:
    """Forget every result recorded by `check` in this session."""
    _SESSION.clear()
    _PASSED_BEFORE.clear()
    _FAILED_ATTEMPTS.clear()
