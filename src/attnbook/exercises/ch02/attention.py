"""Checker for exercise 2.2, scaled dot-product attention with a mask."""
from __future__ import annotations

import math
import re

import torch
from torch import Tensor

from ...attention import scaled_dot_product_attention
from ..compare import close_to, expect_tuple, randn
from ..forbid import ATTENTION_SHORTCUTS
from ..guard import call
from ..hints import FLOAT32_ARITHMETIC, FLOAT64_TOL, tolerance_for
from ..registry import exercise, Wrong
from ..runs import collect, expect_items, loose, try_mistake, verdict
from ...i18n import N_, _


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


_EMPTY_ROW = N_("its weights and output must be 0: after the softmax, set the weights of every query whose mask row "
                "has no True to 0")
_SCALE_SIZE = N_("d_k is the size of the last dimension of q (and k), q.size(-1); you scaled by the square root of "
                 "{what}")
_SCALE_TEXTS = {  # what was scaled by, shown in _SCALE_SIZE -> that size
    N_("q.size(-2), the number of queries"): lambda q, k, v: q.size(-2),
    N_("k.size(-2), the number of keys"): lambda q, k, v: k.size(-2),
    N_("v.size(-1), d_v, the size of the values"): lambda q, k, v: v.size(-1),
    N_("the size of dimension 0 (q.size(0) or q.shape[0])"): lambda q, k, v: q.size(0),
}


def _variants(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> dict:
    """The attention weights that common mistakes produce on this input, keyed by the hint for each ([] where the
    mistake raises). Every key is present on every input: on an input where a mistake makes no difference (a
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
        **{_(_SCALE_SIZE, what=_(what)): torch.softmax(masked(raw / math.sqrt(size(q, k, v))), dim=-1)
           for what, size in _SCALE_TEXTS.items()},
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

    def forms(w):
        if not isinstance(w, Tensor) or empty is None:
            return w
        fixed = w.masked_fill(empty, 0.0)
        return [w, w.nan_to_num(0.0), fixed, fixed.nan_to_num(0.0)]

    return {hint: forms(w) for hint, w in out.items()}


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
    what = (_("the weights tensor (the second item you return)"), _("the output tensor (the first item you return)"))

    def one(case, runs):
        desc, (q, k, v), mask = case
        args = (q, k, v) if mask is None else (q, k, v, mask)
        ref_out, ref_w = scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=mask)
        out_shape, w_shape = tuple(ref_out.shape), tuple(ref_w.shape)
        got = call(attention, *args, what="attention", on=desc, forbid=ATTENTION_FORBIDDEN,
                   explain=_mask_error_hint(mask, q))
        if isinstance(got, Tensor):
            shape = tuple(got.shape)
            hint = (_("you returned only the output; return both: `return output, weights`") if shape == out_shape
                    else _("you returned only the weights; return both: `return output, weights`")
                    if shape == w_shape else _("return a tuple: `return output, weights`"))
            raise Wrong(_("attention returned a single tensor of shape {shape} on {desc}, expected a tuple "
                          "(output, weights)", shape=shape, desc=desc), hint)
        out, weights = expect_tuple(got, ("output", "weights"), "attention", desc)
        if (isinstance(out, Tensor) and isinstance(weights, Tensor) and out_shape != w_shape
                and tuple(out.shape) == w_shape and tuple(weights.shape) == out_shape):
            raise Wrong(_("attention returned tensors of shapes {tuple_out_shape} and {tuple_weights_shape} "
                          "on {desc}, expected output {out_shape} then weights {w_shape}",
                          tuple_out_shape=tuple(out.shape), tuple_weights_shape=tuple(weights.shape),
                          desc=desc, out_shape=out_shape, w_shape=w_shape),
                        _("you swapped them: return the output first, then the weights (`return output, weights`)"))
        w_mistakes = {**_variants(q, k, v, mask),
                      _("you returned the output where the weights belong: `return output, weights`"): ref_out}
        scores = q.double() @ k.double().transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., L, S)
        nan_rows = ref_w if mask is None else torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
        o_mistakes = {  # the outputs that common mistakes produce when the weights are right
            _("your output has NaN for a query that may attend to no key although its weights are 0: compute the "
              "output from the weights after their NaN rows are set to 0, so that its output is 0 too"):
                nan_rows @ v.double(),
            _("you multiplied the weights by k; the output is the weighted sum of the values, weights @ v"):
                try_mistake(lambda: ref_w @ k.double()),
            _("you returned the weights where the output belongs: `return output, weights`"): ref_w}
        # Mistakes are matched to float32's tolerance, except on a float64 input where the result is that close to
        # the right one: whatever mistake fits it there also gives the right result, so it does not explain the error
        mistakes = [m if q.dtype == torch.float64 and close_to(g, ref) else loose(m)
                    for g, ref, m in ((weights, ref_w, w_mistakes), (out, ref_out, o_mistakes))]
        return expect_items((weights, out), (ref_w, ref_out), mistakes, runs, what=what, on=desc, dtype=q.dtype,
                            input_name="q", tolerance=tolerance_for(q.dtype))

    rules = (_("weights = softmax(q k^T / sqrt(d_k)) over the keys (dim=-1), with blocked keys (mask False) at 0 and "
               "a query that may attend to no key at 0 everywhere"),
             _("output = weights @ v: for each query, the sum of the value rows, each multiplied by its weight"))
    # Right to float32's tolerance on float64 inputs: an epsilon in the softmax's denominator (on every input), or
    # float32 rounding; another small error gets the first wrong entry and the rule.
    verdict(collect(cases, one), what=what, rule=rules, nan_hint=rules,
            explain=(lambda first, runs: _(_EPSILON) if _short_rows(runs, cases) else _float32_hint(first),
                     lambda first, runs: _float32_hint(first)))
    return _("output and weights match scaled_dot_product_attention on {len_cases} inputs, with and without "
             "masks", len_cases=len(cases))


def _float32_hint(first) -> str | None:
    """FLOAT32_ARITHMETIC for a float64 result right to float32's tolerance whose error looks like float32 rounding."""
    near = first.ref.dtype == torch.float64 and close_to(first.got, first.ref)
    return _(FLOAT32_ARITHMETIC) if near and _float32_rounding(first.got, first.ref) else None


_EPSILON = N_("each row of your weights sums to slightly less than 1, all its weights smaller than the softmax's by "
               "the same factor, as when a small number (an epsilon such as 1e-9) is added to the sum in the "
               "softmax's denominator: divide by the sum itself, and give a query that may attend to no key its "
               "weights of 0 in another way")


def _short_rows(runs: list, cases: list) -> bool:
    """True if on every input the answer's weights (the Runs of `runs`, of `cases`) are the right weights with each
    row multiplied by a factor of at most 1 (the row's sum), and on some input without a mask a factor is below 1 by
    more than the tolerance of the input's dtype: what a small number added to the softmax's denominator gives. (A
    mask applied after the softmax also multiplies rows by factors below 1, but only rows with a blocked key.)"""
    short = False
    for (_on, got, ref, *_rest), (_desc, _qkv, mask) in zip(runs, cases):
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
        short = short or (mask is None and bool((deficit > atol + rtol).any()))
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


