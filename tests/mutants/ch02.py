"""Mutant catalogue for chapter 2 (scaled attention): exercises 2.1, 2.2, 2.3 and 2.4."""
from __future__ import annotations

import math
import operator
import random
import statistics

import numpy as np
import torch

import attnbook
import attnbook.attention
import attnbook.masks
from mutants import RIGHT, WRONG, fresh_import, function_copy, right, table, wrong

# ---------------------------------------------------------------------------------------------------------------
# 2.1 attention by hand: softmax(Q K^T / sqrt(2)) V for the 2 x 2 example
# ---------------------------------------------------------------------------------------------------------------
# Q = [[2, 1], [0, 1]], K = [[1, -1], [0.5, 2]], V = [[3, 0], [-1, 2]]; right: [[-0.2177, 1.6089], [-0.5718, 1.7859]]

RIGHT_2_1 = [[-0.2177, 1.6089], [-0.5718, 1.7859]]
ROUNDED_2_1 = [[-0.218, 1.609], [-0.572, 1.786]]

table("2.1", [
    ("float32 tensor, 4 decimals", RIGHT, torch.tensor(RIGHT_2_1)),
    ("nested list of floats, 4 decimals", RIGHT, RIGHT_2_1),
    ("float64 tensor", RIGHT, torch.tensor(RIGHT_2_1, dtype=torch.float64)),
    ("nested list rounded to 3 decimals (within 1e-3)", RIGHT, ROUNDED_2_1),
    ("nested list built by slicing (plain list)", RIGHT, RIGHT_2_1[0:2]),
    ("a NumPy array", RIGHT, np.array(RIGHT_2_1)),
    ("a list of row tensors", RIGHT, [torch.tensor(row) for row in RIGHT_2_1]),
    ("a tuple of tuples", RIGHT, ((-0.2177, 1.6089), (-0.5718, 1.7859))),
    ("a tuple of tuples rounded to 3 decimals", RIGHT, ((-0.218, 1.609), (-0.572, 1.786))),
    ("a NumPy array rounded to 3 decimals", RIGHT, np.array(ROUNDED_2_1)),
    ("forgot the scale: softmax(Q K^T) V", "left out the scale", torch.tensor([[-0.5232, 1.7616], [-0.8103, 1.9051]])),
    ("divided by d_k = 2 instead of sqrt(2)", "divided the scores by d_k = 2; divide by sqrt",
     torch.tensor([[0.0758, 1.4621], [-0.2703, 1.6351]])),
    ("softmax over the queries (down the columns, dim=0)", "normalised each column (over the queries)",
     torch.tensor([[1.7435, 1.3395], [0.2565, 0.6605]])),
    ("scores Q K instead of Q K^T", "your scores are not Q K^T", torch.tensor([[2.4167, 0.2916], [0.0287, 1.4856]])),
    ("scores K Q^T instead of Q K^T", "K Q^T", torch.tensor([[2.2177, 0.3911], [1.6790, 0.6605]])),
    ("wrote the output transposed (one column per query)", "transposed",
     torch.tensor([[-0.2177, -0.5718], [1.6089, 1.7859]])),
    ("multiplied by V^T instead of V", WRONG, torch.tensor([[0.5867, 1.4133], [0.3211, 1.6789]])),
    ("handed in the weights, not the output", "multiply them by V", torch.tensor([[0.1956, 0.8044], [0.1070, 0.8930]])),
    ("scaled scores times V, no softmax", "without a softmax", torch.tensor([[0.0, 4.2426], [-3.5355, 2.8284]])),
    ("a flat list of 4 numbers", "shape", [-0.2177, 1.6089, -0.5718, 1.7859]),
    ("rounded to one decimal", "rounded too early", [[-0.2, 1.6], [-0.6, 1.8]]),
    ("rounded to one decimal, as a NumPy array", "rounded too early", np.array([[-0.2, 1.6], [-0.6, 1.8]])),
    ("rounded to two decimals in the first column and one in the second", "rounded too early",
     [[-0.22, 1.6], [-0.57, 1.8]]),
    ("the first entry rounded to one decimal, the others to two", "rounded too early", [[-0.2, 1.61], [-0.57, 1.79]]),
    ("rounded to two decimals", "rounded too early", [[-0.22, 1.61], [-0.57, 1.79]]),
    ("only the first query's row", "shape", torch.tensor([[-0.2177, 1.6089]])),
    ("a 2 x 3 matrix of whole numbers", "shape (2, 3)", [[1, 2, 3], [4, 5, 6]]),
    ("a single number: only the top-left entry", "single number", -0.2177),
    ("a string that looks like the list", WRONG, "[[-0.2177, 1.6089], [-0.5718, 1.7859]]"),
    ("one entry off by 1%", WRONG, torch.tensor(RIGHT_2_1) * torch.tensor([[1.0, 1.0], [1.0, 1.01]])),
])


# ---------------------------------------------------------------------------------------------------------------
# 2.2 attention(q, k, v, mask=None) -> (output, weights)
# ---------------------------------------------------------------------------------------------------------------

SCALES = {  # what attn(scale=...) divides the scores by
    "sqrt(d_k)": lambda q, k, v: math.sqrt(q.size(-1)),
    "d_k": lambda q, k, v: q.size(-1),
    "sqrt(d_v)": lambda q, k, v: math.sqrt(v.size(-1)),
    "sqrt(L)": lambda q, k, v: math.sqrt(q.size(-2)),
    "sqrt(S)": lambda q, k, v: math.sqrt(k.size(-2)),
    "sqrt(q.shape[0])": lambda q, k, v: math.sqrt(q.shape[0]),
    "2": lambda q, k, v: 2.0,
    "float32 tensor": lambda q, k, v: torch.tensor(float(q.size(-1))).sqrt(),
}


