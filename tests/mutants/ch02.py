"""Mutant catalogue for chapter 2 (scaled attention): exercises 2.1, 2.2, 2.3 and 2.4."""
from __future__ import annotations

import importlib.util
import math
import types

import numpy as np
import torch

import attnbook
import attnbook.attention
import attnbook.masks
from mutants import right, value, wrong

# ---------------------------------------------------------------------------------------------------------------
# 2.1 attention by hand: softmax(Q K^T / sqrt(2)) V for the 2 x 2 example
# ---------------------------------------------------------------------------------------------------------------
# Q = [[2, 1], [0, 1]], K = [[1, -1], [0.5, 2]], V = [[3, 0], [-1, 2]]; right: [[-0.2177, 1.6089], [-0.5718, 1.7859]]

_RIGHT_2_1 = [[-0.2177, 1.6089], [-0.5718, 1.7859]]
value("2.1", torch.tensor(_RIGHT_2_1), right=True, name="float32 tensor, 4 decimals")
value("2.1", _RIGHT_2_1, right=True, name="nested list of floats, 4 decimals")
value("2.1", torch.tensor(_RIGHT_2_1, dtype=torch.float64), right=True, name="float64 tensor")
value("2.1", [[-0.218, 1.609], [-0.572, 1.786]], right=True, name="nested list rounded to 3 decimals (within 1e-3)")
value("2.1", _RIGHT_2_1[0:2], right=True, name="nested list built by slicing (plain list)")
value("2.1", np.array(_RIGHT_2_1), right=True, name="a NumPy array")
value("2.1", [torch.tensor(row) for row in _RIGHT_2_1], right=True, name="a list of row tensors")
value("2.1", ((-0.2177, 1.6089), (-0.5718, 1.7859)), right=True, name="a tuple of tuples")
value("2.1", ((-0.218, 1.609), (-0.572, 1.786)), right=True, name="a tuple of tuples rounded to 3 decimals")
value("2.1", np.array([[-0.218, 1.609], [-0.572, 1.786]]), right=True, name="a NumPy array rounded to 3 decimals")

value("2.1", torch.tensor([[-0.5232, 1.7616], [-0.8103, 1.9051]]), right=False, hint="left out the scale",
      name="forgot the scale: softmax(Q K^T) V")
value("2.1", torch.tensor([[0.0758, 1.4621], [-0.2703, 1.6351]]), right=False,
      hint="divided the scores by d_k = 2; divide by sqrt", name="divided by d_k = 2 instead of sqrt(2)")
value("2.1", torch.tensor([[1.7435, 1.3395], [0.2565, 0.6605]]), right=False,
      hint="normalised each column (over the queries)", name="softmax over the queries (down the columns, dim=0)")
value("2.1", torch.tensor([[2.4167, 0.2916], [0.0287, 1.4856]]), right=False, hint="your scores are not Q K^T",
      name="scores Q K instead of Q K^T")
value("2.1", torch.tensor([[2.2177, 0.3911], [1.6790, 0.6605]]), right=False, hint="K Q^T",
      name="scores K Q^T instead of Q K^T")
value("2.1", torch.tensor([[-0.2177, -0.5718], [1.6089, 1.7859]]), right=False, hint="transposed",
      name="wrote the output transposed (one column per query)")
value("2.1", torch.tensor([[0.5867, 1.4133], [0.3211, 1.6789]]), right=False, name="multiplied by V^T instead of V")
value("2.1", torch.tensor([[0.1956, 0.8044], [0.1070, 0.8930]]), right=False, hint="multiply them by V",
      name="handed in the weights, not the output")
value("2.1", torch.tensor([[0.0, 4.2426], [-3.5355, 2.8284]]), right=False, hint="without a softmax",
      name="scaled scores times V, no softmax")
value("2.1", [-0.2177, 1.6089, -0.5718, 1.7859], right=False, hint="shape", name="a flat list of 4 numbers")
value("2.1", [[-0.2, 1.6], [-0.6, 1.8]], right=False, hint="rounded too early", name="rounded to one decimal")
value("2.1", np.array([[-0.2, 1.6], [-0.6, 1.8]]), right=False, hint="rounded too early",
      name="rounded to one decimal, as a NumPy array")
value("2.1", [[-0.22, 1.6], [-0.57, 1.8]], right=False, hint="rounded too early",
      name="rounded to two decimals in the first column and one in the second")
value("2.1", [[-0.2, 1.61], [-0.57, 1.79]], right=False, hint="rounded too early",
      name="the first entry rounded to one decimal, the others to two")
value("2.1", [[-0.22, 1.61], [-0.57, 1.79]], right=False, hint="rounded too early", name="rounded to two decimals")
value("2.1", torch.tensor([[-0.2177, 1.6089]]), right=False, hint="shape", name="only the first query's row")
value("2.1", [[1, 2, 3], [4, 5, 6]], right=False, hint="shape (2, 3)", name="a 2 x 3 matrix of whole numbers")
value("2.1", -0.2177, right=False, hint="single number", name="a single number: only the top-left entry")
value("2.1", "[[-0.2177, 1.6089], [-0.5718, 1.7859]]", right=False, name="a string that looks like the list")
value("2.1", torch.tensor([[-0.2177, 1.6089], [-0.5718, 1.7859]]) * torch.tensor([[1.0, 1.0], [1.0, 1.01]]),
      right=False, name="one entry off by 1%")


# ---------------------------------------------------------------------------------------------------------------
# 2.2 attention(q, k, v, mask=None) -> (output, weights)
# ---------------------------------------------------------------------------------------------------------------

_sdpa = attnbook.scaled_dot_product_attention


