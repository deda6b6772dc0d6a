"""Run a grid, report its status, render its table (the Python API behind ``vistabench grid``)."""

from __future__ import annotations

import math
import os
import socket
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from ..errors import InputError
from ..store import Record, ResultsStore
from .config import Cell, GridConfig
from ..jobs import SYSTEM_RETRIES, Engine, check_ray_address, terminate_as_interrupt
from .engines import gpus_for, run_local, run_ray
from .state import STATUSES, GridState


@dataclass
class GridRun:
    """Counts of one ``grid run`` (``cells = ran + skipped``; ``failed`` counts among ``ran``;
    ``retried``: cells whose Ray task was submitted again after a system failure, done or not)."""

    cells: int
    ran: int
    skipped: int
    failed: int
    errors: dict[str, str] = field(default_factory=dict)  # cell label -> one-line error
    retried: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"cells": self.cells, "ran": self.ran, "skipped": self.skipped, "failed": self.failed,
                "retried": self.retried, "errors": self.errors}


def default_work_dir(store: str | os.PathLike[str]) -> Path:
    """Scratch folders of the cells (split files, predictions): ``<store folder>/grid-runs``."""
    return Path(store).resolve().parent / "grid-runs"


def _store_records(store: ResultsStore, cell: Cell, records: list[dict[str, Any]]) -> list[int]:
    """The cell's records, each with the cell's key (``grid_cell``) and ``grid_part`` = ``"i/n"``."""
    n = len(records)
    ids = []
    for i, d in enumerate(records, 1):
        d = {**d, "id": None, "grid_cell": cell.key, "grid_part": f"{i}/{n}"}
        ids.append(store.add(Record(**d)))
    return ids


def run_grid(config: GridConfig, *, store: str | os.PathLike[str], engine: Engine | None = None, cpus_per_cell: int = 1,
             gpus_per_cell: float | None = None, work_dir: str | os.PathLike[str] | None = None,
             log: Callable[[str], None] | None = None, track: list[str] | None = None,
             track_dir: str | None = None) -> GridRun:
    """Run every cell of ``config`` not already in ``store``; store each finished cell's records.

    Parameters
    ----------
    engine : the :class:`~vistabench.engine.Engine` (None: local, in this process). ``engine`` local runs
        cells in this process (``max_parallel`` > 1: that many spawned processes); ray submits each
        cell as a Ray task needing ``cpus_per_cell`` CPUs and ``gpus_per_cell`` GPUs (default: 1 when
        the cell's ``device`` is cuda, else 0). ``ray_address``: an existing cluster (``ray start
        --head`` prints it); None starts a local Ray. ``max_parallel``: cells in flight at once (local
        default 1; ray default: as many as the resources allow).
    track, track_dir : the experiment trackers (and TensorBoard folder) of every cell, replacing the
        config's ``track``/``track_dir`` (runtime-only: the cells and their keys stay the same).

    Only this driver writes the store. A cell whose records are already stored is skipped; a failed
    cell is marked failed with its one-line error and the others go on; a cell left half-stored by a
    killed driver is removed and run again. Each cell is claimed (a lease in the store) just before
    it starts, so several drivers of one grid on one store share its cells and none runs or stores
    a cell twice (see :mod:`vistabench.grid.state`). SIGTERM, like Ctrl-C, stops the workers (local
    processes or Ray tasks) before this returns (KeyboardInterrupt).
    """
    if engine is None:
        engine = Engine()
    if not isinstance(engine, Engine):
        raise TypeError(f"engine: expected an Engine, got {type(engine).__name__}")  # a caller's bug
    if cpus_per_cell < 1:
        raise InputError(f"cpus_per_cell: expected a positive integer, got {cpus_per_cell}")
    if gpus_per_cell is not None and not (math.isfinite(gpus_per_cell) and gpus_per_cell >= 0):
        raise InputError(f"gpus_per_cell: expected a finite number >= 0, got {gpus_per_cell}")
    say = log or (lambda _msg: None)
    cells = config.cells()  # validates every cell before anything runs
    cells = with_tracking(cells, track, track_dir)
    check_store_path(store)
    if engine.engine == "ray" and engine.ray_address:
        check_ray_address(engine.ray_address)  # an absent cluster: one line now, not after the store is opened
    else:
        check_local_gpus(cells, gpus_per_cell)
    work = Path(work_dir).resolve() if work_dir is not None else default_work_dir(store)
    with ResultsStore(store) as rs, GridState(store) as state, state.keep_alive(), terminate_as_interrupt():
        keys = {c.key for c in cells} - state.leased_by_others()  # another driver's cell in progress is theirs
        state.delete_records(state.incomplete_ids(config.protocol, keys))
        done = state.done_keys(config.protocol)
        todo = [c for c in cells if c.key not in done]
        result = GridRun(cells=len(cells), ran=0, skipped=len(cells) - len(todo), failed=0)
        say(f"grid {config.name}: {len(cells)} cells, {result.skipped} already in {store}, {len(todo)} to run "
            f"({engine.engine})")

        taken: list[str] = []  # cells another driver claimed first

        def started(cell: Cell) -> bool:
            if not state.claim(cell.key):
                taken.append(cell.label())
                return False
            state.mark(cell.key, cell.protocol, cell.canonical, "running")
            return True

        if not todo:
            outcomes = iter(())
        elif engine.engine == "local":
            outcomes = run_local(todo, work_dir=work, engine=engine, cpus_per_cell=cpus_per_cell, on_start=started)
        else:
            outcomes = run_ray(todo, work_dir=work, engine=engine, cpus_per_cell=cpus_per_cell,
                               gpus_per_cell=gpus_per_cell, on_start=started)
        try:
            for cell, out in outcomes:
                if not state.holds(cell.key):  # its lease expired and another driver took the cell over
                    say(f"  dropped {cell.label()}: another driver took it over (its lease expired)")
                    result.skipped += 1
                    continue
                _finish_cell(rs, state, cell, out, result, say)
        except BaseException:
            # interrupted: stop the workers first (closing the engine's iterator terminates them), then
            # the cells this driver had in flight are not running any more
            close = getattr(outcomes, "close", None)
            if close is not None:
                close()
            _mark_mine_missing(state, todo)
            raise
        finally:
            state.release_all()
        result.skipped += len(taken)
        if taken:
            say(f"  {len(taken)} cell(s) claimed by another driver of this store, left to it")
    return result


