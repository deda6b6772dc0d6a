"""Masks: COCO/LVIS segmentations (polygons, uncompressed or compressed RLE), validated before
pycocotools sees them, and turned into compressed RLE as ``LVIS.ann_to_rle`` / ``COCO.annToRLE`` do.

pycocotools' C code trusts its input: an RLE without ``size`` or a string segmentation ends in a
KeyError deep inside it, negative counts overflow, and a compressed ``counts`` string that is not
its 6-bit code is undefined behaviour (it reads past the string). :func:`check_segmentations` checks,
one vectorised pass for all compressed strings:

* a segmentation is a list of polygons or one RLE object ``{"size": [h, w], "counts": ...}``;
* a polygon is a list of at least 6 finite numbers (3 points), an even number of them;
* ``counts`` is a list of non-negative integers or a string of pycocotools' code (characters
  ``0``..``o``, each value ending with a character without the continuation bit, at most 7 per
  value) whose decoded counts are non-negative; either way they sum to ``h * w``;
* with the images' sizes given, polygons need that size to be known; an RLE whose ``size`` is not
  its image's (height, width) is taken as pycocotools takes it (it matches only masks of its own
  size) with one warning saying how many and which first.

>>> check_segmentations([{"size": [2, 3], "counts": [1, 4, 1]}, [[0, 0, 2, 0, 2, 1]]], what="detection")
>>> check_segmentations([{"size": [2, 3], "counts": [1, 4]}], what="detection")
Traceback (most recent call last):
...
vistabench.errors.InputError: detection 0, segmentation.counts: the counts sum to 5, not h*w = 6 for size [2, 3]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import InputError

MIN_POLYGON_NUMBERS = 6  # 3 points; pycocotools reads a 4-number "polygon" as a box
MAX_CODE_GROUPS = 7  # 6-bit characters per count: 7 x 5 bits covers any h * w below 2^35
_NUMBER_TYPES = {int, float, np.float64, np.float32, np.int64, np.int32}


def to_rle(segm: Any, h: int, w: int) -> Any:
    """Polygon / uncompressed RLE / RLE -> compressed RLE (as ``LVIS.ann_to_rle``)."""
    import pycocotools.mask as mask_utils

    if isinstance(segm, list):
        return mask_utils.merge(mask_utils.frPyObjects(segm, h, w))
    if isinstance(segm.get("counts"), list):
        return mask_utils.frPyObjects(segm, h, w)
    if isinstance(segm.get("counts"), str):
        return {"size": segm["size"], "counts": segm["counts"].encode("ascii")}
    return segm


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _size_problem(size: Any) -> str | None:
    if not isinstance(size, (list, tuple)) or len(size) != 2 or not all(_is_int(v) for v in size):
        return f"expected [height, width] (two integers), got {str(size)[:60]}"
    if size[0] < 0 or size[1] < 0:
        return f"expected a non-negative [height, width], got {list(size)}"
    return None


#: polygon coordinates beyond this (in pixels) are refused: far outside any image, and pycocotools'
#: rasteriser walks every (5x up-sampled) pixel of an edge, so 1e300 hangs it and exhausts memory
MAX_POLYGON_COORDINATE = 1e5


def _polygon_problem(segm: list) -> tuple[str, str] | None:
    """(field, problem) of the first bad polygon of a polygon list, or None."""
    if not segm:
        return "", "expected a list of polygons or an RLE object, got an empty list"
    for j, poly in enumerate(segm):
        if not isinstance(poly, (list, tuple)):
            kind = "an RLE object" if isinstance(poly, dict) else type(poly).__name__
            return (f"[{j}]", f"expected a polygon (a list of x, y numbers), got {kind}"
                    + ("; a segmentation is a list of polygons or one RLE object" if j == 0 else ""))
        n = len(poly)
        if n < MIN_POLYGON_NUMBERS or n % 2:
            return f"[{j}]", (f"a polygon needs an even number of at least {MIN_POLYGON_NUMBERS} numbers "
                              f"(x, y of 3 or more points), got {n}")
        if not set(map(type, poly)) <= _NUMBER_TYPES:
            return f"[{j}]", f"expected numbers, got {str(poly)[:60]}"
        xy = np.fromiter(poly, np.float64, n)
        if not np.all(np.isfinite(xy)):
            return f"[{j}]", "a polygon has a non-finite coordinate"
        if np.any(np.abs(xy) > MAX_POLYGON_COORDINATE):
            return f"[{j}]", (f"a polygon coordinate is {float(xy[np.argmax(np.abs(xy))]):g}: beyond "
                              f"±{MAX_POLYGON_COORDINATE:g} px, far outside any image (pycocotools would "
                              "rasterise every pixel up to it)")
    return None


def decode_rle_counts(strings: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Decode pycocotools' compressed RLE strings (``rleFrString``), all at once.

    Returns ``(counts, owner, bad, bad_reason)``: the decoded counts (int64, in string order),
    the string each belongs to, and per string a bool "undecodable" with a reason code
    (1 character outside ``0``..``o``, 2 ends inside a count, 3 a count too long, 4 a negative count).
    """
    n = len(strings)
    lens = np.fromiter(map(len, strings), np.int64, n)
    c = np.frombuffer(b"".join(strings), np.uint8).astype(np.int64) - 48
    owner_c = np.repeat(np.arange(n), lens)
    reason = np.zeros(n, np.int8)
    badc = (c < 0) | (c > 63)
    if badc.any():
        reason[np.unique(owner_c[badc])] = 1
        c = np.where(badc, 0, c)
    last = np.cumsum(lens) - 1
    cont = (c & 0x20) != 0
    has = lens > 0
    unfinished = np.zeros(n, bool)
    unfinished[has] = cont[last[has]]
    reason[(reason == 0) & unfinished] = 2
    end = ~cont
    end[last[has]] = True  # an unfinished string's tail is one (already refused) value
    ends = np.flatnonzero(end)
    starts = np.r_[0, ends[:-1] + 1] if len(ends) else np.zeros(0, np.int64)
    k = np.arange(len(c)) - np.repeat(starts, ends - starts + 1)
    long_ = k >= MAX_CODE_GROUPS
    if long_.any():
        o = np.unique(owner_c[long_])
        reason[o] = np.where(reason[o] == 0, 3, reason[o])
        k = np.minimum(k, MAX_CODE_GROUPS - 1)
    x = np.add.reduceat((c & 0x1F) << (5 * k), starts) if len(starts) else np.zeros(0, np.int64)
    sign = (c[ends] & 0x10) != 0
    x = x - np.where(sign, np.left_shift(1, 5 * (k[ends] + 1)), 0)
    owner = owner_c[ends]
    # position of each value in its string; count m > 2 adds count m - 2 (two interleaved cumsums)
    first = np.r_[True, owner[1:] != owner[:-1]] if len(owner) else np.zeros(0, bool)
    vstart = np.flatnonzero(first)
    m = np.arange(len(x)) - np.repeat(vstart, np.diff(np.r_[vstart, len(x)]))
    counts = x.copy()
    for parity, lo in ((1, 1), (0, 2)):
        sel = np.flatnonzero((m % 2 == parity) & (m >= lo))
        if len(sel):
            cs = np.cumsum(x[sel])
            seg_first = np.r_[True, owner[sel][1:] != owner[sel][:-1]]
            base = np.repeat(cs[seg_first] - x[sel][seg_first], np.diff(np.r_[np.flatnonzero(seg_first), len(sel)]))
            counts[sel] = cs - base
    neg = counts < 0
    if neg.any():
        o = np.unique(owner[neg])
        reason[o] = np.where(reason[o] == 0, 4, reason[o])
    return counts, owner, reason != 0, reason


