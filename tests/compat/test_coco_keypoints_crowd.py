"""``compat.coco.COCOeval(iouType="keypoints_crowd", kpt_oks_sigmas=..., use_area=...)`` against
faster-coco-eval's own ``COCOeval_faster`` (CrowdPose's evaluation) on the same files: the nine
stats, ``stats_as_dict``, the eval arrays and the split left in ``params.imgIds`` agree to 1e-9."""

from __future__ import annotations

import copy
import importlib.util
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

#: CrowdPose's 14 sigmas (as its evaluation and faster-coco-eval's test_crowdpose give them)
CROWDPOSE_SIGMAS = np.array([.79, .79, .72, .72, .62, .62, 1.07, 1.07, .87, .87, .89, .89, .79, .79]) / 10.0


def crowdpose_set(*, seed: int, num_images: int = 15, num_categories: int = 1, keep_area: bool = False,
                  crowd_index: tuple = (0.0, 0.1, 0.2, 0.5, 0.79, 0.8, 0.95)) -> tuple[dict, list]:
    """A CrowdPose-like set: 14 keypoints, each image a ``crowdIndex`` (cycling through
    ``crowd_index``: both bounds 0.2 and 0.8 included), annotations without ``area``."""
    gt, res = KR.keypoint_set(seed=seed, num_images=num_images, num_categories=num_categories, num_keypoints=14)
    for i, im in enumerate(gt["images"]):
        im["crowdIndex"] = crowd_index[i % len(crowd_index)]
    if not keep_area:
        for a in gt["annotations"]:
            del a["area"]
    return gt, res


def _run(gt_path, results, *, ours: bool, use_area: bool, sigmas=CROWDPOSE_SIGMAS):
    with R.quiet():
        if ours:
            g = COCO(gt_path)
            d = g.loadRes(copy.deepcopy(results))
            e = COCOeval(g, d, iouType="keypoints_crowd", kpt_oks_sigmas=sigmas, use_area=use_area)
        else:
            from faster_coco_eval import COCO as FCOCO
            from faster_coco_eval import COCOeval_faster

            g = FCOCO(gt_path)
            d = g.loadRes(copy.deepcopy(results))
            e = COCOeval_faster(g, d, iouType="keypoints_crowd", kpt_oks_sigmas=sigmas, use_area=use_area,
                                print_function=lambda *a, **k: None)
        e.evaluate()
        e.accumulate()
        before = {k: np.array(e.eval[k]) for k in ("precision", "recall", "scores")}
        before["ious"] = {(int(i), int(c)): np.asarray(v, float) for (i, c), v in e.ious.items()}
        e.summarize()
    return e, before


def _compare(tmp_path, gt, res, *, use_area: bool, sigmas=CROWDPOSE_SIGMAS):
    pytest.importorskip("faster_coco_eval")
    p = R.write(tmp_path, "gt.json", gt)
    ref, ref_before = _run(p, res, ours=False, use_area=use_area, sigmas=sigmas)
    ours, ours_before = _run(p, res, ours=True, use_area=use_area, sigmas=sigmas)
    assert len(ours.stats) == len(ref.stats) == 9
    R.same_arrays(ours.stats, ref.stats)
    assert list(ours.stats_as_dict) == list(ref.stats_as_dict)
    R.same_arrays(list(ours.stats_as_dict.values()), list(ref.stats_as_dict.values()))
    for k in ("precision", "recall", "scores"):
        R.same_arrays(ours_before[k], ref_before[k])  # the whole set, every area range
    assert ours_before["ious"].keys() == ref_before["ious"].keys()
    for key, v in ref_before["ious"].items():  # computeOks per (image, category), box-scaled or not
        R.same_arrays(ours_before["ious"][key], v)
        R.same_arrays(ours.eval[k], ref.eval[k])  # the hard split's, left by summarize as theirs
    assert [int(i) for i in ours.params.imgIds] == [int(i) for i in ref.params.imgIds]
    return ours, ref


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_crowdpose_without_area_equals_faster_coco_eval(tmp_path, seed):
    gt, res = crowdpose_set(seed=seed)
    ours, _ = _compare(tmp_path, gt, res, use_area=False)
    assert 0 < ours.stats[0] < 1  # a set where something is found and something missed
    # the per-image records read a missing area as 0 too: every ground truth outside medium / large
    recs = [r for r in ours.evalImgs if r is not None]
    assert recs and all(all(r["gtIgnore"]) for r in recs if r["aRng"] != [0, 1e10] and len(r["gtIgnore"]))


def test_use_area_with_two_categories_equals_faster_coco_eval(tmp_path):
    gt, res = crowdpose_set(seed=4, num_categories=2, keep_area=True)
    _compare(tmp_path, gt, res, use_area=True)
    _compare(tmp_path, gt, res, use_area=False)  # areas present: ranges by area, OKS by the box


