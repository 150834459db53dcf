"""Images as sequences: cutting an image into patches, and the patch embedding of the Vision Transformer (ViT).

An image (B, C, H, W) is cut into a grid of H/P x W/P patches of P x P pixels. `patchify` lists the patches in
row-major order over the grid (left to right, then top to bottom) and flattens each one pixel by pixel, also in
row-major order, with the channels innermost: a 2x2 RGB patch becomes (R, G, B) of the top-left pixel, then of
the top-right, bottom-left and bottom-right pixels, 12 numbers. `PatchEmbedding` multiplies those vectors by a
learned matrix; this is exactly a Conv2d with kernel_size = stride = P (`to_conv` / `from_conv`).
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from ._validate import require_int, require_tensor

__all__ = ["grid_size", "patchify", "unpatchify", "PatchEmbedding"]


def grid_size(height: int, width: int, patch_size: int) -> tuple[int, int]:
    """(rows, columns) of the patch grid of a height x width image; both sides must be multiples of patch_size."""
    require_int(height, "height", minimum=1)
    require_int(width, "width", minimum=1)
    require_int(patch_size, "patch_size", minimum=1)
    if height % patch_size or width % patch_size:
        raise ValueError(
            f"the image size (height={height}, width={width}) must be a multiple of patch_size={patch_size} "
            f"on both sides"
        )
    return height // patch_size, width // patch_size


def patchify(images: Tensor, patch_size: int) -> Tensor:
    """(B, C, H, W) -> (B, n_patches, P*P*C): row-major patches, each flattened pixel by pixel, channels innermost."""
    _check_images(images)
    B, C, H, W = images.shape
    gh, gw = grid_size(H, W, patch_size)
    P = patch_size
    x = images.reshape(B, C, gh, P, gw, P)  # (B, C, gh, P, gw, P): split each side into (grid, pixel in patch)
    x = x.permute(0, 2, 4, 3, 5, 1)  # (B, gh, gw, P, P, C): grid row, grid col, pixel row, pixel col, channel
    return x.reshape(B, gh * gw, P * P * C)  # (B, n_patches, P*P*C)


def unpatchify(patches: Tensor, patch_size: int, height: int, width: int) -> Tensor:
    """(B, n_patches, P*P*C) -> (B, C, H, W): the inverse of `patchify`."""
    require_tensor(patches, "patches")
    if patches.dim() != 3:
        raise ValueError(f"patches must be 3-D (batch, n_patches, patch_dim), got shape {tuple(patches.shape)}")
    gh, gw = grid_size(height, width, patch_size)
    P = patch_size
    B, N, dim = patches.shape
    if N != gh * gw:
        raise ValueError(
            f"patches has {N} patches, but a {height}x{width} image cut with patch_size={P} has "
            f"{gh}x{gw} = {gh * gw} patches"
        )
    if dim % (P * P) or dim == 0:
        raise ValueError(f"the patch dimension {dim} of patches is not a positive multiple of patch_size**2 = {P * P}")
    C = dim // (P * P)
    x = patches.reshape(B, gh, gw, P, P, C)  # (B, gh, gw, P, P, C)
    x = x.permute(0, 5, 1, 3, 2, 4)  # (B, C, gh, P, gw, P)
    return x.reshape(B, C, height, width)  # (B, C, H, W)


class PatchEmbedding(nn.Module):
    """Cut images into P x P patches and project each flattened patch (P*P*C values) to d_model with a Linear."""

    def __init__(self, patch_size: int, in_channels: int, d_model: int, bias: bool = True):
        super().__init__()
        require_int(patch_size, "patch_size", minimum=1)
        require_int(in_channels, "in_channels", minimum=1)
        require_int(d_model, "d_model", minimum=1)
        if not isinstance(bias, bool):
            raise TypeError(f"bias must be a bool, got {type(bias).__name__}")
        self.patch_size, self.in_channels, self.d_model = patch_size, in_channels, d_model
        self.proj = nn.Linear(patch_size * patch_size * in_channels, d_model, bias=bias)  # the matrix E

    def forward(self, images: Tensor) -> Tensor:
        """(B, C, H, W) -> (B, n_patches, d_model)."""
        _check_images(images)
        if images.size(1) != self.in_channels:
            raise ValueError(
                f"images must have in_channels={self.in_channels} channels (dim 1), got shape {tuple(images.shape)}"
            )
        return self.proj(patchify(images, self.patch_size))  # (B, n_patches, P*P*C) -> (B, n_patches, d_model)

    def to_conv(self) -> nn.Conv2d:
        """The equivalent nn.Conv2d(in_channels, d_model, kernel_size=stride=patch_size), with the same weights.

        Its output (B, d_model, H/P, W/P), flattened with `.flatten(2).transpose(1, 2)`, equals this module's.
        """
        P, C, D = self.patch_size, self.in_channels, self.d_model
        w = self.proj.weight
        conv = nn.Conv2d(C, D, kernel_size=P, stride=P, bias=self.proj.bias is not None, device=w.device, dtype=w.dtype)
        with torch.no_grad():
            # Linear columns are ordered (pixel row, pixel col, channel); Conv2d's kernel is (channel, row, col).
            conv.weight.copy_(w.reshape(D, P, P, C).permute(0, 3, 1, 2))  # (D, P*P*C) -> (D, P, P, C) -> (D, C, P, P)
            if self.proj.bias is not None:
                conv.bias.copy_(self.proj.bias)
        return conv.train(self.training)

    @classmethod
    def from_conv(cls, conv: nn.Conv2d) -> "PatchEmbedding":
        """A PatchEmbedding with the weights of `conv`, a Conv2d with a square kernel, stride = kernel, no padding."""
        if not isinstance(conv, nn.Conv2d):
            raise TypeError(f"conv must be an nn.Conv2d, got {type(conv).__name__}")
        kh, kw = conv.kernel_size
        if kh != kw:
            raise ValueError(f"conv must have a square kernel, got kernel_size={conv.kernel_size}")
        if tuple(conv.stride) != (kh, kw):
            raise ValueError(f"conv must have stride == kernel_size (non-overlapping patches), got "
                             f"stride={conv.stride} and kernel_size={conv.kernel_size}")
        if conv.padding not in ("valid", (0, 0)):
            raise ValueError(f"conv must have no padding, got padding={conv.padding!r}")
        if tuple(conv.dilation) != (1, 1):
            raise ValueError(f"conv must have dilation=1, got dilation={conv.dilation}")
        if conv.groups != 1:
            raise ValueError(f"conv must have groups=1, got groups={conv.groups}")
        P, C, D = kh, conv.in_channels, conv.out_channels
        w = conv.weight
        new = cls(P, C, D, bias=conv.bias is not None).to(device=w.device, dtype=w.dtype)
        with torch.no_grad():
            new.proj.weight.copy_(w.permute(0, 2, 3, 1).reshape(D, P * P * C))  # (D, C, P, P) -> (D, P, P, C) -> (D, P*P*C)
            if conv.bias is not None:
                new.proj.bias.copy_(conv.bias)
        return new.train(conv.training)

    def extra_repr(self) -> str:
        return f"patch_size={self.patch_size}, in_channels={self.in_channels}, d_model={self.d_model}"


def _check_images(images) -> None:
    """Raise TypeError unless `images` is a tensor, ValueError unless it is 4-D (batch, channels, height, width)."""
    require_tensor(images, "images")
    if images.dim() != 4:
        raise ValueError(f"images must be 4-D (batch, channels, height, width), got shape {tuple(images.shape)}")
