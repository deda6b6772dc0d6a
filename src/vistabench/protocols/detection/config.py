"""The detection protocol's typed configuration (:class:`DetectionConfig`) and calibration recipe
(:class:`CalibrationSettings`).

A calibration *recipe* is a named preset of the calibration fields:

* ``vistabench`` (default): labels as AP counts them (box IoU 0.75), a pooled fallback for
  categories with fewer than ``min_samples`` (20) labelled detections, ``histbin`` with 10
  equal-mass bins; ties after calibration kept in each category's original order (+1e-9·rank).
* ``devil``: the authors' large-vocab-devil settings (``configs/calib/base.yaml`` + ``platt.yaml`` /
  ``histbin.yaml``, ``scripts/train_calibration.py``): every evaluated detection labelled at IoU
  0.75, matched with mask IoU when masks are present (``IOU_TYPE: segm``; ``iou_type: auto``),
  categories without a positive score 0, Platt on logit(score) or netcal's histogram binning with
  20 equal-width bins, ties broken as ``MAINTAIN_RANK`` does. It reads no ``min_samples``.

An option that the chosen recipe or method does not read is refused (one line naming the field)
rather than silently ignored. This module imports neither numpy nor any data.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from ...config import Options, RunConfig, option
from ...data.coco_names import record_dataset_name
from ...errors import InputError
from ...metrics.detection_options import EvaluationOptions

__all__ = [
    "DEVIL_CALIBRATION_METHODS",
    "RECIPES",
    "CalibrationSettings",
    "DetectionConfig",
    "ScoreSettings",
    "FROM_GROUND_TRUTH",
    "check_calibration_method",
    "fill_recipe",
    "resolve_calibration",
]

RECIPES = ("vistabench", "devil")
#: ``max_dets_per_image`` by default: the ground truth's convention (LVIS 300, COCO none)
FROM_GROUND_TRUTH = "from_ground_truth"
#: The methods the authors' recipe has (netcal's LogisticCalibration and HistogramBinning).
DEVIL_CALIBRATION_METHODS = ("histbin", "platt")

#: Each recipe's values of the calibration fields (``bins`` is read by ``histbin`` only).
_PRESETS: dict[str, dict[str, Any]] = {
    "vistabench": {"iou_threshold": 0.75, "iou_type": "bbox", "dets_per_class": 10_000, "min_samples": 20, "bins": 10},
    "devil": {"iou_threshold": 0.75, "iou_type": "auto", "dets_per_class": 10_000, "min_samples": None, "bins": 20},
}


def check_calibration_method(method: str, recipe: str, name: str = "method") -> None:
    """InputError naming ``name`` unless ``method`` is a calibrator the ``recipe`` has."""
    if recipe == "devil":
        if method not in DEVIL_CALIBRATION_METHODS:
            raise InputError(f"{name}: the devil recipe has {', '.join(DEVIL_CALIBRATION_METHODS)} "
                             f"(the authors' netcal methods), got {method!r}")
        return
    from .calibration import calibrators

    if method not in calibrators:
        try:
            calibrators.get(method)
        except InputError as exc:
            raise InputError(f"{name}: {exc}") from None


def resolve_calibration(given: dict[str, Any], names: dict[str, str], *, active: bool,
                        method: str | None) -> dict[str, Any]:
    """Refuse the calibration fields of ``given`` that nothing reads (the recipe fills the rest).

    A field given at the recipe's own value (or None) counts as not given, so a printed config reads
    back; any other value that nothing would read is an error naming the field.

    ``names`` maps the generic names (method, recipe, iou_threshold, iou_type, dets_per_class, min_samples,
    bins) to the config's field names; ``active``: calibration runs at all; ``method``: the calibrator.
    """
    recipe = given.get(names["recipe"], "vistabench")
    preset = {"method": None, "recipe": "vistabench", **_PRESETS.get(recipe, _PRESETS["vistabench"])}

    def changed(generic: str) -> bool:  # given and not the recipe's own value (a printed config is read back)
        name = names[generic]
        return name in given and given[name] is not None and given[name] != preset[generic]

    if not active:
        for generic, field_name in names.items():
            if generic != "method" and changed(generic):
                raise InputError(f"{field_name}: only read when calibrating (set {names['method']}); remove it")
    if recipe == "devil" and changed("min_samples"):
        raise InputError(f"{names['min_samples']}: not read by the devil recipe (the authors fit every "
                         f"category with a true positive and score the others 0); remove it or use "
                         f"{names['recipe']}: vistabench")
    if changed("bins") and method is not None and method != "histbin":
        raise InputError(f"{names['bins']}: only read by histbin, not by {method!r}; remove it")
    return given


def fill_recipe(obj: Options, names: dict[str, str]) -> None:
    """Set the recipe-dependent fields still at None (``min_samples``, ``bins``, ``iou_type``) to the
    recipe's values (called before validation, so a directly built config is resolved too)."""
    recipe = getattr(obj, names["recipe"])
    preset = _PRESETS.get(recipe)
    if preset is None:
        return  # the recipe field's own check names it
    for generic in ("iou_type", "bins", "min_samples"):
        if getattr(obj, names[generic]) is None:
            object.__setattr__(obj, names[generic], preset[generic])


