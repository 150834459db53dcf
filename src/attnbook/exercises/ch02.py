"""Checkers for chapter 2, scaled dot-product attention."""
from __future__ import annotations

import math
import numbers

import torch
from torch import Tensor

from ..attention import scaled_dot_product_attention
from .compare import (as_value, expect_items, expect_tensor, expect_tuple, expect_value,
                      keyed_hint, randn, record_items, try_mistake, wrong_values)
from .guard import ATTENTION_SHORTCUTS, call
from .hints import describe
from .registry import exercise, Wrong
from ..i18n import N_, _

# ---------------------------------------------------------------------------------------------------------
# 2.1 attention by hand
# ---------------------------------------------------------------------------------------------------------

_Q = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
_K = torch.tensor([[1.0, 0.0], [0.5, 0.5]], dtype=torch.float64)
_V = torch.tensor([[2.0, 0.0], [1.0, 1.0]], dtype=torch.float64)


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
            _("these are the attention weights softmax(Q K^T / sqrt(2)); multiply them by V to get the output"):
                weights,
            _("your matrix is transposed: row i must be the output for query i"): output.T,
            _("you multiplied V by the scaled scores without a softmax: turn each row of scores into weights "
              "that are positive and sum to 1 first"): scores / math.sqrt(2) @ _V,
        },
        hint=_("work one query (row) at a time: its two scores, divided by sqrt(2), a softmax across the row, "
               "then the weighted sum of the rows of V. Each output row is w1 [2, 0] + w2 [1, 1] with "
               "w1 + w2 = 1, so its first entry lies between 1 and 2 and its second between 0 and 1"),
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


def _mask_error_hint(mask: Tensor | None):
    def explain(message: str) -> str | None:
        if mask is not None and "must match the size of tensor" in message:
            return (_("the mask of shape {tuple_mask_shape} already broadcasts against the scores (..., L, S): "
                      "its last dimensions line up with theirs, so use it as it is, without adding dimensions to "
                      "it", tuple_mask_shape=tuple(mask.shape)))
        return None
    return explain


ATTENTION_FORBIDDEN = [
    (name, N_("write the four steps yourself with tensor operations: the scores, the scale, the mask and a softmax "
              "over the keys, then the weighted sum of the values"))
    for name in ATTENTION_SHORTCUTS
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
                       explain=_mask_error_hint(mask))
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
        if first is None and found is not None:
            first = (*found, desc, refs[found[1]])
    if first is None:
        return _("output and weights match scaled_dot_product_attention on {len_cases} inputs, with and without "
                 "masks", len_cases=len(cases))
    run, i, desc, ref = first
    rule = (_("weights = softmax(q k^T / sqrt(d_k)) over the keys (dim=-1), with blocked keys (mask False) at 0 and a "
              "query that may attend to no key at 0 everywhere") if i == 1
            else _("output = weights @ v: for each query, the sum of the value rows, each multiplied by its weight"))
    raise wrong_values(what[i], desc, runs[i][run][0], ref, keyed_hint(runs[i], run, _scale_texts()), rule,
                        nan_rule=rule)


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


@exercise("2.3", "A padding mask from sequence lengths", section="Masking: keep attention off the padding",
          references=("attnbook.masks.padding_mask",))
def check_padding_mask(padding_mask) -> str:
    """padding_mask(lengths, max_len) -> bool (batch, max_len), True at the first lengths[b] positions."""
    cases = [
        ([3, 1, 4], 4, _("lengths [3, 1, 4] and max_len=4 (the last sequence fills every position)")),
        ([0, 2], 3, _("lengths [0, 2] and max_len=3 (an empty sequence)")),
        ([2], 5, _("lengths [2] and max_len=5 (a batch of one)")),
        ([1, 2, 3, 4, 5], 7, _("lengths [1, 2, 3, 4, 5] and max_len=7 (every sequence is padded)")),
        ([4, 4], 4, _("lengths [4, 4] and max_len=4 (no padding at all)")),
        ([2, 0, 3], 3, _("int32 lengths [2, 0, 3] and max_len=3"), torch.int32),
    ]
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

