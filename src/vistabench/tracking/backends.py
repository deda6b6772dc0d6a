"""The experiment-tracker interface, one module per tool implementing it (:data:`.guard.BACKENDS`).

A backend is one tracked run in one tool. The session (:mod:`.session`) and the export
(:mod:`.export`) talk to every tool through :class:`Backend` only; each tool's package is imported
when its backend is opened, so ``import vistabench.tracking`` imports none of them. A missing
package ends in one line naming ``pip install 'vistabench[track]'``.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from .._lazy import LazyModules
from ..errors import InputError
from ..registry import did_you_mean

Param = str | int | float | bool

__all__ = ["Backend", "Param", "TOOL_PACKAGES", "TRACK_EXTRA", "require_tracker", "metric_name",
           "MissingTrackerError"]

#: the ``pip install`` extra that installs every tracker's package
TRACK_EXTRA = "track"

#: tracker -> the package it needs (imported when a run starts there; its backend module:
#: :data:`vistabench.tracking.guard.BACKENDS`)
TOOL_PACKAGES = LazyModules({"mlflow": "mlflow", "tensorboard": "tensorboardX", "wandb": "wandb"})


class MissingTrackerError(InputError):
    """The package of a requested tracker is not installed."""


class Backend:
    """One run in one experiment tracker. Subclasses implement the methods below.

    ``name``: the run's name; ``tags``: string tags (protocol, record ids, grid cell);
    ``track_dir``: the TensorBoard log folder (``--track-dir``; the others keep their own
    conventions: ``MLFLOW_TRACKING_URI``, ``WANDB_DIR``/``WANDB_MODE``).
    """

    tool = ""

    @staticmethod
    def check() -> None:
        """Whether the destination can be used, before the tool's package is imported (its import
        takes seconds): an :class:`~vistabench.errors.InputError` if not. Default: nothing to check."""

    def __init__(self, *, name: str, tags: dict[str, str], track_dir: str | None) -> None:
        self.name, self.tags, self.track_dir = name, dict(tags), track_dir

    def log_params(self, params: dict[str, Param]) -> None:
        """The run's parameters: the resolved config flattened to ``a.b`` names, each value a string,
        number or bool (a list or a null as its JSON text)."""
        raise NotImplementedError

    def log_metrics(self, metrics: dict[str, float], *, step: int, axis: str) -> None:
        """Numbers at ``step`` of ``axis``: ``"epoch"`` (training curves, ``train/...``) or ``"record"``
        (the scores of the run's ``step``-th record)."""
        raise NotImplementedError

    def set_tags(self, tags: dict[str, str]) -> None:
        """More tags, known once the run is done (the ids of its stored records)."""
        raise NotImplementedError

    def log_figure(self, name: str, png: bytes) -> None:
        """One of the report's figures (PNG bytes), as the tool shows images."""
        raise NotImplementedError

    def log_file(self, path: Path) -> None:
        """A file of the run (the report page, the records as JSON) as an artifact."""
        raise NotImplementedError

    def finish(self, ok: bool) -> str:
        """Close the run (``ok=False``: it failed); return where it is, for the user (one line)."""
        raise NotImplementedError

    def abandon(self) -> None:
        """The tracker failed mid-run (:class:`~.guard.Guarded`): remove what this run wrote where it is
        ours to remove (TensorBoard's folder: no partial event files left). Default: nothing."""


def require_tracker(tool: str) -> None:
    """One line (an :class:`~vistabench.errors.InputError`) unless ``tool`` is known and its package
    is installed; nothing is imported."""
    if tool not in TOOL_PACKAGES:
        hint = did_you_mean(tool, TOOL_PACKAGES, n=1)
        raise InputError(f"track: unknown tracker {tool!r}{hint} (known: {', '.join(TOOL_PACKAGES)})")
    package = TOOL_PACKAGES.targets[tool]
    try:
        found = importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):  # a broken install counts as missing
        found = False
    if not found:
        raise MissingTrackerError(f"track: {tool} needs the package {package}, not installed: "
                                  f"pip install 'vistabench[{TRACK_EXTRA}]'")


_BAD = re.compile(r"[^A-Za-z0-9_\-./ ]")


def metric_name(name: str) -> str:
    """``name`` with the characters trackers refuse in keys (MLflow: letters, digits, ``_-./`` and
    space) written as ``_``."""
    return _BAD.sub("_", name)
