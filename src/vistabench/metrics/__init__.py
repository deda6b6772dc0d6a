"""Pure numpy/scipy metrics, one module per family (no torch import).

Modules: ``longtail``, ``detection``, ``incremental``, ``classification``, ``stats``, ``stream``,
``curves``.
The names below are re-exported for convenience, imported on first use (importing
``vistabench.metrics.detection`` does not import the other families).
"""

from .._lazy import lazy_exports

_EXPORTS = {
    "balanced_accuracy": "classification", "per_class_recall": "classification",
    "normalised_auc": "curves",
    **{name: "incremental" for name in ("IncrementalScores", "accuracy_matrix", "corner_case_matrix", "gacc_at",
                                        "gacc_compat", "gacc_sessions", "incremental_scores")},
    "WelchResult": "stats", "not_worse_than_best": "stats", "welch_test": "stats",
    **{name: "stream" for name in ("average_precision", "forward_transfer", "mean_average_precision",
                                   "pareto_front", "regret_curve", "slice_means", "task_error")},
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
