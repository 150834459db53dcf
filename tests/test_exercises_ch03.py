"""Chapter 3 checkers, beyond the mutant catalogue (tests/mutants/ch03.py, the home of every "this answer gets this
verdict and hint" fact): the book's reference solutions pass and agree with PyTorch, stubs are not attempted, and what a
verdict alone cannot say: what messages show (the input and the section to re-read) and do not show (solution code,
the expected count, the steps a refused shortcut skips), every attention and counting shortcut (lists too long for the
catalogue) refused by name although it works outside the check, the inputs the checks use or draw from the run's seed,
and the chapter's text. Answers come from the catalogue's learner templates (sh, mhf, mh) or are written out here,
independently of the checker code."""
import ast
import math
import warnings

import nbformat
import pytest
import torch
from torch import nn

import mutants
from attnbook import multihead
from attnbook.attention import tiled_attention
from attnbook.exercises import check, compare
from attnbook.models import params

from conftest import chapter_path
from mutants.ch03 import merge_via_as_strided, merge_via_flat_view, mh, mhf, sh


# ---------------------------------------------------------------------------------------------------------
# Reference solutions and stubs
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("exercise_id, name", [("3.1", "split_heads"), ("3.2", "multi_head_forward"),
                                               ("3.3", "mha_param_count"), ("3.4", "merge_heads")])
def test_reference_passes(solutions, exercise_id, name):
    result = check(exercise_id, solutions(3)[name])
    assert result.passed, result.message


def test_stubs_are_not_attempted():
    def split_heads(x, n_heads):
        raise NotImplementedError("replace this line with your code")

    def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
        raise NotImplementedError("replace this line with your code")

    def mha_param_count(d_model, n_heads, bias=True):
        raise NotImplementedError

    def merge_heads(x):
        raise NotImplementedError("replace this line with your code")

    for exercise_id, stub in (("3.1", split_heads), ("3.2", multi_head_forward), ("3.3", mha_param_count),
                              ("3.4", merge_heads)):
        assert check(exercise_id, stub).status == "not attempted", exercise_id


def test_3_1_reference_matches_explicit_indexing(solutions):
    split_heads = solutions(3)["split_heads"]
    x = torch.randn(2, 5, 12, generator=torch.Generator().manual_seed(0))
    out = split_heads(x, 3)
    for b in range(2):
        for i in range(3):
            for t in range(5):
                assert torch.equal(out[b, i, t], x[b, t, 4 * i:4 * i + 4])


def test_3_2_reference_matches_nn_multihead_attention(solutions):
    """The book's answer equals PyTorch's layer (bias=False) with W = the transposed slices of in_proj_weight."""
    multi_head_forward = solutions(3)["multi_head_forward"]
    for d, h, n in [(12, 3, 5), (16, 4, 1), (8, 1, 3), (8, 8, 4)]:
        torch.manual_seed(d + h + n)
        ref = nn.MultiheadAttention(d, h, bias=False, batch_first=True).double().eval()
        x = torch.randn(2, n, d, dtype=torch.float64)
        W_q, W_k, W_v = (w.T for w in ref.in_proj_weight.detach().chunk(3, dim=0))
        W_o = ref.out_proj.weight.detach().T
        with torch.no_grad():
            expected, _ = ref(x, x, x, need_weights=False)
        torch.testing.assert_close(multi_head_forward(x, W_q, W_k, W_v, W_o, h), expected, atol=1e-12, rtol=1e-10)


@pytest.mark.parametrize("d_model, n_heads, bias", [
    (512, 8, True), (768, 12, True), (768, 12, False), (64, 1, True), (1024, 16, False), (6, 3, True), (6, 3, False),
])
def test_3_3_reference_equals_the_parameters_of_nn_multihead_attention(solutions, d_model, n_heads, bias):
    mha_param_count = solutions(3)["mha_param_count"]
    layer = nn.MultiheadAttention(d_model, n_heads, bias=bias)
    assert mha_param_count(d_model, n_heads, bias=bias) == sum(p.numel() for p in layer.parameters())


def test_3_4_reference_inverts_the_reference_split(solutions):
    split_heads, merge_heads = solutions(3)["split_heads"], solutions(3)["merge_heads"]
    for B, n, d, h in [(2, 5, 12, 3), (1, 1, 8, 8), (3, 4, 6, 1)]:
        x = torch.randn(B, n, d, generator=torch.Generator().manual_seed(B + n + d + h))
        assert torch.equal(merge_heads(split_heads(x, h)), x)


# ---------------------------------------------------------------------------------------------------------
# The chapter's text
# ---------------------------------------------------------------------------------------------------------


