"""Chapter 7 checkers: what the mutant catalogue (tests/mutants/ch07.py, the one home of "this answer -> this
verdict and hint") cannot say. The book's reference solutions pass; not-attempted answers are told; messages checked
for more than their hint (the section to re-read, the input that catches a mistake, no recipe, what a message must
not say); shortcuts that need transformers; a class or a module passed instead of the function; what the tasks
promise; drawn sizes over many seeds; and a conv checked from the outside."""
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import mutants
from attnbook.exercises import check

mutants.load(7)  # first: importing mutants.ch07 by name before load() would leave out the generated entries
from mutants.ch07 import conv, from_columns, patches  # noqa: E402

_RECIPES = ("reshape(D, P, P, C)", "permute(0, 3, 1, 2)", "torch.cat([cls, x]", "(B, C, H/P, P, W/P, P)",
            "images.reshape(B, C, H // P", "kernel_size=patch_size, stride=patch_size")


def _no_recipe(message):
    return not any(r in message for r in _RECIPES)


@pytest.fixture(scope="module")
def transformers_vision():
    """Import the transformers modules the shortcuts use before any check: a learner's notebook has imported them
    above, and a first import inside a checked call runs under the checker's profile hook (seconds)."""
    pytest.importorskip("transformers")
    import transformers.models.seggpt.modeling_seggpt  # noqa: F401
    import transformers.models.vit_mae.modeling_vit_mae  # noqa: F401


@pytest.mark.parametrize("exercise_id, answer, section", [
    ("7.1", patches(order=(0, 2, 4, 1, 3, 5)), "An image as a sequence of patches"),
    ("7.2", conv(stride=1), "Patchify plus a matrix is a convolution"),
    ("7.3", lambda x, cls, pos: torch.cat([cls.expand(x.size(0), -1, -1), x], dim=1),
     "The class token and the positions"),
])
def test_hints_name_the_section_to_re_read(exercise_id, answer, section):
    result = check(exercise_id, answer)
    assert not result.passed and f'(Re-read "{section}".)' in result.message, result.message


def test_the_tasks_say_what_the_checks_require():
    import nbformat

    from conftest import chapter_path

    text = "\n".join(c.source for c in nbformat.read(chapter_path(7), as_version=4).cells if c.cell_type == "markdown")
    task_1 = text[text.index("7.1 · Cut images into patches"):text.index("7.2 · The patch embedding")]
    task_2 = text[text.index("7.2 · The patch embedding"):text.index("7.3 · Prepend the class token")]
    task_3 = text[text.index("7.3 · Prepend the class token"):]
    for name in ("unpatchify", "im2col", "pixel_unshuffle", "fold", "transformers", "dtype"):
        assert name in task_1, name
    for name in ("unpatchify", "dtype=weight.dtype"):
        assert name in task_2, name
    for phrase in ("gradient", "dtype", "overwrite"):
        assert phrase in task_3, phrase


# ---------------------------------------------------------------------------------------------------------
# 7.1 patchify
# ---------------------------------------------------------------------------------------------------------


def test_7_1_reference_passes(solutions):
    result = check("7.1", solutions(7)["patchify"])
    assert result.passed, result.message


def test_7_1_not_attempted():
    def patchify(images, patch_size):
        raise NotImplementedError

    assert check("7.1", patchify).status == "not attempted"


def test_7_1_a_class_or_a_module_instead_of_the_function():
    result = check("7.1", nn.Flatten)
    assert not result.passed and "class Flatten" in result.message and "check(..., patchify)" in result.message
    result = check("7.1", nn.Flatten(1))
    assert not result.passed and "pass the function itself, without calling it" in result.message, result.message


def test_7_1_channel_order_is_caught_on_the_worked_example():
    result = check("7.1", patches(order=(0, 2, 4, 1, 3, 5)))  # right for one channel, wrong for RGB
    assert "worked example" in result.message, result.message


