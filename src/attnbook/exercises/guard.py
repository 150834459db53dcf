"""The guard around the learner's code: `call` runs an answer and turns everything that can go wrong into
feedback, and sees what the answer reaches that it may not (a forbidden function, the package's own solution).

What the answer reaches is recorded, never decided inside the learner's code: a forbidden function replaced by a
stand-in raises `Forbidden` and records the reach, and a profile hook records calls of forbidden Python and C
functions however they were reached (a copy, a second import, a read-only C attribute). A bare `except:` in the
answer can swallow the exception but not the record, and the hook never raises, so Python never removes it.
After the call, `call` turns the first record into `Wrong`.
"""
from __future__ import annotations

import functools
import inspect
import re
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterable

import torch
from torch import Tensor

from .hints import describe, explain_error
from .limits import TimeUp, one_thread, seeded, time_limit, warn_always
from .reach import code_keys, reachable, resolve, resolve_or_none, unwrap
from .registry import NotAttempted, Wrong
from ..i18n import N_, _

DEFAULT_TIME_LIMIT_S = 10.0

# Every route to a ready-made attention a learner might find: exercises that ask for attention written by hand
# forbid them all (with an exercise-specific "instead"). `op_aliases` adds each torch op's low-level routes.
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

REFERENCE_HINT = (N_("that is the package's own solution, which the chapter uses to show the result: write the "
                     "function yourself, in the answer cell"))


class Forbidden(BaseException):
    """Raised inside the learner's code when it calls something the task forbids (see `call(forbid=...)`)."""

    def __init__(self, name: str, instead: str | None = None):
        super().__init__(name, instead)


def op_aliases(path: str) -> list[str]:
    """The low-level routes to the same PyTorch operation: torch.X or torch.nn.functional.X also as
    torch.ops.aten.X and torch._C._nn.X (the one table of torch routes every forbid list goes through)."""
    parts = path.split(".")
    if parts[0] != "torch" or len(parts) < 2 or parts[1] in ("ops", "_C") or parts[-1][:1].isupper() or "*" in path:
        return []
    name = parts[-1]
    return [f"torch.ops.aten.{name}.default", f"torch.ops.aten.{name}", f"torch._C._nn.{name}",
            f"torch.ops.aten._{name}.default", f"torch.ops.aten._{name}", f"torch._{name}",
            f"torch._C._VariableFunctions.{name}"]


# The references of the exercise being checked (set by `results.check` through `checking`), which `call`
# forbids in every answer: the package's own solution is never an answer.
_REFERENCES: tuple[str, ...] = ()


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


# Where `call` runs: None here (the notebook: the learner's code runs in this process), else a remote.Remote (in
# the grader: the learner's code runs in the sandboxed kernel, on inputs sent as plain data; see remote.py).
_RUNNER = None
UNIT = "__attnbook_unit__"  # marks a `beside_answer` helper, which the kernel may run by name


class Raised(Wrong):
    """Wrong: the learner's code raised. `error` is its "Type: message"; the hint is worded from it, by the
    exercise's `explain` first (in the grader, from the kernel's report of the error)."""

    def __init__(self, what: str, where: str, error: str, explain: Callable[[str], str | None] | None):
        hint = (explain(error) if explain else None) or _inner_call_hint(error, what) or explain_error(error)
        super().__init__(_("{what} raised {error}{where}", what=what, error=error, where=where), hint)
        self.error = error


def _inner_call_hint(error: str, what: str) -> str | None:
    """A keyword that a function the answer calls does not take is the answer's own call, not the task's signature
    (which ERROR_HINTS would suggest): say so, naming the function."""
    m = re.search(r"(\w+)\(\) got an unexpected keyword argument '(\w+)'", error)
    if m is None or m.group(1) == what:
        return None
    return (_("{m_group_1}() has no parameter {m_group_2!r}: look at how your code calls {m_group_1} (the check "
              "itself calls {what} with the arguments the task gives)",
              m_group_1=m.group(1), m_group_2=m.group(2), what=what))


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
    from .execute import execute  # execute builds on this module
    out = execute(fn, args, kwargs, **options)
    return out if observe is None else (out, observe.read(out, args, kwargs))


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


