"""Stand-ins for the few torchvision pieces the reference files import (torchvision does not import
here), written against vistabench's own code; each follows torchvision's documented behaviour.

* ``torchvision.models.resnet``: ``BasicBlock`` / ``Bottleneck`` are vistabench's blocks
  (:mod:`vistabench.learners.models`) with torchvision's constructor signature (the ``downsample``
  passed in, ``relu`` and ``stride`` attributes); ``ResNet`` has torchvision's layout and attribute
  names (``conv1``, ``bn1``, ``relu``, ``maxpool``, ``layer1``-``layer4``, ``avgpool``, ``fc``,
  ``_make_layer``, ``inplanes``) and its initialisation, which is vistabench's
  :func:`~vistabench.learners.models.kaiming_init` (Kaiming fan-out convolutions, BN 1/0, linear
  layers left at PyTorch's default).
* ``torchvision.transforms``: ``Compose``, ``ToTensor``, ``Normalize``, ``Resize`` (bilinear,
  ``align_corners=False``: equal to torchvision's on the up-sampling the references do),
  ``CenterCrop``, ``RandomCrop`` (offsets from ``torch``'s global generator),
  ``RandomHorizontalFlip``, ``RandomVerticalFlip``; tensors only (no PIL).

The fidelity checks compare what the reference builds *on top of* these pieces with vistabench's
code; a check that needs torchvision's own numerics is not made with them (docs/fidelity.md lists
which pieces are stood in for).
"""

from __future__ import annotations

import importlib.machinery
import types

import torch
import torch.nn.functional as F
from torch import nn

from vistabench.learners import models as vb

__all__ = ["modules"]


def _conv3x3(cin, cout, stride=1, groups=1, dilation=1):
    return nn.Conv2d(cin, cout, 3, stride=stride, padding=dilation, groups=groups, bias=False, dilation=dilation)


def _conv1x1(cin, cout, stride=1):
    return nn.Conv2d(cin, cout, 1, stride=stride, bias=False)


class BasicBlock(vb.BasicBlock):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None, groups=1, base_width=64, dilation=1,
                 norm_layer=None):
        if groups != 1 or base_width != 64 or dilation != 1 or norm_layer not in (None, nn.BatchNorm2d):
            raise NotImplementedError("stand-in BasicBlock: torchvision's defaults only")
        super().__init__(inplanes, planes, stride)
        self.downsample = downsample
        self.relu = nn.ReLU(inplace=True)
        self.stride = stride


class Bottleneck(vb.Bottleneck):
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None, groups=1, base_width=64, dilation=1,
                 norm_layer=None):
        if groups != 1 or base_width != 64 or dilation != 1 or norm_layer not in (None, nn.BatchNorm2d):
            raise NotImplementedError("stand-in Bottleneck: torchvision's defaults only")
        super().__init__(inplanes, planes, stride)
        self.downsample = downsample
        self.relu = nn.ReLU(inplace=True)
        self.stride = stride


class ResNet(nn.Module):
    def __init__(self, block, layers, num_classes=1000, zero_init_residual=False, groups=1, width_per_group=64,
                 replace_stride_with_dilation=None, norm_layer=None):
        super().__init__()
        if zero_init_residual or replace_stride_with_dilation or norm_layer not in (None, nn.BatchNorm2d):
            raise NotImplementedError("stand-in ResNet: no zero-init residual, dilation or other norm layer")
        self._norm_layer = nn.BatchNorm2d
        self.inplanes, self.dilation, self.groups, self.base_width = 64, 1, groups, width_per_group
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, 64, layers[0])
        self.layer2 = self._make_layer(block, 128, layers[1], stride=2)
        self.layer3 = self._make_layer(block, 256, layers[2], stride=2)
        self.layer4 = self._make_layer(block, 512, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)
        vb.kaiming_init(self)

    def _make_layer(self, block, planes, blocks, stride=1, dilate=False):
        if dilate:
            raise NotImplementedError("stand-in ResNet: no dilation")
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(_conv1x1(self.inplanes, planes * block.expansion, stride),
                                       nn.BatchNorm2d(planes * block.expansion))
        # torchvision's call: block(inplanes, planes, stride, downsample, groups, base_width, dilation, norm_layer)
        out = [block(self.inplanes, planes, stride, downsample, self.groups, self.base_width, 1, nn.BatchNorm2d)]
        self.inplanes = planes * block.expansion
        out += [block(self.inplanes, planes, groups=self.groups, base_width=self.base_width, dilation=1,
                      norm_layer=nn.BatchNorm2d) for _ in range(1, blocks)]
        return nn.Sequential(*out)

    def _forward_impl(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))

    def forward(self, x):
        return self._forward_impl(x)


