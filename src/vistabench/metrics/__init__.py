"""Pure numpy metrics (no torch import)."""

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
