"""Helpers that several of chapter 5's checkers use: the float64 sinusoidal table (5.1's reference, also the
positions of 5.2's attention and the float16 band of 5.3) and the type and dtype checks of a learner's tensor."""
from __future__ import annotations

import dis
import importlib
import math

import torch
from torch import Tensor

from ..compare import expect_tensor
from ..reach import unwrap
from ..hints import describe
from ..registry import Wrong
from ...i18n import _

F64 = torch.float64


def kind_of(x) -> str:
    """describe(x), with NumPy arrays named as such ("a NumPy array of shape (2, 2)")."""
    if type(x).__module__ == "numpy" and hasattr(x, "shape") and hasattr(x, "__array__") and \
            type(x).__name__ == "ndarray":
        return _("a NumPy array of shape {tuple_x_shape}", tuple_x_shape=tuple(x.shape))
    return describe(x)


def expect_type(got, shape: tuple, *, what: str, on: str, shape_hints: dict[tuple, str], dtype: torch.dtype,
                 dtype_hint: str, like: str = "", shape_hint: str | None = None) -> Tensor:
    """Wrong unless `got` is a real floating-point tensor of `shape` and `dtype` (the dtype is checked before the
    values, so a table in another precision gets the dtype message). A wrong shape gets its hint from
    `shape_hints`, else the general `shape_hint`."""
    if got is not None and not isinstance(got, Tensor):
        raise Wrong(_("{what} is {kind_of_got} on {on}, expected a torch.Tensor",
                      what=what, kind_of_got=kind_of(got), on=on),
                    _("the task asks for a torch tensor: build it with torch operations, or convert an array with "
                      "torch.from_numpy(...) and .to(the dtype the task asks for)"))
    got = expect_tensor(got, what=what, on=on, finite=False)
    if tuple(got.shape) != tuple(shape):
        raise Wrong(_("{what} has shape {tuple_got_shape} on {on}, expected {tuple_shape}",
                      what=what, tuple_got_shape=tuple(got.shape), on=on, tuple_shape=tuple(shape)),
                    shape_hints.get(tuple(got.shape), shape_hint))
    if got.is_complex() or got.dtype == torch.bool:
        raise Wrong(_("{what} has dtype {dtype} on {on}, expected real floating-point numbers",
                      what=what, dtype=got.dtype, on=on))
    if not got.is_floating_point():
        raise Wrong(_("{what} has the integer dtype {dtype} on {on}, expected floating point",
                      what=what, dtype=got.dtype, on=on),
                    _("sines and cosines are fractions: keep the computation in floating point (no .int() or .long())"))
    if got.dtype != dtype:
        if got.dtype in (torch.float16, torch.bfloat16):
            dtype_hint = (_("half precision keeps only about 3 significant digits, far too few for positions; ")
                          + dtype_hint)
        raise Wrong(_("{what} has dtype {dtype} on {on}, expected {dtype2}{like}",
                      what=what, dtype=got.dtype, on=on, dtype2=dtype, like=like), dtype_hint)
    return got


def import_transformers_first(fn) -> None:
    """Import the `transformers` modules (and names) that `fn` imports in its own body, before it is called.

    Hugging Face's tables and RoPE are forbidden by name patterns, which `call` watches with a profile hook; the
    first import of transformers takes seconds, and several times longer under that hook, so an answer that
    imports it inside the function would be stopped by the time limit instead of being told what is forbidden.
    """
    import_first(fn, ("transformers",))


def import_first(fn, roots: tuple[str, ...]) -> None:
    """Import the modules under `roots` (and names) that `fn` imports in its own body (see
    `import_transformers_first`)."""
    try:
        codes = [getattr(unwrap(fn), "__code__", None) or getattr(getattr(fn, "__call__", None), "__code__", None)]
    except Exception:  # an odd object: `call` will say what is wrong with it
        return
    while codes:
        code = codes.pop()
        if code is None:
            continue
        codes += [c for c in code.co_consts if hasattr(c, "co_code")]  # nested functions and comprehensions
        module = None
        for ins in dis.get_instructions(code):
            try:
                if ins.opname == "IMPORT_NAME":
                    name = str(ins.argval)
                    watched = any(name == root or name.startswith(root + ".") for root in roots)
                    module = importlib.import_module(name) if watched else None
                elif ins.opname == "IMPORT_FROM" and module is not None:
                    getattr(module, str(ins.argval), None)  # transformers loads its submodules on first access
            except Exception:  # not installed, or broken: the learner's own call will say so
                module = None


def table_angles(max_len: int, d: int, *, exponent: str = "2i", start: int = 0, divide: bool = True,
                  degrees: bool = False, base: float = 10000.0, half_positions: bool = False) -> Tensor:
    """(max_len, d) float64 angle of every column (column j belongs to pair i = j // 2), or a mistaken one."""
    pos = torch.arange(start, start + max_len, dtype=F64)[:, None]  # (max_len, 1)
    if half_positions:
        pos = pos.to(torch.float16).to(F64)  # whole numbers above 2048 are rounded to even ones
    j = torch.arange(d, dtype=F64)  # (d,): column index
    i = torch.div(j, 2, rounding_mode="floor")  # (d,): pair index of each column
    e = {"2i": 2 * i / d, "i": i / d, "j": j / d, "2j": 2 * j / d,
         "t2t": i / max(d // 2 - 1, 1)}[exponent]  # (d,): tensor2tensor spaces the pairs by i / (d/2 - 1)
    angle = pos / base ** e if divide else pos * base ** e  # (max_len, d)
    if degrees:
        angle = angle * math.pi / 180
    return angle


def reference_table(max_len: int, d: int, *, layout: str = "interleaved", swap: bool = False, only: str | None = None,
           **angle_options) -> Tensor:
    """The sinusoidal table in float64, or one of its usual mistakes (the defaults give the right table).

    The right angle is pos / base^(2i/d), with sin in even columns and cos in odd ones.
    """
    angle = table_angles(max_len, d, **angle_options)  # (max_len, d)
    even = (torch.arange(d) % 2 == 0) != swap  # (d,): the columns that hold sines
    table = torch.where(even, angle.sin(), angle.cos())  # (max_len, d)
    if only is not None:
        table = angle.sin() if only == "sin" else angle.cos()
    if layout == "halves":  # sines of every pair first, then the cosines
        table = torch.cat((table[:, 0::2], table[:, 1::2]), dim=-1)  # (max_len, d)
    return table


def half_band(angle: Tensor) -> Tensor:
    """How far float16 rounding (of the positions, the exponents, the angle, sin and cos) can move an entry whose
    angle is `angle`: a relative error of about 2^-8 on the angle (10000^e magnifies the exponent's 2^-11 by
    ln 10000), plus sin/cos's own rounding. Generous on purpose: it only decides between two hints."""
    return 2.0 ** -6 * angle.abs() + 2.0 ** -8
