"""Small-data benchmark protocol (Brigato et al.; docs/smalldata.md): splits → tuning → final runs → records.

Pipeline per (dataset, method):

1. split files ``trainval{i}``/``train{i}``/``val{i}`` (+ ``test{i}``) for i = 0..2
   (:mod:`vistabench.data.smalldata_splits`);
2. per split, a search on train{i}/val{i} with the *same* budget for every method
   (:func:`vistabench.tuning.tune`; lr ~ logU(1e-4, 0.1), weight decay ~ logU(1e-5, 0.1),
   batch size from the preset, plus the method's own hyper-parameters). The preset's rules decide
   the rest; by default gem's: ASHA with η = 2, random search, the score after each epoch is the
   mean plain accuracy on val{i} over the last 5 epochs, the best configuration is chosen among all
   trials (stopped ones included), and training batches get the dataset's own augmentation
   (``--recipe vistabench``: η = 3, TPE, last-epoch balanced accuracy, completed trials only,
   pad-crop + flip; see ``docs/smalldata.md``);
3. the split's best configuration trained ``repeats`` times (seeds 0..repeats−1) on trainval{i}
   and scored with balanced accuracy on the test set (official, or test{i}).

Records (``protocol="smalldata"``): ``tag="tune"`` — one per search, settings = the preset, the
recipe, the validation metric, the augmentation and the whole :class:`~vistabench.tuning.TuneResult`
(every trial and its curve), metric ``best_val_score`` (the best trial's windowed score); ``tag="final"`` — one per final
run, metrics ``balanced_accuracy``, ``accuracy``, ``images_per_second``, ``peak_memory_bytes``.
"""

from __future__ import annotations

import math
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, NamedTuple

import numpy as np

from ..data.dataset import DataSplits, Dataset
from ..data.augment import Augmentation
from ..data.smalldata import SmallDataPreset, get_preset, load_smalldata
from ..data.smalldata_splits import SmallDataSplit, read_splits, write_preset_splits
from ..errors import InputError
from ..metrics.classification import balanced_accuracy
from ..store import Record, ResultsStore
from ..tuning import Choice, Fixed, LogUniform, Param, TuneResult, TuneSettings, parse_space, space_to_json, tune

__all__ = ["Options", "Context", "prepare", "method_space", "tune_split", "final_split", "run_method", "score", "to_record",
           "PROTOCOL"]

PROTOCOL = "smalldata"


@dataclass
class Options:
    """Run settings; None means "the preset's value" (the preset of the context's recipe)."""

    model: str | None = None
    epochs: int | None = None
    final_epochs: int | None = None
    trials: int | None = None
    grace_period: int | None = None
    reduction_factor: int | None = None
    repeats: int = 10
    splits: list[int] | None = None
    device: str = "cpu"
    engine: str = "local"
    ray_address: str | None = None
    ray_num_cpus: int | None = None
    sampler: str | None = None
    scheduler: str = "asha"
    score_window: int | None = None
    select: str | None = None
    val_metric: str | None = None
    augmentation: Augmentation | None = None
    seed: int = 0
    space: dict[str, Any] | None = None
    work_dir: str = "smalldata-runs"
    tag_suffix: str = ""
    threads: int | None = None
    highres_scale: int = 1
    max_parallel: int | None = None

    def dispatch_finals(self) -> bool:
        """Whether the final runs go through the grid engine (Ray, or several local processes)."""
        return self.engine == "ray" or (self.max_parallel or 1) > 1

    def settings(self, preset: SmallDataPreset) -> TuneSettings:
        return TuneSettings(
            trials=self.trials if self.trials is not None else preset.trials,
            max_epochs=self.epochs if self.epochs is not None else preset.epochs,
            grace_period=self.grace_period if self.grace_period is not None else min(
                preset.grace_period, self.epochs if self.epochs is not None else preset.epochs),
            reduction_factor=_pick(self.reduction_factor, preset.reduction_factor),
            scheduler=self.scheduler,  # type: ignore[arg-type]
            sampler=_pick(self.sampler, preset.sampler), score_window=_pick(self.score_window, preset.score_window),
            select=_pick(self.select, preset.select), seed=self.seed, engine=self.engine,  # type: ignore[arg-type]
            ray_address=self.ray_address, ray_num_cpus=self.ray_num_cpus,
            ray_gpus_per_trial=1.0 if self.device.startswith("cuda") and self.engine == "ray" else 0.0)

    def val_metric_for(self, preset: SmallDataPreset) -> str:
        m = _pick(self.val_metric, preset.val_metric)
        if m not in ("accuracy", "balanced_accuracy"):
            raise InputError(f"val_metric: expected 'accuracy' or 'balanced_accuracy', got {m!r}")
        return m

    def augmentation_for(self, preset: SmallDataPreset) -> Augmentation:
        return self.augmentation if self.augmentation is not None else preset.augmentation


