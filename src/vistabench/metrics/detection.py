"""Large-vocabulary detection AP: AP^Old, AP^Fixed and AP^Pool in one pass (Dave et al., 2021).

* **AP^Old** — the official number: each image's top ``max_dets_per_image`` detections (LVIS:
  300), then lvis-api's federated per-category AP (LVIS ground truth) or pycocotools' AP (COCO
  ground truth: ``iscrowd``, maxDets 1/10/100 per image and category).
* **AP^Fixed** — no per-image limit; each category's top ``dets_per_class`` (10,000) detections
  over the whole set; then the same per-category AP. Invariant to per-category monotone score maps.
* **AP^Pool** — the AP^Fixed detections and matches, pooled over categories into one ranking with
  the ground-truth count summed over categories (area "all"); ``APr/APc/APf`` pool one frequency
  group. Detections of a category without ground truth in the set that is listed negative for
  the image count as false positives, as in the authors' ``LVISPooledEval``.

Per category ``k``, area ``a`` and IoU threshold ``t`` (lvis-api ``accumulate``): with detections
sorted by score, ``tp_i``/``fp_i`` cumulative counts and ``n_k`` non-ignored ground truths,
``rc_i = tp_i / n_k``, ``pr_i = tp_i / (tp_i + fp_i + eps)``, made monotone from the right;
``P(r) = pr_j`` at the first ``j`` with ``rc_j >= r`` (0 if none), ``r in {0, 0.01, ..., 1}``;
AP = mean of P over thresholds, recall points and the categories with ``n_k > 0``.

Every result is bit-for-bit the official tool's on the same detections (tests compare to 1e-9).
The matching is computed once (:mod:`.detection_match`) and reused by all three APs.

>>> import numpy as np
>>> from vistabench.metrics.detection_data import GroundTruth, Detections
>>> gt = GroundTruth.from_arrays(format="coco", image_ids=[1], category_ids=[1], image_id=[1],
...                              category_id=[1], bbox=[[0, 0, 10, 10]])
>>> dt = Detections.from_ids(gt, image_id=[1, 1], category_id=[1, 1],
...                          bbox=[[0, 0, 10, 10], [50, 50, 5, 5]], score=[0.9, 0.8])
>>> round(evaluate_detections(gt, dt, variants=("old",)).results["old"]["AP"], 12)  # 1/(1+eps), as pycocotools
1.0
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Sequence

import numpy as np

from .._validation import check_choice, check_positive
from ..errors import InputError
from .detection_data import FREQUENCIES, Detections, GroundTruth
from .detection_match import (AREA_LABELS, AREA_RANGES, IOU_THRESHOLDS, RECALL_THRESHOLDS, Matching,
                              match_detections)

Variant = Literal["old", "fixed", "pool"]
VARIANTS: tuple[str, ...] = ("old", "fixed", "pool")
IouType = Literal["bbox", "segm"]
COCO_MAX_DETS = (1, 10, 100)
LVIS_MAX_DETS = 300
POOL_KEYS = ("AP", "AP50", "AP75", "APr", "APc", "APf")


@dataclass
class DetectionEvaluation:
    """Named results of :func:`evaluate_detections`.

    ``results[variant]`` is a dict of lvis-api's keys (fractions; NaN where undefined);
    ``precision[variant]`` holds the interpolated precision, shape (T, R, K, A) for old/fixed
    (NaN where a category has no ground truth — lvis-api writes -1 there) and (T, R, P) for pool
    (P pools all/r/c/f); ``settings`` records what produced them.
    """

    results: dict[str, dict[str, float]]
    settings: dict[str, Any]
    precision: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    num_detections: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: dict(v) for k, v in self.results.items()}
        out["settings"] = dict(self.settings, num_detections=dict(self.num_detections))
        return out


# ----------------------------------------------------------------------------------- selection

def rank_within(key: np.ndarray, score: np.ndarray) -> np.ndarray:
    """Rank of each entry within its ``key`` group by descending score, ties in input order."""
    n = len(key)
    order = np.lexsort((np.arange(n), -score, key))
    ks = key[order]
    starts = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]]) if n else np.zeros(0, np.int64)
    rank_sorted = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
    rank = np.empty(n, np.int64)
    rank[order] = rank_sorted
    return rank


def top_per_image(dets: Detections, *, k: int) -> np.ndarray:
    """Indices (file order) of each image's top ``k`` detections by score (ties: earlier first).

    This is ``LVISResults.limit_dets_per_image`` (a stable descending sort, then a cut).
    """
    k = check_positive(k, "max_dets_per_image", integer=True)
    return np.flatnonzero(rank_within(dets.image, dets.score) < k)


def top_per_class(dets: Detections, *, k: int) -> np.ndarray:
    """Indices (file order) of each category's top ``k`` detections over the whole set.

    As the authors' ``evaluate_ap_fixed.py`` (stable descending sort per category, then a cut).
    """
    k = check_positive(k, "dets_per_class", integer=True)
    return np.flatnonzero(rank_within(dets.category, dets.score) < k)


# -------------------------------------------------------------------------------- accumulation

def recall_counts(num_gt: np.ndarray, thr: np.ndarray = RECALL_THRESHOLDS) -> np.ndarray:
    """(K, R) smallest integer m with float(m / n_k) >= thr_r (exactly as numpy divides)."""
    ng = np.where(num_gt > 0, num_gt, 1).astype(np.float64)[:, None]
    m = np.ceil(thr[None, :] * ng).astype(np.int64)
    for _ in range(3):
        m = m + (m / ng < thr[None, :])
    for _ in range(3):
        m = m - ((m > 0) & ((m - 1) / ng >= thr[None, :]))
    return m


def pr_curves(
    seg_start: np.ndarray,
    seg_end: np.ndarray,
    cand_pos: np.ndarray,
    code: np.ndarray,
    ok_cum: np.ndarray,
    num_gt: np.ndarray,
    rec_counts: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Interpolated precision at the recall points for K ranked lists at once (sparse form).

    A ranked list of n detections is split into K contiguous segments ``[seg_start, seg_end)``.
    Only the ``cand_pos`` entries (sorted) can be matched: ``code`` 1 = true positive, 2 = matched to
    an ignored ground truth; every other entry is unmatched and is a false positive where it is
    "ok" (not ignored). ``ok_cum`` is (n+1,) with ``ok_cum[i]`` = number of ok entries before i.
    ``rec_counts`` (K, R) from :func:`recall_counts`.

    Precision at a true positive i is ``tp_i / (fp_i + tp_i + eps)`` with segment-local cumulative
    counts, exactly as lvis-api; the right-to-left maximum only changes at true positives, so only
    they are evaluated: O(candidates + K R) per call instead of O(n).

    Returns
    -------
    precision (K, R), -1 where ``num_gt == 0``; recall (K,), -1 likewise; tp_pos, tp_seg: positions
    and segments of the true positives.
    """
    K, R = rec_counts.shape
    matched = code != 0
    tp = code == 1
    ok_at = (ok_cum[cand_pos + 1] - ok_cum[cand_pos]).astype(bool)
    mo = cand_pos[matched & ok_at]  # matched entries that ok_cum counted
    tp_pos = cand_pos[tp]
    tp_seg = np.searchsorted(seg_end, tp_pos, "right")
    ntp = np.bincount(tp_seg, minlength=K)
    first = np.zeros(K, np.int64)
    np.cumsum(ntp[:-1], out=first[1:])
    tpl = np.arange(len(tp_pos)) - first[tp_seg] + 1
    fp_before = ok_cum[seg_start] - np.searchsorted(mo, seg_start, "left")
    fpl = ok_cum[tp_pos + 1] - np.searchsorted(mo, tp_pos, "right") - fp_before[tp_seg]
    tpf = tpl.astype(np.float64)
    pr = tpf / (fpl.astype(np.float64) + tpf + np.spacing(1))
    end = first + ntp
    q = np.minimum(first[:, None] + np.maximum(rec_counts, 1) - 1, end[:, None])
    bounds = np.concatenate([q, end[:, None]], axis=1)
    bm = np.maximum.reduceat(np.concatenate([pr, [0.0]]), bounds.ravel()).reshape(K, R + 1)[:, :R]
    bm[bounds[:, :R] >= bounds[:, 1:]] = 0.0
    prec = np.maximum.accumulate(bm[:, ::-1], axis=1)[:, ::-1]
    ok = num_gt > 0
    prec[~ok] = -1.0
    rec = np.where(ok, ntp / np.where(ok, num_gt, 1), -1.0)
    return prec, rec, tp_pos, tp_seg


