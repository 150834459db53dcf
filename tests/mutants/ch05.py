"""Chapter 5 (positional encoding): learner answers to exercises 5.1-5.4."""
from __future__ import annotations

import functools
import importlib.util
import math
import types

import numpy as np
import torch

from mutants import right, wrong

import attnbook.positional as _positional


def _fresh_positional():
    """A second, separate import of attnbook/positional.py (not the module in sys.modules)."""
    spec = importlib.util.spec_from_file_location("attnbook.positional", _positional.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_SECOND = _fresh_positional()  # executed once at import: a cheap module (torch is already loaded)


def _copy(f):
    """A types.FunctionType copy of f: same code, same globals, another function object."""
    g = types.FunctionType(f.__code__, f.__globals__, f.__name__, f.__defaults__, f.__closure__)
    g.__kwdefaults__ = f.__kwdefaults__
    return g


# ==========================================================================================================
# 5.1 The sinusoidal table
# ==========================================================================================================


def _angles(max_len, d_model, dtype=torch.float32):
    pos = torch.arange(max_len, dtype=dtype)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=dtype)
    return pos / 10000 ** (two_i / d_model)  # (max_len, d/2)


@wrong("5.1", hint="halves")
def sinusoidal_table(max_len, d_model):
    """concatenated halves (all sines, then all cosines) instead of interleaved"""
    a = _angles(max_len, d_model)
    return torch.cat((a.sin(), a.cos()), dim=-1)


@wrong("5.1", hint="sin and cos are swapped")
def sinusoidal_table(max_len, d_model):
    """cosine in the even columns and sine in the odd ones"""
    a = _angles(max_len, d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = a.cos()
    pe[:, 1::2] = a.sin()
    return pe


@wrong("5.1", hint="frequenc")
def sinusoidal_table(max_len, d_model):
    """exponent i/d instead of 2i/d (arange(d/2) / d_model)"""
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    i = torch.arange(d_model // 2, dtype=torch.float32)
    a = pos / 10000 ** (i / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2], pe[:, 1::2] = a.sin(), a.cos()
    return pe


@wrong("5.1", hint="frequenc")
def sinusoidal_table(max_len, d_model):
    """exponent j/d with the column index j, so each cosine gets the next, slower, frequency"""
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    j = torch.arange(d_model, dtype=torch.float32)
    a = pos / 10000 ** (j / d_model)  # (max_len, d): one angle per column
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2], pe[:, 1::2] = a[:, 0::2].sin(), a[:, 1::2].cos()
    return pe


@wrong("5.1", hint="divide by it")
def sinusoidal_table(max_len, d_model):
    """multiplies by 10000^(2i/d) instead of dividing"""
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)
    a = pos * 10000 ** (two_i / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2], pe[:, 1::2] = a.sin(), a.cos()
    return pe


@wrong("5.1", hint="frequenc")
def sinusoidal_table(max_len, d_model):
    """tensor2tensor/fairseq spacing 10000^(-i/(d/2 - 1))"""
    half = d_model // 2
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    step = math.log(10000) / max(half - 1, 1)
    a = pos * torch.exp(-step * torch.arange(half, dtype=torch.float32))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2], pe[:, 1::2] = a.sin(), a.cos()
    return pe


@wrong("5.1", hint="position 0")
def sinusoidal_table(max_len, d_model):
    """positions 1..max_len instead of 0..max_len-1"""
    pos = torch.arange(1, max_len + 1, dtype=torch.float32)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)
    a = pos / 10000 ** (two_i / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2], pe[:, 1::2] = a.sin(), a.cos()
    return pe


@wrong("5.1", hint="base 10000")
def sinusoidal_table(max_len, d_model):
    """base 1000 instead of 10000"""
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)
    a = pos / 1000 ** (two_i / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2], pe[:, 1::2] = a.sin(), a.cos()
    return pe


@wrong("5.1", hint="float32")
def sinusoidal_table(max_len, d_model):
    """computed and returned in float64 (no cast to float32)"""
    a = _angles(max_len, d_model, torch.float64)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = a.sin(), a.cos()
    return pe


@wrong("5.1", hint="tensor")
def sinusoidal_table(max_len, d_model):
    """NumPy version, returns an np.ndarray"""
    pos = np.arange(max_len)[:, None]
    two_i = np.arange(0, d_model, 2)
    a = pos / 10000 ** (two_i / d_model)
    pe = np.zeros((max_len, d_model), dtype=np.float32)
    pe[:, 0::2], pe[:, 1::2] = np.sin(a), np.cos(a)
    return pe


@wrong("5.1", hint="shape")
def sinusoidal_table(max_len, d_model):
    """returns the transposed table, (d_model, max_len)"""
    a = _angles(max_len, d_model)
    return torch.stack((a.sin(), a.cos()), dim=-1).reshape(max_len, d_model).T.contiguous()


@wrong("5.1", hint="shape")
def sinusoidal_table(max_len, d_model):
    """ignores max_len: always builds 64 rows (the chapter's example fits)"""
    a = _angles(64, d_model)
    return torch.stack((a.sin(), a.cos()), dim=-1).reshape(64, d_model)


@wrong("5.1", hint="float16")
def sinusoidal_table(max_len, d_model):
    """angles computed in float16 and then cast to float32"""
    pos = torch.arange(max_len, dtype=torch.float16)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float16)
    a = (pos / 10000 ** (two_i / d_model)).half()
    pe = torch.stack((a.float().sin(), a.float().cos()), dim=-1)
    return pe.reshape(max_len, d_model)


@wrong("5.1", hint="2048")
def sinusoidal_table(max_len, d_model):
    """positions made with torch.arange(max_len, dtype=torch.float16): rows past 2048 hold rounded positions"""
    pos = torch.arange(max_len, dtype=torch.float16)[:, None].float()
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)
    a = pos / 10000 ** (two_i / d_model)
    return torch.stack((a.sin(), a.cos()), dim=-1).reshape(max_len, d_model)


@wrong("5.1", hint="package's own")
def sinusoidal_table(max_len, d_model):
    """reads the table out of attnbook's SinusoidalPositionalEncoding module

    (hint was "without": SinusoidalPositionalEncoding is one of 5.1's references, so the message says "the
    package's own solution", as for sinusoidal_table itself.)"""
    from attnbook.positional import SinusoidalPositionalEncoding

    return SinusoidalPositionalEncoding(d_model, max_len=max_len).pe.float()


@wrong("5.1", hint="package's own")
def sinusoidal_table(max_len, d_model):
    """builds it by adding SinusoidalPositionalEncoding to zeros (a reference of 5.1, as above)"""
    from attnbook import positional

    return positional.SinusoidalPositionalEncoding(d_model, max_len)(torch.zeros(max_len, d_model))


wrong("5.1", hint="package's own", name="attnbook.positional.sinusoidal_table itself")(_positional.sinusoidal_table)
wrong("5.1", hint="package's own", name="lambda around attnbook's sinusoidal_table")(
    lambda max_len, d_model: _positional.sinusoidal_table(max_len, d_model))


@wrong("5.1", hint="package's own")
def sinusoidal_table(max_len, d_model):
    """def wrapper calling attnbook.positional.sinusoidal_table"""
    from attnbook.positional import sinusoidal_table as table

    return table(max_len, d_model)


