"""The exercise system: a registry of checkers, `check`, `summary`, and helpers that checkers share.

A checker is a function `checker(answer) -> str` registered with `@exercise("2.2", "title")`. It returns a
short success message, or raises `Wrong(message, hint)` when the answer is wrong, or `NotAttempted` when
the answer is still the stub. `check` turns every outcome, including bugs and crashes inside the learner's
code, into a `CheckResult`; it never raises into the notebook.
"""
from __future__ import annotations

import functools
import html
import importlib
import math
import random
import re
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
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


class _Forbidden(BaseException):
    """Raised inside the learner's code when it calls something the task forbids (see `call(forbid=...)`)."""

    def __init__(self, name: str, instead: str | None = None):
        super().__init__(name, instead)


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
    """A registered exercise: id like "2.3", a title, its points, its checker, whether the answer is a function
    or a value (a matrix, a number), and the chapter section a stuck learner should re-read."""

    exercise_id: str
    title: str
    points: float
    checker: Callable[[object], str]
    answer_kind: str = "function"
    section: str | None = None
    answer_name: str | None = None  # the name the learner's answer is bound to in the notebook (for grading)

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
}
_SESSION: dict[str, CheckResult] = {}
_PASSED_BEFORE: set[str] = set()  # exercises that passed at least once in this session
_MISSING = object()


def exercise(exercise_id: str, title: str, points: float = 1.0, answer_kind: str = "function",
             section: str | None = None, answer_name: str | None = None):
    """Decorator that registers `checker` for `exercise_id` (e.g. "2.3"); answer_kind is "function" or "value";
    `section` is the heading of the chapter section that a failed check points the learner back to."""
    if answer_kind not in ("function", "value"):
        raise ValueError(f"answer_kind must be 'function' or 'value', got {answer_kind!r}")

    def register(checker: Callable[[object], str]) -> Callable[[object], str]:
        if exercise_id in REGISTRY:
            raise ValueError(f"exercise {exercise_id} is registered twice")
        REGISTRY[exercise_id] = Exercise(exercise_id, title, float(points), checker, answer_kind, section,
                                         answer_name or ANSWER_NAMES.get(exercise_id))
        return checker

    return register


def _usage(known: str, exercise_id: str = "2.3") -> str:
    return (f'call it as check("{exercise_id}", your_answer): the exercise id as a string, then your answer; '
            f"known ids: {known}")


_FAILED_ATTEMPTS: dict[str, int] = {}  # failed checks per exercise in this session
_current_attempts = 0  # failed attempts so far of the exercise being checked (read by expect_value)


