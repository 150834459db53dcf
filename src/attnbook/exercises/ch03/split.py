"""Checker for exercise 3.1, splitting a tensor into heads."""
from __future__ import annotations

import re

import torch
from torch import Tensor

from ..compare import expect_dtype, randn
from ..runs import Run, collect, expect_shape, verdict
from ..guard import call
from ..registry import exercise
from ...i18n import _
from ._shared import SPLIT_INTERLEAVED, REARRANGE_DTYPE_HINT, SPLIT_RULE, VIEW_WITHOUT_TRANSPOSE, heads_ref


def _split_error_hint(message: str) -> str | None:
    """The hint for arguments in the wrong order: the check calls split_heads(x, n_heads)."""
    if re.search(r"'int' object (has no attribute|is not subscriptable)", message):
        return (_("the check calls split_heads(x, n_heads), the tensor first and the number of heads second: "
                  "define it as def split_heads(x, n_heads)"))
    return None


def _split_mistakes(x: Tensor, h: int) -> dict:
    B, n, d = x.shape
    dh = d // h
    per_token = x.reshape(B, n, h, dh)  # (B, n, h, d_head)
    return {
        _(VIEW_WITHOUT_TRANSPOSE).format(who=_("you reshaped")): x.reshape(B, h, n, dh),
        SPLIT_INTERLEAVED: x.reshape(B, n, dh, h).permute(0, 3, 1, 2),
        _(SPLIT_INTERLEAVED) + _("; and the head axis must come right after the batch"): x.reshape(B, n, dh, h)
        .transpose(1, 2),
        _("you stopped at (B, n, n_heads, d_head): transpose the head axis in front of the positions, so that "
          "each head holds an (n, d_head) matrix"): per_token,
        _("you transposed the wrong axes: after cutting the features into heads, (B, n, n_heads, d_head), the "
          "positions are axis 1 and the heads axis 2; swap those two"): per_token.transpose(2, 3),
        _("you transposed the wrong axes: swap only the position axis (1) and the head axis (2) of "
          "(B, n, n_heads, d_head)"): per_token.transpose(1, 3),
        _("the last two axes must be (n, d_head), one row per position: you also transposed each head's "
          "matrix"): per_token.permute(0, 2, 3, 1),
        _("each head's block starts one feature late: head i starts at feature i * d_head (counting from 0)"):
            x.roll(-1, dims=-1).reshape(B, n, h, dh).transpose(1, 2),
    }


@exercise("3.1", "Split a tensor into heads", answer_name="split_heads", section="Splitting a tensor into heads",
          references=("attnbook.multihead.split_heads",))
def check_split_heads(split_heads) -> str:
    """split_heads(x, n_heads): (B, n, d) -> (B, h, n, d/h), head i holding features i*d_head .. (i+1)*d_head-1."""
    cases = [
        (_("x of shape (2, 5, 12) with n_heads=3"), randn(2, 5, 12, seed=31), 3),
        (_("a batch of 1: x of shape (1, 4, 6) with n_heads=2"), randn(1, 4, 6, seed=32), 2),
        (_("x of shape (2, 3, 8) with n_heads=1 (one head)"), randn(2, 3, 8, seed=33), 1),
        (_("x of shape (2, 3, 4) with n_heads=4 (one feature per head)"), randn(2, 3, 4, seed=34), 4),
        (_("a single token: x of shape (3, 1, 10) with n_heads=5"), randn(3, 1, 10, seed=35), 5),
        (_("x of shape (2, 6, 16) in float64 with n_heads=4"), randn(2, 6, 16, seed=36, dtype=torch.float64), 4),
    ]
    forbid = [("attnbook.multihead.split_heads", _("write it yourself with view/reshape and transpose"))]

    def one(case, runs):
        desc, x, h = case
        got = call(split_heads, x, h, what="split_heads", on=desc, forbid=forbid, explain=_split_error_hint)
        ref, mistakes = heads_ref(x, h), _split_mistakes(x, h)  # (B, h, n, d_head)
        got = expect_shape(got, ref, mistakes, runs, what=_("your result"), on=desc)
        expect_dtype(got, x.dtype, what=_("your result"), on=desc, input_name="x", hint=REARRANGE_DTYPE_HINT)
        return Run(desc, got, ref, mistakes)

    verdict(collect(cases, one), what=_("your result"), rule=SPLIT_RULE)
    return _("right on {len_cases} inputs, including a batch of 1, one head, one feature per head and one token",
             len_cases=len(cases))


