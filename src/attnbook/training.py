"""A minimal training loop: seeding, Adam, gradient clipping, a tqdm progress bar and a loss history to plot.

Chapter 12's pieces for language models are here too: `adamw` (AdamW that decays only the weight matrices) and
`warmup_cosine_lr` (linear warm-up, then a half cosine down to a floor); `attnbook.lm` trains with them."""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from ._validate import require_int, require_tensor
from .notebook import seed_everything

__all__ = ["History", "train", "evaluate", "accuracy", "exact_match", "adamw", "warmup_cosine_lr"]


@dataclass
class History:
    """The training loss at every step (one float per optimizer step) and the wall time it took."""

    losses: list[float] = field(default_factory=list)
    seconds: float = field(default=0.0, compare=False)  # wall time; differs between runs, so not compared

    def __len__(self) -> int:
        return len(self.losses)

    @property
    def final(self) -> float:
        """Mean loss over the last 10% of the steps (at least one): a less noisy 'final loss'."""
        if not self.losses:
            raise ValueError("the history is empty: no step was taken")
        k = max(1, len(self.losses) // 10)
        return sum(self.losses[-k:]) / k

    def smoothed(self, window: int | None = None) -> list[float]:
        """Trailing moving average of the losses over `window` steps (default: about 1/20 of the run)."""
        window = max(1, len(self.losses) // 20) if window is None else require_int(window, "window", minimum=1)
        out, total = [], 0.0
        for i, loss in enumerate(self.losses):
            total += loss
            if i >= window:
                total -= self.losses[i - window]
            out.append(total / min(i + 1, window))
        return out

    def plot(self, ax=None, *, smooth: bool = True, log: bool = False, label: str | None = None):
        """Loss against step: the raw curve faint, its moving average on top. Returns the Axes."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots()
        steps = range(1, len(self.losses) + 1)
        raw = ax.plot(steps, self.losses, alpha=0.3 if smooth else 1.0, linewidth=1, label=None if smooth else label)
        if smooth:
            ax.plot(steps, self.smoothed(), color=raw[0].get_color(), linewidth=2, label=label)
        if log:
            ax.set_yscale("log")
        ax.set_xlabel("step")
        ax.set_ylabel("training loss")
        if label is not None:
            ax.legend()
        return ax


def _optional_positive(x, name: str):
    if x is not None:
        require_int(x, name, minimum=1)
    return x


def train(
    model: nn.Module,
    batches: Iterable,
    loss_fn: Callable[[nn.Module, object], Tensor],
    *,
    steps: int | None = None,
    epochs: int | None = None,
    lr: float = 1e-3,
    optimizer: torch.optim.Optimizer | None = None,
    schedule: str = "constant",
    warmup_steps: int = 0,
    clip_grad: float | None = 1.0,
    progress: bool = True,
    seed: int | None = 0,
    desc: str = "training",
) -> History:
    """Minimise loss_fn(model, batch) over `batches` for `steps` optimizer steps or `epochs` passes (default 1 epoch).

    `batches` must be re-iterable (a list, a DataLoader, `data.TensorBatches`): each epoch iterates it again,
    and with `steps` it is cycled. The optimizer is Adam(lr) unless one is given. The learning rate rises
    linearly over `warmup_steps`, then stays constant (`schedule="constant"`) or decays to zero along a
    half cosine (`schedule="cosine"`, which often turns 96% accuracy into 100% on the toy tasks). Gradients
    are clipped to norm `clip_grad` (None: no clipping).
    Seeds everything with `seed` first (None: leave the generators alone). The model is in train() mode
    during the loop and in eval() mode afterwards.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    if not callable(loss_fn):
        raise TypeError(f"loss_fn must be callable as loss_fn(model, batch), got {type(loss_fn).__name__}")
    if isinstance(batches, (str, bytes)) or not isinstance(batches, Iterable):
        raise TypeError(f"batches must be an iterable of batches, got {type(batches).__name__}")
    _optional_positive(steps, "steps")
    _optional_positive(epochs, "epochs")
    if steps is not None and epochs is not None:
        raise ValueError(f"pass steps or epochs, not both (got steps={steps}, epochs={epochs})")
    if steps is None and epochs is None:
        epochs = 1
    if optimizer is None:
        if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not (math.isfinite(lr) and lr > 0):
            raise ValueError(f"lr must be a positive float, got {lr!r}")
    elif not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}")
    if clip_grad is not None and (
        isinstance(clip_grad, bool) or not isinstance(clip_grad, (int, float)) or not clip_grad > 0
    ):
        raise ValueError(f"clip_grad must be a positive float or None, got {clip_grad!r}")
    if schedule not in ("constant", "cosine"):
        raise ValueError(f"schedule must be 'constant' or 'cosine', got {schedule!r}")
    require_int(warmup_steps, "warmup_steps", minimum=0)
    if seed is not None:
        seed_everything(seed)

    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("model has no trainable parameters")
    if optimizer is None:
        optimizer = torch.optim.Adam(params, lr=lr)
    try:
        per_epoch = len(batches)  # type: ignore[arg-type]
    except TypeError:
        per_epoch = None
    total = steps if steps is not None else (epochs * per_epoch if per_epoch is not None else None)
    if total is None and (schedule == "cosine" or warmup_steps):
        raise ValueError(
            "schedule='cosine' and warmup_steps need the number of steps: pass steps, or batches with a len()"
        )
    if warmup_steps and total is not None and warmup_steps >= total:
        raise ValueError(f"warmup_steps={warmup_steps} must be smaller than the number of steps ({total})")
    scheduler = None
    if schedule == "cosine" or warmup_steps:
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda t: _lr_factor(t, total, warmup_steps, schedule))

    history = History()
    start = time.perf_counter()
    model.train()
    bar = _progress_bar(total=total, desc=desc, disable=not progress)
    try:
        epoch = 0
        while epochs is None or epoch < epochs:
            taken_this_epoch = 0
            for batch in batches:
                optimizer.zero_grad(set_to_none=True)
                loss = loss_fn(model, batch)
                if not isinstance(loss, Tensor) or loss.numel() != 1:
                    shape = tuple(loss.shape) if isinstance(loss, Tensor) else ""
                    raise TypeError(f"loss_fn must return a scalar tensor, got {type(loss).__name__} {shape}")
                value = loss.item()
                if not math.isfinite(value):
                    raise FloatingPointError(f"the loss became {value} at step {len(history) + 1}; try a lower lr")
                loss.backward()
                if clip_grad is not None:
                    nn.utils.clip_grad_norm_(params, clip_grad)
                optimizer.step()
                if scheduler is not None:
                    scheduler.step()
                history.losses.append(value)
                taken_this_epoch += 1
                bar.update(1)
                if len(history) % 10 == 0 or len(history) == total:
                    bar.set_postfix(loss=f"{value:.4f}", refresh=False)
                if steps is not None and len(history) >= steps:
                    return history
            if taken_this_epoch == 0:
                hint = ": pass a re-iterable (a list, a DataLoader, TensorBatches), not a generator"
                raise ValueError("batches yielded no batch" + (" on a second pass" + hint if epoch else ""))
            epoch += 1
        return history
    finally:
        bar.close()
        model.eval()
        history.seconds = time.perf_counter() - start


