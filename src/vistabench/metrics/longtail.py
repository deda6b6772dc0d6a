"""Long-tailed classification under unknown test distributions (Fang et al.; see docs/longtail.md).

Everything here is arithmetic on class counts and per-class accuracies, so it is exact and fast.
Notation: C classes; the imbalance ratio rho >= 1 is max/min class count (values < 1 are read as
1/rho, as in the paper's tables, with a warning). Positions c = 1..C are classes ranked by training
frequency, descending, ties by class index.

Each public function validates its inputs once (``check_*`` at its top) and then calls a private,
unvalidated kernel of this module (``_name``); public functions that build on others call those
kernels, so one call validates each input once.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Literal, NamedTuple, Sequence

import numpy as np

from .._validation import check_array, check_labels, check_value
from ..errors import InputError
from ._area import merged_trapezoid
from .curves import normalised_auc

__all__ = [
    "normalise_imbalance",
    "training_profile",
    "frequency_ranking",
    "peaks",
    "sweep_prior",
    "sweep_class_counts",
    "symmetric_kl",
    "sweep_design",
    "SweepDesign",
    "sweep_metrics",
    "normalised_auc",
    "shot_groups",
    "group_accuracies",
    "expected_accuracy",
    "agnostic_counts",
    "sweep_scores",
    "bootstrap_intervals",
    "SCALARS",
    "TEST_AGNOSTIC_RATIOS",
]

TEST_AGNOSTIC_RATIOS: tuple[int, ...] = (50, 25, 10, 5, 2)


def normalise_imbalance(rho: float, name: str = "imbalance") -> float:
    """Return rho >= 1; rho in (0, 1) is read as 1/rho (the paper's notation) with a warning.

    >>> normalise_imbalance(100)
    100.0
    """
    r = check_value(rho, name, low=0, low_open=True)
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
    C = check_value(num_classes, "num_classes", type=int, low=0, low_open=True)
    n_max = check_value(n_max, "n_max", type=int, low=0, low_open=True)
    rho = normalise_imbalance(imbalance)
    check_value(kind, "kind", choices=("exp", "step"))
    return _training_profile(C, n_max, rho, kind)


def _training_profile(C: int, n_max: int, rho: float, kind: str) -> np.ndarray:
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
    return _frequency_ranking(check_array(train_counts, "train_counts", ndim=1, kind="integer", allow_empty=False))


def _frequency_ranking(counts: np.ndarray) -> np.ndarray:
    return np.lexsort((np.arange(len(counts)), -counts))


def peaks(num_classes: int, points: int) -> np.ndarray:
    """Peak positions alpha_t = (t-1)·C/T + 1, t = 1..T (paper Eq. 5).

    >>> peaks(10, 5).tolist()
    [1.0, 3.0, 5.0, 7.0, 9.0]
    """
    C = check_value(num_classes, "num_classes", type=int, low=0, low_open=True)
    T = check_value(points, "points", type=int, low=0, low_open=True)
    return _peaks(C, T)


def _peaks(C: int, T: int) -> np.ndarray:
    return (np.arange(T) * C / T + 1.0).astype(np.float64)


def sweep_prior(num_classes: int, *, test_imbalance: float, alpha: float) -> np.ndarray:
    """q_c(alpha) = rho_t^(-|c-alpha|/(C-1)) / sum_c' (...), by position c = 1..C (paper Eq. 3).

    Returns
    -------
    ndarray of float, shape (C,), indexed by position (0 = most frequent training class).
    """
    C = check_value(num_classes, "num_classes", type=int, low=0, low_open=True)
    rho = normalise_imbalance(test_imbalance, "test_imbalance")
    return _sweep_prior(C, rho, alpha)


def _sweep_prior(C: int, rho: float, alpha: float) -> np.ndarray:
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
    C = check_value(num_classes, "num_classes", type=int, low=0, low_open=True)
    n_max = check_value(n_max, "n_max", type=int, low=0, low_open=True)
    rho = normalise_imbalance(test_imbalance, "test_imbalance")
    return _sweep_class_counts(C, rho, n_max, alpha)


def _sweep_class_counts(C: int, rho: float, n_max: int, alpha: float) -> np.ndarray:
    c = np.arange(1, C + 1, dtype=np.float64)
    n_tst = float(np.sum(n_max * rho ** (-(c - 1) / max(C - 1, 1))))
    q = _sweep_prior(C, rho, alpha)
    return np.maximum(1, np.floor(n_tst * q + 0.5)).astype(np.int64)


def symmetric_kl(p: np.ndarray, q: np.ndarray) -> float:
    """delta = sum_c [p_c ln(p_c/q_c) + q_c ln(q_c/p_c)] (symmetric KL; docs/longtail.md corrects the
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
    return _symmetric_kl(p, q)


def _symmetric_kl(p: np.ndarray, q: np.ndarray) -> float:
    return float(np.sum((p - q) * (np.log(p) - np.log(q))))


class SweepDesign(NamedTuple):
    """What a sweep's points are, before any test set is drawn (see :func:`sweep_design`)."""

    train_counts: np.ndarray  #: (C,) int64, every class >= 1
    ranking: np.ndarray       #: (C,) class indices by training frequency (:func:`frequency_ranking`)
    test_imbalance: float     #: rho_t >= 1
    alphas: np.ndarray        #: (T,) peak positions (:func:`peaks`)
    divergences: np.ndarray   #: (T,) delta_t = symmetric KL between p (training) and q(alpha_t), by class


def sweep_design(train_counts: Any, *, test_imbalance: float, points: int) -> SweepDesign:
    """The T peaks of a sweep and their divergences from the training distribution (paper Eq. 3, 5).

    ``p = train_counts / sum``; ``q(alpha_t)`` is :func:`sweep_prior` by position, placed on the
    classes by :func:`frequency_ranking`. The test counts per point follow from ``n_max``
    (:func:`sweep_class_counts`, permuted by ``ranking``).

    >>> d = sweep_design([10, 40], test_imbalance=4, points=2)
    >>> d.ranking.tolist(), d.alphas.tolist(), d.divergences.round(6).tolist()
    ([1, 0], [1.0, 2.0], [0.0, 1.663553])
    """
    counts = check_array(train_counts, "train_counts", ndim=1, kind="integer", allow_empty=False)
    if np.any(counts <= 0):
        bad = np.flatnonzero(counts <= 0)[:10].tolist()
        raise InputError(f"train_counts: every class needs at least one training sample; classes {bad} have none")
    T = check_value(points, "points", type=int, low=0, low_open=True)
    rho = normalise_imbalance(test_imbalance, "test_imbalance")
    C = len(counts)
    rank = _frequency_ranking(counts)
    p = counts / counts.sum()
    alphas = _peaks(C, T)
    deltas = np.empty(T)
    for t, alpha in enumerate(alphas):
        q = np.empty(C)
        q[rank] = _sweep_prior(C, rho, float(alpha))
        deltas[t] = _symmetric_kl(p, q)
    return SweepDesign(counts, rank, rho, alphas, deltas)


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
    return _sweep_metrics(v, d)


def _sweep_metrics(v: np.ndarray, d: np.ndarray) -> dict[str, float]:
    auc = float(merged_trapezoid(v[None, :], d)[0])
    if math.isnan(auc):
        warnings.warn("AUC undefined: fewer than two distinct divergences", UserWarning, stacklevel=3)
    vmax, vmin = float(v.max()), float(v.min())
    return {
        "auc": auc,
        "avg": float(v.mean()),
        "std": float(v.std()),
        "max": vmax,
        "min": vmin,
        "drop_ratio": (vmax - vmin) / vmax if vmax > 0 else math.nan,
    }


def shot_groups(
    train_counts: np.ndarray, *, convention: Literal["tade", "oltr"] = "tade"
) -> dict[str, np.ndarray]:
    """Boolean class masks for many / medium / few-shot classes.

    ``tade`` (TADE/BALMS, default): many > 100, 20 <= medium <= 100, few < 20 training samples.
    ``oltr`` (inclusive at the borders): many >= 100, 20 < medium < 100, few <= 20.
    """
    n = check_array(train_counts, "train_counts", ndim=1, kind="integer")
    check_value(convention, "convention", choices=("tade", "oltr"))
    return _shot_groups(n, convention)


def _shot_groups(n: np.ndarray, convention: str) -> dict[str, np.ndarray]:
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
    return _group_accuracies(acc, groups)


def _group_accuracies(acc: np.ndarray, groups: dict[str, np.ndarray]) -> dict[str, float]:
    out = {}
    for name, mask in groups.items():
        out[name] = float(np.mean(acc[mask])) if mask.any() else math.nan
    return out


def expected_accuracy(per_class_acc: np.ndarray, class_counts: np.ndarray) -> float:
    """sum_c N_c·acc_c / sum_c N_c: accuracy under the test prior N (the R -> infinity limit)."""
    acc = check_array(per_class_acc, "per_class_acc", ndim=1, kind="float")
    w = check_array(class_counts, "class_counts", ndim=1, kind="float")
    return _expected_accuracy(acc, w)


def _expected_accuracy(acc: np.ndarray, w: np.ndarray) -> float:
    return float(np.dot(w, acc) / w.sum())


def agnostic_counts(
    train_counts: np.ndarray, *, n_max: int, ratios: Sequence[int] = TEST_AGNOSTIC_RATIOS
) -> dict[str, np.ndarray]:
    """Class counts of the test-agnostic protocol (Zhang et al., TADE), by class index.

    ``forward_R`` follows the training ranking with the training-profile formula at rho = R,
    ``backward_R`` reverses it, ``uniform`` gives every class ``n_max``.
    """
    counts = check_array(train_counts, "train_counts", ndim=1, kind="integer", allow_empty=False)
    n_max = check_value(n_max, "n_max", type=int, low=0, low_open=True)
    rhos = {r: normalise_imbalance(r, "ratios") for r in ratios}
    return _agnostic_counts(_frequency_ranking(counts), n_max, rhos)


def _agnostic_counts(rank: np.ndarray, n_max: int, rhos: dict[Any, float]) -> dict[str, np.ndarray]:
    C = len(rank)
    out: dict[str, np.ndarray] = {}
    for r, rho in rhos.items():
        prof = _training_profile(C, n_max, rho, "exp")
        fwd = np.empty(C, dtype=np.int64)
        fwd[rank] = prof
        bwd = np.empty(C, dtype=np.int64)
        bwd[rank] = prof[::-1]
        out[f"forward_{r}"] = fwd
        out[f"backward_{r}"] = bwd
    out["uniform"] = np.full(C, n_max, dtype=np.int64)
    return out


SCALARS = ("auc", "avg", "std", "max", "min", "drop_ratio", "balanced", "many", "medium", "few",
           "worst_class")


def _per_class(labels: np.ndarray, correct: np.ndarray, C: int) -> tuple[np.ndarray, np.ndarray]:
    n = np.bincount(labels, minlength=C)  # pool samples per class
    k = np.bincount(labels[correct], minlength=C)  # correct ones
    if np.any(n == 0):
        raise InputError(f"predictions: classes {np.flatnonzero(n == 0)[:10].tolist()} have no sample in the pool")
    return n, k


def _check_pool(labels: np.ndarray, sweep: dict[str, Any], arrays: list[list[np.ndarray]]) -> None:
    C = sweep["num_classes"]
    if labels.size and labels.max() >= C:
        raise InputError(f"predictions: labels must be < {C} (the sweep's num_classes), found {int(labels.max())}")
    needed = 1 + max((int(a.max()) for pt in arrays for a in pt if a.size), default=-1)
    pool = sweep.get("pool_size")  # sweep files written before it was recorded lack it
    if pool is not None and len(labels) != pool:
        raise InputError(f"predictions: {len(labels)} samples, but the sweep was built on a pool of {pool}: "
                         f"length differs ({'longer' if len(labels) > pool else 'shorter'} than the sweep's pool; "
                         "another test set?)")
    if len(labels) < needed:
        raise InputError(f"predictions: {len(labels)} samples, but the sweep indexes a pool of at least {needed}: "
                         "length differs from the sweep's pool")
    for pt, pt_arrays in zip(sweep["points"], arrays):
        expect = np.repeat(np.arange(C), pt["class_counts"])
        for a in pt_arrays:
            if not np.array_equal(labels[a], expect):
                raise InputError("predictions: labels do not match the sweep's pool at the drawn indices "
                                 "(was the sweep built on another test set, or in another order?)")


def sweep_scores(
    labels: Any,
    correct: Any,
    sweep: dict[str, Any],
    *,
    exact: bool = False,
    convention: Literal["tade", "oltr"] = "tade",
    bootstrap: int = 0,
    confidence: float = 0.95,
    seed: int = 0,
    set_correct: list[list[Any]] | None = None,
) -> dict[str, Any]:
    """Score per-sample correctness over a sweep's test pool (the paper's Eq. 2-5 and Table 2 metrics).

    Parameters
    ----------
    labels : array of int, shape (N,)
        True labels of the whole test pool (the pool the sweep was built on, same order).
    correct : array of bool, shape (N,)
        Whether each pool sample was classified correctly.
    sweep : dict
        Sweep-file content (see :func:`vistabench.protocols.longtail.sweep.build_sweep`): ``num_classes``,
        ``train_counts``, ``n_max``, ``repeats``, ``seed``, ``test_imbalance``, ``sha256`` and ``points``
        (each ``alpha``, ``divergence``, ``class_counts`` (C,), ``samples`` (R lists of pool indices)).
    exact : bool
        V_t = sum_c N_c·acc_c / sum_c N_c (the noise-free R -> infinity limit) instead of the mean
        over the R drawn sets.
    convention : {"tade", "oltr"}
        Many/medium/few thresholds (see :func:`vistabench.metrics.longtail.shot_groups`).
    bootstrap : int
        B > 0 adds ``ci``: percentile intervals of every scalar over B stratified bootstrap
        resamples of the pool (exact-mode metrics).
    set_correct : list of list of bool arrays, optional
        Per drawn set (``[t][r]``, aligned with ``points[t]["samples"][r]``) the correctness of a
        method that predicts each test set on its own (test-time adaptation without labels). V_t
        is then the mean over the R sets of their accuracy, in both modes (a drawn set holds
        exactly N_c samples of class c, so there is no pool-level limit); ``correct`` still gives
        the pool-level scores (balanced, groups, per class, test-agnostic).

    Returns
    -------
    dict with ``auc, avg, std, max, min, drop_ratio, balanced, many, medium, few, worst_class``
    (fractions, NaN when undefined), ``points`` (list of {alpha, divergence, accuracy}),
    ``per_class`` (C accuracies on the whole pool), ``test_agnostic`` (exact accuracies of the
    forward/uniform/backward sets), ``mode`` and ``settings``.
    """
    check_value(convention, "convention", choices=("tade", "oltr"))
    C = int(sweep["num_classes"])
    labels = check_labels(labels, "labels", num_classes=C)
    correct = check_array(correct, "correct", ndim=1).astype(bool)
    if correct.shape != labels.shape:
        raise InputError(f"correct: expected {len(labels)} entries (one per pool sample), got {len(correct)}")
    train_counts = check_array(sweep["train_counts"], "train_counts", ndim=1, kind="integer")
    if len(train_counts) != C:
        raise InputError(f"train_counts: expected {C} entries (the sweep's num_classes), got {len(train_counts)}")
    n_max = check_value(sweep["n_max"], "n_max", type=int, low=0, low_open=True)
    B = check_value(bootstrap, "bootstrap", type=int, low=0, low_open=True) if bootstrap else 0
    deltas = check_array([pt["divergence"] for pt in sweep["points"]], "divergences", ndim=1, kind="float",
                         allow_empty=False)
    arrays = [[np.asarray(s, dtype=np.int64) for s in pt["samples"]] for pt in sweep["points"]]
    _check_pool(labels, sweep, arrays)
    n, k = _per_class(labels, correct, C)
    acc = k / n
    weights = np.array([pt["class_counts"] for pt in sweep["points"]], dtype=np.float64)  # (T, C)
    if set_correct is not None:
        if len(set_correct) != len(arrays) or any(len(sc) != len(pt) for sc, pt in zip(set_correct, arrays)):
            raise InputError("set_correct: expected one correctness array per drawn set of every point")
        values = np.array([np.mean([np.mean(np.asarray(c, dtype=np.float64)) for c in sc]) for sc in set_correct])
    elif exact:
        values = weights @ acc / weights.sum(axis=1)
    else:
        cf = correct.astype(np.float64)
        values = np.array([np.mean([cf[a].mean() for a in pt]) for pt in arrays])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore" if bootstrap else "default")
        out: dict[str, Any] = _sweep_metrics(values, deltas)
    groups = _shot_groups(train_counts, convention)
    out["balanced"] = float(acc.mean())
    out.update(_group_accuracies(acc, groups))
    out["worst_class"] = float(acc.min())
    out["points"] = [{"alpha": pt["alpha"], "divergence": pt["divergence"], "accuracy": float(v)}
                     for pt, v in zip(sweep["points"], values)]
    out["per_class"] = acc.tolist()
    agnostic = _agnostic_counts(_frequency_ranking(train_counts), n_max, {r: float(r) for r in TEST_AGNOSTIC_RATIOS})
    out["test_agnostic"] = {name: _expected_accuracy(acc, cnt.astype(np.float64)) for name, cnt in agnostic.items()}
    out["mode"] = "exact" if exact else "resampled"
    out["settings"] = {"test_imbalance": sweep["test_imbalance"], "n_max": sweep["n_max"],
                       "points": len(sweep["points"]), "repeats": sweep["repeats"], "seed": sweep["seed"],
                       "sweep_sha256": sweep["sha256"], "convention": convention}
    if bootstrap:
        out["ci"] = _bootstrap_intervals(n, k, weights, deltas, groups, B, confidence, seed)
        out["settings"].update({"bootstrap": int(bootstrap), "confidence": confidence})
    return out


def bootstrap_intervals(
    n: np.ndarray, k: np.ndarray, weights: np.ndarray, deltas: np.ndarray, train_counts: np.ndarray, *,
    replicates: int, confidence: float = 0.95, convention: Literal["tade", "oltr"] = "tade", seed: int = 0,
) -> dict[str, list[float | None]]:
    """Percentile intervals over a stratified bootstrap of the test pool.

    ``n``, ``k`` (C,): pool samples and correct ones per class; ``weights`` (T, C): the test counts of
    each point; ``deltas`` (T,): their divergences. Resampling class c's n_c correctness indicators
    with replacement makes its correct count a Binomial(n_c, k_c/n_c) draw, so each replicate is
    drawn that way (same distribution, no index arrays). Metrics are the exact-mode ones.
    """
    n, k, counts = (check_array(a, name, ndim=1, kind="integer") for a, name in
                    ((n, "n"), (k, "k"), (train_counts, "train_counts")))
    weights, deltas = check_array(weights, "weights", ndim=2, kind="float"), check_array(deltas, "deltas", ndim=1)
    if not (len(k) == len(counts) == len(n) > 0 and weights.shape == (len(deltas), len(n))) or \
            np.any(n <= 0) or np.any(k < 0) or np.any(k > n):
        raise InputError(f"n, k, train_counts: expected C > 0 entries each with 0 <= k <= n, n > 0, and weights of "
                         f"shape (len(deltas), C); got {len(n)}, {len(k)}, {len(counts)} and {weights.shape}")
    B = check_value(replicates, "bootstrap", type=int, low=0, low_open=True)
    check_value(convention, "convention", choices=("tade", "oltr"))
    return _bootstrap_intervals(n, k, weights, deltas.astype(np.float64), _shot_groups(counts, convention), B,
                                confidence, seed)


def _bootstrap_intervals(n: np.ndarray, k: np.ndarray, weights: np.ndarray, deltas: np.ndarray,
                         groups: dict[str, np.ndarray], B: int, confidence: float, seed: int) -> dict[str, list[float | None]]:
    rng = np.random.default_rng(seed)
    acc_b = rng.binomial(n[None, :], (k / n)[None, :], size=(B, len(n))) / n[None, :]  # (B, C)
    V = acc_b @ (weights / weights.sum(axis=1, keepdims=True)).T  # (B, T)
    auc = merged_trapezoid(V, deltas)
    vmax, vmin = V.max(axis=1), V.min(axis=1)
    stats = {
        "auc": auc, "avg": V.mean(axis=1), "std": V.std(axis=1), "max": vmax, "min": vmin,
        "drop_ratio": np.where(vmax > 0, (vmax - vmin) / np.where(vmax > 0, vmax, 1), np.nan),
        "balanced": acc_b.mean(axis=1), "worst_class": acc_b.min(axis=1),
    }
    for g, mask in groups.items():
        stats[g] = acc_b[:, mask].mean(axis=1) if mask.any() else np.full(B, np.nan)
    lo, hi = 50 * (1 - confidence), 50 * (1 + confidence)
    out = {}
    for name in SCALARS:
        v = stats[name]
        out[name] = [None, None] if np.all(np.isnan(v)) else [float(np.nanpercentile(v, lo)),
                                                              float(np.nanpercentile(v, hi))]
    return out
