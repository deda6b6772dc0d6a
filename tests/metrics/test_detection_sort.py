"""The detection evaluator's sorting helpers against numpy's stable argsort and isin."""

import numpy as np
import pytest

from vistabench.metrics.detection import (group_ranks, member, rank_within, score_order, score_order_keys,
                                         stable_by, stable_by_keys)


@pytest.mark.parametrize("score", [
    np.round(np.random.default_rng(0).random(5000), 2),                       # many ties
    np.random.default_rng(1).random(5000),                                     # distinct
    np.r_[np.zeros(4), -np.zeros(4), np.ones(3), -np.ones(2)],                 # +-0 compare equal
    np.array([1.0, 1.0 + 2e-16, 1.0 - 1e-16, 1.0 + 4e-16] * 50),                # closer than the packed bits: fallback
    np.random.default_rng(2).normal(size=3000) * 1e300,                        # huge magnitudes, both signs
    np.zeros(0), np.ones(1),
])
def test_score_order_is_the_stable_descending_argsort(score):
    expected = np.argsort(-score, kind="stable")
    np.testing.assert_array_equal(score_order(score), expected)
    o, keys = score_order_keys(score)
    assert np.all(keys[1:] >= keys[:-1])
    assert np.array_equal(keys[1:] == keys[:-1], score[o][1:] == score[o][:-1])


@pytest.mark.parametrize("maxval", [3, 60_000, 2**40, 2**61])
def test_stable_by_matches_stable_argsort(maxval):
    rng = np.random.default_rng(maxval % 1000)
    key = rng.integers(0, maxval + 1, 4000, dtype=np.int64)
    key[:50] = maxval
    order = rng.permutation(4000)
    expected = order[np.argsort(key[order], kind="stable")]
    np.testing.assert_array_equal(stable_by(order, key, maxval), expected)
    o, k = stable_by_keys(order, key, maxval)
    np.testing.assert_array_equal(k, key[expected])


def test_rank_within_matches_lexsort():
    rng = np.random.default_rng(3)
    key = rng.integers(0, 7, 500)
    score = np.round(rng.random(500), 1)
    order = np.lexsort((np.arange(500), -score, key))
    expected = np.empty(500, np.int64)
    expected[order] = group_ranks(key[order])
    np.testing.assert_array_equal(rank_within(key, score), expected)
    # hand-worked: group 0 has scores 0.5, 0.9, 0.5 -> ranks 1, 0, 2
    np.testing.assert_array_equal(rank_within(np.array([0, 0, 1, 0]), np.array([0.5, 0.9, 0.1, 0.5])), [1, 0, 0, 2])


def test_member_matches_isin_including_out_of_range_keys():
    rng = np.random.default_rng(4)
    keys = rng.integers(0, 1000, 3000)
    a, b = np.unique(rng.integers(0, 1000, 200)), np.unique(rng.integers(0, 1000, 50))
    got = member(keys, a, b, size=1000)
    np.testing.assert_array_equal(got[0], np.isin(keys, a))
    np.testing.assert_array_equal(got[1], np.isin(keys, b))
    bad = np.r_[keys, 5000]  # beyond the table: falls back to isin
    np.testing.assert_array_equal(member(bad, a, size=1000)[0], np.isin(bad, a))
