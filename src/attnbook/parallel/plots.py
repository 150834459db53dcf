"""Chapter 13's figures: measured all-reduce times against the fitted alpha-beta model, and GPipe's bubble against
the number of micro-batches."""
from __future__ import annotations

import matplotlib.pyplot as plt

from .._validate import require_int
from .comm import AlphaBeta
from .pipeline import bubble_fraction

__all__ = ["plot_alpha_beta", "plot_bubble"]


def plot_alpha_beta(fit: AlphaBeta, ax=None, title: str | None = None):
    """Each measurement of `fit` (seconds against bytes, one colour per number of processes, log-log axes) and the
    model's 2(n - 1)·alpha + 2(n - 1)/n·bytes·beta as a line through the measured sizes. Returns the axes."""
    if not isinstance(fit, AlphaBeta):
        raise TypeError(f"fit must be an AlphaBeta (from fit_alpha_beta or measure_alpha_beta), got "
                        f"{type(fit).__name__}")
    if not fit.measurements:
        raise ValueError("fit has no measurements to plot")
    ax = plt.subplots()[1] if ax is None else ax
    for i, n in enumerate(sorted({m["world_size"] for m in fit.measurements})):
        points = sorted((m["bytes"], m["seconds"]) for m in fit.measurements if m["world_size"] == n)
        sizes = [b for b, _ in points]
        colour = f"C{i}"
        ax.plot(sizes, [s * 1e3 for _, s in points], "o", color=colour, label=f"measured, {n} processes")
        ax.plot(sizes, [fit.predict(n, b) * 1e3 for b in sizes], "-", color=colour, label=f"model, {n} processes")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("bytes all-reduced")
    ax.set_ylabel("time per all-reduce (ms)")
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title, fontsize=8)
    return ax


def plot_bubble(rows: list[dict], n_stages: int, max_micro: int = 16, ax=None, title: str | None = None):
    """GPipe's bubble (p - 1)/(m + p - 1) for m = 1 .. max_micro micro-batches as a line, and the measured idle
    fractions of `rows` (from `pipeline.measure_bubble`: n_micro, measured) as points. Returns the axes."""
    p = require_int(n_stages, "n_stages", minimum=1)
    require_int(max_micro, "max_micro", minimum=1)
    if not rows or not all(isinstance(r, dict) and {"n_micro", "measured"} <= set(r) for r in rows):
        raise ValueError("rows must be a non-empty list of dicts with n_micro and measured (measure_bubble)")
    ax = plt.subplots()[1] if ax is None else ax
    ms = list(range(1, max_micro + 1))
    ax.plot(ms, [bubble_fraction(p, m) for m in ms], "-", color="C0", label=f"(p - 1)/(m + p - 1), p = {p}")
    ax.plot([r["n_micro"] for r in rows], [r["measured"] for r in rows], "o", color="C1", label="measured")
    ax.set_xscale("log", base=2)
    ticks = [m for m in ms if m & (m - 1) == 0]  # the powers of two
    ax.set_xticks(ticks, [str(m) for m in ticks])
    ax.set_ylim(0, 1)
    ax.set_xlabel("micro-batches m")
    ax.set_ylabel("share of the stages' time idle")
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title, fontsize=8)
    return ax
