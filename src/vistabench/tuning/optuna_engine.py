"""The local engine: an Optuna study with ASHA, resumable from an SQLite file.

ASHA is Optuna's ``SuccessiveHalvingPruner`` (rungs at ``grace_period · η^k`` epochs, compared on
the windowed score of :mod:`.settings`). Rerunning the same search with the same storage resumes:
completed/pruned/failed trials are kept, trials that were running when the process died are marked
failed-interrupted and run again, and only the missing trials are run (the sampler is reseeded with
``seed + trials done`` so a resumed random search does not repeat configurations). Each trial
keeps its raw per-epoch curve in the user attribute ``curve``; the intermediate values Optuna
sees are the windowed scores.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable

from .settings import Objective, TrialRecord, TuneResult, TuneSettings, make_result, window_score
from .space import Choice, LogUniform, SearchSpace, Uniform, fixed, space_to_json

__all__ = ["tune_local"]


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


def _sqlite_url(path: str | os.PathLike[str]) -> str:
    p = Path(path).resolve()
    p.parent.mkdir(parents=True, exist_ok=True)
    _drop_if_cut_short(p)
    return f"sqlite:///{p}"


def _drop_if_cut_short(path: Path) -> None:
    """A study file that SQLite finds damaged (cut short by a full disk or a copy, overwritten) is
    never trusted: it is removed, with a warning, and the search starts again from its first trial."""
    import sqlite3
    import warnings

    if not path.is_file():
        return
    try:
        conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
        try:
            ok = conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        ok = False
    if ok:
        return
    for suffix in ("", "-journal", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    warnings.warn(f"study file {str(path)!r}: damaged (cut short?); removed, the search starts again",
                  UserWarning, stacklevel=3)


def _storage_error(exc: BaseException, storage: str | os.PathLike[str] | None) -> BaseException:
    """A full disk under the study file as one line naming it; other errors unchanged."""
    from ..atomic import is_disk_full

    kind = type(exc).__module__.split(".")[0]
    if storage is not None and kind in ("optuna", "sqlalchemy", "sqlite3") and is_disk_full(
            exc, Path(storage).resolve().parent):
        from ..errors import InputError

        return InputError(f"study file {str(storage)!r}: no space left on device (the trials done so far are "
                          "kept; free some space and run the same command again to resume)")
    return exc


def tune_local(objective: Objective, space: SearchSpace, settings: TuneSettings, *,
               storage: str | os.PathLike[str] | None, study_name: str,
               callbacks: list[Callable[[int], None]], catch: tuple[type[BaseException], ...]) -> TuneResult:
    """Run (or resume) the search in this process; see :func:`vistabench.tuning.tune`."""
    try:
        return _tune_local(objective, space, settings, storage=storage, study_name=study_name,
                           callbacks=callbacks, catch=catch)
    except Exception as exc:
        err = _storage_error(exc, storage)
        if err is exc:
            raise
        raise err from exc


def _tune_local(objective: Objective, space: SearchSpace, settings: TuneSettings, *,
                storage: str | os.PathLike[str] | None, study_name: str,
                callbacks: list[Callable[[int], None]], catch: tuple[type[BaseException], ...]) -> TuneResult:
    import optuna

    study = _open_study(settings, storage=storage, study_name=study_name)
    done = sum(_counted(t) for t in study.get_trials(deepcopy=False))
    resumed = done
    remaining = settings.trials - done
    seed = settings.seed + done
    study.sampler = (optuna.samplers.RandomSampler(seed=seed) if settings.sampler == "random"
                     else optuna.samplers.TPESampler(seed=seed))
    pruned_exc = optuna.TrialPruned
    w = settings.score_window

    def run(trial: optuna.Trial) -> float:
        config = _suggest(trial, space)
        t0 = time.perf_counter()
        raw: list[float] = []

        def report(epoch: int, value: float) -> None:
            raw.append(float(value))
            trial.report(window_score(raw, w), int(epoch))
            if epoch < settings.max_epochs and trial.should_prune():  # nothing to save at the last epoch
                raise pruned_exc(f"pruned by ASHA at epoch {epoch}")

        try:
            returned = objective(config, report)
        except catch as exc:
            trial.set_user_attr("error", f"{type(exc).__name__}: {exc}")
            raise
        finally:  # once per trial, not per epoch (a killed trial is re-run anyway)
            trial.set_user_attr("seconds", time.perf_counter() - t0)
            trial.set_user_attr("curve", raw)
        if not raw:  # an objective that reports nothing: its return value is its one-point curve
            raw.append(float(returned))
            trial.set_user_attr("curve", raw)
        return window_score(raw, w)

    def after(study_: optuna.Study, frozen: Any) -> None:
        n = sum(_counted(t) for t in study_.get_trials(deepcopy=False))
        for cb in callbacks:
            cb(n)

    if remaining > 0:
        from ..progress import status

        status(f"search {study_name}: {remaining} trials to run ({done} done)")
        study.optimize(run, n_trials=remaining, catch=catch, callbacks=[after], gc_after_trial=False)

    return make_result(_trial_records(study, space, w), space_to_json(space), settings, study_name, resumed)


def _open_study(settings: TuneSettings, *, storage: str | os.PathLike[str] | None, study_name: str) -> Any:
    """The study (resumed from ``storage`` when it holds one), its pruner from ``settings``; trials left
    RUNNING by a killed process are marked failed-interrupted (they are re-run)."""
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
    # only a stored study can have them, and the storage's public interface changes their state
    if store is not None:
        study_id = store.get_study_id_from_name(study_name)
        for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            trial_id = store.get_trial_id_from_study_id_trial_number(study_id, t.number)
            store.set_trial_state_values(trial_id, TrialState.FAIL)
    return study


def _counted(t: Any) -> bool:
    """A trial that counts towards the budget: complete, pruned, or failed with its error (not interrupted)."""
    from optuna.trial import TrialState

    return t.state in (TrialState.COMPLETE, TrialState.PRUNED) or (
        t.state == TrialState.FAIL and "error" in t.user_attrs)


def _trial_records(study: Any, space: SearchSpace, window: int) -> list[TrialRecord]:
    """The counted trials as records, numbered 0..n-1 (interrupted trials, re-run, are left out)."""
    from optuna.trial import TrialState

    records = []
    for t in sorted(study.get_trials(deepcopy=False), key=lambda t: t.number):
        if not _counted(t):
            continue
        state = {TrialState.COMPLETE: "complete", TrialState.PRUNED: "pruned"}.get(t.state, "failed")
        curve = [float(v) for v in t.user_attrs.get(
            "curve", [t.intermediate_values[k] for k in sorted(t.intermediate_values)])]
        value = window_score(curve, window) if state != "failed" and curve else None
        records.append(TrialRecord(
            number=t.number, config={**fixed(space), **t.params}, state=state, value=value,
            curve=curve, epochs=len(curve), seconds=t.user_attrs.get("seconds"), error=t.user_attrs.get("error")))
    return records
