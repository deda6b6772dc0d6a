"""The cost-function methods on an unchanged backbone: ``cosine``, ``cosine_ce``, ``grad_l2``.

- ``cosine`` — cosine loss (Barz & Denzler 2020): ``L = 1 − ⟨ψ(f(x)), e_y⟩`` with ψ the ℓ2
  normalisation and e_y the one-hot class embedding; prediction = argmax of f(x).
- ``cosine_ce`` — cosine loss on the embedding plus ``λ_xent`` times the cross-entropy of an extra
  linear layer (Barz & Denzler's combined loss). ``head="gem"`` (default, gem's
  ``CosineXentModel``): the extra layer reads ``BatchNorm1d(ReLU(ψ(f(x))))`` and predicts;
  ``head="embedding"``: it reads ψ(f(x)), feeds the loss only, and the embedding predicts.
- ``grad_l2`` — the squared input-gradient norm penalty (Bietti et al. 2019):
  ``L = CE + λ_grad · mean_i ‖∇_{x_i} ℓ(f(x_i), y_i)‖²``; weight decay disabled (paper §VI-F).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .registry import MethodContext

__all__ = ["CosineLoss", "CosineCEModel", "CosineCELoss", "GradL2Model", "GradL2Loss", "build_cosine",
           "build_cosine_ce", "build_grad_l2"]


# ---------------------------------------------------------------------------------- losses
class CosineLoss(nn.Module):
    """``mean_i (1 − ψ(z_i)[y_i])``: cosine distance between the normalised output and e_y."""

    def forward(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return (1.0 - F.normalize(z, dim=1).gather(1, y[:, None]).squeeze(1)).mean()


class _Wrapper(nn.Module):
    """Keeps the backbone's ``features``/``classifier``/``in_channels`` visible to the trainer."""

    def __init__(self, base: nn.Module) -> None:
        super().__init__()
        self.base = base
        self.in_channels = base.in_channels
        self.num_classes = base.num_classes

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.base.features(x)


class CosineCEModel(_Wrapper):
    """Backbone output = class embedding z (dim C). ``head="gem"``: ``xent_head(BN(ReLU(ψ(z))))`` gives
    the logits, which predict; ``head="embedding"``: ``xent_head(ψ(z))`` feeds the loss only and z predicts.
    A training forward keeps z in ``last_embedding`` for the cosine term."""

    def __init__(self, base: nn.Module, head: str = "gem") -> None:
        super().__init__(base)
        c = base.num_classes
        self.head = head
        self.classifier = base.classifier
        self.feature_dim = base.feature_dim
        self.bn = nn.BatchNorm1d(c) if head == "gem" else None
        self.xent_head = nn.Linear(c, c)
        self.last_embedding: torch.Tensor | None = None

    def head_logits(self, z: torch.Tensor) -> torch.Tensor:
        zn = F.normalize(z, dim=1)
        return self.xent_head(self.bn(F.relu(zn)) if self.bn is not None else zn)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.base(x)
        self.last_embedding = z if (self.training and torch.is_grad_enabled()) else None
        return self.head_logits(z) if self.head == "gem" else z


class CosineCELoss(nn.Module):
    """``cosine(z, y) + λ_xent · CE(logits, y)`` with z the embedding and the logits of the extra layer."""

    def __init__(self, model: CosineCEModel, xent_weight: float) -> None:
        super().__init__()
        self._model = [model]  # a list, not a sub-module: its parameters belong to the model
        self.xent_weight = float(xent_weight)
        self.cos = CosineLoss()

    def forward(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        model = self._model[0]
        if model.head == "gem":
            z = model.last_embedding if model.last_embedding is not None else out
            logits = out
        else:
            z, logits = out, model.head_logits(out)
        return self.cos(z, y) + self.xent_weight * F.cross_entropy(logits, y)


class GradL2Model(_Wrapper):
    """Marks the training input as requiring grad so the loss can penalise ∇_x."""

    def __init__(self, base: nn.Module) -> None:
        super().__init__(base)
        self.classifier = base.classifier
        self.feature_dim = base.feature_dim
        self.last_input: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training and torch.is_grad_enabled():
            x = x.detach().requires_grad_(True)
            self.last_input = x
        else:
            self.last_input = None
        return self.base(x)


class GradL2Loss(nn.Module):
    """``CE + λ_grad · mean_i ‖∇_{x_i} ℓ_i‖²`` (double back-propagation)."""

    def __init__(self, model: GradL2Model, weight: float) -> None:
        super().__init__()
        self._model = [model]
        self.weight = float(weight)

    def forward(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        ce = F.cross_entropy(logits, y, reduction="none")
        x = self._model[0].last_input
        if x is None or not logits.requires_grad:
            return ce.mean()
        (g,) = torch.autograd.grad(ce.sum(), x, create_graph=True)
        return ce.mean() + self.weight * g.pow(2).flatten(1).sum(1).mean()


def build_cosine(base: nn.Module, params: dict[str, Any], ctx: MethodContext) -> tuple[nn.Module, nn.Module]:
    return base, CosineLoss()


def build_cosine_ce(base: nn.Module, params: dict[str, Any], ctx: MethodContext) -> tuple[nn.Module, nn.Module]:
    model = CosineCEModel(base, head=str(params.get("head", "gem")))
    return model, CosineCELoss(model, float(params["xent_weight"]))


def build_grad_l2(base: nn.Module, params: dict[str, Any], ctx: MethodContext) -> tuple[nn.Module, nn.Module]:
    model = GradL2Model(base)
    return model, GradL2Loss(model, float(params["grad_l2"]))
