"""Chapter 3 (multi-head attention): learner answers to exercises 3.1-3.4."""
from __future__ import annotations

import functools
import importlib.util
import math
import types

import numpy as np
import torch
from torch.nn.functional import softmax as F_softmax

import attnbook.multihead as _mh
from attnbook.models import params as _params
from mutants import right, wrong


def _second_import(module):
    """The same module loaded a second time, from its .py file, as a separate module object."""
    spec = importlib.util.spec_from_file_location(module.__name__ + "_copy", module.__file__)
    copy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(copy)
    return copy


def _fn_copy(f):
    return types.FunctionType(f.__code__, f.__globals__, f.__name__, f.__defaults__, f.__closure__)


# ---------------------------------------------------------------------------------------------------------------
# 3.1 split_heads(x, n_heads): (B, n, d_model) -> (B, n_heads, n, d_head)
# ---------------------------------------------------------------------------------------------------------------

@wrong("3.1", hint="transpos")
def split_heads(x, n_heads):
    """view straight to (B, h, n, d_head), no transpose"""
    B, n, d = x.shape
    return x.view(B, n_heads, n, d // n_heads)


@wrong("3.1", hint="transpos")
def split_heads(x, n_heads):
    """reshape to (B, n, h, d_head) but forget the transpose: returns (B, n, h, d_head)"""
    B, n, d = x.shape
    return x.reshape(B, n, n_heads, d // n_heads)


@wrong("3.1", hint="every n_heads-th feature")
def split_heads(x, n_heads):
    """cuts the features the other way round: view(B, n, d_head, h) then moves h forward"""
    B, n, d = x.shape
    return x.reshape(B, n, d // n_heads, n_heads).permute(0, 3, 1, 2)


@wrong("3.1", hint="wrong axes")
def split_heads(x, n_heads):
    """transpose(2, 3) after the view instead of transpose(1, 2)"""
    B, n, d = x.shape
    return x.reshape(B, n, n_heads, d // n_heads).transpose(2, 3)


@wrong("3.1", hint="every n_heads-th feature")
def split_heads(x, n_heads):
    """mixes up h and d_head: view(B, n, d_head, h).transpose(1, 2)"""
    B, n, d = x.shape
    return x.reshape(B, n, d // n_heads, n_heads).transpose(1, 2)


@wrong("3.1", hint=None)
def split_heads(x, n_heads):
    """hard-codes 2 heads (the chapter's labelled example)"""
    B, n, d = x.shape
    return x.reshape(B, n, 2, d // 2).transpose(1, 2)


@wrong("3.1", hint="dtype")
def split_heads(x, n_heads):
    """builds the result in a new float32 tensor, losing float64"""
    B, n, d = x.shape
    out = torch.empty(B, n_heads, n, d // n_heads)
    for i in range(n_heads):
        out[:, i] = x[..., i * (d // n_heads):(i + 1) * (d // n_heads)]
    return out


@wrong("3.1", hint="one feature late")
def split_heads(x, n_heads):
    """slices with an off-by-one: head i takes features i*d_head+1 ... (wraps round)"""
    B, n, d = x.shape
    dh = d // n_heads
    x = torch.roll(x, shifts=-1, dims=-1)
    return x.reshape(B, n, n_heads, dh).transpose(1, 2)


@wrong("3.1", hint="in place")
def split_heads(x, n_heads):
    """changes x in place (x.add_(1) after taking a copy)"""
    B, n, d = x.shape
    out = x.reshape(B, n, n_heads, d // n_heads).transpose(1, 2).contiguous()
    x.add_(1.0)
    return out


@wrong("3.1", hint="a batch of 1: x of shape (1, 4, 6)")
def split_heads(x, n_heads):
    """hard-codes the first input's sizes: 3 heads of 4 features (fails on the batch of 1, x of shape (1, 4, 6))"""
    return x.view(x.size(0), x.size(1), 3, 4).transpose(1, 2)


@wrong("3.1", hint=None)
def split_heads(x, n_heads):
    """returns a list of h tensors (B, n, d_head) instead of one 4-D tensor"""
    return list(torch.chunk(x, n_heads, dim=-1))


@wrong("3.1", hint=None)
def split_heads(x, n_heads):
    """returns a NumPy array"""
    B, n, d = x.shape
    return x.reshape(B, n, n_heads, d // n_heads).transpose(1, 2).numpy()


@wrong("3.1", hint=None)
def split_heads(x, n_heads):
    """squeezes the batch axis away (fails for a batch of 1)"""
    B, n, d = x.shape
    return x.reshape(B, n, n_heads, d // n_heads).transpose(1, 2).squeeze()


wrong("3.1", hint="is attnbook.multihead.split_heads, the package's own solution",
      name="attnbook.multihead.split_heads itself")(_mh.split_heads)
wrong("3.1", hint="is attnbook.multihead.split_heads, the package's own solution",
      name="functools.partial of attnbook.multihead.split_heads")(functools.partial(_mh.split_heads))
wrong("3.1", hint="package's own", name="a lambda around attnbook.multihead.split_heads")(
    lambda x, n_heads: _mh.split_heads(x, n_heads))


@wrong("3.1", hint="package's own")
def split_heads(x, n_heads):
    """a def wrapper that calls attnbook.multihead.split_heads"""
    from attnbook.multihead import split_heads as theirs
    return theirs(x, n_heads)


wrong("3.1", hint="package's own", name="a FunctionType copy of attnbook.multihead.split_heads")(
    _fn_copy(_mh.split_heads))
wrong("3.1", hint="package's own", name="split_heads from a second, separate import of attnbook/multihead.py")(
    _second_import(_mh).split_heads)


@right("3.1")
def split_heads(x, n_heads):
    """view(B, n, h, d_head).transpose(1, 2)"""
    B, n, d = x.shape
    return x.view(B, n, n_heads, d // n_heads).transpose(1, 2)


@right("3.1")
def split_heads(x, n_heads):
    """torch.stack of the column blocks along dim 1"""
    d_head = x.shape[-1] // n_heads
    return torch.stack([x[..., i * d_head:(i + 1) * d_head] for i in range(n_heads)], dim=1)


@right("3.1")
def split_heads(x, n_heads):
    """unflatten + permute, contiguous copy"""
    return x.unflatten(-1, (n_heads, -1)).permute(0, 2, 1, 3).contiguous()


@right("3.1")
def split_heads(x, n_heads, *, d_head=None):
    """an explicit loop over heads into a preallocated tensor of x's dtype, extra keyword"""
    B, n, d = x.shape
    d_head = d_head or d // n_heads
    out = x.new_empty(B, n_heads, n, d_head)
    for i in range(n_heads):
        out[:, i] = x[:, :, i * d_head:(i + 1) * d_head]
    return out


@right("3.1")
def split_heads(x, n_heads):
    """torch.chunk then stack"""
    return torch.stack(torch.chunk(x, n_heads, dim=-1), dim=1)


# ---------------------------------------------------------------------------------------------------------------
# 3.2 multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads)
# ---------------------------------------------------------------------------------------------------------------

def _split(t, h):
    B, n, d = t.shape
    return t.reshape(B, n, h, d // h).transpose(1, 2)


def _merge(t):
    B, h, n, dh = t.shape
    return t.transpose(1, 2).reshape(B, n, h * dh)


@wrong("3.2", hint="you left out the scale")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """forgets the 1/sqrt(d_head) scale"""
    q, k, v = _split(x @ W_q, n_heads), _split(x @ W_k, n_heads), _split(x @ W_v, n_heads)
    return _merge(torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v) @ W_o


@wrong("3.2", hint="you divided the scores by sqrt(d_model); the scale is 1/sqrt(d_head)")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """scales by sqrt(d_model) instead of sqrt(d_head)"""
    d = x.shape[-1]
    q, k, v = _split(x @ W_q, n_heads), _split(x @ W_k, n_heads), _split(x @ W_v, n_heads)
    return _merge(torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d), dim=-1) @ v) @ W_o


@wrong("3.2", hint="normalises over the queries (dim=-2); normalise over the keys (dim=-1)")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """softmax over the query axis (dim=-2)"""
    dh = x.shape[-1] // n_heads
    q, k, v = _split(x @ W_q, n_heads), _split(x @ W_k, n_heads), _split(x @ W_v, n_heads)
    return _merge(torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dh), dim=-2) @ v) @ W_o


@wrong("3.2", hint="your split (and merge) reshaped (B, n, d_model) straight to (B, n_heads, n, d_head)")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """splits with view(B, h, n, d_head), no transpose (and merges with the matching reshape)"""
    B, n, d = x.shape
    dh = d // n_heads
    sp = lambda t: t.reshape(B, n_heads, n, dh)
    q, k, v = sp(x @ W_q), sp(x @ W_k), sp(x @ W_v)
    heads = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dh), dim=-1) @ v
    return heads.reshape(B, n, d) @ W_o


@wrong("3.2", hint="your split reshaped (B, n, d_model) straight to (B, n_heads, n, d_head)")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """splits with view(B, h, n, d_head), no transpose, but merges right (transpose, then reshape)"""
    B, n, d = x.shape
    dh = d // n_heads
    sp = lambda t: t.view(B, n_heads, n, dh)
    q, k, v = sp(x @ W_q), sp(x @ W_k), sp(x @ W_v)
    heads = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dh), dim=-1) @ v
    return _merge(heads) @ W_o


@wrong("3.2", hint="your merge reshaped")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """right split, but merges with reshape(B, n, d) straight from (B, h, n, d_head)"""
    B, n, d = x.shape
    dh = d // n_heads
    q, k, v = _split(x @ W_q, n_heads), _split(x @ W_k, n_heads), _split(x @ W_v, n_heads)
    heads = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dh), dim=-1) @ v
    return heads.reshape(B, n, d) @ W_o


@wrong("3.2", hint="call .contiguous() before .view()")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """merges with .transpose(1, 2).view(B, n, d), a view of a transposed tensor (no .contiguous())"""
    B, n, d = x.shape
    q, k, v = ((x @ W).view(B, n, n_heads, -1).transpose(1, 2) for W in (W_q, W_k, W_v))
    out = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1) @ v
    return out.transpose(1, 2).view(B, n, d) @ W_o


@wrong("3.2", hint="you used W.T (nn.Linear's convention)")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """applies the weights nn.Linear-style, x @ W.T"""
    dh = x.shape[-1] // n_heads
    q, k, v = _split(x @ W_q.T, n_heads), _split(x @ W_k.T, n_heads), _split(x @ W_v.T, n_heads)
    return _merge(torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dh), dim=-1) @ v) @ W_o.T


@wrong("3.2", hint="you left out the output projection: multiply the merged heads by W_o")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """forgets the output projection W_o"""
    dh = x.shape[-1] // n_heads
    q, k, v = _split(x @ W_q, n_heads), _split(x @ W_k, n_heads), _split(x @ W_v, n_heads)
    return _merge(torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dh), dim=-1) @ v)