def _mean_valid(s: np.ndarray) -> float:
    v = s[s > -1]
    return float(np.mean(v)) if len(v) else float("nan")


# ----------------------------------------------------------------------------------- evaluation

def evaluate_detections(
    gt: GroundTruth,
    dets: Detections,
    *,
    iou_type: IouType = "bbox",
    variants: Sequence[Variant] = VARIANTS,
    max_dets_per_image: int | None = None,
    dets_per_class: int = 10_000,
) -> DetectionEvaluation:
    """AP^Old, AP^Fixed and AP^Pool of ``dets`` against ``gt``.

    Parameters
    ----------
    gt : GroundTruth (LVIS or COCO semantics by ``gt.format``).
    dets : Detections, file order (ties in score are broken by it, as the official tools do).
    iou_type : "bbox" or "segm" (masks need ``segmentation`` in both; pycocotools computes mask IoU).
    variants : which of "old", "fixed", "pool" to compute.
    max_dets_per_image : per-image cut for AP^Old; default 300 for LVIS, none for COCO (pycocotools
        applies its maxDets 1/10/100 per image *and category*).
    dets_per_class : k of AP^Fixed / AP^Pool (top k per category over the whole set).

    Returns
    -------
    DetectionEvaluation; ``results["old"|"fixed"]`` have keys AP, AP50, AP75, APs, APm, APl, APr,
    APc, APf and AR@N, ARs@N, ARm@N, ARl@N (LVIS: N = the per-image limit, "all" for fixed; COCO:
    AR@1, AR@10, AR@100, ARs@100, ...); ``results["pool"]`` has AP, AP50, AP75, APr, APc, APf.
    """
    check_choice(iou_type, "iou_type", ("bbox", "segm"))
    variants = list(dict.fromkeys(variants))
    for v in variants:
        check_choice(v, "variants", VARIANTS)
    if not variants:
        raise InputError("variants: expected at least one of ['old', 'fixed', 'pool'], got none")
    dets_per_class = check_positive(dets_per_class, "dets_per_class", integer=True)
    lvis = gt.format == "lvis"
    if max_dets_per_image is None and lvis:
        max_dets_per_image = LVIS_MAX_DETS
    if max_dets_per_image is not None:
        max_dets_per_image = check_positive(max_dets_per_image, "max_dets_per_image", integer=True)
    n = len(dets)
    K = gt.num_categories
    gt = _lvis_area_filter(gt)
    keep: dict[str, np.ndarray] = {}
    if "old" in variants:
        m = np.zeros(n, bool)
        m[top_per_image(dets, k=max_dets_per_image) if max_dets_per_image is not None else slice(None)] = True
        keep["old"] = m
    if "fixed" in variants or "pool" in variants:
        m = np.zeros(n, bool)
        m[top_per_class(dets, k=dets_per_class)] = True
        keep["fixed"] = m
    union = np.zeros(n, bool)
    for m in keep.values():
        union |= m
    # federated evaluation (LVIS): only categories with ground truth or listed negative in the image
    gkey = dets.image * K + dets.category
    if lvis:
        pos_keys = np.unique(gt.image * K + gt.category)
        evaluated = np.isin(gkey, pos_keys) | np.isin(gkey, gt.negative)
        union &= evaluated & (dets.area > 0) & (dets.area < np.inf)
    cand = np.flatnonzero(union)
    # canonical order: category, descending score, image, file position
    order = np.lexsort((cand, dets.image[cand], -dets.score[cand], dets.category[cand]))
    det = cand[order]
    match = match_detections(gt, dets, det, iou_type=iou_type)
    if not lvis:  # pycocotools keeps the top maxDets[-1] per image and category
        in_cap = match.group_rank < COCO_MAX_DETS[-1]
    else:
        in_cap = np.ones(len(det), bool)

    settings = {"format": gt.format, "iou_type": iou_type, "variants": variants,
                "max_dets_per_image": max_dets_per_image, "dets_per_class": dets_per_class,
                "num_images": gt.num_images, "num_categories": K, "num_ground_truth": len(gt),
                "num_results": n}
    ev = DetectionEvaluation(results={}, settings=settings)
    for v in variants:
        base = "fixed" if v == "pool" else v
        mask = keep[base][det] & in_cap
        ev.num_detections[v] = int(mask.sum())
        if v == "pool":
            ev.results[v], ev.precision[v] = _pool(gt, dets, det, match, mask)
        else:
            n_label = ("all" if v == "fixed" else (max_dets_per_image if lvis else None))
            ev.results[v], ev.precision[v] = _per_category(gt, dets, det, match, mask, n_label)
    for v, p in ev.precision.items():  # the -1 "no ground truth" marks stay internal: NaN outside
        ev.precision[v] = np.where(p < 0, np.nan, p)
    return ev


