"""`vistabench detection errors | operating | confusion` and `eval --per-class`'s table: why AP is low."""

from __future__ import annotations

import argparse
import math
from typing import Any

from . import add_json_arg

ERROR_COLUMNS = ("Cls", "Loc", "Both", "Dupe", "Bkg", "Miss", "FalsePos", "FalseNeg")
TABLE_FORMATS = ("markdown", "csv")


class Formatted:
    """A handler's result plus the table format its human rendering uses (``--json`` prints the data)."""

    def __init__(self, data: dict[str, Any], fmt: str = "markdown") -> None:
        self.data, self.fmt = data, fmt

    def to_dict(self) -> dict[str, Any]:
        return self.data


def _paragraphs(*texts: str) -> str:
    import textwrap

    return "\n\n".join(textwrap.fill(t, 88) for t in texts)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gt", required=True, metavar="GT.json", help="COCO or LVIS v1 ground-truth JSON")
    p.add_argument("--results", required=True, metavar="DT.json", help="results JSON list")
    p.add_argument("--gt-format", default="auto", choices=["auto", "lvis", "coco"],
                   help="auto: LVIS when images carry neg/not-exhaustive lists, else COCO")


def _limits(p: argparse.ArgumentParser, *, tide: bool = False) -> None:
    p.add_argument("--max-dets-per-image", type=int, default=None, metavar="N",
                   help=("per-image limit of the tide variant (default: tidecv's, 100 for COCO, 300 for LVIS)" if tide
                         else "per-image limit of AP^Old (default: 300 for LVIS, none for COCO)"))
    p.add_argument("--dets-per-class", type=int, default=10_000, metavar="K",
                   help="top K per category for AP^Fixed / AP^Pool (default: 10000)")


def register_analysis(dsub: argparse._SubParsersAction) -> None:
    """Add the diagnostic verbs to `vistabench detection`."""
    e = dsub.add_parser(
        "errors", help="why AP is low: TIDE's error decomposition (dAP of fixing each error type)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=_paragraphs(
            "TIDE (Bolya et al., ECCV 2020): every false positive at IoU --pos-iou is a classification (Cls), "
            "localisation (Loc), both (Both), duplicate (Dupe) or background (Bkg) error; unrecovered ground truth "
            "is missed (Miss). Each figure is the AP gained by fixing all errors of that type (an oracle), in AP "
            "points (0-100, as TIDE); FalsePos / FalseNeg are the gains of perfect precision / recall.",
            "--ap tide: TIDE's own AP50 (equal to tidecv 1.0.1); fixed / pool: the same decomposition of AP^Fixed "
            "and AP^Pool at --pos-iou under the federated LVIS rules, with r/c/f groups on LVIS. Boxes, or masks "
            "with --iou-type segm. "
            "docs/detection.md ('Why AP is low') defines each fix."),
        epilog="example:\n  vistabench detection errors --gt lvis_v1_val.json --results dets.json --ap tide,fixed,pool")
    _common(e)
    e.add_argument("--ap", dest="variants", default="tide", metavar="LIST",
                   help="comma-separated subset of tide,fixed,pool (default: tide)")
    e.add_argument("--iou-type", default="bbox", choices=["bbox", "segm"],
                   help="box or mask IoU (segm: TIDE's mask mode; both files need 'segmentation')")
    e.add_argument("--pos-iou", type=float, default=0.5, help="foreground IoU threshold (TIDE's default 0.5)")
    e.add_argument("--bg-iou", type=float, default=0.1, help="background IoU threshold (TIDE's default 0.1)")
    _limits(e, tide=True)
    add_json_arg(e)
    e.set_defaults(handler=_errors, human=human_errors)

    o = dsub.add_parser(
        "operating", help="precision, recall and F1 at a score threshold; the best-F1 threshold per class",
        description="From the raw (not interpolated) precision-recall curve of each category at IoU --iou (the "
                    "evaluator's matches: AP^Old's or AP^Fixed's detections, federated LVIS rules): precision, recall "
                    "and F1 of the detections scoring >= --score-threshold, and the threshold of the best F1; "
                    "'overall' pools all categories. Worst best-F1 first.")
    _common(o)
    o.add_argument("--iou", type=float, default=0.5, help="IoU threshold, one of 0.5, 0.55, ..., 0.95 (default 0.5)")
    o.add_argument("--score-threshold", type=float, default=None, metavar="S",
                   help="report precision/recall/F1 at this score (default: only the best-F1 point)")
    o.add_argument("--ap", dest="variant", default="old", choices=["old", "fixed"],
                   help="whose detections: AP^Old (per-image limit) or AP^Fixed (top K per class)")
    _limits(o)
    o.add_argument("--format", default="markdown", choices=TABLE_FORMATS)
    add_json_arg(o)
    o.set_defaults(handler=_operating, human=_human_operating)

    c = dsub.add_parser(
        "confusion", help="confusion matrix of classes (class-agnostic matching at an IoU)",
        description="Detections scoring >= --score-threshold are matched to ground truth of any class (descending "
                    "score, highest IoU >= --iou); rows are ground-truth classes plus 'background' (unmatched "
                    "detections), columns detected classes plus 'missed' (unmatched ground truth). Detections in "
                    "crowd regions, and on LVIS unmatched ones of categories not verified absent, are not counted.")
    _common(c)
    c.add_argument("--iou", type=float, default=0.5, help="IoU threshold of a match (default 0.5)")
    c.add_argument("--score-threshold", type=float, default=0.5, metavar="S", help="keep detections scoring >= S (default 0.5)")
    c.add_argument("--format", default="markdown", choices=TABLE_FORMATS)
    add_json_arg(c)
    c.set_defaults(handler=_confusion, human=_human_confusion)


