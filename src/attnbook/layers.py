"""The Transformer's building blocks: LayerNorm from scratch, the feed-forward network, encoder and decoder blocks.

Blocks are post-norm by default (the original paper and PyTorch: x = norm(x + sublayer(x))) and pre-norm with
`norm_first=True` (GPT-2 and most modern models: x = x + sublayer(norm(x))). Each has `from_torch` to copy an
`nn.TransformerEncoderLayer` / `nn.TransformerDecoderLayer`, so the two agree in eval mode.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._validate import require_int, require_tensor
from .multihead import KVCache, MultiHeadAttention

__all__ = ["LayerNorm", "FeedForward", "EncoderBlock", "DecoderBlock", "ACTIVATIONS"]

ACTIVATIONS = ("relu", "gelu", "gelu_tanh")


def _check_float(x, name: str, low: float, high: float, *, high_inclusive: bool = False) -> float:
    """Return `x` as a float if it is a number in [low, high) (or [low, high])."""
    ok = not isinstance(x, bool) and isinstance(x, (int, float))
    ok = ok and low <= x and (x <= high if high_inclusive else x < high)
    if not ok:
        bracket = "]" if high_inclusive else ")"
        raise ValueError(f"{name} must be a float in [{low}, {high}{bracket}, got {x!r}")
    return float(x)


def _check_bool(x, name: str) -> bool:
    if not isinstance(x, bool):
        raise TypeError(f"{name} must be a bool, got {type(x).__name__}")
    return x


class LayerNorm(nn.Module):
    """Normalise each vector over its last dimension to mean 0 and variance 1, then scale and shift."""

    def __init__(self, d_model: int, eps: float = 1e-5, bias: bool = True):
        super().__init__()
        require_int(d_model, "d_model", minimum=1)
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps > 0:
            raise ValueError(f"eps must be a positive float, got {eps!r}")
        self.d_model, self.eps = d_model, float(eps)
        self.weight = nn.Parameter(torch.ones(d_model))  # gamma
        self.bias = nn.Parameter(torch.zeros(d_model)) if _check_bool(bias, "bias") else None  # beta

    def forward(self, x: Tensor) -> Tensor:
        """(..., d_model) -> (..., d_model)."""
        require_tensor(x, "x", min_dim=1, floating=True)
        if x.size(-1) != self.d_model:
            raise ValueError(f"x must have last dimension d_model={self.d_model}, got shape {tuple(x.shape)}")
        mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
        var = (x - mean).pow(2).mean(dim=-1, keepdim=True)  # (..., 1), biased (divide by d) like nn.LayerNorm
        x_hat = (x - mean) / torch.sqrt(var + self.eps)  # (..., d_model)
        out = x_hat * self.weight
        return out if self.bias is None else out + self.bias

    def extra_repr(self) -> str:
        return f"{self.d_model}, eps={self.eps}, bias={self.bias is not None}"


class FeedForward(nn.Module):
    """Position-wise feed-forward network: fc2(dropout(activation(fc1(x)))), d_model -> d_ff -> d_model."""

    def __init__(self, d_model: int, d_ff: int, activation: str = "relu", dropout: float = 0.0, bias: bool = True):
        super().__init__()
        require_int(d_model, "d_model", minimum=1)
        require_int(d_ff, "d_ff", minimum=1)
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
        self.activation = activation
        self.fc1 = nn.Linear(d_model, d_ff, bias=_check_bool(bias, "bias"))
        self.fc2 = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(_check_float(dropout, "dropout", 0.0, 1.0))

    def forward(self, x: Tensor) -> Tensor:
        """(..., d_model) -> (..., d_model)."""
        h = self.fc1(x)  # (..., d_ff)
        if self.activation == "relu":
            h = F.relu(h)
        else:
            h = F.gelu(h, approximate="tanh" if self.activation == "gelu_tanh" else "none")
        return self.fc2(self.dropout(h))  # (..., d_model)

    def extra_repr(self) -> str:
        return f"activation={self.activation!r}"


class EncoderBlock(nn.Module):
    """Self-attention and feed-forward, each wrapped in a residual connection and a LayerNorm."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0, activation: str = "relu",
                 norm_first: bool = False, eps: float = 1e-5, n_kv_heads: int | None = None, bias: bool = True):
        super().__init__()
        self.norm_first = _check_bool(norm_first, "norm_first")
        self.self_attn = MultiHeadAttention(d_model, n_heads, n_kv_heads, dropout, bias)
        self.ffn = FeedForward(d_model, d_ff, activation, dropout, bias)
        self.norm1 = LayerNorm(d_model, eps, bias)
        self.norm2 = LayerNorm(d_model, eps, bias)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor | None = None, is_causal: bool = False,
                cache: KVCache | None = None) -> Tensor:
        """(B, n, d_model) -> (B, n, d_model); `mask` broadcasts to (B, h, n, n), True = may attend."""
        if self.norm_first:
            x = x + self._sa(self.norm1(x), mask, is_causal, cache)
            return x + self.dropout2(self.ffn(self.norm2(x)))
        x = self.norm1(x + self._sa(x, mask, is_causal, cache))
        return self.norm2(x + self.dropout2(self.ffn(x)))

    def _sa(self, x, mask, is_causal, cache) -> Tensor:
        return self.dropout1(self.self_attn(x, x, x, attn_mask=mask, is_causal=is_causal, cache=cache)[0])

    @classmethod
    def from_torch(cls, layer: nn.TransformerEncoderLayer) -> "EncoderBlock":
        """An EncoderBlock with the weights, activation and norm placement of an nn.TransformerEncoderLayer."""
        if not isinstance(layer, nn.TransformerEncoderLayer):
            raise TypeError(f"layer must be an nn.TransformerEncoderLayer, got {type(layer).__name__}")
        new = cls(**_torch_layer_config(layer))
        _copy_common(new, layer)
        return new.train(layer.training)


