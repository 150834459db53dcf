"""Checkers for chapter 5, positional encoding.

The references are written out here from the formulas, independently of `attnbook.positional`: the sinusoidal
table column by column from PE[pos, 2i] = sin(pos / 10000^(2i/d)), RoPE as an explicit 2x2 rotation of each pair
(x_i, x_{i+d/2}), and the shift matrix by solving R [v(p0) v(p1)] = [v(p0+k) v(p1+k)] for two positions.
"""
from __future__ import annotations

import dis
import importlib
import math
import numbers
import re

import torch
from torch import Tensor

from ..multihead import MultiHeadAttention
from .compare import as_value, expect_tensor, expect_value, randn
from .guard import call, unwrap
from .hints import describe
from .registry import exercise, Wrong

F64 = torch.float64




def _kind(x) -> str:
    """describe(x), with NumPy arrays named as such ("a NumPy array of shape (2, 2)")."""
    if type(x).__module__ == "numpy" and hasattr(x, "shape") and hasattr(x, "__array__") and \
            type(x).__name__ == "ndarray":
        return f"a NumPy array of shape {tuple(x.shape)}"
    return describe(x)


def _first_match(got: Tensor, mistakes: list[tuple[str, Tensor | None, float]]) -> str | None:
    """The hint of the first mistake whose output `got` equals (to that mistake's tolerance), else None."""
    g = got.detach().to(F64).cpu()
    for hint, wrong, atol in mistakes:
        if wrong is not None and tuple(wrong.shape) == tuple(g.shape) and torch.allclose(g, wrong, atol=atol, rtol=0):
            return hint
    return None


def _expect_result(got, expected: Tensor, *, what: str, on: str, atol: float,
                   mistakes: list[tuple[str, Tensor | None, float]], shape_hints: dict[tuple, str],
                   dtype: torch.dtype, dtype_hint: str, like: str = "") -> Tensor:
    """Wrong unless `got` is a real tensor of expected's shape, of `dtype` and close to `expected`; name the likely
    mistake. The dtype is checked before the values, so a table in another precision gets the dtype message."""
    got = expect_tensor(got, what=what, on=on, finite=False)
    if tuple(got.shape) != tuple(expected.shape):
        raise Wrong(f"{what} has shape {tuple(got.shape)} on {on}, expected {tuple(expected.shape)}",
                    shape_hints.get(tuple(got.shape)))
    if got.is_complex() or got.dtype == torch.bool:
        raise Wrong(f"{what} has dtype {got.dtype} on {on}, expected real floating-point numbers")
    if not got.is_floating_point():
        raise Wrong(f"{what} has the integer dtype {got.dtype} on {on}, expected floating point",
                    "sines and cosines are fractions: keep the computation in floating point (no .int() or .long())")
    if got.dtype != dtype:
        if got.dtype in (torch.float16, torch.bfloat16):
            dtype_hint = ("half precision keeps only about 3 significant digits, far too few for positions; "
                          + dtype_hint)
        raise Wrong(f"{what} has dtype {got.dtype} on {on}, expected {dtype}{like}", dtype_hint)
    g = got.detach().to(F64).cpu()
    if torch.allclose(g, expected, atol=atol, rtol=0):
        return got
    hint = _first_match(got, mistakes)
    if hint is not None:
        raise Wrong(f"{what} has the wrong values on {on}", hint)
    expect_tensor(got, what=what, on=on)  # NaN or inf that no known mistake explains
    err = (g - expected).abs()
    idx = tuple(int(i) for i in (err == err.max()).nonzero()[0])
    raise Wrong(f"{what} has the wrong values on {on}: at index {list(idx)} expected {expected[idx].item():.4g}, "
                f"got {g[idx].item():.4g}")


def _import_transformers_first(fn) -> None:
    """Import the `transformers` modules (and names) that `fn` imports in its own body, before it is called.

    Hugging Face's tables and RoPE are forbidden by name patterns, which `call` watches with a profile hook; the
    first import of transformers takes seconds, and several times longer under that hook, so an answer that
    imports it inside the function would be stopped by the time limit instead of being told what is forbidden.
    """
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
                    module = importlib.import_module(name) if name.split(".")[0] == "transformers" else None
                elif ins.opname == "IMPORT_FROM" and module is not None:
                    getattr(module, str(ins.argval), None)  # transformers loads its submodules on first access
            except Exception:  # not installed, or broken: the learner's own call will say so
                module = None


# ---------------------------------------------------------------------------------------------------------
# 5.1 the sinusoidal table
# ---------------------------------------------------------------------------------------------------------


