"""Distilling Visual Priors (Zhao & Wen, ECCV-W 2020): contrastive teacher, then distillation,
as gem runs it (github.com/lorenzobrigato/gem, ``pipelines/distill_visual_priors/``).

Stage 1 (:meth:`DVPLoss.before_fit`): a copy of the backbone is pre-trained without labels with
MoCo v2 and the margin of gem's ``MoCo_smallbank``: queries and keys are two views of the batch
(:class:`~.moco.MoCoViews`: the dataset's crop/shift, MoCo v2's colour jitter p 0.8, grayscale
p 0.2, Gaussian blur p 0.5, the dataset's flips), a momentum (m = 0.999) key encoder and a queue
of K = 4096 keys, 2-layer MLP projection to 128-d, logits ``[q·k − margin, q·queue] / T`` with
margin 0.6, T = 0.07, cross-entropy on the positive; every BatchNorm2d of both encoders is a
:class:`~.moco.SplitBatchNorm2d` with 8 splits and the key batch is shuffled before the key
encoder and unshuffled after (gem's single-GPU stand-in for shuffled BN); SGD momentum 0.9,
cosine per step, drop-last batches. Epochs, learning rate and weight decay are the run's unless
the options set them (gem runs the pre-training through the same script and search).
Stage 2 (the trainer's loop): the student (initialised from the pre-trained encoder, as the
teacher) is trained with ``CE + λ · Σ_i d(connector_i(s_i), t_i, m_i) / 2^(S−1−i) / N`` where
``s_i``/``t_i`` are the pre-ReLU maps at the end of stage i (:mod:`.dvp_stages`), connectors are
1x1 conv + BN, :func:`distillation_loss` is Heo et al.'s partial L2 and the margin ``m_i`` per
channel is ``E[x | x < 0]`` for x ~ N(β, γ²) of the BN before that ReLU (:func:`bn_margin`). gem
computes these margins when it builds the distiller, before it loads the pre-trained weights, so
from freshly initialised BNs (γ = 1, β = 0: every margin is −√(2/π)); ``margin_source:
teacher_bn`` takes the pre-trained teacher's BNs instead (Heo et al.). The teacher runs in train
mode (batch statistics), as in gem. The first 4 epochs are cross-entropy only.
``--recipe vistabench`` keeps our earlier variant: pooled post-ReLU features with a linear + BN
connector and margins from a Gaussian fit of the teacher's features (the margin term cannot fire
there), the teacher in eval mode, the dataset's augmentation only, plain BN.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from scipy.stats import norm
from torch import nn

from ...errors import InputError
from ..recipe import Recipe, recipe_values, recipe_with
from ..tensors import to_float_nchw
from .common import fresh_copy
from .dvp_stages import bn_before_relu, forward_stages, stage_channels, stage_layout
from .moco import ColourAugmentation, MoCoViews, enqueue, use_split_batchnorm
from .registry import MethodContext

__all__ = ["distillation_loss", "gaussian_margin", "bn_margin", "feature_connector", "MoCoSettings", "DVPModel",
           "DVPLoss", "build"]


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


def bn_margin(bn: nn.BatchNorm2d) -> torch.Tensor:
    """gem's ``get_margin_from_BN``: :func:`gaussian_margin` of mean β, std |γ|, shaped (1, C, 1, 1)."""
    m = gaussian_margin(bn.bias.detach().double().cpu().numpy(), bn.weight.detach().double().cpu().numpy())
    return torch.as_tensor(m, dtype=torch.float32).view(1, -1, 1, 1)


def feature_connector(t_channels: int, s_channels: int) -> nn.Sequential:
    """gem's ``build_feature_connector``: 1x1 conv (no bias, N(0, 2/t_channels)) + BN (γ 1, β 0)."""
    conv = nn.Conv2d(s_channels, t_channels, kernel_size=1, bias=False)
    nn.init.normal_(conv.weight, 0.0, math.sqrt(2.0 / t_channels))
    bn = nn.BatchNorm2d(t_channels)
    nn.init.ones_(bn.weight)
    nn.init.zeros_(bn.bias)
    return nn.Sequential(conv, bn)


