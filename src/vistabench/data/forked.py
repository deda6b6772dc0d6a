"""Column arrays computed in a forked child process, returned through shared memory (the second core).

:class:`ForkedColumns` forks; the child runs a function yielding chunks of columns (dicts of numpy
arrays with a fixed layout), writes them into an anonymous shared mapping sized for ``capacity``
rows (pages are only used where written) and exits; :meth:`ForkedColumns.result` waits for it and
returns the columns as arrays over the mapping, or None when the child could not produce them (any
exception in the child, more rows than ``capacity``, or the child killed). The caller then does the
work itself, so the child is only ever an accelerator: its errors are never reported, the caller's
own reading reports them.

Forking is used only where it is safe and can help: :func:`can_fork` (``os.fork`` exists, at least
two CPUs are usable, and the process runs a single thread: forking a threaded process can leave a
lock held in the child).
"""

from __future__ import annotations

import mmap
import os
import signal
import threading
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

__all__ = ["ForkedColumns", "can_fork"]

_HEADER = 64  # bytes: int64 row count, int64 done flag


def can_fork() -> bool:
    """True where :class:`ForkedColumns` may fork: POSIX ``fork``, two or more usable CPUs, one thread."""
    if not hasattr(os, "fork") or threading.active_count() != 1:
        return False
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return cpus >= 2


class ForkedColumns:
    """Run ``work()`` in a forked child; collect the column chunks it yields in shared memory.

    Parameters
    ----------
    work : callable returning an iterable of ``{name: array}`` chunks (every chunk has every name of
        ``layout``; rows along the first axis).
    layout : ``{name: (dtype, trailing shape)}`` of the columns, e.g. ``{"bbox": (np.float64, (4,))}``.
    capacity : the most rows the child may produce (an upper bound; the mapping reserves it).
    """

    def __init__(self, work: Callable[[], Iterable[dict[str, np.ndarray]]], layout: dict[str, tuple[Any, tuple]],
                 capacity: int):
        self.capacity = int(capacity)
        self.spans: dict[str, tuple[int, np.dtype, tuple]] = {}
        offset = _HEADER
        for name, (dtype, tail) in layout.items():
            dt = np.dtype(dtype)
            self.spans[name] = (offset, dt, tuple(tail))
            offset += -(-self.capacity * dt.itemsize * int(np.prod(tail, dtype=np.int64)) // 64) * 64
        self.mm = mmap.mmap(-1, max(offset, mmap.PAGESIZE))  # anonymous and shared with the child
        self.pid = os.fork()
        if self.pid == 0:  # the child: never returns
            status = 1
            try:
                self._produce(work)
                status = 0
            except BaseException:  # noqa: BLE001 - the parent redoes the work and reports errors
                status = 1
            finally:
                os._exit(status)

    def _views(self, rows: int) -> dict[str, np.ndarray]:
        return {name: np.frombuffer(self.mm, dt, rows * int(np.prod(tail, dtype=np.int64)), off).reshape((rows,) + tail)
                for name, (off, dt, tail) in self.spans.items()}

    def _produce(self, work: Callable[[], Iterable[dict[str, np.ndarray]]]) -> None:
        out = self._views(self.capacity)
        head = np.frombuffer(self.mm, np.int64, 2, 0)
        row = 0
        for chunk in work():
            n = len(next(iter(chunk.values())))
            if row + n > self.capacity:
                raise OverflowError("more rows than the capacity")
            for name, col in out.items():
                col[row: row + n] = chunk[name]
            row += n
        head[0], head[1] = row, 1

    def running(self) -> bool:
        """True until :meth:`result` or :meth:`cancel` has reaped the child."""
        return self.pid > 0

    def result(self) -> dict[str, np.ndarray] | None:
        """Wait for the child; its columns (arrays over the shared mapping) or None if it failed."""
        _, status = os.waitpid(self.pid, 0)
        self.pid = -1
        head = np.frombuffer(self.mm, np.int64, 2, 0)
        if status != 0 or head[1] != 1:
            return None
        return self._views(int(head[0]))

    def cancel(self) -> None:
        """Stop the child (the caller no longer needs its work) and reap it."""
        if self.pid <= 0:
            return
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(self.pid, 0)
        self.pid = -1
