"""pycocotools drop-in: ``from vistabench.compat.coco import COCO, COCOeval``.

``COCO`` keeps pycocotools' data model (``dataset``, ``anns``/``imgs``/``cats``, ``imgToAnns``,
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
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError, InputTypeError
from ..metrics.detection import GroundTruth, OfficialToolsDifferenceWarning
from ..metrics.detection import AREA_LABELS, AREA_RANGES, IOU_THRESHOLDS, RECALL_THRESHOLDS, check_sigmas, to_rle
from .evaluation import UnknownIdError, accumulate_for_params, id_positions, match_for_params, mean_defined
from .params_check import check_area_ranges, check_max_dets, check_thresholds, zero_id_message
from .keypoints import (KEYPOINT_TYPES, STATS_LABELS, group_oks, keypoint_ignore, set_keypoint_params,
                        summarize_crowd_stats, summarize_keypoint_stats)
from .coco_detections import detections_of, keypoints_read, mask_box
from .per_image import evaluate_group, group_ious
from .results import (box_result_columns, explain_dataset, load_result_list, msgspec_json_list,
                      prepare_results, read_dataset, require)

__all__ = ["COCO", "COCOeval", "Params", "detections_of"]


def _array_like(x: Any) -> bool:
    return hasattr(x, "__iter__") and hasattr(x, "__len__")


def _listed(x: Any) -> list:
    return list(x) if _array_like(x) else [x]


class COCO:
    """As ``pycocotools.coco.COCO(annotation_file=None)`` (a dict is accepted too).

    A ``loadRes`` of a results file of plain boxes keeps the results as columns: ``dataset``,
    ``anns``, ``imgToAnns`` and ``catToImgs`` are built, exactly as pycocotools builds them, the
    first time one of them is read (the evaluation reads the columns).
    """

    _LAZY = frozenset(("dataset", "anns", "imgToAnns", "catToImgs"))

    def __init__(self, annotation_file: str | Path | dict | None = None):
        self._columns: dict | None = None
        self._lazy_from: Any = None
        self.dataset: dict = {}
        self.anns: dict = {}
        self.cats: dict = {}
        self.imgs: dict = {}
        self.imgToAnns: dict = defaultdict(list)
        self.catToImgs: dict = defaultdict(list)
        self._gt: dict[bool, GroundTruth] = {}
        if annotation_file is not None:
            self.dataset = read_dataset(annotation_file, "annotation_file")
            self.createIndex()

    def __getattr__(self, name: str) -> Any:
        # only reached for attributes not set: the lazily built ones of a column-backed loadRes
        lazy = self.__dict__.get("_lazy_from")
        if name in COCO._LAZY and lazy is not None:
            self._lazy_from = None
            info, images, categories, cols, ids, sizes = lazy
            anns = load_result_list(msgspec_json_list(cols["raw"]), "resFile")
            prepare_results(anns, what="resFile", coco=True, image_ids=ids, image_sizes=sizes)
            self.dataset = {"info": info, "images": images, "categories": categories, "annotations": anns}
            columns = self._columns
            self.createIndex()
            self._columns = columns  # the same results: the columns stay valid
            return getattr(self, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "dataset" and self.__dict__.get("_lazy_from") is not None:
            self.__dict__["_lazy_from"] = None  # a dataset set by the caller replaces the lazy one
            self.__dict__["_columns"] = None
        object.__setattr__(self, name, value)

    def createIndex(self) -> None:
        self._columns = None
        anns, cats, imgs = {}, {}, {}
        img_to_anns, cat_to_imgs = defaultdict(list), defaultdict(list)
        try:
            for ann in self.dataset.get("annotations", ()):
                img_to_anns[ann["image_id"]].append(ann)
                anns[ann["id"]] = ann
            for img in self.dataset.get("images", ()):
                imgs[img["id"]] = img
            for cat in self.dataset.get("categories", ()):
                cats[cat["id"]] = cat
            if "annotations" in self.dataset and "categories" in self.dataset:
                for ann in self.dataset["annotations"]:
                    cat_to_imgs[ann["category_id"]].append(ann["image_id"])
        except (KeyError, TypeError, AttributeError):
            explain_dataset(self.dataset)
            raise
        self.anns, self.cats, self.imgs, self.imgToAnns, self.catToImgs = anns, cats, imgs, img_to_anns, cat_to_imgs
        self._gt = {}

    def info(self) -> None:
        for key, value in self.dataset.get("info", {}).items():
            print(f"{key}: {value}")

    def getAnnIds(self, imgIds=[], catIds=[], areaRng=[], iscrowd=None) -> list:  # noqa: B006 -- pycocotools' API
        imgIds, catIds = _listed(imgIds), _listed(catIds)
        if len(imgIds) == len(catIds) == len(areaRng) == 0:
            anns = self.dataset.get("annotations", [])
        else:
            if len(imgIds):
                anns = [a for i in imgIds for a in self.imgToAnns.get(i, ())]
            else:
                anns = self.dataset.get("annotations", [])
            if len(catIds):
                cs = set(catIds)
                anns = [a for a in anns if a["category_id"] in cs]
            if len(areaRng):
                anns = [a for a in anns if areaRng[0] < a["area"] < areaRng[1]]
        if iscrowd is not None:
            return [a["id"] for a in anns if a["iscrowd"] == iscrowd]
        return [a["id"] for a in anns]

    def getCatIds(self, catNms=[], supNms=[], catIds=[]) -> list:  # noqa: B006
        catNms, supNms, catIds = _listed(catNms), _listed(supNms), _listed(catIds)
        cats = self.dataset.get("categories", [])
        if len(catNms):
            cats = [c for c in cats if c["name"] in catNms]
        if len(supNms):
            cats = [c for c in cats if c["supercategory"] in supNms]
        if len(catIds):
            cats = [c for c in cats if c["id"] in catIds]
        return [c["id"] for c in cats]

    def getImgIds(self, imgIds=[], catIds=[]) -> list:  # noqa: B006
        imgIds, catIds = _listed(imgIds), _listed(catIds)
        if len(imgIds) == len(catIds) == 0:
            return list(self.imgs.keys())
        ids = set(imgIds)
        for i, c in enumerate(catIds):
            ids = set(self.catToImgs[c]) if i == 0 and len(ids) == 0 else ids & set(self.catToImgs[c])
        return list(ids)

    def _load(self, table: dict, ids, kind: str) -> list:
        try:
            if _array_like(ids):
                return [table[i] for i in ids]
            if isinstance(ids, (int, np.integer)):
                return [table[ids]]
        except KeyError as exc:
            raise UnknownIdError(f"ids: {kind} id {exc.args[0]!r} is not in the dataset") from None
        return []

    def loadAnns(self, ids=[]) -> list:  # noqa: B006
        return self._load(self.anns, ids, "annotation")

    def loadCats(self, ids=[]) -> list:  # noqa: B006
        return self._load(self.cats, ids, "category")

    def loadImgs(self, ids=[]) -> list:  # noqa: B006
        return self._load(self.imgs, ids, "image")

    def annToRLE(self, ann: dict):
        img = self.imgs[ann["image_id"]]
        return to_rle(ann["segmentation"], img["height"], img["width"])

    def annToMask(self, ann: dict) -> np.ndarray:
        import pycocotools.mask as mask_utils

        return mask_utils.decode(self.annToRLE(ann))

    def loadNumpyAnnotations(self, data: np.ndarray) -> list:
        """N x 7 ``[image_id, x, y, w, h, score, category_id]`` rows as result dicts."""
        if not isinstance(data, np.ndarray) or data.ndim != 2 or data.shape[1] != 7:
            raise InputError(f"resFile: an array needs shape (N, 7) [image_id, x, y, w, h, score, category_id], "
                             f"got {getattr(data, 'shape', type(data).__name__)}")
        return [{"image_id": int(r[0]), "bbox": [r[1], r[2], r[3], r[4]], "score": r[5], "category_id": int(r[6])}
                for r in data]

    def loadRes(self, resFile) -> "COCO":
        """Results (a list, a JSON path or an N x 7 array) as a ``COCO``, prepared as pycocotools does.

        Results of an image not in the ground truth fail pycocotools' assertion (here an
        ``InputAssertionError``, one line); results whose category is not in the ground truth are
        never scored by pycocotools: a warning says how many, and an error when that is all of them.
        Masks are checked when evaluated in segm mode (pycocotools scores the box in bbox mode)."""
        res = COCO()
        ids = np.fromiter(self.imgs.keys(), np.int64, len(self.imgs))
        sizes = {i: (int(im.get("height", 0)), int(im.get("width", 0))) for i, im in self.imgs.items()}
        cols = box_result_columns(resFile, ids)
        if cols is not None:  # plain boxes from a file: columns now, the dicts when first read
            self._check_result_categories(cols["category_id"], len(cols["score"]))
            images, categories = list(self.dataset.get("images", [])), copy.deepcopy(self.dataset.get("categories", []))
            for attr in COCO._LAZY:
                del res.__dict__[attr]
            res.imgs = {im["id"]: im for im in images}
            res.cats = {c["id"]: c for c in categories}
            res._lazy_from = (copy.deepcopy(self.dataset.get("info", {})), images, categories, cols, ids, sizes)
            res._columns = cols
            return res
        res.dataset["info"] = copy.deepcopy(self.dataset.get("info", {}))  # as pycocotools 2.0.8
        res.dataset["images"] = list(self.dataset.get("images", []))
        anns = self.loadNumpyAnnotations(resFile) if isinstance(resFile, np.ndarray) else load_result_list(resFile, "resFile")
        cols = prepare_results(anns, what="resFile", coco=True, image_ids=ids, image_sizes=None)
        if cols:
            self._check_result_categories(cols["category_id"], len(anns))
        res.dataset["categories"] = copy.deepcopy(self.dataset.get("categories", []))
        res.dataset["annotations"] = anns
        res.createIndex()
        if cols:  # the prepared columns serve the evaluation until the next createIndex
            res._columns = cols
        return res

    def _check_result_categories(self, category_id: np.ndarray, n: int) -> None:
        cats = np.fromiter(self.cats.keys(), np.int64, len(self.cats))
        unknown = ~np.isin(category_id, cats)
        if unknown.any():
            k, first = int(np.count_nonzero(unknown)), int(category_id[unknown][0])
            if k == n:
                raise InputError(f"resFile: no result has a category id of the ground truth (first: {first}; the "
                                 f"ground truth's start {sorted(self.cats)[:5]}); pycocotools would score none of them")
            warnings.warn(f"resFile: {k} of {n} results have category ids not in the ground truth (first: {first}); "
                          f"pycocotools never scores them", UserWarning, stacklevel=3)

    def ground_truth(self, with_segmentation: bool, *, with_keypoints: bool = False,
                     area_optional: bool = False) -> GroundTruth:
        """The annotations as a pycocotools-semantics :class:`GroundTruth` (cached until
        ``createIndex``). In segm mode an annotation without ``bbox`` gets its mask's box;
        ``with_keypoints`` reads ``keypoints`` / ``num_keypoints`` (iouType "keypoints");
        ``area_optional`` (keypoints_crowd, ``use_area=False``: CrowdPose has no ``area``): a missing
        ``area`` is 0 for the area ranges, as faster-coco-eval reads it."""
        from ..data.coco import read_ground_truth

        if not self._gt:
            require(self.dataset.get("annotations", []), "iscrowd", "annotations",
                    "pycocotools reads it from every annotation it evaluates")
        if with_keypoints:
            key = "keypoints_no_area" if area_optional else "keypoints"
            if key not in self._gt:
                ds = self.dataset
                anns = ds.get("annotations", [])
                if area_optional and any(isinstance(a, dict) and "area" not in a for a in anns):
                    anns = [a if not isinstance(a, dict) or "area" in a else {**a, "area": 0} for a in anns]
                self._gt[key] = read_ground_truth(
                    {"images": ds.get("images", []), "annotations": anns,
                     "categories": ds.get("categories", [])}, format="coco", with_keypoints=True)
            return self._gt[key]
        if with_segmentation not in self._gt:
            ds = self.dataset
            anns = ds.get("annotations", [])
            if with_segmentation and any("bbox" not in a for a in anns):
                anns = [a if "bbox" in a else {**a, "bbox": mask_box(self, a, i)} for i, a in enumerate(anns)]
            self._gt[with_segmentation] = read_ground_truth(
                {"images": ds.get("images", []), "annotations": anns, "categories": ds.get("categories", [])},
                format="coco", with_segmentation=with_segmentation)
        return self._gt[with_segmentation]


#: iouType -> what the evaluator matches on (the one place a new type is added)
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
