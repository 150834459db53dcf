"""Checkers for chapter 5, positional encoding.

The references are written out here from the formulas, independently of `attnbook.positional`: the sinusoidal
table column by column from PE[pos, 2i] = sin(pos / 10000^(2i/d)), RoPE as an explicit 2x2 rotation of each pair
(x_i, x_{i+d/2}), and the shift matrix by solving R [v(p0) v(p1)] = [v(p0+k) v(p1+k)] for two positions.

A hint names a mistake only when that mistake explains every case: after the first wrong case the learner's code
is run on the remaining cases too, and a mistake is named only if its output matches the learner's on all of them.
Otherwise the message shows the first wrong entry (with enough digits that the two numbers differ) and the rule.
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
from .hints import describe, show_pair
from .registry import exercise, Wrong

F64 = torch.float64




def _kind(x) -> str:
    """describe(x), with NumPy arrays named as such ("a NumPy array of shape (2, 2)")."""
    if type(x).__module__ == "numpy" and hasattr(x, "shape") and hasattr(x, "__array__") and \
            type(x).__name__ == "ndarray":
        return f"a NumPy array of shape {tuple(x.shape)}"
    return describe(x)


def _f64(out) -> Tensor | None:
    """A learner's output as a float64 CPU tensor to compare with, or None when it is not a real tensor."""
    if not isinstance(out, Tensor) or out.is_complex() or out.dtype == torch.bool:
        return None
    return out.detach().to(F64).cpu()


def _quietly(run):
    """run() or None when it raises: the learner's output on a later case, used only to choose a hint."""
    try:
        return run()
    except Exception:  # Wrong, NotAttempted or anything else: that case is simply not explained by a mistake
        return None


def _same(got: Tensor | None, wrong: Tensor, atol: float) -> bool:
    return got is not None and tuple(got.shape) == tuple(wrong.shape) and \
        bool(torch.allclose(got, wrong, atol=atol, rtol=0, equal_nan=True))


def _first_wrong(got: Tensor, expected: Tensor, atol: float) -> str:
    """'at index [5, 2] expected 2.3291, got 2.3287 (max abs error 0.00042)': the first entry that is off, with
    enough digits that the two numbers differ on screen (never the whole expected tensor)."""
    err = (got - expected).abs()
    bad = (err > atol) | err.isnan()
    idx = tuple(int(i) for i in bad.nonzero()[0])
    return (f"at index {list(idx)} expected {show_pair(expected[idx].item(), got[idx].item())} "
            f"(max abs error {err.max().item():.2g})")


