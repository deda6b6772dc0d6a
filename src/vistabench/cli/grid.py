"""`vistabench grid run|status|table CONFIG.yaml`: a protocol's whole table from one config."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

from ..config import TRACKERS, Options, option
from ..engine import engine_fields
from .common import TABLE_TEXT, TableFormat, TableResult, render_table
from .verbs import Verbs, add_verb, store_field, verb_group

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


@dataclass(frozen=True, kw_only=True)
class GridOptions(Options):
    """What every grid verb takes: the grid's config file and the store (``--no-store`` is refused, with
    the reason, once the config has been checked)."""

    config: str = option(positional=True, metavar="CONFIG.yaml", help="the grid's config file (YAML or JSON)")
    store: str | None = store_field(optional=True, none_help=None)


@dataclass(frozen=True, kw_only=True)
class GridRunOptions(GridOptions, engine_fields(engine="local: this machine; ray: one Ray task per cell",
                                                max_parallel="cells at once (local default 1 = in this process; "
                                                             "ray default: as resources allow)")):
    cpus_per_cell: int = option(1, metavar="N", help="CPUs a cell declares to Ray, and its torch threads")
    gpus_per_cell: float | None = option(None, metavar="G", finite=False,  # run_grid checks it (finite, >= 0)
                                         help="GPUs a cell declares to Ray (default: 1 when the cell's --device "
                                              "is cuda, else 0)")
    work_dir: str | None = option(None, metavar="DIR", help="cells' scratch files, on whichever machine runs them "
                                                           "(default: grid-runs/ beside the store)")
    track: tuple[str, ...] = option((), choices=TRACKERS, repeatable=True, metavar="TRACKER",
                                    help="log every cell to this experiment tracker (repeatable): overrides the "
                                         "config's `track`; runtime only, the cell keys stay (docs/tracking.md)")
    track_dir: str | None = option(None, metavar="DIR", help="TensorBoard's log folder of every cell (default: the "
                                                            "config's track_dir, else ./runs)")


@dataclass(frozen=True, kw_only=True)
class GridTableOptions(GridOptions):
    format: TableFormat = option("markdown", help="table format")


def register(sub: Verbs) -> None:
    s = verb_group(sub, "grid", help="run a protocol over a grid of options (resumable; local or Ray)",
                   description="Reproduce a paper's table: protocol x datasets x methods x seeds.\n\n"
                               "  run     run the cells not yet in the store (local processes or Ray tasks)\n"
                               "  status  which cells are done, running, failed, missing\n"
                               "  table   the protocol's paper-shaped table of exactly this grid\n\n"
                               + _CONFIG_HELP + "\nCluster runbook: docs/grid.md.")

    add_verb(s, "run", GridRunOptions, run=_run, human=_run_text,
             status=lambda r: 1 if r["failed"] else 0,  # 1: a cell failed
             help="run the missing cells and store their records",
             description="Runs every cell whose records are not yet in --store (same protocol, same "
                         "options: each record carries its cell key in its grid_cell column), so a killed "
                         "grid resumes by running the same command again. A failing cell is marked "
                         "failed with its one-line error and the others go on (exit status 1 if any "
                         "failed). Only drivers write the store (never the workers); several `grid run` of "
                         "one grid on one store share its cells (each cell is claimed with a lease, so none "
                         "runs twice). SIGTERM or Ctrl-C stops the workers before the driver exits.\n\n"
                         + _CONFIG_HELP)

    add_verb(s, "status", GridOptions, run=_status, human=_status_text,
             help="done / running / failed / missing cells",
             description="Lists the grid's cells with their status: done (records in the store), running "
                         "(a live driver is running it), failed (with the error), missing.")

    add_verb(s, "table", GridTableOptions, run=_table, human=render_table,
             help="the paper-shaped table of exactly this grid",
             description="Renders the protocol's results table from the records of this grid's done cells "
                         "only. " + TABLE_TEXT)


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


def _run(opts: GridRunOptions) -> dict[str, Any]:
    from ..extras import require
    from ..grid import load_config, run_grid
    from ..progress import is_quiet
    from ..suite import get_protocol

    cfg = load_config(opts.config)
    needs = get_protocol(cfg.protocol).needs("run") + (("ray",) if opts.engine == "ray" else ())
    require(*needs, what=f"`vistabench grid run` of {cfg.protocol} cells")
    log = None if is_quiet() else (lambda m: print(m, file=sys.stderr, flush=True))
    with stdout_to_stderr():
        res = run_grid(cfg, store=opts.store, engine=opts.to_engine(), cpus_per_cell=opts.cpus_per_cell,
                       gpus_per_cell=opts.gpus_per_cell, work_dir=opts.work_dir, log=log,
                       track=list(opts.track) or None, track_dir=opts.track_dir)
    return res.to_dict()


def _run_text(r: dict) -> str:
    retried = f", retried {r['retried']} after a lost worker or node" if r.get("retried") else ""
    return f"cells {r['cells']}: ran {r['ran']}, skipped {r['skipped']}, failed {r['failed']}{retried}"


def _status(opts: GridOptions) -> dict[str, Any]:
    from ..grid import grid_status, load_config

    return grid_status(load_config(opts.config), store=opts.store)


def _status_text(st) -> str:
    lines = [f"{'status':8} {'key':16}  cell"]
    for r in st["rows"]:
        cell = ", ".join(f"{k}={v}" for k, v in r["cell"].items()) or "(single cell)"
        lines.append(f"{r['status']:8} {r['key']:16}  {cell}" + (f"  -- {r['error']}" if r["error"] else ""))
    lines.append(f"{st['cells']} cells: {st['done']} done, {st['running']} running, {st['failed']} failed, "
                 f"{st['missing']} missing")
    return "\n".join(lines)


def _table(opts: GridTableOptions) -> TableResult:
    from ..grid import grid_table, load_config

    return TableResult(grid_table(load_config(opts.config), store=opts.store), opts.format)
