"""Checkers for chapter 1, queries, keys and values.

A function answer is run on every input first (`runs.collect`); when it is wrong, a known mistake is named only if it
gives the answer's result on every input it was run on (`runs.verdict`), so that a mistake that happens to fit one
input is never blamed. Otherwise the message shows the first wrong entry and the rule it breaks.
"""
from __future__ import annotations

import math
from itertools import permutations

import torch
from torch import Tensor

from ..attention import softmax
from .compare import close_to, expect_tensor, expect_tuple, generator
from .forbid import ATTENTION_SHORTCUTS
from .guard import call
from .hints import FLOAT32_ARITHMETIC, FLOAT64_TOL, tolerance_for
from .registry import exercise, Wrong
from .runs import ATOL, RTOL, Run, collect, expect_items, expect_like, loose, shape_hint, try_mistake, verdict
from ..i18n import N_, _


def _mistakes(ref: Tensor, pairs, tolerance: tuple[float, float] = (ATOL, RTOL)) -> dict:
    """{hint: wrong_output} for a Run, in order, matched to `tolerance` on every input; [] where this input's shapes
    make the mistake impossible (it raises). First, on a float64 input only (no other input may name it), a result
    right only to float32's tolerance. Every hint must differ from the others: a dict keeps only one output per
    hint."""
    return loose({**({FLOAT32_ARITHMETIC: (ref, ATOL, RTOL)} if ref.dtype == torch.float64 else {}), **dict(pairs)},
                 *tolerance)


# ---------------------------------------------------------------------------------------------------------
# 1.1  Project X to Q, K and V
# ---------------------------------------------------------------------------------------------------------


def _qkv_error_hint(message: str) -> str | None:
    if "einsum" in message and ("subscripts" in message or "ellipsis" in message):
        return (_("X can be 3-D, (batch, n, d), but your einsum equation has subscripts for a 2-D X only: let X and "
                  "the result have a batch dimension too (begin their subscripts with an ellipsis, ...), or use the "
                  "@ operator, which handles a batch"))
    if ".T was used on a tensor that is not 2-D" in message:
        return (_("X can be 3-D, (batch, n, d): its .T reverses all its dimensions, the batch too; transpose only the "
                  "last two with X.transpose(-2, -1), or compute X @ W directly"))
    if "RuntimeError" not in message or "3D tensor" in message:
        return None
    if "must be a matrix" in message or "2D" in message or "2-D" in message:
        return (_("X can be 3-D, (batch, n, d): use the @ operator (torch.matmul), which treats the leading "
                  "dimension as a batch; torch.mm and .mm accept 2-D matrices only"))
    return (_("X has shape (..., n, d) and W_q, W_k have shape (d, d_k), W_v (d, d_v): the sizes that meet in "
              "the middle must agree, so compute X @ W (not W @ X, X @ W.T or W.T @ X)"))


_SCALE_1_1 = (N_("the scale 1/sqrt(d_k) belongs to the attention scores (chapter 2), not to the projection: {name} is "
                 "X @ {w} itself"))


