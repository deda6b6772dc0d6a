"""lvis-api drop-in: ``from vistabench.compat.lvis import LVIS, LVISResults, LVISEval``.

lvis-api's public surface as its clients (detectron2, mmdetection, scripts) use it, scored by
vistabench's vectorised evaluator (:mod:`.evaluation`), equal to lvis-api 0.5.3 to 1e-9 in the tests:

* ``LVIS``: ``dataset``, ``anns``/``cats``/``imgs``, ``img_ann_map``/``cat_img_map`` (built once, on
  first use: every look-up is O(1) per call), ``get_img_ids()`` / ``get_cat_ids()`` in *file order*
  (mmdetection maps its label i to ``get_cat_ids()[i]``), ``get_ann_ids``, ``load_anns``,
  ``load_cats``, ``load_imgs``, ``ann_to_rle``, ``ann_to_mask``.
* ``LVISResults`` *is* an ``LVIS`` (``load_anns``, ``get_ann_ids``, ``get_top_results`` ...); it
  takes a path or a list (results without ``bbox`` — detectron2's segm path — get it from the mask,
  as lvis-api does) and keeps each image's top ``max_dets`` (-1: all).
* ``LVISEval``: ``params.img_ids`` / ``cat_ids`` / ``iou_thrs`` / ``rec_thrs`` / ``area_rng``
  honoured (a subset scores the subset); ``max_dets`` is the AR label, as in lvis-api (the cut is
  ``LVISResults``'s); ``eval["precision" | "recall" | "dt_pointers"]``, ``freq_groups``,
  ``results``, ``stats``; ``eval_imgs``, ``ious`` and ``evaluate_img`` are computed when read.
* Errors: an empty results list (or ``max_dets=0``) raises :class:`EmptyResultsError`, an
  ``IndexError`` as lvis-api's (mmdetection catches it) and an ``InputError``.

``use_cats=0`` is refused (lvis-api's summary breaks on it). The detectron2 evaluator is
:class:`vistabench.compat.detectron2.LVISEvaluator`.
"""

from __future__ import annotations

import datetime
import logging
import warnings
from collections import OrderedDict, defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError, InputKeyError, InputTypeError
from ..metrics.detection import (AREA_LABELS, AREA_RANGES, IOU_THRESHOLDS, LVIS_MAX_DETS, RECALL_THRESHOLDS, Detections,
                                 GroundTruth, OfficialToolsDifferenceWarning, to_rle)
from .evaluation import (EmptyResultsError, UnknownIdError, accumulate_for_params, id_positions, match_for_params,
                         mean_defined)
from .params_check import check_area_ranges, check_thresholds, zero_id_message
from .per_image import evaluate_group, group_ious
from .results import check_segmentation, load_result_list, prepare_results, read_dataset

__all__ = ["LVIS", "LVISResults", "LVISEval", "Params", "EmptyResultsError", "UnknownIdError"]

logger = logging.getLogger(__name__)


def _load(table: dict, ids, kind: str) -> list:
    if ids is None:
        return list(table.values())
    try:
        return [table[i] for i in ids]
    except KeyError as exc:
        raise UnknownIdError(f"ids: {kind} id {exc.args[0]!r} is not in the dataset") from None