@pytest.mark.parametrize(
    "convert, got, expected",
    [
        (lambda t: t.float(), "torch.float32", "torch.float64"),  # exact on whole numbers, so it used to pass
        (lambda t: t.double(), "torch.float64", "torch.float32"),  # on the float32 input
        (lambda t: t.to(torch.int64), "torch.int64", "floating point (torch.float64)"),
    ],
    ids=["float", "double", "long"],
)
def test_7_1_the_result_keeps_the_dtype_of_the_images(convert, got, expected):
    result = check("7.1", lambda images, patch_size: convert(patches()(images, patch_size)))
    assert not result.passed
    assert f"dtype {got}" in result.message and f"expected {expected}" in result.message, result.message


def test_7_1_splitting_h_into_p_then_h_over_p_gets_its_own_hint():
    # reshape(B, C, P, H/P, P, W/P): grid and pixel indices swapped
    result = check("7.1", patches(split="(P, H/P)", order=(0, 3, 5, 2, 4, 1)))
    assert not result.passed
    assert "split H into (P, H/P) instead of (H/P, P)" in result.message, result.message
    assert "F.unfold" not in result.message, result.message  # it used to get the unfold-layout hint


def test_7_1_height_used_for_the_width_is_told_the_images_are_not_square():
    result = check("7.1", patches(square=True))
    assert not result.passed and "not square" in result.message and "fixed numbers" in result.message, result.message


def test_7_1_reading_the_shape_as_b_c_w_h_is_named():
    result = check("7.1", patches(shape="(B, C, W, H)"))
    assert not result.passed and "(B, C, W, H)" in result.message and "non-square" in result.message, result.message


def test_7_1_one_channel_kept_gets_a_channel_hint():
    result = check("7.1", lambda images, patch_size: patches()(images[:, :1], patch_size))
    assert not result.passed and "P*P*C = 12" in result.message and "every channel" in result.message, result.message


