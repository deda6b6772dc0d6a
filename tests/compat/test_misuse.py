"""Misuse of the drop-ins, as users of pycocotools, torchmetrics and detectron2 make it: each case
ends in one line naming the field, as an exception that is an InputError *and* of the type the
replaced tool raises there (checked against the tool where it raises), never a silent score."""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import io
import logging
import pathlib

import numpy as np
import pytest

from vistabench.compat.coco import COCO, COCOeval
from vistabench.errors import InputError

_spec = importlib.util.spec_from_file_location("_compat_reference", pathlib.Path(__file__).parent / "_reference.py")
R = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(R)


def _gt():
    imgs = [{"id": 1, "height": 50, "width": 60}, {"id": 2, "height": 50, "width": 60}]
    cats = [{"id": 7, "name": "a"}, {"id": 9, "name": "b"}]
    anns = [{"id": 10 + k, "image_id": 1 + k % 2, "category_id": (7, 9)[k % 2], "bbox": [2.0 * k, 3.0, 10.0, 8.0 + k],
             "area": 10.0 * (8 + k), "iscrowd": 0} for k in range(6)]
    return {"images": imgs, "annotations": anns, "categories": cats}


def _results():
    return [{"image_id": a["image_id"], "category_id": a["category_id"], "bbox": [a["bbox"][0] + 1, *a["bbox"][1:]],
             "score": 0.9 - 0.1 * k} for k, a in enumerate(_gt()["annotations"])]


def _one_line(exc, cls):
    assert isinstance(exc, cls) and isinstance(exc, InputError), (type(exc).__mro__, cls)
    assert "\n" not in str(exc) and str(exc), str(exc)


def _ref_exception(fn):
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            fn()
    except Exception as exc:  # noqa: BLE001 -- the type is what is compared
        return exc
    return None


# ------------------------------------------------------------------------------ COCO(...)
def _drop(section, field):
    def f(gt):
        gt[section][1].pop(field)
    return f


def _as_mapping(section):
    def f(gt):
        gt[section] = {str(x["id"]): x for x in gt[section]}
    return f


def _not_dict(section):
    def f(gt):
        gt[section][1] = "oops"
    return f


COCO_CASES = [
    ("annotation_image_id", _drop("annotations", "image_id"), KeyError, r"annotations\[1\]: lacks 'image_id'"),
    ("annotation_id", _drop("annotations", "id"), KeyError, r"annotations\[1\]: lacks 'id'"),
    ("annotation_category_id", _drop("annotations", "category_id"), KeyError, r"annotations\[1\]: lacks 'category_id'"),
    ("image_id", _drop("images", "id"), KeyError, r"images\[1\]: lacks 'id'"),
    ("category_id", _drop("categories", "id"), KeyError, r"categories\[1\]: lacks 'id'"),
    ("annotations_mapping", _as_mapping("annotations"), TypeError, r"dataset\['annotations'\]: expected a list"),
    ("images_mapping", _as_mapping("images"), TypeError, r"dataset\['images'\]: expected a list"),
    ("categories_mapping", _as_mapping("categories"), TypeError, r"dataset\['categories'\]: expected a list"),
    ("annotation_not_dict", _not_dict("annotations"), TypeError, r"annotations\[1\]: expected a dict"),
    ("image_not_dict", _not_dict("images"), TypeError, r"images\[1\]: expected a dict"),
]


@pytest.mark.parametrize("name, mutate, cls, msg", COCO_CASES, ids=[c[0] for c in COCO_CASES])
def test_coco_dataset_mistakes(tmp_path, name, mutate, cls, msg):
    import pycocotools.coco as pc

    gt = _gt()
    mutate(gt)
    path = R.write(tmp_path, "gt.json", gt)
    ref = _ref_exception(lambda: pc.COCO(path))
    assert isinstance(ref, cls), ref  # what pycocotools raises
    with pytest.raises(cls, match=msg) as ei:
        COCO(path)
    _one_line(ei.value, cls)


