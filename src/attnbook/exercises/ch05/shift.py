"""Checker for exercise 5.4, the shift matrix of one frequency."""
from __future__ import annotations

import math

import torch
from torch import Tensor

from ..compare import as_value, expect_value, generator
from ..guard import call
from ..registry import exercise, Wrong
from ..runs import Run, collect, known_mistake
from ._shared import F64, kind_of
from ...i18n import N_, _


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
        (_("your matrix is right for k >= 0 but not for negative k: a negative k moves (sin, cos) back to an earlier "
           "position p + k < p, which is not the same as moving forward by |k| (do not take abs(k))"), _rot(ca, sa)),
        (_("your matrix turns the pair the wrong way: it moves (sin, cos) back by k positions instead of forward, "
           "or it is written for vectors ordered (cos, sin); here v = (sin(omega p), cos(omega p)), sine first. "
           "Check the signs of the sine terms against the angle-sum formulas for sin(a + b) and cos(a + b)"),
         _rot(c, -s)),
        (_("the angle of the rotation is omega * k; you used k alone"), _rot(math.cos(k), math.sin(k))),
        (_("the angle of the rotation is omega * k; you used omega alone (a shift by one position)"),
         _rot(math.cos(omega), math.sin(omega))),
        (_("the angle omega * k is in radians, which is what math.cos and math.sin expect: do not convert it from "
           "degrees"), _rot(cd, sd)),
        (_("your rows are swapped: row 0 must produce sin(omega (p + k)), the first entry of the shifted vector, "
           "and row 1 cos(omega (p + k))"), torch.tensor([[-s, c], [c, s]], dtype=F64)),
        (_("your columns are swapped: column 0 multiplies sin(omega p), the first entry of v, and column 1 "
           "multiplies cos(omega p)"), torch.tensor([[s, c], [c, -s]], dtype=F64)),
        (_("you swapped cos and sin inside the matrix: in the angle-sum formula for sin(a + b), see which of "
           "cos(b) and sin(b) multiplies sin(a) and which multiplies cos(a)"), torch.tensor([[s, c], [-c, s]],
         dtype=F64)),
        (_("your matrix is a reflection (determinant -1), not a rotation: it flips the pair over instead of turning "
           "it. Check the signs against the angle-sum formulas for sin(a + b) and cos(a + b)"),
         torch.tensor([[c, s], [s, -c]], dtype=F64)),
        (_("that is the identity, which leaves every position where it is (a shift by k = 0); a shift by k "
           "turns each pair by the angle omega * k"), torch.eye(2, dtype=F64)),
    ]


SHIFT_FORBIDDEN = [  # both are the exercise's references, "the package's own solution"
    (name, N_("derive the four entries yourself, from the angle-sum formulas for sin(a + b) and cos(a + b)"))
    for name in ("attnbook.positional.shift_matrix", "attnbook.positional.shift_operator")
]


def _shift_error_hint(message: str) -> str | None:
    if "must be Tensor, not" in message:
        return (_("k and omega are plain Python numbers, and torch.sin / torch.cos need tensors: use math.cos and "
                  "math.sin on numbers, then put the four entries into torch.tensor"))
    if "only one element tensors" in message or "could not infer" in message or "appears to be" in message:
        return _("build the matrix from numbers: torch.tensor([[a, b], [c, d]]) with a, b, c, d floats")
    return None


def _shift_matrix_of(got, k, omega, on: str) -> Tensor:
    """The learner's matrix as float64, after the checks of what the task asks for: a torch.Tensor of dtype
    float32 or float64 (a list, a NumPy array, an integer or half-precision tensor is refused). The shape and
    NaN are left to expect_value."""
    if got is None:
        raise Wrong(_("pe_shift_matrix returned None for {on}", on=on), _("did you forget the `return` statement?"))
    if not isinstance(got, Tensor):
        raise Wrong(_("pe_shift_matrix returned {kind_of_got} for {on}, expected a torch.Tensor of shape (2, 2)",
                      kind_of_got=kind_of(got), on=on),
                    _("the task asks for a tensor: wrap the four entries as torch.tensor([[a, b], [c, d]])"))
    if got.dtype not in (torch.float32, torch.float64):
        half = got.dtype in (torch.float16, torch.bfloat16)
        raise Wrong(_("pe_shift_matrix returned a tensor of dtype {dtype} for {on}, expected float32 or float64",
                      dtype=got.dtype, on=on),
                    _("half precision keeps only about 3 significant digits: leave out .half() and "
                      "dtype=torch.float16") if half else
                    _("the entries are cosines and sines, fractions: write them as floats (no .int() or .long(), "
                      "no integer or complex dtype)"))
    if tuple(got.shape) != (2, 2):
        raise Wrong(_("pe_shift_matrix returned a tensor of shape {shape} for {on}, expected (2, 2)",
                      shape=tuple(got.shape), on=on),
                    _("R is a 2 x 2 matrix, two rows of two entries: build it from numbers as torch.tensor([[a, b], "
                      "[c, d]])"))
    return as_value(got, what=f"pe_shift_matrix({k}, {omega:g})", expected=_("a 2x2 matrix"))


