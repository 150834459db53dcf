"""A top-k routed mixture of SwiGLU experts (Mixtral, arXiv:2401.04088) and its load-balancing loss (Switch
Transformer, arXiv:2101.03961).

A router (a bias-free Linear, d_model -> n_experts) scores every token; softmax turns the scores into
probabilities; each token goes to its top_k experts, weighted by their probabilities renormalised to sum to 1 over
the chosen ones (Mixtral: softmax over the top-k logits, which is the same). The layer's output is
sum_k weight_k * expert_k(x): per token, top_k of the n_experts feed-forwards run, so the parameters grow with
n_experts while the FLOPs per token grow with top_k only.

Nothing in that forward pass keeps the router from sending every token to the same experts. The auxiliary
`load_balancing_loss` (Switch Transformer, eqs. 4-6) is n_experts * sum_i f_i * P_i, f_i the share of tokens sent
to expert i and P_i its mean router probability; added to the training loss (times a small coefficient, 0.01 in
Switch, 0.001 in transformers' MixtralConfig) it pulls both towards uniform.

`SparseMoE` equals transformers' `MixtralSparseMoeBlock` with the same weights (`tests/test_moe.py`), whose
router jitter noise (default 0) it does not have. Routing is computed in float32 or the input's dtype, whichever
is wider, as Mixtral computes it in float32.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._validate import require_int, require_tensor

__all__ = ["Routing", "route", "SwiGLUExperts", "SparseMoE", "load_balancing_loss"]


class Routing(NamedTuple):
    probs: Tensor  # (N, n_experts): softmax of the router logits, float32 or wider
    weights: Tensor  # (N, top_k): the chosen experts' probabilities renormalised to sum to 1
    experts: Tensor  # (N, top_k): the chosen experts, most probable first (int64)


def _top_k(top_k, n_experts: int) -> int:
    require_int(top_k, "top_k", minimum=1)
    if top_k > n_experts:
        raise ValueError(f"top_k={top_k} must be <= n_experts={n_experts}")
    return top_k


def route(router_logits: Tensor, top_k: int) -> Routing:
    """router_logits (N, n_experts) -> Routing: softmax, the top_k experts per row, their weights renormalised.

    Ties go to the lower expert index (torch.topk's order, as Mixtral's).
    """
    require_tensor(router_logits, "router_logits", min_dim=2, floating=True)
    if router_logits.dim() != 2:
        raise ValueError(f"router_logits must have shape (N, n_experts), got {tuple(router_logits.shape)}")
    top_k = _top_k(top_k, router_logits.size(-1))
    probs = torch.softmax(router_logits.to(torch.promote_types(router_logits.dtype, torch.float32)), dim=-1)
    top, experts = probs.topk(top_k, dim=-1)  # (N, top_k) each
    return Routing(probs, top / top.sum(dim=-1, keepdim=True), experts)


class SwiGLUExperts(nn.Module):
    """n_experts SwiGLU feed-forwards (`attnbook.models.llama.SwiGLU` each), their matrices stacked:
    gate_proj and up_proj (n_experts, d_ff, d_model), down_proj (n_experts, d_model, d_ff), as nn.Linear's (out, in)."""

    def __init__(self, n_experts: int, d_model: int, d_ff: int):
        super().__init__()
        for name, value in (("n_experts", n_experts), ("d_model", d_model), ("d_ff", d_ff)):
            require_int(value, name, minimum=1)
        self.n_experts = n_experts
        self.gate_proj = nn.Parameter(torch.empty(n_experts, d_ff, d_model))
        self.up_proj = nn.Parameter(torch.empty(n_experts, d_ff, d_model))
        self.down_proj = nn.Parameter(torch.empty(n_experts, d_model, d_ff))
        for p in self.parameters():  # as Llama's Linears (and Mixtral's experts): normal(0, 0.02)
            nn.init.normal_(p, mean=0.0, std=0.02)

    def forward(self, x: Tensor, expert: int) -> Tensor:
        """Expert `expert` on x (..., d_model) -> (..., d_model): down(silu(gate x) * up x)."""
        require_int(expert, "expert", minimum=0)
        if expert >= self.n_experts:
            raise ValueError(f"expert must be < n_experts={self.n_experts}, got {expert}")
        h = F.silu(F.linear(x, self.gate_proj[expert])) * F.linear(x, self.up_proj[expert])  # (..., d_ff)
        return F.linear(h, self.down_proj[expert])  # (..., d_model)

    def extra_repr(self) -> str:
        e, d_ff, d = self.gate_proj.shape
        return f"n_experts={e}, d_model={d}, d_ff={d_ff}"


