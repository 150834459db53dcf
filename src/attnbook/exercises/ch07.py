"""Checkers for chapter 7, images as sequences: patchify, the patch embedding as a convolution, the class token."""
from __future__ import annotations

import functools
import re

import torch
from torch import Tensor, nn

from ..patches import patchify as _patchify
from .compare import expect_close, generator, randn
from .guard import beside_answer, call
from .reach import resolve_or_none
from .observe import Backward, Nothing, Observer
from .hints import describe
from .registry import exercise, Wrong
from ..i18n import N_, _


_randn = functools.partial(randn, dtype=torch.float64)


def _counting(B: int, C: int, H: int, W: int, dtype=torch.float64) -> Tensor:
    """Images whose pixels count 0, 1, 2, ... in memory order: every value says where it came from."""
    return torch.arange(B * C * H * W, dtype=dtype).reshape(B, C, H, W)  # (B, C, H, W)


def _path(item) -> str:
    return item if isinstance(item, str) else item[0]


@beside_answer  # reads the answer itself: where it runs, on the learner's object
def _expect_function(answer, name: str, forbidden) -> None:
    """Wrong if `answer` is a class or a module (an object made by calling something) instead of a function."""
    if any(answer is resolve_or_none(_path(f)) for f in forbidden if "*" not in _path(f)):
        return  # `call` says that this one is forbidden
    if isinstance(answer, type):
        raise Wrong(_("you passed the class {__name__}, not your function", __name__=answer.__name__),
                    _("pass the function you wrote, by its name without calling it: check(..., {name})", name=name))
    if isinstance(answer, nn.Module):
        raise Wrong(_("you passed {describe_answer} module, the result of calling something, not your function",
                      describe_answer=describe(answer)),
                    _("pass the function itself, without calling it: check(..., {name}), not check(..., "
                      "{name}(...))", name=name))


DTYPE_HINT = (N_("keep the dtype of the input: no .float(), .double(), .half() or .to(...) on the result, and create "
                 "any new tensor with dtype=<input>.dtype (torch.zeros(...) is float32 unless told otherwise)"))


def _expect_dtype(got: Tensor, dtype: torch.dtype, input_name: str, what: str, on: str) -> None:
    """Wrong unless the result `got` has the dtype of the input (a float32 result loses float64 precision)."""
    if got.dtype != dtype:
        raise Wrong(_("{what} has dtype {dtype} on {on}, expected {dtype2}, the dtype of {input_name}",
                      what=what, dtype=got.dtype, on=on, dtype2=dtype, input_name=input_name), DTYPE_HINT)


def _dtype_first(got, expected: Tensor, input_name: str, what: str, on: str) -> None:
    """Report a dtype change, or float64 values rounded through float32 on the way, before any value check,
    when the values are right to float32 precision."""
    if not (isinstance(got, Tensor) and got.is_floating_point() and got.shape == expected.shape):
        return
    g, e = got.detach().double(), expected.detach().double()
    if not torch.allclose(g, e, atol=1e-4, rtol=1e-4):
        return  # wrong values: the mistakes table speaks first
    _expect_dtype(got, expected.dtype, input_name, what, on)
    if expected.dtype == torch.float64 and not torch.allclose(g, e, **_tolerance(torch.float64)):
        raise Wrong(_("{what} is right only to about float32 precision on {on} (max abs error "
                      "{g_e_abs_max_item:.1g}): somewhere on the way the float64 values went through a float32 "
                      "tensor", what=what, on=on, g_e_abs_max_item=(g - e).abs().max().item()), DTYPE_HINT)


TOLERANCE = {torch.float32: 1e-6, torch.float64: 1e-10}  # relative and absolute, as the task texts state


def _tolerance(dtype: torch.dtype) -> dict:
    return dict(atol=TOLERANCE[dtype], rtol=TOLERANCE[dtype])


def _worked_example() -> Tensor:
    """The chapter's 2x2 RGB image (1, 3, 2, 2): pixels (10, 20, 30), (40, 50, 60), (70, 80, 90), (100, 110, 120)."""
    hwc = torch.arange(10.0, 130.0, 10.0, dtype=torch.float64).reshape(2, 2, 3)  # (H, W, C), row-major pixels
    return hwc.permute(2, 0, 1)[None]  # (1, C, H, W)


# ---------------------------------------------------------------------------------------------------------
# 7.1 patchify
# ---------------------------------------------------------------------------------------------------------

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