def _lvis_area_filter(gt: GroundTruth) -> GroundTruth:
    """lvis-api loads annotations with ``get_ann_ids(..., cat_ids)``, which keeps only
    0 < area < inf: zero-area ground truth is dropped (detections likewise, in the caller)."""
    if gt.format != "lvis":
        return gt
    ok = (gt.area > 0) & (gt.area < np.inf)
    return gt if ok.all() else gt.subset(ok)


class _Ranked:
    """A variant's detections as one ranked list (canonical or pooled order) for pr_curves."""

    def __init__(self, match: Matching, mask: np.ndarray, order: np.ndarray | None, seg: np.ndarray, K: int):
        n_all = len(match.det)
        pos = np.cumsum(mask) - 1  # position among the variant's detections (canonical order)
        if order is not None:  # re-rank: order lists canonical-masked positions in ranked order
            inv = np.full(int(mask.sum()), -1, np.int64)
            inv[order] = np.arange(len(order))
            pos = np.where(mask, inv[np.clip(pos, 0, None)] if len(inv) else -1, -1)
        else:
            pos = np.where(mask, pos, -1)
        self.pos_of = pos  # (n_all,) ranked position of each matched-order detection, -1 if absent
        cp = pos[match.cand] if len(match.cand) else np.zeros(0, np.int64)
        keep = np.flatnonzero(cp >= 0)
        o = np.argsort(cp[keep], kind="stable")
        self.cand_pos = cp[keep][o]
        self.cand_sel = keep[o]
        self.n = int((pos >= 0).sum())
        self.seg_start = np.searchsorted(seg, np.arange(K), "left")
        self.seg_end = np.searchsorted(seg, np.arange(K), "right")
        self.src = np.flatnonzero(pos >= 0)[np.argsort(pos[pos >= 0], kind="stable")]  # ranked -> matched order
        self.n_all = n_all

    def ok_cum(self, match: Matching, a: int) -> np.ndarray:
        ok = ~(match.det_out[a] | match.det_nel)[self.src]
        out = np.zeros(self.n + 1, np.int64)
        np.cumsum(ok, out=out[1:])
        return out


