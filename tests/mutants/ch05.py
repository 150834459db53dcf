"""Chapter 5 (positional encoding): learner answers to exercises 5.1-5.4, one table per exercise (most rows are
the exercise's learner template, `st`, `mee`, `rope` or `sm`, with one mistake switched on)."""
from __future__ import annotations

import functools
import math

import numpy as np
import torch

from mutants import RIGHT, WRONG, fresh_import, function_copy, right, table, wrong

import attnbook.positional as _positional

_SECOND = fresh_import(_positional, "positional")  # executed once at import: a cheap module (torch is loaded)


def _copy(f):
    """A types.FunctionType copy of f, keyword-only defaults included."""
    g = function_copy(f, f.__name__)
    g.__kwdefaults__ = f.__kwdefaults__
    return g


# 5.1 The sinusoidal table ---------------------------------------------------------------------------------------------

def st(*, power="2i/d", base=10000, divide=True, start=0, half=None, dtype=torch.float32, radians=False,
       even="sin", odd="cos", halves=False):
    """5.1's learner template: column j's angle is pos / base^(2i/d) with i = j // 2, sin into the even columns
    and cos into the odd ones of a float32 table (the defaults: a right answer; "i/(d/2-1)" is tensor2tensor's
    spacing, half="angles" computes them in float16, halves=True is the concatenated-halves layout)."""

    def sinusoidal_table(max_len, d_model):
        pos = torch.arange(start, start + max_len, dtype=torch.float16 if half else dtype)[:, None]
        if half == "positions":
            pos = pos.to(dtype)
        j = torch.arange(d_model)
        numerator = {"2i/d": 2 * (j // 2), "i/d": j // 2, "j/d": j, "2j/d": 2 * j, "i/(d/2-1)": j // 2}[power]
        denominator = max(d_model // 2 - 1, 1) if power == "i/(d/2-1)" else d_model
        scale = base ** (numerator.to(pos.dtype) / denominator)
        angles = pos / scale if divide else pos * scale  # (max_len, d_model): column j's angle
        if half == "angles":
            angles = angles.float()
        if radians:
            angles = torch.deg2rad(angles)
        even_values, odd_values = getattr(angles[:, 0::2], even)(), getattr(angles[:, 1::2], odd)()
        if halves:
            return torch.cat((even_values, odd_values), dim=-1)
        pe = torch.zeros_like(angles)
        pe[:, 0::2], pe[:, 1::2] = even_values, odd_values
        return pe

    return sinusoidal_table


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


# Tables kept between calls (issue 23): a cache must be looked up by both arguments. The caches live as long as
# the notebook's kernel, so they outlast one check (as a learner's would).
def _cached(key_of):
    """The chapter's table behind a dict keyed by key_of(max_len, d_model)."""
    store: dict = {}

    def sinusoidal_table(max_len, d_model):
        key = key_of(max_len, d_model)
        if key not in store:
            store[key] = st()(max_len, d_model)
        return store[key]
    return sinusoidal_table


table("5.1", [
    ("zeros, then sin into the even and cos into the odd columns (the chapter's solution)", RIGHT, st()),
    ("concatenated halves (all sines, then all cosines) instead of interleaved", "halves", st(halves=True)),
    ("cosine in the even columns and sine in the odd ones", "sin and cos are swapped", st(even="cos", odd="sin")),
    ("exponent i/d instead of 2i/d (arange(d/2) / d_model)", "frequenc", st(power="i/d")),
    ("exponent j/d with the column index j, so each cosine gets the next, slower, frequency", "frequenc",
     st(power="j/d")),
    ("exponent 2j/d with the column index j", "2j/d_model", st(power="2j/d")),
    ("multiplies by 10000^(2i/d) instead of dividing", "divide by it", st(divide=False)),
    ("tensor2tensor/fairseq spacing 10000^(-i/(d/2 - 1))", "frequenc", st(power="i/(d/2-1)")),
    ("positions 1..max_len instead of 0..max_len-1", "position 0", st(start=1)),
    ("base 1000 instead of 10000", "base 10000", st(base=1000)),
    ("converts the angles from degrees to radians", "in radians", st(radians=True)),
    ("computed and returned in float64 (no cast to float32)", "float32", st(dtype=torch.float64)),
    ("angles computed in float16 and then cast to float32", "float16", st(half="angles")),
    ("positions made with torch.arange(max_len, dtype=torch.float16): rows past 2048 hold rounded positions",
     "2048", st(half="positions")),
    ("sin in every column (each column its pair's angle)", "odd columns (2i+1) hold cos", st(odd="sin")),
    ("cos in every column", "only the odd columns (2i+1) hold cosines", st(even="cos")),
    ("halves layout with cos first: cat(cos, sin)", "also, sin and cos are swapped",
     st(halves=True, even="cos", odd="sin")),
    ("returns only the sines, (max_len, d_model / 2)", "return all d_model columns",
     lambda max_len, d_model: st()(max_len, d_model)[:, 0::2]),
    ("returns the transposed table, (d_model, max_len)", "shape",
     lambda max_len, d_model: st()(max_len, d_model).T.contiguous()),
    ("ignores max_len: always builds 64 rows (the chapter's example fits)", "shape",
     lambda max_len, d_model: st()(64, d_model)),
    ("ignores d_model: always 8 columns (the chapter's first example)", "shape",
     lambda max_len, d_model: st()(max_len, 8)),
    ("returns the table with a batch dimension, (1, max_len, d_model)", "without a batch dimension",
     lambda max_len, d_model: st()(max_len, d_model)[None]),
    ("rounds the table to integers with .long()", "integer dtype",
     lambda max_len, d_model: st()(max_len, d_model).round().long()),
    ("returns the table in bfloat16 to save memory", "half precision",
     lambda max_len, d_model: st()(max_len, d_model).bfloat16()),
    ("math.sin on a tensor of positions (a TypeError in the learner's code)",
     "Hint: math.exp, math.sqrt, float() and int() work on single numbers, not on tensors",
     lambda max_len, d_model: torch.tensor([[math.sin(torch.arange(max_len))] * d_model])),
    ("torch.sin on Python floats, one entry at a time", "need tensors",
     lambda max_len, d_model: torch.tensor([[torch.sin(pos / 10000 ** (2 * (j // 2) / d_model)) if j % 2 == 0
                                              else torch.cos(pos / 10000 ** (2 * (j // 2) / d_model))
                                              for j in range(d_model)] for pos in range(max_len)])),
    ("one number at a time with math.sin / math.cos, then torch.tensor(..., dtype=float32)", RIGHT,
     lambda max_len, d_model: torch.tensor([[math.sin(pos / 10000 ** (2 * (j // 2) / d_model)) if j % 2 == 0
                                              else math.cos(pos / 10000 ** (2 * (j // 2) / d_model))
                                              for j in range(d_model)] for pos in range(max_len)],
                                            dtype=torch.float32)),
    ("a loop over every entry into a float64 tensor, cast to float32 at the end", RIGHT, loop_table()),
    ("a loop over every entry, sines into the first half of the columns and cosines into the second",
     "interleaved layout", loop_table(layout="halves")),
    ("a loop over every entry, exponent i/d with the pair index i", "you used i/d_model", loop_table(exponent="i/d")),
    ("a loop over every entry, exponent j/d with the column index j", "column index j", loop_table(exponent="j/d")),
    ("a loop over the positions 1 to max_len", "positions start at 0", loop_table(start=1)),
    ("a loop over every entry, then returns the transpose, (d_model, max_len)", "transposed",
     loop_table(transpose=True)),
    ('keeps its tables in a dict keyed by max_len alone ("the table only depends on how long it is")',
     "earlier call", _cached(lambda max_len, d_model: max_len)),
    ('keeps its tables in a dict keyed by d_model alone ("one table per model width")', "earlier call",
     _cached(lambda max_len, d_model: d_model)),
    ("functools.lru_cache around the chapter's formula: the cache is keyed by both arguments", RIGHT,
     functools.lru_cache(maxsize=None)(st())),
    ("rows made by shifting PE(0) with attnbook's shift_operator (a forbidden helper, not the reference)",
     "without attnbook.positional.shift_operator",  # PE(p) = R_p PE(0), with PE(0) = (0, 1, 0, 1, ...)
     lambda max_len, d_model: torch.stack([_positional.shift_operator(p, d_model, dtype=torch.float64)
                                           @ torch.tensor([0.0, 1.0] * (d_model // 2), dtype=torch.float64)
                                           for p in range(max_len)]).float()),
    # SinusoidalPositionalEncoding is one of 5.1's references, so its message says "the package's own solution"
    ("reads the table out of attnbook's SinusoidalPositionalEncoding module", "package's own",
     lambda max_len, d_model: _positional.SinusoidalPositionalEncoding(d_model, max_len=max_len).pe.float()),
    ("builds it by adding SinusoidalPositionalEncoding to zeros (a reference of 5.1, as above)", "package's own",
     lambda max_len, d_model: _positional.SinusoidalPositionalEncoding(d_model, max_len)(torch.zeros(max_len,
                                                                                                    d_model))),
    ("attnbook.positional.sinusoidal_table itself", "package's own", _positional.sinusoidal_table),
    ("lambda around attnbook's sinusoidal_table", "package's own",
     lambda max_len, d_model: _positional.sinusoidal_table(max_len, d_model)),
    ("FunctionType copy of attnbook's sinusoidal_table", "package's own", _copy(_positional.sinusoidal_table)),
    ("sinusoidal_table object of a second, separate import of positional.py", "package's own",
     _SECOND.sinusoidal_table),
    ("attnbook's sinusoidal_table captured as a default argument", "the package's own solution",
     lambda max_len, d_model, _table=_positional.sinusoidal_table: _table(max_len, d_model)),
    ("attnbook's SinusoidalPositionalEncoding captured as a keyword-only default, its .pe read out",
     "the package's own solution",
     lambda max_len, d_model, *, _module=_positional.SinusoidalPositionalEncoding:
         _module(d_model, max_len=max_len).pe.float()),
])


@right("5.1")
def sinusoidal_table(max_len, d_model):
    """float64 angles, stack (sin, cos) and reshape, cast to float32 at the end"""
    omega = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    angles = torch.outer(torch.arange(max_len, dtype=torch.float64), omega)
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
    """The Annotated Transformer's recipe: integer positions times exp(-log(10000) 2i/d), never cast by hand"""
    position = torch.arange(0, max_len).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


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
def sinusoidal_table(max_len, d_model, base=10000.0):
    """halves built first, then reordered to interleaved by index (an extra base kwarg with a default)"""
    a = torch.arange(max_len, dtype=torch.float64)[:, None] * base ** (
        -torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    halves = torch.cat((a.sin(), a.cos()), dim=-1)  # sin0 .. sin_{h-1}, cos0 .. cos_{h-1}
    order = torch.arange(d_model).reshape(2, d_model // 2).T.reshape(-1)  # 0, h, 1, h+1, ...
    return halves[:, order].float()


@right("5.1")
def sinusoidal_table(max_len, d_model):
    """halves built first, then reordered with attnbook's halves_to_interleaved (an allowed layout helper)"""
    a = torch.arange(max_len, dtype=torch.float64)[:, None] / 10000.0 ** (
        torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    return _positional.halves_to_interleaved(torch.cat((a.sin(), a.cos()), dim=-1)).float()


_LONGEST: dict = {}


@right("5.1")
def sinusoidal_table(max_len, d_model):
    """keeps the longest table made so far for each d_model and slices its first max_len rows (a row depends only
    on its position and d_model)"""
    if d_model not in _LONGEST or _LONGEST[d_model].size(0) < max_len:
        _LONGEST[d_model] = st()(max_len, d_model)
    return _LONGEST[d_model][:max_len].clone()


_WIDEST: dict = {}


@wrong("5.1")
def sinusoidal_table(max_len, d_model):
    """keeps the widest table made so far for each max_len and slices its first d_model columns (their
    frequencies belong to the wider table's d_model)"""
    if max_len not in _WIDEST or _WIDEST[max_len].size(1) < d_model:
        _WIDEST[max_len] = st()(max_len, max(d_model, 64))
    return _WIDEST[max_len][:, :d_model].contiguous()


@wrong("5.1", hint="tensor")
def sinusoidal_table(max_len, d_model):
    """NumPy version, returns an np.ndarray"""
    a = np.arange(max_len)[:, None] / 10000 ** (np.arange(0, d_model, 2) / d_model)
    pe = np.zeros((max_len, d_model), dtype=np.float32)
    pe[:, 0::2], pe[:, 1::2] = np.sin(a), np.cos(a)
    return pe


@wrong("5.1", hint="tensor2tensor")
def sinusoidal_table(max_len, d_model):
    """tensor2tensor spacing exp(-log(10000)/(d/2 - 1) i), sin and cos stacked and reshaped"""
    half = d_model // 2
    a = torch.arange(max_len).float()[:, None] * torch.exp(-math.log(10000) / max(half - 1, 1)
                                                           * torch.arange(half).float())
    return torch.stack((a.sin(), a.cos()), dim=-1).reshape(max_len, d_model)


@wrong("5.1", hint="package's own")
def sinusoidal_table(max_len, d_model):
    """def wrapper calling attnbook.positional.sinusoidal_table"""
    from attnbook.positional import sinusoidal_table as table
    return table(max_len, d_model)


@wrong("5.1", hint="package's own")
def sinusoidal_table(max_len, d_model):
    """def wrapper calling sinusoidal_table of a second, separate import of attnbook/positional.py"""
    return fresh_import(_positional, "positional").sinusoidal_table(max_len, d_model)


# 5.2 How far from permutation-equivariant -----------------------------------------------------------------------------

def mee(*, axis="positions", inverse=None, against="f(x)[:, perm]", part=None, absolute=True, stat="max",
        item=True):
    """5.2's learner template: f of the permuted input minus f's output permuted, the largest absolute difference
    as a Python float (the defaults: a right answer; inverse: the side permuted with the inverse permutation,
    part: an index of the differences, stat=None: no reduction, item=False: the 0-d tensor)."""

    def max_equivariance_error(f, x, perm):
        p_in = torch.argsort(perm) if inverse == "input" else perm
        p_out = torch.argsort(perm) if inverse == "output" else perm
        if axis == "batch":
            diff = f(x[p_in]) - f(x)[p_out]
        elif axis == "features":
            diff = f(x[..., p_in]) - f(x)[..., p_out]
        elif against == "x[:, perm]":
            diff = f(x[:, p_in]) - x[:, p_in]
        elif against == "f(x)":
            diff = f(x[:, p_in]) - f(x)
        else:
            diff = f(x[:, p_in]) - f(x)[:, p_out]
        if part is not None:
            diff = diff[part]
        if absolute:
            diff = diff.abs()
        if stat is None:
            return diff
        error = getattr(diff, stat)()
        return error.item() if item else error

    return max_equivariance_error


table("5.2", [
    ("the chapter's solution: permute then f, f then permute, max abs difference as a float", RIGHT, mee()),
    ("compares only the last position of the outputs", "one position", mee(part=np.s_[:, -1])),
    ("compares only the first position of the outputs", "one position", mee(part=np.s_[:, 0])),
    ("only looks at the first sequence of the batch", "one sequence of the batch", mee(part=np.s_[0])),
    ("only looks at the last feature", "one feature", mee(part=np.s_[..., -1])),
    ("permutes the batch axis: x[perm] and f(x)[perm]", "you permuted the batch axis (dim 0)", mee(axis="batch")),
    ("permutes the feature axis: x[..., perm]", "you permuted the feature axis", mee(axis="features")),
    ("permutes the output with the inverse permutation", "inverse permutation", mee(inverse="output")),
    ("permutes the input with the inverse permutation", "inverse permutation", mee(inverse="input")),
    ("forgets f on one side: compares f(x[:, perm]) with x[:, perm]", "with the permuted input itself",
     mee(against="x[:, perm]")),
    ("compares f(x[:, perm]) with f(x) itself, unpermuted",
     "in its original order; an equivariant f reorders its output the same way, so compare with the permuted output",
     mee(against="f(x)")),
    ("forgets the absolute value: largest signed difference", "abs", mee(absolute=False)),
    ("forgets the absolute value, other order: max of f(x)[:, perm] - f(x[:, perm])",
     "you returned the largest signed difference", lambda f, x, perm: (f(x)[:, perm] - f(x[:, perm])).max().item()),
    ("mean absolute difference instead of the largest", "the mean of the absolute differences", mee(stat="mean")),
    ("smallest absolute difference (min instead of max)", "largest", mee(stat="min")),
    ("sum of the absolute differences", "sum of the absolute differences", mee(stat="sum")),
    ("Euclidean norm of the difference instead of the largest entry", "norm", mee(stat="norm")),
    ("relative error: divides by the largest output", "relative",
     lambda f, x, perm: mee()(f, x, perm) / f(x).abs().max().item()),
    ("returns the whole absolute-difference tensor, not its max", "reduce the differences to one number",
     mee(stat=None)),
    ("returns the per-sequence maxima as a (batch,) tensor", "one number",
     lambda f, x, perm: mee(stat=None)(f, x, perm).amax(dim=(1, 2))),
    ("returns the per-sequence maxima as a list", "list",
     lambda f, x, perm: mee(stat=None)(f, x, perm).amax(dim=(1, 2)).tolist()),
    ("max(dim=0) on the flattened differences: a (values, indices) pair", "(values, indices) pair",
     lambda f, x, perm: mee(stat=None)(f, x, perm).flatten().max(dim=0)),
    ("returns whether the two sides agree", "returned a bool",
     lambda f, x, perm: bool(torch.allclose(f(x[:, perm]), f(x)[:, perm]))),
    ("returns int(...) of the error", "int", lambda f, x, perm: int(mee()(f, x, perm))),
    ("rounds the error to 4 decimals for a nice print", "rounded", lambda f, x, perm: round(mee()(f, x, perm), 4)),
    ("rounds the error to 3 decimals", "rounded the result to 3 decimals",
     lambda f, x, perm: round(mee()(f, x, perm), 3)),
    ("returns a 0-d NumPy array", "numpy", lambda f, x, perm: mee(item=False)(f, x, perm).detach().numpy()),
    ("returns a 0-d integer tensor", "integer tensor", lambda f, x, perm: mee(item=False)(f, x, perm).long()),
    ("returns a 0-d float16 tensor", "half precision", lambda f, x, perm: mee(item=False)(f, x, perm).half()),
    ("returns a NumPy float16", "half precision", lambda f, x, perm: np.float16(mee()(f, x, perm))),
    ("returns a one-element 1-D tensor", "tensor of shape (1,)",
     lambda f, x, perm: mee(item=False)(f, x, perm).reshape(1)),
    ('hard-coded 0.0 ("attention is equivariant")', "not equivariant", lambda f, x, perm: 0.0),
    ("compares f(x[:, perm]) with itself: always 0", "this f is not equivariant",
     lambda f, x, perm: (f(x[:, perm]) - f(x[:, perm])).abs().max().item()),
    ("hard-coded 12.0, the exact answer of the known f", None, lambda f, x, perm: 12.0),
    ("d * max |i - perm[i]| for every f: the known f's exact answer, learned from the check's message", None,
     lambda f, x, perm: float(x.size(-1) * (perm - torch.arange(len(perm))).abs().max())),
    ("returns a NumPy float32 (the task text allows a NumPy float)", RIGHT,
     lambda f, x, perm: np.float32(mee()(f, x, perm))),
    ("NumPy: np.abs(...).max() returns a NumPy float64 (the task text allows a NumPy float)", RIGHT,
     lambda f, x, perm: np.abs(f(x[:, perm]).numpy() - f(x).numpy()[:, perm.numpy()]).max()),
    ("index_select on dim 1 and torch.amax, returned as a 0-d tensor (outside no_grad)", RIGHT,
     lambda f, x, perm: torch.amax(torch.abs(f(x.index_select(1, perm)) - f(x).index_select(1, perm)))),
    ("infinity norm of the difference: torch.linalg.vector_norm(ord=inf)", RIGHT,
     lambda f, x, perm: float(torch.linalg.vector_norm((f(x[:, perm]) - f(x)[:, perm]).flatten(), ord=float("inf")))),
])


@right("5.2")
def max_equivariance_error(f, x, perm):
    """index_select on dim 1 and torch.amax, returned as a 0-d tensor under no_grad"""
    with torch.no_grad():
        return torch.amax((f(torch.index_select(x, 1, perm)) - torch.index_select(f(x), 1, perm)).abs())


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


@wrong("5.2", hint="change")
def max_equivariance_error(f, x, perm):
    """permutes x in place with copy_, then compares against the (now permuted) x"""
    out = f(x)[:, perm].clone()
    x.copy_(x[:, perm])
    return (f(x) - out).abs().max().item()


@wrong("5.2", hint="in place")
def max_equivariance_error(f, x, perm):
    """changes x in place (x.mul_(1.0).add_(1.0)) and undoes it in a copy only"""
    a = f(x[:, perm])
    x.mul_(1.0).add_(1.0)
    return (a - f(x - 1.0)[:, perm]).abs().max().item()


# Results remembered instead of computed (issue 23): every input of the check (x, perm, the attention's weights)
# changes from run to run, so none of these can give the right number twice.
_BY_FUNCTION: dict = {}


@wrong("5.2")
def max_equivariance_error(f, x, perm):
    """remembers one result per function, by its name ("the same f gives the same answer")"""
    key = getattr(f, "__qualname__", type(f).__name__)
    if key not in _BY_FUNCTION:
        _BY_FUNCTION[key] = mee()(f, x, perm)
    return _BY_FUNCTION[key]


# 5.3 Rotary position embedding ----------------------------------------------------------------------------------------

def rope(*, pairs="halves", rot="-x2, x1", power="-2i/d", dtype=torch.float64, half=None,
         emb=None, cast=True, dim=-1):
    """5.3's learner template: angles p * 10000^(-2i/d) in float64, cos and sin of cat(angles, angles) cast to x's
    dtype, x * cos + rotate_half(x) * sin with rotate_half(x) = cat(-x2, x1) (the defaults: a right answer; pairs
    "adjacent" is GPT-J's, rot what multiplies sin, emb the layout of cos and sin, "none": the d/2 angles)."""

    def apply_rope(x, positions):
        d = x.size(-1)
        steps = torch.arange(d // 2, dtype=dtype) if power == "-i/d" else torch.arange(0, d, 2, dtype=dtype)
        theta = 10000.0 ** (steps / d if power == "+2i/d" else -steps / d)
        angles = (positions.half() if half == "positions" else positions.to(dtype))[:, None] * theta  # (seq, d/2)
        if half == "angles":
            angles = angles.half()
        layout = emb or ("cat" if pairs == "halves" else "repeat_interleave")
        if layout == "cat":
            angles = torch.cat((angles, angles), dim=-1)
        elif layout == "repeat_interleave":
            angles = angles.repeat_interleave(2, dim=-1)
        cos, sin = angles.cos(), angles.sin()
        if cast:
            cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        if pairs == "adjacent":
            x1, x2 = x[..., 0::2], x[..., 1::2]
        else:
            x1, x2 = (x[..., : d // 2], x[..., d // 2:]) if dim == -1 else (x[:, : d // 2], x[:, d // 2:])
        if rot == "flip":
            rotated = x.flip(-1)
        else:
            first, second = {"-x2, x1": (-x2, x1), "x2, -x1": (x2, -x1), "x2, x1": (x2, x1)}[rot]
            if pairs == "adjacent":
                rotated = torch.stack((first, second), dim=-1).flatten(-2)
            else:
                rotated = torch.cat((first, second), dim=dim)
        return x * cos + rotated * sin

    return apply_rope


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


def _cos_sin(positions, d, dtype):
    """The learner's helper: cos and sin of cat(angles, angles), angles in float64, cast to dtype."""
    angles = positions.double()[:, None] * 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    emb = torch.cat((angles, angles), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def _rope_with(rotate_half, x, positions):
    """The learner's RoPE, own float64 cos and sin, around a rotate_half of someone else's; cast to x's dtype."""
    cos, sin = _cos_sin(positions, x.size(-1), torch.float64)
    return (x * cos + rotate_half(x) * sin).to(x.dtype)


table("5.3", [
    ("the chapter's solution: float64 angles, cat(angles, angles), x*cos + rotate_half(x)*sin", RIGHT, rope()),
    ("pairs neighbours (x_0, x_1), (x_2, x_3) ... (GPT-J) instead of (x_i, x_{i+d/2})", "adjacent",
     rope(pairs="adjacent")),
    ("adjacent pairs and the wrong sign", "also, you rotated by -angle", rope(pairs="adjacent", rot="x2, -x1")),
    ("rotate_half as (x2, -x1): turns the wrong way", "sign", rope(rot="x2, -x1")),
    ("rotate_half without the minus: cat(x2, x1)", "you left the minus out", rope(rot="x2, x1")),
    ("rotates the whole vector (not the pairs): x * cos + flip(x) * sin", None, rope(rot="flip")),
    ("ignores `positions` and uses 0..seq-1", "you ignored the positions argument",
     lambda x, positions: rope()(x, torch.arange(x.size(-2)))),
    ("subtracts the first position, so the positions start at 0", "you shifted the positions so that they start at 0",
     lambda x, positions: rope()(x, positions - positions[0])),
    ("subtracts the smallest position", "shifted the positions",
     lambda x, positions: rope()(x, positions - positions.min())),
    ("positions[0] + arange(seq): assumes the positions are consecutive", "assumed consecutive positions",
     lambda x, positions: rope()(x, positions[0] + torch.arange(x.size(-2)))),
    ('positions + 1 ("positions count from 1")', "(you used p + 1)", lambda x, positions: rope()(x, positions + 1)),
    ("theta_i = 10000^(-i/d) instead of 10000^(-2i/d)", "theta", rope(power="-i/d")),
    ("theta_i = 10000^(2i/d): multiplies instead of dividing", "do not multiply", rope(power="+2i/d")),
    ("cos/sin built with repeat_interleave (adjacent layout) but rotate-half pairing", "repeat_interleave",
     rope(emb="repeat_interleave")),
    ("cos/sin with d/2 columns, never repeated: the shapes do not match", "d columns before they multiply x",
     rope(emb="none")),
    ("angles computed in float16 (to save memory), then cast to x's dtype", "float16", rope(dtype=torch.float16)),
    ('float32 angles rounded to float16 (.half()) before cos/sin: the reported "expected 2.329, got 2.329" case',
     "float16", rope(dtype=torch.float32, half="angles")),
    ("cos and sin taken in float16 (emb.half().cos()), then cast to x's dtype", "float16", rope(half="angles")),
    ("positions cast to float16: positions above 2048 are rounded (2049 -> 2048, 4097 -> 4096)", "2048",
     rope(dtype=torch.float32, half="positions")),
    ("float64 cos/sin never cast back: float32 x comes back as float64", "dtype", rope(cast=False)),
    ("splits the halves along dim 1 (works for 2-D x only)", None, rope(dim=1)),
    ("returns the result in float16", "half precision", lambda x, positions: rope()(x, positions).half()),
    ("returns only the rotated first halves of the pairs", "return all d features",
     lambda x, positions: rope()(x, positions)[..., : x.size(-1) // 2]),
    ("writes the result into x in place and returns x", "in place",
     lambda x, positions: x.copy_(rope()(x, positions))),
    ('returns a copy of x (the stub "for now")', "returned x unchanged", lambda x, positions: x.clone()),
    ("a loop over the pairs (x_i, x_{i+d/2}), each rotated in float64", RIGHT, _loop_rope()),
    ("a loop over the adjacent pairs (x_2i, x_2i+1)", "GPT-J", _loop_rope(pairing="adjacent")),
    ("a loop over the pairs, each rotated by -angle", "you rotated by -angle", _loop_rope(sign=-1)),
    ("a loop over the pairs, theta_i = 10000^(-i/d)", "you used 10000^(-i/d)", _loop_rope(power="i/d")),
    ("a loop over the pairs at positions + 1", "use the positions as given", _loop_rope(offset=1)),
    ("a loop over the pairs, returned with .float() whatever x's dtype", "expected torch.float64 like x",
     _loop_rope(keep_dtype=False)),
    ("attnbook.positional.apply_rope itself", "package's own", _positional.apply_rope),
    ("lambda around attnbook's apply_rope", "package's own",
     lambda x, positions: _positional.apply_rope(x, positions)),
    ("FunctionType copy of attnbook's apply_rope", "package's own", _copy(_positional.apply_rope)),
    ("apply_rope object of a second, separate import of positional.py", "package's own", _SECOND.apply_rope),
    ("attnbook's apply_rope captured as a default argument", "the package's own solution",
     lambda x, positions, _rope=_positional.apply_rope: _rope(x, positions)),
    ("own float64 cos/sin, but rotate_half read off the attnbook.positional module imported at the top",
     "the task asks you to write this without attnbook.positional.rotate_half",
     lambda x, positions: _rope_with(_positional.rotate_half, x, positions)),
    ("own cos/sin, attnbook's rotate_half captured as a keyword-only default",
     "without attnbook.positional.rotate_half",
     lambda x, positions, *, _rotate=_positional.rotate_half: _rope_with(_rotate, x, positions)),
])


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
    ang = positions.double()[:, None] * base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (seq, h)
    c, s = ang.cos(), ang.sin()
    R = torch.zeros(len(positions), d, d, dtype=torch.float64)  # (seq, d, d): out = R @ row
    idx = torch.arange(h)
    R[:, idx, idx], R[:, idx, idx + h], R[:, idx + h, idx], R[:, idx + h, idx + h] = c, -s, s, c
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


@wrong("5.3", hint="the width of the halves")
def apply_rope(x, positions):
    """pair by pair with the halves, but cos and sin already repeated to d columns: x1 * cos - x2 * sin"""
    cos, sin = _cos_sin(positions, x.size(-1), x.dtype)
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


@wrong("5.3", hint="without")
def apply_rope(x, positions):
    """own cos/sin, but attnbook.positional.rotate_half"""
    from attnbook.positional import rotate_half
    return _rope_with(rotate_half, x, positions)


@wrong("5.3", hint="without transformers.models.llama.modeling_llama.rotate_half")
def apply_rope(x, positions):
    """own cos/sin, but rotate_half of transformers' Llama"""
    from transformers.models.llama import modeling_llama as llama
    return _rope_with(llama.rotate_half, x, positions)


@wrong("5.3", hint="called transformers.models.mixtral.modeling_mixtral.rotate_half")
def apply_rope(x, positions):
    """imports transformers' Mixtral rotate_half inside the function (a learner trial's answer, verbatim)"""
    from transformers.models.mixtral.modeling_mixtral import rotate_half

    d = x.shape[-1]
    inv = 1.0 / 10000 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    fr = positions.double()[:, None] * inv
    emb = torch.cat((fr, fr), -1)
    return x * emb.cos().to(x.dtype) + rotate_half(x) * emb.sin().to(x.dtype)


@wrong("5.3", hint="package's own")
def apply_rope(x, positions):
    """def wrapper calling attnbook.positional.apply_rope"""
    from attnbook import positional
    return positional.apply_rope(x, positions)


@wrong("5.3", hint="package's own")
def apply_rope(x, positions):
    """def wrapper calling apply_rope of a second, separate import of attnbook/positional.py"""
    return fresh_import(_positional, "positional").apply_rope(x, positions)


# 5.4 The shift matrix of one frequency --------------------------------------------------------------------------------

def sm(entries="[[c, s], [-s, c]]", *, dtype=torch.float32, lib=math):
    """5.4's learner template: c, s = cos(omega k), sin(omega k) with lib's cos and sin, the matrix as written in
    `entries` (the defaults: a right answer, math.cos and torch.tensor([[c, s], [-s, c]]))."""

    def pe_shift_matrix(k, omega):
        c, s = lib.cos(omega * k), lib.sin(omega * k)
        matrix = {"[[c, s], [-s, c]]": [[c, s], [-s, c]], "[[c, -s], [s, c]]": [[c, -s], [s, c]],
                  "[[-s, c], [c, s]]": [[-s, c], [c, s]], "[[c, s], [s, -c]]": [[c, s], [s, -c]],
                  "[[s, c], [c, -s]]": [[s, c], [c, -s]], "[[s, c], [-c, s]]": [[s, c], [-c, s]],
                  "[[c, c], [-s, c]]": [[c, c], [-s, c]]}[entries]
        return torch.tensor(matrix, dtype=dtype)

    return pe_shift_matrix


# Cases known in advance (issue 23): the check draws two of its (k, omega) from the run's seed.
_KNOWN_SHIFTS = [(3, 0.5), (1, 1.0), (-2, 0.3), (0, 2.0), (7, 0.01), (5, 10000.0 ** (-6 / 16)), (40, 1.3)]

table("5.4", [
    ("the chapter's solution: math.cos / math.sin, torch.tensor([[c, s], [-s, c]])", RIGHT, sm()),
    ("the transposed matrix [[c, -s], [s, c]] (the usual counter-clockwise rotation)",
     "moves (sin, cos) back by k positions", sm("[[c, -s], [s, c]]")),
    ("rows swapped: the cos row first", "your rows are swapped", sm("[[-s, c], [c, s]]")),
    ("columns swapped", "your columns are swapped", sm("[[s, c], [c, -s]]")),
    ("sign on the other diagonal entry: [[c, s], [s, -c]] (a reflection)", "reflection", sm("[[c, s], [s, -c]]")),
    ("cos and sin swapped inside the matrix", "you swapped cos and sin", sm("[[s, c], [-c, s]]")),
    ("a typo in one entry: cos instead of sin at [0, 1]", "entry [0, 1] is wrong", sm("[[c, c], [-s, c]]")),
    ('uses abs(k): "a shift is a distance", so negative k rotates the wrong way', "negative",
     lambda k, omega: sm()(abs(k), omega)),
    ("forgets k: rotation by omega", "you used omega alone", lambda k, omega: sm()(1, omega)),
    ("angle k instead of omega k", "you used k alone", lambda k, omega: sm()(k, 1.0)),
    ("cos(k) * omega instead of cos(omega k)", None, lambda k, omega: omega * sm()(k, 1.0)),
    ("treats omega k as degrees", "radians", lambda k, omega: sm()(k, math.radians(omega))),
    ("hard-coded identity (right for k = 0 only)", "that is the identity", lambda k, omega: torch.eye(2)),
    ("rounds the entries into an integer tensor", "integer", lambda k, omega: sm()(k, omega).round().long()),
    ("torch.cos on a Python float", "math.cos and math.sin", sm(lib=torch)),
    ("returns float16", "dtype", sm(dtype=torch.float16)),
    ("returns a nested Python list", "list", lambda k, omega: sm(dtype=torch.float64)(k, omega).tolist()),
    ("returns a tuple of two row tuples", "tuple",
     lambda k, omega: tuple(tuple(row) for row in sm(dtype=torch.float64)(k, omega).tolist())),
    ("returns an np.ndarray", "numpy", lambda k, omega: sm(dtype=torch.float64)(k, omega).numpy()),
    ("returns the four entries flat, shape (4,)", "shape", lambda k, omega: sm()(k, omega).flatten()),
    ("matrix exponential of omega k [[0, 1], [-1, 0]]", RIGHT,
     lambda k, omega: torch.linalg.matrix_exp(omega * k * torch.tensor([[0.0, 1.0], [-1.0, 0.0]],
                                                                       dtype=torch.float64))),
    ("k-th power of the one-step rotation, inverted for negative k", RIGHT,
     lambda k, omega: torch.linalg.matrix_power(sm(dtype=torch.float64)(1, omega), k)),
    ("a table of the matrices of the seven (k, omega) an earlier run of the check showed, the identity for any",
     WRONG, lambda k, omega: sm()(k, omega) if any(k == known_k and math.isclose(omega, known_omega)
                                                   for known_k, known_omega in _KNOWN_SHIFTS) else torch.eye(2)),
    ("attnbook.positional.shift_matrix itself", "package's own", _positional.shift_matrix),
    ("lambda around attnbook's shift_matrix", "package's own", lambda k, omega: _positional.shift_matrix(k, omega)),
    ("FunctionType copy of attnbook's shift_matrix", "package's own", _copy(_positional.shift_matrix)),
    ("shift_matrix object of a second, separate import of positional.py", "package's own", _SECOND.shift_matrix),
    ("attnbook's shift_matrix captured as a default argument", "the package's own solution",
     lambda k, omega, _sm=_positional.shift_matrix: _sm(k, omega)),
    ("attnbook's shift_operator captured as a keyword-only default, called with omega k and d_model = 2",
     "the package's own solution", lambda k, omega, *, _so=_positional.shift_operator: _so(omega * k, 2)),
    # shift_operator is one of 5.4's references, so its message says "the package's own solution"
    ("the (2, 2) shift_operator for d_model = 2 (omega_0 = 1) with k * omega as the shift", "package's own",
     lambda k, omega: _positional.shift_operator(k * omega, 2)),
])


@right("5.4")
def pe_shift_matrix(k, omega):
    """float64 with torch.cos / torch.sin and torch.stack"""
    a = torch.tensor(omega * k, dtype=torch.float64)
    return torch.stack((torch.stack((a.cos(), a.sin())), torch.stack((-a.sin(), a.cos()))))


@right("5.4")
def pe_shift_matrix(k, omega, dtype=torch.float32):
    """filled entry by entry into torch.empty (an extra dtype kwarg with a default)"""
    R = torch.empty(2, 2, dtype=dtype)
    R[0, 0] = R[1, 1] = math.cos(omega * k)
    R[0, 1] = math.sin(omega * k)
    R[1, 0] = -math.sin(omega * k)
    return R


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


@wrong("5.4", hint="package's own")
def pe_shift_matrix(k, omega):
    """def wrapper calling attnbook.positional.shift_matrix"""
    from attnbook import positional
    return positional.shift_matrix(k, omega)


@wrong("5.4", hint="package's own")
def pe_shift_matrix(k, omega):
    """def wrapper calling shift_matrix of a second, separate import of attnbook/positional.py"""
    return fresh_import(_positional, "positional").shift_matrix(k, omega)
