"""The Ray engine: the same search on a Ray cluster through Ray Tune.

``OptunaSearch`` proposes configurations (random or TPE sampler), ``ASHAScheduler(time_attr="epoch")``
stops trials on the windowed ``score``; each report also carries the raw value (``raw``), from which
the trial's curve is rebuilt. The experiment folder lives next to ``storage``; an interrupted search
is resumed with ``Tuner.restore``. Results become the same :class:`~.settings.TuneResult` as the
local engine's.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Any

from .settings import Objective, TrialRecord, TuneResult, TuneSettings, make_result, window_score
from .space import Choice, LogUniform, SearchSpace, Uniform, searched, space_to_json

__all__ = ["tune_ray"]


def _ray_space(space: SearchSpace) -> dict[str, Any]:
    from ray import tune as rt

    out: dict[str, Any] = {}
    for k, p in space.items():
        if isinstance(p, LogUniform):
            out[k] = rt.loguniform(p.low, p.high)
        elif isinstance(p, Uniform):
            out[k] = rt.uniform(p.low, p.high)
        elif isinstance(p, Choice):
            out[k] = rt.choice(list(p.values))
        else:
            out[k] = p.value
    return out


def _ray_trainable(config: dict, objective: Objective = None, keys: tuple = (),  # type: ignore[assignment]
                   window: int = 1) -> None:
    from ray import tune as rt

    raw: list[float] = []

    def report(epoch: int, value: float) -> None:
        raw.append(float(value))
        rt.report({"epoch": int(epoch), "score": window_score(raw, window), "raw": float(value)})

    objective({k: config[k] for k in keys}, report)


def tune_ray(objective: Objective, space: SearchSpace, settings: TuneSettings, *,
             storage: str | os.PathLike[str] | None, study_name: str) -> TuneResult:
    """Run (or restore and finish) the search on Ray; see :func:`vistabench.tuning.tune`."""
    from ..extras import require

    require("ray", "tune", what="engine ray")
    import optuna
    from ray import tune as rt
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler
    from ray.tune.search.optuna import OptunaSearch

    from ..jobs import check_cluster_gpus, connect_ray

    connect_ray(settings.engine.ray_address, num_cpus=settings.ray_num_cpus)  # one line for an absent cluster
    check_cluster_gpus(settings.ray_gpus_per_trial)  # a trial needing a GPU the cluster lacks would wait forever
    base = Path(storage).resolve().parent if storage is not None else Path.cwd() / "ray_results"
    base.mkdir(parents=True, exist_ok=True)
    exp_dir = base / f"{study_name}-ray"
    sampler = (optuna.samplers.RandomSampler(seed=settings.seed) if settings.sampler == "random"
               else optuna.samplers.TPESampler(seed=settings.seed))
    search = OptunaSearch(metric="score", mode="max", sampler=sampler) if searched(space) else None
    scheduler = (ASHAScheduler(time_attr="epoch", max_t=settings.max_epochs, grace_period=settings.grace_period,
                               reduction_factor=settings.reduction_factor)
                 if settings.scheduler == "asha" else FIFOScheduler())
    trainable = rt.with_resources(
        rt.with_parameters(_ray_trainable, objective=objective, keys=tuple(space), window=settings.score_window),
        {"cpu": settings.ray_cpus_per_trial, "gpu": settings.ray_gpus_per_trial})
    restored = rt.Tuner.can_restore(str(exp_dir))
    if restored:
        tuner = rt.Tuner.restore(str(exp_dir), trainable=trainable, resume_errored=False, restart_errored=False)
    else:
        tuner = rt.Tuner(
            trainable,
            param_space=_ray_space(space),
            tune_config=rt.TuneConfig(metric="score", mode="max", search_alg=search, scheduler=scheduler,
                                      num_samples=settings.trials),
            run_config=rt.RunConfig(name=exp_dir.name, storage_path=str(base), verbose=0),
        )
    from ..progress import enabled

    # Ray Tune prints its own tables on stdout: keep stdout for our results (stderr on a terminal, else silent)
    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(sys.stderr if enabled() else devnull):
        grid = tuner.fit()
    records = []
    for i in range(len(grid)):
        res = grid[i]
        df = res.metrics_dataframe
        curve = [float(v) for v in df["raw"].tolist()] if df is not None and "raw" in df else []
        cfg = {k: res.config[k] for k in space if k in res.config}
        if res.error is not None:
            state, value, err = "failed", None, f"{type(res.error).__name__}: {res.error}".splitlines()[0]
        else:
            state = "pruned" if len(curve) < settings.max_epochs else "complete"
            value, err = (window_score(curve, settings.score_window) if curve else None), None
        secs = res.metrics.get("time_total_s") if res.metrics else None
        records.append((res.metrics.get("trial_id", str(i)) if res.metrics else str(i),
                        TrialRecord(number=i, config=cfg, state=state, value=value, curve=curve,
                                    epochs=len(curve), seconds=secs, error=err)))
    records.sort(key=lambda x: x[0])
    out = [r for _, r in records]
    return make_result(out, space_to_json(space), settings, study_name, len(out) if restored else 0)
