"""Chapter 3 (multi-head attention): learner answers to exercises 3.1-3.4, one table per exercise; most rows are the
exercise's learner template (`sh`, `mhf`, `mpc`, `mh`) with one mistake switched on."""
from __future__ import annotations

import functools
import math

import numpy as np
import torch
from torch.nn.functional import softmax as F_softmax

import attnbook.attention as _attention
import attnbook.layers as _layers
import attnbook.multihead as _mh
from attnbook.models import params as _params
from mutants import RIGHT, WRONG, fresh_import, function_copy, right, table, wrong

_mh_copy = fresh_import(_mh, "multihead_ch03")  # a second, separate import of attnbook/multihead.py


# ---------------------------------------------------------------------------------------------------------------
# 3.1 split_heads(x, n_heads): (B, n, d_model) -> (B, n_heads, n, d_head)
# ---------------------------------------------------------------------------------------------------------------

def sh(method="reshape", shape="B, n, h, d_head", move=(1, 2), heads=None):
    """3.1's learner template: x.reshape(B, n, h, d_head).transpose(1, 2), with the named mistakes switched on
    (the defaults: a right answer). method: "reshape" or "view"; shape: the 4-D shape x is cut into, its sizes
    named ("B, n, h, d_head", "B, h, n, d_head" or "B, n, d_head, h"); move: the axes moved after the cut (two for
    transpose, four for permute, None: no move); heads: a number of heads used instead of n_heads."""
    def split_heads(x, n_heads):
        B, n, d = x.shape
        h = n_heads if heads is None else heads
        size = {"B": B, "n": n, "h": h, "d_head": d // h}
        cut = getattr(x, method)(*(size[name] for name in shape.split(", ")))
        if move is None:
            return cut
        return cut.transpose(*move) if len(move) == 2 else cut.permute(*move)
    return split_heads


table("3.1", [
    ("view straight to (B, h, n, d_head), no transpose", "transpos",
     sh(method="view", shape="B, h, n, d_head", move=None)),
    ("reshape straight to (B, h, n, d_head), no transpose",
     "you reshaped (B, n, d_model) straight to (B, n_heads, n, d_head)", sh(shape="B, h, n, d_head", move=None)),
    ("reshape to (B, n, h, d_head) but forget the transpose: returns (B, n, h, d_head)", "transpos", sh(move=None)),
    ("view to (B, n, h, d_head), no transpose", "you stopped at (B, n, n_heads, d_head)",
     sh(method="view", move=None)),
    ("cuts the features the other way round: view(B, n, d_head, h) then moves h forward", "every n_heads-th feature",
     sh(shape="B, n, d_head, h", move=(0, 3, 1, 2))),
    ("mixes up h and d_head: view(B, n, d_head, h).transpose(1, 2)", "every n_heads-th feature",
     sh(shape="B, n, d_head, h")),
    ("transpose(2, 3) after the view instead of transpose(1, 2)", "wrong axes", sh(move=(2, 3))),
    ("transpose(1, 3) after cutting into heads", "swap only the position axis", sh(move=(1, 3))),
    ("cuts into (B, n, h, d_head), then permutes to (B, h, d_head, n)", "one row per position",
     sh(move=(0, 2, 3, 1))),
    ("hard-codes 2 heads (the chapter's labelled example)", WRONG, sh(heads=2)),
    ("hard-codes the first input's sizes: 3 heads of 4 features (fails on the batch of 1, x of shape (1, 4, 6))",
     "a batch of 1: x of shape (1, 4, 6)", lambda x, n_heads: x.view(x.size(0), x.size(1), 3, 4).transpose(1, 2)),
    ("slices with an off-by-one: head i takes features i*d_head+1 ... (wraps round)", "one feature late",
     lambda x, n_heads: sh()(torch.roll(x, shifts=-1, dims=-1), n_heads)),
    ("casts x to float32 first", "dtype torch.float32", lambda x, n_heads: sh(method="view")(x.float(), n_heads)),
    ("returns a list of h tensors (B, n, d_head) instead of one 4-D tensor", WRONG,
     lambda x, n_heads: list(torch.chunk(x, n_heads, dim=-1))),
    ("returns a NumPy array", WRONG, lambda x, n_heads: sh()(x, n_heads).numpy()),
    ("squeezes the batch axis away (fails for a batch of 1)", WRONG, lambda x, n_heads: sh()(x, n_heads).squeeze()),
    ("the arguments in the other order: split_heads(n_heads, x)",
     "the check calls split_heads(x, n_heads), the tensor first", lambda n_heads, x: sh(method="view")(x, n_heads)),
    ("attnbook.multihead.split_heads itself", "is attnbook.multihead.split_heads, the package's own solution",
     _mh.split_heads),
    ("functools.partial of attnbook.multihead.split_heads",
     "is attnbook.multihead.split_heads, the package's own solution", functools.partial(_mh.split_heads)),
    ("a lambda around attnbook.multihead.split_heads", "package's own", lambda x, n_heads: _mh.split_heads(x, n_heads)),
    ("a FunctionType copy of attnbook.multihead.split_heads", "package's own",
     function_copy(_mh.split_heads, "split_heads")),
    ("split_heads from a second, separate import of attnbook/multihead.py", "package's own", _mh_copy.split_heads),
    ("view(B, n, h, d_head).transpose(1, 2)", RIGHT, sh(method="view")),
    ("unflatten + permute, contiguous copy", RIGHT,
     lambda x, n_heads: x.unflatten(-1, (n_heads, -1)).permute(0, 2, 1, 3).contiguous()),
    ("torch.chunk then stack", RIGHT, lambda x, n_heads: torch.stack(torch.chunk(x, n_heads, dim=-1), dim=1)),
])


@wrong("3.1", hint="dtype")
def split_heads(x, n_heads):
    """builds the result in a new float32 tensor, losing float64"""
    B, n, d = x.shape
    out = torch.empty(B, n_heads, n, d // n_heads)
    for i in range(n_heads):
        out[:, i] = x[..., i * (d // n_heads):(i + 1) * (d // n_heads)]
    return out


@wrong("3.1", hint="in place")
def split_heads(x, n_heads):
    """changes x in place (x.add_(1) after taking a copy)"""
    out = sh()(x, n_heads).contiguous()
    x.add_(1.0)
    return out


@wrong("3.1", hint="Hint: head i holds features")
def split_heads(x, n_heads):
    """right, except on float64 inputs, where it swaps the last two axes (no single mistake explains every case)"""
    out = sh()(x, n_heads)
    return out.transpose(2, 3).reshape(out.shape) if x.dtype == torch.float64 else out


@wrong("3.1", hint="package's own")
def split_heads(x, n_heads):
    """a def wrapper that calls attnbook.multihead.split_heads"""
    from attnbook.multihead import split_heads as theirs
    return theirs(x, n_heads)


@wrong("3.1", hint="calls attnbook.multihead.split_heads")
def split_heads(x, n_heads):
    """imports attnbook.multihead.split_heads under another name inside the function"""
    from attnbook.multihead import split_heads as library_split

    return library_split(x, n_heads)


@right("3.1")
def split_heads(x, n_heads):
    """torch.stack of the column blocks along dim 1"""
    d_head = x.shape[-1] // n_heads
    return torch.stack([x[..., i * d_head:(i + 1) * d_head] for i in range(n_heads)], dim=1)


@right("3.1")
def split_heads(x, n_heads, *, d_head=None):
    """an explicit loop over heads into a preallocated tensor of x's dtype, extra keyword"""
    B, n, d = x.shape
    d_head = d_head or d // n_heads
    out = x.new_empty(B, n_heads, n, d_head)
    for i in range(n_heads):
        out[:, i] = x[:, :, i * d_head:(i + 1) * d_head]
    return out


# ---------------------------------------------------------------------------------------------------------------
# 3.2 multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads)
# ---------------------------------------------------------------------------------------------------------------

def _split(t, h):
    B, n, d = t.shape
    return t.reshape(B, n, h, d // h).transpose(1, 2)


def _merge(t):
    B, h, n, dh = t.shape
    return t.transpose(1, 2).reshape(B, n, h * dh)


def mhf(split="heads", merge="heads", transposed=(), kv=("W_k", "W_v"), k_transposed=True, scale="sqrt(d_head)",
        mask=False, softmax="torch.softmax", softmax_dim=-1, attention=None, heads_mean=False, w_o=True,
        returns="output", detach=False, compute_in=None, cast_back=False):
    """3.2's learner template: project, split into heads, softmax(q k^T / sqrt(d_head)) v, merge, then W_o, with
    the named mistakes switched on (the defaults: a right answer). split: "heads" (reshape to (B, n, h, d_head),
    transpose), "straight" (reshape to (B, h, n, d_head)), "interleaved" (every n_heads-th feature) or "none" (one
    head over all d_model features); merge: "heads", "straight" (reshape from (B, h, n, d_head)), "view" (a view
    of the transposed heads) or "interleaved"; transposed: the weights used transposed; kv: the weights of the keys
    and values; k_transposed=False: q @ k; scale: "sqrt(d_head)", None, "sqrt(d_model)", "d_head", "times
    sqrt(d_head)" or "after softmax"; mask: a causal mask; softmax: "torch.softmax" or "exp / sum" (no max
    subtracted); softmax_dim; attention: a function of (q, k, v) used for the whole attention step; heads_mean: the
    heads' mean in place of each head; w_o=False: no output projection; returns: "output", "output, weights",
    "heads" or "weights"; detach: x.detach(); compute_in: a dtype that every input is cast to first; cast_back:
    the result cast back to x's dtype."""
    def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
        dtype = x.dtype
        if compute_in is not None:
            x, W_q, W_k, W_v, W_o = (t.to(compute_in) for t in (x, W_q, W_k, W_v, W_o))
        x = x.detach() if detach else x
        B, n, d = x.shape
        dh = d // n_heads
        W = {name: w.T if name in transposed else w for name, w in
             (("W_q", W_q), ("W_k", W_k), ("W_v", W_v), ("W_o", W_o))}

        split_ = {"heads": lambda t: _split(t, n_heads), "straight": lambda t: t.reshape(B, n_heads, n, dh),
                  "interleaved": lambda t: t.reshape(B, n, dh, n_heads).permute(0, 3, 1, 2), "none": lambda t: t}[split]
        merge_ = {"heads": _merge, "straight": lambda t: t.reshape(B, n, d),
                  "view": lambda t: t.transpose(1, 2).view(B, n, d),
                  "interleaved": lambda t: t.permute(0, 2, 3, 1).reshape(B, n, d)}[merge]
        merge_ = (lambda t: t) if split == "none" else merge_

        q, k, v = split_(x @ W["W_q"]), split_(x @ W[kv[0]]), split_(x @ W[kv[1]])
        if attention is not None:
            return merge_(attention(q, k, v)) @ W["W_o"]
        divisor = {"sqrt(d_head)": math.sqrt(dh), "sqrt(d_model)": math.sqrt(d), "d_head": dh}.get(scale, 1.0)
        s = q @ (k.transpose(-2, -1) if k_transposed else k) / divisor
        if scale == "times sqrt(d_head)":
            s = s * math.sqrt(dh)
        if mask:
            s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
        if softmax == "exp / sum":
            e = torch.exp(s)
            w = e / e.sum(-1, keepdim=True)
        else:
            w = torch.softmax(s, dim=softmax_dim)
        if scale == "after softmax":
            w = w / math.sqrt(dh)
        if returns == "weights":
            return w
        heads = w @ v
        if heads_mean:
            heads = heads.mean(dim=1, keepdim=True).expand_as(heads)
        if returns == "heads":
            return heads
        out = merge_(heads) @ W["W_o"] if w_o else merge_(heads)
        if returns == "output, weights":
            return out, w
        return out.to(dtype) if cast_back else out
    return multi_head_forward


def _called(route, on="x of shape"):
    """The start of the message that refuses `route`."""
    return f"called {route} on {on}"


_aten = torch.ops.aten
_SDPA_OVERLOAD = _aten.scaled_dot_product_attention.default  # an aten overload held under a name of its own


def _flex_attention(q, k, v):
    from torch.nn.attention.flex_attention import flex_attention

    return flex_attention(q, k, v)


def _triton_attention(q, k, v):
    from attnbook.kernels.triton_attention import triton_attention

    return triton_attention(q, k, v)


def _native_mha(op):
    """multi_head_forward through `op`, a fused multi-head attention with zero biases."""
    def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
        d = x.size(-1)
        zeros = torch.zeros(3 * d, dtype=x.dtype)
        out, _ = op(x, x, x, d, n_heads, torch.cat([W_q.T, W_k.T, W_v.T]), zeros, W_o.T, zeros[:d],
                    need_weights=False)
        return out
    return multi_head_forward


@right("3.2")  # the first right answer (the generated entries are named after it), so registered before the table
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """softmax over dim=3 (the key axis of the 4-D scores), torch.nn.functional.softmax"""
    dh = x.shape[-1] // n_heads
    q, k, v = _split(x @ W_q, n_heads), _split(x @ W_k, n_heads), _split(x @ W_v, n_heads)
    return _merge(F_softmax(torch.matmul(q, k.permute(0, 1, 3, 2)) / math.sqrt(dh), dim=3) @ v) @ W_o


table("3.2", [
    ("forgets the 1/sqrt(d_head) scale", "you left out the scale", mhf(scale=None)),
    ("scales by sqrt(d_model) instead of sqrt(d_head)",
     "you divided the scores by sqrt(d_model); the scale is 1/sqrt(d_head)", mhf(scale="sqrt(d_model)")),
    ("divides the scores by d_head, not its square root", "divided the scores by d_head", mhf(scale="d_head")),
    ("multiplies the scores by sqrt(d_head) instead of dividing", "multiplied the scores by sqrt(d_head)",
     mhf(scale="times sqrt(d_head)")),
    ("scales after the softmax: softmax(q k^T) / sqrt(d_head)", "after the softmax", mhf(scale="after softmax")),
    ("softmax over the query axis (dim=-2)", "normalises over the queries (dim=-2); normalise over the keys (dim=-1)",
     mhf(softmax_dim=-2)),
    ("unstable softmax: exp(scores) / sum, no max subtracted (overflows on large scores)", "overflows",
     mhf(softmax="exp / sum")),
    ("causal mask added although the task says without a mask", "causal mask", mhf(mask=True)),
    ("splits with view(B, h, n, d_head), no transpose (and merges with the matching reshape)",
     "your split (and merge) reshaped (B, n, d_model) straight to (B, n_heads, n, d_head)",
     mhf(split="straight", merge="straight")),
    ("splits with view(B, h, n, d_head), no transpose, but merges right (transpose, then reshape)",
     "your split reshaped (B, n, d_model) straight to (B, n_heads, n, d_head)", mhf(split="straight")),
    ("right split, but merges with reshape(B, n, d) straight from (B, h, n, d_head)", "your merge reshaped",
     mhf(merge="straight")),
    ("merges with .transpose(1, 2).view(B, n, d), a view of a transposed tensor (no .contiguous())",
     "call .contiguous() before .view()", mhf(merge="view")),
    ("splits and merges the heads feature by feature (interleaved)", "every n_heads-th feature",
     mhf(split="interleaved", merge="interleaved")),
    ("ignores n_heads: one big head over all d_model features", "you forgot to split into heads",
     mhf(split="none", scale="sqrt(d_model)")),
    ("one big head over all d_model features, but scaled by 1/sqrt(d_head)",
     "you forgot to split into heads (this is one head over all d_model features, scaled by 1/sqrt(d_head))",
     mhf(split="none")),
    ("two mistakes at once: one big head over all d_model features, and no scale", "wrong values",
     mhf(split="none", scale=None)),
    ("applies the weights nn.Linear-style, x @ W.T", "you used W.T (nn.Linear's convention)",
     mhf(transposed=("W_q", "W_k", "W_v", "W_o"))),
    ("transposes W_q, W_k and W_v only", "W.T for W_q, W_k and W_v", mhf(transposed=("W_q", "W_k", "W_v"))),
    ("transposes W_o only", "you used W_o.T", mhf(transposed=("W_o",))),
    ("swaps W_k and W_v", "swapped", mhf(kv=("W_v", "W_k"))),
    ("uses x @ W_q for the queries, keys and values", "W_q for the keys", mhf(kv=("W_q", "W_q"))),
    ("scores without transposing k: q @ k (only runs when n == d_head)", WRONG, mhf(k_transposed=False)),
    ("averages the heads' outputs instead of concatenating them (repeats the mean h times)", "averaged the heads",
     mhf(heads_mean=True)),
    ("forgets the output projection W_o", "you left out the output projection: multiply the merged heads by W_o",
     mhf(w_o=False)),
    ("returns (output, weights) like nn.MultiheadAttention",
     "return only the output, of shape (B, n, d_model), not the attention weights too",
     mhf(returns="output, weights")),
    ("returns the heads, unmerged", "you returned the heads, (B, n_heads, n, d_head): merge them into (B, n, d_model)",
     mhf(returns="heads")),
    ("returns the attention weights", "you returned the attention weights", mhf(returns="weights")),
    ("returns float32 whatever the input (casts everything with .float())",
     "return the dtype of x: compute in x's dtype", mhf(compute_in=torch.float32)),
    ("casts everything with .double(): float64 for float32 inputs", "return the dtype of x: compute in x's dtype",
     mhf(compute_in=torch.float64)),
    ("computes in float32 and casts the output back to x's dtype", "significant digits",
     mhf(compute_in=torch.float32, cast_back=True)),
    ("detaches x (no gradient flows back to the input)",
     "gradient of multi_head_forward's result with respect to x is missing", mhf(detach=True)),
    ("uses torch.nn.functional.scaled_dot_product_attention", "without",
     mhf(attention=torch.nn.functional.scaled_dot_product_attention)),
    ("uses torch.ops.aten._scaled_dot_product_attention_math", "without",
     mhf(attention=lambda q, k, v: torch.ops.aten._scaled_dot_product_attention_math(q, k, v)[0])),
    ("uses attnbook.attention.scaled_dot_product_attention per head", "without",
     mhf(attention=lambda q, k, v: _attention.scaled_dot_product_attention(q, k, v)[0])),
    # every other route to a ready-made attention, refused by name
    ("uses torch.ops.aten.scaled_dot_product_attention", _called("torch.ops.aten.scaled_dot_product_attention"),
     mhf(attention=lambda q, k, v: _aten.scaled_dot_product_attention(q, k, v))),
    ("holds the overload torch.ops.aten.scaled_dot_product_attention.default under a name of its own",
     _called("torch.ops.aten.scaled_dot_product_attention.default"),
     mhf(attention=lambda q, k, v: _SDPA_OVERLOAD(q, k, v))),
    ("uses torch.ops.aten._scaled_dot_product_flash_attention_for_cpu",
     _called("torch.ops.aten._scaled_dot_product_flash_attention_for_cpu"),
     mhf(attention=lambda q, k, v: _aten._scaled_dot_product_flash_attention_for_cpu(q, k, v)[0])),
    ("uses torch.ops.aten.scaled_dot_product_attention.default",
     _called("torch.ops.aten.scaled_dot_product_attention"),
     mhf(attention=lambda q, k, v: _aten.scaled_dot_product_attention.default(q, k, v))),
    ("uses torch.ops.aten._scaled_dot_product_attention_math.default",
     _called("torch.ops.aten._scaled_dot_product_attention_math"),
     mhf(attention=lambda q, k, v: _aten._scaled_dot_product_attention_math.default(q, k, v)[0])),
    ("uses torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default",
     _called("torch.ops.aten._scaled_dot_product_flash_attention_for_cpu"),
     mhf(attention=lambda q, k, v: _aten._scaled_dot_product_flash_attention_for_cpu.default(q, k, v)[0])),
    ("uses flex_attention", _called("torch.nn.attention.flex_attention.flex_attention"),
     mhf(attention=_flex_attention)),
    ("uses the package's Triton kernel", _called("attnbook.kernels.triton_attention.triton_attention"),
     mhf(attention=_triton_attention)),
    ("uses the package's tiled_attention", _called("attnbook.attention.tiled_attention"),
     mhf(attention=lambda q, k, v: _attention.tiled_attention(q, k, v))),
    ("uses the fused torch._native_multi_head_attention", _called("torch._native_multi_head_attention"),
     _native_mha(lambda *a, **k: torch._native_multi_head_attention(*a, **k))),
    ("uses the fused torch.ops.aten._native_multi_head_attention",
     _called("torch.ops.aten._native_multi_head_attention"),
     _native_mha(lambda *a, **k: _aten._native_multi_head_attention(*a, **k))),
])


@wrong("3.2", hint=_called("torch.nn.TransformerEncoderLayer"))
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """copies the matrices into an nn.TransformerEncoderLayer and runs its self-attention"""
    layer = torch.nn.TransformerEncoderLayer(x.size(-1), n_heads, dropout=0.0, bias=False, batch_first=True)
    layer = layer.to(x.dtype)
    with torch.no_grad():
        layer.self_attn.in_proj_weight.copy_(torch.cat([W_q.T, W_k.T, W_v.T]))
        layer.self_attn.out_proj.weight.copy_(W_o.T)
    return layer.self_attn(x, x, x, need_weights=False)[0]


@wrong("3.2", hint="carries no gradient back to x")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """computes under torch.no_grad()"""
    with torch.no_grad():
        return mhf()(x, W_q, W_k, W_v, W_o, n_heads)


@wrong("3.2", hint="without")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """uses F.multi_head_attention_forward with packed weights"""
    import torch.nn.functional as F
    d = x.shape[-1]
    xt = x.transpose(0, 1)
    w_in = torch.cat([W_q.T, W_k.T, W_v.T], dim=0)
    out, _ = F.multi_head_attention_forward(xt, xt, xt, d, n_heads, w_in, None, None, None, False, 0.0,
                                            W_o.T, None, training=False, need_weights=False)
    return out.transpose(0, 1)


@wrong("3.2", hint="package's own")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """copies the matrices into attnbook's MultiHeadAttention and runs it"""
    d = x.shape[-1]
    layer = _mh.MultiHeadAttention(d, n_heads, bias=False).to(x.dtype)
    with torch.no_grad():
        for p, W in ((layer.q_proj, W_q), (layer.k_proj, W_k), (layer.v_proj, W_v), (layer.out_proj, W_o)):
            p.weight.copy_(W.T)
        return layer(x, x, x)[0]


@wrong("3.2", hint="without")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """copies the matrices into torch's nn.MultiheadAttention and runs it"""
    d = x.shape[-1]
    layer = torch.nn.MultiheadAttention(d, n_heads, bias=False, batch_first=True).to(x.dtype)
    with torch.no_grad():
        layer.in_proj_weight.copy_(torch.cat([W_q.T, W_k.T, W_v.T], dim=0))
        layer.out_proj.weight.copy_(W_o.T)
        return layer(x, x, x, need_weights=False)[0]


@right("3.2")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """splits with view(B, n, h, d_head).transpose(1, 2), merges with .transpose(1, 2).contiguous().view"""
    B, n, d = x.shape
    dh = d // n_heads
    q, k, v = ((x @ W).view(B, n, n_heads, dh).transpose(1, 2) for W in (W_q, W_k, W_v))
    out = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dh), dim=-1) @ v
    return out.transpose(1, 2).contiguous().view(B, n, d) @ W_o


@right("3.2")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """imports the package's split_heads and merge_heads by name (allowed) and writes the attention itself"""
    from attnbook.multihead import merge_heads, split_heads

    q, k, v = (split_heads(x @ W, n_heads) for W in (W_q, W_k, W_v))
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    return merge_heads(weights @ v) @ W_o


@right("3.2")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """one head at a time in a Python loop, then torch.cat"""
    d = x.shape[-1]
    dh = d // n_heads
    Q, K, V = x @ W_q, x @ W_k, x @ W_v
    outs = []
    for i in range(n_heads):
        sl = slice(i * dh, (i + 1) * dh)
        w = torch.softmax(Q[..., sl] @ K[..., sl].transpose(-2, -1) / dh ** 0.5, dim=-1)
        outs.append(w @ V[..., sl])
    return torch.cat(outs, dim=-1) @ W_o


@right("3.2")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """einsum throughout, with the package's split_heads and merge_heads (allowed)"""
    dh = x.shape[-1] // n_heads
    q, k, v = (_mh.split_heads(torch.einsum("bnd,de->bne", x, W), n_heads) for W in (W_q, W_k, W_v))
    w = torch.softmax(torch.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(dh), dim=-1)
    return torch.einsum("bne,ef->bnf", _mh.merge_heads(torch.einsum("bhij,bhjd->bhid", w, v)), W_o)


@right("3.2")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """scales q before the product, sum over heads of head_i @ W_o block"""
    B, n, d = x.shape
    dh = d // n_heads
    q = _split(x @ W_q, n_heads) * dh ** -0.5
    k, v = _split(x @ W_k, n_heads), _split(x @ W_v, n_heads)
    heads = torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v
    return sum(heads[:, i] @ W_o[i * dh:(i + 1) * dh] for i in range(n_heads))


@right("3.2")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads, *, scale=None):
    """one fused QKV product, flattened (B*h) batch with torch.bmm, max-subtracted softmax, extra kwarg"""
    B, n, d = x.shape
    dh = d // n_heads
    qkv = x @ torch.cat([W_q, W_k, W_v], dim=1)                     # (B, n, 3d)
    q, k, v = (t.reshape(B, n, n_heads, dh).permute(0, 2, 1, 3).reshape(B * n_heads, n, dh)
               for t in qkv.split(d, dim=-1))
    s = torch.bmm(q, k.transpose(1, 2)) * (scale or 1 / math.sqrt(dh))
    s = s - s.amax(dim=-1, keepdim=True)
    w = s.exp() / s.exp().sum(dim=-1, keepdim=True)
    heads = torch.bmm(w, v).reshape(B, n_heads, n, dh).permute(0, 2, 1, 3).reshape(B, n, d)
    return heads @ W_o


# ---------------------------------------------------------------------------------------------------------------
# 3.3 mha_param_count(d_model, n_heads, bias=True)
# ---------------------------------------------------------------------------------------------------------------

def mpc(matrices=4, weights="d_model ** 2", heads_times=None, use_bias="if bias", bias_vectors=None,
        bias_size="d_model", layer_norm=False, default_bias=True, returns=None):
    """3.3's learner template: 4 d^2 + 4 d with an if, with the named mistakes switched on (the defaults: a right
    answer). matrices: the projections counted (each with its bias vector); weights: each matrix as "d_model ** 2",
    "d_head with /" (d_model x (n_heads * d_head), d_head = d_model / n_heads), "math.pow" or "per-head d_head x
    d_head"; heads_times: "weights" or "all", what is multiplied by n_heads; use_bias: "if bias", "always" or
    "never"; bias_vectors: the bias vectors counted (default: one per matrix); bias_size: "d_model" or "n_heads"
    numbers each; layer_norm: a LayerNorm's 2 d_model added; default_bias: bias's default; returns: what the count
    is returned as (torch.tensor, a string, ...)."""
    def mha_param_count(d_model, n_heads, bias=default_bias):
        if weights == "d_head with /":
            total = matrices * d_model * (n_heads * (d_model / n_heads))
        elif weights == "math.pow":
            total = matrices * math.pow(d_model, 2)
        elif weights == "per-head d_head x d_head":
            total = matrices * n_heads * (d_model // n_heads) ** 2
        else:
            total = matrices * d_model ** 2
        if heads_times == "weights":
            total = n_heads * total
        if use_bias == "always" or (use_bias == "if bias" and bias):
            total += (matrices if bias_vectors is None else bias_vectors) * (n_heads if bias_size == "n_heads"
                                                                            else d_model)
        if heads_times == "all":
            total = n_heads * total
        if layer_norm:
            total += 2 * d_model
        return total if returns is None else returns(total)
    return mha_param_count


_KNOWN_3_3 = {(512, 8, True): 1_050_624, (768, 12, True): 2_362_368, (768, 12, False): 2_359_296, (64, 1, True): 16_640,
              (1024, 16, False): 4_194_304, (12288, 96, True): 604_028_928, (6, 3, True): 168, (6, 3, False): 144}
_FLOAT_HINT = ("is a float. Hint: a parameter count is a whole number: use integer arithmetic (*, + and //), not / or "
               "math.pow")

table("3.3", [
    ("4 d^2 + 4 d with an if", RIGHT, mpc()),
    ("uses / for d_head, so the result is a float", "float", mpc(weights="d_head with /")),
    ("uses math.pow(d, 2)", "float", mpc(weights="math.pow")),
    ("float arithmetic: 4.0 * d_model**2 + 4.0 * d_model", _FLOAT_HINT,
     lambda d_model, n_heads, bias=True: 4.0 * d_model ** 2 + (4.0 * d_model if bias else 0.0)),
    ("true division by 1: 4 * d_model * d_model / 1", _FLOAT_HINT,
     lambda d_model, n_heads, bias=True: 4 * d_model * d_model / 1 + 4 * d_model * bias),
    ("returns a NumPy float64", "float", mpc(returns=np.float64)),
    ("adds 4.5 to the weights: a float that is not a whole number", "not a whole number",
     lambda d_model, n_heads, bias=True: 4 * d_model ** 2 + 4.5),
    ("returns a tensor", "tensor", mpc(returns=torch.tensor)),
    ("sums a tensor of the two parts", "returned a tensor",
     lambda d_model, n_heads, bias=True: torch.tensor([4 * d_model * d_model, 4 * d_model * int(bias)]).sum()),
    ("returns a 0-d NumPy array", "returned a NumPy array",
     lambda d_model, n_heads, bias=True: np.array(4 * d_model * (d_model + bias))),
    ("returns a formatted string", "expected an int", mpc(returns="{:,}".format)),
    ("returns a list of the two parts, [weights, biases]", "expected an int",
     lambda d_model, n_heads, bias=True: [4 * d_model * d_model, 4 * d_model]),
    ("ignores bias: always adds the biases", "bias=False: the projections have no biases", mpc(use_bias="always")),
    ("never counts the biases", "you left out the biases", mpc(use_bias="never")),
    ("leaves out the biases for BERT's size (d_model = 768) only", "count each of the four projections",
     lambda d_model, n_heads, bias=True: 4 * d_model ** 2 + (4 * d_model if bias and d_model != 768 else 0)),
    ("gives bias the default False (the task's default is True)", "(bias left at its default, True)",
     mpc(default_bias=False)),
    ("treats bias as a number of bias vectors: 4 d^2 + d * bias", "one bias vector", mpc(bias_vectors=1)),
    ("no bias on the output projection W_O (three bias vectors)", "you counted three bias vectors; W_O has a bias too",
     mpc(bias_vectors=3)),
    ("one bias per head instead of per feature", "one bias number per head", mpc(bias_size="n_heads")),
    ("a bias of d_model for every head of every projection", "bias of d_model per head",
     lambda d_model, n_heads, bias=True: 4 * d_model * d_model + (4 * n_heads * d_model if bias else 0)),
    ("per-head biases of d_model for Q, K and V, one for W_O", "for W_Q, W_K and W_V",
     lambda d_model, n_heads, bias=True: 4 * d_model * d_model + ((3 * n_heads + 1) * d_model if bias else 0)),
    ("only three projections: forgets W_O", "you left out the output projection W_O", mpc(matrices=3)),
    ("multiplies by the number of heads (thinks every head has its own d x d matrices)", "you multiplied by n_heads",
     mpc(heads_times="all")),
    ("every head has its own d x d weights, biases shared", "multiplied the weight matrices by n_heads",
     mpc(heads_times="weights")),
    ("per-head d_head x d_head matrices: 4 * h * d_head^2", "d_head x d_head", mpc(weights="per-head d_head x d_head")),
    ("counts one head: four d x d_head matrices and d_head biases", "one head only",
     lambda d_model, n_heads, bias=True: 4 * d_model * (d_model // n_heads)
     + (4 * (d_model // n_heads) if bias else 0)),
    ("adds a LayerNorm's 2 d", "no LayerNorm", mpc(layer_norm=True)),
    ("the arguments in the other order", "d_model and n_heads swapped",
     lambda n_heads, d_model, bias=True: mpc()(d_model, n_heads, bias)),
    ("hard-codes BERT-base's answer for d_model = 768", WRONG,
     lambda d_model, n_heads, bias=True: (2362368 if bias else 2359296) if d_model == 768
     else 4 * d_model * d_model + 4 * d_model),
    ("a table of the eight layers the check used to try (learned from an earlier run), 0 for any other",
     "not the number of parameters", lambda d_model, n_heads, bias=True: _KNOWN_3_3.get((d_model, n_heads, bias), 0)),
    ("attnbook.models.params.mha_param_count itself",
     "is attnbook.models.params.mha_param_count, the package's own solution", _params.mha_param_count),
    ("functools.partial of attnbook.models.params.mha_param_count",
     "is attnbook.models.params.mha_param_count, the package's own solution",
     functools.partial(_params.mha_param_count, n_kv_heads=None)),
    ("a lambda around attnbook.models.mha_param_count", "package's own",
     lambda d_model, n_heads, bias=True: _params.mha_param_count(d_model, n_heads, bias=bias)),
    ("a FunctionType copy of attnbook.models.params.mha_param_count", "package's own",
     function_copy(_params.mha_param_count, "mha_param_count")),
    ("mha_param_count from a second import of attnbook/models/params.py", "package's own",
     fresh_import(_params, "params_ch03").mha_param_count),
    # every other counting route, refused by name
    ("builds nn.MultiheadAttention and counts its parameters", "without torch.nn.MultiheadAttention",
     lambda d_model, n_heads, bias=True: sum(p.numel() for p in torch.nn.MultiheadAttention(
         d_model, n_heads, bias=bias).parameters())),
    ("builds four nn.Linear and counts them", "without torch.nn.Linear", lambda d_model, n_heads, bias=True: sum(
        p.numel() for _ in range(4) for p in torch.nn.Linear(d_model, d_model, bias=bias).parameters())),
    ("4 times the package's helper attnbook.models.params._linear",
     _called("attnbook.models.params._linear", "d_model=512"),
     lambda d_model, n_heads, bias=True: 4 * _params._linear(d_model, d_model, bias)),
    ("the package's encoder block count less its feed-forward and LayerNorms",
     _called("attnbook.models.params.encoder_block_param_count", "d_model=512"),
     lambda d_model, n_heads, bias=True: _params.encoder_block_param_count(d_model, n_heads, 4 * d_model)
     - _params.ffn_param_count(d_model, 4 * d_model) - 2 * _params.layer_norm_param_count(d_model)),
    ("the self-attention of an nn.TransformerEncoderLayer on the meta device",
     _called("torch.nn.TransformerEncoderLayer", "d_model=512"), lambda d_model, n_heads, bias=True: sum(
         p.numel() for p in torch.nn.TransformerEncoderLayer(d_model, n_heads, bias=bias, device="meta")
         .self_attn.parameters())),
    ("the self-attention of a TransformerDecoderLayer on the meta device",
     _called("torch.nn.modules.transformer.TransformerDecoderLayer", "d_model=512"),
     lambda d_model, n_heads, bias=True: sum(p.numel() for p in torch.nn.modules.transformer.TransformerDecoderLayer(
         d_model, n_heads, bias=bias, device="meta").self_attn.parameters())),
    ("the first encoder layer's self-attention of an nn.Transformer on the meta device",
     _called("torch.nn.Transformer", "d_model=512"), lambda d_model, n_heads, bias=True: sum(
         p.numel() for p in torch.nn.Transformer(d_model, n_heads, 1, 1, bias=bias, batch_first=True, device="meta")
         .encoder.layers[0].self_attn.parameters())),
    ("the self-attention of the package's EncoderBlock", _called("attnbook.layers.EncoderBlock", "d_model=512"),
     lambda d_model, n_heads, bias=True: sum(
         p.numel() for p in _layers.EncoderBlock(d_model, n_heads, 4, bias=bias).self_attn.parameters())),
    ("sum over the four projections of (d*d + d*bias), using int(bias)", RIGHT,
     lambda d_model, n_heads, bias=True: sum(d_model * d_model + d_model * int(bias) for _ in ("q", "k", "v", "o"))),
    ("a NumPy integer, with an extra harmless keyword", RIGHT,
     lambda d_model, n_heads, bias=True, n_kv_heads=None: np.int64(4) * d_model * (d_model + bool(bias))),
    ("a NumPy int32", RIGHT, lambda d_model, n_heads, bias=True: np.int32(4) * d_model * (d_model + int(bias))),
    ("one line per head: n_heads * 4 * d_head * (d_model + bias)", RIGHT,
     lambda d_model, n_heads, bias=True: n_heads * 4 * (d_model // n_heads) * (d_model + bias)),
    ("computes in floats, then int() of the whole-number result", RIGHT,
     lambda d_model, n_heads, bias=True: int(4.0 * d_model ** 2 + (4.0 * d_model if bias else 0.0))),
])


@wrong("3.3", hint="did you forget the `return` statement?")
def mha_param_count(d_model, n_heads, bias=True):
    """computes the count but returns nothing"""
    4 * d_model * d_model + (4 * d_model if bias else 0)


@wrong("3.3", hint="without attnbook.multihead.MultiHeadAttention")
def mha_param_count(d_model, n_heads, bias=True):
    """counts attnbook's MultiHeadAttention on the meta device"""
    with torch.device("meta"):
        layer = _mh.MultiHeadAttention(d_model, n_heads, bias=bias)
    return sum(p.numel() for p in layer.parameters())


@wrong("3.3", hint="package's own")
def mha_param_count(d_model, n_heads, bias=True):
    """a def wrapper calling attnbook.models.params.mha_param_count"""
    return _params.mha_param_count(d_model, n_heads, bias=bias)


@wrong("3.3", hint="calls attnbook.models.params.mha_param_count")
def mha_param_count(d_model, n_heads, bias=True):
    """imports mha_param_count from attnbook.models.params inside the function and calls it"""
    from attnbook.models.params import mha_param_count

    return mha_param_count(d_model, n_heads, bias=bias)


@right("3.3")
def mha_param_count(d_model, n_heads, bias=True):
    """per-head blocks: 3 * h * (d * d_head) for Q, K, V, plus d*d for W_O"""
    d_head = d_model // n_heads
    qkv = 3 * n_heads * (d_model * d_head + (d_head if bias else 0))
    return qkv + d_model * d_model + (d_model if bias else 0)


# ---------------------------------------------------------------------------------------------------------------
# 3.4 merge_heads(x): (B, h, n, d_head) -> (B, n, h * d_head)
# ---------------------------------------------------------------------------------------------------------------

def mh(move=(1, 2), method="reshape", heads=None):
    """3.4's learner template: x.transpose(1, 2).reshape(B, n, h * d_head), with the named mistakes switched on
    (the defaults: a right answer). move: the axes moved first (two for transpose, four for permute, None: no
    move); method: "reshape" or "view"; heads: a number of heads used instead of x's."""
    def merge_heads(x):
        B, h, n, dh = x.shape
        moved = x if move is None else (x.transpose(*move) if len(move) == 2 else x.permute(*move))
        return getattr(moved, method)(B, n, (h if heads is None else heads) * dh)
    return merge_heads


def merge_via_flat_view(x):
    """Right on contiguous inputs: gathers the numbers from x.view(-1), which needs x contiguous in memory."""
    B, h, n, dh = x.shape
    order = torch.arange(B * h * n * dh).view(B, h, n, dh).transpose(1, 2).reshape(-1)  # memory positions
    return x.view(-1)[order].view(B, n, h * dh)


def merge_via_as_strided(x):
    """Right on contiguous inputs: reads the memory with the strides of a contiguous (B, h, n, d_head) tensor."""
    B, h, n, dh = x.shape
    return x.as_strided((B, n, h, dh), (h * n * dh, dh, n * dh, 1)).reshape(B, n, h * dh)


table("3.4", [
    ("reshape straight from (B, h, n, d_head) to (B, n, d), no transpose",
     "you reshaped (B, n_heads, n, d_head) straight to (B, n, d_model)", mh(move=None)),
    (".contiguous().view(B, n, -1) straight from (B, h, n, d_head), no transpose", "positions are mixed across heads",
     lambda x: x.contiguous().view(x.size(0), x.size(2), -1)),
    ("transpose then view (fails on a non-contiguous input)", "call .contiguous() before .view()", mh(method="view")),
    ("transpose(2, 3) instead of transpose(1, 2)", "wrong axes", mh(move=(2, 3))),
    ("permute(0, 2, 3, 1): interleaves the heads' features (feature-major)", "interleaved", mh(move=(0, 2, 3, 1))),
    ("transposes, but does not flatten the heads together", "flatten the last two axes", lambda x: x.transpose(1, 2)),
    ("concatenates the heads in reverse order", "reverse order",
     lambda x: torch.cat([x[:, i] for i in reversed(range(x.shape[1]))], dim=-1)),
    ("sums the heads instead of concatenating (shape (B, n, d_head))", "don't add or average", lambda x: x.sum(dim=1)),
    ("averages the heads instead of concatenating (shape (B, n, d_head))", "don't add or average",
     lambda x: x.mean(dim=1)),
    ("averages the heads and repeats the average h times", "don't add or average",
     lambda x: x.mean(dim=1).repeat(1, 1, x.shape[1])),
    ("squeezes away size-1 axes (breaks a batch of 1)", WRONG, lambda x: mh()(x).squeeze()),
    ("hard-codes 8 heads", WRONG, mh(heads=8)),
    ("gathers the numbers from x.view(-1) (right only on contiguous inputs)", "use .reshape()",
     merge_via_flat_view),
    ("reads the memory with the strides of a contiguous input (x.as_strided)",
     "right on the contiguous inputs but not on this one", merge_via_as_strided),
    ("attnbook.multihead.merge_heads itself", "is attnbook.multihead.merge_heads, the package's own solution",
     _mh.merge_heads),
    ("functools.partial of attnbook.multihead.merge_heads",
     "is attnbook.multihead.merge_heads, the package's own solution", functools.partial(_mh.merge_heads)),
    ("a lambda around attnbook.multihead.merge_heads", "package's own", lambda x: _mh.merge_heads(x)),
    ("a FunctionType copy of attnbook.multihead.merge_heads", "package's own",
     function_copy(_mh.merge_heads, "merge_heads")),
    ("merge_heads from a second, separate import of attnbook/multihead.py", "package's own", _mh_copy.merge_heads),
    ("transpose(1, 2).contiguous().view(...)", RIGHT,
     lambda x: x.transpose(1, 2).contiguous().view(x.shape[0], x.shape[2], x.shape[1] * x.shape[3])),
    ("torch.cat of the heads along the last axis", RIGHT, lambda x: torch.cat(x.unbind(dim=1), dim=-1)),
    ("permute + flatten(-2)", RIGHT, lambda x: x.permute(0, 2, 1, 3).flatten(start_dim=2)),
])


@wrong("3.4", hint="has dtype torch.float32")
def merge_heads(x):
    """preallocates the result with torch.zeros (float32)"""
    B, h, n, dh = x.shape
    out = torch.zeros(B, n, h * dh)
    for i in range(h):
        out[..., i * dh:(i + 1) * dh] = x[:, i]
    return out


@wrong("3.4", hint="in place")
def merge_heads(x):
    """changes x in place (x.transpose_)"""
    B, h, n, dh = x.shape
    return x.transpose_(1, 2).reshape(B, n, h * dh)


@wrong("3.4", hint="package's own")
def merge_heads(x):
    """a def wrapper that calls attnbook.multihead.merge_heads"""
    return _mh.merge_heads(x)


@wrong("3.4", hint="calls attnbook.multihead.merge_heads")
def merge_heads(x):
    """imports attnbook.multihead.merge_heads under another name inside the function"""
    from attnbook.multihead import merge_heads as library_merge

    return library_merge(x)


@right("3.4")
def merge_heads(x, *, out_dtype=None):
    """Python loops into a new_zeros tensor, extra keyword"""
    B, h, n, dh = x.shape
    out = x.new_zeros(B, n, h * dh)
    for b in range(B):
        for i in range(h):
            out[b, :, i * dh:(i + 1) * dh] = x[b, i]
    return out


@right("3.4")
def merge_heads(x):
    """einsum with an identity to move the axes, then reshape"""
    B, h, n, dh = x.shape
    return torch.einsum("bhnd->bnhd", x).reshape(B, n, -1)