def _names_loaded(source: str) -> set[str]:
    return {node.id for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Name)}


def test_chapter_cells_do_not_use_the_names_the_exercise_stubs_replace():
    """The chapter calls multihead.split_heads / multihead.merge_heads, so that re-running its cells after the
    exercise stubs (def split_heads: raise NotImplementedError) have run still works; and it does not import the
    bare names, which would let a learner who skips the answer cell check the package's function."""
    nb = nbformat.read(chapter_path(3), as_version=4)
    exercises = next(i for i, c in enumerate(nb.cells)
                     if c.cell_type == "markdown" and c.source.startswith("## Exercises"))
    for i, cell in enumerate(nb.cells[:exercises]):
        if cell.cell_type != "code":
            continue
        source = "\n".join(line[:len(line) - len(line.lstrip())] + "pass" if line.lstrip().startswith(("%", "!"))
                           else line for line in cell.source.splitlines())  # IPython magics: not Python
        assert not {"split_heads", "merge_heads"} & _names_loaded(source), (i, cell.source)
    assert any("multihead.split_heads(" in c.source for c in nb.cells[:exercises])
    assert any("multihead.merge_heads(" in c.source for c in nb.cells[:exercises])


def _task(number):
    nb = nbformat.read(chapter_path(3), as_version=4)
    (task,) = [c.source for c in nb.cells if c.cell_type == "markdown" and f":label: ex-3-{number}" in c.source]
    return task


def test_3_2_task_text_says_the_check_backpropagates():
    task = _task(2)
    assert "backpropagates" in task and "`.detach()`" in task and "scores above 1000" in task


def test_3_3_task_text_says_what_the_check_accepts():
    task = _task(3)
    assert "Return an `int` (a NumPy integer is fine too), not a float or a tensor" in task
    assert "`attnbook.models.params`" in task and "`nn.TransformerEncoderLayer`" in task


# ---------------------------------------------------------------------------------------------------------
# What messages show: the input and the section; and what they do not: solution code, the expected count
# ---------------------------------------------------------------------------------------------------------


def test_3_1_messages_name_the_input_and_the_section():
    result = check("3.1", sh(method="view", shape="B, h, n, d_head", move=None))
    assert "x of shape (2, 5, 12) with n_heads=3" in result.message, result.message
    assert '(Re-read "Splitting a tensor into heads".)' in result.message, result.message


def test_3_2_messages_name_the_input_and_the_section():
    result = check("3.2", mhf(w_o=False))
    assert "x of shape (2, 5, 12), weights of shape (12, 12), n_heads=3" in result.message, result.message
    assert '(Re-read "The shapes, step by step".)' in result.message


def test_3_4_messages_name_the_input_and_the_section():
    result = check("3.4", lambda x: x.sum(dim=1))
    assert "x of shape (2, 3, 5, 4)" in result.message
    assert '(Re-read "Merging the heads, then W_O".)' in result.message


@pytest.mark.parametrize("answer", [
    sh(method="view", shape="B, h, n, d_head", move=None),
    sh(method="view", shape="B, n, d_head, h", move=(0, 3, 1, 2)),
    sh(method="view", move=None),
], ids=["view-without-transpose", "heads-interleaved", "no-transpose"])
def test_3_1_hints_show_no_solution_code(answer):
    message = check("3.1", answer).message
    for code in ("x.view(", ".transpose(1, 2)", "view(B, n, n_heads, d_head)", "View as"):
        assert code not in message, message


def test_3_2_refusal_of_a_shortcut_does_not_spell_out_the_steps():
    message = check("3.2", mhf(attention=torch.nn.functional.scaled_dot_product_attention)).message
    assert "softmax(q k^T" not in message and "@ W_o" not in message, message


def test_3_3_messages_do_not_give_the_answer_away():
    result = check("3.3", lambda d_model, n_heads, bias=True: 4 * d_model**2 + 7)
    assert not result.passed and "d_model=512, n_heads=8" in result.message
    assert "1,050,624" not in result.message and "1050624" not in result.message
    assert "count each of the four projections" in result.message


def test_3_3_type_hint_shows_no_code():
    result = check("3.3", lambda d_model, n_heads, bias=True: [4 * d_model**2])
    assert not result.passed and "return 4 *" not in result.message, result.message


def test_3_4_hint_shows_no_solution_code():
    message = check("3.4", mh(move=None)).message
    assert ".transpose(1, 2)" not in message and ".reshape(B, n, d_model)" not in message, message


