"""Workflows a user chains, each step through the command line as typed (vistabench.cli.main), on
one store in a temporary folder: what one step writes, the next one reads.

- long-tail: profile -> sweep -> score a predictions file -> table (markdown, latex, survey) -> report
- detection: eval -> eval again with ``--ap old`` -> table and report show both runs' measured APs
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from vistabench.cli import main
from vistabench.data import save_predictions


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def longtail_files(tmp_path, capsys):
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(10), 60)
    logits = rng.normal(size=(600, 10))
    logits[np.arange(600), labels] += 2.0
    save_predictions(tmp_path / "pred.npz", labels=labels, logits=logits)
    rc, out, _ = run(capsys, "longtail", "profile", "--classes", 10, "--n-max", 5000, "--imbalance", 100, "--json")
    assert rc == 0
    (tmp_path / "counts.json").write_text(out)
    rc, _, err = run(capsys, "longtail", "sweep", "--labels", tmp_path / "pred.npz", "--train-counts",
                     tmp_path / "counts.json", "--test-imbalance", 100, "--out", tmp_path / "sweep.json")
    assert rc == 0, err
    return tmp_path


def test_score_then_table_then_report(longtail_files, capsys):
    d = longtail_files
    store = d / "store.sqlite"
    rc, out, err = run(capsys, "longtail", "score", "--predictions", d / "pred.npz", "--sweep", d / "sweep.json",
                       "--method", "mymodel", "--json", "--store", store)
    assert rc == 0, err
    scored = json.loads(out)

    rc, out, err = run(capsys, "longtail", "table", "--format", "markdown", "--store", store)
    assert rc == 0, err
    # the row names the training imbalance of the sweep's counts (5000 / 50) and shows the scored AUC
    (row,) = [line for line in out.splitlines() if line.startswith("| mymodel")]
    assert "(custom, ρ=100)" in row and f"{100 * scored['auc']:.2f}" in row

    rc, out, err = run(capsys, "longtail", "table", "--format", "latex", "--store", store)
    assert rc == 0 and "mymodel (custom, $\\rho$=100)" in out and out.isascii(), err  # ρ in math mode
    rc, out, err = run(capsys, "longtail", "table", "--layout", "survey", "--store", store)
    assert rc == 0, err
    # ρ_tst of the sweep (100) equals ρ_trn: the scores land in the "=" half of the survey layout
    cells = [c.strip() for c in next(line for line in out.splitlines() if "mymodel" in line).strip("|").split("|")]
    assert cells[1] == "1" and cells[2] == f"{100 * scored['auc']:.2f}" and cells[9] == "–"  # N = 1: no marks

    rc, out, err = run(capsys, "table", "--protocol", "longtail", "--store", store)
    assert rc == 0 and "mymodel" in out, err
    rc, out, err = run(capsys, "report", "--out", d / "report", "--store", store)
    assert rc == 0, err
    page = (d / "report" / "index.html").read_text(encoding="utf-8")
    assert "mymodel (custom, ρ=100)" in page and "data:image/png;base64," in page


def test_a_record_scored_before_imbalance_was_stored_still_tabulates(longtail_files, capsys):
    """Stores written before ``score`` kept ρ_trn: the table derives it from the record's training counts."""
    import sqlite3

    d = longtail_files
    store = d / "store.sqlite"
    assert run(capsys, "longtail", "score", "--predictions", d / "pred.npz", "--sweep", d / "sweep.json",
               "--store", store)[0] == 0
    con = sqlite3.connect(store)
    (settings,) = con.execute("SELECT settings FROM records").fetchone()
    old = json.loads(settings)
    assert old.pop("imbalance") == 100.0
    con.execute("UPDATE records SET settings = ?", (json.dumps(old),))
    con.commit()
    con.close()
    rc, out, err = run(capsys, "longtail", "table", "--store", store)
    assert rc == 0 and "| pred (custom, ρ=100) |" in out, err


@pytest.fixture
def detection_files(tmp_path, capsys):
    rc, _, err = run(capsys, "detection", "synth", "--out", tmp_path / "s", "--images", 40, "--categories", 20,
                     "--dets-per-image", 30)
    assert rc == 0, err
    return tmp_path


def _table_json(capsys, store):
    rc, out, err = run(capsys, "detection", "table", "--json", "--store", store)
    assert rc == 0, err
    return json.loads(out)["rows"]


