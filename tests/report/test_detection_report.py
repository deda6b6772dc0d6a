"""The detection table and section: records of one scored set merged, calibrated runs marked, PR
plots per data set with the baseline always among the curves."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from vistabench.report import detection as D  # noqa: E402
from vistabench.store import Record, ResultsStore  # noqa: E402


def _rec(dataset, method, ap, *, variants=("old", "fixed", "pool"), **settings):
    metrics = {}
    for v in variants:
        metrics.update({f"{v}_AP": ap, f"{v}_APr": ap / 2})
    if "pool" in variants:
        metrics["pool_pr50"] = [max(0.0, 1 - ap * i / 100) for i in range(101)]
    if "fixed" in variants:
        metrics["fixed_pr50"] = [max(0.0, 1 - ap * i / 80) for i in range(101)]
    return Record("detection", dataset, method, 1, None,
                  {"results": f"{method}.json", "gt": "gt.json", "iou_type": "bbox", **settings}, metrics)


def test_a_later_old_only_evaluation_keeps_the_earlier_fixed_and_pool(tmp_path):
    with ResultsStore(tmp_path / "r.sqlite") as store:
        store.add(_rec("lvis", "det", 0.30))
        store.add(_rec("lvis", "det", 0.25, variants=("old",)))
        (row,) = D.detection_table(store).rows
    assert row["old_AP"] == 0.25 and row["fixed_AP"] == 0.30 and row["pool_AP"] == 0.30
    assert row["records"] == [1, 2] and row["method"] == "det (lvis)"


def test_calibrated_and_reranked_rows_are_marked(tmp_path):
    with ResultsStore(tmp_path / "r.sqlite") as store:
        store.add(_rec("lvis", "baseline", 0.3, policy="top-300/image"))
        store.add(_rec("lvis", "cal", 0.3, calibration="platt", recipe="devil"))
        store.add(_rec("lvis", "cal2", 0.3, calibration="isotonic", recipe="vistabench"))
        store.add(_rec("lvis", "rerank-top10/class", 0.3, policy="top-10/class then top-300/image"))
        notes = {r["method"]: r["scores"] for r in D.detection_table(store, dataset="lvis").rows}
    assert notes == {"baseline": "as detected", "cal": "calibrated (platt, authors' recipe)",
                     "cal2": "calibrated (isotonic)", "rerank-top10/class": "re-ranked (top-10/class)"}


def test_pr_plots_per_data_set_keep_the_baseline(tmp_path, monkeypatch):
    drawn = []
    monkeypatch.setattr(D, "pr_figure", lambda dataset, sets, labels: drawn.append((dataset, labels)) or _fig())
    with ResultsStore(tmp_path / "r.sqlite") as store:
        store.add(_rec("lvis", "baseline", 0.30))
        for i in range(10):
            store.add(_rec("lvis", f"variant-{i}", 0.2 + i / 100))
        store.add(_rec("coco", "other", 0.5))
        sec = D.detection_section(store)
    assert sec is not None
    (lvis,) = [labels for ds, labels in drawn if ds == "lvis"]
    (coco,) = [labels for ds, labels in drawn if ds == "coco"]
    assert coco == ["other"] and "other" not in lvis
    # 8 curves: the baseline (the oldest record) and the 7 most recently scored sets
    assert lvis == ["baseline"] + [f"variant-{i}" for i in range(3, 10)]
    assert "8 of the 11 scored sets" in "".join(sec.parts)


def test_the_pr_figure_has_one_look_per_set_and_an_uncovered_legend(tmp_path, figure_check):
    sets = D.scored_sets([_rec("lvis", f"m{i}", 0.1 + i / 20) for i in range(8)])
    fig = D.pr_figure("lvis", sets, [s.method for s in sets])
    assert figure_check(fig) == []


def _fig():
    import matplotlib.pyplot as plt

    fig, _ = plt.subplots()
    return fig


def test_eval_and_run_of_the_same_files_are_one_scored_set(tmp_path, monkeypatch, capsys):
    """`detection eval` and `detection run` on the same ground truth and results file score the same
    detections: one row, N = 1, each AP family from the record that measured it; a `run` record
    stored before run records named their files (gt/results only in its config) merges too."""
    from vistabench.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["detection", "synth", "--out", "d", "--images", "40", "--categories", "12", "--json"]) == 0
    store = "s.sqlite"
    assert main(["detection", "eval", "--gt", "d/gt.json", "--results", "d/results.json", "--ap", "old",
                 "--store", store, "--json"]) == 0
    assert main(["detection", "run", "--gt", "d/gt.json", "--results", "d/results.json", "--store", store,
                 "--json"]) == 0
    capsys.readouterr()
    with ResultsStore(store) as s:
        eval_rec, run_rec = s.records()
        assert run_rec.settings["gt"] == "d/gt.json" and run_rec.settings["results"] == "d/results.json"
        (row,) = D.detection_table(s).rows
        assert row["n"] == 1 and row["records"] == [eval_rec.id, run_rec.id]
        assert row["pool_AP"] == run_rec.metrics["pool_AP"] and row["old_AP"] == run_rec.metrics["old_AP"]
        old_style = {k: v for k, v in run_rec.settings.items() if k not in ("gt", "results")}
        s.add(Record("detection", run_rec.dataset, run_rec.method, run_rec.seed, None, old_style, run_rec.metrics))
        (row,) = D.detection_table(s).rows
    assert row["n"] == 1 and len(row["records"]) == 3


def test_one_method_scored_two_ways_is_told_apart_by_what_was_scored(tmp_path, monkeypatch):
    drawn = []
    monkeypatch.setattr(D, "pr_figure", lambda dataset, sets, labels: drawn.append(labels) or _fig())
    with ResultsStore(tmp_path / "r.sqlite") as store:
        store.add(_rec("lvis", "mine", 0.30))
        store.add(_rec("lvis", "mine", 0.35, policy="top-10/class", results="rr.json"))
        store.add(_rec("lvis", "mine", 0.20, calibration="platt", results="cal.json"))
        store.add(_rec("lvis", "mine", 0.25, calibration="platt", results="cal2.json", split_sha256="abc"))
        rows = D.detection_table(store, dataset="lvis").rows
        D.detection_section(store)
    # the table's Scores column tells the first three apart; the last two differ in a setting it does
    # not show (the split): their latest records name them
    assert [(r["method"], r["scores"]) for r in rows] == [
        ("mine", "as detected"), ("mine", "re-ranked (top-10/class)"), ("mine [record 3]", "calibrated (platt)"),
        ("mine [record 4]", "calibrated (platt)")]
    # a legend has no such column: what was scored follows the name
    assert drawn == [["mine · as detected", "mine · re-ranked (top-10/class)", "mine · calibrated (platt) [record 3]",
                      "mine · calibrated (platt) [record 4]"]]
