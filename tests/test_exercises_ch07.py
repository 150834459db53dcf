"""Chapter 7 checkers: the book's reference solutions pass; plausible wrong answers fail with the right hint."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attnbook.exercises import check

# ---------------------------------------------------------------------------------------------------------
# 7.1 patchify
# ---------------------------------------------------------------------------------------------------------


def test_7_1_reference_passes(solutions):
    result = check("7.1", solutions(7)["patchify"])
    assert result.passed, result.message


def test_7_1_a_loop_over_pixels_passes():
    def patchify(images, patch_size):  # the definition, written out with explicit loops
        B, C, H, W = images.shape
        P = patch_size
        rows = []
        for b in range(B):
            patches = []
            for gi in range(H // P):
                for gj in range(W // P):
                    patches.append(torch.stack([images[b, c, gi * P + i, gj * P + j]
                                                for i in range(P) for j in range(P) for c in range(C)]))
            rows.append(torch.stack(patches))
        return torch.stack(rows)

    result = check("7.1", patchify)
    assert result.passed, result.message


def test_7_1_tensor_unfold_is_allowed():
    def patchify(images, patch_size):
        B, C, H, W = images.shape
        P = patch_size
        x = images.unfold(2, P, P).unfold(3, P, P)  # (B, C, H/P, W/P, P, P)
        return x.permute(0, 2, 3, 4, 5, 1).reshape(B, -1, P * P * C)

    result = check("7.1", patchify)
    assert result.passed, result.message


def test_7_1_not_attempted():
    def patchify(images, patch_size):
        raise NotImplementedError

    assert check("7.1", patchify).status == "not attempted"


def _axes(order):
    """A patchify that splits (B, C, H, W) into (B, C, gh, P, gw, P) and permutes the axes into `order`."""

    def patchify(images, patch_size):
        B, C, H, W = images.shape
        P = patch_size
        x = images.reshape(B, C, H // P, P, W // P, P).permute(*order)
        return x.reshape(B, (H // P) * (W // P), P * P * C)

    return patchify


def plain_reshape(images, patch_size):
    B, C, H, W = images.shape
    return images.reshape(B, (H // patch_size) * (W // patch_size), patch_size * patch_size * C)


def transposed_image(images, patch_size):
    return _axes((0, 2, 4, 3, 5, 1))(images.transpose(2, 3), patch_size)


def drops_the_batch(images, patch_size):
    return _axes((0, 2, 4, 3, 5, 1))(images, patch_size).squeeze(0)


def patches_last(images, patch_size):
    return _axes((0, 2, 4, 3, 5, 1))(images, patch_size).transpose(1, 2)


def fixed_patch_size(images, patch_size):
    return _axes((0, 2, 4, 3, 5, 1))(images, 2)


def three_dimensional(images, patch_size):
    C, H, W = images.shape  # forgets the batch dimension
    return images.reshape(C, H // patch_size, patch_size, W // patch_size, patch_size)


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (_axes((0, 2, 4, 1, 3, 5)), "channels come first"),
        (_axes((0, 4, 2, 3, 5, 1)), "column-major order (down the first column"),
        (_axes((0, 2, 4, 5, 3, 1)), "pixels inside each patch are in column-major order"),
        (transposed_image, "transposed image"),
        (plain_reshape, "a plain reshape"),
        (drops_the_batch, "no batch dimension"),
        (patches_last, "put the patches on dim 1"),
        (fixed_patch_size, "use the patch_size argument"),
        (three_dimensional, "four dimensions"),
    ],
    ids=["channels-first", "column-major-grid", "transposed-pixels", "transposed-image",
         "plain-reshape", "no-batch", "patches-last", "fixed-P", "3-D-unpack"],
)
def test_7_1_wrong_answers_get_hints(wrong, hint):
    result = check("7.1", wrong)
    assert not result.passed
    assert hint in result.message, result.message
    assert '(Re-read "An image as a sequence of patches".)' in result.message


def test_7_1_channel_order_is_caught_on_the_worked_example():
    result = check("7.1", _axes((0, 2, 4, 1, 3, 5)))  # right for one channel, wrong for RGB
    assert "worked example" in result.message, result.message


@pytest.mark.parametrize(
    "shortcut, name",
    [
        (lambda images, p: F.unfold(images, p, stride=p).transpose(1, 2), "torch.nn.functional.unfold"),
        (lambda images, p: nn.Unfold(p, stride=p)(images).transpose(1, 2), "torch.nn.Unfold"),
        (lambda images, p: __import__("attnbook.patches", fromlist=["patchify"]).patchify(images, p),
         "attnbook.patches.patchify"),
    ],
    ids=["F.unfold", "nn.Unfold", "attnbook"],
)
def test_7_1_shortcuts_are_refused(shortcut, name):
    result = check("7.1", shortcut)
    assert not result.passed
    assert f"without {name}" in result.message, result.message


def test_7_1_the_package_function_itself_is_refused():
    from attnbook.patches import patchify

    result = check("7.1", patchify)
    assert not result.passed and "attnbook.patches.patchify" in result.message, result.message


# ---------------------------------------------------------------------------------------------------------
# 7.2 the patch embedding as a convolution
# ---------------------------------------------------------------------------------------------------------


def test_7_2_reference_passes(solutions):
    result = check("7.2", solutions(7)["patch_embedding_as_conv"])
    assert result.passed, result.message


def test_7_2_assigning_new_parameters_passes():
    def patch_embedding_as_conv(weight, bias, patch_size):
        P = patch_size
        D, C = weight.shape[0], weight.shape[1] // (P * P)
        conv = nn.Conv2d(C, D, P, P)
        kernel = weight.view(D, P, P, C).transpose(1, 3).transpose(2, 3)  # (D, C, P, P) by two swaps
        conv.weight = nn.Parameter(kernel.contiguous().clone())
        conv.bias = nn.Parameter(bias.clone())
        return conv

    result = check("7.2", patch_embedding_as_conv)
    assert result.passed, result.message


def make_conv(*, layout="right", bias="copy", stride=None, kernel=None, swap_channels=False, returns="conv",
              no_grad=True):
    """A patch_embedding_as_conv with one deliberate mistake (the defaults give a correct one)."""

    def patch_embedding_as_conv(weight, bias_, patch_size):
        P = patch_size
        D, C = weight.size(0), weight.size(1) // (P * P)
        k = kernel if kernel is not None else P
        conv = nn.Conv2d(D if swap_channels else C, C if swap_channels else D, kernel_size=k,
                         stride=stride if stride is not None else P, bias=bias != "none")
        w = {"right": weight.reshape(D, P, P, C).permute(0, 3, 1, 2),
             "reshape": weight.reshape(D, C, P, P),
             "spatial": weight.reshape(D, P, P, C).permute(0, 3, 2, 1)}[layout]
        if returns == "weight":
            return w
        context = torch.no_grad() if no_grad else torch.enable_grad()
        with context:
            if conv.weight.shape == w.shape:
                conv.weight.copy_(w)
            if bias == "copy" and conv.bias.shape == bias_.shape:
                conv.bias.copy_(bias_)
            elif bias == "zero":
                conv.bias.zero_()
        return conv

    return patch_embedding_as_conv


def test_7_2_a_correct_variant_passes():
    assert check("7.2", make_conv()).passed


@pytest.mark.parametrize(
    "kwargs, hint",
    [
        ({"layout": "reshape"}, "weight.reshape(D, C, P, P) reads the columns"),
        ({"layout": "spatial"}, "rows and columns of your kernel are swapped"),
        ({"bias": "none"}, "has no bias"),
        ({"bias": "default"}, "random bias of its own"),
        ({"bias": "zero"}, "bias is all zeros"),
        ({"stride": 1}, "with stride 1"),
        ({"kernel": 1, "stride": 1}, "kernel_size=patch_size"),
        ({"swap_channels": True}, "in_channels and out_channels are swapped"),
        ({"returns": "weight"}, "looks like the kernel"),
        ({"no_grad": False}, "torch.no_grad()"),
    ],
    ids=lambda x: str(x) if isinstance(x, dict) else "",
)
def test_7_2_wrong_answers_get_hints(kwargs, hint):
    result = check("7.2", make_conv(**kwargs))
    assert not result.passed, kwargs
    assert hint in result.message, (kwargs, result.message)
    assert '(Re-read "Patchify plus a matrix is a convolution".)' in result.message


def test_7_2_a_copy_into_a_conv_of_the_wrong_shape_gets_a_hint():
    def patch_embedding_as_conv(weight, bias, patch_size):
        P = patch_size
        D, C = weight.size(0), weight.size(1) // (P * P)
        conv = nn.Conv2d(D, C, kernel_size=P, stride=P)  # in and out swapped
        with torch.no_grad():
            conv.bias.copy_(bias)
        return conv

    result = check("7.2", patch_embedding_as_conv)
    assert not result.passed and "takes in_channels C first" in result.message, result.message


def test_7_2_plain_reshape_is_caught_on_the_first_colour_input():
    result = check("7.2", make_conv(layout="reshape"))
    assert "C=3" in result.message, result.message


def test_7_2_to_conv_and_from_conv_are_refused():
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


def test_7_2_returning_something_else():
    assert "expected an nn.Conv2d" in check("7.2", lambda w, b, p: nn.Linear(2, 2)).message
    assert "return conv" in check("7.2", lambda w, b, p: None).message


# ---------------------------------------------------------------------------------------------------------
# 7.3 prepend the class token, add the positions
# ---------------------------------------------------------------------------------------------------------


def test_7_3_reference_passes(solutions):
    result = check("7.3", solutions(7)["prepend_cls"])
    assert result.passed, result.message


def test_7_3_repeat_and_separate_additions_pass():
    def prepend_cls(x, cls, pos):
        first = cls.repeat(x.shape[0], 1, 1) + pos[:, :1]
        return torch.cat((first, x + pos[:, 1:]), dim=1)

    result = check("7.3", prepend_cls)
    assert result.passed, result.message


def cls_at_the_end(x, cls, pos):
    return torch.cat([x, cls.expand(x.size(0), -1, -1)], dim=1) + pos


def positions_before_concatenation(x, cls, pos):
    return torch.cat([cls.expand(x.size(0), -1, -1), x + pos[:, 1:]], dim=1)


def positions_shifted(x, cls, pos):
    return torch.cat([cls.expand(x.size(0), -1, -1), x + pos[:, : x.size(1)]], dim=1)


def not_expanded(x, cls, pos):
    return torch.cat([cls, x], dim=1) + pos


def in_place(x, cls, pos):
    x += pos[:, 1:]
    return torch.cat([cls.expand(x.size(0), -1, -1) + pos[:, :1], x], dim=1)


def positions_twice(x, cls, pos):
    out = torch.cat([cls.expand(x.size(0), -1, -1) + pos[:, :1], x + pos[:, 1:]], dim=1)
    return out + pos


def no_positions(x, cls, pos):
    return torch.cat([cls.expand(x.size(0), -1, -1), x], dim=1)


def cls_added_to_patches(x, cls, pos):
    return x + cls + pos[:, 1:]


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (cls_at_the_end, "goes first"),
        (positions_before_concatenation, "before the concatenation"),
        (positions_shifted, "patch i must get pos[:, i + 1]"),
        (not_expanded, "expand it over the batch"),
        (in_place, "in place"),
        (positions_twice, "positions twice"),
        (no_positions, "forgot the positions"),
        (cls_added_to_patches, "in front as a token of its own"),
    ],
    ids=lambda x: getattr(x, "__name__", ""),
)
def test_7_3_wrong_answers_get_hints(wrong, hint):
    result = check("7.3", wrong)
    assert not result.passed
    assert hint in result.message, result.message
    assert '(Re-read "The class token and the positions".)' in result.message


def test_7_3_a_missing_expand_fails_on_a_batch_larger_than_one():
    result = check("7.3", not_expanded)
    assert "batch 3" in result.message, result.message
