"""detectron2-style evaluators: ``LVISEvaluator`` and ``COCOEvaluator`` with detectron2's constructor,
``reset`` / ``process`` / ``evaluate`` and result keys, scored by the drop-ins of this package.

Swap ``from detectron2.evaluation import LVISEvaluator`` for ``from vistabench.compat.detectron2
import LVISEvaluator`` (same for ``COCOEvaluator``). detectron2 is not needed: the dataset's metadata
(``json_file``, optionally ``thing_dataset_id_to_contiguous_id`` and ``thing_classes``) comes from
``metadata=`` (a dict or an object) or ``json_file=``; without them, detectron2's ``MetadataCatalog``
is asked when detectron2 is installed, else ``dataset_name`` is read as the JSON path.
Without a mapping, contiguous class i is category ``i + 1`` for LVIS (detectron2's LVIS rule) and
the i-th smallest category id for COCO (what detectron2's COCO loader registers).

``evaluate()`` returns ``{"bbox": {...}, "segm": {...}, "keypoints": {...}, "box_proposals": {...}}``
as detectron2: AP keys ×100 (``AP AP50 AP75 APs APm APl``, LVIS also ``APr APc APf``; keypoints
``AP AP50 AP75 APm APl`` by OKS with ``kpt_oks_sigmas``; COCO ``AP-<class>`` when class names are
known), proposal recall ``AR@100 ARs@100 ... AR@1000 ...`` ×100, plus
``AP^Fixed``, ``AP50^Fixed`` … and ``AP^Pool`` … (Dave et al.; see docs/detection.md). torch is
imported only if the outputs are tensors (never by ``import vistabench.metrics``).
"""

from __future__ import annotations

import copy
import json
import logging
import os
import warnings
from collections import OrderedDict
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Sequence

import numpy as np

from ..atomic import write_text
from ..errors import InputAssertionError, InputError, InputKeyError, InputTypeError
from ..metrics.detection import evaluate_detections
from .evaluation import mean_defined

__all__ = ["LVISEvaluator", "COCOEvaluator", "instances_to_json", "box_proposal_recall"]

logger = logging.getLogger(__name__)
_AP_KEYS = ("AP", "AP50", "AP75", "APs", "APm", "APl")
_KEYPOINT_KEYS = ("AP", "AP50", "AP75", "APm", "APl")
_AREAS = {"all": "", "small": "s", "medium": "m", "large": "l"}
_AREA_RANGES = {"all": (0, 1e5 ** 2), "small": (0, 32 ** 2), "medium": (32 ** 2, 96 ** 2), "large": (96 ** 2, 1e5 ** 2)}


def _array(x: Any) -> np.ndarray:
    """A tensor (any device) or array-like as a numpy array (dtype kept)."""
    x = getattr(x, "tensor", x)
    for attr in ("detach", "cpu"):
        if hasattr(x, attr):
            x = getattr(x, attr)()
    return np.asarray(x.numpy() if hasattr(x, "numpy") else x)


def _field(inst: Any, names: Sequence[str]) -> Any:
    for n in names:
        v = inst.get(n) if isinstance(inst, dict) else getattr(inst, n, None)
        if v is not None:
            return v
    return None