def _table(max_len: int, d: int, *, layout: str = "interleaved", swap: bool = False, exponent: str = "2i",
           start: int = 0, divide: bool = True, degrees: bool = False, only: str | None = None,
           base: float = 10000.0) -> Tensor:
    """The sinusoidal table in float64, or one of its usual mistakes (the defaults give the right table).

    Column j belongs to pair i = j // 2; the right angle is pos / base^(2i/d), with sin in even columns.
    """
    pos = torch.arange(start, start + max_len, dtype=F64)[:, None]  # (max_len, 1)
    j = torch.arange(d, dtype=F64)  # (d,): column index
    i = torch.div(j, 2, rounding_mode="floor")  # (d,): pair index of each column
    e = {"2i": 2 * i / d, "i": i / d, "j": j / d, "2j": 2 * j / d}[exponent]  # (d,)
    angle = pos / base ** e if divide else pos * base ** e  # (max_len, d)
    if degrees:
        angle = angle * math.pi / 180
    even = (j % 2 == 0) != swap  # (d,): the columns that hold sines
    table = torch.where(even, angle.sin(), angle.cos())  # (max_len, d)
    if only is not None:
        table = angle.sin() if only == "sin" else angle.cos()
    if layout == "halves":  # sines of every pair first, then the cosines
        table = torch.cat((table[:, 0::2], table[:, 1::2]), dim=-1)  # (max_len, d)
    return table


_HALVES = ("you put all the sines first and all the cosines after them (the concatenated-halves layout); this "
           "exercise asks for the paper's interleaved layout: column 2i holds sin, column 2i+1 the cos of the same "
           "angle, e.g. pe[:, 0::2] = sin and pe[:, 1::2] = cos")
_SWAPPED = "sin and cos are swapped: even columns (2i) hold the sine, odd columns (2i+1) the cosine"
_EXP_I = ("the exponent is 2i/d_model, where i is the pair index (column 2i and 2i+1 share it); you used i/d_model, "
          "which makes the frequencies fall half as fast")
_EXP_J = ("columns 2i and 2i+1 share one frequency, 1 / 10000^(2i/d_model), with i the pair index; you used the "
          "column index j in the exponent (j/d_model), so each cosine got a frequency of its own. Use "
          "torch.arange(0, d_model, 2) for the exponents 2i")
_EXP_2J = ("the exponent is 2i/d_model with i the pair index (2i = 0, 2, 4, ... for the pairs); you used twice "
           "the column index, 2j/d_model. Use torch.arange(0, d_model, 2) / d_model for the exponents")
_MULTIPLY = ("you multiplied the position by 10000^(2i/d_model); divide by it: the angle is pos / 10000^(2i/d), "
             "so the first pair turns fastest (wavelength 2 pi) and later pairs ever more slowly")
_START_1 = "positions start at 0: row 0 is position 0 (sin 0 = 0 and cos 0 = 1), so use torch.arange(max_len)"
_DEGREES = ("the angle pos / 10000^(2i/d) is in radians, which is what torch.sin expects: do not convert it with "
            "pi / 180")
_ONLY_SIN = "only the even columns are sines; the odd columns (2i+1) hold cos of the same angle"
_ONLY_COS = "the even columns (2i) hold sines; only the odd columns (2i+1) hold cosines"

_TABLE_INSTEAD = ("no library sinusoidal table (attnbook's or Hugging Face's): build it yourself from torch.arange, "
                  "a division by 10000^(2i/d_model), torch.sin and torch.cos")
# attnbook's table and everything in attnbook.positional that contains it (the public functions come before the
# private helper they call, so that a message names the function the learner called). Hugging Face's tables are
# forbidden by pattern, wherever they are imported from: module functions with "sinusoid" in their name
# (create_sinusoidal_embeddings of XLM, sinusoids of Whisper, ...) and the methods that make the weights of the
# *SinusoidalPositionalEmbedding classes (create_weight of Marian/Pegasus/RoFormer, make_weights and
# get_embedding of M2M100/XGLM/Speech2Text, ...). Tables with other frequencies (tensor2tensor's spacing) fail anyway.
TABLE_FORBIDDEN = [
    (name, _TABLE_INSTEAD)
    for name in ("attnbook.positional.sinusoidal_table", "attnbook.positional.SinusoidalPositionalEncoding",
                 "attnbook.positional.shift_operator", "attnbook.positional.shift_matrix",
                 "attnbook.positional._frequencies",
                 "transformers.*sinusoid*", "transformers.models.*.create_weight", "transformers.models.*.make_weight*",
                 "transformers.models.*.get_embedding")
]


def _table_mistakes(max_len: int, d: int) -> list[tuple[str, Tensor, float]]:
    """(hint, wrong table, tolerance) for the usual mistakes on this size."""
    tol = 1e-4
    return [
        (_HALVES, _table(max_len, d, layout="halves"), tol),
        (_SWAPPED, _table(max_len, d, swap=True), tol),
        (_EXP_I, _table(max_len, d, exponent="i"), tol),
        (_EXP_J, _table(max_len, d, exponent="j"), tol),
        (_EXP_2J, _table(max_len, d, exponent="2j"), tol),
        (_START_1, _table(max_len, d, start=1), tol),
        (_DEGREES, _table(max_len, d, degrees=True), tol),
        (_ONLY_SIN, _table(max_len, d, only="sin"), tol),
        (_ONLY_COS, _table(max_len, d, only="cos"), tol),
        # Angles up to max_len * 10000 lose about 1e-3 in float32, so this one is matched more loosely.
        (_MULTIPLY, _table(max_len, d, divide=False), 5e-2),
        (_HALVES + "; also, " + _SWAPPED, _table(max_len, d, layout="halves", swap=True), tol),
    ]


