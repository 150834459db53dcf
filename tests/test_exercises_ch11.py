"""Checkers of chapter 11, what the mutant catalogue (tests/mutants/ch11.py, the home of "this answer -> this
verdict and hint") cannot say: the reference solutions read from the notebook pass, the sections the messages point
to exist, several properties of one message (the input it names, the recipe it leaves out), a stub among the earlier
answers is a failure and not "not attempted", unattempted answers, and the helper that names transformers' pieces.
Wrong answers come from the catalogue's learner templates (rn, mb and its chapter 5 RoPE variants) or are written
out here, independently of the checker code (nothing is imported from attnbook.exercises.ch11 but that helper)."""
from __future__ import annotations

import nbformat
import pytest
import torch
from conftest import chapter_path

from attnbook.exercises import check
from mutants.ch11 import _rope_adjacent, _rope_backwards, _rope_theta_i, mb, rn

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
    result = check("11.1", rn(centre=True))
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
# 11.3 The modern block
# ---------------------------------------------------------------------------------------------------------


def test_11_3_reference_passes(solutions):
    result = check("11.3", solutions(11)["modern_block"])
    assert result.passed, result.message


@pytest.mark.parametrize("rope, hint", [
    (_rope_adjacent, "rotates adjacent pairs (x_0, x_1), (x_2, x_3)"),
    (_rope_backwards, "turns every pair the wrong way"),
    (_rope_theta_i, "the exponents step by 2/d_head"),
], ids=["adjacent-pairs", "backwards", "exponent-i-over-d"])
def test_11_3_rope_conventions_are_named_not_answered_with_the_recipe(rope, hint):
    # A learner trial: these three got only the block's recipe as a hint.
    result = check("11.3", mb(rope=rope))
    assert not result.passed and hint in result.message, result.message
    assert "h = x + attention" not in result.message, result.message


def test_11_3_grouped_query_mistakes_show_on_a_grouped_input():
    result = check("11.3", mb(repeat=lambda t, n_rep: t.repeat(1, n_rep, 1, 1)))
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


def test_11_1_an_error_only_float32_inputs_show_is_not_called_a_float64_precision_slip():
    # The precision hint ("float64 inputs are checked to a relative 1e-12") explains a result right only to float32's
    # accuracy; an answer wrong on the float32 cases alone is not making that mistake (a helper's trial found it named).
    def rms_norm(x, weight, eps=1e-6):
        out = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight
        return out * 1.001 if x.dtype == torch.float32 else out

    result = check("11.1", rms_norm)
    assert result.status == "failed" and "1e-12" not in result.message, result.message