def check(exercise_id=_MISSING, answer=_MISSING, *extra) -> CheckResult:
    """Check `answer` for exercise `exercise_id` (e.g. check("2.3", padding_mask)) and return a CheckResult.

    Never raises: a missing answer, swapped arguments or an unknown id all become a one-line message (and do
    not count as an attempt).
    """
    global _current_attempts
    known = ", ".join(sorted(REGISTRY, key=_id_key)) or "none"
    if exercise_id is _MISSING:
        return CheckResult("?", FAILED, 0.0, 0.0, "check needs the exercise id and your answer; " + _usage(known))
    if not isinstance(exercise_id, (str, int, float)) or isinstance(exercise_id, bool):
        if isinstance(answer, (str, int, float)) and not isinstance(answer, bool) and str(answer) in REGISTRY:
            return CheckResult(str(answer), FAILED, 0.0, REGISTRY[str(answer)].points,
                               "the arguments are swapped: " + _usage(known, str(answer)))
        return CheckResult("?", FAILED, 0.0, 0.0, f"the first argument is {describe(exercise_id)}; " + _usage(known))
    exercise_id = str(exercise_id).strip().removeprefix("Exercise ").strip()
    ex = REGISTRY.get(exercise_id)
    if ex is None:
        return CheckResult(exercise_id, FAILED, 0.0, 0.0, f"there is no exercise {exercise_id!r}; known: {known}")
    if answer is _MISSING:
        what = "function" if ex.answer_kind == "function" else "answer"
        return _result(ex, FAILED, f"check needs your {what} as its second argument: " + _usage(known, exercise_id))
    if extra:
        return _result(ex, FAILED, f"check takes two arguments, got {2 + len(extra)}; " + _usage(known, exercise_id))
    if answer is None:
        result = _result(ex, NOT_ATTEMPTED, "nothing to check yet: fill in your answer above, run it, then this cell")
    else:
        _current_attempts = _FAILED_ATTEMPTS.get(exercise_id, 0)
        try:
            message = ex.checker(answer)
            result = _result(ex, PASSED, message or "all tests passed")
        except NotAttempted as e:
            result = _result(ex, NOT_ATTEMPTED, str(e) or "your code still raises NotImplementedError: replace the stub")
        except Wrong as e:
            text = e.message + (("" if e.message.endswith((".", ":", "?", "!")) else ".") + f" Hint: {e.hint}"
                                if e.hint else "")
            if ex.section:
                text += f' (Re-read "{ex.section}".)'
            result = _result(ex, FAILED, text)
        except (Exception, _TimeUp, _Forbidden) as e:  # a checker must never crash the notebook
            result = _result(ex, FAILED, f"could not check your answer ({type(e).__name__}: {e})")
        if result.status == FAILED:
            _FAILED_ATTEMPTS[exercise_id] = _FAILED_ATTEMPTS.get(exercise_id, 0) + 1
    _SESSION[exercise_id] = result
    if result.passed:
        _PASSED_BEFORE.add(exercise_id)
    return result


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
        status = result.status if result is not None else "not checked yet"
        if status != PASSED and ex.exercise_id in self.passed_before:
            status += " (passed earlier; the latest attempt counts)"
        return status

    def _icon(self, result: CheckResult | None) -> str:
        return _ICONS.get(result.status, "·") if result is not None else "·"

    def _colour(self, result: CheckResult | None) -> str:
        return _COLOURS.get(result.status, "#6e7781") if result is not None else "#6e7781"

    def __str__(self) -> str:
        lines = [f"Chapter {self.chapter}: {_fmt(self.points)}/{_fmt(self.max_points)} points"]
        for ex, r in self.rows:
            lines.append(f"  {self._icon(r)} {ex.exercise_id} {ex.title}: {self._status(ex, r)}")
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        body = "".join(
            f"<tr><td>{ex.exercise_id}</td><td>{html.escape(ex.title)}</td>"
            f'<td style="color:{self._colour(r)}">{self._icon(r)} {html.escape(self._status(ex, r))}</td>'
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
            raise ValueError("summary needs a chapter number, e.g. summary(2), until you have checked an exercise")
        chapter = next(reversed(_SESSION.values())).exercise_id.split(".")[0]
    chapter = str(chapter)
    exercises = sorted((ex for ex in REGISTRY.values() if ex.chapter == chapter), key=lambda e: _id_key(e.exercise_id))
    if not exercises:
        chapters = sorted({ex.chapter for ex in REGISTRY.values()}, key=int)
        raise ValueError(f"chapter={chapter!r} has no exercises; chapters with exercises: {', '.join(chapters)}")
    return Summary(chapter, [(ex, _SESSION.get(ex.exercise_id)) for ex in exercises], _PASSED_BEFORE)


def reset_session() -> None:
    """Forget every result recorded by `check` in this session."""
    _SESSION.clear()
    _PASSED_BEFORE.clear()
    _FAILED_ATTEMPTS.clear()


# ---------------------------------------------------------------------------------------------------------
# Helpers for checkers
# ---------------------------------------------------------------------------------------------------------


def call(fn, *args, what: str = "your function", on: str = "", time_limit_s: float = DEFAULT_TIME_LIMIT_S,
         forbid: Iterable[str | tuple[str, str]] = (), seed: int | None = 0,
         explain: Callable[[str], str | None] | None = None, **kwargs):
    """Call the learner's `fn(*args, **kwargs)` and turn every way it can go wrong into Wrong/NotAttempted.

    - `on` describes the input in the learner's terms ("q of shape (2, 3, 4)").
    - `forbid` lists what the task forbids, as dotted paths ("torch.softmax", "torch.Tensor.softmax",
      "attnbook.masks.padding_mask") or (path, what to do instead) pairs. During the call each one raises,
      wherever the learner's code reaches it from (a module attribute, a name imported into the notebook,
      a tensor method), and the learner is told plainly that the task asks for it to be written without it.
    - `seed`: Python's, NumPy's and PyTorch's generators are seeded with it for the call and restored after,
      so random code gets the same verdict on every run (None leaves them alone).
    - `explain(message)` may return an exercise-specific hint for an exception; otherwise `explain_error`
      matches common exceptions to hints.
    Tensor arguments are checked for in-place changes; code slower than `time_limit_s` is stopped (where the
    OS allows) and reported.
    """
    if isinstance(fn, str):
        raise Wrong(f"expected a function, got the string {fn!r}", "pass the function itself: its name without quotes")
    if not callable(fn):
        raise Wrong(f"expected a function, got {describe(fn)}", "pass the function itself, without calling it")
    where = f" on {on}" if on else ""
    for path, instead in _forbidding(forbid, fn).items:
        if _unwrap(fn) is _resolve_or_none(path):
            raise Wrong(f"what you passed is {path} itself: the task asks you to write this without {path}",
                        (instead or "write your own function") + " (if a cell above imported it under this name, "
                        "your answer cell has not been run: run it, then this check)")
    before = {i: a.detach().clone() for i, a in enumerate(args) if isinstance(a, Tensor)}
    before.update({k: v.detach().clone() for k, v in kwargs.items() if isinstance(v, Tensor)})
    start = time.perf_counter()
    try:
        with _time_limit(time_limit_s), _seeded(seed), _one_thread(), _forbidding(forbid, fn), \
                warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = fn(*args, **kwargs)
    except NotImplementedError as e:
        raiser = _raising_function(e)
        if raiser is not None and raiser != getattr(fn, "__name__", raiser):
            raise Wrong(f"{what} called {raiser}, which still raises NotImplementedError{where}",
                        f"finish {raiser} first (its own exercise), or write those steps inside {what}") from None
        raise NotAttempted("your code still raises NotImplementedError: replace the stub with your solution") from None
    except _Forbidden as e:
        path, instead = e.args[0], e.args[1] if len(e.args) > 1 else None
        raise Wrong(f"{what} called {path}{where}: the task asks you to write this without {path}",
                    instead or "build it from the basic tensor operations the task names") from None
    except _TimeUp:
        raise Wrong(f"{what} took longer than {time_limit_s:g} s{where} and was stopped",
                    "look for a Python loop over every element (use tensor operations instead), or for something "
                    "much bigger than the task needs being built") from None
    except Exception as e:
        message = f"{type(e).__name__}: {e}"
        if any("x.T` on tensors of dimension other than 2" in str(w.message) for w in caught):
            message += " (after a warning that .T was used on a tensor that is not 2-D)"
        hint = (explain(message) if explain else None) or explain_error(message)
        raise Wrong(f"{what} raised {message}{where}", hint) from None
    elapsed = time.perf_counter() - start
    if elapsed > time_limit_s:
        raise Wrong(f"{what} took {elapsed:.1f} s{where} (limit {time_limit_s:g} s)",
                    "look for a Python loop over every element (use tensor operations instead), or for something "
                    "much bigger than the task needs being built")
    for k, old in before.items():
        new = args[k] if isinstance(k, int) else kwargs[k]
        if new.shape != old.shape or not torch.equal(new.detach(), old):
            name = f"`{_parameter_name(fn, k)}`" if isinstance(k, int) else f"`{k}`"
            raise Wrong(f"{what} changed its input {name} in place{where}",
                        "use out-of-place operations (y = a - b, not a -= b, a.sub_(b) or a[...] = ...), and "
                        "leave the arguments as they came in")
    return out


# Common exceptions and what they usually mean in the learner's code: (pattern on "Type: message", hint).
# The first pattern that matches wins, so the specific ones come first.
ERROR_HINTS: list[tuple[str, str]] = [
    (r"^OverflowError: math range error",
     "math.exp works on one Python number and overflows above about 709; use torch.exp on the whole tensor, "
     "after subtracting the maximum"),
    (r"^RecursionError",
     "your function calls itself: if it has the name of a library function (softmax, attention, ...), "
     "call the library one by its full name (torch.softmax) or rename yours"),
    (r"Dimension out of range \(expected to be in range of \[-(\d+), \d+\], but got (-?\d+)\)"
     r"|dim=-?\d+ is out of range for a tensor with",
     "that dimension does not exist on this input, which has fewer dimensions than you assumed; count from "
     "the end: dim=-1 is always the last dimension (the keys of a score matrix), whatever comes before it"),
    (r"only one element tensors can be converted to Python scalars",
     "math.exp, math.sqrt, float() and int() work on single numbers, not on tensors: use torch.exp, torch.sqrt "
     "and tensor operations on the whole tensor"),
    (r"Boolean value of Tensor with more than one (value|element) is ambiguous",
     "`if mask:` (or `and`/`or`) asks whether a whole tensor is true; to test whether a mask was given, write "
     "`if mask is not None:`, and combine masks element by element with &, | and ~"),
    (r"std and var only support floating point",
     "var() and std() need floating-point numbers: keep the samples as floats (do not convert them to int)"),
    (r"batch1 must be a 3D tensor|batch2 must be a 3D tensor",
     "torch.bmm needs 3-D tensors on both sides; use the @ operator (torch.matmul), which handles 2-D and batched "
     "inputs and a 2-D weight matrix"),
    (r"^IndexError: The shape of the mask",
     "boolean indexing (x[mask]) picks out elements and flattens the result; to keep the shape, use "
     "x.masked_fill(~mask, value) or torch.where(mask, x, other)"),
    (r"^IndexError: too many indices",
     "you indexed more dimensions than the tensor has; check its shape with .shape"),
    (r"masked_fill_? only supports boolean masks",
     "masked_fill needs a boolean mask (True/False): build it with a comparison, or call .bool() on it"),
    (r"t\(\) expects a tensor with <= 2 dimensions|\.T was used on a tensor that is not 2-D",
     "this input has batch dimensions (it is 3-D or 4-D): .t() and .T are for 2-D matrices; transpose only the "
     "last two dimensions with k.transpose(-2, -1)"),
    (r"Expected size for first two dimensions of batch2 tensor|expected size for first two dimensions",
     "in a batched matrix product (..., n, k) @ (..., k, m) the batch dimensions must agree and the inner "
     "sizes must meet: transpose only the last two dimensions, k.transpose(-2, -1) (k.T reverses all of them)"),
    (r"mat1 and mat2 shapes cannot be multiplied|size mismatch|shapes cannot be multiplied",
     "in a matrix product A @ B the last size of A must equal the second-to-last size of B; check which "
     "operand needs transposing, and transpose only the last two dimensions (.transpose(-2, -1))"),
    (r"self must be a matrix|must be a matrix|Expected 2-D",
     "torch.mm and .mm accept 2-D matrices only; use the @ operator (torch.matmul), which treats leading "
     "dimensions as a batch"),
    (r"The size of tensor a \(\d+\) must match the size of tensor b \(\d+\) at non-singleton dimension",
     "two tensors whose shapes do not line up were combined element by element; give one of them a dimension "
     "of size 1 where the other has its own (x[:, None] or x.unsqueeze(-1)), or pass keepdim=True to the "
     "reduction (sum, amax, mean) so that its result lines up with its input"),
    (r"view size is not compatible with input tensor's size and stride",
     "after transpose or permute the memory is no longer in order: call .contiguous() before .view(), or use "
     ".reshape()"),
    (r"shape '\[[-\d, ]+\]' is invalid for input of size",
     "the sizes in your view/reshape do not multiply to the number of elements; write them from the input's "
     "shape (x.shape) rather than fixed numbers"),
    (r"torch\.return_types\.(max|min|sort|topk)",
     "x.max(dim=...) returns a pair (values, indices); use x.amax(dim=..., keepdim=True), or .values"),
    (r"unexpected keyword argument|got multiple values for argument",
     "keep the signature given in the task: the check passes some arguments by name"),
    (r"(takes \d+ positional arguments? but \d+ (were|was) given|missing \d+ required positional argument)",
     "keep the signature given in the task: the same arguments, in the same order"),
    (r"'(int|float|bool)' object has no attribute",
     "an argument you treat as a tensor is a number: keep the order of the arguments given in the task"),
    (r"^NameError: name '(\w+)' is not defined",
     "a name your function uses is not defined: define or import it in the cell, and run the cells above first"),
    (r"'NoneType' object|NoneType",
     "a value in your code is None: did a helper function forget its `return`?"),
    (r"expected scalar type|expected m1 and m2 to have the same dtype|should be the same dtype|dtype",
     "the tensors have different dtypes (float32, float64, int64): create new tensors with dtype=x.dtype, or "
     "build them from the inputs"),
    (r"Expected all tensors to be on the same device",
     "create new tensors on the input's device (device=x.device)"),
    (r"^ZeroDivisionError",
     "a division by zero in plain Python: use tensor operations, and check the case of an empty input"),
    (r"^TypeError: 'int' object is not callable|object is not callable",
     "a name you call is not a function here: was it overwritten by a number or a tensor earlier?"),
]


# Every route to a ready-made attention a learner might find: exercises that ask for attention written by hand
# forbid them all (with an exercise-specific "instead").
ATTENTION_SHORTCUTS = (
    "torch.nn.functional.scaled_dot_product_attention", "torch._C._nn.scaled_dot_product_attention",
    "torch.ops.aten.scaled_dot_product_attention", "torch.ops.aten._scaled_dot_product_attention_math",
    "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu",
    "torch.ops.aten._scaled_dot_product_flash_attention", "torch.ops.aten._scaled_dot_product_efficient_attention",
    "torch.nn.attention.flex_attention.flex_attention", "torch.nn.functional.multi_head_attention_forward",
    "torch._native_multi_head_attention", "torch.nn.MultiheadAttention", "torch.nn.TransformerEncoderLayer",
    "torch.nn.TransformerDecoderLayer", "torch.nn.Transformer",
    "attnbook.attention.scaled_dot_product_attention", "attnbook.attention.tiled_attention",
    "attnbook.multihead.MultiHeadAttention", "attnbook.kernels.triton_attention.triton_attention",
)


def explain_error(e: BaseException | str) -> str | None:
    """A hint for a common exception raised by a learner's code (see ERROR_HINTS), or None.

    `e` is the exception, or its text as "TypeName: message"."""
    message = e if isinstance(e, str) else f"{type(e).__name__}: {e}"
    for pattern, hint in ERROR_HINTS:
        if re.search(pattern, message):
            return hint
    return None


class _one_thread:
    """Run a block with one PyTorch thread: checks use tiny tensors, for which threads cost more than they give
    (and on a busy machine a 2-thread kernel can stall for milliseconds)."""

    def __enter__(self):
        self.threads = torch.get_num_threads()
        torch.set_num_threads(1)
        return self

    def __exit__(self, *exc):
        torch.set_num_threads(self.threads)
        return False


class _seeded:
    """Seed Python's, NumPy's and PyTorch's CPU generators for a block and restore their states after it."""

    def __init__(self, seed: int | None):
        self.seed = seed

    def __enter__(self):
        if self.seed is None:
            return self
        import numpy as np

        self.states = (random.getstate(), np.random.get_state(), torch.random.get_rng_state())
        random.seed(self.seed)
        np.random.seed(self.seed)
        torch.manual_seed(self.seed)
        return self

    def __exit__(self, *exc):
        if self.seed is not None:
            import numpy as np

            py, npy, pt = self.states
            random.setstate(py)
            np.random.set_state(npy)
            torch.random.set_rng_state(pt)
        return False


def _parameter_name(fn, index: int) -> str:
    """The name of positional parameter `index` of `fn` ("argument 2" when it cannot be found)."""
    import inspect

    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        return params[index].name
    except (TypeError, ValueError, IndexError):
        return f"argument {index + 1}"


def _unwrap(fn):
    """The function behind functools.partial / functools.wraps layers."""
    import functools

    for _ in range(10):
        if isinstance(fn, functools.partial):
            fn = fn.func
        elif hasattr(fn, "__wrapped__"):
            fn = fn.__wrapped__
        else:
            break
    return fn


def _resolve_or_none(path: str):
    try:
        return _resolve(path)[2]
    except (ValueError, AttributeError):
        return None


def _raising_function(e: BaseException) -> str | None:
    """The name of the function in which exception `e` was raised (the innermost frame of its traceback)."""
    tb = e.__traceback__
    if tb is None:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_code.co_name


def _resolve(path: str):
    """(owner, attribute name, object) for a dotted path such as "torch.Tensor.softmax"."""
    parts = path.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            owner = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:-1]:
            owner = getattr(owner, name)
        return owner, parts[-1], getattr(owner, parts[-1])
    raise ValueError(f"cannot resolve forbidden name {path!r}")


