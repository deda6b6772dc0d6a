"""`vistabench detection ...`: split, score (alias eval), run, rerank, calibrate fit/apply, synth; errors,
operating, confusion (cli/detection_analysis.py)."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

from . import add_json_arg, add_record_args, add_store_arg, int_arg, store_records
from ..protocols.detection_config import DetectionConfig
from .configured import add_config_options, run_verb
from .detection_analysis import TABLE_FORMATS, Formatted, human_errors, per_class_table, register_analysis


def register(sub: argparse._SubParsersAction) -> argparse._SubParsersAction:
    p = sub.add_parser("detection", help="large-vocabulary detection: AP^Old, AP^Fixed, AP^Pool",
                       description="Exact lvis-api / pycocotools AP, plus AP^Fixed and AP^Pool "
                                   "(Dave et al. 2021), in one pass over a results file.")
    dsub = p.add_subparsers(dest="verb", metavar="VERB")
    dsub.required = True

    sp = dsub.add_parser("split", help="split the ground truth's images into calibration / test parts",
                         description="Writes a split file (seeded, hashed): the image ids of a held-out "
                                     "calibration part and of the test part. `detection run --split` fits a "
                                     "calibrator on the first and scores the second; `detection score "
                                     "--split` scores only the test part.")
    sp.add_argument("--gt", required=True, metavar="GT.json", help="COCO or LVIS v1 ground-truth JSON")
    sp.add_argument("--calibration-fraction", type=float, default=0.5, help="share of images held out (default 0.5)")
    sp.add_argument("--seed", type=int_arg, default=0)
    sp.add_argument("--out", required=True, metavar="SPLIT.json")
    add_json_arg(sp)
    sp.set_defaults(handler=_split, human=lambda r: f"wrote {r['out']}: {r['calibration']} calibration and "
                                                     f"{r['test']} test images (sha256 {r['sha256'][:12]})")

    e = dsub.add_parser("score", aliases=["eval"], help="AP^Old, AP^Fixed and AP^Pool of a results file (alias: eval)",
                        description="Scores a COCO/LVIS results JSON against COCO or LVIS v1 ground truth. "
                                    "LVIS ground truth: lvis-api semantics (federated, 300 per image); COCO: "
                                    "pycocotools semantics (iscrowd, maxDets 1/10/100).")
    e.add_argument("--gt", required=True, metavar="GT.json", help="COCO or LVIS v1 ground-truth JSON")
    e.add_argument("--results", required=True, metavar="DT.json", help="results JSON list")
    e.add_argument("--iou-type", default="bbox", choices=["bbox", "segm", "keypoints"],
                   help="overlap: box IoU, mask IoU (results need 'segmentation') or keypoint OKS as pycocotools' "
                        "iouType='keypoints' (COCO ground truth with 'keypoints' and 'num_keypoints'; areas all/"
                        "medium/large, 20 detections per image and category); default bbox")
    e.add_argument("--kpt-oks-sigmas", metavar="LIST", default=None,
                   help="with --iou-type keypoints: comma-separated OKS sigma per keypoint, in keypoint order "
                        "(default: COCO's 17 person-keypoint sigmas)")
    e.add_argument("--ap", dest="variants", default="old,fixed,pool", metavar="LIST",
                   help="comma-separated subset of old,fixed,pool (default: all three)")
    e.add_argument("--max-dets-per-image", type=int_arg, default=None, metavar="N",
                   help="per-image limit of AP^Old (default: 300 for LVIS, none for COCO)")
    e.add_argument("--dets-per-class", type=int_arg, default=10_000, metavar="K",
                   help="top K per category for AP^Fixed / AP^Pool (default: 10000)")
    e.add_argument("--gt-format", default="auto", choices=["auto", "lvis", "coco"],
                   help="auto: LVIS when images carry neg/not-exhaustive lists, else COCO")
    e.add_argument("--allow-empty", action="store_true",
                   help="score an empty results list (AP 0) instead of refusing it")
    e.add_argument("--split", metavar="SPLIT.json", help="score only the test images of this split file")
    e.add_argument("--per-class", action="store_true",
                   help="also AP, AP50, AP75, recall, ground truths and detections per category, worst first (of "
                        "AP^Old, or AP^Fixed when --ap has no old; boxes); stored with the record")
    e.add_argument("--errors", action="store_true",
                   help="also TIDE's error decomposition (as `detection errors --ap tide[,fixed,pool]`); stored "
                        "with the record, shown in the report")
    e.add_argument("--format", default="markdown", choices=TABLE_FORMATS,
                   help="the per-class table's format (csv: only that table)")
    add_record_args(e, what="results", dataset_default="the ground-truth file's name")
    add_store_arg(e)
    add_json_arg(e)
    e.set_defaults(handler=_eval, human=_human_eval)

    rn = dsub.add_parser("run", help="split -> calibrate on held-out images (optional) -> score -> store",
                         description="The detection pipeline for a detector's results file: with --split and "
                                     "--calibrate METHOD a per-category calibrator is fitted on the split's "
                                     "calibration images (by --recipe: vistabench or the authors' devil) and "
                                     "applied to its test images, which are scored; without --calibrate the test "
                                     "images (or, without --split, all) are scored. The record has the same shape "
                                     "as `detection score`'s. Every option is a field of the run's config "
                                     "(--print-config shows them resolved; --config FILE reads them).")
    add_config_options(rn, DetectionConfig)
    rn.add_argument("--out", metavar="DIR", help="folder for the run's files (the fitted calibration.json)")
    add_store_arg(rn)
    add_json_arg(rn)
    handler, _ = run_verb(DetectionConfig, _run_with_warnings)
    rn.set_defaults(handler=handler, human=_human_run)

    r = dsub.add_parser("rerank", help="keep each category's top K detections (the paper's gaming policy)",
                        description="Writes the results with only the top K detections per category over "
                                    "the whole file (stable: ties keep file order).")
    r.add_argument("--results", required=True, metavar="DT.json")
    r.add_argument("--per-class-topk", required=True, type=int_arg, metavar="K")
    r.add_argument("--out", required=True, metavar="OUT.json")
    add_json_arg(r)
    r.set_defaults(handler=_rerank, human=lambda r: f"kept {r['kept']} detections, dropped {r['dropped']}; "
                                                    f"wrote {r['out']}")

    c = dsub.add_parser("calibrate", help="per-category score calibration: fit / apply")
    csub = c.add_subparsers(dest="calib_verb", metavar="fit|apply")
    csub.required = True
    f = csub.add_parser("fit", help="fit per-category calibrators on a held-out detection set",
                        description="Labels = matched at --iou under the federated rules; one calibrator "
                                    "per category. --recipe vistabench (default): labels as AP counts them, "
                                    "a pooled fallback for categories with too few labels. --recipe devil: "
                                    "the authors' large-vocab-devil construction (any match is a positive, "
                                    "unmatched not-exhaustive detections are negatives, categories without a "
                                    "positive score 0; platt = Platt on logit(score), histbin = 20 bins).")
    f.add_argument("--gt", required=True, metavar="GT.json")
    f.add_argument("--results", required=True, metavar="DT.json")
    f.add_argument("--method", default="platt", metavar="NAME",
                   help="histbin, isotonic, platt, beta or bbq (devil recipe: platt or histbin); default platt")
    f.add_argument("--recipe", default="vistabench", choices=["vistabench", "devil"],
                   help="label construction, fallbacks and ties (default: vistabench; see docs/detection.md)")
    f.add_argument("--iou", dest="iou_threshold", help="IoU threshold of the labels (default 0.75)")
    f.add_argument("--min-samples", help="vistabench recipe: pooled fallback below this many labels (default 20)")
    f.add_argument("--bins", help="histbin's bins (default: vistabench 10 equal-mass, devil 20 equal-width)")
    f.add_argument("--dets-per-class", help="top K per category labelled (default 10000)")
    f.add_argument("--iou-type", choices=["auto", "bbox", "segm"],
                   help="overlap of the labels (default: vistabench bbox; devil auto = segm when the results "
                        "carry masks)")
    f.add_argument("--out", required=True, metavar="CAL.json")
    add_json_arg(f)
    f.set_defaults(handler=_cal_fit, human=lambda r: f"fitted {r['method']} for {r['num_categories_fitted']} "
                                                     f"categories ({r['num_fit']} labelled detections); wrote {r['out']}")

    a = csub.add_parser("apply", help="rewrite a results file with calibrated scores")
    a.add_argument("--calibration", required=True, metavar="CAL.json")
    a.add_argument("--results", required=True, metavar="DT.json")
    a.add_argument("--out", required=True, metavar="OUT.json")
    add_json_arg(a)
    a.set_defaults(handler=_cal_apply, human=lambda r: f"calibrated {r['detections']} detections with "
                                                       f"{r['method']}; wrote {r['out']}")

    s = dsub.add_parser("synth", help="write an LVIS-like synthetic ground truth and results",
                        description="Long-tailed classes, federated lists, jittered true positives, false "
                                    "positives, class-dependent score scales. Writes OUT/gt.json and "
                                    "OUT/results.json.")
    s.add_argument("--out", required=True, metavar="DIR")
    s.add_argument("--images", type=int_arg, default=200)
    s.add_argument("--categories", type=int_arg, default=100)
    s.add_argument("--dets-per-image", type=int_arg, default=100)
    s.add_argument("--seed", type=int_arg, default=0)
    s.add_argument("--detector-seed", type=int_arg, default=None)
    s.add_argument("--format", default="lvis", choices=["lvis", "coco"])
    s.add_argument("--masks", action="store_true", help="add polygon / RLE masks (for segm)")
    add_json_arg(s)
    s.set_defaults(handler=_synth, human=lambda r: f"wrote {r['gt']} ({r['annotations']} annotations) and "
                                                   f"{r['results']} ({r['detections']} detections)")
    register_analysis(dsub)
    return dsub


@contextlib.contextmanager
def one_line_warnings():
    """Print the evaluator's differences from the official tools as one stderr line each."""
    import sys
    import warnings

    from ..metrics.detection import OfficialToolsDifferenceWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", OfficialToolsDifferenceWarning)
        try:
            yield
        finally:
            seen = set()
            for w in caught:
                if issubclass(w.category, OfficialToolsDifferenceWarning) and str(w.message) not in seen:
                    seen.add(str(w.message))
                    print(f"warning: {w.message}", file=sys.stderr)
                elif not issubclass(w.category, OfficialToolsDifferenceWarning):
                    warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def _run_with_warnings(config, *, store=None, work_dir=None):
    from ..protocols.detection import run

    with one_line_warnings():
        return run(config, store=store, work_dir=work_dir)


