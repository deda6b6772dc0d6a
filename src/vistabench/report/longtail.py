"""Long-tailed protocol views: the paper's Table 2 and the accuracy-vs-divergence plot (Fig. 3)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from typing import Any

import numpy as np

from ..protocols.longtail.sweep import train_imbalance
from ..store import Record
from .html import Section
from .plotstyle import legend_outside, series_style
from .results import check_mode, distinct_results, record_mode
from .tables import N_COLUMN, Column, Records, Table, put_stats, select

#: the survey's "STD" is the spread of accuracy over the test sweep, not over seeds: named "sweep SD"
#: here, the paper's name kept in the LaTeX header with a footnote (:data:`STD_FOOTNOTE`)
COLUMNS = [
    Column("auc", "AUC↑"), Column("avg", "AVG↑"),
    Column("std", "sweep SD↓", higher_is_better=False, tex="STD$^\\dagger\\downarrow$"),
    Column("max", "MAX↑"), Column("min", "MIN↑"), Column("drop_ratio", "DR↓", higher_is_better=False),
    Column("balanced", "BTD↑"), Column("many", "Many↑"), Column("medium", "Med.↑"), Column("few", "Few↑"),
    Column("worst_class", "Worst↑"),
]
SURVEY_KEYS = ("auc", "avg", "std", "max", "min", "drop_ratio", "balanced")  # the survey's Tables 2-6
SURVEY_COLUMNS = [Column(f"{g}_{c.key}", f"{c.title} ({sym})", c.higher_is_better, group=sym, short=c.title,
                         tex=c.tex and f"{c.tex} ({tex})")
                  for g, sym, tex in (("eq", "ρ_trn=ρ_tst", "$\\rho_{\\mathrm{trn}}=\\rho_{\\mathrm{tst}}$"),
                                      ("ne", "ρ_trn≠ρ_tst", "$\\rho_{\\mathrm{trn}}\\neq\\rho_{\\mathrm{tst}}$"))
                  for c in COLUMNS if c.key in SURVEY_KEYS]


#: the selection columns of the survey table (records run with ``select_checkpoint`` best_val/best_test)
CHECKPOINT_COLUMNS = [Column("ckpt_last", "Acc. last epoch", None, group="accuracy", short="last epoch"),
                      Column("ckpt_selected", "Acc. selected epoch", None, group="accuracy", short="selected epoch")]


def training_imbalance(r: Record) -> float | None:
    """ρ_trn of a record: its ``imbalance`` setting, else max / min of its ``train_counts`` (records
    scored from a file before ``longtail score`` stored ``imbalance``), else None (unknown)."""
    rho = r.settings.get("imbalance")
    if rho is None and r.settings.get("train_counts"):
        rho = train_imbalance(r.settings["train_counts"])
    return float(rho) if rho is not None else None


def _label(method: str, dataset: str, rho: float | None, *, with_dataset: bool) -> str:
    if not with_dataset:
        return method
    return f"{method} ({dataset}, ρ={'?' if rho is None else format(rho, 'g')})"


def _groups(records: list[Record]) -> dict[tuple[str, str, float | None], list[Record]]:
    """Records by (dataset, method, ρ_trn); runs whose checkpoint was selected on a validation or the
    test set are their own group, the method named with the selection (``ce [best_test]``)."""
    out: dict[tuple[str, str, float | None], list[Record]] = defaultdict(list)
    for r in records:
        select = r.settings.get("select_checkpoint", "last")
        method = r.method if select == "last" else f"{r.method} [{select}]"
        out[(r.dataset, method, training_imbalance(r))].append(r)
    return out


def _sorted_groups(records: list[Record]) -> list[tuple[tuple[str, str, float | None], list[Record]]]:
    """Groups by dataset, then ρ_trn (unknown last), then method."""
    return sorted(_groups(records).items(),
                  key=lambda kv: (kv[0][0], kv[0][2] is None, kv[0][2] or 0.0, kv[0][1]))


STD_FOOTNOTE = ("† STD (the survey's name; here \"sweep SD\"): the standard deviation of accuracy over the "
                "test sweep of one run, not a spread over seeds (that is the ± SD of each cell).")

_MODE_TEXT = {"resampled": "resampled", "exact": "exact (noise-free)"}


def _results(records: Records, dataset: str | None, mode: str) -> list[Record]:
    """The distinct results (docs/store.md) of one scoring mode. The exact numbers of a resampled
    record are kept with it (``metrics["exact"]``): ``exact`` reads those of every record, so a file
    scored in both modes is one exact result; ``resampled`` reads the records scored resampled only."""
    recs = select(records, protocol="longtail", dataset=dataset)
    if mode == "resampled":
        return distinct_results([r for r in recs if record_mode(r) == "resampled"])
    as_exact = [replace(r, metrics={**r.metrics, **r.metrics.get("exact", {}), "mode": "exact"})
                for r in recs if record_mode(r) == "exact" or isinstance(r.metrics.get("exact"), dict)]
    return distinct_results(as_exact)


def _caption(what: str, mode: str) -> str:
    return (f"{what} ({_MODE_TEXT[mode]} mode; other modes: `--mode`), %; ↑ higher is better, ↓ lower is "
            "better; best bold, second underlined, third italic.")


def longtail_table(records: Records, *, dataset: str | None = None, mode: str | None = None,
                   exact: bool = False) -> Table:
    """One row per (dataset, method, rho) of one scoring ``mode`` (default resampled; ``exact=True``
    is ``mode="exact"``): N distinct results (seeds or predictions files), mean ± SD of each metric."""
    mode = check_mode("longtail", "exact" if exact and mode is None else mode)
    rows: list[dict[str, Any]] = []
    for (ds, method, rho), recs in _sorted_groups(_results(records, dataset, mode)):
        row: dict[str, Any] = {"method": _label(method, ds, rho, with_dataset=not dataset), "n": len(recs)}
        for c in COLUMNS:
            put_stats(row, c.key, [r.metrics.get(c.key) for r in recs])
        rows.append(row)
    t = Table([N_COLUMN, *COLUMNS], rows, caption=_caption("Long-tailed sweep metrics", mode),
              footnotes=[STD_FOOTNOTE])
    t.caption += t.note()
    return t


def survey_table(records: Records, *, dataset: str | None = None, mode: str | None = None,
                 exact: bool = False) -> Table:
    """The survey's layout (Fang et al., Tables 2–6): per (dataset, method, ρ_trn), AUC, AVG, STD, MAX,
    MIN, DR and BTD for sweeps whose test imbalance equals the training imbalance (``eq_*``) and for
    those where it differs (``ne_*``, averaged over the differing ρ_tst); arrows give each column's
    direction. Cells without records are empty. Each cell: mean ± SD over its N distinct results
    (``<key>_n``: the matched and the mismatched halves may rest on different runs)."""
    mode = check_mode("longtail", "exact" if exact and mode is None else mode)
    rows: list[dict[str, Any]] = []
    for (ds, method, rho), recs in _sorted_groups(_results(records, dataset, mode)):
        row: dict[str, Any] = {"method": _label(method, ds, rho, with_dataset=not dataset), "n": len(recs)}
        for g in ("eq", "ne"):
            sel = [r for r in recs if (r.settings.get("test_imbalance", rho) == rho) == (g == "eq")]
            for k in SURVEY_KEYS:
                put_stats(row, f"{g}_{k}", [r.metrics.get(k) for r in sel], cell_n=True)
        ckpt = [r.metrics["checkpoint"] for r in recs if isinstance(r.metrics.get("checkpoint"), dict)]
        put_stats(row, "ckpt_last", [c.get("last_epoch_acc") for c in ckpt])
        put_stats(row, "ckpt_selected", [c.get("selected_acc") for c in ckpt])
        rows.append(row)
    columns = [N_COLUMN, *SURVEY_COLUMNS]
    caption = _caption("Survey layout", mode) + (" Each half's cells rest on the runs of that half "
                                                 "(N of each cell: CSV/JSON `<column>_n`).")
    if any(row["ckpt_selected"] is not None for row in rows):
        columns += CHECKPOINT_COLUMNS
        caption += (" Rows marked [best_test] predict with the epoch of best test-pool accuracy (as the "
                    "references report): the last two columns give that accuracy and the last epoch's, so the "
                    "inflation from selecting on the test set shows; [best_val] selects on held-out training "
                    "images.")
    t = Table(columns, rows, caption=caption, footnotes=[STD_FOOTNOTE])
    t.caption += t.note()
    return t


def accuracy_divergence_figure(records: list[Record]):
    """Paper Fig. 3: accuracy at each sweep point against its divergence, one curve per method,
    plus accuracy against the peak position."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for i, ((ds, method, _rho), recs) in enumerate(_sorted_groups(records)):
        pts = recs[-1].metrics["points"]
        d = np.array([p["divergence"] for p in pts])
        a = np.array([p["accuracy"] for p in pts])
        alpha = np.array([p["alpha"] for p in pts])
        order = np.argsort(d, kind="stable")
        label = method if len({r.dataset for r in records}) == 1 else f"{method} ({ds})"
        style = series_style(i)
        ax1.plot(d[order], 100 * a[order], ms=3, label=label, **style)
        ex = recs[-1].metrics.get("exact", {}).get("points")
        if ex:
            ax1.plot(d[order], 100 * np.array([p["accuracy"] for p in ex])[order], ls=":", color=style["color"])
        ax2.plot(alpha, 100 * a, ms=3, label=label, **style)
    ax1.set_xlabel("divergence δ from the training distribution (symmetric KL)")
    ax1.set_ylabel("accuracy (%)")
    ax1.set_title("Accuracy vs divergence (dotted: exact mode)")
    ax2.set_xlabel("peak position α of the test distribution (1 = head class)")
    ax2.set_ylabel("accuracy (%)")
    ax2.set_title("Accuracy along the evolving test sweep")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
    legend_outside(fig, [ax1, ax2])
    return fig


