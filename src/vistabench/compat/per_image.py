"""Per-(image, category) evaluation records, built on request: lvis-api's ``eval_imgs`` /
``evaluate_img`` / ``ious`` and pycocotools' ``evalImgs`` / ``evaluateImg`` / ``ious``.

The scores come from the vectorised path (:mod:`.evaluation`); these records exist for code that
reads them (pooled re-accumulations, error analyses). They follow the official loops one group at a
time — as slow as the official tools — so they are only computed when asked for.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..metrics.detection import to_rle

__all__ = ["group_ious", "evaluate_group"]


def group_ious(dt: Sequence[dict], gt: Sequence[dict], *, iou_type: str, size: tuple[int, int],
               crowd: Sequence[int]) -> np.ndarray | list:
    """(D, G) IoU of the detections (sorted by descending score, ties in list order) and the ground
    truth, as the tools' ``compute_iou`` / ``computeIoU`` (``[]`` when the group is empty)."""
    import pycocotools.mask as mask_utils

    if len(gt) == 0 and len(dt) == 0:
        return []
    order = np.argsort([-d["score"] for d in dt], kind="mergesort")
    dt = [dt[i] for i in order]
    if iou_type == "segm":
        h, w = size
        g = [to_rle(x["segmentation"], h, w) for x in gt]
        d = [to_rle(x["segmentation"], h, w) for x in dt]
    else:
        g = [x["bbox"] for x in gt]
        d = [x["bbox"] for x in dt]
    return mask_utils.iou(d, g, [int(c) for c in crowd])


def evaluate_group(gt: list[dict], dt: list[dict], ious, *, iou_thrs: np.ndarray, area_rng: Sequence[float],
                   coco: bool, max_det: int | None = None, not_exhaustive: set | None = None,
                   extra_ignore: Sequence[bool] | None = None) -> dict | None:
    """One record of ``evaluate_img`` (lvis-api, ``coco=False``) or ``evaluateImg`` (pycocotools,
    ``coco=True``: crowd regions, the ``max_det`` cut, camelCase keys). ``extra_ignore``: ground
    truth ignored besides the flag (pycocotools keypoints: ``num_keypoints == 0``)."""
    if len(gt) == 0 and len(dt) == 0:
        return None
    flag = "iscrowd" if coco else "ignore"  # pycocotools: ignore = iscrowd
    extra = extra_ignore if extra_ignore is not None else [False] * len(gt)
    g_ign = [1 if (g.get(flag, 0) or x or g["area"] < area_rng[0] or g["area"] > area_rng[1]) else 0
             for g, x in zip(gt, extra)]
    g_idx = np.argsort(g_ign, kind="mergesort")
    gt = [gt[i] for i in g_idx]
    d_idx = np.argsort([-d["score"] for d in dt], kind="mergesort")
    dt = [dt[i] for i in (d_idx if max_det is None else d_idx[:max_det])]
    crowd = [int(g.get("iscrowd", 0)) for g in gt] if coco else [0] * len(gt)
    ious = ious[:, g_idx] if len(ious) > 0 else ious
    T, G, D = len(iou_thrs), len(gt), len(dt)
    gtm, dtm = np.zeros((T, G)), np.zeros((T, D))
    gt_ig = np.array([g_ign[i] for i in g_idx])
    dt_ig = np.zeros((T, D))
    if len(ious) != 0:
        for ti, thr in enumerate(iou_thrs):
            for di, d in enumerate(dt):
                iou = min([thr, 1 - 1e-10])
                m = -1
                for gi in range(G):
                    if gtm[ti, gi] > 0 and not crowd[gi]:
                        continue
                    if m > -1 and gt_ig[m] == 0 and gt_ig[gi] == 1:
                        break
                    if ious[di, gi] < iou:
                        continue
                    iou = ious[di, gi]
                    m = gi
                if m == -1:
                    continue
                dt_ig[ti, di] = gt_ig[m]
                dtm[ti, di] = gt[m]["id"]
                gtm[ti, m] = d["id"]
    nel = not_exhaustive or set()
    out_of = np.array([d["area"] < area_rng[0] or d["area"] > area_rng[1] or (d["category_id"] in nel)
                       for d in dt], bool).reshape(1, D)
    dt_ig = np.logical_or(dt_ig, np.logical_and(dtm == 0, np.repeat(out_of, T, 0)))
    if coco:
        return {"image_id": None, "category_id": None, "aRng": list(area_rng),
                "maxDet": max_det, "dtIds": [d["id"] for d in dt], "gtIds": [g["id"] for g in gt],
                "dtMatches": dtm, "gtMatches": gtm, "dtScores": [d["score"] for d in dt], "gtIgnore": gt_ig,
                "dtIgnore": dt_ig}
    return {"image_id": None, "category_id": None, "area_rng": list(area_rng), "dt_ids": [d["id"] for d in dt],
            "gt_ids": [g["id"] for g in gt], "dt_matches": dtm, "gt_matches": gtm,
            "dt_scores": [d["score"] for d in dt], "gt_ignore": gt_ig, "dt_ignore": dt_ig}
