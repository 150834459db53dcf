"""What an answer is and what it reaches by name, found without running it: the function behind wrappers
(`unwrap`), objects at dotted paths (`resolve`), the identity of Python code wherever it is copied or
re-imported (`code_keys`), and the functions an answer's bytecode names (`reachable`). `guard` uses them to
refuse a copy or a second import of a forbidden function or of the package's own solution."""
from __future__ import annotations

import functools
import importlib
import inspect
import sys


def unwrap(fn):
    """The function behind functools.partial / functools.wraps layers and bound methods."""
    for _ in range(10):
        if isinstance(fn, functools.partial):
            fn = fn.func
        elif hasattr(fn, "__wrapped__"):
            fn = fn.__wrapped__
        elif inspect.ismethod(fn):
            fn = fn.__func__
        else:
            break
    return fn


# Dotted names that importlib could not import and never will: a forbid list resolves hundreds of paths through
# them on every call, and a failed import searches the file system each time.
_NOT_MODULES: set[str] = set()


def _never_a_module(name: str) -> bool:
    """True when no import of `name` can succeed: torch.ops's op namespaces (an object, not a package), or a name
    under a loaded module that is not a package (no __path__: nothing below it is importable). Asked again on
    every use of what was remembered, so a learner's changes (a __path__ added) cannot make it skip a real import."""
    if name == "torch.ops" or name.startswith("torch.ops."):
        return True
    parent = sys.modules.get(name.rpartition(".")[0])
    return parent is not None and not hasattr(parent, "__path__")


def _import(name: str):
    """importlib.import_module(name), without repeating an import that cannot succeed."""
    module = sys.modules.get(name)
    if module is not None:  # what import_module returns too
        return module
    if name in _NOT_MODULES and _never_a_module(name):
        raise ImportError(name)
    try:
        return importlib.import_module(name)
    except ImportError:
        if _never_a_module(name):
            _NOT_MODULES.add(name)
        raise


def resolve(path: str):
    """(owner, attribute name, object) for a dotted path such as "torch.Tensor.softmax"; ValueError if none."""
    parts = path.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            owner = _import(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:-1]:
            owner = getattr(owner, name)
        return owner, parts[-1], getattr(owner, parts[-1])
    raise ValueError(f"cannot resolve forbidden name {path!r}")


def resolve_or_none(path: str):
    """The object at a dotted path, or None when it does not exist here."""
    try:
        return resolve(path)[2]
    except (ValueError, AttributeError, RuntimeError):
        return None


def code_keys(obj) -> set[tuple[str, int, str]]:
    """What identifies the Python code of a function or class wherever it is copied or re-imported:
    (file, first line, name) of the function, or of every function defined in the class."""
    obj = unwrap(obj)
    functions = []
    if isinstance(obj, type):
        for value in vars(obj).values():
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            if isinstance(value, property):
                value = value.fget
            functions.append(value)
    else:
        functions.append(obj)
    keys = set()
    for f in functions:
        code = getattr(unwrap(f), "__code__", None)
        if code is not None:
            keys.add((code.co_filename, code.co_firstlineno, code.co_name))
    return keys


