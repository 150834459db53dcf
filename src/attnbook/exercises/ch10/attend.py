"""Checker for exercise 10.3, append to a cache and attend over it: the grown caches and the output of attention
with the causal mask aligned to the bottom right, without a library attention."""
from __future__ import annotations

import math
import re

import torch
from torch import Tensor

from ...attention import scaled_dot_product_attention
from ..ch08._shared import library_paths
from ..compare import expect_close, expect_tensor, expect_tuple, generator
from ..forbid import ATTENTION_SHORTCUTS
from ..guard import call
from ..registry import exercise, Wrong
from ..runs import Run, collect, expect_shape, verdict
from ...i18n import N_, _


_ATTEND_INSTEAD = (N_("grow the caches with torch.cat and write the attention from the tensor operations the task "
                      "lists"))
ATTEND_FORBIDDEN = [(name, _ATTEND_INSTEAD) for name in (
    *ATTENTION_SHORTCUTS, "attnbook.multihead.KVCache",
    # transformers' attention functions (eager_attention_forward of every model, sdpa_attention_forward,
    # flash_attention_forward, ...), wherever the learner imports them from: a "*" pattern is watched on every call
    "transformers.*attention_forward",
)]
# transformers' caches, which grow themselves (cache.update(k, v, layer)): by their public names, where the answer
# can reach them (see library_paths)
_CACHES = [(f"{where}.{name}", "transformers.cache_utils", name)
           for name in ("DynamicCache", "StaticCache", "OffloadedCache", "QuantizedCache", "SlidingWindowCache")
           for where in ("transformers", "transformers.cache_utils")]


def attend_forbidden(fn) -> list[tuple[str, str]]:
    """What 10.3 forbids, for the learner's function `fn`: attention functions and modules, and the caches of
    attnbook and transformers."""
    return ATTEND_FORBIDDEN + [(path, _ATTEND_INSTEAD) for path in library_paths(fn, _CACHES)]


def _bottom_right(L: int, S: int) -> Tensor:
    """(L, S) bool: new query i (position S - L + i) may see keys 0..S - L + i."""
    return torch.ones(L, S, dtype=torch.bool).tril(S - L)


def _attend(q, k, v, mask=None, scale=None, dim=-1, zeroed=False) -> Tensor:
    """Attention in float64 with an optional boolean mask, as a plain softmax computes it: a row without any allowed
    key gives NaN, as in the learner's code; `dim` is the softmax's dimension and `zeroed` masks after the softmax,
    the weights of hidden keys set to 0 and the rest left as they were (to model mistakes)."""
    q, k, v = q.double(), k.double(), v.double()
    scores = q @ k.transpose(-2, -1) * (1 / math.sqrt(q.size(-1)) if scale is None else scale)  # (B, h, L, S)
    if zeroed:
        return (torch.softmax(scores, dim=dim) * mask) @ v  # a row no longer sums to 1
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=dim) @ v  # (B, h, L, d_v)


def _attend_cases():
    """(description, (q, k_cache, v_cache, k_new, v_new)) for 10.3; one new token first, then chunks."""

    def make(B, h, past, L, d, d_v, seed, dtype=torch.float32):
        g = generator(seed)  # the run's values: the same shapes, new numbers on every pass of the check
        t = lambda *s: torch.randn(*s, generator=g).to(dtype)  # noqa: E731
        return t(B, h, L, d), t(B, h, past, d), t(B, h, past, d_v), t(B, h, L, d), t(B, h, L, d_v)

    return [
        (_("one new token: q (2, 3, 1, 4), caches (2, 3, 5, 4), k_new and v_new (2, 3, 1, 4)"), make(2, 3, 5, 1, 4, 4, 1)),
        (_("one new token and an empty cache: q (1, 2, 1, 8), caches of shape (1, 2, 0, 8)"), make(1, 2, 0, 1, 8, 8, 2)),
        (_("one new token in float64, a batch of 1 and one head: q (1, 1, 1, 16), k_cache (1, 1, 9, 16), "
           "v_cache (1, 1, 9, 3)"), make(1, 1, 9, 1, 16, 3, 3, torch.float64)),
        (_("a chunk of 3 new tokens: q (2, 2, 3, 4), caches (2, 2, 4, 4), k_new and v_new (2, 2, 3, 4)"),
         make(2, 2, 4, 3, 4, 4, 4)),
        (_("a chunk of 4 new tokens and an empty cache: q (1, 3, 4, 8), caches of shape (1, 3, 0, 8)"),
         make(1, 3, 0, 4, 8, 8, 5)),
        (_("a chunk of 2 new tokens: q (2, 4, 2, 8), caches (2, 4, 16, 8), v of width 5"), make(2, 4, 16, 2, 8, 5, 6)),
        (_("float16, a half-precision cache as on a GPU: a chunk of 2 new tokens, q (1, 2, 2, 8), caches (1, 2, 3, 8)"),
         make(1, 2, 3, 2, 8, 8, 7, torch.float16)),
    ]


