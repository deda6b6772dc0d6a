"""Reference evaluations with the official tools (lvis-api 0.5.3, pycocotools) for differential tests.

lvis-api uses ``np.float``, removed in numpy 1.24: the alias is restored here, in the tests only.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import uuid
from collections import defaultdict

import numpy as np


def _restore_np_float() -> None:
    if not hasattr(np, "float"):
        np.float = float  # type: ignore[attr-defined]


def lvis_eval(gt: dict, results: list, tmp_path, *, iou_type="bbox", max_dets=300, run=True):
    """LVISEval on ``results`` (max_dets=-1: no per-image limit). Returns the LVISEval object."""
    _restore_np_float()
    from lvis import LVIS, LVISEval, LVISResults

    path = tmp_path / f"gt-{uuid.uuid4().hex}.json"
    path.write_text(json.dumps(gt))
    g = LVIS(str(path))
    r = LVISResults(g, copy.deepcopy(results), max_dets=max_dets)
    e = LVISEval(g, r, iou_type)
    if run:
        e.run()
    return e


def top_k_per_class(results: list, k: int) -> list:
    """As the authors' evaluate_ap_fixed.py: per category, stable descending sort, keep k."""
    by_cat = defaultdict(list)
    for ann in results:
        by_cat[ann["category_id"]].append(ann)
    out = []
    for anns in by_cat.values():
        out.extend(sorted(anns, key=lambda x: x["score"], reverse=True)[:k])
    return out


def lvis_fixed(gt, results, tmp_path, *, k=10_000, iou_type="bbox"):
    """The authors' evaluate_ap_fixed.py: top k per class, no per-image limit; for masks the box is
    dropped so that the mask area decides small/medium/large."""
    top = top_k_per_class(results, k)
    if iou_type == "segm":
        top = [{key: v for key, v in r.items() if key != "bbox"} for r in top]
    return lvis_eval(gt, top, tmp_path, iou_type=iou_type, max_dets=-1)


def pooled_reference(e) -> dict:
    """Independent pooled re-accumulation of an evaluated LVISEval's per-image matches (area all)."""
    p = e.params
    I, A = len(p.img_ids), len(p.area_rng)
    cats = e.lvis_gt.load_cats(p.cat_ids)
    pools = {"AP": list(range(len(p.cat_ids)))}
    for f in "rcf":
        pools[f"AP{f}"] = [i for i, c in enumerate(cats) if c["frequency"] == f]
    prec = {}
    for name, idxs in pools.items():
        E = [e.eval_imgs[c * A * I + i] for i in range(I) for c in idxs]
        E = [x for x in E if x is not None]
        curve = np.full((len(p.iou_thrs), len(p.rec_thrs)), np.nan)
        if E:
            scores = np.concatenate([x["dt_scores"] for x in E])
            order = np.argsort(-scores, kind="mergesort")
            dtm = np.concatenate([x["dt_matches"] for x in E], axis=1)[:, order]
            dtig = np.concatenate([x["dt_ignore"] for x in E], axis=1)[:, order]
            ngt = int(np.count_nonzero(np.concatenate([x["gt_ignore"] for x in E]) == 0))
            if ngt:
                tps = np.logical_and(dtm, ~dtig.astype(bool)).cumsum(1).astype(float)
                fps = np.logical_and(~dtm.astype(bool), ~dtig.astype(bool)).cumsum(1).astype(float)
                for t in range(len(p.iou_thrs)):
                    tp, fp = tps[t], fps[t]
                    rc = tp / ngt
                    pr = list(tp / (fp + tp + np.spacing(1)))
                    for i in range(len(pr) - 1, 0, -1):
                        pr[i - 1] = max(pr[i - 1], pr[i])
                    q = np.zeros(len(p.rec_thrs))
                    for r, pi in enumerate(np.searchsorted(rc, p.rec_thrs, side="left")):
                        if pi >= len(pr):
                            break
                        q[r] = pr[pi]
                    curve[t] = q
        prec[name] = curve
    out = {"AP": float(np.mean(prec["AP"])) if not np.isnan(prec["AP"]).any() else math.nan}
    t50 = int(np.argmin(np.abs(p.iou_thrs - 0.5)))
    t75 = int(np.argmin(np.abs(p.iou_thrs - 0.75)))
    out["AP50"] = float(np.mean(prec["AP"][t50]))
    out["AP75"] = float(np.mean(prec["AP"][t75]))
    for f in "rcf":
        c = prec[f"AP{f}"]
        out[f"AP{f}"] = math.nan if np.isnan(c).any() else float(np.mean(c))
    return out


def lvis_results(e) -> dict:
    return {k: (math.nan if v == -1 else float(v)) for k, v in e.results.items()}


COCO_KEYS = ["AP", "AP50", "AP75", "APs", "APm", "APl", "AR@1", "AR@10", "AR@100", "ARs@100", "ARm@100", "ARl@100"]


def coco_eval(gt: dict, results: list, tmp_path, *, iou_type="bbox") -> dict:
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    path = tmp_path / f"gt-{uuid.uuid4().hex}.json"
    path.write_text(json.dumps(gt))
    with contextlib.redirect_stdout(io.StringIO()):
        g = COCO(str(path))
        d = g.loadRes(copy.deepcopy(results))
        e = COCOeval(g, d, iou_type)
        e.evaluate()
        e.accumulate()
        e.summarize()
    return {k: (math.nan if v == -1 else float(v)) for k, v in zip(COCO_KEYS, e.stats)}


def assert_close(ours: dict, ref: dict, *, tol=1e-9, rename=None) -> None:
    rename = rename or {}
    for k, v in ref.items():
        o = ours[rename.get(k, k)]
        if math.isnan(v):
            assert o is None or math.isnan(o), (k, o, v)
        else:
            assert o is not None and abs(o - v) <= tol, (k, o, v)


def triangle_masks(gt: dict, results: list, *, seed: int = 0) -> tuple[dict, list]:
    """Copies of a synthetic set with non-rectangular masks, so mask and box areas differ.

    Ground truth: a triangle polygon inside the box (COCO crowd regions: the same triangle as an
    uncompressed RLE, as COCO stores crowds); results: a compressed RLE (str counts) of a triangle
    or a rectangle half of the box, chosen at random.
    """
    import pycocotools.mask as mu

    rng = np.random.default_rng(seed)
    gt = copy.deepcopy(gt)
    size = {im["id"]: (im["height"], im["width"]) for im in gt["images"]}
    for a in gt["annotations"]:
        x, y, w, h = a["bbox"]
        poly = [[x, y, x + w, y, x, y + h]]
        H, W = size[a["image_id"]]
        if a.get("iscrowd"):
            m = mu.decode(mu.frPyObjects(poly, H, W)).max(axis=2)
            flat = m.ravel(order="F")
            change = np.flatnonzero(np.diff(flat)) + 1
            runs = np.diff(np.r_[0, change, len(flat)]).tolist()
            if flat[0] == 1:
                runs = [0] + runs
            a["segmentation"] = {"size": [H, W], "counts": runs}
        else:
            a["segmentation"] = poly
    out = []
    for r in results:
        r = copy.deepcopy(r)
        x, y, w, h = r["bbox"]
        H, W = size[r["image_id"]]
        if rng.random() < 0.5:
            poly = [[x, y, x + w, y, x, y + h]]
        else:
            poly = [[x, y, x + w, y, x + w, y + h / 2, x, y + h / 2]]
        rle = mu.merge(mu.frPyObjects(poly, H, W))
        r["segmentation"] = {"size": rle["size"], "counts": rle["counts"].decode("ascii")}
        out.append(r)
    return gt, out
