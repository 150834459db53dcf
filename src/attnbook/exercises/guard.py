"""The call seam: `call` is the one way a checker runs the learner's code, in a notebook and in the grader.

In a notebook `call` runs the answer here (execute.py: the forbid policy of forbid.py around it, what it raised
turned into feedback by feedback.py); in the grader, inside `running_on(remote)`, it sends the call to the
sandboxed kernel as plain data (remote.py), where the same execute.py runs it. `checking(references)` adds the
exercise's references (the package's own solution) to what every call forbids, and `beside_answer` marks a
checker's helper that must run next to the answer object itself.
"""
from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Iterator, Sequence

from .execute import execute
from ..i18n import N_, _

DEFAULT_TIME_LIMIT_S = 10.0

# Where `call` runs, and what it forbids besides the task's list; changed only through `running_on` and
# `checking` below. The runner is None in a notebook (the learner's code runs in this process), else a
# remote.Remote (in the grader: the learner's code runs in the sandboxed kernel, on inputs sent as plain data).
_RUNNER = None
# The references of the exercise being checked (set by `results.check` through `checking`), which `call`
# forbids in every answer: the package's own solution is never an answer.
_REFERENCES: tuple[str, ...] = ()
UNIT = "__attnbook_unit__"  # marks a `beside_answer` helper, which the kernel may run by name


class checking:
    """Context manager: while an exercise is checked, `call` also refuses that exercise's `references`."""

    def __init__(self, references: Iterable[str]):
        self.references = tuple(references)

    def __enter__(self):
        global _REFERENCES
        self.previous, _REFERENCES = _REFERENCES, self.references
        return self

    def __exit__(self, *exc):
        global _REFERENCES
        _REFERENCES = self.previous
        return False


@contextlib.contextmanager
def running_on(runner):
    """While the block runs, `call` sends the learner's code to `runner` (a remote.Remote), or runs it here
    (None: the kernel's side of the grader, and a notebook)."""
    global _RUNNER
    previous, _RUNNER = _RUNNER, runner
    try:
        yield runner
    finally:
        _RUNNER = previous


def call(fn, *args, what: str = N_("your function"), on: str = "", time_limit_s: float = DEFAULT_TIME_LIMIT_S,
         forbid: Iterable[str | tuple[str, str]] | Callable = (), seed: int | None = 0,
         explain: Callable[[str], str | None] | None = None, observe=None, prepare: Callable | None = None,
         reload: bool = False, **kwargs):
    """Call the learner's `fn(*args, **kwargs)` and turn every way it can go wrong into Wrong/NotAttempted.

    The one way a checker runs the learner's code (the seam between the notebook and the grader, see remote.py):
    the inputs must be plain data, package functions or objects made by `@inputs.builds` factories. With
    `observe` (an `observe.Observer`), `call` returns (output, what the observer read beside the call).

    - `on` describes the input in the learner's terms ("q of shape (2, 3, 4)").
    - `forbid` lists what the task forbids, as dotted paths ("torch.softmax", "torch.Tensor.softmax",
      "attnbook.masks.padding_mask") or (path, what to do instead) pairs, and `*` patterns matched against the
      dotted names of Python functions ("transformers.models.*.rotate_half"); or a module-level function of the
      learner's function that returns the list. However the learner's code reaches one (a module attribute, a
      name imported into the notebook, a closure, a default argument, a tensor method, a copy of the function,
      the torch.ops/_C routes of an op), the call is refused and the learner is told plainly that the task asks
      for it to be written without it. The references of the exercise being checked (the package's own
      solution) are always forbidden.
    - `seed`: Python's, NumPy's and PyTorch's generators are seeded with it for the call and restored after,
      so random code gets the same verdict on every run (None leaves them alone).
    - `explain(message)` may return an exercise-specific hint for an exception; otherwise `explain_error`
      matches common exceptions to hints.
    - `prepare(fn)`, a module-level function, runs on the learner's function first; `reload` retries a call that
      a first import interrupted (execute.py).
    Tensor arguments are checked for in-place changes; code slower than `time_limit_s` is stopped (where the
    OS allows) and reported.
    """
    what, on = _(what), _(on)  # descriptions marked N_, in the language of the moment
    options = {"what": what, "on": on, "time_limit_s": time_limit_s, "forbid": forbid, "seed": seed,
               "explain": explain, "prepare": prepare, "reload": reload}
    if _RUNNER is not None:
        return _RUNNER.call(fn, args, kwargs, options, observe)
    out = execute(fn, args, kwargs, references=_REFERENCES, **options)
    return out if observe is None else (out, observe.read(out, args, kwargs))


def call_many(fn, *args, seeds: Sequence[int], what: str = N_("your function"), on: str = "",
              time_limit_s: float = DEFAULT_TIME_LIMIT_S, forbid: Iterable[str | tuple[str, str]] | Callable = (),
              explain: Callable[[str], str | None] | None = None, **kwargs) -> Iterator:
    """`call(fn, *args, seed=s, ...)` for each s in `seeds`, in order: an iterator of the outputs, which raises
    what a call raised when it reaches that call (the calls after it are not made).

    For a statistical check, which calls the answer many times on the same inputs with new random draws: in the
    grader the calls go to the kernel in one message (remote.py), each still run alone, under its own seed, time
    limit and forbid policy, so it costs one round trip instead of one per call. In a notebook each call runs
    when the iterator reaches it. A checker that may stop early (an answer that is slow for every call) asks for
    the calls in batches."""
    seeds = [int(s) for s in seeds]
    options = {"what": _(what), "on": _(on), "time_limit_s": time_limit_s, "forbid": forbid, "explain": explain,
               "prepare": None, "reload": False}
    if _RUNNER is not None:
        return _RUNNER.call_many(fn, args, kwargs, options, seeds)
    references = _REFERENCES
    return (execute(fn, args, kwargs, references=references, seed=seed, **options) for seed in seeds)


def beside_answer(helper):
    """Decorator for a checker's helper that needs the learner's object itself (its globals, a class test, a
    clock that reaches into it): `helper(answer, *args)` must return plain data or raise Wrong, and its other
    arguments must be plain data. In a notebook it just runs; in the grader it runs in the sandboxed kernel, on the
    learner's object, and only its outcome comes back."""
    @functools.wraps(helper)
    def wrapper(answer, *args, **kwargs):
        if _RUNNER is None:
            return helper(answer, *args, **kwargs)
        return _RUNNER.unit(wrapper, answer, args, kwargs)
    setattr(wrapper, UNIT, True)
    return wrapper


