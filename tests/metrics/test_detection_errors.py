"""TIDE's error decomposition (``decompose_errors``) against tidecv 1.0.1 on sets with planted errors,
and the AP^Fixed / AP^Pool decompositions against the evaluator.

tidecv is run through its own loaders (``datasets.COCO`` / ``datasets.LVIS`` / ``COCOResult``) on
the same JSON. Scores are distinct: on tied scores tidecv's order of a fixed list depends on the fix
(the corrected detections come first), ours stays descending score, image, file position.
Tolerance 1e-9 AP points (the sums are in the same order; the mean over categories may round
differently in the last bit).
"""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

from vistabench.data.coco import read_ground_truth, read_results
from vistabench.data.detection_synth import synth_detection_set
from vistabench.errors import InputError
from vistabench.metrics.detection import (
    ERROR_TYPES,
    SPECIAL_ERROR_TYPES,
    Detections,
    GroundTruth,
    decompose_errors,
    evaluate_detections,
)

_spec = importlib.util.spec_from_file_location("_planted_errors", pathlib.Path(__file__).with_name("_planted_errors.py"))
_planted = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_planted)
planted_set, tidecv_errors, tidecv_ready = _planted.planted_set, _planted.tidecv_errors, _planted.tidecv_ready
_rspec = importlib.util.spec_from_file_location("_detection_reference",
                                                pathlib.Path(__file__).with_name("_detection_reference.py"))
_reference = importlib.util.module_from_spec(_rspec)
_rspec.loader.exec_module(_reference)
triangle_masks = _reference.triangle_masks

pytest.importorskip("tidecv")
KEYS = ("AP",) + ERROR_TYPES + SPECIAL_ERROR_TYPES
ALONE = [{"tp": 20, k: 6} for k in ("Cls", "Loc", "Both", "Dupe", "Bkg", "Miss")]
MIXED = {"tp": 30, "Cls": 5, "Loc": 5, "Both": 4, "Dupe": 4, "Bkg": 6, "Miss": 5}


def _ours(gt, res, variants=("tide",), **kw):
    g = read_ground_truth(gt)
    return decompose_errors(g, read_results(res, g), variants=variants, **kw)


def _assert_equal(ours: dict, ref: dict, tol=1e-9):
    for k in KEYS:
        assert ours[k] == pytest.approx(ref[k], abs=tol), (k, ours[k], ref[k])


@pytest.mark.parametrize("lvis", [False, True], ids=["coco", "lvis"])
@pytest.mark.parametrize("kinds", ALONE + [MIXED], ids=[next(k for k in d if k != "tp") for d in ALONE] + ["mixed"])
def test_planted_errors_equal_tidecv(tmp_path, kinds, lvis):
    gt, res = planted_set(kinds, seed=1, lvis=lvis, crowd=0 if lvis else 3)
    ours = _ours(gt, res).results["tide"]
    _assert_equal(ours, tidecv_errors(gt, res, tmp_path, lvis=lvis))
    planted = [k for k in kinds if k != "tp"]
    if len(planted) == 1:  # the planted type is found and is the one that costs AP
        (k,) = planted
        crowd_dets = 3 if k == "Bkg" and not lvis else 0  # detections inside crowd regions: ignored, and Bkg
        assert ours["counts"][k] == kinds[k] + crowd_dets
        assert ours[k] > 0
        assert all(ours[o] == 0 for o in ERROR_TYPES if o not in (k, "Bkg", "Miss"))


@pytest.mark.parametrize("seed", [2, 3, 4])
@pytest.mark.parametrize("lvis", [False, True], ids=["coco", "lvis"])
def test_mixed_planted_errors_equal_tidecv_over_seeds(tmp_path, seed, lvis):
    kinds = {"tp": 40, "Cls": 8, "Loc": 8, "Both": 6, "Dupe": 6, "Bkg": 8, "Miss": 6}
    gt, res = planted_set(kinds, seed=seed, images=8, categories=6, lvis=lvis, crowd=0 if lvis else 4)
    _assert_equal(_ours(gt, res).results["tide"], tidecv_errors(gt, res, tmp_path, lvis=lvis))


