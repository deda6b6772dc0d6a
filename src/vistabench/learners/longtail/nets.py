"""Networks for the multi-branch long-tail methods (BBN, RIDE, TADE, TDE, IB).

Every network splits a :class:`~.models.Backbone` into a shared trunk and per-branch/per-expert
private parts (:func:`split_backbone`). On ``resnet32`` this is the references' split: RIDE/SADE
experts own stages 2–3 at reduced widths 24/48 (``reduce_dimension``), BBN's branches own one
copy each of the last residual block. Other backbones share all of ``features`` and give each
branch/expert a *branch block* (``Linear(D, D) → BatchNorm1d → ReLU``) — see ``docs/fidelity.md``.

They are trained by :class:`~..trainer.Trainer` with a method-defined ``step`` (and, for BBN, the
:func:`reversed_probabilities` as ``second_sampler``); see :mod:`.survey`.

Also the model ``resnet32_bbn`` (:class:`BBNStyleResNet32`): the ResNet-32 of the BBN, TDE and LADE
CIFAR code, whose last stage ends in two parallel 64-channel blocks concatenated to a 128-d feature.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..losses import tde_counterfactual
from ..models import Backbone, CifarBlock, CifarResNet, NormedLinear, kaiming_init
from .checkpoints import fan_in_weights

__all__ = ["BBNNet", "BBNStyleResNet32", "BranchBlock", "CausalNormNet", "ExpertNet", "reversed_probabilities",
           "split_backbone"]


class BranchBlock(nn.Module):
    """``ReLU(BN(Linear(D, D)))``: the branch/expert-specific block on shared backbone features."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.bn = nn.BatchNorm1d(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.bn(self.fc(x)))


class _PoolFlatten(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)


class _Features(nn.Module):
    def __init__(self, backbone: Backbone) -> None:
        super().__init__()
        self.backbone = backbone

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.backbone.features(x)


def split_backbone(backbone: Backbone, kind: Literal["experts", "last_block"], *, init: str = "fan_out"
                   ) -> tuple[nn.Module, Callable[[], nn.Module], int]:
    """``(trunk, make_private, dim)``: the shared trunk, a factory of one private part (trunk output
    -> (N, dim) features, freshly initialised) and the private feature size.

    ``resnet32`` (:class:`~.models.CifarResNet`, n blocks per stage): ``"experts"`` shares the stem
    and stage 1 and makes stages 2–3 with widths 24/48 (RIDE/SADE ``reduce_dimension``);
    ``"last_block"`` shares everything but the last block and makes a 64-channel block (BBN's
    ``cb_block``/``rb_block``). Other backbones: trunk = ``features``, private = :class:`BranchBlock`.
    ``init``: the run's; ``fan_in`` gives the private parts Kaiming fan-in weights, as the references
    build them before their ``apply(_weights_init)`` (BBN ``lib/backbone/resnet_cifar.py:163–166``,
    RIDE ``ride_resnet_cifar.py:142``); ``fan_out``: :func:`~..models.kaiming_init`.
    """
    initialise = fan_in_weights if init == "fan_in" else kaiming_init
    if isinstance(backbone, CifarResNet):
        n = len(backbone.layers) // 3
        stem = [backbone.conv1, backbone.bn1, nn.ReLU()]
        if kind == "experts":
            def make() -> nn.Module:
                blocks, cin = [], 16
                for cout in (24, 48):
                    for b in range(n):
                        blocks.append(CifarBlock(cin, cout, 2 if b == 0 else 1))
                        cin = cout
                m = nn.Sequential(*blocks, _PoolFlatten())
                initialise(m)
                return m
            return nn.Sequential(*stem, *backbone.layers[:n]), make, 48

        def make_block() -> nn.Module:
            m = nn.Sequential(CifarBlock(64, 64, 1), _PoolFlatten())
            initialise(m)
            return m
        return nn.Sequential(*stem, *backbone.layers[:-1]), make_block, 64
    D = backbone.feature_dim

    def make_branch() -> nn.Module:
        m = BranchBlock(D)
        if init == "fan_in":
            fan_in_weights(m)
        return m
    return _Features(backbone), make_branch, D


class BBNStyleResNet32(Backbone):
    """ResNet-32 as in BBN's ``bbn_res32_cifar`` and the TDE/LADE ``ResNet32Feature``: stages of 5, 5
    and 4 option-A blocks (16/32/64 channels), then two parallel 64-channel blocks on the same input
    (``cb_block``, ``rb_block``), pooled and concatenated: ``feature_dim`` 128."""

    def __init__(self, num_classes: int, in_channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 16, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        layers: list[nn.Module] = []
        cin = 16
        for stage, (cout, n) in enumerate(((16, 5), (32, 5), (64, 4))):
            for b in range(n):
                layers.append(CifarBlock(cin, cout, 2 if (stage > 0 and b == 0) else 1))
                cin = cout
        self.layers = nn.Sequential(*layers)
        self.cb_block = CifarBlock(64, 64, 1)
        self.rb_block = CifarBlock(64, 64, 1)
        self._init_head(128, num_classes, in_channels)
        kaiming_init(self)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(F.relu(self.bn1(self.conv1(x))))
        x = torch.cat([self.cb_block(x), self.rb_block(x)], dim=1)
        return torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)