@wrong("3.2", hint="swapped")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """swaps W_k and W_v"""
    dh = x.shape[-1] // n_heads
    q, k, v = _split(x @ W_q, n_heads), _split(x @ W_v, n_heads), _split(x @ W_k, n_heads)
    return _merge(torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dh), dim=-1) @ v) @ W_o


@wrong("3.2", hint="you forgot to split into heads")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """ignores n_heads: one big head over all d_model features"""
    d = x.shape[-1]
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    return (torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d), dim=-1) @ v) @ W_o


@wrong("3.2", hint="you forgot to split into heads (this is one head over all d_model features, scaled by "
                   "1/sqrt(d_head))")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """one big head over all d_model features, but scaled by 1/sqrt(d_head)"""
    d_head = x.size(-1) // n_heads
    Q, K, V = x @ W_q, x @ W_k, x @ W_v
    return torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(d_head), dim=-1) @ V @ W_o


@wrong("3.2", hint="wrong values")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """two mistakes at once: one big head over all d_model features, and no scale"""
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    return (torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v) @ W_o


@wrong("3.2", hint="dtype")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """returns float32 whatever the input (casts everything with .float())"""
    x, W_q, W_k, W_v, W_o = (t.float() for t in (x, W_q, W_k, W_v, W_o))
    dh = x.shape[-1] // n_heads
    q, k, v = _split(x @ W_q, n_heads), _split(x @ W_k, n_heads), _split(x @ W_v, n_heads)
    return _merge(torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dh), dim=-1) @ v) @ W_o


