"""Checker for exercise 3.2, multi-head attention from four matrices."""
from __future__ import annotations

import math

import torch
from torch import Tensor

from ..compare import expect_dtype, randn
from ..runs import ATOL, RTOL, Run, collect, expect_gradients, expect_shape, verdict
from ..forbid import ATTENTION_SHORTCUTS
from ..guard import call
from ..hints import describe
from ..registry import exercise, Wrong
from ...i18n import N_, _
from ._shared import SPLIT_INTERLEAVED, VIEW_WITHOUT_TRANSPOSE, heads_ref, merge_error_hint


def _mha_reference(x: Tensor, W_q: Tensor, W_k: Tensor, W_v: Tensor, W_o: Tensor, n_heads: int) -> Tensor:
    """Concat(head_1, ..., head_h) W_O, one head at a time; head i uses columns i*d_head .. of W_q, W_k, W_v."""
    d_head = x.size(-1) // n_heads
    Q, K, V = x @ W_q, x @ W_k, x @ W_v  # (B, n, d_model) each
    heads = []
    for i in range(n_heads):
        cols = slice(i * d_head, (i + 1) * d_head)
        scores = Q[..., cols] @ K[..., cols].transpose(-2, -1) / math.sqrt(d_head)  # (B, n, n)
        heads.append(torch.softmax(scores, dim=-1) @ V[..., cols])  # (B, n, d_head)
    return torch.cat(heads, dim=-1) @ W_o  # (B, n, d_model)


