"""Pipeline parallelism, GPipe's schedule (Huang et al. 2019, arXiv:1811.06965): layers split into stages.

Stage s of p holds consecutive layers and runs on its own device. The batch is cut into m micro-batches; stage
s runs the forward pass of micro-batch j at time s + j (it needs stage s - 1's output of it), and once all
forwards are done the backward passes run the other way: stage s runs the backward of micro-batch j at time
(m + p - 1) + (p - 1 - s) + j. With forward and backward one time step each, every stage works 2m steps out of
2(m + p - 1); the idle share, the bubble, is (p - 1) / (m + p - 1) (`bubble_fraction`): more micro-batches, a
smaller bubble. The gradients are those of the whole batch: each micro-batch's loss is weighted by 1/m and the
gradients of the m backward passes add up before the optimizer step.

- `gpipe_schedule(p, m)`: who does what at each time step, [stage][time] -> "F3", "B0" or None (idle);
  `format_schedule` draws it as a text table, `idle_fraction` counts its idle cells.
- `split_llama(model, p)`: a Llama cut into p stages (the embedding with the first blocks, the last blocks with
  the final norm and the head).
- `run_gpipe`: a launched worker, one process per stage, activations and their gradients passed with
  `dist.send`/`dist.recv`; returns each stage's gradients, the loss and when each stage was busy.
  `measured_idle_fraction` turns those times into the measured bubble; `measure_bubble` launches the runs.
- `run_pipelining`: the same stages under PyTorch's own `torch.distributed.pipelining.ScheduleGPipe`.
"""
from __future__ import annotations

import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn

from .._validate import require_int
from ..models.llama import Llama, LlamaConfig
from .launcher import launch
from .toy import tiny_config, tiny_llama, token_batches

__all__ = ["gpipe_schedule", "bubble_fraction", "idle_fraction", "format_schedule", "split_llama", "LlamaStage",
           "run_gpipe", "measured_idle_fraction", "measure_bubble", "run_pipelining"]


def gpipe_schedule(n_stages: int, n_micro: int) -> list[list[str | None]]:
    """GPipe's schedule as a table [stage][time step]: "F<j>" (forward of micro-batch j), "B<j>" (its backward)
    or None (idle), with forward and backward one time step each: 2(n_micro + n_stages - 1) steps."""
    p, m = require_int(n_stages, "n_stages", minimum=1), require_int(n_micro, "n_micro", minimum=1)
    length = 2 * (m + p - 1)
    table: list[list[str | None]] = [[None] * length for _ in range(p)]
    for s in range(p):
        for j in range(m):
            table[s][s + j] = f"F{j}"  # after stage s - 1 has run F<j>
            table[s][(m + p - 1) + (p - 1 - s) + j] = f"B{j}"  # after stage s + 1 has run B<j>
    return table


def bubble_fraction(n_stages: int, n_micro: int) -> float:
    """(p - 1) / (m + p - 1): the share of GPipe's stage-steps spent idle (Huang et al. 2019, section 2.2)."""
    p, m = require_int(n_stages, "n_stages", minimum=1), require_int(n_micro, "n_micro", minimum=1)
    return (p - 1) / (m + p - 1)


def idle_fraction(schedule: list[list[str | None]]) -> float:
    """The share of a schedule's cells (stage, time step) that are idle (None)."""
    if not schedule or not all(isinstance(row, list) and len(row) == len(schedule[0]) for row in schedule):
        raise ValueError("schedule must be a non-empty list of equally long lists, [stage][time]")
    cells = [cell for row in schedule for cell in row]
    return sum(cell is None for cell in cells) / len(cells)


def format_schedule(schedule: list[list[str | None]]) -> str:
    """The schedule as a text table: one row per stage, one column per time step, '.' where a stage is idle."""
    idle_fraction(schedule)  # checks the table's shape
    width = max(3, max(len(c) for row in schedule for c in row if c is not None) if any(
        c is not None for row in schedule for c in row) else 3)
    head = "time    " + "".join(f"{t:>{width + 1}}" for t in range(len(schedule[0])))
    rows = [f"stage {s:<2}" + "".join(f"{(c or '.'):>{width + 1}}" for c in row) for s, row in enumerate(schedule)]
    return "\n".join([head, *rows])


