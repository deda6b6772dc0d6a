"""The long-tail baselines: ``ce``, ``focal``, ``ldam_drw``, ``balanced_softmax``, ``logit_adjust``, ``crt``.

============== ===========================================================================
``ce``          plain cross-entropy (the baseline every survey table starts from)
``focal``       focal loss, ``gamma`` (cpu 2, Lin et al.; reference 1 as the LDAM-DRW/IB scripts)
``ldam_drw``    LDAM loss with a cosine classifier, margins ∝ n_c^(−1/4) (max ``max_margin`` 0.5),
                scale ``scale`` 30, deferred re-weighting (β = ``beta`` 0.9999) from epoch
                ``drw_epoch`` (default: 80% of the epochs, as 160 of 200 in Cao et al.)
``balanced_softmax`` cross-entropy on logits + log prior (Ren et al.)
``logit_adjust`` cross-entropy training, then post-hoc ``z − tau · log π`` (``tau`` 1, Menon et al.)
``crt``         classifier re-training (Kang et al.): cross-entropy training, then the features are
                frozen and the linear classifier re-initialised and re-trained with a class-balanced
                (cpu: i.i.d.; reference: the class-aware cycle) sampler (:func:`retrain_classifier`)
============== ===========================================================================

Options: :mod:`.options`.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch
from torch import nn

from ..losses import BalancedSoftmaxLoss, FocalLoss, LDAMLoss, logit_adjust
from ..models import NormedLinear
from ..trainer import TrainResult
from .options import (BalancedSoftmaxOptions, CEOptions, CRTOptions, FocalOptions, LDAMOptions,
                      LogitAdjustOptions)
from .registry import MethodContext, predict, train

__all__ = ["ClassAwareSampler", "retrain_classifier"]

Out = tuple[np.ndarray, list[TrainResult]]


def run_ce(ctx: MethodContext, test: np.ndarray, opt: CEOptions) -> Out:
    res = train(ctx)
    return predict(ctx, test), [res]


def run_focal(ctx: MethodContext, test: np.ndarray, opt: FocalOptions) -> Out:
    res = train(ctx, FocalLoss(gamma=opt.gamma))
    return predict(ctx, test), [res]


def run_ldam(ctx: MethodContext, test: np.ndarray, opt: LDAMOptions) -> Out:
    with torch.random.fork_rng(devices=[]):  # seeded init of the cosine head; global RNG untouched
        torch.manual_seed(ctx.cfg.seed)
        ctx.model.classifier = NormedLinear(ctx.model.feature_dim, ctx.model.num_classes, init=ctx.head_init)
    loss = LDAMLoss(ctx.counts, max_margin=opt.max_margin, scale=opt.scale, drw_epoch=opt.drw_epoch, beta=opt.beta)
    res = train(ctx, loss)
    return predict(ctx, test) * np.float32(opt.scale), [res]


def run_bsm(ctx: MethodContext, test: np.ndarray, opt: BalancedSoftmaxOptions) -> Out:
    res = train(ctx, BalancedSoftmaxLoss(ctx.counts))
    return predict(ctx, test), [res]


def run_la(ctx: MethodContext, test: np.ndarray, opt: LogitAdjustOptions) -> Out:
    res = train(ctx)
    prior = ctx.counts / ctx.counts.sum()
    return logit_adjust(predict(ctx, test), prior, tau=opt.tau).astype(np.float32), [res]


class ClassAwareSampler:
    """The class-aware sampler of the cRT reference (classifier-balancing ``ClassAwareSampler``):
    classes are visited in shuffled cycles, each visit yields ``per_class`` images of that class from
    its own shuffled cycle. An epoch is ``epoch_length`` images when given (the reference's
    ``run_networks.py`` stops an epoch after ``int(N_train / batch_size)`` steps: pass that many
    full batches), else the sampler's own ``max_c n_c × C``. The cycles carry over epochs.
    Call ``sampler(labels, rng) -> indices`` (the :meth:`~..trainer.Trainer.fit` sampler protocol)."""

    name = "class_aware"

    def __init__(self, per_class: int = 4, epoch_length: int | None = None) -> None:
        self.per_class = int(per_class)
        self.epoch_length = None if epoch_length is None else int(epoch_length)
        self._state: tuple | None = None

    def __call__(self, labels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        classes = np.unique(labels)
        if self._state is None:
            pools = [[rng.permutation(np.flatnonzero(labels == c)), 0] for c in classes]
            self._state = ([rng.permutation(len(classes)), 0], pools)
        cls_cycle, pools = self._state
        length = (int(max(len(p[0]) for p in pools)) * len(classes) if self.epoch_length is None
                  else self.epoch_length)
        out = np.empty(length, dtype=np.int64)
        i = 0
        while i < length:
            if cls_cycle[1] == len(classes):
                cls_cycle[0], cls_cycle[1] = rng.permutation(len(classes)), 0
            pool = pools[int(cls_cycle[0][cls_cycle[1]])]
            cls_cycle[1] += 1
            for _ in range(self.per_class):
                if i == length:
                    break
                if pool[1] == len(pool[0]):
                    pool[0], pool[1] = rng.permutation(pool[0]), 0
                out[i] = pool[0][pool[1]]
                pool[1] += 1
                i += 1
        return out


def retrain_classifier(ctx: MethodContext, opt: CRTOptions) -> TrainResult:
    """cRT's second stage on the trained ``ctx.model``: re-initialise ``classifier`` (seed + 1) and
    train it alone on frozen features with the options' epochs, lr, weight decay, batch size,
    sampler, batch-norm mode and schedule."""
    head = ctx.model.classifier
    if isinstance(head, nn.Linear):
        devices = [head.weight.device] if head.weight.is_cuda else []
        with torch.random.fork_rng(devices=devices):  # seeded re-initialisation; global RNG untouched
            torch.manual_seed(ctx.cfg.seed + 1)
            head.reset_parameters()
    cfg2 = replace(ctx.cfg, epochs=opt.crt_epochs, lr=opt.crt_lr, warmup_epochs=0, weight_decay=opt.crt_weight_decay,
                   batch_size=opt.crt_batch_size, schedule=opt.crt_schedule, lr_milestones=(), lr_factors=(),
                   schedule_offset=1 if opt.crt_schedule == "cosine_epoch" else 0)
    sampler: object = "class_balanced"
    if opt.crt_sampler == "class_aware":
        n = len(ctx.train.labels)
        length = max(1, n // opt.crt_batch_size) * opt.crt_batch_size if opt.crt_epoch == "steps" else None
        sampler = ClassAwareSampler(opt.crt_per_class, epoch_length=length)
    return train(ctx, cfg=cfg2, sampler=sampler, trainable="classifier", frozen_mode=opt.crt_bn_mode)


def run_crt(ctx: MethodContext, test: np.ndarray, opt: CRTOptions) -> Out:
    first = train(ctx)
    second = retrain_classifier(ctx, opt)
    return predict(ctx, test), [first, second]