def _errors(args):
    from ..protocols.detection_analysis import error_decomposition

    return error_decomposition(args.results, args.gt, variants=args.variants, pos_iou=args.pos_iou, bg_iou=args.bg_iou,
                               max_dets_per_image=args.max_dets_per_image, dets_per_class=args.dets_per_class,
                               gt_format=args.gt_format, iou_type=args.iou_type)


def _num(x: Any, digits: int = 2) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _csv(header: list[str], rows: list[list[Any]]) -> str:
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue().rstrip("\n")


def error_rows(res: dict[str, Any]) -> list[list[str]]:
    """Table rows (variant, AP, then ERROR_COLUMNS) of a decomposition result, groups after their variant."""
    rows = []
    for v in ("tide", "fixed", "pool"):
        if v not in res:
            continue
        r = res[v]
        rows.append([v, _num(r["AP"])] + [_num(r[k]) for k in ERROR_COLUMNS])
        for f, g in (r.get("groups") or {}).items():
            rows.append([f"{v} ({f})", _num(g["AP"])] + [_num(g[k]) for k in ERROR_COLUMNS])
    return rows


def human_errors(res: dict[str, Any]) -> str:
    s = res["settings"]
    out = [f"dAP of fixing each error type, in AP points (0-100); AP at IoU {s['pos_iou']}, background IoU {s['bg_iou']}:",
           _markdown(["variant", "AP"] + list(ERROR_COLUMNS), error_rows(res))]
    for v in ("tide", "fixed", "pool"):
        if v in res and v != "pool":
            c = res[v]["counts"]
            out.append(f"{v} errors: " + ", ".join(f"{k} {c[k]}" for k in ERROR_COLUMNS[:6]))
    return "\n".join(out)


def _operating(args):
    from ..protocols.detection_analysis import operating_table

    return Formatted(operating_table(args.results, args.gt, iou=args.iou, score_threshold=args.score_threshold,
                                     variant=args.variant, max_dets_per_image=args.max_dets_per_image,
                                     dets_per_class=args.dets_per_class, gt_format=args.gt_format), args.format)


def _human_operating(r: Formatted) -> str:
    d = r.data
    at = d["settings"]["score_threshold"] is not None
    header = ["category", "GT", "dets"] + (["P", "R", "F1"] if at else []) + ["best F1", "at score", "P", "R"]

    def row(name, x):
        vals = [x["num_gt"], x["num_detections"]] + ([x["precision"], x["recall"], x["f1"]] if at else []) + \
               [x["best_f1"], x["best_threshold"], x["best_precision"], x["best_recall"]]
        return [name] + vals

    rows = [row(x["name"], x) for x in d["rows"]] + [row("overall", d["overall"])]
    if r.fmt == "csv":
        return _csv(header, rows)
    text = [[str(v) if isinstance(v, (int, str)) else _num(v, 3) for v in rw] for rw in rows]
    note = f"IoU {d['settings']['iou']}, AP^{d['settings']['variant'].capitalize()}'s detections" + \
           (f", score >= {d['settings']['score_threshold']}" if at else "")
    return note + "\n" + _markdown(header, text)


def _confusion(args):
    from ..protocols.detection_analysis import confusion_table

    return Formatted(confusion_table(args.results, args.gt, iou=args.iou, score_threshold=args.score_threshold,
                                     gt_format=args.gt_format), args.format)


def _human_confusion(r: Formatted) -> str:
    d = r.data
    header = ["ground truth \\ detected"] + d["columns"]
    rows = [[name] + counts for name, counts in zip(d["rows"], d["matrix"])]
    if r.fmt == "csv":
        return _csv(header, rows)
    s = d["settings"]
    return (f"IoU {s['iou']}, score >= {s['score_threshold']}: {s['matched']} matched, {s['correct']} with the right class\n"
            + _markdown(header, [[str(v) for v in rw] for rw in rows]))


PER_CLASS_HEADER = ["category", "AP", "AP50", "AP75", "recall", "GT", "dets"]


def per_class_table(pc: dict[str, Any], fmt: str = "markdown") -> str:
    """`eval --per-class`'s table (percent for AP / recall), worst first."""
    rows = [[r["name"], r["AP"], r["AP50"], r["AP75"], r["recall"], r["num_gt"], r["num_detections"]] for r in pc["rows"]]
    if fmt == "csv":
        return _csv(PER_CLASS_HEADER, rows)
    text = [[rw[0]] + [_num(100 * v if v is not None else v) for v in rw[1:5]] + [str(rw[5]), str(rw[6])] for rw in rows]
    return f"per category (AP^{pc['variant'].capitalize()}, %, worst first):\n" + _markdown(PER_CLASS_HEADER, text)
