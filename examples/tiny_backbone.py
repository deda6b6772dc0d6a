"""A network of your own for ``--model examples.tiny_backbone:tiny_backbone`` (docs/learners.md, "Your own backbone").

Any callable that returns a ``torch.nn.Module`` works: vistabench passes the number of classes and
input channels under the names the signature uses (here ``num_classes`` and ``in_chans``). The last
``nn.Linear`` with ``num_classes`` outputs becomes the classifier the methods re-train or replace.
"""

from __future__ import annotations

import torch
from torch import nn


class TinyBackbone(nn.Module):
    def __init__(self, in_chans: int, num_classes: int, width: int = 16) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(in_chans, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(),
            nn.Conv2d(width, 2 * width, 3, padding=1, stride=2), nn.BatchNorm2d(2 * width), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(2 * width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def tiny_backbone(num_classes: int = 1000, in_chans: int = 3) -> nn.Module:
    return TinyBackbone(in_chans, num_classes)
