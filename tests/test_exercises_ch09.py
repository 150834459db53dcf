"""Chapter 9 checkers: the book's reference solutions pass; plausible wrong answers fail with the right hint."""
import math
import statistics
import time

import numpy as np
import pytest
import torch

from attnbook.exercises import check

# ---------------------------------------------------------------------------------------------------------
# 9.1 online softmax over blocks
# ---------------------------------------------------------------------------------------------------------


def test_9_1_reference_passes(solutions):
    result = check("9.1", solutions(9)["online_softmax"])
    assert result.passed, result.message


def test_9_1_not_attempted():
    def online_softmax(blocks):
        raise NotImplementedError("replace this line with your code")

    assert check("9.1", online_softmax).status == "not attempted"


def streaming(*, rescale_sum=True, common_max=True, rescale_at_end=True, per_block=False, shift=True,
              empty_max_zero=False, guard_inf=True):
    """An online softmax written with plain Python floats and one deliberate mistake (defaults: correct)."""

    def online_softmax(blocks):
        if per_block:  # each block normalised on its own
            outs = []
            for b in blocks:
                e = torch.exp(b - b.max()) if b.numel() else b
                outs.append(e / e.sum() if b.numel() else b)
            return torch.cat(outs)
        if not shift:
            e = torch.cat([torch.exp(b) for b in blocks])
            return e / e.sum()
        if not common_max:
            e = torch.cat([torch.exp(b - b.max()) for b in blocks if b.numel()])
            return e / e.sum()
        m, l, terms = -math.inf, 0.0, []
        for b in blocks:
            if b.numel() == 0:
                if empty_max_zero:
                    m = max(m, 0.0)
                    terms.append((b, m))
                continue
            m_new = max(m, b.max().item())
            if guard_inf and m_new == -math.inf:
                terms.append((b, 0.0))
                continue
            factor = math.exp(m - m_new) if rescale_sum else 1.0
            l = l * factor + torch.exp(b - m_new).sum().item()
            m = m_new
            terms.append((b, m))
        if rescale_at_end:
            return torch.cat([torch.exp(b - m) for b in blocks]) / l
        return torch.cat([torch.exp(b - mb) for b, mb in terms]) / l

    return online_softmax


def test_9_1_a_correct_variant_passes():
    assert check("9.1", streaming()).passed


@pytest.mark.parametrize(
    "kwargs, hint",
    [
        ({"rescale_sum": False}, "multiply it by exp(m_old - m_new)"),
        ({"common_max": False}, "shifted by its own maximum"),
        ({"rescale_at_end": False}, "with the final maximum m"),
        ({"per_block": True}, "normalised each block on its own"),
        ({"shift": False}, "overflows to inf"),
        ({"empty_max_zero": True}, "treating it as 0"),
        ({"guard_inf": False}, "exp(-inf - (-inf)) is NaN"),
    ],
    ids=lambda x: str(x) if isinstance(x, dict) else "",
)
def test_9_1_wrong_answers_get_hints(kwargs, hint):
    result = check("9.1", streaming(**kwargs))
    assert not result.passed, kwargs
    assert hint in result.message, (kwargs, result.message)
    assert 'Re-read "How online softmax works"' in result.message


def test_9_1_messages_name_the_input():
    assert "3 blocks of sizes 3, 4 and 2" in check("9.1", streaming(rescale_sum=False)).message
    assert "+-1000" in check("9.1", streaming(shift=False)).message


def test_9_1_empty_block_that_crashes_gets_a_hint():
    def online_softmax(blocks):  # b.max() of an empty block raises
        m, l = -math.inf, 0.0
        for b in blocks:
            m_new = max(m, b.max().item())
            l = l * math.exp(m - m_new) + torch.exp(b - m_new).sum().item()
            m = m_new
        return torch.cat([torch.exp(b - m) for b in blocks]) / l

    result = check("9.1", online_softmax)
    assert not result.passed and "empty block" in result.message and "skip" in result.message, result.message


def test_9_1_list_of_blocks_is_refused_with_a_cat_hint():
    def online_softmax(blocks):
        x = torch.cat(blocks)
        e = torch.exp(x - x.max())
        w = e / e.sum()
        return list(w.split([b.numel() for b in blocks]))

    result = check("9.1", online_softmax)
    assert not result.passed and "torch.cat" in result.message, result.message


@pytest.mark.parametrize("shortcut", [
    lambda x: torch.softmax(x, dim=-1),
    lambda x: x.softmax(-1),
    lambda x: torch.nn.functional.softmax(x, dim=0),
    lambda x: torch.exp(torch.log_softmax(x, dim=-1)),
    lambda x: torch.exp(x - torch.logsumexp(x, dim=-1)),
    lambda x: torch.nn.Softmax(dim=-1)(x),
], ids=["torch.softmax", "Tensor.softmax", "F.softmax", "log_softmax", "logsumexp", "nn.Softmax"])
def test_9_1_library_softmax_is_refused(shortcut):
    def online_softmax(blocks):
        return shortcut(torch.cat(blocks))

    result = check("9.1", online_softmax)
    assert not result.passed and "the task asks you to write this without" in result.message, result.message


