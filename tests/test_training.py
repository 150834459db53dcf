"""Tests of attnbook.training on tiny problems: the loss falls, seeds reproduce, the progress bar can be hidden."""
from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pytest
import torch
from torch import nn

from attnbook.data import TensorBatches
from attnbook.training import History, accuracy, evaluate, exact_match, train


def regression_data(n=256, seed=0):
    """y = x @ w_true + 0.5 + noise, with 3 features."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 3, generator=g)
    w_true = torch.tensor([[1.5], [-2.0], [0.5]])
    y = x @ w_true + 0.5 + 0.01 * torch.randn(n, 1, generator=g)
    return x, y


def mse(model, batch):
    x, y = batch
    return nn.functional.mse_loss(model(x), y)


def fresh_run(seed=0, **kwargs):
    torch.manual_seed(123)
    model = nn.Sequential(nn.Linear(3, 8), nn.Dropout(0.1), nn.Linear(8, 1))
    batches = TensorBatches(regression_data(), 32)  # shuffled with the global generator, seeded by train
    history = train(model, batches, mse, progress=False, seed=seed, **kwargs)
    return model, history


def test_loss_decreases_on_linear_regression():
    model = nn.Linear(3, 1)
    x, y = regression_data()
    history = train(model, TensorBatches((x, y), 32, seed=0), mse, epochs=30, lr=0.05, progress=False)
    assert isinstance(history, History)
    assert len(history) == 30 * 8
    assert history.losses[0] > 1.0
    assert history.final < 1e-3
    torch.testing.assert_close(model.weight.data, torch.tensor([[1.5, -2.0, 0.5]]), atol=0.02, rtol=0)
    torch.testing.assert_close(model.bias.data, torch.tensor([0.5]), atol=0.02, rtol=0)


def test_same_seed_gives_identical_histories_and_other_seed_differs():
    _, a = fresh_run(seed=7, steps=60)
    _, b = fresh_run(seed=7, steps=60)
    _, c = fresh_run(seed=8, steps=60)
    assert a.losses == b.losses
    assert a == b  # wall time is not compared
    assert a.losses != c.losses


def test_steps_cycle_through_the_batches():
    _, history = fresh_run(steps=21)  # 8 batches per epoch: cycles past two epochs
    assert len(history) == 21


def test_model_is_in_train_mode_during_and_eval_mode_after():
    modes = []

    def loss_fn(model, batch):
        modes.append(model.training)
        return mse(model, batch)

    model = nn.Linear(3, 1)
    model.eval()
    train(model, TensorBatches(regression_data(64), 16), loss_fn, epochs=1, progress=False)
    assert modes == [True] * 4
    assert not model.training


def test_progress_bar_shows_and_can_be_disabled(capsys):
    x, y = regression_data(32)
    train(nn.Linear(3, 1), [(x, y)] * 3, mse, epochs=1, progress=False, desc="quiet-run")
    captured = capsys.readouterr()
    assert "quiet-run" not in captured.out + captured.err
    train(nn.Linear(3, 1), [(x, y)] * 3, mse, epochs=1, progress=True, desc="loud-run")
    captured = capsys.readouterr()
    # Without ipywidgets (as here) the text bar goes to stdout: stderr would show as an error in a notebook.
    assert "loud-run" in captured.out and "3/3" in captured.out and captured.err == ""


def test_gradient_clipping_bounds_each_update():
    """With SGD(lr=1) the update equals the (clipped) gradient, so its norm is at most clip_grad."""
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    x, y = regression_data(32)
    before = torch.cat([p.detach().flatten().clone() for p in model.parameters()])
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    train(model, [(x, y * 100)], mse, steps=1, optimizer=opt, clip_grad=0.25, progress=False)
    after = torch.cat([p.detach().flatten() for p in model.parameters()])
    assert math.isclose((after - before).norm().item(), 0.25, rel_tol=1e-5)


def test_cosine_schedule_with_warmup_sets_the_learning_rate():
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    lrs = []

    def loss_fn(model, batch):
        lrs.append(opt.param_groups[0]["lr"])
        return mse(model, batch)

    x, y = regression_data(16)
    train(model, [(x, y)], loss_fn, steps=10, optimizer=opt, schedule="cosine", warmup_steps=2, progress=False)
    expected = [0.05, 0.1] + [0.05 * (1 + math.cos(math.pi * t / 8)) for t in range(8)]
    for got, want in zip(lrs, expected):
        assert math.isclose(got, want, rel_tol=1e-9)


def test_non_finite_loss_stops_with_a_clear_error():
    x, y = regression_data(16)
    with pytest.raises(FloatingPointError, match="step 1"):
        train(nn.Linear(3, 1), [(x, y * float("nan"))], mse, steps=2, progress=False)


def test_a_generator_of_batches_cannot_be_reused_for_a_second_epoch():
    x, y = regression_data(16)
    with pytest.raises(ValueError, match="re-iterable"):
        train(nn.Linear(3, 1), ((x, y) for _ in range(2)), mse, epochs=2, progress=False)


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        ({"steps": 0}, ValueError, "steps"),
        ({"epochs": 1.5}, TypeError, "epochs"),
        ({"steps": 3, "epochs": 1}, ValueError, "steps or epochs"),
        ({"lr": -1.0}, ValueError, "lr"),
        ({"optimizer": "adam"}, TypeError, "optimizer"),
        ({"clip_grad": 0}, ValueError, "clip_grad"),
        ({"schedule": "linear"}, ValueError, "schedule"),
        ({"warmup_steps": -1}, ValueError, "warmup_steps"),
        ({"steps": 3, "warmup_steps": 3}, ValueError, "warmup_steps"),
        ({"seed": -2}, ValueError, "seed"),
    ],
)
def test_train_rejects_bad_arguments(kwargs, exc, match):
    x, y = regression_data(16)
    with pytest.raises(exc, match=match):
        train(nn.Linear(3, 1), [(x, y)], mse, progress=False, **kwargs)


def test_train_rejects_bad_model_batches_and_loss():
    x, y = regression_data(16)
    with pytest.raises(TypeError, match="model"):
        train(lambda t: t, [(x, y)], mse, progress=False)
    with pytest.raises(TypeError, match="loss_fn"):
        train(nn.Linear(3, 1), [(x, y)], "mse", progress=False)
    with pytest.raises(TypeError, match="batches"):
        train(nn.Linear(3, 1), 5, mse, progress=False)
    with pytest.raises(TypeError, match="loss_fn must return a scalar"):
        train(nn.Linear(3, 1), [(x, y)], lambda m, b: m(b[0]), progress=False)
    with pytest.raises(ValueError, match="cosine"):
        train(nn.Linear(3, 1), ((x, y) for _ in range(2)), mse, schedule="cosine", progress=False)


# ----------------------------------------------------------------------------------------------------------
# History
# ----------------------------------------------------------------------------------------------------------


def test_history_smoothing_and_final():
    h = History([4.0, 2.0, 6.0, 0.0, 2.0])
    assert h.smoothed(2) == [4.0, 3.0, 4.0, 3.0, 1.0]
    assert h.smoothed(1) == h.losses
    assert h.final == 2.0
    assert History(list(range(20))).final == (18 + 19) / 2
    with pytest.raises(ValueError, match="window"):
        h.smoothed(0)
    with pytest.raises(ValueError, match="empty"):
        History().final


def test_history_plot_draws_raw_and_smoothed_curves():
    h = History([float(10 - i) for i in range(10)])
    fig, ax = plt.subplots()
    assert h.plot(ax=ax, label="run") is ax
    assert len(ax.lines) == 2
    assert list(ax.lines[0].get_ydata()) == h.losses
    assert list(ax.lines[1].get_ydata()) == h.smoothed()
    assert ax.get_xlabel() == "step"
    ax2 = h.plot(smooth=False, log=True)
    assert len(ax2.lines) == 1 and ax2.get_yscale() == "log"
    plt.close("all")


# ----------------------------------------------------------------------------------------------------------
# Metrics
# ----------------------------------------------------------------------------------------------------------


def test_accuracy_counts_argmax_hits_and_ignores_padding():
    logits = torch.tensor([[[2.0, 1.0, 0.0], [0.0, 3.0, 1.0], [0.0, 0.0, 1.0]]])  # argmax 0, 1, 2
    assert accuracy(logits, torch.tensor([[0, 1, 1]])) == pytest.approx(2 / 3)
    assert accuracy(logits, torch.tensor([[0, 2, 9]]), ignore_index=9) == pytest.approx(1 / 2)
    with pytest.raises(ValueError, match="ignore_index"):
        accuracy(logits, torch.tensor([[9, 9, 9]]), ignore_index=9)
    with pytest.raises(ValueError, match="logits"):
        accuracy(logits, torch.tensor([0, 1, 1]))
    with pytest.raises(TypeError, match="labels"):
        accuracy(logits, torch.zeros(1, 3))


def test_exact_match_on_strings_and_tensors():
    assert exact_match(["12", "34", "5"], ["12", "43", "5"]) == pytest.approx(2 / 3)
    a = torch.tensor([[1, 2, 0], [3, 4, 5]])
    b = torch.tensor([[1, 2, 0], [3, 4, 6]])
    assert exact_match(a, b) == 0.5
    with pytest.raises(ValueError, match="differ in length"):
        exact_match(["1"], ["1", "2"])
    with pytest.raises(TypeError, match="str"):
        exact_match("12", "12")
    with pytest.raises(TypeError, match="tensors"):
        exact_match(a, ["1", "2"])


def test_evaluate_weights_by_batch_size_and_restores_mode():
    model = nn.Linear(1, 1)
    model.train()
    batches = [torch.ones(3, 1), torch.zeros(1, 1)]
    seen_modes = []

    def metric(m, batch):
        seen_modes.append(m.training)
        assert not torch.is_grad_enabled()
        return batch.mean()

    assert evaluate(model, batches, metric) == pytest.approx(3 / 4)
    assert seen_modes == [False, False] and model.training
    with pytest.raises(ValueError, match="no batch"):
        evaluate(model, [], metric)
    with pytest.raises(TypeError, match="metric_fn"):
        evaluate(model, batches, None)
