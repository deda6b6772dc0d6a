"""A small network's training steps with every thread of the process on one CPU, when measured faster.

torch runs a CPU kernel on an OpenMP team of ``torch.get_num_threads()`` threads; batch norm and
oneDNN's weight gradients sum per thread, so the thread count is part of a run's arithmetic and is
never changed here. A step of a very small network (dhn on digits: 1 x 1 maps, batch 10) is ~110
parallel regions, and each one wakes the team's other thread, asleep on the other CPU
(``OMP_WAIT_POLICY=PASSIVE``): on a virtual machine a cross-CPU wake costs 50-150 µs, more than the
region's arithmetic. With every thread on the CPU the caller runs on, a region is the same two
threads' work, done one after the other on that CPU, without the cross-CPU wake: the same bits
(the team and its split are unchanged; tests/learners/test_one_cpu.py checks weights and logits bit
for bit), 1.4-2.0x faster per fit on dhn's digits network (``benchmarks/trainer_small_network.py``), and
slower for a network whose steps are real work (half the CPUs).

Which of the two is faster depends on the network, the batch and the machine, so it is measured,
not guessed: :class:`StepPlacement` times the first fit's steps (after a warm-up, some with the
threads free, then some on one CPU), keeps the faster for the rest of the fit, and remembers the
choice for the process (one key per network type, parameter count, batch size, input shape and
thread count), so later fits with the same key start on the chosen placement. Only a network whose
largest weight has at most :data:`~.openmp.SMALL_UPDATE` elements is measured; others never move.

Off (threads never moved): with ``VISTABENCH_ONE_CPU=0``; unless idle OpenMP threads sleep
(``OMP_WAIT_POLICY=PASSIVE``, the ``vistabench`` command's setting); in a job runner's worker
processes (several workers share the machine's CPUs; :mod:`vistabench.jobs` sets the variable
there); with fewer than two CPUs allowed or one torch thread; where Linux's per-thread affinity
(``/proc/self/task``, ``os.sched_setaffinity``, ``sched_getcpu``) is not available; in a lane of
:mod:`.lanes` (its thread is already on a CPU of its own). A choice never changes a number.
"""

from __future__ import annotations

import os
import statistics
import threading
from typing import Any, Hashable

from ..libc import process_libc
from .distributed import cpu_cores

__all__ = ["StepPlacement", "pin_to_current_cpu", "unpin", "supported", "mark_placed_by_lane", "placed_by_lane", "ENV",
           "CHOICES"]

#: the environment variable that turns the placement off ("0")
ENV = "VISTABENCH_ONE_CPU"
#: key -> True (steps on one CPU) / False (threads free): the choices measured in this process
CHOICES: dict[Hashable, bool] = {}
_THREAD = threading.local()  # .lane: this thread is a lane of .lanes.run_ordered (already on its own CPU)


def mark_placed_by_lane() -> None:
    """This thread runs on a CPU of its own (a lane of :func:`.lanes.run_ordered`): a fit's
    :class:`StepPlacement` here never moves threads."""
    _THREAD.lane = True


def placed_by_lane() -> bool:
    """Whether :func:`mark_placed_by_lane` was called in this thread."""
    return getattr(_THREAD, "lane", False)


def _sched_getcpu() -> int | None:
    lib = process_libc()
    if lib is None or not hasattr(lib, "sched_getcpu"):
        return None
    cpu = lib.sched_getcpu()  # returns a C int, ctypes' default
    return cpu if cpu >= 0 else None


def supported() -> bool:
    """Whether this process can move its threads: Linux per-thread affinity, two or more CPUs
    allowed, idle OpenMP threads that sleep (``OMP_WAIT_POLICY=PASSIVE``, which the ``vistabench``
    command sets: with the default, spinning, two threads on one CPU spin against each other), and
    not turned off with ``VISTABENCH_ONE_CPU=0``."""
    if os.environ.get(ENV, "1") == "0" or not hasattr(os, "sched_setaffinity"):
        return False
    if os.environ.get("OMP_WAIT_POLICY", "").strip().upper() != "PASSIVE":
        return False
    if not os.path.isdir("/proc/self/task") or _sched_getcpu() is None:
        return False
    return cpu_cores() >= 2


def _threads() -> list[int]:
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return []


def pin_to_current_cpu() -> dict[int, set[int]] | None:
    """Move every thread of this process to the CPU the caller runs on; returns each thread's mask
    before (for :func:`unpin`), or None when the CPU cannot be found."""
    cpu = _sched_getcpu()
    if cpu is None:
        return None
    saved: dict[int, set[int]] = {}
    for tid in _threads():
        try:
            saved[tid] = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, {cpu})
        except OSError:  # the thread ended meanwhile
            saved.pop(tid, None)
    return saved


def unpin(saved: dict[int, set[int]]) -> None:
    """Give every thread its mask from before :func:`pin_to_current_cpu`; a thread started since
    (it inherited the single CPU) gets the caller's."""
    own = saved.get(threading.get_native_id())
    for tid in _threads():
        mask = saved.get(tid, own)
        if mask is None:
            continue
        try:
            os.sched_setaffinity(tid, mask)
        except OSError:
            pass


class StepPlacement:
    """Context manager over a fit's steps: call :meth:`stepped` after each step with its seconds.

    With a choice already made for ``key`` the steps run on it throughout. Else, when ``measure``:
    :data:`WARMUP` steps free (not timed), :data:`SAMPLES` timed free, one step to move the threads
    (not timed), :data:`SAMPLES` timed on one CPU; the faster median is kept for the rest of the fit
    and recorded in :data:`CHOICES`. A fit too short to finish the measurement leaves no choice.
    The threads are back where they were when the context ends (also on an error)."""

    WARMUP = 2
    SAMPLES = 6

    def __init__(self, key: Hashable, *, measure: bool):
        self.key = key
        self.active = measure and not placed_by_lane() and supported()
        self.choice: bool | None = CHOICES.get(key) if self.active else False
        self.times: dict[bool, list[float]] = {False: [], True: []}
        self.step = 0
        self._saved: dict[int, set[int]] | None = None

    @property
    def on_one_cpu(self) -> bool:
        """Whether the steps (since the measurement, if any) ran with every thread on one CPU."""
        return self.active and self.choice is True

    def _set(self, one_cpu: bool) -> None:
        if one_cpu and self._saved is None:
            self._saved = pin_to_current_cpu()
        elif not one_cpu and self._saved is not None:
            unpin(self._saved)
            self._saved = None

    def __enter__(self) -> "StepPlacement":
        if self.active and self.choice:
            self._set(True)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._set(False)

    def stepped(self, seconds: float) -> None:
        """One step took ``seconds``: record it while measuring, move the threads at the phase's ends."""
        if not self.active or self.choice is not None:
            return
        i, w, s = self.step, self.WARMUP, self.SAMPLES
        self.step += 1
        if w <= i < w + s:
            self.times[False].append(seconds)
        elif w + s + 1 <= i < w + 2 * s + 1:
            self.times[True].append(seconds)
        if self.step == w + s:  # the next step moves the threads (its time includes the move)
            self._set(True)
        elif self.step == w + 2 * s + 1:
            self.choice = statistics.median(self.times[True]) < statistics.median(self.times[False])
            CHOICES[self.key] = self.choice
            self._set(self.choice)
