"""RoPE for contexts longer than training: the inverse frequencies of the scaled rotary embeddings.

Plain RoPE rotates pair i of a head (dims i and i + d_head/2) by the angle position * theta_i, with
theta_i = base^(-2i/d_head) (chapter 5). A model trained on sequences of length L has seen each pair turn through
L * theta_i at most; beyond L the slow pairs reach angles they never saw. Each scheme below changes the theta_i
(and YaRN also the attention's temperature) so that a longer context stays in, or near, the trained range:

- `linear_inv_freq`: position interpolation (Chen et al. 2023, arXiv:2306.15595): every theta_i / factor, which is
  the same as dividing the positions by factor.
- `ntk_inv_freq`: "NTK-aware" scaling (bloc97, 2023; written out in the YaRN paper, arXiv:2309.00071, section 3.1):
  a larger base, base * factor^(d/(d-2)), so that the fastest pair is unchanged and the slowest one is divided by
  exactly factor. `dynamic_ntk_inv_freq` (emozilla, 2023; YaRN section 3.3) picks the factor from the current
  sequence length.
- `yarn_inv_freq`, `yarn_attention_factor`: YaRN (Peng et al. 2023, arXiv:2309.00071): fast pairs (many turns in L)
  kept, slow pairs (less than one turn) interpolated, a linear ramp between; and the cos and sin multiplied by
  0.1 ln(factor) + 1, so that every attention score is multiplied by its square.
- `llama3_inv_freq`: Llama 3.1's frequency-dependent scheme (Meta's released `apply_scaling`, the rope type
  "llama3" of transformers; the model is described in arXiv:2407.21783): wavelengths shorter than
  L / high_freq_factor kept, longer than L / low_freq_factor divided by factor, a smooth blend between.

`rope_frequencies(d_head, base, rope_scaling)` dispatches on a dict with the keys and values of transformers'
`config.rope_parameters` (without rope_theta, which is `base`): {"rope_type": "llama3", "factor": 8.0, ...}. Two
differences: "ntk" (static NTK-aware) is this package's own type, transformers has only "dynamic"; and "dynamic"
names its starting length original_max_position_embeddings (transformers uses max_position_embeddings).
`apply_scaled_rope` rotates a tensor with given frequencies, as `attnbook.positional.apply_rope` does with plain
ones. Every frequency is computed in float64; transformers computes them in float32.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from .._validate import require_broadcastable, require_int, require_tensor
from ..positional import rotate_half

__all__ = ["rope_inv_freq", "linear_inv_freq", "ntk_inv_freq", "dynamic_ntk_inv_freq", "yarn_inv_freq",
           "yarn_attention_factor", "llama3_inv_freq", "ROPE_TYPES", "check_rope_scaling", "rope_frequencies",
           "apply_scaled_rope"]


def _float(x, name: str, *, minimum: float = 0.0, strict: bool = True) -> float:
    """`x` as a float if it is a finite real number above `minimum` (at or above it when not `strict`)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise TypeError(f"{name} must be a float, got {type(x).__name__}")
    if not math.isfinite(x) or (x <= minimum if strict else x < minimum):
        raise ValueError(f"{name} must be a finite float {'>' if strict else '>='} {minimum}, got {x!r}")
    return float(x)


def _d_head(d_head) -> int:
    require_int(d_head, "d_head", minimum=2)
    if d_head % 2:
        raise ValueError(f"d_head={d_head} must be even: RoPE rotates pairs of dimensions")
    return d_head


def rope_inv_freq(d_head: int, base: float = 10000.0, *, device=None) -> Tensor:
    """theta_i = base^(-2i/d_head), i = 0 .. d_head/2 - 1: plain RoPE's inverse frequencies, (d_head/2,) float64."""
    d = _d_head(d_head)
    base = _float(base, "base")
    return base ** (-torch.arange(0, d, 2, dtype=torch.float64, device=device) / d)  # (d/2,)


