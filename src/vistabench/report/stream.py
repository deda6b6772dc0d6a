"""Report section, table and plots of the task-stream protocol (Nevis'22)."""

from __future__ import annotations

import math
from typing import Any

from ..atomic import write_figure
from ..errors import InputError
from ..store import ResultsStore
from .html import Section
from .plotstyle import legend_outside, series_style
from .tables import N_COLUMN, Column, Records, Table, put_stats, select
from .units import flop_axis, si_prefix

__all__ = ["runs_table", "summary_table", "pareto_figure", "regret_figure", "stream_table", "with_cflop_parts"]



def with_cflop_parts(analysis: dict[str, Any], records: Records) -> dict[str, Any]:
    """Add ``cflop_train`` and ``cflop_selection`` (training steps vs selection / validation forwards) to every
    run, from its events among ``records`` (a list of records or a results store).

    dm_nevis charges the update steps only; ``cflop_train`` is the comparable figure.
    """
    from ..metrics.stream import cflop_parts
    from .stream_analysis import collect_runs

    events = {r["run"]: r["events"] for r in collect_runs(records, [r["run"] for r in analysis["runs"]])}
    for r in analysis["runs"]:
        ev = events[r["run"]]
        if all(e.get("flops_train") is not None and e.get("flops_eval") is not None for e in ev):
            parts = cflop_parts(ev)
            r["cflop_train"], r["cflop_selection"] = parts["train"], parts["selection"]
        else:  # runs scored from outside (`stream score`) may give the total only
            r["cflop_train"] = r["cflop_selection"] = None
    return analysis


def stream_report(store: str | Any, runs: Any = None, *, plot: str | None = None,
                  cost: str = "total") -> dict[str, Any]:
    """The stream analysis of the runs in ``store`` (a path, opened read-only, or a store): all runs,
    or those of ``runs``; with ``plot``, the Pareto plot (x axis ``cost``: "total" = cFLOP, "train" =
    training steps only, dm_nevis's convention) is written there and named under ``"plot"``."""
    from .stream_analysis import analyse

    if cost not in ("total", "train"):
        raise InputError(f"cost: expected 'total' or 'train', got {cost!r}")
    if isinstance(store, ResultsStore):
        a = with_cflop_parts(analyse(store, runs or None), store)
        where = f"store {str(store.path)!r}"
    else:
        with ResultsStore(store, read_only=True) as st:
            a = with_cflop_parts(analyse(st, runs or None), st)
        where = f"store {str(store)!r}"
    if not a["runs"]:
        raise InputError(f"{where}: holds no stream runs")
    if plot:
        fig = pareto_figure(a, cost="cflop" if cost == "total" else "cflop_train")
        write_figure(fig, plot, what="plot", dpi=110, bbox_inches="tight")  # the legend sits outside the axes
        a["plot"] = str(plot)
    return a


