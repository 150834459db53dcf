"""Chapter 13's small demonstrations: the collectives on a few ranks, the collectives a tensor-parallel layer runs,
and a training command run on one process or under torchrun as a subprocess.

- `collectives`: a launched worker in which every rank calls all_reduce, broadcast, reduce_scatter and all_gather
  on a tensor of its own, and returns what each gave it.
- `count_tp_collectives`: a launched worker that counts, with PyTorch's `CommDebugMode`, the collectives of the
  forward and of the backward pass of Megatron's tensor-parallel MLP and attention (`tensor_parallel`).
- `run_module`: `python -m MODULE ARGS`, or the same under `torchrun --standalone --nproc-per-node N` (as
  `python -m torch.distributed.run`), in a session of its own on the loopback interface; every process it started
  has ended when it returns.
"""
from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from .._validate import require_int
from .launcher import loopback_interface

__all__ = ["collectives", "count_tp_collectives", "module_command", "run_module"]


def collectives(rank: int, world_size: int, n: int = 4) -> dict:
    """Launched worker: rank r starts from (r + 1) · [1, 2, ..., n·world_size] (float64) and calls each collective.

    Returns {"start": its tensor, "all_reduce": the sum over the ranks, "broadcast": rank 0's tensor,
    "reduce_scatter": chunk r of the sum (n values), "all_gather": the first n values of every rank's tensor,
    concatenated in rank order}."""
    require_int(n, "n", minimum=1)
    start = (rank + 1) * torch.arange(1, n * world_size + 1, dtype=torch.float64)  # (n·N,)
    out = {"start": start.clone()}
    t = start.clone()
    dist.all_reduce(t)  # every rank: the sum
    out["all_reduce"] = t
    t = start.clone()
    dist.broadcast(t, src=0)  # every rank: rank 0's tensor
    out["broadcast"] = t
    t = torch.empty(n, dtype=torch.float64)
    dist.reduce_scatter(t, list(start.clone().chunk(world_size)))  # rank r: chunk r of the sum
    out["reduce_scatter"] = t
    parts = [torch.empty(n, dtype=torch.float64) for _ in range(world_size)]
    dist.all_gather(parts, start[:n].clone())  # every rank: each rank's first n values
    out["all_gather"] = torch.cat(parts)
    return out


def count_tp_collectives(rank: int, world_size: int, d_model: int, d_ff: int, n_heads: int, n_kv_heads: int,
                         seed: int) -> dict:
    """Launched worker: {"mlp": ..., "attention": ...}, each {"forward": {collective: calls}, "backward": {...}},
    counted by `torch.distributed.tensor.debug.CommDebugMode` around one forward and one backward pass of
    `ParallelSwiGLU` and `ParallelLlamaAttention` on a (2, 5, d_model) float64 input."""
    from torch.distributed.tensor.debug import CommDebugMode

    from .tensor_parallel import ParallelLlamaAttention, ParallelSwiGLU, full_attention, full_swiglu

    layers = {"mlp": ParallelSwiGLU(full_swiglu(d_model, d_ff, seed), rank, world_size),
              "attention": ParallelLlamaAttention(full_attention(d_model, n_heads, n_kv_heads, seed), rank,
                                                  world_size)}
    out = {}
    for name, layer in layers.items():
        x = torch.randn(2, 5, d_model, dtype=torch.float64, generator=torch.Generator().manual_seed(seed),
                        requires_grad=True)
        with CommDebugMode() as forward:
            y = layer(x)
        with CommDebugMode() as backward:
            y.sum().backward()
        out[name] = {"forward": {str(k): v for k, v in forward.get_comm_counts().items()},
                     "backward": {str(k): v for k, v in backward.get_comm_counts().items()}}
    return out


def module_command(module_args: list[str], nproc: int | None = None) -> list[str]:
    """The command line: `python -m ...` (nproc None) or `torchrun --standalone --nproc-per-node nproc -m ...`,
    torchrun written as `python -m torch.distributed.run` with this Python."""
    if not isinstance(module_args, (list, tuple)) or not module_args or not all(isinstance(a, str)
                                                                                for a in module_args):
        raise TypeError(f"module_args must be a non-empty list of str (a module, then its arguments), "
                        f"got {module_args!r}")
    if nproc is None:
        return [sys.executable, "-m", *module_args]
    require_int(nproc, "nproc", minimum=1)
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
            "-m", *module_args]


def _readable(command: list[str]) -> str:
    """The command as a reader would type it: `python` and `torchrun` instead of this Python's path."""
    words = ["python", *command[1:]]
    if words[1:3] == ["-m", "torch.distributed.run"]:
        words = ["torchrun", *words[3:]]
    return shlex.join(words)


def run_module(module_args: list[str], nproc: int | None = None, cwd: str | None = None,
               timeout: float = 240.0, threads: int = 1) -> tuple[str, str]:
    """Run `module_command(module_args, nproc)` and return (the command as typed, its output: stdout then stderr).

    The child imports the attnbook this process imported (PYTHONPATH), uses `threads` threads per process
    (OMP_NUM_THREADS) and gloo's sockets on the loopback interface; it runs in a session of its own, so that on a
    timeout the launcher and every worker it started are killed together. Raises RuntimeError with the output if
    the command fails, TimeoutError after `timeout` seconds."""
    command = module_command(module_args, nproc)
    require_int(threads, "threads", minimum=1)
    package_root = str(Path(__file__).resolve().parents[2])  # the folder that holds attnbook/
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH"))
                                                        if p),
           "OMP_NUM_THREADS": str(threads)}
    interface = loopback_interface()
    if interface is not None:
        env["GLOO_SOCKET_IFNAME"] = interface
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                               cwd=cwd, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise TimeoutError(f"{_readable(command)} ran past {timeout} s and was stopped") from None
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)  # the launcher and its workers: one session
            process.wait()
    if process.returncode != 0:
        raise RuntimeError(f"{_readable(command)} exited with code {process.returncode}:\n{stdout}\n{stderr}")
    return _readable(command), stdout + stderr
