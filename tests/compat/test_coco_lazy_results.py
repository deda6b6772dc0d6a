"""``compat.coco``'s column-backed ``loadRes`` of a results file: the same scores and the same
pycocotools attributes (``dataset``, ``anns``, ``imgToAnns``, ``catToImgs``, ``evalImgs``), built
on first read."""

from __future__ import annotations

import copy
import importlib.util
import json
import pathlib

import numpy as np
import pytest

from vistabench.compat.coco import COCO, COCOeval
from vistabench.data.detection_synth import synth_detection_set

_here = pathlib.Path(__file__).parent
_spec = importlib.util.spec_from_file_location("_compat_reference", _here / "_reference.py")
R = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(R)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    s = synth_detection_set(num_images=12, num_categories=6, dets_per_image=25, seed=41, format="coco",
                            image_size=(120, 160))
    gt = copy.deepcopy(s.ground_truth)
    for a in gt["annotations"][::5]:
        a["iscrowd"] = 1
    res = copy.deepcopy(s.results)
    res[3]["extra"] = "kept"  # a key the evaluation ignores: pycocotools keeps it in the dicts
    res[4]["category_id"] = 987654  # a category outside the ground truth: never evaluated
    d = tmp_path_factory.mktemp("lazy")
    return R.write(d, "gt.json", gt), R.write(d, "res.json", res), res


def _run(C, E, gt_path, res):
    with R.quiet():
        g = C(gt_path)
        d = g.loadRes(res)
        e = E(g, d, "bbox")
        e.evaluate()
        e.accumulate()
        e.summarize()
    return d, e


def test_file_results_are_columns_until_read(files):
    gt_path, res_path, _ = files
    g = COCO(gt_path)
    d = g.loadRes(res_path)
    assert d._columns is not None and "dataset" not in d.__dict__ and "anns" not in d.__dict__
    assert d.imgs.keys() == g.imgs.keys() and d.cats.keys() == g.cats.keys()
    e = COCOeval(g, d, "bbox")
    e.evaluate()
    assert "anns" not in d.__dict__  # evaluating did not build the dicts


def test_file_results_equal_pycocotools_scores_and_attributes(files):
    import pycocotools.coco as pc
    import pycocotools.cocoeval as pe

    gt_path, res_path, res = files
    dr, ref = _run(pc.COCO, pe.COCOeval, gt_path, res_path)
    do, ours = _run(COCO, COCOeval, gt_path, res_path)
    R.same_arrays(ours.stats, ref.stats)
    for k in ("precision", "recall", "scores"):
        R.same_arrays(ours.eval[k], ref.eval[k])
    # the attributes, built on first read, are pycocotools' (dicts with id, area, iscrowd, rectangle masks)
    assert json.dumps(do.dataset, sort_keys=True) == json.dumps(dr.dataset, sort_keys=True)
    assert do.anns == dr.anns
    assert dict(do.imgToAnns) == dict(dr.imgToAnns) and dict(do.catToImgs) == dict(dr.catToImgs)
    assert do.anns[4]["extra"] == "kept"
    assert do.getAnnIds(imgIds=[res[0]["image_id"]]) == dr.getAnnIds(imgIds=[res[0]["image_id"]])
    assert len(ours.evalImgs) == len(ref.evalImgs)
    for a, b in zip(ours.evalImgs, ref.evalImgs):
        assert (a is None) == (b is None)
        if a is not None:
            assert list(a["dtIds"]) == list(b["dtIds"]) and list(a["gtIds"]) == list(b["gtIds"])
            assert np.array_equal(a["dtMatches"], b["dtMatches"]) and np.array_equal(a["dtIgnore"], b["dtIgnore"])
    # and the same as the list path's (dicts prepared at once)
    dl, listed = _run(COCO, COCOeval, gt_path, copy.deepcopy(res))
    R.same_arrays(listed.stats, ours.stats)
    assert dl.anns == do.anns


def test_dataset_set_by_the_caller_replaces_the_columns(files):
    gt_path, res_path, res = files
    g = COCO(gt_path)
    d = g.loadRes(res_path)
    d.dataset = {"images": g.dataset["images"], "categories": g.dataset["categories"],
                 "annotations": [dict(a, id=i + 1, area=a["bbox"][2] * a["bbox"][3], iscrowd=0)
                                 for i, a in enumerate(res[:10])]}
    d.createIndex()
    assert len(d.anns) == 10 and d._columns is None
    e = COCOeval(g, d, "bbox")
    e.evaluate()
    assert e._pm is not None and len(e._pm.det) <= 10


@pytest.mark.parametrize("change", ["segmentation", "empty", "unknown image", "nan score"])
def test_other_files_take_the_dict_path_with_its_errors(tmp_path, files, change):
    gt_path, _, res = files
    res = copy.deepcopy(res)
    if change == "segmentation":
        res[0]["segmentation"] = [[1, 1, 5, 1, 5, 5]]
    elif change == "empty":
        res = []
    elif change == "unknown image":
        res[2]["image_id"] = 999_999
    else:
        res[1]["score"] = float("nan")
    p = tmp_path / "r.json"
    p.write_text(json.dumps(res))
    g = COCO(gt_path)
    if change == "empty":
        with pytest.raises(IndexError):
            g.loadRes(str(p))
    elif change == "unknown image":
        with pytest.raises(Exception, match="image_id 999999 is not in the ground truth"):
            g.loadRes(str(p))
    else:
        d = g.loadRes(str(p))
        assert "anns" in d.__dict__ and d._lazy_from is None and len(d.anns) == len(res)  # dicts at once


def test_result_dicts_changed_after_load_res_count_after_create_index(files):
    import pycocotools.coco as pc
    import pycocotools.cocoeval as pe

    gt_path, _, res = files
    out = []
    for C, E in ((pc.COCO, pe.COCOeval), (COCO, COCOeval)):
        with R.quiet():
            g = C(gt_path)
            d = g.loadRes(copy.deepcopy(res))
            for a in d.dataset["annotations"][::3]:
                a["score"] = 1.0 - a["score"]  # a re-scoring after loading
            d.createIndex()
            e = E(g, d, "bbox")
            e.evaluate()
            e.accumulate()
            e.summarize()
        out.append(e)
    R.same_arrays(out[1].stats, out[0].stats)
    R.same_arrays(out[1].eval["precision"], out[0].eval["precision"])
