"""Per-category detection score calibration (Dave et al. §6.3): fit on one detection set, apply to another.

Labels come from :func:`vistabench.metrics.detection.detection_labels` (matched at IoU 0.75 under
the federated rules). One calibrator per category maps a raw score to an estimated probability of
being a true positive. Methods (registry ``calibrators``):

* ``histbin`` — histogram binning: equal-mass bins of the class's scores, value = bin precision.
* ``isotonic`` — isotonic regression (scikit-learn's pool-adjacent-violators), linear between knots.
* ``platt`` — Platt scaling: ``sigmoid(a s + b)`` by logistic regression on the score.
* ``beta`` — beta calibration (Kull et al. 2017): ``sigmoid(a ln s - b ln(1-s) + c)``, a, b >= 0;
  needs scores in (0, 1) (other scores are an error, never clipped).
* ``bbq`` — Bayesian binning into quantiles (Naeini et al. 2015): histogram-binning models with
  2..B equal-mass bins, averaged with weights from their BDeu marginal likelihood.

**Fallback**: a category with fewer than ``min_samples`` labelled detections or without a single
positive (or negative) at fit time uses a calibrator fitted on all categories pooled; a category not
seen at fit time uses it too. ``apply`` keeps each category's order of scores strictly (ties stay
ties): it adds ``1e-9 * rank / n`` within the category, far below any calibrated difference, so
piecewise-constant maps cannot merge two scores and AP^Fixed is exactly unchanged.

**The authors' recipe** (:func:`fit_calibration_devil`, ``recipe="devil"``): a calibrator per
category with a true positive, score 0 for the others; Platt on logit(score) or netcal's histogram
binning (:func:`fit_histbin_netcal`: fit [a, b), look-up (a, b]); ``apply`` breaks ties as their
``MAINTAIN_RANK`` (:func:`maintain_rank`), across categories by the original score.

A fitted calibration is JSON (``Calibration.to_json`` / ``from_json``) keyed by category id.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ...errors import InputError
from ...options import parse_int
from ...registry import Registry

calibrators: Registry[Callable[..., dict]] = Registry("calibration method")


def _sigmoid(z: np.ndarray) -> np.ndarray:
    from scipy.special import expit

    return expit(z)


def _equal_mass_edges(s: np.ndarray, bins: int) -> np.ndarray:
    q = np.quantile(s, np.linspace(0, 1, bins + 1))
    edges = np.unique(q)
    if len(edges) < 2:
        edges = np.array([s.min(), s.min()])
    return edges


def _bin_values(s: np.ndarray, y: np.ndarray, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    idx = np.clip(np.searchsorted(edges, s, "right") - 1, 0, max(len(edges) - 2, 0))
    nb = max(len(edges) - 1, 1)
    n = np.bincount(idx, minlength=nb).astype(float)
    k = np.bincount(idx, weights=y.astype(float), minlength=nb)
    return n, k


@calibrators.register("histbin")
def fit_histbin(s: np.ndarray, y: np.ndarray, *, bins: int = 10) -> dict:
    edges = _equal_mass_edges(s, bins)
    n, k = _bin_values(s, y, edges)
    val = np.where(n > 0, k / np.maximum(n, 1), np.mean(y))
    return {"kind": "bins", "edges": edges.tolist(), "values": val.tolist()}


@calibrators.register("isotonic")
def fit_isotonic(s: np.ndarray, y: np.ndarray) -> dict:
    from sklearn.isotonic import IsotonicRegression

    ir = IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0).fit(s, y.astype(float))
    return {"kind": "interp", "x": ir.X_thresholds_.tolist(), "y": ir.y_thresholds_.tolist()}


def _logistic(X: np.ndarray, y: np.ndarray, *, nonneg: tuple[int, ...] = ()) -> np.ndarray:
    """Weights w (last = intercept) of min sum log-loss(sigmoid(X w + c)) + tiny L2, by L-BFGS-B."""
    from scipy.optimize import minimize

    Xb = np.concatenate([X, np.ones((len(X), 1))], axis=1)
    yf = y.astype(float)

    def f(w):
        z = Xb @ w
        loss = np.sum(np.logaddexp(0, z) - yf * z) + 1e-6 * np.sum(w[:-1] ** 2)
        g = Xb.T @ (_sigmoid(z) - yf) + np.r_[2e-6 * w[:-1], 0.0]
        return loss, g

    bounds = [(0, None) if i in nonneg else (None, None) for i in range(X.shape[1])] + [(None, None)]
    w0 = np.zeros(X.shape[1] + 1)
    if nonneg:
        w0[list(nonneg)] = 1.0
    return minimize(f, w0, jac=True, method="L-BFGS-B", bounds=bounds).x


@calibrators.register("platt")
def fit_platt(s: np.ndarray, y: np.ndarray) -> dict:
    a, b = _logistic(s[:, None], y)
    return {"kind": "platt", "a": float(a), "b": float(b)}


def _check_open_unit(s: np.ndarray, what: str) -> None:
    if len(s) and (s.min() <= 0 or s.max() >= 1):
        raise InputError(f"{what}: beta calibration needs scores in (0, 1), got range "
                         f"[{s.min():.4g}, {s.max():.4g}]; use platt or isotonic")


@calibrators.register("beta")
def fit_beta(s: np.ndarray, y: np.ndarray) -> dict:
    _check_open_unit(s, "scores")
    X = np.stack([np.log(s), -np.log1p(-s)], axis=1)
    a, b, c = _logistic(X, y, nonneg=(0, 1))
    return {"kind": "beta", "a": float(a), "b": float(b), "c": float(c)}


@calibrators.register("bbq")
def fit_bbq(s: np.ndarray, y: np.ndarray, *, max_bins: int | None = None, prior_strength: float = 2.0) -> dict:
    n = len(s)
    top = max_bins or max(2, min(30, int(round(n ** (1 / 3) * 2))))
    models, scores = [], []
    for b in range(2, top + 1):
        edges = _equal_mass_edges(s, b)
        nb, kb = _bin_values(s, y, edges)
        mid = np.clip((edges[:-1] + edges[1:]) / 2, 1e-3, 1 - 1e-3) if s.min() >= 0 and s.max() <= 1 \
            else np.full(len(nb), max(min(float(np.mean(y)), 1 - 1e-3), 1e-3))
        a0 = prior_strength / len(nb) * mid
        b0 = prior_strength / len(nb) * (1 - mid)
        lg = math.lgamma
        score = sum(lg(a0[i] + b0[i]) - lg(a0[i] + b0[i] + nb[i]) + lg(a0[i] + kb[i]) - lg(a0[i])
                    + lg(b0[i] + nb[i] - kb[i]) - lg(b0[i]) for i in range(len(nb)))
        val = (kb + a0) / (nb + a0 + b0)
        models.append({"edges": edges.tolist(), "values": val.tolist()})
        scores.append(score)
    sc = np.asarray(scores)
    w = np.exp(sc - sc.max())
    w /= w.sum()
    return {"kind": "bbq", "models": models, "weights": w.tolist()}


_EPS = 1e-12
_MACHINE_EPS = float(np.finfo(np.float64).eps)


def fit_platt_logit(s: np.ndarray, y: np.ndarray) -> dict:
    """Platt scaling on logit(score), as netcal's ``LogisticCalibration`` the authors use."""
    from scipy.special import logit

    a, b = _logistic(logit(np.clip(s, _EPS, 1 - _EPS))[:, None], y)
    return {"kind": "platt-logit", "a": float(a), "b": float(b)}


