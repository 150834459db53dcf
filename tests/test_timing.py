"""Tests of attnbook.timing: FLOP and byte counts against brute force, hand counts, PyTorch's FLOP counter on
real layers (attnbook's and transformers') and real tensors, measured peak memory against allocations whose sizes
are known by construction, the timing helpers on cheap functions, and the measured matmul throughput that
percentages divide by (never above 100%).

Timings are machine-dependent, so their tests assert only what holds on any machine (positive, finite, a
function doing 8x the work takes longer, a slow first call is excluded), never absolute times.
"""
from __future__ import annotations

import math
import re
import time
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from attnbook.timing import (
    LayerFlops,
    MatmulThroughput,
    Timing,
    attention_backward_flops,
    attention_flops,
    attention_matmul_shapes,
    format_rate,
    layer_flops,
    matmul_flops,
    matmul_throughput,
    benchmark,
    device_report,
    format_device_report,
    kv_cache_bytes,
    matmul_peak,
    peak_memory,
    score_matrix_bytes,
    sdpa_backends,
)

MB = 1_000_000


# ----------------------------------------------------------------------------------------------------------
# FLOPs and bytes
# ----------------------------------------------------------------------------------------------------------


def allowed_pairs_from_sdpa(L: int, S: int, causal: bool) -> int:
    """Count the (query, key) pairs torch's own SDPA lets through: with value = identity, its output is the
    weight matrix, and with q = k = 0 every allowed key gets weight 1/(number allowed) > 0."""
    q = torch.zeros(1, 1, L, 4, dtype=torch.float64)
    k = torch.zeros(1, 1, S, 4, dtype=torch.float64)
    eye = torch.eye(S, dtype=torch.float64)[None, None]  # (1, 1, S, S)
    weights = F.scaled_dot_product_attention(q, k, eye, is_causal=causal)  # (1, 1, L, S)
    return int((weights > 0).sum())


@pytest.mark.parametrize("L, S", [(1, 1), (5, 5), (4, 9), (9, 4), (16, 16), (7, 1), (1, 7), (33, 20)])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_flops_counts_the_pairs_sdpa_allows(L, S, causal):
    B, H, d = 2, 3, 8
    pairs = allowed_pairs_from_sdpa(L, S, causal)
    assert attention_flops(B, H, L, S, d, causal=causal) == 4 * B * H * d * pairs
    # and the explicit mask torch documents for is_causal (ones(L, S).tril()) gives the same count
    mask = torch.ones(L, S, dtype=torch.bool).tril() if causal else torch.ones(L, S, dtype=torch.bool)
    assert pairs == int(mask.sum())


def test_attention_flops_closed_forms():
    assert attention_flops(1, 8, 2048, 2048, 64) == 4 * 8 * 2048 * 2048 * 64
    # causal square: N(N+1)/2 pairs, a bit more than half of the full count
    assert attention_flops(1, 1, 1000, 1000, 1, causal=True) == 4 * 1000 * 1001 // 2
    assert attention_flops(2, 4, 1, 512, 16, causal=True) == 4 * 2 * 4 * 16  # one query sees one key


def test_attention_backward_flops_closed_forms():
    # five products of 2 * L * S * d FLOPs per (batch, head): S again, dV, dP, dQ, dK (FlashAttention-2's 2.5x)
    assert attention_backward_flops(2, 3, 5, 7, 4) == 5 * 2 * 2 * 3 * 5 * 7 * 4
    assert attention_backward_flops(1, 1, 1000, 1000, 1, causal=True) == 5 * 2 * 1000 * 1001 // 2


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_score_matrix_bytes_equals_the_scores_tensor(dtype):
    B, H, L, S, d = 2, 3, 5, 7, 4
    q, k = torch.zeros(B, H, L, d, dtype=dtype), torch.zeros(B, H, S, d, dtype=dtype)
    scores = q @ k.transpose(-2, -1)  # (B, H, L, S)
    assert score_matrix_bytes(B, H, L, S, dtype) == scores.nbytes