class LVIS:
    """As ``lvis.LVIS(annotation_path)`` (a dict is accepted too)."""

    def __init__(self, annotation_path: str | Path | dict):
        self.dataset = read_dataset(annotation_path, "annotation_path")
        self._gt: dict[bool, GroundTruth] = {}
        if not isinstance(self, LVISResults):
            self.ground_truth(False)  # validated now, as lvis-api reads at construction

    def ground_truth(self, with_segmentation: bool) -> GroundTruth:
        """The annotations as a :class:`GroundTruth` (cached; masks only when asked for)."""
        from ..data.coco import read_ground_truth

        if with_segmentation not in self._gt:
            self._gt[with_segmentation] = read_ground_truth(self.dataset, format="lvis",
                                                            with_segmentation=with_segmentation)
        return self._gt[with_segmentation]

    # the index: built once, on first use (lvis-api builds it in the constructor); afterwards the
    # tables are plain attributes, so each look-up costs what lvis-api's does
    _INDEX = ("anns", "cats", "imgs", "img_ann_map", "cat_img_map")

    def __getattr__(self, name: str) -> Any:
        if name in LVIS._INDEX and "dataset" in self.__dict__:
            self._build_index()
            return self.__dict__[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _build_index(self) -> None:
        anns = {a["id"]: a for a in self.dataset["annotations"]}
        img_ann_map, cat_img_map = defaultdict(list), defaultdict(list)
        for a in self.dataset["annotations"]:
            img_ann_map[a["image_id"]].append(a)
            cat_img_map[a["category_id"]].append(a["image_id"])
        self.__dict__.update(anns=anns, cats={c["id"]: c for c in self.dataset["categories"]},
                             imgs={i["id"]: i for i in self.dataset["images"]}, img_ann_map=img_ann_map,
                             cat_img_map=cat_img_map)

    def get_ann_ids(self, img_ids=None, cat_ids=None, area_rng=None) -> list[int]:
        if img_ids is not None:
            m = self.img_ann_map
            anns = []
            for i in img_ids:
                anns.extend(m[i])
        else:
            anns = self.dataset["annotations"]
        if cat_ids is None and area_rng is None:
            return [a["id"] for a in anns]
        cats = set(cat_ids) if cat_ids is not None else None
        lo, hi = (0, float("inf")) if area_rng is None else area_rng
        return [a["id"] for a in anns if (cats is None or a["category_id"] in cats) and lo < a["area"] < hi]

    def get_cat_ids(self) -> list[int]:
        return list(self.cats.keys())

    def get_img_ids(self) -> list[int]:
        return list(self.imgs.keys())

    def load_anns(self, ids=None) -> list[dict]:
        return _load(self.anns, ids, "annotation")

    def load_cats(self, ids) -> list[dict]:
        return _load(self.cats, ids, "category")

    def load_imgs(self, ids) -> list[dict]:
        return _load(self.imgs, ids, "image")

    def ann_to_rle(self, ann: dict):
        img = self.imgs[ann["image_id"]]
        return to_rle(ann["segmentation"], img["height"], img["width"])

    def ann_to_mask(self, ann: dict) -> np.ndarray:
        import pycocotools.mask as mask_utils

        return mask_utils.decode(self.ann_to_rle(ann))


class LVISResults(LVIS):
    """As ``lvis.LVISResults(lvis_gt, results, max_dets=300)``: ``results`` is a path or a list of
    result dicts (updated in place with ``area``, ``id`` ..., as lvis-api does)."""

    def __init__(self, lvis_gt: LVIS | str | Path, results: str | Path | list, max_dets: int = LVIS_MAX_DETS):
        gt = lvis_gt if isinstance(lvis_gt, LVIS) else LVIS(lvis_gt)
        if isinstance(max_dets, bool) or not isinstance(max_dets, (int, np.integer)):
            raise InputTypeError(f"max_dets: expected an integer (-1 for no limit), got {max_dets!r}")
        anns = load_result_list(results, "results")
        if max_dets == 0:
            raise EmptyResultsError("max_dets: 0 keeps no detection per image (lvis-api then fails with IndexError); "
                                    "use -1 for no limit or a positive number")
        if max_dets > 0 and anns:
            for i, a in enumerate(anns):  # what the per-image limit reads (prepare_results checks the rest)
                if not isinstance(a, dict):
                    raise InputTypeError(f"results[{i}]: expected a result dict, got {type(a).__name__}")
                missing = [k for k in ("image_id", "score") if k not in a]
                if missing:
                    raise InputKeyError(f"results[{i}]: lacks {missing[0]!r}")
            anns = _limit_dets_per_image(anns, int(max_dets))
        ggt = gt.ground_truth(False)
        self.columns = prepare_results(anns, what="results", coco=False, image_ids=ggt.image_ids, image_sizes=None)
        #: positions of the results whose category is the ground truth's (None: all); lvis-api keeps the
        #: others (after the per-image limit, where they take places) but never scores them
        self.scored: np.ndarray | None = None
        known = np.isin(self.columns["category_id"], ggt.category_ids)
        if not known.all():
            k, first = int(np.count_nonzero(~known)), int(self.columns["category_id"][~known][0])
            if k == len(known):
                raise InputError(f"results: no result has a category id of the ground truth (first: {first}; the "
                                 f"ground truth's start {ggt.category_ids[:5].tolist()}); lvis-api would score none")
            warnings.warn(f"results: {k} of {len(known)} results have category ids not in the ground truth (first: "
                          f"{first}); lvis-api never scores them", UserWarning, stacklevel=2)
            self.scored = np.flatnonzero(known)
        super().__init__({"images": gt.dataset["images"], "categories": gt.dataset["categories"], "annotations": anns})
        self.lvis_gt = gt
        self.max_dets = int(max_dets)

    def detections(self, gt: GroundTruth) -> Detections:
        """The results as :class:`Detections` of ``gt`` (positions = ``id - 1``, or ``scored[position]``
        when results of unknown categories are left out). With masks in
        ``gt`` (segm) every result's mask is checked against its image's size here: lvis-api never
        reads the masks of results with a box in bbox mode."""
        c = self.columns
        if self.scored is not None:  # the results of unknown categories are not scored (as lvis-api)
            rows = self.scored
            c = {k: (v[rows] if isinstance(v, np.ndarray) else [v[i] for i in rows]) for k, v in c.items()}
        if gt.segmentation is not None:
            size = gt.image_size
            img = np.searchsorted(gt.image_ids, c["image_id"])
            for k, sg in enumerate(c["segmentation"]):
                check_segmentation(sg, f"results[{k}]", None if size is None else
                                   (int(size[img[k], 0]), int(size[img[k], 1])))
        return Detections.from_ids(gt, image_id=c["image_id"], category_id=c["category_id"], bbox=c["bbox"],
                                   score=c["score"], segmentation=c["segmentation"], area=c["area"])

    def limit_dets_per_image(self, anns: list, max_dets: int) -> list:
        return _limit_dets_per_image(anns, max_dets)

    def get_top_results(self, img_id: int, score_thrs: float) -> list[dict]:
        return [a for a in self.load_anns(self.get_ann_ids(img_ids=[img_id])) if a["score"] > score_thrs]


def _limit_dets_per_image(anns: list, max_dets: int) -> list:
    """lvis-api's order: grouped by image (first appearance), each image's top ``max_dets`` by score
    (stable) when it has more, else its file order."""
    by_img: dict[Any, list] = defaultdict(list)
    for a in anns:
        by_img[a["image_id"]].append(a)
    for k, v in by_img.items():
        if len(v) > max_dets:
            by_img[k] = sorted(v, key=lambda a: a["score"], reverse=True)[:max_dets]
    return [a for v in by_img.values() for a in v]


class Params:
    """lvis-api's evaluation parameters (every field is read by :class:`LVISEval`)."""

    def __init__(self, iou_type: str):
        self.img_ids: list[int] = []
        self.cat_ids: list[int] = []
        self.iou_thrs = IOU_THRESHOLDS.copy()
        self.rec_thrs = RECALL_THRESHOLDS.copy()
        self.max_dets = LVIS_MAX_DETS
        self.area_rng = AREA_RANGES.tolist()
        self.area_rng_lbl = list(AREA_LABELS)
        self.use_cats = 1
        self.img_count_lbl = ["r", "c", "f"]
        self.iou_type = iou_type


class LVISEval:
    """As ``lvis.LVISEval(lvis_gt, lvis_dt, iou_type="segm")``: ``run()`` = ``evaluate()``,
    ``accumulate()``, ``summarize()``; ``get_results()``; ``print_results()``.

    ``match_zero_id`` (keyword, default False): lvis-api counts a detection matched to a
    ground-truth annotation with ``id`` 0 as a false positive; that is the default here, with a
    warning naming this option, which counts the match as the true positive it is."""

    def __init__(self, lvis_gt: LVIS | str, lvis_dt: LVISResults | str | list | None = None, iou_type: str = "segm",
                 *, match_zero_id: bool = False):
        if not isinstance(match_zero_id, bool):
            raise InputTypeError(f"match_zero_id: expected True or False, got {match_zero_id!r}")
        self.match_zero_id = match_zero_id
        if iou_type not in ("bbox", "segm"):
            raise InputError(f"iou_type: {iou_type} is not supported (expected 'bbox' or 'segm').")
        if isinstance(lvis_gt, LVIS):
            self.lvis_gt = lvis_gt
        elif isinstance(lvis_gt, (str, Path, dict)):
            self.lvis_gt = LVIS(lvis_gt)
        else:
            raise InputTypeError(f"lvis_gt: unsupported type {type(lvis_gt).__name__} (expected LVIS or a path)")
        if isinstance(lvis_dt, LVISResults) or lvis_dt is None:
            self.lvis_dt = lvis_dt
        elif isinstance(lvis_dt, (str, Path, list)):
            self.lvis_dt = LVISResults(self.lvis_gt, lvis_dt)
        else:
            raise InputTypeError(f"lvis_dt: unsupported type {type(lvis_dt).__name__} (expected LVISResults, a path "
                                 f"or a list)")
        self.eval: dict[str, Any] = {}
        self.params = Params(iou_type=iou_type)
        self.results: OrderedDict[str, float] = OrderedDict()
        self.stats: Any = []
        self.params.img_ids = sorted(self.lvis_gt.get_img_ids())
        self.params.cat_ids = sorted(self.lvis_gt.get_cat_ids())
        self.freq_groups: list[list[int]] = []
        self._pm = None
        self._acc = None
        self._per_image: dict[str, Any] = {}

    # ------------------------------------------------------------------ evaluate / accumulate
    def evaluate(self) -> None:
        p = self.params
        if self.lvis_dt is None:
            raise InputError("lvis_dt: no results to evaluate (pass LVISResults, a path or a list)")
        if p.use_cats != 1:
            raise InputError(f"params.use_cats: vistabench's LVISEval evaluates per category only (use_cats=1); "
                             f"got {p.use_cats!r} (lvis-api's summary fails on it)")
        if p.iou_type not in ("bbox", "segm"):
            raise InputError(f"params.iou_type: expected 'bbox' or 'segm', got {p.iou_type!r}")
        iou_thrs = check_thresholds(p.iou_thrs, "params.iou_thrs", empty_is_index_error=True)
        check_thresholds(p.rec_thrs, "params.rec_thrs", empty_is_index_error=False)
        area = check_area_ranges(p.area_rng, p.area_rng_lbl, "params.area_rng", "params.area_rng_lbl")
        p.img_ids = list(np.unique(np.asarray(p.img_ids, np.int64)).tolist())
        gt = self.lvis_gt.ground_truth(p.iou_type == "segm")
        if len(gt.ann_id) and np.any(gt.ann_id == 0) and not self.match_zero_id:
            warnings.warn(zero_id_message("lvis_gt", "LVISEval(..., match_zero_id=True)"), OfficialToolsDifferenceWarning,
                          stacklevel=2)
        dets = self.lvis_dt.detections(gt)
        self._pm = match_for_params(
            gt, dets, iou_type=p.iou_type, img_rows=id_positions(p.img_ids, gt.image_ids, "params.img_ids"),
            cat_rows=id_positions(p.cat_ids, gt.category_ids, "params.cat_ids"), use_cats=True,
            iou_thrs=iou_thrs, area_rng=area, zero_id_unmatched=not self.match_zero_id)
        freq = gt.frequency[self._pm.cat_rows]
        self.freq_groups = [np.flatnonzero(freq == f).tolist() for f in p.img_count_lbl]
        self._acc = None
        self._per_image = {}
        self.eval = {}

    def accumulate(self) -> None:
        if self._pm is None:
            logger.warning("Please run evaluate first.")
            raise RuntimeError("Please run evaluate() first.")
        p = self.params
        acc = accumulate_for_params(self._pm, rec_thrs=np.asarray(p.rec_thrs, np.float64), max_dets=None)
        self._acc = acc
        self.eval = {"params": p, "counts": list(acc.precision.shape[:4]),
                     "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S"),
                     "precision": acc.precision[..., 0], "recall": acc.recall[..., 0],
                     "dt_pointers": self._dt_pointers(acc)}

    def _dt_pointers(self, acc) -> dict:
        pm = self._pm
        m, det = pm.match, pm.det
        T, A = m.code.shape[1], m.code.shape[0]
        cat_of = pm.dets.category[det]
        out: dict[int, dict[int, dict]] = {k: {a: {} for a in range(A)} for k in range(len(pm.cat_rows))}
        for a in range(A):
            sel = acc.ranked[a, 0]
            codes = np.stack([m.codes(a, t) for t in range(T)])[:, sel] if T else np.zeros((0, len(sel)), np.int8)
            ok = ~(m.det_out[a] | m.det_nel)[sel]
            tps, fps = codes == 1, (codes == 0) & ok[None, :]
            rows = det[sel] if self.lvis_dt.scored is None else self.lvis_dt.scored[det[sel]]
            ids = rows + 1  # LVISResults ids are positions + 1
            seg = cat_of[sel]
            for k, row in enumerate(pm.cat_rows):
                if acc.num_gt[k, a] == 0:
                    continue
                lo, hi = np.searchsorted(seg, row, "left"), np.searchsorted(seg, row, "right")
                out[k][a] = {"dt_ids": ids[lo:hi], "tps": tps[:, lo:hi], "fps": fps[:, lo:hi]}
        return out

    # ------------------------------------------------------------------ summarize
    def _summarize(self, summary_type: str, iou_thr=None, area_rng="all", freq_group_idx=None) -> float:
        p = self.params
        aidx = [i for i, lbl in enumerate(p.area_rng_lbl) if lbl == area_rng]
        s = self.eval["precision"] if summary_type == "ap" else self.eval["recall"]
        if iou_thr is not None:
            s = s[np.where(iou_thr == np.asarray(p.iou_thrs))[0]]
        if summary_type == "ap":
            s = s[:, :, self.freq_groups[freq_group_idx], aidx] if freq_group_idx is not None else s[:, :, :, aidx]
        else:
            s = s[:, :, aidx]
        return mean_defined(s)

    def summarize(self) -> None:
        if not self.eval:
            raise RuntimeError("Please run accumulate() first.")
        max_dets = self.params.max_dets
        r = self.results
        r["AP"] = self._summarize("ap")
        r["AP50"] = self._summarize("ap", iou_thr=0.50)
        r["AP75"] = self._summarize("ap", iou_thr=0.75)
        r["APs"] = self._summarize("ap", area_rng="small")
        r["APm"] = self._summarize("ap", area_rng="medium")
        r["APl"] = self._summarize("ap", area_rng="large")
        r["APr"] = self._summarize("ap", freq_group_idx=0)
        r["APc"] = self._summarize("ap", freq_group_idx=1)
        r["APf"] = self._summarize("ap", freq_group_idx=2)
        self.stats = np.array([r[k] for k in list(r)[:9]], float)
        r[f"AR@{max_dets}"] = self._summarize("ar")
        for area in ("small", "medium", "large"):
            r[f"AR{area[0]}@{max_dets}"] = self._summarize("ar", area_rng=area)

    def run(self) -> None:
        self.evaluate()
        self.accumulate()
        self.summarize()

    def get_results(self) -> "OrderedDict[str, float]":
        if not self.results:
            logger.warning("results is empty. Call run().")
        return self.results

    def print_results(self) -> None:
        template = " {:<18} {} @[ IoU={:<9} | area={:>6s} | maxDets={:>3d} catIds={:>3s}] = {:0.3f}"
        for key, value in self.results.items():
            max_dets = self.params.max_dets
            if "AP" in key:
                title, cat_group_name = "Average Precision", "all"
            else:
                title, cat_group_name = "Average Recall", "all"
            if len(key) > 2 and key[2].isdigit():
                iou_thr = float(key[2:]) / 100
                iou = "{:0.2f}".format(iou_thr)
            else:
                iou = "{:0.2f}:{:0.2f}".format(self.params.iou_thrs[0], self.params.iou_thrs[-1])
            if len(key) > 2 and key[2] in "rcf":
                cat_group_name = key[2]
            area_rng = key[2] if len(key) > 2 and key[2] in "sml" else "all"
            typ = "(AP)" if "AP" in key else "(AR)"
            print(template.format(title, typ, iou, area_rng, max_dets, cat_group_name, value))

    # ------------------------------------------------------------------ per-image records, on request
    def _groups(self) -> tuple[dict, dict]:
        if "groups" not in self._per_image:
            pm = self._pm
            if pm is None:
                raise RuntimeError("Please run evaluate() first.")
            g = pm.gt
            anns, res = self.lvis_gt.anns, self.lvis_dt.dataset["annotations"]
            gts, dts = defaultdict(list), defaultdict(list)
            for i in range(len(g)):
                a = anns[int(g.ann_id[i])]
                gts[a["image_id"], a["category_id"]].append(a)
            for j in np.sort(pm.det):
                a = res[int(j)]
                dts[a["image_id"], a["category_id"]].append(a)
            self._per_image["groups"] = (gts, dts)
        return self._per_image["groups"]

    def compute_iou(self, img_id: int, cat_id: int):
        gts, dts = self._groups()
        gt, dt = gts.get((img_id, cat_id), []), dts.get((img_id, cat_id), [])
        img = self.lvis_gt.imgs[img_id]
        return group_ious(dt, gt, iou_type=self.params.iou_type, size=(img["height"], img["width"]),
                          crowd=[0] * len(gt))

    @property
    def ious(self) -> dict:
        """{(img_id, cat_id): (D, G) IoU} for every evaluated pair (computed on first read)."""
        if "ious" not in self._per_image:
            self._per_image["ious"] = {(i, c): self.compute_iou(i, c) for i in self.params.img_ids
                                       for c in self.params.cat_ids}
        return self._per_image["ious"]

    def evaluate_img(self, img_id: int, cat_id: int, area_rng) -> dict | None:
        gts, dts = self._groups()
        gt, dt = gts.get((img_id, cat_id), []), dts.get((img_id, cat_id), [])
        ious = self._per_image.get("ious", {}).get((img_id, cat_id))
        if ious is None:
            ious = self.compute_iou(img_id, cat_id)
        r = evaluate_group(gt, dt, ious, iou_thrs=np.asarray(self.params.iou_thrs), area_rng=area_rng, coco=False,
                           not_exhaustive=set(self.lvis_gt.imgs[img_id]["not_exhaustive_category_ids"]))
        if r is not None:
            r["image_id"], r["category_id"] = img_id, cat_id
        return r

    @property
    def eval_imgs(self) -> list:
        """lvis-api's per (category, area, image) records, in its order (computed on first read)."""
        if "eval_imgs" not in self._per_image:
            p = self.params
            self._per_image["eval_imgs"] = [self.evaluate_img(i, c, a) for c in p.cat_ids for a in p.area_rng
                                            for i in p.img_ids]
        return self._per_image["eval_imgs"]