def test_9_1_package_softmax_is_refused():
    def online_softmax(blocks):
        from attnbook import softmax

        return softmax(torch.cat(blocks))

    result = check("9.1", online_softmax)
    assert not result.passed and "without attnbook.attention.softmax" in result.message, result.message


def test_9_1_in_place_changes_are_reported():
    def online_softmax(blocks):
        m = max(b.max().item() for b in blocks if b.numel())
        for b in blocks:
            b.sub_(m)  # changes the caller's blocks
        e = torch.cat([torch.exp(b) for b in blocks])
        return e / e.sum()

    result = check("9.1", online_softmax)
    assert not result.passed and "in place" in result.message, result.message


def test_9_1_two_pass_answer_with_float64_output_passes():
    def online_softmax(blocks):  # not streaming, but right: the check can only see the result
        x = torch.cat([b.double() for b in blocks])
        finite = x[torch.isfinite(x)]
        e = torch.exp(x - finite.max())
        return e / e.sum()

    assert check("9.1", online_softmax).passed


# ---------------------------------------------------------------------------------------------------------
# 9.2 FLOPs and bytes of attention
# ---------------------------------------------------------------------------------------------------------


def test_9_2_reference_passes(solutions):
    result = check("9.2", solutions(9)["attention_cost"])
    assert result.passed, result.message


def test_9_2_not_attempted():
    def attention_cost(batch, heads, n, d_head, bytes_per_el):
        raise NotImplementedError

    assert check("9.2", attention_cost).status == "not attempted"


def test_9_2_numpy_and_tensor_integers_pass():
    def attention_cost(batch, heads, n, d_head, bytes_per_el):
        pairs = np.int64(batch) * heads * n * n
        return pairs * 4 * d_head, torch.tensor(int(pairs) * bytes_per_el)

    assert check("9.2", attention_cost).passed


@pytest.mark.parametrize(
    "fn, hint",
    [
        (lambda b, h, n, d, e: (2 * b * h * n * n * d, b * h * n * n * e), "that is 2·B·H·N²·d"),
        (lambda b, h, n, d, e: (b * h * n * n * d, b * h * n * n * e), "that is B·H·N²·d"),
        (lambda b, h, n, d, e: (4 * b * h * n * d * d, b * h * n * n * e), "not 4·B·H·N·d²"),
        (lambda b, h, n, d, e: (4 * b * h * n * d, b * h * n * e), "N² pairs, not N"),
        (lambda b, h, n, d, e: (4 * b * n * n * d, b * n * n * e), "number of heads"),
        (lambda b, h, n, d, e: (4 * h * n * n * d, h * n * n * e), "batch size"),
        (lambda b, h, n, d, e: (2 * b * h * n * (n + 1) * d, b * h * n * n * e), "causal pairs"),
        (lambda b, h, n, d, e: (4 * b * h * n * n * d, 8 * b * h * n * n * e), "size in bits"),
        (lambda b, h, n, d, e: (4 * b * h * n * n * d, b * h * n * n), "multiply the number of entries by"),
        (lambda b, h, n, d, e: (4 * b * h * n * n * d, b * h * n * n * d * e), "not N × N × d_head"),
        (lambda b, h, n, d, e: (4 * b * h * n * n * d, 2 * b * h * n * n * e), "count one (B, H, N, N) matrix"),
        (lambda b, h, n, d, e: (b * h * n * n * e, 4 * b * h * n * n * d), "`return flops, score_bytes`"),
        (lambda b, h, n, d, e: (4 * b * h * n * n * d * e, b * h * n * n * e), "leave bytes_per_el out"),
        (lambda b, h, n, d, e: (4 * b * h * n * n * d + 5 * b * h * n * n, b * h * n * n * e),
         "softmax and the scaling are not counted"),
        (lambda b, h, n, d, e: (4.0 * b * h * n ** 2 * d, b * h * n * n * e), "integer arithmetic"),
        (lambda b, h, n, d, e: (4 * b * h * math.pow(n, 2) * d, b * h * n * n * e), "math.pow"),
        (lambda b, h, n, d, e: 4 * b * h * n * n * d, "expected a tuple (flops, score_bytes)"),
    ],
    ids=["one-product", "macs-one-product", "d-squared", "N-not-N2", "no-heads", "no-batch", "causal", "bits",
         "no-bytes", "times-d", "scores-and-weights", "swapped", "flops-times-bytes", "softmax-counted",
         "float", "math-pow", "only-flops"],
)
def test_9_2_wrong_answers_get_hints(fn, hint):
    result = check("9.2", fn)
    assert not result.passed
    assert hint in result.message, result.message
    assert "batch=3, heads=5, n=7, d_head=5, bytes_per_el=4" in result.message  # the first input names itself


