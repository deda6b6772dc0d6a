"""Where independent work runs: in this process, a local process pool (``local``) or as Ray tasks (``ray``).

:func:`run_jobs` runs any :class:`Job` (``fn(*args)``, picklable) and yields an :class:`Outcome` per
job as jobs finish. Grid cells, the small-data final runs and the stream's per-task search trials all
go through it: one scheduler for all of them. It sits low in the layers (beside ``config``), so the
protocols and learners may use it; the grid (:mod:`vistabench.grid.engines`) builds on it.

Ray clusters are reached through :func:`connect_ray` only: it answers an absent or unreachable
cluster in one line within seconds, and starts a *new* local Ray when no address is given (a stale
``ray_current_cluster`` file of an earlier session is ignored).

A driver interrupted (Ctrl-C, SIGINT, or SIGTERM within :func:`terminate_as_interrupt`) stops its
jobs before it returns: the worker processes of a local pool are terminated, the Ray tasks in
flight cancelled; none runs on after the driver.

System failures of a Ray task (its worker process killed, its node lost) are retried by Ray itself
(``max_retries=SYSTEM_RETRIES``); an error raised by the job itself is never retried
(``retry_exceptions=False``). Each attempt records itself on a small actor on the head node as it
starts, so an :class:`Outcome` says how many times Ray ran its job again (attempts - 1); the record
is sent without blocking the task, so an attempt killed in its first instant, before the record
left its process, is not counted.

Engines never write to the store: the driver does (one writer).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from .engine import ENGINES, Engine
from .errors import InputError

__all__ = ["ENGINES", "SYSTEM_RETRIES", "Engine", "Job", "Outcome", "check_cluster_gpus", "check_ray_address",
           "connect_ray", "engine_session", "one_line", "resolve_ray_address", "run_jobs",
           "terminate_as_interrupt"]

#: How many times Ray runs a task again after a system failure (worker killed, node lost): its ``max_retries``.
SYSTEM_RETRIES = 3
#: Seconds to wait for a Ray head's port to answer before giving up.
CONNECT_TIMEOUT_S = 5.0


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
    """A finished job: its ``value``, or the ``error`` it raised (its worker dying included).

    ``retries``: how many times Ray ran the job again after a system failure (Ray only; attempts - 1).
    """

    job: Job
    value: Any = None
    error: BaseException | None = None
    retries: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None

    def result(self) -> Any:
        """The value, or raise the job's error in the driver."""
        if self.error is not None:
            raise self.error
        return self.value


def check_ray_address(address: str) -> str:
    """The address Ray will connect to (``auto`` resolved); one-line ``InputError`` within
    :data:`CONNECT_TIMEOUT_S` seconds when no cluster is there (Ray itself would retry for minutes)."""
    target = resolve_ray_address(address)
    _check_reachable(target, address)
    return target


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises KeyboardInterrupt (as Ctrl-C does), so a driver told to stop
    stops its workers and records what is in flight before it exits. Only in the main thread (where
    Python delivers signals); elsewhere a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    before = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def run_jobs(jobs: list[Job], *, engine: Engine | None = None, cpus_per_job: int = 1,
             on_start: Callable[[Job], bool | None] | None = None) -> Iterator[Outcome]:
    """Run independent ``jobs``; yield each one's :class:`Outcome` as it finishes (completion order).

    ``engine`` (an :class:`~vistabench.engine.Engine`, checked when made; None: local, in this process).
    ``engine="local"``: one after another in this process (``max_parallel`` None or 1), else
    ``max_parallel`` spawned worker processes. ``engine="ray"``: each job a Ray task declaring
    ``cpus_per_job`` CPUs and ``job.gpus`` GPUs, at most ``max_parallel`` in flight (None: as many as
    the cluster allows); without ``ray_address`` (and no Ray initialised) a local Ray is started and
    stopped at the end. An argument object shared by several jobs is sent to Ray once. A job whose
    Ray task dies of a system failure is run again by Ray (up to :data:`SYSTEM_RETRIES` times).
    ``on_start(job)`` is called just before a job starts; when it returns False the job is skipped
    (no outcome: the grid skips a cell another driver has claimed). Closing the iterator early, or an
    interrupt, stops the jobs in flight (worker processes terminated, Ray tasks cancelled).
    """
    engine = _engine(engine)
    start = on_start or (lambda _job: None)
    if engine.engine == "ray":
        yield from _jobs_ray(jobs, max_parallel=engine.max_parallel, cpus_per_job=cpus_per_job,
                             ray_address=engine.ray_address, on_start=start)
    else:
        yield from _jobs_local(jobs, max_parallel=engine.max_parallel or 1, on_start=start)


