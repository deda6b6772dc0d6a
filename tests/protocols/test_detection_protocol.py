"""Gaming demonstration, the paper's toy (Fig. 2), calibration, synthetic generator."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from vistabench.data.coco import read_ground_truth, read_results
from vistabench.errors import InputError
from vistabench.metrics.detection import evaluate_detections
from vistabench.protocols.detection.runner import (apply_to, calibrate_detections, rerank_top_per_class,
                                            toy_example, toy_expected_ap)
from vistabench.protocols.detection.calibration import (Calibration, apply_calibration, calibrators,
                                                        fit_calibration, predict)
from vistabench.data.detection_synth import synth_detection_set


def test_toy_example_figure_2():
    # Ranking 1: class A perfect, B1 cut by the 2-per-image limit: (1 + 0) / 2
    assert toy_expected_ap(1) == 0.5
    # Ranking 2 (top-1 per class): A at recall 1/2 (51 of 101 recall points), B 0.8 in expectation
    assert toy_expected_ap(2) == pytest.approx((51 / 101 + 0.8) / 2, abs=1e-15)
    # without a per-image limit both rankings rank each class identically: AP^Fixed equal
    for correct in (True, False):
        a = evaluate_detections(*toy_example(b1_correct=correct, ranking=1), dets_per_class=1)
        b = evaluate_detections(*toy_example(b1_correct=correct, ranking=2), dets_per_class=1)
        assert a.results["fixed"]["AP"] == b.results["fixed"]["AP"]


@pytest.fixture(scope="module")
def sets():
    # a held-out set to fit calibration on (larger, as a training or validation split) and a test set
    kw = dict(num_categories=40, dets_per_image=120, detector_seed=0)
    out = []
    for seed, n in ((1, 250), (2, 80)):
        s = synth_detection_set(seed=seed, num_images=n, **kw)
        gt = read_ground_truth(s.ground_truth)
        out.append((gt, read_results(s.results, gt)))
    return out


def test_gaming_raises_old_not_fixed(sets):
    gt, dets = sets[1]
    limit = 50
    k = limit * gt.num_images // gt.num_categories
    base = evaluate_detections(gt, dets, max_dets_per_image=limit, dets_per_class=k)
    gamed = evaluate_detections(gt, rerank_top_per_class(dets, k=k), max_dets_per_image=limit, dets_per_class=k)
    assert gamed.results["old"]["AP"] > base.results["old"]["AP"]
    assert gamed.results["fixed"] == base.results["fixed"] or all(
        (x == y) or (math.isnan(x) and math.isnan(y))
        for x, y in zip(gamed.results["fixed"].values(), base.results["fixed"].values()))


@pytest.mark.parametrize("method", calibrators.names())
def test_calibrators_fit_apply_roundtrip(method, sets):
    gt, dets = sets[1]
    cal = calibrate_detections(gt, dets, method=method)
    cal2 = Calibration.from_json(json.loads(json.dumps(cal.to_json())))
    s1 = apply_to(cal, gt, dets).score
    s2 = apply_to(cal2, gt, dets).score
    assert np.array_equal(s1, s2)
    assert np.all((s1 >= 0) & (s1 <= 1 + 1e-8))


@pytest.mark.parametrize("method", ["isotonic", "platt"])
def test_monotone_calibration_keeps_fixed_and_improves_pool(method, sets):
    (hgt, hdets), (gt, dets) = sets
    cal = calibrate_detections(hgt, hdets, method=method)
    before = evaluate_detections(gt, dets, variants=("fixed", "pool"))
    after = evaluate_detections(gt, apply_to(cal, gt, dets), variants=("fixed", "pool"))
    if method == "platt" and any(m["a"] <= 0 for m in cal.per_category.values()):
        pytest.skip("a decreasing Platt fit reverses a class's order")
    for k, v in before.results["fixed"].items():
        assert after.results["fixed"][k] == v or (math.isnan(v) and math.isnan(after.results["fixed"][k]))
    assert after.results["pool"]["AP"] > before.results["pool"]["AP"]


def test_calibration_hand_values_and_fallback():
    s = np.array([0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9] * 3)
    y = np.array([0, 0, 0, 1, 0, 1, 1, 1] * 3, bool)
    c = np.array([5] * 24)
    iso = fit_calibration(s, y, c, method="isotonic", min_samples=5)
    # pool-adjacent-violators: [0,0,0] -> 0, [1,0] -> 0.5, [1,1,1] -> 1
    assert predict(iso.per_category[5], np.array([0.1, 0.4, 0.6, 0.9])).tolist() == [0.0, 0.5, 0.5, 1.0]
    # a class unseen at fit time uses the pooled fallback
    out = apply_calibration(iso, np.array([0.9]), np.array([77]), strict=False)
    assert out.tolist() == predict(iso.fallback, np.array([0.9])).tolist()
    with pytest.raises(InputError, match="both true and false"):
        fit_calibration(s, np.ones(24, bool), c)
    with pytest.raises(InputError, match=r"\(0, 1\)"):
        fit_calibration(np.r_[s, 1.0], np.r_[y, True], np.r_[c, 5], method="beta")
    with pytest.raises(InputError, match="unknown calibration method"):
        fit_calibration(s, y, c, method="temperature")


def test_synth_is_seeded_and_long_tailed():
    a = synth_detection_set(num_images=30, num_categories=40, dets_per_image=20, seed=3)
    b = synth_detection_set(num_images=30, num_categories=40, dets_per_image=20, seed=3)
    assert json.dumps(a.ground_truth) == json.dumps(b.ground_truth) and a.results == b.results
    freq = [c["frequency"] for c in a.ground_truth["categories"]]
    assert {"r", "c", "f"} <= set(freq)
    per_image = np.bincount([r["image_id"] for r in a.results])
    assert per_image.max() == 20
    assert any(im["not_exhaustive_category_ids"] for im in a.ground_truth["images"])
    with pytest.raises(InputError):
        synth_detection_set(num_images=0)


def test_devil_recipe_calibration(sets):
    from scipy.special import logit

    from vistabench.metrics.detection import detection_labels

    hgt, hdets = sets[0]
    cal = calibrate_detections(hgt, hdets, method="platt", recipe="devil")
    assert cal.settings["recipe"] == "devil" and cal.fallback == {"kind": "zero"}
    lab = detection_labels(hgt, hdets, iou_threshold=0.75, dets_per_class=10_000, recipe="devil")
    cats = hgt.category_ids[hdets.category[lab.index]]
    for c in np.unique(cats):
        m = cats == c
        model = cal.per_category[int(c)]
        if not lab.label[m].any():  # no positive: score 0, as the authors' NO_TP_SCORE "zero"
            assert model == {"kind": "zero"}
            continue
        # Platt on logit(score): the fitted (a, b) minimise the log-loss (independent check by sklearn)
        from sklearn.linear_model import LogisticRegression

        x = logit(np.clip(hdets.score[lab.index][m], 1e-12, 1 - 1e-12))[:, None]
        if lab.label[m].all():
            continue
        y = lab.label[m]
        lr = LogisticRegression(C=1e6, tol=1e-10, max_iter=10_000).fit(x, y)

        def loss(a, b, x=x, y=y):
            z = a * x[:, 0] + b
            return float(np.sum(np.logaddexp(0, z) - y * z))

        # as good a fit as sklearn's (the optimum is flat when a class is nearly separable)
        assert loss(model["a"], model["b"]) <= loss(lr.coef_[0, 0], lr.intercept_[0]) + 1e-3 * len(y)
        assert model["a"] > 0
    # a category never seen at fit time scores 0 on apply; strict order is kept within categories
    s = apply_calibration(cal, np.array([0.9, 0.1]), np.array([10 ** 9, 10 ** 9]))
    assert np.all(s < 1e-8) and s[0] > s[1]
    h = calibrate_detections(hgt, hdets, method="histbin", recipe="devil")
    any_model = next(v for v in h.per_category.values() if v["kind"] == "histbin-netcal")
    assert len(any_model["values"]) == 20
    with pytest.raises(InputError, match="devil recipe has"):
        calibrate_detections(hgt, hdets, method="bbq", recipe="devil")


def test_fit_calibration_file_takes_the_settings_or_a_mapping_of_them(tmp_path):
    from vistabench.data.detection_synth import synth_detection_set
    from vistabench.protocols.detection.config import CalibrationSettings
    from vistabench.protocols.detection.tools import fit_calibration_file

    syn = synth_detection_set(num_images=10, num_categories=4, dets_per_image=5, seed=0)
    (tmp_path / "gt.json").write_text(json.dumps(syn.ground_truth))
    (tmp_path / "dt.json").write_text(json.dumps(syn.results))
    args = (tmp_path / "gt.json", tmp_path / "dt.json")
    typed = fit_calibration_file(*args, tmp_path / "a.json", CalibrationSettings.from_dict({"method": "histbin"}))
    mapped = fit_calibration_file(*args, tmp_path / "b.json", {"method": "histbin"})
    assert {**typed, "out": None} == {**mapped, "out": None} and mapped["method"] == "histbin"
    assert (tmp_path / "a.json").read_text() == (tmp_path / "b.json").read_text()
    with pytest.raises(InputError, match="^min_samples: "):
        fit_calibration_file(*args, tmp_path / "c.json", {"min_samples": "-3"})
