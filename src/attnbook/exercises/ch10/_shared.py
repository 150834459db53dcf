"""What chapter 10's checkers share: `call_reloading`, the guard's `call` for learner code that imports a module for the
first time while it is checked."""
from __future__ import annotations

import importlib
import sys

import torch

from ..guard import Forbidden, call, recorded
from ..registry import Wrong


def _interrupted_import(error: Wrong) -> str | None:
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


@recorded  # a retry loop around `call` that reads the learner's function: one recorded outcome
def call_reloading(fn, *args, forbid=(), **kwargs):
    """`call`, but a module that the learner's code imports for the first time is imported before the check.

    `forbid` may be a function of the learner's function (`repeat_kv_forbidden`), giving the forbidden names.

    Its import is then not part of the checked call (it would trip over the forbidden names, see
    `_interrupted_import`); the learner's code runs again, with every forbidden name still forbidden. A function
    compiled with torch.compile is checked as the function it compiles (the same results): the compiler reads
    PyTorch's namespaces while it traces, and would find the stand-ins for the forbidden names there.
    """
    if callable(forbid):
        forbid = forbid(fn)
    original = getattr(fn, "_torchdynamo_orig_callable", None)
    if callable(original) and not isinstance(fn, torch.nn.Module):
        fn = original
    imported: set[str] = set()
    while True:
        try:
            return call(fn, *args, forbid=forbid, **kwargs)
        except Wrong as e:
            module = _interrupted_import(e)
            if module is None or module in imported or len(imported) >= 10:
                raise
            imported.add(module)
            try:
                importlib.import_module(module)  # outside the checked call: what the learner's code would import
            except Exception:  # noqa: BLE001 - not importable after all: report what the call did
                raise e from None
