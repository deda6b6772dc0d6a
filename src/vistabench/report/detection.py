"""Report section and table for the large-vocabulary detection protocol.

A row is one scored set of detections: the records of one method on one data set that scored the
same detections (same results file, ground truth, IoU type, split and calibration) are merged, each
AP family (AP^Old, AP^Fixed, AP^Pool) taken from the latest record that measured it, so that a later
``detection eval --ap old`` does not hide an earlier run's AP^Fixed and AP^Pool. Records that scored
different detections under one method name stay separate rows.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ..protocols.detection.provenance import calibrated_words
from ..store import Record
from .detection_analysis import add_diagnostics
from .html import Section
from .plotstyle import legend_outside, series_style
from .tables import N_COLUMN, Column, Records, Table, put_stats, select

_COLUMNS = [
    Column("old_AP", "AP^Old"), Column("old_APr", "AP^Old_r"),
    Column("fixed_AP", "AP^Fixed"), Column("fixed_APr", "AP^Fixed_r"),
    Column("pool_AP", "AP^Pool"), Column("pool_APr", "AP^Pool_r"), Column("pool_APc", "AP^Pool_c"),
    Column("pool_APf", "AP^Pool_f"),
]
_SCORES = Column("scores", "Scores", None, percent=False)
VARIANTS = ("old", "fixed", "pool")
#: the most PR curves one plot shows (per data set); the baseline is always among them
MAX_CURVES = 8
#: settings that say which detections a record scored: records agreeing on all of them are merged
#: (where a record has the hash of its detections, ``predictions_sha256``, the hash stands for the
#: results file's path: the same detections under another name are the same set)
_IDENTITY = ("gt", "results", "iou_type", "split_sha256", "split_part", "calibration", "recipe", "policy",
             "num_images", "num_results", "predictions_sha256")
#: what a table row shares: scored sets that differ only in their detections (seeds of one detector,
#: other results files under one method name) are the N results of one row
_ROW = ("gt", "iou_type", "split_sha256", "split_part", "calibration", "recipe", "policy", "num_images")


@dataclass
class ScoredSet:
    """The merged records of one method's scoring of one set of detections."""

    dataset: str
    method: str
    records: list[Record] = field(default_factory=list)  # oldest first
    metrics: dict[str, Any] = field(default_factory=dict)
    source: dict[str, int | None] = field(default_factory=dict)  # variant -> id of the record it came from

    @property
    def settings(self) -> dict[str, Any]:
        return self.records[-1].settings

    @property
    def latest(self) -> int:
        """Position of the newest record (store order), for "latest first" choices."""
        return max(r.id or 0 for r in self.records)


def _setting(r: Record, key: str) -> Any:
    """A record's setting; ``gt`` and ``results`` of a ``detection run`` record stored before run records
    named them (they were only in its ``config``) are read from there."""
    st = r.settings
    if key in ("gt", "results") and key not in st and isinstance(st.get("config"), dict):
        return st["config"].get(key)
    return st.get(key)


def _identity(r: Record) -> tuple:
    hashed = bool(r.settings.get("predictions_sha256"))
    return (r.dataset, r.method, *(repr(None if hashed and k == "results" else _setting(r, k)) for k in _IDENTITY))


def _measured(r: Record, variant: str) -> bool:
    return any(k.startswith(variant + "_") and not k.endswith("pr50") for k in r.metrics)


def scored_sets(records: list[Record]) -> list[ScoredSet]:
    """The records merged per scored set of detections, in the order each set first appears."""
    groups: dict[tuple, ScoredSet] = {}
    for r in records:
        s = groups.setdefault(_identity(r), ScoredSet(r.dataset, r.method))
        s.records.append(r)
    for s in groups.values():
        for v in VARIANTS:
            newest = [r for r in s.records if _measured(r, v)]
            if newest:
                r = newest[-1]
                s.metrics.update({k: x for k, x in r.metrics.items() if k.startswith(v + "_")})
                s.source[v] = r.id
    return list(groups.values())


def _re_ranked(st: dict[str, Any]) -> bool:
    """Whether the scored detections were cut to a top-k per class (the gaming policy)."""
    return "/class" in str(st.get("policy", ""))


def scores_note(s: ScoredSet) -> str:
    """What the scored detections were: as detected, re-ranked (the gaming policy) or calibrated."""
    st = s.settings
    notes = []
    if _re_ranked(st):
        notes.append(f"re-ranked ({str(st['policy']).split(' then ')[0]})")
    if st.get("calibration"):
        notes.append(calibrated_words(st["calibration"], st.get("recipe")))
    return " and ".join(notes) or "as detected"