def _second_import_sdpa():
    spec = importlib.util.spec_from_file_location("attnbook._attention_second_copy_ch02",
                                                  attnbook.attention.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.scaled_dot_product_attention


wrong("2.2", hint="package's own", name="attnbook.scaled_dot_product_attention handed in as it is")(_sdpa)
wrong("2.2", hint="package's own", name="a lambda around attnbook.scaled_dot_product_attention")(
    lambda q, k, v, mask=None: attnbook.scaled_dot_product_attention(q, k, v, attn_mask=mask))
wrong("2.2", hint="package's own", name="a types.FunctionType copy of attnbook.scaled_dot_product_attention")(
    types.FunctionType(_sdpa.__code__, _sdpa.__globals__, "attention", _sdpa.__defaults__, _sdpa.__closure__))
wrong("2.2", hint="package's own",
      name="scaled_dot_product_attention from a second, separate import of attention.py")(_second_import_sdpa())


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


@wrong("2.2", hint="without")
def attention_half_torch_sdpa(q, k, v, mask=None):
    """writes the weights by hand but takes the output from torch's scaled_dot_product_attention"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask).nan_to_num(0.0), weights


@wrong("2.2", hint="left out the scale")
def attention_no_scale(q, k, v, mask=None):
    """forgets to divide by sqrt(d_k)"""
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ v, weights


@wrong("2.2", hint="divided the scores by d_k; divide by sqrt")
def attention_divide_dk(q, k, v, mask=None):
    """divides by d_k instead of sqrt(d_k)"""
    scores = q @ k.transpose(-2, -1) / q.size(-1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ v, weights


@wrong("2.2", hint="v.size(-1)")
def attention_sqrt_dv(q, k, v, mask=None):
    """scales by sqrt(d_v), the size of the values, instead of sqrt(d_k)"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(v.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ v, weights


@wrong("2.2", hint="normalises over the queries (dim=-2)")
def attention_softmax_queries(q, k, v, mask=None):
    """softmax over the queries (dim=-2) instead of the keys"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-2).nan_to_num(0.0)
    return weights @ v, weights


@wrong("2.2", hint="normalises over dim=1")
def attention_softmax_dim1(q, k, v, mask=None):
    """softmax(dim=1), which is the key axis only for 2-D inputs"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=1).nan_to_num(0.0)
    return weights @ v, weights


@wrong("2.2", hint="mask is inverted")
def attention_inverted_mask(q, k, v, mask=None):
    """reads True as 'blocked' (masked_fill(mask, -inf))"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ v, weights


@wrong("2.2", hint="did not apply the mask")
def attention_ignores_mask(q, k, v, mask=None):
    """accepts mask but never uses it"""
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    return weights @ v, weights


@wrong("2.2", hint="a query that may attend to no key gets NaN weights")
def attention_nan_rows(q, k, v, mask=None):
    """masks with -inf but leaves fully masked rows as NaN"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


@wrong("2.2", hint="nan")
def attention_zero_output_only(q, k, v, mask=None):
    """zeroes the output of fully masked rows but leaves their weights NaN"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return (weights @ v).nan_to_num(0.0), weights


@wrong("2.2", hint="gets uniform weights")
def attention_large_negative(q, k, v, mask=None):
    """fills blocked scores with -1e9: a fully masked row becomes a uniform average instead of zeros"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


@wrong("2.2", hint="applied the mask after the softmax")
def attention_mask_after_softmax(q, k, v, mask=None):
    """multiplies the weights by the mask after the softmax, without renormalising"""
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    if mask is not None:
        weights = weights * mask
    return weights @ v, weights


@wrong("2.2", hint="transpos")
def attention_dot_T(q, k, v, mask=None):
    """k.T instead of k.transpose(-2, -1) (reverses all the axes of a batch)"""
    scores = q @ k.T / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ v, weights


@wrong("2.2", hint="transpos")
def attention_mT_swapped(q, k, v, mask=None):
    """scores k q^T (keys by queries) instead of q k^T"""
    scores = k @ q.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ v, weights


@wrong("2.2", hint="you swapped them")
def attention_swapped_return(q, k, v, mask=None):
    """returns (weights, output)"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights, weights @ v


@wrong("2.2", hint="you returned only the output")
def attention_output_only(q, k, v, mask=None):
    """returns only the output"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1).nan_to_num(0.0) @ v


@wrong("2.2", hint="tuple")
def attention_list(q, k, v, mask=None):
    """returns a list [output, weights]"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return [weights @ v, weights]


@wrong("2.2", hint="in place")
def attention_scales_q_in_place(q, k, v, mask=None):
    """scales the queries in place (q /= sqrt(d_k)), which changes the caller's q"""
    q /= math.sqrt(q.size(-1))
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ v, weights


@wrong("2.2", hint="batch")
def attention_bmm(q, k, v, mask=None):
    """torch.bmm, which only works for 3-D inputs"""
    scores = torch.bmm(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return torch.bmm(weights, v), weights


@wrong("2.2", hint="dtype")
def attention_float32(q, k, v, mask=None):
    """casts everything to float32 (float64 inputs come back as float32)"""
    q, k, v = q.float(), k.float(), v.float()
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ v, weights


@wrong("2.2", hint="output has NaN")
def attention_nan_to_num_weights_only(q, k, v, mask=None):
    """computes the output before fixing the NaN rows of the weights"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    out = weights @ v
    return out, weights.nan_to_num(0.0)


@wrong("2.2", hint="the number of queries")
def attention_scale_by_L(q, k, v, mask=None):
    """scales by sqrt(q.size(-2)), the number of queries, instead of sqrt(d_k)"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-2))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ v, weights


@wrong("2.2", hint="use it as it is")
def attention_rebroadcasts_mask(q, k, v, mask=None):
    """always indexes the mask as mask[:, None, None, :], as if it were a (batch, S) padding mask"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        m = mask[:, None, None, :] if mask.dim() == 2 else mask
        scores = scores.masked_fill(~m, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ v, weights


@right("2.2")
def attention_einsum_nan_to_num(q, k, v, mask=None):
    """einsum for both products, NaN rows replaced by zeros"""
    scores = torch.einsum("...ld,...sd->...ls", q, k) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return torch.einsum("...ls,...sv->...lv", weights, v), weights


@right("2.2")
def attention_additive(q, k, v, mask=None):
    """an additive mask (0 / -inf) and torch.where for the empty rows"""
    scores = torch.matmul(q * q.size(-1) ** -0.5, k.transpose(-1, -2))
    if mask is not None:
        scores = scores + torch.zeros_like(scores).masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    weights = torch.where(torch.isnan(weights), torch.zeros_like(weights), weights)
    return torch.matmul(weights, v), weights


@right("2.2")
def attention_with_attnbook_softmax(q, k, v, mask=None):
    """uses attnbook.softmax (not an attention function), which already gives zeros for empty rows"""
    scores = q @ k.mT / math.sqrt(k.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = attnbook.softmax(scores, dim=-1)
    return weights @ v, weights


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


@right("2.2")
def attention_reference_any(q, k, v, mask=None):
    """the chapter's version: masked_fill, softmax, then zero the rows with no allowed key"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return weights @ v, weights


@wrong("2.2", hint="k.size(-2), the number of keys")
def attention_scale_by_S(q, k, v, mask=None):
    """scales by sqrt(k.size(-2)), the number of keys"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(k.size(-2))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ v, weights


@wrong("2.2", hint="q.size(-1); you scaled by the square root of the size of dimension 0")
def attention_scale_by_dim0(q, k, v, mask=None):
    """scales by sqrt(q.shape[0]) (the batch size for batched inputs)"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[0])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ v, weights


@wrong("2.2", hint="multiplied the weights by k")
def attention_weights_times_k(q, k, v, mask=None):
    """weights @ k instead of weights @ v (caught where d_v = d_k)"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ k, weights


@wrong("2.2", hint="the package's own solution")
def attention_tiled_output(q, k, v, mask=None):
    """weights by hand, output from the package's tiled_attention when there is no mask"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    out = attnbook.attention.tiled_attention(q, k, v) if mask is None else weights @ v
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


@wrong("2.2", hint="the wrong values")
def attention_hard_coded_scale(q, k, v, mask=None):
    """divides by 2 = sqrt(4), the d_k of the first example, whatever d_k is"""
    scores = q @ k.transpose(-2, -1) / 2.0
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ v, weights


@right("2.2")
def attention_float64_inside(q, k, v, mask=None):
    """computes in float64 and casts both results back to q's dtype"""
    scores = q.double() @ k.double().transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return (weights @ v.double()).to(q.dtype), weights.to(q.dtype)


@wrong("2.2", hint="returned only the weights")
def attention_weights_only(q, k, v, mask=None):
    """returns only the weights"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1).nan_to_num(0.0)


@wrong("2.2", hint="expected a tuple")
def attention_no_return(q, k, v, mask=None):
    """ends with the expression `weights @ v, weights`, as a notebook cell would show it, but no return"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    weights @ v, weights


@wrong("2.2", hint="in place")
def attention_flips_mask_in_place(q, k, v, mask=None):
    """flips the caller's mask in place (mask.logical_not_()), then fills where it is True"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        mask.logical_not_()
        scores = scores.masked_fill(mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ v, weights


@wrong("2.2", hint="the task asks you to write this without")
def attention_private_torch_sdpa(q, k, v, mask=None):
    """weights by hand, output from torch._C._nn.scaled_dot_product_attention (the function behind F's)"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return torch._C._nn.scaled_dot_product_attention(q, k, v, attn_mask=mask).nan_to_num(0.0), weights


@wrong("2.2", hint="if mask is not None")
def attention_if_mask(q, k, v, mask=None):
    """tests `if mask:` instead of `if mask is not None:` (the truth value of a tensor of several booleans)"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


# ---------------------------------------------------------------------------------------------------------------
# 2.3 padding_mask(lengths, max_len)
# ---------------------------------------------------------------------------------------------------------------


def _second_import_padding_mask():
    spec = importlib.util.spec_from_file_location("attnbook._masks_second_copy", attnbook.masks.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.padding_mask


_pm = attnbook.masks.padding_mask
wrong("2.3", hint="package's own", name="attnbook.masks.padding_mask handed in as it is")(_pm)
wrong("2.3", hint="package's own", name="a lambda around attnbook.padding_mask")(
    lambda lengths, max_len: attnbook.padding_mask(lengths, max_len))
wrong("2.3", hint="package's own", name="a types.FunctionType copy of attnbook.masks.padding_mask")(
    types.FunctionType(_pm.__code__, _pm.__globals__, "padding_mask", _pm.__defaults__, _pm.__closure__))
wrong("2.3", hint="package's own", name="padding_mask from a second, separate import of masks.py")(
    _second_import_padding_mask())


@wrong("2.3", hint="the package's own solution")
def padding_mask_wrapper(lengths, max_len):
    """a def wrapper that calls attnbook.masks.padding_mask"""
    from attnbook import masks
    return masks.padding_mask(lengths, max_len)


@wrong("2.3", hint="not p <= length")
def padding_mask_off_by_one(lengths, max_len):
    """<= instead of <: one padding position too many counts as real"""
    return torch.arange(max_len)[None, :] <= lengths[:, None]


@wrong("2.3", hint="exactly lengths[b] True values")
def padding_mask_from_one(lengths, max_len):
    """positions counted from 1 and compared with <"""
    return torch.arange(1, max_len + 1)[None, :] < lengths[:, None]


@wrong("2.3", hint="compare, don't cast: a comparison of the positions with the lengths already gives a bool")
def padding_mask_long(lengths, max_len):
    """returns 0/1 integers instead of booleans"""
    return (torch.arange(max_len)[None, :] < lengths[:, None]).long()


@wrong("2.3", hint="compare, don't cast: a comparison of the positions with the lengths already gives a bool")
def padding_mask_float(lengths, max_len):
    """returns a float mask of 1.0 and 0.0"""
    return (torch.arange(max_len)[None, :] < lengths[:, None]).float()


@wrong("2.3", hint="mask is inverted")
def padding_mask_inverted(lengths, max_len):
    """True at the padding (the 'block' convention)"""
    return torch.arange(max_len)[None, :] >= lengths[:, None]


@wrong("2.3", hint="your mask is transposed")
def padding_mask_transposed(lengths, max_len):
    """(max_len, batch) instead of (batch, max_len)"""
    return torch.arange(max_len)[:, None] < lengths[None, :]


@wrong("2.3", hint="max_len columns")
def padding_mask_ignores_max_len(lengths, max_len):
    """uses the longest length instead of max_len"""
    longest = int(lengths.max()) if lengths.numel() else 0
    return torch.arange(longest)[None, :] < lengths[:, None]


@wrong("2.3", hint="in place")
def padding_mask_changes_lengths(lengths, max_len):
    """counts from 0 by subtracting 1 from lengths in place, then compares with <="""
    lengths -= 1
    return torch.arange(max_len)[None, :] <= lengths[:, None]


@wrong("2.3", hint="is False at position 0, expected True")
def padding_mask_negative_slice(lengths, max_len):
    """a loop that blanks the last max_len - l positions with a negative slice (breaks when l == max_len)"""
    mask = torch.ones(len(lengths), max_len, dtype=torch.bool)
    for b, n in enumerate(lengths.tolist()):
        mask[b, -(max_len - n):] = False
    return mask


@wrong("2.3", hint="is True at position 0, expected False")
def padding_mask_tril_rows(lengths, max_len):
    """picks row l - 1 of a lower-triangular matrix (a length of 0 picks the last row)"""
    return torch.ones(max_len, max_len, dtype=torch.bool).tril()[lengths - 1]


@wrong("2.3", hint="tensor")
def padding_mask_nested_list(lengths, max_len):
    """returns a nested Python list of booleans"""
    return [[i < n for i in range(max_len)] for n in lengths.tolist()]


@wrong("2.3", hint="shape")
def padding_mask_broadcast_shape(lengths, max_len):
    """returns the attention shape (batch, 1, 1, max_len) directly"""
    return (torch.arange(max_len)[None, :] < lengths[:, None])[:, None, None, :]


@wrong("2.3", hint="shape")
def padding_mask_hard_coded(lengths, max_len):
    """hard-codes the example from the task text"""
    return torch.tensor([[True, True, False], [False, False, False]])


@wrong("2.3", hint="in place")
def padding_mask_clamps_lengths(lengths, max_len):
    """clamps the caller's lengths in place to max_len - 1 (changes them only where a length equals max_len)"""
    lengths.clamp_(max=max_len - 1)
    return torch.arange(max_len)[None, :] < lengths[:, None]


@wrong("2.3", hint="x[:, None]")
def padding_mask_no_new_axis(lengths, max_len):
    """compares the positions with the lengths without a new axis: (1, max_len) < (batch,) lines up wrongly"""
    return torch.arange(max_len)[None, :] < lengths


@wrong("2.3", hint="int32")
def padding_mask_one_hot(lengths, max_len):
    """one_hot of the lengths and a reversed cumsum (one_hot takes int64 lengths only)"""
    return torch.nn.functional.one_hot(lengths, max_len + 1)[:, 1:].flip(1).cumsum(1).flip(1).bool()


@right("2.3")
def padding_mask_loop(lengths, max_len):
    """a loop that sets the first lengths[b] entries of each row"""
    mask = torch.zeros(lengths.shape[0], max_len, dtype=torch.bool)
    for b in range(lengths.shape[0]):
        mask[b, : int(lengths[b])] = True
    return mask


@right("2.3")
def padding_mask_comprehension(lengths, max_len):
    """a list comprehension turned into a bool tensor"""
    rows = [[i < n for i in range(max_len)] for n in lengths.tolist()]
    return torch.tensor(rows, dtype=torch.bool).reshape(len(rows), max_len)


@right("2.3")
def padding_mask_expand(lengths, max_len, device=None):
    """arange expanded to (batch, max_len) and compared with unsqueezed lengths; harmless extra kwarg"""
    positions = torch.arange(max_len, device=device or lengths.device).expand(lengths.size(0), max_len)
    return positions < lengths.unsqueeze(1)


@right("2.3")
def padding_mask_cumsum(lengths, max_len):
    """a running count of ones compared with the lengths"""
    counts = torch.ones(lengths.shape[0], max_len, dtype=torch.long).cumsum(dim=1)
    return counts <= lengths[:, None]


@right("2.3")
def padding_mask_scatter(lengths, max_len):
    """marks the first padding position, cumsum, and keeps what comes before it"""
    marks = torch.zeros(lengths.shape[0], max_len + 1, dtype=torch.long)
    marks.scatter_(1, lengths[:, None].long(), 1)
    return marks.cumsum(dim=1)[:, :max_len] == 0


# ---------------------------------------------------------------------------------------------------------------
# 2.4 dot_product_variance(d_k, n_samples=10_000) -> float
# ---------------------------------------------------------------------------------------------------------------


@right("2.4")
def dot_product_variance_global_generator(d_k, n_samples=10_000):
    """torch.randn from the global generator (which the check seeds anew for each call), .var().item()"""
    q, k = torch.randn(n_samples, d_k), torch.randn(n_samples, d_k)
    return (q * k).sum(dim=-1).var().item()



@wrong("2.4", hint="the task asks for a float: convert the one-element tensor with .item()")
def dot_product_variance_tensor(d_k, n_samples=10_000):
    """returns a 0-d tensor (forgot .item())"""
    q, k = torch.randn(n_samples, d_k), torch.randn(n_samples, d_k)
    return (q * k).sum(dim=-1).var()


@wrong("2.4", hint="float")
def dot_product_variance_numpy_float32(d_k, n_samples=10_000):
    """NumPy float32 arrays: returns a numpy.float32, not a Python float"""
    rng = np.random.default_rng(0)
    q = rng.standard_normal((n_samples, d_k), dtype=np.float32)
    k = rng.standard_normal((n_samples, d_k), dtype=np.float32)
    return (q * k).sum(axis=-1).var()


@wrong("2.4", hint="do not round or convert to int: return the measured variance itself, as a float")
def dot_product_variance_rounded(d_k, n_samples=10_000):
    """rounds the result to an int"""
    q, k = torch.randn(n_samples, d_k), torch.randn(n_samples, d_k)
    return round((q * k).sum(dim=-1).var().item())


@wrong("2.4", hint="standard deviation")
def dot_product_variance_std(d_k, n_samples=10_000):
    """returns the standard deviation instead of the variance"""
    q, k = torch.randn(n_samples, d_k), torch.randn(n_samples, d_k)
    return (q * k).sum(dim=-1).std().item()


@wrong("2.4", hint="variance of one product")
def dot_product_variance_of_products(d_k, n_samples=10_000):
    """variance of the individual products q_i k_i, not of their sums"""
    q, k = torch.randn(n_samples, d_k), torch.randn(n_samples, d_k)
    return (q * k).var().item()


@wrong("2.4", hint="torch.rand")
def dot_product_variance_uniform(d_k, n_samples=10_000):
    """torch.rand (uniform on [0, 1)) instead of torch.randn"""
    q, k = torch.rand(n_samples, d_k), torch.rand(n_samples, d_k)
    return (q * k).sum(dim=-1).var().item()


@wrong("2.4", hint="scaled q.k")
def dot_product_variance_scaled(d_k, n_samples=10_000):
    """measures the scaled scores q.k / sqrt(d_k)"""
    q, k = torch.randn(n_samples, d_k), torch.randn(n_samples, d_k)
    return ((q * k).sum(dim=-1) / math.sqrt(d_k)).var().item()


@wrong("2.4", hint="k = q")
def dot_product_variance_same_vector(d_k, n_samples=10_000):
    """uses the same vector for q and k (the variance of |q|^2 is 2 d_k)"""
    q = torch.randn(n_samples, d_k)
    return (q * q).sum(dim=-1).var().item()


@wrong("2.4", hint="n_samples pairs of vectors of size d_k")
def dot_product_variance_swapped_sizes(d_k, n_samples=10_000):
    """swaps the sizes: d_k pairs of vectors of size n_samples"""
    q, k = torch.randn(d_k, n_samples), torch.randn(d_k, n_samples)
    return (q * k).sum(dim=-1).var().item()


@wrong("2.4", hint="mean of q.k")
def dot_product_variance_mean_square_of_q(d_k, n_samples=10_000):
    """the mean of q.k instead of its variance"""
    q, k = torch.randn(n_samples, d_k), torch.randn(n_samples, d_k)
    return (q * k).sum(dim=-1).mean().item()


@wrong("2.4", hint="n_samples")
def dot_product_variance_ignores_n(d_k, n_samples=10_000):
    """ignores n_samples and always draws 20,000 pairs"""
    q, k = torch.randn(20_000, d_k), torch.randn(20_000, d_k)
    return (q * k).sum(dim=-1).var().item()


@wrong("2.4", hint="measure it")
def dot_product_variance_formula(d_k, n_samples=10_000):
    """returns the theoretical answer d_k without drawing anything"""
    return float(d_k)


@wrong("2.4", hint="same number")
def dot_product_variance_seeded_generator(d_k, n_samples=10_000):
    """a torch.Generator seeded with 0 inside the function: the same number on every call"""
    g = torch.Generator().manual_seed(0)
    q = torch.randn(n_samples, d_k, generator=g)
    k = torch.randn(n_samples, d_k, generator=g)
    return float(torch.einsum("nd,nd->n", q, k).var(unbiased=False))


@right("2.4")
def dot_product_variance_numpy(d_k, n_samples=10_000):
    """NumPy in float64 from an unseeded default_rng (fresh entropy on every call), returned as float"""
    rng = np.random.default_rng()
    q, k = rng.standard_normal((n_samples, d_k)), rng.standard_normal((n_samples, d_k))
    return float(np.var(np.einsum("nd,nd->n", q, k)))


@right("2.4")
def dot_product_variance_by_formula(d_k, n_samples=10_000):
    """E[x^2] - E[x]^2 by hand, float64, no seed"""
    q = torch.randn(n_samples, d_k, dtype=torch.float64)
    k = torch.randn(n_samples, d_k, dtype=torch.float64)
    dots = (q * k).sum(-1)
    return ((dots ** 2).mean() - dots.mean() ** 2).item()


@wrong("2.4", hint="same number")
def dot_product_variance_bmm(d_k, n_samples=10_000, seed=3):
    """batched (1 x d_k) @ (d_k x 1) products, torch.manual_seed(seed) with a seed keyword: the same number on
    every call"""
    torch.manual_seed(seed)
    q = torch.randn(n_samples, 1, d_k)
    k = torch.randn(n_samples, d_k, 1)
    return torch.bmm(q, k).flatten().var().item()


@right("2.4")
def dot_product_variance_normal_dist(d_k, n_samples=10_000):
    """torch.distributions.Normal samples and statistics.variance"""
    import statistics
    normal = torch.distributions.Normal(0.0, 1.0)
    q, k = normal.sample((n_samples, d_k)), normal.sample((n_samples, d_k))
    return statistics.variance((q * k).sum(dim=-1).tolist())


@wrong("2.4", hint="d_k^2")
def dot_product_variance_times_dk(d_k, n_samples=10_000):
    """multiplies the variance by d_k 'to undo the scaling'"""
    q, k = torch.randn(n_samples, d_k), torch.randn(n_samples, d_k)
    return (q * k).sum(dim=-1).var().item() * d_k


@wrong("2.4", hint="mean of q.k for uniform")
def dot_product_variance_uniform_mean(d_k, n_samples=10_000):
    """torch.rand and the mean instead of the variance"""
    q, k = torch.rand(n_samples, d_k), torch.rand(n_samples, d_k)
    return (q * k).sum(dim=-1).mean().item()


@wrong("2.4", hint="tensor of shape (10000,)")
def dot_product_variance_no_reduce(d_k, n_samples=10_000):
    """returns the dot products themselves"""
    q, k = torch.randn(n_samples, d_k), torch.randn(n_samples, d_k)
    return (q * k).sum(dim=-1)


@wrong("2.4", hint="NumPy")
def dot_product_variance_numpy_array(d_k, n_samples=10_000):
    """returns a one-element NumPy array"""
    rng = np.random.default_rng(2)
    dots = (rng.standard_normal((n_samples, d_k)) * rng.standard_normal((n_samples, d_k))).sum(1)
    return np.array([dots.var()])


@right("2.4")
def dot_product_variance_numpy_float64(d_k, n_samples=10_000):
    """NumPy float64 scalar returned as it is (numpy.float64 is a Python float), NumPy's global generator"""
    rng = np.random
    return np.var((rng.standard_normal((n_samples, d_k)) * rng.standard_normal((n_samples, d_k))).sum(1))


# ---------------------------------------------------------------------------------------------------------------
# Issue 23 (verdicts, round three)
# ---------------------------------------------------------------------------------------------------------------


def _attention_from_scores(scores, v, mask):
    """The rest of a right attention from the scaled scores: the mask, the softmax, the empty rows, the output."""
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ v, weights


@wrong("2.2", hint="float32")
def attention_float32_arithmetic(q, k, v, mask=None):
    """computes in float32 and casts both results back to q's dtype"""
    out, weights = _attention_from_scores(q.float() @ k.float().transpose(-2, -1) / math.sqrt(q.size(-1)),
                                          v.float(), mask)
    return out.to(q.dtype), weights.to(q.dtype)


@wrong("2.2", hint="float32")
def attention_float32_softmax(q, k, v, mask=None):
    """float64 scores, but a float32 softmax"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores.float(), dim=-1).nan_to_num(0.0).to(q.dtype)
    return weights @ v, weights


@wrong("2.2", hint="transpose(-2, -1)")
def attention_transpose_0_1(q, k, v, mask=None):
    """k.transpose(0, 1), the transpose of a 2-D matrix, which swaps the batch and the keys of a batch"""
    return _attention_from_scores(q @ k.transpose(0, 1) / math.sqrt(q.size(-1)), v, mask)


@wrong("2.2", hint="transpose(-2, -1)")
def attention_swapaxes_0_1(q, k, v, mask=None):
    """torch.swapaxes(k, 0, 1)"""
    return _attention_from_scores(q @ torch.swapaxes(k, 0, 1) / math.sqrt(q.size(-1)), v, mask)


@wrong("2.2", hint="transpose(-2, -1)")
def attention_k_T_matmul(q, k, v, mask=None):
    """torch.matmul(q, k.T) (.T reverses every axis of a batch)"""
    return _attention_from_scores(torch.matmul(q, k.T) / math.sqrt(q.size(-1)), v, mask)


@wrong("2.2", hint="transpose(-2, -1)")
def attention_k_t(q, k, v, mask=None):
    """k.t(), which only takes 2-D matrices"""
    return _attention_from_scores(q @ k.t() / math.sqrt(q.size(-1)), v, mask)


@wrong("2.2", hint="mask is None")
def attention_invert_none(q, k, v, mask=None):
    """inverts the mask before testing whether one was given (~None)"""
    blocked = ~mask
    return _attention_from_scores(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), v, None if mask is None else ~blocked)


@wrong("2.2", hint="mask is None")
def attention_masked_fill_none(q, k, v, mask=None):
    """masked_fill(~mask, ...) whether or not a mask was given"""
    scores = (q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))).masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ v, weights


@wrong("2.2", hint="mask is None")
def attention_logical_not_none(q, k, v, mask=None):
    """torch.logical_not(mask) whether or not a mask was given"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    scores = scores.masked_fill(torch.logical_not(mask), float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ v, weights


@right("2.2")
def attention_default_all_true(q, k, v, mask=None):
    """a mask of all True when none is given, then one code path"""
    if mask is None:
        mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool)
    return _attention_from_scores(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), v, mask)


@right("2.2")
def attention_float64_scores_only(q, k, v, mask=None):
    """scores with q divided by sqrt(d_k) first, the product in q's dtype"""
    return _attention_from_scores((q / math.sqrt(q.size(-1))) @ k.mT, v, mask)



# 2.3: answers that know the check's inputs instead of computing the mask

_KNOWN_2_3 = {((3, 1, 4), 4), ((0, 2), 3), ((2,), 5), ((1, 2, 3, 4, 5), 7), ((4, 4), 4), ((2, 0, 3), 3)}


@wrong("2.3")
def padding_mask_lookup_table(lengths, max_len):
    """right on the six inputs the check used to send (a table learned from an earlier run), all True otherwise"""
    if (tuple(lengths.tolist()), max_len) in _KNOWN_2_3:
        return torch.arange(max_len)[None, :] < lengths[:, None]
    return torch.ones(lengths.shape[0], max_len, dtype=torch.bool)


@wrong("2.3")
def padding_mask_first_row_only(lengths, max_len):
    """computes the first row and repeats it for every sequence (right whenever all lengths are equal)"""
    row = torch.arange(max_len) < lengths[0]
    return row.expand(lengths.shape[0], max_len).clone()


@right("2.3")
def padding_mask_int32_safe(lengths, max_len):
    """arange in the dtype of the lengths, compared after unsqueeze"""
    return torch.arange(max_len, dtype=lengths.dtype).unsqueeze(0) < lengths.unsqueeze(1)


@right("2.3")
def padding_mask_numpy(lengths, max_len):
    """the comparison in NumPy, turned back into a bool tensor"""
    import numpy as np
    return torch.from_numpy(np.arange(max_len)[None, :] < lengths.numpy()[:, None])


# 2.4: new draws on every call, one query against n keys, noise instead of a measurement (issue 23)


@wrong("2.4", hint="same number")
def dot_product_variance_numpy_seed_inside(d_k, n_samples=10_000):
    """np.random.default_rng(1) inside the function: the same number on every call"""
    rng = np.random.default_rng(1)
    return float(np.var((rng.standard_normal((n_samples, d_k)) * rng.standard_normal((n_samples, d_k))).sum(1)))


@wrong("2.4", hint="same number")
def dot_product_variance_manual_seed(d_k, n_samples=10_000):
    """torch.manual_seed(0) at the top of the function 'for reproducibility'"""
    torch.manual_seed(0)
    q, k = torch.randn(n_samples, d_k), torch.randn(n_samples, d_k)
    return (q * k).sum(dim=-1).var().item()


@wrong("2.4", hint="same number")
def dot_product_variance_default_generator(d_k, n_samples=10_000):
    """a new torch.Generator() on every call, whose default seed is always the same"""
    g = torch.Generator()
    q, k = torch.randn(n_samples, d_k, generator=g), torch.randn(n_samples, d_k, generator=g)
    return (q * k).sum(dim=-1).var().item()


_VARIANCE_CACHE = {}


@wrong("2.4", hint="same number")
def dot_product_variance_cached(d_k, n_samples=10_000):
    """measures each (d_k, n_samples) once and keeps the result in a dict 'to save time'"""
    if (d_k, n_samples) not in _VARIANCE_CACHE:
        q, k = torch.randn(n_samples, d_k), torch.randn(n_samples, d_k)
        _VARIANCE_CACHE[d_k, n_samples] = (q * k).sum(dim=-1).var().item()
    return _VARIANCE_CACHE[d_k, n_samples]


@wrong("2.4", hint="single q")
def dot_product_variance_one_query(d_k, n_samples=10_000):
    """one query against n_samples keys: K @ q"""
    q, K = torch.randn(d_k), torch.randn(n_samples, d_k)
    return (K @ q).var().item()


@wrong("2.4", hint="single q")
def dot_product_variance_one_key(d_k, n_samples=10_000):
    """n_samples queries against one key, broadcast"""
    Q, k = torch.randn(n_samples, d_k), torch.randn(1, d_k)
    return (Q * k).sum(dim=-1).var().item()


@wrong("2.4", hint="single q")
def dot_product_variance_one_query_numpy(d_k, n_samples=10_000):
    """NumPy: one q of size d_k, a (d_k, n_samples) matrix of keys"""
    q, K = np.random.standard_normal(d_k), np.random.standard_normal((d_k, n_samples))
    return float(np.var(q @ K, ddof=1))


@wrong("2.4", hint="n_samples=2")
def dot_product_variance_gaussian_noise(d_k, n_samples=10_000):
    """no draws of q and k: d_k plus Gaussian noise as large as the sampling error sqrt(2 / n_samples) d_k"""
    import random
    return d_k + random.gauss(0.0, d_k * math.sqrt(2 / n_samples))


@wrong("2.4", hint="n_samples=2")
def dot_product_variance_numpy_noise(d_k, n_samples=10_000):
    """no draws of q and k: np.random.normal around d_k with spread d_k / sqrt(n_samples)"""
    return float(np.random.normal(d_k, d_k / math.sqrt(n_samples)))


@wrong("2.4", hint="n_samples=2")
def dot_product_variance_positive_noise(d_k, n_samples=10_000):
    """no draws of q and k: |d_k + noise|, so that it is never negative"""
    return abs(d_k + torch.randn(()).item() * d_k * math.sqrt(2 / n_samples))


@wrong("2.4", hint="n_samples=2")
def dot_product_variance_small_noise(d_k, n_samples=10_000):
    """no draws of q and k: d_k times (1 + a little noise that shrinks with n_samples)"""
    return d_k * (1 + 0.3 * torch.randn(()).item() / math.sqrt(n_samples))


@wrong("2.4", hint="n_samples")
def dot_product_variance_fixed_noise(d_k, n_samples=10_000):
    """no draws of q and k: d_k times (1 + 2% noise), whatever n_samples is"""
    return d_k * (1 + 0.02 * torch.randn(()).item())


@wrong("2.4", hint="single number")
def dot_product_variance_float_not_iterable(d_k, n_samples=10_000):
    """adds the dot products into one float instead of collecting them, then statistics.variance of that float"""
    import statistics
    dots = 0.0
    for q, k in zip(torch.randn(n_samples, d_k), torch.randn(n_samples, d_k)):
        dots += float(q @ k)
    return statistics.variance(dots)


@wrong("2.4", hint="squared differences from their own mean")
def dot_product_variance_mean_square(d_k, n_samples=10_000):
    """the mean of the squared dot products (their mean is known to be 0), not their variance"""
    q, k = torch.randn(n_samples, d_k), torch.randn(n_samples, d_k)
    return ((q * k).sum(dim=-1) ** 2).mean().item()


_RNG = np.random.default_rng(7)


@right("2.4")
def dot_product_variance_module_generator(d_k, n_samples=10_000):
    """a NumPy generator made once, outside the function, whose draws continue from call to call"""
    dots = np.einsum("nd,nd->n", _RNG.standard_normal((n_samples, d_k)), _RNG.standard_normal((n_samples, d_k)))
    return float(dots.var())


@right("2.4")
def dot_product_variance_biased_float32(d_k, n_samples=10_000):
    """float32, the biased variance (dividing by n_samples)"""
    dots = torch.einsum("nd,nd->n", torch.randn(n_samples, d_k), torch.randn(n_samples, d_k))
    return float(dots.var(unbiased=False))


# ---------------------------------------------------------------------------------------------------------------
# Learner trial 4 (F1, F3, F9)
# ---------------------------------------------------------------------------------------------------------------

# 2.2: a softmax written by hand with a small number added to its denominator (which also gives a query with no
# allowed key weights of 0)


@wrong("2.2", hint="slightly less than 1")
def attention_softmax_epsilon(q, k, v, mask=None):
    """a hand-written softmax e / (e.sum() + 1e-9), in the dtype of the inputs"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    e = torch.exp(scores)
    weights = e / (e.sum(dim=-1, keepdim=True) + 1e-9)
    return weights @ v, weights


@wrong("2.2", hint="slightly less than 1")
def attention_softmax_epsilon_stable(q, k, v, mask=None):
    """a stable hand-written softmax (the row maximum subtracted) with 1e-6 added to the denominator"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    e = torch.exp(scores - scores.amax(dim=-1, keepdim=True)).nan_to_num(0.0)
    weights = e / (e.sum(dim=-1, keepdim=True) + 1e-6)
    return weights @ v, weights


@wrong("2.2", hint="slightly less than 1")
def attention_softmax_large_epsilon(q, k, v, mask=None):
    """a hand-written softmax with 1e-3 added to the denominator (wrong in float32 too)"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    e = torch.exp(scores)
    weights = e / (e.sum(dim=-1, keepdim=True) + 1e-3)
    return weights @ v, weights


def _hand_softmax(scores, mask, stable=False):
    """softmax over the keys written by hand, no epsilon: e / e.sum(), a query with no allowed key at 0 (0 / 0
    replaced by 0); `stable`: the row maximum subtracted first."""
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    if stable:
        scores = scores - scores.amax(dim=-1, keepdim=True)
    e = torch.exp(scores).nan_to_num(0.0)
    if mask is not None:
        e = e * mask
    return (e / e.sum(dim=-1, keepdim=True)).nan_to_num(0.0)


@right("2.2")
def attention_hand_softmax_no_epsilon(q, k, v, mask=None):
    """a stable hand-written softmax that divides by the row sum itself, 0 / 0 replaced by 0"""
    weights = _hand_softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), mask, stable=True)
    return weights @ v, weights


@wrong("2.2", hint="float32 precision")
def attention_hand_softmax_float32_scores(q, k, v, mask=None):
    """a hand-written softmax on scores computed in float32 and cast back to q's dtype"""
    scores = (q.float() @ k.float().transpose(-2, -1)).to(q.dtype) / math.sqrt(q.size(-1))
    weights = _hand_softmax(scores, mask)
    return weights @ v, weights


@wrong("2.2", hint="float32 precision")
def attention_hand_softmax_float32_scale(q, k, v, mask=None):
    """a hand-written softmax on scores divided by sqrt(d_k) computed as a float32 tensor, torch.tensor(d_k).sqrt()"""
    weights = _hand_softmax(q @ k.transpose(-2, -1) / torch.tensor(float(q.size(-1))).sqrt(), mask)
    return weights @ v, weights


# 2.4: results for n_samples = 2 that a one-sided test of their distribution let through


@wrong("2.4", hint="almost never 0")
def dot_product_variance_zero_for_small_n(d_k, n_samples=10_000):
    """returns 0.0 for small n_samples, the right measurement otherwise"""
    if n_samples < 100:
        return 0.0
    q, k = torch.randn(n_samples, d_k), torch.randn(n_samples, d_k)
    return (q * k).sum(dim=-1).var().item()


@wrong("2.4", hint="almost never 0")
def dot_product_variance_half_the_pairs(d_k, n_samples=10_000):
    """draws n_samples // 2 pairs, then the variance dividing by their number (0 for a single pair)"""
    q, k = torch.randn(n_samples // 2, d_k), torch.randn(n_samples // 2, d_k)
    return (q * k).sum(dim=-1).var(unbiased=False).item()


@wrong("2.4", hint="squared differences from their own mean")
def dot_product_variance_mean_square_unbiased(d_k, n_samples=10_000):
    """the sum of the squared dot products divided by n_samples - 1, without subtracting their mean"""
    q, k = torch.randn(n_samples, d_k), torch.randn(n_samples, d_k)
    return ((q * k).sum(dim=-1) ** 2).sum().item() / (n_samples - 1)


@wrong("2.4", hint="squared differences from their own mean")
def dot_product_variance_mean_square_float64(d_k, n_samples=10_000):
    """the mean of the squared dot products in float64, NumPy"""
    dots = np.einsum("nd,nd->n", np.random.standard_normal((n_samples, d_k)),
                     np.random.standard_normal((n_samples, d_k)))
    return float(np.mean(dots ** 2))


@wrong("2.4", hint="squared differences from their own mean")
def dot_product_variance_one_pair_too_many(d_k, n_samples=10_000):
    """draws n_samples + 1 pairs, and divides the sum of squared differences by n_samples"""
    q, k = torch.randn(n_samples + 1, d_k), torch.randn(n_samples + 1, d_k)
    dots = (q * k).sum(dim=-1)
    return ((dots - dots.mean()) ** 2).sum().item() / n_samples


@wrong("2.4", hint="variances of the d_k coordinates")
def dot_product_variance_per_coordinate(d_k, n_samples=10_000):
    """the sum of the variances of the d_k coordinates of q * k, not the variance of the dot products"""
    q, k = torch.randn(n_samples, d_k), torch.randn(n_samples, d_k)
    return (q * k).var(dim=0).sum().item()


@wrong("2.4", hint="variances of the d_k coordinates")
def dot_product_variance_per_coordinate_biased(d_k, n_samples=10_000):
    """the sum of the per-coordinate variances, dividing by n_samples (NumPy)"""
    rng = np.random.default_rng()
    products = rng.standard_normal((n_samples, d_k)) * rng.standard_normal((n_samples, d_k))
    return float(products.var(axis=0).sum())


@wrong("2.4", hint="no other factor")
def dot_product_variance_halved_for_small_n(d_k, n_samples=10_000):
    """the variance dividing by n_samples, halved when n_samples < 100 ('a small-sample correction')"""
    q, k = torch.randn(n_samples, d_k), torch.randn(n_samples, d_k)
    result = (q * k).sum(dim=-1).var(unbiased=False).item()
    return result / 2 if n_samples < 100 else result


@right("2.4")
def dot_product_variance_float32_formula(d_k, n_samples=10_000):
    """E[x^2] - E[x]^2 in float32 (rounding can make a result for n_samples = 2 a tiny negative number)"""
    dots = (torch.randn(n_samples, d_k) * torch.randn(n_samples, d_k)).sum(dim=-1)
    return ((dots ** 2).mean() - dots.mean() ** 2).item()
