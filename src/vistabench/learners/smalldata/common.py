"""Helpers shared by the small-data method modules."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["FeatureModel"]


class FeatureModel(nn.Module):
    """Wraps a backbone; ``forward`` returns the logits and keeps the penultimate features of the
    last training forward in ``last_features`` (for losses that act on the embedding)."""

    def __init__(self, base: nn.Module) -> None:
        super().__init__()
        self.base = base
        self.in_channels = base.in_channels
        self.num_classes = base.num_classes
        self.feature_dim = base.feature_dim
        self.classifier = base.classifier
        self.last_features: torch.Tensor | None = None

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.base.features(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.base.features(x)
        self.last_features = f if (self.training and torch.is_grad_enabled()) else None
        return self.classifier(f)
