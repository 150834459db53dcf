"""Llama: the modern decoder-only block (groundwork for chapter 11), in nanoGPT's spirit.

What changed since 2017, one module each: `RMSNorm` instead of LayerNorm (no mean, no bias), a `SwiGLU`
feed-forward instead of ReLU (three matrices, no biases), rotary positions applied to q and k inside attention
instead of a table added to the embeddings, grouped-query attention (n_kv_heads key/value heads shared by
n_heads query heads), pre-norm blocks, no biases anywhere. `Llama` equals Hugging Face's `LlamaForCausalLM`
once `load_hf_weights` has copied its weights.

RoPE is chapter 5's `attnbook.positional.apply_rope`, which already uses Hugging Face's rotate-half convention
(pair i is dims (i, i + d_head/2)). Meta's original code rotates interleaved pairs (2i, 2i+1) instead; Hugging
Face's conversion script permutes the rows of W_q and W_k so that both give the same scores.

Options of the later models, each off by default (so the defaults are the Llama 2 block of chapter 11):
`qk_norm` (RMSNorm of each head's queries and keys: OLMo 2, Qwen3, Gemma 3), `sliding_window` (Mistral, Gemma 2/3's
local layers), `rope_scaling` (longer contexts: `rope_scaling.py`), `n_experts` (Mixtral's mixture of experts:
`moe.py`). `config_from_hf` and `load_hf_weights` read Hugging Face's Llama, Qwen3, Mistral and Mixtral.

Precision: our RMSNorm and RoPE compute in float32 or the input's dtype, whichever is wider. Hugging Face's
compute in float32 even for a float64 model (its float64 logits differ from ours by a few 1e-7 for that
reason alone); `tests/test_llama.py` widens those two islands of theirs to compare at 1e-10.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._validate import require_int, require_tensor
from ..multihead import merge_heads, repeat_kv, split_heads
from ..positional import apply_rope
from .moe import SparseMoE
from .params import ffn_param_count, mha_param_count
from .rope_scaling import apply_scaled_rope, check_rope_scaling, rope_frequencies

__all__ = ["RMSNorm", "SwiGLU", "LlamaAttention", "LlamaBlock", "LlamaConfig", "Llama", "config_from_hf",
           "load_hf_weights", "BlockCosts", "block_costs"]


def _positive_float(x, name: str) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise TypeError(f"{name} must be a float, got {type(x).__name__}")
    if not (math.isfinite(x) and x > 0):
        raise ValueError(f"{name} must be a positive finite float, got {x!r}")
    return float(x)


def _check_heads(d_model: int, n_heads: int, n_kv_heads: int, rope: bool = True) -> None:
    """d_model = n_heads * d_head (d_head even for RoPE's pairs), and n_kv_heads dividing n_heads."""
    for name, value in (("d_model", d_model), ("n_heads", n_heads), ("n_kv_heads", n_kv_heads)):
        require_int(value, name, minimum=1)
    if d_model % n_heads:
        raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
    if rope and (d_model // n_heads) % 2:
        raise ValueError(f"d_model / n_heads = {d_model // n_heads} must be even: RoPE rotates pairs of dimensions")
    if n_heads % n_kv_heads:
        raise ValueError(f"n_heads={n_heads} is not divisible by n_kv_heads={n_kv_heads}")


class RMSNorm(nn.Module):
    """x * rsqrt(mean(x²) + eps) * weight over the last dim: LayerNorm without the mean and the bias.

    Computed in float32 or x's dtype, whichever is wider (as Llama: half-precision inputs are normalised in
    float32), then cast back to x's dtype before the scale.
    """

    def __init__(self, d_model: int, eps: float = 1e-6):
        super().__init__()
        self.d_model, self.eps = require_int(d_model, "d_model", minimum=1), _positive_float(eps, "eps")
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: Tensor) -> Tensor:
        """(..., d_model) -> (..., d_model)."""
        require_tensor(x, "x", min_dim=1, floating=True)
        if x.size(-1) != self.d_model:
            raise ValueError(f"x must have last dimension d_model={self.d_model}, got shape {tuple(x.shape)}")
        h = x.to(torch.promote_types(x.dtype, torch.float32))
        h = h * torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + self.eps)  # (..., d_model), rms 1
        return self.weight * h.to(x.dtype)

    def extra_repr(self) -> str:
        return f"{self.d_model}, eps={self.eps}"


