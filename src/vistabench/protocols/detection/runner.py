"""Large-vocabulary detection protocol's pipeline: image split -> (calibration) -> score -> record;
plus the gaming demonstration and the paper's toy.

``run(config, *, store=None, work_dir=None) -> list[Record]`` takes a :class:`DetectionConfig`
(:mod:`.config`); both files are read once (the boundary: the readers validate them) and
the split's parts are taken from the typed arrays. The pure evaluation lives in
:mod:`vistabench.metrics.detection`; the synthetic generator in :mod:`vistabench.data.detection_synth`;
calibration in :mod:`.calibration`; file-level tools (rerank, calibrate fit/apply) in
:mod:`.tools`.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Literal, NamedTuple, Sequence

import numpy as np

from ...data.predictions import file_sha256
from ...errors import InputError
from ...metrics.detection import (DetectionEvaluation, Detections, GroundTruth, detection_labels,
                                 decompose_errors, evaluate_detections, per_class_results,
                                 top_per_class)
from ...store import Record, ResultsStore
from .calibration import Calibration, apply_calibration, fit_calibration, fit_calibration_devil
from .config import CalibrationSettings, DetectionConfig, ScoreSettings
from .provenance import made_by

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
    metrics ``<variant>_<key>`` plus ``<variant>_pr50``, and ``per_class`` / ``errors`` (the per-category
    rows and the TIDE decomposition) when the result has them."""
    metrics: dict[str, Any] = {}
    for v in ("old", "fixed", "pool"):
        if v in result:
            for k, x in result[v].items():
                metrics[f"{v}_{k}"] = x
    for v in ("pool", "old", "fixed"):
        if v in result.get("pr50", {}):
            metrics[f"{v}_pr50"] = result["pr50"][v]
    for extra in ("per_class", "errors"):  # the diagnostics, when computed (the report's "why AP is low")
        if result.get(extra) is not None:
            metrics[extra] = result[extra]
    return Record(protocol=PROTOCOL, dataset=dataset, method=method, seed=seed, split_hash=split_hash,
                  settings={**result.get("settings", {}), **(settings or {})}, metrics=metrics, tag=tag)


def record_evaluation(store: ResultsStore, dataset: str, method: str, seed: int, ev: DetectionEvaluation,
                      settings: dict, tag: str | None = None, extra: dict[str, Any] | None = None) -> int:
    """Store the record of an evaluation; returns its id. ``extra``: diagnostics stored with it
    (``per_class``, ``errors``)."""
    return store.add(to_record({**evaluation_result(ev), **(extra or {})}, dataset=dataset, method=method, seed=seed,
                               tag=tag, settings=settings))


def masks_present(gt: GroundTruth, dets: Detections) -> bool:
    """Whether both sides carry a mask for every annotation and detection (segm IoU is possible)."""
    return (gt.segmentation is not None and dets.segmentation is not None
            and all(x is not None for x in dets.segmentation))


def calibrate_detections(fit_gt: GroundTruth, fit_dets: Detections, settings: CalibrationSettings | None = None,
                         **options: Any) -> Calibration:
    """Fit per-category calibration on a held-out detection set.

    ``settings`` (a :class:`CalibrationSettings`) or its fields as keywords (``method``, ``recipe``,
    ``iou_threshold``, ``iou_type``, ``dets_per_class``, ``min_samples``, ``bins``; validated there).
    ``recipe="vistabench"``: labels as AP counts them, a pooled fallback for categories with fewer
    than ``min_samples`` labels. ``recipe="devil"``: the authors' construction (every evaluated
    detection labelled, positive on any match, with mask IoU when masks are present; categories
    without a positive score 0; Platt on logit(score) or netcal's histogram binning; ties broken as
    their MAINTAIN_RANK when applied).
    """
    if settings is None:
        settings = CalibrationSettings.from_dict(options)
    elif options:
        raise InputError(f"{next(iter(options))}: give either settings or keyword options, not both")
    iou_type = settings.iou_type
    if iou_type == "auto":
        iou_type = "segm" if masks_present(fit_gt, fit_dets) else "bbox"
    lab = detection_labels(fit_gt, fit_dets, iou_threshold=settings.iou_threshold,
                           dets_per_class=settings.dets_per_class, recipe=settings.recipe, iou_type=iou_type)
    idx = lab.index
    cats = fit_gt.category_ids[fit_dets.category[idx]]
    if settings.recipe == "devil":
        cal = fit_calibration_devil(fit_dets.score[idx], lab.label, cats, method=settings.method, bins=settings.bins)
    elif settings.method == "histbin":
        cal = fit_calibration(fit_dets.score[idx], lab.label, cats, method="histbin",
                              min_samples=settings.min_samples, bins=settings.bins)
    else:
        cal = fit_calibration(fit_dets.score[idx], lab.label, cats, method=settings.method,
                              min_samples=settings.min_samples)
    cal.settings.update({"iou_threshold": settings.iou_threshold, "dets_per_class": settings.dets_per_class,
                         "recipe": settings.recipe, "iou_type": iou_type})
    if settings.method == "histbin":
        cal.settings["bins"] = settings.bins
    return cal


