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

import warnings
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Sequence

import numpy as np

from .._validation import check_choice, check_positive
from ..errors import InputError
from .detection_data import FREQUENCIES, Detections, GroundTruth
from ._detection_sort import (dense_rank_sorted, group_ranks, member, score_order, score_order_keys, stable_by,
                              stable_by_keys)
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
    """Rank of each entry within its ``key`` group by descending score, ties in input order.

    Parameters
    ----------
    key : (n,) int group of each entry; score : (n,) float.

    Returns
    -------
    (n,) int64, 0 for each group's best entry.
    """
    key = np.asarray(key)
    score = np.asarray(score, np.float64)
    if len(key) and key.dtype.kind in "iu" and key.min() >= 0:
        return _rank_within(key, score_order(score))
    order = np.argsort(-score, kind="stable")
    return _ranks_of(order[np.argsort(key[order], kind="stable")], key)


def _ranks_of(order: np.ndarray, key: np.ndarray) -> np.ndarray:
    rank = np.empty(len(order), np.int64)
    rank[order] = group_ranks(key[order])
    return rank


def _rank_within(key: np.ndarray, by_score: np.ndarray) -> np.ndarray:
    """:func:`rank_within` for non-negative int keys, given ``by_score`` (:func:`score_order`)."""
    if len(key) == 0:
        return np.zeros(0, np.int64)
    order, ks = stable_by_keys(by_score, key, int(key.max()))
    rank = np.empty(len(order), np.int64)
    rank[order] = group_ranks(ks)
    return rank


@dataclass
class _ScoreRank:
    """The one score sort of an evaluation: ``order`` (:func:`score_order`) and ``rank``, the dense
    rank of each detection's score (0 = highest; equal scores share a rank)."""

    order: np.ndarray
    rank: np.ndarray

    @classmethod
    def of(cls, score: np.ndarray) -> "_ScoreRank":
        order, keys = score_order_keys(score)
        rank = np.empty(len(order), np.int64)
        rank[order] = dense_rank_sorted(keys)
        return cls(order, rank)


def top_per_image(dets: Detections, *, k: int) -> np.ndarray:
    """Indices (file order) of each image's top ``k`` detections by score (ties: earlier first).

    This is ``LVISResults.limit_dets_per_image`` (a stable descending sort, then a cut).
    """
    k = check_positive(k, "max_dets_per_image", integer=True)
    return np.flatnonzero(rank_within(dets.image, dets.score) < k)


def _top_mask(key: np.ndarray, by_score: np.ndarray, k: int) -> np.ndarray:
    """(n,) bool: the top ``k`` by score within each ``key`` group (ties: file order)."""
    n = len(key)
    mask = np.ones(n, bool)
    big = np.bincount(key) > k if n else np.zeros(0, bool)
    if not big.any():  # no group is cut (e.g. 300 detections per image)
        return mask
    o = by_score[big[key][by_score]] if not big.all() else by_score  # only the groups that are cut
    o, ko = stable_by_keys(o, key, len(big) - 1)
    mask[o[group_ranks(ko) >= k]] = False
    return mask


def top_per_class(dets: Detections, *, k: int) -> np.ndarray:
    """Indices (file order) of each category's top ``k`` detections over the whole set.

    As the authors' ``evaluate_ap_fixed.py`` (stable descending sort per category, then a cut).
    """
    k = check_positive(k, "dets_per_class", integer=True)
    return np.flatnonzero(rank_within(dets.category, dets.score) < k)


def federated_selection(gt: GroundTruth, dets: Detections) -> np.ndarray:
    """(n,) bool: the detections the official tool evaluates at all.

    LVIS (lvis-api): a detection counts only where its category has ground truth in its image or is
    listed negative for the image, and (``get_ann_ids``) only with ``0 < area < inf``. COCO: all.
    This is the one place the rule lives; AP and the calibration labels both use it.
    """
    n = len(dets)
    if gt.format != "lvis":
        return np.ones(n, bool)
    K = gt.num_categories
    gkey = dets.image * K + dets.category
    pos_keys = np.unique(gt.image * K + gt.category)
    is_pos, is_neg = member(gkey, pos_keys, gt.negative, size=gt.num_images * K)
    evaluated = is_pos | is_neg
    return evaluated & (dets.area > 0) & (dets.area < np.inf)


