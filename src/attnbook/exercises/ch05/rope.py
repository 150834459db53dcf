"""Checker for exercise 5.3, rotary position embedding (RoPE)."""
from __future__ import annotations

import re

import torch
from torch import Tensor

from ..compare import randn
from ..guard import call
from ..registry import exercise
from ..runs import Run, collect, verdict
from ._shared import F64, expect_type, half_band, import_transformers_first
from ...i18n import N_, _


def _rope_angles(d: int, positions: Tensor, *, exponent: str = "2i", divide: bool = True, shift: int = 0,
                 ignore_positions: bool = False, from_zero: str | None = None, consecutive: bool = False,
                 half_positions: bool = False) -> Tensor:
    """(seq, d/2) float64 angle of each pair at each position: positions * theta_i, or a mistaken one."""
    i = torch.arange(d // 2, dtype=F64)  # (d/2,)
    e = 2 * i / d if exponent == "2i" else i / d  # (d/2,)
    theta = 10000.0 ** (-e) if divide else 10000.0 ** e  # (d/2,)
    seq = len(positions)
    if ignore_positions:
        pos = torch.arange(seq, dtype=F64)  # (seq,)
    elif half_positions:
        pos = positions.to(torch.float16).to(F64)  # whole numbers above 2048 rounded to even ones
    else:
        pos = positions.to(F64) + shift  # (seq,)
    if from_zero is not None:  # "min": the smallest position becomes 0; "first": the first one does
        pos = pos - (pos.min() if from_zero == "min" else pos[0])  # (seq,)
    if consecutive:
        pos = pos[0] + torch.arange(seq, dtype=F64)  # (seq,)
    return pos[:, None] * theta  # (seq, d/2)


def _rope(x: Tensor, positions: Tensor, *, pairing: str = "half", sign: float = 1.0, freqs: str = "cat",
          **angle_options) -> Tensor:
    """RoPE in float64 written pair by pair, or one of its usual mistakes (the defaults give the right result).

    Pair i is (x_i, x_{i+d/2}) ("half") or (x_{2i}, x_{2i+1}) ("interleaved"); it turns by position * theta_i
    with theta_i = base^(-2i/d). freqs="repeat_interleave" builds cos/sin as [f0, f0, f1, f1, ...] and combines
    them with rotate-half, a mix of the two conventions; freqs="no_minus" forgets the minus of rotate_half.
    """
    x = x.to(F64)
    d = x.size(-1)
    h = d // 2
    angle = sign * _rope_angles(d, positions, **angle_options)  # (seq, d/2)
    c, s = angle.cos(), angle.sin()  # (seq, d/2)
    if freqs == "repeat_interleave":
        cc, ss = c.repeat_interleave(2, dim=-1), s.repeat_interleave(2, dim=-1)  # (seq, d)
        return x * cc + torch.cat((-x[..., h:], x[..., :h]), dim=-1) * ss
    if freqs == "no_minus":
        cc, ss = torch.cat((c, c), dim=-1), torch.cat((s, s), dim=-1)  # (seq, d)
        return x * cc + torch.cat((x[..., h:], x[..., :h]), dim=-1) * ss
    if pairing == "half":
        a, b = x[..., :h], x[..., h:]  # (..., seq, d/2) each
        return torch.cat((a * c - b * s, a * s + b * c), dim=-1)  # (..., seq, d)
    a, b = x[..., 0::2], x[..., 1::2]  # (..., seq, d/2) each: adjacent pairs
    return torch.stack((a * c - b * s, a * s + b * c), dim=-1).flatten(-2)  # (..., seq, d): interleaved back


def _rope_band(x: Tensor, positions: Tensor) -> Tensor:
    """(..., seq, d): how far float16 rounding of the angles, cos and sin can move each entry of the result."""
    a = _rope_angles(x.size(-1), positions)  # (seq, d/2)
    a = torch.cat((a, a), dim=-1)  # (seq, d): the angle of each feature's pair
    xa = x.detach().to(F64).abs()  # (..., seq, d)
    partner = torch.cat((xa[..., x.size(-1) // 2:], xa[..., :x.size(-1) // 2]), dim=-1)  # the pair's other feature
    return half_band(a) * (xa + partner)


_ROPE_INTERLEAVED = (N_("you rotated adjacent pairs (x_0, x_1), (x_2, x_3), ... (the GPT-J / original RoFormer "
                        "layout); the rotate-half convention of LLaMA and Hugging Face pairs x_i with x_{i + d/2}"))
_ROPE_SIGN = (N_("you rotated by -angle: pair i must turn by +p * theta_i; check the sign in your rotate_half (the "
                 "task's rotate_half(x) = (-x_2, x_1) puts the minus on the second half) and in front of sin"))
_ROPE_EXP = (N_("the frequencies are theta_i = 10000^(-2i/d) for the pair index i = 0 .. d/2 - 1, so the exponents "
                "step by 2/d; you used 10000^(-i/d)"))
_ROPE_SHIFT = N_("use the positions as given: position p turns pair i by p * theta_i (you used p + 1)")
_ROPE_FROM_ZERO = (N_("you shifted the positions so that they start at 0; use the positions exactly as given: row t "
                      "turns by positions[t] * theta_i, whatever the first or smallest position is"))
_ROPE_CONSECUTIVE = (N_("you assumed consecutive positions, positions[0], positions[0] + 1, ...; use the positions "
                        "exactly as given: row t turns by positions[t] * theta_i (they may jump or go backwards)"))
_ROPE_IGNORE = (N_("you ignored the positions argument and used 0, 1, ..., seq-1; rotate row t by positions[t] * theta_i "
                   "(the positions need not start at 0 or be consecutive)"))
_ROPE_MULTIPLY = N_("theta_i = 1 / 10000^(2i/d): divide by 10000^(2i/d), do not multiply by it")
_ROPE_REPEAT = (N_("you repeated each frequency twice in a row, [f0, f0, f1, f1, ...] (repeat_interleave, the layout of "
                   "adjacent pairs); with rotate_half the angle of pair i must sit at columns i and i + d/2, so the "
                   "d/2 angles are repeated as a block, not each one in place"))
_ROPE_NO_MINUS = N_("rotate_half(x) is (-x_2, x_1), with a minus on the second half x_2; you left the minus out")
_ROPE_HALF_POSITIONS = (N_("your result is wrong only at positions above 2048: float16 (half precision) holds whole "
                           "numbers exactly only up to 2048 (2049 becomes 2048, 4097 becomes 4096); keep the positions "
                           "as integers or in float32 or float64, not float16"))
_ROPE_HALF = (N_("your values are off by about the rounding error of float16: half precision keeps only about 3 "
                 "significant digits, too few for angles p * theta_i that grow with the position. If a step "
                 "(positions, theta, angles, cos or sin) is in float16 (.half() or dtype=torch.float16), keep it in "
                 "float32 or float64 and cast only the result to x's dtype"))
_ROPE_CAT_HINT = (N_("one side of a product has d/2 columns and the other d: cos and sin have one column per pair (d/2 "
                     "of them), the width of the halves x1 and x2; to multiply the whole x, each angle is used twice, "
                     "for feature i and feature i + d/2, so they need d columns before they multiply x: the d/2 angles "
                     "repeated as a block"))

_ROPE_INSTEAD = (N_("write both yourself: split x into halves x1, x2, rotate_half(x) = cat(-x2, x1), and "
                    "x * cos + rotate_half(x) * sin"))
# attnbook's RoPE, and Hugging Face's, by pattern: every model module has its own copy of rotate_half and
# apply_rotary_pos_emb (llama, mixtral, falcon, gemma3, ...), and a few have variants (apply_rotary_pos_emb_vision,
# apply_multimodal_rotary_pos_emb, rotate_half_text); the patterns catch them wherever they are imported from.
# attnbook.positional.apply_rope is the exercise's reference ("the package's own solution").
ROPE_FORBIDDEN = [
    (name, _ROPE_INSTEAD)
    for name in ("attnbook.positional.apply_rope", "attnbook.positional.rotate_half",
                 "transformers.*rotate_half*", "transformers.*apply_rotary*", "transformers.*rotary_pos_emb*")
]


def _rope_error_hint(message: str) -> str | None:
    m = re.search(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)", message)
    if m and 2 * min(int(m.group(1)), int(m.group(2))) == max(int(m.group(1)), int(m.group(2))):
        return _ROPE_CAT_HINT
    return None


def _rope_cases() -> list[tuple[str, Tensor, Tensor]]:
    """(description, x, positions), ordered so that each mistake first shows up where it is unambiguous. Positions
    2049 and 4097 catch positions kept in float16 (exact only up to 2048); they sit in cases with d <= 4, whose
    frequencies (1 and 0.01) keep a float32 computation of the angles right to 1e-6."""
    return [
        (_("2-D x of shape (6, 8) at positions 0..5"), randn(6, 8, seed=61), torch.arange(6)),
        (_("x of shape (2, 5, 8) at positions [7, 3, 4, 10, 5]"), randn(2, 5, 8, seed=67),
         torch.tensor([7, 3, 4, 10, 5])),
        (_("x of shape (2, 3, 5, 8) (batch, heads, seq, d) at positions [3, 4, 5, 6, 7]"), randn(2, 3, 5, 8, seed=62),
         torch.arange(3, 8)),
        (_("x of shape (1, 4, 16) at positions [0, 10, 100, 1000]"), randn(1, 4, 16, seed=63),
         torch.tensor([0, 10, 100, 1000])),
        (_("float64 x of shape (2, 7, 6) at positions [5, 3, 0, 2, 9, 1, 4]"), randn(2, 7, 6, seed=64, dtype=F64),
         torch.tensor([5, 3, 0, 2, 9, 1, 4])),
        (_("x of shape (3, 2) (one pair) at positions [0, 1, 4097]"), randn(3, 2, seed=65), torch.tensor([0, 1, 4097])),
        (_("one position: x of shape (1, 1, 1, 4) at positions [2049]"), randn(1, 1, 1, 4, seed=66),
         torch.tensor([2049])),
    ]


def _rope_mistakes(x: Tensor, positions: Tensor) -> dict:
    """{hint: what that mistake gives on this input (a looser tolerance where float32 loses more)}."""
    return {
        _ROPE_INTERLEAVED: _rope(x, positions, pairing="interleaved"),
        _ROPE_SIGN: _rope(x, positions, sign=-1.0),
        _ROPE_EXP: _rope(x, positions, exponent="i"),
        _ROPE_SHIFT: _rope(x, positions, shift=1),
        _ROPE_IGNORE: _rope(x, positions, ignore_positions=True),
        _ROPE_FROM_ZERO: _rope(x, positions, from_zero="min"),
        (_ROPE_FROM_ZERO, "first"): _rope(x, positions, from_zero="first"),
        _ROPE_CONSECUTIVE: _rope(x, positions, consecutive=True),
        _ROPE_REPEAT: _rope(x, positions, freqs="repeat_interleave"),
        _ROPE_NO_MINUS: _rope(x, positions, freqs="no_minus"),
        _ROPE_HALF_POSITIONS: _rope(x, positions, half_positions=True),
        _(_ROPE_INTERLEAVED) + _("; also, ") + _(_ROPE_SIGN): _rope(x, positions, pairing="interleaved", sign=-1.0),
        _ROPE_MULTIPLY: (_rope(x, positions, divide=False), 5e-2, 0.0),
        _("you returned x unchanged: rotate each pair (x_i, x_{i + d/2}) by the angle position * theta_i"):
            (x.to(F64), 1e-7, 0.0),
    }


@exercise("5.3", "Rotary position embedding", answer_name="apply_rope", section="Rotary position embedding (RoPE)",
          references=("attnbook.positional.apply_rope",))
def check_apply_rope(apply_rope) -> str:
    """apply_rope(x, positions) on (..., seq, d): pairs (i, i + d/2) turned by positions * 10000^(-2i/d)."""
    cases = _rope_cases()

    def one(case, runs):
        desc, x, positions = case  # copies: code that changes them in place is told so, and the case stays intact
        got = call(apply_rope, x.clone(), positions.clone(), what="apply_rope", on=desc, forbid=ROPE_FORBIDDEN,
                   explain=_rope_error_hint, prepare=import_transformers_first)
        shape_hints = {tuple(x.shape[:-1]) + (x.size(-1) // 2,): _("return all d features: the rotated first halves "
                                                                   "of the pairs and the rotated second halves, side by side")}
        got = expect_type(got, tuple(x.shape), what=_("your result"), on=desc, shape_hints=shape_hints,
                          shape_hint=_("return a tensor of the shape of x, (..., seq, d): each feature of each row "
                                       "is turned, none is added or dropped"),
                          dtype=x.dtype, like=_(" like x"),
                          dtype_hint=_("return the dtype of x: compute cos and sin, then .to(x.dtype), or build "
                                       "them from x"))
        return Run(desc, got, _rope(x, positions), _rope_mistakes(x, positions), 1e-4, 0.0, _rope_band(x, positions))

    verdict(collect(cases, one), what=_("your result"), rule=None, band_hint=_ROPE_HALF)
    return (_("right on {len_cases} inputs: 2-D to 4-D, positions that do not start at 0 or are not consecutive, "
              "large positions, float64 and a single pair", len_cases=len(cases)))