def _qkv_mistakes(X: Tensor, W: Tensor, name: str, w_name: str, ref: Tensor, weights: dict[str, Tensor]):
    """{hint: the result that mistake gives for `name` on this input, or [] where it raises}."""
    size = "d_v" if name == "V" else "d_k"
    pairs = [
        (_("you transposed the weight matrix: {w_name} already has shape (d, {size}), so compute X @ {w_name}, "
           "not X @ {w_name}.T", w_name=w_name, size=size), try_mistake(lambda: X @ W.transpose(0, 1))),
        (_("the order of the product matters: compute X @ {w_name} (rows of X are tokens), not {w_name} @ X",
           w_name=w_name),
         try_mistake(lambda: W @ X)),
        (_("the order of the product matters: compute X @ {w_name}, not {w_name}.T @ X", w_name=w_name),
         try_mistake(lambda: W.transpose(0, 1) @ X)),
        (_("your {name} is transposed: it should have one row per token, shape (..., n, {size}); compute X @ "
           "{w_name} and do not transpose it", name=name, size=size, w_name=w_name), ref.transpose(-2, -1)),
        *[(_("your {name} looks like X @ {other}: each of Q, K and V has its own weight matrix (Q = X @ W_q, K = "
             "X @ W_k, V = X @ W_v)", name=name, other=other), try_mistake(lambda o=o: X @ o))
          for other, o in weights.items() if other != w_name],
        (_("your {name} equals X: multiply X by {w_name}", name=name, w_name=w_name), X),
        (_(_SCALE_1_1).format(name=name, w=w_name) + _(" (you divided by sqrt(d_k))"), ref / math.sqrt(W.shape[-1])),
        (_(_SCALE_1_1).format(name=name, w=w_name) + _(" (you divided by sqrt(d))"), ref / math.sqrt(W.shape[0])),
        (_("your {name} has an extra dimension of size 1 in front: for a 2-D X (n, d) return a 2-D {name}, shape "
           "(n, {size})", name=name, size=size), ref[None] if X.dim() == 2 else ref),
        (_("you flattened the batch into the rows: keep the batch dimension, {name} of shape (batch, n, {size})",
           name=name, size=size),
         ref.reshape(-1, ref.shape[-1])),
    ]
    return _mistakes(ref, pairs)


# PyTorch's own projections of X to q, k and v (inside its multi-head attention): ready-made answers
QKV_FORBIDDEN = [(name, N_("write the three products X @ W_q, X @ W_k and X @ W_v yourself"))
                 for name in ("torch.nn.functional._in_projection", "torch.nn.functional._in_projection_packed")]


@exercise("1.1", "Project X to queries, keys and values", answer_name="project_qkv",
          section="Queries, keys and values from the same tokens")
def check_project_qkv(project_qkv) -> str:
    """project_qkv(X, W_q, W_k, W_v) must return the tuple (X @ W_q, X @ W_k, X @ W_v), in X's dtype, for 2-D and
    3-D X."""
    g = generator(11)  # new values on every run (compare.fresh_values), the same shapes

    def case(desc, x_shape, d_k, d_v, dtype=torch.float32):
        d = x_shape[-1]
        return (desc, torch.randn(*x_shape, generator=g, dtype=dtype), torch.randn(d, d_k, generator=g, dtype=dtype),
                torch.randn(d, d_k, generator=g, dtype=dtype), torch.randn(d, d_v, generator=g, dtype=dtype))

    cases = [
        case(_("X of shape (4, 4) and W_q, W_k, W_v of shape (4, 4)"), (4, 4), 4, 4),
        case(_("X of shape (5, 6), W_q and W_k of shape (6, 3), W_v of shape (6, 2)"), (5, 6), 3, 2),
        case(_("one token: X of shape (1, 4), W_q and W_k of shape (4, 2), W_v of shape (4, 3)"), (1, 4), 2, 3),
        case(_("a batch of 2 sequences: X of shape (2, 5, 4), W_q and W_k of shape (4, 3), W_v of shape (4, 6)"),
             (2, 5, 4), 3, 6),
        case(_("a batch of 1 in float64: X of shape (1, 3, 4), W_q and W_k of shape (4, 2), W_v of shape (4, 2)"),
             (1, 3, 4), 2, 2, torch.float64),
    ]
    names = ("Q", "K", "V")
    what = [_("{name} (item {i_1} of what you returned)", name=name, i_1=i + 1) for i, name in enumerate(names)]

    def one(case, runs):
        desc, X, W_q, W_k, W_v = case
        weights = {"W_q": W_q, "W_k": W_k, "W_v": W_v}
        refs = [X @ W_q, X @ W_k, X @ W_v]  # (..., n, d_k), (..., n, d_k), (..., n, d_v)
        got = call(project_qkv, X, W_q, W_k, W_v, what="project_qkv", on=desc, explain=_qkv_error_hint,
                   forbid=QKV_FORBIDDEN)
        got = expect_tuple(got, names, "project_qkv", desc)
        for order in permutations(range(3)):  # all three right but in another order?
            if order != (0, 1, 2) and all(close_to(got[i], refs[j]) for i, j in enumerate(order)):
                returned = ", ".join(names[j] for j in order)
                raise Wrong(_("project_qkv returned ({returned}) on {desc}, expected (Q, K, V)",
                              returned=returned, desc=desc),
                            _("return them in the order Q, K, V: `return Q, K, V`"))
        mistakes = [_qkv_mistakes(X, weights[w], name, w, ref, weights) for name, w, ref in zip(names, weights, refs)]
        return expect_items(got, refs, mistakes, runs, what=what, on=desc, dtype=X.dtype, input_name="X",
                            tolerance=tolerance_for(X.dtype))

    rules = [_("{name} = X @ {w_name}: entry [i, j] (in every sequence of a batch) is the dot product of row i of X "
               "(token i) with column j of {w_name}", name=name, w_name=w_name)
             for name, w_name in zip(names, ("W_q", "W_k", "W_v"))]
    verdict(collect(cases, one), what=what, rule=rules, nan_hint=rules)
    return _("Q, K and V are right on {len_cases} inputs, including d_k != d, d_v != d_k, one token and "
             "batches", len_cases=len(cases))