class SwiGLU(nn.Module):
    """Gated feed-forward: down_proj(silu(gate_proj(x)) * up_proj(x)), d_model -> d_ff -> d_model, no biases."""

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        require_int(d_model, "d_model", minimum=1)
        require_int(d_ff, "d_ff", minimum=1)
        self.gate_proj = nn.Linear(d_model, d_ff, bias=False)
        self.up_proj = nn.Linear(d_model, d_ff, bias=False)
        self.down_proj = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        """(..., d_model) -> (..., d_model)."""
        h = F.silu(self.gate_proj(x)) * self.up_proj(x)  # (..., d_ff)
        return self.down_proj(h)  # (..., d_model)


def _check_options(qk_norm, sliding_window, rope_scaling) -> None:
    if not isinstance(qk_norm, bool):
        raise TypeError(f"qk_norm must be a bool, got {type(qk_norm).__name__}")
    if sliding_window is not None:
        require_int(sliding_window, "sliding_window", minimum=1)
    check_rope_scaling(rope_scaling)


def sliding_window_mask(T: int, sliding_window: int | None, *, device=None) -> Tensor:
    """(T, T) bool, True where query t may see key s: s <= t, and t - s < sliding_window unless it is None."""
    require_int(T, "T", minimum=1)
    t = torch.arange(T, device=device)
    gap = t[:, None] - t[None, :]  # (T, T): query index minus key index
    return (gap >= 0) & (gap < sliding_window) if sliding_window is not None else gap >= 0


class LlamaAttention(nn.Module):
    """Causal grouped-query self-attention with RoPE on q and k; no biases.

    Options, off by default (Llama 2's attention):

    - qk_norm: queries and keys normalised head by head before RoPE, each by an RMSNorm over d_head (one weight of
      size d_head for q, one for k, shared by the heads; epsilon `eps`), as Qwen3 and Gemma 3. It bounds the scores'
      growth (QK-norm, Dehghani et al. 2023, arXiv:2302.05442, with LayerNorm); OLMo 2 (arXiv:2501.00656)
      normalises the whole projection (all heads at once) instead, which this option does not do.
    - sliding_window: query t sees only the keys s with t - sliding_window < s <= t, i.e. the last sliding_window
      keys, itself included (Mistral, arXiv:2310.06825; transformers' convention: key index > query index -
      sliding_window). A window >= T is the full causal attention.
    - rope_scaling: RoPE's frequencies for a longer context (`attnbook.models.rope_scaling.check_rope_scaling`:
      linear, ntk, dynamic, yarn, llama3); "dynamic" takes its length from T, YaRN also scales cos and sin.
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, rope_base: float = 10000.0, *,
                 qk_norm: bool = False, sliding_window: int | None = None, rope_scaling: dict | None = None,
                 eps: float = 1e-6):
        super().__init__()
        _check_heads(d_model, n_heads, n_kv_heads)
        _check_options(qk_norm, sliding_window, rope_scaling)
        self.n_heads, self.n_kv_heads, self.d_head = n_heads, n_kv_heads, d_model // n_heads
        self.rope_base, eps = _positive_float(rope_base, "rope_base"), _positive_float(eps, "eps")
        self.qk_norm, self.sliding_window, self.rope_scaling = qk_norm, sliding_window, rope_scaling
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, n_kv_heads * self.d_head, bias=False)
        self.v_proj = nn.Linear(d_model, n_kv_heads * self.d_head, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)
        if qk_norm:
            self.q_norm, self.k_norm = RMSNorm(self.d_head, eps), RMSNorm(self.d_head, eps)

    def forward(self, x: Tensor) -> Tensor:
        """(B, T, d_model) -> (B, T, d_model); position t attends to positions 0..t (the last sliding_window)."""
        q = split_heads(self.q_proj(x), self.n_heads)  # (B, nh, T, hs)
        k = split_heads(self.k_proj(x), self.n_kv_heads)  # (B, nkv, T, hs)
        v = split_heads(self.v_proj(x), self.n_kv_heads)  # (B, nkv, T, hs)
        if self.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)  # each head's vectors to rms 1, times the weights
        if self.rope_scaling is None:
            q, k = apply_rope(q, base=self.rope_base), apply_rope(k, base=self.rope_base)  # rotated by position
        else:
            inv_freq, factor = rope_frequencies(self.d_head, self.rope_base, self.rope_scaling, seq_len=x.size(1))
            q, k = apply_scaled_rope(q, inv_freq, factor), apply_scaled_rope(k, inv_freq, factor)
        n_rep = self.n_heads // self.n_kv_heads
        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # (B, nh, T, hs): each kv head serves n_rep q heads
        if self.sliding_window is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, nh, T, hs)
        else:
            mask = sliding_window_mask(x.size(1), self.sliding_window, device=x.device)  # (T, T)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, nh, T, hs)
        return self.out_proj(merge_heads(y))  # (B, T, d_model)

    def extra_repr(self) -> str:
        extra = "".join(f", {k}={v}" for k, v in (("sliding_window", self.sliding_window),
                                                  ("rope_scaling", self.rope_scaling)) if v is not None)
        return f"n_heads={self.n_heads}, n_kv_heads={self.n_kv_heads}, rope_base={self.rope_base:g}{extra}"


class LlamaBlock(nn.Module):
    """Pre-norm block: x + attention(RMSNorm(x)), then x + SwiGLU(RMSNorm(x)).

    qk_norm, sliding_window and rope_scaling go to `LlamaAttention`; with n_experts the feed-forward is a
    `SparseMoE` of n_experts SwiGLU experts of width d_ff, experts_per_token of them per token (Mixtral: 8, 2).
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, d_ff: int, rope_base: float = 10000.0,
                 eps: float = 1e-6, *, qk_norm: bool = False, sliding_window: int | None = None,
                 rope_scaling: dict | None = None, n_experts: int | None = None, experts_per_token: int = 2):
        super().__init__()
        self.norm1 = RMSNorm(d_model, eps)
        self.self_attn = LlamaAttention(d_model, n_heads, n_kv_heads, rope_base, qk_norm=qk_norm,
                                        sliding_window=sliding_window, rope_scaling=rope_scaling, eps=eps)
        self.norm2 = RMSNorm(d_model, eps)
        if n_experts is None:
            self.ffn = SwiGLU(d_model, d_ff)
        else:
            self.ffn = SparseMoE(d_model, d_ff, n_experts, experts_per_token)

    def forward(self, x: Tensor) -> Tensor:
        """(B, T, d_model) -> (B, T, d_model)."""
        x = x + self.self_attn(self.norm1(x))
        return x + self.ffn(self.norm2(x))


