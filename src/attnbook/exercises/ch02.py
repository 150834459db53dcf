"""Checkers for chapter 2, scaled dot-product attention."""
from __future__ import annotations

import bisect
import math
import numbers
import re

import torch
from torch import Tensor

from ..attention import scaled_dot_product_attention
from .compare import (as_value, case_seed, close_to, expect_items, expect_tensor, expect_tuple, expect_value,
                      generator, keyed_hint, randn, record_items, try_mistake, wrong_values)
from .guard import ATTENTION_SHORTCUTS, call
from .hints import FLOAT32_ARITHMETIC, FLOAT64_TOL, describe, tolerance_for
from .registry import exercise, Wrong
from ..i18n import N_, _

# ---------------------------------------------------------------------------------------------------------
# 2.1 attention by hand
# ---------------------------------------------------------------------------------------------------------

# The task's matrices: small numbers for work on paper, chosen so that every mistake of the table below gives
# another matrix (the closest two differ by 0.3 in some entry) and the answer has no pattern to guess from.
_Q = torch.tensor([[2.0, 1.0], [0.0, 1.0]], dtype=torch.float64)
_K = torch.tensor([[1.0, -1.0], [0.5, 2.0]], dtype=torch.float64)
_V = torch.tensor([[3.0, 0.0], [-1.0, 2.0]], dtype=torch.float64)


@exercise("2.1", "Attention by hand", answer_kind="value", section="The formula, one step at a time")
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


# ---------------------------------------------------------------------------------------------------------
# 2.2 scaled dot-product attention with a mask
# ---------------------------------------------------------------------------------------------------------




def _qkv(batch: tuple[int, ...], L: int, S: int, d_k: int, d_v: int, seed: int, dtype=torch.float32):
    q = randn(*batch, L, d_k, seed=seed, dtype=dtype)
    return q, randn(*batch, S, d_k, seed=seed + 1, dtype=dtype), randn(*batch, S, d_v, seed=seed + 2, dtype=dtype)


def _attention_cases() -> list[tuple[str, tuple[Tensor, Tensor, Tensor], Tensor | None]]:
    """(description, (q, k, v), mask) for 2.2: every size differs from the others somewhere, so that a scale by the
    wrong size is told apart; no masks first, then masks of several shapes, one case in float64."""
    padding = torch.arange(5)[None, :] < torch.tensor([4, 2, 3])[:, None]  # (3, 5); every row keeps a key either way
    causal = torch.ones(6, 6, dtype=torch.bool).tril()  # (6, 6)
    lonely = randn(2, 1, 4, 6, seed=90) > 0  # (2, 1, 4, 6) random mask ...
    lonely[:, :, 0] = True  # ... every row allowed somewhere ...
    lonely[1, 0, 2] = False  # ... except query 2 of batch element 1, which may attend to no key
    return [
        (_("2-D q (3, 4), k (5, 4), v (5, 6) with no mask"), _qkv((), 3, 5, 4, 6, seed=10), None),
        (_("3-D q (2, 4, 8), k (2, 6, 8), v (2, 6, 3) with no mask"), _qkv((2,), 4, 6, 8, 3, seed=20), None),
        (_("4-D q (2, 3, 5, 8), k (2, 3, 7, 8), v (2, 3, 7, 4) with no mask"), _qkv((2, 3), 5, 7, 8, 4, seed=30), None),
        (_("a batch of 1 with a single query: q (1, 1, 1, 4), k (1, 1, 3, 4), v (1, 1, 3, 2)"),
         _qkv((1, 1), 1, 3, 4, 2, seed=40), None),
        (_("float64 inputs of odd sizes q (3, 1, 7, 5), k (3, 1, 9, 5), v (3, 1, 9, 1)"),
         _qkv((3, 1), 7, 9, 5, 1, seed=50, dtype=torch.float64), None),
        (_("q, k, v (3, 2, 5, 4) with a padding mask of shape (3, 1, 1, 5) for lengths [4, 2, 3]"),
         _qkv((3, 2), 5, 5, 4, 4, seed=60), padding[:, None, None, :]),
        (_("q, k, v (2, 2, 6, 4) with a causal mask of shape (6, 6)"), _qkv((2, 2), 6, 6, 4, 3, seed=70), causal),
        (_("q (2, 3, 4, 4), k and v (2, 3, 6, 4) with a mask of shape (2, 1, 4, 6) in which query 2 of batch "
           "element 1 may attend to no key"), _qkv((2, 3), 4, 6, 4, 4, seed=80), lonely),
    ]


_EMPTY_ROW = (N_("its weights and output must be 0: after the softmax, set the weights of every query whose mask row has "
                 "no True to 0"))
_SCALE_SIZE = N_("d_k is the size of the last dimension of q (and k), q.size(-1); you scaled by the square root of {what}")
_SCALE_TEXTS = {  # label -> what was scaled by, shown in _SCALE_SIZE (translated when shown: see _scale_texts)
    "scale L": N_("q.size(-2), the number of queries"),
    "scale S": N_("k.size(-2), the number of keys"),
    "scale d_v": N_("v.size(-1), d_v, the size of the values"),
    "scale dim 0": N_("the size of dimension 0 (q.size(0) or q.shape[0])"),
}


def _scale_texts() -> dict[str, str]:
    """The hints of _SCALE_TEXTS in the language of the moment."""
    return {label: _(_SCALE_SIZE, what=_(what)) for label, what in _SCALE_TEXTS.items()}