class Patches:
    """Temporary replacements of attributes and dict entries, undone in reverse order by `restore`.

    Shared by `call(forbid=...)` and checkers that stand in for library functions (chapter 9's clock). A
    replacement that fails (a read-only attribute) raises and is not recorded, so `restore` never trips on it.
    """

    def __init__(self):
        self.undo: list[tuple[object, str, object, bool]] = []

    def set(self, owner, name: str, value) -> None:
        if isinstance(owner, dict):
            old, had = owner.get(name), name in owner
            owner[name] = value
        else:
            had = name in vars(owner) if isinstance(owner, type) else True  # a class may inherit it
            old = vars(owner).get(name) if isinstance(owner, type) else getattr(owner, name)
            setattr(owner, name, value)
        self.undo.append((owner, name, old, had))

    def restore(self) -> None:
        for owner, name, old, had in reversed(self.undo):
            if isinstance(owner, dict):
                if had:
                    owner[name] = old
                else:
                    owner.pop(name, None)
            elif had:
                setattr(owner, name, old)
            else:
                delattr(owner, name)
        self.undo.clear()


class _Raiser:
    """Stands in for a forbidden function: calling it, or reaching through it (`.default` of an op), raises."""

    def __init__(self, path: str, instead: str | None):
        self._path, self._instead = path, instead

    def __call__(self, *args, **kwargs):
        raise _Forbidden(self._path, self._instead)

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        raise _Forbidden(self._path, self._instead)


