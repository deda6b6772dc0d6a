"""pycocotools drop-in: ``from vistabench.compat.coco import COCO, COCOeval``.

``COCO`` (:mod:`.coco_dataset`) keeps pycocotools' data model (``dataset``, ``anns``/``imgs``/``cats``, ``imgToAnns``,
``catToImgs``, ``createIndex()`` — torchmetrics sets ``dataset`` and calls it — ``getAnnIds``,
``getCatIds``, ``getImgIds``, ``loadAnns``/``loadCats``/``loadImgs``, ``annToRLE``/``annToMask``,
``loadRes`` from a list, a path or an N x 7 array, ``loadNumpyAnnotations``). ``COCOeval`` takes
pycocotools' ``params`` (``iouThrs``, ``recThrs``, ``maxDets``, ``areaRng``/``areaRngLbl``,
``imgIds``, ``catIds``, ``useCats``) and gives its ``evaluate`` / ``accumulate`` / ``summarize``,
``stats``, ``eval["precision" | "recall" | "scores"]``, and — computed when read — ``evalImgs``,
``ious``, ``evaluateImg``. Scores come from vistabench's vectorised evaluator (:mod:`.evaluation`),
equal to pycocotools to 1e-9 in the tests.

Masks as pycocotools derives them: ground truth without ``bbox`` in segm mode (torchmetrics' export)
gets the mask's box; results without ``bbox`` get it from the mask (and the mask area); box-only
results in segm mode become rectangle masks; a result's mask is read (and checked) in segm mode only.
Keypoints (``iouType="keypoints"``, ``params.kpt_oks_sigmas``) as pycocotools (:mod:`.keypoints`);
faster-coco-eval's CrowdPose ``iouType="keypoints_crowd"`` with its ``kpt_oks_sigmas=`` and
``use_area=`` arguments and ``stats_as_dict``.
A results *file* of plain boxes is kept as columns; its dicts are built when first read.

Annotation ``id`` 0 is scored as pycocotools scores it (a match to it is a false positive), with a
warning naming ``COCOeval(..., match_zero_id=True)``. Every mistake is one line, an ``InputError``
that is also the type pycocotools raises there (``KeyError``, ``TypeError``, ``IndexError``,
``AssertionError``); parameters that cannot mean anything are refused (:mod:`.params_check`).
"""

from __future__ import annotations

import copy
import datetime
import warnings
from dataclasses import replace
from collections import defaultdict
from typing import Any

import numpy as np

from ..errors import InputError, InputTypeError
from ..metrics.detection import OfficialToolsDifferenceWarning
from ..metrics.detection import AREA_LABELS, AREA_RANGES, IOU_THRESHOLDS, RECALL_THRESHOLDS, check_sigmas
from .evaluation import accumulate_for_params, id_positions, match_for_params, mean_defined
from .params_check import check_area_ranges, check_max_dets, check_thresholds, zero_id_message
from .keypoints import (KEYPOINT_TYPES, STATS_LABELS, group_oks, keypoint_ignore, set_keypoint_params,
                        summarize_crowd_stats, summarize_keypoint_stats)
from .coco_dataset import COCO
from .coco_detections import detections_of, keypoints_read
from .per_image import evaluate_group, group_ious

__all__ = ["COCO", "COCOeval", "Params", "detections_of"]


IOU_TYPES: tuple[str, ...] = ("bbox", "segm") + KEYPOINT_TYPES


def _is_empty(values: Any) -> bool:
    """A parameter list given empty (``[]``, an empty array)."""
    try:
        return len(values) == 0
    except TypeError:
        return False


def _check_iou_type(iou_type: Any, field: str) -> str:
    if iou_type not in IOU_TYPES:
        raise InputError(f"{field}: expected one of {', '.join(map(repr, IOU_TYPES))}, got {iou_type!r}")
    return iou_type


