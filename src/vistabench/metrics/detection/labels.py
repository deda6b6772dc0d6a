"""Calibration labels: true/false-positive labels of the evaluated detections, from the same
selection and matching as AP (:func:`~.select.federated_selection`, :func:`~.match.match_set`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from ..._validation import check_value
from ...errors import InputError
from .data import Detections, GroundTruth
from .match import MatchCode, match_set
from .params import IOU_THRESHOLDS, IouType
from .select import first_per_class, top_per_class


@dataclass
class DetectionLabels:
    """Result of :func:`detection_labels`.

    Attributes
    ----------
    index : (n,) int64 positions into the Detections, ascending.
    label : (n,) bool, True where the detection is a true positive.
    """

    index: np.ndarray
    label: np.ndarray


def detection_labels(
    gt: GroundTruth,
    dets: Detections,
    *,
    iou_type: IouType = "bbox",
    iou_threshold: float = 0.75,
    dets_per_class: int | None = None,
    recipe: Literal["vistabench", "devil"] = "vistabench",
) -> DetectionLabels:
    """True/false-positive labels of the evaluated detections (for fitting calibration).

    Parameters
    ----------
    gt, dets : ground truth and detections.
    iou_threshold : one of lvis-api's thresholds 0.50:0.05:0.95 (the paper uses 0.75).
    dets_per_class : optional k per category first: "vistabench" keeps the top k by score (as
        AP^Fixed); "devil" the first k in file order (the authors' ``_limit_dets`` as it behaves).
    recipe : which detections get a label (both: only those :func:`federated_selection` keeps,
        area "all"):

        * "vistabench" — as AP counts them: an unmatched detection of a not-exhaustive category,
          or one matched to an ignored ground truth, carries no label and is left out;
        * "devil" — as the authors' ``load_tp_fp_fn`` (large-vocab-devil): every evaluated
          detection is labelled, positive when matched to *any* ground truth at the threshold
          (ignored ones included), so unmatched not-exhaustive detections are negatives.

    Returns
    -------
    DetectionLabels with ``index`` (positions into ``dets``) and ``label``.
    """
    t = np.flatnonzero(np.isclose(IOU_THRESHOLDS, iou_threshold, rtol=0, atol=1e-12))
    if len(t) != 1:
        raise InputError(f"iou_threshold: expected one of {np.round(IOU_THRESHOLDS, 2).tolist()}, got {iou_threshold!r}")
    check_value(recipe, "recipe", choices=("vistabench", "devil"))
    keep = None
    if dets_per_class is not None:
        keep = np.zeros(len(dets), bool)
        pick = first_per_class if recipe == "devil" else top_per_class
        keep[pick(dets, k=dets_per_class)] = True
    ms = match_set(gt, dets, keep, iou_type=iou_type)
    code = ms.match.codes(0, int(t[0]))
    code[~ms.in_cap] = MatchCode.NOT_EVALUATED  # beyond pycocotools' cap
    tp = code == MatchCode.TRUE_POSITIVE
    if recipe == "devil":
        labelled = code != MatchCode.NOT_EVALUATED
        lab_all = tp | (code == MatchCode.MATCHED_IGNORED)
    else:
        labelled = tp | ((code == MatchCode.UNMATCHED) & ~(ms.match.det_out[0] | ms.match.det_nel))
        lab_all = tp
    idx = ms.det[labelled]
    lab = lab_all[labelled]
    o = np.argsort(idx, kind="stable")
    return DetectionLabels(index=idx[o], label=lab[o])
