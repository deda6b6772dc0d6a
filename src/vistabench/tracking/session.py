"""A tracked run: the protocol's ``run`` with every tracker of ``config.track`` receiving it.

What each tracker gets (the same for every protocol and every tool):

- parameters: the resolved config (:meth:`~vistabench.config.RunConfig.to_dict`), nested options
  flattened to ``method_options.alpha``, lists as JSON text;
- training curves: every epoch of the shared trainer (:mod:`vistabench.epochs`) as
  ``train/loss``, ``train/train_acc``, ``train/val_acc``, ``train/lr`` and ``train/fit`` (which
  training of the run it was: two-stage methods, incremental sessions and search trials train
  several times), at step = the run's epoch count so far;
- scores: each record's metrics, flattened (``exact.auc``), numbers only (lists such as per-class
  accuracies are in ``records.json``; undefined scores, NaN, are left out); a run of several
  records (stream events, small-data trials) logs record i at step i;
- artifacts: the run's report section (``report.html``) and its figures (``figures/*.png``),
  ``records.json`` (the records as stored) and ``config.json``.

The run's result never depends on tracking: the trackers only listen. A run that fails is closed
as failed in each tool and its error goes on to the caller.
"""

from __future__ import annotations

import hashlib
import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from .. import epochs
from ..config import RunConfig
from ..jsonutil import dumps
from ..store import Record
from .backends import Backend, Param, metric_name, open_backend

__all__ = ["run_tracked", "flat_params", "flat_metrics", "record_key", "run_name", "TrackedRun"]

_CURVE = ("loss", "train_acc", "val_acc", "lr")


def flat_params(config: dict[str, Any], prefix: str = "") -> dict[str, Param]:
    """``{"a": {"b": 1}, "c": [1, 2]}`` -> ``{"a.b": 1, "c": "[1, 2]"}`` (a null as ``"null"``)."""
    out: dict[str, Param] = {}
    for k, v in config.items():
        if isinstance(v, dict):
            out.update(flat_params(v, f"{prefix}{k}.") if v else {f"{prefix}{k}": "{}"})
        elif isinstance(v, (str, int, float, bool)):
            out[f"{prefix}{k}"] = v
        else:
            out[f"{prefix}{k}"] = dumps(v)
    return out


