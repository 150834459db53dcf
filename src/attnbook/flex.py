"""Masks and score modifications for FlexAttention (`torch.nn.attention.flex_attention`), chapter 9.

FlexAttention (Dong et al. 2024, arXiv:2412.05496) takes attention variants as two small functions of scalar
indices: a `mask_mod(b, h, q_idx, kv_idx) -> bool` says whether a query may see a key, and a
`score_mod(score, b, h, q_idx, kv_idx) -> score` changes a score before the softmax. `create_block_mask` turns a
mask_mod into a `BlockMask`, which lists the (query block, key block) tiles that hold any allowed pair: a compiled
kernel skips the others. The factories here build the functions; `block_counts` counts the tiles.

Every function uses only tensor operations, so it also works on whole index tensors at once
(`mask_mod(0, 0, q[:, None], k[None, :])` is the dense (L, S) mask), which is how the tests and the chapter build
the dense references for SDPA.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from ._validate import require_int, require_tensor

__all__ = ["sliding_window", "document_mask", "alibi_slopes", "alibi", "block_counts"]


def sliding_window(window: int, causal: bool = True):
    """mask_mod: query i sees the keys j with |i - j| < `window` (only j <= i when `causal`, as in Mistral)."""
    require_int(window, "window", minimum=1)
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, got {type(causal).__name__}")

    def mask_mod(b, h, q_idx, kv_idx):
        near = (q_idx - kv_idx).abs() < window
        return near & (kv_idx <= q_idx) if causal else near

    mask_mod.__name__ = f"sliding_window_{window}{'_causal' if causal else ''}"
    return mask_mod


def document_mask(document_ids: Tensor, causal: bool = True):
    """mask_mod for packed sequences: position i sees position j only in the same document (and j <= i).

    `document_ids` is a 1-D integer tensor, one document number per position of the packed sequence (queries and
    keys are the same positions).
    """
    require_tensor(document_ids, "document_ids")
    if document_ids.dim() != 1 or document_ids.is_floating_point() or document_ids.dtype == torch.bool:
        raise TypeError(f"document_ids must be a 1-D integer tensor, got dtype {document_ids.dtype} and shape "
                        f"{tuple(document_ids.shape)}")
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, got {type(causal).__name__}")

    def mask_mod(b, h, q_idx, kv_idx):
        same = document_ids[q_idx] == document_ids[kv_idx]
        return same & (kv_idx <= q_idx) if causal else same

    mask_mod.__name__ = "document_causal" if causal else "document"
    return mask_mod


def alibi_slopes(n_heads: int) -> Tensor:
    """ALiBi's slope per head (Press et al. 2021, arXiv:2108.12409), a float32 tensor of shape (n_heads,).

    For a power of two n: the geometric sequence 2^(-8/n), 2^(-16/n), ..., 2^(-8). Otherwise the paper's code
    takes the slopes of the power of two below n and fills up with every other slope of twice that power.
    """
    require_int(n_heads, "n_heads", minimum=1)

    def geometric(n):
        return [2.0 ** (-8.0 * (i + 1) / n) for i in range(n)]

    base = 2 ** math.floor(math.log2(n_heads))
    slopes = geometric(base) + geometric(2 * base)[0::2][: n_heads - base]
    return torch.tensor(slopes, dtype=torch.float32)


def alibi(n_heads: int, device=None):
    """score_mod: ALiBi's linear bias, score - slope[h] * (q_idx - kv_idx); no positional embedding needed.

    `device` is where the attention runs (the slopes are indexed by the head index, a tensor on that device).
    """
    slopes = alibi_slopes(n_heads).to(device)

    def score_mod(score, b, h, q_idx, kv_idx):
        return score + (slopes[h] * (kv_idx - q_idx)).to(score.dtype)

    score_mod.__name__ = f"alibi_{n_heads}_heads"
    return score_mod


def block_counts(block_mask) -> tuple[int, int]:
    """(tiles computed, tiles in all) of a FlexAttention `BlockMask`, over its batch, heads and tiles.

    A tile is computed when any of its (query, key) pairs is allowed: partly (its mask_mod is applied) or fully.
    The rest are skipped by a compiled kernel. Dense attention computes every tile.
    """
    from torch.nn.attention.flex_attention import BlockMask

    if not isinstance(block_mask, BlockMask):
        raise TypeError(f"block_mask must be a torch.nn.attention.flex_attention.BlockMask, "
                        f"got {type(block_mask).__name__}")
    computed = int(block_mask.kv_num_blocks.sum())
    if block_mask.full_kv_num_blocks is not None:
        computed += int(block_mask.full_kv_num_blocks.sum())
    *batch, q_len, kv_len = block_mask.shape
    q_block, kv_block = block_mask.BLOCK_SIZE
    total = math.prod(batch) * math.ceil(q_len / q_block) * math.ceil(kv_len / kv_block)
    return computed, total
