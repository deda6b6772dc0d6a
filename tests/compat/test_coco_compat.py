"""vistabench.compat.coco against pycocotools on the same inputs and the same call sequences."""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import pathlib

import numpy as np
import pytest

from vistabench.compat.coco import COCO, COCOeval
from vistabench.compat.evaluation import EmptyResultsError
from vistabench.data.detection_synth import synth_detection_set
from vistabench.errors import InputError

_here = pathlib.Path(__file__).parent
_spec = importlib.util.spec_from_file_location("_compat_reference", _here / "_reference.py")
R = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(R)
_spec2 = importlib.util.spec_from_file_location("_detection_reference", _here.parent / "metrics" / "_detection_reference.py")
DR = importlib.util.module_from_spec(_spec2)
_spec2.loader.exec_module(DR)


def _both(gt, results, iou_type="bbox", tweak=None, gt_path=None):
    """A plain pycocotools script, run with pycocotools and with the drop-in (one import changed)."""
    import pycocotools.coco as pc
    import pycocotools.cocoeval as pe

    out = []
    for C, E in ((pc.COCO, pe.COCOeval), (COCO, COCOeval)):
        with R.quiet():
            g = C(gt_path)
            d = g.loadRes(copy.deepcopy(results) if isinstance(results, list) else results)
            e = E(g, d, iou_type)
            if tweak:
                tweak(e.params)
            e.evaluate()
            e.accumulate()
            e.summarize()
        out.append(e)
    return out


def _compare(ref, ours, *, arrays=("precision", "recall", "scores")):
    R.same_arrays(ours.stats, ref.stats)
    for k in arrays:
        R.same_arrays(ours.eval[k], ref.eval[k])
    assert ours.eval["counts"] == ref.eval["counts"]


@pytest.fixture(scope="module")
def coco_set():
    s = synth_detection_set(num_images=14, num_categories=7, dets_per_image=30, seed=31, format="coco",
                            image_size=(120, 160))
    gt = copy.deepcopy(s.ground_truth)
    for a in gt["annotations"][::7]:
        a["iscrowd"] = 1  # crowd regions (matched many times, IoU over the detection's area)
    gt["images"].append({"id": 10_000, "height": 120, "width": 160})  # an image with nothing in it
    gt["categories"].append({"id": 10_000, "name": "never seen"})  # a category with nothing
    return dataclasses.replace(s, ground_truth=gt)


@pytest.mark.parametrize("shuffle", [False, True])
def test_plain_script_bbox_equals_pycocotools(tmp_path, coco_set, shuffle):
    gt = R.shuffled(coco_set.ground_truth, 3) if shuffle else coco_set.ground_truth
    assert any(a["iscrowd"] for a in gt["annotations"])
    p = R.write(tmp_path, "gt.json", gt)
    ref, ours = _both(gt, coco_set.results, gt_path=p)
    _compare(ref, ours)
    g = COCO(p)
    import pycocotools.coco as pc

    with R.quiet():
        pg = pc.COCO(p)
    assert g.getImgIds() == pg.getImgIds() and g.getCatIds() == pg.getCatIds()  # file order
    i = pg.getImgIds()[2]
    assert g.getAnnIds(imgIds=[i], iscrowd=None) == pg.getAnnIds(imgIds=[i], iscrowd=None)
    assert g.getImgIds(catIds=[pg.getCatIds()[0]]) == pg.getImgIds(catIds=[pg.getCatIds()[0]])


@pytest.mark.parametrize("case", ["imgs", "cats", "nocats", "maxdets", "area", "thrs", "recthrs"])
def test_params_are_honoured_as_pycocotools(tmp_path, coco_set, case):
    gt = coco_set.ground_truth
    p = R.write(tmp_path, "gt.json", gt)
    img_ids = sorted(i["id"] for i in gt["images"])
    cat_ids = sorted(c["id"] for c in gt["categories"])

    def tweak(prm):
        if case == "imgs":
            prm.imgIds = img_ids[::3]
        elif case == "cats":
            prm.catIds = [cat_ids[4], cat_ids[1], cat_ids[2]]
        elif case == "nocats":
            prm.useCats = 0
            prm.catIds = cat_ids[:5]
        elif case == "maxdets":
            prm.maxDets = [3, 1, 20, 50]
        elif case == "area":
            prm.areaRng = [[0, 1e10], [0, 400], [400, 2000], [2000, 1e10], [100, 900]]
            prm.areaRngLbl = ["all", "small", "medium", "large", "mine"]
        elif case == "thrs":
            prm.iouThrs = np.array([0.3, 0.5, 0.75, 0.9])
        else:
            prm.recThrs = np.linspace(0, 1, 11)

    ref, ours = _both(gt, coco_set.results, tweak=tweak, gt_path=p)
    _compare(ref, ours)
    assert ours.params.catIds == ref.params.catIds  # useCats 0 leaves [-1], as pycocotools