def _per_category(gt, dets, det, match, mask, n_label):
    T, R, A, K = len(IOU_THRESHOLDS), len(RECALL_THRESHOLDS), len(AREA_RANGES), gt.num_categories
    lvis = gt.format == "lvis"
    seg = dets.category[det[mask]]
    rk = _Ranked(match, mask, None, seg, K)
    num_gt = np.stack([np.bincount(gt.category[~match.gt_ignore[a]], minlength=K) for a in range(A)], 1)
    precision = -np.ones((T, R, K, A))
    if lvis:
        recall = -np.ones((T, K, A))
    else:
        recall = -np.ones((T, K, A, len(COCO_MAX_DETS)))
        grank = match.group_rank[rk.src]
    for a in range(A):
        okc = rk.ok_cum(match, a)
        rc = recall_counts(num_gt[:, a])
        for t in range(T):
            prec, rec, tp_pos, tp_seg = pr_curves(rk.seg_start, rk.seg_end, rk.cand_pos,
                                                  match.code[a, t, rk.cand_sel], okc, num_gt[:, a], rc)
            precision[t, :, :, a] = prec.T
            if lvis:
                recall[t, :, a] = rec
            else:
                recall[t, :, a, -1] = rec
                ok = num_gt[:, a] > 0
                for mi, md in enumerate(COCO_MAX_DETS[:-1]):
                    cnt = np.bincount(tp_seg[grank[tp_pos] < md], minlength=K)
                    recall[t, :, a, mi] = np.where(ok, cnt / np.where(ok, num_gt[:, a], 1), -1.0)
    res: dict[str, float] = {}

    def ap(iou_thr=None, area="all", freq=None):
        aidx = [i for i, l in enumerate(AREA_LABELS) if l == area]
        s = precision
        if iou_thr is not None:
            s = s[np.where(iou_thr == IOU_THRESHOLDS)[0]]
        if freq is not None:
            groups = [i for i in range(K) if gt.frequency[i] == freq]
            s = s[:, :, groups, aidx]
        else:
            s = s[:, :, :, aidx]
        return _mean_valid(s)

    def ar(area="all", mi=None):
        aidx = [i for i, l in enumerate(AREA_LABELS) if l == area]
        s = recall[:, :, aidx] if mi is None else recall[:, :, aidx, [mi]]
        return _mean_valid(s)

    res["AP"] = ap()
    res["AP50"] = ap(iou_thr=0.50)
    res["AP75"] = ap(iou_thr=0.75)
    res["APs"] = ap(area="small")
    res["APm"] = ap(area="medium")
    res["APl"] = ap(area="large")
    for f in FREQUENCIES:
        res[f"AP{f}"] = ap(freq=f) if lvis else float("nan")
    if lvis:
        res[f"AR@{n_label}"] = ar()
        for area in ("small", "medium", "large"):
            res[f"AR{area[0]}@{n_label}"] = ar(area)
    else:
        for mi, md in enumerate(COCO_MAX_DETS):
            res[f"AR@{md}"] = ar(mi=mi)
        for area in ("small", "medium", "large"):
            res[f"AR{area[0]}@{COCO_MAX_DETS[-1]}"] = ar(area, mi=len(COCO_MAX_DETS) - 1)
    return res, precision


