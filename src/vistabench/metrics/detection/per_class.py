"""Per-category results of AP^Old or AP^Fixed: AP, AP50, AP75, recall, ground truths and detections
of each category, worst first.

The figures are slices of the evaluator's own arrays (:func:`~.match.match_set`,
:func:`~.accumulate.accumulate`), so each category's AP is the one the mean AP averages: ``AP`` over
IoU 0.50:0.95, ``AP50``/``AP75`` at one threshold, ``recall`` the final recall averaged over the ten
IoU thresholds (the AR of that category: LVIS with the variant's limit, COCO at maxDets 100), area
"all". ``num_gt`` counts the ground truths AP counts (not crowd / ignored), ``num_detections`` the
detections in the category's ranked list (after the variant's cut and, for LVIS, the federated
selection). NaN where a category has no ground truth.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._validation import check_value
from ..detection_options import EvaluationOptions, options_alone
from .accumulate import accumulate
from .data import Detections, GroundTruth
from .match import MatchedSet, match_set
from .params import LVIS_MAX_DETS
from .select import top_mask
from .sort import ScoreRank

PER_CLASS_VARIANTS: tuple[str, ...] = ("old", "fixed")


def variant_match(gt: GroundTruth, dets: Detections, *, variant: str = "old", max_dets_per_image: int | None = None,
                  dets_per_class: int = 10_000) -> tuple[MatchedSet, np.ndarray]:
    """The evaluator's matching of one per-category variant and the mask (over ``ms.det``) of the
    detections in its ranked lists (COCO: within pycocotools' 100 per image and category).

    ``variant`` "old": each image's top ``max_dets_per_image`` (LVIS default 300; COCO none);
    "fixed": each category's top ``dets_per_class``.
    """
    check_value(variant, "variant", choices=PER_CLASS_VARIANTS)
    if variant == "old" and max_dets_per_image is not None:
        max_dets_per_image = check_value(max_dets_per_image, "max_dets_per_image", type=int, low=0, low_open=True)
    if variant != "old":
        dets_per_class = check_value(dets_per_class, "dets_per_class", type=int, low=0, low_open=True)
    return _match_variant(gt, dets, variant, max_dets_per_image, dets_per_class)


def _match_variant(gt: GroundTruth, dets: Detections, variant: str, max_dets_per_image: int | None,
                   dets_per_class: int) -> tuple[MatchedSet, np.ndarray]:
    """:func:`variant_match` with its arguments checked (trusted here)."""
    sr = ScoreRank.of(dets.score)
    if variant == "old":
        if max_dets_per_image is None and gt.format == "lvis":
            max_dets_per_image = LVIS_MAX_DETS
        keep = np.ones(len(dets), bool) if max_dets_per_image is None else top_mask(dets.image, sr.order,
                                                                                    max_dets_per_image)
    else:
        keep = top_mask(dets.category, sr.order, dets_per_class)
    ms = match_set(gt, dets, keep, score_rank=sr)
    return ms, keep[ms.det] & ms.in_cap


@dataclass
class PerClassResults:
    """Result of :func:`per_class_results`: one entry per category, in ``order`` (worst AP first,
    categories without ground truth last, then by id)."""

    category_id: np.ndarray
    name: list[str]
    frequency: list[str | None]
    ap: np.ndarray
    ap50: np.ndarray
    ap75: np.ndarray
    recall: np.ndarray
    num_gt: np.ndarray
    num_detections: np.ndarray
    order: np.ndarray
    variant: str

    def rows(self) -> list[dict[str, Any]]:
        """One dict per category, worst first (``AP``... as fractions, NaN undefined)."""
        out = []
        for k in self.order:
            out.append({"category_id": int(self.category_id[k]), "name": self.name[k],
                        "frequency": self.frequency[k], "AP": float(self.ap[k]), "AP50": float(self.ap50[k]),
                        "AP75": float(self.ap75[k]), "recall": float(self.recall[k]),
                        "num_gt": int(self.num_gt[k]), "num_detections": int(self.num_detections[k])})
        return out


def per_class_results(gt: GroundTruth, dets: Detections, *, variant: str = "old", max_dets_per_image: int | None = None,
                      dets_per_class: int = 10_000, options: EvaluationOptions | None = None) -> PerClassResults:
    """Per-category AP, AP50, AP75, recall, ground-truth and detection counts of ``variant``.

    ``options``: the evaluation's settings, built (and checked) once (an
    :class:`~vistabench.metrics.detection_options.EvaluationOptions`, as
    :func:`~.evaluate.evaluate_detections` takes it): its ``max_dets_per_image`` and ``dets_per_class``
    are used as they are, and the two keywords stay unset.
    """
    if options is None:
        ms, mask = variant_match(gt, dets, variant=variant, max_dets_per_image=max_dets_per_image,
                                 dets_per_class=dets_per_class)
    else:
        options_alone(options, {"max_dets_per_image": max_dets_per_image, "dets_per_class": dets_per_class},
                      {"max_dets_per_image": None, "dets_per_class": 10_000})
        check_value(variant, "variant", choices=PER_CLASS_VARIANTS)
        ms, mask = _match_variant(gt, dets, variant, options.max_dets_per_image, options.dets_per_class)
    acc = accumulate(ms, dets, mask)
    K = gt.num_categories
    p = acc.precision[:, :, :, 0]  # (T, R, K), area all
    has = acc.num_gt[:, 0] > 0

    def mean(a):
        out = np.full(K, np.nan)
        out[has] = a[..., has].reshape(-1, int(has.sum())).mean(axis=0)
        return out

    rec = acc.recall[:, :, 0] if acc.recall.ndim == 3 else acc.recall[:, :, 0, -1]
    ap = mean(p)
    ndet = np.bincount(dets.category[ms.det[mask]], minlength=K)
    key = np.where(np.isnan(ap), np.inf, ap)
    order = np.lexsort((gt.category_ids, key))
    names = gt.category_names or [str(int(c)) for c in gt.category_ids]
    freq = [None] * K if gt.frequency is None else [str(f) for f in gt.frequency]
    return PerClassResults(category_id=gt.category_ids, name=list(names), frequency=freq, ap=ap, ap50=mean(p[0]),
                           ap75=mean(p[5]), recall=mean(rec), num_gt=acc.num_gt[:, 0], num_detections=ndet,
                           order=order, variant=variant)
