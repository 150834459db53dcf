"""Checker for exercise 10.5, verifying a draft (speculative decoding's accept/resample rule, with the uniform draws
given): verify_draft(p, q, draft, u) -> (n accepted, the next token's distribution).

Every case is drawn from the run and kept only when its draws lie MARGIN clear of every threshold that the rule or a
known mistake compares them with (p/q, q/p, p, q and the ratios of the neighbouring rows), so that float32 and
float64, `<` and `<=`, decide alike; cases of one kind (a rejection at a later position) are also kept only when
the rules of the known mistakes stop elsewhere and later tokens would be accepted (two where there is room), so
that those mistakes are told apart on every run.
"""
from __future__ import annotations

import torch
from torch import Tensor

from ..compare import expect_int, expect_tensor, expect_tuple, generator
from ..guard import call
from ..hints import show_pair
from ..registry import exercise, Wrong
from ..runs import Run, collect, verdict
from ...i18n import N_, _

MARGIN = 0.02  # the least distance between a draw u and any threshold a rule compares it with
ATOL, RTOL = 1e-6, 1e-5
# (description, k, V, dtype, where the right rule rejects: a position, None = all accepted; "zero": the target gives
# the token drafted there probability 0; "again": a later drafted token would be rejected too)
CASES = [
    (N_("k = 3 drafted tokens over a vocabulary of 6, the first one rejected"), 3, 6, torch.float64, 0, False, False),
    (N_("k = 5 over a vocabulary of 5, rejected at position 1"), 5, 5, torch.float64, 1, False, False),
    (N_("k = 2 over a vocabulary of 6, all accepted"), 2, 6, torch.float64, None, False, False),
    (N_("k = 0 (nothing drafted) over a vocabulary of 4"), 0, 4, torch.float64, None, False, False),
    (N_("float32 inputs, k = 5 over a vocabulary of 7, rejected at position 3"), 5, 7, torch.float32, 3, False, False),
    (N_("k = 3 over a vocabulary of 5, where the target gives the token drafted at position 1 probability 0"),
     3, 5, torch.float64, 1, True, False),
    (N_("float32 inputs, k = 1 over a vocabulary of 8, accepted"), 1, 8, torch.float32, None, False, False),
    (N_("k = 6 over a vocabulary of 11, rejected at the last drafted position, 5"), 6, 11, torch.float64, 5, False,
     False),
    (N_("k = 5 over a vocabulary of 9, rejected at position 1, with a later drafted token that would be rejected too"),
     5, 9, torch.float64, 1, False, True),
]


def _stops(p: Tensor, q: Tensor, draft: Tensor, u: Tensor, accept) -> int:
    """Where a rule accept(i, p(x), q(x), u) first rejects (k when it never does)."""
    for i in range(q.size(0)):
        x = int(draft[i])
        if not accept(i, float(p[i, x]), float(q[i, x]), float(u[i])):
            return i
    return q.size(0)


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else float("inf")


def _thresholds(p: Tensor, q: Tensor, draft: Tensor, i: int) -> list[float]:
    x = int(draft[i])
    values = [_ratio(p[i, x], q[i, x]), _ratio(q[i, x], p[i, x]), float(p[i, x]), float(q[i, x]),
              _ratio(p[i + 1, x], q[i, x]), float(p[i, x] - q[i, x])]
    if i > 0:
        values.append(_ratio(p[i - 1, x], q[i, x]))
    return [float(v) for v in values]


# the decision rules of the known mistakes (position i, p(x), q(x), u): used to draw cases that tell them apart
_WRONG_RULES = {
    "q/p": lambda i, p, q, u: u < _ratio(q, p),
    "p": lambda i, p, q, u: u < p,
    "p - q": lambda i, p, q, u: u < p - q,
    "inverted": lambda i, p, q, u: u >= _ratio(p, q),
}


