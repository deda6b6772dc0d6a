"""pycocotools' ``iouType="keypoints"`` for the drop-ins: the keypoint parameters (``setKpParams``),
``loadRes``'s keypoint branch, ``summarizeKps``'s ten stats and ``computeOks`` for one (image,
category) group. The matching itself is vistabench's OKS (:mod:`vistabench.metrics.detection.oks`).
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
    oks_matrix,
)

__all__ = ["set_keypoint_params", "prepare_keypoint_results", "summarize_keypoint_stats", "group_oks",
           "keypoint_ignore"]


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


def group_oks(dt: list[dict], gt: list[dict], sigmas: Any, max_det: int) -> np.ndarray | list:
    """``computeOks`` of one group: (D, G) OKS of the top ``max_det`` detections by descending score
    (ties in list order) and the ground truth; ``[]`` when either is empty."""
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
    return oks_matrix(dk, gk, np.asarray([g["bbox"] for g in gt], np.float64).reshape(-1, 4),
                      np.asarray([g["area"] for g in gt], np.float64), s)


def keypoint_ignore(gt: list[dict]) -> list[bool]:
    """pycocotools' ``_prepare`` for keypoints: ground truth with ``num_keypoints == 0`` is ignored."""
    try:
        return [g["num_keypoints"] == 0 for g in gt]
    except KeyError:
        raise InputError("cocoGt: an annotation lacks 'num_keypoints' (keypoints evaluation needs it)") from None
