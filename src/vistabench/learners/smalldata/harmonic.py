"""Harmonic networks (Ulicny et al. 2019): every k x k convolution (k > 1) becomes a harmonic block,
a fixed depthwise bank of k x k DCT-II filters followed by a learned 1 x 1 combination.

As in gem (``pipelines/harmonic.py``) by default: all k² filters, each scaled to unit L1 norm, and
the first convolution of the network (the stem's) gets a BatchNorm without affine parameters between
its DCT and its 1 x 1 mix. Options: ``normalisation="orthonormal"`` (the orthonormal DCT basis),
``dct_level`` (keep the filters with ``u + v < level``), ``first_bn=False``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ...errors import InputError
from .registry import MethodContext

__all__ = ["dct_filters", "HarmonicConv2d", "harmonize", "build"]


def dct_filters(k: int, *, level: int | None = None, normalisation: str = "orthonormal") -> torch.Tensor:
    """2-D DCT-II basis filters of size k x k, shape (m, k, k), ordered by (u + v, u).

    ``f_{uv}(x, y) = cos(π(2x+1)u / 2k) cos(π(2y+1)v / 2k)`` scaled by ``c_u c_v`` (``c_0 = √(1/k)``,
    ``c_u = √(2/k)``: orthonormal) or to ``Σ|f| = 1`` (``normalisation="l1"``, gem);
    ``level`` keeps ``u + v < level`` (None: all k²).
    """
    if level is None:
        level = 2 * k - 1
    x = np.arange(k)
    cos1d = np.cos(np.pi * (2 * x[None, :] + 1) * np.arange(k)[:, None] / (2 * k))  # (u, x)
    pairs = sorted(((u, v) for u in range(k) for v in range(k) if u + v < level), key=lambda p: (p[0] + p[1], p[0]))
    if normalisation == "l1":
        filt = np.stack([np.outer(cos1d[u], cos1d[v]) for u, v in pairs])
        filt = filt / np.abs(filt).sum(axis=(1, 2), keepdims=True)
    elif normalisation == "orthonormal":
        c = np.where(np.arange(k) == 0, math.sqrt(1.0 / k), math.sqrt(2.0 / k))
        filt = np.stack([np.outer(c[u] * cos1d[u], c[v] * cos1d[v]) for u, v in pairs])
    else:
        raise InputError(f"normalisation: expected 'l1' or 'orthonormal', got {normalisation!r}")
    return torch.tensor(filt, dtype=torch.float32)


class HarmonicConv2d(nn.Module):
    """Harmonic block: fixed depthwise DCT filters, (optionally a BatchNorm without affine), then a
    learned 1 x 1 convolution. Replaces ``nn.Conv2d(cin, cout, k, stride, padding)``; with every DCT
    filter kept it spans the same function class (the DCT basis is complete)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, *, stride: int = 1,
                 padding: int = 0, bias: bool = False, level: int | None = None,
                 normalisation: str = "orthonormal", bn: bool = False, mix_init: str = "conv") -> None:
        super().__init__()
        basis = dct_filters(kernel_size, level=level, normalisation=normalisation)
        self.m = basis.shape[0]
        self.in_channels, self.out_channels = in_channels, out_channels
        self.stride, self.padding = stride, padding
        self.register_buffer("basis", basis[:, None].repeat(in_channels, 1, 1, 1))  # (cin*m, 1, k, k)
        self.bn = nn.BatchNorm2d(in_channels * self.m, affine=False) if bn else None
        self.mix = nn.Conv2d(in_channels * self.m, out_channels, 1, bias=bias)
        w = self.mix.weight.data
        if mix_init == "gem" and not bn:  # gem's Harm2d weight (out, in, m, 1, 1): fan-out = out · m
            nn.init.kaiming_normal_(w.view(out_channels, in_channels, self.m, 1, 1), mode="fan_out",
                                    nonlinearity="relu")
        else:  # (out, in·m, 1, 1): fan-out = out (gem's BN layer has this shape too)
            nn.init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, self.basis, stride=self.stride, padding=self.padding, groups=self.in_channels)
        if self.bn is not None:
            y = self.bn(y)
        return self.mix(y)


def _replaceable(child: nn.Module) -> bool:
    return (isinstance(child, nn.Conv2d) and child.kernel_size[0] > 1 and child.kernel_size[0] == child.kernel_size[1]
            and child.groups == 1 and child.dilation == (1, 1) and isinstance(child.padding, tuple))


def harmonize(model: nn.Module, *, level: int | None = None, normalisation: str = "orthonormal",
              first_bn: bool = False, mix_init: str = "conv") -> int:
    """Replace every ``nn.Conv2d`` with a square kernel > 1 (and groups = dilation = 1) in place;
    with ``first_bn`` the first one (in module order: the stem's) gets a BatchNorm after its DCT.
    ``mix_init="gem"``: the 1 x 1 mix of the layers without BN starts as gem's ``Harm2d`` weight,
    Kaiming fan-out over ``out · m`` (√m smaller than a 1 x 1 conv's ``"conv"`` init).
    Returns the number of layers replaced."""
    count = [0]

    def walk(module: nn.Module) -> None:
        for name, child in list(module.named_children()):
            if _replaceable(child):
                setattr(module, name, HarmonicConv2d(
                    child.in_channels, child.out_channels, child.kernel_size[0], stride=child.stride[0],
                    padding=child.padding[0], bias=child.bias is not None, level=level,
                    normalisation=normalisation, bn=first_bn and count[0] == 0, mix_init=mix_init))
                count[0] += 1
            else:
                walk(child)

    walk(model)
    return count[0]


def build(base: nn.Module, params: dict[str, Any], ctx: MethodContext) -> tuple[nn.Module, None]:
    level = params.get("dct_level")
    if harmonize(base, level=None if level is None else int(level), normalisation=str(params.get("normalisation", "l1")),
                 first_bn=bool(params.get("first_bn", True)), mix_init=str(params.get("mix_init", "gem"))) == 0:
        raise InputError("method 'harmonic': the model has no k x k convolution (k > 1) to replace")
    return base, None
