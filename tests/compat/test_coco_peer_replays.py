"""The behaviours that faster-coco-eval's pycocotools-comparison tests and detectron2's
test_coco_evaluation.py check, replayed on our own data: the same script run with pycocotools and
with ``vistabench.compat.coco`` (one import changed) must give the same arrays (1e-9) or raise an
exception of the same type."""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import io
import json
import pathlib
import warnings

import numpy as np
import pytest

from vistabench.compat.coco import COCO, COCOeval
from vistabench.errors import InputError
from vistabench.metrics.detection import OfficialToolsDifferenceWarning

pc = pytest.importorskip("pycocotools.coco")
pe = pytest.importorskip("pycocotools.cocoeval")
mu = pytest.importorskip("pycocotools.mask")

_spec = importlib.util.spec_from_file_location("_compat_reference", pathlib.Path(__file__).parent / "_reference.py")
R = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(R)


def _rle(h, w, x, y, bw, bh):
    m = np.zeros((h, w), np.uint8, order="F")
    m[int(y):int(y + bh), int(x):int(x + bw)] = 1
    r = mu.encode(m)
    r["counts"] = r["counts"].decode()
    return r


def _dataset(n_img, n_cat, per_img, *, masks=False, seed=5, first_id=0, crowd=0.0):
    """Images of varied size with small / medium / large boxes; ids start at ``first_id`` (0 as in
    faster-coco-eval's generator: a ground truth with id 0)."""
    rng = np.random.default_rng(seed)
    images, anns, cats = [], [], [{"id": c, "name": f"c{c}", "supercategory": "s"} for c in range(n_cat)]
    for i in range(n_img):
        h, w = int(rng.integers(200, 320)), int(rng.integers(200, 320))
        images.append({"id": i, "height": h, "width": w})
        for _ in range(int(rng.integers(max(1, per_img - 3), per_img + 3))):
            lo, hi = [(6, 30), (32, 90), (96, 150)][int(rng.integers(0, 3))]
            bw, bh = int(rng.integers(lo, hi)), int(rng.integers(lo, hi))
            x, y = int(rng.integers(0, w - bw)), int(rng.integers(0, h - bh))
            a = {"id": first_id + len(anns), "image_id": i, "category_id": int(rng.integers(0, n_cat)),
                 "bbox": [float(x), float(y), float(bw), float(bh)], "area": float(bw * bh),
                 "iscrowd": int(rng.random() < crowd)}
            if masks:
                a["segmentation"] = _rle(h, w, x, y, bw, bh)
            anns.append(a)
    return {"images": images, "annotations": anns, "categories": cats}


