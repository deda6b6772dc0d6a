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
import math
import os
from pathlib import Path
from typing import Any, Iterator, Literal

import numpy as np

from ..errors import InputError
from ..metrics.detection_data import Detections, GroundTruth

_CHUNK = 8 << 20


def _name(source: Any) -> str:
    return repr(str(source)) if isinstance(source, (str, os.PathLike)) else "(in memory)"


def _load_json(path: str | os.PathLike[str], what: str) -> Any:
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{what} {str(path)!r}: no such file")
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

    with open(path, "r", encoding="utf-8") as f:
        buf = f.read(chunk_bytes).lstrip()
        eof = False
        if not buf.startswith("["):
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
            if buf[0] == "]" and (need_sep or first):
                if buf[1:].strip() or f.read().strip():
                    raise malformed("extra data after the list")
                return
            if need_sep:
                if buf[0] != ",":
                    raise malformed(f"expected ',' or ']' between detections, found {buf[:20]!r}")
                buf = buf[1:]
                need_sep = False
                continue
            cut = buf.rfind("}")
            objs = None
            while cut >= 0:
                try:
                    objs = json.loads("[" + buf[: cut + 1] + "]")
                    break
                except json.JSONDecodeError:
                    cut = buf.rfind("}", 0, cut)
            if objs is None:
                if eof:
                    try:
                        json.loads("[" + buf)
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
        sc = np.asarray(score, dtype=np.float64)
    except (ValueError, TypeError) as exc:
        raise InputError(f"{what} {name}: detections {offset}..{offset + len(objs) - 1}: every 'bbox' must be "
                         f"4 numbers and every 'score' a number") from exc
    area = bbox[:, 2] * bbox[:, 3]
    if missing:  # as pycocotools/lvis-api: box area when the result has a box, else mask area
        import pycocotools.mask as mask_utils

        for i in missing:
            area[i] = float(mask_utils.area(seg[i]))
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
    try:
        iid_a = np.asarray(iid, dtype=np.int64)
        cid_a = np.asarray(cid, dtype=np.int64)
    except (ValueError, TypeError, OverflowError) as exc:
        raise InputError(f"{what} {name}: detections {offset}..{offset + len(objs) - 1}: 'image_id' and "
                         f"'category_id' must be integers") from exc
    return {"image_id": iid_a, "category_id": cid_a, "bbox": bbox, "score": sc, "area": area, "seg": seg}


def read_results(
    source: str | os.PathLike[str] | list,
    gt: GroundTruth,
    *,
    iou_type: Literal["bbox", "segm"] = "bbox",
    chunk_bytes: int = _CHUNK,
) -> Detections:
    """Read a COCO/LVIS results file (a JSON list of ``{image_id, category_id, bbox, score}`` and,
    for masks, ``segmentation`` RLE) against ``gt``; streamed in chunks.

    Unknown image or category ids are an error; when *no* image id is known the message says the
    file belongs to another dataset.
    """
    what = "--results"
    name = _name(source)
    cols: list[dict[str, Any]] = []
    offset = 0
    if isinstance(source, list):
        chunks: Any = [source]
    elif isinstance(source, (str, os.PathLike)):
        p = Path(source)
        if not p.is_file():
            raise InputError(f"{what} {str(source)!r}: no such file")
        chunks = _iter_chunks(p, what, chunk_bytes)
    else:
        raise InputError(f"{what}: expected a path or a list of detections, got {type(source).__name__}")
    for objs in chunks:
        if not objs:
            continue
        c = _columns(objs, offset, what, name, iou_type)
        offset += len(objs)
        cols.append(c)
    if not cols:
        return Detections.empty()
    iid = np.concatenate([c["image_id"] for c in cols])
    cid = np.concatenate([c["category_id"] for c in cols])
    known = np.isin(iid, gt.image_ids)
    if not np.any(known):
        raise InputError(f"{what} {name}: none of its {len(np.unique(iid))} image ids are in the ground truth "
                         f"(e.g. {int(iid[0])}); a results file for a different dataset?")
    seg = None
    if iou_type == "segm":
        seg = [s for c in cols for s in c["seg"]]
    try:
        return Detections.from_ids(gt, image_id=iid, category_id=cid,
                                   bbox=np.concatenate([c["bbox"] for c in cols]),
                                   score=np.concatenate([c["score"] for c in cols]), segmentation=seg,
                                   area=np.concatenate([c["area"] for c in cols]))
    except InputError as exc:
        raise InputError(f"{what} {name}: {exc}") from exc


def write_results(path: str | os.PathLike[str], gt: GroundTruth, dets: Detections) -> Path:
    """Write detections as a COCO/LVIS results JSON list (ids from ``gt``), streamed."""
    p = Path(path)
    if p.parent and not p.parent.exists():
        p.parent.mkdir(parents=True, exist_ok=True)
    img = gt.image_ids[dets.image].tolist()
    cat = gt.category_ids[dets.category].tolist()
    box = dets.bbox.tolist()
    sc = dets.score.tolist()
    tmp = p.with_name(p.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("[")
        for i in range(len(sc)):
            o = {"image_id": img[i], "category_id": cat[i], "bbox": box[i], "score": sc[i]}
            if dets.segmentation is not None:
                s = dets.segmentation[i]
                if isinstance(s, dict) and isinstance(s.get("counts"), bytes):
                    s = {"size": s["size"], "counts": s["counts"].decode("ascii")}
                o["segmentation"] = s
            f.write(("," if i else "") + json.dumps(o, allow_nan=False))
        f.write("]")
    os.replace(tmp, p)
    return p
