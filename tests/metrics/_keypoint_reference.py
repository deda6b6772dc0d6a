"""Random COCO-style keypoint sets and pycocotools' keypoint evaluation of them (differential tests).

The sets exercise every branch of pycocotools' OKS: visible and unlabelled (v = 0) keypoints,
ground truth with no visible keypoint (the extended-box distance), ``num_keypoints == 0`` (ignored),
crowd annotations, an ``area`` that differs from the box's, detections whose own visibility is 0,
results with and without a box, and near-duplicate detections.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import uuid

import numpy as np


def keypoint_set(*, seed: int = 0, num_images: int = 12, num_categories: int = 2, num_keypoints: int = 17,
                 dets_per_gt: float = 1.5, false_per_image: int = 3, with_box: bool = False,
                 crowd_every: int = 9) -> tuple[dict, list]:
    """(ground truth dict, results list) with ``num_keypoints`` points per instance."""
    rng = np.random.default_rng(seed)
    K = num_keypoints
    images = [{"id": 100 + i, "height": 480, "width": 640} for i in range(num_images)]
    cats = [{"id": 1 + c, "name": f"kp{c}", "keypoints": [f"p{k}" for k in range(K)], "skeleton": []}
            for c in range(num_categories)]
    anns, res = [], []
    aid = 1
    for im in images:
        for _ in range(int(rng.integers(0, 6))):
            w, h = rng.uniform(8, 220, 2)
            x, y = rng.uniform(0, 640 - w), rng.uniform(0, 480 - h)
            kx, ky = rng.uniform(x, x + w, K), rng.uniform(y, y + h, K)
            p_vis = rng.choice([0.0, 0.3, 0.8, 1.0])
            v = np.where(rng.random(K) < p_vis, rng.integers(1, 3, K), 0)
            kx, ky = np.where(v > 0, np.round(kx), 0), np.where(v > 0, np.round(ky), 0)
            nk = int(np.count_nonzero(v))
            if rng.random() < 0.1:
                nk = 0  # labelled "no keypoints" although some are visible: ignored by num_keypoints
            area = float(w * h * rng.uniform(0.4, 1.0))
            cat = int(rng.integers(1, num_categories + 1))
            crowd = int(crowd_every > 0 and aid % crowd_every == 0)
            anns.append({"id": aid, "image_id": im["id"], "category_id": cat, "bbox": [float(x), float(y), float(w), float(h)], "area": area,
                         "iscrowd": crowd, "num_keypoints": nk,
                         "keypoints": np.stack([kx, ky, v], 1).ravel().tolist()})
            aid += 1
            for _ in range(int(rng.poisson(dets_per_gt))):
                s = rng.choice([1.0, 4.0, 15.0, 40.0])
                dx, dy = rng.normal(0, s, K), rng.normal(0, s, K)
                cx, cy = rng.uniform(x, x + w, K), rng.uniform(y, y + h, K)
                px = np.where(v > 0, kx, cx) + dx
                py = np.where(v > 0, ky, cy) + dy
                dv = np.where(rng.random(K) < 0.2, 0.0, rng.random(K))  # the detection's own scores / v = 0
                dc = cat if rng.random() < 0.9 else int(rng.integers(1, num_categories + 1))
                res.append(_result(im["id"], dc, px, py, dv, float(np.round(rng.random(), 3)), with_box, rng))
        for _ in range(false_per_image):
            px, py = rng.uniform(0, 640, K), rng.uniform(0, 480, K)
            res.append(_result(im["id"], int(rng.integers(1, num_categories + 1)), px, py, rng.random(K),
                               float(np.round(rng.random(), 3)), with_box, rng))
    order = rng.permutation(len(res))
    gt = {"info": {"description": "keypoint test set"}, "images": images, "annotations": anns, "categories": cats}
    return gt, [res[i] for i in order]


def _result(image_id, cat, px, py, dv, score, with_box, rng) -> dict:
    r = {"image_id": image_id, "category_id": cat, "score": score,
         "keypoints": np.stack([px, py, dv], 1).ravel().tolist()}
    if with_box:
        x0, y0 = float(px.min()), float(py.min())
        r["bbox"] = [x0, y0, float(px.max()) - x0 + float(rng.uniform(0, 5)), float(py.max()) - y0]
    return r


def pycocotools_keypoints(gt: dict, results: list, tmp_path, *, sigmas=None, tweak=None):
    """pycocotools' keypoint COCOeval run on copies of the inputs (evaluate, accumulate, summarize)."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    path = tmp_path / f"kp-gt-{uuid.uuid4().hex}.json"
    path.write_text(json.dumps(gt))
    with contextlib.redirect_stdout(io.StringIO()):
        g = COCO(str(path))
        e = COCOeval(g, g.loadRes(copy.deepcopy(results)), "keypoints")
        if sigmas is not None:
            e.params.kpt_oks_sigmas = np.asarray(sigmas, float)
        if tweak is not None:
            tweak(e.params)
        e.evaluate()
        e.accumulate()
        e.summarize()
    return e