def apply_to(cal: Calibration, gt: GroundTruth, dets: Detections) -> Detections:
    """``dets`` with calibrated scores (ties broken as the calibration's recipe does)."""
    return dets.with_scores(apply_calibration(cal, dets.score, gt.category_ids[dets.category]))


# ----------------------------------------------------------------------------- split / score / run
SPLIT_KIND = "detection-split"


def build_image_split(ground_truth: str | os.PathLike[str] | dict | GroundTruth, *,
                      calibration_fraction: float = 0.5, seed: int = 0) -> dict[str, Any]:
    """Split a ground truth's images into a held-out ``calibration`` part and a ``test`` part.

    Calibration (paper §6.3) is fitted on detections of images the evaluation never sees; the split
    file fixes which (seeded; same seed, same file). Returns sealed split content with the image ids
    of both parts, sorted.
    """
    from ..._validation import check_value
    from ...data.splits import seal

    frac = check_value(calibration_fraction, "calibration_fraction", low=0, high=1)
    gt = read_gt(ground_truth)
    ids = np.sort(gt.image_ids.astype(np.int64))
    if len(ids) < 2:
        raise InputError(f"gt: needs at least 2 images to split, found {len(ids)}")
    perm = np.random.default_rng(seed).permutation(len(ids))
    n_cal = min(max(1, int(round(frac * len(ids)))), len(ids) - 1)
    return seal({"kind": SPLIT_KIND, "version": 1, "seed": int(seed), "calibration_fraction": frac,
                 "calibration": np.sort(ids[perm[:n_cal]]).tolist(), "test": np.sort(ids[perm[n_cal:]]).tolist()})


