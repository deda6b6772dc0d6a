"""Large-vocabulary detection protocol's pipeline: image split -> (calibration) -> score -> record;
plus the gaming demonstration and the paper's toy.

The pure evaluation lives in :mod:`vistabench.metrics.detection`; the synthetic generator in
:mod:`vistabench.data.detection_synth`; calibration in :mod:`.detection_calibration`.
"""

from __future__ import annotations

import os
from typing import Any, Literal, NamedTuple, Sequence

import numpy as np

from ..metrics.detection import (DetectionEvaluation, Detections, GroundTruth, detection_labels,
                                 evaluate_detections, top_per_class)
from ..store import Record, ResultsStore
from .._validation import check_choice
from ..errors import InputError
from ..jsonutil import read_json
from .detection_calibration import (Calibration, apply_calibration, calibrators, fit_calibration,
                                    fit_calibration_devil)

PROTOCOL = "detection"


def rerank_top_per_class(dets: Detections, *, k: int) -> Detections:
    """The paper's §3 gaming policy: keep only each category's top ``k`` detections over the set.

    Combined with the per-image limit of AP^Old this raises AP^Old without a better detector;
    AP^Fixed does not move (for ``k`` >= its own per-class budget).
    """
    return dets.subset(top_per_class(dets, k=k))


class ToyExample(NamedTuple):
    """The toy's ground truth and detections (named; unpacks as ``gt, dets``)."""

    gt: GroundTruth
    dets: Detections


def toy_example(*, b1_correct: bool, ranking: int) -> ToyExample:
    """Figure 2 of the paper: one image, class A with two objects, class B with one.

    The detector is perfectly calibrated: A1 and A2 (score 1.0) are correct, B1 (score 0.8) is
    correct 80% of the time (``b1_correct``). ``ranking=1`` keeps the model's order; ``ranking=2``
    is the top-1-per-class re-ranking, which drops A2. Evaluated with a limit of 2 detections per
    image: Ranking 1 scores 0.5, Ranking 2 scores (51/101 + 0.8)/2 ≈ 0.65 in expectation
    (the paper's 0.5 for class A is 51/101 with 101-point interpolation).
    """
    gt = GroundTruth.from_arrays(
        format="lvis", image_ids=[1], category_ids=[1, 2], image_id=[1, 1, 1], category_id=[1, 1, 2],
        bbox=[[0, 0, 10, 10], [20, 0, 10, 10], [40, 0, 10, 10]], frequency=["f", "r"],
        negative={1: []}, not_exhaustive={1: []})
    b1 = [40, 0, 10, 10] if b1_correct else [40, 30, 10, 10]
    dets = Detections.from_ids(gt, image_id=[1, 1, 1], category_id=[1, 1, 2],
                               bbox=[[0, 0, 10, 10], [20, 0, 10, 10], b1], score=[1.0, 1.0, 0.8])
    if ranking == 2:
        dets = rerank_top_per_class(dets, k=1)
    return ToyExample(gt, dets)


def toy_expected_ap(ranking: int, *, p_correct: float = 0.8) -> float:
    """Expected AP^Old (limit 2 per image) of the toy over B1's correctness, by evaluation."""
    out = 0.0
    for correct, w in ((True, p_correct), (False, 1 - p_correct)):
        gt, dets = toy_example(b1_correct=correct, ranking=ranking)
        ev = evaluate_detections(gt, dets, variants=("old",), max_dets_per_image=2)
        out += w * ev.results["old"]["AP"]
    return out


def evaluation_result(ev: DetectionEvaluation) -> dict[str, Any]:
    """The named, JSON-serialisable result of an evaluation: ``old``/``fixed``/``pool`` (each the
    lvis-api keys AP, AP50, ..., APr/APc/APf), ``pr50`` (101-point PR curves at IoU 0.5: AP^Pool's
    pooled curve; AP^Old's and AP^Fixed's mean over categories with ground truth) and ``settings``."""
    out = ev.to_dict()
    pr50: dict[str, Any] = {}
    if "pool" in ev.precision:
        pr50["pool"] = np.round(ev.precision["pool"][0, :, 0], 6).tolist()
    for v in ("old", "fixed"):
        if v in ev.precision:
            p = ev.precision[v][0, :, :, 0]
            valid = ~np.isnan(p[0])
            pr50[v] = np.round(p[:, valid].mean(axis=1), 6).tolist() if valid.any() else None
    out["pr50"] = pr50
    return out


