"""COCO / LVIS v1 JSON readers and a results writer for detection evaluation.

Ground truth is read whole (it is small next to results). Results files are *streamed*: the JSON
array is parsed in chunks of complete objects and each chunk is turned into compact arrays at once,
so memory grows with the detections kept (about 60 bytes each for boxes), not with the file's
dict-per-detection representation.

Bad input raises :class:`~vistabench.errors.InputError` with one line naming the file and the
problem: malformed JSON, missing fields, unknown image or category ids, NaN/inf scores, negative
box sizes, or a results file whose images are not in the ground truth (another dataset). The
ground-truth reader lives in :mod:`vistabench.data.coco_ground_truth` (re-exported here).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

import msgspec
import numpy as np

from ..errors import InputError
from ..metrics.detection import Detections, GroundTruth, check_segmentations, keypoint_array, keypoint_extent, to_rle
from .coco_stream import CHUNK_BYTES, ResultStream, element_boundary

from .coco_ground_truth import read_ground_truth, source_name

__all__ = ["read_ground_truth", "read_result_columns", "read_results", "write_result_columns", "write_results"]


def _columns(objs: list, offset: int, what: str, name: str, iou_type: str) -> dict[str, Any]:
    try:
        iid = [o["image_id"] for o in objs]
        cid = [o["category_id"] for o in objs]
        score = [o["score"] for o in objs]
    except (KeyError, TypeError) as exc:
        bad = next(i for i, o in enumerate(objs) if not isinstance(o, dict) or any(
            k not in o for k in ("image_id", "category_id", "score")))
        raise InputError(f"{what} {name}: detection {offset + bad} lacks 'image_id', 'category_id' or "
                         f"'score' (got {str(objs[bad])[:80]})") from exc
    seg = None
    if iou_type == "segm":  # a result without one is its box's rectangle (below), as COCO.loadRes makes it
        seg = [o.get("segmentation") for o in objs]
    kp = kp_area = None
    if iou_type == "keypoints":
        kp = keypoint_array([o.get("keypoints") for o in objs], f"{what} {name}", "detection")
        first = objs[0].get("bbox")
        if first is None or (isinstance(first, list) and first == []):
            # as COCO.loadRes: the first result has no box, so every box and area is its keypoints' extent
            kbox, kp_area = keypoint_extent(kp)
            objs = [{"bbox": b} for b in kbox.tolist()]
    box = [o.get("bbox") for o in objs]
    missing = [i for i, b in enumerate(box) if b is None]
    if missing and iou_type == "keypoints":
        raise InputError(f"{what} {name}: detection {offset + missing[0]} lacks 'bbox' (the first result has one, "
                         f"so every result needs one)")
    if missing:
        mbox, marea = _boxes_from_masks(seg, missing, offset, what, name)
        for j, i in enumerate(missing):
            box[i] = mbox[j].tolist()
    try:
        bbox = np.asarray(box, dtype=np.float64).reshape(len(objs), 4)
        sc = np.asarray(score)
        if sc.dtype.kind not in "iuf":
            raise TypeError("score")
        sc = sc.astype(np.float64)
    except (ValueError, TypeError) as exc:
        raise InputError(f"{what} {name}: detections {offset}..{offset + len(objs) - 1}: every 'bbox' must be "
                         f"4 numbers and every 'score' a number") from exc
    try:
        iid_a = np.asarray(iid)
        cid_a = np.asarray(cid)
        if iid_a.dtype.kind not in "iu" or cid_a.dtype.kind not in "iu":
            raise TypeError("ids")
        iid_a, cid_a = iid_a.astype(np.int64), cid_a.astype(np.int64)
    except (ValueError, TypeError, OverflowError) as exc:
        raise InputError(f"{what} {name}: detections {offset}..{offset + len(objs) - 1}: 'image_id' and "
                         f"'category_id' must be integers") from exc
    area = kp_area
    if missing:  # as pycocotools/lvis-api: box area when the result has a box, else mask area
        area = bbox[:, 2] * bbox[:, 3]
        area[missing] = marea
    c = _check({"image_id": iid_a, "category_id": cid_a, "bbox": bbox, "score": sc}, offset, what, name, area)
    c["keypoints"] = kp
    c["rect"] = _rectangles(seg, bbox) if iou_type == "segm" else 0
    c["seg"] = seg
    return c


def _rectangles(seg: list, bbox: np.ndarray) -> int:
    """Give each result without a mask its box's rectangle polygon, as ``COCO.loadRes`` does for
    results with a box (their boxes are known here: a result with neither was refused); how many."""
    absent = [i for i, x in enumerate(seg) if x is None]
    for i in absent:
        x, y, w, h = (float(v) for v in bbox[i])
        seg[i] = [[x, y, x, y + h, x + w, y + h, x + w, y]]
    return len(absent)


def _whole_list(p: Path, what: str, name: str) -> list:
    """A results file decoded whole as a list of dicts (msgspec; the standard library for NaN)."""
    data = p.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        try:
            out = msgspec.json.decode(data)
        except msgspec.DecodeError:
            out = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{what} {name}: malformed JSON ({exc})") from None
    if not isinstance(out, list):
        raise InputError(f"{what} {name}: expected a JSON list of detections, got {type(out).__name__}")
    return out


def _struct_checked(c: dict[str, Any], offset: int, what: str, name: str, iou_type: str) -> dict[str, Any]:
    """Finish msgspec columns: masks where segm needs them; boxes (and areas) from masks where a
    result has none, as pycocotools / lvis-api do; then :func:`_check`."""
    seg, missing = c["seg"], c.pop("missing")
    if iou_type == "segm" and seg is None:
        raise InputError(f"{what} {name}: detection {offset} lacks 'segmentation' (needed for segm)")
    area = None
    if missing:
        mbox, marea = _boxes_from_masks(seg, missing, offset, what, name)
        area = c["bbox"][:, 2] * c["bbox"][:, 3]
        c["bbox"][missing] = mbox
        area[missing] = marea
    out = _check(c, offset, what, name, area)
    out["rect"] = _rectangles(seg, out["bbox"]) if iou_type == "segm" else 0
    return out


class _MasksNeeded(InputError):
    """A result without a box was read without its mask (bbox mode): the file is read again with masks."""


def _boxes_from_masks(seg: list | None, missing: list[int], offset: int, what: str,
                      name: str) -> tuple[np.ndarray, np.ndarray]:
    """Boxes and mask areas of the results at ``missing`` that have no box, from their RLE masks
    (pycocotools ``toBbox`` / ``area``, as its ``loadRes`` derives them), after checking the masks."""
    if seg is None:  # the masks were not decoded (bbox mode): read again with them (read_result_columns)
        raise _MasksNeeded(f"{what} {name}: detection {offset + missing[0]} lacks 'bbox'")
    if any(seg[i] is None for i in missing):
        i = next(i for i in missing if seg[i] is None)
        raise InputError(f"{what} {name}: detection {offset + i} lacks 'bbox' and 'segmentation' (its box comes "
                         f"from one of them)")
    _check_masks(seg, missing, offset, what, name)  # before pycocotools reads them
    poly = [i for i in missing if isinstance(seg[i], list)]
    if poly:
        raise InputError(f"{what} {name}: detection {offset + poly[0]} lacks 'bbox' and its mask is a polygon "
                         f"(its box needs the image size): give a 'bbox' or an RLE mask")
    import pycocotools.mask as mask_utils

    rles = [to_rle(seg[i], int(seg[i]["size"][0]), int(seg[i]["size"][1])) for i in missing]
    # pycocotools' list calls count in a uint8: 255 at a time
    parts = [rles[s: s + 255] for s in range(0, len(rles), 255)]
    return (np.concatenate([np.asarray(mask_utils.toBbox(p), np.float64).reshape(-1, 4) for p in parts]),
            np.concatenate([np.asarray(mask_utils.area(p), np.float64).reshape(-1) for p in parts]))


def _check_masks(seg: list, which: list[int] | None, offset: int, what: str, name: str) -> None:
    """:func:`~vistabench.metrics.detection.check_segmentations` of ``seg[which]`` (None: every mask
    present), named by the detection's position in the file."""
    idx = [i for i, x in enumerate(seg) if x is not None] if which is None else which
    if not idx:
        return
    try:
        check_segmentations(seg if len(idx) == len(seg) else [seg[i] for i in idx], what="detection",
                            offset=offset, positions=np.asarray(idx, np.int64))
    except InputError as exc:
        raise InputError(f"{what} {name}: {exc}") from exc


