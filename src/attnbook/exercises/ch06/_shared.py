"""Helpers that chapter 6's mask checkers (6.1, 6.2 and 6.4) use: the type and shape check of a mask, and the hints
shared by 6.1 and 6.2. The cases are run and judged by `runs.collect`/`verdict`."""
from __future__ import annotations

import torch
from torch import Tensor

from ..hints import describe
from ..registry import Wrong
from ...i18n import N_, _

STRICT = (N_("a position may attend to itself: keep the diagonal (query i may see key j = i; tril's default "
             "diagonal=0, not diagonal=-1)"))
ONE_AHEAD = N_("off by one: query i may see the keys j <= i, not also key i + 1 (tril's diagonal is 0, not 1)")
UPPER = (N_("you kept the upper triangle: row i is query i, and it may attend to the keys j <= i, which lie on and "
            "below the diagonal; use tril, not triu"))


def mask_type(got, expected: Tensor, *, what: str, on: str, shape_hints: dict[tuple, str] | None = None,
              shape_hint: str | None = None) -> None:
    """Wrong unless `got` is a boolean tensor of expected's shape (a shape in `shape_hints` gets its hint; any other
    wrong shape the general `shape_hint`)."""
    if got is None:
        raise Wrong(_("{what} is None on {on}", what=what, on=on), _("did you forget a `return` statement?"))
    if not isinstance(got, Tensor):
        raise Wrong(_("{what} is {describe_got} on {on}, expected a boolean torch.Tensor",
                      what=what, describe_got=describe(got), on=on))
    shape, want = tuple(got.shape), tuple(expected.shape)
    if shape != want:
        hint = (shape_hints or {}).get(shape, shape_hint)
        raise Wrong(_("{what} has shape {shape} on {on}, expected {want}",
                      what=what, shape=shape, on=on, want=want), hint)
    if got.dtype != torch.bool:
        if got.is_floating_point() and bool(torch.isinf(got).any()) and bool((got[~torch.isinf(got)] == 0).all()):
            raise Wrong(_("{what} has dtype {dtype} on {on}, expected torch.bool",
                          what=what, dtype=got.dtype, on=on),
                        _("that is the additive form (0 where allowed, -inf where blocked) that nn.Transformer's "
                          "generate_square_subsequent_mask returns; this book's masks are boolean with True = may "
                          "attend") if torch.equal(got == 0, expected) else
                        _("a float mask of 0 and -inf is an additive mask (0 where allowed, -inf where blocked); this "
                          "book's masks are boolean, True where attention is allowed"))
        zero_one = not got.is_complex() and bool(((got == 0) | (got == 1)).all())
        hint = (_("a mask holds True/False, not numbers: build it with a comparison, or call .bool() on a 0/1 tensor "
                  "(torch.ones(n, n, dtype=torch.bool) starts you off boolean)") if zero_one else
                _("a mask holds True/False: build it with comparisons and &, |, ~"))
        raise Wrong(_("{what} has dtype {dtype} on {on}, expected torch.bool (True = may attend)",
                      what=what, dtype=got.dtype, on=on), hint)


def tf(v: bool) -> str:
    return "True" if v else "False"