def lvis_area_filter(gt: GroundTruth) -> GroundTruth:
    """lvis-api loads annotations with ``get_ann_ids(..., cat_ids)``, which keeps only
    0 < area < inf: zero-area ground truth is dropped (detections likewise, in
    :func:`federated_selection`). COCO ground truth is returned unchanged."""
    if gt.format != "lvis":
        return gt
    ok = (gt.area > 0) & (gt.area < np.inf)
    return gt if ok.all() else gt.subset(ok)


def canonical_order(dets: Detections, idx: np.ndarray) -> np.ndarray:
    """``idx`` sorted by category, descending score, image, file position (the evaluation order)."""
    idx = np.asarray(idx, np.int64)
    if len(idx) < 2 or np.all(idx[1:] > idx[:-1]):
        return _canonical(dets, idx, _ScoreRank.of(dets.score).rank)
    o = np.argsort(dets.image[idx], kind="stable")  # stable passes, last key first (as lexsort)
    o = o[np.argsort(-dets.score[idx][o], kind="stable")]
    o = o[np.argsort(dets.category[idx][o], kind="stable")]
    return idx[o]


def _canonical(dets: Detections, idx: np.ndarray, srank: np.ndarray) -> np.ndarray:
    """:func:`canonical_order` of ascending ``idx`` by stable re-sorts, least significant key first."""
    if len(idx) == 0:
        return idx
    o = stable_by(idx, dets.image, int(dets.image[idx].max()))
    r = srank[o]
    S = int(r.max()) + 1
    key = dets.category[o] * S + r  # (category, score) in one key
    return o[stable_by(np.arange(len(o)), key, int(key.max()))]


# --------------------------------------------------------------------------------------- match

@dataclass
class MatchedSet:
    """Stage 1 of the evaluation: the selected detections matched once for all thresholds/areas.

    Attributes
    ----------
    gt : the ground truth as evaluated (LVIS: zero-area annotations dropped).
    det : (n,) int64 positions into the Detections, canonical order (:func:`canonical_order`).
    match : :class:`~.detection_match.Matching` of ``det``.
    in_cap : (n,) bool; COCO: within pycocotools' top 100 per image and category; LVIS: all True.
    """

    gt: GroundTruth
    det: np.ndarray
    match: Matching
    in_cap: np.ndarray
    score_rank: np.ndarray | None = field(default=None, repr=False)  # (N,) dense score rank, 0 = best


def match_set(gt: GroundTruth, dets: Detections, keep: np.ndarray | None = None, *,
              iou_type: IouType = "bbox") -> MatchedSet:
    """Select (``keep`` and :func:`federated_selection`), order and match detections against ``gt``.

    Parameters
    ----------
    keep : (n,) bool or None (all); the union of what the variants to be accumulated need.
    """
    return _match_set(gt, dets, keep, iou_type, _ScoreRank.of(dets.score))


def _match_set(gt: GroundTruth, dets: Detections, keep: np.ndarray | None, iou_type: str,
               sr: "_ScoreRank") -> MatchedSet:
    gt = lvis_area_filter(gt)
    sel = federated_selection(gt, dets)
    if keep is not None:
        sel &= keep
    det = _canonical(dets, np.flatnonzero(sel), sr.rank)
    match = match_detections(gt, dets, det, iou_type=iou_type)
    if gt.format == "coco":  # pycocotools keeps the top maxDets[-1] per image and category
        in_cap = match.group_rank < COCO_MAX_DETS[-1]
    else:
        in_cap = np.ones(len(det), bool)
    return MatchedSet(gt=gt, det=det, match=match, in_cap=in_cap, score_rank=sr.rank)


