"""The Vision Transformer backbone (``vit_small``: the FSCIL reference's ViT shape; torch, no timm).

A :class:`~.models.Backbone` like every built-in model: patch embedding with a learned position grid
(resized to the input's grid), pre-norm transformer blocks, a class token, ``features(x) -> (N, dim)``,
and ``block_features`` for methods that read intermediate blocks (FR). Built through the one model
registry (:data:`.model_options.models`, entry ``vit_small``) by :func:`~.models.build_model`.
"""

from __future__ import annotations


import torch
import torch.nn.functional as F
from torch import nn

from ..errors import InputError
from .models import Backbone

__all__ = ["VisionTransformer", "default_patch_size"]


class _Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, t, d = x.shape
        qkv = self.qkv(x).reshape(n, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])
        return self.proj(out.transpose(1, 2).reshape(n, t, d))


class _TransformerBlock(nn.Module):
    def __init__(self, dim: int, heads: int, mlp_ratio: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = _Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        hidden = int(dim * mlp_ratio)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


def default_patch_size(image_size: int) -> int:
    """Patch size used by ``vit_small``: 16 for >= 128 px, 4 for >= 16 px, 2 for >= 4 px, else 1."""
    if image_size >= 128:
        return 16
    if image_size >= 16:
        return 4
    if image_size >= 4:
        return 2
    return 1


class VisionTransformer(Backbone):
    """Pre-norm ViT with a conv patch embedding, a class token and learned positional embeddings.

    Defaults are ViT-S (DeiT-S) sizes: dim 384, depth 12, 6 heads, MLP ratio 4. The positional
    embedding is made for ``image_size``; other sizes are handled by bilinear interpolation of
    the embedding grid (as timm does when fine-tuning at a new resolution).
    """

    def __init__(self, num_classes: int, in_channels: int, image_size: int, *, patch_size: int | None = None,
                 dim: int = 384, depth: int = 12, heads: int = 6, mlp_ratio: float = 4.0) -> None:
        super().__init__()
        if dim % heads:
            raise InputError(f"dim: expected a multiple of heads={heads}, got {dim}")
        self.patch_size = int(patch_size) if patch_size is not None else default_patch_size(image_size)
        self.grid = max(1, image_size // self.patch_size)
        self.patch_embed = nn.Conv2d(in_channels, dim, self.patch_size, stride=self.patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, 1 + self.grid * self.grid, dim))
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        self.blocks = nn.Sequential(*[_TransformerBlock(dim, heads, mlp_ratio) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self._init_head(dim, num_classes, in_channels)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)

    def _pos(self, gh: int, gw: int) -> torch.Tensor:
        if gh == self.grid and gw == self.grid:
            return self.pos_embed
        cls, grid = self.pos_embed[:, :1], self.pos_embed[:, 1:]
        d = grid.shape[-1]
        grid = grid.reshape(1, self.grid, self.grid, d).permute(0, 3, 1, 2)
        grid = F.interpolate(grid, size=(gh, gw), mode="bilinear", align_corners=False)
        return torch.cat([cls, grid.permute(0, 2, 3, 1).reshape(1, gh * gw, d)], dim=1)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(x)
        gh, gw = x.shape[-2:]
        x = x.flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self._pos(gh, gw)
        x = self.norm(self.blocks(x))
        return x[:, 0]

    def block_features(self, x: torch.Tensor, blocks: "list[int] | tuple[int, ...]") -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Final features and the class token after each listed block (0-based), shapes (N, D).

        Intermediate tokens go through the final ``norm`` as well, as in the FSCIL feature
        rectification code (iSEE-Laboratory/Revisting_FSCIL, ``models/deit.py``,
        ``MultiLyaerOutputVisionTransformer``). ``block_features(x, [])[0]`` equals ``features(x)``.
        """
        depth = len(self.blocks)
        bad = [b for b in blocks if isinstance(b, bool) or not 0 <= int(b) < depth]
        if bad:
            raise InputError(f"blocks: expected block indices in 0..{depth - 1}, got {bad}")
        want = {int(b) for b in blocks}
        x = self.patch_embed(x)
        gh, gw = x.shape[-2:]
        x = x.flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self._pos(gh, gw)
        inter: dict[int, torch.Tensor] = {}
        for i, blk in enumerate(self.blocks):
            x = blk(x)
            if i in want:
                inter[i] = self.norm(x)[:, 0]
        return self.norm(x)[:, 0], [inter[int(b)] for b in blocks]


def _vit_small(num_classes: int, in_channels: int, image_size: int | None = None, **kw) -> Backbone:
    """ViT-S; ``image_size`` defaults to 32 when not given (sets patch size and positional grid)."""
    return VisionTransformer(num_classes, in_channels, 32 if image_size is None else image_size, **kw)


# -------------------------------------------------------------------------------------- builder