# ---------------------------------------------------------------------------------------------------------
# 3.2: every attention shortcut works outside the check and is refused in it, by name
# ---------------------------------------------------------------------------------------------------------


def _small_case():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 5, 12, generator=g, dtype=torch.float64)
    return (x, *(torch.randn(12, 12, generator=g, dtype=torch.float64) for _ in range(4)), 3)


def _via_nn_multihead_attention(x, W_q, W_k, W_v, W_o, n_heads):
    d = x.size(-1)
    layer = nn.MultiheadAttention(d, n_heads, bias=False, batch_first=True).to(x.dtype)
    with torch.no_grad():
        layer.in_proj_weight.copy_(torch.cat([W_q.T, W_k.T, W_v.T]))
        layer.out_proj.weight.copy_(W_o.T)
    return layer(x, x, x, need_weights=False)[0]


def _via_attnbook_layer(x, W_q, W_k, W_v, W_o, n_heads):
    from attnbook.multihead import MultiHeadAttention

    layer = MultiHeadAttention(x.size(-1), n_heads, bias=False).to(x.dtype)
    with torch.no_grad():
        for proj, W in zip((layer.q_proj, layer.k_proj, layer.v_proj, layer.out_proj), (W_q, W_k, W_v, W_o)):
            proj.weight.copy_(W.T)
    return layer(x, x, x)[0]


def _via_functional_mha(x, W_q, W_k, W_v, W_o, n_heads):
    xt = x.transpose(0, 1)  # (n, B, d)
    out, _ = torch.nn.functional.multi_head_attention_forward(
        xt, xt, xt, x.size(-1), n_heads, torch.cat([W_q.T, W_k.T, W_v.T]), None, None, None, False, 0.0,
        W_o.T, None, need_weights=False)
    return out.transpose(0, 1)


def _attnbook_sdpa(q, k, v):
    from attnbook import scaled_dot_product_attention

    return scaled_dot_product_attention(q, k, v)[0]


@pytest.mark.parametrize("answer, name", [
    (mhf(attention=torch.nn.functional.scaled_dot_product_attention),
     "torch.nn.functional.scaled_dot_product_attention"),
    (mhf(attention=_attnbook_sdpa), "attnbook.attention.scaled_dot_product_attention"),
    (_via_nn_multihead_attention, "torch.nn.MultiheadAttention"),
    (_via_attnbook_layer, "attnbook.multihead.MultiHeadAttention"),
    (_via_functional_mha, "torch.nn.functional.multi_head_attention_forward"),
], ids=["torch-sdpa", "attnbook-sdpa", "nn-mha", "attnbook-layer", "functional-mha"])
def test_3_2_library_attention_is_refused(answer, name):
    assert answer(*_small_case()).shape == (2, 5, 12)  # the shortcut itself works outside the check ...
    result = check("3.2", answer)  # ... but the check refuses it
    refusal = f"calls {name}" if name == "attnbook.multihead.MultiHeadAttention" else f"without {name}"
    assert not result.passed and refusal in result.message, result.message


def _attention_answer(attention):
    """A right multi-head forward whose attention step is `attention(q, k, v)` (a shortcut under test), written
    here: an overload held in this module's namespace is what a notebook's learner holds (not mhf, whose module,
    mutants.ch03, does not hold it)."""

    def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
        q, k, v = (multihead.split_heads(x @ W, n_heads) for W in (W_q, W_k, W_v))
        return multihead.merge_heads(attention(q, k, v)) @ W_o

    return multi_head_forward


_SDPA_OVERLOAD = torch.ops.aten.scaled_dot_product_attention.default  # an aten overload held under a name of its own


def _flex_attention(q, k, v):
    from torch.nn.attention.flex_attention import flex_attention

    return flex_attention(q, k, v)


def _triton_attention(q, k, v):
    from attnbook.kernels.triton_attention import triton_attention

    return triton_attention(q, k, v)


@pytest.mark.parametrize("attention, name", [
    (lambda q, k, v: torch.ops.aten.scaled_dot_product_attention(q, k, v),
     "torch.ops.aten.scaled_dot_product_attention"),
    (lambda q, k, v: _SDPA_OVERLOAD(q, k, v), "torch.ops.aten.scaled_dot_product_attention.default"),
    (lambda q, k, v: torch.ops.aten._scaled_dot_product_attention_math(q, k, v)[0],
     "torch.ops.aten._scaled_dot_product_attention_math"),
    (lambda q, k, v: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v)[0],
     "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu"),
    (_flex_attention, "torch.nn.attention.flex_attention.flex_attention"),
    (_triton_attention, "attnbook.kernels.triton_attention.triton_attention"),
    (lambda q, k, v: tiled_attention(q, k, v), "attnbook.attention.tiled_attention"),
], ids=["aten-sdpa", "aten-overload-held", "aten-math", "aten-flash-cpu", "flex", "triton", "tiled"])
def test_3_2_other_attention_routes_are_refused(attention, name):
    answer = _attention_answer(attention)
    if name != "attnbook.kernels.triton_attention.triton_attention":  # Triton needs a GPU or its interpreter
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # flex_attention warns that it runs without torch.compile
            assert answer(*_small_case()).shape == (2, 5, 12)  # the shortcut itself works outside the check ...
    result = check("3.2", answer)  # ... but the check refuses it
    assert not result.passed and f"called {name} on x of shape" in result.message, result.message


