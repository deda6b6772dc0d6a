"""Small-data final runs: a split's best configuration trained ``repeats`` times on trainval{i} and
scored on the test set (in this process, or dispatched through the job engine), and the optional
high-resolution fine-tune."""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from ...data.smalldata_splits import SmallDataSplit
from ...metrics.classification import balanced_accuracy
from ...store import Record
from ...tuning import Fixed
from .core import (Context, RunPlan, check_batch, method_inputs, model_name, to_record, torch_threads,
                             train_method)

__all__ = ["final_split"]


def _final_run(ctx: Context, split: SmallDataSplit, method: str, config: dict, opts: RunPlan, *,
               epochs: int, repeat: int) -> dict[str, Any]:
    """One final run (seed ``repeat``) on trainval{i}, scored on the test set (a diverged run gives NaN),
    then, with ``opts.highres_scale`` > 1, its high-resolution fine-tune: ``{"metrics", "highres"}``
    (``highres`` None when off or diverged). Writes nothing: the driver stores the records."""
    tx, ty, _ = ctx.test_set(split)
    classes = list(range(ctx.pool.num_classes))
    try:
        tr, res = train_method(ctx, method, config, opts, epochs=epochs, seed=repeat, train_idx=split.trainval, val=None)
        lane_ready = tr.lane_ready
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
                "highres": None, "lane_ready": False}
    highres = _highres_metrics(ctx, split, tr, opts) if opts.highres_scale > 1 else None
    return {"metrics": metrics, "highres": highres, "lane_ready": lane_ready and highres is None}


def _final_job(ctx: Context, split: SmallDataSplit, method: str, config: dict, opts: RunPlan, epochs: int,
               repeat: int) -> dict[str, Any]:
    """One final run in an engine's worker (a spawned process or a Ray task): quiet, and with
    ``opts.threads`` torch threads (default 1, the CPUs the job declares)."""
    from dataclasses import replace

    from ...progress import set_quiet

    set_quiet(True)
    return _final_run(ctx, split, method, config, replace(opts, threads=opts.threads or 1), epochs=epochs,
                      repeat=repeat)