def test_eval_then_eval_old_only_then_table_keeps_both_runs(detection_files, capsys):
    d = detection_files
    store = d / "store.sqlite"
    gt, res = d / "s" / "gt.json", d / "s" / "results.json"
    rc, out, err = run(capsys, "detection", "eval", "--gt", gt, "--results", res, "--method", "mine", "--json",
                       "--store", store)
    assert rc == 0, err
    first = json.loads(out)
    rc, out, err = run(capsys, "detection", "eval", "--gt", gt, "--results", res, "--method", "mine", "--ap", "old",
                       "--max-dets-per-image", 20, "--json", "--store", store)
    assert rc == 0, err
    second = json.loads(out)
    assert set(second) >= {"old"} and "fixed" not in second and second["old"]["AP"] != first["old"]["AP"]

    (row,) = _table_json(capsys, store)
    # one scored set of detections: AP^Old from the later record, AP^Fixed / AP^Pool from the earlier one
    assert row["records"] == [first["record_id"], second["record_id"]]
    assert row["old_AP"] == second["old"]["AP"]
    assert row["fixed_AP"] == first["fixed"]["AP"] and row["pool_AP"] == first["pool"]["AP"]
    assert row["scores"] == "as detected"
    rc, out, err = run(capsys, "detection", "table", "--store", store)
    assert rc == 0, err
    head = [c.strip() for c in next(x for x in out.splitlines() if x.startswith("| Method")).strip("|").split("|")]
    cells = dict(zip(head, (c.strip().strip("*") for c in next(x for x in out.splitlines()
                                                               if x.startswith("| mine")).strip("|").split("|"))))
    assert cells["N"] == "1"  # N: one set of detections, scored twice
    assert cells["AP^Old"] == f"{100 * second['old']['AP']:.2f}" and cells["AP^Fixed"] == f"{100 * first['fixed']['AP']:.2f}"
    assert cells["AP^Pool"] == f"{100 * first['pool']['AP']:.2f}"

    # the same method name on other detections (another file of the detector: its last detection
    # dropped): a second result of that row, N = 2
    other = d / "other.json"
    other.write_text(json.dumps(json.loads(res.read_text())[:-1]))
    rc, out, err = run(capsys, "detection", "eval", "--gt", gt, "--results", other, "--method", "mine",
                       "--json", "--store", store)
    assert rc == 0, err
    third = json.loads(out)
    (row,) = _table_json(capsys, store)
    assert row["records"] == [first["record_id"], second["record_id"], third["record_id"]] and row["n"] == 2
    assert row["method"] == "mine (vistabench synthetic LVIS-like set)" and row["pool_AP_n"] == 2
    assert row["pool_AP"] == pytest.approx((first["pool"]["AP"] + third["pool"]["AP"]) / 2)
    assert row["pool_AP_sd"] == pytest.approx(abs(first["pool"]["AP"] - third["pool"]["AP"]) / 2 ** 0.5)

    # the gaming policy applied with `rerank` is never averaged with detections as detected: its
    # provenance file makes it a row of its own, marked in the Scores column
    rc, out, err = run(capsys, "detection", "rerank", "--results", res, "--per-class-topk", 10, "--out", d / "rr.json")
    assert rc == 0 and "rr.provenance.json" in out, err
    rc, out, err = run(capsys, "detection", "eval", "--gt", gt, "--results", d / "rr.json", "--method", "mine",
                       "--store", store)
    assert rc == 0 and "scores: re-ranked (top-10/class), from " in out, err
    rows = _table_json(capsys, store)
    assert [(r["n"], r["scores"]) for r in rows] == [(2, "as detected"), (1, "re-ranked (top-10/class)")]

    rc, _, err = run(capsys, "report", "--out", d / "report", "--store", store)
    assert rc == 0, err
    page = (d / "report" / "index.html").read_text(encoding="utf-8")
    mean_pool = (first["pool"]["AP"] + third["pool"]["AP"]) / 2
    # the section names the data set above; the two rows of "mine" told apart by their Scores column
    assert ">mine<" in page and f"{100 * mean_pool:.2f} ± " in page and ">re-ranked (top-10/class)<" in page


def test_a_calibrated_run_is_marked_in_the_table(detection_files, capsys):
    d = detection_files
    store = d / "store.sqlite"
    gt, res = d / "s" / "gt.json", d / "s" / "results.json"
    assert run(capsys, "detection", "split", "--gt", gt, "--out", d / "split.json")[0] == 0
    rc, _, err = run(capsys, "detection", "run", "--gt", gt, "--results", res, "--split", d / "split.json",
                     "--calibrate", "platt", "--method", "mine-platt", "--store", store)
    assert rc == 0, err
    rc, _, err = run(capsys, "detection", "eval", "--gt", gt, "--results", res, "--split", d / "split.json",
                     "--method", "mine", "--store", store)
    assert rc == 0, err
    rows = {r["method"]: r for r in _table_json(capsys, store)}
    name = "vistabench synthetic LVIS-like set"  # the ground truth's own info.description names the data
    assert rows[f"mine-platt ({name})"]["scores"] == "calibrated (platt)"
    assert rows[f"mine ({name})"]["scores"] == "as detected"
