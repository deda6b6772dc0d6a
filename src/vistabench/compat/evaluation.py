"""The evaluation behind the drop-ins: lvis-api's / pycocotools' ``evaluate`` + ``accumulate`` for
any ``params`` (image and category subsets, ``useCats``, IoU / recall thresholds, area ranges,
maxDets), built from vistabench's vectorised matcher and precision kernel.

:func:`match_for_params` selects what the official tool's ``_prepare`` loads for the given
parameters and matches it once (:func:`~vistabench.metrics.detection.match_detections`, all
thresholds and area ranges at once); :func:`accumulate_for_params` fills the official arrays —
``precision`` (T, R, K, A, M), ``recall`` (T, K, A, M), ``scores`` (T, R, K, A, M), with -1 where
the tool writes -1 — from :func:`~vistabench.metrics.detection.pr_curves`. M is pycocotools'
maxDets (per image and category; per image when ``useCats`` is 0); lvis-api has no per-image cut
in ``LVISEval`` (``LVISResults`` applies it), so its M is 1 with no cut.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from ..errors import InputError, InputIndexError, InputKeyError, named_as_builtin
from ..metrics.detection import canonical_order, federated_selection, pr_curves, recall_counts
from ..metrics.detection import Detections, GroundTruth
from ..metrics.detection import Matching, MatchCode, match_detections, to_rle

__all__ = ["EmptyResultsError", "UnknownIdError", "ParamsMatch", "Accumulated", "match_for_params", "accumulate_for_params",
           "mean_defined", "id_positions"]


@named_as_builtin
class EmptyResultsError(InputIndexError):
    """No results to evaluate. An :class:`~vistabench.errors.InputError` (so the CLI prints one line)
    and an ``IndexError``, the type lvis-api and pycocotools raise on an empty list (``anns[0]``) and
    the type mmdetection catches to log "results empty"."""


@named_as_builtin
class UnknownIdError(InputKeyError):
    """An id that is not in the dataset (lvis-api raises a bare KeyError)."""


def id_positions(ids: Sequence[int], known: np.ndarray, field: str) -> np.ndarray:
    """Positions of ``ids`` in the sorted ``known`` ids, in the order given; unknown ids -> one line
    naming ``field`` (the official tools raise a bare KeyError deep inside)."""
    a = np.asarray(list(ids), dtype=np.int64).reshape(-1)
    pos = np.searchsorted(known, a)
    ok = (pos < len(known)) & (known[np.minimum(pos, max(len(known) - 1, 0))] == a) if len(known) else a == a + 1
    if not np.all(ok):
        raise InputError(f"{field}: id {int(a[~ok][0])} is not in the ground truth "
                         f"({int(np.count_nonzero(~ok))} of {len(a)} unknown)")
    return pos.astype(np.int64)


@dataclass
class ParamsMatch:
    """What :func:`match_for_params` selected and matched.

    gt, dets : the ground truth and detections as evaluated (``useCats`` 0: one category).
    det : (n,) positions into ``dets``, canonical order (category, score desc, image, position).
    match : the :class:`Matching` of ``det``.
    cat_rows : (K',) row of each requested category in ``gt.category_ids`` (K' = len(cat_ids), in
        the order given; ``useCats`` 0: ``[0]``).
    """

    gt: GroundTruth
    dets: Detections
    det: np.ndarray
    match: Matching
    cat_rows: np.ndarray


def _take(gt: GroundTruth, idx: np.ndarray) -> GroundTruth:
    return gt.take(idx)


def match_for_params(gt: GroundTruth, dets: Detections, *, iou_type: str, img_rows: np.ndarray,
                     cat_rows: np.ndarray, use_cats: bool, iou_thrs: np.ndarray, area_rng: np.ndarray,
                     kpt_oks_sigmas: np.ndarray | None = None, zero_id_unmatched: bool = True,
                     kpt_use_area: bool = True) -> ParamsMatch:
    """Select as the official ``_prepare`` does for these parameters, then match.

    ``zero_id_unmatched``: as both official tools, a detection matched to a counted ground truth
    whose annotation ``id`` is 0 is a false positive (they store matches as ids and test them for
    truth); False counts it as the true positive it is.

    ``img_rows`` / ``cat_rows``: rows of the evaluated images / categories in ``gt``'s sorted id
    lists (categories in the order the parameters give them). LVIS ground truth: annotations with
    ``0 < area < inf`` only (``get_ann_ids(..., cat_ids)``) and the federated rule for detections.
    """
    I, K = gt.num_images, gt.num_categories
    in_img = np.zeros(I, bool)
    in_img[img_rows] = True
    in_cat = np.zeros(K, bool)
    in_cat[cat_rows] = True
    gkeep = in_img[gt.image] & in_cat[gt.category]
    if gt.format == "lvis" and len(cat_rows):
        gkeep &= (gt.area > 0) & (gt.area < np.inf)
    dkeep = in_img[dets.image] & in_cat[dets.category]
    if use_cats:
        g = _take(gt, np.flatnonzero(gkeep))
        dkeep &= federated_selection(g, dets)
        d, rows = dets, np.asarray(cat_rows, np.int64)
    else:  # one category; order within an image as the tool concatenates: catIds order, then file order
        rank = np.full(K, -1, np.int64)
        rank[cat_rows[::-1]] = np.arange(len(cat_rows))[::-1]  # first occurrence of a repeated id
        gi = np.flatnonzero(gkeep)
        g = _take(gt, gi[np.argsort(rank[gt.category[gi]], kind="stable")])
        g = replace(g, category=np.zeros(len(g), np.int64), category_ids=np.array([-1], np.int64), frequency=None,
                    negative=np.zeros(0, np.int64), not_exhaustive=np.zeros(0, np.int64),
                    category_names=None)
        di = np.flatnonzero(dkeep)
        di = di[np.argsort(rank[dets.category[di]], kind="stable")]
        d = dets.subset(di)
        d = replace(d, category=np.zeros(len(d), np.int64))
        dkeep = np.ones(len(d), bool)
        rows = np.zeros(1, np.int64)
    det = canonical_order(d, np.flatnonzero(dkeep))
    m = match_detections(g, d, det, iou_type=iou_type, iou_thresholds=np.asarray(iou_thrs, np.float64),
                         area_ranges=np.asarray(area_rng, np.float64).reshape(-1, 2), kpt_oks_sigmas=kpt_oks_sigmas,
                         kpt_use_area=kpt_use_area)
    if zero_id_unmatched and len(g) and np.any(g.ann_id == 0):
        _zero_id_as_official(g, d, det, m, iou_type, np.asarray(iou_thrs, np.float64), kpt_oks_sigmas, kpt_use_area)
    return ParamsMatch(gt=g, dets=d, det=det, match=m, cat_rows=rows)


def _zero_id_as_official(g: GroundTruth, d: Detections, det: np.ndarray, m: Matching, iou_type: str,
                         iou_thrs: np.ndarray, sigmas: np.ndarray | None = None, use_area: bool = True) -> None:
    """Turn the true positive that took a ground truth with annotation id 0 into a false positive,
    as the official tools count it. The matching itself is unchanged (they mark that ground truth
    taken too), so only the (image, category) groups holding such an annotation are replayed —
    with the official greedy loop — to find which detection took it at each area range and IoU
    threshold (usually one small group)."""
    import pycocotools.mask as mask_utils

    cand_at = np.full(len(det), -1, np.int64)
    cand_at[m.cand] = np.arange(len(m.cand))
    d_img, d_cat = d.image[det], d.category[det]
    for img, cat in {(int(g.image[z]), int(g.category[z])) for z in np.flatnonzero(g.ann_id == 0)}:
        gi = np.flatnonzero((g.image == img) & (g.category == cat))
        dp = np.flatnonzero((d_img == img) & (d_cat == cat))  # score desc, file order (canonical)
        dp = dp[cand_at[dp] >= 0]
        if not len(dp):
            continue
        crowd = [int(c) for c in g.crowd[gi]]
        if iou_type == "keypoints":
            from ..metrics.detection.oks import check_sigmas, oks_area, oks_matrix

            sg = check_sigmas(sigmas, g.keypoints.shape[1])
            ious = oks_matrix(d.keypoints[det[dp]], g.keypoints[gi], g.bbox[gi],
                              oks_area(g.bbox[gi], g.area[gi], use_area), sg)
        elif iou_type == "segm":
            h, w = (int(g.image_size[img, 0]), int(g.image_size[img, 1])) if g.image_size is not None else (0, 0)
            dd = [to_rle(d.segmentation[det[p]], h, w) for p in dp]
            gg = [to_rle(g.segmentation[i], h, w) for i in gi]
        else:
            dd, gg = d.bbox[det[dp]].tolist(), g.bbox[gi].tolist()
        if iou_type != "keypoints":
            ious = np.asarray(mask_utils.iou(dd, gg, crowd), np.float64).reshape(len(dp), len(gi))
        zero = g.ann_id[gi] == 0
        for a in range(m.gt_ignore.shape[0]):
            ig = m.gt_ignore[a, gi]
            order = np.argsort(ig, kind="stable")  # counted ground truths first, as the tools sort them
            for t, thr in enumerate(iou_thrs):
                taken = np.zeros(len(gi), bool)
                for k in range(len(dp)):
                    best, mi = min(float(thr), 1 - 1e-10), -1
                    for j in order:
                        if taken[j] and not crowd[j]:
                            continue
                        if mi > -1 and not ig[mi] and ig[j]:
                            break
                        if ious[k, j] < best:
                            continue
                        best, mi = ious[k, j], j
                    if mi < 0:
                        continue
                    taken[mi] = True
                    if zero[mi] and not ig[mi]:
                        c = cand_at[dp[k]]
                        if m.code[a, t, c] == MatchCode.TRUE_POSITIVE:
                            m.code[a, t, c] = MatchCode.UNMATCHED


@dataclass
class Accumulated:
    """The official ``accumulate`` arrays (-1 where the tool writes -1).

    precision, scores : (T, R, K, A, M); recall : (T, K, A, M); num_gt : (K, A) non-ignored ground
    truths; ranked : per (area, maxDets) the evaluated positions into ``ParamsMatch.det`` in ranked
    order (category, score desc, image, position) — what lvis-api's ``dt_pointers`` are built from.
    """

    precision: np.ndarray
    recall: np.ndarray
    scores: np.ndarray
    num_gt: np.ndarray
    ranked: dict


def accumulate_for_params(pm: ParamsMatch, *, rec_thrs: np.ndarray, max_dets: Sequence[int] | None) -> Accumulated:
    """Per-category precision / recall / scores for every IoU threshold, area range and maxDets
    (``max_dets`` None: one column, no cut — lvis-api)."""
    g, d, det, m = pm.gt, pm.dets, pm.det, pm.match
    rec_thrs = np.asarray(rec_thrs, np.float64)
    T, A = m.code.shape[1], m.gt_ignore.shape[0]
    R, Kall = len(rec_thrs), g.num_categories
    cuts = [None] if max_dets is None else list(max_dets)
    M = len(cuts)
    precision = np.full((T, R, Kall, A, M), -1.0)
    recall = np.full((T, Kall, A, M), -1.0)
    scores = np.full((T, R, Kall, A, M), -1.0)
    num_gt = np.stack([np.bincount(g.category[~m.gt_ignore[a]], minlength=Kall) for a in range(A)], 1) \
        if A else np.zeros((Kall, 0), np.int64)
    cat_of = d.category[det]
    ranked: dict = {}
    largest = int(m.group_rank.max()) + 1 if len(det) else 0  # the largest (image, category) group
    done: dict = {}  # a cut at or above the largest group keeps everything: computed once
    for mi, cut in enumerate(cuts):
        eff = None if cut is None or cut >= largest else cut
        if eff in done:
            first = done[eff]
            precision[..., mi], recall[..., mi], scores[..., mi] = (precision[..., first], recall[..., first],
                                                                    scores[..., first])
            for a in range(A):
                ranked[a, mi] = ranked[a, first]
            continue
        done[eff] = mi
        sel = np.arange(len(det)) if eff is None else np.flatnonzero(m.group_rank < eff)
        n = len(sel)
        pos = np.full(len(det), -1, np.int64)
        pos[sel] = np.arange(n)
        cp = pos[m.cand] if len(m.cand) else np.zeros(0, np.int64)
        at = np.full(n, -1, np.int64)
        keep = np.flatnonzero(cp >= 0)
        at[cp[keep]] = keep
        cand_pos = np.flatnonzero(at >= 0)
        cand_sel = at[cand_pos]
        seg = cat_of[sel]
        seg_start = np.searchsorted(seg, np.arange(Kall), "left")
        seg_end = np.searchsorted(seg, np.arange(Kall), "right")
        score_r = d.score[det[sel]]
        for a in range(A):
            ranked[a, mi] = sel
            ok = ~(m.det_out[a] | m.det_nel)[sel]
            okc = np.zeros(n + 1, np.int64)
            np.cumsum(ok, out=okc[1:])
            ng = num_gt[:, a]
            has = ng > 0
            rc = recall_counts(ng, rec_thrs)
            for t in range(T):
                c = pr_curves(seg_start, seg_end, cand_pos, m.code[a, t, cand_sel], okc, ng, rc)
                precision[t, :, has, a, mi] = c.precision[has]
                recall[t, has, a, mi] = c.recall[has]
                scores[t, :, has, a, mi] = _scores_at_recall(c.tp_pos, c.tp_seg, seg_start, seg_end, rc,
                                                             score_r, Kall)[has]
    rows = pm.cat_rows
    return Accumulated(precision=precision[:, :, rows], recall=recall[:, rows], scores=scores[:, :, rows],
                       num_gt=num_gt[rows], ranked=ranked)


def _scores_at_recall(tp_pos, tp_seg, seg_start, seg_end, rc, score_r, K) -> np.ndarray:
    """(K, R) pycocotools' ``scores``: the score of the ranked entry at ``searchsorted(rc, r)`` — the
    list's first entry for a recall point needing no true positive, the m-th true positive for one
    needing m; 0 past the last true positive (and for an empty list)."""
    R = rc.shape[1]
    out = np.zeros((K, R))
    ntp = np.bincount(tp_seg, minlength=K)
    first = np.zeros(K, np.int64)
    np.cumsum(ntp[:-1], out=first[1:])
    nonempty = seg_end > seg_start
    idx = np.where(rc > 0, first[:, None] + rc - 1, -1)
    ok = (rc <= ntp[:, None]) & nonempty[:, None]
    at_tp = ok & (rc > 0)
    if at_tp.any():
        out[at_tp] = score_r[tp_pos[idx[at_tp]]]
    at0 = ok & (rc == 0)
    if at0.any():
        out[at0] = score_r[np.broadcast_to(seg_start[:, None], rc.shape)[at0]]
    return out


def mean_defined(s: np.ndarray) -> float:
    """The official summary mean: over the entries > -1; -1 where there is none."""
    v = s[s > -1]
    return float(np.mean(v)) if v.size else -1.0