def _mha_variant(x, W_q, W_k, W_v, W_o, h, *, scale="sqrt_d_head", split="right", merge="right", dim=-1,
                 w_o=True, transpose_qkv=False, transpose_o=False, one_head=False, after_softmax=False,
                 proj="qkv", causal=False, mean_heads=False) -> Tensor:
    """Multi-head attention with one deliberate mistake (the defaults give the right answer)."""
    B, n, d = x.shape
    divisor = {"sqrt_d_head": math.sqrt(d // h), "sqrt_d_model": math.sqrt(d), "none": 1.0, "d_head": d // h,
               "times": 1 / math.sqrt(d // h)}[scale]
    h = 1 if one_head else h  # forgetting to split: one big head over all d_model features
    dh = d // h
    Ws = {"qkv": (W_q, W_k, W_v), "qvk": (W_q, W_v, W_k), "qqq": (W_q, W_q, W_q)}[proj]
    tq, tk, tv = (W.transpose(0, 1) if transpose_qkv else W for W in Ws)
    splitters = {
        "right": lambda t: t.reshape(B, n, h, dh).transpose(1, 2),
        "view": lambda t: t.reshape(B, h, n, dh),
        "interleaved": lambda t: t.reshape(B, n, dh, h).permute(0, 3, 1, 2),
    }
    q, k, v = (splitters[split](x @ W) for W in (tq, tk, tv))  # (B, h, n, d_head)
    scores = q @ k.transpose(-2, -1) / (1.0 if after_softmax else divisor)  # (B, h, n, n)
    if causal:
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    weights = torch.softmax(scores, dim=dim) / (divisor if after_softmax else 1.0)  # (B, h, n, n)
    heads = weights @ v  # (B, h, n, d_head)
    if mean_heads:
        heads = heads.mean(dim=1, keepdim=True).expand_as(heads)
    mergers = {
        "right": lambda t: t.transpose(1, 2).reshape(B, n, d),
        "view": lambda t: t.reshape(B, n, d),
        "interleaved": lambda t: t.permute(0, 2, 3, 1).reshape(B, n, d),
    }
    out = mergers[merge](heads)  # (B, n, d_model)
    if not w_o:
        return out
    return out @ (W_o.transpose(0, 1) if transpose_o else W_o)


def _forward_mistakes(x, W_q, W_k, W_v, W_o, h) -> dict:
    """{hint: output} of the usual mistakes on this input."""
    pairs = [
        (_("you divided the scores by sqrt(d_model); the scale is 1/sqrt(d_head), the size of one head's keys "
           "(d_head = d_model // n_heads)"), dict(scale="sqrt_d_model")),
        (_("you left out the scale: divide each head's scores by sqrt(d_head)"), dict(scale="none")),
        (_("you divided the scores by d_head; the scale divides them by sqrt(d_head)"), dict(scale="d_head")),
        (_("you multiplied the scores by sqrt(d_head); the scale divides them by sqrt(d_head)"), dict(scale="times")),
        (_("you scaled the weights after the softmax; the scale divides the scores, before the softmax"),
         dict(after_softmax=True)),
        (_("you left out the output projection: multiply the merged heads by W_o"), dict(w_o=False)),
        (_("you forgot to split into heads: this is one big head over all d_model features. Split Q, K and V into "
           "n_heads heads of d_head features, attend in each head, then merge"), dict(one_head=True,
         scale="sqrt_d_model")),
        (_("you forgot to split into heads (this is one head over all d_model features, scaled by 1/sqrt(d_head)): "
           "split Q, K and V into (B, n_heads, n, d_head) first"), dict(one_head=True)),
        (_(VIEW_WITHOUT_TRANSPOSE).format(who=_("your split reshaped")), dict(split="view")),
        (_(VIEW_WITHOUT_TRANSPOSE).format(who=_("your split (and merge) reshaped")),
         dict(split="view", merge="view")),
        (_("your merge reshaped (B, n_heads, n, d_head) straight to (B, n, d_model), which mixes positions across "
           "heads: the head axis must move back behind the positions before the heads are flattened together"),
         dict(merge="view")),
        (SPLIT_INTERLEAVED, dict(split="interleaved", merge="interleaved")),
        (_("your softmax normalises over the queries (dim=-2); normalise over the keys (dim=-1)"), dict(dim=-2)),
        (_("the task applies every matrix as x @ W; you used W.T (nn.Linear's convention)"),
         dict(transpose_qkv=True, transpose_o=True)),
        (_("the task applies every matrix as x @ W; you used W.T for W_q, W_k and W_v"),
         dict(transpose_qkv=True)),
        (_("the task applies W_o as merged @ W_o; you used W_o.T"), dict(transpose_o=True)),
        (_("W_k and W_v are swapped: the keys come from x @ W_k and the values from x @ W_v"), dict(proj="qvk")),
        (_("you used W_q for the keys and the values too: W_q, W_k and W_v make three different projections"),
         dict(proj="qqq")),
        (_("you added a causal mask: this is self-attention without a mask, in which every position attends to every "
           "position, later ones included"), dict(causal=True)),
        (_("you averaged the heads: each head's output keeps its own d_head features, and the heads are concatenated "
           "in order before W_o"), dict(mean_heads=True)),
    ]
    out = {hint: _mha_variant(x, W_q, W_k, W_v, W_o, h, **kwargs) for hint, kwargs in pairs}
    B, n, d = x.shape
    q, k, v = (heads_ref(x @ W, h) for W in (W_q, W_k, W_v))  # (B, h, n, d_head)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d // h), dim=-1)  # (B, h, n, n)
    out[_("you returned the heads, (B, n_heads, n, d_head): merge them into (B, n, d_model) and multiply by W_o")] = (
        weights @ v)
    out[_("you returned the attention weights, (B, n_heads, n, n): return the output, (B, n, d_model)")] = weights
    return out


def _forward_cases() -> list[tuple[str, tuple]]:
    """(description, (x, W_q, W_k, W_v, W_o, n_heads)); weights scaled by 1/sqrt(d) so scores stay moderate,
    except in the batch of 1, whose scores exceed 709, where exp overflows unless the maximum is subtracted."""

    def case(B, n, d, h, seed, dtype=torch.float64, x_scale=1.0):
        x = randn(B, n, d, seed=seed, dtype=dtype, std=x_scale)
        Ws = [randn(d, d, seed=seed + i + 1, dtype=dtype, std=1 / math.sqrt(d)) for i in range(4)]
        return (x, *Ws, h)

    return [
        (_("x of shape (2, 5, 12), weights of shape (12, 12), n_heads=3"), case(2, 5, 12, 3, seed=40)),
        (_("a batch of 1 with large scores (some above 1000, where exp overflows): x of shape (1, 4, 8) with "
           "entries of size about 60, n_heads=2"), case(1, 4, 8, 2, seed=50, x_scale=60.0)),
        (_("one head: x of shape (2, 3, 6), n_heads=1"), case(2, 3, 6, 1, seed=60)),
        (_("one feature per head: x of shape (2, 3, 4), n_heads=4"), case(2, 3, 4, 4, seed=70)),
        (_("a single token: x of shape (3, 1, 8), n_heads=2"), case(3, 1, 8, 2, seed=80)),
        (_("x of shape (2, 7, 16) in float32, n_heads=4"), case(2, 7, 16, 4, seed=90, dtype=torch.float32)),
    ]


_FORWARD_INSTEAD = N_("write the attention of each head yourself, from tensor operations and torch.softmax")
# torch.ops.aten.X.default, the overload object of the operator torch.ops.aten.X, is listed too (before the
# operators, while it can still be reached): it is refused even when a notebook holds it under a name of its own.
_ATEN_OPERATORS = tuple(p for p in ATTENTION_SHORTCUTS if p.startswith("torch.ops.aten.")) + (
    "torch.ops.aten._native_multi_head_attention",)
FORWARD_FORBIDDEN = [
    (name, _FORWARD_INSTEAD)
    for name in dict.fromkeys((
        *(f"{p}.default" for p in _ATEN_OPERATORS),
        *ATTENTION_SHORTCUTS,
        *_ATEN_OPERATORS,
        "torch.nn.modules.activation.MultiheadAttention",
        "torch.nn.modules.transformer.TransformerEncoderLayer",
        "torch.nn.modules.transformer.TransformerDecoderLayer",
        "torch.nn.modules.transformer.Transformer",
        "attnbook.layers.EncoderBlock",
        "attnbook.layers.DecoderBlock",
    ))
]
FORWARD_RULE = (N_("head i attends with columns i * d_head to (i + 1) * d_head - 1 of x @ W_q, x @ W_k and x @ W_v, "
                   "softmax(q k^T / sqrt(d_head)) v; the heads are concatenated in order and multiplied by W_o"))


@exercise("3.2", "Multi-head attention from four matrices", answer_name="multi_head_forward",
          section="The shapes, step by step",
          references=("attnbook.multihead.MultiHeadAttention",))
def check_multi_head_forward(multi_head_forward) -> str:
    """multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads) -> Concat(head_1..head_h) W_o, matrices applied as x @ W."""
    cases = _forward_cases()

    def one(case, runs):
        desc, args = case
        got = call(multi_head_forward, *args, what="multi_head_forward", on=desc, forbid=FORWARD_FORBIDDEN,
                   explain=merge_error_hint)
        if isinstance(got, (tuple, list)):
            raise Wrong(_("multi_head_forward returned {describe_got} on {desc}, expected one tensor",
                          describe_got=describe(got), desc=desc),
                        _("return only the output, of shape (B, n, d_model), not the attention weights too"))
        ref, mistakes = _mha_reference(*args), _forward_mistakes(*args)  # (B, n, d_model)
        got = expect_shape(got, ref, mistakes, runs, what=_("your output"), on=desc)
        expect_dtype(got, args[0].dtype, what=_("your output"), on=desc, input_name="x",
                     hint=_("return the dtype of x: compute in x's dtype (no .float() or .double()), and create any "
                            "new tensor with dtype=x.dtype"))
        tol = (1e-10, 1e-9) if args[0].dtype == torch.float64 else (ATOL, RTOL)
        return Run(desc, got, ref, mistakes, *tol)

    verdict(collect(cases, one), what=_("your output"), rule=FORWARD_RULE)
    desc, args = cases[0]
    expect_gradients(multi_head_forward, args, {0: "x", 1: "W_q", 2: "W_k", 3: "W_v", 4: "W_o"}, _mha_reference,
                     what="multi_head_forward", on=desc, forbid=FORWARD_FORBIDDEN, explain=merge_error_hint)
    return _("right on {len_cases} inputs, including a batch of 1, one head, one feature per head and one token",
             len_cases=len(cases))