def _patchify_mistakes(images: Tensor, P: int) -> dict[str, Tensor]:
    """What plausible mistakes return on `images`, keyed by the hint for each (the first match wins)."""
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
            images.reshape(B, N, dim),
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


@exercise("7.1", "Cut images into patches", section="An image as a sequence of patches",
          references=("attnbook.patches.patchify",))
def check_patchify(patchify) -> str:
    """patchify(images, patch_size) -> (B, N, P*P*C) must equal attnbook.patches.patchify."""
    cases = [  # ordered so that each mistake first shows up where no other mistake gives the same output
        # 6 x 6 first: on 4 x 4 with P = 2, H/P = P, and splitting H into (P, H/P) looks like a transpose
        (_("a batch of one grey 6x6 image, images of shape (1, 1, 6, 6) holding 0, 1, 2, ..., patch_size=2"),
         _counting(1, 1, 6, 6), 2),
        (_("the chapter's worked example, one 2x2 RGB image of shape (1, 3, 2, 2), patch_size=2"),
         _worked_example(), 2),
        (_("two RGB images of shape (2, 3, 4, 4) holding 0, 1, 2, ..., patch_size=2"), _counting(2, 3, 4, 4), 2),
        (_("non-square images of shape (2, 3, 4, 6) (height 4, width 6), patch_size=2"), _counting(2, 3, 4, 6), 2),
        (_("images of shape (2, 3, 4, 4) with patch_size=4, one patch per image"), _counting(2, 3, 4, 4), 4),
        (_("images of shape (3, 2, 6, 9), patch_size=3"), _counting(3, 2, 6, 9), 3),
        (_("images of shape (1, 3, 4, 2) with patch_size=1, every pixel its own patch"), _counting(1, 3, 4, 2), 1),
        (_("random float32 images of shape (2, 1, 8, 8), like the digits, patch_size=2"),
         _randn(2, 1, 8, 8, seed=71, dtype=torch.float32), 2),
        (_("random float64 images of shape (2, 3, 6, 4), patch_size=2"), _randn(2, 3, 6, 4, seed=72), 2),
    ]
    _expect_function(patchify, "patchify", PATCHIFY_FORBIDDEN)
    for desc, images, P in cases:
        got = call(patchify, images, P, what="patchify", on=desc, forbid=PATCHIFY_FORBIDDEN,
                   explain=functools.partial(_patchify_error_hint, images=images, P=P))
        expected = _patchify(images, P)  # (B, N, P*P*C)
        hint = _channel_hint(got, images, P)
        if hint is not None:
            raise Wrong(_("your result has shape {tuple_got_shape} on {desc}, expected {tuple_expected_shape}",
                          tuple_got_shape=tuple(got.shape),
                          desc=desc, tuple_expected_shape=tuple(expected.shape)), hint)
        mistakes = _patchify_mistakes(images, P)
        if isinstance(got, Tensor) and tuple(got.shape) != tuple(expected.shape) and \
                not any(tuple(w.shape) == tuple(got.shape) for w in mistakes.values()):
            raise Wrong(_("your result has shape {tuple_got_shape} on {desc}, expected {tuple_expected_shape}",
                          tuple_got_shape=tuple(got.shape), desc=desc, tuple_expected_shape=tuple(expected.shape)),
                        _("the result is (B, N, P*P*C): for each image, one row per patch, N = (H/P)(W/P) of them, "
                          "each holding the P*P*C values of its pixels, with B, C, H and W from images.shape"))
        _dtype_first(got, expected, "images", _("your result"), desc)  # moving values must not round them
        expect_close(got, expected, what=_("your result"), on=desc, mistakes=mistakes, **_tolerance(images.dtype))
        _expect_dtype(got, images.dtype, "images", _("your result"), desc)
    return (_("right on {len_cases} inputs, including the worked example, non-square images, one patch per "
              "image, one pixel per patch, and float32 and float64 images", len_cases=len(cases)))


# ---------------------------------------------------------------------------------------------------------
# 7.2 the patch embedding as a convolution
# ---------------------------------------------------------------------------------------------------------

CONV_FORBIDDEN = [
    (name, N_("reorder the weight into the Conv2d kernel yourself, and copy it into an nn.Conv2d you create"))
    for name in ("attnbook.patches.unpatchify",  # unpatchify(weight[:, None], P, P, P) is the kernel, ready-made
                 "transformers.models.*.unpatchify")  # ViTMAEForPreTraining.unpatchify: the same, in transformers
]


