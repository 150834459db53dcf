"""Checkers for chapter 10, GPU timing II: decoding, KV cache and grouped-query attention."""
from __future__ import annotations

import importlib
import math
import numbers
import re
import sys

import torch
from torch import Tensor

from ..attention import scaled_dot_product_attention
from ..multihead import repeat_kv as _repeat_kv
from ..timing import kv_cache_bytes as _kv_cache_bytes
from ._core import ATTENTION_SHORTCUTS, Wrong, call, describe, exercise, expect_close, expect_tensor, expect_tuple

# ---------------------------------------------------------------------------------------------------------
# 10.1 the size of a KV cache
# ---------------------------------------------------------------------------------------------------------

_DTYPES = {1: torch.int8, 2: torch.float16, 4: torch.float32, 8: torch.float64}

CACHE_BYTES_FORBIDDEN = [
    ("attnbook.timing.kv_cache_bytes",
     "multiply the sizes yourself: 2 (K and V) × layers × kv heads × d_head × positions × batch × bytes per "
     "element"),
]


def _cache_bytes(L: int, kv: int, d: int, S: int, B: int, nbytes: int) -> int:
    return _kv_cache_bytes(L, kv, d, S, batch=B, dtype=_DTYPES[nbytes])


def _cache_mistakes(L: int, kv: int, d: int, S: int, B: int, nbytes: int) -> list[tuple[str, float]]:
    """(hint, value) for the sizes that common mistakes give, most specific first."""
    right = 2 * L * kv * d * S * B * nbytes
    out = []
    if nbytes != 2:
        out.append((f"bytes_per_el={nbytes} here: use the argument instead of a fixed 2 bytes (float16)",
                    right / nbytes * 2))
    out += [
        ("the cache holds two tensors per layer, the keys K and the values V: multiply by 2", right / 2),
        ("that is the size in bits: an element of bytes_per_el bytes is 8 · bytes_per_el bits; return bytes",
         right * 8),
        ("multiply by n_layers: every layer keeps its own keys and values", right / L),
        ("multiply by the batch size: every sequence in the batch has its own cache", right / B),
        ("multiply by bytes_per_el: the count of numbers times the bytes of each", right / nbytes),
        ("multiply by n_kv_heads: each key/value head stores its own d_head numbers per position", right / kv),
        ("one position stores n_kv_heads · d_head numbers for K (and as many for V); you multiplied by the number "
         "of heads twice, as if each head stored n_heads · d_head = d_model numbers", right * kv),
        ("each position of a head stores d_head numbers, not d_head²", right * d),
        ("multiply by seq_len: every cached position stores a key and a value", right / S if S else None),
    ]
    return [(h, v) for h, v in out if v is not None and v != right]


def _as_int(x, on: str, right: int) -> int:
    """A Python int from the learner's result (int, NumPy int, one-element integer tensor); else Wrong."""
    if isinstance(x, Tensor) and x.numel() == 1 and x.dtype != torch.bool and not x.is_complex():
        x = x.item()  # a Python int or float
    if hasattr(x, "item") and not isinstance(x, (Tensor, numbers.Number)) and getattr(x, "size", 0) == 1:
        x = x.item()  # a NumPy scalar or one-element array
    if isinstance(x, numbers.Integral) and not isinstance(x, bool):
        return int(x)
    if isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x):
        for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
            if right and math.isclose(x, right / size, rel_tol=1e-6):
                raise Wrong(f"kv_cache_bytes returned {x:g} on {on}, which is the size in {unit}",
                            "return the number of bytes, an int; convert to GiB only when you print it")
        raise Wrong(f"kv_cache_bytes returned {describe(x)} ({x:g}) on {on}, expected an int",
                    "a number of bytes is a whole number: compute it with integer arithmetic (*), not / or "
                    "math.pow, which give floats")
    raise Wrong(f"kv_cache_bytes returned {describe(x)} on {on}, expected an int (a number of bytes)",
                "return one Python int: the product of the sizes")