def case(index: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(p, q, draft, u) of CASES[index], float64 (cast to the case's dtype by the checker), drawn from the run."""
    _desc, k, V, _dtype, reject, zero, again = CASES[index]
    g = generator(1050 + index)
    want = k if reject is None else reject
    for _attempt in range(100_000):
        logits = torch.randn(k + 1, V, generator=g, dtype=torch.float64)
        p = logits.softmax(-1)  # (k + 1, V)
        q = (logits[:k] + 0.8 * torch.randn(k, V, generator=g, dtype=torch.float64)).softmax(-1)  # (k, V)
        q = (q + 0.02) / (1 + 0.02 * V)  # every token at least 0.02 / (1 + 0.02 V) under the draft
        draft = torch.multinomial(q, 1, generator=g).flatten() if k else torch.zeros(0, dtype=torch.long)
        if zero:  # the target never writes the token drafted at the rejection
            p[want, draft[want]] = 0.0
            p[want] /= p[want].sum()
        p, q = p.to(_dtype).double(), q.to(_dtype).double()  # the values the answer will see
        u = torch.rand(k, generator=g, dtype=torch.float64).to(_dtype).double()
        if reject is not None and reject >= 3:  # u[0] where u < p holds and u < p - q does not, the rule accepting:
            x0 = int(draft[0])  # both mistaken rules stop before the right rule's rejection (p <= p/q), apart here
            a, b = float(p[0, x0]), float(q[0, x0])
            lo, hi = max(a - b, 0.0) + MARGIN, min(a, a / b) - MARGIN
            if hi <= lo:
                continue
            u[0] = torch.tensor(lo + (hi - lo) * float(u[0]), dtype=torch.float64).to(_dtype).double()
        if any(abs(u[i] - t) < MARGIN for i in range(k) for t in _thresholds(p, q, draft, i)):
            continue
        if _stops(p, q, draft, u, lambda i, a, b, w: w < _ratio(a, b)) != want:
            continue
        if reject not in (None, 0) and (
                any(_stops(p, q, draft, u, rule) == want for rule in _WRONG_RULES.values())
                or _later(p, q, draft, u, want) < (1 if again else min(2, k - want - 1))
                or again and _later(p, q, draft, u, want) == k - want - 1):
            continue  # a mistake's rule would stop here too, too few later tokens would be accepted, or (again)
            # none of them would be rejected
        return p, q, draft, u
    raise RuntimeError(f"no clear draw for case {index}")  # pragma: no cover - the test of every offset says not


def _later(p: Tensor, q: Tensor, draft: Tensor, u: Tensor, n: int) -> int:
    """How many drafted tokens after position n the rule would accept on their own (two or more, where there is
    room, tell a count that goes on after the rejection from one that counts the rejected token)."""
    return sum(bool(u[i] < _ratio(p[i, draft[i]], q[i, draft[i]])) for i in range(n + 1, q.size(0)))


def reference(p: Tensor, q: Tensor, draft: Tensor, u: Tensor) -> tuple[int, Tensor]:
    """The rule, in float64."""
    n = _stops(p, q, draft, u, lambda i, a, b, w: w < a / b)
    if n == q.size(0):
        return n, p[n]
    residual = (p[n] - q[n]).clamp(min=0)
    return n, residual / residual.sum()


def _vec(n: int, dist: Tensor) -> Tensor:
    """(n, dist) as one float64 vector [n, dist...], as the checker compares them."""
    return torch.cat([torch.tensor([float(n)], dtype=torch.float64), dist.detach().double().flatten()])


def _mistakes(p: Tensor, q: Tensor, draft: Tensor, u: Tensor) -> dict:
    """{hint: what the mistake returns here, as a vector [n, dist...]}, in the order they are tried."""
    k = q.size(0)

    def res(n, a=p, b=q, norm=True):
        r = (a[n] - b[n]).clamp(min=0)
        return r / r.sum() if norm else r

    def rule(accept, after=lambda n: res(n), bonus=lambda: p[k]):
        n = _stops(p, q, draft, u, accept)
        return _vec(n, bonus() if n == k else after(n))

    right = lambda i, a, b, w: w < a / b  # noqa: E731 - the rule, with which each mistake below combines its own
    n_right = _stops(p, q, draft, u, right)
    accepted_all = sum(bool(u[i] < p[i, draft[i]] / q[i, draft[i]]) for i in range(k))
    return {
        _(RATIO_HINT): [rule(_WRONG_RULES["q/p"])],
        _("accept with probability min(1, p/q), not p: compare u[i] with p[i, x] / q[i, x], the target's probability "
          "of the token divided by the draft's"): [rule(_WRONG_RULES["p"])],
        _("accept when u[i] < p[i, x] / q[i, x], the target's probability of the token divided by the draft's; "
          "p - q builds the residual after a rejection, it is not the test of acceptance"):
            [rule(_WRONG_RULES["p - q"])],
        _("a token is accepted when u[i] < p/q (a small draw accepts): you accepted when u was at least p/q"):
            [rule(_WRONG_RULES["inverted"])],
        _("draft[i] was drafted at position i: compare p[i] with q[i] (p's row i, not i + 1; p has one row more, for "
          "the position after the last drafted token)"):
            [rule(lambda i, a, b, w: w < _ratio(float(p[i + 1, draft[i]]), b),
                  after=lambda n: res(n, a=p[1:]), bonus=lambda: p[k])],
        _("the residual is max(0, p - q), where the target wants MORE than the draft gave: you took max(0, q - p)"):
            [rule(right, after=lambda n: res(n, a=q, b=p[:k]))],
        _("divide the residual max(0, p - q) by its sum: the next token's distribution must sum to 1"):
            [rule(right, after=lambda n: res(n, norm=False))],
        _("after a rejection the next token comes from the residual max(0, p - q), normalised, not from p itself: "
          "drawing from p would give the tokens the draft already proposed too much probability"):
            [rule(right, after=lambda n: p[n])],
        _("after a rejection the next token comes from the residual max(0, p - q), normalised, not from q"):
            [rule(right, after=lambda n: q[n])],
        _("stop at the first rejection: the drafted tokens after it were drafted after a token that is not kept, so "
          "none of them counts, even where its own u < p/q"):
            [_vec(accepted_all, p[k] if accepted_all == k else res(min(accepted_all, k - 1))),
             _vec(accepted_all, p[k] if n_right == k else res(n_right))],
        _("n counts the accepted tokens only: the rejected one is replaced by the token drawn from the residual"):
            [_vec(n_right + 1, res(n_right))] if n_right < k else None,
        _("when all k drafted tokens are accepted, the next token comes from p[k], the target's row for the position "
          "after the last drafted token (the bonus token): not p[k - 1]"):
            [_vec(k, p[k - 1])] if n_right == k and k > 0 else None,
        _("when all k drafted tokens are accepted there is no rejection and no residual: the next token comes from "
          "p[k]"): [_vec(k, res(k - 1))] if n_right == k and k > 0 else None,
    }


RATIO_HINT = N_("accept with probability min(1, p/q): compare u[i] with p[i, x] / q[i, x], not q / p (a token the "
                "target never writes, p = 0, must be rejected, not accepted)")
BAND = 1e-2  # how far dist may be off when n is right and only precision was lost (see BAND_HINT)
BAND_HINT = N_("n is right and dist is close, but not within 1e-6 (relative 1e-5): were the numbers rounded on the "
               "way (float16, bfloat16), or a small constant added (to avoid dividing by 0)? Keep p's dtype throughout")
RULE = N_("accept drafted token i while u[i] < p[i, x] / q[i, x], in order; at the first rejection n, return n and "
          "max(0, p[n] - q[n]) divided by its sum; when all k are accepted, return k and p[k]")


def _detail(p: Tensor, q: Tensor, draft: Tensor, u: Tensor, got: Tensor, ref: Tensor):
    """What is wrong at a wrong entry of the vector [n, dist...], in words."""
    def detail(index: tuple) -> str:
        n_got, n_ref = int(got[0]), int(ref[0])
        if index[0] == 0:
            i = min(n_got, n_ref)
            x = int(draft[i])
            u_i, r = float(u[i]), float(p[i, x] / q[i, x])
            if n_got < n_ref:
                return _("you returned n = {n}, but drafted token {i} (x = {x}) has u = {u:.3f} < p/q = {r:.3f}, so it "
                         "is accepted too", n=n_got, i=i, x=x, u=u_i, r=r)
            return _("you returned n = {n}, but drafted token {i} (x = {x}) has u = {u:.3f} >= p/q = {r:.3f}, so it is "
                     "rejected and the draft stops there", n=n_got, i=i, x=x, u=u_i, r=r)
        return _("dist[{j}] should be {pair}", j=index[0] - 1, pair=show_pair(float(ref[index]), float(got[index])))
    return detail


@exercise("10.5", "Verify a draft", answer_name="verify_draft", section="Speculative decoding",
          references=("attnbook.speculative.verify_draft",))
def check_verify_draft(verify_draft) -> str:
    """verify_draft(p, q, draft, u) -> (n, dist): the accept/resample rule of speculative decoding."""
    def one(index, runs):
        desc, k, V, dtype = CASES[index][:4]
        p, q, draft, u = case(index)
        on = _(desc)
        got = call(verify_draft, p.to(dtype), q.to(dtype), draft.clone(), u.to(dtype), what="verify_draft", on=on,
                   reload=True)
        n, dist = expect_tuple(got, ("n", "dist"), "verify_draft", on)
        if isinstance(n, Tensor) and n.dim() == 1 and isinstance(dist, int):
            raise Wrong(_("verify_draft returned a tensor first and an int second on {on}, expected (n, dist)", on=on),
                        _("return n first, then dist: (n, dist)"))
        if isinstance(n, Tensor):
            raise Wrong(_("verify_draft returned n as a tensor of shape {shape} on {on}, expected a Python int",
                          shape=tuple(n.shape), on=on),
                        _("n is a count: return it as a Python int (a loop counter, or int(t) of a one-element tensor)"))
        n = expect_int(n, what="verify_draft", on=on,
                       hint=_("n is a count of accepted tokens: return it as a Python int, not a float"))
        dist = expect_tensor(dist, what=_("dist"), on=on, finite=False)
        if tuple(dist.shape) != (V,):
            raise Wrong(_("dist has shape {shape} on {on}, expected ({V},), one probability per token",
                          shape=tuple(dist.shape), on=on, V=V),
                        _("return the next token's distribution over the vocabulary: one row, such as p[k]"))
        if dist.dtype != dtype:
            raise Wrong(_("dist has dtype {got} on {on}, expected {want}, the dtype of p", got=dist.dtype, on=on,
                          want=dtype), _("return dist in p's dtype: compute in it, or cast back with .to(p.dtype)"))
        got_vec = _vec(n, dist)
        ref_vec = _vec(*reference(p, q, draft, u))
        return Run(on, got_vec, ref_vec, _mistakes(p, q, draft, u), ATOL, RTOL, band=BAND,
                   detail=_detail(p, q, draft, u, got_vec, ref_vec))

    verdict(collect(range(len(CASES)), one), what=_("your (n, dist)"), rule=_(RULE), band_hint=_(BAND_HINT))
    return _("right on {n} drafts, including nothing drafted, all accepted, float32 and a token of probability 0 "
             "under the target", n=len(CASES))
