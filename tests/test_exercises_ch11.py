"""Checkers of chapter 11, what the mutant catalogue (tests/mutants/ch11.py, the home of "this answer -> this
verdict") cannot say: the reference solutions read from the notebook pass, the sections the messages point to exist,
several properties of one message (the input it names, the recipe it leaves out), a stub among the earlier answers
is a failure and not "not attempted", unattempted answers, and the helper that names transformers' pieces. Every
answer here is written out by hand, independently of the checker code (nothing is imported from
attnbook.exercises.ch11 but that helper)."""
from __future__ import annotations

import math

import nbformat
import pytest
import torch
import torch.nn.functional as F
from conftest import chapter_path

from attnbook.exercises import check

SECTIONS = {"11.1": "RMSNorm: LayerNorm without the mean", "11.2": "SwiGLU: a gated feed-forward network",
            "11.3": "The whole block"}


def test_the_sections_the_checks_point_to_exist():
    headings = [line.lstrip("#").strip() for cell in nbformat.read(chapter_path(11), as_version=4).cells
                if cell.cell_type == "markdown" for line in cell.source.split("\n") if line.startswith("## ")]
    assert set(SECTIONS.values()) <= set(headings), headings
    result = check("11.2", lambda x, W_gate, W_up, W_down: x)
    assert f'(Re-read "{SECTIONS["11.2"]}".)' in result.message


# ---------------------------------------------------------------------------------------------------------
# 11.1 RMSNorm from scratch
# ---------------------------------------------------------------------------------------------------------


def test_11_1_reference_passes(solutions):
    result = check("11.1", solutions(11)["rms_norm"])
    assert result.passed, result.message


def test_11_1_layer_norm_is_named_on_the_first_input():
    def layer_norm_instead(x, weight, eps=1e-6):
        centred = x - x.mean(-1, keepdim=True)
        return centred / torch.sqrt(centred.pow(2).mean(-1, keepdim=True) + eps) * weight

    result = check("11.1", layer_norm_instead)
    assert not result.passed and "that is LayerNorm" in result.message and "(4, 6)" in result.message


def test_11_1_not_attempted():
    def rms_norm(x, weight, eps=1e-6):
        raise NotImplementedError

    assert check("11.1", rms_norm).status == "not attempted"


# ---------------------------------------------------------------------------------------------------------
# 11.2 SwiGLU
# ---------------------------------------------------------------------------------------------------------


def test_11_2_reference_passes(solutions):
    result = check("11.2", solutions(11)["swiglu"])
    assert result.passed, result.message


# ---------------------------------------------------------------------------------------------------------
# 11.3 The modern block: the learner's earlier functions, written here by hand
# ---------------------------------------------------------------------------------------------------------


def attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def split_heads(x, n):
    B, T, d = x.shape
    return x.reshape(B, T, n, d // n).transpose(1, 2)


def merge_heads(x):
    B, h, T, d = x.shape
    return x.transpose(1, 2).reshape(B, T, h * d)


def apply_rope(x, positions, base=10000.0):
    d = x.size(-1)
    angles = positions.double()[:, None] * base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    cos, sin = torch.cat([angles, angles], -1).cos().to(x.dtype), torch.cat([angles, angles], -1).sin().to(x.dtype)
    return x * cos + torch.cat([-x[..., d // 2:], x[..., : d // 2]], -1) * sin


def rms(x, w):
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def ffn(x, w):
    return (F.silu(x @ w["W_gate"]) * (x @ w["W_up"])) @ w["W_down"]


def make_block(pre_norm=True, rope="qk", repeat="interleave", mask="causal", residuals=(True, True), base=None,
               w_o=True, ffn_reads="h", offset=0, rotate=apply_rope):
    """A modern_block with one deliberate mistake (the defaults give a correct one)."""

    def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
        w = weights
        T = x.size(1)
        pos = torch.arange(T) + offset
        b = rope_base if base is None else base

        def attend(a):
            q, k, v = (split_heads(a @ w[name], n) for name, n in
                       (("W_q", n_heads), ("W_k", n_kv_heads), ("W_v", n_kv_heads)))
            q = rotate(q, pos, b) if "q" in rope else q
            k = rotate(k, pos, b) if "k" in rope else k
            v = rotate(v, pos, b) if "v" in rope else v
            n_rep = n_heads // n_kv_heads
            if repeat == "interleave":
                k, v = k.repeat_interleave(n_rep, 1), v.repeat_interleave(n_rep, 1)
            else:
                k, v = torch.cat([k] * n_rep, 1), torch.cat([v] * n_rep, 1)
            allowed = {"causal": torch.ones(T, T, dtype=torch.bool).tril(), "none": None}[mask]
            y = merge_heads(attention(q, k, v, allowed)[0])
            return y @ w["W_o"] if w_o else y

        if not pre_norm:
            h = rms(x + attend(x), w["norm1"])
            return rms(h + ffn(h, w), w["norm2"])
        h = x * residuals[0] + attend(rms(x, w["norm1"]))
        return h * residuals[1] + ffn(rms(h if ffn_reads == "h" else x, w["norm2"]), w)

    return modern_block


def test_11_3_reference_passes(solutions):
    result = check("11.3", solutions(11)["modern_block"])
    assert result.passed, result.message


def rope_adjacent(x, positions, base=10000.0):
    """RoPE on the pairs (x_2i, x_2i+1) (GPT-J, RoFormer)."""
    d = x.size(-1)
    angles = positions.double()[:, None] * base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2], out[..., 1::2] = even * cos - odd * sin, even * sin + odd * cos
    return out


def rope_backwards(x, positions, base=10000.0):
    """RoPE turning each pair by -angle: x * cos - rotate_half(x) * sin."""
    return _rope_with(x, positions, base, sign=-1.0)


def rope_exponent_i(x, positions, base=10000.0):
    """RoPE with theta_i = base^(-i/d)."""
    return _rope_with(x, positions, base, step=1)


def _rope_with(x, positions, base, sign=1.0, step=2):
    d = x.size(-1)
    theta = base ** (-step * torch.arange(d // 2, dtype=torch.float64) / d)
    angles = sign * positions.double()[:, None] * theta
    cos, sin = torch.cat([angles, angles], -1).cos().to(x.dtype), torch.cat([angles, angles], -1).sin().to(x.dtype)
    return x * cos + torch.cat([-x[..., d // 2:], x[..., : d // 2]], -1) * sin


@pytest.mark.parametrize("rotate, hint", [
    (rope_adjacent, "rotates adjacent pairs (x_0, x_1), (x_2, x_3)"),
    (rope_backwards, "turns every pair the wrong way"),
    (rope_exponent_i, "the exponents step by 2/d_head"),
], ids=["adjacent-pairs", "backwards", "exponent-i-over-d"])
def test_11_3_rope_conventions_are_named(rotate, hint):
    # A learner trial: these three got only the block's recipe as a hint.
    result = check("11.3", make_block(rotate=rotate))
    assert not result.passed and hint in result.message, result.message
    assert "h = x + attention" not in result.message, result.message


def test_11_3_grouped_query_mistakes_show_on_a_grouped_input():
    result = check("11.3", make_block(repeat="tile"))
    assert "n_kv_heads=2" in result.message, result.message  # multi-head inputs cannot tell the orders apart


def test_11_3_a_stub_among_the_earlier_answers_is_named():
    def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
        return unfinished_rope(x, torch.arange(x.size(1)))

    def unfinished_rope(x, positions, base=10000.0):
        raise NotImplementedError("replace this line with your code")

    result = check("11.3", modern_block)
    assert result.status == "failed" and "unfinished_rope, which still raises NotImplementedError" in result.message


def test_11_3_not_attempted():
    def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
        raise NotImplementedError

    assert check("11.3", modern_block).status == "not attempted"


# ---------------------------------------------------------------------------------------------------------
# transformers' pieces named by their public names
# ---------------------------------------------------------------------------------------------------------


def test_transformers_pieces_are_named_where_a_learner_imports_them():
    import transformers.models.llama.modeling_llama  # noqa: F401
    import transformers.models.mistral.modeling_mistral  # noqa: F401
    from attnbook.exercises.ch11._shared import HF_BLOCK, HF_MLPS, HF_NORMS, transformers_pieces

    norms, mlps, block = (set(transformers_pieces(k)) for k in (HF_NORMS, HF_MLPS, HF_BLOCK))
    llama = "transformers.models.llama.modeling_llama."
    assert {llama + "LlamaRMSNorm", "transformers.models.mistral.modeling_mistral.MistralRMSNorm"} <= norms
    assert llama + "LlamaMLP" in mlps and llama + "LlamaRMSNorm" not in mlps
    assert {llama + name for name in ("LlamaRMSNorm", "LlamaMLP", "LlamaRotaryEmbedding", "LlamaAttention",
                                      "LlamaDecoderLayer", "rotate_half", "apply_rotary_pos_emb", "repeat_kv",
                                      "eager_attention_forward")} <= block
    assert llama + "LlamaConfig" not in block and llama + "LlamaModel" not in block  # what the chapter may use
    # only where a piece is defined: a name a module imports from another is that other module's
    assert all(path.startswith("transformers.models.") and ".modeling_" in path for path in block)
