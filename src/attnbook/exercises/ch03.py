"""Checkers for chapter 3, multi-head attention.

The references are written out here from the definitions, independently of `attnbook.multihead`: a head is a
block of d_head consecutive features (sliced out one head at a time), multi-head attention is a loop over
heads followed by a concatenation and W_O, and the parameter count is the formula 4 d^2 + 4 d.

Every case is run before a verdict (`collect`), and a mistake is named only when it explains the learner's
result on every case run (`verdict`); chapter 4's checkers use the same helpers.
"""
from __future__ import annotations

import math
import numbers
import re

import torch
from torch import Tensor

from .compare import generator, randn
from .runs import ATOL, RTOL, Run, collect, expect_gradients, expect_shape, verdict
from .forbid import ATTENTION_SHORTCUTS
from .guard import call
from .hints import describe
from .registry import exercise, Wrong
from ..i18n import N_, _

def _heads_ref(x: Tensor, n_heads: int) -> Tensor:
    """(B, n, d) -> (B, h, n, d_head) by slicing: head i holds features i*d_head .. (i+1)*d_head - 1."""
    d_head = x.size(-1) // n_heads
    return torch.stack([x[..., i * d_head:(i + 1) * d_head] for i in range(n_heads)], dim=1)


def _concat_ref(x: Tensor) -> Tensor:
    """(B, h, n, d_head) -> (B, n, h*d_head): the heads' features one after the other."""
    return torch.cat([x[:, i] for i in range(x.size(1))], dim=-1)


REARRANGE_DTYPE_HINT = N_("only rearrange the input (view/reshape, transpose): do not build a new tensor of another dtype")


def _expect_dtype(got: Tensor, x: Tensor, what: str, on: str, hint: str = REARRANGE_DTYPE_HINT) -> None:
    """Wrong unless `got` kept the dtype of the input `x`."""
    if got.dtype != x.dtype:
        raise Wrong(_("{what} has dtype {dtype} on {on}, expected {dtype2}, the dtype of x",
                      what=what, dtype=got.dtype, on=on, dtype2=x.dtype), hint)


# ---------------------------------------------------------------------------------------------------------
# 3.1 split_heads
# ---------------------------------------------------------------------------------------------------------

MERGE_RULE = N_("each position's vector is head 0's d_head features, then head 1's, and so on")
VIEW_WITHOUT_TRANSPOSE = (
    N_("{who} (B, n, d_model) straight to (B, n_heads, n, d_head). The shape is right, but view/reshape "
       "reads the numbers in memory order, so each head gets whole tokens' features and the positions are mixed "
       "across heads. Cut each position's features into n_heads blocks first; only then transpose the head axis "
       "in front of the position axis")
)
SPLIT_INTERLEAVED = (
    N_("each head must take a block of d_head consecutive features (head 0: features 0 .. d_head-1); you gave "
       "head i every n_heads-th feature, as if the features came in d_head groups of n_heads")
)
SPLIT_RULE = (N_("head i holds features i * d_head to (i + 1) * d_head - 1 of every position, and each head's "
                 "matrix has one row per position, in order"))


def _split_error_hint(message: str) -> str | None:
    """The hint for arguments in the wrong order: the check calls split_heads(x, n_heads)."""
    if re.search(r"'int' object (has no attribute|is not subscriptable)", message):
        return (_("the check calls split_heads(x, n_heads), the tensor first and the number of heads second: "
                  "define it as def split_heads(x, n_heads)"))
    return None


def _split_mistakes(x: Tensor, h: int) -> dict:
    B, n, d = x.shape
    dh = d // h
    per_token = x.reshape(B, n, h, dh)  # (B, n, h, d_head)
    return {
        _(VIEW_WITHOUT_TRANSPOSE).format(who=_("you reshaped")): x.reshape(B, h, n, dh),
        SPLIT_INTERLEAVED: x.reshape(B, n, dh, h).permute(0, 3, 1, 2),
        _(SPLIT_INTERLEAVED) + _("; and the head axis must come right after the batch"): x.reshape(B, n, dh, h)
        .transpose(1, 2),
        _("you stopped at (B, n, n_heads, d_head): transpose the head axis in front of the positions, so that "
          "each head holds an (n, d_head) matrix"): per_token,
        _("you transposed the wrong axes: after cutting the features into heads, (B, n, n_heads, d_head), the "
          "positions are axis 1 and the heads axis 2; swap those two"): per_token.transpose(2, 3),
        _("you transposed the wrong axes: swap only the position axis (1) and the head axis (2) of "
          "(B, n, n_heads, d_head)"): per_token.transpose(1, 3),
        _("the last two axes must be (n, d_head), one row per position: you also transposed each head's "
          "matrix"): per_token.permute(0, 2, 3, 1),
        _("each head's block starts one feature late: head i starts at feature i * d_head (counting from 0)"):
            x.roll(-1, dims=-1).reshape(B, n, h, dh).transpose(1, 2),
    }