def instances_to_json(instances: Any, img_id: int, where: str = "outputs") -> list[dict]:
    """detectron2's ``instances_to_coco_json``: XYXY boxes -> XYWH (in the boxes' dtype), scores,
    contiguous classes, masks as RLE with str counts. ``instances``: an ``Instances``-like object
    (``pred_boxes``, ``scores``, ``pred_classes``, ``pred_masks``) or a dict (``boxes``, ``scores``,
    ``labels``, ``masks``; ``pred_keypoints`` / ``keypoints`` (N, K, 3) become ``keypoints`` with
    0.5 subtracted from x and y in their dtype, as detectron2). Shapes are checked (one line naming
    the field)."""
    boxes = _field(instances, ("pred_boxes", "boxes"))
    scores = _field(instances, ("scores",))
    classes = _field(instances, ("pred_classes", "labels"))
    if boxes is None or scores is None or classes is None:
        raise InputError(f"{where}.instances: needs pred_boxes, scores and pred_classes (or boxes, scores, labels)")
    b, s, c = _array(boxes), _array(scores).reshape(-1), _array(classes).reshape(-1)
    n = len(s)
    if b.size == 0 and n == 0:
        return []
    if b.ndim != 2 or b.shape[1] != 4:
        raise InputError(f"{where}.instances.pred_boxes: expected (N, 4) XYXY boxes, got shape {tuple(b.shape)}")
    if len(b) != n or len(c) != n:
        raise InputError(f"{where}.instances: {len(b)} boxes, {n} scores and {len(c)} classes (expected one each)")
    if c.dtype.kind not in "iu":
        raise InputError(f"{where}.instances.pred_classes: expected integer class indices, got {c.dtype}")
    xywh = b.copy()
    xywh[:, 2:] = b[:, 2:] - b[:, :2]
    masks = _field(instances, ("pred_masks", "masks"))
    rles = None
    if masks is not None:
        import pycocotools.mask as mask_util

        m = _array(masks)
        if m.ndim != 3 or len(m) != n:
            raise InputError(f"{where}.instances.pred_masks: expected {n} masks (N, H, W), got shape {tuple(m.shape)}")
        rles = [mask_util.encode(np.array(x[:, :, None], order="F", dtype="uint8"))[0] for x in m]
        for r in rles:
            r["counts"] = r["counts"].decode("utf-8")
    kps = _field(instances, ("pred_keypoints", "keypoints"))
    kp_lists = None
    if kps is not None:
        kp = _array(kps).copy()
        if kp.ndim != 3 or len(kp) != n or kp.shape[2] != 3:
            raise InputError(f"{where}.instances.pred_keypoints: expected {n} keypoint sets (N, K, 3), got shape "
                             f"{tuple(kp.shape)}")
        kp[:, :, :2] -= kp.dtype.type(0.5)  # detectron2: pixel-index coordinates, as the annotations
        kp_lists = kp.reshape(n, -1).tolist()
    out = []
    for k, (bx, sc, cl) in enumerate(zip(xywh.tolist(), s.tolist(), c.tolist())):
        r = {"image_id": img_id, "category_id": cl, "bbox": bx, "score": sc}
        if rles is not None:
            r["segmentation"] = rles[k]
        if kp_lists is not None:
            r["keypoints"] = kp_lists[k]
        out.append(r)
    return out


def box_proposal_recall(predictions: list[dict], gt_boxes_of, *, area: str = "all", limit: int | None = None) -> dict:
    """detectron2's ``_evaluate_box_proposals`` (float32, greedy best-covered matching): recall at
    IoU 0.50:0.05:0.95 and their mean ``ar``. ``gt_boxes_of(image_id)`` gives (XYWH boxes, areas)."""
    lo, hi = _AREA_RANGES[area]
    overlaps_all, num_pos = [], 0
    for pred in predictions:
        boxes = pred["proposals"]
        gtb, gta = gt_boxes_of(pred["image_id"])
        if len(gtb) == 0 or len(boxes) == 0:
            continue
        g = np.asarray(gtb, np.float32).reshape(-1, 4)
        g = np.concatenate([g[:, :2], g[:, :2] + g[:, 2:]], 1)
        ga = np.asarray(gta, np.float32)
        g = g[(ga >= lo) & (ga <= hi)]
        num_pos += len(g)
        if len(g) == 0:
            continue
        p = boxes[:limit] if limit is not None else boxes
        ov = _pairwise_iou(p, g)
        got = np.zeros(len(g), np.float32)
        for j in range(min(len(p), len(g))):
            best_p = ov.argmax(axis=0)
            best = ov.max(axis=0)
            gi = int(best.argmax())
            got[j] = best[gi]
            ov[best_p[gi], :] = -1
            ov[:, gi] = -1
        overlaps_all.append(got)
    ov = np.sort(np.concatenate(overlaps_all)) if overlaps_all else np.zeros(0, np.float32)
    thr = np.arange(0.5, 0.95 + 1e-5, 0.05, dtype=np.float32)
    recalls = np.array([np.float32((ov >= t).sum()) / np.float32(num_pos) if num_pos else np.float32("nan")
                        for t in thr], np.float32)
    return {"ar": recalls.mean(dtype=np.float32), "recalls": recalls, "thresholds": thr, "num_pos": num_pos}