@wrong("3.2", hint="return only the output, of shape (B, n, d_model), not the attention weights too")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """returns (output, weights) like nn.MultiheadAttention"""
    dh = x.shape[-1] // n_heads
    q, k, v = _split(x @ W_q, n_heads), _split(x @ W_k, n_heads), _split(x @ W_v, n_heads)
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dh), dim=-1)
    return _merge(w @ v) @ W_o, w


@wrong("3.2", hint="overflows")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """unstable softmax: exp(scores) / sum, no max subtracted (overflows on large scores)"""
    dh = x.shape[-1] // n_heads
    q, k, v = _split(x @ W_q, n_heads), _split(x @ W_k, n_heads), _split(x @ W_v, n_heads)
    e = torch.exp(q @ k.transpose(-2, -1) / math.sqrt(dh))
    return _merge((e / e.sum(-1, keepdim=True)) @ v) @ W_o


@wrong("3.2", hint="causal mask")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """causal mask added although the task says without a mask"""
    dh = x.shape[-1] // n_heads
    n = x.shape[1]
    q, k, v = _split(x @ W_q, n_heads), _split(x @ W_k, n_heads), _split(x @ W_v, n_heads)
    s = q @ k.transpose(-2, -1) / math.sqrt(dh)
    s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
    return _merge(torch.softmax(s, dim=-1) @ v) @ W_o


