"""Attention from scratch: a stable softmax and scaled dot-product attention that also returns its weights."""
from __future__ import annotations

import torch
from torch import Tensor

from ._validate import (attention_scale, broadcast_shapes, require_broadcastable, require_dim, require_int,
                        require_tensor)

__all__ = ["softmax", "scaled_dot_product_attention", "tiled_attention"]


def softmax(x: Tensor, dim: int = -1) -> Tensor:
    """Softmax along `dim`, shifted by the maximum so that logits of +-1000 neither overflow nor underflow.

    A slice that is entirely -inf (nothing allowed) gives zeros instead of NaN.
    """
    require_tensor(x, "x", floating=True)
    dim = require_dim(dim, x.dim())
    if x.size(dim) == 0:  # nothing to normalise (e.g. attention over zero keys)
        return x.clone()
    x_max = x.amax(dim=dim, keepdim=True)
    x_max = torch.where(torch.isfinite(x_max), x_max, torch.zeros_like(x_max))  # all -inf slice: shift by 0
    e = torch.exp(x - x_max)  # every exponent <= 0, so every term is in [0, 1]
    total = e.sum(dim=dim, keepdim=True)  # >= 1 unless the whole slice is -inf
    return e / total.clamp_min(torch.finfo(x.dtype).tiny)


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
) -> tuple[Tensor, Tensor]:
    """softmax(Q K^T * scale + mask) V, with the arguments of `torch.nn.functional.scaled_dot_product_attention`.

    Shapes: query (..., L, E), key (..., S, E), value (..., S, Ev) -> output (..., L, Ev), weights (..., L, S).
    `attn_mask` broadcasts to (..., L, S): boolean with True = may attend, or floating point and added to
    the scores. A query row with no key allowed gets zero weights and a zero output, never NaN.
    """
    _check_qkv(query, key, value)
    L, S = query.size(-2), key.size(-2)
    if not isinstance(dropout_p, (int, float)) or isinstance(dropout_p, bool) or not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be a float in [0, 1), got {dropout_p!r}")
    if not isinstance(is_causal, bool):
        raise TypeError(f"is_causal must be a bool, got {type(is_causal).__name__}")
    if is_causal and attn_mask is not None:
        raise ValueError("pass either attn_mask or is_causal=True, not both")
    scale = attention_scale(scale, query.size(-1))

    scores = query @ key.transpose(-2, -1) * scale  # (..., L, S)
    if is_causal:
        attn_mask = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()  # (L, S), top-left aligned
    if attn_mask is not None:
        _check_mask(attn_mask, scores)
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    weights = softmax(scores, dim=-1)  # (..., L, S); rows sum to 1, fully masked rows are 0
    if dropout_p > 0.0:
        weights = torch.nn.functional.dropout(weights, p=dropout_p)
    return weights @ value, weights  # (..., L, Ev), (..., L, S)