def runs_table(analysis: dict[str, Any], *, stream: str | None = None) -> Table:
    """One row per run. Units as everywhere in the stream's views (:mod:`.units`): errors in %, regret in
    points of % summed over the meta-test tasks, cFLOP with one SI prefix per column (named in its title,
    the same prefixes as the Pareto plot's axis). Values are stored as the table shows them before
    formatting: errors and regret as fractions, cFLOP in the unit of the column's title (the analysis
    itself, ``stream report --json``, keeps raw FLOP)."""
    runs = [r for r in analysis["runs"] if stream is None or r["stream"] == stream]
    f_all, p_all = si_prefix(r["cflop"] for r in runs)
    f_tr, p_tr = si_prefix(r.get("cflop_train") for r in runs)
    rows = []
    for r in runs:
        reg = analysis["regret"].get(r["run"], {})
        ft = analysis["forward_transfer"].get(r["run"], {})
        rows.append({"method": r["run"], "learner": r["learner"], "trials": r["trials"], "steps": r["steps"],
                     "avg_error": r["avg_error"], "cflop_si": r["cflop"] / f_all,
                     "cflop_train_si": r["cflop_train"] / f_tr if r.get("cflop_train") is not None else None,
                     "regret": reg.get("meta_test"), "ft": ft.get("mean"),
                     "pareto": "yes" if r["pareto"] else "", "done": f"{r['tasks_done']}/{r['num_tasks']}"})
    cols = [Column("learner", "Learner", None, percent=False), Column("trials", "Trials", None, False, 0),
            Column("steps", "Steps", None, False, 0), Column("avg_error", "Avg. meta-test error (%)", False),
            Column("cflop_si", f"cFLOP ({p_all}FLOP)", None, False, 2),
            *([Column("cflop_train_si", f"of which training steps ({p_tr}FLOP)", None, False, 2)]
              if any(r["cflop_train_si"] is not None for r in rows) else []),
            Column("regret", "Meta-test regret vs Indep (points)", None, True, 1),
            Column("ft", "Forward transfer", None, False, 3), Column("pareto", "Pareto", None, False),
            Column("done", "Tasks", None, False)]
    return Table(cols, rows, row_key="method", row_title="Run",
                 caption="Task-stream runs: average error over meta-test tasks (%), cFLOP over the whole stream "
                         "(training + model selection; the training-steps part alone is what dm_nevis charges), "
                         "cumulative meta-test regret against the matched Indep run (the run's error minus "
                         "Indep's, in points of %, summed over the meta-test tasks; below 0: fewer errors), "
                         "mean forward transfer on repeated tasks (a ratio, 0: no transfer).")


