"""Provenance of results files made by `rerank` and `calibrate apply`: written beside them, extended
along a chain, honoured only for the bytes it was written for, and recorded by `run`."""

import json
import warnings

import pytest

from vistabench.data.predictions import file_sha256
from vistabench.protocols.detection.config import DetectionConfig
from vistabench.protocols.detection.runner import run
from vistabench.protocols.detection.provenance import (describe_steps, provenance_path, read_provenance,
                                                       record_settings)
from vistabench.protocols.detection.tools import (apply_calibration_file, fit_calibration_file, rerank_results_file,
                                                  write_synth_set)
from vistabench.report.detection import detection_table
from vistabench.store import ResultsStore


@pytest.fixture
def synth(tmp_path):
    write_synth_set(tmp_path / "s", num_images=30, num_categories=12, dets_per_image=25, seed=3)
    return tmp_path / "s"


def test_provenance_path_sits_beside_the_results():
    assert provenance_path("a/gamed.json").as_posix() == "a/gamed.provenance.json"
    assert provenance_path("dets").as_posix() == "dets.provenance.json"


def test_rerank_then_calibrate_writes_a_chain_from_the_detectors_file(synth, tmp_path):
    res = synth / "results.json"
    out = rerank_results_file(res, tmp_path / "rr.json", per_class_topk=5)
    prov = json.loads((tmp_path / "rr.provenance.json").read_text())
    assert out["provenance"] == str(tmp_path / "rr.provenance.json")
    assert prov["results_sha256"] == file_sha256(tmp_path / "rr.json")
    assert prov["source"] == {"path": str(res), "sha256": file_sha256(res)}
    assert prov["steps"] == [{"op": "rerank", "per_class_topk": 5}]

    fit_calibration_file(synth / "gt.json", res, tmp_path / "cal.json", {"method": "platt"})
    apply_calibration_file(tmp_path / "cal.json", tmp_path / "rr.json", tmp_path / "rrcal.json")
    prov2 = read_provenance(tmp_path / "rrcal.json", file_sha256(tmp_path / "rrcal.json"))
    assert prov2["source"] == prov["source"]  # still the detector's own file, two steps on
    assert [s["op"] for s in prov2["steps"]] == ["rerank", "calibrate"]
    assert prov2["steps"][1] == {"op": "calibrate", "method": "platt", "recipe": "vistabench",
                                 "calibration": str(tmp_path / "cal.json")}
    assert describe_steps(prov2["steps"]) == "re-ranked (top-5/class), then calibrated (platt)"
    st = record_settings(prov2)
    assert st["policy"] == "top-5/class" and st["calibration"] == "platt" and st["recipe"] == "vistabench"
    assert st["derived_from"] == prov["source"] and record_settings(None) == {}


def test_a_changed_or_foreign_file_is_scored_as_given_with_a_warning(synth, tmp_path):
    rr = tmp_path / "rr.json"
    rerank_results_file(synth / "results.json", rr, per_class_topk=5)
    dets = json.loads(rr.read_text())
    rr.write_text(json.dumps(dets[:-1]))  # edited after rerank wrote it
    with pytest.warns(UserWarning, match=r"written for another version of .*rr\.json"):
        assert read_provenance(rr, file_sha256(rr)) is None
    provenance_path(rr).write_text(json.dumps({"kind": "something else"}))
    with pytest.warns(UserWarning, match="not a vistabench detection provenance file"):
        assert read_provenance(rr, file_sha256(rr)) is None
    provenance_path(rr).write_text("{")
    with pytest.warns(UserWarning, match="not readable as JSON"):
        assert read_provenance(rr, file_sha256(rr)) is None
    provenance_path(rr).unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_provenance(rr, file_sha256(rr)) is None  # none at all: nothing to say


def test_run_records_a_reranked_file_and_the_table_keeps_it_apart(synth, tmp_path):
    gt, res = synth / "gt.json", synth / "results.json"
    rerank_results_file(res, tmp_path / "rr.json", per_class_topk=5)
    with ResultsStore(tmp_path / "st.sqlite") as store:
        (plain,) = run(DetectionConfig.from_dict({"gt": str(gt), "results": str(res), "method": "m"}), store=store)
        (gamed,) = run(DetectionConfig.from_dict({"gt": str(gt), "results": str(tmp_path / "rr.json"), "method": "m"}),
                       store=store)
        records = store.records()
    assert "policy" not in plain.settings and gamed.settings["policy"] == "top-5/class"
    assert gamed.settings["derived_from"]["sha256"] == file_sha256(res)
    rows = detection_table(records).rows
    assert [(r["n"], r["scores"]) for r in rows] == [(1, "as detected"), (1, "re-ranked (top-5/class)")]


def test_a_file_re_ranked_in_place_names_its_original_bytes(synth, tmp_path):
    f = tmp_path / "dets.json"
    f.write_bytes((synth / "results.json").read_bytes())
    before = file_sha256(f)
    rerank_results_file(f, f, per_class_topk=5)  # --out naming the same file
    prov = read_provenance(f, file_sha256(f))
    assert prov["source"] == {"path": str(f), "sha256": before} and before != prov["results_sha256"]
    rerank_results_file(f, f, per_class_topk=3)  # and again: the chain goes on from the first bytes
    prov = read_provenance(f, file_sha256(f))
    assert prov["source"]["sha256"] == before and [s["per_class_topk"] for s in prov["steps"]] == [5, 3]
