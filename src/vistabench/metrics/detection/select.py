"""Selection: which detections each AP variant evaluates, and the canonical evaluation order.

* :func:`top_per_image` / :func:`top_mask` — lvis-api's ``limit_dets_per_image`` (AP^Old's 300);
* :func:`top_per_class` — the authors' per-category top-k (AP^Fixed, AP^Pool);
* :func:`federated_selection` — the one place LVIS's federated rule lives (AP and the calibration
  labels both use it); :func:`lvis_area_filter` — lvis-api's ``0 < area < inf`` on ground truth;
* :func:`canonical_order` — by category, descending score, image, file position.

Every ordering is "integer keys, then descending score, ties in file order", built from one score
sort (:class:`~.sort.ScoreRank`) by stable re-sorts (:mod:`.sort`).
"""

from __future__ import annotations

import numpy as np

from ..._validation import check_value
from .data import Detections, GroundTruth
from .sort import ScoreRank, group_ranks, member, score_order, sorted_unique, stable_by, stable_by_keys


def rank_within(key: np.ndarray, score: np.ndarray) -> np.ndarray:
    """Rank of each entry within its ``key`` group by descending score, ties in input order.

    Parameters
    ----------
    key : (n,) int group of each entry; score : (n,) float.

    Returns
    -------
    (n,) int64, 0 for each group's best entry.

    >>> rank_within(np.array([0, 1, 0, 0]), np.array([0.5, 0.9, 0.7, 0.5])).tolist()
    [1, 0, 0, 2]
    """
    key = np.asarray(key)
    score = np.asarray(score, np.float64)
    if len(key) == 0:
        return np.zeros(0, np.int64)
    if key.dtype.kind in "iu" and key.min() >= 0:  # packed-key re-sort of the one score sort
        order, sorted_keys = stable_by_keys(score_order(score), key, int(key.max()))
    else:
        order = np.argsort(-score, kind="stable")
        order = order[np.argsort(key[order], kind="stable")]
        sorted_keys = key[order]
    rank = np.empty(len(order), np.int64)
    rank[order] = group_ranks(sorted_keys)
    return rank


def top_mask(key: np.ndarray, by_score: np.ndarray, k: int) -> np.ndarray:
    """(n,) bool: the top ``k`` by score within each non-negative int ``key`` group (ties: file
    order), given ``by_score`` = :func:`~.sort.score_order` of the scores (the evaluation's one sort)."""
    n = len(key)
    mask = np.ones(n, bool)
    big = np.bincount(key) > k if n else np.zeros(0, bool)
    if not big.any():  # no group is cut (e.g. 300 detections per image)
        return mask
    o = by_score[big[key][by_score]] if not big.all() else by_score  # only the groups that are cut
    o, ko = stable_by_keys(o, key, len(big) - 1)
    mask[o[group_ranks(ko) >= k]] = False
    return mask


def top_per_image(dets: Detections, *, k: int) -> np.ndarray:
    """Indices (file order) of each image's top ``k`` detections by score (ties: earlier first).

    This is ``LVISResults.limit_dets_per_image`` (a stable descending sort, then a cut).
    """
    k = check_value(k, "max_dets_per_image", type=int, low=0, low_open=True)
    return np.flatnonzero(rank_within(dets.image, dets.score) < k)


def top_per_class(dets: Detections, *, k: int) -> np.ndarray:
    """Indices (file order) of each category's top ``k`` detections over the whole set.

    As the authors' ``evaluate_ap_fixed.py`` (stable descending sort per category, then a cut).
    """
    k = check_value(k, "dets_per_class", type=int, low=0, low_open=True)
    return np.flatnonzero(rank_within(dets.category, dets.score) < k)


def first_per_class(dets: Detections, *, k: int) -> np.ndarray:
    """Indices (file order) of each category's first ``k`` detections in file order.

    What large-vocab-devil's ``_limit_dets`` (``lvdevil/eval_wrapper.py``, used for the calibration
    labels of ``lvdevil/calib.py``) keeps: its heap replacement is guarded by ``len(heap) > topk``,
    which never holds, so the first ``topk`` detections of a class are kept whatever their scores.
    """
    k = check_value(k, "dets_per_class", type=int, low=0, low_open=True)
    cat = np.asarray(dets.category)
    order = np.argsort(cat, kind="stable")
    first = np.searchsorted(cat[order], cat[order], side="left")
    occurrence = np.empty(len(cat), dtype=np.int64)
    occurrence[order] = np.arange(len(cat)) - first
    return np.flatnonzero(occurrence < k)


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
    pos_keys = sorted_unique(gt.image * K + gt.category)
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


def canonical_order(dets: Detections, idx: np.ndarray, *, score_rank: np.ndarray | None = None) -> np.ndarray:
    """``idx`` sorted by category, descending score, image, file position (the evaluation order).

    ``score_rank`` : the evaluation's dense score ranks (:class:`~.sort.ScoreRank` ``.rank``), if
    already computed; used when ``idx`` is ascending (stable re-sorts, least significant key first).
    """
    idx = np.asarray(idx, np.int64)
    if len(idx) == 0:
        return idx
    if len(idx) == 1 or np.all(idx[1:] > idx[:-1]):
        srank = ScoreRank.of(dets.score).rank if score_rank is None else score_rank
        img, r = dets.image[idx], srank[idx]
        n_img, n_rank = int(img.max()) + 1, int(r.max()) + 1
        top = (int(dets.category[idx].max()) * n_rank + n_rank - 1) * n_img + n_img - 1
        if top.bit_length() + (len(idx) - 1).bit_length() <= 62:  # (category, score, image) in one packed sort
            key = (dets.category[idx] * n_rank + r) * n_img + img
            return idx[stable_by(np.arange(len(idx)), key, top)]
        o = stable_by(idx, dets.image, int(dets.image[idx].max()))
        r = srank[o]
        S = int(r.max()) + 1
        key = dets.category[o] * S + r  # (category, score) in one key
        return o[stable_by(np.arange(len(o)), key, int(key.max()))]
    o = np.argsort(dets.image[idx], kind="stable")  # stable passes, last key first (as lexsort)
    o = o[np.argsort(-dets.score[idx][o], kind="stable")]
    o = o[np.argsort(dets.category[idx][o], kind="stable")]
    return idx[o]