def _variants(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> dict[str, Tensor]:
    """The attention weights that common mistakes produce on this input, keyed by the hint for each (or by a label
    in _SCALE_TEXTS). Every key is present on every input: on an input where a mistake makes no difference (a
    mask mistake without a mask) it gives the right weights, so that it can be confirmed on every input."""
    d_k = q.size(-1)
    raw = q.double() @ k.double().transpose(-2, -1)  # (..., L, S)
    scaled = raw / math.sqrt(d_k)

    def masked(scores: Tensor, m: Tensor | None = mask, fill: float = float("-inf")) -> Tensor:
        return scores if m is None else scores.masked_fill(~m, fill)

    nan_rows = torch.softmax(masked(scaled), dim=-1)
    out = {
        _("your softmax normalises over the queries (dim=-2); normalise over the keys (dim=-1), so that each "
          "query's weights sum to 1"): torch.softmax(masked(scaled), dim=-2),
        _("your softmax normalises over dim=1, which is the keys only for 2-D inputs; normalise over the keys, "
          "dim=-1, whatever the number of dimensions"): try_mistake(lambda: torch.softmax(masked(scaled), dim=1)),
        _("you left out the scale: divide the scores by sqrt(d_k) before the softmax"): torch.softmax(masked(raw),
          dim=-1),
        _("you divided the scores by d_k; divide by sqrt(d_k) (math.sqrt(q.size(-1)))"):
            torch.softmax(masked(raw / d_k), dim=-1),
        "scale L": torch.softmax(masked(raw / math.sqrt(q.size(-2))), dim=-1),
        "scale S": torch.softmax(masked(raw / math.sqrt(k.size(-2))), dim=-1),
        "scale d_v": torch.softmax(masked(raw / math.sqrt(v.size(-1))), dim=-1),
        "scale dim 0": torch.softmax(masked(raw / math.sqrt(q.size(0))), dim=-1),
        _("your scores are k q^T (keys by queries); the scores are q k^T, one row per query: q @ k.transpose(-2, -1)"):
            try_mistake(lambda: torch.softmax(masked((k.double() @ q.double().transpose(-2, -1)) / math.sqrt(d_k)),
            dim=-1)),
        _("you did not apply the mask: blocked keys (mask False) must get weight 0, so set their scores to -inf "
          "before the softmax"): torch.softmax(scaled, dim=-1),
        _("your mask is inverted: True means 'may attend', so fill the scores where the mask is False"):
            torch.softmax(scaled if mask is None else scaled.masked_fill(mask, float("-inf")), dim=-1),
        _("you applied the mask after the softmax, so the remaining weights no longer sum to 1; set masked "
          "scores to -inf before the softmax"): torch.softmax(scaled, dim=-1) * (1 if mask is None else mask),
        _("a query that may attend to no key gets NaN weights (with every score -inf, the softmax divides 0 by 0); ")
        + _(_EMPTY_ROW): nan_rows,
        _("a query that may attend to no key gets uniform weights (what a large negative fill such as -1e9 "
          "gives, since all its scores are then equal); ") + _(_EMPTY_ROW): torch.softmax(masked(scaled, fill=-1e9),
                                                             dim=-1),
    }
    # torch.softmax gives NaN for a query with no allowed key: a mistake is also made with the NaN replaced by 0
    # (nan_to_num, torch.where), and with the rows of the queries the mask leaves no key set to 0 (the fix of the
    # empty rows made on top of the mistake)
    empty = None if mask is None else ~mask.any(dim=-1, keepdim=True)

    def forms(w: Tensor | None):
        if w is None or empty is None:
            return w
        fixed = w.masked_fill(empty, 0.0)
        return (w, w.nan_to_num(0.0), fixed, fixed.nan_to_num(0.0))

    return {hint: forms(w) for hint, w in out.items()}


def _output_variants(v: Tensor, nan_rows: Tensor) -> dict[str, Tensor]:
    """The outputs that common mistakes produce when the weights are right, keyed by the hint for each."""
    return {
        _("your output has NaN for a query that may attend to no key although its weights are 0: compute the output "
          "from the weights after their NaN rows are set to 0, so that its output is 0 too"): nan_rows @ v.double(),
    }


_MISALIGNED = re.compile(r"must match the size of tensor b \(\d+\) at non-singleton dimension (\d+)")


def _mask_error_hint(mask: Tensor | None, q: Tensor):
    def explain(message: str) -> str | None:
        misaligned = _MISALIGNED.search(message)
        if mask is None and misaligned and int(misaligned.group(1)) < q.dim() - 2:  # a product's batch dimensions
            return (_("the batch dimensions of q and of the transposed k no longer line up: transpose only the last "
                      "two dimensions of k, k.transpose(-2, -1) (k.T, .t() or transpose(0, 1) also move the batch "
                      "dimensions of a 3-D or 4-D k)"))
        if mask is None and ("unary ~: 'NoneType'" in message
                             or re.search(r"(masked_fill|logical_not|where|masked_fill_)\(\).*NoneType", message)):
            return (_("mask is None here (this call gives no mask): use the mask only after testing `if mask is not "
                      "None:`, and ~mask, masked_fill and logical_not inside that branch"))
        if mask is not None and "must match the size of tensor" in message:
            return (_("the mask of shape {tuple_mask_shape} already broadcasts against the scores (..., L, S): "
                      "its last dimensions line up with theirs, so use it as it is, without adding dimensions to "
                      "it", tuple_mask_shape=tuple(mask.shape)))
        return None
    return explain


ATTENTION_FORBIDDEN = [
    (name, N_("write the four steps yourself with tensor operations: the scores, the scale, the mask and a softmax "
              "over the keys, then the weighted sum of the values"))
    for name in (*ATTENTION_SHORTCUTS, "attnbook.decoding.grouped_decode_attention")
]


@exercise("2.2", "Scaled dot-product attention with a mask", section="The formula, one step at a time",
          references=("attnbook.attention.scaled_dot_product_attention", "attnbook.attention.tiled_attention"))
def check_attention(attention) -> str:
    """attention(q, k, v, mask=None) -> (output, weights) in q's dtype must match scaled_dot_product_attention."""
    cases = _attention_cases()
    what = {0: _("the output tensor (the first item you return)"), 1: _("the weights tensor (the second item you return)")}
    runs: list[list] = [[], []]  # per item: (the answer's result, {mistake: its result}) on every input
    right_weights: list[tuple[Tensor, bool]] = []  # (the right weights, no mask) of every input in runs
    first = None
    for desc, (q, k, v), mask in cases:
        args = (q, k, v) if mask is None else (q, k, v, mask)
        ref_out, ref_w = scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=mask)
        refs = (ref_out, ref_w)
        out_shape, w_shape = tuple(ref_out.shape), tuple(ref_w.shape)
        w_mistakes = {**_variants(q, k, v, mask),
                      _("you returned the output where the weights belong: `return output, weights`"): ref_out}
        scores = q.double() @ k.double().transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., L, S)
        nan_rows = ref_w if mask is None else torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
        o_mistakes = {**_output_variants(v, nan_rows),
                      _("you multiplied the weights by k; the output is the weighted sum of the values, weights @ v"):
                          try_mistake(lambda: ref_w @ k.double()),
                      _("you returned the weights where the output belongs: `return output, weights`"): ref_w}
        mistakes = (o_mistakes, w_mistakes)
        try:
            got = call(attention, *args, what="attention", on=desc, forbid=ATTENTION_FORBIDDEN,
                       explain=_mask_error_hint(mask, q))
            if isinstance(got, Tensor):
                shape = tuple(got.shape)
                hint = (_("you returned only the output; return both: `return output, weights`") if shape == out_shape
                        else _("you returned only the weights; return both: `return output, weights`")
                        if shape == w_shape else _("return a tuple: `return output, weights`"))
                raise Wrong(_("attention returned a single tensor of shape {shape} on {desc}, expected a tuple "
                              "(output, weights)", shape=shape, desc=desc), hint)
            got = expect_tuple(got, ("output", "weights"), "attention", desc)
            out, weights = got
            if (isinstance(out, Tensor) and isinstance(weights, Tensor) and out_shape != w_shape
                    and tuple(out.shape) == w_shape and tuple(weights.shape) == out_shape):
                raise Wrong(_("attention returned tensors of shapes {tuple_out_shape} and {tuple_weights_shape} "
                              "on {desc}, expected output {out_shape} then weights {w_shape}",
                              tuple_out_shape=tuple(out.shape), tuple_weights_shape=tuple(weights.shape),
                              desc=desc, out_shape=out_shape, w_shape=w_shape),
                            _("you swapped them: return the output first, then the weights (`return output, weights`)"))
            expect_items(got, refs, mistakes, runs, what=what, on=desc, dtype=q.dtype, input_name="q",
                         shape_hint=lambda runs_, k: keyed_hint(runs_, k, _scale_texts()))
        except Wrong:
            if first is None:
                raise
            break
        found = record_items(runs, got, refs, mistakes)
        right_weights.append((ref_w, mask is None))
        if found is None and q.dtype == torch.float64:  # float64 results to FLOAT64_TOL
            bad = [i for i in (1, 0) if not close_to(got[i], refs[i], *FLOAT64_TOL)]
            found = (len(runs[0]) - 1, bad[0]) if bad else None
        if first is None and found is not None:
            first = (*found, desc, refs[found[1]])
    if first is None:
        return _("output and weights match scaled_dot_product_attention on {len_cases} inputs, with and without "
                 "masks", len_cases=len(cases))
    run, i, desc, ref = first
    rule = (_("weights = softmax(q k^T / sqrt(d_k)) over the keys (dim=-1), with blocked keys (mask False) at 0 and a "
              "query that may attend to no key at 0 everywhere") if i == 1
            else _("output = weights @ v: for each query, the sum of the value rows, each multiplied by its weight"))
    got = runs[i][run][0]
    hint = keyed_hint(runs[i], run, _scale_texts())
    # Right to float32's tolerance on float64 inputs: whatever mistake `hint` names gives the right result on this
    # input too, so it does not explain the error. An epsilon in the softmax's denominator may (on every input), or
    # float32 rounding; another small error gets the first wrong entry and the rule.
    near = ref.dtype == torch.float64 and close_to(got, ref)
    if (hint is None or near) and i == 1 and _short_rows([w for w, _unused in runs[1]], right_weights):
        hint = _(_EPSILON)
    elif near:
        hint = _(FLOAT32_ARITHMETIC) if _float32_rounding(got, ref) else None
    raise wrong_values(what[i], desc, got, ref, hint,
                        rule, *tolerance_for(ref.dtype), nan_rule=rule)