def _pick(value: Any, default: Any) -> Any:
    return default if value is None else value


class EvalSet(NamedTuple):
    """A split's test set: ``images`` (N, H, W, C), ``labels`` (N,) and its ``name`` (test / test{i})."""

    images: np.ndarray
    labels: np.ndarray
    name: str


@dataclass
class Context:
    """A loaded dataset with its preset and split files."""

    name: str
    preset: SmallDataPreset
    data: DataSplits
    splits: list[SmallDataSplit]
    image_size: int
    in_channels: int
    root: str | None = None

    @property
    def pool(self) -> Dataset:
        return self.data.train

    def highres(self, scale: int) -> DataSplits:
        """The dataset at ``scale`` x the side length: re-read from ``root`` for presets that resize
        variable-size images (CUB, ISIC, CLaMM, folders), else the pool up-sampled bilinearly."""
        cache = self.__dict__.setdefault("_highres", {})
        if scale not in cache:
            size = self.image_size * scale
            if self.preset.image_size is not None:
                data = load_smalldata(self.name, self.root, image_size=size)
                if not np.array_equal(data.train.labels, self.pool.labels):
                    raise InputError(f"dataset {self.name!r}: re-reading at {size} px gave a different pool")
            else:
                data = DataSplits(train=_upsample(self.pool, scale),
                                  test=None if self.data.test is None else _upsample(self.data.test, scale))
            cache[scale] = data
        return cache[scale]

    def test_set(self, split: SmallDataSplit) -> "EvalSet":
        if split.test is not None:
            return EvalSet(self.pool.images[split.test], self.pool.labels[split.test], f"test{split.index}")
        if self.data.test is None:
            raise InputError(f"dataset {self.name!r}: no official test set and no test{split.index}.json split file")
        return EvalSet(self.data.test.images, self.data.test.labels, "test")


def prepare(dataset: str, *, root: str | None = None, split_dir: str | os.PathLike[str] | None = None,
            per_class: int | None = None, seed: int = 0, image_size: int | None = None,
            splits: list[int] | None = None, out_splits: str | os.PathLike[str] | None = None,
            recipe: str = "gem", train_per_class: int | None = None,
            val_fraction: float | None = None) -> Context:
    """Load ``dataset`` and its split files (``split_dir``), or write fresh ones to ``out_splits``.

    ``recipe`` picks the preset's rules ("gem" or "vistabench"); ``per_class``, ``train_per_class``
    and ``val_fraction`` override its split sizes when the files are written here.
    """
    preset = get_preset(dataset, recipe=recipe)
    data = load_smalldata(dataset, root, image_size=image_size)
    if split_dir is None:
        if out_splits is None:
            raise InputError("--splits: give a folder of split files, or an output folder to write them to")
        write_preset_splits(data, out_splits, dataset_name=dataset, preset=preset, seed=seed, per_class=per_class,
                            train_per_class=train_per_class, val_fraction=val_fraction)
        split_dir = out_splits
    sp = read_splits(split_dir, data.train, dataset_name=dataset, splits=splits)
    img = data.train.images
    return Context(dataset, preset, data, sp, int(img.shape[1]), int(img.shape[3]), root=root)


def _upsample(ds: Dataset, scale: int) -> Dataset:
    import dataclasses

    import torch

    x = torch.from_numpy(np.ascontiguousarray(ds.images)).permute(0, 3, 1, 2).float()
    y = torch.nn.functional.interpolate(x, scale_factor=scale, mode="bilinear", align_corners=False)
    if ds.images.dtype == np.uint8:
        y = y.round().clamp(0, 255)
    return dataclasses.replace(ds, images=y.permute(0, 2, 3, 1).numpy().astype(ds.images.dtype))