_OPTIONS = {"qk_norm": False, "sliding_window": None, "rope_scaling": None, "n_experts": None, "experts_per_token": 2}


@dataclass(repr=False)
class LlamaConfig:
    """Sizes of a Llama. d_head = d_model / n_heads; n_kv_heads = n_heads is multi-head, 1 is multi-query.

    The options after tie_embeddings are those of `LlamaBlock`, all off by default; the repr lists them only when set.
    """

    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_ff: int
    max_len: int  # the longest sequence accepted (RoPE itself has no table and no limit)
    rope_base: float = 10000.0  # Hugging Face's rope_theta
    eps: float = 1e-6  # RMSNorm epsilon
    tie_embeddings: bool = False  # lm_head shares the token embedding's matrix (Llama 2 and 3-8B: untied)
    qk_norm: bool = False  # RMSNorm of each head's q and k (Qwen3, Gemma 3)
    sliding_window: int | None = None  # each query sees the last sliding_window keys, itself included (Mistral)
    rope_scaling: dict | None = None  # e.g. {"rope_type": "llama3", "factor": 8.0, ...}: see rope_scaling.py
    n_experts: int | None = None  # a SparseMoE of n_experts SwiGLU experts instead of one SwiGLU (Mixtral: 8)
    experts_per_token: int = 2  # top_k of the SparseMoE (Mixtral: 2); unused without n_experts

    def __post_init__(self):
        for name in ("vocab_size", "n_layers", "d_ff", "max_len"):
            require_int(getattr(self, name), name, minimum=1)
        _check_heads(self.d_model, self.n_heads, self.n_kv_heads)
        _positive_float(self.rope_base, "rope_base")
        _positive_float(self.eps, "eps")
        if not isinstance(self.tie_embeddings, bool):
            raise TypeError(f"tie_embeddings must be a bool, got {type(self.tie_embeddings).__name__}")
        _check_options(self.qk_norm, self.sliding_window, self.rope_scaling)
        require_int(self.experts_per_token, "experts_per_token", minimum=1)
        if self.n_experts is not None and require_int(self.n_experts, "n_experts", minimum=1) < self.experts_per_token:
            raise ValueError(f"n_experts={self.n_experts} must be >= experts_per_token={self.experts_per_token}")

    def __repr__(self) -> str:
        shown = [f.name for f in fields(self) if f.name not in _OPTIONS or getattr(self, f.name) != _OPTIONS[f.name]]
        return f"LlamaConfig({', '.join(f'{name}={getattr(self, name)!r}' for name in shown)})"

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads


class Llama(nn.Module):
    """Token embedding, pre-norm LlamaBlocks, final RMSNorm, LM head (tied or not) -> logits."""

    def __init__(self, config: LlamaConfig):
        super().__init__()
        if not isinstance(config, LlamaConfig):
            raise TypeError(f"config must be a LlamaConfig, got {type(config).__name__}")
        self.config = c = config
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        options = {name: getattr(c, name) for name in _OPTIONS}
        self.blocks = nn.ModuleList(LlamaBlock(c.d_model, c.n_heads, c.n_kv_heads, c.d_ff, c.rope_base, c.eps,
                                               **options) for _ in range(c.n_layers))
        self.norm = RMSNorm(c.d_model, c.eps)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        for m in self.modules():  # Hugging Face's init: normal(0, 0.02) matrices; RMSNorm weights stay ones
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)
        if c.tie_embeddings:
            self.lm_head.weight = self.tok_emb.weight  # one (vocab_size, d_model) matrix

    def forward(self, input_ids: Tensor) -> Tensor:
        """input_ids (B, T) -> logits (B, T, vocab_size), each position seeing itself and the ones before."""
        c = self.config
        require_tensor(input_ids, "input_ids")
        if input_ids.dtype == torch.bool or input_ids.is_floating_point() or input_ids.is_complex():
            raise TypeError(f"input_ids must be an integer tensor, got dtype {input_ids.dtype}")
        if input_ids.dim() != 2 or not 1 <= input_ids.size(1) <= c.max_len:
            raise ValueError(f"input_ids must have shape (batch, T) with 1 <= T <= max_len={c.max_len}, "
                             f"got {tuple(input_ids.shape)}")
        low, high = int(input_ids.min()), int(input_ids.max())
        if low < 0 or high >= c.vocab_size:
            raise ValueError(f"input_ids must lie in [0, vocab_size={c.vocab_size}), got values in [{low}, {high}]")
        x = self.tok_emb(input_ids)  # (B, T, d_model)
        for block in self.blocks:
            x = block(x)  # (B, T, d_model)
        return self.lm_head(self.norm(x))  # (B, T, vocab_size)


# --- Hugging Face weights -----------------------------------------------------------------------------------

_HF_NAMES = (("tok_emb.", "model.embed_tokens."), ("blocks.", "model.layers."), ("norm.", "model.norm."),
             (".norm1.", ".input_layernorm."), (".norm2.", ".post_attention_layernorm."),
             (".ffn.router.", ".mlp.gate."), (".ffn.", ".mlp."), (".out_proj.", ".o_proj."))


def _hf_name(ours: str) -> str:
    """Our state-dict key -> Hugging Face's (`blocks.0.ffn.up_proj.weight` -> `model.layers.0.mlp.up_proj.weight`)."""
    name = ours
    for a, b in _HF_NAMES:  # "x." renames a prefix, ".x." a part inside the name
        if a.startswith("."):
            name = name.replace(a, b)
        elif name.startswith(a):
            name = b + name[len(a):]
    return name


def _window_from_hf(hf_config) -> int | None:
    """One sliding window for every layer, or None (ValueError if the layers mix full and sliding attention)."""
    kinds = set(getattr(hf_config, "layer_types", None) or [])
    if kinds - {"full_attention", "sliding_attention"} or len(kinds) > 1:
        raise ValueError(f"hf_config.layer_types={hf_config.layer_types!r} is not supported (every layer "
                         "'full_attention' or every layer 'sliding_attention')")
    return None if kinds == {"full_attention"} else getattr(hf_config, "sliding_window", None)


def _rope_from_hf(hf_config) -> tuple[float, dict | None]:
    """(rope_theta, our rope_scaling) from Hugging Face's rope_parameters (ValueError for what we do not model)."""
    rope = dict(getattr(hf_config, "rope_parameters", None) or {"rope_theta": hf_config.rope_theta})
    theta, kind = rope.pop("rope_theta"), rope.setdefault("rope_type", "default")
    if rope.pop("partial_rotary_factor", 1.0) != 1.0:
        raise ValueError("partial_rotary_factor != 1 is not supported (RoPE on every dimension of a head)")
    if kind == "default":
        return float(theta), None
    if kind not in ("linear", "dynamic", "yarn", "llama3"):
        raise ValueError(f"rope_type={kind!r} is not supported (default, linear, dynamic, yarn, llama3)")
    if kind == "dynamic":  # its scaling starts beyond max_position_embeddings
        rope["original_max_position_embeddings"] = hf_config.max_position_embeddings
    return float(theta), check_rope_scaling(rope)


