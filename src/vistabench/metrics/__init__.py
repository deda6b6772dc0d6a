"""Pure numpy metrics (no torch import)."""
from .classification import balanced_accuracy, per_class_recall  # noqa: E402  (smalldata)
from .stats import WelchResult, not_worse_than_best, welch_test  # noqa: E402  (smalldata)

from .stream import (  # noqa: E402  (task streams, Nevis'22)
    average_precision,
    forward_transfer,
    mean_average_precision,
    normalized_auc,
    pareto_front,
    regret_curve,
    slice_means,
    task_error,
)
from .incremental import (  # noqa: E402  (few-shot class-incremental: aAcc, tAcc, gAcc, PD, KR)
    IncrementalScores,
    accuracy_matrix,
    corner_case_matrix,
    gacc_at,
    gacc_compat,
    gacc_sessions,
    incremental_scores,
)
