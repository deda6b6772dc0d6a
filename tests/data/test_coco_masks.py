"""Masks validated at read time (issue 24): every malformed polygon or RLE, in the ground truth or
the results, is one InputError naming the file, the annotation/detection index and the field, before
pycocotools sees it; the compressed-RLE decoder agrees with pycocotools on valid strings."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from vistabench.data.coco import read_ground_truth, read_result_columns, read_results
from vistabench.data.detection_synth import synth_detection_set
from vistabench.errors import InputError
from vistabench.metrics.detection import (
    check_segmentations,
    decode_rle_counts,
    evaluate_detections,
)


@pytest.fixture(scope="module")
def syn():
    return synth_detection_set(num_images=4, num_categories=3, dets_per_image=3, seed=0, masks=True)


def _results(syn, i, segm=..., drop_bbox=False, **changes):
    res = copy.deepcopy(syn.results)
    if segm is not ...:
        if segm is None:
            del res[i]["segmentation"]
        else:
            res[i]["segmentation"] = segm
    if drop_bbox:
        del res[i]["bbox"]
    res[i].update(changes)
    return res


def _gt(syn, i, segm=..., **image_changes):
    gt = copy.deepcopy(syn.ground_truth)
    if segm is not ...:
        if segm is None:
            del gt["annotations"][i]["segmentation"]
        else:
            gt["annotations"][i]["segmentation"] = segm
    if image_changes:
        img = next(im for im in gt["images"] if im["id"] == gt["annotations"][i]["image_id"])
        img.update(image_changes)
    return gt


def _one_line(exc: pytest.ExceptionInfo, *parts: str) -> str:
    msg = str(exc.value)
    assert "\n" not in msg
    for p in parts:
        assert p in msg, msg
    return msg


RLE_OK = {"size": [480, 640], "counts": [480 * 640]}

RESULT_CASES = [
    ("rle-without-size", {"counts": "PPYo1"}, ("detection 2, segmentation:", "needs 'size'")),
    ("rle-without-counts", {"size": [480, 640]}, ("detection 2, segmentation:", "needs 'counts'")),
    ("negative-counts", {"size": [480, 640], "counts": [-5, 480 * 640 + 5]}, ("segmentation.counts", "negative count -5")),
    ("counts-wrong-sum", {"size": [480, 640], "counts": [5, 7]}, ("segmentation.counts", "sum to 12, not h*w = 307200")),
    ("three-number-polygon", [[1.0, 2.0, 3.0]], ("detection 2, segmentation[0]:", "got 3")),
    ("four-number-polygon", [[1.0, 2.0, 3.0, 4.0]], ("segmentation[0]", "at least 6")),
    ("odd-polygon", [[1, 2, 3, 4, 5, 6, 7]], ("segmentation[0]", "even number")),
    ("flat-list", [1, 2, 3, 4, 5, 6], ("segmentation[0]", "expected a polygon")),
    ("polygon-of-strings", [["1", "2", "3", "4", "5", "6"]], ("segmentation[0]", "expected numbers")),
    ("polygon-nan", [[1, 2, 3, float("nan"), 5, 6]], ("segmentation[0]", "non-finite")),
    ("polygon-huge-coordinate", [[1, 2, 3, 1e300, 5, 6]], ("segmentation[0]", "beyond ±100000 px")),
    ("empty-list", [], ("detection 2, segmentation:", "empty list")),
    ("string", "PPYo1", ("detection 2, segmentation:", "got a str")),
    ("number", 7, ("detection 2, segmentation:", "got a int")),
    ("size-not-two", {"size": [480], "counts": "PPYo1"}, ("segmentation.size", "[height, width]")),
    ("garbage-counts", {"size": [480, 640], "counts": "~~~~ \x01"}, ("segmentation.counts", "undecodable", "outside")),
    ("unfinished-counts", {"size": [480, 640], "counts": "PPYo1a"}, ("segmentation.counts", "undecodable", "ends inside")),
    ("overlong-count", {"size": [480, 640], "counts": "ooooooooo1"}, ("segmentation.counts", "undecodable", "longer")),
    ("negative-compressed", {"size": [480, 640], "counts": "1O"}, ("segmentation.counts", "undecodable", "negative")),
    ("compressed-wrong-sum", {"size": [480, 640], "counts": "PPYo1"}, ("segmentation.counts", "sum to", "307200")),
    ("counts-dict", {"size": [480, 640], "counts": {"a": 1}}, ("segmentation.counts", "got dict")),
    ("non-ascii-counts", {"size": [480, 640], "counts": "é"}, ("segmentation.counts", "ASCII")),
]


@pytest.mark.parametrize("segm,parts", [c[1:] for c in RESULT_CASES], ids=[c[0] for c in RESULT_CASES])
def test_bad_result_mask_is_one_line_naming_detection_and_field(tmp_path, syn, segm, parts):
    (tmp_path / "dt.json").write_text(json.dumps(_results(syn, 2, segm)))
    gt = read_ground_truth(syn.ground_truth, with_segmentation=True)
    with pytest.raises(InputError) as exc:
        read_results(tmp_path / "dt.json", gt, iou_type="segm")
    _one_line(exc, "dt.json", *parts)
    # the same from a list in memory (compat, detectron2's path), and without a box (the box is
    # derived from the mask, so it is checked before pycocotools reads it)
    with pytest.raises(InputError) as exc:
        read_results(_results(syn, 2, segm, drop_bbox=True), gt, iou_type="segm")
    _one_line(exc, "detection 2", "segmentation")


def test_result_mask_form_is_checked_without_ground_truth(tmp_path, syn):
    # rerank / calibrate apply read results without ground truth: the form is still checked
    (tmp_path / "dt.json").write_text(json.dumps(_results(syn, 5, {"size": [480, 640], "counts": "\x7f"})))
    with pytest.raises(InputError) as exc:
        read_result_columns(tmp_path / "dt.json", keep_segmentation=True)
    _one_line(exc, "detection 5, segmentation.counts", "undecodable")


@pytest.mark.parametrize("in_memory", [False, True])
def test_missing_result_mask_in_segm_is_its_box_rectangle_as_pycocotools(tmp_path, syn, in_memory):
    """COCO.loadRes gives a result with a box and no mask its box's rectangle: scored so, warned;
    a result with neither is named."""
    res = _results(syn, 4, None)
    (tmp_path / "dt.json").write_text(json.dumps(res))
    gt = read_ground_truth(syn.ground_truth, with_segmentation=True)
    with pytest.warns(UserWarning, match=r"1 result\(s\) without 'segmentation' are scored as the rectangles of "
                                         r"their boxes"):
        d = read_results(copy.deepcopy(res) if in_memory else tmp_path / "dt.json", gt, iou_type="segm")
    x, y, w, h = res[4]["bbox"]
    assert d.segmentation[4] == [[x, y, x, y + h, x + w, y + h, x + w, y]]
    del res[4]["bbox"]
    (tmp_path / "dt.json").write_text(json.dumps(res))
    with pytest.raises(InputError) as exc:
        read_results(copy.deepcopy(res) if in_memory else tmp_path / "dt.json", gt, iou_type="segm")
    _one_line(exc, "detection 4 lacks 'bbox' and 'segmentation'")


def test_ground_truth_without_bbox_takes_the_masks_box_in_segm_only(tmp_path, syn):
    """As pycocotools: mask evaluation never reads the ground truth's box (the mask's is used);
    box evaluation needs it (pycocotools: KeyError)."""
    mask_utils = pytest.importorskip("pycocotools.mask")
    gt = copy.deepcopy(syn.ground_truth)
    del gt["annotations"][2]["bbox"]
    g = read_ground_truth(gt, with_segmentation=True)
    a = gt["annotations"][2]
    img = next(im for im in gt["images"] if im["id"] == a["image_id"])
    from vistabench.metrics.detection import to_rle

    want = mask_utils.toBbox(to_rle(a["segmentation"], img["height"], img["width"])).tolist()
    row = int(np.flatnonzero(g.ann_id == a["id"])[0])
    assert g.bbox[row].tolist() == want
    with pytest.raises(KeyError, match=r"annotation 2 \(id \d+\) lacks 'bbox' \(1 such\)") as exc:
        read_ground_truth(gt)
    _one_line(exc)


GT_CASES = [
    ("gt-missing", None, {}, ("annotation 3 (id 4) lacks 'segmentation'",)),
    ("gt-string", "abc", {}, ("annotation 3, segmentation:", "got a str")),
    ("gt-three-numbers", [[1, 2, 3]], {}, ("annotation 3, segmentation[0]", "got 3")),
    ("gt-rle-no-size", {"counts": [5]}, {}, ("annotation 3, segmentation:", "needs 'size'")),
    ("gt-polygon-image-without-size", [[0, 0, 5, 0, 5, 5]], {"height": 0, "width": 0},
     ("annotation 3, segmentation:", "height and width")),
    ("gt-negative-counts", {"size": [480, 640], "counts": [480 * 640 + 1, -1]}, {}, ("segmentation.counts", "negative")),
]


@pytest.mark.parametrize("segm,image,parts", [c[1:] for c in GT_CASES], ids=[c[0] for c in GT_CASES])
def test_bad_ground_truth_mask_is_one_line_naming_annotation_and_field(tmp_path, syn, segm, image, parts):
    (tmp_path / "gt.json").write_text(json.dumps(_gt(syn, 3, segm, **image)))
    with pytest.raises(InputError) as exc:
        read_ground_truth(tmp_path / "gt.json", with_segmentation=True)
    _one_line(exc, "gt.json", *parts)


def test_valid_masks_of_every_form_are_read_and_scored(syn):
    # polygons, uncompressed and compressed RLE, str and bytes counts: all pass and score as before
    gt_dict = _gt(syn, 0, {"size": [480, 640], "counts": [480 * 640]})
    gt = read_ground_truth(gt_dict, with_segmentation=True)
    res = _results(syn, 1, {"size": [480, 640], "counts": [100, 5, 480 * 640 - 105]})
    res[2]["segmentation"] = [[10, 10, 60, 10, 60, 50, 10, 50]]
    dets = read_results(res, gt, iou_type="segm")
    ev = evaluate_detections(gt, dets, iou_type="segm", variants=("old",))
    assert 0 <= ev.results["old"]["AP"] <= 1


def test_compressed_decoder_agrees_with_pycocotools():
    mask_utils = pytest.importorskip("pycocotools.mask")
    rng = np.random.default_rng(0)
    strings, expected, segs = [], [], []
    for t in range(200):
        h, w = (int(v) for v in rng.integers(1, 200, 2))
        m = np.zeros((h, w), np.uint8, order="F")
        for _ in range(int(rng.integers(0, 5))):
            y, x = rng.integers(0, h), rng.integers(0, w)
            m[y:y + rng.integers(1, h + 1), x:x + rng.integers(1, w + 1)] = rng.integers(0, 2)
        if t % 9 == 0:
            m[:] = 1  # a first count of 0
        rle = mask_utils.encode(np.asfortranarray(m))
        strings.append(rle["counts"])
        segs.append({"size": [h, w], "counts": rle["counts"].decode("ascii")})
        # pycocotools' own decoding, as run lengths of the column-major mask
        flat = mask_utils.decode(rle).flatten(order="F")
        edges = np.r_[0, np.flatnonzero(np.diff(flat)) + 1, len(flat)]
        runs = np.diff(edges).tolist()
        expected.append(([0] if flat[0] else []) + runs)
    counts, owner, bad, _ = decode_rle_counts(strings)
    assert not bad.any()
    for i, e in enumerate(expected):
        assert counts[owner == i].tolist() == e
    check_segmentations(segs, what="detection")  # and the whole check passes


def test_masks_of_another_size_than_their_image_are_warned_as_pycocotools_scores_them(syn):
    """pycocotools takes an RLE of another size as it is (IoU -1 with masks of other sizes): so do
    we, with one warning naming the first (issue 40: a 10 x 10 mask on a 640 x 640 image)."""
    gt = read_ground_truth(syn.ground_truth, with_segmentation=True)
    res = _results(syn, 0, {"size": [640, 480], "counts": [640 * 480]})  # transposed
    with pytest.warns(UserWarning, match=rf"1 mask\(s\) of another size than their image \(first: detection 0's "
                                         rf"mask is \[640, 480\] \(height, width\) but image {res[0]['image_id']}"):
        read_results(res, gt, iou_type="segm")
    bad = _gt(syn, 3, RLE_OK, height=100)
    with pytest.warns(UserWarning, match=r"first: annotation 3's mask is \[480, 640\]"):
        read_ground_truth(bad, with_segmentation=True)


def test_boxes_derived_from_masks_for_many_boxless_results():
    # more than 255 box-less results in one chunk: pycocotools counts list calls in a uint8
    mask_utils = pytest.importorskip("pycocotools.mask")
    masks = [np.asfortranarray((np.random.default_rng(i).random((20, 30)) > .5).astype(np.uint8)) for i in range(300)]
    res = []
    for m in masks:
        rle = mask_utils.encode(m)
        res.append({"image_id": 1, "category_id": 1, "score": 0.5,
                    "segmentation": {"size": rle["size"], "counts": rle["counts"].decode("ascii")}})
    c = read_result_columns(res, iou_type="segm")
    np.testing.assert_array_equal(c["area"], [m.sum() for m in masks])
    np.testing.assert_array_equal(c["bbox"], [mask_utils.toBbox(mask_utils.encode(m)) for m in masks])
    res[7]["segmentation"] = [[0, 0, 5, 0, 5, 5]]
    with pytest.raises(InputError, match="detection 7 lacks 'bbox' and its mask is a polygon"):
        read_result_columns(res, iou_type="segm")
