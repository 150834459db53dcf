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


# --- Chapter 12: AdamW and the warm-up + cosine schedule ------------------------------------------------------


def test_warmup_cosine_lr_by_hand():
    from attnbook.training import warmup_cosine_lr

    # max 1.0, 4 warm-up steps, 12 in all, floor 0.1: the cosine runs over steps 4 .. 12 (t = (step - 4) / 8)
    expected = {0: 0.25, 1: 0.5, 3: 1.0, 4: 1.0, 6: 0.1 + 0.9 * (1 + math.sqrt(0.5)) / 2, 8: 0.55,
                10: 0.1 + 0.9 * (1 - math.sqrt(0.5)) / 2, 12: 0.1, 13: 0.1, 1000: 0.1}
    for step, lr in expected.items():
        assert warmup_cosine_lr(step, 1.0, 4, 12, min_lr=0.1) == pytest.approx(lr, abs=1e-12), step
    # no warm-up: the cosine starts at step 0; default floor 0
    assert [warmup_cosine_lr(s, 2.0, 0, 4) for s in range(6)] == pytest.approx(
        [2.0, 1 + math.sqrt(0.5), 1.0, 1 - math.sqrt(0.5), 0.0, 0.0], abs=1e-12)


def test_warmup_cosine_lr_is_trains_schedule_with_a_floor_of_zero():
    from attnbook.training import _lr_factor, warmup_cosine_lr

    for step in range(30):
        assert warmup_cosine_lr(step, 3.0, 5, 30) == pytest.approx(3.0 * _lr_factor(step, 30, 5, "cosine"), abs=1e-12)


@pytest.mark.parametrize("args, kwargs, exc, match", [
    ((-1, 1.0, 2, 10), {}, ValueError, "step"),
    ((0, 0.0, 2, 10), {}, ValueError, "max_lr"),
    ((0, "1e-3", 2, 10), {}, TypeError, "max_lr"),
    ((0, 1.0, 10, 10), {}, ValueError, "warmup_steps"),
    ((0, 1.0, 2, 0), {}, ValueError, "total_steps"),
    ((0, 1.0, 2.0, 10), {}, TypeError, "warmup_steps"),
    ((0, 1.0, 2, 10), {"min_lr": 2.0}, ValueError, "min_lr"),
    ((0, 1.0, 2, 10), {"min_lr": -0.1}, ValueError, "min_lr"),
])
def test_warmup_cosine_lr_rejects_bad_arguments(args, kwargs, exc, match):
    from attnbook.training import warmup_cosine_lr

    with pytest.raises(exc, match=match):
        warmup_cosine_lr(*args, **kwargs)


def test_adamw_decays_the_matrices_only_and_lists_a_tied_matrix_once():
    from attnbook.training import adamw

    emb = nn.Embedding(10, 4)
    model = nn.ModuleDict({"emb": emb, "norm": nn.LayerNorm(4), "head": nn.Linear(4, 10)})
    model["head"].weight = emb.weight  # tied
    opt = adamw(model, 1e-3, weight_decay=0.1)
    assert isinstance(opt, torch.optim.AdamW)
    decayed, kept = opt.param_groups
    assert decayed["weight_decay"] == 0.1 and kept["weight_decay"] == 0.0
    assert {id(p) for p in decayed["params"]} == {id(emb.weight)}
    assert {id(p) for p in kept["params"]} == {id(model["norm"].weight), id(model["norm"].bias),
                                               id(model["head"].bias)}
    assert opt.defaults["betas"] == (0.9, 0.95)


def test_adamw_weight_decay_shrinks_a_matrix_and_leaves_a_vector():
    from attnbook.training import adamw

    model = nn.Linear(3, 2)
    with torch.no_grad():
        model.weight.fill_(1.0)
        model.bias.fill_(1.0)
    opt = adamw(model, 0.1, weight_decay=0.5)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)  # no gradient: only the decay moves a parameter
    opt.step()
    assert torch.allclose(model.weight, torch.full((2, 3), 1 - 0.1 * 0.5))
    assert torch.equal(model.bias, torch.ones(2))


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"lr": 0.0}, ValueError, "lr"), ({"lr": 1e-3, "weight_decay": -1.0}, ValueError, "weight_decay"),
    ({"lr": 1e-3, "betas": (0.9, 1.0)}, ValueError, "betas"), ({"lr": True}, TypeError, "lr"),
])
def test_adamw_rejects_bad_arguments(kwargs, exc, match):
    from attnbook.training import adamw

    with pytest.raises(exc, match=match):
        adamw(nn.Linear(2, 2), **kwargs)
    with pytest.raises(TypeError, match="model"):
        adamw("not a model", 1e-3)