# ---------------------------------------------------------------------------------- accumulate

def recall_counts(num_gt: np.ndarray, thr: np.ndarray = RECALL_THRESHOLDS) -> np.ndarray:
    """(K, R) smallest integer m with float(m / n_k) >= thr_r (exactly as numpy divides)."""
    ng = np.where(num_gt > 0, num_gt, 1).astype(np.float64)[:, None]
    m = np.ceil(thr[None, :] * ng).astype(np.int64)
    for _ in range(3):
        m = m + (m / ng < thr[None, :])
    for _ in range(3):
        m = m - ((m > 0) & ((m - 1) / ng >= thr[None, :]))
    return m


@dataclass
class PRCurves:
    """Result of :func:`pr_curves` for K ranked lists.

    Attributes
    ----------
    precision : (K, R) interpolated precision at the recall points; NaN where ``num_gt == 0``.
    recall : (K,) final recall; NaN where ``num_gt == 0``.
    tp_pos, tp_seg : (m,) ranked positions and list (segment) indices of the true positives.
    """

    precision: np.ndarray
    recall: np.ndarray
    tp_pos: np.ndarray
    tp_seg: np.ndarray


def pr_curves(
    seg_start: np.ndarray,
    seg_end: np.ndarray,
    cand_pos: np.ndarray,
    code: np.ndarray,
    ok_cum: np.ndarray,
    num_gt: np.ndarray,
    rec_counts: np.ndarray,
) -> PRCurves:
    """Interpolated precision at the recall points for K ranked lists at once (sparse form).

    A ranked list of n detections is split into K contiguous segments ``[seg_start, seg_end)``.
    Only the ``cand_pos`` entries (sorted) can be matched: ``code`` 1 = true positive, 2 = matched to
    an ignored ground truth; every other entry is unmatched and is a false positive where it is
    "ok" (not ignored). ``ok_cum`` is (n+1,) with ``ok_cum[i]`` = number of ok entries before i.
    ``rec_counts`` (K, R) from :func:`recall_counts`.

    Precision at a true positive i is ``tp_i / (fp_i + tp_i + eps)`` with segment-local cumulative
    counts, exactly as lvis-api; the right-to-left maximum only changes at true positives, so only
    they are evaluated: O(candidates + K R) per call instead of O(n).
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
    # lists without a true positive have precision 0 at every recall point: only the others are computed
    has = np.flatnonzero(ntp)
    end = first[has] + ntp[has]
    q = np.minimum(first[has, None] + np.maximum(rec_counts[has], 1) - 1, end[:, None])
    bounds = np.concatenate([q, end[:, None]], axis=1)
    bm = np.maximum.reduceat(np.concatenate([pr, [0.0]]), bounds.ravel()).reshape(len(has), R + 1)[:, :R]
    bm[bounds[:, :R] >= bounds[:, 1:]] = 0.0
    prec = np.zeros((K, R))
    prec[has] = np.maximum.accumulate(bm[:, ::-1], axis=1)[:, ::-1]
    ok = num_gt > 0
    prec[~ok] = np.nan
    rec = np.where(ok, ntp / np.where(ok, num_gt, 1), np.nan)
    return PRCurves(precision=prec, recall=rec, tp_pos=tp_pos, tp_seg=tp_seg)


class _Ranked:
    """A variant's detections as one ranked list (canonical or pooled order) for pr_curves."""

    def __init__(self, match: Matching, mask: np.ndarray, order: np.ndarray | None, seg: np.ndarray, K: int):
        sel = np.flatnonzero(mask)  # matched-order positions of the variant's detections
        n = len(sel)
        if order is not None:  # order lists positions among ``sel`` in ranked order
            sel = sel[order]
        pos = np.full(len(mask), -1, np.int64)  # ranked position of each matched-order entry
        pos[sel] = np.arange(n)
        cp = pos[match.cand] if len(match.cand) else np.zeros(0, np.int64)
        at = np.full(n, -1, np.int64)  # candidates in ranked order, by scattering (no sort)
        keep = np.flatnonzero(cp >= 0)
        at[cp[keep]] = keep
        self.cand_pos = np.flatnonzero(at >= 0)
        self.cand_sel = at[self.cand_pos]
        self.n = n
        self.seg_start = np.searchsorted(seg, np.arange(K), "left")
        self.seg_end = np.searchsorted(seg, np.arange(K), "right")
        self.src = sel  # ranked -> matched order

    def ok_cum(self, match: Matching, a: int) -> np.ndarray:
        ok = ~(match.det_out[a] | match.det_nel)[self.src]
        out = np.zeros(self.n + 1, np.int64)
        np.cumsum(ok, out=out[1:])
        return out


