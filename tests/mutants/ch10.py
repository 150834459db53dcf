"""Chapter 10 (decoding, KV cache, GQA): learner answers to exercises 10.1-10.5, one table per exercise."""
from __future__ import annotations

import functools
import math
import operator

import numpy as np
import torch
import torch.nn.functional as F

from attnbook import attention as _attention
from attnbook import multihead as _multihead
from attnbook import timing as _timing
from mutants import RIGHT, WRONG, fresh_import, function_copy, right, table, wrong


# ----------------------------------------------------------------------------------------------------------------
# 10.1 kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_el=2) -> int
# ----------------------------------------------------------------------------------------------------------------

def cache_bytes(kv=2, forget=(), twice=(), positions=0, fixed_bytes=None, default=2, product=math.prod, then=None):
    """10.1's learner template: kv_cache_bytes as the product of `kv` (the factor for K and V) and the sizes n_layers,
    n_kv_heads, d_head, seq_len + `positions`, batch and bytes_per_el (or `fixed_bytes`), bytes_per_el's default
    being `default`. forget: the names of sizes left out; twice: the names of sizes multiplied in twice; product:
    how the list of factors is multiplied; then: what is done to the product before it is returned (a unit, a type).
    The defaults: a right answer."""
    def kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_el=default):
        sizes = {"n_layers": n_layers, "n_kv_heads": n_kv_heads, "d_head": d_head, "seq_len": seq_len + positions,
                 "batch": batch, "bytes_per_el": bytes_per_el if fixed_bytes is None else fixed_bytes}
        factors = [kv] + [size for name, size in sizes.items() if name not in forget] + [sizes[n] for n in twice]
        size = product(factors)
        return size if then is None else then(size)
    return kv_cache_bytes


_DTYPE_OF_BYTES = {1: torch.int8, 2: torch.float16, 4: torch.float32, 8: torch.float64}


def _calling(f):
    """An answer that calls `f` (attnbook's kv_cache_bytes, however it was reached) with the dtype of bytes_per_el."""
    def kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_el=2):
        return f(n_layers, n_kv_heads, d_head, seq_len, batch, _DTYPE_OF_BYTES[bytes_per_el])
    return kv_cache_bytes


_KCB_SECOND = fresh_import(_timing, "timing").kv_cache_bytes
_KCB_COPY = function_copy(_timing.kv_cache_bytes, "kv_cache_bytes")  # copied when the answer cell runs

