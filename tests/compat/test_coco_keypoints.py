"""``compat.coco.COCOeval(iouType="keypoints")`` against pycocotools: the same script with one import
changed gives the same stats, eval arrays, evalImgs, ious and loadRes dicts."""

from __future__ import annotations

import copy
import importlib.util
import json
import pathlib

import numpy as np
import pytest

from vistabench.compat.coco import COCO, COCOeval
from vistabench.errors import InputError

_here = pathlib.Path(__file__).parent
_spec = importlib.util.spec_from_file_location("_compat_reference", _here / "_reference.py")
R = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(R)
_spec2 = importlib.util.spec_from_file_location("_keypoint_reference", _here.parent / "metrics" / "_keypoint_reference.py")
KR = importlib.util.module_from_spec(_spec2)
_spec2.loader.exec_module(KR)


def _both(gt_path, results, tweak=None):
    import pycocotools.coco as pc
    import pycocotools.cocoeval as pe

    out = []
    for C, E in ((pc.COCO, pe.COCOeval), (COCO, COCOeval)):
        with R.quiet():
            g = C(gt_path)
            d = g.loadRes(copy.deepcopy(results) if isinstance(results, list) else results)
            e = E(g, d, "keypoints")
            if tweak:
                tweak(e.params)
            e.evaluate()
            e.accumulate()
            e.summarize()
        out.append(e)
    return out


def _compare(ref, ours):
    assert len(ours.stats) == len(ref.stats) == 10
    R.same_arrays(ours.stats, ref.stats)
    for k in ("precision", "recall", "scores"):
        R.same_arrays(ours.eval[k], ref.eval[k])
    assert ours.eval["counts"] == ref.eval["counts"]


@pytest.mark.parametrize("seed, with_box", [(0, False), (1, True), (2, False)])
def test_keypoint_script_equals_pycocotools(tmp_path, seed, with_box):
    gt, res = KR.keypoint_set(seed=seed, with_box=with_box, num_images=14)
    p = R.write(tmp_path, "gt.json", gt)
    ref, ours = _both(p, res)
    _compare(ref, ours)
    assert ours.params.maxDets == ref.params.maxDets == [20]
    assert ours.params.areaRngLbl == ref.params.areaRngLbl
    assert np.array_equal(ours.params.kpt_oks_sigmas, ref.params.kpt_oks_sigmas)
    # loadRes's keypoint branch (box and area from the keypoints) or box branch, as pycocotools
    assert json.dumps(ours.cocoDt.dataset["annotations"], sort_keys=True) == \
        json.dumps(ref.cocoDt.dataset["annotations"], sort_keys=True, default=float)


@pytest.mark.parametrize("case", ["sigmas", "imgs", "cats", "maxdets", "nocats", "file"])
def test_keypoint_params_are_honoured(tmp_path, case):
    gt, res = KR.keypoint_set(seed=5, num_keypoints=5 if case == "sigmas" else 17, num_categories=3)
    p = R.write(tmp_path, "gt.json", gt)
    img_ids = sorted(i["id"] for i in gt["images"])

    def tweak(prm):
        if case == "sigmas":
            prm.kpt_oks_sigmas = np.array([0.03, 0.05, 0.07, 0.09, 0.11])
        elif case == "imgs":
            prm.imgIds = img_ids[::2]
        elif case == "cats":
            prm.catIds = [3, 1]
        elif case == "maxdets":
            prm.maxDets = [2]
        elif case == "nocats":
            prm.useCats = 0

    results = R.write(tmp_path, "res.json", res) if case == "file" else res
    ref, ours = _both(p, results, tweak=None if case == "file" else tweak)
    _compare(ref, ours)


def test_keypoint_eval_imgs_and_ious(tmp_path):
    gt, res = KR.keypoint_set(seed=9, num_images=8, crowd_every=3)
    gt["annotations"][0]["num_keypoints"] = 0
    p = R.write(tmp_path, "gt.json", gt)
    ref, ours = _both(p, res)
    R.same_eval_imgs(ours.evalImgs, ref.evalImgs)
    assert ours.ious.keys() == ref.ious.keys()
    for key, v in ref.ious.items():
        assert np.array_equal(np.asarray(ours.ious[key]), np.asarray(v)), key


