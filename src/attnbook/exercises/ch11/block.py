"""Checker for exercise 11.3, a Llama-style block assembled from the learner's own earlier answers.

The reference is the package's LlamaBlock holding the same weights. The known mistakes come from `_block`, a
float64 block written out step by step with one switch per mistake (the defaults give the right block), so that a
hint is named only when that mistake gives the learner's result on every case.
"""
from __future__ import annotations

import re

import torch
import torch.nn.functional as F
from torch import Tensor

from ...models.llama import LlamaBlock
from ..ch05._shared import import_transformers_first
from ..forbid import ATTENTION_SHORTCUTS
from ..compare import expect_input_dtype
from ..guard import call
from ..registry import exercise, Wrong
from ..runs import (GRAD_TAIL, Run, collect, compare_gradients, expect_shape, grad_inputs,
                    observe_gradients, verdict)
from ._shared import ATOL32, F64, HF_BLOCK, RTOL32, randn64, tolerance, transformers_pieces
from ...i18n import N_, _

_BLOCK_INSTEAD = (N_("assemble the block from your own functions: rms_norm, swiglu and the answers of chapters 2, 3, 5 "
                     "and 10 (attention, split_heads, merge_heads, apply_rope, repeat_kv)"))
BLOCK_FORBIDDEN = [(name, _BLOCK_INSTEAD) for name in (
    "attnbook.models.llama.LlamaAttention", "attnbook.models.llama.Llama", "attnbook.models.llama.RMSNorm",
    "attnbook.models.llama.SwiGLU", "attnbook.positional.apply_rope", "attnbook.positional.rotate_half",
    "attnbook.models.rope_scaling.apply_scaled_rope", "attnbook.models.moe.SwiGLUExperts",
    "attnbook.multihead.split_heads", "attnbook.multihead.merge_heads", "attnbook.multihead.repeat_kv",
    "attnbook.layers.EncoderBlock", "attnbook.layers.DecoderBlock", "attnbook.layers.LayerNorm",
    "torch.nn.functional.rms_norm", "torch.rms_norm", "torch.nn.RMSNorm", "torch.nn.functional.layer_norm",
    "torch.nn.LayerNorm", *ATTENTION_SHORTCUTS,
    # transformers' attention functions and RoPE wherever they are imported from (a "*" pattern is matched on every
    # call); its classes, and these functions by their names, come from `block_forbidden`
    "transformers.*attention_forward", "transformers.*rotate_half*", "transformers.*apply_rotary*",
    "transformers.*rotary_pos_emb*", "transformers.*.repeat_kv",
)]


def block_forbidden(fn) -> list[tuple[str, str]]:
    """BLOCK_FORBIDDEN and the Llama pieces of every loaded transformers model (LlamaRMSNorm, LlamaMLP,
    LlamaRotaryEmbedding, LlamaAttention, LlamaDecoderLayer, rotate_half, apply_rotary_pos_emb, repeat_kv,
    eager_attention_forward, and their copies in other models), each named where the learner would import it from."""
    return [(path, _BLOCK_INSTEAD) for path in transformers_pieces(HF_BLOCK)] + BLOCK_FORBIDDEN

WEIGHT_NAMES = ("norm1", "W_q", "W_k", "W_v", "W_o", "norm2", "W_gate", "W_up", "W_down")
# A float64 block is checked to a relative 1e-12 (ATOL64, RTOL64), as the task text says: RoPE's angles too must be
# computed in float64 (the cell before the exercise asks for it). A float32 block is checked to 1e-4.
PRECISION_HINT = (N_("your result is close to the right one, but float64 inputs are checked to a relative 1e-12: "
                     "compute in x's dtype all the way (no .float() detour, no tensor made without dtype=x.dtype) and "
                     "RoPE's angles in float64, as the cell \"Your answers from chapters 2, 3, 5 and 10\" asks "
                     "(positions.double(), torch.arange(0, d, 2, dtype=torch.float64))"))

BLOCK_RULE = (N_("h = x + attention(rms_norm(x, norm1)) @ W_o, with q and k (not v) rotated by RoPE per head, k and v "
                 "repeated to n_heads heads (kv head j // n_rep for query head j) and a causal mask; then "
                 "h + swiglu(rms_norm(h, norm2), ...)"))


