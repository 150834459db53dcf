"""Attention masks: causal and padding masks, combining them, and converting between conventions.

The package convention is SDPA's: a boolean mask where True means "may attend", broadcastable to
(batch, heads, q_len, k_len). Two other conventions are common and `convert_mask` translates:

- "block":    boolean, True means "may NOT attend" (`nn.MultiheadAttention`'s `attn_mask`/`key_padding_mask`)
- "additive": floating point, 0 where allowed and -inf where blocked, added to the scores
"""
from __future__ import annotations

import torch
from torch import Tensor

from ._validate import broadcast_shapes, require_int, require_tensor

__all__ = ["causal_mask", "padding_mask", "combine_masks", "convert_mask", "CONVENTIONS"]

CONVENTIONS = ("allow", "block", "additive")


def causal_mask(q_len: int, k_len: int | None = None, *, device=None) -> Tensor:
    """Boolean (q_len, k_len) mask, True on and below the diagonal: query i may attend to keys 0..i."""
    require_int(q_len, "q_len", minimum=1)
    k_len = q_len if k_len is None else require_int(k_len, "k_len", minimum=1)
    return torch.ones(q_len, k_len, dtype=torch.bool, device=device).tril()  # (q_len, k_len)


def padding_mask(lengths, max_len: int | None = None) -> Tensor:
    """Boolean (batch, max_len) mask, True at the first `lengths[b]` positions (real tokens) of row b.

    For attention over keys, index it as `mask[:, None, None, :]` to get (batch, 1, 1, k_len).
    """
    if isinstance(lengths, (list, tuple)):
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in lengths):
            raise TypeError(f"lengths must hold ints, got {lengths!r}")
        lengths = torch.tensor(lengths, dtype=torch.long)
    require_tensor(lengths, "lengths")
    if lengths.dim() != 1:
        raise ValueError(f"lengths must be 1-D (one length per sequence), got shape {tuple(lengths.shape)}")
    if lengths.is_floating_point() or lengths.dtype == torch.bool or lengths.is_complex():
        raise TypeError(f"lengths must be an integer tensor, got dtype {lengths.dtype}")
    if (lengths < 0).any():
        raise ValueError(f"lengths must be non-negative, got {lengths.tolist()}")
    longest = int(lengths.max()) if lengths.numel() else 0
    if max_len is None:
        max_len = longest
    require_int(max_len, "max_len", minimum=0)
    if longest > max_len:
        raise ValueError(f"max_len={max_len} is shorter than the longest sequence ({longest})")
    positions = torch.arange(max_len, device=lengths.device)  # (max_len,)
    return positions[None, :] < lengths[:, None]  # (batch, max_len)


def combine_masks(*masks: Tensor | None) -> Tensor | None:
    """AND together boolean allow-masks (broadcasting them); None entries are skipped, all None gives None."""
    for i, m in enumerate(masks):
        if m is not None:
            require_tensor(m, f"masks[{i}]")
            if m.dtype != torch.bool:
                raise TypeError(f"masks[{i}] must be boolean (True = may attend), got dtype {m.dtype}")
    present = [m for m in masks if m is not None]
    if not present:
        return None
    try:
        shape = broadcast_shapes(*(m.shape for m in present))
    except ValueError:
        shapes = ", ".join(str(tuple(m.shape)) for m in present)
        raise ValueError(f"masks with shapes {shapes} do not broadcast together") from None
    out = torch.ones(shape, dtype=torch.bool, device=present[0].device)
    for m in present:
        out = out & m
    return out


def convert_mask(mask: Tensor, src: str, dst: str, *, dtype: torch.dtype = torch.float32) -> Tensor:
    """Translate a mask between the "allow", "block" and "additive" conventions (see the module docstring).

    An additive mask is read as blocked wherever its entry is at or below -1e4 (-inf, BERT's -10000, the -1e9
    many codes use);
    `dtype` is the floating dtype of an additive result.
    """
    for name, conv in (("src", src), ("dst", dst)):
        if conv not in CONVENTIONS:
            raise ValueError(f"{name} must be one of {CONVENTIONS}, got {conv!r}")
    require_tensor(mask, "mask")
    if src in ("allow", "block") and mask.dtype != torch.bool:
        raise TypeError(f"a {src!r} mask must be boolean, got dtype {mask.dtype}")
    if src == "additive" and not mask.is_floating_point():
        raise TypeError(f"an 'additive' mask must be floating point, got dtype {mask.dtype}")
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point dtype, got {dtype}")

    allow = {"allow": lambda: mask, "block": lambda: ~mask, "additive": lambda: mask > -1e4}[src]()
    if dst == "allow":
        return allow
    if dst == "block":
        return ~allow
    zeros = torch.zeros(allow.shape, dtype=dtype, device=allow.device)
    return zeros.masked_fill(~allow, float("-inf"))
