"""attnbook.parallel.demos: the four collectives on two ranks against sums worked out by hand; the tensor-parallel
layers run one all-reduce forward and one backward; a module run as a subprocess, its failure and its timeout."""
from __future__ import annotations

import sys

import pytest
import torch

from attnbook.parallel.demos import collectives, count_tp_collectives, module_command, run_module
from attnbook.parallel.launcher import launch

TIMEOUT = 120


def test_the_four_collectives_on_two_ranks_by_hand():
    rank0, rank1 = launch(collectives, 2, 2, timeout=TIMEOUT)  # n = 2: tensors of 4 values
    assert rank0["start"].tolist() == [1, 2, 3, 4] and rank1["start"].tolist() == [2, 4, 6, 8]
    for r in (rank0, rank1):
        assert r["all_reduce"].tolist() == [3, 6, 9, 12]
        assert r["broadcast"].tolist() == [1, 2, 3, 4]
        assert r["all_gather"].tolist() == [1, 2, 2, 4]  # each rank's first two values, in rank order
    assert rank0["reduce_scatter"].tolist() == [3, 6] and rank1["reduce_scatter"].tolist() == [9, 12]


def test_tensor_parallel_layers_run_one_all_reduce_each_way():
    for result in launch(count_tp_collectives, 2, 16, 32, 4, 2, 0, timeout=TIMEOUT):
        for layer in ("mlp", "attention"):
            assert result[layer] == {"forward": {"c10d.allreduce_": 1}, "backward": {"c10d.allreduce_": 1}}


def test_module_command():
    assert module_command(["attnbook.lm", "--steps", "5"]) == [sys.executable, "-m", "attnbook.lm", "--steps", "5"]
    assert module_command(["m"], nproc=2) == [sys.executable, "-m", "torch.distributed.run", "--standalone",
                                              "--nproc-per-node", "2", "-m", "m"]
    with pytest.raises(TypeError, match="module_args"):
        module_command([])


def test_run_module_returns_the_command_as_typed_and_its_output(tmp_path):
    (tmp_path / "a.json").write_text('{"b": 1}')
    typed, output = run_module(["json.tool", "--compact", "a.json"], cwd=str(tmp_path))
    assert typed == "python -m json.tool --compact a.json"
    assert output.strip() == '{"b":1}'
    with pytest.raises(RuntimeError, match="exited with code"):
        run_module(["json.tool", "missing.json"], cwd=str(tmp_path))


def test_run_module_stops_a_command_past_its_timeout():
    with pytest.raises(TimeoutError, match="ran past 1 s"):
        run_module(["timeit", "-n", "1", "import time; time.sleep(60)"], timeout=1)