# ------------------------------------------------------------------------------ COCOeval params
PARAM_CASES = [
    ("iouThrs", [], IndexError, r"params.iouThrs: empty"),
    ("iouThrs", [1.5], ValueError, r"params.iouThrs: 1.5 is not a threshold in \[0, 1\]"),
    ("iouThrs", [0.5, float("nan")], ValueError, r"params.iouThrs: nan is not a threshold"),
    ("iouThrs", [-0.5], ValueError, r"params.iouThrs: -0.5 is not a threshold"),
    ("iouThrs", "0.5", ValueError, r"params.iouThrs"),
    ("recThrs", [0.0, 1.5], ValueError, r"params.recThrs: 1.5 is not a threshold"),
    ("recThrs", [float("nan")], ValueError, r"params.recThrs: nan"),
    ("maxDets", [0, 0, 0], ValueError, r"params.maxDets: 0 is not a positive whole number"),
    ("maxDets", [1, 10, -5], ValueError, r"params.maxDets: -5 is not a positive whole number"),
    ("maxDets", [1, 10.5, 100], ValueError, r"params.maxDets: 10.5 is not a positive whole number"),
    ("maxDets", [], IndexError, r"params.maxDets: 0 value"),
    ("maxDets", [1, 10], IndexError, r"params.maxDets: 2 value\(s\) \[1, 10\]; the summary reads 3"),
    ("areaRng", [[0, 1e10], [1e4, 32 ** 2], [32 ** 2, 96 ** 2], [96 ** 2, 1e10]], ValueError,
     r"params.areaRng: range 1 \[10000.0, 1024.0\] is not \[low, high\] with low <= high"),
    ("areaRng", [[0, 1e10], [0, float("nan")], [0, 1], [1, 2]], ValueError, r"params.areaRng: range 1"),
    ("areaRng", [[0, 1e10]], IndexError, r"params.areaRngLbl: 4 label\(s\) for 1 area range\(s\)"),
    ("areaRng", [[0, 1, 2]], ValueError, r"params.areaRng: expected a non-empty list of pairs"),
    ("areaRngLbl", ["all", "small"], ValueError, r"params.areaRngLbl: 2 label\(s\) for 4 area range\(s\)"),
    ("useCats", 2, ValueError, r"params.useCats: expected 0 or 1"),
    ("imgIds", [1, 12345], ValueError, r"params.imgIds: id 12345 is not in the ground truth"),
    ("catIds", [7, 8], ValueError, r"params.catIds: id 8 is not in the ground truth"),
]


def _pycocotools_run(path, results, field, value):
    import pycocotools.coco as pc
    import pycocotools.cocoeval as pe

    def run():
        g = pc.COCO(path)
        e = pe.COCOeval(g, g.loadRes(copy.deepcopy(results)), "bbox")
        setattr(e.params, field, value)
        e.evaluate()
        e.accumulate()
        e.summarize()
    return _ref_exception(run)


@pytest.mark.parametrize("field, value, cls, msg", PARAM_CASES, ids=[f"{c[0]}={c[1]!r}" for c in PARAM_CASES])
def test_cocoeval_params_mistakes(tmp_path, field, value, cls, msg):
    path = R.write(tmp_path, "gt.json", _gt())
    if cls is IndexError:  # pycocotools fails there too, with this type (deep inside, without the field)
        assert isinstance(_pycocotools_run(path, _results(), field, value), IndexError)
    g = COCO(path)
    e = COCOeval(g, g.loadRes(_results()), "bbox")
    setattr(e.params, field, value)
    with pytest.raises(cls, match=msg) as ei, R.quiet():
        e.evaluate()
        e.accumulate()
        e.summarize()
    _one_line(ei.value, cls)


# ------------------------------------------------------------------------------ loadRes
def _res(mutate):
    r = _results()
    mutate(r)
    return r


