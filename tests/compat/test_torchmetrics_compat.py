"""vistabench.compat.torchmetrics against torchmetrics' own MeanAveragePrecision (pycocotools backend),
same update() calls. torchvision is not installed here: its ``box_convert`` (the only piece
torchmetrics takes from it) is supplied by a transcription (tests/compat/conftest.py)."""

from __future__ import annotations

from contextlib import nullcontext

import numpy as np

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchmetrics")

from vistabench.compat.torchmetrics import MeanAveragePrecision  # noqa: E402
from vistabench.errors import InputError  # noqa: E402


@pytest.fixture
def reference(torchmetrics_map):
    return torchmetrics_map.MeanAveragePrecision


def _batches(seed, *, masks=False, fmt="xyxy", n_img=10, n_cls=4, H=60, W=80):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n_img):
        ng, nd = int(rng.integers(0, 6)), int(rng.integers(0, 9))
        if i == 3:
            ng = 0  # an image without ground truth
        if i == 5:
            nd = 0  # an image without predictions
        def boxes(n):
            xy = rng.uniform(0, 40, (n, 2))
            wh = rng.uniform(4, 35, (n, 2))
            return np.concatenate([xy, xy + wh], 1).astype(np.float32)
        gb, db = boxes(ng), boxes(nd)
        if nd and ng:
            db[: min(nd, ng)] = gb[: min(nd, ng)] + rng.normal(0, 2, (min(nd, ng), 4)).astype(np.float32)
        def conv(b):
            if fmt == "xywh":
                return np.concatenate([b[:, :2], b[:, 2:] - b[:, :2]], 1)
            if fmt == "cxcywh":
                return np.concatenate([(b[:, :2] + b[:, 2:]) / 2, b[:, 2:] - b[:, :2]], 1)
            return b
        def mk(b):
            m = np.zeros((len(b), H, W), np.uint8)
            for k, (x1, y1, x2, y2) in enumerate(b):
                m[k, int(max(y1, 0)): int(y2), int(max(x1, 0)): int((x1 + x2) / 2) + 1] = 1
            return torch.from_numpy(m).bool()
        p = {"boxes": torch.from_numpy(conv(db)), "scores": torch.from_numpy(rng.random(nd).astype(np.float32)),
             "labels": torch.from_numpy(rng.integers(0, n_cls, nd))}
        t = {"boxes": torch.from_numpy(conv(gb)), "labels": torch.from_numpy(rng.integers(0, n_cls, ng)),
             "iscrowd": torch.from_numpy((rng.random(ng) < 0.15).astype(np.int64))}
        if nd and ng:
            p["labels"][: min(nd, ng)] = t["labels"][: min(nd, ng)]
        if masks:
            p["masks"], t["masks"] = mk(db), mk(gb)
        out.append(([p], [t]))
    return out


def _same(ours: dict, ref: dict):
    assert set(ours) == set(ref), set(ours) ^ set(ref)
    for k, v in ref.items():
        if isinstance(v, dict):
            continue
        a, b = np.asarray(ours[k], float), np.asarray(v, float)
        assert a.shape == b.shape and np.allclose(a, b, rtol=0, atol=1e-6), (k, a, b)


@pytest.mark.parametrize("kw", [
    {},
    {"box_format": "xywh", "class_metrics": True},
    {"box_format": "cxcywh", "average": "micro"},
    {"iou_thresholds": [0.5, 0.75], "max_detection_thresholds": [1, 2, 5], "extended_summary": True},
    {"iou_type": "segm"},
    {"iou_type": ("bbox", "segm"), "class_metrics": True},
])
def test_same_calls_same_numbers_as_torchmetrics(reference, kw):
    fmt = kw.get("box_format", "xyxy")
    masks = "segm" in (kw.get("iou_type", "bbox"),) or "segm" in kw.get("iou_type", ())
    ref, ours = reference(**kw), MeanAveragePrecision(**kw)
    # torchmetrics says when an image has more detections than the largest max_detection_thresholds
    few = max(kw.get("max_detection_thresholds", [100])) < 100
    with pytest.warns(UserWarning, match="more than 5 detections in a single image") if few else nullcontext():
        for preds, target in _batches(7, masks=masks, fmt=fmt):
            ref.update(preds, target)
            ours.update(preds, target)
        r, o = ref.compute(), ours.compute()
    _same(o, r)
    assert float(o["map_50" if "bbox_map" not in o else "bbox_map_50"]) > 0.05  # map is -1 without maxDets 100, as there
    ours.reset()
    assert ours.detection_box == [] and ours.groundtruth_mask == []