def fit_histbin_netcal(s: np.ndarray, y: np.ndarray, *, bins: int = 20) -> dict:
    """Histogram binning as netcal's ``HistogramBinning(bins, detection=True)`` the authors use.

    Fit: scores clipped to [eps, 1 - eps] (eps = float64's machine epsilon) fall into ``bins``
    equal-width bins of ``linspace(0, 1, bins + 1)`` as ``scipy.stats.binned_statistic_dd`` puts them,
    **[a, b)**; a bin's value is its share of true positives, an empty bin's its centre. Look-up
    (:func:`predict`, kind ``histbin-netcal``): ``np.digitize(..., right=True) - 1``, i.e. **(a, b]**,
    so a score exactly on an inner edge is looked up in the bin *below* the one it was fitted in.
    """
    edges = np.linspace(0.0, 1.0, bins + 1)
    x = np.clip(s, _MACHINE_EPS, 1.0 - _MACHINE_EPS)
    idx = np.searchsorted(edges, x, "right") - 1
    n = np.bincount(idx, minlength=bins).astype(float)
    k = np.bincount(idx, weights=y.astype(float), minlength=bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        val = np.where(n > 0, k / np.where(n > 0, n, 1), 0.5 * (edges[:-1] + edges[1:]))
    return {"kind": "histbin-netcal", "edges": edges.tolist(), "values": val.tolist()}


def netcal_bin_lookup(edges: np.ndarray, s: np.ndarray) -> np.ndarray:
    """The bin netcal's ``HistogramBinning.transform`` looks ``s`` up in: (a, b], ends clamped."""
    nb = len(edges) - 1
    idx = np.searchsorted(edges, s, "left") - 1  # == np.digitize(s, edges, right=True) - 1
    idx[idx == -1] = 0
    idx[idx >= nb] = nb - 1
    return idx


#: The authors' recipe (large-vocab-devil ``configs/calib``): per-class calibrators, classes with no
#: detection or no true positive at fit time score 0; Platt on logit(score); histogram binning with
#: TEST.N_BINS = 20 equal-width bins (netcal's edges and look-up).
devil_calibrators: Registry[Callable[..., dict]] = Registry("devil calibration method")
devil_calibrators.add("platt", fit_platt_logit)
devil_calibrators.add("histbin", fit_histbin_netcal)


def fit_calibration_devil(scores: np.ndarray, labels: np.ndarray, category_ids: np.ndarray, *,
                          method: str = "platt", bins: int = 20) -> Calibration:
    """Per-category calibration as the authors' ``train_calibration.py`` (GROUPING per-class,
    MISSING_SCORE and NO_TP_SCORE "zero"): a category with at least one positive gets its own
    calibrator, every other category (no positive, or not seen at fit time) maps to score 0.
    Applying it breaks ties as the authors' ``MAINTAIN_RANK`` (:func:`maintain_rank`).

    Parameters
    ----------
    scores : (n,) float in [0, 1] (netcal refuses others); labels : (n,) bool; category_ids : (n,) int.
    method : "platt" (on logit(score)) or "histbin" (``bins`` equal-width bins, netcal's look-up).
    """
    if method not in devil_calibrators:
        raise InputError(f"method: the devil recipe supports {devil_calibrators.names()}, got {method!r}")
    fit = devil_calibrators.get(method)
    kwargs = {"bins": int(bins)} if method == "histbin" else {}
    s = np.asarray(scores, float)
    y = np.asarray(labels, bool)
    c = np.asarray(category_ids, np.int64)
    if not (len(s) == len(y) == len(c)):
        raise InputError(f"scores, labels, category_ids: lengths differ ({len(s)}, {len(y)}, {len(c)})")
    if not np.all(np.isfinite(s)):
        raise InputError("scores: expected finite values")
    if len(s) and (s.min() < 0 or s.max() > 1):
        raise InputError(f"scores: the devil recipe (netcal) needs scores in [0, 1], got range "
                         f"[{s.min():.4g}, {s.max():.4g}]")
    per: dict[int, dict] = {}
    for cat in np.unique(c):
        m = c == cat
        per[int(cat)] = fit(s[m], y[m], **kwargs) if y[m].any() else {"kind": "zero"}
    return Calibration(method, per, {"kind": "zero"},
                       {"recipe": "devil", "num_fit": int(len(s)), "tie_break": "maintain_rank",
                        "num_categories_fitted": sum(v["kind"] != "zero" for v in per.values())})


def predict(model: dict, s: np.ndarray) -> np.ndarray:
    """Evaluate one fitted calibrator (a JSON dict) on scores ``s``."""
    kind = model["kind"]
    if kind == "bins":
        e = np.asarray(model["edges"])
        v = np.asarray(model["values"])
        return v[np.clip(np.searchsorted(e, s, "right") - 1, 0, len(v) - 1)]
    if kind == "histbin-netcal":
        return np.asarray(model["values"])[netcal_bin_lookup(np.asarray(model["edges"]), np.asarray(s, float))]
    if kind == "interp":
        return np.interp(s, model["x"], model["y"])
    if kind == "platt":
        return _sigmoid(model["a"] * s + model["b"])
    if kind == "beta":
        _check_open_unit(s, "scores")
        return _sigmoid(model["a"] * np.log(s) - model["b"] * np.log1p(-s) + model["c"])
    if kind == "platt-logit":
        from scipy.special import logit

        return _sigmoid(model["a"] * logit(np.clip(s, _EPS, 1 - _EPS)) + model["b"])
    if kind == "zero":
        return np.zeros(len(s))
    if kind == "bbq":
        out = np.zeros(len(s))
        for m, w in zip(model["models"], model["weights"]):
            out += w * predict({"kind": "bins", **m}, s)
        return out
    raise InputError(f"calibration: unknown model kind {kind!r}")


@dataclass
class Calibration:
    """Fitted per-category calibrators (category id -> model) plus the pooled fallback."""

    method: str
    per_category: dict[int, dict]
    fallback: dict
    settings: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"kind": "vistabench-detection-calibration", "version": 1, "method": self.method,
                "settings": self.settings, "fallback": self.fallback,
                "per_category": {str(k): v for k, v in self.per_category.items()}}

    @classmethod
    def from_json(cls, obj: Any, what: str = "calibration") -> "Calibration":
        if not isinstance(obj, dict) or obj.get("kind") != "vistabench-detection-calibration":
            raise InputError(f"{what}: not a vistabench detection calibration file "
                             f"(expected kind 'vistabench-detection-calibration')")
        return cls(obj["method"], {int(k): v for k, v in obj["per_category"].items()}, obj["fallback"],
                   obj.get("settings", {}))

    def save(self, path: str | Path) -> Path:
        from ...atomic import write_text

        p = Path(path)
        write_text(p, json.dumps(self.to_json()), what="calibration file")
        return p