LOADRES_CASES = [
    ("no_category_of_the_gt", lambda r: [x.update(category_id=x["category_id"] - 7) for x in r], ValueError,
     r"resFile: no result has a category id of the ground truth \(first: 0"),
    ("unknown_image", lambda r: r[2].update(image_id=99), AssertionError, r"resFile\[2\]: image_id 99 is not in the ground truth"),
    ("no_score", lambda r: r[3].pop("score"), KeyError, r"resFile\[3\]: lacks 'score'"),
    ("no_image_id", lambda r: r[1].pop("image_id"), KeyError, r"resFile\[1\]: lacks 'image_id'"),
    ("no_category_id", lambda r: r[1].pop("category_id"), KeyError, r"resFile\[1\]: lacks 'category_id'"),
    ("no_bbox_later", lambda r: r[4].pop("bbox"), KeyError, r"resFile\[4\]: lacks 'bbox'"),
    ("bbox_of_three", lambda r: r[2].update(bbox=[1, 2, 3]), IndexError, r"resFile\[2\].bbox: expected 4 numbers"),
    ("bbox_of_five", lambda r: r[2].update(bbox=[1, 2, 3, 4, 5]), ValueError, r"resFile\[2\].bbox: expected 4 numbers"),
    ("bbox_none", lambda r: r[0].update(bbox=None), TypeError, r"resFile\[0\].bbox: expected 4 numbers .* got None"),
    ("score_not_a_number", lambda r: r[1].update(score="high"), TypeError, r"resFile: every 'score' must be a number"),
    ("polygon_without_bbox", lambda r: [(x.pop("bbox"), x.update(segmentation=[[1, 1, 1, 5, 5, 5, 5, 1]])) for x in r],
     TypeError, r"resFile\[0\].segmentation: results without 'bbox' need a compressed RLE dict"),
    ("rle_list_counts_without_bbox", lambda r: [(x.pop("bbox"), x.update(segmentation={"size": [50, 60], "counts": [10, 2990]}))
                                                for x in r], TypeError, r"need a compressed RLE \(string counts\)"),
    ("not_a_dict", lambda r: r.__setitem__(2, [1, 2]), TypeError, r"resFile\[2\]: expected a result dict"),
]


@pytest.mark.parametrize("name, mutate, cls, msg", LOADRES_CASES, ids=[c[0] for c in LOADRES_CASES])
def test_load_res_mistakes(tmp_path, name, mutate, cls, msg):
    import pycocotools.coco as pc

    path = R.write(tmp_path, "gt.json", _gt())
    ref = _ref_exception(lambda: pc.COCO(path).loadRes(_res(mutate)))
    if ref is not None:  # where pycocotools fails, ours is an instance of its type too
        assert issubclass(cls, type(ref)), ref
    with pytest.raises(cls, match=msg) as ei:
        COCO(path).loadRes(_res(mutate))
    _one_line(ei.value, cls)


def test_load_res_warns_about_results_of_unknown_categories(tmp_path):
    g = COCO(R.write(tmp_path, "gt.json", _gt()))
    r = _results()
    r[0]["category_id"] = 8
    with pytest.warns(UserWarning, match=r"resFile: 1 of 6 results have category ids not in the ground truth \(first: 8\)"):
        g.loadRes(r)


# ------------------------------------------------------------------------------ torchmetrics
torch = pytest.importorskip("torch")


def _tm_input(**over):
    p = {"boxes": torch.tensor([[0.0, 0, 10, 10], [5, 5, 20, 20]]), "scores": torch.tensor([0.9, 0.4]),
         "labels": torch.tensor([0, 1])}
    t = {"boxes": torch.tensor([[0.0, 0, 10, 10]]), "labels": torch.tensor([0])}
    for k, v in over.items():
        side, key = k.split("__")
        (p if side == "p" else t)[key] = v
    return [p], [t]


