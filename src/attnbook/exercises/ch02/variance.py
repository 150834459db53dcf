"""Checker for exercise 2.4, the variance of a dot product, and its statistics."""
from __future__ import annotations

import bisect
import math
import numbers

from torch import Tensor

from ..compare import case_seed
from ..guard import call, call_many
from ..hints import describe
from ..registry import exercise, Wrong
from ...i18n import N_, _


# The check calls the answer many times, each call with the random generators seeded anew (`_seed`, drawn from the
# run's seed), and tests what a measured variance must do:
#   A. accuracy: within VARIANCE_RTOL of d_k for d_k in VARIANCE_DIMS with VARIANCE_N pairs (the task's promise);
#   B. fresh draws: SPREAD_CALLS calls of (SPREAD_D, VARIANCE_N) give different numbers, each within SPREAD_RTOL of
#      SPREAD_D. One q shared by all the pairs gives |q|^2 (chi-square with 1 degree of freedom) times about 1;
#   C. n_samples used: n_samples=2000 and 8000 under one seed give different numbers;
#   D. shape: SHAPE_CALLS calls of (SHAPE_DK, SHAPE_N) = (64, 2), whose results must have the exact distribution of
#      the variance of 2 dot products, on both sides. With x1, x2 the two dot products, the sum of squared
#      deviations is (x1 - x2)^2 / 2; given the queries, x1 - x2 is normal with variance R = |q1|^2 + |q2|^2
#      (chi-square with 2 d_k degrees of freedom), so u = (x1 - x2)^2 / (2 d_k) = (R / (2 d_k)) Z^2, Z standard
#      normal: a distribution known exactly (one integral over R), the same for every generator. The task allows
#      two divisors m (n_samples - 1 or n_samples), and result * m / d_k is that u for either. The results are
#      binned at SHAPE_EDGES (in u, for each m) and three scores add integer weights per bin over the calls, each
#      8 times the log-likelihood ratio (rounded) of a bin under a wrong distribution against the right one:
#        "down": the results halved (scale 1/2): too many small results, too few large ones;
#        "shape": the mean of the squares, (x1^2 + x2^2) / 2, whose distribution has the same mean but far fewer
#                 results near 0 (x1 and x2 are rarely both small, while x1 - x2 often is);
#        "up": the results doubled.
#      A divisor m fits when no score exceeds its SHAPE_LIMITS entry; the answer passes D when one of the two fits.
#      A result below -SHAPE_NEGATIVE * d_k (a rounding error of E[x^2] - E[x]^2 in float32 aside), NaN or inf fails.
#      D stops after SHAPE_EARLY calls whose results all lie within 10% of d_k (an answer that ignores n_samples,
#      slow when it draws many pairs): a right result lies there with probability below 0.07 (either divisor).
# False-fail rate, from these parameters in tests/test_exercises_ch02.py (test_2_4_false_fail_rate): A and B by
# truncated Chernoff bounds on the mean of the squared dot products and on their mean (every call, union bound);
# D exactly: each score is a sum of SHAPE_CALLS independent draws of the weight of a bin, whose probabilities under
# the right distribution are integrals, and its distribution the SHAPE_CALLS-fold convolution; D fails a right answer
# only if a score exceeds its limit under the answer's own divisor (union bound of the three tails: down 1.9e-7,
# shape 9.6e-8, up 2.8e-8), or stops early (below 0.07^16 < 1e-18). C and the identical-results test cannot fail a
# right answer. Per pass below 3.8e-7 (A 5.9e-9, B 5.3e-8, D 3.14e-7), both passes of the check together below
# 7.5e-7 (< 1e-6). (Rounding of a float32 answer moves a result across a bin edge on rare calls, by a part in 10^6
# of its value.)
# Power (test_2_4_power; a wrong answer passes the check only if both passes pass, so the check lets it through with
# the square of the per-pass probability):
#   - 0.0 for small n_samples, or n_samples // 2 pairs (one pair: variance 0): never passes (every result in the
#     lowest bin: "down" is SHAPE_CALLS * 3 under both divisors);
#   - the mean of the squared dot products, divisor n or n - 1 (float32 or float64): passes a pass with probability
#     below 5.7e-9 (n) and 1e-9 (n - 1); n_samples + 1 pairs and divisor n_samples: below 3.5e-9;
#   - the sum of the per-coordinate variances (the same as the right answer for d_k = 1; at d_k = 64 its results
#     stay near 64 or 32): below 1e-50 (a Chernoff bound, on bin probabilities from a simulation);
#   - the variance dividing by n_samples, halved for small n_samples (scale 1/8 at n = 2): below 1.5e-5 per pass,
#     2.2e-10 for the check;
#   - NOT CAUGHT reliably: dividing by n_samples + 1 (scale 1/6 at n = 2, 2/3 of the divisor-n result) passes a pass
#     with probability about 0.46 (0.21 for the check): a factor 3/2 in scale cannot be told from the right factors 1
#     and 2 by SHAPE_CALLS results of 1 degree of freedom each at this false-fail rate. Larger n_samples would not
#     help (the gap n / (n + 1) shrinks as fast as the results sharpen), more calls would: with 1,000 calls a pass
#     (and new limits) it would pass with probability about 1e-4, beyond the check's budget of about 400 calls.
#   - one q against n_samples keys passes B with probability at most 5.3e-8 per pass (each call lands within 25% of
#     1 with probability 0.123); d_k plus Gaussian noise of any spread, scaled by n_samples or not, and d_k plus
#     uniform noise of any width, pass D with probability below 1e-15 per pass, the absolute value of d_k plus
#     Gaussian noise below 2e-7 (Chernoff bounds over a grid of spreads; about 1e-8 at its worst spread, exactly);
#     a fixed seed, a cache or a formula returns the same number on every call and always fails B; an answer that
#     ignores n_samples returns the same number for 2000 and 8000 pairs under one seed and always fails C (or,
#     drawing its own unseeded numbers, stays within 10% of d_k for n_samples=2 and fails D); the catalogue's other
#     wrong answers (the standard deviation, the mean, uniform entries, k = q, a scale, sizes swapped) are 50% or
#     more away from d_k, tens of standard deviations, and fail A on every draw.
VARIANCE_DIMS, VARIANCE_N, VARIANCE_RTOL = (64, 16, 256), 10_000, 0.10
SPREAD_D, SPREAD_CALLS, SPREAD_RTOL = 1, 8, 0.25
SHAPE_CALLS, SHAPE_DK, SHAPE_N, SHAPE_NEGATIVE, SHAPE_EARLY = 384, 64, 2, 1e-3, 16
SHAPE_EDGES = (0.001, 0.003, 0.01, 0.02, 0.04, 0.08, 0.15, 0.25, 0.4, 0.6, 0.85, 1.2, 1.7, 2.4, 3.4, 5.0, 7.5)
SHAPE_WEIGHTS = {  # one weight per bin: below SHAPE_EDGES[0], between two edges, at or above SHAPE_EDGES[-1]
    "down": (3, 3, 3, 3, 3, 3, 2, 2, 1, 1, 0, -1, -3, -5, -8, -13, -20, -30),
    "shape": (-26, -18, -13, -9, -7, -4, -2, 0, 2, 3, 3, 3, 3, 2, 0, -3, -8, -17),
    "up": (-3, -3, -3, -3, -3, -3, -3, -2, -2, -2, -1, -1, 0, 1, 3, 5, 9, 17),
}
SHAPE_LIMITS = {"down": 73, "shape": -12, "up": 6}  # a score above its limit rules the divisor out
# For the messages only (they decide no verdict): for the right answer at (SHAPE_DK, SHAPE_N), dividing by
# n_samples - 1 and by n_samples, the share of results below SHAPE_SMALL and the median result
SHAPE_SMALL, SHAPE_SMALL_SHARE, SHAPE_MEDIAN = 1.0, (0.100, 0.141), (28.83, 14.41)
_HINT_RTOL = 0.10  # how close an answer must be to a known mistake's value to get that mistake's hint
_FRESH = N_("draw new random numbers on every call: use torch.randn (or NumPy's or Python's random functions), "
            "which the check seeds anew before each call, without fixing a seed inside your function, and keep no "
            "results from earlier calls")
