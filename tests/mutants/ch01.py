"""Mutant catalogue for chapter 1 (queries, keys and values): exercises 1.1, 1.2 and 1.3."""
from __future__ import annotations

import importlib.util
import math
import types

import numpy as np
import torch

import attnbook
import attnbook.attention
from mutants import right, wrong

# ---------------------------------------------------------------------------------------------------------------
# 1.1 project_qkv(X, W_q, W_k, W_v) -> (Q, K, V)
# ---------------------------------------------------------------------------------------------------------------


@wrong("1.1", hint="tuple")
def project_qkv_list(X, W_q, W_k, W_v):
    """returns a list [Q, K, V] instead of a tuple"""
    return [X @ W_q, X @ W_k, X @ W_v]


@wrong("1.1", hint="returned (K, Q, V)")
def project_qkv_order(X, W_q, W_k, W_v):
    """returns the keys first: (K, Q, V)"""
    return X @ W_k, X @ W_q, X @ W_v


@wrong("1.1", hint="your K looks like X @ W_q: each of Q, K and V has its own weight matrix")
def project_qkv_copy_paste(X, W_q, W_k, W_v):
    """copy-paste slip: the keys are computed with W_q"""
    return X @ W_q, X @ W_q, X @ W_v


@wrong("1.1", hint="your Q is transposed")
def project_qkv_transposed(X, W_q, W_k, W_v):
    """computes W^T X^T, i.e. returns Q^T, K^T, V^T of shape (d_k, n)"""
    return W_q.T @ X.T, W_k.T @ X.T, W_v.T @ X.T


@wrong("1.1", hint="(batch, n, d): use the @ operator")
def project_qkv_mm(X, W_q, W_k, W_v):
    """uses torch.mm, which only works without a batch dimension"""
    return torch.mm(X, W_q), torch.mm(X, W_k), torch.mm(X, W_v)


@wrong("1.1", hint="batch")
def project_qkv_einsum_2d(X, W_q, W_k, W_v):
    """einsum written for 2-D X only ('nd,dk->nk')"""
    return (torch.einsum("nd,dk->nk", X, W_q), torch.einsum("nd,dk->nk", X, W_k),
            torch.einsum("nd,dk->nk", X, W_v))


@wrong("1.1", hint="shape")
def project_qkv_flatten_batch(X, W_q, W_k, W_v):
    """flattens the batch into the rows and forgets to reshape back: (batch * n, d_k)"""
    X2 = X.reshape(-1, X.shape[-1])
    return X2 @ W_q, X2 @ W_k, X2 @ W_v


@wrong("1.1", hint="the scale 1/sqrt(d_k) belongs to the attention scores (chapter 2)")
def project_qkv_scaled(X, W_q, W_k, W_v):
    """divides the queries by sqrt(d_k) already (chapter 2's scale, in the wrong place)"""
    return X @ W_q / math.sqrt(W_q.shape[-1]), X @ W_k, X @ W_v


@wrong("1.1", hint="expected torch.float32, the dtype of X")
def project_qkv_float64(X, W_q, W_k, W_v):
    """casts everything to float64 'for accuracy' and returns float64"""
    X = X.double()
    return X @ W_q.double(), X @ W_k.double(), X @ W_v.double()


@wrong("1.1", hint="tensor")
def project_qkv_numpy(X, W_q, W_k, W_v):
    """does the products in NumPy and returns NumPy arrays"""
    x = X.detach().numpy()
    return x @ W_q.detach().numpy(), x @ W_k.detach().numpy(), x @ W_v.detach().numpy()


@wrong("1.1", hint="in place")
def project_qkv_in_place(X, W_q, W_k, W_v):
    """normalises the token vectors in place first (changes X)"""
    X /= X.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return X @ W_q, X @ W_k, X @ W_v


@wrong("1.1", hint="you transposed the weight matrix")
def project_qkv_weights_transposed(X, W_q, W_k, W_v):
    """multiplies by the transposed weights, X @ W.T (only runs when the sizes happen to be square)"""
    return X @ W_q.T, X @ W_k.T, X @ W_v.T


@wrong("1.1", hint="shape")
def project_qkv_keepdim_batch(X, W_q, W_k, W_v):
    """always adds a batch dimension (unsqueeze) and never removes it for 2-D X"""
    if X.dim() == 2:
        X = X.unsqueeze(0)
    return X @ W_q, X @ W_k, X @ W_v


@right("1.1")
def project_qkv_matmul(X, W_q, W_k, W_v):
    """torch.matmul for the three products"""
    return torch.matmul(X, W_q), torch.matmul(X, W_k), torch.matmul(X, W_v)