def _engine(engine: Any) -> Engine:
    if engine is None:
        return Engine()
    if not isinstance(engine, Engine):
        raise TypeError(f"engine: expected an Engine, got {type(engine).__name__}")  # a caller's bug
    return engine


# the process pool of an open local engine_session: (pool, its size)
_SESSION_POOL: tuple[Any, int] | None = None


@contextmanager
def engine_session(engine: Engine, *, cpus_per_job: int = 1) -> Iterator[None]:
    """Keep one Ray up across several :func:`run_jobs` calls (e.g. the trials of every task of a
    stream): started (or connected) here when ``engine == "ray"`` and none is initialised, stopped at
    the end; with the local engine and ``max_parallel > 1``, one process pool for all calls."""
    engine = _engine(engine)
    max_parallel = engine.max_parallel
    if engine.engine != "ray":
        if (max_parallel or 1) <= 1:
            yield
            return
        global _SESSION_POOL

        outer = _SESSION_POOL
        with WorkerPool(max_parallel) as pool:
            _SESSION_POOL = (pool, max_parallel)  # worker processes start once, not once per run_jobs call
            try:
                yield
            finally:
                _SESSION_POOL = outer
        return
    ray = import_ray()
    started = connect_ray(engine.ray_address, num_cpus=max_parallel * cpus_per_job if max_parallel else None)
    try:
        yield
    finally:
        if started:
            ray.shutdown()


def _jobs_local(jobs: list[Job], *, max_parallel: int, on_start: Callable[[Job], bool | None]) -> Iterator[Outcome]:
    if max_parallel <= 1:
        for job in jobs:
            if on_start(job) is False:
                continue
            try:
                value = job.fn(*job.args)
            except Exception as exc:
                yield Outcome(job, error=exc)
            else:
                yield Outcome(job, value=value)
        return
    if _SESSION_POOL is not None and _SESSION_POOL[1] == max_parallel:
        yield from _drain_pool(_SESSION_POOL[0], jobs, max_parallel=max_parallel, on_start=on_start)
        return
    with WorkerPool(max_parallel) as pool:
        yield from _drain_pool(pool, jobs, max_parallel=max_parallel, on_start=on_start)


#: set in every worker process: workers share the machine's CPUs, so a small network's steps never
#: move the worker's threads onto one CPU (two workers could pick the same). The name is
#: :data:`vistabench.learners.one_cpu.ENV`, spelled out: importing the learners imports torch
#: (tests/learners/test_one_cpu.py checks that the two agree)
WORKER_ENV = {"VISTABENCH_ONE_CPU": "0"}


def _report_pid(pids: Any) -> None:
    """A pool worker's initializer: tell the driver which process it is (so the driver can stop it)."""
    os.environ.update(WORKER_ENV)
    pids.put(os.getpid())


class WorkerPool:
    """``max_workers`` spawned worker processes (a :class:`concurrent.futures.ProcessPoolExecutor`)
    that the driver can stop at once (:meth:`stop`): each worker reports its process id when it
    starts, so the pool knows its processes through public interfaces only."""

    def __init__(self, max_workers: int) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        context = multiprocessing.get_context("spawn")
        self._pids = context.SimpleQueue()  # a put returns once the pid is in the pipe: no feeder thread
        self._known: set[int] = set()
        self.executor = ProcessPoolExecutor(max_workers=max_workers, mp_context=context,
                                            initializer=_report_pid, initargs=(self._pids,))

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self.executor.submit(fn, *args)

    def workers(self) -> list[Any]:
        """The pool's live worker processes (:class:`multiprocessing.Process`)."""
        import multiprocessing

        while not self._pids.empty():
            self._known.add(self._pids.get())
        return [p for p in multiprocessing.active_children() if p.pid in self._known]

    def stop(self) -> None:
        """Terminate the workers now (``shutdown`` would wait for the jobs they run)."""
        self.executor.shutdown(wait=False, cancel_futures=True)
        procs = self.workers()
        for p in procs:
            p.terminate()
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join(5)

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.executor.shutdown(wait=True)
        self._pids.close()