def _check(c: dict[str, Any], offset: int, what: str, name: str, area: np.ndarray | None = None) -> dict[str, Any]:
    """Finite scores and boxes, non-negative sizes; adds ``area`` (box area unless given)."""
    sc, bbox = c["score"], c["bbox"]
    if np.isfinite(sc).all() and np.isfinite(bbox).all() and not (bbox[:, 2:] < 0).any():  # the usual case
        c["area"] = bbox[:, 2] * bbox[:, 3] if area is None else area
        return c
    bad = np.flatnonzero(~np.isfinite(sc))
    if bad.size:
        raise InputError(f"{what} {name}: detection {offset + int(bad[0])} has a non-finite score "
                         f"({sc[bad[0]]}); {bad.size} such scores in this chunk")
    bad = np.flatnonzero(~np.all(np.isfinite(bbox), axis=1))
    if bad.size:
        raise InputError(f"{what} {name}: detection {offset + int(bad[0])} has a non-finite bbox {bbox[bad[0]].tolist()}")
    bad = np.flatnonzero((bbox[:, 2] < 0) | (bbox[:, 3] < 0))
    if bad.size:
        raise InputError(f"{what} {name}: detection {offset + int(bad[0])} has a negative width or height "
                         f"(bbox {bbox[bad[0]].tolist()})")
    c["area"] = bbox[:, 2] * bbox[:, 3] if area is None else area
    return c