def method_space(method: str, preset: SmallDataPreset, *, overrides: dict[str, Any] | None = None) -> dict[str, Param]:
    """The search space of ``method`` on a dataset (paper Table 2 + the method's own parameters)."""
    from ..learners.smalldata import get_method

    m = get_method(method)
    space: dict[str, Param] = {"lr": LogUniform(1e-4, 0.1), "weight_decay": LogUniform(1e-5, 0.1),
                               "batch_size": Choice(tuple(preset.batch_sizes))}
    space.update(m.space)
    for k, v in m.fixed.items():
        space[k] = Fixed(v)
    if overrides:
        from .._validation import close_matches

        if not isinstance(overrides, dict):
            raise InputError(f"--space: expected a JSON object of parameter -> range, got {type(overrides).__name__}")
        for k in overrides:  # an unknown key would be ignored while the real parameter keeps its range
            if k not in space:
                raise InputError(f"--space: method {method!r} has no parameter {k!r}{close_matches(k, sorted(space))}; "
                                 f"its parameters are {sorted(space)}")
        space.update(parse_space(overrides))
    if not m.tuned:  # nothing is searched: a batch-size choice becomes its median, anything else is an error
        for k, p in list(space.items()):
            if isinstance(p, Choice) and k == "batch_size":
                vals = sorted(p.values)
                space[k] = Fixed(vals[len(vals) // 2])
            elif not isinstance(p, Fixed):
                raise InputError(f"method {method!r} is not tuned: the search space cannot search {k!r}")
    return space


def _model_name(ctx: Context, opts: Options) -> str:
    return opts.model or ctx.preset.model


def _train(ctx: Context, method: str, config: dict, opts: Options, *, epochs: int, seed: int,
           train_idx: np.ndarray, val: tuple[np.ndarray, np.ndarray] | None, report=None):
    from ..learners.smalldata import build_method
    from ..learners.trainer import TrainConfig, Trainer

    model, loss = build_method(method, _model_name(ctx, opts), config, num_classes=ctx.pool.num_classes,
                               in_channels=ctx.in_channels, image_size=ctx.image_size, seed=seed)
    cfg = TrainConfig(epochs=epochs, lr=float(config["lr"]), weight_decay=float(config["weight_decay"]),
                      batch_size=int(config["batch_size"]), momentum=0.9, seed=seed, device=opts.device,
                      augment=opts.augmentation_for(ctx.preset), count_flops=False)
    classes = list(range(ctx.pool.num_classes))
    holder: dict[str, Any] = {}
    plain = opts.val_metric_for(ctx.preset) == "accuracy"

    def callback(epoch: int, metrics: dict) -> None:
        vx, vy = val  # type: ignore[misc]
        pred = holder["trainer"].predict_logits(vx).argmax(1)
        report(epoch, float(np.mean(pred == vy)) if plain else balanced_accuracy(vy, pred, classes=classes))

    tr = Trainer(model, cfg, loss_fn=loss, callback=callback if report is not None else None)
    holder["trainer"] = tr
    with torch_threads(opts.threads):
        res = tr.fit(ctx.pool.images[train_idx], ctx.pool.labels[train_idx])
    return tr, res


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run with ``n`` torch intra-op threads (None: leave as is), restoring the setting after."""
    if n is None:
        yield
        return
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(old)


def _check_batch(ctx: Context, space: dict[str, Param], n_train: int, where: str) -> None:
    p = space.get("batch_size")
    sizes = list(p.values) if isinstance(p, Choice) else [p.value] if isinstance(p, Fixed) else []
    big = [int(b) for b in sizes if int(b) > n_train]
    if big:
        raise InputError(f"batch_size: {big[0]} is larger than the {n_train} images of {where}; "
                         f"lower --batch-sizes or raise --per-class")


def _study(ctx: Context, split: SmallDataSplit, method: str, opts: Options) -> tuple[str, Path]:
    """Study name and file. Everything that changes what a trial means is in the name (so a rerun with
    other epochs or another space starts a new study); the number of trials is not (so raising
    --trials extends a finished search)."""
    import hashlib
    import json

    st = opts.settings(ctx.preset)
    key = {"space": space_to_json(method_space(method, ctx.preset, overrides=opts.space)),
           "split": split.split_hash, "sampler": st.sampler, "scheduler": st.scheduler,
           "rf": st.reduction_factor}
    key.update(window=st.score_window, val_metric=opts.val_metric_for(ctx.preset),
               augment=opts.augmentation_for(ctx.preset).to_dict())
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:8]
    name = (f"{ctx.name}-{method}-{_model_name(ctx, opts)}-split{split.index}-seed{opts.seed}"
            f"-e{st.max_epochs}-g{st.grace_period}-{digest}")
    return name, Path(opts.work_dir) / "studies" / f"{name}.db"


def _check_search_done(ctx: Context, split: SmallDataSplit, method: str, opts: Options) -> None:
    name, path = _study(ctx, split, method, opts)
    hint = (f"run `vistabench smalldata tune --dataset {ctx.name} --method {method}` with the same "
            f"--work-dir, --model and --seed first")
    if opts.engine == "ray":
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


def tune_split(ctx: Context, split: SmallDataSplit, method: str, opts: Options,
               store: ResultsStore | None = None) -> TuneResult:
    """Search hyper-parameters of ``method`` on train{i}/val{i}; store a ``tune`` record."""
    settings = opts.settings(ctx.preset)
    space = method_space(method, ctx.preset, overrides=opts.space)
    _check_batch(ctx, space, len(split.train), f"train{split.index}")
    vx, vy = ctx.pool.images[split.val], ctx.pool.labels[split.val]

    def objective(config: dict, report) -> float:
        scores: list[float] = []

        def rep(epoch: int, value: float) -> None:
            scores.append(value)
            report(epoch, value)  # the engine averages the last score_window values

        _train(ctx, method, config, opts, epochs=settings.max_epochs, seed=opts.seed, train_idx=split.train,
               val=(vx, vy), report=rep)
        return scores[-1]

    model = _model_name(ctx, opts)
    study, storage = _study(ctx, split, method, opts)
    result = tune(objective, space, settings, storage=storage, study_name=study)
    if store is not None:
        store.add(Record(protocol=PROTOCOL, dataset=ctx.name, method=method, seed=opts.seed,
                         split_hash=split.split_hash, tag="tune" + opts.tag_suffix,
                         settings={"split": split.index, "model": model, "device": opts.device,
                                   "preset": ctx.preset.to_dict(), "recipe": ctx.preset.recipe,
                                   "val_metric": opts.val_metric_for(ctx.preset),
                                   "augmentation": opts.augmentation_for(ctx.preset).to_dict(),
                                   "search": result.to_dict()},
                         metrics={"best_val_score": result.best_value,
                                  "trials": len(result.trials), "total_epochs": result.total_epochs}))
    return result


def _final_run(ctx: Context, split: SmallDataSplit, method: str, config: dict, opts: Options, *,
               epochs: int, repeat: int) -> dict[str, Any]:
    """One final run (seed ``repeat``) on trainval{i}, scored on the test set (a diverged run gives NaN),
    then, with ``opts.highres_scale`` > 1, its high-resolution fine-tune: ``{"metrics", "highres"}``
    (``highres`` None when off or diverged). Writes nothing: the driver stores the records."""
    tx, ty, _ = ctx.test_set(split)
    classes = list(range(ctx.pool.num_classes))
    try:
        tr, res = _train(ctx, method, config, opts, epochs=epochs, seed=repeat, train_idx=split.trainval, val=None)
        with torch_threads(opts.threads):
            pred = tr.predict_logits(tx).argmax(1)
        metrics = {"balanced_accuracy": balanced_accuracy(ty, pred, classes=classes),
                   "accuracy": float(np.mean(pred == ty)), "images_per_second": res.images_per_second,
                   "peak_memory_bytes": res.peak_memory_bytes, "peak_memory_kind": res.peak_memory_kind,
                   "train_seconds": res.train_seconds, "diverged": False}
    except FloatingPointError as exc:  # a diverged run is recorded as undefined (NaN), not as a score
        return {"metrics": {"balanced_accuracy": float("nan"), "accuracy": float("nan"),
                            "images_per_second": float("nan"), "peak_memory_bytes": None, "peak_memory_kind": None,
                            "train_seconds": float("nan"), "diverged": True, "error": str(exc)},
                "highres": None}
    highres = _highres_metrics(ctx, split, tr, opts) if opts.highres_scale > 1 else None
    return {"metrics": metrics, "highres": highres}


def _final_job(ctx: Context, split: SmallDataSplit, method: str, config: dict, opts: Options, epochs: int,
               repeat: int) -> dict[str, Any]:
    """One final run in an engine's worker (a spawned process or a Ray task): quiet, and with
    ``opts.threads`` torch threads (default 1, the CPUs the job declares)."""
    from dataclasses import replace

    from ..progress import set_quiet

    set_quiet(True)
    return _final_run(ctx, split, method, config, replace(opts, threads=opts.threads or 1), epochs=epochs,
                      repeat=repeat)


def _final_outcomes(ctx: Context, split: SmallDataSplit, method: str, config: dict, opts: Options,
                    epochs: int) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(repeat, run)`` in repeat order (``run``: :func:`_final_run`'s result): in this process, or dispatched through the grid engine
    (:func:`vistabench.jobs.run_jobs`) and handed back in order as soon as a prefix is done."""
    from ..progress import track

    if not opts.dispatch_finals():
        for r in track(range(opts.repeats), total=opts.repeats, description=f"{method} split {split.index}"):
            yield r, _final_run(ctx, split, method, config, opts, epochs=epochs, repeat=r)
        return
    from ..jobs import Job, run_jobs

    gpus = 1.0 if opts.device.startswith("cuda") and opts.engine == "ray" else 0.0
    jobs = [Job(_final_job, (ctx, split, method, config, opts, epochs, r), tag=r, gpus=gpus)
            for r in range(opts.repeats)]
    done: dict[int, dict[str, Any]] = {}
    nxt = 0
    outcomes = run_jobs(jobs, engine=opts.engine, max_parallel=opts.max_parallel, cpus_per_job=opts.threads or 1,
                        ray_address=opts.ray_address)
    try:
        for out in outcomes:
            done[out.job.tag] = out.result()  # a run that raised (not diverged) stops the command, as in sequence
            while nxt in done:
                yield nxt, done.pop(nxt)
                nxt += 1
    finally:
        outcomes.close()  # stop the pool / Ray before the error propagates


def final_split(ctx: Context, split: SmallDataSplit, method: str, config: dict, opts: Options,
                store: ResultsStore | None = None, *, tune_value: float | None = None) -> list[dict]:
    """Train ``config`` ``opts.repeats`` times on trainval{i}; score balanced accuracy on the test set.

    The repeats are independent: with ``opts.engine == "ray"`` or ``opts.max_parallel > 1`` they run
    through the grid engine (Ray tasks or local processes); records are written here, by the driver,
    in repeat order, and equal those of the sequential path (same seeds, same threads -> same metrics).
    """
    settings = opts.settings(ctx.preset)
    epochs = opts.final_epochs or settings.max_epochs
    space = {k: Fixed(v) for k, v in config.items()}
    _check_batch(ctx, space, len(split.trainval), f"trainval{split.index}")
    test_name = ctx.test_set(split).name
    out = []
    for r, run in _final_outcomes(ctx, split, method, config, opts, epochs):
        metrics = run["metrics"]
        settings_d = {"split": split.index, "repeat": r, "config": config, "model": _model_name(ctx, opts),
                      "epochs": epochs, "device": opts.device, "test": test_name,
                      "tune_best_val": tune_value, "per_class": ctx.preset.per_class,
                      "recipe": ctx.preset.recipe, "augmentation": opts.augmentation_for(ctx.preset).to_dict(),
                      "trainval_size": int(len(split.trainval))}
        if store is not None:
            store.add(to_record(metrics, dataset=ctx.name, method=method, seed=r, split_hash=split.split_hash,
                                settings=settings_d, tag="final" + opts.tag_suffix))
        entry = {"settings": settings_d, "metrics": metrics}
        if run["highres"] is not None:
            settings_h = dict(settings_d, highres_scale=opts.highres_scale,
                              image_size=ctx.image_size * opts.highres_scale)
            if store is not None:
                store.add(to_record(run["highres"], dataset=ctx.name, method=method, seed=r,
                                    split_hash=split.split_hash, settings=settings_h, tag="highres" + opts.tag_suffix))
            entry["highres"] = {"settings": settings_h, "metrics": run["highres"]}
        out.append(entry)
    return out


def _highres_metrics(ctx: Context, split: SmallDataSplit, tr, opts: Options) -> dict[str, Any]:
    """The paper's high-resolution step (§VII-D): fine-tune the trained model on trainval{i} at
    ``opts.highres_scale`` x the resolution with the same hyper-parameters and epochs, evaluate
    at that resolution. Stored with tag ``highres`` (kept out of Table 3's ``final`` records)."""
    from ..learners.trainer import Trainer

    hi = ctx.highres(opts.highres_scale)
    tx, ty = (hi.train.images[split.test], hi.train.labels[split.test]) if split.test is not None else (
        hi.test.images, hi.test.labels)  # type: ignore[union-attr]
    try:
        ft = Trainer(tr.model, tr.cfg, loss_fn=tr.loss_fn)
        with torch_threads(opts.threads):
            res = ft.fit(hi.train.images[split.trainval], hi.train.labels[split.trainval])
            pred = ft.predict_logits(tx).argmax(1)
        return {"balanced_accuracy": balanced_accuracy(ty, pred, classes=list(range(ctx.pool.num_classes))),
                "accuracy": float(np.mean(pred == ty)), "images_per_second": res.images_per_second,
                "peak_memory_bytes": res.peak_memory_bytes, "peak_memory_kind": res.peak_memory_kind,
                "train_seconds": res.train_seconds, "diverged": False}
    except FloatingPointError as exc:
        return {"balanced_accuracy": float("nan"), "accuracy": float("nan"), "diverged": True, "error": str(exc)}


def score(predictions: Any, ctx: Context, split_index: int) -> dict[str, Any]:
    """Score a predictions file (or loaded predictions) on split ``split_index``'s test set.

    The test set is the dataset's official one, or ``test{i}.json`` for datasets without one; the
    predictions' labels must be that set's labels in order. Returns the metrics of a final run
    (``balanced_accuracy`` over the declared classes, ``accuracy``; training cost null: the model
    was trained elsewhere).
    """
    from ..data.predictions import Predictions, load_predictions

    pred = predictions if isinstance(predictions, Predictions) else load_predictions(predictions)
    split = next((sp for sp in ctx.splits if sp.index == split_index), None)
    if split is None:
        raise InputError(f"--split: no split {split_index} among the split files (have {[sp.index for sp in ctx.splits]})")
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


def to_record(result: dict[str, Any], *, dataset: str, method: str, seed: int | None, split_hash: str | None,
              settings: dict[str, Any], tag: str = "final") -> Record:
    """The results-store record of one scored final run (the same shape from ``score`` and ``run``)."""
    metrics = {k: v for k, v in result.items() if k != "settings"}
    return Record(protocol=PROTOCOL, dataset=dataset, method=method, seed=seed, split_hash=split_hash,
                  tag=tag, settings={**result.get("settings", {}), **settings}, metrics=metrics)


def run_method(ctx: Context, method: str, opts: Options, store: ResultsStore | None = None, *,
               do_tune: bool = True, do_final: bool = True, require_search: bool = False) -> dict[str, Any]:
    """Tune (unless the method has nothing to search) and/or run the final trainings on every split.

    With ``require_search`` a missing or unfinished search is an error instead of being run.
    """
    from ..jobs import check_engine
    from ..learners.smalldata import get_method

    check_engine(opts.engine, max_parallel=opts.max_parallel, ray_address=opts.ray_address)
    m = get_method(method)
    space = method_space(method, ctx.preset, overrides=opts.space)
    searched = any(not isinstance(p, Fixed) for p in space.values())
    summary: dict[str, Any] = {"dataset": ctx.name, "method": method, "splits": []}
    for split in ctx.splits:
        entry: dict[str, Any] = {"split": split.index}
        config, value = None, None
        if searched and m.tuned:
            if require_search:
                _check_search_done(ctx, split, method, opts)
            if do_tune or do_final:
                res = tune_split(ctx, split, method, opts, store if do_tune else None)
                config, value = res.best_config, res.best_value
                entry.update(best_config=config, best_val=value, trials=len(res.trials),
                             total_epochs=res.total_epochs, resumed_trials=res.resumed_trials)
                if config is None:
                    raise InputError(f"search for {method!r} on split {split.index}: no trial completed "
                                     f"(all pruned or diverged); raise --trials or --epochs")
        else:
            config = {k: p.value for k, p in space.items()}  # type: ignore[union-attr]
            entry.update(best_config=config, best_val=None, trials=0)
        if do_final:
            runs = final_split(ctx, split, method, config, opts, store, tune_value=value)
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
