"""Long-tailed reference methods behind one call: :func:`fit_predict`.

>>> from vistabench.data import Dataset
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> train = Dataset(rng.integers(0, 256, (60, 8, 8, 1), dtype=np.uint8),
...                 np.r_[np.zeros(40, int), np.ones(15, int), np.full(5, 2)], ["a", "b", "c"])
>>> run = fit_predict("balanced_softmax", train, train.images[:7], epochs=1, batch_size=16)
>>> run.logits.shape, run.method, run.flops > 0
((7, 3), 'balanced_softmax', True)

Registry ``lt_methods``:

============== ===========================================================================
``ce``          plain cross-entropy (the baseline every survey table starts from)
``focal``       focal loss, ``gamma`` (default 2, Lin et al.)
``ldam_drw``    LDAM loss with a cosine classifier, margins ∝ n_c^(−1/4) (max ``max_margin`` 0.5),
                scale ``scale`` 30, deferred re-weighting (β = ``beta`` 0.9999) from epoch
                ``drw_epoch`` (default: 80% of the epochs, as 160 of 200 in Cao et al.)
``balanced_softmax`` cross-entropy on logits + log prior (Ren et al.)
``logit_adjust`` cross-entropy training, then post-hoc ``z − tau · log π`` (``tau`` 1, Menon et al.)
``crt``         classifier re-training (Kang et al.): cross-entropy training, then the features are
                frozen and the linear classifier re-initialised and re-trained with class-balanced
                sampling for ``crt_epochs`` epochs (default max(1, epochs // 5))
============== ===========================================================================

and the survey's further methods ``bbn``, ``tde``, ``ride``, ``ib``, ``tade``, ``lade``, ``gcl``
(:mod:`vistabench.learners.lt_survey`).

Method options go in ``options`` (unknown keys are an error).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Callable

import numpy as np
import torch
from torch import nn

from ..data.dataset import Dataset
from ..errors import InputError
from . import lt_survey  # noqa: F401  (registers bbn, tde, ride, ib, tade, lade, gcl)
from .losses import (BalancedSoftmaxLoss, FocalLoss, LDAMLoss, check_class_counts, logit_adjust)
from .lt_registry import _Context, _predict, _register, _train, lt_methods
from .models import NormedLinear, build_model
from .tensors import check_images
from .trainer import TrainConfig, TrainResult, resolve_device

__all__ = ["LTRunResult", "fit_predict", "lt_methods"]


@dataclass
class LTRunResult:
    """Outcome of one long-tailed method run.

    Attributes
    ----------
    method : str
    logits : ndarray of float32, shape (N, C)
        Test scores the method predicts with (post-hoc adjusted for ``logit_adjust``; cosine logits
        times the LDAM scale for ``ldam_drw``). argmax = predicted class.
    train_results : list of TrainResult
        One per training stage (two for ``crt``).
    flops : int
        Training FLOPs (forward + backward) of all stages.
    seconds : float
        Wall time of training and prediction.
    settings : dict
        Everything that produced the run: method, model, epochs, seed, lr, batch_size, ... and the
        method's options with their defaults filled in.
    test_time : callable or None
        For methods that adapt to the test distribution without labels (``tade``):
        ``test_time(indices) -> logits`` of shape (len(indices), C) for the test set made of those
        rows of ``test_images``, computed from those images alone. None for the others, whose
        ``logits`` serve every test set.
    """

    method: str
    logits: np.ndarray
    train_results: list[TrainResult]
    flops: int
    seconds: float
    settings: dict = field(default_factory=dict)
    test_time: Callable[[np.ndarray], np.ndarray] | None = None

    @property
    def train_result(self) -> TrainResult:
        """The (last) stage's training result."""
        return self.train_results[-1]

    def to_dict(self, *, include_logits: bool = False) -> dict:
        d = {"method": self.method, "flops": self.flops, "seconds": self.seconds, "settings": self.settings,
             "train_results": [r.to_dict() for r in self.train_results]}
        if include_logits:
            d["logits"] = self.logits.tolist()
        return d


@_register("ce")
def _ce(ctx: _Context, test: np.ndarray, opt: dict) -> tuple[np.ndarray, list[TrainResult]]:
    res = _train(ctx)
    return _predict(ctx, test), [res]


@_register("focal", gamma=2.0)
def _focal(ctx: _Context, test: np.ndarray, opt: dict) -> tuple[np.ndarray, list[TrainResult]]:
    res = _train(ctx, FocalLoss(gamma=opt["gamma"]))
    return _predict(ctx, test), [res]


@_register("ldam_drw", max_margin=0.5, scale=30.0, beta=0.9999, drw_epoch=None)
def _ldam(ctx: _Context, test: np.ndarray, opt: dict) -> tuple[np.ndarray, list[TrainResult]]:
    drw = opt["drw_epoch"]
    if drw is None:
        drw = int(0.8 * ctx.cfg.epochs)
        opt["drw_epoch"] = drw
    with torch.random.fork_rng(devices=[]):  # seeded init of the cosine head; global RNG untouched
        torch.manual_seed(ctx.cfg.seed)
        ctx.model.classifier = NormedLinear(ctx.model.feature_dim, ctx.model.num_classes)
    loss = LDAMLoss(ctx.counts, max_margin=opt["max_margin"], scale=opt["scale"], drw_epoch=drw, beta=opt["beta"])
    res = _train(ctx, loss)
    return _predict(ctx, test) * np.float32(opt["scale"]), [res]


