"""Training losses for long-tailed classification, and post-hoc logit adjustment.

Every loss is an ``nn.Module`` called as ``loss(logits, targets) -> scalar`` (mean over the
batch), with logits (N, C) float and targets (N,) int64. Losses that change during training
(deferred re-weighting) have ``set_epoch(epoch)``, which :class:`~.trainer.Trainer` calls at the
start of every epoch (0-based).

Notation: n_c = training images of class c, π_c = n_c / Σ n, z = logits, y = target.

- cross-entropy: ``−log softmax(z)_y``
- focal (Lin et al., 2017): ``−(1 − p_y)^γ log p_y``, p = softmax(z)
- LDAM (Cao et al., 2019): ``−log softmax(s·(z − Δ_y e_y))_y`` with Δ_c ∝ n_c^(−1/4) scaled so
  max_c Δ_c = max_margin, and z the cosine logits of normalised features and weights
  (:class:`~.models.NormedLinear`); with DRW the loss is re-weighted from ``drw_epoch`` on by
  w_c = (1 − β)/(1 − β^{n_c}) normalised to Σ_c w_c = C (the weighted mean Σ w_{y_i} ℓ_i / Σ w_{y_i})
- balanced softmax (Ren et al., 2020): ``−log softmax(z + log π)_y``
- post-hoc logit adjustment (Menon et al., 2021): predict with ``z − τ log π``
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .._validation import check_array, check_fraction, check_positive, check_scores
from ..errors import InputError

__all__ = [
    "CrossEntropyLoss", "FocalLoss", "LDAMLoss", "BalancedSoftmaxLoss", "class_balanced_weights",
    "ldam_margins", "logit_adjust", "check_class_counts",
]


def check_class_counts(class_counts: Sequence[int] | np.ndarray, name: str = "class_counts") -> np.ndarray:
    """1-d array of C >= 1 positive integer training counts per class (long-tail losses need n_c >= 1)."""
    a = check_array(class_counts, name, ndim=1, kind="integer", allow_empty=False)
    if np.any(a <= 0):
        bad = np.flatnonzero(a <= 0).tolist()
        raise InputError(f"{name}: every class needs at least one training image; classes {bad} have none")
    return a.astype(np.int64)


def class_balanced_weights(class_counts: Sequence[int] | np.ndarray, *, beta: float = 0.9999) -> np.ndarray:
    """Class-balanced weights of Cui et al. (2019), as used by DRW.

    ``w_c = (1 − β) / (1 − β^{n_c})``, then normalised so that ``Σ_c w_c = C``.

    >>> class_balanced_weights([100, 10], beta=0.9).round(4).tolist()
    [0.7889, 1.2111]
    """
    n = check_class_counts(class_counts).astype(np.float64)
    beta = check_fraction(beta, "beta")
    if beta >= 1.0:
        raise InputError(f"beta: expected a value in [0, 1), got {beta!r}")
    w = (1.0 - beta) / (1.0 - np.power(beta, n))
    return w / w.sum() * len(n)


def ldam_margins(class_counts: Sequence[int] | np.ndarray, *, max_margin: float = 0.5) -> np.ndarray:
    """LDAM margins ``Δ_c = max_margin · n_c^(−1/4) / max_c' n_c'^(−1/4)`` (largest for the rarest class).

    >>> ldam_margins([16, 1], max_margin=0.5).tolist()
    [0.25, 0.5]
    """
    n = check_class_counts(class_counts).astype(np.float64)
    max_margin = check_positive(max_margin, "max_margin")
    m = n ** -0.25
    return m * (max_margin / m.max())


class CrossEntropyLoss(nn.Module):
    """Cross-entropy ``mean_i −log softmax(z_i)_{y_i}`` with optional label smoothing."""

    def __init__(self, *, label_smoothing: float = 0.0) -> None:
        super().__init__()
        self.label_smoothing = check_fraction(label_smoothing, "label_smoothing")

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, target, label_smoothing=self.label_smoothing)


class FocalLoss(nn.Module):
    """Focal loss (Lin et al., 2017) ``mean_i −(1 − p_{i,y_i})^γ log p_{i,y_i}``; γ = 0 is cross-entropy."""

    def __init__(self, *, gamma: float = 2.0) -> None:
        super().__init__()
        self.gamma = check_positive(gamma, "gamma", strict=False)

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        logp = F.log_softmax(logits, dim=1).gather(1, target[:, None]).squeeze(1)
        p = logp.exp()
        return (-(1.0 - p).pow(self.gamma) * logp).mean()


class LDAMLoss(nn.Module):
    """Label-distribution-aware margin loss with optional deferred re-weighting (LDAM-DRW).

    Parameters
    ----------
    class_counts : array of int, shape (C,)
        Training images per class (all >= 1).
    max_margin : float
        Margin of the rarest class (0.5 in Cao et al.).
    scale : float
        s, multiplies the margin-adjusted cosine logits (30 in Cao et al.).
    drw_epoch : int or None
        First epoch (0-based) with class-balanced weights; None = never (plain LDAM).
    beta : float
        β of the class-balanced weights (0.9999).
    """

    def __init__(self, class_counts: Sequence[int] | np.ndarray, *, max_margin: float = 0.5,
                 scale: float = 30.0, drw_epoch: int | None = None, beta: float = 0.9999) -> None:
        super().__init__()
        counts = check_class_counts(class_counts)
        self.scale = check_positive(scale, "scale")
        self.register_buffer("margins", torch.tensor(ldam_margins(counts, max_margin=max_margin), dtype=torch.float32))
        self.register_buffer("drw_weights", torch.tensor(class_balanced_weights(counts, beta=beta), dtype=torch.float32))
        if drw_epoch is not None:
            drw_epoch = check_positive(drw_epoch, "drw_epoch", strict=False, integer=True)
        self.drw_epoch = drw_epoch
        self.reweight = False

    def set_epoch(self, epoch: int) -> None:
        """Switch the class-balanced weights on from ``drw_epoch`` (0-based epochs)."""
        self.reweight = self.drw_epoch is not None and epoch >= self.drw_epoch

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        margins = self.margins.to(logits.dtype)[target][:, None]
        adjusted = logits - F.one_hot(target, logits.shape[1]).to(logits.dtype) * margins
        weight = self.drw_weights.to(logits.dtype) if self.reweight else None
        return F.cross_entropy(self.scale * adjusted, target, weight=weight)


class BalancedSoftmaxLoss(nn.Module):
    """Balanced softmax (Ren et al., 2020): cross-entropy of ``z + log π`` (π = training prior)."""

    def __init__(self, class_counts: Sequence[int] | np.ndarray) -> None:
        super().__init__()
        counts = check_class_counts(class_counts).astype(np.float64)
        self.register_buffer("log_prior", torch.tensor(np.log(counts / counts.sum()), dtype=torch.float32))

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits + self.log_prior.to(logits.dtype), target)


def logit_adjust(logits: np.ndarray, class_prior: Sequence[float] | np.ndarray, *, tau: float = 1.0) -> np.ndarray:
    """Post-hoc logit adjustment (Menon et al., 2021, Eq. 10): ``z − τ · log π``.

    Parameters
    ----------
    logits : ndarray, shape (N, C)
    class_prior : ndarray, shape (C,)
        Training class frequencies π (positive; need not sum to 1 — a constant shift does not change
        the argmax, but the returned logits are shifted by it).
    tau : float
        Temperature τ >= 0 (1 = the Bayes-optimal correction for a balanced test set).

    Returns
    -------
    ndarray, shape (N, C)

    >>> logit_adjust(np.array([[1.0, 1.0]]), [0.5, 0.25], tau=1.0).round(3).tolist()
    [[1.693, 2.386]]
    """
    prior = check_array(class_prior, "class_prior", ndim=1, kind="float", allow_empty=False)
    z = check_scores(logits, "logits", num_classes=len(prior))
    if np.any(prior <= 0):
        raise InputError("class_prior: expected positive frequencies (log of zero is undefined)")
    tau = check_positive(tau, "tau", strict=False)
    return z - tau * np.log(prior)[None, :]
