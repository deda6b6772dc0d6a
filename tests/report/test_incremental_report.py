"""Incremental report: the Table-1-style table with reference rows, the paper table, the section."""

from __future__ import annotations

import numpy as np
import pytest

from vistabench.metrics.incremental import corner_case_matrix, incremental_scores
from vistabench.protocols.incremental import record_for
from vistabench.report import build_report
from vistabench.report.incremental import (
    PAPER_TABLE1_MINI_IMAGENET,
    incremental_table,
    lazy_summary,
    paper_reference_table,
    reference_rows,
)
from vistabench.store import ResultsStore


def _store(tmp_path) -> ResultsStore:
    store = ResultsStore(tmp_path / "r.sqlite")
    sessions = {"classes": [[0, 1, 2, 3], [4], [5]], "base_classes": 4, "way": 1}
    for method, m in (("good", [[0.9], [0.85, 0.6], [0.8, 0.5, 0.7]]), ("bad", [[0.9], [0.3, 1.0], [0.1, 0.0, 1.0]])):
        s = incremental_scores(m, session_sizes=[4, 1, 1])
        store.add(record_for(s, dataset="toy", method=method, seed=0, sessions=sessions, settings={}))
    return store


def test_table_rows_and_reference_rows(tmp_path) -> None:
    with _store(tmp_path) as store:
        t = incremental_table(store, dataset="toy")
    names = [r["method"] for r in t.rows]
    assert names == ["bad", "good", "Lazy (ref.)", "Greedy (ref.)", "Greedy-NF (ref.)"]
    good = t.rows[1]
    assert good["s2"] == pytest.approx((4 * 0.85 + 0.6) / 5)
    lazy = incremental_scores(corner_case_matrix("lazy", num_sessions=3, base_accuracy=0.9), session_sizes=[4, 1, 1])
    assert t.rows[2]["gacc"] == pytest.approx(lazy.gacc)
    md = t.render("markdown")
    # ranking among measured rows only: 'good' has the best aAcc; reference rows are never marked
    assert f"**{100 * good['aacc']:.2f}**" in md
    assert "**" not in md.split("Lazy (ref.)")[1].split("\n")[0]


def test_paper_reference_table_and_lazy_sentence() -> None:
    t = paper_reference_table()
    lazy_row = next(r for r in t.rows if r["method"].startswith("Lazy"))
    lazy = reference_rows([60] + [5] * 8, base_accuracy=0.85)["Lazy"]
    assert lazy_row["aacc"] == pytest.approx(lazy.aacc) and lazy_row["gacc"] == pytest.approx(lazy.gacc)
    for r, (_, per, a_pub, _) in zip(t.rows, PAPER_TABLE1_MINI_IMAGENET):
        assert 100 * r["aacc"] == pytest.approx(np.mean(per)) and r["aacc_pub"] == a_pub / 100
    close = [(n, a, g) for n, _, a, g in PAPER_TABLE1_MINI_IMAGENET if abs(a - 100 * lazy.aacc) <= 3]
    text = lazy_summary(lazy, close)
    assert f"{100 * lazy.aacc:.2f}%" in text and f"below {len(close)} of these {len(close)}" in text
    assert "No published method" in lazy_summary(lazy, [])


def test_report_section(tmp_path) -> None:
    with _store(tmp_path) as store:
        path = build_report(store, tmp_path / "rep")
    html = path.read_text()
    assert "Few-shot class-incremental (gAcc)" in html
    assert html.count("<img") >= 2 and "Lazy (ref.)" in html and "NC-FSCIL" in html
