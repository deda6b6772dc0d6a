"""A record's data-set name comes from the ground truth's own metadata; the file's name is the fallback."""

from __future__ import annotations

import json

import pytest

from vistabench.data.coco_names import HEAD_BYTES, ground_truth_name, record_dataset_name


@pytest.mark.parametrize("content,expected", [
    ({"info": {"description": "COCO 2017 Dataset", "year": 2017}, "images": []}, "COCO 2017 Dataset"),
    ({"info": {"description": "  LVIS  v1 val "}, "images": []}, "LVIS v1 val"),
    ({"images": [], "dataset": "my-boxes"}, "my-boxes"),
    ({"dataset": {"name": "nested"}, "images": []}, "nested"),
    ({"info": {"description": ""}, "images": []}, None),  # empty: no name
    ({"info": {"year": 2017}, "images": []}, None),
    ({"images": [], "annotations": []}, None),
])
def test_the_name_is_the_files_own(tmp_path, content, expected):
    p = tmp_path / "gt.json"
    p.write_text(json.dumps(content))
    assert ground_truth_name(p) == expected
    assert record_dataset_name(p) == (expected or "gt")


def test_unreadable_or_cut_off_metadata_falls_back_to_the_file_name(tmp_path):
    assert ground_truth_name(tmp_path / "missing.json") is None
    assert record_dataset_name(tmp_path / "missing.json") == "missing"
    p = tmp_path / "big.json"  # "info" begins inside the head but ends after it: not guessed from a fragment
    p.write_text('{"images": [], "info": {"pad": "' + "x" * HEAD_BYTES + '", "description": "late"}}')
    assert ground_truth_name(p) is None and record_dataset_name(p) == "big"


def test_scoring_a_coco_file_names_the_record_from_its_description(tmp_path, capsys):
    from vistabench.cli import main
    from vistabench.store import ResultsStore

    assert main(["detection", "synth", "--out", str(tmp_path), "--images", "10", "--categories", "5",
                 "--dets-per-image", "10", "--format", "coco"]) == 0
    gt = json.loads((tmp_path / "gt.json").read_text())
    gt["info"]["description"] = "My COCO subset"
    (tmp_path / "gt.json").write_text(json.dumps(gt))
    store = tmp_path / "s.sqlite"
    assert main(["detection", "eval", "--gt", str(tmp_path / "gt.json"), "--results", str(tmp_path / "results.json"),
                 "--store", str(store)]) == 0
    with ResultsStore(store) as s:
        (rec,) = s.records(protocol="detection")
    assert rec.dataset == "My COCO subset" and rec.method == "results"  # a results list has no metadata