_ONE_Q = N_("your results vary from call to call far more than the variance of 10000 dot products does, as when a "
            "single q (or k) is shared by all the pairs: draw n_samples independent pairs, a new q and a new k for "
            "each")


def _seed(k: int) -> int:
    """The seed of the answer's k-th call: a new one in every run (compare.case_seed), and within NumPy's range."""
    return case_seed(2400 + k) % 2 ** 32


def _measure(dot_product_variance, d_k: int, n: int, k: int) -> float:
    on = f"d_k={d_k}, n_samples={n}"
    return _as_number(call(dot_product_variance, d_k, n_samples=n, what="dot_product_variance", on=on,
                           seed=_seed(k)), on)


def _measure_many(dot_product_variance, d_k: int, n: int, ks) -> list[float]:
    """_measure for each k in `ks`, the calls sent together (guard.call_many)."""
    on = f"d_k={d_k}, n_samples={n}"
    return [_as_number(got, on) for got in call_many(dot_product_variance, d_k, n_samples=n, on=on,
                                                      what="dot_product_variance", seeds=[_seed(k) for k in ks])]


@exercise("2.4", "The variance of a dot product", answer_name="dot_product_variance",
          section="Dot products grow with d_k")
def check_dot_product_variance(dot_product_variance) -> str:
    """dot_product_variance(d_k, n_samples=10_000) must return a Python float within 10% of d_k for several d_k,
    from new random draws on every call, distributed as the variance of n_samples dot products is."""
    # A. every d_k first: a mistake is named only if it explains all three results
    values = [_measure(dot_product_variance, d_k, VARIANCE_N, i) for i, d_k in enumerate(VARIANCE_DIMS)]
    spread = _measure_many(dot_product_variance, SPREAD_D, VARIANCE_N, range(10, 10 + SPREAD_CALLS))
    if all(math.isfinite(v) for v in spread) and min(spread) > 0 and max(spread) > 1.5 * min(spread) \
            and any(abs(v - SPREAD_D) > SPREAD_RTOL * SPREAD_D for v in spread):
        wild = _(_ONE_Q)  # B's results vary by a factor 1.5 or more: that explains A's results too
    else:
        wild = None
    for d_k, value in zip(VARIANCE_DIMS, values):
        if math.isfinite(value) and abs(value - d_k) <= VARIANCE_RTOL * d_k:
            continue
        raise Wrong(_("dot_product_variance returned {value:.4g} for d_k={d_k}, expected about {d_k} (within "
                      "{_VARIANCE_RTOL:.0%})", value=value, d_k=d_k, _VARIANCE_RTOL=VARIANCE_RTOL),
                    wild or _variance_hint(values, VARIANCE_DIMS))
    if all(value == d_k for value, d_k in zip(values, VARIANCE_DIMS)):
        raise Wrong(_("dot_product_variance returned exactly d_k every time; the exercise asks you to measure it"),
                    _("draw n_samples random vectors q and k of size d_k, compute their dot products and return "
                      "the variance of those numbers"))
    # B. new draws on every call, and the spread of 10,000 pairs' variance
    if len(set(spread)) == 1:
        raise Wrong(_("dot_product_variance(1) returned the same number, {value:.6g}, on all {calls} calls (the random "
                      "generators were seeded differently for each call)", value=spread[0], calls=SPREAD_CALLS),
                    _(_FRESH))
    for value in spread:
        if not (math.isfinite(value) and abs(value - SPREAD_D) <= SPREAD_RTOL * SPREAD_D):
            raise Wrong(_("dot_product_variance returned {value:.4g} for d_k=1 on one of {calls} calls, expected "
                          "within {rtol:.0%} of 1 (10000 pairs measure it to about 3%)",
                          value=value, calls=SPREAD_CALLS, rtol=SPREAD_RTOL), wild)
    # C. The generators are seeded identically around these two calls, so an answer that uses n_samples gives
    # different numbers for different n_samples, and one that ignores it gives the same number twice.
    few, many = (_measure(dot_product_variance, 64, n, 20) for n in (2_000, 8_000))
    if few == many:
        raise Wrong(_("dot_product_variance returned exactly the same number for n_samples=2000 and n_samples=8000 "
                      "(with the random generators seeded the same way)"),
                    _("use the n_samples argument: draw n_samples pairs of vectors, not a fixed number of them"))
    _check_small_samples(dot_product_variance)
    return _("the measured variance of q.k is within {_VARIANCE_RTOL:.0%} of d_k for d_k = ",
             _VARIANCE_RTOL=VARIANCE_RTOL) + ", ".join(map(str, VARIANCE_DIMS))