def to_record(result: dict[str, Any], *, dataset: str, method: str, seed: int | None = None,
              tag: str | None = None, settings: dict[str, Any] | None = None,
              split_hash: str | None = None) -> Record:
    """The results-store record of a scored results file (the same shape from ``score`` and ``run``):
    metrics ``<variant>_<key>`` plus ``<variant>_pr50``."""
    metrics: dict[str, Any] = {}
    for v in ("old", "fixed", "pool"):
        if v in result:
            for k, x in result[v].items():
                metrics[f"{v}_{k}"] = x
    for v in ("pool", "old", "fixed"):
        if v in result.get("pr50", {}):
            metrics[f"{v}_pr50"] = result["pr50"][v]
    return Record(protocol=PROTOCOL, dataset=dataset, method=method, seed=seed, split_hash=split_hash,
                  settings={**result.get("settings", {}), **(settings or {})}, metrics=metrics, tag=tag)


def record_evaluation(store: ResultsStore, dataset: str, method: str, seed: int, ev: DetectionEvaluation,
                      settings: dict, tag: str | None = None) -> None:
    store.add(to_record(evaluation_result(ev), dataset=dataset, method=method, seed=seed, tag=tag, settings=settings))


def calibrate_detections(fit_gt: GroundTruth, fit_dets: Detections, *, method: str = "platt",
                         iou_threshold: float = 0.75, min_samples: int = 20,
                         dets_per_class: int | None = 10_000, recipe: str = "vistabench",
                         iou_type: str = "bbox") -> Calibration:
    """Fit per-category calibration on a held-out detection set (labels at IoU ``iou_threshold``).

    ``recipe="vistabench"``: labels as AP counts them, a pooled fallback for categories with fewer
    than ``min_samples`` labels. ``recipe="devil"``: the authors' construction (every evaluated
    detection labelled, positive on any match; categories without a positive score 0; Platt on
    logit(score) or 20-bin histogram binning); ``min_samples`` is not used.
    """
    check_choice(recipe, "recipe", ("vistabench", "devil"))
    lab = detection_labels(fit_gt, fit_dets, iou_threshold=iou_threshold, dets_per_class=dets_per_class,
                           recipe=recipe, iou_type=iou_type)
    idx = lab.index
    cats = fit_gt.category_ids[fit_dets.category[idx]]
    if recipe == "devil":
        cal = fit_calibration_devil(fit_dets.score[idx], lab.label, cats, method=method)
    else:
        cal = fit_calibration(fit_dets.score[idx], lab.label, cats, method=method, min_samples=min_samples)
    cal.settings.update({"iou_threshold": iou_threshold, "dets_per_class": dets_per_class, "recipe": recipe})
    return cal


def apply_to(cal: Calibration, gt: GroundTruth, dets: Detections) -> Detections:
    """``dets`` with calibrated scores."""
    return dets.with_scores(apply_calibration(cal, dets.score, gt.category_ids[dets.category]))


# ----------------------------------------------------------------------------- split / score / run
SPLIT_KIND = "detection-split"


def build_image_split(ground_truth: str | os.PathLike[str] | dict, *, calibration_fraction: float = 0.5,
                      seed: int = 0) -> dict[str, Any]:
    """Split a ground truth's images into a held-out ``calibration`` part and a ``test`` part.

    Calibration (paper §6.3) is fitted on detections of images the evaluation never sees; the split
    file fixes which (seeded; same seed, same file). Returns sealed split content with the image ids
    of both parts, sorted.
    """
    from .._validation import check_fraction
    from ..data.splits import seal

    gt = _gt_json(ground_truth)
    frac = check_fraction(calibration_fraction, "calibration_fraction")
    ids = np.array(sorted(int(im["id"]) for im in gt.get("images", [])), dtype=np.int64)
    if len(ids) < 2:
        raise InputError(f"ground truth: needs at least 2 images to split, found {len(ids)}")
    perm = np.random.default_rng(seed).permutation(len(ids))
    n_cal = min(max(1, int(round(frac * len(ids)))), len(ids) - 1)
    return seal({"kind": SPLIT_KIND, "version": 1, "seed": int(seed), "calibration_fraction": frac,
                 "calibration": np.sort(ids[perm[:n_cal]]).tolist(), "test": np.sort(ids[perm[n_cal:]]).tolist()})


def _gt_json(source: str | os.PathLike[str] | dict) -> dict:
    if isinstance(source, dict):
        return source
    gt = read_json(source, what="--gt")
    if not isinstance(gt, dict) or not isinstance(gt.get("images"), list):
        raise InputError(f"--gt {str(source)!r}: expected a COCO/LVIS ground-truth object with an 'images' list, "
                         f"got {type(gt).__name__} (a results file?)")
    return gt


