"""Where cells run: in this process / a local process pool (``local``) or as Ray tasks (``ray``).

An engine takes the cells to run and yields ``(cell, outcome)`` as cells finish; an outcome is
``{"ok": True, "records": [...]}`` or ``{"ok": False, "error": "<one line>"}``. Engines never
write to the store: the driver does (one writer).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Iterator

from ..errors import InputError
from .config import Cell

ENGINES = ("local", "ray")


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    msg = text[0] if text else ""
    return f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__


def execute_cell(protocol: str, options: dict[str, Any], work_dir: str, threads: int,
                 cwd: str | None = None) -> dict[str, Any]:
    """Run one cell (in whatever process the engine chose); never raises for a failing run.

    ``cwd``: the driver's working directory, so relative paths in the config mean the same on a
    worker (when that folder exists there).
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
        from .protocols import run_protocol

        return {"ok": True, "records": run_protocol(protocol, options, work_dir=work_dir)}
    except Exception as exc:  # a failed cell is reported, the grid goes on
        return {"ok": False, "error": one_line(exc)}
    finally:
        if torch is not None and before is not None:
            torch.set_num_threads(before)
        if os.getcwd() != here:
            os.chdir(here)


def _cell_dir(work_dir: Path, cell: Cell) -> str:
    return str(work_dir / f"{cell.protocol}-{cell.key}")


def run_local(cells: list[Cell], *, work_dir: Path, max_parallel: int, cpus_per_cell: int,
              on_start: Callable[[Cell], None]) -> Iterator[tuple[Cell, dict[str, Any]]]:
    """Cells one after another in this process, or ``max_parallel`` spawned worker processes."""
    if max_parallel <= 1:
        for cell in cells:
            on_start(cell)
            yield cell, execute_cell(cell.protocol, cell.options, _cell_dir(work_dir, cell), cpus_per_cell)
        return
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    queue = list(cells)
    with ProcessPoolExecutor(max_workers=max_parallel, mp_context=multiprocessing.get_context("spawn")) as pool:
        pending: dict[Any, Cell] = {}
        while queue or pending:
            while queue and len(pending) < max_parallel:
                cell = queue.pop(0)
                on_start(cell)
                pending[pool.submit(execute_cell, cell.protocol, cell.options, _cell_dir(work_dir, cell),
                                    cpus_per_cell, os.getcwd())] = cell
            finished, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            for fut in finished:
                cell = pending.pop(fut)
                try:
                    yield cell, fut.result()
                except Exception as exc:  # the worker process died
                    yield cell, {"ok": False, "error": one_line(exc)}


def gpus_for(cell: Cell, gpus_per_cell: float | None) -> float:
    """``gpus_per_cell`` when given, else 1 for a cell whose ``device`` is cuda, else 0."""
    if gpus_per_cell is not None:
        return gpus_per_cell
    device = str(cell.canonical.get("device") or "")
    return 1.0 if device.startswith("cuda") else 0.0


def _check_reachable(address: str) -> None:
    """Fail fast on a HOST:PORT nobody listens on (Ray itself retries for minutes)."""
    import socket

    host, sep, port = address.rpartition(":")
    if not sep or "://" in address or not port.isdigit():
        return  # "auto", "ray://...": let Ray resolve it
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as exc:
        raise InputError(f"--ray-address {address!r}: nothing answers there ({exc.strerror or exc}); "
                         "start the head with `ray start --head` and use the address it prints") from exc


def run_ray(cells: list[Cell], *, work_dir: Path, max_parallel: int | None, cpus_per_cell: int,
            gpus_per_cell: float | None, ray_address: str | None,
            on_start: Callable[[Cell], None]) -> Iterator[tuple[Cell, dict[str, Any]]]:
    """Each cell a Ray task with declared resources; at most ``max_parallel`` in flight (None: Ray decides).

    Without ``ray_address`` (and no Ray already initialised) a local Ray is started with
    ``max_parallel * cpus_per_cell`` CPUs (all CPUs when ``max_parallel`` is None) and shut down at the end.
    """
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise InputError("--engine ray needs Ray: pip install 'vistabench[ray]'") from exc
    started = False
    if not ray.is_initialized():
        kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
        if ray_address:
            _check_reachable(ray_address)
            try:
                ray.init(address=ray_address, **kw)
            except (ConnectionError, ValueError, RuntimeError) as exc:
                raise InputError(f"--ray-address {ray_address!r}: cannot connect ({one_line(exc)})") from exc
        else:
            ncpu = max_parallel * cpus_per_cell if max_parallel else (os.cpu_count() or 1)
            ray.init(num_cpus=ncpu, **kw)
        started = True
    try:
        have = ray.cluster_resources().get("GPU", 0.0)
        need = max((gpus_for(c, gpus_per_cell) for c in cells), default=0.0)
        if need > have:
            raise InputError(f"cells need {need:g} GPU each but the Ray cluster has {have:g} "
                             "(--device cuda needs GPU workers; or set --gpus-per-cell)")
        remote = ray.remote(max_retries=0)(execute_cell)
        queue = list(cells)
        limit = max_parallel or len(queue) or 1
        pending: dict[Any, Cell] = {}
        while queue or pending:
            while queue and len(pending) < limit:
                cell = queue.pop(0)
                on_start(cell)
                ref = remote.options(num_cpus=cpus_per_cell, num_gpus=gpus_for(cell, gpus_per_cell)).remote(
                    cell.protocol, cell.options, _cell_dir(work_dir, cell), cpus_per_cell, os.getcwd())
                pending[ref] = cell
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                cell = pending.pop(ref)
                try:
                    yield cell, ray.get(ref)
                except Exception as exc:  # the task or its worker died (OOM, node lost, ...)
                    yield cell, {"ok": False, "error": one_line(exc)}
    finally:
        if started:
            ray.shutdown()