def _labels(sets: list[ScoredSet], *, with_dataset: bool, legend: bool = False) -> list[str]:
    """Row (or, with ``legend``, plot) labels: the method, and where one method names several sets,
    what was scored (a table shows it in its Scores column, a legend after the name), then, where
    that is shared too, the latest record's id."""
    labels = []
    for s in sets:
        label = s.method + (f" ({s.dataset})" if with_dataset else "")
        if s.settings.get("iou_type") == "segm" and "segm" not in s.method:
            label += " · segm"
        labels.append(label)
    shared = {label for label in labels if labels.count(label) > 1}
    if legend:
        labels = [f"{label} · {scores_note(s)}" if label in shared else label for s, label in zip(sets, labels)]
    keys = [(label, "" if legend else scores_note(s)) for s, label in zip(sets, labels)]
    shared_keys = {k for k in keys if keys.count(k) > 1}  # one method on different detections
    return [f"{label} [record {s.records[-1].id}]" if k in shared_keys else label
            for s, label, k in zip(sets, labels, keys)]


def detection_table(records: Records, *, dataset: str | None = None) -> Table:
    """One row per method and way of scoring (same ground truth, split, IoU type, calibration or
    re-ranking): N distinct scored sets of detections (seeds or results files) and the mean ± SD of
    the three APs over them; whether the scores were calibrated or re-ranked. A scored set merges the
    records that scored the same detections (each AP family from the latest record that measured it)."""
    sets = scored_sets(select(records, protocol="detection", dataset=dataset))
    groups: dict[tuple, list[ScoredSet]] = {}
    for s in sets:
        groups.setdefault((s.dataset, s.method, scores_note(s), *(repr(_setting(s.records[-1], k)) for k in _ROW)),
                          []).append(s)
    firsts = [g[0] for g in groups.values()]
    rows = []
    for group, label in zip(groups.values(), _labels(firsts, with_dataset=dataset is None)):
        row: dict[str, Any] = {"method": label, "n": len(group), "scores": scores_note(group[0]),
                               "dataset": group[0].dataset, "records": [r.id for s in group for r in s.records]}
        for c in _COLUMNS:
            put_stats(row, c.key, [s.metrics.get(c.key) for s in group], cell_n=True)
        rows.append(row)
    # a frequency-group column without a value in any row (COCO data; no rare category with ground truth)
    # is left out, and the caption says so
    empty = [c for c in _COLUMNS if c.key[-1] in "rcf" and all(r.get(c.key) is None for r in rows)] if rows else []
    left_out = (f" Not shown, without a value in any row: {', '.join(c.title for c in empty)} (they need LVIS "
                "frequency groups with ground truth; COCO data has none)." if empty else "")
    # what was scored beside the name and N: rows of one method differ there, and it stays in view
    # where a narrow page scrolls the APs sideways
    t = Table(columns=[N_COLUMN, _SCORES, *(c for c in _COLUMNS if c not in empty)], rows=rows,
              caption="Large-vocabulary detection: AP^Old (per-image limit), AP^Fixed (top-k per class), "
                      "AP^Pool (categories pooled), in %. A scored set merges the records that scored the same "
                      "detections, each AP from the latest record that measured it (– not measured); a row's N "
                      "counts its distinct sets of detections (the same detections scored twice are one). "
                      "Scores: as detected, re-ranked (top-k per class, the gaming policy), calibrated per "
                      "category, or both; best bold, second underlined, third italic." + left_out)
    t.caption += t.note()
    return t


def curve_sets(sets: list[ScoredSet], limit: int = MAX_CURVES) -> tuple[list[ScoredSet], int]:
    """The scored sets of one data set whose PR curves a plot shows, and how many had one.

    Every baseline (a method named ``baseline...``) is kept; the other places go to the most recently
    scored sets. The chosen ones keep their table order.
    """
    with_curve = [s for s in sets if s.metrics.get("pool_pr50")]
    base = [s for s in with_curve if s.method.startswith("baseline")]
    rest = sorted((s for s in with_curve if s not in base), key=lambda s: s.latest, reverse=True)
    keep = base + rest[:max(0, limit - len(base))]
    return [s for s in with_curve if s in keep], len(with_curve)


