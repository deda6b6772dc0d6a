"""Detection sets with planted TIDE errors (for the error-decomposition tests), and tidecv run on them.

Every detection is built from a ground-truth box so that its TIDE error type is known by
construction: a true positive (IoU > 0.7, right class), ``Cls`` (IoU > 0.7, another class present in
the image... or not), ``Loc`` (IoU in (0.2, 0.4), right class), ``Both`` (IoU in (0.2, 0.4), another
class), ``Dupe`` (a second, lower-scored hit on a matched ground truth), ``Bkg`` (far from every
box); ground truths without any detection are ``Miss``. Scores are distinct.
"""

from __future__ import annotations

import json

import numpy as np

KINDS = ("tp", "Cls", "Loc", "Both", "Dupe", "Bkg", "Miss")


def _shift(box, rng, lo, hi):
    """A box of the same size moved so that its IoU with ``box`` lies in (lo, hi)."""
    x, y, w, h = box
    for _ in range(1000):
        dx, dy = rng.uniform(-w, w), rng.uniform(-h, h)
        c = [x + dx, y + dy, w, h]
        iw, ih = max(0.0, w - abs(dx)), max(0.0, h - abs(dy))
        i = iw * ih
        iou = i / (2 * w * h - i)
        if lo < iou < hi:
            return c
    raise RuntimeError("no shift found")


def planted_set(kinds: dict[str, int], *, seed=0, images=12, categories=5, lvis=False, crowd=0):
    """COCO (or LVIS) ground truth and results with ``kinds[k]`` planted errors of each kind
    (plus ``tp`` true positives), spread over ``images`` images."""
    rng = np.random.default_rng(seed)
    imgs = [{"id": i + 1, "width": 640, "height": 480, "file_name": f"{i + 1}.jpg",
             "coco_url": f"http://x/{i + 1}.jpg"} for i in range(images)]
    cats = [{"id": c + 1, "name": f"c{c + 1}", "synset": f"c{c + 1}", "frequency": "rcf"[c % 3]}
            for c in range(categories)]
    anns, dets = [], []

    def new_gt(img, cat, iscrowd=0):
        w, h = rng.uniform(20, 80), rng.uniform(20, 80)
        x, y = rng.uniform(0, 500 - w), rng.uniform(0, 380 - h)
        # images are tiled in a 5x5 grid of cells so that boxes of one image do not overlap
        cell = len([a for a in anns if a["image_id"] == img])
        x, y = (cell % 5) * 120 + rng.uniform(0, 30), (cell // 5) * 90 + rng.uniform(0, 5)
        box = [x, y, w, h]
        a = {"id": len(anns) + 1, "image_id": img, "category_id": cat, "bbox": box, "area": w * h,
             "iscrowd": iscrowd, "segmentation": [[x, y, x + w, y, x + w, y + h, x, y + h]]}
        anns.append(a)
        return a

    def det(img, cat, box):
        dets.append({"image_id": img, "category_id": cat, "bbox": [float(v) for v in box],
                     "score": float(rng.uniform(0.01, 0.99))})

    def other(cat):
        return int(rng.choice([c["id"] for c in cats if c["id"] != cat]))

    for kind, n in kinds.items():
        for _ in range(n):
            img = int(rng.integers(1, images + 1))
            cat = int(rng.integers(1, categories + 1))
            if kind == "Bkg":
                det(img, cat, [rng.uniform(600, 620), rng.uniform(440, 460), 10, 10])
                continue
            g = new_gt(img, cat)
            if kind == "tp":
                det(img, cat, _shift(g["bbox"], rng, 0.75, 0.95))
            elif kind == "Cls":
                det(img, other(cat), _shift(g["bbox"], rng, 0.75, 0.95))
            elif kind == "Loc":
                det(img, cat, _shift(g["bbox"], rng, 0.2, 0.4))
            elif kind == "Both":
                det(img, other(cat), _shift(g["bbox"], rng, 0.2, 0.4))
            elif kind == "Dupe":
                det(img, cat, _shift(g["bbox"], rng, 0.75, 0.95))
                det(img, cat, _shift(g["bbox"], rng, 0.6, 0.7))
                if dets[-1]["score"] > dets[-2]["score"]:
                    dets[-1]["score"], dets[-2]["score"] = dets[-2]["score"], dets[-1]["score"]
    for _ in range(crowd):
        img = int(rng.integers(1, images + 1))
        cat = int(rng.integers(1, categories + 1))
        g = new_gt(img, cat, iscrowd=1)
        det(img, cat, _shift(g["bbox"], rng, 0.75, 0.95))  # inside the crowd region: ignored
    gt = {"images": imgs, "categories": cats, "annotations": anns}
    if lvis:
        for a in anns:
            a.pop("iscrowd")
        present = {(a["image_id"], a["category_id"]) for a in anns}
        for im in imgs:
            absent = [c["id"] for c in cats if (im["id"], c["id"]) not in present]
            im["neg_category_ids"] = absent[: len(absent) // 2]
            mine = [c for (i, c) in present if i == im["id"]]
            im["not_exhaustive_category_ids"] = sorted(mine)[:1] if im["id"] % 3 == 0 else []
    return gt, dets


def tidecv_errors(gt: dict, results: list, tmp_path, *, lvis=False, mask=False) -> dict:
    """tidecv 1.0.1 (its own loaders) on the set: {'AP': run.ap, 'Cls': ..., 'FalsePos': ...}."""
    from tidecv import TIDE, datasets

    g, r = tmp_path / "tide_gt.json", tmp_path / "tide_dt.json"
    g.write_text(json.dumps(gt))
    r.write_text(json.dumps(results))
    data = datasets.LVIS(str(g)) if lvis else datasets.COCO(str(g))
    preds = datasets.COCOResult(str(r))
    tide = TIDE()
    run = tide.evaluate(data, preds, mode=TIDE.MASK if mask else TIDE.BOX, name="x")
    out = {"AP": run.ap}
    out.update(tide.get_main_errors()["x"])
    out.update(tide.get_special_errors()["x"])
    return out


def tidecv_ready(gt: dict) -> dict:
    """The fields tidecv's loaders read and our generator does not write (box polygons, names)."""
    for a in gt["annotations"]:
        x, y, w, h = a["bbox"]
        a.setdefault("segmentation", [[x, y, x + w, y, x + w, y + h, x, y + h]])
        if "neg_category_ids" not in gt["images"][0]:
            a.setdefault("iscrowd", 0)
    for c in gt["categories"]:
        c.setdefault("synset", c.get("name", str(c["id"])))
    for im in gt["images"]:
        im.setdefault("file_name", f"{im['id']}.jpg")
        im.setdefault("coco_url", f"http://x/{im['id']}.jpg")
    return gt
