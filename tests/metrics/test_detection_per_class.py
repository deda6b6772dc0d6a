"""Per-category results, operating points and the confusion matrix against independent computations:
pycocotools / lvis-api run on one category at a time (``params.catIds = [c]``), the official tools'
per-image matches re-counted by brute force, and a confusion matrix written with plain loops."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math

import numpy as np
import pytest

from vistabench.data.coco import read_ground_truth, read_results
from vistabench.data.detection_synth import synth_detection_set
from vistabench.errors import InputError
from vistabench.metrics.detection import (
    Detections,
    GroundTruth,
    confusion_matrix,
    evaluate_detections,
    operating_points,
    per_class_results,
    ranked_outcomes,
)


def _restore_np_float():
    if not hasattr(np, "float"):
        np.float = float  # type: ignore[attr-defined]  (lvis-api on numpy >= 1.24)


def _coco_tool(gt, results, tmp_path):
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    p = tmp_path / "gt.json"
    p.write_text(json.dumps(gt))
    with contextlib.redirect_stdout(io.StringIO()):
        g = COCO(str(p))
        d = g.loadRes(copy.deepcopy(results))
    return g, d, COCOeval


@pytest.fixture(scope="module")
def coco_set():
    s = synth_detection_set(num_images=25, num_categories=8, dets_per_image=40, seed=5, format="coco")
    return s.ground_truth, s.results


@pytest.fixture(scope="module")
def lvis_set():
    s = synth_detection_set(num_images=25, num_categories=8, dets_per_image=40, seed=6, format="lvis")
    return s.ground_truth, s.results


def test_per_class_equals_pycocotools_run_on_each_category(coco_set, tmp_path):
    gt, res = coco_set
    g = read_ground_truth(gt)
    pc = per_class_results(g, read_results(res, g))
    cg, cd, COCOeval = _coco_tool(gt, res, tmp_path)
    for row in pc.rows():
        e = COCOeval(cg, cd, "bbox")
        e.params.catIds = [row["category_id"]]
        with contextlib.redirect_stdout(io.StringIO()):
            e.evaluate()
            e.accumulate()
            e.summarize()
        ref = {"AP": e.stats[0], "AP50": e.stats[1], "AP75": e.stats[2], "recall": e.stats[8]}
        for k, v in ref.items():
            if v == -1:
                assert math.isnan(row[k]), (row, k)
            else:
                assert row[k] == pytest.approx(v, abs=1e-9), (row["category_id"], k)
        assert row["num_gt"] == sum(1 for a in gt["annotations"] if a["category_id"] == row["category_id"]
                                    and not a.get("iscrowd"))
        # detections in the ranked list: pycocotools' top 100 per image and category (no limit here)
        n = sum(len(x["dtIds"]) for x in e.evalImgs if x is not None and x["aRng"] == [0, 1e10])
        assert row["num_detections"] == n
    aps = [r["AP"] for r in pc.rows() if not math.isnan(r["AP"])]
    assert aps == sorted(aps) and len(aps) >= 5  # worst first


def test_per_class_equals_lvis_api_per_category_and_the_mean_is_the_evaluators(lvis_set, tmp_path):
    _restore_np_float()
    from lvis import LVIS, LVISEval, LVISResults

    gt, res = lvis_set
    g = read_ground_truth(gt)
    d = read_results(res, g)
    pc = per_class_results(g, d)
    p = tmp_path / "gt.json"
    p.write_text(json.dumps(gt))
    with contextlib.redirect_stdout(io.StringIO()):
        lg = LVIS(str(p))
        lr = LVISResults(lg, copy.deepcopy(res), max_dets=300)
    for row in pc.rows()[:4]:
        e = LVISEval(lg, lr, "bbox")
        e.params.cat_ids = [row["category_id"]]
        with contextlib.redirect_stdout(io.StringIO()):
            e.run()
        for k, key in (("AP", "AP"), ("AP50", "AP50"), ("AP75", "AP75"), ("recall", "AR@300")):
            v = e.results[key]
            assert (math.isnan(row[k]) if v == -1 else row[k] == pytest.approx(v, abs=1e-9)), (row, k, v)
    ev = evaluate_detections(g, d, variants=("old",))
    assert np.nanmean(pc.ap) == pytest.approx(ev.results["old"]["AP"], abs=1e-12)
    fixed = per_class_results(g, d, variant="fixed", dets_per_class=50)
    ev = evaluate_detections(g, d, variants=("fixed",), dets_per_class=50)
    assert np.nanmean(fixed.ap) == pytest.approx(ev.results["fixed"]["AP"], abs=1e-12)
    assert fixed.num_detections.max() <= 50


def _official_outcomes(gt, res, tmp_path, iou):
    """(category, score, tp) of the detections pycocotools counts at IoU ``iou`` (area all)."""
    cg, cd, COCOeval = _coco_tool(gt, res, tmp_path)
    e = COCOeval(cg, cd, "bbox")
    with contextlib.redirect_stdout(io.StringIO()):
        e.evaluate()
    t = int(np.flatnonzero(np.isclose(e.params.iouThrs, iou))[0])
    out = []
    for x in e.evalImgs:
        if x is None or x["aRng"] != [0, 1e10]:
            continue
        for j, s in enumerate(x["dtScores"]):
            if not x["dtIgnore"][t][j]:
                out.append((x["category_id"], s, bool(x["dtMatches"][t][j] > 0)))
    ngt = {}
    for a in gt["annotations"]:
        if not a.get("iscrowd"):
            ngt[a["category_id"]] = ngt.get(a["category_id"], 0) + 1
    return out, ngt


def _brute_curve(items, ngt, threshold):
    """Every threshold tried: precision, recall, F1 of the detections with score >= it."""
    def at(s):
        kept = [tp for _, sc, tp in items if sc >= s]
        tp = sum(kept)
        p = tp / len(kept) if kept else math.nan
        r = tp / ngt if ngt else math.nan
        f = (2 * p * r / (p + r) if p + r > 0 else 0.0) if kept and ngt else (0.0 if ngt else math.nan)
        return p, r, f
    best = (0.0 if ngt else math.nan, math.nan)  # with ground truth and no detection: F1 0 at no threshold
    for s in sorted({sc for _, sc, _ in items}, reverse=True):
        f = at(s)[2]
        if ngt and (math.isnan(best[1]) or f > best[0]):
            best = (f, s)
    return at(threshold), best


@pytest.mark.parametrize("iou", [0.5, 0.75])
def test_operating_points_equal_brute_force_over_the_official_matches(coco_set, tmp_path, iou):
    gt, res = coco_set
    g = read_ground_truth(gt)
    out = operating_points(ranked_outcomes(g, read_results(res, g), iou=iou), score_threshold=0.4)
    items, ngt = _official_outcomes(gt, res, tmp_path, iou)
    for k, cid in enumerate(g.category_ids):
        mine = [x for x in items if x[0] == cid]
        (p, r, f), (bf, bs) = _brute_curve(mine, ngt.get(int(cid), 0), 0.4)
        got = out["per_category"][k]
        assert got["num_detections"] == len(mine)
        for key, want in (("precision", p), ("recall", r), ("f1", f), ("best_f1", bf), ("best_threshold", bs)):
            assert (math.isnan(got[key]) if math.isnan(want) else got[key] == pytest.approx(want, abs=1e-12)), \
                (cid, key, got[key], want)
    (p, r, f), (bf, bs) = _brute_curve(items, sum(ngt.values()), 0.4)
    o = out["overall"]
    assert (o["precision"], o["recall"], o["f1"]) == pytest.approx((p, r, f), abs=1e-12)
    assert (o["best_f1"], o["best_threshold"]) == pytest.approx((bf, bs), abs=1e-12)
    assert 0 < o["best_f1"] < 1


def test_lvis_operating_points_equal_brute_force_over_lvis_api_matches(lvis_set, tmp_path):
    # federated rules: only evaluated detections, unmatched not-exhaustive ones ignored (lvis-api's dt_ignore)
    _restore_np_float()
    from lvis import LVIS, LVISEval, LVISResults

    gt, res = lvis_set
    assert any(im["not_exhaustive_category_ids"] for im in gt["images"])
    p = tmp_path / "gt.json"
    p.write_text(json.dumps(gt))
    with contextlib.redirect_stdout(io.StringIO()):
        lg = LVIS(str(p))
        e = LVISEval(lg, LVISResults(lg, copy.deepcopy(res), max_dets=300), "bbox")
        e.evaluate()
    items = []
    for x in e.eval_imgs:
        if x is None or list(x["area_rng"]) != [0, 1e10]:
            continue
        for j, sc in enumerate(x["dt_scores"]):
            if not x["dt_ignore"][0][j]:
                items.append((x["category_id"], sc, bool(x["dt_matches"][0][j] > 0)))
    ngt = {}
    for a in gt["annotations"]:
        ngt[a["category_id"]] = ngt.get(a["category_id"], 0) + 1
    g = read_ground_truth(gt)
    out = operating_points(ranked_outcomes(g, read_results(res, g), iou=0.5), score_threshold=0.3)
    for k, cid in enumerate(g.category_ids):
        mine = [x for x in items if x[0] == cid]
        (pr, rc, f), (bf, bs) = _brute_curve(mine, ngt.get(int(cid), 0), 0.3)
        got = out["per_category"][k]
        assert got["num_detections"] == len(mine), cid
        for key, want in (("precision", pr), ("recall", rc), ("f1", f), ("best_f1", bf), ("best_threshold", bs)):
            if math.isnan(want):
                assert math.isnan(got[key]), (cid, key, got[key])
            else:
                assert got[key] == pytest.approx(want, abs=1e-12), (cid, key, got[key], want)


def _brute_confusion(gt, res, iou, thr):
    cats = sorted(c["id"] for c in gt["categories"])
    K = len(cats)
    M = np.zeros((K + 1, K + 1), np.int64)

    def box_iou(a, b, crowd):
        ix = min(a[0] + a[2], b[0] + b[2]) - max(a[0], b[0])
        iy = min(a[1] + a[3], b[1] + b[3]) - max(a[1], b[1])
        if ix <= 0 or iy <= 0:
            return 0.0
        i = ix * iy
        return i / (a[2] * a[3] if crowd else a[2] * a[3] + b[2] * b[3] - i)

    for im in gt["images"]:
        gts = [a for a in gt["annotations"] if a["image_id"] == im["id"]]
        dts = sorted([(i, d) for i, d in enumerate(res) if d["image_id"] == im["id"] and d["score"] >= thr],
                     key=lambda x: (-x[1]["score"], x[0]))
        taken = [False] * len(gts)
        for _, d in dts:
            best, bj = -1.0, None
            for j, a in enumerate(gts):
                if a.get("iscrowd") or taken[j]:
                    continue
                v = box_iou(d["bbox"], a["bbox"], False)
                if v > best:
                    best, bj = v, j
            if bj is not None and best >= iou:
                taken[bj] = True
                M[cats.index(gts[bj]["category_id"]), cats.index(d["category_id"])] += 1
            elif any(a.get("iscrowd") and box_iou(d["bbox"], a["bbox"], True) >= iou for a in gts):
                continue
            else:
                M[K, cats.index(d["category_id"])] += 1
        for j, a in enumerate(gts):
            if not a.get("iscrowd") and not taken[j]:
                M[cats.index(a["category_id"]), K] += 1
    return M


@pytest.mark.parametrize("iou,thr", [(0.5, 0.3), (0.7, 0.0)])
def test_confusion_matrix_equals_a_brute_force_count(coco_set, iou, thr):
    gt, res = coco_set
    gt = copy.deepcopy(gt)
    gt["annotations"][3]["iscrowd"] = 1  # one crowd region: detections inside it are not counted
    g = read_ground_truth(gt)
    M = confusion_matrix(g, read_results(res, g), iou=iou, score_threshold=thr)
    np.testing.assert_array_equal(M, _brute_confusion(gt, res, iou, thr))
    assert M[:-1, :-1].trace() > 0 and M[:-1, :-1].sum() > M[:-1, :-1].trace()  # right and confused classes
    assert M[-1, -1] == 0


def test_edges_no_ground_truth_no_detections_and_bad_arguments():
    gt = GroundTruth.from_arrays(format="coco", image_ids=[1, 2], category_ids=[1, 2], image_id=[1],
                                 category_id=[1], bbox=[[0, 0, 10, 10]])
    dt = Detections.from_ids(gt, image_id=[2], category_id=[2], bbox=[[0, 0, 10, 10]], score=[0.9])
    pc = per_class_results(gt, dt)
    assert pc.rows()[0]["AP"] == 0 and math.isnan(pc.rows()[1]["AP"]) and pc.rows()[1]["num_detections"] == 1
    op = operating_points(ranked_outcomes(gt, dt), score_threshold=0.5)
    c1, c2 = op["per_category"]
    assert c1["recall"] == 0 and c1["f1"] == 0 and math.isnan(c1["precision"])
    assert c1["best_f1"] == 0 and math.isnan(c1["best_threshold"])
    assert math.isnan(c2["recall"]) and c2["precision"] == 0 and math.isnan(c2["best_f1"])
    M = confusion_matrix(gt, dt, score_threshold=0.95)  # nothing kept: the object is missed
    assert M.tolist() == [[0, 0, 1], [0, 0, 0], [0, 0, 0]]
    with pytest.raises(InputError, match="iou: expected one of the evaluator's thresholds"):
        ranked_outcomes(gt, dt, iou=0.42)
    with pytest.raises(InputError, match="variant: expected one of"):
        per_class_results(gt, dt, variant="pool")
    with pytest.raises(InputError, match="score_threshold: expected a finite number"):
        confusion_matrix(gt, dt, score_threshold=float("nan"))


@pytest.mark.parametrize("variant,limits", [("old", {"max_dets_per_image": 7}), ("fixed", {"dets_per_class": 12}),
                                            ("old", {})])
def test_per_class_from_built_options_equals_the_keywords(lvis_set, variant, limits):
    """The options built once (what `detection eval --per-class` passes) give the rows the keywords give."""
    from vistabench.metrics.detection_options import EvaluationOptions

    gt_d, res = lvis_set
    gt = read_ground_truth(gt_d)
    dets = read_results(res, gt)
    by_keywords = per_class_results(gt, dets, variant=variant, **limits).rows()
    by_options = per_class_results(gt, dets, variant=variant, options=EvaluationOptions(**limits)).rows()
    assert by_options == by_keywords


def test_per_class_refuses_options_with_limits_or_another_type(lvis_set):
    from vistabench.metrics.detection_options import EvaluationOptions

    gt_d, res = lvis_set
    gt = read_ground_truth(gt_d)
    dets = read_results(res, gt)
    with pytest.raises(InputError, match="^dets_per_class: give either options"):
        per_class_results(gt, dets, options=EvaluationOptions(), dets_per_class=5)
    with pytest.raises(InputError, match="^options: expected EvaluationOptions, got dict"):
        per_class_results(gt, dets, options={"dets_per_class": 5})
    with pytest.raises(InputError, match="^variant:"):
        per_class_results(gt, dets, variant="pool", options=EvaluationOptions())
