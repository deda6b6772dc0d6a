"""COCO/LVIS JSON readers: streamed results equal a plain json.load; errors are one line."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vistabench.data.coco import (read_ground_truth, read_result_columns, read_results, write_result_columns,
                                  write_results)
from vistabench.errors import InputError
from vistabench.data.detection_synth import synth_detection_set


@pytest.fixture(scope="module")
def synth():
    return synth_detection_set(num_images=20, num_categories=10, dets_per_image=30, seed=0, score_decimals=None)


def _same(a, b):
    for k in ("image", "category", "bbox", "score", "area"):
        assert np.array_equal(getattr(a, k), getattr(b, k)), k


@pytest.mark.parametrize("chunk", [64, 1000, 1 << 20])
@pytest.mark.parametrize("style", ["default", "compact", "indent", "reordered", "extra-field"])
def test_streamed_equals_json_load(synth, tmp_path, chunk, style):
    gt = read_ground_truth(synth.ground_truth)
    res = synth.results
    if style == "reordered":
        res = [{"score": r["score"], "bbox": r["bbox"], "category_id": r["category_id"], "image_id": r["image_id"]}
               for r in res]
    if style == "extra-field":
        res = [dict(r, note="x}y,{") for r in res]  # strings with braces force the json path
    p = tmp_path / "dt.json"
    kw = {"compact": dict(separators=(",", ":")), "indent": dict(indent=2)}.get(style, {})
    p.write_text(json.dumps(res, **kw))
    _same(read_results(p, gt, chunk_bytes=chunk), read_results(json.loads(p.read_text()), gt))


def test_segm_results_and_roundtrip(tmp_path):
    s = synth_detection_set(num_images=4, num_categories=3, dets_per_image=5, seed=1, masks=True)
    gt = read_ground_truth(s.ground_truth, with_segmentation=True)
    p = tmp_path / "dt.json"
    p.write_text(json.dumps(s.results))
    d = read_results(p, gt, iou_type="segm", chunk_bytes=300)
    assert len(d.segmentation) == len(s.results)
    write_results(tmp_path / "out.json", gt, d)
    _same(read_results(tmp_path / "out.json", gt, iou_type="segm"), d)


def test_ground_truth_formats(synth):
    gt = read_ground_truth(synth.ground_truth)
    assert gt.format == "lvis" and gt.frequency is not None
    coco = synth_detection_set(num_images=5, num_categories=3, dets_per_image=5, seed=0, format="coco")
    g2 = read_ground_truth(coco.ground_truth)
    assert g2.format == "coco" and g2.ignore.tolist() == g2.crowd.tolist()
    mixed = json.loads(json.dumps(synth.ground_truth))
    del mixed["images"][0]["neg_category_ids"]
    with pytest.raises(InputError, match="pass the format explicitly"):
        read_ground_truth(mixed)


BAD = {
    "nan-score": ('[{"image_id": 3, "category_id": 1, "bbox": [1, 2, 3, 4], "score": NaN}]', "non-finite score"),
    "inf-score": ('[{"image_id": 3, "category_id": 1, "bbox": [1, 2, 3, 4], "score": -Infinity}]', "non-finite score"),
    "neg-width": ('[{"image_id": 3, "category_id": 1, "bbox": [1, 2, -3, 4], "score": 0.5}]', "negative width"),
    "unknown-image": ('[{"image_id": 3, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5},'
                      ' {"image_id": 5, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5}]', "image ids not in"),
    "unknown-category": ('[{"image_id": 3, "category_id": 99, "bbox": [1, 2, 3, 4], "score": 0.5}]', "category ids not in"),
    "other-dataset": ('[{"image_id": 4, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5}]', "different dataset"),
    "truncated": ('[{"image_id": 3, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5},', "malformed JSON"),
    "garbage": ('[{"image_id": 3, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5}} x', "malformed JSON"),
    "not-a-list": ('{"a": 1}', "expected a JSON list"),
    "missing-score": ('[{"image_id": 3, "category_id": 1, "bbox": [1, 2, 3, 4]}]', "lacks"),
    "short-box": ('[{"image_id": 3, "category_id": 1, "bbox": [1, 2, 3], "score": 0.5}]', "4 numbers"),
    "string-score": ('[{"image_id": 3, "category_id": 1, "bbox": [1, 2, 3, 4], "score": "0.5"}]', "a number"),
    "float-id": ('[{"image_id": 3.5, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5}]', "integers"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_results_one_line_error(synth, tmp_path, case):
    text, msg = BAD[case]
    gt = read_ground_truth(synth.ground_truth)
    p = tmp_path / "dt.json"
    p.write_text(text)
    with pytest.raises(InputError, match=msg) as ei:
        read_results(p, gt)
    assert "\n" not in str(ei.value) and "dt.json" in str(ei.value)


def test_empty_results_file(synth, tmp_path):
    gt = read_ground_truth(synth.ground_truth)
    p = tmp_path / "dt.json"
    p.write_text(" [ ] ")
    with pytest.raises(InputError, match="empty.*`allow_empty`"):
        read_results(p, gt)
    assert len(read_results(p, gt, allow_empty=True)) == 0


def test_bad_ground_truth(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_ground_truth(tmp_path / "nope.json")
    p = tmp_path / "gt.json"
    p.write_text('{"images": [], "annotations": [')
    with pytest.raises(InputError, match="malformed JSON"):
        read_ground_truth(p)
    with pytest.raises(InputError, match="lacks the field 'area'"):
        read_ground_truth({"images": [{"id": 1}], "categories": [{"id": 1}],
                           "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1]}]})


def test_columns_without_ground_truth(synth, tmp_path):
    p = tmp_path / "dt.json"
    write_result_columns(p, np.array([7, 8]), np.array([1, 2]), np.ones((2, 4)), np.array([0.5, 0.25]))
    c = read_result_columns(p)
    assert c["image_id"].tolist() == [7, 8] and c["score"].tolist() == [0.5, 0.25]


def _rewrite(results, style):
    """Equivalent JSON spellings that json.load (what the official tools use) reads identically."""
    import random

    rng = random.Random(0)
    parts = []
    for r in results:
        keys = list(r)
        rng.shuffle(keys)  # key order
        items = []
        for k in keys:
            v = r[k]
            if style == "exponents" and k == "score":
                items.append(f'"{k}": {v:.17e}'.upper().replace('"SCORE"', '"score"'))
            elif style == "exponents" and k == "bbox":
                items.append(f'"{k}": [' + ", ".join(f"{x * 10:.17g}e-1" for x in v) + "]")
            else:
                items.append(f'"{k}":{json.dumps(v)}')
        if style == "unicode":
            items.insert(1, '"nàme": "Ünïcode ☃ \\u00e9 \\" } ] {"')
            items.append('"extra": {"nested": [1, {"deep": "}"}], "n": null, "t": true}')
        sep = {"whitespace": " ,\n\t "}.get(style, ",")
        parts.append("{\r\n " + sep.join(items) + " }")
    return "[\n" + " ,\n".join(parts) + "\n]\n"


@pytest.mark.parametrize("chunk", [50, 333, 4096])
@pytest.mark.parametrize("style", ["exponents", "unicode", "whitespace"])
def test_reader_differential_edge_cases(synth, tmp_path, chunk, style):
    gt = read_ground_truth(synth.ground_truth)
    text = _rewrite(synth.results[:60], style)
    p = tmp_path / "dt.json"
    p.write_bytes(text.encode("utf-8"))
    ours = read_results(p, gt, chunk_bytes=chunk)  # objects split across reads at every chunk size
    ref = read_results(json.loads(text), gt)  # the standard library, as lvis-api / pycocotools read
    _same(ours, ref)
    assert len(ours) == 60


def test_reader_segm_objects_split_across_chunks(tmp_path):
    s = synth_detection_set(num_images=3, num_categories=3, dets_per_image=6, seed=2, masks=True)
    gt = read_ground_truth(s.ground_truth, with_segmentation=True)
    p = tmp_path / "dt.json"
    p.write_text(json.dumps(s.results, indent=1))
    ref = read_results(json.loads(p.read_text()), gt, iou_type="segm")
    for chunk in (40, 97, 1000):
        d = read_results(p, gt, iou_type="segm", chunk_bytes=chunk)
        _same(d, ref)
        assert d.segmentation == ref.segmentation


def test_ground_truth_unicode_names_and_extra_keys(synth, tmp_path):
    g = json.loads(json.dumps(synth.ground_truth))
    g["categories"][0]["name"] = "café ☕ \"quoted\""
    g["categories"][0]["synonyms"] = ["x", "ÿ"]
    g["images"][0]["coco_url"] = "http://example/ü.jpg"
    p = tmp_path / "gt.json"
    p.write_text(json.dumps(g, ensure_ascii=False, indent=3), encoding="utf-8")
    a, b = read_ground_truth(p), read_ground_truth(g)
    assert a.category_names == b.category_names and "café ☕ \"quoted\"" in a.category_names
    for k in ("image", "category", "bbox", "area", "ignore", "negative", "not_exhaustive"):
        assert np.array_equal(getattr(a, k), getattr(b, k)), k


@pytest.mark.parametrize("chunk", [64, 1 << 20])
def test_reader_accepts_a_utf8_bom(synth, tmp_path, chunk):
    """Editors on Windows write a byte-order mark; the file reads as without it."""
    gt = read_ground_truth(synth.ground_truth)
    plain, bom = tmp_path / "plain.json", tmp_path / "bom.json"
    plain.write_text(json.dumps(synth.results))
    bom.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    _same(read_results(bom, gt, chunk_bytes=chunk), read_results(plain, gt))


# ---------------------------------------------------------------- two processes (the second core)
def _columns_equal(a, b):
    for k in ("image_id", "category_id", "bbox", "score", "area"):
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        assert np.array_equal(a[k], b[k]), k


@pytest.fixture
def child_results(monkeypatch):
    """Records what every forked child returned (None: it failed and the parent read its part)."""
    from vistabench.data import forked

    if not forked.can_fork():
        pytest.skip("no fork or a single usable CPU here")
    got = []
    real = forked.ForkedColumns.result

    def result(self):
        r = real(self)
        got.append(None if r is None else len(r["score"]))
        return r

    monkeypatch.setattr(forked.ForkedColumns, "result", result)
    return got


@pytest.mark.parametrize("chunk", [64, 1000, 1 << 20])
@pytest.mark.parametrize("style", ["default", "compact", "indent", "reordered", "nested-dicts", "brace-strings"])
def test_two_processes_equal_one(synth, tmp_path, chunk, style, child_results):
    res = synth.results
    if style == "reordered":
        res = [{"score": r["score"], "bbox": r["bbox"], "category_id": r["category_id"], "image_id": r["image_id"]}
               for r in res]
    if style == "nested-dicts":  # "},{" inside an object: a cut there must not split the list
        res = [dict(r, parts=[{"a": 1}, {"b": [2]}]) for r in res]
    if style == "brace-strings":
        res = [dict(r, note="},{") for r in res]
    p = tmp_path / "dt.json"
    kw = {"compact": dict(separators=(",", ":")), "indent": dict(indent=2)}.get(style, {})
    p.write_text(json.dumps(res, **kw))
    one = read_result_columns(p, chunk_bytes=chunk, two_processes=False)
    two = read_result_columns(p, chunk_bytes=chunk, two_processes=True)
    _columns_equal(one, two)
    assert len(one["score"]) == len(res)
    if style in ("default", "compact", "indent", "reordered"):  # the child did its half
        assert child_results and child_results[-1] and 0 < child_results[-1] < len(res), child_results


@pytest.mark.parametrize("where", [0.1, 0.9])
@pytest.mark.parametrize("bad", ["missing", "string-score", "negative-width", "nan-score", "truncated"])
def test_two_processes_same_errors(synth, tmp_path, where, bad, child_results):
    res = [dict(r) for r in synth.results]
    i = int(len(res) * where)
    if bad == "missing":
        del res[i]["category_id"]
    elif bad == "string-score":
        res[i]["score"] = "high"
    elif bad == "negative-width":
        res[i]["bbox"] = [1, 2, -3, 4]
    elif bad == "nan-score":
        res[i]["score"] = float("nan")
    p = tmp_path / "dt.json"
    text = json.dumps(res)
    p.write_text(text[: int(len(text) * where)] if bad == "truncated" else text)
    messages = []
    for two in (False, True):
        with pytest.raises(InputError) as e:
            read_result_columns(p, two_processes=two)
        messages.append(str(e.value))
    assert messages[0] == messages[1]
    assert "\n" not in messages[0]


def test_forked_columns_result_or_none():
    from vistabench.data.forked import ForkedColumns, can_fork

    if not can_fork():
        pytest.skip("no fork or a single usable CPU here")
    layout = {"a": (np.int64, ()), "b": (np.float64, (4,))}

    def work(n):
        for s in range(0, n, 7):
            k = min(7, n - s)
            yield {"a": np.arange(s, s + k), "b": np.full((k, 4), s, np.float64)}

    r = ForkedColumns(lambda: work(30), layout, capacity=30).result()
    assert r["a"].tolist() == list(range(30)) and r["b"].shape == (30, 4) and r["b"][29, 0] == 28
    assert ForkedColumns(lambda: work(31), layout, capacity=30).result() is None  # over capacity

    def failing():
        yield from work(7)
        raise ValueError("the child fails")

    assert ForkedColumns(failing, layout, capacity=30).result() is None
    ForkedColumns(lambda: work(10**6), layout, capacity=10**6).cancel()  # stopped and reaped
