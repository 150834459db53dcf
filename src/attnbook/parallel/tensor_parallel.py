"""Tensor parallelism (Megatron-LM, Shoeybi et al. 2019, arXiv:1909.08053): one layer's matrices split over ranks.

The MLP. Cut the first matrices by output features (column-parallel: rank r computes features r·k .. (r+1)·k
of the hidden layer, k = d_ff / N, with its rows of W_gate and W_up) and the last by input features
(row-parallel: rank r multiplies its k hidden features by its k columns of W_down). Each rank then holds a
partial sum of the output, and one all-reduce adds them. The elementwise SwiGLU between needs nothing from
the other ranks, which is why the split goes columns first, rows second.

Attention splits the same way by heads: rank r computes heads r·h .. (r+1)·h with its rows of W_q, W_k, W_v and
its columns of W_o, then one all-reduce. (With grouped-query attention, each rank takes its key/value heads with
the query heads that share them, so n_kv_heads must be divisible by N.)

Backward mirrors it with Megatron's two operators: `copy_to_parallel` (f: identity forward, all-reduce of the
input's gradient backward, since every rank's slice contributes to it) and `reduce_from_parallel` (g: all-reduce
forward, identity backward). One all-reduce forward and one backward per MLP and per attention.

`ParallelSwiGLU` and `ParallelLlamaAttention` take a full module and keep the rank's slices, so their outputs
compare with the full module's. `tp_swiglu`, `tp_attention` and `dtensor_swiglu` are launched workers; the last
does the same with PyTorch's DTensor (`parallelize_module` with `ColwiseParallel` and `RowwiseParallel` on a
`DeviceMesh` of CPU processes).
"""
from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn

from ..models.llama import LlamaAttention, SwiGLU
from ..multihead import merge_heads, repeat_kv, split_heads
from ..positional import apply_rope

__all__ = ["copy_to_parallel", "reduce_from_parallel", "column_slice", "row_slice", "ParallelSwiGLU",
           "ParallelLlamaAttention", "full_swiglu", "full_attention", "tp_swiglu", "tp_attention", "dtensor_swiglu"]


class _CopyToParallel(torch.autograd.Function):
    """Megatron's f: identity forward; backward, the gradient summed over the ranks."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad)
        return grad


class _ReduceFromParallel(torch.autograd.Function):
    """Megatron's g: forward, the partial results summed over the ranks; identity backward."""

    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


def copy_to_parallel(x: Tensor) -> Tensor:
    """x itself forward; in backward its gradient is all-reduced (each rank's slice of the layer contributes)."""
    return _CopyToParallel.apply(x)


def reduce_from_parallel(x: Tensor) -> Tensor:
    """The sum of x over the ranks (an all-reduce) forward; the gradient passes through unchanged backward."""
    return _ReduceFromParallel.apply(x)


def _part(n: int, rank: int, world_size: int, what: str) -> slice:
    if n % world_size:
        raise ValueError(f"{what}={n} is not divisible by world_size={world_size}")
    k = n // world_size
    return slice(rank * k, (rank + 1) * k)


def column_slice(linear: nn.Linear, rank: int, world_size: int) -> nn.Linear:
    """A new Linear with rows rank·k .. (rank+1)·k of linear's weight (k = out_features / world_size): the
    rank's output features (column-parallel: Megatron writes Y = XA and splits A by columns)."""
    rows = _part(linear.out_features, rank, world_size, "out_features")
    part = nn.Linear(linear.in_features, rows.stop - rows.start, bias=linear.bias is not None,
                     dtype=linear.weight.dtype)
    with torch.no_grad():
        part.weight.copy_(linear.weight[rows])  # (k, in)
        if linear.bias is not None:
            part.bias.copy_(linear.bias[rows])
    return part


def row_slice(linear: nn.Linear, rank: int, world_size: int) -> nn.Linear:
    """A new Linear with columns rank·k .. (rank+1)·k of linear's weight (k = in_features / world_size): it
    takes the rank's input features and returns a partial sum (row-parallel). A bias is kept by rank 0 only, so
    that the sum over ranks adds it once."""
    cols = _part(linear.in_features, rank, world_size, "in_features")
    has_bias = linear.bias is not None and rank == 0
    part = nn.Linear(cols.stop - cols.start, linear.out_features, bias=has_bias, dtype=linear.weight.dtype)
    with torch.no_grad():
        part.weight.copy_(linear.weight[:, cols])  # (out, k)
        if has_bias:
            part.bias.copy_(linear.bias)
    return part


class ParallelSwiGLU(nn.Module):
    """The rank's share of a SwiGLU: gate_proj and up_proj column-parallel, down_proj row-parallel; one
    all-reduce forward. Call it on the same input on every rank; every rank gets the full output."""

    def __init__(self, full: SwiGLU, rank: int, world_size: int):
        super().__init__()
        if not isinstance(full, SwiGLU):
            raise TypeError(f"full must be a SwiGLU, got {type(full).__name__}")
        self.gate_proj = column_slice(full.gate_proj, rank, world_size)
        self.up_proj = column_slice(full.up_proj, rank, world_size)
        self.down_proj = row_slice(full.down_proj, rank, world_size)

    def forward(self, x: Tensor) -> Tensor:
        """(..., d_model) -> (..., d_model)."""
        x = copy_to_parallel(x)
        h = F.silu(self.gate_proj(x)) * self.up_proj(x)  # (..., d_ff / N): this rank's hidden features
        return reduce_from_parallel(self.down_proj(h))  # (..., d_model): the partial sums, added


