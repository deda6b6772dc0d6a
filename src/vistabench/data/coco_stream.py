"""Streaming decoder of a COCO/LVIS results JSON list: chunks of whole objects decoded by msgspec
into typed records and then into columns (:func:`struct_columns`).

:class:`ResultStream` reads a file, or one *region* of it (the first objects up to a byte offset, or
the objects from an offset on), so that two processes can decode the two halves of a large file
(:mod:`.forked`). Used by :mod:`vistabench.data.coco`, which validates the columns.
"""

from __future__ import annotations

import gc
import itertools
import json
import math
import operator
import re
from pathlib import Path
from typing import Any, BinaryIO, Iterator, Optional

import msgspec
import numpy as np

from ..errors import InputError

__all__ = ["CHUNK_BYTES", "Box", "ResultStream", "struct_columns", "element_boundary"]

# The chunk a results file is decoded in. A box chunk becomes one list of Python floats (7 per
# detection) before numpy copies it; those floats fill CPython's small-object arenas (1 MiB each),
# and when the list is freed CPython gives all but one empty arena back to the system, so a chunk
# whose floats need several arenas faults that many fresh pages in again, chunk after chunk. At
# 256 KiB the floats of a chunk (about 0.5 MiB) stay in one arena that every chunk reuses: on the
# 1,000-image benchmark set the read is 1.10x-1.18x as fast as with 2 MiB chunks, with a quarter to
# a half of the page faults, and 1.07x at LVIS-val size (benchmarks/detection_read_chunks.py).
CHUNK_BYTES = 256 << 10

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


def struct_columns(objs: list, with_seg: bool) -> dict[str, Any]:
    """Columns of decoded records: ids int64, score float64, bbox (n, 4) (NaN rows where absent)."""
    n = len(objs)
    # one pass for the three scalars (a (image_id, category_id, score) tuple per record into a
    # structured array: a third of the per-record cost of three passes), then plain columns
    rec = np.fromiter(map(_GET_SCALARS, objs), _SCALARS, n)
    iid, cid, score = (np.ascontiguousarray(rec[k]) for k in ("image_id", "category_id", "score"))
    del rec
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


# The plain-records path: a chunk whose objects all have exactly the keys image_id, category_id, bbox
# (4 numbers) and score, with the same key order and layout, and no exponent in any number (what
# detectors and json.dump write), is decoded as one flat list of numbers: no record objects, no bbox
# tuples. Anything else (another key, a string, null, an exponent, a layout that changes inside the
# chunk) returns None and the chunk goes through the typed records above, which report errors.
_ID_KEYS, _KEYS = ("image_id", "category_id"), ("image_id", "category_id", "bbox", "score")
_JSON_WS = b" \t\r\n"
_WS = rb"[ \t\r\n]*"
_NUM = rb"\.?"  # a number's skeleton: its digits and signs removed, a decimal point left (no exponent)
_ENTRY = re.compile(rb'"(image_id|category_id|score|bbox)"' + _WS + rb":" + _WS + rb"(\[" + _WS
                    + (rb"," + _WS).join([_NUM + _WS] * 4) + rb"\]|" + _NUM + rb")")
_OBJECT = re.compile(rb"\{" + _WS + (rb"," + _WS).join([rb"(" + _ENTRY.pattern + rb")" + _WS] * 4)
                     + rb"\}")
_DIGITS = b"0123456789-"
# every character of the four keys, their quotes and the brackets: what is left is the numbers
_NOT_NUMBERS = bytes(sorted(set(b"".join(k.encode() for k in _KEYS)) | set(b'":{}[]')))
_LAYOUTS: dict[bytes, tuple[str, ...] | None] = {}
_FLAT = msgspec.json.Decoder(list[float])
_EXACT_INT = float(2**53)  # ids below this in magnitude are exact as float64


def _layout(pattern: bytes) -> tuple[str, ...] | None:
    """The key order of an object skeleton (``{"image_id":,"category_id":,"bbox":[.,.,.,.],"score":.}``)
    when it is a plain record: the four keys once each, integer ids, a 4-number bbox; else None."""
    if pattern not in _LAYOUTS:
        m = _OBJECT.fullmatch(pattern)
        keys = None
        if m is not None:
            keys = tuple(_ENTRY.match(m.group(i)).group(1).decode() for i in (1, 4, 7, 10))
            values = [_ENTRY.match(m.group(i)).group(2) for i in (1, 4, 7, 10)]
            ok = sorted(keys) == sorted(_KEYS) and all(
                v == b"" if k in _ID_KEYS else v.startswith(b"[") == (k == "bbox") for k, v in zip(keys, values))
            keys = keys if ok else None
        if len(_LAYOUTS) < 64:
            _LAYOUTS[pattern] = keys
        return keys
    return _LAYOUTS[pattern]


