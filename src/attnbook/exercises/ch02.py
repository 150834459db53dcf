"""Checkers for chapter 2, scaled dot-product attention."""
from __future__ import annotations

import math
import numbers
import re

import torch
from torch import Tensor

from ..attention import scaled_dot_product_attention
from .compare import (as_value, case_seed, close_to, expect_items, expect_tensor, expect_tuple, expect_value,
                      generator, keyed_hint, randn, record_items, try_mistake, wrong_values)
from .guard import ATTENTION_SHORTCUTS, call
from .hints import FLOAT64_TOL, describe, precision_hint, tolerance_for
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
    raise wrong_values(what[i], desc, got, ref, precision_hint(got, ref, keyed_hint(runs[i], run, _scale_texts())),
                        rule, *tolerance_for(ref.dtype), nan_rule=rule)


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
#   D. shape: SHAPE_CALLS calls of (1, 2). The variance of 2 dot products of size 1 has an exact distribution:
#      x1 - x2 is Laplace (the difference of two products of normals), so (x1 - x2)^2 / 2 (dividing by n - 1)
#      is below 0.1 with probability 1 - exp(-sqrt(0.2)) = 0.361 and at least 1 with probability exp(-sqrt(2)) =
#      0.243; dividing by n: 0.469 and 0.135; the mean of the squares (the mean being known to be 0, also
#      accepted): 0.283 and 0.259. A right answer gives at least SHAPE_MIN_LOW results below SHAPE_LOW and at most
#      SHAPE_MAX_HIGH at or above SHAPE_HIGH; a number symmetric about d_k (d_k plus noise) is at or above d_k half
#      the time, and Gaussian noise small enough never to go negative is rarely below 0.1; a negative result fails.
# False-fail rate, from these parameters in tests/test_exercises_ch02.py (test_2_4_false_fail_rate): A and B by
# truncated Chernoff bounds on the mean of the squared dot products and on their mean (every call, union bound),
# D by binomial tails under each of the three right estimators; C and the identical-results test cannot fail a
# right answer. Per pass below 1.9e-7 (A 5.9e-9, B 5.3e-8, D 1.3e-7), both passes of the check together below
# 3.8e-7 (< 1e-6).
# Power (test_2_4_power): an answer that draws one q against n_samples keys passes B with probability at most
# 5.3e-8 per pass (each call lands within 25% of 1 with probability 0.123); d_k plus Gaussian noise of any spread,
# scaled by n_samples or not, passes D with probability below 1e-18 per pass (uniform noise symmetric about d_k:
# 1.6e-6 at worst); a fixed seed, a cache or a formula returns the same number on every call and always fails B;
# an answer that ignores n_samples returns the same number for 2000 and 8000 pairs under one seed and always fails
# C (or, drawing its own unseeded numbers, stays within 10% of 1 for n_samples=2 and fails D); the catalogue's
# other wrong answers (the standard deviation, the mean, uniform entries, k = q, a scale, sizes swapped) are 50% or
# more away from d_k, tens of standard deviations, and fail A on every draw.
VARIANCE_DIMS, VARIANCE_N, VARIANCE_RTOL = (64, 16, 256), 10_000, 0.10
SPREAD_D, SPREAD_CALLS, SPREAD_RTOL = 1, 8, 0.25
SHAPE_CALLS, SHAPE_N, SHAPE_LOW, SHAPE_HIGH = 200, 2, 0.1, 1.0
SHAPE_MIN_LOW, SHAPE_MAX_HIGH = 26, 86
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


def _check_small_samples(dot_product_variance) -> None:
    """D: the results for n_samples=2 must have the distribution of the variance of 2 dot products (see above)."""
    values = [_measure(dot_product_variance, 1, SHAPE_N, 100 + i) for i in range(SHAPE_CALLS)]
    negative = [v for v in values if not v >= -1e-9]  # a rounding error of E[x^2] - E[x]^2 aside; NaN too
    if negative:
        raise Wrong(_("with n_samples=2, dot_product_variance(1) returned {value:.4g}", value=negative[0]),
                    _("a variance is an average of squares, never negative: return the variance of the n_samples "
                      "dot products you drew"))
    low = sum(v < SHAPE_LOW for v in values)
    high = sum(v >= SHAPE_HIGH for v in values)
    if low >= SHAPE_MIN_LOW and high <= SHAPE_MAX_HIGH:
        return
    if all(abs(v - 1) <= 0.1 for v in values):
        raise Wrong(_("with n_samples=2, all {calls} results of dot_product_variance(1) lay within 10% of 1",
                      calls=SHAPE_CALLS),
                    _("the variance of only 2 dot products varies a lot from call to call, and is often close to 0: "
                      "draw exactly n_samples pairs, and return the variance you measure on them"))
    raise Wrong(_("with n_samples=2, {calls} calls of dot_product_variance(1) gave {low} results below 0.1 and {high} "
                  "at or above 1; the variance of 2 dot products gives at least {min_low} below 0.1 and at most "
                  "{max_high} at or above 1", calls=SHAPE_CALLS, low=low, high=high, min_low=SHAPE_MIN_LOW,
                  max_high=SHAPE_MAX_HIGH),
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