def _conv_weight(weight: Tensor, C: int, P: int) -> Tensor:
    """The Conv2d kernel (D, C, P, P) equal to a Linear weight (D, P*P*C) whose columns are (row, col, channel)."""
    return weight.reshape(weight.size(0), P, P, C).permute(0, 3, 1, 2)  # (D, P, P, C) -> (D, C, P, P)


def _conv_weight_mistakes(weight: Tensor, C: int, P: int) -> dict[str, Tensor]:
    D = weight.size(0)
    return {
        _("a plain reshape to (D, C, P, P) reads the columns as if they were ordered (channel, row, column), but "
          "patchify orders them (row, column, channel), channels innermost: split them in that order, then permute "
          "the channel axis to where Conv2d wants it"): weight.reshape(D, C, P, P),
        _("the rows and columns of your kernel are swapped: Conv2d wants (output, channel, pixel row, pixel column)"):
            weight.reshape(D, P, P, C).permute(0, 3, 2, 1),
        _("weight is already (d_model, P*P*C), the (out_features, in_features) layout of nn.Linear: do not "
          "transpose it before reshaping"): weight.t().reshape(D, P, P, C).permute(0, 3, 1, 2),
        _("transposing and then reshaping to (D, C, P, P) mixes up every axis: weight is (d_model, P*P*C) with "
          "columns ordered (row, column, channel)"): weight.t().reshape(D, C, P, P),
    }


def _conv_error_hint(message: str) -> str | None:
    if "leaf Variable that requires grad" in message:
        return (_("copy into the parameters inside `with torch.no_grad():` (conv.weight.copy_(...), "
                  "conv.bias.copy_(bias)), or assign new parameters made from copies: nn.Parameter(t.clone()); "
                  "without .clone(), a parameter made from weight or bias, or from a reshape or permute of it, "
                  "shares the caller's tensor"))
    if "must match the size of tensor" in message or "doesn't match the broadcast shape" in message:
        return (_("nn.Conv2d takes in_channels (C, the image channels) first and out_channels (D, d_model) second, "
                  "both worked out from weight's shape and patch_size (not fixed numbers); its weight has shape "
                  "(D, C, P, P) and its bias (D,): reorder weight (D, P*P*C) into that shape before copying it in"))
    return None


def _pair(x) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x, x)


def _check_conv_structure(conv, C: int, P: int, D: int, on: str) -> None:
    """Wrong unless `conv` is an nn.Conv2d(C, D, kernel_size=P, stride=P) with a bias, no padding or dilation."""
    if isinstance(conv, Tensor):
        hint = (_("that tensor looks like the kernel: copy it into the weight of an nn.Conv2d you create (and bias "
                  "into its bias), and return the convolution") if tuple(conv.shape) == (D, C, P, P) else
                _("return an nn.Conv2d you create, with the weights copied in"))
        raise Wrong(_("patch_embedding_as_conv returned a tensor of shape {tuple_conv_shape} on {on}, expected "
                      "an nn.Conv2d", tuple_conv_shape=tuple(conv.shape), on=on), hint)
    if conv is None:
        raise Wrong(_("patch_embedding_as_conv returned None on {on}, expected an nn.Conv2d", on=on),
                    _("did you forget `return conv`?"))
    if not isinstance(conv, nn.Conv2d):
        raise Wrong(_("patch_embedding_as_conv returned {describe_conv} on {on}, expected an nn.Conv2d",
                      describe_conv=describe(conv), on=on),
                    _("return the convolution module itself, an nn.Conv2d with the weights copied in"))
    got = (conv.in_channels, conv.out_channels)
    if got != (C, D):
        hint = (_("in_channels and out_channels are swapped: nn.Conv2d(in_channels=C, out_channels=D, ...)")
                if got == (D, C) else
                _("in_channels is the number of image channels C, which you work out from weight's shape and "
                  "patch_size (a patch vector holds P*P*C values), and out_channels is d_model, weight's first size"))
        raise Wrong(_("your Conv2d has in_channels={in_channels} and out_channels={out_channels} on {on}, "
                      "expected in_channels={C} (image channels) and out_channels={D} (d_model)",
                      in_channels=conv.in_channels, out_channels=conv.out_channels, on=on, C=C, D=D), hint)
    if _pair(conv.kernel_size) != (P, P):
        raise Wrong(_("your Conv2d has kernel_size={pair_conv_kernel_size} on {on}, expected ({P}, {P})",
                      pair_conv_kernel_size=_pair(conv.kernel_size), on=on, P=P),
                    _("kernel_size=patch_size: each output position must see exactly one P x P patch"))
    if _pair(conv.stride) != (P, P):
        hint = (_("with stride 1 the kernel slides one pixel at a time, so the windows overlap and there are "
                  "(H-P+1)(W-P+1) outputs instead of one per patch: stride=patch_size")
                if _pair(conv.stride) == (1, 1) else
                _("stride=patch_size: the kernel must jump a whole patch at a time, so the windows tile the image"))
        raise Wrong(_("your Conv2d has stride={pair_conv_stride} on {on}, expected ({P}, {P})",
                      pair_conv_stride=_pair(conv.stride), on=on, P=P), hint)
    if conv.padding not in ("valid", (0, 0), 0) or _pair(conv.dilation) != (1, 1) or conv.groups != 1:
        raise Wrong(_("your Conv2d has padding={padding!r}, dilation={dilation}, groups={groups} on {on}, "
                      "expected no padding, dilation 1 and groups 1",
                      padding=conv.padding, dilation=conv.dilation, groups=conv.groups, on=on),
                    _("keep nn.Conv2d's defaults for padding, dilation and groups: patches do not overlap or skip pixels"))
    if conv.bias is None:
        raise Wrong(_("your Conv2d has no bias on {on}", on=on),
                    _("the linear projection adds `bias`: create the Conv2d with bias=True (the default) and copy "
                      "`bias` into conv.bias"))
    if tuple(conv.weight.shape) != (D, C, P, P):
        raise Wrong(_("your Conv2d's weight has shape {tuple_conv_weight_shape} on {on}, expected ({D}, {C}, "
                      "{P}, {P})", tuple_conv_weight_shape=tuple(conv.weight.shape), on=on, D=D, C=C, P=P),
                    _("Conv2d kernels are (out_channels, in_channels, P, P)"))


