"""The inputs of a call, sent from the grader to the sandboxed kernel (remote.py) as plain data.

A checker's inputs are tensors, numbers, strings and containers of them, which cross with `codec`; a few are
objects with behaviour: a `torch.Generator` (crosses as its state), a function of the package (as its module
and qualified name), and an object made by a factory of a checker marked `@builds` (a model, sublayer
functions), which crosses as its recipe: the factory's name, its plain-data arguments and the seed offset
(`compare.SEED_OFFSET`) in force when it ran in the grader. The kernel, which has the same package, rebuilds it
by calling the same factory with the offset set to that value, and puts the offset back as soon as the factory
returns: the kernel never gets the run's seed, and the learner's code never runs with an offset set. A tensor
that requires grad keeps whether it is a leaf (the checks hand over non-leaf copies, so that an in-place change is
reported as one), and a tensor that is a view with other strides (a transpose, an expand) keeps its strides.

Only the grader encodes inputs and only the kernel decodes them: the data is the grader's own, so decoding may
import a module of `attnbook.exercises` (never anything else) to find a factory or a function.
"""
from __future__ import annotations

import functools
import importlib
import json

import torch
from torch import Tensor

from . import codec, compare
from .codec import CodecError
from ..i18n import _

RECIPE = "__attnbook_recipe__"  # on an object made by a @builds factory: (name, args, kwargs, index or None, offset)
_FACTORY = "__attnbook_factory__"
_PACKAGE = "attnbook."


def builds(factory):
    """Decorator for a checker's factory of inputs that are not plain data (a model, sublayer functions): its
    arguments must be plain data, and it returns one object or a tuple of them, each of which remembers how it
    was made (with the `compare.SEED_OFFSET` it was made under: its `randn` draws depend on it), so that the
    kernel can make the same one."""
    name = f"{factory.__module__}:{factory.__qualname__}"

    @functools.wraps(factory)
    def make(*args, **kwargs):
        offset = compare.SEED_OFFSET
        out = factory(*args, **kwargs)
        for i, item in enumerate(out if isinstance(out, tuple) else (out,)):
            setattr(item, RECIPE, (name, args, kwargs, i if isinstance(out, tuple) else None, offset))
        return out
    setattr(make, _FACTORY, True)
    return make


def _offset(value) -> int:
    """A recipe's seed offset: an int in [0, 2**63); ValueError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2 ** 63:
        raise ValueError(_("a recipe's seed offset must be an int in [0, 2**63), got {value_50!r}",
                           value_50=str(value)[:50]))
    return value


def _made_under(offset: int, factory, args, kwargs):
    """`factory(*args, **kwargs)` with `compare.SEED_OFFSET` set to `offset`, put back as soon as it returns."""
    previous, compare.SEED_OFFSET = compare.SEED_OFFSET, offset
    try:
        return factory(*args, **kwargs)
    finally:
        compare.SEED_OFFSET = previous


def resolve(name: str, marker: str | None = None):
    """The object `module:qualname` names, in a module of the package; ValueError otherwise."""
    module, _unused, qualname = name.partition(":")
    if not module.startswith(_PACKAGE) or not qualname or "<" in qualname:
        raise ValueError(_("not a name in the package: {name_200!r}", name_200=name[:200]))
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    if marker is not None and not getattr(obj, marker, False):
        raise ValueError(_("{name_200!r} is not what the data says it is", name_200=name[:200]))
    return obj


def function_name(fn) -> str | None:
    """`module:qualname` of a module-level function of the package that the name finds again, else None."""
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if not (isinstance(module, str) and isinstance(qualname, str)) or not module.startswith(_PACKAGE):
        return None
    name = f"{module}:{qualname}"
    try:
        return name if resolve(name) is fn else None
    except (ValueError, ImportError, AttributeError):
        return None


def encode(obj, depth: int = 0):
    """Plain data for a call's input (grader side); CodecError for an object that cannot cross."""
    if depth > codec.MAX_DEPTH:
        raise CodecError(_("inputs nested too deeply"))
    recipe = getattr(obj, RECIPE, None) if not isinstance(obj, (Tensor, type)) else None
    if recipe is not None:
        factory, args, kwargs, index, offset = recipe
        return {"t": "built", "factory": factory, "args": encode(list(args), depth + 1),
                "kwargs": encode(dict(kwargs), depth + 1), "index": index, "offset": offset}
    if isinstance(obj, Tensor):
        if obj.is_contiguous() or obj.requires_grad or obj.numel() == 0:
            data = codec.encode(obj)
            data["leaf"] = bool(obj.is_leaf)
            return data
        # a strided view (a transpose, an expand, a slice): the memory it spans, and how it reads that memory
        span = 1 + sum((n - 1) * s for n, s in zip(obj.shape, obj.stride()))
        memory = torch.as_strided(obj.detach(), (span,), (1,), obj.storage_offset())
        return {"t": "view", "memory": codec.encode(memory), "size": list(obj.shape), "stride": list(obj.stride())}
    if isinstance(obj, torch.Generator):
        return {"t": "generator", "state": codec.encode(obj.get_state())}
    if type(obj) in (list, tuple):
        return {"t": type(obj).__name__, "v": [encode(x, depth + 1) for x in obj]}
    if type(obj) is dict:
        return {"t": "dict", "v": [[codec.encode(k), encode(v, depth + 1)] for k, v in obj.items()]}
    if callable(obj) and not isinstance(obj, type):
        name = function_name(obj)
        if name is None:
            raise CodecError(_("the input {getattr_obj___qualname!r} cannot be sent to the kernel: make it with "
                               "a @builds factory or a module-level function",
                               getattr_obj___qualname=getattr(obj, '__qualname__', type(obj).__name__)))
        return {"t": "function", "name": name}
    data = codec.encode(obj)
    if isinstance(data, dict) and data.get("t") in ("opaque", "module"):
        raise CodecError(_("an input of type {type_obj___name} cannot be sent to the kernel",
                           type_obj___name=type(obj).__name__))
    return data


def decode(data, cache: dict | None = None):
    """The input that `encode` described (kernel side). Objects made by one factory call with the same arguments
    and offset within one `cache` are made once (the pieces of one model stay one model)."""
    cache = {} if cache is None else cache
    if isinstance(data, dict):
        tag = data.get("t")
        if tag == "built":
            offset = _offset(data.get("offset"))
            key = (data["factory"], offset, json.dumps([data["args"], data["kwargs"]], sort_keys=True))
            if key not in cache:
                factory = resolve(data["factory"], _FACTORY)
                args, kwargs = decode(data["args"], cache), decode(data["kwargs"], cache)
                cache[key] = _made_under(offset, factory, args, kwargs)
            out = cache[key]
            return out if data["index"] is None else out[data["index"]]
        if tag == "tensor":
            t = codec.decode(data)
            return t * 1 if t.requires_grad and data.get("leaf") is False else t  # (...): a non-leaf copy
        if tag == "view":
            return torch.as_strided(codec.decode(data["memory"]), data["size"], data["stride"])
        if tag == "generator":
            g = torch.Generator()
            g.set_state(codec.decode(data["state"]))
            return g
        if tag in ("list", "tuple") and "type" not in data:
            items = [decode(x, cache) for x in data["v"]]
            return items if tag == "list" else tuple(items)
        if tag == "dict" and "type" not in data:
            return {codec.decode(k): decode(v, cache) for k, v in data["v"]}
        if tag == "function":
            return resolve(data["name"])
    return codec.decode(data)