# ---------------------------------------------------------------------------------------------------------
# 1.2  A soft lookup for one query
# ---------------------------------------------------------------------------------------------------------


def _lookup_error_hint(message: str) -> str | None:
    if "RuntimeError" not in message:
        return None
    return (_("q has shape (d_k,), K (n, d_k) and V (n, d_v): the scores are K @ q, shape (n,), and the output "
              "is weights @ V, shape (d_v,)"))


_LOOKUP_INSTEAD = (N_("compute the scores K @ q, their softmax and the weighted sum of the rows of V yourself "
                      "(softmax from attnbook is allowed)"))
LOOKUP_FORBIDDEN = [(name, _LOOKUP_INSTEAD)
                    for name in (*ATTENTION_SHORTCUTS, "attnbook.decoding.grouped_decode_attention")]
_NO_SOFTMAX = N_("you used the raw scores K @ q as weights: pass them through softmax first")
_BY_SUM = (N_("you divided the scores by their sum; softmax divides exp of each score by the sum of the exps, which "
              "makes every weight positive: weights = softmax(K @ q)"))
_HARD = (N_("you did a hard lookup (all the weight on the best-matching key, as argmax does); attention is soft: "
            "weights = softmax(K @ q), which gives every key some weight"))
_UNSCALED = (N_("in this chapter the scores are not scaled: weights = softmax(K @ q); dividing by sqrt(d_k) comes in "
                "chapter 2"))
_OVERFLOW = (N_("exp of a large score overflows to inf (and of a very negative one underflows to 0), and inf / inf "
                "or 0 / 0 is NaN: shift the scores by their maximum before exp, or use softmax, which does"))


def _lookup_cases(g: torch.Generator):
    """(description, q, K, V), all drawn from `g`: the third input's scores overflow exp in float32 (the best key
    scores 100 to 140, above float32's exp range of 88.7) and the fourth's underflow it (-110 to -140, below
    float32's smallest exp of -103.9), whatever the draw."""
    def u() -> float:  # uniform in [0, 1), from g
        return float(torch.rand((), generator=g, dtype=torch.float64))

    j = int(torch.randint(3, (), generator=g))  # the axis the query points along
    a = 50.0 + 20.0 * u()
    q_sharp = torch.zeros(3)
    q_sharp[j] = a
    sharp_keys = torch.tensor([[2.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 2.0], [1.0, 1.0, 0.0]])
    sharp_keys = sharp_keys[torch.randperm(4, generator=g)]
    q_low = torch.tensor([0.0, 1.0, 0.0])
    low = -(110.0 + 30.0 * u())  # the one score
    k_low = torch.tensor([[2 * u() - 1, low, 2 * u() - 1]])
    cases = [
        (_("q of shape (3,), K of shape (4, 3), V of shape (4, 3)"),
         torch.randn(3, generator=g), torch.randn(4, 3, generator=g), torch.randn(4, 3, generator=g)),
        (_("float64 q of shape (2,), K of shape (5, 2), V of shape (5, 4)"),
         1.5 * torch.randn(2, generator=g, dtype=torch.float64), torch.randn(5, 2, generator=g, dtype=torch.float64),
         torch.randn(5, 4, generator=g, dtype=torch.float64)),
        (None, q_sharp, sharp_keys, torch.randn(4, 2, generator=g)),
        (None, q_low, k_low, torch.randn(1, 2, generator=g)),
    ]
    scores = [", ".join(f"{s:.4g}" for s in (K @ q).tolist()) for _d, q, K, _v in cases[2:]]
    cases[2] = (_("a query that matches one key best, with large scores K @ q = [{scores}]: q of shape (3,), K of "
                  "shape (4, 3), V of shape (4, 2)", scores=scores[0]), *cases[2][1:])
    cases[3] = (_("a single key and value with a very negative score K @ q = [{scores}]: q of shape (3,), K of shape "
                  "(1, 3), V of shape (1, 2)", scores=scores[1]), *cases[3][1:])
    return cases