def _as_coco(v: Any, name: str) -> COCO | None:
    """Ours as is; another tool's ``COCO`` (pycocotools, faster-coco-eval: an object with a
    ``dataset`` dict) re-indexed over the same dataset, so mixed imports keep working."""
    if v is None or isinstance(v, COCO):
        return v
    ds = getattr(v, "dataset", None)
    if not isinstance(ds, dict):
        raise InputTypeError(f"{name}: expected a COCO object (vistabench.compat.coco.COCO or pycocotools'), got "
                             f"{type(v).__name__}")
    c = COCO()
    c.dataset = ds
    c.createIndex()
    return c


class Params:
    """pycocotools' parameters: detection (``bbox``, ``segm``) or keypoints (``setKpParams``:
    maxDets [20], areas all / medium / large, ``kpt_oks_sigmas``; keypoints_crowd the same)."""

    def __init__(self, iouType: str = "segm"):
        _check_iou_type(iouType, "iouType")
        if iouType in KEYPOINT_TYPES:
            set_keypoint_params(self)
            self.iouType, self.useSegm = iouType, None
            return
        self.imgIds: list = []
        self.catIds: list = []
        self.iouThrs = IOU_THRESHOLDS.copy()
        self.recThrs = RECALL_THRESHOLDS.copy()
        self.maxDets = [1, 10, 100]
        self.areaRng = AREA_RANGES.tolist()
        self.areaRngLbl = list(AREA_LABELS)
        self.useCats = 1
        self.iouType = iouType
        self.useSegm = None