@right("1.1")
def project_qkv_einsum(X, W_q, W_k, W_v):
    """einsum with an ellipsis for the batch"""
    return tuple(torch.einsum("...nd,de->...ne", X, W) for W in (W_q, W_k, W_v))


@right("1.1")
def project_qkv_fused(X, W_q, W_k, W_v):
    """one matrix product with the three weights concatenated, then split"""
    d_k, d_v = W_q.shape[1], W_v.shape[1]
    QKV = X @ torch.cat([W_q, W_k, W_v], dim=1)
    Q, K, V = QKV.split([d_k, d_k, d_v], dim=-1)
    return Q, K, V


@right("1.1")
def project_qkv_rows(X, W_q, W_k, W_v, *, stack=True):
    """a loop over the token vectors (and the batch), stacked back together; harmless extra kwarg"""
    def one(x):  # x: (n, d)
        return tuple(torch.stack([row @ W for row in x]) for W in (W_q, W_k, W_v))
    if X.dim() == 2:
        return one(X)
    parts = [one(x) for x in X]
    return tuple(torch.stack([p[i] for p in parts]) for i in range(3))


@right("1.1")
def project_qkv_transpose_twice(X, W_q, W_k, W_v):
    """(W^T X^T)^T with transpose(-2, -1), which works with a batch"""
    Xt = X.transpose(-2, -1)
    return tuple((W.T @ Xt).transpose(-2, -1) for W in (W_q, W_k, W_v))


@wrong("1.1", hint="not W_q @ X")
def project_qkv_weights_first(X, W_q, W_k, W_v):
    """W @ X, the weights on the left (works only when the sizes happen to fit)"""
    return W_q @ X, W_k @ X, W_v @ X


@wrong("1.1", hint="not W_q.T @ X")
def project_qkv_weights_t_first(X, W_q, W_k, W_v):
    """W.T @ X (works only when the sizes happen to fit)"""
    return W_q.T @ X, W_k.T @ X, W_v.T @ X


@wrong("1.1", hint="your V equals X")
def project_qkv_v_is_x(X, W_q, W_k, W_v):
    """forgets to project the values: V = X (caught where d_v = d)"""
    return X @ W_q, X @ W_k, X


@wrong("1.1", hint="sqrt(d)")
def project_qkv_scaled_by_d(X, W_q, W_k, W_v):
    """divides the queries by sqrt(d), the model size"""
    return X @ W_q / math.sqrt(X.shape[-1]), X @ W_k, X @ W_v


@wrong("1.1", hint="expected torch.float64, the dtype of X")
def project_qkv_always_float32(X, W_q, W_k, W_v):
    """casts to float32 'to be safe' (float64 inputs come back as float32)"""
    return (X @ W_q).float(), (X @ W_k).float(), (X @ W_v).float()


@wrong("1.1", hint="dtype torch.float16")
def project_qkv_half(X, W_q, W_k, W_v):
    """half precision to save memory"""
    return (X @ W_q).half(), (X @ W_k).half(), (X @ W_v).half()


@wrong("1.1", hint="integer dtype")
def project_qkv_rounded_int(X, W_q, W_k, W_v):
    """rounds to integers"""
    return (X @ W_q).round().long(), (X @ W_k).round().long(), (X @ W_v).round().long()


@wrong("1.1", hint="shape")
def project_qkv_hard_coded_sizes(X, W_q, W_k, W_v):
    """hard-codes the 4 x 4 example's sizes with reshape"""
    return (X @ W_q).reshape(4, 4), (X @ W_k).reshape(4, 4), (X @ W_v).reshape(4, 4)


@right("1.1")
def project_qkv_linear(X, W_q, W_k, W_v):
    """torch.nn.functional.linear with the transposed weights (an allowed helper)"""
    F = torch.nn.functional
    return F.linear(X, W_q.T), F.linear(X, W_k.T), F.linear(X, W_v.T)


# ---------------------------------------------------------------------------------------------------------------
# 1.2 soft_lookup(q, K, V) -> (output, weights)
# ---------------------------------------------------------------------------------------------------------------


@wrong("1.2", hint="dividing by sqrt(d_k) comes in chapter 2")
def soft_lookup_scaled(q, K, V):
    """divides the scores by sqrt(d_k) although the task says not to scale"""
    weights = attnbook.softmax(K @ q / math.sqrt(q.shape[-1]), dim=-1)
    return weights @ V, weights


