"""The cost model of attention and of a Transformer layer, by formula: FLOPs of matrix products and bytes of tensors.

Nothing here is measured: every number follows from the shapes (and a dtype), so it is exact and the same on every
machine. `matmul_flops` counts a batch of matrix products given as (batch, m, k, n) and `attention_matmul_shapes`
gives attention's two, QK^T and PV, in that form; `attention_flops` counts the attention core (QK^T and PV, with or
without a causal mask), `attention_backward_flops` its backward (five products), and `layer_flops` a whole
Transformer layer (the attention core, the Q, K, V and output projections, and the feed-forward network);
`score_matrix_bytes` and `kv_cache_bytes` are the sizes of the score matrix that naive attention materialises and of
a KV cache. `timing` measures; its FLOP rates divide these counts
by measured times (and re-exports every name here, as `attnbook.timing.attention_flops` and so on).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ._validate import require_int

__all__ = [
    "check_matmul_shape",
    "matmul_flops",
    "attention_matmul_shapes",
    "attention_flops",
    "attention_backward_flops",
    "LayerFlops",
    "layer_flops",
    "score_matrix_bytes",
    "kv_cache_bytes",
]


def check_matmul_shape(shape, name: str) -> tuple[int, int, int, int]:
    """`shape` as a (batch, m, k, n) tuple of positive ints, else TypeError/ValueError naming `name`."""
    if not isinstance(shape, (tuple, list)) or len(shape) != 4:
        raise ValueError(f"{name} must be a (batch, m, k, n) tuple of 4 positive ints, got {shape!r}")
    for part, value in zip(("batch", "m", "k", "n"), shape):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must hold ints, got {part}={value!r} in {shape!r}")
        if value < 1:
            raise ValueError(f"{name} must hold positive ints, got {part}={value} in {shape!r}")
    return tuple(shape)


def matmul_flops(shape) -> int:
    """FLOPs of a batch of matrix products, `shape` = (batch, m, k, n): 2 * batch * m * k * n."""
    b, m, k, n = check_matmul_shape(shape, "shape")
    return 2 * b * m * k * n


def attention_matmul_shapes(batch: int, heads: int, q_len: int, k_len: int, d_head: int) -> list[tuple]:
    """The two matrix products of attention, as (batch, m, k, n) shapes for `matmul_throughput`:
    QK^T, (q_len, d_head) @ (d_head, k_len), and PV, (q_len, k_len) @ (k_len, d_head), in each of batch * heads.

    Their FLOPs add up to `attention_flops(batch, heads, q_len, k_len, d_head)`. They are timed beside the square
    products so that the reference is the machine's best matrix-product rate at this run's sizes: that best,
    compute-bound rate bounds what attention can reach. These two are not the bound themselves: unfused, they
    read or write a (q_len, k_len) matrix and can be memory-bound, which a fused kernel beats.
    """
    for name, value in (("batch", batch), ("heads", heads), ("q_len", q_len), ("k_len", k_len), ("d_head", d_head)):
        require_int(value, name, minimum=1)
    return [(batch * heads, q_len, d_head, k_len), (batch * heads, q_len, k_len, d_head)]


def attention_flops(batch: int, heads: int, q_len: int, k_len: int, d_head: int, causal: bool = False) -> int:
    """Floating-point operations of attention's two matrix products: 2 flops per multiply-add, QK^T and PV.

    Without a mask that is 4 * batch * heads * q_len * k_len * d_head. With `causal=True` only the (query, key)
    pairs the mask allows are counted, top-left aligned like SDPA's `is_causal`: query i sees keys
    0..min(i, k_len - 1). This is the useful work; a kernel that does not skip masked blocks does more.
    Softmax, scaling and masking (O(L * S), not O(L * S * d)) are not counted, as is customary.
    """
    for name, value in (("batch", batch), ("heads", heads), ("q_len", q_len), ("k_len", k_len), ("d_head", d_head)):
        require_int(value, name, minimum=1)
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, got {type(causal).__name__}")
    if not causal:
        pairs = q_len * k_len
    elif q_len <= k_len:
        pairs = q_len * (q_len + 1) // 2  # row i sees i + 1 keys
    else:
        pairs = k_len * (k_len + 1) // 2 + (q_len - k_len) * k_len  # rows k_len.. see every key
    return 4 * batch * heads * pairs * d_head


def attention_backward_flops(batch: int, heads: int, q_len: int, k_len: int, d_head: int,
                             causal: bool = False) -> int:
    """FLOPs of FlashAttention's backward: five matrix products per (query, key) pair where the forward has two.

    The scores recomputed, QK^T; then dV = P^T dO, dP = dO V^T, dQ = dS K and dK = dS^T Q: 2.5 times
    `attention_flops`, the convention of FlashAttention-2 (Dao 2023, arXiv:2307.08691), so that a forward and
    backward together count 3.5 times the forward. (Autograd of naive attention keeps P and skips the recompute:
    four products, twice the forward.) Arguments as `attention_flops`.
    """
    return 5 * attention_flops(batch, heads, q_len, k_len, d_head, causal=causal) // 2


@dataclass(frozen=True)
class LayerFlops:
    """FLOPs of one Transformer layer's forward pass, by part (2 FLOPs per multiply-add, matrix products only)."""

    attention_core: int  # QK^T and PV: what `attention_flops` counts
    projections: int  # the Q, K, V and output projections
    ffn: int  # the feed-forward network

    @property
    def total(self) -> int:
        return self.attention_core + self.projections + self.ffn

    @property
    def attention_share(self) -> float:
        """The attention core's fraction of the layer's FLOPs, between 0 and 1."""
        return self.attention_core / self.total


