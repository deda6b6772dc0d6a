"""Accumulation: precision/recall from the matched detections, as lvis-api's / cocoeval's
``accumulate``.

Per category ``k``, area ``a`` and IoU threshold ``t``: with detections sorted by score,
``tp_i``/``fp_i`` cumulative counts and ``n_k`` non-ignored ground truths, ``rc_i = tp_i / n_k``,
``pr_i = tp_i / (tp_i + fp_i + eps)``, made monotone from the right; ``P(r) = pr_j`` at the first
``j`` with ``rc_j >= r`` (0 if none), ``r in {0, 0.01, ..., 1}``. :func:`accumulate` gives the
per-category array (AP^Old, AP^Fixed), :func:`accumulate_pooled` AP^Pool's one ranking per pool.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .data import FREQUENCIES, Detections
from .match import MatchCode, MatchedSet, Matching
from .params import IOU_THRESHOLDS, RECALL_THRESHOLDS
from .sort import ScoreRank, stable_by


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
    Only the ``cand_pos`` entries (sorted) can be matched: ``code`` is their :class:`~.match.MatchCode`
    (TRUE_POSITIVE, MATCHED_IGNORED or UNMATCHED); every other entry is unmatched and is a false
    positive where it is "ok" (not ignored). ``ok_cum`` is (n+1,) with ``ok_cum[i]`` = number of ok entries before i.
    ``rec_counts`` (K, R) from :func:`recall_counts`.

    Precision at a true positive i is ``tp_i / (fp_i + tp_i + eps)`` with segment-local cumulative
    counts, exactly as lvis-api; the right-to-left maximum only changes at true positives, so only
    they are evaluated: O(candidates + K R) per call instead of O(n).
    """
    K, R = rec_counts.shape
    matched = code != MatchCode.UNMATCHED
    tp = code == MatchCode.TRUE_POSITIVE
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
        order, A = 4 area ranges ``AREA_LABELS`` (all, small, medium, large; keypoints: 3,
        ``KEYPOINT_AREA_LABELS``). Interpolated precision; NaN where the category has no
        (non-ignored) ground truth in that area.
    recall : (T, K, A) final recall (LVIS) or (T, K, A, M) for M = pycocotools' maxDets 1/10/100
        (COCO; keypoints: M = 1, maxDets 20); NaN likewise.
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
    T, R, A, K = len(IOU_THRESHOLDS), len(RECALL_THRESHOLDS), match.gt_ignore.shape[0], gt.num_categories
    max_dets = ms.max_dets
    lvis = gt.format == "lvis"
    seg = dets.category[det[mask]]
    rk = _Ranked(match, mask, None, seg, K)
    num_gt = np.stack([np.bincount(gt.category[~match.gt_ignore[a]], minlength=K) for a in range(A)], 1)
    # filled and summarised one (area, threshold) block at a time: stored area-major, returned as a
    # (T, R, K, A) view, so each area's (T, R, K) slice is one contiguous block
    by_area = np.empty((A, T, R, K))  # every (area, threshold) block is written below
    recall = np.full((T, K, A) if lvis else (T, K, A, len(max_dets)), np.nan)
    if not lvis:
        grank = match.group_rank[rk.src]
    for a in range(A):
        okc = rk.ok_cum(match, a)
        rc = recall_counts(num_gt[:, a])
        ok = num_gt[:, a] > 0
        for t in range(T):
            c = pr_curves(rk.seg_start, rk.seg_end, rk.cand_pos, match.code[a, t, rk.cand_sel], okc,
                          num_gt[:, a], rc)
            by_area[a, t] = c.precision.T
            if lvis:
                recall[t, :, a] = c.recall
            else:
                recall[t, :, a, -1] = c.recall
                for mi, md in enumerate(max_dets[:-1]):
                    cnt = np.bincount(c.tp_seg[grank[c.tp_pos] < md], minlength=K)
                    recall[t, :, a, mi] = np.where(ok, cnt / np.where(ok, num_gt[:, a], 1), np.nan)
    return Accumulation(precision=by_area.transpose(1, 2, 3, 0), recall=recall, num_gt=num_gt,
                        num_detections=int(mask.sum()))


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
        srank = ms.score_rank if ms.score_rank is not None else ScoreRank.of(dets.score).rank
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