def read_result_columns(
    source: str | os.PathLike[str] | list,
    *,
    iou_type: Literal["bbox", "segm", "keypoints"] = "bbox",
    chunk_bytes: int = CHUNK_BYTES,
    keep_segmentation: bool | None = None,
    check_masks: bool = True,
    two_processes: bool | None = None,
) -> dict[str, Any]:
    """Read a results file (streamed) into columns keyed by the file's own ids (see
    :func:`_read_result_columns`). Results without ``bbox`` get their mask's box in every mode, as
    ``COCO.loadRes`` gives them: in bbox mode such a file is read a second time, with its masks."""
    kw = dict(iou_type=iou_type, chunk_bytes=chunk_bytes, check_masks=check_masks)
    try:
        return _read_result_columns(source, keep_segmentation=keep_segmentation, two_processes=two_processes, **kw)
    except _MasksNeeded:
        out = _read_result_columns(source, keep_segmentation=True, two_processes=False, **kw)
        if not keep_segmentation:
            out["segmentation"] = None
        return out


def _read_result_columns(
    source: str | os.PathLike[str] | list,
    *,
    iou_type: Literal["bbox", "segm", "keypoints"] = "bbox",
    chunk_bytes: int = CHUNK_BYTES,
    keep_segmentation: bool | None = None,
    check_masks: bool = True,
    two_processes: bool | None = None,
) -> dict[str, Any]:
    """Read a results file (streamed) into columns keyed by the file's own ids.

    Returns ``{"image_id", "category_id": (N,) int64, "bbox": (N, 4), "score", "area": (N,) float64,
    "segmentation": list or None, "keypoints": (N, K, 3) float64 or None}``. Validates scores
    (finite), boxes (finite, non-negative size), ids (integers) and, with ``check_masks``, the
    masks' form (``check_segmentations``; their sizes need the ground truth:
    :meth:`Detections.from_ids` checks those, and the form with them, so :func:`read_results` passes
    ``check_masks=False``). Masks of results without a box are always checked (their box is derived
    from them). Needs no ground truth (used by ``rerank`` and ``calibrate apply``).

    ``two_processes``: decode the second half of a box-only file in a forked child process while
    this one decodes the first (:mod:`.forked`; the child's columns come back through shared
    memory). None (default): for files of :data:`TWO_PROCESS_MIN_BYTES` or more where forking is
    safe (:func:`~.forked.can_fork`); True: whenever it is safe; False: never. The result, and every
    error message, is the same either way: the child only accelerates; a file the child cannot
    decode whole is read here, in order.

    ``iou_type="keypoints"`` reads every result's ``keypoints`` (one length 3K for all); as
    ``COCO.loadRes``, when the first result has no ``bbox`` every result's box and area are its
    keypoints' extent, else every result needs a box (area: the box's). Such files are small and
    are decoded whole.
    """
    what = "results"
    name = source_name(source)
    cols: list[dict[str, Any]] = []
    if isinstance(source, list):
        chunks: Any = [source]
    elif isinstance(source, (str, os.PathLike)):
        from .._validation import check_json_file

        p = check_json_file(source, what, expected="a COCO/LVIS results JSON file")
        chunks = [_whole_list(p, what, name)] if iou_type == "keypoints" else None
    else:
        raise InputError(f"{what}: expected a path or a list of detections, got {type(source).__name__}")
    want_seg = iou_type == "segm" if keep_segmentation is None else keep_segmentation
    rectangles = [0]
    # a streamed file's chunks are written into columns sized for the most detections the file can
    # hold (pages are only used where written), so the result needs no concatenation (a second copy)
    sink = _ColumnSink(p.stat().st_size // _MIN_DETECTION_BYTES + 1) if chunks is None else None

    def take(objs: Any) -> None:
        offset = sum(len(c["score"]) for c in cols)
        if isinstance(objs, dict):  # decoded by msgspec into columns
            c = _struct_checked(objs, offset, what, name, iou_type)
        else:  # a list of dicts (in memory, or the standard library's reading of a chunk)
            if not objs:
                return
            c = _columns(objs, offset, what, name, iou_type)
            if want_seg and c["seg"] is None:
                c["seg"] = [o.get("segmentation") if isinstance(o, dict) else None for o in objs]
        rectangles[0] += c.pop("rect", 0)
        if want_seg and c["seg"] is None:
            c["seg"] = [None] * len(c["score"])
        if check_masks and c["seg"] is not None:
            _check_masks(c["seg"], None, offset, what, name)
        if sink is not None:
            sink.put(c, offset)
        cols.append(c)

    try:
        if chunks is not None:
            for objs in chunks:
                take(objs)
        else:
            halves = None if want_seg or iou_type == "segm" else _two_halves(p, two_processes)
            if halves is None:
                for objs in ResultStream(p, what, chunk_bytes, with_seg=want_seg):
                    take(objs)
            else:
                _read_in_two(p, what, chunk_bytes, halves, take, cols)
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} {name}: not a UTF-8 JSON file") from exc
    if rectangles[0]:
        import warnings

        warnings.warn(f"{what} {name}: {rectangles[0]} result(s) without 'segmentation' are scored as the rectangles "
                      f"of their boxes, as pycocotools' loadRes makes them (give masks for mask AP)", UserWarning,
                      stacklevel=3)
    if not cols:
        z = np.zeros(0, np.int64)
        return {"image_id": z, "category_id": z.copy(), "bbox": np.zeros((0, 4)), "score": np.zeros(0),
                "area": np.zeros(0), "segmentation": [] if want_seg else None, "keypoints": None}
    # one column at a time, each chunk's piece released as soon as it is copied: the peak is the
    # pieces plus one column, not twice the detections
    n = sum(len(c["score"]) for c in cols)
    out: dict[str, Any] = (sink.columns(n) if sink is not None and sink.holds(n) else
                           {k: np.concatenate([c.pop(k) for c in cols]) for k in _SINK_COLUMNS})
    out["segmentation"] = [x for c in cols for x in c["seg"]] if want_seg else None
    kps = [c.get("keypoints") for c in cols]
    out["keypoints"] = np.concatenate(kps) if iou_type == "keypoints" and all(k is not None for k in kps) else None
    return out


