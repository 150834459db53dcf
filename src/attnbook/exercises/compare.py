"""Comparisons a checker makes on what the learner's code returned: `expect_tensor`, `expect_close` (with known
mistakes mapped to hints), `expect_tuple`, `expect_dtype`, `expect_int`, and by-hand answers (`as_value`,
`expect_value`), plus `randn` for seeded check inputs."""
from __future__ import annotations

import contextlib
import math
import numbers
from collections.abc import Mapping

import torch
from torch import Tensor

from . import results
from .hints import describe, entries, show_pair
from .registry import NotAttempted, Wrong
from ..i18n import N_, _

NAN_HINT = N_("exp of a large number overflows to inf, and inf - inf or 0 / 0 gives NaN")


def expect_tensor(got, *, what: str = N_("your result"), on: str = "", shape=None, dtype=None,
                  allow_sequences: bool = False, finite: bool = True, nan_hint: str | None = NAN_HINT) -> Tensor:
    """Return `got` as a tensor after checking its type, shape, dtype and (if `finite`) for NaN/inf; else Wrong."""
    what, on = _(what), _(on)  # descriptions marked N_, in the language of the moment
    where = _(" on {on}", on=on) if on else ""
    if got is None:
        raise Wrong(_("{what} is None{where}", what=what, where=where), _("did you forget a `return` statement?"))
    if not isinstance(got, Tensor):
        if allow_sequences and isinstance(got, (list, tuple)):
            try:
                got = torch.tensor(got, dtype=torch.float64)
            except (TypeError, ValueError, RuntimeError) as e:
                raise Wrong(_("{what} could not be read as a matrix of numbers ({e})", what=what, e=e)) from None
        else:
            raise Wrong(_("{what} is {describe_got}{where}, expected a torch.Tensor",
                          what=what, describe_got=describe(got), where=where))
    if shape is not None and tuple(got.shape) != tuple(shape):
        raise Wrong(_("{what} has shape {tuple_got_shape}{where}, expected {tuple_shape}",
                      what=what, tuple_got_shape=tuple(got.shape), where=where, tuple_shape=tuple(shape)))
    if dtype is not None and got.dtype != dtype:
        raise Wrong(_("{what} has dtype {dtype}{where}, expected {dtype2}",
                      what=what, dtype=got.dtype, where=where, dtype2=dtype))
    if finite and got.is_floating_point() and not torch.isfinite(got).all():
        bad = "NaN" if torch.isnan(got).any() else "inf"
        idx = tuple(int(i) for i in (~torch.isfinite(got)).nonzero()[0])
        raise Wrong(_("{what} contains {bad} (first at index {list_idx}){where}",
                      what=what, bad=bad, list_idx=list(idx), where=where), nan_hint)
    return got


def expect_tuple(got, names: tuple[str, ...], fn_name: str, on: str) -> tuple:
    """Check that `got` is a tuple of len(names) items (the task says "returns the tuple"; a list is not one);
    else say what came back instead."""
    wanted = _("a tuple ({names})", names=", ".join(names))
    hint = _("return {len_names} results as a tuple, in the order the task gives: {join_names}",
             len_names=len(names), join_names=', '.join(names))
    if isinstance(got, Tensor):
        raise Wrong(_("{fn_name} returned a single tensor of shape {tuple_got_shape} on {on}, expected {wanted}",
                      fn_name=fn_name, tuple_got_shape=tuple(got.shape), on=on, wanted=wanted), hint)
    if got is None:
        raise Wrong(_("{fn_name} returned None on {on}, expected {wanted}",
                      fn_name=fn_name, on=on, wanted=wanted), _("did you forget the `return` statement?"))
    if isinstance(got, list):
        raise Wrong(_("{fn_name} returned a list on {on}, expected {wanted}",
                      fn_name=fn_name, on=on, wanted=wanted),
                    _("the task asks for a tuple, not a list: return the results separated by commas, without "
                      "square brackets"))
    if not isinstance(got, tuple):
        raise Wrong(_("{fn_name} returned {describe_got} on {on}, expected {wanted}",
                      fn_name=fn_name, describe_got=describe(got), on=on, wanted=wanted), hint)
    if len(got) != len(names):
        raise Wrong(_("{fn_name} returned {len_got} values on {on}, expected {len_names}: {wanted}",
                      fn_name=fn_name, len_got=len(got), on=on, len_names=len(names), wanted=wanted), hint)
    return tuple(got)