def _resnet32_bbn(num_classes: int, in_channels: int, image_size: int | None = None) -> Backbone:
    return BBNStyleResNet32(num_classes, in_channels)


class BBNNet(nn.Module):
    """Bilateral-branch network: conventional and re-balancing branches, one classifier on the
    concatenation ``[f_c, f_r]`` (2D -> C). ``forward`` (inference) = classifier([f_c, f_r]) — the
    reference's equal-weight test mode."""

    def __init__(self, backbone: Backbone, *, init: str = "fan_out") -> None:
        super().__init__()
        self.trunk, make, D = split_backbone(backbone, "last_block", init=init)
        self.conventional = make()
        self.rebalancing = make()
        self.head = nn.Linear(2 * D, backbone.num_classes)
        self.num_classes = backbone.num_classes
        self.in_channels = backbone.in_channels

    def mixed(self, x_c: torch.Tensor, x_r: torch.Tensor, alpha: float) -> torch.Tensor:
        """Training logits ``classifier(2·[α f_c(x_c), (1 − α) f_r(x_r)])``."""
        f_c = self.conventional(self.trunk(x_c))
        f_r = self.rebalancing(self.trunk(x_r))
        return self.head(2.0 * torch.cat([alpha * f_c, (1.0 - alpha) * f_r], dim=1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.trunk(x)
        return self.head(torch.cat([self.conventional(f), self.rebalancing(f)], dim=1))


class ExpertNet(nn.Module):
    """E experts on a shared trunk, each a private part and a cosine head scaled by ``scale``
    (RIDE's and SADE's ``use_norm`` heads, s = 30). ``experts(x)`` -> (E, N, C); ``forward`` = the
    weighted sum ``Σ_k w_k z_k`` with ``weights`` (default uniform: the experts' mean)."""

    def __init__(self, backbone: Backbone, num_experts: int, *, scale: float = 30.0, init: str = "fan_out") -> None:
        super().__init__()
        self.trunk, make, D = split_backbone(backbone, "experts", init=init)
        C = backbone.num_classes
        self.blocks = nn.ModuleList(make() for _ in range(num_experts))
        head_init = "unit" if init == "fan_in" else "kaiming_uniform"
        self.heads = nn.ModuleList(NormedLinear(D, C, init=head_init) for _ in range(num_experts))
        self.scale = float(scale)
        self.register_buffer("weights", torch.full((num_experts,), 1.0 / num_experts))
        self.num_classes = C
        self.in_channels = backbone.in_channels

    def experts(self, x: torch.Tensor) -> torch.Tensor:
        f = self.trunk(x)
        return torch.stack([self.scale * h(b(f)) for b, h in zip(self.blocks, self.heads)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.einsum("e,enc->nc", self.weights, self.experts(x))


class CausalNormNet(nn.Module):
    """Backbone + the causal norm classifier of decoupled TDE (multi-head normalised, no bias).

    Training logits are the ``alpha = 0`` case of :func:`~.losses.tde_counterfactual`; in eval mode
    ``forward`` returns the counterfactual TDE logits with the moving-average feature ``mean_feature``
    (updated by :meth:`update_mean` as ``c ← μ c + mean_batch(x)``, μ = 0.9, as the reference)."""

    def __init__(self, backbone: Backbone, *, num_heads: int = 2, tau: float = 16.0, gamma: float = 0.03125,
                 alpha: float = 1.5, mu: float = 0.9) -> None:
        super().__init__()
        self.backbone = backbone
        D, C = backbone.feature_dim, backbone.num_classes
        self.weight = nn.Parameter(torch.empty(C, D).uniform_(-1 / math.sqrt(D), 1 / math.sqrt(D)))
        self.register_buffer("mean_feature", torch.zeros(D))
        self.num_heads, self.tau, self.gamma, self.alpha, self.mu = num_heads, tau, gamma, alpha, mu
        self.num_classes = C
        self.in_channels = backbone.in_channels

    def logits(self, features: torch.Tensor, alpha: float) -> torch.Tensor:
        return tde_counterfactual(features, self.weight, self.mean_feature, num_heads=self.num_heads,
                                  tau=self.tau, gamma=self.gamma, alpha=alpha)

    @torch.no_grad()
    def update_mean(self, features: torch.Tensor) -> None:
        self.mean_feature.mul_(self.mu).add_(features.detach().mean(0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.logits(self.backbone.features(x), 0.0 if self.training else self.alpha)


def reversed_probabilities(labels: np.ndarray) -> np.ndarray:
    """BBN's reversed sampler as per-sample probabilities: class c is drawn with probability
    ∝ n_max / n_c, then a sample uniformly within it (shape (N,), sums to 1)."""
    counts = np.bincount(labels)
    w_class = np.where(counts > 0, counts.max() / np.maximum(counts, 1), 0.0)
    p = w_class[labels] / counts[labels]
    return p / p.sum()
