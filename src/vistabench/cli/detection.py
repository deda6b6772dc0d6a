"""`vistabench detection ...`: split, score (alias eval), run, rerank, calibrate fit/apply, synth; errors,
operating, confusion (cli/detection_analysis.py). Each verb is generated from its options class below."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from . import store_records
from ..config import FieldInfo, Options, option
from ..errors import InputError
from ..protocols.detection.config import DetectionConfig, ScoreSettings
from .detection_analysis import (Formatted, PerClassSort, TableFormat, human_errors, per_class_table,
                                 register_analysis)
from .verbs import RecordOptions, RunOptions, Verbs, add_run_verb, add_verb, store_field, verb_group
from .verbs import TrackOptions

GT_HELP = "COCO or LVIS v1 ground-truth JSON"


@dataclass(frozen=True, kw_only=True)
class SplitOptions(Options):
    """`detection split`: :func:`~vistabench.protocols.detection.tools.write_image_split`'s arguments."""

    gt: str = option(metavar="GT.json", help=GT_HELP)
    calibration_fraction: float = option(0.5, low=0, high=1, help="share of images held out")
    seed: int = option(0, help="seed of the split")
    out: str = option(metavar="SPLIT.json", help="split file to write")


@dataclass(frozen=True, kw_only=True)
class ScoreOptions(TrackOptions, RecordOptions, ScoreSettings):
    """`detection score`: the files, :func:`~vistabench.protocols.detection.runner.score`'s settings (its
    :class:`~vistabench.protocols.detection.config.ScoreSettings`, declared there once), the table's
    form, the record's names and the store."""

    record_what = "results"
    record_dataset_default = "the ground truth's own name (info.description), else its file's name"

    gt: str = option(metavar="GT.json", help=GT_HELP)
    results: str = option(metavar="DT.json", help="results JSON list")
    split: str | None = option(None, metavar="SPLIT.json", help="score only the test images of this split file")
    format: TableFormat = option("markdown", help="the per-class table's format (csv: only that table)")
    sort: PerClassSort | None = option(
        None, metavar="ORDER", help="with --per-class: the table's order, worst (lowest AP first; the default), best "
                                    "(highest first), name, or gt (most ground-truth objects first)")
    top: int | None = option(None, low=1, metavar="N",
                             help="with --per-class: only the first N categories of that order (e.g. --top 20 "
                                  "--sort worst: the 20 worst); --json and the record keep every category")
    store: str | None = store_field(optional=True)

    @classmethod
    def fields_info(cls) -> list[FieldInfo]:
        """The files first, then the settings (the record's and the tracking's last)."""
        infos = super().fields_info()
        return [i for i in infos if i.name in ("gt", "results")] + [i for i in infos if i.name not in ("gt", "results")]

    def check(self) -> None:
        super().check()
        for name in ("sort", "top"):
            if getattr(self, name) is not None and not self.per_class:
                per_class = type(self).field_info("per_class").flag()
                raise InputError(f"{name}: only with {per_class} (it orders the per-category table)")


@dataclass(frozen=True, kw_only=True)
class DetectionRunOptions(RunOptions):
    out: str | None = option(None, metavar="DIR", help="folder for the run's files (the fitted calibration.json)")


@dataclass(frozen=True, kw_only=True)
class RerankOptions(Options):
    """`detection rerank`: :func:`~vistabench.protocols.detection.tools.rerank_results_file`'s arguments."""

    results: str = option(metavar="DT.json", help="results JSON list")
    per_class_topk: int = option(low=1, metavar="K", help="detections kept per category over the whole file")
    out: str = option(metavar="OUT.json", help="results file to write")


