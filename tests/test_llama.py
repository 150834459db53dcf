"""Tests of attnbook.models.llama: logits against Hugging Face's LlamaForCausalLM built from a config (no download),
multi-head and grouped-query, tied and untied; RMSNorm, SwiGLU and attention against hand formulas and PyTorch;
block_costs against parameter counts of real modules, FLOPs measured by torch's FlopCounterMode and the bytes held
by the package's KVCache.

Hugging Face's Llama computes RMSNorm and the RoPE angles in float32 even in a float64 model. `widen_` replaces
those two islands of a Hugging Face model by the same formulas in float64, so that the rest of it (weight layout,
attention, GQA, SwiGLU, residuals, head) is compared with ours at 1e-10; `test_unwidened_hf_...` shows that the
islands alone account for the remaining few 1e-7.
"""
from __future__ import annotations

import types

import pytest
import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

transformers = pytest.importorskip("transformers")

from attnbook.layers import EncoderBlock  # noqa: E402
from attnbook.models import GPT, GPTConfig, Encoder, TransformerConfig, encoder_param_count  # noqa: E402
from attnbook.models.llama import (  # noqa: E402
    Llama, LlamaAttention, LlamaConfig, RMSNorm, SwiGLU, block_costs, config_from_hf, load_hf_weights,
)
from attnbook.positional import apply_rope  # noqa: E402

TOL = dict(atol=1e-10, rtol=0)
VOCAB, D, HEADS, D_FF, MAX_LEN = 97, 32, 4, 48, 16


def n_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())  # parameters() yields a tied matrix once


from hf_float64 import randomize_  # noqa: E402  (random values in every parameter: default inits hide bugs)


def hf_config(n_layers=2, n_kv_heads=HEADS, tied=False, **kw):
    kw = dict(vocab_size=VOCAB, hidden_size=D, intermediate_size=D_FF, num_hidden_layers=n_layers,
              num_attention_heads=HEADS, num_key_value_heads=n_kv_heads, max_position_embeddings=MAX_LEN,
              rms_norm_eps=1e-5, rope_theta=500.0, tie_word_embeddings=tied) | kw
    return transformers.LlamaConfig(**kw)


def _rms_norm_64(self, x):
    """LlamaRMSNorm.forward without its cast to float32."""
    return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))


def _rope_64(self, x, position_ids):
    """LlamaRotaryEmbedding.forward with the angles in float64 (Hugging Face: float32)."""
    d = self.config.hidden_size // self.config.num_attention_heads
    inv_freq = 1.0 / self.config.rope_parameters["rope_theta"] ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    freqs = position_ids[..., None].double() * inv_freq  # (B, T, d/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (B, T, d)
    return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def widen_(hf):
    """Make a float64 Hugging Face Llama compute its RMSNorms and RoPE angles in float64 (see the docstring)."""
    for m in hf.modules():
        if type(m).__name__ == "LlamaRMSNorm":
            m.forward = types.MethodType(_rms_norm_64, m)
    hf.model.rotary_emb.forward = types.MethodType(_rope_64, hf.model.rotary_emb)
    return hf


def make_pair(n_layers=2, n_kv_heads=HEADS, tied=False, seed=0, dtype=torch.float64, widen=True):
    """A random Hugging Face LlamaForCausalLM in eval mode and our Llama with its weights."""
    torch.manual_seed(seed)
    hf = transformers.LlamaForCausalLM(hf_config(n_layers, n_kv_heads, tied)).to(dtype).eval()
    randomize_(hf, seed + 1)
    if widen:
        widen_(hf)
    ours = load_hf_weights(Llama(config_from_hf(hf.config)).to(dtype).eval(), hf)
    return hf, ours


def ids(batch=3, n=MAX_LEN, seed=4):
    return torch.randint(0, VOCAB, (batch, n), generator=torch.Generator().manual_seed(seed))