class SparseMoE(nn.Module):
    """Mixtral's feed-forward: a router picks top_k of n_experts SwiGLU experts per token, output
    sum of weight * expert(x) (weights renormalised over the chosen experts). No biases."""

    def __init__(self, d_model: int, d_ff: int, n_experts: int, top_k: int = 2):
        super().__init__()
        self.experts = SwiGLUExperts(n_experts, d_model, d_ff)
        self.top_k = _top_k(top_k, n_experts)
        self.router = nn.Linear(d_model, n_experts, bias=False)

    def forward(self, x: Tensor, return_router_logits: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        """(..., d_model) -> (..., d_model); with return_router_logits, also the router logits (N, n_experts),
        N the number of tokens (x's leading dims flattened), for `load_balancing_loss`."""
        require_tensor(x, "x", min_dim=1, floating=True)
        d = self.router.in_features
        if x.size(-1) != d:
            raise ValueError(f"x must have last dimension d_model={d}, got shape {tuple(x.shape)}")
        h = x.reshape(-1, d)  # (N, d_model): every token on its own
        logits = self.router(h)  # (N, n_experts)
        r = route(logits, self.top_k)
        out = torch.zeros_like(h)  # (N, d_model)
        for e in r.experts.unique().tolist():  # only the experts some token chose
            token, slot = torch.where(r.experts == e)  # (n_e,) each: the tokens sent to e, and in which place
            y = self.experts(h[token], e) * r.weights[token, slot, None]  # (n_e, d_model)
            out.index_add_(0, token, y.to(out.dtype))
        out = out.view(x.shape)  # (..., d_model)
        return (out, logits) if return_router_logits else out

    def extra_repr(self) -> str:
        return f"top_k={self.top_k}"


def load_balancing_loss(router_logits: Tensor | Sequence[Tensor], top_k: int = 2,
                        attention_mask: Tensor | None = None) -> Tensor:
    """n_experts * sum_i f_i * P_i, the auxiliary loss of Switch Transformer (arXiv:2101.03961, eqs. 4-6) with
    top_k routing, as Mixtral's transformers code computes it (`load_balancing_loss_func`).

    router_logits: (N, n_experts), or a sequence of them (one per layer, pooled as one set of N * layers rows).
    f_i = the share of tokens whose top_k experts include i (sum_i f_i = top_k), P_i = the mean softmax
    probability of expert i. Perfectly uniform routing (f_i = top_k / n, P_i = 1 / n) gives top_k: 1 for Switch's
    top-1. attention_mask (B, T), B * T = N, 1 for a real token: padding tokens are left out of both means.
    Computed in float32 or the logits' dtype, whichever is wider.
    """
    if isinstance(router_logits, Tensor):
        router_logits = [router_logits]
    if not isinstance(router_logits, (list, tuple)) or not router_logits:
        raise TypeError(f"router_logits must be a tensor or a non-empty list/tuple of tensors, got "
                        f"{type(router_logits).__name__}")
    for i, t in enumerate(router_logits):
        require_tensor(t, f"router_logits[{i}]", floating=True)
        if t.dim() != 2 or t.shape != router_logits[0].shape:
            raise ValueError(f"router_logits[{i}] must have shape (N, n_experts), the same for every layer, got "
                             f"{tuple(t.shape)}")
    n, n_experts = router_logits[0].shape
    top_k = _top_k(top_k, n_experts)
    logits = torch.cat(list(router_logits))  # (layers * N, n_experts)
    probs = torch.softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)  # (L * N, n)
    chosen = F.one_hot(probs.topk(top_k, dim=-1).indices, n_experts).sum(dim=-2).to(probs.dtype)  # (L * N, n)
    if attention_mask is None:
        keep = torch.ones(len(probs), 1, dtype=probs.dtype, device=probs.device)  # (L * N, 1)
    else:
        require_tensor(attention_mask, "attention_mask")
        if attention_mask.numel() != n:
            raise ValueError(f"attention_mask must have B * T = N = {n} entries (router_logits' rows), got shape "
                             f"{tuple(attention_mask.shape)}")
        keep = attention_mask.reshape(-1, 1).to(probs).repeat(len(router_logits), 1)  # (L * N, 1)
    f = (chosen * keep).sum(dim=0) / keep.sum()  # (n,): share of tokens routed to each expert
    p = (probs * keep).sum(dim=0) / keep.sum()  # (n,): mean router probability of each expert
    return n_experts * (f * p).sum()
