"""Networks and a training loop for the multi-branch long-tail methods (BBN, RIDE, TADE, TDE, IB).

Every network splits a :class:`~.models.Backbone` into a shared trunk and per-branch/per-expert
private parts (:func:`split_backbone`). On ``resnet32`` this is the references' split: RIDE/SADE
experts own stages 2–3 at reduced widths 24/48 (``reduce_dimension``), BBN's branches own one
copy each of the last residual block. Other backbones share all of ``features`` and give each
branch/expert a *branch block* (``Linear(D, D) → BatchNorm1d → ReLU``) — see ``docs/fidelity.md``.

:func:`fit_steps` is :class:`~.trainer.Trainer`'s loop (SGD, per-step cosine learning rate,
augmentation, FLOP counting, same :class:`~.trainer.TrainResult`) with a method-defined step, and
an optional second sampler drawn alongside the uniform one (BBN's reversed sampler).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from .. import progress
from ..errors import InputError
from .losses import tde_counterfactual
from .models import Backbone, CifarResNet, NormedLinear, _CifarBlock, _kaiming_init
from .tensors import Normaliser
from .trainer import (
    TrainConfig,
    Trainer,
    TrainingDiverged,
    TrainResult,
    _peak_rss_bytes,
    epoch_order,
)

__all__ = ["BBNNet", "BranchBlock", "CausalNormNet", "ExpertNet", "fit_steps", "reversed_probabilities",
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


def split_backbone(backbone: Backbone, kind: Literal["experts", "last_block"]
                   ) -> tuple[nn.Module, Callable[[], nn.Module], int]:
    """``(trunk, make_private, dim)``: the shared trunk, a factory of one private part (trunk output
    -> (N, dim) features, freshly initialised) and the private feature size.

    ``resnet32`` (:class:`~.models.CifarResNet`, n blocks per stage): ``"experts"`` shares the stem
    and stage 1 and makes stages 2–3 with widths 24/48 (RIDE/SADE ``reduce_dimension``);
    ``"last_block"`` shares everything but the last block and makes a 64-channel block (BBN's
    ``cb_block``/``rb_block``). Other backbones: trunk = ``features``, private = :class:`BranchBlock`.
    """
    if isinstance(backbone, CifarResNet):
        n = len(backbone.layers) // 3
        stem = [backbone.conv1, backbone.bn1, nn.ReLU()]
        if kind == "experts":
            def make() -> nn.Module:
                blocks, cin = [], 16
                for cout in (24, 48):
                    for b in range(n):
                        blocks.append(_CifarBlock(cin, cout, 2 if b == 0 else 1))
                        cin = cout
                m = nn.Sequential(*blocks, _PoolFlatten())
                _kaiming_init(m)
                return m
            return nn.Sequential(*stem, *backbone.layers[:n]), make, 48

        def make_block() -> nn.Module:
            m = nn.Sequential(_CifarBlock(64, 64, 1), _PoolFlatten())
            _kaiming_init(m)
            return m
        return nn.Sequential(*stem, *backbone.layers[:-1]), make_block, 64
    D = backbone.feature_dim
    return _Features(backbone), lambda: BranchBlock(D), D


class BBNNet(nn.Module):
    """Bilateral-branch network: conventional and re-balancing branches, one classifier on the
    concatenation ``[f_c, f_r]`` (2D -> C). ``forward`` (inference) = classifier([f_c, f_r]) — the
    reference's equal-weight test mode."""

    def __init__(self, backbone: Backbone) -> None:
        super().__init__()
        self.trunk, make, D = split_backbone(backbone, "last_block")
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

    def __init__(self, backbone: Backbone, num_experts: int, *, scale: float = 30.0) -> None:
        super().__init__()
        self.trunk, make, D = split_backbone(backbone, "experts")
        C = backbone.num_classes
        self.blocks = nn.ModuleList(make() for _ in range(num_experts))
        self.heads = nn.ModuleList(NormedLinear(D, C) for _ in range(num_experts))
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


# step(x, y, x2, y2, epoch) -> (loss, logits for the training accuracy)
Step = Callable[[torch.Tensor, torch.Tensor, "torch.Tensor | None", "torch.Tensor | None", int],
                "tuple[torch.Tensor, torch.Tensor]"]


