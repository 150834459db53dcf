"""Tests of attnbook.decoding: the byte arithmetic against hand-computed values and real tensors, grouped decoding
attention against a per-head loop and against repeat_kv + SDPA in float64, and the sweeps on tiny sizes.

Timings are machine-dependent, so the sweep tests check structure, bookkeeping and speed of the helper itself,
never absolute times.
"""
from __future__ import annotations

import math
import time

import pytest
import torch
import torch.nn.functional as F

from attnbook.decoding import (
    attention_step_sweep,
    batch_sweep,
    decode_step_read_bytes,
    gqa_crossover,
    grouped_decode_attention,
    kv_cache_bytes_per_token,
    last_level_cache_bytes,
    memory_bound_batch,
    weight_stack,
    weight_step,
)
from attnbook.multihead import KVCache, repeat_kv
from attnbook.timing import kv_cache_bytes

# ----------------------------------------------------------------------------------------------------------
# Arithmetic
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "n_layers, n_kv_heads, d_head, dtype, expected",
    [
        (1, 1, 1, torch.float16, 4),                      # one K and one V number of 2 bytes
        (2, 8, 24, torch.float32, 3072),                  # the chapter's GPT: 2 * 2 * 8 * 24 * 4
        (32, 32, 128, torch.float16, 524_288),            # LLaMA-2 7B: 512 KiB per token
        (80, 8, 128, torch.float16, 327_680),             # LLaMA-2 70B with GQA: 320 KiB
        (80, 64, 128, torch.float16, 2_621_440),          # the same without GQA: 8 times as much
        (32, 8, 128, torch.bfloat16, 131_072),            # Mistral 7B: 128 KiB
        (1, 4, 16, torch.float64, 1024),
    ],
)
def test_kv_cache_bytes_per_token_hand_values(n_layers, n_kv_heads, d_head, dtype, expected):
    assert kv_cache_bytes_per_token(n_layers, n_kv_heads, d_head, dtype) == expected
    assert isinstance(kv_cache_bytes_per_token(n_layers, n_kv_heads, d_head, dtype), int)


@pytest.mark.parametrize("n_kv_heads, dtype", [(1, torch.float32), (4, torch.float16), (2, torch.float64)])
def test_kv_cache_bytes_per_token_is_what_a_real_cache_grows_by(n_kv_heads, dtype):
    n_layers, d_head, batch = 3, 8, 2
    caches = [KVCache() for _ in range(n_layers)]
    for cache in caches:
        k = torch.zeros(batch, n_kv_heads, 5, d_head, dtype=dtype)
        cache.update(k, k.clone())
    before = sum(c.nbytes() for c in caches)
    for cache in caches:
        k = torch.zeros(batch, n_kv_heads, 1, d_head, dtype=dtype)
        cache.update(k, k.clone())  # one more position
    grown = sum(c.nbytes() for c in caches) - before
    assert grown == batch * kv_cache_bytes_per_token(n_layers, n_kv_heads, d_head, dtype)
    assert kv_cache_bytes_per_token(n_layers, n_kv_heads, d_head, dtype) == kv_cache_bytes(
        n_layers, n_kv_heads, d_head, 1, 1, dtype)


def test_decode_step_read_bytes_hand_values():
    assert decode_step_read_bytes(1000, 10, 3, 7) == 1000 + 3 * 7 * 10
    assert decode_step_read_bytes(1000, 10, 5, 0) == 1000  # an empty cache: only the weights
    assert decode_step_read_bytes(0, 4, 1, 1) == 4
    # LLaMA-2 70B in float16 at batch 8, 4096 tokens: 137.95 GB of weights and 8 * 4096 * 320 KiB of cache
    weights = 2 * 68_976_648_192
    assert decode_step_read_bytes(weights, 327_680, 8, 4096) == weights + 10 * 2**30


