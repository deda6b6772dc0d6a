"""The never-ending task-stream protocol (Nevis'22): runner with compute accounting and resume.

:func:`run_stream` hands a learner one task at a time, in stream order: a :class:`TaskView` of the
current task and a read-only *copy* of its training part. The next task's data are not even
loaded until the learner has finished the current one, and the test part never reaches the
learner except as unlabeled images for :meth:`predict`. After each task the runner scores the
predictions (error = 1 - accuracy, or 1 - mAP for multilabel tasks, where a label without
positives in the test part counts AP 0 as in dm_nevis / sklearn, or is left out with
``absent_labels="omit"``), and writes

* the learner's state and the events so far to ``<work_dir>/<run_id>/checkpoint.pt`` (atomic
  replace; loaded with ``torch.load(weights_only=True)``): the run's journal, in its work folder.

When the call ends (all tasks done, ``max_tasks`` reached, a task failed or the run was
interrupted) the run's events go to the results store as its records, replacing those the run
stored before (one transaction): protocol ``"stream"``, kind ``event``, ``run_id`` = the run id,
dataset = stream name, method = learner name, metrics = task index/uid/name/year/domain/kind/split,
error, FLOPs (training, evaluation, total), parameters, seconds, learning curve.

Running the same command again resumes after the last completed task (the checkpoint holds the
state that task produced; seeds are per task, so a resumed run equals an uninterrupted one); the
store is never read back to resume. A checkpoint that cannot be read back whole (cut short,
overwritten) is never trusted: it is removed with a warning and the run is redone from its first
task.
"""

from __future__ import annotations

import json
from contextlib import nullcontext
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ... import progress
from ...errors import InputError
from ...jsonutil import read_json
from ...metrics.stream import ABSENT_LABELS, cflop_parts, task_error
from ...store import Record, ResultsStore
from ...streams import Stream, Task, load_stream
from ...streams.sources import TaskSplits, resolve_task
from .config import PretrainOptions, StreamConfig

__all__ = ["run", "run_stream", "default_run_id", "run_id_for", "summarise_events", "task_seed", "run_events",
           "StreamRunResult", "stream_split", "write_stream_split", "catalog", "score", "pretrain", "to_records",
           "event_record", "EVENT_KEYS"]

PROTOCOL = "stream"


def task_seed(seed: int, index: int) -> int:
    """The seed of task ``index`` in a run with ``seed`` (independent of where a run resumed)."""
    return int(np.random.SeedSequence([int(seed), int(index)]).generate_state(1)[0])


def default_run_id(stream: Stream, learner: str, trials: int, steps: int, seed: int, tag: str | None = None) -> str:
    rid = f"{stream.name}-{learner}-t{trials}-s{steps}-seed{seed}"
    return f"{rid}-{tag}" if tag else rid


def run_id_for(stream: Stream, config: StreamConfig) -> str:
    """The run id of ``config``: its ``run_id``, else ``STREAM-LEARNER-tTRIALS-sSTEPS-seedSEED`` plus a hash
    of every other result-changing field that differs from its default (recipe, learner options, ...),
    so two runs (grid cells) that differ in any of them never share checkpoints or records."""
    if config.run_id:
        return config.run_id
    return default_run_id(stream, config.learner, config.trials, config.steps, config.seed,
                          config.run_id_suffix() or None)


