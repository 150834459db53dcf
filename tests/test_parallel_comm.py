"""attnbook.parallel.comm: the simulated ring all-reduce equals the sum and sends 2(n-1)/n of the bytes per rank;
the alpha-beta fit recovers a model's own numbers; the measurement on gloo returns one point per size and process
count. attnbook.parallel.costs: the communication table against products worked out by hand."""
from __future__ import annotations

import pytest
import torch

from attnbook.parallel.comm import AlphaBeta, fit_alpha_beta, measure_alpha_beta, ring_all_reduce, ring_bytes_per_rank
from attnbook.parallel.costs import (INFINIBAND_NDR, NVLINK4_H100, communication_table, format_table,
                                     step_communication)


def test_ring_all_reduce_of_4_ranks_by_hand():
    tensors = [torch.arange(8, dtype=torch.float32) * (r + 1) for r in range(4)]  # integers: sums are exact
    ring = ring_all_reduce(tensors)
    total = torch.arange(8, dtype=torch.float32) * 10  # 1 + 2 + 3 + 4
    assert all(torch.equal(result, total) for result in ring.results)
    assert len(ring.steps) == 6 and ring.phases == ["reduce-scatter"] * 3 + ["all-gather"] * 3  # 2(n - 1)
    for messages in ring.steps:  # every rank sends one chunk, to its right-hand neighbour
        assert sorted((src, dst) for src, dst, _ in messages) == [(0, 1), (1, 2), (2, 3), (3, 0)]
        assert sorted(c for _, _, c in messages) == [0, 1, 2, 3]  # each chunk travels once per step
    assert ring.bytes_sent == [48] * 4  # 6 steps x one chunk of 2 float32 = 48 = 2·3/4 of 32 bytes
    assert ring_bytes_per_rank(32, 4) == 48
    assert all(torch.equal(t, torch.arange(8, dtype=torch.float32) * (r + 1)) for r, t in enumerate(tensors))


@pytest.mark.parametrize("n, shape", [(1, (5,)), (2, (3, 4)), (3, (10,)), (5, (7, 3))])
def test_ring_all_reduce_equals_the_sum_for_any_sizes(n, shape):
    g = torch.Generator().manual_seed(n)
    tensors = [torch.randn(shape, generator=g, dtype=torch.float64) for _ in range(n)]
    ring = ring_all_reduce(tensors)
    total = torch.stack(tensors).sum(dim=0)
    for result in ring.results:
        assert result.shape == total.shape and (result - total).abs().max().item() < 1e-12
    nbytes = tensors[0].numel() * 8
    assert sum(ring.bytes_sent) == 2 * (n - 1) * nbytes  # every step moves every chunk once
    assert len(ring.steps) == 2 * (n - 1)


def test_ring_all_reduce_refuses_mismatched_ranks():
    with pytest.raises(ValueError, match=r"tensors\[1\]"):
        ring_all_reduce([torch.zeros(3), torch.zeros(4)])
    with pytest.raises(TypeError, match="tensors must be a non-empty list"):
        ring_all_reduce([])


def test_alpha_beta_fit_by_hand_and_on_exact_data():
    # n = 2: t = 2 alpha + bytes beta; alpha = 1e-4, beta = 1e-8: 2.1e-4 s for 1000 bytes, 2.3e-4 s for 3000
    fit = fit_alpha_beta([{"world_size": 2, "bytes": 1000, "seconds": 2.1e-4},
                          {"world_size": 2, "bytes": 3000, "seconds": 2.3e-4}])
    assert fit.alpha == pytest.approx(1e-4, rel=1e-9) and fit.beta == pytest.approx(1e-8, rel=1e-9)
    assert fit.bandwidth == pytest.approx(1e8, rel=1e-9)
    assert AlphaBeta(1e-4, 1e-8, 0.0).predict(4, 4000) == pytest.approx(6e-4 + 6e-5)  # 6 alpha + 1.5·4000 beta
    alpha, beta = 5e-5, 2e-10
    points = [{"world_size": n, "bytes": b, "seconds": 2 * (n - 1) * alpha + 2 * (n - 1) / n * b * beta}
              for n in (2, 3, 4) for b in (1e3, 1e5, 1e7)]
    fit = fit_alpha_beta(points)
    assert fit.alpha == pytest.approx(alpha, rel=1e-9) and fit.beta == pytest.approx(beta, rel=1e-9)
    assert fit.rms_error < 1e-15


