"""attnbook.parallel.pipeline: GPipe's schedule against a table written by hand and against its dependencies, the
bubble formula, a pipeline of processes (send/recv, and PyTorch's ScheduleGPipe) whose gradients equal one process
on the whole batch, and its measured idle time against the formula."""
from __future__ import annotations

from fractions import Fraction

import pytest
import torch
import torch.nn.functional as F

from attnbook.models.llama import Llama
from attnbook.parallel.launcher import launch
from attnbook.parallel.pipeline import (bubble_fraction, format_schedule, gpipe_schedule, idle_fraction,
                                        measure_bubble, measured_idle_fraction, run_gpipe, run_pipelining,
                                        split_llama)
from attnbook.parallel.toy import tiny_config, token_batches

TIMEOUT = 120
SEED = 4


def test_the_schedule_of_3_stages_and_4_micro_batches_by_hand():
    _ = None
    assert gpipe_schedule(3, 4) == [
        ["F0", "F1", "F2", "F3", _, _, _, _, "B0", "B1", "B2", "B3"],
        [_, "F0", "F1", "F2", "F3", _, _, "B0", "B1", "B2", "B3", _],
        [_, _, "F0", "F1", "F2", "F3", "B0", "B1", "B2", "B3", _, _],
    ]
    text = format_schedule(gpipe_schedule(3, 4))
    assert text.splitlines()[1].split() == ["stage", "0", "F0", "F1", "F2", "F3", ".", ".", ".", ".", "B0", "B1",
                                            "B2", "B3"]


@pytest.mark.parametrize("p, m", [(1, 1), (1, 3), (2, 1), (2, 5), (4, 3), (4, 8), (6, 2)])
def test_every_schedule_keeps_the_dependencies_and_its_bubble_is_the_formula(p, m):
    table = gpipe_schedule(p, m)
    when = {(s, cell): t for s, row in enumerate(table) for t, cell in enumerate(row) if cell is not None}
    assert len(when) == 2 * p * m  # each stage runs each forward and backward once
    for s in range(p):
        for j in range(m):
            if s > 0:
                assert when[(s, f"F{j}")] > when[(s - 1, f"F{j}")]  # needs the previous stage's output
            if s < p - 1:
                assert when[(s, f"B{j}")] > when[(s + 1, f"B{j}")]  # needs the next stage's gradient
            assert when[(s, f"B{j}")] > when[(s, f"F{m - 1}")]  # all forwards first
    cells = p * len(table[0])
    idle = sum(cell is None for row in table for cell in row)
    assert Fraction(idle, cells) == Fraction(p - 1, m + p - 1)
    assert idle_fraction(table) == pytest.approx(bubble_fraction(p, m), abs=1e-15)


def test_bubble_fraction_by_hand():
    assert bubble_fraction(4, 8) == 3 / 11
    assert bubble_fraction(1, 1) == 0
    assert bubble_fraction(2, 1) == 0.5
    with pytest.raises(ValueError, match="n_micro"):
        bubble_fraction(2, 0)


def test_split_llama_stages_compose_into_the_model():
    config = tiny_config(n_layers=5)
    torch.manual_seed(0)
    model = Llama(config).double()
    stages = split_llama(model, 3)
    assert [len(s.blocks) for s in stages] == [2, 2, 1]
    x = torch.randint(config.vocab_size, (2, 6))
    h = x
    for stage in stages:
        h = stage(h)
    assert torch.equal(h, model(x))
    with pytest.raises(ValueError, match="n_stages=6 exceeds"):
        split_llama(model, 6)


def reference(config, x, y):
    torch.manual_seed(SEED)
    model = Llama(config).double()
    logits = model(x)
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))  # the whole batch at once
    loss.backward()
    return loss.item(), {n: p.grad for n, p in model.named_parameters()}


def gathered(results):
    grads = {}
    for r in results:
        assert not grads.keys() & r["grads"].keys()  # each parameter on one stage only
        grads.update(r["grads"])
    return grads


@pytest.mark.parametrize("p, m", [(2, 4), (3, 2)])
def test_a_pipeline_of_processes_gives_the_whole_batch_gradient(p, m):
    config = tiny_config(n_layers=3)
    (x, y), = token_batches(1, 8, 8, config.vocab_size, seed=1)
    loss, grads = reference(config, x, y)
    results = launch(run_gpipe, p, config, SEED, x, y, m, timeout=TIMEOUT)
    assert results[-1]["loss"] == pytest.approx(loss, abs=1e-12)
    mine = gathered(results)
    assert mine.keys() == grads.keys()
    assert max((mine[n] - g).abs().max().item() for n, g in grads.items()) < 1e-12
    for s, r in enumerate(results):  # each stage ran GPipe's order: F0 .. F(m-1), then B0 .. B(m-1)
        assert [(kind, j) for kind, j, *_ in r["events"]] == [("F", j) for j in range(m)] + [("B", j) for j in range(m)]
        if s > 0:  # and started a forward only after the previous stage had finished it
            before = {j: end for kind, j, _, end in results[s - 1]["events"] if kind == "F"}
            assert all(start >= before[j] for kind, j, start, _ in r["events"] if kind == "F")


def test_torch_pipelining_schedule_gpipe_gives_the_same_gradients():
    config = tiny_config(n_layers=2)
    (x, y), = token_batches(1, 8, 8, config.vocab_size, seed=3)
    loss, grads = reference(config, x, y)
    results = launch(run_pipelining, 2, config, SEED, x, y, 4, timeout=TIMEOUT)
    mine = gathered(results)
    assert max((mine[n] - g).abs().max().item() for n, g in grads.items()) < 1e-12
    assert sum(results[-1]["losses"]) / 4 == pytest.approx(loss, abs=1e-12)  # equal micro-batches


def test_measured_idle_fraction_of_a_hand_made_timeline():
    # two stages, one micro-batch, each step 1 s: F on stage 0 during [0, 1], on stage 1 [1, 2], B on stage 1 [2, 3],
    # on stage 0 [3, 4]: each stage busy 2 s of 4
    events = [[("F", 0, 0.0, 1.0), ("B", 0, 3.0, 4.0)], [("F", 0, 1.0, 2.0), ("B", 0, 2.0, 3.0)]]
    assert measured_idle_fraction(events) == 0.5


def test_the_measured_bubble_follows_the_formula():
    rows = measure_bubble(n_stages=2, n_micros=(1, 8), delay_s=0.02, timeout=TIMEOUT)
    assert [r["n_micro"] for r in rows] == [1, 8]
    assert [r["formula"] for r in rows] == [1 / 2, 1 / 9]
    for r in rows:  # the run can add idle time (messages, start-up) but not remove what dependencies impose
        assert r["measured"] > r["formula"] - 0.05
    assert rows[1]["measured"] < rows[0]["measured"] - 0.2  # more micro-batches, a smaller bubble


def test_measure_bubble_refuses_micro_batches_that_do_not_divide_the_batch():
    with pytest.raises(ValueError, match="does not split into 3 equal micro-batches"):
        measure_bubble(n_stages=2, n_micros=(3,), batch_size=8)
    with pytest.raises(ValueError, match="delay_s"):
        measure_bubble(n_stages=2, delay_s=-1)
