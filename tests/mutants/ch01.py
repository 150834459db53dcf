"""Mutant catalogue for chapter 1 (queries, keys and values): exercises 1.1, 1.2 and 1.3."""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

import attnbook
import attnbook.attention
from mutants import RIGHT, WRONG, fresh_import, function_copy, right, table, wrong

# ---------------------------------------------------------------------------------------------------------------
# 1.1 project_qkv(X, W_q, W_k, W_v) -> (Q, K, V)
# ---------------------------------------------------------------------------------------------------------------


def project(mul=lambda X, W: X @ W, returns="tuple", k_weight="W_k", v_is_x=False, scale_q=None):
    """1.1's learner template: Q, K and V as mul(X, W) of each weight matrix (the defaults: X @ W, a right answer).
    mul: the product of X and one weight matrix, with whatever casts the learner wrote around it; returns:
    "tuple", "list", "dict", "K first" (K, Q, V), "Q only"; k_weight: the weight the keys are computed with;
    v_is_x: V = X, not projected; scale_q: the size whose square root Q is divided by ("d_k", "d" or None)."""
    def project_qkv(X, W_q, W_k, W_v):
        Q = mul(X, W_q)
        K = mul(X, W_q if k_weight == "W_q" else W_k)
        V = X if v_is_x else mul(X, W_v)
        if scale_q:
            Q = Q / math.sqrt(W_q.shape[-1] if scale_q == "d_k" else X.shape[-1])
        return {"tuple": (Q, K, V), "list": [Q, K, V], "dict": {"Q": Q, "K": K, "V": V}, "K first": (K, Q, V),
                "Q only": Q}[returns]
    return project_qkv


def _numpy_product(dtype=None):
    """mul for project: the product in NumPy (in `dtype`, or the input's), turned back into a tensor of X's dtype."""
    def mul(X, W):
        x, w = X.detach().numpy(), W.detach().numpy()
        if dtype:
            x, w = x.astype(dtype), w.astype(dtype)
        return torch.from_numpy(np.matmul(x, w)).to(X.dtype)
    return mul


