"""lvis-api drop-in (``from vistabench.compat.lvis import LVIS, LVISResults, LVISEval``) and a
detectron2-style evaluator.

The three classes take lvis-api's constructor arguments and give the same ``get_results()``
(an ``OrderedDict`` with lvis-api's keys and its -1 for "undefined", so code written for lvis-api —
detectron2's and mmdetection's LVIS evaluators — reads them unchanged) and the same
``eval["precision"]`` (T, R, K, A) / ``eval["recall"]`` (T, K, A) arrays, -1 where lvis-api writes
-1. Differences: ``params`` honours ``max_dets`` (the AR label, as lvis-api), ``img_ids`` and
``cat_ids`` are informative only (the whole set is evaluated; lvis-api does the same unless they are
changed); ``iou_thrs``/``rec_thrs``/``area_rng`` are fixed at lvis-api's defaults.

:class:`LVISEvaluator` follows detectron2's ``DatasetEvaluator`` protocol without depending on it:
``reset()``, ``process(inputs, outputs)`` (one call per batch; predictions are kept as arrays, not
dicts) and ``evaluate()``, returning AP^Old, AP^Fixed and AP^Pool (see ``docs/detection.md``).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..data.coco import read_ground_truth, read_result_columns
from ..errors import InputError
from ..metrics.detection import (AREA_LABELS, AREA_RANGES, DetectionEvaluation, Detections, GroundTruth,
                                 IOU_THRESHOLDS, LVIS_MAX_DETS, RECALL_THRESHOLDS, accumulate, evaluate_detections,
                                 match_set, summarize, top_per_image, warn_annotation_id_zero)

__all__ = ["LVIS", "LVISResults", "LVISEval", "LVISEvaluator", "Params"]

logger = logging.getLogger(__name__)


class LVIS:
    """LVIS ground truth, as ``lvis.LVIS(annotation_path)`` (a dict is accepted too).

    ``get_img_ids``, ``get_cat_ids``, ``get_ann_ids``, ``load_anns``, ``load_cats``, ``load_imgs``
    and the ``dataset`` / ``anns`` / ``cats`` / ``imgs`` dicts are available; the dicts are built
    on first use (evaluation does not need them).
    """

    def __init__(self, annotation_path: str | Path | dict):
        self._source = annotation_path if isinstance(annotation_path, dict) else str(annotation_path)
        self._gt: dict[bool, GroundTruth] = {}
        self._dataset: dict | None = annotation_path if isinstance(annotation_path, dict) else None
        self.ground_truth(False)  # validates now, as lvis-api reads at construction

    def ground_truth(self, with_segmentation: bool) -> GroundTruth:
        """The annotations as a :class:`GroundTruth` (cached; masks only when asked for)."""
        if with_segmentation not in self._gt:
            if with_segmentation and False in self._gt:
                del self._gt[False]
            self._gt[with_segmentation] = read_ground_truth(self._source, format="lvis",
                                                            with_segmentation=with_segmentation)
        return self._gt[with_segmentation]

    @property
    def _any_gt(self) -> GroundTruth:
        return next(iter(self._gt.values())) if self._gt else self.ground_truth(False)

    @property
    def dataset(self) -> dict:
        if self._dataset is None:
            import json

            with open(self._source, "rb") as f:
                self._dataset = json.load(f)
        return self._dataset

    @property
    def anns(self) -> dict:
        return {a["id"]: a for a in self.dataset["annotations"]}

    @property
    def cats(self) -> dict:
        return {c["id"]: c for c in self.dataset["categories"]}

    @property
    def imgs(self) -> dict:
        return {i["id"]: i for i in self.dataset["images"]}

    def get_img_ids(self) -> list[int]:
        return self._any_gt.image_ids.tolist()

    def get_cat_ids(self) -> list[int]:
        return self._any_gt.category_ids.tolist()

    def get_ann_ids(self, img_ids=None, cat_ids=None, area_rng=None) -> list[int]:
        g = self._any_gt
        keep = np.ones(len(g), bool)
        if img_ids is not None:
            keep &= np.isin(g.image_ids[g.image], np.asarray(list(img_ids)))
        if cat_ids is not None:
            keep &= np.isin(g.category_ids[g.category], np.asarray(list(cat_ids)))
        if cat_ids is not None or area_rng is not None:
            lo, hi = (0.0, float("inf")) if area_rng is None else area_rng
            keep &= (g.area > lo) & (g.area < hi)
        return g.ann_id[keep].tolist()

    def load_anns(self, ids=None) -> list[dict]:
        a = self.anns
        return list(a.values()) if ids is None else [a[i] for i in ids]

    def load_cats(self, ids) -> list[dict]:
        c = self.cats
        return list(c.values()) if ids is None else [c[i] for i in ids]

    def load_imgs(self, ids) -> list[dict]:
        m = self.imgs
        return list(m.values()) if ids is None else [m[i] for i in ids]


class LVISResults:
    """Detections, as ``lvis.LVISResults(lvis_gt, results, max_dets=300)``: ``results`` is a path or a
    list of result dicts; each image keeps its top ``max_dets`` (-1: all), as lvis-api."""

    def __init__(self, lvis_gt: LVIS | str | Path, results: str | Path | list, max_dets: int = LVIS_MAX_DETS):
        self.lvis_gt = lvis_gt if isinstance(lvis_gt, LVIS) else LVIS(lvis_gt)
        if isinstance(results, Path):
            results = str(results)
        self.columns = read_result_columns(results, keep_segmentation=True)
        if len(self.columns["score"]) == 0:
            raise InputError("results: an empty results list (lvis-api fails on it too)")
        self.max_dets = int(max_dets)

    def detections(self, gt: GroundTruth) -> Detections:
        c = self.columns
        d = Detections.from_ids(gt, image_id=c["image_id"], category_id=c["category_id"], bbox=c["bbox"],
                                score=c["score"], segmentation=c["segmentation"], area=c["area"])
        if self.max_dets >= 0:
            d = d.subset(top_per_image(d, k=max(self.max_dets, 1)) if self.max_dets > 0 else np.zeros(0, np.int64))
        return d


class Params:
    """lvis-api's evaluation parameters (fixed at its defaults, except ``max_dets``)."""

    def __init__(self, iou_type: str):
        self.iou_type = iou_type
        self.img_ids: list[int] = []
        self.cat_ids: list[int] = []
        self.iou_thrs = IOU_THRESHOLDS.copy()
        self.rec_thrs = RECALL_THRESHOLDS.copy()
        self.max_dets = LVIS_MAX_DETS
        self.area_rng = AREA_RANGES.tolist()
        self.area_rng_lbl = list(AREA_LABELS)
        self.use_cats = 1


