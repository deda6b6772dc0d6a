"""pycocotools' ``iouType="keypoints"`` for the drop-ins: the keypoint parameters (``setKpParams``),
``loadRes``'s keypoint branch, ``summarizeKps``'s ten stats and ``computeOks`` for one (image,
category) group. The matching itself is vistabench's OKS (:mod:`vistabench.metrics.detection.oks`).

faster-coco-eval's ``iouType="keypoints_crowd"`` (CrowdPose): the same parameters and matching, OKS
scaled by the box (``h * w * 0.53``) when ``use_area=False``, and nine stats: AP / AR at
0.50:0.95, 0.50, 0.75, then AP of the easy / medium / hard images (``crowdIndex`` < 0.2, < 0.8,
the rest), each the mean of the whole precision array at the first area range (its -1 cells
included, as CrowdPose computes it), rounded to 4 decimals.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..errors import InputError
from ..metrics.detection import (
    COCO_KPT_OKS_SIGMAS,
    IOU_THRESHOLDS,
    KEYPOINT_AREA_LABELS,
    KEYPOINT_AREA_RANGES,
    KEYPOINT_MAX_DETS,
    RECALL_THRESHOLDS,
    keypoint_array,
    oks_area,
    oks_matrix,
)

__all__ = ["set_keypoint_params", "prepare_keypoint_results", "summarize_keypoint_stats", "group_oks",
           "keypoint_ignore", "KEYPOINT_TYPES", "CROWD_STATS_LABELS", "STATS_LABELS", "crowd_splits", "summarize_crowd_stats"]

#: the iouTypes matched by OKS
KEYPOINT_TYPES = ("keypoints", "keypoints_crowd")
#: faster-coco-eval's ``stats_as_dict`` names of the nine keypoints_crowd stats, in order
CROWD_STATS_LABELS = ("AP_all", "AP_50", "AP_75", "AR_all", "AR_50", "AR_75", "AP_easy", "AP_medium", "AP_hard")
#: ``stats_as_dict``'s names of ``stats`` per iouType (faster-coco-eval's; detection: the twelve
#: pycocotools stats, ``bbox`` and ``segm`` alike)
STATS_LABELS = {"keypoints_crowd": CROWD_STATS_LABELS,
                "keypoints": ("AP_all", "AP_50", "AP_75", "AP_medium", "AP_large", "AR_all", "AR_50", "AR_75",
                              "AR_medium", "AR_large"),
                "bbox": ("AP_all", "AP_50", "AP_75", "AP_small", "AP_medium", "AP_large", "AR_all", "AR_second",
                         "AR_third", "AR_small", "AR_medium", "AR_large")}
#: crowdIndex bounds of the easy / medium / hard splits (CrowdPose's, as faster-coco-eval's summarize)
CROWD_SPLIT_BOUNDS = (0.2, 0.8)


def set_keypoint_params(p: Any) -> None:
    """``Params.setKpParams``: maxDets [20], areas all / medium / large, COCO's 17 sigmas."""
    p.imgIds, p.catIds = [], []
    p.iouThrs = IOU_THRESHOLDS.copy()
    p.recThrs = RECALL_THRESHOLDS.copy()
    p.maxDets = list(KEYPOINT_MAX_DETS)
    p.areaRng = KEYPOINT_AREA_RANGES.tolist()
    p.areaRngLbl = list(KEYPOINT_AREA_LABELS)
    p.useCats = 1
    p.kpt_oks_sigmas = COCO_KPT_OKS_SIGMAS.copy()


def prepare_keypoint_results(anns: list, what: str) -> None:
    """``loadRes``'s keypoint branch (the first result has neither a box nor a mask): every result's
    ``bbox`` and ``area`` become its keypoints' extent, ``id`` its position + 1 (in place)."""
    kp = keypoint_array([a.get("keypoints") if isinstance(a, dict) else None for a in anns], what, "result")
    x, y = kp[:, :, 0], kp[:, :, 1]
    x0, x1, y0, y1 = x.min(1).tolist(), x.max(1).tolist(), y.min(1).tolist(), y.max(1).tolist()
    for i, ann in enumerate(anns):
        ann["area"] = (x1[i] - x0[i]) * (y1[i] - y0[i])
        ann["id"] = i + 1
        ann["bbox"] = [x0[i], y0[i], x1[i] - x0[i], y1[i] - y0[i]]


def summarize_keypoint_stats(summarize: Callable[..., float]) -> np.ndarray:
    """``summarizeKps``: the ten stats through the evaluator's ``_summarize`` (which prints each line),
    read at maxDets 20 whatever ``params.maxDets`` is (as pycocotools: -1 when 20 is not among them)."""
    m = KEYPOINT_MAX_DETS[-1]
    s = summarize
    return np.array([s(1, maxDets=m), s(1, maxDets=m, iouThr=.5), s(1, maxDets=m, iouThr=.75),
                     s(1, maxDets=m, areaRng="medium"), s(1, maxDets=m, areaRng="large"), s(0, maxDets=m),
                     s(0, maxDets=m, iouThr=.5), s(0, maxDets=m, iouThr=.75), s(0, maxDets=m, areaRng="medium"),
                     s(0, maxDets=m, areaRng="large")])


