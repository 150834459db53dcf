"""What chapter 7's three checkers share: counting images, the answer's own function test, the dtype check
and the tolerances the task texts state."""
from __future__ import annotations

import functools

import torch
from torch import Tensor, nn

from ..compare import expect_dtype, randn
from ..guard import beside_answer
from ..reach import resolve_or_none
from ..hints import describe
from ..registry import Wrong
from ...i18n import N_, _

randn64 = functools.partial(randn, dtype=torch.float64)


def counting(B: int, C: int, H: int, W: int, dtype=torch.float64) -> Tensor:
    """Images whose pixels count 0, 1, 2, ... in memory order: every value says where it came from."""
    return torch.arange(B * C * H * W, dtype=dtype).reshape(B, C, H, W)  # (B, C, H, W)


@beside_answer  # reads the answer itself: where it runs, on the learner's object
def expect_function(answer, name: str, forbidden) -> None:
    """Wrong if `answer` is a class or a module (an object made by calling something) instead of a function."""
    paths = [f if isinstance(f, str) else f[0] for f in forbidden]
    if any(answer is resolve_or_none(path) for path in paths if "*" not in path):
        return  # `call` says that this one is forbidden
    if isinstance(answer, type):
        raise Wrong(_("you passed the class {__name__}, not your function", __name__=answer.__name__),
                    _("pass the function you wrote, by its name without calling it: check(..., {name})", name=name))
    if isinstance(answer, nn.Module):
        raise Wrong(_("you passed {describe_answer} module, the result of calling something, not your function",
                      describe_answer=describe(answer)),
                    _("pass the function itself, without calling it: check(..., {name}), not check(..., "
                      "{name}(...))", name=name))


DTYPE_HINT = (N_("keep the dtype of the input: no .float(), .double(), .half() or .to(...) on the result, and create "
                 "any new tensor with dtype=<input>.dtype (torch.zeros(...) is float32 unless told otherwise)"))


def dtype_first(got, expected: Tensor, input_name: str, what: str, on: str) -> None:
    """Report a dtype change, or float64 values rounded through float32 on the way, before any value check,
    when the values are right to float32 precision."""
    if not (isinstance(got, Tensor) and got.is_floating_point() and got.shape == expected.shape):
        return
    g, e = got.detach().double(), expected.detach().double()
    if not torch.allclose(g, e, atol=1e-4, rtol=1e-4):
        return  # wrong values: the mistakes table speaks first
    expect_dtype(got, expected.dtype, what=what, on=on, input_name=input_name, hint=DTYPE_HINT)
    if expected.dtype == torch.float64 and not torch.allclose(g, e, **tolerance(torch.float64)):
        raise Wrong(_("{what} is right only to about float32 precision on {on} (max abs error "
                      "{g_e_abs_max_item:.1g}): somewhere on the way the float64 values went through a float32 "
                      "tensor", what=what, on=on, g_e_abs_max_item=(g - e).abs().max().item()), DTYPE_HINT)


TOLERANCE = {torch.float32: 1e-6, torch.float64: 1e-10}  # relative and absolute, as the task texts state


def tolerance(dtype: torch.dtype) -> dict:
    return dict(atol=TOLERANCE[dtype], rtol=TOLERANCE[dtype])


def worked_example() -> Tensor:
    """The chapter's 2x2 RGB image (1, 3, 2, 2): pixels (10, 20, 30), (40, 50, 60), (70, 80, 90), (100, 110, 120)."""
    hwc = torch.arange(10.0, 130.0, 10.0, dtype=torch.float64).reshape(2, 2, 3)  # (H, W, C), row-major pixels
    return hwc.permute(2, 0, 1)[None]  # (1, C, H, W)
