"""Result lists as the official loaders prepare them (``LVISResults.__init__``, ``COCO.loadRes``).

The first result decides (as in both tools): when it has a box, every result needs one, its area is
the box area, and a result without ``segmentation`` gets the box's rectangle polygon (so box-only
results become rectangle masks in segm mode); when it has none, every result needs a compressed RLE
``segmentation``, its area is the mask area and a missing box is the mask's bounding box. Each
result gets ``id`` = position + 1 (and, for COCO, ``iscrowd`` 0) — the dicts are updated in place,
as the tools do. Masks are checked (``size``, ``counts``) so a bad one is one line naming the result.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputAssertionError, InputError, InputIndexError, InputKeyError, InputTypeError
from ..jsonutil import strip_bom
from .evaluation import EmptyResultsError

__all__ = ["read_dataset", "explain_dataset", "require", "load_result_list", "prepare_results", "check_segmentation",
           "box_result_columns", "msgspec_json_list"]


def read_dataset(source: Any, what: str) -> dict:
    if isinstance(source, dict):
        return source
    if not isinstance(source, (str, Path)):
        raise InputTypeError(f"{what}: expected a path or a dict, got {type(source).__name__}")
    p = Path(source)
    if not p.is_file():
        raise InputError(f"{what}: {str(source)!r} is not a file")
    import msgspec

    try:
        data = msgspec.json.decode(strip_bom(p.read_bytes()))
    except msgspec.DecodeError as exc:
        raise InputError(f"{what}: {str(source)!r} is not valid JSON ({exc})") from None
    if not isinstance(data, dict) or not {"images", "annotations", "categories"} <= set(data):
        raise InputError(f"{what}: {str(source)!r} needs 'images', 'annotations' and 'categories'")
    return data


_NEEDS = {"annotations": ("id", "image_id", "category_id"), "images": ("id",), "categories": ("id",)}


def explain_dataset(ds: Any) -> None:
    """Raise the one-line error for what made ``createIndex`` fail (pycocotools' types: KeyError for
    a missing field, TypeError for a section or entry that is not what it must be)."""
    if not isinstance(ds, dict):
        raise InputTypeError(f"dataset: expected a dict with 'images', 'annotations' and 'categories', "
                             f"got {type(ds).__name__}")
    for section, fields in _NEEDS.items():
        items = ds.get(section, ())
        if not isinstance(items, list):
            raise InputTypeError(f"dataset[{section!r}]: expected a list of dicts, got {type(items).__name__}")
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise InputTypeError(f"{section}[{i}]: expected a dict, got {type(item).__name__}")
            for f in fields:
                if f not in item:
                    raise InputKeyError(f"{section}[{i}]: lacks {f!r}")
                if isinstance(item[f], (list, dict, set)):
                    raise InputTypeError(f"{section}[{i}].{f}: expected an id, got {type(item[f]).__name__}")


def require(anns: list, field: str, what: str, why: str) -> None:
    """pycocotools reads ``field`` from every annotation it evaluates (a KeyError there)."""
    if not all(field in a for a in anns):
        i = next(i for i, a in enumerate(anns) if field not in a)
        raise InputKeyError(f"{what}[{i}]: lacks {field!r} ({why})")


def load_result_list(source: Any, what: str) -> list:
    """A results path (JSON list) or an in-memory list."""
    if isinstance(source, (str, Path)):
        import msgspec

        p = Path(source)
        if not p.is_file():
            raise InputError(f"{what}: {str(source)!r} is not a file")
        try:
            data = msgspec.json.decode(p.read_bytes())
        except msgspec.DecodeError as exc:
            try:
                data = json.loads(p.read_text(encoding="utf-8-sig"))
            except ValueError:
                raise InputError(f"{what}: {str(source)!r} is not valid JSON ({exc})") from None
        source = data
    if not isinstance(source, list):
        raise InputTypeError(f"{what}: expected a list of result dicts (or a path to one), got {type(source).__name__}")
    return source


def msgspec_json_list(raw: bytes) -> Any:
    """A JSON document's bytes decoded (msgspec; the standard library for what it refuses)."""
    import msgspec

    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return json.loads(raw.decode("utf-8-sig"))


def box_result_columns(source: Any, image_ids: np.ndarray) -> dict[str, Any] | None:
    """Columns of a results *file* of plain box records (``image_id``, ``category_id``, ``bbox``,
    ``score``; no ``segmentation``, ``keypoints`` or ``caption``), read by the streaming column reader
    (:func:`~vistabench.data.coco.read_result_columns`) without a dict per result; their ``area`` is
    the box area, as ``loadRes`` sets it. None when the file is anything else (a list, masks,
    keypoints, an empty list, an image id outside ``image_ids``, a value the reader refuses): the
    caller then prepares the results as dicts (:func:`prepare_results`), so every error is the same.
    Returns the columns and ``raw``, the file's bytes, to build the dicts from on request."""
    if not isinstance(source, (str, Path)):
        return None
    p = Path(source)
    try:
        raw = p.read_bytes()
    except OSError:
        return None
    if b'"segmentation"' in raw or b'"keypoints"' in raw or b'"caption"' in raw:
        return None
    from ..data.coco import read_result_columns

    try:
        cols = read_result_columns(p, iou_type="bbox", keep_segmentation=False)
    except InputError:
        return None
    if len(cols["score"]) == 0 or not np.isin(cols["image_id"], image_ids).all():
        return None
    cols["raw"] = raw
    return cols


