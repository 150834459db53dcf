"""Checker for exercise 7.1, cutting images into patches."""
from __future__ import annotations

import functools
import re

import torch
from torch import Tensor

from ...patches import patchify as _patchify
from ..guard import call
from ..runs import Run, collect, expect_like, shape_hint, verdict
from ..registry import exercise, Wrong
from ...i18n import N_, _
from ._shared import DTYPE_HINT, counting, dtype_first, expect_function, randn64, tolerance, worked_example


PATCHIFY_FORBIDDEN = [
    (name, N_("cut the patches yourself, with reshape and permute (or view, transpose, Tensor.unfold)"))
    for name in ("attnbook.patches.patchify", "attnbook.patches.unpatchify", "attnbook.patches.PatchEmbedding",
                 "torch.nn.functional.unfold", "torch.nn.Unfold", "torch._C._nn.im2col", "torch.ops.aten.im2col",
                 "torch.nn.functional.fold", "torch.nn.Fold", "torch._C._nn.col2im", "torch.ops.aten.col2im",
                 "torch.nn.functional.pixel_unshuffle", "torch.pixel_unshuffle", "torch.nn.PixelUnshuffle",
                 # transformers' own patch cutters (ViTMAEForPreTraining.patchify, SegGPT's patchify,
                 # convert_image_to_patches, ...), caught by name wherever they are imported from
                 "transformers.models.*.patchify*", "transformers.models.*.unpatchify",
                 "transformers.models.*to_patches", "transformers.models.*extract*patches")
]


_SHAPE_RULE = (N_("the result is (B, N, P*P*C): for each image, one row per patch, N = (H/P)(W/P) of them, each "
                  "holding the P*P*C values of its pixels, with B, C, H and W from images.shape"))
_PATCH_RULE = (N_("patch k of an image is the k-th P x P square, row by row across the grid; its vector lists the "
                  "pixels row by row inside the square, each pixel's channels together: (R, G, B) of the top-left "
                  "pixel, then of the next one"))


