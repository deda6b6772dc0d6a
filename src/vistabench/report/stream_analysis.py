"""Analysis of stream runs from the results store: per-run summary, Pareto front, regret against
Indep, forward transfer on repeated tasks, slices by domain / size / resolution, and a plain verdict
on whether each learner beats Indep. Everything is computed from the task events.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Sequence

import numpy as np

from ..errors import InputError
from ..metrics.curves import normalised_auc
from ..metrics.stream import forward_transfer, pareto_front, regret_curve, slice_means
from .tables import Records, select

__all__ = ["collect_runs", "analyse", "size_bin", "resolution_bin", "TRANSFER_LEARNERS"]

REFERENCE = "indep"
TRANSFER_LEARNERS = ("ft-prev", "ft-d", "mt", "pt")


def size_bin(n: int | None) -> str:
    """Decade bins of the training-set size: ``<100``, ``100-1k``, ``1k-10k``, ``10k-100k``, ``>=100k``;
    ``unknown`` for an event that does not say (a scored events file may leave it out)."""
    if n is None:
        return "unknown"
    edges = [(100, "<100"), (1_000, "100-1k"), (10_000, "1k-10k"), (100_000, "10k-100k")]
    return next((name for lim, name in edges if n < lim), ">=100k")


def resolution_bin(res: Sequence[int] | None) -> str:
    """Bins of the smaller side of the (native, average) resolution: ``<=32``, ``33-64``, ``65-256``, ``>256``;
    ``unknown`` for an event that does not say."""
    if not res:
        return "unknown"
    m = min(res)
    return "<=32" if m <= 32 else "33-64" if m <= 64 else "65-256" if m <= 256 else ">256"


def collect_runs(records: Records, run_ids: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """One summary per run (``run_id``) of the ``stream`` protocol's events, oldest first."""
    recs = select(records, protocol="stream", kind="event")
    by_run: dict[str, list] = defaultdict(list)
    for r in recs:
        by_run[r.run_id].append(r)
    if run_ids:
        missing = [r for r in run_ids if r not in by_run]
        if missing:
            raise InputError(f"run(s) {missing} not in the store (known: {sorted(by_run)[:10]})")
        keys = list(run_ids)
    else:
        keys = list(by_run)
    out = []
    for rid in keys:
        rs = sorted(by_run[rid], key=lambda r: r.metrics["task_index"])
        ev = [r.metrics for r in rs]
        s = rs[-1].settings
        mt = [e["error"] for e in ev if e["split"] == "meta-test" and e["error"] is not None]
        mt = [x for x in mt if math.isfinite(x)]
        out.append({
            "run": rid, "learner": rs[0].method, "stream": rs[0].dataset, "seed": rs[0].seed,
            "trials": s.get("trials"), "steps": s.get("steps"),
            "tasks_done": len(ev), "num_tasks": s.get("num_tasks", len(ev)),
            "complete": len(ev) == s.get("num_tasks", len(ev)),
            "avg_error": float(np.mean(mt)) if mt else float("nan"),
            "cflop": int(sum(e["flops"] for e in ev)),
            "events": ev,
        })
    return out


def _reference_for(run: dict, refs: list[dict]) -> dict | None:
    cands = [r for r in refs if r["stream"] == run["stream"] and r["complete"] and r["run"] != run["run"]]
    if not cands:
        return None
    same = [r for r in cands if (r["trials"], r["steps"], r["seed"]) == (run["trials"], run["steps"], run["seed"])]
    if same:
        return same[0]
    return min(cands, key=lambda r: abs(math.log(max(r["cflop"], 1)) - math.log(max(run["cflop"], 1))))


def _curve_auc(curve: list[float]) -> float:
    k = len(curve)
    return normalised_auc(curve, np.arange(1, k + 1) / k, single_point="value") if k else float("nan")