_RLE_CHARS = re.compile(rb"[0-o]*")  # pycocotools' compressed counts: characters 48..111


def check_segmentation(seg: Any, where: str, image_size: tuple[int, int] | None = None) -> None:
    """A polygon list (each polygon >= 3 points) or an RLE dict with ``size`` [h, w] and ``counts``
    (compressed characters, or non-negative integers summing to h x w). pycocotools' decoder is
    undefined on anything else. An RLE of another size than ``image_size`` is taken as pycocotools
    takes it; the detections built from it warn (:func:`~vistabench.metrics.detection.masks.check_segmentations`)."""
    if isinstance(seg, dict):
        size, counts = seg.get("size"), seg.get("counts")
        if not (isinstance(size, (list, tuple)) and len(size) == 2 and all(isinstance(v, (int, np.integer)) and v >= 0
                                                                             for v in size)):
            raise InputError(f"{where}.segmentation: an RLE needs 'size' [height, width], got {size!r}")
        if isinstance(counts, (str, bytes)):
            b = counts.encode("latin-1", "replace") if isinstance(counts, str) else counts
            if not _RLE_CHARS.fullmatch(b):
                raise InputError(f"{where}.segmentation: RLE counts is not a compressed RLE string "
                                 f"(characters '0'..'o')")
        if isinstance(counts, list):
            if any((not isinstance(c, (int, np.integer))) or c < 0 for c in counts):
                raise InputError(f"{where}.segmentation: RLE counts must be non-negative integers")
            if sum(counts) != size[0] * size[1]:
                raise InputError(f"{where}.segmentation: RLE counts sum to {sum(counts)}, expected height x width "
                                 f"= {size[0] * size[1]}")
        elif not isinstance(counts, (str, bytes)):
            raise InputError(f"{where}.segmentation: RLE 'counts' must be a string or a list, got {type(counts).__name__}")
        return
    if isinstance(seg, list) and seg and all(isinstance(p, list) for p in seg):
        for p in seg:
            if len(p) < 6 or len(p) % 2:
                raise InputError(f"{where}.segmentation: a polygon needs an even number >= 6 of coordinates, "
                                 f"got {len(p)}")
        return
    raise InputError(f"{where}.segmentation: expected polygons (a list of lists) or an RLE dict, "
                     f"got {type(seg).__name__}")


def _rle(seg: Any, where: str, size) -> Any:
    if not isinstance(seg, dict):  # the tools' mask area / toBbox fail with a TypeError on it
        raise InputTypeError(f"{where}.segmentation: results without 'bbox' need a compressed RLE dict, "
                             f"got {type(seg).__name__}")
    check_segmentation(seg, where, size)
    if isinstance(seg["counts"], list):
        raise InputTypeError(f"{where}.segmentation: results without 'bbox' need a compressed RLE (string counts)")
    return seg


_ABSENT = object()


def _boxes(boxes: list, what: str) -> np.ndarray:
    """(N, 4) float64 boxes; a missing or malformed one is named."""
    try:
        b = np.asarray(boxes, dtype=np.float64)
        if b.shape == (len(boxes), 4):
            return b
    except (TypeError, ValueError):
        pass
    for i, bb in enumerate(boxes):
        if bb is _ABSENT:
            raise InputKeyError(f"{what}[{i}]: lacks 'bbox' (the first result has one, so every result needs one)")
        msg = f"{what}[{i}].bbox: expected 4 numbers [x, y, w, h], got {bb!r}"
        if not isinstance(bb, (list, tuple, np.ndarray)):
            raise InputTypeError(msg)  # the tools index it: a TypeError there
        if len(bb) < 4:
            raise InputIndexError(msg)  # the tools read bb[3]: an IndexError there
        try:
            if np.asarray(bb, dtype=np.float64).shape != (4,):
                raise ValueError
        except (TypeError, ValueError):
            raise InputError(msg) from None
    raise InputError(f"{what}: every 'bbox' must be 4 numbers [x, y, w, h]")