def _lookup_mistakes(q: Tensor, K: Tensor, V: Tensor):
    """({hint: weights that mistake gives}, {hint: output it gives}) on this input."""
    scores = K @ q  # (n,)
    weights = softmax(scores, dim=-1)  # (n,)
    output = weights @ V  # (d_v,)
    n = K.shape[0]
    one_hot = torch.nn.functional.one_hot(scores.argmax(), n).to(scores.dtype)  # (n,)
    scaled = softmax(scores / math.sqrt(K.shape[1]), dim=-1)
    e = scores.exp()
    naive = e / e.sum()  # NaN where exp overflows or every term underflows
    by_sum = scores / scores.sum()
    w = _mistakes(weights, [
        (_NO_SOFTMAX, scores),
        (_BY_SUM, by_sum),
        (_HARD, one_hot),
        (_UNSCALED, scaled),
        (_("you took exp of the scores but did not divide by their sum: softmax normalises so that the "
           "weights sum to 1"), e),
        (_("your weights favour the worst-matching keys: softmax of K @ q, not of -(K @ q)"), softmax(-scores, dim=-1)),
        (_OVERFLOW, naive),
        (_("your weights have an extra dimension of size 1 in front: they should be 1-D, one weight per "
           "key, shape (n,), as K @ q gives"), weights[None, :]),
        (_("your weights have an extra dimension of size 1 at the end: they should be 1-D, one weight per "
           "key, shape (n,), as K @ q gives"), weights[:, None]),
    ])
    out = _mistakes(output, [
        (_("you took a weighted sum of the keys; the output is a weighted sum of the values: weights @ V"),
         try_mistake(lambda: weights @ K)),
        (_NO_SOFTMAX, scores @ V),
        (_BY_SUM, by_sum @ V),
        (_HARD, one_hot @ V),
        (_UNSCALED, scaled @ V),
        (_OVERFLOW, naive @ V),
        (_("you averaged the values with equal weights; use the attention weights: weights @ V"), V.mean(0)),
        (_("you added up the values without weighting them: output = weights @ V"), V.sum(0)),
        (_("you weighted each value but did not add them up: sum over the n positions, output = weights @ V "
           "has shape (d_v,)"), weights[:, None] * V),
        (_("you averaged the weighted values instead of adding them up: output = weights @ V, the sum over the "
           "n keys"), (weights[:, None] * V).mean(0)),
        (_("your output has an extra dimension of size 1: it should be 1-D, shape (d_v,)"), output[None, :]),
    ])
    return weights, output, w, out


@exercise("1.2", "A soft lookup for one query", answer_name="soft_lookup", section="A soft dictionary lookup",
          references=("attnbook.attention.scaled_dot_product_attention", "attnbook.attention.tiled_attention"))
