"""Hyper-parameter search with early stopping: Optuna in-process, or Ray Tune on a cluster.

The API is protocol-neutral (the small-data and stream protocols both use it)::

    space = {"lr": LogUniform(1e-4, 0.1), "batch_size": Choice((10, 25, 50)), "momentum": Fixed(0.9)}

    def objective(config: dict, report: Report) -> float:
        for epoch in range(1, epochs + 1):
            ...train one epoch...
            report(epoch, val_score)        # may raise TrialPruned (local engine)
        return val_score                    # the trial's value (last reported score)

    result = tune(objective, space, TuneSettings(trials=20, max_epochs=30, grace_period=3),
                  storage="runs/ce.db", study_name="ce-split0")

Engines
-------
``local`` (default): an Optuna study (TPE or random sampler) with ASHA, i.e. Optuna's
``SuccessiveHalvingPruner`` (rungs at ``grace_period · reduction_factor^k`` epochs), stored in
Optuna's RDB storage on a SQLite file. Rerunning the same search with the same storage resumes: the
completed/pruned/failed trials are kept, trials that were running when the process died are marked
failed-interrupted and run again, and only the missing trials are run (the sampler is reseeded
with ``seed + trials done`` so a resumed random search does not repeat configurations).

``ray``: the same search on a Ray cluster (``ray_address``; None starts a local Ray instance)
through Ray Tune with ``OptunaSearch`` and ``ASHAScheduler(time_attr="epoch")``; results are
converted to the same :class:`TuneResult`. Its experiment folder lives next to ``storage``;
an interrupted Ray search is resumed with ``Tuner.restore``.

Records: every trial with its configuration, state (``complete``, ``pruned``, ``failed``), value
and per-epoch curve; ``total_epochs`` is the training budget the search spent.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Literal, Mapping, Protocol, Union

from ._validation import check_positive
from .errors import InputError

__all__ = [
    "LogUniform", "Uniform", "Choice", "Fixed", "Param", "SearchSpace", "parse_space", "space_to_json",
    "TuneSettings", "TrialRecord", "TuneResult", "Report", "Objective", "tune",
]


# ------------------------------------------------------------------------------ search space
@dataclass(frozen=True)
class LogUniform:
    """``exp(U(ln low, ln high))``."""

    low: float
    high: float

    def __post_init__(self) -> None:
        lo = check_positive(self.low, "loguniform low")
        hi = check_positive(self.high, "loguniform high")
        if not lo < hi:
            raise InputError(f"loguniform: expected low < high, got [{self.low}, {self.high}]")


@dataclass(frozen=True)
class Uniform:
    """``U(low, high)``."""

    low: float
    high: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.low) and math.isfinite(self.high) and self.low < self.high):
            raise InputError(f"uniform: expected finite low < high, got [{self.low}, {self.high}]")


@dataclass(frozen=True)
class Choice:
    """One of ``values`` (numbers, strings or booleans)."""

    values: tuple

    def __post_init__(self) -> None:
        if not isinstance(self.values, tuple) or not self.values:
            raise InputError(f"choice: expected a non-empty tuple of values, got {self.values!r}")


@dataclass(frozen=True)
class Fixed:
    """A constant (part of every configuration, not searched)."""

    value: Any


Param = Union[LogUniform, Uniform, Choice, Fixed]
SearchSpace = Mapping[str, Param]


def parse_space(spec: Mapping[str, Any]) -> dict[str, Param]:
    """Build a search space from JSON-like data.

    ``{"lr": {"loguniform": [1e-4, 0.1]}, "p": {"uniform": [0, 1]},
    "batch_size": {"choice": [10, 25, 50]}, "momentum": 0.9}`` (a bare value is :class:`Fixed`).
    """
    if not isinstance(spec, Mapping):
        raise InputError(f"search space: expected an object of name -> distribution, got {type(spec).__name__}")
    out: dict[str, Param] = {}
    for name, v in spec.items():
        if isinstance(v, Mapping):
            if len(v) != 1:
                raise InputError(f"search space {name!r}: expected one of loguniform/uniform/choice, got {sorted(v)}")
            (kind, arg), = v.items()
            if kind in ("loguniform", "uniform"):
                if not (isinstance(arg, (list, tuple)) and len(arg) == 2):
                    raise InputError(f"search space {name!r}: {kind} expects [low, high], got {arg!r}")
                out[name] = (LogUniform if kind == "loguniform" else Uniform)(float(arg[0]), float(arg[1]))
            elif kind == "choice":
                if not isinstance(arg, (list, tuple)):
                    raise InputError(f"search space {name!r}: choice expects a list, got {arg!r}")
                out[name] = Choice(tuple(arg))
            else:
                raise InputError(f"search space {name!r}: unknown distribution {kind!r} "
                                 "(expected loguniform, uniform or choice)")
        else:
            out[name] = Fixed(v)
    return out


def space_to_json(space: SearchSpace) -> dict[str, Any]:
    """Inverse of :func:`parse_space`."""
    out: dict[str, Any] = {}
    for k, p in space.items():
        if isinstance(p, LogUniform):
            out[k] = {"loguniform": [p.low, p.high]}
        elif isinstance(p, Uniform):
            out[k] = {"uniform": [p.low, p.high]}
        elif isinstance(p, Choice):
            out[k] = {"choice": list(p.values)}
        else:
            out[k] = p.value
    return out


def _searched(space: SearchSpace) -> dict[str, Param]:
    return {k: p for k, p in space.items() if not isinstance(p, Fixed)}


def _fixed(space: SearchSpace) -> dict[str, Any]:
    return {k: p.value for k, p in space.items() if isinstance(p, Fixed)}


# --------------------------------------------------------------------------------- settings
@dataclass
class TuneSettings:
    """How to search.

    Attributes
    ----------
    trials : int
        Configurations to try (the budget every method gets).
    max_epochs : int
        Epochs of an unpruned trial (ASHA's ``max_t``).
    grace_period : int
        ASHA's minimum epochs before a trial can be stopped (Optuna's ``min_resource``).
    reduction_factor : int
        ASHA's η: rung k is at ``grace_period · η^k`` epochs and keeps the top 1/η.
    scheduler : {"asha", "none"}
        "none" trains every trial for ``max_epochs`` (plain random/TPE search).
    sampler : {"tpe", "random"}
        How configurations are proposed.
    seed : int
    engine : {"local", "ray"}
    ray_address : str, optional
        Address of a running Ray cluster (``ray://host:10001`` or ``host:6379``); None starts a
        local instance with ``ray_num_cpus`` CPUs.
    ray_num_cpus : int, optional
    ray_cpus_per_trial, ray_gpus_per_trial : float
        Resources each Ray trial asks for.
    """

    trials: int
    max_epochs: int
    grace_period: int = 1
    reduction_factor: int = 3
    scheduler: Literal["asha", "none"] = "asha"
    sampler: Literal["tpe", "random"] = "tpe"
    seed: int = 0
    engine: Literal["local", "ray"] = "local"
    ray_address: str | None = None
    ray_num_cpus: int | None = None
    ray_cpus_per_trial: float = 1.0
    ray_gpus_per_trial: float = 0.0

    def __post_init__(self) -> None:
        self.trials = check_positive(self.trials, "trials", integer=True)
        self.max_epochs = check_positive(self.max_epochs, "max_epochs", integer=True)
        self.grace_period = check_positive(self.grace_period, "grace_period", integer=True)
        self.reduction_factor = check_positive(self.reduction_factor, "reduction_factor", integer=True)
        if self.reduction_factor < 2:
            raise InputError(f"reduction_factor: expected an integer >= 2, got {self.reduction_factor}")
        if self.grace_period > self.max_epochs:
            raise InputError(f"grace_period: expected at most max_epochs={self.max_epochs}, got {self.grace_period}")
        for name, val, ok in (("scheduler", self.scheduler, ("asha", "none")),
                              ("sampler", self.sampler, ("tpe", "random")),
                              ("engine", self.engine, ("local", "ray"))):
            if val not in ok:
                raise InputError(f"{name}: expected one of {list(ok)}, got {val!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise InputError(f"seed: expected an integer, got {self.seed!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------------------------- results
@dataclass
class TrialRecord:
    """One trial: ``curve[k]`` is the score reported after epoch k+1."""

    number: int
    config: dict[str, Any]
    state: Literal["complete", "pruned", "failed"]
    value: float | None
    curve: list[float]
    epochs: int
    seconds: float | None = None
    error: str | None = None


@dataclass
class TuneResult:
    """A finished (or resumed-and-finished) search."""

    best_config: dict[str, Any] | None
    best_value: float | None
    best_trial: int | None
    trials: list[TrialRecord]
    settings: dict[str, Any]
    space: dict[str, Any]
    study_name: str
    engine: str
    total_epochs: int
    resumed_trials: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def epochs_to_reach(self, target: float) -> int | None:
        """Training epochs spent (trials in order) until some trial first reported ``>= target``."""
        spent = 0
        for t in sorted(self.trials, key=lambda t: t.number):
            for v in t.curve:
                spent += 1
                if v is not None and math.isfinite(v) and v >= target:
                    return spent
        return None


class Report(Protocol):
    def __call__(self, epoch: int, value: float) -> None: ...


Objective = Callable[[dict, Report], float]


# ------------------------------------------------------------------------------------ tune()
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
        Trains one configuration, calling ``report(epoch, score)`` after every epoch (1-based,
        higher is better) and returning the final score. It must let exceptions from ``report``
        propagate (that is how ASHA stops a trial in-process).
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
    """
    if not isinstance(settings, TuneSettings):
        raise InputError(f"settings: expected TuneSettings, got {type(settings).__name__}")
    if not isinstance(space, Mapping) or not all(isinstance(p, (LogUniform, Uniform, Choice, Fixed)) for p in space.values()):
        raise InputError("space: expected a mapping of name -> LogUniform | Uniform | Choice | Fixed")
    if settings.engine == "ray":
        return _tune_ray(objective, space, settings, storage=storage, study_name=study_name)
    return _tune_local(objective, space, settings, storage=storage, study_name=study_name,
                       callbacks=callbacks or [], catch=catch)


def _suggest(trial: Any, space: SearchSpace) -> dict[str, Any]:
    config = {}
    for k, p in space.items():
        if isinstance(p, LogUniform):
            config[k] = trial.suggest_float(k, p.low, p.high, log=True)
        elif isinstance(p, Uniform):
            config[k] = trial.suggest_float(k, p.low, p.high)
        elif isinstance(p, Choice):
            config[k] = trial.suggest_categorical(k, list(p.values))
        else:
            config[k] = p.value
    return config


def _best(trials: list[TrialRecord]) -> TrialRecord | None:
    done = [t for t in trials if t.state == "complete" and t.value is not None and math.isfinite(t.value)]
    return max(done, key=lambda t: (t.value, -t.number)) if done else None


def _result(trials: list[TrialRecord], space: SearchSpace, settings: TuneSettings, study_name: str,
            resumed: int) -> TuneResult:
    best = _best(trials)
    return TuneResult(
        best_config=dict(best.config) if best else None,
        best_value=best.value if best else None,
        best_trial=best.number if best else None,
        trials=sorted(trials, key=lambda t: t.number),
        settings=settings.to_dict(), space=space_to_json(space), study_name=study_name,
        engine=settings.engine, total_epochs=sum(t.epochs for t in trials), resumed_trials=resumed,
    )


def _sqlite_url(path: str | os.PathLike[str]) -> str:
    p = Path(path).resolve()
    p.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{p}"


def _tune_local(objective: Objective, space: SearchSpace, settings: TuneSettings, *,
                storage: str | os.PathLike[str] | None, study_name: str,
                callbacks: list[Callable[[int], None]], catch: tuple[type[BaseException], ...]) -> TuneResult:
    import optuna
    from optuna.trial import TrialState

    optuna.logging.set_verbosity(optuna.logging.ERROR)  # failed trials are recorded with their error instead
    pruner: optuna.pruners.BasePruner
    if settings.scheduler == "asha":
        pruner = optuna.pruners.SuccessiveHalvingPruner(
            min_resource=settings.grace_period, reduction_factor=settings.reduction_factor)
    else:
        pruner = optuna.pruners.NopPruner()
    store = optuna.storages.RDBStorage(_sqlite_url(storage)) if storage is not None else None
    study = optuna.create_study(study_name=study_name, storage=store, direction="maximize",
                                load_if_exists=True, pruner=pruner)
    # trials left RUNNING by a killed process: mark them failed-interrupted (they are re-run)
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        study._storage.set_trial_state_values(t._trial_id, TrialState.FAIL)  # noqa: SLF001

    def counted(t: Any) -> bool:
        return t.state in (TrialState.COMPLETE, TrialState.PRUNED) or (
            t.state == TrialState.FAIL and "error" in t.user_attrs)

    done = sum(counted(t) for t in study.get_trials(deepcopy=False))
    resumed = done
    remaining = settings.trials - done
    seed = settings.seed + done
    study.sampler = (optuna.samplers.RandomSampler(seed=seed) if settings.sampler == "random"
                     else optuna.samplers.TPESampler(seed=seed))
    pruned_exc = optuna.TrialPruned

    def run(trial: optuna.Trial) -> float:
        config = _suggest(trial, space)
        t0 = time.perf_counter()

        def report(epoch: int, value: float) -> None:
            trial.report(float(value), int(epoch))
            if epoch < settings.max_epochs and trial.should_prune():  # nothing to save at the last epoch
                raise pruned_exc(f"pruned by ASHA at epoch {epoch}")

        try:
            value = objective(config, report)
        except catch as exc:
            trial.set_user_attr("error", f"{type(exc).__name__}: {exc}")
            raise
        finally:
            trial.set_user_attr("seconds", time.perf_counter() - t0)
        return float(value)

    def after(study_: optuna.Study, frozen: Any) -> None:
        n = sum(counted(t) for t in study_.get_trials(deepcopy=False))
        for cb in callbacks:
            cb(n)

    if remaining > 0:
        from .progress import status

        status(f"search {study_name}: {remaining} trials to run ({done} done)")
        study.optimize(run, n_trials=remaining, catch=catch, callbacks=[after], gc_after_trial=False)

    records = []
    for t in study.get_trials(deepcopy=False):
        if not counted(t):
            continue
        state = {TrialState.COMPLETE: "complete", TrialState.PRUNED: "pruned"}.get(t.state, "failed")
        curve = [float(t.intermediate_values[k]) for k in sorted(t.intermediate_values)]
        records.append(TrialRecord(
            number=t.number, config={**_fixed(space), **t.params}, state=state,
            value=float(t.value) if state == "complete" and t.value is not None else None,
            curve=curve, epochs=len(curve),
            seconds=t.user_attrs.get("seconds"), error=t.user_attrs.get("error")))
    # renumber in order of creation, skipping interrupted trials, so numbers are 0..n-1
    records.sort(key=lambda r: r.number)
    for i, r in enumerate(records):
        r.number = i
    return _result(records, space, settings, study_name, resumed)


# ---------------------------------------------------------------------------------- Ray Tune
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


def _ray_trainable(config: dict, objective: Objective = None, keys: tuple = ()) -> None:  # type: ignore[assignment]
    from ray import tune as rt

    def report(epoch: int, value: float) -> None:
        rt.report({"epoch": int(epoch), "score": float(value)})

    objective({k: config[k] for k in keys}, report)


def _tune_ray(objective: Objective, space: SearchSpace, settings: TuneSettings, *,
              storage: str | os.PathLike[str] | None, study_name: str) -> TuneResult:
    try:
        import ray
        from ray import tune as rt
        from ray.tune.schedulers import ASHAScheduler, FIFOScheduler
        from ray.tune.search.optuna import OptunaSearch
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise InputError("engine='ray' needs Ray Tune: pip install 'vistabench[ray]'") from exc
    import optuna

    if not ray.is_initialized():
        kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
        if settings.ray_address:
            ray.init(address=settings.ray_address, **kw)
        else:
            ray.init(num_cpus=settings.ray_num_cpus, **kw)
    base = Path(storage).resolve().parent if storage is not None else Path.cwd() / "ray_results"
    base.mkdir(parents=True, exist_ok=True)
    exp_dir = base / f"{study_name}-ray"
    sampler = (optuna.samplers.RandomSampler(seed=settings.seed) if settings.sampler == "random"
               else optuna.samplers.TPESampler(seed=settings.seed))
    searched = _searched(space)
    search = OptunaSearch(metric="score", mode="max", sampler=sampler) if searched else None
    scheduler = (ASHAScheduler(time_attr="epoch", max_t=settings.max_epochs, grace_period=settings.grace_period,
                               reduction_factor=settings.reduction_factor)
                 if settings.scheduler == "asha" else FIFOScheduler())
    trainable = rt.with_resources(
        rt.with_parameters(_ray_trainable, objective=objective, keys=tuple(space)),
        {"cpu": settings.ray_cpus_per_trial, "gpu": settings.ray_gpus_per_trial})
    resumed = 0
    if rt.Tuner.can_restore(str(exp_dir)):
        tuner = rt.Tuner.restore(str(exp_dir), trainable=trainable, resume_errored=False, restart_errored=False)
        resumed = -1  # Ray does not say how many trials it restored; counted below
    else:
        tuner = rt.Tuner(
            trainable,
            param_space=_ray_space(space),
            tune_config=rt.TuneConfig(metric="score", mode="max", search_alg=search, scheduler=scheduler,
                                      num_samples=settings.trials),
            run_config=rt.RunConfig(name=exp_dir.name, storage_path=str(base), verbose=0),
        )
    import contextlib
    import sys

    from .progress import enabled

    # Ray Tune prints its own tables on stdout: keep stdout for our results (stderr on a terminal, else silent)
    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(sys.stderr if enabled() else devnull):
        grid = tuner.fit()
    records = []
    for i in range(len(grid)):
        res = grid[i]
        df = res.metrics_dataframe
        curve = [float(v) for v in df["score"].tolist()] if df is not None and "score" in df else []
        cfg = {k: res.config[k] for k in space if k in res.config}
        if res.error is not None:
            state, value, err = "failed", None, f"{type(res.error).__name__}: {res.error}".splitlines()[0]
        elif len(curve) < settings.max_epochs:
            state, value, err = "pruned", None, None
        else:
            state, value, err = "complete", curve[-1], None
        secs = res.metrics.get("time_total_s") if res.metrics else None
        records.append((res.metrics.get("trial_id", str(i)) if res.metrics else str(i),
                        TrialRecord(number=i, config=cfg, state=state, value=value, curve=curve,
                                    epochs=len(curve), seconds=secs, error=err)))
    records.sort(key=lambda x: x[0])
    out = [r for _, r in records]
    for i, r in enumerate(out):
        r.number = i
    if resumed == -1:
        resumed = len(out)
    return _result(out, space, settings, study_name, resumed)
