"""The long-tail extension API: :func:`register_method`, the context a method works with, and the
helpers every method uses (the registry itself, ``lt_methods``, is torch-free in :mod:`.options`).

A method is a function ``method(ctx, test_images, options) -> (logits, train_results)`` registered
with :func:`register_method` (a :class:`~vistabench.methods.MethodSpec` in ``lt_methods``);
``options`` is its :class:`~.options.MethodOptions` object (fully resolved: user values over the
recipe's). A method that adapts to each unlabelled test set also
sets ``ctx.test_time`` (see :class:`~.fit.LTRunResult`). Inside a method, :func:`train` trains
``ctx.model`` with a loss (or a custom step) under the run's :class:`~..trainer.TrainConfig` and
:func:`predict` gives the test logits. The built-in methods live in :mod:`.methods` and
:mod:`.survey` (registered in :mod:`.options`); :func:`~.fit.fit_predict` runs them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from torch import nn

from ...data.dataset import Dataset
from ..models import Backbone
from ..tensors import Normaliser
from ..trainer import TrainConfig, Trainer, TrainResult, TrainStep
from .checkpoints import CheckpointSelector
from .options import MethodOptions, lt_methods, register_method

__all__ = ["lt_methods", "MethodContext", "register_method", "train", "predict"]


@dataclass
class MethodContext:
    """What a long-tail method works with.

    Attributes
    ----------
    train : Dataset
        The long-tailed training set.
    counts : ndarray of int, shape (C,)
        Training images per class.
    model : Backbone
        A freshly initialised backbone (seeded); a method may wrap or modify it.
    cfg : TrainConfig
        The run's recipe (optimizer, schedule, epochs, batch size, seed, device, ...).
    trainer : Trainer or None
        The latest stage's trainer (set by :func:`train`); :func:`predict` uses it.
    test_time : callable or None
        Set by methods with a test-time step (``indices -> logits``).
    normaliser : Normaliser or None
        A fixed input standardisation every stage uses (the references' CIFAR mean/std); None:
        measured on the training images.
    selector : CheckpointSelector or None
        Keeps each stage's best epoch on a selection set (``select_checkpoint``); None: the last epoch.
    init : {"fan_out", "fan_in"}
        The run's ``init``: parts a method builds (branch blocks, expert stages, cosine heads) follow
        it as the references build them (``fan_in``: Kaiming fan-in weights, unit-norm cosine heads).
    """

    train: Dataset
    counts: np.ndarray
    model: Backbone
    cfg: TrainConfig
    trainer: Trainer | None = None
    test_time: Callable[[np.ndarray], np.ndarray] | None = None
    normaliser: Normaliser | None = None
    selector: CheckpointSelector | None = None
    init: str = "fan_out"

    @property
    def head_init(self) -> str:
        """The :class:`~..models.NormedLinear` ``init`` of the cosine heads a method builds."""
        return "unit" if self.init == "fan_in" else "kaiming_uniform"


#: A method: (ctx, test_images, options) -> (logits, train results).
Method = Callable[[MethodContext, np.ndarray, MethodOptions], "tuple[np.ndarray, list[TrainResult]]"]


def train(ctx: MethodContext, loss: nn.Module | None = None, *, cfg: TrainConfig | None = None,
          model: nn.Module | None = None, step: TrainStep | None = None, **fit_kw: object) -> TrainResult:
    """Train ``model`` (default ``ctx.model``) on ``ctx.train`` with ``loss`` (default cross-entropy)
    or a custom ``step``, under ``cfg`` (default ``ctx.cfg``); ``fit_kw`` go to
    :meth:`~..trainer.Trainer.fit`. The trainer is kept in ``ctx.trainer`` for :func:`predict`.
    With ``ctx.normaliser`` every stage standardises with it; with ``ctx.selector`` the stage is
    scored on its selection set after every epoch and ends with its best epoch's weights."""
    net = model if model is not None else ctx.model
    callback = ctx.selector.callback(net) if ctx.selector is not None else None
    if ctx.normaliser is not None:
        fit_kw.setdefault("normaliser", ctx.normaliser)
    if ctx.selector is not None:
        fit_kw["val"] = ctx.selector.data
    tr = Trainer(net, cfg or ctx.cfg, loss_fn=loss, step=step, callback=callback)
    res = tr.fit(ctx.train.images, ctx.train.labels, **fit_kw)  # type: ignore[arg-type]
    if ctx.selector is not None:
        ctx.selector.finish(net, res)
    ctx.trainer = tr
    return res


def predict(ctx: MethodContext, images: np.ndarray) -> np.ndarray:
    """Logits of the latest trained model on ``images`` (eval mode), float32 (N, C)."""
    if ctx.trainer is None:
        raise RuntimeError("predict before training: call train(ctx, ...) first")
    return ctx.trainer.predict_logits(images)
