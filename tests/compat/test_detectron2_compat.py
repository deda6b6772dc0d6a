"""vistabench.compat.detectron2 evaluators: detectron2's process()/evaluate() flow, scored against
lvis-api / pycocotools called the way detectron2 calls them, proposal recall against a torch
transcription of detectron2's ``_evaluate_box_proposals``, and the input mistakes of issue 24."""

from __future__ import annotations

import copy
import importlib.util
import logging
import math
import pathlib

import numpy as np
import pytest

from vistabench.compat.detectron2 import COCOEvaluator, LVISEvaluator
from vistabench.data.detection_synth import synth_detection_set
from vistabench.errors import InputError

_here = pathlib.Path(__file__).parent
_spec = importlib.util.spec_from_file_location("_compat_reference", _here / "_reference.py")
R = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(R)
_spec2 = importlib.util.spec_from_file_location("_detection_reference", _here.parent / "metrics" / "_detection_reference.py")
DR = importlib.util.module_from_spec(_spec2)
_spec2.loader.exec_module(DR)

H, W = 60, 80


class _Boxes:
    def __init__(self, t):
        self.tensor = t


class _Instances:
    def __init__(self, boxes, scores, classes, masks=None):
        self.pred_boxes, self.scores, self.pred_classes = _Boxes(boxes), scores, classes
        if masks is not None:
            self.pred_masks = masks


def _outputs(results, cat_to_class, masks=False):
    """Per image, detectron2's model output: XYXY float32 boxes, contiguous classes, masks."""
    by_img: dict = {}
    for r in results:
        by_img.setdefault(r["image_id"], []).append(r)
    batches = []
    for img, rs in by_img.items():
        b = np.array([r["bbox"] for r in rs], np.float32)
        xyxy = np.concatenate([b[:, :2], b[:, :2] + b[:, 2:]], 1)
        m = None
        if masks:
            m = np.zeros((len(rs), H, W), bool)
            for i, (x, y, w, h) in enumerate(b):
                m[i, int(y): int(np.ceil(y + h)), int(x): int(np.ceil(x + w / 2))] = True
        inst = _Instances(xyxy, np.array([r["score"] for r in rs], np.float32),
                          np.array([cat_to_class[r["category_id"]] for r in rs], np.int64), m)
        batches.append(([{"image_id": img}], [{"instances": inst}]))
    return batches


def _as_detectron2_json(batches, class_to_cat):
    """What detectron2's instances_to_coco_json + the category un-mapping give (the reference input)."""
    import pycocotools.mask as mu

    out = []
    for inputs, outputs in batches:
        inst = outputs[0]["instances"]
        b = inst.pred_boxes.tensor
        xywh = b.copy()
        xywh[:, 2:] = b[:, 2:] - b[:, :2]
        for k in range(len(b)):
            r = {"image_id": inputs[0]["image_id"], "category_id": class_to_cat[int(inst.pred_classes[k])],
                 "bbox": xywh[k].tolist(), "score": float(inst.scores[k])}
            if hasattr(inst, "pred_masks"):
                rle = mu.encode(np.array(inst.pred_masks[k][:, :, None], order="F", dtype="uint8"))[0]
                r["segmentation"] = {"size": rle["size"], "counts": rle["counts"].decode()}
            out.append(r)
    return out


