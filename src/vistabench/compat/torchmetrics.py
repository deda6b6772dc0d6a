"""torchmetrics-style ``MeanAveragePrecision``: swap ``from torchmetrics.detection import
MeanAveragePrecision`` for ``from vistabench.compat.torchmetrics import MeanAveragePrecision``.

Same constructor (``box_format``, ``iou_type`` — "bbox", "segm" or both —, ``iou_thresholds``,
``rec_thresholds``, ``max_detection_thresholds``, ``class_metrics``, ``extended_summary``,
``average`` "macro"/"micro"; ``backend`` "pycocotools" or "faster_coco_eval", whose summary reads
every AP at the last detection limit), same ``update(preds, target)`` (or ``forward``)
input (per image a dict of tensors: preds ``boxes``/``masks``, ``scores``, ``labels``; target
``boxes``/``masks``, ``labels``, optional ``iscrowd`` and ``area``) and the same ``compute()`` keys
(``map map_50 map_75 map_small map_medium map_large mar_1 mar_10 mar_100 mar_small mar_medium
mar_large map_per_class mar_100_per_class classes``; with both IoU types each key is prefixed
``bbox_`` / ``segm_``), computed through :mod:`vistabench.compat.coco` on the COCO data torchmetrics
builds (images numbered in update order, category ids = labels, areas as torchmetrics sets them).

It is a ``torchmetrics.Metric`` when torchmetrics is installed (``reset``, ``to``, Lightning
logging; every state — the RLE masks too — is gathered across processes, as torchmetrics does) and a
plain object otherwise. torch is imported by this module only.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from typing import Any, Sequence

import numpy as np

from ..errors import InputError, InputTypeError
from .params_check import check_max_dets, check_thresholds

try:  # optional base class: torchmetrics' state handling when it is installed
    from torchmetrics import Metric as _Base  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - exercised where torchmetrics is absent
    _Base = object

__all__ = ["MeanAveragePrecision", "mean_average_precision"]

_STATES = ("detection_box", "detection_mask", "detection_scores", "detection_labels", "groundtruth_box",
           "groundtruth_mask", "groundtruth_labels", "groundtruth_crowds", "groundtruth_area")


def _np(x: Any) -> np.ndarray:
    for attr in ("detach", "cpu"):
        if hasattr(x, attr):
            x = getattr(x, attr)()
    return np.asarray(x.numpy() if hasattr(x, "numpy") else x)


def _to_xywh(b: np.ndarray, fmt: str) -> np.ndarray:
    """torchvision's ``box_convert(.., fmt, "xywh")``: integer boxes stay integers for xyxy / xywh
    and become float32 for cxcywh (``cx - 0.5 * w`` promotes, as in torch)."""
    if b.size == 0:
        return b.reshape(-1, 4)
    if fmt == "cxcywh":
        if b.dtype.kind in "iub":
            b = b.astype(np.float32)
        cx, cy, w, h = b[:, 0], b[:, 1], b[:, 2], b[:, 3]
        half = b.dtype.type(0.5)
        b = np.stack([cx - half * w, cy - half * h, cx + half * w, cy + half * h], 1)
        fmt = "xyxy"
    if fmt == "xyxy":
        return np.stack([b[:, 0], b[:, 1], b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]], 1)
    return b


_MANY_DETECTIONS = ("Encountered more than {} detections in a single image. This means that certain detections with "
                    "the lowest scores will be ignored, that may have an undesirable impact on performance. Please "
                    "consider adjusting the `max_detection_threshold` to suit your use case. To disable this warning, "
                    "set attribute class `warn_on_many_detections=False`, after initializing the metric.")


def check_inputs(preds: Any, target: Any, iou_type: tuple) -> None:
    """torchmetrics' input checks (same order, same ``ValueError`` wording, so code matching its
    messages keeps working), each naming the sample, then the shapes and values it leaves to
    chance: boxes (N, 4), masks (N, H, W), one score per detection, finite numbers."""
    if not isinstance(preds, Sequence):
        raise InputError(f"Expected argument `preds` to be of type Sequence, but got {type(preds).__name__}")
    if not isinstance(target, Sequence):
        raise InputError(f"Expected argument `target` to be of type Sequence, but got {type(target).__name__}")
    if len(preds) != len(target):
        raise InputError(f"Expected argument `preds` and `target` to have the same length, but got {len(preds)} and "
                         f"{len(target)} (one dict each per image)")
    need = [{"bbox": "boxes", "segm": "masks"}[t] for t in iou_type]
    import torch

    for side, items, keys in (("preds", preds, [*need, "labels", "scores"]), ("target", target, [*need, "labels"])):
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise InputTypeError(f"{side}[{i}]: expected a dict of tensors, got {type(item).__name__}")
        for k in keys:
            bad = next((i for i, item in enumerate(items) if k not in item), None)
            if bad is not None:
                raise InputError(f"Expected all dicts in `{side}` to contain the `{k}` key: {side}[{bad}] has none")
    for side, items, keys in (("preds", preds, [*need, "scores", "labels"]), ("target", target, [*need, "labels"])):
        for k in keys:
            bad = next((i for i, item in enumerate(items) if not isinstance(item[k], torch.Tensor)), None)
            if bad is not None:
                raise InputError(f"Expected all {k} in `{side}` to be of type Tensor: {side}[{bad}].{k} is "
                                 f"{type(items[bad][k]).__name__}")
    for side, items in (("preds", preds), ("target", target)):
        for i, item in enumerate(items):
            _check_item(side, i, item, need)


def _check_item(side: str, i: int, item: dict, need: list) -> None:
    where = f"{side}[{i}]"
    lab = item["labels"]
    if lab.ndim > 1 or lab.is_floating_point() or lab.is_complex():
        raise InputError(f"{where}.labels: expected a 1-D tensor of integer classes, got {tuple(lab.shape)} "
                         f"{str(lab.dtype).replace('torch.', '')}")
    n = int(lab.shape[0]) if lab.ndim else 1
    if "boxes" in need:
        b = item["boxes"]
        if not (b.numel() == 0 == n or (b.ndim == 2 and b.shape[1] == 4)):
            raise InputError(f"{where}.boxes: expected shape (N, 4) (one box of 4 coordinates per detection), got "
                             f"{tuple(b.shape)}")
        if b.numel() and b.shape[0] != n:
            raise InputError(f"{where}.boxes: {b.shape[0]} boxes for {n} labels")
        if b.numel() and not bool(torch_isfinite(b).all()):
            raise InputError(f"{where}.boxes: NaN or infinite coordinates")
    if "masks" in need:
        m = item["masks"]
        if not (m.numel() == 0 == n or m.ndim == 3):
            raise InputTypeError(f"{where}.masks: expected shape (N, H, W) (one binary mask per detection), got "
                                 f"{tuple(m.shape)}")
        if m.numel() and m.shape[0] != n:
            raise InputError(f"{where}.masks: {m.shape[0]} masks for {n} labels")
        if m.numel() and str(m.dtype) not in ("torch.bool", "torch.uint8"):  # torchmetrics' encoder refuses them too
            hint = " (probabilities? threshold them first: masks > 0.5)" if m.is_floating_point() else ""
            raise InputError(f"{where}.masks: expected boolean masks (torch.bool, or torch.uint8 of 0/1), got "
                             f"{m.dtype}{hint}")
    if side == "preds":
        sc = item["scores"]
        if sc.ndim > 1:
            raise InputError(f"{where}.scores: expected one score per detection (shape ({n},)), got {tuple(sc.shape)}; "
                             f"per-class score matrices are not detections")
        if (int(sc.shape[0]) if sc.ndim else 1) != n:
            raise InputError(f"{where}.scores: {int(sc.shape[0]) if sc.ndim else 1} scores for {n} labels")
        if sc.numel() and not bool(torch_isfinite(sc).all()):
            raise InputError(f"{where}.scores: NaN or infinite scores")
    else:
        for k in ("iscrowd", "area"):
            if k in item:
                v = item[k]
                vn = int(v.shape[0]) if getattr(v, "ndim", 0) else 1
                if vn != n:
                    raise InputError(f"{where}.{k}: {vn} values for {n} labels")


def torch_isfinite(x: Any) -> Any:
    import torch

    return torch.isfinite(x) if x.is_floating_point() else torch.ones_like(x, dtype=torch.bool)


class MeanAveragePrecision(_Base):  # type: ignore[misc, valid-type]
    """torchmetrics' ``MeanAveragePrecision`` backed by vistabench (see the module docstring)."""

    is_differentiable = False
    higher_is_better = True
    full_state_update = True
    #: as torchmetrics: warn once per update when an image has more detections than the last limit
    warn_on_many_detections: bool = True

    def __init__(self, box_format: str = "xyxy", iou_type: str | tuple = "bbox", iou_thresholds: list | None = None,
                 rec_thresholds: list | None = None, max_detection_thresholds: list | None = None,
                 class_metrics: bool = False, extended_summary: bool = False, average: str = "macro",
                 backend: str = "pycocotools", **kwargs: Any):
        if _Base is not object:
            super().__init__(**kwargs)
        elif kwargs:
            raise InputError(f"{next(iter(kwargs))}: unknown argument (torchmetrics is not installed)")
        if box_format not in ("xyxy", "xywh", "cxcywh"):
            raise InputError(f"Expected argument `box_format` to be one of ('xyxy', 'xywh', 'cxcywh') but got "
                             f"{box_format!r}")
        types = (iou_type,) if isinstance(iou_type, str) else tuple(iou_type)
        if not types or any(t not in ("bbox", "segm") for t in types):
            raise InputError(f"Expected argument `iou_type` to be one of ('segm', 'bbox') or a tuple of, but got "
                             f"{iou_type!r}")
        for name, v in (("iou_thresholds", iou_thresholds), ("rec_thresholds", rec_thresholds),
                        ("max_detection_thresholds", max_detection_thresholds)):
            if v is not None and not isinstance(v, list):
                raise InputError(f"Expected argument `{name}` to either be `None` or a list but got "
                                 f"{type(v).__name__}")
        if max_detection_thresholds is not None and len(max_detection_thresholds) != 3:
            raise InputError(f"When providing a list of max detection thresholds it should have length 3. Got value "
                             f"{len(max_detection_thresholds)} (max_detection_thresholds)")
        for name, v in (("class_metrics", class_metrics), ("extended_summary", extended_summary)):
            if not isinstance(v, bool):
                raise InputError(f"Expected argument `{name}` to be a boolean, got {v!r}")
        if average not in ("macro", "micro"):
            raise InputError(f"Expected argument `average` to be one of ('macro', 'micro') but got {average!r}")
        if backend not in ("pycocotools", "faster_coco_eval"):
            raise InputError(f"Expected argument `backend` to be one of ('pycocotools', 'faster_coco_eval') but got "
                             f"{backend!r}")
        self.box_format, self.iou_type, self.average, self.backend = box_format, types, average, backend
        import torch

        # torchmetrics' defaults, bit for bit (float32 thresholds as Python floats); [] means the default there
        self.iou_thresholds = iou_thresholds or torch.linspace(0.5, 0.95, round((0.95 - 0.5) / 0.05) + 1).tolist()
        self.rec_thresholds = rec_thresholds or torch.linspace(0.0, 1.00, round(1.00 / 0.01) + 1).tolist()
        check_thresholds(self.iou_thresholds, "iou_thresholds", empty_is_index_error=False)
        check_thresholds(self.rec_thresholds, "rec_thresholds", empty_is_index_error=False)
        mdt = check_max_dets(max_detection_thresholds or [1, 10, 100], "max_detection_thresholds", need=3)
        self.max_detection_thresholds = sorted(mdt)
        self.class_metrics, self.extended_summary = class_metrics, extended_summary
        for s in _STATES:
            if _Base is not object:
                self.add_state(s, default=[], dist_reduce_fx=None)
            else:
                setattr(self, s, [])

    def reset(self) -> None:
        if _Base is not object:
            super().reset()
        else:
            for s in _STATES:
                setattr(self, s, [])

    # ------------------------------------------------------------------------------ mask states
    def _apply(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """``.to`` / ``.cuda`` / ``.half`` move the tensor states; masks are RLE tuples and stay."""
        if _Base is object:
            return self
        return super()._apply(fn, *args, exclude_state=("detection_mask", "groundtruth_mask"))

    def _sync_dist(self, dist_sync_fn: Any = None, process_group: Any = None) -> None:
        """The tensor states as torchmetrics gathers them; the RLE masks (tuples, which its tensor
        gathering passes over) with ``all_gather_object``, in the same rank-interleaved order."""
        kw = {} if dist_sync_fn is None else {"dist_sync_fn": dist_sync_fn}
        super()._sync_dist(process_group=process_group, **kw)
        if "segm" in self.iou_type:
            import torch.distributed as dist

            for name in ("detection_mask", "groundtruth_mask"):
                local = list(getattr(self, name))
                parts: list = [None] * dist.get_world_size(group=process_group)
                dist.barrier(group=process_group)
                dist.all_gather_object(parts, local, group=process_group)
                setattr(self, name, [p[i] for i in range(len(parts[0])) for p in parts])

    # ------------------------------------------------------------------------------ update
    def update(self, preds: Sequence[dict], target: Sequence[dict]) -> None:
        import torch

        check_inputs(preds, target, self.iou_type)
        limit = self.max_detection_thresholds[-1]
        many = False
        for side, items in (("detection", preds), ("groundtruth", target)):
            for pos, item in enumerate(items):
                if "bbox" in self.iou_type:
                    b = _np(item["boxes"]).reshape(-1, 4)
                    xywh = _to_xywh(b, self.box_format)
                    if len(xywh) and np.any((xywh[:, 2] < 0) | (xywh[:, 3] < 0)):
                        k = int(np.flatnonzero((xywh[:, 2] < 0) | (xywh[:, 3] < 0))[0])
                        raise InputError(f"{'preds' if side == 'detection' else 'target'}[{pos}].boxes: "
                                         f"box {k} {b[k].tolist()} has a negative width or height in box_format "
                                         f"{self.box_format!r}")
                    getattr(self, f"{side}_box").append(torch.as_tensor(xywh))
                    many |= side == "detection" and len(b) > limit
                if "segm" in self.iou_type:
                    import pycocotools.mask as mask_utils

                    rles = []
                    for m in _np(item["masks"]):
                        r = mask_utils.encode(np.asfortranarray(m.astype(np.uint8)))
                        rles.append((tuple(int(v) for v in r["size"]), r["counts"]))
                    getattr(self, f"{side}_mask").append(tuple(rles))
                    many |= side == "detection" and len(rles) > limit
                lab = torch.as_tensor(_np(item["labels"]).reshape(-1))
                getattr(self, f"{side}_labels").append(lab)
                if side == "detection":
                    self.detection_scores.append(torch.as_tensor(_np(item["scores"]).reshape(-1)))
                else:
                    self.groundtruth_crowds.append(torch.as_tensor(_np(item.get("iscrowd", torch.zeros_like(lab)))))
                    self.groundtruth_area.append(torch.as_tensor(_np(item.get("area", torch.zeros_like(lab)))))
        if many and self.warn_on_many_detections:
            warnings.warn(_MANY_DETECTIONS.format(limit), UserWarning, stacklevel=2)

    # ------------------------------------------------------------------------------ COCO files
    def tm_to_coco(self, name: str = "tm_map_input") -> None:
        """As torchmetrics: write the updated inputs as ``{name}_preds.json`` (a results list) and
        ``{name}_target.json`` (a COCO ground truth)."""
        from .torchmetrics_coco import write_coco

        gt = self._dataset(list(self.groundtruth_labels), self.groundtruth_box or None, self.groundtruth_mask or None,
                           crowds=self.groundtruth_crowds, area=self.groundtruth_area, all_labels=self._classes())
        dt = self._dataset(list(self.detection_labels), self.detection_box or None, self.detection_mask or None,
                           scores=self.detection_scores, all_labels=self._classes())
        write_coco(name, dt["annotations"], gt)

    @staticmethod
    def coco_to_tm(coco_preds: str, coco_target: str, iou_type: str | tuple = ("bbox",),
                   backend: str = "pycocotools") -> tuple[list, list]:
        """As torchmetrics: COCO result and ground-truth files as lists of per-image input dicts."""
        from .torchmetrics_coco import read_coco

        return read_coco(coco_preds, coco_target, iou_type, backend)

    def _classes(self) -> list:
        import torch

        labels = list(self.detection_labels) + list(self.groundtruth_labels)
        return torch.cat(labels).unique().tolist() if labels else []

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
                    stats = list(e.stats) if self.backend == "pycocotools" else _faster_coco_eval_stats(e)
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
                        st = e.stats if self.backend == "pycocotools" else _faster_coco_eval_stats(e)
                        aps.append(st[0])
                        ars.append(st[8])
                    mpc, mrc = torch.tensor(aps, dtype=torch.float32), torch.tensor(ars, dtype=torch.float32)
                out[f"{prefix}map_per_class"] = mpc
                out[f"{prefix}mar_{mdt[-1]}_per_class"] = mrc
        out["classes"] = torch.tensor(classes, dtype=torch.int32)
        return out


def _faster_coco_eval_stats(e: Any) -> list:
    """The first 12 of faster-coco-eval's ``stats`` (torchmetrics' ``backend="faster_coco_eval"``):
    every AP and the area ARs at the last detection limit, where pycocotools reads 100 — so
    ``max_detection_thresholds=[1, 10, 1000]`` gives an AP there and -1 with pycocotools."""
    m = e.params.maxDets
    s = e._summarize
    return [s(1, maxDets=m[-1]), s(1, iouThr=.5, maxDets=m[-1]), s(1, iouThr=.75, maxDets=m[-1]),
            s(1, areaRng="small", maxDets=m[-1]), s(1, areaRng="medium", maxDets=m[-1]),
            s(1, areaRng="large", maxDets=m[-1]), s(0, maxDets=m[0]), s(0, maxDets=m[1]), s(0, maxDets=m[2]),
            s(0, areaRng="small", maxDets=m[-1]), s(0, areaRng="medium", maxDets=m[-1]),
            s(0, areaRng="large", maxDets=m[-1])]


def mean_average_precision(preds: Sequence[dict], target: Sequence[dict], box_format: str = "xyxy",
                           iou_type: str | tuple = "bbox", iou_thresholds: list | None = None,
                           rec_thresholds: list | None = None, max_detection_thresholds: list | None = None,
                           class_metrics: bool = False, extended_summary: bool = False, average: str = "macro",
                           backend: str = "pycocotools", warn_on_many_detections: bool = True) -> dict:
    """As ``torchmetrics.functional.detection.map.mean_average_precision``: one-shot, one-element
    results squeezed to scalars."""
    import torch

    metric = MeanAveragePrecision(box_format=box_format, iou_type=iou_type, iou_thresholds=iou_thresholds,
                                  rec_thresholds=rec_thresholds, max_detection_thresholds=max_detection_thresholds,
                                  class_metrics=class_metrics, extended_summary=extended_summary, average=average,
                                  backend=backend)
    metric.warn_on_many_detections = warn_on_many_detections
    metric.update(preds, target)
    out = metric.compute()
    return {k: (v.squeeze() if isinstance(v, torch.Tensor) and v.numel() == 1 else v) for k, v in out.items()}