def pareto_figure(analysis: dict[str, Any], *, stream: str | None = None, cost: str = "cflop"):
    """cFLOP (log) vs average meta-test error: every run as a point, one colour per learner; the front as a line.

    ``cost="cflop_train"`` plots the training-steps part only (dm_nevis's convention; needs
    :func:`with_cflop_parts`); the front drawn is then the one of that cost.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [r for r in analysis["runs"] if (stream is None or r["stream"] == stream)
            and r["complete"] and math.isfinite(r["avg_error"] if r["avg_error"] is not None else float("nan"))]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    learners = sorted({r["learner"] for r in runs})
    if cost != "cflop":
        from ..metrics.stream import pareto_front

        runs = [dict(r) for r in runs if r.get(cost) is not None]
        front_idx = set(pareto_front([r[cost] for r in runs], [r["avg_error"] for r in runs]).tolist()) if runs else set()
        for i, r in enumerate(runs):
            r["cflop"], r["pareto"] = r[cost], i in front_idx
    for k, learner in enumerate(learners):
        pts = sorted((r["cflop"], r["avg_error"]) for r in runs if r["learner"] == learner)
        # points of one learner joined thinly; colour + marker apart; hollow markers, the earlier learners'
        # larger, so that runs at the same point (indep and ensemble at one trial) show as concentric shapes
        style = {**series_style(k), "linestyle": ":", "markerfacecolor": "none", "markeredgewidth": 1.6,
                 "markersize": max(4.0, 12.0 - 1.3 * k)}
        ax.plot([p[0] for p in pts], [100 * p[1] for p in pts], lw=1, label=f"{learner} ({len(pts)} "
                f"run{'s' if len(pts) != 1 else ''})", **style)
    front = sorted((r["cflop"], r["avg_error"]) for r in runs if r["pareto"])
    if front:
        ax.step([p[0] for p in front], [100 * p[1] for p in front], where="post", color="black",
                linewidth=2.5, alpha=0.35, label="Pareto front", zorder=0)
    ax.set_xscale("log")
    flop_axis(ax.xaxis)
    ax.set_xlabel("cFLOP (whole stream, training + search)" if cost == "cflop"
                  else "cFLOP, training steps only (dm_nevis's convention)")
    ax.set_ylabel("average meta-test error (%)")
    ax.set_title(f"Error vs compute{f' on {stream}' if stream else ''}")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    legend_outside(fig, [ax])
    return fig


def regret_figure(analysis: dict[str, Any], *, stream: str | None = None):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    names = {r["run"]: r for r in analysis["runs"]}
    shown = [(rid, reg) for rid, reg in analysis["regret"].items()
             if stream is None or names[rid]["stream"] == stream]
    for i, (rid, reg) in enumerate(shown):
        ax.plot(range(1, len(reg["curve"]) + 1), [100 * v for v in reg["curve"]], ms=4, label=rid,
                **series_style(i))
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xlabel("task (stream order)")
    ax.set_ylabel("cumulative error − Indep's (points of %)")
    ax.set_title("Regret against the matched Indep run (below 0: fewer errors)")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    legend_outside(fig, [ax], fontsize=7)
    return fig


#: settings that differ between the seeds of one configuration (not part of a row's identity)
_PER_RUN = ("config", "seed", "run_id", "max_tasks", "predictions_sha256")


def _configuration(settings: dict[str, Any]) -> str:
    """What a row of :func:`stream_table` shares: every stored setting but the per-run ones
    (:data:`_PER_RUN`; the learner's own settings, trials, steps, recipe and stream included), as this
    version names them (a run stored with ``arch`` shares a row with one stored with ``model``)."""
    from ..jsonutil import dumps
    from ..learners.stream.options import read_settings

    return dumps({k: v for k, v in read_settings(settings).items() if k not in _PER_RUN}, sort_keys=True)


def summary_table(analysis: dict[str, Any], records: Records, *, stream: str | None = None) -> Table:
    """One row per stream, learner and configuration (trials, steps, the learner's settings): N runs
    (distinct seeds; a resumed run is one run), mean ± SD over them of the average meta-test error,
    cFLOP, regret against the matched Indep run and forward transfer; how many runs are on the Pareto
    front and how many tasks each did."""
    settings = {r.run_id: r.settings for r in select(records, protocol="stream", kind="event")}
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in analysis["runs"]:
        if stream is None or r["stream"] == stream:
            key = (r["stream"], r["learner"], _configuration(settings.get(r["run"], {})))
            groups.setdefault(key, []).append(r)
    chosen = [r for runs in groups.values() for r in runs]
    f_all, p_all = si_prefix(r["cflop"] for r in chosen)
    f_tr, p_tr = si_prefix(r.get("cflop_train") for r in chosen)
    rows = []
    for (name, learner, _), runs in groups.items():
        row: dict[str, Any] = {"method": learner if stream is not None else f"{learner} ({name})", "n": len(runs),
                               "trials": runs[0]["trials"], "steps": runs[0]["steps"],
                               "runs": [r["run"] for r in runs], "stream": name}
        put_stats(row, "avg_error", [r["avg_error"] for r in runs])
        put_stats(row, "cflop_si", [r["cflop"] / f_all for r in runs])
        put_stats(row, "cflop_train_si", [r["cflop_train"] / f_tr for r in runs if r.get("cflop_train") is not None])
        put_stats(row, "regret", [analysis["regret"].get(r["run"], {}).get("meta_test") for r in runs])
        put_stats(row, "ft", [analysis["forward_transfer"].get(r["run"], {}).get("mean") for r in runs])
        row["pareto"] = f"{sum(bool(r['pareto']) for r in runs)}/{len(runs)}"
        row["done"] = ", ".join(sorted({f"{r['tasks_done']}/{r['num_tasks']}" for r in runs}))
        rows.append(row)
    cols = [N_COLUMN, Column("trials", "Trials", None, False, 0), Column("steps", "Steps", None, False, 0),
            Column("avg_error", "Avg. meta-test error (%)", False),
            Column("cflop_si", f"cFLOP ({p_all}FLOP)", None, False, 2),
            *([Column("cflop_train_si", f"of which training steps ({p_tr}FLOP)", None, False, 2)]
              if any(r["cflop_train_si"] is not None for r in rows) else []),
            Column("regret", "Meta-test regret vs Indep (points)", None, True, 1),
            Column("ft", "Forward transfer", None, False, 3), Column("pareto", "Runs on the Pareto front", None, False),
            Column("done", "Tasks", None, False)]
    t = Table(cols, rows, row_key="method", row_title="Learner",
              caption="Task-stream learners: one row per learner and configuration, N runs (seeds). Average "
                      "error over meta-test tasks, cFLOP over the whole stream (training + model selection; the "
                      "training-steps part alone is what dm_nevis charges), cumulative meta-test regret against "
                      "the matched Indep run (points of %, summed over the meta-test tasks), mean forward transfer on "
                      "repeated tasks; best error bold, second "
                      "underlined, third italic.")
    t.caption += t.note()
    return t


def stream_table(records: Records, *, dataset: str | None = None) -> Table:
    """The protocol's table: :func:`summary_table` of every stream run among ``records``."""
    from .stream_analysis import analyse

    return summary_table(with_cflop_parts(analyse(records), records), records, stream=dataset)


def verdict_table(analysis: dict[str, Any], stream: str) -> Table | None:
    """Does each learner beat Indep on ``stream``: one row per learner (the verdicts of
    :func:`~vistabench.report.stream_analysis.verdicts`), None when there is no Indep run to compare with."""
    per = analysis["verdicts"].get(stream, {})
    if not per:
        return None
    rows = [{"learner": name, "verdict": v["verdict"], "wins": f"{v['wins']} of {v['matched']}",
             "diff": v["mean_error_difference"], "ratio": v["mean_compute_ratio"],
             "dominated": f"{v['indep_runs_dominated']} of {v['indep_runs']}"} for name, v in per.items()]
    cols = [Column("verdict", "Verdict", None, percent=False),
            Column("wins", "Lower error (matched)", None, percent=False),
            Column("diff", "Mean Δ error (points)", False, digits=1),
            Column("ratio", "Compute (× Indep)", None, percent=False, digits=2),
            Column("dominated", "Indep runs dominated", None, percent=False)]
    return Table(cols, rows, row_key="learner", row_title="Learner",
                 caption=f"{stream}: each learner against Indep at matched settings (same trials, steps and seed): "
                         "at how many it has the lower average meta-test error, the mean difference (points of "
                         "%, below 0: fewer errors), its compute relative to Indep's, and how many Indep runs "
                         "it dominates (no more compute and no more error, one of them less).")


def _indep_transfer_text(analysis: dict[str, Any]) -> str:
    """Why Indep shows a forward transfer at all, with its measured value."""
    names = {r["run"]: r["learner"] for r in analysis["runs"]}
    vals = [ft["mean"] for rid, ft in analysis["forward_transfer"].items()
            if names.get(rid) == "indep" and math.isfinite(ft["mean"])]
    measured = (f" Here Indep's mean forward transfer is {sum(vals) / len(vals):+.2f}." if vals else "")
    return ("Indep trains every task from scratch, so it transfers nothing: its forward transfer is the measure's "
            "noise (the second occurrence of a task is searched and trained anew, with other trials and another "
            "data order), and the ratio divides by 1 − AUC1, so a small difference in AUC becomes a large "
            "value when the first AUC is close to 1." + measured + " Read the other learners' values against "
            "Indep's, not against 0.")


_SLICE_AXES = {"domain": "domain", "size": "training-set size", "resolution": "image resolution"}


def _slice_tables(sec: Section, analysis: dict[str, Any], stream: str) -> None:
    """Mean task error by slice: one table per slice axis that splits the stream's tasks into two or more
    groups (rows: runs, columns: all tasks then each group); an axis putting every task in one group
    would repeat each run's overall error, so it is only named."""
    rids = [r["run"] for r in analysis["runs"] if r["stream"] == stream and r["run"] in analysis["slices"]]
    single = []
    for axis, title in _SLICE_AXES.items():
        groups = list(dict.fromkeys(g for rid in rids for g, v in analysis["slices"][rid][axis].items() if v["count"]))
        if len(groups) < 2:
            single.append(f"{title} ({groups[0] if groups else 'none'})")
            continue
        rows = []
        for rid in rids:
            sl = analysis["slices"][rid][axis]
            done = [v for v in sl.values() if v["count"] and math.isfinite(v["mean"])]
            n = sum(v["count"] for v in done)
            row: dict[str, Any] = {"run": rid, "all": sum(v["mean"] * v["count"] for v in done) / n if n else None}
            row.update({f"g{j}": sl[g]["mean"] if g in sl and sl[g]["count"] else None for j, g in enumerate(groups)})
            rows.append(row)
        counts = {g: {analysis["slices"][rid][axis].get(g, {}).get("count", 0) for rid in rids} for g in groups}
        cols = [Column("all", "all tasks", False, digits=1)]
        cols += [Column(f"g{j}", f"{g} (n={min(counts[g])})" if len(counts[g]) == 1 else g, False, digits=1)
                 for j, g in enumerate(groups)]
        sec.table(Table(cols, rows, row_key="run", row_title="Run",
                        caption=f"{stream}: mean task error (%) by {title}, all tasks of the stream (n: tasks in "
                                "the group)."))
    if single:
        sec.text(f"{stream}: not split by " + ", ".join(single) + ": every task of the stream falls in one group "
                 "there, so the slice's error is each run's overall mean task error.")


def stream_section(records: Records) -> Section | None:
    from .stream_analysis import analyse

    if not select(records, protocol="stream", kind="event"):
        return None
    a = with_cflop_parts(analyse(records), records)
    sec = Section("Never-ending task streams (Nevis'22 protocol)")
    sec.text("Each run hands a learner the stream's tasks one at a time; error is 1 - accuracy (1 - mAP for "
             "multilabel tasks) on each task's test part, averaged over the meta-test tasks; cFLOP sums the "
             "forward + backward FLOPs of every training step of every search trial plus the forward passes "
             "spent on model selection, over the whole stream (the table also gives the training-steps part "
             "alone, the figure dm_nevis reports). Learners: indep, ft-prev, ft-d, ensemble, pt (PT-MT with a "
             "`stream pretrain` checkpoint, pre-training cost reported apart), mt (multi-task), bhpo (GP-UCB).")
    for stream in sorted({r["stream"] for r in a["runs"]}):
        verdict = verdict_table(a, stream)
        if verdict is not None:
            sec.table(verdict)
        sec.table(summary_table(a, records, stream=stream))
        sec.text("Each run (a learner, a configuration and a seed):")
        sec.table(runs_table(a, stream=stream))
        sec.figure(pareto_figure(a, stream=stream),
                   f"{stream}: every run of every learner (one colour and marker per learner; runs at the same "
                   "point show as concentric markers); the wide grey step line is the Pareto front.")
        if any(a["runs"][i]["stream"] == stream for i in range(len(a["runs"]))) and a["regret"]:
            sec.figure(regret_figure(a, stream=stream), f"{stream}: cumulative regret along the stream.")
    ft_rows = []
    for rid, ft in a["forward_transfer"].items():
        for name, v in ft["tasks"].items():
            ft_rows.append(f"| {rid} | {name} | {v['auc_first']:.3f} | {v['auc_second']:.3f} | {v['forward_transfer']:.3f} |")
    if ft_rows:
        sec.table("Forward transfer on repeated tasks, (AUC2 - AUC1) / (1 - AUC1), AUC of validation score vs "
                  "training progress.\n\n| Run | Task | AUC first | AUC second | Forward transfer |\n|---|---|---:|---:|---:|\n"
                  + "\n".join(ft_rows))
        sec.text(_indep_transfer_text(a))
    for stream in sorted({r["stream"] for r in a["runs"]}):
        _slice_tables(sec, a, stream)
    return sec
