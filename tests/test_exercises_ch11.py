"""Checkers of chapter 11: the reference solutions read from the notebook pass, typical wrong answers get their own
hint, and what the tasks forbid is refused. Every answer here is written out by hand, independently of the checker
code (nothing is imported from attnbook.exercises.ch11)."""
from __future__ import annotations

import math

import nbformat
import pytest
import torch
import torch.nn.functional as F
from conftest import chapter_path
from torch import nn

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


def test_11_1_other_correct_answers_pass():
    def with_rsqrt(x, weight, eps=1e-6):
        return weight * x * torch.rsqrt(x.square().mean(-1, keepdim=True) + eps)

    def via_norm(x, weight, eps=1e-6):
        return x / torch.sqrt(x.norm(dim=-1, keepdim=True) ** 2 / x.shape[-1] + eps) * weight

    assert check("11.1", with_rsqrt).passed
    assert check("11.1", via_norm).passed


def make_rms_norm(centre=False, eps_where="inside", fixed_eps=None, weight="multiply", dims=(-1,), reduce="mean",
                  power=0.5):
    """An rms_norm with one deliberate mistake (the defaults give a correct one)."""

    def rms_norm(x, weight_, eps=1e-6):
        eps = fixed_eps if fixed_eps is not None else eps
        t = x - x.mean(-1, keepdim=True) if centre else x
        sq = t * t
        ms = sq.mean(dim=dims, keepdim=True) if reduce == "mean" else sq.sum(dim=dims, keepdim=True)
        if eps_where == "inside":
            y = t / (ms + eps) ** power
        elif eps_where == "outside":
            y = t / (ms ** power + eps)
        else:
            y = t / ms ** power
        return {"multiply": y * weight_, "none": y, "add": y + weight_, "one_plus": y * (1 + weight_)}[weight]

    return rms_norm


def test_11_1_the_correct_variant_passes():
    assert check("11.1", make_rms_norm()).passed


@pytest.mark.parametrize("kwargs, hint", [
    ({"centre": True}, "that is LayerNorm"),
    ({"eps_where": "outside"}, "eps goes inside the square root"),
    ({"eps_where": "none"}, "you left out eps"),
    ({"fixed_eps": 1e-6}, "use the eps argument"),
    ({"weight": "none"}, "you forgot the weight"),
    ({"weight": "add"}, "it is not added"),
    ({"weight": "one_plus"}, "Gemma"),
    ({"dims": (0,)}, "the wrong dimension (dim=0)"),
    ({"reduce": "sum"}, "you summed the squares"),
    ({"power": 1.0}, "not by mean(x**2) + eps itself"),
], ids=lambda x: str(x) if isinstance(x, dict) else "")
def test_11_1_wrong_answers_get_hints(kwargs, hint):
    result = check("11.1", make_rms_norm(**kwargs))
    assert not result.passed, kwargs
    assert hint in result.message, (kwargs, result.message)


def test_11_1_layer_norm_is_named_on_the_first_input():
    def layer_norm_instead(x, weight, eps=1e-6):
        centred = x - x.mean(-1, keepdim=True)
        return centred / torch.sqrt(centred.pow(2).mean(-1, keepdim=True) + eps) * weight

    result = check("11.1", layer_norm_instead)
    assert not result.passed and "that is LayerNorm" in result.message and "(4, 6)" in result.message


def test_11_1_a_wrong_default_eps_is_caught_where_eps_matters():
    def default_1e_8(x, weight, eps=1e-8):
        return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight

    result = check("11.1", default_1e_8)
    assert not result.passed and "default eps=1e-6" in result.message, result.message


def test_11_1_an_all_zero_token_without_eps_is_not_nan_silently():
    def nan_only_on_zeros(x, weight, eps=1e-6):  # eps added only where it makes no difference
        ms = x.pow(2).mean(-1, keepdim=True)
        return x / torch.sqrt(torch.where(ms > 1e-3, ms + eps, ms)) * weight

    result = check("11.1", nan_only_on_zeros)
    assert not result.passed
    assert "every feature 0" in result.message or "tiny values" in result.message, result.message


def test_11_1_float64_precision_and_dtype():
    def in_float32(x, weight, eps=1e-6):
        y = x.float()
        return (y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)

    def returns_float32(x, weight, eps=1e-6):
        return make_rms_norm()(x.float(), weight.float(), eps)

    result = check("11.1", in_float32)
    assert not result.passed and "relative 1e-12" in result.message, result.message
    result = check("11.1", returns_float32)
    assert not result.passed and "dtype torch.float32" in result.message, result.message


