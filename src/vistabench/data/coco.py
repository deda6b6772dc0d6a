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

import gc
import itertools
import json
import math
import operator
import os
import re
from pathlib import Path
from typing import Any, Iterator, Literal, Optional, Union

import msgspec
import numpy as np

from ..errors import InputError
from ..metrics.detection import Detections, GroundTruth, check_segmentations, to_rle

_CHUNK = 2 << 20  # smaller than before (8 MB): the decoded records stay closer in cache while they become columns

# Typed records for msgspec: unknown keys are skipped, key order is free, ints are accepted where a
# float is expected (as json + numpy do); gc=False because the records hold no cycles.
Box = tuple[float, float, float, float]


class _Det(msgspec.Struct, gc=False):
    image_id: int
    category_id: int
    score: float
    bbox: Optional[Box] = None


class _DetSeg(msgspec.Struct, gc=False):
    image_id: int
    category_id: int
    score: float
    bbox: Optional[Box] = None
    segmentation: Any = None


_DECODERS: dict[bool, Any] = {}


def _decoder(with_seg: bool):
    if with_seg not in _DECODERS:
        _DECODERS[with_seg] = msgspec.json.Decoder(list[_DetSeg if with_seg else _Det])
    return _DECODERS[with_seg]


def _struct_columns(objs: list, with_seg: bool) -> dict[str, Any]:
    """Columns of decoded records: ids int64, score float64, bbox (n, 4) (NaN rows where absent)."""
    n = len(objs)
    iid = np.fromiter(map(_GET_IMAGE, objs), np.int64, n)
    cid = np.fromiter(map(_GET_CATEGORY, objs), np.int64, n)
    score = np.fromiter(map(_GET_SCORE, objs), np.float64, n)
    missing: list[int] = []
    try:
        bbox = np.fromiter(itertools.chain.from_iterable(map(_GET_BBOX, objs)), np.float64, 4 * n)
    except TypeError:  # some results have no box (masks only)
        boxes = list(map(_GET_BBOX, objs))
        missing = [i for i, b in enumerate(boxes) if b is None]
        nan4 = (math.nan,) * 4
        bbox = np.fromiter(itertools.chain.from_iterable(nan4 if b is None else b for b in boxes), np.float64, 4 * n)
    seg = list(map(_GET_SEG, objs)) if with_seg else None
    return {"image_id": iid, "category_id": cid, "score": score, "bbox": bbox.reshape(n, 4), "seg": seg,
            "missing": missing}


_GET_IMAGE, _GET_CATEGORY, _GET_SCORE, _GET_BBOX, _GET_SEG = (
    operator.attrgetter(k) for k in ("image_id", "category_id", "score", "bbox", "segmentation"))


_PATH = re.compile(r"`\$\[(\d+)\]([^`]*)`")
_BYTE = re.compile(r"\(byte (\d+)\)")


def _validation_message(exc: Exception, offset: int) -> str:
    """msgspec's "Expected `int`, got `float` - at `$[5].image_id`" -> "detection 5 (offset added):
    'image_id' expected int, got float"."""
    msg = str(exc)
    m = _PATH.search(msg)
    if not m:
        return msg
    i = offset + int(m.group(1))
    field = m.group(2).lstrip(".") or "the entry"
    text = msg[: m.start()].rstrip(" -").replace("`", "")
    hint = ""
    if field.startswith("bbox"):
        hint = "; every 'bbox' must be 4 numbers [x, y, w, h]"
    elif field in ("image_id", "category_id"):
        hint = "; 'image_id' and 'category_id' must be integers"
    elif field == "score":
        hint = "; every 'score' must be a number"
    elif "missing required field" in text:
        hint = " (a detection lacks it)"
    return f"detection {i}, {field}: {text}{hint}"


def _skip_ws(buf: bytes) -> int:
    """Number of leading JSON whitespace bytes (without copying the buffer)."""
    i = 0
    while i < len(buf) and buf[i] in b" \t\r\n":
        i += 1
    return i


