"""Parameter counts by formula (chapter 4), and the count of a module's own parameters.

Every count is a sum of weight matrices and bias vectors, piece by piece, so that each term can be read off:
a Linear layer from `a` to `b` features holds `a*b` weights and `b` biases; a LayerNorm holds `d` scales
(gamma) and `d` shifts (beta). The number of heads never changes a count: the heads are slices of the same
`(d_model, d_model)` projections. Grouped-query attention does: the key and value projections then produce
only `n_kv_heads * d_head` features.
"""
from __future__ import annotations

from torch import nn

from .._validate import require_int

__all__ = [
    "count_parameters",
    "mha_param_count",
    "ffn_param_count",
    "layer_norm_param_count",
    "encoder_block_param_count",
    "encoder_param_count",
    "bert_param_count",
    "gpt_param_count",
]


def _require_bool(x, name: str) -> bool:
    if not isinstance(x, bool):
        raise TypeError(f"{name} must be a bool, got {type(x).__name__}")
    return x


def _require_heads(d_model: int, n_heads: int) -> None:
    require_int(d_model, "d_model", minimum=1)
    require_int(n_heads, "n_heads", minimum=1)
    if d_model % n_heads:
        raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")


def _linear(n_in: int, n_out: int, bias: bool = True) -> int:
    """Weights and biases of a Linear layer from n_in to n_out features."""
    return n_in * n_out + (n_out if bias else 0)


def count_parameters(module: nn.Module, trainable_only: bool = False) -> int:
    """Number of scalars in `module.parameters()` (tied weights count once), only trainable ones if asked."""
    if not isinstance(module, nn.Module):
        raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    _require_bool(trainable_only, "trainable_only")
    return sum(p.numel() for p in module.parameters() if p.requires_grad or not trainable_only)


def mha_param_count(d_model: int, n_heads: int, n_kv_heads: int | None = None, bias: bool = True) -> int:
    """Multi-head attention: W_q and W_o (d_model -> d_model), W_k and W_v (d_model -> n_kv_heads * d_head)."""
    _require_heads(d_model, n_heads)
    n_kv_heads = n_heads if n_kv_heads is None else require_int(n_kv_heads, "n_kv_heads", minimum=1)
    if n_heads % n_kv_heads:
        raise ValueError(f"n_heads={n_heads} is not divisible by n_kv_heads={n_kv_heads}")
    _require_bool(bias, "bias")
    kv_dim = n_kv_heads * (d_model // n_heads)  # features of the keys (and of the values)
    return 2 * _linear(d_model, d_model, bias) + 2 * _linear(d_model, kv_dim, bias)


def ffn_param_count(d_model: int, d_ff: int, bias: bool = True) -> int:
    """Position-wise feed-forward network: d_model -> d_ff -> d_model."""
    require_int(d_model, "d_model", minimum=1)
    require_int(d_ff, "d_ff", minimum=1)
    _require_bool(bias, "bias")
    return _linear(d_model, d_ff, bias) + _linear(d_ff, d_model, bias)


def layer_norm_param_count(d_model: int) -> int:
    """LayerNorm over d_model features: a scale gamma and a shift beta per feature."""
    return 2 * require_int(d_model, "d_model", minimum=1)


def encoder_block_param_count(d_model: int, n_heads: int, d_ff: int) -> int:
    """One encoder block (self-attention, feed-forward, two LayerNorms), biases everywhere."""
    _require_heads(d_model, n_heads)
    return mha_param_count(d_model, n_heads) + ffn_param_count(d_model, d_ff) + 2 * layer_norm_param_count(d_model)


def encoder_param_count(vocab_size: int, d_model: int, n_heads: int, d_ff: int, n_layers: int) -> int:
    """Chapter 4's encoder: a token embedding and n_layers blocks; sinusoidal positions (no weights), no pooler."""
    require_int(vocab_size, "vocab_size", minimum=1)
    require_int(n_layers, "n_layers", minimum=1)
    return vocab_size * d_model + n_layers * encoder_block_param_count(d_model, n_heads, d_ff)


def bert_param_count(vocab_size: int = 30522, max_len: int = 512, type_vocab_size: int = 2, d_model: int = 768,
                     n_layers: int = 12, d_ff: int = 3072, pooler: bool = True) -> int:
    """BERT (Hugging Face's BertModel): token, learned position and token-type embeddings, their LayerNorm,
    n_layers blocks and an optional pooler (d_model -> d_model)."""
    for name, value in (("vocab_size", vocab_size), ("max_len", max_len), ("type_vocab_size", type_vocab_size),
                        ("n_layers", n_layers)):
        require_int(value, name, minimum=1)
    _require_bool(pooler, "pooler")
    embeddings = (vocab_size + max_len + type_vocab_size) * d_model + layer_norm_param_count(d_model)
    block = encoder_block_param_count(d_model, 1, d_ff)  # the number of heads does not change the count
    return embeddings + n_layers * block + (_linear(d_model, d_model) if pooler else 0)


def gpt_param_count(vocab_size: int = 50257, block_size: int = 1024, d_model: int = 768, n_layers: int = 12,
                    tied: bool = True) -> int:
    """GPT-2-style decoder: token and learned position embeddings, n_layers pre-norm blocks with d_ff = 4 d_model,
    a final LayerNorm, and an output head that shares the token embedding (tied) or has its own weights."""
    require_int(vocab_size, "vocab_size", minimum=1)
    require_int(block_size, "block_size", minimum=1)
    require_int(n_layers, "n_layers", minimum=1)
    _require_bool(tied, "tied")
    embeddings = (vocab_size + block_size) * d_model
    block = encoder_block_param_count(d_model, 1, 4 * d_model)  # the same pieces as an encoder block
    head = 0 if tied else vocab_size * d_model  # GPT-2's head has no bias
    return embeddings + n_layers * block + layer_norm_param_count(d_model) + head
