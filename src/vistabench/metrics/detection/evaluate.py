"""Large-vocabulary detection AP: AP^Old, AP^Fixed and AP^Pool in one pass (Dave et al., 2021).

* **AP^Old** — the official number: each image's top ``max_dets_per_image`` detections (LVIS:
  300), then lvis-api's federated per-category AP (LVIS ground truth) or pycocotools' AP (COCO
  ground truth: ``iscrowd``, maxDets 1/10/100 per image and category).
* **AP^Fixed** — no per-image limit; each category's top ``dets_per_class`` (10,000) detections
  over the whole set; then the same per-category AP. Invariant to per-category monotone score maps.
* **AP^Pool** — the AP^Fixed detections and matches, pooled over categories into one ranking with
  the ground-truth count summed over categories (area "all"); ``APr/APc/APf`` pool one frequency
  group. Detections of a category without ground truth in the set that is listed negative for
  the image count as false positives, as in the authors' ``LVISPooledEval``.

Per category, area range and IoU threshold the precision is lvis-api's 101-point interpolation
(:mod:`.accumulate`); AP is its mean over thresholds, recall points and the categories with ground
truth (:mod:`.summarize`).

Every result is bit-for-bit the official tool's on the same detections (tests compare to 1e-9).
The phases are modules of this package: :mod:`.select`, :mod:`.match` (computed once and reused by
all three APs), :mod:`.accumulate`, :mod:`.summarize`; this module runs them.

>>> import numpy as np
>>> from vistabench.metrics.detection import GroundTruth, Detections
>>> gt = GroundTruth.from_arrays(format="coco", image_ids=[1], category_ids=[1], image_id=[1],
...                              category_id=[1], bbox=[[0, 0, 10, 10]])
>>> dt = Detections.from_ids(gt, image_id=[1, 1], category_id=[1, 1],
...                          bbox=[[0, 0, 10, 10], [50, 50, 5, 5]], score=[0.9, 0.8])
>>> round(evaluate_detections(gt, dt, variants=("old",)).results["old"]["AP"], 12)  # 1/(1+eps), as pycocotools
1.0
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ...errors import InputError
from ..detection_options import EvaluationOptions, options_alone
from .accumulate import accumulate, accumulate_pooled
from .data import Detections, GroundTruth
from .masks import to_rle
from .match import MatchedSet, match_set
from .params import LVIS_MAX_DETS
from .select import top_mask
from .sort import ScoreRank
from .summarize import summarize, summarize_keypoints, summarize_pooled

POOL_KEYS = ("AP", "AP50", "AP75", "APr", "APc", "APf")


@dataclass
class DetectionEvaluation:
    """Named results of :func:`evaluate_detections`.

    ``results[variant]`` is a dict of lvis-api's keys (fractions; NaN where undefined);
    ``precision[variant]`` holds the interpolated precision, shape (T, R, K, A) for old/fixed
    (NaN where a category has no ground truth — lvis-api writes -1 there) and (T, R, P) for pool
    (P pools all/r/c/f); ``settings`` records what produced them.
    """

    results: dict[str, dict[str, float]]
    settings: dict[str, Any]
    precision: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    num_detections: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: dict(v) for k, v in self.results.items()}
        out["settings"] = dict(self.settings, num_detections=dict(self.num_detections))
        return out


def evaluate_detections(gt: GroundTruth, dets: Detections, options: EvaluationOptions | None = None,
                        **keywords: Any) -> DetectionEvaluation:
    """AP^Old, AP^Fixed and AP^Pool of ``dets`` against ``gt``: select, :func:`match_set`,
    :func:`accumulate` / :func:`accumulate_pooled`, :func:`summarize` / :func:`summarize_pooled`.

    Parameters
    ----------
    gt : GroundTruth (LVIS or COCO semantics by ``gt.format``).
    dets : Detections, file order (ties in score are broken by it, as the official tools do).
    options : EvaluationOptions, optional
        The settings below, built (and checked) once; or give them as keywords (checked here):
    iou_type : "bbox", "segm" (masks need ``segmentation`` in both; pycocotools computes mask IoU) or
        "keypoints" (COCO ground truth; OKS as pycocotools' ``iouType="keypoints"``: areas all /
        medium / large, 20 detections per image and category, ground truth with
        ``num_keypoints == 0`` ignored; keypoints in both).
    variants : which of "old", "fixed", "pool" to compute.
    max_dets_per_image : per-image cut for AP^Old; default 300 for LVIS, none for COCO (pycocotools
        applies its maxDets 1/10/100 per image *and category*).
    dets_per_class : k of AP^Fixed / AP^Pool (top k per category over the whole set).
    fixed_area : with ``iou_type="segm"``, the detection area that decides small/medium/large (and
        the zero-area filter) for AP^Fixed / AP^Pool: "mask" as the authors' scripts (they drop the
        box), or "box" as lvis-api. AP^Old always follows lvis-api / pycocotools (box area when the
        result has a box).
    kpt_oks_sigmas : (K,) per-keypoint OKS falloffs (``iou_type="keypoints"``); None: COCO's 17.

    Returns
    -------
    DetectionEvaluation; ``results["old"|"fixed"]`` have keys AP, AP50, AP75, APs, APm, APl, APr,
    APc, APf and AR@N, ARs@N, ARm@N, ARl@N (LVIS: N = the per-image limit, "all" for fixed; COCO:
    AR@1, AR@10, AR@100, ARs@100, ...); ``results["pool"]`` has AP, AP50, AP75, APr, APc, APf.
    Keypoints: ``results["old"|"fixed"]`` are pycocotools' ten ``summarizeKps`` stats AP, AP50, AP75,
    APm, APl, AR@20, AR50@20, AR75@20, ARm@20, ARl@20.
    """
    if options is None:
        options = EvaluationOptions.from_dict(keywords)
    else:
        options_alone(options, keywords)
    iou_type, fixed_area, kpt_oks_sigmas = options.iou_type, options.fixed_area, options.kpt_oks_sigmas
    variants, dets_per_class = list(options.variants), options.dets_per_class
    lvis = gt.format == "lvis"
    max_dets_per_image = options.max_dets_per_image
    if max_dets_per_image is None and lvis:
        max_dets_per_image = LVIS_MAX_DETS
    warn_annotation_id_zero(gt)
    sigmas = None
    if iou_type == "keypoints":
        from .oks import COCO_KPT_OKS_SIGMAS

        if gt.format != "coco":
            raise InputError("iou_type: 'keypoints' needs COCO-style ground truth (LVIS has no keypoints)")
        if gt.keypoints is None or (len(dets) and dets.keypoints is None):
            raise InputError("iou_type: 'keypoints' needs 'keypoints' in the ground truth and in the results")
        # checked once, against the keypoints' count, where the matching reads them (oks_pairs)
        sigmas = COCO_KPT_OKS_SIGMAS if kpt_oks_sigmas is None else kpt_oks_sigmas
        if len(dets) == 0 and dets.keypoints is None:
            dets = replace(dets, keypoints=np.zeros((0, gt.keypoints.shape[1], 3)))
    if iou_type == "segm" and dets.segmentation is not None:
        absent = [i for i, x in enumerate(dets.segmentation) if x is None]
        if absent:
            raise InputError(f"results: detection {absent[0]} has no segmentation (iou_type 'segm' needs one each)")
    n = len(dets)
    sr = ScoreRank.of(dets.score)  # the one score sort; every ordering below reuses it
    keep: dict[str, np.ndarray] = {}
    if "old" in variants:
        keep["old"] = (top_mask(dets.image, sr.order, max_dets_per_image) if max_dets_per_image is not None
                       else np.ones(n, bool))
    fixed_dets = dets
    if "fixed" in variants or "pool" in variants:
        m = top_mask(dets.category, sr.order, dets_per_class)
        keep["fixed"] = m
        if iou_type == "segm" and fixed_area == "mask":
            fixed_dets = _with_mask_area(gt, dets, m)
    # one matching serves every variant that sees the same detection areas
    groups = [(dets, [b for b in keep if fixed_dets is dets or b == "old"])]
    if fixed_dets is not dets:
        groups.append((fixed_dets, ["fixed"]))
    matched: dict[str, tuple[MatchedSet, Detections]] = {}
    for d, bases in groups:
        if not bases:
            continue
        union = np.zeros(n, bool)
        for b in bases:
            union |= keep[b]
        ms = match_set(gt, d, union, iou_type=iou_type, score_rank=sr, kpt_oks_sigmas=kpt_oks_sigmas)
        for b in bases:
            matched[b] = (ms, d)

    settings = {"format": gt.format, "iou_type": iou_type, "variants": variants,
                "max_dets_per_image": max_dets_per_image, "dets_per_class": dets_per_class,
                "num_images": gt.num_images, "num_categories": gt.num_categories, "num_ground_truth": len(gt),
                "num_results": n}
    if iou_type == "segm":
        settings["fixed_area"] = fixed_area
    if sigmas is not None:
        settings["kpt_oks_sigmas"] = [float(x) for x in sigmas]
    ev = DetectionEvaluation(results={}, settings=settings)
    for v in variants:
        base = "fixed" if v == "pool" else v
        ms, d = matched[base]
        mask = keep[base][ms.det]
        if v == "pool":
            pacc = accumulate_pooled(ms, d, mask)
            ev.results[v], ev.precision[v], ev.num_detections[v] = summarize_pooled(pacc), pacc.precision, pacc.num_detections
        else:
            acc = accumulate(ms, d, mask)
            label = "all" if v == "fixed" else (max_dets_per_image if lvis else None)
            ev.results[v] = (summarize_keypoints(acc) if iou_type == "keypoints"
                             else summarize(acc, ms.gt, max_dets_label=label))
            ev.precision[v], ev.num_detections[v] = acc.precision, acc.num_detections
    return ev


def _with_mask_area(gt: GroundTruth, dets: Detections, which: np.ndarray) -> Detections:
    """``dets`` with the mask area (pycocotools ``area`` of the RLE) for the detections in ``which``."""
    import pycocotools.mask as mask_utils

    if dets.segmentation is None:
        raise InputError("iou_type='segm' needs 'segmentation' in the results")
    idx = np.flatnonzero(which)
    size = gt.image_size
    rles = []
    for i in idx:
        img = int(dets.image[i])
        h, w = (int(size[img, 0]), int(size[img, 1])) if size is not None else (0, 0)
        rles.append(to_rle(dets.segmentation[i], h, w))
    area = dets.area.copy()
    # pycocotools' area() overflows a uint8 counter for lists of 256 or more: 255 at a time
    area[idx] = np.concatenate([np.asarray(mask_utils.area(rles[i: i + 255]), np.float64).reshape(-1)
                                for i in range(0, len(rles), 255)] or [np.zeros(0)])
    return replace(dets, area=area)


class OfficialToolsDifferenceWarning(UserWarning):
    """The result is correct but differs from what lvis-api / pycocotools would report."""


def warn_annotation_id_zero(gt: GroundTruth) -> None:
    """One-line warning when a ground-truth annotation has id 0 (see ``docs/fidelity.md``)."""
    if len(gt.ann_id) and np.any(gt.ann_id == 0):
        warnings.warn("ground truth has an annotation with id 0: vistabench counts its matches correctly, "
                      "but lvis-api and pycocotools store matches as annotation ids and count a match to "
                      "id 0 as a false positive, so their AP would be lower", OfficialToolsDifferenceWarning,
                      stacklevel=3)