def _empty_box(bb: Any, what: str) -> bool:
    """pycocotools' ``anns[0]['bbox'] == []`` (an empty box: the mask branch). A numpy array is a box:
    what loadRes itself stores for a mask's box, so a list loaded twice carries them (detectron2's
    test_coco_evaluation does); pycocotools reads it as the box with numpy < 1.25, and with a newer
    numpy its ``==`` raises ValueError (said in a warning; the box is read)."""
    if not isinstance(bb, np.ndarray):
        return bb == []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy < 1.25: "elementwise comparison failed"
        try:
            bool(bb == [])
            raises = False
        except ValueError:
            raises = True
    if raises:
        from ..metrics.detection import OfficialToolsDifferenceWarning

        warnings.warn(f"{what}[0].bbox: a numpy array {bb.tolist()}; pycocotools' loadRes raises ValueError on "
                      f"it with numpy >= 1.25 (its `bbox == []` test) and reads it as the box with an older "
                      f"numpy: read as the box", OfficialToolsDifferenceWarning, stacklevel=4)
    return False


def prepare_results(anns: list, *, what: str, coco: bool, image_ids: np.ndarray,
                    image_sizes: dict | None = None) -> dict[str, Any]:
    """Update ``anns`` as the tool's loader does and return columns ``image_id``, ``category_id``,
    ``score``, ``bbox`` (N, 4), ``area``, ``segmentation`` (list). ``image_sizes``: image id ->
    (height, width), to check every mask now (None: masks of results with a box are left to the
    segm evaluation, as pycocotools, which scores the box in bbox mode, never reads them)."""
    check_masks = image_sizes is not None
    sizes = image_sizes or {}
    if len(anns) == 0:
        raise EmptyResultsError(f"{what}: the results list is empty (lvis-api and pycocotools raise IndexError "
                                f"on it; nothing to evaluate)")
    import pycocotools.mask as mask_utils

    first = anns[0]
    if not isinstance(first, dict):
        raise InputTypeError(f"{what}[0]: expected a result dict, got {type(first).__name__}")
    with_box = "bbox" in first and not (coco and _empty_box(first["bbox"], what))
    if coco and not with_box and "segmentation" not in first and "keypoints" in first:
        from .keypoints import prepare_keypoint_results  # loadRes's keypoint branch

        prepare_keypoint_results(anns, what)
        return {}
    if not with_box and "segmentation" not in first:
        raise InputKeyError(f"{what}[0]: a result needs 'bbox' or 'segmentation'")
    n = len(anns)
    bad = next((i for i, a in enumerate(anns) if not isinstance(a, dict)), None)
    if bad is not None:
        raise InputTypeError(f"{what}[{bad}]: expected a result dict, got {type(anns[bad]).__name__}")
    if with_box:
        bbox = _boxes([a.get("bbox", _ABSENT) for a in anns], what)
        area = bbox[:, 2] * bbox[:, 3]
        x, y = bbox[:, 0], bbox[:, 1]
        x2, y2 = x + bbox[:, 2], y + bbox[:, 3]
        area_l = area.tolist()
        rect = np.stack([x, y, x, y2, x2, y2, x2, y], 1).tolist()  # the box's rectangle polygon, as both tools
    else:
        bbox, area = np.zeros((n, 4)), np.zeros(n)
    for i, ann in enumerate(anns):
        if with_box:
            if "segmentation" not in ann:
                ann["segmentation"] = [rect[i]]
            elif check_masks:
                check_segmentation(ann["segmentation"], f"{what}[{i}]", sizes.get(ann.get("image_id")))
            ann["area"] = area_l[i]
        else:
            where = f"{what}[{i}]"
            if "segmentation" not in ann:
                raise InputKeyError(f"{where}: lacks 'segmentation' (the first result has no 'bbox', so every result "
                                    f"needs a mask)")
            seg = _rle(ann["segmentation"], where, sizes.get(ann.get("image_id")))
            ann["area"] = mask_utils.area(seg)
            if "bbox" not in ann:
                ann["bbox"] = mask_utils.toBbox(seg)
            bbox[i] = np.asarray(ann["bbox"], np.float64).reshape(4)
            area[i] = float(ann["area"])
        ann["id"] = i + 1
        if coco:
            ann["iscrowd"] = 0
    try:
        iid = np.array([a["image_id"] for a in anns])
        cid = np.array([a["category_id"] for a in anns])
        score = np.array([a["score"] for a in anns])
    except KeyError as exc:
        bad = next(i for i, a in enumerate(anns) if exc.args[0] not in a)
        raise InputKeyError(f"{what}[{bad}]: lacks {exc.args[0]!r}") from None
    if iid.dtype.kind not in "iu" or cid.dtype.kind not in "iu":
        raise InputError(f"{what}: 'image_id' and 'category_id' must be integers")
    if score.dtype.kind not in "iuf":
        raise InputTypeError(f"{what}: every 'score' must be a number")
    known = np.isin(iid, image_ids)
    if not known.all():
        raise InputAssertionError(f"{what}[{int(np.flatnonzero(~known)[0])}]: image_id {int(iid[~known][0])} is not "
                                  f"in the ground truth (results do not correspond to this set)")
    return {"image_id": iid.astype(np.int64), "category_id": cid.astype(np.int64), "score": score.astype(np.float64),
            "bbox": bbox, "area": area, "segmentation": [a["segmentation"] for a in anns]}