@pytest.mark.parametrize(
    "n_layers, n_kv_heads, d_head, seq_len, batch, dtype",
    [
        (2, 4, 16, 10, 1, torch.float16),
        (3, 1, 8, 7, 2, torch.float32),  # multi-query attention: one KV head
        (1, 2, 64, 33, 3, torch.bfloat16),
        (4, 8, 4, 0, 2, torch.float16),  # empty cache
    ],
)
def test_kv_cache_bytes_equals_allocated_caches(n_layers, n_kv_heads, d_head, seq_len, batch, dtype):
    shape = (batch, n_kv_heads, seq_len, d_head)
    caches = [(torch.zeros(shape, dtype=dtype), torch.zeros(shape, dtype=dtype)) for _ in range(n_layers)]  # (K, V)
    allocated = sum(k.nbytes + v.nbytes for k, v in caches)
    assert kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch=batch, dtype=dtype) == allocated


def test_kv_cache_bytes_default_is_batch_1_float16():
    assert kv_cache_bytes(32, 8, 128, 4096) == 2 * 32 * 8 * 128 * 4096 * 2  # 0.5 GiB, a Llama-style GQA model


# ----------------------------------------------------------------------------------------------------------
# peak_memory (CPU here: the profiler's allocation records)
# ----------------------------------------------------------------------------------------------------------


def alloc_one():
    return torch.ones(1000, 1000)  # 4 MB, returned


def alloc_free_alloc():
    a = torch.ones(1000, 1000)  # 4 MB
    del a
    b = torch.ones(1000, 1000)  # the first 4 MB are free again
    return b.sum()


def alloc_two_at_once():
    a = torch.ones(1000, 1000)
    b = torch.ones(1000, 1000)  # both alive: 8 MB
    return (a + 0).sum() + b.sum()  # a + 0 is a third 4 MB while a and b live


@pytest.mark.parametrize(
    "fn, low, high",
    [
        (alloc_one, 4 * MB, 4 * MB + 4096),
        (alloc_free_alloc, 4 * MB, 4 * MB + 4096),
        (alloc_two_at_once, 12 * MB, 12 * MB + 4096),
    ],
)
def test_peak_memory_measures_known_allocations(fn, low, high):
    assert low <= peak_memory(fn) <= high


def test_peak_memory_does_not_count_what_existed_before():
    x = torch.ones(2000, 1000)  # 8 MB allocated before the call
    assert peak_memory(torch.sum, x) < 4096  # sum allocates only its scalar result
    assert x.shape == (2000, 1000)


def test_peak_memory_passes_args_and_kwargs():
    seen = {}

    def f(n, *, fill):
        seen.update(n=n, fill=fill)
        return torch.full((n,), fill)

    assert 4000 <= peak_memory(f, 1000, fill=2.0) <= 4000 + 4096
    assert seen == {"n": 1000, "fill": 2.0}


def test_peak_memory_tells_materialised_scores_from_tiles():
    """Naive attention holds the (N, N) scores; a loop over key blocks holds (N, block) at a time."""
    N, d, block = 1024, 64, 64
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(N, d, generator=g) for _ in range(3))

    def naive(q, k, v):
        return torch.softmax(q @ k.T / 8, dim=-1) @ v  # (N, N) scores, then (N, N) weights

    def blocked(q, k, v):  # not attention: just the memory pattern of one (N, block) score block at a time
        out = torch.zeros(N, d)
        for s in range(0, N, block):
            out += (q @ k[s:s + block].T) @ v[s:s + block]  # (N, block) @ (block, d)
        return out

    scores = score_matrix_bytes(1, 1, N, N, torch.float32)
    assert peak_memory(naive, q, k, v) >= 2 * scores  # scores and weights alive together
    assert peak_memory(blocked, q, k, v) <= scores / 4


