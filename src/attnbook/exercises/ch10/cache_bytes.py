"""Checker for exercise 10.1, the size of a KV cache: an exact int on caches from empty to LLaMA-2 70B, with a
mistake's hint only when it explains every case run."""
from __future__ import annotations

import math
import numbers

import torch
from torch import Tensor

from ...timing import kv_cache_bytes as _kv_cache_bytes
from ..ch09.cost import unreadable
from ..compare import generator
from ..guard import call
from ..hints import describe
from ..registry import exercise, Wrong
from ...i18n import N_, _


_DTYPES = {1: torch.int8, 2: torch.float16, 4: torch.float32, 8: torch.float64}

CACHE_BYTES_FORBIDDEN = [
    ("attnbook.timing.kv_cache_bytes", N_("multiply the sizes yourself, as the section on the size of the cache does")),
]


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
        unit = _("byte") if size == 1 else _("bytes")
        fixed[size] = (numbers_ * size, _("bytes_per_el={nbytes} here: use the argument instead of a fixed "
                                          "{size} {unit} per number", nbytes=nbytes, size=size, unit=unit))
    return {
        _("no K and V"): (right // 2, _("the cache holds two tensors per layer, the keys K and the values V: multiply by 2")),
        "fixed 2": fixed[2],
        "fixed 4": fixed[4],
        "bits": (right * 8, _("that is the size in bits: an element of bytes_per_el bytes is 8 · bytes_per_el bits; "
                              "return bytes")),
        "layers": (right // L if L else None, _("multiply by n_layers: every layer keeps its own keys and values")),
        "batch": (right // B if B else None, _("multiply by the batch size: every sequence in the batch has its own "
                                               "cache")),
        "bytes": (numbers_, _("multiply by bytes_per_el: the count of numbers times the bytes of each")),
        _("kv heads"): (right // kv if kv else None, _("multiply by n_kv_heads: each key/value head stores its own d_head "
                                                       "numbers per position")),
        _("kv heads twice"): (right * kv, _("one position stores n_kv_heads · d_head numbers for K (and as many for V); "
                                            "you multiplied by the number of heads twice, as if each head stored "
                                            "n_heads · d_head = d_model numbers")),
        "d_head": (right // d if d else None, _("multiply by d_head: each head stores d_head numbers per position")),
        _("K and V twice"): (right * 2, _("K and V are two tensors: the factor for them is 2, and it appears once")),
        _("d_head squared"): (right * d, _("each position of a head stores d_head numbers, not d_head²")),
        "seq_len": (right // S if S else None, _("multiply by seq_len: every cached position stores a key and a value")),
        _("seq_len + 1"): (right // S * (S + 1) if S else None, _("count seq_len positions, not seq_len + 1")),
        _("seq_len - 1"): (right // S * (S - 1) if S else None, _("count seq_len positions, not seq_len - 1: the cache "
                                                                  "holds a key and a value for every one of them, the "
                                                                  "last one included")),
        "int32": (_int32(right), _("the product overflowed: a 32-bit integer holds at most 2,147,483,647; multiply "
                                   "Python ints (or use int64), not np.int32 or torch.int32")),
        "fixed 1": fixed[1],  # the same sizes as "bytes" on every case: that hint comes first
        "fixed 8": fixed[8],
        **{f"{unit} {how}": (value, _("that is the size in {unit}, made a whole number: return the number of "
                                      "bytes; convert to {unit} only when you print it", unit=unit))
           for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("GB", 10**9), ("MB", 10**6))
           for how, value in (("rounded", round(right / size)), ("cut", right // size))},
    }


def _as_int(x, on: str, right: int) -> int:
    """A Python int from the learner's result (a Python or NumPy integer); else Wrong, with what it was instead."""
    if isinstance(x, bool):
        raise Wrong(_("kv_cache_bytes returned the bool {x} on {on}, expected an int (a number of bytes)",
                      x=x, on=on),
                    _("return the product of the sizes, not a comparison"))
    if isinstance(x, Tensor):
        raise Wrong(_("kv_cache_bytes returned a tensor of shape {tuple_x_shape} and dtype {dtype} on {on}, "
                      "expected an int", tuple_x_shape=tuple(x.shape), dtype=x.dtype, on=on),
                    _("return a Python int: multiply Python numbers, or convert a one-element tensor with int(t)"))
    if hasattr(x, "__array__") and not isinstance(x, numbers.Number):
        raise Wrong(_("kv_cache_bytes returned {describe_x} on {on}, expected an int",
                      describe_x=describe(x), on=on),
                    _("return a Python int: multiply Python numbers, or convert a one-element array with int(a)"))
    if isinstance(x, int):
        return int(x)
    if isinstance(x, numbers.Integral):  # numpy.int64 (np.prod, a sum over an array), ...
        raise Wrong(_("kv_cache_bytes returned a NumPy {type_x___name} ({int_x:,}) on {on}, expected an int (a "
                      "Python int, as the task asks)", type_x___name=type(x).__name__, int_x=int(x), on=on),
                    _("convert it with int(...) before returning it, or multiply the Python ints you are given: NumPy "
                      "integers overflow silently past their size"))
    if isinstance(x, numbers.Real) and math.isfinite(float(x)):
        value = float(x)
        for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
            if right and math.isclose(value, right / size, rel_tol=1e-6):
                raise Wrong(_("kv_cache_bytes returned {value:g} on {on}, which is the size in {unit}",
                              value=value, on=on, unit=unit),
                            _("return the number of bytes, an int; convert to GiB only when you print it"))
        raise Wrong(_("kv_cache_bytes returned {describe_x} ({value:g}) on {on}, expected an int",
                      describe_x=describe(x), value=value, on=on),
                    _("a number of bytes is a whole number: compute it with integer arithmetic (*), not / or "
                      "math.pow, which give floats"))
    raise Wrong(_("kv_cache_bytes returned {describe_x} on {on}, expected an int (a number of bytes)",
                  describe_x=describe(x), on=on),
                _("return one Python int: the product of the sizes"))


def _cache_bytes_hint(results: list[tuple[int, int, dict]], first: int, defaults_case: set[int]) -> str:
    """The hint for the first wrong size: a mistake that gives the learner's size on every case run, so that two
    mistakes with the same size on one case are told apart by the others (else a neutral hint)."""
    got0, right0, mistakes0 = results[first]
    failing = [i for i, (got, right, _unused) in enumerate(results) if got != right]
    if failing and set(failing) <= defaults_case:
        return (_("your sizes are right when batch and bytes_per_el are passed, and wrong with the defaults: "
                  "the task's signature has batch=1 and bytes_per_el=2"))
    candidates = [key for key, (value, _unused) in mistakes0.items() if value == got0]
    for key in candidates:  # a mistake is named only when it gives the learner's size on every case run
        if all(mistakes[key][0] in (None, got) for got, _unused, mistakes in results):
            return mistakes0[key][1]
    return (_("check the factors of your product one by one on this case: K and V, the layers, the kv heads, the "
              "numbers per head, the positions, the sequences, and the bytes of each number"))


def separates(L: int, kv: int, d: int, S: int, B: int, nbytes: int) -> bool:
    """Whether every mistake in the product (a factor left out or counted twice) gives its own size on this case,
    different from the right one and from one another. (A fixed byte size gives the size of another mistake on
    some case whatever the inputs, as a fixed 4 bytes and a missing factor 2 do when bytes_per_el=8: the other
    cases tell them apart.)"""
    right = 2 * L * kv * d * S * B * nbytes
    cannot_show = {"batch"} if B == 1 else set()  # a missing factor 1 changes nothing
    if right < 2 ** 31:
        cannot_show.add("int32")
    values = [value for key, (value, _unused) in _cache_mistakes(L, kv, d, S, B, nbytes).items()
              if key not in cannot_show and not key.startswith("fixed ") and not key.endswith((" rounded", " cut"))]
    return None not in values and right not in values and len(set(values)) == len(values)


def cache_cases() -> list[tuple[int, int, int, int, int | None, int | None, str]]:
    """(n_layers, n_kv_heads, d_head, seq_len, batch, bytes_per_el, description) of 10.1's cases (None: the default),
    drawn from the run's seed (new on the check's second pass), so that an answer cannot know them in advance.
    The message shows the right size of the first wrong case, so no case's size spells its formula: no input has an
    odd prime of its own, and more than one product of the inputs gives the size (`unreadable`). On the first case
    every mistake in the product gives its own size (`separates`); mistakes that give the same size on one case are
    told apart by the others before a hint is given. The bytes per number are 8, 4 and 2 in the first three cases."""
    g = generator(1010)

    def pick(options) -> int:
        return options[int(torch.randint(len(options), (), generator=g))]

    def draw(Ls, kvs, ds, Ss, Bs, nbytes, keep=lambda case: True) -> tuple[int, int, int, int, int, int]:
        while True:
            case = (pick(Ls), pick(kvs), pick(ds), pick(Ss), pick(Bs), nbytes)
            if unreadable(2 * math.prod(case), case) and keep(case):
                return case

    L, kv, d, S, B, nb = draw((2, 3, 4, 6), (2, 3, 4, 6, 8), (4, 6, 8, 12, 16), (3, 6, 9, 12, 18, 24), (1,), 8,
                              lambda case: separates(*case))
    first = (L, kv, d, S, B, nb, _("n_layers={L}, n_kv_heads={kv}, d_head={d}, seq_len={S}, batch=1, bytes_per_el=8 "
                                   "(float64)", L=L, kv=kv, d=d, S=S))
    L, kv, d, S, B, nb = draw((2, 4, 6, 8), (2, 4, 8), (8, 16, 32), (6, 10, 12, 20), (1,), 4)
    second = (L, kv, d, S, B, nb, _("n_layers={L}, n_kv_heads={kv}, d_head={d}, seq_len={S}, batch=1, "
                                    "bytes_per_el=4 (float32)", L=L, kv=kv, d=d, S=S))
    L, kv, d, S, B, nb = draw((2, 4, 6, 8), (2, 4), (8, 16), (4, 6, 8, 12), (2, 3, 4, 6), 2)
    third = (L, kv, d, S, B, nb, _("n_layers={L}, n_kv_heads={kv}, d_head={d}, seq_len={S}, batch={B}, "
                                   "bytes_per_el=2", L=L, kv=kv, d=d, S=S, B=B))
    B70 = pick((5, 10, 20))  # a factor 5 besides the 80 layers', so that 5 does not show which input it is
    S8 = pick((8192, 16384, 32768))
    L, kv, d, S, B, nb = draw((4, 6, 8, 12), (1,), (32, 64), (48, 96, 120, 144), (2, 3, 4, 5, 6), 8)
    mqa = (L, kv, d, S, B, nb, _("multi-query: n_layers={L}, n_kv_heads=1, d_head={d}, seq_len={S}, batch={B}, "
                                 "bytes_per_el=8", L=L, d=d, S=S, B=B))
    Le, kve, de, Be = pick((2, 3, 4)), pick((2, 3, 4)), pick((4, 8)), pick((2, 3))
    return [
        first, second, third,
        (32, 32, 128, 4096, None, None, _("LLaMA-2 7B at 4096 tokens: kv_cache_bytes(32, 32, 128, 4096), "
                                          "with the defaults batch=1 and bytes_per_el=2")),
        (80, 8, 128, 4096, B70, 2, _("LLaMA-2 70B (8 kv heads) at 4096 tokens, batch={B70}, bytes_per_el=2",
                                     B70=B70)),
        (32, 8, 128, S8, 1, 1, _("n_layers=32, n_kv_heads=8, d_head=128, seq_len={S8}, an 8-bit cache "
                                 "(bytes_per_el=1)", S8=S8)),
        mqa,
        (Le, kve, de, 0, Be, 2, _("an empty cache: n_layers={Le}, n_kv_heads={kve}, d_head={de}, seq_len=0, "
                                  "batch={Be}, bytes_per_el=2", Le=Le, kve=kve, de=de, Be=Be)),
    ]


@exercise("10.1", "The size of a KV cache", answer_name="kv_cache_bytes", section="How big is the cache?",
          references=("attnbook.timing.kv_cache_bytes",))
def check_kv_cache_bytes(kv_cache_bytes) -> str:
    """kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_el=2) -> exact int."""
    cases = cache_cases()
    results: list[tuple[int, int, dict]] = []  # (learner's size, right size, mistakes) of every case run
    defaults_case, first = set(), None
    for L, kv, d, S, B, nbytes, desc in cases:
        if B is None:
            defaults_case.add(len(results))
        kwargs = {} if B is None else {"batch": B, "bytes_per_el": nbytes}
        B, nbytes = B or 1, nbytes or 2
        right = _kv_cache_bytes(L, kv, d, S, batch=B, dtype=_DTYPES[nbytes])
        try:
            got = _as_int(call(kv_cache_bytes, L, kv, d, S, what="kv_cache_bytes", on=desc,
                                forbid=CACHE_BYTES_FORBIDDEN, reload=True, **kwargs), desc, right)
        except Wrong:
            if first is None:
                raise
            break  # a wrong size came first: report it, with the evidence of the cases before
        results.append((got, right, _cache_mistakes(L, kv, d, S, B, nbytes)))
        if got != right and first is None:
            first, first_desc = len(results) - 1, desc
    if first is None:
        return _("exact sizes on {len_cases} caches, from an empty one to LLaMA-2 70B at batch {batch}",
                 len_cases=len(cases), batch=cases[4][4])
    got, right, _unused = results[first]
    raise Wrong(_("kv_cache_bytes returned {got:,} on {first_desc}, expected {right:,}",
                  got=got, first_desc=first_desc, right=right),
                _cache_bytes_hint(results, first, defaults_case))