def _human_run(r) -> str:
    return _human_eval(_unflatten(r["metrics"])) + (f"\nstored record {r['id']}" if r.get("id") is not None else "")


def _split(args):
    from ..protocols.detection_tools import write_image_split

    return write_image_split(args.gt, args.out, calibration_fraction=args.calibration_fraction, seed=args.seed)


def _eval(args):
    from ..progress import step
    from ..protocols.detection import score, to_record

    with step("reading and evaluating"), one_line_warnings():
        out = score(args.results, args.gt, iou_type=args.iou_type, variants=args.variants, gt_format=args.gt_format,
                    max_dets_per_image=args.max_dets_per_image, dets_per_class=args.dets_per_class,
                    split=args.split, allow_empty=args.allow_empty, kpt_oks_sigmas=_sigmas(args),
                    per_class=args.per_class, errors=args.errors)
    out["settings"].update(gt=str(args.gt), results=str(args.results))
    rec = to_record(out, dataset=args.dataset or Path(args.gt).stem,
                    method=args.method or Path(args.results).stem, seed=args.seed, tag=args.tag,
                    split_hash=out["settings"].get("split_sha256"))
    ids = store_records(args.store, rec)
    out["record_id"] = ids[0] if ids else None
    return Formatted(out, args.format) if args.per_class or args.errors else out


