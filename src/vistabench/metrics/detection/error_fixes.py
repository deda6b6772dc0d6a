"""ΔAP of fixing each TIDE error type ("oracle" fixes, Bolya et al., ECCV 2020), for TIDE's own AP and
for AP^Fixed and AP^Pool (per frequency group on LVIS).

Each figure is the AP after one fix minus the AP before it, in AP points (0–100, as TIDE):

* ``Cls`` / ``Loc`` — every error of that type whose target ground truth was unmatched and that is
  the best-scored error aimed at it becomes a true positive of the target's category; the other
  errors of that type are removed;
* ``Both`` / ``Dupe`` / ``Bkg`` — those false positives are removed;
* ``Miss`` — the missed ground truths are removed from the ground-truth count;
* ``FalsePos`` — every true positive scores 1 and every false positive 0 (perfect precision at the
  same recall); ``FalseNeg`` — every unmatched ground truth is removed (perfect recall).

The six main figures are clipped at 0 (as TIDE: a negative change is an interpolation artefact); the
two special ones are not. Errors themselves come from :func:`~.errors.classify_errors`.

Variants (``decompose_errors(variants=...)``):

* ``"tide"`` — tidecv 1.0.1: each image's top 100 detections over all categories (LVIS: 300), TIDE's
  matching, AP50 averaged over the categories with ground truth *or detections* (a category with
  detections and no ground truth scores 0), LVIS emulated as tidecv does (detections of categories
  neither annotated nor negative in the image, and unmatched ones of not-exhaustive categories, are
  ignored but still classified);
* ``"fixed"`` — AP^Fixed's detections (top ``dets_per_class`` per category, LVIS federated selection:
  detections of categories neither annotated nor negative in the image are not evaluated and not
  classified), lvis-api / pycocotools matching at ``pos_iou``, AP50 over the categories with ground
  truth; on LVIS also APr/APc/APf;
* ``"pool"`` — the same detections and errors, all categories in one ranking (AP^Pool at ``pos_iou``);
  on LVIS also each frequency group pooled alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..._validation import check_value
from ..detection_options import EvaluationOptions, options_alone
from ...errors import InputError
from .data import FREQUENCIES, Detections, GroundTruth
from .errors import (
    BKG,
    BOTH,
    CLS,
    DUPE,
    ERROR_TYPES,
    LOC,
    SPECIAL_ERROR_TYPES,
    TRUE_POSITIVE,
    IGNORED,
    ErrorLabels,
    classify_errors,
)
from .params import COCO_MAX_DETS, LVIS_MAX_DETS, RECALL_THRESHOLDS
from .select import federated_selection, lvis_area_filter, rank_within
from .sort import member, sorted_unique

ERROR_VARIANTS: tuple[str, ...] = ("tide", "fixed", "pool")
TIDE_RECALL_THRESHOLDS = np.array([x / 100 for x in range(101)])  # tidecv's x_range (not linspace)
TIDE_MAX_DETS = 100  # tidecv's COCO loader; its LVIS loader keeps 300


@dataclass
class _Points:
    """The AP data of one fix: entries (category, true positive, rank in the one ranking: descending
    score, then image, category, file position) and the ground-truth count per category."""

    cat: np.ndarray
    tp: np.ndarray
    rank: np.ndarray
    num_gt: np.ndarray  # (K,)


def _ap101(tp: np.ndarray, num_gt: int, *, tide: bool) -> float:
    """101-point interpolated AP (fraction) of a ranked list: TIDE's or lvis-api's arithmetic."""
    if len(tp) == 0:
        return 0.0
    tps = np.cumsum(tp).astype(float)
    fps = np.cumsum(~tp).astype(float)
    rc = tps / num_gt
    pr = tps / (tps + fps) if tide else tps / (fps + tps + np.spacing(1))
    pr = np.maximum.accumulate(pr[::-1])[::-1]
    thr = TIDE_RECALL_THRESHOLDS if tide else RECALL_THRESHOLDS
    ind = np.searchsorted(rc, thr, side="left")
    q = np.where(ind < len(pr), pr[np.minimum(ind, len(pr) - 1)], 0.0)
    if tide:
        return sum(q.tolist()) / len(q)
    return float(np.mean(q))


def _ranked(p: _Points, sel: np.ndarray) -> np.ndarray:
    """Positions of the ``sel`` entries in rank order."""
    idx = np.flatnonzero(sel)
    return idx[np.argsort(p.rank[idx], kind="stable")]


def _per_category(p: _Points, *, tide: bool) -> np.ndarray:
    """(K,) AP per category in points; TIDE: 0 without ground truth, NaN when also without entries;
    official: NaN without ground truth."""
    K = len(p.num_gt)
    out = np.full(K, np.nan)
    order = np.lexsort((p.rank, p.cat))
    cats = p.cat[order]
    lo = np.searchsorted(cats, np.arange(K), "left")
    hi = np.searchsorted(cats, np.arange(K), "right")
    for k in np.flatnonzero((p.num_gt > 0) | (hi > lo)):
        if p.num_gt[k] <= 0:
            out[k] = 0.0 if tide else np.nan
            continue
        out[k] = 100 * _ap101(p.tp[order[lo[k]:hi[k]]], int(p.num_gt[k]), tide=tide)
    return out


def _mean(x: np.ndarray, *, tide: bool) -> float:
    x = x[~np.isnan(x)]
    if not len(x):
        return float("nan")
    return sum(x.tolist()) / len(x) if tide else float(np.mean(x))


def _pooled(p: _Points, cats: np.ndarray) -> float:
    """AP (points) of the entries of categories ``cats`` ranked together, ground truth summed."""
    ngt = int(p.num_gt[cats].sum())
    if ngt <= 0:
        return float("nan")
    sel = np.isin(p.cat, cats)
    return 100 * _ap101(p.tp[_ranked(p, sel)], ngt, tide=False)


def _fixes(lab: ErrorLabels, gt: GroundTruth, dets: Detections) -> dict[str, _Points]:
    """The AP data before any fix ("base") and after each fix."""
    K = gt.num_categories
    d = lab.det
    counted = lab.state != IGNORED
    base_cat = dets.category[d]
    ngt = np.bincount(gt.category[lab.gt_counted], minlength=K)
    rank = np.empty(len(d), np.int64)  # the one ranking: descending score, image, category, file position
    rank[np.lexsort((d, base_cat, dets.image[d], -dets.score[d]))] = np.arange(len(d))
    true = lab.state == TRUE_POSITIVE

    def points(keep: np.ndarray, cat=base_cat, tp=true, rk=rank, num_gt=ngt) -> _Points:
        return _Points(cat[keep], tp[keep], rk[keep], num_gt)

    out = {"base": points(counted)}
    for name, t in (("Cls", CLS), ("Loc", LOC)):
        fixed = lab.fixes & (lab.error == t)
        cat = np.where(fixed, gt.category[np.maximum(lab.target, 0)], base_cat)
        keep = np.where(lab.error == t, lab.fixes, counted)
        out[name] = points(keep, cat=cat, tp=true | fixed)
    for name, t in (("Both", BOTH), ("Dupe", DUPE), ("Bkg", BKG)):
        out[name] = points(counted & (lab.error != t))
    out["Miss"] = points(counted, num_gt=ngt - np.bincount(gt.category[lab.gt_missed], minlength=K))
    perfect = np.empty(len(d), np.int64)  # true positives score 1, false positives 0: TPs first, ties as before
    perfect[np.lexsort((rank, ~true))] = np.arange(len(d))
    out["FalsePos"] = points(counted, rk=perfect)
    unmatched = lab.gt_counted & ~lab.gt_used
    out["FalseNeg"] = points(counted, num_gt=ngt - np.bincount(gt.category[unmatched], minlength=K))
    return out


def _deltas(ap: dict[str, float]) -> dict[str, float]:
    base = ap["base"]
    out = {"AP": base}
    for t in ERROR_TYPES:
        out[t] = max(ap[t] - base, 0.0) if ap[t] == ap[t] and base == base else float("nan")
    for t in SPECIAL_ERROR_TYPES:
        out[t] = ap[t] - base
    return out


@dataclass
class ErrorDecomposition:
    """Result of :func:`decompose_errors`.

    ``results[variant]`` — ``AP`` (AP at ``pos_iou`` before any fix) and the ΔAP of each fix, keys
    ``Cls Loc Both Dupe Bkg Miss FalsePos FalseNeg``, all in AP points (0–100); ``counts`` the number
    of errors of each type; ``groups`` (LVIS, fixed and pool) the same figures per frequency r/c/f.
    ``labels[variant]`` the :class:`~.errors.ErrorLabels` behind them ("pool" shares "fixed"'s).
    """

    results: dict[str, dict[str, Any]]
    settings: dict[str, Any]
    labels: dict[str, ErrorLabels] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: dict(v) for k, v in self.results.items()}
        out["settings"] = dict(self.settings)
        return out


def _tide_selection(gt: GroundTruth, dets: Detections, max_dets: int) -> tuple[np.ndarray, np.ndarray]:
    keep = rank_within(dets.image, dets.score) < max_dets
    if gt.format != "lvis":
        return keep, np.zeros(len(dets), bool)
    K = gt.num_categories
    key = dets.image * K + dets.category
    is_pos, is_neg = member(key, sorted_unique(gt.image * K + gt.category), gt.negative, size=gt.num_images * K)
    ne = member(key, gt.not_exhaustive, size=gt.num_images * K)[0] if len(gt.not_exhaustive) else np.zeros(len(dets), bool)
    return keep, ~(is_pos | is_neg) | ne


def _fixed_selection(gt: GroundTruth, dets: Detections, k: int) -> tuple[np.ndarray, np.ndarray]:
    keep = (rank_within(dets.category, dets.score) < k) & federated_selection(gt, dets)
    if gt.format != "lvis":  # pycocotools' maxDets 100 per image and category, as the evaluator
        keep &= rank_within(dets.image * gt.num_categories + dets.category, dets.score) < COCO_MAX_DETS[-1]
    if gt.format != "lvis" or not len(gt.not_exhaustive):
        return keep, np.zeros(len(dets), bool)
    K = gt.num_categories
    return keep, member(dets.image * K + dets.category, gt.not_exhaustive, size=gt.num_images * K)[0]


def decompose_errors(
    gt: GroundTruth,
    dets: Detections,
    *,
    variants: Sequence[str] | None = None,
    pos_iou: float = 0.5,
    bg_iou: float = 0.1,
    max_dets_per_image: int | None = None,
    dets_per_class: int = 10_000,
    iou_type: str = "bbox",
    options: EvaluationOptions | None = None,
) -> ErrorDecomposition:
    """TIDE's error decomposition of ``dets`` for each of ``variants`` ("tide", "fixed", "pool";
    default: "tide").

    ``max_dets_per_image`` is the "tide" variant's per-image cut (default: tidecv's, 100 for COCO and
    300 for LVIS ground truth); ``dets_per_class`` the k of AP^Fixed / AP^Pool; ``iou_type`` "bbox" or
    "segm" (mask IoU, TIDE's mask mode; detection areas, for LVIS's zero-area rule, as lvis-api: the
    box's when the result has one).

    ``options``: instead of ``variants``, the limits and ``iou_type``, the evaluation's settings built
    (and checked) once (an :class:`~vistabench.metrics.detection_options.EvaluationOptions`, as
    :func:`~.evaluate.evaluate_detections` takes it): the variants are "tide" plus its "fixed" /
    "pool", and its values are used as they are.
    """
    if options is not None:
        variants, max_dets_per_image, dets_per_class, iou_type = _from_options(
            options, variants=variants, max_dets_per_image=max_dets_per_image, dets_per_class=dets_per_class,
            iou_type=iou_type)
    else:
        variants = _checked_variants(variants)
        max_dets_per_image = None if max_dets_per_image is None else check_value(
            max_dets_per_image, "max_dets_per_image", type=int, low=0, low_open=True)
        dets_per_class = check_value(dets_per_class, "dets_per_class", type=int, low=0, low_open=True)
        check_value(iou_type, "iou_type", choices=("bbox", "segm"))
    for name, x in (("pos_iou", pos_iou), ("bg_iou", bg_iou)):
        if not (isinstance(x, (int, float)) and 0 <= x <= 1):
            raise InputError(f"{name}: expected a number in [0, 1], got {x!r}")
    if bg_iou > pos_iou:
        raise InputError(f"bg_iou: expected at most `pos_iou` ({pos_iou}), got {bg_iou}")
    lvis = gt.format == "lvis"
    if max_dets_per_image is None:
        max_dets_per_image = LVIS_MAX_DETS if lvis else TIDE_MAX_DETS
    settings = {"format": gt.format, "variants": variants, "iou_type": iou_type, "pos_iou": pos_iou, "bg_iou": bg_iou,
                "max_dets_per_image": max_dets_per_image, "dets_per_class": dets_per_class,
                "scale": "AP points (0-100)"}
    res = ErrorDecomposition(results={}, settings=settings)
    official_gt = lvis_area_filter(gt)
    for v in variants:
        if v == "tide":
            keep, ign = _tide_selection(gt, dets, max_dets_per_image)
            g, rules = gt, "tide"
        else:
            keep, ign = _fixed_selection(official_gt, dets, dets_per_class)
            g, rules = official_gt, "official"
        lab = res.labels.get("fixed") if v == "pool" else None
        if lab is None:
            lab = classify_errors(g, dets, keep, ignore_unmatched=ign, pos_iou=pos_iou, bg_iou=bg_iou, rules=rules,
                                  iou_type=iou_type)
        res.labels["fixed" if v == "pool" else v] = lab
        fixes = _fixes(lab, g, dets)
        out: dict[str, Any] = {}
        if v == "pool":
            allc = np.arange(g.num_categories)
            out.update(_deltas({name: _pooled(p, allc) for name, p in fixes.items()}))
        else:
            per = {name: _per_category(p, tide=v == "tide") for name, p in fixes.items()}
            out.update(_deltas({name: _mean(a, tide=v == "tide") for name, a in per.items()}))
        out["counts"] = lab.counts()
        if lvis and v != "tide":
            groups = {}
            for f in FREQUENCIES:
                cats = np.flatnonzero(g.frequency == f)
                if v == "pool":
                    groups[f] = _deltas({name: _pooled(p, cats) for name, p in fixes.items()})
                else:
                    groups[f] = _deltas({name: _mean(a[cats], tide=False) for name, a in per.items()})
            out["groups"] = groups
        res.results[v] = out
    return res


def _checked_variants(variants: Sequence[str] | None) -> list[str]:
    variants = ["tide"] if variants is None else list(dict.fromkeys((variants,) if isinstance(variants, str)
                                                                    else variants))
    if not variants:
        raise InputError("variants: expected at least one of ['tide', 'fixed', 'pool'], got none")
    for v in variants:
        check_value(v, "variants", choices=ERROR_VARIANTS)
    return variants


def _from_options(options: EvaluationOptions, **keywords: Any) -> tuple[list[str], int | None, int, str]:
    """The variants, limits and IoU type of :func:`decompose_errors` from the built ``options``."""
    options_alone(options, keywords, {"variants": None, "max_dets_per_image": None, "dets_per_class": 10_000,
                                      "iou_type": "bbox"})
    if options.iou_type not in ("bbox", "segm"):
        raise InputError(f"iou_type: the error decomposition takes bbox or segm, got {options.iou_type}")
    variants = ["tide"] + [v for v in options.variants if v in ("fixed", "pool")]
    return variants, options.max_dets_per_image, options.dets_per_class, options.iou_type
