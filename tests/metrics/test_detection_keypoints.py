"""Keypoint (OKS) evaluation against pycocotools' ``COCOeval(iouType="keypoints")``: the OKS values
bit for bit, the ten summarizeKps stats and the precision / recall arrays to 1e-9 on random sets,
and the edge cases (crowd, num_keypoints 0, no visible keypoint, v = 0 detections, sigmas, one
image, empty results) plus one-line errors."""

from __future__ import annotations

import copy
import importlib.util
import json
import pathlib

import numpy as np
import pytest

from vistabench.data.coco import read_ground_truth, read_results
from vistabench.errors import InputError
from vistabench.metrics.detection import (
    COCO_KPT_OKS_SIGMAS,
    KEYPOINT_STATS,
    evaluate_detections,
    oks_matrix,
)
from vistabench.protocols.detection.runner import score

_here = pathlib.Path(__file__).parent
_spec = importlib.util.spec_from_file_location("_keypoint_reference", _here / "_keypoint_reference.py")
KR = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(KR)

KEYS = [k for k, *_ in KEYPOINT_STATS]


def _files(tmp_path, gt, res):
    g, r = tmp_path / "gt.json", tmp_path / "res.json"
    g.write_text(json.dumps(gt))
    r.write_text(json.dumps(res))
    return g, r


def _ours(tmp_path, gt, res, sigmas=None, variants="old"):
    g, r = _files(tmp_path, gt, res)
    return score(str(r), str(g), iou_type="keypoints", variants=variants, kpt_oks_sigmas=sigmas)


def _same_stats(ours: dict, ref_stats: np.ndarray) -> None:
    assert list(ours) == KEYS
    got = np.array([np.nan if v is None else v for v in ours.values()], float)
    ref = np.where(np.asarray(ref_stats) == -1, np.nan, ref_stats)
    assert np.array_equal(np.isnan(got), np.isnan(ref)), (got, ref)
    assert np.nanmax(np.abs(got - ref), initial=0) <= 1e-9, (got, ref)


def test_oks_values_are_pycocotools_bit_for_bit():
    from pycocotools.cocoeval import COCOeval

    rng = np.random.default_rng(5)
    for trial in range(150):
        K = int(rng.choice([17, 5, 9]))
        sig = COCO_KPT_OKS_SIGMAS if K == 17 else rng.uniform(0.02, 0.12, K)
        G, D = int(rng.integers(1, 5)), int(rng.integers(1, 6))
        gts = []
        for _ in range(G):
            x, y, w, h = rng.uniform(0, 100, 4)
            v = rng.integers(0, 3, K) * (rng.random(K) < rng.random())  # often no visible keypoint
            kp = np.stack([np.where(v > 0, rng.uniform(x, x + w, K), 0), np.where(v > 0, rng.uniform(y, y + h, K), 0),
                           v], 1)
            gts.append({"keypoints": kp.ravel().tolist(), "bbox": [x, y, w, h], "area": float(w * h * rng.uniform(.3, 1))})
        dts = [{"keypoints": np.stack([rng.uniform(-20, 140, K), rng.uniform(-20, 140, K), rng.random(K)], 1)
                .ravel().tolist(), "score": float(rng.random())} for _ in range(D)]
        e = COCOeval.__new__(COCOeval)
        e.params = type("P", (), {"kpt_oks_sigmas": sig, "maxDets": [100]})()
        e._gts, e._dts = {(1, 1): gts}, {(1, 1): dts}
        ref = np.asarray(e.computeOks(1, 1))
        order = np.argsort([-d["score"] for d in dts], kind="mergesort")
        ours = oks_matrix(np.array([dts[i]["keypoints"] for i in order]).reshape(D, K, 3),
                          np.array([g["keypoints"] for g in gts], float).reshape(G, K, 3),
                          np.array([g["bbox"] for g in gts]), np.array([g["area"] for g in gts]), sig)
        assert np.array_equal(ours, ref), trial


@pytest.mark.parametrize("seed, with_box", [(0, False), (1, True), (2, False), (3, True), (4, False)])
def test_random_sets_equal_pycocotools(tmp_path, seed, with_box):
    gt, res = KR.keypoint_set(seed=seed, with_box=with_box, num_images=15, num_categories=2)
    ref = KR.pycocotools_keypoints(gt, res, tmp_path)
    out = _ours(tmp_path, gt, res, variants="old,fixed")
    _same_stats(out["old"], ref.stats)
    _same_stats(out["fixed"], ref.stats)  # COCO: no per-image cut, every detection kept per class
    # the arrays: ours NaN where pycocotools writes -1
    g = read_ground_truth(str(tmp_path / "gt.json"), with_keypoints=True)
    d = read_results(str(tmp_path / "res.json"), g, iou_type="keypoints")
    ev = evaluate_detections(g, d, iou_type="keypoints", variants=("old",))
    p = ev.precision["old"]
    refp = ref.eval["precision"][..., 0]
    assert p.shape == refp.shape == (10, 101, 2, 3)
    assert np.array_equal(np.isnan(p), refp == -1)
    assert np.nanmax(np.abs(p - refp)) <= 1e-9


