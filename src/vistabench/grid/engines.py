"""Where independent work runs: in this process / a local process pool (``local``) or as Ray tasks (``ray``).

Two layers:

- :func:`run_jobs` runs any :class:`Job` (``fn(*args)``, picklable) and yields an :class:`Outcome`
  per job as jobs finish. Grid cells, the small-data final runs and the stream's per-task search
  trials all go through it: one scheduler for all of them.
- :func:`run_local` / :func:`run_ray` run grid cells and yield ``(cell, outcome)``; an outcome is
  ``{"ok": True, "records": [...]}`` or ``{"ok": False, "error": "<one line>"}``.

Engines never write to the store: the driver does (one writer).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from ..errors import InputError
from .config import Cell

ENGINES = ("local", "ray")


@dataclass(frozen=True, eq=False)
class Job:
    """One independent unit of work: ``fn(*args)`` in whichever process the engine picks.

    ``fn`` must be a module-level function and ``args`` picklable (they travel to a worker);
    ``gpus`` is what the job declares to Ray; ``tag`` is the caller's handle (a cell, a repeat index).
    """

    fn: Callable[..., Any]
    args: tuple
    tag: Any = None
    gpus: float = 0.0


@dataclass(frozen=True, eq=False)
class Outcome:
    """A finished job: its ``value``, or the ``error`` it raised (its worker dying included)."""

    job: Job
    value: Any = None
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def result(self) -> Any:
        """The value, or raise the job's error in the driver."""
        if self.error is not None:
            raise self.error
        return self.value


def check_engine(engine: str, *, max_parallel: int | None, ray_address: str | None,
                 max_parallel_option: str = "--max-parallel") -> None:
    """Validate the engine options once, at the boundary (one-line ``InputError``)."""
    if engine not in ENGINES:
        raise InputError(f"--engine: expected one of {', '.join(ENGINES)}, got {engine!r}")
    if max_parallel is not None and (isinstance(max_parallel, bool) or not isinstance(max_parallel, int)
                                     or max_parallel < 1):
        raise InputError(f"{max_parallel_option}: expected a positive integer, got {max_parallel!r}")
    if ray_address and engine != "ray":
        raise InputError("--ray-address: only with --engine ray")


def run_jobs(jobs: list[Job], *, engine: str = "local", max_parallel: int | None = None, cpus_per_job: int = 1,
             ray_address: str | None = None,
             on_start: Callable[[Job], None] | None = None) -> Iterator[Outcome]:
    """Run independent ``jobs``; yield each one's :class:`Outcome` as it finishes (completion order).

    ``engine="local"``: one after another in this process (``max_parallel`` None or 1), else
    ``max_parallel`` spawned worker processes. ``engine="ray"``: each job a Ray task declaring
    ``cpus_per_job`` CPUs and ``job.gpus`` GPUs, at most ``max_parallel`` in flight (None: as many as
    the cluster allows); without ``ray_address`` (and no Ray initialised) a local Ray is started and
    stopped at the end. An argument object shared by several jobs is sent to Ray once.
    """
    check_engine(engine, max_parallel=max_parallel, ray_address=ray_address)
    start = on_start or (lambda _job: None)
    if engine == "ray":
        yield from _jobs_ray(jobs, max_parallel=max_parallel, cpus_per_job=cpus_per_job, ray_address=ray_address,
                             on_start=start)
    else:
        yield from _jobs_local(jobs, max_parallel=max_parallel or 1, on_start=start)


# the process pool of an open local engine_session: (pool, its size)
_SESSION_POOL: tuple[Any, int] | None = None


@contextmanager
def engine_session(engine: str, *, ray_address: str | None = None, max_parallel: int | None = None,
                   cpus_per_job: int = 1) -> Iterator[None]:
    """Keep one Ray up across several :func:`run_jobs` calls (e.g. the trials of every task of a
    stream): started (or connected) here when ``engine == "ray"`` and none is initialised, stopped at
    the end; a no-op for the local engine."""
    check_engine(engine, max_parallel=max_parallel, ray_address=ray_address)
    if engine != "ray":
        if (max_parallel or 1) <= 1:
            yield
            return
        global _SESSION_POOL
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        outer = _SESSION_POOL
        with ProcessPoolExecutor(max_workers=max_parallel, mp_context=multiprocessing.get_context("spawn")) as pool:
            _SESSION_POOL = (pool, max_parallel)  # worker processes start once, not once per run_jobs call
            try:
                yield
            finally:
                _SESSION_POOL = outer
        return
    ray = _import_ray()
    started = _init_ray(ray, ray_address=ray_address, max_parallel=max_parallel, cpus_per_job=cpus_per_job)
    try:
        yield
    finally:
        if started:
            ray.shutdown()


def _jobs_local(jobs: list[Job], *, max_parallel: int, on_start: Callable[[Job], None]) -> Iterator[Outcome]:
    if max_parallel <= 1:
        for job in jobs:
            on_start(job)
            try:
                value = job.fn(*job.args)
            except Exception as exc:
                yield Outcome(job, error=exc)
            else:
                yield Outcome(job, value=value)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    if _SESSION_POOL is not None and _SESSION_POOL[1] == max_parallel:
        yield from _drain_pool(_SESSION_POOL[0], jobs, max_parallel=max_parallel, on_start=on_start)
        return
    with ProcessPoolExecutor(max_workers=max_parallel, mp_context=multiprocessing.get_context("spawn")) as pool:
        yield from _drain_pool(pool, jobs, max_parallel=max_parallel, on_start=on_start)


