"""Tests of attnbook.models.rope_scaling: every scheme's inverse frequencies (and YaRN's attention factor) against
transformers' ROPE_INIT_FUNCTIONS for the same config, both as shipped (float32) and run in float64
(`hf_float64.float64_rope_functions`: their code, with torch.float read as float64); the defining properties by hand;
and Llama's logits with scaled RoPE against LlamaForCausalLM (float64, weights copied).
"""
from __future__ import annotations

import dataclasses
import math

import pytest
import torch

transformers = pytest.importorskip("transformers")

from hf_float64 import build, hf_inv_freq  # noqa: E402

from attnbook.models.llama import Llama, LlamaConfig, config_from_hf, load_hf_weights  # noqa: E402
from attnbook.models.rope_scaling import (  # noqa: E402
    apply_scaled_rope, check_rope_scaling, dynamic_ntk_inv_freq, linear_inv_freq, llama3_inv_freq, ntk_inv_freq,
    rope_frequencies, rope_inv_freq, yarn_attention_factor, yarn_inv_freq,
)
from attnbook.positional import apply_rope  # noqa: E402


def hf_config(d_head=64, heads=2, base=10000.0, max_len=4096, **rope):
    return transformers.LlamaConfig(hidden_size=d_head * heads, num_attention_heads=heads,
                                    max_position_embeddings=max_len, rope_parameters={"rope_theta": base, **rope})


def assert_matches_hf(ours, config, seq_len=None):
    """ours (inv_freq, attention factor) equals transformers' in float64 to 1e-15 relative, and as shipped to
    float32's rounding."""
    inv64, factor64 = hf_inv_freq(config, seq_len=seq_len)
    assert inv64.dtype == torch.float64  # the float64 run really ran in float64
    torch.testing.assert_close(ours[0], inv64, atol=0, rtol=1e-13)
    assert ours[1] == pytest.approx(factor64, rel=1e-15)
    inv32, factor32 = hf_inv_freq(config, seq_len=seq_len, float64=False)
    assert inv32.dtype == torch.float32
    torch.testing.assert_close(ours[0].float(), inv32, atol=0, rtol=3e-6)
    assert ours[1] == pytest.approx(factor32, rel=1e-6)


# ----------------------------------------------------------------------------------------------------------
# Each scheme against transformers
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("d_head, base, factor", [(64, 10000.0, 2.0), (8, 500.0, 4.0), (128, 500000.0, 8.0)])
def test_linear_matches_transformers(d_head, base, factor):
    config = hf_config(d_head, base=base, rope_type="linear", factor=factor)
    assert_matches_hf((linear_inv_freq(d_head, base, factor), 1.0), config)
    assert_matches_hf(rope_frequencies(d_head, base, {"rope_type": "linear", "factor": factor}), config)


@pytest.mark.parametrize("seq_len", [None, 100, 4096, 5000, 20000])
def test_dynamic_ntk_matches_transformers(seq_len):
    config = hf_config(64, max_len=4096, rope_type="dynamic", factor=2.0)
    assert_matches_hf((dynamic_ntk_inv_freq(64, 10000.0, 2.0, seq_len, 4096), 1.0), config, seq_len=seq_len)
    ours = config_from_hf(config)
    assert ours.rope_scaling == {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 4096}
    assert_matches_hf(rope_frequencies(64, 10000.0, ours.rope_scaling, seq_len=seq_len), config, seq_len=seq_len)


def test_ntk_is_dynamic_ntk_at_the_length_where_their_factors_agree():
    """transformers has no static NTK; its dynamic NTK at length L' uses factor * L'/L - (factor - 1), which is 3
    for factor 2 and L' = 2L."""
    config = hf_config(64, max_len=1000, rope_type="dynamic", factor=2.0)
    assert_matches_hf((ntk_inv_freq(64, 10000.0, 3.0), 1.0), config, seq_len=2000)


@pytest.mark.parametrize("d_head, base, factor", [(64, 10000.0, 4.0), (8, 500.0, 16.0)])
def test_ntk_keeps_the_fastest_pair_and_divides_the_slowest_by_factor(d_head, base, factor):
    theta, scaled = rope_inv_freq(d_head, base), ntk_inv_freq(d_head, base, factor)
    assert scaled[0] == theta[0] == 1.0
    assert scaled[-1].item() == pytest.approx(theta[-1].item() / factor, rel=1e-13)
    assert torch.all(scaled[1:] < theta[1:])  # every other pair slower, by less than factor
    assert torch.all(scaled[1:-1] > theta[1:-1] / factor)


YARN_CASES = {
    "defaults": dict(factor=4.0, original_max_position_embeddings=4096),
    "deepseek-mscale": dict(factor=40.0, original_max_position_embeddings=4096, mscale=1.0, mscale_all_dim=0.707,
                            beta_fast=32.0, beta_slow=1.0),
    "attention-factor-given": dict(factor=8.0, original_max_position_embeddings=2048, attention_factor=1.5),
    "betas-no-truncate": dict(factor=4.0, original_max_position_embeddings=4096, beta_fast=16.0, beta_slow=2.0,
                              truncate=False),
    "tiny-context": dict(factor=2.0, original_max_position_embeddings=16),
}