def _op_aliases(path: str) -> list[str]:
    """The low-level routes to the same PyTorch operation: torch.X or torch.nn.functional.X also as
    torch.ops.aten.X and torch._C._nn.X."""
    parts = path.split(".")
    if parts[0] != "torch" or len(parts) < 2 or parts[1] in ("ops", "_C") or parts[-1][:1].isupper() or "*" in path:
        return []
    name = parts[-1]
    return [f"torch.ops.aten.{name}.default", f"torch.ops.aten.{name}", f"torch._C._nn.{name}",
            f"torch.ops.aten._{name}.default", f"torch.ops.aten._{name}", f"torch._{name}"]


class _forbidding:
    """Make forbidden functions raise _Forbidden for the duration of a block (see `call`)."""

    def __init__(self, forbid: Iterable[str | tuple[str, str]], fn):
        items = [(f, None) if isinstance(f, str) else tuple(f) for f in forbid]
        self.items = items + [(alias, instead) for path, instead in items for alias in _op_aliases(path)
                              if alias not in {p for p, _ in items}]
        self.patterns = [(path, instead) for path, instead in self.items if "*" in path]
        self.items = [(path, instead) for path, instead in self.items if "*" not in path]
        self.fn = fn
        self.patches = Patches()
        self.previous_profile = None

    def __enter__(self):
        try:
            return self._enter()
        except BaseException:
            self.__exit__(None, None, None)  # never leave a patch behind
            raise

    def _enter(self):
        if self.patterns:
            self._watch_patterns()
        if not self.items:
            return self
        user_globals = getattr(self.fn, "__globals__", {})
        modules = [m for n, m in list(sys.modules.items()) if m is not None and (n == "attnbook" or n.startswith("attnbook."))]
        resolved = []  # look every path up before patching any: an overload (X.default) is reached through X
        for path, instead in self.items:
            try:
                resolved.append((path, instead, *_resolve(path)))
            except (ValueError, AttributeError, RuntimeError):  # not installed here: the learner cannot call it
                continue
        for path, instead, owner, name, original in resolved:
            raiser = _Raiser(path, instead)
            try:
                self.patches.set(owner, name, raiser)
            except (AttributeError, TypeError):  # a read-only C attribute: nobody reaches it by accident
                continue
            # The same object reached another way: a name imported into the notebook or another module.
            for namespace_owner in [*modules]:
                for attr, value in list(vars(namespace_owner).items()):
                    if value is original and not (namespace_owner is owner and attr == name):
                        self.patches.set(namespace_owner, attr, raiser)
            for attr, value in list(user_globals.items()):
                if value is original or (isinstance(value, functools.partial) and value.func is original):
                    self.patches.set(user_globals, attr, raiser)
            for cell in getattr(self.fn, "__closure__", None) or ():  # a name from an enclosing function
                try:
                    if cell.cell_contents is original:
                        self.patches.set(cell, "cell_contents", raiser)
                except ValueError:  # an empty cell
                    pass
            for attr in ("__defaults__", "__kwdefaults__"):  # captured as a default: def f(x, _sm=shift_matrix)
                defaults = getattr(self.fn, attr, None)
                if isinstance(defaults, tuple) and any(d is original for d in defaults):
                    self.patches.set(self.fn, attr, tuple(raiser if d is original else d for d in defaults))
                elif isinstance(defaults, dict) and any(d is original for d in defaults.values()):
                    self.patches.set(self.fn, attr, {k: raiser if d is original else d for k, d in defaults.items()})
        return self

    def _watch_patterns(self) -> None:
        """Forbid every Python function whose dotted name matches a pattern ("transformers.models.*.rotate_half"):
        a profile hook sees each call, wherever the function was imported from (even inside the learner's code)."""
        import fnmatch

        patterns = self.patterns
        verdicts: dict = {}  # code object -> (name, instead) or None: each function is matched once

        def profile(frame, event, arg):
            if event != "call":
                return
            code = frame.f_code
            verdict = verdicts.get(code, False)
            if verdict is False:
                name = f"{frame.f_globals.get('__name__', '')}.{code.co_name}"
                verdict = next(((name, instead) for pattern, instead in patterns
                                if fnmatch.fnmatchcase(name, pattern)), None)
                verdicts[code] = verdict
            if verdict is not None:
                raise _Forbidden(*verdict)

        self.previous_profile = sys.getprofile()
        sys.setprofile(profile)

    def __exit__(self, *exc):
        if self.patterns:
            sys.setprofile(self.previous_profile)
        self.patches.restore()
        return False


