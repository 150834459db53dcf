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
    answer_name: str | None = None  # the name the learner's answer is bound to in the notebook (for grading)
    references: tuple[str, ...] = ()

    @property
    def chapter(self) -> str:
        return self.exercise_id.split(".")[0]


REGISTRY: dict[str, Exercise] = {}
# The name each exercise's answer has in the chapter (check("2.3", padding_mask) -> "padding_mask"), for graders
# that check a submission's final definitions; a test keeps it equal to the chapters' check cells.
ANSWER_NAMES: dict[str, str] = {
    "1.1": "project_qkv", "1.2": "soft_lookup", "1.3": "stable_softmax",
    "2.1": "answer_2_1", "2.2": "attention", "2.3": "padding_mask", "2.4": "dot_product_variance",
    "3.1": "split_heads", "3.2": "multi_head_forward", "3.3": "mha_param_count", "3.4": "merge_heads",
    "4.1": "layer_norm", "4.2": "feed_forward", "4.3": "pre_norm_block", "4.4": "encoder_param_count",
    "5.1": "sinusoidal_table", "5.2": "max_equivariance_error", "5.3": "apply_rope", "5.4": "pe_shift_matrix",
    "6.1": "causal_mask", "6.2": "decoder_self_mask", "6.3": "greedy_decode", "6.4": "to_allow_mask",
    "7.1": "patchify", "7.2": "patch_embedding_as_conv", "7.3": "prepend_cls",
    "8.1": "mlm_mask", "8.2": "causal_lm_loss", "8.3": "sample_next",
    "9.1": "online_softmax", "9.2": "attention_cost", "9.3": "time_it",
    "10.1": "kv_cache_bytes", "10.2": "repeat_kv", "10.3": "attend_with_cache",
    "11.1": "rms_norm", "11.2": "swiglu", "11.3": "modern_block",
    "12.1": "lr_at", "12.2": "perplexity", "12.3": "merge_pair",
}


def exercise(exercise_id: str, title: str, points: float = 1.0, answer_kind: str = "function",
             section: str | None = None, answer_name: str | None = None, references: tuple[str, ...] = ()):
    """Decorator that registers `checker` for `exercise_id` (e.g. "2.3"); answer_kind is "function" or "value";
    `section` is the heading of the chapter section that a failed check points the learner back to;
    `references` are the dotted paths of the package's own implementations of the answer (see `guard.call`)."""
    if answer_kind not in ("function", "value"):
        raise ValueError(_("answer_kind must be 'function' or 'value', got {answer_kind!r}",
                           answer_kind=answer_kind))
    if isinstance(references, str):
        references = (references,)

    def register(checker: Callable[[object], str]) -> Callable[[object], str]:
        if exercise_id in REGISTRY:
            raise ValueError(_("exercise {exercise_id} is registered twice", exercise_id=exercise_id))
        name = answer_name or ANSWER_NAMES.get(exercise_id)
        chapter = exercise_id.split(".")[0]
        twin = next((other for other in REGISTRY.values()
                     if other.chapter == chapter and name is not None and other.answer_name == name), None)
        if twin is not None:  # the grader finds each answer by name: a second one would shadow the first
            raise ValueError(_("exercises {first} and {second} both name their answer {name!r}: the grader "
                               "could not tell them apart", first=twin.exercise_id, second=exercise_id, name=name))
        REGISTRY[exercise_id] = Exercise(exercise_id, title, float(points), checker, answer_kind, section,
                                         answer_name or ANSWER_NAMES.get(exercise_id), tuple(references))
        return checker

    return register


def id_key(exercise_id: str):
    """A sort key that puts "10.1" after "9.3"."""
    return tuple(int(p) if p.isdigit() else p for p in exercise_id.split("."))