table("1.1", [
    ("torch.matmul for the three products", RIGHT, project(mul=torch.matmul)),
    ("einsum with an ellipsis for the batch", RIGHT, project(mul=lambda X, W: torch.einsum("...nd,de->...ne", X, W))),
    ("(W^T X^T)^T with transpose(-2, -1), which works with a batch", RIGHT,
     project(mul=lambda X, W: (W.T @ X.transpose(-2, -1)).transpose(-2, -1))),
    ("torch.nn.functional.linear with the transposed weights (an allowed helper)", RIGHT,
     project(mul=lambda X, W: F.linear(X, W.T))),
    ("computes in float64 and casts back to X's dtype (more precision on float32 inputs is fine)", RIGHT,
     project(mul=lambda X, W: (X.double() @ W.double()).to(X.dtype))),
    ("NumPy in the input's precision, back to tensors of X's dtype", RIGHT, project(mul=_numpy_product())),
    ("one matrix product with the three weights concatenated, then split", RIGHT,
     lambda X, W_q, W_k, W_v: tuple((X @ torch.cat([W_q, W_k, W_v], dim=1)).split(
         [W_q.shape[1], W_k.shape[1], W_v.shape[1]], dim=-1))),
    ("one stacked product, unbound into three (when d_v = d_k), else three products", RIGHT,
     lambda X, W_q, W_k, W_v: tuple((X.unsqueeze(-3) @ torch.stack([W_q, W_k, W_v])).unbind(-3))
     if W_v.shape == W_q.shape else (X @ W_q, X @ W_k, X @ W_v)),
    # what is returned
    ("returns a list [Q, K, V] instead of a tuple", "tuple", project(returns="list")),
    ("returns a dict {'Q': ..., 'K': ..., 'V': ...}", "tuple", project(returns="dict")),
    ("returns the keys first: (K, Q, V)", "returned (K, Q, V)", project(returns="K first")),
    ("returns only Q, a single tensor", "returned a single tensor", project(returns="Q only")),
    ("copy-paste slip: the keys are computed with W_q", "your K looks like X @ W_q: each of Q, K and V has its own "
     "weight matrix", project(k_weight="W_q")),
    ("forgets to project the values: V = X (caught where d_v = d)", "your V equals X", project(v_is_x=True)),
    ("divides the queries by sqrt(d_k) already (chapter 2's scale, in the wrong place)",
     "the scale 1/sqrt(d_k) belongs to the attention scores (chapter 2)", project(scale_q="d_k")),
    ("divides the queries by sqrt(d), the model size", "sqrt(d)", project(scale_q="d")),
    # the product
    ("computes W^T X^T, i.e. returns Q^T, K^T, V^T of shape (d_k, n)", "your Q is transposed",
     project(mul=lambda X, W: W.T @ X.T)),
    ("multiplies by the transposed weights, X @ W.T (only runs when the sizes happen to be square)",
     "you transposed the weight matrix", project(mul=lambda X, W: X @ W.T)),
    ("W @ X, the weights on the left (works only when the sizes happen to fit)", "not W_q @ X",
     project(mul=lambda X, W: W @ X)),
    ("W.T @ X (works only when the sizes happen to fit)", "not W_q.T @ X", project(mul=lambda X, W: W.T @ X)),
    ("(W.T @ X.T).T: the .T of a 3-D X reverses all its dimensions", "transpose(-2, -1)",
     project(mul=lambda X, W: (W.T @ X.T).T)),
    ("X.T @ ... with torch.matmul: X.T reverses the batch too", "transpose(-2, -1)",
     project(mul=lambda X, W: torch.matmul(W.T, X.T).T)),
    ("uses torch.mm, which only works without a batch dimension", "(batch, n, d): use the @ operator",
     project(mul=torch.mm)),
    ("torch.bmm with the 2-D weights (and 2-D X)", "torch.bmm needs 3-D tensors", project(mul=torch.bmm)),
    ("einsum written for 2-D X only ('nd,dk->nk')", "batch",
     project(mul=lambda X, W: torch.einsum("nd,dk->nk", X, W))),
    # shapes
    ("flattens the batch into the rows and forgets to reshape back: (batch * n, d_k)", "shape",
     project(mul=lambda X, W: X.reshape(-1, X.shape[-1]) @ W)),
    ("always adds a batch dimension (unsqueeze) and never removes it for 2-D X", "shape",
     project(mul=lambda X, W: (X.unsqueeze(0) if X.dim() == 2 else X) @ W)),
    ("hard-codes the 4 x 4 example's sizes with reshape", "shape", project(mul=lambda X, W: (X @ W).reshape(4, 4))),
    # dtypes and types
    ("casts everything to float64 'for accuracy' and returns float64", "expected torch.float32, the dtype of X",
     project(mul=lambda X, W: X.double() @ W.double())),
    ("casts to float32 'to be safe' (float64 inputs come back as float32)", "expected torch.float64, the dtype of X",
     project(mul=lambda X, W: (X @ W).float())),
    ("half precision to save memory", "dtype torch.float16", project(mul=lambda X, W: (X @ W).half())),
    ("rounds to integers", "integer dtype", project(mul=lambda X, W: (X @ W).round().long())),
    ("computes in float32 'for speed' and casts the results back to X's dtype", "float32",
     project(mul=lambda X, W: (X.float() @ W.float()).to(X.dtype))),
    ("rounds the weights to float32 and back (a float32 model's weights) before the products", "float32",
     project(mul=lambda X, W: X @ W.float().to(X.dtype))),
    ("NumPy in float32, the results turned back into tensors of X's dtype", "float32",
     project(mul=_numpy_product(np.float32))),
    ("does the products in NumPy and returns NumPy arrays", "tensor",
     project(mul=lambda X, W: X.detach().numpy() @ W.detach().numpy())),
    ("normalises the token vectors in place first (changes X)", "in place",
     lambda X, W_q, W_k, W_v: project()(X.div_(X.norm(dim=-1, keepdim=True).clamp_min(1e-12)), W_q, W_k, W_v)),
    # what the task forbids
    ("PyTorch's own q, k, v projection of multi-head attention (F._in_projection) where the sizes let it run",
     "without torch.nn.functional._in_projection",
     lambda X, W_q, W_k, W_v: F._in_projection(X, X, X, W_q.T, W_k.T, W_v.T)
     if W_q.shape == W_k.shape == W_v.shape == (X.shape[-1],) * 2 else project()(X, W_q, W_k, W_v)),
    ("PyTorch's packed projection (F._in_projection_packed) with the three weights stacked, where d_k = d_v = d",
     "without torch.nn.functional._in_projection_packed",
     lambda X, W_q, W_k, W_v: F._in_projection_packed(X, X, X, torch.cat([W_q.T, W_k.T, W_v.T]))
     if W_q.shape == W_k.shape == W_v.shape == (X.shape[-1],) * 2 else project()(X, W_q, W_k, W_v)),
])


