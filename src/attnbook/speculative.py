"""Speculative decoding (Leviathan et al. 2023, arXiv:2211.17192; Chen et al. 2023, arXiv:2302.01318).

A small draft model proposes k tokens, one at a time, from its distributions q_1..q_k; the target model scores
all of them in one pass, which gives its distributions p_1..p_{k+1}. Drafted token x_i is accepted with
probability min(1, p_i(x_i) / q_i(x_i)), in order; at the first rejection the next token is drawn from the
residual normalise(max(0, p_i - q_i)) and the rest of the draft is dropped; when all k are accepted, a bonus
token is drawn from p_{k+1}. Each token this emits has exactly the target's distribution (`first_token_distribution`
computes it in float64), and a target call emits between 1 and k + 1 tokens: (1 - a^(k+1)) / (1 - a) on average
when each draft is accepted with probability a (`expected_tokens`). Greedy decoding is the same rule with one-hot
distributions, so it returns exactly the target's greedy tokens.

`verify_draft` is the deterministic part (the uniform draws given), `speculative_step` adds the draws,
`speculative_generate` runs the loop for two `attnbook.models.GPT` with a KV cache each, and `truncated_draft`
makes a draft of a GPT's first layers (self-speculative decoding, as LayerSkip does: arXiv:2404.16710).
"""
from __future__ import annotations

import copy
import dataclasses

import torch
from torch import Tensor

from ._validate import require_int, require_tensor
from .models.gpt import GPT

__all__ = ["verify_draft", "speculative_step", "acceptance_probability", "expected_tokens",
           "first_token_distribution", "truncated_draft", "speculative_generate"]


def _check_step(p, q, draft, u=None) -> int:
    """Validate one step's arguments; return k, the number of drafted tokens."""
    require_tensor(p, "p", floating=True)
    require_tensor(q, "q", floating=True)
    require_tensor(draft, "draft")
    if p.dim() != 2 or q.dim() != 2:
        raise ValueError(f"p must be (k + 1, vocab) and q (k, vocab), got shapes {tuple(p.shape)} and {tuple(q.shape)}")
    k = q.size(0)
    if p.size(0) != k + 1 or p.size(1) != q.size(1):
        raise ValueError(f"p must have one row more than q (the bonus position) and the same vocabulary, "
                         f"got shapes {tuple(p.shape)} and {tuple(q.shape)}")
    if draft.dtype == torch.bool or draft.is_floating_point() or tuple(draft.shape) != (k,):
        raise ValueError(f"draft must be an integer tensor of shape ({k},), got {draft.dtype} {tuple(draft.shape)}")
    if k and (int(draft.min()) < 0 or int(draft.max()) >= q.size(1)):
        raise ValueError(f"draft must hold token ids in [0, {q.size(1)})")
    if k and bool((q.gather(1, draft[:, None].long()) <= 0).any()):
        raise ValueError("draft holds a token of probability 0 under q: the draft model cannot have drawn it")
    if u is not None:
        require_tensor(u, "u", floating=True)
        if tuple(u.shape) != (k,) or bool(((u < 0) | (u >= 1)).any()):
            raise ValueError(f"u must hold {k} uniform draws in [0, 1), got shape {tuple(u.shape)}")
    return k


def verify_draft(p: Tensor, q: Tensor, draft: Tensor, u: Tensor) -> tuple[int, Tensor]:
    """p (k+1, V), q (k, V), draft (k,), u (k,) -> (n accepted, the distribution (V,) of the next token).

    Drafted token i is accepted when u[i] < p[i, x] / q[i, x] (probability min(1, p/q)), in order, until the
    first rejection. The next token's distribution is the residual max(0, p[n] - q[n]), normalised, at the first
    rejection n, or p[k] (the bonus position) when all k are accepted."""
    k = _check_step(p, q, draft, u)
    rows = torch.arange(k, device=p.device)
    ratio = p[rows, draft] / q[rows, draft]  # (k,)
    accepted = u < ratio  # (k,): a token with p = 0 is always rejected
    n = k if bool(accepted.all()) else int((~accepted).nonzero()[0])
    if n == k:
        return n, p[k].clone()
    residual = (p[n] - q[n]).clamp(min=0)  # (V,): positive where the target wants more than the draft gave
    return n, residual / residual.sum()