def _check_conv_dtype(conv: nn.Conv2d, dtype: torch.dtype, on: str) -> None:
    """Wrong unless the Conv2d's parameters have the dtype of `weight` (copy_ would round float64 silently)."""
    for name, param in (("weight", conv.weight), ("bias", conv.bias)):
        if param.dtype != dtype:
            raise Wrong(_("your Conv2d's {name} has dtype {dtype} on {on}, expected {dtype2}, the dtype of "
                          "`weight`", name=name, dtype=param.dtype, on=on, dtype2=dtype),
                        _("create the convolution in the dtype of the weights you copy into it (dtype=weight.dtype). "
                          "Without dtype= it is "
                          "float32, and copy_ silently rounds float64 weights; a fixed dtype=torch.float64 is wrong "
                          "for float32 weights"))


def _storage_span(t) -> tuple[int, int] | None:
    """The range of memory addresses [start, end) of the storage under the tensor `t`, or None (no tensor, or an
    empty storage)."""
    if not isinstance(t, Tensor):
        return None
    try:
        storage = t.untyped_storage()
        start, size = storage.data_ptr(), storage.nbytes()
    except Exception:  # noqa: BLE001 - a tensor without a readable storage shares nothing we can see
        return None
    return (start, start + size) if size else None


class SharedParameters(Observer):
    """[[parameter, argument], ...]: the parameters of the returned module (`parameters`, by name) whose storage
    overlaps the storage of an argument (`arguments`, {name: position}): a parameter made from a view of an input
    (reshape, permute, nn.Parameter(t), .data = t) instead of a copy."""

    def __init__(self, parameters: list[str], arguments: dict[str, int]):
        self.params = {"parameters": list(parameters), "arguments": dict(arguments)}

    def read(self, output, args, kwargs):
        parameters = getattr(output, "_parameters", None) if isinstance(output, nn.Module) else None
        if not isinstance(parameters, dict):
            return []
        shared = []
        for name in self.params["parameters"]:
            span = _storage_span(parameters.get(name))
            if span is None:
                continue
            for arg_name, position in sorted(self.params["arguments"].items(), key=lambda item: item[1]):
                other = _storage_span(args[position]) if position < len(args) else None
                if other is not None and span[0] < other[1] and other[0] < span[1]:
                    shared.append([name, arg_name])
        return shared


