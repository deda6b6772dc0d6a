"""``compat.detectron2.COCOEvaluator``'s keypoints task: predictions with ``pred_keypoints`` scored as
detectron2 scores them (x, y - 0.5 in float32; loadRes of box + keypoint results; pycocotools'
keypoint COCOeval with the evaluator's ``kpt_oks_sigmas``; AP AP50 AP75 APm APl x 100)."""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import io
import json
import math
import pathlib

import numpy as np
import pytest

from vistabench.compat.detectron2 import COCOEvaluator
from vistabench.errors import InputError

_here = pathlib.Path(__file__).parent
_spec = importlib.util.spec_from_file_location("_keypoint_reference", _here.parent / "metrics" / "_keypoint_reference.py")
KR = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(KR)


class _Boxes:
    def __init__(self, t):
        self.tensor = t


class _Instances:
    def __init__(self, boxes, scores, classes, keypoints):
        self.pred_boxes, self.scores, self.pred_classes = _Boxes(boxes), scores, classes
        self.pred_keypoints = keypoints


def _batches(results, cat_to_class):
    by_img: dict = {}
    for r in results:
        by_img.setdefault(r["image_id"], []).append(r)
    out = []
    for img, rs in by_img.items():
        b = np.array([r["bbox"] for r in rs], np.float32)
        kp = np.array([r["keypoints"] for r in rs], np.float32).reshape(len(rs), -1, 3)
        kp[:, :, :2] += np.float32(0.5)  # the model's coordinates: detectron2 subtracts 0.5 again
        inst = _Instances(np.concatenate([b[:, :2], b[:, :2] + b[:, 2:]], 1), np.array([r["score"] for r in rs], np.float32),
                          np.array([cat_to_class[r["category_id"]] for r in rs], np.int64), kp)
        out.append(([{"image_id": img}], [{"instances": inst}]))
    return out


def _reference(gt_path, batches, class_to_cat, sigmas):
    """detectron2's instances_to_coco_json + _evaluate_predictions_on_coco, with pycocotools."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    res = []
    for inputs, outputs in batches:
        inst = outputs[0]["instances"]
        b = inst.pred_boxes.tensor
        xywh = b.copy()
        xywh[:, 2:] = b[:, 2:] - b[:, :2]
        kp = inst.pred_keypoints.copy()
        for k in range(len(b)):
            kp[k][:, :2] -= 0.5
            res.append({"image_id": inputs[0]["image_id"], "category_id": class_to_cat[int(inst.pred_classes[k])],
                        "bbox": xywh[k].tolist(), "score": float(inst.scores[k]), "keypoints": kp[k].flatten().tolist()})
    with contextlib.redirect_stdout(io.StringIO()):
        g = COCO(gt_path)
        e = COCOeval(g, g.loadRes(res), "keypoints")
        if sigmas is not None:
            e.params.kpt_oks_sigmas = np.array(sigmas)
        e.evaluate()
        e.accumulate()
        e.summarize()
    return {k: float(e.stats[i] * 100 if e.stats[i] >= 0 else "nan")
            for i, k in enumerate(("AP", "AP50", "AP75", "APm", "APl"))}, e


@pytest.mark.parametrize("num_keypoints", [17, 5])
def test_keypoints_task_equals_detectron2_with_pycocotools(tmp_path, num_keypoints):
    gt, res = KR.keypoint_set(seed=31 + num_keypoints, num_keypoints=num_keypoints, with_box=True, num_images=12)
    p = tmp_path / "gt.json"
    p.write_text(json.dumps(gt))
    cats = sorted(c["id"] for c in gt["categories"])
    cat_to_class = {c: i for i, c in enumerate(cats)}
    batches = _batches(res, cat_to_class)
    sigmas = None if num_keypoints == 17 else [0.03, 0.05, 0.07, 0.09, 0.11]
    ev = COCOEvaluator("kp", json_file=str(p), kpt_oks_sigmas=sigmas or ())
    ev.reset()
    for inputs, outputs in batches:
        ev.process(inputs, outputs)
    with contextlib.redirect_stdout(io.StringIO()):
        out = ev.evaluate()
    assert set(out) == {"bbox", "keypoints"}
    ref, e = _reference(str(p), batches, dict(enumerate(cats)), sigmas)
    for k, v in ref.items():
        got = out["keypoints"][k]
        assert (math.isnan(v) and math.isnan(got)) or abs(got - v) <= 1e-7, (k, got, v)
    assert {"AP^Fixed", "AP^Pool"} <= set(out["keypoints"])


def test_keypoint_count_mismatch_is_one_line(tmp_path):
    gt, res = KR.keypoint_set(seed=3, num_keypoints=5, with_box=True)
    p = tmp_path / "gt.json"
    p.write_text(json.dumps(gt))
    cats = sorted(c["id"] for c in gt["categories"])
    ev = COCOEvaluator("kp", json_file=str(p))  # COCO's 17 sigmas by default
    for inputs, outputs in _batches(copy.deepcopy(res), {c: i for i, c in enumerate(cats)}):
        ev.process(inputs, outputs)
    with pytest.raises(InputError, match="kpt_oks_sigmas: 17 sigmas, but the predictions have 5 keypoints"):
        with contextlib.redirect_stdout(io.StringIO()):
            ev.evaluate()
