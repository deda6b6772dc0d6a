"""`vistabench detection errors | operating | confusion` and `eval --per-class`'s table: why AP is low."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from ..config import Options, option
from .verbs import Verbs, add_verb

ERROR_COLUMNS = ("Cls", "Loc", "Both", "Dupe", "Bkg", "Miss", "FalsePos", "FalseNeg")
TableFormat = Literal["markdown", "csv"]
PerClassSort = Literal["worst", "best", "name", "gt"]


class Formatted:
    """A handler's result plus the table format its human rendering uses (``--json`` prints the data) and
    the table's own options (``table``: e.g. the per-class table's sort and top)."""

    def __init__(self, data: dict[str, Any], fmt: str = "markdown", *, table: dict[str, Any] | None = None) -> None:
        self.data, self.fmt, self.table = data, fmt, dict(table or {})

    def to_dict(self) -> dict[str, Any]:
        return self.data


def _paragraphs(*texts: str) -> str:
    import textwrap

    return "\n\n".join(textwrap.fill(t, 88) for t in texts)


@dataclass(frozen=True, kw_only=True)
class FilesOptions(Options):
    """The ground truth and the results every diagnostic reads."""

    gt: str = option(metavar="GT.json", help="COCO or LVIS v1 ground-truth JSON")
    results: str = option(metavar="DT.json", help="results JSON list")
    gt_format: Literal["auto", "lvis", "coco"] = option(
        "auto", help="auto: LVIS when images carry neg/not-exhaustive lists, else COCO")


_DETS_PER_CLASS_HELP = "top K per category for AP^Fixed / AP^Pool"


@dataclass(frozen=True, kw_only=True)
class ErrorsOptions(FilesOptions):
    """`detection errors`: :func:`~vistabench.protocols.detection.analysis.error_decomposition`'s arguments."""

    variants: str = option("tide", flags=("--ap",), metavar="LIST", help="comma-separated subset of tide,fixed,pool")
    iou_type: Literal["bbox", "segm"] = option(
        "bbox", help="box or mask IoU (segm: TIDE's mask mode; both files need 'segmentation')")
    pos_iou: float = option(0.5, help="foreground IoU threshold (TIDE's default 0.5)")
    bg_iou: float = option(0.1, help="background IoU threshold (TIDE's default 0.1)")
    max_dets_per_image: int | None = option(
        None, low=1, metavar="N",
        help="per-image limit of the tide variant (default: tidecv's, 100 for COCO, 300 for LVIS)")
    dets_per_class: int = option(10_000, low=1, metavar="K", help=_DETS_PER_CLASS_HELP)


@dataclass(frozen=True, kw_only=True)
class OperatingOptions(FilesOptions):
    """`detection operating`: :func:`~vistabench.protocols.detection.analysis.operating_table`'s arguments."""

    iou: float = option(0.5, help="IoU threshold, one of 0.5, 0.55, ..., 0.95")
    score_threshold: float | None = option(
        None, metavar="S", help="report precision/recall/F1 at this score (default: only the best-F1 point)")
    variant: Literal["old", "fixed"] = option(
        "old", flags=("--ap",), help="whose detections: AP^Old (per-image limit) or AP^Fixed (top K per class)")
    max_dets_per_image: int | None = option(
        None, low=1, metavar="N", help="per-image limit of AP^Old (default: 300 for LVIS, none for COCO)")
    dets_per_class: int = option(10_000, low=1, metavar="K", help=_DETS_PER_CLASS_HELP)
    format: TableFormat = option("markdown", help="table format")


@dataclass(frozen=True, kw_only=True)
class ConfusionOptions(FilesOptions):
    """`detection confusion`: :func:`~vistabench.protocols.detection.analysis.confusion_table`'s arguments."""

    iou: float = option(0.5, help="IoU threshold of a match")
    score_threshold: float = option(0.5, metavar="S", help="keep detections scoring >= S")
    format: TableFormat = option("markdown", help="table format")


def register_analysis(d: Verbs) -> None:
    """Add the diagnostic verbs to `vistabench detection`."""
    add_verb(d, "errors", ErrorsOptions, run=_errors, human=human_errors,
             help="why AP is low: TIDE's error decomposition (dAP of fixing each error type)",
             description=_paragraphs(
                 "TIDE (Bolya et al., ECCV 2020): every false positive at IoU --pos-iou is a classification (Cls), "
                 "localisation (Loc), both (Both), duplicate (Dupe) or background (Bkg) error; unrecovered ground "
                 "truth is missed (Miss). Each figure is the AP gained by fixing all errors of that type (an "
                 "oracle), in points of AP % (0-100, as TIDE, and as `detection eval` shows AP); FalsePos / FalseNeg "
                 "are the gains of perfect precision / "
                 "recall.",
                 "--ap tide: TIDE's own AP50 (equal to tidecv 1.0.1); fixed / pool: the same decomposition of "
                 "AP^Fixed and AP^Pool at --pos-iou under the federated LVIS rules, with r/c/f groups on LVIS. "
                 "Boxes, or masks with --iou-type segm. docs/detection.md ('Why AP is low') defines each fix.")
             + "\n\nexample:\n  vistabench detection errors --gt lvis_v1_val.json --results dets.json "
               "--ap tide,fixed,pool")

    add_verb(d, "operating", OperatingOptions, run=_operating, human=_human_operating,
             help="precision, recall and F1 at a score threshold; the best-F1 threshold per class",
             description="From the raw (not interpolated) precision-recall curve of each category at IoU --iou "
                         "(the evaluator's matches: AP^Old's or AP^Fixed's detections, federated LVIS rules): "
                         "precision, recall and F1 of the detections scoring >= --score-threshold, and the "
                         "threshold of the best F1; 'overall' pools all categories. Worst best-F1 first.")

    add_verb(d, "confusion", ConfusionOptions, run=_confusion, human=_human_confusion,
             help="confusion matrix of classes (class-agnostic matching at an IoU)",
             description="Detections scoring >= --score-threshold are matched to ground truth of any class "
                         "(descending score, highest IoU >= --iou); rows are ground-truth classes plus 'background' "
                         "(unmatched detections), columns detected classes plus 'missed' (unmatched ground truth). "
                         "Detections in crowd regions, and on LVIS unmatched ones of categories not verified "
                         "absent, are not counted.")