def _attend_mistakes(q, kc, vc, kn, vn) -> dict[str, Tensor | tuple[Tensor, ...]]:
    """Outputs of common mistakes on one input, keyed by their hint: a tensor, or a tuple of the outputs of the
    ways to make the mistake; a mistake that cannot be made on this input is left out. Several give the same
    output on one new token; the checker tells them apart on the other inputs."""
    L, past, d, d_v = q.size(-2), kc.size(-2), q.size(-1), vc.size(-1)
    S = past + L
    k, v = torch.cat([kc, kn], dim=-2), torch.cat([vc, vn], dim=-2)  # (B, h, S, d)
    mask = _bottom_right(L, S)
    tril = lambda diagonal: torch.ones(L, S, dtype=torch.bool).tril(diagonal)  # noqa: E731
    out = {}
    if past:
        out[_("your output ignores the new tokens' own keys and values: append them to the cache first, then attend "
              "over the whole cache (a token also attends to itself)")] = (
            _attend(q, kc, vc), _attend(q, kc, vc, mask=torch.ones(L, past, dtype=torch.bool).tril(past - L)))
        out[_("your output attends only to the new tokens: append them to the cache and attend over every cached "
              "position")] = _attend(q, kn, vn, mask=torch.ones(L, L, dtype=torch.bool).tril())
        out[_("your causal mask is aligned to the top left (query i sees keys 0..i), as is_causal=True in SDPA does; "
              "the new queries are the LAST positions, so query i may see every cached key and the new keys 0..i")] = \
            _attend(q, k, v, mask=tril(0))
    if L > 1:
        out[_("each new token may not see the new tokens after it: mask the scores with a causal mask aligned to the "
              "bottom right")] = _attend(q, k, v)
        out[_("your output is right on a chunk of new tokens without a cache, but with a cache each new token still "
              "may not see the new tokens after it: mask the scores with the causal mask aligned to the bottom right "
              "whatever the length of the cache")] = _attend(q, k, v) if past else _attend(q, k, v, mask)
        out[_("your mask puts the triangle over the first L_new keys (cached positions) and lets each new query see "
              "every key after them, the later new tokens included; the new tokens are the LAST L_new keys: a new "
              "query sees every cached key, and the triangle sits at the bottom right of the (L_new, S) scores")] = \
            _attend(q, k, v, mask=torch.cat([torch.ones(L, L, dtype=torch.bool).tril(),
                                             torch.ones(L, S - L, dtype=torch.bool)], dim=-1))
        out[_("you zeroed the masked weights after the softmax, so the weights of a row no longer sum to 1: mask the "
              "scores before the softmax (fill them with -inf), so that the softmax shares the weight among the "
              "allowed keys only")] = _attend(q, k, v, mask, zeroed=True)
    out[_("your causal mask is off by one: it hides each new token from its own key; new query i sits at position "
          "S - L + i and may see the keys up to that position, itself included")] = _attend(q, k, v, mask=tril(S - L - 1))
    if L > 1:
        out[_("your causal mask is off by one: new query i sits at position S - L + i and may not see position "
              "S - L + i + 1")] = _attend(q, k, v, mask=tril(S - L + 1))
    out[_("your mask is upper-triangular (triu): it lets new query i see the new tokens after it and hides the cached "
          "ones; keep the lower triangle (tril), aligned to the bottom right")] = _attend(
        q, k, v, mask=torch.ones(L, S, dtype=torch.bool).triu(S - L))
    out[_("you left out the scale: divide the scores by sqrt(d), the size of the last dimension of q")] = _attend(
        q, k, v, mask, scale=1.0)
    out[_("you divided the scores by d; divide by sqrt(d)")] = _attend(q, k, v, mask, scale=1 / d)
    if L != d:
        out[_("the scale uses d = q.size(-1), the size of the last dimension (the features of a query); q.size(-2) is "
              "the number of new tokens")] = _attend(q, k, v, mask, scale=1 / math.sqrt(L))
    if d_v != d:
        out[_("the scale uses d = q.size(-1), the width of the queries and keys, not the width of the values")] = \
            _attend(q, k, v, mask, scale=1 / math.sqrt(d_v))
    out[_("your softmax runs over the queries (dim=-2); run it over the keys (dim=-1)")] = _attend(q, k, v, mask,
          dim=-2)
    return out