@right("1.1")
def project_qkv_rows(X, W_q, W_k, W_v, *, stack=True):
    """a loop over the token vectors (and the batch), stacked back together; harmless extra kwarg"""
    def one(x):  # x: (n, d)
        return tuple(torch.stack([row @ W for row in x]) for W in (W_q, W_k, W_v))
    if X.dim() == 2:
        return one(X)
    parts = [one(x) for x in X]
    return tuple(torch.stack([p[i] for p in parts]) for i in range(3))


# ---------------------------------------------------------------------------------------------------------------
# 1.2 soft_lookup(q, K, V) -> (output, weights)
# ---------------------------------------------------------------------------------------------------------------


def lookup(scores=lambda q, K: K @ q, weigh=lambda s: attnbook.softmax(s, dim=-1), combine=lambda w, V: w @ V,
           returns="tuple", dtype=None, cast_back=True):
    """1.2's learner template: the scores of q against the keys, their weights and the weighted values (the defaults:
    K @ q, attnbook.softmax and weights @ V, a right answer). scores(q, K), weigh(scores), combine(weights, V): each
    step as the learner wrote it; returns: "tuple", "swapped" (weights first), "list", "output only"; dtype: the
    dtype computed in (q, K and V cast to it first), cast back to q's dtype unless cast_back is False."""
    def soft_lookup(q, K, V):
        if dtype:
            q, K, V, given = q.to(dtype), K.to(dtype), V.to(dtype), q.dtype
        weights = weigh(scores(q, K))
        output = combine(weights, V)
        if dtype and cast_back:
            output, weights = output.to(given), weights.to(given)
        return {"tuple": (output, weights), "swapped": (weights, output), "list": [output, weights],
                "output only": output}[returns]
    return soft_lookup


def _stable(s):
    """A hand-written softmax of the scores, shifted by their maximum."""
    e = (s - s.max()).exp()
    return e / e.sum()