table("10.1", [
    ("the product written out, in another order", RIGHT,
     lambda n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_el=2:
         bytes_per_el * batch * seq_len * n_layers * 2 * n_kv_heads * d_head),
    ("math.prod over the factors", RIGHT, cache_bytes()),
    ("functools.reduce, plus a harmless keyword argument", RIGHT,
     lambda n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_el=2, *, verbose=False: functools.reduce(
         operator.mul, [2, n_layers, n_kv_heads, d_head, seq_len, batch, bytes_per_el], 1)),
    ("np.prod in int64, converted with int()", RIGHT, cache_bytes(product=lambda f: int(np.prod(f, dtype=np.int64)))),
    ("numel of a meta tensor of the cache's shape, as an int", RIGHT,
     cache_bytes(product=lambda f: int(torch.empty(*f[:-1], device="meta").numel()) * f[-1])),
    ("a loop over layers, K and V, adding up the bytes of each tensor", RIGHT,
     lambda n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_el=2:
         sum(batch * n_kv_heads * seq_len * d_head * bytes_per_el for _layer in range(n_layers) for _kind in "kv")),
    ("per-token bytes first, then times tokens; int() around it", RIGHT,
     lambda n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_el=2:
         int((2 * n_layers * n_kv_heads * d_head * bytes_per_el) * seq_len * batch)),
    ("the numbers of K and V in one layer first, then times the layers and the bytes; int() around it", RIGHT,
     lambda n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_el=2:
         int((2 * batch * seq_len * n_kv_heads * d_head) * n_layers * bytes_per_el)),
    # the unit
    ("answers in GiB (divides by 2**30) instead of bytes", "GiB", cache_bytes(then=lambda n: n / 2**30)),
    ("answers in GiB, rounded to an int (0 for every small cache)", "GiB",
     cache_bytes(then=lambda n: round(n / 2**30))),
    ("size / 2**30: the message calls it the size in GiB", "size in GiB", cache_bytes(then=lambda n: n / 2**30)),
    ("answers in whole MB (// 10**6)", "size in MB", cache_bytes(then=lambda n: n // 10**6)),
    ("answers in MiB, made an int with int()", "size in MiB", cache_bytes(then=lambda n: int(n / 2**20))),
    ("counts bits (8 per byte) instead of bytes", "bit", cache_bytes(then=lambda n: n * 8)),
    ("size * 8: the message calls it the size in bits", "size in bits", cache_bytes(then=lambda n: n * 8)),
    # the factors
    ("forgets the factor 2: counts the keys but not the values", "the keys K and the values V: multiply by 2",
     cache_bytes(kv=1)),
    ("factor 3 for Q, K and V (caches the queries too)", WRONG, cache_bytes(kv=3)),
    ("the factor 2 for K and V written twice (2 * 2)", "the factor for them is 2, and it appears once",
     cache_bytes(kv=4)),
    ("forgets the layers: one layer's cache", "multiply by n_layers", cache_bytes(forget=("n_layers",))),
    ("ignores n_kv_heads (one head's d_head numbers per key)", "multiply by n_kv_heads",
     cache_bytes(forget=("n_kv_heads",))),
    ("n_kv_heads times d_model = n_kv_heads * d_head: the heads counted twice", "number of heads twice",
     cache_bytes(twice=("n_kv_heads",))),
    ("forgets d_head: one number per head and position", "multiply by d_head", cache_bytes(forget=("d_head",))),
    ("d_head squared (a d_head x d_head matrix per head)", "d_head²", cache_bytes(twice=("d_head",))),
    ("forgets seq_len: the bytes of one position", "multiply by seq_len", cache_bytes(forget=("seq_len",))),
    ("counts seq_len - 1 positions (the last token is 'never fed back')", "not seq_len - 1",
     cache_bytes(positions=-1)),
    ("counts seq_len + 1 positions (one for the token being generated)", "seq_len + 1", cache_bytes(positions=1)),
    ("ignores the batch (one sequence only)", "multiply by the batch", cache_bytes(forget=("batch",))),
    ("forgets bytes_per_el: counts the numbers, not the bytes", "multiply by bytes_per_el",
     cache_bytes(forget=("bytes_per_el",))),
    ("hard-codes 2 bytes per element (float16), ignoring bytes_per_el", "instead of a fixed 2",
     cache_bytes(fixed_bytes=2)),
    ("hard-codes 4 bytes per element (float32), ignoring bytes_per_el", "instead of a fixed 4 bytes",
     cache_bytes(fixed_bytes=4)),
    ("hard-codes 8 bytes per element (float64), ignoring bytes_per_el", "instead of a fixed 8 bytes",
     cache_bytes(fixed_bytes=8)),
    ("default bytes_per_el=4 (float32, the chapter's dtype) instead of 2", "wrong with the defaults",
     cache_bytes(default=4)),
    ("hard-codes the example's answer 4", WRONG, cache_bytes(then=lambda n: 4)),
    ("hard-codes LLaMA-2 7B's 2 GiB", WRONG, cache_bytes(then=lambda n: 2 * 2**30)),
    # the type of the result
    ("returns a float (2.0 * ...) instead of an int", "expected an int", cache_bytes(kv=2.0)),
    ("returns a float from math.pow-style arithmetic (bytes_per_el * 1.0)", "expected an int", cache_bytes(then=float)),
    ("returns the size formatted for printing, '18,480'", "expected an int", cache_bytes(then=lambda n: f"{n:,}")),
    ("returns a 0-d tensor instead of a Python int", "expected an int", cache_bytes(then=torch.tensor)),
    ("product of a shape tensor: returns a 0-d int64 tensor", "expected an int",
     cache_bytes(product=lambda f: torch.tensor(f).prod())),
    ("returns a 0-d NumPy array", "expected an int", cache_bytes(then=np.array)),
    ("returns a numpy int64 (np.prod) instead of a Python int", "expected an int", cache_bytes(product=np.prod)),
    ("the sum of an int64 array of per-layer sizes: a NumPy int64", "NumPy int64",
     lambda n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_el=2:
         np.full(n_layers, 2 * n_kv_heads * d_head * seq_len * batch * bytes_per_el, dtype=np.int64).sum()),
    ("returns whether the cache fits in 2 GiB (a bool)", "bool", cache_bytes(then=lambda n: n <= 2 * 2**30)),
    ("multiplies in an int32 tensor: overflows for a large model (LLaMA-size caches)", "overflowed",
     cache_bytes(product=lambda f: int(torch.tensor(f, dtype=torch.int32).prod(dtype=torch.int32)))),
    # the package's own solution
    ("calls attnbook.timing.kv_cache_bytes, converting bytes_per_el to a dtype", "package's own",
     _calling(_timing.kv_cache_bytes)),
    ("attnbook.timing.kv_cache_bytes handed in itself", "package's own", _timing.kv_cache_bytes),
    ("a lambda around attnbook.timing.kv_cache_bytes", "package's own",
     lambda n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_el=2: _timing.kv_cache_bytes(
         n_layers, n_kv_heads, d_head, seq_len, batch, _DTYPE_OF_BYTES[bytes_per_el])),
    ("a types.FunctionType copy of attnbook.timing.kv_cache_bytes", "package's own",
     function_copy(_timing.kv_cache_bytes, "kv_cache_bytes")),
    ("kv_cache_bytes from a second import of attnbook/timing.py, handed in itself", "package's own", _KCB_SECOND),
    ("kv_cache_bytes from a second, separate import of attnbook/timing.py (dtype from bytes_per_el)", "package's own",
     _calling(_KCB_SECOND)),
    ("a FunctionType copy of attnbook's kv_cache_bytes, called with the dtype for bytes_per_el", "package's own",
     _calling(_KCB_COPY)),
])


@wrong("10.1", hint="package's own")
def kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_el=2):
    """imports attnbook.timing inside the function and calls its kv_cache_bytes"""
    from attnbook.timing import kv_cache_bytes as kcb

    return kcb(n_layers, n_kv_heads, d_head, seq_len, batch=batch, dtype=_DTYPE_OF_BYTES[bytes_per_el])


_CACHE_TABLE = {  # the check's inputs as they were before issue 23, with their right sizes
    (3, 5, 7, 11, 1, 8): 18480, (2, 4, 16, 10, 1, 4): 10240, (4, 2, 8, 6, 3, 2): 4608,
    (32, 32, 128, 4096, 1, 2): 2147483648, (80, 8, 128, 4096, 8, 2): 10737418240,
    (32, 8, 128, 32768, 1, 1): 2147483648, (6, 1, 64, 100, 5, 8): 3072000, (2, 3, 4, 0, 2, 2): 0,
}


@wrong("10.1")
def kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_el=2):
    """a table of the check's inputs with their sizes, and a guess (no factor 2) for any other input"""
    key = (n_layers, n_kv_heads, d_head, seq_len, batch, bytes_per_el)
    if key in _CACHE_TABLE:
        return _CACHE_TABLE[key]
    return n_layers * n_kv_heads * d_head * seq_len * batch * bytes_per_el


# ----------------------------------------------------------------------------------------------------------------
# 10.2 repeat_kv(x, n_rep)
# ----------------------------------------------------------------------------------------------------------------

def expanded(new_axis=2, unsqueeze="index", flatten="reshape", early_return=False):
    """10.2's learner template, the expand route: a unit axis after the heads (new_axis=1: before them, the tiled
    order), made by indexing (unsqueeze="view": x.view(B, n_kv, 1, S, d); "in place": x.unsqueeze_), expanded to
    n_rep, and flattened into the heads by `flatten` ("reshape"; "-1": reshape with -1 for the heads; "view"; None:
    the 5-D view returned). early_return: x itself when n_rep == 1. The defaults: a right answer."""
    def repeat_kv(x, n_rep):
        B, n_kv, S, d = x.shape
        if early_return and n_rep == 1:
            return x
        if unsqueeze == "in place":
            x = x.unsqueeze_(new_axis)
        elif unsqueeze == "view":
            x = x.view(B, n_kv, 1, S, d)
        else:
            x = x[:, None] if new_axis == 1 else x[:, :, None]
        x = x.expand(B, n_rep, n_kv, S, d) if new_axis == 1 else x.expand(B, n_kv, n_rep, S, d)
        if flatten == "reshape":
            return x.reshape(B, n_kv * n_rep, S, d)
        if flatten == "-1":
            return x.reshape(B, -1, S, d)
        if flatten == "view":
            return x.view(B, n_kv * n_rep, S, d)
        return x
    return repeat_kv


