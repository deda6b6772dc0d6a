"""Results of a ``vistabench.compat.coco.COCO`` as the evaluation reads them (:func:`detections_of`),
and a mask's box for annotations without ``bbox`` (:func:`mask_box`), as pycocotools derives it."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InputKeyError
from ..metrics.detection import Detections, GroundTruth, to_rle
from .results import check_segmentation

__all__ = ["detections_of", "keypoints_read", "mask_box"]


def mask_box(coco: Any, ann: dict, i: int) -> list:
    import pycocotools.mask as mask_utils

    if "segmentation" not in ann:
        raise InputKeyError(f"annotations[{i}]: has neither 'bbox' nor 'segmentation'")
    img = coco.imgs.get(ann.get("image_id"), {})
    return mask_utils.toBbox(to_rle(ann["segmentation"], int(img.get("height", 0)), int(img.get("width", 0)))).tolist()


def keypoints_read(image_id: np.ndarray, category_id: np.ndarray, score: np.ndarray, gt: GroundTruth, *,
                   img_ids: Any, cat_ids: Any, use_cats: bool, last_max_det: int) -> np.ndarray:
    """(N,) bool: the results whose ``keypoints`` pycocotools' ``computeOks`` reads. It reads them
    only with ``useCats=1``, in an (image, category) cell of ``params`` that has ground truth, and
    only for the cell's first ``maxDets[-1]`` results by score (stable order); a result elsewhere may
    lack them (detectron2's test_coco_evaluation scores box results on empty ground truth so)."""
    n = len(score)
    if not use_cats or n == 0 or len(gt) == 0:
        return np.zeros(n, bool)
    n_cat = len(gt.category_ids)
    gt_cells = np.unique(gt.image * n_cat + gt.category)
    ii = np.searchsorted(gt.image_ids, image_id)
    ci = np.searchsorted(gt.category_ids, category_id)
    cell = ii * n_cat + ci
    read = np.isin(image_id, np.asarray(img_ids, np.int64)) & np.isin(category_id, np.asarray(cat_ids, np.int64))
    read &= np.isin(cell, gt_cells)
    order = np.lexsort((np.arange(n), -np.asarray(score, np.float64), cell))
    first = np.r_[True, cell[order][1:] != cell[order][:-1]]
    start = np.maximum.accumulate(np.where(first, np.arange(n), 0))
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n) - start
    return read & (rank < last_max_det)


def detections_of(coco_dt: Any, gt: GroundTruth, iou_type: str, *, read_keypoints=None) -> tuple[Detections, np.ndarray]:
    """Results as the evaluation reads them: ``area`` and (bbox mode) ``bbox`` as stored on each
    result, masks from ``segmentation``. Results of images or categories absent from ``gt`` are left
    out, as pycocotools never loads them (its ids come from the ground truth); returns the detections
    and their positions in ``dataset["annotations"]``. ``read_keypoints`` (keypoints mode): a function
    ``(image_id, category_id, score) -> (N,) bool`` naming the results whose ``keypoints`` are read
    (:func:`keypoints_read`); the others may lack them. None: every result needs them."""
    cols = coco_dt.__dict__.get("_columns")
    if cols is not None and iou_type == "bbox":  # a column-backed loadRes: no dicts needed
        pos = np.flatnonzero(np.isin(cols["image_id"], gt.image_ids) & np.isin(cols["category_id"], gt.category_ids))
        every = len(pos) == len(cols["score"])
        pick = (lambda a: a) if every else (lambda a: a[pos])
        d = Detections.from_ids(gt, image_id=pick(cols["image_id"]), category_id=pick(cols["category_id"]),
                                bbox=pick(cols["bbox"]), score=pick(cols["score"]), area=pick(cols["area"]))
        return d, pos
    anns = coco_dt.dataset.get("annotations", [])
    try:
        iid = np.array([a["image_id"] for a in anns], np.int64)
        cid = np.array([a["category_id"] for a in anns], np.int64)
    except KeyError as exc:
        raise InputKeyError(f"cocoDt: a result lacks {exc.args[0]!r}") from None
    pos = np.flatnonzero(np.isin(iid, gt.image_ids) & np.isin(cid, gt.category_ids))
    anns = [anns[i] for i in pos]
    try:
        score = np.array([a["score"] for a in anns], np.float64)
        area = np.array([a["area"] for a in anns], np.float64)
    except KeyError as exc:
        raise InputKeyError(f"cocoDt: a result lacks {exc.args[0]!r}") from None
    kp = None
    if iou_type == "keypoints":
        kp = _keypoints_or_placeholders([a.get("keypoints") for a in anns], pos, gt, read_keypoints,
                                        iid[pos], cid[pos], score)
    if iou_type == "segm":
        seg = [a.get("segmentation") for a in anns]
        if any(s is None for s in seg):
            raise InputKeyError(f"cocoDt: result {int(pos[seg.index(None)])} lacks 'segmentation' (iouType 'segm')")
        size = gt.image_size
        img = np.searchsorted(gt.image_ids, iid[pos])
        for k, sg in enumerate(seg):
            check_segmentation(sg, f"cocoDt[{int(pos[k])}]", None if size is None else
                               (int(size[img[k], 0]), int(size[img[k], 1])))
        box = [a["bbox"] if "bbox" in a else mask_box(coco_dt, a, i) for i, a in enumerate(anns)]
    else:
        seg = None
        if any("bbox" not in a for a in anns):
            raise InputKeyError(f"cocoDt: result {int(pos[next(i for i, a in enumerate(anns) if 'bbox' not in a)])} "
                             f"lacks 'bbox' (iouType {iou_type!r})")
        box = [a["bbox"] for a in anns]
    bbox = np.asarray(box, np.float64).reshape(len(anns), 4)
    d = Detections.from_ids(gt, image_id=iid[pos], category_id=cid[pos], bbox=bbox, score=score, segmentation=seg,
                            area=area, keypoints=kp)
    return d, pos


def _keypoints_or_placeholders(kp: list, pos: np.ndarray, gt: GroundTruth, read_keypoints, image_id: np.ndarray,
                               category_id: np.ndarray, score: np.ndarray) -> list | None:
    """The results' keypoints; a result that lacks them and is never read gets invisible zeros (its
    OKS is never computed); one that is read raises pycocotools' ``KeyError``."""
    missing = [i for i, k in enumerate(kp) if k is None]
    if not missing:
        return kp
    read = (np.ones(len(kp), bool) if read_keypoints is None
            else np.asarray(read_keypoints(image_id, category_id, score), bool))
    bad = [i for i in missing if read[i]]
    if bad:
        raise InputKeyError(f"cocoDt: result {int(pos[bad[0]])} lacks 'keypoints' (iouType 'keypoints')")
    given = next((k for k in kp if k is not None), None)
    if gt.keypoints is not None and len(gt):
        width = gt.keypoints.shape[1] * 3
    elif given is not None:
        width = len(np.ravel(given))
    else:
        return None  # no result has keypoints and none is read
    return [[0.0] * width if k is None else k for k in kp]