def longtail_section(source: Records) -> Section | None:
    records = select(source, protocol="longtail")
    if not records:
        return None
    sec = Section("Long-tailed classification under unknown test distributions")
    sec.text("Each method is trained on a long-tailed training set and tested on a sweep of test sets "
             "whose distribution moves from the training distribution (peak at the head, α = 1) to its "
             "reverse (peak at the tail). AUC is the normalised area under accuracy vs divergence; DR the "
             "relative drop from the best to the worst point; BTD the balanced (mean per-class) accuracy; "
             "Many/Med./Few group classes by training count (>100 / 20–100 / <20).")
    sec.table(longtail_table(records))
    sec.text("The survey's layout: the same scores for ρ_tst = ρ_trn and ρ_tst ≠ ρ_trn side by side.")
    sec.table(survey_table(records),
              why_empty={"ρ_trn≠ρ_tst": "every run was tested at its training imbalance; `longtail run "
                                        "--test-imbalance` tests at another one",
                         "ρ_trn=ρ_tst": "no run was tested at its training imbalance"})
    sec.figure(accuracy_divergence_figure(records), "Accuracy at each sweep point (Fang et al., Fig. 3).")
    agn = [r for r in records if r.metrics.get("test_agnostic")]
    if agn:
        sec.text("Test-agnostic protocol (exact expected accuracy on forward-LT / uniform / backward-LT "
                 "test sets built from the test pool, ρ the test set's imbalance):")
        sec.table(test_agnostic_table(agn))
    return sec


