"""t-vMF similarity (Kobayashi, CVPR 2021) as the classifier of a backbone.

The classifier computes ``cos_c = ⟨f/‖f‖, w_c/‖w_c‖⟩`` and the t-vMF similarity
``φ_κ(cos) = (1 + cos) / (1 + κ (1 − cos)) − 1``; the logits are ``s · φ_κ`` with a learned
scale ``s = 1 + softplus(s₀)`` (``s₀`` initialised at 0), trained with cross-entropy — as in the
reference implementation (github.com/lorenzobrigato/gem, ``pipelines/tvmf.py``). κ = 0 gives
the cosine similarity (a normalised softmax classifier).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from .registry import MethodContext

__all__ = ["tvmf_similarity", "TvMFClassifier", "build"]


def tvmf_similarity(cosine: torch.Tensor, kappa: float) -> torch.Tensor:
    """``(1 + cos) / (1 + κ (1 − cos)) − 1``, element-wise; values in [−1, 1] for κ ≥ 0."""
    return (1.0 + cosine) / (1.0 + kappa * (1.0 - cosine)) - 1.0


class TvMFClassifier(nn.Module):
    """Bias-free t-vMF classifier with a learned logit scale; ``out_features`` = classes."""

    def __init__(self, in_features: int, out_features: int, kappa: float) -> None:
        super().__init__()
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.kappa = float(kappa)
        self.weight = nn.Parameter(torch.empty(self.out_features, self.in_features))
        nn.init.kaiming_uniform_(self.weight, a=5 ** 0.5)  # nn.Linear's initialisation
        self.scale_raw = nn.Parameter(torch.zeros(1))

    def similarity(self, f: torch.Tensor) -> torch.Tensor:
        """t-vMF similarities, shape (N, C)."""
        cos = F.linear(F.normalize(f, dim=1), F.normalize(self.weight, dim=1))
        return tvmf_similarity(cos, self.kappa)

    def forward(self, f: torch.Tensor) -> torch.Tensor:
        return self.similarity(f) * (1.0 + F.softplus(self.scale_raw))


def build(base: nn.Module, config: dict, ctx: MethodContext) -> tuple[nn.Module, None]:
    """Replace the backbone's linear head by a t-vMF classifier with ``κ = config["kappa"]``."""
    base.classifier = TvMFClassifier(base.feature_dim, base.num_classes, float(config["kappa"]))
    return base, None