_SINK_COLUMNS = ("image_id", "category_id", "bbox", "score", "area")


class _ColumnSink:
    """Columns for up to ``capacity`` detections, allocated at the first chunk and filled chunk by
    chunk in file order (:meth:`put` replaces the chunk's arrays by views of its rows; a chunk at
    offset 0 starts again, as when the file is read anew after a failed second process); what was
    written is whole when :meth:`holds` the ``n`` rows read (else, e.g. after a chunk that did not
    fit, the caller concatenates the chunks)."""

    def __init__(self, capacity: int):
        self.capacity, self.filled, self.out = capacity, 0, None

    def put(self, c: dict[str, Any], offset: int) -> None:
        m = len(c["score"])
        if offset == 0:  # the first chunk, or the first again (the file read anew)
            self.filled = 0
        if offset != self.filled or offset + m > self.capacity:
            self.filled = -1  # a chunk after one that did not fit: the caller concatenates
            return
        if self.out is None:
            self.out = {k: np.empty((self.capacity,) + c[k].shape[1:], c[k].dtype) for k in _SINK_COLUMNS}
        for k in _SINK_COLUMNS:
            col = self.out[k]
            if col.dtype != c[k].dtype or col.shape[1:] != c[k].shape[1:]:
                self.filled = -1
                return
            col[offset: offset + m] = c[k]
            c[k] = col[offset: offset + m]
        self.filled = offset + m

    def holds(self, n: int) -> bool:
        return self.out is not None and self.filled == n

    def columns(self, n: int) -> dict[str, np.ndarray]:
        return {k: self.out[k][:n] for k in _SINK_COLUMNS}


