"""Every behaviour torchmetrics 1.9.0's tests/unittests/detection/test_map.py checks, replayed on our
own inputs: each scenario runs with torchmetrics' MeanAveragePrecision (and its functional
``mean_average_precision``) and with ``vistabench.compat.torchmetrics``; results must be equal (the
same float32 values), or both must raise the same exception type (and ours one line), or both warn.
CUDA-only cases (device moves) are left out: torch here is CPU-only."""

from __future__ import annotations

import copy
import re
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchmetrics")

import vistabench.compat.torchmetrics as ours_mod  # noqa: E402
from vistabench.errors import InputError  # noqa: E402

T = torch.tensor


@pytest.fixture
def tm(torchmetrics_map):
    """torchmetrics' class and function (torchvision's box_convert supplied: tests/compat/conftest.py)."""
    import torchmetrics.functional.detection.map as fm

    return torchmetrics_map.MeanAveragePrecision, fm.mean_average_precision


OURS = (ours_mod.MeanAveragePrecision, ours_mod.mean_average_precision)


# ------------------------------------------------------------------------------------- inputs
def _masks_of(boxes, h=40, w=50):
    m = torch.zeros((len(boxes), h, w), dtype=torch.bool)
    for k, (x1, y1, x2, y2) in enumerate(boxes.tolist()):
        m[k, int(y1): int(y2) + 1, int(x1): int(x1 + x2) // 2 + 1] = True
    return m


def _batches(seed=0, n_batches=4, per_batch=3, n_cls=5, masks=False, fmt="xyxy", many=None, empty=True):
    """Lists of (preds, target) batches with near-duplicate boxes, crowds, empty images."""
    rng = np.random.default_rng(seed)
    out = []
    for b in range(n_batches):
        preds, target = [], []
        for i in range(per_batch):
            ng = 0 if (b, i) == (1, 0) and empty else int(rng.integers(1, 6))
            nd = 0 if (b, i) == (2, 1) and empty else int(many or rng.integers(1, 8))
            def boxes(n):
                xy = rng.uniform(0, 25, (n, 2))
                return np.concatenate([xy, xy + rng.uniform(3, 20, (n, 2))], 1).astype(np.float32)
            gb, db = boxes(ng), boxes(nd)
            k = min(ng, nd)
            db[:k] = gb[:k] + rng.normal(0, 1.5, (k, 4)).astype(np.float32)
            db[:, 2:] = np.maximum(db[:, 2:], db[:, :2] + 1)
            gl, dl = rng.integers(0, n_cls, ng), rng.integers(0, n_cls, nd)
            dl[:k] = gl[:k]
            def conv(x):
                if fmt == "xywh":
                    return np.concatenate([x[:, :2], x[:, 2:] - x[:, :2]], 1)
                if fmt == "cxcywh":
                    return np.concatenate([(x[:, :2] + x[:, 2:]) / 2, x[:, 2:] - x[:, :2]], 1)
                return x
            p = {"boxes": torch.from_numpy(conv(db)), "scores": torch.from_numpy(rng.random(nd).astype(np.float32)),
                 "labels": torch.from_numpy(dl)}
            t = {"boxes": torch.from_numpy(conv(gb)), "labels": torch.from_numpy(gl),
                 "iscrowd": torch.from_numpy((rng.random(ng) < 0.15).astype(np.int64))}
            if masks:
                p["masks"], t["masks"] = _masks_of(torch.from_numpy(db)), _masks_of(torch.from_numpy(gb))
            preds.append(p)
            target.append(t)
        out.append((preds, target))
    return out


def _flat(batches):
    return [p for b in batches for p in b[0]], [t for b in batches for t in b[1]]


# ------------------------------------------------------------------------------------- comparison
def _same(a, b, path="result"):
    if isinstance(b, dict):
        assert isinstance(a, dict) and list(a) == list(b) or set(a) == set(b), (path, set(a) ^ set(b))
        for k in b:
            _same(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(b, (list, tuple)):
        assert len(a) == len(b), (path, len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{path}[{i}]")
    elif isinstance(b, torch.Tensor):
        assert isinstance(a, torch.Tensor), (path, type(a))
        assert tuple(a.shape) == tuple(b.shape), (path, a.shape, b.shape)
        assert a.dtype == b.dtype or a.is_floating_point() == b.is_floating_point(), (path, a.dtype, b.dtype)
        x, y = a.double().numpy(), b.double().numpy()
        assert np.allclose(x, y, rtol=0, atol=1e-9, equal_nan=True), (path, x, y)
    else:
        assert a == b, (path, a, b)


def _outcome(fn):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        try:
            value = fn()
        except Exception as exc:  # noqa: BLE001 -- compared by type
            value = exc
    many = [str(w.message) for w in rec if "detections in a single image" in str(w.message)]
    return value, many


def _replay(tm_pair, scenario, *, match=None):
    ref, ref_warn = _outcome(lambda: scenario(*tm_pair))
    got, got_warn = _outcome(lambda: scenario(*OURS))
    if isinstance(ref, Exception):
        assert isinstance(got, type(ref)), (ref, got)
        assert isinstance(got, InputError) and "\n" not in str(got), got
        if match:
            assert re.search(match, str(got)), (match, str(got))
    else:
        assert not isinstance(got, Exception), got
        _same(got, ref)
    assert bool(got_warn) == bool(ref_warn) and got_warn[:1] == ref_warn[:1], (got_warn, ref_warn)
    return got


def _run(cls, batches, use_forward=False, **kw):
    metric = cls(**kw)
    for preds, target in batches:
        if use_forward:
            metric(copy.deepcopy(preds), copy.deepcopy(target))
        else:
            metric.update(copy.deepcopy(preds), copy.deepcopy(target))
    return metric.compute()


BACKENDS = ["pycocotools", "faster_coco_eval"]


# -------------------------------------------------------------------- TestMAPUsingCOCOReference
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("rec", [None, [0.25, 0.5, 0.75]])
@pytest.mark.parametrize("iou", [None, [0.25, 0.5, 0.75]])
@pytest.mark.parametrize("iou_type", ["bbox", "segm"])
def test_map_batches_through_forward(tm, iou_type, iou, rec, backend):
    b = _batches(1, masks=iou_type == "segm", fmt="xywh")
    _replay(tm, lambda C, f: _run(C, b, True, iou_type=iou_type, iou_thresholds=iou, rec_thresholds=rec,
                                  box_format="xywh", backend=backend))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("iou_type", ["bbox", "segm"])
def test_map_classwise(tm, iou_type, backend):
    b = _batches(2, masks=iou_type == "segm")
    _replay(tm, lambda C, f: _run(C, b, True, iou_type=iou_type, class_metrics=True, backend=backend))


@pytest.mark.parametrize("backend", BACKENDS)
def test_both_iou_types_at_once(tm, backend):
    b = _batches(3, masks=True)
    out = _replay(tm, lambda C, f: _run(C, b, iou_type=("bbox", "segm"), backend=backend))
    assert "bbox_map" in out and "segm_map" in out


@pytest.mark.parametrize("iou_type", ["bbox", "segm"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_tm_to_coco_then_coco_to_tm(tm, tmp_path, iou_type, backend):
    b = _batches(4, masks=iou_type == "segm", fmt="xywh", empty=False)  # (segm: an image without masks is
    # left out of the ground truth, and its predictions then fail loadRes's assertion, in both)

    def scenario(C, f):
        metric = C(iou_type=iou_type, backend=backend, box_format="xywh")
        for p, t in b:
            metric.update(p, t)
        name = str(tmp_path / C.__module__.replace(".", "_"))
        metric.tm_to_coco(name)
        return C().coco_to_tm(f"{name}_preds.json", f"{name}_target.json", iou_type=iou_type, backend=backend)

    preds, target = _replay(tm, scenario)
    key = "masks" if iou_type == "segm" else "boxes"
    assert len(target) == sum(1 for _, ts in b for t in ts if len(t["labels"]))
    assert all(key in p for p in preds)


# -------------------------------------------------------------------- TestMapProperties
def test_error_on_wrong_init(tm):
    _replay(tm, lambda C, f: C(class_metrics=0), match="Expected argument `class_metrics` to be a boolean")


_E = torch.Tensor([])
_EMPTY = {"boxes": _E, "scores": _E, "labels": torch.IntTensor([])}
_ONE_GT = {"boxes": T([[214.15, 41.29, 562.41, 285.07]]), "labels": torch.IntTensor([4])}
_ONE_DT = {"boxes": T([[214.15, 41.29, 562.41, 285.07]]), "scores": T([0.5]), "labels": torch.IntTensor([4])}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("box_format", ["xyxy", "xywh", "cxcywh"])
@pytest.mark.parametrize("empty", ["preds", "ground_truths"])
def test_empty_preds_or_ground_truths(tm, empty, box_format, backend):
    preds, target = ([_EMPTY], [_ONE_GT]) if empty == "preds" else ([_ONE_DT], [{"boxes": _E, "labels": torch.IntTensor([])}])
    _replay(tm, lambda C, f: _run(C, [(preds, target)], box_format=box_format, backend=backend))


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_metric(tm, backend):
    _replay(tm, lambda C, f: C(backend=backend).compute())


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", ["missing_pred", "missing_gt"])
def test_missing_pred_or_gt_is_below_one(tm, case, backend):
    box = T([[10.0, 20, 15, 25]])
    if case == "missing_pred":
        gts = [{"boxes": box, "labels": torch.IntTensor([0])}] * 2
        preds = [{"boxes": box, "scores": T([0.9]), "labels": torch.IntTensor([0])}, _EMPTY]
    else:
        gts = [{"boxes": box, "labels": torch.IntTensor([0])}, {"boxes": _E, "labels": torch.IntTensor([])}]
        preds = [{"boxes": box, "scores": T([0.9]), "labels": torch.IntTensor([0])},
                 {"boxes": box, "scores": T([0.95]), "labels": torch.IntTensor([0])}]
    out = _replay(tm, lambda C, f: _run(C, [(preds, gts)], backend=backend))
    assert out["map"] < 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("empty", ["gt", "pred"])
def test_segm_empty_mask(tm, empty, backend):
    mask = torch.zeros((1, 10, 10), dtype=torch.bool)
    if empty == "gt":
        preds = [{"masks": mask, "scores": T([0.5]), "labels": torch.IntTensor([4])}]
        target = [{"masks": torch.Tensor([]), "labels": torch.IntTensor([])}]
    else:
        preds = [{"masks": torch.BoolTensor([]), "scores": _E, "labels": torch.IntTensor([])}]
        target = [{"masks": mask, "labels": torch.IntTensor([4])}]
    out = _replay(tm, lambda C, f: _run(C, [(preds, target)], iou_type="segm", backend=backend))
    assert all(float(v) == -1 for k, v in out.items() if k != "classes") and int(out["classes"]) == 4


_BAD_INPUTS = [
    ("preds_not_sequence", lambda: (torch.Tensor(), []), "Expected argument `preds` to be of type Sequence"),
    ("target_not_sequence", lambda: ([], torch.Tensor()), "Expected argument `target` to be of type Sequence"),
    ("lengths", lambda: ([{}], [{}, {}]), "Expected argument `preds` and `target` to have the same length"),
    ("preds_boxes_key", lambda: ([{"scores": _E, "labels": _E}], [{"boxes": _E, "labels": _E}]),
     "Expected all dicts in `preds` to contain the `boxes` key"),
    ("preds_scores_key", lambda: ([{"boxes": _E, "labels": _E}], [{"boxes": _E, "labels": _E}]),
     "Expected all dicts in `preds` to contain the `scores` key"),
    ("preds_labels_key", lambda: ([{"boxes": _E, "scores": _E}], [{"boxes": _E, "labels": _E}]),
     "Expected all dicts in `preds` to contain the `labels` key"),
    ("target_boxes_key", lambda: ([{"boxes": _E, "scores": _E, "labels": _E}], [{"labels": _E}]),
     "Expected all dicts in `target` to contain the `boxes` key"),
    ("target_labels_key", lambda: ([{"boxes": _E, "scores": _E, "labels": _E}], [{"boxes": _E}]),
     "Expected all dicts in `target` to contain the `labels` key"),
    ("preds_boxes_type", lambda: ([{"boxes": [], "scores": _E, "labels": _E}], [{"boxes": _E, "labels": _E}]),
     "Expected all boxes in `preds` to be of type Tensor"),
    ("preds_scores_type", lambda: ([{"boxes": _E, "scores": [], "labels": _E}], [{"boxes": _E, "labels": _E}]),
     "Expected all scores in `preds` to be of type Tensor"),
    ("preds_labels_type", lambda: ([{"boxes": _E, "scores": _E, "labels": []}], [{"boxes": _E, "labels": _E}]),
     "Expected all labels in `preds` to be of type Tensor"),
    ("target_boxes_type", lambda: ([{"boxes": _E, "scores": _E, "labels": _E}], [{"boxes": [], "labels": _E}]),
     "Expected all boxes in `target` to be of type Tensor"),
    ("target_labels_type", lambda: ([{"boxes": _E, "scores": _E, "labels": _E}], [{"boxes": _E, "labels": []}]),
     "Expected all labels in `target` to be of type Tensor"),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name, args, phrase", _BAD_INPUTS, ids=[c[0] for c in _BAD_INPUTS])
def test_error_on_wrong_input(tm, name, args, phrase, backend):
    _replay(tm, lambda C, f: C(backend=backend).update(*args()), match=re.escape(phrase))


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_update_is_no_error(tm, backend):
    _replay(tm, lambda C, f: C(backend=backend).update([], []))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("box_format, iou, ap", [("xyxy", 0.25, 1), ("xywh", 0.143, 0.0), ("cxcywh", 0.143, 0.0)])
def test_for_box_format(tm, box_format, iou, ap, backend):
    preds = [{"boxes": T([[0.5, 0.5, 1, 1]]), "scores": T([1.0]), "labels": T([0])}]
    target = [{"boxes": T([[0, 0, 1, 1]]), "labels": T([0])}]
    out = _replay(tm, lambda C, f: _run(C, [(preds, target)], box_format=box_format, iou_thresholds=[0.2],
                                        extended_summary=True, backend=backend))
    assert out["map"].item() == ap and round(float(out["ious"][(0, 0)]), 3) == iou


@pytest.mark.parametrize("backend", BACKENDS)
def test_cxcywh_integer_boxes_convert_in_floating_point(tm, backend):
    boxes = T([[10, 10, 5, 7], [30, 22, 9, 3]])  # int64: centre +- half of an odd size
    preds = [{"boxes": boxes, "scores": T([0.9, 0.8]), "labels": T([1, 2])}]
    target = [{"boxes": boxes.clone(), "labels": T([1, 2])}]
    out = _replay(tm, lambda C, f: _run(C, [(preds, target)], box_format="cxcywh", backend=backend))
    assert out["map"].item() == 1.0


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("flag", [False, True])
@pytest.mark.parametrize("iou_type", ["bbox", "segm"])
def test_warning_on_many_detections(tm, iou_type, flag, backend):
    if iou_type == "bbox":
        preds = [{"boxes": T([[0.5, 0.5, 1, 1]]).repeat(101, 1), "scores": T([1.0]).repeat(101),
                 "labels": T([0]).repeat(101)}]
        target = [{"boxes": T([[0, 0, 1, 1]]), "labels": T([0])}]
    else:
        (preds, target), = _batches(5, n_batches=1, per_batch=1, masks=True, many=101)

    def scenario(C, f):
        metric = C(iou_type=iou_type, backend=backend)
        metric.warn_on_many_detections = flag
        metric.update(preds, target)

    _replay(tm, scenario)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("which", ["one_image", "batches"])
def test_extended_summary(tm, which, backend):
    if which == "one_image":
        b = [([{"boxes": T([[0.5, 0.5, 1, 1]]), "scores": T([1.0]), "labels": T([0])}],
              [{"boxes": T([[0, 0, 1, 1]]), "labels": T([0])}])]
    else:
        b = _batches(6)
    out = _replay(tm, lambda C, f: _run(C, b, extended_summary=True, backend=backend))
    assert out["precision"].shape[0] == 10 and isinstance(out["ious"], dict)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("class_metrics", [False, True])
def test_average_micro_and_macro(tm, class_metrics, backend):
    b = _batches(7)
    shifted = [([dict(p, labels=p["labels"] + 2) for p in ps], [dict(t, labels=t["labels"] + 2) for t in ts])
               for ps, ts in b]
    for avg in ("micro", "macro"):
        _replay(tm, lambda C, f, avg=avg: _run(C, shifted, average=avg, class_metrics=class_metrics, backend=backend))


@pytest.mark.parametrize("backend", BACKENDS)
def test_many_detection_thresholds(tm, backend):
    preds = [{"boxes": T([[258.0, 41.0, 606.0, 285.0]]), "scores": T([0.536]), "labels": T([0])}]
    target = [{"boxes": T([[214.0, 41.0, 562.0, 285.0]]), "labels": T([0])}]
    out = _replay(tm, lambda C, f: C(max_detection_thresholds=[1, 10, 1000], backend=backend)(preds, target))
    assert (round(out["map"].item(), 5) == 0.6) == (backend == "faster_coco_eval")
    assert {"mar_1", "mar_10", "mar_1000"} <= set(out)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mdt", [[1, 10], [1, 10, 50, 100]])
def test_detection_thresholds_not_three(tm, mdt, backend):
    _replay(tm, lambda C, f: C(max_detection_thresholds=mdt, backend=backend),
            match="When providing a list of max detection thresholds it should have length 3")


# -------------------------------------------------------------------- functional
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", ["iou_type_bbox", "iou_type_segm", "basic", "empty_preds", "empty_targets",
                                  "box_xyxy", "box_xywh", "box_cxcywh", "custom_thresholds"])
def test_functional_equals_the_class(tm, case, backend):
    kw: dict = {"backend": backend}
    if case.startswith("iou_type"):
        kw["iou_type"] = case.split("_")[-1]
        preds, target = _flat(_batches(8, masks=kw["iou_type"] == "segm", fmt="xywh"))
        kw["box_format"] = "xywh"
    elif case == "empty_preds":
        preds, target = [_EMPTY], [_ONE_GT]
    elif case == "empty_targets":
        preds, target = [_ONE_DT], [{"boxes": _E, "labels": torch.IntTensor([])}]
    elif case.startswith("box_"):
        preds = [{"boxes": T([[0.5, 0.5, 1, 1]]), "scores": T([1.0]), "labels": T([0])}]
        target = [{"boxes": T([[0, 0, 1, 1]]), "labels": T([0])}]
        kw.update(box_format=case[4:], iou_thresholds=[0.3, 0.4])
    else:
        preds, target = _flat(_batches(9))
        if case == "custom_thresholds":
            kw.update(iou_thresholds=[0.2, 0.7], rec_thresholds=[0.25, 0.5, 0.75])

    def scenario(C, f):
        functional = f(copy.deepcopy(preds), copy.deepcopy(target), **kw)
        metric = C(**kw)
        metric.update(copy.deepcopy(preds), copy.deepcopy(target))
        cls = metric.compute()
        for k in cls:  # the function is the class, one-element tensors squeezed
            assert torch.allclose(functional[k].reshape(cls[k].shape).float(), cls[k].float(), equal_nan=True)
        return functional

    _replay(tm, scenario)