def test_box_scaled_oks_differs_from_area_scaled(tmp_path):
    """use_area changes the OKS (the 0.53 * w * h scale), so the numbers are not the same."""
    gt, res = crowdpose_set(seed=6, keep_area=True)
    p = R.write(tmp_path, "gt.json", gt)
    by_box, _ = _run(p, res, ours=True, use_area=False)
    by_area, _ = _run(p, res, ours=True, use_area=True)
    assert not np.allclose(by_box.stats[:6], by_area.stats[:6])
    e = by_box
    ious = e.computeOks(*next(k for k, v in e.ious.items() if len(v)))
    assert np.all((ious >= 0) & (ious <= 1))


def test_empty_split_equals_faster_coco_eval(tmp_path):
    """No easy and no medium image: faster-coco-eval averages an all -1 precision array there."""
    gt, res = crowdpose_set(seed=3, crowd_index=(0.85, 0.9))
    ours, _ = _compare(tmp_path, gt, res, use_area=False)
    assert ours.stats_as_dict["AP_easy"] == ours.stats_as_dict["AP_medium"] == -1.0


def test_all_crowd_ground_truth_equals_faster_coco_eval(tmp_path):
    gt, res = crowdpose_set(seed=7)
    for a in gt["annotations"]:
        a["iscrowd"] = 1
    ours, _ = _compare(tmp_path, gt, res, use_area=False)
    assert np.all(ours.stats[:6] == -1)  # nothing counted: every AP / AR undefined


def test_no_ground_truth_equals_faster_coco_eval(tmp_path):
    gt, res = crowdpose_set(seed=8)
    gt["annotations"] = []
    ours, _ = _compare(tmp_path, gt, res, use_area=False)
    assert np.all(ours.stats == -1)


def test_the_splits_follow_crowd_index(tmp_path):
    gt, res = crowdpose_set(seed=0, crowd_index=(0.19, 0.2, 0.79, 0.8))
    p = R.write(tmp_path, "gt.json", gt)
    e, _ = _run(p, res, ours=True, use_area=False)
    hard = sorted(im["id"] for im in gt["images"] if im["crowdIndex"] >= 0.8)
    assert [int(i) for i in e.params.imgIds] == hard


def test_mistakes_are_one_line(tmp_path):
    gt, res = crowdpose_set(seed=0)
    del gt["images"][2]["crowdIndex"]
    p = R.write(tmp_path, "gt.json", gt)
    with pytest.raises(InputError, match="crowdIndex"):
        _run(p, res, ours=True, use_area=False)
    g = COCO(p)
    with pytest.raises(InputError, match="kpt_oks_sigmas: only for iouType"):
        COCOeval(g, g, iouType="bbox", kpt_oks_sigmas=CROWDPOSE_SIGMAS)
    with pytest.raises(InputError, match="use_area"):
        COCOeval(g, g, iouType="segm", use_area="no")
    gt, res = crowdpose_set(seed=0)
    p = R.write(tmp_path, "gt2.json", gt)
    with pytest.raises(InputError, match="area"):  # use_area=True needs the annotations' area
        _run(p, res, ours=True, use_area=True)
    with pytest.raises(InputError, match="kpt_oks_sigmas"):  # 17 sigmas for 14 keypoints
        _run(p, res, ours=True, use_area=False, sigmas=np.full(17, 0.05))


def test_stats_as_dict_of_keypoints_equals_faster_coco_eval(tmp_path):
    """The same names for iouType "keypoints" (ten stats), given ``kpt_oks_sigmas=``."""
    pytest.importorskip("faster_coco_eval")
    from faster_coco_eval import COCO as FCOCO
    from faster_coco_eval import COCOeval_faster

    gt, res = crowdpose_set(seed=9, keep_area=True)
    p = R.write(tmp_path, "gt.json", gt)
    out = []
    for C, E, extra in ((FCOCO, COCOeval_faster, {"print_function": lambda *a, **k: None}), (COCO, COCOeval, {})):
        with R.quiet():
            g = C(p)
            e = E(g, g.loadRes(copy.deepcopy(res)), iouType="keypoints", kpt_oks_sigmas=CROWDPOSE_SIGMAS, **extra)
            e.evaluate()
            e.accumulate()
            e.summarize()
        out.append(e.stats_as_dict)
    assert list(out[1]) == list(out[0])
    R.same_arrays(list(out[1].values()), list(out[0].values()))
    with pytest.raises(RuntimeError, match="summarize"):
        _ = COCOeval(COCO(p), iouType="keypoints").stats_as_dict