def flat_columns(data: bytes) -> dict[str, Any] | None:
    """Columns of ``data`` (a JSON list of plain box records) as :func:`struct_columns` gives them,
    decoded as one list of numbers; None when ``data`` is not such a list (the caller decodes it
    as records). The numbers are msgspec's (the same parser as the records'), so the columns are
    identical."""
    sk = data.translate(None, _DIGITS)  # the skeleton: keys, punctuation, decimal points, whitespace
    if not (sk.startswith(b"[") and sk.endswith(b"]")):
        return None
    sk = sk[1:-1].strip(_JSON_WS)
    end = sk.find(b"}")
    if not sk.startswith(b"{") or end < 0:
        return None
    pat = sk[: end + 1]
    keys = _layout(pat)
    if keys is None:
        return None
    nxt = sk.find(b"{", end)
    sep = b"," if nxt < 0 else sk[end + 1: nxt]
    if sep.strip(_JSON_WS) != b",":
        return None
    n, rest = divmod(len(sk) + len(sep), len(pat) + len(sep))
    if rest or sk != sep.join([pat] * n):
        return None
    try:
        v = np.array(_FLAT.decode(b"[" + data.translate(None, _NOT_NUMBERS) + b"]"), np.float64)
    except msgspec.DecodeError:  # a malformed number: the records' decoding reports it
        return None
    if v.size != 7 * n:
        return None
    v = v.reshape(n, 7)
    col = {}
    j = 0
    for k in keys:
        col[k] = j
        j += 4 if k == "bbox" else 1
    ids = v[:, [col["image_id"], col["category_id"]]]
    if n and not np.abs(ids).max() < _EXACT_INT:
        return None
    b = col["bbox"]
    return {"image_id": ids[:, 0].astype(np.int64), "category_id": ids[:, 1].astype(np.int64),
            "score": np.ascontiguousarray(v[:, col["score"]]), "bbox": np.ascontiguousarray(v[:, b: b + 4]),
            "seg": None, "missing": []}


_GET_BBOX, _GET_SEG = (operator.attrgetter(k) for k in ("bbox", "segmentation"))
_GET_SCALARS = operator.attrgetter("image_id", "category_id", "score")
_SCALARS = np.dtype([("image_id", np.int64), ("category_id", np.int64), ("score", np.float64)])


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


class ResultStream:
    """A JSON array of detection objects read in chunks of whole objects, decoded by msgspec.

    Each chunk is cut after a ``}`` and decoded as ``[chunk]``; if the cut falls inside an object
    (a nested ``}``), the previous ``}`` is tried. A genuine error repeats at the same place for two
    cuts and is reported; an object longer than the buffer makes the buffer grow. Memory: one
    buffer of about ``chunk_bytes`` plus the decoded chunk. Input that msgspec refuses but the
    standard library accepts (``NaN``, ``Infinity``) goes through :mod:`json` for that chunk.
    """

    def __init__(self, path: Path, what: str, chunk_bytes: int, with_seg: bool, *, start: int = 0,
                 end: int | None = None):
        self.path, self.where, self.chunk = path, f"{what} {str(path)!r}", max(int(chunk_bytes), 64)
        self.dec = _decoder(with_seg)
        self.with_seg = with_seg
        self.start, self.end = int(start), end  # a region: [start, end) of the file's list elements

    def malformed(self, msg: str) -> InputError:
        return InputError(f"{self.where}: malformed JSON ({msg})")

    def __iter__(self) -> Iterator[Any]:
        with open(self.path, "rb") as fh:
            f = _Region(fh, self.start, self.end)
            buf = f.read(self.chunk)
            base = self.start - 1 if self.start else 0  # file offset of buf[0] (a region's "[" is virtual)
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
        if not self.with_seg and cut >= 0:
            flat = flat_columns(b"".join((b"[", memoryview(buf)[: cut + 1], b"]")))
            if flat is not None:
                return flat, cut
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
            cols = struct_columns(objs, self.with_seg)
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



class _Region:
    """A file's bytes ``[start, end)`` read as a JSON list: a ``[`` before them when ``start`` > 0
    (the objects from ``start`` on) and a ``]`` after them when ``end`` is given."""

    def __init__(self, f: BinaryIO, start: int, end: int | None):
        self.f = f
        if start:
            f.seek(start)
        self.head = b"[" if start else b""
        self.left = None if end is None else max(end - start, 0)
        self.tail = b"" if end is None else b"]"

    def read(self, n: int = -1) -> bytes:
        head, self.head = self.head, b""
        if self.left is None:
            return head + (self.f.read() if n < 0 else self.f.read(n))
        k = self.left if n < 0 else min(n, self.left)
        body = self.f.read(k) if k > 0 else b""
        self.left -= len(body)
        if self.left == 0 or not body:  # the region's end closes its list (once)
            body, self.tail = body + self.tail, b""
        return head + body


_BOUNDARY = re.compile(rb"\}\s*,\s*\{")


def element_boundary(path: Path, near: int, window: int = 1 << 20) -> tuple[int, int] | None:
    """``(end, start)`` around the first ``}`` , ``{`` at or after byte ``near`` of the file: the
    objects before ``end`` and from ``start`` on, *if* that ``}`` closes a top-level object (the
    caller checks: the part before ``end`` must decode as a whole list). None when the window after
    ``near`` has no such place."""
    with open(path, "rb") as f:
        f.seek(near)
        buf = f.read(window)
    m = _BOUNDARY.search(buf)
    if m is None:
        return None
    return near + m.start() + 1, near + m.end() - 1
