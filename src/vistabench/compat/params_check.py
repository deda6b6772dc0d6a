"""The evaluation parameters of the drop-ins checked before anything is scored.

pycocotools and lvis-api score whatever their ``params`` hold: an IoU threshold of 1.5 or NaN, no
recall points, ``maxDets`` 0 or an area range whose low end is above its high end all give -1 or 0
everywhere without a word, and an empty list or labels that do not match the ranges end in an
``IndexError`` deep inside ``summarize``. Here each is one line naming the field; where the tool
raises, the error is an instance of the type it raises (``IndexError``) as well as an
:class:`~vistabench.errors.InputError` (a ``ValueError``), so both kinds of ``except`` keep working.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..errors import InputError, InputIndexError

__all__ = ["check_thresholds", "check_max_dets", "check_area_ranges", "zero_id_message"]


def _numbers(values: Any, field: str) -> np.ndarray:
    try:
        a = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"{field}: expected a list of numbers, got {values!r}") from None
    if a.ndim != 1:
        raise InputError(f"{field}: expected a flat list of numbers, got shape {a.shape}")
    return a


def check_thresholds(values: Any, field: str, *, empty_is_index_error: bool) -> np.ndarray:
    """IoU or recall thresholds: a non-empty list of numbers in [0, 1]. ``empty_is_index_error``:
    the tool indexes the first value (pycocotools' ``iouThrs`` in ``summarize``)."""
    a = _numbers(values, field)
    if a.size == 0:
        cls = InputIndexError if empty_is_index_error else InputError
        raise cls(f"{field}: empty; give at least one threshold in [0, 1]")
    bad = np.flatnonzero(~np.isfinite(a) | (a < 0) | (a > 1))
    if bad.size:
        raise InputError(f"{field}: {float(a[bad[0]])!r} is not a threshold in [0, 1] (no match or recall could reach it)")
    return a


def check_max_dets(values: Any, field: str, *, need: int = 1) -> list[int]:
    """Detection limits: at least ``need`` positive integers (``need`` values are indexed by the
    tool's summary: an ``IndexError`` there)."""
    a = _numbers(values, field)
    if a.size < need:
        raise InputIndexError(f"{field}: {a.size} value(s) {a.astype(int).tolist() if np.all(np.isfinite(a)) else values!r}; "
                              f"the summary reads {need} (e.g. [1, 10, 100])")
    bad = np.flatnonzero(~np.isfinite(a) | (a < 1) | (a != np.round(a)))
    if bad.size:
        raise InputError(f"{field}: {values[bad[0]]!r} is not a positive whole number of detections per image")
    return [int(v) for v in a]


def check_area_ranges(ranges: Any, labels: Sequence | None, field: str, label_field: str) -> np.ndarray:
    """(A, 2) ``[low, high]`` pairs, A >= 1, low <= high (inf allowed as high), one label per range."""
    try:
        a = np.asarray(ranges, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"{field}: expected pairs [low, high], got {ranges!r}") from None
    if a.ndim != 2 or a.shape[1] != 2 or a.shape[0] == 0:
        raise InputError(f"{field}: expected a non-empty list of pairs [low, high], got {ranges!r}")
    bad = np.flatnonzero(np.isnan(a).any(1) | (a[:, 0] > a[:, 1]) | np.isinf(a[:, 0]))
    if bad.size:
        raise InputError(f"{field}: range {int(bad[0])} {a[bad[0]].tolist()} is not [low, high] with "
                         f"low <= high (no area lies in it)")
    if labels is not None and len(labels) != len(a):
        # more labels than ranges: pycocotools indexes past the ranges (IndexError); fewer: it scores -1
        cls = InputIndexError if len(labels) > len(a) else InputError
        raise cls(f"{label_field}: {len(labels)} label(s) for {len(a)} area range(s) in {field}; "
                              f"give one label per range")
    return a


def zero_id_message(what: str, option: str) -> str:
    return (f"{what}: a ground-truth annotation has id 0, which the official tool reads as 'unmatched': a "
            f"detection matched to it counts as a false positive. Scored as the tool does; {option} counts "
            f"it as matched")