_EPSILON = N_("each row of your weights sums to slightly less than 1, all its weights smaller than the softmax's by "
               "the same factor, as when a small number (an epsilon such as 1e-9) is added to the sum in the "
               "softmax's denominator: divide by the sum itself, and give a query that may attend to no key its "
               "weights of 0 in another way")


def _short_rows(weights: list, right: list[tuple[Tensor, bool]]) -> bool:
    """True if on every input the answer's weights are the right weights with each row multiplied by a factor of at
    most 1 (the row's sum), and on some input without a mask a factor is below 1 by more than the tolerance of the
    input's dtype: what a small number added to the softmax's denominator gives. (A mask applied after the softmax
    also multiplies rows by factors below 1, but only rows with a blocked key.)"""
    short = False
    for got, (ref, unmasked) in zip(weights, right):
        if not (isinstance(got, Tensor) and got.is_floating_point() and tuple(got.shape) == tuple(ref.shape)):
            return False
        g = got.detach().double().cpu()
        if not torch.isfinite(g).all():
            return False
        atol, rtol = tolerance_for(got.dtype)
        sums = g.sum(dim=-1, keepdim=True)  # (..., L, 1)
        if not torch.allclose(g, ref * sums, atol=atol, rtol=rtol):
            return False
        kept = (ref.sum(dim=-1, keepdim=True) > 0.5).expand_as(sums)  # rows with an allowed key (sum 1)
        deficit = (1.0 - sums)[kept]
        if bool((deficit < -(atol + rtol)).any()):
            return False
        short = short or (unmasked and bool((deficit > atol + rtol).any()))
    return short


def _float32_rounding(got: Tensor, ref: Tensor) -> bool:
    """True if the error of a float64 result `got` looks like float32 rounding: every entry is a float32 number (a
    float32 result cast back), or the relative errors are of float32's size (1e-9 to 1e-5) with no per-row pattern
    (not a factor and an offset per row, a + b * right, as a small number added to the softmax's sums gives)."""
    g, r = got.detach().double().cpu(), ref.detach().double().cpu()
    if torch.equal(g.float().double(), g):
        return True
    nonzero = r != 0
    if not bool(nonzero.any()):
        return False
    relative = float(((g - r).abs()[nonzero] / r.abs()[nonzero]).max())
    if not 1e-9 <= relative <= 1e-5:
        return False
    if r.dim() == 0 or r.size(-1) < 3:  # rows of one or two entries: any factor and offset fit them
        return True
    centred_r, centred_g = r - r.mean(dim=-1, keepdim=True), g - g.mean(dim=-1, keepdim=True)
    spread = (centred_r * centred_r).sum(dim=-1, keepdim=True)
    slope = torch.where(spread > 0, (centred_r * centred_g).sum(dim=-1, keepdim=True) / spread.clamp_min(1e-300),
                        torch.ones_like(spread))
    return not torch.allclose(centred_g, slope * centred_r, atol=FLOAT64_TOL[0], rtol=0.0)


