"""Argument checks shared by the package: each raises TypeError/ValueError naming the argument."""
from __future__ import annotations

import math

import torch
from torch import Tensor


def attention_scale(scale, head_dim: int) -> float:
    """`scale`, or 1/sqrt(head_dim) when it is None (SDPA's default); a bool or non-number raises TypeError."""
    if scale is None:
        return 1.0 / math.sqrt(head_dim)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise TypeError(f"scale must be a float or None, got {type(scale).__name__}")
    return scale


def require_tensor(x, name: str, *, min_dim: int = 0, floating: bool = False) -> Tensor:
    """Return `x` if it is a tensor with at least `min_dim` dims (and floating point when asked)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() < min_dim:
        raise ValueError(f"{name} must have at least {min_dim} dimensions, got shape {tuple(x.shape)}")
    if floating and not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    return x


def require_dim(dim, ndim: int, name: str = "dim") -> int:
    """Return `dim` as a non-negative index into a tensor with `ndim` dimensions."""
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"{name} must be an int, got {type(dim).__name__}")
    if not -max(ndim, 1) <= dim < max(ndim, 1):
        raise ValueError(f"{name}={dim} is out of range for a tensor with {ndim} dimensions")
    return dim % max(ndim, 1)


def require_int(x, name: str, *, minimum: int | None = None) -> int:
    """Return `x` if it is an int (not a bool) no smaller than `minimum`."""
    if isinstance(x, bool) or not isinstance(x, int):
        raise TypeError(f"{name} must be an int, got {type(x).__name__}")
    if minimum is not None and x < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {x}")
    return x


def broadcast_shapes(*shapes) -> torch.Size:
    """The shape `shapes` broadcast to, as `torch.broadcast_shapes` gives it, or ValueError if they do not.

    Plain Python: the first call of `torch.broadcast_shapes` imports sympy (about 0.4 s), in every notebook and
    every graded submission."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for shape in shapes:
        for i, size in enumerate(shape, start=ndim - len(shape)):
            if size != 1:
                if out[i] not in (1, size):
                    raise ValueError(f"shapes {', '.join(str(tuple(s)) for s in shapes)} do not broadcast together")
                out[i] = size
    return torch.Size(out)


def require_broadcastable(shape, target, name: str, target_desc: str) -> None:
    """Raise ValueError unless `shape` broadcasts to `target` without changing it."""
    try:
        ok = broadcast_shapes(tuple(shape), tuple(target)) == tuple(target)
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(
            f"{name} has shape {tuple(shape)}, which does not broadcast to {target_desc} {tuple(target)}"
        )