@dataclass
class Accumulation:
    """Stage 2, per category (AP^Old, AP^Fixed): the arrays lvis-api's / cocoeval's ``accumulate``
    fill, with NaN where they write -1.

    Attributes
    ----------
    precision : (T, R, K, A) float64. Axes: T = 10 IoU thresholds ``IOU_THRESHOLDS`` (0.50:0.05:0.95),
        R = 101 recall points ``RECALL_THRESHOLDS`` (0:0.01:1), K = categories in ``gt.category_ids``
        order, A = 4 area ranges ``AREA_LABELS`` (all, small, medium, large). Interpolated
        precision; NaN where the category has no (non-ignored) ground truth in that area.
    recall : (T, K, A) final recall (LVIS) or (T, K, A, M) for M = pycocotools' maxDets 1/10/100
        (COCO); NaN likewise.
    num_gt : (K, A) int64 non-ignored ground truths.
    num_detections : detections in the ranked lists.
    """

    precision: np.ndarray
    recall: np.ndarray
    num_gt: np.ndarray
    num_detections: int


@dataclass
class PooledAccumulation:
    """Stage 2 of AP^Pool: one ranked list per pool, area "all".

    Attributes
    ----------
    precision : (T, R, P) float64; P = ``pools`` ("all", then LVIS's "r", "c", "f"); NaN where a
        pool has no ground truth or (COCO) no frequencies.
    pools : the P pool names.
    num_gt : (P,) int64 non-ignored ground truths summed over the pool's categories.
    num_detections : detections in the "all" list.
    """

    precision: np.ndarray
    pools: tuple[str, ...]
    num_gt: np.ndarray
    num_detections: int


def accumulate(ms: MatchedSet, dets: Detections, mask: np.ndarray) -> Accumulation:
    """Per-category precision/recall of the matched detections where ``mask`` ((n,) bool over
    ``ms.det``; COCO's per-(image, category) cap is applied here)."""
    gt, match, det = ms.gt, ms.match, ms.det
    mask = mask & ms.in_cap
    T, R, A, K = len(IOU_THRESHOLDS), len(RECALL_THRESHOLDS), len(AREA_RANGES), gt.num_categories
    lvis = gt.format == "lvis"
    seg = dets.category[det[mask]]
    rk = _Ranked(match, mask, None, seg, K)
    num_gt = np.stack([np.bincount(gt.category[~match.gt_ignore[a]], minlength=K) for a in range(A)], 1)
    precision = np.full((T, R, K, A), np.nan)
    recall = np.full((T, K, A) if lvis else (T, K, A, len(COCO_MAX_DETS)), np.nan)
    if not lvis:
        grank = match.group_rank[rk.src]
    for a in range(A):
        okc = rk.ok_cum(match, a)
        rc = recall_counts(num_gt[:, a])
        ok = num_gt[:, a] > 0
        for t in range(T):
            c = pr_curves(rk.seg_start, rk.seg_end, rk.cand_pos, match.code[a, t, rk.cand_sel], okc,
                          num_gt[:, a], rc)
            precision[t, :, :, a] = c.precision.T
            if lvis:
                recall[t, :, a] = c.recall
            else:
                recall[t, :, a, -1] = c.recall
                for mi, md in enumerate(COCO_MAX_DETS[:-1]):
                    cnt = np.bincount(c.tp_seg[grank[c.tp_pos] < md], minlength=K)
                    recall[t, :, a, mi] = np.where(ok, cnt / np.where(ok, num_gt[:, a], 1), np.nan)
    return Accumulation(precision=precision, recall=recall, num_gt=num_gt, num_detections=int(mask.sum()))