NAN_HINT = "exp of a large number overflows to inf, and inf - inf or 0 / 0 gives NaN"


def expect_tensor(got, *, what: str = "your result", on: str = "", shape=None, dtype=None,
                  allow_sequences: bool = False, finite: bool = True, nan_hint: str | None = NAN_HINT) -> Tensor:
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
        raise Wrong(f"{what} contains {bad} (first at index {list(idx)}){where}", nan_hint)
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
                 mistakes: Mapping[str, Tensor] | None = None, nan_hint: str | None = NAN_HINT) -> None:
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
    if not got.is_floating_point() and expected.is_floating_point():
        raise Wrong(f"{what} has the integer dtype {got.dtype}{where}, expected floating point",
                    "integer tensors drop the fractional part: keep the computation in floating point "
                    "(no .int() or .long())")
    if got.dtype in (torch.float16, torch.bfloat16) and expected.dtype not in (torch.float16, torch.bfloat16) \
            and torch.allclose(got_d, exp_d, atol=1e-2, rtol=1e-2):
        raise Wrong(f"{what} has dtype {got.dtype}{where}, expected {expected.dtype}",
                    "half precision keeps only about 3 significant digits: return the dtype of the inputs "
                    "(no .half())")
    for hint, wrong in (mistakes or {}).items():
        w = wrong.detach().to(torch.float64).cpu()
        if w.shape == got_d.shape and torch.allclose(got_d, w, atol=atol, rtol=rtol, equal_nan=True):
            raise Wrong(f"{what} has the wrong values{where}", hint)
    expect_tensor(got, what=what, on=on, nan_hint=nan_hint)  # NaN or inf that no known mistake explains
    err = (got_d - exp_d).abs()
    idx = tuple(int(i) for i in (err == err.max()).nonzero()[0])
    raise Wrong(
        f"{what} has the wrong values{where}: at index {list(idx)} expected {_pair(exp_d[idx].item(), got_d[idx].item())}"
        f" (max abs error {err.max().item():.2g})"
    )