_REASONS = {1: "a character outside pycocotools' code '0'..'o'", 2: "it ends inside a count",
            3: f"a count longer than {MAX_CODE_GROUPS} characters", 4: "a negative count"}


def check_segmentations(
    segs: Sequence[Any],
    *,
    what: str,
    offset: int = 0,
    sizes: np.ndarray | None = None,
    image_ids: np.ndarray | None = None,
    positions: np.ndarray | None = None,
) -> None:
    """Raise one :class:`InputError` naming ``{what} {offset + i}`` and the field for the first bad
    segmentation (see the module). ``sizes`` (n, 2) int: each one's image (height, width), 0 where
    unknown; ``image_ids`` (n,): the image ids for the message; ``positions`` (n,): the number each
    segmentation has in the message (default its index), when ``segs`` is a subset."""
    compressed: list[int] = []
    raw: list[bytes] = []
    other_size: list[str] = []  # the first RLE whose size is not its image's, then one entry per such RLE

    def fail(i: int, field: str, problem: str) -> None:
        at = offset + (i if positions is None else int(positions[i]))
        raise InputError(f"{what} {at}, segmentation{field}: {problem}")

    def image_of(i: int) -> str:
        return f"image {int(image_ids[i])}" if image_ids is not None else "its image"

    for i, s in enumerate(segs):
        if isinstance(s, list):
            p = _polygon_problem(s)
            if p is not None:
                fail(i, *p)
            if sizes is not None and (sizes[i, 0] <= 0 or sizes[i, 1] <= 0):
                fail(i, "", f"a polygon needs its image's height and width, and {image_of(i)} has none "
                            f"in the ground truth")
            continue
        if not isinstance(s, dict):
            got = "nothing (null)" if s is None else f"a {type(s).__name__}"
            fail(i, "", f"expected a list of polygons or an RLE object {{'size': [h, w], 'counts': ...}}, got {got}")
        if "size" not in s:
            fail(i, "", "an RLE object needs 'size' [height, width]")
        if "counts" not in s:
            fail(i, "", "an RLE object needs 'counts'")
        size = s["size"]
        prob = _size_problem(size)
        if prob is not None:
            fail(i, ".size", prob)
        known = sizes is not None and sizes[i, 0] > 0 and sizes[i, 1] > 0  # 0: the image's size is unknown
        if known and (int(size[0]) != sizes[i, 0] or int(size[1]) != sizes[i, 1]):
            if not other_size:
                at = offset + (i if positions is None else int(positions[i]))
                other_size.append(f"{what} {at}'s mask is {list(map(int, size))} (height, width) but {image_of(i)} "
                                  f"is {[int(sizes[i, 0]), int(sizes[i, 1])]}")
            other_size.append("")
        counts = s["counts"]
        hw = int(size[0]) * int(size[1])
        if isinstance(counts, (list, tuple)):
            if not all(_is_int(v) for v in counts):
                fail(i, ".counts", "uncompressed counts must be integers")
            a = np.asarray(counts, np.int64) if counts else np.zeros(0, np.int64)
            if np.any(a < 0):
                fail(i, ".counts", f"negative count {int(a[a < 0][0])}")
            if int(a.sum()) != hw:
                fail(i, ".counts", f"the counts sum to {int(a.sum())}, not h*w = {hw} for size {list(size)}")
        elif isinstance(counts, (str, bytes)):
            if isinstance(counts, str):
                try:
                    counts = counts.encode("ascii")
                except UnicodeEncodeError:
                    fail(i, ".counts", "a compressed RLE string is ASCII ('0'..'o'), got other characters")
            compressed.append(i)
            raw.append(counts)
        else:
            fail(i, ".counts", f"expected a compressed RLE string or a list of integers, got {type(counts).__name__}")
    if compressed:
        _check_compressed(segs, compressed, raw, fail)
    if other_size:
        warn_other_size(f"{len(other_size) - 1} mask(s) of another size than their image (first: {other_size[0]})")


