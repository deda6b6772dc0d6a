"""`vistabench detection errors | operating | confusion` and `eval --per-class`: the JSON is the library's
result, the human text its rendering (markdown or CSV), mistakes are one line with exit 2."""

from __future__ import annotations

import csv
import io
import json

import pytest

from vistabench.cli import build_parser, main
from vistabench.data.coco import read_ground_truth, read_results
from vistabench.metrics.detection import confusion_matrix, decompose_errors, per_class_results


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("synth")
    assert main(["detection", "synth", "--out", str(d), "--images", "20", "--categories", "10",
                 "--dets-per-image", "30", "--seed", "2"]) == 0
    return ["--gt", str(d / "gt.json"), "--results", str(d / "results.json")]


def _read(files):
    g = read_ground_truth(files[1])
    return g, read_results(files[3], g)


def test_errors_json_names_the_figures_in_ap_points_and_equals_the_library(capsys, files):
    rc, out, err = run(capsys, "detection", "errors", *files, "--ap", "tide,fixed,pool", "--json")
    assert rc == 0, err
    res = json.loads(out)
    keys = {"AP", "Cls", "Loc", "Both", "Dupe", "Bkg", "Miss", "FalsePos", "FalseNeg", "counts"}
    assert set(res["tide"]) == keys and set(res["fixed"]) == keys | {"groups"} and set(res["pool"]["groups"]) == {"r", "c", "f"}
    assert res["settings"]["scale"] == "AP points (0-100)" and 1 < res["tide"]["AP"] <= 100
    g, d = _read(files)
    lib = decompose_errors(g, d, variants=("tide", "fixed", "pool")).results
    for v in ("tide", "fixed", "pool"):
        for k in keys - {"counts"}:
            assert res[v][k] == pytest.approx(lib[v][k], abs=1e-12) or (res[v][k] is None and lib[v][k] != lib[v][k])
    rc, text, _ = run(capsys, "detection", "errors", *files, "--ap", "tide,fixed,pool")
    args = build_parser().parse_args(["detection", "errors", *files, "--ap", "tide,fixed,pool"])
    assert text.rstrip("\n") == args.human(res)
    assert "| tide |" in text and "| fixed (c) |" in text and "FalseNeg" in text


def test_eval_per_class_table_csv_json_and_record(capsys, files, tmp_path):
    store = str(tmp_path / "s.sqlite")
    rc, out, err = run(capsys, "detection", "eval", *files, "--per-class", "--json", "--store", store)
    assert rc == 0, err
    res = json.loads(out)
    rows = res["per_class"]["rows"]
    g, d = _read(files)
    assert rows == json.loads(json.dumps(per_class_results(g, d).rows()).replace("NaN", "null"))
    rc, out, _ = run(capsys, "detection", "eval", *files, "--per-class", "--format", "csv", "--no-store")
    table = list(csv.reader(io.StringIO(out)))
    assert table[0] == ["category", "AP", "AP50", "AP75", "recall", "GT", "dets"] and len(table) == 1 + len(rows)
    assert table[1][0] == rows[0]["name"]
    rc, out, _ = run(capsys, "detection", "eval", *files, "--per-class", "--no-store")
    assert "AP^Old" in out and "per category (AP^Old, %, worst first)" in out
    from vistabench.store import ResultsStore

    with ResultsStore(store) as s:
        (rec,) = s.records(protocol="detection")
    assert rec.metrics["per_class"]["rows"][0]["name"] == rows[0]["name"]


def test_operating_and_confusion(capsys, files):
    rc, out, err = run(capsys, "detection", "operating", *files, "--score-threshold", "0.5", "--json")
    assert rc == 0, err
    res = json.loads(out)
    assert {"precision", "recall", "f1", "best_f1", "best_threshold"} <= set(res["overall"])
    assert res["rows"][0]["best_f1"] <= res["rows"][-1]["best_f1"] or res["rows"][-1]["best_f1"] is None
    rc, out, _ = run(capsys, "detection", "operating", *files, "--format", "csv")
    assert out.splitlines()[0] == "category,GT,dets,best F1,at score,P,R" and out.splitlines()[-1].startswith("overall,")
    rc, out, err = run(capsys, "detection", "confusion", *files, "--iou", "0.5", "--score-threshold", "0.3", "--json")
    assert rc == 0, err
    res = json.loads(out)
    g, d = _read(files)
    assert res["matrix"] == confusion_matrix(g, d, iou=0.5, score_threshold=0.3).tolist()
    assert res["rows"][-1] == "background" and res["columns"][-1] == "missed"
    rc, out, _ = run(capsys, "detection", "confusion", *files, "--format", "csv")
    assert out.splitlines()[0].endswith(",missed") and out.splitlines()[-1].startswith("background,")


@pytest.mark.parametrize("argv,msg", [
    (["errors", "--ap", "old"], "--ap: expected a non-empty subset of tide, fixed, pool, got 'old'"),
    (["errors", "--pos-iou", "2"], "--pos-iou: expected a number in [0, 1], got 2.0"),
    (["errors", "--bg-iou", "0.7"], "--bg-iou: expected at most --pos-iou (0.5), got 0.7"),
    (["operating", "--iou", "0.42"], "--iou: expected one of the evaluator's thresholds 0.5, 0.55, ..., 0.95, got 0.42"),
    (["confusion", "--iou", "0"], "--iou: expected a number in (0, 1], got 0.0"),
    (["eval", "--per-class", "--ap", "pool", "--no-store"], "--per-class: per-category results need AP^Old or AP^Fixed"),
])
def test_mistakes_are_one_line(capsys, files, argv, msg):
    rc, out, err = run(capsys, "detection", *argv, *files)
    assert rc == 2 and out == ""
    assert err.startswith(f"vistabench: error: {msg}") and err.count("\n") == 1


def test_eval_errors_is_stored_and_the_report_shows_it(capsys, files, tmp_path):
    store = str(tmp_path / "s.sqlite")
    rc, out, err = run(capsys, "detection", "eval", *files, "--errors", "--per-class", "--ap", "old,fixed",
                       "--json", "--store", store, "--method", "mine")
    assert rc == 0, err
    res = json.loads(out)
    assert set(res["errors"]) == {"tide", "fixed", "settings"}  # tide, plus the per-category variant asked for
    g, d = _read(files)
    lib = decompose_errors(g, d, variants=("tide", "fixed")).results
    assert res["errors"]["fixed"]["Bkg"] == pytest.approx(lib["fixed"]["Bkg"], abs=1e-12)
    rc, out, _ = run(capsys, "report", "--out", str(tmp_path / "rep"), "--store", store)
    html = (tmp_path / "rep" / "index.html").read_text()
    assert rc == 0 and "Why AP is low (mine" in html and "AP^Fixed c" in html and "lowest AP^Old" in html
    rc, out, _ = run(capsys, "detection", "eval", *files, "--errors", "--no-store")
    assert "| tide |" in out and "| pool (f) |" in out and "AP^Old" in out