def group_oks(dt: list[dict], gt: list[dict], sigmas: Any, max_det: int, use_area: bool = True) -> np.ndarray | list:
    """``computeOks`` of one group: (D, G) OKS of the top ``max_det`` detections by descending score
    (ties in list order) and the ground truth; ``[]`` when either is empty. ``use_area=False``: OKS
    scaled by the box (:func:`~vistabench.metrics.detection.oks_area`)."""
    order = np.argsort([-d["score"] for d in dt], kind="mergesort")
    dt = [dt[i] for i in order][:max_det]
    if len(gt) == 0 or len(dt) == 0:
        return []
    s = np.asarray(sigmas, np.float64).reshape(-1)
    dk = keypoint_array([d.get("keypoints") for d in dt], "cocoDt", "result")
    gk = keypoint_array([g.get("keypoints") for g in gt], "cocoGt", "annotation")
    for name, k in (("cocoDt", dk), ("cocoGt", gk)):
        if k.shape[1] != len(s):
            raise InputError(f"params.kpt_oks_sigmas: {len(s)} sigmas, but {name}'s keypoints have {k.shape[1]} "
                             f"points each")
    box = np.asarray([g["bbox"] for g in gt], np.float64).reshape(-1, 4)
    area = np.asarray([g["area"] for g in gt], np.float64) if use_area else np.zeros(len(gt))
    return oks_matrix(dk, gk, box, oks_area(box, area, use_area), s)


def keypoint_ignore(gt: list[dict]) -> list[bool]:
    """pycocotools' ``_prepare`` for keypoints: ground truth with ``num_keypoints == 0`` is ignored."""
    try:
        return [g["num_keypoints"] == 0 for g in gt]
    except KeyError:
        raise InputError("cocoGt: an annotation lacks 'num_keypoints' (keypoints evaluation needs it)") from None


def crowd_splits(images: list[dict]) -> tuple[list, list, list]:
    """Image ids of the easy / medium / hard CrowdPose splits: ``crowdIndex`` < 0.2, < 0.8, the rest
    (in the dataset's image order)."""
    first, second = CROWD_SPLIT_BOUNDS
    out: tuple[list, list, list] = ([], [], [])
    for img in images:
        try:
            ci = img["crowdIndex"]
        except (KeyError, TypeError):
            raise InputError(f"cocoGt: image {img.get('id') if isinstance(img, dict) else img!r} lacks 'crowdIndex' "
                             f"(iouType 'keypoints_crowd' splits the images by it)") from None
        if not isinstance(ci, (int, float)) or isinstance(ci, bool) or not np.isfinite(ci):
            raise InputError(f"cocoGt: image {img.get('id')!r} has crowdIndex {ci!r}; expected a finite number")
        out[0 if ci < first else 1 if ci < second else 2].append(img["id"])
    return out


def summarize_crowd_stats(ev: Any) -> np.ndarray:
    """faster-coco-eval's keypoints_crowd summary for the evaluator ``ev`` (evaluated and
    accumulated): six stats through ``ev._summarize`` at ``maxDets[-1]``, then each split evaluated
    again (``params.imgIds`` set to it, left at the hard split afterwards, as faster-coco-eval
    leaves it) and its AP, rounded to 4 decimals. Returns the nine stats, :data:`CROWD_STATS_LABELS`."""
    p = ev.params
    m = p.maxDets[-1]
    s = ev._summarize
    stats = [s(1, maxDets=m), s(1, maxDets=m, iouThr=.5), s(1, maxDets=m, iouThr=.75),
             s(0, maxDets=m), s(0, maxDets=m, iouThr=.5), s(0, maxDets=m, iouThr=.75)]
    typed = []
    for ids in crowd_splits(ev.cocoGt.dataset.get("images", [])):
        ev.params.imgIds = ids
        ev.evaluate()
        ev.accumulate()
        typed.append(float(round(np.mean(ev.eval["precision"][:, :, :, 0, :]), 4)))  # numpy's rounding, as theirs
    iou = f"{p.iouThrs[0]:0.2f}:{p.iouThrs[-1]:0.2f}"
    for name, v in zip(("easy", "medium", "hard"), typed):
        print(f" {'Average Precision':<18} (AP) @[ IoU={iou:<9} | type={name:>6s} | maxDets={m:>3d} ] = {v:0.3f}")
    return np.array(stats + typed, np.float64)