def _expect_own_parameters(shared, on: str) -> None:
    """Wrong if the Conv2d's weight or bias shares memory with `weight` or `bias` (`shared`: what SharedParameters
    read beside the call)."""
    if shared:
        name, arg_name = shared[0]
        raise Wrong(_("your Conv2d's {name} shares its memory with the `{arg_name}` you were given on {on}: changing "
                      "one changes the other, so training the convolution would change the Linear layer's "
                      "{arg_name} too", name=name, arg_name=arg_name, on=on),
                    _("copy the values into the Conv2d, as the task says: reshape, permute, view, .contiguous(), "
                      ".detach(), .data = t and nn.Parameter(t) keep t's memory. Copy with conv.weight.copy_(...) "
                      "and conv.bias.copy_(bias) inside `with torch.no_grad():`, or wrap a copy: "
                      "nn.Parameter(t.clone())"))


@exercise("7.2", "The patch embedding as a convolution", section="Patchify plus a matrix is a convolution",
          references=("attnbook.patches.PatchEmbedding.to_conv", "attnbook.patches.PatchEmbedding.from_conv",
                      "attnbook.patches.PatchEmbedding"))
def check_patch_embedding_as_conv(patch_embedding_as_conv) -> str:
    """patch_embedding_as_conv(weight, bias, patch_size) -> nn.Conv2d equal to patchify(images) @ weight.T + bias."""
    cases = [  # (C, P, D, image shape, dtype): RGB first, where every weight-layout mistake changes the result
        (3, 2, 8, (2, 3, 4, 6), torch.float32),
        (2, 3, 5, (1, 2, 6, 9), torch.float64),
        (1, 4, 6, (2, 1, 8, 4), torch.float32),
        (4, 1, 3, (2, 4, 3, 2), torch.float64),
    ]
    _expect_function(patch_embedding_as_conv, "patch_embedding_as_conv", CONV_FORBIDDEN)
    for i, (C, P, D, shape, dtype) in enumerate(cases):
        weight = _randn(D, P * P * C, seed=720 + i, dtype=dtype)  # (D, P*P*C), channels innermost
        bias = _randn(D, seed=730 + i, dtype=dtype) + 1.0  # (D,), far from 0
        kind = "float32" if dtype == torch.float32 else "float64"
        on = _("{kind} weight ({D}, {p_p_c}) for d_model={D}, C={C}, patch_size={P}, and bias ({D},)",
               kind=kind, D=D, p_p_c=P * P * C, C=C, P=P)
        conv, shared = call(patch_embedding_as_conv, weight, bias, P, what="patch_embedding_as_conv", on=on,
                            forbid=CONV_FORBIDDEN, explain=_conv_error_hint,
                            observe=SharedParameters(["weight", "bias"], {"weight": 0, "bias": 1}))
        _check_conv_structure(conv, C, P, D, on)
        _check_conv_dtype(conv, dtype, on)
        kernel = _conv_weight(weight, C, P)  # (D, C, P, P)
        _dtype_first(conv.weight.detach(), kernel, "weight", _("your Conv2d's weight"), on)  # no float32 on the way
        expect_close(conv.weight.detach(), kernel, what=_("your Conv2d's weight"), on=on,
                     mistakes=_conv_weight_mistakes(weight, C, P), **_tolerance(dtype))
        got_bias = conv.bias.detach()
        _dtype_first(got_bias, bias, "weight", _("your Conv2d's bias"), on)
        if not torch.allclose(got_bias.double(), bias.double(), **_tolerance(dtype)):
            hint = (_("your bias is all zeros: copy `bias` into conv.bias") if not got_bias.any() else
                    _("nn.Conv2d starts with a random bias of its own: copy `bias` into conv.bias"))
            raise Wrong(_("your Conv2d's bias is not `bias` on {on}", on=on), hint)
        _expect_own_parameters(shared, on)
        images = _randn(*shape, seed=740 + i, dtype=dtype)  # (B, C, H, W)
        with torch.no_grad():
            out = call(conv, images, what=_("your Conv2d"), on=_("images of shape {shape}",
                                                                 shape=shape))  # (B, D, H/P, W/P)
        expected = _patchify(images.double(), P) @ weight.double().T + bias.double()  # (B, N, D)
        if not isinstance(out, Tensor) or out.dim() != 4:
            raise Wrong(_("your Conv2d returned {describe_out} on images of shape {shape}, expected a 4-D tensor",
                          describe_out=describe(out), shape=shape),
                        _("return an ordinary nn.Conv2d, without changing its forward"))
        out_tol = 1e-4 if dtype == torch.float32 else TOLERANCE[dtype]  # float32 sums of P*P*C products
        expect_close(out.flatten(2).transpose(1, 2), expected, what="conv(images).flatten(2).transpose(1, 2)",
                     on=_("images of shape {shape} and {on}", shape=shape, on=on), atol=out_tol, rtol=out_tol)
    return (_("the Conv2d equals patchify(images) @ weight.T + bias on {len_cases} inputs, from 1 to 4 channels, "
              "patch sizes 1 to 4, in float32 and float64", len_cases=len(cases)))