# ----------------------------------------------------------------------------------------------------------
# The whole model against transformers
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("n_layers, n_kv_heads", [(2, HEADS), (1, 2)], ids=["mha-2-layers", "gqa-1-layer"])
def test_logits_match_hf(n_layers, n_kv_heads, tied):
    hf, ours = make_pair(n_layers, n_kv_heads, tied)
    c = ours.config
    assert (c.n_layers, c.n_kv_heads, c.tie_embeddings, c.rope_base, c.eps) == (n_layers, n_kv_heads, tied, 500.0, 1e-5)
    assert (ours.lm_head.weight is ours.tok_emb.weight) == tied
    assert n_params(ours) == n_params(hf)
    x = ids()
    with torch.no_grad():
        logits, expected = ours(x), hf(input_ids=x).logits
    assert logits.shape == (3, MAX_LEN, VOCAB) and logits.dtype == torch.float64
    assert expected.abs().max() > 1  # not a comparison of near-zeros
    torch.testing.assert_close(logits, expected, **TOL)


def test_unwidened_hf_differs_only_by_its_float32_islands():
    hf, ours = make_pair(n_kv_heads=2, widen=False)
    x = ids()
    with torch.no_grad():
        diff = (ours(x) - hf(input_ids=x).logits).abs().max().item()
    assert 1e-10 < diff < 1e-4  # float32 rounding, nothing structural
    hf32, ours32 = make_pair(n_kv_heads=2, dtype=torch.float32, widen=False)
    with torch.no_grad():
        torch.testing.assert_close(ours32(x), hf32(input_ids=x).logits, atol=1e-4, rtol=1e-4)


def test_logits_are_causal():
    _, m = make_pair(n_layers=1, n_kv_heads=2)
    x = ids(batch=1, n=10)
    changed = x.clone()
    changed[0, 6] = (x[0, 6] + 1) % VOCAB
    with torch.no_grad():
        a, b = m(x), m(changed)
    torch.testing.assert_close(a[:, :6], b[:, :6], atol=0, rtol=0)
    assert not torch.allclose(a[:, 6:], b[:, 6:])


def test_load_hf_weights_rejects_mismatches():
    hf, _ = make_pair(n_layers=1, tied=False, widen=False)
    with pytest.raises(ValueError, match="lm_head.weight differs"):
        load_hf_weights(Llama(config_from_hf(hf_config(n_layers=1, tied=True))), hf)
    with pytest.raises(ValueError, match="shape"):
        load_hf_weights(Llama(config_from_hf(hf_config(n_layers=1, intermediate_size=40))), hf)
    with pytest.raises(ValueError, match="no 'model.layers.1"):
        load_hf_weights(Llama(config_from_hf(hf_config(n_layers=2))), hf)
    with pytest.raises(ValueError, match="no place for"):
        load_hf_weights(Llama(config_from_hf(hf_config(n_layers=1))), {**hf.state_dict(), "extra.bias": torch.ones(1)})
    with pytest.raises(TypeError, match="model must be a Llama"):
        load_hf_weights(hf, hf)
    with pytest.raises(TypeError, match="hf_model"):
        load_hf_weights(Llama(config_from_hf(hf.config)), [1, 2])
    with pytest.raises(ValueError, match="attention_bias"):
        config_from_hf(hf_config(attention_bias=True))


# ----------------------------------------------------------------------------------------------------------
# The pieces
# ----------------------------------------------------------------------------------------------------------


def test_rms_norm_by_hand_and_against_torch():
    norm = RMSNorm(2, eps=1e-6).double()
    with torch.no_grad():
        norm.weight.copy_(torch.tensor([2.0, -1.0]))
    x = torch.tensor([[3.0, 4.0], [0.0, 0.0]], dtype=torch.float64)
    rms = (12.5 + 1e-6) ** 0.5  # mean(9, 16) = 12.5
    expected = torch.tensor([[2 * 3 / rms, -4 / rms], [0.0, 0.0]], dtype=torch.float64)
    torch.testing.assert_close(norm(x), expected, atol=1e-15, rtol=0)
    if hasattr(nn, "RMSNorm"):
        ref = nn.RMSNorm(D, eps=1e-6, dtype=torch.float64)
        ours = randomize_(RMSNorm(D, eps=1e-6).double(), seed=1)
        with torch.no_grad():
            ref.weight.copy_(ours.weight)
        x = torch.randn(2, 5, D, dtype=torch.float64)
        torch.testing.assert_close(ours(x), ref(x), atol=1e-14, rtol=0)