def hand_softmax(eps=0.0, stable=False, floor=0.0):
    """A softmax over the keys written by hand, exp(s) / (sum + eps) (0 for a blocked key); `stable`: the row
    maximum subtracted first; `floor`: added to the exponential of every allowed key."""
    def softmax(scores, dim=-1):
        if stable:
            scores = scores - scores.amax(dim=dim, keepdim=True)
        e = torch.exp(scores).nan_to_num(0.0) + torch.isfinite(scores) * floor
        return e / (e.sum(dim=dim, keepdim=True) + eps)
    return softmax


def attn(scale="sqrt(d_k)", kt="transpose(-2, -1)", product="@", swap_qk=False, scale_q=False, q_in_place=False,
         scores_dtype=None, mask_use="masked_fill", fill=float("-inf"), softmax=torch.softmax, dim=-1,
         fix="nan_to_num", values="v", output_by=None, dtype=None, back=True, returns="(output, weights)"):
    """2.2's learner template: attention with the named mistakes switched on (the defaults: a right answer). scale: a
    key of SCALES, or None (no scale); kt: how k is transposed ("transpose(-2, -1)", "mT", "T", "t()",
    "transpose(0, 1)", "swapaxes(0, 1)"); product: "@", "matmul", "bmm" or "einsum" (for both products); swap_qk:
    scores k q^T; scale_q: q divided before the product; q_in_place: q /= scale; scores_dtype: the product computed
    in that dtype and cast back; mask_use: "masked_fill", "ignored", "inverted" (fills where True), "after softmax"
    (weights * mask), "flipped in place", "as padding" (mask[:, None, None, :] when 2-D), "additive", "indexed"
    (scores[~mask] = fill), "if mask:", "always" (masked_fill(~mask) even for None), "logical_not always", "~ first"
    (~mask before the None test), "default all True" (a mask of ones when none is given); fill: the blocked scores'
    value; softmax: the softmax used (scores, dim); fix: the rows with no allowed key, "nan_to_num", None, "where",
    "any" (zeroed by the mask), "output only", "after output"; values: "v" or "k"; output_by:
    (q, k, v, mask, weights) -> the output instead; dtype: computed in that dtype (cast back if `back`); returns:
    "(output, weights)", "(weights, output)", "output", "weights", "[output, weights]" or "nothing"."""
    mm = {"matmul": torch.matmul, "bmm": torch.bmm}.get(product, operator.matmul)  # "@" (and "einsum": unused)

    def attention(q, k, v, mask=None):
        dtype_in = q.dtype
        if dtype is not None:
            q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
        if mask_use == "~ first":
            blocked = ~mask
            mask = None if mask is None else ~blocked
        divisor = 1.0 if scale is None else SCALES[scale](q, k, v)
        if scale_q:
            q = q / divisor
        if q_in_place:
            q /= divisor
        if product == "einsum":
            scores = torch.einsum("...ld,...sd->...ls", q, k)
        elif swap_qk:
            scores = mm(k, q.transpose(-2, -1))
        else:
            k_t = {"transpose(-2, -1)": lambda: k.transpose(-2, -1), "mT": lambda: k.mT, "T": lambda: k.T,
                   "t()": lambda: k.t(), "transpose(0, 1)": lambda: k.transpose(0, 1),
                   "swapaxes(0, 1)": lambda: torch.swapaxes(k, 0, 1)}[kt]()
            scores = mm(q.to(scores_dtype), k_t.to(scores_dtype)).to(q.dtype) if scores_dtype else mm(q, k_t)
        if not (scale_q or q_in_place):
            scores = scores / divisor
        if mask_use == "default all True" and mask is None:
            mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool)
        if mask_use == "if mask:":
            if mask:
                scores = scores.masked_fill(~mask, fill)
        elif mask_use == "always":
            scores = scores.masked_fill(~mask, fill)
        elif mask_use == "logical_not always":
            scores = scores.masked_fill(torch.logical_not(mask), fill)
        elif mask is not None and mask_use not in ("ignored", "after softmax"):
            if mask_use == "flipped in place":
                mask.logical_not_()
            blocked = mask if mask_use in ("inverted", "flipped in place") else ~mask
            if mask_use == "as padding" and mask.dim() == 2:
                blocked = ~mask[:, None, None, :]
            if mask_use == "additive":
                scores = scores + torch.zeros_like(scores).masked_fill(blocked, fill)
            elif mask_use == "indexed":
                scores[blocked] = fill
            else:
                scores = scores.masked_fill(blocked, fill)
        weights = softmax(scores, dim=dim)
        if mask_use == "after softmax" and mask is not None:
            weights = weights * mask
        if fix == "nan_to_num":
            weights = weights.nan_to_num(0.0)
        elif fix == "where":
            weights = torch.where(torch.isnan(weights), torch.zeros_like(weights), weights)
        elif fix == "any" and mask is not None:
            weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
        if product == "einsum":
            out = torch.einsum("...ls,...sv->...lv", weights, v)
        else:
            out = mm(weights, v if values == "v" else k)
        if output_by is not None:
            out = output_by(q, k, v, mask, weights)
        if fix == "output only":
            out = out.nan_to_num(0.0)
        elif fix == "after output":
            weights = weights.nan_to_num(0.0)
        if dtype is not None and back:
            out, weights = out.to(dtype_in), weights.to(dtype_in)
        if returns != "nothing":
            return {"(output, weights)": (out, weights), "(weights, output)": (weights, out), "output": out,
                    "weights": weights, "[output, weights]": [out, weights]}[returns]
    return attention