def as_value(answer, *, what: str = "your answer", expected: str = "a matrix") -> Tensor:
    """A float64 tensor from a value answer (tensor, NumPy array, number, nested list); else Wrong."""
    if answer is None:
        raise NotAttempted("nothing to check yet: set your answer above, run it, then this cell")
    if isinstance(answer, Tensor):
        if answer.is_complex() or answer.dtype == torch.bool:
            raise Wrong(f"{what} has dtype {answer.dtype}, expected real numbers ({expected})")
        if not answer.is_floating_point():
            return answer  # an integer tensor: expect_value says so unless it happens to be right
        return answer.detach().to(torch.float64).cpu()
    if isinstance(answer, bool) or not (isinstance(answer, (int, float, list, tuple)) or hasattr(answer, "__array__")):
        raise Wrong(f"{what} is {describe(answer)}, expected {expected}: a tensor, an array or a nested list of "
                    "numbers")
    try:
        return torch.as_tensor(_nested(answer), dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError) as e:
        raise Wrong(f"{what} could not be read as {expected} of numbers ({e})",
                    "write it as a tensor or as a nested list of numbers, one inner list per row") from None


def _nested(x):
    """Lists all the way down: tensors and arrays inside lists (a list of row tensors) become lists too."""
    if isinstance(x, Tensor):
        return x.detach().cpu().tolist()
    if isinstance(x, (list, tuple)):
        return [_nested(e) for e in x]
    if hasattr(x, "tolist"):
        return x.tolist()
    return x