@wrong("3.2", hint="averaged the heads")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """averages the heads' outputs instead of concatenating them (repeats the mean h times)"""
    dh = x.shape[-1] // n_heads
    q, k, v = _split(x @ W_q, n_heads), _split(x @ W_k, n_heads), _split(x @ W_v, n_heads)
    heads = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dh), dim=-1) @ v
    mean = heads.mean(dim=1, keepdim=True).expand_as(heads)
    return _merge(mean) @ W_o


@wrong("3.2", hint="multiplied the scores by sqrt(d_head)")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """multiplies the scores by sqrt(d_head) instead of dividing"""
    dh = x.shape[-1] // n_heads
    q, k, v = _split(x @ W_q, n_heads), _split(x @ W_k, n_heads), _split(x @ W_v, n_heads)
    return _merge(torch.softmax(q @ k.transpose(-2, -1) * math.sqrt(dh), dim=-1) @ v) @ W_o


@wrong("3.2", hint="after the softmax")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """scales after the softmax: softmax(q k^T) / sqrt(d_head)"""
    dh = x.shape[-1] // n_heads
    q, k, v = _split(x @ W_q, n_heads), _split(x @ W_k, n_heads), _split(x @ W_v, n_heads)
    return _merge(torch.softmax(q @ k.transpose(-2, -1), dim=-1) / math.sqrt(dh) @ v) @ W_o


@wrong("3.2", hint="W_q for the keys")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """uses x @ W_q for the queries, keys and values"""
    dh = x.shape[-1] // n_heads
    q = _split(x @ W_q, n_heads)
    return _merge(torch.softmax(q @ q.transpose(-2, -1) / math.sqrt(dh), dim=-1) @ q) @ W_o


@wrong("3.2", hint=None)
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """scores without transposing k: q @ k (only runs when n == d_head)"""
    dh = x.shape[-1] // n_heads
    q, k, v = _split(x @ W_q, n_heads), _split(x @ W_k, n_heads), _split(x @ W_v, n_heads)
    return _merge(torch.softmax(q @ k / math.sqrt(dh), dim=-1) @ v) @ W_o


@wrong("3.2", hint="gradient of multi_head_forward's result with respect to x is missing")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """detaches x (no gradient flows back to the input)"""
    x = x.detach()
    dh = x.shape[-1] // n_heads
    q, k, v = _split(x @ W_q, n_heads), _split(x @ W_k, n_heads), _split(x @ W_v, n_heads)
    return _merge(torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dh), dim=-1) @ v) @ W_o


@wrong("3.2", hint="significant digits")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """computes in float32 and casts the output back to x's dtype"""
    xf, Wq, Wk, Wv, Wo = (t.float() for t in (x, W_q, W_k, W_v, W_o))
    dh = x.shape[-1] // n_heads
    q, k, v = _split(xf @ Wq, n_heads), _split(xf @ Wk, n_heads), _split(xf @ Wv, n_heads)
    return (_merge(torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dh), dim=-1) @ v) @ Wo).to(x.dtype)


@wrong("3.2", hint="without")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """uses torch.nn.functional.scaled_dot_product_attention"""
    q, k, v = _split(x @ W_q, n_heads), _split(x @ W_k, n_heads), _split(x @ W_v, n_heads)
    return _merge(torch.nn.functional.scaled_dot_product_attention(q, k, v)) @ W_o


@wrong("3.2", hint="without")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """uses torch.ops.aten._scaled_dot_product_attention_math"""
    q, k, v = _split(x @ W_q, n_heads), _split(x @ W_k, n_heads), _split(x @ W_v, n_heads)
    out, _ = torch.ops.aten._scaled_dot_product_attention_math(q, k, v)
    return _merge(out) @ W_o


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


@wrong("3.2", hint="without")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """uses attnbook.attention.scaled_dot_product_attention per head"""
    from attnbook.attention import scaled_dot_product_attention
    q, k, v = _split(x @ W_q, n_heads), _split(x @ W_k, n_heads), _split(x @ W_v, n_heads)
    out, _ = scaled_dot_product_attention(q, k, v)
    return _merge(out) @ W_o


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
    """softmax over dim=3 (the key axis of the 4-D scores), torch.nn.functional.softmax"""
    dh = x.shape[-1] // n_heads
    q, k, v = _split(x @ W_q, n_heads), _split(x @ W_k, n_heads), _split(x @ W_v, n_heads)
    return _merge(F_softmax(torch.matmul(q, k.permute(0, 1, 3, 2)) / math.sqrt(dh), dim=3) @ v) @ W_o


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