def test_7_1_messages_give_no_recipe():
    def plain(images, patch_size):
        B, C, H, W = images.shape
        return images.reshape(B, (H // patch_size) * (W // patch_size), patch_size ** 2 * C)

    for answer in (plain, lambda images, p: F.pixel_unshuffle(images, p).flatten(2).transpose(1, 2)):
        result = check("7.1", answer)
        assert not result.passed and _no_recipe(result.message), result.message


@pytest.mark.parametrize(
    "shortcut, name",
    [
        (lambda images, p: F.unfold(images, p, stride=p).transpose(1, 2), "torch.nn.functional.unfold"),
        (lambda images, p: nn.Unfold(p, stride=p)(images).transpose(1, 2), "torch.nn.Unfold"),
    ],
    ids=["F.unfold", "nn.Unfold"],
)
def test_7_1_shortcuts_are_refused_without_a_recipe(shortcut, name):
    result = check("7.1", shortcut)
    assert not result.passed
    assert f"without {name}" in result.message, result.message
    assert _no_recipe(result.message), result.message  # the way out is not spelled out step by step


def _vit_mae_patchify(images, patch_size):
    from types import SimpleNamespace

    from transformers.models.vit_mae.modeling_vit_mae import ViTMAEForPreTraining

    owner = SimpleNamespace(config=SimpleNamespace(patch_size=patch_size, num_channels=images.size(1)))
    return ViTMAEForPreTraining.patchify(owner, images, interpolate_pos_encoding=True)


def _seggpt_when_rgb(images, patch_size):
    from transformers.models.seggpt.modeling_seggpt import patchify

    return patchify(images, patch_size) if images.size(1) == 3 else patches()(images, patch_size)


@pytest.mark.parametrize(
    "shortcut, name",
    [
        (_vit_mae_patchify, "transformers.models.vit_mae.modeling_vit_mae.patchify"),
        (_seggpt_when_rgb, "transformers.models.seggpt.modeling_seggpt.patchify"),
        # the same function as F.pixel_unshuffle, reached through an argument: either name may be the one shown
        (from_columns(torch.pixel_unshuffle), "pixel_unshuffle"),
    ],
    ids=["ViTMAE.patchify", "seggpt.patchify", "torch.pixel_unshuffle"],
)
def test_7_1_more_shortcuts_are_refused(shortcut, name, transformers_vision):
    result = check("7.1", shortcut)
    assert not result.passed
    assert "the task asks you to write this without" in result.message and name in result.message, result.message


# ---------------------------------------------------------------------------------------------------------
# 7.2 the patch embedding as a convolution
# ---------------------------------------------------------------------------------------------------------


def test_7_2_reference_passes(solutions):
    result = check("7.2", solutions(7)["patch_embedding_as_conv"])
    assert result.passed, result.message


def test_7_2_a_conv_or_the_conv_class_instead_of_the_function():
    made = conv()(torch.randn(8, 12), torch.randn(8), 2)  # called, then the Conv2d passed
    result = check("7.2", made)
    assert not result.passed
    assert "a Conv2d module" in result.message and "without calling it" in result.message, result.message
    result = check("7.2", nn.Conv2d)
    assert not result.passed
    assert "class Conv2d" in result.message and "check(..., patch_embedding_as_conv)" in result.message
    assert "if mask" not in result.message, result.message


def test_7_2_plain_reshape_is_caught_on_the_first_colour_input_without_a_recipe():
    result = check("7.2", conv(kernel=lambda w, D, C, P: w.reshape(D, C, P, P)))
    assert not result.passed and "plain reshape" in result.message and "C=3" in result.message, result.message
    assert _no_recipe(result.message), result.message


def test_7_2_unpatchify_is_refused_without_a_recipe():
    def via_unpatchify(weight, bias, patch_size):
        from attnbook.patches import unpatchify

        return unpatchify(weight[:, None], patch_size, patch_size, patch_size)

    result = check("7.2", via_unpatchify)
    assert not result.passed and "without attnbook.patches.unpatchify" in result.message
    assert _no_recipe(result.message), result.message


def test_7_2_to_conv_is_named_as_the_package_s_own_solution():
    def via_to_conv(weight, bias, patch_size):
        from attnbook.patches import PatchEmbedding

        P = patch_size
        emb = PatchEmbedding(P, weight.size(1) // (P * P), weight.size(0))
        with torch.no_grad():
            emb.proj.weight.copy_(weight)
            emb.proj.bias.copy_(bias)
        return emb.to_conv()

    result = check("7.2", via_to_conv)
    assert not result.passed and "attnbook.patches.PatchEmbedding" in result.message, result.message
    assert "the package's own solution" in result.message, result.message


def test_7_2_the_conv_must_have_the_dtype_of_the_weights():
    result = check("7.2", conv(dtype=None))  # nn.Conv2d without dtype=: float32 for float64 weights
    assert not result.passed
    assert "dtype torch.float32" in result.message and "expected torch.float64" in result.message, result.message
    assert "dtype=weight.dtype" in result.message, result.message
    result = check("7.2", conv(dtype=torch.float64))  # hard-coded float64: wrong for float32 weights
    assert not result.passed
    assert "dtype torch.float64" in result.message and "expected torch.float32" in result.message, result.message


@pytest.mark.parametrize(
    "source",
    [
        "attnbook.patches.unpatchify(weight[:, None], P, P, P)",
        "ViTMAEForPreTraining.unpatchify(SimpleNamespace(config=SimpleNamespace(patch_size=P, num_channels=C)), "
        "weight[:, None], (P, P))",
    ],
    ids=["attnbook.unpatchify", "ViTMAE.unpatchify"],
)
def test_7_2_unpatchify_is_refused(source, transformers_vision):
    from types import SimpleNamespace

    import attnbook.patches
    from transformers.models.vit_mae.modeling_vit_mae import ViTMAEForPreTraining

    def patch_embedding_as_conv(weight, bias, patch_size):
        P = patch_size
        D, C = weight.size(0), weight.size(1) // (P * P)
        conv = nn.Conv2d(C, D, P, P, dtype=weight.dtype)
        kernel = eval(source, {"attnbook": attnbook, "ViTMAEForPreTraining": ViTMAEForPreTraining,
                               "SimpleNamespace": SimpleNamespace, "weight": weight, "P": P, "C": C})
        with torch.no_grad():
            conv.weight.copy_(kernel)  # (D, C, P, P), ready-made
            conv.bias.copy_(bias)
        return conv

    result = check("7.2", patch_embedding_as_conv)
    assert not result.passed
    assert "without" in result.message and "unpatchify" in result.message, result.message


def _aliasing_conv(share_weight: bool, share_bias: bool):
    def patch_embedding_as_conv(weight, bias, patch_size):
        P = patch_size
        D, C = weight.size(0), weight.size(1) // (P * P)
        made = nn.Conv2d(C, D, kernel_size=P, stride=P, dtype=weight.dtype)
        kernel = weight.reshape(D, P, P, C).permute(0, 3, 1, 2)  # a view of weight
        made.weight = nn.Parameter(kernel if share_weight else kernel.clone())
        made.bias = nn.Parameter(bias if share_bias else bias.clone())
        return made

    return patch_embedding_as_conv


@pytest.mark.parametrize("share_weight, share_bias, name", [
    (True, True, "weight"), (True, False, "weight"), (False, True, "bias")])
def test_7_2_parameters_that_share_the_caller_s_tensors_are_refused(share_weight, share_bias, name):
    """nn.Parameter(a view of weight) or nn.Parameter(bias) has the right values but is the caller's memory:
    zeroing the conv's weight would zero the Linear's. The task says to copy."""
    result = check("7.2", _aliasing_conv(share_weight, share_bias))
    assert not result.passed, result.message
    assert f"your Conv2d's {name} shares its memory with the `{name}` you were given" in result.message
    assert ".clone()" in result.message and '(Re-read "Patchify plus a matrix is a convolution".)' in result.message


def test_7_2_the_conv_the_check_accepts_owns_its_memory():
    """What the check accepts, checked from the outside: changing the returned conv leaves weight and bias as
    they were (the task's "copy the weights into it")."""
    weight, bias = torch.randn(5, 12, dtype=torch.float64), torch.randn(5, dtype=torch.float64)
    for answer in (_aliasing_conv(False, False), conv()):
        made = answer(weight, bias, 2)
        before = weight.clone(), bias.clone()
        with torch.no_grad():
            made.weight.zero_()
            made.bias.zero_()
        assert torch.equal(weight, before[0]) and torch.equal(bias, before[1])
    made = _aliasing_conv(True, True)(weight, bias, 2)
    with torch.no_grad():
        made.weight.zero_()
    assert not weight.any()  # the refused answer really does alias


def test_7_2_the_no_grad_hint_says_to_copy():
    """The hint for a copy_ outside no_grad offers new parameters, and says they must be made from copies (a
    Parameter made from a view of weight shares it)."""
    result = check("7.2", conv(no_grad=False))
    assert not result.passed and "nn.Parameter(t.clone())" in result.message, result.message
    assert "conv.weight = nn.Parameter(...)" not in result.message, result.message


# ---------------------------------------------------------------------------------------------------------
# 7.3 prepend the class token, add the positions
# ---------------------------------------------------------------------------------------------------------


def test_7_3_reference_passes(solutions):
    result = check("7.3", solutions(7)["prepend_cls"])
    assert result.passed, result.message


def test_7_3_a_missing_expand_fails_on_a_batch_larger_than_one():
    result = check("7.3", lambda x, cls, pos: torch.cat([cls, x], dim=1) + pos)
    batch = re.search(r"\(batch (\d+), ", result.message)
    assert batch and int(batch.group(1)) > 1, result.message


def test_7_3_overwriting_the_first_patch_is_told_to_concatenate():
    def prepend_cls(x, cls, pos):
        y = x.clone()
        y[:, 0] = cls[:, 0]
        return y + pos[:, 1:]

    result = check("7.3", prepend_cls)
    assert not result.passed
    assert "overwrote the first patch" in result.message and "don't overwrite one" in result.message
    assert "added cls to every patch" not in result.message, result.message


def test_7_3_slicing_pos_after_the_concatenation_is_told_pos_has_n_plus_1_rows():
    def prepend_cls(x, cls, pos):
        return torch.cat([cls.expand(x.size(0), -1, -1), x], dim=1) + pos[:, : x.shape[1]]

    result = check("7.3", prepend_cls)
    assert not result.passed
    assert "pos has N + 1 rows, one per token including the class token" in result.message, result.message
    assert "keepdim" not in result.message, result.message


@pytest.mark.parametrize(
    "prepend_cls, hint",
    [
        (lambda x, cls, pos: (torch.cat([cls.expand(x.size(0), -1, -1), x], dim=1) + pos).float(), "float32"),
        (lambda x, cls, pos: (torch.cat([cls.expand(x.size(0), -1, -1), x], dim=1) + pos).double(), "float64"),
    ],
    ids=["float", "double"],
)
def test_7_3_the_result_keeps_the_dtype_of_x(prepend_cls, hint):
    result = check("7.3", prepend_cls)
    assert not result.passed
    assert f"has dtype torch.{hint}" in result.message and "the dtype of x" in result.message, result.message
    assert "max abs error" not in result.message, result.message


def test_7_3_a_new_float32_tensor_filled_in_is_told_it_lost_precision():
    def prepend_cls(x, cls, pos):
        B, N, D = x.shape
        out = torch.zeros(B, N + 1, D)  # float32 whatever x is
        out[:, 0] = cls[0, 0]
        out[:, 1:] = x
        return out + pos

    result = check("7.3", prepend_cls)  # float32 + float64 pos is float64 again, but rounded to float32 on the way
    assert not result.passed and "right only to about float32 precision" in result.message, result.message
    assert "dtype=<input>.dtype" in result.message, result.message


@pytest.mark.parametrize(
    "prepend_cls, name",
    [
        (lambda x, cls, pos: torch.cat([cls.detach().expand(x.size(0), -1, -1), x], dim=1) + pos, "`cls`"),
        (lambda x, cls, pos: torch.cat([cls.expand(x.size(0), -1, -1), x], dim=1) + pos.detach(), "`pos`"),
        (lambda x, cls, pos: torch.cat([cls.expand(x.size(0), -1, -1), x.detach()], dim=1) + pos, "`x`"),
        (lambda x, cls, pos: (torch.cat([cls.expand(x.size(0), -1, -1), x], dim=1) + pos).detach(), "no gradient"),
    ],
    ids=["cls.detach", "pos.detach", "x.detach", "result.detach"],
)
def test_7_3_gradients_must_reach_cls_pos_and_x(prepend_cls, name):
    result = check("7.3", prepend_cls)
    assert not result.passed
    assert name in result.message and "requir" in result.message, result.message
    assert "learned parameters" in result.message, result.message


@pytest.mark.parametrize("prepend_cls, piece", [
    (lambda x, cls, pos: torch.cat([cls.expand(x.size(0), -1, -1) + pos[:, -1:], x + pos[:, :-1]], 1), "pos[:, 0]"),
    (lambda x, cls, pos: (torch.cat([cls, x[:1]], 1) + pos).expand(x.size(0), -1, -1), "first image"),
    (lambda x, cls, pos: torch.cat([cls.expand(*x.shape), x], -1), "dim=1"),
    (lambda x, cls, pos: torch.cat([cls.expand(x.size(0), -1, -1), x], 1) + pos[:, :1], "all of pos"),
    (lambda x, cls, pos: torch.cat([x[:, :1] * 0 + cls, x[:, 1:]], 1) + pos[:, 1:], "overwrote"),
    (lambda x, cls, pos: torch.cat([cls.expand(x.size(0), -1, -1), x + cls], 1) + pos, "added cls to the patches"),
    (lambda x, cls, pos: torch.cat([cls.expand(x.size(0), -1, -1), x], 1) + cls + pos, "added cls to every token"),
], ids=["positions-before-concat", "first-image-only", "feature-axis", "only-pos0", "overwrite", "cls-to-patches",
        "cls-to-every-token"])
def test_7_3_more_mistakes_are_named_without_the_solution_line(prepend_cls, piece):
    result = check("7.3", prepend_cls)
    assert not result.passed and piece in result.message and _no_recipe(result.message), result.message


@pytest.mark.parametrize("dim", [2, -1, 0])
def test_7_3_a_concatenation_along_another_dim_is_told_the_token_axis(dim):
    """cls expanded, but joined along the features or the batch: the error names that dim, and the hint says the
    token axis is dim 1 (not the expand hint: cls was expanded)."""
    def prepend_cls(x, cls, pos):
        return torch.cat([cls.expand(x.size(0), -1, -1), x], dim) + pos

    result = check("7.3", prepend_cls)
    assert not result.passed, result.message
    assert "the token axis, dim 1" in result.message, result.message
    assert "expand cls over the batch" not in result.message, result.message


def test_7_3_the_expand_hint_is_kept_for_a_missing_or_fixed_expand():
    no_expand = check("7.3", lambda x, cls, pos: torch.cat([cls, x], 1) + pos)
    assert not no_expand.passed and "expand cls over the batch" in no_expand.message, no_expand.message
    fixed = check("7.3", lambda x, cls, pos: torch.cat([cls.expand(3, -1, -1), x], 1) + pos)
    assert not fixed.passed and "your class tokens have batch size 3" in fixed.message, fixed.message
    assert "x.size(0)" in fixed.message


# ---------------------------------------------------------------------------------------------------------
# Sizes drawn from the run's seed (issue 23): a size fixed in the code fails under every seed
# ---------------------------------------------------------------------------------------------------------

from seed_offsets import OFFSETS, catalogue_over_offsets  # noqa: E402  (`offset` is a fixture in conftest)


def test_7_3_every_seed_has_sizes_no_fixed_size_fits(offset):
    """Under every seed: the batch sizes, numbers of patches and d_models vary (a size fixed as a shape fails),
    one case exceeds each usual size (a size fixed as a slice fails: batches of 3, 64, 128 or 256; 16, 196 or 256
    patches; d_model 64 or 768), and the draws differ from seed to seed (none can be known in advance)."""
    from attnbook.exercises import ch07

    seen = set()
    for o in OFFSETS:
        offset(o)
        cases = ch07.cls_cases()
        batches, patches, widths = ({c[k] for c in cases} for k in range(3))
        assert min(len(batches), len(patches), len(widths)) >= 3
        assert max(batches) > 256 and max(patches) + 1 > 257 and max(widths) > 768
        assert any(17 < n + 1 for b, n, d, *_ in cases if b > 1 and d < 64)  # past 16 patches with small sizes
        assert {c[0] for c in cases} >= {1, 2} and any(c[1] == 1 for c in cases)  # a batch of one, one patch
        assert any(c[3] == torch.float32 for c in cases) and any(c[4] for c in cases)
        seen.add(tuple(cases))
    assert len(seen) == len(OFFSETS)


@pytest.mark.parametrize("exercise_id", ["7.1", "7.2", "7.3"])
def test_drawn_cases_give_every_catalogue_entry_its_verdict(exercise_id, monkeypatch):
    """The catalogue's verdicts hold under other seeds too (two here, and seeds 0 to 2 in test_remote)."""
    catalogue_over_offsets(exercise_id, OFFSETS[:2], monkeypatch, generated=False)