def _shape_scores(values: list[float], divisor: int) -> dict[str, int]:
    """D's three scores of `values` (results of (SHAPE_DK, SHAPE_N)) for an answer dividing by `divisor`."""
    bins = [bisect.bisect_right(SHAPE_EDGES, v * divisor / SHAPE_DK) for v in values]
    return {name: sum(weights[b] for b in bins) for name, weights in SHAPE_WEIGHTS.items()}


def _shape_fits(values: list[float]) -> bool:
    """True if the results have the distribution of the variance of SHAPE_N dot products of size SHAPE_DK, dividing
    by n_samples - 1 or by n_samples (see D above)."""
    return any(all(score <= SHAPE_LIMITS[name] for name, score in _shape_scores(values, divisor).items())
               for divisor in (SHAPE_N - 1, SHAPE_N))


def _check_small_samples(dot_product_variance) -> None:
    """D: the results for n_samples=2 must have the distribution of the variance of 2 dot products (see above)."""
    d_k, n, calls = SHAPE_DK, SHAPE_N, SHAPE_CALLS
    values = _measure_many(dot_product_variance, d_k, n, range(100, 100 + SHAPE_EARLY))
    if not all(abs(v - d_k) <= 0.1 * d_k for v in values):  # else an answer that ignores n_samples (and may be
        values += _measure_many(dot_product_variance, d_k, n, range(100 + SHAPE_EARLY, 100 + calls))  # slow)
    bad = [v for v in values if not (math.isfinite(v) and v >= -SHAPE_NEGATIVE * d_k)]
    if bad:
        if not math.isfinite(bad[0]):
            raise Wrong(_("with n_samples={n}, dot_product_variance({d_k}) returned {value}", n=n, d_k=d_k,
                          value=bad[0]),
                        _("the variance of 2 finite numbers is a finite number: draw exactly n_samples pairs (not "
                          "fewer), and divide the sum of squared differences from the mean by n_samples or "
                          "n_samples - 1"))
        raise Wrong(_("with n_samples={n}, dot_product_variance({d_k}) returned {value:.4g}", n=n, d_k=d_k,
                      value=bad[0]),
                    _("a variance is an average of squares, never negative: return the variance of the n_samples "
                      "dot products you drew"))
    if len(values) == calls and _shape_fits(values):
        return
    # The verdict is taken; what follows only chooses the message, from what the results show.
    zeros = sum(v == 0 for v in values)
    ordered = sorted(values)
    median = ordered[len(ordered) // 2]
    small = sum(v < SHAPE_SMALL for v in values)
    if 2 * zeros > calls:
        raise Wrong(_("with n_samples={n}, dot_product_variance({d_k}) returned 0.0 on {zeros} of {calls} calls",
                      n=n, d_k=d_k, zeros=zeros, calls=calls),
                    _("two dot products are almost never equal, so their variance is almost never 0: draw n_samples "
                      "pairs (not fewer), compute their n_samples dot products and return the variance of those "
                      "numbers, the same way whatever n_samples is"))
    if all(abs(v - d_k) <= 0.1 * d_k for v in values):
        raise Wrong(_("with n_samples={n}, all {calls} results of dot_product_variance({d_k}) lay within 10% of "
                      "{d_k}", n=n, calls=len(values), d_k=d_k),
                    _("the variance of only 2 dot products varies a lot from call to call, and is often close to 0: "
                      "draw exactly n_samples pairs, and return the variance you measure on them"))
    if ordered[0] >= 0.1 * median > 0:
        raise Wrong(_("with n_samples={n}, the {calls} results of dot_product_variance({d_k}) barely vary between "
                      "calls: all lie between {low:.3g} and {high:.3g}", n=n, calls=calls, d_k=d_k, low=ordered[0],
                      high=ordered[-1]),
                    _("the variance of only 2 dot products is often close to 0 and sometimes several times d_k: are "
                      "you adding up the variances of the d_k coordinates? Compute one dot product per pair (a sum "
                      "over its d_k coordinates), then the variance of those n_samples numbers"))
    if small < 0.75 * calls * SHAPE_SMALL_SHARE[0]:
        raise Wrong(_("with n_samples={n}, only {small} of {calls} results of dot_product_variance({d_k}) were below "
                      "{limit:g}, while the variance of 2 dot products of size {d_k} is below {limit:g} on about "
                      "{share_n1:.0%} of calls (dividing by n_samples - 1) to {share_n:.0%} (dividing by n_samples)",
                      n=n, small=small, calls=calls, d_k=d_k, limit=SHAPE_SMALL, share_n1=SHAPE_SMALL_SHARE[0],
                      share_n=SHAPE_SMALL_SHARE[1]),
                    _("two dot products that happen to be close give a variance close to 0: return the variance of "
                      "exactly n_samples dot products, the average of their squared differences from their own "
                      "mean"))
    size = None
    if median < 0.8 * SHAPE_MEDIAN[1]:
        size = _("with n_samples={n}, the results of dot_product_variance({d_k}) are too small: their median over "
                 "{calls} calls is {median:.3g}, while the variance of 2 dot products of size {d_k} has a median of "
                 "about {median_n:.3g} dividing by n_samples ({median_n1:.3g} dividing by n_samples - 1)",
                 n=n, d_k=d_k, calls=calls, median=median, median_n=SHAPE_MEDIAN[1], median_n1=SHAPE_MEDIAN[0])
    elif median > 1.25 * SHAPE_MEDIAN[0]:
        size = _("with n_samples={n}, the results of dot_product_variance({d_k}) are too large: their median over "
                 "{calls} calls is {median:.3g}, while the variance of 2 dot products of size {d_k} has a median of "
                 "about {median_n1:.3g} dividing by n_samples - 1 ({median_n:.3g} dividing by n_samples)",
                 n=n, d_k=d_k, calls=calls, median=median, median_n=SHAPE_MEDIAN[1], median_n1=SHAPE_MEDIAN[0])
    if size is not None:
        raise Wrong(size, _("divide the sum of the squared differences from the mean by n_samples or n_samples - 1, "
                            "with no other factor, the same way whatever n_samples is"))
    raise Wrong(_("with n_samples={n}, the {calls} results of dot_product_variance({d_k}) do not have the "
                  "distribution of the variance of 2 dot products of size {d_k}: {small} were below {limit:g} (about "
                  "{share_n1:.0%} to {share_n:.0%} of calls are) and their median is {median:.3g} (about "
                  "{median_n:.3g} to {median_n1:.3g})", n=n, calls=calls, d_k=d_k, small=small, limit=SHAPE_SMALL,
                  share_n1=SHAPE_SMALL_SHARE[0], share_n=SHAPE_SMALL_SHARE[1], median=median,
                  median_n=SHAPE_MEDIAN[1], median_n1=SHAPE_MEDIAN[0]),
                _("draw n_samples new pairs of vectors with independent standard normal entries on every call, and "
                  "return the variance of their n_samples dot products"))


_FLOAT_ONLY = N_("a Python float (end with .item() on a one-element tensor, or convert with float(...))")


def _as_number(got, on: str) -> float:
    """The value of a Python float (NumPy's float64 is one), the kind the task asks for; else Wrong."""
    fn = "dot_product_variance"
    if got is None:
        raise Wrong(_("{fn} returned None for {on}, expected a float", fn=fn, on=on),
                    _("did you forget the `return` statement?"))
    if isinstance(got, float):
        return float(got)
    if isinstance(got, Tensor):
        if got.numel() != 1:
            raise Wrong(_("{fn} returned a tensor of shape {tuple_got_shape} for {on}, expected one number",
                          fn=fn, tuple_got_shape=tuple(got.shape), on=on),
                        _("return the variance of all the dot products, one number, as a Python float (.item())"))
        raise Wrong(_("{fn} returned a tensor (shape {tuple_got_shape}, dtype {dtype}) for {on}, expected "
                      "{_FLOAT_ONLY}", fn=fn, tuple_got_shape=tuple(got.shape), dtype=got.dtype, on=on,
                      _FLOAT_ONLY=_(_FLOAT_ONLY)),
                    _("the task asks for a float: convert the one-element tensor with .item()"))
    if isinstance(got, bool):
        raise Wrong(_("{fn} returned the bool {got} for {on}, expected a float", fn=fn, got=got, on=on),
                    _("return the variance of the n_samples dot products, one number"))
    if isinstance(got, numbers.Integral):
        raise Wrong(_("{fn} returned the int {int_got} for {on}, expected a float", fn=fn, int_got=int(got), on=on),
                    _("do not round or convert to int: return the measured variance itself, as a float"))
    if hasattr(got, "__array__"):  # a NumPy scalar other than float64, or an array
        size = getattr(got, "size", 1)
        if size != 1:
            raise Wrong(_("{fn} returned {describe_got} of {size} numbers for {on}, expected one number",
                          fn=fn, describe_got=describe(got), size=size, on=on),
                        _("return the variance of all the dot products, one number, as a Python float"))
        raise Wrong(_("{fn} returned {describe_got} (a NumPy {getattr_got_dtype_number}) for {on}, expected "
                      "{_FLOAT_ONLY}", fn=fn, describe_got=describe(got),
                      getattr_got_dtype_number=getattr(got, 'dtype', 'number'),
                      on=on, _FLOAT_ONLY=_(_FLOAT_ONLY)), _("the task asks for a float: convert it with float(...)"))
    if isinstance(got, numbers.Real):
        raise Wrong(_("{fn} returned {describe_got} for {on}, expected {_FLOAT_ONLY}", fn=fn,
                      describe_got=describe(got), on=on, _FLOAT_ONLY=_(_FLOAT_ONLY)), _("convert it with float(...)"))
    raise Wrong(_("{fn} returned {describe_got} for {on}, expected a float",
                  fn=fn, describe_got=describe(got), on=on),
                _("return one number: the variance of the n_samples dot products"))


def _variance_mistakes(d_k: int, n: int = 10_000) -> list[tuple[str, float, float]]:
    """(hint, the value that mistake gives about, how far off it may be) for d_k and n samples."""
    uniform = 7 / 144  # Var(x y) for x, y ~ U(0, 1): E[x^2] E[y^2] - (E[x] E[y])^2 = 1/9 - 1/16
    r = _HINT_RTOL
    return [
        (_("that looks like the mean of q.k (about 0), not its variance: use .var()"), 0.0, 6 * math.sqrt(d_k / n)),
        (_("about 1 is the variance of one product q_i k_i, or of the scaled q.k / sqrt(d_k); sum the d_k "
           "products into one dot product per pair and do not scale it"), 1.0, r),
        (_("that is the standard deviation of q.k (about sqrt(d_k)); return the variance (.var(), or the standard "
           "deviation squared)"), math.sqrt(d_k), r * math.sqrt(d_k)),
        (_("about 2 d_k is the variance of q.q: draw k independently of q, not k = q"), 2 * d_k, r * 2 * d_k),
        (_("that is what uniform entries in [0, 1) give (torch.rand); draw the entries from a standard normal "
           "distribution with torch.randn"), uniform * d_k, r * uniform * d_k),
        (_("that is the mean of q.k for uniform entries (torch.rand): use torch.randn, and return the variance, "
           "not the mean"), d_k / 4, r * d_k / 4),
        (_("about d_k^2: you multiplied by d_k, or summed squared dot products without dividing by n_samples"),
         d_k * d_k, r * d_k * d_k),
    ]


def _variance_hint(values: list[float], dims: tuple[int, ...]) -> str | None:
    """The hint of a mistake that explains the results for every d_k; None when no mistake does."""
    if not all(math.isfinite(v) for v in values):
        return _("you need at least two samples for a variance, and finite numbers in every vector")
    # d_k pairs of vectors of size n_samples: about n_samples whatever d_k, from only d_k numbers (the sample
    # variance of 16 normal numbers lies within a factor 0.2 to 2.5 of the truth with probability above 0.998)
    if all(0.2 * 10_000 <= v <= 2.5 * 10_000 for v in values):
        return (_("about n_samples = 10000 whatever d_k: you drew d_k pairs of vectors of size n_samples; draw "
                  "n_samples pairs of vectors of size d_k"))
    per_dim = [_variance_mistakes(d_k) for d_k in dims]
    for j, (hint, _unused, _unused) in enumerate(per_dim[0]):
        if all(abs(v - mistakes[j][1]) <= mistakes[j][2] for v, mistakes in zip(values, per_dim)):
            return hint
    return None