def _predictions(gt, *, masks=False, seed=9, rate=0.8):
    rng = np.random.default_rng(seed)
    sizes = {im["id"]: (im["height"], im["width"]) for im in gt["images"]}
    out = []
    for a in gt["annotations"]:
        if rng.random() > rate:
            continue
        x, y, w, h = a["bbox"]
        f = rng.uniform(0.85, 1.15)
        p = {"image_id": a["image_id"], "category_id": a["category_id"], "score": float(rng.uniform(0.3, 1)),
             "bbox": [x + rng.uniform(-3, 3), y + rng.uniform(-3, 3), w * f, h * f]}
        if masks:
            p["segmentation"] = _rle(*sizes[a["image_id"]], max(p["bbox"][0], 0), max(p["bbox"][1], 0), w * f, h * f)
        out.append(p)
    for im in gt["images"][: max(1, len(out) // 10)]:  # false positives
        bw, bh = int(rng.integers(10, 80)), int(rng.integers(10, 80))
        x, y = int(rng.integers(0, im["width"] - bw)), int(rng.integers(0, im["height"] - bh))
        p = {"image_id": im["id"], "category_id": int(rng.integers(0, len(gt["categories"]))),
             "score": float(rng.uniform(0.2, 0.7)), "bbox": [float(x), float(y), float(bw), float(bh)]}
        if masks:
            p["segmentation"] = _rle(im["height"], im["width"], x, y, bw, bh)
        out.append(p)
    return out


def _run(C, E, gt_path, results, iou_type, params=None, **kw):
    with contextlib.redirect_stdout(io.StringIO()):
        g = C(gt_path)
        d = g.loadRes(copy.deepcopy(results))
        e = E(g, d, iou_type, **kw)
        for k, v in (params or {}).items():
            setattr(e.params, k, v)
        e.evaluate()
        e.accumulate()
        e.summarize()
    return e


def _same(ours, ref):
    R.same_arrays(ours.stats, ref.stats)
    for k in ("precision", "recall", "scores"):
        R.same_arrays(ours.eval[k], ref.eval[k])


FCE_CASES = {  # faster-coco-eval's comparison scenarios: (images, categories, per image, masks, crowd)
    "bbox_small": (10, 5, 5, False, 0.0),
    "bbox_medium": (50, 10, 10, False, 0.0),
    "bbox_large": (100, 20, 15, False, 0.0),
    "segm_small": (10, 5, 5, True, 0.0),
    "segm_medium": (30, 10, 10, True, 0.0),
    "crowd": (40, 6, 10, False, 0.15),
    "mixed_sizes": (50, 10, 15, False, 0.0),
}


@pytest.mark.parametrize("case", sorted(FCE_CASES))
def test_faster_coco_eval_comparison_scenarios_equal_pycocotools(tmp_path, case):
    n_img, n_cat, per, masks, crowd = FCE_CASES[case]
    gt = _dataset(n_img, n_cat, per, masks=masks, crowd=crowd, seed=len(case))
    assert gt["annotations"][0]["id"] == 0  # the id pycocotools reads as "unmatched"
    path = R.write(tmp_path, "gt.json", gt)
    preds = _predictions(gt, masks=masks, seed=len(case) + 1)
    it = "segm" if masks else "bbox"
    ref = _run(pc.COCO, pe.COCOeval, path, preds, it)
    with pytest.warns(OfficialToolsDifferenceWarning, match="match_zero_id=True"):
        ours = _run(COCO, COCOeval, path, preds, it)
    _same(ours, ref)


@pytest.mark.parametrize("kind", ["perfect", "one_low_score"])
def test_faster_coco_eval_edge_scenarios_equal_pycocotools(tmp_path, kind):
    gt = _dataset(10, 3, 5, seed=2)
    path = R.write(tmp_path, "gt.json", gt)
    if kind == "perfect":
        preds = [{"image_id": a["image_id"], "category_id": a["category_id"], "bbox": a["bbox"], "score": 1.0}
                 for a in gt["annotations"]]
    else:
        preds = [{"image_id": 0, "category_id": 0, "bbox": [10.0, 10.0, 10.0, 10.0], "score": 0.01}]
    ref = _run(pc.COCO, pe.COCOeval, path, preds, "bbox")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OfficialToolsDifferenceWarning)
        ours = _run(COCO, COCOeval, path, preds, "bbox")
    _same(ours, ref)
    if kind == "perfect":
        assert ref.stats[0] < 1.0  # the exact match of annotation id 0 counts as a false positive there


@pytest.mark.parametrize("iou_type", ["bbox", "segm"])
def test_zero_id_option_counts_the_match_as_pycocotools_does_with_ids_from_one(tmp_path, iou_type):
    masks = iou_type == "segm"
    gt = _dataset(12, 3, 6, masks=masks, seed=21)
    preds = _predictions(gt, masks=masks, seed=22)
    shifted = copy.deepcopy(gt)
    for a in shifted["annotations"]:
        a["id"] += 1
    p0, p1 = R.write(tmp_path, "gt0.json", gt), R.write(tmp_path, "gt1.json", shifted)
    ref_fixed = _run(pc.COCO, pe.COCOeval, p1, preds, iou_type)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the option silences the warning
        ours = _run(COCO, COCOeval, p0, preds, iou_type, match_zero_id=True)
    _same(ours, ref_fixed)
    ref_official = _run(pc.COCO, pe.COCOeval, p0, preds, iou_type)
    assert abs(ref_official.stats[0] - ours.stats[0]) > 1e-6 or ref_official.stats[0] == ours.stats[0] == 1


def test_rle_of_another_size_is_scored_as_pycocotools_scores_it(tmp_path):
    """A result mask whose RLE size is not its image's: never read in bbox mode; in segm mode
    pycocotools compares it only with masks of its own size (IoU -1 otherwise): the same numbers,
    with a warning."""
    gt = _dataset(6, 2, 4, seed=3, masks=True)
    path = R.write(tmp_path, "gt.json", gt)
    preds = _predictions(gt, seed=4, masks=True)
    for p in preds[::2]:
        p["segmentation"] = _rle(10, 12, 1, 1, 3, 3)  # not its image's size
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OfficialToolsDifferenceWarning)
        _same(_run(COCO, COCOeval, path, preds, "bbox"), _run(pc.COCO, pe.COCOeval, path, preds, "bbox"))
        with pytest.warns(UserWarning, match=r"mask\(s\) of another size than their image \(first: detection 0's "
                                             r"mask is \[10, 12\].*matches only masks of its own size"):
            ours = _run(COCO, COCOeval, path, preds, "segm")
        _same(ours, _run(pc.COCO, pe.COCOeval, path, preds, "segm"))