@exercise("10.1", "The size of a KV cache", section="How big is the cache?")
def check_kv_cache_bytes(kv_cache_bytes) -> str:
    """kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_el=2) -> exact int."""
    # (n_layers, n_kv_heads, d_head, seq_len, batch, bytes_per_el, description); None = use the default.
    # Ordered so that each mistake first shows up where it is unambiguous: in the first case every factor is a
    # different prime or power of 2 (so forgetting one of them gives a different number), batch > 1 comes later.
    cases = [
        (3, 5, 7, 11, 1, 8, "n_layers=3, n_kv_heads=5, d_head=7, seq_len=11, batch=1, bytes_per_el=8 (float64)"),
        (2, 4, 16, 10, 1, 4, "n_layers=2, n_kv_heads=4, d_head=16, seq_len=10, batch=1, bytes_per_el=4 (float32)"),
        (4, 2, 8, 6, 3, 2, "n_layers=4, n_kv_heads=2, d_head=8, seq_len=6, batch=3, bytes_per_el=2"),
        (32, 32, 128, 4096, None, None, "LLaMA-2 7B at 4096 tokens: kv_cache_bytes(32, 32, 128, 4096), "
                                        "with the defaults batch=1 and bytes_per_el=2"),
        (80, 8, 128, 4096, 8, 2, "LLaMA-2 70B (8 kv heads) at 4096 tokens, batch=8, bytes_per_el=2"),
        (32, 8, 128, 32768, 1, 1, "n_layers=32, n_kv_heads=8, d_head=128, seq_len=32768, an 8-bit cache "
                                  "(bytes_per_el=1)"),
        (6, 1, 64, 100, 5, 8, "multi-query: n_layers=6, n_kv_heads=1, d_head=64, seq_len=100, batch=5, "
                              "bytes_per_el=8"),
        (2, 3, 4, 0, 2, 2, "an empty cache: seq_len=0"),
    ]
    for L, kv, d, S, B, nbytes, desc in cases:
        kwargs = {} if B is None else {"batch": B, "bytes_per_el": nbytes}
        B, nbytes = B or 1, nbytes or 2
        right = _cache_bytes(L, kv, d, S, B, nbytes)
        got = call(kv_cache_bytes, L, kv, d, S, what="kv_cache_bytes", on=desc, forbid=CACHE_BYTES_FORBIDDEN,
                   **kwargs)
        got = _as_int(got, desc, right)
        if got == right:
            continue
        hint = next((h for h, v in _cache_mistakes(L, kv, d, S, B, nbytes) if v == got), None)
        if hint is None and S and got == right // S * (S + 1):
            hint = "count seq_len positions, not seq_len + 1"
        raise Wrong(f"kv_cache_bytes returned {got:,} on {desc}, expected {right:,}",
                    hint or "the size is 2 · n_layers · n_kv_heads · d_head · seq_len · batch · bytes_per_el")
    return f"exact sizes on {len(cases)} caches, from an empty one to LLaMA-2 70B at batch 8"


# ---------------------------------------------------------------------------------------------------------
# 10.2 repeat_kv for grouped-query attention
# ---------------------------------------------------------------------------------------------------------

_REPEAT_INSTEAD = ("insert a dimension after the heads, x[:, :, None] of shape (B, n_kv, 1, S, d), expand it to "
                   "(B, n_kv, n_rep, S, d), then reshape to (B, n_kv * n_rep, S, d); or use "
                   "x.repeat_interleave(n_rep, dim=1)")


def _code_names(fn) -> set[str]:
    """Every global and attribute name the learner's function (and functions nested in it) refers to."""
    names: set[str] = set()
    todo = [getattr(fn, "__code__", None)]
    while todo:
        code = todo.pop()
        if code is None:
            continue
        names.update(code.co_names)
        todo += [c for c in code.co_consts if hasattr(c, "co_names")]
    return names