def expect_close(got: Tensor, expected: Tensor, *, what: str = N_("your result"), on: str = "",
                 atol: float = 1e-5, rtol: float = 1e-4,
                 mistakes: Mapping[str, Tensor] | None = None, nan_hint: str | None = NAN_HINT) -> None:
    """Raise Wrong unless `got` matches `expected`; if it matches a known mistake, give that mistake's hint.

    `mistakes` maps a hint ("softmax over queries (dim=-2) instead of keys (dim=-1)") to the output that
    mistake produces on the same input.
    """
    what, on = _(what), _(on)  # the defaults and descriptions marked N_, in the language of the moment
    where = _(" on {on}", on=on) if on else ""
    got = expect_tensor(got, what=what, on=on, finite=False)
    if tuple(got.shape) != tuple(expected.shape):
        for hint, wrong in (mistakes or {}).items():
            if tuple(wrong.shape) == tuple(got.shape):
                raise Wrong(_("{what} has shape {tuple_got_shape}{where}, expected {tuple_expected_shape}",
                              what=what, tuple_got_shape=tuple(got.shape),
                              where=where, tuple_expected_shape=tuple(expected.shape)), hint)
        raise Wrong(_("{what} has shape {tuple_got_shape}{where}, expected {tuple_expected_shape}",
                      what=what, tuple_got_shape=tuple(got.shape),
                      where=where, tuple_expected_shape=tuple(expected.shape)))
    if got.is_complex() or got.dtype == torch.bool:
        raise Wrong(_("{what} has dtype {dtype}{where}, expected real numbers like {dtype2}",
                      what=what, dtype=got.dtype, where=where, dtype2=expected.dtype))
    got_d = got.detach().to(torch.float64).cpu()
    exp_d = expected.detach().to(torch.float64).cpu()
    if torch.allclose(got_d, exp_d, atol=atol, rtol=rtol):
        return
    if not got.is_floating_point() and expected.is_floating_point():
        raise Wrong(_("{what} has the integer dtype {dtype}{where}, expected floating point",
                      what=what, dtype=got.dtype, where=where),
                    _("integer tensors drop the fractional part: keep the computation in floating point "
                      "(no .int() or .long())"))
    if got.dtype in (torch.float16, torch.bfloat16) and expected.dtype not in (torch.float16, torch.bfloat16) \
            and torch.allclose(got_d, exp_d, atol=1e-2, rtol=1e-2):
        raise Wrong(_("{what} has dtype {dtype}{where}, expected {dtype2}",
                      what=what, dtype=got.dtype, where=where, dtype2=expected.dtype),
                    _("half precision keeps only about 3 significant digits: return the dtype of the inputs "
                      "(no .half())"))
    for hint, wrong in (mistakes or {}).items():
        w = wrong.detach().to(torch.float64).cpu()
        if w.shape == got_d.shape and torch.allclose(got_d, w, atol=atol, rtol=rtol, equal_nan=True):
            raise Wrong(_("{what} has the wrong values{where}", what=what, where=where), hint)
    expect_tensor(got, what=what, on=on, nan_hint=nan_hint)  # NaN or inf that no known mistake explains
    err = (got_d - exp_d).abs()
    idx = tuple(int(i) for i in (err == err.max()).nonzero()[0])
    raise Wrong(
        _("{what} has the wrong values{where}: at index {list_idx} expected {show_pair_exp_d_idx_item} (max abs "
          "error {err_max_item:.2g})",
          what=what, where=where, list_idx=list(idx),
          show_pair_exp_d_idx_item=show_pair(exp_d[idx].item(), got_d[idx].item()), err_max_item=err.max().item())
    )