def _progress_bar(total, desc: str, disable: bool):
    """tqdm.auto's bar: a widget in Jupyter and Colab when ipywidgets is there; otherwise a text bar on stdout
    (tqdm.auto would fall back to stderr and warn, which a notebook shows as an error-coloured output)."""
    try:
        import ipywidgets  # noqa: F401
        from tqdm.auto import tqdm
    except ImportError:
        import sys

        from tqdm.std import tqdm

        return tqdm(total=total, desc=desc, disable=disable, leave=True, file=sys.stdout, mininterval=1.0)
    return tqdm(total=total, desc=desc, disable=disable, leave=True)


def _lr_factor(step: int, total: int, warmup_steps: int, schedule: str) -> float:
    """Multiplier of the base learning rate before optimizer step `step` (0-based)."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if schedule == "constant":
        return 1.0
    progress = (step - warmup_steps) / max(1, total - warmup_steps)  # 0 -> 1 over the decay
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def _batch_size(batch) -> int:
    first = batch
    while isinstance(first, (tuple, list)) and first:
        first = first[0]
    return first.size(0) if isinstance(first, Tensor) and first.dim() > 0 else 1


@torch.no_grad()
def evaluate(model: nn.Module, batches: Iterable, metric_fn: Callable[[nn.Module, object], float | Tensor]) -> float:
    """Mean of metric_fn(model, batch) over `batches`, weighted by batch size, in eval() mode without gradients.

    The model's train/eval mode is restored afterwards.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    if not callable(metric_fn):
        raise TypeError(f"metric_fn must be callable as metric_fn(model, batch), got {type(metric_fn).__name__}")
    was_training = model.training
    model.eval()
    try:
        total, count = 0.0, 0
        for batch in batches:
            n = _batch_size(batch)
            total += float(metric_fn(model, batch)) * n
            count += n
    finally:
        model.train(was_training)
    if count == 0:
        raise ValueError("batches yielded no batch")
    return total / count


def accuracy(logits: Tensor, labels: Tensor, ignore_index: int | None = None) -> float:
    """Fraction of positions where argmax(logits, -1) equals the label; positions labelled `ignore_index` skipped.

    logits (..., C), labels (...).
    """
    require_tensor(logits, "logits", min_dim=1, floating=True)
    require_tensor(labels, "labels")
    if labels.is_floating_point():
        raise TypeError(f"labels must be an integer tensor, got dtype {labels.dtype}")
    if logits.shape[:-1] != labels.shape:
        raise ValueError(f"logits (..., C) and labels (...) disagree: {tuple(logits.shape)} vs {tuple(labels.shape)}")
    keep = torch.ones_like(labels, dtype=torch.bool) if ignore_index is None else labels != ignore_index  # (...)
    if not keep.any():
        raise ValueError("no position to score: every label equals ignore_index")
    correct = (logits.argmax(dim=-1) == labels) & keep  # (...)
    return correct.sum().item() / keep.sum().item()