def _attend_explain(message: str) -> str | None:
    m = re.search(r"Sizes of tensors must match except in dimension (\d+)", message)
    if m and m.group(1) != "2":
        return (_("concatenate along the sequence dimension, dim=-2 (dim 2 of (B, h, S, d)): the cache and the new "
                  "keys differ in length, not in batch, heads or features"))
    if re.search(r"value cannot be converted to type c10::(Half|BFloat16) without overflow", message):
        return (_("float16 holds numbers up to about 65504 only, so a fill value like -1e9 does not fit: fill the "
                  "masked scores with float('-inf'), or with torch.finfo(scores.dtype).min"))
    if re.search(r"must match the size of tensor b .* at non-singleton dimension 3", message):
        return (_("the mask has shape (L_new, S_total): one row per new query, one column per key of the grown "
                  "cache (the cached keys and the new ones); the new queries are the last positions, so its causal "
                  "triangle is aligned to the bottom right"))
    return None


_ORDER_HINT = N_("return them in the order of the task: the output first, then the grown key cache, then the value cache")
_RESULT_NAMES = ("output", "k_cache", "v_cache")


def _check_order(items: tuple, k: Tensor, v: Tensor, out_shape: tuple, desc: str) -> None:
    """Wrong when the three returned tensors are the output and the grown caches in another order."""
    names = []
    for item in items:
        if isinstance(item, Tensor) and item.shape == k.shape and torch.equal(item, k):
            names.append("k_cache")
        elif isinstance(item, Tensor) and item.shape == v.shape and torch.equal(item, v):
            names.append("v_cache")
        elif isinstance(item, Tensor) and tuple(item.shape) == tuple(out_shape):
            names.append("output")
        else:
            return
    if sorted(names) != ["k_cache", "output", "v_cache"] or names == ["output", "k_cache", "v_cache"]:
        return
    if names == ["output", "v_cache", "k_cache"]:
        raise Wrong(_("attend_with_cache returned the values where the keys belong on {desc}", desc=desc), _ORDER_HINT)
    raise Wrong(_("attend_with_cache returned ({join_names}) on {desc}", join_names=', '.join(names),
                  desc=desc), _ORDER_HINT)


def _output_dtype_hint(got: torch.dtype, wanted: torch.dtype) -> str:
    """What to do about an output in dtype `got` instead of the inputs' `wanted`: a wider dtype is fine to compute
    in but must be cast back; a narrower one loses precision (.float() turns float64 into float32)."""
    if torch.finfo(got).bits > torch.finfo(wanted).bits:
        return (_("computing in a wider dtype is fine, but cast the result back to the dtype of q at the end; new "
                  "tensors made without dtype=q.dtype (torch.zeros, torch.full) are float32 and widen float16 too"))
    return (_("keep the dtype of the inputs: .float() or .half() narrows a float64 or float32 input, and new tensors "
              "made without dtype=q.dtype (torch.zeros, torch.full) are float32; cast the result back to the dtype of "
              "q at the end"))