table("1.2", [
    ("torch.softmax and a vector-matrix product", RIGHT, lookup(weigh=lambda s: torch.softmax(s, dim=0))),
    ("explicit loops: one dot product per key, one weighted value per key", RIGHT,
     lookup(scores=lambda q, K: torch.stack([q @ K[j] for j in range(K.shape[0])]),
            combine=lambda w, V: sum(w[j] * V[j] for j in range(V.shape[0])))),
    ("einsum for the scores and the weighted sum", RIGHT,
     lookup(scores=lambda q, K: torch.einsum("nd,d->n", K, q), combine=lambda w, V: torch.einsum("n,nv->v", w, V))),
    ("a hand-written stable softmax and a broadcast weighted sum", RIGHT,
     lookup(scores=lambda q, K: q @ K.T, weigh=_stable, combine=lambda w, V: (w[:, None] * V).sum(dim=0))),
    ("the reference with a harmless extra keyword argument", RIGHT,
     lambda q, K, V, temperature=1.0: lookup(scores=lambda q, K: K @ q / temperature)(q, K, V)),
    ("torch.mv for both products, float64 inputs stay float64", RIGHT,
     lookup(scores=lambda q, K: torch.mv(K, q), weigh=lambda s: attnbook.softmax(s, dim=0),
            combine=lambda w, V: torch.mv(V.T, w))),
    ("computes in float64 and casts back to q's dtype", RIGHT, lookup(dtype=torch.float64)),
    ("weights as exp(scores - logsumexp(scores)) (allowed here: only attention functions are forbidden)", RIGHT,
     lookup(weigh=lambda s: torch.exp(s - torch.logsumexp(s, dim=0)),
            combine=lambda w, V: torch.einsum("n,nv->v", w, V))),
    # what is returned
    ("returns (weights, output) instead of (output, weights)", "returned (weights, output)",
     lookup(returns="swapped")),
    ("returns a list [output, weights]", "a tuple, not a list", lookup(returns="list")),
    ("returns only the output", "tuple", lookup(returns="output only")),
    # the scores
    ("divides the scores by sqrt(d_k) although the task says not to scale", "dividing by sqrt(d_k) comes in chapter 2",
     lookup(scores=lambda q, K: K @ q / math.sqrt(q.shape[-1]))),
    ("scores as q @ K (the product the wrong way round)", "the scores are K @ q", lookup(scores=lambda q, K: q @ K)),
    ("softmax of the negated scores (as if they were distances)", "worst-matching",
     lookup(scores=lambda q, K: -(K @ q))),
    ("treats q as a (1, d_k) row: weights of shape (1, n), output (1, d_v)", "shape",
     lookup(scores=lambda q, K: q[None, :] @ K.T)),
    # the weights
    ("a hard lookup: one-hot weights on the best key", "hard lookup",
     lookup(weigh=lambda s: F.one_hot(s.argmax(), num_classes=s.shape[0]).to(s.dtype))),
    ("averages the values, ignoring the query", WRONG, lookup(weigh=lambda s: torch.full_like(s, 1.0 / s.shape[0]))),
    ("normalises the scores by their sum instead of a softmax", "divided the scores by their sum",
     lookup(weigh=lambda s: s / s.sum())),
    ("uses a sigmoid instead of a softmax (weights do not sum to 1)", "not 1", lookup(weigh=torch.sigmoid)),
    ("a hand-written softmax without subtracting the maximum (overflows for large scores)", "overflows",
     lookup(weigh=lambda s: torch.exp(s) / torch.exp(s).sum())),
    ("the softmax without the shift: the message names the input's large scores", "with large scores K @ q",
     lookup(weigh=lambda s: torch.exp(s) / torch.exp(s).sum())),
    ("uses the raw scores as weights", "pass them through softmax", lookup(weigh=lambda s: s)),
    ("exp of the scores, not normalised", "did not divide by their sum", lookup(weigh=torch.exp)),
    ("math.exp on the score tensor", "use torch.exp", lookup(weigh=math.exp)),
    ("softmax over dim=1 of the 1-D scores", "count from the end", lookup(weigh=lambda s: attnbook.softmax(s, dim=1))),
    ("keeps the weights as a column (n, 1)", "at the end",
     lookup(weigh=lambda s: attnbook.softmax(s, dim=-1)[:, None], combine=lambda w, V: (w * V).sum(dim=0))),
    # the weighted sum
    ("weights applied to the transposed values, summed the wrong way", "instead of adding them up",
     lookup(combine=lambda w, V: (V * w[:, None]).mean(dim=0))),
    ("returns the weighted sum of the keys", "weighted sum of the keys", lambda q, K, V: lookup()(q, K, K)),
    ("weights each value row but does not add them up", "did not add them up",
     lookup(combine=lambda w, V: w[:, None] * V)),
    ("adds up the values without weights", "without weighting", lookup(combine=lambda w, V: V.sum(dim=0))),
    ("multiplies the rows of V by their weights in place, then sums (changes V)", "in place",
     lookup(combine=lambda w, V: V.mul_(w[:, None]).sum(dim=0))),
    # dtypes
    ("computes in float64 and returns float64", "dtype", lookup(dtype=torch.float64, cast_back=False)),
    ("casts to float32 (float64 inputs come back as float32)", "expected torch.float64, the dtype of q",
     lookup(dtype=torch.float32, cast_back=False)),
    ("computes in float32 and casts both results back to q's dtype", "float32", lookup(dtype=torch.float32)),
    # what the task forbids, and the package's own solution
    ("torch's scaled_dot_product_attention with scale=1 and q as a 1-row matrix",
     "the task asks you to write this without torch.nn.functional.scaled_dot_product_attention",
     lambda q, K, V: (F.scaled_dot_product_attention(q[None], K, V, scale=1.0)[0], attnbook.softmax(K @ q, dim=-1))),
    ("hands the work to attnbook.scaled_dot_product_attention(scale=1.0) with q as a 1-row matrix",
     "the package's own solution",
     lambda q, K, V: tuple(r[0] for r in attnbook.scaled_dot_product_attention(q[None, :], K, V, scale=1.0))),
    ("the package's tiled_attention with scale=1 for the output", "package's own",
     lambda q, K, V: (attnbook.attention.tiled_attention(q[None], K, V, scale=1.0)[0],
                      attnbook.softmax(K @ q, dim=-1))),
])