def linear_inv_freq(d_head: int, base: float, factor: float, *, device=None) -> Tensor:
    """Position interpolation (arXiv:2306.15595): theta_i / factor, i.e. position p is rotated as p / factor was."""
    return rope_inv_freq(d_head, base, device=device) / _float(factor, "factor", minimum=1.0, strict=False)


def ntk_inv_freq(d_head: int, base: float, factor: float, *, device=None) -> Tensor:
    """NTK-aware scaling (YaRN paper arXiv:2309.00071, section 3.1): plain RoPE with base * factor^(d/(d-2)).

    The exponent makes the slowest pair (i = d/2 - 1) exactly factor times slower while the fastest (i = 0) keeps
    its frequency: the high frequencies, which tell neighbours apart, are not interpolated. d_head must exceed 2.
    """
    d = _d_head(d_head)
    if d == 2:
        raise ValueError("d_head must be > 2 for NTK-aware scaling (the exponent d/(d-2))")
    factor = _float(factor, "factor", minimum=1.0, strict=False)
    return rope_inv_freq(d, _float(base, "base") * factor ** (d / (d - 2)), device=device)


def dynamic_ntk_inv_freq(d_head: int, base: float, factor: float, seq_len: int | None,
                         original_max_position_embeddings: int, *, device=None) -> Tensor:
    """Dynamic NTK scaling (YaRN paper, section 3.3; transformers' rope type "dynamic").

    NTK-aware scaling with the factor factor * L'/L - (factor - 1), where L = original_max_position_embeddings and
    L' = max(seq_len, L): plain RoPE up to L (and for seq_len None), then a base that grows with the sequence.
    """
    L = require_int(original_max_position_embeddings, "original_max_position_embeddings", minimum=1)
    factor = _float(factor, "factor", minimum=1.0, strict=False)
    length = L if seq_len is None else max(require_int(seq_len, "seq_len", minimum=1), L)
    return ntk_inv_freq(d_head, base, factor * length / L - (factor - 1), device=device)