def _check_cache(got: Tensor, expected: Tensor, old: Tensor, new: Tensor, which: str, desc: str) -> None:
    """The returned cache `which` ("k_cache" or "v_cache") must be cat([old, new], dim=-2), in old's dtype."""
    what = _("the returned {which}", which=which)
    got = expect_tensor(got, what=what, on=desc, finite=False)
    if got.shape == old.shape and torch.equal(got, old) and new.size(-2) > 0:
        raise Wrong(_("{what} is the cache you were given, of shape {tuple_old_shape}, on {desc}",
                      what=what, tuple_old_shape=tuple(old.shape), desc=desc),
                    _("return the grown cache, the cached entries followed by the new ones, not the cache you were "
                      "given"))
    if got.shape == expected.shape and got.is_floating_point() and got.dtype != old.dtype:
        raise Wrong(_("{what} has dtype {dtype} on {desc}, expected {dtype2} (the dtype of the cache)",
                      what=what, dtype=got.dtype, desc=desc, dtype2=old.dtype),
                    _("grow the cache in its own dtype: no .float(), .double() or .half()"))
    expect_close(got, expected, what=what, on=desc, atol=0.0, rtol=0.0, mistakes={
        _("append the new entries after the cached ones: the cache is in the order of the positions, oldest first"):
            torch.cat([new, old], dim=-2),
        _("return the whole grown cache, the cached entries followed by the new ones, not only the new entries"): new,
    })


_ATTEND_RULE = (N_("the L new queries are the last L positions of the grown cache: new query i sees every cached key "
                   "and the new keys up to its own position (the bottom-right causal mask), with the scores scaled by "
                   "1/sqrt(d)"))


def _told(mistakes: dict) -> dict:
    """The mistakes as runs' forms: the finite outputs each gives on this input, None where it gives only NaN (a
    NaN output says nothing: code that masks with a large negative number instead of -inf gives other numbers)."""
    forms = {h: [w for w in (wrong if isinstance(wrong, tuple) else (wrong,)) if torch.isfinite(w).all()]
             for h, wrong in mistakes.items()}
    return {h: f or None for h, f in forms.items()}


@exercise("10.3", "Append to a cache and attend over it", answer_name="attend_with_cache", section="The KV cache",
          references=("attnbook.multihead.MultiHeadAttention",))
def check_attend_with_cache(attend_with_cache) -> str:
    """attend_with_cache(q, k_cache, v_cache, k_new, v_new) -> (output, k_cache, v_cache)."""
    cases = _attend_cases()
    what = _("the output (the first item you return)")

    def one(case, runs: list[Run]) -> Run:
        desc, (q, kc, vc, kn, vn) = case
        k, v = torch.cat([kc, kn], dim=-2), torch.cat([vc, vn], dim=-2)  # (B, h, S, d), (B, h, S, d_v)
        L, S = q.size(-2), k.size(-2)
        expected = scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                                attn_mask=_bottom_right(L, S))[0]  # (B, h, L, d_v)
        tol = (1e-2, 1e-2) if q.dtype == torch.float16 else (1e-5, 1e-4)
        got = call(attend_with_cache, q, kc, vc, kn, vn, what="attend_with_cache", on=desc,
                   forbid=attend_forbidden, explain=_attend_explain, reload=True)
        items = expect_tuple(got, _RESULT_NAMES, "attend_with_cache", desc)
        _check_order(items, k, v, expected.shape, desc)
        out, k_got, v_got = items
        _check_cache(k_got, k, kc, kn, "k_cache", desc)
        _check_cache(v_got, v, vc, vn, "v_cache", desc)
        mistakes = _told(_attend_mistakes(q, kc, vc, kn, vn))
        out = expect_shape(out, expected, mistakes, runs, what=what, on=desc)  # names the mistake of that shape
        if out.is_floating_point() and out.dtype != q.dtype:
            raise Wrong(_("the output has dtype {dtype} on {desc}, expected {dtype2} (the dtype of q)",
                          dtype=out.dtype, desc=desc, dtype2=q.dtype),
                        _output_dtype_hint(out.dtype, q.dtype))
        return Run(desc, out, expected, mistakes, *tol)

    verdict(collect(cases, one), what=what, rule=_ATTEND_RULE,
            nan_hint=_("a softmax over scores that are all -inf gives NaN: every new query must see at least "
                       "itself, so check the mask"))
    return (_("output and grown caches are right on {len_cases} inputs: one new token, empty caches, chunks "
              "of new tokens with the bottom-right causal mask, and float16", len_cases=len(cases)))