@exercise("3.1", "Split a tensor into heads", section="Splitting a tensor into heads",
          references=("attnbook.multihead.split_heads",))
def check_split_heads(split_heads) -> str:
    """split_heads(x, n_heads): (B, n, d) -> (B, h, n, d/h), head i holding features i*d_head .. (i+1)*d_head-1."""
    cases = [
        (_("x of shape (2, 5, 12) with n_heads=3"), randn(2, 5, 12, seed=31), 3),
        (_("a batch of 1: x of shape (1, 4, 6) with n_heads=2"), randn(1, 4, 6, seed=32), 2),
        (_("x of shape (2, 3, 8) with n_heads=1 (one head)"), randn(2, 3, 8, seed=33), 1),
        (_("x of shape (2, 3, 4) with n_heads=4 (one feature per head)"), randn(2, 3, 4, seed=34), 4),
        (_("a single token: x of shape (3, 1, 10) with n_heads=5"), randn(3, 1, 10, seed=35), 5),
        (_("x of shape (2, 6, 16) in float64 with n_heads=4"), randn(2, 6, 16, seed=36, dtype=torch.float64), 4),
    ]
    forbid = [("attnbook.multihead.split_heads", _("write it yourself with view/reshape and transpose"))]

    def one(case, runs):
        desc, x, h = case
        got = call(split_heads, x, h, what="split_heads", on=desc, forbid=forbid, explain=_split_error_hint)
        ref, mistakes = _heads_ref(x, h), _split_mistakes(x, h)  # (B, h, n, d_head)
        got = expect_shape(got, ref, mistakes, runs, what=_("your result"), on=desc)
        _expect_dtype(got, x, _("your result"), desc)
        return Run(desc, got, ref, mistakes)

    verdict(collect(cases, one), what=_("your result"), rule=SPLIT_RULE)
    return _("right on {len_cases} inputs, including a batch of 1, one head, one feature per head and one token",
             len_cases=len(cases))


# ---------------------------------------------------------------------------------------------------------
# 3.2 multi-head forward from given weight matrices
# ---------------------------------------------------------------------------------------------------------


def _merge_error_hint(message: str) -> str | None:
    """The hint for `view` on a tensor that is not contiguous in memory, named for this chapter."""
    if "view size is not compatible" in message:
        return (_("view() needs numbers that sit next to each other in memory; after .transpose(1, 2), or on an "
                  "input that is itself a transposed split, they do not: use .reshape(), which copies when it has "
                  "to, or call .contiguous() before .view()"))
    return None


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
    q, k, v = (_heads_ref(x @ W, h) for W in (W_q, W_k, W_v))  # (B, h, n, d_head)
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


@exercise("3.2", "Multi-head attention from four matrices", section="The shapes, step by step",
          references=("attnbook.multihead.MultiHeadAttention",))
def check_multi_head_forward(multi_head_forward) -> str:
    """multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads) -> Concat(head_1..head_h) W_o, matrices applied as x @ W."""
    cases = _forward_cases()

    def one(case, runs):
        desc, args = case
        got = call(multi_head_forward, *args, what="multi_head_forward", on=desc, forbid=FORWARD_FORBIDDEN,
                   explain=_merge_error_hint)
        if isinstance(got, (tuple, list)):
            raise Wrong(_("multi_head_forward returned {describe_got} on {desc}, expected one tensor",
                          describe_got=describe(got), desc=desc),
                        _("return only the output, of shape (B, n, d_model), not the attention weights too"))
        ref, mistakes = _mha_reference(*args), _forward_mistakes(*args)  # (B, n, d_model)
        got = expect_shape(got, ref, mistakes, runs, what=_("your output"), on=desc)
        _expect_dtype(got, args[0], _("your output"), desc,
                      _("return the dtype of x: compute in x's dtype (no .float() or .double()), and create any new "
                        "tensor with dtype=x.dtype"))
        tol = (1e-10, 1e-9) if args[0].dtype == torch.float64 else (ATOL, RTOL)
        return Run(desc, got, ref, mistakes, *tol)

    verdict(collect(cases, one), what=_("your output"), rule=FORWARD_RULE)
    desc, args = cases[0]
    expect_gradients(multi_head_forward, args, {0: "x", 1: "W_q", 2: "W_k", 3: "W_v", 4: "W_o"}, _mha_reference,
                     what="multi_head_forward", on=desc, forbid=FORWARD_FORBIDDEN, explain=_merge_error_hint)
    return _("right on {len_cases} inputs, including a batch of 1, one head, one feature per head and one token",
             len_cases=len(cases))


