"""Grid cells on the job runner (:mod:`vistabench.jobs`): in this process, local processes or Ray tasks.

:func:`run_local` / :func:`run_ray` run grid cells and yield ``(cell, outcome)``; an outcome is
``{"ok": True, "records": [...], "retries": n}`` or ``{"ok": False, "error": "<one line>", "retries": n}``
(``retries``: how many times the cell's Ray task was submitted again after a system failure).
Engines never write to the store: the driver does (one writer).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Iterator

from ..config import RunConfig
from ..jobs import Engine, Job, Outcome, one_line, run_jobs
from .config import Cell
from .protocols import import_ref, run_config

__all__ = ["execute_cell", "gpus_for", "run_local", "run_ray"]


def execute_cell(protocol: str, run: str, config: RunConfig, work_dir: str, threads: int,
                 cwd: str | None = None, tags: dict[str, str] | None = None) -> dict[str, Any]:
    """Run one cell (in whatever process the engine chose); never raises for a failing run.

    ``run``: the protocol's run part (``"module:function"``); ``config``: the cell's typed config.
    ``cwd``: the driver's working directory, so relative paths in the config mean the same on a
    worker (when that folder exists there). ``tags``: the tracked run's tags (the grid and cell).
    """
    here = os.getcwd()
    if cwd and cwd != here and os.path.isdir(cwd):
        os.chdir(cwd)
    torch = None
    before = None
    try:
        import torch  # noqa: F811 - same thread count in every engine -> identical results

        before = torch.get_num_threads()
        torch.set_num_threads(threads)
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    from ..progress import set_quiet

    set_quiet(True)
    try:
        records = run_config(import_ref(run), config, work_dir=work_dir, tags=tags)
        return {"ok": True, "records": records}
    except Exception as exc:  # a failed cell is reported, the grid goes on
        return {"ok": False, "error": one_line(exc)}
    finally:
        if torch is not None and before is not None:
            torch.set_num_threads(before)
        if os.getcwd() != here:
            os.chdir(here)


def _cell_dir(work_dir: Path, cell: Cell) -> str:
    return str(work_dir / f"{cell.protocol}-{cell.key}")


def _job(cell: Cell, work_dir: Path, threads: int, cwd: str | None, gpus: float = 0.0) -> Job:
    tags = {"vistabench.grid_cell": cell.key, "vistabench.grid_options": cell.label()}
    return Job(execute_cell, (cell.protocol, cell.run, cell.config, _cell_dir(work_dir, cell), threads, cwd, tags),
               tag=cell, gpus=gpus)


def _cell_outcomes(outcomes: Iterator[Outcome]) -> Iterator[tuple[Cell, dict[str, Any]]]:
    for out in outcomes:
        cell = out.job.tag
        if out.ok:  # execute_cell never raises: a failed run is already an outcome
            yield cell, {**out.value, "retries": out.retries}
        else:  # the worker process / Ray task died (after its retries)
            yield cell, {"ok": False, "error": one_line(out.error), "retries": out.retries}


def run_local(cells: list[Cell], *, work_dir: Path, engine: Engine, cpus_per_cell: int,
              on_start: Callable[[Cell], None]) -> Iterator[tuple[Cell, dict[str, Any]]]:
    """Cells one after another in this process, or ``engine.max_parallel`` spawned worker processes."""
    seq = (engine.max_parallel or 1) <= 1
    jobs = [_job(c, work_dir, cpus_per_cell, None if seq else os.getcwd()) for c in cells]
    yield from _cell_outcomes(run_jobs(jobs, engine=engine, on_start=lambda job: on_start(job.tag)))


def gpus_for(cell: Cell, gpus_per_cell: float | None) -> float:
    """``gpus_per_cell`` when given, else 1 for a cell whose ``device`` is cuda, else 0."""
    if gpus_per_cell is not None:
        return gpus_per_cell
    device = str(cell.setting("device") or "")
    return 1.0 if device.startswith("cuda") else 0.0


def run_ray(cells: list[Cell], *, work_dir: Path, engine: Engine, cpus_per_cell: int,
            gpus_per_cell: float | None,
            on_start: Callable[[Cell], None]) -> Iterator[tuple[Cell, dict[str, Any]]]:
    """Each cell a Ray task with declared resources; at most ``max_parallel`` in flight (None: Ray decides).

    Without ``ray_address`` (and no Ray already initialised) a new local Ray is started with
    ``max_parallel * cpus_per_cell`` CPUs (all CPUs when ``max_parallel`` is None) and shut down at
    the end. A cell whose task dies of a system failure (worker killed, node lost) is submitted
    again, up to :data:`vistabench.jobs.SYSTEM_RETRIES` times.
    """
    jobs = [_job(c, work_dir, cpus_per_cell, os.getcwd(), gpus_for(c, gpus_per_cell)) for c in cells]
    yield from _cell_outcomes(run_jobs(jobs, engine=engine, cpus_per_job=cpus_per_cell,
                                       on_start=lambda job: on_start(job.tag)))
