"""Balanced accuracy against scikit-learn, Welch's test against scipy; edge cases."""

import math

import numpy as np
import pytest
from scipy import stats as sps
from sklearn.metrics import balanced_accuracy_score

from vistabench.errors import InputError
from vistabench.metrics import balanced_accuracy, not_worse_than_best, per_class_recall, welch_test


@pytest.mark.parametrize("seed", range(8))
def test_balanced_accuracy_matches_sklearn(seed):
    rng = np.random.default_rng(seed)
    c = int(rng.integers(2, 12))
    n = int(rng.integers(c, 300))
    y = np.concatenate([np.arange(c), rng.integers(0, c, n - c)])  # every class present
    rng.shuffle(y)
    p = np.where(rng.random(n) < 0.6, y, rng.integers(0, c, n))
    assert balanced_accuracy(y, p, classes=range(c)) == pytest.approx(balanced_accuracy_score(y, p), abs=1e-12)


def test_ignore_mode_matches_sklearn_when_a_class_is_absent():
    y = np.array([0, 0, 1, 1, 1])
    p = np.array([0, 2, 1, 1, 0])  # class 2 is declared and predicted, never true
    with pytest.warns(UserWarning):
        ref = balanced_accuracy_score(y, p)
    assert balanced_accuracy(y, p, classes=[0, 1, 2], absent="ignore") == pytest.approx(ref)


def test_absent_class_is_an_error_by_default():
    with pytest.raises(InputError, match=r"declared classes \[2\] have no test sample"):
        balanced_accuracy([0, 1, 1], [0, 1, 0], classes=[0, 1, 2])


def test_hand_worked_and_per_class():
    # class 0: 3 of 4 right, class 1: 1 of 2 right -> (0.75 + 0.5) / 2
    y, p = [0, 0, 0, 0, 1, 1], [0, 0, 0, 1, 1, 0]
    assert balanced_accuracy(y, p, classes=[0, 1]) == pytest.approx(0.625)
    np.testing.assert_allclose(per_class_recall(y, p, classes=[0, 1]), [0.75, 0.5])


def test_single_class_and_empty():
    assert balanced_accuracy([3, 3, 3], [3, 1, 3], classes=[1, 3], absent="ignore") == pytest.approx(2 / 3)
    assert math.isnan(balanced_accuracy([], [], classes=[0, 1], absent="ignore"))
    with pytest.raises(InputError):
        balanced_accuracy([], [], classes=[0, 1])


def test_bad_labels():
    with pytest.raises(InputError, match="y_pred: labels \\[5\\]"):
        balanced_accuracy([0, 1], [0, 5], classes=[0, 1])
    with pytest.raises(InputError, match="y_true has 2 entries but y_pred has 1"):
        balanced_accuracy([0, 1], [0], classes=[0, 1])
    with pytest.raises(InputError, match="duplicates"):
        balanced_accuracy([0, 1], [0, 1], classes=[0, 1, 1])
    with pytest.raises(InputError, match="integer"):
        balanced_accuracy([0.5, 1], [0, 1], classes=[0, 1])


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("alternative", ["two-sided", "less", "greater"])
def test_welch_matches_scipy(seed, alternative):
    rng = np.random.default_rng(seed)
    a = rng.normal(0.6, rng.uniform(0.01, 0.1), int(rng.integers(2, 40)))
    b = rng.normal(0.62, rng.uniform(0.01, 0.1), int(rng.integers(2, 40)))
    r = welch_test(a, b, alternative=alternative)
    ref = sps.ttest_ind(a, b, equal_var=False, alternative=alternative)
    assert r.t == pytest.approx(ref.statistic, rel=1e-10)
    assert r.p == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-15)
    assert r.df == pytest.approx(ref.df, rel=1e-10)
    assert (r.n_a, r.n_b) == (len(a), len(b))


@pytest.mark.filterwarnings("ignore:Precision loss:RuntimeWarning")
def test_welch_undefined_cases_are_nan():
    r = welch_test([0.5], [0.4, 0.6])
    assert math.isnan(r.t) and math.isnan(r.p) and math.isnan(r.df)
    r = welch_test([0.5, 0.5, 0.5], [0.7, 0.7])  # no variance at all: t is x/0
    assert math.isnan(r.t) and math.isnan(r.p)
    assert r.mean_a == 0.5 and r.mean_b == 0.7
    # one constant group is fine (df from the other)
    r = welch_test([0.5, 0.5, 0.5], [0.6, 0.7, 0.8])
    ref = sps.ttest_ind([0.5, 0.5, 0.5], [0.6, 0.7, 0.8], equal_var=False)
    assert r.p == pytest.approx(ref.pvalue)


def test_welch_rejects_nan_and_bad_alternative():
    with pytest.raises(InputError, match="a: expected finite"):
        welch_test([0.5, float("nan")], [0.1, 0.2])
    with pytest.raises(InputError, match="alternative"):
        welch_test([0.5, 0.6], [0.1, 0.2], alternative="bigger")


def test_not_worse_than_best_follows_welch():
    rng = np.random.default_rng(1)
    groups = {"best": rng.normal(0.80, 0.01, 30), "close": rng.normal(0.798, 0.01, 30),
              "worse": rng.normal(0.70, 0.01, 30)}
    keep = not_worse_than_best(groups)
    assert keep == {"best": True, "close": sps.ttest_ind(groups["best"], groups["close"], equal_var=False).pvalue >= 0.05,
                    "worse": False}
    assert keep["close"] is True
    # one-sided halves the p-value in the direction of the difference
    p2 = sps.ttest_ind(groups["best"], groups["close"], equal_var=False).pvalue
    p1 = sps.ttest_ind(groups["best"], groups["close"], equal_var=False, alternative="greater").pvalue
    assert p1 == pytest.approx(p2 / 2)
    # a group with one score cannot be tested: never marked worse
    assert not_worse_than_best({"a": [0.9, 0.91], "b": [0.1]})["b"] is True
    assert not_worse_than_best({}) == {}