@pytest.mark.parametrize("attention, name", [
    (lambda q, k, v: torch.ops.aten.scaled_dot_product_attention.default(q, k, v),
     "torch.ops.aten.scaled_dot_product_attention"),
    (lambda q, k, v: torch.ops.aten._scaled_dot_product_attention_math.default(q, k, v)[0],
     "torch.ops.aten._scaled_dot_product_attention_math"),
    (lambda q, k, v: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default(q, k, v)[0],
     "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu"),
], ids=["sdpa", "math", "flash-cpu"])
def test_3_2_aten_overloads_reached_through_torch_ops_are_refused(attention, name):
    assert attention(*(torch.randn(1, 2, 3, 4),) * 3).shape == (1, 2, 3, 4)  # works outside the check
    result = check("3.2", _attention_answer(attention))
    assert not result.passed and f"called {name} on x of shape" in result.message, result.message


def _native_mha(op):
    def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
        d = x.size(-1)
        zeros = torch.zeros(3 * d, dtype=x.dtype)
        out, _ = op(x, x, x, d, n_heads, torch.cat([W_q.T, W_k.T, W_v.T]), zeros, W_o.T, zeros[:d],
                    need_weights=False)
        return out

    return multi_head_forward


def _via_encoder_layer(x, W_q, W_k, W_v, W_o, n_heads):
    layer = nn.TransformerEncoderLayer(x.size(-1), n_heads, bias=False, batch_first=True).to(x.dtype)
    with torch.no_grad():
        layer.self_attn.in_proj_weight.copy_(torch.cat([W_q.T, W_k.T, W_v.T]))
        layer.self_attn.out_proj.weight.copy_(W_o.T)
    return layer.self_attn(x, x, x, need_weights=False)[0]


@pytest.mark.parametrize("answer, name", [
    (_native_mha(lambda *a, **k: torch._native_multi_head_attention(*a, **k)), "torch._native_multi_head_attention"),
    (_native_mha(lambda *a, **k: torch.ops.aten._native_multi_head_attention(*a, **k)),
     "torch.ops.aten._native_multi_head_attention"),
    (_via_encoder_layer, "torch.nn.TransformerEncoderLayer"),
], ids=["native-mha", "aten-native-mha", "encoder-layer"])
def test_3_2_fused_multi_head_attention_is_refused(answer, name):
    assert answer(*_small_case()).shape == (2, 5, 12)  # the shortcut itself works outside the check ...
    result = check("3.2", answer)  # ... but the check refuses it
    assert not result.passed and f"called {name} on x of shape" in result.message, result.message


# ---------------------------------------------------------------------------------------------------------
# 3.3: every other counting route gives the right count outside the check and is refused in it, by name
# ---------------------------------------------------------------------------------------------------------


def _count_with_package_linear_helper(d_model, n_heads, bias=True):
    from attnbook.models.params import _linear

    return 4 * _linear(d_model, d_model, bias)


def _count_with_package_block_formula(d_model, n_heads, bias=True):
    d_ff = 4 * d_model
    block = params.encoder_block_param_count(d_model, n_heads, d_ff)
    return block - params.ffn_param_count(d_model, d_ff) - 2 * params.layer_norm_param_count(d_model)


def _count_with_encoder_layer_on_meta(d_model, n_heads, bias=True):
    layer = nn.TransformerEncoderLayer(d_model, n_heads, bias=bias, device="meta")  # no memory for the weights
    return sum(p.numel() for p in layer.self_attn.parameters())


def _count_with_decoder_layer(d_model, n_heads, bias=True):
    layer = torch.nn.modules.transformer.TransformerDecoderLayer(d_model, n_heads, bias=bias, device="meta")
    return sum(p.numel() for p in layer.self_attn.parameters())


