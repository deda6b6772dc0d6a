"""Independent fits of a small network at once, one per CPU ("lanes"), with the same numbers.

When a small network's steps run fastest with every thread of the fit on one CPU
(:mod:`.one_cpu`), the machine's other CPUs idle while it trains. Fits that do not depend on each
other (the small-data protocol's final runs: one configuration trained with seeds 0..R-1) can then
run at once, one per CPU: :func:`run_ordered` starts one thread per lane, moves it to its own CPU
before it runs any torch kernel (so the OpenMP threads it starts run there too) and gives it the
caller's torch thread count, so every fit keeps its arithmetic (the same team, the same split, on
another CPU: the same bits, tests/learners/test_lanes.py). Results come back in the order given.

torch's default random generator is one per process, so three rules keep lanes from changing a
number:

- every block that seeds it takes :data:`SEED_LOCK` (:func:`seeded`): a lane building its network
  never draws from a stream another lane has just re-seeded;
- a fit's training loop seeds it for the whole loop (for dropout or augmentation drawn from it),
  which a lane cannot do without holding the lock for the whole fit: so only fits whose first,
  ordinary, run drew nothing from it in its loop (:attr:`Trainer.lane_ready
  <vistabench.learners.trainer.Trainer>`, :func:`loop_seed`) go to lanes, where a loop leaves the
  generator alone;
- nothing a lane runs may draw from it outside a seeded block, its loop included
  (:class:`Untouched`, checked per job; the caller checks the first run the same way).

A broken rule stops the run with an error rather than let a result differ from the sequence's.

What else a fit shares across threads is kept per thread while in a lane: progress output is
silent (:func:`vistabench.progress.quiet_here`), per-epoch reports are collected and handed to the
process's listeners in order when the run's result is (:func:`vistabench.epochs.collected`), and
the step placement of :mod:`.one_cpu` stays off (the lane already placed its threads). Lanes are off
where :mod:`.one_cpu` is (``VISTABENCH_ONE_CPU=0``, a job runner's workers, no per-thread
affinity) and with ``VISTABENCH_LANES=0``.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, TypeVar

import torch

from .. import epochs, progress
from . import one_cpu
from .distributed import cpu_cores

__all__ = ["SEED_LOCK", "seeded", "in_lane", "lanes_available", "run_ordered", "loop_seed", "Untouched",
           "ENV"]

T = TypeVar("T")
R = TypeVar("R")

#: the environment variable that turns lanes off ("0")
ENV = "VISTABENCH_LANES"
#: held by every block that seeds torch's default generator (:func:`seeded`)
SEED_LOCK = threading.RLock()


@contextmanager
def seeded(seed: int, devices: list | None = None) -> Iterator[None]:
    """torch's default generator seeded with ``seed`` inside, its state (and that of ``devices``'
    generators; none by default) restored after, one thread at a time (:data:`SEED_LOCK`)."""
    with SEED_LOCK, torch.random.fork_rng(devices=[] if devices is None else devices):
        torch.manual_seed(seed)
        yield


def in_lane() -> bool:
    """Whether this thread is a lane of :func:`run_ordered`."""
    return one_cpu.placed_by_lane()


def lanes_available() -> int:
    """How many lanes this process can run: the CPUs it may use, or 1 when lanes are off
    (``VISTABENCH_LANES=0``, or where :mod:`.one_cpu` cannot move threads) or inside a lane."""
    if os.environ.get(ENV, "1") == "0" or in_lane() or not one_cpu.supported():
        return 1
    return cpu_cores()


class Untouched:
    """Context manager: :attr:`clean` says on exit whether torch's default generator is in the
    state it was in on entry (read under :data:`SEED_LOCK`): nothing inside drew from it outside
    a :func:`seeded` block, which gives the state back."""

    def __init__(self) -> None:
        self.clean: bool | None = None
        self._state: torch.Tensor | None = None

    def __enter__(self) -> "Untouched":
        with SEED_LOCK:
            self._state = torch.random.get_rng_state()
        return self

    def __exit__(self, *exc: Any) -> None:
        with SEED_LOCK:
            self.clean = torch.equal(self._state, torch.random.get_rng_state())


@contextmanager
def loop_seed(seed: int, devices: list | None = None) -> Iterator[Untouched | None]:
    """Context manager over a fit's training loop: torch's default generator seeded with ``seed``
    (:func:`seeded`, the state given back after), yielding an :class:`Untouched` whose ``clean``
    says on exit whether the loop drew nothing from it. In a lane (:func:`in_lane`) the generator is
    left alone and None is yielded: nothing a lane runs may draw from it (:func:`run_ordered`
    checks each job)."""
    if in_lane():
        yield None
        return
    with seeded(seed, devices), Untouched() as untouched:
        yield untouched


def run_ordered(fn: Callable[[T], R], items: Iterable[T], *, lanes: int) -> Iterator[tuple[T, R, list[dict]]]:
    """``(item, fn(item), epoch_reports)`` for every item, in the order given, computed in up to
    ``lanes`` threads, each on its own CPU (the first ``lanes`` this process may use) with the
    caller's torch thread count. ``epoch_reports`` are the per-epoch entries the item's fits
    reported (:func:`vistabench.epochs.report`), for the caller to hand on in order. An exception
    in ``fn`` is raised here when its item's turn comes; the items not started are dropped. ``fn``
    must not draw from torch's default generator outside :func:`seeded` blocks (a RuntimeError
    when it did: :class:`Untouched`)."""
    items = list(items)
    cpus = sorted(os.sched_getaffinity(0))[:max(1, min(lanes, len(items)))]
    threads = torch.get_num_threads()
    free = list(cpus)
    claim = threading.Lock()

    def enter() -> None:  # once per lane thread, before it runs anything
        with claim:
            cpu = free.pop(0)
        os.sched_setaffinity(0, {cpu})  # the OpenMP threads it starts inherit the CPU
        one_cpu.mark_placed_by_lane()
        progress.quiet_here()
        torch.set_num_threads(threads)

    def job(item: T) -> tuple[R, list[dict]]:
        with Untouched() as untouched, epochs.collected() as reports:
            result = fn(item)
        if not untouched.clean:  # a draw outside a seeded block: its numbers depend on the other lanes
            raise RuntimeError(f"a fit in a lane drew from torch's default generator outside a seeded block, so "
                               f"it could differ from the same fit in sequence; set {ENV}=0 to train one fit at "
                               "a time")
        return result, reports

    pool = ThreadPoolExecutor(len(cpus), thread_name_prefix="vistabench-lane", initializer=enter)
    futures: list[Future] = []
    try:
        futures = [pool.submit(job, it) for it in items]
        for it, fut in zip(items, futures):
            result, reports = fut.result()
            yield it, result, reports
    finally:
        for fut in futures:
            fut.cancel()
        pool.shutdown(wait=True)
