"""COCO / LVIS v1 JSON readers and a results writer for detection evaluation.

Ground truth is read whole (it is small next to results). Results files are *streamed*: the JSON
array is parsed in chunks of complete objects and each chunk is turned into compact arrays at once,
so memory grows with the detections kept (about 60 bytes each for boxes), not with the file's
dict-per-detection representation.

Bad input raises :class:`~vistabench.errors.InputError` with one line naming the file and the
problem: malformed JSON, missing fields, unknown image or category ids, NaN/inf scores, negative
box sizes, or a results file whose images are not in the ground truth (another dataset).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator, Literal

import numpy as np

from ..errors import InputError
from ..metrics.detection_data import Detections, GroundTruth

_CHUNK = 8 << 20

_DELETE = b"0123456789.-+eE \t\r\n"
_TO_SPACE = bytearray(range(256))
for _c in b'{}[],:"\t\r\n':
    _TO_SPACE[_c] = 32
_TO_SPACE = bytes(_TO_SPACE)
_KEYS = ("image_id", "category_id", "bbox", "score")


def _fast_columns(text: bytes) -> dict[str, Any] | None:
    """Parse a run of flat ``{image_id, category_id, bbox, score}`` objects without building dicts.

    The first object is parsed with json and must have exactly these keys (ids integers, a
    4-number box, a numeric score). Every other object must have the same *skeleton* (the text
    with number characters and whitespace removed), so it has the same keys in the same order and
    nothing but numbers as values; the numbers are then read in one C call. Returns None — the
    caller then uses json — whenever any of this does not hold.
    """
    end = text.find(b"}")
    n = text.count(b"{")
    if end < 0 or n == 0:
        return None
    try:
        first = json.loads(text[: end + 1].lstrip())
    except json.JSONDecodeError:
        return None
    if not isinstance(first, dict) or sorted(first) != sorted(_KEYS):
        return None
    b = first["bbox"]
    if (not isinstance(b, list) or len(b) != 4 or not all(type(v) in (int, float) for v in b)
            or type(first["image_id"]) is not int or type(first["category_id"]) is not int
            or type(first["score"]) not in (int, float)):
        return None
    skel = text[: end + 1].translate(None, _DELETE)
    if text.translate(None, _DELETE) != b",".join([skel] * n):
        return None
    body = text
    for k in _KEYS:
        body = body.replace(b'"' + k.encode() + b'"', b" ")
    values = np.fromstring(body.translate(_TO_SPACE), dtype=np.float64, sep=" ")
    if len(values) != 7 * n:
        return None
    values = values.reshape(n, 7)
    col, j = {}, 0
    for k in first:  # the file's key order
        w = 4 if k == "bbox" else 1
        col[k] = values[:, j: j + w]
        j += w
    ids = np.concatenate([col["image_id"], col["category_id"]], axis=1)
    if not np.all(np.isfinite(ids)) or np.any(ids != np.round(ids)) or np.any(np.abs(ids) > 2 ** 53):
        return None
    return {"image_id": ids[:, 0].astype(np.int64), "category_id": ids[:, 1].astype(np.int64),
            "score": col["score"][:, 0].copy(), "bbox": np.ascontiguousarray(col["bbox"])}


def _name(source: Any) -> str:
    return repr(str(source)) if isinstance(source, (str, os.PathLike)) else "(in memory)"


def _load_json(path: str | os.PathLike[str], what: str) -> Any:
    from .._validation import check_input_file

    p = check_input_file(path, what)
    try:
        with open(p, "rb") as f:
            return json.load(f)
    except json.JSONDecodeError as exc:
        raise InputError(f"{what} {str(path)!r}: malformed JSON ({exc.msg} at line {exc.lineno})") from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} {str(path)!r}: not a UTF-8 JSON file") from exc


def read_ground_truth(
    source: str | os.PathLike[str] | dict,
    *,
    format: Literal["auto", "lvis", "coco"] = "auto",
    with_segmentation: bool = False,
) -> GroundTruth:
    """Read COCO or LVIS v1 ground truth (a path or an already-parsed dict).

    ``format="auto"`` picks LVIS when every image has ``neg_category_ids`` and
    ``not_exhaustive_category_ids`` and COCO when none has (a mix is an error); the choice is
    recorded in the result's ``format``. ``with_segmentation`` keeps the masks (for ``segm``).
    """
    what = "--gt"
    data = _load_json(source, what) if not isinstance(source, dict) else source
    name = _name(source)
    if not isinstance(data, dict) or not all(k in data for k in ("images", "annotations", "categories")):
        raise InputError(f"{what} {name}: expected a COCO/LVIS object with 'images', 'annotations' and "
                         f"'categories', got {type(data).__name__}"
                         + (f" with keys {sorted(data)[:5]}" if isinstance(data, dict) else ""))
    images, anns, cats = data["images"], data["annotations"], data["categories"]
    fed = [("neg_category_ids" in im and "not_exhaustive_category_ids" in im) for im in images]
    if format == "auto":
        if images and all(fed):
            format = "lvis"
        elif not any(fed):
            format = "coco"
        else:
            raise InputError(f"{what} {name}: some images have LVIS neg/not-exhaustive lists and some do not; "
                             f"pass the format explicitly")
    if format not in ("lvis", "coco"):
        raise InputError(f"format: expected 'auto', 'lvis' or 'coco', got {format!r}")
    try:
        image_ids = [im["id"] for im in images]
        cat_ids = [c["id"] for c in cats]
        freq = None
        if format == "lvis":
            freq = [c.get("frequency") for c in cats]
            if any(f is None for f in freq):
                raise InputError(f"{what} {name}: LVIS categories need a 'frequency' (r/c/f)")
        iid = [a["image_id"] for a in anns]
        cid = [a["category_id"] for a in anns]
        box = [a["bbox"] for a in anns]
        area = [a["area"] for a in anns]
        ignore = [a.get("ignore", 0) for a in anns]
        crowd = [a.get("iscrowd", 0) for a in anns]
        aid = [a["id"] for a in anns]
        neg = {im["id"]: im["neg_category_ids"] for im in images} if format == "lvis" else None
        nel = {im["id"]: im["not_exhaustive_category_ids"] for im in images} if format == "lvis" else None
        size = [[im.get("height", 0), im.get("width", 0)] for im in images]
    except KeyError as exc:
        raise InputError(f"{what} {name}: an entry lacks the field {exc.args[0]!r}") from exc
    except TypeError as exc:
        raise InputError(f"{what} {name}: malformed entries ({exc})") from exc
    for kind, ids in (("annotation", aid), ("image", image_ids), ("category", cat_ids)):
        try:
            values, counts = np.unique(np.asarray(ids), return_counts=True)
        except TypeError:
            continue  # mixed id types: from_arrays reports them
        if np.any(counts > 1):  # the official tools silently keep one of each duplicate id
            raise InputError(f"{what} {name}: duplicate {kind} ids {values[counts > 1][:5].tolist()}; "
                             f"every {kind} needs its own id")
    try:
        bbox = np.asarray(box, dtype=np.float64).reshape(len(anns), 4)
    except (ValueError, TypeError) as exc:
        raise InputError(f"{what} {name}: every annotation needs a 4-number bbox [x, y, w, h]") from exc
    seg = None
    if with_segmentation:
        try:
            seg = [a["segmentation"] for a in anns]
        except KeyError as exc:
            raise InputError(f"{what} {name}: iou_type 'segm' needs 'segmentation' in every annotation") from exc
    return GroundTruth.from_arrays(
        format=format, image_ids=image_ids, category_ids=cat_ids, image_id=iid, category_id=cid,
        bbox=bbox, area=np.asarray(area, dtype=np.float64), ignore=ignore, iscrowd=crowd,
        ann_id=aid, frequency=freq, negative=neg, not_exhaustive=nel, segmentation=seg,
        image_size=np.asarray(size, dtype=np.int64).reshape(len(images), 2),
        category_names=[str(c.get("name", c["id"])) for c in cats],
    )


def _iter_chunks(path: Path, what: str, chunk_bytes: int) -> Iterator[list]:
    """Yield lists of result objects from a JSON array file, a chunk of whole objects at a time."""
    where = f"{what} {str(path)!r}"

    def malformed(msg: str) -> InputError:
        return InputError(f"{where}: malformed JSON ({msg})")

    with open(path, "rb") as f:
        buf = f.read(chunk_bytes).lstrip()
        eof = False
        if not buf.startswith(b"["):
            try:
                obj = json.loads(buf + f.read())
            except json.JSONDecodeError as exc:
                raise malformed(f"{exc.msg} at line {exc.lineno}") from exc
            raise InputError(f"{where}: expected a JSON list of detections, got {type(obj).__name__}")
        buf = buf[1:]
        need_sep = False
        first = True
        while True:
            if not eof and len(buf) < chunk_bytes:
                more = f.read(chunk_bytes)
                eof = not more
                buf += more
            buf = buf.lstrip()
            if not buf:
                if eof:
                    raise malformed("unterminated list")
                continue
            if buf[:1] == b"]" and (need_sep or first):
                if buf[1:].strip() or f.read().strip():
                    raise malformed("extra data after the list")
                return
            if need_sep:
                if buf[:1] != b",":
                    raise malformed(f"expected ',' or ']' between detections, found {buf[:20]!r}")
                buf = buf[1:]
                need_sep = False
                continue
            cut = buf.rfind(b"}")
            fast = _fast_columns(buf[: cut + 1]) if cut >= 0 else None
            if fast is not None:
                yield fast
                buf = buf[cut + 1:]
                need_sep = True
                first = False
                continue
            objs = None
            while cut >= 0:
                try:
                    objs = json.loads(b"[" + buf[: cut + 1] + b"]")
                    break
                except json.JSONDecodeError:
                    cut = buf.rfind(b"}", 0, cut)
            if objs is None:
                if eof:
                    try:
                        json.loads(b"[" + buf)
                    except json.JSONDecodeError as exc:
                        raise malformed(exc.msg) from exc
                    raise malformed("unexpected content")
                more = f.read(chunk_bytes)  # an object longer than the buffer: read on
                eof = not more
                buf += more
                continue
            yield objs
            buf = buf[cut + 1:]
            need_sep = True
            first = False


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
    if iou_type == "segm":
        try:
            seg = [o["segmentation"] for o in objs]
        except KeyError as exc:
            bad = next(i for i, o in enumerate(objs) if "segmentation" not in o)
            raise InputError(f"{what} {name}: detection {offset + bad} lacks 'segmentation' (needed for segm)") from exc
    box = [o.get("bbox") for o in objs]
    missing = [i for i, b in enumerate(box) if b is None]
    if missing:
        if seg is None:
            raise InputError(f"{what} {name}: detection {offset + missing[0]} lacks 'bbox'")
        import pycocotools.mask as mask_utils

        for i in missing:
            box[i] = mask_utils.toBbox(seg[i]).tolist()
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
    area = None
    if missing:  # as pycocotools/lvis-api: box area when the result has a box, else mask area
        import pycocotools.mask as mask_utils

        area = bbox[:, 2] * bbox[:, 3]
        for i in missing:
            area[i] = float(mask_utils.area(seg[i]))
    c = _check({"image_id": iid_a, "category_id": cid_a, "bbox": bbox, "score": sc}, offset, what, name, area)
    c["seg"] = seg
    return c


def _check(c: dict[str, Any], offset: int, what: str, name: str, area: np.ndarray | None = None) -> dict[str, Any]:
    """Finite scores and boxes, non-negative sizes; adds ``area`` (box area unless given)."""
    sc, bbox = c["score"], c["bbox"]
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
    iou_type: Literal["bbox", "segm"] = "bbox",
    chunk_bytes: int = _CHUNK,
    keep_segmentation: bool | None = None,
) -> dict[str, Any]:
    """Read a results file (streamed) into columns keyed by the file's own ids.

    Returns ``{"image_id", "category_id": (N,) int64, "bbox": (N, 4), "score", "area": (N,) float64,
    "segmentation": list or None}``. Validates scores (finite), boxes (finite, non-negative size)
    and ids (integers); needs no ground truth (used by ``rerank`` and ``calibrate apply``).
    """
    what = "--results"
    name = _name(source)
    cols: list[dict[str, Any]] = []
    offset = 0
    if isinstance(source, list):
        chunks: Any = [source]
    elif isinstance(source, (str, os.PathLike)):
        from .._validation import check_input_file

        p = check_input_file(source, what)
        chunks = _iter_chunks(p, what, chunk_bytes)
    else:
        raise InputError(f"{what}: expected a path or a list of detections, got {type(source).__name__}")
    want_seg = iou_type == "segm" if keep_segmentation is None else keep_segmentation
    try:
        for objs in chunks:
            if isinstance(objs, dict):  # fast path: plain box results
                if iou_type == "segm":
                    raise InputError(f"{what} {name}: detection {offset} lacks 'segmentation' (needed for segm)")
                c = _check(objs, offset, what, name)
                c["seg"] = [None] * len(c["score"]) if want_seg else None
                offset += len(c["score"])
            else:
                if not objs:
                    continue
                c = _columns(objs, offset, what, name, iou_type)
                if want_seg and c["seg"] is None:
                    c["seg"] = [o.get("segmentation") if isinstance(o, dict) else None for o in objs]
                offset += len(objs)
            cols.append(c)
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} {name}: not a UTF-8 JSON file") from exc
    if not cols:
        z = np.zeros(0, np.int64)
        return {"image_id": z, "category_id": z.copy(), "bbox": np.zeros((0, 4)), "score": np.zeros(0),
                "area": np.zeros(0), "segmentation": [] if want_seg else None}
    return {
        "image_id": np.concatenate([c["image_id"] for c in cols]),
        "category_id": np.concatenate([c["category_id"] for c in cols]),
        "bbox": np.concatenate([c["bbox"] for c in cols]),
        "score": np.concatenate([c["score"] for c in cols]),
        "area": np.concatenate([c["area"] for c in cols]),
        "segmentation": [x for c in cols for x in c["seg"]] if want_seg else None,
    }


def read_results(
    source: str | os.PathLike[str] | list,
    gt: GroundTruth,
    *,
    iou_type: Literal["bbox", "segm"] = "bbox",
    chunk_bytes: int = _CHUNK,
    allow_empty: bool = False,
) -> Detections:
    """Read a COCO/LVIS results file (a JSON list of ``{image_id, category_id, bbox, score}`` and,
    for masks, ``segmentation`` RLE) against ``gt``; streamed in chunks.

    Unknown image or category ids are an error; when *no* image id is known the message says the
    file belongs to another dataset. An empty list is an error (it scores AP 0, usually a broken
    export) unless ``allow_empty``.
    """
    name = _name(source)
    c = read_result_columns(source, iou_type=iou_type, chunk_bytes=chunk_bytes)
    iid = c["image_id"]
    if len(iid) == 0:
        if not allow_empty:
            raise InputError(f"--results {name}: the results list is empty (it would score AP 0); "
                             "pass --allow-empty if that is intended")
        return Detections.empty()
    if not np.any(np.isin(iid, gt.image_ids)):
        raise InputError(f"--results {name}: none of its {len(np.unique(iid))} image ids are in the ground truth "
                         f"(e.g. {int(iid[0])}); a results file for a different dataset?")
    try:
        return Detections.from_ids(gt, image_id=iid, category_id=c["category_id"], bbox=c["bbox"],
                                   score=c["score"], segmentation=c["segmentation"], area=c["area"])
    except InputError as exc:
        raise InputError(f"--results {name}: {exc}") from exc


def write_result_columns(path: str | os.PathLike[str], image_id: np.ndarray, category_id: np.ndarray,
                         bbox: np.ndarray, score: np.ndarray, segmentation: list | None = None) -> Path:
    """Write a COCO/LVIS results JSON list from columns (atomically, via a temporary file)."""
    p = Path(path)
    if p.parent and not p.parent.exists():
        p.parent.mkdir(parents=True, exist_ok=True)
    img, cat, box, sc = (np.asarray(image_id).tolist(), np.asarray(category_id).tolist(),
                         np.asarray(bbox).tolist(), np.asarray(score).tolist())
    tmp = p.with_name(p.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
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
    os.replace(tmp, p)
    return p


def write_results(path: str | os.PathLike[str], gt: GroundTruth, dets: Detections) -> Path:
    """Write detections as a COCO/LVIS results JSON list (ids from ``gt``)."""
    return write_result_columns(path, gt.image_ids[dets.image], gt.category_ids[dets.category], dets.bbox,
                                dets.score, dets.segmentation)