@wrong("1.2", hint="float32")
def soft_lookup_float32_weights(q, K, V):
    """float32 weights (the scores computed in float32), a float64 weighted sum"""
    weights = attnbook.softmax(K.float() @ q.float(), dim=-1).to(V.dtype)
    return weights @ V, weights


@wrong("1.2", hint="in place")
def soft_lookup_centres_values_in_place(q, K, V):
    """centres the values in place 'for stability' and adds their mean back to the output (changes V)"""
    weights = attnbook.softmax(K @ q, dim=-1)
    mean = V.mean(dim=0)
    V -= mean
    return weights @ V + mean, weights


@wrong("1.2", hint="without attnbook.decoding.grouped_decode_attention")
def soft_lookup_decode_attention(q, K, V):
    """the package's decoding attention for the output (q scaled by sqrt(d_k) to undo its scale)"""
    from attnbook.decoding import grouped_decode_attention
    weights = attnbook.softmax(K @ q, dim=-1)
    if V.shape[-1] != K.shape[-1]:
        return weights @ V, weights
    out = grouped_decode_attention((q * math.sqrt(q.shape[-1]))[None, None, None], K[None, None], V[None, None])
    return out[0, 0, 0], weights


# ---------------------------------------------------------------------------------------------------------------
# 1.3 stable_softmax(x, dim=-1)
# ---------------------------------------------------------------------------------------------------------------


def stable(shift=lambda x, dim: x.amax(dim=dim, keepdim=True), total=lambda e, dim: e.sum(dim=dim, keepdim=True),
           exp=torch.exp, axis=None, dtype=None, cast_back=True, default_dim=-1):
    """1.3's learner template: exp(x - shift) / total along dim (the defaults: the maximum along dim with keepdim,
    torch.exp and the sum along dim, a right answer). shift(x, dim), total(e, dim), exp(z): each step as the learner
    wrote it; axis: the dimension used whatever `dim` is (None: dim); dtype: the dtype computed in, cast back to
    x's unless cast_back is False; default_dim: the default of dim."""
    def stable_softmax(x, dim=default_dim):
        d = dim if axis is None else axis
        y = x.to(dtype) if dtype else x
        e = exp(y - shift(y, d))
        out = e / total(e, d)
        return out.to(x.dtype) if dtype and cast_back else out
    return stable_softmax


no_shift = stable(shift=lambda x, dim: 0)  # exp of the logits themselves

