"""Checker for exercise 3.4, merging the heads back."""
from __future__ import annotations

import torch

from ..compare import expect_dtype, randn
from ..runs import Run, collect, expect_shape, verdict
from ..guard import call
from ..registry import exercise, Wrong
from ...i18n import _
from ._shared import MERGE_RULE, REARRANGE_DTYPE_HINT, concat_ref, merge_error_hint


@exercise("3.4", "Merge the heads back", answer_name="merge_heads", section="Merging the heads, then W_O",
          references=("attnbook.multihead.merge_heads",))
def check_merge_heads(merge_heads) -> str:
    """merge_heads(x): (B, h, n, d_head) -> (B, n, h*d_head), the heads' features one after the other."""
    split = randn(2, 5, 12, seed=46).view(2, 5, 3, 4).transpose(1, 2)  # (2, 3, 5, 4), a view: not contiguous
    cases = [
        (_("x of shape (2, 3, 5, 4)"), randn(2, 3, 5, 4, seed=41)),
        (_("a batch of 1: x of shape (1, 2, 4, 3)"), randn(1, 2, 4, 3, seed=42)),
        (_("one head: x of shape (2, 1, 3, 8)"), randn(2, 1, 3, 8, seed=43)),
        (_("one feature per head: x of shape (2, 4, 3, 1)"), randn(2, 4, 3, 1, seed=44)),
        (_("a single token: x of shape (3, 2, 1, 5)"), randn(3, 2, 1, 5, seed=45)),
        (_("x of shape (2, 3, 5, 4) that is the output of a split (a transposed view, not contiguous in memory)"),
         split),
        (_("x of shape (2, 4, 6, 2) in float64"), randn(2, 4, 6, 2, seed=47, dtype=torch.float64)),
    ]
    forbid = [("attnbook.multihead.merge_heads", _("write it yourself with transpose and reshape"))]

    def one(case, runs):
        desc, x = case
        got = call(merge_heads, x, what="merge_heads", on=desc, forbid=forbid, explain=merge_error_hint)
        B, h, n, dh = x.shape
        ref = concat_ref(x)  # (B, n, h*d_head)
        not_summed = (_("concatenate the heads, don't add or average them: the result has n_heads * d_head "
                        "features per position"))
        mistakes = {
            _("you reshaped (B, n_heads, n, d_head) straight to (B, n, d_model). The shape is right, but the numbers "
              "are read in memory order, so positions are mixed across heads: the head axis must move behind the "
              "position axis (a transpose) before the heads' features are flattened together"): x.reshape(B, n, h * dh),
            _("concatenate the heads one after the other (head 0's d_head features, then head 1's, ...); you "
              "interleaved them, feature by feature"): x.permute(0, 2, 3, 1).reshape(B, n, h * dh),
            _("you stopped at (B, n, n_heads, d_head): flatten the last two axes into one of n_heads * d_head "
              "features"): x.transpose(1, 2),
            not_summed: x.sum(dim=1),
            not_summed + _(" (you repeated their average n_heads times)"): x.mean(dim=1).repeat(1, 1, h),
            _("you transposed the wrong axes: swap the head axis (1) and the position axis (2) of "
              "(B, n_heads, n, d_head) before the reshape"): x.transpose(2, 3).reshape(B, n, h * dh),
            _("the heads come in order: head 0's d_head features first, then head 1's, ...; yours are in reverse "
              "order"): x.flip(1).transpose(1, 2).reshape(B, n, h * dh),
        }
        got = expect_shape(got, ref, mistakes, runs, what=_("your result"), on=desc)
        expect_dtype(got, x.dtype, what=_("your result"), on=desc, input_name="x", hint=REARRANGE_DTYPE_HINT)
        return Run(desc, got, ref, mistakes)

    runs = collect(cases, one)
    try:
        verdict(runs, what=_("your result"), rule=_(MERGE_RULE))
    except Wrong as e:
        first = next(i for i, r in enumerate(runs) if not r.right)
        if e.hint is not None and e.hint == _(MERGE_RULE) and not cases[first][1].is_contiguous() \
                and all(r.right for r in runs[:first]):  # right on every contiguous input before this one
            e.hint = (_("your merge was right on the contiguous inputs but not on this one, whose numbers are not "
                        "in (B, n_heads, n, d_head) order in memory: use only shape operations (transpose, "
                        "reshape), nothing that reads the raw memory (.as_strided, .view(-1) then indexing)"))
        raise
    return _("right on {len_cases} inputs, including one head, one token and a non-contiguous input",
             len_cases=len(cases))