def accumulate_pooled(ms: MatchedSet, dets: Detections, mask: np.ndarray) -> PooledAccumulation:
    """Pooled precision over all categories and over each frequency group (area "all")."""
    gt, match, det = ms.gt, ms.match, ms.det
    mask = mask & ms.in_cap
    T, R = len(IOU_THRESHOLDS), len(RECALL_THRESHOLDS)
    sel = det[mask]
    pools = ("all",) + FREQUENCIES
    num_gt_cat = np.bincount(gt.category[~match.gt_ignore[0]], minlength=gt.num_categories)
    # ranking as LVISPooledEval: descending score; ties by image, then category, then file order
    # (stable re-sorts of the positions in file order, least significant key first)
    at = np.full(len(dets), -1, np.int64)
    at[sel] = np.arange(len(sel))
    order = at[at >= 0]
    if len(order):
        srank = ms.score_rank if ms.score_rank is not None else _ScoreRank.of(dets.score).rank
        ic = dets.image[sel] * gt.num_categories + dets.category[sel]  # (image, category) in one key
        order = stable_by(order, ic, int(ic.max()))
        sr_sel = srank[sel]
        order = stable_by(order, sr_sel, int(sr_sel.max()))
    precision = np.full((T, R, len(pools)), np.nan)
    ngts = np.zeros(len(pools), np.int64)
    # the "all" ranking once; each pool is its sub-sequence of the categories in the pool
    src = np.flatnonzero(mask)[order]  # ranked -> matched order
    N = len(src)
    okflag = ~(match.det_out[0] | match.det_nel)[src]
    cat_r = dets.category[sel][order]
    pos_all = np.full(len(mask), -1, np.int64)
    pos_all[src] = np.arange(N)
    cp = pos_all[match.cand] if len(match.cand) else np.zeros(0, np.int64)
    at = np.full(N, -1, np.int64)  # candidates by ranked position (scatter, no sort)
    kc = np.flatnonzero(cp >= 0)
    at[cp[kc]] = kc
    cpos_all = np.flatnonzero(at >= 0)
    csel_all = at[cpos_all]
    for p, name in enumerate(pools):
        if name == "all":
            in_pool = np.ones(gt.num_categories, bool)
        elif gt.frequency is None:
            continue
        else:
            in_pool = gt.frequency == name
        inp = in_pool[cat_r]
        posp = np.cumsum(inp) - 1
        n_p = int(posp[-1] + 1) if N else 0
        okc = np.zeros(n_p + 1, np.int64)
        np.cumsum(okflag[inp], out=okc[1:])
        cm = inp[cpos_all]
        cand_pos, cand_sel = posp[cpos_all[cm]], csel_all[cm]
        seg_start, seg_end = np.zeros(1, np.int64), np.full(1, n_p, np.int64)
        ngt = np.array([int(num_gt_cat[in_pool].sum())])
        ngts[p] = ngt[0]
        rc = recall_counts(ngt)
        for t in range(T):
            precision[t, :, p] = pr_curves(seg_start, seg_end, cand_pos, match.code[0, t, cand_sel],
                                           okc, ngt, rc).precision[0]
    return PooledAccumulation(precision=precision, pools=pools, num_gt=ngts, num_detections=int(mask.sum()))


# ----------------------------------------------------------------------------------- summarize

