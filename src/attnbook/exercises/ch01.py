"""Checkers for chapter 1, queries, keys and values."""
from __future__ import annotations

import math
from itertools import permutations

import torch
from torch import Tensor

from ..attention import softmax
from .compare import expect_close, expect_tensor, expect_tuple
from .guard import call
from .registry import exercise, Wrong

_ATOL, _RTOL = 1e-5, 1e-4


def _maybe(fn):
    """fn() if it works, else None: the output of a mistake that only some shapes allow (X @ W.T, W @ X, ...)."""
    try:
        return fn()
    except RuntimeError:
        return None


def _mistakes(pairs) -> dict[str, Tensor]:
    """{hint: wrong_output}, in order, without the mistakes that this input's shapes make impossible (None).

    Every hint must differ from the others: a dict keeps only one output per hint.
    """
    return {hint: wrong for hint, wrong in pairs if wrong is not None}


def _same(got, ref: Tensor) -> bool:
    """True if `got` is a tensor equal to `ref` (same shape, close values)."""
    return (isinstance(got, Tensor) and tuple(got.shape) == tuple(ref.shape) and not got.is_complex()
            and got.dtype != torch.bool
            and torch.allclose(got.detach().double().cpu(), ref.double(), atol=_ATOL, rtol=_RTOL))


# ---------------------------------------------------------------------------------------------------------
# 1.1  Project X to Q, K and V
# ---------------------------------------------------------------------------------------------------------


def _qkv_error_hint(message: str) -> str | None:
    if "RuntimeError" not in message or "3D tensor" in message:
        return None
    if "must be a matrix" in message or "2D" in message or "2-D" in message:
        return ("X can be 3-D, (batch, n, d): use the @ operator (torch.matmul), which treats the leading "
                "dimension as a batch; torch.mm and .mm accept 2-D matrices only")
    return ("X has shape (..., n, d) and W_q, W_k have shape (d, d_k), W_v (d, d_v): the sizes that meet in "
            "the middle must agree, so compute X @ W (not W @ X, X @ W.T or W.T @ X)")


@exercise("1.1", "Project X to queries, keys and values", section="Queries, keys and values from the same tokens")
def check_project_qkv(project_qkv) -> str:
    """project_qkv(X, W_q, W_k, W_v) must return (X @ W_q, X @ W_k, X @ W_v) for 2-D and 3-D X."""
    g = torch.Generator().manual_seed(11)

    def case(desc, x_shape, d_k, d_v):
        d = x_shape[-1]
        return (desc, torch.randn(*x_shape, generator=g), torch.randn(d, d_k, generator=g),
                torch.randn(d, d_k, generator=g), torch.randn(d, d_v, generator=g))

    cases = [
        case("X of shape (4, 4) and W_q, W_k, W_v of shape (4, 4)", (4, 4), 4, 4),
        case("X of shape (5, 6), W_q and W_k of shape (6, 3), W_v of shape (6, 2)", (5, 6), 3, 2),
        case("one token: X of shape (1, 4), W_q and W_k of shape (4, 2), W_v of shape (4, 3)", (1, 4), 2, 3),
        case("a batch of 2 sequences: X of shape (2, 5, 4), W_q and W_k of shape (4, 3), W_v of shape (4, 6)",
             (2, 5, 4), 3, 6),
        case("a batch of 1: X of shape (1, 3, 4), W_q and W_k of shape (4, 2), W_v of shape (4, 2)",
             (1, 3, 4), 2, 2),
    ]
    names = ("Q", "K", "V")
    for desc, X, W_q, W_k, W_v in cases:
        got = call(project_qkv, X, W_q, W_k, W_v, what="project_qkv", on=desc, explain=_qkv_error_hint)
        got = expect_tuple(got, names, "project_qkv", desc)
        weights = {"W_q": W_q, "W_k": W_k, "W_v": W_v}
        refs = [X @ W_q, X @ W_k, X @ W_v]  # (..., n, d_k), (..., n, d_k), (..., n, d_v)
        # All three right but in another order?
        for order in permutations(range(3)):
            if order != (0, 1, 2) and all(_same(got[i], refs[j]) for i, j in enumerate(order)):
                returned = ", ".join(names[j] for j in order)
                raise Wrong(f"project_qkv returned ({returned}) on {desc}, expected (Q, K, V)",
                            "return them in the order Q, K, V: `return Q, K, V`")
        for i, (name, w_name, ref) in enumerate(zip(names, weights, refs)):
            W, size = weights[w_name], "d_v" if name == "V" else "d_k"
            mistakes = _mistakes([
                (f"you transposed the weight matrix: {w_name} already has shape (d, {size}), so compute "
                 f"X @ {w_name}, not X @ {w_name}.T", _maybe(lambda: X @ W.transpose(0, 1))),
                (f"the order of the product matters: compute X @ {w_name} (rows of X are tokens), "
                 f"not {w_name} @ X", _maybe(lambda: W @ X)),
                (f"the order of the product matters: compute X @ {w_name}, not {w_name}.T @ X",
                 _maybe(lambda: W.transpose(0, 1) @ X)),
                (f"your {name} is transposed: it should have one row per token, shape (..., n, "
                 f"{size}); compute X @ {w_name} and do not transpose it",
                 ref.transpose(-2, -1)),
                *[(f"your {name} looks like X @ {other}: each of Q, K and V has its own weight matrix "
                   f"(Q = X @ W_q, K = X @ W_k, V = X @ W_v)", _maybe(lambda o=o: X @ o))
                  for other, o in weights.items() if other != w_name],
                (f"your {name} equals X: multiply X by {w_name}", X),
            ])
            expect_close(got[i], ref, what=f"{name} (item {i + 1} of what you returned)", on=desc,
                         atol=_ATOL, rtol=_RTOL, mistakes=mistakes)
    return f"Q, K and V are right on {len(cases)} inputs, including d_k != d, d_v != d_k, one token and batches"