@pytest.mark.parametrize("case", YARN_CASES)
def test_yarn_matches_transformers(case):
    rope = YARN_CASES[case]
    config = hf_config(64, max_len=int(rope["factor"] * rope["original_max_position_embeddings"]), rope_type="yarn",
                       **rope)
    assert_matches_hf(rope_frequencies(64, 10000.0, {"rope_type": "yarn", **rope}), config)
    assert config_from_hf(config).rope_scaling == {"rope_type": "yarn", **rope}


def test_yarn_by_its_definition():
    """Pairs turning >= 32 times over L keep theta, pairs turning <= once get theta / factor (d = 64, L = 4096)."""
    d, base, L, factor = 64, 10000.0, 4096, 4.0
    theta, scaled = rope_inv_freq(d, base), yarn_inv_freq(d, base, factor, L)
    turns = L * theta / (2 * math.pi)
    fast, slow = turns >= 32, turns <= 1
    assert fast.sum() >= 5 and slow.sum() >= 5 and (~fast & ~slow).sum() >= 5
    torch.testing.assert_close(scaled[fast], theta[fast], atol=0, rtol=1e-15)
    torch.testing.assert_close(scaled[slow], theta[slow] / factor, atol=0, rtol=1e-15)
    middle = scaled[~fast & ~slow] / theta[~fast & ~slow]
    assert torch.all(middle[1:] <= middle[:-1])  # from 1 down to 1 / factor, monotone
    assert yarn_attention_factor(factor) == pytest.approx(0.1 * math.log(4.0) + 1)
    assert yarn_attention_factor(1.0) == 1.0


@pytest.mark.parametrize("d_head, base, factor, low, high, L", [
    (128, 500000.0, 8.0, 1.0, 4.0, 8192),  # Llama 3.1's released configuration
    (64, 10000.0, 4.0, 2.0, 8.0, 512),
    (8, 500.0, 8.0, 1.0, 4.0, 8),
])
def test_llama3_matches_transformers(d_head, base, factor, low, high, L):
    rope = dict(factor=factor, low_freq_factor=low, high_freq_factor=high, original_max_position_embeddings=L)
    config = hf_config(d_head, base=base, max_len=int(factor) * L, rope_type="llama3", **rope)
    ours = llama3_inv_freq(d_head, base, factor, L, low_freq_factor=low, high_freq_factor=high)
    assert_matches_hf((ours, 1.0), config)
    assert config_from_hf(config).rope_scaling == {"rope_type": "llama3", **rope}
    assert_matches_hf(rope_frequencies(d_head, base, {"rope_type": "llama3", **rope}), config)


def test_llama3_by_its_definition():
    theta = rope_inv_freq(128, 500000.0)
    scaled = llama3_inv_freq(128, 500000.0, 8.0, 8192)
    wavelength = 2 * math.pi / theta
    short, long = wavelength < 8192 / 4, wavelength > 8192 / 1
    assert short.sum() > 0 and long.sum() > 0 and (~short & ~long).sum() > 0
    torch.testing.assert_close(scaled[short], theta[short], atol=0, rtol=0)
    torch.testing.assert_close(scaled[long], theta[long] / 8, atol=0, rtol=1e-15)


def test_apply_scaled_rope_with_plain_frequencies_is_apply_rope():
    x = torch.randn(2, 3, 7, 16, dtype=torch.float64)
    torch.testing.assert_close(apply_scaled_rope(x, rope_inv_freq(16, 500.0)), apply_rope(x, base=500.0),
                               atol=1e-15, rtol=0)
    pos = torch.tensor([3, 1, 4, 1, 5, 9, 2])
    linear = apply_scaled_rope(x, linear_inv_freq(16, 500.0, 2.0), positions=pos)
    torch.testing.assert_close(linear, apply_rope(x, pos / 2, base=500.0), atol=1e-15, rtol=0)  # positions / 2
    torch.testing.assert_close(apply_scaled_rope(x, rope_inv_freq(16), 1.5), 1.5 * apply_rope(x), atol=1e-14, rtol=0)


# ----------------------------------------------------------------------------------------------------------
# Llama with scaled RoPE against LlamaForCausalLM
# ----------------------------------------------------------------------------------------------------------

VOCAB, D, HEADS = 97, 32, 4


def llama_hf(max_len, **rope):
    return transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=D, intermediate_size=48, num_hidden_layers=2, num_attention_heads=HEADS,
        num_key_value_heads=2, max_position_embeddings=max_len, rms_norm_eps=1e-5, tie_word_embeddings=False,
        rope_parameters={"rope_theta": 500.0, **rope})