def fit_calibration(
    scores: np.ndarray,
    labels: np.ndarray,
    category_ids: np.ndarray,
    *,
    method: str = "platt",
    min_samples: int = 20,
    **fit_options: Any,
) -> Calibration:
    """Fit one calibrator per category on (score, label) pairs.

    Parameters
    ----------
    scores : (n,) float; labels : (n,) bool (true positive at IoU 0.75); category_ids : (n,) int.
    method : a name in ``calibrators`` (histbin, isotonic, platt, beta, bbq).
    min_samples : categories with fewer labelled detections, or with only positives or only
        negatives, use the pooled fallback.
    fit_options : passed to the calibrator (e.g. ``bins`` of histbin).
    """
    fit = calibrators.get(method)
    min_samples = parse_int(min_samples, "min_samples", low=1)
    s = np.asarray(scores, float)
    y = np.asarray(labels, bool)
    c = np.asarray(category_ids, np.int64)
    if not (len(s) == len(y) == len(c)):
        raise InputError(f"scores, labels, category_ids: lengths differ ({len(s)}, {len(y)}, {len(c)})")
    if len(s) == 0:
        raise InputError("calibration: no labelled detections to fit on")
    if not np.all(np.isfinite(s)):
        raise InputError("scores: expected finite values")
    if y.all() or not y.any():
        raise InputError("calibration: the fitting set needs both true and false positives")
    fallback = fit(s, y, **fit_options)
    per: dict[int, dict] = {}
    order = np.argsort(c, kind="stable")
    cs = c[order]
    starts = np.flatnonzero(np.r_[True, cs[1:] != cs[:-1]])
    for st, en in zip(starts, np.r_[starts[1:], len(cs)]):
        idx = order[st:en]
        yy = y[idx]
        if len(idx) >= min_samples and yy.any() and not yy.all():
            per[int(cs[st])] = fit(s[idx], yy, **fit_options)
    return Calibration(method, per, fallback, {"min_samples": min_samples, "num_fit": int(len(s)),
                                               "num_categories_fitted": len(per)})