@pytest.mark.parametrize("shortcut", [
    lambda x, weight, eps=1e-6: F.rms_norm(x, x.shape[-1:], weight, eps),
    lambda x, weight, eps=1e-6: torch.rms_norm(x, x.shape[-1:], weight, eps),
    lambda x, weight, eps=1e-6: nn.RMSNorm(x.shape[-1], eps=eps, dtype=x.dtype)(x) * weight,
    lambda x, weight, eps=1e-6: F.normalize(x, dim=-1) * math.sqrt(x.shape[-1]) * weight,
    lambda x, weight, eps=1e-6: F.layer_norm(torch.cat([x, -x], -1), (2 * x.shape[-1],), eps=eps)[
        ..., : x.shape[-1]] * weight,
])
def test_11_1_library_normalisations_are_refused(shortcut):
    result = check("11.1", shortcut)
    assert not result.passed and "the task asks you to write this without" in result.message, result.message


def test_11_1_package_rms_norm_is_refused():
    def rms_norm(x, weight, eps=1e-6):
        from attnbook.models.llama import RMSNorm

        return RMSNorm(x.shape[-1], eps).to(x.dtype)(x) * weight

    result = check("11.1", rms_norm)
    assert not result.passed and "the package's own solution" in result.message, result.message
    from attnbook.models.llama import RMSNorm

    assert "the package's own solution" in check("11.1", RMSNorm).message


def test_11_1_gradients_are_checked():
    def detached_weight(x, weight, eps=1e-6):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.detach()

    result = check("11.1", detached_weight)
    assert not result.passed and "gradient" in result.message and "weight" in result.message, result.message


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


def test_11_2_other_correct_answers_pass():
    assert check("11.2", lambda x, Wg, Wu, Wd: ((x @ Wg) * torch.sigmoid(x @ Wg) * (x @ Wu)) @ Wd).passed
    assert check("11.2", lambda x, Wg, Wu, Wd: torch.matmul(F.silu(torch.matmul(x, Wg)) * torch.matmul(x, Wu),
                                                            Wd)).passed


@pytest.mark.parametrize("answer, hint", [
    (lambda x, Wg, Wu, Wd: (F.silu(x @ Wu) * (x @ Wg)) @ Wd, "gate and up are swapped"),
    (lambda x, Wg, Wu, Wd: F.silu((x @ Wg) * (x @ Wu)) @ Wd, "before the product"),
    (lambda x, Wg, Wu, Wd: (torch.relu(x @ Wg) * (x @ Wu)) @ Wd, "ReGLU"),
    (lambda x, Wg, Wu, Wd: (F.gelu(x @ Wg) * (x @ Wu)) @ Wd, "GEGLU"),
    (lambda x, Wg, Wu, Wd: (torch.sigmoid(x @ Wg) * (x @ Wu)) @ Wd, "GLU (a sigmoid gate)"),
    (lambda x, Wg, Wu, Wd: F.silu(x @ Wg) @ Wd, "left out the up branch"),
    (lambda x, Wg, Wu, Wd: ((x @ Wg) * (x @ Wu)) @ Wd, "left out the activation"),
    (lambda x, Wg, Wu, Wd: F.silu(x @ Wg) * (x @ Wu), "forgot the down projection"),
    (lambda x, Wg, Wu, Wd: x + (F.silu(x @ Wg) * (x @ Wu)) @ Wd, "no residual connection of its own"),
    (lambda x, Wg, Wu, Wd: (F.silu(x @ Wg.T) * (x @ Wu.T)) @ Wd.T, "with no transpose"),
])
def test_11_2_wrong_answers_get_hints(answer, hint):
    result = check("11.2", answer)
    assert not result.passed
    assert hint in result.message, result.message


@pytest.mark.parametrize("answer", [
    lambda x, Wg, Wu, Wd: F.linear(F.silu(F.linear(x, Wg.T)) * F.linear(x, Wu.T), Wd.T),
    lambda x, Wg, Wu, Wd: nn.Linear(Wg.shape[0], Wd.shape[1], bias=False).to(x.dtype)(x),
])
def test_11_2_linear_layers_are_refused(answer):
    result = check("11.2", answer)
    assert not result.passed and "the task asks you to write this without" in result.message, result.message


def test_11_2_package_swiglu_is_refused():
    def swiglu(x, W_gate, W_up, W_down):
        from attnbook.models.llama import SwiGLU

        ffn = SwiGLU(W_gate.shape[0], W_gate.shape[1]).to(x.dtype)
        with torch.no_grad():
            ffn.gate_proj.weight.copy_(W_gate.T)
            ffn.up_proj.weight.copy_(W_up.T)
            ffn.down_proj.weight.copy_(W_down.T)
        return ffn(x)

    result = check("11.2", swiglu)
    assert not result.passed and "the package's own solution" in result.message, result.message


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


def test_11_3_the_hand_written_block_passes():
    assert check("11.3", make_block()).passed