def test_peak_memory_prints_nothing(capfd):
    """The profiler banner (written by C++ to file descriptor 2) must not reach notebook outputs."""
    peak_memory(alloc_one)
    out, err = capfd.readouterr()
    assert out == "" and err == ""


# ----------------------------------------------------------------------------------------------------------
# benchmark, matmul_peak
# ----------------------------------------------------------------------------------------------------------

A = torch.randn(128, 128, generator=torch.Generator().manual_seed(1))


def matmuls(n: int):
    x = A
    for _ in range(n):
        x = A @ x
    return x


def test_benchmark_returns_a_sane_timing():
    t = benchmark(matmuls, 1, min_run_time=0.05)
    assert isinstance(t, Timing)
    assert 0 < t.median_s < 1 and math.isfinite(t.median_s)
    assert 0 <= t.iqr_s < 1
    assert t.n_runs >= 1 and t.calls_per_run >= 1
    assert t.num_threads == torch.get_num_threads()


def test_benchmark_eight_times_the_work_takes_longer():
    # Sleeps, not matmuls: their duration does not depend on how busy the CPU is, so the test is not flaky on a
    # shared machine, and they still check that benchmark reports the time of one call.
    one = benchmark(time.sleep, 0.002, min_run_time=0.05).median_s
    eight = benchmark(time.sleep, 0.016, min_run_time=0.05).median_s
    assert 0.002 <= one < 0.012 and 0.016 <= eight < 0.05
    assert eight > 2 * one


def test_benchmark_excludes_a_slow_first_call():
    calls = []

    def slow_first():
        if not calls:
            time.sleep(0.3)  # one-off cost (compilation, lazy initialisation, ...)
        calls.append(1)

    t = benchmark(slow_first, min_run_time=0.05)
    assert t.median_s < 0.01
    assert len(calls) > 1


def test_benchmark_passes_args_and_kwargs():
    seen = []
    benchmark(lambda a, b=0: seen.append((a, b)), 1, b=2, min_run_time=0.01)
    assert set(seen) == {(1, 2)}


@pytest.mark.parametrize(
    "median, iqr, runs, calls, text",
    [
        (1.234e-3, 5e-5, 40, 1, "1.23 ms ± 0.05 (IQR) over 40 runs"),
        (943e-6, 47e-6, 3, 100, "943 µs ± 47 (IQR) over 3 runs of 100 calls"),
        (0.9997e-3, 1e-5, 1, 1, "1.00 ms ± 0.01 (IQR) over 1 run"),
        (12.34, 0.5, 5, 1, "12.3 s ± 0.5 (IQR) over 5 runs"),
        (5e-9, 1e-9, 10, 1000, "5.00 ns ± 1.00 (IQR) over 10 runs of 1000 calls"),
    ],
)
def test_timing_str(median, iqr, runs, calls, text):
    assert str(Timing(median, iqr, runs, calls, 2)) == text


def test_timing_str_of_a_real_measurement_is_readable():
    text = str(benchmark(matmuls, 1, min_run_time=0.02))
    assert re.fullmatch(r"\d+(\.\d+)? (ns|µs|ms|s) ± \d+(\.\d+)? \(IQR\) over \d+ runs?( of \d+ calls)?", text), text


def test_matmul_peak_is_a_positive_rate_consistent_with_a_direct_timing():
    n = 256
    # The best of three of each: another process sharing the CPU can only slow a measurement down.
    rate = max(matmul_peak("cpu", torch.float32, n=n) for _ in range(3))
    assert math.isfinite(rate) and rate > 1e6  # any CPU of this century does more than a MFLOP/s
    a = torch.randn(n, n)
    direct = max(2 * n**3 / benchmark(torch.matmul, a, a, min_run_time=0.05).median_s for _ in range(3))
    assert 0.01 < rate / direct < 100  # the same measurement; wide, since 2-thread kernels on a shared CPU can stall