def _agnostic_order(key: str) -> tuple[int, float]:
    """forward-LT from the most skewed ρ down, uniform, backward-LT up to the most skewed (the TADE layout)."""
    kind, _, rho = key.partition("_")
    r = float(rho) if rho.replace(".", "", 1).isdigit() else 0.0
    return {"forward": (0, -r), "uniform": (1, 0.0), "backward": (2, r)}.get(kind, (3, r))


def test_agnostic_table(records: list[Record]) -> Table:
    """One row per record with test-agnostic accuracies; columns in numeric order of ρ (forward-LT
    50, 25, 10, 5, 2, uniform, backward-LT 2, ..., 50)."""
    keys = sorted({k for r in records for k in r.metrics["test_agnostic"]}, key=_agnostic_order)
    groups = {"forward": "forward-LT, ρ =", "backward": "backward-LT, ρ =", "uniform": ""}
    cols = []
    for k in keys:
        kind, _, rho = k.partition("_")
        group = groups.get(kind, "")
        cols.append(Column(k, f"{group.replace(', ρ =', '')} ρ={rho}" if rho else kind, group=group,
                           short=rho if group else ""))
    rows = []
    for (ds, method, rho), recs in _sorted_groups(_results(records, None, "exact")):  # exact in either mode
        row: dict[str, Any] = {"method": _label(method, ds, rho, with_dataset=True), "n": len(recs)}
        for k in keys:
            put_stats(row, k, [(r.metrics.get("test_agnostic") or {}).get(k) for r in recs])
        rows.append(row)
    t = Table([N_COLUMN, *cols], rows, caption="Test-agnostic accuracy (%) per test distribution (exact expected "
                                               "accuracy, the same in either scoring mode); best bold, second "
                                               "underlined, third italic.")
    t.caption += t.note()
    return t
