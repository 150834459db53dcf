"""A Vision Transformer (ViT, Dosovitskiy et al. 2020): an image as a sequence of patches, classified from a CLS token.

patches -> linear embedding -> [CLS] + patches -> + learned positions -> pre-norm encoder blocks -> LayerNorm
-> head on the CLS output. The head is the paper's pre-training head (`head="mlp"`: Linear, tanh, Linear) or
its fine-tuning head (`head="linear"`: one D x K layer); `reset_head` swaps in a new linear head, zero or
randomly initialised, as fine-tuning on a new task does.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .._validate import require_int, require_tensor
from ..layers import EncoderBlock, LayerNorm
from ..patches import PatchEmbedding, grid_size

__all__ = ["ViTConfig", "ViT", "HEADS", "HEAD_INITS"]

HEADS = ("linear", "mlp")
HEAD_INITS = ("random", "zero")


@dataclass
class ViTConfig:
    """Sizes of a ViT; the defaults fit scikit-learn's 8x8 grey digits (16 patches of 2x2 pixels)."""

    image_size: int = 8
    patch_size: int = 2
    in_channels: int = 1
    n_classes: int = 10
    d_model: int = 64
    n_layers: int = 4
    n_heads: int = 4
    d_ff: int = 128
    dropout: float = 0.0
    head: str = "linear"  # "linear": one D x K layer (fine-tuning head); "mlp": Linear(D, D), tanh, Linear(D, K)
    head_init: str = "random"  # "random" (PyTorch's default) or "zero" (the head's last layer starts at 0)

    def __post_init__(self):
        for name in ("image_size", "patch_size", "in_channels", "n_classes", "d_model", "n_layers", "n_heads", "d_ff"):
            require_int(getattr(self, name), name, minimum=1)
        grid_size(self.image_size, self.image_size, self.patch_size)  # ValueError unless P divides the image
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        d = self.dropout
        if isinstance(d, bool) or not isinstance(d, (int, float)) or not 0.0 <= d < 1.0:
            raise ValueError(f"dropout must be a float in [0, 1), got {d!r}")
        if self.head not in HEADS:
            raise ValueError(f"head must be one of {HEADS}, got {self.head!r}")
        if self.head_init not in HEAD_INITS:
            raise ValueError(f"head_init must be one of {HEAD_INITS}, got {self.head_init!r}")

    @property
    def n_patches(self) -> int:
        """Number of patches per image, (image_size / patch_size) ** 2."""
        return (self.image_size // self.patch_size) ** 2


class ViT(nn.Module):
    """Vision Transformer: images (B, C, H, W) -> class logits (B, n_classes)."""

    def __init__(self, config: ViTConfig):
        super().__init__()
        if not isinstance(config, ViTConfig):
            raise TypeError(f"config must be a ViTConfig, got {type(config).__name__}")
        self.config = c = config
        self.patch_embed = PatchEmbedding(c.patch_size, c.in_channels, c.d_model)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, c.d_model))  # (1, 1, D), a learned "summary" token
        self.pos_emb = nn.Parameter(torch.zeros(1, 1 + c.n_patches, c.d_model))  # (1, 1 + N, D), CLS is position 0
        nn.init.normal_(self.cls_token, std=0.02)
        nn.init.normal_(self.pos_emb, std=0.02)
        self.dropout = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(
            EncoderBlock(c.d_model, c.n_heads, c.d_ff, c.dropout, activation="gelu", norm_first=True)
            for _ in range(c.n_layers)
        )
        self.norm = LayerNorm(c.d_model)
        self.head = _make_head(c.head, c.d_model, c.n_classes, c.head_init)

    def forward(self, images: Tensor) -> Tensor:
        """(B, C, H, W) -> logits (B, n_classes)."""
        x = self.embed(images)  # (B, 1 + N, D)
        for block in self.blocks:
            x = block(x)  # (B, 1 + N, D)
        return self.head(self.norm(x)[:, 0])  # (B, D) CLS output -> (B, n_classes)

    def embed(self, images: Tensor) -> Tensor:
        """(B, C, H, W) -> (B, 1 + n_patches, D): patch embeddings after a CLS token, plus positions."""
        self._check_images(images)
        x = self.patch_embed(images)  # (B, N, D)
        cls = self.cls_token.expand(x.size(0), -1, -1)  # (B, 1, D)
        x = torch.cat([cls, x], dim=1) + self.pos_emb  # (B, 1 + N, D)
        return self.dropout(x)

    def attention_weights(self, images: Tensor) -> list[Tensor]:
        """Every layer's self-attention weights, a list of n_layers tensors (B, n_heads, 1 + N, 1 + N).

        Row i holds what token i attends to (token 0 is CLS, then the patches in row-major order); rows sum to 1.
        """
        x = self.embed(images)  # (B, 1 + N, D)
        maps = []
        for block in self.blocks:
            h = block.norm1(x)  # (B, 1 + N, D): pre-norm, the attention's input
            _, w = block.self_attn(h, h, h, need_weights=True, average_attn_weights=False)  # w: (B, h, 1+N, 1+N)
            maps.append(w)
            x = block(x)  # (B, 1 + N, D)
        return maps

    def cls_attention(self, images: Tensor, layer: int = -1) -> Tensor:
        """(B, C, H, W) -> (B, n_heads, n_patches): the CLS token's attention weights on the patches in `layer`.

        These are the patches' entries of CLS's attention row, not renormalised: they sum to 1 minus the
        weight CLS puts on itself. Reshape to (B, n_heads, H/P, W/P) to draw them over the image.
        """
        require_int(layer, "layer")
        n = self.config.n_layers
        if not -n <= layer < n:
            raise ValueError(f"layer={layer} is out of range for a ViT with n_layers={n}")
        return self.attention_weights(images)[layer][:, :, 0, 1:]  # (B, h, N): CLS row, patch columns

    def reset_head(self, n_classes: int, init: str = "zero") -> nn.Linear:
        """Replace the head by a new linear layer D x n_classes (fine-tuning on a new task); return it."""
        require_int(n_classes, "n_classes", minimum=1)
        if init not in HEAD_INITS:
            raise ValueError(f"init must be one of {HEAD_INITS}, got {init!r}")
        w = self.norm.weight
        self.head = _make_head("linear", self.config.d_model, n_classes, init).to(device=w.device, dtype=w.dtype)
        self.config = dataclasses.replace(self.config, n_classes=n_classes, head="linear", head_init=init)
        return self.head

    def _check_images(self, images) -> None:
        c = self.config
        require_tensor(images, "images", floating=True)
        expected = (c.in_channels, c.image_size, c.image_size)
        if images.dim() != 4 or tuple(images.shape[1:]) != expected:
            raise ValueError(
                f"images must have shape (batch, in_channels={c.in_channels}, image_size={c.image_size}, "
                f"image_size={c.image_size}), got {tuple(images.shape)}"
            )


def _make_head(kind: str, d_model: int, n_classes: int, init: str) -> nn.Module:
    """A linear head D x K, or the MLP pre-training head D -> D (tanh) -> K; "zero" zeroes its last layer."""
    if kind == "linear":
        head = last = nn.Linear(d_model, n_classes)
    else:
        head = nn.Sequential(nn.Linear(d_model, d_model), nn.Tanh(), nn.Linear(d_model, n_classes))
        last = head[2]
    if init == "zero":
        nn.init.zeros_(last.weight)
        nn.init.zeros_(last.bias)
    return head
