"""`vistabench export mlflow|tensorboard|wandb`: send a results store's records to an experiment tracker."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..config import TRACKERS, Options, option
from .verbs import Verbs, add_verb, store_field


@dataclass(frozen=True, kw_only=True)
class ExportOptions(Options):
    tracker: str = option(positional=True, choices=TRACKERS, metavar="TRACKER", help="the tracker to send the records to")
    protocol: str | None = option(None, help="only this protocol's records")
    track_dir: str | None = option(None, metavar="DIR", help="TensorBoard's log folder (default: ./runs)")
    store: str = store_field(optional=False)


def register(sub: Verbs) -> None:
    add_verb(sub, "export", ExportOptions, run=_export, human=_text,
             help="send a results store's records to MLflow, TensorBoard or Weights & Biases",
             description="Sends every record of --store (or only --protocol's) to the tracker, one run per record: its\n"
                         "settings (the resolved config) as parameters, its metrics as scores, the record as\n"
                         "records.json. Records already exported to the same MLflow experiment or TensorBoard\n"
                         "folder are skipped, so running it again sends only new records.\n\n"
                         "Destinations follow each tool's conventions:\n"
                         "  mlflow       MLFLOW_TRACKING_URI (unset: MLflow's local default), experiment\n"
                         "               MLFLOW_EXPERIMENT_NAME (unset: vistabench)\n"
                         "  tensorboard  --track-dir (default ./runs), one folder per record\n"
                         "  wandb        WANDB_MODE (offline: no account needed), WANDB_DIR, WANDB_PROJECT\n\n"
                         "The tracker is checked before anything is sent (MLflow: the server must answer an HTTP\n"
                         "request within 5 s; an sqlite:/// database must be writable): one line if not. Every\n"
                         "call has a deadline (VISTABENCH_TRACK_TIMEOUT, default 15 s); a tracker that fails\n"
                         "mid-way stops the export in one line saying how many records were sent.\n\n"
                         "A run tracked while it runs (`--track` on any `run`, `score` and on `grid run`) also has\n"
                         "its training curves and figures; docs/tracking.md.")


def _export(opts: ExportOptions) -> dict[str, Any]:
    from ..tracking import export_store

    if opts.protocol is not None:
        from ..suite import get_protocol

        get_protocol(opts.protocol)  # an unknown name: one line with close matches
    return export_store(opts.tracker, store=opts.store, protocol=opts.protocol, track_dir=opts.track_dir)


def _text(r: dict) -> str:
    lines = [f"{r['tracker']}: {run['where']}  (record {run['record']})" for run in r["runs"]]
    lines.append(f"exported {r['exported']} of {r['records']} records of {r['store']} to {r['tracker']}"
                 + (f" ({r['skipped']} exported before, skipped)" if r["skipped"] else ""))
    return "\n".join(lines)