@wrong("3.3", hint="float")
def mha_param_count(d_model, n_heads, bias=True):
    """uses / for d_head, so the result is a float"""
    d_head = d_model / n_heads
    return 4 * d_model * (n_heads * d_head) + (4 * d_model if bias else 0)


@wrong("3.3", hint="float")
def mha_param_count(d_model, n_heads, bias=True):
    """uses math.pow(d, 2)"""
    return 4 * math.pow(d_model, 2) + (4 * d_model if bias else 0)


@wrong("3.3", hint="tensor")
def mha_param_count(d_model, n_heads, bias=True):
    """returns a tensor"""
    return torch.tensor(4 * d_model * d_model + (4 * d_model if bias else 0))


@wrong("3.3", hint="bias=False: the projections have no biases")
def mha_param_count(d_model, n_heads, bias=True):
    """ignores bias: always adds the biases"""
    return 4 * d_model * d_model + 4 * d_model


@wrong("3.3", hint="you left out the biases")
def mha_param_count(d_model, n_heads, bias=True):
    """never counts the biases"""
    return 4 * d_model * d_model


@wrong("3.3", hint="you multiplied by n_heads")
def mha_param_count(d_model, n_heads, bias=True):
    """multiplies by the number of heads (thinks every head has its own d x d matrices)"""
    return n_heads * (4 * d_model * d_model + (4 * d_model if bias else 0))


@wrong("3.3", hint="you left out the output projection W_O")
def mha_param_count(d_model, n_heads, bias=True):
    """only three projections: forgets W_O"""
    return 3 * d_model * d_model + (3 * d_model if bias else 0)


@wrong("3.3", hint="d_head x d_head")
def mha_param_count(d_model, n_heads, bias=True):
    """per-head d_head x d_head matrices: 4 * h * d_head^2"""
    d_head = d_model // n_heads
    return 4 * n_heads * d_head * d_head + (4 * d_model if bias else 0)


@wrong("3.3", hint="one bias number per head")
def mha_param_count(d_model, n_heads, bias=True):
    """one bias per head instead of per feature"""
    return 4 * d_model * d_model + (4 * n_heads if bias else 0)


@wrong("3.3", hint=None)
def mha_param_count(d_model, n_heads, bias=True):
    """hard-codes BERT-base's answer for d_model = 768"""
    if d_model == 768:
        return 2362368 if bias else 2359296
    return 4 * d_model * d_model + 4 * d_model


@wrong("3.3", hint="you counted three bias vectors; W_O has a bias too")
def mha_param_count(d_model, n_heads, bias=True):
    """no bias on the output projection W_O (three bias vectors)"""
    return 4 * d_model * d_model + (3 * d_model if bias else 0)


@wrong("3.3", hint="no LayerNorm")
def mha_param_count(d_model, n_heads, bias=True):
    """adds a LayerNorm's 2 d"""
    return 4 * d_model * d_model + (4 * d_model if bias else 0) + 2 * d_model


@wrong("3.3", hint="expected an int")
def mha_param_count(d_model, n_heads, bias=True):
    """returns a formatted string"""
    return f"{4 * d_model * d_model + (4 * d_model if bias else 0):,}"


@wrong("3.3", hint="expected an int")
def mha_param_count(d_model, n_heads, bias=True):
    """returns a list of the two parts, [weights, biases]"""
    return [4 * d_model * d_model, 4 * d_model]


@wrong("3.3", hint="did you forget the `return` statement?")
def mha_param_count(d_model, n_heads, bias=True):
    """computes the count but returns nothing"""
    4 * d_model * d_model + (4 * d_model if bias else 0)


@wrong("3.3", hint="not a whole number")
def mha_param_count(d_model, n_heads, bias=True):
    """adds 4.5 to the weights: a float that is not a whole number"""
    return 4 * d_model**2 + 4.5


@wrong("3.3", hint="(bias left at its default, True)")
def mha_param_count(d_model, n_heads, bias=False):
    """gives bias the default False (the task's default is True)"""
    return 4 * d_model * d_model + 4 * d_model * bias


@wrong("3.3", hint="one bias vector")
def mha_param_count(d_model, n_heads, bias=True):
    """treats bias as a number of bias vectors: 4 d^2 + d * bias"""
    return 4 * d_model * d_model + d_model * bias


