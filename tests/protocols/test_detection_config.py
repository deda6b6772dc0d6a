"""DetectionConfig: grid keys of the examples, recipes, refusals; run(config) through the CLI and a file."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from vistabench.cli import main
from vistabench.config import read_config_file
from vistabench.data.detection_synth import synth_detection_set
from vistabench.errors import InputError
from vistabench.grid.config import cell_key
from vistabench.protocols.detection.runner import read_detection_set, restrict_images, run
from vistabench.protocols.detection.config import CalibrationSettings, DetectionConfig
from vistabench.store import ResultsStore

ROOT = Path(__file__).resolve().parents[2]

# `vistabench grid status FILE --json` keys before the typed config (computed from argparse defaults)
OLD_KEYS = {
    "detection-lvis.yaml": ["71636d5b9775e4aa", "c103e3ab57f8e3f9", "f52422dfb3eb5bce", "a4f8a5766ca113b9",
                            "2ed1547eae629048", "5a5566b1f4d5295e"],
    "detection-tiny.yaml": ["5713e04b62559401", "333ec7d3b118f584", "0ed3049d96c2c0e6"],
}
OLD_CANONICAL_TINY_K10 = {"calibrate": None, "dataset": None, "dets_per_class": 10, "gt": "detection-tiny/gt.json",
                          "iou_type": "bbox", "max_dets_per_image": None, "method": "synth-k10",
                          "results": "detection-tiny/results.json", "seed": None, "split": None, "tag": None}


@pytest.mark.parametrize("name", sorted(OLD_KEYS))
def test_example_cells_keep_their_keys(name):
    data = read_config_file(ROOT / "examples" / name)
    assert data["protocol"] == "detection" and list(data["grid"]) == ["cases"]
    keys = []
    for case in data["grid"]["cases"]:
        config = DetectionConfig.from_dict({**data["fixed"], **case})
        keys.append(cell_key("detection", config.key_dict()))
        if case.get("method") == "synth-k10":
            assert config.key_dict() == OLD_CANONICAL_TINY_K10
    assert keys == OLD_KEYS[name]


def test_recipes_resolve_and_show_in_the_key():
    base = {"gt": "g.json", "results": "r.json", "split": "s.json"}
    ours = DetectionConfig.from_dict({**base, "calibrate": "histbin"})
    assert (ours.min_samples, ours.bins, ours.calibration_iou_type) == (20, 10, "bbox")
    assert "recipe" not in ours.key_dict() and "min_samples" not in ours.key_dict()
    devil = DetectionConfig.from_dict({**base, "calibrate": "histbin", "recipe": "devil"})
    assert (devil.min_samples, devil.bins, devil.calibration_iou_type) == (None, 20, "auto")
    assert devil.key_dict()["recipe"] == "devil" and devil.key_dict()["bins"] == 20
    assert devil.calibration() == CalibrationSettings.from_dict({"method": "histbin", "recipe": "devil"})
    # what the user gives wins over the recipe
    assert DetectionConfig.from_dict({**base, "calibrate": "histbin", "recipe": "devil", "bins": 15}).bins == 15
    # a directly built config is resolved the same way
    assert DetectionConfig(**base, calibrate="histbin", recipe="devil") == devil
    assert DetectionConfig.from_dict(devil.to_dict()) == devil


@pytest.mark.parametrize("extra, message", [
    ({"calibrate": "platt", "recipe": "devil", "min_samples": 5}, "min_samples: not read by the devil recipe"),
    ({"min_samples": 5}, "min_samples: only read when calibrating"),
    ({"recipe": "devil"}, "recipe: only read when calibrating"),
    ({"calibration_iou": 0.5}, "calibration_iou: only read when calibrating"),
    ({"calibrate": "platt", "bins": 5}, "bins: only read by histbin"),
    ({"calibrate": "bbq", "recipe": "devil"}, "calibrate: the devil recipe has histbin, platt"),
    ({"calibrate": "plat"}, "calibrate: unknown calibration method 'plat'; did you mean 'platt'"),
    ({"calibrate": "platt", "calibration_iou": 1.5}, "calibration_iou: expected a number <= 1"),
    ({"calibrate": "platt", "split": None}, "split: calibrate needs a split"),
    ({"dets_per_class": 0}, "dets_per_class: expected a number >= 1"),
    ({"iou_type": "mask"}, "iou_type: expected one of bbox, segm"),
])
def test_options_nothing_reads_are_refused(extra, message):
    with pytest.raises(InputError) as err:
        DetectionConfig.from_dict({"gt": "g.json", "results": "r.json", "split": "s.json", **extra})
    assert message in str(err.value)


def test_calibration_settings_refusals():
    with pytest.raises(InputError, match="min_samples: not read by the devil recipe"):
        CalibrationSettings.from_dict({"recipe": "devil", "min_samples": 3})
    with pytest.raises(InputError, match="min_samples: not read by the devil recipe"):
        CalibrationSettings(recipe="devil", min_samples=3)
    assert CalibrationSettings.from_dict({"method": "isotonic"}).min_samples == 20


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("det")
    s = synth_detection_set(num_images=40, num_categories=15, dets_per_image=30, seed=4, masks=True)
    (d / "gt.json").write_text(json.dumps(s.ground_truth))
    (d / "dt.json").write_text(json.dumps(s.results))
    assert main(["detection", "split", "--gt", str(d / "gt.json"), "--out", str(d / "split.json")]) == 0
    return d


def test_print_config_is_fast_and_reads_no_file(tmp_path):
    # files that do not exist: printing the config must not read them
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "vistabench", "detection", "run", "--gt", "nope.json", "--results",
                          "nope2.json", "--split", "s.json", "--calibrate", "histbin", "--recipe", "devil",
                          "--print-config", "--json"], check=False, capture_output=True, text=True, cwd=tmp_path)
    elapsed = time.perf_counter() - t0
    assert out.returncode == 0, out.stderr
    printed = json.loads(out.stdout)
    assert printed["bins"] == 20 and printed["calibration_iou_type"] == "auto" and printed["min_samples"] is None
    assert set(printed) == {i.name for i in DetectionConfig.fields_info()}
    assert elapsed < 3, elapsed


def test_run_from_flags_equals_run_from_printed_config(files, tmp_path, capsys):
    argv = ["--gt", str(files / "gt.json"), "--results", str(files / "dt.json"), "--split", str(files / "split.json"),
            "--calibrate", "histbin", "--recipe", "devil", "--method", "m"]
    assert main(["detection", "run", *argv, "--print-config", "--json"]) == 0
    (tmp_path / "cfg.json").write_text(capsys.readouterr().out)
    store = str(tmp_path / "s.sqlite")
    assert main(["detection", "run", *argv, "--store", store, "--out", str(tmp_path / "w"), "--json"]) == 0
    by_flags = json.loads(capsys.readouterr().out)
    assert main(["detection", "run", "--config", str(tmp_path / "cfg.json"), "--store", store, "--json"]) == 0
    by_file = json.loads(capsys.readouterr().out)
    assert by_flags["settings"].pop("calibration_file") == str(tmp_path / "w" / "calibration.json")
    assert by_flags["settings"] == by_file["settings"] and by_flags["metrics"] == by_file["metrics"]
    # the devil recipe matched the calibration labels with mask IoU: the results carry masks
    assert by_file["settings"]["calibration_iou_type"] == "segm" and by_file["settings"]["recipe"] == "devil"
    with ResultsStore(store) as s:
        assert [r.id for r in s.records(protocol="detection")] == [by_flags["id"], by_file["id"]]
    # a bad option from the file or a flag: one line naming the flag
    assert main(["detection", "run", "--config", str(tmp_path / "cfg.json"), "--min-samples", "3", "--no-store"]) == 2
    assert capsys.readouterr().err.strip() == (
        "vistabench: error: --min-samples: not read by the devil recipe (the authors fit every category with a "
        "true positive and score the others 0); remove it or use recipe: vistabench")


def test_run_is_the_library_call(files):
    config = DetectionConfig.from_dict({"gt": str(files / "gt.json"), "results": str(files / "dt.json"),
                                        "iou_type": "segm", "seed": 3})
    (rec,) = run(config)
    # named from the data's own metadata (the synthetic set's info.description), not the file's name "gt"
    assert rec.id is None and rec.seed == 3 and rec.method == "dt"
    assert rec.dataset == json.loads((files / "gt.json").read_text())["info"]["description"] != "gt"
    assert rec.settings["iou_type"] == "segm"
    with pytest.raises(InputError, match="config: expected a DetectionConfig"):
        run({"gt": "x"})


def test_restrict_images_equals_reading_the_restricted_files(files):
    gt_json = json.loads((files / "gt.json").read_text())
    res = json.loads((files / "dt.json").read_text())
    split = json.loads((files / "split.json").read_text())
    keep = set(split["test"])
    gt, dets = read_detection_set(gt_json, res, masks=True)
    sub_gt, sub_dets = restrict_images(gt, dets, split["test"])
    ref_gt_json = {**gt_json, "images": [im for im in gt_json["images"] if im["id"] in keep],
                   "annotations": [a for a in gt_json["annotations"] if a["image_id"] in keep]}
    ref_gt, ref_dets = read_detection_set(ref_gt_json, [r for r in res if r["image_id"] in keep], masks=True)
    for name in ("image_ids", "category_ids", "image", "category", "bbox", "area", "ignore", "negative",
                 "not_exhaustive", "image_size"):
        assert np.array_equal(getattr(sub_gt, name), getattr(ref_gt, name)), name
    for name in ("image", "category", "bbox", "score", "area"):
        assert np.array_equal(getattr(sub_dets, name), getattr(ref_dets, name)), name
    assert sub_dets.segmentation == ref_dets.segmentation and sub_gt.segmentation == ref_gt.segmentation