# ---------------------------------------------------------------------------------------------------------
# 2.3 padding mask
# ---------------------------------------------------------------------------------------------------------


_MASK_RULE = (N_("row b is True at its first lengths[b] positions (positions 0 to lengths[b] - 1: the real tokens) "
                 "and False at the positions after them, up to max_len (the padding)"))


def _mask_mistakes(lengths: Tensor, max_len: int) -> dict[str, Tensor]:
    """{hint: the mask that mistake gives} on this input (bool, (batch, max_len))."""
    positions = torch.arange(max_len)
    ref = positions[None, :] < lengths[:, None]
    return {
        _("your mask is inverted: True must mark the real tokens (the first lengths[b] positions), "
          "False the padding"): ~ref,
        _("off by one: position p is a real token when p < length (positions count from 0), not p <= length"):
            positions[None, :] <= lengths[:, None],
        _("off by one: each row must have exactly lengths[b] True values; positions count from 0, so the real "
          "tokens are positions 0 to lengths[b] - 1"): positions[None, :] < lengths[:, None] - 1,
    }


def _padding_cases(g: torch.Generator) -> list[tuple]:
    """(lengths, max_len, description[, dtype]) for 2.3, drawn from `g` (new lengths on every run), each keeping the
    edge case it is there for: a sequence that fills every position, an empty one, a batch of one, every sequence
    padded, no padding at all, and int32 lengths with both an empty and a full sequence."""
    def draw(low: int, high: int, n: int) -> list[int]:  # n integers from low to high, both included
        return torch.randint(low, high + 1, (n,), generator=g).tolist()

    def put(values: list[int], value: int) -> list[int]:  # `value` at a random position of `values`
        values[int(torch.randint(len(values), (), generator=g))] = value
        return values

    full = put(draw(0, 4, 3), 4)
    empty = put(draw(1, 3, 2), 0)
    one = draw(1, 4, 1)
    padded = draw(1, 6, 5)
    m = draw(3, 6, 1)[0]
    both = [0, draw(1, 2, 1)[0], 3]
    both = [both[i] for i in torch.randperm(3, generator=g).tolist()]
    return [
        (full, 4, _("lengths {lengths} and max_len=4 (a sequence fills every position)", lengths=full)),
        (empty, 3, _("lengths {lengths} and max_len=3 (an empty sequence)", lengths=empty)),
        (one, 5, _("lengths {lengths} and max_len=5 (a batch of one)", lengths=one)),
        (padded, 7, _("lengths {lengths} and max_len=7 (every sequence is padded)", lengths=padded)),
        ([m, m], m, _("lengths {lengths} and max_len={m} (no padding at all)", lengths=[m, m], m=m)),
        (both, 3, _("int32 lengths {lengths} and max_len=3", lengths=both), torch.int32),
    ]


@exercise("2.3", "A padding mask from sequence lengths", section="Masking: keep attention off the padding",
          references=("attnbook.masks.padding_mask",))
def check_padding_mask(padding_mask) -> str:
    """padding_mask(lengths, max_len) -> bool (batch, max_len), True at the first lengths[b] positions."""
    cases = _padding_cases(generator(23))
    runs, first = [], None  # runs: (the answer's mask, {hint: mistake's mask}) on every input
    for values, max_len, desc, *dtype in cases:
        lengths = torch.tensor(values, dtype=dtype[0] if dtype else torch.int64)
        ref = torch.arange(max_len)[None, :] < lengths[:, None]  # (batch, max_len), True at real tokens
        try:
            got = call(padding_mask, lengths, max_len, what="padding_mask", on=desc)
            got = expect_tensor(got, what=_("your mask"), on=desc, finite=False)
            batch = len(values)
            if tuple(got.shape) != (batch, max_len):
                transposed = tuple(got.shape) == (max_len, batch) and got.dtype == torch.bool and \
                    torch.equal(got, ref.T)
                longest = tuple(got.shape) == (batch, max(values)) and max(values) != max_len
                raise Wrong(_("your mask has shape {tuple_got_shape} on {desc}, expected (batch, max_len) = "
                              "{batch_max_len}",
                              tuple_got_shape=tuple(got.shape), desc=desc, batch_max_len=(batch, max_len)),
                            _("your mask is transposed: one row per sequence, one column per position") if transposed
                            else _("your mask has one column per position up to the longest length; it must have "
                                   "max_len columns, and max_len can be larger than every length") if longest else None)
            if got.dtype != torch.bool:
                zero_one = not got.is_complex() and bool(((got == 0) | (got == 1)).all())
                hint = (_("compare, don't cast: a comparison of the positions with the lengths already gives a bool "
                          "tensor (or finish with .bool())") if zero_one
                        else _("a mask holds True/False: build it with a comparison"))
                raise Wrong(_("your mask has dtype {dtype} on {desc}, expected torch.bool (masks are boolean, "
                              "True = real token)", dtype=got.dtype, desc=desc), hint)
        except Wrong:
            if first is None:
                raise
            break
        runs.append((got, _mask_mistakes(lengths, max_len)))
        if first is None and not torch.equal(got, ref):
            first = (len(runs) - 1, values, desc, ref)
    if first is None:
        return _("right on {len_cases} batches, including an empty sequence and one with no padding",
                 len_cases=len(cases))
    run, values, desc, ref = first
    got, mistakes = runs[run]
    for hint, wrong in mistakes.items():
        if torch.equal(got, wrong) and all(torch.equal(g, m[hint]) for g, m in runs):
            raise Wrong(_("your mask has the wrong values on {desc}", desc=desc), hint)
    row, pos = (int(i) for i in (got != ref).nonzero()[0])
    raise Wrong(_("your mask has the wrong values on {desc}: row {row} (length {values_row}) is "
                  "{bool_got_row_pos} at position {pos}, expected {bool_ref_row_pos}",
                  desc=desc, row=row, values_row=values[row], bool_got_row_pos=bool(got[row, pos]),
                  pos=pos, bool_ref_row_pos=bool(ref[row, pos])), _MASK_RULE)


