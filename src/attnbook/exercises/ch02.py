"""Checkers for chapter 2, scaled dot-product attention."""
from __future__ import annotations

import math
import numbers

import torch
from torch import Tensor

from ..attention import scaled_dot_product_attention, softmax
from .compare import as_value, expect_close, expect_tensor, expect_tuple, expect_value, randn
from .guard import ATTENTION_SHORTCUTS, call
from .hints import describe
from .registry import exercise, Wrong

# ---------------------------------------------------------------------------------------------------------
# 2.1 attention by hand
# ---------------------------------------------------------------------------------------------------------

_Q = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
_K = torch.tensor([[1.0, 0.0], [0.5, 0.5]], dtype=torch.float64)
_V = torch.tensor([[2.0, 0.0], [1.0, 1.0]], dtype=torch.float64)


@exercise("2.1", "Attention by hand", answer_kind="value", section="The formula, one step at a time")
def check_by_hand(answer) -> str:
    """answer: the 2x2 matrix softmax(Q K^T / sqrt(2)) V, as a tensor, an array or a nested list; to 1e-3.

    A by-hand answer: the messages say which entries are wrong and why, never the expected numbers.
    """
    got = as_value(answer, expected="a 2x2 matrix")
    if got.dim() == 0 or got.numel() == 1:
        raise Wrong("your answer is a single number, expected a 2x2 matrix",
                    "the output has one row per query and one column per value dimension")
    scores = _Q @ _K.T  # (2, 2)
    weights = torch.softmax(scores / math.sqrt(2), dim=-1)
    output = weights @ _V
    expect_value(
        got, output, what="your answer", atol=1e-3,
        mistakes={
            "you left out the scale: divide the scores Q K^T by sqrt(d_k) = sqrt(2) before the softmax":
                torch.softmax(scores, dim=-1) @ _V,
            "you divided the scores by d_k = 2; divide by sqrt(d_k) = sqrt(2) instead":
                torch.softmax(scores / 2, dim=-1) @ _V,
            "your softmax normalised each column (over the queries); normalise each row (over the keys)":
                torch.softmax(scores / math.sqrt(2), dim=0) @ _V,
            "your scores are not Q K^T: entry (i, j) is the dot product of row i of Q (query i) with row j of "
            "K (key j); check the order of the product and which matrix is transposed":
                torch.softmax(_Q @ _K / math.sqrt(2), dim=-1) @ _V,
            "these are the attention weights softmax(Q K^T / sqrt(2)); multiply them by V to get the output":
                weights,
            "your matrix is transposed: row i must be the output for query i": output.T,
            "you multiplied V by the scaled scores without a softmax: turn each row of scores into weights "
            "that are positive and sum to 1 first": scores / math.sqrt(2) @ _V,
        },
        hint="work one query (row) at a time: its two scores, divided by sqrt(2), a softmax across the row, "
             "then the weighted sum of the rows of V. Each output row is w1 [2, 0] + w2 [1, 1] with "
             "w1 + w2 = 1, so its first entry lies between 1 and 2 and its second between 0 and 1",
        nan_hint="each output entry is a weighted average of entries of V, an ordinary number: check the "
                 "softmax step",
    )
    return "softmax(Q K^T / sqrt(2)) V is right to 1e-3"


# ---------------------------------------------------------------------------------------------------------
# 2.2 scaled dot-product attention with a mask
# ---------------------------------------------------------------------------------------------------------




def _qkv(batch: tuple[int, ...], L: int, S: int, d_k: int, d_v: int, seed: int):
    q = randn(*batch, L, d_k, seed=seed)
    return q, randn(*batch, S, d_k, seed=seed + 1), randn(*batch, S, d_v, seed=seed + 2)


