"""Tests of attnbook.multihead against independent references.

The main reference is PyTorch's nn.MultiheadAttention (batch_first=True, float64, eval mode), whose weights
MultiHeadAttention.from_torch copies. Its boolean masks mean True = blocked, ours True = may attend, so every
comparison passes `~our_mask` to it. Grouped-query attention is checked against Hugging Face's LLaMA
`repeat_kv` and against an ordinary multi-head attention whose key/value weights are repeated by hand.
"""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attnbook.masks import causal_mask, combine_masks, padding_mask
from attnbook.multihead import KVCache, MultiHeadAttention, merge_heads, repeat_kv, split_heads

TOL = dict(atol=1e-12, rtol=1e-10)


def randn(*shape, seed: int, dtype=torch.float64) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def pair(d_model, n_heads, seed=0, bias=True, dtype=torch.float64):
    """(torch's nn.MultiheadAttention with random weights and biases, our copy of it), both in eval mode."""
    torch.manual_seed(seed)
    ref = nn.MultiheadAttention(d_model, n_heads, bias=bias, batch_first=True).to(dtype).eval()
    if bias:  # torch initialises the biases to zero; make them random so that copying them is tested
        with torch.no_grad():
            ref.in_proj_bias.normal_()
            ref.out_proj.bias.normal_()
    return ref, MultiHeadAttention.from_torch(ref)


def gqa(d_model, n_heads, n_kv_heads, seed=0, bias=True):
    """Our MultiHeadAttention in float64 with random weights and biases, eval mode."""
    torch.manual_seed(seed)
    m = MultiHeadAttention(d_model, n_heads, n_kv_heads, bias=bias).double().eval()
    if bias:
        with torch.no_grad():
            for lin in (m.q_proj, m.k_proj, m.v_proj, m.out_proj):
                lin.bias.normal_()
    return m


def close(actual, expected, **tol):
    torch.testing.assert_close(actual, expected, **(tol or TOL))


# ----------------------------------------------------------------------------------------------------------
# split_heads / merge_heads
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("B, n, d, h", [(2, 5, 12, 3), (1, 1, 8, 8), (3, 4, 6, 1), (2, 7, 16, 4)])
def test_split_heads_matches_explicit_indexing_and_round_trips(B, n, d, h):
    x = randn(B, n, d, seed=B * n + d)
    y = split_heads(x, h)
    d_head = d // h
    assert y.shape == (B, h, n, d_head)
    for i in range(h):  # head i holds features i*d_head .. (i+1)*d_head - 1 of every position
        assert torch.equal(y[:, i], x[:, :, i * d_head:(i + 1) * d_head])
    assert torch.equal(merge_heads(y), x)
    z = randn(B, h, n, d_head, seed=1)
    assert torch.equal(split_heads(merge_heads(z), h), z)


def test_split_heads_never_mixes_positions_hand_built():
    """Entry (b, t, f) = 1000 b + 100 t + f: after splitting, head i at position t holds exactly its own features."""
    B, n, d, h = 2, 3, 6, 3
    b = torch.arange(B).view(B, 1, 1)
    t = torch.arange(n).view(1, n, 1)
    f = torch.arange(d).view(1, 1, d)
    x = (1000 * b + 100 * t + f).double()
    y = split_heads(x, h)
    assert y[1, 2, 0].tolist() == [1004.0, 1005.0]  # batch 1, head 2, position 0: features 4 and 5
    assert y[0, 0, 2].tolist() == [200.0, 201.0]  # batch 0, head 0, position 2: features 0 and 1
    for bb in range(B):
        for i in range(h):
            for tt in range(n):
                expected = [1000 * bb + 100 * tt + i * 2 + j for j in range(2)]
                assert y[bb, i, tt].tolist() == expected


def test_merge_heads_of_non_contiguous_input():
    z = randn(2, 5, 3, 4, seed=2).transpose(1, 2)  # (2, 3, 5, 4), not contiguous
    assert torch.equal(merge_heads(z), torch.cat([z[:, i] for i in range(3)], dim=-1))