def test_memory_bound_batch_is_where_compute_time_equals_read_time():
    assert memory_bound_batch(100.0, 10.0, 4) == pytest.approx(20.0)  # 100 * 4 / (2 * 10)
    assert memory_bound_batch(989e12, 3.35e12, 2) == pytest.approx(295.2238805970149)  # H100 datasheet, float16
    peak, bandwidth, bpw, n_weights = 7e10, 2.5e10, 4, 12345
    b = memory_bound_batch(peak, bandwidth, bpw)
    assert 2 * b * n_weights / peak == pytest.approx(n_weights * bpw / bandwidth)


@pytest.mark.parametrize(
    "call, error, name",
    [
        (lambda: kv_cache_bytes_per_token(0, 1, 1), ValueError, "n_layers"),
        (lambda: kv_cache_bytes_per_token(1, 1.5, 1), TypeError, "n_kv_heads"),
        (lambda: kv_cache_bytes_per_token(1, 1, True), TypeError, "d_head"),
        (lambda: kv_cache_bytes_per_token(1, 1, 1, "float16"), TypeError, "dtype"),
        (lambda: decode_step_read_bytes(-1, 1, 1, 1), ValueError, "weight_bytes"),
        (lambda: decode_step_read_bytes(1, 1.0, 1, 1), TypeError, "cache_bytes_per_token"),
        (lambda: decode_step_read_bytes(1, 1, 0, 1), ValueError, "batch"),
        (lambda: decode_step_read_bytes(1, 1, 1, -3), ValueError, "context"),
        (lambda: memory_bound_batch(-1.0, 1.0, 2), ValueError, "peak_flops"),
        (lambda: memory_bound_batch(1.0, float("nan"), 2), ValueError, "bandwidth"),
        (lambda: memory_bound_batch(1.0, 1.0, True), TypeError, "bytes_per_weight"),
        (lambda: memory_bound_batch("1e12", 1.0, 2), TypeError, "peak_flops"),
    ],
)
def test_arithmetic_rejects_bad_input_naming_the_argument(call, error, name):
    with pytest.raises(error, match=name):
        call()


# ----------------------------------------------------------------------------------------------------------
# Grouped decoding attention
# ----------------------------------------------------------------------------------------------------------