def _attention_cases() -> list[tuple[str, tuple[Tensor, Tensor, Tensor], Tensor | None]]:
    """(description, (q, k, v), mask) for 2.2, ordered so that each mistake shows up first where it is unambiguous."""
    padding = torch.arange(5)[None, :] < torch.tensor([4, 2, 3])[:, None]  # (3, 5); every row keeps a key either way
    causal = torch.ones(6, 6, dtype=torch.bool).tril()  # (6, 6)
    lonely = randn(2, 1, 4, 6, seed=90) > 0  # (2, 1, 4, 6) random mask ...
    lonely[:, :, 0] = True  # ... every row allowed somewhere ...
    lonely[1, 0, 2] = False  # ... except query 2 of batch element 1, which may attend to nothing
    return [
        ("2-D q (3, 4), k (5, 4), v (5, 6) with no mask", _qkv((), 3, 5, 4, 6, seed=10), None),
        ("3-D q (2, 4, 8), k (2, 6, 8), v (2, 6, 3) with no mask", _qkv((2,), 4, 6, 8, 3, seed=20), None),
        ("4-D q (2, 3, 5, 8), k (2, 3, 7, 8), v (2, 3, 7, 4) with no mask", _qkv((2, 3), 5, 7, 8, 4, seed=30), None),
        ("a batch of 1 with a single query: q (1, 1, 1, 4), k (1, 1, 3, 4), v (1, 1, 3, 2)",
         _qkv((1, 1), 1, 3, 4, 2, seed=40), None),
        ("odd sizes q (3, 1, 7, 5), k (3, 1, 9, 5), v (3, 1, 9, 1)", _qkv((3, 1), 7, 9, 5, 1, seed=50), None),
        ("q, k, v (3, 2, 5, 4) with a padding mask of shape (3, 1, 1, 5) for lengths [4, 2, 3]",
         _qkv((3, 2), 5, 5, 4, 4, seed=60), padding[:, None, None, :]),
        ("q, k, v (2, 2, 6, 4) with a causal mask of shape (6, 6)", _qkv((2, 2), 6, 6, 4, 3, seed=70), causal),
        ("q (2, 3, 4, 4), k and v (2, 3, 6, 4) with a mask of shape (2, 1, 4, 6) in which query 2 of batch "
         "element 1 may attend to no key", _qkv((2, 3), 4, 6, 4, 4, seed=80), lonely),
    ]


def _variants(q: Tensor, k: Tensor, mask: Tensor | None) -> dict[str, Tensor]:
    """The attention weights that common mistakes produce on this input, keyed by the hint for each."""
    d_k = q.size(-1)
    raw = q.double() @ k.double().transpose(-2, -1)  # (..., L, S)

    def masked(scores: Tensor, m: Tensor | None, fill: float = float("-inf")) -> Tensor:
        return scores if m is None else scores.masked_fill(~m, fill)

    out = {
        "your softmax normalises over the queries (dim=-2); normalise over the keys (dim=-1), so that each "
        "query's weights sum to 1": torch.softmax(masked(raw / math.sqrt(d_k), mask), dim=-2),
        "you left out the scale: divide the scores by sqrt(d_k) before the softmax":
            softmax(masked(raw, mask), dim=-1),
        "you divided the scores by d_k; divide by sqrt(d_k) (math.sqrt(q.size(-1)))":
            softmax(masked(raw / d_k, mask), dim=-1),
    }
    for i, size in enumerate(q.shape[:-1]):  # scaled by the size of a dimension other than the last
        if size != d_k:
            out.setdefault("d_k is the size of the last dimension of q: use q.size(-1) (not q.size(0) or "
                           f"q.shape[{i}])", softmax(masked(raw / math.sqrt(size), mask), dim=-1))
    if mask is not None:
        scaled = raw / math.sqrt(d_k)
        out["your mask is inverted: True means 'may attend', so fill the scores where the mask is False "
            "(scores.masked_fill(~mask, float('-inf')))"] = softmax(scaled.masked_fill(mask, float("-inf")), dim=-1)
        out["you applied the mask after the softmax, so the remaining weights no longer sum to 1; set masked "
            "scores to -inf before the softmax"] = softmax(scaled, dim=-1) * mask
        out["a query that may attend to no key gets NaN weights (with every score -inf, the softmax divides 0 by 0); "
            "its weights and output must be 0, e.g. weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0) "
            "after the softmax"] = (
            torch.softmax(masked(scaled, mask), dim=-1))
        out["a query that may attend to no key gets uniform weights (what a large negative fill such as -1e9 "
            "gives, since all its scores are then equal); its weights and output must be 0"] = (
            torch.softmax(masked(scaled, mask, -1e9), dim=-1))
    return out


ATTENTION_FORBIDDEN = [
    (name, "write the four steps yourself: scores q @ k.transpose(-2, -1), scale, mask, softmax over dim=-1, "
           "then weights @ v")
    for name in ATTENTION_SHORTCUTS
]