#: the options of :class:`~.options.DvpOptions` that make up the pre-training stage's MoCo (declared,
#: checked and given gem's defaults there)
MOCO_OPTIONS = ("moco_queue", "moco_momentum", "moco_temperature", "moco_margin", "moco_dim", "moco_splits")
#: DvpOptions' pre-training options -> the recipe field each changes for stage 1 (None: the run's value)
PRETRAIN_OPTIONS = {"pretrain_epochs": "epochs", "pretrain_lr": "lr", "pretrain_weight_decay": "weight_decay",
                    "pretrain_batch_size": "batch_size"}
#: stage 1's optimiser and schedule, whatever the run's (gem's MoCo script: SGD momentum 0.9, no
#: Nesterov, one cosine per step from the lr to 0, no warm-up)
PRETRAIN_RULES = {"momentum": 0.9, "nesterov": False, "schedule": "cosine", "warmup_epochs": 0,
                  "lr_milestones": (), "lr_factors": ()}


@dataclass(frozen=True)
class MoCoSettings:
    """Stage 1's values: the MoCo options (:data:`MOCO_OPTIONS`, under :class:`~.options.DvpOptions`'
    names), ``changes`` to the run's recipe (the pre-training options given, by recipe field:
    :data:`PRETRAIN_OPTIONS`; a field absent keeps the run's value) and the views' colour augmentation."""

    moco_queue: int
    moco_momentum: float
    moco_temperature: float
    moco_margin: float
    moco_dim: int
    moco_splits: int
    changes: dict[str, Any]
    colour: ColourAugmentation

    @classmethod
    def from_params(cls, params: dict) -> "MoCoSettings":
        """From one trial's method parameters (every DvpOptions option present, as
        :func:`~.build.build_method` gives them)."""
        colour = ColourAugmentation(jitter_prob=float(params["jitter_prob"]),
                                    grayscale_prob=float(params["grayscale_prob"]), blur_prob=float(params["blur_prob"]))
        changes = {field: params[opt] for opt, field in PRETRAIN_OPTIONS.items() if params[opt] is not None}
        return cls(**{k: params[k] for k in MOCO_OPTIONS}, changes=changes, colour=colour)

    def recipe(self, run: Recipe) -> Recipe:
        """Stage 1's recipe: the ``run``'s with :data:`PRETRAIN_RULES` and this stage's ``changes``
        (each checked by the recipe's declaration: :func:`~..recipe.recipe_with`)."""
        return recipe_with(recipe_values(run), {**PRETRAIN_RULES, **self.changes})


