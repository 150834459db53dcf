"""attnbook.parallel.plots: the figures plot what they are given (points and model lines)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest

from attnbook.parallel.comm import fit_alpha_beta
from attnbook.parallel.pipeline import bubble_fraction
from attnbook.parallel.plots import plot_alpha_beta, plot_bubble


def test_plot_alpha_beta_draws_points_and_the_model_per_process_count():
    alpha, beta = 1e-4, 1e-9
    points = [{"world_size": n, "bytes": b, "seconds": 2 * (n - 1) * alpha + 2 * (n - 1) / n * b * beta}
              for n in (2, 4) for b in (1e3, 1e6)]
    ax = plot_alpha_beta(fit_alpha_beta(points), title="t")
    lines = ax.get_lines()
    assert len(lines) == 4  # measured and model, for 2 and 4 processes
    measured2, model2 = lines[0], lines[1]
    assert list(measured2.get_xdata()) == [1e3, 1e6]
    assert list(measured2.get_ydata()) == pytest.approx(list(model2.get_ydata()), rel=1e-9)  # exact data, exact fit
    assert ax.get_xscale() == ax.get_yscale() == "log" and ax.get_title() == "t"
    plt.close("all")
    with pytest.raises(TypeError, match="AlphaBeta"):
        plot_alpha_beta({"alpha": 1})


def test_plot_bubble_draws_the_formula_and_the_measured_points():
    rows = [{"n_micro": 1, "measured": 0.55}, {"n_micro": 8, "measured": 0.15}]
    ax = plot_bubble(rows, n_stages=2, max_micro=16)
    formula, measured = ax.get_lines()
    assert list(formula.get_xdata()) == list(range(1, 17))
    assert list(formula.get_ydata()) == [bubble_fraction(2, m) for m in range(1, 17)]
    assert list(measured.get_xdata()) == [1, 8] and list(measured.get_ydata()) == [0.55, 0.15]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "4", "8", "16"]
    plt.close("all")
    with pytest.raises(ValueError, match="rows"):
        plot_bubble([], n_stages=2)
