"""Checker for exercise 5.2, how far a function is from permutation-equivariant."""
from __future__ import annotations

import functools
import math
import numbers
from typing import NoReturn

import torch
from torch import Tensor

from ...multihead import MultiHeadAttention
from .. import compare
from ..compare import case_seed, randn
from ..guard import call
from ..inputs import builds
from ..hints import describe
from ..registry import exercise, Wrong
from ._shared import F64, kind_of, reference_table
from ...i18n import N_, _


@builds
def _attention_f(d_model: int, n_heads: int, seed: int, positions: bool):
    """A seeded float64 multi-head self-attention f(x), with sinusoidal positions added to x first or not."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        mha = MultiHeadAttention(d_model, n_heads).double().eval()

    def f(x: Tensor) -> Tensor:
        with torch.no_grad():
            h = x + reference_table(x.size(1), d_model).to(x.dtype) if positions else x  # (B, n, d)
            return mha(h, h, h)[0]  # (B, n, d)

    return f


@builds
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


def _perm(n: int, g: torch.Generator, sign: int = 0) -> Tensor:
    """A random permutation of 0 .. n - 1 that moves something (never the identity). With `sign` +1 (-1), the
    largest move |i - perm[i]| is made only by moves i - perm[i] > 0 (< 0): on the known f the largest signed
    difference in one order is then below the largest absolute one."""
    while True:
        perm = torch.randperm(n, generator=g)
        moves = torch.arange(n) - perm  # (n,)
        if not moves.any():
            continue
        if sign == 0 or (sign * moves).max() > (-sign * moves).max():
            return perm


FIXED = -1  # the attempt that draws nothing from the run's seed: the fallback when no draw keeps every mistake apart


def _equivariance_cases(attempt: int | None = None):
    """(description, f, x, perm, exact answer or None), ordered so that each mistake first shows where it is clear.

    Every value comes from the run's seed (`case_seed`): x, the permutations and the attention's weights, so that
    no answer can know them in advance or remember them from an earlier call. The first draw (attempt) whose
    cases keep every mistake apart (`_separated`) is used; `_good_attempt` finds it once per seed."""
    if attempt is None:
        attempt = _good_attempt(compare.SEED_OFFSET)
    vary = attempt != FIXED
    s = 1000 * max(attempt, 0)  # each attempt draws from seeds of its own
    seed = (lambda k: case_seed(k + s)) if vary else (lambda k: k)  # noqa: E731
    g = torch.Generator().manual_seed(seed(50))
    perms = [_perm(4, g, -1), _perm(4, g, +1), _perm(5, g), _perm(6, g), _perm(4, g), _perm(5, g), _perm(5, g)]
    x = lambda k, *shape: randn(*shape, seed=seed(k), dtype=F64, vary=False)  # noqa: E731  (seed() varies it)
    ramp = _ramp_f(4, 4, 4)
    show = lambda p: str(p.tolist())  # noqa: E731
    exact = lambda p: 4.0 * float((p - torch.arange(len(p))).abs().max())  # noqa: E731  (d * max |i - perm[i]|)
    return [
        (_("f(x) = x + P with P[b, i, j] = 10 * b + i * (j + 1) (not equivariant), x of shape (4, 4, 4), "
           "perm {perm}", perm=show(perms[0])), ramp, x(51, 4, 4, 4), perms[0], exact(perms[0])),
        (_("the same f, x of shape (4, 4, 4), perm {perm}", perm=show(perms[1])),
         ramp, x(52, 4, 4, 4), perms[1], exact(perms[1])),
        (_("multi-head self-attention without positions (equivariant), x of shape (2, 5, 8), perm {perm}",
           perm=show(perms[2])), _attention_f(8, 2, seed=seed(53), positions=False), x(54, 2, 5, 8), perms[2], None),
        (_("multi-head self-attention with sinusoidal positions added, x of shape (1, 6, 8), perm {perm}",
           perm=show(perms[3])), _attention_f(8, 2, seed=seed(55), positions=True), x(56, 1, 6, 8), perms[3], None),
        (_("f = a running sum over the positions (x.cumsum(dim=1)), x of shape (3, 4, 2), perm {perm}",
           perm=show(perms[4])), _cumsum_f, x(57, 3, 4, 2), perms[4], None),
        (_("multi-head self-attention with sinusoidal positions added, x of shape (3, 5, 6), perm {perm}",
           perm=show(perms[5])), _attention_f(6, 2, seed=seed(58), positions=True), x(59, 3, 5, 6), perms[5], None),
        (_("the running sum again, x of shape (4, 5, 3), perm {perm}", perm=show(perms[6])),
         _cumsum_f, x(60, 4, 5, 3), perms[6], None),
    ]


MAX_ATTEMPTS = 50  # draws tried per seed before the fixed cases are used


@functools.lru_cache(maxsize=64)
def _good_attempt(offset: int) -> int:
    """The first attempt whose cases keep every mistake apart under this seed offset (the draw depends only on
    it): computed once per offset."""
    for attempt in range(MAX_ATTEMPTS):
        if _separated(_equivariance_cases(attempt)):
            return attempt
    return FIXED  # (never needed so far: tests/test_exercises_ch05.py counts the attempts over many seeds)


def _clearly_apart(a: float | None, b: float | None) -> bool:
    """Whether two numbers are apart by ten times the checked accuracy (`_close`), or only one is computable."""
    if a is None or b is None:
        return (a is None) != (b is None)
    return abs(a - b) > 10 * (1e-7 + 1e-6 * abs(b))


def _separated(cases) -> bool:
    """Whether these cases show every known mistake, so that an answer making it fails and is told so:

    - each mistake gives a number clearly apart from the right one (`_clearly_apart`) on some case, and the first
      case where it is not right is one where it can be computed (an answer making it fails on a number there,
      not on an error);
    - no earlier mistake with another hint gives numbers close to it on every case (else that hint is named);
    - rounding is exact arithmetic on the same number, so rounding to k decimals must only be off somewhere for
      k <= 4 (to 5 or 6 decimals it may stay within the checked accuracy, and then it is no mistake).
    """
    with torch.no_grad():
        refs = [float((f(x[:, perm]) - f(x)[:, perm]).abs().max()) for _unused, f, x, perm, _exact in cases]
    table = [_equivariance_mistakes(c[1], c[2], c[3]) for c in cases]
    hints = [h for h, _unused in table[0]]
    for k, hint in enumerate(hints):
        values = [t[k][1] for t in table]
        wrong = [i for i, (v, r) in enumerate(zip(values, refs)) if v is None or not _close(v, r)]
        decimals = _rounding(hint)
        if decimals is not None:
            if decimals <= 4 and not wrong:
                return False
            continue
        if not wrong or values[wrong[0]] is None or not _clearly_apart(values[wrong[0]], refs[wrong[0]]):
            return False
        for k2 in range(k):
            if hints[k2] != hint and not any(_clearly_apart(v, t[k2][1]) for v, t in zip(values, table)):
                return False
    return True


def _maybe(fn) -> float | None:
    """float(fn()) if it works, else None: some mistakes are impossible on some inputs (a permutation of the
    positions used on the batch or feature axis of another size), and f may refuse the shape (ValueError)."""
    try:
        with torch.no_grad():
            return float(fn())
    except Exception:
        return None


_ROUNDED = N_("you rounded the result to {k} decimals; return it as it is (round only when you print it)")


def _rounding(hint: str) -> int | None:
    """k when `hint` is the hint of rounding to k decimals (in the language of the moment), else None."""
    return next((k for k in range(1, 7) if hint == _(_ROUNDED, k=k)), None)


_EVERY_ENTRY = N_("take the largest absolute difference over every entry: all sequences, positions and features")
_SAME_PERM = N_("reorder both sides with the same perm, as given")
_BATCH_AXIS = (N_("you permuted the batch axis (dim 0); perm reorders the positions, dim 1 of x (batch, n, d), on both "
                  "sides"))
_NOT_ZERO = (N_("this f is not equivariant, so the answer is clearly above 0: compare two different computations, f of "
                "the permuted input and the permuted output of f (perm reorders the positions, dim 1 of x)"))


def _equivariance_mistakes(f, x: Tensor, perm: Tensor) -> list[tuple[str, float | None]]:
    """(hint, the number that mistake returns, or None where it cannot be computed) on this input."""
    inv = torch.argsort(perm)
    a = lambda: f(x[:, perm])  # noqa: E731  (B, n, d): permute, then f
    b = lambda: f(x)[:, perm]  # noqa: E731  (B, n, d): f, then permute
    return [
        (_BATCH_AXIS, _maybe(lambda: (f(x[perm]) - f(x)[perm]).abs().max())),
        (_("you permuted the feature axis (the last one); perm reorders the positions, dim 1 of x (batch, n, d), on "
           "both sides"), _maybe(lambda: (f(x[..., perm]) - f(x)[..., perm]).abs().max())),
        (_("you reordered the output with the inverse permutation; ") + _(_SAME_PERM),
         _maybe(lambda: (a() - f(x)[:, inv]).abs().max())),
        (_("you reordered the input with the inverse permutation; ") + _(_SAME_PERM),
         _maybe(lambda: (f(x[:, inv]) - b()).abs().max())),
        (_("you compared f of the permuted input with f(x) in its original order; an equivariant f reorders its "
           "output the same way, so compare with the permuted output"), _maybe(lambda: (a() - f(x)).abs().max())),
        (_("you compared f of the permuted input with the permuted input itself; compare it with the permuted "
           "output: f applied first, then the same perm"), _maybe(lambda: (a() - x[:, perm]).abs().max())),
        (_("you returned the mean of the absolute differences; the task asks for the largest one"),
         _maybe(lambda: (a() - b()).abs().mean())),
        (_("you returned the largest signed difference; the task asks for the largest absolute difference, so a "
           "large negative difference counts as much as a positive one"), _maybe(lambda: (a() - b()).max())),
        (_("you returned the largest signed difference; the task asks for the largest absolute difference, so a "
           "large negative difference counts as much as a positive one"), _maybe(lambda: (b() - a()).max())),
        (_("you returned the sum of the absolute differences; the task asks for the largest one"),
         _maybe(lambda: (a() - b()).abs().sum())),
        (_("you returned the (Euclidean) norm of the differences; the task asks for the largest absolute difference"),
         _maybe(lambda: (a() - b()).norm())),
        (_("you returned the smallest absolute difference; the task asks for the largest one"),
         _maybe(lambda: (a() - b()).abs().min())),
        (_("you divided by the size of the outputs (a relative error); the task asks for the absolute difference "
           "itself"), _maybe(lambda: (a() - b()).abs().max() / f(x).abs().max())),
        *[(_(_ROUNDED, k=k), _maybe(lambda k=k: round(float((a() - b()).abs().max()), k))) for k in range(1, 7)],
        (_("you looked at one position only (the first or the last); ") + _(_EVERY_ENTRY),
         _maybe(lambda: (a() - b())[:, 0].abs().max())),
        (_("you looked at one position only (the first or the last); ") + _(_EVERY_ENTRY),
         _maybe(lambda: (a() - b())[:, -1].abs().max())),
        (_("you looked at one sequence of the batch only; ") + _(_EVERY_ENTRY), _maybe(lambda: (a() - b())[0].abs().max())),
        (_("you looked at one sequence of the batch only; ") + _(_EVERY_ENTRY), _maybe(lambda: (a() - b())[-1].abs().max())),
        (_("you looked at one feature only (the first or the last); ") + _(_EVERY_ENTRY),
         _maybe(lambda: (a() - b())[..., 0].abs().max())),
        (_("you looked at one feature only (the first or the last); ") + _(_EVERY_ENTRY),
         _maybe(lambda: (a() - b())[..., -1].abs().max())),
    ]


_RETURN_KINDS = N_("a Python float, a NumPy float or a 0-d floating-point tensor")
_HALF_NUMBER = (N_("half precision keeps only about 3 significant digits: leave the number in the precision f returns "
                   "(no .half())"))


def _as_float(got, on: str) -> float:
    """The value of a Python float, a NumPy float (np.float32 or np.float64) or a 0-d floating-point tensor of at
    least single precision, the kinds the task allows; else Wrong."""
    def refuse(message: str, hint: str | None = None, **values) -> NoReturn:
        raise Wrong(_(message, fn="max_equivariance_error", on=on, _RETURN_KINDS=_RETURN_KINDS, **values), hint)

    if got is None:
        refuse(N_("{fn} returned None on {on}"), _("did you forget the `return` statement?"))
    if type(got).__name__ in ("max", "min") and isinstance(got, tuple):  # torch.return_types.max
        refuse(N_("{fn} returned a (values, indices) pair on {on}, expected one number"),
               _("x.max(dim=...) returns values and indices; a maximum with no dim is one number"))
    int_hint = (_("int(...) and integer tensors drop the fractional part (0.93 becomes 0): return the largest "
                  "difference itself, as a floating-point number"))
    if isinstance(got, Tensor):
        if got.is_complex() or got.dtype == torch.bool:
            refuse(N_("{fn} returned a tensor of dtype {dtype} on {on}, expected one real number"), dtype=got.dtype)
        if got.numel() != 1:
            refuse(N_("{fn} returned a tensor of shape {tuple_got_shape} on {on}, expected one number"),
                   _("reduce the differences to one number: the largest absolute difference over every entry"),
                   tuple_got_shape=tuple(got.shape))
        if not got.is_floating_point():
            refuse(N_("{fn} returned an integer tensor (dtype {dtype}) on {on}, expected {_RETURN_KINDS}"), int_hint,
                   dtype=got.dtype)
        if got.dim() != 0:
            refuse(N_("{fn} returned a tensor of shape {tuple_got_shape} on {on}, expected {_RETURN_KINDS}"),
                   _("take the maximum over all entries (no dim), or return the number itself"),
                   tuple_got_shape=tuple(got.shape))
        if got.dtype in (torch.float16, torch.bfloat16):
            refuse(N_("{fn} returned a tensor of dtype {dtype} on {on}, expected {_RETURN_KINDS} in at least "
                      "single precision"), _HALF_NUMBER, dtype=got.dtype)
        value = got.detach().double().item()
    elif isinstance(got, bool):
        refuse(N_("{fn} returned a bool on {on}, expected {_RETURN_KINDS}"),
               _("return how far apart the two sides are, not whether they are equal"))
    elif isinstance(got, numbers.Integral):
        refuse(N_("{fn} returned the {type_got___name} {int_got} on {on}, expected {_RETURN_KINDS}"), int_hint,
               type_got___name=type(got).__name__, int_got=int(got))
    elif isinstance(got, float):  # a Python float, or a NumPy float64 (a subclass of float)
        value = float(got)
    elif type(got).__module__ == "numpy" and isinstance(got, numbers.Real) and hasattr(got, "itemsize"):
        if got.itemsize < 4:  # np.float16
            refuse(N_("{fn} returned a NumPy {type_got___name} on {on}, expected {_RETURN_KINDS} in at least "
                      "single precision"), _HALF_NUMBER, type_got___name=type(got).__name__)
        value = float(got)  # np.float32, np.longdouble
    elif hasattr(got, "__array__") or isinstance(got, numbers.Number):  # a NumPy array or another kind of number
        refuse(N_("{fn} returned {kind_of_got} on {on}, expected {_RETURN_KINDS}"),
               _("return one number: compute with torch on the tensors f returns, or convert with float(...)"),
               kind_of_got=kind_of(got))
    else:
        refuse(N_("{fn} returned {describe_got} on {on}, expected {_RETURN_KINDS}"),
               _("return one number: the largest absolute difference over every entry"), describe_got=describe(got))
    if math.isnan(value):
        refuse(N_("{fn} returned nan on {on}"),
               _("the differences of two ordinary tensors are ordinary numbers: check each step"))
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


def quietly(run):
    """run() or None when it raises: the learner's number on a later case, used only to choose a hint."""
    try:
        return run()
    except Exception:  # Wrong, NotAttempted or anything else: that case is simply not explained by a mistake
        return None