def run_here(fn, args: tuple, kwargs: dict, *, what: str, on: str, time_limit_s: float, forbid, seed, explain):
    """`call` itself: run the learner's code in this process (see `call`)."""
    if isinstance(fn, str):
        raise Wrong(_("expected a function, got the string {fn!r}",
                      fn=fn), _("pass the function itself: its name without quotes"))
    if not callable(fn):
        raise Wrong(_("expected a function, got {describe_fn}",
                      describe_fn=describe(fn)), _("pass the function itself, without calling it"))
    where = _(" on {on}", on=on) if on else ""
    guard = _Forbidding(forbid, fn, _REFERENCES)
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
    if isinstance(error, RecursionError):
        guard.lost_profile = False  # Python drops a profile hook that overflows the stack: the error is the verdict
    guard.judge(what, where)  # a forbidden reach decides first, even if the answer swallowed it
    if isinstance(error, NotImplementedError):
        raiser = _raising_function(error)
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
            name = f"`{_parameter_name(fn, k)}`" if isinstance(k, int) else f"`{k}`"
            raise Wrong(_("{what} changed its input {name} in place{where}", what=what, name=name, where=where),
                        _("use out-of-place operations (y = a - b, not a -= b, a.sub_(b) or a[...] = ...), and "
                          "leave the arguments as they came in"))
    return out


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
    """Stands in for a forbidden function: calling it records the reach and raises. Attributes of the original
    (an op's `.default` overload) are stand-ins too; asking for anything else is an ordinary AttributeError."""

    def __init__(self, path: str, instead: str | None, original, guard: "_Forbidding", reference: bool = False):
        self._path, self._instead, self._original, self._guard = path, instead, original, guard
        self._reference = reference

    def __call__(self, *args, **kwargs):
        self._guard.record(self._path, self._instead, reference=self._reference)
        raise Forbidden(self._path, self._instead)

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        original = getattr(self._original, name)  # AttributeError as the original would raise it
        if not callable(original):
            return original
        return _Raiser(self._path, self._instead, original, self._guard, self._reference)


