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