def as_value(answer, *, what: str = N_("your answer"), expected: str = N_("a matrix")) -> Tensor:
    """A float64 tensor from a value answer (tensor, NumPy array, number, nested list); else Wrong."""
    what, expected = _(what), _(expected)  # descriptions marked N_, in the language of the moment
    if answer is None:
        raise NotAttempted(_("nothing to check yet: set your answer above, run it, then this cell"))
    if isinstance(answer, Tensor):
        if answer.is_complex() or answer.dtype == torch.bool:
            raise Wrong(_("{what} has dtype {dtype}, expected real numbers ({expected})",
                          what=what, dtype=answer.dtype, expected=expected))
        if not answer.is_floating_point():
            return answer  # an integer tensor: expect_value says so unless it happens to be right
        return answer.detach().to(torch.float64).cpu()
    if isinstance(answer, bool) or not (isinstance(answer, (int, float, list, tuple)) or hasattr(answer, "__array__")):
        raise Wrong(_("{what} is {describe_answer}, expected {expected}: a tensor, an array or a nested list of "
                      "numbers", what=what, describe_answer=describe(answer), expected=expected))
    try:
        return torch.as_tensor(_nested(answer), dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError) as e:
        raise Wrong(_("{what} could not be read as {expected} of numbers ({e})", what=what, expected=expected, e=e),
                    _("write it as a tensor or as a nested list of numbers, one inner list per row")) from None


def _nested(x):
    """Lists all the way down: tensors and arrays inside lists (a list of row tensors) become lists too."""
    if isinstance(x, Tensor):
        return x.detach().cpu().tolist()
    if isinstance(x, (list, tuple)):
        return [_nested(e) for e in x]
    if hasattr(x, "tolist"):
        return x.tolist()
    return x


VALUE_ENTRY_TRIES = 10  # after this many failed tries, a value answer's wrong entries are no longer named


def expect_value(got, expected: Tensor, *, what: str = N_("your answer"), atol: float = 1e-3,
                 mistakes: Mapping[str, Tensor] | None = None, hint: str | None = None,
                 nan_hint: str | None = None) -> None:
    """Check a by-hand answer without giving it away: say which entries are wrong and the likely mistake,
    never the expected numbers or how far off they are.

    `got` comes from `as_value`; `mistakes` maps a hint to the value that mistake produces; `hint` is the
    general advice for a wrong value that no known mistake explains.
    """
    what = _(what)  # descriptions marked N_, in the language of the moment
    exp = expected.detach().to(torch.float64).cpu()
    shape = tuple(exp.shape)
    if tuple(got.shape) != shape:
        if shape and tuple(got.shape) == shape[::-1]:
            raise Wrong(_("{what} has shape {tuple_got_shape}, expected {shape}",
                          what=what, tuple_got_shape=tuple(got.shape), shape=shape),
                        _("your matrix is transposed: row i must hold the result for row i of the input"))
        raise Wrong(_("{what} has shape {tuple_got_shape}, expected {shape}",
                      what=what, tuple_got_shape=tuple(got.shape), shape=shape))
    if not got.is_floating_point():
        if torch.allclose(got.double(), exp, atol=atol, rtol=0.0):
            return
        raise Wrong(_("{what} is an integer tensor (dtype {dtype}), but the entries are not whole numbers",
                      what=what, dtype=got.dtype),
                    _("integer tensors drop the fractional part: write the numbers with a decimal point, or compute "
                      "them in floating point"))
    if not torch.isfinite(got).all():
        bad = [list(map(int, i)) for i in (~torch.isfinite(got)).nonzero()]
        raise Wrong(_("{what} contains NaN or inf at {entries_bad}", what=what, entries_bad=entries(bad)),
                    nan_hint or _("every entry of the result is an ordinary finite number: check the step that made it"))
    if torch.allclose(got, exp, atol=atol, rtol=0.0):
        return
    for mistake_hint, wrong in (mistakes or {}).items():
        w = wrong.detach().to(torch.float64).cpu()
        if w.shape == got.shape and torch.allclose(got, w, atol=atol, rtol=0.0):
            raise Wrong(_("{what} is not right", what=what), mistake_hint)
    if torch.allclose(got, exp, atol=5.01e-3, rtol=0.0) and atol < 5e-3:
        raise Wrong(_("{what} is not right to {atol:g}",
                      what=what, atol=atol), _("it looks rounded too early: keep at least "
                                                          "{max_1_round_math_log10_a} decimals, and round only "
                                                          "at the end",
                                                          max_1_round_math_log10_a=max(1, round(-math.log10(atol)))))
    if results.failed_attempts() >= VALUE_ENTRY_TRIES:
        raise Wrong(_("{what} is not right (after {VALUE_ENTRY_TRIES} tries the wrong entries are no longer "
                      "named: work it out step by step instead of guessing)",
                      what=what, VALUE_ENTRY_TRIES=VALUE_ENTRY_TRIES), hint)
    bad = [list(map(int, i)) for i in ((got - exp).abs() > atol).nonzero()]
    total = got.numel()
    which = _("every entry") if len(bad) == total else entries(bad)
    if 1 < len(bad) < total:
        raise Wrong(_("{what} is not right: {which} are wrong (checked to {atol:g})", what=what, which=which,
                      atol=atol), hint)
    raise Wrong(_("{what} is not right: {which} is wrong (checked to {atol:g})", what=what, which=which, atol=atol),
                hint)


