"""Checker for exercise 2.2, scaled dot-product attention with a mask."""
from __future__ import annotations

import math
import re

import torch
from torch import Tensor

from ...attention import scaled_dot_product_attention
from ..compare import (close_to, expect_items, expect_tuple, keyed_hint, randn, record_items, try_mistake, wrong_values)
from ..forbid import ATTENTION_SHORTCUTS
from ..guard import call
from ..hints import FLOAT32_ARITHMETIC, FLOAT64_TOL, tolerance_for
from ..registry import exercise, Wrong
from ...i18n import N_, _


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


@exercise("2.2", "Scaled dot-product attention with a mask", answer_name="attention",
          section="The formula, one step at a time",
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