@_register("balanced_softmax")
def _bsm(ctx: _Context, test: np.ndarray, opt: dict) -> tuple[np.ndarray, list[TrainResult]]:
    res = _train(ctx, BalancedSoftmaxLoss(ctx.counts))
    return _predict(ctx, test), [res]


@_register("logit_adjust", tau=1.0)
def _la(ctx: _Context, test: np.ndarray, opt: dict) -> tuple[np.ndarray, list[TrainResult]]:
    res = _train(ctx)
    prior = ctx.counts / ctx.counts.sum()
    return logit_adjust(_predict(ctx, test), prior, tau=opt["tau"]).astype(np.float32), [res]


@_register("crt", crt_epochs=None, crt_lr=None)
def _crt(ctx: _Context, test: np.ndarray, opt: dict) -> tuple[np.ndarray, list[TrainResult]]:
    first = _train(ctx)
    epochs2 = opt["crt_epochs"] if opt["crt_epochs"] is not None else max(1, ctx.cfg.epochs // 5)
    lr2 = opt["crt_lr"] if opt["crt_lr"] is not None else ctx.cfg.lr
    opt.update(crt_epochs=int(epochs2), crt_lr=float(lr2))
    head = ctx.model.classifier
    if isinstance(head, nn.Linear):
        devices = [head.weight.device] if head.weight.is_cuda else []
        with torch.random.fork_rng(devices=devices):  # seeded re-initialisation; global RNG untouched
            torch.manual_seed(ctx.cfg.seed + 1)
            head.reset_parameters()
    cfg2 = TrainConfig(**{**asdict(ctx.cfg), "epochs": epochs2, "lr": lr2, "warmup_epochs": 0})
    second = _train(ctx, cfg=cfg2, sampler="class_balanced", trainable="classifier")
    return _predict(ctx, test), [first, second]


def fit_predict(
    method: str,
    train: Dataset,
    test_images: np.ndarray,
    *,
    model: str = "cnn28",
    epochs: int = 10,
    seed: int = 0,
    device: str = "cpu",
    batch_size: int = 128,
    lr: float = 0.05,
    weight_decay: float = 5e-4,
    augment: bool = False,
    momentum: float = 0.9,
    warmup_epochs: int = 0,
    num_threads: int | None = None,
    options: dict | None = None,
) -> LTRunResult:
    """Train a long-tailed reference method on ``train`` and score ``test_images``.

    Parameters
    ----------
    method : str
        A name in ``lt_methods`` (see the module docstring).
    train : Dataset
        Long-tailed training set; every class in ``train.class_names`` needs >= 1 image.
    test_images : ndarray, shape (N, H, W, B)
        Same dtype, size and bands as ``train.images``.
    model : str
        Backbone from :data:`vistabench.learners.models.models`; ``image_size`` is the training
        images' height.
    epochs, seed, device, batch_size, lr, weight_decay, augment, momentum, warmup_epochs, num_threads
        As in :class:`~vistabench.learners.trainer.TrainConfig`; ``seed`` also seeds the model's
        initialisation. SGD with a per-step cosine learning rate.
    options : dict, optional
        Method options (see the registry table); unknown keys raise InputError.

    Returns
    -------
    LTRunResult
    """
    entry = lt_methods.get(method)
    if not isinstance(train, Dataset):
        raise InputError(f"train: expected a vistabench Dataset, got {type(train).__name__}")
    opts = dict(entry.defaults)
    for k, v in (options or {}).items():
        if k not in entry.defaults:
            known = ", ".join(sorted(entry.defaults)) or "none"
            raise InputError(f"options: unknown option {k!r} for method {method!r} (known: {known})")
        opts[k] = v
    counts = check_class_counts(train.class_counts(), f"{train.name} class counts")
    test_images = check_images(test_images, "test_images", in_channels=train.images.shape[3], allow_empty=True)
    cfg = TrainConfig(epochs=epochs, lr=lr, weight_decay=weight_decay, batch_size=batch_size, momentum=momentum,
                      seed=seed, device=device, augment=augment, warmup_epochs=warmup_epochs,
                      num_threads=num_threads)
    resolve_device(device)  # fail before building anything when CUDA is asked for but missing
    t0 = time.perf_counter()
    net = build_model(model, num_classes=train.num_classes, in_channels=train.images.shape[3],
                      image_size=train.images.shape[1], seed=seed)
    ctx = _Context(train=train, counts=counts, model=net, cfg=cfg)
    logits, results = entry.run(ctx, test_images, opts)
    settings = {"method": method, "model": model, "epochs": epochs, "seed": seed, "device": device,
                "batch_size": batch_size, "lr": lr, "weight_decay": weight_decay, "augment": augment,
                "momentum": momentum, "warmup_epochs": warmup_epochs, "options": opts,
                "train_counts": counts.tolist(), "lr_schedule": "cosine per step", "optimizer": "sgd"}
    return LTRunResult(method=method, logits=np.asarray(logits, dtype=np.float32), train_results=results,
                       flops=int(sum(r.flops for r in results)), seconds=time.perf_counter() - t0,
                       settings=settings, test_time=ctx.test_time)