def _pairwise_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """detectron2's ``pairwise_iou`` of XYXY boxes (float32)."""
    a, b = a.astype(np.float32), b.astype(np.float32)
    wh = np.minimum(a[:, None, 2:], b[:, 2:]) - np.maximum(a[:, None, :2], b[:, :2])
    inter = np.clip(wh, 0, None).prod(axis=2)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(inter > 0, inter / (area_a[:, None] + area_b - inter), np.float32(0)).astype(np.float32)


def _metadata(dataset_name: str, metadata: Any, json_file: str | None) -> Any:
    if metadata is not None:
        return SimpleNamespace(**metadata) if isinstance(metadata, dict) else metadata
    if json_file is not None:
        return SimpleNamespace(json_file=str(json_file))
    try:
        from detectron2.data import MetadataCatalog  # optional

        return MetadataCatalog.get(dataset_name)
    except ImportError:
        pass
    if Path(str(dataset_name)).is_file():
        return SimpleNamespace(json_file=str(dataset_name))
    raise InputError(f"dataset_name: {dataset_name!r} is not a registered dataset (detectron2 is not installed) nor a "
                     f"JSON file; pass metadata={{'json_file': ...}} or json_file=...")


class _Evaluator:
    _kind = ""
    _task_names: tuple[str, ...] = ("bbox", "segm")

    def __init__(self, dataset_name: str, tasks: Sequence[str] | None = None, distributed: bool = True,
                 output_dir: str | None = None, *, max_dets_per_image: int | None = None, metadata: Any = None,
                 json_file: str | os.PathLike | None = None):
        if tasks is not None and not isinstance(tasks, (list, tuple, set)):
            logger.warning("tasks: a config object is not supported; tasks are inferred from the predictions")
            tasks = None
        for t in tasks or ():
            if t not in self._task_names:
                raise InputError(f"tasks: expected one of {list(self._task_names)}, got {t!r}")
        if max_dets_per_image is not None and (isinstance(max_dets_per_image, bool)
                                               or not isinstance(max_dets_per_image, (int, np.integer))
                                               or max_dets_per_image < 1):
            raise InputError(f"max_dets_per_image: expected a positive integer, got {max_dets_per_image!r}")
        self._tasks = tuple(tasks) if tasks else None
        self._distributed = distributed
        self._output_dir = output_dir
        self._metadata = _metadata(dataset_name, metadata, json_file)
        if getattr(self._metadata, "json_file", None) is None:
            raise InputError("metadata: needs 'json_file' (the annotation file of the dataset)")
        self._api = self._load_api(self._metadata.json_file)
        self._max_dets_per_image = max_dets_per_image
        self._predictions: list[dict] = []
        self._warned_unread = False

    def reset(self) -> None:
        self._predictions = []
        self._warned_unread = False

    def process(self, inputs: Sequence[dict], outputs: Sequence[dict]) -> None:
        for i, (inp, out) in enumerate(zip(inputs, outputs)):
            if not isinstance(inp, dict) or "image_id" not in inp:
                raise InputError(f"inputs[{i}]: lacks 'image_id' (each input dict needs the dataset's image id)")
            image_id = inp["image_id"]
            if isinstance(image_id, bool) or not isinstance(image_id, (int, np.integer)):
                raise InputError(f"inputs[{i}].image_id: expected the dataset's integer image id, got {image_id!r}")
            pred: dict[str, Any] = {"image_id": int(image_id)}
            if not isinstance(out, dict):
                raise InputTypeError(f"outputs[{i}]: expected a dict ({{'instances': ...}} or {{'proposals': ...}}), "
                                     f"got {type(out).__name__}")
            if "instances" in out:
                pred["instances"] = instances_to_json(out["instances"], pred["image_id"], f"outputs[{i}]")
            if "proposals" in out:
                p = out["proposals"]
                boxes = _array(_field(p, ("proposal_boxes", "boxes"))).astype(np.float32)
                if not (boxes.ndim == 2 and boxes.shape[1] == 4) and boxes.size:
                    raise InputError(f"outputs[{i}].proposals.proposal_boxes: expected (N, 4) XYXY boxes, got shape "
                                     f"{tuple(boxes.shape)}")
                boxes = boxes.reshape(-1, 4)
                logits = _array(_field(p, ("objectness_logits", "scores"))).reshape(-1)
                if len(logits) != len(boxes):
                    raise InputError(f"outputs[{i}].proposals: {len(boxes)} boxes but {len(logits)} objectness_logits")
                pred["proposals"] = boxes[np.argsort(-logits, kind="stable")]
            if len(pred) > 1:  # as detectron2: an output with neither 'instances' nor 'proposals' is not kept
                self._predictions.append(pred)
            elif not self._warned_unread:  # detectron2 says nothing until evaluate(); say which keys came
                self._warned_unread = True
                logger.warning("[%s] outputs[%d] has neither 'instances' nor 'proposals' (its keys: %s): it is not "
                               "evaluated; detectron2's evaluators read only those two keys", type(self).__name__, i,
                               sorted(map(str, out)))

    def _gather(self) -> list[dict] | None:
        if self._distributed:
            try:
                import torch.distributed as dist  # only when torch is installed and a group is running
            except ImportError:
                dist = None
            if dist is not None and dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
                parts: list = [None] * dist.get_world_size()
                dist.all_gather_object(parts, self._predictions)
                if dist.get_rank() != 0:
                    return None
                return [p for part in parts for p in part]
        return self._predictions

    def evaluate(self, img_ids: Sequence[int] | None = None) -> dict | None:
        predictions = self._gather()
        if predictions is None:
            return None
        if len(predictions) == 0:
            logger.warning("[%s] Did not receive valid predictions.", type(self).__name__)
            return {}
        results: OrderedDict[str, dict] = OrderedDict()
        if "proposals" in predictions[0]:
            results["box_proposals"] = self._eval_box_proposals(predictions)
        if "instances" in predictions[0]:
            dets = [r for p in predictions for r in p.get("instances", [])]
            self._map_categories(dets)
            if self._output_dir:
                write_text(Path(self._output_dir) / f"{self._kind}_instances_results.json", json.dumps(dets),
                           what="output_dir results")
            tasks = self._tasks or (("bbox",) + (("segm",) if any("segmentation" in d for d in dets) else ())
                                    + (("keypoints",) if any("keypoints" in d for d in dets) else ()))
            for task in sorted(tasks):
                results[task] = self._eval_task(dets, task, img_ids) if dets else self._no_predictions(task)
        return copy.deepcopy(results)

    def _eval_box_proposals(self, predictions: list[dict]) -> dict:
        res = {}
        for limit in (100, 1000):
            for area, suffix in _AREAS.items():
                stats = box_proposal_recall(predictions, self._gt_boxes_of, area=area, limit=limit)
                res[f"AR{suffix}@{limit:d}"] = float(stats["ar"].item() * 100)
        return res

    def _mapping(self) -> dict[int, int]:
        m = getattr(self._metadata, "thing_dataset_id_to_contiguous_id", None)
        return {v: k for k, v in m.items()} if m else self._default_mapping()

    def _map_categories(self, dets: list[dict]) -> None:
        rev = self._mapping()
        known = set(self._cat_ids())
        if rev and not known & set(rev.values()):
            raise InputError(f"metadata.thing_dataset_id_to_contiguous_id: none of its {len(rev)} dataset ids "
                             f"(first: {next(iter(rev.values()))}) is a category of the annotation file; nothing "
                             f"could be scored")
        if self._kind == "lvis" and getattr(self._metadata, "thing_dataset_id_to_contiguous_id", None) is None:
            for r in dets:  # detectron2's LVIS rule adds 1 to any class (-1 -> 0); lvis-api never scores a
                r["category_id"] += 1  # category the dataset lacks (LVISResults warns how many)
            return
        for i, r in enumerate(dets):
            c = r["category_id"]
            if c not in rev:  # detectron2 asserts ``category_id < num_classes``
                raise InputAssertionError(f"pred_classes: class index {c} (detection {i}, image {r['image_id']}) is "
                                          f"outside the {len(rev)} classes 0..{len(rev) - 1} of the dataset")
            r["category_id"] = rev[c]

    def _no_predictions(self, task: str) -> dict:
        logger.warning("No predictions from the model!")
        return {k: float("nan") for k in (_KEYPOINT_KEYS if task == "keypoints" else self._keys())}

    def _extra(self, gt, dets, task: str, sigmas: Any = None) -> dict:
        ev = evaluate_detections(gt, dets, iou_type=task, variants=("fixed", "pool"), kpt_oks_sigmas=sigmas)
        out = {}
        for v in ("fixed", "pool"):
            for k in ("AP", "AP50", "AP75", "APr", "APc", "APf"):
                x = ev.results[v].get(k, float("nan"))
                out[f"{k}^{v.capitalize()}"] = float(x * 100)
        return out