@pytest.mark.parametrize("masks", [False, True])
def test_lvis_evaluator_equals_lvis_api_called_as_detectron2(tmp_path, masks):
    s = synth_detection_set(num_images=10, num_categories=6, dets_per_image=20, seed=51, image_size=(H, W),
                            score_decimals=None)
    gt = DR.triangle_masks(s.ground_truth, [], seed=1)[0] if masks else s.ground_truth
    p = R.write(tmp_path, "gt.json", gt)
    cats = [c["id"] for c in gt["categories"]]
    batches = _outputs(s.results, {c: c - 1 for c in cats}, masks)
    ev = LVISEvaluator("lvis_synth", json_file=p, max_dets_per_image=15, distributed=False)
    ev.reset()
    for inputs, outputs in batches:
        ev.process(inputs, outputs)
    with R.quiet():
        res = ev.evaluate()
    R.restore_np_float()
    import lvis

    ref_json = _as_detectron2_json(batches, {c - 1: c for c in cats})
    api = lvis.LVIS(p)
    for task in (("bbox", "segm") if masks else ("bbox",)):
        rs = copy.deepcopy(ref_json)
        if task == "segm":
            for c in rs:
                c.pop("bbox", None)
        e = lvis.LVISEval(api, lvis.LVISResults(api, rs, max_dets=15), task)
        e.run()
        ref = {k: float(e.get_results()[k] * 100) for k in ("AP", "AP50", "AP75", "APs", "APm", "APl", "APr", "APc", "APf")}
        for k, v in ref.items():
            assert (math.isnan(v) and math.isnan(res[task][k])) or abs(res[task][k] - v) <= 1e-7, (task, k)
        assert 0 < res[task]["AP^Fixed"] <= 100 and 0 < res[task]["AP^Pool"] <= 100
    assert set(res) == ({"bbox", "segm"} if masks else {"bbox"})


def test_coco_evaluator_equals_pycocotools_called_as_detectron2(tmp_path):
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    s = synth_detection_set(num_images=10, num_categories=5, dets_per_image=25, seed=52, format="coco",
                            image_size=(H, W), score_decimals=None)
    gt = copy.deepcopy(s.ground_truth)
    for c in gt["categories"]:
        c["id"] *= 10  # non-contiguous ids: detectron2 maps them through thing_dataset_id_to_contiguous_id
    for a in gt["annotations"]:
        a["category_id"] *= 10
    res = [dict(r, category_id=r["category_id"] * 10) for r in s.results]
    p = R.write(tmp_path, "gt.json", gt)
    ids = sorted(c["id"] for c in gt["categories"])
    meta = {"json_file": p, "thing_dataset_id_to_contiguous_id": {c: i for i, c in enumerate(ids)},
            "thing_classes": [f"c{c}" for c in ids]}
    batches = _outputs(res, {c: i for i, c in enumerate(ids)})
    ev = COCOEvaluator("coco_synth", metadata=meta, distributed=False, max_dets_per_image=50)
    for inputs, outputs in batches:
        ev.process(inputs, outputs)
    with R.quiet():
        out = ev.evaluate()["bbox"]
        g = COCO(p)
        e = COCOeval(g, g.loadRes(_as_detectron2_json(batches, dict(enumerate(ids)))), "bbox")
        e.params.maxDets = [1, 10, 50]
        e.evaluate()
        e.accumulate()
        e.summarize()
    prec = e.eval["precision"]
    ref = {"AP": float(np.mean(prec[:, :, :, 0, -1][prec[:, :, :, 0, -1] > -1]) * 100)}  # COCOevalMaxDets' AP
    for i, k in enumerate(("AP50", "AP75", "APs", "APm", "APl"), start=1):
        ref[k] = float(e.stats[i] * 100) if e.stats[i] >= 0 else float("nan")
    for k, v in ref.items():
        assert (math.isnan(v) and math.isnan(out[k])) or abs(out[k] - v) <= 1e-7, k
    p0 = prec[:, :, 0, 0, -1]
    assert abs(out[f"AP-c{ids[0]}"] - float(np.mean(p0[p0 > -1]) * 100)) <= 1e-7