def yarn_inv_freq(d_head: int, base: float, factor: float, original_max_position_embeddings: int, *,
                  beta_fast: float = 32.0, beta_slow: float = 1.0, truncate: bool = True, device=None) -> Tensor:
    """YaRN's "NTK-by-parts" frequencies (arXiv:2309.00071, section 3.2).

    Pair i turns r_i = L * theta_i / (2 pi) times over the original context L. Pairs with r_i >= beta_fast keep
    theta_i, pairs with r_i <= beta_slow get theta_i / factor. The pair index where r = beta is
    d * ln(L / (2 pi beta)) / (2 ln base); between the two (floored and ceiled when `truncate`, clamped to
    [0, d - 1]) the share of theta_i / factor rises linearly in the pair index i. This is the ramp of the YaRN
    reference code and of transformers; the paper writes the ramp as linear in r instead.
    """
    d = _d_head(d_head)
    base = _float(base, "base")
    factor = _float(factor, "factor", minimum=1.0, strict=False)
    L = require_int(original_max_position_embeddings, "original_max_position_embeddings", minimum=1)
    beta_fast, beta_slow = _float(beta_fast, "beta_fast"), _float(beta_slow, "beta_slow")
    if not isinstance(truncate, bool):
        raise TypeError(f"truncate must be a bool, got {type(truncate).__name__}")

    def pair_index(turns: float) -> float:  # the (fractional) pair that turns `turns` times over L
        return d * math.log(L / (turns * 2 * math.pi)) / (2 * math.log(base))

    low, high = pair_index(beta_fast), pair_index(beta_slow)  # fast pairs have small indices
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, d - 1)
    if high == low:
        high += 0.001  # a step instead of a ramp, without dividing by zero (as the reference code)
    i = torch.arange(d // 2, dtype=torch.float64, device=device)  # (d/2,)
    interpolated = ((i - low) / (high - low)).clamp(0, 1)  # (d/2,): 0 keeps theta_i, 1 divides it by factor
    theta = rope_inv_freq(d, base, device=device)  # (d/2,)
    return theta / factor * interpolated + theta * (1 - interpolated)


def yarn_attention_factor(factor: float, *, mscale: float | None = None, mscale_all_dim: float | None = None) -> float:
    """YaRN's factor on cos and sin: scores are multiplied by its square (arXiv:2309.00071, section 3.4: sqrt(1/t)).

    0.1 ln(factor) + 1 (1 for factor <= 1); with both `mscale` and `mscale_all_dim` (DeepSeek's form), the ratio
    (0.1 mscale ln(factor) + 1) / (0.1 mscale_all_dim ln(factor) + 1).
    """
    factor = _float(factor, "factor")

    def m(scale: float) -> float:
        return 1.0 if factor <= 1 else 0.1 * scale * math.log(factor) + 1.0

    if mscale and mscale_all_dim:
        return m(_float(mscale, "mscale")) / m(_float(mscale_all_dim, "mscale_all_dim"))
    return m(1.0)


def llama3_inv_freq(d_head: int, base: float, factor: float, original_max_position_embeddings: int, *,
                    low_freq_factor: float = 1.0, high_freq_factor: float = 4.0, device=None) -> Tensor:
    """Llama 3.1's scaling (Meta's `apply_scaling`; 8, 1, 4 and L = 8192 in Llama 3.1), by wavelength 2 pi / theta_i.

    Wavelengths below L / high_freq_factor: theta_i kept. Above L / low_freq_factor: theta_i / factor. Between,
    with s = (L / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor) in [0, 1]:
    (1 - s) theta_i / factor + s theta_i, continuous at both ends.
    """
    factor = _float(factor, "factor", minimum=1.0, strict=False)
    L = require_int(original_max_position_embeddings, "original_max_position_embeddings", minimum=1)
    low, high = _float(low_freq_factor, "low_freq_factor"), _float(high_freq_factor, "high_freq_factor")
    if not low < high:
        raise ValueError(f"low_freq_factor={low} must be < high_freq_factor={high}")
    theta = rope_inv_freq(d_head, base, device=device)  # (d/2,)
    wavelength = 2 * math.pi / theta  # (d/2,)
    s = ((L / wavelength - low) / (high - low)).clamp(0, 1)  # 0: long wavelength, 1: short
    return (1 - s) * theta / factor + s * theta


# --- The rope_scaling dict --------------------------------------------------------------------------------------

ROPE_TYPES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {  # rope_type -> (required keys, optional keys)
    "linear": (("factor",), ()),
    "ntk": (("factor",), ()),
    "dynamic": (("factor", "original_max_position_embeddings"), ()),
    "yarn": (("factor", "original_max_position_embeddings"),
             ("beta_fast", "beta_slow", "truncate", "attention_factor", "mscale", "mscale_all_dim")),
    "llama3": (("factor", "original_max_position_embeddings"), ("low_freq_factor", "high_freq_factor")),
}


def check_rope_scaling(rope_scaling) -> dict | None:
    """Return `rope_scaling` (None, or a dict with "rope_type" and that type's keys) if it is valid.

    Types and keys: "linear" (factor), "ntk" (factor), "dynamic" (factor, original_max_position_embeddings),
    "yarn" (factor, original_max_position_embeddings; optional beta_fast, beta_slow, truncate, attention_factor,
    mscale, mscale_all_dim), "llama3" (factor, original_max_position_embeddings; optional low_freq_factor,
    high_freq_factor). A missing or unknown key is a ValueError naming it; an optional key may be None (its
    default). The values are checked by computing the frequencies once.
    """
    if rope_scaling is None:
        return None
    if not isinstance(rope_scaling, dict):
        raise TypeError(f"rope_scaling must be a dict or None, got {type(rope_scaling).__name__}")
    kind = rope_scaling.get("rope_type")
    if kind not in ROPE_TYPES:
        raise ValueError(f"rope_scaling['rope_type'] must be one of {sorted(ROPE_TYPES)}, got {kind!r}")
    required, optional = ROPE_TYPES[kind]
    missing = [k for k in required if rope_scaling.get(k) is None]
    if missing:
        raise ValueError(f"rope_scaling of rope_type {kind!r} needs {missing}")
    unknown = sorted(set(rope_scaling) - {"rope_type", *required, *optional})
    if unknown:
        raise ValueError(f"rope_scaling of rope_type {kind!r} has unknown keys {unknown} (known: "
                         f"{list(required + optional)})")
    rope_frequencies(4, 10000.0, rope_scaling)  # the values' own checks
    return rope_scaling


def rope_frequencies(d_head: int, base: float = 10000.0, rope_scaling: dict | None = None, *,
                     seq_len: int | None = None, device=None) -> tuple[Tensor, float]:
    """(inverse frequencies (d_head/2,) float64, attention factor) of RoPE scaled by `rope_scaling`.

    The attention factor multiplies cos and sin (both q's and k's): 1 except for YaRN. `seq_len` matters only to
    "dynamic". With rope_scaling None: plain RoPE and 1.0. See `check_rope_scaling` for the dict.
    """
    if rope_scaling is None:
        return rope_inv_freq(d_head, base, device=device), 1.0
    if not isinstance(rope_scaling, dict) or rope_scaling.get("rope_type") not in ROPE_TYPES:
        check_rope_scaling(rope_scaling)  # raises, naming what is wrong
    kw = {k: v for k, v in rope_scaling.items() if k != "rope_type" and v is not None}
    kind, factor = rope_scaling["rope_type"], kw.pop("factor", None)
    if kind == "linear":
        return linear_inv_freq(d_head, base, factor, device=device), 1.0
    if kind == "ntk":
        return ntk_inv_freq(d_head, base, factor, device=device), 1.0
    L = kw.pop("original_max_position_embeddings", None)
    if kind == "dynamic":
        return dynamic_ntk_inv_freq(d_head, base, factor, seq_len, L, device=device), 1.0
    if kind == "llama3":
        return llama3_inv_freq(d_head, base, factor, L, device=device, **kw), 1.0
    attention = kw.pop("attention_factor", None)
    m = {k: kw.pop(k) for k in ("mscale", "mscale_all_dim") if k in kw}
    attention = yarn_attention_factor(factor, **m) if attention is None else _float(attention, "attention_factor")
    return yarn_inv_freq(d_head, base, factor, L, device=device, **kw), attention


def apply_scaled_rope(x: Tensor, inv_freq: Tensor, attention_factor: float = 1.0,
                      positions: Tensor | None = None) -> Tensor:
    """Rotate pair (i, i + d/2) of x (..., seq, d) by position * inv_freq[i]; cos and sin times attention_factor.

    `apply_rope`'s rotate-half convention with given inverse frequencies (d/2,); positions default to 0..seq-1
    and may be any shape broadcasting to x.shape[:-1] with last dim seq. Angles are computed in float64 for float64
    x and in float32 otherwise.
    """
    require_tensor(x, "x", min_dim=2, floating=True)
    d, seq = x.size(-1), x.size(-2)
    require_tensor(inv_freq, "inv_freq", floating=True)
    if inv_freq.shape != (d // 2,) or d % 2:
        raise ValueError(f"inv_freq must have shape (x.size(-1) / 2,) = ({d // 2},) with x.size(-1) even, got "
                         f"{tuple(inv_freq.shape)} for x.size(-1) = {d}")
    attention_factor = _float(attention_factor, "attention_factor")
    if positions is None:
        positions = torch.arange(seq, device=x.device)  # (seq,)
    require_tensor(positions, "positions", min_dim=1)
    if positions.size(-1) != seq:
        raise ValueError(f"positions must have one entry per position (last dim {seq}), got {tuple(positions.shape)}")
    require_broadcastable(positions.shape, x.shape[:-1], "positions", "x.shape[:-1]")
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    freqs = positions.to(x.device, compute)[..., None] * inv_freq.to(x.device, compute)  # (..., seq, d/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (..., seq, d)
    cos, sin = (emb.cos() * attention_factor).to(x.dtype), (emb.sin() * attention_factor).to(x.dtype)
    return x * cos + rotate_half(x) * sin  # (..., seq, d)