def _mean_defined(s: np.ndarray) -> float:
    v = s[~np.isnan(s)]
    return float(np.mean(v)) if len(v) else float("nan")


def summarize(acc: Accumulation, gt: GroundTruth, *, max_dets_label: int | str | None) -> dict[str, float]:
    """lvis-api's / pycocotools' summary keys from an :class:`Accumulation` (means over the defined
    entries, NaN where none is).

    Keys: AP, AP50, AP75, APs, APm, APl, APr, APc, APf (NaN for COCO); LVIS: AR@N, ARs@N, ARm@N,
    ARl@N with N = ``max_dets_label``; COCO: AR@1, AR@10, AR@100, ARs@100, ARm@100, ARl@100.
    """
    precision, recall = acc.precision, acc.recall
    lvis = gt.format == "lvis"

    def ap(iou_thr=None, area="all", freq=None):
        a = AREA_LABELS.index(area)
        s = precision[:, :, :, a]
        if iou_thr is not None:
            s = s[np.flatnonzero(iou_thr == IOU_THRESHOLDS)]
        if freq is not None:
            s = s[:, :, gt.frequency == freq]
        return _mean_defined(s)

    def ar(area="all", mi=None):
        a = AREA_LABELS.index(area)
        return _mean_defined(recall[:, :, a] if mi is None else recall[:, :, a, mi])

    res = {"AP": ap(), "AP50": ap(iou_thr=0.50), "AP75": ap(iou_thr=0.75),
           "APs": ap(area="small"), "APm": ap(area="medium"), "APl": ap(area="large")}
    for f in FREQUENCIES:
        res[f"AP{f}"] = ap(freq=f) if lvis else float("nan")
    if lvis:
        res[f"AR@{max_dets_label}"] = ar()
        for area in ("small", "medium", "large"):
            res[f"AR{area[0]}@{max_dets_label}"] = ar(area)
    else:
        for mi, md in enumerate(COCO_MAX_DETS):
            res[f"AR@{md}"] = ar(mi=mi)
        for area in ("small", "medium", "large"):
            res[f"AR{area[0]}@{COCO_MAX_DETS[-1]}"] = ar(area, mi=len(COCO_MAX_DETS) - 1)
    return res


def summarize_pooled(acc: PooledAccumulation) -> dict[str, float]:
    """AP, AP50, AP75 of the "all" pool and APr/APc/APf of the frequency pools."""
    p = acc.precision
    res = {"AP": _mean_defined(p[:, :, 0]),
           "AP50": _mean_defined(p[np.flatnonzero(0.5 == IOU_THRESHOLDS), :, 0]),
           "AP75": _mean_defined(p[np.flatnonzero(0.75 == IOU_THRESHOLDS), :, 0])}
    for i, name in enumerate(acc.pools[1:], start=1):
        res[f"AP{name}"] = _mean_defined(p[:, :, i])
    return res


# ----------------------------------------------------------------------------------- evaluation