def maintain_rank(calibrated: np.ndarray, original: np.ndarray, category_ids: np.ndarray) -> np.ndarray:
    """Break ties after calibration as the authors' ``MAINTAIN_RANK`` (``train_calibration.py``,
    ``PerClassDetectionCalibrator.transform``): detections of *all* categories that got the same
    calibrated score form one group; unless their original scores are all equal, the group sorted by
    original score (stable: categories in order of first appearance, then file order) gets
    ``linspace(0, 1e-16, n)`` added (``linspace(-1e-16, 0, n)`` when score + 1e-16 >= 1), in float64
    as there, so an increment below half a unit in the last place leaves the tie in place.
    """
    new = np.asarray(calibrated, np.float64)
    orig = np.asarray(original, np.float64)
    cats = np.asarray(category_ids, np.int64)
    n = len(new)
    out = new.copy()
    if n < 2:
        return out
    # the reference's insertion order: categories by first appearance in the file, then file order
    _, first, inv = np.unique(cats, return_index=True, return_inverse=True)
    cat_rank = np.argsort(np.argsort(first, kind="stable"), kind="stable")[inv]
    insertion = np.lexsort((np.arange(n), cat_rank))
    rank = np.empty(n, np.int64)
    rank[insertion] = np.arange(n)
    order = np.lexsort((rank, orig, new))  # by calibrated score, then original score, then insertion
    v = new[order]
    starts = np.flatnonzero(np.r_[True, v[1:] != v[:-1]])
    ends = np.r_[starts[1:], n]
    max_delta = 1e-16
    for st, en in zip(starts[ends - starts > 1], ends[ends - starts > 1]):
        idx = order[st:en]
        o = orig[idx]
        if np.all(o[0] == o[1:]):
            continue
        key = new[idx[0]]
        deltas = np.linspace(0, max_delta, en - st) if key + max_delta < 1 else np.linspace(-max_delta, 0, en - st)
        out[idx] = new[idx] + deltas
    return out