# ---------------------------------------------------------------------------------------------------------
# 1.2  A soft lookup for one query
# ---------------------------------------------------------------------------------------------------------


def _lookup_error_hint(message: str) -> str | None:
    if "RuntimeError" not in message:
        return None
    return ("q has shape (d_k,), K (n, d_k) and V (n, d_v): the scores are K @ q, shape (n,), and the output "
            "is weights @ V, shape (d_v,)")


@exercise("1.2", "A soft lookup for one query", section="A soft dictionary lookup")
def check_soft_lookup(soft_lookup) -> str:
    """soft_lookup(q, K, V) must return (softmax(K @ q) @ V, softmax(K @ q)), unscaled."""
    g = torch.Generator().manual_seed(12)
    sharp_keys = torch.tensor([[2.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 2.0], [1.0, 1.0, 0.0]])
    cases = [
        ("q of shape (3,), K of shape (4, 3), V of shape (4, 3)",
         torch.randn(3, generator=g), torch.randn(4, 3, generator=g), torch.randn(4, 3, generator=g)),
        ("q of shape (2,), K of shape (5, 2), V of shape (5, 4)",
         1.5 * torch.randn(2, generator=g), torch.randn(5, 2, generator=g), torch.randn(5, 4, generator=g)),
        ("a query that matches the second key best: q = [0, 2, 0], K of shape (4, 3), V of shape (4, 2)",
         torch.tensor([0.0, 2.0, 0.0]), sharp_keys, torch.randn(4, 2, generator=g)),
        ("a single key and value: q of shape (3,), K of shape (1, 3), V of shape (1, 2)",
         torch.randn(3, generator=g), torch.randn(1, 3, generator=g), torch.randn(1, 2, generator=g)),
    ]
    names = ("output", "weights")
    for desc, q, K, V in cases:
        got = call(soft_lookup, q, K, V, what="soft_lookup", on=desc, explain=_lookup_error_hint)
        got_out, got_w = expect_tuple(got, names, "soft_lookup", desc)
        n = K.shape[0]
        scores = K @ q  # (n,)
        weights = softmax(scores, dim=-1)  # (n,)
        output = weights @ V  # (d_v,)
        if _same(got_out, weights) and _same(got_w, output) and not _same(got_out, output):
            raise Wrong(f"soft_lookup returned (weights, output) on {desc}, expected (output, weights)",
                        "return them in the order output, weights: `return output, weights`")
        one_hot = torch.nn.functional.one_hot(scores.argmax(), n).to(scores.dtype)  # (n,)
        scaled = softmax(scores / math.sqrt(K.shape[1]), dim=-1)
        no_softmax = "you used the raw scores K @ q as weights: pass them through softmax first"
        hard = ("you did a hard lookup (all the weight on the best-matching key, as argmax does); "
                "attention is soft: weights = softmax(K @ q), which gives every key some weight")
        unscaled = ("in this chapter the scores are not scaled: weights = softmax(K @ q); dividing by "
                    "sqrt(d_k) comes in chapter 2")
        w_mistakes = _mistakes([
            (no_softmax, scores),
            (hard, one_hot),
            (unscaled, scaled),
            ("you took exp of the scores but did not divide by their sum: softmax normalises so that the "
             "weights sum to 1", scores.exp()),
            ("your weights favour the worst-matching keys: softmax of K @ q, not of -(K @ q)",
             softmax(-scores, dim=-1)),
            ("your weights have an extra dimension of size 1 in front: they should be 1-D, one weight per "
             "key, shape (n,), as K @ q gives", weights[None, :]),
            ("your weights have an extra dimension of size 1 at the end: they should be 1-D, one weight per "
             "key, shape (n,), as K @ q gives", weights[:, None]),
        ])
        try:
            expect_close(got_w, weights, what="weights (item 2 of what you returned)", on=desc,
                         atol=_ATOL, rtol=_RTOL, mistakes=w_mistakes)
        except Wrong as e:
            if e.hint is None and isinstance(got_w, Tensor) and tuple(got_w.shape) == (n,) \
                    and got_w.is_floating_point() and torch.isfinite(got_w).all():
                total = float(got_w.double().sum())
                if got_w.min() < 0:
                    raise Wrong(e.message, "some of your weights are negative; softmax weights are all "
                                           "positive: weights = softmax(K @ q)") from None
                if abs(total - 1.0) > 1e-4:
                    raise Wrong(e.message, f"your weights sum to {total:.4g}, not 1; softmax divides by the "
                                           "sum: weights = softmax(K @ q)") from None
            raise
        out_mistakes = _mistakes([
            ("you took a weighted sum of the keys; the output is a weighted sum of the values: weights @ V",
             weights @ K),
            (no_softmax, scores @ V),
            (hard, one_hot @ V),
            (unscaled, scaled @ V),
            ("you averaged the values with equal weights; use the attention weights: weights @ V", V.mean(0)),
            ("you added up the values without weighting them: output = weights @ V", V.sum(0)),
            ("you weighted each value but did not add them up: sum over the n positions, output = weights @ V "
             "has shape (d_v,)", weights[:, None] * V),
            ("your output has an extra dimension of size 1: it should be 1-D, shape (d_v,)", output[None, :]),
        ])
        expect_close(got_out, output, what="output (item 1 of what you returned)", on=desc,
                     atol=_ATOL, rtol=_RTOL, mistakes=out_mistakes)
    return f"output and weights are right on {len(cases)} inputs, including d_v != d_k and a single key"