def test_9_2_package_functions_are_refused():
    def attention_cost(batch, heads, n, d_head, bytes_per_el):
        from attnbook.timing import attention_flops, score_matrix_bytes

        return attention_flops(batch, heads, n, n, d_head), score_matrix_bytes(batch, heads, n, n, torch.float16)

    result = check("9.2", attention_cost)
    assert not result.passed and "without attnbook.timing.attention_flops" in result.message, result.message


# ---------------------------------------------------------------------------------------------------------
# 9.3 a timing function
# ---------------------------------------------------------------------------------------------------------


def test_9_3_reference_passes_quickly(solutions):
    start = time.perf_counter()
    result = check("9.3", solutions(9)["time_it"])
    assert result.passed, result.message
    assert time.perf_counter() - start < 3.0


def test_9_3_not_attempted():
    def time_it(fn, n_warmup=3, n_runs=10):
        raise NotImplementedError

    assert check("9.3", time_it).status == "not attempted"


def timer(*, warmup=True, n_warmup_fixed=None, n_runs_fixed=None, stat="median", unit=1.0, time_warmup=False,
          clock=time.perf_counter, returns=None, extra_call=False, sync=False):
    """A time_it with one deliberate mistake (the defaults give a correct one)."""

    def time_it(fn, n_warmup=3, n_runs=10):
        n_warmup = n_warmup_fixed if n_warmup_fixed is not None else n_warmup
        n_runs = n_runs_fixed if n_runs_fixed is not None else n_runs
        times = []
        for _ in range(n_warmup if warmup else 0):
            start = clock()
            fn()
            if time_warmup:
                times.append(clock() - start)
        for _ in range(n_runs):
            if sync:
                torch.cuda.synchronize()  # unguarded: fails without a GPU
            start = clock()
            fn()
            times.append(clock() - start)
        if extra_call:
            fn()
        if returns == "list":
            return times
        value = {"median": statistics.median, "mean": statistics.mean, "min": min, "max": max,
                 "sum": sum}[stat](times)
        return value * unit

    return time_it


def test_9_3_a_correct_variant_and_other_return_types_pass():
    assert check("9.3", timer()).passed

    def tensor_median(fn, n_warmup=3, n_runs=10):
        for _ in range(n_warmup):
            fn()
        times = []
        for _ in range(n_runs):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return torch.tensor(times, dtype=torch.float64).quantile(0.5)  # a 0-d tensor

    assert check("9.3", tensor_median).passed


@pytest.mark.parametrize(
    "kwargs, hint",
    [
        ({"warmup": False}, "warm up first"),
        ({"n_warmup_fixed": 3}, "use the n_warmup argument"),
        ({"n_runs_fixed": 10}, "use the n_runs argument"),
        ({"stat": "mean"}, "you returned the mean"),
        ({"stat": "min"}, "the fastest call (the minimum)"),
        ({"stat": "max"}, "the slowest call"),
        ({"stat": "sum"}, "the total time"),
        ({"unit": 1e3}, "milliseconds"),
        ({"time_warmup": True, "stat": "mean"}, "warm-up calls were timed too"),
        ({"time_warmup": True}, "warm-up calls were timed too"),
        ({"extra_call": True}, "the check counts the calls"),
        ({"returns": "list"}, "not the list"),
        ({"sync": True}, "torch.cuda.is_available()"),
        ({"clock": time.process_time}, "time each of the n_runs calls separately"),
    ],
    ids=lambda x: str(x) if isinstance(x, dict) else "",
)
def test_9_3_wrong_answers_get_hints(kwargs, hint):
    result = check("9.3", timer(**kwargs))
    assert not result.passed, kwargs
    assert hint in result.message, (kwargs, result.message)
    assert 'Re-read "How to time honestly"' in result.message


def test_9_3_mean_hint_names_the_rare_outlier():
    message = check("9.3", timer(stat="mean")).message
    assert "one rare slow call" in message and "n_warmup=2, n_runs=7" in message, message


def test_9_3_never_calling_fn_is_reported():
    result = check("9.3", lambda fn, n_warmup=3, n_runs=10: 0.002)
    assert not result.passed and "called fn 0 times" in result.message, result.message


def test_9_3_timing_shortcuts_are_refused():
    def with_benchmark(fn, n_warmup=3, n_runs=10):
        from attnbook.timing import benchmark

        return benchmark(fn).median_s

    def with_timer(fn, n_warmup=3, n_runs=10):
        import torch.utils.benchmark as tb

        return tb.Timer(stmt="fn()", globals={"fn": fn}).timeit(n_runs).median

    for answer in (with_benchmark, with_timer):
        result = check("9.3", answer)
        assert not result.passed and "the task asks you to write this without" in result.message, result.message