SEED_OFFSET = 0  # added to every `randn` seed: changed only by `seed_offset` (remote.seeding, fresh_values)
FRESH_STEP = 1_000_000_007 % 2 ** 31  # what the second pass of a check (`fresh_values`) adds to the offset


def case_seed(seed: int) -> int:
    """The seed a checker's case draws its values from: `seed` plus the run's offset (see `fresh_values`)."""
    return (seed + SEED_OFFSET) % 2 ** 63


def generator(seed: int) -> torch.Generator:
    """A torch.Generator for a checker's own draws, seeded with `case_seed(seed)`."""
    return torch.Generator().manual_seed(case_seed(seed))


def randn(*shape: int, seed: int, dtype: torch.dtype = torch.float32, std: float = 1.0, vary: bool = True) -> Tensor:
    """A checker's test input: standard normal (times `std`) from its own generator seeded with `seed` (plus the
    run's SEED_OFFSET, unless `vary` is False: cases tuned to their seed)."""
    seed = case_seed(seed) if vary else seed
    return std * torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


@contextlib.contextmanager
def seed_offset(offset: int):
    """While the block runs, SEED_OFFSET is `offset` (remote.seeding: a grading run's inputs)."""
    global SEED_OFFSET
    previous, SEED_OFFSET = SEED_OFFSET, offset % 2 ** 31
    try:
        yield
    finally:
        SEED_OFFSET = previous


def fresh_values():
    """The second pass of every check (`results.check`): the checker runs again with the offset moved, so every
    input drawn with `randn`, `generator` or `case_seed` has the same shape and new values. An answer that
    remembers results by shape, or knows the first pass's inputs, fails here."""
    return seed_offset(SEED_OFFSET + FRESH_STEP)


DTYPE_HINT = (N_("keep the dtype of the input: no .float(), .double() or .half() casts on the result, and create new "
                 "tensors with dtype=x.dtype"))


def expect_dtype(got: Tensor, dtype: torch.dtype, *, what: str = N_("your result"), on: str = "",
                 input_name: str = N_("the input"), hint: str | None = None) -> None:
    """Wrong unless the tensor `got` has `dtype`, the dtype of the input called `input_name`."""
    what, on, input_name = _(what), _(on), _(input_name)  # descriptions marked N_, in the language of the moment
    where = _(" on {on}", on=on) if on else ""
    if got.dtype != dtype:
        raise Wrong(_("{what} has dtype {dtype}{where}, expected {dtype2}, the dtype of {input_name}",
                      what=what, dtype=got.dtype, where=where, dtype2=dtype, input_name=input_name),
                    hint or DTYPE_HINT)


def expect_input_dtype(got, x: Tensor, *, what: str, on: str, input_name: str = "x", same_shape: bool = False,
                       hint: str | None = None) -> None:
    """Wrong if `got`, a floating-point tensor (of x's shape, with `same_shape`), has another dtype than the input
    `x`; anything else passes, for the shape and value checks that follow. The hint names x's dtype."""
    if not (isinstance(got, Tensor) and got.is_floating_point()) or (same_shape and got.shape != x.shape):
        return
    name = str(x.dtype).removeprefix("torch.")
    expect_dtype(got, x.dtype, what=what, on=on, input_name=input_name, hint=hint or _(
        "return the dtype of x (here {name}): no .float(), .double() or .half() casts, and no constants of another "
        "dtype", name=name))


