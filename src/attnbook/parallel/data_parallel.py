"""Data parallelism: every process holds the whole model and a share of the batch, and the gradients are averaged.

- `average_gradients`: the idea by hand, one `dist.all_reduce` per parameter after `backward()`, then a division
  by the number of processes. Each process then takes the same optimizer step, so the copies stay equal.
- `train_data_parallel(rank, world_size, mode, ...)`: a launched worker that trains `toy.tiny_llama` on its
  share of each batch, with the gradients averaged by hand (mode "manual") or by `DistributedDataParallel`
  (mode "ddp"); its losses and weights equal `toy.train_reference` on the whole batches.
- Buckets: DDP does not all-reduce each gradient alone. It packs gradients, in the order backward produces them,
  into buckets of up to `bucket_cap_mb` MiB, and all-reduces a bucket as soon as all its gradients are ready,
  while backward goes on computing the rest (communication overlapped with computation). `bucket_sweep` counts
  the all-reduce calls per step and their sizes for several bucket sizes, records when each call starts during
  backward, and times backward with and without communication (`no_sync`).
"""
from __future__ import annotations

import statistics
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel

from .._validate import require_int
from ..lm import lm_loss
from ..models.llama import LlamaConfig
from ..training import adamw
from .env import shard_batch
from .launcher import launch
from .toy import tiny_llama, token_batches

__all__ = ["average_gradients", "train_data_parallel", "ddp_bucket_sweep", "bucket_sweep", "BUCKET_MODEL"]

# The model of the bucket sweep: about 0.8 million parameters (3.3 MB of float32 gradients), chapter 12's size.
BUCKET_MODEL = LlamaConfig(vocab_size=384, d_model=128, n_layers=4, n_heads=4, n_kv_heads=4, d_ff=336, max_len=64)


def average_gradients(model: nn.Module) -> int:
    """Replace every parameter's gradient by its mean over the processes of the default group: one
    `dist.all_reduce` (a sum) per gradient, then a division by the world size. Returns the number of calls."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    world = dist.get_world_size()
    calls = 0
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)  # every rank now holds the sum
            p.grad.div_(world)
            calls += 1
    return calls


def train_data_parallel(rank: int, world_size: int, mode: str, config: LlamaConfig | None, seed: int,
                        batches: list, lr: float = 1e-2, bucket_cap_mb: float = 25.0) -> dict:
    """Launched worker: train `tiny_llama(config, seed)` (float64) on rows rank::world_size of each batch.

    mode "manual": backward, `average_gradients`, AdamW step. mode "ddp": the model wrapped in
    `DistributedDataParallel(bucket_cap_mb=...)`, which averages during backward. Returns {"losses": the
    global batch's loss at each step (the mean of the ranks' losses), "state": the trained weights}."""
    if mode not in ("manual", "ddp"):
        raise ValueError(f"mode must be 'manual' or 'ddp', got {mode!r}")
    model = tiny_llama(config, seed)
    net = DistributedDataParallel(model, bucket_cap_mb=bucket_cap_mb) if mode == "ddp" else model
    optimizer = adamw(model, lr)
    losses = []
    for x, y in batches:
        x, y = shard_batch(x, rank, world_size), shard_batch(y, rank, world_size)  # (B / N, T) each
        optimizer.zero_grad(set_to_none=True)
        loss = lm_loss(net, x, y)
        loss.backward()  # DDP: gradients averaged here, bucket by bucket
        if mode == "manual":
            average_gradients(model)
        optimizer.step()
        total = loss.detach().clone()
        dist.all_reduce(total)
        losses.append(total.item() / world_size)
    return {"losses": losses, "state": {k: v.clone() for k, v in model.state_dict().items()}}


def _recording_hook(state: dict, bucket):
    """A DDP communication hook: note when and how large each bucket's all-reduce is, then run DDP's own."""
    buffer = bucket.buffer()
    state["calls"].append((time.perf_counter() - state["start"], buffer.numel() * buffer.element_size()))
    return default_hooks.allreduce_hook(None, bucket)  # None: the default process group


def ddp_bucket_sweep(rank: int, world_size: int, caps_mb: list, config: LlamaConfig, steps: int = 6,
                     batch_size: int = 8, seq_len: int = 32, seed: int = 0) -> list[dict]:
    """Launched worker: for each bucket cap, train a float32 `Llama(config)` under DDP for `steps` steps and
    record, for the last step (DDP rebuilds its buckets after the first one), each all-reduce call: when it
    started, in seconds after backward began, and its bytes. Also times backward (median over the steps after
    the first two) with communication and without it (`no_sync`: gradients computed, nothing sent).

    Returns one dict per cap: bucket_cap_mb, calls (all-reduces per step), bucket_bytes (list), start_s (list),
    grad_bytes (all gradients), backward_s, backward_no_sync_s."""
    require_int(steps, "steps", minimum=3)
    out = []
    for cap in caps_mb:
        model = tiny_llama(config, seed, torch.float32)
        ddp = DistributedDataParallel(model, bucket_cap_mb=cap)
        record = {"calls": [], "start": 0.0}
        ddp.register_comm_hook(record, _recording_hook)
        batches = token_batches(steps, batch_size * world_size, seq_len, config.vocab_size, seed)
        timed, timed_local = [], []
        for step, (x, y) in enumerate(batches):
            x, y = shard_batch(x, rank, world_size), shard_batch(y, rank, world_size)
            loss = lm_loss(ddp, x, y)
            dist.barrier()
            record["calls"], record["start"] = [], time.perf_counter()
            loss.backward()  # returns once every bucket's all-reduce has finished
            elapsed = time.perf_counter() - record["start"]
            if step >= 2:
                timed.append(elapsed)
                with ddp.no_sync():  # the same backward, no communication
                    loss = lm_loss(ddp, x, y)
                    start = time.perf_counter()
                    loss.backward()
                    timed_local.append(time.perf_counter() - start)
            model.zero_grad(set_to_none=True)
        calls = record["calls"]
        out.append({"bucket_cap_mb": cap, "calls": len(calls), "bucket_bytes": [b for _, b in calls],
                    "start_s": [t for t, _ in calls],
                    "grad_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
                    "backward_s": statistics.median(timed), "backward_no_sync_s": statistics.median(timed_local)})
    return out


def bucket_sweep(caps_mb=(0.05, 0.25, 1.0, 25.0), world_size: int = 2, config: LlamaConfig = BUCKET_MODEL,
                 steps: int = 6, batch_size: int = 8, seq_len: int = 32, timeout: float = 120.0) -> list[dict]:
    """DDP's buckets for each cap in `caps_mb` (MiB), measured on `world_size` processes (see
    `ddp_bucket_sweep`; rank 0's record). A small cap means many small all-reduces that start early in backward;
    a large one, few large ones that start late."""
    caps = list(caps_mb)
    if not caps or any(isinstance(c, bool) or not isinstance(c, (int, float)) or not c > 0 for c in caps):
        raise ValueError(f"caps_mb must be positive numbers of MiB, got {caps_mb!r}")
    if not isinstance(config, LlamaConfig):
        raise TypeError(f"config must be a LlamaConfig, got {type(config).__name__}")
    if seq_len > config.max_len:
        raise ValueError(f"seq_len={seq_len} exceeds config.max_len={config.max_len}")
    return launch(ddp_bucket_sweep, world_size, caps, config, steps, batch_size, seq_len, timeout=timeout)[0]