@dataclass(frozen=True, kw_only=True)
class CalibrateFitOptions(Options):
    """`detection calibrate fit`: the files and the calibration fields given (the unset ones are the
    recipe's; :class:`~vistabench.protocols.detection.config.CalibrationSettings` checks them)."""

    gt: str = option(metavar="GT.json", help=GT_HELP)
    results: str = option(metavar="DT.json", help="the held-out detections (results JSON list)")
    method: str = option("platt", metavar="NAME",
                         help="histbin, isotonic, platt, beta or bbq (devil recipe: platt or histbin)")
    recipe: Literal["vistabench", "devil"] = option(
        "vistabench", help="label construction, fallbacks and ties (see docs/detection.md)")
    iou_threshold: float | None = option(None, flags=("--iou",), metavar="IOU",
                                         help="IoU threshold of the labels (default 0.75)")
    min_samples: int | None = option(None, help="vistabench recipe: pooled fallback below this many labels "
                                                "(default 20)")
    bins: int | None = option(None, help="histbin's bins (default: vistabench 10 equal-mass, devil 20 equal-width)")
    dets_per_class: int | None = option(None, metavar="K", help="top K per category labelled (default 10000)")
    iou_type: Literal["auto", "bbox", "segm"] | None = option(
        None, help="overlap of the labels (default: vistabench bbox; devil auto = segm when the results carry masks)")
    out: str = option(metavar="CAL.json", help="calibration file to write")

    def settings(self) -> dict[str, Any]:
        """The calibration fields given (what ``CalibrationSettings`` reads; unset: the recipe's)."""
        names = ("method", "recipe", "iou_threshold", "min_samples", "bins", "dets_per_class", "iou_type")
        return {k: getattr(self, k) for k in names if getattr(self, k) is not None}


@dataclass(frozen=True, kw_only=True)
class CalibrateApplyOptions(Options):
    """`detection calibrate apply`: :func:`~vistabench.protocols.detection.tools.apply_calibration_file`'s."""

    calibration: str = option(metavar="CAL.json", help="calibration file (`detection calibrate fit`)")
    results: str = option(metavar="DT.json", help="results JSON list")
    out: str = option(metavar="OUT.json", help="results file to write")


@dataclass(frozen=True, kw_only=True)
class SynthOptions(Options):
    """`detection synth`: :func:`~vistabench.data.detection_synth.synth_detection_set`'s arguments."""

    out: str = option(metavar="DIR", help="folder to write gt.json and results.json to")
    num_images: int = option(200, low=1, flags=("--images",), metavar="N", help="images")
    num_categories: int = option(100, low=1, flags=("--categories",), metavar="N", help="categories")
    dets_per_image: int = option(100, low=1, metavar="N", help="detections per image")
    seed: int = option(0, help="seed of the images")
    detector_seed: int | None = option(None, help="seed of the detector's category traits (default: --seed)")
    format: Literal["lvis", "coco"] = option("lvis", help="ground-truth format")
    masks: bool = option(False, help="add polygon / RLE masks (for segm)")