# ---------------------------------------------------------------------------------------------------------
# 7.3 prepend the class token and add the positions
# ---------------------------------------------------------------------------------------------------------

CLS_FORBIDDEN = [("attnbook.models.vit.ViT.embed", N_("build the tokens yourself from x, cls and pos"))]


def _cls_mistakes(x: Tensor, cls: Tensor, pos: Tensor) -> dict[str, Tensor]:
    B, N, D = x.shape
    c = cls.expand(B, 1, D)  # (B, 1, D)
    return {
        _("the class token goes first, at position 0, in front of the patches, not after them"):
            torch.cat([x, c], dim=1) + pos,
        _("you added the positions before the concatenation, rows 0 .. N - 1 to the patches and the last row to the "
          "class token; row 0 of pos (pos[:, 0]) is the class token's and row i + 1 is patch i's"):
            torch.cat([c + pos[:, N:], x + pos[:, :N]], dim=1),
        _("you added the positions to the patches before the concatenation, so the class token got no position: "
          "concatenate first, then add all of pos (the class token's position is pos[:, 0])"):
            torch.cat([c, x + pos[:, 1:]], dim=1),
        _("patch i must get pos[:, i + 1]: position 0 belongs to the class token. Concatenate first, then add pos"):
            torch.cat([c, x + pos[:, :-1]], dim=1),
        _("patch i must get pos[:, i + 1], not pos[:, i]: position 0 belongs to the class token alone. Concatenate "
          "first, then add all of pos"): torch.cat([c + pos[:, :1], x + pos[:, :-1]], dim=1),
        _("you added the positions twice: add pos once, after the concatenation"): torch.cat([c, x], dim=1) + 2 * pos,
        _("you forgot the positions: add pos after the concatenation"): torch.cat([c, x], dim=1),
        _("you added cls to the patches as well: the class token joins the sequence only as the extra token in "
          "front; the patch tokens stay x, plus their positions"): torch.cat([c, x + c], dim=1) + pos,
        _("you added cls to every token, the class token included, on top of prepending it: the class token joins "
          "the sequence only as the extra token in front; add pos, not cls, to all the tokens"):
            torch.cat([c, x], dim=1) + c + pos,
        _("the positions belong to the tokens in order: add pos as it is, not flipped or shuffled"):
            torch.cat([c, x], dim=1) + pos.flip(1),
        _("you added only pos[:, :1], the class token's position, to every token: add all of pos, row t to token t"):
            torch.cat([c, x], dim=1) + pos[:, :1],
        _("every image of your result holds the first image's patches: each image keeps its own patches"):
            (torch.cat([cls, x[:1]], dim=1) + pos).expand(B, N + 1, D),
        _("your result has twice the features and N tokens: you joined cls and x along the features; the class token "
          "is a token of its own, joined along the token axis (dim=1)"): torch.cat([c.expand(B, N, D), x], dim=-1),
    }


def _token_count_hint(got, x: Tensor, cls: Tensor, pos: Tensor) -> str | None:
    """A hint for a result with N tokens instead of N + 1 (the class token overwrote or was added to a patch)."""
    B, N, D = x.shape
    if not isinstance(got, Tensor) or tuple(got.shape) != (B, N, D) or not got.is_floating_point():
        return None
    g = got.detach().double()
    x, cls, pos = x.detach().double(), cls.detach().double(), pos.detach().double()
    overwritten = torch.cat([cls.expand(B, 1, D), x[:, 1:]], dim=1)  # (B, N, D): patch 0 replaced by cls
    for p in (pos[:, 1:], pos[:, :N], torch.zeros_like(pos[:, 1:])):
        if torch.allclose(g, overwritten + p, atol=1e-5, rtol=1e-5):
            return (_("you overwrote the first patch with the class token, so that patch is lost: the class token is "
                      "an extra token, in front of all N patches: don't overwrite one, the result has N + 1 tokens"))
        if torch.allclose(g, x + cls + p, atol=1e-5, rtol=1e-5):
            return (_("you added cls to every patch instead of putting it in front as a token of its own: the result "
                      "has N + 1 tokens"))
    return (_("your result has N tokens, one per patch; the encoder gets N + 1: the class token in front of all N "
              "patches (concatenate it, don't overwrite a patch or add it to them), then add pos, whose N + 1 rows "
              "are one per token"))