class LVISEval:
    """As ``lvis.LVISEval(lvis_gt, lvis_dt, iou_type="segm")``: ``run()`` = ``evaluate()``,
    ``accumulate()``, ``summarize()``; ``get_results()``; ``print_results()``."""

    def __init__(self, lvis_gt: LVIS | str, lvis_dt: LVISResults | str | list, iou_type: str = "segm"):
        if iou_type not in ("bbox", "segm"):
            raise ValueError(f"iou_type: {iou_type} is not supported.")
        self.lvis_gt = lvis_gt if isinstance(lvis_gt, LVIS) else LVIS(lvis_gt)
        self.lvis_dt = lvis_dt if isinstance(lvis_dt, LVISResults) else LVISResults(self.lvis_gt, lvis_dt)
        self.params = Params(iou_type)
        self.params.img_ids = self.lvis_gt.get_img_ids()
        self.params.cat_ids = self.lvis_gt.get_cat_ids()
        self.eval: dict[str, Any] = {}
        self.results: OrderedDict[str, float] = OrderedDict()
        self._matched = None

    def evaluate(self) -> None:
        gt = self.lvis_gt.ground_truth(self.params.iou_type == "segm")
        warn_annotation_id_zero(gt)
        self._dets = self.lvis_dt.detections(gt)
        self._matched = match_set(gt, self._dets, iou_type=self.params.iou_type)

    def accumulate(self) -> None:
        if self._matched is None:
            raise RuntimeError("Please run evaluate() first.")
        acc = accumulate(self._matched, self._dets, np.ones(len(self._matched.det), bool))
        self._acc = acc
        self.eval = {"params": self.params, "counts": list(acc.precision.shape),
                     "precision": np.nan_to_num(acc.precision, nan=-1.0),
                     "recall": np.nan_to_num(acc.recall, nan=-1.0)}

    def summarize(self) -> None:
        if not self.eval:
            raise RuntimeError("Please run accumulate() first.")
        res = summarize(self._acc, self._matched.gt, max_dets_label=self.params.max_dets)
        self.results = OrderedDict((k, -1 if v != v else v) for k, v in res.items())

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
            title, typ = ("Average Precision", "(AP)") if "AP" in key else ("Average Recall", "(AR)")
            if len(key) > 2 and key[2].isdigit():
                iou = f"{float(key[2:]) / 100:0.2f}"
            else:
                iou = f"{self.params.iou_thrs[0]:0.2f}:{self.params.iou_thrs[-1]:0.2f}"
            group = key[2] if len(key) > 2 and key[2] in "rcf" else "all"
            area = key[2] if len(key) > 2 and key[2] in "sml" else "all"
            print(template.format(title, typ, iou, area, self.params.max_dets, group, value))


def _array(x: Any) -> np.ndarray:
    """A tensor (any framework, any device) or array-like as a numpy array."""
    for attr in ("detach", "cpu"):
        if hasattr(x, attr):
            x = getattr(x, attr)()
    if hasattr(x, "numpy"):
        x = x.numpy()
    return np.asarray(x)


