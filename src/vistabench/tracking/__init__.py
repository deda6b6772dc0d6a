"""Experiment tracking: a run logged to MLflow, TensorBoard or Weights & Biases (docs/tracking.md).

Every protocol's run config has ``track`` (``--track mlflow``, repeatable; runtime-only, so it
never changes a result or a grid cell's key) and ``track_dir`` (TensorBoard's log folder). The CLI's
``run`` verbs and the grid's cells call :func:`run_tracked`; a notebook does the same::

    from vistabench.tracking import run_tracked
    records = run_tracked(longtail.run, config)      # config.track == ("mlflow",)

:func:`export_store` sends an existing results store's records (``vistabench export``).
Each tool's package is imported only when a run is tracked there (``pip install 'vistabench[track]'``).
"""

from .._lazy import lazy_exports

__all__ = ["run_tracked", "export_store", "TrackedRun"]

__getattr__, __dir__ = lazy_exports(__name__, {"run_tracked": "session", "TrackedRun": "session",
                                               "export_store": "export"})
