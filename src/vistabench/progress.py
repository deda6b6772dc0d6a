"""Progress display: rich bars on a terminal, silent when piped or asked to be quiet."""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager
from typing import Iterable, Iterator, TypeVar

T = TypeVar("T")

_QUIET = False
_THREAD = threading.local()  # .quiet: this thread shows nothing (a lane of vistabench.learners.lanes)


def set_quiet(quiet: bool) -> None:
    """Silence all progress output (the CLI calls this for ``--json``)."""
    global _QUIET
    _QUIET = quiet


def quiet_here() -> None:
    """Silence progress output of the calling thread only (work running beside the main thread)."""
    _THREAD.quiet = True


def is_quiet() -> bool:
    """Whether progress output is silenced (``--json``): a command's log lines on stderr follow it."""
    return _QUIET


def enabled() -> bool:
    return not _QUIET and not getattr(_THREAD, "quiet", False) and sys.stderr.isatty()


def track(it: Iterable[T], *, total: int | None = None, description: str = "") -> Iterator[T]:
    """Iterate with a progress bar on stderr when it is a terminal."""
    if not enabled():
        yield from it
        return
    from rich.progress import track as rich_track
    from rich.console import Console

    yield from rich_track(it, total=total, description=description, console=Console(stderr=True))


def status(message: str) -> None:
    """One line of progress text on stderr (terminal only)."""
    if enabled():
        print(message, file=sys.stderr, flush=True)


@contextmanager
def step(message: str) -> Iterator[None]:
    status(f"• {message} …")
    yield
