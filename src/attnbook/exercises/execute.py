"""Running the learner's code for one call of a check, where that code lives.

`execute` is what `guard.call` does in a notebook, and what the sandboxed kernel does when the grader asks it to
run an answer on the grader's inputs (remote.py): one function, so both runners treat the learner's code alike.
Around `guard.run_here` it adds what some checks need beside the call: `prepare(fn)` (a module-level function of
the package, run on the learner's function first), `forbid` given as a function of the learner's function, and
`reload`: a module that the learner's code imports for the first time is imported outside the call, and the
call runs again.
"""
from __future__ import annotations

import importlib
import sys

import torch

from .guard import Forbidden, run_here
from .registry import Wrong

MAX_RELOADS = 10


def execute(fn, args: tuple, kwargs: dict, *, what: str, on: str, time_limit_s: float, forbid, seed, explain,
            prepare=None, reload: bool = False):
    """`guard.run_here(fn, args, kwargs, ...)` with `prepare`, a callable `forbid` and `reload` (module docstring)."""
    if prepare is not None:
        prepare(fn)
    if callable(forbid):
        forbid = forbid(fn)
    options = dict(what=what, on=on, time_limit_s=time_limit_s, forbid=forbid, seed=seed, explain=explain)
    if not reload:
        return run_here(fn, args, kwargs, **options)
    # A function compiled with torch.compile is checked as the function it compiles (the same results): the
    # compiler reads PyTorch's namespaces while it traces, and would find the stand-ins for the forbidden names.
    original = getattr(fn, "_torchdynamo_orig_callable", None)
    if callable(original) and not isinstance(fn, torch.nn.Module):
        fn = original
    imported: set[str] = set()
    while True:
        try:
            return run_here(fn, args, kwargs, **options)
        except Wrong as e:
            module = interrupted_import(e)
            if module is None or module in imported or len(imported) >= MAX_RELOADS:
                raise
            imported.add(module)
            try:
                importlib.import_module(module)  # outside the checked call: what the learner's code would import
            except Exception:  # noqa: BLE001 - not importable after all: report what the call did
                raise e from None


def interrupted_import(error: Wrong) -> str | None:
    """The module whose import a forbidden name stopped, if that is what `error` reports, else None.

    Modules that PyTorch or transformers import lazily (torch._dynamo on the first torch.compile call,
    torch.distributed.tensor, transformers.integrations) register handlers for attention ops at import time.
    When the learner's code triggers such an import inside the check, that registration touches a forbidden name
    although the learner never called it. The import is told apart from a call by the module-level frames
    ("<module>") between the learner's code and the forbidden name.
    """
    forbidden, seen = error.__context__, set()
    while forbidden is not None and not isinstance(forbidden, Forbidden) and id(forbidden) not in seen:
        seen.add(id(forbidden))
        forbidden = forbidden.__cause__ or forbidden.__context__  # dynamo wraps it in its own errors
    if not isinstance(forbidden, Forbidden):
        return None
    names = []
    path = str(forbidden.args[0])
    if path.endswith(".<module>"):  # a "*" pattern matched the module's own top-level code
        names.append(path[: -len(".<module>")])
    tb = forbidden.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_name == "<module>":
            names.append(tb.tb_frame.f_globals.get("__name__"))
        tb = tb.tb_next
    return next((n for n in names if isinstance(n, str) and n not in sys.modules), None)
