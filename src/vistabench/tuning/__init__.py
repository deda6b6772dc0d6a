"""Hyper-parameter search with early stopping: Optuna in-process, or Ray Tune on a cluster.

The API is protocol-neutral::

    space = {"lr": LogUniform(1e-4, 0.1), "batch_size": Choice((10, 25, 50)), "momentum": Fixed(0.9)}

    def objective(config: dict, report: Report) -> float:
        for epoch in range(1, epochs + 1):
            ...train one epoch...
            report(epoch, val_score)        # may raise TrialPruned (local engine)
        return val_score

    result = tune(objective, space, TuneSettings(trials=20, max_epochs=30, grace_period=3),
                  storage="runs/ce.db", study_name="ce-split0")

Modules: :mod:`.space` (distributions and their JSON form), :mod:`.settings` (settings, trial
records, the windowed score and the best-trial rule, shared by both engines), :mod:`.optuna_engine`
(``engine="local"``: resumable SQLite study) and :mod:`.ray_engine` (``engine="ray"``).

Records: every trial with its configuration, state (``complete``, ``pruned``, ``failed``), value
(its windowed score after its last epoch) and raw per-epoch curve; ``total_epochs`` is the training
budget the search spent. Defaults follow gem (see ``docs/smalldata.md``): ASHA with η = 2, random
search, score = mean of the last 5 reported values, best among all trials.
"""

from __future__ import annotations

import os
from typing import Callable

from ..errors import InputError
from .settings import (Objective, Report, TrialRecord, TuneResult, TuneSettings, select_best,
                       window_score)
from .space import (Choice, Fixed, LogUniform, Param, SearchSpace, Uniform, check_space, parse_space,
                    space_to_json)

__all__ = [
    "LogUniform", "Uniform", "Choice", "Fixed", "Param", "SearchSpace", "parse_space", "space_to_json",
    "TuneSettings", "TrialRecord", "TuneResult", "Report", "Objective", "tune", "window_score", "select_best",
]


def tune(
    objective: Objective,
    space: SearchSpace,
    settings: TuneSettings,
    *,
    storage: str | os.PathLike[str] | None = None,
    study_name: str = "search",
    callbacks: list[Callable[[int], None]] | None = None,
    catch: tuple[type[BaseException], ...] = (FloatingPointError,),
) -> TuneResult:
    """Run (or resume) a search and return every trial.

    Parameters
    ----------
    objective : callable ``(config, report) -> float``
        Trains one configuration, calling ``report(epoch, value)`` after every epoch (1-based,
        higher is better). It must let exceptions from ``report`` propagate (that is how ASHA
        stops a trial in-process). Its return value is used only when it reported nothing.
    space : mapping name -> LogUniform | Uniform | Choice | Fixed
    settings : TuneSettings
    storage : path, optional
        SQLite file of the Optuna study (local) / folder base of the Ray experiment; None keeps
        the local search in memory (no resume).
    study_name : str
        One study per (dataset, method, split): the resume key.
    callbacks : list of callable(trials_done), optional
        Called after each finished local trial (tests use it to interrupt a search).
    catch : tuple of exception types
        Exceptions of a trial that mark it failed instead of stopping the search (default: a
        diverged training run, ``FloatingPointError``).

    Returns
    -------
    TuneResult
        ``best_config``/``best_value`` by :func:`select_best` with ``settings.select``.
    """
    if not isinstance(settings, TuneSettings):
        raise InputError(f"settings: expected TuneSettings, got {type(settings).__name__}")
    check_space(space)
    if settings.engine.engine == "ray":
        from .ray_engine import tune_ray

        return tune_ray(objective, space, settings, storage=storage, study_name=study_name)
    from .optuna_engine import tune_local

    return tune_local(objective, space, settings, storage=storage, study_name=study_name,
                      callbacks=callbacks or [], catch=catch)