def speculative_step(p: Tensor, q: Tensor, draft: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """One step: the accepted drafted tokens followed by one new token, as a (n + 1,) tensor (u drawn here)."""
    k = _check_step(p, q, draft)
    u = torch.rand(k, generator=generator, dtype=torch.float64)  # (k,)
    n, dist = verify_draft(p, q, draft, u)
    nxt = torch.multinomial(dist.float() if dist.dtype == torch.float16 else dist, 1, generator=generator)  # (1,)
    return torch.cat([draft[:n].long(), nxt])  # (n + 1,)


def acceptance_probability(p: Tensor, q: Tensor) -> Tensor:
    """The probability that a token drawn from q is accepted: sum over the vocabulary of min(p, q) (last dim)."""
    require_tensor(p, "p", floating=True)
    require_tensor(q, "q", floating=True)
    if p.shape != q.shape:
        raise ValueError(f"p and q must have the same shape, got {tuple(p.shape)} and {tuple(q.shape)}")
    return torch.minimum(p, q).sum(-1)


def expected_tokens(alpha: float, k: int) -> float:
    """Expected tokens per target call when each draft is accepted with probability alpha: 1 + a + ... + a^k."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 <= alpha <= 1:
        raise ValueError(f"alpha must be a probability in [0, 1], got {alpha!r}")
    require_int(k, "k", minimum=0)
    return float(k + 1) if alpha == 1 else (1 - alpha ** (k + 1)) / (1 - alpha)


def first_token_distribution(p: Tensor, q: Tensor) -> Tensor:
    """The exact distribution (V,) of the first token one step emits, in float64, by enumeration over the drafted
    token x ~ q: accepted with probability min(1, p(x)/q(x)) (then x is emitted), else a token is drawn from the
    residual. p and q are (V,) distributions; the result equals p (the rule's point)."""
    require_tensor(p, "p", floating=True)
    require_tensor(q, "q", floating=True)
    if p.dim() != 1 or p.shape != q.shape:
        raise ValueError(f"p and q must both be (vocab,), got {tuple(p.shape)} and {tuple(q.shape)}")
    p, q = p.double(), q.double()
    out = torch.zeros_like(p)
    for x in torch.nonzero(q > 0).flatten().tolist():  # a token of q = 0 is never drafted
        accept = min(1.0, float(p[x] / q[x]))  # P(u < p(x)/q(x)) for u uniform in [0, 1)
        out[x] += q[x] * accept
        if accept < 1:  # u = accept is the smallest draw that rejects x: what the rule then draws from
            u = torch.tensor([accept], dtype=p.dtype)
            n, dist = verify_draft(torch.stack([p, p]), q[None], torch.tensor([x]), u)
            assert n == 0
            out += q[x] * (1 - accept) * dist
    return out


def truncated_draft(target, n_layers: int):
    """A draft GPT made of the target's first `n_layers` blocks, its embeddings, final norm and head (copies)."""
    if not isinstance(target, GPT):
        raise TypeError(f"target must be an attnbook GPT, got {type(target).__name__}")
    require_int(n_layers, "n_layers", minimum=1)
    if n_layers > target.config.n_layers:
        raise ValueError(f"n_layers={n_layers} is more than the target's {target.config.n_layers}")
    draft = copy.deepcopy(target)
    draft.blocks = draft.blocks[:n_layers]
    draft.config = dataclasses.replace(target.config, n_layers=n_layers)
    return draft


def _probs(logits: Tensor, temperature: float) -> Tensor:
    """Logits (n, V) -> float64 distributions (n, V) on the CPU: one-hot at the argmax when temperature is 0."""
    logits = logits.cpu()  # small; the draws (and a CPU generator) run here whatever the models' device
    if temperature == 0:
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.size(-1)).double()  # (n, V)
    return torch.softmax(logits.double() / temperature, dim=-1)  # (n, V)


def _feed(model, ids: Tensor, cache: list) -> Tensor:
    """Run the tokens of ids (1, L) that the cache lacks through model; return their logits (n, V)."""
    return model(ids[:, cache[0].seq_len:], cache=cache)[0]  # (n_new, V)


def _truncate(cache: list, length: int) -> None:
    for kv in cache:
        kv.k, kv.v = kv.k[:, :, :length], kv.v[:, :, :length]


@torch.no_grad()
def speculative_generate(target, draft, ids: Tensor, new_tokens: int, k: int,
                         generator: torch.Generator | None = None, temperature: float = 0.0):
    """Prompt ids (1, n) -> (ids (1, n + new_tokens), stats): `k` tokens drafted per target call.

    Both models are attnbook GPTs with the same vocabulary, each with its own KV cache, cut back after a rejection.
    temperature 0 is greedy (exactly the target's greedy tokens); otherwise tokens are sampled from
    softmax(logits / temperature) with `generator`, and follow the target's distribution exactly. stats: target
    calls, draft calls, tokens drafted and accepted, and the acceptance rate (accepted / drafted)."""
    for name, m in (("target", target), ("draft", draft)):
        if not isinstance(m, GPT):
            raise TypeError(f"{name} must be an attnbook GPT, got {type(m).__name__}")
    if draft.config.vocab_size != target.config.vocab_size:
        raise ValueError(f"draft and target must share a vocabulary, got {draft.config.vocab_size} and "
                         f"{target.config.vocab_size} tokens")
    target._check_ids(ids)
    if ids.size(0) != 1:
        raise ValueError(f"ids must hold one sequence, shape (1, n), got {tuple(ids.shape)}")
    require_int(new_tokens, "new_tokens", minimum=1)
    require_int(k, "k", minimum=1)
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not temperature >= 0:
        raise ValueError(f"temperature must be a float >= 0 (0 = greedy), got {temperature!r}")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    limit = min(target.config.block_size, draft.config.block_size)
    if ids.size(1) + new_tokens > limit:
        raise ValueError(f"prompt length {ids.size(1)} + new_tokens={new_tokens} is more than block_size={limit}")
    t_cache, d_cache = target.new_cache(), draft.new_cache()
    out, stats = ids, {"target_calls": 0, "draft_calls": 0, "drafted": 0, "accepted": 0}
    while out.size(1) - ids.size(1) < new_tokens:
        kk = min(k, new_tokens - (out.size(1) - ids.size(1)) - 1)  # never draft past the last token wanted
        seq, qs = out, []
        for _ in range(kk):
            q = _probs(_feed(draft, seq, d_cache)[-1:], temperature)  # (1, V)
            x = torch.multinomial(q, 1, generator=generator)  # (1, 1)
            seq, qs = torch.cat([seq, x.to(seq.device)], dim=1), qs + [q]  # (1, L + i + 1)
        p = _probs(_feed(target, seq, t_cache)[-(kk + 1):], temperature)  # (kk + 1, V)
        q = torch.cat(qs) if qs else p[:0]  # (kk, V)
        step = speculative_step(p, q, seq[0, out.size(1):].cpu(), generator)  # (n + 1,)
        stats["target_calls"] += 1
        stats["draft_calls"] += kk
        stats["drafted"] += kk
        stats["accepted"] += step.numel() - 1
        out = torch.cat([out, step[None].to(out.device)], dim=1)  # (1, L + n + 1)
        _truncate(t_cache, out.size(1) - 1)  # keep every token but the newest, which no model has seen
        _truncate(d_cache, min(d_cache[0].seq_len, out.size(1) - 1))
    stats["acceptance_rate"] = stats["accepted"] / stats["drafted"] if stats["drafted"] else float("nan")
    return out, stats