def per_head_reference(q, k, v):
    """Attention of one query per head, head by head: query head j uses key/value head j // (H / G)."""
    B, H, _, d = q.shape
    r = H // k.size(1)
    out = torch.empty_like(q)
    for b in range(B):
        for j in range(H):
            scores = (k[b, j // r] @ q[b, j, 0]) / math.sqrt(d)  # (S,)
            out[b, j, 0] = torch.softmax(scores, dim=0) @ v[b, j // r]  # (d,)
    return out


@pytest.mark.parametrize("n_kv", [6, 3, 2, 1])
@pytest.mark.parametrize("S", [1, 7])
def test_grouped_decode_attention_matches_a_per_head_loop_and_sdpa(n_kv, S):
    g = torch.Generator().manual_seed(n_kv * 10 + S)
    B, H, d = 2, 6, 5
    q = torch.randn(B, H, 1, d, generator=g, dtype=torch.float64)
    k = torch.randn(B, n_kv, S, d, generator=g, dtype=torch.float64)
    v = torch.randn(B, n_kv, S, d, generator=g, dtype=torch.float64)
    copies = q.clone(), k.clone(), v.clone()
    out = grouped_decode_attention(q, k, v)
    assert out.shape == (B, H, 1, d) and out.dtype == torch.float64
    assert torch.allclose(out, per_head_reference(q, k, v), atol=1e-12)
    sdpa = F.scaled_dot_product_attention(q, repeat_kv(k, H // n_kv), repeat_kv(v, H // n_kv))
    assert torch.allclose(out, sdpa, atol=1e-12)
    assert all(torch.equal(a, b) for a, b in zip((q, k, v), copies))  # inputs unchanged


def test_grouped_decode_attention_float32_and_non_contiguous_cache():
    g = torch.Generator().manual_seed(1)
    q = torch.randn(3, 8, 1, 16, generator=g)
    big = torch.randn(3, 2, 12, 16, generator=g)
    k, v = big[:, :, :-2], big.flip(2)[:, :, :-2]  # slices, as KVCache holds after a cut
    ref = per_head_reference(q.double(), k.double(), v.double())
    assert (grouped_decode_attention(q, k, v).double() - ref).abs().max() < 1e-5


@pytest.mark.parametrize(
    "args, error, name",
    [
        (("q", 2, 1), TypeError, "q"),
        (((2, 4, 2, 8), (2, 2, 5, 8), (2, 2, 5, 8)), ValueError, "q"),          # two new tokens
        (((2, 4, 1, 8), (2, 3, 5, 8), (2, 3, 5, 8)), ValueError, "divisible"),  # 4 heads, 3 kv heads
        (((2, 4, 1, 8), (2, 2, 5, 8), (2, 2, 6, 8)), ValueError, "v_cache"),
        (((2, 4, 1, 8), (1, 2, 5, 8), (1, 2, 5, 8)), ValueError, "k_cache"),    # batch differs
        (((2, 4, 1, 8), (2, 2, 0, 8), (2, 2, 0, 8)), ValueError, "k_cache"),    # empty cache
        (((2, 4, 8), (2, 2, 5, 8), (2, 2, 5, 8)), ValueError, "q"),             # 3-D
    ],
)
def test_grouped_decode_attention_rejects_bad_input(args, error, name):
    tensors = [torch.zeros(a) if isinstance(a, tuple) else a for a in args]
    with pytest.raises(error, match=name):
        grouped_decode_attention(*tensors)


def test_grouped_decode_attention_rejects_mixed_dtypes_and_integers():
    q = torch.zeros(1, 2, 1, 4)
    with pytest.raises(TypeError, match="dtype"):
        grouped_decode_attention(q, torch.zeros(1, 1, 3, 4, dtype=torch.float64), torch.zeros(1, 1, 3, 4))
    with pytest.raises(TypeError, match="k_cache"):
        grouped_decode_attention(q, torch.zeros(1, 1, 3, 4, dtype=torch.long), torch.zeros(1, 1, 3, 4))


# ----------------------------------------------------------------------------------------------------------
# The weight stack and the batch sweep
# ----------------------------------------------------------------------------------------------------------


def test_weight_stack_shapes_scale_and_seed():
    ws = weight_stack(64, 3, seed=2)
    assert len(ws) == 3 and all(W.shape == (64, 64) and W.dtype == torch.float32 for W in ws)
    assert abs(torch.cat([W.flatten() for W in ws]).std().item() - 1 / 8) < 0.01  # 1 / sqrt(64)
    assert all(torch.equal(a, b) for a, b in zip(ws, weight_stack(64, 3, seed=2)))
    assert not torch.equal(ws[0], weight_stack(64, 3, seed=3)[0])
    assert weight_stack(8, 1, dtype=torch.float64)[0].dtype == torch.float64


def test_weight_step_is_the_chained_product():
    ws = weight_stack(16, 3, dtype=torch.float64)
    x = torch.randn(5, 16, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    expected = x.numpy() @ ws[0].numpy() @ ws[1].numpy() @ ws[2].numpy()
    assert torch.allclose(weight_step(x, ws), torch.from_numpy(expected), atol=1e-12)


def test_batch_sweep_runs_quickly_on_tiny_sizes_and_keeps_its_books():
    ws = weight_stack(16, 2)
    start = time.perf_counter()
    rows = batch_sweep(ws, [1, 2, 4], rounds=2, min_run_time=0.001)
    assert time.perf_counter() - start < 10
    assert [r["batch"] for r in rows] == [1, 2, 4]
    for r in rows:
        assert r["step_s"] > 0 and math.isfinite(r["step_s"])
        assert 0 <= r["step_iqr_s"] < math.inf
        assert r["token_s"] == pytest.approx(r["step_s"] / r["batch"])
        assert r["flops"] == 2 * r["batch"] * 2 * 16 * 16
        assert r["weight_bytes"] == 2 * 16 * 16 * 4
        assert r["flop_rate"] == pytest.approx(r["flops"] / r["step_s"])
        assert r["weight_read_rate"] == pytest.approx(r["weight_bytes"] / r["step_s"])


@pytest.mark.parametrize(
    "call, error, name",
    [
        (lambda ws: batch_sweep(ws, [2, 1]), ValueError, "batches"),
        (lambda ws: batch_sweep(ws, []), ValueError, "batches"),
        (lambda ws: batch_sweep(ws, [0, 1]), ValueError, "batches"),
        (lambda ws: batch_sweep(ws, "124"), TypeError, "batches"),
        (lambda ws: batch_sweep(ws[0], [1]), TypeError, "weights"),
        (lambda ws: batch_sweep([], [1]), TypeError, "weights"),
        (lambda ws: batch_sweep([ws[0], torch.zeros(4, 4)], [1]), ValueError, r"weights\[1\]"),
        (lambda ws: batch_sweep(ws, [1], rounds=0), ValueError, "rounds"),
        (lambda ws: batch_sweep(ws, [1], min_run_time=0), ValueError, "min_run_time"),
        (lambda ws: weight_stack(0, 1), ValueError, "width"),
        (lambda ws: weight_stack(4, 2.0), TypeError, "n_layers"),
        (lambda ws: weight_stack(4, 1, dtype=torch.int32), TypeError, "dtype"),
        (lambda ws: weight_step(torch.zeros(8), ws), ValueError, "x"),
    ],
)
def test_batch_sweep_and_stack_reject_bad_input(call, error, name):
    with pytest.raises(error, match=name):
        call(weight_stack(8, 2))


# ----------------------------------------------------------------------------------------------------------
# The attention sweep and its crossover
# ----------------------------------------------------------------------------------------------------------


def test_attention_step_sweep_runs_quickly_on_tiny_sizes_and_keeps_its_books():
    kv = {"MHA": 4, "GQA": 2, "MQA": 1}
    start = time.perf_counter()
    rows = attention_step_sweep([1, 2], [3, 5], 4, kv, 8, rounds=1, min_run_time=0.001)
    assert time.perf_counter() - start < 10
    assert [(r["batch"], r["seq_len"]) for r in rows] == [(1, 3), (1, 5), (2, 3), (2, 5)]  # by B * S
    for r in rows:
        assert r["tokens"] == r["batch"] * r["seq_len"]
        for name, G in kv.items():
            assert r["cache_bytes"][name] == 2 * r["batch"] * G * r["seq_len"] * 8 * 4  # K and V, float32
            assert r["time_s"][name] > 0 and math.isfinite(r["time_s"][name])
            assert 0 <= r["iqr_s"][name] < math.inf


@pytest.mark.parametrize(
    "kwargs, error, name",
    [
        (dict(kv_heads={"MHA": 4, "odd": 3}), ValueError, "kv_heads"),
        (dict(kv_heads=[4, 2]), TypeError, "kv_heads"),
        (dict(kv_heads={}), TypeError, "kv_heads"),
        (dict(kv_heads={"MHA": 0}), ValueError, "kv_heads"),
        (dict(seq_lens=[5, 3]), ValueError, "seq_lens"),
        (dict(batches=[1.0]), TypeError, "batches"),
        (dict(d_head=0), ValueError, "d_head"),
        (dict(dtype=torch.int64), TypeError, "dtype"),
        (dict(rounds=-1), ValueError, "rounds"),
    ],
)
def test_attention_step_sweep_rejects_bad_input(kwargs, error, name):
    args = dict(batches=[1], seq_lens=[2], n_heads=4, kv_heads={"MHA": 4}, d_head=4, rounds=1, min_run_time=0.001)
    args.update(kwargs)
    with pytest.raises(error, match=name):
        attention_step_sweep(**args)


def fake_rows(ratios):
    """Rows in the format of attention_step_sweep with MHA / GQA = ratios[i] at 10 * 2**i cached tokens."""
    return [{"batch": 1, "seq_len": 10 * 2**i, "tokens": 10 * 2**i, "cache_bytes": {},
             "time_s": {"MHA": r * 1e-3, "GQA": 1e-3}} for i, r in enumerate(ratios)]


def test_gqa_crossover_is_the_smallest_size_from_which_every_cell_wins():
    rows = fake_rows([1.0, 1.2, 1.6, 1.4, 2.0, 2.5])  # tokens 10, 20, 40, 80, 160, 320
    assert gqa_crossover(rows, margin=1.5) == 160      # 40 wins too, but 80 above it does not
    assert gqa_crossover(rows, margin=1.1) == 20
    assert gqa_crossover(rows, margin=0.5) == 10
    assert gqa_crossover(rows, margin=3.0) is None
    assert gqa_crossover(list(reversed(rows)), margin=1.5) == 160  # order of the rows does not matter


def test_gqa_crossover_needs_every_cell_of_equal_size_to_win():
    rows = fake_rows([1.0, 2.0, 2.0])  # tokens 10, 20, 40
    tied = dict(rows[1], batch=2, seq_len=10, time_s={"MHA": 1.1e-3, "GQA": 1e-3})  # also 20 tokens, loses
    for order in ([rows[0], rows[1], tied, rows[2]], [rows[0], tied, rows[1], rows[2]]):
        assert gqa_crossover(order, margin=1.5) == 40
    assert gqa_crossover([rows[0], rows[1], rows[2]], margin=1.5) == 20


@pytest.mark.parametrize(
    "call, error, name",
    [
        (lambda rows: gqa_crossover(rows, margin=0), ValueError, "margin"),
        (lambda rows: gqa_crossover(rows, base="MQA"), ValueError, "base"),
        (lambda rows: gqa_crossover(rows, other=2), TypeError, "other"),
        (lambda rows: gqa_crossover([]), TypeError, "rows"),
        (lambda rows: gqa_crossover(rows[0]), TypeError, "rows"),
    ],
)
def test_gqa_crossover_rejects_bad_input(call, error, name):
    with pytest.raises(error, match=name):
        call(fake_rows([1.0, 2.0]))


# ----------------------------------------------------------------------------------------------------------
# The processor's largest cache
# ----------------------------------------------------------------------------------------------------------


def fake_sysfs(root, entries):
    for i, (level, kind, size) in enumerate(entries):
        d = root / f"index{i}"
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
    return root


def test_last_level_cache_bytes_reads_the_largest_data_cache(tmp_path):
    root = fake_sysfs(tmp_path, [(1, "Data", "48K"), (1, "Instruction", "32K"), (2, "Unified", "2048K"),
                                 (3, "Unified", "32768K")])
    assert last_level_cache_bytes(root) == 32 * 2**20
    assert last_level_cache_bytes(str(root)) == 32 * 2**20


def test_last_level_cache_bytes_without_sysfs_is_none(tmp_path):
    assert last_level_cache_bytes(tmp_path / "missing") is None
    (tmp_path / "empty").mkdir()
    assert last_level_cache_bytes(tmp_path / "empty") is None  # no index* entries
    garbled = fake_sysfs(tmp_path / "garbled", []) if not (tmp_path / "garbled").mkdir() else None
    (garbled / "index0").mkdir()
    (garbled / "index0" / "level").write_text("three\n")
    assert last_level_cache_bytes(garbled) is None  # unreadable entries: unknown, not an exception
    with pytest.raises(TypeError, match="cache_dir"):
        last_level_cache_bytes(3)


def test_last_level_cache_bytes_here_is_none_or_a_plausible_size():
    found = last_level_cache_bytes()
    assert found is None or (isinstance(found, int) and 2**16 <= found <= 2**34)
