"""Checkers for chapter 7, images as sequences: patchify, the patch embedding as a convolution, the class token."""
from __future__ import annotations

import torch
from torch import Tensor, nn

from ..patches import patchify as _patchify
from ._core import Wrong, call, describe, exercise, expect_close


def _randn(*shape: int, seed: int, dtype=torch.float64) -> Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _counting(B: int, C: int, H: int, W: int, dtype=torch.float64) -> Tensor:
    """Images whose pixels count 0, 1, 2, ... in memory order: every value says where it came from."""
    return torch.arange(B * C * H * W, dtype=dtype).reshape(B, C, H, W)  # (B, C, H, W)


def _worked_example() -> Tensor:
    """The chapter's 2x2 RGB image (1, 3, 2, 2): pixels (10, 20, 30), (40, 50, 60), (70, 80, 90), (100, 110, 120)."""
    hwc = torch.arange(10.0, 130.0, 10.0, dtype=torch.float64).reshape(2, 2, 3)  # (H, W, C), row-major pixels
    return hwc.permute(2, 0, 1)[None]  # (1, C, H, W)


# ---------------------------------------------------------------------------------------------------------
# 7.1 patchify
# ---------------------------------------------------------------------------------------------------------

PATCHIFY_FORBIDDEN = [
    (name, "cut the image with reshape and permute: (B, C, H, W) -> (B, C, H/P, P, W/P, P), move the axes to "
           "(B, H/P, W/P, P, P, C), then reshape to (B, N, P*P*C)")
    for name in ("attnbook.patches.patchify", "attnbook.patches.unpatchify", "attnbook.patches.PatchEmbedding",
                 "torch.nn.functional.unfold", "torch.nn.Unfold", "torch._C._nn.im2col")
]