def evaluate_detections(
    gt: GroundTruth,
    dets: Detections,
    *,
    iou_type: IouType = "bbox",
    variants: Sequence[Variant] = VARIANTS,
    max_dets_per_image: int | None = None,
    dets_per_class: int = 10_000,
    fixed_area: Literal["mask", "box"] = "mask",
) -> DetectionEvaluation:
    """AP^Old, AP^Fixed and AP^Pool of ``dets`` against ``gt``: select, :func:`match_set`,
    :func:`accumulate` / :func:`accumulate_pooled`, :func:`summarize` / :func:`summarize_pooled`.

    Parameters
    ----------
    gt : GroundTruth (LVIS or COCO semantics by ``gt.format``).
    dets : Detections, file order (ties in score are broken by it, as the official tools do).
    iou_type : "bbox" or "segm" (masks need ``segmentation`` in both; pycocotools computes mask IoU).
    variants : which of "old", "fixed", "pool" to compute.
    max_dets_per_image : per-image cut for AP^Old; default 300 for LVIS, none for COCO (pycocotools
        applies its maxDets 1/10/100 per image *and category*).
    dets_per_class : k of AP^Fixed / AP^Pool (top k per category over the whole set).
    fixed_area : with ``iou_type="segm"``, the detection area that decides small/medium/large (and
        the zero-area filter) for AP^Fixed / AP^Pool: "mask" as the authors' scripts (they drop the
        box), or "box" as lvis-api. AP^Old always follows lvis-api / pycocotools (box area when the
        result has a box).

    Returns
    -------
    DetectionEvaluation; ``results["old"|"fixed"]`` have keys AP, AP50, AP75, APs, APm, APl, APr,
    APc, APf and AR@N, ARs@N, ARm@N, ARl@N (LVIS: N = the per-image limit, "all" for fixed; COCO:
    AR@1, AR@10, AR@100, ARs@100, ...); ``results["pool"]`` has AP, AP50, AP75, APr, APc, APf.
    """
    check_choice(iou_type, "iou_type", ("bbox", "segm"))
    check_choice(fixed_area, "fixed_area", ("mask", "box"))
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
    warn_annotation_id_zero(gt)
    n = len(dets)
    sr = _ScoreRank.of(dets.score)  # the one score sort; every ordering below reuses it
    keep: dict[str, np.ndarray] = {}
    if "old" in variants:
        keep["old"] = (_top_mask(dets.image, sr.order, max_dets_per_image) if max_dets_per_image is not None
                       else np.ones(n, bool))
    fixed_dets = dets
    if "fixed" in variants or "pool" in variants:
        m = _top_mask(dets.category, sr.order, dets_per_class)
        keep["fixed"] = m
        if iou_type == "segm" and fixed_area == "mask":
            fixed_dets = _with_mask_area(gt, dets, m)
    # one matching serves every variant that sees the same detection areas
    groups = [(dets, [b for b in keep if fixed_dets is dets or b == "old"])]
    if fixed_dets is not dets:
        groups.append((fixed_dets, ["fixed"]))
    matched: dict[str, tuple[MatchedSet, Detections]] = {}
    for d, bases in groups:
        if not bases:
            continue
        union = np.zeros(n, bool)
        for b in bases:
            union |= keep[b]
        ms = _match_set(gt, d, union, iou_type, sr)
        for b in bases:
            matched[b] = (ms, d)

    settings = {"format": gt.format, "iou_type": iou_type, "variants": variants,
                "max_dets_per_image": max_dets_per_image, "dets_per_class": dets_per_class,
                "num_images": gt.num_images, "num_categories": gt.num_categories, "num_ground_truth": len(gt),
                "num_results": n}
    if iou_type == "segm":
        settings["fixed_area"] = fixed_area
    ev = DetectionEvaluation(results={}, settings=settings)
    for v in variants:
        base = "fixed" if v == "pool" else v
        ms, d = matched[base]
        mask = keep[base][ms.det]
        if v == "pool":
            pacc = accumulate_pooled(ms, d, mask)
            ev.results[v], ev.precision[v], ev.num_detections[v] = summarize_pooled(pacc), pacc.precision, pacc.num_detections
        else:
            acc = accumulate(ms, d, mask)
            label = "all" if v == "fixed" else (max_dets_per_image if lvis else None)
            ev.results[v] = summarize(acc, ms.gt, max_dets_label=label)
            ev.precision[v], ev.num_detections[v] = acc.precision, acc.num_detections
    return ev


