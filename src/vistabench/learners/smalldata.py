"""Small-data methods (Brigato et al., §IV): losses and architecture changes on a shared backbone.

Registry ``methods``:

- ``ce`` — cross-entropy, lr / weight decay / batch size tuned (the paper's baseline).
- ``ce_untuned`` — cross-entropy with the data-rich defaults lr 0.1, weight decay 1e-4, no search.
- ``cosine`` — cosine loss (Barz & Denzler 2020): ``L = 1 − ⟨ψ(f(x)), e_y⟩`` with ψ the ℓ2
  normalisation and e_y the one-hot class embedding; prediction = argmax of f(x).
- ``cosine_ce`` — cosine loss plus ``λ_xent`` times cross-entropy of an extra linear layer on the
  normalised embedding (Barz & Denzler's combined loss); prediction = argmax of the embedding, as for
  ``cosine``. Searches λ_xent.
- ``harmonic`` — harmonic networks (Ulicny et al. 2019): every k x k convolution (k > 1) becomes a
  harmonic block: a fixed depthwise bank of k x k DCT-II filters followed by a learned 1 x 1
  combination. ``dct_level`` keeps the filters with ``u + v < level`` (level ≥ 2k−1 keeps all).
- ``grad_l2`` — the squared input-gradient norm penalty (Bietti et al. 2019):
  ``L = CE + λ_grad · mean_i ‖∇_{x_i} ℓ(f(x_i), y_i)‖²``; weight decay disabled (paper §VI-F).
- ``dhn``, ``ole``, ``fconv``, ``dskn``, ``dvp``, ``auxilearn``, ``tvmf`` — the rest of the
  benchmark's methods, one module each in :mod:`vistabench.learners.smalldata_methods` (see
  their docstrings and docs/smalldata.md).

Each method declares its own searched hyper-parameters (``space``) and overrides of the common
ones (``fixed``); the protocol adds lr, weight decay and batch size from the dataset preset.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..errors import InputError
from ..registry import Registry
from ..tuning import Choice, LogUniform, Param, Uniform
from . import smalldata_methods as _m
from .models import build_model
from .smalldata_methods import auxilearn, dhn, dskn, dvp, fconv, ole, tvmf  # noqa: F401  (registered below)

__all__ = ["SmallDataMethod", "methods", "get_method", "build_method", "HarmonicConv2d", "dct_filters",
           "harmonize", "CosineLoss", "CosineCEModel", "GradL2Model"]


# ------------------------------------------------------------------------------- harmonic
def dct_filters(k: int, *, level: int | None = None) -> torch.Tensor:
    """Orthonormal 2-D DCT-II basis filters of size k x k, shape (m, k, k).

    ``f_{uv}(x, y) = c_u c_v cos(π(2x+1)u / 2k) cos(π(2y+1)v / 2k)`` with ``c_0 = √(1/k)``,
    ``c_u = √(2/k)``; filters ordered by (u + v, u); ``level`` keeps ``u + v < level``.
    """
    if level is None:
        level = 2 * k - 1
    x = np.arange(k)
    c = np.where(np.arange(k) == 0, math.sqrt(1.0 / k), math.sqrt(2.0 / k))
    basis1d = c[:, None] * np.cos(np.pi * (2 * x[None, :] + 1) * np.arange(k)[:, None] / (2 * k))  # (u, x)
    pairs = sorted(((u, v) for u in range(k) for v in range(k) if u + v < level), key=lambda p: (p[0] + p[1], p[0]))
    filt = np.stack([np.outer(basis1d[u], basis1d[v]) for u, v in pairs])
    return torch.tensor(filt, dtype=torch.float32)


class HarmonicConv2d(nn.Module):
    """Harmonic block: fixed depthwise DCT filters, then a learned 1 x 1 convolution.

    Replaces ``nn.Conv2d(cin, cout, k, stride, padding)``; with every DCT filter kept it spans
    the same function class (the DCT basis is complete).
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, *, stride: int = 1,
                 padding: int = 0, bias: bool = False, level: int | None = None) -> None:
        super().__init__()
        basis = dct_filters(kernel_size, level=level)
        self.m = basis.shape[0]
        self.in_channels, self.out_channels = in_channels, out_channels
        self.stride, self.padding = stride, padding
        self.register_buffer("basis", basis[:, None].repeat(in_channels, 1, 1, 1))  # (cin*m, 1, k, k)
        self.mix = nn.Conv2d(in_channels * self.m, out_channels, 1, bias=bias)
        nn.init.kaiming_normal_(self.mix.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, self.basis, stride=self.stride, padding=self.padding, groups=self.in_channels)
        return self.mix(y)


def harmonize(model: nn.Module, *, level: int | None = None) -> int:
    """Replace every ``nn.Conv2d`` with a square kernel > 1 (and groups = dilation = 1) in place.

    Returns the number of layers replaced.
    """
    n = 0
    for name, child in list(model.named_children()):
        if (isinstance(child, nn.Conv2d) and child.kernel_size[0] > 1 and child.kernel_size[0] == child.kernel_size[1]
                and child.groups == 1 and child.dilation == (1, 1) and isinstance(child.padding, tuple)):
            setattr(model, name, HarmonicConv2d(child.in_channels, child.out_channels, child.kernel_size[0],
                                                stride=child.stride[0], padding=child.padding[0],
                                                bias=child.bias is not None, level=level))
            n += 1
        else:
            n += harmonize(child, level=level)
    return n


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
    """Backbone output = class embedding z (dim C), used for prediction; ``xent_head`` is the extra
    linear layer on ψ(z) that only feeds the auxiliary cross-entropy term."""

    def __init__(self, base: nn.Module) -> None:
        super().__init__(base)
        c = base.num_classes
        self.classifier = base.classifier
        self.feature_dim = base.feature_dim
        self.xent_head = nn.Linear(c, c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x)