# ---------------------------------------------------------------------------------------------------------
# 1.3  A numerically stable softmax
# ---------------------------------------------------------------------------------------------------------


def _softmax_error_hint(message: str) -> str | None:
    if "unexpected keyword argument" in message:
        return "keep the signature stable_softmax(x, dim=-1): the checker passes `dim` by name"
    if "return_types" in message:
        return ("x.max(dim=...) returns a pair (values, indices); use x.amax(dim=dim, keepdim=True), "
                "or x.max(dim=dim, keepdim=True).values")
    if "must match the size of tensor" in message:
        return ("the maximum and the sum lose the dimension they reduce: pass keepdim=True so that they "
                "line up with x again")
    return None


_INSTEAD = "build it from exp, amax and sum, as the chapter does: e = (x - max).exp(), then e / e.sum(...)"
SOFTMAX_FORBIDDEN = [(name, _INSTEAD) for name in (
    "torch.softmax", "torch.Tensor.softmax", "torch.nn.functional.softmax", "torch.special.softmax",
    "torch.log_softmax", "torch.Tensor.log_softmax", "torch.nn.functional.log_softmax",
    "torch.special.log_softmax", "torch._softmax", "torch._log_softmax", "torch.nn.functional.softmin",
    "torch.logsumexp", "torch.Tensor.logsumexp", "torch.special.logsumexp",
    "torch.ops.aten.softmax", "torch.ops.aten._softmax", "torch.ops.aten.log_softmax",
    "attnbook.attention.softmax", "scipy.special.softmax", "scipy.special.log_softmax", "scipy.special.logsumexp",
)]


