"""The evolving test sweep of Fang et al. (DESIGN.md §3): building sweep files and scoring
predictions against them.

A sweep file fixes, for T peak positions alpha_t, the per-class test counts N_c(alpha_t), the
divergence delta_t from the training distribution, and R drawn test sets (pool indices, class 0's
draws first, then class 1's, ...). Scoring is pure arithmetic on the predictions' correctness vector.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Literal

import numpy as np

from .._validation import check_array, check_labels, check_positive
from ..data.predictions import Predictions
from ..data.splits import read_split, seal, write_split
from ..errors import InputError
from ..metrics import longtail as M

SWEEP_KIND = "longtail-sweep"
SWEEP_VERSION = 1
SWEEP_KEYS = {"kind", "version", "seed", "num_classes", "train_counts", "test_imbalance", "n_max",
              "repeats", "points", "sha256"}
POINT_KEYS = {"alpha", "divergence", "class_counts", "samples"}
SCALARS = ("auc", "avg", "std", "max", "min", "drop_ratio", "balanced", "many", "medium", "few",
           "worst_class")


def _check_train_counts(train_counts: Any, num_classes: int | None = None) -> np.ndarray:
    counts = check_array(train_counts, "train_counts", ndim=1, kind="integer", allow_empty=False)
    if np.any(counts <= 0):
        bad = np.flatnonzero(counts <= 0)[:10].tolist()
        raise InputError(f"train_counts: every class needs at least one training sample; classes {bad} have none")
    if num_classes is not None and len(counts) != num_classes:
        raise InputError(f"train_counts: expected {num_classes} entries, got {len(counts)}")
    return counts


def _class_pools(pool_labels: np.ndarray, C: int) -> list[np.ndarray]:
    order = np.argsort(pool_labels, kind="stable")
    bounds = np.searchsorted(pool_labels[order], np.arange(C + 1))
    return [order[bounds[c]:bounds[c + 1]] for c in range(C)]


def build_sweep(
    pool_labels: np.ndarray,
    train_counts: np.ndarray,
    *,
    test_imbalance: float,
    n_max: int | None = None,
    points: int = 10,
    repeats: int = 5,
    seed: int = 0,
) -> dict[str, Any]:
    """Build a sealed sweep (the content of a sweep file).

    Parameters
    ----------
    pool_labels : array of int, shape (N,)
        Labels of the test pool, in the order of the predictions file.
    train_counts : array of int, shape (C,)
        Training samples per class, by class index; defines positions and the distribution p.
    test_imbalance : float
        rho_t > 1 (values < 1 read as 1/rho_t).
    n_max : int, optional
        n_max of the test counts (Eq. 2); default: the smallest class pool, so that no class is
        drawn with replacement.
    points, repeats : int
        T peaks and R test sets per peak.
    seed : int
        Seeds the draws: the same inputs and seed give a byte-identical file.
    """
    counts = _check_train_counts(train_counts)
    C = len(counts)
    labels = check_labels(pool_labels, "pool_labels", num_classes=C)
    T = check_positive(points, "points", integer=True)
    R = check_positive(repeats, "repeats", integer=True)
    rho_t = M.normalise_imbalance(test_imbalance, "test_imbalance")
    pools = _class_pools(labels, C)
    sizes = np.array([len(p) for p in pools])
    if np.any(sizes == 0):
        raise InputError(f"pool_labels: classes {np.flatnonzero(sizes == 0)[:10].tolist()} have no test sample in the pool")
    n_max = int(sizes.min()) if n_max is None else check_positive(n_max, "n_max", integer=True)
    rank = M.frequency_ranking(counts)
    p = counts / counts.sum()
    rng = np.random.default_rng(check_positive(seed, "seed", strict=False, integer=True))
    out_points = []
    short: set[int] = set()
    for alpha in M.peaks(C, T):
        by_pos = M.sweep_class_counts(C, test_imbalance=rho_t, n_max=n_max, alpha=float(alpha))
        q_pos = M.sweep_prior(C, test_imbalance=rho_t, alpha=float(alpha))
        class_counts = np.empty(C, dtype=np.int64)
        class_counts[rank] = by_pos
        q = np.empty(C)
        q[rank] = q_pos
        samples = []
        for _ in range(R):
            drawn = []
            for c in range(C):
                n, pool = int(class_counts[c]), pools[c]
                if n <= len(pool):
                    drawn.append(pool[rng.permutation(len(pool))[:n]])
                else:
                    short.add(c)
                    drawn.append(pool[rng.integers(0, len(pool), size=n)])
            samples.append(np.concatenate(drawn).tolist())
        out_points.append({"alpha": float(alpha), "divergence": M.symmetric_kl(p, q),
                           "class_counts": class_counts.tolist(), "samples": samples})
    if short:
        warnings.warn(f"classes {sorted(short)[:10]} have fewer pool samples than the sweep needs: "
                      "drawn with replacement", UserWarning, stacklevel=2)
    return seal({
        "kind": SWEEP_KIND, "version": SWEEP_VERSION, "seed": int(seed), "num_classes": C,
        "train_counts": counts.tolist(), "test_imbalance": rho_t, "n_max": int(n_max),
        "repeats": int(R), "points": out_points,
    })


def write_sweep(path: str | Path, sweep: dict[str, Any]) -> dict[str, Any]:
    return write_split(path, sweep)


def read_sweep(path: str | Path) -> dict[str, Any]:
    """Read a sweep file: hash verified, structure checked."""
    sweep = read_split(path, kind=SWEEP_KIND)
    validate_sweep(sweep, where=f"sweep file {str(path)!r}")
    return sweep


def validate_sweep(sweep: dict[str, Any], *, where: str = "sweep") -> None:
    if set(sweep) != SWEEP_KEYS:
        raise InputError(f"{where}: expected keys {sorted(SWEEP_KEYS)}, found {sorted(sweep)}")
    if sweep["version"] != SWEEP_VERSION:
        raise InputError(f"{where}: unsupported version {sweep['version']!r} (this vistabench reads {SWEEP_VERSION})")
    C = sweep["num_classes"]
    _check_train_counts(sweep["train_counts"], C)
    for i, pt in enumerate(sweep["points"]):
        if set(pt) != POINT_KEYS:
            raise InputError(f"{where}: point {i} has keys {sorted(pt)}, expected {sorted(POINT_KEYS)}")
        total = sum(pt["class_counts"])
        if len(pt["class_counts"]) != C or len(pt["samples"]) != sweep["repeats"] or \
                any(len(s) != total for s in pt["samples"]):
            raise InputError(f"{where}: point {i} is inconsistent (class_counts / samples lengths)")


def _per_class(pred: Predictions, C: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    correct = pred.correct()
    n = np.bincount(pred.labels, minlength=C)  # pool samples per class
    k = np.bincount(pred.labels[correct], minlength=C)  # correct ones
    if np.any(n == 0):
        raise InputError(f"predictions: classes {np.flatnonzero(n == 0)[:10].tolist()} have no sample in the pool")
    return correct, n, k


def _check_predictions(pred: Predictions, sweep: dict[str, Any], arrays: list[list[np.ndarray]]) -> None:
    C = sweep["num_classes"]
    if pred.labels.size and pred.labels.max() >= C:
        raise InputError(f"predictions: labels must be < {C} (the sweep's num_classes), found {int(pred.labels.max())}")
    if pred.num_columns is not None and pred.num_columns != C:
        raise InputError(f"predictions: {pred.kind} has {pred.num_columns} columns, the sweep has {C} classes")
    needed = 1 + max((int(a.max()) for pt in arrays for a in pt if a.size), default=-1)
    if len(pred) < needed:
        raise InputError(f"predictions: {len(pred)} samples, but the sweep indexes a pool of at least {needed}: "
                         "length differs from the sweep's pool")
    for pt, pt_arrays in zip(sweep["points"], arrays):
        expect = np.repeat(np.arange(C), pt["class_counts"])
        for a in pt_arrays:
            if not np.array_equal(pred.labels[a], expect):
                raise InputError("predictions: labels do not match the sweep's pool at the drawn indices "
                                 "(was the sweep built on another test set, or in another order?)")


def score_sweep(
    pred: Predictions,
    sweep: dict[str, Any],
    *,
    exact: bool = False,
    convention: Literal["tade", "oltr"] = "tade",
    bootstrap: int = 0,
    confidence: float = 0.95,
    seed: int = 0,
    set_predictions: list[list[np.ndarray]] | None = None,
) -> dict[str, Any]:
    """Score predictions over the sweep's test pool.

    Parameters
    ----------
    pred : Predictions
        Predictions over the whole test pool (the pool the sweep was built on, same order).
    sweep : dict
        Sweep file content (see :func:`build_sweep`).
    exact : bool
        V_t = sum_c N_c·acc_c / sum_c N_c (the noise-free R -> infinity limit) instead of the mean
        over the R drawn sets.
    convention : {"tade", "oltr"}
        Many/medium/few thresholds (see :func:`vistabench.metrics.longtail.shot_groups`).
    bootstrap : int
        B > 0 adds ``ci``: percentile intervals of every scalar over B stratified bootstrap
        resamples of the pool (exact-mode metrics).
    set_predictions : list of list of int arrays, optional
        For methods that adapt to each unlabelled test set (test-time aggregation): predicted
        labels of every drawn set, ``set_predictions[t][r]`` aligned with the sweep's
        ``points[t]["samples"][r]``. The sweep values V_t then come from these (in both modes: a
        drawn set holds exactly N_c samples of class c, so no noise-free limit exists apart from
        the sets); ``pred`` still gives the pool-level scores (BTD, groups, per class).

    Returns
    -------
    dict with ``auc, avg, std, max, min, drop_ratio, balanced, many, medium, few, worst_class``
    (fractions, NaN when undefined), ``points`` (list of {alpha, divergence, accuracy}),
    ``per_class`` (C accuracies on the whole pool), ``test_agnostic`` (exact accuracies of the
    forward/uniform/backward sets), ``mode`` and ``settings``.
    """
    validate_sweep(sweep)
    arrays = [[np.asarray(s, dtype=np.int64) for s in pt["samples"]] for pt in sweep["points"]]
    _check_predictions(pred, sweep, arrays)
    C = sweep["num_classes"]
    train_counts = np.asarray(sweep["train_counts"])
    correct, n, k = _per_class(pred, C)
    acc = k / n
    deltas = np.array([pt["divergence"] for pt in sweep["points"]])
    weights = np.array([pt["class_counts"] for pt in sweep["points"]], dtype=np.float64)  # (T, C)
    if set_predictions is not None:
        values = _set_values(pred.labels, arrays, set_predictions)
    elif exact:
        values = weights @ acc / weights.sum(axis=1)
    else:
        cf = correct.astype(np.float64)
        values = np.array([np.mean([cf[a].mean() for a in pt]) for pt in arrays])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore" if bootstrap else "default")
        out: dict[str, Any] = M.sweep_metrics(values, deltas)
    out["balanced"] = float(acc.mean())
    out.update(M.group_accuracies(acc, train_counts, convention=convention))
    out["worst_class"] = float(acc.min())
    out["points"] = [{"alpha": pt["alpha"], "divergence": pt["divergence"], "accuracy": float(v)}
                     for pt, v in zip(sweep["points"], values)]
    out["per_class"] = acc.tolist()
    out["test_agnostic"] = {name: M.expected_accuracy(acc, cnt) for name, cnt in
                            M.agnostic_counts(train_counts, n_max=sweep["n_max"]).items()}
    out["mode"] = "exact" if exact else "resampled"
    out["settings"] = {"test_imbalance": sweep["test_imbalance"], "n_max": sweep["n_max"],
                       "points": len(sweep["points"]), "repeats": sweep["repeats"], "seed": sweep["seed"],
                       "sweep_sha256": sweep["sha256"], "convention": convention}
    if bootstrap:
        out["ci"] = bootstrap_intervals(n, k, weights, deltas, train_counts, replicates=bootstrap,
                                        confidence=confidence, convention=convention, seed=seed)
        out["settings"].update({"bootstrap": int(bootstrap), "confidence": confidence})
    return out


def _set_values(labels: np.ndarray, arrays: list[list[np.ndarray]], set_predictions: Any) -> np.ndarray:
    if len(set_predictions) != len(arrays):
        raise InputError(f"set_predictions: expected {len(arrays)} points, got {len(set_predictions)}")
    values = []
    for t, (pt, preds) in enumerate(zip(arrays, set_predictions)):
        if len(preds) != len(pt):
            raise InputError(f"set_predictions: point {t} needs {len(pt)} sets, got {len(preds)}")
        accs = []
        for a, p in zip(pt, preds):
            p = np.asarray(p)
            if p.shape != a.shape:
                raise InputError(f"set_predictions: point {t} has a set of {len(a)} samples but {p.shape} predictions")
            accs.append(float(np.mean(p == labels[a])) if a.size else float("nan"))
        values.append(np.mean(accs))
    return np.asarray(values, dtype=np.float64)


def bootstrap_intervals(
    n: np.ndarray, k: np.ndarray, weights: np.ndarray, deltas: np.ndarray, train_counts: np.ndarray, *,
    replicates: int, confidence: float = 0.95, convention: Literal["tade", "oltr"] = "tade", seed: int = 0,
) -> dict[str, list[float | None]]:
    """Percentile intervals over a stratified bootstrap of the test pool.

    Resampling class c's n_c correctness indicators with replacement makes its correct count a
    Binomial(n_c, k_c/n_c) draw, so each replicate is drawn that way (same distribution, no index
    arrays). Metrics are the exact-mode ones.
    """
    B = check_positive(replicates, "bootstrap", integer=True)
    rng = np.random.default_rng(seed)
    acc_b = rng.binomial(n[None, :], (k / n)[None, :], size=(B, len(n))) / n[None, :]  # (B, C)
    V = acc_b @ (weights / weights.sum(axis=1, keepdims=True)).T  # (B, T)
    auc = M.normalised_auc(V, deltas)
    vmax, vmin = V.max(axis=1), V.min(axis=1)
    groups = M.shot_groups(train_counts, convention=convention)
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
