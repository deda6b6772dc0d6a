"""Networks a user might bring (factories with their own argument names), for tests/learners/test_external.py."""

from __future__ import annotations

import torch
from torch import nn

NOT_CALLABLE = 3


class TinyNet(nn.Module):
    def __init__(self, in_ch: int, n: int) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(in_ch, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                                  nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.fc = nn.Linear(4, n)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.body(x))


def tiny(num_classes: int, in_channels: int = 3) -> nn.Module:
    return TinyNet(in_channels, num_classes)


def tiny_timm_names(num_classes=1000, in_chans=3, img_size=None, **kwargs) -> nn.Module:
    tiny_timm_names.seen = {"num_classes": num_classes, "in_chans": in_chans, "img_size": img_size, **kwargs}
    return TinyNet(in_chans, num_classes)


def no_classes(in_chans: int = 3) -> nn.Module:
    return TinyNet(in_chans, 2)


def needs_depth(num_classes: int, in_chans: int, depth: int) -> nn.Module:
    return TinyNet(in_chans, num_classes)


def not_a_module(num_classes: int, in_chans: int = 3) -> str:
    return "resnet"


def headless(num_classes: int, in_chans: int = 3) -> nn.Module:
    return nn.Sequential(nn.Conv2d(in_chans, num_classes, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten())


class TimmStyleNet(nn.Module):
    """A network with timm's model interface (``forward_features``, ``forward_head(pre_logits=)``,
    ``get_classifier``), written here: what ``ExternalBackbone`` uses when a timm model is given."""

    def __init__(self, in_chans: int, num_classes: int) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(in_chans, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU())
        self.pre = nn.Linear(6, 5)  # a layer between the pooled features and the head
        self.head = nn.Linear(5, num_classes)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        return self.stem(x)

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        x = torch.relu(self.pre(x.mean(dim=(2, 3))))
        return x if pre_logits else self.head(x)

    def get_classifier(self) -> nn.Module:
        return self.head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_head(self.forward_features(x))


def timm_style(num_classes: int = 1000, in_chans: int = 3, **kwargs) -> nn.Module:
    return TimmStyleNet(in_chans, num_classes)


def thirteen(num_classes: int, in_channels: int = 3) -> nn.Module:
    """Ignores the data's classes after its 10-way layer: returns 13 columns."""
    return nn.Sequential(nn.Conv2d(in_channels, 4, 3, padding=1), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(4, num_classes), nn.ReLU(), nn.Linear(num_classes, 13))


def wrong_width(num_classes: int, in_channels: int = 3) -> nn.Module:
    """Returns 13 columns from its only linear layer (no layer with the data's classes)."""
    return nn.Sequential(nn.Conv2d(in_channels, 4, 3, padding=1), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(4, 13))


def fixed_size(num_classes: int, in_channels: int = 3) -> nn.Module:
    """Only works on 8x8 images (flattens them into a fixed-width layer)."""
    return nn.Sequential(nn.Flatten(), nn.Linear(in_channels * 64, num_classes))


class _Scaled(nn.Module):
    def __init__(self, in_ch: int, n: int) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(in_ch, 4, 3, padding=1), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.fc = nn.Linear(4, n)
        self.gain = nn.Parameter(torch.ones(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.body(x)) * self.gain


def scaled_head(num_classes: int, in_channels: int = 3) -> nn.Module:
    """Right output, but computes after its last linear layer: no features/classifier split."""
    return _Scaled(in_channels, num_classes)
