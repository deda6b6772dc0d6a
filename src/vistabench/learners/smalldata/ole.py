"""Orthogonal Low-rank Embedding (Lezama et al., CVPR 2018): cross-entropy + λ · OLÉ.

``OLÉ(X, y) = (Σ_c max(δ, ‖X_c‖_*) − ‖X‖_*) / N`` on the batch's penultimate features X (N x D),
X_c the rows of class c, ‖·‖_* the nuclear norm (sum of singular values), δ = 1. The gradient
is the reference implementation's sub-gradient (github.com/lorenzobrigato/gem,
``pipelines/ole.py``): ``U_c V_cᵀ`` for classes with ‖X_c‖_* > δ (0 otherwise) minus ``U Vᵀ``
of the whole batch, singular values below 1e-6 dropped, all divided by N.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .common import FeatureModel
from .registry import MethodContext

__all__ = ["ole_loss", "OLELoss", "build"]

_EIG_THRESHOLD = 1e-6


def _nuclear_and_subgrad(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    u, s, vh = torch.linalg.svd(a, full_matrices=False)
    keep = (s >= _EIG_THRESHOLD).to(a.dtype)
    return s.sum(), (u * keep) @ vh


class _OLE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, y: torch.Tensor, delta: float) -> torch.Tensor:  # type: ignore[override]
        xd = x.detach().double()
        n = x.shape[0]
        obj = torch.zeros((), dtype=torch.float64, device=x.device)
        grad = torch.zeros_like(xd)
        for c in torch.unique(y):
            rows = y == c
            nuc, g = _nuclear_and_subgrad(xd[rows])
            if nuc > delta:
                obj = obj + nuc
                grad[rows] += g
            else:
                obj = obj + delta
        nuc_all, g_all = _nuclear_and_subgrad(xd)
        ctx.save_for_backward(((grad - g_all) / n).to(x.dtype))
        return ((obj - nuc_all) / n).to(x.dtype)

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):  # type: ignore[override]
        (g,) = ctx.saved_tensors
        return grad_out * g, None, None


def ole_loss(features: torch.Tensor, labels: torch.Tensor, *, delta: float = 1.0) -> torch.Tensor:
    """OLÉ term of features (N, D) with int labels (N,), a scalar (differentiable in features)."""
    return _OLE.apply(features, labels, float(delta))


class OLELoss(nn.Module):
    """``CE(logits, y) + λ · OLÉ(features, y)`` with the features of the model's last forward."""

    def __init__(self, model: FeatureModel, weight: float, delta: float = 1.0) -> None:
        super().__init__()
        self._model = [model]
        self.weight, self.delta = float(weight), float(delta)

    def forward(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        ce = F.cross_entropy(logits, y)
        f = self._model[0].last_features
        if f is None or f.shape[0] != y.shape[0] or f.device.type == "meta":
            return ce
        return ce + self.weight * ole_loss(f, y, delta=self.delta)


def build(base: nn.Module, config: dict, ctx: MethodContext) -> tuple[nn.Module, OLELoss]:
    model = FeatureModel(base)
    return model, OLELoss(model, config["ole_weight"])
