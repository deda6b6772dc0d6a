"""The long-tail method registry ``lt_methods`` and the helpers every method uses.

A method is registered with ``@_register(name, **default_options)`` and called as
``method(ctx, test_images, options) -> (logits, train_results)``; a method that adapts to each
unlabelled test set also sets ``ctx.test_time`` (see :class:`~.longtail.LTRunResult`). The methods
live in :mod:`.longtail` (``ce`` ... ``crt``) and :mod:`.lt_survey` (the survey's further methods);
:func:`.longtail.fit_predict` runs them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from torch import nn

from ..data.dataset import Dataset
from ..registry import Registry
from .models import Backbone
from .trainer import TrainConfig, Trainer, TrainResult

__all__ = ["lt_methods"]


@dataclass
class _Context:
    train: Dataset
    counts: np.ndarray
    model: Backbone
    cfg: TrainConfig
    trainer: Trainer | None = None
    test_time: Callable[[np.ndarray], np.ndarray] | None = None  # set by methods with a test-time step


# A method: (ctx, test_images, options) -> (logits, train results); options already defaulted.
_Method = Callable[[_Context, np.ndarray, dict], "tuple[np.ndarray, list[TrainResult]]"]


@dataclass
class _Entry:
    run: _Method
    defaults: dict


lt_methods: Registry[_Entry] = Registry("long-tail method")


def _register(name: str, **defaults: object) -> Callable[[_Method], _Method]:
    def deco(fn: _Method) -> _Method:
        lt_methods.register(name)(_Entry(fn, dict(defaults)))
        return fn
    return deco


def _train(ctx: _Context, loss: nn.Module | None = None, *, cfg: TrainConfig | None = None,
           **fit_kw: object) -> TrainResult:
    tr = Trainer(ctx.model, cfg or ctx.cfg, loss_fn=loss)
    res = tr.fit(ctx.train.images, ctx.train.labels, **fit_kw)  # type: ignore[arg-type]
    ctx.trainer = tr
    return res


def _predict(ctx: _Context, images: np.ndarray) -> np.ndarray:
    if ctx.trainer is None:  # pragma: no cover - every method trains first
        raise RuntimeError("predict before training")
    return ctx.trainer.predict_logits(images)