def _drain_pool(pool: Any, jobs: list[Job], *, max_parallel: int, on_start: Callable[[Job], None]) -> Iterator[Outcome]:
    from concurrent.futures import FIRST_COMPLETED, wait

    queue = list(jobs)
    pending: dict[Any, Job] = {}
    while queue or pending:
        while queue and len(pending) < max_parallel:
            job = queue.pop(0)
            on_start(job)
            pending[pool.submit(job.fn, *job.args)] = job
        finished, _ = wait(list(pending), return_when=FIRST_COMPLETED)
        for fut in finished:
            job = pending.pop(fut)
            try:
                value = fut.result()
            except Exception as exc:  # the job raised, or its worker process died
                yield Outcome(job, error=exc)
            else:
                yield Outcome(job, value=value)


def _jobs_ray(jobs: list[Job], *, max_parallel: int | None, cpus_per_job: int, ray_address: str | None,
              on_start: Callable[[Job], None]) -> Iterator[Outcome]:
    ray = _import_ray()
    started = _init_ray(ray, ray_address=ray_address, max_parallel=max_parallel, cpus_per_job=cpus_per_job)
    try:
        have = ray.cluster_resources().get("GPU", 0.0)
        need = max((j.gpus for j in jobs), default=0.0)
        if need > have:
            raise InputError(f"each task needs {need:g} GPU but the Ray cluster has {have:g} "
                             "(--device cuda needs GPU workers; a grid can set --gpus-per-cell)")
        remotes: dict[Any, Any] = {}
        shared: dict[int, Any] = {}  # id(arg) -> ObjectRef: a big argument (a dataset) is put once

        def ref_of(arg: Any) -> Any:
            if isinstance(arg, (str, int, float, bool, type(None))):
                return arg
            if id(arg) not in shared:
                shared[id(arg)] = ray.put(arg)
            return shared[id(arg)]

        queue = list(jobs)
        limit = max_parallel or len(queue) or 1
        pending: dict[Any, Job] = {}
        while queue or pending:
            while queue and len(pending) < limit:
                job = queue.pop(0)
                on_start(job)
                if job.fn not in remotes:
                    remotes[job.fn] = ray.remote(max_retries=0)(job.fn)
                ref = remotes[job.fn].options(num_cpus=cpus_per_job, num_gpus=job.gpus).remote(
                    *(ref_of(a) for a in job.args))
                pending[ref] = job
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                job = pending.pop(ref)
                try:
                    value = ray.get(ref)
                except Exception as exc:  # the task raised, or its worker died (OOM, node lost, ...)
                    yield Outcome(job, error=exc)
                else:
                    yield Outcome(job, value=value)
    finally:
        if started:
            ray.shutdown()


def _import_ray():
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise InputError("--engine ray needs Ray: pip install 'vistabench[ray]'") from exc
    return ray


def _init_ray(ray: Any, *, ray_address: str | None, max_parallel: int | None, cpus_per_job: int) -> bool:
    """Connect to ``ray_address`` or start a local Ray (``max_parallel * cpus_per_job`` CPUs, else all);
    True when this call initialised Ray (the caller shuts it down)."""
    if ray.is_initialized():
        return False
    kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
    if ray_address:
        _check_reachable(ray_address)
        try:
            ray.init(address=ray_address, **kw)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            raise InputError(f"--ray-address {ray_address!r}: cannot connect ({one_line(exc)})") from exc
    else:
        ncpu = max_parallel * cpus_per_job if max_parallel else (os.cpu_count() or 1)
        ray.init(num_cpus=ncpu, **kw)
    return True


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


def _cell_outcomes(outcomes: Iterator[Outcome]) -> Iterator[tuple[Cell, dict[str, Any]]]:
    for out in outcomes:
        cell = out.job.tag
        if out.ok:
            yield cell, out.value  # execute_cell never raises: a failed run is already an outcome
        else:  # the worker process / Ray task died
            yield cell, {"ok": False, "error": one_line(out.error)}


def run_local(cells: list[Cell], *, work_dir: Path, max_parallel: int, cpus_per_cell: int,
              on_start: Callable[[Cell], None]) -> Iterator[tuple[Cell, dict[str, Any]]]:
    """Cells one after another in this process, or ``max_parallel`` spawned worker processes."""
    seq = max_parallel <= 1
    jobs = [Job(execute_cell, (c.protocol, c.options, _cell_dir(work_dir, c), cpus_per_cell,
                               None if seq else os.getcwd()), tag=c) for c in cells]
    yield from _cell_outcomes(run_jobs(jobs, engine="local", max_parallel=max_parallel,
                                       on_start=lambda job: on_start(job.tag)))


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
    jobs = [Job(execute_cell, (c.protocol, c.options, _cell_dir(work_dir, c), cpus_per_cell, os.getcwd()),
                tag=c, gpus=gpus_for(c, gpus_per_cell)) for c in cells]
    yield from _cell_outcomes(run_jobs(jobs, engine="ray", max_parallel=max_parallel, cpus_per_job=cpus_per_cell,
                                       ray_address=ray_address, on_start=lambda job: on_start(job.tag)))