def layer_flops(seq_len: int, d_model: int, n_heads: int, d_ff: int, batch: int = 1, causal: bool = False,
                gated: bool = False, n_kv_heads: int | None = None) -> LayerFlops:
    """FLOPs of one Transformer layer over `batch` sequences of `seq_len` tokens, split into its three parts.

    - attention core: `attention_flops(batch, n_heads, seq_len, seq_len, d_model // n_heads, causal)`,
      4 * N^2 * d_model per sequence without a mask;
    - projections: Q and the output take 2 * N * d_model^2 each, K and V 2 * N * d_model * d_kv each, where
      d_kv = n_kv_heads * d_head (d_model unless grouped-query attention has fewer key/value heads);
    - FFN: 2 * N * d_model * d_ff per matrix, 2 matrices (up, down), or 3 with `gated=True` (SwiGLU's gate,
      as in Llama).
    Softmax, biases, activations and norms (O(N * d), not O(N * d^2)) are not counted, as is customary.
    The projections and the FFN grow like N, the attention core like N^2 (like N^2 / 2 with `causal=True`).
    """
    for name, value in (("seq_len", seq_len), ("d_model", d_model), ("n_heads", n_heads), ("d_ff", d_ff),
                        ("batch", batch)):
        require_int(value, name, minimum=1)
    if d_model % n_heads:
        raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
    n_kv_heads = n_heads if n_kv_heads is None else require_int(n_kv_heads, "n_kv_heads", minimum=1)
    if n_heads % n_kv_heads:
        raise ValueError(f"n_heads={n_heads} is not divisible by n_kv_heads={n_kv_heads}")
    for name, value in (("causal", causal), ("gated", gated)):
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
    d_head = d_model // n_heads
    tokens = batch * seq_len
    d_kv = n_kv_heads * d_head
    projections = 2 * tokens * d_model * (2 * d_model + 2 * d_kv)  # Q and O: d_model -> d_model; K and V: -> d_kv
    ffn = (3 if gated else 2) * 2 * tokens * d_model * d_ff
    core = attention_flops(batch, n_heads, seq_len, seq_len, d_head, causal=causal)
    return LayerFlops(attention_core=core, projections=projections, ffn=ffn)


def _element_size(dtype, name: str = "dtype") -> int:
    """Bytes per element of a torch dtype."""
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"{name} must be a torch.dtype, got {dtype!r}")
    return torch.empty((), dtype=dtype).element_size()


def score_matrix_bytes(batch: int, heads: int, q_len: int, k_len: int, dtype: torch.dtype = torch.float32) -> int:
    """Bytes of the materialised (batch, heads, q_len, k_len) score matrix that naive attention allocates."""
    for name, value in (("batch", batch), ("heads", heads), ("q_len", q_len), ("k_len", k_len)):
        require_int(value, name, minimum=1)
    return batch * heads * q_len * k_len * _element_size(dtype)


def kv_cache_bytes(
    n_layers: int, n_kv_heads: int, d_head: int, seq_len: int, batch: int = 1, dtype: torch.dtype = torch.float16
) -> int:
    """Bytes of a KV cache: 2 (K and V) * layers * kv_heads * d_head * seq_len * batch * bytes per element."""
    for name, value in (("n_layers", n_layers), ("n_kv_heads", n_kv_heads), ("d_head", d_head), ("batch", batch)):
        require_int(value, name, minimum=1)
    require_int(seq_len, "seq_len", minimum=0)
    return 2 * n_layers * n_kv_heads * d_head * seq_len * batch * _element_size(dtype)
