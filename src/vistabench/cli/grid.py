"""`vistabench grid run|status|table CONFIG.yaml`: a protocol's whole table from one config."""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import contextmanager
from typing import Iterator

from ..config import TRACKERS
from . import add_json_arg, add_store_arg, int_arg
from .common import TableResult, render_table

_FMT = argparse.RawDescriptionHelpFormatter
_CONFIG_HELP = """\
CONFIG (YAML or JSON) names one protocol, fixed options and the grid of varied options:

  protocol: longtail
  fixed: {data: digits, imbalance: 10, epochs: 1}
  grid:
    method: [ce, ldam_drw]
    seed: [0, 1]

Every cell is the protocol's run config (the fields of `vistabench <protocol> run
--print-config`, written with '_' or '-') made of the fixed options plus one value of
each grid option. Every cell is checked before anything runs. Examples: examples/.
"""


def register(sub: argparse._SubParsersAction) -> None:
    g = sub.add_parser("grid", help="run a protocol over a grid of options (resumable; local or Ray)",
                       formatter_class=_FMT,
                       description="Reproduce a paper's table: protocol x datasets x methods x seeds.\n\n"
                                   "  run     run the cells not yet in the store (local processes or Ray tasks)\n"
                                   "  status  which cells are done, running, failed, missing\n"
                                   "  table   the protocol's paper-shaped table of exactly this grid\n\n"
                                   + _CONFIG_HELP + "\nCluster runbook: docs/grid.md.")
    s = g.add_subparsers(dest="verb", metavar="VERB", required=True)

    p = s.add_parser("run", help="run the missing cells and store their records", formatter_class=_FMT,
                     description="Runs every cell whose records are not yet in --store (same protocol, same "
                                 "options: each record carries its cell key in its grid_cell column), so a killed "
                                 "grid resumes by running the same command again. A failing cell is marked "
                                 "failed with its one-line error and the others go on (exit status 1 if any "
                                 "failed). Only drivers write the store (never the workers); several `grid run` of one grid on "
                                 "one store share its cells (each cell is claimed with a lease, so none runs "
                                 "twice). SIGTERM or Ctrl-C stops the workers before the driver exits.\n\n"
                                 + _CONFIG_HELP)
    p.add_argument("config", metavar="CONFIG.yaml")
    p.add_argument("--engine", default="local", choices=["local", "ray"],
                   help="local: this machine (default); ray: one Ray task per cell")
    p.add_argument("--ray-address", metavar="ADDR",
                   help="Ray cluster to use (e.g. HEAD_IP:6379 from `ray start --head`); default: start a local Ray")
    p.add_argument("--max-parallel", type=int_arg, metavar="N",
                   help="cells at once (local default 1 = in this process; ray default: as resources allow)")
    p.add_argument("--cpus-per-cell", type=int_arg, default=1, metavar="N",
                   help="CPUs a cell declares to Ray, and its torch threads (default 1)")
    p.add_argument("--gpus-per-cell", type=float, metavar="G",
                   help="GPUs a cell declares to Ray (default: 1 when the cell's --device is cuda, else 0)")
    p.add_argument("--work-dir", metavar="DIR",
                   help="cells' scratch files, on whichever machine runs them (default: grid-runs/ beside the store)")
    p.add_argument("--track", action="extend", nargs="+", metavar="TRACKER", choices=list(TRACKERS),
                   help="log every cell to this experiment tracker (repeatable; one of: " + ", ".join(TRACKERS)
                        + "): overrides the config's `track`; runtime only, the cell keys stay (docs/tracking.md)")
    p.add_argument("--track-dir", metavar="DIR",
                   help="TensorBoard's log folder of every cell (default: the config's track_dir, else ./runs)")
    _add_store_args(p)
    add_json_arg(p)
    p.set_defaults(handler=_run, human=_run_text, status=lambda r: 1 if r["failed"] else 0)  # 1: a cell failed

    p = s.add_parser("status", help="done / running / failed / missing cells",
                     description="Lists the grid's cells with their status: done (records in the store), running "
                                 "(a live driver is running it), failed (with the error), missing.")
    p.add_argument("config", metavar="CONFIG.yaml")
    _add_store_args(p)
    add_json_arg(p)
    p.set_defaults(handler=_status, human=_status_text)

    p = s.add_parser("table", help="the paper-shaped table of exactly this grid",
                     description="Renders the protocol's results table (best bold, second underlined, third "
                                 "italic; significance marks where the protocol has them) from the records of "
                                 "this grid's done cells only.")
    p.add_argument("config", metavar="CONFIG.yaml")
    p.add_argument("--format", default="markdown", choices=["markdown", "latex", "csv"])
    _add_store_args(p)
    add_json_arg(p)
    p.set_defaults(handler=_table, human=render_table)


@contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send everything written to file descriptor 1 (Python's ``print``, Ray's and C++ libraries'
    logs alike) to stderr while the body runs, so that a ``--json`` command's stdout holds its JSON only."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _add_store_args(p: argparse.ArgumentParser) -> None:
    add_store_arg(p, optional=False)
    p.add_argument("--no-store", action="store_true", help=argparse.SUPPRESS)  # refused, with the reason


def _store(args) -> str | None:
    """``--store``, or None for ``--no-store`` (the grid refuses it once the config has been checked)."""
    return None if args.no_store else args.store


def _run(args):
    from ..grid import load_config, run_grid

    from ..extras import require
    from ..suite import get_protocol

    cfg = load_config(args.config)
    needs = get_protocol(cfg.protocol).needs("run") + (("ray",) if args.engine == "ray" else ())
    require(*needs, what=f"`vistabench grid run` of {cfg.protocol} cells")
    log = None if args.json else (lambda m: print(m, file=sys.stderr, flush=True))
    with stdout_to_stderr():
        res = run_grid(cfg, store=_store(args), engine=args.engine, max_parallel=args.max_parallel,
                       ray_address=args.ray_address, cpus_per_cell=args.cpus_per_cell,
                       gpus_per_cell=args.gpus_per_cell, work_dir=args.work_dir, log=log, track=args.track,
                       track_dir=args.track_dir)
    return res.to_dict()


def _run_text(r: dict) -> str:
    retried = f", retried {r['retried']} after a lost worker or node" if r.get("retried") else ""
    return f"cells {r['cells']}: ran {r['ran']}, skipped {r['skipped']}, failed {r['failed']}{retried}"


def _status(args):
    from ..grid import grid_status, load_config

    return grid_status(load_config(args.config), store=_store(args))


def _status_text(st) -> str:
    lines = [f"{'status':8} {'key':16}  cell"]
    for r in st["rows"]:
        cell = ", ".join(f"{k}={v}" for k, v in r["cell"].items()) or "(single cell)"
        lines.append(f"{r['status']:8} {r['key']:16}  {cell}" + (f"  -- {r['error']}" if r["error"] else ""))
    lines.append(f"{st['cells']} cells: {st['done']} done, {st['running']} running, {st['failed']} failed, "
                 f"{st['missing']} missing")
    return "\n".join(lines)


def _table(args):
    from ..grid import grid_table, load_config

    return TableResult(grid_table(load_config(args.config), store=_store(args)), args.format)