def run(config: StreamConfig, *, store: ResultsStore | None = None, work_dir: str | Path | None = None) -> list[Record]:
    """Run ``config.learner`` over ``config.stream``: one record per task event, in stream order.

    ``store``: where the events go (their ids set); ``work_dir``: where the run's checkpoint lives
    (``<work_dir>/<run_id>/checkpoint.pt``; running the same config again resumes after the last
    completed task). Without ``work_dir`` nothing is written to disk and the run starts afresh.
    """
    from ...learners.stream import TrialEngine, make_learner

    config.refuse_tracking()
    if config.data_root is not None and not Path(config.data_root).is_dir():
        raise InputError(f"data_root {config.data_root!r}: no such folder")
    stream = load_stream(config.stream, meta_test_from_year=config.meta_test_cut())
    learner = make_learner(config.learner, **config.learner_config())
    engine = TrialEngine(engine=config.to_engine(),
                         threads_per_trial=config.threads if config.threads is not None else 1)
    settings = {"trials": config.trials, "steps": config.steps}
    if config.recipe != "cpu":
        settings["recipe"] = config.recipe
    settings["config"] = config.to_dict()  # what --print-config printed
    import torch

    threads = torch.get_num_threads()
    if config.threads:
        torch.set_num_threads(config.threads)
    try:
        res = run_stream(stream, learner, store=store, run_id=run_id_for(stream, config), work_dir=work_dir,
                         seed=config.seed, data_root=config.data_root, settings=settings, max_tasks=config.max_tasks,
                         absent_labels=config.multilabel_absent,
                         trial_engine=engine if engine.dispatches() else None)
    finally:
        torch.set_num_threads(threads)
    return res.records


def summarise_events(events: list[dict[str, Any]], *, run_id: str = "") -> dict[str, Any]:
    """Average meta-test error and cFLOP (with its training / selection parts) of a run's events."""
    return StreamRunResult(run_id, list(events), 0).summary()


@dataclass
class StreamRunResult:
    run_id: str
    events: list[dict]
    resumed_from: int

    meta_test_cut: str = ""
    records: list[Record] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        mt = [e["error"] for e in self.events if e["split"] == "meta-test"]
        fin = [x for x in mt if x is not None and np.isfinite(x)]
        split = all(e.get("flops_train") is not None and e.get("flops_eval") is not None for e in self.events)
        parts = cflop_parts(self.events) if split else {"train": None, "selection": None}  # scored events may lack them
        return {"run": self.run_id, "tasks": len(self.events), "resumed_from": self.resumed_from,
                "meta_test_cut": self.meta_test_cut,
                "avg_error": float(np.mean(fin)) if fin else float("nan"),
                "cflop": int(sum(e["flops"] for e in self.events)),
                "cflop_train": parts["train"], "cflop_selection": parts["selection"]}


def run_events(store: ResultsStore, run_id: str) -> list[Record]:
    """The task-event records of a run, in stream order."""
    recs = store.records(protocol=PROTOCOL, kind="event", run_id=run_id)
    return sorted(recs, key=lambda r: r.metrics["task_index"])


def _save_checkpoint(path: Path, payload: dict) -> None:
    import torch

    from ...atomic import write_with

    write_with(path, lambda f: torch.save(payload, f), what="checkpoint file")


def _load_checkpoint(path: Path) -> dict | None:
    """The run's checkpoint, or None (with a warning, the file removed) when it is damaged — cut
    short, overwritten, not one of ours: it is never trusted, the run is redone from its first task."""
    import warnings

    import torch

    try:
        ck = torch.load(path, map_location="cpu", weights_only=True)
        if isinstance(ck, dict) and {"stream_hash", "state", "events"} <= set(ck) and isinstance(ck["events"], list):
            return ck
        why = "not a checkpoint of a stream run"
    except Exception as exc:  # a zip cut short, garbage, a pickle of other objects
        why = f"unreadable: {type(exc).__name__}"
    path.unlink(missing_ok=True)
    warnings.warn(f"checkpoint file {str(path)!r}: damaged ({why}); removed, the run starts again from its first "
                  "task (events already stored are not stored twice)", UserWarning, stacklevel=3)
    return None