def _d2_box_proposals(dataset_predictions, gt_of, area="all", limit=None):
    """detectron2's _evaluate_box_proposals, transcribed with torch (its float32 arithmetic)."""
    import torch

    rng = {"all": [0, 1e5 ** 2], "small": [0, 32 ** 2], "medium": [32 ** 2, 96 ** 2], "large": [96 ** 2, 1e5 ** 2]}[area]
    gt_overlaps, num_pos = [], 0
    for pd in dataset_predictions:
        boxes, logits = pd["boxes"], pd["logits"]
        boxes = boxes[torch.sort(logits, descending=True, stable=True)[1]]
        gb, ga = gt_of(pd["image_id"])
        gt_boxes = torch.as_tensor([[x, y, x + w, y + h] for x, y, w, h in gb]).reshape(-1, 4)
        gt_areas = torch.as_tensor(ga)
        if len(gt_boxes) == 0 or len(boxes) == 0:
            continue
        gt_boxes = gt_boxes[(gt_areas >= rng[0]) & (gt_areas <= rng[1])]
        num_pos += len(gt_boxes)
        if len(gt_boxes) == 0:
            continue
        if limit is not None and len(boxes) > limit:
            boxes = boxes[:limit]
        wh = (torch.min(boxes[:, None, 2:], gt_boxes[:, 2:]) - torch.max(boxes[:, None, :2], gt_boxes[:, :2])).clamp(min=0)
        inter = wh.prod(dim=2)
        a1 = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
        a2 = (gt_boxes[:, 2] - gt_boxes[:, 0]) * (gt_boxes[:, 3] - gt_boxes[:, 1])
        ov = torch.where(inter > 0, inter / (a1[:, None] + a2 - inter), torch.zeros(1, dtype=inter.dtype))
        got = torch.zeros(len(gt_boxes))
        for j in range(min(len(boxes), len(gt_boxes))):
            mo, am = ov.max(dim=0)
            go, gi = mo.max(dim=0)
            bi = am[gi]
            got[j] = ov[bi, gi]
            ov[bi, :] = -1
            ov[:, gi] = -1
        gt_overlaps.append(got)
    go = torch.sort(torch.cat(gt_overlaps) if gt_overlaps else torch.zeros(0))[0]
    thr = torch.arange(0.5, 0.95 + 1e-5, 0.05, dtype=torch.float32)
    rec = torch.zeros_like(thr)
    for i, t in enumerate(thr):
        rec[i] = (go >= t).float().sum() / float(num_pos)
    return float(rec.mean().item() * 100)


def test_proposal_recall_as_detectron2(tmp_path):
    torch = pytest.importorskip("torch")
    s = synth_detection_set(num_images=8, num_categories=4, dets_per_image=30, seed=53, image_size=(300, 400))
    p = R.write(tmp_path, "gt.json", s.ground_truth)
    ev = LVISEvaluator("x", json_file=p, distributed=False)
    preds, rng = [], np.random.default_rng(0)
    for img in [i["id"] for i in s.ground_truth["images"]]:
        rs = [r for r in s.results if r["image_id"] == img]
        b = torch.tensor([[x, y, x + w, y + h] for x, y, w, h in (r["bbox"] for r in rs)], dtype=torch.float32).reshape(-1, 4)
        logits = torch.tensor(rng.normal(size=len(rs)), dtype=torch.float32)
        ev.process([{"image_id": img}], [{"proposals": {"proposal_boxes": _Boxes(b), "objectness_logits": logits}}])
        preds.append({"image_id": img, "boxes": b, "logits": logits})
    out = ev.evaluate()["box_proposals"]
    from vistabench.compat.lvis import LVIS

    api = LVIS(p)

    def gt_of(i):
        anns = api.load_anns(api.get_ann_ids(img_ids=[i]))
        return [a["bbox"] for a in anns], [a["area"] for a in anns]

    for limit in (100, 1000):
        for area, suf in (("all", ""), ("small", "s"), ("medium", "m"), ("large", "l")):
            ref = _d2_box_proposals(preds, gt_of, area, limit)
            got = out[f"AR{suf}@{limit}"]
            assert (math.isnan(ref) and math.isnan(got)) or abs(got - ref) <= 1e-4, (area, limit, got, ref)