def reachable(fn, limit: int = 400) -> list:
    """The functions and classes the answer `fn` can reach by name, found without running it: what its code (and
    the code of functions nested in it) names in its globals, closure, defaults and in modules it names (a
    second import of a package module included), followed through the learner's own helper functions, not into
    libraries. Used to see a copy or a second import of a forbidden function, which no attribute patch reaches."""
    import types

    seen: set[int] = set()
    found: list = []
    queue = [unwrap(fn)]
    while queue and len(seen) < limit:
        obj = queue.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, functools.partial):
            queue += [obj.func, *obj.args, *obj.keywords.values()]
            continue
        if isinstance(obj, (list, tuple, set, frozenset, dict)):  # a function kept in a container: REFS[0](...)
            items = list(obj.values()) if isinstance(obj, dict) else list(obj)
            queue += [v for v in items[:limit] if _worth_following(v)]
            continue
        if isinstance(obj, types.MethodType):
            if _is_learner_instance(obj.__self__):
                queue.append(obj.__self__)
            obj = obj.__func__
        if _is_learner_instance(obj):  # an object (with __call__, or a bound method's): its class and attributes
            queue.append(type(obj))
            queue += [v for v in list(getattr(obj, "__dict__", {}).values())[:limit] if _worth_following(v)]
            continue
        if isinstance(obj, type) and obj.__module__.split(".")[0] not in _LIBRARIES:
            # a class of the learner's: the functions defined in it, and what its class attributes hold
            queue += [v.__func__ if isinstance(v, (staticmethod, classmethod)) else v
                      for v in list(vars(obj).values())[:limit] if _worth_following(v)]
        if isinstance(obj, type) or (callable(obj) and hasattr(obj, "__code__")):
            found.append(obj)
        if not isinstance(obj, types.FunctionType):
            continue
        module = getattr(obj, "__module__", None) or ""
        if module.split(".")[0] in _LIBRARIES and found[-1] is not unwrap(fn):
            continue  # a library function: its own insides are the library's business
        values = _referenced(obj)
        values += list(obj.__defaults__ or ()) + list((obj.__kwdefaults__ or {}).values())
        queue += [v for v in values if _worth_following(v)]
    return found


_LIBRARIES = ("torch", "numpy", "attnbook", "transformers", "scipy", "builtins")


def _is_learner_instance(obj) -> bool:
    """An object of a class defined outside the libraries (the learner's), not a function, class or container:
    what its class's methods (its __call__) call may be kept in its attributes."""
    import types

    return (not isinstance(obj, (type, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
                                 types.ModuleType, functools.partial, list, tuple, set, frozenset, dict))
            and (type(obj).__module__ or "").split(".")[0] not in _LIBRARIES)


def _worth_following(value) -> bool:
    """What may hold or be a function the answer calls: callables and the containers that keep them."""
    import types

    if isinstance(value, types.ModuleType):
        return False
    return callable(value) or isinstance(value, (list, tuple, set, frozenset, dict))


def _referenced(fn) -> list:
    """The objects the code of function `fn` (and the code nested in it) names: each global, closure variable or
    imported module followed through the attribute chain written after it (`np.linalg.norm`, `again.softmax`,
    `from attnbook.masks import padding_mask`), read from the bytecode, so `x.softmax` on a local is never taken
    for a global softmax. A module named by a string (`import_module("attnbook.masks")`) counts with every
    attribute name the code uses."""
    import dis
    import types

    scope = fn.__globals__
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    found, string_modules, attributes = [], [], set()
    codes = [fn.__code__]
    while codes:
        code = codes.pop()
        current, have, imported = None, False, None
        for ins in dis.get_instructions(code):
            if ins.opname == "IMPORT_FROM":  # from <imported> import name: the module stays on the stack
                attributes.add(ins.argval)
                if imported is not None and (value := getattr(imported, ins.argval, None)) is not None:
                    found.append(value)
                current, have = None, False
                continue
            if ins.opname in ("LOAD_ATTR", "LOAD_METHOD"):
                attributes.add(ins.argval)
                if have:
                    current = getattr(current, ins.argval, None)
                    have = current is not None
                    if have:
                        found.append(current)
                continue
            current, have = None, False
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and ins.argval in scope:
                current, have = scope[ins.argval], True
            elif ins.opname in ("LOAD_DEREF", "LOAD_CLASSDEREF") and ins.argval in cells and _has_contents(cells[ins.argval]):
                current, have = cells[ins.argval].cell_contents, True
            elif ins.opname == "IMPORT_NAME":
                imported = current = sys.modules.get(ins.argval)
                have = current is not None
            if have:
                found.append(current)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                codes.append(const)
            elif isinstance(const, str) and sys.modules.get(const) is not None:
                string_modules.append(sys.modules[const])
    for module in string_modules:
        found += [v for n in attributes if (v := getattr(module, n, None)) is not None]
    return found


def _has_contents(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:  # an empty cell
        return False
    return True
