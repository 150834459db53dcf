"""Tests of attnbook.backward: gradients by recomputation against autograd, in float64.

The references are autograd through torch.nn.functional.scaled_dot_product_attention (MATH backend) and the
log-sum-exp from torch.logsumexp of explicitly computed scores; the FLOP count is PyTorch's FlopCounterMode.
"""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from attnbook.attention import tiled_attention
from attnbook.backward import attention_backward
from attnbook.cost import attention_backward_flops, attention_flops


def qkv(batch, L, S, E, Ev, seed):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(*batch, n, e, generator=g, dtype=torch.float64) for n, e in ((L, E), (S, E), (S, Ev)))


def autograd_grads(q, k, v, grad_out, is_causal):
    q, k, v = (t.clone().requires_grad_() for t in (q, k, v))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    out.backward(grad_out)
    return q.grad, k.grad, v.grad


def test_tiled_attention_returns_the_row_logsumexp():
    q, k, v = qkv((2, 3), 37, 53, 8, 8, seed=0)
    for causal in (False, True):
        out, lse = tiled_attention(q, k, v, block_size=16, is_causal=causal, return_lse=True)
        scores = q @ k.transpose(-2, -1) / math.sqrt(8)
        if causal:
            scores = scores.masked_fill(torch.ones(37, 53, dtype=torch.bool).tril().logical_not(), float("-inf"))
        torch.testing.assert_close(lse, torch.logsumexp(scores, dim=-1), atol=1e-12, rtol=1e-12)
        torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=causal))


@pytest.mark.parametrize("L, S, E, Ev, block", [(40, 40, 8, 8, 16), (23, 61, 4, 6, 7), (50, 30, 8, 8, 64)])
@pytest.mark.parametrize("causal", [False, True])
def test_gradients_equal_autograd(L, S, E, Ev, block, causal):
    q, k, v = qkv((2, 3), L, S, E, Ev, seed=L + S)
    grad_out = torch.randn(2, 3, L, Ev, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    out, lse = tiled_attention(q, k, v, is_causal=causal, return_lse=True)
    ours = attention_backward(q, k, v, out, lse, grad_out, block_size=block, is_causal=causal)
    for got, want in zip(ours, autograd_grads(q, k, v, grad_out, causal)):
        torch.testing.assert_close(got, want, atol=1e-10, rtol=1e-10)


def test_a_custom_scale_is_used_in_both_passes():
    q, k, v = qkv((1, 2), 20, 20, 8, 8, seed=3)
    grad_out = torch.randn(1, 2, 20, 8, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    out, lse = tiled_attention(q, k, v, scale=0.3, return_lse=True)
    ours = attention_backward(q, k, v, out, lse, grad_out, scale=0.3)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    F.scaled_dot_product_attention(*leaves, scale=0.3).backward(grad_out)
    for got, leaf in zip(ours, leaves):
        torch.testing.assert_close(got, leaf.grad, atol=1e-10, rtol=1e-10)


def test_five_matrix_products_two_and_a_half_forwards():
    B, H, N, d = 1, 2, 32, 8
    q, k, v = qkv((B, H), N, N, d, d, seed=5)
    out, lse = tiled_attention(q, k, v, return_lse=True)
    with FlopCounterMode(display=False) as counter:
        attention_backward(q, k, v, out, lse, torch.ones_like(out), block_size=8)
    assert counter.get_total_flops() == attention_backward_flops(B, H, N, N, d) == 10 * B * H * N * N * d
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = torch.softmax(leaves[0] @ leaves[1].transpose(-2, -1) / math.sqrt(d), dim=-1) @ leaves[2]
    with FlopCounterMode(display=False) as counter:  # autograd keeps P: four products, no recompute
        out.backward(torch.ones_like(out))
    assert counter.get_total_flops() == 2 * attention_flops(B, H, N, N, d)
    assert attention_backward_flops(1, 1, 10, 10, 4, causal=True) == 10 * 55 * 4


@pytest.mark.parametrize("call, error, words", [
    (lambda t, lse: attention_backward(t, t, t, t, lse, t.numpy()), TypeError, "grad_out"),
    (lambda t, lse: attention_backward(t, t, t, t, lse[..., :3], t), ValueError, "lse"),
    (lambda t, lse: attention_backward(t, t, t, t[..., :2, :], lse, t), ValueError, "out"),
    (lambda t, lse: attention_backward(t, t[..., :3], t, t, lse, t), ValueError, "query and key"),
    (lambda t, lse: attention_backward(t, t, t, t, lse, t, block_size=0), ValueError, "block_size"),
    (lambda t, lse: attention_backward(t, t, t, t, lse, t, is_causal=1), TypeError, "is_causal"),
    (lambda t, lse: attention_backward(t, t, t, t, lse, t.float()), TypeError, "dtype"),
    (lambda t, lse: tiled_attention(t, t, t, return_lse="yes"), TypeError, "return_lse"),
])
def test_arguments_are_validated(call, error, words):
    t = torch.zeros(1, 5, 4, dtype=torch.float64)
    with pytest.raises(error, match=words):
        call(t, torch.zeros(1, 5, dtype=torch.float64))
