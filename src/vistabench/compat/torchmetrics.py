"""torchmetrics-style ``MeanAveragePrecision``: swap ``from torchmetrics.detection import
MeanAveragePrecision`` for ``from vistabench.compat.torchmetrics import MeanAveragePrecision``.

Same constructor (``box_format``, ``iou_type`` — "bbox", "segm" or both —, ``iou_thresholds``,
``rec_thresholds``, ``max_detection_thresholds``, ``class_metrics``, ``extended_summary``,
``average`` "macro"/"micro"; ``backend`` is accepted and ignored), same ``update(preds, target)``
input (per image a dict of tensors: preds ``boxes``/``masks``, ``scores``, ``labels``; target
``boxes``/``masks``, ``labels``, optional ``iscrowd`` and ``area``) and the same ``compute()`` keys
(``map map_50 map_75 map_small map_medium map_large mar_1 mar_10 mar_100 mar_small mar_medium
mar_large map_per_class mar_100_per_class classes``; with both IoU types each key is prefixed
``bbox_`` / ``segm_``), computed through :mod:`vistabench.compat.coco` on the COCO data torchmetrics
builds (images numbered in update order, category ids = labels, areas as torchmetrics sets them).

It is a ``torchmetrics.Metric`` when torchmetrics is installed (``reset``, ``to``, Lightning
logging; box states are gathered across processes; masks are not — segm under DDP is refused) and a
plain object otherwise. torch is imported by this module only.
"""

from __future__ import annotations

import contextlib
import io
from typing import Any, Sequence

import numpy as np

from ..errors import InputError

try:  # optional base class: torchmetrics' state handling when it is installed
    from torchmetrics import Metric as _Base  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - exercised where torchmetrics is absent
    _Base = object

__all__ = ["MeanAveragePrecision"]

_STATES = ("detection_box", "detection_scores", "detection_labels", "groundtruth_box", "groundtruth_labels",
           "groundtruth_crowds", "groundtruth_area")


def _np(x: Any) -> np.ndarray:
    for attr in ("detach", "cpu"):
        if hasattr(x, attr):
            x = getattr(x, attr)()
    return np.asarray(x.numpy() if hasattr(x, "numpy") else x)


def _to_xywh(b: np.ndarray, fmt: str) -> np.ndarray:
    """torchvision's ``box_convert(.., fmt, "xywh")`` in the boxes' dtype."""
    if b.size == 0:
        return b.reshape(-1, 4)
    if fmt == "cxcywh":
        cx, cy, w, h = b[:, 0], b[:, 1], b[:, 2], b[:, 3]
        half = b.dtype.type(0.5)
        b = np.stack([cx - half * w, cy - half * h, cx + half * w, cy + half * h], 1)
        fmt = "xyxy"
    if fmt == "xyxy":
        return np.stack([b[:, 0], b[:, 1], b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]], 1)
    return b