class ParallelLlamaAttention(nn.Module):
    """The rank's heads of a LlamaAttention (n_heads / N query heads with their n_kv_heads / N key/value heads);
    W_o row-parallel; one all-reduce forward."""

    def __init__(self, full: LlamaAttention, rank: int, world_size: int):
        super().__init__()
        if not isinstance(full, LlamaAttention):
            raise TypeError(f"full must be a LlamaAttention, got {type(full).__name__}")
        if full.n_kv_heads % world_size:
            raise ValueError(f"n_kv_heads={full.n_kv_heads} is not divisible by world_size={world_size}: "
                             "each rank needs whole groups of heads")
        self.n_heads, self.n_kv_heads = full.n_heads // world_size, full.n_kv_heads // world_size
        self.rope_base = full.rope_base
        self.q_proj = column_slice(full.q_proj, rank, world_size)  # its query heads: whole heads, in order
        self.k_proj = column_slice(full.k_proj, rank, world_size)
        self.v_proj = column_slice(full.v_proj, rank, world_size)
        self.out_proj = row_slice(full.out_proj, rank, world_size)

    def forward(self, x: Tensor) -> Tensor:
        """(B, T, d_model) -> (B, T, d_model), causal."""
        x = copy_to_parallel(x)
        q = split_heads(self.q_proj(x), self.n_heads)  # (B, nh / N, T, hs)
        k = split_heads(self.k_proj(x), self.n_kv_heads)  # (B, nkv / N, T, hs)
        v = split_heads(self.v_proj(x), self.n_kv_heads)  # (B, nkv / N, T, hs)
        q, k = apply_rope(q, base=self.rope_base), apply_rope(k, base=self.rope_base)
        n_rep = self.n_heads // self.n_kv_heads
        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # (B, nh / N, T, hs)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, nh / N, T, hs)
        return reduce_from_parallel(self.out_proj(merge_heads(y)))  # (B, T, d_model)


def full_swiglu(d_model: int, d_ff: int, seed: int) -> SwiGLU:
    """SwiGLU(d_model, d_ff) built after torch.manual_seed(seed), in float64: the same on every rank."""
    torch.manual_seed(seed)
    return SwiGLU(d_model, d_ff).double()


def full_attention(d_model: int, n_heads: int, n_kv_heads: int, seed: int) -> LlamaAttention:
    """LlamaAttention(d_model, n_heads, n_kv_heads) built after torch.manual_seed(seed), in float64."""
    torch.manual_seed(seed)
    return LlamaAttention(d_model, n_heads, n_kv_heads).double()


def _run(module: nn.Module, x: Tensor, grad_out: Tensor) -> dict:
    x = x.clone().requires_grad_(True)
    out = module(x)
    out.backward(grad_out)
    return {"out": out.detach(), "x_grad": x.grad,
            "weight_grads": {name: p.grad for name, p in module.named_parameters()}}


def tp_swiglu(rank: int, world_size: int, d_model: int, d_ff: int, seed: int, x: Tensor, grad_out: Tensor) -> dict:
    """Launched worker: `ParallelSwiGLU` of `full_swiglu(d_model, d_ff, seed)` on x, backward from grad_out.
    Returns out, x_grad and the gradients of the rank's weight slices (weight_grads by name)."""
    return _run(ParallelSwiGLU(full_swiglu(d_model, d_ff, seed), rank, world_size), x, grad_out)


def tp_attention(rank: int, world_size: int, d_model: int, n_heads: int, n_kv_heads: int, seed: int, x: Tensor,
                 grad_out: Tensor) -> dict:
    """Launched worker: `ParallelLlamaAttention` of `full_attention(...)` on x, backward from grad_out."""
    full = full_attention(d_model, n_heads, n_kv_heads, seed)
    return _run(ParallelLlamaAttention(full, rank, world_size), x, grad_out)


def dtensor_swiglu(rank: int, world_size: int, d_model: int, d_ff: int, seed: int, x: Tensor,
                   grad_out: Tensor) -> dict:
    """Launched worker: the same MLP with DTensor: `parallelize_module(full_swiglu(...), mesh, {"gate_proj":
    ColwiseParallel(), "up_proj": ColwiseParallel(), "down_proj": RowwiseParallel()})` on a 1-D CPU DeviceMesh.
    Returns out, x_grad, weight_grads (each rank's local shard of each weight's gradient) and the local weight
    shapes."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh("cpu", (world_size,))
    plan = {"gate_proj": ColwiseParallel(), "up_proj": ColwiseParallel(), "down_proj": RowwiseParallel()}
    module = parallelize_module(full_swiglu(d_model, d_ff, seed), mesh, plan)  # weights become sharded DTensors
    x = x.clone().requires_grad_(True)
    out = module(x)  # a plain (replicated) tensor: RowwiseParallel all-reduces its output
    out.backward(grad_out)
    return {"out": torch.as_tensor(out.detach()).clone(), "x_grad": x.grad,
            "weight_grads": {n: p.grad.to_local().clone() for n, p in module.named_parameters()},
            "local_shapes": {n: tuple(p.to_local().shape) for n, p in module.named_parameters()}}