def check_soft_lookup(soft_lookup) -> str:
    """soft_lookup(q, K, V) must return the tuple (softmax(K @ q) @ V, softmax(K @ q)), unscaled, in q's dtype."""
    cases = _lookup_cases(generator(12))  # new values on every run (compare.fresh_values), the same shapes
    what = (_("weights (item 2 of what you returned)"), _("output (item 1 of what you returned)"))  # judged first

    def one(case, runs):
        desc, q, K, V = case
        got = call(soft_lookup, q, K, V, what="soft_lookup", on=desc, explain=_lookup_error_hint,
                   forbid=LOOKUP_FORBIDDEN)
        got = expect_tuple(got, ("output", "weights"), "soft_lookup", desc)
        weights, output, w_mistakes, out_mistakes = _lookup_mistakes(q, K, V)
        if close_to(got[0], weights) and close_to(got[1], output) and not close_to(got[0], output):
            raise Wrong(_("soft_lookup returned (weights, output) on {desc}, expected (output, weights)", desc=desc),
                        _("return them in the order output, weights: `return output, weights`"))
        return expect_items(got[::-1], (weights, output), (w_mistakes, out_mistakes), runs, what=what, on=desc,
                            dtype=q.dtype, input_name="q", tolerance=tolerance_for(q.dtype))

    rules = (_("weights = softmax(K @ q): weight j is exp(score j) divided by the sum of exp over all the scores"),
             _("output = weights @ V: the sum of the rows of V, each multiplied by its weight"))
    verdict(collect(cases, one), what=what, rule=rules, explain=(_weights_hint, None),
            nan_hint=(_("softmax weights are finite numbers between 0 and 1; exp of a large score is inf, and inf / "
                        "inf is NaN"), rules[1]))
    return _("output and weights are right on {len_cases} inputs, including d_v != d_k and a single key",
             len_cases=len(cases))


def _weights_hint(first: Run, runs) -> str | None:
    """What finite weights that no known mistake explains show: negative weights, or a sum other than 1."""
    got = first.got
    if not torch.isfinite(got).all():
        return None
    total = float(got.double().sum())
    if got.min() < 0:
        return _("some of your weights are negative; softmax weights are all positive: weights = softmax(K @ q)")
    if abs(total - 1.0) > 1e-4:
        return _("your weights sum to {total:.4g}, not 1; softmax divides by the sum: weights = softmax(K @ q)",
                 total=total)
    return None


# ---------------------------------------------------------------------------------------------------------
# 1.3  A numerically stable softmax
# ---------------------------------------------------------------------------------------------------------


def _softmax_error_hint(message: str) -> str | None:
    if "unexpected keyword argument" in message:
        return _("keep the signature stable_softmax(x, dim=-1): the checker passes `dim` by name")
    if "return_types" in message:
        return (_("x.max(dim=...) returns a pair (values, indices); use x.amax(dim=dim, keepdim=True), "
                  "or x.max(dim=dim, keepdim=True).values"))
    if "must match the size of tensor" in message:
        return (_("the maximum and the sum lose the dimension they reduce: pass keepdim=True so that they "
                  "line up with x again"))
    return None


_INSTEAD = (N_("build it from exp, amax and sum, as the chapter does: shift x by its maximum along dim, "
               "exponentiate, and divide by the sum along the same dim"))
SOFTMAX_FORBIDDEN = [(name, _INSTEAD) for name in (
    # the modules and distributions first: they reach the functions below, and the learner wrote these
    "torch.nn.Softmax", "torch.nn.modules.activation.Softmax", "torch.nn.Softmax2d",
    "torch.nn.modules.activation.Softmax2d", "torch.nn.LogSoftmax", "torch.nn.modules.activation.LogSoftmax",
    "torch.nn.Softmin", "torch.nn.modules.activation.Softmin", "torch.distributions.Categorical",
    "torch.distributions.categorical.Categorical", "torch.distributions.OneHotCategorical",
    "torch.distributions.one_hot_categorical.OneHotCategorical", "torch.distributions.utils.logits_to_probs",
    "torch.softmax", "torch.Tensor.softmax", "torch.nn.functional.softmax", "torch.special.softmax",
    "torch.log_softmax", "torch.Tensor.log_softmax", "torch.nn.functional.log_softmax",
    "torch.special.log_softmax", "torch._softmax", "torch._log_softmax", "torch.nn.functional.softmin",
    "torch.logsumexp", "torch.Tensor.logsumexp", "torch.special.logsumexp",
    "torch.ops.aten.softmax", "torch.ops.aten._softmax", "torch.ops.aten.log_softmax",
    "attnbook.attention.softmax", "scipy.special.softmax", "scipy.special.log_softmax", "scipy.special.logsumexp",
)]
_SOFTMAX_RULE = (N_("along `dim`, each slice of the result is positive and sums to 1, entry i proportional to "
                    "exp(x_i); subtracting the slice's maximum from every entry first changes nothing but keeps exp "
                    "finite"))