#: files at least this large are read by two processes (``two_processes=None``)
TWO_PROCESS_MIN_BYTES = 4 << 20
#: the shortest a detection can be in a results file: ``{"image_id":0,"category_id":0,"score":0},``
_MIN_DETECTION_BYTES = 41
_LAYOUT = {"image_id": (np.int64, ()), "category_id": (np.int64, ()), "score": (np.float64, ()),
           "bbox": (np.float64, (4,))}


def _two_halves(path: Path, two_processes: bool | None) -> tuple[int, int] | None:
    """Where to cut the file for two processes (``element_boundary`` near the middle), or None."""
    if two_processes is False:
        return None
    from .forked import can_fork

    size = path.stat().st_size
    if (two_processes is None and size < TWO_PROCESS_MIN_BYTES) or not can_fork():
        return None
    return element_boundary(path, size // 2)


def _child_columns(path: Path, what: str, chunk_bytes: int, start: int):
    """The child's work: the objects from ``start`` on as column chunks (raises on anything that
    is not a plain box record: the parent then reads that part itself)."""
    for objs in ResultStream(path, what, chunk_bytes, with_seg=False, start=start):
        if not isinstance(objs, dict) or objs["missing"]:
            raise ValueError("not plain box records")
        yield {k: objs[k] for k in _LAYOUT}


def _read_in_two(path: Path, what: str, chunk_bytes: int, halves: tuple[int, int], take, cols: list) -> None:
    """Read the objects before ``halves[0]`` here and those from ``halves[1]`` on in a forked child
    at the same time; ``take`` each part in file order. If the first part does not decode as a whole
    list (an error, or the cut was not between two top-level objects) or the child fails (an error
    in its part, or records it does not handle), the whole file is read here instead, so errors
    and their messages are exactly those of a plain read."""
    from .forked import ForkedColumns

    end, start = halves
    capacity = (path.stat().st_size - start) // _MIN_DETECTION_BYTES + 1
    child = ForkedColumns(lambda: _child_columns(path, what, chunk_bytes, start), _LAYOUT, capacity)
    try:
        for objs in ResultStream(path, what, chunk_bytes, with_seg=False, end=end):
            take(objs)
        got = child.result()
    except (InputError, UnicodeDecodeError):
        got = None
    finally:
        if child.running():
            child.cancel()
    if got is None:
        cols.clear()
        for objs in ResultStream(path, what, chunk_bytes, with_seg=False):
            take(objs)
    else:
        take({**got, "seg": None, "missing": []})


def read_results(
    source: str | os.PathLike[str] | list,
    gt: GroundTruth,
    *,
    iou_type: Literal["bbox", "segm", "keypoints"] = "bbox",
    chunk_bytes: int = CHUNK_BYTES,
    allow_empty: bool = False,
) -> Detections:
    """Read a COCO/LVIS results file (a JSON list of ``{image_id, category_id, bbox, score}`` and,
    for masks, ``segmentation`` RLE, for keypoints, ``keypoints``) against ``gt``; streamed in chunks.

    Unknown image or category ids are an error; when *no* image id is known the message says the
    file belongs to another dataset. An empty list is an error (it scores AP 0, usually a broken
    export) unless ``allow_empty``.
    """
    name = source_name(source)
    c = read_result_columns(source, iou_type=iou_type, chunk_bytes=chunk_bytes, check_masks=False)
    iid = c["image_id"]
    if len(iid) == 0:
        if not allow_empty:
            raise InputError(f"results {name}: the results list is empty (it would score AP 0); "
                             "set `allow_empty` if that is intended")
        d = Detections.empty()
        if iou_type == "keypoints" and gt.keypoints is not None:
            d.keypoints = np.zeros((0, gt.keypoints.shape[1], 3))
        return d
    k = int(np.searchsorted(gt.image_ids, iid[0]))  # the first id known (the usual case): no full look-up here
    first_known = k < len(gt.image_ids) and gt.image_ids[k] == iid[0]
    if not first_known and not np.any(np.isin(iid, gt.image_ids)):
        raise InputError(f"results {name}: none of its {len(np.unique(iid))} image ids are in the ground truth "
                         f"(e.g. {int(iid[0])}); a results file for a different dataset?")
    try:
        return Detections.from_ids(gt, image_id=iid, category_id=c["category_id"], bbox=c["bbox"],
                                   score=c["score"], segmentation=c["segmentation"], area=c["area"],
                                   keypoints=c["keypoints"])
    except InputError as exc:
        raise InputError(f"results {name}: {exc}") from exc


def write_result_columns(path: str | os.PathLike[str], image_id: np.ndarray, category_id: np.ndarray,
                         bbox: np.ndarray, score: np.ndarray, segmentation: list | None = None) -> Path:
    """Write a COCO/LVIS results JSON list from columns (atomically, via a temporary file)."""
    from ..atomic import atomic_write

    p = Path(path)
    img, cat, box, sc = (np.asarray(image_id).tolist(), np.asarray(category_id).tolist(),
                         np.asarray(bbox).tolist(), np.asarray(score).tolist())
    with atomic_write(p, "w", what="results file") as f:
        f.write("[")
        for i in range(len(sc)):
            o = {"image_id": img[i], "category_id": cat[i], "bbox": box[i], "score": sc[i]}
            if segmentation is not None and segmentation[i] is not None:
                seg = segmentation[i]
                if isinstance(seg, dict) and isinstance(seg.get("counts"), bytes):
                    seg = {"size": seg["size"], "counts": seg["counts"].decode("ascii")}
                o["segmentation"] = seg
            f.write(("," if i else "") + json.dumps(o, allow_nan=False))
        f.write("]")
    return p


def write_results(path: str | os.PathLike[str], gt: GroundTruth, dets: Detections) -> Path:
    """Write detections as a COCO/LVIS results JSON list (ids from ``gt``)."""
    return write_result_columns(path, gt.image_ids[dets.image], gt.category_ids[dets.category], dets.bbox,
                                dets.score, dets.segmentation)
