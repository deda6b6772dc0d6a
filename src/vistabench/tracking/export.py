"""Send an existing results store's records to an experiment tracker (``vistabench export``).

Each record becomes one run of the tool: its settings (the resolved config included) as parameters,
its metrics as scores, the record itself as ``records.json``, tagged with the protocol, dataset,
method and the record's key (a hash of the stored record). A record already exported to the same
MLflow experiment or TensorBoard folder (same key) is skipped, so exporting again after more runs
sends only the new ones; so is a record whose run was tracked in that MLflow experiment while it
ran (``--track mlflow`` with a store). The training curves are not in the store: track a run (``--track``) to
have them.

Bounded like a tracked run (:mod:`.guard`): MLflow's server is asked for an answer before anything is
sent (a closed port, a server that never answers, an unwritable ``sqlite:///`` database: one line),
and every call has a deadline; a tracker that fails mid-way stops the export in one line saying how
many records were sent (the next export skips them), a TensorBoard folder of a record cut short
(a full disk) removed.
"""

from __future__ import annotations

import tempfile
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from ..atomic import write_text
from ..errors import InputError
from ..jsonutil import dumps
from ..store import Record, ResultsStore
from .backends import require_tracker
from .guard import OPEN_FACTOR, Guarded, TrackerTimeout, bounded, call_timeout, describe
from .session import flat_metrics, flat_params, record_key, record_params

__all__ = ["export_store", "record_key"]


def _name(record: Record, key: str) -> str:
    seed = "" if record.seed is None else f"-seed{record.seed}"
    raw = f"{record.protocol}-{record.method}{seed}-{key}"
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in raw)


def export_store(tool: str, *, store: str | Path, protocol: str | None = None,
                 track_dir: str | None = None) -> dict[str, Any]:
    """Export the records of ``store`` (only ``protocol``'s when given) to ``tool``.

    Returns ``{"tracker", "store", "records", "exported", "skipped", "runs"}`` (``runs``: where each
    exported record went).
    """
    require_tracker(tool)
    timeout = call_timeout()
    with ResultsStore(store, read_only=True) as rs:
        records = rs.records(protocol=protocol) if protocol else rs.records()
    if protocol and not records:
        raise InputError(f"protocol: the store {str(store)!r} has no {protocol!r} records")
    settings: Any = nullcontext()
    if tool == "mlflow" and records:
        from .mlflow_backend import http_settings

        settings = http_settings()
    exported, skipped, runs = 0, 0, []
    with settings:
        if tool == "mlflow" and records:
            _check_mlflow(timeout)
        for r in records:
            key = record_key(r)
            name = _name(r, key)
            if _bounded_check(tool, key, name, track_dir, timeout, done=exported, total=len(records)):
                skipped += 1
                continue
            where = _export_one(tool, r, key, name, track_dir, timeout, store=store, done=exported,
                                total=len(records))
            exported += 1
            runs.append({"record": r.id, "where": where})
    return {"tracker": tool, "store": str(store), "records": len(records), "exported": exported,
            "skipped": skipped, "runs": runs}


def _check_mlflow(timeout: float) -> None:
    """The reachability check of ``--track mlflow`` (one line within seconds), itself bounded."""
    from .mlflow_backend import check_reachable, tracking_uri

    uri = tracking_uri()
    try:
        bounded(check_reachable, uri, timeout=timeout, what="check")
    except TrackerTimeout:
        raise InputError(f"track: mlflow: no tracking server answers at {uri} (MLFLOW_TRACKING_URI) within "
                         f"{timeout:g} s") from None
    import mlflow.tracking  # noqa: F401  (here: an import under a call's deadline would count as no answer)

    from .mlflow_backend import open_store

    try:  # MLflow's store once, with the deadline of opening a run (a new local database takes seconds)
        bounded(open_store, timeout=OPEN_FACTOR * timeout, what="open")
    except InputError:
        raise
    except Exception as exc:
        raise InputError(f"track: mlflow: could not open {uri} (MLFLOW_TRACKING_URI): {describe(exc)}") from None


def _stopped(tool: str, reason: str, done: int, total: int) -> InputError:
    """The one line of an export that a tracker's failure stopped."""
    sent = f"{done} of {total} records sent" if done else "no record sent"
    again = "; run it again to send the rest (the records sent are skipped)" if done and tool != "wandb" else ""
    if not reason.startswith(("track:", "tensorboard ")):
        reason = f"track: {tool}: {reason}"
    return InputError(f"{reason} (export stopped: {sent}{again})")


def _export_one(tool: str, r: Record, key: str, name: str, track_dir: str | None, timeout: float, *,
                store: str | Path, done: int, total: int) -> str:
    """One record as one run of ``tool``; where it went (one line), or one line why it could not."""
    tags = {"vistabench.protocol": r.protocol, "vistabench.dataset": r.dataset, "vistabench.method": r.method,
            "vistabench.record_key": key, "vistabench.record_id": str(r.id), "vistabench.kind": r.kind,
            "vistabench.run_id": str(r.run_id), "vistabench.store": str(Path(store).resolve())}
    if r.tag:
        tags["vistabench.tag"] = r.tag
    try:
        backend = Guarded.open(tool, timeout=timeout, name=name, tags=tags, track_dir=track_dir)
    except InputError as exc:
        if not done:
            raise
        raise _stopped(tool, str(exc), done, total) from None
    fields = {"protocol": r.protocol, "dataset": r.dataset, "method": r.method, "seed": r.seed,
              "split_hash": r.split_hash, "tag": r.tag, "kind": r.kind, "run_id": r.run_id,
              "grid_cell": r.grid_cell, "version": r.version}
    backend.call("log_params", {**flat_params({**fields, "settings": r.settings}),
                                **record_params([r], settings=False)})
    backend.call("log_metrics", flat_metrics(r.metrics), step=0, axis="record")
    with tempfile.TemporaryDirectory(prefix="vistabench-export-") as tmp:
        path = Path(tmp) / "records.json"
        write_text(path, dumps([r.to_dict()], indent=1), what="tracking file")
        backend.call("log_file", path)
    where = backend.call("finish", backend.failed is None)
    if backend.failed is not None:
        raise _stopped(tool, backend.failed, done, total)
    return where


def _bounded_check(tool: str, key: str, name: str, track_dir: str | None, timeout: float, *,
                   done: int, total: int) -> bool:
    try:
        return bool(bounded(_already_exported, tool, key, name, track_dir, timeout=timeout, what="search"))
    except InputError:
        raise
    except Exception as exc:
        raise _stopped(tool, describe(exc), done, total) from None
def _already_exported(tool: str, key: str, name: str, track_dir: str | None) -> bool:
    """Whether the record with ``key`` is in the destination already (MLflow, TensorBoard)."""
    if tool == "tensorboard":
        from .tensorboard_backend import DEFAULT_DIR

        return (Path(track_dir or DEFAULT_DIR) / name).exists()
    if tool == "mlflow":
        from .mlflow_backend import find_runs

        return bool(find_runs("vistabench.record_key", key)) or bool(find_runs("vistabench.record_keys", key))
    return False  # wandb: offline runs are synced later; nothing to ask