def repeat_kv_forbidden(fn) -> list[tuple[str, str]]:
    """The package's repeat_kv and every `repeat_kv` in a loaded `transformers` model module.

    Importing all of transformers' models would take seconds, so only modules already loaded count, plus the
    modules the learner's own code imports (loaded here first, so that the ban covers them too).
    """
    for name in _code_names(fn):
        if name.startswith("transformers.models."):
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - not importable here, so not callable by the learner either
                pass
    paths = ["attnbook.multihead.repeat_kv"]
    for module_name, module in list(sys.modules.items()):
        if module_name.startswith("transformers.") and module is not None and callable(
                vars(module).get("repeat_kv")):  # vars(): no lazy import triggered
            paths.append(f"{module_name}.repeat_kv")
    return [(p, _REPEAT_INSTEAD) for p in paths]


def _kv_input(B: int, n_kv: int, S: int, d: int, seed: int, dtype=torch.float32, transposed: bool = False) -> Tensor:
    """(B, n_kv, S, d) with random entries; `transposed` makes it as split_heads does (not contiguous)."""
    g = torch.Generator().manual_seed(seed)
    if transposed:
        return torch.randn(B, S, n_kv, d, generator=g, dtype=dtype).transpose(1, 2)  # (B, n_kv, S, d), a view
    return torch.randn(B, n_kv, S, d, generator=g, dtype=dtype)


def _repeat_mistakes(x: Tensor, n_rep: int) -> dict[str, Tensor]:
    """The outputs of common mistakes on x, keyed by their hint (wrong shapes are matched by shape)."""
    B, n_kv, S, d = x.shape
    out = {
        "your heads come out in the tiled order kv0, kv1, kv0, kv1, ... (what x.repeat(1, n_rep, 1, 1) gives); "
        "repeat each kv head n_rep times in a row, kv0, kv0, kv1, kv1, ..., so that query heads 0..n_rep-1 share "
        "kv head 0, as the model was trained": x.repeat(1, n_rep, 1, 1),
    }
    for dim, name in ((0, "the batch"), (2, "the sequence"), (3, "the features (d_head)")):
        wrong = x.repeat_interleave(n_rep, dim=dim)
        if wrong.shape != (B, n_kv * n_rep, S, d):
            out[f"you repeated along dim {dim}, {name}; repeat the heads, dim 1"] = wrong
    return out