@pytest.mark.parametrize(
    "fn, args, exc, match",
    [
        (split_heads, (torch.zeros(2, 3, 10), 3), ValueError, "n_heads=3"),
        (split_heads, (torch.zeros(2, 3, 10), 0), ValueError, "n_heads"),
        (split_heads, (torch.zeros(2, 3, 10), 2.0), TypeError, "n_heads"),
        (split_heads, (torch.zeros(3, 10), 2), ValueError, "x"),
        (split_heads, ([[1.0]], 1), TypeError, "x"),
        (merge_heads, (torch.zeros(2, 3, 4),), ValueError, "x"),
        (merge_heads, ("x",), TypeError, "x"),
        (repeat_kv, (torch.zeros(2, 3, 4), 2), ValueError, "x"),
        (repeat_kv, (torch.zeros(1, 2, 3, 4), 0), ValueError, "n_rep"),
        (repeat_kv, (torch.zeros(1, 2, 3, 4), 1.5), TypeError, "n_rep"),
    ],
)
def test_head_helpers_argument_errors(fn, args, exc, match):
    with pytest.raises(exc, match=match):
        fn(*args)


# ----------------------------------------------------------------------------------------------------------
# repeat_kv
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_kv, n_rep", [(1, 4), (2, 3), (3, 1), (4, 2)])
def test_repeat_kv_matches_loop_and_hugging_face(n_kv, n_rep):
    from transformers.models.llama.modeling_llama import repeat_kv as hf_repeat_kv

    x = randn(2, n_kv, 5, 3, seed=n_kv * 10 + n_rep)
    y = repeat_kv(x, n_rep)
    assert y.shape == (2, n_kv * n_rep, 5, 3)
    for head in range(n_kv * n_rep):  # query head j uses key/value head j // n_rep
        assert torch.equal(y[:, head], x[:, head // n_rep])
    assert torch.equal(y, hf_repeat_kv(x, n_rep))
    assert torch.equal(y, torch.repeat_interleave(x, n_rep, dim=1))


def test_repeat_kv_with_one_repeat_returns_the_input():
    x = randn(1, 2, 3, 4, seed=3)
    assert repeat_kv(x, 1) is x


# ----------------------------------------------------------------------------------------------------------
# MultiHeadAttention vs nn.MultiheadAttention
# ----------------------------------------------------------------------------------------------------------

SHAPES = [  # (batch, q_len, k_len, d_model, n_heads)
    (2, 5, 5, 16, 4),
    (1, 7, 7, 12, 3),
    (3, 4, 4, 8, 1),
    (1, 1, 1, 16, 2),
    (2, 6, 6, 24, 6),
]
CROSS_SHAPES = [(2, 3, 7, 16, 4), (1, 6, 2, 12, 3), (3, 5, 9, 8, 2), (1, 1, 4, 16, 8)]


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("B, L, S, d, h", SHAPES)
def test_self_attention_matches_torch(B, L, S, d, h, need_weights):
    ref, ours = pair(d, h, seed=B + L + d)
    x = randn(B, L, d, seed=L * d)
    out, w = ours(x, x, x, need_weights=need_weights)
    ref_out, ref_w = ref(x, x, x, need_weights=need_weights)
    assert out.shape == (B, L, d)
    close(out, ref_out)
    if need_weights:
        close(w, ref_w)
    else:
        assert w is None


@pytest.mark.parametrize("average", [True, False])
@pytest.mark.parametrize("B, L, S, d, h", CROSS_SHAPES)
def test_cross_attention_matches_torch(B, L, S, d, h, average):
    ref, ours = pair(d, h, seed=B + L + S)
    q, kv = randn(B, L, d, seed=1), randn(B, S, d, seed=2)
    v = randn(B, S, d, seed=3)  # key and value need not be the same tensor either
    out, w = ours(q, kv, v, need_weights=True, average_attn_weights=average)
    ref_out, ref_w = ref(q, kv, v, need_weights=True, average_attn_weights=average)
    close(out, ref_out)
    close(w, ref_w)
    assert w.shape == ((B, L, S) if average else (B, h, L, S))
    out_sdpa, none = ours(q, kv, v)  # the SDPA path gives the same output
    assert none is None
    close(out_sdpa, ref_out)


def _masks(kind, B, h, L, S, seed):
    """(our allow-mask, the kwargs that say the same to nn.MultiheadAttention)."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, S + 1, (B,), generator=g)
    lengths[0] = S
    pad = padding_mask(lengths, S)  # (B, S), True = real token
    if kind == "padding":
        return pad[:, None, None, :], dict(key_padding_mask=~pad)
    if kind == "causal":
        return causal_mask(L, S), dict(attn_mask=~causal_mask(L, S))
    if kind == "causal+padding":
        pad[:, 0] = True  # left-aligned sequences: with causal, every query still sees key 0
        return combine_masks(causal_mask(L, S), pad[:, None, None, :]), dict(
            attn_mask=~causal_mask(L, S), key_padding_mask=~pad
        )
    if kind == "per_head":  # (B, h, L, S); torch wants (B*h, L, S)
        allow = torch.rand(B, h, L, S, generator=g) < 0.6
        allow[..., 0] = True
        return allow, dict(attn_mask=~allow.reshape(B * h, L, S))
    if kind == "additive":  # a float mask is added to the scores in both conventions
        bias = torch.randn(L, S, generator=g, dtype=torch.float64)
        bias[:, 1:][torch.rand(L, S - 1, generator=g) < 0.3] = -math.inf
        return bias, dict(attn_mask=bias)
    raise AssertionError(kind)


MASK_KINDS = ["padding", "causal", "causal+padding", "per_head", "additive"]


@pytest.mark.parametrize("kind", MASK_KINDS)
@pytest.mark.parametrize("B, L, S, d, h", [(2, 5, 5, 16, 4), (3, 4, 6, 12, 3), (1, 6, 3, 8, 2)])
def test_masks_match_torch_in_both_paths(B, L, S, d, h, kind):
    ref, ours = pair(d, h, seed=L + S)
    q, kv = randn(B, L, d, seed=4), randn(B, S, d, seed=5)
    mask, torch_kwargs = _masks(kind, B, h, L, S, seed=B * L * S)
    ref_out, ref_w = ref(q, kv, kv, need_weights=True, average_attn_weights=False, **torch_kwargs)
    out, _ = ours(q, kv, kv, attn_mask=mask)
    close(out, ref_out)
    out_w, w = ours(q, kv, kv, attn_mask=mask, need_weights=True, average_attn_weights=False)
    close(out_w, ref_out)
    close(w, ref_w)
    _, w_avg = ours(q, kv, kv, attn_mask=mask, need_weights=True)
    close(w_avg, ref(q, kv, kv, need_weights=True, **torch_kwargs)[1])


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("L", [1, 4, 7])
def test_is_causal_matches_torch_causal_mask(L, need_weights):
    ref, ours = pair(16, 4, seed=L)
    x = randn(2, L, 16, seed=L)
    out, w = ours(x, x, x, is_causal=True, need_weights=need_weights)
    ref_out, ref_w = ref(x, x, x, attn_mask=~causal_mask(L), need_weights=need_weights)
    close(out, ref_out)
    if need_weights:
        close(w, ref_w)
        assert torch.equal(w.triu(1), torch.zeros_like(w))


def test_float32_matches_torch():
    ref, ours = pair(32, 4, seed=9, dtype=torch.float32)
    x, mem = randn(2, 6, 32, seed=6, dtype=torch.float32), randn(2, 9, 32, seed=7, dtype=torch.float32)
    torch.testing.assert_close(ours(x, mem, mem)[0], ref(x, mem, mem)[0])
    assert ours(x, mem, mem)[0].dtype == torch.float32


def test_from_torch_without_bias():
    ref, ours = pair(12, 3, seed=10, bias=False)
    assert ours.q_proj.bias is None and ours.out_proj.bias is None
    x = randn(2, 5, 12, seed=8)
    close(ours(x, x, x)[0], ref(x, x, x)[0])


def test_from_torch_accepts_sequence_first_modules():
    torch.manual_seed(11)
    ref = nn.MultiheadAttention(16, 4, batch_first=False).double().eval()
    ours = MultiHeadAttention.from_torch(ref)
    q, kv = randn(3, 4, 16, seed=9), randn(3, 6, 16, seed=10)  # (batch, seq, d): ours is always batch first
    ref_out = ref(q.transpose(0, 1), kv.transpose(0, 1), kv.transpose(0, 1))[0].transpose(0, 1)
    close(ours(q, kv, kv)[0], ref_out)


def test_from_torch_copies_training_mode_and_dropout():
    ref = nn.MultiheadAttention(8, 2, dropout=0.25, batch_first=True)
    ours = MultiHeadAttention.from_torch(ref)
    assert ours.training and ours.dropout == 0.25
    assert not MultiHeadAttention.from_torch(ref.eval()).training


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(kdim=8), "kdim"),
        (dict(vdim=8), "vdim"),
        (dict(add_bias_kv=True), "add_bias_kv"),
        (dict(add_zero_attn=True), "add_zero_attn"),
    ],
)
def test_from_torch_refuses_what_it_cannot_copy(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(16, 4, batch_first=True, **kwargs))


def test_from_torch_refuses_other_modules():
    with pytest.raises(TypeError, match="m must be an nn.MultiheadAttention"):
        MultiHeadAttention.from_torch(nn.Linear(4, 4))


# ----------------------------------------------------------------------------------------------------------
# parameter counts and grouped-query attention
# ----------------------------------------------------------------------------------------------------------


def expected_param_count(d_model, n_heads, n_kv_heads, bias):
    """From first principles: W_q, W_o are d x d; W_k, W_v map d to n_kv_heads heads of d / n_heads features."""
    d_head = d_model // n_heads
    kv = n_kv_heads * d_head
    weights = d_model * d_model * 2 + d_model * kv * 2
    biases = (d_model * 2 + kv * 2) if bias else 0
    return weights + biases


def n_params(module):
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize(
    "d_model, n_heads, n_kv_heads", [(64, 8, 8), (64, 8, 2), (64, 8, 1), (48, 6, 3), (768, 12, 12), (768, 12, 4)]
)
def test_parameter_count(d_model, n_heads, n_kv_heads, bias):
    m = MultiHeadAttention(d_model, n_heads, n_kv_heads, bias=bias)
    assert n_params(m) == expected_param_count(d_model, n_heads, n_kv_heads, bias)
    if n_kv_heads == n_heads:  # plain multi-head attention: the same count as PyTorch's
        assert n_params(m) == n_params(nn.MultiheadAttention(d_model, n_heads, bias=bias))


def test_parameter_count_of_bert_base_attention_by_hand():
    assert n_params(MultiHeadAttention(768, 12)) == 2_362_368  # 4 * 768 * 768 weights + 4 * 768 biases


def test_default_n_kv_heads_is_n_heads():
    m = MultiHeadAttention(16, 4)
    assert m.n_kv_heads == 4 and m.k_proj.out_features == 16


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("n_kv_heads", [1, 2, 4])
def test_gqa_equals_mha_with_repeated_key_value_weights(n_kv_heads, need_weights):
    """Grouped-query attention = ordinary attention whose key/value projections repeat each kv head's rows."""
    d, h = 16, 4
    d_head, n_rep = d // h, h // n_kv_heads
    small = gqa(d, h, n_kv_heads, seed=12)
    big = MultiHeadAttention(d, h).double().eval()
    with torch.no_grad():
        big.q_proj.load_state_dict(small.q_proj.state_dict())
        big.out_proj.load_state_dict(small.out_proj.state_dict())
        for b_lin, s_lin in ((big.k_proj, small.k_proj), (big.v_proj, small.v_proj)):
            for head in range(h):  # query head `head` reads kv head head // n_rep
                src = slice((head // n_rep) * d_head, (head // n_rep + 1) * d_head)
                dst = slice(head * d_head, (head + 1) * d_head)
                b_lin.weight[dst] = s_lin.weight[src]
                b_lin.bias[dst] = s_lin.bias[src]
    q, kv = randn(2, 5, d, seed=13), randn(2, 7, d, seed=14)
    mask = padding_mask([7, 3])[:, None, None, :]
    out, w = small(q, kv, kv, attn_mask=mask, need_weights=need_weights, average_attn_weights=False)
    ref_out, ref_w = big(q, kv, kv, attn_mask=mask, need_weights=need_weights, average_attn_weights=False)
    close(out, ref_out)
    if need_weights:
        close(w, ref_w)


# ----------------------------------------------------------------------------------------------------------
# fully masked rows, dropout
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_fully_masked_row_gives_zeros_not_nan(kind, need_weights):
    B, L, S, d, h = 2, 4, 5, 16, 4
    m = gqa(d, h, h, seed=15, bias=False)
    q, kv = randn(B, L, d, seed=16), randn(B, S, d, seed=17)
    allow = torch.ones(B, 1, L, S, dtype=torch.bool)
    allow[0, :, 2] = False  # batch 0, query 2 sees nothing
    allow[1, :, :, 3:] = False  # batch 1 sees keys 0..2 only
    mask = allow if kind == "bool" else torch.zeros(B, 1, L, S, dtype=torch.float64).masked_fill(~allow, -math.inf)
    out, w = m(q, kv, kv, attn_mask=mask, need_weights=need_weights, average_attn_weights=False)
    assert not torch.isnan(out).any()
    assert torch.equal(out[0, 2], torch.zeros(d, dtype=torch.float64))  # no bias: the output row is 0
    if need_weights:
        assert torch.equal(w[0, :, 2], torch.zeros(h, S, dtype=torch.float64))
    # the other rows are those of unmasked attention restricted to the allowed keys
    ref_out, _ = m(q[1:], kv[1:, :3], kv[1:, :3])
    close(out[1:], ref_out)
    close(out[0, [0, 1, 3]], m(q[:1], kv[:1], kv[:1])[0][0, [0, 1, 3]])


def test_fully_masked_row_with_bias_gives_the_output_bias():
    """The attention output of a dead row is 0, so the module's output row is out_proj(0) = out_proj.bias."""
    m = gqa(8, 2, 2, seed=18)
    x = randn(1, 3, 8, seed=19)
    allow = torch.tensor([[True, False, False], [False, False, False], [True, True, False]])
    out, _ = m(x, x, x, attn_mask=allow)
    close(out[0, 1], m.out_proj.bias.detach())


def test_sdpa_path_zeroes_dead_rows_even_if_the_backend_returns_nan(monkeypatch):
    """Some SDPA backends (other torch versions, GPUs) return NaN for a row with no allowed key; ours must not."""
    real = F.scaled_dot_product_attention

    def nan_for_dead_rows(q, k, v, attn_mask=None, **kwargs):
        out = real(q, k, v, attn_mask=attn_mask, **kwargs)
        if attn_mask is not None:
            allowed = attn_mask if attn_mask.dtype == torch.bool else attn_mask != -math.inf
            out = out.masked_fill(~allowed.any(-1, keepdim=True), math.nan)
        return out

    monkeypatch.setattr(F, "scaled_dot_product_attention", nan_for_dead_rows)
    m = gqa(8, 2, 1, seed=20, bias=False)
    x = randn(2, 3, 8, seed=21)
    allow = torch.ones(2, 1, 3, 3, dtype=torch.bool)
    allow[1, :, 0] = False
    out, _ = m(x, x, x, attn_mask=allow)
    assert not torch.isnan(out).any()
    assert torch.equal(out[1, 0], torch.zeros(8, dtype=torch.float64))
    monkeypatch.undo()
    close(out[0], m(x[:1], x[:1], x[:1])[0][0])


def test_dropout_acts_on_the_weights_in_training_only():
    m = gqa(16, 4, 2, seed=22)
    m.dropout = 0.5
    x = randn(2, 6, 16, seed=23)
    _, w_eval = m(x, x, x, need_weights=True, average_attn_weights=False)
    eval_out = m(x, x, x)[0]
    m.train()
    torch.manual_seed(0)
    out, w = m(x, x, x, need_weights=True, average_attn_weights=False)
    kept = w != 0
    assert kept.any() and (~kept).any()
    close(w[kept], w_eval[kept] / 0.5)  # kept weights are rescaled by 1 / (1 - p)
    torch.manual_seed(0)
    sdpa_out = m(x, x, x)[0]
    assert not torch.allclose(sdpa_out, eval_out)  # the SDPA path drops out too
    m.eval()
    close(m(x, x, x)[0], eval_out)  # and eval mode is deterministic again


# ----------------------------------------------------------------------------------------------------------
# KV cache
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
def test_cache_one_token_at_a_time_equals_causal_full_pass(n_kv_heads, need_weights):
    B, T, d, h = 2, 6, 16, 4
    m = gqa(d, h, n_kv_heads, seed=24 + n_kv_heads)
    x = randn(B, T, d, seed=25)
    full, full_w = m(x, x, x, is_causal=True, need_weights=need_weights)
    cache = KVCache()
    steps = []
    for t in range(T):
        tok = x[:, t:t + 1]
        out, w = m(tok, tok, tok, cache=cache, need_weights=need_weights)  # one query sees the whole cache
        steps.append(out)
        assert cache.seq_len == t + 1
        if need_weights:
            close(w[:, 0], full_w[:, t, :t + 1])
    close(torch.cat(steps, dim=1), full)
    assert cache.k.shape == cache.v.shape == (B, n_kv_heads, T, d // h)  # the cache holds n_kv_heads heads
    assert cache.nbytes() == 2 * B * n_kv_heads * T * (d // h) * 8  # float64: 8 bytes per number


@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
def test_cache_prompt_then_tokens_then_chunk_equals_causal_full_pass(n_kv_heads):
    """Prompt with is_causal and an empty cache, single tokens, then a 3-token chunk with is_causal."""
    B, T, d, h = 2, 9, 16, 4
    m = gqa(d, h, n_kv_heads, seed=30 + n_kv_heads)
    x = randn(B, T, d, seed=31)
    full, _ = m(x, x, x, is_causal=True)
    cache = KVCache()
    outs = [m(x[:, :4], x[:, :4], x[:, :4], is_causal=True, cache=cache)[0]]  # prompt: positions 0..3
    for t in (4, 5):
        outs.append(m(x[:, t:t + 1], x[:, t:t + 1], x[:, t:t + 1], is_causal=True, cache=cache)[0])
    chunk = x[:, 6:9]
    outs.append(m(chunk, chunk, chunk, is_causal=True, cache=cache)[0])  # causal relative to the cache
    close(torch.cat(outs, dim=1), full)
    assert cache.seq_len == T


def test_cache_matches_torch_causal_pass():
    ref, ours = pair(12, 3, seed=32)
    x = randn(1, 5, 12, seed=33)
    cache = KVCache()
    outs = [ours(x[:, t:t + 1], x[:, t:t + 1], x[:, t:t + 1], cache=cache)[0] for t in range(5)]
    close(torch.cat(outs, dim=1), ref(x, x, x, attn_mask=~causal_mask(5))[0])


def test_kv_cache_update_reset_and_bytes():
    cache = KVCache()
    assert cache.seq_len == 0 and cache.k is None and cache.nbytes() == 0
    k1, v1 = randn(2, 3, 4, 5, seed=34), randn(2, 3, 4, 5, seed=35)
    k2, v2 = randn(2, 3, 1, 5, seed=36), randn(2, 3, 1, 5, seed=37)
    assert cache.update(k1, v1)[0] is k1
    k, v = cache.update(k2, v2)
    assert torch.equal(k, torch.cat([k1, k2], dim=2)) and torch.equal(v, torch.cat([v1, v2], dim=2))
    assert cache.seq_len == 5
    assert cache.nbytes() == 2 * 2 * 3 * 5 * 5 * 8
    cache.reset()
    assert cache.seq_len == 0 and cache.k is None and cache.v is None and cache.nbytes() == 0


@pytest.mark.parametrize(
    "k_new, v_new, exc, match",
    [
        (torch.zeros(2, 3, 1, 4), torch.zeros(2, 3, 1, 5), ValueError, "k_new"),  # head size changed
        (torch.zeros(2, 2, 1, 5), torch.zeros(2, 2, 1, 5), ValueError, "k_new"),  # number of heads changed
        (torch.zeros(2, 3, 1, 5), torch.zeros(2, 3, 2, 5), ValueError, "k_new and v_new"),
        (torch.zeros(2, 3, 5), torch.zeros(2, 3, 5), ValueError, "k_new"),
        (torch.zeros(2, 3, 1, 5, dtype=torch.int64), torch.zeros(2, 3, 1, 5), TypeError, "k_new"),
        (torch.zeros(2, 3, 1, 5), "v", TypeError, "v_new"),
    ],
)
def test_kv_cache_rejects_what_does_not_fit(k_new, v_new, exc, match):
    cache = KVCache()
    cache.update(torch.zeros(2, 3, 4, 5), torch.zeros(2, 3, 4, 5))
    with pytest.raises(exc, match=match):
        cache.update(k_new, v_new)


# ----------------------------------------------------------------------------------------------------------
# argument errors
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(d_model=10, n_heads=3), ValueError, "d_model=10 is not divisible by n_heads=3"),
        (dict(d_model=0, n_heads=1), ValueError, "d_model"),
        (dict(d_model=8.0, n_heads=2), TypeError, "d_model"),
        (dict(d_model=8, n_heads=0), ValueError, "n_heads"),
        (dict(d_model=8, n_heads=4, n_kv_heads=3), ValueError, "n_kv_heads=3"),
        (dict(d_model=8, n_heads=4, n_kv_heads=0), ValueError, "n_kv_heads"),
        (dict(d_model=8, n_heads=4, n_kv_heads=2.0), TypeError, "n_kv_heads"),
        (dict(d_model=8, n_heads=2, dropout=1.0), ValueError, "dropout"),
        (dict(d_model=8, n_heads=2, dropout=-0.1), ValueError, "dropout"),
        (dict(d_model=8, n_heads=2, bias=1), TypeError, "bias"),
    ],
)
def test_constructor_argument_errors(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        MultiHeadAttention(**kwargs)


X = torch.zeros(2, 3, 8)
M = torch.zeros(2, 5, 8)


@pytest.mark.parametrize(
    "args, kwargs, exc, match",
    [
        ((torch.zeros(2, 3, 6), X, X), {}, ValueError, "query"),
        ((X, torch.zeros(3, 8), X), {}, ValueError, "key"),
        ((X, X, [[0.0]]), {}, TypeError, "value"),
        ((X, X, torch.zeros(2, 3, 8, dtype=torch.int64)), {}, TypeError, "value"),
        ((X, M, X), {}, ValueError, "key and value"),
        ((X, torch.zeros(1, 5, 8), torch.zeros(1, 5, 8)), {}, ValueError, "batch size"),
        ((X, M, M), {"attn_mask": torch.ones(3, 3, dtype=torch.bool)}, ValueError, "attn_mask"),
        ((X, M, M), {"attn_mask": torch.ones(2, 3, 3, 5, dtype=torch.bool)}, ValueError, "attn_mask"),
        ((X, M, M), {"attn_mask": torch.ones(3, 5, dtype=torch.int64)}, TypeError, "attn_mask"),
        ((X, M, M), {"attn_mask": torch.zeros(3, 5, dtype=torch.float64)}, TypeError, "attn_mask"),
        ((X, M, M), {"attn_mask": [[True]]}, TypeError, "attn_mask"),
        ((X, X, X), {"attn_mask": torch.ones(3, 3, dtype=torch.bool), "is_causal": True}, ValueError, "is_causal"),
        ((X, X, X), {"is_causal": 1}, TypeError, "is_causal"),
        ((X, X, X), {"need_weights": "yes"}, TypeError, "need_weights"),
        ((X, X, X), {"average_attn_weights": None}, TypeError, "average_attn_weights"),
        ((X, X, X), {"cache": {}}, TypeError, "cache"),
    ],
)
def test_forward_argument_errors(args, kwargs, exc, match):
    m = MultiHeadAttention(8, 2)
    with pytest.raises(exc, match=match):
        m(*args, **kwargs)


def test_a_rejected_call_leaves_the_cache_unchanged():
    m, cache = MultiHeadAttention(8, 2), KVCache()
    m(X, X, X, cache=cache)
    with pytest.raises(ValueError, match="attn_mask"):
        m(X[:, :1], X[:, :1], X[:, :1], attn_mask=torch.ones(1, 3, dtype=torch.bool), cache=cache)  # needs 4 keys
    assert cache.seq_len == 3
    m(X[:, :1], X[:, :1], X[:, :1], attn_mask=torch.ones(1, 4, dtype=torch.bool), cache=cache)
    assert cache.seq_len == 4