def _count_with_transformer(d_model, n_heads, bias=True):
    model = nn.Transformer(d_model, n_heads, 1, 1, bias=bias, batch_first=True, device="meta")
    return sum(p.numel() for p in model.encoder.layers[0].self_attn.parameters())


def _count_with_package_block(d_model, n_heads, bias=True):
    from attnbook.layers import EncoderBlock

    return sum(p.numel() for p in EncoderBlock(d_model, n_heads, 4, bias=bias).self_attn.parameters())


@pytest.mark.parametrize("answer, name", [
    (_count_with_package_linear_helper, "attnbook.models.params._linear"),
    (_count_with_package_block_formula, "attnbook.models.params.encoder_block_param_count"),
    (_count_with_encoder_layer_on_meta, "torch.nn.TransformerEncoderLayer"),
    (_count_with_decoder_layer, "torch.nn.modules.transformer.TransformerDecoderLayer"),
    (_count_with_transformer, "torch.nn.Transformer"),
    (_count_with_package_block, "attnbook.layers.EncoderBlock"),
], ids=["linear-helper", "block-formula", "encoder-layer-meta", "decoder-layer", "transformer",
        "package-block"])
def test_3_3_other_counting_routes_are_refused(answer, name):
    assert answer(8, 2) == 4 * 64 + 4 * 8  # each route gives the right count outside the check ...
    result = check("3.3", answer)  # ... but the check refuses it
    assert not result.passed and f"called {name} on d_model=512" in result.message, result.message


# ---------------------------------------------------------------------------------------------------------
# The inputs the checks use: scores where exp overflows (3.2), a non-contiguous split (3.4), and 3.3's two layers
# drawn from the run's seed, so a table of known layers does not pass
# ---------------------------------------------------------------------------------------------------------


def test_3_2_the_check_has_scores_where_exp_overflows():
    seen = []

    def multi_head_forward(x, W_q, W_k, W_v, W_o, n_heads):
        d_head = x.shape[-1] // n_heads
        q, k = ((x @ W).reshape(*x.shape[:2], n_heads, d_head).transpose(1, 2) for W in (W_q, W_k))
        seen.append(float((q @ k.transpose(-2, -1) / math.sqrt(d_head)).max()))
        return mhf()(x, W_q, W_k, W_v, W_o, n_heads)

    assert check("3.2", multi_head_forward).passed
    assert max(seen) > 710, seen  # exp overflows float64 above about 709.8


def test_3_4_check_feeds_a_non_contiguous_input():
    seen = []

    def merge_heads(x):
        seen.append((tuple(x.shape), x.is_contiguous()))
        return x.transpose(1, 2).reshape(x.size(0), x.size(2), -1)

    assert check("3.4", merge_heads).passed
    assert any(not contiguous for _, contiguous in seen), seen
    assert any(contiguous for _, contiguous in seen), seen


@pytest.mark.parametrize("fn", [merge_via_flat_view, merge_via_as_strided], ids=["flat-view", "as-strided"])
def test_3_4_merge_that_assumes_contiguous_memory_fails_on_the_split_input(fn):  # the hints: the catalogue
    x = torch.randn(2, 3, 5, 4, generator=torch.Generator().manual_seed(0))
    assert torch.equal(fn(x), torch.cat(x.unbind(dim=1), dim=-1))  # right on a contiguous input
    result = check("3.4", fn)
    assert not result.passed and "not contiguous in memory" in result.message, result.message  # the input it failed on


from seed_offsets import OFFSETS  # noqa: E402  (200 values of compare.SEED_OFFSET)


def test_3_3_drawn_layers_vary_and_keep_the_fixed_ones(monkeypatch):
    from attnbook.exercises.ch03 import mha_count_cases

    seen = set()
    for o in OFFSETS:
        monkeypatch.setattr(compare, "SEED_OFFSET", o)
        cases = mha_count_cases()
        assert cases[1] == (768, 12, True) and cases[5] == (12288, 96, True) and len(cases) == 10
        (d1, h1, b1), (d2, h2, b2) = cases[-2:]
        assert (b1, b2) == (True, False) and 2 <= min(h1, h2) and max(h1, h2) <= 16 and d1 % h1 == d2 % h2 == 0
        seen.add(tuple(cases[-2:]))
    assert len(seen) > 190


def test_3_3_drawn_layers_give_every_catalogue_entry_its_verdict(monkeypatch):
    entries = [m for m in mutants.load(3) if m.exercise_id == "3.3"]
    for o in OFFSETS[:3]:
        monkeypatch.setattr(compare, "SEED_OFFSET", o)
        assert not [(m.name, r.message) for m in entries for ok, r in [mutants.run(m)] if not ok], o
