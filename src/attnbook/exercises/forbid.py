"""The forbid policy: what an answer may not reach, and how `call` sees it reach it anyway.

`ATTENTION_SHORTCUTS` is the one table of ready-made attentions; `op_aliases` gives every torch op's low-level
routes. `Forbidding` makes forbidden functions unreachable for the duration of a call and records every reach:
a forbidden function replaced by a stand-in (`Raiser`) raises `Forbidden` and records the reach, and a profile
hook records calls of forbidden Python and C functions however they were reached (a copy, a second import, a
read-only C attribute) and of the exercise's references (the package's own solution). A bare `except:` in the
answer can swallow the exception but not the record, and the hook never raises, so Python never removes it.
After the call, `Forbidding.judge` turns the first record into `Wrong`. `Patches` are the temporary replacements
it makes (chapter 9's clock uses them too).
"""
from __future__ import annotations

import functools
import inspect
import sys
import threading
from collections.abc import Iterable

from torch import Tensor

from .reach import code_keys, reachable, resolve, resolve_or_none, unwrap
from .registry import Wrong
from ..i18n import N_, _

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


class Raiser:
    """Stands in for a forbidden function: calling it records the reach and raises. Attributes of the original
    (an op's `.default` overload) are stand-ins too; asking for anything else is an ordinary AttributeError."""

    def __init__(self, path: str, instead: str | None, original, guard: "Forbidding", reference: bool = False):
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
        return Raiser(self._path, self._instead, original, self._guard, self._reference)

    def __mro_entries__(self, bases):
        """A class statement naming the stand-in as a base gets the original class (PEP 560): a module imported
        during the call may subclass a forbidden class (transformers' `class LayerWiseDummyScheduler(
        LRScheduler)`), which calls nothing; a learner's subclass is caught when its methods run the original's."""
        return (self._original,)


def _op_builtins(obj) -> list:
    """The C functions an aten op runs when called: an OpOverload's `_op`, and an OpOverloadPacket's with each of
    its overloads' (an op held under any name, in any module or container, reaches one of them)."""
    if type(obj).__name__ not in ("OpOverloadPacket", "OpOverload"):
        return []
    found = [getattr(obj, "_op", None)]
    if type(obj).__name__ == "OpOverloadPacket":
        for name in obj.overloads():
            try:
                found.append(getattr(getattr(obj, name), "_op", None))
            except (AttributeError, RuntimeError):
                continue
    return [f for f in found if f is not None and inspect.isbuiltin(f)]


def _holders(originals) -> dict[int, list[tuple[object, str]]]:
    """{id(object): [(module, attribute), ...]} for every attribute of an attnbook module that holds one of
    `originals`, in sys.modules order: one pass over the package's modules for all of them (a pass per forbidden
    path made setting up each call most of a check's time). The caller keeps `originals` alive."""
    wanted = {id(o) for o in originals}
    where: dict[int, list[tuple[object, str]]] = {}
    for m in _package_modules():
        for attr, value in list(vars(m).items()):
            if id(value) in wanted:
                where.setdefault(id(value), []).append((m, attr))
    return where


_SEEN: list = [None, []]  # [what sys.modules looked like, its attnbook modules then]


def _package_modules() -> list:
    """The attnbook modules in sys.modules, in its order. Filtering all of sys.modules (thousands once transformers
    is imported) on every call was a fifth of the catalogue's time, so the list is kept while sys.modules has the
    same size and last key (an import appends, a removal shrinks) and still holds the same module under each name."""
    key = (len(sys.modules), next(reversed(sys.modules), None))
    if _SEEN[0] != key or any(sys.modules.get(n) is not m for n, m in _SEEN[1]):
        _SEEN[:] = [key, [(n, m) for n, m in list(sys.modules.items())
                          if m is not None and (n == "attnbook" or n.startswith("attnbook."))]]
    return [m for _n, m in _SEEN[1]]


def _still(holders: list[tuple[object, str]], original) -> list[tuple[object, str]]:
    """The (module, attribute) pairs that hold `original` now (an earlier patch may have replaced it)."""
    return [(m, attr) for m, attr in holders if vars(m).get(attr, _ABSENT) is original]


_ABSENT = object()


class Forbidding:
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
            if obj is None or isinstance(obj, Raiser):
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
        # Look every path up before patching any (an overload X.default is reached through X), then find where
        # each object sits in the package's modules, in one pass.
        references = []
        for path in self.references:
            try:
                references.append((path, *resolve(path)))
            except (ValueError, AttributeError, RuntimeError):
                continue
        resolved = []
        for path, instead in self.items:
            try:
                resolved.append((path, instead, *resolve(path)))
            except (ValueError, AttributeError, RuntimeError):  # not installed here: the learner cannot call it
                continue
        if not references and not resolved:  # nothing to stand in for (a statistical check's many calls)
            return
        holders = _holders([r[-1] for r in references] + [r[-1] for r in resolved])
        for path, owner, name, original in references:  # calls through any module attribute, the package's own
            try:                                          # insides included
                self.patches.set(owner, name, Raiser(path, None, original, self, reference=True))
            except (AttributeError, TypeError):
                continue
            for module, attr in _still(holders.get(id(original), []), original):
                if not (module is owner and attr == name):
                    self.patches.set(module, attr, Raiser(path, None, original, self, reference=True))
        if not self.items:
            return
        user_globals = getattr(unwrap(self.fn), "__globals__", {})
        for path, instead, owner, name, original in resolved:
            raiser = Raiser(path, instead, original, self)
            try:
                self.patches.set(owner, name, raiser)
            except (AttributeError, TypeError):  # a read-only C attribute: the profile hook sees its calls
                continue
            # The same object reached another way: a name imported into the notebook or another module.
            for namespace_owner, attr in _still(holders.get(id(original), []), original):
                if not (namespace_owner is owner and attr == name):
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
            for filename, _line, _name in code_keys(resolve_or_none(path)):
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
            if obj is None or isinstance(obj, Raiser):
                continue
            if inspect.isbuiltin(obj) or type(obj).__name__ in ("OpOverloadPacket", "OpOverload"):
                for c_function in (obj, *_op_builtins(obj)):
                    builtins.setdefault(id(c_function), (path, instead, reference))
                    self.alive.append(c_function)  # its id stays its own while the hook runs
            parts = path.split(".")
            if parts[:2] == ["torch", "Tensor"] and len(parts) == 3:
                methods.setdefault(parts[2], (path, instead, reference))
        patterns = self.patterns
        if not patterns and not self.references and not builtins:
            return None  # names and copies of forbidden Python functions are found by `reached_by_name`
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
