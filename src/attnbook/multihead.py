"""Multi-head attention: splitting into heads, grouped-query attention (GQA/MQA) and a KV cache.

How causal masking works with a cache (generation):
- prompt step: pass the whole prompt with `is_causal=True` and an empty `KVCache`; this is an ordinary causal
  pass, and the prompt's keys and values are stored in the cache.
- each later step: pass the one new token; its single query may see every cached key, so `is_causal` may be
  False (True gives the same result).
- a chunk of several new tokens with a non-empty cache and `is_causal=True`: the new query i sits at absolute
  position `past + i`, so it may see keys 0..past+i (the causal mask is aligned to the bottom right of the
  (L, past + L) score matrix, not to the top left as SDPA's `is_causal` is).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import attention
from ._validate import require_broadcastable, require_int, require_tensor

__all__ = ["split_heads", "merge_heads", "repeat_kv", "KVCache", "MultiHeadAttention"]


def split_heads(x: Tensor, n_heads: int) -> Tensor:
    """(B, n, d) -> (B, h, n, d/h): cut the feature dimension into `n_heads` heads of d/h features."""
    require_tensor(x, "x")
    if x.dim() != 3:
        raise ValueError(f"x must be 3-D (batch, seq, d_model), got shape {tuple(x.shape)}")
    require_int(n_heads, "n_heads", minimum=1)
    B, n, d = x.shape
    if d % n_heads:
        raise ValueError(f"the last dimension of x, d={d}, is not divisible by n_heads={n_heads}")
    x = x.reshape(B, n, n_heads, d // n_heads)  # (B, n, h, d_head), a view when x is contiguous
    return x.transpose(1, 2)  # (B, h, n, d_head)


def merge_heads(x: Tensor) -> Tensor:
    """(B, h, n, d_head) -> (B, n, h*d_head): the inverse of `split_heads`."""
    require_tensor(x, "x")
    if x.dim() != 4:
        raise ValueError(f"x must be 4-D (batch, heads, seq, d_head), got shape {tuple(x.shape)}")
    B, h, n, d_head = x.shape
    return x.transpose(1, 2).reshape(B, n, h * d_head)  # (B, n, h, d_head) -> (B, n, h*d_head)


def repeat_kv(x: Tensor, n_rep: int) -> Tensor:
    """(B, n_kv, S, d) -> (B, n_kv*n_rep, S, d), each key/value head repeated `n_rep` times in a row (as LLaMA)."""
    require_tensor(x, "x")
    if x.dim() != 4:
        raise ValueError(f"x must be 4-D (batch, n_kv_heads, seq, d_head), got shape {tuple(x.shape)}")
    require_int(n_rep, "n_rep", minimum=1)
    if n_rep == 1:
        return x
    B, n_kv, S, d = x.shape
    x = x[:, :, None].expand(B, n_kv, n_rep, S, d)  # (B, n_kv, n_rep, S, d), no copy yet
    return x.reshape(B, n_kv * n_rep, S, d)  # (B, n_kv*n_rep, S, d): heads kv0, kv0, .., kv1, kv1, ..


class KVCache:
    """The keys and values seen so far, (B, n_kv_heads, S, d_head) each, grown along S by `update`."""

    def __init__(self):
        self.k: Tensor | None = None
        self.v: Tensor | None = None

    @property
    def seq_len(self) -> int:
        """Number of cached positions (0 when empty)."""
        return 0 if self.k is None else self.k.size(2)

    def update(self, k_new: Tensor, v_new: Tensor) -> tuple[Tensor, Tensor]:
        """Append (B, n_kv, S_new, d_head) keys and values; return the whole cache (B, n_kv, S + S_new, d_head)."""
        for name, t in (("k_new", k_new), ("v_new", v_new)):
            require_tensor(t, name, floating=True)
            if t.dim() != 4:
                raise ValueError(f"{name} must be 4-D (batch, n_kv_heads, seq, d_head), got shape {tuple(t.shape)}")
        if k_new.shape[:3] != v_new.shape[:3] or k_new.dtype != v_new.dtype:
            raise ValueError(
                f"k_new and v_new must agree in batch, heads, length and dtype, got {tuple(k_new.shape)} "
                f"{k_new.dtype} and {tuple(v_new.shape)} {v_new.dtype}"
            )
        if self.k is None:
            self.k, self.v = k_new, v_new
            return self.k, self.v
        for name, new, old in (("k_new", k_new, self.k), ("v_new", v_new, self.v)):
            if new.shape[:2] != old.shape[:2] or new.shape[3] != old.shape[3] or new.dtype != old.dtype:
                raise ValueError(
                    f"{name} of shape {tuple(new.shape)} and dtype {new.dtype} does not fit the cache of "
                    f"shape {tuple(old.shape)} and dtype {old.dtype} (only the length, dim 2, may differ)"
                )
        self.k = torch.cat([self.k, k_new], dim=2)  # (B, n_kv, S + S_new, d_head)
        self.v = torch.cat([self.v, v_new], dim=2)  # (B, n_kv, S + S_new, d_head)
        return self.k, self.v

    def nbytes(self) -> int:
        """Bytes of memory held by the cached tensors (their storages, each counted once)."""
        storages = {}
        for t in (self.k, self.v):
            if t is not None:
                s = t.untyped_storage()
                storages[s.data_ptr()] = s.nbytes()
        return sum(storages.values())

    def reset(self) -> None:
        """Empty the cache."""
        self.k = self.v = None

    def __repr__(self) -> str:
        shape = None if self.k is None else tuple(self.k.shape)
        return f"KVCache(seq_len={self.seq_len}, shape={shape})"


class MultiHeadAttention(nn.Module):
    """Multi-head attention (batch first) with grouped-query attention when n_kv_heads < n_heads."""

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int | None = None, dropout: float = 0.0,
                 bias: bool = True):
        super().__init__()
        require_int(d_model, "d_model", minimum=1)
        require_int(n_heads, "n_heads", minimum=1)
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        n_kv_heads = n_heads if n_kv_heads is None else require_int(n_kv_heads, "n_kv_heads", minimum=1)
        if n_heads % n_kv_heads:
            raise ValueError(f"n_heads={n_heads} is not divisible by n_kv_heads={n_kv_heads}")
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be a float in [0, 1), got {dropout!r}")
        if not isinstance(bias, bool):
            raise TypeError(f"bias must be a bool, got {type(bias).__name__}")
        self.d_model, self.n_heads, self.n_kv_heads = d_model, n_heads, n_kv_heads
        self.d_head = d_model // n_heads
        self.n_rep = n_heads // n_kv_heads  # query heads per key/value head
        self.dropout = float(dropout)
        kv_dim = n_kv_heads * self.d_head
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, kv_dim, bias=bias)
        self.v_proj = nn.Linear(d_model, kv_dim, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        attn_mask: Tensor | None = None,
        is_causal: bool = False,
        need_weights: bool = False,
        average_attn_weights: bool = True,
        cache: KVCache | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """query (B, L, d_model), key/value (B, S, d_model) -> output (B, L, d_model), weights or None.

        `attn_mask` broadcasts to (B, n_heads, L, S_total): boolean with True = may attend, or floating point
        and added to the scores. Weights, when `need_weights`, are (B, L, S_total) averaged over heads, or
        (B, n_heads, L, S_total) with `average_attn_weights=False`. With a `cache`, the new keys and values are
        appended to it and attention runs over all of it (S_total = cached + S; see the module docstring).
        """
        self._check_inputs(query, key, value, is_causal, need_weights, average_attn_weights, cache)
        past = 0 if cache is None else cache.seq_len
        B, L, S_total = query.size(0), query.size(1), past + key.size(1)
        if attn_mask is not None:  # checked before the cache grows, so a bad call leaves it unchanged
            if is_causal:
                raise ValueError("pass either attn_mask or is_causal=True, not both")
            self._check_mask(attn_mask, (B, self.n_heads, L, S_total), query.dtype)
        q = split_heads(self.q_proj(query), self.n_heads)  # (B, h, L, d_head)
        k = split_heads(self.k_proj(key), self.n_kv_heads)  # (B, h_kv, S, d_head)
        v = split_heads(self.v_proj(value), self.n_kv_heads)  # (B, h_kv, S, d_head)
        if cache is not None:
            k, v = cache.update(k, v)  # (B, h_kv, past + S, d_head)
        k, v = repeat_kv(k, self.n_rep), repeat_kv(v, self.n_rep)  # (B, h, S_total, d_head)
        if is_causal and past > 0:  # query i is position past + i: bottom-right aligned causal mask
            attn_mask = torch.ones(L, S_total, dtype=torch.bool, device=q.device).tril(past)  # (L, S_total)
            is_causal = False
        dropout_p = self.dropout if self.training else 0.0

        if need_weights:
            out, weights = attention.scaled_dot_product_attention(
                q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal
            )  # (B, h, L, d_head), (B, h, L, S_total)
            if average_attn_weights:
                weights = weights.mean(dim=1)  # (B, L, S_total)
        else:
            weights = None
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal
            )  # (B, h, L, d_head)
            if attn_mask is not None:
                # A query row with no allowed key: zeros, never NaN. torch 2.13's CPU kernels already give 0,
                # but not every backend and version does, so make it explicit (costs one reduction of the mask).
                allowed = attn_mask if attn_mask.dtype == torch.bool else attn_mask != float("-inf")
                dead = ~allowed.any(dim=-1, keepdim=True)  # (..., L, 1)
                out = out.masked_fill(dead, 0.0)
        return self.out_proj(merge_heads(out)), weights  # (B, L, d_model)

    def _check_inputs(self, query, key, value, is_causal, need_weights, average_attn_weights, cache) -> None:
        """Validate the forward arguments other than the mask."""
        for name, t in (("query", query), ("key", key), ("value", value)):
            require_tensor(t, name, floating=True)
            if t.dim() != 3 or t.size(-1) != self.d_model:
                raise ValueError(
                    f"{name} must have shape (batch, seq, d_model={self.d_model}), got {tuple(t.shape)}"
                )
        if not query.size(0) == key.size(0) == value.size(0):
            raise ValueError(
                f"query, key and value must have the same batch size, got {query.size(0)}, {key.size(0)} "
                f"and {value.size(0)}"
            )
        if key.size(1) != value.size(1):
            raise ValueError(f"key and value must have the same length, got {key.size(1)} and {value.size(1)}")
        for name, flag in (("is_causal", is_causal), ("need_weights", need_weights),
                           ("average_attn_weights", average_attn_weights)):
            if not isinstance(flag, bool):
                raise TypeError(f"{name} must be a bool, got {type(flag).__name__}")
        if cache is not None and not isinstance(cache, KVCache):
            raise TypeError(f"cache must be a KVCache or None, got {type(cache).__name__}")

    @staticmethod
    def _check_mask(attn_mask, target: tuple, dtype: torch.dtype) -> None:
        """Validate attn_mask's type, dtype and that it broadcasts to (B, h, L, S_total)."""
        require_tensor(attn_mask, "attn_mask")
        if attn_mask.dtype != torch.bool and not attn_mask.is_floating_point():
            raise TypeError(
                f"attn_mask must be boolean (True = may attend) or floating point (added to the scores), "
                f"got dtype {attn_mask.dtype}"
            )
        if attn_mask.is_floating_point() and attn_mask.dtype != dtype:
            raise TypeError(f"a floating-point attn_mask must have the dtype of query ({dtype}), got {attn_mask.dtype}")
        require_broadcastable(attn_mask.shape, target, "attn_mask", "(batch, n_heads, q_len, k_len)")

    @classmethod
    def from_torch(cls, m: nn.MultiheadAttention) -> "MultiHeadAttention":
        """A MultiHeadAttention with the weights of `m` (an nn.MultiheadAttention), so that the two agree.

        `m.batch_first` does not matter (the weights are the same); ours always takes (batch, seq, d_model).
        """
        if not isinstance(m, nn.MultiheadAttention):
            raise TypeError(f"m must be an nn.MultiheadAttention, got {type(m).__name__}")
        if not m._qkv_same_embed_dim:
            raise ValueError(
                f"m has kdim={m.kdim}, vdim={m.vdim} different from embed_dim={m.embed_dim}, which is not supported"
            )
        if m.bias_k is not None:
            raise ValueError("m was built with add_bias_kv=True, which is not supported")
        if m.add_zero_attn:
            raise ValueError("m was built with add_zero_attn=True, which is not supported")
        w = m.in_proj_weight
        new = cls(m.embed_dim, m.num_heads, dropout=m.dropout, bias=m.in_proj_bias is not None)
        new.to(device=w.device, dtype=w.dtype)
        with torch.no_grad():
            for proj, w_part in zip((new.q_proj, new.k_proj, new.v_proj), w.chunk(3, dim=0)):
                proj.weight.copy_(w_part)  # in_proj_weight is [W_q; W_k; W_v], each (d_model, d_model)
            if m.in_proj_bias is not None:
                for proj, b_part in zip((new.q_proj, new.k_proj, new.v_proj), m.in_proj_bias.chunk(3)):
                    proj.bias.copy_(b_part)
            new.out_proj.weight.copy_(m.out_proj.weight)
            if m.out_proj.bias is not None:
                new.out_proj.bias.copy_(m.out_proj.bias)
        return new.train(m.training)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_heads={self.n_heads}, n_kv_heads={self.n_kv_heads}, dropout={self.dropout}"
