"""The exercise registry: what an exercise is, how a checker says "wrong", and the table of all exercises.

A checker is a function `checker(answer) -> str` registered with `@exercise("2.2", "title")`. It returns a
short success message, raises `Wrong(message, hint)` when the answer is wrong, or `NotAttempted` when the
answer is still the stub. Running checkers and recording results is `results.check`'s job.
"""
from __future__ import annotations

from ..i18n import _
from collections.abc import Callable
from dataclasses import dataclass


class Wrong(Exception):
    """Raised by a checker: the answer is wrong. `message` says what, `hint` the likely mistake."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message, self.hint = message, hint


class NotAttempted(Exception):
    """Raised by a checker: the answer is still the stub (None, or code that raises NotImplementedError)."""


@dataclass(frozen=True)
class Exercise:
    """A registered exercise: id like "2.3", a title, its points, its checker, whether the answer is a function
    or a value (a matrix, a number), the chapter section a stuck learner should re-read, and the package's own
    implementations of the answer (`references`: dotted paths), which an answer may never hand in or call."""

    exercise_id: str
    title: str
    points: float
    checker: Callable[[object], str]
    answer_kind: str = "function"
    section: str | None = None
    answer_name: str | None = None  # the name the learner's answer has in the notebook: the grader finds it by it
    references: tuple[str, ...] = ()

    @property
    def chapter(self) -> str:
        return self.exercise_id.split(".")[0]


REGISTRY: dict[str, Exercise] = {}


def exercise(exercise_id: str, title: str, points: float = 1.0, answer_kind: str = "function",
             section: str | None = None, answer_name: str | None = None, references: tuple[str, ...] = ()):
    """Decorator that registers `checker` for `exercise_id` (e.g. "2.3"); answer_kind is "function" or "value";
    `section` is the heading of the chapter section that a failed check points the learner back to;
    `answer_name` is the name the chapter gives the answer (`check("2.3", padding_mask)`: "padding_mask"), by which
    the grader finds it in a submission, unique within the chapter;
    `references` are the dotted paths of the package's own implementations of the answer (see `guard.call`)."""
    if answer_kind not in ("function", "value"):
        raise ValueError(_("answer_kind must be 'function' or 'value', got {answer_kind!r}",
                           answer_kind=answer_kind))
    if isinstance(references, str):
        references = (references,)
    if not (isinstance(answer_name, str) and answer_name.isidentifier()):
        raise ValueError(_("answer_name must name the answer as the chapter defines it (check(\"2.3\", padding_mask): "
                           "\"padding_mask\"), got {answer_name!r}", answer_name=answer_name))

    def register(checker: Callable[[object], str]) -> Callable[[object], str]:
        if exercise_id in REGISTRY:
            raise ValueError(_("exercise {exercise_id} is registered twice", exercise_id=exercise_id))
        name = answer_name
        chapter = exercise_id.split(".")[0]
        twin = next((other for other in REGISTRY.values() if other.chapter == chapter and other.answer_name == name),
                    None)
        if twin is not None:  # the grader finds each answer by name: a second one would shadow the first
            raise ValueError(_("exercises {first} and {second} both name their answer {name!r}: the grader "
                               "could not tell them apart", first=twin.exercise_id, second=exercise_id, name=name))
        REGISTRY[exercise_id] = Exercise(exercise_id, title, float(points), checker, answer_kind, section,
                                         answer_name, tuple(references))
        return checker

    return register


def id_key(exercise_id: str):
    """A sort key that puts "10.1" after "9.3"."""
    return tuple(int(p) if p.isdigit() else p for p in exercise_id.split("."))