def config_from_hf(hf_config) -> LlamaConfig:
    """The LlamaConfig equal to a transformers `LlamaConfig`, `Qwen3Config` (qk_norm), `MistralConfig`
    (sliding_window) or `MixtralConfig` (sliding_window, n_experts); ValueError for what `Llama` does not model.

    A "dynamic" rope_scaling starts at Hugging Face's max_position_embeddings, which becomes max_len too: raise
    max_len (`dataclasses.replace`) to run longer sequences.
    """
    model_type = getattr(hf_config, "model_type", "llama")
    if model_type not in ("llama", "qwen3", "mistral", "mixtral"):
        raise ValueError(f"hf_config.model_type={model_type!r} is not supported (llama, qwen3, mistral, mixtral)")
    for name, want in (("hidden_act", "silu"), ("attention_bias", False), ("mlp_bias", False),
                       ("router_jitter_noise", 0.0)):
        if getattr(hf_config, name, want) != want:
            raise ValueError(f"hf_config.{name}={getattr(hf_config, name)!r} is not supported (only {want!r})")
    rope_base, rope_scaling = _rope_from_hf(hf_config)
    d_head = getattr(hf_config, "head_dim", None) or hf_config.hidden_size // hf_config.num_attention_heads
    if d_head * hf_config.num_attention_heads != hf_config.hidden_size:
        raise ValueError(f"head_dim={d_head} * num_attention_heads != hidden_size: not supported")
    moe = model_type == "mixtral"
    return LlamaConfig(
        vocab_size=hf_config.vocab_size, d_model=hf_config.hidden_size, n_layers=hf_config.num_hidden_layers,
        n_heads=hf_config.num_attention_heads, n_kv_heads=hf_config.num_key_value_heads,
        d_ff=hf_config.intermediate_size, max_len=hf_config.max_position_embeddings,
        rope_base=rope_base, eps=float(hf_config.rms_norm_eps), tie_embeddings=bool(hf_config.tie_word_embeddings),
        qk_norm=model_type == "qwen3", sliding_window=_window_from_hf(hf_config), rope_scaling=rope_scaling,
        n_experts=hf_config.num_local_experts if moe else None,
        experts_per_token=hf_config.num_experts_per_tok if moe else 2,
    )


@torch.no_grad()
def load_hf_weights(model: Llama, hf_model) -> Llama:
    """Copy the weights of a Hugging Face `LlamaForCausalLM` (or its `state_dict()`) into `model`; return it.

    Also Qwen3, Mistral and Mixtral (`...ForCausalLM`), for a model built with `config_from_hf`: Qwen3's q_norm and
    k_norm have our names; Mixtral's router (mlp.gate) is our ffn.router and its experts' gate_up_proj
    (n_experts, 2 d_ff, d_model), gate rows first, is split into our experts' gate_proj and up_proj.

    Every one of our parameters must find a tensor of the same shape under Hugging Face's name, and every
    Hugging Face tensor must be used (a missing or extra key is a ValueError naming it). The layout is the same:
    nn.Linear weights are (out, in) in both, and both use the rotate-half RoPE, so nothing is transposed or
    permuted. `model` keeps its dtype and device (values are cast). A tied `model` needs a checkpoint whose
    lm_head equals its embedding (or has no lm_head). Build `model` with `config_from_hf(hf_model.config)`.
    """
    if not isinstance(model, Llama):
        raise TypeError(f"model must be a Llama, got {type(model).__name__}")
    if isinstance(hf_model, nn.Module):
        hf_model = hf_model.state_dict()
    if not hasattr(hf_model, "keys") or not all(isinstance(k, str) for k in hf_model.keys()):
        raise TypeError(f"hf_model must be a LlamaForCausalLM or its state dict, got {type(hf_model).__name__}")
    theirs = dict(hf_model)
    for key in [k for k in theirs if k.endswith(".experts.gate_up_proj")]:  # Mixtral's fused expert matrices
        stem = key[:-len("gate_up_proj")]
        theirs[stem + "gate_proj"], theirs[stem + "up_proj"] = theirs.pop(key).chunk(2, dim=1)  # (E, d_ff, d) each
    tied = model.config.tie_embeddings
    if tied and "lm_head.weight" in theirs:
        head = theirs.pop("lm_head.weight")
        if not torch.equal(head, theirs.get("model.embed_tokens.weight", head)):
            raise ValueError("hf_model's lm_head.weight differs from its embedding, but model ties them "
                             "(build model with tie_embeddings=False)")
    for name, p in model.named_parameters():  # the tied matrix is listed once, as tok_emb.weight
        key = _hf_name(name)
        if key not in theirs:
            raise ValueError(f"hf_model has no {key!r} (for our {name!r})")
        t = theirs.pop(key)
        if t.shape != p.shape:
            raise ValueError(f"hf_model's {key!r} has shape {tuple(t.shape)}, ours {name!r} {tuple(p.shape)}")
        p.copy_(t)
    if theirs:
        raise ValueError(f"hf_model has weights that model has no place for: {sorted(theirs)[:5]}")
    return model


