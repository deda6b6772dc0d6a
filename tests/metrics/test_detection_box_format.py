"""Results written as corners [x1, y1, x2, y2]: scored as given, with one warning that says how to
convert (issue 40: AP 0.0009 without a word before)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from vistabench.data.coco import read_ground_truth, read_results
from vistabench.data.detection_synth import synth_detection_set
from vistabench.metrics.detection import evaluate_detections
from vistabench.metrics.detection.box_format import outside_fraction


@pytest.fixture(scope="module")
def syn():
    return synth_detection_set(num_images=20, num_categories=5, dets_per_image=10, seed=4, format="coco")


def _corners(results):
    return [dict(r, bbox=[r["bbox"][0], r["bbox"][1], r["bbox"][0] + r["bbox"][2], r["bbox"][1] + r["bbox"][3]])
            for r in results]


def test_corner_boxes_are_scored_as_given_and_warned(syn):
    gt = read_ground_truth(syn.ground_truth)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # COCO boxes: no warning
        good = evaluate_detections(gt, read_results(syn.results, gt)).results["old"]["AP"]
    with pytest.warns(UserWarning, match=r"results.bbox: \d+% of the boxes reach past their image's right or bottom "
                                         r"edge \(ground truth: 0%\); are they corners \[x1, y1, x2, y2\]\? .*"
                                         r"convert with w = x2 - x1, h = y2 - y1 \(scored as given\)"):
        bad_dets = read_results(_corners(syn.results), gt)
    bad = evaluate_detections(gt, bad_dets).results["old"]["AP"]
    assert bad < good  # scored as given: nothing converted
    assert np.array_equal(bad_dets.bbox[:, 2], np.asarray([r["bbox"][0] + r["bbox"][2] for r in syn.results]))


def test_boxes_past_the_edge_as_often_as_the_ground_truths_are_not_warned(syn):
    """Ground truth that itself reaches past its images (padding, rounding): detections doing the
    same are no sign of corners."""
    gt_dict = {**syn.ground_truth, "images": [dict(im, width=im["width"] // 3) for im in syn.ground_truth["images"]]}
    gt = read_ground_truth(gt_dict)
    frac = outside_fraction(gt.bbox, gt.image, gt.image_size)
    assert frac > 0.3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read_results(syn.results, gt)


def test_outside_fraction_edges():
    size = np.array([[10, 20], [0, 0]])
    box = np.array([[0.0, 0, 20, 10], [0.0, 0, 21.5, 10], [5.0, 5, 100, 100]])
    assert outside_fraction(box, np.array([0, 0, 1]), size) == 0.5  # the unknown-size image is left out
    assert np.isnan(outside_fraction(box[2:], np.array([1]), size))
