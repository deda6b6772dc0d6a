"""The stream section's views built from an analysis: the verdicts as one table, slices without rows that
repeat the overall error, Indep's forward transfer explained, FLOP with the table's own SI prefix."""

from __future__ import annotations

import math
import re

from vistabench.report.html import Section
from vistabench.report.stream import _indep_transfer_text, _slice_tables, runs_table, verdict_table
from vistabench.report.tables import format_value


def _run(rid, learner, cflop, err, stream="s"):
    return {"run": rid, "learner": learner, "stream": stream, "trials": 1, "steps": 4, "seed": 0, "avg_error": err,
            "cflop": cflop, "cflop_train": cflop // 2, "tasks_done": 3, "num_tasks": 3, "complete": True,
            "pareto": False}


def _verdict(word, wins, matched, diff):
    return {"verdict": word, "matched": matched, "wins": wins, "mean_error_difference": diff,
            "mean_compute_ratio": 1.5, "indep_runs_dominated": 1, "indep_runs": 2, "transfer": True, "text": "…"}


def _slices(domain_errors, size_group="100-1k"):
    """Three tasks: two domains (as given), one size bin for all."""
    return {"domain": {d: {"mean": e, "count": n} for d, (e, n) in domain_errors.items()},
            "size": {size_group: {"mean": 0.5, "count": 3}}, "resolution": {"<=32": {"mean": 0.5, "count": 3}}}


ANALYSIS = {
    "runs": [_run("i", "indep", 2_000_000_000, 0.5), _run("f", "ft-prev", 3_500_000_000, 0.4)],
    "regret": {"f": {"reference": "i", "curve": [0.0, -0.1], "final": -0.1, "meta_test": -0.1}},
    "forward_transfer": {"i": {"mean": -1.09, "tasks": {}}, "f": {"mean": 0.4, "tasks": {}}},
    "slices": {"i": _slices({"scan": (0.4, 2), "hand": (0.7, 1)}), "f": _slices({"scan": (0.3, 2), "hand": (0.6, 1)})},
    "verdicts": {"s": {"ft-prev": _verdict("beats Indep", 1, 1, -0.1), "mt": _verdict("does not beat Indep", 0, 1, 0.2)}},
}


def test_the_verdicts_are_one_table_one_row_per_learner():
    t = verdict_table(ANALYSIS, "s")
    assert [r["learner"] for r in t.rows] == ["ft-prev", "mt"]
    assert t.rows[0]["verdict"] == "beats Indep" and t.rows[0]["wins"] == "1 of 1"
    md = t.render("markdown")
    assert re.search(r"\| ft-prev \| beats Indep \| 1 of 1 \| [*<u>]*-10\.0[*</u>]* \| 1\.50 \| 1 of 2 \|", md), md
    assert verdict_table(ANALYSIS, "other stream") is None


def test_a_slice_axis_with_one_group_is_named_not_tabled():
    sec = Section("x")
    _slice_tables(sec, ANALYSIS, "s")
    html = "".join(sec.parts)
    assert html.count("<table>") == 1 and "by domain" in html
    assert "not split by training-set size (100-1k), image resolution (&lt;=32)" in html
    # the "all tasks" column is the task-weighted mean of the groups: (2 * 0.4 + 0.7) / 3
    assert f'data-v="{(2 * 0.4 + 0.7) / 3!r}"' in html
    assert "scan (n=2)" in html and "hand (n=1)" in html


def test_indep_forward_transfer_is_explained_with_its_value():
    text = _indep_transfer_text(ANALYSIS)
    assert "Indep trains every task from scratch" in text and "mean forward transfer is -1.09" in text
    none = {**ANALYSIS, "forward_transfer": {"f": {"mean": 0.4, "tasks": {}}}}
    assert "Here Indep's" not in _indep_transfer_text(none)


def test_cflop_column_has_one_si_prefix_named_in_its_title():
    t = runs_table(ANALYSIS, stream="s")
    titles = {c.key: c.title for c in t.columns}
    assert titles["cflop_si"] == "cFLOP (GFLOP)" and titles["cflop_train_si"] == "of which training steps (GFLOP)"
    assert [r["cflop_si"] for r in t.rows] == [2.0, 3.5]
    regret = next(c for c in t.columns if c.key == "regret")
    assert math.isclose(t.rows[1]["regret"], -0.1) and format_value(t.rows[1]["regret"], regret) == "-10.0"


def test_the_analysis_json_names_its_raw_units():
    from vistabench.report.stream_analysis import analyse

    units = analyse([])["units"]
    assert units["avg_error"] == "fraction (0-1)" and units["cflop"] == "FLOP"
