"""Element-wise work on one OpenMP thread without touching torch's thread setting.

torch runs its CPU kernels on an OpenMP team of ``torch.get_num_threads()`` threads. An element-wise
kernel over more than 32,768 elements (SGD's updates of a convolution's weights) is one parallel
region, and every region wakes the team's other threads; on a virtual machine with idle threads
asleep (``OMP_WAIT_POLICY=PASSIVE``, what the ``vistabench`` command sets) a wake costs 30-150 µs,
more than the arithmetic of a small network's update. An element-wise result does not depend on how
its elements are split among threads (each element is computed alone, with the same instructions:
tests/learners/test_openmp.py checks it bit for bit on sizes that split off vector boundaries), so
such work may run on the calling thread alone.

``torch.set_num_threads`` cannot do this cheaply: it also empties oneDNN's cache of compiled
convolutions (the next convolution costs ~0.3 ms more). :func:`one_thread` sets the calling thread's
OpenMP team size (``omp_set_num_threads``, a per-thread setting) on the OpenMP runtime torch loaded,
and gives it back after; torch reads that setting before each parallel region. Where the runtime
cannot be found (not libgomp on Linux, as torch's wheels ship it), :func:`one_thread` does nothing.
"""

from __future__ import annotations

import ctypes
import os
from contextlib import contextmanager
from typing import Iterator

__all__ = ["one_thread", "runtime", "ENABLED", "SMALL_UPDATE"]

# elements of a tensor below which one thread's element-wise pass (~0.1 ms at 2^18 float32 elements)
# costs about what waking a sleeping thread saves; Trainer updates a model on one thread when no
# weight is larger (dhn's cnn28 network: 147,456; ResNet-32: 36,864; WRN-16-8: 2.4 million)
SMALL_UPDATE = 2**18

ENABLED = True  # False: one_thread() does nothing (benchmarks/smalldata_dhn_cache.py times both)
_RUNTIME: list = []  # [ctypes.CDLL | None] once looked up


def runtime() -> ctypes.CDLL | None:
    """The OpenMP runtime (libgomp) torch loaded in this process: the copy in torch's ``lib`` folder
    (the wheels'), else the one libgomp loaded; None when there is none, several and none of them
    torch's, or no ``/proc`` (not Linux). Looked up once."""
    if not _RUNTIME:
        _RUNTIME.append(_find())
    return _RUNTIME[0]


def _find() -> ctypes.CDLL | None:
    import torch

    if not torch.__config__.parallel_info().rstrip().endswith("OpenMP"):  # "ATen parallel backend: OpenMP"
        return None
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "libgomp" in line.rsplit("/", 1)[-1]}
    except OSError:
        return None
    lib_dir = os.path.realpath(os.path.join(os.path.dirname(torch.__file__), "lib"))
    own = {p for p in paths if os.path.dirname(os.path.realpath(p)) == lib_dir}
    if own:  # the wheel's own copy, which its kernels link to (scikit-learn may load another one)
        paths = own
    if len(paths) != 1:  # none, or several: which one torch's kernels use is not known here
        return None
    try:
        lib = ctypes.CDLL(paths.pop())  # already loaded: the same library, not a second copy
        lib.omp_get_max_threads.restype = ctypes.c_int
        lib.omp_set_num_threads.argtypes = [ctypes.c_int]
    except (OSError, AttributeError):
        return None
    return lib


@contextmanager
def one_thread(enabled: bool = True) -> Iterator[None]:
    """Context manager: torch's CPU kernels in this thread run on one OpenMP thread inside (nothing
    changes when ``enabled`` or :data:`ENABLED` is False, or the runtime is not found). Only for work whose result does
    not depend on the thread count (element-wise kernels; not reductions, convolutions or matrix
    products). Threads other than the caller keep their setting."""
    lib = runtime() if enabled and ENABLED else None
    before = lib.omp_get_max_threads() if lib is not None else 1
    if before <= 1:
        yield
        return
    lib.omp_set_num_threads(1)  # type: ignore[union-attr]  # before > 1 only with a runtime
    try:
        yield
    finally:
        lib.omp_set_num_threads(before)  # type: ignore[union-attr]