@wrong("3.3", hint="without torch.nn.MultiheadAttention")
def mha_param_count(d_model, n_heads, bias=True):
    """builds nn.MultiheadAttention and counts its parameters"""
    layer = torch.nn.MultiheadAttention(d_model, n_heads, bias=bias)
    return sum(p.numel() for p in layer.parameters())


@wrong("3.3", hint="without torch.nn.Linear")
def mha_param_count(d_model, n_heads, bias=True):
    """builds four nn.Linear and counts them"""
    return sum(p.numel() for _ in range(4) for p in torch.nn.Linear(d_model, d_model, bias=bias).parameters())


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


wrong("3.3", hint="is attnbook.models.params.mha_param_count, the package's own solution",
      name="attnbook.models.params.mha_param_count itself")(_params.mha_param_count)
wrong("3.3", hint="is attnbook.models.params.mha_param_count, the package's own solution",
      name="functools.partial of attnbook.models.params.mha_param_count")(
    functools.partial(_params.mha_param_count, n_kv_heads=None))
wrong("3.3", hint="package's own", name="a lambda around attnbook.models.mha_param_count")(
    lambda d_model, n_heads, bias=True: _params.mha_param_count(d_model, n_heads, bias=bias))
wrong("3.3", hint="package's own", name="a FunctionType copy of attnbook.models.params.mha_param_count")(
    _fn_copy(_params.mha_param_count))
wrong("3.3", hint="package's own", name="mha_param_count from a second import of attnbook/models/params.py")(
    _second_import(_params).mha_param_count)


@wrong("3.3", hint="float")
def mha_param_count(d_model, n_heads, bias=True):
    """returns a NumPy float64"""
    return np.float64(4 * d_model * d_model + (4 * d_model if bias else 0))


@right("3.3")
def mha_param_count(d_model, n_heads, bias=True):
    """4 d^2 + 4 d with an if"""
    total = 4 * d_model ** 2
    if bias:
        total += 4 * d_model
    return total


@right("3.3")
def mha_param_count(d_model, n_heads, bias=True):
    """sum over the four projections of (d*d + d*bias), using int(bias)"""
    return sum(d_model * d_model + d_model * int(bias) for _ in ("q", "k", "v", "o"))


@right("3.3")
def mha_param_count(d_model, n_heads, bias=True):
    """per-head blocks: 3 * h * (d * d_head) for Q, K, V, plus d*d for W_O"""
    d_head = d_model // n_heads
    qkv = 3 * n_heads * (d_model * d_head + (d_head if bias else 0))
    return qkv + d_model * d_model + (d_model if bias else 0)


@right("3.3")
def mha_param_count(d_model, n_heads, bias=True, n_kv_heads=None):
    """a NumPy integer, with an extra harmless keyword"""
    return np.int64(4) * d_model * (d_model + bool(bias))


@right("3.3")
def mha_param_count(d_model, n_heads, bias=True):
    """a NumPy int32"""
    return np.int32(4) * d_model * (d_model + int(bias))


