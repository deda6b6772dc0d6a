"""Distilling Visual Priors (Zhao & Wen, ECCV-W 2020): contrastive teacher, then distillation.

Stage 1 (:meth:`DVPLoss.before_fit`): a copy of the backbone is pre-trained without labels with
MoCo (He et al. 2020) and the margin of the reference implementation
(github.com/lorenzobrigato/gem, ``pipelines/distill_visual_priors/``): queries and keys are two
augmented views, a momentum (m = 0.999) key encoder and a queue of K = 4096 keys, 128-d MLP
projection, logits ``(cos − margin·[positive]) / T`` with T = 0.07, cross-entropy on the positive;
batch size 64 (the paper's tuned value for its Table 4), the classifier's learning rate and
number of epochs.
Stage 2 (the trainer's loop): the student is trained with
``CE + λ_dist · Σ d(connector(f_s), f_t, m) / N`` on the penultimate features, where
:func:`distillation_loss` is the partial L2 of Heo et al. (ICCV 2019, "overhaul of feature
distillation") and the margin m per feature is the mean of the teacher features' negative part
under a Gaussian fit (:func:`gaussian_margin`). As in gem, the student starts from the contrastive
encoder's weights (the teacher's; ``student_init="random"``: its own) and the first 4 epochs are
cross-entropy only (``ce_only_epochs``; None: 1 % of the epochs, our earlier rule).
Remaining differences from gem (docs/fidelity.md): distillation on the pooled post-ReLU features of
the last stage (gem: the pre-ReLU maps of every stage, 1 x 1 conv connectors), so the margin term,
which needs a teacher value below its negative margin, cannot fire; the teacher's MoCo uses our
augmentation, not MoCo v2's, and no shuffled BN; the teacher is in eval mode while distilling.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import torch
import torch.nn.functional as F
from scipy.stats import norm
from torch import nn
from .registry import MethodContext

__all__ = ["distillation_loss", "gaussian_margin", "DVPModel", "DVPLoss", "build"]


def distillation_loss(source: torch.Tensor, target: torch.Tensor, margin: torch.Tensor) -> torch.Tensor:
    """Heo et al.'s partial L2, summed: ``(s−m)²`` where s > m ≥ t; ``(s−t)²`` where s > t, m < t ≤ 0;
    ``(s−t)²`` where t > 0; 0 elsewhere."""
    loss = ((source - margin) ** 2 * ((source > margin) & (target <= margin)).to(source.dtype)
            + (source - target) ** 2 * ((source > target) & (target > margin) & (target <= 0)).to(source.dtype)
            + (source - target) ** 2 * (target > 0).to(source.dtype))
    return loss.abs().sum()


def gaussian_margin(mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    """``E[x | x < 0]`` for x ~ N(mean, std²): ``mean − std φ(mean/std) / Φ(−mean/std)``; −3 std
    where ``Φ(−mean/std) ≤ 0.001`` (as in the reference)."""
    mean, std = np.asarray(mean, float), np.maximum(np.abs(np.asarray(std, float)), 1e-12)
    z = mean / std
    tail = norm.cdf(-z)
    with np.errstate(divide="ignore", invalid="ignore"):
        m = mean - std * np.exp(-z ** 2 / 2) / math.sqrt(2 * math.pi) / tail
    return np.where(tail > 0.001, m, -3 * std)


class DVPModel(nn.Module):
    """Student backbone + the connector (linear + BN) that maps its features to the teacher's."""

    def __init__(self, base: nn.Module) -> None:
        super().__init__()
        self.base = base
        self.in_channels, self.num_classes, self.feature_dim = base.in_channels, base.num_classes, base.feature_dim
        self.classifier = base.classifier
        d = base.feature_dim
        self.connector = nn.Sequential(nn.Linear(d, d, bias=False), nn.BatchNorm1d(d))
        self.last: tuple[torch.Tensor, torch.Tensor] | None = None

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.base.features(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.base.features(x)
        self.last = (x, self.connector(f)) if (self.training and torch.is_grad_enabled()) else None
        return self.classifier(f)


class DVPLoss(nn.Module):
    """Holds the teacher; pre-trains it in :meth:`before_fit`; ``CE + λ · distillation`` per batch."""

    def __init__(self, model: DVPModel, teacher: nn.Module, *, weight: float, margin: float = 0.6,
                 temperature: float = 0.07, momentum: float = 0.999, queue: int = 4096, dim: int = 128,
                 pretrain_epochs: int | None = None, pretrain_batch_size: int = 64,
                 ce_only_epochs: int | None = 4, student_init: str = "teacher") -> None:
        super().__init__()
        self._model = [model]
        self.teacher = teacher
        d = teacher.feature_dim
        self.proj = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, dim))
        self.weight, self.margin, self.T, self.m = float(weight), float(margin), float(temperature), float(momentum)
        self.queue_size, self.dim = int(queue), int(dim)
        self.pretrain_epochs = pretrain_epochs
        self.pretrain_batch_size = int(pretrain_batch_size)
        self.register_buffer("feature_margin", torch.zeros(d))
        self._epoch, self._start = 0, 0
        self.ce_only_epochs, self.student_init = ce_only_epochs, student_init
        self.pretrain_history: list[float] = []

    def set_epoch(self, epoch: int) -> None:
        self._epoch = epoch

    def contrastive_logits(self, q: torch.Tensor, k: torch.Tensor, queue: torch.Tensor) -> torch.Tensor:
        """``[q·k − margin, q·queue] / T`` for normalised q, k (N, D) and queue (K, D); target 0."""
        pos = (q * k).sum(1, keepdim=True) - self.margin
        return torch.cat([pos, q @ queue.T], 1) / self.T

    def before_fit(self, trainer, images: np.ndarray, labels: np.ndarray) -> None:
        """Stage 1: MoCo pre-training of the teacher on ``images`` (labels unused), then its margins."""
        cfg, dev = trainer.cfg, trainer.device
        epochs = self.pretrain_epochs or cfg.epochs
        enc_q, proj_q = self.teacher, self.proj
        enc_k, proj_k = copy.deepcopy(enc_q), copy.deepcopy(proj_q)
        for p in list(enc_k.parameters()) + list(proj_k.parameters()):
            p.requires_grad_(False)
        params = list(enc_q.parameters()) + list(proj_q.parameters())
        opt = torch.optim.SGD(params, lr=cfg.lr, momentum=0.9, weight_decay=cfg.weight_decay)
        gen = torch.Generator().manual_seed(cfg.seed + 101)
        rng = np.random.default_rng(cfg.seed + 101)
        queue = F.normalize(torch.randn(self.queue_size, self.dim, generator=gen), dim=1).to(dev)
        ptr, n = 0, len(images)
        bs = min(self.pretrain_batch_size, n)
        steps = epochs * max(1, n // bs)
        step = 0
        for part in (enc_q, proj_q, enc_k, proj_k):
            part.train()
        for _ in range(epochs):
            order = rng.permutation(n)
            tot = 0.0
            for s in range(0, n - bs + 1, bs):
                idx = order[s:s + bs]
                if len(idx) < 2:
                    continue
                for g in opt.param_groups:
                    g["lr"] = cfg.lr * 0.5 * (1 + math.cos(math.pi * step / steps))
                xq, xk = trainer.batch(images, idx, gen), trainer.batch(images, idx, gen)
                q = F.normalize(proj_q(enc_q.features(xq)), dim=1)
                with torch.no_grad():
                    for pk, pq in zip(list(enc_k.parameters()) + list(proj_k.parameters()), params):
                        pk.mul_(self.m).add_(pq.detach(), alpha=1 - self.m)
                    k = F.normalize(proj_k(enc_k.features(xk)), dim=1)
                logits = self.contrastive_logits(q, k, queue)
                loss = F.cross_entropy(logits, torch.zeros(len(idx), dtype=torch.long, device=dev))
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                with torch.no_grad():
                    take = min(len(k), self.queue_size)
                    rows = (torch.arange(take, device=dev) + ptr) % self.queue_size
                    queue[rows] = k[:take]
                    ptr = (ptr + take) % self.queue_size
                tot += float(loss.detach()) * len(idx)
                step += 1
            self.pretrain_history.append(tot / n)
        for p in self.teacher.parameters():
            p.requires_grad_(False)
        self.teacher.eval()
        with torch.no_grad():
            feats = torch.cat([self.teacher.features(trainer.batch(images, np.arange(s, min(s + 256, n))))
                               for s in range(0, n, 256)]).double().cpu().numpy()
        margin = gaussian_margin(feats.mean(0), feats.std(0))
        self.feature_margin.copy_(torch.as_tensor(margin, dtype=torch.float32))
        self._start = round(0.01 * cfg.epochs) if self.ce_only_epochs is None else int(self.ce_only_epochs)
        if self.student_init == "teacher":  # gem loads encoder_q into the teacher and the student
            self._model[0].base.load_state_dict(self.teacher.state_dict())

    def forward(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        ce = F.cross_entropy(logits, y)
        last = self._model[0].last
        if last is None or last[0].shape[0] != y.shape[0] or self._epoch < self._start or logits.device.type == "meta":
            return ce
        x, s = last
        self.teacher.eval()
        with torch.no_grad():
            t = self.teacher.features(x)
        return ce + self.weight * distillation_loss(s, t, self.feature_margin) / y.shape[0]


def build(base: nn.Module, config: dict, ctx: MethodContext) -> tuple[nn.Module, DVPLoss]:
    teacher = copy.deepcopy(base)
    for m in teacher.modules():  # the teacher starts from its own random weights
        if hasattr(m, "reset_parameters") and m is not teacher:
            m.reset_parameters()
    model = DVPModel(base)
    ce_only = config.get("ce_only_epochs", 4)
    return model, DVPLoss(model, teacher, weight=float(config["distill_weight"]),
                          ce_only_epochs=None if ce_only is None else int(ce_only),
                          student_init=str(config.get("student_init", "teacher")))