# Tolerance. q.k = sum of d_k products q_i k_i, each with mean 0, variance 1 and fourth moment
# E[q_i^4] E[k_i^4] = 9, so E[(q.k)^4] = 3 d_k^2 + 6 d_k. The sample variance of N draws then has standard
# deviation sqrt((E[(q.k)^4] - d_k^2) / N) = d_k sqrt((2 + 6 / d_k) / N): relative 1.5% at d_k = 16 and 1.4% at
# 64 and 256 with N = 10,000. A 10% tolerance is more than 6.5 standard deviations, so a right answer fails
# with probability below 1e-9, whatever seed it uses.
_VARIANCE_RTOL = 0.10
_HINT_RTOL = 0.10  # how close an answer must be to a known mistake's value to get that mistake's hint


@exercise("2.4", "The variance of a dot product", section="Dot products grow with d_k")
def check_dot_product_variance(dot_product_variance) -> str:
    """dot_product_variance(d_k, n_samples=10_000) must return a Python float within 10% of d_k for several d_k."""
    dims = (64, 16, 256)
    values = []
    for d_k in dims:  # every d_k first: a mistake is named only if it explains all three results
        on = f"d_k={d_k}"
        got = call(dot_product_variance, d_k, n_samples=10_000, what="dot_product_variance", on=on)
        values.append(_as_number(got, on))
    for d_k, value in zip(dims, values):
        if math.isfinite(value) and abs(value - d_k) <= _VARIANCE_RTOL * d_k:
            continue
        raise Wrong(_("dot_product_variance returned {value:.4g} for d_k={d_k}, expected about {d_k} (within "
                      "{_VARIANCE_RTOL:.0%})",
                      value=value, d_k=d_k, _VARIANCE_RTOL=_VARIANCE_RTOL), _variance_hint(values, dims))
    if all(value == d_k for value, d_k in zip(values, dims)):
        raise Wrong(_("dot_product_variance returned exactly d_k every time; the exercise asks you to measure it"),
                    _("draw n_samples random vectors q and k of size d_k, compute their dot products and return "
                      "the variance of those numbers"))
    # The generators are seeded identically around each call, so an answer that uses n_samples gives
    # different numbers for different n_samples, and one that ignores it gives the same number twice.
    few, many = (_as_number(call(dot_product_variance, 64, n_samples=n, what="dot_product_variance",
                                 on=f"d_k=64, n_samples={n}"), f"d_k=64, n_samples={n}") for n in (2_000, 8_000))
    if few == many:
        raise Wrong(_("dot_product_variance returned exactly the same number for n_samples=2000 and n_samples=8000 "
                      "(with the random generators seeded the same way)"),
                    _("use the n_samples argument: draw n_samples pairs of vectors, not a fixed number of them"))
    _check_small_samples_spread(dot_product_variance)
    return _("the measured variance of q.k is within {_VARIANCE_RTOL:.0%} of d_k for d_k = ",
             _VARIANCE_RTOL=_VARIANCE_RTOL) + ", ".join(map(str, dims))


# With n_samples=8 and d_k=16 the measured variance has a relative standard deviation of
# sqrt((2 + 6/16) / 8) = 0.54 (see the tolerance comment above). Over 32 calls, an answer that really draws 8
# pairs shows a relative spread below 0.3 with probability about 1e-5 (chi-square with 31 degrees of freedom
# below 31 (0.3/0.54)^2 = 9.4). An answer that ignores n_samples and draws thousands of pairs shows a spread of
# a few percent. Each call gets its own seed, so an answer using the global generators varies from call to
# call; an answer with its own fixed seed returns one number every time and is judged by the test above instead.
_SPREAD_CALLS, _SPREAD_N, _SPREAD_MIN = 32, 8, 0.3


def _check_small_samples_spread(dot_product_variance) -> None:
    """Fail an answer whose results barely vary with n_samples=8: it draws far more pairs than it is told to."""
    on = f"d_k=16, n_samples={_SPREAD_N}"
    values = [_as_number(call(dot_product_variance, 16, n_samples=_SPREAD_N, what="dot_product_variance", on=on,
                              seed=1000 + i), on) for i in range(_SPREAD_CALLS)]
    if len(set(values)) == 1 or not all(math.isfinite(v) for v in values):
        return
    mean = sum(values) / len(values)
    spread = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) / abs(mean)
    if spread < _SPREAD_MIN:
        raise Wrong(_("with n_samples={_SPREAD_N}, {_SPREAD_CALLS} calls of dot_product_variance(16) gave "
                      "results that vary by only {spread:.0%}; from {_SPREAD_N} pairs they should vary by about "
                      "50%", _SPREAD_N=_SPREAD_N, _SPREAD_CALLS=_SPREAD_CALLS, spread=spread),
                    _("use the n_samples argument: draw n_samples pairs of vectors, not a fixed number of them"))


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
