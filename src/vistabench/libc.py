"""The process's C library through ctypes, looked up once (torch-free): what
:mod:`vistabench.allocation` (``mallopt``, ``prctl``) and :mod:`vistabench.learners.one_cpu`
(``sched_getcpu``) call."""

from __future__ import annotations

from typing import Any

__all__ = ["process_libc"]

_LIBC: list = []  # [ctypes.CDLL | None] once looked up


def process_libc() -> Any | None:
    """The C library this process runs on (``ctypes.CDLL(None)``, errno kept), or None where ctypes
    cannot open it."""
    if not _LIBC:
        import ctypes

        try:
            _LIBC.append(ctypes.CDLL(None, use_errno=True))
        except OSError:
            _LIBC.append(None)
    return _LIBC[0]
