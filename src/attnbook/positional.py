"""Position information for attention: sinusoidal tables, learned embeddings and rotary embeddings (RoPE).

Two layouts of the sinusoidal table appear in the wild. The original paper (and this module) interleaves:
column 2i holds sin(pos * omega_i) and column 2i+1 holds cos(pos * omega_i), with omega_i = base^(-2i/d).
Other codebases concatenate halves: all the sines, then all the cosines. With the same frequencies the two are
a permutation of the columns of each other (`sinusoidal_permutation`). Beware that tensor2tensor and fairseq
also space their frequencies slightly differently (exponent i/(d/2 - 1) instead of 2i/d), which no
permutation undoes.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ._validate import require_broadcastable, require_int, require_tensor

__all__ = [
    "sinusoidal_table",
    "sinusoidal_permutation",
    "interleaved_to_halves",
    "halves_to_interleaved",
    "shift_matrix",
    "shift_operator",
    "SinusoidalPositionalEncoding",
    "LearnedPositionalEmbedding",
    "rotate_half",
    "apply_rope",
]


def _require_even(d: int, name: str) -> int:
    """Return `d` if it is a positive even int; sin/cos pairs need an even dimension."""
    require_int(d, name, minimum=2)
    if d % 2:
        raise ValueError(f"{name}={d} must be even: positions are encoded in (sin, cos) pairs")
    return d


def _require_positive_float(x, name: str) -> float:
    """Return `x` as a float if it is a positive finite real number (not a bool)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise TypeError(f"{name} must be a float, got {type(x).__name__}")
    if not (math.isfinite(x) and x > 0):
        raise ValueError(f"{name} must be a positive finite number, got {x}")
    return float(x)


def _require_float_dtype(dtype) -> torch.dtype:
    """Return `dtype` if it is a floating-point torch dtype."""
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point torch.dtype, got {dtype!r}")
    return dtype


def _frequencies(d_model: int, base: float) -> Tensor:
    """omega_i = base^(-2i/d) for i = 0..d/2-1, in float64: the angular frequency of pair i."""
    return base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (d/2,)


# ----------------------------------------------------------------------------------------------------------
# Sinusoidal table
# ----------------------------------------------------------------------------------------------------------


def sinusoidal_table(max_len: int, d_model: int, base: float = 10000.0, *, dtype=torch.float32) -> Tensor:
    """(max_len, d_model) table with PE[pos, 2i] = sin(pos / base^(2i/d)) and PE[pos, 2i+1] = cos(same).

    Computed in float64 and then cast to `dtype`.
    """
    require_int(max_len, "max_len", minimum=1)
    _require_even(d_model, "d_model")
    base = _require_positive_float(base, "base")
    _require_float_dtype(dtype)
    pos = torch.arange(max_len, dtype=torch.float64)  # (max_len,)
    angles = pos[:, None] * _frequencies(d_model, base)  # (max_len, d/2)
    table = torch.stack((angles.sin(), angles.cos()), dim=-1)  # (max_len, d/2, 2): sin, cos side by side
    return table.reshape(max_len, d_model).to(dtype)  # (max_len, d): columns sin0, cos0, sin1, cos1, ...


def sinusoidal_permutation(d_model: int) -> Tensor:
    """Column indices `perm` with halves_table == interleaved_table[:, perm]: evens (sines), then odds (cosines)."""
    _require_even(d_model, "d_model")
    return torch.cat((torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)))  # (d,)


def interleaved_to_halves(pe: Tensor) -> Tensor:
    """Reorder the last dim from (sin0, cos0, sin1, cos1, ...) to (sin0, sin1, ..., cos0, cos1, ...)."""
    require_tensor(pe, "pe", min_dim=1)
    _require_even(pe.size(-1), "pe.size(-1)")
    return pe[..., sinusoidal_permutation(pe.size(-1)).to(pe.device)]