def analyse(records: Records, run_ids: Sequence[str] | None = None) -> dict[str, Any]:
    """The stream report as a JSON-able dict: runs, regret, forward_transfer, slices, verdicts (from a
    list of records or a results store)."""
    runs = collect_runs(records, run_ids)
    # Pareto front per stream, over complete runs with a defined error
    pareto: dict[str, bool] = {r["run"]: False for r in runs}
    for stream in {r["stream"] for r in runs}:
        pts = [r for r in runs if r["stream"] == stream and r["complete"] and math.isfinite(r["avg_error"])]
        if pts:
            for i in pareto_front([p["cflop"] for p in pts], [p["avg_error"] for p in pts]):
                pareto[pts[int(i)]["run"]] = True
    refs = [r for r in runs if r["learner"] == REFERENCE]
    regret: dict[str, Any] = {}
    for r in runs:
        if r["learner"] == REFERENCE or not r["complete"]:
            continue
        ref = _reference_for(r, refs)
        if ref is None:
            continue
        e = [x["error"] for x in r["events"]]
        e_ref = [x["error"] for x in ref["events"]]
        curve = regret_curve(np.array(e, dtype=float), np.array(e_ref, dtype=float))
        mt = [i for i, x in enumerate(r["events"]) if x["split"] == "meta-test"]
        regret[r["run"]] = {"reference": ref["run"], "curve": curve.tolist(),
                            "final": float(curve[-1]) if len(curve) else float("nan"),
                            "meta_test": float(np.sum(np.array(e)[mt] - np.array(e_ref)[mt])) if mt else float("nan")}
    ft: dict[str, Any] = {}
    for r in runs:
        firsts: dict[str, dict] = {}
        per_task = {}
        for x in r["events"]:
            if x["name"] in firsts and x.get("curve") and firsts[x["name"]].get("curve"):
                a1, a2 = _curve_auc(firsts[x["name"]]["curve"]), _curve_auc(x["curve"])
                per_task[x["name"]] = {"auc_first": a1, "auc_second": a2, "forward_transfer": forward_transfer(a1, a2),
                                       "first_task": firsts[x["name"]]["task"], "second_task": x["task"]}
            firsts[x["name"]] = x
        if per_task:
            vals = [v["forward_transfer"] for v in per_task.values() if math.isfinite(v["forward_transfer"])]
            ft[r["run"]] = {"tasks": per_task, "mean": float(np.mean(vals)) if vals else float("nan")}
    slices: dict[str, Any] = {}
    for r in runs:
        ev = r["events"]
        errs = [x["error"] if x["error"] is not None else float("nan") for x in ev]
        slices[r["run"]] = {
            "domain": slice_means(errs, [x["domain"] for x in ev]),
            "size": slice_means(errs, [size_bin(x.get("train_size")) for x in ev]),
            "resolution": slice_means(errs, [resolution_bin(x.get("resolution")) for x in ev]),
        }
    return {
        "runs": [{k: r[k] for k in ("run", "learner", "stream", "trials", "steps", "seed", "avg_error", "cflop",
                                    "tasks_done", "num_tasks", "complete")} | {"pareto": pareto[r["run"]]}
                 for r in runs],
        "regret": regret,
        "forward_transfer": ft,
        "slices": slices,
        "verdicts": verdicts(runs),
        # the raw units of this JSON; the tables, plots and text show % / points of % and SI-prefixed FLOP
        "units": {"avg_error": "fraction (0-1)", "regret": "fraction, summed over tasks",
                  "slices": "fraction (0-1)", "cflop": "FLOP", "forward_transfer": "ratio"},
    }


def verdicts(runs: list[dict]) -> dict[str, Any]:
    """Per stream and learner: does it beat Indep? Matched settings (same trials, steps, seed) and dominance."""
    out: dict[str, Any] = {}
    for stream in sorted({r["stream"] for r in runs}):
        rs = [r for r in runs if r["stream"] == stream and r["complete"] and math.isfinite(r["avg_error"])]
        ind = [r for r in rs if r["learner"] == REFERENCE]
        if not ind:
            continue
        per: dict[str, Any] = {}
        for learner in sorted({r["learner"] for r in rs} - {REFERENCE}):
            mine = [r for r in rs if r["learner"] == learner]
            diffs, ratios = [], []
            for r in mine:
                m = [i for i in ind if (i["trials"], i["steps"], i["seed"]) == (r["trials"], r["steps"], r["seed"])]
                if m:
                    diffs.append(r["avg_error"] - m[0]["avg_error"])
                    ratios.append(r["cflop"] / m[0]["cflop"] if m[0]["cflop"] else float("nan"))
            dominated = sum(any(r["cflop"] <= i["cflop"] and r["avg_error"] <= i["avg_error"]
                                and (r["cflop"] < i["cflop"] or r["avg_error"] < i["avg_error"]) for r in mine)
                            for i in ind)
            wins = sum(d < 0 for d in diffs)
            if not diffs:
                word = "not compared (no Indep run with the same trials, steps and seed)"
            elif wins == len(diffs):
                word = "beats Indep"
            elif wins == 0:
                word = "does not beat Indep"
            else:
                word = "beats Indep at some budgets only"
            text = (f"{learner} {word} on {stream}: lower average meta-test error at {wins} of {len(diffs)} matched "
                    f"settings" + (f" (mean difference {100 * float(np.mean(diffs)):+.1f} points, "
                                   f"{float(np.mean(ratios)):.2f}x Indep's compute)" if diffs else "")
                    + f"; it dominates {dominated} of {len(ind)} Indep runs in (cFLOP, error).")
            per[learner] = {"verdict": word, "matched": len(diffs), "wins": wins,
                            "mean_error_difference": float(np.mean(diffs)) if diffs else float("nan"),
                            "mean_compute_ratio": float(np.mean(ratios)) if ratios else float("nan"),
                            "indep_runs_dominated": dominated, "indep_runs": len(ind),
                            "transfer": learner in TRANSFER_LEARNERS, "text": text}
        out[stream] = per
    return out
