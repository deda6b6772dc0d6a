"""`vistabench detection ...` end to end: --json output, files written, one-line errors (exit 2)."""

from __future__ import annotations

import json

import pytest

from vistabench.cli import main


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def synth_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("synth")
    assert main(["detection", "synth", "--out", str(d), "--images", "30", "--categories", "20",
                 "--dets-per-image", "40", "--seed", "1"]) == 0
    return d


def test_eval_json(capsys, synth_dir, tmp_path):
    rc, out, err = run(capsys, "detection", "eval", "--gt", str(synth_dir / "gt.json"), "--results",
                       str(synth_dir / "results.json"), "--json", "--store", str(tmp_path / "s.sqlite"))
    assert rc == 0, err
    res = json.loads(out)
    assert set(res) == {"old", "fixed", "pool", "settings", "pr50", "record_id", "scale"}
    assert res["scale"].startswith("fractions (0-1)")  # the JSON names its unit; the text shows %
    assert isinstance(res["record_id"], int)
    assert set(res["old"]) == {"AP", "AP50", "AP75", "APs", "APm", "APl", "APr", "APc", "APf", "AR@300",
                               "ARs@300", "ARm@300", "ARl@300"}
    assert set(res["pool"]) == {"AP", "AP50", "AP75", "APr", "APc", "APf"}
    assert all(v is None or 0 <= v <= 1 for v in res["old"].values())
    rc, out, _ = run(capsys, "detection", "eval", "--gt", str(synth_dir / "gt.json"), "--results",
                     str(synth_dir / "results.json"), "--ap", "fixed", "--json")
    assert set(json.loads(out)) == {"fixed", "settings", "pr50", "record_id", "scale"}
    rc, out, _ = run(capsys, "table", "--protocol", "detection", "--store", str(tmp_path / "s.sqlite"))
    assert rc == 0 and "AP^Pool" in out


def test_rerank_and_calibrate(capsys, synth_dir, tmp_path):
    rr = tmp_path / "rr.json"
    rc, out, err = run(capsys, "detection", "rerank", "--results", str(synth_dir / "results.json"),
                       "--per-class-topk", "5", "--out", str(rr), "--json")
    assert rc == 0, err
    kept = json.loads(rr.read_text())
    assert json.loads(out)["kept"] == len(kept)
    per_cat = {}
    for d in kept:
        per_cat[d["category_id"]] = per_cat.get(d["category_id"], 0) + 1
    assert max(per_cat.values()) <= 5
    cal = tmp_path / "cal.json"
    rc, out, err = run(capsys, "detection", "calibrate", "fit", "--gt", str(synth_dir / "gt.json"), "--results",
                       str(synth_dir / "results.json"), "--method", "isotonic", "--out", str(cal))
    assert rc == 0 and cal.is_file(), err
    out_dt = tmp_path / "cal_dt.json"
    rc, out, err = run(capsys, "detection", "calibrate", "apply", "--calibration", str(cal), "--results",
                       str(synth_dir / "results.json"), "--out", str(out_dt))
    assert rc == 0 and len(json.loads(out_dt.read_text())) == len(json.loads((synth_dir / "results.json").read_text()))


@pytest.mark.parametrize("content,msg", [
    ('[{"image_id": 3, "category_id": 1, "bbox": [0, 0, 1, 1], "score": NaN}]', "non-finite score"),
    ('[{"image_id": 424242, "category_id": 1, "bbox": [0, 0, 1, 1], "score": 0.5}]', "different dataset"),
    ('[{"image_id": 3, "category_id": 1, "bbox": [0, 0, -1, 1], "score": 0.5}]', "negative width"),
    ('[{"image_id": 3, "category_id": 1', "malformed JSON"),
])
def test_eval_errors_are_one_line(capsys, synth_dir, tmp_path, content, msg):
    p = tmp_path / "bad.json"
    p.write_text(content)
    rc, out, err = run(capsys, "detection", "eval", "--gt", str(synth_dir / "gt.json"), "--results", str(p))
    assert rc == 2 and msg in err and err.count("\n") == 1 and err.startswith("vistabench: error:")


def test_bad_options(capsys, synth_dir):
    rc, _, err = run(capsys, "detection", "eval", "--gt", str(synth_dir / "gt.json"), "--results",
                     str(synth_dir / "results.json"), "--ap", "old,new")
    assert rc == 2 and "--ap" in err
    rc, _, err = run(capsys, "detection", "eval", "--gt", str(synth_dir / "nope.json"), "--results",
                     str(synth_dir / "results.json"))
    assert rc == 2 and "no such file" in err
    rc, _, err = run(capsys, "detection", "calibrate", "apply", "--calibration", str(synth_dir / "gt.json"),
                     "--results", str(synth_dir / "results.json"), "--out", "x.json")
    assert rc == 2 and "not a vistabench detection calibration" in err