def test_alpha_beta_fit_refuses_what_cannot_separate_alpha_from_beta():
    with pytest.raises(ValueError, match="at least two"):
        fit_alpha_beta([{"world_size": 2, "bytes": 10, "seconds": 1.0}])
    with pytest.raises(ValueError, match="vary the sizes"):
        fit_alpha_beta([{"world_size": 2, "bytes": 10, "seconds": 1.0}] * 3)


def test_measure_alpha_beta_times_every_size_and_process_count():
    fit = measure_alpha_beta(world_sizes=(2, 3), sizes_bytes=(4096, 262144), repeats=3, timeout=120)
    assert [(m["world_size"], m["bytes"]) for m in fit.measurements] == [(2, 4096), (2, 262144), (3, 4096),
                                                                        (3, 262144)]
    assert all(m["seconds"] > 0 for m in fit.measurements)
    again = fit_alpha_beta(fit.measurements)  # the fit is of the points it lists (last bits: LAPACK's)
    assert again.alpha == pytest.approx(fit.alpha, rel=1e-9) and again.beta == pytest.approx(fit.beta, rel=1e-9)


def test_published_bandwidths():
    assert NVLINK4_H100 == 450e9  # 900 GB/s both directions together
    assert INFINIBAND_NDR == 50e9  # 400 Gb/s


def test_step_communication_by_hand():
    psi, layers, d, tokens = 6.74e9, 32, 4096, 4 * 2**20
    assert step_communication("DP", psi, layers, d, 8, tokens) == pytest.approx(2 * 7 / 8 * 2 * psi)
    activations = tokens * d * 2
    assert step_communication("TP", psi, layers, d, 8, tokens) == pytest.approx(4 * 32 * 2 * 7 / 8 * activations)
    assert step_communication("PP", psi, layers, d, 8, tokens) == 2 * activations
    assert step_communication("PP", psi, layers, d, 64, tokens) is None  # 64 stages, 32 layers
    with pytest.raises(ValueError, match="strategy"):
        step_communication("ZeRO", psi, layers, d, 8)


def test_communication_table_rows():
    rows = communication_table()
    assert len(rows) == 2 * 2 * 3
    dp_7b_8 = next(r for r in rows if (r["model"], r["gpus"], r["strategy"]) == ("7B", 8, "DP"))
    assert dp_7b_8["link"] == "NVLink 4" and dp_7b_8["comm_s"] == pytest.approx(23.59e9 / 450e9)
    dp_70b_64 = next(r for r in rows if (r["model"], r["gpus"], r["strategy"]) == ("70B", 64, "DP"))
    assert dp_70b_64["link"] == "InfiniBand NDR"
    assert dp_70b_64["comm_s"] == pytest.approx(2 * 63 / 64 * 2 * 68.98e9 / 50e9)
    assert dp_70b_64["compute_s"] == pytest.approx(6 * 68.98e9 * 4 * 2**20 / (64 * 989e12 * 0.4))
    assert dp_70b_64["model_states_gb"] == pytest.approx(16 * 68.98)
    for r in rows:
        if r["bytes_per_gpu"] is not None:
            assert r["comm_s"] == pytest.approx(r["bytes_per_gpu"] / r["bandwidth"])
    text = format_table(rows)
    assert len(text.splitlines()) == 13 and "n/a" in text