@pytest.mark.parametrize("fmt", ["coco", "lvis"])
def test_dense_generated_sets_equal_tidecv(tmp_path, fmt):
    # 150 detections per image: tidecv keeps each image's top 100 (COCO) / 300 (LVIS); competing
    # Cls/Loc errors on one ground truth, ignored detections that a fix recovers, crowd-free
    s = synth_detection_set(num_images=25, num_categories=10, dets_per_image=150, seed=3, format=fmt,
                            score_decimals=None)
    gt = tidecv_ready(s.ground_truth)
    ours = _ours(gt, s.results).results["tide"]
    ref = tidecv_errors(gt, s.results, tmp_path, lvis=fmt == "lvis")
    _assert_equal(ours, ref)
    assert min(ours[k] for k in ERROR_TYPES) >= 0 and ours["Bkg"] > 1 and ours["FalsePos"] > 10


@pytest.mark.parametrize("fmt", ["coco", "lvis"])
def test_fixed_and_pool_bases_are_the_evaluators_ap50(fmt):
    s = synth_detection_set(num_images=30, num_categories=12, dets_per_image=80, seed=4, format=fmt)
    g = read_ground_truth(s.ground_truth)
    d = read_results(s.results, g)
    ev = evaluate_detections(g, d, dets_per_class=300)
    dec = decompose_errors(g, d, variants=("fixed", "pool"), dets_per_class=300).results
    assert dec["fixed"]["AP"] == pytest.approx(100 * ev.results["fixed"]["AP50"], abs=1e-9)
    assert dec["pool"]["AP"] == pytest.approx(100 * ev.results["pool"]["AP50"], abs=1e-9)
    for v in ("fixed", "pool"):
        r = dec[v]
        # perfect precision or perfect recall can only help; every fix is a well-defined number
        assert r["FalsePos"] >= 0 and r["FalseNeg"] >= 0
        assert all(np.isfinite(r[k]) and r[k] >= 0 for k in ERROR_TYPES)
    if fmt == "lvis":  # per frequency group: the evaluator's precision at IoU 0.5, averaged over the group
        prec, pooled = ev.precision["fixed"][0, :, :, 0], ev.precision["pool"][0]
        for p, f in enumerate("rcf", start=1):
            cats = np.flatnonzero(g.frequency == f)
            cats = cats[~np.isnan(prec[0, cats])]
            want = 100 * np.mean(prec[:, cats]) if len(cats) else float("nan")
            np.testing.assert_allclose(dec["fixed"]["groups"][f]["AP"], want, atol=1e-9)
            np.testing.assert_allclose(dec["pool"]["groups"][f]["AP"], 100 * np.mean(pooled[:, p]), atol=1e-9)
        assert not np.isnan(dec["fixed"]["groups"]["f"]["AP"])


def _one_image(boxes_gt, cats_gt, boxes_dt, cats_dt, scores, fmt="coco", **lists):
    gt = GroundTruth.from_arrays(format=fmt, image_ids=[1], category_ids=[1, 2], image_id=[1] * len(cats_gt),
                                 category_id=cats_gt, bbox=np.asarray(boxes_gt, float).reshape(-1, 4),
                                 frequency=["r", "f"] if fmt == "lvis" else None, **lists)
    dt = Detections.from_ids(gt, image_id=[1] * len(cats_dt), category_id=cats_dt,
                             bbox=np.asarray(boxes_dt, float).reshape(-1, 4), score=scores)
    return gt, dt


def test_a_fixed_class_error_becomes_a_true_positive_of_the_ground_truths_class():
    # one object of class 1, detected only as class 2: AP 0; fixing Cls gives AP 100 (both classes' mean:
    # class 2 had only a false positive (TIDE: AP 0, counted) and after the fix none (left out)
    gt, dt = _one_image([[0, 0, 10, 10]], [1], [[0, 0, 10, 10]], [2], [0.9])
    r = decompose_errors(gt, dt).results["tide"]
    assert r["AP"] == 0 and r["Cls"] == 100 and r["counts"]["Cls"] == 1 and r["counts"]["Miss"] == 0
    f = decompose_errors(gt, dt, variants=("fixed",)).results["fixed"]
    assert f["AP"] == 0 and f["Cls"] == pytest.approx(100)  # class 2 has no ground truth: left out (1/(1+eps) as lvis-api)
    assert np.isnan(f["FalseNeg"]) and f["FalsePos"] == 0  # no ground truth left after that fix: undefined