def warn_other_size(what: str) -> None:
    """The warning for RLE masks whose ``size`` is not their image's: pycocotools takes them as they
    are (an IoU between masks of two sizes is -1: never a match), and so do we, saying so."""
    import warnings

    warnings.warn(f"{what}; scored as pycocotools scores them: such a mask matches only masks of its own size",
                  UserWarning, stacklevel=3)


def _check_compressed(segs: Sequence[Any], compressed: list[int], raw: list[bytes], fail: Any) -> None:
    """The compressed RLE strings ``raw`` (of ``segs[compressed]``) decode and sum to h * w."""
    counts, owner, bad, reason = decode_rle_counts(raw)
    total = np.bincount(owner, weights=counts, minlength=len(raw)) if len(counts) else np.zeros(len(raw))
    hw = np.array([math.prod(int(v) for v in segs[i]["size"]) for i in compressed], np.float64)
    wrong = bad | (total != hw)
    if wrong.any():
        j = int(np.flatnonzero(wrong)[0])
        i = compressed[j]
        if bad[j]:
            fail(i, ".counts", f"undecodable compressed RLE: {_REASONS[int(reason[j])]}")
        fail(i, ".counts", f"the compressed counts sum to {int(total[j])}, not h*w = {int(hw[j])} "
                           f"for size {list(segs[i]['size'])}")