# ---------------------------------------------------------------------------------------------------------
# 2.4 the variance of a dot product
# ---------------------------------------------------------------------------------------------------------

# The check calls the answer many times, each call with the random generators seeded anew (`_seed`, drawn from the
# run's seed), and tests what a measured variance must do:
#   A. accuracy: within VARIANCE_RTOL of d_k for d_k in VARIANCE_DIMS with VARIANCE_N pairs (the task's promise);
#   B. fresh draws: SPREAD_CALLS calls of (SPREAD_D, VARIANCE_N) give different numbers, each within SPREAD_RTOL of
#      SPREAD_D. One q shared by all the pairs gives |q|^2 (chi-square with 1 degree of freedom) times about 1;
#   C. n_samples used: n_samples=2000 and 8000 under one seed give different numbers;
#   D. shape: SHAPE_CALLS calls of (SHAPE_DK, SHAPE_N) = (64, 2), whose results must have the exact distribution of
#      the variance of 2 dot products, on both sides. With x1, x2 the two dot products, the sum of squared
#      deviations is (x1 - x2)^2 / 2; given the queries, x1 - x2 is normal with variance R = |q1|^2 + |q2|^2
#      (chi-square with 2 d_k degrees of freedom), so u = (x1 - x2)^2 / (2 d_k) = (R / (2 d_k)) Z^2, Z standard
#      normal: a distribution known exactly (one integral over R), the same for every generator. The task allows
#      two divisors m (n_samples - 1 or n_samples), and result * m / d_k is that u for either. The results are
#      binned at SHAPE_EDGES (in u, for each m) and three scores add integer weights per bin over the calls, each
#      8 times the log-likelihood ratio (rounded) of a bin under a wrong distribution against the right one:
#        "down": the results halved (scale 1/2): too many small results, too few large ones;
#        "shape": the mean of the squares, (x1^2 + x2^2) / 2, whose distribution has the same mean but far fewer
#                 results near 0 (x1 and x2 are rarely both small, while x1 - x2 often is);
#        "up": the results doubled.
#      A divisor m fits when no score exceeds its SHAPE_LIMITS entry; the answer passes D when one of the two fits.
#      A result below -SHAPE_NEGATIVE * d_k (a rounding error of E[x^2] - E[x]^2 in float32 aside), NaN or inf fails.
#      D stops after SHAPE_EARLY calls whose results all lie within 10% of d_k (an answer that ignores n_samples,
#      slow when it draws many pairs): a right result lies there with probability below 0.07 (either divisor).
# False-fail rate, from these parameters in tests/test_exercises_ch02.py (test_2_4_false_fail_rate): A and B by
# truncated Chernoff bounds on the mean of the squared dot products and on their mean (every call, union bound);
# D exactly: each score is a sum of SHAPE_CALLS independent draws of the weight of a bin, whose probabilities under
# the right distribution are integrals, and its distribution the SHAPE_CALLS-fold convolution; D fails a right answer
# only if a score exceeds its limit under the answer's own divisor (union bound of the three tails: down 1.9e-7,
# shape 9.6e-8, up 2.8e-8), or stops early (below 0.07^16 < 1e-18). C and the identical-results test cannot fail a
# right answer. Per pass below 3.8e-7 (A 5.9e-9, B 5.3e-8, D 3.14e-7), both passes of the check together below
# 7.5e-7 (< 1e-6). (Rounding of a float32 answer moves a result across a bin edge on rare calls, by a part in 10^6
# of its value.)
# Power (test_2_4_power; a wrong answer passes the check only if both passes pass, so the check lets it through with
# the square of the per-pass probability):
#   - 0.0 for small n_samples, or n_samples // 2 pairs (one pair: variance 0): never passes (every result in the
#     lowest bin: "down" is SHAPE_CALLS * 3 under both divisors);
#   - the mean of the squared dot products, divisor n or n - 1 (float32 or float64): passes a pass with probability
#     below 5.7e-9 (n) and 1e-9 (n - 1); n_samples + 1 pairs and divisor n_samples: below 3.5e-9;
#   - the sum of the per-coordinate variances (the same as the right answer for d_k = 1; at d_k = 64 its results
#     stay near 64 or 32): below 1e-50 (a Chernoff bound, on bin probabilities from a simulation);
#   - the variance dividing by n_samples, halved for small n_samples (scale 1/8 at n = 2): below 1.5e-5 per pass,
#     2.2e-10 for the check;
#   - NOT CAUGHT reliably: dividing by n_samples + 1 (scale 1/6 at n = 2, 2/3 of the divisor-n result) passes a pass
#     with probability about 0.46 (0.21 for the check): a factor 3/2 in scale cannot be told from the right factors 1
#     and 2 by SHAPE_CALLS results of 1 degree of freedom each at this false-fail rate. Larger n_samples would not
#     help (the gap n / (n + 1) shrinks as fast as the results sharpen), more calls would: with 1,000 calls a pass
#     (and new limits) it would pass with probability about 1e-4, beyond the check's budget of about 400 calls.
#   - one q against n_samples keys passes B with probability at most 5.3e-8 per pass (each call lands within 25% of
#     1 with probability 0.123); d_k plus Gaussian noise of any spread, scaled by n_samples or not, and d_k plus
#     uniform noise of any width, pass D with probability below 1e-15 per pass, the absolute value of d_k plus
#     Gaussian noise below 2e-7 (Chernoff bounds over a grid of spreads; about 1e-8 at its worst spread, exactly);
#     a fixed seed, a cache or a formula returns the same number on every call and always fails B; an answer that
#     ignores n_samples returns the same number for 2000 and 8000 pairs under one seed and always fails C (or,
#     drawing its own unseeded numbers, stays within 10% of d_k for n_samples=2 and fails D); the catalogue's other
#     wrong answers (the standard deviation, the mean, uniform entries, k = q, a scale, sizes swapped) are 50% or
#     more away from d_k, tens of standard deviations, and fail A on every draw.
VARIANCE_DIMS, VARIANCE_N, VARIANCE_RTOL = (64, 16, 256), 10_000, 0.10
SPREAD_D, SPREAD_CALLS, SPREAD_RTOL = 1, 8, 0.25
SHAPE_CALLS, SHAPE_DK, SHAPE_N, SHAPE_NEGATIVE, SHAPE_EARLY = 384, 64, 2, 1e-3, 16
SHAPE_EDGES = (0.001, 0.003, 0.01, 0.02, 0.04, 0.08, 0.15, 0.25, 0.4, 0.6, 0.85, 1.2, 1.7, 2.4, 3.4, 5.0, 7.5)
SHAPE_WEIGHTS = {  # one weight per bin: below SHAPE_EDGES[0], between two edges, at or above SHAPE_EDGES[-1]
    "down": (3, 3, 3, 3, 3, 3, 2, 2, 1, 1, 0, -1, -3, -5, -8, -13, -20, -30),
    "shape": (-26, -18, -13, -9, -7, -4, -2, 0, 2, 3, 3, 3, 3, 2, 0, -3, -8, -17),
    "up": (-3, -3, -3, -3, -3, -3, -3, -2, -2, -2, -1, -1, 0, 1, 3, 5, 9, 17),
}
SHAPE_LIMITS = {"down": 73, "shape": -12, "up": 6}  # a score above its limit rules the divisor out
# For the messages only (they decide no verdict): for the right answer at (SHAPE_DK, SHAPE_N), dividing by
# n_samples - 1 and by n_samples, the share of results below SHAPE_SMALL and the median result
SHAPE_SMALL, SHAPE_SMALL_SHARE, SHAPE_MEDIAN = 1.0, (0.100, 0.141), (28.83, 14.41)
_HINT_RTOL = 0.10  # how close an answer must be to a known mistake's value to get that mistake's hint
_FRESH = N_("draw new random numbers on every call: use torch.randn (or NumPy's or Python's random functions), "
            "which the check seeds anew before each call, without fixing a seed inside your function, and keep no "
            "results from earlier calls")
