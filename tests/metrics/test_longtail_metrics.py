"""Long-tailed metrics against independent re-computations and hand-worked cases."""

import math

import numpy as np
import pytest

from vistabench.errors import InputError
from vistabench.metrics import longtail as M


# ---------------------------------------------------------------- training profile
def test_cifar10_rho100_profile():
    assert M.training_profile(10, n_max=5000, imbalance=100).tolist() == [
        5000, 2997, 1796, 1077, 645, 387, 232, 139, 83, 50]


@pytest.mark.parametrize("rho,total", [(10, 19573), (50, 12608), (100, 10847)])
def test_cifar100_totals(rho, total):
    assert int(M.training_profile(100, n_max=500, imbalance=rho).sum()) == total


def test_reciprocal_notation_warns_and_matches():
    with pytest.warns(UserWarning, match="reciprocal"):
        a = M.training_profile(10, n_max=5000, imbalance=0.01)
    assert a.tolist() == M.training_profile(10, n_max=5000, imbalance=100).tolist()


def test_step_profile():
    assert M.training_profile(4, n_max=100, imbalance=10, kind="step").tolist() == [100, 100, 10, 10]
    assert M.training_profile(5, n_max=100, imbalance=10, kind="step").tolist() == [100, 100, 10, 10, 10]


@pytest.mark.parametrize("bad", [0, -1, float("nan"), "x"])
def test_bad_imbalance(bad):
    with pytest.raises(InputError, match="imbalance"):
        M.training_profile(10, n_max=10, imbalance=bad)


def test_single_class_profile():
    assert M.training_profile(1, n_max=7, imbalance=10).tolist() == [7]


# ---------------------------------------------------------------- sweep formulas
def _reference_counts(C, rho, n_max, alpha):
    """Independent loop implementation of Eq. 2-4."""
    n_tst = sum(n_max * rho ** (-(c - 1) / (C - 1)) for c in range(1, C + 1))
    w = [rho ** (-abs(c - alpha) / (C - 1)) for c in range(1, C + 1)]
    z = sum(w)
    return [max(1, math.floor(n_tst * wi / z + 0.5)) for wi in w]


@pytest.mark.parametrize("C,rho,n_max", [(10, 100, 1000), (100, 10, 100), (7, 3.5, 40), (2, 50, 9)])
def test_sweep_counts_match_reference(C, rho, n_max):
    for alpha in M.peaks(C, 10):
        got = M.sweep_class_counts(C, test_imbalance=rho, n_max=n_max, alpha=float(alpha)).tolist()
        assert got == _reference_counts(C, rho, n_max, float(alpha))


def test_sweep_counts_hand_worked():
    # C=3, rho=4, n_max=100: N_tst = 100 + 50 + 25 = 175; alpha=1: q = [1, .5, .25]/1.75
    assert M.sweep_class_counts(3, test_imbalance=4, n_max=100, alpha=1).tolist() == [100, 50, 25]
    # alpha=2: w = [.5, 1, .5] / 2 -> [43.75, 87.5, 43.75] -> round half up: [44, 88, 44]
    assert M.sweep_class_counts(3, test_imbalance=4, n_max=100, alpha=2).tolist() == [44, 88, 44]
    # the max(1, .) floor: a tiny n_max still gives every class a sample
    assert M.sweep_class_counts(3, test_imbalance=1000, n_max=1, alpha=1).tolist() == [1, 1, 1]


def test_peaks():
    assert M.peaks(10, 10).tolist() == list(range(1, 11))
    assert M.peaks(100, 10).tolist() == [1, 11, 21, 31, 41, 51, 61, 71, 81, 91]
    assert M.peaks(10, 1).tolist() == [1.0]


def test_symmetric_kl_reference():
    rng = np.random.default_rng(0)
    for _ in range(20):
        p = rng.random(6) + 0.01
        q = rng.random(6) + 0.01
        p, q = p / p.sum(), q / q.sum()
        ref = sum(pi * math.log(pi / qi) + qi * math.log(qi / pi) for pi, qi in zip(p, q))
        assert M.symmetric_kl(p, q) == pytest.approx(ref, abs=1e-12)
    assert M.symmetric_kl(np.array([0.3, 0.7]), np.array([0.3, 0.7])) == 0.0


def test_symmetric_kl_zero_probability_is_an_error():
    with pytest.raises(InputError, match="positive"):
        M.symmetric_kl(np.array([1.0, 0.0]), np.array([0.5, 0.5]))


def test_frequency_ranking_ties_by_index():
    assert M.frequency_ranking(np.array([3, 5, 5, 1, 3])).tolist() == [1, 2, 0, 4, 3]