def _sigmas(args) -> list[float] | None:
    """``--kpt-oks-sigmas`` as floats (only with ``--iou-type keypoints``); one line on bad input."""
    from ..errors import InputError

    text = args.kpt_oks_sigmas
    if text is None:
        return None
    if args.iou_type != "keypoints":
        raise InputError(f"--kpt-oks-sigmas: only used with --iou-type keypoints, got --iou-type {args.iou_type}")
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"--kpt-oks-sigmas: expected comma-separated numbers, got {text!r}") from None
    if not values:
        raise InputError("--kpt-oks-sigmas: expected at least one sigma")
    return values


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
            return per_class_table(d["per_class"], "csv")
        parts = [_human_eval({k: v for k, v in d.items() if k not in ("per_class", "errors")})]
        if "errors" in d:
            parts.append(human_errors(d["errors"]))
        if "per_class" in d:
            parts.append(per_class_table(d["per_class"], out.fmt))
        return "\n\n".join(parts)
    lines = []
    for v in ("old", "fixed", "pool"):
        if v not in out:
            continue
        lines.append(f"AP^{v.capitalize()}")
        for k, x in out[v].items():
            lines.append(f"  {k:<10} {'n/a' if x is None or x != x else f'{x:.4f}'}")
    if out.get("record_id") is not None:
        lines.append(f"stored record {out['record_id']}")
    return "\n".join(lines)


def _rerank(args):
    from ..protocols.detection_tools import rerank_results_file

    return rerank_results_file(args.results, args.out, per_class_topk=args.per_class_topk)


_FIT_FIELDS = ("method", "recipe", "iou_threshold", "min_samples", "bins", "dets_per_class", "iou_type")


def _cal_fit(args):
    from ..protocols.detection_tools import fit_calibration_file

    given = {k: getattr(args, k) for k in _FIT_FIELDS if getattr(args, k) is not None}
    return fit_calibration_file(args.gt, args.results, args.out, given)


def _cal_apply(args):
    from ..protocols.detection_tools import apply_calibration_file

    return apply_calibration_file(args.calibration, args.results, args.out)


def _synth(args):
    from ..protocols.detection_tools import write_synth_set

    return write_synth_set(args.out, num_images=args.images, num_categories=args.categories,
                           dets_per_image=args.dets_per_image, seed=args.seed, format=args.format,
                           masks=args.masks, detector_seed=args.detector_seed)
