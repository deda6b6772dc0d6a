"""pycocotools' ``COCO`` (annotations and results), re-exported by :mod:`vistabench.compat.coco`.

``COCO`` keeps pycocotools' data model (``dataset``, ``anns``/``imgs``/``cats``, ``imgToAnns``,
``catToImgs``, ``createIndex()`` — torchmetrics sets ``dataset`` and calls it — ``getAnnIds``,
``getCatIds``, ``getImgIds``, ``loadAnns``/``loadCats``/``loadImgs``, ``annToRLE``/``annToMask``,
``loadRes`` from a list, a path or an N x 7 array, ``loadNumpyAnnotations``), and hands the
evaluator its data as columns (:meth:`COCO.ground_truth`). Ground truth without ``bbox`` in segm mode
(torchmetrics' export) gets the mask's box; results without ``bbox`` get it from the mask (and the
mask area). A results *file* of plain boxes is kept as columns; its dicts are built when first read.
"""

from __future__ import annotations

import copy
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError
from ..metrics.detection import GroundTruth, to_rle
from .evaluation import UnknownIdError
from .coco_detections import mask_box
from .results import (box_result_columns, explain_dataset, load_result_list, msgspec_json_list,
                      prepare_results, read_dataset, require)

__all__ = ["COCO"]


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