# ------------------------------------------------------------------------------------ transforms


class Compose:
    def __init__(self, transforms):
        self.transforms = list(transforms)

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x


class ToTensor:
    """(H, W, C) uint8 array or (C, H, W) tensor -> float (C, H, W) in [0, 1] (uint8) or as is."""

    def __call__(self, x):
        t = torch.as_tensor(x)
        if t.ndim == 3 and not isinstance(x, torch.Tensor):
            t = t.permute(2, 0, 1)
        return t.float().div(255) if t.dtype == torch.uint8 else t.float()


class Normalize:
    def __init__(self, mean, std):
        self.mean, self.std = torch.as_tensor(mean).float(), torch.as_tensor(std).float()

    def __call__(self, x):
        return (x - self.mean[:, None, None]) / self.std[:, None, None]


def _size2(size):
    return (size, size) if isinstance(size, int) else tuple(size)


class Resize:
    def __init__(self, size):
        self.size = size

    def __call__(self, x):
        h, w = x.shape[-2:]
        if isinstance(self.size, int):  # the shorter edge to `size`, the aspect ratio kept
            s = self.size
            oh, ow = (s, int(s * w / h)) if h <= w else (int(s * h / w), s)
        else:
            oh, ow = self.size
        if (oh, ow) == (h, w):
            return x
        return F.interpolate(x[None], size=(oh, ow), mode="bilinear", align_corners=False)[0]


class CenterCrop:
    def __init__(self, size):
        self.size = _size2(size)

    def __call__(self, x):
        h, w = x.shape[-2:]
        th, tw = self.size
        top, left = int(round((h - th) / 2.0)), int(round((w - tw) / 2.0))
        return x[..., top:top + th, left:left + tw]


class RandomCrop:
    def __init__(self, size, padding=None, padding_mode="constant"):
        self.size, self.padding, self.padding_mode = _size2(size), padding, padding_mode

    def __call__(self, x):
        if self.padding:
            p = self.padding
            x = F.pad(x[None], (p, p, p, p), mode="constant" if self.padding_mode == "constant" else self.padding_mode)[0]
        h, w = x.shape[-2:]
        th, tw = self.size
        i = int(torch.randint(0, h - th + 1, (1,)))
        j = int(torch.randint(0, w - tw + 1, (1,)))
        return x[..., i:i + th, j:j + tw]


class RandomHorizontalFlip:
    def __init__(self, p=0.5):
        self.p = p

    def __call__(self, x):
        return x.flip(-1) if torch.rand(1) < self.p else x


class RandomVerticalFlip:
    def __init__(self, p=0.5):
        self.p = p

    def __call__(self, x):
        return x.flip(-2) if torch.rand(1) < self.p else x


def _module(name, **attrs):
    m = types.ModuleType(name)
    m.__spec__ = importlib.machinery.ModuleSpec(name, None)
    m.__dict__.update(attrs)
    return m


def modules() -> dict[str, types.ModuleType]:
    """``{module name: stand-in module}`` for ``torchvision`` and the submodules the references import."""
    resnet = _module("torchvision.models.resnet", ResNet=ResNet, BasicBlock=BasicBlock, Bottleneck=Bottleneck)
    tmodels = _module("torchvision.models", resnet=resnet, ResNet=ResNet)
    transforms = _module("torchvision.transforms", Compose=Compose, ToTensor=ToTensor, Normalize=Normalize,
                         Resize=Resize, CenterCrop=CenterCrop, RandomCrop=RandomCrop,
                         RandomHorizontalFlip=RandomHorizontalFlip, RandomVerticalFlip=RandomVerticalFlip)
    datasets = _module("torchvision.datasets")
    tv = _module("torchvision", models=tmodels, transforms=transforms, datasets=datasets)
    return {"torchvision": tv, "torchvision.models": tmodels, "torchvision.models.resnet": resnet,
            "torchvision.transforms": transforms, "torchvision.datasets": datasets}