def _final_outcomes(ctx: Context, split: SmallDataSplit, method: str, config: dict, opts: RunPlan,
                    epochs: int) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(repeat, run)`` in repeat order (``run``: :func:`_final_run`'s result and its ``placement``:
    ``{"kind": "alone"}``, ``{"kind": "lanes", "lanes": n}`` beside other runs of this process, or
    ``{"kind": "job", "engine": ...}``): in this process, or dispatched through the job runner
    (:func:`vistabench.jobs.run_jobs`) and handed back in order as soon as a prefix is done."""
    from ...progress import track

    if not opts.dispatch_finals():
        yield from track(_in_process(ctx, split, method, config, opts, epochs), total=opts.repeats,
                         description=f"{method} split {split.index}")
        return
    from ...jobs import Job, run_jobs

    gpus = 1.0 if opts.device.startswith("cuda") and opts.engine.engine == "ray" else 0.0
    jobs = [Job(_final_job, (ctx, split, method, config, opts, epochs, r), tag=r, gpus=gpus)
            for r in range(opts.repeats)]
    done: dict[int, dict[str, Any]] = {}
    nxt = 0
    outcomes = run_jobs(jobs, engine=opts.engine, cpus_per_job=opts.threads or 1)
    try:
        for out in outcomes:
            # a run that raised (not diverged) stops the command, as in sequence
            done[out.job.tag] = {**out.result(), "placement": {"kind": "job", "engine": opts.engine.engine}}
            while nxt in done:
                yield nxt, done.pop(nxt)
                nxt += 1
    finally:
        outcomes.close()  # stop the pool / Ray before the error propagates


def _in_process(ctx: Context, split: SmallDataSplit, method: str, config: dict, opts: RunPlan,
                epochs: int) -> Iterator[tuple[int, dict[str, Any]]]:
    """The repeats in this process: the first alone; when its steps ran on one CPU and neither its
    loop (``Trainer.lane_ready``) nor anything else in it (outside seeded blocks) drew from torch's
    default generator, the rest at once, one per CPU
    (:mod:`vistabench.learners.lanes`: the same numbers), else one after the other."""
    from ... import epochs as epoch_reports
    from ...learners import lanes

    def run(r: int) -> dict[str, Any]:
        return _final_run(ctx, split, method, config, opts, epochs=epochs, repeat=r)

    if opts.repeats < 1:
        return
    with lanes.Untouched() as untouched:  # and nothing else in the run drew from it unseeded
        first = run(0)
    yield 0, {**first, "placement": {"kind": "alone"}}
    rest = range(1, opts.repeats)
    n = lanes.lanes_available() if first["lane_ready"] and untouched.clean and len(rest) > 1 else 1
    if n < 2:
        for r in rest:
            yield r, {**run(r), "placement": {"kind": "alone"}}
        return
    for r, out, reports in lanes.run_ordered(run, rest, lanes=n):
        for entry in reports:  # a tracked run's curves, in repeat order
            epoch_reports.report(entry)
        # beside another run in this process: its time, images/s and the process's peak memory are shared
        yield r, {**out, "placement": {"kind": "lanes", "lanes": n}}


def final_split(ctx: Context, split: SmallDataSplit, method: str, config: dict, opts: RunPlan,
                records: list[Record] | None = None, *, tune_value: float | None = None) -> list[dict]:
    """Train ``config`` ``opts.repeats`` times on trainval{i}; score balanced accuracy on the test set.

    The repeats are independent: with ``opts.engine`` ray or ``max_parallel > 1`` they run
    through the grid engine (Ray tasks or local processes); records are written here, by the driver,
    in repeat order, and equal those of the sequential path (same seeds, same threads -> same metrics).
    """
    settings = opts.settings(ctx.preset)
    epochs = opts.final_epochs or settings.max_epochs
    space = {k: Fixed(v) for k, v in config.items()}
    check_batch(ctx, space, len(split.trainval), f"trainval{split.index}")
    test_name = ctx.test_set(split).name
    out = []
    for r, run in _final_outcomes(ctx, split, method, config, opts, epochs):
        metrics = run["metrics"]
        settings_d = {"split": split.index, "repeat": r, "config": config, "model": model_name(ctx, opts),
                      "epochs": epochs, "device": opts.device, "test": test_name,
                      "tune_best_val": tune_value, "per_class": ctx.preset.per_class,
                      "recipe": ctx.preset.recipe,
                      "augmentation": method_inputs(method, config, opts.augmentation_for(ctx.preset))[0].to_dict(),
                      "trainval_size": int(len(split.trainval)), "placement": run["placement"]}
        if records is not None:
            records.append(to_record(metrics, dataset=ctx.name, method=method, seed=r, split_hash=split.split_hash,
                                     settings=settings_d, kind="final"))
        entry = {"settings": settings_d, "metrics": metrics}
        if run["highres"] is not None:
            settings_h = dict(settings_d, highres_scale=opts.highres_scale,
                              image_size=ctx.image_size * opts.highres_scale)
            if records is not None:
                records.append(to_record(run["highres"], dataset=ctx.name, method=method, seed=r,
                                         split_hash=split.split_hash, settings=settings_h,
                                         kind="highres"))
            entry["highres"] = {"settings": settings_h, "metrics": run["highres"]}
        out.append(entry)
    return out


def _highres_metrics(ctx: Context, split: SmallDataSplit, tr, opts: RunPlan) -> dict[str, Any]:
    """The paper's high-resolution step (§VII-D): fine-tune the trained model on trainval{i} at
    ``opts.highres_scale`` x the resolution with the same hyper-parameters and epochs, evaluate
    at that resolution. Stored as kind ``highres`` (kept out of Table 3's ``final`` records)."""
    from ...learners.trainer import Trainer

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
