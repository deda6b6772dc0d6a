"""`vistabench detection eval` on the fixtures of detectron2's, faster-coco-eval's and torchmetrics'
own tests that pycocotools scores (issue 40): the same AP as pycocotools, warnings where we say
more, and no hang (a warning relayed by the CLI used to be recorded again without end)."""

from __future__ import annotations

import contextlib
import copy
import io
import json

import numpy as np
import pytest

from vistabench.cli import main

mu = pytest.importorskip("pycocotools.mask")
pc = pytest.importorskip("pycocotools.coco")
pe = pytest.importorskip("pycocotools.cocoeval")


def _rle(m):
    r = mu.encode(np.asfortranarray(m.astype(np.uint8)))
    r["counts"] = r["counts"].decode()
    return r


def _scene():
    """Two images, polygon ground truth with boxes, RLE results with boxes (detectron2-like)."""
    h, w = 60, 80
    imgs = [{"id": 5, "height": h, "width": w}, {"id": 9, "height": h, "width": w}]
    cats = [{"id": 1, "name": "a"}, {"id": 3, "name": "b"}]
    rng = np.random.default_rng(3)
    anns, dets = [], []
    for k in range(8):
        x, y = (float(v) for v in rng.integers(0, 40, 2))
        bw, bh = (float(v) for v in rng.integers(6, 30, 2))
        im, cat = imgs[k % 2]["id"], cats[k % 3 % 2]["id"]
        anns.append({"id": 100 + k, "image_id": im, "category_id": cat, "bbox": [x, y, bw, bh], "area": bw * bh,
                     "iscrowd": 0, "segmentation": [[x, y, x, y + bh, x + bw, y + bh, x + bw, y]]})
        m = np.zeros((h, w), bool)
        m[int(y): int(y + bh - 2), int(x + 1): int(x + bw)] = True
        dets.append({"image_id": im, "category_id": cat, "bbox": [x + 1, y, bw - 1, bh - 2],
                     "score": float(rng.random()), "segmentation": _rle(m)})
    return {"images": imgs, "annotations": anns, "categories": cats}, dets


def _variants():
    gt, dets = _scene()
    out = {"plain": (gt, dets)}
    g = copy.deepcopy(gt)
    for a in g["annotations"]:
        del a["bbox"]
    out["gt_without_bbox"] = (g, dets)
    out["results_without_bbox"] = (gt, [{k: v for k, v in d.items() if k != "bbox"} for d in dets])
    out["results_without_segmentation"] = (gt, [{k: v for k, v in d.items() if k != "segmentation"} for d in dets])
    small = _rle(np.pad(np.ones((5, 5), bool), ((0, 5), (0, 5))))  # faster-coco-eval: 10 x 10 on 640 x 640
    g = copy.deepcopy(gt)
    for im in g["images"]:
        im["height"] = im["width"] = 640
    for a in g["annotations"]:
        a["segmentation"] = small
    out["small_masks_on_large_images"] = (g, [dict(d, segmentation=small) for d in dets])
    mp = np.zeros((5, 5), bool)
    mp[1:3, 2:4] = True
    mt = np.zeros((5, 5), bool)
    mt[1:4, 2] = True
    mt[2, 3] = True
    tm = {"images": [{"id": 1, "height": 5, "width": 5}], "categories": [{"id": 0, "name": "c0"}],
          "annotations": [{"id": 1, "image_id": 1, "category_id": 0, "segmentation": _rle(mt), "area": 4.0,
                           "iscrowd": 0}]}
    out["torchmetrics_docstring_5x5"] = (tm, [{"image_id": 1, "category_id": 0, "segmentation": _rle(mp),
                                             "score": 0.536}])
    return out


VARIANTS = _variants()
CASES = [(n, t) for n in VARIANTS for t in ("bbox", "segm")
         if not (t == "bbox" and n in ("gt_without_bbox", "torchmetrics_docstring_5x5"))]


def _pycocotools_ap(gt_path, dt, iou_type):
    with contextlib.redirect_stdout(io.StringIO()):
        g = pc.COCO(str(gt_path))
        e = pe.COCOeval(g, g.loadRes(copy.deepcopy(dt)), iou_type)
        e.evaluate()
        e.accumulate()
        e.summarize()
    return float(e.stats[0])


@pytest.mark.parametrize("name, iou_type", CASES, ids=[f"{n}-{t}" for n, t in CASES])
def test_detection_eval_scores_the_peers_fixtures_as_pycocotools(tmp_path, capsys, name, iou_type):
    gt, dt = VARIANTS[name]
    (tmp_path / "gt.json").write_text(json.dumps(gt))
    (tmp_path / "dt.json").write_text(json.dumps(dt))
    rc = main(["detection", "eval", "--gt", str(tmp_path / "gt.json"), "--results", str(tmp_path / "dt.json"),
               "--iou-type", iou_type, "--ap", "old", "--no-store", "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    ap = json.loads(out)["old"]["AP"]
    assert abs(ap - _pycocotools_ap(tmp_path / "gt.json", dt, iou_type)) <= 1e-9, (ap, err)
    if name == "results_without_segmentation" and iou_type == "segm":
        assert "result(s) without 'segmentation' are scored as the rectangles of their boxes" in err
    if name == "small_masks_on_large_images" and iou_type == "segm":
        assert "mask(s) of another size than their image" in err


def test_detection_eval_box_mode_on_ground_truth_without_bbox_is_one_line(tmp_path, capsys):
    gt, dt = VARIANTS["gt_without_bbox"]
    (tmp_path / "gt.json").write_text(json.dumps(gt))
    (tmp_path / "dt.json").write_text(json.dumps(dt))
    rc = main(["detection", "eval", "--gt", str(tmp_path / "gt.json"), "--results", str(tmp_path / "dt.json"),
               "--no-store"])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert "annotation 0 (id 100) lacks 'bbox' (8 such)" in err
