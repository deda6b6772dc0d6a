"""COCO files to and from torchmetrics' per-image input dicts (``MeanAveragePrecision.tm_to_coco`` /
``coco_to_tm``), read and written as torchmetrics does (images in ground-truth order, every image of
the ground truth present in the predictions, boxes ``xywh``, masks decoded to ``uint8``)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError

__all__ = ["write_coco", "read_coco"]


def _plain(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, bytes):
        return x.decode("utf-8")
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    return x


def write_coco(name: str, pred_annotations: list, target: dict) -> None:
    """``{name}_preds.json`` (the results list) and ``{name}_target.json`` (the ground truth)."""
    for suffix, obj in (("_preds.json", pred_annotations), ("_target.json", target)):
        path = Path(f"{name}{suffix}")
        if not path.parent.is_dir():
            raise InputError(f"name: folder {str(path.parent)!r} does not exist")
        path.write_text(json.dumps(_plain(obj), indent=4))


def read_coco(coco_preds: str, coco_target: str, iou_type: Any, backend: str) -> tuple[list, list]:
    import torch

    from .coco import COCO

    types = (iou_type,) if isinstance(iou_type, str) else tuple(iou_type)
    if not types or any(t not in ("bbox", "segm") for t in types):
        raise InputError(f"Expected argument `iou_type` to be one of ('segm', 'bbox') or a tuple of, but got {iou_type!r}")
    if backend not in ("pycocotools", "faster_coco_eval"):
        raise InputError(f"Expected argument `backend` to be one of ('pycocotools', 'faster_coco_eval') but got {backend!r}")
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(coco_target)
        dt = gt.loadRes(coco_preds)
    box, segm = "bbox" in types, "segm" in types

    def empty(with_scores: bool) -> dict:
        d: dict = {"labels": []}
        d.update({"scores": []} if with_scores else {"iscrowd": [], "area": []})
        if box:
            d["boxes"] = []
        if segm:
            d["masks"] = []
        return d

    target: dict = {}
    for a in gt.dataset["annotations"]:
        t = target.setdefault(a["image_id"], empty(False))
        if box:
            t["boxes"].append(a["bbox"])
        if segm:
            t["masks"].append(gt.annToMask(a))
        t["labels"].append(a["category_id"])
        t["iscrowd"].append(a["iscrowd"])
        t["area"].append(a["area"])
    preds: dict = {}
    for a in dt.dataset["annotations"]:
        p = preds.setdefault(a["image_id"], empty(True))
        if box:
            p["boxes"].append(a["bbox"])
        if segm:
            p["masks"].append(gt.annToMask(a))
        p["scores"].append(a["score"])
        p["labels"].append(a["category_id"])
    out_p, out_t = [], []
    for key, t in target.items():
        p = preds.get(key, empty(True))
        bp = {"scores": torch.tensor(p["scores"], dtype=torch.float32), "labels": torch.tensor(p["labels"], dtype=torch.int32)}
        bt = {"labels": torch.tensor(t["labels"], dtype=torch.int32), "iscrowd": torch.tensor(t["iscrowd"], dtype=torch.int32),
              "area": torch.tensor(t["area"], dtype=torch.float32)}
        if box:
            bp["boxes"] = torch.tensor(np.array(p["boxes"]), dtype=torch.float32)
            bt["boxes"] = torch.tensor(t["boxes"], dtype=torch.float32)
        if segm:
            bp["masks"] = torch.tensor(np.array(p["masks"]), dtype=torch.uint8)
            bt["masks"] = torch.tensor(np.array(t["masks"]), dtype=torch.uint8)
        out_p.append(bp)
        out_t.append(bt)
    return out_p, out_t
