"""Running the learner's code for one call of a check, where that code lives.

`execute` is what `guard.call` does in a notebook, and what the sandboxed kernel does when the grader asks it to
run an answer on the grader's inputs (remote.py): one function, so both runners treat the learner's code alike.
`run_here` (at the end) runs one call here, with the forbid policy (forbid.py) around it and what the code
raised turned into feedback (feedback.py); around it `execute` adds what some checks need beside the call: `prepare(fn)` (a module-level function of
the package, run on the learner's function first), `forbid` given as a function of the learner's function, and
`reload`: a module that the learner's code imports for the first time is imported outside the call, and the
call runs again.
"""
from __future__ import annotations

import importlib
import sys
import time
import warnings

import torch
from torch import Tensor

from .feedback import Raised, parameter_name, raising_function
from .forbid import REFERENCE_HINT, Forbidden, Forbidding
from .hints import describe
from .limits import TimeUp, one_thread, seeded, time_limit, warn_always
from .registry import NotAttempted, Wrong
from ..i18n import _

MAX_RELOADS = 10


def execute(fn, args: tuple, kwargs: dict, *, what: str, on: str, time_limit_s: float, forbid, seed, explain,
            prepare=None, reload: bool = False, references=()):
    """`run_here(fn, args, kwargs, ...)` with `prepare`, a callable `forbid` and `reload` (module docstring);
    `references`, the exercise's own solution, is forbidden with `forbid`."""
    if prepare is not None:
        prepare(fn)
    if callable(forbid):
        forbid = forbid(fn)
    options = dict(what=what, on=on, time_limit_s=time_limit_s, forbid=forbid, seed=seed, explain=explain,
                   references=references)
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


def run_here(fn, args: tuple, kwargs: dict, *, what: str, on: str, time_limit_s: float, forbid, seed, explain,
             references=()):
    """`guard.call` itself: run the learner's code in this process (see `call`), with `references` (the
    package's own solution) forbidden as well."""
    if isinstance(fn, str):
        raise Wrong(_("expected a function, got the string {fn!r}",
                      fn=fn), _("pass the function itself: its name without quotes"))
    if not callable(fn):
        raise Wrong(_("expected a function, got {describe_fn}",
                      describe_fn=describe(fn)), _("pass the function itself, without calling it"))
    where = _(" on {on}", on=on) if on else ""
    guard = Forbidding(forbid, fn, references)
    passed_itself = guard.passed_itself()
    if passed_itself is not None:
        path, instead, reference = passed_itself
        if reference:
            raise Wrong(_("what you passed is {path}, the package's own solution, not an answer of yours",
                          path=path),
                        _(REFERENCE_HINT) + _(" (if a cell above imported it under this name, your answer cell has "
                                              "not been run: run it, then this check)"))
        raise Wrong(_("what you passed is {path} itself: the task asks you to write this without {path}",
                      path=path),
                    (_(instead) if instead else _("write your own function")) + _(" (if a cell above imported it under this name, "
                                                                                  "your answer cell has not been run: run it, then this check)"))
    before = {i: a.detach().clone() for i, a in enumerate(args) if isinstance(a, Tensor)}
    before.update({k: v.detach().clone() for k, v in kwargs.items() if isinstance(v, Tensor)})
    start = time.perf_counter()
    error: BaseException | None = None
    out, caught = None, []
    try:
        with time_limit(time_limit_s), seeded(seed), one_thread(), guard, warn_always(), \
                warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = fn(*args, **kwargs)
    except BaseException as e:  # judged below, after what the answer reached
        if not isinstance(e, (Exception, TimeUp, Forbidden)):
            raise  # KeyboardInterrupt, SystemExit: the learner's own wish to stop
        error = e
    # A copy or a second import, which no stand-in reaches, read from the bytecode: the package's own solution is
    # named before anything else the answer reached; another forbidden function only if nothing was seen running.
    static = guard.reached_by_name()
    if static is not None and (not guard.reached or (static[2] and not any(r[2] for r in guard.reached))):
        guard.reached.insert(0, static)
    if isinstance(error, (RecursionError, TimeUp)) or time.perf_counter() - start > time_limit_s:
        # Python drops a profile hook that overflows the stack, or that the time limit's signal interrupts (a
        # single long C call ends inside it): the error, or the time taken, is the verdict
        guard.lost_profile = False
    guard.judge(what, where)  # a forbidden reach decides first, even if the answer swallowed it
    if isinstance(error, NotImplementedError):
        raiser = raising_function(error)
        if raiser is not None and raiser != getattr(fn, "__name__", raiser):
            raise Wrong(_("{what} called {raiser}, which still raises NotImplementedError{where}",
                          what=what, raiser=raiser, where=where),
                        _("finish {raiser} first (its own exercise), or write those steps inside {what}",
                          raiser=raiser, what=what)) from None
        raise NotAttempted(_("your code still raises NotImplementedError: replace the stub with your solution")) from None
    if isinstance(error, TimeUp):
        raise Wrong(_("{what} took longer than {time_limit_s:g} s{where} and was stopped",
                      what=what, time_limit_s=time_limit_s, where=where),
                    _("look for a loop that never ends (an index or a condition that never changes), a Python loop "
                      "over every element where tensor operations would do, or something much bigger than the task "
                      "needs being built")) from None
    if isinstance(error, Forbidden):  # a stand-in of a forbidden function left behind by an earlier call
        path, instead = error.args[0], error.args[1] if len(error.args) > 1 else None
        raise Wrong(_("{what} called {path}{where}: the task asks you to write this without {path}",
                      what=what, path=path, where=where),
                    _(instead) if instead else _("build it from the basic tensor operations the task names")) from None
    if error is not None:
        message = f"{type(error).__name__}: {error}"
        if any("x.T` on tensors of dimension other than 2" in str(w.message) for w in caught or ()):
            # part of the error's own text, in English like PyTorch's, which explain_error's patterns read
            message += " (after a warning that .T was used on a tensor that is not 2-D)"
        raise Raised(what, where, message, explain) from None
    elapsed = time.perf_counter() - start
    if elapsed > time_limit_s:
        raise Wrong(_("{what} took {elapsed:.1f} s{where} (limit {time_limit_s:g} s)",
                      what=what, elapsed=elapsed, where=where, time_limit_s=time_limit_s),
                    _("look for a Python loop over every element (use tensor operations instead), or for something "
                      "much bigger than the task needs being built"))
    for k, old in before.items():
        new = args[k] if isinstance(k, int) else kwargs[k]
        if new.shape != old.shape or not torch.equal(new.detach(), old):
            name = f"`{parameter_name(fn, k)}`" if isinstance(k, int) else f"`{k}`"
            raise Wrong(_("{what} changed its input {name} in place{where}", what=what, name=name, where=where),
                        _("use out-of-place operations (y = a - b, not a -= b, a.sub_(b) or a[...] = ...), and "
                          "leave the arguments as they came in"))
    return out