def tiled_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    block_size: int = 64,
    is_causal: bool = False,
    scale: float | None = None,
    return_lse: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """FlashAttention's online softmax in plain PyTorch: SDPA's output without ever holding the (L, S) scores.

    Keys and values are read in blocks of `block_size` positions. For every query row we keep a running
    maximum `m`, a running sum `l` of exp(score - m) and a running output `acc` (the weighted sum of values
    seen so far, also relative to `m`); when a block raises the maximum, the old `l` and `acc` are rescaled
    by exp(m_old - m_new). After the last block, acc / l is exactly softmax(scores) @ value. The largest
    temporary is one (L, block_size) block of scores, so memory grows as O(L * block_size), not O(L * S).
    (A GPU kernel also splits the queries into blocks and runs them in parallel; see `attnbook.kernels`.)

    Shapes as SDPA: query (..., L, E), key (..., S, E), value (..., S, Ev) -> (..., L, Ev). `is_causal` is
    top-left aligned like SDPA's (query i sees keys 0..i). A row with no key at all (S = 0) gives zeros.
    float16/bfloat16 inputs keep their statistics in float32, as FlashAttention does.

    With `return_lse=True` it also returns what FlashAttention's forward keeps for its backward: the log-sum-exp
    of every row of scaled scores, m + log(l), of shape (..., L) and in the statistics' dtype (-inf for a row with
    no key). `attnbook.backward.attention_backward` recomputes the weights from it.
    """
    _check_qkv(query, key, value)
    require_int(block_size, "block_size", minimum=1)
    for name, flag in (("is_causal", is_causal), ("return_lse", return_lse)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be a bool, got {type(flag).__name__}")
    scale = attention_scale(scale, query.size(-1))

    L, S, Ev = query.size(-2), key.size(-2), value.size(-1)
    batch = broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    stat_dtype = torch.float32 if query.dtype in (torch.float16, torch.bfloat16) else query.dtype
    q = query * scale  # (..., L, E): scale once, not once per block
    m = torch.full((*batch, L, 1), float("-inf"), dtype=stat_dtype, device=query.device)  # running max
    l = torch.zeros((*batch, L, 1), dtype=stat_dtype, device=query.device)  # running sum of exp(s - m)
    acc = torch.zeros((*batch, L, Ev), dtype=stat_dtype, device=query.device)  # running sum of exp(s - m) v
    rows = torch.arange(L, device=query.device)[:, None]  # (L, 1) query positions, for the causal mask
    last_key = min(S, L) if is_causal else S  # with a causal mask, keys at positions >= L are never seen
    for start in range(0, last_key, block_size):
        stop = min(start + block_size, last_key)
        s = (q @ key[..., start:stop, :].transpose(-2, -1)).to(stat_dtype)  # (..., L, bk): one block of scores
        if is_causal:
            cols = torch.arange(start, stop, device=query.device)[None, :]  # (1, bk) key positions
            s = s.masked_fill(cols > rows, float("-inf"))  # (..., L, bk)
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))  # (..., L, 1)
        m_safe = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))  # no key seen yet: shift by 0
        p = torch.exp(s - m_safe)  # (..., L, bk), every entry in [0, 1]
        alpha = torch.exp(m - m_safe)  # (..., L, 1): rescales what was accumulated under the old maximum
        l = alpha * l + p.sum(dim=-1, keepdim=True)  # (..., L, 1)
        acc = alpha * acc + (p.to(value.dtype) @ value[..., start:stop, :]).to(stat_dtype)  # (..., L, Ev)
        m = m_new
    out = (acc / l.clamp_min(torch.finfo(stat_dtype).tiny)).to(query.dtype)  # (..., L, Ev); no key -> 0
    if return_lse:
        return out, (m + torch.log(l)).squeeze(-1)  # (..., L): log of the softmax's denominator, -inf if no key
    return out


def _check_qkv(query, key, value) -> None:
    """Validate types, dtypes and the sizes that must agree between query, key and value."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        require_tensor(t, name, min_dim=2, floating=True)
    if not query.dtype == key.dtype == value.dtype:
        raise TypeError(
            f"query, key and value must share a dtype, got {query.dtype}, {key.dtype} and {value.dtype}"
        )
    if query.size(-1) != key.size(-1):
        raise ValueError(
            f"query and key must have the same last dimension (E), got query {tuple(query.shape)} "
            f"and key {tuple(key.shape)}"
        )
    if key.size(-2) != value.size(-2):
        raise ValueError(
            f"key and value must have the same number of positions (dim -2), got key {tuple(key.shape)} "
            f"and value {tuple(value.shape)}"
        )
    try:
        broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    except ValueError:
        raise ValueError(
            f"the batch dimensions of query {tuple(query.shape)}, key {tuple(key.shape)} and "
            f"value {tuple(value.shape)} do not broadcast"
        ) from None


def _check_mask(attn_mask, scores: Tensor) -> None:
    """Validate attn_mask's type, dtype and shape against the score matrix it is applied to."""
    require_tensor(attn_mask, "attn_mask")
    if attn_mask.dtype != torch.bool and not attn_mask.is_floating_point():
        raise TypeError(
            f"attn_mask must be boolean (True = may attend) or floating point (added to the scores), "
            f"got dtype {attn_mask.dtype}"
        )
    if attn_mask.is_floating_point() and attn_mask.dtype != scores.dtype:
        raise TypeError(f"a floating-point attn_mask must have the dtype of query ({scores.dtype}), got {attn_mask.dtype}")
    require_broadcastable(attn_mask.shape, scores.shape, "attn_mask", "the attention scores (..., L, S)")
