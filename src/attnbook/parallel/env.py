"""A training script that runs unchanged on one process and under `torchrun`.

torchrun starts the script once per process and tells each one who it is through environment variables
(RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT); `init_process_group` reads them (init_method
"env://"). On one node and on several, the command is the same script:

    torchrun --standalone --nproc-per-node 2 -m attnbook.lm ...                      # 2 processes here
    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d \\
             --rdzv-endpoint HOST:29500 --rdzv-id run1 -m attnbook.lm ...            # on each of 2 machines

Data parallelism in such a script (`attnbook.lm` does this): every process draws the same global batch from
the same seed and keeps its share of the rows (`shard_batch`, rank::world_size, as `DistributedSampler` shards
one shuffled order); the model is wrapped in `DistributedDataParallel`, which averages the gradients; the loss
printed is the mean over the processes (`mean_over_ranks`), i.e. the loss of the global batch; only rank 0 prints.
"""
from __future__ import annotations

import os

import torch
import torch.distributed as dist
from torch import Tensor, nn

from .._validate import require_int, require_tensor

__all__ = ["launched_by_torchrun", "init_from_env", "rank_and_world", "shard_batch", "mean_over_ranks",
           "wrap_ddp", "unwrap", "close"]


def launched_by_torchrun() -> bool:
    """True when the environment says this process is one of several (WORLD_SIZE set and above 1)."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def init_from_env(backend: str = "gloo") -> tuple[int, int]:
    """(rank, world_size). Under torchrun, first join the default process group (`backend`, from the
    environment: init_method "env://"); on a plain `python` run, (0, 1) and no process group."""
    if backend not in ("gloo", "nccl", "mpi"):
        raise ValueError(f"backend must be 'gloo', 'nccl' or 'mpi', got {backend!r}")
    if launched_by_torchrun() and not dist.is_initialized():
        dist.init_process_group(backend, init_method="env://")
    return rank_and_world()


def rank_and_world() -> tuple[int, int]:
    """(rank, world_size) of the default process group, or (0, 1) when there is none."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def shard_batch(batch: Tensor, rank: int, world_size: int) -> Tensor:
    """Rows rank, rank + world_size, rank + 2·world_size, ... of `batch` (B, ...): (B / world_size, ...).

    The batch size must be a multiple of world_size, so that every process holds as many rows: then the mean of
    the processes' mean losses is the mean loss of the whole batch, and so are the averaged gradients."""
    require_tensor(batch, "batch", min_dim=1)
    require_int(world_size, "world_size", minimum=1)
    require_int(rank, "rank", minimum=0)
    if rank >= world_size:
        raise ValueError(f"rank must be < world_size={world_size}, got {rank}")
    if batch.size(0) % world_size:
        raise ValueError(f"batch has {batch.size(0)} rows, not a multiple of world_size={world_size}: "
                         f"choose a batch size divisible by the number of processes")
    return batch[rank::world_size]  # (B / world_size, ...)


def mean_over_ranks(value: float) -> float:
    """The mean of `value` over the processes of the default group (float64 all-reduce); `value` itself when
    there is no group."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"value must be a number, got {type(value).__name__}")
    rank, world = rank_and_world()
    if world == 1:
        return float(value)
    t = torch.tensor([float(value)], dtype=torch.float64)
    dist.all_reduce(t)  # sum over the ranks
    return t.item() / world


def wrap_ddp(model: nn.Module, **ddp_kwargs) -> nn.Module:
    """`DistributedDataParallel(model, **ddp_kwargs)` when a process group is running, else `model` itself."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    if rank_and_world()[1] == 1:
        return model
    return nn.parallel.DistributedDataParallel(model, **ddp_kwargs)


def unwrap(model: nn.Module) -> nn.Module:
    """The module inside a DistributedDataParallel wrapper (or the model itself)."""
    return model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model


def close() -> None:
    """Leave the default process group, if one is running (call it in a `finally:`)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