def test_small_masks_on_large_images_in_ground_truth_and_results_as_pycocotools(tmp_path):
    """faster-coco-eval's fixture style: every annotation and result carries the same 10 x 10 RLE on a
    640 x 640 image (the boxes and areas are the real ones). pycocotools scores it (equal masks: IoU
    1; a mask of the image's size against a 10 x 10 one: -1); so do we, with one warning."""
    small = _rle(10, 10, 0, 0, 5, 5)
    gt = _dataset(4, 2, 5, seed=31)
    for im in gt["images"]:
        im["height"] = im["width"] = 640
    for k, a in enumerate(gt["annotations"]):
        a["id"] += 1
        a["segmentation"] = small if k % 3 else _rle(640, 640, *a["bbox"])
    path = R.write(tmp_path, "gt.json", gt)
    preds = _predictions(gt, seed=32)
    for k, p in enumerate(preds):
        p["segmentation"] = small if k % 2 else _rle(640, 640, *(max(v, 0) for v in p["bbox"]))
    for it in ("bbox", "segm"):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            ours = _run(COCO, COCOeval, path, preds, it)
        _same(ours, _run(pc.COCO, pe.COCOeval, path, preds, it))
        if it == "segm":
            assert any("mask(s) of another size than their image (first: annotation" in str(x.message) for x in w)
            assert ours.stats[0] > 0


# ---------------------------------------------------------------------------- detectron2's replay
def _d2_base():
    h, w = 60, 80
    rng = np.random.default_rng(0)
    imgs = [{"id": 5, "height": h, "width": w}, {"id": 9, "height": h, "width": w}]
    cats = [{"id": 1, "name": "a"}, {"id": 3, "name": "b"}]
    anns, dets = [], []
    for k in range(10):
        x, y = (float(v) for v in rng.integers(0, 40, 2))
        bw, bh = (float(v) for v in rng.integers(5, 30, 2))
        im, cat = imgs[k % 2]["id"], cats[k % 3 % 2]["id"]
        anns.append({"id": 100 + k, "image_id": im, "category_id": cat, "bbox": [x, y, bw, bh], "area": bw * bh,
                     "iscrowd": int(k == 5), "segmentation": [[x, y, x, y + bh, x + bw, y + bh, x + bw, y]]})
        dets.append({"image_id": im, "category_id": cat, "bbox": [x + 1, y, bw, bh - 1], "score": float(rng.random()),
                     "segmentation": _rle(h, w, x + 1, y, bw, bh - 1)})
    return {"images": imgs, "annotations": anns, "categories": cats}, dets


def _d2_experiments():
    gt, dets = _d2_base()
    ex = {"full": (dets, gt, {}), "empty_dt": ([], gt, {}), "no_categories": (dets, gt, {"useCats": 0}),
          "no_ious": (dets, gt, {"iouThrs": []}), "no_max_dets": (dets, gt, {"maxDets": []}),
          "one_max_det": (dets, gt, {"maxDets": [1]})}
    g = copy.deepcopy(gt)
    g["annotations"] = []
    ex["empty_gt"] = (dets, g, {})
    for f in ("id", "image_id", "category_id", "score", "area", "iscrowd", "ignore", "bbox", "segmentation"):
        g = copy.deepcopy(gt)
        for a in g["annotations"]:
            a.pop(f, None)
        d = copy.deepcopy(dets)
        for a in d:
            a.pop(f, None)
        ex["omit_gt_" + f] = (dets, g, {})
        ex["omit_dt_" + f] = (d, gt, {})
    return ex


D2 = _d2_experiments()


def _outcome(C, E, path, dt, params, iou_type):
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            api = C(path)
    except Exception as exc:  # noqa: BLE001 -- the type is what is compared
        return exc
    try:
        return _run(lambda _p: api, E, path, dt, iou_type, params)
    except Exception as exc:  # noqa: BLE001
        return exc