def _patchify_mistakes(images: Tensor, P: int) -> dict[str, Tensor]:
    """What plausible mistakes return on `images`, keyed by the hint for each (the first match wins)."""
    B, C, H, W = images.shape
    N, dim = (H // P) * (W // P), P * P * C
    g = images.reshape(B, C, H // P, P, W // P, P)  # axes: 0 B, 1 C, 2 grid row, 3 pixel row, 4 grid col, 5 pixel col
    out = {
        "the channels come first in each of your patch vectors (all the R values, then all the G values: the "
        "order F.unfold gives); the task wants them innermost, pixel by pixel: (R, G, B) of the top-left pixel, "
        "then of the next one. Move the channel axis last before the final reshape":
            g.permute(0, 2, 4, 1, 3, 5).reshape(B, N, dim),
        "your patches are in column-major order (down the first column of the grid, then the next); list them "
        "row by row, left to right: the grid-row axis before the grid-column axis":
            g.permute(0, 4, 2, 3, 5, 1).reshape(B, N, dim),
        "the pixels inside each patch are in column-major order; flatten each patch row by row: the pixel-row "
        "axis before the pixel-column axis":
            g.permute(0, 2, 4, 5, 3, 1).reshape(B, N, dim),
        "your result is the patchify of the transposed image (height and width swapped); keep the axis order "
        "grid row, grid column, pixel row, pixel column, channel":
            g.permute(0, 4, 2, 5, 3, 1).reshape(B, N, dim),
        "a plain reshape to (B, N, P*P*C) does not cut patches: it takes the values in memory order (a whole "
        "image row, then the next), so one 'patch' mixes pixels of several patches. Split H into (H/P, P) and "
        "W into (W/P, P), permute, then reshape":
            images.reshape(B, N, dim),
        "your result is (batch, P*P*C, n_patches), the layout F.unfold returns; put the patches on dim 1: "
        "(batch, n_patches, P*P*C)": _patchify(images, P).transpose(1, 2),
        "your result has no batch dimension; keep it: (batch, n_patches, P*P*C), even for a batch of one":
            _patchify(images, P)[0],
        "you merged the batch and the patches into one dimension; keep them apart: (batch, n_patches, P*P*C)":
            _patchify(images, P).reshape(B * N, dim),
    }
    if P != 2 and H % 2 == 0 and W % 2 == 0:
        out["your patches are 2 x 2 whatever patch_size says: use the patch_size argument"] = _patchify(images, 2)
    return out


def _patchify_error_hint(message: str) -> str | None:
    if "too many values to unpack" in message or "not enough values to unpack" in message:
        return "images has four dimensions, (batch, channels, height, width): B, C, H, W = images.shape"
    return None


@exercise("7.1", "Cut images into patches", section="An image as a sequence of patches")
def check_patchify(patchify) -> str:
    """patchify(images, patch_size) -> (B, N, P*P*C) must equal attnbook.patches.patchify."""
    cases = [  # ordered so that each mistake first shows up where no other mistake gives the same output
        ("a batch of one grey 4x4 image, images of shape (1, 1, 4, 4) holding 0, 1, 2, ..., patch_size=2",
         _counting(1, 1, 4, 4), 2),
        ("the chapter's worked example, one 2x2 RGB image of shape (1, 3, 2, 2), patch_size=2",
         _worked_example(), 2),
        ("two RGB images of shape (2, 3, 4, 4) holding 0, 1, 2, ..., patch_size=2", _counting(2, 3, 4, 4), 2),
        ("non-square images of shape (2, 3, 4, 6) (height 4, width 6), patch_size=2", _counting(2, 3, 4, 6), 2),
        ("images of shape (2, 3, 4, 4) with patch_size=4, one patch per image", _counting(2, 3, 4, 4), 4),
        ("images of shape (3, 2, 6, 9), patch_size=3", _counting(3, 2, 6, 9), 3),
        ("images of shape (1, 3, 4, 2) with patch_size=1, every pixel its own patch", _counting(1, 3, 4, 2), 1),
        ("random float32 images of shape (2, 1, 8, 8), like the digits, patch_size=2",
         _randn(2, 1, 8, 8, seed=71, dtype=torch.float32), 2),
    ]
    for desc, images, P in cases:
        got = call(patchify, images, P, what="patchify", on=desc, forbid=PATCHIFY_FORBIDDEN,
                   explain=_patchify_error_hint)
        expect_close(got, _patchify(images, P), what="your result", on=desc, atol=1e-6, rtol=1e-6,
                     mistakes=_patchify_mistakes(images, P))
    return (f"right on {len(cases)} inputs, including the worked example, non-square images, one patch per "
            "image and one pixel per patch")


# ---------------------------------------------------------------------------------------------------------
# 7.2 the patch embedding as a convolution
# ---------------------------------------------------------------------------------------------------------

CONV_FORBIDDEN = [
    (name, "create nn.Conv2d(C, D, kernel_size=patch_size, stride=patch_size) and copy the weight into it, "
           "reordered from (D, P*P*C) to (D, C, P, P)")
    for name in ("attnbook.patches.PatchEmbedding.to_conv", "attnbook.patches.PatchEmbedding.from_conv",
                 "attnbook.patches.PatchEmbedding")  # the methods first: once the class is replaced they are unreachable
]


def _conv_weight(weight: Tensor, C: int, P: int) -> Tensor:
    """The Conv2d kernel (D, C, P, P) equal to a Linear weight (D, P*P*C) whose columns are (row, col, channel)."""
    return weight.reshape(weight.size(0), P, P, C).permute(0, 3, 1, 2)  # (D, P, P, C) -> (D, C, P, P)


def _conv_weight_mistakes(weight: Tensor, C: int, P: int) -> dict[str, Tensor]:
    D = weight.size(0)
    return {
        "weight.reshape(D, C, P, P) reads the columns as if they were ordered (channel, row, column), but "
        "patchify orders them (row, column, channel), channels innermost: reshape to (D, P, P, C) first, then "
        "permute(0, 3, 1, 2)": weight.reshape(D, C, P, P),
        "the rows and columns of your kernel are swapped: after reshape(D, P, P, C) the axes are (output, pixel "
        "row, pixel column, channel), and Conv2d wants (output, channel, row, column): permute(0, 3, 1, 2)":
            weight.reshape(D, P, P, C).permute(0, 3, 2, 1),
        "weight is already (d_model, P*P*C), the (out_features, in_features) layout of nn.Linear: do not "
        "transpose it before reshaping": weight.t().reshape(D, P, P, C).permute(0, 3, 1, 2),
        "weight.t().reshape(D, C, P, P) mixes up every axis: weight is (d_model, P*P*C) with columns ordered (row, "
        "column, channel); reshape it to (D, P, P, C) and permute(0, 3, 1, 2)": weight.t().reshape(D, C, P, P),
    }


def _conv_error_hint(message: str) -> str | None:
    if "leaf Variable that requires grad" in message:
        return ("copy into a parameter inside `with torch.no_grad():` (conv.weight.copy_(...)), or assign a new "
                "one: conv.weight = nn.Parameter(...)")
    if "must match the size of tensor" in message or "doesn't match the broadcast shape" in message:
        return ("nn.Conv2d(C, D, ...) takes in_channels C first and out_channels D = weight.size(0) second; its "
                "weight has shape (D, C, P, P) and its bias (D,). Bring weight (D, P*P*C) to that shape with "
                "reshape(D, P, P, C) and permute(0, 3, 1, 2) before copying it in")
    return None


def _pair(x) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x, x)


def _check_conv_structure(conv, C: int, P: int, D: int, on: str) -> None:
    """Wrong unless `conv` is an nn.Conv2d(C, D, kernel_size=P, stride=P) with a bias, no padding or dilation."""
    if isinstance(conv, Tensor):
        hint = ("that tensor looks like the kernel: create conv = nn.Conv2d(C, D, kernel_size=patch_size, "
                "stride=patch_size), copy it into conv.weight (and bias into conv.bias), and return conv"
                if tuple(conv.shape) == (D, C, P, P) else
                "create nn.Conv2d(C, D, kernel_size=patch_size, stride=patch_size), copy the weights in, return it")
        raise Wrong(f"patch_embedding_as_conv returned a tensor of shape {tuple(conv.shape)} on {on}, expected an "
                    "nn.Conv2d", hint)
    if conv is None:
        raise Wrong(f"patch_embedding_as_conv returned None on {on}, expected an nn.Conv2d",
                    "did you forget `return conv`?")
    if not isinstance(conv, nn.Conv2d):
        raise Wrong(f"patch_embedding_as_conv returned {describe(conv)} on {on}, expected an nn.Conv2d",
                    "return the convolution module itself: nn.Conv2d(C, D, kernel_size=patch_size, "
                    "stride=patch_size) with the weights copied in")
    got = (conv.in_channels, conv.out_channels)
    if got != (C, D):
        hint = ("in_channels and out_channels are swapped: nn.Conv2d(in_channels=C, out_channels=D, ...)"
                if got == (D, C) else
                "in_channels is the number of image channels, C = weight.size(1) // patch_size**2, and "
                "out_channels is d_model = weight.size(0)")
        raise Wrong(f"your Conv2d has in_channels={conv.in_channels} and out_channels={conv.out_channels} on {on}, "
                    f"expected in_channels={C} (image channels) and out_channels={D} (d_model)", hint)
    if _pair(conv.kernel_size) != (P, P):
        raise Wrong(f"your Conv2d has kernel_size={_pair(conv.kernel_size)} on {on}, expected ({P}, {P})",
                    "kernel_size=patch_size: each output position must see exactly one P x P patch")
    if _pair(conv.stride) != (P, P):
        hint = ("with stride 1 the kernel slides one pixel at a time, so the windows overlap and there are "
                "(H-P+1)(W-P+1) outputs instead of one per patch: stride=patch_size"
                if _pair(conv.stride) == (1, 1) else
                "stride=patch_size: the kernel must jump a whole patch at a time, so the windows tile the image")
        raise Wrong(f"your Conv2d has stride={_pair(conv.stride)} on {on}, expected ({P}, {P})", hint)
    if conv.padding not in ("valid", (0, 0), 0) or _pair(conv.dilation) != (1, 1) or conv.groups != 1:
        raise Wrong(f"your Conv2d has padding={conv.padding!r}, dilation={conv.dilation}, groups={conv.groups} on "
                    f"{on}, expected no padding, dilation 1 and groups 1",
                    "keep nn.Conv2d's defaults for padding, dilation and groups: patches do not overlap or skip pixels")
    if conv.bias is None:
        raise Wrong(f"your Conv2d has no bias on {on}",
                    "the linear projection adds `bias`: create the Conv2d with bias=True (the default) and copy "
                    "`bias` into conv.bias")
    if tuple(conv.weight.shape) != (D, C, P, P):
        raise Wrong(f"your Conv2d's weight has shape {tuple(conv.weight.shape)} on {on}, expected ({D}, {C}, {P}, {P})",
                    "Conv2d kernels are (out_channels, in_channels, P, P): reshape weight to (D, P, P, C), then "
                    "permute(0, 3, 1, 2)")


@exercise("7.2", "The patch embedding as a convolution", section="Patchify plus a matrix is a convolution")
def check_patch_embedding_as_conv(patch_embedding_as_conv) -> str:
    """patch_embedding_as_conv(weight, bias, patch_size) -> nn.Conv2d equal to patchify(images) @ weight.T + bias."""
    cases = [  # (C, P, D, image shape): RGB first, where every weight-layout mistake changes the result
        (3, 2, 8, (2, 3, 4, 6)),
        (2, 3, 5, (1, 2, 6, 9)),
        (1, 4, 6, (2, 1, 8, 4)),
        (4, 1, 3, (2, 4, 3, 2)),
    ]
    for i, (C, P, D, shape) in enumerate(cases):
        weight = _randn(D, P * P * C, seed=720 + i, dtype=torch.float32)  # (D, P*P*C), channels innermost
        bias = _randn(D, seed=730 + i, dtype=torch.float32) + 1.0  # (D,), far from 0
        on = f"weight ({D}, {P * P * C}) for d_model={D}, C={C}, patch_size={P}, and bias ({D},)"
        conv = call(patch_embedding_as_conv, weight, bias, P, what="patch_embedding_as_conv", on=on,
                    forbid=CONV_FORBIDDEN, explain=_conv_error_hint)
        _check_conv_structure(conv, C, P, D, on)
        expect_close(conv.weight.detach(), _conv_weight(weight, C, P), what="your Conv2d's weight", on=on,
                     atol=1e-6, rtol=1e-6, mistakes=_conv_weight_mistakes(weight, C, P))
        got_bias = conv.bias.detach()
        if not torch.allclose(got_bias.double(), bias.double(), atol=1e-6, rtol=1e-6):
            hint = ("your bias is all zeros: copy `bias` into conv.bias" if not got_bias.any() else
                    "nn.Conv2d starts with a random bias of its own: copy `bias` into conv.bias")
            raise Wrong(f"your Conv2d's bias is not `bias` on {on}", hint)
        images = _randn(*shape, seed=740 + i).to(conv.weight.dtype)  # (B, C, H, W)
        with torch.no_grad():
            out = call(conv, images, what="your Conv2d", on=f"images of shape {shape}")  # (B, D, H/P, W/P)
        expected = _patchify(images.double(), P) @ weight.double().T + bias.double()  # (B, N, D)
        if not isinstance(out, Tensor) or out.dim() != 4:
            raise Wrong(f"your Conv2d returned {describe(out)} on images of shape {shape}, expected a 4-D tensor",
                        "return an ordinary nn.Conv2d, without changing its forward")
        expect_close(out.flatten(2).transpose(1, 2), expected, what="conv(images).flatten(2).transpose(1, 2)",
                     on=f"images of shape {shape} and {on}", atol=1e-4, rtol=1e-4)
    return (f"the Conv2d equals patchify(images) @ weight.T + bias on {len(cases)} inputs, from 1 to 4 channels and "
            "patch sizes 1 to 4")


# ---------------------------------------------------------------------------------------------------------
# 7.3 prepend the class token and add the positions
# ---------------------------------------------------------------------------------------------------------

CLS_FORBIDDEN = [("attnbook.models.vit.ViT.embed", "concatenate the expanded cls in front of x with torch.cat, "
                                                    "then add pos")]


def _cls_mistakes(x: Tensor, cls: Tensor, pos: Tensor) -> dict[str, Tensor]:
    B, N, D = x.shape
    c = cls.expand(B, 1, D)  # (B, 1, D)
    return {
        "the class token goes first, at position 0: torch.cat([cls, x], dim=1), not after the patches":
            torch.cat([x, c], dim=1) + pos,
        "you added the positions to the patches before the concatenation, so the class token got no position: "
        "concatenate first, then add all of pos (the class token's position is pos[:, 0])":
            torch.cat([c, x + pos[:, 1:]], dim=1),
        "patch i must get pos[:, i + 1]: position 0 belongs to the class token. Concatenate first, then add pos":
            torch.cat([c, x + pos[:, :-1]], dim=1),
        "you added the positions twice: add pos once, after the concatenation": torch.cat([c, x], dim=1) + 2 * pos,
        "you forgot the positions: add pos after the concatenation": torch.cat([c, x], dim=1),
        "the positions belong to the tokens in order: add pos as it is, not flipped or shuffled":
            torch.cat([c, x], dim=1) + pos.flip(1),
        "you added cls to every patch instead of putting it in front as a token of its own: "
        "torch.cat([cls, x], dim=1) gives N + 1 tokens": x + cls + pos[:, 1:],
    }


def _cls_error_hint(message: str) -> str | None:
    if "Sizes of tensors must match except in dimension" in message:
        return ("cls has batch size 1 and x has batch size B: expand it over the batch first, "
                "cls.expand(x.size(0), -1, -1), then torch.cat([cls, x], dim=1)")
    if "Tensors must have same number of dimensions" in message:
        return "cls is (1, 1, D), already 3-D like x: concatenate it along dim=1 without squeezing it"
    return None


@exercise("7.3", "Prepend the class token, add the positions", section="The class token and the positions")
def check_prepend_cls(prepend_cls) -> str:
    """prepend_cls(x, cls, pos) -> torch.cat([cls expanded over the batch, x], dim=1) + pos."""
    cases = [  # (batch, n_patches, d_model, dtype)
        (1, 4, 6, torch.float64),
        (3, 16, 8, torch.float64),
        (2, 1, 5, torch.float64),
        (4, 9, 12, torch.float32),
    ]
    for i, (B, N, D, dtype) in enumerate(cases):
        x = _randn(B, N, D, seed=750 + i, dtype=dtype)  # (B, N, D)
        cls = _randn(1, 1, D, seed=760 + i, dtype=dtype) + 2.0  # (1, 1, D), unlike any patch
        pos = _randn(1, N + 1, D, seed=770 + i, dtype=dtype)  # (1, N + 1, D)
        on = (f"x of shape ({B}, {N}, {D}) (batch {B}, {N} patch{'es' if N > 1 else ''}), cls (1, 1, {D}) "
              f"and pos (1, {N + 1}, {D})")
        got = call(prepend_cls, x, cls, pos, what="prepend_cls", on=on, forbid=CLS_FORBIDDEN, explain=_cls_error_hint)
        expected = torch.cat([cls.expand(B, 1, D), x], dim=1) + pos  # (B, N + 1, D)
        tol = dict(atol=1e-10, rtol=1e-10) if dtype == torch.float64 else dict(atol=1e-6, rtol=1e-6)
        expect_close(got, expected, what="your result", on=on, mistakes=_cls_mistakes(x, cls, pos), **tol)
    return f"right on {len(cases)} inputs, including a batch of one, a batch of 4 and a single patch"
