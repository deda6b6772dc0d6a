"""What a table counts (vistabench.report.results): one result per predictions scored, modes never mixed.

The same predictions scored resampled, exact and resampled again give one resampled row (N = 1) and
the exact result apart (`--mode exact`), through the command line that users run."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vistabench.cli import main
from vistabench.data import Predictions, save_predictions
from vistabench.protocols.longtail.runner import score, to_record
from vistabench.protocols.longtail.sweep import build_sweep, write_sweep
from vistabench.report.longtail import longtail_table
from vistabench.report.results import distinct_results, record_mode, result_key
from vistabench.store import ResultsStore


def _table(capsys, *argv: str) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def longtail_files(tmp_path):
    labels = np.repeat(np.arange(4), 30)
    sweep = build_sweep(labels, [300, 100, 30, 3], test_imbalance=100, points=4, repeats=2, seed=0)
    write_sweep(tmp_path / "sweep.json", sweep)
    rng = np.random.default_rng(0)
    paths = []
    for seed in range(2):  # two models' predictions (two seeds)
        logits = rng.normal(size=(len(labels), 4)) + 2.0 * np.eye(4)[labels] * (seed + 1)
        save_predictions(tmp_path / f"pred{seed}.npz", labels=labels, logits=logits)
        paths.append(tmp_path / f"pred{seed}.npz")
    return tmp_path / "sweep.json", paths


def test_longtail_resampled_exact_resampled_is_one_result_per_mode(tmp_path, capsys, longtail_files):
    sweep, (pred, other) = longtail_files
    store = str(tmp_path / "s.sqlite")
    for extra in ([], ["--exact"], []):  # the same predictions scored resampled, exact, resampled again
        assert main(["longtail", "score", "--predictions", str(pred), "--sweep", str(sweep), "--method", "ce",
                     "--dataset", "toy", "--seed", "0", "--store", store, "--json", *extra]) == 0
    capsys.readouterr()
    with ResultsStore(store, read_only=True) as s:
        recs = s.records(protocol="longtail")
    assert [record_mode(r) for r in recs] == ["resampled", "exact", "resampled"]
    assert all(len(r.settings["predictions_sha256"]) == 64 for r in recs)
    assert result_key(recs[0]) == result_key(recs[2]) != result_key(recs[1])

    res = _table(capsys, "longtail", "table", "--store", store)
    (row,) = res["rows"]
    assert row["n"] == 1 and row["auc"] == pytest.approx(recs[2].metrics["auc"]) and row["auc_sd"] is None
    assert "resampled mode" in res["caption"]
    ex = _table(capsys, "longtail", "table", "--store", store, "--mode", "exact")
    (erow,) = ex["rows"]  # the exact result apart: the exact record, and the exact numbers every record keeps
    assert erow["n"] == 1 and erow["auc"] == pytest.approx(recs[1].metrics["auc"]) and "exact" in ex["caption"]
    assert erow["auc"] != row["auc"]
    assert _table(capsys, "table", "--protocol", "longtail", "--mode", "exact", "--store", store)["rows"] == ex["rows"]

    # a second predictions file under the same method: N = 2, and a spread over them
    assert main(["longtail", "score", "--predictions", str(other), "--sweep", str(sweep), "--method", "ce",
                 "--dataset", "toy", "--seed", "1", "--store", store]) == 0
    capsys.readouterr()
    (row,) = _table(capsys, "longtail", "table", "--store", store)["rows"]
    with ResultsStore(store, read_only=True) as s:
        aucs = [r.metrics["auc"] for r in s.records(protocol="longtail") if record_mode(r) == "resampled"]
    assert row["n"] == 2 and row["auc"] == pytest.approx(np.mean(aucs[1:]))
    assert row["auc_sd"] == pytest.approx(np.std(aucs[1:], ddof=1))


def test_longtail_mode_flags_refused_in_one_line(tmp_path, capsys, longtail_files):
    store = tmp_path / "s.sqlite"
    ResultsStore(store).close()
    assert main(["longtail", "table", "--store", str(store), "--exact", "--mode", "exact"]) == 0
    capsys.readouterr()
    assert main(["longtail", "table", "--store", str(store), "--exact", "--mode", "resampled"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--exact" in err[0]
    assert main(["longtail", "table", "--store", str(store), "--mode", "noisy"]) == 2
    assert "--mode" in capsys.readouterr().err
    assert main(["table", "--protocol", "smalldata", "--mode", "exact", "--store", str(store)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--mode" in err[0] and "one scoring mode" in err[0]


def test_incremental_exact_compat_exact_is_one_result_both_formulas_as_columns(tmp_path, capsys):
    path = tmp_path / "acc.json"
    path.write_text(json.dumps({"matrix": [[0.8], [0.75, 0.3], [0.7, 0.25, 0.4]]}))
    store = str(tmp_path / "s.sqlite")
    for extra in ([], ["--compat"], []):
        assert main(["incremental", "score", "--matrix", str(path), "--base-classes", "60", "--way", "5",
                     "--method", "m", "--dataset", "toy", "--store", store, "--json", *extra]) == 0
    capsys.readouterr()
    with ResultsStore(store, read_only=True) as s:
        recs = s.records(protocol="incremental")
    assert [record_mode(r) for r in recs] == ["exact", "compat", "exact"]
    assert len(distinct_results(recs)) == 1
    res = _table(capsys, "incremental", "table", "--store", store)
    measured = [r for r in res["rows"] if r["n"] != "ref."]
    (row,) = measured  # one row, N = 1: the compat formula is its own column, recomputed from the matrix
    assert row["n"] == 1 and row["gacc"] != row["gacc_compat"] and row["gacc_compat"] is not None
    assert row["gacc_compat"] == pytest.approx(recs[1].metrics["gacc"])
    assert row["gacc"] == pytest.approx(recs[0].metrics["gacc"])


def test_old_records_without_a_hash_fall_back_to_seed_path_and_numbers():
    labels = np.repeat(np.arange(3), 20)
    sweep = build_sweep(labels, [100, 30, 5], test_imbalance=20, points=3, repeats=2)
    a = Predictions(labels=labels, kind="pred", values=labels)
    b = Predictions(labels=labels, kind="pred", values=np.where(labels == 2, 0, labels))

    def rec(pred, seed, path, rid):
        r = to_record(score(pred, sweep), dataset="toy", method="ce", seed=seed, split_hash="s",
                      settings={"predictions": path})
        r.id = rid
        return r

    recs = [rec(a, 0, "a.npz", 1), rec(a, 0, "a.npz", 2), rec(b, 0, "b.npz", 3), rec(a, 1, "a.npz", 4)]
    kept = distinct_results(recs)
    assert [r.id for r in kept] == [2, 3, 4]  # the re-score replaces the first; other files and seeds stay
    (row,) = longtail_table(recs).rows
    assert row["n"] == 3


def test_where_a_run_trained_is_not_part_of_its_result():
    """A small-data final run trained alone, in lanes or as a job gives the same numbers (the
    placement says how to read its cost): re-running it another way is the same result, N = 1."""
    from vistabench.store import Record

    def rec(rid, placement, seconds):
        r = Record("smalldata", "digits", "ce", 0, "h", {"split": 0, "repeat": 0, "placement": placement},
                   {"balanced_accuracy": 0.9, "train_seconds": seconds}, kind="final")
        r.id = rid
        return r

    recs = [rec(1, {"kind": "alone"}, 3.0), rec(2, {"kind": "lanes", "lanes": 2}, 4.5),
            rec(3, {"kind": "job", "engine": "local"}, 3.2)]
    assert [r.id for r in distinct_results(recs)] == [3]
    other = Record("smalldata", "digits", "ce", 0, "h", {"split": 0, "repeat": 0, "placement": {"kind": "alone"},
                                                         "epochs": 9}, {"balanced_accuracy": 0.9}, kind="final")
    assert result_key(other) != result_key(recs[0])  # a setting that makes the result still counts