def _check_head_count(got: Tensor, x: Tensor, n_rep: int, desc: str) -> None:
    """Wrong with a specific hint when only the number of heads (dim 1) of the result is wrong."""
    B, n_kv, S, d = x.shape
    if got.dim() != 4 or got.size(0) != B or tuple(got.shape[2:]) != (S, d) or got.size(1) == n_kv * n_rep:
        return
    heads = got.size(1)
    if heads == n_kv:
        hint = f"your result has the {n_kv} heads of x: repeat each of them n_rep={n_rep} times"
    elif heads == n_rep or heads == (n_rep // n_kv) * n_kv:
        hint = ("the result has n_kv_heads · n_rep heads: n_rep is how many query heads share each kv head, not "
                "the total number of query heads")
    else:
        hint = "each of the n_kv_heads heads appears n_rep times, so the result has n_kv_heads · n_rep heads"
    raise Wrong(f"your result has shape {tuple(got.shape)} on {desc}, expected {(B, n_kv * n_rep, S, d)}", hint)


def _repeat_explain(message: str) -> str | None:
    if re.search(r"expanded size of the tensor .* must match the existing size", message):
        return ("expand can only stretch a dimension of size 1: insert one after the heads with x[:, :, None], "
                "expand that to (B, n_kv, n_rep, S, d), then reshape to (B, n_kv * n_rep, S, d)")
    return None


@exercise("10.2", "repeat_kv for grouped-query attention", section="MHA, GQA and MQA")
def check_repeat_kv(repeat_kv) -> str:
    """repeat_kv(x, n_rep): (B, n_kv, S, d) -> (B, n_kv * n_rep, S, d), each kv head n_rep times in a row."""
    cases = [
        ("x of shape (2, 3, 5, 4) and n_rep=2", _kv_input(2, 3, 5, 4, seed=1), 2),
        ("a batch of 1: x of shape (1, 2, 4, 8) and n_rep=4 (8 query heads share 2 kv heads)",
         _kv_input(1, 2, 4, 8, seed=2), 4),
        ("n_rep=1 (multi-head attention: nothing to repeat), x of shape (2, 4, 3, 6)",
         _kv_input(2, 4, 3, 6, seed=3), 1),
        ("float64 x of shape (2, 2, 7, 3), not contiguous (made by transposing (2, 7, 2, 3), as split_heads does), "
         "and n_rep=3", _kv_input(2, 2, 7, 3, seed=4, dtype=torch.float64, transposed=True), 3),
        ("multi-query attention: x of shape (3, 1, 6, 4) and n_rep=8", _kv_input(3, 1, 6, 4, seed=5), 8),
        ("an empty cache: x of shape (1, 2, 0, 4) and n_rep=2", _kv_input(1, 2, 0, 4, seed=6), 2),
    ]
    for desc, x, n_rep in cases:
        got = call(repeat_kv, x, n_rep, what="repeat_kv", on=desc, forbid=repeat_kv_forbidden(repeat_kv),
                   explain=_repeat_explain)
        expected = _repeat_kv(x, n_rep)  # (B, n_kv * n_rep, S, d)
        got = expect_tensor(got, what="your result", on=desc, finite=False)
        _check_head_count(got, x, n_rep, desc)
        if got.shape == expected.shape and got.dtype != x.dtype:
            raise Wrong(f"your result has dtype {got.dtype} on {desc}, expected {x.dtype} (the dtype of x)",
                        "only copy the numbers: no .float(), .double() or new tensors of another dtype")
        expect_close(got, expected, what="your result", on=desc, atol=0.0, rtol=0.0,
                     mistakes=_repeat_mistakes(x, n_rep))
    return (f"right on {len(cases)} inputs, including n_rep=1, multi-query attention, a non-contiguous input "
            f"and an empty cache")


# ---------------------------------------------------------------------------------------------------------
# 10.3 append to a cache and attend over it
# ---------------------------------------------------------------------------------------------------------

_ATTEND_INSTEAD = ("append with torch.cat([k_cache, k_new], dim=-2) (and the same for v), then write the "
                   "attention yourself: scores q @ k.transpose(-2, -1) / sqrt(d), the causal mask for several new "
                   "tokens, a softmax over dim=-1, then weights @ v")
ATTEND_FORBIDDEN = [(name, _ATTEND_INSTEAD) for name in (*ATTENTION_SHORTCUTS, "attnbook.multihead.KVCache")]


def _bottom_right(L: int, S: int) -> Tensor:
    """(L, S) bool: new query i (position S - L + i) may see keys 0..S - L + i."""
    return torch.ones(L, S, dtype=torch.bool).tril(S - L)


def _attend(q, k, v, mask=None, scale=None, dim=-1) -> Tensor:
    """Attention in float64 with an optional boolean mask; softmax along `dim` (to model a mistake)."""
    q, k, v = q.double(), k.double(), v.double()
    if dim == -1:
        return scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)[0]
    scores = q @ k.transpose(-2, -1) * (1 / math.sqrt(q.size(-1)) if scale is None else scale)  # (B, h, L, S)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.nan_to_num(torch.softmax(scores, dim=dim)) @ v  # (B, h, L, d_v)