def run_stream(
    stream: Stream | str,
    learner: Any,
    *,
    store: ResultsStore | None,
    run_id: str,
    work_dir: str | Path | None,
    seed: int = 0,
    data_root: str | Path | None = None,
    resolver: Callable[[Task], TaskSplits] | None = None,
    settings: dict | None = None,
    max_tasks: int | None = None,
    absent_labels: str = "zero",
    trial_engine: Any = None,
) -> StreamRunResult:
    """Run ``learner`` over ``stream``; write one event per task; resume if a checkpoint exists.

    Parameters
    ----------
    stream : Stream or str
    learner : StreamLearner
        Implements ``init``, ``train(task, data, state, ledger)``, ``predict``, ``state_to_dict``,
        ``state_from_dict``, ``num_parameters`` (see :mod:`vistabench.learners.stream`).
    store : ResultsStore or None
        Where the task events go when the call ends (None: only the run's checkpoint keeps them).
    run_id : str
        Run id of the run's records and name of its checkpoint folder.
    work_dir : path or None
        Where ``<run_id>/checkpoint.pt`` lives (None: no checkpoint, no resume).
    seed : int
        Run seed; task i gets :func:`task_seed` (seed, i).
    data_root : path, optional
        Folder with the tasks' data (for streams whose data are not bundled).
    resolver : callable, optional
        ``resolver(task) -> TaskSplits``; default :func:`~vistabench.streams.sources.resolve_task`.
    settings : dict, optional
        Extra settings stored with every event (e.g. trials, steps).
    max_tasks : int, optional
        Stop after this many tasks in total (a run can be continued later by calling again).
    absent_labels : {"zero", "omit"}
        Multilabel error: a label without positives in the test part counts AP 0 (``"zero"``,
        dm_nevis's sklearn macro AP) or is left out of the mean (``"omit"``).
    trial_engine : TrialEngine, optional
        Where a search learner runs each task's trials (:class:`~vistabench.learners.stream.TrialEngine`:
        local processes or Ray tasks, one Ray kept up for the whole run); None: one after another
        here. The events are the same either way.
    """
    if absent_labels not in ABSENT_LABELS:
        raise InputError(f"absent_labels: expected one of {list(ABSENT_LABELS)}, got {absent_labels!r}")
    if isinstance(stream, str):
        stream = load_stream(stream)
    settings = {**(settings or {}), "absent_labels": absent_labels}
    resolve = resolver or (lambda t: resolve_task(t, stream, data_root=data_root))
    ckpt_path = Path(work_dir) / run_id / "checkpoint.pt" if work_dir is not None else None
    ck, damaged = None, False
    if ckpt_path is not None and ckpt_path.is_file():
        ck = _load_checkpoint(ckpt_path)
        damaged = ck is None
    current = _learner_record(stream, learner, seed, run_id, {}, settings).settings
    # the store is read only to refuse mixing two runs under one id (never to resume)
    existing = run_events(store, run_id) if store is not None and (ck is None or "settings" not in ck) else []
    if ck is not None:
        if ck.get("stream_hash") != stream.hash:
            raise InputError(f"run {run_id!r}: its checkpoint was made on a different stream definition; "
                             f"use another run_id or delete {str(ckpt_path)!r}")
        _check_same_settings(run_id, ckpt_path, [json.loads(ck["settings"])] if isinstance(ck.get("settings"), str)
                             else [r.settings for r in existing[:1]], current)
        state = learner.state_from_dict(ck["state"])
        events: list[dict] = list(ck["events"])
    else:
        if existing and damaged:  # redone from the first task, its events replace the stored ones
            _check_same_settings(run_id, ckpt_path, [existing[0].settings], current)
        elif existing:
            where = f"at {str(ckpt_path)!r}" if ckpt_path is not None else "(no work_dir given)"
            raise InputError(f"run {run_id!r} has {len(existing)} events in the store but no checkpoint {where}; "
                             "cannot resume (use another run_id)")
        state, events = learner.init(), []
    start = len(events)
    stop = len(stream.tasks) if max_tasks is None else min(len(stream.tasks), int(max_tasks))
    if trial_engine is None:
        session = nullcontext()
    else:
        from ...jobs import engine_session

        learner.trial_engine = trial_engine
        session = engine_session(trial_engine.engine, cpus_per_job=trial_engine.threads_per_trial)
    records: list[Record] = []
    try:
        with session:
            _run_tasks(stream, learner, stream.tasks[start:stop], state=state, events=events, run_id=run_id,
                       seed=seed, resolve=resolve, settings=settings, absent_labels=absent_labels, ckpt_path=ckpt_path)
    finally:  # what the run did goes to the store, also when a task failed or the run was interrupted
        records = [_learner_record(stream, learner, seed, run_id, ev, settings) for ev in events]
        if store is not None and records and len(records) >= len(existing):
            store.replace_run(records, protocol=PROTOCOL, run_id=run_id)
    return StreamRunResult(run_id, events, start, stream.meta_test_cut(), records)


