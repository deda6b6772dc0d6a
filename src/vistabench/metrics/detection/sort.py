"""Sorting helpers shared by the detection evaluator: one score sort, then packed-key sorts.

Every ordering the evaluation needs (top-k per image or category, the canonical order, the
pooled ranking, the (image, category) groups) is "by some small integer keys, then by descending
score, ties in file order". The score part is sorted once (:func:`score_order`); the integer parts
are *stable* re-sorts of that order. A stable argsort by a key below 2^b of n entries is the value
sort of ``key << log2(n) | position`` (one int64 each): numpy sorts int64 values several times
faster than it argsorts them, and the position in the low bits makes every value unique, so the
result is exactly the stable order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_BITS = 62  # packed keys stay non-negative int64


def _bits(x: int) -> int:
    return max(int(x), 0).bit_length()


def score_key(score: np.ndarray) -> np.ndarray:
    """(n,) int64 whose ascending order is the descending order of the finite float ``score``
    (equal scores, including -0.0 and +0.0, get equal keys)."""
    s = np.asarray(score, np.float64) + 0.0  # -0.0 -> +0.0
    b = s.view(np.int64)
    k = np.where(b < 0, b ^ np.int64(0x7FFFFFFFFFFFFFFF), b)
    np.negative(k, out=k)
    k -= 1
    return k


def _packed_sort(key: np.ndarray, nb: int) -> np.ndarray:
    """Positions 0..n-1 stably sorted by the non-negative int64 ``key`` (< 2^(62 - nb))."""
    c = key << nb
    c |= np.arange(len(key), dtype=np.int64)
    c.sort()
    c &= (1 << nb) - 1
    return c


def score_order(score: np.ndarray) -> np.ndarray:
    """Positions by descending score, ties by position (``argsort(-score, kind="stable")``).

    Packed sort on the score key's top bits; exact, because the result is checked to be ordered by
    the full key (scores closer than ~2^-28 relative would fall back to a stable argsort).
    """
    return score_order_keys(score)[0]


def score_order_keys(score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`score_order` and the sorted :func:`score_key` values."""
    k = score_key(score)
    n = len(k)
    if n < 2:
        return np.arange(n), k
    nb = _bits(n - 1)
    top = ((k.view(np.uint64) ^ np.uint64(1 << 63)) >> np.uint64(64 - (_BITS - nb))).astype(np.int64)
    o = _packed_sort(top, nb)
    ko = k[o]
    if np.any(ko[1:] < ko[:-1]):  # two different scores shared the kept top bits
        o = np.argsort(k, kind="stable")
        ko = k[o]
    return o, ko


def stable_by(order: np.ndarray, key: np.ndarray, maxval: int) -> np.ndarray:
    """``order`` stably re-sorted by ``key[order]`` (non-negative ints up to ``maxval``)."""
    return stable_by_keys(order, key, maxval)[0]


def stable_by_keys(order: np.ndarray, key: np.ndarray, maxval: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`stable_by` and the sorted keys ``key[result]`` (read off the packed values)."""
    n = len(order)
    k = key[order]
    if n < 2:
        return order, k
    nb = _bits(n - 1)
    if _bits(maxval) + nb <= _BITS:
        c = k.astype(np.int64) << nb
        c |= np.arange(n, dtype=np.int64)
        c.sort()
        pos = c & ((1 << nb) - 1)
        c >>= nb
        return order[pos], c
    o = np.argsort(k, kind="stable")
    return order[o], k[o]


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` of a 1-D array (sorted distinct values) without ``np.unique``, whose
    1-D path imports ``numpy.ma`` (tens of milliseconds of a command's start-up)."""
    a = np.sort(np.asarray(values).ravel())
    if len(a) < 2:
        return a
    keep = np.empty(len(a), bool)
    keep[0] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    return a[keep]


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


def member(keys: np.ndarray, *sets: np.ndarray, size: int) -> list[np.ndarray]:
    """``[np.isin(keys, s) for s in sets]`` for non-negative int keys below ``size``: one flag
    table of ``size`` bytes and one look-up per key (numpy's isin sorts or scans per set)."""
    if size > (1 << 27) or len(sets) > 8 or (len(keys) and (keys.min() < 0 or keys.max() >= size)):
        return [np.isin(keys, s) for s in sets]
    table = np.zeros(size, np.uint8)
    for i, s in enumerate(sets):
        table[s] |= np.uint8(1 << i)
    got = table[keys]
    return [(got & np.uint8(1 << i)).astype(bool) for i in range(len(sets))]


@dataclass
class ScoreRank:
    """The one score sort of an evaluation: ``order`` (:func:`score_order`) and ``rank``, the dense
    rank of each detection's score (0 = highest; equal scores share a rank)."""

    order: np.ndarray
    rank: np.ndarray

    @classmethod
    def of(cls, score: np.ndarray) -> ScoreRank:
        order, keys = score_order_keys(score)
        rank = np.empty(len(order), np.int64)
        rank[order] = dense_rank_sorted(keys)
        return cls(order, rank)