def test_only_the_best_scored_error_on_a_ground_truth_is_fixed():
    # two Loc errors on one object: fixing makes the higher-scored one a true positive, drops the other
    gt, dt = _one_image([[0, 0, 10, 10]], [1], [[5, 0, 10, 10], [0, 5, 10, 10]], [1, 1], [0.4, 0.8])
    lab = decompose_errors(gt, dt).labels["tide"]
    assert lab.error.tolist() == [1, 1] and lab.fixes.tolist() == [True, False]  # det order: by score
    assert decompose_errors(gt, dt).results["tide"]["Loc"] == 100


def test_an_image_without_detections_is_all_missed_and_empty_detections_score_zero():
    gt2 = GroundTruth.from_arrays(format="coco", image_ids=[1, 2], category_ids=[1, 2], image_id=[1, 2],
                                  category_id=[1, 1], bbox=[[0, 0, 10, 10], [0, 0, 10, 10]])
    dt2 = Detections.from_ids(gt2, image_id=[1], category_id=[1], bbox=[[0, 0, 10, 10]], score=[0.9])
    r = decompose_errors(gt2, dt2).results["tide"]
    assert r["counts"]["Miss"] == 1 and r["Miss"] == pytest.approx(100 - r["AP"])
    empty = decompose_errors(gt2, Detections.empty()).results["tide"]
    # no category left to average after fixing Miss: undefined (tidecv divides by zero there)
    assert empty["AP"] == 0 and np.isnan(empty["Miss"]) and empty["counts"]["Miss"] == 2


@pytest.mark.parametrize("kw,msg", [
    ({"variants": ("old",)}, "variants: expected one of"),
    ({"variants": ()}, "variants: expected at least one"),
    ({"pos_iou": 1.5}, "pos_iou: expected a number in [0, 1]"),
    ({"bg_iou": 0.6}, "bg_iou: expected at most `pos_iou`"),
    ({"max_dets_per_image": 0}, "max_dets_per_image"),
])
def test_bad_arguments_are_one_line_errors(kw, msg):
    gt, dt = _one_image([[0, 0, 10, 10]], [1], [[0, 0, 10, 10]], [1], [0.9])
    with pytest.raises(InputError, match=msg.replace("[", r"\[").replace("]", r"\]")):
        decompose_errors(gt, dt, **kw)


def test_federated_rules_decide_what_is_classified_and_what_a_fix_recovers():
    # LVIS image 1: an object of class 1 (rare) annotated, class 2 (frequent) listed neither positive nor
    # negative. A class-2 detection on the object: TIDE emulates LVIS with an ignore region (the detection
    # is ignored but still a Cls error, whose fix recovers the object); AP^Fixed does not evaluate it at all,
    # so the object is simply missed there.
    gt, dt = _one_image([[0, 0, 10, 10]], [1], [[0, 0, 10, 10]], [2], [0.9], fmt="lvis")
    res = decompose_errors(gt, dt, variants=("tide", "fixed")).results
    assert res["tide"]["counts"]["Cls"] == 1 and res["tide"]["AP"] == 0 and res["tide"]["Cls"] == 100
    assert res["fixed"]["counts"] == {"Cls": 0, "Loc": 0, "Both": 0, "Dupe": 0, "Bkg": 0, "Miss": 1}
    assert res["fixed"]["AP"] == 0 and np.isnan(res["fixed"]["Miss"])  # no category with ground truth left
    # the same with class 2 listed negative: now AP^Fixed sees a false positive of class 2 (Cls), fixable;
    # the group figures follow the categories: the fix raises rare (class 1), frequent has no ground truth
    gt, dt = _one_image([[0, 0, 10, 10]], [1], [[0, 0, 10, 10]], [2], [0.9], fmt="lvis", negative={1: [2]})
    f = decompose_errors(gt, dt, variants=("fixed", "pool")).results
    assert f["fixed"]["counts"]["Cls"] == 1 and f["fixed"]["Cls"] == pytest.approx(100)
    assert f["fixed"]["groups"]["r"]["Cls"] == pytest.approx(100) and np.isnan(f["fixed"]["groups"]["f"]["AP"])
    assert f["pool"]["AP"] == 0 and f["pool"]["Cls"] == pytest.approx(100)
    # a badly placed detection of a not-exhaustively annotated class: AP ignores it, the decomposition
    # calls it Loc, and fixing Loc makes it the true positive that was missing
    gt, dt = _one_image([[0, 0, 10, 10]], [1], [[6, 0, 10, 10]], [1], [0.9], fmt="lvis", not_exhaustive={1: [1]})
    f = decompose_errors(gt, dt, variants=("fixed",))
    assert f.labels["fixed"].state.tolist() == [2] and f.results["fixed"]["counts"]["Loc"] == 1
    assert f.results["fixed"]["AP"] == 0 and f.results["fixed"]["Loc"] == pytest.approx(100)
    assert f.results["fixed"]["counts"]["Miss"] == 0  # recoverable by the Loc fix, so not missed