def _run_tasks(stream: Stream, learner: Any, tasks: list[Task], *, state: Any, events: list[dict], run_id: str,
               seed: int, resolve: Callable[[Task], TaskSplits], settings: dict, absent_labels: str,
               ckpt_path: Path | None) -> None:
    """Hand ``tasks`` to the learner one at a time; append an event per task and checkpoint it."""
    from ...learners.stream.base import ComputeLedger, TaskView

    for task in progress.track(tasks, total=len(tasks), description=f"stream {run_id}"):
        data = resolve(task)
        view = TaskView(uid=task.uid, name=task.name, year=task.year, domain=task.domain, kind=task.kind,
                        num_classes=data.train.num_classes, class_names=tuple(data.train.class_names),
                        seed=task_seed(seed, task.index))
        ledger = ComputeLedger()
        t0 = time.perf_counter()
        state, predictor = learner.train(view, data.train.read_only_copy(), state, ledger)
        train_seconds = time.perf_counter() - t0
        test_images = data.test.images.copy()
        test_images.setflags(write=False)
        scores = learner.predict(predictor, test_images)
        err = task_error(data.test.targets, scores, kind=task.kind, absent_labels=absent_labels)
        info = getattr(predictor, "info", {}) or {}
        ev = {
            "task_index": task.index, "task": task.uid, "name": task.name, "year": task.year,
            "domain": task.domain, "kind": task.kind, "split": task.split,
            "train_size": int(len(data.train)), "test_size": int(len(data.test)),
            "resolution": list(task.resolution) if task.resolution else
            [int(data.train.images.shape[1]), int(data.train.images.shape[2])],
            "error": float(err), "flops": int(ledger.total), "flops_train": int(ledger.train_flops),
            "flops_eval": int(ledger.eval_flops), "train_steps": int(ledger.train_steps),
            "parameters": int(learner.num_parameters(predictor)), "seconds": float(train_seconds),
            "curve": [float(c) for c in getattr(predictor, "curve", [])],
            "init_from": info.get("init_from"), "best_trial": info.get("best_trial"),
        }
        events.append(ev)
        if ckpt_path is not None:
            _save_checkpoint(ckpt_path, {"stream_hash": stream.hash, "run_id": run_id, "state": learner.state_to_dict(state),
                                         "events": events,
                                         "settings": _settings_json(stream, learner, seed, run_id, settings)})


def _settings_json(stream: Stream, learner: Any, seed: int, run_id: str, settings: dict | None) -> str:
    from ...jsonutil import dumps

    return dumps(_learner_record(stream, learner, seed, run_id, {}, settings).settings, sort_keys=True)


def _check_same_settings(run_id: str, ckpt_path: Path, started: list[dict], current: dict) -> None:
    """A resume must use the settings the run started with: one record per run, one setting each.

    ``started``: the settings of the run's first stored event, else those saved in its checkpoint (a run
    stored before named the backbone ``arch``: read as ``model``).
    """
    from ...jsonutil import dumps
    from ...learners.stream.options import read_settings

    if not started:
        return
    before, now = read_settings(started[0]), json.loads(dumps(current))
    if "config" in before and "config" in now:  # the run's own config; runtime-only fields may change
        # runtime-only fields, the device (as below) and how far this call goes may change on a resume
        runtime = {i.name for i in StreamConfig.fields_info() if i.runtime} | {"device", "max_tasks"}
        before = {**before, "config": {k: v for k, v in before["config"].items() if k not in runtime}}
        now = {**now, "config": {k: v for k, v in now["config"].items() if k not in runtime}}
    elif "config" not in before:  # a run started before events kept their config
        now = {k: v for k, v in now.items() if k != "config"}
    for key in sorted(set(before) | set(now)):
        if key != "device" and before.get(key) != now.get(key):
            field_name = {"meta_test_from_year": "meta_test_from", "arch_options": "width"}.get(key, key)
            raise InputError(f"run_id {run_id!r}: the run was started with {key}={before.get(key)!r}, now "
                             f"{now.get(key)!r}: resume it with the same {field_name}, or start another run "
                             f"(another run_id, or delete {str(ckpt_path.parent)!r})")


