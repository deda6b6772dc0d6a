"""The options of a detection evaluation (:class:`EvaluationOptions`), declared once for
:func:`~vistabench.metrics.detection.evaluate_detections`'s keywords, the protocol's ``score`` and the
``detection score`` flags. numpy-free: the command line declares its flags from it without loading the
evaluator."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..errors import InputError
from ..options import Options, option

__all__ = ["EvaluationOptions", "VARIANTS", "Variant", "options_alone"]

Variant = Literal["old", "fixed", "pool"]
VARIANTS: tuple[str, ...] = ("old", "fixed", "pool")


@dataclass(frozen=True, kw_only=True)
class EvaluationOptions(Options):
    """What :func:`~vistabench.metrics.detection.evaluate_detections` computes: one declaration for its
    keywords and for the flags of ``detection score``. Built once (every field checked then, and the rules across fields in
    :meth:`check`); the evaluation takes the built value and trusts it."""

    iou_type: Literal["bbox", "segm", "keypoints"] = option(
        "bbox", help="overlap: box IoU, mask IoU (results need 'segmentation') or keypoint OKS as pycocotools' "
                     "iouType='keypoints' (COCO ground truth with 'keypoints' and 'num_keypoints'; areas all/"
                     "medium/large, 20 detections per image and category)")
    kpt_oks_sigmas: tuple[float, ...] | None = option(
        None, metavar="LIST", help="with iou_type keypoints: comma-separated OKS sigma per keypoint, in keypoint "
                                   "order (default: COCO's 17 person-keypoint sigmas)")
    variants: tuple[Variant, ...] = option(VARIANTS, flags=("--ap",), metavar="LIST",
                                           help="the AP variants computed, comma-separated")
    max_dets_per_image: int | None = option(None, low=1, metavar="N",
                                            help="per-image limit of AP^Old (default: 300 for LVIS, none for COCO)")
    dets_per_class: int = option(10_000, low=1, metavar="K", help="top K per category for AP^Fixed / AP^Pool")
    fixed_area: Literal["mask", "box"] = option(
        "mask", help="with iou_type segm: the detection area deciding small/medium/large for AP^Fixed / AP^Pool: "
                     "mask (the authors' scripts) or box (lvis-api)")

    def check(self) -> None:
        super().check()
        if not self.variants:
            raise InputError("variants: expected at least one of old, fixed, pool, got none")
        object.__setattr__(self, "variants", tuple(dict.fromkeys(self.variants)))
        if self.kpt_oks_sigmas is not None and self.iou_type != "keypoints":
            raise InputError(f"kpt_oks_sigmas: only used with `iou_type` keypoints, got `iou_type` {self.iou_type}")


def options_alone(options: object, keywords: dict[str, object], unset: dict[str, object] | None = None) -> None:
    """The one way a detection function takes its settings: ``options`` (the built
    :class:`EvaluationOptions`, passed on and trusted) or its keywords, not both. ``keywords``: the
    keywords as called; ``unset``: each one's value when not given (None: every keyword counts as given).
    InputError naming the first keyword given beside ``options``, or ``options`` of another type."""
    if not isinstance(options, EvaluationOptions):
        raise InputError(f"options: expected EvaluationOptions, got {type(options).__name__}")
    given = [k for k, v in keywords.items() if unset is None or v != unset[k]]
    if given:
        raise InputError(f"{given[0]}: give either options or keyword options, not both")
