"""attnbook.roofline: STREAM bandwidth, the roofline, bytes counted from the profiler and FlashAttention's IO count,
against hand-computed cases and PyTorch's own attention."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attnbook.roofline import (attainable, bytes_written, counted_flash_attention, flash_attention_bytes,
                               memory_bandwidth, ridge_point, standard_attention_bytes, traffic_lower_bound)


def test_the_roofline_is_the_lower_roof_and_meets_at_the_ridge():
    assert ridge_point(100e9, 20e9) == 5.0
    assert attainable(1.0, 100e9, 20e9) == 20e9  # memory-bound: I * W
    assert attainable(5.0, 100e9, 20e9) == 100e9  # at the ridge both roofs agree
    assert attainable(50.0, 100e9, 20e9) == 100e9  # compute-bound: P


@pytest.mark.parametrize("call", [lambda: ridge_point(0, 1.0), lambda: ridge_point(1.0, -2.0),
                                  lambda: attainable(0.0, 1.0, 1.0), lambda: attainable(True, 1.0, 1.0),
                                  lambda: ridge_point("1", 1.0)])
def test_bad_numbers_are_refused(call):
    with pytest.raises(ValueError):
        call()


def test_stream_copy_and_triad_move_bytes_at_a_plausible_rate():
    bw = memory_bandwidth("cpu", torch.float32, array_bytes=8 * 2**20, min_run_time=0.05)
    assert bw.array_bytes == 8 * 2**20 and bw.best == max(bw.copy, bw.triad)
    assert 1e8 < bw.copy < 1e13 and 1e8 < bw.triad < 1e13  # between 0.1 GB/s and 10 TB/s
    assert "copy" in str(bw) and "triad" in str(bw)
    with pytest.raises(TypeError):
        memory_bandwidth("cpu", torch.int64)


def test_bytes_written_counts_what_a_call_allocates():
    a, b = torch.randn(64, 32), torch.randn(32, 48)
    assert bytes_written(torch.matmul, a, b) == 64 * 48 * 4  # the (64, 48) float32 result
    assert bytes_written(torch.Tensor.add_, a, 1.0) < 64  # in place: nothing the size of a (a wrapped scalar at most)
    assert traffic_lower_bound(torch.matmul, a, b) == (64 * 32 + 32 * 48) * 4 + 2 * 64 * 48 * 4


def test_sdpas_fused_kernel_writes_far_less_than_the_scores():
    q, k, v = (torch.randn(1, 2, 512, 32) for _ in range(3))
    scores = 2 * 512 * 512 * 4  # one (1, 2, 512, 512) float32 matrix
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        assert bytes_written(F.scaled_dot_product_attention, q, k, v) >= 2 * scores  # scores and weights
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
        assert bytes_written(F.scaled_dot_product_attention, q, k, v) < scores / 4


def test_the_io_counts_by_hand():
    # one head, N = 8, d = 2, float64 (8 bytes): standard moves 4Nd + 4N^2 = 64 + 256 elements
    assert standard_attention_bytes(1, 1, 8, 2, torch.float64) == 8 * (64 + 256)
    # M = 256 bytes: B_r = 256 / (4 * 2 * 8) = 4 rows, 2 blocks of queries; Q and O once (2 * 16 elements), K and V
    # once per block (2 * 2 * 16)
    assert flash_attention_bytes(1, 1, 8, 2, torch.float64, 256) == 8 * (32 + 64)
    assert flash_attention_bytes(3, 2, 8, 2, torch.float64, 256) == 6 * 8 * (32 + 64)
    # on-chip memory for all of K and V: one block, 4Nd elements, the floor
    assert flash_attention_bytes(1, 1, 8, 2, torch.float64, 10**6) == 8 * 4 * 8 * 2


@pytest.mark.parametrize("n, d, sram", [(64, 8, 1024), (100, 16, 5000), (37, 4, 10**6), (50, 8, 64)])
def test_counted_flash_attention_is_attention_and_moves_what_the_formula_says(n, d, sram):
    g = torch.Generator().manual_seed(n)
    q, k, v = (torch.randn(2, 3, n, d, generator=g, dtype=torch.float64) for _ in range(3))
    out, moved = counted_flash_attention(q, k, v, sram)
    assert torch.allclose(out, F.scaled_dot_product_attention(q, k, v), atol=1e-12)
    rows = max(1, min(n, sram // (4 * d * 8)))
    assert moved == 2 * 3 * 8 * (2 * n * d + math.ceil(n / rows) * 2 * n * d)
    assert moved == flash_attention_bytes(2, 3, n, d, torch.float64, sram)


def test_more_on_chip_memory_moves_fewer_bytes_down_to_the_floor():
    q = k = v = torch.randn(1, 1, 256, 16, dtype=torch.float64)
    counts = [counted_flash_attention(q, k, v, m)[1] for m in (2**12, 2**14, 2**16, 2**20)]
    assert counts == sorted(counts, reverse=True) and counts[-1] == 4 * 256 * 16 * 8


def test_counted_flash_attention_refuses_what_it_cannot_do():
    x = torch.randn(1, 1, 4, 2)
    with pytest.raises(ValueError, match="shape"):
        counted_flash_attention(x, x[..., :3, :], x, 100)
    with pytest.raises(ValueError, match="query"):
        counted_flash_attention(x[0], x, x, 100)
    with pytest.raises((ValueError, TypeError)):
        counted_flash_attention(x, x, x, 0)