def _restrict(gt: dict, results: Any, image_ids: Sequence[int]) -> tuple[dict, list]:
    keep = set(int(i) for i in image_ids)
    sub = dict(gt)
    sub["images"] = [im for im in gt["images"] if int(im["id"]) in keep]
    sub["annotations"] = [a for a in gt.get("annotations", []) if int(a["image_id"]) in keep]
    if not isinstance(results, list):
        results = read_json(results, what="results")
    return sub, [d for d in results if int(d["image_id"]) in keep]


def score(
    results: str | os.PathLike[str] | list,
    ground_truth: str | os.PathLike[str] | dict,
    *,
    iou_type: Literal["bbox", "segm"] = "bbox",
    variants: Sequence[str] = ("old", "fixed", "pool"),
    max_dets_per_image: int | None = None,
    dets_per_class: int | None = 10_000,
    gt_format: Literal["auto", "lvis", "coco"] = "auto",
    split: dict[str, Any] | None = None,
    part: Literal["test", "calibration"] = "test",
    allow_empty: bool = False,
) -> dict[str, Any]:
    """Score a results file (or list) against ground truth: AP^Old, AP^Fixed, AP^Pool.

    With ``split`` (from :func:`build_image_split`) only the images of ``part`` are evaluated. An
    empty results list is refused unless ``allow_empty``.
    Returns :func:`evaluation_result`'s dict.
    """
    from ..data.coco import read_ground_truth, read_results

    if split is not None:
        ground_truth, results = _restrict(_gt_json(ground_truth), results, split[part])
    gt = read_ground_truth(ground_truth, format=gt_format, with_segmentation=iou_type == "segm")
    dets = read_results(results, gt, iou_type=iou_type, allow_empty=allow_empty)
    ev = evaluate_detections(gt, dets, iou_type=iou_type, variants=tuple(variants),
                             max_dets_per_image=max_dets_per_image, dets_per_class=dets_per_class)
    out = evaluation_result(ev)
    if split is not None:
        out["settings"].update(split_sha256=split["sha256"], split_part=part)
    return out


def run(
    *,
    ground_truth: str | os.PathLike[str] | dict,
    results: str | os.PathLike[str] | list,
    method: str,
    dataset: str,
    split: dict[str, Any] | None = None,
    calibration: str | None = None,
    iou_type: Literal["bbox", "segm"] = "bbox",
    max_dets_per_image: int | None = None,
    dets_per_class: int | None = 10_000,
    store: ResultsStore | None = None,
    tag: str | None = None,
) -> dict[str, Any]:
    """The detection pipeline for a detector's results: split -> (fit ``calibration`` on the
    split's held-out images, apply it to the test images) -> score the test images -> record.

    Without ``split`` every image is scored (and ``calibration`` is refused: fitting on the
    evaluated images would leak). Returns the stored record as a dict.
    """
    from ..data.coco import read_ground_truth, read_results

    gt_json = _gt_json(ground_truth)
    res = results
    settings: dict[str, Any] = {}
    if calibration is not None:
        if split is None:
            raise InputError("calibration needs a split: the calibrator is fitted on the split's held-out images")
        calibrators.get(calibration)
        cal_gt_json, cal_res = _restrict(gt_json, res, split["calibration"])
        test_gt_json, test_res = _restrict(gt_json, res, split["test"])
        cgt = read_ground_truth(cal_gt_json, with_segmentation=iou_type == "segm")
        cal = calibrate_detections(cgt, read_results(cal_res, cgt, iou_type=iou_type), method=calibration)
        tgt = read_ground_truth(test_gt_json, with_segmentation=iou_type == "segm")
        tdets = apply_to(cal, tgt, read_results(test_res, tgt, iou_type=iou_type))
        ev = evaluate_detections(tgt, tdets, iou_type=iou_type, max_dets_per_image=max_dets_per_image,
                                 dets_per_class=dets_per_class)
        result = evaluation_result(ev)
        result["settings"].update(split_sha256=split["sha256"], split_part="test")
        settings = {"calibration": calibration, "fitted_categories": cal.settings["num_categories_fitted"]}
    else:
        result = score(res, gt_json, iou_type=iou_type, max_dets_per_image=max_dets_per_image,
                       dets_per_class=dets_per_class, split=split)
    rec = to_record(result, dataset=dataset, method=method, tag=tag, settings=settings,
                    split_hash=None if split is None else split["sha256"])
    if store is not None:
        store.add(rec)
    return rec.to_dict()
