"""Differential tests of AP^Old / AP^Fixed / AP^Pool against lvis-api and pycocotools."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

import importlib.util
import pathlib
from vistabench.data.coco import read_ground_truth, read_results
from vistabench.errors import InputError
from vistabench.metrics.detection import (detection_labels, evaluate_detections, recall_counts,
                                          top_per_class, top_per_image)
from vistabench.metrics.detection import RECALL_THRESHOLDS, Detections, GroundTruth, box_iou_pairs
from vistabench.data.detection_synth import synth_detection_set

_spec = importlib.util.spec_from_file_location(
    "_detection_reference", pathlib.Path(__file__).with_name("_detection_reference.py"))
_ref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ref)
assert_close, coco_eval, lvis_eval, lvis_fixed = _ref.assert_close, _ref.coco_eval, _ref.lvis_eval, _ref.lvis_fixed
lvis_results, pooled_reference, top_k_per_class = _ref.lvis_results, _ref.pooled_reference, _ref.top_k_per_class

FIXED_RENAME = {"AR@300": "AR@all", "ARs@300": "ARs@all", "ARm@300": "ARm@all", "ARl@300": "ARl@all"}


def ours(gt_dict, results, **kw):
    gt = read_ground_truth(gt_dict, with_segmentation=kw.get("iou_type") == "segm")
    dets = read_results(results, gt, iou_type=kw.get("iou_type", "bbox"))
    return evaluate_detections(gt, dets, **kw).results


def check_all_three(gt, results, tmp_path, *, k=10_000, max_dets=300, iou_type="bbox"):
    res = ours(gt, results, max_dets_per_image=max_dets, dets_per_class=k, iou_type=iou_type)
    assert_close(res["old"], lvis_results(lvis_eval(gt, results, tmp_path, max_dets=max_dets, iou_type=iou_type)),
                 rename={k_: k_.replace("@300", f"@{max_dets}") for k_ in FIXED_RENAME})
    e = lvis_fixed(gt, results, tmp_path, k=k, iou_type=iou_type)
    assert_close(res["fixed"], lvis_results(e), rename=FIXED_RENAME)
    assert_close(res["pool"], pooled_reference(e))
    return res


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lvis_synthetic_matches_lvis_api(seed, tmp_path):
    s = synth_detection_set(num_images=30, num_categories=25, dets_per_image=40, seed=seed)
    # a per-image limit and a per-class budget that both bind
    res = check_all_three(s.ground_truth, s.results, tmp_path, k=30, max_dets=25)
    assert res["old"]["AP"] != res["fixed"]["AP"]


def test_lvis_full_precision_scores_and_default_limits(tmp_path):
    s = synth_detection_set(num_images=20, num_categories=15, dets_per_image=30, seed=5, score_decimals=None)
    check_all_three(s.ground_truth, s.results, tmp_path)


def test_lvis_ties_in_score(tmp_path):
    s = synth_detection_set(num_images=25, num_categories=10, dets_per_image=40, seed=3, score_decimals=1)
    scores = [r["score"] for r in s.results]
    assert len(set(scores)) < len(scores) / 4  # heavy ties, across and within images
    check_all_three(s.ground_truth, s.results, tmp_path, k=60, max_dets=20)


def _tiny_lvis():
    """Hand-made LVIS set: image 1 has cats 1, 2 (cat 2 not exhaustive), 3 negative; image 2 has cat 1;
    image 3 has no annotations and no detections; category 4 has no ground truth anywhere."""
    images = [
        {"id": 1, "height": 100, "width": 100, "neg_category_ids": [3], "not_exhaustive_category_ids": [2]},
        {"id": 2, "height": 100, "width": 100, "neg_category_ids": [4], "not_exhaustive_category_ids": []},
        {"id": 3, "height": 100, "width": 100, "neg_category_ids": [], "not_exhaustive_category_ids": []},
    ]
    cats = [{"id": 1, "frequency": "f"}, {"id": 2, "frequency": "c"}, {"id": 3, "frequency": "r"},
            {"id": 4, "frequency": "r"}]
    anns = [
        {"id": 1, "image_id": 1, "category_id": 1, "bbox": [10, 10, 20, 20], "area": 400},
        {"id": 2, "image_id": 1, "category_id": 1, "bbox": [50, 50, 40, 40], "area": 1500},
        {"id": 3, "image_id": 1, "category_id": 2, "bbox": [0, 0, 5, 5], "area": 25},
        {"id": 4, "image_id": 2, "category_id": 1, "bbox": [0, 0, 0, 10], "area": 0.0},  # zero-area
        {"id": 5, "image_id": 2, "category_id": 1, "bbox": [20, 20, 60, 60], "area": 9000},
    ]
    return {"images": images, "categories": cats, "annotations": anns}


def _tiny_results():
    return [
        {"image_id": 1, "category_id": 1, "bbox": [10, 10, 20, 20], "score": 0.9},
        {"image_id": 1, "category_id": 1, "bbox": [11, 10, 20, 20], "score": 0.9},  # duplicate, tie
        {"image_id": 1, "category_id": 1, "bbox": [52, 50, 40, 40], "score": 0.5},
        {"image_id": 1, "category_id": 2, "bbox": [60, 60, 10, 10], "score": 0.8},  # not exhaustive: ignored
        {"image_id": 1, "category_id": 2, "bbox": [0, 0, 5, 5], "score": 0.3},
        {"image_id": 1, "category_id": 3, "bbox": [1, 1, 5, 5], "score": 0.95},  # negative: false positive
        {"image_id": 1, "category_id": 4, "bbox": [1, 1, 5, 5], "score": 0.99},  # neither: not evaluated
        {"image_id": 2, "category_id": 1, "bbox": [0, 0, 0, 10], "score": 0.7},  # zero-area detection
        {"image_id": 2, "category_id": 1, "bbox": [20, 20, 60, 60], "score": 0.5},
        {"image_id": 2, "category_id": 4, "bbox": [20, 20, 60, 60], "score": 0.6},  # cat without gt, negative
        {"image_id": 2, "category_id": 3, "bbox": [20, 20, 60, 60], "score": 0.6},  # neither
    ]


def test_lvis_edge_cases_match_lvis_api(tmp_path):
    res = check_all_three(_tiny_lvis(), _tiny_results(), tmp_path, k=3, max_dets=4)
    assert math.isnan(res["old"]["APr"])  # no rare category has ground truth
    # the pool counts the negative-listed detections of category 4 (no ground truth) as false positives
    no4 = [r for r in _tiny_results() if r["category_id"] != 4]
    assert ours(_tiny_lvis(), no4)["pool"]["AP"] > res["pool"]["AP"]


def test_hand_worked_lvis_values():
    # lvis-api drops zero-area annotations and detections (get_ann_ids keeps 0 < area < inf), so
    # category 1 has 3 objects; at IoU 0.5 the ranking is 0.9 TP, 0.9 FP (duplicate, file order),
    # 0.5 TP (image 1), 0.5 TP (image 2): precision 1 up to recall 1/3, then 3/4 up to recall 1.
    gt = read_ground_truth(_tiny_lvis())
    dets = read_results(_tiny_results(), gt)
    ev = evaluate_detections(gt, dets, variants=("old",))
    p = ev.precision["old"][0, :, 0, 0]
    expected = np.where(RECALL_THRESHOLDS <= 1 / 3, 1.0, 0.75 - np.spacing(1) * 0)
    assert np.allclose(p, expected, atol=1e-12)
    # category 2: the only counted detection is the exact box (0.3); the 0.8 one is ignored: AP 1
    assert np.allclose(ev.precision["old"][:, :, 1, 0], 1.0, rtol=0, atol=1e-12)  # 1 / (1 + eps)
    # a category without ground truth has no precision curve: NaN, never lvis-api's -1
    no_gt = [k for k in range(len(gt.category_ids)) if not np.any(gt.category == k)]
    assert no_gt and np.isnan(ev.precision["old"][:, :, no_gt, :]).all()
    assert not (ev.precision["old"] == -1).any()


def test_empty_results_and_image_without_detections():
    gt = read_ground_truth(_tiny_lvis())
    ev = evaluate_detections(gt, Detections.empty())
    for v in ("old", "fixed", "pool"):
        assert ev.results[v]["AP"] == 0.0  # categories with ground truth, nothing detected
    assert math.isnan(ev.results["old"]["APr"])
    assert ev.results["old"]["AR@300"] == 0.0


def test_no_ground_truth_at_all_is_nan():
    gt = GroundTruth.from_arrays(format="lvis", image_ids=[1], category_ids=[1], image_id=[], category_id=[],
                                 bbox=np.zeros((0, 4)), frequency=["r"], negative={1: [1]})
    dets = Detections.from_ids(gt, image_id=[1], category_id=[1], bbox=[[0, 0, 1, 1]], score=[0.5])
    ev = evaluate_detections(gt, dets)
    assert all(math.isnan(x) for v in ev.results.values() for x in v.values())


def test_coco_matches_pycocotools_with_crowd(tmp_path):
    s = synth_detection_set(num_images=25, num_categories=12, dets_per_image=40, seed=4, format="coco")
    assert any(a["iscrowd"] for a in s.ground_truth["annotations"])
    res = ours(s.ground_truth, s.results)
    assert_close(res["old"], coco_eval(s.ground_truth, s.results, tmp_path))
    # fixed: pycocotools on the top-k-per-class results
    assert_close(res["fixed"], coco_eval(s.ground_truth, top_k_per_class(s.results, 10_000), tmp_path))
    res_k = ours(s.ground_truth, s.results, dets_per_class=20)
    assert_close(res_k["fixed"], coco_eval(s.ground_truth, top_k_per_class(s.results, 20), tmp_path))
    assert math.isnan(res["old"]["APr"]) and math.isnan(res["pool"]["APr"])


def test_coco_many_detections_per_image_category(tmp_path):
    # > 100 detections of one category in one image: pycocotools' maxDets cap per (image, category)
    s = synth_detection_set(num_images=3, num_categories=2, dets_per_image=300, seed=6, format="coco")
    assert_close(ours(s.ground_truth, s.results)["old"], coco_eval(s.ground_truth, s.results, tmp_path))


def test_segm_matches_lvis_api(tmp_path):
    s = synth_detection_set(num_images=8, num_categories=6, dets_per_image=15, seed=7, masks=True)
    check_all_three(s.ground_truth, s.results, tmp_path, k=12, max_dets=10, iou_type="segm")


def test_faster_coco_eval_lvis_style_agrees_after_the_cut(tmp_path):
    pytest.importorskip("faster_coco_eval")
    s = synth_detection_set(num_images=20, num_categories=10, dets_per_image=30, seed=8)
    res = ours(s.ground_truth, s.results)["old"]
    path = tmp_path / "gt.json"
    import json
    path.write_text(json.dumps(s.ground_truth))
    from faster_coco_eval import COCO, COCOeval_faster
    g = COCO(str(path))
    d = g.loadRes(copy.deepcopy(s.results))
    e = COCOeval_faster(g, d, "bbox", lvis_style=True, print_function=lambda *a, **k: None)
    e.params.maxDets = [300]
    e.evaluate()
    e.accumulate()
    e.summarize()
    assert abs(e.stats_as_dict["AP_all"] - res["AP"]) < 1e-9


def test_box_iou_matches_pycocotools():
    import pycocotools.mask as mu
    rng = np.random.default_rng(0)
    d = np.round(rng.uniform(0, 50, (40, 4)), 1)
    g = np.round(rng.uniform(0, 50, (30, 4)), 1)
    d[0, 2] = 0  # zero width
    crowd = rng.random(30) < 0.3
    ref = mu.iou(d.tolist(), g.tolist(), crowd.astype(int).tolist())
    di, gi = np.meshgrid(np.arange(40), np.arange(30), indexing="ij")
    ours_ = box_iou_pairs(d[di.ravel()], g[gi.ravel()], crowd[gi.ravel()]).reshape(40, 30)
    assert np.array_equal(ours_, ref)


def test_recall_counts_exact():
    num_gt = np.arange(0, 400)
    m = recall_counts(num_gt)
    ng = np.maximum(num_gt, 1).astype(float)[:, None]
    assert np.all(m / ng >= RECALL_THRESHOLDS[None, :])
    assert np.all((m == 0) | ((m - 1) / ng < RECALL_THRESHOLDS[None, :]))


def test_selection_is_stable_on_ties():
    gt = GroundTruth.from_arrays(format="coco", image_ids=[1, 2], category_ids=[1, 2], image_id=[], category_id=[],
                                 bbox=np.zeros((0, 4)))
    dets = Detections.from_ids(gt, image_id=[1, 1, 1, 2], category_id=[1, 2, 1, 1], bbox=np.ones((4, 4)),
                               score=[0.5, 0.5, 0.9, 0.5])
    assert top_per_image(dets, k=2).tolist() == [0, 2, 3]  # image 1 keeps the first of the tied 0.5s
    assert top_per_class(dets, k=2).tolist() == [0, 1, 2]


def test_fixed_is_invariant_to_per_class_monotone_transforms():
    s = synth_detection_set(num_images=30, num_categories=15, dets_per_image=40, seed=9, score_decimals=None)
    gt = read_ground_truth(s.ground_truth)
    dets = read_results(s.results, gt)
    a = evaluate_detections(gt, dets)
    scale = np.random.default_rng(0).uniform(0.1, 3, gt.num_categories)
    b = evaluate_detections(gt, dets.with_scores(dets.score ** scale[dets.category]))
    same = lambda x, y: x == y or (math.isnan(x) and math.isnan(y))  # noqa: E731
    assert all(same(a.results["fixed"][k], b.results["fixed"][k]) for k in a.results["fixed"])
    assert a.results["pool"]["AP"] != b.results["pool"]["AP"]


def test_labels_are_tp_at_075():
    gt = read_ground_truth(_tiny_lvis())
    dets = read_results(_tiny_results(), gt)
    res = detection_labels(gt, dets, iou_threshold=0.75)
    idx, lab = res.index, res.label
    assert 6 not in idx.tolist() and 3 not in idx.tolist()  # not evaluated / ignored
    assert lab[idx.tolist().index(0)] and not lab[idx.tolist().index(1)]
    with pytest.raises(InputError, match="iou_threshold"):
        detection_labels(gt, dets, iou_threshold=0.72)


@pytest.mark.parametrize("bad", [dict(variants=("old", "new")), dict(iou_type="mask"), dict(dets_per_class=0),
                                 dict(max_dets_per_image=-3), dict(variants=())])
def test_bad_options(bad):
    gt = read_ground_truth(_tiny_lvis())
    dets = read_results(_tiny_results(), gt)
    with pytest.raises(InputError):
        evaluate_detections(gt, dets, **bad)


def _devil_reference_labels(gt, results, tmp_path, iou=0.75):
    """The authors' label construction (large-vocab-devil ``load_tp_fp_fn`` on an LVISEval at one
    IoU, area "all", no per-image limit), re-written: dt ids whose ``dt_matches != 0``."""
    e = lvis_eval(gt, results, tmp_path, max_dets=-1, run=False)
    e.params.iou_thrs = [iou]
    e.params.area_rng = [e.params.area_rng[0]]
    e.params.area_rng_lbl = [e.params.area_rng_lbl[0]]
    e.evaluate()
    tp, fp = set(), set()
    for x in e.eval_imgs:
        if x is None:
            continue
        for dt_id, m in zip(x["dt_ids"], (x["dt_matches"] != 0).squeeze(0)):
            (tp if m else fp).add(dt_id)
    return tp, fp


def test_devil_labels_match_the_authors_construction(tmp_path):
    gt_d, res = _tiny_lvis(), _tiny_results()
    s = synth_detection_set(num_images=20, num_categories=10, dets_per_image=30, seed=13)
    for g, r in ((gt_d, res), (s.ground_truth, s.results)):
        gt = read_ground_truth(g)
        lab = detection_labels(gt, read_results(r, gt), iou_threshold=0.75, recipe="devil")
        tp, fp = _devil_reference_labels(g, r, tmp_path)
        assert not tp & fp
        assert set((lab.index[lab.label] + 1).tolist()) == tp  # lvis-api ids = file position + 1
        assert set((lab.index[~lab.label] + 1).tolist()) == fp
    # the not-exhaustive detection (0.8, category 2) is a negative for the authors, unlabelled for AP
    ours = detection_labels(read_ground_truth(gt_d), read_results(res, read_ground_truth(gt_d)), recipe="devil")
    plain = detection_labels(read_ground_truth(gt_d), read_results(res, read_ground_truth(gt_d)))
    assert 3 in ours.index.tolist() and not ours.label[ours.index.tolist().index(3)]
    assert 3 not in plain.index.tolist()


def test_annotation_id_zero_keeps_the_correct_number_and_warns(tmp_path):
    from vistabench.metrics.detection import OfficialToolsDifferenceWarning

    gt_d = {"images": [{"id": 1, "height": 100, "width": 100, "neg_category_ids": [], "not_exhaustive_category_ids": []}],
            "categories": [{"id": 1, "frequency": "f"}],
            "annotations": [{"id": 0, "image_id": 1, "category_id": 1, "bbox": [0, 0, 10, 10], "area": 100},
                            {"id": 1, "image_id": 1, "category_id": 1, "bbox": [50, 50, 10, 10], "area": 100}]}
    res = [{"image_id": 1, "category_id": 1, "bbox": [0, 0, 10, 10], "score": 0.9},
           {"image_id": 1, "category_id": 1, "bbox": [50, 50, 10, 10], "score": 0.8}]
    ref = lvis_results(lvis_eval(gt_d, res, tmp_path))["AP"]
    assert ref < 0.5  # the official tool counts the match to id 0 as a false positive
    gt = read_ground_truth(gt_d)
    with pytest.warns(OfficialToolsDifferenceWarning, match="id 0.*lvis-api and pycocotools"):
        ev = evaluate_detections(gt, read_results(res, gt), variants=("old",))
    assert ev.results["old"]["AP"] == pytest.approx(1.0, abs=1e-12)