@wrong("2.2", hint="the package's own solution")
def attention_wrapper(q, k, v, mask=None):
    """a def wrapper that calls attnbook.scaled_dot_product_attention"""
    from attnbook.attention import scaled_dot_product_attention as sdpa
    out, w = sdpa(q, k, v, attn_mask=mask)
    return out, w


@wrong("2.2", hint="the task asks you to write this without")
def attention_torch_sdpa(q, k, v, mask=None):
    """torch's F.scaled_dot_product_attention, with the identity as values to get the weights"""
    F = torch.nn.functional
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    eye = torch.eye(k.shape[-2], dtype=q.dtype).expand(*k.shape[:-2], k.shape[-2], k.shape[-2])
    weights = F.scaled_dot_product_attention(q, k, eye, attn_mask=mask)
    return out, weights


@wrong("2.2", hint="float16")
def attention_half(q, k, v, mask=None):
    """half precision to save memory"""
    q, k, v = q.half(), k.half(), v.half()
    scores = (q @ k.transpose(-2, -1)).float() / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0).half()
    return weights @ v, weights


_sdpa = attnbook.scaled_dot_product_attention

table("2.2", [
    ("einsum for both products, NaN rows replaced by zeros", RIGHT, attn(product="einsum")),
    ("attnbook.scaled_dot_product_attention handed in as it is", "package's own", _sdpa),
    ("a lambda around attnbook.scaled_dot_product_attention", "package's own",
     lambda q, k, v, mask=None: attnbook.scaled_dot_product_attention(q, k, v, attn_mask=mask)),
    ("a types.FunctionType copy of attnbook.scaled_dot_product_attention", "package's own",
     function_copy(_sdpa, "attention")),
    ("scaled_dot_product_attention from a second, separate import of attention.py", "package's own",
     fresh_import(attnbook.attention, "attention_ch02").scaled_dot_product_attention),
    ("writes the weights by hand but takes the output from torch's scaled_dot_product_attention", "without",
     attn(output_by=lambda q, k, v, mask, w: torch.nn.functional.scaled_dot_product_attention(
         q, k, v, attn_mask=mask).nan_to_num(0.0))),
    ("weights by hand, output from torch._C._nn.scaled_dot_product_attention (the function behind F's)",
     "the task asks you to write this without",
     attn(output_by=lambda q, k, v, mask, w: torch._C._nn.scaled_dot_product_attention(
         q, k, v, attn_mask=mask).nan_to_num(0.0))),
    ("weights by hand, output from the package's tiled_attention when there is no mask", "the package's own solution",
     attn(output_by=lambda q, k, v, mask, w: attnbook.attention.tiled_attention(q, k, v) if mask is None else w @ v)),
    # the scale
    ("forgets to divide by sqrt(d_k)", "left out the scale", attn(scale=None)),
    ("divides by d_k instead of sqrt(d_k)", "divided the scores by d_k; divide by sqrt", attn(scale="d_k")),
    ("scales by sqrt(d_v), the size of the values, instead of sqrt(d_k)", "v.size(-1)", attn(scale="sqrt(d_v)")),
    ("scales by sqrt(q.size(-2)), the number of queries, instead of sqrt(d_k)", "the number of queries",
     attn(scale="sqrt(L)")),
    ("scales by sqrt(k.size(-2)), the number of keys", "k.size(-2), the number of keys", attn(scale="sqrt(S)")),
    ("scales by sqrt(q.shape[0]) (the batch size for batched inputs)",
     "q.size(-1); you scaled by the square root of the size of dimension 0", attn(scale="sqrt(q.shape[0])")),
    ("divides by 2 = sqrt(4), the d_k of the first example, whatever d_k is", "the wrong values", attn(scale="2")),
    ("no scale on 4-D inputs only: the missing scale does not explain the 2-D and 3-D inputs", "at index",
     lambda q, k, v, mask=None: attn(scale=None if q.dim() == 4 else "sqrt(d_k)")(q, k, v, mask)),
    ("scales the queries in place (q /= sqrt(d_k)), which changes the caller's q", "in place", attn(q_in_place=True)),
    ("scores with q divided by sqrt(d_k) first, the product in q's dtype", RIGHT, attn(scale_q=True, kt="mT")),
    # the softmax
    ("softmax over the queries (dim=-2) instead of the keys", "normalises over the queries (dim=-2)", attn(dim=-2)),
    ("softmax(dim=1), which is the key axis only for 2-D inputs", "normalises over dim=1", attn(dim=1)),
    ("softmax(dim=2), out of range for 2-D inputs", "dim=-1 is always the last dimension", attn(dim=2)),
    ("a hand-written softmax e / (e.sum() + 1e-9), in the dtype of the inputs", "slightly less than 1",
     attn(softmax=hand_softmax(eps=1e-9))),
    ("a stable hand-written softmax (the row maximum subtracted) with 1e-6 added to the denominator",
     "slightly less than 1", attn(softmax=hand_softmax(eps=1e-6, stable=True))),
    ("a hand-written softmax with 1e-3 added to the denominator (wrong in float32 too)", "slightly less than 1",
     attn(softmax=hand_softmax(eps=1e-3))),
    ("a hand-written softmax with 1e-10 added to the denominator", "slightly less than 1",
     attn(softmax=hand_softmax(eps=1e-10))),
    ("a stable hand-written softmax with 1e-2 added to the denominator", "slightly less than 1",
     attn(softmax=hand_softmax(eps=1e-2, stable=True))),
    ("a hand-written softmax with 1e-6 added to the denominator and 1e-6 / 9 to every allowed exponential (the rows "
     "sum to 1, the weights move toward uniform)", "at index", attn(softmax=hand_softmax(eps=1e-6, floor=1e-6 / 9))),
    ("a stable hand-written softmax that divides by the row sum itself, 0 / 0 replaced by 0", RIGHT,
     attn(softmax=hand_softmax(stable=True))),
    ("uses attnbook.softmax (not an attention function), which already gives zeros for empty rows", RIGHT,
     attn(kt="mT", softmax=attnbook.softmax, fix=None)),
    # the mask and the rows with no allowed key
    ("reads True as 'blocked' (masked_fill(mask, -inf))", "mask is inverted", attn(mask_use="inverted")),
    ("accepts mask but never uses it", "did not apply the mask", attn(mask_use="ignored", fix=None)),
    ("multiplies the weights by the mask after the softmax, without renormalising",
     "applied the mask after the softmax", attn(mask_use="after softmax", fix=None)),
    ("flips the caller's mask in place (mask.logical_not_()), then fills where it is True", "in place",
     attn(mask_use="flipped in place")),
    ("always indexes the mask as mask[:, None, None, :], as if it were a (batch, S) padding mask", "use it as it is",
     attn(mask_use="as padding")),
    ("tests `if mask:` instead of `if mask is not None:` (the truth value of a tensor of several booleans)",
     "if mask is not None", attn(mask_use="if mask:", fix=None)),
    ("inverts the mask before testing whether one was given (~None)", "mask is None", attn(mask_use="~ first")),
    ("masked_fill(~mask, ...) whether or not a mask was given", "mask is None", attn(mask_use="always")),
    ("torch.logical_not(mask) whether or not a mask was given", "mask is None", attn(mask_use="logical_not always")),
    ("a mask of all True when none is given, then one code path", RIGHT, attn(mask_use="default all True")),
    ("boolean indexing, scores[~mask] = -inf, which breaks once the mask must broadcast", "IndexError",
     attn(mask_use="indexed", fix=None)),
    ("masks with -inf but leaves fully masked rows as NaN", "a query that may attend to no key gets NaN weights",
     attn(fix=None)),
    ("zeroes the output of fully masked rows but leaves their weights NaN", "nan", attn(fix="output only")),
    ("computes the output before fixing the NaN rows of the weights", "output has NaN", attn(fix="after output")),
    ("fills blocked scores with -1e9: a fully masked row becomes a uniform average instead of zeros",
     "gets uniform weights", attn(fill=-1e9, fix=None)),
    ("an additive mask (0 / -inf) and torch.where for the empty rows", RIGHT,
     attn(product="matmul", scale_q=True, mask_use="additive", fix="where")),
    ("the chapter's version: masked_fill, softmax, then zero the rows with no allowed key", RIGHT, attn(fix="any")),
    # the products and the transpose
    ("k.T instead of k.transpose(-2, -1) (reverses all the axes of a batch)", "transpos", attn(kt="T")),
    ("torch.matmul(q, k.T) (.T reverses every axis of a batch)", "transpose(-2, -1)", attn(kt="T", product="matmul")),
    ("k.t(), which only takes 2-D matrices", "transpose(-2, -1)", attn(kt="t()")),
    ("k.transpose(0, 1), the transpose of a 2-D matrix, which swaps the batch and the keys of a batch",
     "transpose(-2, -1)", attn(kt="transpose(0, 1)")),
    ("torch.swapaxes(k, 0, 1)", "transpose(-2, -1)", attn(kt="swapaxes(0, 1)")),
    ("scores k q^T (keys by queries) instead of q k^T", "transpos", attn(swap_qk=True)),
    ("torch.bmm, which only works for 3-D inputs", "batch", attn(product="bmm")),
    ("weights @ k instead of weights @ v (caught where d_v = d_k)", "multiplied the weights by k", attn(values="k")),
    # dtypes
    ("casts everything to float32 (float64 inputs come back as float32)", "dtype",
     attn(dtype=torch.float32, back=False)),
    ("computes in float32 and casts both results back to q's dtype", "float32", attn(dtype=torch.float32)),
    ("float64 scores, but a float32 softmax", "float32",
     attn(softmax=lambda scores, dim: torch.softmax(scores.float(), dim=dim).to(scores.dtype))),
    ("computes in float64 and casts both results back to q's dtype", RIGHT, attn(dtype=torch.float64)),
    ("a hand-written softmax on scores computed in float32 and cast back to q's dtype", "float32 precision",
     attn(scores_dtype=torch.float32, softmax=hand_softmax())),
    ("a hand-written softmax on scores divided by sqrt(d_k) computed as a float32 tensor, torch.tensor(d_k).sqrt()",
     "float32 precision", attn(scale="float32 tensor", softmax=hand_softmax())),
    # what is returned
    ("returns (weights, output)", "you swapped them", attn(returns="(weights, output)")),
    ("returns only the output", "you returned only the output", attn(returns="output")),
    ("returns only the weights", "returned only the weights", attn(returns="weights")),
    ("returns a list [output, weights]", "tuple", attn(returns="[output, weights]")),
    ("ends with the expression `weights @ v, weights`, as a notebook cell would show it, but no return",
     "expected a tuple", attn(returns="nothing")),
])