def register(sub: Verbs) -> Verbs:
    d = verb_group(sub, "detection", help="large-vocabulary detection: AP^Old, AP^Fixed, AP^Pool",
                   description="Exact lvis-api / pycocotools AP, plus AP^Fixed and AP^Pool "
                               "(Dave et al. 2021), in one pass over a results file.")

    add_verb(d, "split", SplitOptions, run=_split,
             human=lambda r: f"wrote {r['out']}: {r['calibration']} calibration and {r['test']} test images "
                             f"(sha256 {r['sha256'][:12]})",
             help="split the ground truth's images into calibration / test parts",
             description="Writes a split file (seeded, hashed): the image ids of a held-out calibration part and "
                         "of the test part. `detection run --split` fits a calibrator on the first and scores the "
                         "second; `detection score --split` scores only the test part.")

    add_verb(d, "score", ScoreOptions, run=_eval, human=_human_eval, aliases=["eval"],
             help="AP^Old, AP^Fixed and AP^Pool of a results file (alias: eval)",
             description="Scores a COCO/LVIS results JSON against COCO or LVIS v1 ground truth. LVIS ground truth: "
                         "lvis-api semantics (federated, 300 per image); COCO: pycocotools semantics (iscrowd, "
                         "maxDets 1/10/100).")

    add_run_verb(d, "run", DetectionConfig, run=_run_with_warnings, options=DetectionRunOptions, human=_human_run,
                 help="split -> calibrate on held-out images (optional) -> score -> store",
                 description="The detection pipeline for a detector's results file: with --split and --calibrate "
                             "METHOD a per-category calibrator is fitted on the split's calibration images (by "
                             "--recipe: vistabench or the authors' devil) and applied to its test images, which "
                             "are scored; without --calibrate the test images (or, without --split, all) are "
                             "scored. The record has the same shape as `detection score`'s. Every option is a "
                             "field of the run's config (--print-config shows them resolved; --config FILE reads "
                             "them).")

    add_verb(d, "rerank", RerankOptions, run=_rerank,
             human=lambda r: f"kept {r['kept']} detections, dropped {r['dropped']}; wrote {r['out']} and, beside it, "
                             f"{r['provenance']} (what was done to it: eval then records the scores as re-ranked)",
             help="keep each category's top K detections (the paper's gaming policy)",
             description="Writes the results with only the top K detections per category over the whole file "
                         "(stable: ties keep file order), and beside them NAME.provenance.json (the source file, "
                         "both sha256s, the step), so that `detection eval` and `run` of the output record its "
                         "scores as re-ranked; the table's Scores column then says so.")

    c = verb_group(d, "calibrate", help="per-category score calibration: fit / apply")
    add_verb(c, "fit", CalibrateFitOptions, run=_cal_fit,
             human=lambda r: f"fitted {r['method']} for {r['num_categories_fitted']} categories ({r['num_fit']} "
                             f"labelled detections); wrote {r['out']}",
             help="fit per-category calibrators on a held-out detection set",
             description="Labels = matched at --iou under the federated rules; one calibrator per category. "
                         "--recipe vistabench (default): labels as AP counts them, a pooled fallback for "
                         "categories with too few labels. --recipe devil: the authors' large-vocab-devil "
                         "construction (any match is a positive, unmatched not-exhaustive detections are "
                         "negatives, categories without a positive score 0; platt = Platt on logit(score), "
                         "histbin = 20 bins).")
    add_verb(c, "apply", CalibrateApplyOptions, run=_cal_apply,
             human=lambda r: f"calibrated {r['detections']} detections with {r['method']}; wrote {r['out']} and, beside "
                             f"it, {r['provenance']} (eval then records the scores as calibrated)",
             help="rewrite a results file with calibrated scores",
             description="Writes the results with each category's scores mapped by its calibrator, and beside "
                         "them NAME.provenance.json (the source file, both sha256s, the calibration), so that "
                         "`detection eval` and `run` of the output record its scores as calibrated.")

    add_verb(d, "synth", SynthOptions, run=_synth,
             human=lambda r: f"wrote {r['gt']} ({r['annotations']} annotations) and {r['results']} "
                             f"({r['detections']} detections)",
             help="write an LVIS-like synthetic ground truth and results",
             description="Long-tailed classes, federated lists, jittered true positives, false positives, "
                         "class-dependent score scales. Writes OUT/gt.json and OUT/results.json.")
    register_analysis(d)
    return d


@contextlib.contextmanager
def one_line_warnings():
    """Print the evaluator's differences from the official tools as one stderr line each."""
    import sys
    import warnings

    from ..metrics.detection import OfficialToolsDifferenceWarning

    caught: list = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", OfficialToolsDifferenceWarning)
            yield
    finally:  # outside the recording: a warning shown again here is not recorded (and seen) again
        seen = set()
        for w in list(caught):
            if str(w.message) in seen:
                continue
            seen.add(str(w.message))
            if issubclass(w.category, OfficialToolsDifferenceWarning):
                print(f"warning: {w.message}", file=sys.stderr)
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def _run_with_warnings(config, *, store=None, work_dir=None):
    from ..allocation import large_arrays
    from ..protocols.detection.runner import run

    with one_line_warnings(), large_arrays():
        return run(config, store=store, work_dir=work_dir)


def _human_run(r) -> str:
    return _human_eval(_unflatten(r["metrics"])) + (f"\nstored record {r['id']}" if r.get("id") is not None else "")


def _split(opts: SplitOptions) -> dict[str, Any]:
    from ..protocols.detection.tools import write_image_split

    return write_image_split(opts.gt, opts.out, calibration_fraction=opts.calibration_fraction, seed=opts.seed)


