"""Stream metrics against independent references: brute force, sklearn, scipy, hand-worked values."""

import numpy as np
import pytest
from sklearn.metrics import average_precision_score

from vistabench.errors import InputError
from vistabench.metrics import (
    average_precision,
    forward_transfer,
    mean_average_precision,
    pareto_front,
    regret_curve,
    slice_means,
    task_error,
)
from vistabench.metrics.stream import cflop_parts


def _brute_front(c, e):
    n = len(c)
    keep = [i for i in range(n)
            if not any(c[j] <= c[i] and e[j] <= e[i] and (c[j] < c[i] or e[j] < e[i]) for j in range(n))]
    return sorted(keep, key=lambda i: (c[i], e[i], i))


@pytest.mark.parametrize("seed", range(30))
def test_pareto_front_equals_brute_force_with_ties_and_duplicates(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    # few distinct values -> many ties in cost, in error, and exact duplicate points
    c = rng.integers(0, 6, n).astype(float)
    e = rng.integers(0, 6, n) / 5.0
    if n > 3:
        c[1], e[1] = c[0], e[0]  # a guaranteed duplicate
    assert pareto_front(c, e).tolist() == _brute_front(c, e)


def test_pareto_front_continuous_points():
    rng = np.random.default_rng(7)
    c, e = rng.random(200), rng.random(200)
    front = pareto_front(c, e)
    assert front.tolist() == _brute_front(c, e)
    assert np.all(np.diff(c[front]) > 0) and np.all(np.diff(e[front]) < 0)


def test_pareto_front_edge_cases():
    assert pareto_front([], []).tolist() == []
    assert pareto_front([3.0], [0.2]).tolist() == [0]
    assert pareto_front([1, 1], [0.5, 0.5]).tolist() == [0, 1]  # duplicates both stay
    assert pareto_front([1, 1], [0.5, 0.4]).tolist() == [1]  # same cost, lower error wins
    with pytest.raises(InputError, match="costs"):
        pareto_front([1, np.nan], [0.1, 0.2])
    with pytest.raises(InputError, match="errors has 1"):
        pareto_front([1, 2], [0.1])


def test_forward_transfer_formula():
    rng = np.random.default_rng(0)
    a1, a2 = rng.random(50) * 0.99, rng.random(50)
    np.testing.assert_allclose(forward_transfer(a1, a2), (a2 - a1) / (1 - a1))
    assert forward_transfer(0.5, 0.75) == pytest.approx(0.5)
    assert forward_transfer(0.5, 0.25) == pytest.approx(-0.5)  # negative transfer
    assert forward_transfer(0.2, 1.0) == pytest.approx(1.0)  # the upper bound
    assert np.isnan(forward_transfer(1.0, 0.9))  # undefined
    with pytest.raises(InputError, match="auc_second"):
        forward_transfer(0.5, 1.5)
    with pytest.raises(InputError, match="shape"):
        forward_transfer([0.5, 0.2], [0.5])


@pytest.mark.parametrize("seed", range(10))
def test_mean_average_precision_matches_sklearn_macro(seed):
    rng = np.random.default_rng(seed)
    n, c = 60, 5
    y = (rng.random((n, c)) < 0.3).astype(int)
    y[0] = 1  # every class has a positive
    s = np.round(rng.random((n, c)), 1)  # coarse scores: many ties
    assert mean_average_precision(y, s) == pytest.approx(average_precision_score(y, s, average="macro"))
    for k in range(c):
        assert average_precision(y[:, k], s[:, k]) == pytest.approx(average_precision_score(y[:, k], s[:, k]))


def test_mean_average_precision_edge_cases():
    y = np.array([[1, 0], [0, 0], [1, 0]])
    s = np.array([[0.9, 0.1], [0.8, 0.5], [0.7, 0.2]])
    # class 1 has no positive: 'omit' leaves it out, 'zero' (default) counts it 0 like sklearn
    assert mean_average_precision(y, s, absent_labels="omit") == pytest.approx(average_precision_score(y[:, 0], s[:, 0]))
    assert np.isnan(mean_average_precision(np.zeros((3, 2), int), s, absent_labels="omit"))
    assert mean_average_precision(np.zeros((3, 2), int), s) == 0.0
    with pytest.raises(InputError, match="absent_labels"):
        mean_average_precision(y, s, absent_labels="drop")
    assert np.isnan(average_precision([0, 0], [0.1, 0.2]))
    assert average_precision([1, 1], [0.5, 0.5]) == 1.0  # all tied, all positive
    assert average_precision([1, 0], [0.5, 0.5]) == 0.5  # one tie group: precision 1/2
    with pytest.raises(InputError, match="indicator"):
        mean_average_precision([[2, 0]], [[0.1, 0.2]])
    with pytest.raises(InputError, match="shape"):
        mean_average_precision([[1, 0]], [[0.1, 0.2, 0.3]])


@pytest.mark.filterwarnings("ignore:No positive class found")
@pytest.mark.parametrize("seed", range(6))
def test_absent_labels_side_by_side_with_dm_nevis_sklearn_macro_ap(seed):
    """dm_nevis scores multilabel tasks with sklearn's average_precision_score (macro): a label
    without positives counts 0. Our default reproduces it; 'omit' equals the mean over the labels
    with positives, re-derived here with sklearn per label."""
    rng = np.random.default_rng(seed)
    n, c = 40, 6
    y = (rng.random((n, c)) < 0.3).astype(int)
    empty = rng.choice(c, size=2, replace=False)
    y[:, empty] = 0
    y[0, [k for k in range(c) if k not in empty]] = 1
    s = np.round(rng.random((n, c)), 1)
    ref = average_precision_score(y, s, average="macro")
    assert mean_average_precision(y, s) == pytest.approx(ref)
    assert task_error(y, s, kind="multilabel") == pytest.approx(1 - ref)
    kept = [k for k in range(c) if k not in empty]
    omit = np.mean([average_precision_score(y[:, k], s[:, k]) for k in kept])
    assert mean_average_precision(y, s, absent_labels="omit") == pytest.approx(omit)
    assert task_error(y, s, kind="multilabel", absent_labels="omit") == pytest.approx(1 - omit)
    assert omit * len(kept) / c == pytest.approx(ref)  # the two differ exactly by the zeros


def test_cflop_parts():
    ev = [{"flops_train": 7, "flops_eval": 3}, {"flops_train": 11, "flops_eval": 0}]
    assert cflop_parts(ev) == {"train": 18, "selection": 3, "total": 21}
    assert cflop_parts([]) == {"train": 0, "selection": 0, "total": 0}
    with pytest.raises(InputError, match="flops_train"):
        cflop_parts([{"flops": 3}])


def test_task_error():
    s = np.array([[2.0, 1.0], [0.0, 3.0], [1.0, 1.0]])  # last row tied -> argmax picks 0
    assert task_error([0, 1, 1], s, kind="multiclass") == pytest.approx(1 / 3)
    y = np.array([[1, 0], [0, 1], [1, 1]])
    assert task_error(y, s, kind="multilabel") == pytest.approx(1 - average_precision_score(y, s, average="macro"))
    assert np.isnan(task_error(np.zeros(0, int), np.zeros((0, 2)), kind="multiclass"))
    with pytest.raises(InputError, match="kind"):
        task_error([0], [[1.0]], kind="binary")
    with pytest.raises(InputError, match="labels must lie"):
        task_error([2], [[1.0, 0.0]], kind="multiclass")


def test_regret_curve_and_slices():
    e, r = np.array([0.1, 0.2, 0.3, 0.4]), np.array([0.2, 0.2, 0.1, 0.5])
    np.testing.assert_allclose(regret_curve(e, r), [-0.1, -0.1, 0.1, 0.0], atol=1e-12)
    out = regret_curve([0.1, np.nan, 0.2], [0.1, 0.1, 0.1])
    assert out[0] == 0 and np.isnan(out[1]) and np.isnan(out[2])
    assert regret_curve([], []).tolist() == []
    sl = slice_means([0.1, 0.3, np.nan, 0.5], ["ocr", "ocr", "face", "object"])
    assert list(sl) == ["ocr", "face", "object"]
    assert sl["ocr"] == {"mean": pytest.approx(0.2), "count": 2}
    assert np.isnan(sl["face"]["mean"]) and sl["face"]["count"] == 0
    with pytest.raises(InputError, match="groups"):
        slice_means([0.1], ["a", "b"])
