"""The small model and data every parallel method of chapter 13 trains, and the one-process reference run.

A tiny `Llama` (chapter 11's block) in float64, token batches from a seeded generator, and `train_reference`:
AdamW (`training.adamw`) on the whole batch in one process. Every parallel method is checked by training the
same model on the same batches and comparing with this run to float64's precision.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from .._validate import require_int
from ..lm import lm_loss
from ..models.llama import Llama, LlamaConfig
from ..training import adamw

__all__ = ["tiny_config", "tiny_llama", "token_batches", "train_reference", "parameter_bytes"]


def tiny_config(**changes) -> LlamaConfig:
    """A Llama small enough to train in milliseconds: vocabulary 32, d_model 16, 2 layers, 4 query heads and 2
    key/value heads, SwiGLU width 32, sequences up to 8 tokens. Keyword arguments change any field."""
    sizes = dict(vocab_size=32, d_model=16, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=32, max_len=8)
    return LlamaConfig(**{**sizes, **changes})


def tiny_llama(config: LlamaConfig | None = None, seed: int = 0, dtype: torch.dtype = torch.float64) -> Llama:
    """A `Llama(config)` (default `tiny_config()`) built after `torch.manual_seed(seed)`, in `dtype`: the same
    weights in every process that calls it with the same arguments."""
    config = tiny_config() if config is None else config
    require_int(seed, "seed", minimum=0)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point torch.dtype, got {dtype!r}")
    torch.manual_seed(seed)
    return Llama(config).to(dtype)


def token_batches(steps: int, batch_size: int, seq_len: int, vocab_size: int,
                  seed: int = 0) -> list[tuple[Tensor, Tensor]]:
    """`steps` batches (x, y) of random token ids, each (batch_size, seq_len), from a generator seeded with
    `seed`; y is x shifted by one (windows of seq_len + 1 tokens), as a language model's targets."""
    for name, value in (("steps", steps), ("batch_size", batch_size), ("seq_len", seq_len),
                        ("vocab_size", vocab_size)):
        require_int(value, name, minimum=1)
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(steps):
        window = torch.randint(vocab_size, (batch_size, seq_len + 1), generator=g)  # (B, T + 1)
        out.append((window[:, :-1], window[:, 1:]))
    return out


def train_reference(model: nn.Module, batches: list, lr: float = 1e-2) -> list[float]:
    """Train `model` in this process: for each (x, y) in batches, one AdamW step (`training.adamw(model, lr)`:
    weight decay 0.1 on matrices, betas (0.9, 0.95)) on the mean cross-entropy of the whole batch. Returns the
    losses; the model is trained in place."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    optimizer = adamw(model, lr)
    losses = []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        loss = lm_loss(model, x, y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def parameter_bytes(model: nn.Module) -> int:
    """Bytes of the parameters this process holds (a sharded parameter counts its local shard only)."""
    total = 0
    for p in model.parameters():
        local = p.to_local() if hasattr(p, "to_local") else p  # a DTensor's shard on this rank
        total += local.numel() * local.element_size()
    return total
