"""Checker for exercise 2.1, attention by hand."""
from __future__ import annotations

import math

import torch
from torch import Tensor

from ..compare import as_value, expect_value
from ..registry import exercise, Wrong
from ...i18n import _


# The task's matrices: small numbers for work on paper, chosen so that every mistake of the table below gives
# another matrix (the closest two differ by 0.3 in some entry) and the answer has no pattern to guess from.
_Q = torch.tensor([[2.0, 1.0], [0.0, 1.0]], dtype=torch.float64)
_K = torch.tensor([[1.0, -1.0], [0.5, 2.0]], dtype=torch.float64)
_V = torch.tensor([[3.0, 0.0], [-1.0, 2.0]], dtype=torch.float64)


@exercise("2.1", "Attention by hand", answer_name="answer_2_1",
          answer_kind="value", section="The formula, one step at a time")
def check_by_hand(answer) -> str:
    """answer: the 2x2 matrix softmax(Q K^T / sqrt(2)) V, as a tensor, an array or a nested list; to 1e-3.

    A by-hand answer: the messages say which entries are wrong and why, never the expected numbers.
    """
    got = as_value(answer, expected=_("a 2x2 matrix"))
    if got.dim() == 0 or got.numel() == 1:
        raise Wrong(_("your answer is a single number, expected a 2x2 matrix"),
                    _("the output has one row per query and one column per value dimension"))
    scores = _Q @ _K.T  # (2, 2)
    weights = torch.softmax(scores / math.sqrt(2), dim=-1)
    output = weights @ _V
    _expect_not_rounded(got, output, atol=1e-3)
    expect_value(
        got, output, what=_("your answer"), atol=1e-3,
        mistakes={
            _("you left out the scale: divide the scores Q K^T by sqrt(d_k) = sqrt(2) before the softmax"):
                torch.softmax(scores, dim=-1) @ _V,
            _("you divided the scores by d_k = 2; divide by sqrt(d_k) = sqrt(2) instead"):
                torch.softmax(scores / 2, dim=-1) @ _V,
            _("your softmax normalised each column (over the queries); normalise each row (over the keys)"):
                torch.softmax(scores / math.sqrt(2), dim=0) @ _V,
            _("your scores are not Q K^T: entry (i, j) is the dot product of row i of Q (query i) with row j of "
              "K (key j); check the order of the product and which matrix is transposed"):
                torch.softmax(_Q @ _K / math.sqrt(2), dim=-1) @ _V,
            _("your scores are K Q^T, one row per key: the scores are Q K^T, entry (i, j) the dot product of row i of "
              "Q (query i) with row j of K (key j)"):
                torch.softmax(_K @ _Q.T / math.sqrt(2), dim=-1) @ _V,
            _("these are the attention weights softmax(Q K^T / sqrt(2)); multiply them by V to get the output"):
                weights,
            _("your matrix is transposed: row i must be the output for query i"): output.T,
            _("you multiplied V by the scaled scores without a softmax: turn each row of scores into weights "
              "that are positive and sum to 1 first"): scores / math.sqrt(2) @ _V,
        },
        hint=_("work one query (row of Q) at a time: its two scores, the dot products with the rows of K, divided by "
               "sqrt(2); a softmax across those two scores; then the rows of V weighted by the two weights and "
               "added"),
        nan_hint=_("each output entry is a weighted average of entries of V, an ordinary number: check the "
                   "softmax step"),
    )
    return _("softmax(Q K^T / sqrt(2)) V is right to 1e-3")


def _expect_not_rounded(got: Tensor, output: Tensor, atol: float) -> None:
    """Wrong with expect_value's "rounded too early" hint when every entry of `got` is the right entry rounded to
    1 or 2 decimals (each entry to either) and at least one is rounded to 1: expect_value itself tells only an answer
    within 5e-3 of the right one, which rounding to 1 decimal is not. Anything else is left to expect_value."""
    if tuple(got.shape) != tuple(output.shape) or not got.is_floating_point() or not torch.isfinite(got).all():
        return
    got = got.double()
    if torch.allclose(got, output, atol=atol, rtol=0.0):
        return
    one, two = (torch.round(output, decimals=d) for d in (1, 2))
    by_one, by_two = ((got - r).abs() <= atol for r in (one, two))
    if bool((by_one | by_two).all()) and not bool(by_two.all()):
        raise Wrong(_("{what} is not right to {atol:g}", what=_("your answer"), atol=atol),
                    _("it looks rounded too early: keep at least {max_1_round_math_log10_a} decimals, and round only "
                      "at the end", max_1_round_math_log10_a=max(1, round(-math.log10(atol)))))