class COCOeval:
    """As ``pycocotools.cocoeval.COCOeval(cocoGt, cocoDt, iouType="segm")``.

    ``match_zero_id`` (keyword, default False): pycocotools counts a detection matched to a
    ground-truth annotation with ``id`` 0 as a false positive (it stores matches as ids and tests
    them for truth); that is the default here, with a warning naming this option, which counts the
    match as the true positive it is.

    faster-coco-eval's keypoint arguments (keyword): ``kpt_oks_sigmas`` (K,) replaces
    ``params.kpt_oks_sigmas``; ``use_area=False`` scales OKS by the box (``h * w * 0.53``) instead
    of the ground truth's ``area`` (CrowdPose has none; a missing one is 0 for the area ranges).
    ``iouType="keypoints_crowd"`` summarizes nine stats (``stats_as_dict``), see :mod:`.keypoints`."""

    def __init__(self, cocoGt: COCO | None = None, cocoDt: COCO | None = None, iouType: str = "segm", *,
                 match_zero_id: bool = False, kpt_oks_sigmas: Any = None, use_area: bool = True):
        cocoGt, cocoDt = _as_coco(cocoGt, "cocoGt"), _as_coco(cocoDt, "cocoDt")
        for name, v in (("match_zero_id", match_zero_id), ("use_area", use_area)):
            if not isinstance(v, bool):
                raise InputTypeError(f"{name}: expected True or False, got {v!r}")
        if iouType not in KEYPOINT_TYPES and (kpt_oks_sigmas is not None or not use_area):
            raise InputError(f"{'kpt_oks_sigmas' if kpt_oks_sigmas is not None else 'use_area'}: only for iouType "
                             f"'keypoints' or 'keypoints_crowd' (got iouType {iouType!r})")
        self.match_zero_id, self.use_area = match_zero_id, use_area
        self.cocoGt, self.cocoDt = cocoGt, cocoDt
        self.eval: dict = {}
        self.params = Params(iouType=iouType)
        if kpt_oks_sigmas is not None:
            self.params.kpt_oks_sigmas = np.array(kpt_oks_sigmas)
        self._paramsEval: Any = {}
        self.stats: Any = []
        self._pm = None
        self._dt_pos = np.zeros(0, np.int64)
        self._per_image: dict[str, Any] = {}
        if cocoGt is not None:
            self.params.imgIds = sorted(cocoGt.getImgIds())
            self.params.catIds = sorted(cocoGt.getCatIds())

    def evaluate(self) -> None:
        p = self.params
        if p.useSegm is not None:
            p.iouType = "segm" if p.useSegm == 1 else "bbox"
        _check_iou_type(p.iouType, "params.iouType")
        if self.cocoGt is None or self.cocoDt is None:
            raise InputError("cocoGt, cocoDt: both are needed to evaluate")
        kp = p.iouType in KEYPOINT_TYPES
        # keypoints: pycocotools reads them (a KeyError when absent) before any parameter is used
        gt = self.cocoGt.ground_truth(False, with_keypoints=True, area_optional=not self.use_area) if kp else None
        iou_thrs = check_thresholds(p.iouThrs, "params.iouThrs", empty_is_index_error=True)
        for name, empty in (("recThrs", _is_empty(p.recThrs)), ("areaRng", _is_empty(p.areaRng)
                                                                 and _is_empty(p.areaRngLbl))):
            if empty:  # pycocotools scores it (every AP -1); detectron2's test_coco_evaluation compares that
                warnings.warn(f"params.{name}: empty; every AP is -1, as pycocotools gives it", UserWarning,
                              stacklevel=2)
        if not _is_empty(p.recThrs):
            check_thresholds(p.recThrs, "params.recThrs", empty_is_index_error=False)
        check_max_dets(p.maxDets, "params.maxDets")
        area = np.zeros((0, 2)) if _is_empty(p.areaRng) and _is_empty(p.areaRngLbl) else check_area_ranges(
            p.areaRng, p.areaRngLbl, "params.areaRng", "params.areaRngLbl")
        if p.useCats not in (0, 1):
            raise InputError(f"params.useCats: expected 0 or 1, got {p.useCats!r}")
        p.imgIds = list(np.unique(np.asarray(p.imgIds, np.int64)).tolist())
        if p.useCats:
            p.catIds = list(np.unique(np.asarray(p.catIds, np.int64)).tolist())
        last_max_det = int(list(p.maxDets)[-1])  # computeOks keeps maxDets[-1] results per cell, unsorted
        p.maxDets = sorted(int(m) for m in p.maxDets)
        if gt is None:
            gt = self.cocoGt.ground_truth(p.iouType == "segm")
        match_type = "keypoints" if kp else p.iouType
        read = (lambda i, c, s: keypoints_read(i, c, s, gt, img_ids=p.imgIds, cat_ids=p.catIds,
                                               use_cats=bool(p.useCats), last_max_det=last_max_det))
        dets, self._dt_pos = detections_of(self.cocoDt, gt, match_type, read_keypoints=read if kp else None)
        sigmas = check_sigmas(getattr(p, "kpt_oks_sigmas", None), gt.keypoints.shape[1] if len(gt) else None,
                              "params.kpt_oks_sigmas") if kp else None
        img_rows = id_positions(p.imgIds, gt.image_ids, "params.imgIds")
        cat_rows = id_positions(p.catIds, gt.category_ids, "params.catIds")
        if len(gt.ann_id) and np.any(gt.ann_id == 0) and not self.match_zero_id:
            warnings.warn(zero_id_message("cocoGt", "COCOeval(..., match_zero_id=True)"), OfficialToolsDifferenceWarning,
                          stacklevel=2)
        self._pm = match_for_params(gt, dets, iou_type=match_type, img_rows=img_rows, cat_rows=cat_rows,
                                    use_cats=bool(p.useCats), iou_thrs=iou_thrs, area_rng=area, kpt_oks_sigmas=sigmas,
                                    zero_id_unmatched=not self.match_zero_id, kpt_use_area=self.use_area)
        if kp and not p.useCats:  # pycocotools' computeOks reads _gts[img, -1] (empty): nothing matches
            m = self._pm.match
            self._pm.match = replace(m, cand=np.zeros(0, np.int64), code=m.code[:, :, :0])
        self._paramsEval = copy.deepcopy(p)
        self._per_image = {}
        self.eval = {}

    def accumulate(self, p: Params | None = None) -> None:
        if self._pm is None:
            raise RuntimeError("Please run evaluate() first")
        p = self.params if p is None else p
        acc = accumulate_for_params(self._pm, rec_thrs=np.asarray(p.recThrs, np.float64), max_dets=list(p.maxDets))
        p.catIds = p.catIds if p.useCats == 1 else [-1]
        self.eval = {"params": p, "counts": list(acc.precision.shape),
                     "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S"),
                     "precision": acc.precision, "recall": acc.recall, "scores": acc.scores}

    def _summarize(self, ap: int = 1, iouThr=None, areaRng: str = "all", maxDets: int = 100) -> float:
        p = self.params
        aind = [i for i, a in enumerate(p.areaRngLbl) if a == areaRng]
        mind = [i for i, m in enumerate(p.maxDets) if m == maxDets]
        s = self.eval["precision"] if ap == 1 else self.eval["recall"]
        if iouThr is not None:
            s = s[np.where(iouThr == np.asarray(p.iouThrs))[0]]
        s = s[:, :, :, aind, mind] if ap == 1 else s[:, :, aind, mind]
        mean_s = mean_defined(s)
        title, typ = ("Average Precision", "(AP)") if ap == 1 else ("Average Recall", "(AR)")
        iou = f"{p.iouThrs[0]:0.2f}:{p.iouThrs[-1]:0.2f}" if iouThr is None else f"{iouThr:0.2f}"
        print(f" {title:<18} {typ} @[ IoU={iou:<9} | area={areaRng:>6s} | maxDets={maxDets:>3d} ] = {mean_s:0.3f}")
        return mean_s

    def summarize(self) -> None:
        if not self.eval:
            raise Exception("Please run accumulate() first")  # pycocotools' type; clients catch Exception
        m = self.params.maxDets
        if self.params.iouType == "keypoints":
            self.stats = summarize_keypoint_stats(self._summarize)
            return
        if self.params.iouType == "keypoints_crowd":
            self.stats = summarize_crowd_stats(self)
            return
        m = check_max_dets(m, "params.maxDets", need=3)
        s = self._summarize
        self.stats = np.array([
            s(1), s(1, iouThr=.5, maxDets=m[2]), s(1, iouThr=.75, maxDets=m[2]), s(1, areaRng="small", maxDets=m[2]),
            s(1, areaRng="medium", maxDets=m[2]), s(1, areaRng="large", maxDets=m[2]), s(0, maxDets=m[0]),
            s(0, maxDets=m[1]), s(0, maxDets=m[2]), s(0, areaRng="small", maxDets=m[2]),
            s(0, areaRng="medium", maxDets=m[2]), s(0, areaRng="large", maxDets=m[2])])

    @property
    def stats_as_dict(self) -> dict[str, float]:
        """faster-coco-eval's named stats (after ``summarize``): keypoints_crowd's nine
        (:data:`~.keypoints.CROWD_STATS_LABELS`), the keypoints' ten, detection's twelve
        (:data:`~.keypoints.STATS_LABELS`)."""
        labels = STATS_LABELS.get(self.params.iouType, STATS_LABELS["bbox"])
        if len(self.stats) != len(labels):
            raise RuntimeError("stats_as_dict: run summarize() first")
        return {k: float(v) for k, v in zip(labels, self.stats)}

    def __str__(self) -> str:
        self.summarize()
        return ""

    # ------------------------------------------------------------------ per-image records, on request
    def _groups(self) -> tuple[dict, dict]:
        if "groups" not in self._per_image:
            pm = self._pm
            if pm is None:
                raise RuntimeError("Please run evaluate() first")
            gts, dts = defaultdict(list), defaultdict(list)
            g_anns = {}
            for a in self.cocoGt.dataset.get("annotations", []):
                g_anns[a["id"]] = a
            res = self.cocoDt.dataset.get("annotations", [])
            img_of = pm.gt.image_ids
            use = bool(self._paramsEval.useCats)
            for i in range(len(pm.gt)):
                a = g_anns[int(pm.gt.ann_id[i])]
                gts[int(img_of[pm.gt.image[i]]), a["category_id"] if use else -1].append(a)
            if use:
                for j in np.sort(pm.det):
                    a = res[int(self._dt_pos[j])]
                    dts[a["image_id"], a["category_id"]].append(a)
            else:  # positions into the re-ordered detections: rebuild in catIds order, then file order
                order = {c: k for k, c in reversed(list(enumerate(self._paramsEval.catIds)))}
                keep = [a for a in res if a["image_id"] in set(self._paramsEval.imgIds) and a["category_id"] in order]
                for a in sorted(keep, key=lambda a: order[a["category_id"]]):
                    dts[a["image_id"], -1].append(a)
            self._per_image["groups"] = (gts, dts)
        return self._per_image["groups"]

    def computeOks(self, imgId: int, catId: int):
        if not self._paramsEval.useCats:
            return []  # pycocotools reads _gts[imgId, -1], which is empty
        gts, dts = self._groups()
        key = (imgId, catId)
        return group_oks(dts.get(key, []), gts.get(key, []), self._paramsEval.kpt_oks_sigmas,
                         self._paramsEval.maxDets[-1], self.use_area)

    def computeIoU(self, imgId: int, catId: int):
        gts, dts = self._groups()
        key = (imgId, catId if self._paramsEval.useCats else -1)
        gt, dt = gts.get(key, []), dts.get(key, [])
        dt = [dt[i] for i in np.argsort([-d["score"] for d in dt], kind="mergesort")][: self._paramsEval.maxDets[-1]]
        img = self.cocoGt.imgs.get(imgId, {})
        return group_ious(dt, gt, iou_type=self._paramsEval.iouType, size=(int(img.get("height", 0)),
                                                                           int(img.get("width", 0))),
                          crowd=[int(g.get("iscrowd", 0)) for g in gt])

    @property
    def ious(self) -> dict:
        if "ious" not in self._per_image:
            p = self._paramsEval
            cats = p.catIds if p.useCats else [-1]
            compute = self.computeOks if p.iouType in KEYPOINT_TYPES else self.computeIoU
            self._per_image["ious"] = {(i, c): compute(i, c) for i in p.imgIds for c in cats}
        return self._per_image["ious"]

    def evaluateImg(self, imgId: int, catId: int, aRng, maxDet: int) -> dict | None:
        gts, dts = self._groups()
        key = (imgId, catId if self._paramsEval.useCats else -1)
        gt, dt = gts.get(key, []), dts.get(key, [])
        ious = self._per_image.get("ious", {}).get((imgId, catId))
        kp = self._paramsEval.iouType in KEYPOINT_TYPES
        if ious is None:
            ious = self.computeOks(imgId, catId) if kp else self.computeIoU(imgId, catId)
        if kp and not self.use_area:  # CrowdPose: a missing area is 0 for the range, as in evaluate()
            gt = [g if "area" in g else {**g, "area": 0} for g in gt]
        r = evaluate_group(gt, dt, ious, iou_thrs=np.asarray(self._paramsEval.iouThrs), area_rng=aRng, coco=True,
                           max_det=maxDet, extra_ignore=keypoint_ignore(gt) if kp else None)
        if r is not None:
            r["image_id"], r["category_id"] = imgId, catId
        return r

    @property
    def evalImgs(self) -> list:
        """pycocotools' per (category, area, image) records, in its order (computed on first read)."""
        if "evalImgs" not in self._per_image:
            if self._pm is None:
                raise RuntimeError("Please run evaluate() first")
            p = self._paramsEval
            cats = p.catIds if p.useCats else [-1]
            self._per_image["evalImgs"] = [self.evaluateImg(i, c, a, p.maxDets[-1]) for c in cats
                                           for a in p.areaRng for i in p.imgIds]
        return self._per_image["evalImgs"]