def _pool(gt, dets, det, match, mask):
    """Pooled AP over all categories and over each frequency group (area "all")."""
    T, R = len(IOU_THRESHOLDS), len(RECALL_THRESHOLDS)
    sel = det[mask]
    pools = [("all", None)] + [(f, f) for f in FREQUENCIES]
    num_gt_cat = np.bincount(gt.category[~match.gt_ignore[0]], minlength=gt.num_categories)
    # ranking as LVISPooledEval: descending score; ties by image, then category, then file order
    order = np.lexsort((sel, dets.category[sel], dets.image[sel], -dets.score[sel]))
    precision = -np.ones((T, R, len(pools)))
    for p, (name, freq) in enumerate(pools):
        if freq is None:
            in_pool = np.ones(gt.num_categories, bool)
        elif gt.frequency is None:
            continue
        else:
            in_pool = gt.frequency == freq
        keep_m = in_pool[dets.category[sel]]
        o = order[keep_m[order]]
        rk = _Ranked(match, _sub_mask(mask, keep_m), _reindex(o, keep_m), np.zeros(len(o), np.int64), 1)
        ngt = np.array([int(num_gt_cat[in_pool].sum())])
        rc = recall_counts(ngt)
        okc = rk.ok_cum(match, 0)
        for t in range(T):
            prec, _, _, _ = pr_curves(rk.seg_start, rk.seg_end, rk.cand_pos, match.code[0, t, rk.cand_sel],
                                      okc, ngt, rc)
            precision[t, :, p] = prec[0]
    res = {"AP": _mean_valid(precision[:, :, 0]),
           "AP50": _mean_valid(precision[np.where(0.5 == IOU_THRESHOLDS)[0], :, 0]),
           "AP75": _mean_valid(precision[np.where(0.75 == IOU_THRESHOLDS)[0], :, 0])}
    for p, (name, freq) in enumerate(pools[1:], start=1):
        res[f"AP{name}"] = _mean_valid(precision[:, :, p])
    return res, precision