def _attend_cases():
    """(description, (q, k_cache, v_cache, k_new, v_new)) for 10.3; one new token first, then chunks."""

    def make(B, h, past, L, d, d_v, seed, dtype=torch.float32):
        g = torch.Generator().manual_seed(seed)
        t = lambda *s: torch.randn(*s, generator=g, dtype=dtype)  # noqa: E731
        return t(B, h, L, d), t(B, h, past, d), t(B, h, past, d_v), t(B, h, L, d), t(B, h, L, d_v)

    return [
        ("one new token: q (2, 3, 1, 4), caches (2, 3, 5, 4), k_new and v_new (2, 3, 1, 4)", make(2, 3, 5, 1, 4, 4, 1)),
        ("one new token and an empty cache: q (1, 2, 1, 8), caches of shape (1, 2, 0, 8)", make(1, 2, 0, 1, 8, 8, 2)),
        ("one new token in float64, a batch of 1 and one head: q (1, 1, 1, 16), k_cache (1, 1, 9, 16), "
         "v_cache (1, 1, 9, 3)", make(1, 1, 9, 1, 16, 3, 3, torch.float64)),
        ("a chunk of 3 new tokens: q (2, 2, 3, 4), caches (2, 2, 4, 4), k_new and v_new (2, 2, 3, 4)",
         make(2, 2, 4, 3, 4, 4, 4)),
        ("a chunk of 4 new tokens and an empty cache: q (1, 3, 4, 8), caches of shape (1, 3, 0, 8)",
         make(1, 3, 0, 4, 8, 8, 5)),
        ("a chunk of 2 new tokens: q (2, 4, 2, 8), caches (2, 4, 16, 8), v of width 5", make(2, 4, 16, 2, 8, 5, 6)),
    ]


def _attend_mistakes(q, kc, vc, kn, vn) -> dict[str, Tensor]:
    """Outputs of common mistakes on one input, keyed by their hint."""
    L, past, d = q.size(-2), kc.size(-2), q.size(-1)
    S = past + L
    k, v = torch.cat([kc, kn], dim=-2), torch.cat([vc, vn], dim=-2)  # (B, h, S, d)
    mask = _bottom_right(L, S) if L > 1 else None
    top_left = torch.ones(L, S, dtype=torch.bool).tril()  # (L, S): query i sees keys 0..i
    out = {}
    if past:
        out["your output ignores the new tokens' own keys and values: append them to the cache first, then attend "
            "over the whole cache (a token also attends to itself)"] = _attend(q, kc, vc)
        out["your output attends only to the new tokens: append them to the cache and attend over every cached "
            "position"] = _attend(q, kn, vn, mask=torch.ones(L, L, dtype=torch.bool).tril() if L > 1 else None)
        out["your causal mask is aligned to the top left (query i sees keys 0..i), as is_causal=True in SDPA does; "
            "the new queries are the LAST positions, so query i may see every cached key and the new keys 0..i: "
            "torch.ones(L, S, dtype=torch.bool).tril(S - L)"] = _attend(q, k, v, mask=top_left)
    if L > 1:
        out["each new token may not see the new tokens after it: mask with the bottom-right causal mask "
            "torch.ones(L, S, dtype=torch.bool).tril(S - L)"] = _attend(q, k, v)
        out["your causal mask is off by one: new query i is at position S - L + i and sees itself too, "
            "tril(S - L)"] = _attend(q, k, v, mask=torch.ones(L, S, dtype=torch.bool).tril(S - L - 1))
        out["your causal mask is off by one: new query i is at position S - L + i and may not see position "
            "S - L + i + 1; use tril(S - L)"] = _attend(q, k, v,
                                                         mask=torch.ones(L, S, dtype=torch.bool).tril(S - L + 1))
    out["you left out the scale: divide the scores by sqrt(d), the size of the last dimension of q"] = _attend(
        q, k, v, mask, scale=1.0)
    out["you divided the scores by d; divide by sqrt(d)"] = _attend(q, k, v, mask, scale=1 / d)
    out["your softmax runs over the queries (dim=-2); run it over the keys (dim=-1)"] = _attend(q, k, v, mask, dim=-2)
    return out


