"""The pre-ReLU feature map at the end of every stage of a convolutional backbone, as gem's OFD
architectures give them to DVP's distillation (lorenzobrigato/gem,
``pipelines/distill_visual_priors/ofd_architectures.py``, after Heo et al., ICCV 2019).

- ResNet-18/50 (4 stages) and ResNet-32 (3 stages): the last block's output before its final ReLU
  (``bn2(conv2(·)) + identity``, ``bn3`` for bottlenecks); the next stage gets its ReLU. The BN
  "before the ReLU" is that block's last BN.
- WRN-16-8 (pre-activation, 3 stages): the stage output passed through the BN that the next
  stage's first block (or the final BN) applies before its ReLU. As in gem's ``WideResNetOFD`` that
  BN is called a second time for the map (in train mode its running statistics move twice).
- CNN28 (not in gem): the output of each conv stage's BN, before its ReLU.

Other backbones (ViT) have no such maps: :func:`stage_layout` raises InputError.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ...errors import InputError
from ..models import CNN28, Bottleneck, CifarBlock, CifarResNet, ResNet, WideResNet

__all__ = ["stage_layout", "forward_stages", "bn_before_relu", "stage_channels"]

_SUPPORTED = "cnn28, resnet18, resnet32, resnet50 and wrn16_8"


def stage_layout(backbone: nn.Module) -> str:
    """The kind of backbone ("cnn28", "resnet", "cifar_resnet", "wrn"); InputError for others."""
    for cls, kind in ((CNN28, "cnn28"), (CifarResNet, "cifar_resnet"), (ResNet, "resnet"), (WideResNet, "wrn")):
        if isinstance(backbone, cls):
            return kind
    raise InputError(f"model: dvp distils the pre-ReLU map of every stage, which {_SUPPORTED} have, "
                     f"not {type(backbone).__name__}; use method_options.distill_features=pooled")


def _pre_relu(block: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """A residual block's output before its final ReLU."""
    if isinstance(block, CifarBlock):
        out = F.relu(block.bn1(block.conv1(x)))
        return block.bn2(block.conv2(out)) + block.shortcut(x)
    idt = x if block.downsample is None else block.downsample(x)
    out = F.relu(block.bn1(block.conv1(x)))
    if isinstance(block, Bottleneck):
        out = F.relu(block.bn2(block.conv2(out)))
        return block.bn3(block.conv3(out)) + idt
    return block.bn2(block.conv2(out)) + idt


def _stages(backbone: nn.Module) -> list[list[nn.Module]]:
    kind = stage_layout(backbone)
    if kind == "resnet":
        return [list(stage) for stage in backbone.stages]
    blocks = list(backbone.layers if kind == "cifar_resnet" else backbone.blocks)
    n = len(blocks) // 3
    return [blocks[i * n:(i + 1) * n] for i in range(3)]


def bn_before_relu(backbone: nn.Module) -> list[nn.BatchNorm2d]:
    """The BN whose output (plus the identity, in a residual block) precedes each stage's ReLU."""
    kind = stage_layout(backbone)
    if kind == "cnn28":
        return [m for m in backbone.body if isinstance(m, nn.BatchNorm2d)]
    stages = _stages(backbone)
    if kind == "wrn":
        return [stages[1][0].bn1, stages[2][0].bn1, backbone.bn]
    return [s[-1].bn3 if isinstance(s[-1], Bottleneck) else s[-1].bn2 for s in stages]


def stage_channels(backbone: nn.Module) -> list[int]:
    return [bn.num_features for bn in bn_before_relu(backbone)]


def forward_stages(backbone: nn.Module, x: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
    """``(maps, features)``: the pre-ReLU map of every stage and the pooled penultimate features
    (what ``backbone.features(x)`` returns)."""
    kind = stage_layout(backbone)
    maps: list[torch.Tensor] = []
    if kind == "cnn28":
        for m in backbone.body:
            if isinstance(m, nn.ReLU):
                x = F.relu(x)  # not in place: the map before it is kept
            else:
                x = m(x)
                if isinstance(m, nn.BatchNorm2d):
                    maps.append(x)
        return maps, torch.flatten(x, 1)
    stages = _stages(backbone)
    if kind == "wrn":
        x = backbone.conv1(x)
        bns = bn_before_relu(backbone)
        for blocks, bn in zip(stages, bns):
            for block in blocks:
                x = block(x)
            maps.append(bn(x))
        pooled = F.relu(backbone.bn(x))
        return maps, torch.flatten(F.adaptive_avg_pool2d(pooled, 1), 1)
    x = backbone.stem(x) if kind == "resnet" else F.relu(backbone.bn1(backbone.conv1(x)))
    for blocks in stages:
        for block in blocks[:-1]:
            x = block(x)
        maps.append(_pre_relu(blocks[-1], x))
        x = F.relu(maps[-1])
    return maps, torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)

