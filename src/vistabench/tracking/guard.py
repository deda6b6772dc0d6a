"""Every call to an experiment tracker ends within a deadline; a tracker that fails is dropped once.

A tracker is someone else's server or disk: it may hang (a server that accepts connections and never
answers), die in the middle of a run, or run out of space. None of that may hold a run hostage or
cost its result. So each call of a :class:`~.backends.Backend` (opening the run included) runs in a
worker thread of its own that the caller waits for at most :func:`call_timeout` seconds
(``VISTABENCH_TRACK_TIMEOUT``, default 15). A call that fails or overruns marks the tracker failed:
:class:`Guarded` says so in one warning and skips the tracker's later calls, so the run goes on and
stores its record (``vistabench export`` sends it later). A call left running past its deadline is a
daemon thread: it never keeps the process alive.
"""

from __future__ import annotations

import os
import threading
import warnings
from typing import Any, Callable

from .._lazy import LazyModules
from ..errors import InputError, one_line
from .backends import TOOL_PACKAGES, Backend, require_tracker

__all__ = ["call_timeout", "bounded", "TrackerTimeout", "TrackingWarning", "Guarded", "TIMEOUT_ENV",
           "DEFAULT_TIMEOUT", "OPEN_FACTOR"]

#: the environment variable of the deadline (seconds) of one call to a tracker
TIMEOUT_ENV = "VISTABENCH_TRACK_TIMEOUT"
DEFAULT_TIMEOUT = 15.0
#: opening a run may take this many deadlines: it may create a local store (MLflow's first SQLite
#: database takes seconds of migrations on a busy machine) where later calls only send numbers
OPEN_FACTOR = 4


#: tracker -> the module of its backend (its ``TRACKER`` class), imported when a run starts there
BACKENDS = LazyModules({"mlflow": ".mlflow_backend", "tensorboard": ".tensorboard_backend",
                        "wandb": ".wandb_backend"}, package=__package__)


def backend_class(tool: str) -> type[Backend]:
    """The :class:`~.backends.Backend` of ``tool`` (its module imports the tool's package only when a
    run starts)."""
    require_tracker(tool)
    return BACKENDS.load(tool).TRACKER


class TrackerTimeout(Exception):
    """A call to a tracker did not end within its deadline."""


class TrackingWarning(UserWarning):
    """A tracker failed during a run: the run went on without it (one warning per tracker)."""


def call_timeout() -> float:
    """The deadline of one tracker call: ``VISTABENCH_TRACK_TIMEOUT`` seconds (a number > 0), else 15."""
    raw = os.environ.get(TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not (0 < value < 86400):  # NaN fails too
        raise InputError(f"{TIMEOUT_ENV}: expected the seconds one call to a tracker may take, a number in "
                         f"(0, 86400), got {raw!r}")
    return value


def bounded(fn: Callable[..., Any], *args: Any, timeout: float, what: str = "call", **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` in a daemon thread; its result or its exception, or :class:`TrackerTimeout`
    when it has not ended after ``timeout`` seconds (the thread is left to end by itself)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=target, name=f"vistabench-track-{what}", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise TrackerTimeout(f"{what}: no answer within {timeout:g} s, {TIMEOUT_ENV}")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def describe(exc: BaseException) -> str:
    """One line for a tracker's failure: the message (the exception's type when it has none)."""
    text = one_line(str(exc)) if str(exc).strip() else ""
    if isinstance(exc, (TrackerTimeout, InputError)):
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Guarded:
    """A tracker's run whose every call ends within ``timeout`` seconds.

    Open it with :meth:`open` (a failure there is an :class:`~vistabench.errors.InputError`: the
    command stops before anything runs). After that, the first call that fails or overruns makes
    :attr:`failed` the reason; ``on_failure(tool, reason)`` is called once, the tracker's partial output
    is removed where it is ours (:meth:`~.backends.Backend.abandon`) and its later calls are skipped.
    """

    def __init__(self, backend: Backend, *, timeout: float, tool: str | None = None,
                 on_failure: Callable[[str, str], None] | None = None) -> None:
        self.backend, self.timeout, self.on_failure = backend, timeout, on_failure
        self.tool = tool or backend.tool  # the name it was opened by
        self.failed: str | None = None

    @classmethod
    def open(cls, tool: str, *, timeout: float, on_failure: Callable[[str, str], None] | None = None,
             **kwargs: Any) -> "Guarded":
        """Start a run in ``tool`` within ``timeout`` seconds, else one line (exit 2)."""
        kind = backend_class(tool)  # a missing package: its own line, at once
        try:
            bounded(kind.check, timeout=timeout, what="check")  # before the slow import
        except TrackerTimeout:
            raise InputError(f"track: {tool}: {where(tool, kwargs.get('track_dir'))} did not answer within "
                             f"{timeout:g} s; check that it works, or allow more time with {TIMEOUT_ENV}") from None
        TOOL_PACKAGES.load(tool)  # imported here, not under the deadline: an import is no answer
        try:
            backend = bounded(kind, timeout=OPEN_FACTOR * timeout, what="open", **kwargs)
        except TrackerTimeout:
            raise InputError(f"track: {tool}: {where(tool, kwargs.get('track_dir'))} did not answer within "
                             f"{OPEN_FACTOR * timeout:g} s; check that it works, or allow more time with {TIMEOUT_ENV}") from None
        except (InputError, TypeError, AttributeError, NameError, AssertionError):
            raise  # the tracker's own one line; or a bug of ours (exit 70, with its traceback)
        except Exception as exc:  # the tool refused: its settings, its server, its account
            raise InputError(f"track: {tool}: could not start a run at {where(tool, kwargs.get('track_dir'))}: "
                             f"{describe(exc)}") from None
        return cls(backend, timeout=timeout, tool=tool, on_failure=on_failure)

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """``backend.method(*args, **kwargs)`` within the deadline; None (and the tracker failed) when it
        fails or overruns, or when the tracker failed before."""
        if self.failed is not None:
            return None
        try:
            return bounded(getattr(self.backend, method), *args, timeout=self.timeout,
                           what=method, **kwargs)
        except Exception as exc:
            self.fail(describe(exc))
            return None

    def fail(self, reason: str) -> None:
        """Mark the tracker failed (once): its partial output removed where it is ours, the warning."""
        if self.failed is not None:
            return
        self.failed = reason
        try:
            bounded(self.backend.abandon, timeout=self.timeout, what="abandon")
        except Exception:  # best effort: the warning below says what went wrong first
            pass
        if self.on_failure is not None:
            self.on_failure(self.tool, reason)


def where(tool: str, track_dir: str | None) -> str:
    """Where ``tool`` sends a run, for messages."""
    if tool == "mlflow":
        try:
            from .mlflow_backend import tracking_uri

            return f"the tracking server {tracking_uri()} (MLFLOW_TRACKING_URI)"
        except Exception:  # a broken install: said by the error that follows
            return "MLflow's tracking server (MLFLOW_TRACKING_URI)"
    if tool == "tensorboard":
        from .tensorboard_backend import DEFAULT_DIR

        return f"the log folder {track_dir or DEFAULT_DIR!r}"
    return "wandb (WANDB_MODE, WANDB_DIR)"


def warn_failed(tool: str, reason: str, *, hint: str) -> None:
    """The one warning of a tracker that failed during a run."""
    warnings.warn(f"track: {tool} failed during the run ({reason}); the run went on without it{hint}",
                  TrackingWarning, stacklevel=2)