# --- Costs: parameters, FLOPs and KV cache, 2017 versus Llama ------------------------------------------------


class BlockCosts(NamedTuple):
    params: int  # every parameter of the language model, a tied matrix once
    flops_per_token: int  # forward pass, matrix multiplications only (see block_costs)
    kv_cache_bytes_per_token: int  # keys and values kept per token of context, all layers


def block_costs(d_model: int, n_heads: int, n_kv_heads: int, d_ff: int, n_layers: int, vocab_size: int,
                seq_len: int, *, style: str, tie_embeddings: bool | None = None,
                bytes_per_element: int = 2) -> BlockCosts:
    """Parameters, forward FLOPs per token and KV-cache bytes per token of a decoder-only language model.

    style "2017": the paper's post-norm block used causally: attention and a ReLU FFN (d_model -> d_ff ->
    d_model), biases in every Linear, two LayerNorms (weight and bias) per block, sinusoidal positions (no
    parameters), no final norm. style "llama": this module's `Llama` (RMSNorm weights only, SwiGLU of width
    d_ff with three matrices, RoPE, no biases, a final RMSNorm). Both: a token embedding and a bias-free LM
    head, tied by default for "2017" (the paper shares the matrix) and untied for "llama" (Llama 2).

    FLOPs convention (Kaplan et al. 2020, with both attention products): 2 FLOPs (multiply + add) per weight of
    every matrix multiplication (the Linears and the LM head, a tied head included; not the embedding lookup,
    biases, norms, activations or softmax), plus per layer 2·2·seq_len·d_model for q·kᵀ and weights·v against
    a full context of seq_len keys (no causal halving; GQA does not reduce it, every query head attends).
    KV cache: 2 (k and v) · n_layers · n_kv_heads · d_head · bytes_per_element (2: float16/bfloat16).
    """
    if style not in ("2017", "llama"):
        raise ValueError(f"style must be '2017' or 'llama', got {style!r}")
    _check_heads(d_model, n_heads, n_kv_heads, rope=style == "llama")
    for name, value in (("d_ff", d_ff), ("n_layers", n_layers), ("vocab_size", vocab_size),
                        ("seq_len", seq_len), ("bytes_per_element", bytes_per_element)):
        require_int(value, name, minimum=1)
    tied = (style == "2017") if tie_embeddings is None else tie_embeddings
    if not isinstance(tied, bool):
        raise TypeError(f"tie_embeddings must be a bool or None, got {type(tied).__name__}")
    kv_dim = n_kv_heads * (d_model // n_heads)
    attn_matmul = 2 * d_model * d_model + 2 * d_model * kv_dim  # W_q, W_o; W_k, W_v
    if style == "2017":
        ffn_matmul = 2 * d_model * d_ff
        block = mha_param_count(d_model, n_heads, n_kv_heads) + ffn_param_count(d_model, d_ff) + 2 * 2 * d_model
        final_norm = 0
    else:
        ffn_matmul = 3 * d_model * d_ff  # gate, up, down
        block = attn_matmul + ffn_matmul + 2 * d_model  # two RMSNorm weights
        final_norm = d_model
    embedding = vocab_size * d_model
    params = embedding + n_layers * block + final_norm + (0 if tied else embedding)
    matmul_weights = n_layers * (attn_matmul + ffn_matmul) + vocab_size * d_model  # the head multiplies
    flops = 2 * matmul_weights + n_layers * 2 * 2 * seq_len * d_model
    kv_bytes = 2 * n_layers * kv_dim * bytes_per_element
    return BlockCosts(params, flops, kv_bytes)