def pr_figure(dataset: str, sets: list[ScoredSet], labels: list[str]):
    """AP^Pool's pooled PR curve and AP^Fixed's mean per-class curve (IoU 0.5) of each set, one
    style per set on both axes, the legend below the axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    rec = np.linspace(0, 1, 101)
    for i, (s, label) in enumerate(zip(sets, labels)):
        style = series_style(i, marker=False)
        axes[0].plot(rec, s.metrics["pool_pr50"], label=label, **style)
        if s.metrics.get("fixed_pr50"):
            axes[1].plot(rec, s.metrics["fixed_pr50"], label=label, **style)
    axes[0].set_title("AP^Pool: pooled PR curve, IoU 0.5", fontsize=10)
    axes[1].set_title("AP^Fixed: mean per-class PR curve, IoU 0.5", fontsize=10)
    for ax in axes:
        ax.set_xlabel("recall")
        ax.set_ylabel("precision")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    fig.suptitle(dataset, fontsize=10)
    legend_outside(fig, list(axes))
    return fig


def _gaming_pair(sets: list[ScoredSet]) -> tuple[ScoredSet, ScoredSet] | None:
    """The latest re-ranked set and the set of the detections it was made from: by its provenance
    (``derived_from``'s sha256 is the other set's ``predictions_sha256``, as `detection rerank` makes
    it), else by the names ``rerank-...`` and ``baseline`` (records of detections re-ranked in
    memory, with no file to hash, as the demo stored them before it went through files)."""
    def scored(s: ScoredSet) -> bool:
        return "old_AP" in s.metrics and "fixed_AP" in s.metrics

    as_detected = {s.settings.get("predictions_sha256"): s for s in sets
                   if not _re_ranked(s.settings) and not s.settings.get("calibration")
                   and s.settings.get("predictions_sha256") and scored(s)}
    for g in reversed(sets):
        source = (g.settings.get("derived_from") or {}).get("sha256")
        if source in as_detected and _re_ranked(g.settings) and not g.settings.get("calibration") and scored(g):
            return g, as_detected[source]
    gamed = [s for s in sets if s.method.startswith("rerank-") and scored(s)]
    base = [s for s in sets if s.method == "baseline" and "old_AP" in s.metrics]
    return (gamed[-1], base[-1]) if gamed and base else None


def _gaming_text(sets: list[ScoredSet]) -> str | None:
    pair = _gaming_pair(sets)
    if pair is None:
        return None
    gamed, base = pair
    g, b = gamed.metrics, base.metrics
    pct = lambda x: f"{100 * x:.2f}%"  # noqa: E731
    rare = (f" and AP^Old_r from {pct(b['old_APr'])} to {pct(g['old_APr'])}"
            if b.get("old_APr") is not None and g.get("old_APr") is not None else "")
    before = gamed.settings.get("fixed_AP_without_rerank")
    fixed = (f"AP^Fixed at the same k is {pct(before)} without and {pct(g['fixed_AP'])} with the re-ranking."
             if before is not None else f"AP^Fixed with the re-ranking is {pct(g['fixed_AP'])}.")
    which = (f"{gamed.method}" if gamed.method != base.method else f"{base.method}, {scores_note(gamed)}")
    return (f"Gaming (paper §3): keeping only the top-k detections per class before the per-image limit "
            f"({which}) changes AP^Old from {pct(b['old_AP'])} to {pct(g['old_AP'])}{rare} with the "
            f"same detector; " + fixed)


#: why a detection table's frequency-group columns can be empty (the HTML leaves them out and says so)
_WHY_NO_GROUP = {c.key: "AP_r/_c/_f need LVIS frequency groups (r/c/f) with ground truth in them; COCO data and "
                        "sets without rare categories have none" for c in _COLUMNS if c.key[-1] in "rcf"}


def detection_section(source: Records) -> Section | None:
    recs = select(source, protocol="detection")
    if not recs:
        return None
    sec = Section("Large-vocabulary detection (AP^Old / AP^Fixed / AP^Pool)")
    sec.text("AP^Old is the official LVIS number (lvis-api semantics, a per-image detection limit). "
             "AP^Fixed removes the limit and gives every category the same budget of k detections over "
             "the whole set, so it cannot be gamed by cross-category re-ranking and is invariant to "
             "per-category monotone score changes. AP^Pool ranks all categories' detections together and "
             "so rewards calibrated scores (Dave et al., 2021).")
    by_dataset: dict[str, list[Record]] = defaultdict(list)
    for r in recs:
        by_dataset[r.dataset].append(r)
    for dataset, rs in by_dataset.items():
        sec.subtitle(dataset)
        sec.table(detection_table(recs, dataset=dataset), why_empty=_WHY_NO_GROUP)
        sets = scored_sets(rs)
        gaming = _gaming_text(sets)
        if gaming:
            sec.text(gaming)
        shown, total = curve_sets(sets)
        if shown:
            labels = dict(zip(map(id, sets), _labels(sets, with_dataset=False, legend=True)))
            note = "" if len(shown) == total else (f" {len(shown)} of the {total} scored sets with curves: the "
                                                   "baseline and the most recently scored.")
            calibrated = any(s.settings.get("calibration") for s in shown)
            sec.figure(pr_figure(dataset, shown, [labels[id(s)] for s in shown]),
                       f"{dataset}: interpolated precision (101 recall points) at IoU 0.5."
                       + (" Calibration moves the pooled curve; the per-class curves of AP^Fixed do not change "
                          "under monotone calibration." if calibrated else "") + note)
    add_diagnostics(sec, recs)
    return sec
