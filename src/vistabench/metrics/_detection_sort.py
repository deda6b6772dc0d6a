"""Sorting helpers shared by the detection evaluator: one score sort, then radix passes.

Every ordering the evaluation needs (top-k per image or category, the canonical order, the
pooled ranking, the (image, category) groups) is "by some small integer keys, then by descending
score, ties in file order". The score part is sorted once (:func:`score_order`, a stable sort of
an int64 key with the same order as the float scores, which numpy sorts faster than floats); the
integer parts are stable 16-bit radix passes over that order (numpy's ``kind="stable"`` is a radix
sort for 16-bit keys), so the rest costs O(n) per key.
"""

from __future__ import annotations

import numpy as np

_U16 = 1 << 16


def score_key(score: np.ndarray) -> np.ndarray:
    """(n,) int64 whose ascending order is the descending order of the finite float ``score``
    (equal scores, including -0.0 and +0.0, get equal keys)."""
    s = np.asarray(score, np.float64) + 0.0  # -0.0 -> +0.0
    b = s.view(np.int64)
    k = np.where(b < 0, b ^ np.int64(0x7FFFFFFFFFFFFFFF), b)
    np.negative(k, out=k)
    k -= 1
    return k


def score_order(score: np.ndarray) -> np.ndarray:
    """Positions by descending score, ties by position (``argsort(-score, kind="stable")``)."""
    return np.argsort(score_key(score), kind="stable")


def stable_by(order: np.ndarray, key: np.ndarray, maxval: int) -> np.ndarray:
    """``order`` stably re-sorted by ``key[order]`` (non-negative ints below ``maxval + 1``):
    16-bit radix passes, least significant first; int64 timsort above 2^32."""
    k = key[order]
    if maxval < _U16:
        return order[np.argsort(k.astype(np.uint16), kind="stable")]
    if maxval < _U16 * _U16:
        o = np.argsort((k & 0xFFFF).astype(np.uint16), kind="stable")
        o = o[np.argsort((k[o] >> 16).astype(np.uint16), kind="stable")]
        return order[o]
    return order[np.argsort(k, kind="stable")]


def dense_rank_sorted(values_sorted: np.ndarray) -> np.ndarray:
    """(n,) int64 dense rank of an already sorted array (equal values, equal rank)."""
    n = len(values_sorted)
    r = np.zeros(n, np.int64)
    if n > 1:
        np.cumsum(values_sorted[1:] != values_sorted[:-1], out=r[1:])
    return r


def group_ranks(sorted_keys: np.ndarray) -> np.ndarray:
    """Rank within runs of equal ``sorted_keys`` (0 at each run's first entry)."""
    n = len(sorted_keys)
    if n == 0:
        return np.zeros(0, np.int64)
    first = np.r_[True, sorted_keys[1:] != sorted_keys[:-1]]
    starts = np.flatnonzero(first)
    return np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
