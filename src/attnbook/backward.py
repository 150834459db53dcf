"""FlashAttention's backward pass in plain PyTorch: gradients from O and the row log-sum-exp, by recomputation.

Autograd of naive attention keeps the (L, S) weights P of the forward to compute the gradients. FlashAttention
keeps only the output O and, for each query row, the log-sum-exp of its scaled scores, L = m + log(l) (what
`tiled_attention(..., return_lse=True)` returns): N numbers per head instead of N^2. The backward then recomputes
each block of weights, P = exp(S - L) with S = Q K^T * scale, from Q and a block of K. That costs one more matrix
product (five in the backward: S, dV, dP, dQ, dK, against the forward's two), which is cheaper than the memory.
"""
from __future__ import annotations

import torch
from torch import Tensor

from ._validate import attention_scale, require_int, require_tensor

__all__ = ["attention_backward"]


def attention_backward(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    out: Tensor,
    lse: Tensor,
    grad_out: Tensor,
    block_size: int = 64,
    is_causal: bool = False,
    scale: float | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """(dQ, dK, dV) of O = softmax(Q K^T * scale) V for the upstream gradient dO, one block of keys at a time.

    Shapes: query (..., L, E), key (..., S, E), value (..., S, Ev), out and grad_out (..., L, Ev), lse (..., L),
    all with the same batch dimensions. For every block of keys j (FlashAttention-2, Dao 2023, arXiv:2307.08691):

        P_j  = exp(Q K_j^T * scale - L)      recomputed, never stored   (1st product)
        dV_j = P_j^T dO                                                  (2nd)
        dP_j = dO V_j^T                                                  (3rd)
        dS_j = P_j * (dP_j - D),  D = rowsum(dO * O)
        dQ  += dS_j K_j * scale                                          (4th)
        dK_j = dS_j^T Q * scale                                          (5th)

    D is the row sum of P * dP, computed once from O and dO instead of from P. `is_causal` is top-left aligned
    like SDPA's. A row with no key (lse = -inf) gets zero weights and contributes nothing.
    """
    for name, t in (("query", query), ("key", key), ("value", value), ("out", out), ("grad_out", grad_out)):
        require_tensor(t, name, min_dim=2, floating=True)
    require_tensor(lse, "lse", min_dim=1, floating=True)
    require_int(block_size, "block_size", minimum=1)
    if not isinstance(is_causal, bool):
        raise TypeError(f"is_causal must be a bool, got {type(is_causal).__name__}")
    scale = attention_scale(scale, query.size(-1))
    _check_shapes(query, key, value, out, lse, grad_out)

    L, S = query.size(-2), key.size(-2)
    delta = (grad_out * out).sum(dim=-1, keepdim=True)  # (..., L, 1): D = rowsum(dO * O) = rowsum(P * dP)
    lse = lse.unsqueeze(-1).to(query.dtype)  # (..., L, 1)
    lse = torch.where(torch.isfinite(lse), lse, torch.full_like(lse, float("inf")))  # no key: exp(s - inf) = 0
    dq = torch.zeros_like(query)
    dk, dv = torch.zeros_like(key), torch.zeros_like(value)
    rows = torch.arange(L, device=query.device)[:, None]  # (L, 1) query positions, for the causal mask
    for start in range(0, S, block_size):
        stop = min(start + block_size, S)
        k_j, v_j = key[..., start:stop, :], value[..., start:stop, :]  # (..., bk, E), (..., bk, Ev)
        s = query @ k_j.transpose(-2, -1) * scale  # (..., L, bk): the forward's scores, recomputed
        if is_causal:
            cols = torch.arange(start, stop, device=query.device)[None, :]  # (1, bk) key positions
            s = s.masked_fill(cols > rows, float("-inf"))
        p = torch.exp(s - lse)  # (..., L, bk): the forward's weights, from the kept log-sum-exp
        dv[..., start:stop, :] = p.transpose(-2, -1) @ grad_out  # (..., bk, Ev)
        dp = grad_out @ v_j.transpose(-2, -1)  # (..., L, bk)
        ds = p * (dp - delta)  # (..., L, bk): the softmax's backward, row by row
        dq += ds @ k_j * scale  # (..., L, E)
        dk[..., start:stop, :] = ds.transpose(-2, -1) @ query * scale  # (..., bk, E)
    return dq, dk, dv


def _check_shapes(query, key, value, out, lse, grad_out) -> None:
    """The sizes that must agree: E between query and key, S between key and value, the rest with out's."""
    if query.size(-1) != key.size(-1):
        raise ValueError(f"query and key must have the same last dimension (E), got query {tuple(query.shape)} "
                         f"and key {tuple(key.shape)}")
    if key.shape[:-1] != value.shape[:-1]:
        raise ValueError(f"key and value must agree in every dimension but the last, got key {tuple(key.shape)} "
                         f"and value {tuple(value.shape)}")
    if query.shape[:-2] != key.shape[:-2]:
        raise ValueError(f"query and key must have the same batch dimensions, got query {tuple(query.shape)} "
                         f"and key {tuple(key.shape)}")
    want = (*query.shape[:-1], value.size(-1))
    for name, t in (("out", out), ("grad_out", grad_out)):
        if tuple(t.shape) != want:
            raise ValueError(f"{name} must have shape {want} (query's rows, value's last dimension), "
                             f"got {tuple(t.shape)}")
    if tuple(lse.shape) != tuple(query.shape[:-1]):
        raise ValueError(f"lse must have shape {tuple(query.shape[:-1])} (one number per query row), "
                         f"got {tuple(lse.shape)}")
    dtypes = {t.dtype for t in (query, key, value, out, grad_out)}
    if len(dtypes) != 1:
        raise TypeError(f"query, key, value, out and grad_out must share a dtype, got {sorted(map(str, dtypes))}")