def test_several_sigmas_and_keypoint_counts(tmp_path):
    gt, res = KR.keypoint_set(seed=7, num_keypoints=5, num_images=14)
    sig = [0.025, 0.05, 0.08, 0.107, 0.062]
    ref = KR.pycocotools_keypoints(gt, res, tmp_path, sigmas=sig)
    _same_stats(_ours(tmp_path, gt, res, sigmas=sig)["old"], ref.stats)
    loose = KR.pycocotools_keypoints(gt, res, tmp_path, sigmas=np.array(sig) * 4)
    _same_stats(_ours(tmp_path, gt, res, sigmas=list(np.array(sig) * 4))["old"], loose.stats)
    assert loose.stats[0] > ref.stats[0]  # wider falloffs: higher OKS, higher AP
    with pytest.raises(InputError, match="kpt_oks_sigmas: 17 sigmas, but the keypoints have 5 points"):
        _ours(tmp_path, gt, res)  # COCO's 17 default does not fit 5 keypoints


def test_edge_cases_equal_pycocotools(tmp_path):
    gt, res = KR.keypoint_set(seed=11, num_images=10, crowd_every=3)
    anns = gt["annotations"]
    assert any(a["iscrowd"] for a in anns)
    anns[0]["num_keypoints"] = 0  # ignored however well it is matched
    k = anns[1]["keypoints"]
    anns[1]["keypoints"] = [0 if i % 3 == 2 else x for i, x in enumerate(k)]  # no visible keypoint: box distance
    anns[1]["num_keypoints"] = 3
    for r in res[::4]:
        r["keypoints"] = [0.0 if i % 3 == 2 else x for i, x in enumerate(r["keypoints"])]  # detections with v = 0
    ref = KR.pycocotools_keypoints(gt, res, tmp_path)
    _same_stats(_ours(tmp_path, gt, res)["old"], ref.stats)


def test_one_image_and_a_perfect_detection(tmp_path):
    gt, res = KR.keypoint_set(seed=13, num_images=1, false_per_image=0, crowd_every=0)
    while not gt["annotations"]:
        gt, res = KR.keypoint_set(seed=14, num_images=1, false_per_image=0, crowd_every=0)
    a = gt["annotations"][0]
    a["num_keypoints"] = max(a["num_keypoints"], 1)
    perfect = {"image_id": a["image_id"], "category_id": a["category_id"], "score": 1.0, "keypoints": a["keypoints"]}
    res = [perfect] + res
    ref = KR.pycocotools_keypoints(gt, res, tmp_path)
    _same_stats(_ours(tmp_path, gt, res)["old"], ref.stats)


def test_pool_of_one_category_is_its_ap(tmp_path):
    gt, res = KR.keypoint_set(seed=17, num_categories=1, num_images=12)
    out = _ours(tmp_path, gt, res, variants="old,pool")
    assert abs(out["pool"]["AP"] - out["old"]["AP"]) <= 1e-12


def test_empty_results(tmp_path):
    gt, _ = KR.keypoint_set(seed=19)
    g, r = _files(tmp_path, gt, [])
    with pytest.raises(InputError, match="empty"):
        score(str(r), str(g), iou_type="keypoints")
    out = score(str(r), str(g), iou_type="keypoints", variants="old", allow_empty=True)
    assert out["old"]["AP"] == 0.0 and out["old"]["AR@20"] == 0.0


@pytest.mark.parametrize("change, msg", [
    (lambda gt, res: res[2].update(keypoints=res[2]["keypoints"][:-3]),
     "detection 2 has 48 keypoint numbers, detection 0 has 51"),
    (lambda gt, res: res[1].pop("keypoints"), "detection 1 has no keypoints list"),
    (lambda gt, res: res[0].update(keypoints=res[0]["keypoints"][:-1]), "detection 0 has 50 keypoint numbers; expected 3"),
    (lambda gt, res: gt["annotations"][3].pop("num_keypoints"), "lacks 'num_keypoints'"),
    (lambda gt, res: gt["annotations"][2].pop("keypoints"), "lacks 'keypoints'"),
    (lambda gt, res: gt["annotations"][1].update(keypoints=[1, 2, 2]), "annotation 1 has 3 keypoint numbers"),
    (lambda gt, res: [r.update(keypoints=r["keypoints"][:15]) for r in res],
     "detections have 5 keypoints each, the ground truth's annotations 17"),
])
def test_bad_keypoints_are_one_line(tmp_path, change, msg):
    gt, res = KR.keypoint_set(seed=23)
    gt, res = copy.deepcopy(gt), copy.deepcopy(res)
    change(gt, res)
    with pytest.raises(InputError, match=msg) as exc:
        _ours(tmp_path, gt, res)
    assert "\n" not in str(exc.value)


def test_keypoints_need_coco_ground_truth_and_sigmas_only_with_keypoints(tmp_path):
    gt, res = KR.keypoint_set(seed=29)
    g = read_ground_truth(gt, with_keypoints=True)
    d = read_results(res, g, iou_type="keypoints")
    with pytest.raises(InputError, match="kpt_oks_sigmas: only used with `iou_type` keypoints"):
        evaluate_detections(g, d, kpt_oks_sigmas=COCO_KPT_OKS_SIGMAS)
    with pytest.raises(InputError, match="kpt_oks_sigmas: expected one positive sigma"):
        evaluate_detections(g, d, iou_type="keypoints", kpt_oks_sigmas=[0.1] * 16 + [-1.0])
    gb = read_ground_truth(gt)  # read without keypoints
    with pytest.raises(InputError, match="needs 'keypoints' in the ground truth"):
        evaluate_detections(gb, d, iou_type="keypoints")
