"""Tests of attnbook.models.moe: SparseMoE against transformers' MixtralSparseMoeBlock with the same weights and
against a dense computation written here (every expert on every token, weighted by the routing, which is also
computed here); load_balancing_loss against transformers' load_balancing_loss_func, a float64 loop over tokens,
and hand cases (perfectly uniform routing, collapsed routing).
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

transformers = pytest.importorskip("transformers")

from hf_float64 import randomize_, widen_  # noqa: E402
from transformers.models.mixtral.modeling_mixtral import (  # noqa: E402
    MixtralSparseMoeBlock, load_balancing_loss_func,
)

from attnbook.models.moe import SparseMoE, SwiGLUExperts, load_balancing_loss, route  # noqa: E402

D, D_FF, E = 16, 24, 6


def mixtral_config(n_experts=E, top_k=2):
    return transformers.MixtralConfig(hidden_size=D, intermediate_size=D_FF, num_local_experts=n_experts,
                                      num_experts_per_tok=top_k, experts_implementation="eager")


def pair(n_experts=E, top_k=2, seed=0, widen=True):
    """transformers' MixtralSparseMoeBlock (random weights, float64) and our SparseMoE with the same weights,
    copied here by hand: gate.weight is the router, experts.gate_up_proj is [gate; up] along its rows."""
    torch.manual_seed(seed)
    hf = randomize_(MixtralSparseMoeBlock(mixtral_config(n_experts, top_k)).double().eval(), seed + 1)
    ours = SparseMoE(D, D_FF, n_experts, top_k).double().eval()
    with torch.no_grad():
        ours.router.weight.copy_(hf.gate.weight)
        ours.experts.gate_proj.copy_(hf.experts.gate_up_proj[:, :D_FF])
        ours.experts.up_proj.copy_(hf.experts.gate_up_proj[:, D_FF:])
        ours.experts.down_proj.copy_(hf.experts.down_proj)
    return (widen_(hf) if widen else hf), ours


def dense(moe: SparseMoE, x):
    """Every expert on every token, then the sum over experts weighted by the routing (zero where not chosen);
    the routing written out here: softmax, top-k, renormalise."""
    h = x.reshape(-1, D)  # (N, D)
    probs = torch.softmax(h @ moe.router.weight.T, dim=-1)  # (N, E)
    top, chosen = probs.topk(moe.top_k, dim=-1)  # (N, k)
    weights = torch.zeros_like(probs).scatter(1, chosen, top / top.sum(-1, keepdim=True))  # (N, E), k nonzero
    ex = moe.experts
    gate = torch.einsum("nd,efd->enf", h, ex.gate_proj)  # (E, N, D_FF)
    up = torch.einsum("nd,efd->enf", h, ex.up_proj)
    outs = torch.einsum("enf,edf->end", gate * torch.sigmoid(gate) * up, ex.down_proj)  # (E, N, D)
    return torch.einsum("ne,end->nd", weights, outs).reshape(x.shape)


@pytest.mark.parametrize("n_experts, top_k", [(E, 2), (E, 1), (4, 4)])
def test_matches_mixtral_sparse_moe_block(n_experts, top_k):
    hf, ours = pair(n_experts, top_k)
    x = torch.randn(3, 7, D, dtype=torch.float64)
    with torch.no_grad():
        expected = hf(x)
        assert expected.abs().max() > 0.1
        torch.testing.assert_close(ours(x), expected, atol=1e-12, rtol=0)
        torch.testing.assert_close(ours(x), dense(ours, x), atol=1e-12, rtol=0)
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in hf.parameters())


def test_unwidened_mixtral_differs_only_by_its_float32_router():
    hf, ours = pair(widen=False)
    x = torch.randn(3, 7, D, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), hf(x), atol=1e-5, rtol=0)


def test_routing_by_hand_and_the_sparse_sum():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0], [0.0, 0.0, 3.0, 3.0]], dtype=torch.float64)
    r = route(logits, top_k=2)
    assert r.experts.tolist() == [[0, 1], [2, 3]]  # the tie at 3.0 goes to the lower index first
    e = torch.exp(torch.tensor(1.0, dtype=torch.float64))
    torch.testing.assert_close(r.weights[0], torch.stack([e / (e + 1), 1 / (e + 1)]), atol=1e-15, rtol=0)
    torch.testing.assert_close(r.weights[1], torch.full((2,), 0.5, dtype=torch.float64), atol=1e-15, rtol=0)
    torch.testing.assert_close(r.probs.sum(-1), torch.ones(2, dtype=torch.float64), atol=1e-15, rtol=0)
    moe = randomize_(SparseMoE(D, D_FF, 4, top_k=2).double(), seed=3)
    x = torch.randn(5, D, dtype=torch.float64)
    out, logits = moe(x, return_router_logits=True)
    r = route(logits, 2)
    expected = torch.stack([sum(r.weights[n, j] * moe.experts(x[n], int(r.experts[n, j])) for j in range(2))
                            for n in range(5)])
    torch.testing.assert_close(out, expected, atol=1e-13, rtol=0)


def test_gradients_reach_only_the_chosen_experts_and_the_router_through_top_2_or_the_balancing_loss():
    moe = randomize_(SparseMoE(D, D_FF, E, top_k=1).double(), seed=4)
    x = torch.randn(1, D, dtype=torch.float64)
    moe(x).sum().backward()
    chosen = route(moe.router(x), 1).experts.item()
    grads = moe.experts.gate_proj.grad.flatten(1).abs().sum(-1)  # (E,)
    assert grads[chosen] > 0 and torch.all(grads[torch.arange(E) != chosen] == 0)
    # top-1 renormalised: the weight is p / p = 1, so the output gives the router no gradient at all
    assert torch.all(moe.router.weight.grad == 0)
    moe.zero_grad()
    load_balancing_loss(moe(x, return_router_logits=True)[1], top_k=1).backward()
    assert moe.router.weight.grad.abs().max() > 1e-3  # only the balancing loss trains it (through P)
    moe2 = randomize_(SparseMoE(D, D_FF, E, top_k=2).double(), seed=4)
    moe2(x).sum().backward()
    assert moe2.router.weight.grad.abs().max() > 1e-6  # top-2: the two weights' ratio depends on the logits


# ----------------------------------------------------------------------------------------------------------
# load_balancing_loss
# ----------------------------------------------------------------------------------------------------------


def loss_by_loop(logits, top_k, mask=None):
    """n * sum_i f_i P_i over the kept tokens, one token at a time, in float64."""
    n = logits.size(-1)
    if mask is None:
        keep = [True] * len(logits)
    else:  # the same (B, T) mask for every layer
        keep = [bool(m) for m in mask.reshape(-1).repeat(len(logits) // mask.numel())]
    f, p, count = [0.0] * n, [0.0] * n, 0
    for row, k in zip(logits, keep):
        if not k:
            continue
        probs = torch.softmax(row, -1)
        count += 1
        for i in probs.topk(top_k).indices.tolist():
            f[i] += 1
        for i in range(n):
            p[i] += probs[i].item()
    return n * sum(f[i] / count * p[i] / count for i in range(n))


@pytest.mark.parametrize("top_k", [1, 2, 3])
def test_load_balancing_loss_matches_transformers_and_a_loop(top_k):
    layers = [torch.randn(12, E, dtype=torch.float64, generator=torch.Generator().manual_seed(i)) for i in range(3)]
    ours = load_balancing_loss(layers, top_k=top_k)
    theirs = load_balancing_loss_func(tuple(layers), num_experts=E, top_k=top_k)  # float32 sums inside
    assert ours.dtype == torch.float64
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-6)
    assert ours.item() == pytest.approx(loss_by_loop(torch.cat(layers), top_k), rel=1e-13)
    one = load_balancing_loss(layers[0], top_k=top_k)
    assert one.item() == pytest.approx(load_balancing_loss_func((layers[0],), E, top_k).item(), rel=1e-6)


def test_load_balancing_loss_with_padding_matches_transformers():
    layers = [torch.randn(2 * 5, E, dtype=torch.float64, generator=torch.Generator().manual_seed(9 + i))
              for i in range(2)]
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])  # (B, T): the second sequence is padded
    ours = load_balancing_loss(layers, top_k=2, attention_mask=mask)
    theirs = load_balancing_loss_func(tuple(layers), num_experts=E, top_k=2, attention_mask=mask)
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-6)
    assert ours.item() == pytest.approx(loss_by_loop(torch.cat(layers), 2, mask), rel=1e-13)
    assert ours.item() != pytest.approx(load_balancing_loss(layers, top_k=2).item(), rel=1e-3)  # the mask matters


def test_load_balancing_loss_hand_cases():
    n = 4
    # token t prefers expert t by a margin: every expert gets one token of four (f_i = 1/4), and by symmetry every
    # expert's mean probability is 1/4: n * sum_i (1/4)(1/4) = 1, perfectly balanced top-1 (Switch) routing
    uniform = 3.0 * torch.eye(n, dtype=torch.float64)
    assert load_balancing_loss(uniform, top_k=1).item() == pytest.approx(1.0, abs=1e-15)
    # top-2 with token t on experts t and t+1: f_i = 2/4, P_i = 1/4 -> top_k = 2, Mixtral's balanced value
    pairs = 3.0 * (torch.eye(n) + torch.eye(n).roll(1, dims=1)).double()
    assert load_balancing_loss(pairs, top_k=2).item() == pytest.approx(2.0, abs=1e-15)
    # all tokens on expert 0 with probability ~1: f_0 = 1, P_0 ~ 1 -> n, the worst
    collapsed = torch.tensor([[50.0, 0.0, 0.0, 0.0]] * 8, dtype=torch.float64)
    assert load_balancing_loss(collapsed, top_k=1).item() == pytest.approx(n, rel=1e-15)
    # equal logits: P uniform, but the top-1 ties all go to expert 0 (f_0 = 1): n * 1 * 1/4 = 1 as well. The value
    # alone does not tell balanced from collapsed routing when P is uniform; the loss acts through P's gradient
    assert load_balancing_loss(torch.zeros(8, n, dtype=torch.float64), top_k=1).item() == pytest.approx(1.0)


# ----------------------------------------------------------------------------------------------------------
# Validation
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("call, exc, match", [
    (lambda: SparseMoE(D, D_FF, 4, top_k=5), ValueError, "top_k=5 must be <= n_experts=4"),
    (lambda: SparseMoE(D, D_FF, 0), ValueError, "n_experts"),
    (lambda: SparseMoE(D, D_FF, 4, top_k=1.5), TypeError, "top_k"),
    (lambda: SparseMoE(D, D_FF, 4)(torch.ones(2, D + 1)), ValueError, "d_model=16"),
    (lambda: SparseMoE(D, D_FF, 4)(torch.ones(2, D, dtype=torch.long)), TypeError, "floating-point"),
    (lambda: SwiGLUExperts(4, D, D_FF)(torch.ones(D), 4), ValueError, "expert must be < n_experts=4"),
    (lambda: route(torch.ones(3, 4, 2), 1), ValueError, "router_logits must have shape"),
    (lambda: load_balancing_loss([]), TypeError, "router_logits"),
    (lambda: load_balancing_loss([torch.ones(3, 4), torch.ones(2, 4)]), ValueError, "router_logits\\[1\\]"),
    (lambda: load_balancing_loss(torch.ones(6, 4), top_k=2, attention_mask=torch.ones(2, 2)), ValueError,
     "attention_mask"),
])
def test_bad_arguments_raise_naming_the_argument(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_exported_from_attnbook_models():
    import attnbook.models as models

    assert models.SparseMoE is SparseMoE and models.load_balancing_loss is load_balancing_loss