class CosineCELoss(nn.Module):
    """``cosine(z, y) + λ_xent · CE(xent_head(ψ(z)), y)``."""

    def __init__(self, model: CosineCEModel, xent_weight: float) -> None:
        super().__init__()
        self._head = [model.xent_head]  # a list, not a sub-module: its parameters belong to the model
        self.xent_weight = float(xent_weight)
        self.cos = CosineLoss()

    def forward(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        logits = self._head[0](F.normalize(z, dim=1))
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


# ------------------------------------------------------------------------------- registry
Builder = Callable[[nn.Module, dict], tuple[nn.Module, Callable | None]]


@dataclass(frozen=True)
class SmallDataMethod:
    """A method: its searched hyper-parameters, its overrides of the common ones, and a builder."""

    name: str
    title: str
    family: str  # "baseline", "cost function", "architecture", "warm-starting"
    space: dict[str, Param] = field(default_factory=dict)
    fixed: dict[str, Any] = field(default_factory=dict)
    tuned: bool = True
    builder: Builder | None = None

    def build(self, base: nn.Module, config: dict) -> tuple[nn.Module, Callable | None]:
        """(model, loss_fn) for the trainer; loss_fn None = plain cross-entropy."""
        if self.builder is None:
            return base, None
        return self.builder(base, config)


methods: Registry[SmallDataMethod] = Registry("small-data method")


def _register(m: SmallDataMethod) -> None:
    methods.register(m.name)(m)


def _cosine(base: nn.Module, config: dict) -> tuple[nn.Module, Callable]:
    return base, CosineLoss()


def _cosine_ce(base: nn.Module, config: dict) -> tuple[nn.Module, Callable]:
    model = CosineCEModel(base)
    return model, CosineCELoss(model, config["xent_weight"])


def _harmonic(base: nn.Module, config: dict) -> tuple[nn.Module, None]:
    if harmonize(base, level=int(config["dct_level"])) == 0:
        raise InputError("method 'harmonic': the model has no k x k convolution (k > 1) to replace")
    return base, None


def _grad_l2(base: nn.Module, config: dict) -> tuple[nn.Module, Callable]:
    model = GradL2Model(base)
    return model, GradL2Loss(model, config["grad_l2"])


_register(SmallDataMethod("ce", "Cross-entropy (tuned baseline)", "baseline"))
_register(SmallDataMethod("ce_untuned", "Cross-entropy (untuned: lr 0.1, wd 1e-4)", "baseline",
                          fixed={"lr": 0.1, "weight_decay": 1e-4}, tuned=False))
_register(SmallDataMethod("cosine", "Cosine loss", "cost function", builder=_cosine))
_register(SmallDataMethod("cosine_ce", "Cosine + cross-entropy loss", "cost function",
                          space={"xent_weight": LogUniform(0.01, 1.0)}, builder=_cosine_ce))
_register(SmallDataMethod("harmonic", "Harmonic networks (DCT blocks)", "architecture",
                          space={"dct_level": Choice((3, 5))}, builder=_harmonic))
_register(SmallDataMethod("grad_l2", "Grad-l2 penalty", "cost function",
                          space={"grad_l2": LogUniform(1e-3, 10.0)}, fixed={"weight_decay": 0.0},
                          builder=_grad_l2))
# The other methods of the benchmark, one module each under learners/smalldata_methods/.
_register(SmallDataMethod("dhn", "Deep hybrid networks (scattering + conv)", "architecture",
                          space={"scattering_J": Choice((1, 2))}, builder=_m.dhn.build))
_register(SmallDataMethod("ole", "Orthogonal low-rank embedding (CE + OLE)", "cost function",
                          space={"ole_weight": LogUniform(0.01, 1.0)}, builder=_m.ole.build))
_register(SmallDataMethod("fconv", "Full convolution", "architecture", builder=_m.fconv.build))
_register(SmallDataMethod("dskn", "Dual selective kernel networks", "architecture", builder=_m.dskn.build))
_register(SmallDataMethod("dvp", "Distilling visual priors (MoCo teacher + distillation)", "warm-starting",
                          space={"distill_weight": LogUniform(1e-5, 1e-2)}, builder=_m.dvp.build))
_register(SmallDataMethod("auxilearn", "Auxiliary learning (implicit differentiation)", "cost function",
                          space={"aux_scale": LogUniform(0.05, 1.0), "auxgrad_every": Choice((5, 15, 30))},
                          fixed={"num_aux_classes": 5, "aux_set_size": 0.015}, builder=_m.auxilearn.build))
_register(SmallDataMethod("tvmf", "t-vMF similarity", "cost function",
                          space={"kappa": Uniform(0.0, 32.0)}, builder=_m.tvmf.build))


def get_method(name: str) -> SmallDataMethod:
    return methods.get(name)


def build_method(method: str | SmallDataMethod, model_name: str, config: dict, *, num_classes: int,
                 in_channels: int, image_size: int | None, seed: int) -> tuple[nn.Module, Callable | None]:
    """Build backbone ``model_name`` (seeded) and apply ``method`` with the hyper-parameters in ``config``."""
    m = get_method(method) if isinstance(method, str) else method
    missing = [k for k in m.space if k not in config]
    if missing:
        raise InputError(f"config for method {m.name!r}: missing hyper-parameters {missing}")
    base = build_model(model_name, num_classes=num_classes, in_channels=in_channels, image_size=image_size,
                       seed=seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 7919)  # layers a method adds are seeded too
        return m.build(base, config)
