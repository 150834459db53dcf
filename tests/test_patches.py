"""Tests of attnbook.patches: a hand-built worked example, an explicit loop, torch's F.unfold and nn.Conv2d."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attnbook.patches import PatchEmbedding, grid_size, patchify, unpatchify

TOL = dict(atol=1e-12, rtol=1e-12)

SIZES = [  # (batch, channels, height, width, patch_size)
    (2, 3, 4, 6, 2),
    (1, 1, 8, 8, 4),
    (3, 2, 6, 9, 3),
    (2, 4, 5, 5, 5),
    (1, 3, 4, 2, 1),
    (2, 3, 8, 8, 2),
]


def randn(*shape, seed: int, dtype=torch.float64) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def randomize_(module: nn.Module, seed: int) -> nn.Module:
    """Give every parameter random values (a zero bias would hide a missing or misplaced bias)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype))
    return module


def worked_example_image() -> torch.Tensor:
    """The chapter's 2x2 RGB image, (1, 3, 2, 2), built from its (R, G, B) pixels in row-major order."""
    pixels = [[(10, 20, 30), (40, 50, 60)],  # top row: top-left, top-right
              [(70, 80, 90), (100, 110, 120)]]  # bottom row: bottom-left, bottom-right
    hwc = torch.tensor(pixels, dtype=torch.float64)  # (H, W, C) = (2, 2, 3)
    return hwc.permute(2, 0, 1)[None]  # (1, C, H, W)