@exercise("2.2", "Scaled dot-product attention with a mask", section="The formula, one step at a time",
          references=("attnbook.attention.scaled_dot_product_attention",))
def check_attention(attention) -> str:
    """attention(q, k, v, mask=None) -> (output, weights) must match scaled_dot_product_attention."""
    cases = _attention_cases()
    for desc, (q, k, v), mask in cases:
        args = (q, k, v) if mask is None else (q, k, v, mask)
        got = call(attention, *args, what="attention", on=desc, forbid=ATTENTION_FORBIDDEN)
        ref_out, ref_w = scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=mask)
        out_shape, w_shape = tuple(ref_out.shape), tuple(ref_w.shape)
        if isinstance(got, Tensor):
            shape = tuple(got.shape)
            hint = ("you returned only the output; return both: `return output, weights`" if shape == out_shape
                    else "you returned only the weights; return both: `return output, weights`" if shape == w_shape
                    else "return a tuple: `return output, weights`")
            raise Wrong(f"attention returned a single tensor of shape {shape} on {desc}, expected a tuple "
                        f"(output, weights)", hint)
        out, weights = expect_tuple(got, ("output", "weights"), "attention", desc)
        if (isinstance(out, Tensor) and isinstance(weights, Tensor) and out_shape != w_shape
                and tuple(out.shape) == w_shape and tuple(weights.shape) == out_shape):
            raise Wrong(f"attention returned tensors of shapes {tuple(out.shape)} and {tuple(weights.shape)} on "
                        f"{desc}, expected output {out_shape} then weights {w_shape}",
                        "you swapped them: return the output first, then the weights (`return output, weights`)")
        mistakes = _variants(q, k, mask)
        expect_close(weights, ref_w, what="the weights tensor (the second item you return)", on=desc, atol=1e-5,
                     mistakes={**mistakes, "you returned the output where the weights belong: "
                               "`return output, weights`": ref_out})
        expect_close(out, ref_out, what="the output tensor (the first item you return)", on=desc, atol=1e-5,
                     mistakes={"you returned the weights where the output belongs: `return output, weights`": ref_w})
    return f"output and weights match scaled_dot_product_attention on {len(cases)} inputs, with and without masks"


# ---------------------------------------------------------------------------------------------------------
# 2.3 padding mask
# ---------------------------------------------------------------------------------------------------------


def _show(row: Tensor) -> str:
    return "[" + ", ".join(str(bool(x)) if row.dtype == torch.bool else f"{x.item():g}" for x in row) + "]"


@exercise("2.3", "A padding mask from sequence lengths", section="Masking: keep attention off the padding",
          references=("attnbook.masks.padding_mask",))
