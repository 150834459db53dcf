"""Chapter 7 (ViT patches): learner answers to exercises 7.1-7.3."""
from __future__ import annotations

import importlib.util
import types
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

import attnbook.patches as _patches
from mutants import right, value, wrong  # noqa: F401

_PATCHES_PY = Path(_patches.__file__)


def _fresh_patches():
    """A second, separate import of attnbook/patches.py (not the module in sys.modules)."""
    spec = importlib.util.spec_from_file_location("attnbook._patches_copy", _PATCHES_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ----------------------------------------------------------------------------------------------------------------
# 7.1  patchify(images, patch_size) -> (B, N, P*P*C)
# ----------------------------------------------------------------------------------------------------------------

wrong("7.1", hint="attnbook.patches.patchify, the package's own solution",
      name="handed in attnbook.patches.patchify itself")(_patches.patchify)
wrong("7.1", hint="the package's own solution", name="a lambda around attnbook.patches.patchify")(
    lambda images, patch_size: _patches.patchify(images, patch_size))


@wrong("7.1", hint="package's own")
def patchify(images, patch_size):
    """a def wrapper that calls attnbook.patches.patchify"""
    from attnbook.patches import patchify as theirs

    return theirs(images, patch_size)


_pf = _patches.patchify
wrong("7.1", hint="package's own", name="a types.FunctionType copy of attnbook.patches.patchify")(
    types.FunctionType(_pf.__code__, _pf.__globals__, "patchify", _pf.__defaults__, _pf.__closure__))
wrong("7.1", hint="package's own", name="patchify from a second, separate import of attnbook/patches.py")(
    _fresh_patches().patchify)


@wrong("7.1", hint="without")
def patchify(images, patch_size):
    """F.unfold (im2col), then reorders its channels-first columns to channels innermost"""
    B, C, H, W = images.shape
    P = patch_size
    cols = F.unfold(images, kernel_size=P, stride=P)  # (B, C*P*P, N)
    return cols.reshape(B, C, P * P, -1).permute(0, 3, 2, 1).reshape(B, -1, P * P * C)


@wrong("7.1", hint="without")
def patchify(images, patch_size):
    """nn.Unfold module, reordered to channels innermost"""
    B, C, H, W = images.shape
    P = patch_size
    cols = nn.Unfold(P, stride=P)(images)
    return cols.reshape(B, C, P * P, -1).permute(0, 3, 2, 1).reshape(B, -1, P * P * C)


@wrong("7.1", hint="the task asks you to write this without torch.nn.functional.pixel_unshuffle")
def patchify(images, patch_size):
    """pixel_unshuffle, then moves the channels innermost"""
    B, C, H, W = images.shape
    P = patch_size
    x = F.pixel_unshuffle(images, P)  # (B, C*P*P, H/P, W/P)
    x = x.reshape(B, C, P * P, H // P, W // P).permute(0, 3, 4, 2, 1)
    return x.reshape(B, (H // P) * (W // P), P * P * C)


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


@wrong("7.1", hint="the task asks you to write this without torch.ops.aten.im2col")
def patchify(images, patch_size):
    """torch.ops.aten.im2col (the op behind F.unfold), reordered to channels innermost"""
    B, C, H, W = images.shape
    P = patch_size
    cols = torch.ops.aten.im2col(images, [P, P], [1, 1], [0, 0], [P, P]).transpose(1, 2)  # (B, N, C*P*P)
    return cols.reshape(B, -1, C, P * P).transpose(2, 3).reshape(B, -1, P * P * C)


@wrong("7.1", hint="the task asks you to write this without torch._C._nn.im2col")
def patchify(images, patch_size):
    """torch._C._nn.im2col, reordered to channels innermost"""
    B, C, H, W = images.shape
    P = patch_size
    cols = torch._C._nn.im2col(images, [P, P], [1, 1], [0, 0], [P, P]).transpose(1, 2)  # (B, N, C*P*P)
    return cols.reshape(B, -1, C, P * P).transpose(2, 3).reshape(B, -1, P * P * C)


@wrong("7.1", hint="the task asks you to write this without torch.nn.PixelUnshuffle")
def patchify(images, patch_size):
    """the nn.PixelUnshuffle module, reordered to channels innermost"""
    B, C, H, W = images.shape
    P = patch_size
    x = nn.PixelUnshuffle(P)(images).reshape(B, C, P * P, -1).permute(0, 3, 2, 1)  # (B, N, P*P, C)
    return x.reshape(B, -1, P * P * C)


@wrong("7.1", hint="the task asks you to write this without attnbook.patches.unpatchify")
def patchify(images, patch_size):
    """unpatchify applied to indices builds the permutation, which is then applied to the pixels"""
    from attnbook.patches import unpatchify

    B, C, H, W = images.shape
    P = patch_size
    n = (H // P) * (W // P)
    where = unpatchify(torch.arange(C * H * W).reshape(1, n, P * P * C), P, H, W).flatten()
    return images.flatten(1)[:, torch.argsort(where)].reshape(B, n, P * P * C)


@wrong("7.1", hint="plain reshape")
def patchify(images, patch_size):
    """a plain reshape of the image (rows of pixels, not patches)"""
    B, C, H, W = images.shape
    P = patch_size
    return images.permute(0, 2, 3, 1).reshape(B, (H // P) * (W // P), P * P * C)


@wrong("7.1", hint="channel")
def patchify(images, patch_size):
    """channels outermost in each patch (the Conv2d / unfold order)"""
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(B, (H // P) * (W // P), P * P * C)


@wrong("7.1", hint="column-major")
def patchify(images, patch_size):
    """patches listed column by column (grid axes swapped)"""
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 4, 2, 3, 5, 1)
    return x.reshape(B, (H // P) * (W // P), P * P * C)


@wrong("7.1", hint="column-major")
def patchify(images, patch_size):
    """each patch flattened column by column (pixel row and pixel column swapped)"""
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 5, 3, 1)
    return x.reshape(B, (H // P) * (W // P), P * P * C)


@wrong("7.1", hint="not square")
def patchify(images, patch_size):
    """assumes square images: uses H for the width too"""
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, H // P, P).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, (H // P) ** 2, P * P * C)


@wrong("7.1", hint="dtype")
def patchify(images, patch_size):
    """casts the result to float32 (float64 images come back float32)"""
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, (H // P) * (W // P), P * P * C).float()


@wrong("7.1", hint="batch dimension")
def patchify(images, patch_size):
    """squeezes the batch axis away (a batch of one comes back 2-D)"""
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, (H // P) * (W // P), P * P * C).squeeze(0)


@wrong("7.1", hint="patch_size")
def patchify(images, patch_size):
    """hard-codes the chapter's patch size 2 and ignores patch_size"""
    B, C, H, W = images.shape
    P = 2
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, (H // P) * (W // P), P * P * C)


@wrong("7.1", hint="channel")
def patchify(images, patch_size):
    """grey images only: keeps channel 0 and drops the others"""
    B, C, H, W = images.shape
    P = patch_size
    x = images[:, :1].reshape(B, 1, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, (H // P) * (W // P), P * P)


@wrong("7.1", hint="grid")
def patchify(images, patch_size):
    """splits each side as (P, H/P) instead of (H/P, P): strided pixels, not patches"""
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, P, H // P, P, W // P).permute(0, 3, 5, 2, 4, 1)
    return x.reshape(B, (H // P) * (W // P), P * P * C)


@wrong("7.1", hint="tensor")
def patchify(images, patch_size):
    """returns a nested Python list (.tolist()) instead of a tensor"""
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, (H // P) * (W // P), P * P * C).tolist()


@wrong("7.1", hint="tensor")
def patchify(images, patch_size):
    """returns a numpy array"""
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, (H // P) * (W // P), P * P * C).numpy()


@wrong("7.1", hint="(B, C, H, W)")
def patchify(images, patch_size):
    """swaps H and W when splitting (reads the shape as (B, C, W, H))"""
    B, C, W, H = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, (H // P) * (W // P), P * P * C)


value("7.1", torch.arange(12.0).reshape(1, 1, 12), right=False, hint="function",
      name="passes the worked example's patch tensor (a result) instead of the function")


@wrong("7.1", hint="fixed numbers")
def patchify(images, patch_size):
    """hard-codes a batch of one (reshape(1, ...))"""
    _, C, H, W = images.shape
    P = patch_size
    x = images.reshape(1, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(1, (H // P) * (W // P), P * P * C)


@wrong("7.1")
def patchify(images, patch_size):
    """.squeeze() at the end 'to tidy up' (drops every size-1 axis)"""
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, (H // P) * (W // P), P * P * C).squeeze()


@wrong("7.1", hint="torch.float16")
def patchify(images, patch_size):
    """casts the result to half precision (.half())"""
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, (H // P) * (W // P), P * P * C).half()


@right("7.1")
def patchify(images, patch_size):
    """reshape and permute, as in the chapter"""
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, (H // P) * (W // P), P * P * C)


@right("7.1")
def patchify(images, patch_size):
    """Python loops over the grid, stacking each patch moved to (P, P, C)"""
    B, C, H, W = images.shape
    P = patch_size
    out = []
    for r in range(H // P):
        for c in range(W // P):
            patch = images[:, :, r * P:(r + 1) * P, c * P:(c + 1) * P]  # (B, C, P, P)
            out.append(patch.permute(0, 2, 3, 1).reshape(B, P * P * C))
    return torch.stack(out, dim=1)


@right("7.1")
def patchify(images, patch_size):
    """Tensor.unfold twice (allowed), then channels innermost"""
    B, C, H, W = images.shape
    P = patch_size
    x = images.unfold(2, P, P).unfold(3, P, P)  # (B, C, H/P, W/P, P, P)
    x = x.permute(0, 2, 3, 4, 5, 1)  # (B, H/P, W/P, P, P, C)
    return x.reshape(B, -1, P * P * C)


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

def _conv(weight, bias, P, kernel, with_bias=True, **kw):
    D, C = weight.size(0), weight.size(1) // (P * P)
    kw = {"kernel_size": P, "stride": P, "dtype": weight.dtype, **kw}
    conv = nn.Conv2d(C, D, bias=with_bias, **kw)
    with torch.no_grad():
        conv.weight.copy_(kernel)
        if conv.bias is not None:
            conv.bias.copy_(bias)
    return conv


@wrong("7.2", hint="permute")
def patch_embedding_as_conv(weight, bias, patch_size):
    """a plain reshape of the weight to (D, C, P, P)"""
    P = patch_size
    D, C = weight.size(0), weight.size(1) // (P * P)
    return _conv(weight, bias, P, weight.reshape(D, C, P, P))


@wrong("7.2", hint="dtype")
def patch_embedding_as_conv(weight, bias, patch_size):
    """creates the convolution without dtype=weight.dtype (float32 always)"""
    P = patch_size
    D, C = weight.size(0), weight.size(1) // (P * P)
    conv = nn.Conv2d(C, D, kernel_size=P, stride=P)
    with torch.no_grad():
        conv.weight.copy_(weight.reshape(D, P, P, C).permute(0, 3, 1, 2))
        conv.bias.copy_(bias)
    return conv


@wrong("7.2", hint="bias")
def patch_embedding_as_conv(weight, bias, patch_size):
    """forgets to copy the bias (the convolution keeps its random one)"""
    P = patch_size
    D, C = weight.size(0), weight.size(1) // (P * P)
    conv = nn.Conv2d(C, D, kernel_size=P, stride=P, dtype=weight.dtype)
    with torch.no_grad():
        conv.weight.copy_(weight.reshape(D, P, P, C).permute(0, 3, 1, 2))
    return conv


@wrong("7.2", hint="bias")
def patch_embedding_as_conv(weight, bias, patch_size):
    """a convolution with bias=False"""
    P = patch_size
    D, C = weight.size(0), weight.size(1) // (P * P)
    return _conv(weight, bias, P, weight.reshape(D, P, P, C).permute(0, 3, 1, 2), with_bias=False)


@wrong("7.2", hint="swapped")
def patch_embedding_as_conv(weight, bias, patch_size):
    """permute(0, 3, 2, 1): the kernel's pixel rows and columns swapped"""
    P = patch_size
    D, C = weight.size(0), weight.size(1) // (P * P)
    return _conv(weight, bias, P, weight.reshape(D, P, P, C).permute(0, 3, 2, 1))


@wrong("7.2", hint="stride")
def patch_embedding_as_conv(weight, bias, patch_size):
    """stride 1: overlapping windows"""
    P = patch_size
    D, C = weight.size(0), weight.size(1) // (P * P)
    return _conv(weight, bias, P, weight.reshape(D, P, P, C).permute(0, 3, 1, 2), stride=1)


@wrong("7.2", hint="padding")
def patch_embedding_as_conv(weight, bias, patch_size):
    """padding=1 added 'to keep the borders'"""
    P = patch_size
    D, C = weight.size(0), weight.size(1) // (P * P)
    return _conv(weight, bias, P, weight.reshape(D, P, P, C).permute(0, 3, 1, 2), padding=1)


@wrong("7.2", hint="no_grad")
def patch_embedding_as_conv(weight, bias, patch_size):
    """copies into the parameters without torch.no_grad()"""
    P = patch_size
    D, C = weight.size(0), weight.size(1) // (P * P)
    conv = nn.Conv2d(C, D, kernel_size=P, stride=P, dtype=weight.dtype)
    conv.weight.copy_(weight.reshape(D, P, P, C).permute(0, 3, 1, 2))
    conv.bias.copy_(bias)
    return conv


@wrong("7.2", hint="expected an nn.Conv2d")
def patch_embedding_as_conv(weight, bias, patch_size):
    """returns an nn.Linear (the layer it started from), not a convolution"""
    lin = nn.Linear(weight.size(1), weight.size(0), dtype=weight.dtype)
    with torch.no_grad():
        lin.weight.copy_(weight)
        lin.bias.copy_(bias)
    return lin


@wrong("7.2", hint="Conv2d")
def patch_embedding_as_conv(weight, bias, patch_size):
    """returns a plain function images -> conv output instead of an nn.Conv2d"""
    P = patch_size
    D, C = weight.size(0), weight.size(1) // (P * P)
    kernel = weight.reshape(D, P, P, C).permute(0, 3, 1, 2)
    return lambda images: F.conv2d(images, kernel, bias, stride=P)


@wrong("7.2", hint="channel")
def patch_embedding_as_conv(weight, bias, patch_size):
    """hard-codes C = 3 (RGB) instead of working it out from the weight"""
    P = patch_size
    D, C = weight.size(0), 3
    conv = nn.Conv2d(C, D, kernel_size=P, stride=P, dtype=weight.dtype)
    with torch.no_grad():
        conv.weight.copy_(weight.reshape(D, P, P, -1)[..., :C].permute(0, 3, 1, 2))
        conv.bias.copy_(bias)
    return conv


@wrong("7.2")
def patch_embedding_as_conv(weight, bias, patch_size):
    """works out C as weight.size(1) // P (forgets that a patch has P*P pixels)"""
    P = patch_size
    D, C = weight.size(0), weight.size(1) // P
    conv = nn.Conv2d(C, D, kernel_size=P, stride=P, dtype=weight.dtype)
    with torch.no_grad():
        conv.weight.copy_(weight.reshape(D, P, P, C).permute(0, 3, 1, 2))
        conv.bias.copy_(bias)
    return conv


@wrong("7.2", hint="package's own")
def patch_embedding_as_conv(weight, bias, patch_size):
    """builds an attnbook PatchEmbedding with the weights and calls its to_conv()"""
    from attnbook.patches import PatchEmbedding

    P = patch_size
    D, C = weight.size(0), weight.size(1) // (P * P)
    emb = PatchEmbedding(P, C, D).to(weight.dtype)
    with torch.no_grad():
        emb.proj.weight.copy_(weight)
        emb.proj.bias.copy_(bias)
    return emb.to_conv()


wrong("7.2", hint="package's own", name="a lambda around PatchEmbedding(...).to_conv()")(
    lambda weight, bias, patch_size: _embedding_to_conv(weight, bias, patch_size))


def _embedding_to_conv(weight, bias, patch_size):
    P = patch_size
    D, C = weight.size(0), weight.size(1) // (P * P)
    emb = _patches.PatchEmbedding(P, C, D).to(weight.dtype)
    with torch.no_grad():
        emb.proj.weight.copy_(weight)
        emb.proj.bias.copy_(bias)
    return emb.to_conv()


@wrong("7.2", hint="without")
def patch_embedding_as_conv(weight, bias, patch_size):
    """the kernel from attnbook's unpatchify (the weight's rows read as patches)"""
    from attnbook.patches import unpatchify

    P = patch_size
    D = weight.size(0)
    kernel = unpatchify(weight[:, None, :], P, P, P)[:, :, :, :]  # (D, 1, P*P*C) -> (D, C, P, P)
    return _conv(weight, bias, P, kernel)


@wrong("7.2", hint="package's own")
def patch_embedding_as_conv(weight, bias, patch_size):
    """PatchEmbedding.from_conv round trip: builds the conv from a PatchEmbedding via from_conv/to_conv

    (hint corrected from "without": PatchEmbedding, with its to_conv and from_conv, is the package's own solution
    of 7.2, one of the exercise's references)"""
    P = patch_size
    D, C = weight.size(0), weight.size(1) // (P * P)
    conv = nn.Conv2d(C, D, kernel_size=P, stride=P, dtype=weight.dtype)
    emb = _patches.PatchEmbedding.from_conv(conv)
    with torch.no_grad():
        emb.proj.weight.copy_(weight)
        emb.proj.bias.copy_(bias)
    return emb.to_conv()


@wrong("7.2")
def patch_embedding_as_conv(weight, bias, patch_size):
    """transposes the weight first, confusing it with the (P*P*C, D) matrix E"""
    P = patch_size
    D, C = weight.size(0), weight.size(1) // (P * P)
    return _conv(weight, bias, P, weight.T.reshape(D, P, P, C).permute(0, 3, 1, 2))


@wrong("7.2", hint="dtype")
def patch_embedding_as_conv(weight, bias, patch_size):
    """a fixed dtype=torch.float64 ('to keep the precision')"""
    P = patch_size
    D, C = weight.size(0), weight.size(1) // (P * P)
    return _conv(weight, bias, P, weight.reshape(D, P, P, C).permute(0, 3, 1, 2), dtype=torch.float64)


@wrong("7.2", hint="kernel")
def patch_embedding_as_conv(weight, bias, patch_size):
    """kernel_size=1 with stride=P (one pixel per window)"""
    P = patch_size
    D, C = weight.size(0), weight.size(1) // (P * P)
    conv = nn.Conv2d(C, D, kernel_size=1, stride=P, dtype=weight.dtype)
    with torch.no_grad():
        conv.weight.copy_(weight.reshape(D, P, P, C).permute(0, 3, 1, 2)[:, :, :1, :1])
        conv.bias.copy_(bias)
    return conv


def _made_conv():
    w = torch.randn(8, 12, generator=torch.Generator().manual_seed(0))
    conv = nn.Conv2d(3, 8, kernel_size=2, stride=2)
    with torch.no_grad():
        conv.weight.copy_(w.reshape(8, 2, 2, 3).permute(0, 3, 1, 2))
        conv.bias.zero_()
    return conv


@wrong("7.2", hint="return conv")
def patch_embedding_as_conv(weight, bias, patch_size):
    """builds and fills the convolution but forgets to return it (returns None)"""
    P = patch_size
    D, C = weight.size(0), weight.size(1) // (P * P)
    conv = nn.Conv2d(C, D, kernel_size=P, stride=P, dtype=weight.dtype)
    with torch.no_grad():
        conv.weight.copy_(weight.reshape(D, P, P, C).permute(0, 3, 1, 2))
        conv.bias.copy_(bias)


@wrong("7.2", hint="takes in_channels (C, the image channels) first")
def patch_embedding_as_conv(weight, bias, patch_size):
    """nn.Conv2d(D, C, ...) with in and out swapped, then copies the bias into it (the copy fails)"""
    P = patch_size
    D, C = weight.size(0), weight.size(1) // (P * P)
    conv = nn.Conv2d(D, C, kernel_size=P, stride=P)
    with torch.no_grad():
        conv.bias.copy_(bias)
    return conv


@wrong("7.2", hint="Conv2d's bias has dtype torch.float32")
def patch_embedding_as_conv(weight, bias, patch_size):
    """nn.Conv2d without dtype, a new weight Parameter (right dtype) but the bias copied into the float32 one"""
    P = patch_size
    D, C = weight.size(0), weight.size(1) // (P * P)
    conv = nn.Conv2d(C, D, P, P)
    conv.weight = nn.Parameter(weight.reshape(D, P, P, C).permute(0, 3, 1, 2).clone())
    with torch.no_grad():
        conv.bias.copy_(bias)
    return conv


value("7.2", _made_conv(), right=False, hint="function",
      name="passes a convolution made by calling the function, not the function itself")


@right("7.2")
def patch_embedding_as_conv(weight, bias, patch_size):
    """reshape to (D, P, P, C), permute the channels to the front, as in the chapter"""
    P = patch_size
    D, C = weight.size(0), weight.size(1) // (P * P)
    conv = nn.Conv2d(C, D, kernel_size=P, stride=P, dtype=weight.dtype)
    with torch.no_grad():
        conv.weight.copy_(weight.reshape(D, P, P, C).permute(0, 3, 1, 2))
        conv.bias.copy_(bias)
    return conv


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
    conv = nn.Conv2d(C, D, P, P, dtype=weight.dtype)
    with torch.no_grad():
        conv.weight.copy_(kernel)
        conv.bias.copy_(bias)
    return conv


@right("7.2")
def patch_embedding_as_conv(weight, bias, patch_size):
    """new nn.Parameter objects from a contiguous clone, conv converted with .to(dtype)"""
    P = patch_size
    D, C = weight.size(0), weight.size(1) // (P * P)
    conv = nn.Conv2d(C, D, kernel_size=(P, P), stride=(P, P), padding=0).to(weight.dtype)
    conv.weight = nn.Parameter(weight.detach().view(D, P, P, C).permute(0, 3, 1, 2).contiguous().clone())
    conv.bias = nn.Parameter(bias.detach().clone())
    return conv


@right("7.2")
def patch_embedding_as_conv(weight, bias, patch_size, padding_mode="zeros"):
    """einsum permutation and .data assignment; an extra harmless keyword argument"""
    P = patch_size
    D, C = weight.size(0), weight.size(1) // (P * P)
    conv = nn.Conv2d(C, D, P, stride=P, padding_mode=padding_mode, dtype=weight.dtype)
    conv.weight.data = torch.einsum("dpqc->dcpq", weight.detach().reshape(D, P, P, C)).clone()
    conv.bias.data = bias.detach().clone()
    return conv


@right("7.2")
def patch_embedding_as_conv(weight, bias, patch_size):
    """a float32 Conv2d whose parameters are replaced by new ones: the kernel by view and two transposes, cloned"""
    P = patch_size
    D, C = weight.shape[0], weight.shape[1] // (P * P)
    conv = nn.Conv2d(C, D, P, P)
    kernel = weight.view(D, P, P, C).transpose(1, 3).transpose(2, 3)  # (D, C, P, P) by two swaps
    conv.weight = nn.Parameter(kernel.contiguous().clone())
    conv.bias = nn.Parameter(bias.clone())
    return conv


# ----------------------------------------------------------------------------------------------------------------
# 7.3  prepend_cls(x, cls, pos) -> (B, N + 1, D)
# ----------------------------------------------------------------------------------------------------------------

@wrong("7.3", hint="overwrit")
def prepend_cls(x, cls, pos):
    """overwrites the first patch with the class token (N tokens, not N + 1)"""
    out = x.clone()
    out[:, 0] = cls[:, 0]
    return out + pos[:, 1:]


@wrong("7.3", hint="token of its own")
def prepend_cls(x, cls, pos):
    """adds the class token to every patch instead of concatenating it"""
    return x + cls + pos[:, 1:]


@wrong("7.3", hint="first")
def prepend_cls(x, cls, pos):
    """puts the class token last"""
    return torch.cat([x, cls.expand(x.size(0), -1, -1)], dim=1) + pos


@wrong("7.3", hint="forgot the positions")
def prepend_cls(x, cls, pos):
    """forgets the position embeddings"""
    return torch.cat([cls.expand(x.size(0), -1, -1), x], dim=1)


@wrong("7.3", hint="no position")
def prepend_cls(x, cls, pos):
    """adds positions to the patches only; the class token gets none"""
    return torch.cat([cls.expand(x.size(0), -1, -1), x + pos[:, 1:]], dim=1)


@wrong("7.3", hint="pos[:, 0]")
def prepend_cls(x, cls, pos):
    """adds the positions before prepending: patches get rows 0..N-1, the class token row N"""
    B, N, D = x.shape
    return torch.cat([cls.expand(B, -1, -1) + pos[:, N:], x + pos[:, :N]], dim=1)


@wrong("7.3", hint="expand")
def prepend_cls(x, cls, pos):
    """no expand over the batch: only a batch of one works"""
    return torch.cat([cls, x], dim=1) + pos


@wrong("7.3", hint="every image")
def prepend_cls(x, cls, pos):
    """keeps only the first image of the batch"""
    return (torch.cat([cls, x[:1]], dim=1) + pos).expand(x.size(0), -1, -1)


@wrong("7.3", hint="dim=1")
def prepend_cls(x, cls, pos):
    """concatenates along the feature axis (dim=-1)"""
    B, N, D = x.shape
    y = torch.cat([cls.expand(B, N, -1), x], dim=-1)
    return y


@wrong("7.3", hint="detach")
def prepend_cls(x, cls, pos):
    """detaches the class token and positions ('they are only constants')"""
    return torch.cat([cls.detach().expand(x.size(0), -1, -1), x], dim=1) + pos.detach()


@wrong("7.3", hint="no gradient flows back")
def prepend_cls(x, cls, pos):
    """computes the result under torch.no_grad()"""
    with torch.no_grad():
        return torch.cat([cls.expand(x.size(0), -1, -1), x], dim=1) + pos


@wrong("7.3", hint="in place")
def prepend_cls(x, cls, pos):
    """adds the patch positions to x in place, then concatenates"""
    with torch.no_grad():
        x += pos[:, 1:]
    return torch.cat([cls.expand(x.size(0), -1, -1) + pos[:, :1], x], dim=1)


@wrong("7.3", hint="dtype")
def prepend_cls(x, cls, pos):
    """casts to float32 (float64 inputs come back float32)"""
    return (torch.cat([cls.expand(x.size(0), -1, -1), x], dim=1) + pos).float()


@wrong("7.3", hint="tensor")
def prepend_cls(x, cls, pos):
    """returns a Python list of per-image tensors"""
    return list(torch.cat([cls.expand(x.size(0), -1, -1), x], dim=1) + pos)


@wrong("7.3", hint="all of pos")
def prepend_cls(x, cls, pos):
    """adds only the class token's position row pos[:, :1] to every token"""
    return torch.cat([cls.expand(x.size(0), -1, -1), x], dim=1) + pos[:, :1]


@wrong("7.3", hint=".data")
def prepend_cls(x, cls, pos):
    """uses cls.data and pos.data ('to avoid autograd overhead')"""
    return torch.cat([cls.data.expand(x.size(0), -1, -1), x], dim=1) + pos.data


@wrong("7.3", hint="the encoder gets N + 1")
def prepend_cls(x, cls, pos):
    """leaves the class token out: only adds the patch positions, x + pos[:, 1:]"""
    return x + pos[:, 1:]


@wrong("7.3", hint="pos has N + 1 rows")
def prepend_cls(x, cls, pos):
    """adds all of pos to the patches before prepending cls (N + 1 rows onto N patches)"""
    return torch.cat([cls.expand(x.size(0), -1, -1), x + pos], dim=1)


@wrong("7.3", hint="gradient of your result's sum with respect to `cls`")
def prepend_cls(x, cls, pos):
    """adds cls - cls.detach() (zero) to every token: right values, but cls gets (N + 1) gradients per image"""
    return torch.cat([cls.expand(x.size(0), -1, -1), x], dim=1) + pos + (cls - cls.detach())


@wrong("7.3")
def prepend_cls(x, cls, pos):
    """multiplies by the positions instead of adding them"""
    return torch.cat([cls.expand(x.size(0), -1, -1), x], dim=1) * pos


@right("7.3")
def prepend_cls(x, cls, pos):
    """cat into a fresh tensor, then += pos on that fresh tensor (pos squeezed to (N + 1, D))"""
    out = torch.cat([cls.expand(x.shape[0], 1, x.shape[2]), x], dim=1)
    out += pos.squeeze(0)
    return out


@right("7.3")
def prepend_cls(x, cls, pos):
    """expand, cat, add (as in the chapter)"""
    return torch.cat([cls.expand(x.size(0), -1, -1), x], dim=1) + pos


@right("7.3")
def prepend_cls(x, cls, pos):
    """repeat instead of expand, and positions added to each part separately"""
    B = x.shape[0]
    head = cls.repeat(B, 1, 1) + pos[:, :1]
    return torch.cat((head, x + pos[:, 1:]), dim=-2)


@right("7.3")
def prepend_cls(x, cls, pos):
    """fills a new zero tensor by slices, then adds the positions"""
    B, N, D = x.shape
    out = x.new_zeros(B, N + 1, D)
    out[:, :1] = cls
    out[:, 1:] = x
    return out + pos


@right("7.3")
def prepend_cls(x, cls, pos, dim=1):
    """a per-image loop with torch.stack; an extra harmless keyword argument"""
    return torch.stack([torch.cat([cls[0], xi], dim=dim - 1) + pos[0] for xi in x])


@right("7.3")
def prepend_cls(x, cls, pos):
    """broadcast_to and torch.add"""
    B, N, D = x.shape
    return torch.add(torch.cat([torch.broadcast_to(cls, (B, 1, D)), x], 1), pos.expand(B, N + 1, D))


# ----------------------------------------------------------------------------------------------------------------
# Added with the checker fixes: one wrong answer per hinted mistake that no entry above covered
# ----------------------------------------------------------------------------------------------------------------

def _right_patchify(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, (H // P) * (W // P), P * P * C)


@wrong("7.1", hint="transposed image")
def patchify(images, patch_size):
    """patchifies images.transpose(2, 3) (width and height swapped in the image itself)"""
    return _right_patchify(images.transpose(2, 3), patch_size)


# transformers' convert_image_to_patches (lfm2_vl, siglip2, ...) needs torchvision, missing here: a function of that
# name in a module of that name stands in for it (the check forbids it by its dotted name)
_SOME_VL = {"__name__": "transformers.models.some_vl.image_processing_some_vl", "_right_patchify": _right_patchify}
exec("def convert_image_to_patches(images, patch_size):\n    return _right_patchify(images, patch_size)\n", _SOME_VL)
wrong("7.1", hint="convert_image_to_patches",
      name="calls transformers' convert_image_to_patches (a stand-in of that name in a transformers module)")(
    lambda images, patch_size: _SOME_VL["convert_image_to_patches"](images, patch_size))


@wrong("7.1", hint="(batch, P*P*C, n_patches), the layout F.unfold returns")
def patchify(images, patch_size):
    """returns (B, P*P*C, N), the F.unfold layout, with the right values"""
    return _right_patchify(images, patch_size).transpose(1, 2)


@wrong("7.1", hint="(batch, n_patches, P*P*C)")
def patchify(images, patch_size):
    """flattens batch and patches into one axis: (B*N, P*P*C)

    (on the first input, a batch of one, this has the shape of a dropped batch axis, so the message may name
    either; both state the expected layout)"""
    out = _right_patchify(images, patch_size)
    return out.reshape(-1, out.size(-1))


def _right_kernel(weight, patch_size):
    P = patch_size
    D, C = weight.size(0), weight.size(1) // (P * P)
    return weight.reshape(D, P, P, C).permute(0, 3, 1, 2)


@wrong("7.2", hint="mixes up every axis")
def patch_embedding_as_conv(weight, bias, patch_size):
    """weight.T.reshape(D, C, P, P): transposed, then a plain reshape"""
    P = patch_size
    D, C = weight.size(0), weight.size(1) // (P * P)
    return _conv(weight, bias, P, weight.T.reshape(D, C, P, P))


@wrong("7.2", hint="in_channels and out_channels are swapped")
def patch_embedding_as_conv(weight, bias, patch_size):
    """nn.Conv2d(D, C, ...): in and out channels swapped (the kernel made to fit by a reshape)"""
    P = patch_size
    D, C = weight.size(0), weight.size(1) // (P * P)
    conv = nn.Conv2d(D, C, kernel_size=P, stride=P, dtype=weight.dtype)
    with torch.no_grad():
        conv.weight.copy_(_right_kernel(weight, P).reshape(C, D, P, P))
    return conv


@wrong("7.2", hint="looks like the kernel")
def patch_embedding_as_conv(weight, bias, patch_size):
    """returns the reordered kernel tensor instead of a convolution"""
    return _right_kernel(weight, patch_size)


@wrong("7.3", hint="pos[:, i + 1], not pos[:, i]")
def prepend_cls(x, cls, pos):
    """patch i gets pos[:, i], the class token pos[:, 0]: both start at row 0"""
    B = x.size(0)
    return torch.cat([cls.expand(B, -1, -1) + pos[:, :1], x + pos[:, :-1]], dim=1)


@wrong("7.3", hint="twice")
def prepend_cls(x, cls, pos):
    """adds the positions once before and once after the concatenation"""
    B = x.size(0)
    return torch.cat([cls.expand(B, -1, -1) + pos[:, :1], x + pos[:, 1:]], dim=1) + pos


@wrong("7.3", hint="flipped")
def prepend_cls(x, cls, pos):
    """adds the positions in reverse order (pos.flip(1))"""
    return torch.cat([cls.expand(x.size(0), -1, -1), x], dim=1) + pos.flip(1)


# ----------------------------------------------------------------------------------------------------------------
# Issue 23: sizes beyond the example (the chapter's 16 patches, batch 3 or 64, d_model 64), float64 kept exact
# ----------------------------------------------------------------------------------------------------------------


@wrong("7.3", hint="without slicing it")
def prepend_cls(x, cls, pos):
    """slices pos to the chapter's 16 patches + 1: pos[:, :17] (a no-op for 16 patches or fewer)"""
    return torch.cat([cls.expand(x.size(0), -1, -1), x], dim=1) + pos[:, :17]


@wrong("7.3", hint="fixed")
def prepend_cls(x, cls, pos):
    """keeps the chapter's 16 patch tokens: x[:, :16] (all of them when there are 16 or fewer)"""
    return torch.cat([cls.expand(x.size(0), -1, -1), x[:, :16]], dim=1) + pos[:, :x[:, :16].size(1) + 1]


@wrong("7.3", hint="x.size(0)")
def prepend_cls(x, cls, pos):
    """expands cls to the chapter's batch of 3 digits"""
    return torch.cat([cls.expand(3, -1, -1), x], dim=1) + pos


@wrong("7.3", hint="x.size(0)")
def prepend_cls(x, cls, pos):
    """broadcasts cls over the training batch size 64, then keeps as many as x has: cls.expand(64, ...)[:B]"""
    return torch.cat([cls.expand(64, -1, -1)[:x.size(0)], x], dim=1) + pos


@wrong("7.3", hint="fixed")
def prepend_cls(x, cls, pos):
    """expands cls to the chapter's d_model 64: cls.expand(B, 1, 64)"""
    return torch.cat([cls.expand(x.size(0), 1, 64), x], dim=1) + pos


@wrong("7.3", hint="fixed")
def prepend_cls(x, cls, pos):
    """slices pos to the chapter's d_model: pos[..., :64] (a no-op for d_model 64 or less)"""
    return torch.cat([cls.expand(x.size(0), -1, -1), x], dim=1) + pos[..., :64]


@wrong("7.3", hint="fixed")
def prepend_cls(x, cls, pos):
    """a ViT-Base sized buffer: zeros(B, 197, 768), filled, then cut to the input's sizes"""
    B, N, D = x.shape
    out = x.new_zeros(B, 197, 768)
    out[:, :1, :D] = cls
    out[:, 1:N + 1, :D] = x
    return out[:, :N + 1, :D] + pos


@wrong("7.1", hint="fixed numbers")
def patchify(images, patch_size):
    """reshapes to the chapter's 16 patches: reshape(B, 16, -1) after the permute"""
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, 16, -1)


@wrong("7.1", hint="float32")
def patchify(images, patch_size):
    """computes in float32 ('the digits are float32') and casts back to the input's dtype"""
    B, C, H, W = images.shape
    P = patch_size
    x = images.float().reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, (H // P) * (W // P), P * P * C).to(images.dtype)


@wrong("7.2", hint="weight's shape")
def patch_embedding_as_conv(weight, bias, patch_size):
    """creates the convolution with the chapter's d_model 64 as out_channels"""
    P = patch_size
    D, C = weight.size(0), weight.size(1) // (P * P)
    conv = nn.Conv2d(C, 64, kernel_size=P, stride=P, dtype=weight.dtype)
    with torch.no_grad():
        conv.weight.copy_(weight.reshape(D, P, P, C).permute(0, 3, 1, 2))
        conv.bias.copy_(bias)
    return conv


@wrong("7.2", hint="float32")
def patch_embedding_as_conv(weight, bias, patch_size):
    """reorders a float32 copy of the weight ('conv weights are float32'), then copies it into a float64 conv"""
    P = patch_size
    D, C = weight.size(0), weight.size(1) // (P * P)
    return _conv(weight, bias, P, weight.float().reshape(D, P, P, C).permute(0, 3, 1, 2))


@wrong("7.1", hint="one row per patch")
def patchify(images, patch_size):
    """flattens each image's patches into one long vector: (B, N*P*P*C)"""
    B, C, H, W = images.shape
    P = patch_size
    return images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1).reshape(B, -1)


# ----------------------------------------------------------------------------------------------------------------
# A learner trial (F4, F6, F7): a Conv2d whose parameters share memory with the inputs; a concatenation along
# another dim than the token axis; cls added to the patches as well as prepended
# ----------------------------------------------------------------------------------------------------------------


@wrong("7.2", hint="shares its memory")
def patch_embedding_as_conv(weight, bias, patch_size):
    """new nn.Parameter objects made from a view of weight and from bias itself (no copy: the conv aliases them)"""
    P = patch_size
    D, C = weight.size(0), weight.size(1) // (P * P)
    conv = nn.Conv2d(C, D, kernel_size=P, stride=P, dtype=weight.dtype)
    conv.weight = nn.Parameter(weight.reshape(D, P, P, C).permute(0, 3, 1, 2))  # a view of the input
    conv.bias = nn.Parameter(bias)
    return conv


@wrong("7.2", hint="shares its memory")
def patch_embedding_as_conv(weight, bias, patch_size):
    """copies the kernel under no_grad, but conv.bias = nn.Parameter(bias): the bias is the caller's tensor"""
    P = patch_size
    D, C = weight.size(0), weight.size(1) // (P * P)
    conv = nn.Conv2d(C, D, kernel_size=P, stride=P, dtype=weight.dtype)
    with torch.no_grad():
        conv.weight.copy_(weight.reshape(D, P, P, C).permute(0, 3, 1, 2))
    conv.bias = nn.Parameter(bias)
    return conv


@wrong("7.2", hint="shares its memory")
def patch_embedding_as_conv(weight, bias, patch_size):
    """assigns .data: conv.weight.data = a view of weight, conv.bias.data = bias.detach()"""
    P = patch_size
    D, C = weight.size(0), weight.size(1) // (P * P)
    conv = nn.Conv2d(C, D, kernel_size=P, stride=P, dtype=weight.dtype)
    conv.weight.data = weight.detach().view(D, P, P, C).permute(0, 3, 1, 2)
    conv.bias.data = bias.detach()
    return conv


@wrong("7.2", hint="shares its memory")
def patch_embedding_as_conv(weight, bias, patch_size):
    """.contiguous() taken for a copy: nn.Parameter(kernel.contiguous()) and nn.Parameter(bias.contiguous())
    (contiguous returns the same tensor when it already is: one channel, or patch size 1, and always the bias)"""
    P = patch_size
    D, C = weight.size(0), weight.size(1) // (P * P)
    conv = nn.Conv2d(C, D, kernel_size=P, stride=P, dtype=weight.dtype)
    conv.weight = nn.Parameter(weight.reshape(D, P, P, C).permute(0, 3, 1, 2).contiguous())
    conv.bias = nn.Parameter(bias.contiguous())
    return conv


@wrong("7.3", hint="the token axis, dim 1")
def prepend_cls(x, cls, pos):
    """expands cls, then concatenates along dim 2 (the features) instead of dim 1"""
    B = x.size(0)
    return torch.cat([cls.expand(B, -1, -1), x], 2) + pos


@wrong("7.3", hint="the token axis, dim 1")
def prepend_cls(x, cls, pos):
    """expands cls, then concatenates along dim=-1"""
    return torch.cat([cls.expand(x.size(0), -1, -1), x], dim=-1) + pos


@wrong("7.3", hint="the token axis, dim 1")
def prepend_cls(x, cls, pos):
    """expands cls, then concatenates along dim 0 (the batch)"""
    return torch.cat([cls.expand(x.size(0), -1, -1), x], dim=0) + pos


@wrong("7.3", hint="added cls to the patches")
def prepend_cls(x, cls, pos):
    """prepends cls and also adds it to every patch: cat([cls, x + cls]) + pos"""
    B = x.size(0)
    return torch.cat([cls.expand(B, -1, -1), x + cls], 1) + pos


@wrong("7.3", hint="added cls to every token")
def prepend_cls(x, cls, pos):
    """prepends cls, then adds cls to every token as well as pos (the class token counted twice)"""
    B = x.size(0)
    return torch.cat([cls.expand(B, -1, -1), x], 1) + cls + pos
