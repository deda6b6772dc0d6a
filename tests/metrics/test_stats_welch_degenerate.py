"""Welch's test on (near-)constant samples: "undefined", not t = 1e15 from rounding noise."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats as sps

from vistabench.metrics.stats import VARIANCE_RTOL, not_worse_than_best, welch_test


@pytest.mark.parametrize("a,b", [([0.9] * 3, [0.8] * 3), ([0.1] * 30, [0.7] * 30), ([1e6 + 0.1] * 4, [1e6] * 4),
                                 ([0.3] * 5, [0.3] * 5)])
def test_constant_samples_are_undefined(a, b):
    # numpy's variance of [0.8] * 3 is 1.8e-32 and of [0.1] * 30 is 8e-34: rounding, not spread
    r = welch_test(a, b)
    assert math.isnan(r.t) and math.isnan(r.df) and math.isnan(r.p)
    assert r.mean_a == pytest.approx(np.mean(a)) and r.n_a == len(a)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_rounding_variance_is_what_scipy_turns_into_a_huge_t():
    # the example: a variance of ~1e-32 from rounding; scipy reports t ~ 1.27e15, p ~ 6e-31
    assert abs(sps.ttest_ind([0.9] * 3, [0.8] * 3, equal_var=False).statistic) > 1e14


def test_one_constant_group_is_still_a_test_and_matches_scipy():
    a, b = [0.9] * 3, [0.8, 0.82, 0.79]
    r = welch_test(a, b)
    with warnings.catch_warnings():  # scipy says so about a constant group, which this test gives it on purpose
        warnings.filterwarnings("ignore", "Precision loss occurred in moment calculation", RuntimeWarning)
        ref = sps.ttest_ind(a, b, equal_var=False)  # a's rounding variance is negligible next to b's
    # with a's variance exactly zero the statistic is (m_a - m_b) / sqrt(s_b^2 / n_b)
    expect = (0.9 - np.mean(b)) / math.sqrt(np.var(b, ddof=1) / 3)
    assert r.t == pytest.approx(expect, rel=1e-9)
    assert r.df == pytest.approx(2.0)
    assert r.p == pytest.approx(2 * sps.t.sf(abs(expect), 2), rel=1e-9)
    assert ref.pvalue == pytest.approx(r.p, rel=1e-6)


def test_small_but_real_variance_is_kept():
    a = np.array([0.9, 0.9 + 1e-9, 0.9 - 1e-9])  # relative spread 1e-9 >> VARIANCE_RTOL
    b = np.array([0.8, 0.8 + 1e-9, 0.8 - 1e-9])
    assert np.std(a, ddof=1) > 100 * VARIANCE_RTOL * 0.9
    r = welch_test(a, b)
    ref = sps.ttest_ind(a, b, equal_var=False)
    assert r.t == pytest.approx(ref.statistic, rel=1e-6) and r.p == pytest.approx(ref.pvalue, rel=1e-6, abs=1e-300)


def test_table_italics_treat_constant_groups_as_not_rejected():
    out = not_worse_than_best({"best": [0.9] * 3, "other": [0.8] * 3})
    assert out == {"best": True, "other": True}  # undefined test cannot reject


@pytest.mark.parametrize("a, b, message", [
    ([0.5], [0.1, 0.2], "a: 1 score; Welch's t-test needs at least 2 per list"),
    ([0.1, 0.2], [], "b: 0 scores"),
    (["0.9", "0.8"], [0.1, 0.2], "a: expected a list of numbers, got a list with non-numbers"),
    ([0.1, 0.2], {"x": 1}, "b: expected a list of numbers, got dict"),
    ([0.1, True], [0.1, 0.2], "a: expected a list of numbers"),
    ([0.9, 0.9], [0.8, 0.8, 0.8], "neither `a` nor `b` varies"),
])
def test_welch_of_lists_refuses_what_it_cannot_test(a, b, message):
    from vistabench.errors import InputError
    from vistabench.metrics.stats import welch_test_of_lists

    with pytest.raises(InputError, match=message.replace("(", r"\(")):
        welch_test_of_lists(a, b)


def test_welch_of_lists_is_welch_test_when_defined():
    from vistabench.metrics.stats import welch_test, welch_test_of_lists

    a, b = [0.5, 0.6, 0.55], [0.1, 0.3, 0.2]
    assert welch_test_of_lists(a, b, alternative="less") == welch_test(a, b, alternative="less")