def exact_match(predictions: Sequence, targets: Sequence) -> float:
    """Fraction of predictions equal to their target as a whole (strings, lists, or rows of 2-D tensors)."""
    if isinstance(predictions, Tensor) != isinstance(targets, Tensor):
        raise TypeError("predictions and targets must both be tensors or both be sequences")
    if isinstance(predictions, Tensor):
        if predictions.dim() != 2 or predictions.shape != targets.shape:
            raise ValueError(
                f"predictions and targets must be (batch, seq) tensors of one shape, got "
                f"{tuple(predictions.shape)} and {tuple(targets.shape)}"
            )
        return (predictions == targets).all(dim=1).float().mean().item()
    if isinstance(predictions, str) or isinstance(targets, str):
        raise TypeError("predictions and targets must be sequences of outputs, not a single str")
    if len(predictions) != len(targets):
        raise ValueError(f"predictions ({len(predictions)}) and targets ({len(targets)}) differ in length")
    if not len(targets):
        raise ValueError("targets is empty")
    return sum(p == t for p, t in zip(predictions, targets)) / len(targets)


# --- Chapter 12: AdamW and the warm-up + cosine schedule ----------------------------------------------------


def _number(x, name: str, *, minimum: float = 0.0, strict: bool = False) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise TypeError(f"{name} must be a number, got {type(x).__name__}")
    if not math.isfinite(x) or x < minimum or (strict and x == minimum):
        raise ValueError(f"{name} must be a finite number {'>' if strict else '>='} {minimum:g}, got {x!r}")
    return float(x)


def adamw(model: nn.Module, lr: float, *, weight_decay: float = 0.1, betas: tuple[float, float] = (0.9, 0.95),
          eps: float = 1e-8) -> torch.optim.AdamW:
    """AdamW over the trainable parameters of `model`, with weight decay on the matrices only.

    Parameters with two or more dimensions (the weights of Linear layers and embeddings) are decayed; vectors
    (norm weights, biases) are not, as in GPT-2, nanoGPT and Llama: pulling a norm's gain towards 0 would only
    shrink a layer's output. A tied matrix is one parameter and is listed once. betas=(0.9, 0.95) is the usual
    choice for language models (GPT-3, Llama).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    lr = _number(lr, "lr", strict=True)
    weight_decay = _number(weight_decay, "weight_decay")
    if not (isinstance(betas, tuple) and len(betas) == 2 and all(
            isinstance(b, (int, float)) and not isinstance(b, bool) and 0 <= b < 1 for b in betas)):
        raise ValueError(f"betas must be a pair of numbers in [0, 1), got {betas!r}")
    params = [p for p in model.parameters() if p.requires_grad]  # parameters() lists a tied matrix once
    if not params:
        raise ValueError("model has no trainable parameters")
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW([g for g in groups if g["params"]], lr=lr, betas=betas, eps=_number(eps, "eps"))


def warmup_cosine_lr(step: int, max_lr: float, warmup_steps: int, total_steps: int, min_lr: float = 0.0) -> float:
    """The learning rate of optimizer step `step` (counted from 0): a linear warm-up, then a half cosine.

    - 0 <= step < warmup_steps: max_lr * (step + 1) / warmup_steps, so the first step already moves and step
      warmup_steps - 1 reaches max_lr;
    - warmup_steps <= step <= total_steps: min_lr + (max_lr - min_lr) * (1 + cos(pi * t)) / 2 with
      t = (step - warmup_steps) / (total_steps - warmup_steps), from max_lr (t = 0) down to min_lr (t = 1);
    - step > total_steps: min_lr.
    `train` uses the same warm-up and, with min_lr = 0, the same cosine (`_lr_factor`).
    """
    require_int(step, "step", minimum=0)
    require_int(warmup_steps, "warmup_steps", minimum=0)
    require_int(total_steps, "total_steps", minimum=1)
    if warmup_steps >= total_steps:
        raise ValueError(f"warmup_steps={warmup_steps} must be smaller than total_steps={total_steps}")
    max_lr = _number(max_lr, "max_lr", strict=True)
    min_lr = _number(min_lr, "min_lr")
    if min_lr > max_lr:
        raise ValueError(f"min_lr={min_lr!r} must not exceed max_lr={max_lr!r}")
    if step < warmup_steps:
        return max_lr * (step + 1) / warmup_steps
    if step >= total_steps:
        return min_lr
    t = (step - warmup_steps) / (total_steps - warmup_steps)  # 0 -> 1 over the decay
    return min_lr + (max_lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * t))
