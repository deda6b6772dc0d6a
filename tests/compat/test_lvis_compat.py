"""vistabench.compat.lvis against lvis-api itself: get_results() key for key, bbox and segm."""

from __future__ import annotations

import copy
import importlib.util
import json
import pathlib

import numpy as np
import pytest

from vistabench.compat.lvis import LVIS, LVISEval, LVISResults
from vistabench.data.detection_synth import synth_detection_set

_spec = importlib.util.spec_from_file_location(
    "_detection_reference", pathlib.Path(__file__).parents[1] / "metrics" / "_detection_reference.py")
_ref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ref)


def _official(gt_path, results, iou_type, max_dets):
    _ref._restore_np_float()
    import lvis

    g = lvis.LVIS(str(gt_path))
    e = lvis.LVISEval(g, lvis.LVISResults(g, copy.deepcopy(results), max_dets=max_dets), iou_type)
    e.run()
    return e


def _same(ours, ref):
    assert list(ours.keys()) == list(ref.keys())
    for k in ref:
        assert abs(float(ours[k]) - float(ref[k])) <= 1e-9, (k, ours[k], ref[k])


@pytest.mark.parametrize("iou_type", ["bbox", "segm"])
def test_get_results_equal_lvis_api(tmp_path, iou_type):
    s = synth_detection_set(num_images=12, num_categories=8, dets_per_image=25, seed=21, image_size=(120, 160))
    gt, res = (_ref.triangle_masks(s.ground_truth, s.results, seed=3) if iou_type == "segm"
               else (s.ground_truth, s.results))
    p = tmp_path / "gt.json"
    p.write_text(json.dumps(gt))
    d = tmp_path / "dt.json"
    d.write_text(json.dumps(res))
    ref = _official(p, res, iou_type, 20)
    g = LVIS(str(p))
    e = LVISEval(g, LVISResults(g, str(d), max_dets=20), iou_type)
    e.run()
    _same(e.get_results(), ref.get_results())
    assert np.array_equal(e.eval["precision"], ref.eval["precision"])  # -1 marks included, as lvis-api
    # a list of dicts and the default limit, the way detectron2 calls it
    e2 = LVISEval(g, LVISResults(g, copy.deepcopy(res)), iou_type)
    e2.run()
    _same(e2.get_results(), _official(p, res, iou_type, 300).get_results())
    assert g.get_cat_ids() == [c["id"] for c in gt["categories"]]  # file order, as lvis-api


def test_print_results_and_undefined_is_minus_one(tmp_path, capsys):
    s = synth_detection_set(num_images=6, num_categories=5, dets_per_image=10, seed=22)
    p = tmp_path / "gt.json"
    p.write_text(json.dumps(s.ground_truth))
    e = LVISEval(str(p), copy.deepcopy(s.results), "bbox")
    e.run()
    e.print_results()
    assert "Average Precision  (AP) @[ IoU=0.50:0.95" in capsys.readouterr().out
    ref = _official(p, s.results, "bbox", 300).get_results()
    _same(e.get_results(), ref)


@pytest.mark.parametrize("iou_type", ["bbox", "segm"])
def test_annotation_id_zero_is_scored_as_lvis_api_unless_asked(tmp_path, iou_type):
    import warnings

    from vistabench.metrics.detection import OfficialToolsDifferenceWarning

    s = synth_detection_set(num_images=8, num_categories=4, dets_per_image=12, seed=23, image_size=(120, 160))
    gt, res = (_ref.triangle_masks(s.ground_truth, s.results, seed=4) if iou_type == "segm"
               else (copy.deepcopy(s.ground_truth), s.results))
    first = gt["annotations"][0]["id"]
    for a in gt["annotations"]:
        a["id"] -= first  # ids from 0
    a0 = gt["annotations"][0]
    res = [*res, {k: v for k, v in a0.items() if k in ("image_id", "category_id", "bbox", "segmentation")} | {"score": 1.0}]
    p = tmp_path / "gt.json"
    p.write_text(json.dumps(gt))
    with pytest.warns(OfficialToolsDifferenceWarning, match=r"match_zero_id=True"):
        e = LVISEval(str(p), copy.deepcopy(res), iou_type)
        e.run()
    _same(e.get_results(), _official(p, res, iou_type, 300).get_results())
    for a in gt["annotations"]:
        a["id"] += 1  # the same set numbered from 1: what the option counts
    p1 = tmp_path / "gt1.json"
    p1.write_text(json.dumps(gt))
    with warnings.catch_warnings():
        warnings.simplefilter("error", OfficialToolsDifferenceWarning)
        fixed = LVISEval(str(p), copy.deepcopy(res), iou_type, match_zero_id=True)
        fixed.run()
    _same(fixed.get_results(), _official(p1, res, iou_type, 300).get_results())
    assert fixed.get_results()["AP"] > e.get_results()["AP"]  # the match to id 0 counts only with the option


@pytest.mark.parametrize("field, value, cls, msg", [
    ("iou_thrs", [], IndexError, r"params.iou_thrs: empty"),
    ("iou_thrs", [0.5, float("nan")], ValueError, r"params.iou_thrs: nan is not a threshold"),
    ("rec_thrs", [], ValueError, r"params.rec_thrs: empty"),
    ("area_rng", [[0, 1e10], [100, 10], [0, 1], [1, 2]], ValueError, r"params.area_rng: range 1"),
    ("area_rng", [[0, 1e10]], IndexError, r"params.area_rng_lbl: 4 label\(s\) for 1 area range\(s\)"),
])
def test_params_mistakes_are_one_line(tmp_path, field, value, cls, msg):
    from vistabench.errors import InputError

    s = synth_detection_set(num_images=4, num_categories=3, dets_per_image=5, seed=24)
    p = tmp_path / "gt.json"
    p.write_text(json.dumps(s.ground_truth))
    e = LVISEval(str(p), copy.deepcopy(s.results), "bbox")
    setattr(e.params, field, value)
    with pytest.raises(cls, match=msg) as ei:
        e.run()
    assert isinstance(ei.value, InputError) and "\n" not in str(ei.value)