def halves_to_interleaved(pe: Tensor) -> Tensor:
    """Reorder the last dim from (sin0, sin1, ..., cos0, cos1, ...) to (sin0, cos0, sin1, cos1, ...)."""
    require_tensor(pe, "pe", min_dim=1)
    _require_even(pe.size(-1), "pe.size(-1)")
    inverse = torch.argsort(sinusoidal_permutation(pe.size(-1)))  # (d,): undoes the permutation
    return pe[..., inverse.to(pe.device)]


# ----------------------------------------------------------------------------------------------------------
# Relative shifts are rotations
# ----------------------------------------------------------------------------------------------------------


def shift_matrix(k, omega, *, dtype=torch.float32) -> Tensor:
    """(2, 2) rotation R with R @ [sin(omega p), cos(omega p)] = [sin(omega (p+k)), cos(omega (p+k))] for every p.

    R = [[cos(omega k), sin(omega k)], [-sin(omega k), cos(omega k)]]: it depends on k, never on p.
    """
    for name, value in (("k", k), ("omega", omega)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name} must be a number, got {type(value).__name__}")
        if not math.isfinite(value):
            raise ValueError(f"{name} must be finite, got {value}")
    _require_float_dtype(dtype)
    c, s = math.cos(omega * k), math.sin(omega * k)
    return torch.tensor([[c, s], [-s, c]], dtype=dtype)


def shift_operator(k, d_model: int, base: float = 10000.0, *, dtype=torch.float32) -> Tensor:
    """(d_model, d_model) block-diagonal matrix R_k with PE(pos + k) = R_k @ PE(pos) for column vectors.

    For the rows of a table this reads `table[pos + k] == table[pos] @ R_k.T`. Block i is
    `shift_matrix(k, omega_i)` acting on columns (2i, 2i+1).
    """
    if isinstance(k, bool) or not isinstance(k, (int, float)):
        raise TypeError(f"k must be a number, got {type(k).__name__}")
    _require_even(d_model, "d_model")
    base = _require_positive_float(base, "base")
    _require_float_dtype(dtype)
    blocks = [shift_matrix(k, float(w), dtype=torch.float64) for w in _frequencies(d_model, base)]
    return torch.block_diag(*blocks).to(dtype)  # (d, d)


# ----------------------------------------------------------------------------------------------------------
# Modules that add positions to token embeddings
# ----------------------------------------------------------------------------------------------------------


def _check_positions_fit(x: Tensor, d_model: int, max_len: int, offset) -> int:
    """Validate x (..., n, d_model) and offset; return n. Raises ValueError naming max_len when too long."""
    require_tensor(x, "x", min_dim=2, floating=True)
    if x.size(-1) != d_model:
        raise ValueError(f"x must have last dimension d_model={d_model}, got shape {tuple(x.shape)}")
    require_int(offset, "offset", minimum=0)
    n = x.size(-2)
    if offset + n > max_len:
        where = f"sequence length {n}" + (f" at offset {offset}" if offset else "")
        raise ValueError(
            f"{where} exceeds max_len={max_len}: the table has no row for position {max_len} "
            f"(positions run 0..{max_len - 1}); build it with a larger max_len"
        )
    return n


