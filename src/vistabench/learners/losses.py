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

import math
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .._validation import check_array, check_scores, check_value
from ..errors import InputError

__all__ = [
    "CrossEntropyLoss", "FocalLoss", "LDAMLoss", "BalancedSoftmaxLoss", "class_balanced_weights",
    "ldam_margins", "logit_adjust", "check_class_counts", "IBLoss", "LADELoss", "GCLLoss", "RIDELoss",
    "TADELoss", "inverse_prior", "bbn_alpha", "tde_counterfactual",
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
    beta = check_value(beta, "beta", low=0, high=1)
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
    max_margin = check_value(max_margin, "max_margin", low=0, low_open=True)
    m = n ** -0.25
    return m * (max_margin / m.max())


class CrossEntropyLoss(nn.Module):
    """Cross-entropy ``mean_i −log softmax(z_i)_{y_i}`` with optional label smoothing."""

    def __init__(self, *, label_smoothing: float = 0.0) -> None:
        super().__init__()
        self.label_smoothing = check_value(label_smoothing, "label_smoothing", low=0, high=1)

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, target, label_smoothing=self.label_smoothing)


class FocalLoss(nn.Module):
    """Focal loss (Lin et al., 2017) ``mean_i −(1 − p_{i,y_i})^γ log p_{i,y_i}``; γ = 0 is cross-entropy."""

    def __init__(self, *, gamma: float = 2.0) -> None:
        super().__init__()
        self.gamma = check_value(gamma, "gamma", low=0)

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
        self.scale = check_value(scale, "scale", low=0, low_open=True)
        self.register_buffer("margins", torch.tensor(ldam_margins(counts, max_margin=max_margin), dtype=torch.float32))
        self.register_buffer("drw_weights", torch.tensor(class_balanced_weights(counts, beta=beta), dtype=torch.float32))
        if drw_epoch is not None:
            drw_epoch = check_value(drw_epoch, "drw_epoch", type=int, low=0)
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
    tau = check_value(tau, "tau", low=0)
    return z - tau * np.log(prior)[None, :]


# ------------------------------------------------------------------ the survey's further methods
#
# Each function/class below reproduces the loss of one reference implementation; the docstring
# names the repository and the formula. Tests re-derive every one in numpy.


class IBLoss(nn.Module):
    """Influence-balanced loss (Park et al., ICCV 2021; github.com/pseulki/IB-Loss).

    ``mean_i w_{y_i} · CE_i · α / (‖p_i − e_{y_i}‖₁ · ‖h_i‖₁ + ε)`` with p = softmax(z), h the
    penultimate features, ε = 0.001 and w the ``IBReweight`` class weights ``1/n_c`` normalised to
    sum C. Called as ``loss(logits, targets, feature_l1)`` with ``feature_l1 = ‖h_i‖₁``, shape (N,).
    """

    def __init__(self, class_counts: Sequence[int] | np.ndarray, *, alpha: float = 1000.0,
                 epsilon: float = 0.001) -> None:
        super().__init__()
        counts = check_class_counts(class_counts).astype(np.float64)
        self.alpha = check_value(alpha, "alpha", low=0, low_open=True)
        self.epsilon = check_value(epsilon, "epsilon", low=0, low_open=True)
        w = 1.0 / counts
        self.register_buffer("weight", torch.tensor(w / w.sum() * len(w), dtype=torch.float32))

    def forward(self, logits: torch.Tensor, target: torch.Tensor, feature_l1: torch.Tensor) -> torch.Tensor:
        grads = (F.softmax(logits, dim=1) - F.one_hot(target, logits.shape[1]).to(logits.dtype)).abs().sum(1)
        ib = self.alpha / (grads * feature_l1.reshape(-1) + self.epsilon)
        ce = F.cross_entropy(logits, target, weight=self.weight.to(logits.dtype), reduction="none")
        return (ce * ib).mean()


