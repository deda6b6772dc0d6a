"""Object keypoint similarity (OKS): pycocotools' ``computeOks``, vectorised over candidate pairs.

For a detection ``d`` and a ground truth ``g`` with keypoints ``(x_i, y_i, v_i)``, ``i = 1..K``,
per-keypoint falloffs ``sigma_i`` (the dataset's ``kpt_oks_sigmas``; COCO's 17 by default) and the
ground truth's ``area`` (the file's field):

    e_i = ((xd_i - xg_i)^2 + (yd_i - yg_i)^2) / (2 sigma_i)^2 / (area + eps) / 2
    OKS = mean over the visible ground-truth keypoints (v_i > 0) of exp(-e_i)

A ground truth with no visible keypoint is scored against its box extended by the box size on every
side (``[x - w, x + 2w] x [y - h, y + 2h]``): ``dx_i`` is the detection keypoint's distance outside
that region, and the mean is over all K keypoints. The detection's visibility flags are not used.
Every value is computed with the same floating-point operations, in the same order, as
pycocotools (the mean sums the visible terms as ``numpy.sum`` does), so the OKS values are equal.

Ground truth with ``num_keypoints == 0`` is ignored (pycocotools' ``_prepare``); that rule lives in
:func:`~.match.match_detections`. Helpers here also give a keypoint result's box and area (its
keypoints' extent, as ``COCO.loadRes``) and the (D, G) matrix of one (image, category) group.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._validation import check_array
from ...errors import InputError

#: COCO's person-keypoint falloffs (pycocotools ``Params.setKpParams``), in keypoint order
COCO_KPT_OKS_SIGMAS = np.array([.26, .25, .25, .35, .35, .79, .79, .72, .72, .62, .62, 1.07, 1.07, .87, .87,
                                .89, .89]) / 10.0

_PAIR_CHUNK = 1 << 15  # pairs per batch: (chunk, K) float arrays stay a few MB each

__all__ = ["COCO_KPT_OKS_SIGMAS", "check_sigmas", "keypoint_array", "keypoint_extent", "oks_pairs", "oks_matrix"]


def check_sigmas(sigmas: Any, num_keypoints: int | None, name: str = "kpt_oks_sigmas") -> np.ndarray:
    """``sigmas`` as (K,) float64, positive and finite; None gives COCO's 17. K must equal
    ``num_keypoints`` (the data's keypoints per annotation) when that is known."""
    s = COCO_KPT_OKS_SIGMAS.copy() if sigmas is None else check_array(sigmas, name, ndim=1, kind="float")
    s = s.astype(np.float64, copy=False)
    if len(s) == 0 or np.any(s <= 0):
        raise InputError(f"{name}: expected one positive sigma per keypoint, got {s.tolist()}")
    if num_keypoints is not None and len(s) != num_keypoints:
        hint = " (the default is COCO's 17; give the dataset's own sigmas)" if sigmas is None else ""
        raise InputError(f"{name}: {len(s)} sigmas, but the keypoints have {num_keypoints} points each{hint}")
    return s


def keypoint_array(lists: list, name: str, what: str = "annotation") -> np.ndarray:
    """(n, K, 3) float64 from n flat ``[x1, y1, v1, x2, ...]`` lists of one length 3K (K >= 1);
    a missing, ragged or non-numeric list is one line naming its position."""
    n = len(lists)
    if n == 0:
        return np.zeros((0, 0, 3))
    lengths = [len(k) if isinstance(k, (list, tuple, np.ndarray)) else -1 for k in lists]
    bad = next((i for i, m in enumerate(lengths) if m < 0), None)
    if bad is not None:
        got = "none" if lists[bad] is None else type(lists[bad]).__name__
        raise InputError(f"{name}: {what} {bad} has no keypoints list (got {got}); keypoints evaluation needs "
                         f"'keypoints' [x1, y1, v1, ...] in every {what}")
    m = lengths[0]
    if m == 0 or m % 3:
        raise InputError(f"{name}: {what} 0 has {m} keypoint numbers; expected 3 per keypoint (x, y, v)")
    bad = next((i for i, k in enumerate(lengths) if k != m), None)
    if bad is not None:
        raise InputError(f"{name}: {what} {bad} has {lengths[bad]} keypoint numbers, {what} 0 has {m}; every "
                         f"{what} needs the same {m // 3} keypoints (x, y, v each)")
    try:
        a = np.asarray(lists, dtype=np.float64)
    except (TypeError, ValueError):
        bad = next(i for i, k in enumerate(lists) if not _numeric(k))
        raise InputError(f"{name}: {what} {bad}'s keypoints are not all numbers") from None
    if not np.all(np.isfinite(a)):
        bad = int(np.flatnonzero(~np.all(np.isfinite(a), axis=1))[0])
        raise InputError(f"{name}: {what} {bad} has a non-finite keypoint value")
    return a.reshape(n, m // 3, 3)


def _numeric(k: Any) -> bool:
    try:
        np.asarray(k, dtype=np.float64)
        return True
    except (TypeError, ValueError):
        return False


def keypoint_extent(kpts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Box ``[x0, y0, x1 - x0, y1 - y0]`` (n, 4) and area ``(x1 - x0) * (y1 - y0)`` (n,) of every
    keypoint (visible or not), as ``COCO.loadRes`` gives a keypoint result without a box."""
    n = len(kpts)
    if n == 0 or kpts.shape[1] == 0:
        return np.zeros((n, 4)), np.zeros(n)
    x, y = kpts[:, :, 0], kpts[:, :, 1]
    x0, x1, y0, y1 = x.min(1), x.max(1), y.min(1), y.max(1)
    return np.stack([x0, y0, x1 - x0, y1 - y0], 1), (x1 - x0) * (y1 - y0)


def _oks(dk: np.ndarray, gk: np.ndarray, gbox: np.ndarray, garea: np.ndarray, var: np.ndarray) -> np.ndarray:
    """OKS of P paired keypoint sets: dk, gk (P, K, 3); gbox (P, 4); garea (P,); var (K,) = (2 sigma)^2."""
    P, K = dk.shape[0], dk.shape[1]
    out = np.zeros(P)
    if P == 0:
        return out
    xd, yd = dk[:, :, 0], dk[:, :, 1]
    vis = gk[:, :, 2] > 0
    k1 = np.count_nonzero(vis, axis=1)
    dx = xd - gk[:, :, 0]
    dy = yd - gk[:, :, 1]
    none = np.flatnonzero(k1 == 0)
    if len(none):  # distance outside the box extended by its size on every side
        b = gbox[none]
        x0 = (b[:, 0] - b[:, 2])[:, None]
        x1 = (b[:, 0] + b[:, 2] * 2)[:, None]
        y0 = (b[:, 1] - b[:, 3])[:, None]
        y1 = (b[:, 1] + b[:, 3] * 2)[:, None]
        xn, yn = xd[none], yd[none]
        dx[none] = np.maximum(0.0, x0 - xn) + np.maximum(0.0, xn - x1)
        dy[none] = np.maximum(0.0, y0 - yn) + np.maximum(0.0, yn - y1)
    e = (dx ** 2 + dy ** 2) / var / (garea + np.spacing(1))[:, None] / 2
    val = np.exp(-e)
    # visible terms first, in keypoint order; rows summed with numpy's own summation of k terms
    n_terms = np.where(k1 > 0, k1, K)
    order = np.argsort(~vis, axis=1, kind="stable")
    order[k1 == 0] = np.arange(K)
    val = np.take_along_axis(val, order, axis=1)
    for k in np.unique(n_terms):
        rows = np.flatnonzero(n_terms == k)
        out[rows] = np.sum(np.ascontiguousarray(val[rows, :k]), axis=1) / k
    return out


def oks_area(bbox: np.ndarray, area: np.ndarray, use_area: bool = True) -> np.ndarray:
    """The scale OKS divides by: the ground truth's ``area`` (n,), or — ``use_area=False``, CrowdPose,
    whose annotations carry no area — ``h * w * 0.53`` of its box ``bbox`` (n, 4), as CrowdPose's
    evaluation (and faster-coco-eval's ``use_area=False``) computes it."""
    if use_area:
        return area
    return bbox[:, 3] * bbox[:, 2] * 0.53


def oks_pairs(gt: Any, dets: Any, det: np.ndarray, grp: np.ndarray, lo: np.ndarray, cnt: np.ndarray,
              g_order: np.ndarray, min_thr: float, sigmas: np.ndarray,
              use_area: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Candidate pairs (group-order position, gt index, OKS >= ``min_thr``) for
    :func:`~.match.match_detections`: every detection against every ground truth of its (image,
    category) group, in batches. ``use_area=False``: the OKS scale is the box's (:func:`oks_area`)."""
    if gt.keypoints is None or dets.keypoints is None:
        if (gt.keypoints is not None or len(gt) == 0) and not np.any(cnt > 0):
            # the results' keypoints are never read: no detection meets a ground truth (as pycocotools)
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
        raise InputError("iou_type='keypoints' needs 'keypoints' in both the ground truth and the results")
    K = gt.keypoints.shape[1]
    if dets.keypoints.shape[1] != K and len(dets) and len(gt):
        raise InputError(f"results: detections have {dets.keypoints.shape[1]} keypoints each, the ground truth "
                         f"{K}; they must be the same keypoints")
    sigmas = check_sigmas(sigmas, K if len(gt) else None)  # no ground truth: no points to count
    var = (sigmas * 2) ** 2
    scale = oks_area(gt.bbox, gt.area, use_area)
    has = np.flatnonzero(cnt > 0)
    if not len(has):
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    cnt_h, lo_h = cnt[has], lo[has]
    csum = np.cumsum(cnt_h)
    out_d, out_g, out_v = [], [], []
    s = 0
    while s < len(has):
        base = csum[s - 1] if s else 0
        e = max(int(np.searchsorted(csum, base + _PAIR_CHUNK, "right")), s + 1)
        c = cnt_h[s:e]
        pl = np.repeat(np.arange(s, e), c)
        gi = g_order[np.repeat(lo_h[s:e] - (np.cumsum(c) - c), c) + np.arange(int(c.sum()))]
        di = det[grp[has[pl]]]
        v = _oks(dets.keypoints[di], gt.keypoints[gi], gt.bbox[gi], scale[gi], var)
        keep = np.flatnonzero(v >= min_thr)
        out_d.append(has[pl[keep]])
        out_g.append(gi[keep])
        out_v.append(v[keep])
        s = e
    return np.concatenate(out_d), np.concatenate(out_g), np.concatenate(out_v)


def oks_matrix(dk: np.ndarray, gk: np.ndarray, gbox: np.ndarray, garea: np.ndarray, sigmas: np.ndarray) -> np.ndarray:
    """(D, G) OKS of D detections' and G ground truths' keypoints ((D, K, 3), (G, K, 3))."""
    D, G = len(dk), len(gk)
    var = (np.asarray(sigmas, np.float64) * 2) ** 2
    d = np.repeat(np.arange(D), G)
    g = np.tile(np.arange(G), D)
    return _oks(dk[d], gk[g], gbox[g], garea[g], var).reshape(D, G)