class LVISEvaluator(_Evaluator):
    """detectron2's ``LVISEvaluator(dataset_name, tasks=None, distributed=True, output_dir=None, *,
    max_dets_per_image=None)`` (+ ``metadata=`` / ``json_file=``)."""

    _kind = "lvis"

    def _load_api(self, path):
        from .lvis import LVIS

        api = LVIS(path)
        self._do_evaluation = len(api.get_ann_ids()) > 0
        return api

    def _keys(self):
        return _AP_KEYS + ("APr", "APc", "APf")

    def _default_mapping(self) -> dict[int, int]:
        return {c - 1: c for c in self._api.get_cat_ids()}  # detectron2: category_id += 1

    def _cat_ids(self) -> list:
        return self._api.get_cat_ids()

    def _gt_boxes_of(self, image_id):
        anns = self._api.load_anns(self._api.get_ann_ids(img_ids=[image_id]))
        return [a["bbox"] for a in anns], [a["area"] for a in anns]

    def _eval_task(self, dets: list[dict], task: str, img_ids) -> dict:
        from .lvis import LVISEval, LVISResults

        if not self._do_evaluation:
            return {}
        dets = copy.deepcopy(dets)
        if task == "segm":
            for c in dets:
                c.pop("bbox", None)
        max_dets = 300 if self._max_dets_per_image is None else self._max_dets_per_image
        e = LVISEval(self._api, LVISResults(self._api, copy.deepcopy(dets), max_dets=max_dets), task)
        if img_ids is not None:
            e.params.img_ids = list(img_ids)
        e.run()
        e.print_results()
        r = e.get_results()
        out = {k: float(r[k] * 100) for k in self._keys()}
        gt = self._api.ground_truth(task == "segm")
        with warnings.catch_warnings():  # the same results again: their warnings were given above
            warnings.simplefilter("ignore")
            every = LVISResults(self._api, dets, max_dets=-1).detections(gt)
        out.update(self._extra(gt, every, task))
        return out