def test_calibrate_fit_devil_recipe(capsys, synth_dir, tmp_path):
    rc, out, err = run(capsys, "detection", "calibrate", "fit", "--gt", str(synth_dir / "gt.json"), "--results",
                       str(synth_dir / "results.json"), "--recipe", "devil", "--out", str(tmp_path / "c.json"), "--json")
    assert rc == 0, err
    assert json.loads(out)["recipe"] == "devil"
    cal = json.loads((tmp_path / "c.json").read_text())
    assert cal["fallback"] == {"kind": "zero"}
    rc, _, err = run(capsys, "detection", "calibrate", "fit", "--gt", str(synth_dir / "gt.json"), "--results",
                     str(synth_dir / "results.json"), "--recipe", "devil", "--method", "bbq", "--out",
                     str(tmp_path / "c2.json"))
    assert rc == 2 and "devil recipe has" in err and err.count("\n") == 1
    rc, _, err = run(capsys, "detection", "calibrate", "fit", "--gt", str(synth_dir / "gt.json"), "--results",
                     str(synth_dir / "results.json"), "--method", "plat", "--out", str(tmp_path / "c3.json"))
    assert rc == 2 and "did you mean 'platt'" in err


def test_annotation_id_zero_warns_one_line(capsys, tmp_path):
    gt = {"images": [{"id": 1, "height": 100, "width": 100, "neg_category_ids": [], "not_exhaustive_category_ids": []}],
          "categories": [{"id": 1, "frequency": "f"}],
          "annotations": [{"id": 0, "image_id": 1, "category_id": 1, "bbox": [0, 0, 10, 10], "area": 100},
                          {"id": 1, "image_id": 1, "category_id": 1, "bbox": [50, 50, 10, 10], "area": 100}]}
    res = [{"image_id": 1, "category_id": 1, "bbox": [0, 0, 10, 10], "score": 0.9},
           {"image_id": 1, "category_id": 1, "bbox": [50, 50, 10, 10], "score": 0.8}]
    (tmp_path / "gt.json").write_text(json.dumps(gt))
    (tmp_path / "dt.json").write_text(json.dumps(res))
    rc, out, err = run(capsys, "detection", "eval", "--gt", str(tmp_path / "gt.json"), "--results",
                       str(tmp_path / "dt.json"), "--ap", "old", "--json")
    assert rc == 0 and abs(json.loads(out)["old"]["AP"] - 1.0) < 1e-12
    lines = [line for line in err.splitlines() if "id 0" in line]
    assert len(lines) == 1 and "lvis-api and pycocotools" in lines[0]


def test_eval_text_shows_ap_in_percent_and_coco_data_no_frequency_rows(capsys, tmp_path):
    """One unit for AP in every text view (%): the eval's lines are 100 x its JSON's fractions; COCO ground
    truth has no LVIS frequency groups, so no APr/APc/APf line at all (not an "n/a" row)."""
    assert main(["detection", "synth", "--out", str(tmp_path), "--images", "20", "--categories", "8",
                 "--dets-per-image", "20", "--format", "coco"]) == 0
    files = ["--gt", str(tmp_path / "gt.json"), "--results", str(tmp_path / "results.json"), "--no-store"]
    capsys.readouterr()
    rc, out, _ = run(capsys, "detection", "eval", *files, "--json")
    res = json.loads(out)
    rc, text, err = run(capsys, "detection", "eval", *files)
    assert rc == 0, err
    assert text.startswith("AP in % (--json: fractions)")
    assert f"  AP         {100 * res['old']['AP']:.2f}\n" in text
    assert res["old"]["APr"] is None and "APr" not in text and "n/a" not in text


def test_eval_per_class_top_and_sort(capsys, synth_dir):
    files = ["--gt", str(synth_dir / "gt.json"), "--results", str(synth_dir / "results.json"), "--no-store"]
    rc, out, _ = run(capsys, "detection", "eval", *files, "--per-class", "--json")
    rows = [r for r in json.loads(out)["per_class"]["rows"] if r["AP"] is not None]
    for sort, key in (("best", lambda r: -r["AP"]), ("worst", lambda r: r["AP"])):
        rc, out, err = run(capsys, "detection", "eval", *files, "--per-class", "--format", "csv", "--sort", sort,
                           "--top", "3")
        assert rc == 0, err
        table = out.splitlines()
        assert len(table) == 4 and [line.split(",")[0] for line in table[1:]] == \
            [r["name"] for r in sorted(rows, key=key)][:3]
    rc, out, _ = run(capsys, "detection", "eval", *files, "--per-class", "--sort", "gt", "--top", "2")
    assert "most ground truth first, the first 2 of" in out
    rc, out, err = run(capsys, "detection", "eval", *files, "--top", "2")
    assert rc == 2 and err == "vistabench: error: --top: only with --per-class (it orders the per-category table)\n"
    rc, out, err = run(capsys, "detection", "eval", *files, "--per-class", "--sort", "bad")
    assert rc == 2 and "--sort" in err and err.count("\n") == 1
