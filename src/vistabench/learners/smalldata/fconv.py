"""Full convolution (Kayhan & van Gemert, CVPR 2020): every filter value meets every pixel.

Every k x k convolution (k > 1) gets padding k − 1 ("full" convolution: an H x W input gives
(H + k − 1) x (W + k − 1) at stride 1), so feature maps grow instead of shrinking at the image
border and the network cannot read absolute position from border effects. Residual blocks pad
their identity path with zeros to the grown size, as in the reference implementation
(github.com/lorenzobrigato/gem, ``pipelines/fconv.py``): by 2 around a block of two 3 x 3 convs,
by 3 before a strided shortcut (1 for bottleneck blocks, which have one 3 x 3 conv). As in gem, the
max-pool of an ImageNet-stem ResNet becomes 2 x 2 with stride 2 and no padding (option
``maxpool="3x3"`` keeps the usual 3 x 3/2/1). gem builds new block modules after the backbone's
initialisation (``fconv.py``: ``BasicBlockFConv``, ``BottleneckFConv``, ``BasicBlockFConvWRN``), so
their convolutions keep PyTorch's default initialisation; only a ResNet's downsample layers (passed
on) and the stem keep the backbone's Kaiming fan-out: option ``block_init="default"``
(``"kaiming"``: every convolution keeps the backbone's init, our earlier variant).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ...errors import InputError
from .. import models as backbones
from ..vit import VisionTransformer
from .registry import MethodContext

__all__ = ["full_padding", "gem_maxpool", "reset_block_init", "build"]


class _FBasic(backbones.BasicBlock):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        idt = F.pad(x, (2,) * 4) if self.downsample is None else self.downsample(F.pad(x, (3,) * 4))
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + idt)


class _FBottleneck(backbones.Bottleneck):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xp = F.pad(x, (1,) * 4)
        idt = xp if self.downsample is None else self.downsample(xp)
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        return F.relu(self.bn3(self.conv3(out)) + idt)


class _FCifar(backbones.CifarBlock):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(F.pad(x, (3 if self.stride != 1 else 2,) * 4)))


class _FWide(backbones.WideBlock):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        o = F.relu(self.bn1(x))
        strided = self.shortcut is not None and self.shortcut.stride[0] > 1
        p = 3 if strided else 2
        idt = F.pad(x, (p,) * 4) if self.shortcut is None else self.shortcut(F.pad(o, (p,) * 4))
        out = F.relu(self.bn2(self.conv1(o)))
        if self.dropout > 0:
            out = F.dropout(out, p=self.dropout, training=self.training)
        return self.conv2(out) + idt


_BLOCKS = {backbones.BasicBlock: _FBasic, backbones.Bottleneck: _FBottleneck, backbones.CifarBlock: _FCifar,
           backbones.WideBlock: _FWide}


def full_padding(model: nn.Module) -> int:
    """Switch ``model`` to full convolutions in place; returns the number of convolutions changed.

    Convolutions with a square k x k kernel (k > 1) get padding k − 1; residual blocks of the
    built-in backbones get their identity path padded to match.
    """
    n = 0
    for m in model.modules():
        if type(m) in _BLOCKS:
            m.__class__ = _BLOCKS[type(m)]
        if isinstance(m, nn.Conv2d) and m.kernel_size[0] > 1 and m.kernel_size[0] == m.kernel_size[1]:
            m.padding = (m.kernel_size[0] - 1,) * 2
            n += 1
    return n


def reset_block_init(model: nn.Module) -> int:
    """gem's new full-convolution blocks: every convolution and BN of each residual block back to
    PyTorch's default initialisation, except a ResNet block's ``downsample`` (gem passes the
    backbone's own on; a wide block's 1 x 1 shortcut is rebuilt, so reset). Returns the number of
    convolutions reset."""
    n = 0
    for blk in model.modules():
        if type(blk) not in _BLOCKS.values():
            continue
        keep = set(blk.downsample.modules()) if isinstance(blk, (_FBasic, _FBottleneck)) and blk.downsample is not None \
            else set()
        for m in blk.modules():
            if m not in keep and isinstance(m, (nn.Conv2d, nn.BatchNorm2d)):
                m.reset_parameters()
                n += isinstance(m, nn.Conv2d)
    return n


def gem_maxpool(model: nn.Module) -> int:
    """gem's full-convolution stem: an ImageNet-stem ResNet's 3 x 3/2 (padding 1) max-pool becomes
    2 x 2/2 without padding. Returns the number of pools changed."""
    n = 0
    for m in model.modules():
        if isinstance(m, nn.MaxPool2d) and m.kernel_size == 3 and m.stride == 2:
            m.kernel_size, m.stride, m.padding = 2, 2, 0
            n += 1
    return n


def build(base: nn.Module, config: dict, ctx: MethodContext) -> tuple[nn.Module, None]:
    if isinstance(base, VisionTransformer) or full_padding(base) == 0:
        raise InputError("method 'fconv': needs a convolutional backbone (cnn28, resnet*, wrn16_8)")
    if config.get("maxpool", "2x2") == "2x2":
        gem_maxpool(base)
    if config.get("block_init", "default") == "default" and ctx.recipe.pretrained is None:
        reset_block_init(base)
    return base, None
