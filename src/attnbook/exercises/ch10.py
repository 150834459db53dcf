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
from .compare import expect_close, expect_tensor, expect_tuple
from .guard import ATTENTION_SHORTCUTS, Forbidden, call, recorded
from .hints import describe
from .registry import exercise, Wrong

# ---------------------------------------------------------------------------------------------------------
# Calling the learner's code when it imports something for the first time
# ---------------------------------------------------------------------------------------------------------


def _interrupted_import(error: Wrong) -> str | None:
    """The module whose import a forbidden name stopped, if that is what `error` reports, else None.

    Modules that PyTorch or transformers import lazily (torch._dynamo on the first torch.compile call,
    torch.distributed.tensor, transformers.integrations) register handlers for attention ops at import time.
    When the learner's code triggers such an import inside the check, that registration touches a forbidden name
    although the learner never called it. The import is told apart from a call by the module-level frames
    ("<module>") between the learner's code and the forbidden name.
    """
    forbidden, seen = error.__context__, set()
    while forbidden is not None and not isinstance(forbidden, Forbidden) and id(forbidden) not in seen:
        seen.add(id(forbidden))
        forbidden = forbidden.__cause__ or forbidden.__context__  # dynamo wraps it in its own errors
    if not isinstance(forbidden, Forbidden):
        return None
    names = []
    path = str(forbidden.args[0])
    if path.endswith(".<module>"):  # a "*" pattern matched the module's own top-level code
        names.append(path[: -len(".<module>")])
    tb = forbidden.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_name == "<module>":
            names.append(tb.tb_frame.f_globals.get("__name__"))
        tb = tb.tb_next
    return next((n for n in names if isinstance(n, str) and n not in sys.modules), None)


@recorded  # a retry loop around `call` that reads the learner's function: one recorded outcome
def _call(fn, *args, forbid=(), **kwargs):
    """`call`, but a module that the learner's code imports for the first time is imported before the check.

    `forbid` may be a function of the learner's function (`repeat_kv_forbidden`), giving the forbidden names.

    Its import is then not part of the checked call (it would trip over the forbidden names, see
    `_interrupted_import`); the learner's code runs again, with every forbidden name still forbidden. A function
    compiled with torch.compile is checked as the function it compiles (the same results): the compiler reads
    PyTorch's namespaces while it traces, and would find the stand-ins for the forbidden names there.
    """
    if callable(forbid):
        forbid = forbid(fn)
    original = getattr(fn, "_torchdynamo_orig_callable", None)
    if callable(original) and not isinstance(fn, torch.nn.Module):
        fn = original
    imported: set[str] = set()
    while True:
        try:
            return call(fn, *args, forbid=forbid, **kwargs)
        except Wrong as e:
            module = _interrupted_import(e)
            if module is None or module in imported or len(imported) >= 10:
                raise
            imported.add(module)
            try:
                importlib.import_module(module)  # outside the checked call: what the learner's code would import
            except Exception:  # noqa: BLE001 - not importable after all: report what the call did
                raise e from None


# ---------------------------------------------------------------------------------------------------------
# 10.1 the size of a KV cache
# ---------------------------------------------------------------------------------------------------------

_DTYPES = {1: torch.int8, 2: torch.float16, 4: torch.float32, 8: torch.float64}

CACHE_BYTES_FORBIDDEN = [
    ("attnbook.timing.kv_cache_bytes", "multiply the sizes yourself, as the section on the size of the cache does"),
]


def _cache_bytes(L: int, kv: int, d: int, S: int, B: int, nbytes: int) -> int:
    return _kv_cache_bytes(L, kv, d, S, batch=B, dtype=_DTYPES[nbytes])


def _int32(n: int) -> int:
    """What a 32-bit integer keeps of n when n overflows it (as np.int32 or torch.int32 arithmetic does)."""
    return (n + 2**31) % 2**32 - 2**31