class DVPModel(nn.Module):
    """Student backbone + the connectors that map its features to the teacher's: per stage (1x1 conv +
    BN on the pre-ReLU maps, ``stages=True``) or one linear + BN on the pooled features."""

    def __init__(self, base: nn.Module, *, stages: bool = True) -> None:
        super().__init__()
        self.base = base
        self.in_channels, self.num_classes, self.feature_dim = base.in_channels, base.num_classes, base.feature_dim
        self.classifier = base.classifier
        self.stages = bool(stages)
        if self.stages:
            chans = stage_channels(base)  # teacher and student share the architecture
            self.connectors = nn.ModuleList([feature_connector(c, c) for c in chans])
        else:
            d = base.feature_dim
            self.connectors = nn.ModuleList([nn.Sequential(nn.Linear(d, d, bias=False), nn.BatchNorm1d(d))])
        self.last: tuple[torch.Tensor, list[torch.Tensor]] | None = None

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.base.features(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not (self.training and torch.is_grad_enabled()):
            self.last = None
            return self.classifier(self.base.features(x))
        if self.stages:
            maps, f = forward_stages(self.base, x)
        else:
            f = self.base.features(x)
            maps = [f]
        self.last = (x, [conn(m) for conn, m in zip(self.connectors, maps)])
        return self.classifier(f)


class DVPLoss(nn.Module):
    """Holds the teacher; pre-trains it in :meth:`before_fit`; ``CE + λ · distillation`` per batch."""

    def __init__(self, model: DVPModel, teacher: nn.Module, *, weight: float, moco: MoCoSettings,
                 ce_only_epochs: int | None = 4, student_init: str = "teacher", margin_source: str = "initial_bn",
                 teacher_mode: str = "train") -> None:
        super().__init__()
        self._model = [model]
        self.teacher = teacher
        self.moco = moco
        d = teacher.feature_dim
        self.proj = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, moco.moco_dim))
        self.weight = float(weight)
        self.stages, self.margin_source, self.teacher_mode = model.stages, margin_source, teacher_mode
        if self.stages:
            # gem builds the distiller, and so its margins, before loading the pre-trained weights
            margins = [bn_margin(bn) for bn in bn_before_relu(teacher)] if margin_source == "initial_bn" else [
                torch.zeros(1, c, 1, 1) for c in stage_channels(teacher)]
        else:
            margins = [torch.zeros(d)]
        for i, m in enumerate(margins):
            self.register_buffer(f"margin{i}", m)
        self.num_maps = len(margins)
        self._epoch, self._start = 0, 0
        self.ce_only_epochs, self.student_init = ce_only_epochs, student_init
        self.pretrain_history: list[float] = []

    @property
    def margins(self) -> list[torch.Tensor]:
        return [getattr(self, f"margin{i}") for i in range(self.num_maps)]

    def set_epoch(self, epoch: int) -> None:
        self._epoch = epoch

    def contrastive_logits(self, q: torch.Tensor, k: torch.Tensor, queue: torch.Tensor) -> torch.Tensor:
        """``[q·k − margin, q·queue] / T`` for normalised q, k (N, D) and queue (K, D); target 0."""
        pos = (q * k).sum(1, keepdim=True) - self.moco.moco_margin
        return torch.cat([pos, q @ queue.T], 1) / self.moco.moco_temperature

    def pretrain_batch_size(self, n: int) -> int:
        """The pre-training batch for ``n`` images: the stage's (``pretrain_batch_size``), at most n, a
        multiple of the BN splits."""
        splits = self.moco.moco_splits
        bs = min(self.moco.changes["batch_size"], n)
        if splits > 1:
            bs -= bs % splits
            if bs < splits:
                raise InputError(f"method_options.moco_splits: the {n} training images cannot fill one "
                                 f"pre-training batch of {splits} BN splits")
        return bs

    def before_fit(self, trainer, images: np.ndarray, labels: np.ndarray) -> None:
        """Stage 1: MoCo pre-training of the teacher on ``images`` (labels unused), then its margins."""
        cfg, dev, mo = trainer.cfg, trainer.device, self.moco
        stage = mo.recipe(cfg.recipe)
        epochs, lr = stage.epochs, stage.lr
        enc_q, proj_q = use_split_batchnorm(copy.deepcopy(self.teacher), mo.moco_splits), self.proj
        enc_k, proj_k = copy.deepcopy(enc_q), copy.deepcopy(proj_q)
        for p in list(enc_k.parameters()) + list(proj_k.parameters()):
            p.requires_grad_(False)
        params = list(enc_q.parameters()) + list(proj_q.parameters())
        opt = torch.optim.SGD(params, lr=lr, momentum=stage.momentum, nesterov=stage.nesterov,
                              weight_decay=stage.weight_decay)
        gen = torch.Generator().manual_seed(cfg.seed + 101)
        shuffle_gen = torch.Generator().manual_seed(cfg.seed + 103)
        rng = np.random.default_rng(cfg.seed + 101)
        queue = F.normalize(torch.randn(mo.moco_queue, mo.moco_dim, generator=gen), dim=1).to(dev)
        views = MoCoViews(cfg.augment, mo.colour, padding=cfg.crop_padding) if mo.colour.active else None

        def view(idx: np.ndarray) -> torch.Tensor:
            if views is None:  # the dataset's augmentation only (our earlier variant)
                return trainer.batch(images, idx, gen)
            x = views(to_float_nchw(images[idx]), gen)
            return trainer.normaliser.apply(x.to(dev, non_blocking=True))

        ptr, n = 0, len(images)
        bs = self.pretrain_batch_size(n)  # the stage recipe's batch size, at most n, split-aligned
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
                    g["lr"] = lr * 0.5 * (1 + math.cos(math.pi * step / steps))
                xq, xk = view(idx), view(idx)
                q = F.normalize(proj_q(enc_q.features(xq)), dim=1)
                with torch.no_grad():
                    for pk, pq in zip(list(enc_k.parameters()) + list(proj_k.parameters()), params):
                        pk.mul_(mo.moco_momentum).add_(pq.detach(), alpha=1 - mo.moco_momentum)
                    if mo.moco_splits > 1:  # shuffled BN: the keys meet other splits than their queries
                        perm = torch.randperm(len(idx), generator=shuffle_gen).to(dev)
                        k = F.normalize(proj_k(enc_k.features(xk[perm])), dim=1)[torch.argsort(perm)]
                    else:
                        k = F.normalize(proj_k(enc_k.features(xk)), dim=1)
                logits = self.contrastive_logits(q, k, queue)
                loss = F.cross_entropy(logits, torch.zeros(len(idx), dtype=torch.long, device=dev))
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                ptr = enqueue(queue, ptr, k)
                tot += float(loss.detach()) * len(idx)
                step += 1
            self.pretrain_history.append(tot / n)
        self.teacher.load_state_dict(enc_q.state_dict())
        for p in self.teacher.parameters():
            p.requires_grad_(False)
        if self.stages and self.margin_source == "teacher_bn":
            for i, bn in enumerate(bn_before_relu(self.teacher)):
                getattr(self, f"margin{i}").copy_(bn_margin(bn))
        elif not self.stages:  # a Gaussian fit of the teacher's pooled features (our earlier variant)
            self.teacher.eval()
            with torch.no_grad():
                feats = torch.cat([self.teacher.features(trainer.batch(images, np.arange(s, min(s + 256, n))))
                                   for s in range(0, n, 256)]).double().cpu().numpy()
            self.margin0.copy_(torch.as_tensor(gaussian_margin(feats.mean(0), feats.std(0)), dtype=torch.float32))
        self._start = round(0.01 * cfg.epochs) if self.ce_only_epochs is None else int(self.ce_only_epochs)
        if self.student_init == "teacher":  # gem loads encoder_q into the teacher and the student
            self._model[0].base.load_state_dict(self.teacher.state_dict())

    def teacher_maps(self, x: torch.Tensor) -> list[torch.Tensor]:
        """The teacher's maps for ``x`` (no gradient), in the mode the options give (gem: train)."""
        self.teacher.train(self.teacher_mode == "train")
        with torch.no_grad():
            return forward_stages(self.teacher, x)[0] if self.stages else [self.teacher.features(x)]

    def forward(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        ce = F.cross_entropy(logits, y)
        last = self._model[0].last
        if last is None or last[0].shape[0] != y.shape[0] or self._epoch < self._start or logits.device.type == "meta":
            return ce
        x, s = last
        t = self.teacher_maps(x)
        total = len(s)
        dist = sum(distillation_loss(si, ti, mi) / 2 ** (total - i - 1)
                   for i, (si, ti, mi) in enumerate(zip(s, t, self.margins)))
        return ce + self.weight * dist / y.shape[0]


def build(base: nn.Module, config: dict, ctx: MethodContext) -> tuple[nn.Module, DVPLoss]:
    stages = str(config.get("distill_features", "stages")) == "stages"
    if stages:
        stage_layout(base)  # InputError for a backbone without stages (ViT)
    # the teacher starts from its own random weights: gem builds its encoder with create_model (the
    # architecture's init); teacher_init="default": PyTorch's default init, our earlier variant
    teacher = fresh_copy(base, str(config.get("teacher_init", "architecture")))
    model = DVPModel(base, stages=stages)
    ce_only = config.get("ce_only_epochs", 4)
    return model, DVPLoss(model, teacher, weight=float(config["distill_weight"]), moco=MoCoSettings.from_params(config),
                          ce_only_epochs=None if ce_only is None else int(ce_only),
                          student_init=str(config.get("student_init", "teacher")),
                          margin_source=str(config.get("margin_source", "initial_bn")),
                          teacher_mode=str(config.get("teacher_mode", "train")))