class _Stream:
    """A JSON array of detection objects read in chunks of whole objects, decoded by msgspec.

    Each chunk is cut after a ``}`` and decoded as ``[chunk]``; if the cut falls inside an object
    (a nested ``}``), the previous ``}`` is tried. A genuine error repeats at the same place for two
    cuts and is reported; an object longer than the buffer makes the buffer grow. Memory: one
    buffer of about ``chunk_bytes`` plus the decoded chunk. Input that msgspec refuses but the
    standard library accepts (``NaN``, ``Infinity``) goes through :mod:`json` for that chunk.
    """

    def __init__(self, path: Path, what: str, chunk_bytes: int, with_seg: bool):
        self.path, self.where, self.chunk = path, f"{what} {str(path)!r}", max(int(chunk_bytes), 64)
        self.dec = _decoder(with_seg)
        self.with_seg = with_seg

    def malformed(self, msg: str) -> InputError:
        return InputError(f"{self.where}: malformed JSON ({msg})")

    def __iter__(self) -> Iterator[Any]:
        with open(self.path, "rb") as f:
            buf = f.read(self.chunk)
            base = 0  # file offset of buf[0]
            if buf.startswith(b"\xef\xbb\xbf"):
                buf, base = buf[3:], 3
            eof = len(buf) == 0
            s = len(buf) - len(buf.lstrip())
            buf, base = buf[s:], base + s
            if not buf.startswith(b"["):
                rest = buf + f.read()
                try:
                    obj = msgspec.json.decode(rest)
                except msgspec.DecodeError:
                    try:
                        obj = json.loads(rest)
                    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                        raise self.malformed(getattr(exc, "msg", str(exc))) from exc
                raise InputError(f"{self.where}: expected a JSON list of detections, got {type(obj).__name__}")
            buf, base = buf[1:], base + 1
            need_sep, first, offset = False, True, 0
            while True:
                if not eof and len(buf) < self.chunk:
                    more = f.read(self.chunk)
                    eof = not more
                    buf += more
                s = _skip_ws(buf)
                if s:
                    buf, base = buf[s:], base + s
                if not buf:
                    if eof:
                        raise self.malformed("unterminated list")
                    continue
                if buf[:1] == b"]" and (need_sep or first):
                    tail = buf[1:].strip()
                    while not tail and not eof:
                        more = f.read(self.chunk)
                        eof = not more
                        tail = more.strip()
                    if tail:
                        raise self.malformed(f"extra data after the list at byte {base + len(buf) - len(buf[1:].lstrip())}")
                    return
                if need_sep:
                    if buf[:1] != b",":
                        raise self.malformed(f"expected ',' or ']' between detections at byte {base}, "
                                             f"found {buf[:20]!r}")
                    buf, base, need_sep = buf[1:], base + 1, False
                    continue
                got = self._decode(buf, base, offset, eof)
                if got is None:  # no whole object in the buffer yet: read on
                    more = f.read(self.chunk)
                    eof = not more
                    buf += more
                    continue
                item, cut = got
                yield item
                offset += len(item["score"]) if isinstance(item, dict) else len(item)
                buf, base = buf[cut + 1:], base + cut + 1
                need_sep, first = True, False

    def _decode(self, buf: bytes, base: int, offset: int, eof: bool):
        cut = buf.rfind(b"}")
        errors: list[str] = []
        while cut >= 0 and len(errors) < 32:
            try:
                return self._columns(b"".join((b"[", memoryview(buf)[: cut + 1], b"]"))), cut  # one copy
            except msgspec.ValidationError as exc:
                msg = _validation_message(exc, offset)
            except msgspec.DecodeError as exc:
                m = _BYTE.search(str(exc))
                msg = str(exc) if m is None else _BYTE.sub(f"(byte {base + int(m.group(1)) - 1})", str(exc))
            if errors and errors[-1] == msg and "truncated" not in msg:  # a truncation has no place
                return self._stdlib(buf, cut, offset, msg)
            errors.append(msg)
            cut = buf.rfind(b"}", 0, cut)
        if not eof:
            return None
        return self._stdlib(buf, buf.rfind(b"}"), offset, errors[0] if errors else "unexpected content")

    def _columns(self, data: bytes) -> dict[str, Any]:
        """Decode ``data`` (a JSON list) into columns with the cyclic garbage collector paused: the
        records are freed before it resumes, so it never walks the chunk's ~10^5 bbox tuples."""
        was = gc.isenabled()
        gc.disable()
        try:
            objs = self.dec.decode(data)
            cols = _struct_columns(objs, self.with_seg)
            del objs
            return cols
        finally:
            if was:
                gc.enable()

    def _stdlib(self, buf: bytes, cut: int, offset: int, msg: str):
        """The standard library's reading of ``[buf[:cut+1]]`` (NaN/Infinity), else ``msg``."""
        for _ in range(32):
            if cut < 0:
                break
            try:
                return json.loads(b"[" + buf[: cut + 1] + b"]"), cut
            except (json.JSONDecodeError, UnicodeDecodeError):
                cut = buf.rfind(b"}", 0, cut)
        if msg.startswith("detection "):
            raise InputError(f"{self.where}: {msg}")
        raise self.malformed(msg.replace("JSON is malformed: ", ""))