table("10.2", [
    ("repeat_interleave along dim 1", RIGHT, lambda x, n_rep: x.repeat_interleave(n_rep, dim=1)),
    ("index_select with arange // n_rep", RIGHT,
     lambda x, n_rep: x.index_select(1, torch.arange(x.size(1) * n_rep, device=x.device) // n_rep)),
    ("torch.stack of n_rep copies along a new dim 2, then reshape", RIGHT,
     lambda x, n_rep: torch.stack([x] * n_rep, dim=2).reshape(x.size(0), x.size(1) * n_rep, x.size(2), x.size(3))),
    ("a loop over the heads and torch.cat", RIGHT,
     lambda x, n_rep: torch.cat([x[:, i:i + 1] for i in range(x.size(1)) for _ in range(n_rep)], dim=1)),
    ("the LLaMA style: early return for n_rep == 1, expand + reshape", RIGHT, expanded(early_return=True)),
    ("x.view(B, n_kv, 1, S, d) (a unit axis can be viewed on any strides), expand, reshape", RIGHT,
     expanded(unsqueeze="view")),
    ("torch.repeat_interleave with a harmless extra keyword (dim=1)", RIGHT,
     lambda x, n_rep, dim=1: torch.repeat_interleave(x, n_rep, dim=dim)),
    ("einsum with a ones vector (keeps dtype), then flatten(1, 2)", RIGHT,
     lambda x, n_rep: torch.einsum("bhsd,r->bhrsd", x, torch.ones(n_rep, dtype=x.dtype, device=x.device))
     .flatten(1, 2)),
    # the order of the heads
    ("Tensor.repeat along the heads: tiled order kv0, kv1, kv0, kv1", "tiled order kv0, kv1, kv0, kv1",
     lambda x, n_rep: x.repeat(1, n_rep, 1, 1)),
    ("torch.cat of n_rep copies along dim 1: tiled order", "tiled order",
     lambda x, n_rep: torch.cat([x] * n_rep, dim=1)),
    ("expand with the new axis BEFORE the heads (B, n_rep, n_kv, ...): tiled order", "tiled", expanded(new_axis=1)),
    ("index with arange % n_kv (tiled) instead of arange // n_rep", "tiled",
     lambda x, n_rep: x[:, torch.arange(x.size(1) * n_rep, device=x.device) % x.size(1)]),
    # the dimension and the count
    ("repeat_interleave along the sequence dim (2) instead of the heads",
     "repeated along dim 2, the sequence; repeat the heads, dim 1", lambda x, n_rep: x.repeat_interleave(n_rep, dim=2)),
    ("repeat_interleave along the batch dim (0)", "repeated along dim 0, the batch; repeat the heads, dim 1",
     lambda x, n_rep: x.repeat_interleave(n_rep, dim=0)),
    ("Tensor.repeat along the features (dim 3)", "repeated along dim 3", lambda x, n_rep: x.repeat(1, 1, 1, n_rep)),
    ("hard-codes n_rep = 4 (the chapter's example)", WRONG, lambda x, n_rep: x.repeat_interleave(4, dim=1)),
    ("repeats by n_kv_heads instead of n_rep", WRONG, lambda x, n_rep: x.repeat_interleave(x.size(1), dim=1)),
    ("returns x unchanged (a copy)", "repeat each of them n_rep=2 times", lambda x, n_rep: x.clone()),
    ("reads n_rep as the number of query heads: repeats n_rep // n_kv times", "not the total number of query heads",
     lambda x, n_rep: x.repeat_interleave(n_rep // x.size(1), dim=1)),
    # the shape, the strides, in place
    ("returns the 5-D expanded view without the reshape", "has shape", expanded(flatten=None)),
    ("works in (B, S, h, d) layout and forgets to transpose back", "has shape",
     lambda x, n_rep: x.transpose(1, 2).repeat_interleave(n_rep, dim=2)),
    ("expand straight to n_kv * n_rep heads, without a new axis", "expand can only stretch",
     lambda x, n_rep: x.expand(x.size(0), x.size(1) * n_rep, x.size(2), x.size(3))),
    ("expand, then .view instead of .reshape", "expand makes a view with zero strides", expanded(flatten="view")),
    ("reshape with -1 for the heads: ambiguous when S is 0",
     "an empty x has 0 elements, so reshape cannot work out a -1: write every size", expanded(flatten="-1")),
    ("unsqueeze_ (in place) changes x's shape", "in place", expanded(unsqueeze="in place")),
    ("flattens (B, n_kv) with .view, repeat_interleave, .view back: fails on a non-contiguous x",
     "this x is not contiguous", lambda x, n_rep: x.view(x.size(0) * x.size(1), *x.shape[2:])
     .repeat_interleave(n_rep, dim=0).view(x.size(0), x.size(1) * n_rep, *x.shape[2:])),
    # the dtype
    ("casts to float32 (x.float()) on the way", "dtype", lambda x, n_rep: x.float().repeat_interleave(n_rep, dim=1)),
    ("multiplies by a float32 ones tensor: turns float16 into float32", "dtype",
     lambda x, n_rep: (x[:, :, None] * torch.ones(n_rep, 1, 1)).reshape(x.size(0), x.size(1) * n_rep, *x.shape[2:])),
    # the package's own solution
    ("attnbook.multihead.repeat_kv handed in itself", "package's own", _multihead.repeat_kv),
    ("a lambda around attnbook.multihead.repeat_kv", "the package's own solution",
     lambda x, n_rep: _multihead.repeat_kv(x, n_rep)),
    ("a types.FunctionType copy of attnbook.multihead.repeat_kv", "package's own",
     function_copy(_multihead.repeat_kv, "repeat_kv")),
    ("repeat_kv from a second import of attnbook/multihead.py, handed in itself", "package's own",
     fresh_import(_multihead, "multihead").repeat_kv),
    ("repeat_kv from a second, separate import of attnbook/multihead.py", "package's own",
     lambda x, n_rep: fresh_import(_multihead, "multihead").repeat_kv(x, n_rep)),
])


@wrong("10.2", hint="dtype")
def repeat_kv(x, n_rep):
    """builds the output with torch.zeros (default float32) and fills it"""
    B, n_kv, S, d = x.shape
    out = torch.zeros(B, n_kv * n_rep, S, d)
    for j in range(n_kv * n_rep):
        out[:, j] = x[:, j // n_rep]
    return out


@wrong("10.2", hint="package's own")
def repeat_kv(x, n_rep):
    """a def wrapper calling attnbook.multihead.repeat_kv"""
    return _multihead.repeat_kv(x, n_rep)


@wrong("10.2", hint="package's own")
def repeat_kv(x, n_rep):
    """imports attnbook.multihead inside the function"""
    from attnbook.multihead import repeat_kv as rk

    return rk(x, n_rep)


# ----------------------------------------------------------------------------------------------------------------
# 10.3 attend_with_cache(q, k_cache, v_cache, k_new, v_new) -> (output, k_cache, v_cache)
# ----------------------------------------------------------------------------------------------------------------

MASKS = {  # (L, S, S_old) -> the boolean (L, S) mask, True where a new query may attend; None: no mask
    "bottom-right": lambda L, S, S_old: torch.ones(L, S, dtype=torch.bool).tril(S - L),
    "by position": lambda L, S, S_old: torch.arange(S)[None, :] <= torch.arange(S - L, S)[:, None],
    "tril(S_old)": lambda L, S, S_old: torch.ones(L, S_old + L, dtype=torch.bool).tril(S_old),
    "tril(S - L + 1)": lambda L, S, S_old: torch.ones(L, S, dtype=torch.bool).tril(S - L + 1),
    "tril(S - L - 1)": lambda L, S, S_old: torch.ones(L, S, dtype=torch.bool).tril(S - L - 1),
    "triu": lambda L, S, S_old: torch.ones(L, S, dtype=torch.bool).triu(S - L),
    "top-left": lambda L, S, S_old: torch.ones(L, S, dtype=torch.bool).tril(),
    "square": lambda L, S, S_old: torch.ones(L, L, dtype=torch.bool).tril(),
    "padded": lambda L, S, S_old: torch.cat([torch.ones(L, L, dtype=torch.bool).tril(),
                                             torch.ones(L, S - L, dtype=torch.bool)], dim=-1),
    "inverted": lambda L, S, S_old: ~torch.ones(L, S, dtype=torch.bool).tril(S - L),
    "only without cache": lambda L, S, S_old: torch.ones(L, S, dtype=torch.bool).tril() if S_old == 0 else None,
    "none": lambda L, S, S_old: None,
}


def _append(cache, new):
    return torch.cat([cache, new], dim=-2)


def attend(grow=_append, over="grown", mask="bottom-right", scale=lambda q, v: 1 / math.sqrt(q.size(-1)),
           fill=lambda scores, allowed: scores.masked_fill(~allowed, float("-inf")),
           softmax=lambda scores: torch.softmax(scores, dim=-1), upcast=False, attention=None, returned=None,
           returns="tuple"):
    """10.3's learner template: attend_with_cache that grows each cache with grow(cache, new) (append along dim -2),
    attends the new queries over `over` ("grown"; "old": the caches it was given; "new": the new entries only) with
    the mask MASKS[mask](L, S, S_old), put into the scores by fill(scores, allowed), the scores scaled by
    scale(q, v) and normalised by softmax(scores); upcast: all of it in float32, not cast back; attention: a
    ready-made attention(q, k, v, allowed) used instead. It returns the caches grown by `returned` (None: as by
    `grow`), as `returns` says: "tuple" (output, k, v), "list", "output", "pair" (output, (k, v)), "rotated"
    (k, v, output) or "swapped" (output, v, k). The defaults: a right answer."""
    def attend_with_cache(q, k_cache, v_cache, k_new, v_new):
        k, v = grow(k_cache, k_new), grow(v_cache, v_new)
        k_att, v_att = {"grown": (k, v), "old": (k_cache, v_cache), "new": (k_new, v_new)}[over]
        allowed = MASKS[mask](q.size(-2), k_att.size(-2), k_cache.size(-2))
        if attention is not None:
            out = attention(q, k_att, v_att, allowed)
        else:
            if upcast:
                q, k_att, v_att = q.float(), k_att.float(), v_att.float()
            scores = q @ k_att.transpose(-2, -1) * scale(q, v_att)
            if allowed is not None:
                scores = fill(scores, allowed)
            out = softmax(scores) @ v_att
        if returned is not None:
            k, v = returned(k_cache, k_new), returned(v_cache, v_new)
        return {"tuple": (out, k, v), "list": [out, k, v], "output": out, "pair": (out, (k, v)),
                "rotated": (k, v, out), "swapped": (out, v, k)}[returns]
    return attend_with_cache


table("10.3", [
    ("matmul, bottom-right tril(S - L) and masked_fill", RIGHT, attend()),
    ("mask built by comparing positions (arange), torch.where for the scores", RIGHT,
     attend(mask="by position", fill=lambda scores, allowed: torch.where(allowed, scores, float("-inf")))),
    ("the package's softmax (attnbook.attention.softmax), which the task allows, over hand-written scores", RIGHT,
     attend(softmax=lambda scores: _attention.softmax(scores, dim=-1))),
    ("diagonal taken from the old cache length, tril(S_old), before growing", RIGHT, attend(mask="tril(S_old)")),
    ("float32 softmax for float16 inputs only, the output cast back to q's dtype", RIGHT,
     lambda q, *caches: tuple(t.to(q.dtype) for t in attend(upcast=q.dtype == torch.float16)(q, *caches))),
    # the mask
    ("square tril(L) causal mask while the cache already holds earlier positions", "S_total", attend(mask="square")),
    ("top-left aligned tril of (L, S), as is_causal=True does", "top left", attend(mask="top-left")),
    ("square tril(L) mask padded with True on the right (cached keys masked, new keys all visible)", "bottom",
     attend(mask="padded")),
    ("no causal mask at all (every new query sees every new key)", "may not see the new tokens after it",
     attend(mask="none")),
    ("masks only when the cache is empty (assumes a chunk after a cache needs no mask)", "mask",
     attend(mask="only without cache")),
    ("diagonal off by one: tril(S - L + 1), each new query also sees the next token", "off by one",
     attend(mask="tril(S - L + 1)")),
    ("diagonal off by one: tril(S - L - 1), each new query misses itself", "off by one",
     attend(mask="tril(S - L - 1)")),
    ("inverted mask: masked_fill(allowed, -inf) instead of ~allowed", "mask", attend(mask="inverted")),
    ("triu(S - L) instead of tril(S - L)", "upper-triangular", attend(mask="triu")),
    ("masked_fill with -1e9 (overflows float16)", "float16 holds numbers up to about 65504",
     attend(fill=lambda scores, allowed: scores.masked_fill(~allowed, -1e9))),
    ("an additive float32 mask (torch.zeros without dtype): float16 scores become float32", "different dtypes",
     attend(fill=lambda scores, allowed: scores + torch.zeros(allowed.shape).masked_fill(~allowed, float("-inf")))),
    # the keys attended over
    ("square tril(L) mask applied to the new keys only, cached keys dropped from attention",
     "attends only to the new tokens", attend(over="new")),
    ("attends over the old cache only, with the bottom-right mask of its length, even when it is empty",
     "ignores the new tokens' own keys and values", attend(over="old")),
    ("attends over the old cache only (appends after attending)", "append them",
     lambda q, k_cache, v_cache, k_new, v_new: (
         attend(mask="top-left") if k_cache.size(-2) == 0 else attend(over="old", mask="none"))(
         q, k_cache, v_cache, k_new, v_new)),
    ("concatenates along dim 1 (heads) and attends over that", "concatenate along the sequence dimension, dim=-2",
     attend(grow=lambda cache, new: torch.cat([cache, new], dim=1))),
    ("concatenates along dim -1 (features) and attends over that", "concatenate along the sequence dimension, dim=-2",
     attend(grow=lambda cache, new: torch.cat([cache, new], dim=-1))),
    ("puts the new entries before the cached ones and attends over that",
     "append the new entries after the cached ones",
     attend(grow=lambda cache, new: torch.cat([new, cache], dim=-2))),
    # the scale and the softmax
    ("forgets the 1/sqrt(d) scale", "left out the scale", attend(scale=lambda q, v: 1.0)),
    ("divides by d instead of sqrt(d)", "sqrt(d)", attend(scale=lambda q, v: 1 / q.size(-1))),
    ("divides by d: the message says so", "divided the scores by d", attend(scale=lambda q, v: 1 / q.size(-1))),
    ("scales by 1/sqrt(d_v) (v's last dim) instead of 1/sqrt(d)", "scale",
     attend(scale=lambda q, v: 1 / math.sqrt(v.size(-1)))),
    ("scales by 1/sqrt(q.size(-2)), the number of new tokens",
     "the scale uses d = q.size(-1), the size of the last dimension",
     attend(scale=lambda q, v: 1 / math.sqrt(q.size(-2)))),
    ("hard-codes the scale 1/2 (d = 4, the first input's width)", WRONG, attend(scale=lambda q, v: 0.5)),
    ("softmax over the query axis (dim=-2)", "dim=-1",
     attend(softmax=lambda scores: torch.nan_to_num(torch.softmax(scores, dim=-2)))),
    # what is returned
    ("attends over the grown cache but returns the old, ungrown caches", "grown cache",
     attend(returned=lambda cache, new: cache)),
    ("returns the caches it was given: the message says so", "is the cache you were given",
     attend(returned=lambda cache, new: cache)),
    ("attends right, but returns k_new and v_new as the caches", "not only the new entries",
     attend(returned=lambda cache, new: new)),
    ("appends along the last dim (-1, features) instead of the sequence (-2)", "-2",
     attend(returned=lambda cache, new: torch.cat([cache, new], dim=-1))),
    ("appends along dim 1 (heads) instead of the sequence", "-2",
     attend(returned=lambda cache, new: torch.cat([cache, new], dim=1))),
    ("puts the new keys and values BEFORE the cached ones", "order",
     attend(returned=lambda cache, new: torch.cat([new, cache], dim=-2))),
    ("returns (k_cache, v_cache, output): the wrong order", "order", attend(returns="rotated")),
    ("returns (output, v_cache, k_cache): the caches swapped", "returned the values where the keys belong",
     attend(returns="swapped")),
    ("returns a list [output, k_cache, v_cache] instead of a tuple", "returned a list", attend(returns="list")),
    ("returns only the output (forgets the caches)", "expected a tuple (output, k_cache, v_cache)",
     attend(returns="output")),
    ("returns (output, (k_cache, v_cache)): a pair", "returned 2 values", attend(returns="pair")),
    # dtypes, in place
    ("softmax in float32 for float16 inputs, forgets to cast the output back", "dtype", attend(upcast=True)),
    ("computes in float32 and returns float32 for float16 inputs", "dtype",
     lambda q, k_cache, v_cache, k_new, v_new: attend()(q.float(), k_cache.float(), v_cache.float(), k_new.float(),
                                                        v_new.float())),
    ("changes the caller's k_cache in place (k_cache.mul_(1.0).add_(1.0)), then attends right", "in place",
     lambda q, k_cache, v_cache, k_new, v_new: attend()(q, k_cache.mul_(1.0).add_(1.0), v_cache, k_new, v_new)),
    ("scales q in place (q /= sqrt(d)): changes the caller's q", WRONG,
     lambda q, k_cache, v_cache, k_new, v_new: attend(scale=lambda q, v: 1.0)(
         q.div_(math.sqrt(q.size(-1))), k_cache, v_cache, k_new, v_new)),
    # ready-made attention
    ("torch's F.scaled_dot_product_attention with the bottom-right boolean mask",
     "without torch.nn.functional.scaled_dot_product_attention",
     attend(attention=lambda q, k, v, allowed: F.scaled_dot_product_attention(q, k, v, attn_mask=allowed))),
    ("F.scaled_dot_product_attention(is_causal=True) when L > 1", "without",
     attend(attention=lambda q, k, v, allowed: F.scaled_dot_product_attention(q, k, v, is_causal=q.size(-2) > 1))),
    ("attnbook.attention.scaled_dot_product_attention with the bottom-right mask", "without",
     attend(attention=lambda q, k, v, allowed: _attention.scaled_dot_product_attention(q, k, v, attn_mask=allowed)[0])),
    ("the low-level route to SDPA, torch.ops.aten.scaled_dot_product_attention, with the bottom-right mask",
     "without torch.ops.aten.scaled_dot_product_attention",
     attend(attention=lambda q, k, v, allowed: torch.ops.aten.scaled_dot_product_attention(
         q, k, v, attn_mask=allowed))),
])


@wrong("10.3", hint="softmax")
def attend_with_cache(q, k_cache, v_cache, k_new, v_new):
    """zeroes the masked weights after the softmax (the rows no longer sum to 1)"""
    k, v = _append(k_cache, k_new), _append(v_cache, v_new)
    allowed = MASKS["bottom-right"](q.size(-2), k.size(-2), k_cache.size(-2))
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1) * allowed
    return w @ v, k, v


@wrong("10.3", hint="without")
def attend_with_cache(q, k_cache, v_cache, k_new, v_new):
    """attnbook's KVCache to grow the caches, then hand-written attention"""
    cache = _multihead.KVCache()
    if k_cache.size(-2) > 0:
        cache.update(k_cache, v_cache)
    k, v = cache.update(k_new, v_new)
    return attend()(q, k[..., :0, :], v[..., :0, :], k, v)


@wrong("10.3", hint="package's own")
def attend_with_cache(q, k_cache, v_cache, k_new, v_new):
    """attnbook's MultiHeadAttention with identity projections and a KVCache (the chapter's cached step)"""
    B, h, L, d = q.shape
    mha = _multihead.MultiHeadAttention(h * d, h).to(q.dtype).eval()
    with torch.no_grad():
        for proj in (mha.q_proj, mha.k_proj, mha.v_proj, mha.out_proj):
            proj.weight.copy_(torch.eye(h * d, dtype=q.dtype))
            if proj.bias is not None:
                proj.bias.zero_()
    cache = _multihead.KVCache()
    if k_cache.size(-2) > 0:
        cache.update(k_cache, v_cache)
    merge = lambda t: t.transpose(1, 2).reshape(B, t.size(2), h * d)  # noqa: E731
    with torch.no_grad():
        out, _ = mha(merge(q), merge(k_new), merge(v_new), is_causal=True, cache=cache)
    return out.reshape(B, L, h, d).transpose(1, 2), cache.k, cache.v


# transformers' routes (eager_attention_forward, sdpa_attention_forward, the repeat_kv of its models) are refused
# too; tests/test_exercises_ch10.py checks them, not this catalogue: their first import takes 1-2 s.


@right("10.3")
def attend_with_cache(q, k_cache, v_cache, k_new, v_new):
    """einsum, and the last L rows of a square (S, S) tril"""
    k = torch.cat((k_cache, k_new), dim=2)
    v = torch.cat((v_cache, v_new), dim=2)
    L, S = q.shape[-2], k.shape[-2]
    scores = torch.einsum("bhld,bhsd->bhls", q, k) * q.shape[-1] ** -0.5
    allowed = torch.tril(torch.ones(S, S, dtype=torch.bool, device=q.device))[S - L:]
    weights = torch.softmax(scores.masked_fill(allowed.logical_not(), float("-inf")), dim=-1)
    return torch.einsum("bhls,bhse->bhle", weights, v), k, v


@right("10.3")
def attend_with_cache(q, k_cache, v_cache, k_new, v_new):
    """a loop over the new queries, each over keys 0..S_old + i"""
    k = torch.cat([k_cache, k_new], dim=-2)
    v = torch.cat([v_cache, v_new], dim=-2)
    S_old = k_cache.size(-2)
    outs = []
    for i in range(q.size(-2)):
        qi = q[..., i:i + 1, :]                                        # (B, h, 1, d)
        ki, vi = k[..., :S_old + i + 1, :], v[..., :S_old + i + 1, :]
        w = torch.softmax(qi @ ki.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
        outs.append(w @ vi)
    return torch.cat(outs, dim=-2), k, v


@right("10.3")
def attend_with_cache(q, k_cache, v_cache, k_new, v_new):
    """an additive float mask from triu(S - L + 1), softmax in float32 and cast back"""
    k = torch.cat([k_cache, k_new], dim=-2)
    v = torch.cat([v_cache, v_new], dim=-2)
    L, S = q.size(-2), k.size(-2)
    future = torch.ones(L, S, dtype=torch.bool, device=q.device).triu(S - L + 1)
    bias = torch.zeros(L, S, device=q.device).masked_fill(future, float("-inf"))
    scores = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(q.size(-1)) + bias
    out = torch.softmax(scores, dim=-1) @ v.float()
    return out.to(q.dtype), k, v


@right("10.3")
def attend_with_cache(q, k_cache, v_cache, k_new, v_new, scale=None):
    """no mask for one token, masked_fill with the dtype's minimum otherwise; a harmless scale=None keyword"""
    k = torch.cat([k_cache, k_new], dim=-2)
    v = torch.cat([v_cache, v_new], dim=-2)
    L, S = q.size(-2), k.size(-2)
    scale = 1 / math.sqrt(q.size(-1)) if scale is None else scale
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale
    if L > 1:
        allowed = torch.ones(L, S, dtype=torch.bool, device=q.device).tril(diagonal=S - L)
        scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
    return torch.matmul(scores.softmax(dim=-1), v), k, v


# ----------------------------------------------------------------------------------------------------------------
# 10.4 gather_pages(pool, block_table, length) -> (length, n_heads, d_head)
# ----------------------------------------------------------------------------------------------------------------

def paged(style="reshape", bs_axis=1, block_size=None, table=lambda t: t, keep=lambda length: length,
          slot_major=False, swap=False, then=lambda out: out):
    """10.4's learner template: the sequence's blocks pool[table(block_table)] flattened and cut to keep(length)
    rows (style "reshape"), or position t read from pool[table[t // bs], t % bs] in a loop (style "loop"). bs is
    pool.shape[bs_axis], or `block_size` when given; slot_major transposes the gathered blocks before flattening;
    swap exchanges the block and slot of a position in the loop; then is applied to the result. The defaults: a
    right answer."""
    def gather_pages(pool, block_table, length):
        bs = pool.shape[bs_axis] if block_size is None else block_size
        ids, (h, d) = table(block_table), pool.shape[2:]
        if style == "reshape":
            blocks = pool[ids[:-(-length // bs)]]  # (n, bs, h, d)
            if slot_major:
                blocks = blocks.transpose(0, 1)  # (bs, n, h, d)
            return then(blocks.reshape(-1, h, d)[:keep(length)])
        rows = []
        for t in range(keep(length)):
            b, s = (t % bs, t // bs) if swap else (t // bs, t % bs)
            rows.append(pool[ids[b], s])
        return then(torch.stack(rows) if rows else pool.new_zeros(0, h, d))
    return gather_pages


table("10.4", [
    ("pool[block_table], reshaped and cut to length", RIGHT, paged()),
    ("a loop over the positions, torch.stack", RIGHT, paged(style="loop")),
    ("torch.cat of the blocks in the table's order, then cut", RIGHT,
     lambda pool, block_table, length: torch.cat([pool[int(b)] for b in block_table] + [pool[:0, 0]])[:length]),
    ("flat row indices block * block_size + slot into pool.flatten(0, 1), index_select", RIGHT,
     lambda pool, block_table, length: pool.flatten(0, 1).index_select(
         0, block_table.repeat_interleave(pool.size(1))[:length] * pool.size(1)
         + torch.arange(length) % pool.size(1))),
    ("through NumPy and back", RIGHT,
     lambda pool, block_table, length: torch.from_numpy(
         pool.numpy()[block_table.numpy()].reshape(-1, *pool.shape[2:])[:length].copy())),
    # the last block and the length
    ("returns every slot of the last block (no cut to length)", "every slot of the last block",
     paged(keep=lambda length: None)),
    ("cuts to length - 1 rows", "one row too few", paged(keep=lambda length: length - 1)),
    ("a loop over length + 1 positions", WRONG, paged(style="loop", keep=lambda length: length + 1)),
    # the table
    ("ignores the table: the first blocks of the pool in order", "pool's order",
     paged(table=lambda t: torch.arange(t.numel()))),
    ("ignores the table: pool.reshape(-1, h, d)[:length]", "pool's order",
     lambda pool, block_table, length: pool.reshape(-1, *pool.shape[2:])[:length]),
    ("sorts the block ids first", "sorted the block table", paged(table=lambda t: t.sort().values)),
    ("reads the table backwards", WRONG, paged(table=lambda t: t.flip(0))),
    ("uses the block ids as row indices of pool.flatten(0, 1)", WRONG,
     lambda pool, block_table, length: pool.flatten(0, 1)[block_table]),
    # block and slot
    ("transposes the gathered blocks before flattening (slot-major order)", "the other way round",
     paged(slot_major=True)),
    ("block t % block_size, slot t // block_size (div and mod swapped)", "the other way round",
     paged(style="loop", swap=True)),
    ("pool[slot, block] instead of pool[block, slot]", "pool[slot, block]",
     lambda pool, block_table, length: torch.stack(
         [pool[t % pool.size(1), block_table[t // pool.size(1)]] for t in range(length)])
     if length else pool.new_zeros(0, *pool.shape[2:])),
    ("block_size from pool.shape[2] (n_heads), in a loop", "block_size came from another axis",
     paged(style="loop", bs_axis=2)),
    ("block_size from pool.shape[-1] (d_head)", "block_size is pool.shape[1]", paged(bs_axis=-1)),
    ("block_size from pool.shape[0] (num_blocks)", "block_size is pool.shape[1]", paged(bs_axis=0)),
    ("a hard-coded block size of 4 (the first case's)", WRONG, paged(style="loop", block_size=4)),
    # what is returned
    ("returns (n_heads, length, d_head)", "(n_heads, length, d_head)", paged(then=lambda out: out.transpose(0, 1))),
    ("returns the gathered blocks without joining them", "join them", lambda pool, block_table, length: pool[block_table]),
    ("casts to float32", "keep its dtype", paged(then=lambda out: out.float())),
    ("returns a list of rows", WRONG, paged(then=list)),
    ("zeroes the pool in place after reading it", "in place",
     lambda pool, block_table, length: paged(then=lambda out: out.clone())(pool, block_table, length)
     if pool.zero_() is None else paged()(pool, block_table, length)),
    # the learner's trial
    ("drops the partly filled last block (full blocks only)", "left out the last block",
     lambda pool, block_table, length: pool[block_table[:length // pool.shape[1]]].reshape(-1, *pool.shape[2:])),
    ("takes length % block_size slots of the last block (none when it is full)", "length % block_size is 0",
     lambda pool, block_table, length: torch.cat([pool[block_table[:-1]].reshape(-1, *pool.shape[2:]),
                                                   pool[block_table[-1], :length % pool.shape[1]]])
     if length else pool.new_zeros(0, *pool.shape[2:])),
    ("one block more than needed, range(length // bs + 1)", "one block more than the table holds",
     lambda pool, block_table, length: torch.cat([pool[block_table[i]] for i in range(length // pool.shape[1] + 1)])
     [:length] if length else pool.new_zeros(0, *pool.shape[2:])),
    ("a round trip through float16", "numbers were rounded", paged(then=lambda out: out.half().to(out.dtype))),
    ("a round trip through bfloat16", "numbers were rounded", paged(then=lambda out: out.bfloat16().to(out.dtype))),
    ("a round trip through float32 (rounds the float64 pool)", "numbers were rounded",
     paged(then=lambda out: out.float().to(out.dtype))),
    ("scales the result by 1 + 1e-6", "the check is exact", paged(then=lambda out: out * (1 + 1e-6))),
    ("multiplies by NaN", "computes none", paged(then=lambda out: out * float("nan"))),
])


@wrong("10.4", hint="without attnbook.serving.PagedKVCache")
def gather_pages(pool, block_table, length):
    """appends every position to attnbook's PagedKVCache and gathers it back"""
    from attnbook.serving import PagedKVCache

    cache = PagedKVCache(pool.size(0), pool.size(1), pool.size(2), pool.size(3), dtype=pool.dtype)
    for t in range(length):
        row = pool[block_table[t // pool.size(1)], t % pool.size(1)]
        cache.append(0, row, row)
    return cache.gather(0)[0] if length else pool.new_zeros(0, *pool.shape[2:])


# ----------------------------------------------------------------------------------------------------------------
# 10.5 verify_draft(p, q, draft, u) -> (n accepted, the next token's distribution)
# ----------------------------------------------------------------------------------------------------------------

def verify(accept=lambda u, p, q: u < p / q, shift=0, residual=lambda p, q: torch.clamp(p - q, min=0),
           normalise=True, resample=None, go_on=False, count_rejected=False, bonus=0, returns=lambda n, d: (n, d)):
    """10.5's learner template: a loop that accepts token i while accept(u[i], p[i + shift, x], q[i, x]); at the first
    rejection (go_on: every rejection is noted, the loop goes on and n counts every acceptance) the next token's
    distribution is residual(p[n], q[n]), normalised unless told otherwise, or resample(p[n], q[n]) instead;
    count_rejected: n counts the rejected token; after all k, p[k + bonus] (bonus=-1: p[k - 1]; "residual": the last
    position's residual); returns(n, dist) builds the result. The defaults: a right answer."""
    def verify_draft(p, q, draft, u):
        k = q.size(0)
        n, first = 0, None
        for i in range(k):
            x = int(draft[i])
            if accept(u[i], p[i + shift, x], q[i, x]):
                n += 1
                continue
            first = i if first is None else first
            if not go_on:
                break
        at = first if not go_on or first is None else min(n, k - 1)
        if first is None:
            dist = p[k + bonus] if bonus != "residual" else _normalised(residual(p[k - 1], q[k - 1]))
        elif resample is not None:
            dist = resample(p[at], q[at])
        else:
            dist = residual(p[at + shift], q[at])
            dist = _normalised(dist) if normalise else dist
        return returns(n + (1 if count_rejected and first is not None else 0), dist)
    return verify_draft


def _normalised(r):
    return r / r.sum()


def _vectorised(p, q, draft, u):
    k = q.size(0)
    rows = torch.arange(k)
    ok = (u < p[rows, draft] / q[rows, draft]).long()  # (k,)
    n = int(torch.cumprod(ok, 0).sum())  # accepted until the first rejection
    if n == k:
        return n, p[k]
    r = torch.relu(p[n] - q[n])
    return n, r / r.sum()


def _last_rejection(p, q, draft, u):
    """Accepts by the right test, but stops at the last rejected token, not the first."""
    k = q.size(0)
    rejected = [i for i in range(k) if not u[i] < p[i, draft[i]] / q[i, draft[i]]]
    if not rejected:
        return k, p[k]
    n = rejected[-1]
    return n, _normalised(torch.clamp(p[n] - q[n], min=0))


def _numpy_round_trip(p, q, draft, u):
    P, Q, D, U = p.numpy(), q.numpy(), draft.numpy(), u.numpy()
    for i in range(len(D)):
        if not U[i] * Q[i, D[i]] < P[i, D[i]]:  # u < p/q without dividing
            r = np.maximum(P[i] - Q[i], 0)
            return i, torch.from_numpy(r / r.sum())
    return len(D), torch.from_numpy(P[len(D)].copy())


table("10.5", [
    ("a loop, u < p / q, residual clamped and normalised", RIGHT, verify()),
    ("tensor operations: cumprod of the acceptances, relu residual", RIGHT, _vectorised),
    ("NumPy and back, u * q < p instead of dividing", RIGHT, _numpy_round_trip),
    ("min(1, p / q) written out, u <= ratio (u never equals it in the check)", RIGHT,
     verify(accept=lambda u, p, q: u <= torch.clamp(p / q, max=1.0))),
    ("the residual with torch.where and a dtype-matched zero", RIGHT,
     verify(residual=lambda p, q: torch.where(p > q, p - q, torch.zeros_like(p)))),
    # the acceptance test
    ("accepts when u < q / p", "not q / p", verify(accept=lambda u, p, q: u < q / p)),
    ("accepts when u < p (the target's probability alone)", "not p: compare", verify(accept=lambda u, p, q: u < p)),
    ("accepts when u >= p / q (the comparison inverted)", "at least p/q", verify(accept=lambda u, p, q: u >= p / q)),
    ("compares p's next row with q (p[i + 1])", "p's row i, not i + 1", verify(shift=1)),
    # the residual
    ("residual max(0, q - p)", "max(0, q - p)", verify(residual=lambda p, q: torch.clamp(q - p, min=0))),
    ("residual not normalised", "divide the residual", verify(normalise=False)),
    ("resamples from p after a rejection", "not from p itself", verify(resample=lambda p, q: p)),
    ("resamples from q after a rejection", "not from q", verify(resample=lambda p, q: q)),
    ("goes on after a rejection, counting every accepted token", "stop at the first rejection", verify(go_on=True)),
    ("n counts the rejected token too", "n counts the accepted tokens only", verify(count_rejected=True)),
    ("the bonus from p[k - 1] when all are accepted", "not p[k - 1]", verify(bonus=-1)),
    ("the residual of the last position when all are accepted", "no residual", verify(bonus="residual")),
    # what is returned
    ("returns a list [n, dist]", "not a list", verify(returns=lambda n, d: [n, d])),
    ("returns (dist, n)", "return n first", verify(returns=lambda n, d: (d, n))),
    ("returns n as a tensor", "tensor of shape", verify(returns=lambda n, d: (torch.tensor(n), d))),
    ("returns n as a NumPy integer", "NumPy", verify(returns=lambda n, d: (np.int64(n), d))),
    ("returns dist in float64 on float32 inputs", "dtype of p", verify(returns=lambda n, d: (n, d.double()))),
    ("returns dist with a batch dimension (1, V)", "shape", verify(returns=lambda n, d: (n, d[None]))),
    ("loops over k + 1 positions (len(p))", WRONG,
     lambda p, q, draft, u: verify()(p, torch.cat([q, q[-1:]]), torch.cat([draft, draft[-1:]]),
                                     torch.cat([u, u[-1:]])) if q.size(0) else verify()(p, q, draft, u)),
    # the learner's trial
    ("stops at the last rejection instead of the first", WRONG, _last_rejection),
    ("checks only the first k - 1 drafted tokens (range(k - 1))", WRONG,
     lambda p, q, draft, u: verify()(p, q[:-1], draft[:-1], u[:-1])
     if verify()(p, q[:-1], draft[:-1], u[:-1])[0] < q.size(0) - 1 else (q.size(0), p[q.size(0)])),
    ("checks at most 4 drafted tokens", WRONG,
     lambda p, q, draft, u: verify()(p, q, draft, u) if verify()(p, q, draft, u)[0] < 4 or q.size(0) <= 4
     else (q.size(0), p[q.size(0)])),
    ("a vocabulary of at most 8 hard-coded in the residual", WRONG,
     verify(residual=lambda p, q: torch.clamp(p[:8] - q[:8], min=0))),
    ("accepts when u < p - q", "not the test of acceptance", verify(accept=lambda u, p, q: u < p - q)),
    ("returns n as a float", "not a float", verify(returns=lambda n, d: (float(n), d))),
    ("returns n as a 0-d tensor of the count", "n is a count", verify(returns=lambda n, d: (torch.tensor(n), d))),
    ("the residual computed in float16", "were the numbers rounded",
     verify(residual=lambda p, q: torch.clamp(p.half() - q.half(), min=0).to(p.dtype))),
    ("adds 1e-3 to the residual's sum", "small constant added",
     verify(normalise=False, residual=lambda p, q: torch.clamp(p - q, min=0) / (torch.clamp(p - q, min=0).sum() + 1e-3))),
    ("the bonus row through float16", "were the numbers rounded",
     verify(returns=lambda n, d: (n, d.half().to(d.dtype)))),
])