class LlamaStage(nn.Module):
    """Consecutive pieces of a Llama: the embedding (first stage only), some blocks, the final norm and head (last
    stage only). Its input is token ids (first stage) or the previous stage's hidden states (B, T, d_model)."""

    def __init__(self, model: Llama, first: int, stop: int, is_first: bool, is_last: bool):
        super().__init__()
        self.tok_emb = model.tok_emb if is_first else None
        self.blocks = nn.ModuleList(model.blocks[first:stop])
        self.norm = model.norm if is_last else None
        self.lm_head = model.lm_head if is_last else None
        self.block_names = list(range(first, stop))  # the block numbers in the whole model

    def forward(self, h: Tensor) -> Tensor:
        """ids (B, T) or hidden states (B, T, d_model) -> hidden states, or logits (B, T, V) on the last stage."""
        if self.tok_emb is not None:
            h = self.tok_emb(h)  # (B, T, d_model)
        for block in self.blocks:
            h = block(h)  # (B, T, d_model)
        return self.lm_head(self.norm(h)) if self.lm_head is not None else h


def split_llama(model: Llama, n_stages: int) -> list[LlamaStage]:
    """`model` cut into n_stages stages of consecutive blocks (as equal as possible, the earlier stages taking
    one more when they cannot be equal). The stages share the model's parameters."""
    if not isinstance(model, Llama):
        raise TypeError(f"model must be a Llama, got {type(model).__name__}")
    p = require_int(n_stages, "n_stages", minimum=1)
    n = len(model.blocks)
    if p > n:
        raise ValueError(f"n_stages={p} exceeds the model's {n} blocks: every stage needs at least one block")
    if model.config.tie_embeddings and p > 1:
        raise ValueError("a tied embedding and head would sit on two stages: build the model untied")
    bounds = [s * (n // p) + min(s, n % p) for s in range(p + 1)]
    return [LlamaStage(model, bounds[s], bounds[s + 1], s == 0, s == p - 1) for s in range(p)]


def _stage_names(model: Llama, stage: LlamaStage) -> dict[int, str]:
    """id(parameter) -> its name in the whole model, for the parameters of `stage`."""
    ours = {id(p) for p in stage.parameters()}
    return {id(p): name for name, p in model.named_parameters() if id(p) in ours}


def run_gpipe(rank: int, world_size: int, config: LlamaConfig | None, seed: int, x: Tensor, y: Tensor,
              n_micro: int, delay_s: float = 0.0) -> dict:
    """Launched worker: rank s runs stage s of `split_llama(tiny_llama(config, seed), world_size)` in GPipe's
    order on the m = n_micro micro-batches of (x, y) (x.size(0) must be divisible by m), the loss being the
    whole batch's mean cross-entropy. Each forward and backward also sleeps `delay_s` seconds (a stand-in for a
    larger stage's work, so that the schedule shows through the processes' start-up noise).

    Returns {"grads": {parameter name: gradient} of this stage, "loss": the batch's loss (last stage; None
    elsewhere), "events": [(kind "F"/"B", micro-batch, start, end)] in time.perf_counter() seconds}."""
    m = require_int(n_micro, "n_micro", minimum=1)
    if x.size(0) % m:
        raise ValueError(f"the batch of {x.size(0)} rows does not split into n_micro={m} equal micro-batches")
    model = tiny_llama(config, seed)
    stage = split_llama(model, world_size)[rank]
    first, last = rank == 0, rank == world_size - 1
    xs, ys = x.chunk(m), y.chunk(m)  # m micro-batches, (B / m, T) each
    shape = (xs[0].size(0), x.size(1), model.config.d_model)  # (B / m, T, d_model): what crosses a boundary
    inputs, outputs, events, loss_sum = [], [], [], 0.0

    def forward(j, h):
        out = stage(h)  # (B / m, T, d_model), or logits (B / m, T, V) on the last stage
        if last:
            return F.cross_entropy(out.reshape(-1, out.size(-1)), ys[j].reshape(-1)) / m
        return out

    def timed(kind, j, work):
        start = time.perf_counter()
        result = work()
        if delay_s:
            time.sleep(delay_s)
        events.append((kind, j, start, time.perf_counter()))
        return result

    dist.barrier()
    for j in range(m):  # forward: F0, F1, ... as inputs arrive
        if first:
            h = xs[j]
        else:
            h = torch.empty(shape, dtype=torch.float64)
            dist.recv(h, src=rank - 1)
            h.requires_grad_(True)
        out = timed("F", j, lambda: forward(j, h))  # the last stage's output is its micro-batch's loss / m
        if last:
            loss_sum += out.item()
        else:
            dist.send(out.detach(), dst=rank + 1)
        inputs.append(h)
        outputs.append(out)
    for j in range(m):  # backward: B0, B1, ... as output gradients arrive; gradients add up over micro-batches
        if last:
            timed("B", j, lambda: outputs[j].backward())
        else:
            g = torch.empty(shape, dtype=torch.float64)
            dist.recv(g, src=rank + 1)
            timed("B", j, lambda: outputs[j].backward(g))
        if not first:
            dist.send(inputs[j].grad, dst=rank - 1)
    names = _stage_names(model, stage)
    return {"grads": {names[id(p)]: p.grad for p in stage.parameters()}, "loss": loss_sum if last else None,
            "events": events}


def measured_idle_fraction(events_per_stage: list[list]) -> float:
    """1 - (time the stages were busy) / (number of stages x the run's span), the span running from the first
    event's start to the last event's end over all stages: the measured bubble of `run_gpipe`'s events."""
    if not events_per_stage or not all(events_per_stage):
        raise ValueError("events_per_stage must hold a non-empty list of events per stage")
    starts = [e[2] for events in events_per_stage for e in events]
    ends = [e[3] for events in events_per_stage for e in events]
    span = max(ends) - min(starts)
    busy = sum(e[3] - e[2] for events in events_per_stage for e in events)
    return 1.0 - busy / (len(events_per_stage) * span)


def measure_bubble(n_stages: int = 2, n_micros=(1, 2, 4, 8), delay_s: float = 0.02, batch_size: int = 8,
                   seed: int = 0, timeout: float = 120.0) -> list[dict]:
    """Run `run_gpipe` on n_stages processes (a tiny Llama of n_stages blocks) for each number of micro-batches,
    each forward and backward taking `delay_s` seconds more; one dict per run: n_micro, formula
    (`bubble_fraction`), measured (`measured_idle_fraction`) and seconds (the run's span)."""
    require_int(n_stages, "n_stages", minimum=1)
    require_int(batch_size, "batch_size", minimum=1)
    for m in n_micros:
        require_int(m, "each of n_micros", minimum=1)
        if batch_size % m:
            raise ValueError(f"batch_size={batch_size} does not split into {m} equal micro-batches (n_micros)")
    if isinstance(delay_s, bool) or not isinstance(delay_s, (int, float)) or not delay_s >= 0:
        raise ValueError(f"delay_s must be a number of seconds >= 0, got {delay_s!r}")
    config = tiny_config(n_layers=n_stages)
    (x, y), = token_batches(1, batch_size, 8, config.vocab_size, seed)
    rows = []
    for m in n_micros:
        results = launch(run_gpipe, n_stages, config, seed, x, y, m, delay_s, timeout=timeout)
        events = [r["events"] for r in results]
        span = max(e[3] for ev in events for e in ev) - min(e[2] for ev in events for e in ev)
        rows.append({"n_micro": m, "formula": bubble_fraction(n_stages, m),
                     "measured": measured_idle_fraction(events), "seconds": span})
    return rows


def run_pipelining(rank: int, world_size: int, config: LlamaConfig | None, seed: int, x: Tensor, y: Tensor,
                   n_micro: int) -> dict:
    """Launched worker: the stages of `split_llama` run by PyTorch's `ScheduleGPipe` (torch.distributed.pipelining)
    with the mean cross-entropy as its loss (it scales each micro-batch's gradients by 1/n_micro). Returns
    {"grads": this stage's gradients by name, "losses": the micro-batches' losses (last stage), None elsewhere}."""
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

    model = tiny_llama(config, seed)
    stage = split_llama(model, world_size)[rank]
    schedule = ScheduleGPipe(PipelineStage(stage, rank, world_size, torch.device("cpu")), n_microbatches=n_micro,
                             loss_fn=lambda out, target: F.cross_entropy(out.reshape(-1, out.size(-1)),
                                                                         target.reshape(-1)))
    losses: list = []
    last = {"target": y, "losses": losses} if rank == world_size - 1 else {}
    if rank == 0:
        schedule.step(x, **last)  # the first stage feeds the micro-batches in
    else:
        schedule.step(**last)  # the last stage computes the loss against the targets
    names = _stage_names(model, stage)
    return {"grads": {names[id(p)]: p.grad for p in stage.parameters()},
            "losses": [loss.item() for loss in losses] if rank == world_size - 1 else None}
