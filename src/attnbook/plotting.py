"""Pictures of attention: weight heatmaps with token labels and mask diagrams."""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from ._validate import require_tensor

__all__ = ["plot_attention", "plot_mask"]


def _as_matrix(x, name: str) -> Tensor:
    """Return a 2-D float CPU tensor from a (q, k) tensor, or from (1, ..., 1, q, k)."""
    require_tensor(x, name)
    x = x.detach().cpu()
    while x.dim() > 2 and x.size(0) == 1:
        x = x[0]
    if x.dim() != 2:
        raise ValueError(f"{name} must be 2-D (q_len, k_len) after dropping size-1 dims, got {tuple(x.shape)}")
    return x.float()


def _check_labels(labels, n: int, name: str) -> list[str] | None:
    if labels is None:
        return None
    if isinstance(labels, str) or not isinstance(labels, Sequence):
        raise TypeError(f"{name} must be a sequence of strings, got {type(labels).__name__}")
    if len(labels) != n:
        raise ValueError(f"{name} has {len(labels)} labels but the matrix has {n} rows/columns for it")
    return [str(t) for t in labels]


def plot_attention(
    weights: Tensor,
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    *,
    ax=None,
    title: str | None = None,
    annotate: bool | None = None,
    cmap: str = "viridis",
):
    """Heatmap of a (q_len, k_len) weight matrix: rows are queries, columns are keys. Returns the Axes.

    Cells are annotated with their values when `annotate` is True (default: when the matrix is at most 10x10).
    """
    import matplotlib.pyplot as plt

    w = _as_matrix(weights, "weights")
    q_len, k_len = w.shape
    query_labels = _check_labels(query_labels, q_len, "query_labels")
    key_labels = _check_labels(key_labels, k_len, "key_labels")
    if ax is None:
        _, ax = plt.subplots(figsize=(1.0 + 0.55 * k_len, 0.8 + 0.5 * q_len) if k_len <= 12 else None)
    image = ax.imshow(w.numpy(), cmap=cmap, vmin=0.0, vmax=max(1e-12, float(w.max())), aspect="auto")
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    ax.set_xticks(range(k_len), key_labels if key_labels else range(k_len))
    ax.set_yticks(range(q_len), query_labels if query_labels else range(q_len))
    if key_labels:
        ax.tick_params(axis="x", labelrotation=45)
    if annotate is None:
        annotate = q_len <= 10 and k_len <= 10
    if annotate:
        top = float(w.max())
        for i in range(q_len):
            for j in range(k_len):
                v = float(w[i, j])
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=8,
                        color="black" if v > 0.6 * top else "white")
    if title:
        ax.set_title(title)
    return ax


def plot_mask(mask: Tensor, *, ax=None, title: str | None = None, labels: Sequence[str] | None = None):
    """Draw a boolean allow-mask (True = may attend) as a grid: filled = allowed, empty = blocked."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    require_tensor(mask, "mask")
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be boolean (True = may attend), got dtype {mask.dtype}")
    m = _as_matrix(mask, "mask")
    q_len, k_len = m.shape
    labels = _check_labels(labels, k_len, "labels") if labels is not None else None
    if ax is None:
        _, ax = plt.subplots(figsize=(0.8 + 0.4 * k_len, 0.6 + 0.4 * q_len) if k_len <= 16 else None)
    ax.imshow(m.numpy(), cmap=ListedColormap(["#f2f2f2", "#3b6ea5"]), vmin=0, vmax=1)
    ax.set_xticks(range(k_len), labels if labels else range(k_len))
    ax.set_yticks(range(q_len), labels[:q_len] if labels and q_len == k_len else range(q_len))
    ax.set_xticks([x - 0.5 for x in range(1, k_len)], minor=True)
    ax.set_yticks([y - 0.5 for y in range(1, q_len)], minor=True)
    ax.grid(which="minor", color="white", linewidth=1.5)
    ax.tick_params(which="minor", length=0)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    if title:
        ax.set_title(title)
    return ax
