"""`vistabench detection ...`: split, score (alias eval), run, rerank, calibrate fit/apply, synth."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

from . import add_json_arg, add_record_args, add_store_arg, store_records
from ..errors import InputError


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
    sp.add_argument("--seed", type=int, default=0)
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
    e.add_argument("--iou-type", default="bbox", choices=["bbox", "segm"])
    e.add_argument("--ap", default="old,fixed,pool", metavar="LIST",
                   help="comma-separated subset of old,fixed,pool (default: all three)")
    e.add_argument("--max-dets-per-image", type=int, default=None, metavar="N",
                   help="per-image limit of AP^Old (default: 300 for LVIS, none for COCO)")
    e.add_argument("--dets-per-class", type=int, default=10_000, metavar="K",
                   help="top K per category for AP^Fixed / AP^Pool (default: 10000)")
    e.add_argument("--gt-format", default="auto", choices=["auto", "lvis", "coco"],
                   help="auto: LVIS when images carry neg/not-exhaustive lists, else COCO")
    e.add_argument("--allow-empty", action="store_true",
                   help="score an empty results list (AP 0) instead of refusing it")
    e.add_argument("--split", metavar="SPLIT.json", help="score only the test images of this split file")
    add_record_args(e, what="results", dataset_default="the ground-truth file's name")
    add_store_arg(e)
    add_json_arg(e)
    e.set_defaults(handler=_eval, human=_human_eval)

    rn = dsub.add_parser("run", help="split -> calibrate on held-out images (optional) -> score -> store",
                         description="The detection pipeline for a detector's results file: with --split and "
                                     "--calibrate METHOD a per-category calibrator is fitted on the split's "
                                     "calibration images and applied to its test images, which are scored; "
                                     "without --calibrate the test images (or, without --split, all) are scored. "
                                     "The record has the same shape as `detection score`'s.")
    rn.add_argument("--gt", required=True, metavar="GT.json")
    rn.add_argument("--results", required=True, metavar="DT.json")
    rn.add_argument("--split", metavar="SPLIT.json", help="split file from `detection split`")
    rn.add_argument("--calibrate", metavar="METHOD", help="fit and apply this calibration method (needs --split)")
    rn.add_argument("--iou-type", default="bbox", choices=["bbox", "segm"])
    rn.add_argument("--max-dets-per-image", type=int, default=None, metavar="N")
    rn.add_argument("--dets-per-class", type=int, default=10_000, metavar="K")
    add_record_args(rn, what="results", dataset_default="the ground-truth file's name")
    add_store_arg(rn)
    add_json_arg(rn)
    rn.set_defaults(handler=_run, human=lambda r: _human_eval(_unflatten(r["metrics"])) +
                    (f"\nstored record {r['id']}" if r.get("id") is not None else ""))

    r = dsub.add_parser("rerank", help="keep each category's top K detections (the paper's gaming policy)",
                        description="Writes the results with only the top K detections per category over "
                                    "the whole file (stable: ties keep file order).")
    r.add_argument("--results", required=True, metavar="DT.json")
    r.add_argument("--per-class-topk", required=True, type=int, metavar="K")
    r.add_argument("--out", required=True, metavar="OUT.json")
    add_json_arg(r)
    r.set_defaults(handler=_rerank)

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
                   help="label construction and fallbacks (default: vistabench; see docs/detection.md)")
    f.add_argument("--iou", type=float, default=0.75, help="IoU threshold of the labels (default 0.75)")
    f.add_argument("--min-samples", type=int, default=20)
    f.add_argument("--dets-per-class", type=int, default=10_000)
    f.add_argument("--iou-type", default="bbox", choices=["bbox", "segm"])
    f.add_argument("--out", required=True, metavar="CAL.json")
    add_json_arg(f)
    f.set_defaults(handler=_cal_fit)

    a = csub.add_parser("apply", help="rewrite a results file with calibrated scores")
    a.add_argument("--calibration", required=True, metavar="CAL.json")
    a.add_argument("--results", required=True, metavar="DT.json")
    a.add_argument("--out", required=True, metavar="OUT.json")
    add_json_arg(a)
    a.set_defaults(handler=_cal_apply)

    s = dsub.add_parser("synth", help="write an LVIS-like synthetic ground truth and results",
                        description="Long-tailed classes, federated lists, jittered true positives, false "
                                    "positives, class-dependent score scales. Writes OUT/gt.json and "
                                    "OUT/results.json.")
    s.add_argument("--out", required=True, metavar="DIR")
    s.add_argument("--images", type=int, default=200)
    s.add_argument("--categories", type=int, default=100)
    s.add_argument("--dets-per-image", type=int, default=100)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--detector-seed", type=int, default=None)
    s.add_argument("--format", default="lvis", choices=["lvis", "coco"])
    s.add_argument("--masks", action="store_true", help="add polygon / RLE masks (for segm)")
    add_json_arg(s)
    s.set_defaults(handler=_synth)
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


def _variants(text: str) -> list[str]:
    v = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in v if x not in ("old", "fixed", "pool")]
    if bad or not v:
        raise InputError(f"--ap: expected a comma-separated subset of old,fixed,pool, got {text!r}")
    return v


def _read_split(path: str | None):
    if path is None:
        return None
    from ..data.splits import read_split
    from ..protocols.detection import SPLIT_KIND

    return read_split(path, kind=SPLIT_KIND)


def _split(args):
    from ..data.splits import write_split
    from ..protocols.detection import build_image_split

    from .._validation import check_fraction

    check_fraction(args.calibration_fraction, "--calibration-fraction")
    split = build_image_split(args.gt, calibration_fraction=args.calibration_fraction, seed=args.seed)
    write_split(args.out, split)
    return {"out": args.out, "calibration": len(split["calibration"]), "test": len(split["test"]),
            "sha256": split["sha256"]}


def _eval(args):
    from ..progress import step
    from ..protocols.detection import score, to_record

    from .._validation import check_int

    variants = _variants(args.ap)
    check_int(args.dets_per_class, "--dets-per-class", min=1)
    check_int(args.max_dets_per_image, "--max-dets-per-image", min=1, allow_none=True)
    split = _read_split(args.split)
    with step("reading and evaluating"), one_line_warnings():
        out = score(args.results, args.gt, iou_type=args.iou_type, variants=variants, gt_format=args.gt_format,
                    max_dets_per_image=args.max_dets_per_image, dets_per_class=args.dets_per_class, split=split,
                    allow_empty=args.allow_empty)
    out["settings"].update(gt=str(args.gt), results=str(args.results))
    rec = to_record(out, dataset=args.dataset or Path(args.gt).stem,
                    method=args.method or Path(args.results).stem, seed=args.seed, tag=args.tag,
                    split_hash=None if split is None else split["sha256"])
    ids = store_records(args.store, rec)
    out["record_id"] = ids[0] if ids else None
    return out


def _run(args):
    from contextlib import nullcontext

    from ..protocols.detection import run
    from ..store import ResultsStore

    if args.calibrate is not None and args.split is None:
        raise InputError("--calibrate needs --split: the calibrator is fitted on the split's held-out images")
    split = _read_split(args.split)
    with (ResultsStore(args.store) if args.store else nullcontext()) as store, one_line_warnings():
        return run(ground_truth=args.gt, results=args.results, split=split, calibration=args.calibrate,
                   iou_type=args.iou_type, max_dets_per_image=args.max_dets_per_image,
                   dets_per_class=args.dets_per_class, store=store, tag=args.tag,
                   dataset=args.dataset or Path(args.gt).stem,
                   method=args.method or Path(args.results).stem)


def _unflatten(metrics: dict) -> dict:
    out: dict = {}
    for key, v in metrics.items():
        variant, _, name = key.partition("_")
        if variant in ("old", "fixed", "pool") and not name.endswith("pr50"):
            out.setdefault(variant, {})[name] = v
    return out


def _human_eval(out) -> str:
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
    import numpy as np

    from ..data.coco import read_result_columns, write_result_columns
    from ..metrics.detection import rank_within
    from .._validation import check_positive

    k = check_positive(args.per_class_topk, "--per-class-topk", integer=True)
    c = read_result_columns(args.results, keep_segmentation=True)
    keep = np.flatnonzero(rank_within(c["category_id"], c["score"]) < k)
    seg = None if c["segmentation"] is None else [c["segmentation"][i] for i in keep]
    write_result_columns(args.out, c["image_id"][keep], c["category_id"][keep], c["bbox"][keep], c["score"][keep], seg)
    out = {"results": args.results, "out": args.out, "per_class_topk": k, "kept": int(len(keep)),
           "dropped": int(len(c["score"]) - len(keep))}
    if not args.json:
        print(f"kept {out['kept']} detections, dropped {out['dropped']}; wrote {args.out}")
        return None
    return out


def _cal_fit(args):
    from ..data.coco import read_ground_truth, read_results
    from ..protocols.detection import calibrate_detections

    from .._validation import check_int

    check_int(args.min_samples, "--min-samples", min=1)
    check_int(args.dets_per_class, "--dets-per-class", min=1)
    if not 0 < args.iou <= 1:
        raise InputError(f"--iou: expected an IoU threshold in (0, 1], got {args.iou}")
    gt = read_ground_truth(args.gt, with_segmentation=args.iou_type == "segm")
    dets = read_results(args.results, gt, iou_type=args.iou_type)
    if args.recipe != "devil":
        from ..protocols.detection_calibration import calibrators

        calibrators.get(args.method)  # unknown names: one line with close matches
    cal = calibrate_detections(gt, dets, method=args.method, iou_threshold=args.iou,
                               min_samples=args.min_samples, dets_per_class=args.dets_per_class,
                               recipe=args.recipe, iou_type=args.iou_type)
    cal.save(args.out)
    out = {"out": args.out, "method": cal.method, **cal.settings}
    if not args.json:
        print(f"fitted {cal.method} for {cal.settings['num_categories_fitted']} categories "
              f"({cal.settings['num_fit']} labelled detections); wrote {args.out}")
        return None
    return out


def _cal_apply(args):
    from . import read_json_file
    from ..data.coco import read_result_columns, write_result_columns
    from ..protocols.detection_calibration import Calibration, apply_calibration

    cal = Calibration.from_json(read_json_file(args.calibration, "--calibration"), "--calibration")
    c = read_result_columns(args.results, keep_segmentation=True)
    score = apply_calibration(cal, c["score"], c["category_id"])
    write_result_columns(args.out, c["image_id"], c["category_id"], c["bbox"], score, c["segmentation"])
    out = {"out": args.out, "method": cal.method, "detections": int(len(score))}
    if not args.json:
        print(f"calibrated {len(score)} detections with {cal.method}; wrote {args.out}")
        return None
    return out


def _synth(args):
    import json

    from ..data.detection_synth import synth_detection_set

    s = synth_detection_set(num_images=args.images, num_categories=args.categories,
                            dets_per_image=args.dets_per_image, seed=args.seed, format=args.format,
                            masks=args.masks, detector_seed=args.detector_seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gt.json").write_text(json.dumps(s.ground_truth), encoding="utf-8")
    (out / "results.json").write_text(json.dumps(s.results), encoding="utf-8")
    res = {"gt": str(out / "gt.json"), "results": str(out / "results.json"),
           "annotations": len(s.ground_truth["annotations"]), "detections": len(s.results), **s.settings}
    if not args.json:
        print(f"wrote {res['gt']} ({res['annotations']} annotations) and {res['results']} "
              f"({res['detections']} detections)")
        return None
    return res