def fit_steps(net: nn.Module, images: np.ndarray, labels: np.ndarray, cfg: TrainConfig, step: Step, *,
              second_sampler: np.ndarray | None = None, sampler: str = "uniform",
              params: list[nn.Parameter] | None = None,
              on_epoch: Callable[[int], None] | None = None) -> tuple[Trainer, TrainResult]:
    """Train ``net`` with a method-defined ``step``; returns the :class:`Trainer` (for prediction,
    with the training normalisation) and the :class:`TrainResult`.

    ``second_sampler`` (per-sample probabilities, shape (N,)) draws a second batch of the same size
    for every batch (``x2, y2`` in ``step``; None otherwise). ``params`` restricts the optimised
    parameters (default all). ``on_epoch(epoch)`` runs before every epoch (0-based).
    """
    tr = Trainer(net, cfg)
    tr.normaliser = Normaliser.fit(images)
    labels = np.asarray(labels, dtype=np.int64)
    n = len(labels)
    if cfg.batch_size > n:
        raise InputError(f"batch_size: expected at most the number of training images ({n}), got {cfg.batch_size}")
    params = list(net.parameters()) if params is None else params
    opt = torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay,
                          nesterov=cfg.nesterov and cfg.momentum > 0)
    rng = np.random.default_rng(cfg.seed)
    rng2 = np.random.default_rng(cfg.seed + 7)
    aug = torch.Generator().manual_seed(cfg.seed + 1) if cfg.augment else None
    steps_per_epoch = len(tr._batches(np.arange(n), cfg.batch_size))
    total = cfg.epochs * steps_per_epoch
    dev = tr.device
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    flop_cache: dict[int, int] = {}
    history: list[dict] = []
    flops = step_i = seen = 0
    train_seconds = 0.0
    t_start = time.perf_counter()
    with tr._threads(), torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else []):
        torch.manual_seed(cfg.seed)
        for epoch in progress.track(range(cfg.epochs), total=cfg.epochs, description="training"):
            if on_epoch is not None:
                on_epoch(epoch)
            net.train()
            batches = tr._batches(epoch_order(labels, rng, sampler), cfg.batch_size)
            tot = torch.zeros((), device=dev)
            correct = torch.zeros((), dtype=torch.long, device=dev)
            t0 = time.perf_counter()
            lr = cfg.lr
            for b in batches:
                lr = tr._lr_at(step_i, total, steps_per_epoch)
                for g in opt.param_groups:
                    g["lr"] = lr
                x = tr._batch(images, b, aug)
                y = torch.from_numpy(labels[b]).to(dev)
                x2 = y2 = None
                if second_sampler is not None:
                    b2 = rng2.choice(n, size=len(b), replace=True, p=second_sampler)
                    x2, y2 = tr._batch(images, b2, aug), torch.from_numpy(labels[b2]).to(dev)
                opt.zero_grad(set_to_none=True)
                if cfg.count_flops and len(b) not in flop_cache:
                    with FlopCounterMode(display=False) as counter:
                        loss, logits = step(x, y, x2, y2, epoch)
                        loss.backward()
                    flop_cache[len(b)] = int(counter.get_total_flops())
                else:
                    loss, logits = step(x, y, x2, y2, epoch)
                    loss.backward()
                opt.step()
                flops += flop_cache.get(len(b), 0)
                tot += loss.detach() * len(b)
                correct += (logits.detach().argmax(1) == y).sum()
                step_i += 1
                seen += len(b)
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            train_seconds += time.perf_counter() - t0
            m_loss = float(tot) / n
            if not math.isfinite(m_loss):
                raise TrainingDiverged(f"training loss became {m_loss} at epoch {epoch + 1} (lr={cfg.lr}); "
                                       "lower the learning rate")
            history.append({"epoch": epoch + 1, "loss": m_loss, "train_acc": int(correct) / n,
                            "val_acc": float("nan"), "lr": lr})
    if dev.type == "cuda":
        peak, kind = int(torch.cuda.max_memory_allocated(dev)), "cuda_max_allocated"
    else:
        peak, kind = _peak_rss_bytes(), "process_max_rss"
    conf = asdict(cfg)
    conf.update(sampler=sampler if second_sampler is None else f"{sampler}+second", trainable="custom")
    return tr, TrainResult(
        history=history, flops=int(flops), eval_flops=0, steps=step_i, seconds=time.perf_counter() - t_start,
        train_seconds=train_seconds, images_per_second=seen / train_seconds if train_seconds > 0 else float("nan"),
        peak_memory_bytes=peak, peak_memory_kind=kind, stopped_early=False, device=str(dev), config=conf,
        normaliser=tr.normaliser.to_dict())
