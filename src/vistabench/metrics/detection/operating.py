"""Operating points of a detector: precision, recall and F1 at a score threshold and the threshold of
best F1, from the raw (not interpolated) precision–recall curve; and a confusion matrix of classes.

**Operating points.** The detections and their outcomes are the evaluator's at one IoU threshold
(:func:`~.per_class.variant_match`: AP^Old's or AP^Fixed's selection, the federated rules, area
"all"; ignored detections — matched to crowd / ignored ground truth, unmatched of a not-exhaustive
category — are left out). Keeping the detections with score >= s gives TP(s) and FP(s); precision
TP/(TP+FP) (NaN with no detection kept), recall TP/#GT (NaN without ground truth), F1 =
2PR/(P+R) (0 when P = R = 0). The best F1 is searched over every s equal to a detection's score (a
cut never splits tied scores); on equal F1 the higher threshold wins; a category with ground truth
and no detection has best F1 0 at no threshold (NaN). "overall" pools every
category (micro average: TP, FP and #GT summed).

**Confusion matrix.** In each image the detections with score >= s are matched to the ground truth
*regardless of class*: by descending score (ties in file order), each takes the unmatched ground
truth with the highest IoU >= ``iou`` (ties: the first in file order). Row = ground-truth class,
column = detected class; the last row ("background") counts unmatched detections, the last column
("missed") unmatched ground truth. A detection whose best partner is a crowd / ignored ground truth
is not counted; on LVIS ground truth an unmatched detection of a category that is not verified absent
(neither annotated nor negative in the image, or not exhaustively annotated) is not counted either.
Boxes only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import InputError
from .data import Detections, GroundTruth
from .match import MatchCode
from .params import IOU_THRESHOLDS
from .per_class import variant_match
from .match import box_iou_pairs
from .sort import member, sorted_unique


def _iou_index(iou: float) -> int:
    hit = np.flatnonzero(np.isclose(IOU_THRESHOLDS, iou, rtol=0, atol=1e-9))
    if not len(hit):
        raise InputError(f"iou: expected one of the evaluator's thresholds 0.5, 0.55, ..., 0.95, got {iou!r}")
    return int(hit[0])


@dataclass
class RankedOutcomes:
    """The counted detections of a variant at one IoU threshold: category, score, true positive;
    and the ground truths per category (``num_gt``, (K,))."""

    category: np.ndarray
    score: np.ndarray
    tp: np.ndarray
    num_gt: np.ndarray


def ranked_outcomes(gt: GroundTruth, dets: Detections, *, iou: float = 0.5, variant: str = "old",
                    max_dets_per_image: int | None = None, dets_per_class: int = 10_000) -> RankedOutcomes:
    """True / false positives of the detections AP counts, at IoU ``iou`` (one of 0.5:0.05:0.95)."""
    t = _iou_index(iou)
    ms, mask = variant_match(gt, dets, variant=variant, max_dets_per_image=max_dets_per_image,
                             dets_per_class=dets_per_class)
    code = ms.match.codes(0, t)
    counted = mask & (code != MatchCode.MATCHED_IGNORED)
    counted &= (code == MatchCode.TRUE_POSITIVE) | ~(ms.match.det_out[0] | ms.match.det_nel)
    d = ms.det[counted]
    num_gt = np.bincount(ms.gt.category[~ms.match.gt_ignore[0]], minlength=gt.num_categories)
    return RankedOutcomes(dets.category[d], dets.score[d], code[counted] == MatchCode.TRUE_POSITIVE, num_gt)


def _curve(score: np.ndarray, tp: np.ndarray, num_gt: int, threshold: float | None) -> dict[str, float]:
    """At-threshold and best-F1 figures of one raw PR curve."""
    o = np.lexsort((np.arange(len(score)), -score))
    s, t = score[o], tp[o]
    ctp = np.cumsum(t)
    cfp = np.cumsum(~t)
    last = np.r_[s[1:] != s[:-1], True] if len(s) else np.zeros(0, bool)  # end of each tie group
    prec = ctp / np.maximum(ctp + cfp, 1)
    rec = ctp / num_gt if num_gt > 0 else np.full(len(s), np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = np.where(prec + rec > 0, 2 * prec * rec / (prec + rec), 0.0)
    out: dict[str, float] = {"num_gt": int(num_gt), "num_detections": int(len(s))}
    if threshold is not None:
        n = int(np.count_nonzero(s >= threshold))  # s is descending: the kept ones are a prefix
        nan = float("nan")
        out.update(threshold=float(threshold), precision=float(prec[n - 1]) if n else nan,
                   recall=nan if num_gt <= 0 else (float(rec[n - 1]) if n else 0.0),
                   f1=nan if num_gt <= 0 else (float(f1[n - 1]) if n else 0.0))
    cand = np.flatnonzero(last)
    if num_gt > 0 and len(cand):
        b = int(cand[np.argmax(f1[cand])])  # first maximum in descending score: the highest threshold
        out.update(best_f1=float(f1[b]), best_threshold=float(s[b]), best_precision=float(prec[b]),
                   best_recall=float(rec[b]))
    else:  # no ground truth: undefined; ground truth but no detection: F1 0 at any threshold
        nan = float("nan")
        out.update(best_f1=0.0 if num_gt > 0 else nan, best_threshold=nan, best_precision=nan,
                   best_recall=0.0 if num_gt > 0 else nan)
    return out


def operating_points(outcomes: RankedOutcomes, *, score_threshold: float | None = None) -> dict[str, Any]:
    """Per category (index into the ground truth's categories) and ``overall``: ``num_gt``,
    ``num_detections``, with ``score_threshold`` ``precision``/``recall``/``f1`` at it, and always
    ``best_f1``, ``best_threshold``, ``best_precision``, ``best_recall`` (NaN without ground truth)."""
    if score_threshold is not None and not np.isfinite(score_threshold):
        raise InputError(f"score_threshold: expected a finite number, got {score_threshold!r}")
    K = len(outcomes.num_gt)
    order = np.argsort(outcomes.category, kind="stable")
    cats = outcomes.category[order]
    lo, hi = np.searchsorted(cats, np.arange(K), "left"), np.searchsorted(cats, np.arange(K), "right")
    per = []
    for k in range(K):
        sel = order[lo[k]:hi[k]]
        per.append(_curve(outcomes.score[sel], outcomes.tp[sel], int(outcomes.num_gt[k]), score_threshold))
    overall = _curve(outcomes.score, outcomes.tp, int(outcomes.num_gt.sum()), score_threshold)
    return {"per_category": per, "overall": overall}


def confusion_matrix(gt: GroundTruth, dets: Detections, *, iou: float = 0.5, score_threshold: float = 0.5) -> np.ndarray:
    """(K + 1, K + 1) int64 counts: rows ground-truth class then "background", columns detected class
    then "missed" (see the module docstring)."""
    if not (isinstance(iou, (int, float)) and 0 < iou <= 1):
        raise InputError(f"iou: expected a number in (0, 1], got {iou!r}")
    if not np.isfinite(score_threshold):
        raise InputError(f"score_threshold: expected a finite number, got {score_threshold!r}")
    K = gt.num_categories
    M = np.zeros((K + 1, K + 1), np.int64)
    idx = np.flatnonzero(dets.score >= score_threshold)
    idx = idx[np.lexsort((idx, -dets.score[idx], dets.image[idx]))]
    unknown = np.zeros(len(dets), bool)
    if gt.format == "lvis":
        key = dets.image * K + dets.category
        is_pos, is_neg = member(key, sorted_unique(gt.image * K + gt.category), gt.negative, size=gt.num_images * K)
        unknown = ~(is_pos | is_neg)
        if len(gt.not_exhaustive):
            unknown |= member(key, gt.not_exhaustive, size=gt.num_images * K)[0]
    g_order = np.argsort(gt.image, kind="stable")
    g_img = gt.image[g_order]
    d_img = dets.image[idx]
    starts = np.flatnonzero(np.r_[True, d_img[1:] != d_img[:-1]]) if len(idx) else np.zeros(0, np.int64)
    seen = np.zeros(len(gt), bool)
    for s, e in zip(starts, np.r_[starts[1:], len(idx)]):
        im = int(d_img[s])
        gall = g_order[np.searchsorted(g_img, im, "left"):np.searchsorted(g_img, im, "right")]
        ds = idx[s:e]
        D, G = len(ds), len(gall)
        iou_m = np.zeros((D, G))
        if G:
            iou_m = box_iou_pairs(np.repeat(dets.bbox[ds], G, axis=0), np.tile(gt.bbox[gall], (D, 1)),
                                  np.tile(gt.crowd[gall], D)).reshape(D, G)
        ign = gt.ignore[gall]
        free = ~ign
        for k in range(D):
            row = np.where(free, iou_m[k], -1.0)
            j = int(np.argmax(row)) if G else -1
            if G and row[j] >= iou:
                free[j] = False
                M[gt.category[gall[j]], dets.category[ds[k]]] += 1
            elif G and np.any(iou_m[k][ign] >= iou):
                continue  # inside a crowd / ignored region
            elif not unknown[ds[k]]:
                M[K, dets.category[ds[k]]] += 1
        seen[gall] = True
        np.add.at(M[:, K], gt.category[gall[~ign & free]], 1)
    rest = ~seen & ~gt.ignore  # images without a kept detection: all their ground truth is missed
    np.add.at(M[:, K], gt.category[rest], 1)
    return M
