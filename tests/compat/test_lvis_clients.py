"""lvis-api's clients, re-written with the same calls and arguments, against lvis-api 0.5.3:
detectron2's ``LVISEvaluator`` (bbox and segm, proposal look-ups), mmdetection's ``LVISMetric``
(file-order ids, the IndexError on empty results), subsets via ``params``, per-image records."""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import pathlib

import numpy as np
import pytest

from vistabench.compat import lvis as compat
from vistabench.data.detection_synth import synth_detection_set
from vistabench.errors import InputError

_here = pathlib.Path(__file__).parent
_spec = importlib.util.spec_from_file_location("_compat_reference", _here / "_reference.py")
R = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(R)
_spec2 = importlib.util.spec_from_file_location("_detection_reference", _here.parent / "metrics" / "_detection_reference.py")
DR = importlib.util.module_from_spec(_spec2)
_spec2.loader.exec_module(DR)


def _lvis():
    R.restore_np_float()
    import lvis

    return lvis


@pytest.fixture(scope="module")
def lvis_set():
    s = synth_detection_set(num_images=12, num_categories=9, dets_per_image=40, seed=41, image_size=(100, 140))
    gt = copy.deepcopy(s.ground_truth)
    gt["annotations"][0]["area"] = 0.0  # dropped by lvis-api's get_ann_ids(area 0 < a < inf)
    gt["images"].append({"id": 77_777, "height": 100, "width": 140, "neg_category_ids": [],
                         "not_exhaustive_category_ids": []})
    return dataclasses.replace(s, ground_truth=R.shuffled(gt, 5))  # ids not in id order in the file


def _detectron2_evaluate(mod, lvis_gt, lvis_results, iou_type, max_dets_per_image=None):
    """detectron2's _evaluate_predictions_on_lvis, call for call."""
    if iou_type == "segm":
        lvis_results = copy.deepcopy(lvis_results)
        for c in lvis_results:
            c.pop("bbox", None)
    if max_dets_per_image is None:
        max_dets_per_image = 300
    lvis_results = mod.LVISResults(lvis_gt, lvis_results, max_dets=max_dets_per_image)
    lvis_eval = mod.LVISEval(lvis_gt, lvis_results, iou_type)
    lvis_eval.run()
    with R.quiet():
        lvis_eval.print_results()
    results = lvis_eval.get_results()
    return lvis_eval, {m: float(results[m] * 100) for m in ["AP", "AP50", "AP75", "APs", "APm", "APl", "APr", "APc", "APf"]}


@pytest.mark.parametrize("iou_type", ["bbox", "segm"])
def test_detectron2_call_sequence(tmp_path, lvis_set, iou_type):
    gt, res = lvis_set.ground_truth, lvis_set.results
    if iou_type == "segm":
        gt, res = DR.triangle_masks(gt, res, seed=2)
    p = R.write(tmp_path, "gt.json", gt)
    out = []
    for mod in (_lvis(), compat):
        api = mod.LVIS(p)
        assert len(api.get_ann_ids()) > 0  # detectron2's _do_evaluation
        out.append(_detectron2_evaluate(mod, api, copy.deepcopy(res), iou_type, max_dets_per_image=25))
    (ref_e, ref), (our_e, ours) = out
    R.same_dict(ours, ref)
    R.same_dict(our_e.get_results(), ref_e.get_results())
    R.same_arrays(our_e.eval["precision"], ref_e.eval["precision"])
    R.same_arrays(our_e.eval["recall"], ref_e.eval["recall"])


def test_detectron2_proposal_lookups_per_image(tmp_path, lvis_set):
    p = R.write(tmp_path, "gt.json", lvis_set.ground_truth)
    ref, ours = _lvis().LVIS(p), compat.LVIS(p)
    for i in ref.get_img_ids():
        a = ref.load_anns(ref.get_ann_ids(img_ids=[i]))
        b = ours.load_anns(ours.get_ann_ids(img_ids=[i]))
        assert [x["id"] for x in a] == [x["id"] for x in b]
    cats = ref.get_cat_ids()[:3]
    assert ours.get_ann_ids(cat_ids=cats, area_rng=[10, 500]) == ref.get_ann_ids(cat_ids=cats, area_rng=[10, 500])


