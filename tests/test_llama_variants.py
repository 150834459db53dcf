"""Tests of the options of attnbook.models.llama after Llama 2: QK-norm against transformers' Qwen3ForCausalLM, the
sliding window against MistralForCausalLM and transformers' own mask function, the mixture-of-experts block
against MixtralForCausalLM (all built from small configs, float64, weights copied), each also against a formula
written out here; and the options' validation. RoPE scaling: tests/test_rope_scaling.py; the MoE layer alone:
tests/test_moe.py.

transformers computes its RMSNorms, RoPE angles and Mixtral's router in float32 even in a float64 model;
`hf_float64.widen_` gives those islands float64 so that the logits are compared at 1e-10 (see tests/test_llama.py).
Its "eager" attention also takes the softmax in float32: the models here use its default "sdpa" attention, and
the eager one is compared at the float32 level only.
"""
from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from torch import nn

transformers = pytest.importorskip("transformers")

from hf_float64 import build, randomize_  # noqa: E402
from transformers.masking_utils import sliding_window_causal_mask_function  # noqa: E402

from attnbook.models.llama import (  # noqa: E402
    Llama, LlamaAttention, LlamaBlock, LlamaConfig, config_from_hf, load_hf_weights, sliding_window_mask,
)
from attnbook.models.moe import SparseMoE  # noqa: E402
from attnbook.positional import apply_rope  # noqa: E402

TOL = dict(atol=1e-10, rtol=0)
VOCAB, D, HEADS, D_FF, MAX_LEN = 97, 32, 4, 48, 16


def sizes(n_layers=2, n_kv_heads=2, tied=False, **kw):
    return dict(vocab_size=VOCAB, hidden_size=D, intermediate_size=D_FF, num_hidden_layers=n_layers,
                num_attention_heads=HEADS, num_key_value_heads=n_kv_heads, max_position_embeddings=MAX_LEN,
                rms_norm_eps=1e-5, rope_theta=500.0, tie_word_embeddings=tied) | kw


def ids(batch=3, n=MAX_LEN, seed=4):
    return torch.randint(0, VOCAB, (batch, n), generator=torch.Generator().manual_seed(seed))


def n_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def ours_from(hf) -> Llama:
    return load_hf_weights(Llama(config_from_hf(hf.config)).double().eval(), hf)


def max_diff(ours, hf, x) -> float:
    with torch.no_grad():
        expected = hf(input_ids=x).logits
        assert expected.abs().max() > 1  # not a comparison of near-zeros
        return (ours(x) - expected).abs().max().item()