def _errors(opts: ErrorsOptions) -> dict[str, Any]:
    from ..protocols.detection.analysis import error_decomposition

    return error_decomposition(opts.results, opts.gt, variants=opts.variants, pos_iou=opts.pos_iou, bg_iou=opts.bg_iou,
                               max_dets_per_image=opts.max_dets_per_image, dets_per_class=opts.dets_per_class,
                               gt_format=opts.gt_format, iou_type=opts.iou_type)


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
            if g["AP"] is None or g["AP"] != g["AP"]:  # no category of the group has ground truth
                continue
            rows.append([f"{v} ({f})", _num(g["AP"])] + [_num(g[k]) for k in ERROR_COLUMNS])
    return rows


def human_errors(res: dict[str, Any]) -> str:
    s = res["settings"]
    out = [f"AP in % and dAP of fixing each error type in points of AP % (0-100, the unit of `detection eval`); "
           f"AP at IoU {s['pos_iou']}, background IoU {s['bg_iou']}:",
           _markdown(["variant", "AP"] + list(ERROR_COLUMNS), error_rows(res))]
    for v in ("tide", "fixed", "pool"):
        if v in res and v != "pool":
            c = res[v]["counts"]
            out.append(f"{v} errors: " + ", ".join(f"{k} {c[k]}" for k in ERROR_COLUMNS[:6]))
    return "\n".join(out)


def _operating(opts: OperatingOptions) -> Formatted:
    from ..protocols.detection.analysis import operating_table

    return Formatted(operating_table(opts.results, opts.gt, iou=opts.iou, score_threshold=opts.score_threshold,
                                     variant=opts.variant, max_dets_per_image=opts.max_dets_per_image,
                                     dets_per_class=opts.dets_per_class, gt_format=opts.gt_format), opts.format)


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


def _confusion(opts: ConfusionOptions) -> Formatted:
    from ..protocols.detection.analysis import confusion_table

    return Formatted(confusion_table(opts.results, opts.gt, iou=opts.iou, score_threshold=opts.score_threshold,
                                     gt_format=opts.gt_format), opts.format)


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


_SORT_WORDS = {"worst": "worst first", "best": "best first", "name": "by name", "gt": "most ground truth first"}


def _ordered(rows: list[dict[str, Any]], sort: str) -> list[dict[str, Any]]:
    """Per-class rows in ``sort`` order; a category without a defined AP (no ground truth) last."""
    undefined = lambda r: r["AP"] is None or r["AP"] != r["AP"]  # noqa: E731
    if sort == "name":
        return sorted(rows, key=lambda r: str(r["name"]))
    if sort == "gt":
        return sorted(rows, key=lambda r: -(r["num_gt"] or 0))
    sign = 1 if sort == "worst" else -1
    return sorted(rows, key=lambda r: (undefined(r), 0.0 if undefined(r) else sign * r["AP"]))


def per_class_table(pc: dict[str, Any], fmt: str = "markdown", *, sort: str = "worst", top: int | None = None) -> str:
    """`eval --per-class`'s table (AP / recall in %, the CSV keeps fractions) in ``sort`` order
    (:data:`PerClassSort`), its first ``top`` rows (None: all)."""
    if sort not in _SORT_WORDS:
        raise ValueError(f"sort: expected one of {', '.join(_SORT_WORDS)}, got {sort!r}")
    chosen = _ordered(list(pc["rows"]), sort)[:top]
    rows = [[r["name"], r["AP"], r["AP50"], r["AP75"], r["recall"], r["num_gt"], r["num_detections"]] for r in chosen]
    if fmt == "csv":
        return _csv(PER_CLASS_HEADER, rows)
    text = [[rw[0]] + [_num(100 * v if v is not None else v) for v in rw[1:5]] + [str(rw[5]), str(rw[6])] for rw in rows]
    shown = f", the first {len(rows)} of {len(pc['rows'])}" if top is not None and top < len(pc["rows"]) else ""
    return (f"per category (AP^{pc['variant'].capitalize()}, %, {_SORT_WORDS[sort]}{shown}):\n"
            + _markdown(PER_CLASS_HEADER, text))
