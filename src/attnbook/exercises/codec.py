"""Plain data for what a learner's code returned: `encode(obj)` gives JSON-able data, `decode(data)` the value back.

Used by the grader's checks (remote.py): what an answer returned in the sandboxed kernel crosses to the
grader as this data, never as pickle. Encoding reads values, not behaviour: a tensor, whatever its class, is
read from its storage with PyTorch's own C accessors (a subclass cannot lie about its values through
__torch_function__, .numpy() or .tolist()); an object of an unknown type becomes an opaque stand-in that keeps
only its type's name (so that `describe()` words it the same). Decoding never runs code named by the data and
never imports a module: NumPy arrays are read with `np.load(allow_pickle=False)`, and the only classes rebuilt are
a few whitelisted ones (torch.nn.Conv2d, torch.Size, torch.return_types).

The format: JSON null, booleans, strings and small ints stand for themselves, finite floats are JSON numbers;
everything else is an object {"t": tag, ...}. Strict limits (depth, items, string length, bytes) hold both ways;
`decode` raises CodecError (a ValueError) on anything it does not expect.

What a decoded reply costs the grader is bounded by the reply itself, and nothing of it outlives the value: an
array's elements (times their size, at least 1 byte: a zero-size dtype counts 1) never exceed the bytes that came,
nor the nested lists `tolist()` would make (a shape such as (10**9, 0)) a few per byte; the classes made for a
reply's unknown types (opaque stand-ins, named tuples, dict subclasses) are made afresh for each reply, at most
MAX_TYPES of them with at most MAX_FIELDS fields each, and kept in no cache.
"""
from __future__ import annotations

from ..i18n import _
import base64
import io
import math
import operator

import numpy as np
import torch
from torch import Tensor, nn

MAX_DEPTH = 20
MAX_ITEMS = 100_000  # per list, tuple or dict
MAX_STR = 100_000  # characters per string
MAX_BYTES = 64_000_000  # array bytes per encode/decode
MAX_INT_DIGITS = 1_000
MAX_TYPES = 100  # classes made for one decoded value (an honest reply has a handful)
MAX_FIELDS = 256  # fields of one named tuple
NODES_PER_BYTE = 4  # lists and elements `tolist()` would make from an array, per byte of its .npy data
_NAME_LEN = 200

_TORCH_DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.complex64, torch.complex128, torch.int64,
    torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool)}
_DTYPE_NAMES = {d: n for n, d in _TORCH_DTYPES.items()}
_NP_KINDS = "biufc"


class CodecError(ValueError):
    """The object cannot be encoded within the limits, or the data is not something `encode` writes."""