def test_input_mistakes_are_one_line(tmp_path, caplog):
    s = synth_detection_set(num_images=3, num_categories=4, dets_per_image=5, seed=54, image_size=(H, W))
    p = R.write(tmp_path, "gt.json", s.ground_truth)
    ev = LVISEvaluator("x", json_file=p, distributed=False)
    with caplog.at_level(logging.WARNING):
        assert ev.evaluate() == {}  # nothing processed: detectron2 warns and returns {}, never AP 0
    assert "Did not receive valid predictions" in caplog.text
    box3 = _Instances(np.zeros((2, 3), np.float32), np.ones(2, np.float32), np.zeros(2, np.int64))
    with pytest.raises(InputError, match=r"outputs\[0\].instances.pred_boxes: expected \(N, 4\) XYXY boxes, got shape \(2, 3\)"):
        ev.process([{"image_id": 3}], [{"instances": box3}])
    ok = _Instances(np.array([[0, 0, 5, 5], [1, 1, 9, 9]], np.float32), np.ones(2, np.float32), np.array([0, -1]))
    with pytest.raises(InputError, match=r"inputs\[0\]: lacks 'image_id'"):
        ev.process([{"file_name": "a.jpg"}], [{"instances": ok}])
    with pytest.raises(InputError, match=r"inputs\[0\].image_id: expected the dataset's integer image id, got 'a'"):
        ev.process([{"image_id": "a"}], [{"instances": ok}])
    few = _Instances(ok.pred_boxes.tensor, ok.scores, np.array([0, 1]), np.zeros((1, H, W), bool))
    with pytest.raises(InputError, match=r"pred_masks: expected 2 masks"):
        ev.process([{"image_id": 3}], [{"instances": few}])
    with pytest.raises(InputError, match="dataset_name: 'nope' is not a registered dataset"):
        LVISEvaluator("nope")
    with pytest.raises(InputError, match="max_dets_per_image"):
        LVISEvaluator("x", json_file=p, max_dets_per_image=0)


def test_lvis_class_index_minus_one_is_accepted_as_detectron2_and_lvis_do(tmp_path):
    """detectron2's LVIS rule adds 1 to every class (-1 becomes category 0) and lvis-api keeps such a
    result, in its image's top 300, without scoring it: the same numbers, with a warning naming them."""
    s = synth_detection_set(num_images=6, num_categories=4, dets_per_image=8, seed=57, image_size=(H, W),
                            score_decimals=None)
    p = R.write(tmp_path, "gt.json", s.ground_truth)
    cats = [c["id"] for c in s.ground_truth["categories"]]
    batches = _outputs(s.results, {c: c - 1 for c in cats})
    for _, outputs in batches[::2]:
        outputs[0]["instances"].pred_classes[0] = -1
    ev = LVISEvaluator("x", json_file=p, distributed=False, max_dets_per_image=5)
    for inputs, outputs in batches:
        ev.process(inputs, outputs)
    with R.quiet(), pytest.warns(UserWarning, match=r"results: \d+ of \d+ results have category ids not in the ground "
                                                     r"truth \(first: 0\); lvis-api never scores them"):
        res = ev.evaluate()["bbox"]
    R.restore_np_float()
    import lvis

    ref_json = _as_detectron2_json(batches, {**{c - 1: c for c in cats}, -1: 0})
    api = lvis.LVIS(p)
    e = lvis.LVISEval(api, lvis.LVISResults(api, ref_json, max_dets=5), "bbox")
    with R.quiet():
        e.run()
    for k in ("AP", "AP50", "AP75", "APs", "APm", "APl", "APr", "APc", "APf"):
        ref = float(e.get_results()[k] * 100)
        assert (math.isnan(ref) and math.isnan(res[k])) or abs(res[k] - ref) <= 1e-9, (k, res[k], ref)


def test_lvis_outputs_not_under_instances_are_named_and_evaluate_gives_nothing(tmp_path, caplog):
    s = synth_detection_set(num_images=2, num_categories=3, dets_per_image=3, seed=58, image_size=(H, W))
    p = R.write(tmp_path, "gt.json", s.ground_truth)
    ev = LVISEvaluator("x", json_file=p, distributed=False)
    inst = _Instances(np.array([[0, 0, 9, 9]], np.float32), np.ones(1, np.float32), np.zeros(1, np.int64))
    with caplog.at_level(logging.WARNING):
        ev.process([{"image_id": 1}, {"image_id": 2}], [{"predictions": inst}, {"predictions": inst}])
        assert ev.evaluate() == {}
    text = caplog.text
    assert text.count("outputs[0] has neither 'instances' nor 'proposals' (its keys: ['predictions'])") == 1, text
    assert "[LVISEvaluator] Did not receive valid predictions." in text  # detectron2's COCOEvaluator wording
