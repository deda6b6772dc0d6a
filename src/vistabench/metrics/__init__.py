"""Pure numpy/scipy metrics, one module per family (no torch import).

Modules: ``longtail``, ``detection``, ``incremental``, ``classification``, ``stats``, ``stream``,
``curves``.
The names below are re-exported for convenience.
"""

from .classification import balanced_accuracy, per_class_recall
from .curves import normalised_auc
from .incremental import (IncrementalScores, accuracy_matrix, corner_case_matrix, gacc_at, gacc_compat,
                          gacc_sessions, incremental_scores)
from .stats import WelchResult, not_worse_than_best, welch_test
from .stream import (average_precision, forward_transfer, mean_average_precision, pareto_front, regret_curve,
                     slice_means, task_error)

__all__ = [
    "balanced_accuracy", "per_class_recall",
    "IncrementalScores", "accuracy_matrix", "corner_case_matrix", "gacc_at", "gacc_compat", "gacc_sessions",
    "incremental_scores",
    "WelchResult", "not_worse_than_best", "welch_test",
    "average_precision", "forward_transfer", "mean_average_precision", "normalised_auc", "pareto_front",
    "regret_curve", "slice_means", "task_error",
]
