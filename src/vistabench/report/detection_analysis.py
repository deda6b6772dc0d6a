"""The detection report's "why AP is low" part: TIDE's error decomposition and the worst categories of
the latest record that carries them (``errors`` / ``per_class`` metrics, e.g. the demo's baseline)."""

from __future__ import annotations

from typing import Any

from ..store import Record
from .html import Section
from .plotstyle import legend_outside
from .tables import Column, Table

ERROR_COLUMNS = ("Cls", "Loc", "Both", "Dupe", "Bkg", "Miss", "FalsePos", "FalseNeg")
VARIANT_TITLES = {"tide": "TIDE (AP50)", "fixed": "AP^Fixed", "pool": "AP^Pool"}


#: the worst-categories table shows only categories with at least this many ground-truth objects: the
#: AP of a category with one to a few objects is 0 or 100 by chance and says nothing about the detector
MIN_GT_WORST = 10


def error_table(errors: dict[str, Any]) -> Table:
    """ΔAP per error type (AP points: AP in %), one row per variant and, on LVIS, per frequency group
    that has ground truth (COCO data has no frequency groups: no such rows)."""
    rows = []
    for v in ("tide", "fixed", "pool"):
        if v not in errors:
            continue
        r = errors[v]
        rows.append({"variant": VARIANT_TITLES[v], "AP": r["AP"], **{k: r[k] for k in ERROR_COLUMNS}})
        groups = r.get("groups") or {}
        for f, g in sorted(groups.items(), key=lambda kv: "rcf".index(kv[0]) if kv[0] in "rcf" else 3):
            if g.get("AP") is None or g["AP"] != g["AP"]:  # no category of the group has ground truth
                continue
            rows.append({"variant": f"{VARIANT_TITLES[v]} {f}", "AP": g["AP"], **{k: g[k] for k in ERROR_COLUMNS}})
    cols = [Column("AP", "AP (%)", None, percent=False)] + [Column(k, f"Δ{k}", None, percent=False)
                                                            for k in ERROR_COLUMNS]
    iou = errors.get("settings", {}).get("pos_iou", 0.5)
    return Table(columns=cols, rows=rows, row_key="variant", row_title="variant",
                 caption=f"AP (%) at IoU {iou} and the AP gained by fixing each error type (ΔX, in points of "
                         "AP %; an oracle, TIDE).")


def worst_classes_table(per_class: dict[str, Any], n: int = 10, *, min_gt: int = MIN_GT_WORST) -> Table:
    """The ``n`` categories with the lowest AP, in %, among those with at least ``min_gt`` ground-truth
    objects (fewer: an AP of 0 or 100 by chance)."""
    rows = [dict(r, category=r["name"]) for r in per_class["rows"] if r["AP"] is not None and r["AP"] == r["AP"]
            and (r.get("num_gt") or 0) >= min_gt][:n]
    cols = [Column("AP", "AP", None), Column("AP50", "AP50", None), Column("AP75", "AP75", None),
            Column("recall", "recall", None), Column("num_gt", "GT", None, percent=False, digits=0),
            Column("num_detections", "detections", None, percent=False, digits=0)]
    return Table(columns=cols, rows=rows, row_key="category", row_title="category",
                 caption=f"The {len(rows)} categories with the lowest AP^{per_class['variant'].capitalize()} (%) "
                         f"among those with at least {min_gt} ground-truth objects.")


def add_diagnostics(sec: Section, recs: list[Record]) -> None:
    """Append the error decomposition and the worst categories of the latest record having them."""
    with_errors = [r for r in recs if r.metrics.get("errors")]
    if with_errors:
        r = with_errors[-1]
        errors = r.metrics["errors"]
        sec.text(f"Why AP is low ({r.method}, {r.dataset}): TIDE's error decomposition (Bolya et al., 2020). Each "
                 "false positive is a classification (Cls), localisation (Loc), both (Both), duplicate (Dupe) or "
                 "background (Bkg) error, unrecovered ground truth is missed (Miss); ΔX is the AP gained by fixing "
                 "every error of type X, FalsePos / FalseNeg the gain of perfect precision / recall, all in points "
                 "of AP (%). The fixed and pool rows apply the same fixes to AP^Fixed and AP^Pool at the same IoU.")
        sec.table(error_table(errors))
        _error_figure(sec, errors)
    with_pc = [r for r in recs if r.metrics.get("per_class")]
    if with_pc:
        r = with_pc[-1]
        t = worst_classes_table(r.metrics["per_class"])
        if t.rows:
            sec.table(t)
        else:
            sec.text(f"Worst categories ({r.method}, {r.dataset}): none shown, no category has {MIN_GT_WORST} or "
                     "more ground-truth objects (below that, a category's AP is 0 or 100 by chance).")


def _error_figure(sec: Section, errors: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    variants = [v for v in ("tide", "fixed", "pool") if v in errors]
    fig, ax = plt.subplots(figsize=(9, 3.5))
    x = np.arange(len(ERROR_COLUMNS))
    w = 0.8 / max(len(variants), 1)
    for i, v in enumerate(variants):
        vals = [errors[v][k] if errors[v][k] is not None else np.nan for k in ERROR_COLUMNS]
        ax.bar(x + (i - (len(variants) - 1) / 2) * w, vals, w, label=VARIANT_TITLES[v])
    ax.set_xticks(x, [f"Δ{k}" for k in ERROR_COLUMNS])
    ax.set_ylabel("ΔAP (points of AP %)")
    ax.axvline(5.5, color="#999", lw=0.8, ls="--")
    legend_outside(fig, [ax])
    sec.figure(fig, "ΔAP of fixing each error type (left of the line: TIDE's six main errors; right: perfect "
                    "precision / perfect recall).")