_M = torch.ones((2, 8, 8), dtype=torch.bool)
TM_CASES = [
    ("boxes_3x3", {}, dict(p__boxes=torch.rand(2, 3)), ValueError, r"preds\[0\].boxes: expected shape \(N, 4\).*\(2, 3\)"),
    ("target_boxes_3x3", {}, dict(t__boxes=torch.rand(1, 3)), ValueError, r"target\[0\].boxes: expected shape \(N, 4\)"),
    ("boxes_4x5_score_column", {}, dict(p__boxes=torch.rand(2, 5)), ValueError, r"preds\[0\].boxes: expected shape \(N, 4\).*\(2, 5\)"),
    ("boxes_nan", {}, dict(p__boxes=torch.tensor([[0.0, 0, 10, 10], [float("nan"), 0, 1, 1]])), ValueError, r"preds\[0\].boxes: NaN"),
    ("boxes_x2_below_x1", {}, dict(p__boxes=torch.tensor([[0.0, 0, 10, 10], [9, 9, 1, 1]])), ValueError,
     r"preds\[0\].boxes: box 1 .* negative width or height in box_format 'xyxy'"),
    ("scores_per_class", {}, dict(p__scores=torch.rand(2, 3)), ValueError, r"preds\[0\].scores: expected one score per detection"),
    ("scores_count", {}, dict(p__scores=torch.rand(3)), ValueError, r"preds\[0\].scores: 3 scores for 2 labels"),
    ("scores_nan", {}, dict(p__scores=torch.tensor([0.5, float("nan")])), ValueError, r"preds\[0\].scores: NaN"),
    ("labels_float", {}, dict(p__labels=torch.tensor([0.0, 1.0])), ValueError, r"preds\[0\].labels: expected a 1-D tensor of integer"),
    ("labels_2d", {}, dict(t__labels=torch.tensor([[0]])), ValueError, r"target\[0\].labels: expected a 1-D tensor"),
    ("iscrowd_count", {}, dict(t__iscrowd=torch.tensor([0, 1])), ValueError, r"target\[0\].iscrowd: 2 values for 1 labels"),
    ("area_count", {}, dict(t__area=torch.tensor([1.0, 2, 3])), ValueError, r"target\[0\].area: 3 values for 1 labels"),
    ("masks_2x32", {"iou_type": "segm"}, dict(p__masks=torch.ones(2, 32).bool(), t__masks=_M[:1]), TypeError,
     r"preds\[0\].masks: expected shape \(N, H, W\).*\(2, 32\)"),
    ("target_masks_2d", {"iou_type": "segm"}, dict(p__masks=_M, t__masks=torch.ones(8, 8).bool()), TypeError,
     r"target\[0\].masks: expected shape \(N, H, W\)"),
    ("masks_count", {"iou_type": "segm"}, dict(p__masks=_M[:1], t__masks=_M[:1]), ValueError, r"preds\[0\].masks: 1 masks for 2 labels"),
    ("masks_sigmoid_float", {"iou_type": "segm"}, dict(p__masks=_M.float() * 0.7, t__masks=_M[:1]), ValueError,
     r"preds\[0\].masks: expected boolean masks \(torch.bool, or torch.uint8 of 0/1\), got torch.float32 "
     r"\(probabilities\? threshold them first: masks > 0.5\)"),
    ("target_masks_int64", {"iou_type": "segm"}, dict(p__masks=_M, t__masks=_M[:1].long()), ValueError,
     r"target\[0\].masks: expected boolean masks .*got torch.int64$"),
]


@pytest.mark.parametrize("name, kw, over, cls, msg", TM_CASES, ids=[c[0] for c in TM_CASES])
def test_torchmetrics_input_mistakes(name, kw, over, cls, msg):
    from vistabench.compat.torchmetrics import MeanAveragePrecision

    m = MeanAveragePrecision(**kw)
    with pytest.raises(cls, match=msg) as ei:
        m.update(*_tm_input(**over))
        m.compute()
    _one_line(ei.value, cls)


TM_ARGS = [
    ({"iou_thresholds": [1.5]}, r"iou_thresholds: 1.5 is not a threshold in \[0, 1\]"),
    ({"iou_thresholds": [0.5, float("nan")]}, r"iou_thresholds: nan"),
    ({"rec_thresholds": [-0.1]}, r"rec_thresholds: -0.1"),
    ({"max_detection_thresholds": [1, 10, 0]}, r"max_detection_thresholds: 0 is not a positive whole number"),
    ({"max_detection_thresholds": [1, 10, 2.5]}, r"max_detection_thresholds: 2.5"),
    ({"max_detection_thresholds": [1, 10]}, r"should have length 3"),
    ({"iou_thresholds": (0.5,)}, r"`iou_thresholds` to either be `None` or a list"),
    ({"backend": "detectron2"}, r"`backend` to be one of"),
    ({"box_format": "xyz"}, r"`box_format` to be one of"),
    ({"iou_type": "keypoints"}, r"`iou_type` to be one of"),
    ({"average": "weighted"}, r"`average` to be one of"),
    ({"class_metrics": 1}, r"`class_metrics` to be a boolean"),
]