class LADELoss(nn.Module):
    """LADE (Hong et al., CVPR 2021; github.com/hyperconnect/LADE): balanced softmax (``PriorCELoss``)
    plus ``lam`` × the LADER regulariser.

    LADER, per class c over the batch: ``first_c = Σ_{i: y_i=c} z_ic / (m_c + 1e-8)`` (m_c = batch
    samples of class c), ``second_c = logsumexp_i(z_ic − log π_c + log(1/C)) − log N``, estimate
    ``first_c − second_c − remine_lambda · second_c²``; the regulariser is ``−Σ_c π_c · estimate_c``.
    The reference weights the terms 1 (PriorCE) and 0.1 (LADER), with ``remine_lambda`` 0.1.
    """

    def __init__(self, class_counts: Sequence[int] | np.ndarray, *, lam: float = 0.1,
                 remine_lambda: float = 0.1) -> None:
        super().__init__()
        counts = check_class_counts(class_counts).astype(np.float64)
        self.lam = check_value(lam, "lam", low=0)
        self.remine_lambda = check_value(remine_lambda, "remine_lambda", low=0)
        prior = counts / counts.sum()
        self.register_buffer("prior", torch.tensor(prior, dtype=torch.float32))

    def regulariser(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        C, N = logits.shape[1], logits.shape[0]
        mask = (target[None, :] == torch.arange(C, device=logits.device)[:, None]).to(logits.dtype)  # (C, N)
        m = mask.sum(1)
        first = (logits.T * mask).sum(1) / (m + 1e-8)
        spread = (logits - torch.log(self.prior + 1e-9) + math.log(1.0 / C + 1e-9)).T
        second = torch.logsumexp(spread, dim=1) - math.log(N)
        estimate = first - second - self.remine_lambda * second ** 2
        return -(estimate * self.prior).sum()

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        bsm = F.cross_entropy(logits + torch.log(self.prior + 1e-9), target)
        return bsm + self.lam * self.regulariser(logits, target)


class GCLLoss(nn.Module):
    """Gaussian clouded logit loss (Li et al., CVPR 2022; github.com/Keke921/GCLLoss).

    On cosine logits c: ``c' = c − noise_mul · |ε| · m_c / max m`` with ε ~ N(0, 1/3) clipped to
    [−1, 1] (one draw per logit) and cloud sizes ``m_c = log n_max − log n_c`` (0 for the head class);
    the target logit loses ``margin``; loss = CE(scale · c'). ``gamma > 0`` applies the focal factor
    ``(1 − p)^γ`` to each sample's cross-entropy (the reference's second, classifier stage), the
    factor detached from the gradient as the reference's ``focal_loss`` (``1 − p.detach()``).
    """

    def __init__(self, class_counts: Sequence[int] | np.ndarray, *, margin: float = 0.0, scale: float = 30.0,
                 noise_mul: float = 0.5, gamma: float = 0.0) -> None:
        super().__init__()
        counts = check_class_counts(class_counts).astype(np.float64)
        m = np.log(counts.max()) - np.log(counts)
        self.register_buffer("cloud", torch.tensor(m / m.max() if m.max() > 0 else m, dtype=torch.float32))
        self.margin = check_value(margin, "margin", low=0)
        self.scale = check_value(scale, "scale", low=0, low_open=True)
        self.noise_mul = check_value(noise_mul, "noise_mul", low=0)
        self.gamma = check_value(gamma, "gamma", low=0)

    def perturb(self, cosine: torch.Tensor, target: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """The clouded, margin-adjusted cosine logits for a given noise draw (same shape as cosine)."""
        out = cosine - self.noise_mul * noise.abs() * self.cloud.to(cosine.dtype)[None, :]
        return out - self.margin * F.one_hot(target, cosine.shape[1]).to(cosine.dtype)

    def forward(self, cosine: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        noise = (torch.randn(cosine.shape, device=cosine.device, dtype=cosine.dtype) / 3.0).clamp(-1, 1)
        ce = F.cross_entropy(self.scale * self.perturb(cosine, target, noise), target, reduction="none")
        if self.gamma > 0:
            ce = (1.0 - torch.exp(-ce.detach())).pow(self.gamma) * ce  # factor detached, as the reference
        return ce.mean()


class RIDELoss(nn.Module):
    """RIDE's per-expert loss (Wang et al., ICLR 2021; github.com/frank-xwang/RIDE-LongTailRecognition).

    For expert logits ``z_k = s · cos`` (k = 1..E) and their mean ``z̄``:
    ``Σ_k [ CE(z_k − s·Δ_y e_y; w) + λ · T̄² · KL(softmax(z̄/T) ‖ softmax(z_k/T)) ]`` — LDAM margins Δ
    (max 0.5), λ = ``diversity`` (−0.45 for CIFAR-100: a negative factor *rewards* disagreement),
    and from 0-based epoch ``reweight_epoch`` on (the reference's 1-based ``epoch > 160``) the class-balanced DRW
    weights w (β 0.9999) and per-class temperatures ``T_c ∝ C·π_c·f + 1 − f`` (f = 0.05, max 1),
    T̄ their mean; before that w = 1 and T = 1. The KL target z̄ is detached.
    """

    def __init__(self, class_counts: Sequence[int] | np.ndarray, *, max_margin: float = 0.5, scale: float = 30.0,
                 diversity: float = -0.45, reweight_epoch: int | None = None, reweight_factor: float = 0.05,
                 beta: float = 0.9999) -> None:
        super().__init__()
        counts = check_class_counts(class_counts)
        self.scale = check_value(scale, "scale", low=0, low_open=True)
        self.diversity = float(diversity)
        self.register_buffer("margins", torch.tensor(ldam_margins(counts, max_margin=max_margin), dtype=torch.float32))
        self.register_buffer("drw_weights", torch.tensor(class_balanced_weights(counts, beta=beta), dtype=torch.float32))
        pi = counts / counts.sum()
        t = len(pi) * pi * reweight_factor + 1 - reweight_factor
        self.register_buffer("temperatures", torch.tensor(t / t.max(), dtype=torch.float32))
        self.reweight_epoch = reweight_epoch
        self.reweight = False

    def set_epoch(self, epoch: int) -> None:
        self.reweight = self.reweight_epoch is not None and epoch >= self.reweight_epoch

    def forward(self, expert_logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """``expert_logits`` (E, N, C), already multiplied by the scale s."""
        mean = expert_logits.mean(0).detach()
        onehot = F.one_hot(target, expert_logits.shape[2]).to(expert_logits.dtype)
        shift = self.scale * self.margins.to(expert_logits.dtype)[target][:, None] * onehot
        weight = self.drw_weights.to(expert_logits.dtype) if self.reweight else None
        temp = self.temperatures.to(expert_logits.dtype)[None, :] if self.reweight else torch.ones(
            1, 1, dtype=expert_logits.dtype, device=expert_logits.device)
        t_mean = float(temp.mean())
        target_dist = F.softmax(mean / temp, dim=1)
        loss = expert_logits.new_zeros(())
        for z in expert_logits:
            loss = loss + F.cross_entropy(z - shift, target, weight=weight)
            kl = F.kl_div(F.log_softmax(z / temp, dim=1), target_dist, reduction="batchmean")
            loss = loss + self.diversity * t_mean ** 2 * kl
        return loss


def inverse_prior(prior: np.ndarray | torch.Tensor) -> torch.Tensor:
    """SADE's ``inverse_prior``: the class prior with its values reversed in rank order (the most
    frequent class gets the rarest class's frequency, and so on)."""
    p = torch.as_tensor(prior)
    value, idx0 = torch.sort(p)
    _, idx1 = torch.sort(idx0)
    return value.index_select(0, p.shape[0] - 1 - idx1)


class TADELoss(nn.Module):
    """SADE/TADE's skill-diverse expert loss (Zhang et al., NeurIPS 2022; github.com/Vanint/SADE-AgnosticLT).

    Three experts on one batch: ``CE(z_1) + CE(z_2 + log π) + CE(z_3 + log π − τ log π̃)``: a plain
    softmax expert (forward-LT), a balanced-softmax expert (uniform) and an inverse-softmax expert
    (backward-LT), π̃ = :func:`inverse_prior`, τ = 2; log terms use ``log(· + 1e-9)`` as the reference.
    """

    def __init__(self, class_counts: Sequence[int] | np.ndarray, *, tau: float = 2.0) -> None:
        super().__init__()
        counts = check_class_counts(class_counts).astype(np.float64)
        self.tau = check_value(tau, "tau", low=0)
        prior = torch.tensor(counts / counts.sum(), dtype=torch.float32)
        self.register_buffer("log_prior", torch.log(prior + 1e-9))
        self.register_buffer("log_inverse", torch.log(inverse_prior(prior) + 1e-9))

    def forward(self, expert_logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """``expert_logits`` (3, N, C)."""
        if expert_logits.shape[0] != 3:
            raise InputError(f"expert_logits: TADE needs 3 experts, got {expert_logits.shape[0]}")
        lp, li = self.log_prior.to(expert_logits.dtype), self.log_inverse.to(expert_logits.dtype)
        return (F.cross_entropy(expert_logits[0], target) + F.cross_entropy(expert_logits[1] + lp, target)
                + F.cross_entropy(expert_logits[2] + lp - self.tau * li, target))


def bbn_alpha(epoch: int, total_epochs: int) -> float:
    """BBN's cumulative-learning weight of the conventional branch at 0-based ``epoch``:
    ``1 − (epoch / total_epochs)²`` (the reference's parabolic decay with 1-based epochs,
    ``1 − ((e − 1)/div_epoch)²``, div_epoch = total epochs)."""
    return 1.0 - (epoch / total_epochs) ** 2


def tde_counterfactual(features: torch.Tensor, weight: torch.Tensor, mean_feature: torch.Tensor, *,
                       num_heads: int = 2, tau: float = 16.0, gamma: float = 0.03125,
                       alpha: float = 1.5) -> torch.Tensor:
    """Total-direct-effect logits of the causal norm classifier (Tang et al., NeurIPS 2020;
    github.com/KaihuaTang/Long-Tailed-Recognition.pytorch, ``Causal_Norm_Classifier``).

    Per head k (features split in ``num_heads`` equal parts): x̂ = x_k/‖x_k‖, ĉ = c_k/‖c_k‖ (c = the
    moving-average training feature), ŵ = w_k/(‖w_k‖ + γ); logits ``Σ_k (τ/K)·(x̂ − α·cos(x̂, ĉ)·ĉ)·ŵᵀ``.
    ``alpha=0`` gives the training logits. features (N, D), weight (C, D), mean_feature (D,).
    """
    d = features.shape[1] // num_heads
    out = features.new_zeros(features.shape[0], weight.shape[0])
    for k in range(num_heads):
        x = features[:, k * d:(k + 1) * d]
        w = weight[:, k * d:(k + 1) * d]
        c = mean_feature[k * d:(k + 1) * d][None, :]
        nx = x / x.norm(dim=1, keepdim=True)
        nc = c / c.norm(dim=1, keepdim=True)
        nw = w / (w.norm(dim=1, keepdim=True) + gamma)
        cos = (nx * nc).sum(1, keepdim=True)
        out = out + ((nx - alpha * cos * nc) * (tau / num_heads)) @ nw.T
    return out