@pytest.mark.parametrize("kwargs, hint", [
    ({"pre_norm": False}, "post-norm"),
    ({"rope": ""}, "RoPE is missing"),
    ({"rope": "qkv"}, "you rotated v too"),
    ({"rope": "k"}, "you rotated only k"),
    ({"repeat": "tile"}, "tiled order"),
    ({"mask": "none"}, "the causal mask is missing"),
    ({"residuals": (False, True)}, "forgot the first residual"),
    ({"residuals": (True, False)}, "forgot the second residual"),
    ({"base": 10000.0}, "pass rope_base to apply_rope"),
    ({"w_o": False}, "forgot the output projection"),
    ({"ffn_reads": "x"}, "reads the block's input x"),
], ids=lambda x: str(x) if isinstance(x, dict) else "")
def test_11_3_wrong_answers_get_hints(kwargs, hint):
    result = check("11.3", make_block(**kwargs))
    assert not result.passed, kwargs
    assert hint in result.message, (kwargs, result.message)


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


def test_11_3_a_constant_shift_of_every_position_is_right():
    """RoPE scores depend only on offsets: starting the positions at 5 changes nothing."""
    assert check("11.3", make_block(offset=5)).passed


def test_11_3_a_stub_among_the_earlier_answers_is_named():
    def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
        return unfinished_rope(x, torch.arange(x.size(1)))

    def unfinished_rope(x, positions, base=10000.0):
        raise NotImplementedError("replace this line with your code")

    result = check("11.3", modern_block)
    assert result.status == "failed" and "unfinished_rope, which still raises NotImplementedError" in result.message


def test_11_3_apply_rope_without_base_gets_a_hint():
    def old_rope(x, positions):
        return apply_rope(x, positions)

    def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
        w = weights
        q = old_rope(split_heads(x @ w["W_q"], n_heads), torch.arange(x.size(1)), base=rope_base)
        return q

    result = check("11.3", modern_block)
    assert not result.passed and "base parameter" in result.message, result.message


@pytest.mark.parametrize("path", ["torch.nn.functional.scaled_dot_product_attention", "attnbook.positional.apply_rope",
                                  "attnbook.multihead.repeat_kv", "attnbook.models.llama.LlamaAttention"])
def test_11_3_package_and_library_parts_are_refused(path):
    import attnbook.models.llama as llama
    from attnbook import multihead, positional

    def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
        w = weights
        T, d = x.size(1), x.size(-1)
        a = rms(x, w["norm1"])
        if path.endswith("LlamaAttention"):
            layer = llama.LlamaAttention(d, n_heads, n_kv_heads, rope_base).to(x.dtype)
            return x + layer(a)
        q = split_heads(a @ w["W_q"], n_heads)
        k = split_heads(a @ w["W_k"], n_kv_heads)
        v = split_heads(a @ w["W_v"], n_kv_heads)
        if path.endswith("apply_rope"):
            q, k = positional.apply_rope(q, base=rope_base), positional.apply_rope(k, base=rope_base)
        if path.endswith("repeat_kv"):
            k, v = multihead.repeat_kv(k, n_heads // n_kv_heads), multihead.repeat_kv(v, n_heads // n_kv_heads)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return x + merge_heads(y) @ w["W_o"]

    result = check("11.3", modern_block)
    assert not result.passed and f"without {path}" in result.message, result.message


def test_11_3_package_block_is_refused():
    from attnbook.models.llama import LlamaBlock

    def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
        d, d_ff = x.size(-1), weights["W_gate"].size(1)
        return LlamaBlock(d, n_heads, n_kv_heads, d_ff, rope_base).to(x.dtype)(x)

    result = check("11.3", modern_block)
    assert not result.passed and "the package's own solution" in result.message, result.message
    assert "the package's own solution" in check("11.3", LlamaBlock).message


def test_11_3_not_attempted():
    def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
        raise NotImplementedError

    assert check("11.3", modern_block).status == "not attempted"


# ---------------------------------------------------------------------------------------------------------
# The accuracy the task texts promise, and transformers' pieces named by their public names
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("factor, passes", [(1 + 3e-13, True), (1 - 3e-13, True), (1 + 3e-11, False),
                                            (1 + 1e-5, False)])
def test_11_1_float64_is_checked_to_a_relative_1e_12(factor, passes):
    """The text promises a relative accuracy of 1e-12 for float64 inputs: a result off by less passes, one off by
    more fails, with the precision hint."""
    def scaled(x, weight, eps=1e-6):
        out = make_rms_norm()(x, weight, eps)
        return out * factor if x.dtype == torch.float64 else out

    result = check("11.1", scaled)
    assert result.passed == passes, result.message
    assert passes or "relative 1e-12" in result.message, result.message


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
