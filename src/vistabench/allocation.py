"""Allocation settings for a block that makes and drops many large arrays (scoring a detection set).

Evaluating millions of detections builds and frees arrays of one value per detection dozens of times
(sort keys, masks, cumulative counts). Two defaults of a Linux process make each of those cost fresh
page faults, paid in the kernel:

* glibc's ``malloc`` serves a block above its mmap threshold (at most 32 MiB, and one value per
  detection at LVIS size is 47 MB) with a new mapping and unmaps it on ``free``: the next array of
  that size is zero-filled by the kernel again, page by page;
* numpy asks for transparent huge pages (``madvise``) for every array of 4 MiB or more; where the
  kernel's THP ``defrag`` setting is ``madvise`` (the usual default) a fault there may compact
  memory before it returns.

:func:`large_arrays` turns both off for the block it wraps and restores them after it: ``malloc``
keeps freed blocks for reuse (``mallopt``: ``M_MMAP_MAX`` 0, a 1 GiB ``M_TRIM_THRESHOLD``; glibc's
defaults after, its mmap threshold then staying where it had grown, as after any ``mallopt``) and the
process takes no transparent huge pages (``prctl(PR_SET_THP_DISABLE)``, the previous state after;
forked children inherit it). Freed memory is then reused instead of returned, so the peak resident
memory stays where it was (the arrays' peak), and no number changes. ``detection score`` and
``detection run`` wrap their reading and scoring in it; a notebook that scores LVIS-size sets can do
the same.

On the LVIS-val-shaped set of ``benchmarks/detection_eval.py`` (5.9 M detections; 2 cores) the
kernel time of a scoring fell from 4-4.7 s to 1.3-1.7 s and its wall time by about 1.3x
(``--allocation``). Nothing is changed where the C library is not glibc; ``VISTABENCH_LARGE_ARRAYS=0``
leaves the defaults alone.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["large_arrays"]

# mallopt(3) parameters and glibc's defaults for them; prctl(2) options
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4
_DEFAULT_TRIM_THRESHOLD, _DEFAULT_MMAP_MAX = 128 * 1024, 65536
_KEEP_TRIM_THRESHOLD = 1 << 30
_PR_SET_THP_DISABLE, _PR_GET_THP_DISABLE = 41, 42


def _glibc() -> Any | None:
    """The process's C library through ctypes where it is glibc (``mallopt`` is glibc's), else None."""
    try:
        if not (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc"):
            return None
    except (ValueError, OSError, AttributeError):  # not a GNU system
        return None
    from .libc import process_libc

    libc = process_libc()
    return libc if libc is not None and hasattr(libc, "mallopt") and hasattr(libc, "prctl") else None


def _prctl(libc: Any, option: int, value: int = 0) -> int:
    """``prctl(option, value, 0, 0, 0)`` with every argument a C ``unsigned long`` (the kernel
    refuses non-zero trailing arguments)."""
    import ctypes

    zero = ctypes.c_ulong(0)
    return int(libc.prctl(ctypes.c_int(option), ctypes.c_ulong(value), zero, zero, zero))


def thp_disabled(libc: Any) -> int:
    """``PR_GET_THP_DISABLE``: 1 when this process takes no transparent huge pages, 0 when it may,
    negative where the kernel does not know the option (before Linux 3.15)."""
    return _prctl(libc, _PR_GET_THP_DISABLE)


def enabled() -> bool:
    """False when ``VISTABENCH_LARGE_ARRAYS=0`` asks to leave the allocation defaults alone."""
    return os.environ.get("VISTABENCH_LARGE_ARRAYS", "1").strip() != "0"


@contextmanager
def large_arrays() -> Iterator[None]:
    """Within the block, freed memory is kept for reuse and the process takes no transparent huge
    pages (see the module's notes); both are restored when it ends, also on an error. The settings
    are the process's: not for a block running beside other threads that allocate a lot."""
    libc = _glibc() if enabled() else None
    if libc is None:
        yield
        return
    thp_was = thp_disabled(libc)
    if thp_was == 0:
        _prctl(libc, _PR_SET_THP_DISABLE, 1)
    libc.mallopt(_M_MMAP_MAX, 0)
    libc.mallopt(_M_TRIM_THRESHOLD, _KEEP_TRIM_THRESHOLD)
    try:
        yield
    finally:
        libc.mallopt(_M_MMAP_MAX, _DEFAULT_MMAP_MAX)
        libc.mallopt(_M_TRIM_THRESHOLD, _DEFAULT_TRIM_THRESHOLD)
        if thp_was == 0:
            _prctl(libc, _PR_SET_THP_DISABLE, 0)