_ONE_Q = N_("your results vary from call to call far more than the variance of 10000 dot products does, as when a "
            "single q (or k) is shared by all the pairs: draw n_samples independent pairs, a new q and a new k for "
            "each")


def _seed(k: int) -> int:
    """The seed of the answer's k-th call: a new one in every run (compare.case_seed), and within NumPy's range."""
    return case_seed(2400 + k) % 2 ** 32


def _measure(dot_product_variance, d_k: int, n: int, k: int) -> float:
    on = f"d_k={d_k}, n_samples={n}"
    return _as_number(call(dot_product_variance, d_k, n_samples=n, what="dot_product_variance", on=on,
                           seed=_seed(k)), on)


@exercise("2.4", "The variance of a dot product", section="Dot products grow with d_k")
def check_dot_product_variance(dot_product_variance) -> str:
    """dot_product_variance(d_k, n_samples=10_000) must return a Python float within 10% of d_k for several d_k,
    from new random draws on every call, distributed as the variance of n_samples dot products is."""
    # A. every d_k first: a mistake is named only if it explains all three results
    values = [_measure(dot_product_variance, d_k, VARIANCE_N, i) for i, d_k in enumerate(VARIANCE_DIMS)]
    spread = [_measure(dot_product_variance, SPREAD_D, VARIANCE_N, 10 + i) for i in range(SPREAD_CALLS)]
    if all(math.isfinite(v) for v in spread) and min(spread) > 0 and max(spread) > 1.5 * min(spread) \
            and any(abs(v - SPREAD_D) > SPREAD_RTOL * SPREAD_D for v in spread):
        wild = _(_ONE_Q)  # B's results vary by a factor 1.5 or more: that explains A's results too
    else:
        wild = None
    for d_k, value in zip(VARIANCE_DIMS, values):
        if math.isfinite(value) and abs(value - d_k) <= VARIANCE_RTOL * d_k:
            continue
        raise Wrong(_("dot_product_variance returned {value:.4g} for d_k={d_k}, expected about {d_k} (within "
                      "{_VARIANCE_RTOL:.0%})",
                      value=value, d_k=d_k, _VARIANCE_RTOL=VARIANCE_RTOL), wild or _variance_hint(values, VARIANCE_DIMS))
    if all(value == d_k for value, d_k in zip(values, VARIANCE_DIMS)):
        raise Wrong(_("dot_product_variance returned exactly d_k every time; the exercise asks you to measure it"),
                    _("draw n_samples random vectors q and k of size d_k, compute their dot products and return "
                      "the variance of those numbers"))
    # B. new draws on every call, and the spread of 10,000 pairs' variance
    if len(set(spread)) == 1:
        raise Wrong(_("dot_product_variance(1) returned the same number, {value:.6g}, on all {calls} calls (the random "
                      "generators were seeded differently for each call)", value=spread[0], calls=SPREAD_CALLS),
                    _(_FRESH))
    for value in spread:
        if not (math.isfinite(value) and abs(value - SPREAD_D) <= SPREAD_RTOL * SPREAD_D):
            raise Wrong(_("dot_product_variance returned {value:.4g} for d_k=1 on one of {calls} calls, expected "
                          "within {rtol:.0%} of 1 (10000 pairs measure it to about 3%)",
                          value=value, calls=SPREAD_CALLS, rtol=SPREAD_RTOL), wild)
    # C. The generators are seeded identically around these two calls, so an answer that uses n_samples gives
    # different numbers for different n_samples, and one that ignores it gives the same number twice.
    few, many = (_measure(dot_product_variance, 64, n, 20) for n in (2_000, 8_000))
    if few == many:
        raise Wrong(_("dot_product_variance returned exactly the same number for n_samples=2000 and n_samples=8000 "
                      "(with the random generators seeded the same way)"),
                    _("use the n_samples argument: draw n_samples pairs of vectors, not a fixed number of them"))
    _check_small_samples(dot_product_variance)
    return _("the measured variance of q.k is within {_VARIANCE_RTOL:.0%} of d_k for d_k = ",
             _VARIANCE_RTOL=VARIANCE_RTOL) + ", ".join(map(str, VARIANCE_DIMS))