class LVISEvaluator:
    """A detectron2-style evaluator (duck-typed, no detectron2 needed) giving AP^Old, AP^Fixed, AP^Pool.

    Parameters
    ----------
    lvis_gt : LVIS, or a path / dict of LVIS (or COCO) ground truth.
    iou_type : "bbox" or "segm" (``pred_masks`` must then be present; encoded to RLE as they arrive).
    class_ids : category id of each contiguous class index the model predicts; default: the ground
        truth's category ids sorted (detectron2's mapping for LVIS).
    max_dets_per_image, dets_per_class : AP^Old's per-image cut and AP^Fixed's per-class budget.

    ``process(inputs, outputs)``: ``inputs[i]["image_id"]``; ``outputs[i]["instances"]`` with
    ``pred_boxes`` (XYXY, a ``Boxes``-like object with ``.tensor`` or an (N, 4) array), ``scores``,
    ``pred_classes`` and, for segm, ``pred_masks`` (N, H, W); or a dict with ``boxes`` (XYXY),
    ``scores``, ``labels`` (and ``masks``). ``evaluate()`` returns ``{iou_type: {"AP^Old": ..,
    "AP^Fixed": .., "AP^Pool": .., "APr^Old": .., ...}}`` in percent, as detectron2's evaluators.
    """

    def __init__(self, lvis_gt: LVIS | str | Path | dict, *, iou_type: str = "bbox",
                 class_ids: Sequence[int] | None = None, max_dets_per_image: int = LVIS_MAX_DETS,
                 dets_per_class: int = 10_000):
        if iou_type not in ("bbox", "segm"):
            raise InputError(f"iou_type: expected 'bbox' or 'segm', got {iou_type!r}")
        self.iou_type = iou_type
        if isinstance(lvis_gt, LVIS):
            self.gt = lvis_gt.ground_truth(iou_type == "segm")
        else:
            self.gt = read_ground_truth(lvis_gt if isinstance(lvis_gt, dict) else str(lvis_gt),
                                        with_segmentation=iou_type == "segm")
        self.class_ids = np.asarray(self.gt.category_ids if class_ids is None else class_ids, np.int64)
        self.max_dets_per_image = max_dets_per_image
        self.dets_per_class = dets_per_class
        self.last: DetectionEvaluation | None = None
        self.reset()

    def reset(self) -> None:
        self._parts: list[tuple[np.ndarray, ...]] = []
        self._masks: list = []

    def process(self, inputs: Sequence[dict], outputs: Sequence[Any]) -> None:
        for inp, out in zip(inputs, outputs):
            image_id = int(inp["image_id"])
            inst = out["instances"] if isinstance(out, dict) and "instances" in out else out
            if isinstance(inst, dict):
                boxes, scores, labels = inst["boxes"], inst["scores"], inst["labels"]
                masks = inst.get("masks")
            else:
                boxes, scores, labels = inst.pred_boxes, inst.scores, inst.pred_classes
                masks = getattr(inst, "pred_masks", None)
            boxes = _array(getattr(boxes, "tensor", boxes)).astype(np.float64).reshape(-1, 4)
            xywh = np.concatenate([boxes[:, :2], boxes[:, 2:] - boxes[:, :2]], axis=1)
            labels = _array(labels).astype(np.int64).reshape(-1)
            if len(labels) and (labels.min() < 0 or labels.max() >= len(self.class_ids)):
                raise InputError(f"process: class index {int(labels.max())} outside the {len(self.class_ids)} "
                                 f"classes of class_ids")
            self._parts.append((np.full(len(labels), image_id, np.int64), self.class_ids[labels], xywh,
                                _array(scores).astype(np.float64).reshape(-1)))
            if self.iou_type == "segm":
                if masks is None:
                    raise InputError("process: iou_type 'segm' needs pred_masks in the outputs")
                import pycocotools.mask as mask_utils

                m = _array(masks).astype(np.uint8)
                m = m.reshape(len(labels), *m.shape[-2:])
                self._masks.extend(mask_utils.encode(np.asfortranarray(m.transpose(1, 2, 0))) if len(labels) else [])

    def evaluate(self) -> dict[str, dict[str, float]]:
        if self._parts:
            iid, cid, box, score = (np.concatenate(x) for x in zip(*self._parts))
        else:
            iid = cid = np.zeros(0, np.int64)
            box, score = np.zeros((0, 4)), np.zeros(0)
        dets = Detections.from_ids(self.gt, image_id=iid, category_id=cid, bbox=box, score=score,
                                   segmentation=self._masks if self.iou_type == "segm" else None)
        ev = evaluate_detections(self.gt, dets, iou_type=self.iou_type, max_dets_per_image=self.max_dets_per_image,
                                 dets_per_class=self.dets_per_class)
        self.last = ev
        out: dict[str, float] = {}
        for v in ("old", "fixed", "pool"):
            for k, x in ev.results[v].items():
                if k.startswith("AP"):
                    out[f"{k}^{v.capitalize()}"] = 100 * x
        return {self.iou_type: out}