table("1.3", [
    ("x.max(dim, keepdim=True).values as the shift", RIGHT,
     stable(shift=lambda x, dim: x.max(dim=dim, keepdim=True).values)),
    ("moves dim to the end, normalises the last axis, moves it back", RIGHT,
     lambda x, dim=-1: stable()(x.movedim(dim, -1)).movedim(-1, dim)),
    ("computes in float64 and casts back to x's dtype", RIGHT, stable(dtype=torch.float64)),
    ("detaches the shift (it cancels anyway) and has a harmless extra keyword", RIGHT,
     lambda x, dim=-1, eps=0.0: stable(shift=lambda x, dim: x.amax(dim=dim, keepdim=True).detach(),
                                       total=lambda e, dim: e.sum(dim=dim, keepdim=True) + eps)(x, dim)),
    ("the shift by the maximum, then exp2 of the shift times log2(e)", RIGHT,
     stable(exp=lambda z: torch.exp2(z * (1 / math.log(2))))),
    # the shift
    ("the literal formula without subtracting the maximum (overflows / 0/0 at +-1000)", "subtract the row maximum",
     no_shift),
    ("subtracts the maximum of the whole tensor, not of each slice along dim", "not the global maximum",
     stable(shift=lambda x, dim: x.max())),
    ("subtracts the minimum instead of the maximum", "not the mean, the minimum or any other statistic",
     stable(shift=lambda x, dim: x.amin(dim=dim, keepdim=True))),
    ("subtracts the mean instead of the maximum", "not the mean, the minimum or any other statistic",
     stable(shift=lambda x, dim: x.mean(dim=dim, keepdim=True))),
    ("torch.exp(x - x.mean(dim, keepdim=True)): shifts by the mean, positional dim",
     "not the mean, the minimum or any other statistic", stable(shift=lambda x, dim: x.mean(dim, keepdim=True))),
    ("shifts by the largest absolute value, x.abs().amax(dim): all entries <= 0, but -1000s underflow to 0 / 0",
     "not the mean, the minimum or any other statistic",
     stable(shift=lambda x, dim: x.abs().amax(dim=dim, keepdim=True))),
    ("shifts by the median along dim", "not the mean, the minimum or any other statistic",
     stable(shift=lambda x, dim: x.median(dim=dim, keepdim=True).values)),
    ("subtracts x.max(dim=dim), which returns (values, indices), not a tensor", "returns a pair (values, indices)",
     stable(shift=lambda x, dim: x.max(dim=dim))),
    ("clamps the logits to [-80, 80] instead of shifting them", WRONG,
     lambda x, dim=-1: no_shift(x.clamp(-80, 80), dim)),
    ("divides by the maximum instead of subtracting it", WRONG,
     lambda x, dim=-1: no_shift(x / x.abs().amax(dim=dim, keepdim=True).clamp_min(1e-12), dim)),
    ("subtracts the maximum in place (changes x)", "in place",
     lambda x, dim=-1: no_shift(x.sub_(x.amax(dim=dim, keepdim=True)), dim)),
    # the dimension
    ("ignores dim and always normalises over the last axis",
     "you normalised over the last dimension whatever `dim` was; normalise over the `dim` you were given",
     stable(axis=-1)),
    ("always normalises over dim 0", "normalised over dim=0", stable(axis=0)),
    ("always normalises over dim 1", "you normalised over dim=1", stable(axis=1)),
    ("right, but with the default dim=0", "the default dim. Hint: the default must be the last dimension",
     stable(default_dim=0)),
    ("forgets keepdim=True, so the maximum and the sum broadcast along the wrong axis", "keepdim",
     stable(shift=lambda x, dim: x.amax(dim=dim), total=lambda e, dim: e.sum(dim=dim))),
    ("keepdim on the maximum but not on the sum", "the sum drops", stable(total=lambda e, dim: e.sum(dim=dim))),
    ("keepdim on the sum but not on the maximum", "the maximum drops the dimension it reduces, so it lines up with "
     "the wrong entries of x: use x.amax(dim=dim, keepdim=True)", stable(shift=lambda x, dim: x.amax(dim=dim))),
    ("divides by the sum of the whole tensor instead of the sum along dim", "sum of the whole tensor",
     stable(total=lambda e, dim: e.sum())),
    # dtypes
    ("computes in float64 for safety and forgets to cast back", "dtype", stable(dtype=torch.float64, cast_back=False)),
    ("casts the result to float32 (float64 logits come back as float32)", "return the dtype you were given",
     lambda x, dim=-1: stable()(x, dim).float()),
    ("computes in half precision", "float16", stable(dtype=torch.float16, cast_back=False)),
    ("computes in float32 and casts back to x's dtype", "float32", stable(dtype=torch.float32)),
    ("float32 exp of the shifted logits (a float32 lookup table of exp), the rest in x's dtype", "float32",
     stable(exp=lambda z: z.float().exp().to(z.dtype))),
    # what the task forbids, and the package's own solution
    ("calls torch.softmax", "without", lambda x, dim=-1: torch.softmax(x, dim=dim)),
    ("calls torch.nn.functional.softmax", "without", lambda x, dim=-1: F.softmax(x, dim=dim)),
    ("exp(x - logsumexp(x)), which the task forbids", "the task asks you to write this without torch.logsumexp",
     lambda x, dim=-1: torch.exp(x - torch.logsumexp(x, dim=dim, keepdim=True))),
    ("exp of torch.log_softmax (a library softmax in disguise)", "without",
     lambda x, dim=-1: torch.log_softmax(x, dim=dim).exp()),
    ("torch._softmax, PyTorch's private softmax", "the task asks you to write this without torch._softmax",
     lambda x, dim=-1: torch._softmax(x, dim, False)),
    ("the nn.Softmax module", "without torch.nn.Softmax", lambda x, dim=-1: torch.nn.Softmax(dim=dim)(x)),
    ("exp of the nn.LogSoftmax module's output", "without torch.nn.LogSoftmax",
     lambda x, dim=-1: torch.nn.LogSoftmax(dim=dim)(x).exp()),
    ("nn.Softmin of -x", "without torch.nn.Softmin", lambda x, dim=-1: torch.nn.Softmin(dim=dim)(-x)),
    ("the probabilities of a Categorical distribution built from the logits", "without torch.distributions.Categorical",
     lambda x, dim=-1: torch.distributions.Categorical(logits=x.movedim(dim, -1)).probs.movedim(-1, dim)),
    ("attnbook.softmax handed in as it is", "package's own", attnbook.softmax),
    ("a lambda around attnbook.softmax", "package's own", lambda x, dim=-1: attnbook.softmax(x, dim=dim)),
    ("a types.FunctionType copy of attnbook.softmax", "package's own",
     function_copy(attnbook.softmax, "stable_softmax")),
    ("attnbook.softmax from a second, separate import of attention.py", "package's own",
     fresh_import(attnbook.attention, "attention").softmax),
])


