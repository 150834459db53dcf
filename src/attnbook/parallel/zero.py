"""Sharding the optimizer, the gradients and the parameters: ZeRO (Rajbhandari et al. 2020) and FSDP2.

Data parallelism keeps N copies of everything. ZeRO ("Zero Redundancy Optimizer", Rajbhandari, Rasley, Ruwase
and He, SC 2020, arXiv:1910.02054) keeps one: with mixed-precision Adam, a model of Ψ parameters holds 2Ψ bytes
of float16 parameters, 2Ψ of float16 gradients and KΨ of optimizer state (K = 12: a float32 copy of the
parameters, Adam's momentum and variance), 16Ψ bytes in all per device. Stage 1 (P_os) splits the optimizer
state over the N devices, stage 2 (P_os+g) the gradients too, stage 3 (P_os+g+p) the parameters too
(`zero_memory`; the paper's Figure 1: 7.5B parameters on 64 devices need 120, 31.4, 16.6 and 1.9 GB).

- `ShardedAdamW`: ZeRO-1 by hand. Each parameter group is laid out in one flat buffer (the model's parameters
  become views into it) cut into N equal shards; rank r keeps AdamW's state for shard r only. A step
  reduce-scatters the gradients (rank r receives the average of shard r), updates shard r, and all-gathers the
  shards so that every rank holds the whole updated model again.
- `train_zero1` and `train_fsdp2`: launched workers that train `toy.tiny_llama` with `ShardedAdamW`, and with
  PyTorch's FSDP2 (`torch.distributed.fsdp.fully_shard`, which shards parameters, gradients and optimizer
  state: stage 3), returning the losses, the full trained weights and the bytes each rank holds.
"""
from __future__ import annotations

import math

import torch
import torch.distributed as dist
from torch import Tensor, nn

from .._validate import require_int
from ..lm import lm_loss
from ..models.llama import LlamaConfig
from ..training import adamw
from .env import shard_batch
from .toy import parameter_bytes, tiny_llama

__all__ = ["PAPER_FIGURE_1", "zero_memory", "ShardedAdamW", "optimizer_state_bytes", "train_zero1", "train_fsdp2"]

# Rajbhandari et al. 2020, Figure 1: Ψ = 7.5B parameters, N_d = 64 devices, K = 12; bytes per device, in GB
# (1e9 bytes) as the paper prints them.
PAPER_FIGURE_1 = {"params": 7.5e9, "devices": 64, "gb": {0: 120.0, 1: 31.4, 2: 16.6, 3: 1.9}}


def zero_memory(n_params: float, n_devices: int, stage: int, *, param_bytes: float = 2, grad_bytes: float = 2,
                optimizer_bytes: float = 12) -> float:
    """Bytes of model states per device under ZeRO stage 0 (plain data parallelism), 1, 2 or 3.

    Per parameter: `param_bytes` (2: float16), `grad_bytes` (2) and `optimizer_bytes` (the paper's K = 12 for
    mixed-precision Adam). Stage 1 divides the optimizer's share by n_devices, stage 2 the gradients' too,
    stage 3 everything: (2 + 2 + K)Ψ, (2 + 2)Ψ + KΨ/N, 2Ψ + (2 + K)Ψ/N, (2 + 2 + K)Ψ/N. Activations, buffers
    and fragmentation are not counted (the paper's Figure 1 does not count them either)."""
    if isinstance(n_params, bool) or not isinstance(n_params, (int, float)) or not n_params > 0:
        raise ValueError(f"n_params must be a positive number, got {n_params!r}")
    require_int(n_devices, "n_devices", minimum=1)
    if stage not in (0, 1, 2, 3) or isinstance(stage, bool):
        raise ValueError(f"stage must be 0, 1, 2 or 3, got {stage!r}")
    for name, value in (("param_bytes", param_bytes), ("grad_bytes", grad_bytes),
                        ("optimizer_bytes", optimizer_bytes)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ValueError(f"{name} must be a number >= 0, got {value!r}")
    n = n_devices
    p = param_bytes / n if stage >= 3 else param_bytes
    g = grad_bytes / n if stage >= 2 else grad_bytes
    o = optimizer_bytes / n if stage >= 1 else optimizer_bytes
    return (p + g + o) * n_params


def _groups(params, defaults: dict) -> list[dict]:
    """Parameter groups as torch optimizers take them: an iterable of tensors, or of dicts with 'params'."""
    params = list(params)
    if not params:
        raise ValueError("params is empty: nothing to optimize")
    if all(isinstance(p, Tensor) for p in params):
        params = [{"params": params}]
    if not all(isinstance(g, dict) and "params" in g for g in params):
        raise TypeError("params must be tensors, or dicts with a 'params' list (an optimizer's param_groups)")
    return [{**defaults, **{k: v for k, v in g.items() if k in defaults}, "params": list(g["params"])}
            for g in params]


class ShardedAdamW:
    """AdamW whose state is split over the ranks of the default process group: ZeRO stage 1, by hand.

    `params` are tensors or parameter groups (e.g. `training.adamw(model, lr).param_groups`, whose lr, betas,
    eps and weight_decay are kept). Each group's parameters are copied into one flat buffer, padded to a multiple
    of the world size N, and become views into it (`p.data`). Rank r owns elements [r·s, (r+1)·s) of each buffer
    (s = its length / N) and an AdamW (PyTorch's) over that slice only: 2·s elements of state per group instead of
    2·N·s. `step()` reduce-scatters the gradients (summed, divided by N: the average), steps the slice in place
    and all-gathers the slices into the buffer. Every rank must call `step()` together.
    """

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2):
        if not dist.is_initialized():
            raise RuntimeError("ShardedAdamW needs a process group: run it in launched processes (launch)")
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay}
        self.flat, self.params, inner = [], [], []
        for group in _groups(params, defaults):
            ps = group.pop("params")
            n = sum(p.numel() for p in ps)
            size = math.ceil(n / self.world_size)  # each rank's shard
            flat = torch.zeros(size * self.world_size, dtype=ps[0].dtype)
            offset = 0
            with torch.no_grad():
                for p in ps:
                    flat[offset:offset + p.numel()].copy_(p.reshape(-1))
                    p.data = flat[offset:offset + p.numel()].view_as(p)  # the parameter lives in the buffer
                    offset += p.numel()
            shard = nn.Parameter(flat[self.rank * size:(self.rank + 1) * size])  # a view: updated in place
            self.flat.append(flat)
            self.params.append(ps)
            inner.append({"params": [shard], **group})
        self.optimizer = torch.optim.AdamW(inner, foreach=False)

    @property
    def param_groups(self) -> list[dict]:
        """The inner optimizer's groups (one shard each): set a new learning rate here."""
        return self.optimizer.param_groups

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the model's gradients (set them to None by default)."""
        for ps in self.params:
            for p in ps:
                if set_to_none:
                    p.grad = None
                elif p.grad is not None:
                    p.grad.zero_()

    @torch.no_grad()
    def step(self) -> None:
        """Average the gradients into this rank's shard (reduce-scatter), update the shard, all-gather."""
        for flat, ps, group in zip(self.flat, self.params, self.optimizer.param_groups):
            grads = torch.zeros_like(flat)  # (N·s,): this rank's full gradient, padded
            offset = 0
            for p in ps:
                if p.grad is not None:
                    grads[offset:offset + p.numel()] = p.grad.reshape(-1)
                offset += p.numel()
            shard = group["params"][0]
            shard.grad = torch.empty_like(shard)
            dist.reduce_scatter(shard.grad, list(grads.chunk(self.world_size)))  # (s,): the sum over the ranks
            shard.grad.div_(self.world_size)
        self.optimizer.step()  # each rank updates its own slice of the buffers
        for flat, group in zip(self.flat, self.optimizer.param_groups):
            mine = group["params"][0].detach().clone()
            dist.all_gather(list(flat.chunk(self.world_size)), mine)  # every slice, into every rank's buffer

    def state_bytes(self) -> int:
        """Bytes of optimizer state this rank holds: AdamW's momentum and variance of its shards (the step
        counters, one number per shard, are not counted)."""
        return optimizer_state_bytes(self.optimizer)