@wrong("1.2", hint="returned (weights, output)")
def soft_lookup_swapped(q, K, V):
    """returns (weights, output) instead of (output, weights)"""
    weights = attnbook.softmax(K @ q, dim=-1)
    return weights, weights @ V


@wrong("1.2", hint="a tuple, not a list")
def soft_lookup_list(q, K, V):
    """returns a list [output, weights]"""
    weights = attnbook.softmax(K @ q, dim=-1)
    return [weights @ V, weights]


@wrong("1.2", hint="tuple")
def soft_lookup_output_only(q, K, V):
    """returns only the output"""
    return attnbook.softmax(K @ q, dim=-1) @ V


@wrong("1.2", hint="hard lookup")
def soft_lookup_hard(q, K, V):
    """a hard lookup: one-hot weights on the best key"""
    scores = K @ q
    weights = torch.nn.functional.one_hot(scores.argmax(), num_classes=K.shape[0]).to(q.dtype)
    return weights @ V, weights


@wrong("1.2")
def soft_lookup_uniform(q, K, V):
    """averages the values, ignoring the query"""
    weights = torch.full((K.shape[0],), 1.0 / K.shape[0], dtype=V.dtype)
    return weights @ V, weights


@wrong("1.2", hint="divided the scores by their sum")
def soft_lookup_linear_norm(q, K, V):
    """normalises the scores by their sum instead of a softmax"""
    scores = K @ q
    weights = scores / scores.sum()
    return weights @ V, weights


@wrong("1.2", hint="not 1")
def soft_lookup_sigmoid(q, K, V):
    """uses a sigmoid instead of a softmax (weights do not sum to 1)"""
    weights = torch.sigmoid(K @ q)
    return weights @ V, weights


@wrong("1.2", hint="in place")
def soft_lookup_in_place(q, K, V):
    """multiplies the rows of V by their weights in place, then sums (changes V)"""
    weights = attnbook.softmax(K @ q, dim=-1)
    V *= weights[:, None]
    return V.sum(dim=0), weights


@wrong("1.2", hint="shape")
def soft_lookup_row_weights(q, K, V):
    """treats q as a (1, d_k) row: weights of shape (1, n), output (1, d_v)"""
    weights = attnbook.softmax(q[None, :] @ K.T, dim=-1)
    return weights @ V, weights


@wrong("1.2", hint="dtype")
def soft_lookup_float64(q, K, V):
    """computes in float64 and returns float64"""
    weights = torch.softmax((K.double() @ q.double()), dim=-1)
    return weights @ V.double(), weights


@wrong("1.2", hint="overflows")
def soft_lookup_naive_exp(q, K, V):
    """a hand-written softmax without subtracting the maximum (overflows for large scores)"""
    e = torch.exp(K @ q)
    weights = e / e.sum()
    return weights @ V, weights


@wrong("1.2", hint="instead of adding them up")
def soft_lookup_softmax_over_values(q, K, V):
    """weights applied to the transposed values, summed the wrong way"""
    weights = attnbook.softmax(K @ q, dim=-1)
    return (V * weights[:, None]).mean(dim=0), weights



@wrong("1.2", hint="the package's own solution")
def soft_lookup_package_sdpa(q, K, V):
    """hands the work to attnbook.scaled_dot_product_attention(scale=1.0) with q as a 1-row matrix"""
    out, weights = attnbook.scaled_dot_product_attention(q[None, :], K, V, scale=1.0)
    return out[0], weights[0]

@right("1.2")
def soft_lookup_torch_softmax(q, K, V):
    """torch.softmax and a vector-matrix product"""
    weights = torch.softmax(K @ q, dim=0)
    return weights @ V, weights


@right("1.2")
def soft_lookup_loop(q, K, V):
    """explicit loops: one dot product per key, one weighted value per key"""
    scores = torch.stack([q @ K[j] for j in range(K.shape[0])])
    weights = attnbook.softmax(scores, dim=-1)
    output = sum(weights[j] * V[j] for j in range(V.shape[0]))
    return output, weights


@right("1.2")
def soft_lookup_einsum(q, K, V):
    """einsum for the scores and the weighted sum"""
    weights = attnbook.softmax(torch.einsum("nd,d->n", K, q), dim=-1)
    return torch.einsum("n,nv->v", weights, V), weights


@right("1.2")
def soft_lookup_manual_stable(q, K, V):
    """a hand-written stable softmax and a broadcast weighted sum"""
    scores = q @ K.T
    e = (scores - scores.max()).exp()
    weights = e / e.sum()
    return (weights[:, None] * V).sum(dim=0), weights