@right("1.3")
def stable_softmax_sub_mul(x, dim=-1):
    """torch.sub / torch.exp / reciprocal of the sum, as separate steps"""
    shifted = torch.sub(x, torch.amax(x, dim, True))
    e = torch.exp(shifted)
    return e * torch.reciprocal(e.sum(dim, keepdim=True))


@wrong("1.3", hint="tensor")
def stable_softmax_numpy(x, dim=-1):
    """computes in NumPy and returns a NumPy array"""
    a = x.detach().numpy()
    e = np.exp(a - a.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


@wrong("1.3", hint="use torch.exp on the whole tensor, after subtracting the maximum")
def stable_softmax_math_exp(x, dim=-1):
    """math.exp of every logit, one Python number at a time (overflows above 709)"""
    e = torch.tensor([math.exp(v) for v in x.flatten().tolist()]).reshape(x.shape)
    return e / e.sum(dim=dim, keepdim=True)


@wrong("1.3", hint="the package's own solution")
def stable_softmax_wrapper(x, dim=-1):
    """a def wrapper that calls attnbook.softmax"""
    from attnbook.attention import softmax as sm
    return sm(x, dim=dim)


@wrong("1.3", hint="the task asks you to write this without scipy.special.softmax")
def stable_softmax_scipy(x, dim=-1):
    """scipy.special.softmax"""
    import scipy.special
    return torch.from_numpy(scipy.special.softmax(x.numpy(), axis=dim)).to(x.dtype)