def _learner_record(stream: Stream, learner: Any, seed: int, run_id: str, ev: dict, settings: dict | None) -> Record:
    own = learner.settings() if hasattr(learner, "settings") else {}
    return event_record(stream, ev, method=getattr(learner, "name", type(learner).__name__), seed=seed,
                        run_id=run_id, settings={**own, **(settings or {})})


def event_record(stream: Stream, ev: dict, *, method: str, seed: int | None, run_id: str,
                 settings: dict | None = None) -> Record:
    """The results-store record of one task event of a run (kind ``event``, ``run_id`` the run id)."""
    s = {"stream": stream.name, "stream_origin": stream.origin, "meta_test_from_year": stream.meta_test_from_year,
         "meta_test_choice": stream.meta_test_choice, "num_tasks": len(stream.tasks), **(settings or {})}
    return Record(protocol=PROTOCOL, dataset=stream.name, method=method, seed=seed, split_hash=stream.hash,
                  settings=s, metrics=dict(ev), kind="event", run_id=run_id)


# ------------------------------------------------------------------------------ split / score
SPLIT_KIND = "stream-split"
EVENT_KEYS = ("task_index", "task", "name", "year", "domain", "kind", "split", "train_size", "test_size",
              "resolution", "error", "flops", "flops_train", "flops_eval", "train_steps", "parameters",
              "seconds", "curve", "init_from", "best_trial")


def stream_split(stream: Stream | str, *, meta_test_from_year: int | str | None = None) -> dict[str, Any]:
    """The stream's split as a sealed manifest: every task in stream order with its year and whether it
    is meta-train or meta-test (the cut decides which tasks a run is judged on)."""
    from ...data.splits import seal

    s = stream if isinstance(stream, Stream) else load_stream(stream, meta_test_from_year=meta_test_from_year)
    return seal({"kind": SPLIT_KIND, "version": 1, "stream": s.name, "stream_sha256": s.hash,
                 "meta_test_from_year": s.meta_test_from_year,
                 "tasks": [{"index": t.index, "uid": t.uid, "name": t.name, "year": t.year, "split": t.split}
                           for t in s.tasks]})


def write_stream_split(stream: Stream | str, out: str | Path, *,
                       meta_test_from_year: int | str | None = None) -> dict[str, Any]:
    """Write :func:`stream_split`'s manifest to ``out``; returns a summary (tasks, meta-test tasks, cut)."""
    from ...data.splits import write_split

    split = stream_split(stream, meta_test_from_year=meta_test_from_year)
    write_split(out, split)
    return {"out": str(out), "tasks": len(split["tasks"]),
            "meta_test": sum(t["split"] == "meta-test" for t in split["tasks"]),
            "meta_test_from_year": split["meta_test_from_year"], "sha256": split["sha256"]}


def catalog() -> dict[str, Any]:
    """The built-in streams (their summaries) and the registered learners (with their docs' first lines)."""
    from ...learners.stream.catalog import learner_names, stream_learners
    from ...streams import stream_names

    docs = {n: ((stream_learners.get(n).load().__doc__ or "").strip().splitlines() or [""])[0] for n in learner_names()}
    return {"streams": [load_stream(n).summary() for n in stream_names()], "learners": learner_names(),
            "learner_docs": docs}