def test_eval_imgs_and_ious_on_request(tmp_path, coco_set):
    p = R.write(tmp_path, "gt.json", coco_set.ground_truth)
    ref, ours = _both(coco_set.ground_truth, coco_set.results, gt_path=p)
    R.same_eval_imgs(ours.evalImgs, ref.evalImgs)
    key = next(k for k, v in ref.ious.items() if len(v))
    R.same_arrays(ours.ious[key], ref.ious[key])


def _segm_set(seed=33):
    s = synth_detection_set(num_images=8, num_categories=5, dets_per_image=20, seed=seed, format="coco",
                            image_size=(90, 120))
    return DR.triangle_masks(s.ground_truth, s.results, seed=seed)


def test_segm_results_without_bbox_and_box_only_results(tmp_path):
    gt, res = _segm_set()
    p = R.write(tmp_path, "gt.json", gt)
    no_box = [{k: v for k, v in r.items() if k != "bbox"} for r in res]  # detectron2's segm path
    ref, ours = _both(gt, no_box, iou_type="segm", gt_path=p)
    _compare(ref, ours)
    box_only = [{k: v for k, v in r.items() if k != "segmentation"} for r in res]  # rectangle masks
    ref, ours = _both(gt, box_only, iou_type="segm", gt_path=p)
    _compare(ref, ours)
    assert 0 < ours.stats[0] < 1


def test_segm_ground_truth_without_bbox(tmp_path):
    gt, res = _segm_set(34)
    gt = copy.deepcopy(gt)
    for a in gt["annotations"]:
        del a["bbox"]  # what torchmetrics' COCO export writes for masks
    p = R.write(tmp_path, "gt.json", gt)
    ref, ours = _both(gt, res, iou_type="segm", gt_path=p)
    _compare(ref, ours)


def test_load_res_from_file_and_array(tmp_path, coco_set):
    p = R.write(tmp_path, "gt.json", coco_set.ground_truth)
    rp = R.write(tmp_path, "res.json", coco_set.results)
    ref, ours = _both(coco_set.ground_truth, rp, gt_path=p)
    _compare(ref, ours)
    arr = np.array([[r["image_id"], *r["bbox"], r["score"], r["category_id"]] for r in coco_set.results])
    ref, ours = _both(coco_set.ground_truth, arr, gt_path=p)
    _compare(ref, ours)


def test_empty_results_raise_index_error_like_pycocotools(tmp_path, coco_set):
    g = COCO(R.write(tmp_path, "gt.json", coco_set.ground_truth))
    with pytest.raises(IndexError):
        g.loadRes([])
    with pytest.raises(EmptyResultsError, match="resFile: the results list is empty"):
        g.loadRes([])


@pytest.mark.parametrize("bad, msg", [
    ({"image_id": 999999}, "image_id 999999 is not in the ground truth"),
    ({"segmentation": "abc"}, "segmentation: expected polygons"),
    ({"segmentation": [[1, 2, 3]]}, "even number >= 6"),
    ({"segmentation": {"counts": "abc"}}, "needs 'size'"),
    ({"segmentation": {"size": [120, 160], "counts": [1, -1, 4]}}, "non-negative"),
    ({"segmentation": {"size": [120, 160], "counts": "a b~"}}, "not a compressed RLE string"),
])
def test_bad_results_are_one_line(tmp_path, coco_set, bad, msg):
    """A bad mask of a result with a box loads (pycocotools never reads it in bbox mode) and is
    refused, in one line, when evaluated in segm mode; an unknown image fails at loadRes."""
    gt = copy.deepcopy(coco_set.ground_truth)
    for a in gt["annotations"]:
        x, y, w, h = a["bbox"]
        a["segmentation"] = [[x, y, x, y + h, x + w, y + h, x + w, y]]
    g = COCO(R.write(tmp_path, "gt.json", gt))
    r = [dict(coco_set.results[0], **bad)]
    if "image_id" in bad:
        with pytest.raises(AssertionError, match=msg):  # pycocotools' assertion type, and an InputError
            g.loadRes(r)
        with pytest.raises(InputError, match=msg):
            g.loadRes(r)
        return
    d = g.loadRes(r)
    with R.quiet():
        e = COCOeval(g, d, "bbox")
        e.evaluate()
    with pytest.raises(InputError, match=msg):
        COCOeval(g, d, "segm").evaluate()


def test_bad_params_are_one_line(tmp_path, coco_set):
    g = COCO(R.write(tmp_path, "gt.json", coco_set.ground_truth))
    with R.quiet():
        e = COCOeval(g, g.loadRes(copy.deepcopy(coco_set.results)), "bbox")
    e.params.imgIds = [123456789]
    with pytest.raises(InputError, match="params.imgIds: id 123456789 is not in the ground truth"):
        e.evaluate()
    with pytest.raises(InputError, match="iouType"):
        COCOeval(g, None, "captions")