def _table_error_hint(message: str) -> str | None:
    if "must be Tensor, not" in message or "must be Tensor, not int" in message:
        return ("torch.sin and torch.cos need tensors: build the positions with torch.arange(max_len) and the "
                "exponents with torch.arange(0, d_model, 2), then divide")
    return None


@exercise("5.1", "The sinusoidal table", section="The formula",
          references=("attnbook.positional.sinusoidal_table", "attnbook.positional.SinusoidalPositionalEncoding"))
def check_sinusoidal_table(sinusoidal_table) -> str:
    """sinusoidal_table(max_len, d_model) -> float32 (max_len, d_model), sin in even columns, cos in odd ones."""
    cases = [(10, 8), (6, 4), (50, 16), (7, 6), (1, 2), (3, 64)]
    _import_transformers_first(sinusoidal_table)
    for max_len, d in cases:
        on = f"max_len={max_len}, d_model={d}"
        got = call(sinusoidal_table, max_len, d, what="sinusoidal_table", on=on, forbid=TABLE_FORBIDDEN,
                   explain=_table_error_hint)
        ref = _table(max_len, d)  # (max_len, d)
        shape_hints = {
            (d, max_len): "your table is transposed: one row per position, one column per feature",
            (max_len, d // 2): "return all d_model columns: sin in the even ones and cos in the odd ones",
            (1, max_len, d): "return a 2-D table (max_len, d_model), without a batch dimension",
        }
        _expect_result(got, ref, what="your table", on=on, atol=1e-4, mistakes=_table_mistakes(max_len, d),
                       shape_hints=shape_hints, dtype=torch.float32,
                       dtype_hint="make the table in float32, the dtype of model weights: build it from float32 "
                                  "tensors (torch.arange(..., dtype=torch.float32)) or call .float() at the end")
    return f"right on {len(cases)} sizes, from one position and d_model=2 to d_model=64"


# ---------------------------------------------------------------------------------------------------------
# 5.2 how far from permutation-equivariant
# ---------------------------------------------------------------------------------------------------------


def _attention_f(d_model: int, n_heads: int, seed: int, positions: bool):
    """A seeded float64 multi-head self-attention f(x), with sinusoidal positions added to x first or not."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        mha = MultiHeadAttention(d_model, n_heads).double().eval()

    def f(x: Tensor) -> Tensor:
        with torch.no_grad():
            h = x + _table(x.size(1), d_model).to(x.dtype) if positions else x  # (B, n, d)
            return mha(h, h, h)[0]  # (B, n, d)

    return f


def _ramp_f(n: int, d: int, batch: int):
    """f(x) = x + P with P[b, i, j] = 10 b + i (j + 1): not equivariant, and the exact answer is
    d * max_i |i - perm[i]| (the 10 b cancels). Sequence b gets its own offset 10 b, so permuting the batch axis
    instead of the positions gives a different, non-zero number: 10 * max_b |b - perm[b]|."""
    ramp = 10 * torch.arange(batch, dtype=F64)[:, None, None] + \
        torch.arange(n, dtype=F64)[:, None] * torch.arange(1, d + 1, dtype=F64)  # (batch, n, d)

    def f(x: Tensor) -> Tensor:
        return x + ramp.to(x.dtype)  # (B, n, d)

    return f


def _cumsum_f(x: Tensor) -> Tensor:
    """A running sum over the positions: position i sees positions 0..i, so order matters."""
    return x.cumsum(dim=1)  # (B, n, d)


def _equivariance_cases():
    """(description, f, x, perm, exact answer or None), ordered so that each mistake first shows where it is clear."""
    ramp = _ramp_f(4, 4, 4)
    return [
        ("f(x) = x + P with P[b, i, j] = 10 * b + i * (j + 1) (not equivariant), x of shape (4, 4, 4), "
         "perm [3, 0, 1, 2]", ramp, randn(4, 4, 4, seed=51, dtype=F64), torch.tensor([3, 0, 1, 2]), 4 * 3.0),
        ("the same f, x of shape (4, 4, 4), perm [1, 2, 3, 0]",
         ramp, randn(4, 4, 4, seed=52, dtype=F64), torch.tensor([1, 2, 3, 0]), 4 * 3.0),
        ("multi-head self-attention without positions (equivariant), x of shape (2, 5, 8), perm [2, 4, 1, 0, 3]",
         _attention_f(8, 2, seed=53, positions=False), randn(2, 5, 8, seed=54, dtype=F64),
         torch.tensor([2, 4, 1, 0, 3]), None),
        ("multi-head self-attention with sinusoidal positions added, x of shape (1, 6, 8), perm [5, 4, 3, 2, 1, 0]",
         _attention_f(8, 2, seed=55, positions=True), randn(1, 6, 8, seed=56, dtype=F64),
         torch.tensor([5, 4, 3, 2, 1, 0]), None),
        ("f = a running sum over the positions (x.cumsum(dim=1)), x of shape (3, 4, 2), perm [1, 3, 0, 2]",
         _cumsum_f, randn(3, 4, 2, seed=57, dtype=F64), torch.tensor([1, 3, 0, 2]), None),
    ]


def _maybe(fn) -> float | None:
    """float(fn()) if it works, else None: some mistakes are impossible on some inputs (a permutation of the
    positions used on the batch or feature axis of another size), and f may refuse the shape (ValueError)."""
    try:
        with torch.no_grad():
            return float(fn())
    except Exception:
        return None


def _batch_axis(f, x: Tensor, perm: Tensor) -> float | None:
    """What permuting the batch axis (dim 0) instead of the positions returns, where x has that many sequences."""
    return _maybe(lambda: (f(x[perm]) - f(x)[perm]).abs().max())


def _equivariance_mistakes(f, x: Tensor, perm: Tensor) -> list[tuple[str, float | None]]:
    """(hint, the number that mistake returns, or None where it cannot be computed) on this input."""
    inv = torch.argsort(perm)
    a = lambda: f(x[:, perm])  # noqa: E731  (B, n, d): permute, then f
    b = lambda: f(x)[:, perm]  # noqa: E731  (B, n, d): f, then permute
    return [
        ("you permuted the feature axis (the last one); perm reorders the positions, dim 1 of x (batch, n, d): "
         "x[:, perm] and f(x)[:, perm]", _maybe(lambda: (f(x[..., perm]) - f(x)[..., perm]).abs().max())),
        ("you reordered the output with the inverse permutation; use the same perm on both sides: "
         "f(x[:, perm]) against f(x)[:, perm]", _maybe(lambda: (a() - f(x)[:, inv]).abs().max())),
        ("you reordered the input with the inverse permutation; use the same perm on both sides: "
         "f(x[:, perm]) against f(x)[:, perm]", _maybe(lambda: (f(x[:, inv]) - b()).abs().max())),
        ("you compared f(x[:, perm]) with f(x) itself; an equivariant f permutes its output the same way, so "
         "compare with the permuted output f(x)[:, perm]", _maybe(lambda: (a() - f(x)).abs().max())),
        ("you compared f(x[:, perm]) with the permuted input x[:, perm]; compare it with the permuted output "
         "f(x)[:, perm]: f applied first, then the same perm", _maybe(lambda: (a() - x[:, perm]).abs().max())),
        ("you returned the mean of the absolute differences; the task asks for the largest one, .max()",
         _maybe(lambda: (a() - b()).abs().mean())),
        ("you returned the largest difference with its sign; take the absolute value first: "
         "(a - b).abs().max()", _maybe(lambda: (a() - b()).max())),
        ("you returned the largest difference with its sign; take the absolute value first: "
         "(a - b).abs().max()", _maybe(lambda: (b() - a()).max())),
        ("you returned the sum of the absolute differences; the task asks for the largest one, .max()",
         _maybe(lambda: (a() - b()).abs().sum())),
        ("you returned the norm of the differences; the task asks for the largest absolute difference, "
         ".abs().max()", _maybe(lambda: (a() - b()).norm())),
        ("you returned the smallest absolute difference; the task asks for the largest one, .max()",
         _maybe(lambda: (a() - b()).abs().min())),
    ]


_BATCH_AXIS = ("you permuted the batch axis (dim 0), x[perm]; perm reorders the positions, dim 1 of x (batch, n, d): "
               "f(x[:, perm]) against f(x)[:, perm]")
_NOT_ZERO = ("this f is not equivariant, so the answer is clearly above 0. Compare two different computations: f of "
             "the permuted input, f(x[:, perm]), against the permuted output, f(x)[:, perm] (perm reorders the "
             "positions, dim 1 of x)")
_RETURN_KINDS = "a Python float (.item()) or a 0-d tensor"


def _as_float(got, on: str) -> float:
    """The value of a Python float or a 0-d floating-point tensor, the two kinds the task allows; else Wrong."""
    fn = "max_equivariance_error"
    if got is None:
        raise Wrong(f"{fn} returned None on {on}", "did you forget the `return` statement?")
    if type(got).__name__ in ("max", "min") and isinstance(got, tuple):  # torch.return_types.max
        raise Wrong(f"{fn} returned a (values, indices) pair on {on}, expected one number",
                    "x.max(dim=...) returns values and indices; with no dim, x.abs().max() is one number")
    int_hint = ("int(...) and integer tensors drop the fractional part (0.93 becomes 0): return the largest "
                "difference itself, (a - b).abs().max().item(), without int()")
    if isinstance(got, Tensor):
        if got.is_complex() or got.dtype == torch.bool:
            raise Wrong(f"{fn} returned a tensor of dtype {got.dtype} on {on}, expected one real number")
        if got.numel() != 1:
            raise Wrong(f"{fn} returned a tensor of shape {tuple(got.shape)} on {on}, expected one number",
                        "reduce the differences to one number: the largest absolute difference, "
                        "(a - b).abs().max(), and return it as a float with .item()")
        if not got.is_floating_point():
            raise Wrong(f"{fn} returned an integer tensor (dtype {got.dtype}) on {on}, expected {_RETURN_KINDS}",
                        int_hint)
        if got.dim() != 0:
            raise Wrong(f"{fn} returned a tensor of shape {tuple(got.shape)} on {on}, expected {_RETURN_KINDS}",
                        "take the maximum over all entries, .max() with no dim, or end with .item()")
        value = got.detach().double().item()
    elif isinstance(got, bool):
        raise Wrong(f"{fn} returned a bool on {on}, expected {_RETURN_KINDS}",
                    "return how far apart the two sides are, not whether they are equal")
    elif isinstance(got, numbers.Integral):
        raise Wrong(f"{fn} returned an int ({type(got).__name__}) on {on}, expected {_RETURN_KINDS}", int_hint)
    elif isinstance(got, float):  # a Python float, or a NumPy float64 (a subclass of float)
        value = float(got)
    elif hasattr(got, "__array__") or isinstance(got, numbers.Number):  # a NumPy array or another kind of number
        raise Wrong(f"{fn} returned {_kind(got)} on {on}, expected {_RETURN_KINDS}",
                    "compute with torch on the tensors f returns and end with .item(), or convert with float(...)")
    else:
        raise Wrong(f"{fn} returned {describe(got)} on {on}, expected {_RETURN_KINDS}",
                    "return one number: the largest absolute difference, (a - b).abs().max().item()")
    if math.isnan(value):
        raise Wrong(f"{fn} returned nan on {on}",
                    "the differences of two ordinary tensors are ordinary numbers: check each step")
    return value


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-7 + 1e-6 * abs(b)


@exercise("5.2", "How far from permutation-equivariant", section="Attention does not know the order")
def check_max_equivariance_error(max_equivariance_error) -> str:
    """max_equivariance_error(f, x, perm) -> max |f(x[:, perm]) - f(x)[:, perm]| as a float."""
    cases = _equivariance_cases()
    for desc, f, x, perm, exact in cases:
        got = call(max_equivariance_error, f, x, perm, what="max_equivariance_error", on=desc)
        value = _as_float(got, desc)
        with torch.no_grad():
            ref = float((f(x[:, perm]) - f(x)[:, perm]).abs().max())
            if exact is not None:
                assert _close(ref, exact), (ref, exact)  # the checker's own sanity check
            if _close(value, ref):
                continue
            batch = _batch_axis(f, x, perm)
            if batch is not None and batch > 1e-6 and _close(value, batch):  # only where it differs from 0
                hint = _BATCH_AXIS
            elif ref > 1e-3 and abs(value) < 1e-6:
                hint = _NOT_ZERO
            else:
                hint = next((h for h, wrong in _equivariance_mistakes(f, x, perm)
                             if wrong is not None and _close(value, wrong)), None)
        expected = "about 0 (this f is equivariant)" if ref < 1e-9 else f"{ref:.6g}"
        raise Wrong(f"max_equivariance_error returned {value:.6g} for {desc}, expected {expected}", hint)
    return (f"right on {len(cases)} functions: 0 for attention without positions, the exact answer for a known f, "
            "and clearly above 0 for attention with positions")


# ---------------------------------------------------------------------------------------------------------
# 5.3 RoPE
# ---------------------------------------------------------------------------------------------------------


def _rope(x: Tensor, positions: Tensor, *, pairing: str = "half", sign: float = 1.0, exponent: str = "2i",
          shift: int = 0, ignore_positions: bool = False, from_zero: bool = False, consecutive: bool = False,
          divide: bool = True, freqs: str = "cat", base: float = 10000.0) -> Tensor:
    """RoPE in float64 written pair by pair, or one of its usual mistakes (the defaults give the right result).

    Pair i is (x_i, x_{i+d/2}) ("half") or (x_{2i}, x_{2i+1}) ("interleaved"); it turns by position * theta_i
    with theta_i = base^(-2i/d). freqs="repeat_interleave" builds cos/sin as [f0, f0, f1, f1, ...] and combines
    them with rotate-half, a mix of the two conventions; freqs="no_minus" forgets the minus of rotate_half.
    """
    x = x.to(F64)
    d, seq = x.size(-1), x.size(-2)
    h = d // 2
    i = torch.arange(h, dtype=F64)  # (d/2,)
    e = 2 * i / d if exponent == "2i" else i / d  # (d/2,)
    theta = base ** (-e) if divide else base ** e  # (d/2,)
    pos = torch.arange(seq, dtype=F64) if ignore_positions else positions.to(F64) + shift  # (seq,)
    if from_zero:
        pos = pos - pos.min()  # (seq,)
    if consecutive:
        pos = pos[0] + torch.arange(seq, dtype=F64)  # (seq,)
    angle = sign * pos[:, None] * theta  # (seq, d/2)
    c, s = angle.cos(), angle.sin()  # (seq, d/2)
    if freqs == "repeat_interleave":
        cc, ss = c.repeat_interleave(2, dim=-1), s.repeat_interleave(2, dim=-1)  # (seq, d)
        return x * cc + torch.cat((-x[..., h:], x[..., :h]), dim=-1) * ss
    if freqs == "no_minus":
        cc, ss = torch.cat((c, c), dim=-1), torch.cat((s, s), dim=-1)  # (seq, d)
        return x * cc + torch.cat((x[..., h:], x[..., :h]), dim=-1) * ss
    if pairing == "half":
        a, b = x[..., :h], x[..., h:]  # (..., seq, d/2) each
        return torch.cat((a * c - b * s, a * s + b * c), dim=-1)  # (..., seq, d)
    a, b = x[..., 0::2], x[..., 1::2]  # (..., seq, d/2) each: adjacent pairs
    return torch.stack((a * c - b * s, a * s + b * c), dim=-1).flatten(-2)  # (..., seq, d): interleaved back


_ROPE_INTERLEAVED = ("you rotated adjacent pairs (x_0, x_1), (x_2, x_3), ... (the GPT-J / original RoFormer "
                     "layout); the rotate-half convention of LLaMA and Hugging Face pairs x_i with x_{i + d/2}: "
                     "x * cos + rotate_half(x) * sin, with rotate_half(x) = cat(-x2, x1)")
_ROPE_SIGN = ("you rotated by -angle: the result is x * cos + rotate_half(x) * sin with rotate_half(x) = "
              "cat(-x2, x1), the minus on the second half (check the sign in your rotate_half and in front of sin)")
_ROPE_EXP = ("the frequencies are theta_i = 10000^(-2i/d) for i = 0 .. d/2 - 1, i.e. 10000 ** (-torch.arange(0, d, 2) "
             "/ d); you used 10000^(-i/d)")
_ROPE_SHIFT = "use the positions as given: position p turns pair i by p * theta_i (you used p + 1)"
_ROPE_FROM_ZERO = ("you shifted the positions to start at 0 (positions - positions.min()); use the positions "
                   "exactly as given: row t turns by positions[t] * theta_i, whatever the first or smallest "
                   "position is")
_ROPE_CONSECUTIVE = ("you assumed consecutive positions, positions[0], positions[0] + 1, ...; use the positions "
                     "exactly as given: row t turns by positions[t] * theta_i (they may jump or go backwards)")
_ROPE_IGNORE = ("you ignored the positions argument and used 0, 1, ..., seq-1; rotate row t by positions[t] * theta_i "
                "(the positions need not start at 0 or be consecutive)")
_ROPE_MULTIPLY = "theta_i = 1 / 10000^(2i/d): divide by 10000^(2i/d), do not multiply by it"
_ROPE_REPEAT = ("you repeated each frequency twice in a row, [f0, f0, f1, f1, ...] (repeat_interleave, the layout of "
                "adjacent pairs); with rotate_half the angle of pair i must sit at columns i and i + d/2: "
                "torch.cat((freqs, freqs), dim=-1)")
_ROPE_NO_MINUS = "rotate_half(x) is cat(-x2, x1), with a minus on the second half x2; you left the minus out"
_ROPE_CAT_HINT = ("cos and sin have one column per pair (d/2 of them); each angle is used twice, for feature i and "
                  "feature i + d/2, so repeat them: emb = torch.cat((freqs, freqs), dim=-1), then cos = emb.cos()")

_ROPE_INSTEAD = ("write both yourself: split x into halves x1, x2, rotate_half(x) = cat(-x2, x1), and "
                 "x * cos + rotate_half(x) * sin")
# attnbook's RoPE, and Hugging Face's, by pattern: every model module has its own copy of rotate_half and
# apply_rotary_pos_emb (llama, mixtral, falcon, gemma3, ...), and a few have variants (apply_rotary_pos_emb_vision,
# apply_multimodal_rotary_pos_emb, rotate_half_text); the patterns catch them wherever they are imported from.
ROPE_FORBIDDEN = [
    (name, _ROPE_INSTEAD)
    for name in ("attnbook.positional.apply_rope", "attnbook.positional.rotate_half",
                 "transformers.*rotate_half*", "transformers.*apply_rotary*", "transformers.*rotary_pos_emb*")
]


def _rope_error_hint(message: str) -> str | None:
    m = re.search(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)", message)
    if m and 2 * min(int(m.group(1)), int(m.group(2))) == max(int(m.group(1)), int(m.group(2))):
        return _ROPE_CAT_HINT
    return None


def _rope_cases() -> list[tuple[str, Tensor, Tensor]]:
    """(description, x, positions), ordered so that each mistake first shows up where it is unambiguous."""
    return [
        ("2-D x of shape (6, 8) at positions 0..5", randn(6, 8, seed=61), torch.arange(6)),
        ("x of shape (2, 5, 8) at positions [7, 3, 4, 10, 5]", randn(2, 5, 8, seed=67),
         torch.tensor([7, 3, 4, 10, 5])),
        ("x of shape (2, 3, 5, 8) (batch, heads, seq, d) at positions [3, 4, 5, 6, 7]", randn(2, 3, 5, 8, seed=62),
         torch.arange(3, 8)),
        ("x of shape (1, 4, 16) at positions [0, 10, 100, 1000]", randn(1, 4, 16, seed=63),
         torch.tensor([0, 10, 100, 1000])),
        ("float64 x of shape (2, 7, 6) at positions [5, 3, 0, 2, 9, 1, 4]", randn(2, 7, 6, seed=64, dtype=F64),
         torch.tensor([5, 3, 0, 2, 9, 1, 4])),
        ("x of shape (3, 2) (one pair) at positions [0, 1, 7]", randn(3, 2, seed=65), torch.tensor([0, 1, 7])),
        ("one position: x of shape (1, 1, 1, 4) at positions [42]", randn(1, 1, 1, 4, seed=66), torch.tensor([42])),
    ]


@exercise("5.3", "Rotary position embedding", section="Rotary position embedding (RoPE)",
          references=("attnbook.positional.apply_rope",))
def check_apply_rope(apply_rope) -> str:
    """apply_rope(x, positions) on (..., seq, d): pairs (i, i + d/2) turned by positions * 10000^(-2i/d)."""
    cases = _rope_cases()
    _import_transformers_first(apply_rope)
    for desc, x, positions in cases:
        got = call(apply_rope, x, positions, what="apply_rope", on=desc, forbid=ROPE_FORBIDDEN,
                   explain=_rope_error_hint)
        tol = 1e-4
        mistakes = [
            (_ROPE_INTERLEAVED, _rope(x, positions, pairing="interleaved"), tol),
            (_ROPE_SIGN, _rope(x, positions, sign=-1.0), tol),
            (_ROPE_EXP, _rope(x, positions, exponent="i"), tol),
            (_ROPE_SHIFT, _rope(x, positions, shift=1), tol),
            (_ROPE_IGNORE, _rope(x, positions, ignore_positions=True), tol),
            (_ROPE_FROM_ZERO, _rope(x, positions, from_zero=True), tol),
            (_ROPE_CONSECUTIVE, _rope(x, positions, consecutive=True), tol),
            (_ROPE_REPEAT, _rope(x, positions, freqs="repeat_interleave"), tol),
            (_ROPE_NO_MINUS, _rope(x, positions, freqs="no_minus"), tol),
            (_ROPE_INTERLEAVED + "; also, " + _ROPE_SIGN, _rope(x, positions, pairing="interleaved", sign=-1.0), tol),
            (_ROPE_MULTIPLY, _rope(x, positions, divide=False), 5e-2),
            ("you returned x unchanged: rotate each pair (x_i, x_{i + d/2}) by the angle position * theta_i",
             x.to(F64), 1e-7),
        ]
        shape_hints = {tuple(x.shape[:-1]) + (x.size(-1) // 2,): "return all d features: the rotated first halves "
                       "of the pairs and the rotated second halves, torch.cat((..., ...), dim=-1)"}
        _expect_result(got, _rope(x, positions), what="your result", on=desc, atol=1e-4, mistakes=mistakes,
                       shape_hints=shape_hints, dtype=x.dtype, like=" like x",
                       dtype_hint="return the dtype of x: compute cos and sin, then .to(x.dtype), or build them from x")
    return (f"right on {len(cases)} inputs: 2-D to 4-D, positions that do not start at 0 or are not consecutive, "
            "large positions, float64 and a single pair")


# ---------------------------------------------------------------------------------------------------------
# 5.4 the shift matrix
# ---------------------------------------------------------------------------------------------------------


def _pair(angle: Tensor) -> Tensor:
    """(2, m) matrix whose columns are (sin a, cos a) for each angle a."""
    return torch.stack((angle.sin(), angle.cos()))  # (2, m)


def _shift_reference(k, omega) -> Tensor:
    """R with R v(p) = v(p + k), found by solving R [v(0) v(p1)] = [v(k) v(p1 + k)], p1 = pi / (2 omega)."""
    p = torch.tensor([0.0, math.pi / (2 * omega)], dtype=F64)  # two positions whose vectors are (0, 1), (1, 0)
    A, B = _pair(omega * p), _pair(omega * (p + k))  # (2, 2) each: columns v(p), v(p + k)
    return torch.linalg.solve(A.T, B.T).T  # R A = B  <=>  A^T R^T = B^T


def _rot(c: float, s: float) -> Tensor:
    return torch.tensor([[c, s], [-s, c]], dtype=F64)


SHIFT_FORBIDDEN = [
    (name, "write the 2x2 matrix from math.cos(omega * k) and math.sin(omega * k)")
    for name in ("attnbook.positional.shift_matrix", "attnbook.positional.shift_operator")
]


def _shift_error_hint(message: str) -> str | None:
    if "must be Tensor, not" in message:
        return ("k and omega are plain Python numbers: use math.cos and math.sin on omega * k, then build the matrix "
                "with torch.tensor([[..., ...], [..., ...]])")
    if "only one element tensors" in message or "could not infer" in message or "appears to be" in message:
        return "build the matrix from numbers: torch.tensor([[a, b], [c, d]]) with a, b, c, d floats"
    return None


@exercise("5.4", "The shift matrix of one frequency", section="Moving by k positions is a rotation",
          references=("attnbook.positional.shift_matrix", "attnbook.positional.shift_operator"))
def check_pe_shift_matrix(pe_shift_matrix) -> str:
    """pe_shift_matrix(k, omega) -> (2, 2) R with R @ [sin(wp), cos(wp)] = [sin(w(p+k)), cos(w(p+k))] for all p.

    A function whose result is a small matrix of numbers: the messages say which entries are wrong and the likely
    mistake, never the expected numbers.
    """
    cases = [(3, 0.5), (1, 1.0), (-2, 0.3), (0, 2.0), (7, 0.01), (5, 10000.0 ** (-6 / 16)), (40, 1.3)]
    ps = torch.arange(-20, 51, dtype=F64)  # (71,): the positions the matrix is tried on
    for k, omega in cases:
        on = f"k={k}, omega={omega:g}"
        got = call(pe_shift_matrix, k, omega, what="pe_shift_matrix", on=on, forbid=SHIFT_FORBIDDEN,
                   explain=_shift_error_hint)
        if got is None:
            raise Wrong(f"pe_shift_matrix returned None for {on}", "did you forget the `return` statement?")
        if not isinstance(got, Tensor):
            raise Wrong(f"pe_shift_matrix returned {_kind(got)} for {on}, expected a torch.Tensor of shape (2, 2)",
                        "the task asks for a tensor: wrap the four entries as torch.tensor([[a, b], [c, d]])")
        if got.dtype in (torch.float16, torch.bfloat16):
            raise Wrong(f"pe_shift_matrix returned a tensor of dtype {got.dtype} for {on}, expected float32 or "
                        "float64", "half precision keeps only about 3 significant digits: leave out .half() and "
                        "dtype=torch.float16")
        R = as_value(got, what=f"pe_shift_matrix({k}, {omega:g})", expected="a 2x2 matrix")
        if tuple(R.shape) == (2, 2) and R.is_floating_point() and torch.isfinite(R).all():
            moved = R @ _pair(omega * ps)  # (2, 71): R applied to (sin, cos) at every position
            if torch.allclose(moved, _pair(omega * (ps + k)), atol=3e-5, rtol=0):
                continue
        c, s = math.cos(omega * k), math.sin(omega * k)
        ck, sk, cw, sw = math.cos(k), math.sin(k), math.cos(omega), math.sin(omega)
        expect_value(
            R, _shift_reference(k, omega), what=f"pe_shift_matrix({k}, {omega:g})", atol=1e-5,
            mistakes={
                "that is the inverse rotation (the transpose of R), which moves back by k positions instead of "
                "forward, or the rotation written for vectors ordered (cos, sin); here v = (sin(omega p), "
                "cos(omega p)), sine first. Check the signs of the sine terms against the angle-sum formulas for "
                "sin(a + b) and cos(a + b)": _rot(c, -s),
                "the angle of the rotation is omega * k; you used k alone": _rot(ck, sk),
                "the angle of the rotation is omega * k; you used omega alone (a shift by one position)": _rot(cw, sw),
                "your rows are swapped: row 0 must produce sin(omega (p + k)), the first entry of the shifted vector, "
                "and row 1 cos(omega (p + k))": torch.tensor([[-s, c], [c, s]], dtype=F64),
                "your columns are swapped: column 0 multiplies sin(omega p), the first entry of v, and column 1 "
                "multiplies cos(omega p)": torch.tensor([[s, c], [c, -s]], dtype=F64),
                "you swapped cos and sin inside the matrix: in the angle-sum formula for sin(a + b), see which of "
                "cos(b) and sin(b) multiplies sin(a) and which multiplies cos(a)":
                    torch.tensor([[s, c], [-c, s]], dtype=F64),
                "that is the identity, which leaves every position where it is (a shift by k = 0); a shift by k "
                "turns each pair by the angle omega * k": torch.eye(2, dtype=F64),
            },
            hint="expand sin(omega (p + k)) and cos(omega (p + k)) with the angle-sum formulas: each is a "
                 "combination of sin(omega p) and cos(omega p) whose coefficients are the entries of R",
            nan_hint="every entry is a cosine or a sine of omega * k, an ordinary number",
        )
        raise Wrong(f"pe_shift_matrix({k}, {omega:g}) does not map (sin, cos) at position p to position p + k",
                    "R @ [sin(omega p), cos(omega p)] must equal [sin(omega (p + k)), cos(omega (p + k))] for every p")
    return f"R moves (sin, cos) by k positions for all {len(cases)} (k, omega), including k = 0 and k < 0"