def _finish_cell(rs: ResultsStore, state: GridState, cell: Cell, out: dict, result: GridRun,
                 say: Callable[[str], None]) -> None:
    """Store a finished cell's records and mark it done, or mark it failed with its error; release it."""
    result.ran += 1
    if out.get("retries"):
        result.retried += 1
        say(f"  retried {cell.label()}: {out['retries']} time(s) after a lost worker or node (at most {SYSTEM_RETRIES})")
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
    state.release(cell.key)


def _mark_mine_missing(state: GridState, todo: list[Cell]) -> None:
    """The cells this driver (host, process) still marks running are not any more: missing (re-run later)."""
    rows = state.cell_rows()
    mine = (socket.gethostname(), os.getpid())
    for c in todo:
        row = rows.get(c.key, {})
        if row.get("status") == "running" and (row.get("host"), row.get("pid")) == mine:
            state.mark(c.key, c.protocol, c.canonical, "missing")


def with_tracking(cells: list[Cell], track: list[str] | None, track_dir: str | None) -> list[Cell]:
    """``cells`` whose configs log to ``track`` (None: as configured) in ``track_dir`` (None: as configured)."""
    changes: dict[str, Any] = {}
    if track is not None:
        changes["track"] = list(track)
    if track_dir is not None:
        changes["track_dir"] = track_dir
    if not changes:
        return cells
    return [replace(c, config=c.config.with_changes(**changes)) for c in cells]


def check_store_path(store: str | os.PathLike[str]) -> None:
    """A results store is a file: a folder is refused in one line (the same for run, status, table)."""
    if store is None:
        raise InputError("store: none (no results store), but a grid needs its results store (it keeps each cell's "
                         "records there and skips the cells already done); give a file")
    if Path(store).is_dir():
        raise InputError(f"store: {str(store)!r} is a folder, expected a results store file")


def check_local_gpus(cells: list[Cell], gpus_per_cell: float | None) -> None:
    """Cells asking for CUDA on a machine without one: one line before any cell (or Ray) starts."""
    needing = [c for c in cells if gpus_for(c, gpus_per_cell) > 0]
    if not needing:
        return
    import torch

    if not torch.cuda.is_available():
        c = needing[0]
        why = f"cell {c.label()} has device {c.setting('device')!r}" if gpus_for(c, None) > 0 else \
            f"gpus_per_cell is {gpus_per_cell:g}"
        raise InputError(f"device: {why} but this machine has no CUDA GPU (torch.cuda.is_available() is "
                         "False); use device cpu, or a Ray cluster with GPU workers (ray_address)")


def grid_status(config: GridConfig, *, store: str | os.PathLike[str]) -> dict[str, Any]:
    """Each cell's status: done (records stored), running, failed (with its error) or missing.

    Reads the store only (a store in a read-only folder works)."""
    cells = config.cells()
    check_store_path(store)
    if Path(store).is_file():
        with ResultsStore(store, read_only=True), GridState(store, read_only=True) as state:
            st = state.status(config.protocol, [c.key for c in cells])
    else:
        st = {c.key: {"status": "missing", "error": None} for c in cells}
    rows = [{"cell": c.varied, "key": c.key, **st[c.key]} for c in cells]
    counts = {s: sum(r["status"] == s for r in rows) for s in STATUSES}
    return {"grid": config.name, "protocol": config.protocol, "cells": len(cells), **counts, "rows": rows}


def grid_records(config: GridConfig, *, store: str | os.PathLike[str]) -> list[Record]:
    """The stored records of exactly this grid's done cells, in the store's order."""
    keys = {c.key for c in config.cells()}
    check_store_path(store)
    if not Path(store).is_file():
        raise InputError(f"store: no such results store {str(store)!r} (run `vistabench grid run` first)")
    with ResultsStore(store, read_only=True) as rs, GridState(store, read_only=True) as state:
        done = state.done_keys(config.protocol) & keys
        return [r for r in rs.records(protocol=config.protocol) if r.grid_cell in done]


def grid_table(config: GridConfig, *, store: str | os.PathLike[str]):
    """The protocol's paper-shaped table (its own marks: best three, significance where it has them)
    built from exactly this grid's records."""
    from .protocols import table_for

    records = grid_records(config, store=store)
    if not records:
        raise InputError(f"store: no cell of grid {config.name!r} is done yet in {str(store)!r} "
                         f"(`vistabench grid status` lists them)")
    return table_for(config.protocol)(records)