@right("2.2")
def attention_manual_stable(q, k, v, mask=None, dropout_p=0.0):
    """a hand-written stable softmax over the allowed keys; harmless extra keyword"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    allowed = torch.ones_like(scores, dtype=torch.bool) if mask is None else mask.expand_as(scores)
    shift = scores.masked_fill(~allowed, float("-inf")).amax(dim=-1, keepdim=True)
    shift = torch.where(torch.isfinite(shift), shift, torch.zeros_like(shift))
    e = torch.exp(scores - shift) * allowed
    total = e.sum(dim=-1, keepdim=True)
    weights = torch.where(total > 0, e / total.clamp_min(torch.finfo(e.dtype).tiny), torch.zeros_like(e))
    return weights @ v, weights


# ---------------------------------------------------------------------------------------------------------------
# 2.3 padding_mask(lengths, max_len)
# ---------------------------------------------------------------------------------------------------------------


@right("2.3")
def padding_mask_loop(lengths, max_len):
    """a loop that sets the first lengths[b] entries of each row"""
    mask = torch.zeros(lengths.shape[0], max_len, dtype=torch.bool)
    for b in range(lengths.shape[0]):
        mask[b, : int(lengths[b])] = True
    return mask


@wrong("2.3", hint="the package's own solution")
def padding_mask_wrapper(lengths, max_len):
    """a def wrapper that calls attnbook.masks.padding_mask"""
    from attnbook import masks
    return masks.padding_mask(lengths, max_len)


@wrong("2.3", hint="is False at position 0, expected True")
def padding_mask_negative_slice(lengths, max_len):
    """a loop that blanks the last max_len - l positions with a negative slice (breaks when l == max_len)"""
    mask = torch.ones(len(lengths), max_len, dtype=torch.bool)
    for b, n in enumerate(lengths.tolist()):
        mask[b, -(max_len - n):] = False
    return mask


# the six inputs the check used to send: an answer that learned them from an earlier run
_KNOWN_2_3 = {((3, 1, 4), 4), ((0, 2), 3), ((2,), 5), ((1, 2, 3, 4, 5), 7), ((4, 4), 4), ((2, 0, 3), 3)}
_pm = attnbook.masks.padding_mask

table("2.3", [
    ("attnbook.masks.padding_mask handed in as it is", "package's own", _pm),
    ("a lambda around attnbook.padding_mask", "package's own",
     lambda lengths, max_len: attnbook.padding_mask(lengths, max_len)),
    ("a types.FunctionType copy of attnbook.masks.padding_mask", "package's own", function_copy(_pm, "padding_mask")),
    ("padding_mask from a second, separate import of masks.py", "package's own",
     fresh_import(attnbook.masks, "masks_ch02").padding_mask),
    ("<= instead of <: one padding position too many counts as real", "not p <= length",
     lambda lengths, max_len: torch.arange(max_len)[None, :] <= lengths[:, None]),
    ("positions counted from 1 and compared with <", "exactly lengths[b] True values",
     lambda lengths, max_len: torch.arange(1, max_len + 1)[None, :] < lengths[:, None]),
    ("returns 0/1 integers instead of booleans",
     "compare, don't cast: a comparison of the positions with the lengths already gives a bool",
     lambda lengths, max_len: (torch.arange(max_len)[None, :] < lengths[:, None]).long()),
    ("returns a float mask of 1.0 and 0.0",
     "compare, don't cast: a comparison of the positions with the lengths already gives a bool",
     lambda lengths, max_len: (torch.arange(max_len)[None, :] < lengths[:, None]).float()),
    ("True at the padding (the 'block' convention)", "mask is inverted",
     lambda lengths, max_len: torch.arange(max_len)[None, :] >= lengths[:, None]),
    ("(max_len, batch) instead of (batch, max_len)", "your mask is transposed",
     lambda lengths, max_len: torch.arange(max_len)[:, None] < lengths[None, :]),
    ("uses the longest length instead of max_len", "max_len columns",
     lambda lengths, max_len: torch.arange(int(lengths.max()) if lengths.numel() else 0)[None, :] < lengths[:, None]),
    ("counts from 0 by subtracting 1 from lengths in place, then compares with <=", "in place",
     lambda lengths, max_len: torch.arange(max_len)[None, :] <= lengths.sub_(1)[:, None]),
    ("clamps the caller's lengths in place to max_len - 1 (changes them only where a length equals max_len)",
     "in place", lambda lengths, max_len: torch.arange(max_len)[None, :] < lengths.clamp_(max=max_len - 1)[:, None]),
    ("picks row l - 1 of a lower-triangular matrix (a length of 0 picks the last row)",
     "is True at position 0, expected False",
     lambda lengths, max_len: torch.ones(max_len, max_len, dtype=torch.bool).tril()[lengths - 1]),
    ("returns a nested Python list of booleans", "tensor",
     lambda lengths, max_len: [[i < n for i in range(max_len)] for n in lengths.tolist()]),
    ("returns the attention shape (batch, 1, 1, max_len) directly", "shape",
     lambda lengths, max_len: (torch.arange(max_len)[None, :] < lengths[:, None])[:, None, None, :]),
    ("marks position 0 as a real token in every row", "(length 0) is True at position 0, expected False",
     lambda lengths, max_len: (torch.arange(max_len)[None, :] < lengths[:, None]) | (torch.arange(max_len) == 0)),
    ("hard-codes the example from the task text", "shape",
     lambda lengths, max_len: torch.tensor([[True, True, False], [False, False, False]])),
    ("compares the positions with the lengths without a new axis: (1, max_len) < (batch,) lines up wrongly",
     "x[:, None]", lambda lengths, max_len: torch.arange(max_len)[None, :] < lengths),
    ("one_hot of the lengths and a reversed cumsum (one_hot takes int64 lengths only)", "int32",
     lambda lengths, max_len: torch.nn.functional.one_hot(lengths, max_len + 1)[:, 1:].flip(1).cumsum(1).flip(1)
     .bool()),
    ("right on the six inputs the check used to send (a table learned from an earlier run), all True otherwise",
     WRONG, lambda lengths, max_len: torch.arange(max_len)[None, :] < lengths[:, None]
     if (tuple(lengths.tolist()), max_len) in _KNOWN_2_3 else torch.ones(lengths.shape[0], max_len, dtype=torch.bool)),
    ("computes the first row and repeats it for every sequence (right whenever all lengths are equal)", WRONG,
     lambda lengths, max_len: (torch.arange(max_len) < lengths[0]).expand(lengths.shape[0], max_len).clone()),
    ("a list comprehension turned into a bool tensor", RIGHT,
     lambda lengths, max_len: torch.tensor([[i < n for i in range(max_len)] for n in lengths.tolist()],
                                           dtype=torch.bool).reshape(len(lengths), max_len)),
    ("arange expanded to (batch, max_len) and compared with unsqueezed lengths; harmless extra kwarg", RIGHT,
     lambda lengths, max_len, device=None: torch.arange(max_len, device=device or lengths.device).expand(
         lengths.size(0), max_len) < lengths.unsqueeze(1)),
    ("a running count of ones compared with the lengths", RIGHT,
     lambda lengths, max_len: torch.ones(lengths.shape[0], max_len, dtype=torch.long).cumsum(dim=1)
     <= lengths[:, None]),
    ("marks the first padding position, cumsum, and keeps what comes before it", RIGHT,
     lambda lengths, max_len: torch.zeros(lengths.shape[0], max_len + 1, dtype=torch.long).scatter_(
         1, lengths[:, None].long(), 1).cumsum(dim=1)[:, :max_len] == 0),
    ("arange in the dtype of the lengths, compared after unsqueeze", RIGHT,
     lambda lengths, max_len: torch.arange(max_len, dtype=lengths.dtype).unsqueeze(0) < lengths.unsqueeze(1)),
    ("the comparison in NumPy, turned back into a bool tensor", RIGHT,
     lambda lengths, max_len: torch.from_numpy(np.arange(max_len)[None, :] < lengths.numpy()[:, None])),
])


# ---------------------------------------------------------------------------------------------------------------
# 2.4 dot_product_variance(d_k, n_samples=10_000) -> float
# ---------------------------------------------------------------------------------------------------------------


def var(pairs=lambda n: n, draw=torch.randn, same=False, swap=False, seed=None, generator=None, dtype=None,
        stat="var", unbiased=True, returns="item"):
    """2.4's learner template in torch: draw q and k, measure their dot products, with the named mistakes switched
    on (the defaults: a right answer). pairs: how many pairs for n_samples; draw: torch.randn or torch.rand; same:
    k = q; swap: d_k pairs of vectors of size n_samples; seed: torch.manual_seed(seed) first; generator: a function
    making the generator to draw from (None: the global one); dtype: of the draws; stat: what is measured, "var",
    "std", "mean", "products" (variance of the q_i k_i), "scaled" (of q.k / sqrt(d_k)), "times d_k", "formula"
    (E[x^2] - E[x]^2), "mean square", "squares / (n - 1)", "deviations / n_samples" (squared differences from the
    mean summed, divided by n_samples), "per coordinate" (the variances of the d_k coordinates of q * k summed) or
    "dots" (the dot products themselves); unbiased: of the variance; returns: "item", "tensor" or "round"."""
    def dot_product_variance(d_k, n_samples=10_000):
        if seed is not None:
            torch.manual_seed(seed)
        g = generator() if generator is not None else None
        n = pairs(n_samples)
        shape = (d_k, n) if swap else (n, d_k)
        q = draw(*shape, generator=g, dtype=dtype)
        k = q if same else draw(*shape, generator=g, dtype=dtype)
        dots = (q * k).sum(dim=-1)
        result = {
            "var": lambda: dots.var(unbiased=unbiased),
            "std": lambda: dots.std(),
            "mean": lambda: dots.mean(),
            "products": lambda: (q * k).var(),
            "scaled": lambda: (dots / math.sqrt(d_k)).var(),
            "times d_k": lambda: dots.var() * d_k,
            "formula": lambda: (dots ** 2).mean() - dots.mean() ** 2,
            "mean square": lambda: (dots ** 2).mean(),
            "squares / (n - 1)": lambda: (dots ** 2).sum() / (n_samples - 1),
            "deviations / n_samples": lambda: ((dots - dots.mean()) ** 2).sum() / n_samples,
            "per coordinate": lambda: (q * k).var(dim=0).sum(),
            "dots": lambda: dots,
        }[stat]()
        if returns == "tensor":
            return result
        return round(result.item()) if returns == "round" else result.item()
    return dot_product_variance


def np_var(rng=np.random.default_rng, pairs=lambda n: n, dtype=None, stat="var", ddof=0, returns=float):
    """2.4's learner template in NumPy, with the named mistakes switched on (the defaults: a right answer). rng: a
    function giving the generator to draw from, called on every call (np.random.default_rng: fresh entropy);
    pairs: how many pairs for n_samples; dtype: of the draws (None: float64); stat: "var", "mean square" or
    "per coordinate" (the per-coordinate variances summed); ddof: of the variance; returns: what the result is
    handed back as."""
    def dot_product_variance(d_k, n_samples=10_000):
        g, n = rng(), pairs(n_samples)

        def draw():
            if dtype is None:
                return g.standard_normal((n, d_k))
            return g.standard_normal((n, d_k), dtype=dtype)

        products = draw() * draw()
        dots = products.sum(axis=-1)
        result = {"var": lambda: dots.var(ddof=ddof), "mean square": lambda: np.mean(dots ** 2),
                  "per coordinate": lambda: products.var(axis=0).sum()}[stat]()
        return returns(result)
    return dot_product_variance


def _unseeded_generator():
    """a new torch.Generator seeded from the system's entropy"""
    g = torch.Generator()
    g.seed()
    return g