@pytest.mark.parametrize("rope, T", [
    (dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
          original_max_position_embeddings=4), 24),
    (dict(rope_type="yarn", factor=8.0, original_max_position_embeddings=4), 24),
    (dict(rope_type="linear", factor=3.0), 24),
    (dict(rope_type="dynamic", factor=2.0), 24),  # HF's max_position_embeddings 8 < 24: the base grows
], ids=lambda v: v["rope_type"] if isinstance(v, dict) else str(v))
def test_scaled_rope_logits_match_llama(rope, T):
    hf = build(llama_hf(8 if rope["rope_type"] == "dynamic" else 32, **rope))
    config = config_from_hf(hf.config)
    assert config.rope_scaling["rope_type"] == rope["rope_type"]
    ours = load_hf_weights(Llama(dataclasses.replace(config, max_len=32)).double().eval(), hf)
    x = torch.randint(0, VOCAB, (2, T), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        expected = hf(input_ids=x).logits
        assert expected.abs().max() > 1
        torch.testing.assert_close(ours(x), expected, atol=1e-10, rtol=0)
        plain = load_hf_weights(Llama(dataclasses.replace(config, max_len=32, rope_scaling=None)).double(), hf)
        assert (plain(x) - expected).abs().max() > 1e-3  # the scaling is in effect on both sides


def test_unwidened_llama_with_yarn_differs_only_by_float32():
    hf = build(llama_hf(32, rope_type="yarn", factor=8.0, original_max_position_embeddings=4), widen=False)
    ours = load_hf_weights(Llama(config_from_hf(hf.config)).double().eval(), hf)
    x = torch.randint(0, VOCAB, (2, 24), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        torch.testing.assert_close(ours(x), hf(input_ids=x).logits, atol=1e-4, rtol=0)


# ----------------------------------------------------------------------------------------------------------
# Validation
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("call, exc, match", [
    (lambda: rope_inv_freq(7), ValueError, "d_head=7 must be even"),
    (lambda: rope_inv_freq(8, base=0.0), ValueError, "base"),
    (lambda: linear_inv_freq(8, 500.0, 0.5), ValueError, "factor must be a finite float >= 1"),
    (lambda: linear_inv_freq(8, 500.0, "2"), TypeError, "factor must be a float"),
    (lambda: ntk_inv_freq(2, 500.0, 2.0), ValueError, "d_head must be > 2"),
    (lambda: dynamic_ntk_inv_freq(8, 500.0, 2.0, 0, 16), ValueError, "seq_len"),
    (lambda: yarn_inv_freq(8, 500.0, 2.0, 16, truncate=1), TypeError, "truncate must be a bool"),
    (lambda: yarn_inv_freq(8, 500.0, 2.0, 0), ValueError, "original_max_position_embeddings"),
    (lambda: llama3_inv_freq(8, 500.0, 8.0, 16, low_freq_factor=4.0, high_freq_factor=1.0), ValueError,
     "low_freq_factor=4.0 must be < high_freq_factor=1.0"),
    (lambda: check_rope_scaling(["linear", 2.0]), TypeError, "rope_scaling must be a dict"),
    (lambda: check_rope_scaling({"rope_type": "longrope"}), ValueError, "rope_type"),
    (lambda: check_rope_scaling({"rope_type": "yarn", "factor": 2.0}), ValueError,
     "needs \\['original_max_position_embeddings'\\]"),
    (lambda: check_rope_scaling({"rope_type": "linear", "factor": 2.0, "beta_fast": 3.0}), ValueError,
     "unknown keys \\['beta_fast'\\]"),
    (lambda: check_rope_scaling({"rope_type": "linear", "factor": -1.0}), ValueError, "factor"),
    (lambda: apply_scaled_rope(torch.ones(1, 4, 8), torch.ones(3)), ValueError, "inv_freq must have shape"),
    (lambda: apply_scaled_rope(torch.ones(1, 4, 8), torch.ones(4), positions=torch.arange(5)), ValueError,
     "positions"),
    (lambda: LlamaConfig(97, 32, 1, 4, 4, 48, 16, rope_scaling={"rope_type": "ntk"}), ValueError, "needs"),
])
def test_bad_arguments_raise_naming_the_argument(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_config_from_hf_refuses_rope_types_it_does_not_model():
    config = transformers.LlamaConfig(hidden_size=32, num_attention_heads=4, max_position_embeddings=16,
                                      rope_parameters={"rope_theta": 500.0, "rope_type": "longrope",
                                                       "short_factor": [1.0] * 4, "long_factor": [2.0] * 4,
                                                       "original_max_position_embeddings": 8})
    with pytest.raises(ValueError, match="rope_type='longrope' is not supported"):
        config_from_hf(config)


def test_exported_from_attnbook_models():
    import attnbook.models as models

    assert models.rope_frequencies is rope_frequencies and models.apply_scaled_rope is apply_scaled_rope