def _with_mask_area(gt: GroundTruth, dets: Detections, which: np.ndarray) -> Detections:
    """``dets`` with the mask area (pycocotools ``area`` of the RLE) for the detections in ``which``."""
    import pycocotools.mask as mask_utils

    from .detection_match import to_rle

    if dets.segmentation is None:
        raise InputError("iou_type='segm' needs 'segmentation' in the results")
    idx = np.flatnonzero(which)
    size = gt.image_size
    rles = []
    for i in idx:
        img = int(dets.image[i])
        h, w = (int(size[img, 0]), int(size[img, 1])) if size is not None else (0, 0)
        rles.append(to_rle(dets.segmentation[i], h, w))
    area = dets.area.copy()
    # pycocotools' area() overflows a uint8 counter for lists of 256 or more: 255 at a time
    area[idx] = np.concatenate([np.asarray(mask_utils.area(rles[i: i + 255]), np.float64).reshape(-1)
                                for i in range(0, len(rles), 255)] or [np.zeros(0)])
    return replace(dets, area=area)


class OfficialToolsDifferenceWarning(UserWarning):
    """The result is correct but differs from what lvis-api / pycocotools would report."""


def warn_annotation_id_zero(gt: GroundTruth) -> None:
    """One-line warning when a ground-truth annotation has id 0 (see ``docs/fidelity.md``)."""
    if len(gt.ann_id) and np.any(gt.ann_id == 0):
        warnings.warn("ground truth has an annotation with id 0: vistabench counts its matches correctly, "
                      "but lvis-api and pycocotools store matches as annotation ids and count a match to "
                      "id 0 as a false positive, so their AP would be lower", OfficialToolsDifferenceWarning,
                      stacklevel=3)


@dataclass
class DetectionLabels:
    """Result of :func:`detection_labels`.

    Attributes
    ----------
    index : (n,) int64 positions into the Detections, ascending.
    label : (n,) bool, True where the detection is a true positive.
    """

    index: np.ndarray
    label: np.ndarray


def detection_labels(
    gt: GroundTruth,
    dets: Detections,
    *,
    iou_type: IouType = "bbox",
    iou_threshold: float = 0.75,
    dets_per_class: int | None = None,
    recipe: Literal["vistabench", "devil"] = "vistabench",
) -> DetectionLabels:
    """True/false-positive labels of the evaluated detections (for fitting calibration).

    Parameters
    ----------
    gt, dets : ground truth and detections.
    iou_threshold : one of lvis-api's thresholds 0.50:0.05:0.95 (the paper uses 0.75).
    dets_per_class : optional top-k per category first (as AP^Fixed).
    recipe : which detections get a label (both: only those :func:`federated_selection` keeps,
        area "all"):

        * "vistabench" — as AP counts them: an unmatched detection of a not-exhaustive category,
          or one matched to an ignored ground truth, carries no label and is left out;
        * "devil" — as the authors' ``load_tp_fp_fn`` (large-vocab-devil): every evaluated
          detection is labelled, positive when matched to *any* ground truth at the threshold
          (ignored ones included), so unmatched not-exhaustive detections are negatives.

    Returns
    -------
    DetectionLabels with ``index`` (positions into ``dets``) and ``label``.
    """
    t = np.flatnonzero(np.isclose(IOU_THRESHOLDS, iou_threshold, rtol=0, atol=1e-12))
    if len(t) != 1:
        raise InputError(f"iou_threshold: expected one of {np.round(IOU_THRESHOLDS, 2).tolist()}, got {iou_threshold!r}")
    check_choice(recipe, "recipe", ("vistabench", "devil"))
    keep = None
    if dets_per_class is not None:
        keep = np.zeros(len(dets), bool)
        keep[top_per_class(dets, k=dets_per_class)] = True
    ms = match_set(gt, dets, keep, iou_type=iou_type)
    code = ms.match.codes(0, int(t[0]))
    code[~ms.in_cap] = 3  # beyond pycocotools' cap: not evaluated
    if recipe == "devil":
        labelled = code != 3
        lab_all = (code == 1) | (code == 2)
    else:
        labelled = (code == 1) | ((code == 0) & ~(ms.match.det_out[0] | ms.match.det_nel))
        lab_all = code == 1
    idx = ms.det[labelled]
    lab = lab_all[labelled]
    o = np.argsort(idx, kind="stable")
    return DetectionLabels(index=idx[o], label=lab[o])