# ---------------------------------------------------------------------------------------------------------
# 3.3 the parameter count
# ---------------------------------------------------------------------------------------------------------


INT_HINT = (N_("a parameter count is a whole number: use integer arithmetic (*, + and //), not / or math.pow, "
               "which always give floats"))


def _as_count(got, on: str) -> int:
    """A Python int from an int or a NumPy integer; else Wrong (a float, a tensor or an array is not an int)."""
    if got is None:
        raise Wrong(_("mha_param_count returned None for {on}", on=on), _("did you forget the `return` statement?"))
    if isinstance(got, numbers.Integral) and not isinstance(got, bool):  # int, numpy.int64, ...
        return int(got)
    if isinstance(got, Tensor) or (hasattr(got, "__array__") and not isinstance(got, numbers.Number)):
        kind = _("a tensor") if isinstance(got, Tensor) else _("a NumPy array")
        raise Wrong(_("mha_param_count returned {kind} for {on}; return an int", kind=kind, on=on),
                    _("count with plain Python integers, no tensors needed (int(t) turns a one-element tensor into "
                      "an int)"))
    if isinstance(got, numbers.Real) and not isinstance(got, bool):  # float, numpy.float64, ...
        value = float(got)
        whole = math.isfinite(value) and value.is_integer()
        shown = f"{value:.1f}" if whole and abs(value) < 1e16 else repr(value)
        raise Wrong(_("mha_param_count returned {shown} for {on}; return an int: {shown} is a float",
                      shown=shown, on=on)
                    + ("" if whole else _(" and not a whole number")), INT_HINT)
    raise Wrong(_("mha_param_count returned {describe_got} for {on}, expected an int",
                  describe_got=describe(got), on=on),
                _("return one whole number, the count"))