def _name(source: Any) -> str:
    return repr(str(source)) if isinstance(source, (str, os.PathLike)) else "(in memory)"


class _Image(msgspec.Struct, gc=False):
    id: int
    height: float = 0
    width: float = 0
    neg_category_ids: Optional[list[int]] = None
    not_exhaustive_category_ids: Optional[list[int]] = None


class _Ann(msgspec.Struct, gc=False):
    id: int
    image_id: int
    category_id: int
    bbox: Box
    area: float
    ignore: Union[bool, int] = 0
    iscrowd: Union[bool, int] = 0


class _AnnSeg(_Ann, gc=False):
    segmentation: Any = None


class _Cat(msgspec.Struct, gc=False):
    id: int
    name: Optional[str] = None
    frequency: Optional[str] = None


class _Gt(msgspec.Struct, gc=False):
    images: list[_Image]
    annotations: list[_Ann]
    categories: list[_Cat]


class _GtSeg(msgspec.Struct, gc=False):
    images: list[_Image]
    annotations: list[_AnnSeg]
    categories: list[_Cat]


_MISSING = re.compile(r"missing required field `(\w+)`")


def _gt_error(exc: Exception, where: str) -> InputError:
    msg = str(exc)
    m = _MISSING.search(msg)
    at = msg.rsplit(" - at ", 1)[-1].strip("`") if " - at " in msg else ""
    if m:
        return InputError(f"{where}: an entry lacks the field {m.group(1)!r} (at {at})")
    if "Expected `object`, got" in msg and at == "$":
        return InputError(f"{where}: expected a COCO/LVIS object with 'images', 'annotations' and 'categories', "
                          f"got {msg.split('got `')[-1].split('`')[0]}")
    if isinstance(exc, msgspec.ValidationError):
        return InputError(f"{where}: {msg.replace('`', '')}")
    return InputError(f"{where}: malformed JSON ({msg.replace('JSON is malformed: ', '')})")


