"""attnbook.parallel.tensor_parallel: Megatron's column/row-parallel MLP and head-parallel attention, by hand and with
DTensor, equal the single-device modules (outputs, input gradients, each rank's slice of the weight gradients).

The full modules are built here (seeded, float64) and their gradients sliced here, by rows for a column-parallel
weight and by columns for a row-parallel one."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from attnbook.models.llama import LlamaAttention, SwiGLU
from attnbook.parallel.launcher import launch
from attnbook.parallel.tensor_parallel import (ParallelLlamaAttention, column_slice, dtensor_swiglu, row_slice,
                                               tp_attention, tp_swiglu)

TIMEOUT = 120
D_MODEL, D_FF, SEED = 16, 32, 7


def inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 5, D_MODEL, generator=g, dtype=torch.float64)
    grad_out = torch.randn(2, 5, D_MODEL, generator=g, dtype=torch.float64)  # backward from a random direction
    return x, grad_out


def full_run(module, x, grad_out):
    x = x.clone().requires_grad_(True)
    out = module(x)
    out.backward(grad_out)
    return out.detach(), x.grad


def assert_close(a, b):
    assert a.shape == b.shape
    assert (a - b).abs().max().item() < 1e-12


def test_column_and_row_slices_recombine_into_the_full_linear():
    torch.manual_seed(0)
    linear = nn.Linear(6, 4).double()
    x = torch.randn(3, 6, dtype=torch.float64)
    columns = [column_slice(linear, r, 2) for r in range(2)]
    assert [tuple(c.weight.shape) for c in columns] == [(2, 6), (2, 6)]
    assert_close(torch.cat([c(x) for c in columns], dim=-1), linear(x))  # output features side by side
    rows = [row_slice(linear, r, 3) for r in range(3)]
    assert [tuple(r.weight.shape) for r in rows] == [(4, 2)] * 3
    assert [r.bias is not None for r in rows] == [True, False, False]  # the bias added once
    assert_close(sum(rows[r](x[:, 2 * r:2 * r + 2]) for r in range(3)), linear(x))  # partial sums add up
    with pytest.raises(ValueError, match="not divisible by world_size=3"):
        column_slice(linear, 0, 3)


def test_head_parallel_attention_needs_whole_groups_of_heads():
    with pytest.raises(ValueError, match="n_kv_heads=2 is not divisible by world_size=4"):
        ParallelLlamaAttention(LlamaAttention(D_MODEL, 4, 2), 0, 4)


def slices(world_size, rank, n):
    k = n // world_size
    return slice(rank * k, (rank + 1) * k)


@pytest.mark.parametrize("worker", [tp_swiglu, dtensor_swiglu], ids=["by hand", "DTensor"])
def test_column_then_row_parallel_mlp_equals_the_full_swiglu(worker):
    x, grad_out = inputs()
    torch.manual_seed(SEED)
    full = SwiGLU(D_MODEL, D_FF).double()
    out, x_grad = full_run(full, x, grad_out)
    results = launch(worker, 2, D_MODEL, D_FF, SEED, x, grad_out, timeout=TIMEOUT)
    for rank, result in enumerate(results):
        assert_close(result["out"], out)
        assert_close(result["x_grad"], x_grad)
        cols = slices(2, rank, D_FF)
        grads = result["weight_grads"]
        assert_close(grads["gate_proj.weight"], full.gate_proj.weight.grad[cols])  # column-parallel: its rows
        assert_close(grads["up_proj.weight"], full.up_proj.weight.grad[cols])
        assert_close(grads["down_proj.weight"], full.down_proj.weight.grad[:, cols])  # row-parallel: its columns
        if worker is dtensor_swiglu:
            assert result["local_shapes"] == {"gate_proj.weight": (D_FF // 2, D_MODEL),
                                              "up_proj.weight": (D_FF // 2, D_MODEL),
                                              "down_proj.weight": (D_MODEL, D_FF // 2)}


def test_head_parallel_attention_equals_the_full_attention():
    x, grad_out = inputs(1)
    n_heads, n_kv_heads, d_head = 4, 2, D_MODEL // 4
    torch.manual_seed(SEED)
    full = LlamaAttention(D_MODEL, n_heads, n_kv_heads).double()
    out, x_grad = full_run(full, x, grad_out)
    results = launch(tp_attention, 2, D_MODEL, n_heads, n_kv_heads, SEED, x, grad_out, timeout=TIMEOUT)
    for rank, result in enumerate(results):
        assert_close(result["out"], out)
        assert_close(result["x_grad"], x_grad)
        q_rows = slices(2, rank, n_heads * d_head)  # query heads 2r, 2r + 1
        kv_rows = slices(2, rank, n_kv_heads * d_head)  # the key/value head they share
        grads = result["weight_grads"]
        assert_close(grads["q_proj.weight"], full.q_proj.weight.grad[q_rows])
        assert_close(grads["k_proj.weight"], full.k_proj.weight.grad[kv_rows])
        assert_close(grads["v_proj.weight"], full.v_proj.weight.grad[kv_rows])
        assert_close(grads["out_proj.weight"], full.out_proj.weight.grad[:, q_rows])
