"""Summary: lvis-api's / pycocotools' keys (AP, AP50, ..., AR@N) from an accumulation: means over
the defined entries (the tools' -1 left out), NaN where none is."""

from __future__ import annotations

import numpy as np

from .accumulate import Accumulation, PooledAccumulation
from .data import FREQUENCIES, GroundTruth
from .params import AREA_LABELS, COCO_MAX_DETS, IOU_THRESHOLDS, KEYPOINT_AREA_LABELS, KEYPOINT_MAX_DETS

#: pycocotools' ``summarizeKps`` stats, in its order: (key, AP or AR, IoU threshold, area)
KEYPOINT_STATS: tuple[tuple[str, bool, float | None, str], ...] = (
    ("AP", True, None, "all"), ("AP50", True, 0.5, "all"), ("AP75", True, 0.75, "all"),
    ("APm", True, None, "medium"), ("APl", True, None, "large"),
    ("AR@20", False, None, "all"), ("AR50@20", False, 0.5, "all"), ("AR75@20", False, 0.75, "all"),
    ("ARm@20", False, None, "medium"), ("ARl@20", False, None, "large"))


def _mean_defined(s: np.ndarray) -> float:
    v = s[~np.isnan(s)]
    return float(np.mean(v)) if len(v) else float("nan")


def _mean_gathered(v: np.ndarray) -> float:
    """:func:`_mean_defined` of an array already free of NaN (one contiguous mean)."""
    return float(np.mean(np.ascontiguousarray(v).reshape(-1))) if v.size else float("nan")


def summarize(acc: Accumulation, gt: GroundTruth, *, max_dets_label: int | str | None) -> dict[str, float]:
    """lvis-api's / pycocotools' summary keys from an :class:`Accumulation` (means over the defined
    entries, NaN where none is).

    Keys: AP, AP50, AP75, APs, APm, APl, APr, APc, APf (NaN for COCO); LVIS: AR@N, ARs@N, ARm@N,
    ARl@N with N = ``max_dets_label``; COCO: AR@1, AR@10, AR@100, ARs@100, ARm@100, ARl@100.
    """
    precision, recall = acc.precision, acc.recall
    lvis = gt.format == "lvis"
    # precision and recall are NaN exactly for the categories without ground truth in the area:
    # gathering the others gives the entries ``s[~isnan(s)]`` in the same order (the same mean)
    defined = acc.num_gt > 0

    def ap(iou_thr=None, area="all", freq=None):
        a = AREA_LABELS.index(area)
        cols = defined[:, a] if freq is None else defined[:, a] & (gt.frequency == freq)
        t = slice(None) if iou_thr is None else np.flatnonzero(iou_thr == IOU_THRESHOLDS)
        return _mean_gathered(precision[t][:, :, np.flatnonzero(cols), a])

    def ar(area="all", mi=None):
        a = AREA_LABELS.index(area)
        cols = np.flatnonzero(defined[:, a])
        return _mean_gathered(recall[:, cols, a] if mi is None else recall[:, cols, a, mi])

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


def summarize_keypoints(acc: Accumulation) -> dict[str, float]:
    """pycocotools' ten keypoint stats (``summarizeKps``, maxDets 20) from a keypoint
    :class:`Accumulation` (areas all, medium, large): AP, AP50, AP75, APm, APl, AR@20, AR50@20,
    AR75@20, ARm@20, ARl@20; NaN where pycocotools prints -1."""
    out = {}
    m = len(KEYPOINT_MAX_DETS) - 1
    for key, is_ap, thr, area in KEYPOINT_STATS:
        a = KEYPOINT_AREA_LABELS.index(area)
        s = acc.precision[:, :, :, a] if is_ap else acc.recall[:, :, a, m]
        if thr is not None:
            s = s[np.flatnonzero(thr == IOU_THRESHOLDS)]
        out[key] = _mean_defined(s)
    return out


def summarize_pooled(acc: PooledAccumulation) -> dict[str, float]:
    """AP, AP50, AP75 of the "all" pool and APr/APc/APf of the frequency pools."""
    p = acc.precision
    res = {"AP": _mean_defined(p[:, :, 0]),
           "AP50": _mean_defined(p[np.flatnonzero(0.5 == IOU_THRESHOLDS), :, 0]),
           "AP75": _mean_defined(p[np.flatnonzero(0.75 == IOU_THRESHOLDS), :, 0])}
    for i, name in enumerate(acc.pools[1:], start=1):
        res[f"AP{name}"] = _mean_defined(p[:, :, i])
    return res