@dataclass(frozen=True, kw_only=True)
class CalibrationSettings(Options):
    """How calibration labels are made and calibrators fitted (resolved from a recipe)."""

    method: str = option("platt", help="calibrator: histbin, isotonic, platt, beta or bbq (devil recipe: "
                                       "platt or histbin)")
    recipe: Literal["vistabench", "devil"] = option(
        "vistabench", help="calibration recipe: vistabench (ours) or devil (the authors' large-vocab-devil "
                           "settings); see docs/detection.md")
    iou_threshold: float = option(0.75, low=0, low_open=True, high=1, help="IoU threshold of the calibration labels")
    iou_type: Literal["auto", "bbox", "segm"] | None = option(
        None, help="overlap of the calibration labels: bbox, segm, or auto (segm when the results carry masks, "
                   "as the authors' IOU_TYPE segm); default the recipe's (vistabench: bbox, devil: auto)")
    dets_per_class: int = option(10_000, low=1, help="top K detections per category labelled (as AP^Fixed)")
    min_samples: int | None = option(
        None, low=1, help="vistabench recipe: categories with fewer labelled detections use the pooled "
                          "calibrator (default 20); the devil recipe reads none")
    bins: int | None = option(None, low=1, help="histbin's bins; default the recipe's (vistabench: 10 "
                                                "equal-mass; devil: 20 equal-width, as netcal)")

    _NAMES: ClassVar[dict[str, str]] = {"method": "method", "recipe": "recipe", "iou_threshold": "iou_threshold",
                                        "iou_type": "iou_type", "dets_per_class": "dets_per_class",
                                        "min_samples": "min_samples", "bins": "bins"}

    @classmethod
    def resolve(cls, given: dict[str, Any]) -> dict[str, Any]:
        return resolve_calibration(given, cls._NAMES, active=True, method=given.get("method", "platt"))

    def __post_init__(self) -> None:
        if self.recipe == "devil" and self.min_samples is not None:
            raise InputError("min_samples: not read by the devil recipe; remove it")
        fill_recipe(self, self._NAMES)
        super().__post_init__()

    def check(self) -> None:
        check_calibration_method(self.method, self.recipe)


@dataclass(frozen=True, kw_only=True)
class ScoreSettings(EvaluationOptions):
    """What :func:`~vistabench.protocols.detection.runner.score` computes and reads: the evaluation's options and
    how the files are read and reported (one declaration for its keywords and ``detection score``'s
    flags; built once, trusted by the scoring)."""

    gt_format: Literal["auto", "lvis", "coco"] = option(
        "auto", help="auto: LVIS when images carry neg/not-exhaustive lists, else COCO")
    allow_empty: bool = option(False, help="score an empty results list (AP 0) instead of refusing it")
    per_class: bool = option(False, help="also AP, AP50, AP75, recall, ground truths and detections per category, "
                                         "worst first (of AP^Old, or AP^Fixed when --ap has no old; boxes); "
                                         "stored with the record")
    errors: bool = option(False, help="also TIDE's error decomposition (as `detection errors --ap "
                                      "tide[,fixed,pool]`); stored with the record, shown in the report")

    def check(self) -> None:
        super().check()
        if self.per_class and self.per_class_variant() is None:
            raise InputError("per_class: per-category results need AP^Old or AP^Fixed in variants (AP^Pool has one "
                             f"ranking for all categories), got {','.join(self.variants)!r}")
        if self.per_class and self.iou_type != "bbox":
            raise InputError("per_class: per-category results are computed for boxes (`iou_type` bbox)")
        if self.errors and self.iou_type == "keypoints":
            raise InputError("errors: the error decomposition is computed for boxes or masks (`iou_type` bbox or "
                             "segm)")

    def per_class_variant(self) -> str | None:
        """The AP variant of the per-category rows: the first of old / fixed in ``variants``."""
        return next((v for v in self.variants if v in ("old", "fixed")), None)