class SinusoidalPositionalEncoding(nn.Module):
    """x + PE[offset : offset + n], then dropout, with the fixed interleaved table of `sinusoidal_table`."""

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.0, base: float = 10000.0):
        super().__init__()
        _require_even(d_model, "d_model")
        require_int(max_len, "max_len", minimum=1)
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be a float in [0, 1), got {dropout!r}")
        self.d_model, self.max_len, self.base = d_model, max_len, float(base)
        # Kept in float64 (cast to x's dtype on use) so that float64 reference tests stay exact;
        # not persistent: it is a function of the arguments, not a learned state.
        self.register_buffer("pe", sinusoidal_table(max_len, d_model, base, dtype=torch.float64), persistent=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """x: (..., n, d_model) -> same shape; `offset` is the position of x's first row (for decoding)."""
        n = _check_positions_fit(x, self.d_model, self.max_len, offset)
        return self.dropout(x + self.pe[offset : offset + n].to(x.dtype))  # (..., n, d)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, max_len={self.max_len}, base={self.base:g}"


class LearnedPositionalEmbedding(nn.Module):
    """x + W[offset : offset + n] with a learned (max_len, d_model) table W, as in BERT, GPT-2 and ViT."""

    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        require_int(max_len, "max_len", minimum=1)
        require_int(d_model, "d_model", minimum=1)
        self.max_len, self.d_model = max_len, d_model
        self.embedding = nn.Embedding(max_len, d_model)  # row p is the vector of position p, init N(0, 1)

    @property
    def weight(self) -> nn.Parameter:
        """The (max_len, d_model) table."""
        return self.embedding.weight

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """x: (..., n, d_model) -> same shape; `offset` is the position of x's first row (for decoding)."""
        require_tensor(x, "x", min_dim=2, floating=True)
        n = x.size(-2)
        if offset == 0 and n > self.max_len:  # the common case, said the plainest way
            raise ValueError(
                f"sequence length {n} exceeds max_len={self.max_len}: a learned table has no row for "
                f"position {self.max_len} (it was never trained); truncate the input or use a model with a "
                f"larger max_len"
            )
        n = _check_positions_fit(x, self.d_model, self.max_len, offset)
        return x + self.weight[offset : offset + n].to(x.dtype)  # (..., n, d)

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, d_model={self.d_model}"


# ----------------------------------------------------------------------------------------------------------
# Rotary position embedding (RoPE), rotate-half convention of LLaMA / Hugging Face
# ----------------------------------------------------------------------------------------------------------


def rotate_half(x: Tensor) -> Tensor:
    """Split the last dim into halves (x1, x2) and return (-x2, x1): a 90-degree turn of each pair (i, i + d/2)."""
    require_tensor(x, "x", min_dim=1)
    _require_even(x.size(-1), "x.size(-1)")
    x1, x2 = x.chunk(2, dim=-1)  # (..., d/2) each
    return torch.cat((-x2, x1), dim=-1)  # (..., d)


def apply_rope(x: Tensor, positions: Tensor | None = None, base: float = 10000.0) -> Tensor:
    """Rotate each pair (i, i + d/2) of x (..., seq, d_head) by the angle position * base^(-2i/d_head).

    The rotate-half convention of LLaMA and Hugging Face: x * cos + rotate_half(x) * sin, with
    cos/sin built from cat(freqs, freqs). `positions` (default 0..seq-1) is a tensor of shape (seq,) or any
    shape that broadcasts to x.shape[:-1]; for x (B, h, seq, d) and per-sequence positions pass (B, 1, seq).
    Angles are computed in float64 for float64 x and in float32 otherwise.
    """
    require_tensor(x, "x", min_dim=2, floating=True)
    d = _require_even(x.size(-1), "d_head (x.size(-1))")
    base = _require_positive_float(base, "base")
    seq = x.size(-2)
    if positions is None:
        positions = torch.arange(seq, device=x.device)  # (seq,)
    require_tensor(positions, "positions", min_dim=1)
    if positions.dtype == torch.bool or positions.is_complex():
        raise TypeError(f"positions must be an integer (or real) tensor, got dtype {positions.dtype}")
    if positions.size(-1) != seq:
        raise ValueError(
            f"positions must have one entry per position (last dim {seq}), got shape {tuple(positions.shape)}"
        )
    require_broadcastable(positions.shape, x.shape[:-1], "positions", "x.shape[:-1]")
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, device=x.device, dtype=compute) / d))  # (d/2,)
    freqs = positions.to(device=x.device, dtype=compute)[..., None] * inv_freq  # (..., seq, d/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (..., seq, d): angle of pair i at columns i and i + d/2
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    return x * cos + rotate_half(x) * sin  # (..., seq, d)
