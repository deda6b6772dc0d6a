"""Long-tailed classification under unknown test distributions (Fang et al.; DESIGN.md §3).

Everything here is arithmetic on class counts and per-class accuracies, so it is exact and fast.
Notation: C classes; the imbalance ratio rho >= 1 is max/min class count (values < 1 are read as
1/rho, as in the paper's tables, with a warning). Positions c = 1..C are classes ranked by training
frequency, descending, ties by class index.
"""

from __future__ import annotations

import math
import warnings
from typing import Literal, Sequence

import numpy as np

from .._validation import check_array, check_choice, check_positive
from ..errors import InputError

__all__ = [
    "normalise_imbalance",
    "training_profile",
    "frequency_ranking",
    "peaks",
    "sweep_prior",
    "sweep_class_counts",
    "symmetric_kl",
    "sweep_metrics",
    "normalised_auc",
    "shot_groups",
    "group_accuracies",
    "expected_accuracy",
    "agnostic_counts",
    "TEST_AGNOSTIC_RATIOS",
]

TEST_AGNOSTIC_RATIOS: tuple[int, ...] = (50, 25, 10, 5, 2)


def normalise_imbalance(rho: float, name: str = "imbalance") -> float:
    """Return rho >= 1; rho in (0, 1) is read as 1/rho (the paper's notation) with a warning.

    >>> normalise_imbalance(100)
    100.0
    """
    r = check_positive(rho, name)
    if r < 1:
        warnings.warn(f"{name}={rho} < 1 read as the paper's reciprocal notation: rho = {1 / r:g}",
                      UserWarning, stacklevel=3)
        r = 1.0 / r
    return float(r)


