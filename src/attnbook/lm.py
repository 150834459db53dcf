"""Training a language model on a stream of token ids (chapter 12), and the chapter's larger run as a command.

- `random_windows`: a batch of windows of `context + 1` consecutive tokens at random places of the training ids,
  drawn from a seeded generator: inputs x (batch, context) and next-token targets y, x shifted by one.
- `evaluate_lm`: the mean cross-entropy (nats per token) of every validation token after the first, each
  predicted from up to `context` tokens before it: the tokens the n-gram baselines of `attnbook.text` score.
- `train_lm`: AdamW (`training.adamw`), the warm-up + cosine learning rate (`training.warmup_cosine_lr`),
  gradient clipping, a fixed seed, the validation loss every `eval_every` steps, a tqdm.auto progress bar.
- `generate`: sampling at a temperature (0: greedy), from a seeded generator.

    python -m attnbook.lm --steps 1500 --vocab-size 384 --d-model 128 --n-layers 4 --context 128

trains a larger model the same way on War and Peace and prints its validation perplexity next to the baselines.
The same command runs data-parallel on several processes (chapter 13; `attnbook.parallel.env`):

    torchrun --standalone --nproc-per-node 2 -m attnbook.lm --steps 1500 ...

Each process draws the same global batch of --batch-size windows and keeps rows rank::world_size; the model is
wrapped in DistributedDataParallel (gloo), which averages the gradients, so the run follows the one-process run
with the same global batch; the losses recorded are the global batch's; rank 0 prints. Across machines, run the
same command on each with --nnodes N --rdzv-backend c10d --rdzv-endpoint HOST:PORT instead of --standalone.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._validate import require_int, require_tensor
from .notebook import seed_everything
from .parallel.env import close, init_from_env, mean_over_ranks, rank_and_world, shard_batch, unwrap, wrap_ddp
from .training import _progress_bar, adamw, warmup_cosine_lr

__all__ = ["perplexity", "random_windows", "lm_loss", "evaluate_lm", "LMHistory", "train_lm", "generate", "main"]


def perplexity(mean_loss) -> float:
    """exp(mean cross-entropy in nats): the number of equally likely tokens that would be as surprising.

    `mean_loss` is a number or a tensor; a tensor of several values holds the mean losses of equally large
    batches, whose mean is the mean loss (average the losses, then exponentiate: the mean of the batches'
    perplexities is larger). Returns a Python float, computed in float64.
    """
    if isinstance(mean_loss, Tensor):
        if mean_loss.numel() == 0 or not mean_loss.is_floating_point():
            raise TypeError(f"mean_loss must be a non-empty floating-point tensor, got {mean_loss.dtype} "
                            f"{tuple(mean_loss.shape)}")
        mean_loss = mean_loss.detach().double().mean().item()
    if isinstance(mean_loss, bool) or not isinstance(mean_loss, (int, float)):
        raise TypeError(f"mean_loss must be a number or a tensor, got {type(mean_loss).__name__}")
    return math.exp(mean_loss)


def _token_ids(ids, name: str, min_len: int) -> Tensor:
    require_tensor(ids, name)
    if ids.dim() != 1 or ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise TypeError(f"{name} must be a 1-D integer tensor of token ids, got {ids.dtype} {tuple(ids.shape)}")
    if len(ids) < min_len:
        raise ValueError(f"{name} must hold at least {min_len} tokens, got {len(ids)}")
    return ids


def random_windows(ids: Tensor, batch_size: int, context: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """(x, y), each (batch_size, context): windows of ids at random starts; y[b, t] = ids[start_b + t + 1]."""
    require_int(batch_size, "batch_size", minimum=1)
    require_int(context, "context", minimum=1)
    ids = _token_ids(ids, "ids", context + 1)
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    starts = torch.randint(len(ids) - context, (batch_size,), generator=generator)  # (B,)
    window = starts[:, None] + torch.arange(context + 1)  # (B, context + 1): positions of each window
    chunk = ids[window]  # (B, context + 1)
    return chunk[:, :-1], chunk[:, 1:]


def lm_loss(model: nn.Module, x: Tensor, y: Tensor) -> Tensor:
    """Mean cross-entropy of model(x) (B, T, V) against the next tokens y (B, T)."""
    logits = model(x)  # (B, T, V)
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))


@torch.no_grad()
def evaluate_lm(model: nn.Module, ids: Tensor, context: int, batch_size: int = 64) -> float:
    """Mean cross-entropy in nats of ids[1:], each token predicted from the (up to `context`) tokens before it.

    The ids are cut into consecutive windows of `context + 1` tokens that share their last token with the next
    window's first, so every token after the first is predicted exactly once (the last window may be shorter).
    The model's train/eval mode is restored afterwards. Summed in float64.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    require_int(context, "context", minimum=1)
    require_int(batch_size, "batch_size", minimum=1)
    ids = _token_ids(ids, "ids", 2)
    n_full = (len(ids) - 1) // context  # windows of context + 1 tokens
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    try:
        full = ids[: n_full * context + 1]
        windows = full[:-1].view(n_full, context) if n_full else full[:0].view(0, context)  # (n, context): inputs
        targets = full[1:].view(n_full, context) if n_full else windows  # (n, context)
        for i in range(0, n_full, batch_size):
            logits = model(windows[i:i + batch_size])  # (b, context, V)
            total += F.cross_entropy(logits.reshape(-1, logits.size(-1)).double(),
                                     targets[i:i + batch_size].reshape(-1), reduction="sum").item()
            count += targets[i:i + batch_size].numel()
        rest = ids[n_full * context:]  # the tail: fewer than context + 1 tokens
        if len(rest) > 1:
            logits = model(rest[None, :-1])  # (1, r, V)
            total += F.cross_entropy(logits[0].double(), rest[1:], reduction="sum").item()
            count += len(rest) - 1
    finally:
        model.train(was_training)
    return total / count


