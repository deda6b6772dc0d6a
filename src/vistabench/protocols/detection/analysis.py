"""Why AP is low: a results file's TIDE error decomposition, per-category results, operating points
and confusion matrix, as JSON-serialisable dicts (the files read once; the numbers from
:mod:`vistabench.metrics.detection`)."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from ...errors import InputError
from ...metrics.detection import (
    ERROR_VARIANTS,
    Detections,
    GroundTruth,
    confusion_matrix,
    decompose_errors,
    operating_points,
    ranked_outcomes,
)
from .runner import read_detection_set

Source = str | os.PathLike[str]
GtFormat = Literal["auto", "lvis", "coco"]


def _read(results: Source | list | Detections, gt: Source | dict | GroundTruth, gt_format: GtFormat,
          masks: bool = False) -> tuple[GroundTruth, Detections]:
    if isinstance(results, Detections):
        if not isinstance(gt, GroundTruth):
            raise InputError("gt: read Detections need the GroundTruth they were read against")
        return gt, results
    return read_detection_set(gt, results, gt_format=gt_format, masks=masks)


def parse_error_variants(variants: str | Sequence[str]) -> tuple[str, ...]:
    """``"tide,fixed"`` or a sequence -> the error-decomposition variants (validated)."""
    items = [x.strip() for x in variants.split(",")] if isinstance(variants, str) else [str(x) for x in variants]
    items = [x for x in items if x]
    bad = [x for x in items if x not in ERROR_VARIANTS]
    if bad or not items:
        raise InputError(f"variants: expected a non-empty subset of {', '.join(ERROR_VARIANTS)}, got {variants!r}")
    return tuple(dict.fromkeys(items))


def error_decomposition(results: Source | list | Detections, gt: Source | dict | GroundTruth, *,
                        variants: str | Sequence[str] = "tide", pos_iou: float = 0.5, bg_iou: float = 0.1,
                        max_dets_per_image: int | None = None, dets_per_class: int = 10_000,
                        gt_format: GtFormat = "auto", iou_type: str = "bbox") -> dict[str, Any]:
    """TIDE's ΔAP per error type (AP points, 0–100) for each variant; see
    :func:`~vistabench.metrics.detection.decompose_errors`."""
    names = parse_error_variants(variants)
    if iou_type not in ("bbox", "segm"):
        raise InputError(f"iou_type: expected bbox or segm, got {iou_type!r}")
    g, d = _read(results, gt, gt_format, masks=iou_type == "segm")
    return decompose_errors(g, d, variants=names, pos_iou=pos_iou, bg_iou=bg_iou, iou_type=iou_type,
                            max_dets_per_image=max_dets_per_image, dets_per_class=dets_per_class).to_dict()


def _names(gt: GroundTruth) -> list[str]:
    return list(gt.category_names or [str(int(c)) for c in gt.category_ids])


def operating_table(results: Source | list | Detections, gt: Source | dict | GroundTruth, *, iou: float = 0.5,
                    score_threshold: float | None = None, variant: str = "old", max_dets_per_image: int | None = None,
                    dets_per_class: int = 10_000, gt_format: GtFormat = "auto") -> dict[str, Any]:
    """Operating points per category (worst best-F1 first) and overall; see
    :func:`~vistabench.metrics.detection.operating_points`."""
    g, d = _read(results, gt, gt_format)
    out = operating_points(ranked_outcomes(g, d, iou=iou, variant=variant, max_dets_per_image=max_dets_per_image,
                                           dets_per_class=dets_per_class), score_threshold=score_threshold)
    names = _names(g)
    rows = [{"category_id": int(g.category_ids[k]), "name": names[k], **r} for k, r in enumerate(out["per_category"])]
    rows.sort(key=lambda r: (math.inf if r["best_f1"] != r["best_f1"] else r["best_f1"], r["category_id"]))
    return {"rows": rows, "overall": out["overall"],
            "settings": {"iou": iou, "score_threshold": score_threshold, "variant": variant}}


def confusion_table(results: Source | list | Detections, gt: Source | dict | GroundTruth, *, iou: float = 0.5,
                    score_threshold: float = 0.5, gt_format: GtFormat = "auto") -> dict[str, Any]:
    """The class confusion matrix with its labels: ``rows`` (ground-truth classes, then
    "background"), ``columns`` (detected classes, then "missed"), ``matrix`` (lists of counts)."""
    g, d = _read(results, gt, gt_format)
    M = confusion_matrix(g, d, iou=iou, score_threshold=score_threshold)
    names = _names(g)
    return {"rows": names + ["background"], "columns": names + ["missed"], "matrix": M.tolist(),
            "settings": {"iou": iou, "score_threshold": score_threshold,
                         "matched": int(M[:-1, :-1].sum()), "correct": int(np.trace(M[:-1, :-1]))}}