class _Budget:
    """What one encode or decode may still spend: bytes, and (decoding) the classes made for its types, by key."""

    def __init__(self, limit: int):
        self.limit = self.left = limit
        self.types: dict[tuple, type] = {}

    def spend(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise CodecError(_("more than {limit:,} bytes of data", limit=self.limit))

    def make_type(self, key: tuple, make) -> type:
        """The class for `key` within this value, made by `make()` the first time (at most MAX_TYPES)."""
        if key not in self.types:
            if len(self.types) >= MAX_TYPES:
                raise CodecError(_("more than {MAX_TYPES} different types", MAX_TYPES=MAX_TYPES))
            self.types[key] = make()
        return self.types[key]


# ---------------------------------------------------------------------------------------------------------
# Reading a tensor from its storage
# ---------------------------------------------------------------------------------------------------------

_TB = torch._C.TensorBase


def plain_tensor(t: Tensor) -> Tensor:
    """A plain CPU tensor with t's values, read from t's storage with PyTorch's C accessors (no method of t's
    class runs, no __torch_function__), detached; CodecError if it has none (a sparse or wrapper tensor)."""
    try:
        with torch._C.DisableTorchFunction():
            if _TB.layout.__get__(t) != torch.strided:
                raise CodecError(_("a tensor that is not strided (sparse or another layout)"))
            dtype = _TB.dtype.__get__(t)
            storage = _TB.untyped_storage(t)
            plain = torch.empty((0,), dtype=dtype, device=storage.device)
            plain.set_(storage, _TB.storage_offset(t), _TB.size(t), _TB.stride(t))
            if plain.device.type == "meta":
                raise CodecError(_("a tensor on the meta device, which holds no values"))
            plain = plain.detach().resolve_conj().resolve_neg().cpu().clone()
            if plain.dtype not in _DTYPE_NAMES:
                raise CodecError(_("a tensor of dtype {dtype}", dtype=plain.dtype))
            return plain
    except CodecError:
        raise
    except Exception as e:  # noqa: BLE001 - a tensor with no readable storage
        raise CodecError(_("a tensor whose values cannot be read ({type_e___name})",
                           type_e___name=type(e).__name__)) from None


def _tensor_flag(t: Tensor, name: str) -> bool:
    with torch._C.DisableTorchFunction():
        return bool(getattr(_TB, name).__get__(t))


def _npy(arr: np.ndarray, budget: _Budget) -> str:
    budget.spend(arr.nbytes)
    buf = io.BytesIO()
    np.save(buf, arr if arr.flags.c_contiguous else arr.copy(order="C"), allow_pickle=False)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _nodes(shape: tuple) -> int:
    """The objects `tolist()` makes for an array of `shape`: its nested lists and its elements."""
    total, count = 0, 1
    for n in shape:
        count *= n
        total += count
    return max(total, 1)


def _from_npy(text, budget: _Budget) -> np.ndarray:
    """The array in base64 .npy `text`. Its header is read first: the dtype must be a number or string kind, the
    data exactly what the shape needs, and neither the elements (at least 1 byte each) nor the objects
    `tolist()` would make beyond what the bytes that came allow; only then are the values read."""
    if not isinstance(text, str) or len(text) > MAX_BYTES * 4 // 3 + 1024:
        raise CodecError(_("array data is not a bounded string"))
    budget.spend(len(text) * 3 // 4)
    try:
        raw = base64.b64decode(text, validate=True)
        f = io.BytesIO(raw)
        version = np.lib.format.read_magic(f)
        if version not in ((1, 0), (2, 0)):
            raise ValueError("npy version")
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran_order, dtype = read_header(f)
    except Exception as e:  # noqa: BLE001 - anything malformed
        raise CodecError(_("unreadable array data ({type_e___name})", type_e___name=type(e).__name__)) from None
    if dtype.kind not in _NP_KINDS + "U" or dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None:
        raise CodecError(_("array data of an unexpected type"))
    size = math.prod(shape)
    if size * dtype.itemsize != len(raw) - f.tell() or size * max(dtype.itemsize, 1) > len(raw) \
            or _nodes(shape) > NODES_PER_BYTE * len(raw):
        raise CodecError(_("array data whose shape does not fit its bytes"))
    try:
        f.seek(0)
        arr = np.load(f, allow_pickle=False)
    except Exception as e:  # noqa: BLE001 - anything malformed
        raise CodecError(_("unreadable array data ({type_e___name})", type_e___name=type(e).__name__)) from None
    if not isinstance(arr, np.ndarray) or arr.dtype != dtype or arr.shape != shape:
        raise CodecError(_("array data of an unexpected type"))
    return arr


# ---------------------------------------------------------------------------------------------------------
# encode
# ---------------------------------------------------------------------------------------------------------

def encode(obj, *, max_bytes: int = MAX_BYTES):
    """JSON-able data for `obj` (see the module docstring); CodecError beyond the limits."""
    return _enc(obj, 0, _Budget(max_bytes))


def _name(x) -> str:
    return str(x)[:_NAME_LEN]


def _enc(obj, depth: int, budget: _Budget):
    if depth > MAX_DEPTH:
        raise CodecError(_("nested more than {MAX_DEPTH} levels deep", MAX_DEPTH=MAX_DEPTH))
    if obj is None or obj is True or obj is False:
        return obj
    if isinstance(obj, np.generic):
        if obj.dtype.kind not in _NP_KINDS:
            return _opaque(obj)
        return {"t": "npscalar", "v": _npy(np.asarray(obj), budget)}
    if isinstance(obj, bool):  # a bool subclass
        return bool(obj)
    if isinstance(obj, int):
        obj = int(obj)
        if abs(obj) < 2 ** 53:
            return obj
        digits = str(obj) if obj.bit_length() < MAX_INT_DIGITS * 3 else None
        if digits is None or len(digits) > MAX_INT_DIGITS:
            raise CodecError(_("an int of more than {MAX_INT_DIGITS} digits", MAX_INT_DIGITS=MAX_INT_DIGITS))
        return {"t": "int", "v": digits}
    if isinstance(obj, float):
        obj = float(obj)
        return obj if math.isfinite(obj) else {"t": "float", "v": repr(obj)}
    if isinstance(obj, complex):
        return {"t": "complex", "v": [_enc(float(obj.real), depth + 1, budget), _enc(float(obj.imag), depth + 1, budget)]}
    if isinstance(obj, str):
        if len(obj) > MAX_STR:
            raise CodecError(_("a string of more than {MAX_STR:,} characters", MAX_STR=MAX_STR))
        budget.spend(len(obj))
        return str(obj)
    if isinstance(obj, torch.dtype):
        return {"t": "dtype", "v": _DTYPE_NAMES.get(obj, _name(obj))}
    if isinstance(obj, torch.device):
        return {"t": "device", "v": _name(obj.type)}
    if isinstance(obj, Tensor):
        plain = plain_tensor(obj)
        data = {"t": "tensor", "dtype": _DTYPE_NAMES[plain.dtype], "requires_grad": _tensor_flag(obj, "requires_grad")}
        if plain.dtype == torch.bfloat16:
            plain = plain.float()
        data["v"] = _npy(plain.numpy(), budget)
        return data
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in _NP_KINDS + "U" or obj.dtype.hasobject:
            return _opaque(obj)
        return {"t": "ndarray", "v": _npy(obj, budget)}
    if isinstance(obj, (list, tuple)):
        if len(obj) > MAX_ITEMS:
            raise CodecError(_("more than {MAX_ITEMS:,} items", MAX_ITEMS=MAX_ITEMS))
        raw = list.__iter__(obj) if isinstance(obj, list) else tuple.__iter__(obj)  # not a subclass's __iter__
        items = [_enc(x, depth + 1, budget) for x in raw]
        data = {"t": "list" if isinstance(obj, list) else "tuple", "v": items}
        if type(obj) not in (list, tuple):
            data["type"] = _name(type(obj).__name__)
            data["module"] = _name(type(obj).__module__)
            fields = getattr(type(obj), "_fields", None)
            if isinstance(fields, tuple) and all(isinstance(f, str) for f in fields) and len(fields) == len(items):
                data["fields"] = [_name(f) for f in fields]
        return data
    if isinstance(obj, dict):
        if len(obj) > MAX_ITEMS:
            raise CodecError(_("more than {MAX_ITEMS:,} items", MAX_ITEMS=MAX_ITEMS))
        data = {"t": "dict", "v": [[_enc(k, depth + 1, budget), _enc(v, depth + 1, budget)]
                                   for k, v in dict.items(obj)]}
        if type(obj) is not dict:
            data["type"] = _name(type(obj).__name__)
        return data
    if type(obj) is nn.Conv2d:
        return _enc_conv(obj, depth, budget)
    return _opaque(obj)


def _opaque(obj) -> dict:
    cls = type(obj)
    return {"t": "opaque", "type": _name(getattr(cls, "__name__", "object")), "callable": callable(obj)}


_CONV_CONFIG = ("in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation", "groups",
                "padding_mode")


def _enc_conv(m: nn.Conv2d, depth: int, budget: _Budget) -> dict:
    config = {k: _enc(vars(m).get(k), depth + 1, budget) for k in _CONV_CONFIG}
    params = {k: _enc(m._parameters.get(k), depth + 1, budget) for k in ("weight", "bias")}
    return {"t": "module", "class": "Conv2d", "config": config, "params": params,
            "training": bool(vars(m).get("training", True))}


# ---------------------------------------------------------------------------------------------------------
# decode
# ---------------------------------------------------------------------------------------------------------

def decode(data, *, max_bytes: int = MAX_BYTES):
    """The value that `encode` turned into `data`; CodecError for anything else (never runs code it names)."""
    try:
        return _dec(data, 0, _Budget(max_bytes))
    except CodecError:
        raise
    except (RecursionError, MemoryError, OverflowError, TypeError, ValueError, KeyError, IndexError,
            AttributeError, RuntimeError) as e:
        raise CodecError(_("malformed data ({type_e___name})", type_e___name=type(e).__name__)) from None


class Opaque:
    """Stands for an object of a type that is not carried over: only its type's name (`type(x).__name__`)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return _("<{type_self___name} (not carried over)>", type_self___name=type(self).__name__)


def opaque_type(name: str, is_callable: bool = False) -> type:
    """A new stand-in class named `name` (callable ones refuse to be called). Not cached: a decoded value makes
    its own, through its budget (`_Budget.make_type`), so no class outlives the value that needed it."""
    attrs = {"__slots__": (), "__module__": "attnbook.exercises.codec"}
    if is_callable:
        def __call__(self, *args, **kwargs):
            raise TypeError(_("{name} (not carried over) cannot be called", name=name))
        attrs["__call__"] = __call__
    return type(name, (Opaque,), attrs)


def _str(x, limit: int = _NAME_LEN) -> str:
    if not isinstance(x, str) or len(x) > limit:
        raise CodecError(_("expected a short string"))
    return x


def _items(x) -> list:
    if not isinstance(x, list) or len(x) > MAX_ITEMS:
        raise CodecError(_("expected a bounded list"))
    return x


def _dec(data, depth: int, budget: _Budget):
    if depth > MAX_DEPTH:
        raise CodecError(_("nested more than {MAX_DEPTH} levels deep", MAX_DEPTH=MAX_DEPTH))
    if data is None or isinstance(data, bool):
        return data
    if isinstance(data, int):
        if abs(data) >= 2 ** 53:
            raise CodecError(_("a large int not written as {'t': 'int'}"))
        return data
    if isinstance(data, float):
        if not math.isfinite(data):
            raise CodecError(_("a non-finite float not written as {'t': 'float'}"))
        return data
    if isinstance(data, str):
        if len(data) > MAX_STR:
            raise CodecError(_("a string beyond the limit"))
        budget.spend(len(data))
        return data
    if not isinstance(data, dict):
        raise CodecError(_("unexpected {type_data___name} in the data", type_data___name=type(data).__name__))
    tag = data.get("t")
    if tag == "int":
        digits = _str(data.get("v"), MAX_INT_DIGITS + 1)
        if not digits.lstrip("-").isdigit() or not digits.isascii():
            raise CodecError(_("an int that is not digits"))
        return int(digits)
    if tag == "float":
        text = data.get("v")
        if text not in ("nan", "inf", "-inf"):
            raise CodecError(_("a special float other than nan or inf"))
        return float(text)
    if tag == "complex":
        re_, im = _items(data.get("v"))
        re_, im = _dec(re_, depth + 1, budget), _dec(im, depth + 1, budget)
        if not all(isinstance(x, float) for x in (re_, im)):
            raise CodecError(_("a complex of non-floats"))
        return complex(re_, im)
    if tag == "dtype":
        name = _str(data.get("v"))
        if name not in _TORCH_DTYPES:
            return budget.make_type(("opaque", "dtype", False), lambda: opaque_type("dtype"))()
        return _TORCH_DTYPES[name]
    if tag == "device":
        name = _str(data.get("v"))
        if name not in ("cpu", "cuda", "mps", "meta", "xpu"):
            raise CodecError(_("an unknown device"))
        return torch.device(name)
    if tag == "tensor":
        return _dec_tensor(data, budget)
    if tag == "ndarray":
        return _from_npy(data.get("v"), budget)
    if tag == "npscalar":
        arr = _from_npy(data.get("v"), budget)
        if arr.shape != () or arr.dtype.kind not in _NP_KINDS:
            raise CodecError(_("a NumPy scalar that is not one number"))
        return arr[()]
    if tag in ("list", "tuple"):
        items = [_dec(x, depth + 1, budget) for x in _items(data.get("v"))]
        if "type" not in data:
            return items if tag == "list" else tuple(items)
        return _sequence(tag, data, items, budget)
    if tag == "dict":
        out = {}
        for pair in _items(data.get("v")):
            k, v = _items(pair)
            out[_dec(k, depth + 1, budget)] = _dec(v, depth + 1, budget)  # TypeError: unhashable key
        if "type" in data:
            name = _str(data["type"])
            return budget.make_type(("dict", name), lambda: type(name, (dict,), {"__module__": __name__}))(out)
        return out
    if tag == "module":
        return _dec_conv(data, depth, budget)
    if tag == "opaque":
        name, is_callable = _str(data.get("type")), data.get("callable") is True
        return budget.make_type(("opaque", name, is_callable), lambda: opaque_type(name, is_callable))()
    raise CodecError(_("unknown tag {str_tag_40!r}", str_tag_40=str(tag)[:40]))


def _sequence(tag: str, data: dict, items: list, budget: _Budget):
    name, module = _str(data.get("type")), _str(data.get("module", ""))
    if tag == "tuple" and module == "torch" and name == "Size":
        if not all(isinstance(i, int) and i >= 0 for i in items):
            raise CodecError(_("a torch.Size of non-sizes"))
        return torch.Size(items)
    if tag == "tuple" and module == "torch.return_types":
        cls = getattr(torch.return_types, name, None)
        if isinstance(cls, type) and issubclass(cls, tuple) and not name.startswith("_"):
            return cls(items)
    fields = data.get("fields")
    if fields is not None:
        fields = _items(fields)
        if len(fields) > MAX_FIELDS:
            raise CodecError(_("more than {MAX_FIELDS} field names", MAX_FIELDS=MAX_FIELDS))
        fields = tuple(_str(f) for f in fields)
        if len(fields) != len(items) or not all(f.isidentifier() and not f.startswith("_") for f in fields):
            raise CodecError(_("bad field names"))

    def make() -> type:
        attrs = {"__module__": __name__}
        if fields:
            attrs["_fields"] = fields
            attrs.update((f, property(operator.itemgetter(i))) for i, f in enumerate(fields))
        return type(name, (list if tag == "list" else tuple,), attrs)
    return budget.make_type((tag, name, fields), make)(items)


def _dec_tensor(data: dict, budget: _Budget) -> Tensor:
    name = _str(data.get("dtype"))
    if name not in _TORCH_DTYPES:
        raise CodecError(_("a tensor of an unknown dtype"))
    dtype = _TORCH_DTYPES[name]
    arr = _from_npy(data.get("v"), budget)
    if arr.dtype.kind == "U":
        raise CodecError(_("a tensor of strings"))
    if name == "bfloat16":
        if arr.dtype != np.float32:
            raise CodecError(_("bfloat16 data not carried as float32"))
    elif arr.dtype != torch.empty((), dtype=dtype).numpy().dtype:
        raise CodecError(_("tensor data of another dtype"))
    t = torch.from_numpy(arr.copy()).to(dtype)
    rg = data.get("requires_grad", False)
    if not isinstance(rg, bool):
        raise CodecError(_("requires_grad is not a bool"))
    if rg:
        if not (t.is_floating_point() or t.is_complex()):
            raise CodecError(_("requires_grad on a tensor that cannot have gradients"))
        t.requires_grad_(True)
    return t


def _dec_conv(data: dict, depth: int, budget: _Budget) -> nn.Conv2d:
    if data.get("class") != "Conv2d":
        raise CodecError(_("a module class that is not rebuilt"))
    config = {k: _dec(v, depth + 1, budget) for k, v in dict(data.get("config") or {}).items()}
    if set(config) != set(_CONV_CONFIG):
        raise CodecError(_("a Conv2d without its configuration"))
    for k in ("in_channels", "out_channels", "groups"):
        if not isinstance(config[k], int) or not 0 < config[k] <= 65536:
            raise CodecError(_("a Conv2d with a bad {k}", k=k))
    for k in ("kernel_size", "stride", "dilation", "padding"):
        v = config[k]
        if not (isinstance(v, tuple) and len(v) == 2 and all(isinstance(i, int) and 0 <= i <= 4096 for i in v)) \
                and not (k == "padding" and v in ("same", "valid")):
            raise CodecError(_("a Conv2d with a bad {k}", k=k))
    if config["padding_mode"] not in ("zeros", "reflect", "replicate", "circular"):
        raise CodecError(_("a Conv2d with a bad padding_mode"))
    params = dict(data.get("params") or {})
    weight, bias = (_dec(params.get(k), depth + 1, budget) for k in ("weight", "bias"))
    if not isinstance(weight, Tensor) or not (bias is None or isinstance(bias, Tensor)):
        raise CodecError(_("a Conv2d without a weight tensor"))
    try:
        conv = nn.Conv2d(**config, bias=bias is not None, device="meta", dtype=weight.dtype)
    except Exception as e:  # noqa: BLE001 - a configuration nn.Conv2d refuses
        raise CodecError(_("a Conv2d that cannot be built ({type_e___name})", type_e___name=type(e).__name__)) from None
    conv.weight = nn.Parameter(weight.detach(), requires_grad=weight.requires_grad)
    if bias is not None:
        conv.bias = nn.Parameter(bias.detach(), requires_grad=bias.requires_grad)
    conv.train(data.get("training") is True)
    return conv
