"""Run a grid, report its status, render its table (the Python API behind ``vistabench grid``)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..errors import InputError
from ..store import Record, ResultsStore
from .config import Cell, GridConfig
from .engines import ENGINES, run_local, run_ray
from .state import STATUSES, GridState


@dataclass
class GridRun:
    """Counts of one ``grid run`` (``cells = ran + skipped``; ``failed`` counts among ``ran``)."""

    cells: int
    ran: int
    skipped: int
    failed: int
    errors: dict[str, str] = field(default_factory=dict)  # cell label -> one-line error

    def to_dict(self) -> dict[str, Any]:
        return {"cells": self.cells, "ran": self.ran, "skipped": self.skipped, "failed": self.failed,
                "errors": self.errors}


def default_work_dir(store: str | os.PathLike[str]) -> Path:
    """Scratch folders of the cells (split files, predictions): ``<store folder>/grid-runs``."""
    return Path(store).resolve().parent / "grid-runs"


def _store_records(store: ResultsStore, cell: Cell, records: list[dict[str, Any]]) -> list[int]:
    n = len(records)
    ids = []
    for i, d in enumerate(records, 1):
        d = dict(d)
        d.pop("id", None)
        d["settings"] = {**d.get("settings", {}), "grid_cell": cell.key, "grid_part": f"{i}/{n}"}
        ids.append(store.add(Record(**d)))
    return ids


def run_grid(config: GridConfig, *, store: str | os.PathLike[str], engine: str = "local",
             max_parallel: int | None = None, ray_address: str | None = None, cpus_per_cell: int = 1,
             gpus_per_cell: float | None = None, work_dir: str | os.PathLike[str] | None = None,
             log: Callable[[str], None] | None = None) -> GridRun:
    """Run every cell of ``config`` not already in ``store``; store each finished cell's records.

    Parameters
    ----------
    engine : "local" runs cells in this process (``max_parallel`` > 1: that many spawned processes);
        "ray" submits each cell as a Ray task needing ``cpus_per_cell`` CPUs and ``gpus_per_cell`` GPUs
        (default: 1 when the cell's ``device`` is cuda, else 0).
    ray_address : an existing cluster (``ray start --head`` prints it); None starts a local Ray.
    max_parallel : cells in flight at once (local default 1; ray default: as many as the resources allow).

    Only this driver writes the store. A cell whose records are already stored is skipped; a failed
    cell is marked failed with its one-line error and the others go on; a cell left half-stored by a
    killed driver is removed and run again.
    """
    if engine not in ENGINES:
        raise InputError(f"--engine: expected one of {', '.join(ENGINES)}, got {engine!r}")
    if max_parallel is not None and max_parallel < 1:
        raise InputError(f"--max-parallel: expected a positive integer, got {max_parallel}")
    if cpus_per_cell < 1:
        raise InputError(f"--cpus-per-cell: expected a positive integer, got {cpus_per_cell}")
    if gpus_per_cell is not None and gpus_per_cell < 0:
        raise InputError(f"--gpus-per-cell: expected a number >= 0, got {gpus_per_cell}")
    if ray_address and engine != "ray":
        raise InputError("--ray-address: only with --engine ray")
    say = log or (lambda _msg: None)
    cells = config.cells()  # validates every cell before anything runs
    work = Path(work_dir).resolve() if work_dir is not None else default_work_dir(store)
    with ResultsStore(store) as rs, GridState(store) as state:
        keys = {c.key for c in cells}
        state.delete_records(state.incomplete_ids(config.protocol, keys))
        done = state.done_keys(config.protocol)
        todo = [c for c in cells if c.key not in done]
        result = GridRun(cells=len(cells), ran=0, skipped=len(cells) - len(todo), failed=0)
        say(f"grid {config.name}: {len(cells)} cells, {result.skipped} already in {store}, {len(todo)} to run "
            f"({engine})")

        def started(cell: Cell) -> None:
            state.mark(cell.key, cell.protocol, cell.canonical, "running")

        if not todo:
            outcomes = iter(())
        elif engine == "local":
            outcomes = run_local(todo, work_dir=work, max_parallel=max_parallel or 1, cpus_per_cell=cpus_per_cell,
                                 on_start=started)
        else:
            outcomes = run_ray(todo, work_dir=work, max_parallel=max_parallel, cpus_per_cell=cpus_per_cell,
                               gpus_per_cell=gpus_per_cell, ray_address=ray_address, on_start=started)
        try:
            for cell, out in outcomes:
                result.ran += 1
                if out["ok"] and out["records"]:
                    ids = _store_records(rs, cell, out["records"])
                    state.mark(cell.key, cell.protocol, cell.canonical, "done")
                    say(f"  done    {cell.label()}  (records {', '.join(map(str, ids))})")
                else:
                    error = out.get("error") or "the run stored no record"
                    result.failed += 1
                    result.errors[cell.label()] = error
                    state.mark(cell.key, cell.protocol, cell.canonical, "failed", error)
                    say(f"  FAILED  {cell.label()}: {error}")
        except BaseException:
            # interrupted: cells in flight are not running any more
            rows = state.cell_rows()
            for c in todo:
                if rows.get(c.key, {}).get("status") == "running":
                    state.mark(c.key, c.protocol, c.canonical, "missing")
            raise
    return result


def grid_status(config: GridConfig, *, store: str | os.PathLike[str]) -> dict[str, Any]:
    """Each cell's status: done (records stored), running, failed (with its error) or missing."""
    cells = config.cells()
    if Path(store).is_file():
        with ResultsStore(store), GridState(store) as state:  # ResultsStore: the records table exists
            st = state.status(config.protocol, [c.key for c in cells])
    else:
        st = {c.key: {"status": "missing", "error": None} for c in cells}
    rows = [{"cell": c.varied, "key": c.key, **st[c.key]} for c in cells]
    counts = {s: sum(r["status"] == s for r in rows) for s in STATUSES}
    return {"grid": config.name, "protocol": config.protocol, "cells": len(cells), **counts, "rows": rows}


def grid_records(config: GridConfig, *, store: str | os.PathLike[str]) -> list[Record]:
    """The stored records of exactly this grid's done cells, in the store's order."""
    if not Path(store).is_file():
        raise InputError(f"--store {str(store)!r}: no such results store (run `vistabench grid run` first)")
    keys = {c.key for c in config.cells()}
    with ResultsStore(store) as rs, GridState(store) as state:
        done = state.done_keys(config.protocol) & keys
        return [r for r in rs.records(protocol=config.protocol) if r.settings.get("grid_cell") in done]


def grid_table(config: GridConfig, *, store: str | os.PathLike[str]):
    """The protocol's paper-shaped table (its own marks: best three, significance where it has them)
    built from exactly this grid's records."""
    from .protocols import table_for

    records = grid_records(config, store=store)
    if not records:
        raise InputError(f"--store {str(store)!r}: no cell of grid {config.name!r} is done yet "
                         f"(`vistabench grid status` lists them)")
    build = table_for(config.protocol)
    with ResultsStore(":memory:") as view:
        for r in records:
            d = r.to_dict()
            d.pop("id")
            view.add(Record(**d))
        return build(view)