@right("3.3")
def mha_param_count(d_model, n_heads, bias=True):
    """one line per head: n_heads * 4 * d_head * (d_model + bias)"""
    return n_heads * 4 * (d_model // n_heads) * (d_model + bias)


@right("3.3")
def mha_param_count(d_model, n_heads, bias=True):
    """computes in floats, then int() of the whole-number result"""
    return int(4.0 * d_model**2 + (4.0 * d_model if bias else 0.0))


# ---------------------------------------------------------------------------------------------------------------
# 3.4 merge_heads(x): (B, h, n, d_head) -> (B, n, h * d_head)
# ---------------------------------------------------------------------------------------------------------------

@wrong("3.4", hint="you reshaped (B, n_heads, n, d_head) straight to (B, n, d_model)")
def merge_heads(x):
    """reshape straight from (B, h, n, d_head) to (B, n, d), no transpose"""
    B, h, n, dh = x.shape
    return x.reshape(B, n, h * dh)


@wrong("3.4", hint="positions are mixed across heads")
def merge_heads(x):
    """.contiguous().view(B, n, -1) straight from (B, h, n, d_head), no transpose"""
    return x.contiguous().view(x.size(0), x.size(2), -1)


@wrong("3.4", hint="call .contiguous() before .view()")
def merge_heads(x):
    """transpose then view (fails on a non-contiguous input)"""
    B, h, n, dh = x.shape
    return x.transpose(1, 2).view(B, n, h * dh)


@wrong("3.4", hint="wrong axes")
def merge_heads(x):
    """transpose(2, 3) instead of transpose(1, 2)"""
    B, h, n, dh = x.shape
    return x.transpose(2, 3).reshape(B, n, h * dh)


@wrong("3.4", hint="interleaved")
def merge_heads(x):
    """permute(0, 2, 3, 1): interleaves the heads' features (feature-major)"""
    B, h, n, dh = x.shape
    return x.permute(0, 2, 3, 1).reshape(B, n, h * dh)


@wrong("3.4", hint="reverse order")
def merge_heads(x):
    """concatenates the heads in reverse order"""
    return torch.cat([x[:, i] for i in reversed(range(x.shape[1]))], dim=-1)


@wrong("3.4", hint="don't add or average")
def merge_heads(x):
    """sums the heads instead of concatenating (shape (B, n, d_head))"""
    return x.sum(dim=1)


@wrong("3.4", hint="don't add or average")
def merge_heads(x):
    """averages the heads instead of concatenating (shape (B, n, d_head))"""
    return x.mean(dim=1)


@wrong("3.4", hint="don't add or average")
def merge_heads(x):
    """averages the heads and repeats the average h times"""
    B, h, n, dh = x.shape
    return x.mean(dim=1).repeat(1, 1, h)


@wrong("3.4", hint="has dtype torch.float32")
def merge_heads(x):
    """preallocates the result with torch.zeros (float32)"""
    B, h, n, dh = x.shape
    out = torch.zeros(B, n, h * dh)
    for i in range(h):
        out[..., i * dh:(i + 1) * dh] = x[:, i]
    return out


@wrong("3.4", hint=None)
def merge_heads(x):
    """squeezes away size-1 axes (breaks a batch of 1)"""
    B, h, n, dh = x.shape
    return x.transpose(1, 2).reshape(B, n, h * dh).squeeze()


@wrong("3.4", hint="in place")
def merge_heads(x):
    """changes x in place (x.transpose_)"""
    B, h, n, dh = x.shape
    return x.transpose_(1, 2).reshape(B, n, h * dh)


@wrong("3.4", hint=None)
def merge_heads(x):
    """hard-codes 8 heads"""
    B, h, n, dh = x.shape
    return x.transpose(1, 2).reshape(B, n, 8 * dh)


wrong("3.4", hint="is attnbook.multihead.merge_heads, the package's own solution",
      name="attnbook.multihead.merge_heads itself")(_mh.merge_heads)
wrong("3.4", hint="is attnbook.multihead.merge_heads, the package's own solution",
      name="functools.partial of attnbook.multihead.merge_heads")(functools.partial(_mh.merge_heads))
wrong("3.4", hint="package's own", name="a lambda around attnbook.multihead.merge_heads")(
    lambda x: _mh.merge_heads(x))


@wrong("3.4", hint="package's own")
def merge_heads(x):
    """a def wrapper that calls attnbook.multihead.merge_heads"""
    return _mh.merge_heads(x)


wrong("3.4", hint="package's own", name="a FunctionType copy of attnbook.multihead.merge_heads")(
    _fn_copy(_mh.merge_heads))
wrong("3.4", hint="package's own", name="merge_heads from a second, separate import of attnbook/multihead.py")(
    _second_import(_mh).merge_heads)


@right("3.4")
def merge_heads(x):
    """transpose(1, 2).contiguous().view(...)"""
    B, h, n, dh = x.shape
    return x.transpose(1, 2).contiguous().view(B, n, h * dh)


@right("3.4")
def merge_heads(x):
    """torch.cat of the heads along the last axis"""
    return torch.cat(x.unbind(dim=1), dim=-1)


@right("3.4")
def merge_heads(x):
    """permute + flatten(-2)"""
    return x.permute(0, 2, 1, 3).flatten(start_dim=2)


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


# ---------------------------------------------------------------------------------------------------------------
# More wrong answers: one for each hinted mistake of the checkers that the entries above do not make
# ---------------------------------------------------------------------------------------------------------------

@wrong("3.1", hint="one row per position")
def split_heads(x, n_heads):
    """cuts into (B, n, h, d_head), then permutes to (B, h, d_head, n)"""
    B, n, d = x.shape
    return x.reshape(B, n, n_heads, d // n_heads).permute(0, 2, 3, 1)


@wrong("3.1", hint="swap only the position axis")
def split_heads(x, n_heads):
    """transpose(1, 3) after cutting into heads"""
    B, n, d = x.shape
    return x.reshape(B, n, n_heads, d // n_heads).transpose(1, 3)


@wrong("3.2", hint="divided the scores by d_head")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """divides the scores by d_head, not its square root"""
    dh = x.shape[-1] // n_heads
    q, k, v = _split(x @ W_q, n_heads), _split(x @ W_k, n_heads), _split(x @ W_v, n_heads)
    return _merge(torch.softmax(q @ k.transpose(-2, -1) / dh, dim=-1) @ v) @ W_o


@wrong("3.2", hint="W.T for W_q, W_k and W_v")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """transposes W_q, W_k and W_v only"""
    dh = x.shape[-1] // n_heads
    q, k, v = _split(x @ W_q.T, n_heads), _split(x @ W_k.T, n_heads), _split(x @ W_v.T, n_heads)
    return _merge(torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dh), dim=-1) @ v) @ W_o


@wrong("3.2", hint="you used W_o.T")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """transposes W_o only"""
    dh = x.shape[-1] // n_heads
    q, k, v = _split(x @ W_q, n_heads), _split(x @ W_k, n_heads), _split(x @ W_v, n_heads)
    return _merge(torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dh), dim=-1) @ v) @ W_o.T


