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
  records (stream events, small-data trials) logs record i at step i; the settings a score carries
  (``settings`` inside a record's metrics: the sweep's seed and points, ...) are parameters
  ``scoring.*``, never metrics;
- artifacts: the run's report section (``report.html``) and its figures (``figures/*.png``),
  ``records.json`` (the records as stored) and ``config.json``.

The run's result never depends on tracking: the trackers only listen, and every call to them is
bounded (:mod:`.guard`). A tracker that cannot start stops the command before anything runs (one
line); one that fails during the run (a server that dies or hangs, a full disk) is reported in one
warning and dropped, and the run goes on and stores its records (``vistabench export`` sends them
later). A run that fails is closed as failed in each tool and its error goes on to the caller.

``score`` verbs track too (``--track``, :func:`track_scores`): the command's options as parameters,
the records it scores and stores (:func:`scored`) as the run's scores.
"""

from __future__ import annotations

import hashlib
import json
import math
import tempfile
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from .. import epochs
from ..atomic import write_text
from ..config import RunConfig
from ..errors import InputError
from ..jsonutil import dumps
from ..store import Record
from .backends import Param, metric_name
from .guard import Guarded, TrackingWarning, call_timeout, describe, warn_failed

__all__ = ["run_tracked", "track_scores", "scored", "flat_params", "flat_metrics", "record_params", "record_key",
           "run_name", "TrackedRun"]

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
    and NaN left out, and so is ``settings`` (what produced the scores: parameters, :func:`record_params`)."""
    out: dict[str, float] = {}
    for k, v in metrics.items():
        if k == "settings":
            continue
        if isinstance(v, dict):
            out.update(flat_metrics(v, f"{prefix}{k}."))
        elif isinstance(v, (int, float)) and not isinstance(v, bool) and not math.isnan(v):
            out[metric_name(f"{prefix}{k}")] = float(v)
    return out


def record_params(records: list[Record], *, settings: bool) -> dict[str, Param]:
    """The settings of ``records`` as parameters: ``scoring.*`` (the ``settings`` inside their metrics)
    and, with ``settings``, ``settings.*`` (the records' own); a name whose value differs between the
    records is left out (a tracker keeps one value per parameter; ``records.json`` has them all)."""
    out: dict[str, Param] = {}
    differ: set[str] = set()
    for r in records:
        nested = {"scoring": r.metrics.get("settings") or {}}
        if settings:
            nested["settings"] = r.settings or {}
        for k, v in flat_params({k: v for k, v in nested.items() if isinstance(v, dict) and v}).items():
            if k in out and out[k] != v:
                differ.add(k)
            out.setdefault(k, v)
    return {k: v for k, v in out.items() if k not in differ}


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
    """The trackers of one run: open them, hand each what the run produces, close them.

    ``tools``: the trackers; ``params``: the run's parameters; ``config``: the run's configuration
    (``config.json``); ``store``: where the run's records are stored (None: not stored), for the
    warning of a tracker that fails mid-run. Every call is bounded (:class:`~.guard.Guarded`).
    """

    def __init__(self, *, protocol: str, tools: tuple[str, ...], track_dir: str | None, name: str,
                 params: dict[str, Param], config: dict[str, Any], tags: dict[str, str] | None = None,
                 store: str | None = None) -> None:
        self.protocol, self.config, self.store = protocol, config, store
        tags = {"vistabench.protocol": protocol, **(tags or {})}
        self.backends: list[Guarded] = []
        self.step = 0
        self.fit = 0
        self._last_epoch = 0
        self.params = dict(params)
        timeout = call_timeout()
        self._starting = True
        try:
            for tool in dict.fromkeys(tools):  # each tracker once, in the order given
                self.backends.append(Guarded.open(tool, timeout=timeout, on_failure=self._failed,
                                                  name=name, tags=tags, track_dir=track_dir))
            self._each("log_params", self.params)
            for b in self.backends:  # unusable from the start: stop before anything runs
                if b.failed is not None:
                    raise InputError(f"track: {b.tool}: could not log the run's parameters: {b.failed}")
        except BaseException:  # the runs opened so far are closed as failed
            self.close(ok=False)
            raise
        self._starting = False

    @classmethod
    def of_config(cls, config: RunConfig, *, tags: dict[str, str] | None = None,
                  store: str | None = None) -> "TrackedRun":
        """The trackers of a protocol's run of ``config`` (its ``track``, its resolved config as parameters)."""
        return cls(protocol=config.protocol, tools=config.track, track_dir=config.track_dir, name=run_name(config),
                   params=flat_params(config.to_dict()), config=config.to_dict(), tags=tags, store=store)

    def _failed(self, tool: str, reason: str) -> None:
        if self._starting:  # said by the InputError of __init__
            return
        if self.store is None:  # --no-store, or a grid cell (the grid stores its records)
            hint = (f"; `vistabench export {tool} --store STORE` sends its records later from the store that "
                    "holds them (none with --no-store)")
        else:
            hint = (f"; its records are stored in {self.store!r}: `vistabench export {tool} --store "
                    f"{self.store}` sends them later")
        warn_failed(tool, reason, hint=hint)

    def _each(self, method: str, *args: Any, **kwargs: Any) -> None:
        for b in self.backends:
            b.call(method, *args, **kwargs)

    def on_epoch(self, entry: dict[str, Any]) -> None:
        """One epoch of the shared trainer (an :mod:`vistabench.epochs` listener)."""
        epoch = int(entry.get("epoch", 0))
        if epoch <= self._last_epoch or self.fit == 0:  # epoch 1 again: another training started
            self.fit += 1
        self._last_epoch = epoch
        values = {f"train/{k}": float(entry[k]) for k in _CURVE
                  if isinstance(entry.get(k), (int, float)) and not math.isnan(entry[k])}
        values["train/fit"] = float(self.fit)
        self._each("log_metrics", values, step=self.step, axis="epoch")
        self.step += 1

    def log_records(self, records: list[Record], *, settings: bool = False) -> None:
        """The scores, figures and files of the finished run (``settings``: the records' own settings
        as parameters ``settings.*`` too; their scores' settings are always ``scoring.*``)."""
        from .figures import RunFigures, run_figures

        if not any(b.failed is None for b in self.backends):
            return
        stored = [r for r in records if r.id is not None]
        if stored:  # the store's ids, and the keys `vistabench export` knows a record by
            self._each("set_tags", {"vistabench.record_ids": ",".join(str(r.id) for r in stored),
                                    "vistabench.record_keys": ",".join(record_key(r) for r in stored)})
        extra = {k: v for k, v in record_params(records, settings=settings).items() if k not in self.params}
        if extra:
            self._each("log_params", extra)
        for i, r in enumerate(records):
            self._each("log_metrics", flat_metrics(r.metrics), step=i, axis="record")
        try:
            figures = run_figures(self.protocol, records)
        except Exception as exc:  # a bug of the report section: the records are stored; say it, once
            warnings.warn(f"track: the report's figures of these records could not be made ({describe(exc)}); "
                          "the trackers get the scores and files without them (please report this)",
                          TrackingWarning, stacklevel=2)
            figures = RunFigures(None, [])
        for stem, png in figures.images:
            self._each("log_figure", stem, png)
        files = {"records.json": dumps([r.to_dict() for r in records], indent=1),
                 "config.json": json.dumps(self.config, indent=1)}
        if figures.page is not None:
            files["report.html"] = figures.page
        try:
            with tempfile.TemporaryDirectory(prefix="vistabench-track-") as tmp:
                for name, text in files.items():
                    write_text(Path(tmp) / name, text, what="tracking file")
                for name in files:
                    self._each("log_file", Path(tmp) / name)
        except (InputError, OSError) as exc:  # the temporary folder's disk is full: the record is stored
            warnings.warn(f"track: the run's files ({', '.join(files)}) could not be handed to the trackers "
                          f"({describe(exc)}); they have its scores without them", TrackingWarning, stacklevel=2)

    def close(self, *, ok: bool) -> list[str]:
        """Close every tracker's run that did not fail; where each one is (one line each)."""
        where = []
        for b in self.backends:
            line = b.call("finish", ok)
            if line is not None:
                where.append(line)
        return where