class COCOEvaluator(_Evaluator):
    """detectron2's ``COCOEvaluator(dataset_name, tasks=None, distributed=True, output_dir=None, *,
    max_dets_per_image=None, use_fast_impl=True, kpt_oks_sigmas=(), allow_cached_coco=True)``
    (+ ``metadata=`` / ``json_file=``); ``use_fast_impl`` / ``allow_cached_coco`` change nothing
    here. The keypoints task (predictions with ``pred_keypoints``) is OKS with ``kpt_oks_sigmas``
    (default COCO's 17) and pycocotools' keypoint maxDets 20, whatever ``max_dets_per_image``."""

    _kind = "coco"
    _task_names = ("bbox", "segm", "keypoints")

    def __init__(self, dataset_name: str, tasks=None, distributed: bool = True, output_dir=None, *,
                 max_dets_per_image: int | None = None, use_fast_impl: bool = True, kpt_oks_sigmas=(),
                 allow_cached_coco: bool = True, metadata: Any = None, json_file=None):
        self._kpt_oks_sigmas = None if kpt_oks_sigmas is None or len(kpt_oks_sigmas) == 0 else \
            np.asarray(kpt_oks_sigmas, np.float64)
        super().__init__(dataset_name, tasks, distributed, output_dir, max_dets_per_image=max_dets_per_image,
                         metadata=metadata, json_file=json_file)
        self._max_dets = [1, 10, 100] if max_dets_per_image is None else [1, 10, int(max_dets_per_image)]

    def _load_api(self, path):
        from .coco import COCO

        return COCO(path)

    def _keys(self):
        return _AP_KEYS

    def _default_mapping(self) -> dict[int, int]:
        return dict(enumerate(sorted(self._api.getCatIds())))  # detectron2's load_coco_json

    def _cat_ids(self) -> list:
        return self._api.getCatIds()

    def _gt_boxes_of(self, image_id):
        anns = self._api.loadAnns(self._api.getAnnIds(imgIds=image_id))
        if not all("iscrowd" in a for a in anns):  # detectron2 reads obj["iscrowd"]: a KeyError there
            a = next(a for a in anns if "iscrowd" not in a)
            raise InputKeyError(f"metadata.json_file: annotation id {a.get('id')!r} (image {image_id}) lacks "
                                f"'iscrowd' (box proposals leave crowd regions out)")
        anns = [a for a in anns if a["iscrowd"] == 0]
        return [a["bbox"] for a in anns], [a["area"] for a in anns]

    def _eval_task(self, dets: list[dict], task: str, img_ids) -> dict:
        from .coco import COCOeval, detections_of

        dets = copy.deepcopy(dets)
        if task == "segm":
            for c in dets:
                c.pop("bbox", None)
        coco_dt = self._api.loadRes(dets)
        e = COCOeval(self._api, coco_dt, task)
        kp = task == "keypoints"
        if not kp:  # detectron2 leaves the keypoint maxDets (20) as pycocotools sets them
            e.params.maxDets = list(self._max_dets)
        if img_ids is not None:
            e.params.imgIds = list(img_ids)
        if kp:
            _check_keypoint_counts(self, e, dets)
        e.evaluate()
        e.accumulate()
        e.summarize()
        if self._max_dets[2] != 100 and not kp:  # detectron2's COCOevalMaxDets: AP at the custom limit
            e.stats[0] = mean_defined(e.eval["precision"][:, :, :, 0, e.params.maxDets.index(self._max_dets[2])])
        keys = _KEYPOINT_KEYS if kp else _AP_KEYS
        out = {k: float(e.stats[i] * 100 if e.stats[i] >= 0 else "nan") for i, k in enumerate(keys)}
        names = getattr(self._metadata, "thing_classes", None)
        if names is not None and len(names) > 1:
            prec = e.eval["precision"]
            if len(names) != prec.shape[2]:
                raise InputError(f"metadata.thing_classes: {len(names)} names for {prec.shape[2]} categories")
            for idx, name in enumerate(names):
                p = prec[:, :, idx, 0, -1]
                p = p[p > -1]
                out[f"AP-{name}"] = float((np.mean(p) if p.size else float("nan")) * 100)
        gt = self._api.ground_truth(task == "segm", with_keypoints=kp)
        out.update(self._extra(gt, detections_of(coco_dt, gt, task)[0], task,
                               e.params.kpt_oks_sigmas if kp else None))
        return out


def _check_keypoint_counts(ev: COCOEvaluator, e: Any, dets: list[dict]) -> None:
    """detectron2's check that the sigmas, the results and the ground truth have as many keypoints
    (its assertion, as one line); sets ``params.kpt_oks_sigmas`` from the evaluator's."""
    if ev._kpt_oks_sigmas is not None:
        e.params.kpt_oks_sigmas = ev._kpt_oks_sigmas.copy()
    n_dt = len(dets[0].get("keypoints", ())) // 3
    first = next(iter(ev._api.anns.values()), {})
    n_gt = len(first.get("keypoints", ())) // 3
    n_oks = len(e.params.kpt_oks_sigmas)
    if not n_oks == n_dt == n_gt:
        raise InputError(f"kpt_oks_sigmas: {n_oks} sigmas, but the predictions have {n_dt} keypoints and the "
                         f"ground truth {n_gt}; give the dataset's own kpt_oks_sigmas")