_SOFTMAX_NAN = (N_("exp of a large number overflows to inf (and of a very negative one underflows to 0), and "
                   "inf / inf or 0 / 0 gives NaN"))
# What a result with NaN or inf is told when no known mistake explains it: most often a shift by another
# statistic than the maximum (the mean, the minimum, the largest absolute value), which still overflows or underflows
_SOFTMAX_SHIFT = (N_("exp of a large number overflows to inf (and of a very negative one underflows to 0), and "
                     "inf / inf or 0 / 0 gives NaN. Subtract the maximum along dim, not the mean, the minimum or any "
                     "other statistic: only then is every shifted entry <= 0, so every exp is <= 1 and cannot "
                     "overflow, and the largest is exactly exp(0) = 1, so the sum is at least 1 and never 0"))


def _softmax_cases(g: torch.Generator):
    """(description, x, dim), all drawn from `g`: the logits of size a (an integer from 900 to 1100, a new one on
    every run) overflow exp in float32 (above 88.7) and the ones of size -a underflow it (below -103.9)."""
    a = int(torch.randint(900, 1101, (), generator=g))
    c = int(torch.randint(-9, 10, (), generator=g))  # the single logit
    return [
        (_("random logits of shape (3, 3)"), 3 * torch.randn(3, 3, generator=g), -1),
        (_("random logits of shape (2, 5), with the default dim"), torch.randn(2, 5, generator=g), None),
        (_("logits [[{a}, {b}, -{a}]]", a=a, b=a - 1), torch.tensor([[a, a - 1.0, -a]]), -1),
        (_("logits [[-{a}, -{a}, -{a}]]", a=a), torch.tensor([[-a, -a, -a]], dtype=torch.float32), -1),
        (_("logits [[{a}, {b}], [-{a}, -{c}]]", a=a, b=a - 1, c=a + 1), torch.tensor([[a, a - 1.0], [-a, -a - 1.0]]), -1),
        (_("random logits of shape (3, 4, 6) with dim=1"), 5 * torch.randn(3, 4, 6, generator=g), 1),
        (_("logits of shape (3, 2) with dim=0"), torch.tensor([[a, -3.0], [0.0, -a], [a - 2.0, 2.0]]), 0),
        (_("a 1-D tensor of logits [{a}, 0, -{a}]", a=a), torch.tensor([a, 0.0, -a]), -1),
        (_("float64 logits of shape (2, 3)"), 10 * torch.randn(2, 3, generator=g, dtype=torch.float64), -1),
        (_("a single logit [[{c}.]]", c=c), torch.tensor([[float(c)]]), -1),
    ]


