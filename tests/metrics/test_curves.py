"""The one normalised-AUC function (long-tailed sweep and stream learning curves) against scipy."""

import numpy as np
import pytest
from scipy.integrate import trapezoid

from vistabench.errors import InputError
from vistabench.metrics.curves import normalised_auc


def test_matches_scipy_trapezoid_on_random_curves():
    rng = np.random.default_rng(1)
    for _ in range(20):
        x = np.sort(rng.random(12)) * 100
        v = rng.random(12)
        assert normalised_auc(v, x) == pytest.approx(trapezoid(v, x) / (x[-1] - x[0]), rel=1e-12)


def test_rows_are_independent_curves():
    rng = np.random.default_rng(2)
    x = np.sort(rng.random(7))
    V = rng.random((5, 7))
    out = normalised_auc(V, x)
    assert out.shape == (5,)
    np.testing.assert_allclose(out, [trapezoid(r, x) / (x[-1] - x[0]) for r in V], rtol=1e-12)


def test_equal_abscissae_are_merged_at_their_mean_in_any_order():
    # two points at x=1 (0.2 and 0.6) act as one point at 0.4: area over [0, 2] of (0.0, 0.4, 1.0)
    expected = (0.5 * (0.0 + 0.4) + 0.5 * (0.4 + 1.0)) / 2
    assert normalised_auc([0.0, 0.2, 0.6, 1.0], [0, 1, 1, 2]) == pytest.approx(expected)
    assert normalised_auc([1.0, 0.6, 0.0, 0.2], [2, 1, 0, 1]) == pytest.approx(expected)


def test_edge_cases():
    assert normalised_auc([0.3, 0.3, 0.3]) == pytest.approx(0.3)
    assert np.isnan(normalised_auc([]))
    assert np.isnan(normalised_auc([0.7]))  # long-tail: fewer than two distinct x is undefined
    assert normalised_auc([0.7], single_point="value") == 0.7  # stream: one evaluation is its own area
    assert np.isnan(normalised_auc([0.2, 0.4], [1, 1]))
    assert normalised_auc([0.2, 0.4], [1, 1], single_point="value") == pytest.approx(0.3)
    with pytest.raises(InputError, match="x: expected 2"):
        normalised_auc([0.1, 0.2], [0, 1, 2])
    with pytest.raises(InputError, match="single_point"):
        normalised_auc([0.1, 0.2], single_point="zero")
    with pytest.raises(InputError, match="values"):
        normalised_auc([0.1, float("nan")])