def optimizer_state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes of an optimizer's per-element state on this rank (tensors with more than one element; a DTensor
    counts its local shard): for Adam and AdamW, the momentum and the variance."""
    total = 0
    for state in optimizer.state.values():
        for value in state.values():
            if isinstance(value, Tensor):
                local = value.to_local() if hasattr(value, "to_local") else value
                if value.numel() > 1:
                    total += local.numel() * local.element_size()
    return total


def _train(rank: int, world_size: int, model: nn.Module, optimizer, batches: list) -> list[float]:
    losses = []
    for x, y in batches:
        x, y = shard_batch(x, rank, world_size), shard_batch(y, rank, world_size)  # (B / N, T) each
        optimizer.zero_grad(set_to_none=True)
        loss = lm_loss(model, x, y)
        loss.backward()
        optimizer.step()
        total = loss.detach().clone()
        dist.all_reduce(total)
        losses.append(total.item() / world_size)
    return losses


def train_zero1(rank: int, world_size: int, config: LlamaConfig | None, seed: int, batches: list,
                lr: float = 1e-2) -> dict:
    """Launched worker: train `tiny_llama(config, seed)` on rows rank::world_size of each batch with
    `ShardedAdamW` over `training.adamw`'s groups. Returns losses (of the global batch), state (the trained
    weights), param_bytes and grad_bytes (held by this rank: all of them, in stage 1) and optimizer_bytes."""
    model = tiny_llama(config, seed)
    optimizer = ShardedAdamW(adamw(model, lr).param_groups)
    losses = _train(rank, world_size, model, optimizer, batches)
    grads = sum(p.grad.numel() * p.grad.element_size() for p in model.parameters() if p.grad is not None)
    return {"losses": losses, "state": {k: v.clone() for k, v in model.state_dict().items()},
            "param_bytes": parameter_bytes(model), "grad_bytes": grads, "optimizer_bytes": optimizer.state_bytes()}


def train_fsdp2(rank: int, world_size: int, config: LlamaConfig | None, seed: int, batches: list,
                lr: float = 1e-2) -> dict:
    """Launched worker: the same training under FSDP2: `fully_shard` on each block, then on the whole model
    (parameters become DTensors sharded on their first dimension), and `training.adamw` over them. Returns
    losses, state (the full weights, all-gathered), and the bytes of parameters, gradients and optimizer state
    that this rank holds between steps."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (world_size,))
    model = tiny_llama(config, seed)
    for block in model.blocks:
        fully_shard(block, mesh=mesh)  # each block's parameters gathered just before it runs, freed after
    fully_shard(model, mesh=mesh)  # the rest: embedding, final norm, head
    optimizer = adamw(model, lr)
    losses = _train(rank, world_size, model, optimizer, batches)
    grads = sum(p.grad.to_local().numel() * p.grad.element_size() for p in model.parameters() if p.grad is not None)
    state = {k: v.full_tensor() for k, v in model.state_dict().items()}  # every rank gathers each tensor
    return {"losses": losses, "state": state, "param_bytes": parameter_bytes(model), "grad_bytes": grads,
            "optimizer_bytes": optimizer_state_bytes(optimizer)}