def read_image_split(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A split file written by ``detection split`` (hash and kind checked)."""
    from ...data.splits import read_split

    return read_split(path, kind=SPLIT_KIND, what="split")


def restrict_images(gt: GroundTruth, dets: Detections, image_ids: Sequence[int]) -> tuple[GroundTruth, Detections]:
    """The ground truth and detections of the images ``image_ids`` only (every category kept), as the
    same files with the other images removed would read."""
    keep = np.isin(gt.image_ids, np.asarray(list(image_ids), np.int64))
    new_index = np.cumsum(keep) - 1
    k = max(gt.num_categories, 1)

    def keys(key: np.ndarray) -> np.ndarray:
        img, cat = key // k, key % k
        m = keep[img]
        return (new_index[img[m]] * k + cat[m]).astype(np.int64)

    ann = np.flatnonzero(keep[gt.image])
    sub = gt.subset(keep[gt.image])
    sub = dataclasses.replace(sub, image_ids=gt.image_ids[keep], image=new_index[gt.image[ann]],
                              negative=keys(gt.negative), not_exhaustive=keys(gt.not_exhaustive),
                              image_size=None if gt.image_size is None else gt.image_size[keep])
    d = dets.subset(np.flatnonzero(keep[dets.image]))
    return sub, dataclasses.replace(d, image=new_index[d.image])


def read_gt(source: str | os.PathLike[str] | dict | GroundTruth, *, format: str = "auto",
            with_segmentation: bool = False, with_keypoints: bool = False) -> GroundTruth:
    """:func:`~vistabench.data.coco.read_ground_truth`, saying so when the file is a results list."""
    from ...data.coco import read_ground_truth

    if isinstance(source, GroundTruth):
        return source
    try:
        return read_ground_truth(source, format=format, with_segmentation=with_segmentation,
                                 with_keypoints=with_keypoints)
    except InputError:
        if isinstance(source, (str, os.PathLike)) and _starts_with_list(source):
            raise InputError(f"gt {str(source)!r}: expected a COCO/LVIS ground-truth object with an 'images' "
                             "list, got a JSON list (a results file?)") from None
        raise


def _starts_with_list(path: str | os.PathLike[str]) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    except OSError:
        return False
    return head.startswith(b"[")


def read_detection_set(ground_truth: str | os.PathLike[str] | dict, results: str | os.PathLike[str] | list, *,
                       masks: bool | Literal["auto"] = False, gt_format: Literal["auto", "lvis", "coco"] = "auto",
                       allow_empty: bool = False, keypoints: bool = False) -> tuple[GroundTruth, Detections]:
    """Read (and validate) a ground truth and a results file once.

    ``masks``: keep the masks of both (needed for segm IoU); ``"auto"``: keep them when every
    detection carries one (then the ground truth must too). ``keypoints``: read the keypoints of
    both (for OKS).
    """
    from ...data.coco import read_result_columns, read_results

    if keypoints:
        gt = read_gt(ground_truth, format=gt_format, with_keypoints=True)
        return gt, read_results(results, gt, iou_type="keypoints", allow_empty=allow_empty)
    if masks != "auto":
        gt = read_gt(ground_truth, format=gt_format, with_segmentation=bool(masks))
        return gt, read_results(results, gt, iou_type="segm" if masks else "bbox", allow_empty=allow_empty)
    cols = read_result_columns(results, keep_segmentation=True)
    seg = cols["segmentation"]
    has = bool(len(seg)) and all(x is not None for x in seg)
    gt = read_gt(ground_truth, format=gt_format, with_segmentation=has)
    name = "results" if isinstance(results, list) else f"results {str(results)!r}"
    if len(cols["score"]) == 0:
        if not allow_empty:
            raise InputError(f"{name}: the results list is empty (it would score AP 0); set `allow_empty` "
                             "if that is intended")
        return gt, Detections.empty()
    if not np.any(np.isin(cols["image_id"], gt.image_ids)):
        raise InputError(f"{name}: none of its image ids are in the ground truth (e.g. {int(cols['image_id'][0])}); "
                         "a results file for a different dataset?")
    try:
        dets = Detections.from_ids(gt, image_id=cols["image_id"], category_id=cols["category_id"], bbox=cols["bbox"],
                                   score=cols["score"], segmentation=seg if has else None, area=cols["area"])
    except InputError as exc:
        raise InputError(f"{name}: {exc}") from exc
    return gt, dets


def read_for_scoring(predictions: str | os.PathLike[str] | list, reference: str | os.PathLike[str] | dict,
                     settings: ScoreSettings) -> tuple[GroundTruth, Detections]:
    """The ground truth and detections :func:`score` reads with ``settings`` (what it needs of them:
    masks for segm, keypoints, the ground truth's format, ``allow_empty``), read once; ``score(dets,
    gt, settings=settings)`` then evaluates them."""
    iou_type = settings.iou_type
    return read_detection_set(reference, predictions, masks=iou_type == "segm", gt_format=settings.gt_format,
                              allow_empty=settings.allow_empty, keypoints=iou_type == "keypoints")


def score(
    predictions: str | os.PathLike[str] | list | Detections,
    reference: str | os.PathLike[str] | dict | GroundTruth,
    *,
    settings: ScoreSettings | None = None,
    split: dict[str, Any] | str | os.PathLike[str] | None = None,
    part: Literal["test", "calibration"] = "test",
    **options: Any,
) -> dict[str, Any]:
    """Score detections (a results file or list, or read :class:`Detections` with ``reference`` a
    :class:`GroundTruth`) against the ground truth: AP^Old, AP^Fixed, AP^Pool.

    ``settings`` (a :class:`~vistabench.protocols.detection.config.ScoreSettings`, built and checked once)
    or its fields as keywords (checked here): ``iou_type``, ``variants`` (``"old,fixed"`` or a
    sequence), ``max_dets_per_image``, ``dets_per_class``, ``fixed_area``, ``kpt_oks_sigmas`` (one per
    keypoint, or their comma-separated text ``"0.03,0.05"``; None: COCO's 17), ``gt_format``,
    ``allow_empty``, ``per_class``, ``errors``.

    With ``split`` (content from :func:`build_image_split`, or its file) only the images of ``part``
    are evaluated. An empty results list is refused unless ``allow_empty``. ``iou_type="keypoints"``
    matches by OKS (COCO ground truth with keypoints).
    Returns :func:`evaluation_result`'s dict; with ``per_class`` also ``per_class`` (the first of
    AP^Old / AP^Fixed in ``variants``: :func:`~vistabench.metrics.detection.per_class_results` rows,
    worst first); with ``errors`` also ``errors`` (TIDE's decomposition, AP points: the "tide" variant
    plus "fixed" / "pool" when in ``variants``; :func:`~vistabench.metrics.detection.decompose_errors`).
    """
    if settings is None:
        settings = ScoreSettings.from_dict(options)
    elif not isinstance(settings, ScoreSettings):
        raise InputError(f"settings: expected ScoreSettings, got {type(settings).__name__}")
    elif options:
        raise InputError(f"{next(iter(options))}: give either settings or keyword options, not both")
    if part not in ("test", "calibration"):
        raise InputError(f"part: expected test or calibration, got {part!r}")
    return _score(predictions, reference, settings, split=split, part=part)


def _score(predictions: str | os.PathLike[str] | list | Detections,
           reference: str | os.PathLike[str] | dict | GroundTruth, settings: ScoreSettings, *,
           split: dict[str, Any] | str | os.PathLike[str] | None, part: str) -> dict[str, Any]:
    """:func:`score` with its settings built (trusted here)."""
    allow_empty = settings.allow_empty
    if split is not None and not isinstance(split, dict):
        split = read_image_split(split)
    if isinstance(predictions, Detections):
        if not isinstance(reference, GroundTruth):
            raise InputError("reference: read Detections need the GroundTruth they were read against")
        gt, dets = reference, predictions
    else:
        gt, dets = read_for_scoring(predictions, reference, settings)
    if split is not None:
        gt, dets = restrict_images(gt, dets, split[part])
        if len(dets) == 0 and not allow_empty:
            raise InputError(f"results: no detection on the split's {part} images (it would score AP 0); "
                             "set `allow_empty` if that is intended")
    ev = evaluate_detections(gt, dets, settings)
    out = evaluation_result(ev)
    if settings.per_class:  # the diagnostics take the settings built once (not re-checked)
        variant = settings.per_class_variant()
        pc = per_class_results(gt, dets, variant=variant, options=settings)
        out["per_class"] = {"variant": variant, "rows": pc.rows()}
    if settings.errors:
        out["errors"] = decompose_errors(gt, dets, options=settings).to_dict()
    if split is not None:
        out["settings"].update(split_sha256=split["sha256"], split_part=part)
    return out


def run(config: DetectionConfig, *, store: ResultsStore | None = None,
        work_dir: str | os.PathLike[str] | None = None) -> list[Record]:
    """The detection pipeline for a detector's results: (fit ``config.calibrate`` on the split's
    held-out images, apply it to the test images) -> score the test images (without a split: all) ->
    one record (stored, with its id, when ``store`` is given). With ``work_dir`` the fitted
    calibration is written there as ``calibration.json``.
    """
    if not isinstance(config, DetectionConfig):
        raise InputError(f"config: expected a DetectionConfig, got {type(config).__name__} "
                         "(build one with DetectionConfig.from_dict)")
    config.refuse_tracking()
    split = read_image_split(config.split) if config.split is not None else None
    cal_settings = config.calibration()
    masks: bool | Literal["auto"] = config.iou_type == "segm"
    if cal_settings is not None and not masks:
        masks = {"segm": True, "auto": "auto"}.get(cal_settings.iou_type, False)
    gt, dets = read_detection_set(config.gt, config.results, masks=masks)
    # the files as `detection eval` names them, so that the table merges both commands' scorings of one set
    settings: dict[str, Any] = {"gt": config.gt, "results": config.results}
    if cal_settings is not None:
        cal = calibrate_detections(*restrict_images(gt, dets, split["calibration"]), cal_settings)
        gt, dets = restrict_images(gt, dets, split["test"])
        dets = apply_to(cal, gt, dets)
        settings = {"calibration": config.calibrate, "fitted_categories": cal.settings["num_categories_fitted"],
                    "recipe": config.recipe, "calibration_iou_type": cal.settings["iou_type"]}
        if work_dir is not None:
            out = Path(work_dir)
            out.mkdir(parents=True, exist_ok=True)
            settings["calibration_file"] = str(cal.save(out / "calibration.json"))
    elif split is not None:
        gt, dets = restrict_images(gt, dets, split["test"])
    if split is not None and len(dets) == 0:
        raise InputError("results: no detection on the split's test images (it would score AP 0)")
    ev = evaluate_detections(gt, dets, config.evaluation())
    result = evaluation_result(ev)
    if split is not None:
        result["settings"].update(split_sha256=split["sha256"], split_part="test")
    sha = settings["predictions_sha256"] = file_sha256(config.results)  # the detections scored (before calibration)
    # a file re-ranked or calibrated by our tools says so (its provenance); this run's own calibration wins
    settings = {**made_by(config.results, sha), **settings}
    rec = to_record(result, dataset=config.dataset, method=config.method, seed=config.seed, tag=config.tag,
                    settings={**settings, "config": config.to_dict()}, split_hash=None if split is None else split["sha256"])
    if store is not None:
        rec = dataclasses.replace(rec, id=store.add(rec))
    return [rec]