class _Forbidding:
    """Make forbidden functions unreachable for the duration of a block, and record every reach (see `call`)."""

    def __init__(self, forbid: Iterable[str | tuple[str, str]], fn, references: Iterable[str] = ()):
        items = [(f, None) if isinstance(f, str) else tuple(f) for f in forbid]
        items += [(alias, instead) for path, instead in items for alias in op_aliases(path)
                  if alias not in {p for p, _ in items}]
        self.references = [r for r in references if resolve_or_none(r) is not None]
        self.patterns = [(path, instead) for path, instead in items if "*" in path]
        # a reference is left in place and seen by its code, so that reaching it says "the package's own"
        self.items = [(path, instead) for path, instead in items if "*" not in path and path not in self.references]
        self.fn = fn
        self.patches = Patches()
        self.reached: list[tuple[str, str | None, bool]] = []
        self.profile = None
        self.previous_profile = None
        self.alive: list = []

    def record(self, path: str, instead: str | None, reference: bool) -> None:
        if not self.reached:  # the first reach is the one reported
            self.reached.append((path, instead, reference))

    def passed_itself(self):
        """(path, instead, is_reference) when `fn` is a forbidden function or reference itself, else None."""
        target = unwrap(self.fn)
        keys = code_keys(target)
        for path in self.references:
            obj = resolve_or_none(path)
            if target is obj or (keys and keys & code_keys(obj)):
                return path, None, True
        for path, instead in self.items:
            obj = resolve_or_none(path)
            if obj is not None and (target is obj or (keys and keys & code_keys(obj))):
                return path, instead, False
        return None

    def _targets(self) -> dict[tuple[str, int, str], tuple[str, str | None, bool]]:
        """{code key: (path, instead, is_reference)} of every forbidden Python function and reference, the
        package's own solution first."""
        targets = {}
        for path, instead, reference in ([(r, None, True) for r in self.references]
                                         + [(p, i, False) for p, i in self.items]):
            obj = resolve_or_none(path)
            if obj is None or isinstance(obj, _Raiser):
                continue
            for key in code_keys(obj):
                targets.setdefault(key, (path, instead, reference))
        return targets

    def reached_by_name(self):
        """(path, instead, is_reference) for the first forbidden function or reference that the answer reaches by
        name (see `reachable`), however it was copied or imported; else None."""
        targets = self._targets()
        if not targets:
            return None
        hits = [targets[key] for obj in reachable(self.fn) for key in code_keys(obj) if key in targets]
        return next((hit for hit in hits if hit[2]), hits[0] if hits else None)  # the package's own first

    def judge(self, what: str, where: str) -> None:
        """Raise Wrong for the first forbidden reach of the block that just ran (if any)."""
        if self.profile is not None and self.lost_profile:
            raise Wrong(_("{what} switched off the profiler the check uses to see what it calls "
                          "(sys.setprofile){where}",
                          what=what, where=where), _("leave sys.setprofile alone in an answer"))
        if not self.reached:
            return
        path, instead, reference = self.reached[0]
        if reference:
            raise Wrong(_("{what} calls {path}{where}, the package's own solution, so it is not an answer of "
                          "yours", what=what, path=path, where=where),
                        REFERENCE_HINT)
        raise Wrong(_("{what} called {path}{where}: the task asks you to write this without {path}",
                      what=what, path=path, where=where),
                    _(instead) if instead else _("build it from the basic tensor operations the task names"))

    def __enter__(self):
        try:
            profile = self._watch()  # looks the originals up, so before they are patched
            self._patch()
            if profile is not None:  # installed last: patching itself need not be watched
                self.previous_profile = sys.getprofile()
                self.previous_thread_profile = threading.getprofile()
                self.profile = profile
                self.lost_profile = False
                sys.setprofile(profile)
                threading.setprofile(profile)  # a thread the answer starts is watched too
        except BaseException:
            self.__exit__(None, None, None)  # never leave a patch behind
            raise
        return self

    def __exit__(self, *exc):
        if self.profile is not None:
            self.lost_profile = sys.getprofile() is not self.profile
            sys.setprofile(self.previous_profile)
            threading.setprofile(self.previous_thread_profile)
        self.patches.restore()
        return False

    def _patch(self) -> None:
        self._watch_second_imports()
        for path in self.references:  # calls through any module attribute, the package's own insides included
            try:
                owner, name, original = resolve(path)
            except (ValueError, AttributeError, RuntimeError):
                continue
            try:
                self.patches.set(owner, name, _Raiser(path, None, original, self, reference=True))
            except (AttributeError, TypeError):
                continue
            for module in [m for n, m in list(sys.modules.items())
                           if m is not None and (n == "attnbook" or n.startswith("attnbook."))]:
                for attr, value in list(vars(module).items()):
                    if value is original and not (module is owner and attr == name):
                        self.patches.set(module, attr, _Raiser(path, None, original, self, reference=True))
        if not self.items:
            return
        user_globals = getattr(unwrap(self.fn), "__globals__", {})
        modules = [m for n, m in list(sys.modules.items())
                   if m is not None and (n == "attnbook" or n.startswith("attnbook."))]
        resolved = []  # look every path up before patching any: an overload (X.default) is reached through X
        for path, instead in self.items:
            try:
                resolved.append((path, instead, *resolve(path)))
            except (ValueError, AttributeError, RuntimeError):  # not installed here: the learner cannot call it
                continue
        for path, instead, owner, name, original in resolved:
            raiser = _Raiser(path, instead, original, self)
            try:
                self.patches.set(owner, name, raiser)
            except (AttributeError, TypeError):  # a read-only C attribute: the profile hook sees its calls
                continue
            # The same object reached another way: a name imported into the notebook or another module.
            for namespace_owner in modules:
                for attr, value in list(vars(namespace_owner).items()):
                    if value is original and not (namespace_owner is owner and attr == name):
                        self.patches.set(namespace_owner, attr, raiser)
            for attr, value in list(user_globals.items()):
                if value is original or (isinstance(value, functools.partial) and value.func is original):
                    self.patches.set(user_globals, attr, raiser)
            for cell in getattr(unwrap(self.fn), "__closure__", None) or ():  # a name from an enclosing function
                try:
                    if cell.cell_contents is original:
                        self.patches.set(cell, "cell_contents", raiser)
                except ValueError:  # an empty cell
                    pass
            fn = unwrap(self.fn)
            for attr in ("__defaults__", "__kwdefaults__"):  # captured as a default: def f(x, _sm=shift_matrix)
                defaults = getattr(fn, attr, None)
                if isinstance(defaults, tuple) and any(d is original for d in defaults):
                    self.patches.set(fn, attr, tuple(raiser if d is original else d for d in defaults))
                elif isinstance(defaults, dict) and any(d is original for d in defaults.values()):
                    self.patches.set(fn, attr, {k: raiser if d is original else d for k, d in defaults.items()})

    def _watch_second_imports(self) -> None:
        """Record a reach when the answer loads, during the call, a fresh copy of the package file that defines a
        reference or a forbidden function (importlib's spec_from_file_location + exec_module, reload)."""
        from importlib.machinery import SourceFileLoader

        files: dict[str, tuple[str, str | None, bool]] = {}
        for path, instead, reference in ([(r, None, True) for r in self.references]
                                         + [(p, i, False) for p, i in self.items]):
            for filename, _, _ in code_keys(resolve_or_none(path)):
                files.setdefault(filename, (path, instead, reference))
        if not files:
            return
        get_code, record = SourceFileLoader.get_code, self.record

        def watched_get_code(loader, fullname):
            code = get_code(loader, fullname)
            if code is not None and code.co_filename in files:
                record(*files[code.co_filename])
            return code

        self.patches.set(SourceFileLoader, "get_code", watched_get_code)

    def _watch(self):
        """A profile hook that records calls of forbidden functions however they are reached: Python functions
        by their code (copies and second imports included) or by a `*` pattern on their dotted name, C functions
        (torch ops, read-only routes included) by identity, tensor methods by name. It never raises."""
        import fnmatch

        by_code = self._targets()
        builtins: dict[int, tuple[str, str | None, bool]] = {}
        methods: dict[str, tuple[str, str | None, bool]] = {}
        for path, instead, reference in ([(r, None, True) for r in self.references]
                                         + [(p, i, False) for p, i in self.items]):
            obj = resolve_or_none(path)
            if obj is None or isinstance(obj, _Raiser):
                continue
            if inspect.isbuiltin(obj) or type(obj).__name__ in ("OpOverloadPacket", "OpOverload"):
                builtins.setdefault(id(obj), (path, instead, reference))
                self.alive.append(obj)  # its id stays its own while the hook runs
            parts = path.split(".")
            if parts[:2] == ["torch", "Tensor"] and len(parts) == 3:
                methods.setdefault(parts[2], (path, instead, reference))
        patterns = self.patterns
        if not patterns and not self.references:
            return None  # names and copies of forbidden functions are found by `reached_by_name`
        seen: dict = {}  # code object -> verdict or None: each function is matched once
        record = self.record

        def profile(frame, event, arg):
            if event == "call":
                code = frame.f_code
                verdict = seen.get(code, False)
                if verdict is False:
                    verdict = by_code.get((code.co_filename, code.co_firstlineno, code.co_name))
                    if verdict is None and patterns:
                        name = f"{frame.f_globals.get('__name__', '')}.{code.co_name}"
                        verdict = next(((name, instead, False) for pattern, instead in patterns
                                        if fnmatch.fnmatchcase(name, pattern)), None)
                    seen[code] = verdict
                if verdict is not None:
                    record(*verdict)
            elif event == "c_call":
                verdict = builtins.get(id(arg))
                if verdict is None and methods and isinstance(getattr(arg, "__self__", None), Tensor):
                    verdict = methods.get(getattr(arg, "__name__", ""))
                if verdict is not None:
                    record(*verdict)

        return profile


def _parameter_name(fn, index: int) -> str:
    """The name of positional parameter `index` of `fn` ("argument 2" when it cannot be found)."""
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        return params[index].name
    except (TypeError, ValueError, IndexError):
        return _("argument {number}", number=index + 1)


def _raising_function(e: BaseException) -> str | None:
    """The name of the function in which exception `e` was raised (the innermost frame of its traceback)."""
    tb = e.__traceback__
    if tb is None:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_code.co_name