# (k, omega) chosen so that every mistake above shows, and each is told apart from the others (tests check it)
FIXED_CASES = [(3, 0.5), (1, 1.0), (-2, 0.3), (0, 2.0), (7, 0.01), (5, 10000.0 ** (-6 / 16)), (40, 1.3)]


def shift_cases() -> list[tuple[int, float]]:
    """The fixed cases, then two drawn from the run's seed (`generator`), so that an answer cannot know every case
    in advance: a negative and a positive k with an omega between 0.05 and 2.5 (4 decimals)."""
    g = generator(540)
    k_back = -int(torch.randint(1, 13, (), generator=g))  # -12 .. -1
    k_ahead = int(torch.randint(2, 31, (), generator=g))  # 2 .. 30
    omegas = [round(0.05 + 2.45 * float(u), 4) for u in torch.rand(2, generator=g, dtype=F64)]
    return FIXED_CASES + [(k_back, omegas[0]), (k_ahead, omegas[1])]


@exercise("5.4", "The shift matrix of one frequency", answer_name="pe_shift_matrix",
          section="Moving by k positions is a rotation",
          references=("attnbook.positional.shift_matrix", "attnbook.positional.shift_operator"))
def check_pe_shift_matrix(pe_shift_matrix) -> str:
    """pe_shift_matrix(k, omega) -> (2, 2) R with R @ [sin(wp), cos(wp)] = [sin(w(p+k)), cos(w(p+k))] for all p.

    A function whose result is a small matrix of numbers: the messages say which entries are wrong and the likely
    mistake, never the expected numbers. A mistake is named only when it explains every (k, omega) checked.
    """
    cases = shift_cases()
    ps = torch.arange(-20, 51, dtype=F64)  # (71,): the positions the matrix is tried on
    matrices = []

    def one(case, runs):  # a Run of R applied to (sin, cos) at every position: R is right when it moves them by k
        k, omega = case
        on = f"k={k}, omega={omega:g}"
        got = call(pe_shift_matrix, k, omega, what="pe_shift_matrix", on=on, forbid=SHIFT_FORBIDDEN,
                   explain=_shift_error_hint)
        matrices.append(_shift_matrix_of(got, k, omega, on))
        v = _pair(omega * ps)  # (2, 71)
        mistakes = {hint: wrong @ v for hint, wrong in _shift_mistakes(k, omega)}
        return Run(on, matrices[-1] @ v, _pair(omega * (ps + k)), mistakes, 1e-5, 0.0)  # the accuracy the task states

    runs = collect(cases, one)
    n = next((n for n, r in enumerate(runs) if not r.right), None)
    if n is None:
        return _("R moves (sin, cos) by k positions for all {len_cases} (k, omega), including k = 0 and k < 0",
                 len_cases=len(cases))
    (k, omega), hint = cases[n], known_mistake(runs)
    expect_value(
        matrices[n], _shift_reference(k, omega), what=f"pe_shift_matrix({k}, {omega:g})", atol=1e-5,
        mistakes={hint: dict(_shift_mistakes(k, omega))[hint]} if hint else {},
        hint=_("expand sin(omega (p + k)) and cos(omega (p + k)) with the angle-sum formulas: each is a "
               "combination of sin(omega p) and cos(omega p) whose coefficients are the entries of R"),
        nan_hint=_("every entry is a cosine or a sine of omega * k, an ordinary number"),
    )
    raise Wrong(_("pe_shift_matrix({k}, {omega:g}) does not map (sin, cos) at position p to position p + k",
                  k=k, omega=omega),
                _("R @ [sin(omega p), cos(omega p)] must equal [sin(omega (p + k)), cos(omega (p + k))] for every p"))