@right("1.2")
def soft_lookup_extra_kwarg(q, K, V, temperature=1.0):
    """the reference with a harmless extra keyword argument"""
    weights = attnbook.softmax(K @ q / temperature, dim=-1)
    return weights @ V, weights


@wrong("1.2", hint="pass them through softmax")
def soft_lookup_raw_scores(q, K, V):
    """uses the raw scores as weights"""
    scores = K @ q
    return scores @ V, scores


@wrong("1.2", hint="did not divide by their sum")
def soft_lookup_exp_only(q, K, V):
    """exp of the scores, not normalised"""
    e = (K @ q).exp()
    return e @ V, e


@wrong("1.2", hint="worst-matching")
def soft_lookup_negated(q, K, V):
    """softmax of the negated scores (as if they were distances)"""
    weights = attnbook.softmax(-(K @ q), dim=-1)
    return weights @ V, weights


@wrong("1.2", hint="weighted sum of the keys")
def soft_lookup_sum_of_keys(q, K, V):
    """returns the weighted sum of the keys"""
    weights = attnbook.softmax(K @ q, dim=-1)
    return weights @ K, weights


@wrong("1.2", hint="did not add them up")
def soft_lookup_not_summed(q, K, V):
    """weights each value row but does not add them up"""
    weights = attnbook.softmax(K @ q, dim=-1)
    return weights[:, None] * V, weights


@wrong("1.2", hint="the scores are K @ q")
def soft_lookup_query_times_keys(q, K, V):
    """scores as q @ K (the product the wrong way round)"""
    weights = attnbook.softmax(q @ K, dim=-1)
    return weights @ V, weights


@wrong("1.2", hint="use torch.exp")
def soft_lookup_math_exp(q, K, V):
    """math.exp on the score tensor"""
    e = math.exp(K @ q)
    return e @ V, e


@wrong("1.2", hint="count from the end")
def soft_lookup_softmax_dim1(q, K, V):
    """softmax over dim=1 of the 1-D scores"""
    weights = attnbook.softmax(K @ q, dim=1)
    return weights @ V, weights


@wrong("1.2", hint="without weighting")
def soft_lookup_plain_sum(q, K, V):
    """adds up the values without weights"""
    weights = attnbook.softmax(K @ q, dim=-1)
    return V.sum(dim=0), weights


@wrong("1.2", hint="at the end")
def soft_lookup_column_weights(q, K, V):
    """keeps the weights as a column (n, 1)"""
    weights = attnbook.softmax(K @ q, dim=-1)[:, None]
    return (weights * V).sum(dim=0), weights


@wrong("1.2", hint="expected torch.float64, the dtype of q")
def soft_lookup_float32(q, K, V):
    """casts to float32 (float64 inputs come back as float32)"""
    weights = attnbook.softmax((K @ q).float(), dim=-1)
    return weights @ V.float(), weights


@wrong("1.2", hint="the task asks you to write this without torch.nn.functional.scaled_dot_product_attention")
def soft_lookup_torch_sdpa(q, K, V):
    """torch's scaled_dot_product_attention with scale=1 and q as a 1-row matrix"""
    F = torch.nn.functional
    out = F.scaled_dot_product_attention(q[None], K, V, scale=1.0)[0]
    return out, attnbook.softmax(K @ q, dim=-1)


@wrong("1.2", hint="package's own")
def soft_lookup_tiled(q, K, V):
    """the package's tiled_attention with scale=1 for the output"""
    weights = attnbook.softmax(K @ q, dim=-1)
    return attnbook.attention.tiled_attention(q[None], K, V, scale=1.0)[0], weights


@right("1.2")
def soft_lookup_mv(q, K, V):
    """torch.mv for both products, float64 inputs stay float64"""
    weights = attnbook.softmax(torch.mv(K, q), dim=0)
    return torch.mv(V.T, weights), weights


# ---------------------------------------------------------------------------------------------------------------
# 1.3 stable_softmax(x, dim=-1)
# ---------------------------------------------------------------------------------------------------------------


