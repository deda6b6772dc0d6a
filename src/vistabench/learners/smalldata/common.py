"""Helpers shared by the small-data method modules."""

from __future__ import annotations

import copy

import torch
from torch import nn

from .. import models as backbones

__all__ = ["FeatureModel", "fresh_copy", "EvalResizeCrop"]

#: the built-in backbones whose constructors end with :func:`~vistabench.learners.models.kaiming_init`
_KAIMING_BACKBONES = (backbones.CNN28, backbones.CifarResNet, backbones.ResNet, backbones.WideResNet)


def fresh_copy(base: nn.Module, init: str) -> nn.Module:
    """A copy of ``base`` with new random weights (from torch's global generator).

    ``init="architecture"``: drawn as the architecture draws them when it is built (gem builds a
    second network with ``create_model``): PyTorch's defaults, then, for the built-in convolutional
    backbones, Kaiming fan-out convolutions and BN 1/0 (:func:`~vistabench.learners.models.kaiming_init`;
    other backbones keep PyTorch's defaults). ``init="default"``: PyTorch's default initialisation of
    every layer (our earlier variant).
    """
    fresh = copy.deepcopy(base)
    for m in fresh.modules():
        if hasattr(m, "reset_parameters") and m is not fresh:
            m.reset_parameters()
    if init == "architecture" and isinstance(base, _KAIMING_BACKBONES):
        backbones.kaiming_init(fresh)
    return fresh


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


class EvalResizeCrop(nn.Module):
    """``model`` whose evaluation inputs (eval mode) first get gem's test transform with an integer
    ``target_size`` and ``rand_shift``: ``Resize(size + 2·shift)`` + ``CenterCrop(size)``
    (:func:`~vistabench.data.augment.resize_center_crop`); training inputs pass as they are (their
    ``Resize`` + ``RandomCrop`` is the training augmentation, ``Augmentation(crop="resize")``)."""

    def __init__(self, model: nn.Module, shift: int) -> None:
        super().__init__()
        self.model, self.shift = model, int(shift)
        self.in_channels, self.num_classes = model.in_channels, model.num_classes
        self.feature_dim = model.feature_dim
        self.classifier = model.classifier

    def _inputs(self, x: torch.Tensor) -> torch.Tensor:
        from ...data.augment import resize_center_crop

        return x if self.training else resize_center_crop(x, self.shift)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.model.features(self._inputs(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(self._inputs(x))