class DecoderBlock(nn.Module):
    """Masked self-attention, cross-attention over the encoder's memory, feed-forward; each residual + norm."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0, activation: str = "relu",
                 norm_first: bool = False, eps: float = 1e-5, n_kv_heads: int | None = None, bias: bool = True):
        super().__init__()
        self.norm_first = _check_bool(norm_first, "norm_first")
        self.self_attn = MultiHeadAttention(d_model, n_heads, n_kv_heads, dropout, bias)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, n_kv_heads, dropout, bias)
        self.ffn = FeedForward(d_model, d_ff, activation, dropout, bias)
        self.norm1 = LayerNorm(d_model, eps, bias)
        self.norm2 = LayerNorm(d_model, eps, bias)
        self.norm3 = LayerNorm(d_model, eps, bias)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    def forward(self, x: Tensor, memory: Tensor, self_mask: Tensor | None = None, memory_mask: Tensor | None = None,
                is_causal: bool = False, cache: KVCache | None = None) -> Tensor:
        """x (B, L, d_model), memory (B, S, d_model) -> (B, L, d_model).

        `self_mask` broadcasts to (B, h, L, L) and `memory_mask` to (B, h, L, S); True = may attend.
        `is_causal` applies to the self-attention; `cache` holds the self-attention's keys and values.
        """
        if self.norm_first:
            x = x + self._sa(self.norm1(x), self_mask, is_causal, cache)
            x = x + self._ca(self.norm2(x), memory, memory_mask)
            return x + self.dropout3(self.ffn(self.norm3(x)))
        x = self.norm1(x + self._sa(x, self_mask, is_causal, cache))
        x = self.norm2(x + self._ca(x, memory, memory_mask))
        return self.norm3(x + self.dropout3(self.ffn(x)))

    def _sa(self, x, mask, is_causal, cache) -> Tensor:
        return self.dropout1(self.self_attn(x, x, x, attn_mask=mask, is_causal=is_causal, cache=cache)[0])

    def _ca(self, x, memory, mask) -> Tensor:
        return self.dropout2(self.cross_attn(x, memory, memory, attn_mask=mask)[0])

    @classmethod
    def from_torch(cls, layer: nn.TransformerDecoderLayer) -> "DecoderBlock":
        """A DecoderBlock with the weights, activation and norm placement of an nn.TransformerDecoderLayer."""
        if not isinstance(layer, nn.TransformerDecoderLayer):
            raise TypeError(f"layer must be an nn.TransformerDecoderLayer, got {type(layer).__name__}")
        new = cls(**_torch_layer_config(layer))
        _copy_common(new, layer)
        new.cross_attn = MultiHeadAttention.from_torch(layer.multihead_attn)
        _copy_norm(new.norm3, layer.norm3)
        return new.train(layer.training)


def _torch_activation(act) -> str:
    """Our name for the activation of a PyTorch Transformer layer (a function or a module)."""
    if act is F.relu or isinstance(act, nn.ReLU):
        return "relu"
    if act is F.gelu or (isinstance(act, nn.GELU) and act.approximate == "none"):
        return "gelu"
    if isinstance(act, nn.GELU) and act.approximate == "tanh":
        return "gelu_tanh"
    raise ValueError(f"layer.activation must be ReLU or GELU to be copied, got {act!r}")


def _torch_layer_config(layer) -> dict:
    """The constructor arguments of our block that match a PyTorch encoder or decoder layer."""
    return dict(
        d_model=layer.self_attn.embed_dim,
        n_heads=layer.self_attn.num_heads,
        d_ff=layer.linear1.out_features,
        dropout=layer.dropout.p,
        activation=_torch_activation(layer.activation),
        norm_first=layer.norm_first,
        eps=layer.norm1.eps,
        bias=layer.linear1.bias is not None,
    )


def _copy_norm(ours: LayerNorm, theirs: nn.LayerNorm) -> None:
    """Copy an nn.LayerNorm's affine parameters (ones and zeros when it has none)."""
    with torch.no_grad():
        ours.weight.copy_(theirs.weight if theirs.weight is not None else torch.ones_like(ours.weight))
        if ours.bias is not None:
            ours.bias.copy_(theirs.bias if theirs.bias is not None else torch.zeros_like(ours.bias))


def _copy_common(new, layer) -> None:
    """Copy self-attention, feed-forward, norm1, norm2 (and move `new` to the layer's dtype and device)."""
    w = layer.linear1.weight
    new.to(device=w.device, dtype=w.dtype)
    new.self_attn = MultiHeadAttention.from_torch(layer.self_attn)
    with torch.no_grad():
        for ours, theirs in ((new.ffn.fc1, layer.linear1), (new.ffn.fc2, layer.linear2)):
            ours.weight.copy_(theirs.weight)
            if ours.bias is not None:
                ours.bias.copy_(theirs.bias)
    _copy_norm(new.norm1, layer.norm1)
    _copy_norm(new.norm2, layer.norm2)