wrong("5.1", hint="package's own", name="FunctionType copy of attnbook's sinusoidal_table")(
    _copy(_positional.sinusoidal_table))


@wrong("5.1", hint="package's own")
def sinusoidal_table(max_len, d_model):
    """def wrapper calling sinusoidal_table of a second, separate import of attnbook/positional.py"""
    return _fresh_positional().sinusoidal_table(max_len, d_model)


wrong("5.1", hint="package's own", name="sinusoidal_table object of a second, separate import of positional.py")(
    _SECOND.sinusoidal_table)


@right("5.1")
def sinusoidal_table(max_len, d_model):
    """zeros, then sin into the even and cos into the odd columns (the chapter's solution)"""
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)
    angles = pos / 10000 ** (two_i / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe


@right("5.1")
def sinusoidal_table(max_len, d_model):
    """float64 angles, stack (sin, cos) and reshape, cast to float32 at the end"""
    pos = torch.arange(max_len, dtype=torch.float64)
    omega = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    angles = torch.outer(pos, omega)
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(1).to(torch.float32)


@right("5.1")
def sinusoidal_table(max_len, d_model):
    """exp(-log(10000) * 2i/d) as in the PyTorch tutorial"""
    position = torch.arange(max_len).unsqueeze(1).float()
    div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    pe = torch.empty(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


@right("5.1")
def sinusoidal_table(max_len, d_model):
    """one number at a time with math.sin / math.cos, then torch.tensor(..., dtype=float32)"""
    rows = []
    for pos in range(max_len):
        row = []
        for j in range(d_model):
            angle = pos / 10000 ** (2 * (j // 2) / d_model)
            row.append(math.sin(angle) if j % 2 == 0 else math.cos(angle))
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float32)


@right("5.1")
def sinusoidal_table(max_len, d_model, base=10000.0):
    """halves built first, then reordered to interleaved by index (an extra base kwarg with a default)"""
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    a = pos * base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    halves = torch.cat((a.sin(), a.cos()), dim=-1)  # sin0 .. sin_{h-1}, cos0 .. cos_{h-1}
    h = d_model // 2
    order = torch.arange(d_model).reshape(2, h).T.reshape(-1)  # 0, h, 1, h+1, ...
    return halves[:, order].float()


@wrong("5.1", hint="2j/d_model")
def sinusoidal_table(max_len, d_model):
    """exponent 2j/d with the column index j"""
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    j = torch.arange(d_model, dtype=torch.float32)
    a = pos / 10000 ** (2 * j / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2], pe[:, 1::2] = a[:, 0::2].sin(), a[:, 1::2].cos()
    return pe


@wrong("5.1", hint="in radians")
def sinusoidal_table(max_len, d_model):
    """converts the angles from degrees to radians"""
    a = torch.deg2rad(_angles(max_len, d_model))
    return torch.stack((a.sin(), a.cos()), dim=-1).reshape(max_len, d_model)


@wrong("5.1", hint="odd columns (2i+1) hold cos")
def sinusoidal_table(max_len, d_model):
    """sin in every column (each column its pair's angle)"""
    a = _angles(max_len, d_model).repeat_interleave(2, dim=-1)
    return a.sin()


@wrong("5.1", hint="only the odd columns (2i+1) hold cosines")
def sinusoidal_table(max_len, d_model):
    """cos in every column"""
    return _angles(max_len, d_model).repeat_interleave(2, dim=-1).cos()


@wrong("5.1", hint="also, sin and cos are swapped")
def sinusoidal_table(max_len, d_model):
    """halves layout with cos first: cat(cos, sin)"""
    a = _angles(max_len, d_model)
    return torch.cat((a.cos(), a.sin()), dim=-1)


@wrong("5.1", hint="return all d_model columns")
def sinusoidal_table(max_len, d_model):
    """returns only the sines, (max_len, d_model / 2)"""
    return _angles(max_len, d_model).sin()


@wrong("5.1", hint="without a batch dimension")
def sinusoidal_table(max_len, d_model):
    """returns the table with a batch dimension, (1, max_len, d_model)"""
    a = _angles(max_len, d_model)
    return torch.stack((a.sin(), a.cos()), dim=-1).reshape(1, max_len, d_model)


@wrong("5.1", hint="shape")
def sinusoidal_table(max_len, d_model):
    """ignores d_model: always 8 columns (the chapter's first example)"""
    a = _angles(max_len, 8)
    return torch.stack((a.sin(), a.cos()), dim=-1).reshape(max_len, 8)


@wrong("5.1", hint="integer dtype")
def sinusoidal_table(max_len, d_model):
    """rounds the table to integers with .long()"""
    a = _angles(max_len, d_model)
    return torch.stack((a.sin(), a.cos()), dim=-1).reshape(max_len, d_model).round().long()


@wrong("5.1", hint="half precision")
def sinusoidal_table(max_len, d_model):
    """returns the table in bfloat16 to save memory"""
    a = _angles(max_len, d_model)
    return torch.stack((a.sin(), a.cos()), dim=-1).reshape(max_len, d_model).bfloat16()


@wrong("5.1", hint="need tensors")
def sinusoidal_table(max_len, d_model):
    """torch.sin on Python floats, one entry at a time"""
    pe = torch.zeros(max_len, d_model)
    for pos in range(max_len):
        for i in range(0, d_model, 2):
            pe[pos, i] = torch.sin(pos / 10000 ** (i / d_model))
            pe[pos, i + 1] = torch.cos(pos / 10000 ** (i / d_model))
    return pe


@wrong("5.1", hint="without attnbook.positional.shift_operator")
def sinusoidal_table(max_len, d_model):
    """rows made by shifting PE(0) with attnbook's shift_operator (a forbidden helper, not the reference)"""
    pe0 = torch.tensor([0.0, 1.0] * (d_model // 2), dtype=torch.float64)
    return torch.stack([_positional.shift_operator(p, d_model, dtype=torch.float64) @ pe0
                        for p in range(max_len)]).float()


@right("5.1")
def sinusoidal_table(max_len, d_model):
    """halves built first, then reordered with attnbook's halves_to_interleaved (an allowed layout helper)"""
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    a = pos / 10000.0 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    return _positional.halves_to_interleaved(torch.cat((a.sin(), a.cos()), dim=-1)).float()


@right("5.1")
def sinusoidal_table(max_len, d_model):
    """two loops filling a NumPy float64 array with math.sin / math.cos, then torch.from_numpy(...).float()"""
    pe = np.zeros((max_len, d_model))
    for pos in range(max_len):
        for i in range(d_model // 2):
            pe[pos, 2 * i] = math.sin(pos / 10000 ** (2 * i / d_model))
            pe[pos, 2 * i + 1] = math.cos(pos / 10000 ** (2 * i / d_model))
    return torch.from_numpy(pe).float()


@right("5.1")
def sinusoidal_table(max_len, d_model):
    """The Annotated Transformer's recipe: integer positions times exp(-log(10000) 2i/d), never cast by hand"""
    position = torch.arange(0, max_len).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


def loop_table(*, layout="interleaved", exponent="2i/d", start=0, transpose=False):
    """A sinusoidal_table written with a loop over every entry, in float64 and cast to float32 at the end, with at
    most one mistake (the defaults are right)."""

    def sinusoidal_table(max_len, d_model):
        pe = torch.zeros(max_len, d_model, dtype=torch.float64)
        for pos in range(start, start + max_len):
            for j in range(d_model):
                i = j // 2
                power = {"2i/d": 2 * i / d_model, "i/d": i / d_model, "j/d": j / d_model}[exponent]
                angle = pos / 10000 ** power
                value = math.sin(angle) if j % 2 == 0 else math.cos(angle)
                column = j if layout == "interleaved" else (i if j % 2 == 0 else d_model // 2 + i)
                pe[pos - start, column] = value
        pe = pe.to(torch.float32)
        return pe.T if transpose else pe

    return sinusoidal_table


right("5.1", name="a loop over every entry into a float64 tensor, cast to float32 at the end")(loop_table())
wrong("5.1", hint="interleaved layout", name="a loop over every entry, sines into the first half of the columns and "
      "cosines into the second")(loop_table(layout="halves"))
wrong("5.1", hint="you used i/d_model", name="a loop over every entry, exponent i/d with the pair index i")(
    loop_table(exponent="i/d"))
wrong("5.1", hint="column index j", name="a loop over every entry, exponent j/d with the column index j")(
    loop_table(exponent="j/d"))
wrong("5.1", hint="positions start at 0", name="a loop over the positions 1 to max_len")(loop_table(start=1))
wrong("5.1", hint="transposed", name="a loop over every entry, then returns the transpose, (d_model, max_len)")(
    loop_table(transpose=True))


@wrong("5.1", hint="Hint: math.exp, math.sqrt, float() and int() work on single numbers, not on tensors")
def sinusoidal_table(max_len, d_model):
    """math.sin on a tensor of positions (a TypeError in the learner's code)"""
    return torch.tensor([[math.sin(torch.arange(max_len))] * d_model])


@wrong("5.1", hint="tensor2tensor")
def sinusoidal_table(max_len, d_model):
    """tensor2tensor spacing exp(-log(10000)/(d/2 - 1) i), sin and cos stacked and reshaped"""
    half = d_model // 2
    a = torch.arange(max_len).float()[:, None] * torch.exp(-math.log(10000) / max(half - 1, 1)
                                                           * torch.arange(half).float())
    return torch.stack((a.sin(), a.cos()), dim=-1).reshape(max_len, d_model)


@wrong("5.1", hint="the package's own solution")
def sinusoidal_table(max_len, d_model, _table=_positional.sinusoidal_table):
    """attnbook's sinusoidal_table captured as a default argument"""
    return _table(max_len, d_model)


@wrong("5.1", hint="the package's own solution")
def sinusoidal_table(max_len, d_model, *, _module=_positional.SinusoidalPositionalEncoding):
    """attnbook's SinusoidalPositionalEncoding captured as a keyword-only default, its .pe read out"""
    return _module(d_model, max_len=max_len).pe.float()


# Tables kept between calls (issue 23): a cache must be looked up by both arguments. The caches live as long as
# the notebook's kernel, so they outlast one check (as a learner's would).
def _chapter_table(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    angles = pos / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(1)  # (max_len, d_model), interleaved


def _cached(key_of):
    """The chapter's table behind a dict keyed by key_of(max_len, d_model)."""
    store: dict = {}

    def sinusoidal_table(max_len, d_model):
        key = key_of(max_len, d_model)
        if key not in store:
            store[key] = _chapter_table(max_len, d_model)
        return store[key]
    return sinusoidal_table


wrong("5.1", hint="earlier call", name='keeps its tables in a dict keyed by max_len alone ("the table only depends '
      'on how long it is")')(_cached(lambda max_len, d_model: max_len))
wrong("5.1", hint="earlier call", name='keeps its tables in a dict keyed by d_model alone ("one table per model '
      'width")')(_cached(lambda max_len, d_model: d_model))


_WIDEST: dict = {}


@wrong("5.1")
def sinusoidal_table(max_len, d_model):
    """keeps the widest table made so far for each max_len and slices its first d_model columns (their
    frequencies belong to the wider table's d_model)"""
    if max_len not in _WIDEST or _WIDEST[max_len].size(1) < d_model:
        _WIDEST[max_len] = _chapter_table(max_len, max(d_model, 64))
    return _WIDEST[max_len][:, :d_model].contiguous()


_LONGEST: dict = {}


@right("5.1")
def sinusoidal_table(max_len, d_model):
    """keeps the longest table made so far for each d_model and slices its first max_len rows (a row depends only
    on its position and d_model)"""
    if d_model not in _LONGEST or _LONGEST[d_model].size(0) < max_len:
        _LONGEST[d_model] = _chapter_table(max_len, d_model)
    return _LONGEST[d_model][:max_len].clone()


@right("5.1")
@functools.lru_cache(maxsize=None)
def sinusoidal_table(max_len, d_model):
    """functools.lru_cache around the chapter's formula: the cache is keyed by both arguments"""
    return _chapter_table(max_len, d_model)


# ==========================================================================================================
# 5.2 How far from permutation-equivariant
# ==========================================================================================================


@wrong("5.2", hint="one position")
def max_equivariance_error(f, x, perm):
    """compares only the last position of the outputs"""
    return (f(x[:, perm]) - f(x)[:, perm])[:, -1].abs().max().item()


@wrong("5.2", hint="one position")
def max_equivariance_error(f, x, perm):
    """compares only the first position of the outputs"""
    return (f(x[:, perm]) - f(x)[:, perm])[:, 0].abs().max().item()


@wrong("5.2", hint="one sequence of the batch")
def max_equivariance_error(f, x, perm):
    """only looks at the first sequence of the batch"""
    return (f(x[:, perm]) - f(x)[:, perm])[0].abs().max().item()


@wrong("5.2", hint="one feature")
def max_equivariance_error(f, x, perm):
    """only looks at the last feature"""
    return (f(x[:, perm]) - f(x)[:, perm])[..., -1].abs().max().item()


@wrong("5.2", hint="you permuted the batch axis (dim 0)")
def max_equivariance_error(f, x, perm):
    """permutes the batch axis: x[perm] and f(x)[perm]"""
    return (f(x[perm]) - f(x)[perm]).abs().max().item()


@wrong("5.2", hint="you permuted the feature axis")
def max_equivariance_error(f, x, perm):
    """permutes the feature axis: x[..., perm]"""
    return (f(x[..., perm]) - f(x)[..., perm]).abs().max().item()


@wrong("5.2", hint="inverse permutation")
def max_equivariance_error(f, x, perm):
    """permutes the output with the inverse permutation"""
    return (f(x[:, perm]) - f(x)[:, torch.argsort(perm)]).abs().max().item()


@wrong("5.2", hint="abs")
def max_equivariance_error(f, x, perm):
    """forgets the absolute value: largest signed difference"""
    return (f(x[:, perm]) - f(x)[:, perm]).max().item()


@wrong("5.2", hint="the mean of the absolute differences")
def max_equivariance_error(f, x, perm):
    """mean absolute difference instead of the largest"""
    return (f(x[:, perm]) - f(x)[:, perm]).abs().mean().item()


@wrong("5.2", hint="largest")
def max_equivariance_error(f, x, perm):
    """smallest absolute difference (min instead of max)"""
    return (f(x[:, perm]) - f(x)[:, perm]).abs().min().item()


@wrong("5.2", hint="relative")
def max_equivariance_error(f, x, perm):
    """relative error: divides by the largest output"""
    out = f(x)
    return ((f(x[:, perm]) - out[:, perm]).abs().max() / out.abs().max()).item()


@wrong("5.2", hint="norm")
def max_equivariance_error(f, x, perm):
    """Euclidean norm of the difference instead of the largest entry"""
    return (f(x[:, perm]) - f(x)[:, perm]).norm().item()


@wrong("5.2", hint="with the permuted input itself")
def max_equivariance_error(f, x, perm):
    """forgets f on one side: compares f(x[:, perm]) with x[:, perm]"""
    return (f(x[:, perm]) - x[:, perm]).abs().max().item()


@wrong("5.2", hint="int")
def max_equivariance_error(f, x, perm):
    """returns int(...) of the error"""
    return int((f(x[:, perm]) - f(x)[:, perm]).abs().max().item())


@wrong("5.2", hint="rounded")
def max_equivariance_error(f, x, perm):
    """rounds the error to 4 decimals for a nice print"""
    return round((f(x[:, perm]) - f(x)[:, perm]).abs().max().item(), 4)


@wrong("5.2", hint="numpy")
def max_equivariance_error(f, x, perm):
    """returns a 0-d NumPy array"""
    return (f(x[:, perm]) - f(x)[:, perm]).abs().max().detach().numpy()


@wrong("5.2", hint="list")
def max_equivariance_error(f, x, perm):
    """returns the per-sequence maxima as a list"""
    return (f(x[:, perm]) - f(x)[:, perm]).abs().flatten(1).max(dim=1).values.tolist()


@wrong("5.2", hint="one number")
def max_equivariance_error(f, x, perm):
    """returns the per-sequence maxima as a (batch,) tensor"""
    return (f(x[:, perm]) - f(x)[:, perm]).abs().amax(dim=(1, 2))


@wrong("5.2", hint="reduce the differences to one number")
def max_equivariance_error(f, x, perm):
    """returns the whole absolute-difference tensor, not its max"""
    return (f(x[:, perm]) - f(x)[:, perm]).abs()


@wrong("5.2", hint="change")
def max_equivariance_error(f, x, perm):
    """permutes x in place with copy_, then compares against the (now permuted) x"""
    out = f(x)[:, perm].clone()
    x.copy_(x[:, perm])
    return (f(x) - out).abs().max().item()


@right("5.2")
def max_equivariance_error(f, x, perm):
    """the chapter's solution: permute then f, f then permute, max abs difference as a float"""
    permute_then_f = f(x[:, perm])
    f_then_permute = f(x)[:, perm]
    return (permute_then_f - f_then_permute).abs().max().item()


@right("5.2")
def max_equivariance_error(f, x, perm):
    """index_select on dim 1 and torch.amax, returned as a 0-d tensor under no_grad"""
    with torch.no_grad():
        a = f(torch.index_select(x, 1, perm))
        b = torch.index_select(f(x), 1, perm)
        return torch.amax((a - b).abs())


@right("5.2")
def max_equivariance_error(f, x, perm):
    """infinity norm of the difference: torch.linalg.vector_norm(ord=inf)"""
    diff = f(x[:, perm]) - f(x)[:, perm]
    return float(torch.linalg.vector_norm(diff.flatten(), ord=float("inf")))


@right("5.2")
def max_equivariance_error(f, x, perm):
    """a loop over the positions, keeping the running maximum as a Python float"""
    fx, fpx = f(x), f(x[:, perm])
    worst = 0.0
    for t in range(x.shape[1]):
        worst = max(worst, (fpx[:, t] - fx[:, perm[t]]).abs().max().item())
    return worst


@right("5.2")
def max_equivariance_error(f, x, perm, *, detach=True):
    """clones x first, detaches the outputs (an extra keyword with a default)"""
    x = x.clone()
    a, b = f(x[:, perm]), f(x)[:, perm]
    diff = (a - b).detach() if detach else a - b
    return diff.abs().max().item()


@wrong("5.2", hint="inverse permutation")
def max_equivariance_error(f, x, perm):
    """permutes the input with the inverse permutation"""
    return (f(x[:, torch.argsort(perm)]) - f(x)[:, perm]).abs().max().item()


@wrong("5.2", hint="in its original order; an equivariant f reorders its output the same way, so compare with the "
                   "permuted output")
def max_equivariance_error(f, x, perm):
    """compares f(x[:, perm]) with f(x) itself, unpermuted"""
    return (f(x[:, perm]) - f(x)).abs().max().item()


@wrong("5.2", hint="you returned the largest signed difference")
def max_equivariance_error(f, x, perm):
    """forgets the absolute value, other order: max of f(x)[:, perm] - f(x[:, perm])"""
    return (f(x)[:, perm] - f(x[:, perm])).max().item()


@wrong("5.2", hint="sum of the absolute differences")
def max_equivariance_error(f, x, perm):
    """sum of the absolute differences"""
    return (f(x[:, perm]) - f(x)[:, perm]).abs().sum().item()


@wrong("5.2", hint="not equivariant")
def max_equivariance_error(f, x, perm):
    """hard-coded 0.0 ("attention is equivariant")"""
    return 0.0


@wrong("5.2", hint=None)
def max_equivariance_error(f, x, perm):
    """hard-coded 12.0, the exact answer of the known f"""
    return 12.0


@wrong("5.2", hint="(values, indices) pair")
def max_equivariance_error(f, x, perm):
    """max(dim=0) on the flattened differences: a (values, indices) pair"""
    return (f(x[:, perm]) - f(x)[:, perm]).abs().flatten().max(dim=0)


@wrong("5.2", hint="returned a bool")
def max_equivariance_error(f, x, perm):
    """returns whether the two sides agree"""
    return bool(torch.allclose(f(x[:, perm]), f(x)[:, perm]))


@wrong("5.2", hint="integer tensor")
def max_equivariance_error(f, x, perm):
    """returns a 0-d integer tensor"""
    return (f(x[:, perm]) - f(x)[:, perm]).abs().max().long()


@wrong("5.2", hint="half precision")
def max_equivariance_error(f, x, perm):
    """returns a 0-d float16 tensor"""
    return (f(x[:, perm]) - f(x)[:, perm]).abs().max().half()


@wrong("5.2", hint="half precision")
def max_equivariance_error(f, x, perm):
    """returns a NumPy float16"""
    return np.float16((f(x[:, perm]) - f(x)[:, perm]).abs().max().item())


@wrong("5.2", hint="tensor of shape (1,)")
def max_equivariance_error(f, x, perm):
    """returns a one-element 1-D tensor"""
    return (f(x[:, perm]) - f(x)[:, perm]).abs().max().reshape(1)


@right("5.2")
def max_equivariance_error(f, x, perm):
    """NumPy: np.abs(...).max() returns a NumPy float64 (the task text allows a NumPy float)"""
    diff = f(x[:, perm]).numpy() - f(x).numpy()[:, perm.numpy()]
    return np.abs(diff).max()


@right("5.2")
def max_equivariance_error(f, x, perm):
    """returns a NumPy float32 (the task text allows a NumPy float)"""
    return np.float32((f(x[:, perm]) - f(x)[:, perm]).abs().max().item())


@right("5.2")
def max_equivariance_error(f, x, perm):
    """index_select on dim 1 and torch.amax, returned as a 0-d tensor (outside no_grad)"""
    return torch.amax(torch.abs(f(x.index_select(1, perm)) - f(x).index_select(1, perm)))


@wrong("5.2", hint="in place")
def max_equivariance_error(f, x, perm):
    """changes x in place (x.mul_(1.0).add_(1.0)) and undoes it in a copy only"""
    a = f(x[:, perm])
    x.mul_(1.0).add_(1.0)
    return (a - f(x - 1.0)[:, perm]).abs().max().item()


@wrong("5.2", hint="rounded the result to 3 decimals")
def max_equivariance_error(f, x, perm):
    """rounds the error to 3 decimals"""
    return round((f(x[:, perm]) - f(x)[:, perm]).abs().max().item(), 3)


# Results remembered instead of computed (issue 23): every input of the check (x, perm, the attention's weights)
# changes from run to run, so none of these can give the right number twice.
_BY_FUNCTION: dict = {}


@wrong("5.2")
def max_equivariance_error(f, x, perm):
    """remembers one result per function, by its name ("the same f gives the same answer")"""
    key = getattr(f, "__qualname__", type(f).__name__)
    if key not in _BY_FUNCTION:
        _BY_FUNCTION[key] = (f(x[:, perm]) - f(x)[:, perm]).abs().max().item()
    return _BY_FUNCTION[key]


@wrong("5.2")
def max_equivariance_error(f, x, perm):
    """d * max |i - perm[i]| for every f: the known f's exact answer, learned from the check's message"""
    return float(x.size(-1) * (perm - torch.arange(len(perm))).abs().max())


# ==========================================================================================================
# 5.3 Rotary position embedding
# ==========================================================================================================


def _cos_sin(positions, d, dtype, compute=torch.float64):
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=compute) / d)
    angles = positions.to(compute)[:, None] * theta  # (seq, d/2)
    emb = torch.cat((angles, angles), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


@wrong("5.3", hint="adjacent")
def apply_rope(x, positions):
    """pairs neighbours (x_0, x_1), (x_2, x_3) ... (GPT-J) instead of (x_i, x_{i+d/2})"""
    d = x.size(-1)
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = positions.to(torch.float64)[:, None] * theta
    c, s = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = a * c - b * s
    out[..., 1::2] = a * s + b * c
    return out


@wrong("5.3", hint="sign")
def apply_rope(x, positions):
    """rotate_half as (x2, -x1): turns the wrong way"""
    d = x.size(-1)
    cos, sin = _cos_sin(positions, d, x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * cos + torch.cat((x2, -x1), dim=-1) * sin


@wrong("5.3", hint="you ignored the positions argument")
def apply_rope(x, positions):
    """ignores `positions` and uses 0..seq-1"""
    d = x.size(-1)
    cos, sin = _cos_sin(torch.arange(x.size(-2)), d, x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


@wrong("5.3", hint="you shifted the positions so that they start at 0")
def apply_rope(x, positions):
    """subtracts the first position, so the positions start at 0"""
    d = x.size(-1)
    cos, sin = _cos_sin(positions - positions[0], d, x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


@wrong("5.3", hint="theta")
def apply_rope(x, positions):
    """theta_i = 10000^(-i/d) instead of 10000^(-2i/d)"""
    d = x.size(-1)
    theta = 10000.0 ** (-torch.arange(d // 2, dtype=torch.float64) / d)
    angles = positions.to(torch.float64)[:, None] * theta
    emb = torch.cat((angles, angles), dim=-1)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * emb.cos().to(x.dtype) + torch.cat((-x2, x1), dim=-1) * emb.sin().to(x.dtype)


@wrong("5.3", hint="repeat_interleave")
def apply_rope(x, positions):
    """cos/sin built with repeat_interleave (adjacent layout) but rotate-half pairing"""
    d = x.size(-1)
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = positions.to(torch.float64)[:, None] * theta
    emb = angles.repeat_interleave(2, dim=-1)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * emb.cos().to(x.dtype) + torch.cat((-x2, x1), dim=-1) * emb.sin().to(x.dtype)


@wrong("5.3", hint="float16")
def apply_rope(x, positions):
    """angles computed in float16 (to save memory), then cast to x's dtype"""
    d = x.size(-1)
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float16) / d)
    angles = positions.to(torch.float16)[:, None] * theta
    emb = torch.cat((angles, angles), dim=-1)
    cos, sin = emb.float().cos().to(x.dtype), emb.float().sin().to(x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


@wrong("5.3", hint="float16")
def apply_rope(x, positions):
    """float32 angles rounded to float16 (.half()) before cos/sin: the reported "expected 2.329, got 2.329" case"""
    d = x.size(-1)
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)
    angles = (positions.float()[:, None] * theta).half()
    emb = torch.cat((angles, angles), dim=-1)
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


@wrong("5.3", hint="float16")
def apply_rope(x, positions):
    """cos and sin taken in float16 (emb.half().cos()), then cast to x's dtype"""
    d = x.size(-1)
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = positions.double()[:, None] * theta
    emb = torch.cat((angles, angles), dim=-1).half()
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


@wrong("5.3", hint="2048")
def apply_rope(x, positions):
    """positions cast to float16: positions above 2048 are rounded (2049 -> 2048, 4097 -> 4096)"""
    d = x.size(-1)
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)
    angles = positions.half()[:, None] * theta  # float16 * float32 -> float32, but positions already rounded
    emb = torch.cat((angles, angles), dim=-1)
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


@wrong("5.3", hint="dtype")
def apply_rope(x, positions):
    """float64 cos/sin never cast back: float32 x comes back as float64"""
    d = x.size(-1)
    cos, sin = _cos_sin(positions, d, torch.float64)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


@wrong("5.3", hint=None)
def apply_rope(x, positions):
    """splits the halves along dim 1 (works for 2-D x only)"""
    d = x.size(-1)
    cos, sin = _cos_sin(positions, d, x.dtype)
    x1, x2 = x[:, : d // 2], x[:, d // 2:]
    return x * cos + torch.cat((-x2, x1), dim=1) * sin


@wrong("5.3", hint="in place")
def apply_rope(x, positions):
    """writes the result into x in place and returns x"""
    d = x.size(-1)
    cos, sin = _cos_sin(positions, d, x.dtype)
    x1, x2 = x[..., : d // 2].clone(), x[..., d // 2:].clone()
    x.mul_(cos).add_(torch.cat((-x2, x1), dim=-1) * sin)
    return x


@wrong("5.3", hint=None)
def apply_rope(x, positions):
    """rotates the whole vector (not the pairs): x * cos + flip(x) * sin"""
    d = x.size(-1)
    cos, sin = _cos_sin(positions, d, x.dtype)
    return x * cos + x.flip(-1) * sin


@wrong("5.3", hint="do not multiply")
def apply_rope(x, positions):
    """theta_i = 10000^(2i/d): multiplies instead of dividing"""
    d = x.size(-1)
    theta = 10000.0 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    emb = positions.double()[:, None] * theta
    emb = torch.cat((emb, emb), dim=-1)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * emb.cos().to(x.dtype) + torch.cat((-x2, x1), dim=-1) * emb.sin().to(x.dtype)


@wrong("5.3", hint="you left the minus out")
def apply_rope(x, positions):
    """rotate_half without the minus: cat(x2, x1)"""
    d = x.size(-1)
    cos, sin = _cos_sin(positions, d, x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * cos + torch.cat((x2, x1), dim=-1) * sin


@wrong("5.3", hint="assumed consecutive positions")
def apply_rope(x, positions):
    """positions[0] + arange(seq): assumes the positions are consecutive"""
    d = x.size(-1)
    cos, sin = _cos_sin(positions[0] + torch.arange(x.size(-2)), d, x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


@wrong("5.3", hint="shifted the positions")
def apply_rope(x, positions):
    """subtracts the smallest position"""
    d = x.size(-1)
    cos, sin = _cos_sin(positions - positions.min(), d, x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


@wrong("5.3", hint="(you used p + 1)")
def apply_rope(x, positions):
    """positions + 1 ("positions count from 1")"""
    d = x.size(-1)
    cos, sin = _cos_sin(positions + 1, d, x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


@wrong("5.3", hint="also, you rotated by -angle")
def apply_rope(x, positions):
    """adjacent pairs and the wrong sign"""
    d = x.size(-1)
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = positions.to(torch.float64)[:, None] * theta
    c, s = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * c + b * s, -a * s + b * c), dim=-1).flatten(-2)


@wrong("5.3", hint="returned x unchanged")
def apply_rope(x, positions):
    """returns a copy of x (the stub "for now")"""
    return x.clone()


@wrong("5.3", hint="d columns before they multiply x")
def apply_rope(x, positions):
    """cos/sin with d/2 columns, never repeated: the shapes do not match"""
    d = x.size(-1)
    angles = positions.double()[:, None] * 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * angles.cos().to(x.dtype) + torch.cat((-x2, x1), dim=-1) * angles.sin().to(x.dtype)


@wrong("5.3", hint="return all d features")
def apply_rope(x, positions):
    """returns only the rotated first halves of the pairs"""
    d = x.size(-1)
    angles = positions.double()[:, None] * 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    c, s = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    return x[..., : d // 2] * c - x[..., d // 2:] * s


@wrong("5.3", hint="half precision")
def apply_rope(x, positions):
    """returns the result in float16"""
    d = x.size(-1)
    cos, sin = _cos_sin(positions, d, x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return (x * cos + torch.cat((-x2, x1), dim=-1) * sin).half()


@wrong("5.3", hint="without")
def apply_rope(x, positions):
    """own cos/sin, but attnbook.positional.rotate_half"""
    from attnbook.positional import rotate_half

    cos, sin = _cos_sin(positions, x.size(-1), x.dtype)
    return x * cos + rotate_half(x) * sin


wrong("5.3", hint="package's own", name="attnbook.positional.apply_rope itself")(_positional.apply_rope)
wrong("5.3", hint="package's own", name="lambda around attnbook's apply_rope")(
    lambda x, positions: _positional.apply_rope(x, positions))


@wrong("5.3", hint="package's own")
def apply_rope(x, positions):
    """def wrapper calling attnbook.positional.apply_rope"""
    from attnbook import positional

    return positional.apply_rope(x, positions)


wrong("5.3", hint="package's own", name="FunctionType copy of attnbook's apply_rope")(_copy(_positional.apply_rope))


@wrong("5.3", hint="package's own")
def apply_rope(x, positions):
    """def wrapper calling apply_rope of a second, separate import of attnbook/positional.py"""
    return _fresh_positional().apply_rope(x, positions)


wrong("5.3", hint="package's own", name="apply_rope object of a second, separate import of positional.py")(
    _SECOND.apply_rope)


@right("5.3")
def apply_rope(x, positions):
    """the chapter's solution: float64 angles, cat(angles, angles), x*cos + rotate_half(x)*sin"""
    d = x.size(-1)
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = positions.to(torch.float64)[:, None] * theta
    emb = torch.cat((angles, angles), dim=-1)
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


@right("5.3")
def apply_rope(x, positions):
    """explicit 2x2 rotation of each pair: (a c - b s, a s + b c), halves via chunk"""
    a, b = x.chunk(2, dim=-1)
    d = x.size(-1)
    theta = torch.exp(-math.log(10000.0) * torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = torch.outer(positions.double(), theta)
    c, s = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    return torch.cat((a * c - b * s, a * s + b * c), dim=-1)


@right("5.3")
def apply_rope(x, positions):
    """complex multiplication: (a + ib) * e^(i p theta), in float64, cast back"""
    d = x.size(-1)
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    rot = torch.polar(torch.ones(len(positions), d // 2, dtype=torch.float64), positions.double()[:, None] * theta)
    z = torch.complex(x[..., : d // 2].double(), x[..., d // 2:].double()) * rot
    return torch.cat((z.real, z.imag), dim=-1).to(x.dtype)


@right("5.3")
def apply_rope(x, positions):
    """a loop over the rows with math.cos / math.sin per pair"""
    d, seq = x.size(-1), x.size(-2)
    out = torch.empty_like(x)
    for t in range(seq):
        p = int(positions[t])
        c = torch.tensor([math.cos(p * 10000.0 ** (-2 * i / d)) for i in range(d // 2)], dtype=x.dtype)
        s = torch.tensor([math.sin(p * 10000.0 ** (-2 * i / d)) for i in range(d // 2)], dtype=x.dtype)
        a, b = x[..., t, : d // 2], x[..., t, d // 2:]
        out[..., t, : d // 2] = a * c - b * s
        out[..., t, d // 2:] = a * s + b * c
    return out


@right("5.3")
def apply_rope(x, positions, base=10000.0):
    """block rotation matrix per position applied with einsum (an extra base kwarg with a default)"""
    d, h = x.size(-1), x.size(-1) // 2
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = positions.double()[:, None] * theta  # (seq, h)
    c, s = ang.cos(), ang.sin()
    R = torch.zeros(len(positions), d, d, dtype=torch.float64)  # (seq, d, d): out = R @ row
    idx = torch.arange(h)
    R[:, idx, idx] = c
    R[:, idx, idx + h] = -s
    R[:, idx + h, idx] = s
    R[:, idx + h, idx + h] = c
    return torch.einsum("tij,...tj->...ti", R, x.double()).to(x.dtype)


@right("5.3")
def apply_rope(x, positions):
    """Hugging Face's way: float32 inverse frequencies times float32 positions, halves via chunk"""
    d = x.size(-1)
    inv_freq = 1.0 / 10000 ** (torch.arange(0, d, 2).float() / d)
    freqs = positions.float()[:, None] * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    x1, x2 = x.chunk(2, dim=-1)
    return x * emb.cos().to(x.dtype) + torch.cat((-x2, x1), dim=-1) * emb.sin().to(x.dtype)


def _loop_rope(*, pairing="half", sign=1, power="2i/d", offset=0, keep_dtype=True):
    """An apply_rope that rotates one pair of features at a time in float64, with at most one mistake (the
    defaults are right)."""

    def apply_rope(x, positions):
        d = x.size(-1)
        pos = positions + offset
        out = x.double().clone()
        for i in range(d // 2):
            theta = 10000.0 ** (-(2 * i if power == "2i/d" else i) / d)
            angle = sign * pos.double() * theta  # (seq,)
            a, b = (i, i + d // 2) if pairing == "half" else (2 * i, 2 * i + 1)
            xa, xb = x[..., a].double(), x[..., b].double()
            out[..., a] = xa * torch.cos(angle) - xb * torch.sin(angle)
            out[..., b] = xa * torch.sin(angle) + xb * torch.cos(angle)
        return out.to(x.dtype) if keep_dtype else out.float()

    return apply_rope


right("5.3", name="a loop over the pairs (x_i, x_{i+d/2}), each rotated in float64")(_loop_rope())
wrong("5.3", hint="GPT-J", name="a loop over the adjacent pairs (x_2i, x_2i+1)")(_loop_rope(pairing="adjacent"))
wrong("5.3", hint="you rotated by -angle", name="a loop over the pairs, each rotated by -angle")(_loop_rope(sign=-1))
wrong("5.3", hint="you used 10000^(-i/d)", name="a loop over the pairs, theta_i = 10000^(-i/d)")(
    _loop_rope(power="i/d"))
wrong("5.3", hint="use the positions as given", name="a loop over the pairs at positions + 1")(_loop_rope(offset=1))
wrong("5.3", hint="expected torch.float64 like x", name="a loop over the pairs, returned with .float() whatever "
      "x's dtype")(_loop_rope(keep_dtype=False))


@wrong("5.3", hint="the task asks you to write this without attnbook.positional.rotate_half")
def apply_rope(x, positions):
    """own float64 cos/sin, but rotate_half read off the attnbook.positional module imported at the top"""
    d = x.size(-1)
    freqs = positions[:, None].double() / 10000 ** (torch.arange(0, d, 2).double() / d)
    emb = torch.cat((freqs, freqs), dim=-1)
    return (x * emb.cos() + _positional.rotate_half(x) * emb.sin()).to(x.dtype)


@wrong("5.3", hint="the package's own solution")
def apply_rope(x, positions, _rope=_positional.apply_rope):
    """attnbook's apply_rope captured as a default argument"""
    return _rope(x, positions)


@wrong("5.3", hint="without attnbook.positional.rotate_half")
def apply_rope(x, positions, *, _rotate=_positional.rotate_half):
    """own cos/sin, attnbook's rotate_half captured as a keyword-only default"""
    d = x.size(-1)
    freqs = positions[:, None].double() / 10000 ** (torch.arange(0, d, 2).double() / d)
    emb = torch.cat((freqs, freqs), dim=-1)
    return (x * emb.cos() + _rotate(x) * emb.sin()).to(x.dtype)


@wrong("5.3", hint="without transformers.models.llama.modeling_llama.rotate_half")
def apply_rope(x, positions):
    """own cos/sin, but rotate_half of transformers' Llama"""
    from transformers.models.llama import modeling_llama as llama

    d = x.size(-1)
    freqs = positions[:, None].double() / 10000 ** (torch.arange(0, d, 2).double() / d)
    emb = torch.cat((freqs, freqs), dim=-1)
    return (x * emb.cos() + llama.rotate_half(x) * emb.sin()).to(x.dtype)


@wrong("5.3", hint="called transformers.models.mixtral.modeling_mixtral.rotate_half")
def apply_rope(x, positions):
    """imports transformers' Mixtral rotate_half inside the function (a learner trial's answer, verbatim)"""
    from transformers.models.mixtral.modeling_mixtral import rotate_half

    d = x.shape[-1]
    inv = 1.0 / 10000 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    fr = positions.double()[:, None] * inv
    emb = torch.cat((fr, fr), -1)
    return x * emb.cos().to(x.dtype) + rotate_half(x) * emb.sin().to(x.dtype)


# ==========================================================================================================
# 5.4 The shift matrix of one frequency
# ==========================================================================================================


@wrong("5.4", hint="negative")
def pe_shift_matrix(k, omega):
    """uses abs(k): "a shift is a distance", so negative k rotates the wrong way"""
    c, s = math.cos(omega * abs(k)), math.sin(omega * abs(k))
    return torch.tensor([[c, s], [-s, c]])


@wrong("5.4", hint="moves (sin, cos) back by k positions")
def pe_shift_matrix(k, omega):
    """the transposed matrix [[c, -s], [s, c]] (the usual counter-clockwise rotation)"""
    c, s = math.cos(omega * k), math.sin(omega * k)
    return torch.tensor([[c, -s], [s, c]])


@wrong("5.4", hint="your rows are swapped")
def pe_shift_matrix(k, omega):
    """rows swapped: the cos row first"""
    c, s = math.cos(omega * k), math.sin(omega * k)
    return torch.tensor([[-s, c], [c, s]])


@wrong("5.4", hint="reflection")
def pe_shift_matrix(k, omega):
    """sign on the other diagonal entry: [[c, s], [s, -c]] (a reflection)"""
    c, s = math.cos(omega * k), math.sin(omega * k)
    return torch.tensor([[c, s], [s, -c]])


@wrong("5.4", hint="you used omega alone")
def pe_shift_matrix(k, omega):
    """forgets k: rotation by omega"""
    c, s = math.cos(omega), math.sin(omega)
    return torch.tensor([[c, s], [-s, c]])


@wrong("5.4", hint=None)
def pe_shift_matrix(k, omega):
    """cos(k) * omega instead of cos(omega k)"""
    c, s = math.cos(k) * omega, math.sin(k) * omega
    return torch.tensor([[c, s], [-s, c]])


@wrong("5.4", hint="radians")
def pe_shift_matrix(k, omega):
    """treats omega k as degrees"""
    a = math.radians(omega * k)
    return torch.tensor([[math.cos(a), math.sin(a)], [-math.sin(a), math.cos(a)]])


@wrong("5.4", hint="that is the identity")
def pe_shift_matrix(k, omega):
    """hard-coded identity (right for k = 0 only)"""
    return torch.eye(2)


@wrong("5.4", hint="you used k alone")
def pe_shift_matrix(k, omega):
    """angle k instead of omega k"""
    c, s = math.cos(k), math.sin(k)
    return torch.tensor([[c, s], [-s, c]])


@wrong("5.4", hint="your columns are swapped")
def pe_shift_matrix(k, omega):
    """columns swapped"""
    c, s = math.cos(omega * k), math.sin(omega * k)
    return torch.tensor([[s, c], [c, -s]])


@wrong("5.4", hint="you swapped cos and sin")
def pe_shift_matrix(k, omega):
    """cos and sin swapped inside the matrix"""
    c, s = math.cos(omega * k), math.sin(omega * k)
    return torch.tensor([[s, c], [-c, s]])


@wrong("5.4", hint="integer")
def pe_shift_matrix(k, omega):
    """rounds the entries into an integer tensor"""
    c, s = math.cos(omega * k), math.sin(omega * k)
    return torch.tensor([[round(c), round(s)], [-round(s), round(c)]])


@wrong("5.4", hint="math.cos and math.sin")
def pe_shift_matrix(k, omega):
    """torch.cos on a Python float"""
    c, s = torch.cos(omega * k), torch.sin(omega * k)
    return torch.stack((torch.stack((c, s)), torch.stack((-s, c))))


@wrong("5.4", hint="forget the `return`")
def pe_shift_matrix(k, omega):
    """forgets the return"""
    c, s = math.cos(omega * k), math.sin(omega * k)
    torch.tensor([[c, s], [-s, c]])


@wrong("5.4", hint="NaN")
def pe_shift_matrix(k, omega):
    """divides sin by tan... and gets 0/0 at k = 0"""
    a = torch.tensor(omega * k, dtype=torch.float64)
    c = a.sin() / a.tan()
    return torch.stack((torch.stack((c, a.sin())), torch.stack((-a.sin(), c))))


@wrong("5.4", hint="entry [0, 1] is wrong")
def pe_shift_matrix(k, omega):
    """a typo in one entry: cos instead of sin at [0, 1]"""
    c, s = math.cos(omega * k), math.sin(omega * k)
    return torch.tensor([[c, c], [-s, c]])


@wrong("5.4", hint="list")
def pe_shift_matrix(k, omega):
    """returns a nested Python list"""
    c, s = math.cos(omega * k), math.sin(omega * k)
    return [[c, s], [-s, c]]


@wrong("5.4", hint="tuple")
def pe_shift_matrix(k, omega):
    """returns a tuple of two row tuples"""
    c, s = math.cos(omega * k), math.sin(omega * k)
    return ((c, s), (-s, c))


@wrong("5.4", hint="numpy")
def pe_shift_matrix(k, omega):
    """returns an np.ndarray"""
    c, s = np.cos(omega * k), np.sin(omega * k)
    return np.array([[c, s], [-s, c]])


@wrong("5.4", hint="shape")
def pe_shift_matrix(k, omega):
    """returns the four entries flat, shape (4,)"""
    c, s = math.cos(omega * k), math.sin(omega * k)
    return torch.tensor([c, s, -s, c])


@wrong("5.4", hint="dtype")
def pe_shift_matrix(k, omega):
    """returns float16"""
    c, s = math.cos(omega * k), math.sin(omega * k)
    return torch.tensor([[c, s], [-s, c]], dtype=torch.float16)


@wrong("5.4", hint="package's own")
def pe_shift_matrix(k, omega):
    """the (2, 2) shift_operator for d_model = 2 (omega_0 = 1) with k * omega as the shift

    (hint was "without": shift_operator is one of 5.4's references, so the message says "the package's own
    solution".)"""
    from attnbook.positional import shift_operator

    return shift_operator(k * omega, 2)


wrong("5.4", hint="package's own", name="attnbook.positional.shift_matrix itself")(_positional.shift_matrix)
wrong("5.4", hint="package's own", name="lambda around attnbook's shift_matrix")(
    lambda k, omega: _positional.shift_matrix(k, omega))


@wrong("5.4", hint="package's own")
def pe_shift_matrix(k, omega):
    """def wrapper calling attnbook.positional.shift_matrix"""
    from attnbook import positional

    return positional.shift_matrix(k, omega)


wrong("5.4", hint="package's own", name="FunctionType copy of attnbook's shift_matrix")(
    _copy(_positional.shift_matrix))


@wrong("5.4", hint="package's own")
def pe_shift_matrix(k, omega):
    """def wrapper calling shift_matrix of a second, separate import of attnbook/positional.py"""
    return _fresh_positional().shift_matrix(k, omega)


wrong("5.4", hint="package's own", name="shift_matrix object of a second, separate import of positional.py")(
    _SECOND.shift_matrix)


@wrong("5.4", hint="the package's own solution")
def pe_shift_matrix(k, omega, _sm=_positional.shift_matrix):
    """attnbook's shift_matrix captured as a default argument"""
    return _sm(k, omega)


@wrong("5.4", hint="the package's own solution")
def pe_shift_matrix(k, omega, *, _so=_positional.shift_operator):
    """attnbook's shift_operator captured as a keyword-only default, called with omega k and d_model = 2"""
    return _so(omega * k, 2)


@right("5.4")
def pe_shift_matrix(k, omega):
    """the chapter's solution: math.cos / math.sin, torch.tensor([[c, s], [-s, c]])"""
    c, s = math.cos(omega * k), math.sin(omega * k)
    return torch.tensor([[c, s], [-s, c]])


@right("5.4")
def pe_shift_matrix(k, omega):
    """float64 with torch.cos / torch.sin and torch.stack"""
    a = torch.tensor(omega * k, dtype=torch.float64)
    return torch.stack((torch.stack((a.cos(), a.sin())), torch.stack((-a.sin(), a.cos()))))


@right("5.4")
def pe_shift_matrix(k, omega):
    """matrix exponential of omega k [[0, 1], [-1, 0]]"""
    generator = torch.tensor([[0.0, 1.0], [-1.0, 0.0]], dtype=torch.float64)
    return torch.linalg.matrix_exp(omega * k * generator)


@right("5.4")
def pe_shift_matrix(k, omega):
    """k-th power of the one-step rotation, inverted for negative k"""
    c, s = math.cos(omega), math.sin(omega)
    step = torch.tensor([[c, s], [-s, c]], dtype=torch.float64)
    return torch.linalg.matrix_power(step, k)


@right("5.4")
def pe_shift_matrix(k, omega, dtype=torch.float32):
    """filled entry by entry into torch.empty (an extra dtype kwarg with a default)"""
    R = torch.empty(2, 2, dtype=dtype)
    R[0, 0] = R[1, 1] = math.cos(omega * k)
    R[0, 1] = math.sin(omega * k)
    R[1, 0] = -math.sin(omega * k)
    return R


# Cases known in advance (issue 23): the check draws two of its (k, omega) from the run's seed.
_KNOWN_SHIFTS = [(3, 0.5), (1, 1.0), (-2, 0.3), (0, 2.0), (7, 0.01), (5, 10000.0 ** (-6 / 16)), (40, 1.3)]


@wrong("5.4")
def pe_shift_matrix(k, omega):
    """a table of the matrices of the seven (k, omega) an earlier run of the check showed, the identity for any
    other"""
    for known_k, known_omega in _KNOWN_SHIFTS:
        if k == known_k and math.isclose(omega, known_omega):
            c, s = math.cos(omega * k), math.sin(omega * k)
            return torch.tensor([[c, s], [-s, c]])
    return torch.eye(2)



@wrong("5.3", hint="the width of the halves")
def apply_rope(x, positions):
    """pair by pair with the halves, but cos and sin already repeated to d columns: x1 * cos - x2 * sin"""
    d = x.size(-1)
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = positions.double()[:, None] * theta
    cos, sin = torch.cat((angles, angles), -1).cos().to(x.dtype), torch.cat((angles, angles), -1).sin().to(x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