def _rms(x: Tensor, w: Tensor, centre: bool = False, eps: float = 1e-6) -> Tensor:
    if centre:  # LayerNorm with weight as gamma and no beta
        x = x - x.mean(dim=-1, keepdim=True)
    return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + eps) * w


def _rope(x: Tensor, positions: Tensor, base: float, pairing: str = "half", turn: float = 1.0,
          step: int = 2) -> Tensor:
    """Rotate-half RoPE in float64 on x (..., T, d), or one of its usual mistakes (the defaults give the right one):
    pairing="adjacent" pairs (x_2i, x_2i+1) instead of (x_i, x_i+d/2), turn=-1.0 turns every pair by -angle, and
    step=1 takes theta_i = base^(-i/d) instead of base^(-2i/d)."""
    d = x.size(-1)
    theta = base ** (-(step * torch.arange(d // 2, dtype=F64)) / d)  # (d/2,)
    angles = turn * positions.to(F64)[:, None] * theta  # (T, d/2)
    c, s = angles.cos(), angles.sin()  # (T, d/2)
    if pairing == "adjacent":
        a, b = x[..., 0::2], x[..., 1::2]  # (..., T, d/2) each
        return torch.stack((a * c - b * s, a * s + b * c), dim=-1).flatten(-2)  # (..., T, d)
    emb_c, emb_s = torch.cat((c, c), dim=-1), torch.cat((s, s), dim=-1)  # (T, d)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * emb_c + torch.cat((-x2, x1), dim=-1) * emb_s


def _heads(t: Tensor, n: int) -> Tensor:
    B, T, d = t.shape
    return t.reshape(B, T, n, d // n).transpose(1, 2)  # (B, n, T, d/n)


def _block(x: Tensor, w: dict, n_heads: int, n_kv: int, base: float = 10000.0, *, post_norm: bool = False,
           rope: str = "qk", rope_width: str = "head", tiled: bool = False, mask: str = "causal",
           res1: bool = True, res2: bool = True, ffn_reads: str = "h", norms: tuple = ("norm1", "norm2"),
           centre: bool = False, final_norm: bool = False, out_proj: bool = True, ffn_norm: bool = True,
           residual_from_norm: bool = False, eps: float = 1e-6, q_base: float | None = None,
           k_base: float | None = None, pairing: str = "half", turn: float = 1.0, theta_step: int = 2) -> Tensor:
    """A Llama block in float64 written out step by step; each keyword switches on one mistake."""
    x = x.to(F64)
    style = {"pairing": pairing, "turn": turn, "step": theta_step}  # how apply_rope turns the pairs
    w = {k: v.to(F64) for k, v in w.items()}
    B, T, d = x.shape
    pos = torch.arange(T)
    n1, n2 = w[norms[0]], w[norms[1]]

    def rotated(q: Tensor, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor, Tensor]:  # those that `rope` names
        return (_rope(q, pos, q_base or base, **style) if "q" in rope else q,
                _rope(k, pos, k_base or base, **style) if "k" in rope else k,
                _rope(v, pos, base, **style) if "v" in rope else v)

    def attn(t: Tensor) -> Tensor:
        q, k, v = t @ w["W_q"], t @ w["W_k"], t @ w["W_v"]  # (B, T, d), (B, T, kv_dim) x 2
        if rope_width == "model":  # rotated before the split, over the whole width
            q, k, v = rotated(q, k, v)
        q, k, v = _heads(q, n_heads), _heads(k, n_kv), _heads(v, n_kv)
        if rope_width == "head":
            q, k, v = rotated(q, k, v)
        n_rep = n_heads // n_kv
        if tiled:  # kv0, kv1, kv0, kv1, ...
            k, v = k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)
        else:  # kv0, kv0, kv1, kv1, ...
            k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)
        scores = q @ k.transpose(-2, -1) / (d // n_heads) ** 0.5  # (B, h, T, T)
        if mask != "none":
            allowed = torch.ones(T, T, dtype=torch.bool)
            allowed = allowed.tril() if mask == "causal" else allowed.triu()
            scores = scores.masked_fill(~allowed, float("-inf"))
        y = torch.softmax(scores, dim=-1) @ v  # (B, h, T, d_head)
        y = y.transpose(1, 2).reshape(B, T, d)  # (B, T, d)
        return y @ w["W_o"] if out_proj else y

    def ffn(t: Tensor) -> Tensor:
        g = t @ w["W_gate"]
        return (F.silu(g) * (t @ w["W_up"])) @ w["W_down"]

    if post_norm:
        h = _rms(x + attn(x), n1, centre, eps)
        return _rms(h + ffn(h), n2, centre, eps)
    a_in = _rms(x, n1, centre, eps)
    h = (a_in if residual_from_norm else x) * res1 + attn(a_in)
    f_src = h if ffn_reads == "h" else x
    f_in = _rms(f_src, n2, centre, eps) if ffn_norm else f_src
    out = (f_in if residual_from_norm else h) * res2 + ffn(f_in)
    return _rms(out, n2, centre, eps) if final_norm else out


_MISTAKES = {  # hint: the keyword arguments of `_block` that make the mistake
    N_("that is a post-norm block (the 2017 order), which normalises after each residual addition; this block is "
       "pre-norm: each sublayer reads rms_norm of the stream, and its output is added to the un-normalised stream"):
        dict(post_norm=True),
    N_("RoPE is missing: rotate q and k by their positions (apply_rope after split_heads) before the scores"):
        dict(rope=""),
    N_("you rotated v too: RoPE turns only q and k, so that the scores depend on the offset; the values pass through "
       "unrotated"): dict(rope="qkv"),
    N_("you rotated only q: rotate k too, by its own position, so that each score depends on the offset m - n"):
        dict(rope="q"),
    N_("you rotated only k: rotate q too, by its own position, so that each score depends on the offset m - n"):
        dict(rope="k"),
    N_("apply RoPE per head, after split_heads: each head's d_head features form d_head/2 pairs with "
       "theta_i = base^(-2i/d_head); you rotated the whole width before splitting"): dict(rope_width="model"),
    N_("your apply_rope rotates adjacent pairs (x_0, x_1), (x_2, x_3), ... (the layout of GPT-J and the RoFormer "
       "paper); this block uses chapter 5's rotate-half convention (LLaMA in transformers): in each head, feature i "
       "pairs with feature i + d_head/2"): dict(pairing="adjacent"),
    N_("your apply_rope turns every pair the wrong way, by -p * theta_i: pair i turns by +p * theta_i, "
       "x * cos + rotate_half(x) * sin with rotate_half(x) = (-x_2, x_1); check the minus in your rotate_half and the "
       "sign in front of sin"): dict(turn=-1.0),
    N_("your apply_rope's frequencies are base^(-i/d_head) for pair i: they are theta_i = base^(-2i/d_head) for "
       "i = 0 .. d_head/2 - 1, so the exponents step by 2/d_head (torch.arange(0, d_head, 2) / d_head)"):
        dict(theta_step=1),
    N_("your kv heads come out in the tiled order kv0, kv1, kv0, kv1, ... (repeat or cat); query head j must read kv "
       "head j // n_rep, so each kv head is repeated n_rep times in a row: kv0, kv0, kv1, kv1, ... (repeat_kv)"):
        dict(tiled=True),
    N_("the causal mask is missing: position t may attend only to positions 0..t"): dict(mask="none"),
    N_("your mask lets each position see the future and hides the past: the causal mask is True on and below the "
       "diagonal (tril), not above it"): dict(mask="future"),
    N_("you forgot the first residual connection: add the attention sublayer's output to the block's input x"):
        dict(res1=False),
    N_("you forgot the second residual connection: add the feed-forward sublayer's output to h"): dict(res2=False),
    N_("you forgot both residual connections: each sublayer's output is added to the stream it read from"):
        dict(res1=False, res2=False),
    N_("the feed-forward sublayer reads the block's input x (that makes a parallel block, as in GPT-J and PaLM): in "
       "Llama's block it reads h, the stream after the attention sublayer and its residual, through rms_norm with "
       "norm2"): dict(ffn_reads="x"),
    N_("norm1 and norm2 are swapped: norm1 is the weight of the RMSNorm before attention, norm2 the one before the "
       "feed-forward network"): dict(norms=("norm2", "norm1")),
    N_("you used norm1 twice: the feed-forward sublayer's RMSNorm has its own weight, norm2"):
        dict(norms=("norm1", "norm1")),
    N_("you subtracted the mean (LayerNorm): this block normalises with RMSNorm, rms_norm(x, weight), which does "
       "not centre"): dict(centre=True),
    N_("you subtracted the mean (LayerNorm, as chapter 4's layer_norm with its eps=1e-5): this block normalises with "
       "RMSNorm, rms_norm(x, weight), which does not centre"): dict(centre=True, eps=1e-5),
    N_("a pre-norm block does not normalise its output: the RMSNorms only normalise what goes into each sublayer "
       "(a Llama applies one final RMSNorm after the last block, outside the blocks)"): dict(final_norm=True),
    N_("you forgot the output projection: multiply the merged heads by W_o before the residual"): dict(out_proj=False),
    N_("the feed-forward sublayer reads rms_norm(h, norm2), not h itself"): dict(ffn_norm=False),
    N_("your RMSNorms use eps=1e-5 (as Hugging Face's config in the chapter does): this block's rms_norm keeps its "
       "default eps=1e-6"): dict(eps=1e-5),
    N_("the residuals must carry the un-normalised stream: normalise only what goes into each sublayer"):
        dict(residual_from_norm=True),
}
_BASE_HINT = (N_("your result is the block rotated with base 10000, where the check passes rope_base=500.0 by "
                 "name: pass rope_base to apply_rope as its base (apply_rope(q, positions, base=rope_base)), and "
                 "check that your apply_rope uses its base parameter where your chapter 5 answer had 10000"))
_Q_BASE_HINT = (N_("you rotated q with base 10000 and k with rope_base: rotate q and k with the same base, rope_base "
                   "(pass base=rope_base to both calls of apply_rope)"))
_K_BASE_HINT = (N_("you rotated q with rope_base and k with base 10000: rotate q and k with the same base, rope_base "
                   "(pass base=rope_base to both calls of apply_rope)"))


def _mistakes(x: Tensor, w: dict, n_heads: int, n_kv: int, base: float) -> dict:
    """{hint: what that mistake gives on this case}, the one of a result right only to float32's accuracy last, so
    that any mistake above it that fits is named first."""
    out = {hint: _block(x, w, n_heads, n_kv, base, **kw) for hint, kw in _MISTAKES.items()}
    other = base != 10000.0
    out[_BASE_HINT] = _block(x, w, n_heads, n_kv, 10000.0) if other else None
    out[_Q_BASE_HINT] = _block(x, w, n_heads, n_kv, base, q_base=10000.0) if other else None
    out[_K_BASE_HINT] = _block(x, w, n_heads, n_kv, base, k_base=10000.0) if other else None
    out[PRECISION_HINT] = (_block(x, w, n_heads, n_kv, base), ATOL32, RTOL32)  # on float32 cases: the right result
    return out


def _weights(d: int, n_heads: int, n_kv: int, d_ff: int, seed: int, dtype=F64) -> dict[str, Tensor]:
    """The block's weights as the task gives them: (in, out) matrices and RMSNorm weights around 1."""
    kv = n_kv * (d // n_heads)
    shapes = {"norm1": (d,), "W_q": (d, d), "W_k": (d, kv), "W_v": (d, kv), "W_o": (d, d), "norm2": (d,),
              "W_gate": (d, d_ff), "W_up": (d, d_ff), "W_down": (d_ff, d)}
    w = {}
    for k, (name, shape) in enumerate(shapes.items()):
        t = randn64(*shape, seed=seed + k, dtype=dtype)
        scale = 1.5 if name in ("W_q", "W_k") else 1.0
        w[name] = t * 0.3 + 1 if name.startswith("norm") else t * scale / shape[0] ** 0.5
    return w


def _llama_reference(x: Tensor, w: dict, n_heads: int, n_kv: int, base: float) -> Tensor:
    """The package's LlamaBlock in float64, holding the same weights ((in, out) here, (out, in) in nn.Linear)."""
    d, d_ff = x.size(-1), w["W_gate"].size(1)
    block = LlamaBlock(d, n_heads, n_kv, d_ff, rope_base=base, eps=1e-6).to(F64).eval()
    with torch.no_grad():
        block.norm1.weight.copy_(w["norm1"])
        block.norm2.weight.copy_(w["norm2"])
        for mine, name in (("W_q", "q_proj"), ("W_k", "k_proj"), ("W_v", "v_proj"), ("W_o", "out_proj")):
            getattr(block.self_attn, name).weight.copy_(w[mine].T)
        for mine, name in (("W_gate", "gate_proj"), ("W_up", "up_proj"), ("W_down", "down_proj")):
            getattr(block.ffn, name).weight.copy_(w[mine].T)
        return block(x.to(F64))


def _block_error_hint(message: str) -> str | None:
    if re.search(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) at non-singleton "
                 r"dimension 1", message):
        return (_("q has n_heads heads but k and v have n_kv_heads: repeat k and v to n_heads heads (repeat_kv with "
                  "n_rep = n_heads // n_kv_heads) before attention"))
    if "unexpected keyword argument 'base'" in message:
        return (_("give your apply_rope a base parameter, apply_rope(x, positions, base=10000.0), as the cell \"Your "
                  "answers from chapters 2, 3, 5 and 10\" shows, and pass rope_base to it"))
    if "unexpected keyword argument" in message:
        return _("keep the signature modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0)")
    if re.search(r"shape '\[[-\d, ]+\]' is invalid for input of size", message):
        return (_("W_k and W_v give n_kv_heads * d_head features: split k and v into n_kv_heads heads, and q into "
                  "n_heads"))
    if "KeyError" in message:
        return _("the weights are a dict with the keys ") + ", ".join(WEIGHT_NAMES)
    if "'tuple' object" in message or ("tuple" in message and "Tensor" in message):
        return _("your attention returns a tuple (output, weights): use its output, the first item")
    return None


def _block_explainer(x: Tensor):
    """explain= for a call on input x (B, T, d): two sizes that do not line up being B and T mean that T, the
    number of positions, was read from the batch dimension; otherwise `_block_error_hint`."""
    B, T = x.shape[0], x.shape[1]

    def explain(message: str) -> str | None:
        m = re.search(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)", message)
        if m and B != T and {int(m.group(1)), int(m.group(2))} == {B, T}:
            return (_("the sizes {B} and {T} met where they should agree: x is (B, T, d), so T, the number of "
                      "positions (for the positions 0..T-1 and the causal mask), is x.shape[1], here {T}; x.shape[0] "
                      "and len(x) are B, the batch size, here {B}", B=B, T=T))
        return _block_error_hint(message)

    return explain


def _shape_hint(got: Tensor, x: Tensor, n_heads: int, d_ff: int) -> str:
    """The likely cause of a result of another shape than x's (B, T, d)."""
    B, T, d = x.shape
    shape = tuple(got.shape)
    if shape == (B, n_heads, T, d // n_heads):
        return (_("that is the attention output per head, (B, n_heads, T, d_head): merge the heads (merge_heads) into "
                  "(B, T, d), multiply by W_o, add the result to x, then the feed-forward sublayer"))
    if shape == (B, n_heads, T, T):
        return (_("that is the shape of the attention weights, (B, n_heads, T, T): your attention returns (output, "
                  "weights); the block goes on with the output"))
    if B == 1 and shape == (T, d):
        return (_("keep the batch dimension: the block returns (B, T, d) also when B = 1 (squeeze() or a reshape to "
                  "(T, d) drops it)"))
    if shape == (B * T, d):
        return (_("reshape back to (B, T, d): the block returns one vector for every position of every sequence, in "
                  "x's shape"))
    if shape in ((B, d), (d,)):
        return (_("the block returns a vector for every position, (B, T, d), not only for the last one"))
    if shape[-1:] == (d_ff,):
        return (_("the feed-forward sublayer ends with W_down, which brings its d_ff features back to d: "
                  "swiglu(rms_norm(h, norm2), W_gate, W_up, W_down) is (B, T, d)"))
    return (_("the block maps x (B, T, d) to a tensor of the same shape: each sublayer's output has x's shape and is "
              "added to the stream"))


def _block_cases():
    """(description, x, weights, n_heads, n_kv_heads, rope_base or None for the default)."""
    specs = [  # (description, shape, n_heads, n_kv_heads, d_ff, rope_base, dtype)
        (_("x of shape (2, 5, 16), n_heads=4, n_kv_heads=4 (multi-head attention), d_ff=24"), (2, 5, 16), 4, 4, 24,
         None, F64),
        (_("x of shape (1, 7, 16), n_heads=4, n_kv_heads=2 (grouped-query: 2 query heads per kv head), d_ff=40"),
         (1, 7, 16), 4, 2, 40, None, F64),
        (_("x of shape (2, 6, 24), n_heads=6, n_kv_heads=3 (grouped-query), d_ff=64"), (2, 6, 24), 6, 3, 64, None, F64),
        (_("x of shape (2, 10, 16), n_heads=4, n_kv_heads=2, d_ff=24 and rope_base=500.0"), (2, 10, 16), 4, 2, 24,
         500.0, F64),
        (_("x of shape (1, 5, 16), n_heads=4, n_kv_heads=1 (multi-query: one kv head), d_ff=24"), (1, 5, 16), 4, 1, 24,
         None, F64),
        (_("x of shape (2, 4, 16) in float32, with float32 weights, n_heads=4, n_kv_heads=2, d_ff=24"), (2, 4, 16), 4,
         2, 24, None, torch.float32),
        (N_("x of shape (2, 6, 16) with tiny entries (mean square about 2e-6, where eps matters), n_heads=4, "
            "n_kv_heads=2, d_ff=24"), (2, 6, 16), 4, 2, 24, None, F64),
    ]
    cases = []
    for i, (desc, shape, h, kv, d_ff, base, dtype) in enumerate(specs):
        x = randn64(*shape, seed=200 + i, dtype=dtype) + 0.5  # a mean away from 0, so that centring shows
        if "tiny" in desc:  # desc: the English (N_) where it names the case; translated where shown
            x = x * 1e-3  # (B, T, d): eps is no longer negligible next to the mean square
        cases.append((_(desc), x, _weights(shape[-1], h, kv, d_ff, seed=210 + 10 * i, dtype=dtype), h, kv, base))
    return cases


@exercise("11.3", "The modern block from your own parts", answer_name="modern_block", section="The whole block",
          references=("attnbook.models.llama.LlamaBlock",))
def check_modern_block(modern_block) -> str:
    """modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0) must equal LlamaBlock with these weights."""
    cases = _block_cases()

    def one(case, runs):
        desc, x, w, h, kv, base = case
        on = _("{desc} (weights: {weights})", desc=desc,
               weights=", ".join(f"{k} {tuple(v.shape)}" for k, v in w.items()))
        by_name = {} if base is None else {"rope_base": base}
        got = call(modern_block, x, _copy(w), h, kv, **by_name, what="modern_block", on=on, forbid=block_forbidden,
                   explain=_block_explainer(x), prepare=import_transformers_first)
        base_ = 10000.0 if base is None else base
        ref = _llama_reference(x, w, h, kv, base_)  # (B, T, d), float64
        expect_input_dtype(got, x, what=_("your result"), on=on)
        if isinstance(got, Tensor) and tuple(got.shape) != tuple(ref.shape):
            raise Wrong(_("{what} has shape {tuple_got_shape} on {on}, expected {tuple_ref_shape}",
                          what=_("your result"), tuple_got_shape=tuple(got.shape), on=on,
                          tuple_ref_shape=tuple(ref.shape)), _shape_hint(got, x, h, w["W_gate"].shape[1]))
        mistakes = _mistakes(x, w, h, kv, base_)
        got = expect_shape(got, ref, mistakes, runs, what=_("your result"), on=on)
        return Run(on, got, ref, mistakes, *tolerance(x))

    verdict(collect(cases, one), what=_("your result"), rule=BLOCK_RULE)
    desc, x, w, h, kv, _unused = cases[1]
    names = {0: "x"}
    leaves, inputs = grad_inputs((x, w, h, kv), names)
    inputs[1] = _copy(w)  # the answer's own copy: the reference of the gradients reads `w` (in `leaves`) after it
    got, grads = call(modern_block, *inputs, what="modern_block", on=desc, forbid=block_forbidden,
                      explain=_block_explainer(x), observe=observe_gradients(leaves, names, _block))
    compare_gradients(got, grads, leaves, names, _block, what="modern_block", on=desc, atol=1e-9,
                      rtol=1e-9, hint=_("the gradient must reach x through every path, the residual connections "
                                        "included: ") + _(GRAD_TAIL))
    return (_("equals the package's LlamaBlock holding the same weights on {len_cases} inputs (float64 to a "
              "relative 1e-12): multi-head, grouped-query and multi-query attention, another rope_base, float32 and "
              "tiny inputs where eps matters", len_cases=len(cases)))


def _copy(w: dict) -> dict:
    """A fresh copy of the weights for each call: an answer that pops keys or changes a tensor in place changes
    its own copy, in a notebook as in the grader (where the dict crosses as data)."""
    return {k: v.clone() for k, v in w.items()}
