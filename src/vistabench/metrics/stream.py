"""Metrics of the never-ending task-stream protocol (Nevis'22, Bornschein et al.). numpy only.

Per task the error is ``1 - accuracy`` (multiclass) or ``1 - mAP`` (multilabel, Eq. 1). Per run the
average error is taken over the meta-test tasks and cFLOP over the whole stream (Eqs. 2, 3). Across
runs the Pareto front of (cFLOP, error) ranks learners; the regret curve is the cumulative error
difference to the independent baseline; forward transfer on a repeated task compares the
normalised areas under its two learning curves (Eq. 5).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import check_array, check_same_length, check_value
from ..errors import InputError

__all__ = [
    "pareto_front",
    "forward_transfer",
    "average_precision",
    "mean_average_precision",
    "task_error",
    "cflop_parts",
    "ABSENT_LABELS",
    "regret_curve",
    "slice_means",
]


def _vector(x: Any, name: str, *, finite: bool = True) -> np.ndarray:
    return check_array(x, name, ndim=1, kind="float", finite=finite)


def pareto_front(costs: Any, errors: Any) -> np.ndarray:
    """Indices of the non-dominated (cost, error) points, sorted by cost (then error, then index).

    Point ``i`` is dominated when some ``j`` has ``cost_j <= cost_i`` and ``error_j <= error_i``
    with at least one inequality strict. Identical points do not dominate each other, so
    duplicates on the front are all returned.

    Parameters
    ----------
    costs : array-like of float, shape (n,)
        Compute of each run (e.g. cFLOP); finite.
    errors : array-like of float, shape (n,)
        Error of each run (lower is better); finite.

    Returns
    -------
    ndarray of int64, shape (k,)

    Examples
    --------
    >>> pareto_front([1, 2, 3, 2], [0.5, 0.3, 0.4, 0.3]).tolist()
    [0, 1, 3]
    """
    c = _vector(costs, "costs")
    e = _vector(errors, "errors")
    check_same_length("costs", c, "errors", e)
    if c.size == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((np.arange(len(c)), e, c))  # by cost, then error, then index
    keep = []
    best = np.inf  # lowest error among points of strictly smaller cost, or equal cost and lower error
    i = 0
    n = len(order)
    while i < n:
        j = i
        while j < n and c[order[j]] == c[order[i]]:
            j += 1
        group = order[i:j]  # same cost, sorted by error
        gmin = e[group[0]]
        if gmin < best:  # only the group's minimum-error points survive (with their duplicates)
            keep.extend(int(k) for k in group if e[k] == gmin)
            best = gmin
        i = j
    return np.asarray(keep, dtype=np.int64)


def forward_transfer(auc_first: Any, auc_second: Any) -> Any:
    """Forward transfer on a repeated task: ``(AUC2 - AUC1) / (1 - AUC1)`` (Nevis'22 Eq. 5).

    ``AUC1`` and ``AUC2`` are the normalised areas under the accuracy-vs-training-progress curves
    (see :func:`vistabench.metrics.curves.normalised_auc`) at the task's first and second appearance. The value is at most 1;
    higher is better; it is undefined (NaN) when ``AUC1 == 1``.

    Parameters
    ----------
    auc_first, auc_second : float or array-like of float, same shape, values in [0, 1]

    Returns
    -------
    float or ndarray of float (the input's shape)

    Examples
    --------
    >>> forward_transfer(0.5, 0.75)
    0.5
    """
    a1 = check_array(auc_first, "auc_first", kind="float")
    a2 = check_array(auc_second, "auc_second", kind="float")
    if a1.shape != a2.shape:
        raise InputError(f"auc_first has shape {a1.shape} but auc_second has shape {a2.shape}")
    for name, a in (("auc_first", a1), ("auc_second", a2)):
        if a.size and (a.min() < 0 or a.max() > 1):
            raise InputError(f"{name}: expected values in [0, 1], got range [{a.min()}, {a.max()}]")
    denom = 1.0 - a1
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(denom > 0, (a2 - a1) / np.where(denom > 0, denom, 1.0), np.nan)
    return float(out) if out.ndim == 0 else out


def average_precision(y_true: Any, y_score: Any) -> float:
    """Average precision of one binary problem, ``AP = sum_k (R_k - R_{k-1}) P_k``.

    The sum runs over the distinct score thresholds in decreasing order (tied scores form one
    threshold), without interpolation: the definition of
    ``sklearn.metrics.average_precision_score``. NaN when ``y_true`` has no positive.

    Parameters
    ----------
    y_true : array-like of {0, 1}, shape (n,)
    y_score : array-like of float, shape (n,)

    Examples
    --------
    >>> average_precision([1, 0, 1], [0.9, 0.8, 0.7])
    0.8333333333333333
    """
    y = check_array(y_true, "y_true", ndim=1, kind="integer")
    s = _vector(y_score, "y_score")
    check_same_length("y_true", y, "y_score", s)
    if y.size and not np.all((y == 0) | (y == 1)):
        raise InputError("y_true: expected binary values 0/1")
    return _ap(y, s)


def _ap(y: np.ndarray, s: np.ndarray) -> float:
    n_pos = int(y.sum())
    if n_pos == 0:
        return float("nan")
    order = np.argsort(-s, kind="mergesort")
    s_sorted, y_sorted = s[order], y[order]
    last = np.r_[np.flatnonzero(np.diff(s_sorted)), len(s_sorted) - 1]  # end of each tie group
    tp = np.cumsum(y_sorted)[last].astype(float)
    fp = (last + 1) - tp
    precision = tp / (tp + fp)
    recall = tp / n_pos
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


ABSENT_LABELS: tuple[str, ...] = ("zero", "omit")


def mean_average_precision(y_true: Any, y_score: Any, *, absent_labels: str = "zero") -> float:
    """Macro mean average precision over the classes of a multilabel task (Nevis'22 Eq. 1).

    ``mAP = (1 / C) * sum_c AP_c``. A class without positives in ``y_true`` has no defined AP:

    * ``absent_labels="zero"`` (default, the reference behaviour): it counts as AP 0 and stays in
      the mean, as in ``sklearn.metrics.average_precision_score(average="macro")``, which dm_nevis
      calls to score its multilabel tasks;
    * ``absent_labels="omit"``: it is left out, ``mAP = (1 / |C+|) * sum_{c in C+} AP_c`` over the
      classes ``C+`` with at least one positive (NaN when there are none).

    Parameters
    ----------
    y_true : array-like of {0, 1}, shape (n, C)
        Label indicator matrix.
    y_score : array-like of float, shape (n, C)
        Scores (logits or probabilities: AP only depends on their order).
    absent_labels : {"zero", "omit"}

    Returns
    -------
    float
        NaN when ``C == 0`` (or, with ``"omit"``, when no class has a positive).

    Examples
    --------
    >>> mean_average_precision([[1, 0], [0, 1]], [[0.9, 0.1], [0.2, 0.8]])
    1.0
    >>> y, s = [[1, 0], [0, 0]], [[0.9, 0.1], [0.2, 0.8]]
    >>> mean_average_precision(y, s), mean_average_precision(y, s, absent_labels="omit")
    (0.5, 1.0)
    """
    check_value(absent_labels, "absent_labels", choices=ABSENT_LABELS)
    y = check_array(y_true, "y_true", ndim=2, kind="integer")
    s = check_array(y_score, "y_score", ndim=2, kind="float")
    if y.shape != s.shape:
        raise InputError(f"y_true has shape {y.shape} but y_score has shape {s.shape}")
    if y.size and not np.all((y == 0) | (y == 1)):
        raise InputError("y_true: expected a 0/1 indicator matrix")
    aps = np.array([_ap(y[:, c], s[:, c]) for c in range(y.shape[1])], dtype=float)
    if aps.size == 0:
        return float("nan")
    if absent_labels == "zero":
        return float(np.mean(np.nan_to_num(aps, nan=0.0)))
    if np.all(np.isnan(aps)):
        return float("nan")
    return float(np.nanmean(aps))


def task_error(y_true: Any, y_score: Any, *, kind: str, absent_labels: str = "zero") -> float:
    """A task's error (Nevis'22 Eq. 1): ``1 - accuracy`` or ``1 - mAP``.

    Parameters
    ----------
    y_true : array-like
        shape (n,) integer labels for ``kind="multiclass"``; shape (n, C) 0/1 for ``"multilabel"``.
    y_score : array-like of float, shape (n, C)
        Class scores; the top-1 class is the prediction (ties: lowest index, ``numpy.argmax``).
    kind : {"multiclass", "multilabel"}
    absent_labels : {"zero", "omit"}
        Multilabel only: how a label without positives enters the mAP (see
        :func:`mean_average_precision`; ``"zero"`` is dm_nevis's / sklearn's behaviour).

    Returns
    -------
    float
        In [0, 1]; NaN for an empty test set (or, with ``"omit"``, a multilabel set without positives).

    Examples
    --------
    >>> task_error([0, 1, 1], [[2.0, 1.0], [0.0, 3.0], [1.0, 0.0]], kind="multiclass")
    0.3333333333333333
    """
    if check_value(kind, "kind", choices=("multiclass", "multilabel")) == "multilabel":
        return 1.0 - mean_average_precision(y_true, y_score, absent_labels=absent_labels)
    y = check_array(y_true, "y_true", ndim=1, kind="integer")
    s = check_array(y_score, "y_score", ndim=2, kind="float")
    check_same_length("y_true", y, "y_score", s)
    if y.size == 0:
        return float("nan")
    if y.min() < 0 or y.max() >= s.shape[1]:
        raise InputError(f"y_true: labels must lie in [0, {s.shape[1]}), got [{y.min()}, {y.max()}]")
    return float(np.mean(np.argmax(s, axis=1) != y))


def cflop_parts(events: Any) -> dict[str, int]:
    """cFLOP of a run split as dm_nevis-style training compute and selection/validation forwards.

    ``train`` sums every charged training step (search trials, auxiliary steps); ``selection``
    sums the forward passes spent on validation, model selection and relatedness probes, which
    dm_nevis does not charge; ``total = train + selection`` is vistabench's cFLOP.

    Parameters
    ----------
    events : sequence of mappings
        Task events with integer ``flops_train`` and ``flops_eval`` (as the stream runner writes).

    Returns
    -------
    dict
        ``{"train": int, "selection": int, "total": int}``.

    Examples
    --------
    >>> cflop_parts([{"flops_train": 10, "flops_eval": 2}, {"flops_train": 5, "flops_eval": 1}])
    {'train': 15, 'selection': 3, 'total': 18}
    """
    try:
        tr = sum(int(e["flops_train"]) for e in events)
        ev = sum(int(e["flops_eval"]) for e in events)
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"events: expected mappings with integer 'flops_train' and 'flops_eval' ({exc})") from exc
    return {"train": tr, "selection": ev, "total": tr + ev}


def regret_curve(errors: Any, reference_errors: Any) -> np.ndarray:
    """Cumulative regret along the stream: ``R_t = sum_{i <= t} (e_i - e_i^ref)``.

    Negative values mean the learner made fewer errors than the reference (the independent
    baseline) so far. NaN task errors propagate from that task on.

    Parameters
    ----------
    errors, reference_errors : array-like of float, shape (T,)
        Per-task errors of the learner and of the reference, in stream order.

    Returns
    -------
    ndarray of float, shape (T,)

    Examples
    --------
    >>> regret_curve([0.1, 0.2, 0.3], [0.2, 0.2, 0.1]).round(3).tolist()
    [-0.1, -0.1, 0.1]
    """
    e = _vector(errors, "errors", finite=False)
    r = _vector(reference_errors, "reference_errors", finite=False)
    check_same_length("errors", e, "reference_errors", r)
    return np.cumsum(e - r)


def slice_means(values: Any, groups: Any) -> dict[str, dict[str, float]]:
    """Mean of ``values`` per group (domain, size bin, resolution bin), ignoring NaN values.

    Parameters
    ----------
    values : array-like of float, shape (n,)
    groups : sequence of str, length n

    Returns
    -------
    dict
        ``{group: {"mean": float, "count": int}}`` in first-appearance order; ``mean`` is NaN for a
        group whose values are all NaN (``count`` counts the finite ones).

    Examples
    --------
    >>> slice_means([0.1, 0.3, 0.2], ["a", "a", "b"])["a"]
    {'mean': 0.2, 'count': 2}
    """
    v = _vector(values, "values", finite=False)
    g = [str(x) for x in groups]
    if len(g) != len(v):
        raise InputError(f"values has {len(v)} entries but groups has {len(g)}")
    out: dict[str, dict[str, float]] = {}
    for name in dict.fromkeys(g):
        sel = v[[i for i, x in enumerate(g) if x == name]]
        fin = sel[np.isfinite(sel)]
        out[name] = {"mean": float(fin.mean()) if fin.size else float("nan"), "count": int(fin.size)}
    return out