# ----------------------------------------------------------------------------------------------------------
# QK-norm: Qwen3
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_kv_heads, tied", [(HEADS, False), (2, True)], ids=["mha-untied", "gqa-tied"])
def test_qk_norm_logits_match_qwen3(n_kv_heads, tied):
    hf = build(transformers.Qwen3Config(**sizes(n_kv_heads=n_kv_heads, tied=tied), head_dim=D // HEADS))
    ours = ours_from(hf)
    c = ours.config
    assert (c.qk_norm, c.sliding_window, c.n_kv_heads, c.tie_embeddings) == (True, None, n_kv_heads, tied)
    assert ours.blocks[0].self_attn.q_norm.weight.shape == (D // HEADS,)  # per head, over d_head
    assert n_params(ours) == n_params(hf)
    assert max_diff(ours, hf, ids()) < 1e-10


def test_qk_norm_attention_by_hand():
    attn = randomize_(LlamaAttention(D, HEADS, 2, rope_base=100.0, qk_norm=True, eps=1e-5).double(), seed=3)
    x = torch.randn(2, 7, D, dtype=torch.float64)
    hs = D // HEADS

    def heads(w, n, norm):  # (2, n, 7, hs): projected, split, each head's vector to rms 1, scaled, rotated
        h = (x @ w.T).view(2, 7, n, hs).transpose(1, 2)
        h = h / torch.sqrt((h**2).sum(-1, keepdim=True) / hs + 1e-5) * norm.weight
        return apply_rope(h, base=100.0)

    q, k = heads(attn.q_proj.weight, HEADS, attn.q_norm), heads(attn.k_proj.weight, 2, attn.k_norm)
    v = (x @ attn.v_proj.weight.T).view(2, 7, 2, hs).transpose(1, 2)
    causal = torch.ones(7, 7, dtype=torch.bool).tril()
    out = []
    for h in range(HEADS):
        scores = q[:, h] @ k[:, h // 2].transpose(-1, -2) / math.sqrt(hs)  # (2, 7, 7)
        out.append(torch.softmax(scores.masked_fill(~causal, float("-inf")), -1) @ v[:, h // 2])
    expected = torch.cat(out, dim=-1) @ attn.out_proj.weight.T
    with torch.no_grad():
        torch.testing.assert_close(attn(x), expected, atol=1e-12, rtol=0)


def test_qk_norm_makes_scores_independent_of_the_scale_of_w_q_and_w_k():
    attn = randomize_(LlamaAttention(D, HEADS, HEADS, qk_norm=True, eps=1e-12).double(), seed=5)
    x = torch.randn(1, 6, D, dtype=torch.float64)
    with torch.no_grad():
        before = attn(x)
        attn.q_proj.weight.mul_(50.0)
        attn.k_proj.weight.mul_(0.2)
        torch.testing.assert_close(attn(x), before, atol=1e-9, rtol=0)  # only eps feels the scale
        plain = randomize_(LlamaAttention(D, HEADS, HEADS).double(), seed=5)
        scaled = plain(x)
        plain.q_proj.weight.mul_(50.0)
        assert (plain(x) - scaled).abs().max() > 1e-2  # without QK-norm the scale sharpens the softmax


# ----------------------------------------------------------------------------------------------------------
# Sliding window: Mistral
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("window", [1, 3, 9, 12])
def test_sliding_window_mask_is_transformers_mask(window):
    T = 9
    theirs = sliding_window_causal_mask_function(window)
    expected = torch.tensor([[bool(theirs(0, 0, torch.tensor(q), torch.tensor(k))) for k in range(T)]
                             for q in range(T)])
    ours = sliding_window_mask(T, window)
    assert torch.equal(ours, expected)
    assert ours.sum(-1).tolist() == [min(t + 1, window) for t in range(T)]  # the query itself counts
    assert torch.equal(sliding_window_mask(T, None), torch.ones(T, T, dtype=torch.bool).tril())


def test_sliding_window_logits_match_mistral():
    hf = build(transformers.MistralConfig(**sizes(), sliding_window=5))
    ours = ours_from(hf)
    assert ours.config.sliding_window == 5 and not ours.config.qk_norm
    x = ids()  # T = 16 > 5: the window cuts
    assert max_diff(ours, hf, x) < 1e-10
    full = load_hf_weights(Llama(dataclasses.replace(ours.config, sliding_window=None)).double().eval(), hf)
    assert max_diff(full, hf, x) > 1e-2  # the window changes the logits: it is in effect on both sides


def test_sliding_window_matches_mistral_eager_to_its_float32_softmax():
    hf = build(transformers.MistralConfig(**sizes(), sliding_window=4, attn_implementation="eager"))
    assert hf.config._attn_implementation == "eager"
    assert max_diff(ours_from(hf), hf, ids()) < 1e-6  # eager_attention_forward's softmax(dtype=torch.float32)


def test_sliding_window_attention_by_hand():
    W, T = 3, 8
    attn = randomize_(LlamaAttention(D, HEADS, HEADS, sliding_window=W).double(), seed=6)
    x = torch.randn(2, T, D, dtype=torch.float64)
    hs = D // HEADS
    q = apply_rope((x @ attn.q_proj.weight.T).view(2, T, HEADS, hs).transpose(1, 2))
    k = apply_rope((x @ attn.k_proj.weight.T).view(2, T, HEADS, hs).transpose(1, 2))
    v = (x @ attn.v_proj.weight.T).view(2, T, HEADS, hs).transpose(1, 2)
    rows = []
    for t in range(T):  # query t reads keys max(0, t - W + 1) .. t
        s = max(0, t - W + 1)
        w = torch.softmax(q[:, :, t:t + 1] @ k[:, :, s:t + 1].transpose(-1, -2) / math.sqrt(hs), -1)
        rows.append(w @ v[:, :, s:t + 1])  # (2, nh, 1, hs)
    expected = torch.cat(rows, dim=2).transpose(1, 2).reshape(2, T, D) @ attn.out_proj.weight.T
    with torch.no_grad():
        torch.testing.assert_close(attn(x), expected, atol=1e-12, rtol=0)


def test_a_window_at_least_T_is_the_full_causal_model():
    config = LlamaConfig(VOCAB, D, 2, HEADS, 2, D_FF, MAX_LEN)
    torch.manual_seed(0)
    full = randomize_(Llama(config).double().eval(), seed=7)
    x = ids(n=10)
    with torch.no_grad():
        expected = full(x)
        for window in (10, 11, 64):
            windowed = Llama(dataclasses.replace(config, sliding_window=window)).double().eval()
            windowed.load_state_dict(full.state_dict())
            torch.testing.assert_close(windowed(x), expected, atol=1e-13, rtol=0)
        windowed = Llama(dataclasses.replace(config, sliding_window=9)).double().eval()
        windowed.load_state_dict(full.state_dict())
        got = windowed(x)
    torch.testing.assert_close(got[:, :9], expected[:, :9], atol=1e-13, rtol=0)  # t < 9 sees all its keys
    assert (got[:, 9] - expected[:, 9]).abs().max() > 1e-3  # t = 9 no longer sees key 0


# ----------------------------------------------------------------------------------------------------------
# Mixture of experts in the block: Mixtral
# ----------------------------------------------------------------------------------------------------------


def test_moe_model_logits_match_mixtral():
    config = transformers.MixtralConfig(**sizes(), sliding_window=6, num_local_experts=4, num_experts_per_tok=2,
                                        experts_implementation="eager")  # the default grouped_mm has no float64
    hf = build(config)
    ours = ours_from(hf)
    c = ours.config
    assert (c.n_experts, c.experts_per_token, c.sliding_window) == (4, 2, 6)
    assert isinstance(ours.blocks[0].ffn, SparseMoE) and n_params(ours) == n_params(hf)
    assert max_diff(ours, hf, ids()) < 1e-10


# ----------------------------------------------------------------------------------------------------------
# Defaults, repr and validation
# ----------------------------------------------------------------------------------------------------------


def test_defaults_are_the_llama_2_block():
    c = LlamaConfig(vocab_size=97, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=88, max_len=64,
                    rope_base=500.0, eps=1e-05)
    assert repr(c) == ("LlamaConfig(vocab_size=97, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=88, "
                       "max_len=64, rope_base=500.0, eps=1e-05, tie_embeddings=False)")  # chapter 11's output
    block = LlamaBlock(32, 4, 2, 88)
    assert [name for name, _ in block.named_parameters()] == [
        "norm1.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
        "self_attn.out_proj.weight", "norm2.weight", "ffn.gate_proj.weight", "ffn.up_proj.weight",
        "ffn.down_proj.weight"]
    set_ = dataclasses.replace(c, qk_norm=True, sliding_window=8, n_experts=4)
    assert repr(set_).endswith("tie_embeddings=False, qk_norm=True, sliding_window=8, n_experts=4)")


@pytest.mark.parametrize("build_, exc, match", [
    (lambda: LlamaConfig(VOCAB, D, 2, HEADS, 2, D_FF, MAX_LEN, qk_norm=1), TypeError, "qk_norm must be a bool"),
    (lambda: LlamaConfig(VOCAB, D, 2, HEADS, 2, D_FF, MAX_LEN, sliding_window=0), ValueError, "sliding_window"),
    (lambda: LlamaConfig(VOCAB, D, 2, HEADS, 2, D_FF, MAX_LEN, sliding_window=4.0), TypeError, "sliding_window"),
    (lambda: LlamaConfig(VOCAB, D, 2, HEADS, 2, D_FF, MAX_LEN, n_experts=1), ValueError,
     "n_experts=1 must be >= experts_per_token=2"),
    (lambda: LlamaConfig(VOCAB, D, 2, HEADS, 2, D_FF, MAX_LEN, n_experts=4, experts_per_token=0), ValueError,
     "experts_per_token"),
    (lambda: LlamaConfig(VOCAB, D, 2, HEADS, 2, D_FF, MAX_LEN, rope_scaling={"rope_type": "su"}), ValueError,
     "rope_type"),
    (lambda: LlamaAttention(D, HEADS, 2, sliding_window=-1), ValueError, "sliding_window"),
    (lambda: LlamaBlock(D, HEADS, 2, D_FF, qk_norm="yes"), TypeError, "qk_norm"),
    (lambda: sliding_window_mask(0, 2), ValueError, "T"),
])
def test_bad_options_raise_naming_the_argument(build_, exc, match):
    with pytest.raises(exc, match=match):
        build_()


@pytest.mark.parametrize("config, match", [
    (lambda: transformers.Qwen3Config(**sizes(n_layers=2), head_dim=8, use_sliding_window=True, sliding_window=4,
                                      max_window_layers=1), "layer_types"),
    (lambda: transformers.MixtralConfig(**sizes(), router_jitter_noise=0.1), "router_jitter_noise"),
    (lambda: transformers.Qwen3Config(**sizes(), head_dim=16), "head_dim=16"),
    (lambda: transformers.GemmaConfig(**sizes(), head_dim=8), "model_type='gemma'"),
    (lambda: transformers.LlamaConfig(**sizes(), partial_rotary_factor=0.5), "partial_rotary_factor"),
])
def test_config_from_hf_refuses_what_llama_does_not_model(config, match):
    with pytest.raises(ValueError, match=match):
        config_from_hf(config())


def test_qwen3_weights_need_a_qk_norm_model():
    hf = build(transformers.Qwen3Config(**sizes(n_layers=1), head_dim=8), widen=False)
    plain = dataclasses.replace(config_from_hf(hf.config), qk_norm=False)
    with pytest.raises(ValueError, match="no place for.*q_norm"):
        load_hf_weights(Llama(plain).double(), hf)
