"""COCO / LVIS v1 ground-truth reader: the whole file decoded into typed records, checked, and
turned into :class:`~vistabench.metrics.detection.GroundTruth` arrays (results files are streamed by
:mod:`vistabench.data.coco`, which re-exports :func:`read_ground_truth`).

Bad input raises :class:`~vistabench.errors.InputError` with one line naming the file and the
problem: malformed JSON, missing fields, duplicate or unknown ids, bad boxes or segmentations.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from typing import Any, Literal, Optional, Union

import msgspec
import numpy as np

from ..errors import InputError, InputKeyError
from ..metrics.detection import GroundTruth, check_segmentations, to_rle
from .coco_stream import Box

__all__ = ["read_ground_truth", "source_name"]


def source_name(source: Any) -> str:
    """How a message names a JSON source: its path quoted, or ``(in memory)`` for a loaded object."""
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
    area: float
    bbox: Optional[Box] = None  # absent: the mask's box in segm (as pycocotools), else an error
    ignore: Union[bool, int] = 0
    iscrowd: Union[bool, int] = 0


class _AnnSeg(_Ann, gc=False):
    segmentation: Any = None


class _AnnKp(_Ann, gc=False):
    keypoints: Optional[list[float]] = None
    num_keypoints: Optional[int] = None


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


class _GtKp(msgspec.Struct, gc=False):
    images: list[_Image]
    annotations: list[_AnnKp]
    categories: list[_Cat]


_MISSING = re.compile(r"missing required field `(\w+)`")


def _gt_error(exc: Exception, where: str) -> InputError:
    msg = str(exc)
    m = _MISSING.search(msg)
    at = msg.rsplit(" - at ", 1)[-1].strip("`") if " - at " in msg else ""
    if m:
        return InputKeyError(f"{where}: an entry lacks the field {m.group(1)!r} (at {at})")
    if "Expected `object`, got" in msg and at == "$":
        return InputError(f"{where}: expected a COCO/LVIS object with 'images', 'annotations' and 'categories', "
                          f"got {msg.split('got `')[-1].split('`')[0]}")
    if isinstance(exc, msgspec.ValidationError):
        return InputError(f"{where}: {msg.replace('`', '')}")
    return InputError(f"{where}: malformed JSON ({msg.replace('JSON is malformed: ', '')})")


def _decode_ground_truth(source: Any, with_segmentation: bool, what: str, with_keypoints: bool = False) -> Any:
    """A COCO/LVIS ground-truth file or dict as typed records (unknown keys skipped)."""
    typ = _GtKp if with_keypoints else _GtSeg if with_segmentation else _Gt
    where = f"{what} {source_name(source)}"
    try:
        if isinstance(source, dict):
            return msgspec.convert(source, typ)
        from .._validation import check_json_file

        p = check_json_file(source, what, expected="a COCO/LVIS ground-truth JSON file")
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
    with_keypoints: bool = False,
) -> GroundTruth:
    """Read COCO or LVIS v1 ground truth (a path or an already-parsed dict).

    ``format="auto"`` picks LVIS when every image has ``neg_category_ids`` and
    ``not_exhaustive_category_ids`` and COCO when none has (a mix is an error); the choice is
    recorded in the result's ``format``. ``with_segmentation`` keeps the masks (for ``segm``);
    ``with_keypoints`` the ``keypoints`` and ``num_keypoints`` of every annotation (for keypoints).
    Decoded by msgspec into typed records: extra keys are skipped, key order is free.
    """
    what = "gt"
    name = source_name(source)
    if with_segmentation and with_keypoints:
        raise InputError("with_segmentation, with_keypoints: one overlap at a time (segm or keypoints)")
    data = _decode_ground_truth(source, with_segmentation, what, with_keypoints)
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
            raise InputKeyError(f"{what} {name}: annotation {absent[0]} (id {anns[absent[0]].id}) lacks 'segmentation'; "
                             f"iou_type 'segm' needs one in every annotation")
    _fill_boxes(anns, images, seg, f"{what} {name}")
    kp = None
    if with_keypoints:
        for field in ("keypoints", "num_keypoints"):
            absent = next((i for i, a in enumerate(anns) if getattr(a, field) is None), None)
            if absent is not None:
                raise InputKeyError(f"{what} {name}: annotation {absent} (id {anns[absent].id}) lacks {field!r}; "
                                    f"keypoints evaluation needs it in every annotation")  # pycocotools: KeyError
        kp = ([a.keypoints for a in anns], [a.num_keypoints for a in anns])
    for kind, ids in (("annotation", [a.id for a in anns]), ("image", [im.id for im in images]),
                      ("category", [c.id for c in cats])):
        values, counts = np.unique(np.asarray(ids, dtype=np.int64), return_counts=True)
        if np.any(counts > 1):  # the official tools silently keep one of each duplicate id
            raise InputError(f"{what} {name}: duplicate {kind} ids {values[counts > 1][:5].tolist()}; "
                             f"every {kind} needs its own id")
    try:
        gt = _ground_truth_arrays(images, anns, cats, format, freq, seg, kp)
    except InputError as exc:
        raise InputError(f"{what} {name}: {exc}") from exc
    if kp is not None and format != "coco":
        raise InputError(f"{what} {name}: keypoints evaluation needs COCO-style ground truth, got LVIS")
    return gt


def _fill_boxes(anns: list, images: list, seg: list | None, where: str) -> None:
    """Give an annotation without ``bbox`` its mask's box when the masks are read (segm), as
    pycocotools does (it never reads the box there); without masks it is an error, as pycocotools'
    ``KeyError`` in bbox mode."""
    missing = [i for i, a in enumerate(anns) if a.bbox is None]
    if not missing:
        return
    if seg is None:
        i = missing[0]
        raise InputKeyError(f"{where}: annotation {i} (id {anns[i].id}) lacks 'bbox' ({len(missing)} such); box and "
                            f"keypoint evaluation read it (mask evaluation takes the mask's box)")
    import pycocotools.mask as mask_utils

    size = {im.id: (int(im.height), int(im.width)) for im in images}
    segs = [seg[i] for i in missing]
    check_segmentations(segs, what="annotation", positions=np.asarray(missing))
    for i in missing:
        h, w = size.get(anns[i].image_id, (0, 0))
        s = seg[i]
        if isinstance(s, list) and not (h > 0 and w > 0):
            raise InputError(f"{where}: annotation {i} (id {anns[i].id}) lacks 'bbox' and its polygon's box needs "
                             f"its image's height and width")
        rle = to_rle(s, h, w) if isinstance(s, list) else to_rle(s, int(s["size"][0]), int(s["size"][1]))
        anns[i].bbox = [float(v) for v in np.asarray(mask_utils.toBbox(rle), np.float64).reshape(4)]


def _ground_truth_arrays(images: list, anns: list, cats: list, format: str, freq: list | None,
                         seg: list | None, kp: tuple | None = None) -> GroundTruth:
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
        keypoints=None if kp is None else kp[0], num_keypoints=None if kp is None else kp[1],
    )