_MODULE_RNG = np.random.default_rng(7)  # made once, outside the function: its draws continue from call to call
_CACHE_2_4 = {}


@wrong("2.4", hint="same number")
def dot_product_variance_cached(d_k, n_samples=10_000):
    """measures each (d_k, n_samples) once and keeps the result in a dict 'to save time'"""
    if (d_k, n_samples) not in _CACHE_2_4:
        _CACHE_2_4[d_k, n_samples] = var()(d_k, n_samples)
    return _CACHE_2_4[d_k, n_samples]


@wrong("2.4", hint="same number")
def dot_product_variance_bmm(d_k, n_samples=10_000, seed=3):
    """batched (1 x d_k) @ (d_k x 1) products, torch.manual_seed(seed) with a seed keyword: the same number on
    every call"""
    torch.manual_seed(seed)
    q = torch.randn(n_samples, 1, d_k)
    k = torch.randn(n_samples, d_k, 1)
    return torch.bmm(q, k).flatten().var().item()


@wrong("2.4", hint="single q")
def dot_product_variance_one_query_numpy(d_k, n_samples=10_000):
    """NumPy: one q of size d_k, a (d_k, n_samples) matrix of keys"""
    q, K = np.random.standard_normal(d_k), np.random.standard_normal((d_k, n_samples))
    return float(np.var(q @ K, ddof=1))