@pytest.mark.parametrize("lvis", [False, True], ids=["coco", "lvis"])
def test_mask_mode_equals_tidecv_and_the_evaluators_segm_ap50(tmp_path, lvis):
    # non-rectangular masks (triangles; crowd regions as uncompressed RLE), so mask and box IoU differ
    gt, res = triangle_masks(*planted_set(MIXED, seed=1, lvis=lvis, crowd=0 if lvis else 3), seed=0)
    g = read_ground_truth(gt, with_segmentation=True)
    d = read_results(res, g, iou_type="segm")
    dec = decompose_errors(g, d, variants=("tide", "fixed", "pool"), iou_type="segm").results
    _assert_equal(dec["tide"], tidecv_errors(gt, res, tmp_path, lvis=lvis, mask=True))
    assert dec["tide"]["AP"] != pytest.approx(_ours(gt, res).results["tide"]["AP"])  # boxes would differ
    ev = evaluate_detections(g, d, iou_type="segm", fixed_area="box")
    assert dec["fixed"]["AP"] == pytest.approx(100 * ev.results["fixed"]["AP50"], abs=1e-9)
    assert dec["pool"]["AP"] == pytest.approx(100 * ev.results["pool"]["AP50"], abs=1e-9)
    with pytest.raises(InputError, match="iou_type='segm' needs 'segmentation'"):
        decompose_errors(read_ground_truth(gt), read_results(res, read_ground_truth(gt)), iou_type="segm")


@pytest.mark.parametrize("options,keywords", [
    ({}, {"variants": ("tide", "fixed", "pool")}),
    ({"variants": ("old",), "max_dets_per_image": 9}, {"variants": ("tide",), "max_dets_per_image": 9}),
    ({"variants": ("fixed",), "dets_per_class": 11}, {"variants": ("tide", "fixed"), "dets_per_class": 11}),
])
def test_decompose_errors_from_built_options_equals_the_keywords(options, keywords):
    """The options built once (what `detection eval --errors` passes): "tide" plus their fixed / pool,
    their limits, the same decomposition as the keywords."""
    from vistabench.metrics.detection_options import EvaluationOptions

    gt, res = planted_set(MIXED, lvis=True, seed=3)
    g = read_ground_truth(gt)
    dets = read_results(res, g)
    assert (decompose_errors(g, dets, options=EvaluationOptions(**options)).to_dict()
            == decompose_errors(g, dets, **keywords).to_dict())


def test_decompose_errors_refuses_options_with_keywords_or_keypoints():
    from vistabench.metrics.detection_options import EvaluationOptions

    gt, res = planted_set(MIXED, lvis=True, seed=3)
    g = read_ground_truth(gt)
    dets = read_results(res, g)
    with pytest.raises(InputError, match="^variants: give either options"):
        decompose_errors(g, dets, variants=("tide",), options=EvaluationOptions())
    with pytest.raises(InputError, match="^iou_type: the error decomposition takes bbox or segm, got keypoints"):
        decompose_errors(g, dets, options=EvaluationOptions(iou_type="keypoints"))
    with pytest.raises(InputError, match="^options: expected EvaluationOptions"):
        decompose_errors(g, dets, options={"iou_type": "bbox"})