def flat_metrics(metrics: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """The numbers of a record's metrics, nested keys joined by ``.``; lists, text, booleans, nulls
    and NaN left out."""
    out: dict[str, float] = {}
    for k, v in metrics.items():
        if isinstance(v, dict):
            out.update(flat_metrics(v, f"{prefix}{k}."))
        elif isinstance(v, (int, float)) and not isinstance(v, bool) and not math.isnan(v):
            out[metric_name(f"{prefix}{k}")] = float(v)
    return out


def record_key(record: Record) -> str:
    """16 hex digits identifying a stored record (its id, creation time and content), computed from the
    record as schema 1 held it (:meth:`~vistabench.store.Record.schema1_dict`): a store migrated to
    schema 2 keeps its records' keys, so exporting it again skips what was exported before."""
    return hashlib.sha256(dumps(record.schema1_dict(), sort_keys=True).encode()).hexdigest()[:16]


def run_name(config: RunConfig) -> str:
    """``longtail-ce-seed0-20260101-120000``: protocol, method (or learner), seed, start time."""
    parts = [config.protocol or type(config).__name__]
    for field in ("method", "learner"):
        value = getattr(config, field, None)
        if isinstance(value, str) and value:
            parts.append(value)
            break
    seed = getattr(config, "seed", None)
    if isinstance(seed, int):
        parts.append(f"seed{seed}")
    parts.append(time.strftime("%Y%m%d-%H%M%S"))
    return "-".join(metric_name(p).replace("/", "_").replace(" ", "_") for p in parts)


class TrackedRun:
    """The trackers of one run: open them, hand each what the run produces, close them."""

    def __init__(self, config: RunConfig, *, tags: dict[str, str] | None = None) -> None:
        self.config = config
        name = run_name(config)
        tags = {"vistabench.protocol": config.protocol, **(tags or {})}
        self.backends: list[Backend] = []
        self.step = 0
        self.fit = 0
        self._last_epoch = 0
        try:
            for tool in dict.fromkeys(config.track):  # each tracker once, in the order given
                self.backends.append(open_backend(tool, name=name, tags=tags, track_dir=config.track_dir))
            for b in self.backends:
                b.log_params(flat_params(config.to_dict()))
        except BaseException:  # the runs opened so far are closed as failed
            self.close(ok=False)
            raise

    def on_epoch(self, entry: dict[str, Any]) -> None:
        """One epoch of the shared trainer (an :mod:`vistabench.epochs` listener)."""
        epoch = int(entry.get("epoch", 0))
        if epoch <= self._last_epoch or self.fit == 0:  # epoch 1 again: another training started
            self.fit += 1
        self._last_epoch = epoch
        values = {f"train/{k}": float(entry[k]) for k in _CURVE
                  if isinstance(entry.get(k), (int, float)) and not math.isnan(entry[k])}
        values["train/fit"] = float(self.fit)
        for b in self.backends:
            b.log_metrics(values, step=self.step, axis="epoch")
        self.step += 1

    def log_records(self, records: list[Record]) -> None:
        """The scores, figures and files of the finished run."""
        from .figures import run_figures

        for i, r in enumerate(records):
            values = flat_metrics(r.metrics)
            for b in self.backends:
                b.log_metrics(values, step=i, axis="record")
        figures = run_figures(self.config.protocol, records)
        with tempfile.TemporaryDirectory(prefix="vistabench-track-") as tmp:
            files = {"records.json": dumps([r.to_dict() for r in records], indent=1),
                     "config.json": json.dumps(self.config.to_dict(), indent=1)}
            if figures.page is not None:
                files["report.html"] = figures.page
            for name, text in files.items():
                (Path(tmp) / name).write_text(text, encoding="utf-8")
            for b in self.backends:
                for stem, png in figures.images:
                    b.log_figure(stem, png)
                for name in files:
                    b.log_file(Path(tmp) / name)

    def close(self, *, ok: bool) -> list[str]:
        """Close every tracker's run; where each one is (one line each)."""
        where = []
        for b in self.backends:
            where.append(b.finish(ok))
        return where


def run_tracked(run: Callable[..., list[Record]], config: RunConfig, *, store: Any = None,
                work_dir: str | Path | None = None, tags: dict[str, str] | None = None,
                log: Callable[[str], None] | None = None) -> list[Record]:
    """``run(config, store=store, work_dir=work_dir)``, logged to every tracker of ``config.track``.

    Without trackers this is the plain run (no tracker package is imported). With them, ``run`` gets
    the config without its trackers (:meth:`~vistabench.config.RunConfig.without_tracking`; a
    protocol's ``run`` refuses a config that asks for tracking, which it cannot do itself), so the
    stored records hold the config as it ran. ``tags``: more tags of
    the tracked run (a grid cell's key); ``log`` receives one line per tracker saying where the run
    went. The records (with their store ids when ``store`` is given) are returned unchanged.
    """
    if not config.track:
        return run(config, store=store, work_dir=work_dir)
    session = TrackedRun(config, tags=tags)
    ok = False
    try:
        with epochs.listen(session.on_epoch):
            records = run(config.without_tracking(), store=store, work_dir=work_dir)
        stored = [r for r in records if r.id is not None]
        if stored:  # the store's ids, and the keys `vistabench export` knows a record by
            for b in session.backends:
                b.set_tags({"vistabench.record_ids": ",".join(str(r.id) for r in stored),
                            "vistabench.record_keys": ",".join(record_key(r) for r in stored)})
        session.log_records(records)
        ok = True
        return records
    finally:
        where = session.close(ok=ok)
        if log is not None:
            for line in where:
                log(f"tracked: {line}")
