import numpy as np

from vistabench.data import Predictions
from vistabench.protocols.longtail.sweep import build_sweep, score_sweep
from vistabench.report import build_report
from vistabench.report.longtail import longtail_table
from vistabench.store import Record, ResultsStore


def _record(method, acc_by_class, seed=0):
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(5), 40)
    pred = np.where(rng.random(200) < np.asarray(acc_by_class)[labels], labels, (labels + 1) % 5)
    sweep = build_sweep(labels, [400, 150, 60, 20, 4], test_imbalance=100, points=5, repeats=2)
    p = Predictions(labels=labels, kind="pred", values=pred)
    m = score_sweep(p, sweep)
    m["exact"] = score_sweep(p, sweep, exact=True)
    return Record("longtail", "toy", method, seed, sweep["sha256"], {"imbalance": 100.0}, m)


def test_table_and_report(tmp_path):
    with ResultsStore(tmp_path / "r.sqlite") as store:
        store.add(_record("ce", [0.99, 0.9, 0.6, 0.3, 0.1]))
        store.add(_record("ce", [0.99, 0.9, 0.6, 0.3, 0.1], seed=1))
        store.add(_record("balanced", [0.8, 0.75, 0.7, 0.65, 0.6]))
        t = longtail_table(store)
        assert [r["n"] for r in t.rows] == [1, 2]  # rows sorted by method name
        recs = store.records(method="ce")
        assert t.rows[1]["avg"] == (recs[0].metrics["avg"] + recs[1].metrics["avg"]) / 2
        assert t.rows[1]["avg_sd"] == np.std([r.metrics["avg"] for r in recs], ddof=1) and t.rows[0]["avg_sd"] is None
        assert t.marks() == {}  # a row with N = 1: nothing is ranked
        assert "No marks" in t.caption
        store.add(_record("balanced", [0.8, 0.75, 0.7, 0.65, 0.6], seed=1))
        t = longtail_table(store)
        assert [r["n"] for r in t.rows] == [2, 2] and t.marks() and "by mean only" in t.caption
        path = build_report(store, tmp_path / "rep")
    html = path.read_text()
    assert "Long-tailed classification" in html and html.count("data:image/png;base64,") >= 1
    assert "<b>" in html and " ± " in html  # best values marked; the spread over seeds shown


def test_report_of_empty_store(tmp_path):
    with ResultsStore(tmp_path / "r.sqlite") as store:
        html = build_report(store, tmp_path / "rep").read_text()
    assert "no records yet" in html


def test_survey_table_splits_equal_and_different_test_imbalance(tmp_path):
    from vistabench.report.longtail import survey_table

    with ResultsStore(tmp_path / "r.sqlite") as store:
        eq = _record("ce", [0.99, 0.9, 0.6, 0.3, 0.1])
        eq.settings["test_imbalance"] = 100.0
        ne = _record("ce", [0.9, 0.8, 0.7, 0.6, 0.5], seed=1)
        ne.settings["test_imbalance"] = 10.0
        store.add(eq)
        store.add(ne)
        t = survey_table(store)
    (row,) = t.rows
    assert row["eq_auc"] == eq.metrics["auc"] and row["ne_auc"] == ne.metrics["auc"]
    assert row["eq_drop_ratio"] == eq.metrics["drop_ratio"] and row["ne_balanced"] == ne.metrics["balanced"]
    assert row["n"] == 2 and row["eq_auc_n"] == 1 and row["ne_auc_n"] == 1
    titles = [c.title for c in t.columns]
    assert len(titles) == 15 and titles[:2] == ["N", "AUC↑ (ρ_trn=ρ_tst)"] and titles[10] == "sweep SD↓ (ρ_trn≠ρ_tst)"
    assert [c.higher_is_better for c in t.columns[1:8]] == [True, True, False, True, True, False, True]
    tex = t.render("latex")  # the survey's own name in the LaTeX header, with its footnote
    assert "STD$^\\dagger\\downarrow$ ($\\rho_{\\mathrm{trn}}\\neq\\rho_{\\mathrm{tst}}$)" in tex
    assert "$^\\dagger$ STD (the survey's name" in tex