@exercise("1.3", "A numerically stable softmax", section="Softmax, and why you subtract the maximum",
          references=("attnbook.attention.softmax",))
def check_stable_softmax(stable_softmax) -> str:
    """stable_softmax(x, dim=-1) must match softmax on ordinary, huge and one-hot logits, along any dim."""
    g = torch.Generator().manual_seed(13)
    cases = [
        ("random logits of shape (3, 3)", 3 * torch.randn(3, 3, generator=g), -1),
        ("random logits of shape (2, 5), with the default dim", torch.randn(2, 5, generator=g), None),
        ("logits [[1000, 999, -1000]]", torch.tensor([[1000.0, 999.0, -1000.0]]), -1),
        ("logits [[-1000, -1000, -1000]]", torch.tensor([[-1000.0, -1000.0, -1000.0]]), -1),
        ("logits [[1000, 999], [-1000, -1001]]", torch.tensor([[1000.0, 999.0], [-1000.0, -1001.0]]), -1),
        ("random logits of shape (3, 4, 6) with dim=1", 5 * torch.randn(3, 4, 6, generator=g), 1),
        ("logits of shape (3, 2) with dim=0", torch.tensor([[1000.0, -3.0], [0.0, -1000.0], [998.0, 2.0]]), 0),
        ("a 1-D tensor of logits [1000, 0, -1000]", torch.tensor([1000.0, 0.0, -1000.0]), -1),
        ("float64 logits of shape (2, 3)", 10 * torch.randn(2, 3, generator=g, dtype=torch.float64), -1),
        ("a single logit [[7.]]", torch.tensor([[7.0]]), -1),
    ]
    for desc, x, dim in cases:
        args = {} if dim is None else {"dim": dim}  # dim=None: the default, dim=-1, is tested too
        dim = -1 if dim is None else dim
        got = call(stable_softmax, x, **args, what="stable_softmax", on=desc, explain=_softmax_error_hint,
                   forbid=SOFTMAX_FORBIDDEN)
        naive = torch.exp(x) / torch.exp(x).sum(dim=dim, keepdim=True)
        other = -1 if dim not in (-1, x.dim() - 1) else 0
        e_flat = _maybe(lambda: torch.exp(x - x.amax(dim=dim)))  # no keepdim: lines up wrongly, or fails
        e_keep = torch.exp(x - x.amax(dim=dim, keepdim=True))
        mistakes = [
            ("subtract the row maximum before exp", naive),
            ("subtract the maximum over the same dim you sum over (keepdim=True), not the global maximum",
             torch.exp(x - x.max()) / torch.exp(x - x.max()).sum(dim=dim, keepdim=True)),
            ("the sum drops the dimension it adds up over, so it lines up with the wrong entries: "
             "use e.sum(dim=dim, keepdim=True)", _maybe(lambda: e_keep / e_keep.sum(dim=dim))),
        ]
        if e_flat is not None:
            mistakes += [
                ("the maximum drops the dimension it reduces, so it lines up with the wrong entries of x: "
                 "use x.amax(dim=dim, keepdim=True)", _maybe(lambda: e_flat / e_flat.sum(dim=dim, keepdim=True))),
                ("the maximum and the sum both drop the dimension they reduce, so they line up with the wrong "
                 "entries: pass keepdim=True to both", _maybe(lambda: e_flat / e_flat.sum(dim=dim))),
            ]
        if x.dim() > 1:
            mistakes.insert(0, (f"you normalised over dim={other % x.dim()}; normalise over the `dim` you were "
                                f"given (here dim={dim})",
                                softmax(x, dim=other)))
        expect_close(got, softmax(x, dim=dim), what="the result", on=desc, atol=1e-6,
                     mistakes=_mistakes(mistakes))
        try:
            expect_tensor(got, what="the result", on=desc, dtype=x.dtype, finite=False)
        except Wrong as e:
            raise Wrong(e.message, "return the dtype you were given: build the result from x with tensor "
                                   "operations rather than creating a new tensor with a fixed dtype") from None
    return f"matches softmax on {len(cases)} inputs, including logits of +-1000, any dim and float64"