def _expect_type(got, shape: tuple, *, what: str, on: str, shape_hints: dict[tuple, str], dtype: torch.dtype,
                 dtype_hint: str, like: str = "") -> Tensor:
    """Wrong unless `got` is a real floating-point tensor of `shape` and `dtype` (the dtype is checked before the
    values, so a table in another precision gets the dtype message)."""
    if got is not None and not isinstance(got, Tensor):
        raise Wrong(f"{what} is {_kind(got)} on {on}, expected a torch.Tensor",
                    "the task asks for a torch tensor: build it with torch operations, or convert an array with "
                    "torch.from_numpy(...) and .to(the dtype the task asks for)")
    got = expect_tensor(got, what=what, on=on, finite=False)
    if tuple(got.shape) != tuple(shape):
        raise Wrong(f"{what} has shape {tuple(got.shape)} on {on}, expected {tuple(shape)}",
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
    return got


def _check_tensor_cases(cases: list, run, validate, *, what: str, atol: float, reference, mistakes, band,
                        half_hint: str) -> None:
    """Run the learner's code on every case in order; Wrong at the first case it gets wrong.

    `run(case)` calls the learner's code (through `call`), `validate(got, case)` checks type, shape and dtype,
    `reference(case)` is the right float64 result, `mistakes(case)` the (hint, wrong result, tolerance) of the
    usual mistakes and `band(case)` how far float16 rounding can move each entry. A hint is given only when its
    mistake explains every case (the learner's code is run on the later cases too, to see): a mistake that
    happens to agree on one input is never named.
    """
    outputs: list[Tensor | None] = []
    for n, case in enumerate(cases):
        on = case[0]
        got = validate(run(case), case)
        ref = reference(case)
        g = got.detach().to(F64).cpu()
        outputs.append(g)
        if torch.allclose(g, ref, atol=atol, rtol=0):
            continue
        outputs += [_f64(_quietly(lambda c=later: run(c))) for later in cases[n + 1:]]
        table = [mistakes(c) for c in cases]
        for h, (hint, _, _) in enumerate(table[n]):
            if all(_same(outputs[j], table[j][h][1], table[j][h][2]) for j in range(len(cases))):
                raise Wrong(f"{what} has the wrong values on {on}", hint)
        expect_tensor(got, what=what, on=on)  # NaN or inf that no known mistake explains
        detail = _first_wrong(g, ref, atol)
        refs = [ref if j == n else reference(c) for j, c in enumerate(cases)]
        if all(o is not None and o.shape == r.shape and bool(((o - r).abs() <= band(c) + atol).all())
               for o, r, c in zip(outputs, refs, cases)):
            raise Wrong(f"{what} has the wrong values on {on}: {detail}", half_hint)
        raise Wrong(f"{what} has the wrong values on {on}: {detail}")


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


def _table_angles(max_len: int, d: int, *, exponent: str = "2i", start: int = 0, divide: bool = True,
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


def _table(max_len: int, d: int, *, layout: str = "interleaved", swap: bool = False, only: str | None = None,
           **angle_options) -> Tensor:
    """The sinusoidal table in float64, or one of its usual mistakes (the defaults give the right table).

    The right angle is pos / base^(2i/d), with sin in even columns and cos in odd ones.
    """
    angle = _table_angles(max_len, d, **angle_options)  # (max_len, d)
    even = (torch.arange(d) % 2 == 0) != swap  # (d,): the columns that hold sines
    table = torch.where(even, angle.sin(), angle.cos())  # (max_len, d)
    if only is not None:
        table = angle.sin() if only == "sin" else angle.cos()
    if layout == "halves":  # sines of every pair first, then the cosines
        table = torch.cat((table[:, 0::2], table[:, 1::2]), dim=-1)  # (max_len, d)
    return table


_HALVES = ("you put all the sines first and all the cosines after them (the concatenated-halves layout); this "
           "exercise asks for the paper's interleaved layout: column 2i holds the sine of pair i and column 2i+1 "
           "the cosine of the same angle")
_SWAPPED = "sin and cos are swapped: even columns (2i) hold the sine, odd columns (2i+1) the cosine"
_EXP_I = ("the exponent is 2i/d_model, where i is the pair index (column 2i and 2i+1 share it); you used i/d_model, "
          "which makes the frequencies fall half as fast")
_EXP_J = ("columns 2i and 2i+1 share one frequency, 1 / 10000^(2i/d_model), with i the pair index; you used the "
          "column index j in the exponent (j/d_model), so each cosine got a frequency of its own")
_EXP_2J = ("the exponent is 2i/d_model with i the pair index, so the exponents are 0, 2, 4, ... over d_model, one "
           "per pair; you used twice the column index, 2j/d_model")
_T2T = ("your frequencies are spaced as in tensor2tensor and fairseq, 10000^(-i/(d_model/2 - 1)); the paper and "
        "this exercise use 10000^(-2i/d_model), so the slowest pair is not quite 1/10000")
_BASE = ("the frequencies use base 10000: the angle is pos / 10000^(2i/d_model); your table matches base 1000")
_MULTIPLY = ("you multiplied the position by 10000^(2i/d_model); divide by it: the angle is pos / 10000^(2i/d), "
             "so the first pair turns fastest (wavelength 2 pi) and later pairs ever more slowly")
_START_1 = "positions start at 0: row 0 is position 0 (sin 0 = 0 and cos 0 = 1), row max_len - 1 the last one"
_DEGREES = ("the angle pos / 10000^(2i/d) is in radians, which is what torch.sin expects: do not convert it with "
            "pi / 180")
_ONLY_SIN = "only the even columns are sines; the odd columns (2i+1) hold cos of the same angle"
_ONLY_COS = "the even columns (2i) hold sines; only the odd columns (2i+1) hold cosines"
_HALF_POSITIONS = ("your rows past position 2048 hold the values of other positions: float16 (half precision) "
                   "holds whole numbers exactly only up to 2048 (2049 becomes 2048, 2051 becomes 2052); make the "
                   "positions in float32 or float64, not float16")
_TABLE_HALF = ("your values are off by about the rounding error of float16: half precision keeps only about 3 "
               "significant digits, too few for angles that grow with the position. If a step (positions, "
               "exponents, angles, sin/cos) is in float16 (.half() or dtype=torch.float16), keep it in float32")

_TABLE_INSTEAD = ("no library sinusoidal table (attnbook's or Hugging Face's): build it yourself from torch.arange, "
                  "a division by 10000^(2i/d_model), torch.sin and torch.cos")
# attnbook's table and everything in attnbook.positional that contains it (the public functions come before the
# private helper they call, so that a message names the function the learner called; sinusoidal_table and
# SinusoidalPositionalEncoding are the exercise's references, "the package's own solution"). Hugging Face's
# tables are forbidden by pattern, wherever they are imported from: module functions with "sinusoid" in their
# name (create_sinusoidal_embeddings of XLM, sinusoids of Whisper, ...) and the methods that make the weights of
# the *SinusoidalPositionalEmbedding classes (create_weight of Marian/Pegasus/RoFormer, make_weights and
# get_embedding of M2M100/XGLM/Speech2Text, ...). Tables with other frequencies (tensor2tensor's spacing) fail anyway.
# The layout helpers (halves_to_interleaved, sinusoidal_permutation) are allowed: they contain no table.
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
        (_T2T, _table(max_len, d, exponent="t2t"), tol),
        (_BASE, _table(max_len, d, base=1000.0), tol),
        (_START_1, _table(max_len, d, start=1), tol),
        (_DEGREES, _table(max_len, d, degrees=True), tol),
        (_ONLY_SIN, _table(max_len, d, only="sin"), tol),
        (_ONLY_COS, _table(max_len, d, only="cos"), tol),
        (_HALF_POSITIONS, _table(max_len, d, half_positions=True), tol),
        # Angles up to max_len * 10000 lose about 1e-2 in float32, so this one is matched more loosely.
        (_MULTIPLY, _table(max_len, d, divide=False), 5e-2),
        (_HALVES + "; also, " + _SWAPPED, _table(max_len, d, layout="halves", swap=True), tol),
    ]


def _half_band(angle: Tensor) -> Tensor:
    """How far float16 rounding (of the positions, the exponents, the angle, sin and cos) can move an entry whose
    angle is `angle`: a relative error of about 2^-8 on the angle (10000^e magnifies the exponent's 2^-11 by
    ln 10000), plus sin/cos's own rounding. Generous on purpose: it only decides between two hints."""
    return 2.0 ** -6 * angle.abs() + 2.0 ** -8


def _table_error_hint(message: str) -> str | None:
    if "must be Tensor, not" in message:
        return ("torch.sin and torch.cos need tensors, and math.sin a single number: make the positions and the "
                "exponents tensors with torch.arange before dividing")
    return None


@exercise("5.1", "The sinusoidal table", section="The formula",
          references=("attnbook.positional.sinusoidal_table", "attnbook.positional.SinusoidalPositionalEncoding"))
def check_sinusoidal_table(sinusoidal_table) -> str:
    """sinusoidal_table(max_len, d_model) -> float32 (max_len, d_model), sin in even columns, cos in odd ones.

    2100 rows: float16 holds positions exactly only up to 2048, and a float32 table is still right to 1e-4 there.
    """
    cases = [(f"max_len={n}, d_model={d}", n, d) for n, d in [(10, 8), (6, 4), (2100, 8), (7, 6), (1, 2), (3, 64)]]
    _import_transformers_first(sinusoidal_table)

    def run(case):
        on, max_len, d = case
        return call(sinusoidal_table, max_len, d, what="sinusoidal_table", on=on, forbid=TABLE_FORBIDDEN,
                    explain=_table_error_hint)

    def validate(got, case):
        on, max_len, d = case
        shape_hints = {
            (d, max_len): "your table is transposed: one row per position, one column per feature",
            (max_len, d // 2): "return all d_model columns: sin in the even ones and cos in the odd ones",
            (1, max_len, d): "return a 2-D table (max_len, d_model), without a batch dimension",
        }
        return _expect_type(got, (max_len, d), what="your table", on=on, shape_hints=shape_hints,
                            dtype=torch.float32,
                            dtype_hint="make the table in float32, the dtype of model weights: build it from float32 "
                                       "tensors (torch.arange(..., dtype=torch.float32)) or call .float() at the end")

    _check_tensor_cases(cases, run, validate, what="your table", atol=1e-4,
                        reference=lambda c: _table(c[1], c[2]), mistakes=lambda c: _table_mistakes(c[1], c[2]),
                        band=lambda c: _half_band(_table_angles(c[1], c[2])), half_hint=_TABLE_HALF)
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


_EVERY_ENTRY = "take the largest absolute difference over every entry: all sequences, positions and features"
_SAME_PERM = "reorder both sides with the same perm, as given"
_BATCH_AXIS = ("you permuted the batch axis (dim 0); perm reorders the positions, dim 1 of x (batch, n, d), on both "
               "sides")
_NOT_ZERO = ("this f is not equivariant, so the answer is clearly above 0: compare two different computations, f of "
             "the permuted input and the permuted output of f (perm reorders the positions, dim 1 of x)")


def _equivariance_mistakes(f, x: Tensor, perm: Tensor) -> list[tuple[str, float | None]]:
    """(hint, the number that mistake returns, or None where it cannot be computed) on this input."""
    inv = torch.argsort(perm)
    a = lambda: f(x[:, perm])  # noqa: E731  (B, n, d): permute, then f
    b = lambda: f(x)[:, perm]  # noqa: E731  (B, n, d): f, then permute
    return [
        (_BATCH_AXIS, _maybe(lambda: (f(x[perm]) - f(x)[perm]).abs().max())),
        ("you permuted the feature axis (the last one); perm reorders the positions, dim 1 of x (batch, n, d), on "
         "both sides", _maybe(lambda: (f(x[..., perm]) - f(x)[..., perm]).abs().max())),
        ("you reordered the output with the inverse permutation; " + _SAME_PERM,
         _maybe(lambda: (a() - f(x)[:, inv]).abs().max())),
        ("you reordered the input with the inverse permutation; " + _SAME_PERM,
         _maybe(lambda: (f(x[:, inv]) - b()).abs().max())),
        ("you compared f of the permuted input with f(x) in its original order; an equivariant f reorders its "
         "output the same way, so compare with the permuted output", _maybe(lambda: (a() - f(x)).abs().max())),
        ("you compared f of the permuted input with the permuted input itself; compare it with the permuted "
         "output: f applied first, then the same perm", _maybe(lambda: (a() - x[:, perm]).abs().max())),
        ("you returned the mean of the absolute differences; the task asks for the largest one",
         _maybe(lambda: (a() - b()).abs().mean())),
        ("you returned the largest signed difference; the task asks for the largest absolute difference, so a "
         "large negative difference counts as much as a positive one", _maybe(lambda: (a() - b()).max())),
        ("you returned the largest signed difference; the task asks for the largest absolute difference, so a "
         "large negative difference counts as much as a positive one", _maybe(lambda: (b() - a()).max())),
        ("you returned the sum of the absolute differences; the task asks for the largest one",
         _maybe(lambda: (a() - b()).abs().sum())),
        ("you returned the (Euclidean) norm of the differences; the task asks for the largest absolute difference",
         _maybe(lambda: (a() - b()).norm())),
        ("you returned the smallest absolute difference; the task asks for the largest one",
         _maybe(lambda: (a() - b()).abs().min())),
        ("you divided by the size of the outputs (a relative error); the task asks for the absolute difference "
         "itself", _maybe(lambda: (a() - b()).abs().max() / f(x).abs().max())),
        *[(f"you rounded the result to {k} decimals; return it as it is (round only when you print it)",
           _maybe(lambda k=k: round(float((a() - b()).abs().max()), k))) for k in range(1, 7)],
        ("you looked at one position only (the first or the last); " + _EVERY_ENTRY,
         _maybe(lambda: (a() - b())[:, 0].abs().max())),
        ("you looked at one position only (the first or the last); " + _EVERY_ENTRY,
         _maybe(lambda: (a() - b())[:, -1].abs().max())),
        ("you looked at one sequence of the batch only; " + _EVERY_ENTRY, _maybe(lambda: (a() - b())[0].abs().max())),
        ("you looked at one sequence of the batch only; " + _EVERY_ENTRY, _maybe(lambda: (a() - b())[-1].abs().max())),
        ("you looked at one feature only (the first or the last); " + _EVERY_ENTRY,
         _maybe(lambda: (a() - b())[..., 0].abs().max())),
        ("you looked at one feature only (the first or the last); " + _EVERY_ENTRY,
         _maybe(lambda: (a() - b())[..., -1].abs().max())),
    ]


_RETURN_KINDS = "a Python float, a NumPy float or a 0-d floating-point tensor"
_HALF_NUMBER = ("half precision keeps only about 3 significant digits: leave the number in the precision f returns "
                "(no .half())")


def _as_float(got, on: str) -> float:
    """The value of a Python float, a NumPy float (np.float32 or np.float64) or a 0-d floating-point tensor of at
    least single precision, the kinds the task allows; else Wrong."""
    fn = "max_equivariance_error"
    if got is None:
        raise Wrong(f"{fn} returned None on {on}", "did you forget the `return` statement?")
    if type(got).__name__ in ("max", "min") and isinstance(got, tuple):  # torch.return_types.max
        raise Wrong(f"{fn} returned a (values, indices) pair on {on}, expected one number",
                    "x.max(dim=...) returns values and indices; a maximum with no dim is one number")
    int_hint = ("int(...) and integer tensors drop the fractional part (0.93 becomes 0): return the largest "
                "difference itself, as a floating-point number")
    if isinstance(got, Tensor):
        if got.is_complex() or got.dtype == torch.bool:
            raise Wrong(f"{fn} returned a tensor of dtype {got.dtype} on {on}, expected one real number")
        if got.numel() != 1:
            raise Wrong(f"{fn} returned a tensor of shape {tuple(got.shape)} on {on}, expected one number",
                        "reduce the differences to one number: the largest absolute difference over every entry")
        if not got.is_floating_point():
            raise Wrong(f"{fn} returned an integer tensor (dtype {got.dtype}) on {on}, expected {_RETURN_KINDS}",
                        int_hint)
        if got.dim() != 0:
            raise Wrong(f"{fn} returned a tensor of shape {tuple(got.shape)} on {on}, expected {_RETURN_KINDS}",
                        "take the maximum over all entries (no dim), or return the number itself")
        if got.dtype in (torch.float16, torch.bfloat16):
            raise Wrong(f"{fn} returned a tensor of dtype {got.dtype} on {on}, expected {_RETURN_KINDS} in at "
                        "least single precision", _HALF_NUMBER)
        value = got.detach().double().item()
    elif isinstance(got, bool):
        raise Wrong(f"{fn} returned a bool on {on}, expected {_RETURN_KINDS}",
                    "return how far apart the two sides are, not whether they are equal")
    elif isinstance(got, numbers.Integral):
        raise Wrong(f"{fn} returned the {type(got).__name__} {int(got)} on {on}, expected {_RETURN_KINDS}",
                    int_hint)
    elif isinstance(got, float):  # a Python float, or a NumPy float64 (a subclass of float)
        value = float(got)
    elif type(got).__module__ == "numpy" and isinstance(got, numbers.Real) and hasattr(got, "itemsize"):
        if got.itemsize < 4:  # np.float16
            raise Wrong(f"{fn} returned a NumPy {type(got).__name__} on {on}, expected {_RETURN_KINDS} in at "
                        "least single precision", _HALF_NUMBER)
        value = float(got)  # np.float32, np.longdouble
    elif hasattr(got, "__array__") or isinstance(got, numbers.Number):  # a NumPy array or another kind of number
        raise Wrong(f"{fn} returned {_kind(got)} on {on}, expected {_RETURN_KINDS}",
                    "return one number: compute with torch on the tensors f returns, or convert with float(...)")
    else:
        raise Wrong(f"{fn} returned {describe(got)} on {on}, expected {_RETURN_KINDS}",
                    "return one number: the largest absolute difference over every entry")
    if math.isnan(value):
        raise Wrong(f"{fn} returned nan on {on}",
                    "the differences of two ordinary tensors are ordinary numbers: check each step")
    return value


def _two_numbers(got: float, expected: float) -> tuple[str, str]:
    """got and expected with 6 significant digits, or more where 6 would print the same number twice."""
    for digits in range(6, 18):
        a, b = f"{got:.{digits}g}", f"{expected:.{digits}g}"
        if a != b:
            break
    return a, b


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-7 + 1e-6 * abs(b)


def _explains(values: list[float | None], wrongs: list[float | None]) -> bool:
    """Whether a mistake explains every case: the same number wherever it can be computed, and the learner's code
    failing (None) exactly where the mistake cannot be computed."""
    return all((v is None) == (w is None) and (v is None or _close(v, w)) for v, w in zip(values, wrongs))


@exercise("5.2", "How far from permutation-equivariant", section="Attention does not know the order")
def check_max_equivariance_error(max_equivariance_error) -> str:
    """max_equivariance_error(f, x, perm) -> max |f(x[:, perm]) - f(x)[:, perm]| as a float.

    A hint names a mistake only when it explains every case: on a wrong number the learner's code is run on the
    remaining cases too, and each mistake's number is computed on all of them.
    """
    cases = _equivariance_cases()

    def run(case):
        desc, f, x, perm, _ = case  # copies: code that changes them in place is told so, and the case stays intact
        return _as_float(call(max_equivariance_error, f, x.clone(), perm.clone(), what="max_equivariance_error",
                              on=desc), desc)

    values: list[float | None] = []
    for n, case in enumerate(cases):
        desc, f, x, perm, exact = case
        value = run(case)
        values.append(value)
        with torch.no_grad():
            ref = float((f(x[:, perm]) - f(x)[:, perm]).abs().max())
        if exact is not None:
            assert _close(ref, exact), (ref, exact)  # the checker's own sanity check
        if _close(value, ref):
            continue
        values += [_quietly(lambda c=later: run(c)) for later in cases[n + 1:]]
        table = [_equivariance_mistakes(c[1], c[2], c[3]) for c in cases]
        hint = next((h for i, (h, _) in enumerate(table[n]) if _explains(values, [t[i][1] for t in table])), None)
        if hint is None and ref > 1e-3 and abs(value) < 1e-6:
            hint = _NOT_ZERO  # a fact about this case, not a guess at the mistake
        shown, expected = _two_numbers(value, ref)
        if ref < 1e-9:
            expected = "about 0 (this f is equivariant)"
        raise Wrong(f"max_equivariance_error returned {shown} for {desc}, expected {expected}", hint)
    return (f"right on {len(cases)} functions: 0 for attention without positions, the exact answer for a known f, "
            "and clearly above 0 for attention with positions")


# ---------------------------------------------------------------------------------------------------------
# 5.3 RoPE
# ---------------------------------------------------------------------------------------------------------


def _rope_angles(d: int, positions: Tensor, *, exponent: str = "2i", divide: bool = True, shift: int = 0,
                 ignore_positions: bool = False, from_zero: str | None = None, consecutive: bool = False,
                 half_positions: bool = False, base: float = 10000.0) -> Tensor:
    """(seq, d/2) float64 angle of each pair at each position: positions * theta_i, or a mistaken one."""
    i = torch.arange(d // 2, dtype=F64)  # (d/2,)
    e = 2 * i / d if exponent == "2i" else i / d  # (d/2,)
    theta = base ** (-e) if divide else base ** e  # (d/2,)
    seq = len(positions)
    if ignore_positions:
        pos = torch.arange(seq, dtype=F64)  # (seq,)
    elif half_positions:
        pos = positions.to(torch.float16).to(F64)  # whole numbers above 2048 rounded to even ones
    else:
        pos = positions.to(F64) + shift  # (seq,)
    if from_zero is not None:  # "min": the smallest position becomes 0; "first": the first one does
        pos = pos - (pos.min() if from_zero == "min" else pos[0])  # (seq,)
    if consecutive:
        pos = pos[0] + torch.arange(seq, dtype=F64)  # (seq,)
    return pos[:, None] * theta  # (seq, d/2)


def _rope(x: Tensor, positions: Tensor, *, pairing: str = "half", sign: float = 1.0, freqs: str = "cat",
          **angle_options) -> Tensor:
    """RoPE in float64 written pair by pair, or one of its usual mistakes (the defaults give the right result).

    Pair i is (x_i, x_{i+d/2}) ("half") or (x_{2i}, x_{2i+1}) ("interleaved"); it turns by position * theta_i
    with theta_i = base^(-2i/d). freqs="repeat_interleave" builds cos/sin as [f0, f0, f1, f1, ...] and combines
    them with rotate-half, a mix of the two conventions; freqs="no_minus" forgets the minus of rotate_half.
    """
    x = x.to(F64)
    d = x.size(-1)
    h = d // 2
    angle = sign * _rope_angles(d, positions, **angle_options)  # (seq, d/2)
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


def _rope_band(x: Tensor, positions: Tensor) -> Tensor:
    """(..., seq, d): how far float16 rounding of the angles, cos and sin can move each entry of the result."""
    a = _rope_angles(x.size(-1), positions)  # (seq, d/2)
    a = torch.cat((a, a), dim=-1)  # (seq, d): the angle of each feature's pair
    xa = x.detach().to(F64).abs()  # (..., seq, d)
    partner = torch.cat((xa[..., x.size(-1) // 2:], xa[..., :x.size(-1) // 2]), dim=-1)  # the pair's other feature
    return _half_band(a) * (xa + partner)


_ROPE_INTERLEAVED = ("you rotated adjacent pairs (x_0, x_1), (x_2, x_3), ... (the GPT-J / original RoFormer "
                     "layout); the rotate-half convention of LLaMA and Hugging Face pairs x_i with x_{i + d/2}")
_ROPE_SIGN = ("you rotated by -angle: pair i must turn by +p * theta_i; check the sign in your rotate_half (the "
              "task's rotate_half(x) = (-x_2, x_1) puts the minus on the second half) and in front of sin")
_ROPE_EXP = ("the frequencies are theta_i = 10000^(-2i/d) for the pair index i = 0 .. d/2 - 1, so the exponents "
             "step by 2/d; you used 10000^(-i/d)")
_ROPE_SHIFT = "use the positions as given: position p turns pair i by p * theta_i (you used p + 1)"
_ROPE_FROM_ZERO = ("you shifted the positions so that they start at 0; use the positions exactly as given: row t "
                   "turns by positions[t] * theta_i, whatever the first or smallest position is")
_ROPE_CONSECUTIVE = ("you assumed consecutive positions, positions[0], positions[0] + 1, ...; use the positions "
                     "exactly as given: row t turns by positions[t] * theta_i (they may jump or go backwards)")
_ROPE_IGNORE = ("you ignored the positions argument and used 0, 1, ..., seq-1; rotate row t by positions[t] * theta_i "
                "(the positions need not start at 0 or be consecutive)")
_ROPE_MULTIPLY = "theta_i = 1 / 10000^(2i/d): divide by 10000^(2i/d), do not multiply by it"
_ROPE_REPEAT = ("you repeated each frequency twice in a row, [f0, f0, f1, f1, ...] (repeat_interleave, the layout of "
                "adjacent pairs); with rotate_half the angle of pair i must sit at columns i and i + d/2, so the "
                "d/2 angles are repeated as a block, not each one in place")
_ROPE_NO_MINUS = "rotate_half(x) is (-x_2, x_1), with a minus on the second half x_2; you left the minus out"
_ROPE_HALF_POSITIONS = ("your result is wrong only at positions above 2048: float16 (half precision) holds whole "
                        "numbers exactly only up to 2048 (2049 becomes 2048, 4097 becomes 4096); keep the positions "
                        "as integers or in float32 or float64, not float16")
_ROPE_HALF = ("your values are off by about the rounding error of float16: half precision keeps only about 3 "
              "significant digits, too few for angles p * theta_i that grow with the position. If a step "
              "(positions, theta, angles, cos or sin) is in float16 (.half() or dtype=torch.float16), keep it in "
              "float32 or float64 and cast only the result to x's dtype")
_ROPE_CAT_HINT = ("cos and sin have one column per pair (d/2 of them); each angle is used twice, for feature i and "
                  "feature i + d/2, so they need d columns before they multiply x: the d/2 angles repeated as a block")

_ROPE_INSTEAD = ("write both yourself: split x into halves x1, x2, rotate_half(x) = cat(-x2, x1), and "
                 "x * cos + rotate_half(x) * sin")
# attnbook's RoPE, and Hugging Face's, by pattern: every model module has its own copy of rotate_half and
# apply_rotary_pos_emb (llama, mixtral, falcon, gemma3, ...), and a few have variants (apply_rotary_pos_emb_vision,
# apply_multimodal_rotary_pos_emb, rotate_half_text); the patterns catch them wherever they are imported from.
# attnbook.positional.apply_rope is the exercise's reference ("the package's own solution").
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
    """(description, x, positions), ordered so that each mistake first shows up where it is unambiguous. Positions
    2049 and 4097 catch positions kept in float16 (exact only up to 2048); they sit in cases with d <= 4, whose
    frequencies (1 and 0.01) keep a float32 computation of the angles right to 1e-6."""
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
        ("x of shape (3, 2) (one pair) at positions [0, 1, 4097]", randn(3, 2, seed=65), torch.tensor([0, 1, 4097])),
        ("one position: x of shape (1, 1, 1, 4) at positions [2049]", randn(1, 1, 1, 4, seed=66),
         torch.tensor([2049])),
    ]


def _rope_mistakes(x: Tensor, positions: Tensor) -> list[tuple[str, Tensor, float]]:
    """(hint, wrong result, tolerance) for the usual mistakes on this input."""
    tol = 1e-4
    return [
        (_ROPE_INTERLEAVED, _rope(x, positions, pairing="interleaved"), tol),
        (_ROPE_SIGN, _rope(x, positions, sign=-1.0), tol),
        (_ROPE_EXP, _rope(x, positions, exponent="i"), tol),
        (_ROPE_SHIFT, _rope(x, positions, shift=1), tol),
        (_ROPE_IGNORE, _rope(x, positions, ignore_positions=True), tol),
        (_ROPE_FROM_ZERO, _rope(x, positions, from_zero="min"), tol),
        (_ROPE_FROM_ZERO, _rope(x, positions, from_zero="first"), tol),
        (_ROPE_CONSECUTIVE, _rope(x, positions, consecutive=True), tol),
        (_ROPE_REPEAT, _rope(x, positions, freqs="repeat_interleave"), tol),
        (_ROPE_NO_MINUS, _rope(x, positions, freqs="no_minus"), tol),
        (_ROPE_HALF_POSITIONS, _rope(x, positions, half_positions=True), tol),
        (_ROPE_INTERLEAVED + "; also, " + _ROPE_SIGN, _rope(x, positions, pairing="interleaved", sign=-1.0), tol),
        (_ROPE_MULTIPLY, _rope(x, positions, divide=False), 5e-2),
        ("you returned x unchanged: rotate each pair (x_i, x_{i + d/2}) by the angle position * theta_i",
         x.to(F64), 1e-7),
    ]


@exercise("5.3", "Rotary position embedding", section="Rotary position embedding (RoPE)",
          references=("attnbook.positional.apply_rope",))
def check_apply_rope(apply_rope) -> str:
    """apply_rope(x, positions) on (..., seq, d): pairs (i, i + d/2) turned by positions * 10000^(-2i/d)."""
    cases = _rope_cases()
    _import_transformers_first(apply_rope)

    def run(case):
        desc, x, positions = case  # copies: code that changes them in place is told so, and the case stays intact
        return call(apply_rope, x.clone(), positions.clone(), what="apply_rope", on=desc, forbid=ROPE_FORBIDDEN,
                    explain=_rope_error_hint)

    def validate(got, case):
        desc, x, positions = case
        shape_hints = {tuple(x.shape[:-1]) + (x.size(-1) // 2,): "return all d features: the rotated first halves "
                       "of the pairs and the rotated second halves, side by side"}
        return _expect_type(got, tuple(x.shape), what="your result", on=desc, shape_hints=shape_hints,
                            dtype=x.dtype, like=" like x",
                            dtype_hint="return the dtype of x: compute cos and sin, then .to(x.dtype), or build "
                                       "them from x")

    _check_tensor_cases(cases, run, validate, what="your result", atol=1e-4,
                        reference=lambda c: _rope(c[1], c[2]), mistakes=lambda c: _rope_mistakes(c[1], c[2]),
                        band=lambda c: _rope_band(c[1], c[2]), half_hint=_ROPE_HALF)
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


def _shift_mistakes(k, omega) -> list[tuple[str, Tensor]]:
    """(hint, the matrix that mistake gives) for (k, omega). The hints say what the learner's matrix does and
    which rule it breaks, never what the entries should be."""
    c, s = math.cos(omega * k), math.sin(omega * k)
    ca, sa = math.cos(omega * abs(k)), math.sin(omega * abs(k))
    cd, sd = math.cos(math.radians(omega * k)), math.sin(math.radians(omega * k))
    return [
        ("your matrix is right for k >= 0 but not for negative k: a negative k moves (sin, cos) back to an earlier "
         "position p + k < p, which is not the same as moving forward by |k| (do not take abs(k))", _rot(ca, sa)),
        ("your matrix turns the pair the wrong way: it moves (sin, cos) back by k positions instead of forward, "
         "or it is written for vectors ordered (cos, sin); here v = (sin(omega p), cos(omega p)), sine first. "
         "Check the signs of the sine terms against the angle-sum formulas for sin(a + b) and cos(a + b)",
         _rot(c, -s)),
        ("the angle of the rotation is omega * k; you used k alone", _rot(math.cos(k), math.sin(k))),
        ("the angle of the rotation is omega * k; you used omega alone (a shift by one position)",
         _rot(math.cos(omega), math.sin(omega))),
        ("the angle omega * k is in radians, which is what math.cos and math.sin expect: do not convert it from "
         "degrees", _rot(cd, sd)),
        ("your rows are swapped: row 0 must produce sin(omega (p + k)), the first entry of the shifted vector, "
         "and row 1 cos(omega (p + k))", torch.tensor([[-s, c], [c, s]], dtype=F64)),
        ("your columns are swapped: column 0 multiplies sin(omega p), the first entry of v, and column 1 "
         "multiplies cos(omega p)", torch.tensor([[s, c], [c, -s]], dtype=F64)),
        ("you swapped cos and sin inside the matrix: in the angle-sum formula for sin(a + b), see which of "
         "cos(b) and sin(b) multiplies sin(a) and which multiplies cos(a)", torch.tensor([[s, c], [-c, s]], dtype=F64)),
        ("your matrix is a reflection (determinant -1), not a rotation: it flips the pair over instead of turning "
         "it. Check the signs against the angle-sum formulas for sin(a + b) and cos(a + b)",
         torch.tensor([[c, s], [s, -c]], dtype=F64)),
        ("that is the identity, which leaves every position where it is (a shift by k = 0); a shift by k "
         "turns each pair by the angle omega * k", torch.eye(2, dtype=F64)),
    ]


SHIFT_FORBIDDEN = [  # both are the exercise's references, "the package's own solution"
    (name, "derive the four entries yourself, from the angle-sum formulas for sin(a + b) and cos(a + b)")
    for name in ("attnbook.positional.shift_matrix", "attnbook.positional.shift_operator")
]


def _shift_error_hint(message: str) -> str | None:
    if "must be Tensor, not" in message:
        return ("k and omega are plain Python numbers, and torch.sin / torch.cos need tensors: use math.cos and "
                "math.sin on numbers, then put the four entries into torch.tensor")
    if "only one element tensors" in message or "could not infer" in message or "appears to be" in message:
        return "build the matrix from numbers: torch.tensor([[a, b], [c, d]]) with a, b, c, d floats"
    return None


def _shift_matrix_of(got, k, omega, on: str) -> Tensor:
    """The learner's matrix as float64, after the checks of what the task asks for: a torch.Tensor of dtype
    float32 or float64 (a list, a NumPy array, an integer or half-precision tensor is refused). The shape and
    NaN are left to expect_value."""
    if got is None:
        raise Wrong(f"pe_shift_matrix returned None for {on}", "did you forget the `return` statement?")
    if not isinstance(got, Tensor):
        raise Wrong(f"pe_shift_matrix returned {_kind(got)} for {on}, expected a torch.Tensor of shape (2, 2)",
                    "the task asks for a tensor: wrap the four entries as torch.tensor([[a, b], [c, d]])")
    if got.dtype in (torch.float16, torch.bfloat16):
        raise Wrong(f"pe_shift_matrix returned a tensor of dtype {got.dtype} for {on}, expected float32 or "
                    "float64", "half precision keeps only about 3 significant digits: leave out .half() and "
                    "dtype=torch.float16")
    if got.dtype not in (torch.float32, torch.float64):
        raise Wrong(f"pe_shift_matrix returned a tensor of dtype {got.dtype} for {on}, expected float32 or float64",
                    "the entries are cosines and sines, fractions: write them as floats (no .int() or .long(), "
                    "no integer or complex dtype)")
    return as_value(got, what=f"pe_shift_matrix({k}, {omega:g})", expected="a 2x2 matrix")


@exercise("5.4", "The shift matrix of one frequency", section="Moving by k positions is a rotation",
          references=("attnbook.positional.shift_matrix", "attnbook.positional.shift_operator"))
def check_pe_shift_matrix(pe_shift_matrix) -> str:
    """pe_shift_matrix(k, omega) -> (2, 2) R with R @ [sin(wp), cos(wp)] = [sin(w(p+k)), cos(w(p+k))] for all p.

    A function whose result is a small matrix of numbers: the messages say which entries are wrong and the likely
    mistake, never the expected numbers. A mistake is named only when it explains every (k, omega) checked.
    """
    cases = [(3, 0.5), (1, 1.0), (-2, 0.3), (0, 2.0), (7, 0.01), (5, 10000.0 ** (-6 / 16)), (40, 1.3)]
    ps = torch.arange(-20, 51, dtype=F64)  # (71,): the positions the matrix is tried on

    def run(case):
        k, omega = case
        on = f"k={k}, omega={omega:g}"
        got = call(pe_shift_matrix, k, omega, what="pe_shift_matrix", on=on, forbid=SHIFT_FORBIDDEN,
                   explain=_shift_error_hint)
        return _shift_matrix_of(got, k, omega, on)

    matrices: list[Tensor | None] = []
    for n, (k, omega) in enumerate(cases):
        R = run((k, omega))
        matrices.append(R)
        if tuple(R.shape) == (2, 2) and torch.isfinite(R).all():
            moved = R @ _pair(omega * ps)  # (2, 71): R applied to (sin, cos) at every position
            if torch.allclose(moved, _pair(omega * (ps + k)), atol=3e-5, rtol=0):
                continue
        matrices += [_quietly(lambda c=later: run(c)) for later in cases[n + 1:]]
        table = [_shift_mistakes(*c) for c in cases]
        explained = {hint: wrong for i, (hint, wrong) in enumerate(table[n])
                     if all(_same(matrices[j], table[j][i][1], 1e-5) for j in range(len(cases)))}
        expect_value(
            R, _shift_reference(k, omega), what=f"pe_shift_matrix({k}, {omega:g})", atol=1e-5,
            mistakes=explained,
            hint="expand sin(omega (p + k)) and cos(omega (p + k)) with the angle-sum formulas: each is a "
                 "combination of sin(omega p) and cos(omega p) whose coefficients are the entries of R",
            nan_hint="every entry is a cosine or a sine of omega * k, an ordinary number",
        )
        raise Wrong(f"pe_shift_matrix({k}, {omega:g}) does not map (sin, cos) at position p to position p + k",
                    "R @ [sin(omega p), cos(omega p)] must equal [sin(omega (p + k)), cos(omega (p + k))] for every p")
    return f"R moves (sin, cos) by k positions for all {len(cases)} (k, omega), including k = 0 and k < 0"
