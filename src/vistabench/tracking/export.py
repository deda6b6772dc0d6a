"""Send an existing results store's records to an experiment tracker (``vistabench export``).

Each record becomes one run of the tool: its settings (the resolved config included) as parameters,
its metrics as scores, the record itself as ``records.json``, tagged with the protocol, dataset,
method and the record's key (a hash of the stored record). A record already exported to the same
MLflow experiment or TensorBoard folder (same key) is skipped, so exporting again after more runs
sends only the new ones; so is a record whose run was tracked in that MLflow experiment while it
ran (``--track mlflow`` with a store). The training curves are not in the store: track a run (``--track``) to
have them.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..jsonutil import dumps
from ..store import Record, ResultsStore
from .backends import open_backend, require_tracker
from .session import flat_metrics, flat_params, record_key

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
    with ResultsStore(store, read_only=True) as rs:
        records = rs.records(protocol=protocol) if protocol else rs.records()
    if protocol and not records:
        raise InputError(f"protocol: the store {str(store)!r} has no {protocol!r} records")
    exported, skipped, runs = 0, 0, []
    for r in records:
        key = record_key(r)
        tags = {"vistabench.protocol": r.protocol, "vistabench.dataset": r.dataset, "vistabench.method": r.method,
                "vistabench.record_key": key, "vistabench.record_id": str(r.id), "vistabench.kind": r.kind,
                "vistabench.run_id": str(r.run_id),
                "vistabench.store": str(Path(store).resolve())}
        if r.tag:
            tags["vistabench.tag"] = r.tag
        name = _name(r, key)
        backend_kwargs = {"name": name, "tags": tags, "track_dir": track_dir}
        if _already_exported(tool, key, name, track_dir):
            skipped += 1
            continue
        backend = open_backend(tool, **backend_kwargs)
        ok = False
        try:
            fields = {"protocol": r.protocol, "dataset": r.dataset, "method": r.method, "seed": r.seed,
                      "split_hash": r.split_hash, "tag": r.tag, "kind": r.kind, "run_id": r.run_id,
                      "grid_cell": r.grid_cell, "version": r.version}
            backend.log_params(flat_params({**fields, "settings": r.settings}))
            backend.log_metrics(flat_metrics(r.metrics), step=0, axis="record")
            with tempfile.TemporaryDirectory(prefix="vistabench-export-") as tmp:
                path = Path(tmp) / "records.json"
                path.write_text(dumps([r.to_dict()], indent=1), encoding="utf-8")
                backend.log_file(path)
            ok = True
        finally:
            where = backend.finish(ok)
        exported += 1
        runs.append({"record": r.id, "where": where})
    return {"tracker": tool, "store": str(store), "records": len(records), "exported": exported,
            "skipped": skipped, "runs": runs}


def _already_exported(tool: str, key: str, name: str, track_dir: str | None) -> bool:
    """Whether the record with ``key`` is in the destination already (MLflow, TensorBoard)."""
    if tool == "tensorboard":
        from .tensorboard_backend import DEFAULT_DIR

        return (Path(track_dir or DEFAULT_DIR) / name).exists()
    if tool == "mlflow":
        from .mlflow_backend import find_runs

        return bool(find_runs("vistabench.record_key", key)) or bool(find_runs("vistabench.record_keys", key))
    return False  # wandb: offline runs are synced later; nothing to ask
