"""Learning-rate schedules of the shared trainer, as pure functions of the step.

``"cosine"`` (the default) works **per optimisation step**: ``lr_t = lr * (1 + cos(pi * t / T)) / 2``
for step t of T = epochs x steps-per-epoch, after an optional linear warm-up over
``warmup_epochs`` x steps-per-epoch steps (``lr * (t + 1) / W`` for t < W).

``"step"`` and ``"cosine_epoch"`` work **per epoch** (the lr is constant within an epoch), as the
long-tail reference recipes do:

- ``"step"``: ``lr × lr_factors[i]`` from 0-based epoch ``lr_milestones[i]`` on, after the per-epoch
  warm-up ``lr · (warmup_start + (1 − warmup_start)(e + 1)/warmup_epochs)``;
- ``"cosine_epoch"``: ``lr (1 + cos(π (e + schedule_offset)/epochs))/2`` (offset 1: a scheduler
  stepped before the first epoch).

>>> from types import SimpleNamespace
>>> cfg = SimpleNamespace(lr=0.1, epochs=4, warmup_epochs=0, schedule="step", lr_milestones=(2,),
...                       lr_factors=(0.1,), warmup_start=0.0, schedule_offset=0)
>>> [round(learning_rate(cfg, s, 8, 2), 4) for s in range(8)]
[0.1, 0.1, 0.1, 0.1, 0.01, 0.01, 0.01, 0.01]
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import InputError

__all__ = ["SCHEDULES", "SCHEDULE_RUNNERS", "learning_rate", "schedules_of", "step_factor", "check_step_rule"]

#: every learning-rate schedule (the one list) and what runs or offers it: ``trainer`` (:func:`learning_rate`,
#: ``TrainConfig``), ``stream`` (the stream's learners: ``warmup_cosine_lr``), ``recipe`` (a recipe may name it;
#: ``cosine_epoch`` is set by a method's own stage, never by a user: every protocol narrows its choices)
SCHEDULE_RUNNERS: dict[str, tuple[str, ...]] = {
    "cosine": ("trainer", "stream", "recipe"),
    "step": ("trainer", "recipe"),
    "warmup-cosine": ("stream", "recipe"),
    "cosine_epoch": ("trainer", "recipe"),
}


def schedules_of(runner: str) -> tuple[str, ...]:
    """The schedules ``runner`` (trainer, stream, recipe) runs or offers, in :data:`SCHEDULE_RUNNERS`' order.

    >>> schedules_of("stream")
    ('cosine', 'warmup-cosine')
    """
    return tuple(name for name, runners in SCHEDULE_RUNNERS.items() if runner in runners)


#: the schedules the trainer runs
SCHEDULES = schedules_of("trainer")


def step_factor(epoch: int, milestones: tuple[int, ...], factors: tuple[float, ...]) -> float:
    """The step rule: the multiplier of the base lr in 0-based ``epoch``, ``factors[i]`` from epoch
    ``milestones[i]`` on (the last milestone reached wins), else 1. The trainer's ``"step"`` schedule
    (after its warm-up), the incremental base session's and FR's stage all apply it.

    >>> [step_factor(e, (2, 4), (0.1, 0.01)) for e in range(6)]
    [1.0, 1.0, 0.1, 0.1, 0.01, 0.01]
    """
    out = 1.0
    for m, f in zip(milestones, factors):
        if epoch >= m:
            out = f
    return out


def check_step_rule(milestones: tuple[int, ...], factors: tuple[float, ...], *,
                    names: tuple[str, str] = ("lr_milestones", "lr_factors")) -> None:
    """The step rule's own parameters: one factor per milestone, the milestones strictly increasing
    (InputError naming ``names``: the milestones' and the factors' field, by default the recipe's
    ``lr_milestones`` / ``lr_factors``). Their range against the epochs is the caller's: a recipe's
    milestones come before its last epoch, FR's may reach it."""
    if len(milestones) != len(factors):
        raise InputError(f"{names[1]}: expected one factor per milestone ({len(milestones)}), got {len(factors)}")
    if list(milestones) != sorted(set(milestones)):
        raise InputError(f"{names[0]}: expected increasing epochs, got {list(milestones)}")


def learning_rate(cfg: Any, step: int, total: int, steps_per_epoch: int) -> float:
    """Learning rate of 0-based optimisation ``step`` of ``total`` under ``cfg.schedule`` (module
    docstring); ``steps_per_epoch`` converts steps to epochs. ``cfg``: the trainer's config
    (:class:`~.train_config.TrainConfig`), read for its recipe's ``lr``, ``epochs``, ``schedule``,
    ``warmup_epochs``, ``warmup_start``, ``lr_milestones``, ``lr_factors`` and its own
    ``schedule_offset``."""
    if cfg.schedule != "cosine":
        epoch = step // steps_per_epoch
        if cfg.schedule == "cosine_epoch":
            return cfg.lr * 0.5 * (1.0 + math.cos(math.pi * (epoch + cfg.schedule_offset) / cfg.epochs))
        if epoch < cfg.warmup_epochs:
            return cfg.lr * (cfg.warmup_start + (1.0 - cfg.warmup_start) * (epoch + 1) / cfg.warmup_epochs)
        return cfg.lr * step_factor(epoch, cfg.lr_milestones, cfg.lr_factors)
    warm = cfg.warmup_epochs * steps_per_epoch
    if step < warm:
        return cfg.lr * (step + 1) / warm
    t, span = step - warm, max(1, total - warm)
    return cfg.lr * 0.5 * (1.0 + math.cos(math.pi * t / span))