_FIXED_SIZE = (N_("a size in your code is fixed in advance: the batch size B, the number of patches N and the features "
                  "D all come from x's shape (B, N, D); cls is expanded over the batch only (-1 keeps a size), and "
                  "pos is added whole, without slicing it"))


def _cls_error_hint(message: str, x: Tensor) -> str | None:
    m = re.search(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) at non-singleton "
                  r"dimension (\d+)", message)
    if m and m.group(3) == "1" and abs(int(m.group(1)) - int(m.group(2))) == 1:
        return (_("pos has N + 1 rows, one per token including the class token (row 0 is the class token's): "
                  "concatenate first, then add all of pos to the (B, N + 1, D) result, without slicing it"))
    if m or "The expanded size of the tensor" in message:
        return _FIXED_SIZE
    if "leaf Variable that requires grad" in message:
        return (_("do not change x, cls or pos in place (x += ..., x[...] = ...): they are the model's tokens and "
                  "parameters; build a new tensor with torch.cat and +"))
    m = re.search(r"Sizes of tensors must match except in dimension (-?\d+)\. Expected size (\d+) but got size "
                  r"(\d+)", message)
    if m:
        B, N, D = x.shape
        dim, a, b = (int(g) for g in m.groups())
        if dim != 1:
            return (_("you joined cls and x along dim {dim}: the class token is one more token, so join them along "
                      "the token axis, dim 1 (cls expanded is (B, 1, D) and x is (B, N, D): they differ only in dim 1)",
                      dim=dim))
        if (a == B) != (b == B) and D not in (a, b):  # along dim 1, the batch sizes differ
            other = b if a == B else a  # the class token's batch size
            if other == 1:
                return (_("cls has batch size 1 and x has batch size B: expand cls over the batch (Tensor.expand) "
                          "to x's own batch size, x.size(0), not a fixed number, before joining it to x"))
            return (_("your class tokens have batch size {other} and x has batch size {B}: expand cls to x's own "
                      "batch size, x.size(0), not a fixed number, before joining it to x", other=other, B=B))
        return _FIXED_SIZE
    if "Sizes of tensors must match except in dimension" in message:
        return _FIXED_SIZE
    if "Tensors must have same number of dimensions" in message:
        return _("cls is (1, 1, D), already 3-D like x: concatenate it along dim=1 without squeezing it")
    return None


def _check_gradients(got: Tensor, grads, x: Tensor, cls: Tensor, pos: Tensor, on: str) -> None:
    """Wrong unless the gradient of got.sum() (`grads`, what `_observe_gradients` saw) reaches x, cls and pos with
    the right values (B for cls and pos)."""
    hint = (_("cls and pos are learned parameters of the ViT, and x comes from the patch embedding: they learn only "
              "if the gradient flows back to them. Do not use .detach(), .data, torch.no_grad() or copies made with "
              "torch.tensor(...); build the result from x, cls and pos with torch.cat and +"))
    if grads is None:
        raise Wrong(_("no gradient flows back through your result on {on}", on=on), hint)
    if isinstance(grads, str):
        raise Wrong(_("backward through your result raised {grads} on {on}", grads=grads, on=on), hint) from None
    B = x.size(0)
    for name, t, per_element in (("cls", cls, B), ("pos", pos, B), ("x", x, 1)):
        grad = grads.get(name)
        if grad is None or not grad.abs().any():
            raise Wrong(_("no gradient reached `{name}` through your result on {on}", name=name, on=on), hint)
        if not torch.allclose(grad, torch.full_like(t, float(per_element))):
            raise Wrong(_("the gradient of your result's sum with respect to `{name}` is not {per_element} in "
                          "every entry on {on}", name=name, per_element=per_element, on=on),
                        _("every token gets each value once: cls once per image (expand, not a copy per patch), "
                          "pos once per image, x once"))


