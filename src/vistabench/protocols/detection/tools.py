"""File-level detection tools behind ``vistabench detection rerank | calibrate fit | calibrate apply |
synth | split``: each reads its inputs once (the readers validate them), calls the library and writes
one output file. Messages name the parameters (``per_class_topk``, ``calibration``, ...)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from ...atomic import write_text
from ...errors import InputError
from ...metrics.detection import rank_within
from .runner import build_image_split, calibrate_detections, read_detection_set
from .calibration import Calibration, apply_calibration
from .config import CalibrationSettings
from .provenance import origin_of, write_provenance

__all__ = [
    "apply_calibration_file",
    "fit_calibration_file",
    "rerank_results_file",
    "write_image_split",
    "write_synth_set",
]


def write_image_split(ground_truth: str | os.PathLike[str], out: str | os.PathLike[str], *,
                      calibration_fraction: float = 0.5, seed: int = 0) -> dict[str, Any]:
    """Write :func:`~.detection.build_image_split`'s split file; returns a summary."""
    from ...data.splits import write_split

    split = build_image_split(ground_truth, calibration_fraction=calibration_fraction, seed=seed)
    write_split(out, split)
    return {"out": str(out), "calibration": len(split["calibration"]), "test": len(split["test"]),
            "sha256": split["sha256"]}


def rerank_results_file(results: str | os.PathLike[str], out: str | os.PathLike[str], *,
                        per_class_topk: int) -> dict[str, Any]:
    """The paper's §3 gaming policy on a results file: keep each category's top ``per_class_topk``
    detections over the whole file (stable: ties keep file order), as
    :func:`~.detection.rerank_top_per_class` does on read detections; the provenance beside ``out``
    (:mod:`.provenance`) lets a later ``eval`` record its scores as re-ranked."""
    from ..._validation import check_value
    from ...data.coco import read_result_columns, write_result_columns

    k = check_value(per_class_topk, "per_class_topk", type=int, low=0, low_open=True)
    c = read_result_columns(results, keep_segmentation=True)
    keep = np.flatnonzero(rank_within(c["category_id"], c["score"]) < k)
    seg = None if c["segmentation"] is None else [c["segmentation"][i] for i in keep]
    origin = origin_of(results)  # before writing: `out` may be `results` itself
    write_result_columns(out, c["image_id"][keep], c["category_id"][keep], c["bbox"][keep], c["score"][keep], seg)
    prov = write_provenance(out, origin, {"op": "rerank", "per_class_topk": k})
    return {"results": str(results), "out": str(out), "per_class_topk": k, "kept": len(keep),
            "dropped": int(len(c["score"]) - len(keep)), "provenance": str(prov)}


def fit_calibration_file(ground_truth: str | os.PathLike[str], results: str | os.PathLike[str],
                         out: str | os.PathLike[str],
                         settings: CalibrationSettings | dict[str, Any] | None = None) -> dict[str, Any]:
    """Fit per-category calibrators on a held-out detection set and write them as JSON.

    ``settings``: a :class:`CalibrationSettings` or a mapping of its fields (checked by it; missing
    fields take their defaults)."""
    if not isinstance(settings, CalibrationSettings):
        settings = CalibrationSettings.from_dict(dict(settings or {}))
    iou_type = settings.iou_type
    masks = "auto" if iou_type == "auto" else iou_type == "segm"
    gt, dets = read_detection_set(ground_truth, results, masks=masks)
    cal = calibrate_detections(gt, dets, settings)
    cal.save(out)
    return {"out": str(out), "method": cal.method, **cal.settings}


def apply_calibration_file(calibration: str | os.PathLike[str] | dict, results: str | os.PathLike[str],
                           out: str | os.PathLike[str]) -> dict[str, Any]:
    """Rewrite a results file with calibrated scores (ties broken as the calibration's recipe), with
    its provenance beside it (:mod:`.provenance`: a later ``eval`` records the scores as calibrated)."""
    from ...data.coco import read_result_columns, write_result_columns
    from ...jsonutil import read_json

    obj = calibration if isinstance(calibration, dict) else read_json(calibration, what="calibration")
    cal = Calibration.from_json(obj, "calibration")
    c = read_result_columns(results, keep_segmentation=True)
    score = apply_calibration(cal, c["score"], c["category_id"])
    origin = origin_of(results)  # before writing: `out` may be `results` itself
    write_result_columns(out, c["image_id"], c["category_id"], c["bbox"], score, c["segmentation"])
    prov = write_provenance(out, origin, {"op": "calibrate", "method": cal.method, "recipe": cal.settings.get("recipe"),
                                           "calibration": None if isinstance(calibration, dict) else str(calibration)})
    return {"out": str(out), "method": cal.method, "detections": len(score), "provenance": str(prov)}


def write_synth_set(out: str | os.PathLike[str], **options: Any) -> dict[str, Any]:
    """Write :func:`~vistabench.data.detection_synth.synth_detection_set` as ``OUT/gt.json`` and
    ``OUT/results.json``; ``options`` are that function's."""
    from ...data.detection_synth import synth_detection_set

    s = synth_detection_set(**options)
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise InputError(f"out {str(out)!r}: exists and is not a folder")
    folder.mkdir(parents=True, exist_ok=True)
    write_text(folder / "gt.json", json.dumps(s.ground_truth), what="ground truth")
    write_text(folder / "results.json", json.dumps(s.results), what="results file")
    return {"gt": str(folder / "gt.json"), "results": str(folder / "results.json"),
            "annotations": len(s.ground_truth["annotations"]), "detections": len(s.results), **s.settings}