def test_rms_norm_computes_half_precision_in_float32_and_float64_in_float64():
    norm = RMSNorm(D)
    x = torch.randn(4, D) * 100
    y = norm(x.bfloat16())
    assert y.dtype == torch.float32  # the float32 weight times the bfloat16 result, as Llama
    expected = (x.bfloat16().float() * torch.rsqrt(x.bfloat16().float().pow(2).mean(-1, keepdim=True) + 1e-6))
    torch.testing.assert_close(y, expected.bfloat16().float(), atol=0, rtol=0)
    x64 = torch.randn(4, D, dtype=torch.float64)  # a float32 detour would cost ~1e-7 here
    expected = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + 1e-6)
    torch.testing.assert_close(norm.double()(x64), expected, atol=1e-15, rtol=0)


def test_swiglu_matches_hand_formula():
    ffn = randomize_(SwiGLU(D, D_FF).double(), seed=2)
    assert n_params(ffn) == 3 * D * D_FF and all(m.bias is None for m in ffn.modules() if isinstance(m, nn.Linear))
    x = torch.randn(2, 5, D, dtype=torch.float64)
    gate, up = x @ ffn.gate_proj.weight.T, x @ ffn.up_proj.weight.T  # (2, 5, d_ff)
    expected = (gate / (1 + torch.exp(-gate)) * up) @ ffn.down_proj.weight.T  # silu(z) = z sigmoid(z)
    torch.testing.assert_close(ffn(x), expected, atol=1e-13, rtol=0)