def _shape_scores(values: list[float], divisor: int) -> dict[str, int]:
    """D's three scores of `values` (results of (SHAPE_DK, SHAPE_N)) for an answer dividing by `divisor`."""
    bins = [bisect.bisect_right(SHAPE_EDGES, v * divisor / SHAPE_DK) for v in values]
    return {name: sum(weights[b] for b in bins) for name, weights in SHAPE_WEIGHTS.items()}


def _shape_fits(values: list[float]) -> bool:
    """True if the results have the distribution of the variance of SHAPE_N dot products of size SHAPE_DK, dividing
    by n_samples - 1 or by n_samples (see D above)."""
    return any(all(score <= SHAPE_LIMITS[name] for name, score in _shape_scores(values, divisor).items())
               for divisor in (SHAPE_N - 1, SHAPE_N))


def _check_small_samples(dot_product_variance) -> None:
    """D: the results for n_samples=2 must have the distribution of the variance of 2 dot products (see above)."""
    d_k, n, calls = SHAPE_DK, SHAPE_N, SHAPE_CALLS
    values = []
    for i in range(calls):
        values.append(_measure(dot_product_variance, d_k, n, 100 + i))
        if len(values) == SHAPE_EARLY and all(abs(v - d_k) <= 0.1 * d_k for v in values):
            break  # an answer that ignores n_samples (and may be slow): no need for the other calls
    bad = [v for v in values if not (math.isfinite(v) and v >= -SHAPE_NEGATIVE * d_k)]
    if bad:
        if not math.isfinite(bad[0]):
            raise Wrong(_("with n_samples={n}, dot_product_variance({d_k}) returned {value}", n=n, d_k=d_k,
                          value=bad[0]),
                        _("the variance of 2 finite numbers is a finite number: draw exactly n_samples pairs (not "
                          "fewer), and divide the sum of squared differences from the mean by n_samples or "
                          "n_samples - 1"))
        raise Wrong(_("with n_samples={n}, dot_product_variance({d_k}) returned {value:.4g}", n=n, d_k=d_k,
                      value=bad[0]),
                    _("a variance is an average of squares, never negative: return the variance of the n_samples "
                      "dot products you drew"))
    if len(values) == calls and _shape_fits(values):
        return
    # The verdict is taken; what follows only chooses the message, from what the results show.
    zeros = sum(v == 0 for v in values)
    ordered = sorted(values)
    median = ordered[len(ordered) // 2]
    small = sum(v < SHAPE_SMALL for v in values)
    if 2 * zeros > calls:
        raise Wrong(_("with n_samples={n}, dot_product_variance({d_k}) returned 0.0 on {zeros} of {calls} calls",
                      n=n, d_k=d_k, zeros=zeros, calls=calls),
                    _("two dot products are almost never equal, so their variance is almost never 0: draw n_samples "
                      "pairs (not fewer), compute their n_samples dot products and return the variance of those "
                      "numbers, the same way whatever n_samples is"))
    if all(abs(v - d_k) <= 0.1 * d_k for v in values):
        raise Wrong(_("with n_samples={n}, all {calls} results of dot_product_variance({d_k}) lay within 10% of "
                      "{d_k}", n=n, calls=len(values), d_k=d_k),
                    _("the variance of only 2 dot products varies a lot from call to call, and is often close to 0: "
                      "draw exactly n_samples pairs, and return the variance you measure on them"))
    if ordered[0] >= 0.1 * median > 0:
        raise Wrong(_("with n_samples={n}, the {calls} results of dot_product_variance({d_k}) barely vary between "
                      "calls: all lie between {low:.3g} and {high:.3g}", n=n, calls=calls, d_k=d_k, low=ordered[0],
                      high=ordered[-1]),
                    _("the variance of only 2 dot products is often close to 0 and sometimes several times d_k: are "
                      "you adding up the variances of the d_k coordinates? Compute one dot product per pair (a sum "
                      "over its d_k coordinates), then the variance of those n_samples numbers"))
    if small < 0.75 * calls * SHAPE_SMALL_SHARE[0]:
        raise Wrong(_("with n_samples={n}, only {small} of {calls} results of dot_product_variance({d_k}) were below "
                      "{limit:g}, while the variance of 2 dot products of size {d_k} is below {limit:g} on about "
                      "{share_n1:.0%} of calls (dividing by n_samples - 1) to {share_n:.0%} (dividing by n_samples)",
                      n=n, small=small, calls=calls, d_k=d_k, limit=SHAPE_SMALL, share_n1=SHAPE_SMALL_SHARE[0],
                      share_n=SHAPE_SMALL_SHARE[1]),
                    _("two dot products that happen to be close give a variance close to 0: return the variance of "
                      "exactly n_samples dot products, the average of their squared differences from their own "
                      "mean"))
    size = None
    if median < 0.8 * SHAPE_MEDIAN[1]:
        size = _("with n_samples={n}, the results of dot_product_variance({d_k}) are too small: their median over "
                 "{calls} calls is {median:.3g}, while the variance of 2 dot products of size {d_k} has a median of "
                 "about {median_n:.3g} dividing by n_samples ({median_n1:.3g} dividing by n_samples - 1)",
                 n=n, d_k=d_k, calls=calls, median=median, median_n=SHAPE_MEDIAN[1], median_n1=SHAPE_MEDIAN[0])
    elif median > 1.25 * SHAPE_MEDIAN[0]:
        size = _("with n_samples={n}, the results of dot_product_variance({d_k}) are too large: their median over "
                 "{calls} calls is {median:.3g}, while the variance of 2 dot products of size {d_k} has a median of "
                 "about {median_n1:.3g} dividing by n_samples - 1 ({median_n:.3g} dividing by n_samples)",
                 n=n, d_k=d_k, calls=calls, median=median, median_n=SHAPE_MEDIAN[1], median_n1=SHAPE_MEDIAN[0])
    if size is not None:
        raise Wrong(size, _("divide the sum of the squared differences from the mean by n_samples or n_samples - 1, "
                            "with no other factor, the same way whatever n_samples is"))
    raise Wrong(_("with n_samples={n}, the {calls} results of dot_product_variance({d_k}) do not have the "
                  "distribution of the variance of 2 dot products of size {d_k}: {small} were below {limit:g} (about "
                  "{share_n1:.0%} to {share_n:.0%} of calls are) and their median is {median:.3g} (about "
                  "{median_n:.3g} to {median_n1:.3g})", n=n, calls=calls, d_k=d_k, small=small, limit=SHAPE_SMALL,
                  share_n1=SHAPE_SMALL_SHARE[0], share_n=SHAPE_SMALL_SHARE[1], median=median,
                  median_n=SHAPE_MEDIAN[1], median_n1=SHAPE_MEDIAN[0]),
                _("draw n_samples new pairs of vectors with independent standard normal entries on every call, and "
                  "return the variance of their n_samples dot products"))


_FLOAT_ONLY = N_("a Python float (end with .item() on a one-element tensor, or convert with float(...))")


def _as_number(got, on: str) -> float:
    """The value of a Python float (NumPy's float64 is one), the kind the task asks for; else Wrong."""
    fn = "dot_product_variance"
    if got is None:
        raise Wrong(_("{fn} returned None for {on}, expected a float",
                      fn=fn, on=on), _("did you forget the `return` statement?"))
    if isinstance(got, float):
        return float(got)
    if isinstance(got, Tensor):
        if got.numel() != 1:
            raise Wrong(_("{fn} returned a tensor of shape {tuple_got_shape} for {on}, expected one number",
                          fn=fn, tuple_got_shape=tuple(got.shape), on=on),
                        _("return the variance of all the dot products, one number, as a Python float (.item())"))
        raise Wrong(_("{fn} returned a tensor (shape {tuple_got_shape}, dtype {dtype}) for {on}, expected "
                      "{_FLOAT_ONLY}",
                      fn=fn, tuple_got_shape=tuple(got.shape),
                      dtype=got.dtype, on=on,
                      _FLOAT_ONLY=_(_FLOAT_ONLY)), _("the task asks for a float: convert the one-element tensor with .item()"))
    if isinstance(got, bool):
        raise Wrong(_("{fn} returned the bool {got} for {on}, expected a float", fn=fn, got=got, on=on),
                    _("return the variance of the n_samples dot products, one number"))
    if isinstance(got, numbers.Integral):
        raise Wrong(_("{fn} returned the int {int_got} for {on}, expected a float", fn=fn, int_got=int(got), on=on),
                    _("do not round or convert to int: return the measured variance itself, as a float"))
    if hasattr(got, "__array__"):  # a NumPy scalar other than float64, or an array
        size = getattr(got, "size", 1)
        if size != 1:
            raise Wrong(_("{fn} returned {describe_got} of {size} numbers for {on}, expected one number",
                          fn=fn, describe_got=describe(got), size=size, on=on),
                        _("return the variance of all the dot products, one number, as a Python float"))
        raise Wrong(_("{fn} returned {describe_got} (a NumPy {getattr_got_dtype_number}) for {on}, expected "
                      "{_FLOAT_ONLY}",
                      fn=fn, describe_got=describe(got), getattr_got_dtype_number=getattr(got, 'dtype', 'number'),
                      on=on, _FLOAT_ONLY=_(_FLOAT_ONLY)), _("the task asks for a float: convert it with float(...)"))
    if isinstance(got, numbers.Real):
        raise Wrong(_("{fn} returned {describe_got} for {on}, expected {_FLOAT_ONLY}",
                      fn=fn, describe_got=describe(got),
                      on=on, _FLOAT_ONLY=_(_FLOAT_ONLY)), _("convert it with float(...)"))
    raise Wrong(_("{fn} returned {describe_got} for {on}, expected a float",
                  fn=fn, describe_got=describe(got), on=on),
                _("return one number: the variance of the n_samples dot products"))


def _variance_mistakes(d_k: int, n: int = 10_000) -> list[tuple[str, float, float]]:
    """(hint, the value that mistake gives about, how far off it may be) for d_k and n samples."""
    uniform = 7 / 144  # Var(x y) for x, y ~ U(0, 1): E[x^2] E[y^2] - (E[x] E[y])^2 = 1/9 - 1/16
    r = _HINT_RTOL
    return [
        (_("that looks like the mean of q.k (about 0), not its variance: use .var()"), 0.0, 6 * math.sqrt(d_k / n)),
        (_("about 1 is the variance of one product q_i k_i, or of the scaled q.k / sqrt(d_k); sum the d_k "
           "products into one dot product per pair and do not scale it"), 1.0, r),
        (_("that is the standard deviation of q.k (about sqrt(d_k)); return the variance (.var(), or the standard "
           "deviation squared)"), math.sqrt(d_k), r * math.sqrt(d_k)),
        (_("about 2 d_k is the variance of q.q: draw k independently of q, not k = q"), 2 * d_k, r * 2 * d_k),
        (_("that is what uniform entries in [0, 1) give (torch.rand); draw the entries from a standard normal "
           "distribution with torch.randn"), uniform * d_k, r * uniform * d_k),
        (_("that is the mean of q.k for uniform entries (torch.rand): use torch.randn, and return the variance, "
           "not the mean"), d_k / 4, r * d_k / 4),
        (_("about d_k^2: you multiplied by d_k, or summed squared dot products without dividing by n_samples"),
         d_k * d_k, r * d_k * d_k),
    ]


def _variance_hint(values: list[float], dims: tuple[int, ...]) -> str | None:
    """The hint of a mistake that explains the results for every d_k; None when no mistake does."""
    if not all(math.isfinite(v) for v in values):
        return _("you need at least two samples for a variance, and finite numbers in every vector")
    # d_k pairs of vectors of size n_samples: about n_samples whatever d_k, from only d_k numbers (the sample
    # variance of 16 normal numbers lies within a factor 0.2 to 2.5 of the truth with probability above 0.998)
    if all(0.2 * 10_000 <= v <= 2.5 * 10_000 for v in values):
        return (_("about n_samples = 10000 whatever d_k: you drew d_k pairs of vectors of size n_samples; draw "
                  "n_samples pairs of vectors of size d_k"))
    per_dim = [_variance_mistakes(d_k) for d_k in dims]
    for j, (hint, _unused, _unused) in enumerate(per_dim[0]):
        if all(abs(v - mistakes[j][1]) <= mistakes[j][2] for v, mistakes in zip(values, per_dim)):
            return hint
    return None