def test_nothing_updated_gives_minus_one_as_torchmetrics(reference):
    with pytest.warns(UserWarning, match="called before the ``update`` method"):  # torchmetrics' own warning
        r = reference().compute()
    with pytest.warns(UserWarning, match="called before the ``update`` method"):  # ours too, through Metric
        o = MeanAveragePrecision().compute()
    _same(o, r)


@pytest.mark.parametrize("dtype, accepted", [(torch.float32, False), (torch.float64, False), (torch.int64, False),
                                             (torch.uint8, True), (torch.bool, True)])
def test_mask_dtypes_accepted_as_torchmetrics_accepts_them(reference, dtype, accepted):
    """Sigmoid outputs (0.7) are refused, as torchmetrics 1.9's encoder refuses them, in one line that
    says to threshold them (before: cast to all-zero masks, map 0.0 without a word)."""
    m = torch.zeros(1, 10, 10)
    m[0, 2:6, 2:6] = 0.7 if dtype.is_floating_point else 1
    preds = [{"masks": m.to(dtype), "scores": torch.tensor([0.9]), "labels": torch.tensor([0])}]
    target = [{"masks": m > 0.5, "labels": torch.tensor([0])}]
    ref, ours = reference(iou_type="segm"), MeanAveragePrecision(iou_type="segm")
    if accepted:
        ref.update(preds, target)
        ours.update(preds, target)
        _same(ours.compute(), ref.compute())
        assert float(ours.compute()["map"]) == 1.0
        return
    with pytest.raises(ValueError, match="Buffer dtype mismatch"):  # torchmetrics' (pycocotools') refusal
        ref.update(preds, target)
    with pytest.raises(InputError, match=rf"preds\[0\].masks: expected boolean masks .*got {dtype}") as e:
        ours.update(preds, target)
    assert "\n" not in str(e.value)
    empty = {"masks": preds[0]["masks"][:0], "scores": torch.zeros(0), "labels": torch.zeros(0, dtype=torch.int64)}
    ours.update([empty], target)  # no mask to encode: no dtype to refuse (torchmetrics encodes none either)
    ref.update([empty], target)
    _same(ours.compute(), ref.compute())


def test_input_mistakes_are_one_line():
    m = MeanAveragePrecision()
    with pytest.raises(InputError, match="same length, but got 1 and 2"):
        m.update([{}], [{}, {}])
    with pytest.raises(InputError, match=r"contain the `scores` key: preds\[0\] has none"):
        m.update([{"boxes": torch.zeros(0, 4), "labels": torch.zeros(0)}], [{"boxes": torch.zeros(0, 4), "labels": torch.zeros(0)}])
    with pytest.raises(InputError, match="box_format"):
        MeanAveragePrecision(box_format="xyz")


def _ddp_worker(rank, world, port, batches, kw, queue):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        m = MeanAveragePrecision(**kw)
        for i, (p, t) in enumerate(batches):
            if i % world == rank:
                m.update(p, t)
        out = m.compute()
        if rank == 0:
            queue.put({k: np.asarray(v).tolist() for k, v in out.items() if isinstance(v, torch.Tensor)})
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("iou_type", ["bbox", "segm"])
def test_states_are_gathered_across_processes(iou_type):
    """Two gloo processes, each updating half the batches: rank 0 computes what one process
    updating everything computes (masks gathered as torchmetrics gathers them)."""
    import socket

    import torch.multiprocessing as mp

    if not torch.distributed.is_available():
        pytest.skip("torch.distributed is not available")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    batches = _batches(11, masks=iou_type == "segm", n_img=8)
    kw = {"iou_type": iou_type, "class_metrics": True}
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_ddp_worker, args=(r, 2, port, batches, kw, queue)) for r in range(2)]
    for p in procs:
        p.start()
    got = queue.get(timeout=120)
    for p in procs:
        p.join(timeout=60)
    single = MeanAveragePrecision(**kw)
    for p, t in batches:
        single.update(p, t)
    ref = single.compute()
    for k, v in ref.items():
        assert np.allclose(np.asarray(got[k], float), np.asarray(v, float), atol=1e-9), k


def test_moving_the_metric_keeps_the_mask_states(reference):
    batches = _batches(12, masks=True)
    m = MeanAveragePrecision(iou_type="segm")
    for p, t in batches:
        m.update(p, t)
    before = m.compute()
    m = m.to("cpu").double()  # tensors are moved / cast, the RLE tuples stay as they are
    assert isinstance(m.detection_mask[0], tuple)
    _same(m.compute(), before)
