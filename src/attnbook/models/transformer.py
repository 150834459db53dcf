"""The encoder-decoder Transformer of "Attention Is All You Need", small enough to train on a CPU (chapter 6).

src ids -> embedding * sqrt(d_model) + sinusoidal positions -> encoder blocks -> (final LayerNorm) = memory
tgt_in ids -> embedding * sqrt(d_model) + sinusoidal positions -> decoder blocks, each with masked
self-attention and cross-attention over the memory -> (final LayerNorm) -> Linear to vocabulary logits.

Masks follow the package convention (boolean, True = may attend). `Transformer.forward(src, tgt_in)` builds
them itself: source padding from `config.pad_id` (for the encoder's self-attention and for the decoder's
cross-attention) and causal + target padding for the decoder's self-attention. `greedy_decode` generates
one token at a time. The blocks are pre-norm by default (`norm_first=True`, as in most modern models), and
only then does each stack end in a LayerNorm, as in `nn.Transformer(norm_first=True)`; with `norm_first=False`
they are post-norm, as in the paper.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .._validate import require_int, require_tensor
from ..layers import ACTIVATIONS, DecoderBlock, EncoderBlock, LayerNorm
from ..masks import causal_mask
from ..positional import SinusoidalPositionalEncoding

__all__ = ["TransformerConfig", "Encoder", "Decoder", "Transformer", "EncoderDecoder", "greedy_decode"]


@dataclass
class TransformerConfig:
    """Sizes of an encoder-decoder Transformer; with the defaults it is chapter 6's model for the reversal task."""

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 64
    n_heads: int = 4
    d_ff: int = 128
    n_encoder_layers: int = 2
    n_decoder_layers: int = 2
    max_len: int = 64  # the longest source or target sequence (sinusoidal table size)
    dropout: float = 0.0
    norm_first: bool = True  # pre-norm blocks and a final LayerNorm after each stack; False: post-norm (the paper)
    activation: str = "relu"  # "relu", "gelu" or "gelu_tanh"
    pad_id: int | None = 0  # token id of the padding, masked out of attention; None: no padding masks
    tie_weights: bool = False  # the output projection shares its matrix with the target token embedding
    eps: float = 1e-5  # LayerNorm epsilon

    def __post_init__(self):
        for name in ("src_vocab_size", "tgt_vocab_size", "d_model", "n_heads", "d_ff", "max_len"):
            require_int(getattr(self, name), name, minimum=1)
        for name in ("n_encoder_layers", "n_decoder_layers"):
            require_int(getattr(self, name), name, minimum=0)
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.d_model % 2:
            raise ValueError(f"d_model={self.d_model} must be even: sinusoidal positions come in (sin, cos) pairs")
        d = self.dropout
        if isinstance(d, bool) or not isinstance(d, (int, float)) or not 0.0 <= d < 1.0:
            raise ValueError(f"dropout must be a float in [0, 1), got {d!r}")
        for name in ("norm_first", "tie_weights"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be a bool, got {type(getattr(self, name)).__name__}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {self.activation!r}")
        if self.pad_id is not None:
            require_int(self.pad_id, "pad_id", minimum=0)
            if self.pad_id >= min(self.src_vocab_size, self.tgt_vocab_size):
                raise ValueError(f"pad_id={self.pad_id} must be a token id of both vocabularies "
                                 f"(< {min(self.src_vocab_size, self.tgt_vocab_size)})")
        if isinstance(self.eps, bool) or not isinstance(self.eps, (int, float)) or not self.eps > 0:
            raise ValueError(f"eps must be a positive float, got {self.eps!r}")


def _check_ids(ids, name: str, vocab_size: int, max_len: int) -> None:
    """Validate token ids: an integer (B, n) tensor, 1 <= n <= max_len, values in [0, vocab_size)."""
    require_tensor(ids, name)
    if ids.dtype == torch.bool or ids.is_floating_point() or ids.is_complex():
        raise TypeError(f"{name} must be an integer tensor of token ids, got dtype {ids.dtype}")
    if ids.dim() != 2 or ids.size(1) == 0:
        raise ValueError(f"{name} must have shape (batch, seq) with seq >= 1, got {tuple(ids.shape)}")
    if ids.size(1) > max_len:
        raise ValueError(f"{name} has {ids.size(1)} positions, more than max_len={max_len}")
    if ids.numel():
        low, high = int(ids.min()), int(ids.max())
        if low < 0 or high >= vocab_size:
            raise ValueError(f"{name} must hold ids in [0, {vocab_size}), got values in [{low}, {high}]")


class _Embedding(nn.Module):
    """Token embedding scaled by sqrt(d_model), plus the sinusoidal position table."""

    def __init__(self, vocab_size: int, c: TransformerConfig):
        super().__init__()
        self.tok = nn.Embedding(vocab_size, c.d_model)
        nn.init.normal_(self.tok.weight, std=c.d_model**-0.5)  # x sqrt(d_model) below: entries of variance 1
        self.pos = SinusoidalPositionalEncoding(c.d_model, c.max_len, c.dropout)
        self.scale = math.sqrt(c.d_model)

    def forward(self, ids: Tensor) -> Tensor:
        return self.pos(self.tok(ids) * self.scale)  # (B, n) -> (B, n, d_model)


class Encoder(nn.Module):
    """Source ids -> memory: embedding and positions, a stack of EncoderBlocks, a final LayerNorm if pre-norm."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.config = c = config
        self.embed = _Embedding(c.src_vocab_size, c)
        self.blocks = nn.ModuleList(
            EncoderBlock(c.d_model, c.n_heads, c.d_ff, c.dropout, c.activation, c.norm_first, c.eps)
            for _ in range(c.n_encoder_layers)
        )
        self.norm = LayerNorm(c.d_model, c.eps) if c.norm_first else None

    def forward(self, src: Tensor, mask: Tensor | None = None) -> Tensor:
        """src (B, S) -> memory (B, S, d_model); `mask` broadcasts to (B, h, S, S), True = may attend."""
        _check_ids(src, "src", self.config.src_vocab_size, self.config.max_len)
        x = self.embed(src)  # (B, S, d_model)
        for block in self.blocks:
            x = block(x, mask)  # (B, S, d_model)
        return x if self.norm is None else self.norm(x)


class Decoder(nn.Module):
    """Target ids + memory -> hidden states: embedding and positions, DecoderBlocks, a final LayerNorm if pre-norm."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.config = c = config
        self.embed = _Embedding(c.tgt_vocab_size, c)
        self.blocks = nn.ModuleList(
            DecoderBlock(c.d_model, c.n_heads, c.d_ff, c.dropout, c.activation, c.norm_first, c.eps)
            for _ in range(c.n_decoder_layers)
        )
        self.norm = LayerNorm(c.d_model, c.eps) if c.norm_first else None

    def forward(self, tgt_in: Tensor, memory: Tensor, self_mask: Tensor | None = None,
                memory_mask: Tensor | None = None) -> Tensor:
        """tgt_in (B, T), memory (B, S, d_model) -> (B, T, d_model).

        `self_mask` broadcasts to (B, h, T, T) (pass the causal mask: it is not added here) and `memory_mask`
        to (B, h, T, S); True = may attend.
        """
        c = self.config
        _check_ids(tgt_in, "tgt_in", c.tgt_vocab_size, c.max_len)
        require_tensor(memory, "memory", floating=True)
        if memory.dim() != 3 or memory.size(0) != tgt_in.size(0) or memory.size(2) != c.d_model:
            raise ValueError(f"memory must have shape (batch={tgt_in.size(0)}, S, d_model={c.d_model}), "
                             f"got {tuple(memory.shape)}")
        x = self.embed(tgt_in)  # (B, T, d_model)
        for block in self.blocks:
            x = block(x, memory, self_mask, memory_mask)  # (B, T, d_model)
        return x if self.norm is None else self.norm(x)


class Transformer(nn.Module):
    """Encoder, decoder and a Linear from d_model to target-vocabulary logits (softmax them for probabilities)."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        if not isinstance(config, TransformerConfig):
            raise TypeError(f"config must be a TransformerConfig, got {type(config).__name__}")
        self.config = c = config
        self.encoder = Encoder(c)
        self.decoder = Decoder(c)
        self.lm_head = nn.Linear(c.d_model, c.tgt_vocab_size)
        self._init_weights()
        if c.tie_weights:
            self.lm_head.weight = self.decoder.embed.tok.weight  # one (tgt_vocab_size, d_model) matrix

    def _init_weights(self) -> None:
        """Xavier-uniform matrices and zero biases in every Linear, as nn.Transformer and the Annotated
        Transformer do; embeddings keep their N(0, 1/d_model) init."""
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    # masks ---------------------------------------------------------------------------------------------
    def make_src_mask(self, src: Tensor) -> Tensor | None:
        """(B, S) ids -> (B, 1, 1, S) boolean mask, True at real tokens (None when config.pad_id is None)."""
        require_tensor(src, "src")
        if self.config.pad_id is None:
            return None
        return (src != self.config.pad_id)[:, None, None, :]  # (B, 1, 1, S)

    def make_tgt_mask(self, tgt_in: Tensor) -> Tensor:
        """(B, T) ids -> (B, 1, T, T) boolean mask: query t may attend to non-padding keys 0..t."""
        require_tensor(tgt_in, "tgt_in")
        if tgt_in.dim() != 2:
            raise ValueError(f"tgt_in must have shape (batch, T), got {tuple(tgt_in.shape)}")
        causal = causal_mask(tgt_in.size(1), device=tgt_in.device)  # (T, T), True on and below the diagonal
        if self.config.pad_id is None:
            return causal[None, None]  # (1, 1, T, T)
        return causal & (tgt_in != self.config.pad_id)[:, None, None, :]  # (T, T) & (B, 1, 1, T) -> (B, 1, T, T)

    # the three steps -------------------------------------------------------------------------------------
    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:
        """src (B, S) -> memory (B, S, d_model); `src_mask` defaults to `make_src_mask(src)`."""
        _check_ids(src, "src", self.config.src_vocab_size, self.config.max_len)
        if src_mask is None:
            src_mask = self.make_src_mask(src)
        return self.encoder(src, src_mask)

    def decode(self, tgt_in: Tensor, memory: Tensor, src_mask: Tensor | None) -> Tensor:
        """tgt_in (B, T), memory (B, S, d_model) -> logits (B, T, tgt_vocab_size).

        The self-attention mask (causal + target padding) is built here; `src_mask` (B, 1, 1, S), from
        `make_src_mask(src)`, keeps the cross-attention off the source padding (None: attend to all of it).
        """
        _check_ids(tgt_in, "tgt_in", self.config.tgt_vocab_size, self.config.max_len)
        hidden = self.decoder(tgt_in, memory, self.make_tgt_mask(tgt_in), src_mask)  # (B, T, d_model)
        return self.lm_head(hidden)  # (B, T, tgt_vocab_size)

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """src (B, S), tgt_in (B, T) -> logits (B, T, tgt_vocab_size); position t sees tgt_in[:, :t+1] only."""
        _check_ids(src, "src", self.config.src_vocab_size, self.config.max_len)
        _check_ids(tgt_in, "tgt_in", self.config.tgt_vocab_size, self.config.max_len)
        if src.size(0) != tgt_in.size(0):
            raise ValueError(f"src and tgt_in must have the same batch size, got {src.size(0)} and {tgt_in.size(0)}")
        src_mask = self.make_src_mask(src)  # (B, 1, 1, S)
        return self.decode(tgt_in, self.encode(src, src_mask), src_mask)  # (B, T, tgt_vocab_size)

    @torch.no_grad()
    def cross_attention_weights(self, src: Tensor, tgt_in: Tensor, layer: int = -1) -> Tensor:
        """The cross-attention weights of decoder block `layer` (default: the last), per head: (B, h, T, S).

        Row t says how much target position t takes from each source position (rows sum to 1, padding gets 0).
        Runs in eval mode (no dropout) and restores the model's mode afterwards.
        """
        blocks = self.decoder.blocks
        if not len(blocks):
            raise ValueError("the model has no decoder layer (n_decoder_layers=0)")
        require_int(layer, "layer")
        if not -len(blocks) <= layer < len(blocks):
            raise ValueError(f"layer={layer} is out of range for {len(blocks)} decoder layers")
        attn = blocks[layer].cross_attn
        captured = []

        def ask_for_weights(module, args, kwargs):  # the block calls cross_attn(x, memory, memory, attn_mask=...)
            return args, {**kwargs, "need_weights": True, "average_attn_weights": False}

        def keep_weights(module, args, output):
            captured.append(output[1])  # (B, h, T, S)

        was_training = self.training
        hooks = [attn.register_forward_pre_hook(ask_for_weights, with_kwargs=True),
                 attn.register_forward_hook(keep_weights)]
        try:
            self.eval()
            self(src, tgt_in)
        finally:
            for h in hooks:
                h.remove()
            self.train(was_training)
        return captured[0]  # (B, h, T, S)


EncoderDecoder = Transformer  # the name used in many tutorials


@torch.no_grad()
def greedy_decode(model: Transformer, src: Tensor, max_len: int, bos_id: int, eos_id: int) -> Tensor:
    """Generate with argmax at every step: (B, S) source ids -> (B, L) LongTensor with L <= max_len.

    Each row starts with `bos_id` (counted in `max_len`), then one predicted token per step. Rows that have
    produced `eos_id` are filled with `config.pad_id` (with `eos_id` when pad_id is None) while the others go
    on; decoding stops once every row has produced EOS, or at `max_len` tokens. The source is encoded once;
    each step runs the decoder on everything generated so far. Runs in eval mode and restores the mode after.
    """
    if not isinstance(model, Transformer):
        raise TypeError(f"model must be an attnbook Transformer, got {type(model).__name__}")
    c = model.config
    _check_ids(src, "src", c.src_vocab_size, c.max_len)
    require_int(max_len, "max_len", minimum=1)
    if max_len > c.max_len:
        raise ValueError(f"max_len={max_len} is more than the model's max_len={c.max_len}")
    for name, value in (("bos_id", bos_id), ("eos_id", eos_id)):
        require_int(value, name, minimum=0)
        if value >= c.tgt_vocab_size:
            raise ValueError(f"{name}={value} is not a target token id (< {c.tgt_vocab_size})")
    fill = eos_id if c.pad_id is None else c.pad_id
    was_training = model.training
    model.eval()
    try:
        src_mask = model.make_src_mask(src)  # (B, 1, 1, S)
        memory = model.encode(src, src_mask)  # (B, S, d_model), computed once
        ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1)
        done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)  # (B,)
        for _ in range(max_len - 1):
            logits = model.decode(ys, memory, src_mask)[:, -1]  # (B, T, V) -> (B, V): the newest position
            next_id = logits.argmax(dim=-1).masked_fill(done, fill)  # (B,)
            ys = torch.cat([ys, next_id[:, None]], dim=1)  # (B, T + 1)
            done = done | (next_id == eos_id)
            if done.all():
                break
    finally:
        model.train(was_training)
    return ys