def apply_calibration(cal: Calibration, scores: np.ndarray, category_ids: np.ndarray, *,
                      strict: bool = True) -> np.ndarray:
    """Calibrated scores (``scores`` and ``category_ids`` in file order).

    With ``strict`` ties are broken: a calibration fitted by the devil recipe as the authors'
    ``MAINTAIN_RANK`` (:func:`maintain_rank`), any other by keeping each category's score order
    exactly (+1e-9·rank within the category, see the module doc).
    """
    devil = cal.settings.get("tie_break") == "maintain_rank" or cal.settings.get("recipe") == "devil"
    s = np.asarray(scores, float)
    c = np.asarray(category_ids, np.int64)
    out = np.empty(len(s))
    order = np.argsort(c, kind="stable")
    cs = c[order]
    starts = np.flatnonzero(np.r_[True, cs[1:] != cs[:-1]]) if len(cs) else np.zeros(0, int)
    for st, en in zip(starts, np.r_[starts[1:], len(cs)]):
        idx = order[st:en]
        model = cal.per_category.get(int(cs[st]), cal.fallback)
        v = predict(model, s[idx])
        if strict and not devil:
            u, inv = np.unique(s[idx], return_inverse=True)
            v = v + 1e-9 * inv / max(len(u), 1)
        out[idx] = v
    if strict and devil:
        out = maintain_rank(out, s, c)
    return out
