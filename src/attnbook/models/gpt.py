"""GPT: a decoder-only Transformer in nanoGPT's spirit, with a KV cache for generation.

Learned positions, pre-norm blocks (`attnbook.layers.EncoderBlock(norm_first=True)` with causal attention and a
tanh-GELU MLP of width 4·d_model), a final LayerNorm and an LM head tied to the token embedding. With the default
config it is GPT-2 small, parameter for parameter (`from_hf` copies a `transformers.GPT2LMHeadModel`).
`n_kv_heads < n_heads` gives grouped-query attention (1 = multi-query), which shrinks the KV cache.

Generation with the cache (`generate(..., use_cache=True)`): one pass over the prompt, causal, fills one `KVCache`
per block; then one token at a time, each step attending to everything cached. A cache holds
2 · n_layers · n_kv_heads · d_head · seq · batch numbers, where seq counts the tokens passed through the model.

Dropout: `GPTConfig.dropout` (default 0.0, as nanoGPT) is used for the embeddings, the attention weights and the
residual branches; our FeedForward also drops out after the GELU, which GPT-2 does not (training-time only).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .._validate import require_int, require_tensor
from ..layers import EncoderBlock, LayerNorm
from ..multihead import KVCache

__all__ = ["GPTConfig", "GPT", "sample_next", "top_p_filter"]


@dataclass
class GPTConfig:
    """Sizes of a GPT; the defaults are GPT-2 small (124,439,808 parameters, the tied head counted once)."""

    vocab_size: int = 50257
    block_size: int = 1024  # the longest sequence (learned positions)
    d_model: int = 768
    n_layers: int = 12
    n_heads: int = 12
    n_kv_heads: int | None = None  # None = n_heads (multi-head); a divisor of n_heads = GQA; 1 = MQA
    dropout: float = 0.0
    eps: float = 1e-5  # LayerNorm epsilon
    bias: bool = True  # biases in the Linears and LayerNorms

    def __post_init__(self):
        for name in ("vocab_size", "block_size", "d_model", "n_layers", "n_heads"):
            require_int(getattr(self, name), name, minimum=1)
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.n_kv_heads is not None:
            require_int(self.n_kv_heads, "n_kv_heads", minimum=1)
            if self.n_heads % self.n_kv_heads:
                raise ValueError(f"n_heads={self.n_heads} is not divisible by n_kv_heads={self.n_kv_heads}")
        d = self.dropout
        if isinstance(d, bool) or not isinstance(d, (int, float)) or not 0.0 <= d < 1.0:
            raise ValueError(f"dropout must be a float in [0, 1), got {d!r}")
        if isinstance(self.eps, bool) or not isinstance(self.eps, (int, float)) or not self.eps > 0:
            raise ValueError(f"eps must be a positive float, got {self.eps!r}")
        if not isinstance(self.bias, bool):
            raise TypeError(f"bias must be a bool, got {type(self.bias).__name__}")

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads


def sample_next(logits: Tensor, temperature: float = 0.0, top_k: int | None = None,
                generator: torch.Generator | None = None) -> Tensor:
    """Logits (B, vocab) -> next token ids (B, 1): argmax when temperature is 0, else a sample from
    softmax(logits / temperature) over the `top_k` largest logits (all when None, at most vocab)."""
    require_tensor(logits, "logits", floating=True)
    if logits.dim() != 2:
        raise ValueError(f"logits must have shape (batch, vocab_size), got {tuple(logits.shape)}")
    _check_sampling(temperature, top_k, generator)
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)  # (B, 1)
    logits = logits / temperature  # (B, V)
    if top_k is not None and top_k < logits.size(-1):
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]  # (B, 1): the k-th largest logit
        logits = logits.masked_fill(logits < kth, float("-inf"))  # (B, V)
    probs = torch.softmax(logits, dim=-1)  # (B, V)
    return torch.multinomial(probs, num_samples=1, generator=generator)  # (B, 1)


def top_p_filter(logits: Tensor, p: float) -> Tensor:
    """Nucleus (top-p) filtering (Holtzman et al. 2020, arXiv:1904.09751): logits (..., vocab) -> a new tensor of
    the same shape and dtype in which only the nucleus keeps its logits and every other one is -inf.

    The nucleus is the smallest set of tokens, the most probable first, whose cumulative probability reaches p
    (>= p): a token is kept exactly when the tokens ranked above it hold less than p of the probability
    (softmax over the last dimension, in the logits' dtype). So the most probable token is always kept, and at
    p = 1 a token of probability 0 is removed once the tokens above it sum to 1. Equal logits are ranked in the
    order `torch.sort` gives them, which is unspecified."""
    require_tensor(logits, "logits", min_dim=1, floating=True)
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p <= 1:
        raise ValueError(f"p must be a float in (0, 1], got {p!r}")
    probs, order = torch.softmax(logits, dim=-1).sort(dim=-1, descending=True)  # (..., V), the most probable first
    before = probs.cumsum(dim=-1).roll(1, dims=-1)  # (..., V): the probability of the tokens ranked above ...
    before[..., 0] = 0.0  # ... none above the first
    remove = before >= p  # (..., V), in rank order: the nucleus already holds p
    return logits.masked_fill(remove.scatter(-1, order, remove), float("-inf"))  # back to the vocabulary's order


def _check_sampling(temperature, top_k, generator) -> None:
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
        raise TypeError(f"temperature must be a float, got {type(temperature).__name__}")
    if not (math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"temperature must be a finite float >= 0 (0 = greedy), got {temperature}")
    if top_k is not None:
        require_int(top_k, "top_k", minimum=1)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")


class GPT(nn.Module):
    """Token + learned position embeddings, pre-norm causal blocks, final LayerNorm, tied LM head."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        if not isinstance(config, GPTConfig):
            raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
        self.config = c = config
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.pos_emb = nn.Embedding(c.block_size, c.d_model)
        self.drop = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(
            EncoderBlock(c.d_model, c.n_heads, 4 * c.d_model, c.dropout, "gelu_tanh", norm_first=True, eps=c.eps,
                         n_kv_heads=c.n_kv_heads, bias=c.bias)
            for _ in range(c.n_layers)
        )
        self.norm = LayerNorm(c.d_model, c.eps, c.bias)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self.lm_head.weight = self.tok_emb.weight  # tied: one (vocab_size, d_model) matrix
        self._init_weights()

    def _init_weights(self) -> None:
        """nanoGPT's init: normal(0, 0.02), zero biases, residual projections' std scaled by 1/sqrt(2·n_layers)."""
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)
        std = 0.02 / math.sqrt(2 * self.config.n_layers)  # each block adds two residual branches
        for block in self.blocks:
            nn.init.normal_(block.self_attn.out_proj.weight, mean=0.0, std=std)
            nn.init.normal_(block.ffn.fc2.weight, mean=0.0, std=std)

    def new_cache(self) -> list[KVCache]:
        """One empty KVCache per block, to pass to `forward(..., cache=...)`."""
        return [KVCache() for _ in self.blocks]

    def forward(self, input_ids: Tensor, cache: list[KVCache] | None = None) -> Tensor:
        """input_ids (B, n) -> logits (B, n, vocab_size), each position seeing itself and the ones before.

        With `cache` (from `new_cache()`), the tokens continue the cached sequence: they sit at positions
        past..past+n-1, attend to the cached keys too, and their keys and values are appended.
        """
        self._check_ids(input_ids)
        return self._logits(input_ids, cache)

    def _check_ids(self, input_ids) -> None:
        """Validate token ids: an integer (B, n) tensor with values in [0, vocab_size)."""
        require_tensor(input_ids, "input_ids")
        if input_ids.dtype == torch.bool or input_ids.is_floating_point() or input_ids.is_complex():
            raise TypeError(f"input_ids must be an integer tensor, got dtype {input_ids.dtype}")
        if input_ids.dim() != 2 or input_ids.size(1) == 0:
            raise ValueError(f"input_ids must have shape (batch, seq) with seq >= 1, got {tuple(input_ids.shape)}")
        low, high = int(input_ids.min()), int(input_ids.max())  # one device sync; generate checks only the prompt
        if low < 0 or high >= self.config.vocab_size:
            raise ValueError(f"input_ids must lie in [0, vocab_size={self.config.vocab_size}), "
                             f"got values in [{low}, {high}]")

    def _logits(self, input_ids: Tensor, cache: list[KVCache] | None) -> Tensor:
        """forward without the check of the token ids (generate's own tokens need none)."""
        c = self.config
        past = self._check_cache(cache)
        n = input_ids.size(1)
        if past + n > c.block_size:
            raise ValueError(f"the sequence has {past + n} positions ({past} cached + {n} new), "
                             f"more than block_size={c.block_size}")
        positions = torch.arange(past, past + n, device=input_ids.device)  # (n,)
        x = self.drop(self.tok_emb(input_ids) + self.pos_emb(positions))  # (B, n, d_model)
        for i, block in enumerate(self.blocks):
            x = block(x, is_causal=n > 1, cache=None if cache is None else cache[i])  # (B, n, d_model)
        return self.lm_head(self.norm(x))  # (B, n, vocab_size)

    def _check_cache(self, cache) -> int:
        """Validate a cache list and return how many positions it holds."""
        if cache is None:
            return 0
        if not isinstance(cache, (list, tuple)) or len(cache) != len(self.blocks) or not all(
            isinstance(kv, KVCache) for kv in cache
        ):
            raise TypeError(f"cache must be a list of {len(self.blocks)} KVCache (one per block, see new_cache())")
        lengths = {kv.seq_len for kv in cache}
        if len(lengths) != 1:
            raise ValueError(f"cache holds different lengths in different blocks: {sorted(lengths)}")
        return lengths.pop()

    @torch.no_grad()
    def generate(self, input_ids: Tensor, max_new_tokens: int, use_cache: bool = True, temperature: float = 0.0,
                 top_k: int | None = None, generator: torch.Generator | None = None, return_cache: bool = False):
        """Prompt (B, n) -> (B, n + max_new_tokens): the prompt followed by generated tokens.

        temperature 0 is greedy (argmax); otherwise tokens are sampled (see `sample_next`) with `generator`.
        `use_cache=True` keeps a KVCache per block (one causal pass over the prompt, then one token per step);
        False runs the whole sequence again at every step. `return_cache=True` also returns the caches, which
        then hold n + max_new_tokens - 1 positions (the last token is never fed back). Dropout is not switched
        off here: call `.eval()` first if the config has any.
        """
        self._check_ids(input_ids)
        require_int(max_new_tokens, "max_new_tokens", minimum=0)
        for name, flag in (("use_cache", use_cache), ("return_cache", return_cache)):
            if not isinstance(flag, bool):
                raise TypeError(f"{name} must be a bool, got {type(flag).__name__}")
        if return_cache and not use_cache:
            raise ValueError("return_cache=True needs use_cache=True")
        _check_sampling(temperature, top_k, generator)
        n = input_ids.size(1)
        if n + max_new_tokens > self.config.block_size:
            raise ValueError(f"prompt length {n} + max_new_tokens={max_new_tokens} is more than "
                             f"block_size={self.config.block_size}")
        cache = self.new_cache() if use_cache else None
        ids = input_ids
        if max_new_tokens > 0:
            logits = self._logits(ids, cache)[:, -1]  # (B, vocab): the prompt pass
            for step in range(max_new_tokens):
                next_id = sample_next(logits, temperature, top_k, generator)  # (B, 1)
                ids = torch.cat([ids, next_id], dim=1)  # (B, n + step + 1)
                if step + 1 < max_new_tokens:
                    logits = self._logits(next_id, cache) if use_cache else self._logits(ids, None)  # (B, n', V)
                    logits = logits[:, -1]  # (B, vocab)
        return (ids, cache) if return_cache else ids

    @staticmethod
    def config_from_hf(hf_config) -> GPTConfig:
        """The GPTConfig equal to a `transformers.GPT2Config` (ValueError for what we do not model)."""
        if hf_config.activation_function not in ("gelu_new", "gelu_pytorch_tanh"):
            raise ValueError(f"activation_function={hf_config.activation_function!r} is not supported "
                             f"(only the tanh GELU: 'gelu_new', 'gelu_pytorch_tanh')")
        if hf_config.n_inner not in (None, 4 * hf_config.n_embd):
            raise ValueError(f"n_inner={hf_config.n_inner} is not supported (GPT uses 4 * n_embd)")
        if not hf_config.scale_attn_weights or hf_config.scale_attn_by_inverse_layer_idx:
            raise ValueError("only scale_attn_weights=True, scale_attn_by_inverse_layer_idx=False is supported")
        if getattr(hf_config, "add_cross_attention", False):
            raise ValueError("add_cross_attention=True is not supported")
        drops = {hf_config.embd_pdrop, hf_config.attn_pdrop, hf_config.resid_pdrop}
        if len(drops) != 1:
            raise ValueError(f"embd_pdrop, attn_pdrop and resid_pdrop differ ({hf_config.embd_pdrop}, "
                             f"{hf_config.attn_pdrop}, {hf_config.resid_pdrop}); GPTConfig has one dropout")
        return GPTConfig(
            vocab_size=hf_config.vocab_size, block_size=hf_config.n_positions, d_model=hf_config.n_embd,
            n_layers=hf_config.n_layer, n_heads=hf_config.n_head, dropout=drops.pop(),
            eps=hf_config.layer_norm_epsilon, bias=True,
        )

    @classmethod
    def from_hf(cls, model) -> "GPT":
        """A GPT with the weights of a `transformers.GPT2LMHeadModel` (same dtype, device and train/eval mode).

        GPT-2's `Conv1D` stores weights as (in, out), the transpose of `nn.Linear`'s (out, in), and its `c_attn`
        packs the query, key and value projections side by side: [W_q | W_k | W_v].
        """
        try:
            import transformers
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ImportError("copying Hugging Face weights needs `transformers`: pip install transformers") from e
        if not isinstance(model, transformers.GPT2LMHeadModel):
            raise TypeError(f"model must be a transformers.GPT2LMHeadModel, got {type(model).__name__}")
        tr = model.transformer
        if model.lm_head.weight is not tr.wte.weight:
            raise ValueError("model's lm_head is not tied to its token embedding, which ours always is")
        w = tr.wte.weight
        new = cls(cls.config_from_hf(model.config)).to(device=w.device, dtype=w.dtype)
        d = new.config.d_model
        with torch.no_grad():
            new.tok_emb.weight.copy_(tr.wte.weight)
            new.pos_emb.weight.copy_(tr.wpe.weight)
            for ours, h in zip(new.blocks, tr.h):
                att = ours.self_attn
                w_q, w_k, w_v = h.attn.c_attn.weight.t().split(d, dim=0)  # (3d, d) -> three (d, d)
                b_q, b_k, b_v = h.attn.c_attn.bias.split(d)
                for proj, w_part, b_part in ((att.q_proj, w_q, b_q), (att.k_proj, w_k, b_k), (att.v_proj, w_v, b_v)):
                    proj.weight.copy_(w_part)
                    proj.bias.copy_(b_part)
                _copy_conv1d(att.out_proj, h.attn.c_proj)
                _copy_conv1d(ours.ffn.fc1, h.mlp.c_fc)
                _copy_conv1d(ours.ffn.fc2, h.mlp.c_proj)
                _copy_norm(ours.norm1, h.ln_1)
                _copy_norm(ours.norm2, h.ln_2)
            _copy_norm(new.norm, tr.ln_f)
        return new.train(model.training)


def _copy_conv1d(ours: nn.Linear, conv) -> None:
    """Copy a GPT-2 Conv1D (weight (in, out)) into an nn.Linear (weight (out, in))."""
    ours.weight.copy_(conv.weight.t())
    ours.bias.copy_(conv.bias)


def _copy_norm(ours: LayerNorm, theirs: nn.LayerNorm) -> None:
    ours.weight.copy_(theirs.weight)
    ours.bias.copy_(theirs.bias)