def _attend_explain(message: str) -> str | None:
    m = re.search(r"Sizes of tensors must match except in dimension (\d+)", message)
    if m and m.group(1) != "2":
        return ("concatenate along the sequence dimension, dim=-2 (dim 2 of (B, h, S, d)): the cache and the new "
                "keys differ in length, not in batch, heads or features")
    if re.search(r"must match the size of tensor b .* at non-singleton dimension 3", message):
        return ("the mask has shape (L_new, S_total): L_new new queries against every cached key, including the "
                "new ones; build it from q.size(-2) and the length of the grown cache")
    return None


def _check_cache(got: Tensor, expected: Tensor, old: Tensor, new: Tensor, which: str, desc: str) -> None:
    """The returned cache `which` ("k_cache" or "v_cache") must be cat([old, new], dim=-2)."""
    what = f"the returned {which}"
    got = expect_tensor(got, what=what, on=desc, finite=False)
    if got.shape == old.shape and torch.equal(got, old) and new.size(-2) > 0:
        raise Wrong(f"{what} is the cache you were given, of shape {tuple(old.shape)}, on {desc}",
                    f"return the grown cache: {which} = torch.cat([{which}, {which[0]}_new], dim=-2)")
    expect_close(got, expected, what=what, on=desc, atol=0.0, rtol=0.0, mistakes={
        f"append the new entries after the cached ones: torch.cat([{which}, {which[0]}_new], dim=-2); the cache "
        "is in the order of the positions": torch.cat([new, old], dim=-2),
        f"return the whole grown cache, not only the new entries: torch.cat([{which}, {which[0]}_new], dim=-2)": new,
    })


@exercise("10.3", "Append to a cache and attend over it", section="The KV cache")
def check_attend_with_cache(attend_with_cache) -> str:
    """attend_with_cache(q, k_cache, v_cache, k_new, v_new) -> (output, k_cache, v_cache)."""
    cases = _attend_cases()
    for desc, (q, kc, vc, kn, vn) in cases:
        got = call(attend_with_cache, q, kc, vc, kn, vn, what="attend_with_cache", on=desc, forbid=ATTEND_FORBIDDEN,
                   explain=_attend_explain)
        out, k_got, v_got = expect_tuple(got, ("output", "k_cache", "v_cache"), "attend_with_cache", desc)
        k, v = torch.cat([kc, kn], dim=-2), torch.cat([vc, vn], dim=-2)  # (B, h, S, d), (B, h, S, d_v)
        swapped = (isinstance(k_got, Tensor) and isinstance(v_got, Tensor) and k_got.shape == v.shape
                   and v_got.shape == k.shape and torch.equal(k_got, v) and torch.equal(v_got, k))
        if swapped and not (k.shape == v.shape and torch.equal(k, v)):
            raise Wrong(f"attend_with_cache returned the values where the keys belong on {desc}",
                        "return them in the order of the task: `return output, k_cache, v_cache`")
        _check_cache(k_got, k, kc, kn, "k_cache", desc)
        _check_cache(v_got, v, vc, vn, "v_cache", desc)
        L, S = q.size(-2), k.size(-2)
        expected = _attend(q, k, v, mask=_bottom_right(L, S) if L > 1 else None)  # (B, h, L, d_v)
        if isinstance(out, Tensor) and out.is_floating_point() and out.shape == expected.shape and out.dtype != q.dtype:
            raise Wrong(f"the output has dtype {out.dtype} on {desc}, expected {q.dtype} (the dtype of q)",
                        "compute in the dtype of the inputs: no .float(), .double() or .half()")
        expect_close(out, expected, what="the output (the first item you return)", on=desc, atol=1e-5, rtol=1e-4,
                     mistakes=_attend_mistakes(q, kc, vc, kn, vn),
                     nan_hint="a softmax over scores that are all -inf gives NaN: every new query must see at least "
                              "itself, so check the mask")
    return (f"output and grown caches are right on {len(cases)} inputs: one new token, empty caches and chunks of "
            "new tokens with the bottom-right causal mask")
