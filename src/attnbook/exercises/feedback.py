"""Feedback on what the learner's code raised: `Raised` words a hint from the error (the exercise's own
`explain` first, then the shared patterns of hints.py), and the small readers `run_here` uses to name a
parameter or the function that raised."""
from __future__ import annotations

import inspect
import re
from collections.abc import Callable

from .hints import explain_error
from .registry import Wrong
from ..i18n import _


class Raised(Wrong):
    """Wrong: the learner's code raised. `error` is its "Type: message"; the hint is worded from it, by the
    exercise's `explain` first (in the grader, from the kernel's report of the error)."""

    def __init__(self, what: str, where: str, error: str, explain: Callable[[str], str | None] | None):
        hint = (explain(error) if explain else None) or inner_call_hint(error, what) or explain_error(error)
        super().__init__(_("{what} raised {error}{where}", what=what, error=error, where=where), hint)
        self.error = error


def inner_call_hint(error: str, what: str) -> str | None:
    """A keyword that a function the answer calls does not take is the answer's own call, not the task's signature
    (which ERROR_HINTS would suggest): say so, naming the function."""
    m = re.search(r"(\w+)\(\) got an unexpected keyword argument '(\w+)'", error)
    if m is None or m.group(1) == what:
        return None
    return (_("{m_group_1}() has no parameter {m_group_2!r}: look at how your code calls {m_group_1} (the check "
              "itself calls {what} with the arguments the task gives)",
              m_group_1=m.group(1), m_group_2=m.group(2), what=what))


def parameter_name(fn, index: int) -> str:
    """The name of positional parameter `index` of `fn` ("argument 2" when it cannot be found)."""
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        return params[index].name
    except (TypeError, ValueError, IndexError):
        return _("argument {number}", number=index + 1)


def raising_function(e: BaseException) -> str | None:
    """The name of the function in which exception `e` was raised (the innermost frame of its traceback)."""
    tb = e.__traceback__
    if tb is None:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_code.co_name