def _mmdet_results2json(cat_ids, preds, path):
    """mmdetection's results2json: label i -> cat_ids[i], xyxy -> xywh."""
    out = []
    for pred in preds:
        for box, score, label in zip(pred["bboxes"], pred["scores"], pred["labels"]):
            x1, y1, x2, y2 = box
            out.append({"image_id": pred["img_id"], "bbox": [x1, y1, x2 - x1, y2 - y1], "score": float(score),
                        "category_id": cat_ids[label]})
    path.write_text(__import__("json").dumps(out))
    return str(path)


def test_mmdetection_call_sequence_file_order(tmp_path, lvis_set):
    gt, res = lvis_set.ground_truth, lvis_set.results
    p = R.write(tmp_path, "gt.json", gt)
    file_cats = [c["id"] for c in gt["categories"]]
    assert file_cats != sorted(file_cats)  # the case that broke: categories not in id order
    scores = {}
    for name, mod in (("ref", _lvis()), ("ours", compat)):
        api = mod.LVIS(p)
        cat_ids, img_ids = api.get_cat_ids(), api.get_img_ids()
        assert cat_ids == file_cats and img_ids == [i["id"] for i in gt["images"]]
        by_img: dict = {}
        for r in res:  # the model's output: contiguous labels in get_cat_ids() order
            d = by_img.setdefault(r["image_id"], {"img_id": r["image_id"], "bboxes": [], "scores": [], "labels": []})
            x, y, w, h = r["bbox"]
            d["bboxes"].append([x, y, x + w, y + h])
            d["scores"].append(r["score"])
            d["labels"].append(cat_ids.index(r["category_id"]))
        f = _mmdet_results2json(cat_ids, list(by_img.values()), tmp_path / f"{name}.bbox.json")
        try:
            lvis_dt = mod.LVISResults(api, f)
        except IndexError:
            pytest.fail("results empty")
        e = mod.LVISEval(api, lvis_dt, "bbox")
        e.params.imgIds = img_ids  # mmdetection sets this (lvis-api ignores the camelCase name)
        e.evaluate()
        e.accumulate()
        e.summarize()
        scores[name] = (e.get_results(), e.eval["precision"])
    R.same_dict(scores["ours"][0], scores["ref"][0])
    R.same_arrays(scores["ours"][1], scores["ref"][1])
    assert scores["ours"][0]["AP"] > 0.1


@pytest.mark.parametrize("source", ["list", "file"])
def test_empty_results_raise_index_error_as_lvis_api(tmp_path, lvis_set, source):
    p = R.write(tmp_path, "gt.json", lvis_set.ground_truth)
    empty = [] if source == "list" else R.write(tmp_path, "empty.json", [])
    for mod in (_lvis(), compat):
        with pytest.raises(IndexError):  # what mmdetection catches to log "results empty"
            mod.LVISResults(mod.LVIS(p), empty)
    with pytest.raises(InputError, match="results: the results list is empty"):
        compat.LVISResults(compat.LVIS(p), empty)


def test_max_dets_zero_and_results_without_image_id_are_refused(tmp_path, lvis_set):
    g = compat.LVIS(R.write(tmp_path, "gt.json", lvis_set.ground_truth))
    with pytest.raises(compat.EmptyResultsError, match="max_dets: 0 keeps no detection"):
        compat.LVISResults(g, copy.deepcopy(lvis_set.results), max_dets=0)
    no_image = copy.deepcopy(lvis_set.results)
    del no_image[1]["image_id"]  # read by the per-image limit before anything else (lvis-api: KeyError)
    with pytest.raises(InputError, match=r"results\[1\]: lacks 'image_id'"):
        compat.LVISResults(g, no_image, max_dets=300)


@pytest.mark.parametrize("case", ["imgs", "cats", "area", "thrs", "max_dets_label"])
def test_params_subsets_score_the_subset(tmp_path, lvis_set, case):
    p = R.write(tmp_path, "gt.json", lvis_set.ground_truth)
    out = []
    for mod in (_lvis(), compat):
        g = mod.LVIS(p)
        e = mod.LVISEval(g, mod.LVISResults(g, copy.deepcopy(lvis_set.results)), "bbox")
        if case == "imgs":
            e.params.img_ids = e.params.img_ids[1::2]
        elif case == "cats":
            e.params.cat_ids = e.params.cat_ids[::2]
        elif case == "area":
            e.params.area_rng = [[0, 1e10], [0, 300], [300, 3000], [3000, 1e10]]
        elif case == "thrs":
            e.params.iou_thrs = np.array([0.5, 0.6, 0.75])
            e.params.rec_thrs = np.linspace(0, 1, 21)
        else:
            e.params.max_dets = 100
        e.run()
        out.append(e)
    ref, ours = out
    R.same_dict(ours.get_results(), ref.get_results())
    R.same_arrays(ours.eval["precision"], ref.eval["precision"])
    R.same_arrays(ours.eval["recall"], ref.eval["recall"])
    assert ours.freq_groups == ref.freq_groups
    if case in ("imgs", "cats"):
        full = compat.LVISEval(compat.LVIS(p), copy.deepcopy(lvis_set.results), "bbox")
        full.run()
        assert full.get_results()["AP"] != ours.get_results()["AP"]  # the subset is what got scored