def loop_patchify(images: torch.Tensor, P: int) -> torch.Tensor:
    """patchify written as the definition: grid rows, grid columns, pixel rows, pixel columns, channels."""
    B, C, H, W = images.shape
    out = []
    for b in range(B):
        patches = []
        for gi in range(H // P):
            for gj in range(W // P):
                vec = [images[b, c, gi * P + pi, gj * P + pj].item()
                       for pi in range(P) for pj in range(P) for c in range(C)]
                patches.append(vec)
        out.append(patches)
    return torch.tensor(out, dtype=images.dtype)


def unfold_patchify(images: torch.Tensor, P: int) -> torch.Tensor:
    """patchify from torch's F.unfold, whose columns are ordered (channel, pixel row, pixel column)."""
    B, C = images.shape[:2]
    cols = F.unfold(images, kernel_size=P, stride=P)  # (B, C*P*P, L), patches in row-major order
    L = cols.size(-1)
    return cols.reshape(B, C, P * P, L).permute(0, 3, 2, 1).reshape(B, L, P * P * C)  # channels innermost


def conv_sequence(conv: nn.Conv2d, images: torch.Tensor) -> torch.Tensor:
    """A convolution's output (B, D, gh, gw) read as a sequence (B, gh*gw, D) in row-major order."""
    return conv(images).flatten(2).transpose(1, 2)


# ----------------------------------------------------------------------------------------------------------
# patchify / unpatchify
# ----------------------------------------------------------------------------------------------------------


def test_worked_example_rgb_patch_flattens_to_10_through_120():
    out = patchify(worked_example_image(), 2)
    expected = torch.tensor([[[10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120]]], dtype=torch.float64)
    assert out.shape == (1, 1, 12)
    assert torch.equal(out, expected)


def test_worked_example_with_one_pixel_patches():
    out = patchify(worked_example_image(), 1)  # every pixel its own patch: 4 patches of (R, G, B)
    expected = torch.tensor([[[10, 20, 30], [40, 50, 60], [70, 80, 90], [100, 110, 120]]], dtype=torch.float64)
    assert torch.equal(out, expected)


@pytest.mark.parametrize("B, C, H, W, P", SIZES)
def test_patchify_matches_explicit_loop(B, C, H, W, P):
    x = randn(B, C, H, W, seed=H * W + C)
    out = patchify(x, P)
    assert out.shape == (B, (H // P) * (W // P), P * P * C)
    assert torch.equal(out, loop_patchify(x, P))


@pytest.mark.parametrize("B, C, H, W, P", SIZES)
def test_patchify_matches_unfold(B, C, H, W, P):
    x = randn(B, C, H, W, seed=H + W + C)
    assert torch.equal(patchify(x, P), unfold_patchify(x, P))


def test_patchify_keeps_dtype_and_integer_images():
    x = torch.arange(2 * 3 * 4 * 4).reshape(2, 3, 4, 4)  # int64
    out = patchify(x, 2)
    assert out.dtype == torch.int64
    assert torch.equal(out, loop_patchify(x, 2))


@pytest.mark.parametrize("B, C, H, W, P", SIZES)
def test_unpatchify_inverts_patchify(B, C, H, W, P):
    x = randn(B, C, H, W, seed=7 * C + P)
    assert torch.equal(unpatchify(patchify(x, P), P, H, W), x)
    p = randn(B, (H // P) * (W // P), P * P * C, seed=P)
    assert torch.equal(patchify(unpatchify(p, P, H, W), P), p)


def test_grid_size():
    assert grid_size(8, 8, 2) == (4, 4)
    assert grid_size(6, 9, 3) == (2, 3)
    with pytest.raises(ValueError, match=r"height=6, width=9.*patch_size=2"):
        grid_size(6, 9, 2)


def test_patchify_size_not_a_multiple_names_the_sizes():
    with pytest.raises(ValueError, match=r"height=7, width=8.*patch_size=2"):
        patchify(torch.zeros(1, 1, 7, 8), 2)
    with pytest.raises(ValueError, match=r"height=8, width=10.*patch_size=4"):
        patchify(torch.zeros(1, 1, 8, 10), 4)


def test_patchify_bad_arguments():
    with pytest.raises(TypeError, match="images"):
        patchify([[1.0]], 1)
    with pytest.raises(ValueError, match="4-D"):
        patchify(torch.zeros(3, 4, 4), 2)
    with pytest.raises(ValueError, match="patch_size"):
        patchify(torch.zeros(1, 1, 4, 4), 0)
    with pytest.raises(TypeError, match="patch_size"):
        patchify(torch.zeros(1, 1, 4, 4), 2.0)


def test_unpatchify_bad_arguments():
    with pytest.raises(ValueError, match="3-D"):
        unpatchify(torch.zeros(4, 12), 2, 4, 4)
    with pytest.raises(ValueError, match="4 patches"):
        unpatchify(torch.zeros(1, 5, 12), 2, 4, 4)  # a 4x4 image has 2x2 = 4 patches of 2x2
    with pytest.raises(ValueError, match="patch_size"):
        unpatchify(torch.zeros(1, 4, 6), 2, 4, 4)  # 6 is not a multiple of 2*2
    with pytest.raises(ValueError, match="height=5"):
        unpatchify(torch.zeros(1, 4, 4), 2, 5, 4)


# ----------------------------------------------------------------------------------------------------------
# PatchEmbedding: patchify + Linear == Conv2d(kernel_size=stride=P)
# ----------------------------------------------------------------------------------------------------------


def test_patch_embedding_is_patchify_then_matrix():
    emb = randomize_(PatchEmbedding(2, 3, 8).double(), seed=0)  # E is 8 x 12, as in the worked example
    x = worked_example_image()
    vec = torch.arange(10, 130, 10, dtype=torch.float64)  # (12,): the flattened patch, by hand
    out = emb(x)
    assert out.shape == (1, 1, 8)
    torch.testing.assert_close(out[0, 0], emb.proj.weight @ vec + emb.proj.bias, **TOL)


@pytest.mark.parametrize("B, C, H, W, P", SIZES)
@pytest.mark.parametrize("bias", [True, False])
def test_patch_embedding_equals_its_conv(B, C, H, W, P, bias):
    D = 5
    emb = randomize_(PatchEmbedding(P, C, D, bias=bias).double(), seed=C + P)
    conv = emb.to_conv()
    assert isinstance(conv, nn.Conv2d)
    assert (conv.in_channels, conv.out_channels) == (C, D)
    assert conv.kernel_size == (P, P) and conv.stride == (P, P) and (conv.bias is not None) == bias
    x = randn(B, C, H, W, seed=B + H)
    torch.testing.assert_close(emb(x), conv_sequence(conv, x), **TOL)


@pytest.mark.parametrize("B, C, H, W, P", SIZES)
@pytest.mark.parametrize("bias", [True, False])
def test_from_conv_equals_the_conv(B, C, H, W, P, bias):
    D = 6
    conv = randomize_(nn.Conv2d(C, D, kernel_size=P, stride=P, bias=bias).double(), seed=H + P)
    emb = PatchEmbedding.from_conv(conv)
    assert (emb.patch_size, emb.in_channels, emb.d_model) == (P, C, D)
    assert emb.proj.weight.dtype == torch.float64
    x = randn(B, C, H, W, seed=W + C)
    torch.testing.assert_close(emb(x), conv_sequence(conv, x), **TOL)


def test_weight_layout_is_permuted_not_reshaped():
    # With several channels and pixels, a plain reshape of the conv kernel puts weights on the wrong inputs.
    conv = randomize_(nn.Conv2d(3, 4, kernel_size=2, stride=2).double(), seed=3)
    emb = PatchEmbedding.from_conv(conv)
    assert not torch.equal(emb.proj.weight, conv.weight.reshape(4, 12))
    # Column j of the Linear weight multiplies patch entry j = (pixel_row * P + pixel_col) * C + channel.
    for pi in range(2):
        for pj in range(2):
            for c in range(3):
                j = (pi * 2 + pj) * 3 + c
                assert torch.equal(emb.proj.weight[:, j], conv.weight[:, c, pi, pj])


def test_round_trips_preserve_weights():
    conv = randomize_(nn.Conv2d(2, 5, kernel_size=3, stride=3).double(), seed=4)
    back = PatchEmbedding.from_conv(conv).to_conv()
    assert torch.equal(back.weight, conv.weight) and torch.equal(back.bias, conv.bias)
    emb = randomize_(PatchEmbedding(4, 3, 7).double(), seed=5)
    again = PatchEmbedding.from_conv(emb.to_conv())
    assert torch.equal(again.proj.weight, emb.proj.weight) and torch.equal(again.proj.bias, emb.proj.bias)


def test_from_conv_accepts_valid_padding():
    conv = nn.Conv2d(1, 3, kernel_size=2, stride=2, padding="valid").double()
    x = randn(2, 1, 4, 4, seed=6)
    torch.testing.assert_close(PatchEmbedding.from_conv(conv)(x), conv_sequence(conv, x), **TOL)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(kernel_size=2, stride=1), "stride"),
        (dict(kernel_size=(2, 3), stride=(2, 3)), "square"),
        (dict(kernel_size=2, stride=2, padding=1), "padding"),
        (dict(kernel_size=2, stride=2, dilation=2), "dilation"),
        (dict(kernel_size=2, stride=2, groups=2), "groups"),
    ],
)
def test_from_conv_rejects_convolutions_that_are_not_patch_embeddings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PatchEmbedding.from_conv(nn.Conv2d(2, 4, **kwargs))


def test_from_conv_and_constructor_bad_arguments():
    with pytest.raises(TypeError, match="conv"):
        PatchEmbedding.from_conv(nn.Linear(4, 4))
    with pytest.raises(ValueError, match="patch_size"):
        PatchEmbedding(0, 3, 8)
    with pytest.raises(TypeError, match="d_model"):
        PatchEmbedding(2, 3, 8.0)
    with pytest.raises(TypeError, match="bias"):
        PatchEmbedding(2, 3, 8, bias=1)
    with pytest.raises(ValueError, match="in_channels=3"):
        PatchEmbedding(2, 3, 8)(torch.zeros(1, 1, 4, 4))
    with pytest.raises(ValueError, match="height=5"):
        PatchEmbedding(2, 1, 8)(torch.zeros(1, 1, 5, 4))