VALUE_ENTRY_TRIES = 10  # after this many failed tries, a value answer's wrong entries are no longer named


def expect_value(got, expected: Tensor, *, what: str = "your answer", atol: float = 1e-3,
                 mistakes: Mapping[str, Tensor] | None = None, hint: str | None = None,
                 nan_hint: str | None = None) -> None:
    """Check a by-hand answer without giving it away: say which entries are wrong and the likely mistake,
    never the expected numbers or how far off they are.

    `got` comes from `as_value`; `mistakes` maps a hint to the value that mistake produces; `hint` is the
    general advice for a wrong value that no known mistake explains.
    """
    exp = expected.detach().to(torch.float64).cpu()
    shape = tuple(exp.shape)
    if tuple(got.shape) != shape:
        if shape and tuple(got.shape) == shape[::-1]:
            raise Wrong(f"{what} has shape {tuple(got.shape)}, expected {shape}",
                        "your matrix is transposed: row i must hold the result for row i of the input")
        raise Wrong(f"{what} has shape {tuple(got.shape)}, expected {shape}")
    if not got.is_floating_point():
        if torch.allclose(got.double(), exp, atol=atol, rtol=0.0):
            return
        raise Wrong(f"{what} is an integer tensor (dtype {got.dtype}), but the entries are not whole numbers",
                    "integer tensors drop the fractional part: write the numbers with a decimal point, or compute "
                    "them in floating point")
    if not torch.isfinite(got).all():
        bad = [list(map(int, i)) for i in (~torch.isfinite(got)).nonzero()]
        raise Wrong(f"{what} contains NaN or inf at {_entries(bad)}",
                    nan_hint or "every entry of the result is an ordinary finite number: check the step that made it")
    if torch.allclose(got, exp, atol=atol, rtol=0.0):
        return
    for mistake_hint, wrong in (mistakes or {}).items():
        w = wrong.detach().to(torch.float64).cpu()
        if w.shape == got.shape and torch.allclose(got, w, atol=atol, rtol=0.0):
            raise Wrong(f"{what} is not right", mistake_hint)
    if torch.allclose(got, exp, atol=5.01e-3, rtol=0.0) and atol < 5e-3:
        raise Wrong(f"{what} is not right to {atol:g}", f"it looks rounded too early: keep at least "
                    f"{max(1, round(-math.log10(atol)))} decimals, and round only at the end")
    if _current_attempts >= VALUE_ENTRY_TRIES:
        raise Wrong(f"{what} is not right (after {VALUE_ENTRY_TRIES} tries the wrong entries are no longer named: "
                    "work it out step by step instead of guessing)", hint)
    bad = [list(map(int, i)) for i in ((got - exp).abs() > atol).nonzero()]
    total = got.numel()
    which = "every entry" if len(bad) == total else _entries(bad)
    raise Wrong(f"{what} is not right: {which} {'are' if 1 < len(bad) < total else 'is'} wrong "
                f"(checked to {atol:g})", hint)


def _entries(indices: list[list[int]]) -> str:
    """'entry [0, 1]' or 'entries [0, 1] and [1, 1]'."""
    if len(indices) == 1:
        return f"entry {indices[0]}"
    return "entries " + ", ".join(map(str, indices[:-1])) + f" and {indices[-1]}"


def _pair(expected: float, got: float) -> str:
    """'1.742, got 1.743': enough significant digits that the two numbers differ on screen."""
    for digits in range(4, 17):
        a, b = f"{expected:.{digits}g}", f"{got:.{digits}g}"
        if a != b:
            return f"{a}, got {b}"
    return f"{expected:.17g}, got {got:.17g}"


def randn(*shape: int, seed: int, dtype: torch.dtype = torch.float32, std: float = 1.0) -> Tensor:
    """A checker's test input: standard normal (times `std`) from its own generator seeded with `seed`."""
    return std * torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


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

