"""The devil recipe against the authors' code re-written here (large-vocab-devil + netcal, neither a
dependency): netcal's histogram binning (fit [a, b), look-up (a, b]), MAINTAIN_RANK's tie order, and
mask IoU for the labels when masks are present."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
from scipy.stats import binned_statistic_dd

from vistabench.data.coco import read_ground_truth, read_results
from vistabench.data.detection_synth import synth_detection_set
from vistabench.metrics.detection import detection_labels
from vistabench.protocols.detection.runner import apply_to, calibrate_detections
from vistabench.protocols.detection.calibration import (
    apply_calibration,
    fit_calibration_devil,
    fit_histbin_netcal,
    maintain_rank,
    predict,
)


# ---------------------------------------------------------------- netcal 1.1-1.3 HistogramBinning, re-written
def netcal_histogram_binning(x_fit, y_fit, x_test, bins):
    """``HistogramBinning(bins, detection=True).fit(x_fit, y_fit).transform(x_test)`` as netcal does it."""
    eps = np.finfo(np.float64).eps
    X = np.clip(np.asarray(x_fit, np.float64).reshape(-1, 1), eps, 1.0 - eps)
    matched = np.ones(X.shape[0]) == np.asarray(y_fit)
    bounds = [np.linspace(0.0, 1.0, bins + 1)]
    acc_hist, _, _ = binned_statistic_dd(X, matched, statistic="mean", bins=bounds)
    nan_indices = np.nonzero(np.isnan(acc_hist))
    acc_hist[nan_indices] = 0.5 * (bounds[0][nan_indices[0]] + bounds[0][nan_indices[0] + 1])
    Xt = np.asarray(x_test, np.float64).reshape(-1, 1)
    indices = np.digitize(x=Xt[:, 0], bins=bounds[0], right=True) - 1
    indices[indices == -1] = 0
    indices[indices == bins] = bins - 1
    return acc_hist[(indices,)]


@pytest.mark.parametrize("bins", [20, 7, 1])
def test_histbin_equals_netcal_on_and_between_edges(bins):
    rng = np.random.default_rng(bins)
    edges = np.linspace(0.0, 1.0, bins + 1)
    # scores exactly on every edge (0 and 1 included), next to them, and anywhere
    s = np.concatenate([np.repeat(edges, 5), np.nextafter(edges, 2), np.nextafter(edges, -1)[1:],
                        rng.random(400)])
    s = np.clip(s, 0, 1)
    y = rng.random(len(s)) < s
    model = fit_histbin_netcal(s, y, bins=bins)
    test = np.concatenate([s, rng.random(100), [0.0, 1.0, -0.5, 1.5]])
    assert np.array_equal(predict(model, test), netcal_histogram_binning(s, y, test, bins))


def test_histbin_scores_on_an_edge_are_looked_up_in_the_bin_below():
    # fitted: 0.5 belongs to [0.5, 0.55) (all true positives); 0.45..0.5 are all false positives
    s = np.array([0.46, 0.47, 0.5, 0.5, 0.52])
    y = np.array([False, False, True, True, True])
    model = fit_histbin_netcal(s, y, bins=20)
    assert model["values"][9] == 0.0 and model["values"][10] == 1.0
    # ... but netcal looks 0.5 up in (0.45, 0.5]: bin 9
    assert predict(model, np.array([0.5, 0.5000000000000001, 0.45])).tolist() == [0.0, 1.0, model["values"][8]]
    assert netcal_histogram_binning(s, y, np.array([0.5]), 20).tolist() == [0.0]


def test_empty_bins_predict_their_centre_and_out_of_range_fits_are_refused():
    model = fit_histbin_netcal(np.array([0.05, 0.95]), np.array([True, False]), bins=4)
    assert model["values"] == [1.0, 0.375, 0.625, 0.0]
    from vistabench.errors import InputError

    with pytest.raises(InputError, match=r"needs scores in \[0, 1\]"):
        fit_calibration_devil(np.array([0.2, 1.2]), np.array([True, False]), np.array([1, 1]), method="histbin")


# ---------------------------------------------------------------- MAINTAIN_RANK, re-written from train_calibration.py
def reference_maintain_rank(detections, new_scores_by_class):
    """``PerClassDetectionCalibrator.transform(detections, maintain_rank=True)`` with the calibrated
    scores of each class given (a list per class, in the order the class's detections appear)."""
    dets_by_class = defaultdict(list)
    detections = [x.copy() for x in detections]
    for d in detections:
        dets_by_class[d["category_id"]].append(d)
    by_scores = defaultdict(list)
    for c, dets in dets_by_class.items():
        new_scores = new_scores_by_class[c]
        for i, d in enumerate(dets):
            d["_orig_score"] = d["score"]
            d["score"] = new_scores[i]
            by_scores[new_scores[i]].append(d)
    max_delta = 1e-16
    for new_score, dets in by_scores.items():
        if all(dets[0]["_orig_score"] == x["_orig_score"] for x in dets[1:]):
            continue
        if new_score + max_delta < 1:
            deltas = np.linspace(0, max_delta, len(dets))
        else:
            deltas = np.linspace(-max_delta, 0, len(dets))
        for i, d in enumerate(sorted(dets, key=lambda x: x["_orig_score"])):
            d["score"] += deltas[i]
    return np.array([d["score"] for d in detections])


def _generated(seed, n=600, k=12):
    rng = np.random.default_rng(seed)
    cats = rng.integers(0, k, n) * 7 + 3
    orig = np.round(rng.random(n), 2)  # ties in the original scores too
    levels = np.array([0.0, 0.05, 0.25, 0.3, 0.5, 0.75, 0.9999999999999999, 1.0, 1e-300])
    new = levels[rng.integers(0, len(levels), n)]  # calibrated scores shared across categories
    return cats, orig, new


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_maintain_rank_equals_the_reference_bit_for_bit(seed):
    cats, orig, new = _generated(seed)
    dets = [{"category_id": int(c), "score": float(s)} for c, s in zip(cats, orig)]
    by_class = defaultdict(list)
    for c, v in zip(cats, new):
        by_class[int(c)].append(np.float64(v))
    ref = reference_maintain_rank(dets, by_class)
    ours = maintain_rank(new, orig, cats)
    assert np.array_equal(ours.view(np.int64), ref.view(np.int64))


def test_ties_follow_the_original_score_across_categories():
    # three categories calibrated to the same 0.01: the group is ordered by the original score, whatever
    # the category (our vistabench recipe would keep only each category's own order)
    cats = np.array([1, 2, 3, 2])
    orig = np.array([0.2, 0.9, 0.5, 0.1])
    out = maintain_rank(np.full(4, 0.01), orig, cats)
    assert list(np.argsort(-out, kind="stable")) == [1, 2, 0, 3]
    assert out[1] - 0.01 == pytest.approx(1e-16, rel=0.05) and out[3] == 0.01
    # at 0.25 a step of 1e-16 / 3 is about half a unit in the last place: float64 rounding leaves 0.2 and
    # 0.5 tied (as in the authors' code; the evaluator's stable order then decides)
    out = maintain_rank(np.full(4, 0.25), orig, cats)
    assert out[3] == 0.25 < out[0] == out[2] < out[1]
    # a group at 1.0 moves down; all-equal original scores stay tied
    top = maintain_rank(np.array([1.0, 1.0, 0.5, 0.5]), np.array([0.9, 0.8, 0.3, 0.3]), np.array([1, 2, 1, 2]))
    assert top[0] == 1.0 and top[1] < 1.0 and top[2] == top[3] == 0.5


def test_apply_of_a_devil_calibration_uses_maintain_rank():
    rng = np.random.default_rng(5)
    s = rng.random(300)
    c = rng.integers(0, 4, 300)
    y = rng.random(300) < s
    y[c == 3] = False  # a category without a positive: score 0 (shared with unseen categories)
    cal = fit_calibration_devil(s, y, c, method="histbin")
    test_s = np.round(rng.random(200), 2)
    test_c = rng.integers(0, 6, 200)
    raw = apply_calibration(cal, test_s, test_c, strict=False)
    by_class = defaultdict(list)
    for cc, v in zip(test_c, raw):
        by_class[int(cc)].append(np.float64(v))
    ref = reference_maintain_rank([{"category_id": int(a), "score": float(b)} for a, b in zip(test_c, test_s)], by_class)
    assert np.array_equal(apply_calibration(cal, test_s, test_c), ref)


# ---------------------------------------------------------------- labels with mask IoU when masks are present
def test_devil_labels_use_masks_when_present():
    syn = synth_detection_set(num_images=30, num_categories=10, dets_per_image=25, seed=2, masks=True)
    gt = read_ground_truth(syn.ground_truth, with_segmentation=True)
    dets = read_results(syn.results, gt, iou_type="segm")
    cal = calibrate_detections(gt, dets, method="platt", recipe="devil")
    assert cal.settings["iou_type"] == "segm"
    segm = detection_labels(gt, dets, iou_type="segm", iou_threshold=0.75, dets_per_class=10_000, recipe="devil")
    bbox = detection_labels(gt, dets, iou_type="bbox", iou_threshold=0.75, dets_per_class=10_000, recipe="devil")
    assert not (np.array_equal(segm.index, bbox.index) and np.array_equal(segm.label, bbox.label))
    cats = gt.category_ids[dets.category[segm.index]]
    fitted = {int(k) for k in np.unique(cats[segm.label])}
    assert {k for k, v in cal.per_category.items() if v["kind"] != "zero"} == fitted
    # without masks: box IoU; the vistabench recipe keeps box IoU unless told
    gt_b = read_ground_truth(syn.ground_truth)
    assert calibrate_detections(gt_b, read_results(syn.results, gt_b), recipe="devil").settings["iou_type"] == "bbox"
    assert calibrate_detections(gt, dets, method="platt").settings["iou_type"] == "bbox"
    assert np.all(np.isfinite(apply_to(cal, gt, dets).score))


# ---------------------------------------------------------------- which detections per class get a label
def reference_limit_dets(results, topk):
    """large-vocab-devil lvdevil/eval_wrapper.py ``_limit_dets(results, topk, per="class")``, re-written."""
    import heapq

    top_scoring, output = defaultdict(list), {}
    for i, ann in enumerate(results):
        key, score = ann["category_id"], ann["score"]
        if len(top_scoring[key]) < topk:
            heapq.heappush(top_scoring[key], (score, i))
            output[i] = ann
        elif len(top_scoring[key]) > topk and score > top_scoring[key][0][0]:  # never true, as in the code
            _, removed = heapq.heappushpop(top_scoring[key], (score, i))
            output[i] = ann
            del output[removed]
    return sorted(output)


def test_devil_labels_the_first_k_per_class_in_file_order():
    syn = synth_detection_set(num_images=30, num_categories=5, dets_per_image=25, seed=4)
    gt = read_ground_truth(syn.ground_truth)
    dets = read_results(syn.results, gt)
    k = 20
    want = reference_limit_dets([{"category_id": int(c), "score": float(s)}
                                 for c, s in zip(dets.category, dets.score)], k)
    devil = detection_labels(gt, dets, iou_threshold=0.75, dets_per_class=k, recipe="devil")
    assert set(devil.index.tolist()) <= set(want)
    from vistabench.metrics.detection.select import first_per_class, top_per_class

    assert first_per_class(dets, k=k).tolist() == want
    ours = detection_labels(gt, dets, iou_threshold=0.75, dets_per_class=k)
    top = set(top_per_class(dets, k=k).tolist())
    assert set(ours.index.tolist()) <= top and top != set(want)  # the score cut keeps other detections