def _explains(values: list[float | None], wrongs: list[float | None]) -> bool:
    """Whether a mistake explains every case: the same number wherever it can be computed, and the learner's code
    failing (None) exactly where the mistake cannot be computed."""
    return all((v is None) == (w is None) and (v is None or _close(v, w)) for v, w in zip(values, wrongs))


@exercise("5.2", "How far from permutation-equivariant", answer_name="max_equivariance_error",
          section="Attention does not know the order")
def check_max_equivariance_error(max_equivariance_error) -> str:
    """max_equivariance_error(f, x, perm) -> max |f(x[:, perm]) - f(x)[:, perm]| as a float.

    A hint names a mistake only when it explains every case: on a wrong number the learner's code is run on the
    remaining cases too, and each mistake's number is computed on all of them.
    """
    cases = _equivariance_cases()

    def run(case):
        desc, f, x, perm, _unused = case  # copies: code that changes them in place is told so, and the case stays intact
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
        values += [quietly(lambda c=later: run(c)) for later in cases[n + 1:]]
        table = [_equivariance_mistakes(c[1], c[2], c[3]) for c in cases]
        hint = next((h for i, (h, _unused) in enumerate(table[n]) if _explains(values, [t[i][1] for t in table])), None)
        if hint is None and ref > 1e-3 and abs(value) < 1e-6:
            hint = _NOT_ZERO  # a fact about this case, not a guess at the mistake
        shown, expected = _two_numbers(value, ref)
        if ref < 1e-9:
            expected = _("about 0 (this f is equivariant)")
        raise Wrong(_("max_equivariance_error returned {shown} for {desc}, expected {expected}",
                      shown=shown, desc=desc, expected=expected), hint)
    return (_("right on {len_cases} functions: 0 for attention without positions, the exact answer for a known "
              "f, and clearly above 0 for attention with positions", len_cases=len(cases)))

