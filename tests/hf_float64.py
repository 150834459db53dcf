"""Helpers shared by tests/test_llama_variants.py, test_rope_scaling.py and test_moe.py: Hugging Face models made to
compute in float64 where they compute in float32 even in a float64 model, so that the rest of them can be compared
with ours at 1e-10 (as tests/test_llama.py's `widen_` does for Llama).

The float32 islands of transformers 5: every RMSNorm (`hidden_states.to(torch.float32)`), the rotary embedding's
angles (`position_ids.float()`, inverse frequencies computed in float32 by `ROPE_INIT_FUNCTIONS`), and Mixtral's
router (`softmax(router_logits.float())`). `widen_` replaces each by the same formula without the cast; the scaled
inverse frequencies come from transformers' own `ROPE_INIT_FUNCTIONS`, run with `torch.float` (and
`torch.float32`) read as float64 (`float64_rope_functions`), never from the package under test.
"""
from __future__ import annotations

import contextlib
import types

import torch
import torch.nn.functional as F
from torch import nn

import transformers
from transformers import modeling_rope_utils


class _Torch64:
    """The torch module as modeling_rope_utils sees it, with torch.float and torch.float32 meaning float64."""

    float = float32 = torch.float64

    def __getattr__(self, name):
        return getattr(torch, name)


@contextlib.contextmanager
def float64_rope_functions():
    """Within: transformers' ROPE_INIT_FUNCTIONS compute in float64 (their code unchanged, only torch.float)."""
    saved = modeling_rope_utils.torch
    modeling_rope_utils.torch = _Torch64()
    try:
        yield modeling_rope_utils.ROPE_INIT_FUNCTIONS
    finally:
        modeling_rope_utils.torch = saved


def hf_inv_freq(config, seq_len=None, float64=True):
    """(inv_freq, attention_factor) of a transformers config, by transformers' own functions."""
    kind = config.rope_parameters.get("rope_type", "default")
    if kind == "default":  # compute_default_rope_parameters lives in each model's module: written out here
        d = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        dtype = torch.float64 if float64 else torch.float32
        return 1.0 / config.rope_parameters["rope_theta"] ** (torch.arange(0, d, 2, dtype=dtype) / d), 1.0
    if not float64:
        return modeling_rope_utils.ROPE_INIT_FUNCTIONS[kind](config, seq_len=seq_len)
    with float64_rope_functions() as functions:
        return functions[kind](config, seq_len=seq_len)


def randomize_(module: nn.Module, seed: int, scale: float = 0.3) -> nn.Module:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * scale)
    return module


def _rms_norm_64(self, x):
    """<Model>RMSNorm.forward without its cast to float32."""
    return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))


def _rope_64(self, x, position_ids):
    """<Model>RotaryEmbedding.forward with the inverse frequencies and angles in float64. For "dynamic", the
    frequencies of a fresh model's first call: recomputed for a sequence longer than max_position_embeddings."""
    seq_len = int(position_ids.max()) + 1
    dynamic = self.config.rope_parameters.get("rope_type") == "dynamic"
    grow = dynamic and seq_len > self.config.max_position_embeddings
    inv_freq, scale = hf_inv_freq(self.config, seq_len=seq_len if grow else None)
    freqs = position_ids[..., None].double() * inv_freq.double()  # (B, T, d/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (B, T, d)
    return (emb.cos() * scale).to(x.dtype), (emb.sin() * scale).to(x.dtype)


def _router_64(self, hidden_states):
    """MixtralTopKRouter.forward without its cast of the logits to float32."""
    hidden_states = hidden_states.reshape(-1, self.hidden_dim)
    router_logits = F.linear(hidden_states, self.weight)  # (N, n_experts)
    probs = torch.softmax(router_logits, dim=-1)
    top, index = torch.topk(probs, self.top_k, dim=-1)  # (N, top_k)
    return router_logits, top / top.sum(dim=-1, keepdim=True), index


def widen_(hf):
    """Make a float64 Hugging Face Llama, Qwen3, Mistral or Mixtral compute its float32 islands in float64."""
    for m in hf.modules():
        name = type(m).__name__
        if name.endswith("RMSNorm"):
            m.forward = types.MethodType(_rms_norm_64, m)
        elif name.endswith("RotaryEmbedding"):
            m.forward = types.MethodType(_rope_64, m)
        elif name == "MixtralTopKRouter":
            m.forward = types.MethodType(_router_64, m)
    return hf


def build(config, seed=0, widen=True, attn_implementation=None):
    """A random float64 `<Model>ForCausalLM` of a transformers config, in eval mode (widened unless told)."""
    torch.manual_seed(seed)
    cls = getattr(transformers, type(config).__name__.replace("Config", "ForCausalLM"))
    if attn_implementation is not None:
        config._attn_implementation = attn_implementation
    hf = randomize_(cls(config).double().eval(), seed + 1)
    return widen_(hf) if widen else hf