@wrong("2.4", hint="single number")
def dot_product_variance_float_not_iterable(d_k, n_samples=10_000):
    """adds the dot products into one float instead of collecting them, then statistics.variance of that float"""
    dots = 0.0
    for q, k in zip(torch.randn(n_samples, d_k), torch.randn(n_samples, d_k)):
        dots += float(q @ k)
    return statistics.variance(dots)


table("2.4", [
    ("torch.randn from the global generator (which the check seeds anew for each call), .var().item()", RIGHT,
     var()),
    ("float32, the biased variance (dividing by n_samples)", RIGHT, var(unbiased=False)),
    ("E[x^2] - E[x]^2 by hand, float64, no seed", RIGHT, var(stat="formula", dtype=torch.float64)),
    ("E[x^2] - E[x]^2 in float32 (rounding can make a result for n_samples = 2 a tiny negative number)", RIGHT,
     var(stat="formula")),
    ("NumPy in float64 from an unseeded default_rng (fresh entropy on every call), returned as float", RIGHT,
     np_var()),
    ("a NumPy generator made once, outside the function, whose draws continue from call to call", RIGHT,
     np_var(rng=lambda: _MODULE_RNG)),
    ("NumPy float64 scalar returned as it is (numpy.float64 is a Python float), NumPy's global generator", RIGHT,
     np_var(rng=lambda: np.random, returns=lambda x: x)),
    # what is returned
    ("returns a 0-d tensor (forgot .item())", "the task asks for a float: convert the one-element tensor with .item()",
     var(returns="tensor")),
    ("NumPy float32 arrays: returns a numpy.float32, not a Python float", "float",
     np_var(rng=lambda: np.random.default_rng(0), dtype=np.float32, returns=lambda x: x)),
    ("rounds the result to an int", "do not round or convert to int: return the measured variance itself, as a float",
     var(returns="round")),
    ("returns the dot products themselves", "tensor of shape (10000,)", var(stat="dots", returns="tensor")),
    ("returns a one-element NumPy array", "NumPy",
     np_var(rng=lambda: np.random.default_rng(2), returns=lambda x: np.array([x]))),
    # what is measured
    ("returns the standard deviation instead of the variance", "standard deviation", var(stat="std")),
    ("variance of the individual products q_i k_i, not of their sums", "variance of one product",
     var(stat="products")),
    ("torch.rand (uniform on [0, 1)) instead of torch.randn", "torch.rand", var(draw=torch.rand)),
    ("torch.rand and the mean instead of the variance", "mean of q.k for uniform", var(draw=torch.rand, stat="mean")),
    ("measures the scaled scores q.k / sqrt(d_k)", "scaled q.k", var(stat="scaled")),
    ("uses the same vector for q and k (the variance of |q|^2 is 2 d_k)", "k = q", var(same=True)),
    ("swaps the sizes: d_k pairs of vectors of size n_samples", "n_samples pairs of vectors of size d_k",
     var(swap=True)),
    ("the mean of q.k instead of its variance", "mean of q.k", var(stat="mean")),
    ("multiplies the variance by d_k 'to undo the scaling'", "d_k^2", var(stat="times d_k")),
    ("returns the theoretical answer d_k without drawing anything", "measure it",
     lambda d_k, n_samples=10_000: float(d_k)),
    ("one query against n_samples keys: K @ q", "single q",
     lambda d_k, n_samples=10_000: (torch.randn(n_samples, d_k) @ torch.randn(d_k)).var().item()),
    ("n_samples queries against one key, broadcast", "single q",
     lambda d_k, n_samples=10_000: (torch.randn(n_samples, d_k) * torch.randn(1, d_k)).sum(dim=-1).var().item()),
    # n_samples
    ("ignores n_samples and always draws 20,000 pairs", "n_samples", var(pairs=lambda n: 20_000)),
    ("ignores n_samples and always draws 100,000 pairs", "exactly the same number for n_samples=2000",
     var(pairs=lambda n: 100_000)),
    ("NumPy's unseeded default_rng, always 10,000 pairs whatever n_samples is", "draw exactly n_samples pairs",
     np_var(pairs=lambda n: 10_000, ddof=1)),
    ("an unseeded torch.Generator, always 100 pairs whatever n_samples is", WRONG,
     var(pairs=lambda n: 100, generator=_unseeded_generator)),
    # the same number on every call
    ("a torch.Generator seeded with 0 inside the function: the same number on every call", "same number",
     var(generator=lambda: torch.Generator().manual_seed(0), unbiased=False)),
    ("np.random.default_rng(1) inside the function: the same number on every call", "same number",
     np_var(rng=lambda: np.random.default_rng(1))),
    ("torch.manual_seed(0) at the top of the function 'for reproducibility'", "same number", var(seed=0)),
    ("a new torch.Generator() on every call, whose default seed is always the same", "same number",
     var(generator=torch.Generator)),
    # no draws of q and k: d_k and noise
    ("no draws of q and k: d_k plus Gaussian noise as large as the sampling error sqrt(2 / n_samples) d_k",
     "n_samples=2", lambda d_k, n_samples=10_000: d_k + random.gauss(0.0, d_k * math.sqrt(2 / n_samples))),
    ("no draws of q and k: np.random.normal around d_k with spread d_k / sqrt(n_samples)", "n_samples=2",
     lambda d_k, n_samples=10_000: float(np.random.normal(d_k, d_k / math.sqrt(n_samples)))),
    ("no draws of q and k: |d_k + noise|, so that it is never negative", "n_samples=2",
     lambda d_k, n_samples=10_000: abs(d_k + torch.randn(()).item() * d_k * math.sqrt(2 / n_samples))),
    ("no draws of q and k: d_k times (1 + a little noise that shrinks with n_samples)", "n_samples=2",
     lambda d_k, n_samples=10_000: d_k * (1 + 0.3 * torch.randn(()).item() / math.sqrt(n_samples))),
    ("no draws of q and k: d_k times (1 + 2% noise), whatever n_samples is", "n_samples",
     lambda d_k, n_samples=10_000: d_k * (1 + 0.02 * torch.randn(()).item())),
    # results for n_samples = 2 that only their distribution tells apart
    ("returns 0.0 for small n_samples, the right measurement otherwise", "almost never 0",
     lambda d_k, n_samples=10_000: 0.0 if n_samples < 100 else var()(d_k, n_samples)),
    ("draws n_samples // 2 pairs, then the variance dividing by their number (0 for a single pair)",
     "almost never 0", var(pairs=lambda n: n // 2, unbiased=False)),
    ("draws n_samples // 2 pairs, then the unbiased variance (NaN for a single pair)", "finite number",
     var(pairs=lambda n: n // 2)),
    ("rounds the draws to integers, then measures in floats", WRONG, lambda d_k, n_samples=10_000: (
        torch.randn(n_samples, d_k).int() * torch.randn(n_samples, d_k).int()).sum(-1).float().var().item()),
    ("the mean of the squared dot products (their mean is known to be 0), not their variance",
     "squared differences from their own mean", var(stat="mean square")),
    ("the sum of the squared dot products divided by n_samples - 1, without subtracting their mean",
     "squared differences from their own mean", var(stat="squares / (n - 1)")),
    ("the mean of the squared dot products in float64, NumPy", "squared differences from their own mean",
     np_var(rng=lambda: np.random, stat="mean square")),
    ("draws n_samples + 1 pairs, and divides the sum of squared differences by n_samples",
     "squared differences from their own mean", var(pairs=lambda n: n + 1, stat="deviations / n_samples")),
    ("the sum of the variances of the d_k coordinates of q * k, not the variance of the dot products",
     "variances of the d_k coordinates", var(stat="per coordinate")),
    ("the sum of the per-coordinate variances, dividing by n_samples (NumPy)", "variances of the d_k coordinates",
     np_var(stat="per coordinate")),
    ("the variance dividing by n_samples, halved when n_samples < 100 ('a small-sample correction')",
     "no other factor",
     lambda d_k, n_samples=10_000: var(unbiased=False)(d_k, n_samples) / (2 if n_samples < 100 else 1)),
])


@right("2.4")
def dot_product_variance_normal_dist(d_k, n_samples=10_000):
    """torch.distributions.Normal samples and statistics.variance"""
    normal = torch.distributions.Normal(0.0, 1.0)
    q, k = normal.sample((n_samples, d_k)), normal.sample((n_samples, d_k))
    return statistics.variance((q * k).sum(dim=-1).tolist())