_COUNT_MISTAKES = [  # (hint, the count that mistake gives for d_model=d, n_heads=h, bias)
    (N_("you left out the output projection W_O: there are four d_model x d_model matrices (W_Q, W_K, W_V "
        "and W_O), each with its bias when bias=True"), lambda d, h, b: 3 * d * d + 3 * d * b),
    (N_("you left out the biases: with bias=True each of the four projections also has a bias vector of "
        "d_model numbers"), lambda d, h, b: 4 * d * d),
    (N_("you left out the output projection W_O and the biases"), lambda d, h, b: 3 * d * d),
    (N_("bias=False: the projections have no biases, only the four weight matrices"), lambda d, h, b: 4 * d * d + 4 * d),
    (N_("you counted one bias vector, but each of the four projections has its own: 4 d_model biases"),
     lambda d, h, b: 4 * d * d + d * b),
    (N_("you counted three bias vectors; W_O has a bias too: 4 d_model biases"), lambda d, h, b: 4 * d * d + 3 * d * b),
    (N_("you counted a bias of d_model per head; the biases of all heads together have d_model numbers "
        "per projection (d_head per head)"), lambda d, h, b: 4 * d * d + 4 * h * d * b),
    (N_("you counted a bias of d_model per head for W_Q, W_K and W_V; the heads' biases together have "
        "d_model numbers per projection"), lambda d, h, b: 4 * d * d + (3 * h * d + d) * b),
    (N_("you counted one bias number per head; a bias has one number per output feature, d_model per projection"),
     lambda d, h, b: 4 * d * d + 4 * h * b),
    (N_("a multi-head attention layer has no LayerNorm: count only the four projections and their biases"),
     lambda d, h, b: 4 * d * d + 4 * d * b + 2 * d),
    (N_("that is the count for d_model and n_heads swapped: the check calls mha_param_count(d_model, n_heads, "
        "bias=...), d_model first"), lambda d, h, b: 4 * h * h + 4 * h * b),
    (N_("you multiplied by n_heads: the heads share the four d_model x d_model matrices (each head uses "
        "d_head of their columns), so the count does not depend on n_heads"), lambda d, h, b: h * (4 * d * d + 4 * d * b)),
    (N_("you multiplied the weight matrices by n_heads: the heads share the four d_model x d_model matrices, "
        "so the count does not depend on n_heads"), lambda d, h, b: h * 4 * d * d + 4 * d * b),
    (N_("that counts one head only: its four matrices are d_model x d_head (with biases of d_head numbers); "
        "the n_heads heads together fill d_model x d_model matrices"), lambda d, h, b: 4 * (d + b) * (d // h)),
    (N_("that is 4 d_model^2 / n_heads weights, as if each projection were d_model x d_head (one head) or "
        "n_heads blocks of d_head x d_head; each head reads all d_model input features, and the heads together "
        "fill d_model x d_model matrices"), lambda d, h, b: 4 * d * (d // h) + 4 * d * b),
]


def _params_functions() -> tuple[str, ...]:
    """Every function of attnbook.models.params (the public ones and the helper _linear), as dotted paths."""
    try:
        from ..models import params
    except ImportError:  # not in this version of the package, so the learner cannot call it either
        return ()
    return tuple(f"attnbook.models.params.{name}" for name in (*params.__all__, "_linear"))


_COUNT_FORBIDDEN = [
    (name, N_("write the formula: count the weights and the biases of the four projections W_Q, W_K, W_V and W_O"))
    for name in dict.fromkeys((
        *_params_functions(),
        "attnbook.multihead.MultiHeadAttention",
        "attnbook.layers.EncoderBlock",
        "attnbook.layers.DecoderBlock",
        "torch.nn.MultiheadAttention",
        "torch.nn.modules.activation.MultiheadAttention",
        "torch.nn.Linear",
        "torch.nn.modules.linear.Linear",
        "torch.nn.modules.linear.NonDynamicallyQuantizableLinear",
        *(f"{owner}.{layer}" for owner in ("torch.nn", "torch.nn.modules.transformer")
          for layer in ("TransformerEncoderLayer", "TransformerDecoderLayer", "Transformer"))
    ))
]


def mha_count_cases() -> list[tuple[int, int, bool | None]]:
    """(d_model, n_heads, bias) for 3.3 (None: bias left at its default): eight fixed layers, BERT-base's and
    GPT-3's among them, then two drawn anew on every run (a table of known layers does not do)."""
    g = generator(33)

    def drawn() -> tuple[int, int]:  # (d_model, n_heads), n_heads from 2 to 16 dividing d_model
        h = int(torch.randint(2, 17, (), generator=g))
        return h * int(torch.randint(2, 65, (), generator=g)), h

    return [(512, 8, None), (768, 12, True), (768, 12, False), (64, 1, True), (1024, 16, False),
            (12288, 96, True), (6, 3, True), (6, 3, False), (*drawn(), True), (*drawn(), False)]


@exercise("3.3", "Count the parameters of a multi-head attention layer", section="Counting parameters",
          references=("attnbook.models.params.mha_param_count",))
def check_mha_param_count(mha_param_count) -> str:
    """mha_param_count(d_model, n_heads, bias=True) -> 4 d^2 + 4 d (4 d^2 without bias), an int."""
    cases = mha_count_cases()
    runs = []  # (on, the learner's count, d, h, bias) of every case run
    for d, h, bias in cases:
        if bias is None:  # the default must be bias=True
            on = _("d_model={d}, n_heads={h} (bias left at its default, True)", d=d, h=h)
            kwargs, bias = {}, True
        else:
            on, kwargs = _("d_model={d}, n_heads={h}, bias={bias}", d=d, h=h, bias=bias), {"bias": bias}
        try:
            value = _as_count(call(mha_param_count, d, h, **kwargs, what="mha_param_count", on=on,
                                   forbid=_COUNT_FORBIDDEN), on)
        except Wrong:
            if any(v != 4 * dd * dd + 4 * dd * bb for _unused, v, dd, _unused, bb in runs):
                break  # an earlier count was wrong: report that one
            raise
        runs.append((on, value, d, h, bias))
    wrong = [r for r in runs if r[1] != 4 * r[2] * r[2] + 4 * r[2] * r[4]]  # W_Q, W_K, W_V, W_O and their biases
    if not wrong:
        return (_("right for {len_cases} layers, with and without biases, including BERT-base (768, 12) and "
                  "GPT-3 (12288, 96)", len_cases=len(cases)))
    on, value = wrong[0][:2]
    hint = next((hint for hint, f in _COUNT_MISTAKES if all(f(d, h, b) == v for _unused, v, d, h, b in runs)),
                _("count each of the four projections W_Q, W_K, W_V and W_O: its weight matrix (d_model x d_model) "
                  "and, when bias=True, its bias (d_model numbers)"))
    raise Wrong(_("mha_param_count returned {value:,} for {on}, which is not the number of parameters",
                  value=value, on=on), hint)


# ---------------------------------------------------------------------------------------------------------
# 3.4 merge_heads
# ---------------------------------------------------------------------------------------------------------


@exercise("3.4", "Merge the heads back", section="Merging the heads, then W_O",
          references=("attnbook.multihead.merge_heads",))
def check_merge_heads(merge_heads) -> str:
    """merge_heads(x): (B, h, n, d_head) -> (B, n, h*d_head), the heads' features one after the other."""
    split = randn(2, 5, 12, seed=46).view(2, 5, 3, 4).transpose(1, 2)  # (2, 3, 5, 4), a view: not contiguous
    cases = [
        (_("x of shape (2, 3, 5, 4)"), randn(2, 3, 5, 4, seed=41)),
        (_("a batch of 1: x of shape (1, 2, 4, 3)"), randn(1, 2, 4, 3, seed=42)),
        (_("one head: x of shape (2, 1, 3, 8)"), randn(2, 1, 3, 8, seed=43)),
        (_("one feature per head: x of shape (2, 4, 3, 1)"), randn(2, 4, 3, 1, seed=44)),
        (_("a single token: x of shape (3, 2, 1, 5)"), randn(3, 2, 1, 5, seed=45)),
        (_("x of shape (2, 3, 5, 4) that is the output of a split (a transposed view, not contiguous in memory)"),
         split),
        (_("x of shape (2, 4, 6, 2) in float64"), randn(2, 4, 6, 2, seed=47, dtype=torch.float64)),
    ]
    forbid = [("attnbook.multihead.merge_heads", _("write it yourself with transpose and reshape"))]

    def one(case, runs):
        desc, x = case
        got = call(merge_heads, x, what="merge_heads", on=desc, forbid=forbid, explain=_merge_error_hint)
        B, h, n, dh = x.shape
        ref = _concat_ref(x)  # (B, n, h*d_head)
        not_summed = (_("concatenate the heads, don't add or average them: the result has n_heads * d_head "
                        "features per position"))
        mistakes = {
            _("you reshaped (B, n_heads, n, d_head) straight to (B, n, d_model). The shape is right, but the numbers "
              "are read in memory order, so positions are mixed across heads: the head axis must move behind the "
              "position axis (a transpose) before the heads' features are flattened together"): x.reshape(B, n, h * dh),
            _("concatenate the heads one after the other (head 0's d_head features, then head 1's, ...); you "
              "interleaved them, feature by feature"): x.permute(0, 2, 3, 1).reshape(B, n, h * dh),
            _("you stopped at (B, n, n_heads, d_head): flatten the last two axes into one of n_heads * d_head "
              "features"): x.transpose(1, 2),
            not_summed: x.sum(dim=1),
            not_summed + _(" (you repeated their average n_heads times)"): x.mean(dim=1).repeat(1, 1, h),
            _("you transposed the wrong axes: swap the head axis (1) and the position axis (2) of "
              "(B, n_heads, n, d_head) before the reshape"): x.transpose(2, 3).reshape(B, n, h * dh),
            _("the heads come in order: head 0's d_head features first, then head 1's, ...; yours are in reverse "
              "order"): x.flip(1).transpose(1, 2).reshape(B, n, h * dh),
        }
        got = expect_shape(got, ref, mistakes, runs, what=_("your result"), on=desc)
        _expect_dtype(got, x, _("your result"), desc)
        return Run(desc, got, ref, mistakes)

    runs = collect(cases, one)
    try:
        verdict(runs, what=_("your result"), rule=_(MERGE_RULE))
    except Wrong as e:
        first = next(i for i, r in enumerate(runs) if not r.right)
        if e.hint is not None and e.hint == _(MERGE_RULE) and not cases[first][1].is_contiguous() \
                and all(r.right for r in runs[:first]):  # right on every contiguous input before this one
            e.hint = (_("your merge was right on the contiguous inputs but not on this one, whose numbers are not "
                        "in (B, n_heads, n, d_head) order in memory: use only shape operations (transpose, "
                        "reshape), nothing that reads the raw memory (.as_strided, .view(-1) then indexing)"))
        raise
    return _("right on {len_cases} inputs, including one head, one token and a non-contiguous input",
             len_cases=len(cases))