def _patchify_mistakes(images: Tensor, P: int) -> dict:
    """What plausible mistakes return on `images`, keyed by the hint for each (the first that fits every case wins;
    a list holds the forms of one mistake)."""
    B, C, H, W = images.shape
    N, dim = (H // P) * (W // P), P * P * C
    g = images.reshape(B, C, H // P, P, W // P, P)  # axes: 0 B, 1 C, 2 grid row, 3 pixel row, 4 grid col, 5 pixel col
    out = {
        _("the channels come first in each of your patch vectors (all the R values, then all the G values: the "
          "order F.unfold gives); the task wants them innermost, pixel by pixel: (R, G, B) of the top-left pixel, "
          "then of the next one. Move the channel axis last before the final reshape"):
            g.permute(0, 2, 4, 1, 3, 5).reshape(B, N, dim),
        _("your patches are in column-major order (down the first column of the grid, then the next); list them "
          "row by row, left to right: the grid-row axis before the grid-column axis"):
            g.permute(0, 4, 2, 3, 5, 1).reshape(B, N, dim),
        _("the pixels inside each patch are in column-major order; flatten each patch row by row: the pixel-row "
          "axis before the pixel-column axis"):
            g.permute(0, 2, 4, 5, 3, 1).reshape(B, N, dim),
        _("your result is the patchify of the transposed image (height and width swapped); keep the axis order "
          "grid row, grid column, pixel row, pixel column, channel"):
            g.permute(0, 4, 2, 5, 3, 1).reshape(B, N, dim),
        _("you split H into (P, H/P) instead of (H/P, P), and W likewise: pixel row r lies in grid row r // P, at "
          "row r % P inside its patch, so in memory the grid index comes first, then the row inside the patch"):
            images.reshape(B, C, P, H // P, P, W // P).permute(0, 3, 5, 2, 4, 1).reshape(B, N, dim),
        _("a plain reshape to (B, N, P*P*C) does not cut patches: it takes the values in memory order (a whole "
          "image row, then the next), so one 'patch' mixes pixels of several patches: the P rows of a patch come from "
          "P different image rows"):
            [images.reshape(B, N, dim), images.permute(0, 2, 3, 1).reshape(B, N, dim)],  # channels first or last
        _("your result is (batch, P*P*C, n_patches), the layout F.unfold returns; put the patches on dim 1: "
          "(batch, n_patches, P*P*C)"): _patchify(images, P).transpose(1, 2),
        _("your result has no batch dimension; keep it: (batch, n_patches, P*P*C), even for a batch of one"):
            _patchify(images, P)[0],
        _("you merged the batch and the patches into one dimension; keep them apart: (batch, n_patches, P*P*C)"):
            _patchify(images, P).reshape(B * N, dim),
    }
    if H != W and H % P == 0 and W % P == 0:  # the shape read as (B, C, W, H)
        out[_("you read the shape as (B, C, W, H), so height and width are swapped on these non-square images: "
              "images has shape (B, C, H, W), the height before the width")] = (
            images.reshape(B, C, W // P, P, H // P, P).permute(0, 2, 4, 3, 5, 1).reshape(B, N, dim))
    if P != 2 and H % 2 == 0 and W % 2 == 0:
        out[_("your patches are 2 x 2 whatever patch_size says: use the patch_size argument")] = _patchify(images, 2)
    return out


def _patchify_error_hint(message: str, images: Tensor, P: int) -> str | None:
    if "too many values to unpack" in message or "not enough values to unpack" in message:
        return _("images has four dimensions, (batch, channels, height, width): B, C, H, W = images.shape")
    H, W = images.shape[-2:]
    if re.search(r"shape '\[[-\d, ]+\]' is invalid for input of size", message):
        if H != W:
            return (_("these images are not square (height {H}, width {W}): the sizes in your reshape must come from "
                      "images.shape, (B, C, H, W), with the height for the rows and the width for the columns, not "
                      "from fixed numbers or one side used twice", H=H, W=W))
        return (_("the sizes in your reshape must come from images.shape, (B, C, H, W), and patch_size, not from "
                  "fixed numbers: these images are {H} x {W} with patch_size={P}", H=H, W=W, P=P))
    return None


def _channel_hint(got, images: Tensor, P: int) -> str | None:
    """A hint for patch vectors with P*P entries instead of P*P*C (one channel kept or the channels merged)."""
    B, C, H, W = images.shape
    if C > 1 and isinstance(got, Tensor) and tuple(got.shape) == (B, (H // P) * (W // P), P * P):
        return (_("your patch vectors have P*P = {p_p} entries, one value per pixel; with C = {C} channels each "
                  "holds P*P*C = {p_p_c}: keep every channel of every pixel", p_p=P * P, C=C, p_p_c=P * P * C))
    return None


@exercise("7.1", "Cut images into patches", answer_name="patchify", section="An image as a sequence of patches",
          references=("attnbook.patches.patchify",))
def check_patchify(patchify) -> str:
    """patchify(images, patch_size) -> (B, N, P*P*C) must equal attnbook.patches.patchify."""
    cases = [  # ordered so that each mistake first shows up where no other mistake gives the same output
        # 6 x 6 first: on 4 x 4 with P = 2, H/P = P, and splitting H into (P, H/P) looks like a transpose
        (_("a batch of one grey 6x6 image, images of shape (1, 1, 6, 6) holding 0, 1, 2, ..., patch_size=2"),
         counting(1, 1, 6, 6), 2),
        (_("the chapter's worked example, one 2x2 RGB image of shape (1, 3, 2, 2), patch_size=2"),
         worked_example(), 2),
        (_("two RGB images of shape (2, 3, 4, 4) holding 0, 1, 2, ..., patch_size=2"), counting(2, 3, 4, 4), 2),
        (_("non-square images of shape (2, 3, 4, 6) (height 4, width 6), patch_size=2"), counting(2, 3, 4, 6), 2),
        (_("images of shape (2, 3, 4, 4) with patch_size=4, one patch per image"), counting(2, 3, 4, 4), 4),
        (_("images of shape (3, 2, 6, 9), patch_size=3"), counting(3, 2, 6, 9), 3),
        (_("images of shape (1, 3, 4, 2) with patch_size=1, every pixel its own patch"), counting(1, 3, 4, 2), 1),
        (_("random float32 images of shape (2, 1, 8, 8), like the digits, patch_size=2"),
         randn64(2, 1, 8, 8, seed=71, dtype=torch.float32), 2),
        (_("random float64 images of shape (2, 3, 6, 4), patch_size=2"), randn64(2, 3, 6, 4, seed=72), 2),
    ]
    expect_function(patchify, "patchify", PATCHIFY_FORBIDDEN)

    def one(case, runs: list[Run]) -> Run:
        desc, images, P = case
        got = call(patchify, images, P, what="patchify", on=desc, forbid=PATCHIFY_FORBIDDEN,
                   explain=functools.partial(_patchify_error_hint, images=images, P=P))
        expected = _patchify(images, P)  # (B, N, P*P*C)
        mistakes = _patchify_mistakes(images, P)
        hint = _channel_hint(got, images, P)
        if isinstance(got, Tensor) and tuple(got.shape) != tuple(expected.shape):
            hint = hint or shape_hint(got, mistakes, runs) or _SHAPE_RULE
            raise Wrong(_("your result has shape {tuple_got_shape} on {desc}, expected {tuple_expected_shape}",
                          tuple_got_shape=tuple(got.shape), desc=desc, tuple_expected_shape=tuple(expected.shape)),
                        hint)
        dtype_first(got, expected, "images", _("your result"), desc)  # moving values must not round them
        got = expect_like(got, expected, mistakes, runs, what=_("your result"), on=desc, dtype=images.dtype,
                          input_name="images", dtype_hint=DTYPE_HINT)
        return Run(desc, got, expected, mistakes, *tolerance(images.dtype).values())

    verdict(collect(cases, one), what=_("your result"), rule=_PATCH_RULE)
    return (_("right on {len_cases} inputs, including the worked example, non-square images, one patch per "
              "image, one pixel per patch, and float32 and float64 images", len_cases=len(cases)))
