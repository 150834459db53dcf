"""Chapter 7 (ViT patches): learner answers to exercises 7.1-7.3, one table per exercise."""
from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch import nn

import attnbook.patches as _patches
from mutants import RIGHT, WRONG, fresh_import, function_copy, right, table, wrong


# ----------------------------------------------------------------------------------------------------------------
# 7.1  patchify(images, patch_size) -> (B, N, P*P*C)
# ----------------------------------------------------------------------------------------------------------------

def patches(order=(0, 2, 4, 3, 5, 1), split="(H/P, P)", shape="(B, C, H, W)", square=False, patch=None, batch=None,
            n_patches=None):
    """7.1's learner template: patchify by reshape and permute, the axes (B, C, gh, P, gw, P) permuted into `order`
    (the default: (B, gh, gw, P, P, C)) and flattened to (B, N, P*P*C) (the defaults: a right answer). The other
    keywords switch one mistake on: the shape read as (B, C, W, H), each side split as (P, H/P) (pixels, then grid),
    the height used for the width too (`square`), a fixed `patch` size, `batch` or number of patches."""
    def patchify(images, patch_size):
        B, C, H, W = images.shape
        if shape == "(B, C, W, H)":
            B, C, W, H = images.shape
        B, P, W = batch or B, patch or patch_size, H if square else W
        if split == "(H/P, P)":
            x = images.reshape(B, C, H // P, P, W // P, P)
        else:
            x = images.reshape(B, C, P, H // P, P, W // P)
        x = x.permute(*order)
        return x.reshape(B, (H // P) * (W // P), P * P * C) if n_patches is None else x.reshape(B, n_patches, -1)
    return patchify


def from_columns(columns):
    """7.1's answers through a ready-made routine: columns(images, P) holds each patch as a column, channels
    outermost ((B, C*P*P, N), or (B, C*P*P, H/P, W/P)); they are reordered here to channels innermost."""
    def patchify(images, patch_size):
        B, C, H, W = images.shape
        P = patch_size
        x = columns(images, P).reshape(B, C, P * P, -1).permute(0, 3, 2, 1)  # (B, N, P*P, C)
        return x.reshape(B, -1, P * P * C)
    return patchify


# transformers' convert_image_to_patches (lfm2_vl, siglip2, ...) needs torchvision, missing here: a function of that
# name in a module of that name stands in for it (the check forbids it by its dotted name)
_SOME_VL = {"__name__": "transformers.models.some_vl.image_processing_some_vl", "_right_patchify": patches()}
exec("def convert_image_to_patches(images, patch_size):\n    return _right_patchify(images, patch_size)\n", _SOME_VL)

table("7.1", [
    ("reshape and permute, as in the chapter", RIGHT, patches()),
    ("Tensor.unfold twice (allowed), then channels innermost", RIGHT,
     lambda images, patch_size: images.unfold(2, patch_size, patch_size).unfold(3, patch_size, patch_size)
     .permute(0, 2, 3, 4, 5, 1).reshape(images.size(0), -1, patch_size * patch_size * images.size(1))),
    ("Python loops over the grid, stacking each patch moved to (P, P, C)", RIGHT,
     lambda images, patch_size: torch.stack([
         images[:, :, r:r + patch_size, c:c + patch_size].permute(0, 2, 3, 1).flatten(1)  # (B, C, P, P) -> (B, P*P*C)
         for r in range(0, images.size(2), patch_size) for c in range(0, images.size(3), patch_size)], dim=1)),
    # the order of the numbers
    ("a plain reshape of the image (rows of pixels, not patches)", "plain reshape",
     lambda images, patch_size: images.permute(0, 2, 3, 1).reshape(
         images.size(0), (images.size(2) // patch_size) * (images.size(3) // patch_size),
         patch_size * patch_size * images.size(1))),
    ("a plain reshape of the image, channels first (no permute)", "plain reshape",
     lambda images, patch_size: images.reshape(images.size(0), -1, patch_size * patch_size * images.size(1))),
    ("channels outermost in each patch (the Conv2d / unfold order)", "channels come first",
     patches(order=(0, 2, 4, 1, 3, 5))),
    ("patches listed column by column (grid axes swapped)", "column-major order (down the first column",
     patches(order=(0, 4, 2, 3, 5, 1))),
    ("each patch flattened column by column (pixel row and pixel column swapped)",
     "pixels inside each patch are in column-major order", patches(order=(0, 2, 4, 5, 3, 1))),
    ("splits each side as (P, H/P) instead of (H/P, P): strided pixels, not patches", "grid",
     patches(split="(P, H/P)", order=(0, 3, 5, 2, 4, 1))),
    ("patchifies images.transpose(2, 3) (width and height swapped in the image itself)", "transposed image",
     lambda images, patch_size: patches()(images.transpose(2, 3), patch_size)),
    ("swaps H and W when splitting (reads the shape as (B, C, W, H))", "(B, C, H, W)", patches(shape="(B, C, W, H)")),
    ("assumes square images: uses H for the width too", "not square", patches(square=True)),
    ("grey images only: keeps channel 0 and drops the others", "channel",
     lambda images, patch_size: patches()(images[:, :1], patch_size)),
    # fixed sizes
    ("hard-codes the chapter's patch size 2 and ignores patch_size", "patch_size", patches(patch=2)),
    ("hard-codes a batch of one (reshape(1, ...))", "fixed numbers", patches(batch=1)),
    ("reshapes to the chapter's 16 patches: reshape(B, 16, -1) after the permute", "fixed numbers",
     patches(n_patches=16)),
    # the shape and the type of the result
    ("squeezes the batch axis away (a batch of one comes back 2-D)", "batch dimension",
     lambda images, patch_size: patches()(images, patch_size).squeeze(0)),
    (".squeeze() at the end 'to tidy up' (drops every size-1 axis)", WRONG,
     lambda images, patch_size: patches()(images, patch_size).squeeze()),
    ("returns (B, P*P*C, N), the F.unfold layout, with the right values",
     "(batch, P*P*C, n_patches), the layout F.unfold returns",
     lambda images, patch_size: patches()(images, patch_size).transpose(1, 2)),
    ("returns (B, P*P*C, N): the message says to put the patches on dim 1", "put the patches on dim 1",
     lambda images, patch_size: patches()(images, patch_size).transpose(1, 2)),
    ("flattens batch and patches into one axis: (B*N, P*P*C)", "(batch, n_patches, P*P*C)",
     lambda images, patch_size: patches()(images, patch_size).flatten(0, 1)),
    ("flattens each image's patches into one long vector: (B, N*P*P*C)", "one row per patch",
     lambda images, patch_size: patches()(images, patch_size).flatten(1)),
    ("returns a nested Python list (.tolist()) instead of a tensor", "tensor",
     lambda images, patch_size: patches()(images, patch_size).tolist()),
    ("returns a numpy array", "tensor", lambda images, patch_size: patches()(images, patch_size).numpy()),
    ("casts the result to float32 (float64 images come back float32)", "dtype",
     lambda images, patch_size: patches()(images, patch_size).float()),
    ("casts the result to float64 (float32 images come back float64)", "expected torch.float32",
     lambda images, patch_size: patches()(images, patch_size).double()),
    ("converts the result to int64 (.to(torch.int64))", "expected floating point (torch.float64)",
     lambda images, patch_size: patches()(images, patch_size).to(torch.int64)),
    ("casts the result to half precision (.half())", "torch.float16",
     lambda images, patch_size: patches()(images, patch_size).half()),
    ("computes in float32 ('the digits are float32') and casts back to the input's dtype", "float32",
     lambda images, patch_size: patches()(images.float(), patch_size).to(images.dtype)),
    ("passes the worked example's patch tensor (a result) instead of the function", "function",
     torch.arange(12.0).reshape(1, 1, 12)),
    ("passes the class nn.Flatten instead of a function", "class Flatten", nn.Flatten),
    ("passes an nn.Flatten(1) module, made by calling the class, instead of a function",
     "pass the function itself, without calling it", nn.Flatten(1)),
    # ready-made routines
    ("F.unfold (im2col), then reorders its channels-first columns to channels innermost", "without",
     from_columns(lambda images, P: F.unfold(images, kernel_size=P, stride=P))),
    ("nn.Unfold module, reordered to channels innermost", "without",
     from_columns(lambda images, P: nn.Unfold(P, stride=P)(images))),
    ("torch.ops.aten.im2col (the op behind F.unfold), reordered to channels innermost",
     "the task asks you to write this without torch.ops.aten.im2col",
     from_columns(lambda images, P: torch.ops.aten.im2col(images, [P, P], [1, 1], [0, 0], [P, P]))),
    ("torch._C._nn.im2col, reordered to channels innermost",
     "the task asks you to write this without torch._C._nn.im2col",
     from_columns(lambda images, P: torch._C._nn.im2col(images, [P, P], [1, 1], [0, 0], [P, P]))),
    ("pixel_unshuffle, then moves the channels innermost",
     "the task asks you to write this without torch.nn.functional.pixel_unshuffle",
     from_columns(lambda images, P: F.pixel_unshuffle(images, P))),
    ("the nn.PixelUnshuffle module, reordered to channels innermost",
     "the task asks you to write this without torch.nn.PixelUnshuffle",
     from_columns(lambda images, P: nn.PixelUnshuffle(P)(images))),
    ("torch.pixel_unshuffle (F.pixel_unshuffle under another name), reordered to channels innermost",
     "pixel_unshuffle", from_columns(torch.pixel_unshuffle)),
    ("calls transformers' convert_image_to_patches (a stand-in of that name in a transformers module)",
     "convert_image_to_patches",
     lambda images, patch_size: _SOME_VL["convert_image_to_patches"](images, patch_size)),
    # the package's own solution
    ("handed in attnbook.patches.patchify itself", "attnbook.patches.patchify, the package's own solution",
     _patches.patchify),
    ("a lambda around attnbook.patches.patchify", "the package's own solution",
     lambda images, patch_size: _patches.patchify(images, patch_size)),
    ("a types.FunctionType copy of attnbook.patches.patchify", "package's own",
     function_copy(_patches.patchify, "patchify")),
    ("patchify from a second, separate import of attnbook/patches.py", "package's own",
     fresh_import(_patches, "patches").patchify),
])


@wrong("7.1", hint="four dimensions")
def patchify(images, patch_size):
    """unpacks the images as (C, H, W), forgetting the batch dimension"""
    C, H, W = images.shape
    return images.reshape(C, H // patch_size, patch_size, W // patch_size, patch_size)


@wrong("7.1", hint="package's own")
def patchify(images, patch_size):
    """a def wrapper that calls attnbook.patches.patchify"""
    from attnbook.patches import patchify as theirs

    return theirs(images, patch_size)


@wrong("7.1", hint="without")
def patchify(images, patch_size):
    """a PatchEmbedding whose projection is the identity matrix"""
    from attnbook.patches import PatchEmbedding

    C = images.shape[1]
    d = patch_size * patch_size * C
    emb = PatchEmbedding(patch_size, C, d, bias=False).to(images.dtype)
    with torch.no_grad():
        emb.proj.weight.copy_(torch.eye(d, dtype=images.dtype))
    return emb(images).detach()


@wrong("7.1", hint="the task asks you to write this without attnbook.patches.unpatchify")
def patchify(images, patch_size):
    """unpatchify applied to indices builds the permutation, which is then applied to the pixels"""
    from attnbook.patches import unpatchify

    B, C, H, W = images.shape
    P = patch_size
    n = (H // P) * (W // P)
    where = unpatchify(torch.arange(C * H * W).reshape(1, n, P * P * C), P, H, W).flatten()
    return images.flatten(1)[:, torch.argsort(where)].reshape(B, n, P * P * C)


@right("7.1")
def patchify(images, patch_size, channels_last=True):
    """channels last first, then view/transpose; an extra harmless keyword argument"""
    B, C, H, W = images.shape
    P = patch_size
    x = images.permute(0, 2, 3, 1).contiguous()  # (B, H, W, C)
    x = x.view(B, H // P, P, W // P, P * C).transpose(2, 3)  # (B, H/P, W/P, P, P*C)
    return x.contiguous().view(B, (H // P) * (W // P), P * P * C)


@right("7.1")
def patchify(images, patch_size):
    """einsum as a permutation"""
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P)
    return torch.einsum("bcgphq->bghpqc", x).reshape(B, (H // P) * (W // P), P * P * C)


@right("7.1")
def patchify(images, patch_size):
    """Python loops over images, patches, pixels and channels, stacking one value at a time"""
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


@right("7.1")
def patchify(images, patch_size):
    """F.conv2d with an identity kernel (each output channel picks one pixel value), then flatten and transpose"""
    B, C, H, W = images.shape
    P = patch_size
    eye = torch.eye(P * P * C, dtype=images.dtype).reshape(P * P * C, P, P, C).permute(0, 3, 1, 2)
    out = F.conv2d(images, eye, stride=P)  # (B, P*P*C, H/P, W/P)
    return out.flatten(2).transpose(1, 2)


# ----------------------------------------------------------------------------------------------------------------
# 7.2  patch_embedding_as_conv(weight, bias, patch_size) -> nn.Conv2d
# ----------------------------------------------------------------------------------------------------------------

def right_kernel(weight, D, C, P):
    """The Conv2d kernel (D, C, P, P) of a Linear weight (D, P*P*C) whose columns are (row, column, channel)."""
    return weight.reshape(D, P, P, C).permute(0, 3, 1, 2)


def conv(kernel=right_kernel, new_bias=lambda bias: bias, channels=lambda weight, P: weight.size(1) // (P * P),
         sizes=lambda C, D: (C, D), dtype="weight", put_weight="copy", put_bias="copy", no_grad=True,
         returns="conv", **options):
    """7.2's learner template: C = channels(weight, P) and D = weight.size(0); an nn.Conv2d(*sizes(C, D)) with
    kernel_size=stride=P and `options`, in the weight's dtype (dtype=None: nn.Conv2d's float32 default; or a fixed
    dtype); kernel(weight, D, C, P) and new_bias(bias) are put into it as put_weight and put_bias say ("copy": into
    the conv's own parameter, under torch.no_grad() if no_grad; "Parameter": as a new nn.Parameter of it; ".data":
    assigned to the parameter's .data; None: left as nn.Conv2d made it). returns: "conv", "kernel" (the kernel
    tensor) or None. The defaults: a right answer."""
    def patch_embedding_as_conv(weight, bias, patch_size):
        P, D, C = patch_size, weight.size(0), channels(weight, patch_size)
        kwargs = {"kernel_size": P, "stride": P, **options}
        if dtype is not None:
            kwargs["dtype"] = weight.dtype if dtype == "weight" else dtype
        made = nn.Conv2d(*sizes(C, D), **kwargs)
        k = kernel(weight, D, C, P)
        for name, t, how in (("weight", k, put_weight), ("bias", new_bias(bias), put_bias)):
            if how == "copy":
                with torch.no_grad() if no_grad else contextlib.nullcontext():
                    getattr(made, name).copy_(t)
            elif how == "Parameter":
                setattr(made, name, nn.Parameter(t))
            elif how == ".data":
                getattr(made, name).data = t
        return {"conv": made, "kernel": k, None: None}[returns]
    return patch_embedding_as_conv


@wrong("7.2", hint="package's own")
def _embedding_to_conv(weight, bias, patch_size):
    """builds an attnbook PatchEmbedding with the weights and calls its to_conv()"""
    from attnbook.patches import PatchEmbedding

    P = patch_size
    D, C = weight.size(0), weight.size(1) // (P * P)
    emb = PatchEmbedding(P, C, D).to(weight.dtype)
    with torch.no_grad():
        emb.proj.weight.copy_(weight)
        emb.proj.bias.copy_(bias)
    return emb.to_conv()


def _made_conv():
    w = torch.randn(8, 12, generator=torch.Generator().manual_seed(0))
    made = nn.Conv2d(3, 8, kernel_size=2, stride=2)
    with torch.no_grad():
        made.weight.copy_(w.reshape(8, 2, 2, 3).permute(0, 3, 1, 2))
        made.bias.zero_()
    return made


table("7.2", [
    ("reshape to (D, P, P, C), permute the channels to the front, as in the chapter", RIGHT, conv()),
    ("a float32 Conv2d whose parameters are replaced by new ones: the kernel by view and two transposes, cloned",
     RIGHT, conv(dtype=None, put_weight="Parameter", put_bias="Parameter", new_bias=lambda bias: bias.clone(),
                 kernel=lambda w, D, C, P: w.view(D, P, P, C).transpose(1, 3).transpose(2, 3).contiguous().clone())),
    # the kernel
    ("a plain reshape of the weight to (D, C, P, P)", "permute",
     conv(kernel=lambda w, D, C, P: w.reshape(D, C, P, P))),
    ("a plain reshape to (D, C, P, P): the message says how it reads the columns",
     "a plain reshape to (D, C, P, P) reads the columns", conv(kernel=lambda w, D, C, P: w.reshape(D, C, P, P))),
    ("permute(0, 3, 2, 1): the kernel's pixel rows and columns swapped", "swapped",
     conv(kernel=lambda w, D, C, P: w.reshape(D, P, P, C).permute(0, 3, 2, 1))),
    ("permute(0, 3, 2, 1): the message says the rows and columns are swapped",
     "rows and columns of your kernel are swapped",
     conv(kernel=lambda w, D, C, P: w.reshape(D, P, P, C).permute(0, 3, 2, 1))),
    ("transposes the weight first, confusing it with the (P*P*C, D) matrix E", WRONG,
     conv(kernel=lambda w, D, C, P: w.T.reshape(D, P, P, C).permute(0, 3, 1, 2))),
    ("weight.T.reshape(D, C, P, P): transposed, then a plain reshape", "mixes up every axis",
     conv(kernel=lambda w, D, C, P: w.T.reshape(D, C, P, P))),
    ("hard-codes C = 3 (RGB) instead of working it out from the weight", "channel",
     conv(channels=lambda weight, P: 3, kernel=lambda w, D, C, P: w.reshape(D, P, P, -1)[..., :C].permute(0, 3, 1, 2))),
    ("works out C as weight.size(1) // P (forgets that a patch has P*P pixels)", WRONG,
     conv(channels=lambda weight, P: weight.size(1) // P)),
    ("the kernel from attnbook's unpatchify (the weight's rows read as patches)", "without",
     conv(kernel=lambda w, D, C, P: _patches.unpatchify(w[:, None, :], P, P, P))),
    # the bias
    ("forgets to copy the bias (the convolution keeps its random one)", "random bias of its own", conv(put_bias=None)),
    ("a convolution with bias=False", "has no bias", conv(bias=False, put_bias=None)),
    ("zeroes the convolution's bias instead of copying bias", "bias is all zeros",
     conv(new_bias=lambda bias: torch.zeros_like(bias))),
    # the shape of the convolution
    ("stride 1: overlapping windows", "with stride 1", conv(stride=1)),
    ("padding=1 added 'to keep the borders'", "padding", conv(padding=1)),
    ("kernel_size=1 with stride=P (one pixel per window)", "kernel",
     conv(kernel_size=1, kernel=lambda w, D, C, P: right_kernel(w, D, C, P)[:, :, :1, :1])),
    ("kernel_size=1 and stride 1, the kernel left as made", "kernel_size=patch_size",
     conv(kernel_size=1, stride=1, put_weight=None)),
    ("nn.Conv2d(D, C, ...): in and out channels swapped (the kernel made to fit by a reshape)",
     "in_channels and out_channels are swapped",
     conv(sizes=lambda C, D: (D, C), kernel=lambda w, D, C, P: right_kernel(w, D, C, P).reshape(C, D, P, P),
          put_bias=None)),
    ("nn.Conv2d(D, C, ...) with in and out swapped, then copies the bias into it (the copy fails)",
     "takes in_channels (C, the image channels) first", conv(sizes=lambda C, D: (D, C), dtype=None, put_weight=None)),
    ("creates the convolution with the chapter's d_model 64 as out_channels", "weight's shape",
     conv(sizes=lambda C, D: (C, 64))),
    # the dtype
    ("creates the convolution without dtype=weight.dtype (float32 always)", "dtype", conv(dtype=None)),
    ("a fixed dtype=torch.float64 ('to keep the precision')", "dtype", conv(dtype=torch.float64)),
    ("reorders a float32 copy of the weight ('conv weights are float32'), then copies it into a float64 conv",
     "float32", conv(kernel=lambda w, D, C, P: right_kernel(w.float(), D, C, P))),
    ("nn.Conv2d without dtype, a new weight Parameter (right dtype) but the bias copied into the float32 one",
     "Conv2d's bias has dtype torch.float32",
     conv(dtype=None, put_weight="Parameter", kernel=lambda w, D, C, P: right_kernel(w, D, C, P).clone())),
    # copies and memory
    ("copies into the parameters without torch.no_grad()", "no_grad", conv(no_grad=False)),
    ("new nn.Parameter objects made from a view of weight and from bias itself (no copy: the conv aliases them)",
     "shares its memory", conv(put_weight="Parameter", put_bias="Parameter")),
    ("a new nn.Parameter made from a view of weight, the bias cloned",
     "your Conv2d's weight shares its memory with the `weight` you were given",
     conv(put_weight="Parameter", put_bias="Parameter", new_bias=lambda bias: bias.clone())),
    ("copies the kernel under no_grad, but conv.bias = nn.Parameter(bias): the bias is the caller's tensor",
     "shares its memory", conv(put_bias="Parameter")),
    ("assigns .data: conv.weight.data = a view of weight, conv.bias.data = bias.detach()", "shares its memory",
     conv(put_weight=".data", put_bias=".data", new_bias=lambda bias: bias.detach(),
          kernel=lambda w, D, C, P: w.detach().view(D, P, P, C).permute(0, 3, 1, 2))),
    (".contiguous() taken for a copy: nn.Parameter(kernel.contiguous()) and nn.Parameter(bias.contiguous())",
     "shares its memory", conv(put_weight="Parameter", put_bias="Parameter", new_bias=lambda bias: bias.contiguous(),
                               kernel=lambda w, D, C, P: right_kernel(w, D, C, P).contiguous())),
    # what is returned
    ("builds and fills the convolution but forgets to return it (returns None)", "return conv", conv(returns=None)),
    ("returns the reordered kernel tensor instead of a convolution", "looks like the kernel", conv(returns="kernel")),
    ("returns a plain function images -> conv output instead of an nn.Conv2d", "Conv2d",
     lambda weight, bias, patch_size: lambda images: F.conv2d(
         images, right_kernel(weight, weight.size(0), weight.size(1) // patch_size**2, patch_size), bias,
         stride=patch_size)),
    ("passes a convolution made by calling the function, not the function itself", "function", _made_conv()),
    ("passes the class nn.Conv2d instead of a function", "class Conv2d", nn.Conv2d),
    # the package's own solution
    ("a lambda around PatchEmbedding(...).to_conv()", "package's own",
     lambda weight, bias, patch_size: _embedding_to_conv(weight, bias, patch_size)),
])


@wrong("7.2", hint="expected an nn.Conv2d")
def patch_embedding_as_conv(weight, bias, patch_size):
    """returns an nn.Linear (the layer it started from), not a convolution"""
    lin = nn.Linear(weight.size(1), weight.size(0), dtype=weight.dtype)
    with torch.no_grad():
        lin.weight.copy_(weight)
        lin.bias.copy_(bias)
    return lin


@wrong("7.2", hint="package's own")
def patch_embedding_as_conv(weight, bias, patch_size):
    """PatchEmbedding.from_conv round trip: builds the conv from a PatchEmbedding via from_conv/to_conv

    (hint "package's own", not "without": PatchEmbedding, to_conv and from_conv are 7.2's references)"""
    P = patch_size
    D, C = weight.size(0), weight.size(1) // (P * P)
    emb = _patches.PatchEmbedding.from_conv(nn.Conv2d(C, D, kernel_size=P, stride=P, dtype=weight.dtype))
    with torch.no_grad():
        emb.proj.weight.copy_(weight)
        emb.proj.bias.copy_(bias)
    return emb.to_conv()


@right("7.2")
def patch_embedding_as_conv(weight, bias, patch_size):
    """fills the kernel with loops over (channel, pixel row, pixel column)"""
    P = patch_size
    D, C = weight.shape[0], weight.shape[1] // (P * P)
    kernel = torch.empty(D, C, P, P, dtype=weight.dtype)
    for c in range(C):
        for r in range(P):
            for q in range(P):
                kernel[:, c, r, q] = weight[:, (r * P + q) * C + c]
    return conv(kernel=lambda w, D, C, P: kernel)(weight, bias, patch_size)


@right("7.2")
def patch_embedding_as_conv(weight, bias, patch_size):
    """new nn.Parameter objects from a contiguous clone, conv converted with .to(dtype)"""
    P = patch_size
    D, C = weight.size(0), weight.size(1) // (P * P)
    made = nn.Conv2d(C, D, kernel_size=(P, P), stride=(P, P), padding=0).to(weight.dtype)
    made.weight = nn.Parameter(weight.detach().view(D, P, P, C).permute(0, 3, 1, 2).contiguous().clone())
    made.bias = nn.Parameter(bias.detach().clone())
    return made


@right("7.2")
def patch_embedding_as_conv(weight, bias, patch_size, padding_mode="zeros"):
    """einsum permutation and .data assignment; an extra harmless keyword argument"""
    P = patch_size
    D, C = weight.size(0), weight.size(1) // (P * P)
    made = nn.Conv2d(C, D, P, stride=P, padding_mode=padding_mode, dtype=weight.dtype)
    made.weight.data = torch.einsum("dpqc->dcpq", weight.detach().reshape(D, P, P, C)).clone()
    made.bias.data = bias.detach().clone()
    return made


# ----------------------------------------------------------------------------------------------------------------
# 7.3  prepend_cls(x, cls, pos) -> (B, N + 1, D)
# ----------------------------------------------------------------------------------------------------------------

def _tokens(x, cls):
    """The class token in front of the patches, (B, N + 1, D), the chapter's way (positions not added)."""
    return torch.cat([cls.expand(x.size(0), -1, -1), x], dim=1)


@right("7.3")
def prepend_cls(x, cls, pos):
    """cat into a fresh tensor, then += pos on that fresh tensor (pos squeezed to (N + 1, D))"""
    out = torch.cat([cls.expand(x.shape[0], 1, x.shape[2]), x], dim=1)
    out += pos.squeeze(0)
    return out


table("7.3", [
    ("expand, cat, add (as in the chapter)", RIGHT,
     lambda x, cls, pos: torch.cat([cls.expand(x.size(0), -1, -1), x], dim=1) + pos),
    ("repeat instead of expand, and positions added to each part separately", RIGHT,
     lambda x, cls, pos: torch.cat((cls.repeat(x.shape[0], 1, 1) + pos[:, :1], x + pos[:, 1:]), dim=-2)),
    ("a per-image loop with torch.stack; an extra harmless keyword argument", RIGHT,
     lambda x, cls, pos, dim=1: torch.stack([torch.cat([cls[0], xi], dim=dim - 1) + pos[0] for xi in x])),
    ("broadcast_to and torch.add", RIGHT,
     lambda x, cls, pos: torch.add(torch.cat([torch.broadcast_to(cls, (x.size(0), 1, x.size(2))), x], 1),
                                   pos.expand(x.size(0), x.size(1) + 1, x.size(2)))),
    # the class token
    ("adds the class token to every patch instead of concatenating it", "token of its own",
     lambda x, cls, pos: x + cls + pos[:, 1:]),
    ("puts the class token last", "first",
     lambda x, cls, pos: torch.cat([x, cls.expand(x.size(0), -1, -1)], dim=1) + pos),
    ("leaves the class token out: only adds the patch positions, x + pos[:, 1:]", "the encoder gets N + 1",
     lambda x, cls, pos: x + pos[:, 1:]),
    ("prepends cls and also adds it to every patch: cat([cls, x + cls]) + pos", "added cls to the patches",
     lambda x, cls, pos: _tokens(x + cls, cls) + pos),
    ("prepends cls, then adds cls to every token as well as pos (the class token counted twice)",
     "added cls to every token", lambda x, cls, pos: _tokens(x, cls) + cls + pos),
    # the positions
    ("forgets the position embeddings", "forgot the positions", lambda x, cls, pos: _tokens(x, cls)),
    ("adds positions to the patches only; the class token gets none", "no position",
     lambda x, cls, pos: _tokens(x + pos[:, 1:], cls)),
    ("adds the patch positions before the concatenation, none to the class token", "before the concatenation",
     lambda x, cls, pos: _tokens(x + pos[:, 1:], cls)),
    ("adds the positions before prepending: patches get rows 0..N-1, the class token row N", "pos[:, 0]",
     lambda x, cls, pos: torch.cat([cls.expand(x.size(0), -1, -1) + pos[:, x.size(1):], x + pos[:, :x.size(1)]], 1)),
    ("patch i gets pos[:, i], the class token pos[:, 0]: both start at row 0", "pos[:, i + 1], not pos[:, i]",
     lambda x, cls, pos: torch.cat([cls.expand(x.size(0), -1, -1) + pos[:, :1], x + pos[:, :-1]], dim=1)),
    ("patch i gets pos[:, i], the class token none", "patch i must get pos[:, i + 1]",
     lambda x, cls, pos: _tokens(x + pos[:, :x.size(1)], cls)),
    ("adds the positions once before and once after the concatenation", "twice",
     lambda x, cls, pos: torch.cat([cls.expand(x.size(0), -1, -1) + pos[:, :1], x + pos[:, 1:]], dim=1) + pos),
    ("adds the positions in reverse order (pos.flip(1))", "flipped", lambda x, cls, pos: _tokens(x, cls) + pos.flip(1)),
    ("adds only the class token's position row pos[:, :1] to every token", "all of pos",
     lambda x, cls, pos: _tokens(x, cls) + pos[:, :1]),
    ("adds all of pos to the patches before prepending cls (N + 1 rows onto N patches)", "pos has N + 1 rows",
     lambda x, cls, pos: _tokens(x + pos, cls)),
    ("slices pos to N rows after the concatenation: pos[:, :N]",
     "pos has N + 1 rows, one per token including the class token",
     lambda x, cls, pos: _tokens(x, cls) + pos[:, :x.shape[1]]),
    ("multiplies by the positions instead of adding them", WRONG, lambda x, cls, pos: _tokens(x, cls) * pos),
    # the batch and the axes
    ("no expand over the batch: only a batch of one works", "expand",
     lambda x, cls, pos: torch.cat([cls, x], dim=1) + pos),
    ("keeps only the first image of the batch", "every image",
     lambda x, cls, pos: (torch.cat([cls, x[:1]], dim=1) + pos).expand(x.size(0), -1, -1)),
    ("concatenates along the feature axis (dim=-1)", "dim=1",
     lambda x, cls, pos: torch.cat([cls.expand(x.size(0), x.size(1), -1), x], dim=-1)),
    *[(f"expands cls, then concatenates along {dim}", "the token axis, dim 1",
       lambda x, cls, pos, d=d: torch.cat([cls.expand(x.size(0), -1, -1), x], d) + pos)
      for dim, d in (("dim 2 (the features) instead of dim 1", 2), ("dim=-1", -1), ("dim 0 (the batch)", 0))],
    # sizes fixed to the chapter's
    ("slices pos to the chapter's 16 patches + 1: pos[:, :17] (a no-op for 16 patches or fewer)", "without slicing it",
     lambda x, cls, pos: _tokens(x, cls) + pos[:, :17]),
    ("keeps the chapter's 16 patch tokens: x[:, :16] (all of them when there are 16 or fewer)", "fixed",
     lambda x, cls, pos: _tokens(x[:, :16], cls) + pos[:, :x[:, :16].size(1) + 1]),
    ("expands cls to the chapter's batch of 3 digits", "x.size(0)",
     lambda x, cls, pos: torch.cat([cls.expand(3, -1, -1), x], dim=1) + pos),
    ("broadcasts cls over the training batch size 64, then keeps as many as x has: cls.expand(64, ...)[:B]",
     "x.size(0)", lambda x, cls, pos: torch.cat([cls.expand(64, -1, -1)[:x.size(0)], x], dim=1) + pos),
    ("expands cls to the chapter's d_model 64: cls.expand(B, 1, 64)", "fixed",
     lambda x, cls, pos: torch.cat([cls.expand(x.size(0), 1, 64), x], dim=1) + pos),
    ("slices pos to the chapter's d_model: pos[..., :64] (a no-op for d_model 64 or less)", "fixed",
     lambda x, cls, pos: _tokens(x, cls) + pos[..., :64]),
    # gradients, dtypes, the type of the result
    ("detaches the class token and positions ('they are only constants')", "detach",
     lambda x, cls, pos: _tokens(x, cls.detach()) + pos.detach()),
    ("detaches only cls", "`cls`", lambda x, cls, pos: _tokens(x, cls.detach()) + pos),
    ("detaches only pos", "`pos`", lambda x, cls, pos: _tokens(x, cls) + pos.detach()),
    ("detaches x", "`x`", lambda x, cls, pos: _tokens(x.detach(), cls) + pos),
    ("detaches the result", "no gradient", lambda x, cls, pos: (_tokens(x, cls) + pos).detach()),
    ("uses cls.data and pos.data ('to avoid autograd overhead')", ".data",
     lambda x, cls, pos: _tokens(x, cls.data) + pos.data),
    ("adds cls - cls.detach() (zero) to every token: right values, but cls gets (N + 1) gradients per image",
     "gradient of your result's sum with respect to `cls`",
     lambda x, cls, pos: _tokens(x, cls) + pos + (cls - cls.detach())),
    ("casts to float32 (float64 inputs come back float32)", "dtype",
     lambda x, cls, pos: (_tokens(x, cls) + pos).float()),
    ("casts to float64 (float32 inputs come back float64)", "has dtype torch.float64",
     lambda x, cls, pos: (_tokens(x, cls) + pos).double()),
    ("returns a Python list of per-image tensors", "tensor", lambda x, cls, pos: list(_tokens(x, cls) + pos)),
])


@wrong("7.3", hint="overwrit")
def prepend_cls(x, cls, pos):
    """overwrites the first patch with the class token (N tokens, not N + 1)"""
    out = x.clone()
    out[:, 0] = cls[:, 0]
    return out + pos[:, 1:]


@wrong("7.3", hint="no gradient flows back")
def prepend_cls(x, cls, pos):
    """computes the result under torch.no_grad()"""
    with torch.no_grad():
        return _tokens(x, cls) + pos


@wrong("7.3", hint="in place")
def prepend_cls(x, cls, pos):
    """adds the patch positions to x in place, then concatenates"""
    with torch.no_grad():
        x += pos[:, 1:]
    return torch.cat([cls.expand(x.size(0), -1, -1) + pos[:, :1], x], dim=1)


@wrong("7.3", hint="fixed")
def prepend_cls(x, cls, pos):
    """a ViT-Base sized buffer: zeros(B, 197, 768), filled, then cut to the input's sizes"""
    B, N, D = x.shape
    out = x.new_zeros(B, 197, 768)
    out[:, :1, :D] = cls
    out[:, 1:N + 1, :D] = x
    return out[:, :N + 1, :D] + pos


@wrong("7.3", hint="right only to about float32 precision")
def prepend_cls(x, cls, pos):
    """fills a new float32 tensor (torch.zeros without dtype), then adds pos: float64 again, rounded on the way"""
    B, N, D = x.shape
    out = torch.zeros(B, N + 1, D)
    out[:, 0] = cls[0, 0]
    out[:, 1:] = x
    return out + pos


@right("7.3")
def prepend_cls(x, cls, pos):
    """fills a new zero tensor by slices, then adds the positions"""
    B, N, D = x.shape
    out = x.new_zeros(B, N + 1, D)
    out[:, :1] = cls
    out[:, 1:] = x
    return out + pos
