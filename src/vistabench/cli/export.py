"""`vistabench export mlflow|tensorboard|wandb`: send a results store's records to an experiment tracker."""

from __future__ import annotations

import argparse

from ..config import TRACKERS
from . import add_json_arg, add_store_arg


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export", help="send a results store's records to MLflow, TensorBoard or Weights & Biases",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Sends every record of --store (or only --protocol's) to the tracker, one run per record: its\n"
                    "settings (the resolved config) as parameters, its metrics as scores, the record as\n"
                    "records.json. Records already exported to the same MLflow experiment or TensorBoard\n"
                    "folder are skipped, so running it again sends only new records.\n\n"
                    "Destinations follow each tool's conventions:\n"
                    "  mlflow       MLFLOW_TRACKING_URI (unset: MLflow's local default), experiment\n"
                    "               MLFLOW_EXPERIMENT_NAME (unset: vistabench)\n"
                    "  tensorboard  --track-dir (default ./runs), one folder per record\n"
                    "  wandb        WANDB_MODE (offline: no account needed), WANDB_DIR, WANDB_PROJECT\n\n"
                    "A run tracked while it runs (`--track` on any `run` and on `grid run`) also has its\n"
                    "training curves and figures; docs/tracking.md.")
    p.add_argument("tracker", choices=list(TRACKERS), metavar="TRACKER",
                   help="one of: " + ", ".join(TRACKERS))
    p.add_argument("--protocol", help="only this protocol's records")
    p.add_argument("--track-dir", metavar="DIR", help="TensorBoard's log folder (default: ./runs)")
    add_store_arg(p, optional=False)
    add_json_arg(p)
    p.set_defaults(handler=_export, human=_text)


def _export(args):
    from ..tracking import export_store

    if args.protocol is not None:
        from ..suite import get_protocol

        get_protocol(args.protocol)  # an unknown name: one line with close matches
    return export_store(args.tracker, store=args.store, protocol=args.protocol, track_dir=args.track_dir)


def _text(r: dict) -> str:
    lines = [f"{r['tracker']}: {run['where']}  (record {run['record']})" for run in r["runs"]]
    lines.append(f"exported {r['exported']} of {r['records']} records of {r['store']} to {r['tracker']}"
                 + (f" ({r['skipped']} exported before, skipped)" if r["skipped"] else ""))
    return "\n".join(lines)