# ----------------------------------------------------------------------------------------------------------
# layer_flops: hand counts, and PyTorch's FLOP counter on real layers
# ----------------------------------------------------------------------------------------------------------


def test_layer_flops_equals_hand_counts():
    N, d, h, d_ff = 10, 8, 2, 32
    f = layer_flops(N, d, h, d_ff)
    assert isinstance(f, LayerFlops)
    assert f.attention_core == 2 * N * N * d + 2 * N * N * d == 3_200  # QK^T and PV, each 2·N²·d over all heads
    assert f.projections == 4 * (2 * N * d * d) == 5_120  # Q, K, V and output, each 2·N·d·d
    assert f.ffn == 2 * (2 * N * d * d_ff) == 10_240  # up and down, each 2·N·d·d_ff
    assert f.total == 3_200 + 5_120 + 10_240
    assert f.attention_share == pytest.approx(3_200 / 18_560)


def test_layer_flops_options_scale_the_right_part():
    N, d, h, d_ff = 10, 8, 2, 32
    base = layer_flops(N, d, h, d_ff)
    batch3 = layer_flops(N, d, h, d_ff, batch=3)
    assert (batch3.attention_core, batch3.projections, batch3.ffn) == (3 * base.attention_core, 3 * base.projections,
                                                                      3 * base.ffn)
    gated = layer_flops(N, d, h, d_ff, gated=True)  # SwiGLU: gate, up, down
    assert gated.ffn == 3 * (2 * N * d * d_ff) and gated.projections == base.projections
    causal = layer_flops(N, d, h, d_ff, causal=True)
    assert causal.attention_core == 4 * d * N * (N + 1) // 2  # only the allowed pairs
    assert causal.attention_core == attention_flops(1, h, N, N, d // h, causal=True)
    assert (causal.projections, causal.ffn) == (base.projections, base.ffn)
    gqa = layer_flops(N, d, h, d_ff, n_kv_heads=1)  # K and V project to one head of d // h
    assert gqa.projections == 2 * (2 * N * d * d) + 2 * (2 * N * d * (d // h))
    assert gqa.attention_core == base.attention_core  # every query head still attends


@pytest.mark.parametrize("n", [1, 64, 4608, 100_000])
def test_attention_share_grows_with_n_and_equals_n_over_n_plus_6d(n):
    """With d_ff = 4d, projections + FFN = 24·N·d² and the core 4·N²·d: the share is N / (N + 6d)."""
    d = 768
    assert layer_flops(n, d, 12, 4 * d).attention_share == pytest.approx(n / (n + 6 * d))


def _module_flops(counts, prefix):
    return sum(sum(ops.values()) for name, ops in counts.items() if name == prefix)


@pytest.mark.parametrize("n_kv_heads", [None, 2, 1])
def test_layer_flops_equals_pytorch_flop_counter_on_an_encoder_block(n_kv_heads):
    from torch.utils.flop_counter import FlopCounterMode

    from attnbook.layers import EncoderBlock

    B, N, d, h, d_ff = 2, 12, 32, 4, 48
    block = EncoderBlock(d, h, d_ff, n_kv_heads=n_kv_heads).eval()
    x = torch.randn(B, N, d, generator=torch.Generator().manual_seed(0))
    # the MATH backend runs QK^T and PV as bmm, which the counter sees (it has no formula for the CPU flash kernel)
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        block(x)
    counts = counter.get_flop_counts()
    projections = sum(_module_flops(counts, f"EncoderBlock.self_attn.{p}") for p in ("q_proj", "k_proj", "v_proj",
                                                                                      "out_proj"))
    f = layer_flops(N, d, h, d_ff, batch=B, n_kv_heads=n_kv_heads)
    assert projections == f.projections
    assert _module_flops(counts, "EncoderBlock.self_attn") - projections == f.attention_core
    assert _module_flops(counts, "EncoderBlock.ffn") == f.ffn
    assert counter.get_total_flops() == f.total


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_layer_flops_equals_pytorch_flop_counter_on_transformers_layers(kind):
    """One layer of GPT-2 (GELU FFN, 2 matrices) and of Llama (SwiGLU, 3 matrices), built from configs."""
    transformers = pytest.importorskip("transformers")
    from torch.utils.flop_counter import FlopCounterMode

    N, d, h, d_ff, vocab = 16, 32, 4, 64, 50
    if kind == "gpt2":
        config = transformers.GPT2Config(n_embd=d, n_head=h, n_layer=1, n_inner=d_ff, n_positions=64,
                                         vocab_size=vocab, bos_token_id=0, eos_token_id=0)
        model, gated = transformers.GPT2Model(config), False
    else:
        config = transformers.LlamaConfig(hidden_size=d, num_attention_heads=h, num_key_value_heads=h,
                                          num_hidden_layers=1, intermediate_size=d_ff, vocab_size=vocab,
                                          max_position_embeddings=64, bos_token_id=0, eos_token_id=0)
        model, gated = transformers.LlamaModel(config), True
    ids = torch.randint(0, vocab, (1, N), generator=torch.Generator().manual_seed(0))
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model.eval()(ids)
    # the models are causal, but the MATH backend computes every score: the counter sees the full core
    assert counter.get_total_flops() == layer_flops(N, d, h, d_ff, gated=gated).total


# ----------------------------------------------------------------------------------------------------------
# the measured matmul throughput, and percentages of it
# ----------------------------------------------------------------------------------------------------------


def test_attention_matmul_shapes_are_the_two_products_of_attention():
    shapes = attention_matmul_shapes(2, 3, 5, 7, 4)
    assert shapes == [(6, 5, 4, 7), (6, 5, 7, 4)]  # QK^T: (5, 4) @ (4, 7); PV: (5, 7) @ (7, 4)
    assert sum(matmul_flops(s) for s in shapes) == attention_flops(2, 3, 5, 7, 4)
    q, k, v = torch.zeros(6, 5, 4), torch.zeros(6, 7, 4), torch.zeros(6, 7, 4)
    scores = q @ k.transpose(-2, -1)  # (6, 5, 7)
    assert (scores.shape, (scores @ v).shape) == ((6, 5, 7), (6, 5, 4))
    assert matmul_flops((3, 4, 5, 6)) == 2 * 3 * 4 * 5 * 6


def fake_reference(**rates):
    """A MatmulThroughput with made-up rates (FLOP/s), one shape per keyword: s1 -> (1, 1, 1, 1), ..."""
    shapes = {f"s{i}": (1, i, i, i) for i in range(1, 10)}
    rates = {shapes[name]: rate for name, rate in rates.items()}
    best = max(rates, key=rates.get)
    return MatmulThroughput(rates[best], best, rates, "cpu", torch.float32, 1, 1)


def test_percent_is_never_above_100():
    ref = fake_reference(s1=50e9, s2=80e9, s3=20e9)
    assert ref.flops_per_s == 80e9 and ref.best_shape == (1, 2, 2, 2)
    assert ref.percent(80e9) == 100.0
    assert ref.percent(20e9) == 25.0
    assert ref.percent(0) == 0.0
    assert all(ref.percent(rate) <= 100 for rate in ref.rates.values())  # at least as fast as every product in it
    for too_fast in (80.001e9, 1e12):
        with pytest.raises(ValueError, match="flops_per_s=.*above the measured matmul throughput"):
            ref.percent(too_fast)


def test_a_reference_that_is_not_the_best_of_its_rates_cannot_be_built():
    rates = {(1, 1, 1, 1): 50e9, (1, 2, 2, 2): 80e9}
    with pytest.raises(ValueError, match="flops_per_s must be the best"):
        MatmulThroughput(50e9, (1, 1, 1, 1), rates, "cpu", torch.float32, 1, 1)
    with pytest.raises(ValueError, match="flops_per_s must be the best"):
        MatmulThroughput(90e9, (1, 2, 2, 2), rates, "cpu", torch.float32, 1, 1)
    with pytest.raises(ValueError, match="best_shape"):
        MatmulThroughput(80e9, (1, 3, 3, 3), rates, "cpu", torch.float32, 1, 1)
    with pytest.raises(ValueError, match="rates"):
        MatmulThroughput(80e9, (1, 2, 2, 2), {}, "cpu", torch.float32, 1, 1)
    with pytest.raises(ValueError, match="rates"):
        MatmulThroughput(80e9, (1, 2, 2, 2), {(1, 2, 2, 2): 80e9, (1, 1, 1, 1): -1.0}, "cpu", torch.float32, 1, 1)


def test_merged_keeps_every_shapes_best_and_refuses_another_setting():
    a = fake_reference(s1=50e9, s2=80e9)
    b = fake_reference(s2=60e9, s3=90e9)
    m = a.merged(b)
    assert m.rates == {(1, 1, 1, 1): 50e9, (1, 2, 2, 2): 80e9, (1, 3, 3, 3): 90e9}
    assert (m.flops_per_s, m.best_shape, m.rounds) == (90e9, (1, 3, 3, 3), 2)
    other = MatmulThroughput(1e9, (1, 1, 1, 1), {(1, 1, 1, 1): 1e9}, "cpu", torch.float32, 2, 1)
    with pytest.raises(ValueError, match="other was measured with num_threads"):
        a.merged(other)
    with pytest.raises(TypeError, match="other"):
        a.merged(90e9)


def test_str_says_measured_matmul_throughput_never_peak():
    text = str(fake_reference(s1=50e9, s4=1.5e12))
    assert text.startswith("measured matmul throughput: 1.5 TFLOP/s, the best of 2 shapes")
    assert "(4, 4) @ (4, 4)" in text and "float32" in text and "1 thread" in text
    assert "peak" not in text
    assert format_rate(38.04e9) == "38.0 GFLOP/s" and format_rate(1.2e12) == "1.2 TFLOP/s"


SMALL = [(1, 64, 64, 64), (4, 32, 16, 32), (1, 128, 128, 128)]


def test_matmul_throughput_measures_every_shape_and_keeps_the_best():
    ref = matmul_throughput("cpu", torch.float32, shapes=SMALL, rounds=2, min_run_time=0.01)
    assert set(ref.rates) == set(SMALL)
    assert ref.flops_per_s == max(ref.rates.values()) == ref.rates[ref.best_shape]
    assert all(math.isfinite(r) and r > 1e6 for r in ref.rates.values())
    assert (ref.device, ref.dtype, ref.num_threads, ref.rounds) == ("cpu", torch.float32, torch.get_num_threads(), 2)


def test_matmul_throughput_rate_is_flops_over_a_direct_timing():
    shape = (1, 128, 128, 128)
    ref = matmul_throughput("cpu", torch.float32, shapes=[shape], rounds=3, min_run_time=0.02)
    a = torch.rand(128, 128)
    direct = max(matmul_flops(shape) / benchmark(torch.matmul, a, a, min_run_time=0.02).median_s for _ in range(3))
    assert 0.01 < ref.flops_per_s / direct < 100  # the same measurement; wide, for a shared CPU


def test_at_least_runs_more_rounds_only_while_the_reference_is_below_it():
    quick = matmul_throughput("cpu", shapes=SMALL[:1], rounds=1, min_run_time=0.005, at_least=1.0, max_rounds=4)
    assert quick.rounds == 1  # 1 FLOP/s is reached at once
    stubborn = matmul_throughput("cpu", shapes=SMALL[:1], rounds=1, min_run_time=0.005, at_least=1e30, max_rounds=3)
    assert stubborn.rounds == 3  # never reached: it stops at max_rounds ...
    with pytest.raises(ValueError, match="above the measured matmul throughput"):
        stubborn.percent(1e30)  # ... and a percentage of it is refused, not printed above 100


def test_matmul_throughput_default_shapes_are_the_devices_squares(monkeypatch):
    import attnbook.timing as timing

    assert timing.DEFAULT_MATMUL_SIZES["cpu"] == (256, 512, 1024)
    monkeypatch.setitem(timing.DEFAULT_MATMUL_SIZES, "cpu", (32, 64))  # small, so the test is quick
    ref = matmul_throughput("cpu", rounds=1, min_run_time=0.005)
    assert list(ref.rates) == [(1, 32, 32, 32), (1, 64, 64, 64)]
    assert ref.dtype == torch.float32

# ----------------------------------------------------------------------------------------------------------
# device_report, sdpa_backends
# ----------------------------------------------------------------------------------------------------------


def test_device_report_on_cpu():
    r = device_report("cpu", torch.float32)
    keys = ("device", "device_name", "capability", "dtype", "tf32_matmul", "float32_matmul_precision", "torch", "threads")
    assert set(keys) <= set(r)
    assert r["device"] == "cpu" and r["capability"] is None
    assert r["dtype"] == "float32"
    assert r["torch"] == torch.__version__
    assert r["threads"] == torch.get_num_threads()
    assert r["tf32_matmul"] == torch.backends.cuda.matmul.allow_tf32
    assert isinstance(r["device_name"], str) and r["device_name"]
    line = format_device_report(r)
    for part in ("cpu", r["device_name"], "float32", f"torch {torch.__version__}", f"{r['threads']} thread"):
        assert part in line


def test_device_report_defaults():
    r = device_report()
    assert r["device"].startswith("cuda" if torch.cuda.is_available() else "cpu")
    assert r["dtype"] == str(torch.get_default_dtype()).removeprefix("torch.")
    assert format_device_report() == format_device_report(r)


def test_sdpa_backends_lists_exactly_the_backends_that_run():
    device = "cpu"
    found = sdpa_backends(device)
    assert SDPBackend.MATH in found
    q, k, v = (torch.randn(2, 2, 8, 64, generator=torch.Generator().manual_seed(i)) for i in range(3))
    expected = F.scaled_dot_product_attention(q.double(), k.double(), v.double()).float()
    every = (SDPBackend.MATH, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION)
    for backend in every:
        with sdpa_kernel(backend):
            if backend in found:
                torch.testing.assert_close(F.scaled_dot_product_attention(q, k, v), expected)
            else:
                with warnings.catch_warnings(), pytest.raises(RuntimeError):
                    warnings.simplefilter("ignore")  # some versions also warn why the backend refuses
                    F.scaled_dot_product_attention(q, k, v)


# ----------------------------------------------------------------------------------------------------------
# argument errors
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda: attention_flops(0, 1, 1, 1, 1), ValueError, "batch"),
        (lambda: attention_flops(1, 1.0, 1, 1, 1), TypeError, "heads"),
        (lambda: attention_flops(1, 1, -2, 1, 1), ValueError, "q_len"),
        (lambda: attention_flops(1, 1, 1, 0, 1), ValueError, "k_len"),
        (lambda: attention_flops(1, 1, 1, 1, True), TypeError, "d_head"),
        (lambda: attention_flops(1, 1, 1, 1, 1, causal=1), TypeError, "causal"),
        (lambda: attention_backward_flops(1, 1, 1, 1, 0), ValueError, "d_head"),
        (lambda: score_matrix_bytes(1, 1, 1, 1, "float32"), TypeError, "dtype"),
        (lambda: score_matrix_bytes(1, 0, 1, 1), ValueError, "heads"),
        (lambda: kv_cache_bytes(0, 1, 1, 1), ValueError, "n_layers"),
        (lambda: kv_cache_bytes(1, 1, 1, -1), ValueError, "seq_len"),
        (lambda: kv_cache_bytes(1, 1, 1, 1, batch=0), ValueError, "batch"),
        (lambda: kv_cache_bytes(1, 1, 1, 1, dtype=2), TypeError, "dtype"),
        (lambda: benchmark(42), TypeError, "fn"),
        (lambda: benchmark(print, min_run_time=0), ValueError, "min_run_time"),
        (lambda: benchmark(print, min_run_time="1"), ValueError, "min_run_time"),
        (lambda: peak_memory("f"), TypeError, "fn"),
        (lambda: matmul_peak(n=0), ValueError, "n"),
        (lambda: matmul_peak(dtype=torch.int32), TypeError, "dtype"),
        (lambda: matmul_throughput(dtype=torch.int64), TypeError, "dtype"),
        (lambda: matmul_throughput(shapes=[]), ValueError, "shapes"),
        (lambda: matmul_throughput(shapes=(1, 2, 3, 4)), ValueError, "shapes"),
        (lambda: matmul_throughput(shapes=[(1, 2, 3)]), ValueError, "shapes"),
        (lambda: matmul_throughput(shapes=[(1, 2, 3, 0)]), ValueError, "shapes"),
        (lambda: matmul_throughput(shapes=[(1, 2.0, 3, 4)]), TypeError, "shapes"),
        (lambda: matmul_throughput(shapes="big"), TypeError, "shapes"),
        (lambda: matmul_throughput(rounds=0), ValueError, "rounds"),
        (lambda: matmul_throughput(rounds=3, max_rounds=2), ValueError, "max_rounds"),
        (lambda: matmul_throughput(min_run_time=0), ValueError, "min_run_time"),
        (lambda: matmul_throughput(at_least=-1.0), ValueError, "at_least"),
        (lambda: matmul_throughput(at_least="fast"), ValueError, "at_least"),
        (lambda: fake_reference(s1=1e9).percent("1e9"), TypeError, "flops_per_s"),
        (lambda: fake_reference(s1=1e9).percent(math.nan), ValueError, "flops_per_s"),
        (lambda: fake_reference(s1=1e9).percent(-1.0), ValueError, "flops_per_s"),
        (lambda: matmul_flops((1, 2, 3)), ValueError, "shape"),
        (lambda: attention_matmul_shapes(1, 0, 1, 1, 1), ValueError, "heads"),
        (lambda: format_rate(-1.0), ValueError, "flops_per_s"),
        (lambda: layer_flops(0, 8, 2, 32), ValueError, "seq_len"),
        (lambda: layer_flops(4, 8.0, 2, 32), TypeError, "d_model"),
        (lambda: layer_flops(4, 8, 3, 32), ValueError, "n_heads"),
        (lambda: layer_flops(4, 8, 2, 0), ValueError, "d_ff"),
        (lambda: layer_flops(4, 8, 2, 32, batch=0), ValueError, "batch"),
        (lambda: layer_flops(4, 8, 2, 32, causal=1), TypeError, "causal"),
        (lambda: layer_flops(4, 8, 2, 32, gated="yes"), TypeError, "gated"),
        (lambda: layer_flops(4, 8, 4, 32, n_kv_heads=3), ValueError, "n_kv_heads"),
        (lambda: layer_flops(4, 8, 4, 32, n_kv_heads=0), ValueError, "n_kv_heads"),
        (lambda: device_report("cpu", dtype="float32"), TypeError, "dtype"),
        (lambda: format_device_report("cpu"), TypeError, "report"),
        (lambda: sdpa_backends("cpu", dtype=torch.int64), TypeError, "dtype"),
        (lambda: sdpa_backends("cpu", d_head=0), ValueError, "d_head"),
    ],
)
def test_argument_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
