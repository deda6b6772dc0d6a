"""Report section, table and plots of the task-stream protocol (Nevis'22)."""

from __future__ import annotations

import math
from typing import Any

from ..store import ResultsStore
from .html import Section
from .tables import Column, Table

__all__ = ["runs_table", "pareto_figure", "regret_figure", "stream_table"]

_MARKERS = "osD^vP*X"


def runs_table(analysis: dict[str, Any], *, stream: str | None = None) -> Table:
    rows = []
    for r in analysis["runs"]:
        if stream is not None and r["stream"] != stream:
            continue
        reg = analysis["regret"].get(r["run"], {})
        ft = analysis["forward_transfer"].get(r["run"], {})
        rows.append({"method": r["run"], "learner": r["learner"], "trials": r["trials"], "steps": r["steps"],
                     "avg_error": r["avg_error"], "gflop": r["cflop"] / 1e9,
                     "regret": reg.get("meta_test"), "ft": ft.get("mean"),
                     "pareto": "yes" if r["pareto"] else "", "done": f"{r['tasks_done']}/{r['num_tasks']}"})
    cols = [Column("learner", "Learner", None, percent=False), Column("trials", "Trials", None, False, 0),
            Column("steps", "Steps", None, False, 0), Column("avg_error", "Avg. meta-test error (%)", False),
            Column("gflop", "cFLOP (GFLOP)", None, False, 2),
            Column("regret", "Meta-test regret vs Indep", None, False, 3),
            Column("ft", "Forward transfer", None, False, 3), Column("pareto", "Pareto", None, False),
            Column("done", "Tasks", None, False)]
    return Table(cols, rows, row_key="method", row_title="Run",
                 caption="Task-stream runs: average error over meta-test tasks, cFLOP over the whole stream "
                         "(training + model selection), cumulative meta-test regret against the matched Indep run, "
                         "mean forward transfer on repeated tasks.")


def pareto_figure(analysis: dict[str, Any], *, stream: str | None = None):
    """cFLOP (log) vs average meta-test error: every run as a point, one colour per learner; the front as a line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [r for r in analysis["runs"] if (stream is None or r["stream"] == stream)
            and r["complete"] and math.isfinite(r["avg_error"] if r["avg_error"] is not None else float("nan"))]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    learners = sorted({r["learner"] for r in runs})
    for k, learner in enumerate(learners):
        pts = sorted((r["cflop"], r["avg_error"]) for r in runs if r["learner"] == learner)
        ax.plot([p[0] for p in pts], [100 * p[1] for p in pts], marker=_MARKERS[k % len(_MARKERS)], linestyle=":",
                label=f"{learner} ({len(pts)} run{'s' if len(pts) != 1 else ''})")
    front = sorted((r["cflop"], r["avg_error"]) for r in runs if r["pareto"])
    if front:
        ax.step([p[0] for p in front], [100 * p[1] for p in front], where="post", color="black", alpha=0.5,
                linewidth=2, label="Pareto front", zorder=0)
    ax.set_xscale("log")
    ax.set_xlabel("cFLOP (whole stream, training + search)")
    ax.set_ylabel("average meta-test error (%)")
    ax.set_title(f"Error vs compute{f' on {stream}' if stream else ''}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def regret_figure(analysis: dict[str, Any], *, stream: str | None = None):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    names = {r["run"]: r for r in analysis["runs"]}
    for rid, reg in analysis["regret"].items():
        if stream is not None and names[rid]["stream"] != stream:
            continue
        ax.plot(range(1, len(reg["curve"]) + 1), reg["curve"], marker=".", label=rid)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xlabel("task (stream order)")
    ax.set_ylabel("cumulative error - Indep's")
    ax.set_title("Regret against the matched Indep run (below 0: fewer errors)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def stream_table(store: ResultsStore, *, dataset: str | None = None) -> Table:
    from .stream_analysis import analyse

    return runs_table(analyse(store), stream=dataset)


def stream_section(store: ResultsStore) -> Section | None:
    from .stream_analysis import analyse

    if not store.records(protocol="stream"):
        return None
    a = analyse(store)
    sec = Section("Never-ending task streams (Nevis'22 protocol)")
    sec.text("Each run hands a learner the stream's tasks one at a time; error is 1 - accuracy (1 - mAP for "
             "multilabel tasks) on each task's test part, averaged over the meta-test tasks; cFLOP sums the "
             "forward + backward FLOPs of every training step of every search trial plus the forward passes "
             "spent on model selection, over the whole stream.")
    for stream in sorted({r["stream"] for r in a["runs"]}):
        for learner, v in a["verdicts"].get(stream, {}).items():
            sec.text(v["text"])
        sec.table(runs_table(a, stream=stream).render("markdown"))
        sec.figure(pareto_figure(a, stream=stream), f"{stream}: every run of every learner; black: the Pareto front.")
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
    sl_rows = []
    for rid, sl in a["slices"].items():
        for axis in ("domain", "size", "resolution"):
            cells = ", ".join(f"{g}: {100 * v['mean']:.1f}% (n={v['count']})" for g, v in sl[axis].items()
                              if v["count"])
            sl_rows.append(f"| {rid} | {axis} | {cells} |")
    if sl_rows:
        sec.table("Mean task error by slice (all tasks of the stream).\n\n| Run | Slice | Mean error (tasks) |\n"
                  "|---|---|---|\n" + "\n".join(sl_rows))
    return sec