def pretrain(options: PretrainOptions) -> dict[str, Any]:
    """PT-MT: pre-train one network on ``options.stream``'s meta-train tasks and write the checkpoint
    ``options.out`` (+ ``.json``) that a run with learner ``pt`` fine-tunes from (``checkpoint``).
    ``options`` (:class:`~vistabench.protocols.stream.config.PretrainOptions`) were checked when made:
    model, width, device, seed, data_root and meta_test_from as a run's config fields (they must match
    that later run). Returns :func:`~vistabench.learners.stream.pretrain.pretrain_meta_train`'s summary.

    >>> pretrain(PretrainOptions(stream="embedded", out="pt.pt", steps=0))
    Traceback (most recent call last):
    ...
    vistabench.errors.InputError: steps: expected a number >= 1, got 0
    """
    from ...learners.stream.options import LearnerConfig
    from ...learners.stream.pretrain import pretrain_meta_train

    if not isinstance(options, PretrainOptions):
        raise TypeError(f"options: expected PretrainOptions, got {type(options).__name__}")  # a caller's bug
    s = load_stream(options.stream, meta_test_from_year=options.meta_test_from)
    cfg = LearnerConfig(options.to_recipe(), seed=options.seed, arch_options=options.arch_options())
    return pretrain_meta_train(s, options, config=cfg)


def score(predictions: list[dict[str, Any]] | str | Path, reference: Stream | str, *,
          meta_test_from_year: int | str | None = None) -> dict[str, Any]:
    """Score a run's per-task events (from any learner) against a stream.

    ``predictions``: the events — (a JSON file of) one dict per task, in stream order, each with
    ``task`` (the task's uid) and ``error`` (1 - accuracy, or 1 - mAP for multilabel tasks) and
    ``flops`` (compute charged for that task); optional keys of :data:`EVENT_KEYS` are kept (missing:
    null). A run may stop early (a prefix of the stream). ``reference``: the stream (loaded, or its
    name or file). Returns ``summary`` (``avg_error`` over the meta-test tasks present, ``cflop``,
    ``tasks``) and ``events`` completed with the stream's metadata.
    """
    events, stream = predictions, reference
    s = stream if isinstance(stream, Stream) else load_stream(stream, meta_test_from_year=meta_test_from_year)
    if isinstance(events, (str, Path)):
        events = read_json(events, what="events")
    if not isinstance(events, list) or not events:
        raise InputError("events: expected a non-empty JSON list of per-task events")
    if len(events) > len(s.tasks):
        raise InputError(f"events: {len(events)} events, but stream {s.name!r} has {len(s.tasks)} tasks")
    out = []
    for i, (ev, task) in enumerate(zip(events, s.tasks)):
        if not isinstance(ev, dict):
            raise InputError(f"events[{i}]: expected an object, got {type(ev).__name__}")
        if ev.get("task") != task.uid:
            raise InputError(f"events[{i}]: task {ev.get('task')!r}, but the stream's task {i} is {task.uid!r} "
                             "(events must follow the stream's order)")
        for key in ("error", "flops"):
            v = ev.get(key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v) or v < 0:
                raise InputError(f"events[{i}].{key}: expected a finite non-negative number, got {v!r}")
        if ev["error"] > 1:
            raise InputError(f"events[{i}].error: expected a fraction in [0, 1], got {ev['error']!r}")
        unknown = sorted(set(ev) - set(EVENT_KEYS))
        if unknown:
            raise InputError(f"events[{i}]: unknown keys {unknown} (known: {list(EVENT_KEYS)})")
        full = {k: ev.get(k) for k in EVENT_KEYS}
        full.update(task_index=task.index, task=task.uid, name=task.name, year=task.year, domain=task.domain,
                    kind=task.kind, split=task.split, error=float(ev["error"]), flops=int(ev["flops"]))
        full["curve"] = list(ev.get("curve") or [])
        out.append(full)
    summary = StreamRunResult("scored", out, 0).summary()
    return {"summary": {k: summary[k] for k in ("tasks", "avg_error", "cflop")}, "events": out,
            "settings": {"stream": s.name, "stream_sha256": s.hash, "meta_test_from_year": s.meta_test_from_year}}


def to_records(result: dict[str, Any], *, stream: Stream | str, method: str, seed: int | None, run_id: str,
               settings: dict[str, Any] | None = None) -> list[Record]:
    """One record per task event (the same shape as ``run_stream`` writes), of run ``run_id``."""
    meta_test_from = result["settings"]["meta_test_from_year"]
    s = stream if isinstance(stream, Stream) else load_stream(stream, meta_test_from_year=meta_test_from)
    return [event_record(s, ev, method=method, seed=seed, run_id=run_id, settings=settings) for ev in result["events"]]