@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
def test_attention_matches_explicit_softmax_per_head(n_kv_heads):
    attn = randomize_(LlamaAttention(D, HEADS, n_kv_heads, rope_base=100.0).double(), seed=3)
    x = torch.randn(2, 7, D, dtype=torch.float64)
    hs, n_rep = D // HEADS, HEADS // n_kv_heads
    q = apply_rope((x @ attn.q_proj.weight.T).view(2, 7, HEADS, hs).transpose(1, 2), base=100.0)
    k = apply_rope((x @ attn.k_proj.weight.T).view(2, 7, n_kv_heads, hs).transpose(1, 2), base=100.0)
    v = (x @ attn.v_proj.weight.T).view(2, 7, n_kv_heads, hs).transpose(1, 2)
    causal = torch.ones(7, 7, dtype=torch.bool).tril()
    heads = []
    for h in range(HEADS):  # query head h reads key/value head h // n_rep
        scores = q[:, h] @ k[:, h // n_rep].transpose(-1, -2) / hs**0.5  # (2, 7, 7)
        heads.append(torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1) @ v[:, h // n_rep])
    expected = torch.cat(heads, dim=-1) @ attn.out_proj.weight.T  # (2, 7, D)
    torch.testing.assert_close(attn(x), expected, atol=1e-12, rtol=0)


@pytest.mark.parametrize("build, exc, match", [
    (lambda: LlamaConfig(VOCAB, 32, 2, 4, 3, D_FF, MAX_LEN), ValueError, "n_heads=4 is not divisible by n_kv_heads=3"),
    (lambda: LlamaConfig(VOCAB, 30, 2, 4, 4, D_FF, MAX_LEN), ValueError, "d_model=30 is not divisible by n_heads=4"),
    (lambda: LlamaConfig(VOCAB, 12, 2, 4, 4, D_FF, MAX_LEN), ValueError, "must be even"),
    (lambda: LlamaConfig(0, 32, 2, 4, 4, D_FF, MAX_LEN), ValueError, "vocab_size"),
    (lambda: LlamaConfig(VOCAB, 32, 2, 4, 4, D_FF, MAX_LEN, rope_base=-1.0), ValueError, "rope_base"),
    (lambda: LlamaConfig(VOCAB, 32, 2, 4, 4, D_FF, MAX_LEN, tie_embeddings=1), TypeError, "tie_embeddings"),
    (lambda: LlamaConfig(VOCAB, 32, 2, 4.0, 4, D_FF, MAX_LEN), TypeError, "n_heads"),
    (lambda: Llama({"d_model": 32}), TypeError, "config"),
    (lambda: RMSNorm(D, eps=0.0), ValueError, "eps"),
    (lambda: RMSNorm(D)(torch.ones(2, D + 1)), ValueError, "d_model=32"),
    (lambda: SwiGLU(D, 0), ValueError, "d_ff"),
    (lambda: LlamaAttention(D, HEADS, 3), ValueError, "n_kv_heads=3"),
    (lambda: block_costs(D, HEADS, HEADS, D_FF, 2, VOCAB, 8, style="gpt"), ValueError, "style"),
    (lambda: block_costs(D, HEADS, 3, D_FF, 2, VOCAB, 8, style="llama"), ValueError, "n_kv_heads=3"),
    (lambda: block_costs(D, HEADS, HEADS, D_FF, 2, VOCAB, 0, style="llama"), ValueError, "seq_len"),
    (lambda: block_costs(12, 4, 4, D_FF, 2, VOCAB, 8, style="llama"), ValueError, "must be even"),
    (lambda: block_costs(D, HEADS, HEADS, D_FF, 2, VOCAB, 8, style="llama", tie_embeddings="no"), TypeError,
     "tie_embeddings"),
])
def test_bad_arguments_raise_naming_the_argument(build, exc, match):
    with pytest.raises(exc, match=match):
        build()


@pytest.mark.parametrize("bad, exc, match", [
    (torch.zeros(1, 4), TypeError, "integer"),
    (torch.zeros(4, dtype=torch.long), ValueError, "shape"),
    (torch.zeros(1, MAX_LEN + 1, dtype=torch.long), ValueError, "max_len=16"),
    (torch.full((1, 4), VOCAB), ValueError, "vocab_size=97"),
])
def test_forward_rejects_bad_input_ids(bad, exc, match):
    m = Llama(LlamaConfig(VOCAB, D, 1, HEADS, HEADS, D_FF, MAX_LEN))
    with pytest.raises(exc, match=match):
        m(bad)


# ----------------------------------------------------------------------------------------------------------
# block_costs
# ----------------------------------------------------------------------------------------------------------

LLAMA_2_7B = dict(d_model=4096, n_heads=32, n_kv_heads=32, d_ff=11008, n_layers=32, vocab_size=32000)
LLAMA_3_8B = dict(d_model=4096, n_heads=32, n_kv_heads=8, d_ff=14336, n_layers=32, vocab_size=128256)


@pytest.mark.parametrize("sizes, published, kv_bytes", [(LLAMA_2_7B, 6_738_415_616, 524_288),
                                                        (LLAMA_3_8B, 8_030_261_248, 131_072)])
def test_llama_costs_of_published_models(sizes, published, kv_bytes):
    costs = block_costs(**sizes, seq_len=4096, style="llama")
    assert costs.params == published  # Hugging Face's parameter counts of Llama-2-7b and Meta-Llama-3-8B
    assert costs.kv_cache_bytes_per_token == kv_bytes  # float16: 0.5 MiB and 128 KiB per token
    c = sizes
    with torch.device("meta"):  # structure only: no memory, no initialisation cost
        ours = Llama(LlamaConfig(c["vocab_size"], c["d_model"], c["n_layers"], c["n_heads"], c["n_kv_heads"],
                                 c["d_ff"], 4096))
    assert n_params(ours) == published


@pytest.mark.parametrize("n_kv_heads", [HEADS, 2, 1])
@pytest.mark.parametrize("tied", [False, True])
def test_llama_params_match_transformers_and_ours(n_kv_heads, tied):
    costs = block_costs(D, HEADS, n_kv_heads, D_FF, 3, VOCAB, MAX_LEN, style="llama", tie_embeddings=tied)
    with torch.device("meta"):
        hf = transformers.LlamaForCausalLM(hf_config(3, n_kv_heads, tied))
        ours = Llama(config_from_hf(hf.config))
    assert costs.params == n_params(hf) == n_params(ours)


@pytest.mark.parametrize("n_kv_heads", [HEADS, 2])
@pytest.mark.parametrize("tied", [True, False])
def test_2017_params_match_the_package_encoder_and_pytorch(n_kv_heads, tied):
    costs = block_costs(D, HEADS, n_kv_heads, D_FF, 3, VOCAB, MAX_LEN, style="2017", tie_embeddings=tied)
    blocks = nn.ModuleList(EncoderBlock(D, HEADS, D_FF, n_kv_heads=n_kv_heads) for _ in range(3))  # post-norm
    head = 0 if tied else VOCAB * D
    assert costs.params == VOCAB * D + n_params(blocks) + head
    if n_kv_heads == HEADS:
        encoder = Encoder(TransformerConfig(VOCAB, VOCAB, D, HEADS, D_FF, n_encoder_layers=3, norm_first=False))
        assert costs.params == n_params(encoder) + head == encoder_param_count(VOCAB, D, HEADS, D_FF, 3) + head
        one = block_costs(D, HEADS, HEADS, D_FF, 1, VOCAB, MAX_LEN, style="2017", tie_embeddings=tied)
        assert costs.params - one.params == 2 * n_params(nn.TransformerEncoderLayer(D, HEADS, D_FF))
    base = block_costs(512, 8, 8, 2048, 6, 37000, 64, style="2017")  # the paper's base model, shared vocabulary
    assert base.params - 37000 * 512 == 6 * 3_152_384
    assert block_costs(12, 4, 4, 8, 1, 5, 2, style="2017").params > 0  # odd d_head is fine without RoPE


def test_exported_from_attnbook_models():
    import attnbook.models as models
    from attnbook.models import llama

    assert models.Llama is Llama and models.block_costs is block_costs
    assert all(getattr(models, name) is getattr(llama, name) for name, sub in models._EXPORTS.items() if sub == "llama")


def _measured_flops(model, x) -> int:
    """FLOPs counted by torch; SDPA's math backend, whose two products the counter sees (the fused CPU kernel
    it does not count)."""
    with FlopCounterMode(display=False) as counter, torch.no_grad(), sdpa_kernel(SDPBackend.MATH):
        model(x)
    return counter.get_total_flops()


class _Decoder2017(nn.Module):
    """A causal stack of the package's post-norm EncoderBlocks with an embedding and a head: the '2017' style."""

    def __init__(self, n_kv_heads):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D)
        self.blocks = nn.ModuleList(EncoderBlock(D, HEADS, D_FF, n_kv_heads=n_kv_heads) for _ in range(2))
        self.head = nn.Linear(D, VOCAB, bias=False)

    def forward(self, x):
        h = self.emb(x)
        for block in self.blocks:
            h = block(h, is_causal=True)
        return self.head(h)


@pytest.mark.parametrize("n_kv_heads", [HEADS, 2])
def test_flops_per_token_match_flop_counter(n_kv_heads):
    """FlopCounterMode counts 2·m·n·k per matmul and both SDPA products over the full T x T square."""
    seq = 12
    x = ids(batch=1, n=seq)
    llama = Llama(LlamaConfig(VOCAB, D, 2, HEADS, n_kv_heads, D_FF, MAX_LEN, tie_embeddings=True))
    costs = block_costs(D, HEADS, n_kv_heads, D_FF, 2, VOCAB, seq, style="llama")
    assert _measured_flops(llama, x) == seq * costs.flops_per_token
    costs = block_costs(D, HEADS, n_kv_heads, D_FF, 2, VOCAB, seq, style="2017")
    assert _measured_flops(_Decoder2017(n_kv_heads), x) == seq * costs.flops_per_token


@pytest.mark.parametrize("n_kv_heads", [HEADS, 2, 1])
def test_kv_cache_bytes_match_the_package_cache(n_kv_heads):
    gpt = GPT(GPTConfig(vocab_size=VOCAB, block_size=MAX_LEN, d_model=D, n_layers=2, n_heads=HEADS,
                        n_kv_heads=n_kv_heads)).eval()
    prompt = ids(batch=2, n=4)
    _, cache = gpt.generate(prompt, 3, return_cache=True)  # holds 4 + 3 - 1 = 6 positions
    held = sum(kv.nbytes() for kv in cache)
    for style in ("2017", "llama"):
        costs = block_costs(D, HEADS, n_kv_heads, D_FF, 2, VOCAB, 6, style=style, bytes_per_element=4)
        assert held == 2 * 6 * costs.kv_cache_bytes_per_token  # batch 2, 6 positions, float32