@dataclass(frozen=True, kw_only=True)
class DetectionConfig(RunConfig):
    """``vistabench detection run``: score a detector's results file (optionally calibrated first).

    With ``split`` only the split's test images are scored; with ``calibrate`` a per-category
    calibrator is fitted on the split's calibration images (by ``recipe``) and applied first.
    """

    protocol = "detection"

    gt: str = option(help="COCO or LVIS v1 ground-truth JSON", metavar="GT.json")
    results: str = option(help="the detector's results JSON list", metavar="DT.json")
    split: str | None = option(None, help="split file from `detection split`: score its test images "
                                          "(and fit calibration on its calibration images)", metavar="SPLIT.json")
    calibrate: str | None = option(None, help="fit and apply this calibrator (needs split): histbin, isotonic, "
                                              "platt, beta, bbq (devil recipe: platt, histbin)", metavar="METHOD")
    iou_type: Literal["bbox", "segm"] = option("bbox", help="overlap used by the three APs")
    max_dets_per_image: int | Literal["from_ground_truth"] | None = option(
        None, low=1, metavar="N", help="AP^Old's per-image limit (default: from_ground_truth: 300 for LVIS, none "
                                       "for COCO, read from the ground-truth file)")
    dets_per_class: int = option(10_000, low=1, metavar="K", help="top K per category for AP^Fixed / AP^Pool")
    method: str | None = option(None, help="method name of the record (default: the results file's name "
                                           "without its extension)")
    dataset: str | None = option(None, help="dataset name of the record (default: the ground truth's own name, "
                                            "its info.description, else the file's name without its extension)")
    seed: int | None = option(None, help="seed of the run that made the results (stored as is)")
    tag: str | None = option(None, help="free-form tag of the record")
    recipe: Literal["vistabench", "devil"] = option(
        "vistabench", key_default="vistabench",
        help="calibration recipe: vistabench (ours) or devil (the authors' large-vocab-devil settings)")
    calibration_iou: float = option(0.75, low=0, low_open=True, high=1, key_default=0.75,
                                    help="IoU threshold of the calibration labels")
    calibration_iou_type: Literal["auto", "bbox", "segm"] | None = option(
        None, key_default="bbox",
        help="overlap of the calibration labels; default the recipe's (vistabench: bbox; devil: auto = segm "
             "when the results carry masks)")
    calibration_dets_per_class: int = option(10_000, low=1, key_default=10_000,
                                             help="top K detections per category labelled for calibration")
    min_samples: int | None = option(None, low=1, key_default=20,
                                     help="vistabench recipe: categories with fewer labelled detections use the "
                                          "pooled calibrator (default 20; the devil recipe reads none)")
    bins: int | None = option(None, low=1, key_default=10,
                              help="histbin's bins; default the recipe's (vistabench: 10 equal-mass; devil: 20 "
                                   "equal-width, as netcal)")

    _NAMES: ClassVar[dict[str, str]] = {"method": "calibrate", "recipe": "recipe", "iou_threshold": "calibration_iou",
              "iou_type": "calibration_iou_type", "dets_per_class": "calibration_dets_per_class",
              "min_samples": "min_samples", "bins": "bins"}

    resolved_fields: ClassVar[dict[str, Any]] = {"max_dets_per_image": None, "method": None, "dataset": None}

    @classmethod
    def resolve(cls, given: dict[str, Any]) -> dict[str, Any]:
        method = given.get("calibrate")
        out = resolve_calibration(given, cls._NAMES, active=method is not None, method=method)
        return {**out, **cls._named(out)}

    @staticmethod
    def _named(values: dict[str, Any]) -> dict[str, Any]:
        """The unset record names from the files' names; the LVIS/COCO limit from the ground truth's content."""
        out: dict[str, Any] = {}
        if values.get("method") is None and isinstance(values.get("results"), str):
            out["method"] = Path(values["results"]).stem  # a results list has no metadata: its file's name
        if values.get("dataset") is None and isinstance(values.get("gt"), str):
            out["dataset"] = record_dataset_name(values["gt"])
        if values.get("max_dets_per_image") is None:
            out["max_dets_per_image"] = FROM_GROUND_TRUTH
        return out

    def max_dets(self) -> int | None:
        """``max_dets_per_image`` as the evaluation reads it (None: the ground truth's convention)."""
        return None if self.max_dets_per_image == FROM_GROUND_TRUTH else self.max_dets_per_image

    def evaluation(self) -> EvaluationOptions:
        """What the scoring computes, as the value the evaluation takes: this config's ``iou_type`` and
        limits, checked when the config was made (the same or narrower rules) and not again."""
        return EvaluationOptions.from_checked(iou_type=self.iou_type, max_dets_per_image=self.max_dets(),
                                              dets_per_class=self.dets_per_class)

    def __post_init__(self) -> None:
        if self.recipe == "devil" and self.min_samples is not None:
            raise InputError("min_samples: not read by the devil recipe; remove it")
        fill_recipe(self, self._NAMES)
        for name, value in self._named({n: getattr(self, n) for n in ("method", "dataset", "gt", "results",
                                                                        "max_dets_per_image")}).items():
            object.__setattr__(self, name, value)  # built directly: named the same way
        super().__post_init__()

    def check(self) -> None:
        if self.calibrate is None and self.recipe != "vistabench":
            raise InputError("recipe: only read when calibrating (set calibrate); remove it")
        if self.calibrate is not None:
            if self.split is None:
                raise InputError("split: calibrate needs a split (the calibrator is fitted on the split's held-out "
                                 "calibration images; fitting on the scored images would leak)")
            check_calibration_method(self.calibrate, self.recipe, "calibrate")

    def calibration(self) -> CalibrationSettings | None:
        """The calibration settings of this run (None without ``calibrate``)."""
        if self.calibrate is None:
            return None
        return CalibrationSettings(method=self.calibrate, recipe=self.recipe, iou_threshold=self.calibration_iou,
                                   iou_type=self.calibration_iou_type,
                                   dets_per_class=self.calibration_dets_per_class,
                                   min_samples=self.min_samples, bins=self.bins)