def check_padding_mask(padding_mask) -> str:
    """padding_mask(lengths, max_len) -> bool (batch, max_len), True at the first lengths[b] positions."""
    cases = [
        ([3, 1, 4], 4, "lengths [3, 1, 4] and max_len=4 (the last sequence fills every position)"),
        ([0, 2], 3, "lengths [0, 2] and max_len=3 (an empty sequence)"),
        ([2], 5, "lengths [2] and max_len=5 (a batch of one)"),
        ([1, 2, 3, 4, 5], 7, "lengths [1, 2, 3, 4, 5] and max_len=7 (every sequence is padded)"),
        ([4, 4], 4, "lengths [4, 4] and max_len=4 (no padding at all)"),
        ([2, 0, 3], 3, "int32 lengths [2, 0, 3] and max_len=3"),
    ]
    for values, max_len, desc in cases:
        lengths = torch.tensor(values, dtype=torch.int32 if desc.startswith("int32") else torch.int64)
        got = call(padding_mask, lengths, max_len, what="padding_mask", on=desc, forbid=[
            (name, "compare positions with lengths: torch.arange(max_len)[None, :] against lengths[:, None]")
            for name in ("attnbook.masks.padding_mask",)])
        positions = torch.arange(max_len)
        ref = positions[None, :] < lengths[:, None]  # (batch, max_len), True at real tokens
        got = expect_tensor(got, what="your mask", on=desc, finite=False)
        batch = len(values)
        if tuple(got.shape) != (batch, max_len):
            hint = ("your mask is transposed: one row per sequence, one column per position"
                    if tuple(got.shape) == (max_len, batch) else None)
            raise Wrong(f"your mask has shape {tuple(got.shape)} on {desc}, expected (batch, max_len) = "
                        f"{(batch, max_len)}", hint)
        if got.dtype != torch.bool:
            zero_one = not got.is_complex() and bool(((got == 0) | (got == 1)).all())
            hint = ("compare, don't cast: `positions[None, :] < lengths[:, None]` is already a bool tensor "
                    "(or finish with .bool())" if zero_one else "a mask holds True/False: build it with a comparison")
            raise Wrong(f"your mask has dtype {got.dtype} on {desc}, expected torch.bool "
                        "(masks are boolean, True = real token)", hint)
        if torch.equal(got, ref):
            continue
        for hint, wrong in {
            "your mask is inverted: True must mark the real tokens (the first lengths[b] positions), "
            "False the padding": ~ref,
            "off by one: position p is a real token when p < length (positions count from 0), not p <= length":
                positions[None, :] <= lengths[:, None],
            "off by one: each row must have exactly lengths[b] True values; positions count from 0 "
            "(torch.arange(max_len))": positions[None, :] < lengths[:, None] - 1,
        }.items():
            if torch.equal(got, wrong):
                raise Wrong(f"your mask has the wrong values on {desc}", hint)
        row = int((got != ref).any(dim=1).nonzero()[0])
        raise Wrong(f"your mask has the wrong values on {desc}: row {row} (length {values[row]}) should be "
                    f"{_show(ref[row])}, got {_show(got[row])}")
    return f"right on {len(cases)} batches, including an empty sequence and one with no padding"


# ---------------------------------------------------------------------------------------------------------
# 2.4 the variance of a dot product
# ---------------------------------------------------------------------------------------------------------

# Tolerance. q.k = sum of d_k products q_i k_i, each with mean 0, variance 1 and fourth moment
# E[q_i^4] E[k_i^4] = 9, so E[(q.k)^4] = 3 d_k^2 + 6 d_k. The sample variance of N draws then has standard
# deviation sqrt((E[(q.k)^4] - d_k^2) / N) = d_k sqrt((2 + 6 / d_k) / N): relative 1.5% at d_k = 16 and 1.4% at
# 64 and 256 with N = 10,000. A 10% tolerance is more than 6.5 standard deviations, so a right answer fails
# with probability below 1e-9, whatever seed it uses.
_VARIANCE_RTOL = 0.10
_HINT_RTOL = 0.10  # how close an answer must be to a known mistake's value to get that mistake's hint


@exercise("2.4", "The variance of a dot product", section="Dot products grow with d_k")
def check_dot_product_variance(dot_product_variance) -> str:
    """dot_product_variance(d_k, n_samples=10_000) must return about d_k (within 10%) for several d_k."""
    dims = (64, 16, 256)
    exact = True
    for d_k in dims:
        on = f"d_k={d_k}"
        got = call(dot_product_variance, d_k, n_samples=10_000, what="dot_product_variance", on=on)
        value = _as_number(got, on)
        exact = exact and value == d_k
        if math.isfinite(value) and abs(value - d_k) <= _VARIANCE_RTOL * d_k:
            continue
        raise Wrong(f"dot_product_variance returned {value:.4g} for {on}, expected about {d_k} "
                    f"(within {_VARIANCE_RTOL:.0%})", _variance_hint(value, d_k))
    if exact:
        raise Wrong("dot_product_variance returned exactly d_k every time; the exercise asks you to measure it",
                    "draw n_samples random vectors q and k of size d_k, compute their dot products and return "
                    "the variance of those numbers")
    # The generators are seeded identically around each call, so an answer that uses n_samples gives
    # different numbers for different n_samples, and one that ignores it gives the same number twice.
    few, many = (_as_number(call(dot_product_variance, 64, n_samples=n, what="dot_product_variance",
                                 on=f"d_k=64, n_samples={n}"), f"d_k=64, n_samples={n}") for n in (2_000, 8_000))
    if few == many:
        raise Wrong("dot_product_variance returned exactly the same number for n_samples=2000 and n_samples=8000 "
                    "(with the random generators seeded the same way)",
                    "use the n_samples argument: draw n_samples pairs of vectors, not a fixed number of them")
    _check_small_samples_spread(dot_product_variance)
    return f"the measured variance of q.k is within {_VARIANCE_RTOL:.0%} of d_k for d_k = " + ", ".join(map(str, dims))