def _decode_ground_truth(source: Any, with_segmentation: bool, what: str) -> Any:
    """A COCO/LVIS ground-truth file or dict as typed records (unknown keys skipped)."""
    typ = _GtSeg if with_segmentation else _Gt
    where = f"{what} {_name(source)}"
    try:
        if isinstance(source, dict):
            return msgspec.convert(source, typ)
        from .._validation import check_input_file

        p = check_input_file(source, what)
        data = p.read_bytes()
        if data.startswith(b"\xef\xbb\xbf"):
            data = data[3:]
        try:
            return msgspec.json.decode(data, type=typ)
        except msgspec.DecodeError as exc:
            if isinstance(exc, msgspec.ValidationError) or b"NaN" not in data and b"Infinity" not in data:
                raise
            return msgspec.convert(json.loads(data), typ)  # NaN / Infinity: as the standard library reads
    except (msgspec.DecodeError, json.JSONDecodeError) as exc:
        raise _gt_error(exc, where) from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"{where}: not a UTF-8 JSON file") from exc


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
    Decoded by msgspec into typed records: extra keys are skipped, key order is free.
    """
    what = "--gt"
    name = _name(source)
    data = _decode_ground_truth(source, with_segmentation, what)
    images, anns, cats = data.images, data.annotations, data.categories
    fed = [(im.neg_category_ids is not None and im.not_exhaustive_category_ids is not None) for im in images]
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
    freq = None
    if format == "lvis":
        freq = [c.frequency for c in cats]
        if any(f is None for f in freq):
            raise InputError(f"{what} {name}: LVIS categories need a 'frequency' (r/c/f)")
        if not all(fed):
            raise InputError(f"{what} {name}: LVIS images need 'neg_category_ids' and 'not_exhaustive_category_ids'")
    seg = None
    if with_segmentation:
        seg = [a.segmentation for a in anns]
        absent = [i for i, x in enumerate(seg) if x is None]
        if absent:
            raise InputError(f"{what} {name}: annotation {absent[0]} (id {anns[absent[0]].id}) lacks 'segmentation'; "
                             f"iou_type 'segm' needs one in every annotation")
    for kind, ids in (("annotation", [a.id for a in anns]), ("image", [im.id for im in images]),
                      ("category", [c.id for c in cats])):
        values, counts = np.unique(np.asarray(ids, dtype=np.int64), return_counts=True)
        if np.any(counts > 1):  # the official tools silently keep one of each duplicate id
            raise InputError(f"{what} {name}: duplicate {kind} ids {values[counts > 1][:5].tolist()}; "
                             f"every {kind} needs its own id")
    try:
        return _ground_truth_arrays(images, anns, cats, format, freq, seg)
    except InputError as exc:
        raise InputError(f"{what} {name}: {exc}") from exc


def _ground_truth_arrays(images: list, anns: list, cats: list, format: str, freq: list | None,
                         seg: list | None) -> GroundTruth:
    n = len(anns)
    return GroundTruth.from_arrays(
        format=format, image_ids=np.fromiter([im.id for im in images], np.int64, len(images)),
        category_ids=np.fromiter([c.id for c in cats], np.int64, len(cats)),
        image_id=np.fromiter([a.image_id for a in anns], np.int64, n),
        category_id=np.fromiter([a.category_id for a in anns], np.int64, n),
        bbox=np.fromiter(itertools.chain.from_iterable([a.bbox for a in anns]), np.float64, 4 * n).reshape(n, 4),
        area=np.fromiter([a.area for a in anns], np.float64, n),
        ignore=np.fromiter([bool(a.ignore) for a in anns], bool, n),
        iscrowd=np.fromiter([bool(a.iscrowd) for a in anns], bool, n),
        ann_id=np.fromiter([a.id for a in anns], np.int64, n), frequency=freq,
        negative={im.id: im.neg_category_ids for im in images} if format == "lvis" else None,
        not_exhaustive={im.id: im.not_exhaustive_category_ids for im in images} if format == "lvis" else None,
        segmentation=seg,
        image_size=np.asarray([[int(im.height), int(im.width)] for im in images], np.int64).reshape(len(images), 2),
        category_names=[str(c.name if c.name is not None else c.id) for c in cats],
    )


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
    area = None
    if missing:  # as pycocotools/lvis-api: box area when the result has a box, else mask area
        area = bbox[:, 2] * bbox[:, 3]
        area[missing] = marea
    c = _check({"image_id": iid_a, "category_id": cid_a, "bbox": bbox, "score": sc}, offset, what, name, area)
    c["seg"] = seg
    return c


def _struct_checked(c: dict[str, Any], offset: int, what: str, name: str, iou_type: str) -> dict[str, Any]:
    """Finish msgspec columns: masks where segm needs them; boxes (and areas) from masks where a
    result has none, as pycocotools / lvis-api do; then :func:`_check`."""
    seg, missing = c["seg"], c.pop("missing")
    if iou_type == "segm":
        absent = [i for i, x in enumerate(seg) if x is None] if seg is not None else [0]
        if absent:
            raise InputError(f"{what} {name}: detection {offset + absent[0]} lacks 'segmentation' (needed for segm)")
    area = None
    if missing:
        mbox, marea = _boxes_from_masks(seg, missing, offset, what, name)
        area = c["bbox"][:, 2] * c["bbox"][:, 3]
        c["bbox"][missing] = mbox
        area[missing] = marea
    return _check(c, offset, what, name, area)


def _boxes_from_masks(seg: list | None, missing: list[int], offset: int, what: str,
                      name: str) -> tuple[np.ndarray, np.ndarray]:
    """Boxes and mask areas of the results at ``missing`` that have no box, from their RLE masks
    (pycocotools ``toBbox`` / ``area``, as its ``loadRes`` derives them), after checking the masks."""
    if seg is None or any(seg[i] is None for i in missing):
        raise InputError(f"{what} {name}: detection {offset + missing[0]} lacks 'bbox'")
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
    check_masks: bool = True,
) -> dict[str, Any]:
    """Read a results file (streamed) into columns keyed by the file's own ids.

    Returns ``{"image_id", "category_id": (N,) int64, "bbox": (N, 4), "score", "area": (N,) float64,
    "segmentation": list or None}``. Validates scores (finite), boxes (finite, non-negative size),
    ids (integers) and, with ``check_masks``, the masks' form (``check_segmentations``; their sizes
    need the ground truth: :meth:`Detections.from_ids` checks those, and the form with them, so
    :func:`read_results` passes ``check_masks=False``). Masks of results without a box are always
    checked (their box is derived from them). Needs no ground truth (used by ``rerank`` and
    ``calibrate apply``).
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
        chunks = None
    else:
        raise InputError(f"{what}: expected a path or a list of detections, got {type(source).__name__}")
    want_seg = iou_type == "segm" if keep_segmentation is None else keep_segmentation
    if chunks is None:
        chunks = _Stream(p, what, chunk_bytes, with_seg=want_seg)
    try:
        for objs in chunks:
            if isinstance(objs, dict):  # decoded by msgspec into columns
                c = _struct_checked(objs, offset, what, name, iou_type)
            else:  # a list of dicts (in memory, or the standard library's reading of a chunk)
                if not objs:
                    continue
                c = _columns(objs, offset, what, name, iou_type)
                if want_seg and c["seg"] is None:
                    c["seg"] = [o.get("segmentation") if isinstance(o, dict) else None for o in objs]
            if want_seg and c["seg"] is None:
                c["seg"] = [None] * len(c["score"])
            if check_masks and c["seg"] is not None:
                _check_masks(c["seg"], None, offset, what, name)
            offset += len(c["score"])
            cols.append(c)
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} {name}: not a UTF-8 JSON file") from exc
    if not cols:
        z = np.zeros(0, np.int64)
        return {"image_id": z, "category_id": z.copy(), "bbox": np.zeros((0, 4)), "score": np.zeros(0),
                "area": np.zeros(0), "segmentation": [] if want_seg else None}
    # one column at a time, each chunk's piece released as soon as it is copied: the peak is the
    # pieces plus one column, not twice the detections
    out: dict[str, Any] = {k: np.concatenate([c.pop(k) for c in cols])
                           for k in ("image_id", "category_id", "bbox", "score", "area")}
    out["segmentation"] = [x for c in cols for x in c["seg"]] if want_seg else None
    return out


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
    c = read_result_columns(source, iou_type=iou_type, chunk_bytes=chunk_bytes, check_masks=False)
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
