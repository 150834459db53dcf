"""Chapter 12's trainer under torchrun: `python -m attnbook.lm` on one process, and the same command under torchrun on
2 processes of one node (and, with ATTNBOOK_TEST_MULTINODE=1, on two 'nodes' meeting through a c10d rendezvous on
127.0.0.1), data-parallel with DDP over gloo. With the same global batch, the loss curve is the one-process curve to
float32's precision; rank 0 alone prints. Also attnbook.parallel.env's helpers without a process group."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from attnbook.parallel.env import init_from_env, mean_over_ranks, shard_batch, unwrap, wrap_ddp
from attnbook.parallel.launcher import loopback_interface

SRC = Path(__file__).resolve().parents[1] / "src"
ARGS = ["--max-chars", "30000", "--vocab-size", "300", "--steps", "5", "--d-model", "16", "--n-layers", "1",
        "--n-heads", "2", "--context", "16", "--batch-size", "4", "--eval-every", "2", "--no-progress"]
TIMEOUT = 240  # each run starts several Python processes that import torch: slow on a busy machine


def test_env_helpers_without_a_process_group(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert init_from_env() == (0, 1)
    model = nn.Linear(2, 2)
    assert wrap_ddp(model) is model and unwrap(model) is model
    assert mean_over_ranks(2.5) == 2.5
    batch = torch.arange(12).view(6, 2)
    assert torch.equal(shard_batch(batch, 0, 1), batch)


def test_the_ranks_shards_partition_the_batch():
    batch = torch.arange(12)[:, None]  # row i holds i
    shards = [shard_batch(batch, r, 3) for r in range(3)]
    assert [s[:, 0].tolist() for s in shards] == [[0, 3, 6, 9], [1, 4, 7, 10], [2, 5, 8, 11]]
    with pytest.raises(ValueError, match="not a multiple of world_size=5"):
        shard_batch(batch, 0, 5)
    with pytest.raises(ValueError, match="rank must be < world_size"):
        shard_batch(batch, 3, 3)


def _free_port() -> int:
    """A port free now on 127.0.0.1 (torchrun's rendezvous endpoint must be named before it starts)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(launcher: list[str], history: Path, log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1"}
    if loopback_interface():
        env["GLOO_SOCKET_IFNAME"] = loopback_interface()
    command = [sys.executable, "-m", "torch.distributed.run", *launcher, "-m", "attnbook.lm", *ARGS,
               "--history", str(history)]
    with open(log, "w") as out:  # the child keeps its own copy of the file descriptor
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=history.parent,
                                start_new_session=True)  # its own process group: ended as a whole below


def _finish(processes: list[subprocess.Popen]) -> list[int]:
    try:
        return [p.wait(timeout=TIMEOUT) for p in processes]
    finally:
        for p in processes:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)  # the launcher and the workers it started
                p.wait()


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("torchrun")


@pytest.fixture(scope="module")
def one(folder):
    """The one-process run, in this process."""
    from attnbook.lm import main

    assert main([*ARGS, "--history", str(folder / "one.json")]) == 0
    return json.loads((folder / "one.json").read_text())


def _run(folder: Path, name: str, launchers: list[list[str]]) -> tuple[dict, list[str]]:
    """Start the launchers at once, wait for them; (rank 0's history, each launcher's output)."""
    logs = [folder / f"{name}{i}.log" for i in range(len(launchers))]
    codes = _finish([_start(launcher, folder / f"{name}.json", log) for launcher, log in zip(launchers, logs)])
    texts = [log.read_text() for log in logs]
    assert codes == [0] * len(launchers), texts
    return json.loads((folder / f"{name}.json").read_text()), texts


@pytest.fixture(scope="module")
def local(folder, one):
    """torchrun --standalone --nproc-per-node 2 (after the one-process run: two processes compute at a time)."""
    return _run(folder, "local", [["--standalone", "--nproc-per-node", "2"]])


@pytest.fixture(scope="module")
def nodes(folder, local):
    """Two 'nodes' of one process each, meeting at a c10d rendezvous on 127.0.0.1: the multi-node command. Two more
    launchers importing torch cost about 12 CPU-seconds, so it runs when ATTNBOOK_TEST_MULTINODE=1."""
    if os.environ.get("ATTNBOOK_TEST_MULTINODE") != "1":
        pytest.skip("the two-node torchrun run is opt-in: set ATTNBOOK_TEST_MULTINODE=1")
    launcher = ["--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                f"127.0.0.1:{_free_port()}", "--rdzv-id", "attnbook-test"]
    return _run(folder, "nodes", [launcher, launcher])


def follows(one: dict, two: dict) -> None:
    assert one["world_size"] == 1 and two["world_size"] == 2
    assert two["tokens"] == one["tokens"] == 5 * 4 * 16  # the same global batch: 4 windows of 16 tokens a step
    assert two["val_steps"] == one["val_steps"] == [2, 4, 5]
    # the same batches, split in two and the gradients averaged: equal up to float32 rounding
    assert two["losses"] == pytest.approx(one["losses"], rel=1e-5)
    assert two["val_losses"] == pytest.approx(one["val_losses"], rel=1e-5)
    assert one["losses"][0] != one["losses"][-1]  # it did train


def test_torchrun_on_two_local_processes_follows_the_one_process_run(one, local):
    follows(one, local[0])
    (log,) = local[1]
    assert log.count("validation perplexity: model") == 1  # rank 0 alone prints
    assert "in each of 2 processes" in log


def test_torchrun_across_two_nodes_follows_the_one_process_run(one, nodes):
    follows(one, nodes[0])
    assert sorted(log.count("validation perplexity: model") for log in nodes[1]) == [0, 1]  # rank 0's node only
