"""Greedy detection-to-ground-truth matching, vectorised, computed once for all thresholds and areas.

Semantics are those of ``LVISEval.evaluate_img`` / ``COCOeval.evaluateImg``: within one (image,
category) group, detections are visited by descending score (ties: file order, as the official
stable mergesort); each takes, among the still unmatched ground truths with IoU >= t, the one with
the highest IoU — ties go to the later annotation in file order — preferring ground truths that are
not ignored (ignore flag, area outside the range, COCO ``iscrowd``; for keypoints also
``num_keypoints == 0``); crowd regions can be matched repeatedly. The overlap is the box IoU, the
mask IoU (pycocotools) or the keypoint OKS (:mod:`.oks`). Only detection/ground-truth pairs with IoU
>= min(t) can ever match, so the matching runs in *rounds* over those candidates: round r processes
the r-th candidate of every group at once (groups share no ground truth, so there are no conflicts),
for all 10 IoU thresholds and all 4 area ranges in one array operation.

Because greedy matching of a score-ordered list is prefix-stable (dropping the lowest-scored
detections of a group does not change the matches of the others), one matching of the union of all
kept detections serves AP^Old, AP^Fixed and AP^Pool: :func:`match_set` selects
(:mod:`.select`), orders and matches them once (:class:`MatchedSet`). Each outcome is a
:class:`MatchCode`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np

from ...errors import InputError
from .data import Detections, GroundTruth
from .masks import to_rle
from .oks import oks_pairs
from .params import AREA_RANGES, COCO_MAX_DETS, IOU_THRESHOLDS, KEYPOINT_AREA_RANGES, KEYPOINT_MAX_DETS, IouType
from .select import canonical_order, federated_selection, lvis_area_filter
from .sort import ScoreRank, member, stable_by_keys

_PAIR_CHUNK = 1 << 19  # pairs per IoU batch: bounds the transient memory (~50 MB)


class MatchCode(IntEnum):
    """What the matching made of a detection at one area range and IoU threshold (stored as int8)."""

    UNMATCHED = 0  #: no ground truth taken: a false positive where the detection counts
    TRUE_POSITIVE = 1  #: matched to a ground truth that counts
    MATCHED_IGNORED = 2  #: matched to an ignored ground truth: the detection is ignored too
    NOT_EVALUATED = 3  #: (labels only) beyond pycocotools' per-(image, category) cap


@dataclass
class Matching:
    """Result of :func:`match_detections` for detections ``det`` (positions into a Detections).

    ``code[a, t, j]`` for candidate ``cand[j]`` (a position into ``det``) is a :class:`MatchCode`:
    UNMATCHED, TRUE_POSITIVE or MATCHED_IGNORED. Non-candidates are unmatched at every threshold.
    """

    det: np.ndarray  # (n,) detection indices, in the order given
    cand: np.ndarray  # (m,) positions into det
    code: np.ndarray  # (A, T, m) int8
    gt_ignore: np.ndarray  # (A, G) bool
    det_out: np.ndarray  # (A, n) bool: detection area outside the range
    det_nel: np.ndarray  # (n,) bool: category not exhaustively annotated in the image (LVIS)
    group_rank: np.ndarray  # (n,) rank of each detection within its (image, category) group

    def codes(self, a: int, t: int) -> np.ndarray:
        """Dense (n,) int8 :class:`MatchCode` values for area ``a`` and threshold ``t``."""
        out = np.full(len(self.det), MatchCode.UNMATCHED, np.int8)
        out[self.cand] = self.code[a, t]
        return out


def box_iou_pairs(d: np.ndarray, g: np.ndarray, crowd: np.ndarray) -> np.ndarray:
    """IoU of paired boxes, bit-for-bit as pycocotools' ``bbIou`` (C, double precision).

    Parameters
    ----------
    d, g : (P, 4) float64 ``[x, y, w, h]``; crowd : (P,) bool (union = detection area when True).

    Returns
    -------
    (P,) float64: ``i / u`` with ``i = w_i * h_i`` (0 when the overlap is empty or degenerate) and
    ``u = da + ga - i`` (``da`` for crowd).
    """
    w = np.minimum(d[:, 2] + d[:, 0], g[:, 2] + g[:, 0]) - np.maximum(d[:, 0], g[:, 0])
    h = np.minimum(d[:, 3] + d[:, 1], g[:, 3] + g[:, 1]) - np.maximum(d[:, 1], g[:, 1])
    ok = (w > 0) & (h > 0)
    i = w * h
    da = d[:, 2] * d[:, 3]
    ga = g[:, 2] * g[:, 3]
    u = np.where(crowd, da, da + ga - i)
    out = np.zeros(len(d))
    np.divide(i, u, out=out, where=ok)
    return out


def match_detections(
    gt: GroundTruth,
    dets: Detections,
    det: np.ndarray,
    *,
    iou_type: str = "bbox",
    iou_thresholds: np.ndarray = IOU_THRESHOLDS,
    area_ranges: np.ndarray = AREA_RANGES,
    kpt_oks_sigmas: np.ndarray | None = None,
    kpt_use_area: bool = True,
) -> Matching:
    """Match detections ``det`` (indices into ``dets``) to ``gt``, for every threshold and area range.

    ``det`` must be ordered so that, within each (image, category) group, detections come by
    descending score with ties in file order (the evaluator's canonical order does this).
    ``iou_type`` "keypoints" matches by OKS with ``kpt_oks_sigmas`` (None: COCO's 17) and ignores
    ground truth with ``num_keypoints == 0``, as pycocotools; ``kpt_use_area=False`` scales OKS by
    the box instead of ``area`` (CrowdPose, :func:`~.oks.oks_area`).
    """
    K = gt.num_categories
    n = len(det)
    A = len(area_ranges)
    d_img, d_cat = dets.image[det], dets.category[det]
    d_area = dets.area[det]
    gkey = d_img * K + d_cat
    grp, gk_sorted = np.arange(n), gkey  # group order: (group, then the given order)
    if n:
        grp, gk_sorted = stable_by_keys(grp, gkey, int(gkey.max()))
    first = np.r_[True, gk_sorted[1:] != gk_sorted[:-1]] if n else np.zeros(0, bool)
    starts = np.flatnonzero(first)
    rank_sorted = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
    group_rank = np.empty(n, np.int64)
    group_rank[grp] = rank_sorted

    g_key = gt.image * K + gt.category
    g_order = np.argsort(g_key, kind="stable")
    g_key_sorted = g_key[g_order]
    lo = np.searchsorted(g_key_sorted, gk_sorted, "left")
    hi = np.searchsorted(g_key_sorted, gk_sorted, "right")
    cnt = hi - lo

    gt_area = gt.area
    gt_ignore = np.empty((A, len(gt)), bool)
    det_out = np.empty((A, n), bool)
    base_ignore = gt.ignore
    if iou_type == "keypoints":
        if gt.num_keypoints is None:
            raise InputError("iou_type='keypoints' needs the ground truth's keypoints (read it with keypoints)")
        base_ignore = base_ignore | (gt.num_keypoints == 0)
    for a, (alo, ahi) in enumerate(area_ranges):
        gt_ignore[a] = base_ignore | (gt_area < alo) | (gt_area > ahi)
        det_out[a] = (d_area < alo) | (d_area > ahi)
    if len(gt.not_exhaustive):
        det_nel = member(gkey, gt.not_exhaustive, size=gt.num_images * K)[0]
    else:
        det_nel = np.zeros(n, bool)

    min_thr = min(float(np.min(iou_thresholds)), 1 - 1e-10)
    if iou_type == "bbox":
        pdet, pgt, piou = _bbox_pairs(gt, dets, det, grp, lo, cnt, g_order, min_thr)
    elif iou_type == "keypoints":
        pdet, pgt, piou = oks_pairs(gt, dets, det, grp, lo, cnt, g_order, min_thr, kpt_oks_sigmas,
                                       kpt_use_area)
    else:
        pdet, pgt, piou = _segm_pairs(gt, dets, det, grp, lo, cnt, g_order, min_thr)
    cand, code = _greedy_rounds(pdet, pgt, piou, gk_sorted, grp, starts, gt_ignore, gt.crowd,
                                np.minimum(np.asarray(iou_thresholds, float), 1 - 1e-10))
    return Matching(det=det, cand=grp[cand], code=code, gt_ignore=gt_ignore, det_out=det_out,
                    det_nel=det_nel, group_rank=group_rank)


def _bbox_pairs(gt, dets, det, grp, lo, cnt, g_order, min_thr):
    """Candidate pairs (group-order position, gt index, IoU >= min_thr), chunked to bound memory.

    The IoU is :func:`box_iou_pairs` (the same floating-point operations) on box columns gathered
    once per detection and once per ground truth (in group order), not per pair.
    """
    has = np.flatnonzero(cnt > 0)
    if not len(has):
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    db = dets.bbox[det[grp[has]]]
    dx1, dy1 = db[:, 0].copy(), db[:, 1].copy()
    dx2, dy2 = db[:, 2] + db[:, 0], db[:, 3] + db[:, 1]
    da = db[:, 2] * db[:, 3]
    del db
    gb = gt.bbox[g_order]
    gx1, gy1 = gb[:, 0].copy(), gb[:, 1].copy()
    gx2, gy2 = gb[:, 2] + gb[:, 0], gb[:, 3] + gb[:, 1]
    ga = gb[:, 2] * gb[:, 3]
    gcrowd = gt.crowd[g_order]
    any_crowd = bool(gcrowd.any())
    cnt_h, lo_h = cnt[has], lo[has]
    out_d, out_g, out_v = [], [], []
    csum = np.cumsum(cnt_h)
    s = 0
    while s < len(has):
        base = csum[s - 1] if s else 0
        e = int(np.searchsorted(csum, base + _PAIR_CHUNK, "right"))
        e = max(e, s + 1)
        c = cnt_h[s:e]
        tot = int(c.sum())
        pl = np.repeat(np.arange(s, e), c)  # position in ``has``
        gi = np.repeat(lo_h[s:e] - (np.cumsum(c) - c), c) + np.arange(tot)  # position in g_order
        w = np.minimum(dx2[pl], gx2[gi]) - np.maximum(dx1[pl], gx1[gi])
        h = np.minimum(dy2[pl], gy2[gi]) - np.maximum(dy1[pl], gy1[gi])
        ok = (w > 0) & (h > 0)
        i = w * h
        dap = da[pl]
        u = dap + ga[gi] - i
        if any_crowd:
            u = np.where(gcrowd[gi], dap, u)
        iou = np.zeros(tot)
        np.divide(i, u, out=iou, where=ok)
        keep = np.flatnonzero(iou >= min_thr)
        out_d.append(has[pl[keep]])
        out_g.append(g_order[gi[keep]])
        out_v.append(iou[keep])
        s = e
    return np.concatenate(out_d), np.concatenate(out_g), np.concatenate(out_v)


def _segm_pairs(gt, dets, det, grp, lo, cnt, g_order, min_thr):
    """As :func:`_bbox_pairs` for masks: pycocotools' mask IoU, one call per (image, category)."""
    import pycocotools.mask as mask_utils

    if gt.segmentation is None or dets.segmentation is None:
        raise InputError("iou_type='segm' needs 'segmentation' in both the ground truth and the results")
    size = gt.image_size
    has = np.flatnonzero(cnt > 0)
    out_d, out_g, out_v = [], [], []
    # positions in group order with ground truth; consecutive positions of one group share lo/cnt
    if len(has):
        brk = np.flatnonzero(np.r_[True, (np.diff(has) != 1) | (lo[has][1:] != lo[has][:-1])])
        ends = np.r_[brk[1:], len(has)]
        gt_rle: dict[int, object] = {}
        for b, e in zip(brk, ends):
            pos = has[b:e]
            g_idx = g_order[lo[pos[0]]: lo[pos[0]] + cnt[pos[0]]]
            img = int(gt.image[g_idx[0]])
            h, w = (int(size[img, 0]), int(size[img, 1])) if size is not None else (0, 0)
            for gi in g_idx:
                if gi not in gt_rle:
                    gt_rle[gi] = to_rle(gt.segmentation[gi], h, w)
            d_rles = [to_rle(dets.segmentation[det[grp[p]]], h, w) for p in pos]
            ious = np.asarray(mask_utils.iou(d_rles, [gt_rle[gi] for gi in g_idx],
                                             [int(c) for c in gt.crowd[g_idx]]), float).reshape(len(pos), len(g_idx))
            dd, gg = np.nonzero(ious >= min_thr)
            out_d.append(pos[dd])
            out_g.append(g_idx[gg])
            out_v.append(ious[dd, gg])
    if not out_d:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    return np.concatenate(out_d), np.concatenate(out_g), np.concatenate(out_v)


def _greedy_rounds(pdet, pgt, piou, gk_sorted, grp, starts, gt_ignore, crowd, thr):
    """Run the greedy matching over candidate pairs; return (candidate positions, codes)."""
    A, T = gt_ignore.shape[0], len(thr)
    if len(pdet) == 0:
        return np.zeros(0, np.int64), np.zeros((A, T, 0), np.int8)
    # candidates in group order; their rank among the group's candidates
    cands, pc = np.unique(pdet, return_inverse=True)  # pdet is in group order already
    cgk = gk_sorted[cands]
    cfirst = np.r_[True, cgk[1:] != cgk[:-1]]
    cst = np.flatnonzero(cfirst)
    crank = np.arange(len(cands)) - np.repeat(cst, np.diff(np.r_[cst, len(cands)]))
    order = np.argsort(crank[pc], kind="stable")  # pairs by (round, candidate, gt file order)
    pc, pgt, piou = pc[order], pgt[order], piou[order]
    prank = crank[pc]
    rb = np.flatnonzero(np.r_[True, prank[1:] != prank[:-1], True])
    code = np.full((A, T, len(cands)), MatchCode.UNMATCHED, np.int8)
    matched = np.zeros((A, T, gt_ignore.shape[1]), bool)
    thr3 = thr[None, :, None]
    for r0, r1 in zip(rb[:-1], rb[1:]):
        c = pc[r0:r1]
        g = pgt[r0:r1]
        v = piou[r0:r1]
        P = r1 - r0
        seg = np.flatnonzero(np.r_[True, c[1:] != c[:-1]])
        seg_len = np.diff(np.r_[seg, P])
        free = ~matched[:, :, g] | crowd[g]  # (A, T, P)
        valid = free & (v[None, None, :] >= thr3)
        ig = gt_ignore[:, g][:, None, :]  # (A, 1, P)
        idx = np.arange(P)
        choice = np.full((A, T, len(seg)), -1, np.int64)
        kind = np.full((A, T, len(seg)), MatchCode.UNMATCHED, np.int8)
        for phase, mask in ((MatchCode.TRUE_POSITIVE, valid & ~ig), (MatchCode.MATCHED_IGNORED, valid & ig)):
            key = np.where(mask, v, -1.0)
            best = np.maximum.reduceat(key, seg, axis=2)
            hit = mask & (key == np.repeat(best, seg_len, axis=2))
            pos = np.maximum.reduceat(np.where(hit, idx, -1), seg, axis=2)
            take = (choice < 0) & (pos >= 0)
            choice[take] = pos[take]
            kind[take] = phase
        aa, tt, dd = np.nonzero(choice >= 0)
        matched[aa, tt, g[choice[aa, tt, dd]]] = True
        code[:, :, c[seg]] = kind
    return cands, code


@dataclass
class MatchedSet:
    """Stage 1 of the evaluation: the selected detections matched once for all thresholds/areas.

    Attributes
    ----------
    gt : the ground truth as evaluated (LVIS: zero-area annotations dropped).
    det : (n,) int64 positions into the Detections, canonical order (:func:`canonical_order`).
    match : :class:`Matching` of ``det``.
    in_cap : (n,) bool; COCO: within pycocotools' top ``max_dets[-1]`` per image and category (100;
        keypoints 20); LVIS: all True.
    max_dets : pycocotools' per-(image, category) limits whose recall is reported (COCO).
    """

    gt: GroundTruth
    det: np.ndarray
    match: Matching
    in_cap: np.ndarray
    score_rank: np.ndarray | None = field(default=None, repr=False)  # (N,) dense score rank, 0 = best
    max_dets: tuple[int, ...] = COCO_MAX_DETS


def match_set(gt: GroundTruth, dets: Detections, keep: np.ndarray | None = None, *,
              iou_type: IouType = "bbox", score_rank: ScoreRank | None = None,
              kpt_oks_sigmas: np.ndarray | None = None) -> MatchedSet:
    """Select (``keep`` and :func:`federated_selection`), order and match detections against ``gt``.

    Parameters
    ----------
    keep : (n,) bool or None (all); the union of what the variants to be accumulated need.
    score_rank : the evaluation's one score sort of ``dets.score``, if already computed.
    iou_type : "keypoints" (COCO ground truth only): OKS with ``kpt_oks_sigmas``, pycocotools'
        keypoint areas (all, medium, large) and 20 detections per image and category.
    """
    sr = ScoreRank.of(dets.score) if score_rank is None else score_rank
    gt = lvis_area_filter(gt)
    sel = federated_selection(gt, dets)
    if keep is not None:
        sel &= keep
    det = canonical_order(dets, np.flatnonzero(sel), score_rank=sr.rank)
    kp = iou_type == "keypoints"
    match = match_detections(gt, dets, det, iou_type=iou_type, area_ranges=KEYPOINT_AREA_RANGES if kp else AREA_RANGES,
                             kpt_oks_sigmas=kpt_oks_sigmas)
    max_dets = KEYPOINT_MAX_DETS if kp else COCO_MAX_DETS
    if gt.format == "coco":  # pycocotools keeps the top maxDets[-1] per image and category
        in_cap = match.group_rank < max_dets[-1]
    else:
        in_cap = np.ones(len(det), bool)
    return MatchedSet(gt=gt, det=det, match=match, in_cap=in_cap, score_rank=sr.rank, max_dets=max_dets)