def cls_cases() -> list[tuple[int, int, int, torch.dtype, bool]]:
    """(batch, n_patches, d_model, dtype, whether x, cls and pos require grad) of every case, the sizes drawn from
    the run's seed (`generator`), so that no size can be known in advance: a batch of one, several images, a
    single patch, float32, inputs that require grad, and one size at a time beyond the usual ones (more images
    than a batch of 256, more patches than ViT-Base's 196 or 256, more features than its 768), so that a size
    fixed in the code fails, as a slice or as a shape. The last case has the sizes of the second, with other
    values: the second pass of a check (`compare.fresh_values`) draws other sizes, so this repeat is what shows an
    answer that remembers its results by shape."""
    g = generator(750)
    draw = lambda low, high: int(torch.randint(low, high + 1, (), generator=g))  # noqa: E731
    f32, f64 = torch.float32, torch.float64
    cases = [
        (1, draw(2, 6), draw(4, 8), f64, False),
        (draw(3, 5), draw(18, 40), draw(6, 10), f64, False),  # more patches than the chapter's 16 (+ 1)
        (2, 1, draw(3, 6), f64, False),
        (4, draw(7, 12), draw(10, 14), f32, False),
        (2, draw(3, 6), draw(4, 8), f64, True),
        (draw(257, 300), 2, 3, f64, False),
        (1, draw(257, 300), 3, f64, False),
        (1, 2, draw(769, 800), f64, False),
    ]
    return cases + [cases[1]]


@exercise("7.3", "Prepend the class token, add the positions", section="The class token and the positions",
          references=("attnbook.models.vit.ViT.embed",))
def check_prepend_cls(prepend_cls) -> str:
    """prepend_cls(x, cls, pos) -> torch.cat([cls expanded over the batch, x], dim=1) + pos."""
    cases = cls_cases()
    _expect_function(prepend_cls, "prepend_cls", CLS_FORBIDDEN)
    for i, (B, N, D, dtype, grad) in enumerate(cases):
        x = _randn(B, N, D, seed=750 + i, dtype=dtype)  # (B, N, D)
        cls = _randn(1, 1, D, seed=760 + i, dtype=dtype) + 2.0  # (1, 1, D), unlike any patch
        pos = _randn(1, N + 1, D, seed=770 + i, dtype=dtype)  # (1, N + 1, D)
        kind = "float32" if dtype == torch.float32 else "float64"
        on = (_("{kind} x of shape ({B}, {N}, {D}) (batch {B}, {N} patches), cls (1, 1, {D}) and pos (1, {n_1}, {D})",
                kind=kind, B=B, N=N, D=D, n_1=N + 1) if N > 1 else
              _("{kind} x of shape ({B}, {N}, {D}) (batch {B}, one patch), cls (1, 1, {D}) and pos (1, {n_1}, {D})",
                kind=kind, B=B, N=N, D=D, n_1=N + 1))
        on += _(", all three requiring grad (as in a ViT)") if grad else ""
        if (B, N, D, dtype) in [c[:4] for c in cases[:i]]:
            on += _(", the shapes of an earlier input with other values")
        expected = torch.cat([cls.expand(B, 1, D), x], dim=1) + pos  # (B, N + 1, D)
        mistakes = _cls_mistakes(x, cls, pos)
        for t in (x, cls, pos):
            t.requires_grad_(grad)
        got, grads = call(prepend_cls, x, cls, pos, what="prepend_cls", on=on, forbid=CLS_FORBIDDEN,
                          explain=functools.partial(_cls_error_hint, x=x),
                          observe=Backward({"x": 0, "cls": 1, "pos": 2}) if grad else Nothing())
        hint = _token_count_hint(got, x, cls, pos)
        if hint is None and isinstance(got, Tensor) and tuple(got.shape) != tuple(expected.shape) and \
                not any(tuple(w.shape) == tuple(got.shape) for w in mistakes.values()):
            hint = _FIXED_SIZE if got.dim() == 3 else _("return one tensor (B, N + 1, D): the class token and the "
                                                        "N patch tokens of each image")
        if hint is not None:
            raise Wrong(_("your result has shape {tuple_got_shape} on {on}, expected {tuple_expected_shape}",
                          tuple_got_shape=tuple(got.shape), on=on, tuple_expected_shape=tuple(expected.shape)), hint)
        _dtype_first(got, expected, "x", _("your result"), on)
        expect_close(got, expected, what=_("your result"), on=on, mistakes=mistakes, **_tolerance(dtype))
        _expect_dtype(got, dtype, "x", _("your result"), on)
        if grad:
            _check_gradients(got, grads, x, cls, pos, on)
    return (_("right on {len_cases} inputs, including a batch of one, a single patch, float32 and float64, more "
              "images, patches and features than the usual sizes, and the gradients reach x, cls and pos",
              len_cases=len(cases)))
