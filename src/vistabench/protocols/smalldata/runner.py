"""Small-data benchmark protocol (Brigato et al.; docs/smalldata.md): splits → tuning → final runs → records.

``run(config, *, store=None, work_dir=None)`` with a :class:`~.config.SmalldataConfig`.
Pipeline per (dataset, method):

1. split files ``trainval{i}``/``train{i}``/``val{i}`` (+ ``test{i}``) for i = 0..2
   (:mod:`vistabench.data.smalldata_splits`), written to ``WORK/splits/...`` unless ``splits`` names them;
2. per split, a search on train{i}/val{i} with the *same* budget for every method
   (:func:`vistabench.tuning.tune`; lr ~ logU(1e-4, 0.1), weight decay ~ logU(1e-5, 0.1),
   batch size from the preset, plus the method's options that are ranges). The preset's rules decide
   the rest; by default gem's: ASHA with η = 2, random search, the score after each epoch is the
   mean plain accuracy on val{i} over the last 5 epochs, the best configuration is chosen among all
   trials (stopped ones included), and training batches get the dataset's own augmentation
   (``recipe="vistabench"``: η = 3, TPE, last-epoch balanced accuracy, completed trials only,
   pad-crop + flip; see ``docs/smalldata.md``);
3. the split's best configuration trained ``repeats`` times (seeds 0..repeats−1) on trainval{i}
   and scored with balanced accuracy on the test set (official, or test{i}).

Records (``protocol="smalldata"``, one ``run_id`` for all records of one call): ``kind="tune"`` — one
per search, settings = the preset, the recipe, the validation metric, the augmentation and the whole
:class:`~vistabench.tuning.TuneResult` (every trial and its curve), metric ``best_val_score`` (the
best trial's windowed score); ``kind="final"`` — one per final
run, metrics ``balanced_accuracy``, ``accuracy``, ``images_per_second``, ``peak_memory_bytes``.
Every record's settings hold the run's config (``run_config``, resolved) and the backbone (``model``).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np

from ...data.smalldata_splits import SmallDataSplit
from ...engine import Engine
from ...errors import InputError
from ...metrics.classification import balanced_accuracy
from ...store import Record, ResultsStore, new_run_id
from ...tuning import Fixed, TuneResult, space_to_json, tune
from .config import NATIVE, SmalldataConfig
from .core import (PROTOCOL, Context, RunPlan, check_batch, method_inputs, method_space, model_name,
                             prepare, to_record, train_method)
from .final import final_split

__all__ = ["SmalldataConfig", "run", "plan_from_config", "prepare_from_config", "run_method", "tune_split",
           "final_split", "score", "to_record", "Context", "RunPlan", "prepare", "method_space", "PROTOCOL",
           "write_dataset_splits", "catalog", "check_dataset_folder"]


def write_dataset_splits(dataset: str, out: str | Path, *, root: str | Path | None = None, recipe: str = "gem",
                 per_class: int | None = None, train_per_class: int | None = None,
                 val_fraction: float | None = None, seed: int = 0, image_size: int | None = None) -> dict[str, Any]:
    """Write the split files of ``dataset`` (trainval/train/val, + test where it has no official one)
    for i = 0..2 to the folder ``out``; the arguments are checked as a run's config fields are.

    Returns :func:`~vistabench.data.smalldata_splits.write_preset_splits`'s summary with ``dataset``
    and ``recipe``.
    """
    from ...data.smalldata import get_preset, load_smalldata
    from ...data.smalldata_splits import write_preset_splits

    check_dataset_folder(dataset)
    given = {"dataset": dataset, "root": root, "recipe": recipe, "per_class": per_class, "seed": seed,
             "train_per_class": train_per_class, "val_fraction": val_fraction, "image_size": image_size}
    SmalldataConfig.from_dict({k: v for k, v in given.items() if v is not None} | {"method": "ce"})
    preset = get_preset(dataset, recipe=recipe)
    data = load_smalldata(dataset, root, image_size=image_size)
    res = write_preset_splits(data, out, dataset_name=dataset, preset=preset, seed=seed, per_class=per_class,
                              train_per_class=train_per_class, val_fraction=val_fraction)
    return {**res, "dataset": dataset, "recipe": recipe}


def check_dataset_folder(spec: Any) -> None:
    """``dataset`` given as ``NAME:DIR`` whose DIR is not a folder: one line naming ``dataset`` (the
    user never gave ``root``, which the preset's reader would name). Other values pass (the config
    checks them)."""
    if not isinstance(spec, str) or ":" not in spec:
        return
    root = spec.partition(":")[2]
    if root and not Path(root).is_dir():
        raise InputError(f"dataset {spec!r}: " + (f"{root!r} is a file, expected a folder" if Path(root).exists()
                                                  else f"no such folder {root!r}"))


def catalog(recipe: str = "gem") -> dict[str, Any]:
    """The dataset presets (as ``recipe`` sets them) and the registered methods with their options."""
    from ...data.smalldata_presets import get_preset, presets
    from ...learners.smalldata.registry import methods

    if recipe not in ("gem", "vistabench"):
        raise InputError(f"recipe: expected 'gem' or 'vistabench', got {recipe!r}")
    return {"recipe": recipe,
            "datasets": {n: get_preset(n, recipe=recipe).to_dict() for n in presets.names()},
            "methods": {n: {"title": methods.get(n).title, "family": methods.get(n).family,
                            "options": methods.get(n).options.for_recipe(recipe).to_dict(),
                            "fixed": methods.get(n).fixed, "tuned": methods.get(n).tuned} for n in methods.names()}}


def _study(ctx: Context, split: SmallDataSplit, method: str, opts: RunPlan) -> tuple[str, Path]:
    """Study name and file. Everything that changes what a trial means is in the name (so a rerun with
    other epochs or another space starts a new study); the number of trials is not (so raising
    --trials extends a finished search)."""
    import hashlib
    import json

    st = opts.settings(ctx.preset)
    key = {"space": space_to_json(_space(ctx, method, opts)),
           "split": split.split_hash, "sampler": st.sampler, "scheduler": st.scheduler,
           "rf": st.reduction_factor}
    key.update(window=st.score_window, val_metric=opts.val_metric_for(ctx.preset),
               augment=opts.augmentation_for(ctx.preset).to_dict())
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:8]
    name = (f"{ctx.name}-{method}-{model_name(ctx, opts)}-split{split.index}-seed{opts.seed}"
            f"-e{st.max_epochs}-g{st.grace_period}-{digest}")
    return name, Path(opts.work_dir) / "studies" / f"{name}.db"


def _check_search_done(ctx: Context, split: SmallDataSplit, method: str, opts: RunPlan) -> None:
    name, path = _study(ctx, split, method, opts)
    hint = (f"run the search (stages 'tune') for dataset {ctx.name!r} and method {method!r} with the same "
            f"work folder, model and seed first")
    if opts.engine.engine == "ray":
        if not (path.parent / f"{name}-ray").is_dir():
            raise InputError(f"no search for {method!r} on split {split.index} in {str(path.parent)!r}; {hint}")
        return
    if not path.is_file():
        raise InputError(f"no search for {method!r} on split {split.index} ({str(path)!r} missing); {hint}")
    import optuna
    from optuna.trial import TrialState

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        study = optuna.load_study(study_name=name, storage=f"sqlite:///{path.resolve()}")
    except KeyError as exc:
        raise InputError(f"{str(path)!r}: holds no study {name!r}; {hint}") from exc
    done = sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED) or "error" in t.user_attrs
               for t in study.get_trials(deepcopy=False) if t.state != TrialState.RUNNING)
    want = opts.settings(ctx.preset).trials
    if done < want:
        raise InputError(f"search for {method!r} on split {split.index} has {done} of {want} trials; {hint} "
                         f"(it resumes)")


def tune_split(ctx: Context, split: SmallDataSplit, method: str, opts: RunPlan,
               records: list[Record] | None = None) -> TuneResult:
    """Search hyper-parameters of ``method`` on train{i}/val{i}; store a ``tune`` record."""
    settings = opts.settings(ctx.preset)
    space = _space(ctx, method, opts)  # the run's method options, as the study name has them
    check_batch(ctx, space, len(split.train), f"train{split.index}")
    vx, vy = ctx.pool.images[split.val], ctx.pool.labels[split.val]

    def objective(config: dict, report) -> float:
        scores: list[float] = []

        def rep(epoch: int, value: float) -> None:
            scores.append(value)
            report(epoch, value)  # the engine averages the last score_window values

        train_method(ctx, method, config, opts, epochs=settings.max_epochs, seed=opts.seed, train_idx=split.train,
               val=(vx, vy), report=rep)
        return scores[-1]

    model = model_name(ctx, opts)
    study, storage = _study(ctx, split, method, opts)
    result = tune(objective, space, settings, storage=storage, study_name=study)
    if records is not None:
        # wall-clock time is a measurement, not a setting: two equal searches store equal settings
        search = result.to_dict()
        trial_seconds = [t.pop("seconds", None) for t in search.get("trials", [])]
        records.append(Record(protocol=PROTOCOL, dataset=ctx.name, method=method, seed=opts.seed,
                         split_hash=split.split_hash, kind="tune",
                              settings={"split": split.index, "model": model, "device": opts.device,
                                   "preset": ctx.preset.to_dict(), "recipe": ctx.preset.recipe,
                                   "val_metric": opts.val_metric_for(ctx.preset),
                                   "augmentation": method_inputs(method, _fixed(space),
                                                                 opts.augmentation_for(ctx.preset))[0].to_dict(),
                                   "search": search},
                         metrics={"best_val_score": result.best_value,
                                  "trials": len(result.trials), "total_epochs": result.total_epochs,
                                  "trial_seconds": trial_seconds}))
    return result


def score(predictions: Any, reference: Context, *, split: int) -> dict[str, Any]:
    """Score a predictions file (or loaded predictions) on split ``split_index``'s test set.

    The test set is the dataset's official one, or ``test{i}.json`` for datasets without one; the
    predictions' labels must be that set's labels in order. Returns the metrics of a final run
    (``balanced_accuracy`` over the declared classes, ``accuracy``; training cost null: the model
    was trained elsewhere).
    """
    from ...data.predictions import Predictions, load_predictions

    pred = predictions if isinstance(predictions, Predictions) else load_predictions(predictions)
    ctx, split_index = reference, split
    split = next((sp for sp in ctx.splits if sp.index == split_index), None)
    if split is None:
        raise InputError(f"split: no split {split_index} among the split files (have {[sp.index for sp in ctx.splits]})")
    _, ty, test_name = ctx.test_set(split)
    if len(pred) != len(ty) or not np.array_equal(pred.labels, ty):
        raise InputError(f"predictions: labels differ from {test_name} of {ctx.name!r} ({len(pred)} vs {len(ty)} "
                         "samples): predict the split's test set in its order")
    classes = list(range(ctx.pool.num_classes))
    y = pred.predicted()
    return {"balanced_accuracy": balanced_accuracy(ty, y, classes=classes), "accuracy": float(np.mean(y == ty)),
            "images_per_second": None, "peak_memory_bytes": None, "peak_memory_kind": None,
            "train_seconds": None, "diverged": False,
            "settings": {"split": split.index, "test": test_name, "split_hash": split.split_hash}}


def run_method(ctx: Context, method: str, opts: RunPlan, records: list[Record] | None = None, *,
               do_tune: bool = True, do_final: bool = True, require_search: bool = False) -> dict[str, Any]:
    """Tune (unless the method has nothing to search) and/or run the final trainings on every split.

    With ``require_search`` a missing or unfinished search is an error instead of being run.
    """
    from ...methods import get_method

    check_ray_address(opts.engine)
    m = get_method("smalldata", method)
    space = _space(ctx, method, opts)
    searched = any(not isinstance(p, Fixed) for p in space.values())
    summary: dict[str, Any] = {"dataset": ctx.name, "method": method, "splits": []}
    for split in ctx.splits:
        entry: dict[str, Any] = {"split": split.index}
        config, value = None, None
        if searched and m.tuned:
            if require_search:
                _check_search_done(ctx, split, method, opts)
            if do_tune or do_final:
                res = tune_split(ctx, split, method, opts, records if do_tune else None)
                config, value = res.best_config, res.best_value
                entry.update(best_config=config, best_val=value, trials=len(res.trials),
                             total_epochs=res.total_epochs, resumed_trials=res.resumed_trials)
                if config is None:
                    raise InputError(f"search for {method!r} on split {split.index}: no trial completed "
                                     f"(all pruned or diverged); raise trials or epochs")
        else:
            config = {k: p.value for k, p in space.items()}  # type: ignore[union-attr]
            entry.update(best_config=config, best_val=None, trials=0)
        if do_final:
            runs = final_split(ctx, split, method, config, opts, records, tune_value=value)
            scores = [r["metrics"]["balanced_accuracy"] for r in runs]
            entry["test_balanced_accuracy"] = scores
            if opts.highres_scale > 1:
                entry["highres_test_balanced_accuracy"] = [r["highres"]["metrics"]["balanced_accuracy"]
                                                           for r in runs if "highres" in r]
        summary["splits"].append(entry)
    if do_final:
        allv = [v for e in summary["splits"] for v in e["test_balanced_accuracy"]]
        fin = [v for v in allv if v is not None and math.isfinite(v)]
        summary["mean_balanced_accuracy"] = float(np.mean(fin)) if fin else float("nan")
        summary["runs"] = len(allv)
    return summary


def _fixed(space: dict[str, Any]) -> dict[str, Any]:
    """The fixed values of a search space (a method's switches such as dhn's ``input_crop``)."""
    return {k: p.value for k, p in space.items() if isinstance(p, Fixed)}


def _space(ctx: Context, method: str, opts: RunPlan) -> dict[str, Any]:
    return method_space(method, ctx.preset, method_options=opts.method_options, overrides=opts.space)


def check_ray_address(engine: Engine) -> None:
    """With ``engine="ray"`` and an address, refuse at once when no cluster answers there (Ray itself
    waits for minutes): :func:`vistabench.jobs.check_ray_address`, the one check of every command."""
    if engine.engine == "ray" and engine.ray_address:
        from ...jobs import check_ray_address as check_cluster

        check_cluster(engine.ray_address)


def plan_from_config(config: SmalldataConfig, work_dir: str | Path | None = None) -> RunPlan:
    """The run plan of ``config``; files go to ``work_dir`` (default ``smalldata-runs``). The search
    space, the augmentation and the stem are the config's, resolved when it was built (what
    ``--print-config`` shows): the run searches exactly ``config.space``."""
    # the recipe whole (model, epochs, device, loader, ...), model and epochs the preset's when not given
    preset = config.preset()
    recipe = {k: getattr(config, k) for k in config.recipe_fields}
    recipe.update({k: v for k, v in preset.recipe_changes.items() if recipe.get(k) is None})  # checked by RunPlan
    return RunPlan(**recipe,
                   final_epochs=config.final_epochs, trials=config.trials, grace_period=config.grace_period,
                   reduction_factor=config.reduction_factor, repeats=config.repeats, engine=config.to_engine(),
                   sampler=config.sampler, scheduler=config.scheduler,
                   score_window=config.score_window, select=config.select, val_metric=config.val_metric,
                   augmentation=config.augmentation(), seed=config.seed, space=dict(config.space or {}),
                   work_dir=str(work_dir or "smalldata-runs"), highres_scale=config.highres_scale,
                   method_options=config.method_options,  # type: ignore[arg-type]
                   stem=config.stem)


def prepare_from_config(config: SmalldataConfig, work_dir: str | Path | None = None) -> Context:
    """Load the dataset and its split files (``config.splits``), or write them under ``work_dir``."""
    split_out = None
    if config.splits is None:
        sizes = config.preset().split_sizes(per_class=config.per_class, train_per_class=config.train_per_class,
                                            val_fraction=config.val_fraction)
        pc, tpc, vf = sizes["per_class"], sizes["train_per_class"], sizes["val_fraction"]
        split_out = (Path(work_dir or "smalldata-runs") / "splits" /
                     f"{config.dataset}-pc{pc if pc is not None else 'all'}-{f'train{tpc}' if tpc else f'vf{vf:g}'}"
                     f"-seed{config.seed}")
    return prepare(config.dataset, root=config.root, split_dir=config.splits, per_class=config.per_class,
                   seed=config.seed, image_size=None if config.image_size == NATIVE else config.image_size,
                   splits=None if config.split is None else list(config.split), out_splits=split_out,
                   recipe=config.recipe, train_per_class=config.train_per_class, val_fraction=config.val_fraction)


def run(config: SmalldataConfig, *, store: ResultsStore | None = None,
        work_dir: str | Path | None = None) -> list[Record]:
    """Tune and/or train (``config.stages``) ``config.method`` on every split; the records, stored with
    their ids when ``store`` is given. Split files and search studies go to ``work_dir``."""
    if not isinstance(config, SmalldataConfig):
        raise InputError(f"config: expected a SmalldataConfig, got {type(config).__name__}")
    config.refuse_tracking()
    check_ray_address(config.to_engine())
    ctx = prepare_from_config(config, work_dir)
    if config.built_size() not in (None, ctx.image_size):  # the stem was resolved for the preset's size
        raise InputError(f"dataset {config.dataset!r}: its images are {ctx.image_size} px, not the preset's "
                         f"native {config.built_size()} px (its stem and model are chosen for that size)")
    plan = plan_from_config(config, work_dir)
    records: list[Record] = []
    shown = {"run_config": config.to_dict(), "model": model_name(ctx, plan)}
    run_id = new_run_id(PROTOCOL)  # the searches and final runs of this call are one run
    out: list[Record] = []
    try:
        run_method(ctx, config.method, plan, records, do_tune=config.stages != "final",
                   do_final=config.stages != "tune", require_search=config.stages == "final")
    finally:  # what was done is recorded, also when a later step fails (a search whose trials all diverged)
        for r in records:
            r = dataclasses.replace(r, settings={**r.settings, **shown}, run_id=run_id)
            out.append(dataclasses.replace(r, id=store.add(r)) if store is not None else r)
    return out
