"""Tests of attnbook.layers against PyTorch's own modules (float64, eval mode) and hand-written formulas.

PyTorch's layers take masks with True = blocked, ours True = may attend: every comparison passes `~our_mask`.
"""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attnbook.layers import DecoderBlock, EncoderBlock, FeedForward, LayerNorm
from attnbook.masks import causal_mask, padding_mask
from attnbook.multihead import KVCache, MultiHeadAttention

TOL = dict(atol=1e-12, rtol=1e-10)


def randn(*shape, seed: int, dtype=torch.float64) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def close(actual, expected):
    torch.testing.assert_close(actual, expected, **TOL)


def randomize_(module: nn.Module, seed: int) -> nn.Module:
    """Give every parameter random values (torch initialises biases and norms to 0 and 1, which hides bugs)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.3)
    return module


def n_params(module):
    return sum(p.numel() for p in module.parameters())


# ----------------------------------------------------------------------------------------------------------
# LayerNorm
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape, eps", [((2, 5, 8), 1e-5), ((3, 16), 1e-6), ((7,), 1e-3), ((2, 3, 4, 6), 0.1)])
def test_layer_norm_matches_torch(shape, eps):
    d = shape[-1]
    ref = randomize_(nn.LayerNorm(d, eps=eps).double(), seed=d)
    ours = LayerNorm(d, eps=eps).double()
    ours.load_state_dict(ref.state_dict())  # same names: weight, bias
    x = randn(*shape, seed=len(shape)) * 3 + 2
    close(ours(x), ref(x))


def test_layer_norm_without_bias_matches_torch():
    ref = randomize_(nn.LayerNorm(6, bias=False).double(), seed=1)
    ours = LayerNorm(6, bias=False).double()
    ours.load_state_dict(ref.state_dict())
    assert ours.bias is None
    x = randn(4, 6, seed=2)
    close(ours(x), ref(x))


def test_layer_norm_uses_biased_variance_by_hand():
    x = torch.tensor([[1.0, 2.0, 3.0, 6.0]], dtype=torch.float64)  # mean 3, biased variance (4+1+0+9)/4 = 3.5
    expected = (x - 3.0) / math.sqrt(3.5 + 1e-5)
    close(LayerNorm(4).double()(x), expected)


def test_layer_norm_gradients_match_torch():
    ref = randomize_(nn.LayerNorm(5).double(), seed=3)
    ours = LayerNorm(5).double()
    ours.load_state_dict(ref.state_dict())
    x = randn(3, 5, seed=4).requires_grad_()
    g = randn(3, 5, seed=5)
    grads = torch.autograd.grad(ours(x), (x, ours.weight, ours.bias), g)
    ref_grads = torch.autograd.grad(ref(x), (x, ref.weight, ref.bias), g)
    for a, b in zip(grads, ref_grads):
        close(a, b)


def test_layer_norm_parameters_start_at_one_and_zero():
    ln = LayerNorm(4)
    assert torch.equal(ln.weight, torch.ones(4)) and torch.equal(ln.bias, torch.zeros(4))
    assert n_params(ln) == n_params(nn.LayerNorm(4))


# ----------------------------------------------------------------------------------------------------------
# FeedForward
# ----------------------------------------------------------------------------------------------------------


def hand_gelu(x):
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


def hand_gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


@pytest.mark.parametrize(
    "activation, act", [("relu", lambda t: t.clamp_min(0)), ("gelu", hand_gelu), ("gelu_tanh", hand_gelu_tanh)]
)
@pytest.mark.parametrize("shape", [(2, 5, 8), (1, 1, 8), (3, 8)])
def test_feed_forward_matches_hand_written_composition(activation, act, shape):
    torch.manual_seed(6)
    ff = randomize_(FeedForward(8, 20, activation=activation).double().eval(), seed=7)
    x = randn(*shape, seed=8) * 2
    W1, b1, W2, b2 = ff.fc1.weight, ff.fc1.bias, ff.fc2.weight, ff.fc2.bias
    expected = act(x @ W1.T + b1) @ W2.T + b2
    close(ff(x), expected)
    assert ff.fc1.weight.shape == (20, 8) and ff.fc2.weight.shape == (8, 20)


def test_feed_forward_dropout_in_training_only():
    ff = FeedForward(4, 64, dropout=0.5).double()
    x = randn(2, 4, seed=9)
    torch.manual_seed(0)
    a = ff(x)
    ff.eval()
    b = ff(x)
    assert not torch.allclose(a, b)
    close(b, ff.fc2(F.relu(ff.fc1(x))))


# ----------------------------------------------------------------------------------------------------------
# EncoderBlock / DecoderBlock vs nn.TransformerEncoderLayer / nn.TransformerDecoderLayer
# ----------------------------------------------------------------------------------------------------------


def torch_encoder(d, h, d_ff, activation, norm_first, seed, **kwargs):
    torch.manual_seed(seed)
    layer = nn.TransformerEncoderLayer(
        d, h, d_ff, dropout=0.1, activation=activation, norm_first=norm_first, batch_first=True, **kwargs
    )
    return randomize_(layer.double(), seed).eval()


def torch_decoder(d, h, d_ff, activation, norm_first, seed, **kwargs):
    torch.manual_seed(seed)
    layer = nn.TransformerDecoderLayer(
        d, h, d_ff, dropout=0.1, activation=activation, norm_first=norm_first, batch_first=True, **kwargs
    )
    return randomize_(layer.double(), seed).eval()


def key_padding(B, S, seed):
    lengths = torch.randint(1, S + 1, (B,), generator=torch.Generator().manual_seed(seed))
    lengths[0] = S
    return padding_mask(lengths, S)  # (B, S), True = real token


@pytest.mark.parametrize("masks", ["none", "causal", "padding", "causal+padding"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("B, n, d, h, d_ff", [(2, 5, 16, 4, 32), (1, 3, 12, 3, 20)])
def test_encoder_block_matches_torch(B, n, d, h, d_ff, norm_first, activation, masks):
    ref = torch_encoder(d, h, d_ff, activation, norm_first, seed=B + n + d)
    ours = EncoderBlock.from_torch(ref)
    assert not ours.training and ours.norm_first == norm_first and ours.ffn.activation == activation
    x = randn(B, n, d, seed=10)
    pad = key_padding(B, n, seed=11)
    pad[:, 0] = True  # with a causal mask every query still sees key 0
    our_mask, ref_kwargs = None, {}
    if "causal" in masks:
        our_mask, ref_kwargs["src_mask"] = causal_mask(n), ~causal_mask(n)
    if "padding" in masks:
        our_mask = pad[:, None, None, :] if our_mask is None else our_mask & pad[:, None, None, :]
        ref_kwargs["src_key_padding_mask"] = ~pad
    close(ours(x, mask=our_mask), ref(x, **ref_kwargs))
    if masks == "causal":
        close(ours(x, is_causal=True), ref(x, **ref_kwargs))


def test_encoder_block_matches_torch_fast_path_under_no_grad():
    """In eval mode without autograd torch runs a fused kernel for the layer; we agree with it too."""
    ref = torch_encoder(16, 4, 32, "relu", False, seed=12)
    ours = EncoderBlock.from_torch(ref)
    x = randn(2, 6, 16, seed=13)
    pad = key_padding(2, 6, seed=14)
    with torch.no_grad():
        close(ours(x, mask=pad[:, None, None, :]), ref(x, src_key_padding_mask=~pad))


@pytest.mark.parametrize("memory_padding", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("B, L, S, d, h, d_ff", [(2, 5, 7, 16, 4, 32), (1, 4, 2, 12, 3, 20), (3, 6, 6, 8, 2, 16)])
def test_decoder_block_matches_torch(B, L, S, d, h, d_ff, norm_first, activation, memory_padding):
    ref = torch_decoder(d, h, d_ff, activation, norm_first, seed=B + L + S)
    ours = DecoderBlock.from_torch(ref)
    x, memory = randn(B, L, d, seed=15), randn(B, S, d, seed=16)
    mem_pad = key_padding(B, S, seed=17) if memory_padding else None
    ref_out = ref(
        x, memory, tgt_mask=~causal_mask(L), memory_key_padding_mask=None if mem_pad is None else ~mem_pad
    )
    mem_mask = None if mem_pad is None else mem_pad[:, None, None, :]
    close(ours(x, memory, self_mask=causal_mask(L), memory_mask=mem_mask), ref_out)
    close(ours(x, memory, memory_mask=mem_mask, is_causal=True), ref_out)


def test_decoder_block_without_masks_and_with_a_memory_attention_mask():
    ref = torch_decoder(16, 4, 24, "gelu", True, seed=18)
    ours = DecoderBlock.from_torch(ref)
    x, memory = randn(2, 3, 16, seed=19), randn(2, 5, 16, seed=20)
    close(ours(x, memory), ref(x, memory))
    allow = torch.rand(3, 5, generator=torch.Generator().manual_seed(21)) < 0.6
    allow[:, 0] = True
    close(ours(x, memory, memory_mask=allow), ref(x, memory, memory_mask=~allow))


@pytest.mark.parametrize("which", ["encoder", "decoder"])
def test_from_torch_reads_gelu_tanh_modules_and_no_bias(which):
    act = nn.GELU(approximate="tanh")
    if which == "encoder":
        ref = torch_encoder(8, 2, 16, act, True, seed=22, bias=False)
        ours = EncoderBlock.from_torch(ref)
        x = randn(2, 4, 8, seed=23)
        close(ours(x), ref(x))
    else:
        ref = torch_decoder(8, 2, 16, act, False, seed=22, bias=False)
        ours = DecoderBlock.from_torch(ref)
        x, memory = randn(2, 4, 8, seed=23), randn(2, 3, 8, seed=24)
        close(ours(x, memory), ref(x, memory))
    assert ours.ffn.activation == "gelu_tanh"
    assert ours.norm1.bias is None and ours.ffn.fc1.bias is None and ours.self_attn.q_proj.bias is None


@pytest.mark.parametrize("norm_first", [False, True])
def test_parameter_counts_equal_torch_layers(norm_first):
    enc = EncoderBlock(64, 8, 256, norm_first=norm_first)
    dec = DecoderBlock(64, 8, 256, norm_first=norm_first)
    assert n_params(enc) == n_params(nn.TransformerEncoderLayer(64, 8, 256, batch_first=True))
    assert n_params(dec) == n_params(nn.TransformerDecoderLayer(64, 8, 256, batch_first=True))
    # by hand: attention 4(d^2 + d), FFN 2 d d_ff + d_ff + d, two LayerNorms 2 * 2d
    assert n_params(enc) == 4 * (64 * 64 + 64) + (2 * 64 * 256 + 256 + 64) + 4 * 64


def test_blocks_with_grouped_query_attention_have_fewer_parameters():
    full, grouped = EncoderBlock(64, 8, 128), EncoderBlock(64, 8, 128, n_kv_heads=2)
    assert isinstance(grouped.self_attn, MultiHeadAttention) and grouped.self_attn.n_kv_heads == 2
    assert n_params(full) - n_params(grouped) == 2 * (64 * 48 + 48)  # k and v lose 6 of 8 heads of 8 features


@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
def test_encoder_block_with_cache_equals_causal_full_pass(n_kv_heads):
    """A pre-norm block with is_causal is a GPT block; run token by token through a KV cache."""
    block = randomize_(EncoderBlock(16, 4, 32, norm_first=True, n_kv_heads=n_kv_heads).double(), seed=25).eval()
    x = randn(2, 5, 16, seed=26)
    full = block(x, is_causal=True)
    cache = KVCache()
    steps = [block(x[:, :2], is_causal=True, cache=cache)] + [block(x[:, t:t + 1], cache=cache) for t in (2, 3, 4)]
    close(torch.cat(steps, dim=1), full)


def test_decoder_block_with_cache_equals_causal_full_pass():
    block = randomize_(DecoderBlock(16, 4, 32, n_kv_heads=2).double(), seed=27).eval()
    x, memory = randn(2, 4, 16, seed=28), randn(2, 3, 16, seed=29)
    full = block(x, memory, is_causal=True)
    cache = KVCache()
    steps = [block(x[:, t:t + 1], memory, cache=cache) for t in range(4)]
    close(torch.cat(steps, dim=1), full)


def test_blocks_apply_dropout_in_training_only():
    block = EncoderBlock(16, 4, 32, dropout=0.3).double()
    x = randn(2, 5, 16, seed=30)
    torch.manual_seed(0)
    train_out = block(x)
    block.eval()
    eval_out = block(x)
    assert not torch.allclose(train_out, eval_out)
    no_dropout = EncoderBlock(16, 4, 32).double().eval()
    no_dropout.load_state_dict(block.state_dict())
    close(eval_out, no_dropout(x))


# ----------------------------------------------------------------------------------------------------------
# argument errors
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cls, kwargs, exc, match",
    [
        (LayerNorm, dict(d_model=0), ValueError, "d_model"),
        (LayerNorm, dict(d_model=4, eps=0.0), ValueError, "eps"),
        (LayerNorm, dict(d_model=4, eps="1e-5"), ValueError, "eps"),
        (LayerNorm, dict(d_model=4, bias=None), TypeError, "bias"),
        (FeedForward, dict(d_model=4, d_ff=0), ValueError, "d_ff"),
        (FeedForward, dict(d_model=4.0, d_ff=8), TypeError, "d_model"),
        (FeedForward, dict(d_model=4, d_ff=8, activation="tanh"), ValueError, "activation"),
        (FeedForward, dict(d_model=4, d_ff=8, dropout=1.0), ValueError, "dropout"),
        (EncoderBlock, dict(d_model=10, n_heads=3, d_ff=8), ValueError, "d_model=10 is not divisible by n_heads=3"),
        (EncoderBlock, dict(d_model=8, n_heads=2, d_ff=8, norm_first=1), TypeError, "norm_first"),
        (EncoderBlock, dict(d_model=8, n_heads=2, d_ff=8, activation="swish"), ValueError, "activation"),
        (EncoderBlock, dict(d_model=8, n_heads=4, d_ff=8, n_kv_heads=3), ValueError, "n_kv_heads"),
        (EncoderBlock, dict(d_model=8, n_heads=2, d_ff=8, eps=-1.0), ValueError, "eps"),
        (DecoderBlock, dict(d_model=8, n_heads=2, d_ff=-1), ValueError, "d_ff"),
        (DecoderBlock, dict(d_model=8, n_heads=2, d_ff=8, dropout=-0.5), ValueError, "dropout"),
        (DecoderBlock, dict(d_model=8, n_heads=2, d_ff=8, norm_first="yes"), TypeError, "norm_first"),
    ],
)
def test_constructor_argument_errors(cls, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        cls(**kwargs)


def test_layer_norm_rejects_the_wrong_width():
    with pytest.raises(ValueError, match="d_model=4"):
        LayerNorm(4)(torch.zeros(2, 5))


def test_encoder_block_rejects_a_bad_mask():
    with pytest.raises(ValueError, match="attn_mask"):
        EncoderBlock(8, 2, 16)(torch.zeros(2, 3, 8), mask=torch.ones(4, 4, dtype=torch.bool))


def test_from_torch_argument_errors():
    with pytest.raises(TypeError, match="layer must be an nn.TransformerEncoderLayer"):
        EncoderBlock.from_torch(nn.TransformerDecoderLayer(8, 2, 16))
    with pytest.raises(TypeError, match="layer must be an nn.TransformerDecoderLayer"):
        DecoderBlock.from_torch(nn.TransformerEncoderLayer(8, 2, 16))
    with pytest.raises(ValueError, match="activation"):
        EncoderBlock.from_torch(nn.TransformerEncoderLayer(8, 2, 16, activation=torch.tanh))