def _cache_mistakes(L: int, kv: int, d: int, S: int, B: int, nbytes: int) -> dict[str, tuple[int | None, str]]:
    """{mistake: (the size it gives on this case or None, hint)}, most likely first. The keys are the same on
    every case, so that a mistake can be confirmed on all of them before its hint is given."""
    right = 2 * L * kv * d * S * B * nbytes
    numbers_ = right // nbytes  # how many numbers the cache holds
    fixed = {}
    for size in (2, 4, 1, 8):
        unit = "byte" if size == 1 else "bytes"
        fixed[size] = (numbers_ * size, f"bytes_per_el={nbytes} here: use the argument instead of a fixed {size} "
                                        f"{unit} per number")
    return {
        "no K and V": (right // 2, "the cache holds two tensors per layer, the keys K and the values V: multiply by 2"),
        "fixed 2": fixed[2],
        "fixed 4": fixed[4],
        "bits": (right * 8, "that is the size in bits: an element of bytes_per_el bytes is 8 · bytes_per_el bits; "
                            "return bytes"),
        "layers": (right // L if L else None, "multiply by n_layers: every layer keeps its own keys and values"),
        "batch": (right // B if B else None, "multiply by the batch size: every sequence in the batch has its own "
                                              "cache"),
        "bytes": (numbers_, "multiply by bytes_per_el: the count of numbers times the bytes of each"),
        "kv heads": (right // kv if kv else None, "multiply by n_kv_heads: each key/value head stores its own d_head "
                                                  "numbers per position"),
        "kv heads twice": (right * kv, "one position stores n_kv_heads · d_head numbers for K (and as many for V); "
                                       "you multiplied by the number of heads twice, as if each head stored "
                                       "n_heads · d_head = d_model numbers"),
        "d_head": (right // d if d else None, "multiply by d_head: each head stores d_head numbers per position"),
        "K and V twice": (right * 2, "K and V are two tensors: the factor for them is 2, and it appears once"),
        "d_head squared": (right * d, "each position of a head stores d_head numbers, not d_head²"),
        "seq_len": (right // S if S else None, "multiply by seq_len: every cached position stores a key and a value"),
        "seq_len + 1": (right // S * (S + 1) if S else None, "count seq_len positions, not seq_len + 1"),
        "seq_len - 1": (right // S * (S - 1) if S else None, "count seq_len positions, not seq_len - 1: the cache "
                                                              "holds a key and a value for every one of them, the "
                                                              "last one included"),
        "int32": (_int32(right), "the product overflowed: a 32-bit integer holds at most 2,147,483,647; multiply "
                                 "Python ints (or use int64), not np.int32 or torch.int32"),
        "fixed 1": fixed[1],  # the same sizes as "bytes" on every case: that hint comes first
        "fixed 8": fixed[8],
        **{f"{unit} {how}": (value, f"that is the size in {unit}, made a whole number: return the number of bytes; "
                                    f"convert to {unit} only when you print it")
           for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("GB", 10**9), ("MB", 10**6))
           for how, value in (("rounded", round(right / size)), ("cut", right // size))},
    }


def _as_int(x, on: str, right: int) -> int:
    """A Python int from the learner's result (a Python or NumPy integer); else Wrong, with what it was instead."""
    if isinstance(x, bool):
        raise Wrong(f"kv_cache_bytes returned the bool {x} on {on}, expected an int (a number of bytes)",
                    "return the product of the sizes, not a comparison")
    if isinstance(x, Tensor):
        raise Wrong(f"kv_cache_bytes returned a tensor of shape {tuple(x.shape)} and dtype {x.dtype} on {on}, "
                    "expected an int",
                    "return a Python int: multiply Python numbers, or convert a one-element tensor with int(t)")
    if hasattr(x, "__array__") and not isinstance(x, numbers.Number):
        raise Wrong(f"kv_cache_bytes returned {describe(x)} on {on}, expected an int",
                    "return a Python int: multiply Python numbers, or convert a one-element array with int(a)")
    if isinstance(x, int):
        return int(x)
    if isinstance(x, numbers.Integral):  # numpy.int64 (np.prod, a sum over an array), ...
        raise Wrong(f"kv_cache_bytes returned a NumPy {type(x).__name__} ({int(x):,}) on {on}, expected an int "
                    "(a Python int, as the task asks)",
                    "convert it with int(...) before returning it, or multiply the Python ints you are given: NumPy "
                    "integers overflow silently past their size")
    if isinstance(x, numbers.Real) and math.isfinite(float(x)):
        value = float(x)
        for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
            if right and math.isclose(value, right / size, rel_tol=1e-6):
                raise Wrong(f"kv_cache_bytes returned {value:g} on {on}, which is the size in {unit}",
                            "return the number of bytes, an int; convert to GiB only when you print it")
        raise Wrong(f"kv_cache_bytes returned {describe(x)} ({value:g}) on {on}, expected an int",
                    "a number of bytes is a whole number: compute it with integer arithmetic (*), not / or "
                    "math.pow, which give floats")
    raise Wrong(f"kv_cache_bytes returned {describe(x)} on {on}, expected an int (a number of bytes)",
                "return one Python int: the product of the sizes")


def _cache_bytes_hint(results: list[tuple[int, int, dict]], first: int, defaults_case: set[int]) -> str:
    """The hint for the first wrong size: a mistake that gives the learner's size on every case run, so that two
    mistakes with the same size on one case are told apart by the others (else a neutral hint)."""
    got0, right0, mistakes0 = results[first]
    failing = [i for i, (got, right, _) in enumerate(results) if got != right]
    if failing and set(failing) <= defaults_case:
        return ("your sizes are right when batch and bytes_per_el are passed, and wrong with the defaults: "
                "the task's signature has batch=1 and bytes_per_el=2")
    candidates = [key for key, (value, _) in mistakes0.items() if value == got0]
    for key in candidates:  # a mistake is named only when it gives the learner's size on every case run
        if all(mistakes[key][0] in (None, got) for got, _, mistakes in results):
            return mistakes0[key][1]
    return ("check the factors of your product one by one on this case: K and V, the layers, the kv heads, the "
            "numbers per head, the positions, the sequences, and the bytes of each number")


@exercise("10.1", "The size of a KV cache", section="How big is the cache?",
          references=("attnbook.timing.kv_cache_bytes",))
def check_kv_cache_bytes(kv_cache_bytes) -> str:
    """kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_el=2) -> exact int."""
    # (n_layers, n_kv_heads, d_head, seq_len, batch, bytes_per_el, description); None = use the default.
    # In the first case every factor is a different prime or power of 2, so forgetting one of them gives a
    # different number; mistakes that give the same number on one case (a fixed 4 bytes and a missing factor 2
    # when bytes_per_el=8) are told apart by the others before a hint is given.
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
    results: list[tuple[int, int, dict]] = []  # (learner's size, right size, mistakes) of every case run
    defaults_case, first = set(), None
    for L, kv, d, S, B, nbytes, desc in cases:
        if B is None:
            defaults_case.add(len(results))
        kwargs = {} if B is None else {"batch": B, "bytes_per_el": nbytes}
        B, nbytes = B or 1, nbytes or 2
        right = _cache_bytes(L, kv, d, S, B, nbytes)
        try:
            got = _as_int(_call(kv_cache_bytes, L, kv, d, S, what="kv_cache_bytes", on=desc,
                                forbid=CACHE_BYTES_FORBIDDEN, **kwargs), desc, right)
        except Wrong:
            if first is None:
                raise
            break  # a wrong size came first: report it, with the evidence of the cases before
        results.append((got, right, _cache_mistakes(L, kv, d, S, B, nbytes)))
        if got != right and first is None:
            first, first_desc = len(results) - 1, desc
    if first is None:
        return f"exact sizes on {len(cases)} caches, from an empty one to LLaMA-2 70B at batch 8"
    got, right, _ = results[first]
    raise Wrong(f"kv_cache_bytes returned {got:,} on {first_desc}, expected {right:,}",
                _cache_bytes_hint(results, first, defaults_case))


# ---------------------------------------------------------------------------------------------------------
# 10.2 repeat_kv for grouped-query attention
# ---------------------------------------------------------------------------------------------------------

_REPEAT_INSTEAD = ("build it yourself from the tensor operations the task lists (indexing, expand, reshape, "
                   "repeat_interleave)")


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
    """The package's repeat_kv and every `repeat_kv` of `transformers`, wherever the learner imports it from.

    A "*" pattern catches the functions of modules that the learner's code imports while it runs; the loaded
    modules' functions are also patched by name, so that passing one of them itself is recognised too.
    Importing all of transformers' models would take seconds, so only modules already loaded count, plus the
    modules the learner's own code imports (loaded here first).
    """
    for name in _code_names(fn):
        if name.startswith("transformers.models."):
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - not importable here, so not callable by the learner either
                pass
    paths = ["attnbook.multihead.repeat_kv", "transformers.*.repeat_kv"]
    for module_name, module in list(sys.modules.items()):
        if module_name.startswith("transformers.") and module is not None and callable(
                vars(module).get("repeat_kv")):  # vars(): no lazy import triggered
            paths.append(f"{module_name}.repeat_kv")
    return [(p, _REPEAT_INSTEAD) for p in paths]


def _kv_input(B: int, n_kv: int, S: int, d: int, seed: int, dtype=torch.float32, transposed: bool = False) -> Tensor:
    """(B, n_kv, S, d) with random entries; `transposed` makes it as split_heads does (not contiguous)."""
    g = torch.Generator().manual_seed(seed)
    if transposed:
        return torch.randn(B, S, n_kv, d, generator=g).to(dtype).transpose(1, 2)  # (B, n_kv, S, d), a view
    return torch.randn(B, n_kv, S, d, generator=g).to(dtype)


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


def _repeat_explainer(x: Tensor):
    """explain= for call on input x: hints for the errors of expand and view (ERROR_HINTS' view hint is about
    transpose, which fits a non-contiguous x but not the zero strides of an expanded tensor)."""

    def explain(message: str) -> str | None:
        if re.search(r"expanded size of the tensor .* must match the existing size", message):
            return ("expand can only stretch a dimension of size 1: insert one after the heads, expand that, then "
                    "reshape")
        if "view size is not compatible with input tensor's size and stride" in message:
            if x.is_contiguous():
                return ("expand makes a view with zero strides (nothing is copied), and .view() cannot merge a "
                        "zero-stride dimension with another: use .reshape(), which copies when it must")
            return ("this x is not contiguous (it was made by transposing, as split_heads does), and expand makes "
                    "zero strides: .view() cannot merge such dimensions; use .reshape(), which copies when it must")
        if re.search(r"cannot reshape tensor of 0 elements .* -1 .* ambiguous", message):
            return ("an empty x has 0 elements, so reshape cannot work out a -1: write every size, the heads as "
                    "n_kv_heads * n_rep")
        return None

    return explain


@exercise("10.2", "repeat_kv for grouped-query attention", section="MHA, GQA and MQA",
          references=("attnbook.multihead.repeat_kv",))
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
        ("float16 x of shape (2, 4, 3, 8), a half-precision cache as on a GPU, and n_rep=2",
         _kv_input(2, 4, 3, 8, seed=7, dtype=torch.float16), 2),
        ("multi-query attention: x of shape (3, 1, 6, 4) and n_rep=8", _kv_input(3, 1, 6, 4, seed=5), 8),
        ("an empty cache: x of shape (1, 2, 0, 4) and n_rep=2", _kv_input(1, 2, 0, 4, seed=6), 2),
    ]
    for desc, x, n_rep in cases:
        got = _call(repeat_kv, x, n_rep, what="repeat_kv", on=desc, forbid=repeat_kv_forbidden,
                    explain=_repeat_explainer(x))
        expected = _repeat_kv(x, n_rep)  # (B, n_kv * n_rep, S, d)
        got = expect_tensor(got, what="your result", on=desc, finite=False)
        _check_head_count(got, x, n_rep, desc)
        if got.shape == expected.shape and got.dtype != x.dtype:
            raise Wrong(f"your result has dtype {got.dtype} on {desc}, expected {x.dtype} (the dtype of x)",
                        "only copy the numbers: no .float() or .double(), and nothing that mixes x with a tensor "
                        "of another dtype (torch.ones or torch.zeros without dtype=x.dtype make float32)")
        expect_close(got, expected, what="your result", on=desc, atol=0.0, rtol=0.0,
                     mistakes=_repeat_mistakes(x, n_rep))
    return (f"right on {len(cases)} inputs, including n_rep=1, multi-query attention, float16, a non-contiguous "
            "input and an empty cache")


# ---------------------------------------------------------------------------------------------------------
# 10.3 append to a cache and attend over it
# ---------------------------------------------------------------------------------------------------------

_ATTEND_INSTEAD = ("grow the caches with torch.cat and write the attention from the tensor operations the task "
                   "lists")
ATTEND_FORBIDDEN = [(name, _ATTEND_INSTEAD) for name in (
    *ATTENTION_SHORTCUTS, "attnbook.multihead.KVCache",
    # transformers' attention functions (eager_attention_forward of every model, sdpa_attention_forward,
    # flash_attention_forward, ...), wherever the learner imports them from: a "*" pattern is watched on every call
    "transformers.*attention_forward",
)]


def _bottom_right(L: int, S: int) -> Tensor:
    """(L, S) bool: new query i (position S - L + i) may see keys 0..S - L + i."""
    return torch.ones(L, S, dtype=torch.bool).tril(S - L)


def _attend(q, k, v, mask=None, scale=None, dim=-1) -> Tensor:
    """Attention in float64 with an optional boolean mask, as a plain softmax computes it: a row without any allowed
    key gives NaN, as in the learner's code; `dim` is the softmax's dimension (to model a mistake)."""
    q, k, v = q.double(), k.double(), v.double()
    scores = q @ k.transpose(-2, -1) * (1 / math.sqrt(q.size(-1)) if scale is None else scale)  # (B, h, L, S)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=dim) @ v  # (B, h, L, d_v)


def _attend_zeroed(q, k, v, mask) -> Tensor:
    """The mistake of masking after the softmax: the weights of hidden keys set to 0, the rest left as they were
    (a row no longer sums to 1)."""
    q, k, v = q.double(), k.double(), v.double()
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)  # (B, h, L, S), unmasked
    return (weights * mask) @ v  # (B, h, L, d_v)


def _attend_cases():
    """(description, (q, k_cache, v_cache, k_new, v_new)) for 10.3; one new token first, then chunks."""

    def make(B, h, past, L, d, d_v, seed, dtype=torch.float32):
        g = torch.Generator().manual_seed(seed)
        t = lambda *s: torch.randn(*s, generator=g).to(dtype)  # noqa: E731
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
        ("float16, a half-precision cache as on a GPU: a chunk of 2 new tokens, q (1, 2, 2, 8), caches (1, 2, 3, 8)",
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
        out["your output ignores the new tokens' own keys and values: append them to the cache first, then attend "
            "over the whole cache (a token also attends to itself)"] = (
            _attend(q, kc, vc), _attend(q, kc, vc, mask=torch.ones(L, past, dtype=torch.bool).tril(past - L)))
        out["your output attends only to the new tokens: append them to the cache and attend over every cached "
            "position"] = _attend(q, kn, vn, mask=torch.ones(L, L, dtype=torch.bool).tril())
        out["your causal mask is aligned to the top left (query i sees keys 0..i), as is_causal=True in SDPA does; "
            "the new queries are the LAST positions, so query i may see every cached key and the new keys 0..i"] = \
            _attend(q, k, v, mask=tril(0))
    if L > 1:
        out["each new token may not see the new tokens after it: mask the scores with a causal mask aligned to the "
            "bottom right"] = _attend(q, k, v)
        out["your output is right on a chunk of new tokens without a cache, but with a cache each new token still "
            "may not see the new tokens after it: mask the scores with the causal mask aligned to the bottom right "
            "whatever the length of the cache"] = _attend(q, k, v) if past else _attend(q, k, v, mask)
        out["your mask puts the triangle over the first L_new keys (cached positions) and lets each new query see "
            "every key after them, the later new tokens included; the new tokens are the LAST L_new keys: a new "
            "query sees every cached key, and the triangle sits at the bottom right of the (L_new, S) scores"] = \
            _attend(q, k, v, mask=torch.cat([torch.ones(L, L, dtype=torch.bool).tril(),
                                             torch.ones(L, S - L, dtype=torch.bool)], dim=-1))
        out["you zeroed the masked weights after the softmax, so the weights of a row no longer sum to 1: mask the "
            "scores before the softmax (fill them with -inf), so that the softmax shares the weight among the "
            "allowed keys only"] = _attend_zeroed(q, k, v, mask)
    out["your causal mask is off by one: it hides each new token from its own key; new query i sits at position "
        "S - L + i and may see the keys up to that position, itself included"] = _attend(q, k, v, mask=tril(S - L - 1))
    if L > 1:
        out["your causal mask is off by one: new query i sits at position S - L + i and may not see position "
            "S - L + i + 1"] = _attend(q, k, v, mask=tril(S - L + 1))
    out["your mask is upper-triangular (triu): it lets new query i see the new tokens after it and hides the cached "
        "ones; keep the lower triangle (tril), aligned to the bottom right"] = _attend(
        q, k, v, mask=torch.ones(L, S, dtype=torch.bool).triu(S - L))
    out["you left out the scale: divide the scores by sqrt(d), the size of the last dimension of q"] = _attend(
        q, k, v, mask, scale=1.0)
    out["you divided the scores by d; divide by sqrt(d)"] = _attend(q, k, v, mask, scale=1 / d)
    if L != d:
        out["the scale uses d = q.size(-1), the size of the last dimension (the features of a query); q.size(-2) is "
            "the number of new tokens"] = _attend(q, k, v, mask, scale=1 / math.sqrt(L))
    if d_v != d:
        out["the scale uses d = q.size(-1), the width of the queries and keys, not the width of the values"] = \
            _attend(q, k, v, mask, scale=1 / math.sqrt(d_v))
    out["your softmax runs over the queries (dim=-2); run it over the keys (dim=-1)"] = _attend(q, k, v, mask, dim=-2)
    return out


def _attend_explain(message: str) -> str | None:
    m = re.search(r"Sizes of tensors must match except in dimension (\d+)", message)
    if m and m.group(1) != "2":
        return ("concatenate along the sequence dimension, dim=-2 (dim 2 of (B, h, S, d)): the cache and the new "
                "keys differ in length, not in batch, heads or features")
    if re.search(r"value cannot be converted to type c10::(Half|BFloat16) without overflow", message):
        return ("float16 holds numbers up to about 65504 only, so a fill value like -1e9 does not fit: fill the "
                "masked scores with float('-inf'), or with torch.finfo(scores.dtype).min")
    if re.search(r"must match the size of tensor b .* at non-singleton dimension 3", message):
        return ("the mask has shape (L_new, S_total): one row per new query, one column per key of the grown "
                "cache (the cached keys and the new ones); the new queries are the last positions, so its causal "
                "triangle is aligned to the bottom right")
    return None


_ORDER_HINT = "return them in the order of the task: the output first, then the grown key cache, then the value cache"
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
        raise Wrong(f"attend_with_cache returned the values where the keys belong on {desc}", _ORDER_HINT)
    raise Wrong(f"attend_with_cache returned ({', '.join(names)}) on {desc}", _ORDER_HINT)


def _output_dtype_hint(got: torch.dtype, wanted: torch.dtype) -> str:
    """What to do about an output in dtype `got` instead of the inputs' `wanted`: a wider dtype is fine to compute
    in but must be cast back; a narrower one loses precision (.float() turns float64 into float32)."""
    if torch.finfo(got).bits > torch.finfo(wanted).bits:
        return ("computing in a wider dtype is fine, but cast the result back to the dtype of q at the end; new "
                "tensors made without dtype=q.dtype (torch.zeros, torch.full) are float32 and widen float16 too")
    return ("keep the dtype of the inputs: .float() or .half() narrows a float64 or float32 input, and new tensors "
            "made without dtype=q.dtype (torch.zeros, torch.full) are float32; cast the result back to the dtype of "
            "q at the end")


def _check_cache(got: Tensor, expected: Tensor, old: Tensor, new: Tensor, which: str, desc: str) -> None:
    """The returned cache `which` ("k_cache" or "v_cache") must be cat([old, new], dim=-2), in old's dtype."""
    what = f"the returned {which}"
    got = expect_tensor(got, what=what, on=desc, finite=False)
    if got.shape == old.shape and torch.equal(got, old) and new.size(-2) > 0:
        raise Wrong(f"{what} is the cache you were given, of shape {tuple(old.shape)}, on {desc}",
                    "return the grown cache, the cached entries followed by the new ones, not the cache you were "
                    "given")
    if got.shape == expected.shape and got.is_floating_point() and got.dtype != old.dtype:
        raise Wrong(f"{what} has dtype {got.dtype} on {desc}, expected {old.dtype} (the dtype of the cache)",
                    "grow the cache in its own dtype: no .float(), .double() or .half()")
    expect_close(got, expected, what=what, on=desc, atol=0.0, rtol=0.0, mistakes={
        "append the new entries after the cached ones: the cache is in the order of the positions, oldest first":
            torch.cat([new, old], dim=-2),
        "return the whole grown cache, the cached entries followed by the new ones, not only the new entries": new,
    })


def _matches(got: Tensor, wrong: Tensor, atol: float, rtol: float) -> bool:
    return (tuple(got.shape) == tuple(wrong.shape)
            and torch.allclose(got.detach().double(), wrong.double(), atol=atol, rtol=rtol, equal_nan=True))


def _variants(wrong) -> tuple[Tensor, ...]:
    """The outputs of a mistake that it can give on an input (a NaN output says nothing: code that masks with a
    large negative number instead of -inf gives other numbers there)."""
    return tuple(w for w in (wrong if isinstance(wrong, tuple) else (wrong,)) if torch.isfinite(w).all())


def _attend_hint(runs: list, first: int) -> tuple[str, Tensor] | None:
    """(hint, output) of a mistake that gives the learner's output on the first wrong input and on every other
    input it can be made on (one new token cannot tell a missing scale from d = q.size(-2), or a mask off by one
    from the new keys left out, but a chunk of new tokens can); None when no mistake explains every input."""
    _, out0, _, mistakes0, tol0 = runs[first]
    candidates = [(hint, w) for hint, wrong in mistakes0.items()
                  for w in (wrong if isinstance(wrong, tuple) else (wrong,)) if _matches(out0, w, *tol0)]
    for hint, w0 in candidates:
        if all(any(_matches(out, w, *tol) for w in _variants(mistakes[hint]))
               for _, out, _, mistakes, tol in runs if hint in mistakes and _variants(mistakes[hint])):
            return hint, w0
    return None


@exercise("10.3", "Append to a cache and attend over it", section="The KV cache",
          references=("attnbook.multihead.MultiHeadAttention",))
def check_attend_with_cache(attend_with_cache) -> str:
    """attend_with_cache(q, k_cache, v_cache, k_new, v_new) -> (output, k_cache, v_cache)."""
    cases = _attend_cases()
    runs, first = [], None  # runs: (description, output, expected, mistakes, (atol, rtol)) of every input checked
    for desc, (q, kc, vc, kn, vn) in cases:
        k, v = torch.cat([kc, kn], dim=-2), torch.cat([vc, vn], dim=-2)  # (B, h, S, d), (B, h, S, d_v)
        L, S = q.size(-2), k.size(-2)
        expected = scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                                attn_mask=_bottom_right(L, S))[0]  # (B, h, L, d_v)
        tol = (1e-2, 1e-2) if q.dtype == torch.float16 else (1e-5, 1e-4)
        try:
            got = _call(attend_with_cache, q, kc, vc, kn, vn, what="attend_with_cache", on=desc,
                        forbid=ATTEND_FORBIDDEN, explain=_attend_explain)
            items = expect_tuple(got, _RESULT_NAMES, "attend_with_cache", desc)
            _check_order(items, k, v, expected.shape, desc)
            out, k_got, v_got = items
            _check_cache(k_got, k, kc, kn, "k_cache", desc)
            _check_cache(v_got, v, vc, vn, "v_cache", desc)
            mistakes = _attend_mistakes(q, kc, vc, kn, vn)
            out = expect_tensor(out, what="the output (the first item you return)", on=desc, finite=False)
            if out.shape != expected.shape:  # says which shape, and the mistake that gives it
                expect_close(out, expected, what="the output (the first item you return)", on=desc,
                             mistakes={h: w[0] if isinstance(w, tuple) else w for h, w in mistakes.items()})
            if out.is_floating_point() and out.dtype != q.dtype:
                raise Wrong(f"the output has dtype {out.dtype} on {desc}, expected {q.dtype} (the dtype of q)",
                            _output_dtype_hint(out.dtype, q.dtype))
        except Wrong:
            if first is None:
                raise
            break  # a wrong output came first: report it, with the evidence of the inputs before
        runs.append((desc, out, expected, mistakes, tol))
        if first is None and not _matches(out, expected, *tol):
            first = len(runs) - 1
    if first is None:
        return (f"output and grown caches are right on {len(cases)} inputs: one new token, empty caches, chunks of "
                "new tokens with the bottom-right causal mask, and float16")
    desc, out, expected, mistakes, (atol, rtol) = runs[first]
    mistake = _attend_hint(runs, first)
    expect_close(out, expected, what="the output (the first item you return)", on=desc, atol=atol, rtol=rtol,
                 mistakes=dict([mistake]) if mistake else None,
                 nan_hint="a softmax over scores that are all -inf gives NaN: every new query must see at least "
                          "itself, so check the mask")
    raise Wrong(f"the output has the wrong values on {desc}")  # not reached: expect_close raised