# With n_samples=8 and d_k=16 the measured variance has a relative standard deviation of
# sqrt((2 + 6/16) / 8) = 0.54 (see the tolerance comment above). Over 32 calls, an answer that really draws 8
# pairs shows a relative spread below 0.3 with probability about 1e-5 (chi-square with 31 degrees of freedom
# below 31 (0.3/0.54)^2 = 9.4). An answer that ignores n_samples and draws thousands of pairs shows a spread of
# a few percent. Each call gets its own seed, so an answer using the global generators varies from call to
# call; an answer with its own fixed seed returns one number every time and is judged by the test above instead.
_SPREAD_CALLS, _SPREAD_N, _SPREAD_MIN = 32, 8, 0.3


def _check_small_samples_spread(dot_product_variance) -> None:
    """Fail an answer whose results barely vary with n_samples=8: it draws far more pairs than it is told to."""
    on = f"d_k=16, n_samples={_SPREAD_N}"
    values = [_as_number(call(dot_product_variance, 16, n_samples=_SPREAD_N, what="dot_product_variance", on=on,
                              seed=1000 + i), on) for i in range(_SPREAD_CALLS)]
    if len(set(values)) == 1 or not all(math.isfinite(v) for v in values):
        return
    mean = sum(values) / len(values)
    spread = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) / abs(mean)
    if spread < _SPREAD_MIN:
        raise Wrong(f"with n_samples={_SPREAD_N}, {_SPREAD_CALLS} calls of dot_product_variance(16) gave results "
                    f"that vary by only {spread:.0%}; from {_SPREAD_N} pairs they should vary by about 50%",
                    "use the n_samples argument: draw n_samples pairs of vectors, not a fixed number of them")


def _as_number(got, on: str) -> float:
    """A Python float from a float, int, NumPy scalar or one-element tensor; else Wrong."""
    if not isinstance(got, (Tensor, numbers.Real)) and hasattr(got, "__array__"):  # NumPy array or scalar
        got = torch.as_tensor(got)
    if isinstance(got, Tensor):
        if got.numel() != 1:
            raise Wrong(f"dot_product_variance returned a tensor of shape {tuple(got.shape)} for {on}, expected "
                        "one number", "return the variance of all the dot products, e.g. `dots.var().item()`")
        return float(got.detach().double().item())
    if isinstance(got, bool) or not isinstance(got, numbers.Real):
        raise Wrong(f"dot_product_variance returned {describe(got)} for {on}, expected a float",
                    "return one number: the variance of the n_samples dot products")
    return float(got)


def _variance_hint(value: float, d_k: int) -> str | None:
    """A hint for the mistakes a returned `value` points to; None when it points to none of them."""
    if not math.isfinite(value):
        return "you need at least two samples for a variance, and finite numbers in every vector"
    if abs(value) < 0.3:
        return "that looks like the mean of q.k (about 0), not its variance: use .var()"
    uniform = 7 / 144  # Var(x y) for x, y ~ U(0, 1): E[x^2] E[y^2] - (E[x] E[y])^2 = 1/9 - 1/16
    known = [
        (1.0, "about 1 is the variance of one product q_i k_i, or of the scaled q.k / sqrt(d_k); sum the d_k "
              "products into one dot product per pair and do not scale it"),
        (math.sqrt(d_k), "that is the standard deviation of q.k (about sqrt(d_k)); return the variance (.var(), "
                         "or the standard deviation squared)"),
        (2 * d_k, "about 2 d_k is the variance of q.q: draw k independently of q, not k = q"),
        (uniform * d_k, "that is what uniform entries in [0, 1) give (torch.rand); draw the entries from a "
                        "standard normal distribution with torch.randn"),
        (d_k / 4, "that is the mean of q.k for uniform entries (torch.rand): use torch.randn, and return the "
                  "variance, not the mean"),
        (d_k * d_k, "about d_k^2: you multiplied by d_k, or summed squared dot products without dividing by "
                    "n_samples"),
    ]
    best = min(known, key=lambda c: abs(value / c[0] - 1))
    return best[1] if abs(value / best[0] - 1) <= _HINT_RTOL else None

