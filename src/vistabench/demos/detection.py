"""Demo of the detection protocol: a synthetic LVIS-like set scored with the three APs, the gaming
policy (re-ranking), per-class calibration (ours and the authors' recipe) and masks; records to the store."""

from __future__ import annotations

import json
import time
from pathlib import Path

from ..atomic import write_text
from ..data.coco import read_ground_truth, read_results
from ..data.predictions import file_sha256
from ..data.detection_synth import SynthSet, synth_detection_set
from ..metrics.detection import Detections, GroundTruth, decompose_errors, evaluate_detections, per_class_results
from ..protocols.detection.provenance import made_by
from ..protocols.detection.runner import apply_to, calibrate_detections, record_evaluation
from ..protocols.detection.tools import rerank_results_file
from ..protocols.detection.calibration import calibrators
from ..report.detection import detection_table
from ..protocols.detection.config import CalibrationSettings
from ..store import ResultsStore


def _load(s: SynthSet) -> tuple[GroundTruth, Detections]:
    gt = read_ground_truth(s.ground_truth)
    return gt, read_results(s.results, gt)


def demo(store: ResultsStore, out_dir: Path, *, quick: bool = False) -> str:
    """Synthetic LVIS-like set: the three APs, the gaming policy, calibration; records to ``store``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    size = dict(num_images=40, num_categories=40, dets_per_image=150) if quick else \
        dict(num_images=300, num_categories=200, dets_per_image=200)
    limit = 100  # scaled down with the set: 200 detections per image, 100 kept (LVIS: 300)
    t0 = time.perf_counter()
    test = synth_detection_set(**size, seed=1, detector_seed=0)
    # calibration is fitted on a larger held-out split of the same detector (as a train/val split)
    held = synth_detection_set(**{**size, "num_images": 2 * size["num_images"]}, seed=2, detector_seed=0)
    gt, dets = _load(test)
    hgt, hdets = _load(held)
    dataset = f"synth-lvis-{size['num_images']}x{size['num_categories']}"
    base = evaluate_detections(gt, dets, max_dets_per_image=limit)
    # why AP is low: TIDE's error decomposition (TIDE's AP, AP^Fixed, AP^Pool) and the per-class results
    errors = decompose_errors(gt, dets, variants=("tide", "fixed", "pool"), max_dets_per_image=limit).to_dict()
    per_class = {"variant": "old", "rows": per_class_results(gt, dets, max_dets_per_image=limit).rows()}
    # the detector's results file, as a user has it: its hash names these detections in the record,
    # and the re-ranked file's provenance (below) points back to it
    results_file = out_dir / "results.json"
    write_text(results_file, json.dumps(test.results), what="results file")
    record_evaluation(store, dataset, "baseline", 1, base,
                      {"policy": f"top-{limit}/image", "predictions_sha256": file_sha256(results_file)},
                      extra={"errors": errors, "per_class": per_class})
    # gaming: the per-class budget that keeps the evaluated set's size (k * K = limit * images)
    k = max(1, (limit * gt.num_images) // gt.num_categories)
    # on files, as a user games it (`detection rerank`): the gamed file's provenance, written beside
    # it, is what marks the row as re-ranked (the table's Scores column)
    gamed_file = out_dir / "gamed.json"
    rerank_results_file(results_file, gamed_file, per_class_topk=k)
    gamed = evaluate_detections(gt, read_results(gamed_file, gt), max_dets_per_image=limit, dets_per_class=k)
    base_k = evaluate_detections(gt, dets, variants=("fixed",), dets_per_class=k)
    made = made_by(gamed_file, file_sha256(gamed_file))
    record_evaluation(store, dataset, f"rerank-top{k}/class", 1, gamed,
                      {**made, "fixed_AP_without_rerank": base_k.results["fixed"]["AP"]})
    methods = ["platt"] if quick else list(calibrators)
    for m in methods:
        cal = calibrate_detections(hgt, hdets, CalibrationSettings.from_dict({"method": m}))
        ev = evaluate_detections(gt, apply_to(cal, gt, dets), max_dets_per_image=limit)
        fit_on = f"held-out seed 2, {2 * size['num_images']} images"
        record_evaluation(store, dataset, f"calibrated-{m}", 1, ev,
                          {"calibration": m, "fit_on": fit_on, "fitted_categories": cal.settings["num_categories_fitted"]})
    # the authors' calibration recipe (large-vocab-devil): their labels, Platt on logit(score), ties
    # broken as their MAINTAIN_RANK (box IoU here: the synthetic set has no masks)
    cal = calibrate_detections(hgt, hdets, CalibrationSettings.from_dict({"method": "platt", "recipe": "devil"}))
    ev = evaluate_detections(gt, apply_to(cal, gt, dets), max_dets_per_image=limit)
    record_evaluation(store, dataset, "calibrated-platt-devil", 1, ev,
                      {"calibration": "platt", "recipe": "devil", "calibration_iou_type": cal.settings["iou_type"]})
    # masks: the same three APs with mask IoU (segm); small and medium decided by the mask's area
    msize = dict(num_images=20, num_categories=20, dets_per_image=30) if quick else \
        dict(num_images=60, num_categories=40, dets_per_image=60)
    ms = synth_detection_set(**msize, seed=3, detector_seed=0, masks=True)
    mgt = read_ground_truth(ms.ground_truth, with_segmentation=True)
    mev = evaluate_detections(mgt, read_results(ms.results, mgt, iou_type="segm"), iou_type="segm",
                              max_dets_per_image=limit)
    mask_dataset = f"synth-lvis-masks-{msize['num_images']}x{msize['num_categories']}"
    record_evaluation(store, mask_dataset, "baseline (segm)", 1, mev, {"policy": f"top-{limit}/image"})
    dt = time.perf_counter() - t0
    # the protocol's own table, as `vistabench table --protocol detection` prints it (a row per data set and method)
    lines = [detection_table(store).render("markdown")]
    e = errors["tide"]
    lines.append("")
    lines.append(f"Why AP is low (baseline, TIDE, AP50 {e['AP']:.1f}): fixing " +
                 ", ".join(f"{k} +{e[k]:.1f}" for k in ("Cls", "Loc", "Both", "Dupe", "Bkg", "Miss")) +
                 f" AP points; perfect precision +{e['FalsePos']:.1f}, perfect recall +{e['FalseNeg']:.1f}.")
    return "\n".join(lines) + (f"\n\nAP^Old keeps {limit} detections per image (scaled down from LVIS's 300 with "
                              f"the set); the gaming row keeps the top {k} per class first ({gamed_file.name}, made by "
                              f"`detection rerank`, with its provenance file). AP^Fixed at k={k} "
                              f"without re-ranking: {100 * base_k.results['fixed']['AP']:.2f}. "
                              f"{len(dets)} detections, {dt:.1f} s.")