@dataclass
class LMHistory:
    """What `train_lm` recorded: per step the training loss, learning rate and gradient norm (before clipping);
    the validation loss at `val_steps` (after that many steps); wall time and tokens seen."""

    losses: list[float] = field(default_factory=list)
    lrs: list[float] = field(default_factory=list)
    grad_norms: list[float] = field(default_factory=list)
    val_steps: list[int] = field(default_factory=list)
    val_losses: list[float] = field(default_factory=list)
    seconds: float = field(default=0.0, compare=False)  # wall time of the training steps, evaluations excluded
    tokens: int = 0

    @property
    def val_loss(self) -> float:
        """The last validation loss."""
        if not self.val_losses:
            raise ValueError("no validation loss was recorded")
        return self.val_losses[-1]

    def plot(self, ax=None, *, smooth: int = 20):
        """Training loss (its moving average over `smooth` steps) and validation loss against step; the Axes."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots()
        steps = range(1, len(self.losses) + 1)
        ax.plot(steps, self.losses, alpha=0.25, linewidth=1, color="tab:blue")
        k = max(1, min(smooth, len(self.losses)))
        avg = [sum(self.losses[max(0, i - k + 1):i + 1]) / len(self.losses[max(0, i - k + 1):i + 1])
               for i in range(len(self.losses))]
        ax.plot(steps, avg, linewidth=2, color="tab:blue", label="training (moving average)")
        ax.plot(self.val_steps, self.val_losses, "o-", color="tab:orange", label="validation")
        ax.set(xlabel="step", ylabel="cross-entropy (nats per token)")
        ax.legend()
        return ax


def train_lm(model: nn.Module, train_ids: Tensor, val_ids: Tensor, *, steps: int, batch_size: int, context: int,
             max_lr: float, min_lr: float | None = None, warmup_steps: int | None = None, weight_decay: float = 0.1,
             clip: float | None = 1.0, eval_every: int | None = None, eval_tokens: int | None = None, seed: int = 0,
             progress: bool = True, desc: str = "training") -> LMHistory:
    """Train `model` (token ids (B, T) -> logits (B, T, V)) on random windows of train_ids for `steps` steps.

    AdamW (`training.adamw`: betas (0.9, 0.95), decay on matrices), learning rate `warmup_cosine_lr(step, max_lr,
    warmup_steps, steps, min_lr)` (defaults: warmup_steps = steps // 10, min_lr = max_lr / 10), gradients
    clipped to norm `clip` (None: not clipped). Everything random comes from `seed`: the model is left as it is,
    so seed it before building it. The validation loss (`evaluate_lm` on the first `eval_tokens` of val_ids, all
    of them by default) is recorded every `eval_every` steps and after the last. The model ends in eval() mode.

    In a process group (torchrun; `model` wrapped in DistributedDataParallel), batch_size is the global batch:
    every rank draws the same windows and trains on rows rank::world_size (batch_size must be divisible by the
    number of processes); the losses and tokens recorded are the global batch's, and only rank 0 shows a bar.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    require_int(steps, "steps", minimum=1)
    train_ids = _token_ids(train_ids, "train_ids", 2)
    val_ids = _token_ids(val_ids, "val_ids", 2)
    warmup_steps = steps // 10 if warmup_steps is None else warmup_steps
    min_lr = max_lr / 10 if min_lr is None and isinstance(max_lr, (int, float)) else min_lr
    warmup_cosine_lr(0, max_lr, warmup_steps, steps, min_lr)  # checks the schedule's arguments
    if eval_every is not None:
        require_int(eval_every, "eval_every", minimum=1)
    if eval_tokens is not None:
        require_int(eval_tokens, "eval_tokens", minimum=2)
    if clip is not None and (isinstance(clip, bool) or not isinstance(clip, (int, float)) or not clip > 0):
        raise ValueError(f"clip must be a positive number or None, got {clip!r}")
    val = val_ids if eval_tokens is None else val_ids[:eval_tokens]
    seed_everything(seed)
    generator = torch.Generator().manual_seed(seed)
    optimizer = adamw(model, max_lr, weight_decay=weight_decay)
    params = [p for group in optimizer.param_groups for p in group["params"]]
    history = LMHistory()
    rank, world = rank_and_world()
    bar = _progress_bar(total=steps, desc=desc, disable=not progress or rank != 0)
    model.train()
    spent = 0.0
    try:
        for step in range(steps):
            start = time.perf_counter()
            lr = warmup_cosine_lr(step, max_lr, warmup_steps, steps, min_lr)
            for group in optimizer.param_groups:
                group["lr"] = lr
            x, y = random_windows(train_ids, batch_size, context, generator)  # (B, T) each
            x, y = shard_batch(x, rank, world), shard_batch(y, rank, world)  # (B / world, T): this rank's rows
            loss = lm_loss(model, x, y)
            value = mean_over_ranks(loss.item())  # the global batch's loss (the same on every rank)
            if not math.isfinite(value):
                raise FloatingPointError(f"the loss became {value} at step {step + 1}; try a lower max_lr")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            norm = nn.utils.clip_grad_norm_(params, clip if clip is not None else math.inf)
            optimizer.step()
            spent += time.perf_counter() - start
            history.losses.append(value)
            history.lrs.append(lr)
            history.grad_norms.append(float(norm))
            history.tokens += x.numel() * world
            if (eval_every is not None and (step + 1) % eval_every == 0) or step + 1 == steps:
                history.val_steps.append(step + 1)
                history.val_losses.append(evaluate_lm(unwrap(model), val, context))
                model.train()
            bar.update(1)
            if (step + 1) % 10 == 0 or step + 1 == steps:
                bar.set_postfix(loss=f"{value:.3f}", refresh=False)
    finally:
        bar.close()
        model.eval()
        history.seconds = spent
    return history


@torch.no_grad()
def generate(model: nn.Module, ids: Tensor, max_new_tokens: int, *, temperature: float = 1.0,
             generator: torch.Generator | None = None, context: int | None = None) -> Tensor:
    """ids (B, T) followed by max_new_tokens tokens: (B, T + max_new_tokens). Each new token is drawn from
    softmax(logits / temperature) with `generator`, or is the argmax at temperature 0 (greedy). The model sees
    the last `context` tokens (default: its config's max_len)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    require_tensor(ids, "ids")
    if ids.dim() != 2 or ids.is_floating_point():
        raise ValueError(f"ids must be an integer tensor of shape (batch, T), got {ids.dtype} {tuple(ids.shape)}")
    require_int(max_new_tokens, "max_new_tokens", minimum=0)
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not temperature >= 0:
        raise ValueError(f"temperature must be a number >= 0, got {temperature!r}")
    if temperature > 0 and not isinstance(generator, torch.Generator):
        raise TypeError("sampling at a temperature above 0 needs a torch.Generator (generator=...)")
    if context is None:
        context = getattr(getattr(model, "config", None), "max_len", None)
        if context is None:
            raise ValueError("pass context: the model has no config.max_len")
    require_int(context, "context", minimum=1)
    was_training = model.training
    model.eval()
    try:
        for _ in range(max_new_tokens):
            logits = model(ids[:, -context:])[:, -1]  # (B, V): the scores of the next token
            if temperature == 0:
                nxt = logits.argmax(dim=-1, keepdim=True)  # (B, 1)
            else:
                probs = torch.softmax(logits.double() / temperature, dim=-1)  # (B, V), float64
                nxt = torch.multinomial(probs, 1, generator=generator)  # (B, 1)
            ids = torch.cat([ids, nxt], dim=1)
    finally:
        model.train(was_training)
    return ids


# --- The larger run: python -m attnbook.lm ------------------------------------------------------------------


# The larger run that chapter 12 documents, as it printed: recorded data with its provenance (it takes about eight
# minutes, so the chapter shows it rather than running it). Validation perplexity by step; tokens seen in training.
LARGER_RUN = {
    "command": ("python -m attnbook.lm --steps 1500 --vocab-size 384 --d-model 128 --n-layers 4 --n-heads 4 "
                "--context 128 --batch-size 32 --lr 5e-3 --threads 1"),
    "recorded": "2026-11-25 on a shared 2-core AMD EPYC machine (CPU), 1 thread, torch 2.13.0",
    "parameters": 828_544,
    "train_tokens": 6_144_000,
    "seconds": 475,
    "validation_perplexity": {250: 16.1, 500: 12.2, 750: 10.7, 1000: 9.7, 1250: 9.1, 1500: 8.7},
    "bigram_perplexity": 31.4,
    "unigram_perplexity": 123.4,
    "sample_temperature_0_8": ("he try to putting them such in the middle of their shoulders.\n\nThe most "
                               "understanding in the forest, and all the staff instead"),
}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m attnbook.lm", description=(
        "Train a Llama-style model on War and Peace (chapter 12's recipe) and print its validation perplexity "
        "next to the unigram and bigram baselines."))
    p.add_argument("--vocab-size", type=int, default=384, help="tokens of the byte-level BPE (256 bytes + merges)")
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--n-layers", type=int, default=4)
    p.add_argument("--n-heads", type=int, default=4)
    p.add_argument("--context", type=int, default=128, help="tokens a prediction sees (the model's max_len)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--lr", type=float, default=5e-3, help="the peak learning rate (warm-up 10%%, cosine to 1/10)")
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--threads", type=int, default=1, help="torch threads (the chapter uses 1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--max-chars", type=int, default=None,
                   help="use only this many first characters of the book (quick runs)")
    p.add_argument("--history", default=None, help="write the losses per step and the validation losses to this "
                                                   "JSON file (rank 0)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    rank, world = init_from_env()  # (0, 1) on a plain run; under torchrun, joins the gloo process group
    try:
        return _train_and_report(args, rank, world)
    finally:
        close()


def _train_and_report(args: argparse.Namespace, rank: int, world: int) -> int:
    from .models.llama import Llama, LlamaConfig
    from .text import (BIGRAM_WEIGHTS, bigram_perplexity, encode, load_war_and_peace, split_text, train_tokenizer,
                       unigram_perplexity)

    torch.set_num_threads(args.threads)
    book = load_war_and_peace()
    train_text, val_text = split_text(book if args.max_chars is None else book[:args.max_chars])
    tokenizer = train_tokenizer(train_text, args.vocab_size)
    train_ids, val_ids = encode(tokenizer, train_text), encode(tokenizer, val_text)
    V = tokenizer.get_vocab_size()
    seed_everything(args.seed)
    d_ff = 8 * args.d_model // 3 // 8 * 8  # SwiGLU's width: 8/3 d_model (Llama), a multiple of 8
    config = LlamaConfig(vocab_size=V, d_model=args.d_model, n_layers=args.n_layers, n_heads=args.n_heads,
                         n_kv_heads=args.n_heads, d_ff=d_ff, max_len=args.context, tie_embeddings=True)
    model = wrap_ddp(Llama(config))  # DistributedDataParallel under torchrun, the model itself otherwise
    n_params = sum(p.numel() for p in model.parameters())
    if rank == 0:
        print(f"{n_params:,} parameters; {len(train_ids):,} training and {len(val_ids):,} validation tokens; "
              f"{torch.get_num_threads()} thread{'' if torch.get_num_threads() == 1 else 's'}"
              + (f" in each of {world} processes" if world > 1 else ""), flush=True)
    history = train_lm(model, train_ids, val_ids, steps=args.steps, batch_size=args.batch_size,
                       context=args.context, max_lr=args.lr, eval_every=args.eval_every, seed=args.seed,
                       progress=not args.no_progress)
    if rank != 0:  # rank 0 reports
        return 0
    if args.history is not None:
        with open(args.history, "w", encoding="utf-8") as f:
            json.dump({"losses": history.losses, "val_steps": history.val_steps, "val_losses": history.val_losses,
                       "tokens": history.tokens, "world_size": world}, f)
    for step, loss in zip(history.val_steps, history.val_losses):
        print(f"step {step:>6}: validation loss {loss:.3f}, perplexity {perplexity(loss):.1f}")
    uni = unigram_perplexity(train_ids, val_ids, V)
    bi = min(bigram_perplexity(train_ids, val_ids, V, w) for w in BIGRAM_WEIGHTS)  # its best weight
    print(f"validation perplexity: model {perplexity(history.val_loss):.1f}, bigram {bi:.1f}, unigram {uni:.1f}")
    print(f"{history.tokens:,} tokens in {history.seconds:.0f} s of training")
    prompt = torch.tensor([tokenizer.encode("\n\n").ids])
    out = generate(unwrap(model), prompt, 60, temperature=0.8, generator=torch.Generator().manual_seed(args.seed))
    print("sample at temperature 0.8:", tokenizer.decode(out[0, prompt.size(1):].tolist()).strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