@pytest.mark.parametrize("kw, msg", TM_ARGS, ids=[str(c[0]) for c in TM_ARGS])
def test_torchmetrics_argument_mistakes(kw, msg):
    from vistabench.compat.torchmetrics import MeanAveragePrecision

    with pytest.raises(ValueError, match=msg) as ei:
        MeanAveragePrecision(**kw)
    _one_line(ei.value, ValueError)


# ------------------------------------------------------------------------------ detectron2
class _Boxes:
    def __init__(self, t):
        self.tensor = t


class _Instances:
    def __init__(self, boxes, scores, classes):
        self.pred_boxes, self.scores, self.pred_classes = _Boxes(boxes), scores, classes


class _Proposals:
    def __init__(self, boxes, logits):
        self.proposal_boxes, self.objectness_logits = _Boxes(boxes), logits


def _evaluator(tmp_path, gt=None, **kw):
    from vistabench.compat.detectron2 import COCOEvaluator

    return COCOEvaluator("x", json_file=R.write(tmp_path, "gt.json", gt or _gt()), distributed=False, **kw)


def test_detectron2_proposals_of_three_coordinates(tmp_path):
    ev = _evaluator(tmp_path)
    with pytest.raises(ValueError, match=r"outputs\[0\].proposals.proposal_boxes: expected \(N, 4\) XYXY boxes, got "
                                         r"shape \(2, 3\)") as ei:
        ev.process([{"image_id": 1}], [{"proposals": _Proposals(np.zeros((2, 3), np.float32), np.ones(2))}])
    _one_line(ei.value, ValueError)


def test_detectron2_proposals_on_ground_truth_without_iscrowd(tmp_path):
    gt = _gt()
    for a in gt["annotations"]:
        a.pop("iscrowd")
    ev = _evaluator(tmp_path, gt)
    ev.process([{"image_id": 1}], [{"proposals": _Proposals(np.array([[0, 0, 9, 9]], np.float32), np.ones(1))}])
    with pytest.raises(KeyError, match="lacks 'iscrowd'") as ei:
        ev.evaluate()
    _one_line(ei.value, KeyError)


def test_detectron2_outputs_not_under_instances_warn_and_give_nothing(tmp_path, caplog):
    ev = _evaluator(tmp_path)
    inst = _Instances(np.array([[0, 0, 9, 9]], np.float32), np.ones(1, np.float32), np.zeros(1, np.int64))
    ev.process([{"image_id": 1}], [{"predictions": inst}])  # a key detectron2 does not read
    with caplog.at_level(logging.WARNING):
        assert ev.evaluate() == {}
    assert "Did not receive valid predictions" in caplog.text


def test_detectron2_metadata_mapping_to_unknown_categories(tmp_path):
    ev = _evaluator(tmp_path, metadata={"json_file": R.write(tmp_path, "g.json", _gt()),
                                        "thing_dataset_id_to_contiguous_id": {1: 0, 2: 1}})
    inst = _Instances(np.array([[0, 0, 9, 9]], np.float32), np.ones(1, np.float32), np.zeros(1, np.int64))
    ev.process([{"image_id": 1}], [{"instances": inst}])
    with pytest.raises(ValueError, match=r"metadata.thing_dataset_id_to_contiguous_id: none of its 2 dataset ids") as ei:
        ev.evaluate()
    _one_line(ei.value, ValueError)


def test_detectron2_class_outside_the_dataset_is_its_assertion(tmp_path):
    ev = _evaluator(tmp_path)
    inst = _Instances(np.array([[0, 0, 9, 9]], np.float32), np.ones(1, np.float32), np.array([80]))
    ev.process([{"image_id": 1}], [{"instances": inst}])
    with pytest.raises(AssertionError, match=r"pred_classes: class index 80") as ei:  # detectron2's test_unknown_category
        ev.evaluate()
    _one_line(ei.value, AssertionError)
