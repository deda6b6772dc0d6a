"""Experiment tracking: a run logged to MLflow, TensorBoard or Weights & Biases (docs/tracking.md).

Every protocol's run config has ``track`` (``--track mlflow``, repeatable; runtime-only, so it
never changes a result or a grid cell's key) and ``track_dir`` (TensorBoard's log folder). The CLI's
``run`` verbs and the grid's cells call :func:`run_tracked`; a notebook does the same::

    from vistabench.tracking import run_tracked
    records = run_tracked(longtail.run, config)      # config.track == ("mlflow",)

``score`` verbs take ``--track`` too (:func:`track_scores`). Every call to a tracker is bounded
(:mod:`.guard`): a tracker that fails during a run is one :class:`TrackingWarning` and the run goes on.
:func:`export_store` sends an existing results store's records (``vistabench export``).
Each tool's package is imported only when a run is tracked there (``pip install 'vistabench[track]'``).
"""

from .._lazy import lazy_exports

__all__ = ["run_tracked", "track_scores", "export_store", "TrackedRun", "TrackingWarning"]

__getattr__, __dir__ = lazy_exports(__name__, {"run_tracked": "session", "TrackedRun": "session",
                                               "track_scores": "session", "export_store": "export",
                                               "TrackingWarning": "guard"})