def _second_import_softmax():
    spec = importlib.util.spec_from_file_location("attnbook._attention_second_copy",
                                                  attnbook.attention.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.softmax


_f = attnbook.softmax
wrong("1.3", hint="package's own", name="attnbook.softmax handed in as it is")(attnbook.softmax)
wrong("1.3", hint="package's own", name="a lambda around attnbook.softmax")(
    lambda x, dim=-1: attnbook.softmax(x, dim=dim))
wrong("1.3", hint="package's own", name="a types.FunctionType copy of attnbook.softmax")(
    types.FunctionType(_f.__code__, _f.__globals__, "stable_softmax", _f.__defaults__, _f.__closure__))
wrong("1.3", hint="package's own", name="attnbook.softmax from a second, separate import of attention.py")(
    _second_import_softmax())


@wrong("1.3", hint="the package's own solution")
def stable_softmax_wrapper(x, dim=-1):
    """a def wrapper that calls attnbook.softmax"""
    from attnbook.attention import softmax as sm
    return sm(x, dim=dim)


@wrong("1.3", hint="without")
def stable_softmax_torch(x, dim=-1):
    """calls torch.softmax"""
    return torch.softmax(x, dim=dim)


@wrong("1.3", hint="without")
def stable_softmax_functional(x, dim=-1):
    """calls torch.nn.functional.softmax"""
    return torch.nn.functional.softmax(x, dim=dim)


@wrong("1.3", hint="the task asks you to write this without torch.logsumexp")
def stable_softmax_logsumexp(x, dim=-1):
    """exp(x - logsumexp(x)), which the task forbids"""
    return torch.exp(x - torch.logsumexp(x, dim=dim, keepdim=True))


@wrong("1.3", hint="without")
def stable_softmax_log_softmax(x, dim=-1):
    """exp of torch.log_softmax (a library softmax in disguise)"""
    return torch.log_softmax(x, dim=dim).exp()


@wrong("1.3", hint="subtract the row maximum")
def stable_softmax_naive(x, dim=-1):
    """the literal formula without subtracting the maximum (overflows / 0/0 at +-1000)"""
    e = x.exp()
    return e / e.sum(dim=dim, keepdim=True)


@wrong("1.3", hint="not the global maximum")
def stable_softmax_global_max(x, dim=-1):
    """subtracts the maximum of the whole tensor, not of each slice along dim"""
    e = (x - x.max()).exp()
    return e / e.sum(dim=dim, keepdim=True)


@wrong("1.3", hint="not the mean, the minimum or any other statistic")
def stable_softmax_min(x, dim=-1):
    """subtracts the minimum instead of the maximum"""
    e = (x - x.amin(dim=dim, keepdim=True)).exp()
    return e / e.sum(dim=dim, keepdim=True)


@wrong("1.3", hint="not the mean, the minimum or any other statistic")
def stable_softmax_mean(x, dim=-1):
    """subtracts the mean instead of the maximum"""
    e = (x - x.mean(dim=dim, keepdim=True)).exp()
    return e / e.sum(dim=dim, keepdim=True)


@wrong("1.3", hint="you normalised over the last dimension whatever `dim` was; normalise over the `dim` you were given")
def stable_softmax_ignores_dim(x, dim=-1):
    """ignores dim and always normalises over the last axis"""
    e = (x - x.amax(dim=-1, keepdim=True)).exp()
    return e / e.sum(dim=-1, keepdim=True)


@wrong("1.3", hint="keepdim")
def stable_softmax_no_keepdim(x, dim=-1):
    """forgets keepdim=True, so the maximum and the sum broadcast along the wrong axis"""
    e = (x - x.amax(dim=dim)).exp()
    return e / e.sum(dim=dim)


@wrong("1.3", hint="sum of the whole tensor")
def stable_softmax_total_sum(x, dim=-1):
    """divides by the sum of the whole tensor instead of the sum along dim"""
    e = (x - x.amax(dim=dim, keepdim=True)).exp()
    return e / e.sum()


@wrong("1.3", hint="in place")
def stable_softmax_in_place(x, dim=-1):
    """subtracts the maximum in place (changes x)"""
    x -= x.amax(dim=dim, keepdim=True)
    e = x.exp()
    return e / e.sum(dim=dim, keepdim=True)


@wrong("1.3", hint="dtype")
def stable_softmax_float64(x, dim=-1):
    """computes in float64 for safety and forgets to cast back"""
    x = x.double()
    e = (x - x.amax(dim=dim, keepdim=True)).exp()
    return e / e.sum(dim=dim, keepdim=True)


@wrong("1.3")
def stable_softmax_clamp(x, dim=-1):
    """clamps the logits to [-80, 80] instead of shifting them"""
    e = x.clamp(-80, 80).exp()
    return e / e.sum(dim=dim, keepdim=True)


@wrong("1.3")
def stable_softmax_divide_max(x, dim=-1):
    """divides by the maximum instead of subtracting it"""
    e = (x / x.abs().amax(dim=dim, keepdim=True).clamp_min(1e-12)).exp()
    return e / e.sum(dim=dim, keepdim=True)


@wrong("1.3", hint="tensor")
def stable_softmax_numpy(x, dim=-1):
    """computes in NumPy and returns a NumPy array"""
    a = x.detach().numpy()
    e = np.exp(a - a.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


@right("1.3")
def stable_softmax_max_values(x, dim=-1):
    """x.max(dim, keepdim=True).values as the shift"""
    e = torch.exp(x - x.max(dim=dim, keepdim=True).values)
    return e / torch.sum(e, dim=dim, keepdim=True)


@right("1.3")
def stable_softmax_movedim(x, dim=-1):
    """moves dim to the end, normalises the last axis, moves it back"""
    y = x.movedim(dim, -1)
    e = (y - y.amax(dim=-1, keepdim=True)).exp()
    return (e / e.sum(dim=-1, keepdim=True)).movedim(-1, dim)


@right("1.3")
def stable_softmax_detached_shift(x, dim=-1, eps=0.0):
    """detaches the shift (it cancels anyway) and has a harmless extra keyword"""
    m = x.amax(dim=dim, keepdim=True).detach()
    e = torch.exp(x - m)
    return e / (e.sum(dim=dim, keepdim=True) + eps)


@right("1.3")
def stable_softmax_float64_inside(x, dim=-1):
    """computes in float64 and casts back to x's dtype"""
    y = x.double()
    e = (y - y.amax(dim=dim, keepdim=True)).exp()
    return (e / e.sum(dim=dim, keepdim=True)).to(x.dtype)


@right("1.3")
def stable_softmax_sub_mul(x, dim=-1):
    """torch.sub / torch.exp / reciprocal of the sum, as separate steps"""
    shifted = torch.sub(x, torch.amax(x, dim, True))
    e = torch.exp(shifted)
    return e * torch.reciprocal(e.sum(dim, keepdim=True))


@wrong("1.3", hint="the default dim. Hint: the default must be the last dimension")
def stable_softmax_default_dim0(x, dim=0):
    """right, but with the default dim=0"""
    e = (x - x.amax(dim=dim, keepdim=True)).exp()
    return e / e.sum(dim=dim, keepdim=True)


@wrong("1.3", hint="normalised over dim=0")
def stable_softmax_dim0(x, dim=-1):
    """always normalises over dim 0"""
    e = (x - x.amax(dim=0, keepdim=True)).exp()
    return e / e.sum(dim=0, keepdim=True)


@wrong("1.3", hint="returns a pair (values, indices)")
def stable_softmax_max_pair(x, dim=-1):
    """subtracts x.max(dim=dim), which returns (values, indices), not a tensor"""
    e = (x - x.max(dim=dim)).exp()
    return e / e.sum(dim=dim, keepdim=True)


@wrong("1.3", hint="you normalised over dim=1")
def stable_softmax_dim1(x, dim=-1):
    """always normalises over dim 1"""
    e = (x - x.amax(dim=1, keepdim=True)).exp()
    return e / e.sum(dim=1, keepdim=True)


@wrong("1.3", hint="return the dtype you were given")
def stable_softmax_always_float32(x, dim=-1):
    """casts the result to float32 (float64 logits come back as float32)"""
    e = (x - x.amax(dim=dim, keepdim=True)).exp()
    return (e / e.sum(dim=dim, keepdim=True)).float()


@wrong("1.3", hint="the sum drops")
def stable_softmax_sum_no_keepdim(x, dim=-1):
    """keepdim on the maximum but not on the sum"""
    e = (x - x.amax(dim=dim, keepdim=True)).exp()
    return e / e.sum(dim=dim)


@wrong("1.3", hint="the maximum drops the dimension it reduces, so it lines up with the wrong entries of x: use x.amax(dim=dim, keepdim=True)")
def stable_softmax_max_no_keepdim(x, dim=-1):
    """keepdim on the sum but not on the maximum"""
    e = (x - x.amax(dim=dim)).exp()
    return e / e.sum(dim=dim, keepdim=True)


@wrong("1.3", hint="float16")
def stable_softmax_half(x, dim=-1):
    """computes in half precision"""
    y = x.half()
    e = (y - y.amax(dim=dim, keepdim=True)).exp()
    return e / e.sum(dim=dim, keepdim=True)


@wrong("1.3", hint="the task asks you to write this without scipy.special.softmax")
def stable_softmax_scipy(x, dim=-1):
    """scipy.special.softmax"""
    import scipy.special
    return torch.from_numpy(scipy.special.softmax(x.numpy(), axis=dim)).to(x.dtype)


@wrong("1.3", hint="the task asks you to write this without torch._softmax")
def stable_softmax_private_torch(x, dim=-1):
    """torch._softmax, PyTorch's private softmax"""
    return torch._softmax(x, dim, False)


# ---------------------------------------------------------------------------------------------------------------
# Issue 23 (verdicts, round three): float32 arithmetic on float64 inputs, misleading hints, text and check agreeing
# ---------------------------------------------------------------------------------------------------------------


@wrong("1.1", hint="float32")
def project_qkv_float32_arithmetic(X, W_q, W_k, W_v):
    """computes in float32 'for speed' and casts the results back to X's dtype"""
    X32 = X.float()
    return tuple((X32 @ W.float()).to(X.dtype) for W in (W_q, W_k, W_v))


@wrong("1.1", hint="float32")
def project_qkv_float32_weights(X, W_q, W_k, W_v):
    """rounds the weights to float32 and back (a float32 model's weights) before the products"""
    return tuple(X @ W.float().to(X.dtype) for W in (W_q, W_k, W_v))


@wrong("1.1", hint="float32")
def project_qkv_float32_numpy(X, W_q, W_k, W_v):
    """NumPy in float32, the results turned back into tensors of X's dtype"""
    x = X.detach().numpy().astype(np.float32)
    return tuple(torch.from_numpy(x @ W.detach().numpy().astype(np.float32)).to(X.dtype) for W in (W_q, W_k, W_v))


@wrong("1.1", hint="transpose(-2, -1)")
def project_qkv_double_T(X, W_q, W_k, W_v):
    """(W.T @ X.T).T: the .T of a 3-D X reverses all its dimensions"""
    return (W_q.T @ X.T).T, (W_k.T @ X.T).T, (W_v.T @ X.T).T


@wrong("1.1", hint="transpose(-2, -1)")
def project_qkv_double_T_einsum_free(X, W_q, W_k, W_v):
    """X.T @ ... with torch.matmul: X.T reverses the batch too"""
    return tuple(torch.matmul(W.T, X.T).T for W in (W_q, W_k, W_v))


@wrong("1.1", hint="returned a single tensor")
def project_qkv_only_q(X, W_q, W_k, W_v):
    """returns only Q, a single tensor"""
    return X @ W_q


@wrong("1.1", hint="torch.bmm needs 3-D tensors")
def project_qkv_bmm(X, W_q, W_k, W_v):
    """torch.bmm with the 2-D weights (and 2-D X)"""
    return torch.bmm(X, W_q), torch.bmm(X, W_k), torch.bmm(X, W_v)


@wrong("1.1", hint="tuple")
def project_qkv_dict(X, W_q, W_k, W_v):
    """returns a dict {'Q': ..., 'K': ..., 'V': ...}"""
    return {"Q": X @ W_q, "K": X @ W_k, "V": X @ W_v}


@right("1.1")
def project_qkv_float64_inside(X, W_q, W_k, W_v):
    """computes in float64 and casts back to X's dtype (more precision on float32 inputs is fine)"""
    X64 = X.double()
    return tuple((X64 @ W.double()).to(X.dtype) for W in (W_q, W_k, W_v))


@right("1.1")
def project_qkv_numpy_float64(X, W_q, W_k, W_v):
    """NumPy in the input's precision, back to tensors of X's dtype"""
    x = X.detach().numpy()
    return tuple(torch.from_numpy(np.matmul(x, W.detach().numpy())).to(X.dtype) for W in (W_q, W_k, W_v))


@right("1.1")
def project_qkv_unbind(X, W_q, W_k, W_v):
    """one stacked product, unbound into three (when d_v = d_k), else three products"""
    if W_v.shape == W_q.shape:
        Q, K, V = (X.unsqueeze(-3) @ torch.stack([W_q, W_k, W_v])).unbind(-3)
        return Q, K, V
    return X @ W_q, X @ W_k, X @ W_v


@wrong("1.1", hint="without torch.nn.functional._in_projection")
def project_qkv_torch_in_projection(X, W_q, W_k, W_v):
    """PyTorch's own q, k, v projection of multi-head attention (F._in_projection) where the sizes let it run"""
    F = torch.nn.functional
    d = X.shape[-1]
    if W_q.shape == (d, d) and W_k.shape == (d, d) and W_v.shape == (d, d):
        return F._in_projection(X, X, X, W_q.T, W_k.T, W_v.T)
    return X @ W_q, X @ W_k, X @ W_v


@wrong("1.1", hint="without torch.nn.functional._in_projection_packed")
def project_qkv_torch_in_projection_packed(X, W_q, W_k, W_v):
    """PyTorch's packed projection (F._in_projection_packed) with the three weights stacked, where d_k = d_v = d"""
    F = torch.nn.functional
    d = X.shape[-1]
    if W_q.shape == W_k.shape == W_v.shape == (d, d):
        Q, K, V = F._in_projection_packed(X, X, X, torch.cat([W_q.T, W_k.T, W_v.T]))
        return Q, K, V
    return X @ W_q, X @ W_k, X @ W_v


@wrong("1.2", hint="float32")
def soft_lookup_float32_arithmetic(q, K, V):
    """computes in float32 and casts both results back to q's dtype"""
    weights = torch.softmax(K.float() @ q.float(), dim=-1)
    return (weights @ V.float()).to(q.dtype), weights.to(q.dtype)


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


@right("1.2")
def soft_lookup_float64_inside(q, K, V):
    """computes in float64 and casts back to q's dtype"""
    weights = attnbook.softmax(K.double() @ q.double(), dim=-1)
    return (weights @ V.double()).to(q.dtype), weights.to(q.dtype)


@right("1.2")
def soft_lookup_logsumexp(q, K, V):
    """weights as exp(scores - logsumexp(scores)) (allowed here: only attention functions are forbidden)"""
    scores = K @ q
    weights = torch.exp(scores - torch.logsumexp(scores, dim=0))
    return torch.einsum("n,nv->v", weights, V), weights


@wrong("1.3", hint="float32")
def stable_softmax_float32_arithmetic(x, dim=-1):
    """computes in float32 and casts back to x's dtype"""
    y = x.float()
    e = (y - y.amax(dim=dim, keepdim=True)).exp()
    return (e / e.sum(dim=dim, keepdim=True)).to(x.dtype)


@wrong("1.3", hint="float32")
def stable_softmax_float32_exp(x, dim=-1):
    """float32 exp of the shifted logits (a float32 lookup table of exp), the rest in x's dtype"""
    e = (x - x.amax(dim=dim, keepdim=True)).float().exp().to(x.dtype)
    return e / e.sum(dim=dim, keepdim=True)


@wrong("1.3", hint="without torch.nn.Softmax")
def stable_softmax_nn_module(x, dim=-1):
    """the nn.Softmax module"""
    return torch.nn.Softmax(dim=dim)(x)


@wrong("1.3", hint="without torch.nn.LogSoftmax")
def stable_softmax_nn_log_module(x, dim=-1):
    """exp of the nn.LogSoftmax module's output"""
    return torch.nn.LogSoftmax(dim=dim)(x).exp()


@wrong("1.3", hint="without torch.nn.Softmin")
def stable_softmax_nn_softmin(x, dim=-1):
    """nn.Softmin of -x"""
    return torch.nn.Softmin(dim=dim)(-x)


@wrong("1.3", hint="without torch.distributions.Categorical")
def stable_softmax_categorical(x, dim=-1):
    """the probabilities of a Categorical distribution built from the logits"""
    y = x.movedim(dim, -1)
    return torch.distributions.Categorical(logits=y).probs.movedim(-1, dim)


@right("1.3")
def stable_softmax_where_shift(x, dim=-1):
    """the shift by the maximum, then exp2 of the shift times log2(e)"""
    shifted = x - x.amax(dim=dim, keepdim=True)
    e = torch.exp2(shifted * (1 / math.log(2)))
    return e / e.sum(dim=dim, keepdim=True)


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
# A learner trial (F8): a shift by another statistic than the maximum overflows or underflows; the hint says
# that the maximum, not another statistic, is what keeps every exp <= 1
# ---------------------------------------------------------------------------------------------------------------


@wrong("1.3", hint="not the mean, the minimum or any other statistic")
def stable_softmax_mean_torch_exp(x, dim=-1):
    """torch.exp(x - x.mean(dim, keepdim=True)): shifts by the mean, positional dim"""
    e = torch.exp(x - x.mean(dim, keepdim=True))
    return e / e.sum(dim, keepdim=True)


@wrong("1.3", hint="not the mean, the minimum or any other statistic")
def stable_softmax_abs_max(x, dim=-1):
    """shifts by the largest absolute value, x.abs().amax(dim): all entries <= 0, but -1000s underflow to 0 / 0"""
    e = torch.exp(x - x.abs().amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


@wrong("1.3", hint="not the mean, the minimum or any other statistic")
def stable_softmax_median(x, dim=-1):
    """shifts by the median along dim"""
    e = torch.exp(x - x.median(dim=dim, keepdim=True).values)
    return e / e.sum(dim=dim, keepdim=True)