# ---------------------------------------------------------------- sweep metrics
def _reference_sweep_metrics(v, d):
    merged = {}
    for di, vi in zip(d, v):
        merged.setdefault(di, []).append(vi)
    pts = sorted((di, sum(vs) / len(vs)) for di, vs in merged.items())
    area = sum((pts[i + 1][0] - pts[i][0]) * (pts[i + 1][1] + pts[i][1]) / 2 for i in range(len(pts) - 1))
    span = pts[-1][0] - pts[0][0]
    mean = sum(v) / len(v)
    return {"auc": area / span if span else float("nan"), "avg": mean,
            "std": math.sqrt(sum((x - mean) ** 2 for x in v) / len(v)), "max": max(v), "min": min(v),
            "drop_ratio": (max(v) - min(v)) / max(v)}


def test_sweep_metrics_random_against_reference():
    rng = np.random.default_rng(1)
    for _ in range(50):
        T = int(rng.integers(2, 15))
        v = rng.random(T)
        d = rng.random(T) * 3
        if T > 3:  # include exact ties
            d[1] = d[0]
        got = M.sweep_metrics(v, d)
        ref = _reference_sweep_metrics(list(v), list(d))
        for k, x in ref.items():
            assert got[k] == pytest.approx(x, abs=1e-12), k
        if len(np.unique(d)) == T:  # scipy's trapezoid agrees where there are no ties
            o = np.argsort(d)
            from scipy.integrate import trapezoid
            assert got["auc"] == pytest.approx(trapezoid(v[o], d[o]) / (d.max() - d.min()), abs=1e-12)


def test_sweep_metrics_hand_worked():
    m = M.sweep_metrics([0.9, 0.8, 0.6], [0.0, 1.0, 2.0])
    assert m["auc"] == pytest.approx(((0.9 + 0.8) / 2 + (0.8 + 0.6) / 2) / 2)
    assert m["avg"] == pytest.approx(2.3 / 3)
    assert m["drop_ratio"] == pytest.approx(0.3 / 0.9)
    # unsorted input: same result
    m2 = M.sweep_metrics([0.6, 0.9, 0.8], [2.0, 0.0, 1.0])
    assert m2["auc"] == pytest.approx(m["auc"])


def test_sweep_metrics_ties_in_divergence():
    # two points share delta = 1: merged into one point at their mean (0.6), whatever their order
    a = M.sweep_metrics([0.5, 0.7, 0.9], [1.0, 1.0, 0.0])
    b = M.sweep_metrics([0.7, 0.5, 0.9], [1.0, 1.0, 0.0])
    assert a["auc"] == pytest.approx((0.9 + 0.6) / 2)
    assert b["auc"] == pytest.approx(a["auc"])
    assert a["avg"] == b["avg"] and a["min"] == 0.5


def test_single_point_auc_undefined():
    with pytest.warns(UserWarning, match="AUC undefined"):
        m = M.sweep_metrics([0.8], [0.3])
    assert math.isnan(m["auc"])
    assert m["std"] == 0.0 and m["drop_ratio"] == 0.0


def test_zero_max_drop_ratio_nan():
    m = M.sweep_metrics([0.0, 0.0], [0.0, 1.0])
    assert math.isnan(m["drop_ratio"])


@pytest.mark.parametrize("v,msg", [([0.5, 1.5], "percentages"), ([0.5, float("nan")], "NaN")])
def test_sweep_metrics_bad_input(v, msg):
    with pytest.raises(InputError, match=msg):
        M.sweep_metrics(v, [0.0, 1.0])


# ---------------------------------------------------------------- groups, expected accuracy
def test_shot_groups_conventions():
    n = np.array([500, 101, 100, 50, 20, 19, 5])
    t = M.shot_groups(n)
    assert t["many"].tolist() == [1, 1, 0, 0, 0, 0, 0]
    assert t["medium"].tolist() == [0, 0, 1, 1, 1, 0, 0]
    assert t["few"].tolist() == [0, 0, 0, 0, 0, 1, 1]
    o = M.shot_groups(n, convention="oltr")
    assert o["many"].tolist() == [1, 1, 1, 0, 0, 0, 0]
    assert o["few"].tolist() == [0, 0, 0, 0, 1, 1, 1]


def test_group_accuracies_empty_group_nan():
    g = M.group_accuracies(np.array([0.9, 0.5]), np.array([50, 30]))
    assert math.isnan(g["many"]) and math.isnan(g["few"])
    assert g["medium"] == pytest.approx(0.7)


def test_expected_accuracy_is_the_resampling_limit():
    rng = np.random.default_rng(3)
    acc = rng.random(5)
    counts = np.array([50, 20, 10, 5, 1])
    assert M.expected_accuracy(acc, counts) == pytest.approx(np.sum(acc * counts) / counts.sum())


def test_agnostic_counts():
    train = np.array([10, 300, 50])  # ranking: 1, 2, 0
    c = M.agnostic_counts(train, n_max=100, ratios=(10,))
    prof = M.training_profile(3, n_max=100, imbalance=10).tolist()  # [100, 31, 10]
    assert c["forward_10"].tolist() == [prof[2], prof[0], prof[1]]
    assert c["backward_10"].tolist() == [prof[0], prof[2], prof[1]]
    assert c["uniform"].tolist() == [100, 100, 100]