def _store_path(store: Any) -> str | None:
    path = getattr(store, "path", store)
    return None if path is None else str(path)


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

    A tracker that cannot start raises an :class:`~vistabench.errors.InputError` before ``run`` is
    called; one that fails during the run gives one :class:`~.guard.TrackingWarning` and is dropped.
    """
    if not config.track:
        return run(config, store=store, work_dir=work_dir)
    session = TrackedRun.of_config(config, tags=tags, store=_store_path(store))
    ok = False
    try:
        with epochs.listen(session.on_epoch):
            records = run(config.without_tracking(), store=store, work_dir=work_dir)
        session.log_records(records)
        ok = True
        return records
    finally:
        where = session.close(ok=ok)
        if log is not None:
            for line in where:
                log(f"tracked: {line}")


_SCORED: list[list[Record]] = []  # the records scored while track_scores listens (innermost last)


def scored(records: Record | list[Record]) -> None:
    """A ``score`` verb's records, once stored (``cli.store_records`` calls this): kept for the
    trackers of :func:`track_scores` when it listens, else nothing."""
    if _SCORED:
        _SCORED[-1].extend([records] if isinstance(records, Record) else records)


@contextmanager
def _listen_scored() -> Iterator[list[Record]]:
    got: list[Record] = []
    _SCORED.append(got)
    try:
        yield got
    finally:
        _SCORED.remove(got)


def track_scores(score: Callable[[], Any], *, protocol: str, command: str, options: dict[str, Any],
                 tools: tuple[str, ...], track_dir: str | None, store: str | None,
                 log: Callable[[str], None] | None = None) -> Any:
    """``score()`` (a ``score`` verb), logged to ``tools``: the verb's ``options`` as parameters, the
    records it scores (:func:`scored`) as the run's scores, their settings as parameters (``settings.*``,
    ``scoring.*``), ``records.json`` and the report section's figures. The trackers start before
    ``score`` runs (one that cannot: one line, nothing scored); one that fails later: one warning."""
    method = options.get("method")
    parts = [protocol, "score", *([method] if isinstance(method, str) and method else []),
             time.strftime("%Y%m%d-%H%M%S")]
    name = "-".join(metric_name(p).replace("/", "_").replace(" ", "_") for p in parts)
    session = TrackedRun(protocol=protocol, tools=tools, track_dir=track_dir, name=name,
                         params=flat_params(options), config=options, store=store,
                         tags={"vistabench.command": command})
    ok = False
    try:
        with _listen_scored() as got:
            result = score()
        session.log_records(got, settings=True)
        ok = True
        return result
    finally:
        where = session.close(ok=ok)
        if log is not None:
            for line in where:
                log(f"tracked: {line}")