def _softmax_mistakes(x: Tensor, dim: int, default: bool) -> dict:
    """{mistake label or hint: the result it gives on x along dim ([] where it raises)}."""
    def e_flat():  # no keepdim: lines up wrongly, or fails
        return torch.exp(x - x.amax(dim=dim))

    e_keep = torch.exp(x - x.amax(dim=dim, keepdim=True))
    right = softmax(x, dim=dim)
    return _mistakes(right, [
        ("default 0", softmax(x, dim=0) if default else right),
        ("last", softmax(x, dim=-1)),
        *[(f"dim {d}", try_mistake(lambda d=d: softmax(x, dim=d))) for d in (0, 1, 2)],
        (_("subtract the row maximum (along dim) before exp: ") + _(_SOFTMAX_NAN), torch.exp(x) / torch.exp(x).sum(
            dim=dim, keepdim=True)),
        (_("subtract the maximum over the same dim you sum over (keepdim=True), not the global maximum"),
         torch.exp(x - x.max()) / torch.exp(x - x.max()).sum(dim=dim, keepdim=True)),
        (_("the sum drops the dimension it adds up over, so it lines up with the wrong entries: "
           "use e.sum(dim=dim, keepdim=True)"), try_mistake(lambda: e_keep / e_keep.sum(dim=dim))),
        (_("the maximum drops the dimension it reduces, so it lines up with the wrong entries of x: "
           "use x.amax(dim=dim, keepdim=True)"),
         try_mistake(lambda: e_flat() / e_flat().sum(dim=dim, keepdim=True))),
        (_("the maximum and the sum both drop the dimension they reduce, so they line up with the wrong "
           "entries: pass keepdim=True to both"),
         try_mistake(lambda: e_flat() / e_flat().sum(dim=dim))),
        (_("you divided by the sum of the whole tensor; divide by the sum along dim, so that each slice sums to 1"),
         e_keep / e_keep.sum()),
    ], (1e-6, 1e-5))


@exercise("1.3", "A numerically stable softmax", answer_name="stable_softmax",
          section="Softmax, and why you subtract the maximum",
          references=("attnbook.attention.softmax",))
def check_stable_softmax(stable_softmax) -> str:
    """stable_softmax(x, dim=-1) must match softmax on ordinary, huge and one-hot logits, along any dim."""
    cases = _softmax_cases(generator(13))  # new values on every run (compare.fresh_values), the same shapes

    def one(case, runs):
        desc, x, dim = case
        args = {} if dim is None else {"dim": dim}  # dim=None: the default, dim=-1, is tested too
        default, dim = dim is None, -1 if dim is None else dim
        ref, mistakes = softmax(x, dim=dim), _softmax_mistakes(x, dim, default)
        got = call(stable_softmax, x, **args, what="stable_softmax", on=desc, explain=_softmax_error_hint,
                   forbid=SOFTMAX_FORBIDDEN)
        got = expect_tensor(got, what=_("the result"), on=desc, finite=False)
        if tuple(got.shape) != tuple(ref.shape):
            raise Wrong(_("the result has shape {tuple_got_shape} on {desc}, expected {tuple_ref_shape}, the shape "
                          "of x", tuple_got_shape=tuple(got.shape), desc=desc, tuple_ref_shape=tuple(ref.shape)),
                        shape_hint(got, mistakes, runs))
        got = expect_like(got, ref, mistakes, runs, what=_("the result"), on=desc, dtype=x.dtype, input_name="x",
                          dtype_hint=_("return the dtype you were given: build the result from x with tensor "
                                       "operations rather than creating a new tensor with a fixed dtype"))
        # float32 to 1e-6 (the shift by the maximum keeps that), float64 to FLOAT64_TOL
        return Run(desc, got, ref, mistakes, *(FLOAT64_TOL if x.dtype == torch.float64 else (1e-6, 1e-5)))

    runs = collect(cases, one)
    try:
        verdict(runs, what=_("the result"), rule=_SOFTMAX_RULE, nan_hint=_SOFTMAX_SHIFT)
    except Wrong as e:  # a mistake of the dimension, worded with the dim of the first wrong input
        dim = cases[next(i for i, r in enumerate(runs) if not r.right)][2]
        given = _("normalise over the `dim` you were given (here dim={dim})", dim=-1 if dim is None else dim)
        texts = {"default 0": _("the default must be the last dimension: keep the signature stable_softmax(x, "
                                "dim=-1)"),
                 "last": _("you normalised over the last dimension whatever `dim` was; {given}", given=given),
                 **{f"dim {d}": _("you normalised over dim={d} whatever `dim` was; {given}", d=d, given=given)
                    for d in (0, 1, 2)}}
        raise Wrong(e.message, texts.get(e.hint, e.hint)) from None
    return _("matches softmax on {len_cases} inputs, including logits of +-1000, any dim and float64",
             len_cases=len(cases))