class MeanAveragePrecision(_Base):  # type: ignore[misc, valid-type]
    """torchmetrics' ``MeanAveragePrecision`` backed by vistabench (see the module docstring)."""

    def __init__(self, box_format: str = "xyxy", iou_type: str | tuple = "bbox", iou_thresholds: list | None = None,
                 rec_thresholds: list | None = None, max_detection_thresholds: list | None = None,
                 class_metrics: bool = False, extended_summary: bool = False, average: str = "macro",
                 backend: str = "pycocotools", **kwargs: Any):
        if _Base is not object:
            super().__init__(**kwargs)
        elif kwargs:
            raise InputError(f"{next(iter(kwargs))}: unknown argument (torchmetrics is not installed)")
        if box_format not in ("xyxy", "xywh", "cxcywh"):
            raise InputError(f"box_format: expected 'xyxy', 'xywh' or 'cxcywh', got {box_format!r}")
        types = (iou_type,) if isinstance(iou_type, str) else tuple(iou_type)
        if not types or any(t not in ("bbox", "segm") for t in types):
            raise InputError(f"iou_type: expected 'bbox', 'segm' or both, got {iou_type!r}")
        for name, v in (("iou_thresholds", iou_thresholds), ("rec_thresholds", rec_thresholds),
                        ("max_detection_thresholds", max_detection_thresholds)):
            if v is not None and not isinstance(v, list):
                raise InputError(f"{name}: expected a list or None, got {type(v).__name__}")
        if max_detection_thresholds is not None and len(max_detection_thresholds) != 3:
            raise InputError(f"max_detection_thresholds: expected 3 values, got {len(max_detection_thresholds)}")
        if average not in ("macro", "micro"):
            raise InputError(f"average: expected 'macro' or 'micro', got {average!r}")
        for name, v in (("class_metrics", class_metrics), ("extended_summary", extended_summary)):
            if not isinstance(v, bool):
                raise InputError(f"{name}: expected a boolean, got {v!r}")
        self.box_format, self.iou_type, self.average = box_format, types, average
        import torch

        # torchmetrics' defaults, bit for bit (float32 thresholds as Python floats)
        self.iou_thresholds = iou_thresholds or torch.linspace(0.5, 0.95, round((0.95 - 0.5) / 0.05) + 1).tolist()
        self.rec_thresholds = rec_thresholds or torch.linspace(0.0, 1.00, round(1.00 / 0.01) + 1).tolist()
        self.max_detection_thresholds = sorted(int(m) for m in (max_detection_thresholds or [1, 10, 100]))
        self.class_metrics, self.extended_summary = class_metrics, extended_summary
        if _Base is not object:
            for s in _STATES:
                self.add_state(s, default=[], dist_reduce_fx=None)
        else:
            for s in _STATES:
                setattr(self, s, [])
        self.detection_mask: list = []
        self.groundtruth_mask: list = []

    def reset(self) -> None:
        if _Base is not object:
            super().reset()
        else:
            for s in _STATES:
                setattr(self, s, [])
        self.detection_mask, self.groundtruth_mask = [], []

    # ------------------------------------------------------------------------------ update
    def update(self, preds: Sequence[dict], target: Sequence[dict]) -> None:
        import torch

        if not isinstance(preds, Sequence) or not isinstance(target, Sequence):
            raise InputError("preds, target: expected lists of dicts (one per image)")
        if len(preds) != len(target):
            raise InputError(f"preds, target: {len(preds)} predictions for {len(target)} targets (one each per image)")
        need = [{"bbox": "boxes", "segm": "masks"}[t] for t in self.iou_type]
        for side, items, keys in (("preds", preds, need + ["labels", "scores"]), ("target", target, need + ["labels"])):
            for i, item in enumerate(items):
                miss = [k for k in keys if not isinstance(item, dict) or k not in item]
                if miss:
                    raise InputError(f"{side}[{i}]: lacks {miss[0]!r}")
                n = len(_np(item["labels"]).reshape(-1))
                for k in keys:
                    if k != "labels" and len(_np(item[k])) != n and not (k == "boxes" and _np(item[k]).size == 0 == n):
                        raise InputError(f"{side}[{i}].{k}: {len(_np(item[k]))} entries for {n} labels")
        for side, items in (("detection", preds), ("groundtruth", target)):
            for item in items:
                if "bbox" in self.iou_type:
                    b = _np(item["boxes"])
                    getattr(self, f"{side}_box").append(torch.as_tensor(_to_xywh(b.reshape(-1, 4), self.box_format)))
                if "segm" in self.iou_type:
                    import pycocotools.mask as mask_utils

                    rles = []
                    for m in _np(item["masks"]):
                        r = mask_utils.encode(np.asfortranarray(m))
                        rles.append((tuple(r["size"]), r["counts"]))
                    getattr(self, f"{side}_mask").append(tuple(rles))
                lab = torch.as_tensor(_np(item["labels"]).reshape(-1))
                getattr(self, f"{side}_labels").append(lab)
                if side == "detection":
                    self.detection_scores.append(torch.as_tensor(_np(item["scores"]).reshape(-1)))
                else:
                    self.groundtruth_crowds.append(torch.as_tensor(_np(item.get("iscrowd", torch.zeros_like(lab)))))
                    self.groundtruth_area.append(torch.as_tensor(_np(item.get("area", torch.zeros_like(lab)))))

    # ------------------------------------------------------------------------------ compute
    def _dataset(self, labels, boxes, masks, scores=None, crowds=None, area=None, all_labels=()) -> dict:
        import pycocotools.mask as mask_utils

        images, anns, ann_id = [], [], 1
        both = len(self.iou_type) > 1
        for i, lab in enumerate(labels):
            bx = boxes[i].tolist() if boxes is not None else None
            mk = masks[i] if masks is not None else None
            if mk is not None and len(mk) == 0 and boxes is None:
                continue
            images.append({"id": i})
            if "segm" in self.iou_type and mk:
                images[-1]["height"], images[-1]["width"] = mk[0][0][0], mk[0][0][1]
            for k, label in enumerate(lab.tolist()):
                if not isinstance(label, int):
                    raise InputError(f"labels: sample {i}, element {k}: expected an integer class, got {label!r}")
                seg = {"size": mk[k][0], "counts": mk[k][1]} if mk is not None and len(mk) else None
                a_box = a_seg = None
                if area is not None and area[i][k].item() > 0:
                    a = area[i][k].tolist()
                else:
                    a = float(mask_utils.area(seg)) if "segm" in self.iou_type else bx[k][2] * bx[k][3]
                    if both:
                        a_box, a_seg = bx[k][2] * bx[k][3], float(mask_utils.area(seg))
                ann = {"id": ann_id, "image_id": i, "area": a, "category_id": label,
                       "iscrowd": crowds[i][k].tolist() if crowds is not None else 0}
                if a_box is not None:
                    ann["area_bbox"], ann["area_segm"] = a_box, a_seg
                if bx is not None:
                    ann["bbox"] = bx[k]
                if seg is not None:
                    ann["segmentation"] = seg
                if scores is not None:
                    sc = scores[i][k].tolist()
                    if not isinstance(sc, float):
                        raise InputError(f"scores: sample {i}, element {k}: expected a float, got {sc!r}")
                    ann["score"] = sc
                anns.append(ann)
                ann_id += 1
        cats = [{"id": c, "name": str(c)} for c in all_labels] if self.average != "micro" else [{"id": 0, "name": "0"}]
        return {"images": images, "annotations": anns, "categories": cats}

    def _cocos(self, average: str):
        from .coco import COCO

        import torch

        dl, gl = list(self.detection_labels), list(self.groundtruth_labels)
        if average == "micro":
            dl, gl = [torch.zeros_like(x) for x in dl], [torch.zeros_like(x) for x in gl]
        all_labels = torch.cat(dl + gl).unique().tolist() if dl or gl else []
        saved, self.average = self.average, average
        try:
            gt, dt = COCO(), COCO()
            gt.dataset = self._dataset(gl, self.groundtruth_box or None, self.groundtruth_mask or None,
                                       crowds=self.groundtruth_crowds, area=self.groundtruth_area, all_labels=all_labels)
            dt.dataset = self._dataset(dl, self.detection_box or None, self.detection_mask or None,
                                       scores=self.detection_scores, all_labels=all_labels)
        finally:
            self.average = saved
        gt.createIndex()
        dt.createIndex()
        return dt, gt

    def _evaluator(self, gt, dt, i_type):
        from .coco import COCOeval

        e = COCOeval(gt, dt, i_type)
        e.params.iouThrs = np.array(self.iou_thresholds, dtype=np.float64)
        e.params.recThrs = np.array(self.rec_thresholds, dtype=np.float64)
        e.params.maxDets = list(self.max_detection_thresholds)
        return e

    def compute(self) -> dict:
        import torch

        dist = torch.distributed
        if "segm" in self.iou_type and dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            raise InputError("iou_type: 'segm' masks are not gathered across processes by vistabench's metric")
        mdt = self.max_detection_thresholds
        names = ["map", "map_50", "map_75", "map_small", "map_medium", "map_large", f"mar_{mdt[0]}", f"mar_{mdt[1]}",
                 f"mar_{mdt[2]}", "mar_small", "mar_medium", "mar_large"]
        dt, gt = self._cocos(self.average)
        out: dict[str, Any] = {}
        classes = torch.cat(list(self.detection_labels) + list(self.groundtruth_labels)).unique().tolist() \
            if (self.detection_labels or self.groundtruth_labels) else []
        with contextlib.redirect_stdout(io.StringIO()):
            for i_type in self.iou_type:
                prefix = "" if len(self.iou_type) == 1 else f"{i_type}_"
                if len(self.iou_type) > 1:
                    for a in dt.dataset["annotations"]:
                        a["area"] = a[f"area_{i_type}"]
                if len(dt.imgs) == 0 or len(gt.imgs) == 0:
                    stats = [-1.0] * 12
                else:
                    dt.createIndex()  # the areas may have changed
                    e = self._evaluator(gt, dt, i_type)
                    e.evaluate()
                    e.accumulate()
                    e.summarize()
                    stats = list(e.stats)
                    if self.extended_summary:
                        out[f"{prefix}ious"] = {k: torch.tensor(np.asarray(v), dtype=torch.float32)
                                                for k, v in e.ious.items()}
                        for k in ("precision", "recall", "scores"):
                            out[f"{prefix}{k}"] = torch.tensor(e.eval[k])
                out.update({f"{prefix}{n}": torch.tensor([v], dtype=torch.float32) for n, v in zip(names, stats)})
                if len(dt.imgs) == 0 or len(gt.imgs) == 0:
                    continue  # torchmetrics adds no per-class keys then
                mpc = mrc = torch.tensor([-1], dtype=torch.float32)
                if self.class_metrics:
                    cdt, cgt = self._cocos("macro")
                    e = self._evaluator(cgt, cdt, i_type)
                    aps, ars = [], []
                    for c in classes:
                        e.params.catIds = [c]
                        e.evaluate()
                        e.accumulate()
                        e.summarize()
                        aps.append(e.stats[0])
                        ars.append(e.stats[8])
                    mpc, mrc = torch.tensor(aps, dtype=torch.float32), torch.tensor(ars, dtype=torch.float32)
                out[f"{prefix}map_per_class"] = mpc
                out[f"{prefix}mar_{mdt[-1]}_per_class"] = mrc
        out["classes"] = torch.tensor(classes, dtype=torch.int32)
        return out