def _eval(opts: ScoreOptions) -> dict[str, Any] | Formatted:
    from ..allocation import large_arrays
    from ..data.coco_names import record_dataset_name
    from ..data.predictions import file_sha256_in_background
    from ..progress import step
    from ..protocols.detection.provenance import made_by
    from ..protocols.detection.runner import read_for_scoring, score, to_record

    with step("reading and evaluating"), one_line_warnings(), large_arrays():
        gt, dets = read_for_scoring(opts.results, opts.gt, opts)  # the options, checked once, are its settings
        # the record's hash of the results file, on the other core while this one evaluates (after
        # the reading, which may fork a second reader process: that needs a single thread)
        digest = file_sha256_in_background(opts.results)
        out = score(dets, gt, settings=opts, split=opts.split)
        sha = digest()
        made = made_by(opts.results, sha)  # re-ranked / calibrated by our tools
    out["settings"].update(gt=str(opts.gt), results=str(opts.results), predictions_sha256=sha, **made)
    rec = to_record(out, dataset=opts.dataset or record_dataset_name(opts.gt),
                    method=opts.method or Path(opts.results).stem, seed=opts.seed, tag=opts.tag,
                    split_hash=out["settings"].get("split_sha256"))
    ids = store_records(opts.store, rec)
    out["record_id"] = ids[0] if ids else None
    # the JSON keeps the evaluator's fractions (0-1); the text shows AP in %, as every detection view
    out["scale"] = "fractions (0-1); shown in % by the text output"
    if opts.per_class:
        return Formatted(out, opts.format, table={"sort": opts.sort or "worst", "top": opts.top})
    return Formatted(out, opts.format) if opts.errors else out


def _unflatten(metrics: dict) -> dict:
    out: dict = {}
    for key, v in metrics.items():
        variant, _, name = key.partition("_")
        if variant in ("old", "fixed", "pool") and not name.endswith("pr50"):
            out.setdefault(variant, {})[name] = v
    return out


def _human_eval(out) -> str:
    if isinstance(out, Formatted):
        d = out.data
        if out.fmt == "csv" and "per_class" in d:
            return per_class_table(d["per_class"], "csv", **out.table)
        parts = [_human_eval({k: v for k, v in d.items() if k not in ("per_class", "errors")})]
        if "errors" in d:
            parts.append(human_errors(d["errors"]))
        if "per_class" in d:
            parts.append(per_class_table(d["per_class"], out.fmt, **out.table))
        return "\n\n".join(parts)
    coco = out.get("settings", {}).get("format") == "coco"
    lines = ["AP in % (--json: fractions)"]
    undefined: dict[str, list[str]] = {}
    for v in ("old", "fixed", "pool"):
        if v not in out:
            continue
        lines.append(f"AP^{v.capitalize()}")
        for k, x in out[v].items():
            if x is None or x != x:
                if not (coco and k in ("APr", "APc", "APf")):  # COCO has no LVIS frequency groups: nothing to say
                    undefined.setdefault(k, []).append(v)
                continue
            lines.append(f"  {k:<10} {100 * x:.2f}")
    if undefined:
        lines.append("undefined (no ground truth in that group or area range), not shown: "
                     + ", ".join(f"{k} ({'/'.join(vs)})" for k, vs in undefined.items()))
    steps = out.get("settings", {}).get("steps")
    if steps:
        from ..protocols.detection.provenance import describe_steps

        lines.append(f"scores: {describe_steps(steps)}, from {out['settings']['derived_from']['path']!r} "
                     "(its provenance file; recorded so)")
    if out.get("record_id") is not None:
        lines.append(f"stored record {out['record_id']}")
    return "\n".join(lines)


def _rerank(opts: RerankOptions) -> dict[str, Any]:
    from ..protocols.detection.tools import rerank_results_file

    return rerank_results_file(opts.results, opts.out, per_class_topk=opts.per_class_topk)


def _cal_fit(opts: CalibrateFitOptions) -> dict[str, Any]:
    from ..protocols.detection.tools import fit_calibration_file

    return fit_calibration_file(opts.gt, opts.results, opts.out, opts.settings())


def _cal_apply(opts: CalibrateApplyOptions) -> dict[str, Any]:
    from ..protocols.detection.tools import apply_calibration_file

    return apply_calibration_file(opts.calibration, opts.results, opts.out)


def _synth(opts: SynthOptions) -> dict[str, Any]:
    from ..protocols.detection.tools import write_synth_set

    return write_synth_set(opts.out, num_images=opts.num_images, num_categories=opts.num_categories,
                           dets_per_image=opts.dets_per_image, seed=opts.seed, format=opts.format,
                           masks=opts.masks, detector_seed=opts.detector_seed)