def _sub_mask(mask: np.ndarray, keep_masked: np.ndarray) -> np.ndarray:
    """Restrict ``mask`` (over matched order) to the masked entries where ``keep_masked``."""
    out = mask.copy()
    out[np.flatnonzero(mask)[~keep_masked]] = False
    return out


def _reindex(order: np.ndarray, keep_masked: np.ndarray) -> np.ndarray:
    """Map an order over masked positions (all kept) to positions among the kept ones."""
    newpos = np.cumsum(keep_masked) - 1
    return newpos[order]


def detection_labels(
    gt: GroundTruth,
    dets: Detections,
    *,
    iou_type: IouType = "bbox",
    iou_threshold: float = 0.75,
    dets_per_class: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """True/false-positive labels of the evaluated detections (for fitting calibration).

    Parameters
    ----------
    gt, dets : ground truth and detections.
    iou_threshold : one of lvis-api's thresholds 0.50:0.05:0.95 (the paper uses 0.75).
    dets_per_class : optional top-k per category first (as AP^Fixed).

    Returns
    -------
    index : (n,) int64 positions into ``dets`` of the detections that are evaluated under the
        federated rules and not ignored (area "all"; an unmatched detection of a not-exhaustive
        category, or one matched to an ignored ground truth, carries no label and is left out).
    label : (n,) bool, matched to a ground truth at ``iou_threshold``.
    """
    t = np.flatnonzero(np.isclose(IOU_THRESHOLDS, iou_threshold, rtol=0, atol=1e-12))
    if len(t) != 1:
        raise InputError(f"iou_threshold: expected one of {np.round(IOU_THRESHOLDS, 2).tolist()}, got {iou_threshold!r}")
    n = len(dets)
    K = gt.num_categories
    gt = _lvis_area_filter(gt)
    keep = np.ones(n, bool)
    if dets_per_class is not None:
        keep[:] = False
        keep[top_per_class(dets, k=dets_per_class)] = True
    if gt.format == "lvis":
        gkey = dets.image * K + dets.category
        keep &= np.isin(gkey, np.unique(gt.image * K + gt.category)) | np.isin(gkey, gt.negative)
        keep &= (dets.area > 0) & (dets.area < np.inf)
    cand = np.flatnonzero(keep)
    det = cand[np.lexsort((cand, dets.image[cand], -dets.score[cand], dets.category[cand]))]
    match = match_detections(gt, dets, det, iou_type=iou_type)
    code = match.codes(0, int(t[0]))
    if gt.format == "coco":
        code[match.group_rank >= COCO_MAX_DETS[-1]] = 2  # beyond pycocotools' cap: not evaluated
    labelled = (code == 1) | ((code == 0) & ~(match.det_out[0] | match.det_nel))
    idx = det[labelled]
    lab = code[labelled] == 1
    o = np.argsort(idx, kind="stable")
    return idx[o], lab[o]