def _drain_pool(pool: WorkerPool, jobs: list[Job], *, max_parallel: int,
                on_start: Callable[[Job], bool | None]) -> Iterator[Outcome]:
    from concurrent.futures import FIRST_COMPLETED, wait

    queue = list(jobs)
    pending: dict[Any, Job] = {}
    try:
        while queue or pending:
            while queue and len(pending) < max_parallel:
                job = queue.pop(0)
                if on_start(job) is False:
                    continue
                pending[pool.submit(job.fn, *job.args)] = job
            if not pending:
                continue
            finished, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            for fut in finished:
                job = pending.pop(fut)
                try:
                    value = fut.result()
                except Exception as exc:  # the job raised, or its worker process died
                    yield Outcome(job, error=exc)
                else:
                    yield Outcome(job, value=value)
    except BaseException:  # interrupted, or the caller stopped early (GeneratorExit): no worker runs on
        if pending:
            pool.stop()
            global _SESSION_POOL
            if _SESSION_POOL is not None and _SESSION_POOL[0] is pool:
                _SESSION_POOL = None  # its workers are gone
        raise


class AttemptLog:
    """How many times each job's task started: every attempt records itself here first (a small Ray
    actor on the head node), so the driver knows how often Ray retried it (attempts - 1)."""

    def __init__(self) -> None:
        self._attempts: dict[int, int] = {}

    def record(self, key: int) -> int:
        self._attempts[key] = self._attempts.get(key, 0) + 1
        return self._attempts[key]

    def attempts(self, key: int) -> int:
        return self._attempts.get(key, 0)


def run_attempt(log: Any, key: int, fn: Callable[..., Any], *args: Any) -> Any:
    """One attempt of a job in a Ray task: recorded on ``log`` (an :class:`AttemptLog` actor) as it
    starts, then run. The record is sent without waiting (a task blocked in ``ray.get`` lends its CPU
    to another task, which would then share this node) and waited for once the job is done, so it has
    landed before the driver reads the count."""
    import ray

    os.environ.update(WORKER_ENV)
    recorded = log.record.remote(key)
    try:
        return fn(*args)
    finally:
        ray.get(recorded)


def _jobs_ray(jobs: list[Job], *, max_parallel: int | None, cpus_per_job: int, ray_address: str | None,
              on_start: Callable[[Job], bool | None]) -> Iterator[Outcome]:
    ray = import_ray()
    started = connect_ray(ray_address, num_cpus=max_parallel * cpus_per_job if max_parallel else None)
    log = None
    try:
        check_cluster_gpus(max((j.gpus for j in jobs), default=0.0))
        # on the head node (the cluster does not outlive it, so a lost worker node never takes the log
        # along), asked for by Ray's head-node resource as Ray Train places its own state actor
        log = ray.remote(num_cpus=0, max_restarts=0)(AttemptLog).options(
            resources={"node:__internal_head__": 0.001}, scheduling_strategy="DEFAULT").remote()
        # Ray's own retries: a task that dies of a system failure is run again, up to SYSTEM_RETRIES
        # times; an error the job raises itself is never retried
        task = ray.remote(max_retries=SYSTEM_RETRIES, retry_exceptions=False)(run_attempt)
        shared: dict[int, Any] = {}  # id(arg) -> ObjectRef: a big argument (a dataset) is put once

        def ref_of(arg: Any) -> Any:
            if isinstance(arg, (str, int, float, bool, type(None))):
                return arg
            if id(arg) not in shared:
                shared[id(arg)] = ray.put(arg)
            return shared[id(arg)]

        def submit(key: int, job: Job) -> Any:
            name = getattr(job.fn, "__qualname__", None) or "job"
            return task.options(num_cpus=cpus_per_job, num_gpus=job.gpus, name=name).remote(
                log, key, job.fn, *(ref_of(a) for a in job.args))

        queue = list(enumerate(jobs))
        limit = max_parallel or len(queue) or 1
        pending: dict[Any, tuple[int, Job]] = {}  # ref -> (key, job)
        try:
            while queue or pending:
                while queue and len(pending) < limit:
                    key, job = queue.pop(0)
                    if on_start(job) is False:
                        continue
                    pending[submit(key, job)] = (key, job)
                if not pending:
                    continue
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    key, job = pending.pop(ref)
                    try:
                        value = ray.get(ref)
                    except Exception as exc:  # the task raised, or died (OOM, node lost, ...) after its retries
                        yield Outcome(job, error=exc, retries=_retries(ray, log, key))
                    else:
                        yield Outcome(job, value=value, retries=_retries(ray, log, key))
        except BaseException:  # interrupted, or the caller stopped early: cancel what is in flight
            for ref in pending:
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # noqa: BLE001 - already finished or its node gone
                    pass
            raise
    finally:
        if log is not None and ray.is_initialized():
            ray.kill(log)
        if started:
            ray.shutdown()


