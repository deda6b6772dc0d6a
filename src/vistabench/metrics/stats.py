"""Significance tests for repeated runs (numpy/scipy only).

Welch's unequal-variance t-test decides the small-data table's italics (Brigato et al., Table 3:
"not significantly worse than the best one on a significance level of 5%").
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal, Mapping, Sequence

import numpy as np

from .._validation import check_array, check_value
from ..errors import InputError

__all__ = ["WelchResult", "welch_test", "welch_test_of_lists", "not_worse_than_best", "VARIANCE_RTOL"]

#: Relative tolerance below which a sample's standard deviation counts as zero (see :func:`welch_test`).
VARIANCE_RTOL = 1e-12

Alternative = Literal["two-sided", "less", "greater"]


@dataclass(frozen=True)
class WelchResult:
    """Welch's t-test of ``mean(a)`` against ``mean(b)``; NaN where undefined."""

    t: float
    df: float
    p: float
    mean_a: float
    mean_b: float
    n_a: int
    n_b: int
    alternative: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def welch_test(a: Any, b: Any, *, alternative: Alternative = "two-sided") -> WelchResult:
    """Welch's unequal-variance two-sample t-test.

    With sample means m, unbiased variances s² and sizes n::

        t  = (m_a − m_b) / sqrt(s_a²/n_a + s_b²/n_b)
        df = (s_a²/n_a + s_b²/n_b)² / ((s_a²/n_a)²/(n_a−1) + (s_b²/n_b)²/(n_b−1))   (Welch–Satterthwaite)
        p  = 2·P(T_df ≥ |t|)  (two-sided),  P(T_df ≤ t)  ("less"),  P(T_df ≥ t)  ("greater")

    Parameters
    ----------
    a, b : array-like of float, shape (n_a,), (n_b,)
        Scores of two methods (e.g. 30 balanced accuracies each). Must be finite.
    alternative : {"two-sided", "less", "greater"}
        The alternative hypothesis about ``mean(a) − mean(b)``.

    Returns
    -------
    WelchResult
        ``t``, ``df``, ``p`` are NaN when undefined: fewer than two samples in either group, or
        both groups without any variance (the statistic is 0/0 or ±x/0).

    Notes
    -----
    A group's variance counts as zero when its standard deviation is at most
    :data:`VARIANCE_RTOL` (1e-12) times the data's scale (the largest ``|x|`` over both groups): a
    constant list such as ``[0.9] * 3`` has a floating-point variance of about 1e-32, which would
    otherwise give t ≈ 1e15 and p ≈ 0 instead of "undefined".

    Examples
    --------
    >>> r = welch_test([1.0, 2.0, 3.0], [4.0, 5.0, 7.0])
    >>> round(r.t, 4), round(r.df, 4), round(r.p, 4)
    (-3.1623, 3.4483, 0.0419)
    """
    if alternative not in ("two-sided", "less", "greater"):
        raise InputError(f"alternative: expected 'two-sided', 'less' or 'greater', got {alternative!r}")
    xa = check_array(a, "a", ndim=1, kind="float")
    xb = check_array(b, "b", ndim=1, kind="float")
    na, nb = len(xa), len(xb)
    ma = float(xa.mean()) if na else float("nan")
    mb = float(xb.mean()) if nb else float("nan")
    nan = float("nan")
    if na < 2 or nb < 2:
        return WelchResult(nan, nan, nan, ma, mb, na, nb, alternative)
    scale = max(float(np.max(np.abs(xa))), float(np.max(np.abs(xb))))
    floor = (VARIANCE_RTOL * scale) ** 2  # variances at or below this are rounding noise
    va, vb = float(xa.var(ddof=1)), float(xb.var(ddof=1))
    va = 0.0 if va <= floor else va / na
    vb = 0.0 if vb <= floor else vb / nb
    se2 = va + vb
    if se2 == 0.0:
        return WelchResult(nan, nan, nan, ma, mb, na, nb, alternative)
    from scipy.stats import t as student_t

    t = (ma - mb) / math.sqrt(se2)
    df = se2 ** 2 / (va ** 2 / (na - 1) + vb ** 2 / (nb - 1))
    if alternative == "two-sided":
        p = 2.0 * float(student_t.sf(abs(t), df))
    elif alternative == "less":
        p = float(student_t.cdf(t, df))
    else:
        p = float(student_t.sf(t, df))
    return WelchResult(float(t), float(df), min(p, 1.0), ma, mb, na, nb, alternative)


def welch_test_of_lists(a: Any, b: Any, *, alternative: Alternative = "two-sided") -> WelchResult:
    """:func:`welch_test` of two lists of scores (e.g. read from JSON files), refusing what it cannot
    test instead of returning NaN: :class:`InputError` naming the list (``a``, ``b``) when it is not a
    list of numbers or holds fewer than 2 scores, or when neither list varies."""
    for name, v in (("a", a), ("b", b)):
        v = v.tolist() if isinstance(v, np.ndarray) else v
        if not isinstance(v, (list, tuple)) or not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                       for x in v):
            got = "a list with non-numbers" if isinstance(v, (list, tuple)) else type(v).__name__
            raise InputError(f"{name}: expected a list of numbers, got {got}")
        if len(v) < 2:
            raise InputError(f"{name}: {len(v)} score{'' if len(v) == 1 else 's'}; Welch's t-test needs at least 2 "
                             "per list (it estimates each list's variance)")
    r = welch_test(a, b, alternative=alternative)
    if math.isnan(r.t):
        raise InputError("neither `a` nor `b` varies (each is constant), so Welch's t-test is undefined "
                         "(t = 0/0 or x/0); compare the means directly")
    return r


def not_worse_than_best(
    groups: Mapping[str, Sequence[float]],
    *,
    alpha: float = 0.05,
    alternative: Literal["two-sided", "one-sided"] = "two-sided",
) -> dict[str, bool]:
    """Which groups are not significantly worse than the group with the best (highest) mean.

    For each group g ≠ best, Welch's test of best against g; g is "not significantly worse" when
    ``p ≥ alpha`` (or p is NaN, i.e. the test is undefined and cannot reject). The best group maps to
    True. ``"one-sided"`` tests the alternative mean(best) > mean(g).

    Parameters
    ----------
    groups : mapping name -> array-like of float, shape (n_g,)
        Finite scores per group; groups with no score are left out of the answer.
    alpha : float in [0, 1]
    alternative : {"two-sided", "one-sided"}

    Returns
    -------
    dict name -> bool

    Examples
    --------
    >>> not_worse_than_best({"a": [0.9, 0.91, 0.92], "b": [0.5, 0.52, 0.51], "c": [0.9, 0.8, 0.95]})
    {'a': True, 'b': False, 'c': True}
    """
    alpha = check_value(alpha, "alpha", low=0, high=1)
    if alternative not in ("two-sided", "one-sided"):
        raise InputError(f"alternative: expected 'two-sided' or 'one-sided', got {alternative!r}")
    arrays = {k: check_array(v, f"groups[{k!r}]", ndim=1, kind="float") for k, v in groups.items()}
    arrays = {k: v for k, v in arrays.items() if v.size}
    if not arrays:
        return {}
    best = max(arrays, key=lambda k: float(arrays[k].mean()))
    out: dict[str, bool] = {}
    for k, v in arrays.items():
        if k == best:
            out[k] = True
            continue
        r = welch_test(arrays[best], v, alternative="greater" if alternative == "one-sided" else "two-sided")
        out[k] = bool(math.isnan(r.p) or r.p >= alpha)
    return out