def test_wrong_sigmas_are_one_line(tmp_path):
    gt, res = KR.keypoint_set(seed=3, num_keypoints=5)
    g = COCO(R.write(tmp_path, "gt.json", gt))
    with R.quiet():
        e = COCOeval(g, g.loadRes(copy.deepcopy(res)), "keypoints")
    with pytest.raises(InputError, match="params.kpt_oks_sigmas: 17 sigmas, but the keypoints have 5 points"):
        e.evaluate()
    bad = copy.deepcopy(res)
    bad[4]["keypoints"] = bad[4]["keypoints"][:9]
    with pytest.raises(InputError, match="result 4 has 9 keypoint numbers"):
        g.loadRes(bad)


def _strip_keypoints(gt: dict, res: list, case: str) -> list:
    """The results with ``keypoints`` removed where pycocotools' computeOks never reads them (or, for
    ``read``, from one result it reads)."""
    res = copy.deepcopy(res)
    cells = {(a["image_id"], a["category_id"]) for a in gt["annotations"]}
    rank, seen = {}, {}
    for i in sorted(range(len(res)), key=lambda i: -res[i]["score"]):  # stable, as its mergesort
        key = (res[i]["image_id"], res[i]["category_id"])
        rank[i] = seen[key] = seen.get(key, -1) + 1
    for i, r in enumerate(res):
        in_gt_cell = (r["image_id"], r["category_id"]) in cells
        if (case == "no_gt_cell" and not in_gt_cell) or (case == "beyond_max_dets" and in_gt_cell and rank[i] >= 2) \
                or case == "no_cats":
            del r["keypoints"]
    if case == "read":
        del next(r for r in res if (r["image_id"], r["category_id"]) in cells)["keypoints"]
    return res


@pytest.mark.parametrize("case", ["no_gt_cell", "beyond_max_dets", "no_cats", "read"])
def test_results_without_keypoints_as_pycocotools(tmp_path, case):
    """pycocotools reads a result's keypoints only in an (image, category) cell with ground truth,
    for the cell's first maxDets[-1] results by score, and never with useCats=0 (detectron2's
    test_coco_evaluation scores box results with iouType keypoints on empty ground truth): results
    without them elsewhere are scored to the same arrays; one it reads is its KeyError."""
    gt, res = KR.keypoint_set(seed=11, num_categories=3, with_box=True, dets_per_gt=2.5)
    p = R.write(tmp_path, "gt.json", gt)
    stripped = _strip_keypoints(gt, res, case)
    assert sum("keypoints" not in r for r in stripped) >= 1

    def tweak(prm):
        prm.maxDets = [2] if case == "beyond_max_dets" else prm.maxDets
        prm.useCats = 0 if case == "no_cats" else 1

    if case == "read":
        with pytest.raises(KeyError):
            _both(p, stripped, tweak)  # pycocotools raises first
        with R.quiet():
            g = COCO(p)
            e = COCOeval(g, g.loadRes(stripped), "keypoints")
        with pytest.raises(KeyError, match=r"cocoDt: result \d+ lacks 'keypoints' \(iouType 'keypoints'\)"):
            e.evaluate()
        return
    ref, ours = _both(p, stripped, tweak)
    _compare(ref, ours)
    if case != "no_cats":
        assert np.max(ours.eval["precision"]) > 0  # the results that keep their keypoints are matched


def test_box_results_on_empty_ground_truth_score_minus_one_as_pycocotools(tmp_path):
    """detectron2's ``empty_gt`` experiment with iouType keypoints: box results, no annotation."""
    gt, res = KR.keypoint_set(seed=4, with_box=True)
    gt["annotations"] = []
    for r in res:
        del r["keypoints"]
    ref, ours = _both(R.write(tmp_path, "gt.json", gt), res)
    _compare(ref, ours)
    assert np.all(ours.eval["precision"] == -1) and np.all(ours.stats == -1)