def _retries(ray: Any, log: Any, key: int) -> int:
    """How many times Ray ran job ``key`` again: its recorded attempts - 1 (0 when it never started)."""
    return max(ray.get(log.attempts.remote(key)) - 1, 0)


def check_cluster_gpus(need: float) -> None:
    """With Ray initialised: a one-line ``InputError`` naming ``device`` when one task needs more GPUs
    than the whole cluster has (Ray would keep it pending forever)."""
    if need <= 0:
        return
    have = import_ray().cluster_resources().get("GPU", 0.0)
    if need > have:
        raise InputError(f"device: each task needs {need:g} GPU but the Ray cluster has {have:g} (device cuda "
                         "needs GPU workers; use device cpu, or a cluster with GPUs; a grid can set gpus_per_cell)")


def import_ray() -> Any:
    from .extras import require

    require("ray", what="engine ray")
    import ray

    return ray


def _ray_temp_dir() -> Path:
    return Path(os.environ.get("RAY_TMPDIR") or tempfile.gettempdir()) / "ray"


def resolve_ray_address(address: str) -> str:
    """``auto`` as Ray reads it (``RAY_ADDRESS``, else the address of the cluster last started on this
    machine), other addresses unchanged; one-line ``InputError`` when ``auto`` finds no cluster."""
    if address != "auto":
        return address
    env = os.environ.get("RAY_ADDRESS", "").strip()
    if env and env != "auto":
        return env
    current = _ray_temp_dir() / "ray_current_cluster"
    try:
        found = current.read_text(encoding="utf-8").strip()
    except OSError:
        found = ""
    if not found:
        raise InputError("ray_address: 'auto' finds no running Ray cluster on this machine; start one with "
                         "`ray start --head`, or give the head's HOST:PORT")
    return found


def _check_reachable(address: str, given: str) -> None:
    """Fail fast on a HOST:PORT nobody listens on (Ray itself retries for minutes)."""
    host, sep, port = address.rpartition(":")
    if not sep or "://" in address or not port.isdigit():
        return  # "ray://..." (Ray Client) and other forms: let Ray resolve them
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        via = f" (where {given!r} points)" if address != given else ""
        raise InputError(f"ray_address: nothing answers at {address!r}{via} ({exc.strerror or exc}); start the "
                         "head with `ray start --head` and use the address it prints") from None


def connect_ray(address: str | None, *, num_cpus: int | None = None, num_gpus: float | None = None) -> bool:
    """Connect to the Ray cluster at ``address``, or start a new local Ray when ``address`` is None.

    The one way vistabench reaches Ray. ``address``: ``HOST:PORT`` of a head (``ray start --head``
    prints it), ``auto`` (``RAY_ADDRESS``, else the cluster last started on this machine) or a
    ``ray://`` client address. A head that does not answer, or ``auto`` finding none, is a one-line
    :class:`~vistabench.errors.InputError` within :data:`CONNECT_TIMEOUT_S` seconds. Without an
    address a *new* local Ray is started with ``num_cpus`` CPUs (None: all) and ``num_gpus`` GPUs
    (None: Ray detects them), never attaching to a cluster an earlier session left behind. Ray's logs
    stay out of this process's stdout. Returns True when this call initialised Ray (the caller shuts
    it down), False when Ray was already initialised.
    """
    ray = import_ray()
    if ray.is_initialized():
        return False
    kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
    if address:
        target = check_ray_address(address)
        try:
            ray.init(address=target, **kw)
        except (ConnectionError, ValueError, RuntimeError, TimeoutError) as exc:
            raise InputError(f"ray_address: cannot connect to {address!r} ({one_line(exc)})") from None
    else:
        # address="local": always a new local instance (None would attach to a cluster recorded in
        # ray_current_cluster, and then refuse num_cpus). Starting it, Ray announces the authentication
        # mode it chose, a notice about clusters others connect to; this one lives and dies with this
        # process, so Ray's documented "ray" logger says only errors while it starts. (The documented
        # RAY_AUTH_MODE cannot say it instead: Ray reads it once, at import.)
        ray_logger = logging.getLogger("ray")
        level = ray_logger.level
        ray_logger.setLevel(logging.ERROR)
        try:
            ray.init(address="local", num_cpus=num_cpus or os.cpu_count() or 1, num_gpus=num_gpus, **kw)
        finally:
            ray_logger.setLevel(level)
    return True


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    msg = text[0] if text else ""
    return f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__