@wrong("3.2", hint="you returned the heads, (B, n_heads, n, d_head): merge them into (B, n, d_model)")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """returns the heads, unmerged"""
    dh = x.shape[-1] // n_heads
    q, k, v = _split(x @ W_q, n_heads), _split(x @ W_k, n_heads), _split(x @ W_v, n_heads)
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dh), dim=-1) @ v


@wrong("3.2", hint="you returned the attention weights")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """returns the attention weights"""
    dh = x.shape[-1] // n_heads
    q, k = _split(x @ W_q, n_heads), _split(x @ W_k, n_heads)
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dh), dim=-1)


@wrong("3.2", hint="every n_heads-th feature")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """splits and merges the heads feature by feature (interleaved)"""
    B, n, d = x.shape
    dh = d // n_heads
    sp = lambda t: t.reshape(B, n, dh, n_heads).permute(0, 3, 1, 2)
    q, k, v = sp(x @ W_q), sp(x @ W_k), sp(x @ W_v)
    heads = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dh), dim=-1) @ v
    return heads.permute(0, 2, 3, 1).reshape(B, n, d) @ W_o


@wrong("3.2", hint="carries no gradient back to x")
def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
    """computes under torch.no_grad()"""
    with torch.no_grad():
        dh = x.shape[-1] // n_heads
        q, k, v = _split(x @ W_q, n_heads), _split(x @ W_k, n_heads), _split(x @ W_v, n_heads)
        return _merge(torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dh), dim=-1) @ v) @ W_o


@wrong("3.3", hint="d_model and n_heads swapped")
def mha_param_count(n_heads, d_model, bias=True):
    """the arguments in the other order"""
    return 4 * d_model * d_model + (4 * d_model if bias else 0)


@wrong("3.3", hint="bias of d_model per head")
def mha_param_count(d_model, n_heads, bias=True):
    """a bias of d_model for every head of every projection"""
    return 4 * d_model * d_model + (4 * n_heads * d_model if bias else 0)


@wrong("3.3", hint="multiplied the weight matrices by n_heads")
def mha_param_count(d_model, n_heads, bias=True):
    """every head has its own d x d weights, biases shared"""
    return n_heads * 4 * d_model * d_model + (4 * d_model if bias else 0)


@wrong("3.3", hint="one head only")
def mha_param_count(d_model, n_heads, bias=True):
    """counts one head: four d x d_head matrices and d_head biases"""
    d_head = d_model // n_heads
    return 4 * d_model * d_head + (4 * d_head if bias else 0)


@wrong("3.3", hint="for W_Q, W_K and W_V")
def mha_param_count(d_model, n_heads, bias=True):
    """per-head biases of d_model for Q, K and V, one for W_O"""
    return 4 * d_model * d_model + ((3 * n_heads + 1) * d_model if bias else 0)


@wrong("3.4", hint="flatten the last two axes")
def merge_heads(x):
    """transposes, but does not flatten the heads together"""
    return x.transpose(1, 2)


# Issue 23: an answer that knows the check's configurations instead of counting

_KNOWN_3_3 = {(512, 8, True): 1_050_624, (768, 12, True): 2_362_368, (768, 12, False): 2_359_296, (64, 1, True): 16_640,
              (1024, 16, False): 4_194_304, (12288, 96, True): 604_028_928, (6, 3, True): 168, (6, 3, False): 144}


@wrong("3.3", hint="not the number of parameters")
def mha_param_count(d_model, n_heads, bias=True):
    """a table of the eight layers the check used to try (learned from an earlier run), 0 for any other"""
    return _KNOWN_3_3.get((d_model, n_heads, bias), 0)
