"""Masks (segm) against lvis-api and pycocotools, with mask areas that differ from box areas."""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

from vistabench.data.coco import read_ground_truth, read_results
from vistabench.data.detection_synth import synth_detection_set
from vistabench.metrics.detection import evaluate_detections

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

_spec = importlib.util.spec_from_file_location(
    "_detection_reference", pathlib.Path(__file__).with_name("_detection_reference.py"))
_ref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ref)

FIXED_RENAME = {"AR@300": "AR@all", "ARs@300": "ARs@all", "ARm@300": "ARm@all", "ARl@300": "ARl@all"}


def _ours(gt_dict, results, **kw):
    gt = read_ground_truth(gt_dict, with_segmentation=True)
    return evaluate_detections(gt, read_results(results, gt, iou_type="segm"), iou_type="segm", **kw).results


@pytest.fixture(scope="module")
def lvis_set():
    s = synth_detection_set(num_images=10, num_categories=6, dets_per_image=15, seed=11, image_size=(120, 160))
    return _ref.triangle_masks(s.ground_truth, s.results, seed=1)


def test_lvis_segm_old_follows_lvis_api_fixed_and_pool_follow_the_authors(lvis_set, tmp_path):
    gt, res = lvis_set
    ours = _ours(gt, res, max_dets_per_image=10, dets_per_class=12)
    # AP^Old: lvis-api with the box kept (box area decides small/medium/large)
    old = _ref.lvis_results(_ref.lvis_eval(gt, res, tmp_path, iou_type="segm", max_dets=10))
    _ref.assert_close(ours["old"], old, rename={k: k.replace("@300", "@10") for k in FIXED_RENAME})
    # AP^Fixed / AP^Pool: the authors' script drops the box (mask area)
    e = _ref.lvis_fixed(gt, res, tmp_path, k=12, iou_type="segm")
    _ref.assert_close(ours["fixed"], _ref.lvis_results(e), rename=FIXED_RENAME)
    _ref.assert_close(ours["pool"], _ref.pooled_reference(e))
    # the option reproduces lvis-api's box areas instead, and the choice matters on this set
    box = _ours(gt, res, max_dets_per_image=10, dets_per_class=12, fixed_area="box")
    e_box = _ref.lvis_eval(gt, _ref.top_k_per_class(res, 12), tmp_path, iou_type="segm", max_dets=-1)
    _ref.assert_close(box["fixed"], _ref.lvis_results(e_box), rename=FIXED_RENAME)
    assert any(box["fixed"][k] != ours["fixed"][k] for k in ("APs", "APm", "APl"))


def test_coco_segm_with_crowd_matches_pycocotools(tmp_path):
    s = synth_detection_set(num_images=12, num_categories=5, dets_per_image=20, seed=12, format="coco",
                            image_size=(120, 160))
    gt, res = _ref.triangle_masks(s.ground_truth, s.results, seed=2)
    crowd = [a for a in gt["annotations"] if a["iscrowd"]]
    assert crowd and isinstance(crowd[0]["segmentation"]["counts"], list)
    ours = _ours(gt, res)
    _ref.assert_close(ours["old"], _ref.coco_eval(gt, res, tmp_path, iou_type="segm"))


def test_segm_results_without_boxes_use_mask_area(lvis_set, tmp_path):
    gt, res = lvis_set
    nobox = [{k: v for k, v in r.items() if k != "bbox"} for r in res]
    ours = _ours(gt, nobox, max_dets_per_image=10)
    ref = _ref.lvis_results(_ref.lvis_eval(gt, nobox, tmp_path, iou_type="segm", max_dets=10))
    _ref.assert_close(ours["old"], ref, rename={k: k.replace("@300", "@10") for k in FIXED_RENAME})


def test_mask_areas_for_many_detections():
    # pycocotools' area() on a list of >= 256 RLEs overflows: the evaluator must not depend on it
    from dataclasses import replace

    import pycocotools.mask as mu

    s = synth_detection_set(num_images=20, num_categories=10, dets_per_image=20, seed=0, masks=True)
    gt = read_ground_truth(s.ground_truth, with_segmentation=True)
    d = read_results(s.results, gt, iou_type="segm")
    assert len(d) >= 256
    ours = evaluate_detections(gt, d, iou_type="segm", variants=("fixed",)).results["fixed"]
    by_hand = [float(mu.area({"size": r["size"], "counts": r["counts"].encode()})) for r in d.segmentation]
    ref = evaluate_detections(gt, replace(d, area=np.asarray(by_hand)), iou_type="segm", variants=("fixed",),
                              fixed_area="box").results["fixed"]
    assert ours == ref