def test_per_image_records_dt_pointers_and_results_object(tmp_path, lvis_set):
    p = R.write(tmp_path, "gt.json", lvis_set.ground_truth)
    out = []
    for mod in (_lvis(), compat):
        g = mod.LVIS(p)
        r = mod.LVISResults(g, copy.deepcopy(lvis_set.results), max_dets=30)
        e = mod.LVISEval(g, r, "bbox")
        e.run()
        out.append((g, r, e))
    (rg, rr, re_), (og, orr, oe) = out
    assert isinstance(orr, compat.LVIS)
    for i in rg.get_img_ids()[:5]:
        a, b = rr.load_anns(rr.get_ann_ids(img_ids=[i])), orr.load_anns(orr.get_ann_ids(img_ids=[i]))
        assert [(x["id"], x["score"], x["area"]) for x in a] == [(x["id"], x["score"], x["area"]) for x in b]
        assert [x["id"] for x in rr.get_top_results(i, 0.5)] == [x["id"] for x in orr.get_top_results(i, 0.5)]
    assert len(oe.eval_imgs) == len(re_.eval_imgs)
    for a, b in zip(oe.eval_imgs, re_.eval_imgs):
        assert (a is None) == (b is None)
        if a is not None:
            assert a["dt_ids"] == b["dt_ids"] and a["gt_ids"] == b["gt_ids"]
            for k in ("dt_matches", "gt_matches", "dt_ignore", "gt_ignore"):
                assert np.array_equal(np.asarray(a[k], float), np.asarray(b[k], float)), k
    for k, areas in re_.eval["dt_pointers"].items():
        for a, ptr in areas.items():
            mine = oe.eval["dt_pointers"][k][a]
            assert set(mine) == set(ptr)
            for f in ptr:
                assert np.array_equal(np.asarray(mine[f]), np.asarray(ptr[f])), (k, a, f)
    key = next(k for k, v in re_.ious.items() if len(v))
    R.same_arrays(oe.ious[key], re_.ious[key])
    # the authors' pooled re-accumulation reads eval_imgs: same numbers from ours
    R.same_dict(DR.pooled_reference(oe), DR.pooled_reference(re_))


def test_unknown_ids_and_bad_params_are_one_line(tmp_path, lvis_set):
    g = compat.LVIS(R.write(tmp_path, "gt.json", lvis_set.ground_truth))
    with pytest.raises(KeyError):
        g.load_anns([10 ** 9])
    with pytest.raises(InputError, match="ids: annotation id 1000000000 is not in the dataset"):
        g.load_anns([10 ** 9])
    e = compat.LVISEval(g, copy.deepcopy(lvis_set.results), "bbox")
    e.params.cat_ids = [123456]
    with pytest.raises(InputError, match="params.cat_ids: id 123456 is not in the ground truth"):
        e.evaluate()
    e.params.cat_ids, e.params.use_cats = sorted(g.get_cat_ids()), 0
    with pytest.raises(InputError, match="params.use_cats"):
        e.evaluate()
    gs = copy.deepcopy(lvis_set.ground_truth)
    for a in gs["annotations"]:
        x, y, w, h = a["bbox"]
        a["segmentation"] = [[x, y, x, y + h, x + w, y + h, x + w, y]]
    gs = compat.LVIS(gs)
    bad = compat.LVISResults(gs, [dict(lvis_set.results[0], segmentation="x")])  # a box: lvis-api loads it too
    with pytest.raises(InputError, match=r"results\[0\].segmentation"):  # and its mask is refused in segm mode
        compat.LVISEval(gs, bad, "segm").evaluate()