def training_profile(
    num_classes: int, *, n_max: int, imbalance: float, kind: Literal["exp", "step"] = "exp"
) -> np.ndarray:
    """Per-class training counts of the CIFAR-LT convention.

    ``exp``: ``n_r = floor(n_max * (1/rho)^(r/(C-1)))`` for rank r = 0..C-1 (the literature's
    ``int(img_max * imb_factor**(r / (C - 1.0)))``). ``step``: the first ``C // 2`` classes get
    ``n_max``, the rest ``floor(n_max / rho)``.

    Returns
    -------
    ndarray of int64, shape (C,)

    Examples
    --------
    >>> training_profile(10, n_max=5000, imbalance=100).tolist()
    [5000, 2997, 1796, 1077, 645, 387, 232, 139, 83, 50]
    """
    C = check_positive(num_classes, "num_classes", integer=True)
    n_max = check_positive(n_max, "n_max", integer=True)
    rho = normalise_imbalance(imbalance)
    check_choice(kind, "kind", ("exp", "step"))
    factor = 1.0 / rho
    if kind == "exp":
        if C == 1:
            return np.array([n_max], dtype=np.int64)
        counts = [int(n_max * factor ** (r / (C - 1.0))) for r in range(C)]
    else:
        counts = [n_max] * (C // 2) + [int(n_max * factor)] * (C - C // 2)
    return np.asarray(counts, dtype=np.int64)


def frequency_ranking(train_counts: np.ndarray) -> np.ndarray:
    """Class indices ordered by training count, descending, ties by class index.

    >>> frequency_ranking(np.array([5, 9, 5, 1])).tolist()
    [1, 0, 2, 3]
    """
    counts = check_array(train_counts, "train_counts", ndim=1, kind="integer", allow_empty=False)
    return np.lexsort((np.arange(len(counts)), -counts))


def peaks(num_classes: int, points: int) -> np.ndarray:
    """Peak positions alpha_t = (t-1)·C/T + 1, t = 1..T (paper Eq. 5).

    >>> peaks(10, 5).tolist()
    [1.0, 3.0, 5.0, 7.0, 9.0]
    """
    C = check_positive(num_classes, "num_classes", integer=True)
    T = check_positive(points, "points", integer=True)
    return (np.arange(T) * C / T + 1.0).astype(np.float64)


def sweep_prior(num_classes: int, *, test_imbalance: float, alpha: float) -> np.ndarray:
    """q_c(alpha) = rho_t^(-|c-alpha|/(C-1)) / sum_c' (...), by position c = 1..C (paper Eq. 3).

    Returns
    -------
    ndarray of float, shape (C,), indexed by position (0 = most frequent training class).
    """
    C = check_positive(num_classes, "num_classes", integer=True)
    rho = normalise_imbalance(test_imbalance, "test_imbalance")
    if C == 1:
        return np.ones(1)
    c = np.arange(1, C + 1, dtype=np.float64)
    w = rho ** (-np.abs(c - alpha) / (C - 1))
    return w / w.sum()


def sweep_class_counts(num_classes: int, *, test_imbalance: float, n_max: int, alpha: float) -> np.ndarray:
    """N_c(alpha) = max(1, floor(N_tst · q_c(alpha) + 0.5)) by position, with
    N_tst = sum_c n_max · rho_t^(-(c-1)/(C-1)) (paper Eq. 2, 4).

    >>> sweep_class_counts(3, test_imbalance=4, n_max=100, alpha=1).tolist()
    [100, 50, 25]
    """
    C = check_positive(num_classes, "num_classes", integer=True)
    n_max = check_positive(n_max, "n_max", integer=True)
    rho = normalise_imbalance(test_imbalance, "test_imbalance")
    c = np.arange(1, C + 1, dtype=np.float64)
    n_tst = float(np.sum(n_max * rho ** (-(c - 1) / max(C - 1, 1))))
    q = sweep_prior(C, test_imbalance=rho, alpha=alpha)
    return np.maximum(1, np.floor(n_tst * q + 0.5)).astype(np.int64)


def symmetric_kl(p: np.ndarray, q: np.ndarray) -> float:
    """delta = sum_c [p_c ln(p_c/q_c) + q_c ln(q_c/p_c)] (symmetric KL; DESIGN.md §3 corrects the
    paper's sign and name). Both must be strictly positive distributions of the same length.

    >>> round(symmetric_kl(np.array([0.5, 0.5]), np.array([0.25, 0.75])), 6)
    0.274653
    """
    p = check_array(p, "p", ndim=1, kind="float", allow_empty=False)
    q = check_array(q, "q", ndim=1, kind="float", allow_empty=False)
    if p.shape != q.shape:
        raise InputError(f"p and q: expected equal lengths, got {p.shape} and {q.shape}")
    if np.any(p <= 0) or np.any(q <= 0):
        raise InputError("p and q: every class needs a positive probability (a class with no training "
                         "sample makes the divergence infinite)")
    return float(np.sum((p - q) * (np.log(p) - np.log(q))))


def sweep_metrics(accuracies: Sequence[float], divergences: Sequence[float]) -> dict[str, float]:
    """The sweep's summary metrics over T points (paper Table 2).

    Parameters
    ----------
    accuracies : array of float, shape (T,)
        V_t, accuracy at each point, fractions in [0, 1].
    divergences : array of float, shape (T,)
        delta_t at each point.

    Returns
    -------
    dict with ``auc`` (trapezoid area of V against delta, points sorted by delta ascending, divided
    by delta_max - delta_min; points with equal delta are merged into one at their mean accuracy, so
    the area does not depend on their order; NaN with a warning if fewer than two distinct deltas), ``avg``
    (mean V), ``std`` (population std), ``max``, ``min``, ``drop_ratio`` ((max-min)/max; NaN when
    max is 0).

    Examples
    --------
    >>> m = sweep_metrics([0.9, 0.8, 0.6], [0.0, 1.0, 2.0])
    >>> round(m["auc"], 6), round(m["drop_ratio"], 6)
    (0.775, 0.333333)
    """
    v = check_array(accuracies, "accuracies", ndim=1, kind="float", allow_empty=False)
    d = check_array(divergences, "divergences", ndim=1, kind="float", allow_empty=False)
    if v.shape != d.shape:
        raise InputError(f"accuracies and divergences: expected equal lengths, got {len(v)} and {len(d)}")
    if v.min() < 0 or v.max() > 1:
        raise InputError("accuracies: expected fractions in [0, 1] (percentages? divide by 100)")
    auc = float(normalised_auc(v[None, :], d)[0])
    if math.isnan(auc):
        warnings.warn("AUC undefined: fewer than two distinct divergences", UserWarning, stacklevel=2)
    vmax, vmin = float(v.max()), float(v.min())
    return {
        "auc": auc,
        "avg": float(v.mean()),
        "std": float(v.std()),
        "max": vmax,
        "min": vmin,
        "drop_ratio": (vmax - vmin) / vmax if vmax > 0 else math.nan,
    }


def normalised_auc(values: np.ndarray, divergences: np.ndarray) -> np.ndarray:
    """Row-wise normalised trapezoid area of ``values`` (B, T) against ``divergences`` (T,).

    Points with equal divergence are merged at their mean value; NaN where fewer than two distinct
    divergences exist. Shared by :func:`sweep_metrics` and the bootstrap.
    """
    ds, inverse = np.unique(divergences, return_inverse=True)
    if len(ds) < 2:
        return np.full(values.shape[0], math.nan)
    onehot = np.zeros((len(divergences), len(ds)))
    onehot[np.arange(len(divergences)), inverse] = 1.0
    vs = (values @ onehot) / onehot.sum(axis=0)
    return np.sum(np.diff(ds)[None, :] * (vs[:, 1:] + vs[:, :-1]) / 2.0, axis=1) / (ds[-1] - ds[0])


def shot_groups(
    train_counts: np.ndarray, *, convention: Literal["tade", "oltr"] = "tade"
) -> dict[str, np.ndarray]:
    """Boolean class masks for many / medium / few-shot classes.

    ``tade`` (TADE/BALMS, default): many > 100, 20 <= medium <= 100, few < 20 training samples.
    ``oltr`` (inclusive at the borders): many >= 100, 20 < medium < 100, few <= 20.
    """
    n = check_array(train_counts, "train_counts", ndim=1, kind="integer")
    check_choice(convention, "convention", ("tade", "oltr"))
    if convention == "tade":
        many, few = n > 100, n < 20
    else:
        many, few = n >= 100, n <= 20
    return {"many": many, "medium": ~many & ~few, "few": few}


def group_accuracies(
    per_class_acc: np.ndarray, train_counts: np.ndarray, *, convention: Literal["tade", "oltr"] = "tade"
) -> dict[str, float]:
    """Mean per-class accuracy of the many / medium / few-shot groups; NaN for an empty group."""
    acc = check_array(per_class_acc, "per_class_acc", ndim=1, kind="float", finite=False)
    groups = shot_groups(train_counts, convention=convention)
    if len(acc) != len(groups["many"]):
        raise InputError(f"per_class_acc has {len(acc)} classes but train_counts has {len(groups['many'])}")
    out = {}
    for name, mask in groups.items():
        out[name] = float(np.mean(acc[mask])) if mask.any() else math.nan
    return out


def expected_accuracy(per_class_acc: np.ndarray, class_counts: np.ndarray) -> float:
    """sum_c N_c·acc_c / sum_c N_c: accuracy under the test prior N (the R -> infinity limit)."""
    acc = check_array(per_class_acc, "per_class_acc", ndim=1, kind="float")
    w = check_array(class_counts, "class_counts", ndim=1, kind="float")
    return float(np.dot(w, acc) / w.sum())


def agnostic_counts(
    train_counts: np.ndarray, *, n_max: int, ratios: Sequence[int] = TEST_AGNOSTIC_RATIOS
) -> dict[str, np.ndarray]:
    """Class counts of the test-agnostic protocol (Zhang et al., TADE), by class index.

    ``forward_R`` follows the training ranking with the training-profile formula at rho = R,
    ``backward_R`` reverses it, ``uniform`` gives every class ``n_max``.
    """
    rank = frequency_ranking(train_counts)
    C = len(rank)
    out: dict[str, np.ndarray] = {}
    for r in ratios:
        prof = training_profile(C, n_max=n_max, imbalance=r)
        fwd = np.empty(C, dtype=np.int64)
        fwd[rank] = prof
        bwd = np.empty(C, dtype=np.int64)
        bwd[rank] = prof[::-1]
        out[f"forward_{r}"] = fwd
        out[f"backward_{r}"] = bwd
    out["uniform"] = np.full(C, check_positive(n_max, "n_max", integer=True), dtype=np.int64)
    return out