INT_HINT = (N_("a count is a whole number: compute it with integer arithmetic (*, + and //) on the int arguments, "
               "not / or math.pow, which give floats"))


def expect_int(got, *, what: str = N_("your function"), on: str = "", hint: str | None = None,
               numpy_ok: bool = False) -> int:
    """A Python int from an answer that must be one (a bool is not; a NumPy integer only with `numpy_ok`, which
    the task text must then say). Otherwise Wrong, saying what came back instead (None, a bool, a NumPy
    integer, a tensor, an array, a float, whole or not); `hint` is the exercise's advice for a float."""
    what, on = _(what), _(on)  # descriptions marked N_, in the language of the moment
    where = _(" on {on}", on=on) if on else ""
    if got is None:
        raise Wrong(_("{what} returned None{where}, expected an int",
                      what=what, where=where), _("did you forget the `return` statement?"))
    if isinstance(got, bool):
        raise Wrong(_("{what} returned the bool {got}{where}, expected an int", what=what, got=got, where=where),
                    _("return the number itself, not a comparison"))
    if isinstance(got, int):
        return int(got)
    if isinstance(got, numbers.Integral):  # numpy.int64, ...
        if numpy_ok:
            return int(got)
        raise Wrong(_("{what} returned a NumPy {type_got___name} ({int_got}){where}, expected a Python int",
                      what=what, type_got___name=type(got).__name__, int_got=int(got), where=where),
                    _("convert it with int(...) before returning it (NumPy integers overflow silently past their size)"))
    if isinstance(got, Tensor):
        raise Wrong(_("{what} returned a tensor of shape {tuple_got_shape} and dtype {dtype}{where}, expected an "
                      "int", what=what, tuple_got_shape=tuple(got.shape),
                      dtype=got.dtype,
                      where=where), _("compute with the Python ints you are given (no torch.tensor), or convert "
                                      "a one-element tensor with int(t)"))
    if hasattr(got, "__array__") and not isinstance(got, numbers.Number):
        raise Wrong(_("{what} returned {describe_got}{where}, expected an int",
                      what=what, describe_got=describe(got), where=where),
                    _("return a Python int, or convert a one-element array with int(a)"))
    if isinstance(got, numbers.Real):
        value = float(got)
        whole = math.isfinite(value) and value.is_integer()
        shown = f"{value:.1f}" if whole and abs(value) < 1e16 else repr(value)
        raise Wrong(_("{what} returned the float {shown}{where}, expected an int",
                      what=what, shown=shown, where=where)
                    + ("" if whole else _(" (and it is not a whole number)")), hint or INT_HINT)
    raise Wrong(_("{what} returned {describe_got}{where}, expected an int",
                  what=what, describe_got=describe(got), where=where), _("return one whole number"))


# Whether a result is a known mistake's (runs.verdict is the rule that names one; these serve checks of their own).

ATOL, RTOL = 1e-5, 1e-4


def close_to(got, ref: Tensor | None, atol: float = ATOL, rtol: float = RTOL) -> bool:
    """True if `got` is a real tensor of ref's shape with values close to ref's (NaN where ref has NaN)."""
    return (isinstance(got, Tensor) and ref is not None and tuple(got.shape) == tuple(ref.shape)
            and not got.is_complex() and got.dtype != torch.bool
            and torch.allclose(got.detach().double().cpu(), ref.detach().double().cpu(), atol=atol, rtol=rtol,
                               equal_nan=True))


def fits_mistake(got, wrong, atol: float = ATOL, rtol: float = RTOL) -> bool:
    """True if `got` is the result of a mistake: `wrong`, or one of them when the mistake has several forms (a
    tuple: with and without NaN replaced by 0, ...)."""
    if isinstance(wrong, tuple):
        return any(close_to(got, w, atol, rtol) for w in wrong)
    return close_to(got, wrong, atol, rtol)