@pytest.mark.parametrize("iou_type", ["bbox", "segm", "keypoints"])
@pytest.mark.parametrize("name", sorted(D2))
def test_detectron2_coco_evaluation_experiments_as_pycocotools(tmp_path, name, iou_type):
    """detectron2's test compares the exception type *names* (``type(e).__name__``): ours carry the
    replaced tool's name (``KeyError``), and keypoints on ground truth without them fail first, as
    pycocotools' ``_prepare`` does, whatever the parameters."""
    dt, gt, params = D2[name]
    path = str(tmp_path / "gt.json")
    pathlib.Path(path).write_text(json.dumps(gt))
    ref = _outcome(pc.COCO, pe.COCOeval, path, dt, params, iou_type)
    ours = _outcome(COCO, COCOeval, path, dt, params, iou_type)
    if isinstance(ref, Exception):
        assert isinstance(ours, type(ref)), (name, ref, ours)
        assert type(ours).__name__ == type(ref).__name__, (name, ref, ours)
        assert isinstance(ours, InputError) and "\n" not in str(ours), ours
    else:
        assert not isinstance(ours, Exception), ours
        _same(ours, ref)


@pytest.mark.parametrize("params", [{"recThrs": []}, {"areaRng": [], "areaRngLbl": []}])
def test_detectron2_experiments_scored_minus_one_as_pycocotools_with_a_warning(tmp_path, params):
    """pycocotools scores these (precision empty, every AP -1) and detectron2's test_coco_evaluation
    compares its arrays with them: the same arrays here, with a warning."""
    dt, gt, _ = D2["full"]
    path = R.write(tmp_path, "gt.json", gt)
    ref = _run(pc.COCO, pe.COCOeval, path, dt, "bbox", params)
    assert ref.stats[0] == -1
    with pytest.warns(UserWarning, match=r"params.(recThrs|areaRng): empty; every AP is -1, as pycocotools"):
        ours = _run(COCO, COCOeval, path, dt, "bbox", params)
    _same(ours, ref)


@pytest.mark.parametrize("iou_type", ["bbox", "segm"])
def test_cocoeval_takes_pycocotools_coco_objects(tmp_path, iou_type):
    """detectron2's COCOeval_opt is handed pycocotools' COCO objects: ours takes them as well."""
    dt, gt, _ = D2["full"]
    path = R.write(tmp_path, "gt.json", gt)
    ref = _run(pc.COCO, pe.COCOeval, path, dt, iou_type)
    with R.quiet():
        g = pc.COCO(path)
        e = COCOeval(g, g.loadRes(copy.deepcopy(dt)), iou_type)
        e.evaluate()
        e.accumulate()
        e.summarize()
    _same(e, ref)
    with pytest.raises(TypeError, match="cocoGt: expected a COCO object"):
        COCOeval({"images": []}, None, iou_type)


def test_results_loaded_twice_with_numpy_array_boxes_as_pycocotools_with_older_numpy(tmp_path):
    """detectron2's test_coco_evaluation loads one list twice: pycocotools' first ``loadRes`` of
    mask-only results stores ``toBbox``'s numpy array as each ``bbox``; the second reads it as the box
    with numpy < 1.25 (its ``bbox == []`` test), raises ValueError with a newer numpy. Ours reads it
    as the box, with a warning where pycocotools would raise: the numbers pycocotools gives the same
    boxes as lists."""
    dt, gt, _ = D2["omit_dt_bbox"]
    path = R.write(tmp_path, "gt.json", gt)
    shared = copy.deepcopy(dt)
    with R.quiet():
        pc.COCO(path).loadRes(shared)  # the first load stores numpy boxes in ``shared``
    assert isinstance(shared[0]["bbox"], np.ndarray)
    as_lists = [{**d, "bbox": d["bbox"].tolist()} for d in copy.deepcopy(shared)]
    newer_numpy = np.lib.NumpyVersion(np.__version__) >= "1.25.0"
    for it in ("bbox", "segm"):
        if newer_numpy:
            with R.quiet(), pytest.raises(ValueError):
                pc.COCO(path).loadRes(shared)
        ref = _run(pc.COCO, pe.COCOeval, path, as_lists, it)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            g = COCO(path)
            with R.quiet():
                e = COCOeval(g, g.loadRes(shared), it)
                e.evaluate()
                e.accumulate()
                e.summarize()
        _same(e, ref)
        said = [str(x.message) for x in w if "pycocotools' loadRes raises ValueError" in str(x.message)]
        assert len(said) == int(newer_numpy), said
        assert all(s.startswith("resFile[0].bbox: a numpy array [") for s in said)
