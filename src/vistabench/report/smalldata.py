"""Small-data views: the paper's Table 3 (balanced accuracy), Table 4 (training cost) and the
ASHA search curves.

Table 3: mean test balanced accuracy of the final runs per (method, dataset) and the average over
datasets; the best per column in **bold**; methods not significantly worse than the best
(Welch's unequal-variance t-test at 5%, :func:`vistabench.metrics.not_worse_than_best`) in
*italics*. The "Average" column compares per-method means of the dataset means, so it is marked
by value only (bold).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import numpy as np

from ..metrics.stats import not_worse_than_best
from ..store import Record
from ..tuning.space import Choice, Fixed, LogUniform, parse_space
from .html import Section
from .plotstyle import distinct_colors, legend_outside
from .results import distinct_results
from .tables import N_COLUMN, Column, Records, Table, put_stats, select, shown_value

PROTOCOL = "smalldata"
_STATE_STYLE = {"complete": "-", "pruned": ":", "failed": "--"}
_STATE_LABEL = {"complete": "completed", "pruned": "stopped by ASHA", "failed": "failed"}


def _finals(records: Records, dataset: str | None) -> list[Record]:
    """The final runs, one per distinct result (a predictions file scored twice is one run)."""
    return distinct_results(select(records, protocol=PROTOCOL, dataset=dataset, kind="final"))


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def scores_by_method(records: Records, *, dataset: str | None = None) -> dict[str, dict[str, list[float]]]:
    """dataset -> method -> list of final-run test balanced accuracies (finite ones)."""
    out: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in _finals(records, dataset):
        v = r.metrics.get("balanced_accuracy")
        out[r.dataset][r.method]
        if _finite(v):
            out[r.dataset][r.method].append(float(v))
    return {d: dict(m) for d, m in out.items()}


def accuracy_table(records: Records, *, dataset: str | None = None, alpha: float = 0.05) -> Table:
    """Table 3: rows = methods, columns = datasets + average. A cell: mean ± SD of the test balanced
    accuracy over its N final runs (``<dataset>_n``; distinct results: a file scored twice counts once).

    Marks, per dataset column with two or more methods all with N >= 2 (Welch's test needs two runs):
    the best mean bold, methods not significantly worse than it (Welch's t-test at ``alpha``) italic.
    "Average" (the mean of a method's dataset means, over methods with every dataset) is marked by
    value only, bold, under the same N rule."""
    scores = scores_by_method(records, dataset=dataset)
    datasets = sorted(scores)
    methods = sorted({m for d in scores.values() for m in d})
    columns = [Column(d, d) for d in datasets] + [Column("average", "Average")]
    rows: list[dict[str, Any]] = []
    for m in methods:
        row: dict[str, Any] = {"method": m}
        means = []
        for d in datasets:
            put_stats(row, d, scores[d].get(m, []), cell_n=True)
            if row[d] is not None:
                means.append(row[d])
        row["average"] = float(np.mean(means)) if len(means) == len(datasets) and means else None
        row["average_n"] = min((row[f"{d}_n"] for d in datasets), default=0)
        rows.append(row)
    table = Table(columns=columns, rows=rows, ranked=False)
    styles: dict[tuple[int, str], str] = {}
    for d in datasets:
        groups = {m: scores[d][m] for m in methods if scores[d].get(m)}
        if not table._comparable(d):  # fewer than two methods, or one with a single run
            continue
        keep = not_worse_than_best(groups, alpha=alpha)
        best = max(shown_value(float(np.mean(v)), columns[0]) for v in groups.values())
        for i, m in enumerate(methods):
            if m not in groups:
                continue
            if shown_value(float(np.mean(groups[m])), columns[0]) == best:
                styles[(i, d)] = "bold"
            elif keep.get(m):
                styles[(i, d)] = "italic"
    styles.update({k: "bold" for k, r in table.ranks(depth=1).items() if k[1] == "average"})
    table.styles = styles
    table.caption = ("Balanced accuracy (%) on the test sets over the final runs (best mean in bold; italic: "
                     f"not significantly worse than the best, Welch's t-test, {alpha:.0%}; Average: the mean "
                     "of the dataset means, bold by value only).")
    table.caption += table.note(test=f"Welch's t-test at {alpha:.0%} (Average: by mean only)")
    return table


def cost_table(records: Records, *, dataset: str | None = None) -> Table:
    """Table 4: training throughput (images/s, higher is better: mean ± SD over the N final runs
    that measured it) and peak memory (GB, lower: the largest of the runs)."""
    by: dict[str, list[Record]] = defaultdict(list)
    for r in _finals(records, dataset):
        by[r.method].append(r)
    rows = []
    for m in sorted(by):
        mem = [r.metrics.get("peak_memory_bytes") for r in by[m]]
        kinds = sorted({str(r.metrics.get("peak_memory_kind")) for r in by[m] if r.metrics.get("peak_memory_kind")})
        mem = [float(v) / 1e9 for v in mem if _finite(v)]
        row: dict[str, Any] = {"method": m, "n": len(by[m])}
        put_stats(row, "images_per_second", [r.metrics.get("images_per_second") for r in by[m]], cell_n=True)
        row.update({"peak_memory_gb": float(np.max(mem)) if mem else None, "peak_memory_gb_n": len(mem),
                    "memory_kind": ", ".join(kinds)})
        rows.append(row)
    cols = [N_COLUMN, Column("images_per_second", "Images/s", True, percent=False, digits=1),
            Column("peak_memory_gb", "Peak memory (GB)", False, percent=False, digits=2),
            Column("memory_kind", "Memory measured as", None, percent=False)]
    table = Table(columns=cols, rows=rows, ranked=False)
    table.styles = {k: "bold" for k, r in table.ranks(depth=1).items()}
    table.caption = ("Training cost of the final runs: images/s, peak memory (the largest over the runs; "
                     "best in bold). On the CPU the memory is the process's peak RSS, an upper bound."
                     + _beside_note([r for rs in by.values() for r in rs]))
    table.caption += table.note()
    return table


def _beside_note(finals: list[Record]) -> str:
    """How many runs trained beside another (``settings.placement``), whose cost is then shared."""
    kinds = [((r.settings or {}).get("placement") or {}).get("kind") for r in finals]
    lanes, jobs = kinds.count("lanes"), kinds.count("job")
    if not lanes and not jobs:
        return ""
    how = "; ".join(x for x in (f"{lanes} in lanes, beside another run in the same process" if lanes else "",
                                f"{jobs} as parallel jobs" if jobs else "") if x)
    return (f" {lanes + jobs} of the {len(finals)} runs trained at the same time as others ({how}): their "
            "images/s were measured on a shared machine (and in lanes the peak memory is the shared "
            "process's); for one run at a time, VISTABENCH_LANES=0 and --max-parallel 1.")


def _searched(p: Any) -> str:
    if isinstance(p, Choice):
        return "one of " + ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in p.values)
    if isinstance(p, Fixed):
        return f"fixed at {p.value:g}" if isinstance(p.value, float) else f"fixed at {p.value}"
    scale = "log scale" if isinstance(p, LogUniform) else "linear scale"
    return f"{p.low:g} to {p.high:g}, {scale}"


def search_space_table(records: Records, *, dataset: str | None = None) -> Table:
    """What each method searched: every hyper-parameter of the space its runs stored (the one
    ``smalldata run --print-config`` prints and the search draws from), with its range and scale."""
    spaces: dict[tuple[str, str], dict[str, Any]] = {}  # (method, data set): the presets' spaces differ
    for r in select(records, protocol=PROTOCOL, dataset=dataset):
        space = (r.settings.get("run_config") or {}).get("space")
        if isinstance(space, dict) and space:
            spaces.setdefault((r.method, r.dataset), space)
    rows = [{"method": m, "dataset": d, "parameter": k, "searched": _searched(p)}
            for m, d in sorted(spaces) for k, p in parse_space(spaces[m, d]).items()]
    table = Table(columns=[Column("dataset", "Data set", None, percent=False),
                           Column("parameter", "Hyper-parameter", None, percent=False),
                           Column("searched", "Searched", None, percent=False)], rows=rows, ranked=False)
    table.caption = ("The search space of each method, as `smalldata run --print-config` prints it and the "
                     "search drew from (stored with every run).")
    return table


def smalldata_table(records: Records, *, dataset: str | None = None) -> Table:
    return accuracy_table(records, dataset=dataset)


def _search_figure(records: Records):
    recs = select(records, protocol=PROTOCOL, kind="tune")
    if not recs:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from matplotlib.lines import Line2D

    n = min(len(recs), 4)
    ncols = min(n, 2)  # two per row: the text stays readable when the page is 800 px wide
    nrows = -(-n // ncols)
    fig, grid = plt.subplots(nrows, ncols, figsize=(4.5 * ncols, 3.2 * nrows), squeeze=False)
    axes = list(grid.flat)
    for ax in axes[n:]:
        ax.set_visible(False)
    states_seen: set[str] = set()
    for ax, r in zip(axes, recs[:n]):
        trials = r.settings.get("search", {}).get("trials", [])
        for t, color in zip(trials, distinct_colors(len(trials))):
            states_seen.add(t["state"])
            ax.plot(range(1, len(t["curve"]) + 1), [100 * (v if v is not None else float("nan")) for v in t["curve"]],
                    color=color, linestyle=_STATE_STYLE.get(t["state"], "-"), lw=1)
        ax.set_title(f"{r.dataset} / {r.method} / split {r.settings.get('split')}", fontsize=9)
        ax.set_xlabel("epoch")
        ax.set_ylabel("val balanced acc. (%)")
        ax.grid(alpha=0.3)
    # one colour per trial; the legend explains the line styles, outside the axes
    shown = [st for st in _STATE_STYLE if st in states_seen]
    handles = [Line2D([], [], color="0.2", linestyle=_STATE_STYLE[st], lw=1) for st in shown]
    fig.tight_layout()
    legend_outside(fig, axes[:n], handles=handles,
                   labels=[_STATE_LABEL[st] for st in shown], title="trial (one colour each)")
    return fig


def smalldata_section(records: Records) -> Section | None:
    if not _finals(records, None):
        return None
    sec = Section("Small datasets (Brigato et al.)")
    sec.text("Every method gets the same search budget per split (ASHA over lr, weight decay, batch size "
             "and its own hyper-parameters); each split's best configuration is then trained repeatedly on "
             "trainval and scored with balanced accuracy on the test set.")
    sec.table(accuracy_table(records))
    sec.table(cost_table(records))
    space = search_space_table(records)
    if space.rows:
        sec.table(space)
    fig = _search_figure(records)
    if fig is not None:
        sec.figure(fig, "Search curves: validation balanced accuracy per epoch of every trial "
                        "(one colour per trial; solid: completed, dotted: stopped by ASHA, dashed: failed).")
    return sec
